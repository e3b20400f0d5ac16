//! The webhook's handler: reads what an AdmissionReview asks into a change for the engine's
//! admission rules ([`crate::engine::admission`]) and turns their decision into the envelope's
//! answer. The one file of the webhook that knows the engine; no HTTP and no rules here.

use std::sync::Arc;

use super::review::{
    AdmissionAnswer, AdmissionHandler, AdmissionRequest, Cause, Denial, Operation, ReviewObject,
};
use crate::engine::admission::{self, Decision, WhatIf, denial_message, denies};
use crate::engine::{Action, Finding, World};
use crate::index::Index;
use crate::metrics::{EvaluationErrorKind, Metrics};
use crate::model::{DecodeError, Object, ObjectKind, Route};

/// A route decided inline has at most this many hostnames (spec plus annotation entries)...
const QUICK_MAX_HOSTNAMES: usize = 32;
/// ...and at most this many parentRefs: its decision then takes microseconds.
const QUICK_MAX_PARENT_REFS: usize = 8;

/// Small enough to decide on the request's own task (see `is_quick`).
fn is_small_route(cfg: &crate::engine::Config, route: &Route) -> bool {
    let annotated = cfg
        .annotation(&route.meta.annotations, "hostname")
        .map_or(0, |list| list.matches(',').count() + 1);
    route.parent_refs.len() <= QUICK_MAX_PARENT_REFS
        && route.hostnames.len() + annotated <= QUICK_MAX_HOSTNAMES
}

/// What a request asks of the rules.
enum Asked<'r> {
    /// Judge `object`, as a replacement of `old` on UPDATE.
    Change {
        object: &'r Object,
        old: Option<&'r Object>,
    },
    /// Nothing to judge: DELETE and CONNECT (removing a claim never breaks DNS rules), or no
    /// object of a kind gateway-dns reads.
    Nothing,
    /// The object could not be read; it is allowed without DNS checks.
    Unreadable(&'r DecodeError),
}

fn asked<'r>(request: &'r AdmissionRequest<'_>) -> Asked<'r> {
    let operation = request.operation;
    if !matches!(operation, Operation::Create | Operation::Update) {
        return Asked::Nothing;
    }
    let object = match &request.object {
        None | Some(Ok(None)) => return Asked::Nothing,
        Some(Ok(Some(object))) => object,
        Some(Err(error)) => return Asked::Unreadable(error),
    };
    // An unreadable old object only loses the "pre-existing" downgrade; judge the new one.
    let old = match &request.old_object {
        Some(Ok(Some(old))) if operation == Operation::Update => Some(old),
        _ => None,
    };
    Asked::Change { object, old }
}

/// Decides one AdmissionReview request over `world`.
pub fn decide_request<W: WhatIf>(world: &W, request: &AdmissionRequest<'_>) -> Decision {
    match asked(request) {
        Asked::Change { object, old } => admission::decide(world, object, old),
        Asked::Nothing => Decision::allow(),
        Asked::Unreadable(error) => unreadable(&error.to_string()),
    }
}

fn unreadable(message: &str) -> Decision {
    Decision {
        allowed: true,
        warnings: vec![format!(
            "EvaluationError: gateway-dns could not read this object ({message}); allowed without DNS checks"
        )],
        ..Decision::default()
    }
}

/// The webhook's handler: decides each request on the index's current snapshot.
pub struct EngineHandler {
    index: Index,
    metrics: Arc<Metrics>,
}

impl EngineHandler {
    pub fn new(index: Index, metrics: Arc<Metrics>) -> EngineHandler {
        EngineHandler { index, metrics }
    }
}

/// The envelope's answer for a decision (its denying findings move into the causes).
pub fn answer(decision: Decision) -> AdmissionAnswer {
    if decision.allowed {
        return AdmissionAnswer::allow_with_warnings(decision.warnings);
    }
    let denials: Vec<Finding> = decision.findings.into_iter().filter(denies).collect();
    let message = denial_message(denials.iter());
    let causes = denials
        .into_iter()
        .map(|v| Cause {
            reason: v.reason.to_string(),
            field: v.field,
            message: v.message,
        })
        .collect();
    AdmissionAnswer::deny(Denial { message, causes }, decision.warnings)
}

impl AdmissionHandler for EngineHandler {
    /// DELETE costs nothing, and a small route costs O(its names) against the index:
    /// microseconds, decided on the request's task (still within a slot). A big route, and any
    /// Gateway or ListenerSet change (which re-evaluates every attached route), goes to the
    /// blocking pool under the deadline.
    fn is_quick(&self, request: &AdmissionRequest<'_>) -> bool {
        if request.operation == Operation::Delete {
            return true;
        }
        let small = |object: Option<&ReviewObject>| match object {
            None | Some(Ok(None)) => true,
            // Read in place: taking the snapshot (a shared count) would move a cache line
            // between cores on every review.
            Some(Ok(Some(Object::Route(route)))) => self
                .index
                .read(|snapshot| is_small_route(snapshot.config(), route)),
            Some(Ok(Some(_))) | Some(Err(_)) => false,
        };
        ObjectKind::from_kind_name(&request.kind.kind).is_some_and(|k| k.is_route())
            && small(request.object.as_ref())
            && small(request.old_object.as_ref())
    }

    fn handle(&self, request: &AdmissionRequest<'_>) -> AdmissionAnswer {
        let decision = match asked(request) {
            Asked::Change { object, old } => self
                .index
                .read(|snapshot| admission::decide(snapshot, object, old)),
            Asked::Nothing => Decision::allow(),
            Asked::Unreadable(error) => {
                let why = error.to_string();
                self.metrics
                    .record_evaluation_error(EvaluationErrorKind::Unreadable);
                tracing::warn!(error = %why, "could not read the object under review; allowed");
                unreadable(&why)
            }
        };
        for finding in &decision.findings {
            self.metrics.record_finding(finding.reason, finding.action);
            if finding.action == Action::Audit {
                tracing::info!(object = %finding.object, reason = %finding.reason, "audit finding: {}", finding.message);
            }
        }
        if !decision.allowed {
            // One line per denying finding, at INFO: the denied apply is otherwise seen only by
            // whoever ran it (and not at all behind a GitOps controller).
            for finding in decision.findings.iter().filter(|f| denies(f)) {
                tracing::info!(
                    uid = %request.uid,
                    operation = ?request.operation,
                    dry_run = request.dry_run,
                    object = %finding.object,
                    reason = %finding.reason,
                    hostname = finding.hostname.as_deref().unwrap_or(""),
                    "admission denied: {}",
                    finding.message
                );
            }
        }
        answer(decision)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn routes_and_deletes_are_quick_parents_are_not() {
        let handler = EngineHandler::new(Index::new(), Default::default());
        let request = |request: serde_json::Value| {
            AdmissionRequest::from_value(&request).expect("a request with a uid")
        };
        let typed = |operation: &str, kind: &str| {
            request(json!({"uid": "u", "operation": operation, "kind": {"kind": kind}}))
        };
        assert!(handler.is_quick(&typed("CREATE", "HTTPRoute")));
        assert!(handler.is_quick(&typed("UPDATE", "UDPRoute")));
        assert!(handler.is_quick(&typed("DELETE", "Gateway")));
        assert!(!handler.is_quick(&typed("UPDATE", "Gateway")));
        assert!(!handler.is_quick(&typed("CREATE", "ListenerSet")));
        assert!(!handler.is_quick(&request(json!({"uid": "u", "operation": "CREATE"}))));
        // A big route goes to the blocking pool, under the deadline.
        let names: Vec<String> = (0..=QUICK_MAX_HOSTNAMES)
            .map(|i| format!("h{i}.example.com"))
            .collect();
        let big = request(json!({
            "uid": "u",
            "operation": "CREATE",
            "kind": {"kind": "HTTPRoute"},
            "object": {
                "apiVersion": "gateway.networking.k8s.io/v1",
                "kind": "HTTPRoute",
                "metadata": {"name": "big", "namespace": "shop",
                    "annotations": {"external-dns.kubernetes.io/hostname": names.join(",")}},
                "spec": {"parentRefs": [{"name": "gw"}]},
            },
        }));
        assert!(big.object().is_some());
        assert!(!handler.is_quick(&big));
    }
}
