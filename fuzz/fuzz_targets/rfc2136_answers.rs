//! RFC 2136 / AXFR answers → the rfc2136 client's reading of them: the SOA answer a listing
//! starts with (also the shape of an UPDATE's answer), then a zone transfer's messages.
//!
//! Input: one flags byte (bit 0: the request was TSIG-signed, so the answers must be too),
//! the request id (2 bytes, big-endian), then the answers as they come over TCP, each behind
//! its 2-byte length.
#![no_main]

use gateway_dns::dns::rfc2136::{ServerAddress, TsigKey, ZoneTransfer, read_answer, soa_serial_of};
use hickory_proto::op::{Message, MessageType, OpCode, Query};
use hickory_proto::rr::{Name, RecordType};
use libfuzzer_sys::fuzz_target;

/// Bound on the messages read from one input, as the client bounds a transfer.
const MAX_MESSAGES: usize = 64;

/// The verifier of a request signed at a fixed time, so that a signed input replays the same.
fn signed_request_verifier(id: u16) -> Option<hickory_proto::rr::TSigVerifier> {
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

fuzz_target!(|data: &[u8]| {
    let [flags, id_high, id_low, rest @ ..] = data else {
        return;
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
        return;
    };
    if let Ok(answer) = read_answer(&server, first, request_id, verifier.as_mut(), "SOA query") {
        let _ = soa_serial_of(&answer);
    }
    let mut transfer = ZoneTransfer::new();
    for frame in transfer_frames {
        let Ok(message) = read_answer(&server, frame, request_id, verifier.as_mut(), "AXFR") else {
            return;
        };
        if transfer.absorb(message).is_some() {
            break;
        }
    }
    for endpoint in transfer.endpoints() {
        assert!(
            !endpoint.targets.is_empty(),
            "an RRset without records: {endpoint}"
        );
    }
});
