//! Names shared on purpose (ARCHITECTURE.md, "Names shared on purpose"): a name on the
//! platform's `--shared-name` list publishes the union of its Gateways' targets and is never a
//! HostnameConflict; every other name keeps the one-Gateway rule.

use gateway_dns::engine::settle::newcomer_conflicts;
use gateway_dns::engine::{Action, Config, Reason, evaluate_route};
use gateway_dns::model::Object;
use serde_json::Value;

use crate::objects::*;

fn shared(names: &[&str]) -> Config {
    Config {
        shared_names: Config::parse_shared_names(
            &names.iter().map(|n| n.to_string()).collect::<Vec<_>>(),
        )
        .unwrap(),
        ..Config::default()
    }
}

fn blue_green(host: &str) -> Vec<Value> {
    vec![
        infra(),
        apps(),
        simple_gateway("infra", "blue", None, &[GW2, "2001:db8::2"]),
        simple_gateway("infra", "green", None, &[GW1]),
        created(
            http_route("apps", "blue", on("blue"), &[host]),
            "2025-01-01T00:00:00Z",
        ),
        created(
            http_route("apps", "green", on("green"), &[host]),
            "2025-06-01T00:00:00Z",
        ),
    ]
}

#[test]
fn a_listed_name_publishes_the_union_of_its_targets() {
    let unlisted = settle_default(&blue_green("app.example.com"));
    assert_eq!(
        only_violation(&unlisted, "HTTPRoute/apps/green").reason,
        Reason::HostnameConflict
    );

    let outcome = settle(shared(&["App.Example.com"]), &blue_green("app.example.com"));
    assert!(outcome.violations.is_empty(), "{outcome:#?}");
    assert_eq!(
        record_summary(&outcome),
        [
            (
                "app.example.com".to_owned(),
                "A",
                vec![GW1.to_owned(), GW2.to_owned()]
            ),
            (
                "app.example.com".to_owned(),
                "AAAA",
                vec!["2001:db8::2".to_owned()]
            ),
        ]
    );
    for record in &outcome.records {
        assert!(record.shared);
        assert_eq!(record.gateways, ["infra/blue", "infra/green"]);
        assert_eq!(
            record.routes,
            ["HTTPRoute/apps/blue", "HTTPRoute/apps/green"]
        );
    }
    // The same whatever order the objects come in.
    let mut reversed = blue_green("app.example.com");
    reversed.reverse();
    assert_eq!(settle(shared(&["app.example.com"]), &reversed), outcome);
}

#[test]
fn the_webhook_never_denies_a_listed_name() {
    let objects = blue_green("app.example.com");
    let (incumbents, newcomer) = objects.split_at(objects.len() - 1);
    let Object::Route(route) = decode(&newcomer[0]) else {
        unreachable!()
    };
    for (cfg, denials) in [(Config::default(), 1), (shared(&["app.example.com"]), 0)] {
        let world = snapshot(cfg.clone(), incumbents);
        let eval = evaluate_route(&world, &cfg, &route);
        assert_eq!(
            newcomer_conflicts(&world, &route, &eval).len(),
            denials,
            "{:?}",
            cfg.shared_names
        );
    }
}

#[test]
fn a_wildcard_entry_covers_every_name_below_its_suffix_only() {
    let cfg = shared(&["*.shared.example.com"]);
    for (host, is_shared) in [
        ("a.shared.example.com", true),
        ("x.y.shared.example.com", true),
        ("shared.example.com", false),
        ("notshared.example.com", false),
        ("a.example.com", false),
    ] {
        assert_eq!(cfg.is_shared_name(host), is_shared, "{host}");
        let outcome = settle(cfg.clone(), &blue_green(host));
        let conflicts = outcome
            .violations
            .iter()
            .filter(|v| v.reason == Reason::HostnameConflict)
            .count();
        assert_eq!(conflicts, usize::from(!is_shared), "{host}: {outcome:#?}");
    }
}

#[test]
fn a_shared_name_whose_targets_cannot_make_one_record_set_says_so() {
    let objects = vec![
        infra(),
        apps(),
        simple_gateway("infra", "ip", None, &[GW1]),
        simple_gateway("infra", "lb", None, &["lb.example.net"]),
        http_route("apps", "by-ip", on("ip"), &["app.example.com"]),
        http_route("apps", "by-lb", on("lb"), &["app.example.com"]),
    ];
    let outcome = settle(shared(&["app.example.com"]), &objects);
    assert_eq!(
        record_summary(&outcome),
        [("app.example.com".to_owned(), "A", vec![GW1.to_owned()])]
    );
    assert_finding(
        only_violation(&outcome, "HTTPRoute/apps/by-lb"),
        Reason::CnameNotAllowed,
        Action::Warn,
        "spec.hostnames[0]",
        &["app.example.com is shared", "lb.example.net"],
    );
}

#[test]
fn shared_names_must_be_dns_names() {
    assert!(Config::parse_shared_names(&["*.example.com".into(), "a.example.com".into()]).is_ok());
    for bad in ["", "a..example.com", "10.0.0.1", "a.*.example.com"] {
        assert!(
            Config::parse_shared_names(&[bad.to_owned()]).is_err(),
            "{bad:?}"
        );
    }
}

/// `explain` says a listed name is shared on purpose, not that its claims have the same targets.
#[test]
fn explain_says_a_listed_name_is_shared_on_purpose() {
    use gateway_dns::engine::explain::{ClaimResult, explain_name};
    let world = snapshot(shared(&["app.example.com"]), &blue_green("app.example.com"));
    let explained = explain_name(&world, "app.example.com");
    assert!(explained.records.iter().all(|r| r.shared), "{explained:#?}");
    let claims: Vec<(ClaimResult, &str)> = explained
        .routes
        .iter()
        .flat_map(|r| r.claims.iter().map(|c| (c.result, c.why.as_str())))
        .collect();
    assert_eq!(claims.len(), 2, "{explained:#?}");
    assert_eq!(claims[0].0, ClaimResult::Wins);
    assert_eq!(claims[1].0, ClaimResult::Shares);
    for (_, why) in &claims {
        assert!(why.contains("shared on purpose"), "{why}");
        assert!(!why.contains("same targets"), "{why}");
    }
}
