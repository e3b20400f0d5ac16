//! Feedback where people look: Kubernetes Events on the objects a finding is about, and one
//! wgpolicyk8s.io PolicyReport per route (ARCHITECTURE.md, "The reasons", the bullet "Feedback
//! where people look, from the Lease holder").
//!
//! This file is pure: which Events to emit and which reports should exist are functions of the
//! findings, so they can be diffed and tested with plain data. [`limit`] holds the rate limits
//! and the series bookkeeping (pure too, time passed in); [`cluster`] writes to the API server.

pub mod cluster;
pub mod limit;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::engine::{Action, Config, Finding, Mode, Outcome, Reason};
use crate::model::{ObjectKind, RecordType};

/// `reportingController` of every Event, and the `source` and `policy` of every report result.
pub const CONTROLLER: &str = "gateway-dns.io/gateway-dns";
/// `policy` and `source` of PolicyReport results.
pub const POLICY: &str = "gateway-dns";

/// An object a finding is about, as a finding names it (`Kind/namespace/name`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectRef {
    pub kind: ObjectKind,
    pub namespace: String,
    pub name: String,
}

impl ObjectRef {
    /// Reads a finding's `object`; None for a kind that is not a Gateway API object we read.
    pub fn parse(object: &str) -> Option<ObjectRef> {
        let mut parts = object.splitn(3, '/');
        let (kind, namespace, name) = (parts.next()?, parts.next()?, parts.next()?);
        let kind = ObjectKind::ALL
            .into_iter()
            .find(|k| k.kind() == kind && *k != ObjectKind::Namespace)?;
        if namespace.is_empty() || name.is_empty() {
            return None;
        }
        Some(ObjectRef {
            kind,
            namespace: namespace.to_string(),
            name: name.to_string(),
        })
    }

    /// Reads external-dns's `kind/namespace/name` resource form (kind in lower case), as an
    /// ownership record names its route.
    pub fn parse_resource(resource: &str) -> Option<ObjectRef> {
        let (kind, rest) = resource.split_once('/')?;
        let kind = ObjectKind::ROUTES
            .into_iter()
            .find(|k| k.kind().eq_ignore_ascii_case(kind))?;
        ObjectRef::parse(&format!("{}/{rest}", kind.kind()))
    }
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.kind.kind(), self.namespace, self.name)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EventType {
    Normal,
    Warning,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// One Event to emit: `reason` is the finding's stable reason, `note` its one-line message
/// (the webhook's), so that repeats of one finding form one series.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EventIntent {
    pub regarding: ObjectRef,
    pub event_type: EventType,
    /// What was done: `Evaluate` for findings, `Publish`/`Remove` for DNS records.
    pub action: &'static str,
    pub reason: String,
    pub note: String,
}

/// `action` of finding Events.
pub const FINDING_ACTION: &str = "Evaluate";
/// `reason` of the Normal Event on each route whose record the sync loop wrote.
pub const PUBLISHED: &str = "DNSRecordPublished";
/// `reason` of the Normal Event on each route whose record the sync loop deleted.
pub const REMOVED: &str = "DNSRecordRemoved";
/// `reason` of the Normal Event on each route whose record the sync loop took over from an
/// owner gone silent (`--adopt-after`).
pub const ADOPTED: &str = "DNSRecordAdopted";

/// A record set the sync loop wrote (created or updated) or deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppliedRecord {
    pub dns_name: String,
    pub record_type: RecordType,
    pub targets: Vec<String>,
    pub removed: bool,
    /// The route its ownership record names (`httproute/namespace/name`), if any.
    pub resource: Option<String>,
    /// The owner gone silent it was taken over from (`--adopt-after`), if it was.
    pub adopted_from: Option<String>,
}

/// The routes of each record set, as the outcomes seen so far had them: a removed record is
/// no longer in the current outcome, but its routes are told.
pub type RecordRoutes = BTreeMap<(String, RecordType), Vec<String>>;

/// Remembers the routes of every record of `outcome` (entries of records since gone are kept
/// until their removal is told, or until the map grows well past the outcome).
pub fn remember_routes(known: &mut RecordRoutes, outcome: &Outcome) {
    if known.len() > 2 * outcome.records.len() + 1024 {
        known.clear();
    }
    for record in &outcome.records {
        known.insert(
            (record.dns_name.clone(), record.record_type),
            record.routes.clone(),
        );
    }
}

/// Normal Events for what the sync loop wrote: `DNSRecordPublished` on every route of a record
/// written, `DNSRecordRemoved` on every route a deleted record had. Ownership TXT records are
/// bookkeeping and tell nothing.
pub fn record_events(applied: &[AppliedRecord], known: &mut RecordRoutes) -> Vec<EventIntent> {
    let mut intents = Vec::new();
    for record in applied.iter().filter(|r| r.record_type != RecordType::TXT) {
        let key = (record.dns_name.clone(), record.record_type);
        let routes: Vec<ObjectRef> = match known.get(&key) {
            Some(routes) => routes.iter().filter_map(|r| ObjectRef::parse(r)).collect(),
            None => record
                .resource
                .as_deref()
                .and_then(ObjectRef::parse_resource)
                .into_iter()
                .collect(),
        };
        let (reason, action, note) = if let Some(from) = &record.adopted_from {
            (
                ADOPTED,
                "Adopt",
                format!(
                    "DNS record {} {} {} adopted from owner \"{from}\", whose heartbeat is older \
                     than --adopt-after",
                    record.dns_name,
                    record.record_type.as_str(),
                    record.targets.join(",")
                ),
            )
        } else if record.removed {
            known.remove(&key);
            (
                REMOVED,
                "Remove",
                format!(
                    "DNS record {} {} removed",
                    record.dns_name,
                    record.record_type.as_str()
                ),
            )
        } else {
            (
                PUBLISHED,
                "Publish",
                format!(
                    "DNS record {} {} {} published",
                    record.dns_name,
                    record.record_type.as_str(),
                    record.targets.join(",")
                ),
            )
        };
        intents.extend(routes.into_iter().map(|regarding| EventIntent {
            regarding,
            event_type: EventType::Normal,
            action,
            reason: reason.to_string(),
            note: note.clone(),
        }));
    }
    intents.sort();
    intents.dedup();
    intents
}

/// The Events for findings that appeared since `previous` (every finding when there is no
/// previous, e.g. when this replica became the leader): a finding that stays emits nothing
/// again, whatever the number of resyncs. Findings on objects we cannot name are skipped.
pub fn events_for(previous: Option<&BTreeSet<Finding>>, current: &[Finding]) -> Vec<EventIntent> {
    let mut intents: Vec<EventIntent> = current
        .iter()
        .filter(|v| previous.is_none_or(|previous| !previous.contains(*v)))
        .filter_map(|v| {
            Some(EventIntent {
                regarding: ObjectRef::parse(&v.object)?,
                event_type: EventType::Warning,
                action: FINDING_ACTION,
                reason: v.reason.as_str().to_string(),
                note: v.message.clone(),
            })
        })
        .collect();
    intents.sort();
    intents.dedup();
    intents
}

/// `reason` of the Normal Event on a Gateway that had a `TargetUnhealthy` finding and has none
/// any more: every target of it behind a name passes its health checks again.
pub const TARGET_HEALTHY: &str = "TargetHealthy";

/// `TargetHealthy` for every Gateway with a `TargetUnhealthy` finding in `previous` and none in
/// `current` (ARCHITECTURE.md, "Health checks"): the finding's Event said a target failed, this
/// one says it passes again. Nothing without a previous (a new leader has nothing to compare).
pub fn recovery_events(
    previous: Option<&BTreeSet<Finding>>,
    current: &[Finding],
) -> Vec<EventIntent> {
    let Some(previous) = previous else {
        return Vec::new();
    };
    let unhealthy = |f: &&Finding| f.reason == Reason::TargetUnhealthy;
    let still: BTreeSet<&str> = current
        .iter()
        .filter(unhealthy)
        .map(|f| f.object.as_str())
        .collect();
    let mut intents: Vec<EventIntent> = previous
        .iter()
        .filter(unhealthy)
        .filter(|f| !still.contains(f.object.as_str()))
        .filter_map(|f| {
            Some(EventIntent {
                regarding: ObjectRef::parse(&f.object)?,
                event_type: EventType::Normal,
                action: FINDING_ACTION,
                reason: TARGET_HEALTHY.to_string(),
                note: "no target of this Gateway fails its health checks any more; its \
                       addresses are back in every name they serve"
                    .to_string(),
            })
        })
        .collect();
    intents.sort();
    intents.dedup();
    intents
}

/// A PolicyReport result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ReportResult {
    Pass,
    Warn,
    Fail,
}

impl ReportResult {
    pub fn as_str(self) -> &'static str {
        match self {
            ReportResult::Pass => "pass",
            ReportResult::Warn => "warn",
            ReportResult::Fail => "fail",
        }
    }

    /// `fail` for a finding that denies, `warn` for one that warns. An audit finding reports
    /// what it would be outside audit mode (`--action` still applies), so the platform team's
    /// view does not depend on the mode a namespace is rolled out in.
    pub fn of(cfg: &Config, violation: &Finding) -> ReportResult {
        let action = match violation.action {
            Action::Audit => cfg.action_for(violation.reason, Mode::Enforce),
            action => action,
        };
        match action {
            Action::Deny => ReportResult::Fail,
            _ => ReportResult::Warn,
        }
    }
}

/// One result line of a route's report.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ResultLine {
    /// The finding's reason; empty for the `pass` of a route without findings.
    pub rule: String,
    pub result: ReportResult,
    pub message: String,
    pub hostname: Option<String>,
    pub field: Option<String>,
}

/// The results one route's report should hold.
pub type ReportContent = Vec<ResultLine>;

/// The report every route in `routes` should have: one result per finding, or one `pass`.
/// Findings on objects that are not routes (or not in `routes`) make no report.
pub fn reports_for<'a>(
    cfg: &Config,
    routes: impl IntoIterator<Item = ObjectRef>,
    violations: impl IntoIterator<Item = &'a Finding>,
) -> BTreeMap<ObjectRef, ReportContent> {
    let mut reports: BTreeMap<ObjectRef, ReportContent> = routes
        .into_iter()
        .filter(|r| r.kind.is_route())
        .map(|r| (r, Vec::new()))
        .collect();
    for violation in violations {
        let Some(object) = ObjectRef::parse(&violation.object) else {
            continue;
        };
        if let Some(results) = reports.get_mut(&object) {
            results.push(ResultLine {
                rule: violation.reason.as_str().to_string(),
                result: ReportResult::of(cfg, violation),
                message: violation.message.clone(),
                hostname: violation.hostname.clone(),
                field: Some(violation.field.clone()),
            });
        }
    }
    for results in reports.values_mut() {
        if results.is_empty() {
            results.push(ResultLine {
                rule: String::new(),
                result: ReportResult::Pass,
                message: "gateway-dns has no finding for this route".to_string(),
                hostname: None,
                field: None,
            });
        }
        results.sort();
        results.dedup();
    }
    reports
}

/// What to write to go from the reports last written to the ones wanted.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ReportChanges {
    /// New or changed reports.
    pub write: Vec<(ObjectRef, ReportContent)>,
    /// Reports of routes that are gone (or left the scope).
    pub delete: Vec<ObjectRef>,
}

pub fn report_changes(
    written: &BTreeMap<ObjectRef, ReportContent>,
    wanted: &BTreeMap<ObjectRef, ReportContent>,
) -> ReportChanges {
    ReportChanges {
        write: wanted
            .iter()
            .filter(|(route, content)| written.get(*route) != Some(*content))
            .map(|(route, content)| (route.clone(), content.clone()))
            .collect(),
        delete: written
            .keys()
            .filter(|route| !wanted.contains_key(*route))
            .cloned()
            .collect(),
    }
}

/// A report's `summary`: counts by result.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    pub pass: usize,
    pub warn: usize,
    pub fail: usize,
}

impl Summary {
    pub fn of(results: &[ResultLine]) -> Summary {
        let count = |wanted| results.iter().filter(|r| r.result == wanted).count();
        Summary {
            pass: count(ReportResult::Pass),
            warn: count(ReportResult::Warn),
            fail: count(ReportResult::Fail),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Reason;

    fn violation(object: &str, reason: Reason, action: Action, message: &str) -> Finding {
        Finding {
            object: object.to_string(),
            reason,
            action,
            hostname: Some("app.example.com".to_string()),
            field: "spec.hostnames[0]".to_string(),
            message: message.to_string(),
        }
    }

    fn route(namespace: &str, name: &str) -> ObjectRef {
        ObjectRef::parse(&format!("HTTPRoute/{namespace}/{name}")).unwrap()
    }

    #[test]
    fn objects_are_read_from_findings() {
        assert_eq!(
            ObjectRef::parse("HTTPRoute/team-b/web"),
            Some(ObjectRef {
                kind: ObjectKind::HTTPRoute,
                namespace: "team-b".to_string(),
                name: "web".to_string()
            })
        );
        let gateway = ObjectRef::parse("Gateway/infra/public").unwrap();
        assert_eq!(gateway.kind, ObjectKind::Gateway);
        assert_eq!(gateway.to_string(), "Gateway/infra/public");
        for bad in [
            "",
            "HTTPRoute",
            "HTTPRoute/x",
            "Pod/a/b",
            "Namespace/a/b",
            "HTTPRoute//b",
        ] {
            assert_eq!(ObjectRef::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn events_are_emitted_for_new_findings_only() {
        let conflict = violation(
            "HTTPRoute/team-b/web",
            Reason::HostnameConflict,
            Action::Audit,
            "app.example.com is already served",
        );
        let outside = violation(
            "HTTPRoute/team-d/d1",
            Reason::HostnameOutsideListener,
            Action::Warn,
            "outside",
        );
        // First look (start-up, or just became the leader): every finding.
        let first = events_for(None, std::slice::from_ref(&conflict));
        assert_eq!(
            first,
            vec![EventIntent {
                regarding: route("team-b", "web"),
                event_type: EventType::Warning,
                action: FINDING_ACTION,
                reason: "HostnameConflict".to_string(),
                note: "app.example.com is already served".to_string(),
            }]
        );
        let seen: BTreeSet<Finding> = [conflict.clone()].into();
        // A resync with the same findings: nothing.
        assert!(events_for(Some(&seen), std::slice::from_ref(&conflict)).is_empty());
        // A new finding beside it: only the new one.
        let both = events_for(Some(&seen), &[conflict.clone(), outside.clone()]);
        assert_eq!(both.len(), 1);
        assert_eq!(both[0].regarding, route("team-d", "d1"));
        assert_eq!(both[0].reason, "HostnameOutsideListener");
        // Gone, then back: emitted again (the writer makes that a series).
        assert!(events_for(Some(&seen), &[]).is_empty());
        assert_eq!(events_for(Some(&BTreeSet::new()), &[conflict]).len(), 1);
    }

    #[test]
    fn a_gateway_whose_targets_pass_again_is_told_once() {
        let unhealthy = |message: &str| Finding {
            object: "Gateway/infra/blue".to_string(),
            reason: Reason::TargetUnhealthy,
            action: Action::Warn,
            hostname: None,
            field: "status.addresses".to_string(),
            message: message.to_string(),
        };
        let one: BTreeSet<Finding> = [unhealthy("10.0.0.1 fails")].into();
        assert!(recovery_events(None, &[]).is_empty(), "no history, no news");
        // Another target fails too: the finding changes, the Gateway is not healthy.
        assert!(recovery_events(Some(&one), &[unhealthy("10.0.0.1 and 10.0.0.2 fail")]).is_empty());
        let back = recovery_events(Some(&one), &[]);
        assert_eq!(back.len(), 1);
        assert_eq!(back[0].regarding.to_string(), "Gateway/infra/blue");
        assert_eq!(
            (back[0].reason.as_str(), back[0].event_type),
            (TARGET_HEALTHY, EventType::Normal)
        );
        assert!(recovery_events(Some(&BTreeSet::new()), &[]).is_empty());
    }

    fn applied(name: &str, record_type: RecordType, removed: bool) -> AppliedRecord {
        AppliedRecord {
            dns_name: name.to_string(),
            record_type,
            targets: vec!["203.0.113.10".to_string()],
            removed,
            resource: Some("httproute/team-a/web".to_string()),
            adopted_from: None,
        }
    }

    #[test]
    fn an_adopted_record_tells_its_route_whose_it_was() {
        let adopted = AppliedRecord {
            adopted_from: Some("east".into()),
            ..applied("b.example.com", RecordType::A, false)
        };
        let events = record_events(&[adopted], &mut RecordRoutes::new());
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].reason, ADOPTED);
        assert_eq!(events[0].event_type, EventType::Normal);
        assert!(
            events[0].note.contains("adopted from owner \"east\""),
            "{}",
            events[0].note
        );
    }

    #[test]
    fn written_records_tell_every_route_and_removed_ones_the_routes_they_had() {
        let record = crate::engine::Record {
            dns_name: "app.example.com".to_string(),
            record_type: RecordType::A,
            targets: vec!["203.0.113.10".to_string()],
            ttl: None,
            gateways: vec!["infra/public".to_string()],
            routes: vec![
                "HTTPRoute/team-a/web".to_string(),
                "HTTPRoute/team-c/web".to_string(),
            ],
            shared: false,
        };
        let mut known = RecordRoutes::new();
        remember_routes(
            &mut known,
            &Outcome {
                records: vec![record],
                violations: vec![],
            },
        );
        let published = record_events(
            &[
                applied("app.example.com", RecordType::A, false),
                // Ownership records tell nothing.
                applied("a-app.example.com", RecordType::TXT, false),
            ],
            &mut known,
        );
        let told: Vec<(String, &str, &str)> = published
            .iter()
            .map(|e| (e.regarding.to_string(), e.reason.as_str(), e.note.as_str()))
            .collect();
        assert_eq!(
            told,
            [
                (
                    "HTTPRoute/team-a/web".to_string(),
                    PUBLISHED,
                    "DNS record app.example.com A 203.0.113.10 published"
                ),
                (
                    "HTTPRoute/team-c/web".to_string(),
                    PUBLISHED,
                    "DNS record app.example.com A 203.0.113.10 published"
                ),
            ]
        );
        assert!(published.iter().all(|e| e.event_type == EventType::Normal));

        // The record leaves the outcome, then the sync loop deletes it: both routes are told.
        remember_routes(&mut known, &Outcome::default());
        let removed = record_events(
            &[applied("app.example.com", RecordType::A, true)],
            &mut known,
        );
        assert_eq!(removed.len(), 2);
        assert!(
            removed
                .iter()
                .all(|e| e.reason == REMOVED && e.action == "Remove")
        );
        assert!(known.is_empty(), "told once");
        // A record never seen in an outcome (written before a restart): its ownership record
        // names the route.
        let orphan = record_events(
            &[applied("old.example.com", RecordType::A, true)],
            &mut known,
        );
        assert_eq!(orphan.len(), 1);
        assert_eq!(orphan[0].regarding.to_string(), "HTTPRoute/team-a/web");
        assert_eq!(
            ObjectRef::parse_resource("grpcroute/ns/api").map(|r| r.kind),
            Some(ObjectKind::GRPCRoute)
        );
        assert_eq!(ObjectRef::parse_resource("gateway/ns/x"), None);
    }

    #[test]
    fn reports_pass_fail_and_warn_by_action_and_follow_changes() {
        let cfg = Config::default();
        let routes = [route("team-a", "web"), route("team-b", "web")];
        let clean = reports_for(&cfg, routes.clone(), &[]);
        assert_eq!(clean.len(), 2);
        for results in clean.values() {
            assert_eq!(results.len(), 1);
            assert_eq!(results[0].result, ReportResult::Pass);
            assert_eq!(Summary::of(results).pass, 1);
        }

        let findings = [
            // An audit finding of a reason that denies reads `fail`.
            violation(
                "HTTPRoute/team-b/web",
                Reason::HostnameConflict,
                Action::Audit,
                "taken",
            ),
            violation(
                "HTTPRoute/team-b/web",
                Reason::HostnameOutsideListener,
                Action::Warn,
                "outside",
            ),
            // Not a route in the list: no report.
            violation("HTTPRoute/gone/x", Reason::NoParentRefs, Action::Deny, "x"),
        ];
        let conflict = reports_for(&cfg, routes.clone(), &findings);
        assert_eq!(conflict.len(), 2);
        let team_b = &conflict[&route("team-b", "web")];
        let results: Vec<(&str, ReportResult)> =
            team_b.iter().map(|r| (r.rule.as_str(), r.result)).collect();
        assert_eq!(
            results,
            [
                ("HostnameConflict", ReportResult::Fail),
                ("HostnameOutsideListener", ReportResult::Warn)
            ]
        );
        assert_eq!(
            Summary::of(team_b),
            Summary {
                pass: 0,
                warn: 1,
                fail: 1
            }
        );

        let changes = report_changes(&clean, &conflict);
        assert_eq!(changes.write.len(), 1, "only team B's report changed");
        assert_eq!(changes.write[0].0, route("team-b", "web"));
        assert!(changes.delete.is_empty());
        // The fix: back to pass. The route deleted: its report goes.
        assert_eq!(report_changes(&conflict, &clean).write.len(), 1);
        let only_a = reports_for(&cfg, [route("team-a", "web")], &[]);
        let changes = report_changes(&clean, &only_a);
        assert!(changes.write.is_empty());
        assert_eq!(changes.delete, vec![route("team-b", "web")]);
        assert_eq!(report_changes(&clean, &clean), ReportChanges::default());
    }

    #[test]
    fn an_override_decides_the_result_of_an_audit_finding() {
        let mut cfg = Config::default();
        cfg.actions
            .insert(crate::engine::Reason::HostnameConflict, Action::Warn);
        let audit = violation(
            "HTTPRoute/team-b/web",
            crate::engine::Reason::HostnameConflict,
            Action::Audit,
            "taken",
        );
        assert_eq!(ReportResult::of(&cfg, &audit), ReportResult::Warn);
    }
}
