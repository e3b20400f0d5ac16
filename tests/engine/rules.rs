//! The rules of ARCHITECTURE.md ("The rules") not about attachment, one focused test each: every violation
//! reason of the table, actions and modes, records, conflicts, determinism, scope flags and API
//! versions. Attachment and annotations are in `attachment.rs`.

use std::collections::BTreeMap;

use gateway_dns::engine::Outcome;
use gateway_dns::engine::{
    Action, Config, ConflictResolution, Finding, MODE_LABEL, Mode, Reason, Scope, selector,
};
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::objects::*;

// ---------------------------------------------------------------- every reason of the table

#[test]
fn reason_hostname_conflict() {
    let outcome = settle_default(&[
        infra(),
        apps(),
        simple_gateway("infra", "gw1", None, &[GW1]),
        simple_gateway("infra", "gw2", None, &[GW2]),
        created(
            http_route("apps", "old", on("gw1"), &["app.example.com"]),
            "2025-01-01T00:00:00Z",
        ),
        created(
            http_route("apps", "new", on("gw2"), &["app.example.com"]),
            "2025-02-01T00:00:00Z",
        ),
    ]);
    let v = only_violation(&outcome, "HTTPRoute/apps/new");
    assert_finding(
        v,
        Reason::HostnameConflict,
        Action::Deny,
        "spec.hostnames[0]",
        &["app.example.com", "infra/gw1", GW1, "apps/old"],
    );
    assert_eq!(v.hostname.as_deref(), Some("app.example.com"));
    assert!(violations_of(&outcome, "HTTPRoute/apps/old").is_empty());
    assert_eq!(
        record_summary(&outcome),
        vec![("app.example.com".into(), "A", vec![GW1.into()])]
    );
    assert!(outcome.denies());
}

/// Settles `objects` beside the namespaces `infra` and `apps` (default configuration); returns
/// the outcome and the one violation of the route `apps/r`.
fn finding_of_r(objects: &[Value]) -> (Outcome, Finding) {
    let all: Vec<Value> = [infra(), apps()]
        .into_iter()
        .chain(objects.to_vec())
        .collect();
    let outcome = settle_default(&all);
    let violation = only_violation(&outcome, "HTTPRoute/apps/r").clone();
    (outcome, violation)
}

#[test]
fn reason_no_matching_listener_hostname() {
    let (outcome, v) = finding_of_r(&[
        simple_gateway("infra", "gw1", Some("*.example.com"), &[GW1]),
        http_route("apps", "r", on("gw1"), &["shop.example.org", "a.other.net"]),
    ]);
    assert_finding(
        &v,
        Reason::NoMatchingListenerHostname,
        Action::Deny,
        "spec.hostnames[0]",
        &["shop.example.org", "infra/gw1", "*.example.com"],
    );
    assert!(outcome.records.is_empty());
}

#[test]
fn reason_hostname_outside_listener() {
    let (outcome, v) = finding_of_r(&[
        simple_gateway("infra", "gw1", Some("*.example.com"), &[GW1]),
        http_route(
            "apps",
            "r",
            on("gw1"),
            &["a.example.com", "shop.example.org"],
        ),
    ]);
    assert_finding(
        &v,
        Reason::HostnameOutsideListener,
        Action::Warn,
        "spec.hostnames[1]",
        &["shop.example.org", "infra/gw1"],
    );
    assert_eq!(v.hostname.as_deref(), Some("shop.example.org"));
    assert_eq!(
        record_summary(&outcome),
        vec![("a.example.com".into(), "A", vec![GW1.into()])]
    );
    assert!(!outcome.denies());
}

#[test]
fn reason_invalid_hostname() {
    let outcome = settle_default(&[
        infra(),
        apps(),
        simple_gateway("infra", "gw1", None, &[GW1]),
        annotated(
            http_route(
                "apps",
                "r",
                on("gw1"),
                &[
                    "ok.example.com",
                    "192.0.2.7",
                    "bad_name.example.com",
                    "2001:db8::1",
                ],
            ),
            "external-dns.kubernetes.io/hostname",
            "also-ok.example.com,-dash.example.com",
        ),
    ]);
    let found = violations_of(&outcome, "HTTPRoute/apps/r");
    let by_field: BTreeMap<&str, &Finding> = found.iter().map(|v| (v.field.as_str(), *v)).collect();
    assert_eq!(found.len(), 4, "{found:#?}");
    assert_finding(
        by_field["spec.hostnames[1]"],
        Reason::InvalidHostname,
        Action::Deny,
        "spec.hostnames[1]",
        &["192.0.2.7"],
    );
    assert_finding(
        by_field["spec.hostnames[2]"],
        Reason::InvalidHostname,
        Action::Deny,
        "spec.hostnames[2]",
        &["bad_name.example.com"],
    );
    assert_finding(
        by_field["spec.hostnames[3]"],
        Reason::InvalidHostname,
        Action::Deny,
        "spec.hostnames[3]",
        &["2001:db8::1"],
    );
    let annotation_field = "metadata.annotations[external-dns.kubernetes.io/hostname]";
    assert_finding(
        by_field[annotation_field],
        Reason::InvalidHostname,
        Action::Deny,
        annotation_field,
        &["-dash.example.com"],
    );
    // The valid names are still published.
    let names: Vec<_> = outcome
        .records
        .iter()
        .map(|r| r.dns_name.as_str())
        .collect();
    assert_eq!(names, ["also-ok.example.com", "ok.example.com"]);
}

#[test]
fn hostnames_compare_case_insensitively() {
    let outcome = settle_default(&[
        infra(),
        apps(),
        simple_gateway("infra", "gw1", Some("*.Example.COM"), &[GW1]),
        http_route("apps", "r", on("gw1"), &["App.Example.Com"]),
    ]);
    assert!(outcome.violations.is_empty(), "{:#?}", outcome.violations);
    assert_eq!(
        record_summary(&outcome),
        vec![("app.example.com".into(), "A", vec![GW1.into()])]
    );
}

#[test]
fn reason_not_allowed_by_listeners() {
    let same_only = gateway(
        "infra",
        "gw1",
        json!([{"name": "web", "protocol": "HTTP", "port": 80}]),
        &[GW1],
    );
    let (outcome, v) = finding_of_r(&[
        same_only,
        http_route("apps", "r", on("gw1"), &["a.example.com"]),
    ]);
    assert_finding(
        &v,
        Reason::NotAllowedByListeners,
        Action::Deny,
        "spec.parentRefs[0]",
        &["infra/gw1", "web", "apps"],
    );
    assert!(outcome.records.is_empty());
}

#[test]
fn reason_no_matching_parent() {
    let (_, v) = finding_of_r(&[
        simple_gateway("infra", "gw1", None, &[GW1]),
        http_route(
            "apps",
            "r",
            json!([{"name": "gw1", "namespace": "infra", "sectionName": "nope"}]),
            &["a.example.com"],
        ),
    ]);
    assert_finding(
        &v,
        Reason::NoMatchingParent,
        Action::Warn,
        "spec.parentRefs[0]",
        &["infra/gw1", "nope"],
    );
}

#[test]
fn reason_parent_not_found() {
    let (outcome, v) = finding_of_r(&[
        simple_gateway("infra", "gw1", None, &[GW1]),
        http_route(
            "apps",
            "r",
            json!([parent("infra", "gw1"), parent("infra", "missing")]),
            &["a.example.com"],
        ),
    ]);
    assert_finding(
        &v,
        Reason::ParentNotFound,
        Action::Warn,
        "spec.parentRefs[1]",
        &["infra/missing"],
    );
    assert_eq!(outcome.records.len(), 1, "gw1 still publishes");
}

#[test]
fn reason_no_parent_refs() {
    let outcome = settle_default(&[
        apps(),
        http_route("apps", "r", json!([]), &["a.example.com"]),
    ]);
    let v = only_violation(&outcome, "HTTPRoute/apps/r");
    assert_finding(
        v,
        Reason::NoParentRefs,
        Action::Warn,
        "spec.parentRefs",
        &["parentRefs"],
    );
    assert!(outcome.records.is_empty());
}

#[test]
fn reason_gateway_has_no_address() {
    let (outcome, v) = finding_of_r(&[
        simple_gateway("infra", "gw1", None, &[]),
        http_route("apps", "r", on("gw1"), &["a.example.com"]),
    ]);
    assert_finding(
        &v,
        Reason::GatewayHasNoAddress,
        Action::Warn,
        "spec.parentRefs[0]",
        &["infra/gw1"],
    );
    assert!(outcome.records.is_empty(), "no address, no record");
}

#[test]
fn reason_inherited_wildcard_hostname() {
    let objects = [
        infra(),
        apps(),
        simple_gateway("infra", "gw1", Some("*.example.com"), &[GW1]),
        http_route("apps", "r", on("gw1"), &[]),
    ];
    let got = settle_default(&objects);
    let v = only_violation(&got, "HTTPRoute/apps/r");
    assert_finding(
        v,
        Reason::InheritedWildcardHostname,
        Action::Warn,
        "spec.parentRefs[0]",
        &["*.example.com"],
    );
    assert_eq!(v.hostname.as_deref(), Some("*.example.com"));
    assert!(got.records.is_empty());

    let allowed = settle(
        Config {
            allow_inherited_wildcards: true,
            ..Config::default()
        },
        &objects,
    );
    assert!(allowed.violations.is_empty(), "{:#?}", allowed.violations);
    assert_eq!(
        record_summary(&allowed),
        vec![("*.example.com".into(), "A", vec![GW1.into()])]
    );
}

#[test]
fn hostless_route_inherits_exact_listener_hostnames() {
    let gw = gateway(
        "infra",
        "gw1",
        json!([
            listener("a", "HTTPS", Some("a.example.com")),
            listener("b", "HTTP", Some("b.example.com")),
            listener("any", "HTTP", None),
        ]),
        &[GW1],
    );
    let outcome = settle_default(&[infra(), apps(), gw, http_route("apps", "r", on("gw1"), &[])]);
    assert!(outcome.violations.is_empty(), "{:#?}", outcome.violations);
    let names: Vec<_> = outcome
        .records
        .iter()
        .map(|r| r.dns_name.as_str())
        .collect();
    assert_eq!(names, ["a.example.com", "b.example.com"]);
}

// ---------------------------------------------------------------- actions and modes

/// One route with a deny (NoMatchingListenerHostname on gw1) and a warn (ParentNotFound).
fn deny_and_warn(ns_labels: Value) -> Vec<Value> {
    vec![
        infra(),
        namespace("apps", ns_labels),
        simple_gateway("infra", "gw1", Some("a.example.com"), &[GW1]),
        http_route(
            "apps",
            "r",
            json!([parent("infra", "gw1"), parent("infra", "missing")]),
            &["b.example.com"],
        ),
    ]
}

fn actions(outcome: &Outcome) -> Vec<(Reason, Action)> {
    outcome
        .violations
        .iter()
        .map(|v| (v.reason, v.action))
        .collect()
}

#[test]
fn action_overrides() {
    let objects = deny_and_warn(json!({}));
    assert_eq!(
        actions(&settle_default(&objects)),
        [
            (Reason::NoMatchingListenerHostname, Action::Deny),
            (Reason::ParentNotFound, Action::Warn)
        ]
    );
    let mut cfg = Config::default();
    for text in ["NoMatchingListenerHostname=warn", "ParentNotFound=deny"] {
        let (reason, action) = Config::parse_action(text).unwrap();
        cfg.actions.insert(reason, action);
    }
    let swapped = settle(cfg, &objects);
    assert_eq!(
        actions(&swapped),
        [
            (Reason::NoMatchingListenerHostname, Action::Warn),
            (Reason::ParentNotFound, Action::Deny)
        ]
    );
    assert!(swapped.denies());

    let mut cfg = Config::default();
    cfg.actions
        .insert(Reason::NoMatchingListenerHostname, Action::Ignore);
    let ignored = settle(cfg, &objects);
    assert_eq!(
        actions(&ignored),
        [(Reason::ParentNotFound, Action::Warn)],
        "ignored findings leave the outcome"
    );
    assert!(!ignored.denies());
}

#[test]
fn action_parsing_rejects_unknown_reasons_and_actions() {
    for bad in [
        "HostnameConflict",
        "HostnameConflict=",
        "HostnameConflict=audit",
        "hostnameconflict=deny",
        "=deny",
        "Nope=warn",
    ] {
        assert!(Config::parse_action(bad).is_err(), "{bad} should not parse");
    }
    for reason in Reason::ALL {
        for action in ["deny", "warn", "ignore"] {
            let text = format!("{reason}={action}");
            let (parsed, _) = Config::parse_action(&text).unwrap();
            assert_eq!(parsed, reason);
        }
    }
}

#[test]
fn mode_warn_turns_denials_into_warnings() {
    let warn = settle(
        Config {
            mode: Mode::Warn,
            ..Config::default()
        },
        &deny_and_warn(json!({})),
    );
    assert_eq!(
        actions(&warn),
        [
            (Reason::NoMatchingListenerHostname, Action::Warn),
            (Reason::ParentNotFound, Action::Warn)
        ]
    );
    assert!(!warn.denies());
}

#[test]
fn mode_audit_returns_nothing_to_the_user() {
    let mut cfg = Config {
        mode: Mode::Audit,
        ..Config::default()
    };
    cfg.actions.insert(Reason::ParentNotFound, Action::Ignore);
    let audit = settle(cfg, &deny_and_warn(json!({})));
    assert_eq!(
        actions(&audit),
        [(Reason::NoMatchingListenerHostname, Action::Audit)],
        "audit keeps findings for logs and metrics only; ignore still wins"
    );
    assert!(!audit.denies());
}

#[test]
fn namespace_label_overrides_the_mode() {
    let cases = [
        (Mode::Enforce, "warn", Action::Warn),
        (Mode::Enforce, "audit", Action::Audit),
        (Mode::Audit, "enforce", Action::Deny),
        (Mode::Warn, "enforce", Action::Deny),
        // Written by hand in any case, the value means what it says.
        (Mode::Enforce, "Warn", Action::Warn),
        (Mode::Enforce, "AUDIT", Action::Audit),
        (Mode::Warn, "Enforce", Action::Deny),
        // An unknown value leaves the installation's mode in force.
        (Mode::Enforce, "bogus", Action::Deny),
        (Mode::Warn, "bogus", Action::Warn),
    ];
    for (mode, label, expected) in cases {
        let cfg = Config {
            mode,
            ..Config::default()
        };
        let got = settle(cfg, &deny_and_warn(json!({MODE_LABEL: label})));
        let deny = got
            .violations
            .iter()
            .find(|v| v.reason == Reason::NoMatchingListenerHostname)
            .unwrap();
        assert_eq!(deny.action, expected, "mode {mode:?} with label {label}");
    }
}

#[test]
fn namespace_label_applies_only_to_its_namespace() {
    let objects = vec![
        infra(),
        namespace("relaxed", json!({MODE_LABEL: "warn"})),
        namespace("strict", json!({})),
        simple_gateway("infra", "gw1", Some("a.example.com"), &[GW1]),
        http_route("relaxed", "r", on("gw1"), &["b.example.com"]),
        http_route("strict", "r", on("gw1"), &["b.example.com"]),
    ];
    let got = settle_default(&objects);
    assert_eq!(
        only_violation(&got, "HTTPRoute/relaxed/r").action,
        Action::Warn
    );
    assert_eq!(
        only_violation(&got, "HTTPRoute/strict/r").action,
        Action::Deny
    );
}

#[test]
fn action_override_then_mode() {
    // `--action X=deny` under `--mode warn` is still a warning: the mode is the roll-out switch.
    let mut cfg = Config {
        mode: Mode::Warn,
        ..Config::default()
    };
    cfg.actions.insert(Reason::ParentNotFound, Action::Deny);
    let got = settle(cfg, &deny_and_warn(json!({})));
    assert!(!got.denies(), "{:#?}", got.violations);
}

// ---------------------------------------------------------------- records

#[test]
fn records_a_aaaa_and_cname() {
    let got = settle_default(&[
        infra(),
        apps(),
        simple_gateway("infra", "v4", None, &["192.0.2.2", "192.0.2.1"]),
        simple_gateway("infra", "dual", None, &["192.0.2.9", "2001:db8::9"]),
        simple_gateway("infra", "lb", None, &["lb.example.net"]),
        simple_gateway("infra", "mixed", None, &["lb.example.net", "192.0.2.5"]),
        http_route("apps", "a", on("v4"), &["v4.example.com"]),
        http_route("apps", "b", on("dual"), &["dual.example.com"]),
        http_route("apps", "c", on("lb"), &["lb.example.com"]),
        http_route("apps", "d", on("mixed"), &["mixed.example.com"]),
    ]);
    assert_eq!(
        record_summary(&got),
        vec![
            ("dual.example.com".into(), "A", vec!["192.0.2.9".into()]),
            (
                "dual.example.com".into(),
                "AAAA",
                vec!["2001:db8::9".into()]
            ),
            (
                "lb.example.com".into(),
                "CNAME",
                vec!["lb.example.net".into()]
            ),
            // Never a CNAME beside A/AAAA: the addresses win.
            ("mixed.example.com".into(), "A", vec!["192.0.2.5".into()]),
            (
                "v4.example.com".into(),
                "A",
                vec!["192.0.2.1".into(), "192.0.2.2".into()]
            ),
        ]
    );
}

#[test]
fn records_list_gateways_and_routes_sorted() {
    let got = settle_default(&[
        infra(),
        apps(),
        simple_gateway("infra", "gw2", None, &[GW1]),
        simple_gateway("infra", "gw1", None, &[GW1]),
        http_route("apps", "z", on("gw2"), &["a.example.com"]),
        http_route("apps", "y", on("gw1"), &["a.example.com"]),
        route("GRPCRoute", "apps", "x", on("gw1"), &["a.example.com"]),
    ]);
    assert_eq!(got.records.len(), 1);
    assert_eq!(got.records[0].gateways, ["infra/gw1", "infra/gw2"]);
    assert_eq!(
        got.records[0].routes,
        ["GRPCRoute/apps/x", "HTTPRoute/apps/y", "HTTPRoute/apps/z"]
    );
}

// ---------------------------------------------------------------- conflicts

fn conflict_world(gw2_addresses: &[&str], hostname2: &str) -> Outcome {
    settle_default(&[
        infra(),
        apps(),
        simple_gateway("infra", "gw1", None, &[GW1, GW2]),
        simple_gateway("infra", "gw2", None, gw2_addresses),
        created(
            http_route("apps", "first", on("gw1"), &["a.example.com"]),
            "2025-01-01T00:00:00Z",
        ),
        created(
            http_route("apps", "second", on("gw2"), &[hostname2]),
            "2025-01-02T00:00:00Z",
        ),
    ])
}

#[test]
fn conflicts_need_distinct_target_sets() {
    // Same set, listed in another order: one record from both Gateways, no conflict.
    let shared = conflict_world(&[GW2, GW1], "a.example.com");
    assert!(shared.violations.is_empty(), "{:#?}", shared.violations);
    assert_eq!(shared.records.len(), 1);
    assert_eq!(shared.records[0].gateways, ["infra/gw1", "infra/gw2"]);
    assert_eq!(shared.records[0].targets, [GW1, GW2]);
    // An overlapping but different set is a conflict.
    let overlapping = conflict_world(&[GW1], "a.example.com");
    assert_eq!(
        only_violation(&overlapping, "HTTPRoute/apps/second").reason,
        Reason::HostnameConflict
    );
    assert_eq!(overlapping.records[0].targets, [GW1, GW2]);
}

#[test]
fn wildcard_and_exact_names_never_conflict() {
    let got = conflict_world(&["10.9.9.9"], "*.example.com");
    assert!(got.violations.is_empty(), "{:#?}", got.violations);
    assert_eq!(
        record_summary(&got),
        vec![
            ("*.example.com".into(), "A", vec!["10.9.9.9".into()]),
            ("a.example.com".into(), "A", vec![GW1.into(), GW2.into()]),
        ]
    );
}

/// Two routes claiming `a.example.com` through gw1 and gw2; returns (winning Gateway, loser).
fn oldest_wins(first: Value, second: Value) -> (String, String) {
    let got = settle_default(&[
        infra(),
        namespace("a", json!({})),
        namespace("b", json!({})),
        simple_gateway("infra", "gw1", None, &[GW1]),
        simple_gateway("infra", "gw2", None, &[GW2]),
        first,
        second,
    ]);
    assert_eq!(got.records.len(), 1, "{got:#?}");
    assert_eq!(got.violations.len(), 1, "{got:#?}");
    assert_eq!(got.violations[0].reason, Reason::HostnameConflict);
    (
        got.records[0].gateways[0].clone(),
        got.violations[0].object.clone(),
    )
}

#[test]
fn conflict_oldest_route_wins_by_creation_timestamp() {
    // The older route is in the later namespace and on the later Gateway: age decides first.
    let older = created(
        http_route("b", "r", on("gw2"), &["a.example.com"]),
        "2025-01-01T00:00:00Z",
    );
    let newer = created(
        http_route("a", "r", on("gw1"), &["a.example.com"]),
        "2025-06-01T00:00:00+02:00",
    );
    assert_eq!(
        oldest_wins(older, newer),
        ("infra/gw2".into(), "HTTPRoute/a/r".into())
    );
    // A route without timestamp counts as newest.
    let dated = created(
        http_route("b", "r", on("gw2"), &["a.example.com"]),
        "2030-01-01T00:00:00Z",
    );
    let undated = http_route("a", "r", on("gw1"), &["a.example.com"]);
    assert_eq!(
        oldest_wins(undated, dated),
        ("infra/gw2".into(), "HTTPRoute/a/r".into())
    );
}

#[test]
fn conflict_ties_break_by_namespace_then_name() {
    let at = "2025-01-01T00:00:00Z";
    assert_eq!(
        oldest_wins(
            created(http_route("b", "a", on("gw1"), &["a.example.com"]), at),
            created(http_route("a", "z", on("gw2"), &["a.example.com"]), at),
        ),
        ("infra/gw2".into(), "HTTPRoute/b/a".into())
    );
    assert_eq!(
        oldest_wins(
            created(http_route("a", "y", on("gw1"), &["a.example.com"]), at),
            created(http_route("a", "x", on("gw2"), &["a.example.com"]), at),
        ),
        ("infra/gw2".into(), "HTTPRoute/a/y".into())
    );
}

#[test]
fn conflict_within_one_route_breaks_by_gateway() {
    let got = settle_default(&[
        infra(),
        apps(),
        simple_gateway("infra", "gw2", None, &[GW1]),
        simple_gateway("infra", "gw1", None, &[GW2]),
        http_route(
            "apps",
            "r",
            json!([parent("infra", "gw2"), parent("infra", "gw1")]),
            &["a.example.com"],
        ),
    ]);
    assert_eq!(
        record_summary(&got),
        vec![("a.example.com".into(), "A", vec![GW2.into()])]
    );
    let v = only_violation(&got, "HTTPRoute/apps/r");
    assert_finding(
        v,
        Reason::HostnameConflict,
        Action::Deny,
        "spec.hostnames[0]",
        &["a.example.com", "infra/gw1", "infra/gw2"],
    );
}

#[test]
fn conflict_resolution_exclude_publishes_the_name_nowhere() {
    let objects = [
        infra(),
        apps(),
        simple_gateway("infra", "gw1", None, &[GW1]),
        simple_gateway("infra", "gw2", None, &[GW2]),
        created(
            http_route(
                "apps",
                "old",
                on("gw1"),
                &["a.example.com", "b.example.com"],
            ),
            "2025-01-01T00:00:00Z",
        ),
        created(
            http_route("apps", "new", on("gw2"), &["a.example.com"]),
            "2025-02-01T00:00:00Z",
        ),
    ];
    let got = settle(
        Config {
            conflict_resolution: ConflictResolution::Exclude,
            ..Config::default()
        },
        &objects,
    );
    let names: Vec<_> = got.records.iter().map(|r| r.dns_name.as_str()).collect();
    assert_eq!(names, ["b.example.com"], "the other name is untouched");
    for route in ["HTTPRoute/apps/new", "HTTPRoute/apps/old"] {
        assert_finding(
            only_violation(&got, route),
            Reason::HostnameConflict,
            Action::Deny,
            "spec.hostnames[0]",
            &["a.example.com", "infra/gw1", "infra/gw2"],
        );
    }
}

fn conflict_fixture() -> Vec<Value> {
    // Several names, conflicts, ties on timestamps, a ListenerSet, and every reason's trigger.
    let at = "2025-01-01T00:00:00Z";
    vec![
        infra(),
        namespace("a", json!({MODE_LABEL: "warn"})),
        namespace("b", json!({})),
        with(
            simple_gateway("infra", "gw1", Some("*.example.com"), &[GW1]),
            &["spec", "allowedListeners", "namespaces", "from"],
            json!("All"),
        ),
        simple_gateway("infra", "gw2", None, &[GW2, "2001:db8::2"]),
        simple_gateway("infra", "gw3", None, &["lb.example.net"]),
        listener_set("b", "ls", ("infra", "gw1"), "*.ls.example.com"),
        created(
            http_route("a", "r1", on("gw1"), &["x.example.com", "y.example.com"]),
            at,
        ),
        created(http_route("b", "r1", on("gw2"), &["x.example.com"]), at),
        created(
            http_route("b", "r2", on("gw3"), &["y.example.com", "z.example.com"]),
            at,
        ),
        http_route("a", "r3", on("gw2"), &["z.example.com", "*.example.com"]),
        route("GRPCRoute", "a", "g", on("gw1"), &["x.example.com"]),
        http_route(
            "b",
            "ls",
            json!([{"kind": "ListenerSet", "name": "ls"}]),
            &["q.ls.example.com"],
        ),
        http_route("b", "lost", on("nope"), &["x.example.com"]),
        http_route("b", "bad", on("gw1"), &["Bad_Name"]),
        http_route("b", "outside", on("gw1"), &["x.example.org"]),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn a_result_never_depends_on_input_order(
        shuffled in Just(conflict_fixture()).prop_shuffle(),
        exclude in any::<bool>(),
    ) {
        let cfg = Config {
            conflict_resolution: if exclude {
                ConflictResolution::Exclude
            } else {
                ConflictResolution::OldestWins
            },
            ..Config::default()
        };
        let baseline = settle(cfg.clone(), &conflict_fixture());
        prop_assert!(baseline.denies() && !baseline.records.is_empty());
        prop_assert_eq!(settle(cfg, &shuffled), baseline);
    }
}

// ---------------------------------------------------------------- scope

fn scope_world() -> Vec<Value> {
    vec![
        infra(),
        namespace("edge", json!({})),
        apps(),
        namespace("other", json!({})),
        labelled(
            simple_gateway("infra", "public", None, &[GW1]),
            "dns",
            "public",
        ),
        labelled(
            simple_gateway("infra", "private", None, &[GW2]),
            "dns",
            "private",
        ),
        simple_gateway("edge", "public", None, &["10.0.0.3"]),
        labelled(
            annotated(
                http_route("apps", "pub", on("public"), &["pub.example.com"]),
                "team",
                "web",
            ),
            "tier",
            "front",
        ),
        http_route("apps", "priv", on("private"), &["priv.example.com"]),
        http_route(
            "other",
            "edge",
            json!([parent("edge", "public")]),
            &["edge.example.com"],
        ),
    ]
}

fn scoped(scope: Scope) -> (Vec<String>, Vec<(String, Reason)>) {
    let got = settle(
        Config {
            scope,
            ..Config::default()
        },
        &scope_world(),
    );
    (
        got.records.iter().map(|r| r.dns_name.clone()).collect(),
        got.violations
            .iter()
            .map(|v| (v.object.clone(), v.reason))
            .collect(),
    )
}

#[test]
fn scope_gateway_name_namespace_and_selector() {
    let (names, findings) = scoped(Scope::default());
    assert_eq!(
        names,
        ["edge.example.com", "priv.example.com", "pub.example.com"]
    );
    assert!(findings.is_empty());

    let (names, findings) = scoped(Scope {
        gateway_name: Some("public".into()),
        ..Scope::default()
    });
    assert_eq!(names, ["edge.example.com", "pub.example.com"]);
    // A route on a Gateway outside the scope sees its parent as not found.
    assert_eq!(
        findings,
        [("HTTPRoute/apps/priv".into(), Reason::ParentNotFound)]
    );

    let (names, _) = scoped(Scope {
        gateway_name: Some("public".into()),
        gateway_namespace: Some("infra".into()),
        ..Scope::default()
    });
    assert_eq!(names, ["pub.example.com"]);

    let (names, _) = scoped(Scope {
        gateway_selector: Some(selector::parse("dns in (private, internal)").unwrap()),
        ..Scope::default()
    });
    assert_eq!(names, ["priv.example.com"]);

    let (names, _) = scoped(Scope {
        gateway_selector: Some(selector::parse("!dns").unwrap()),
        ..Scope::default()
    });
    assert_eq!(names, ["edge.example.com"]);
}

#[test]
fn scope_route_namespace_selector_and_annotation_filter() {
    let (names, findings) = scoped(Scope {
        namespace: Some("apps".into()),
        ..Scope::default()
    });
    assert_eq!(names, ["priv.example.com", "pub.example.com"]);
    assert!(findings.is_empty());

    let (names, _) = scoped(Scope {
        route_selector: Some(selector::parse("tier=front").unwrap()),
        ..Scope::default()
    });
    assert_eq!(names, ["pub.example.com"]);

    let (names, _) = scoped(Scope {
        route_selector: Some(selector::parse("tier!=front").unwrap()),
        ..Scope::default()
    });
    assert_eq!(names, ["edge.example.com", "priv.example.com"]);

    let (names, _) = scoped(Scope {
        annotation_filter: Some(selector::parse("team in (web)").unwrap()),
        ..Scope::default()
    });
    assert_eq!(names, ["pub.example.com"]);
}

#[test]
fn routes_out_of_scope_have_no_findings_either() {
    let (_, findings) = scoped(Scope {
        namespace: Some("nowhere".into()),
        ..Scope::default()
    });
    assert!(findings.is_empty());
    let got = settle(
        Config {
            scope: Scope {
                namespace: Some("apps".into()),
                ..Scope::default()
            },
            ..Config::default()
        },
        &[
            namespace("other", json!({})),
            http_route("other", "r", json!([]), &["Bad_Name"]),
        ],
    );
    assert!(got.violations.is_empty(), "{:#?}", got.violations);
}

// ---------------------------------------------------------------- API versions

#[test]
fn route_api_versions_behave_alike() {
    let gw = gateway(
        "infra",
        "gw1",
        json!([
            listener("http", "HTTP", None),
            listener("tcp", "TCP", None),
            listener("udp", "UDP", None),
            listener("tls", "TLS", None),
        ]),
        &[GW1],
    );
    let cases = [
        ("gateway.networking.k8s.io/v1", "HTTPRoute"),
        ("gateway.networking.k8s.io/v1beta1", "HTTPRoute"),
        ("gateway.networking.k8s.io/v1", "GRPCRoute"),
        ("gateway.networking.k8s.io/v1", "TLSRoute"),
        ("gateway.networking.k8s.io/v1alpha2", "TLSRoute"),
        ("gateway.networking.k8s.io/v1", "TCPRoute"),
        ("gateway.networking.k8s.io/v1alpha2", "TCPRoute"),
        ("gateway.networking.k8s.io/v1", "UDPRoute"),
        ("gateway.networking.k8s.io/v1alpha2", "UDPRoute"),
    ];
    for (api_version, kind) in cases {
        let r = annotated(
            with(
                route(kind, "apps", "r", on("gw1"), &[]),
                &["apiVersion"],
                json!(api_version),
            ),
            "external-dns.kubernetes.io/hostname",
            "svc.example.com",
        );
        let got = settle_default(&[infra(), apps(), gw.clone(), r]);
        assert_eq!(
            record_summary(&got),
            vec![("svc.example.com".into(), "A", vec![GW1.into()])],
            "{api_version} {kind}"
        );
        assert_eq!(got.records[0].routes, [format!("{kind}/apps/r")]);
    }
    let gw_beta = with(
        simple_gateway("infra", "gw1", None, &[GW1]),
        &["apiVersion"],
        json!("gateway.networking.k8s.io/v1beta1"),
    );
    assert!(matches!(
        decode(&gw_beta),
        gateway_dns::model::Object::Gateway(_)
    ));
}

#[test]
fn unknown_versions_and_groups_are_skipped() {
    for (api_version, kind) in [
        ("gateway.networking.k8s.io/v1alpha1", "HTTPRoute"),
        ("gateway.networking.x-k8s.io/v1alpha1", "HTTPRoute"),
        ("networking.k8s.io/v1", "Ingress"),
        ("v1", "Service"),
    ] {
        let value = json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}});
        assert!(
            gateway_dns::model::decode_value(&value).unwrap().is_none(),
            "{api_version} {kind}"
        );
    }
}

#[test]
fn every_reason_has_a_default_action_as_in_the_table() {
    let table = [
        (Reason::HostnameConflict, Action::Deny),
        (Reason::NoMatchingListenerHostname, Action::Deny),
        (Reason::HostnameOutsideListener, Action::Warn),
        (Reason::InvalidHostname, Action::Deny),
        (Reason::NotAllowedByListeners, Action::Deny),
        (Reason::NoMatchingParent, Action::Warn),
        (Reason::ParentNotFound, Action::Warn),
        (Reason::NoParentRefs, Action::Warn),
        (Reason::GatewayHasNoAddress, Action::Warn),
        (Reason::GatewayNotProgrammed, Action::Warn),
        (Reason::InheritedWildcardHostname, Action::Warn),
        (Reason::TooManyHostnames, Action::Deny),
        (Reason::TooManyParentRefs, Action::Deny),
        (Reason::RouteTargetNotAllowed, Action::Deny),
        (Reason::CnameNotAllowed, Action::Warn),
        (Reason::TtlConflict, Action::Warn),
        (Reason::TargetUnhealthy, Action::Warn),
        (Reason::HostnameOwnedInZone, Action::Deny),
        (Reason::HostnameOwnedByOtherNamespace, Action::Deny),
        (Reason::HostnameNotAllowedForNamespace, Action::Deny),
    ];
    assert_eq!(Reason::ALL.len(), table.len());
    for (reason, action) in table {
        assert_eq!(reason.default_action(), action, "{reason}");
        assert_eq!(reason.as_str().parse::<Reason>().unwrap(), reason);
    }
}

#[test]
fn fixture_triggers_findings_of_many_reasons() {
    // Guards the determinism fixture: it must exercise conflicts and findings, not an empty outcome.
    let got = settle_default(&conflict_fixture());
    let reasons: std::collections::BTreeSet<Reason> =
        got.violations.iter().map(|v| v.reason).collect();
    for reason in [
        Reason::HostnameConflict,
        Reason::ParentNotFound,
        Reason::InvalidHostname,
        Reason::NoMatchingListenerHostname,
    ] {
        assert!(reasons.contains(&reason), "{reason} missing: {got:#?}");
    }
    assert!(
        got.violations
            .iter()
            .any(|v| v.object.starts_with("HTTPRoute/a/") && v.action == Action::Warn),
        "namespace a is in warn mode"
    );
}

#[test]
fn routes_claimed_by_another_controller_are_out_of_scope() {
    let objects = |controller: &str| {
        vec![
            infra(),
            apps(),
            simple_gateway("infra", "gw1", None, &[GW1]),
            annotated(
                http_route("apps", "r", on("gw1"), &["a.example.com", "Bad_Name"]),
                "external-dns.kubernetes.io/controller",
                controller,
            ),
        ]
    };
    let other = settle_default(&objects("someone-else"));
    assert!(
        other.records.is_empty() && other.violations.is_empty(),
        "{other:#?}"
    );
    let ours = settle_default(&objects("dns-controller"));
    assert_eq!(ours.records.len(), 1, "{ours:#?}");
}

#[test]
fn gateways_and_listener_sets_claimed_by_another_controller_are_out_of_scope() {
    let key = "external-dns.kubernetes.io/controller";
    let world = |gateway_controller: Option<&str>, listener_set_controller: Option<&str>| {
        let mut gw = gateway(
            "infra",
            "gw1",
            json!([listener("web", "HTTP", None)]),
            &[GW1],
        );
        gw = with(
            gw,
            &["spec", "allowedListeners"],
            json!({"namespaces": {"from": "All"}}),
        );
        let mut ls = listener_set("infra", "ls", ("infra", "gw1"), "*.team.example.com");
        if let Some(c) = gateway_controller {
            gw = annotated(gw, key, c);
        }
        if let Some(c) = listener_set_controller {
            ls = annotated(ls, key, c);
        }
        settle_default(&[
            infra(),
            gw,
            ls,
            http_route("infra", "direct", on("gw1"), &["a.example.com"]),
            http_route(
                "infra",
                "via-ls",
                json!([{"kind": "ListenerSet", "name": "ls"}]),
                &["app.team.example.com"],
            ),
        ])
    };
    let names = |got: &gateway_dns::engine::Outcome| {
        got.records
            .iter()
            .map(|r| r.dns_name.clone())
            .collect::<Vec<_>>()
    };
    let all = world(None, Some("dns-controller"));
    assert_eq!(names(&all), ["a.example.com", "app.team.example.com"]);
    let gateway_elsewhere = world(Some("someone-else"), None);
    assert!(
        names(&gateway_elsewhere).is_empty(),
        "{gateway_elsewhere:#?}"
    );
    assert!(
        only_violation(&gateway_elsewhere, "HTTPRoute/infra/direct")
            .message
            .contains("another DNS controller (someone-else)")
    );
    let ls_elsewhere = world(None, Some("someone-else"));
    assert_eq!(names(&ls_elsewhere), ["a.example.com"]);
    assert!(
        only_violation(&ls_elsewhere, "HTTPRoute/infra/via-ls")
            .message
            .contains("ListenerSet infra/ls is annotated for another DNS controller")
    );
}
