//! Choosing which Gateway addresses an installation publishes (ARCHITECTURE.md, "Scope"):
//! `--target-cidr` keeps only addresses inside its networks, `--exclude-target-cidr` drops those
//! inside its networks, so one Gateway with public and internal addresses feeds two views.

use gateway_dns::engine::cidr::TargetFilter;
use gateway_dns::engine::{Action, Config, Reason, Scope};

use crate::objects::*;

fn filtered(include: &[&str], exclude: &[&str]) -> Config {
    let parse = |list: &[&str]| list.iter().map(|c| c.parse().unwrap()).collect();
    Config {
        scope: Scope {
            targets: TargetFilter {
                include: parse(include),
                exclude: parse(exclude),
            },
            ..Scope::default()
        },
        ..Config::default()
    }
}

fn dual_homed(addresses: &[&str]) -> Vec<serde_json::Value> {
    vec![
        infra(),
        apps(),
        simple_gateway("infra", "gw", None, addresses),
        http_route("apps", "web", on("gw"), &["app.example.com"]),
    ]
}

const ADDRESSES: [&str; 4] = [
    "10.0.0.10",
    "203.0.113.10",
    "2001:db8::10",
    "lb.example.net",
];

#[test]
fn each_view_publishes_its_own_addresses() {
    let internal = settle(filtered(&["10.0.0.0/8"], &[]), &dual_homed(&ADDRESSES));
    assert_eq!(
        record_summary(&internal),
        [(
            "app.example.com".to_owned(),
            "A",
            vec!["10.0.0.10".to_owned()]
        )]
    );
    assert!(internal.violations.is_empty(), "{internal:#?}");

    let public = settle(
        filtered(&[], &["10.0.0.0/8", "2001:db8::/32"]),
        &dual_homed(&ADDRESSES[..3]),
    );
    assert_eq!(
        record_summary(&public),
        [(
            "app.example.com".to_owned(),
            "A",
            vec!["203.0.113.10".to_owned()]
        )]
    );
    // Both lists: inside the first, outside the second.
    let both = settle(
        filtered(&["0.0.0.0/0", "::/0"], &["10.0.0.0/8"]),
        &dual_homed(&ADDRESSES),
    );
    assert_eq!(
        record_summary(&both),
        [
            (
                "app.example.com".to_owned(),
                "A",
                vec!["203.0.113.10".to_owned()]
            ),
            (
                "app.example.com".to_owned(),
                "AAAA",
                vec!["2001:db8::10".to_owned()]
            ),
        ]
    );
}

#[test]
fn a_gateway_with_no_address_in_the_view_publishes_nothing_and_says_why() {
    let outcome = settle(
        filtered(&["10.0.0.0/8"], &[]),
        &dual_homed(&["203.0.113.10"]),
    );
    assert!(outcome.records.is_empty(), "{outcome:#?}");
    assert_finding(
        only_violation(&outcome, "HTTPRoute/apps/web"),
        Reason::GatewayHasNoAddress,
        Action::Warn,
        "spec.parentRefs[0]",
        &["infra/gw", "--target-cidr"],
    );
}

#[test]
fn conflicts_are_judged_on_the_published_addresses() {
    // Two Gateways that differ only in an address this view leaves out do not conflict here.
    let objects = vec![
        infra(),
        apps(),
        simple_gateway("infra", "a", None, &["10.0.0.10", "203.0.113.10"]),
        simple_gateway("infra", "b", None, &["10.0.0.10", "203.0.113.99"]),
        http_route("apps", "on-a", on("a"), &["app.example.com"]),
        http_route("apps", "on-b", on("b"), &["app.example.com"]),
    ];
    assert!(
        settle(filtered(&["10.0.0.0/8"], &[]), &objects)
            .violations
            .is_empty()
    );
    assert!(
        settle_default(&objects)
            .violations
            .iter()
            .any(|v| v.reason == Reason::HostnameConflict)
    );
}
