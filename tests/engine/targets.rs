//! Target overrides on routes (ARCHITECTURE.md, "Names"): the external-dns target annotation on
//! a route replaces its Gateway's addresses for its names; conflicts compare the overridden
//! targets; a platform team can forbid it per namespace.

use gateway_dns::engine::settle::newcomer_conflicts;
use gateway_dns::engine::{Action, Config, ROUTE_TARGETS_LABEL, Reason, evaluate_route};
use gateway_dns::model::Object;
use serde_json::{Value, json};

use crate::objects::*;

const TARGET: &str = "external-dns.kubernetes.io/target";
const ALPHA_TARGET: &str = "external-dns.alpha.kubernetes.io/target";

fn gw() -> Value {
    simple_gateway("infra", "gw", Some("*.example.com"), &[GW1])
}

fn route_with_target(name: &str, host: &str, key: &str, target: &str) -> Value {
    annotated(http_route("apps", name, on("gw"), &[host]), key, target)
}

fn summary(cfg: Config, objects: &[Value]) -> Vec<(String, &'static str, Vec<String>)> {
    record_summary(&settle(cfg, objects))
}

#[test]
fn a_route_target_replaces_the_gateway_addresses_under_either_prefix() {
    for key in [TARGET, ALPHA_TARGET] {
        let got = summary(
            Config::default(),
            &[
                infra(),
                apps(),
                gw(),
                route_with_target("web", "app.example.com", key, "198.51.100.7, 2001:db8::7"),
                http_route("apps", "plain", on("gw"), &["plain.example.com"]),
            ],
        );
        assert_eq!(
            got,
            [
                (
                    "app.example.com".to_owned(),
                    "A",
                    vec!["198.51.100.7".to_owned()]
                ),
                (
                    "app.example.com".to_owned(),
                    "AAAA",
                    vec!["2001:db8::7".to_owned()]
                ),
                ("plain.example.com".to_owned(), "A", vec![GW1.to_owned()]),
            ],
            "{key}"
        );
    }
}

#[test]
fn a_hostname_target_is_a_cname() {
    let got = summary(
        Config::default(),
        &[
            infra(),
            apps(),
            gw(),
            route_with_target("web", "app.example.com", TARGET, "LB.Example.NET."),
        ],
    );
    assert_eq!(
        got,
        [(
            "app.example.com".to_owned(),
            "CNAME",
            vec!["lb.example.net".to_owned()]
        )]
    );
}

#[test]
fn a_route_target_wins_over_the_gateway_target_and_needs_no_gateway_address() {
    let annotated_gw = annotated(
        simple_gateway("infra", "gw", Some("*.example.com"), &[]),
        TARGET,
        "gw-lb.example.net",
    );
    let outcome = settle_default(&[
        infra(),
        apps(),
        annotated_gw,
        route_with_target("web", "app.example.com", TARGET, "203.0.113.99"),
        http_route("apps", "plain", on("gw"), &["plain.example.com"]),
    ]);
    assert_eq!(
        record_summary(&outcome),
        [
            (
                "app.example.com".to_owned(),
                "A",
                vec!["203.0.113.99".to_owned()]
            ),
            (
                "plain.example.com".to_owned(),
                "CNAME",
                vec!["gw-lb.example.net".to_owned()]
            ),
        ]
    );
    assert!(outcome.violations.is_empty(), "{outcome:#?}");
}

#[test]
fn routes_on_one_gateway_with_different_targets_conflict_and_the_newcomer_loses() {
    let older = created(
        route_with_target("first", "app.example.com", TARGET, "198.51.100.1"),
        "2025-01-01T00:00:00Z",
    );
    let newer = created(
        route_with_target("second", "app.example.com", TARGET, "198.51.100.2"),
        "2025-06-01T00:00:00Z",
    );
    let outcome = settle_default(&[infra(), apps(), gw(), older.clone(), newer.clone()]);
    assert_eq!(
        record_summary(&outcome),
        [(
            "app.example.com".to_owned(),
            "A",
            vec!["198.51.100.1".to_owned()]
        )]
    );
    assert_finding(
        only_violation(&outcome, "HTTPRoute/apps/second"),
        Reason::HostnameConflict,
        Action::Deny,
        "spec.hostnames[0]",
        &[
            "app.example.com",
            "infra/gw",
            "198.51.100.1",
            "198.51.100.2",
            "HTTPRoute apps/first",
            "target annotation",
        ],
    );

    // The webhook's view: the newcomer is denied, even against a route without an override.
    let world = snapshot(Config::default(), &[infra(), apps(), gw(), older]);
    let Object::Route(route) = decode(&newer) else {
        unreachable!()
    };
    let eval = evaluate_route(&world, &Config::default(), &route);
    let denials = newcomer_conflicts(&world, &route, &eval);
    assert_eq!(denials.len(), 1, "{denials:#?}");
    assert_eq!(denials[0].reason, Reason::HostnameConflict);
    let world = snapshot(
        Config::default(),
        &[
            infra(),
            apps(),
            gw(),
            http_route("apps", "first", on("gw"), &["app.example.com"]),
        ],
    );
    let denials = newcomer_conflicts(&world, &route, &eval);
    assert_eq!(denials.len(), 1, "{denials:#?}");
    assert!(denials[0].message.contains(GW1), "{denials:#?}");
}

#[test]
fn routes_with_the_same_target_share_the_name() {
    let outcome = settle_default(&[
        infra(),
        apps(),
        gw(),
        route_with_target("first", "app.example.com", TARGET, "198.51.100.1"),
        route_with_target("second", "app.example.com", ALPHA_TARGET, "198.51.100.1"),
    ]);
    assert!(outcome.violations.is_empty(), "{outcome:#?}");
    assert_eq!(
        outcome.records[0].routes,
        ["HTTPRoute/apps/first", "HTTPRoute/apps/second"]
    );
}

#[test]
fn route_targets_can_be_forbidden_by_flag_or_namespace_label() {
    let objects = |apps_labels: Value| {
        vec![
            infra(),
            namespace("apps", apps_labels),
            gw(),
            route_with_target("web", "app.example.com", TARGET, "198.51.100.7"),
        ]
    };
    let forbidding_flag = Config {
        allow_route_targets: false,
        ..Config::default()
    };
    for (cfg, labels, allowed) in [
        (Config::default(), json!({}), true),
        (forbidding_flag.clone(), json!({}), false),
        (
            Config::default(),
            json!({ROUTE_TARGETS_LABEL: "forbid"}),
            false,
        ),
        (
            forbidding_flag.clone(),
            json!({ROUTE_TARGETS_LABEL: "allow"}),
            true,
        ),
        // In any case, as the mode label.
        (
            Config::default(),
            json!({ROUTE_TARGETS_LABEL: "Forbid"}),
            false,
        ),
        (
            forbidding_flag.clone(),
            json!({ROUTE_TARGETS_LABEL: "ALLOW"}),
            true,
        ),
        // An unknown value keeps the flag's choice.
        (
            forbidding_flag,
            json!({ROUTE_TARGETS_LABEL: "maybe"}),
            false,
        ),
    ] {
        let outcome = settle(cfg, &objects(labels.clone()));
        let target = if allowed { "198.51.100.7" } else { GW1 };
        assert_eq!(
            record_summary(&outcome),
            [("app.example.com".to_owned(), "A", vec![target.to_owned()])],
            "{labels}"
        );
        if allowed {
            assert!(outcome.violations.is_empty(), "{outcome:#?}");
        } else {
            assert_finding(
                only_violation(&outcome, "HTTPRoute/apps/web"),
                Reason::RouteTargetNotAllowed,
                Action::Deny,
                "metadata.annotations[external-dns.kubernetes.io/target]",
                &["namespace apps", "Gateway"],
            );
        }
    }
}
