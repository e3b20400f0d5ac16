//! TSIG on requests and answers (RFC 8945): whether a request is signed with our key and in
//! time, and the signatures of the answer's messages (one or a transfer's several).

use hickory_proto::op::Message;
use hickory_proto::rr::rdata::tsig::{TSIG, TsigError, make_tsig_record};
use hickory_proto::rr::{Name, Record, TSigResponseContext, TSigner};

/// What the TSIG of a request says.
pub(super) enum Auth {
    Unsigned,
    /// Signed with our key, in time: the request MAC, which the answer's MAC covers.
    Signed {
        mac: Vec<u8>,
    },
    /// NOTAUTH with this TSIG error (RFC 8945 5.2).
    Rejected(Rejection),
}

pub(super) enum Rejection {
    UnknownKey(Name),
    BadSig,
    BadTime { mac: Vec<u8> },
}

pub(super) fn authenticate(
    raw: &[u8],
    request: &Message,
    signer: Option<&TSigner>,
    now: u64,
) -> Auth {
    let Some(tsig) = request.signature() else {
        return Auth::Unsigned;
    };
    let Some(signer) =
        signer.filter(|s| s.signer_name() == &tsig.name && s.algorithm() == &tsig.data.algorithm)
    else {
        return Auth::Rejected(Rejection::UnknownKey(tsig.name.clone()));
    };
    match signer.verify_message_byte(raw, None, true) {
        Err(_) => Auth::Rejected(Rejection::BadSig),
        Ok((mac, _, window)) if window.start <= now && now <= window.end => Auth::Signed { mac },
        Ok((mac, _, _)) => Auth::Rejected(Rejection::BadTime { mac }),
    }
}

/// Encode the messages of one answer, each TSIG-signed when the request was (RFC 8945 5.3.1:
/// the first covers the request MAC, each next one the MAC before it and the timers only).
pub(super) fn seal_all(
    messages: Vec<Message>,
    auth: &Auth,
    signer: Option<&TSigner>,
    id: u16,
    now: u64,
) -> Option<Vec<Vec<u8>>> {
    let mut encoded = Vec::with_capacity(messages.len());
    let mut previous_mac: Option<Vec<u8>> = None;
    for mut message in messages {
        let bytes = message.to_vec().ok()?;
        let tsig = match (auth, signer) {
            (Auth::Unsigned, _) => None,
            (Auth::Rejected(Rejection::UnknownKey(name)), _) => {
                Some(TSigResponseContext::unknown_key(id, now, name.clone()).sign(&bytes))
            }
            (Auth::Rejected(_), None) | (Auth::Signed { .. }, None) => None,
            (Auth::Rejected(Rejection::BadSig), Some(signer)) => {
                Some(TSigResponseContext::bad_signature(id, now, signer.clone()).sign(&bytes))
            }
            (Auth::Rejected(Rejection::BadTime { mac }), Some(signer)) => Some(
                TSigResponseContext::new(
                    id,
                    now,
                    signer.clone(),
                    mac.clone(),
                    Some(TsigError::BadTime),
                )
                .sign(&bytes),
            ),
            (Auth::Signed { mac }, Some(signer)) => match &previous_mac {
                None => Some(
                    TSigResponseContext::new(id, now, signer.clone(), mac.clone(), None)
                        .sign(&bytes),
                ),
                Some(previous) => Some(sign_continuation(signer, previous, &bytes, id, now)),
            },
        };
        if let Some(tsig) = tsig {
            let tsig = tsig.ok()?;
            previous_mac = Some(tsig.data.mac.clone());
            message.set_signature(tsig);
            encoded.push(message.to_vec().ok()?);
        } else {
            encoded.push(bytes);
        }
    }
    Some(encoded)
}

/// The TSIG of a message after the first of a multi-message answer (RFC 8945 5.3.1): its MAC
/// covers the previous MAC, the message and the timers (time signed, fudge).
pub(super) fn sign_continuation(
    signer: &TSigner,
    previous_mac: &[u8],
    message: &[u8],
    id: u16,
    now: u64,
) -> Result<Box<Record<TSIG>>, hickory_proto::ProtoError> {
    let previous_len = u16::try_from(previous_mac.len())
        .map_err(|_| hickory_proto::ProtoError::from("TSIG MAC over 64 KiB"))?;
    let mut tbs = Vec::with_capacity(previous_mac.len() + message.len() + 10);
    tbs.extend_from_slice(&previous_len.to_be_bytes());
    tbs.extend_from_slice(previous_mac);
    tbs.extend_from_slice(message);
    tbs.extend_from_slice(&now.to_be_bytes()[2..]);
    tbs.extend_from_slice(&signer.fudge().to_be_bytes());
    let mac = signer
        .sign(&tbs)
        .map_err(|e| hickory_proto::ProtoError::from(e.to_string()))?;
    let tsig = TSIG::new(
        signer.algorithm().clone(),
        now,
        signer.fudge(),
        mac,
        id,
        None,
        Vec::new(),
    );
    Ok(Box::new(make_tsig_record(
        signer.signer_name().clone(),
        tsig,
    )))
}
