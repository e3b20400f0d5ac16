//! The AdmissionReview response: written by hand from a [`AdmissionAnswer`] on every answer, with the
//! warnings kept within what kube-apiserver accepts.

use std::borrow::Cow;

use serde::Serialize;
use serde_json::Value;

use super::review::{API_VERSION, AdmissionAnswer, Cause, KIND};

/// kube-apiserver ignores warnings past 4096 characters in total; we never send more.
pub const MAX_WARNINGS_BYTES: usize = 4096;

/// The response document, serialized straight from the answer.
#[derive(Serialize)]
struct ReviewOut<'a> {
    #[serde(rename = "apiVersion")]
    api_version: &'static str,
    kind: &'static str,
    response: ResponseOut<'a>,
}

#[derive(Serialize)]
struct ResponseOut<'a> {
    uid: &'a str,
    allowed: bool,
    warnings: Cow<'a, [String]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<StatusOut<'a>>,
}

/// A `metav1.Status` of a denial.
#[derive(Serialize)]
struct StatusOut<'a> {
    metadata: EmptyObject,
    status: &'static str,
    message: &'a str,
    reason: &'static str,
    code: u16,
    details: DetailsOut<'a>,
}

#[derive(Serialize)]
struct EmptyObject {}

#[derive(Serialize)]
struct DetailsOut<'a> {
    causes: &'a [Cause],
}

fn review_out<'a>(uid: &'a str, answer: &'a AdmissionAnswer) -> ReviewOut<'a> {
    let status = (!answer.allowed).then(|| {
        let (message, causes) = denial_parts(answer);
        StatusOut {
            metadata: EmptyObject {},
            status: "Failure",
            message,
            reason: "Forbidden",
            code: 403,
            details: DetailsOut { causes },
        }
    });
    ReviewOut {
        api_version: API_VERSION,
        kind: KIND,
        response: ResponseOut {
            uid,
            allowed: answer.allowed,
            warnings: limited_warnings(&answer.warnings),
            status,
        },
    }
}

/// The AdmissionReview response for `uid`, as the JSON body to send: the same document as
/// [`review_response`], written by hand. It goes out with every answer, and the fixed parts
/// need no escaping, which a serializer would check byte by byte each time.
pub fn encode_review_response(uid: &str, answer: &AdmissionAnswer) -> Vec<u8> {
    let mut out = Vec::new();
    encode_review_response_into(&mut out, uid, answer);
    out
}

/// [`encode_review_response`] appended to `out`, so that a caller can write every answer into
/// one buffer it keeps (the server keeps one per thread) instead of a new one each time.
pub fn encode_review_response_into(out: &mut Vec<u8>, uid: &str, answer: &AdmissionAnswer) {
    let warnings = limited_warnings(&answer.warnings);
    // Sized up front from the texts, which dominate the answer (a denial's causes repeat its
    // message): growing the buffer step by step cost more than writing it.
    let texts = warnings.iter().map(String::len).sum::<usize>()
        + answer
            .denial
            .as_ref()
            .map_or(0, |denial| 2 * denial.message.len());
    out.reserve(256 + uid.len() + texts + texts / 4);
    out.extend_from_slice(b"{\"apiVersion\":");
    push_json_str(out, API_VERSION);
    out.extend_from_slice(b",\"kind\":");
    push_json_str(out, KIND);
    out.extend_from_slice(b",\"response\":{\"uid\":");
    push_json_str(out, uid);
    out.extend_from_slice(if answer.allowed {
        b",\"allowed\":true,\"warnings\":["
    } else {
        b",\"allowed\":false,\"warnings\":["
    });
    for (i, warning) in warnings.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        push_json_str(out, warning);
    }
    out.push(b']');
    if !answer.allowed {
        let (message, causes) = denial_parts(answer);
        out.extend_from_slice(b",\"status\":{\"metadata\":{},\"status\":\"Failure\",\"message\":");
        push_json_str(out, message);
        out.extend_from_slice(b",\"reason\":\"Forbidden\",\"code\":403,\"details\":{\"causes\":[");
        for (i, cause) in causes.iter().enumerate() {
            out.extend_from_slice(if i > 0 {
                b",{\"reason\":"
            } else {
                b"{\"reason\":"
            });
            push_json_str(out, &cause.reason);
            out.extend_from_slice(b",\"field\":");
            push_json_str(out, &cause.field);
            out.extend_from_slice(b",\"message\":");
            push_json_str(out, &cause.message);
            out.push(b'}');
        }
        out.extend_from_slice(b"]}}");
    }
    out.extend_from_slice(b"}}");
}

/// `status.message` and `status.details.causes` of a refusal (a generic message without a
/// denial).
fn denial_parts(answer: &AdmissionAnswer) -> (&str, &[Cause]) {
    match &answer.denial {
        Some(denial) => (denial.message.as_str(), denial.causes.as_slice()),
        None => ("denied by gateway-dns", &[]),
    }
}

/// Appends `text` as a JSON string: quotes, backslashes and control characters escaped, the
/// rest (UTF-8 included) copied in runs. Clean stretches are found eight bytes at a time.
fn push_json_str(out: &mut Vec<u8>, text: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes = text.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let mut run_start = 0;
    let mut i = 0;
    while i < bytes.len() {
        if let Some(chunk) = bytes.get(i..i + 8)
            && let Ok(chunk) = <[u8; 8]>::try_from(chunk)
            && !chunk_needs_escape(u64::from_le_bytes(chunk))
        {
            i += 8;
            continue;
        }
        let byte = bytes[i];
        let escape: &[u8] = match byte {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x08 => b"\\b",
            0x0c => b"\\f",
            0x00..=0x1f => &[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(byte >> 4)],
                HEX[usize::from(byte & 0xf)],
            ],
            _ => {
                i += 1;
                continue;
            }
        };
        out.extend_from_slice(&bytes[run_start..i]);
        out.extend_from_slice(escape);
        i += 1;
        run_start = i;
    }
    out.extend_from_slice(&bytes[run_start..]);
    out.push(b'"');
}

/// Whether any of the eight bytes is a quote, a backslash or a control character (below 0x20).
/// The classic "has a zero byte" test: exact about whether one exists, not about which.
fn chunk_needs_escape(chunk: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH_BITS: u64 = 0x8080_8080_8080_8080;
    let has_zero = |word: u64| word.wrapping_sub(ONES) & !word & HIGH_BITS;
    let below_space = chunk.wrapping_sub(ONES * 0x20) & !chunk & HIGH_BITS;
    (has_zero(chunk ^ (ONES * u64::from(b'"')))
        | has_zero(chunk ^ (ONES * u64::from(b'\\')))
        | below_space)
        != 0
}

/// The same response as a JSON tree (for tests and tools).
pub fn review_response(uid: &str, answer: &AdmissionAnswer) -> Value {
    serde_json::to_value(review_out(uid, answer)).unwrap_or(Value::Null)
}

/// The warnings as sent: borrowed when they fit, else limited by [`limit_warnings`].
fn limited_warnings(warnings: &[String]) -> Cow<'_, [String]> {
    let total: usize = warnings.iter().map(String::len).sum();
    if total <= MAX_WARNINGS_BYTES {
        Cow::Borrowed(warnings)
    } else {
        Cow::Owned(limit_warnings(warnings))
    }
}

/// Keeps warnings in order while their total length (UTF-8 bytes, which is never less than the
/// character count) stays within [`MAX_WARNINGS_BYTES`]. When some must be dropped, the tail is
/// replaced by a final `... N more warnings` line, and the total including it still fits.
pub fn limit_warnings(warnings: &[String]) -> Vec<String> {
    let total: usize = warnings.iter().map(String::len).sum();
    if total <= MAX_WARNINGS_BYTES {
        return warnings.to_vec();
    }
    let mut kept_bytes = 0;
    let mut prefix_bytes = Vec::with_capacity(warnings.len());
    for warning in warnings {
        prefix_bytes.push(kept_bytes);
        kept_bytes += warning.len();
    }
    // Longest prefix that leaves room for the summary line of what it drops.
    for kept in (0..warnings.len()).rev() {
        let summary = more_warnings_line(warnings.len() - kept);
        if prefix_bytes[kept] + summary.len() <= MAX_WARNINGS_BYTES {
            let mut limited = warnings[..kept].to_vec();
            limited.push(summary);
            return limited;
        }
    }
    vec![more_warnings_line(warnings.len())]
}

fn more_warnings_line(dropped: usize) -> String {
    if dropped == 1 {
        "... 1 more warning".to_string()
    } else {
        format!("... {dropped} more warnings")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::webhook::review::Denial;
    use serde_json::json;

    #[test]
    fn the_encoded_response_is_the_response_tree() {
        let cause = |reason: &str, field: &str, message: &str| Cause {
            reason: reason.into(),
            field: field.into(),
            message: message.into(),
        };
        let one_cause = Denial {
            message: "x is taken".into(),
            causes: vec![cause("HostnameConflict", "spec.hostnames[0]", "x is taken")],
        };
        let two_causes = Denial {
            message: "a\nb".into(),
            causes: vec![
                cause("HostnameConflict", "spec.hostnames[0]", "a"),
                cause(
                    "NoMatchingListenerHostname",
                    "spec.hostnames[1]",
                    "b \\ \"c\"",
                ),
            ],
        };
        let refusal_without_denial = AdmissionAnswer {
            allowed: false,
            warnings: Vec::new(),
            denial: None,
        };
        let every_escape: String = (0u8..0x20)
            .map(char::from)
            .chain("\"\\/é€😀".chars())
            .collect();
        let over_the_limit = vec!["W: ".to_string() + &"x".repeat(3000); 3];
        for answer in [
            AdmissionAnswer::allow(),
            AdmissionAnswer::allow_with_warnings(vec!["A: \"quoted\" é".into()]),
            AdmissionAnswer::allow_with_warnings(vec![every_escape.clone(), String::new()]),
            AdmissionAnswer::allow_with_warnings(over_the_limit),
            AdmissionAnswer::deny(one_cause, vec!["W: w".into()]),
            AdmissionAnswer::deny(two_causes, Vec::new()),
            refusal_without_denial,
        ] {
            for uid in ["u\"1", "", every_escape.as_str()] {
                let bytes = encode_review_response(uid, &answer);
                let parsed: Value = serde_json::from_slice(&bytes).unwrap();
                assert_eq!(parsed, review_response(uid, &answer), "{answer:?}");
                assert_eq!(parsed["response"]["uid"], uid);
            }
        }
    }

    #[test]
    fn json_strings_are_escaped_at_every_offset() {
        let specials = [
            '"', '\\', '\n', '\u{0}', '\u{1f}', '\u{7f}', 'é', '😀', ' ', '~',
        ];
        for len in 0..20 {
            for at in 0..len.max(1) {
                for special in specials {
                    let text: String = (0..len)
                        .map(|k| if k == at { special } else { 'a' })
                        .collect();
                    let mut out = Vec::new();
                    push_json_str(&mut out, &text);
                    let back: String = serde_json::from_slice(&out).unwrap();
                    assert_eq!(back, text);
                }
            }
        }
        for word in [
            *b"abcdefgh",
            *b"ABC~\x7f xy",
            [0xc3, 0xa9, b'a', b'b', 0xe2, 0x82, 0xac, b'z'],
        ] {
            assert!(!chunk_needs_escape(u64::from_le_bytes(word)), "{word:?}");
        }
        for special in [b'"', b'\\', 0, 0x1f, b'\n'] {
            for at in 0..8 {
                let mut word = *b"abcdefgh";
                word[at] = special;
                assert!(chunk_needs_escape(u64::from_le_bytes(word)), "{word:?}");
            }
        }
    }

    #[test]
    fn allowed_response_has_no_status_and_denial_has_forbidden_status() {
        let allowed = review_response(
            "u1",
            &AdmissionAnswer::allow_with_warnings(vec!["A: b".into()]),
        );
        assert_eq!(allowed["response"]["uid"], "u1");
        assert_eq!(allowed["response"]["allowed"], true);
        assert_eq!(allowed["response"]["warnings"], json!(["A: b"]));
        assert!(allowed["response"].get("status").is_none());

        let denial = Denial {
            message: "x is taken".into(),
            causes: vec![Cause {
                reason: "HostnameConflict".into(),
                field: "spec.hostnames[0]".into(),
                message: "x is taken".into(),
            }],
        };
        let denied = review_response("u2", &AdmissionAnswer::deny(denial, vec![]));
        let status = &denied["response"]["status"];
        assert_eq!(denied["response"]["allowed"], false);
        assert_eq!(status["code"], 403);
        assert_eq!(status["reason"], "Forbidden");
        assert_eq!(status["details"]["causes"][0]["reason"], "HostnameConflict");
        assert_eq!(status["details"]["causes"][0]["field"], "spec.hostnames[0]");
    }

    #[test]
    fn warnings_within_the_limit_are_kept_verbatim() {
        let warnings: Vec<String> = (0..40).map(|index| format!("R: {index:0>97}")).collect();
        assert_eq!(warnings.iter().map(String::len).sum::<usize>(), 4000);
        assert_eq!(limit_warnings(&warnings), warnings);
    }

    #[test]
    fn warnings_over_the_limit_end_with_a_count_and_fit() {
        let warnings: Vec<String> = (0..100).map(|index| format!("R: {index:0>97}")).collect();
        let limited = limit_warnings(&warnings);
        let total: usize = limited.iter().map(String::len).sum();
        assert!(total <= MAX_WARNINGS_BYTES, "{total}");
        let kept = limited.len() - 1;
        assert_eq!(&limited[..kept], &warnings[..kept]);
        assert_eq!(limited[kept], format!("... {} more warnings", 100 - kept));
        // Keeping one more warning (with its own, shorter summary) would not fit.
        let one_more: usize = warnings[..=kept].iter().map(String::len).sum::<usize>()
            + more_warnings_line(100 - kept - 1).len();
        assert!(one_more > MAX_WARNINGS_BYTES);
    }

    #[test]
    fn a_single_huge_warning_becomes_a_count() {
        let limited = limit_warnings(&["W: ".repeat(2000)]);
        assert_eq!(limited, vec!["... 1 more warning".to_string()]);
    }
}
