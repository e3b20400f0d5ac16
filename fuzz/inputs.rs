//! How a fuzz target reads its input and checks what came out, for the targets whose input
//! takes more than one call to read. The targets include this file, and so does the stable
//! replay of the committed corpus (`tests/hostile/fuzz_corpus.rs`), so the two run the same
//! steps and the same checks. An `Err` is a failed check: the fuzz target panics with it, the
//! replay names the input.
#![allow(dead_code)]

use std::sync::Arc;

use gateway_dns::cmd::check::{check, to_github, to_json, to_text};
use gateway_dns::dns::provider::rfc2136::{
    ServerAddress, ZoneTransfer, read_answer, soa_serial_of,
};
use gateway_dns::engine::Config;
use gateway_dns::model::Object;
use gateway_dns::source::files::{Report, parse_text_into};
use gateway_dns::tsig::TsigKey;
use gateway_dns::webhook::review::{parse_with_serde, scan_review};
use hickory_proto::op::{Message, MessageType, OpCode, Query};
use hickory_proto::rr::{Name, RecordType, TSigVerifier};

/// `admission_review`: the webhook's scan, when it reads a body at all, reads it as the serde
/// readers do (the scan is the quick path; the serde readers are the reference).
pub fn scan_agrees(body: &[u8]) -> Result<(), String> {
    let Ok(text) = std::str::from_utf8(body) else {
        return Ok(());
    };
    let Some(scanned) = scan_review(text) else {
        return Ok(());
    };
    match parse_with_serde(text) {
        Ok(read) if read == scanned => Ok(()),
        other => Err(format!(
            "the scan read {scanned:?}, the serde readers {other:?}"
        )),
    }
}

/// `check_documents`: the text as `gateway-dns check` reads a file (`.json` as JSON, anything
/// else as YAML; the first character stands in for the file name), checked alone and laid over
/// `live` (as `check --kubeconfig` does), in every report format. `Ok(false)`: not a document
/// set `check` reads.
pub fn check_documents(data: &[u8], live: &[Object]) -> Result<bool, String> {
    let Ok(text) = std::str::from_utf8(data) else {
        return Ok(false);
    };
    let is_json = text.trim_start().starts_with(['{', '[']);
    let mut report = Report::default();
    if parse_text_into("input", text, is_json, &mut report).is_err() {
        return Ok(false);
    }
    let cfg = Arc::new(Config::default());
    for overlay in [None, Some(live.to_vec())] {
        let checked = check(
            cfg.clone(),
            report.objects.clone(),
            report.skipped.clone(),
            overlay,
        );
        let json = to_json(&checked);
        // The stable JSON interface must stay JSON whatever the input held.
        if let Err(error) = serde_json::from_str::<serde_json::Value>(&json) {
            return Err(format!(
                "check's JSON report does not parse: {error}\n{json}"
            ));
        }
        let _ = to_text(&checked, false);
        let _ = to_github(&checked);
    }
    Ok(true)
}

/// Bound on the messages read from one `rfc2136_answers` input, as the client bounds a transfer.
const MAX_MESSAGES: usize = 64;

/// `rfc2136_answers`: one flags byte (bit 0: the request was TSIG-signed, so the answers must
/// be too), the request id (2 bytes, big-endian), then the answers as they come over TCP, each
/// behind its 2-byte length. The first is read as the SOA answer a listing starts with (also
/// the shape of an UPDATE's answer), the rest as a zone transfer's messages. `Ok(true)` when
/// the SOA answer was read.
pub fn rfc2136_answers(data: &[u8]) -> Result<bool, String> {
    let [flags, id_high, id_low, rest @ ..] = data else {
        return Ok(false);
    };
    let request_id = u16::from_be_bytes([*id_high, *id_low]);
    let mut verifier = if flags & 1 == 1 {
        signed_request_verifier(request_id)
    } else {
        None
    };
    let server = ServerAddress::new("127.0.0.1", 53);
    let mut frames = Vec::new();
    let mut rest = rest;
    while let [high, low, tail @ ..] = rest {
        let len = usize::from(u16::from_be_bytes([*high, *low])).min(tail.len());
        let (frame, after) = tail.split_at(len);
        frames.push(frame);
        rest = after;
        if frames.len() == MAX_MESSAGES {
            break;
        }
    }
    let Some((first, transfer_frames)) = frames.split_first() else {
        return Ok(false);
    };
    let soa_read = match read_answer(&server, first, request_id, verifier.as_mut(), "SOA query") {
        Ok(answer) => {
            let _ = soa_serial_of(&answer);
            true
        }
        Err(_) => false,
    };
    let mut transfer = ZoneTransfer::new();
    for frame in transfer_frames {
        let Ok(message) = read_answer(&server, frame, request_id, verifier.as_mut(), "AXFR") else {
            return Ok(soa_read);
        };
        if transfer.absorb(message).is_some() {
            break;
        }
    }
    match transfer.endpoints().iter().find(|e| e.targets.is_empty()) {
        Some(endpoint) => Err(format!("an RRset without records: {endpoint}")),
        None => Ok(soa_read),
    }
}

/// The verifier of a request signed at a fixed time, so that a signed input replays the same.
fn signed_request_verifier(id: u16) -> Option<TSigVerifier> {
    let key = TsigKey::from_base64(
        "update",
        "hmac-sha256".parse().ok()?,
        "c2VjcmV0LWZvci10aGUtZnV6emVy",
    )
    .ok()?;
    let signer = key.signer().ok()?;
    let mut query = Message::new(id, MessageType::Query, OpCode::Query);
    query.add_query(Query::query(
        Name::from_ascii("example.com.").ok()?,
        RecordType::AXFR,
    ));
    query.finalize(&signer, 1_767_225_600).ok()?
}
