//! The AdmissionReview envelope and the seam between transport and decision.
//!
//! The server decodes the envelope (`admission.k8s.io/v1` `AdmissionReview`), hands the
//! `request` member to an [`AdmissionHandler`], and encodes its [`Verdict`] as the response
//! that kube-apiserver expects. Nothing here knows about Gateway API rules.

use serde_json::{Map, Value, json};

pub const API_VERSION: &str = "admission.k8s.io/v1";
pub const KIND: &str = "AdmissionReview";
/// kube-apiserver ignores warnings past 4096 characters in total; we never send more.
pub const MAX_WARNINGS_BYTES: usize = 4096;

/// Decides on one admission request. Implemented by the admission module (the rule engine) and
/// by test doubles.
pub trait AdmissionHandler: Send + Sync + 'static {
    /// `request` is the AdmissionReview's `request` member, already checked to be an object with
    /// a string `uid`. Called on the blocking pool (or, when [`Self::is_quick`], on the request's
    /// own task); must not block for long: the server
    /// answers "allowed" with an `EvaluationTimeout` warning once the admission deadline passes.
    fn handle(&self, request: &Value) -> Verdict;

    /// True when deciding `request` is quick and bounded (microseconds): the server then runs
    /// it on the request's own task instead of the blocking pool. Default: not quick.
    fn is_quick(&self, _request: &Value) -> bool {
        false
    }
}

impl<F> AdmissionHandler for F
where
    F: Fn(&Value) -> Verdict + Send + Sync + 'static,
{
    fn handle(&self, request: &Value) -> Verdict {
        self(request)
    }
}

/// The answer to one admission request.
///
/// `denial` is rendered only when `allowed` is false; a refusal without `denial` gets a generic
/// message. Warnings are sent as given (the handler prefixes each with `Reason: `), limited to
/// [`MAX_WARNINGS_BYTES`] in total by [`limit_warnings`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub allowed: bool,
    pub warnings: Vec<String>,
    pub denial: Option<Denial>,
}

impl Verdict {
    pub fn allow() -> Self {
        Self {
            allowed: true,
            warnings: Vec::new(),
            denial: None,
        }
    }

    pub fn allow_with_warnings(warnings: Vec<String>) -> Self {
        Self {
            allowed: true,
            warnings,
            denial: None,
        }
    }

    pub fn deny(denial: Denial, warnings: Vec<String>) -> Self {
        Self {
            allowed: false,
            warnings,
            denial: Some(denial),
        }
    }
}

/// Why a request is refused: `message` is `status.message` (one line per denying finding),
/// `causes` become `status.details.causes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    pub message: String,
    pub causes: Vec<Cause>,
}

/// One denying finding: `reason` is ours (e.g. `HostnameConflict`), `field` the object path
/// (e.g. `spec.hostnames[1]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    pub reason: String,
    pub field: String,
    pub message: String,
}

/// Envelope problems; each maps to HTTP 400.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("request body is not valid JSON: {0}")]
    NotJson(#[from] serde_json::Error),
    #[error("request body is not a JSON object")]
    NotAnObject,
    #[error("apiVersion must be \"{API_VERSION}\", got {0}")]
    WrongApiVersion(String),
    #[error("kind must be \"{KIND}\", got {0}")]
    WrongKind(String),
    #[error("AdmissionReview has no \"request\" object")]
    MissingRequest,
    #[error("AdmissionReview request has no string \"uid\"")]
    MissingUid,
}

/// A decoded AdmissionReview: the `request` member and its `uid`.
#[derive(Debug, Clone, PartialEq)]
pub struct ReviewRequest {
    pub uid: String,
    pub request: Value,
}

/// Decodes and checks an AdmissionReview body.
pub fn parse_review(body: &[u8]) -> Result<ReviewRequest, Error> {
    let value: Value = serde_json::from_slice(body)?;
    let Value::Object(mut review) = value else {
        return Err(Error::NotAnObject);
    };
    match review.get("apiVersion") {
        Some(Value::String(version)) if version == API_VERSION => {}
        other => return Err(Error::WrongApiVersion(describe(other))),
    }
    match review.get("kind") {
        Some(Value::String(kind)) if kind == KIND => {}
        other => return Err(Error::WrongKind(describe(other))),
    }
    let request = match review.remove("request") {
        Some(request @ Value::Object(_)) => request,
        _ => return Err(Error::MissingRequest),
    };
    let uid = match request.get("uid") {
        Some(Value::String(uid)) => uid.clone(),
        _ => return Err(Error::MissingUid),
    };
    Ok(ReviewRequest { uid, request })
}

fn describe(value: Option<&Value>) -> String {
    match value {
        None => "nothing".to_string(),
        Some(value) => {
            let mut text = value.to_string();
            if text.len() > 64 {
                let cut = (0..=64)
                    .rev()
                    .find(|index| text.is_char_boundary(*index))
                    .unwrap_or(0);
                text.truncate(cut);
                text.push('…');
            }
            text
        }
    }
}

/// Encodes the AdmissionReview response for `uid`.
pub fn review_response(uid: &str, verdict: &Verdict) -> Value {
    let mut response = Map::new();
    response.insert("uid".into(), Value::String(uid.to_string()));
    response.insert("allowed".into(), Value::Bool(verdict.allowed));
    response.insert(
        "warnings".into(),
        Value::from(limit_warnings(&verdict.warnings)),
    );
    if !verdict.allowed {
        response.insert("status".into(), denial_status(verdict.denial.as_ref()));
    }
    json!({
        "apiVersion": API_VERSION,
        "kind": KIND,
        "response": response,
    })
}

fn denial_status(denial: Option<&Denial>) -> Value {
    let (message, causes) = match denial {
        Some(denial) => (denial.message.as_str(), denial.causes.as_slice()),
        None => ("denied by gateway-dns", &[][..]),
    };
    let causes: Vec<Value> = causes
        .iter()
        .map(|cause| {
            json!({
                "reason": cause.reason,
                "field": cause.field,
                "message": cause.message,
            })
        })
        .collect();
    json!({
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": "Forbidden",
        "code": 403,
        "details": { "causes": causes },
    })
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

    fn review(request: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({"apiVersion": API_VERSION, "kind": KIND, "request": request}))
            .unwrap()
    }

    #[test]
    fn parse_review_checks_the_envelope() {
        let parsed = parse_review(&review(json!({"uid": "abc", "operation": "CREATE"}))).unwrap();
        assert_eq!(parsed.uid, "abc");
        assert_eq!(parsed.request["operation"], "CREATE");

        assert!(matches!(parse_review(b"{nope"), Err(Error::NotJson(_))));
        assert!(matches!(parse_review(b"[1]"), Err(Error::NotAnObject)));
        assert!(matches!(
            parse_review(br#"{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"a"}}"#),
            Err(Error::WrongApiVersion(_))
        ));
        assert!(matches!(
            parse_review(
                br#"{"apiVersion":"admission.k8s.io/v1","kind":"Pod","request":{"uid":"a"}}"#
            ),
            Err(Error::WrongKind(_))
        ));
        assert!(matches!(
            parse_review(br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#),
            Err(Error::MissingRequest)
        ));
        assert!(matches!(
            parse_review(&review(json!({"uid": 7}))),
            Err(Error::MissingUid)
        ));
    }

    #[test]
    fn allowed_response_has_no_status_and_denial_has_forbidden_status() {
        let allowed = review_response("u1", &Verdict::allow_with_warnings(vec!["A: b".into()]));
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
        let denied = review_response("u2", &Verdict::deny(denial, vec![]));
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
