//! Admission decisions: evaluate the object under review against the index *as if applied* and
//! answer allowed/denied with warnings (ARCHITECTURE.md, "Violations"). The one file of the
//! webhook that knows the engine; no HTTP here.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::review::{
    AdmissionHandler, AdmissionRequest, Cause, Denial, Operation, ReviewObject, Verdict,
};
use crate::engine::ownership::{ALLOWED_HOSTNAMES_ANNOTATION, SHARE_HOSTNAMES_ANNOTATION};
use crate::engine::settle::{self, newcomer_conflicts, route_ref};
use crate::engine::{Action, Reason, Violation, World, evaluate_route};
use crate::index::{Index, Snapshot};
use crate::metrics::{EvaluationErrorKind, Metrics};
use crate::model::{Namespace, Object, ObjectKey, ObjectKind, Route};

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

/// Most routes a Gateway, ListenerSet or Namespace warning names before it only counts the rest.
const MAX_NAMED_ROUTES: usize = 10;

/// The answer for one AdmissionReview request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    /// Each starts with `Reason: `.
    pub warnings: Vec<String>,
    /// Every finding with its final action, for logs and metrics (audit ones included).
    pub findings: Vec<Violation>,
    /// Set when gateway-dns could not read the object (it is then allowed).
    pub unreadable: Option<String>,
}

impl Decision {
    fn allow() -> Decision {
        Decision {
            allowed: true,
            ..Decision::default()
        }
    }

    /// The findings that deny (none when allowed).
    pub fn denials(&self) -> impl Iterator<Item = &Violation> {
        self.findings.iter().filter(|v| denies(v))
    }

    /// The denial's `status.message`: one line per denying finding.
    pub fn denial_message(&self) -> String {
        denial_message(self.denials())
    }
}

fn denies(v: &Violation) -> bool {
    v.action == Action::Deny
}

/// One `Reason: message` line per denying finding.
fn denial_message<'v>(denials: impl Iterator<Item = &'v Violation>) -> String {
    let mut message = String::new();
    for v in denials {
        if !message.is_empty() {
            message.push('\n');
        }
        push_finding_line(&mut message, v);
    }
    message
}

/// `Reason: message`, the form of every warning and denial line.
fn push_finding_line(out: &mut String, v: &Violation) {
    out.reserve(v.reason.as_str().len() + 2 + v.message.len());
    out.push_str(v.reason.as_str());
    out.push_str(": ");
    out.push_str(&v.message);
}

fn finding_line(v: &Violation) -> String {
    let mut line = String::new();
    push_finding_line(&mut line, v);
    line
}

/// Decides one AdmissionReview request.
pub fn decide(snap: &Snapshot, request: &AdmissionRequest<'_>) -> Decision {
    let operation = request.operation;
    if !matches!(operation, Operation::Create | Operation::Update) {
        // DELETE (and CONNECT) are always allowed: removing a claim never breaks DNS rules.
        return Decision::allow();
    }
    let object = match &request.object {
        None | Some(Ok(None)) => return Decision::allow(),
        Some(Ok(Some(object))) => object,
        Some(Err(error)) => return unreadable(error.to_string()),
    };
    // An unreadable old object only loses the "pre-existing" downgrade; judge the new one.
    let old = match &request.old_object {
        Some(Ok(Some(old))) => Some(old),
        _ => None,
    };
    match object {
        Object::Route(route) => {
            let old_route = match old {
                Some(Object::Route(old)) if operation == Operation::Update => Some(&**old),
                _ => None,
            };
            decide_route(snap, route, old_route)
        }
        Object::Gateway(_) | Object::ListenerSet(_) => decide_parent(snap, object.clone()),
        Object::Namespace(namespace) => match old {
            Some(Object::Namespace(old)) if operation == Operation::Update => {
                decide_namespace(snap, namespace, old)
            }
            _ => Decision::allow(),
        },
    }
}

fn unreadable(message: String) -> Decision {
    Decision {
        allowed: true,
        warnings: vec![format!(
            "EvaluationError: gateway-dns could not read this object ({message}); allowed without DNS checks"
        )],
        unreadable: Some(message),
        ..Decision::default()
    }
}

/// All violations of a route as the newcomer: intrinsic findings plus conflicts with incumbents.
pub fn route_violations(snap: &Snapshot, route: &Route) -> Vec<Violation> {
    let eval = evaluate_route(snap, snap.config(), route);
    let mut violations = newcomer_conflicts(snap, route, &eval);
    // The evaluation is not kept: its findings move into the violations.
    violations.extend(
        eval.findings
            .into_vec()
            .into_iter()
            .map(|finding| settle::into_violation(snap, route, finding)),
    );
    violations.retain(|v| v.action != Action::Ignore);
    violations.sort();
    violations
}

/// Identity of a finding across an UPDATE (fields can shift when hostnames are reordered).
fn finding_identity(v: &Violation) -> (Reason, Option<String>, Option<String>) {
    match &v.hostname {
        Some(h) => (v.reason, Some(h.clone()), None),
        None => (v.reason, None, Some(v.field.clone())),
    }
}

fn decide_route(snap: &Snapshot, route: &Route, old: Option<&Route>) -> Decision {
    let mut violations = route_violations(snap, route);
    if let Some(old) = old {
        let old_violations = route_violations(snap, old);
        let existing: BTreeSet<_> = old_violations.iter().map(finding_identity).collect();
        // On UPDATE only what the old object did not already have can deny.
        for v in violations.iter_mut() {
            if v.action == Action::Deny && existing.contains(&finding_identity(v)) {
                v.action = Action::Warn;
                v.message.push_str(" (already the case before this change)");
            }
        }
    }
    let warnings = violations
        .iter()
        .filter(|v| v.action == Action::Warn)
        .map(finding_line)
        .collect();
    Decision {
        allowed: !violations.iter().any(denies),
        warnings,
        findings: violations,
        unreadable: None,
    }
}

/// Gateway and ListenerSet changes are never denied: warn about the routes whose names the
/// change would drop or make conflict.
fn decide_parent(snap: &Snapshot, object: Object) -> Decision {
    let key = object.key();
    let next = snap.with_applied(object);
    let mut affected = snap.affected_routes(&key);
    affected.extend(next.affected_routes(&key));
    affected.sort();
    affected.dedup();
    let mut lines: Vec<RouteWarning> = Vec::new();
    for id in &affected {
        let (Some(before), Some(after)) = (snap.route(id), next.route(id)) else {
            continue;
        };
        let route_name = route_ref(&after.route);
        let old_findings: BTreeSet<_> = before
            .eval
            .findings
            .iter()
            .map(|f| (f.reason, f.hostname.clone()))
            .collect();
        for f in &after.eval.findings {
            if !old_findings.contains(&(f.reason, f.hostname.clone())) {
                lines.push(RouteWarning {
                    route: route_name.clone(),
                    reason: f.reason,
                    line: format!("{}: {route_name}: {}", f.reason, f.message),
                });
            }
        }
        let dropped: Vec<&str> = before
            .eval
            .names()
            .filter(|n| !after.eval.claims_name(n))
            .collect();
        if !dropped.is_empty() && after.eval.findings.len() == before.eval.findings.len() {
            let reason = Reason::NoMatchingListenerHostname;
            lines.push(RouteWarning {
                route: route_name.clone(),
                reason,
                line: format!(
                    "{reason}: {route_name} would no longer publish {}",
                    dropped.join(", ")
                ),
            });
        }
        for name in after.eval.names() {
            let lost_now = |s: &Snapshot| {
                let (_, violations) = settle::settle_name(s, name);
                violations.iter().any(|v| v.object == route_name)
            };
            if lost_now(&next) && !lost_now(snap) {
                let reason = Reason::HostnameConflict;
                lines.push(RouteWarning {
                    route: route_name.clone(),
                    reason,
                    line: format!("{reason}: {route_name}: {name} would resolve to Gateways with different addresses"),
                });
            }
        }
    }
    Decision {
        allowed: true,
        warnings: limited_warnings(&lines),
        ..Decision::default()
    }
}

/// The warning lines about at most [`MAX_NAMED_ROUTES`] routes, then how many more there are.
fn limited_warnings(lines: &[RouteWarning]) -> Vec<String> {
    let routes: BTreeSet<&str> = lines.iter().map(|w| w.route.as_str()).collect();
    let mut warnings = Vec::new();
    let mut named = BTreeSet::new();
    for warning in lines {
        if named.len() == MAX_NAMED_ROUTES && !named.contains(warning.route.as_str()) {
            continue;
        }
        named.insert(warning.route.as_str());
        warnings.push(warning.line.clone());
    }
    if routes.len() > named.len() {
        let reason = lines
            .first()
            .map_or(Reason::HostnameConflict, |warning| warning.reason);
        warnings.push(format!(
            "{reason}: and {} more routes affected by this change",
            routes.len() - named.len()
        ));
    }
    warnings
}

/// A Namespace change is never denied. When it changes the annotations that decide which names
/// its routes may publish and share, warn about every route (in it, or sharing its names) that
/// would stop publishing a name (ARCHITECTURE.md, "Namespaces and hostnames").
fn decide_namespace(snap: &Snapshot, namespace: &Arc<Namespace>, old: &Namespace) -> Decision {
    let changed = [ALLOWED_HOSTNAMES_ANNOTATION, SHARE_HOSTNAMES_ANNOTATION]
        .into_iter()
        .any(|key| namespace.meta.annotations.get(key) != old.meta.annotations.get(key));
    if !changed {
        return Decision::allow();
    }
    let key = ObjectKey::new(ObjectKind::Namespace, "", namespace.meta.name());
    let next = snap.with_applied(Object::Namespace(namespace.clone()));
    // The routes of the namespace, and every route claiming one of their names: sharing (or no
    // longer sharing) a name changes who keeps it.
    let own = snap.affected_routes(&key);
    let mut names: BTreeSet<&str> = BTreeSet::new();
    for id in &own {
        if let Some(entry) = snap.route(id) {
            names.extend(entry.eval.names());
        }
    }
    let mut lines: Vec<RouteWarning> = Vec::new();
    for name in names {
        let publishers = |records: &[settle::Record]| -> BTreeSet<String> {
            records
                .iter()
                .flat_map(|record| record.routes.iter().cloned())
                .collect()
        };
        let (records_before, _) = settle::settle_name(snap, name);
        let (records_after, violations_after) = settle::settle_name(&next, name);
        let after = publishers(&records_after);
        for route_name in publishers(&records_before).difference(&after) {
            // Why it would stop: the name's settlement, or the route's own evaluation.
            let cross_route = violations_after
                .iter()
                .find(|v| v.object == *route_name)
                .map(|v| (v.reason, v.message.as_str()));
            let own_finding = || {
                snap.claimants(name)
                    .iter()
                    .filter_map(|id| next.route(id))
                    .find(|entry| route_ref(&entry.route) == *route_name)
                    .and_then(|entry| {
                        entry
                            .eval
                            .findings
                            .iter()
                            .find(|f| f.hostname.as_deref() == Some(name))
                    })
                    .map(|f| (f.reason, &*f.message))
            };
            let (reason, why) = cross_route.or_else(own_finding).unwrap_or((
                Reason::HostnameNotAllowedForNamespace,
                "the Namespace's hostname annotations change",
            ));
            lines.push(RouteWarning {
                route: route_name.clone(),
                reason,
                line: format!("{reason}: {route_name} would no longer publish {name}: {why}"),
            });
        }
    }
    lines.sort_by(|a, b| a.route.cmp(&b.route));
    Decision {
        allowed: true,
        warnings: limited_warnings(&lines),
        ..Decision::default()
    }
}

/// One warning line of a Gateway or ListenerSet change, about one route.
struct RouteWarning {
    route: String,
    reason: Reason,
    line: String,
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

/// The envelope's verdict for a decision (its denying findings move into the causes).
pub fn verdict(decision: Decision) -> Verdict {
    if decision.allowed {
        return Verdict::allow_with_warnings(decision.warnings);
    }
    let denials: Vec<Violation> = decision.findings.into_iter().filter(denies).collect();
    let message = denial_message(denials.iter());
    let causes = denials
        .into_iter()
        .map(|v| Cause {
            reason: v.reason.to_string(),
            field: v.field,
            message: v.message,
        })
        .collect();
    Verdict::deny(Denial { message, causes }, decision.warnings)
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

    fn handle(&self, request: &AdmissionRequest<'_>) -> Verdict {
        let decision = self.index.read(|snapshot| decide(snapshot, request));
        if let Some(why) = &decision.unreadable {
            self.metrics
                .record_evaluation_error(EvaluationErrorKind::Unreadable);
            tracing::warn!(error = %why, "could not read the object under review; allowed");
        }
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
        verdict(decision)
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
