//! Admission: what the rules say about one object as if it were applied to the world
//! (ARCHITECTURE.md, "Findings"). A route is judged as the newcomer against the incumbents;
//! Gateway, ListenerSet and Namespace changes are never denied, only warned about with the routes
//! they would break. The webhook turns a [`Decision`] into its AdmissionReview answer.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::claimants::route_ref;
use super::hostname_ownership::{ALLOWED_HOSTNAMES_ANNOTATION, SHARE_HOSTNAMES_ANNOTATION};
use super::settle::{self, newcomer_conflicts};
use super::{Action, Finding, Reason, World, evaluate_route};
use crate::model::{Namespace, Object, ObjectKey, ObjectKind, Route};

/// What admission reads beyond [`World`]: the world with one object applied, and the routes a
/// change of one object touches. The index implements it on its snapshots.
pub trait WhatIf: World + Sized {
    /// This world with `object` inserted or replaced, its routes re-evaluated.
    fn with_applied(&self, object: Object) -> Self;
    /// The routes whose evaluation may change when the object `key` changes.
    fn affected_routes(&self, key: &ObjectKey) -> Vec<super::RouteId>;
}

/// Most routes a Gateway, ListenerSet or Namespace warning names before it only counts the rest.
const MAX_NAMED_ROUTES: usize = 10;

/// What the rules say about one change: allowed or not, with the warnings to return and every
/// finding behind them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    /// Each starts with `Reason: `.
    pub warnings: Vec<String>,
    /// Every finding with its final action, for logs and metrics (audit ones included).
    pub findings: Vec<Finding>,
}

impl Decision {
    pub fn allow() -> Decision {
        Decision {
            allowed: true,
            ..Decision::default()
        }
    }

    /// The findings that deny (none when allowed).
    pub fn denials(&self) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(|v| denies(v))
    }

    /// The denial's `status.message`: one line per denying finding.
    pub fn denial_message(&self) -> String {
        denial_message(self.denials())
    }
}

pub fn denies(v: &Finding) -> bool {
    v.action == Action::Deny
}

/// One `Reason: message` line per denying finding.
pub fn denial_message<'v>(denials: impl Iterator<Item = &'v Finding>) -> String {
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
fn push_finding_line(out: &mut String, v: &Finding) {
    out.reserve(v.reason.as_str().len() + 2 + v.message.len());
    out.push_str(v.reason.as_str());
    out.push_str(": ");
    out.push_str(&v.message);
}

/// `Reason: message`, as the webhook says it.
pub fn finding_line(v: &Finding) -> String {
    let mut line = String::new();
    push_finding_line(&mut line, v);
    line
}

/// Decides a CREATE of `object`, or its UPDATE when the `old` object it replaces is given.
pub fn decide<W: WhatIf>(world: &W, object: &Object, old: Option<&Object>) -> Decision {
    match object {
        Object::Route(route) => {
            let old_route = match old {
                Some(Object::Route(old)) => Some(&**old),
                _ => None,
            };
            decide_route(world, route, old_route)
        }
        Object::Gateway(_) | Object::ListenerSet(_) => decide_parent(world, object.clone()),
        Object::Namespace(namespace) => match old {
            Some(Object::Namespace(old)) => decide_namespace(world, namespace, old),
            _ => Decision::allow(),
        },
    }
}

/// All findings of a route as the newcomer: its own, resolved, plus conflicts with incumbents.
pub fn route_findings<W: World>(world: &W, route: &Route) -> Vec<Finding> {
    let eval = evaluate_route(world, world.config(), route);
    let mut violations = newcomer_conflicts(world, route, &eval);
    // The evaluation is not kept: its raw findings move into the resolved ones.
    violations.extend(
        eval.findings
            .into_vec()
            .into_iter()
            .map(|finding| settle::resolve_owned(world, route, finding)),
    );
    violations.retain(|v| v.action != Action::Ignore);
    violations.sort();
    violations
}

/// Identity of a finding across an UPDATE (fields can shift when hostnames are reordered).
fn finding_identity(v: &Finding) -> (Reason, Option<String>, Option<String>) {
    match &v.hostname {
        Some(h) => (v.reason, Some(h.clone()), None),
        None => (v.reason, None, Some(v.field.clone())),
    }
}

fn decide_route<W: World>(world: &W, route: &Route, old: Option<&Route>) -> Decision {
    let mut violations = route_findings(world, route);
    if let Some(old) = old {
        let old_violations = route_findings(world, old);
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
    }
}

/// Gateway and ListenerSet changes are never denied: warn about the routes whose names the
/// change would drop or make conflict.
fn decide_parent<W: WhatIf>(world: &W, object: Object) -> Decision {
    let key = object.key();
    let next = world.with_applied(object);
    let mut affected = world.affected_routes(&key);
    affected.extend(next.affected_routes(&key));
    affected.sort();
    affected.dedup();
    let mut lines: Vec<RouteWarning> = Vec::new();
    for id in &affected {
        let (Some(before), Some(after)) = (world.route(id), next.route(id)) else {
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
            let lost_now = |s: &W| {
                let (_, violations) = settle::settle_name(s, name);
                violations.iter().any(|v| v.object == route_name)
            };
            if lost_now(&next) && !lost_now(world) {
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
fn decide_namespace<W: WhatIf>(world: &W, namespace: &Arc<Namespace>, old: &Namespace) -> Decision {
    let changed = [ALLOWED_HOSTNAMES_ANNOTATION, SHARE_HOSTNAMES_ANNOTATION]
        .into_iter()
        .any(|key| namespace.meta.annotations.get(key) != old.meta.annotations.get(key));
    if !changed {
        return Decision::allow();
    }
    let key = ObjectKey::new(ObjectKind::Namespace, "", namespace.meta.name());
    let next = world.with_applied(Object::Namespace(namespace.clone()));
    // The routes of the namespace, and every route claiming one of their names: sharing (or no
    // longer sharing) a name changes who keeps it.
    let own = world.affected_routes(&key);
    let mut names: BTreeSet<&str> = BTreeSet::new();
    for id in &own {
        if let Some(entry) = world.route(id) {
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
        let (records_before, _) = settle::settle_name(world, name);
        let (records_after, violations_after) = settle::settle_name(&next, name);
        let after = publishers(&records_after);
        for route_name in publishers(&records_before).difference(&after) {
            // Why it would stop: the name's settlement, or the route's own evaluation.
            let cross_route = violations_after
                .iter()
                .find(|v| v.object == *route_name)
                .map(|v| (v.reason, v.message.as_str()));
            let own_finding = || {
                world
                    .claimants(name)
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
