//! Health checks as the engine reads them (ARCHITECTURE.md, "Health checks"): a target failing
//! its probes leaves every name that has another healthy target, and a name never loses its
//! last one (the DNS fails open). The failing targets are plain data set on the index.

use std::sync::Arc;

use gateway_dns::engine::explain::explain_name;
use gateway_dns::engine::health::{TargetHealth, Unhealthy};
use gateway_dns::engine::settle::{newcomer_conflicts, settle_all};
use gateway_dns::engine::{Action, Config, Outcome, Reason, evaluate_route};
use gateway_dns::index::Index;
use gateway_dns::model::{Address, Object};
use serde_json::Value;

use crate::objects::*;

const GW3: &str = "10.0.0.3";
const HOST: &str = "app.example.com";

fn shared(names: &[&str]) -> Config {
    Config {
        shared_names: Config::parse_shared_names(
            &names.iter().map(|n| n.to_string()).collect::<Vec<_>>(),
        )
        .unwrap(),
        ..Config::default()
    }
}

/// Three Gateways (`a` at GW1, `b` at GW2, `c` at GW3), each with a route claiming [`HOST`].
fn three_gateways() -> Vec<Value> {
    let mut objects = vec![infra(), apps()];
    for (name, address) in [("a", GW1), ("b", GW2), ("c", GW3)] {
        objects.push(simple_gateway("infra", name, None, &[address]));
        objects.push(created(
            http_route("apps", name, on(name), &[HOST]),
            "2025-01-01T00:00:00Z",
        ));
    }
    objects
}

fn index(cfg: Config, objects: &[Value]) -> Index {
    let index = Index::with_config(Arc::new(cfg));
    for object in objects {
        index.apply(decode(object));
    }
    index
}

/// Failing targets: (Gateway `namespace/name`, address).
fn failing(targets: &[(&str, &str)]) -> TargetHealth {
    let mut health = TargetHealth::new();
    for (gateway, address) in targets {
        health.set_unhealthy(
            gateway,
            Address::parse(address).unwrap(),
            Unhealthy {
                since: 1_700_000_000,
                error: "connection refused".into(),
            },
        );
    }
    health
}

fn outcome(index: &Index) -> Outcome {
    settle_all(&*index.snapshot())
}

fn targets_of(outcome: &Outcome) -> Vec<Vec<String>> {
    outcome.records.iter().map(|r| r.targets.clone()).collect()
}

#[test]
fn a_failing_target_leaves_a_shared_name_that_others_serve() {
    let index = index(shared(&[HOST]), &three_gateways());
    let healthy = outcome(&index);
    assert_eq!(targets_of(&healthy), [vec![GW1, GW2, GW3]]);

    assert!(index.set_target_health(failing(&[("infra/a", GW1)])));
    let one_down = outcome(&index);
    assert_eq!(targets_of(&one_down), [vec![GW2, GW3]], "{one_down:#?}");
    // Health decides what the name publishes, never who holds it: every route stays behind it.
    assert_eq!(one_down.records[0].routes, healthy.records[0].routes);
    let finding = only_violation(&one_down, "Gateway/infra/a");
    assert_eq!(finding.reason, Reason::TargetUnhealthy);
    assert_eq!(finding.action, Action::Warn);
    assert_eq!(finding.field, "status.addresses");
    assert!(
        finding.message.contains(GW1)
            && finding.message.contains("connection refused")
            && finding.message.contains("left out of app.example.com"),
        "{}",
        finding.message
    );
    assert_eq!(one_down.violations.len(), 1, "{one_down:#?}");

    // The same health again changes nothing: no new snapshot, nothing for the sync loop.
    assert!(!index.set_target_health(failing(&[("infra/a", GW1)])));
    // Passing again: back in the name, and the finding goes.
    assert!(index.set_target_health(TargetHealth::new()));
    assert_eq!(outcome(&index), healthy);
}

#[test]
fn the_last_healthy_target_is_never_removed() {
    let index = index(shared(&[HOST]), &three_gateways());
    index.set_target_health(failing(&[("infra/a", GW1), ("infra/b", GW2)]));
    let two_down = outcome(&index);
    assert_eq!(targets_of(&two_down), [vec![GW3]]);

    // Every target fails: the name keeps them all (fails open) and each Gateway is told.
    index.set_target_health(failing(&[
        ("infra/a", GW1),
        ("infra/b", GW2),
        ("infra/c", GW3),
    ]));
    let all_down = outcome(&index);
    assert_eq!(
        targets_of(&all_down),
        [vec![GW1, GW2, GW3]],
        "{all_down:#?}"
    );
    for gateway in ["a", "b", "c"] {
        let finding = only_violation(&all_down, &format!("Gateway/infra/{gateway}"));
        assert_eq!(finding.reason, Reason::TargetUnhealthy);
        assert!(
            finding
                .message
                .contains("still published for app.example.com, which has no healthy target left"),
            "{}",
            finding.message
        );
    }
}

#[test]
fn a_gateway_with_several_addresses_keeps_the_ones_that_pass() {
    let objects = vec![
        infra(),
        apps(),
        simple_gateway("infra", "gw", None, &[GW1, GW2]),
        http_route("apps", "web", on("gw"), &[HOST]),
    ];
    let index = index(Config::default(), &objects);
    index.set_target_health(failing(&[("infra/gw", GW2)]));
    assert_eq!(targets_of(&outcome(&index)), [vec![GW1]]);

    // A sole address that fails stays: a name with one target keeps it.
    let sole = vec![
        infra(),
        apps(),
        simple_gateway("infra", "gw", None, &[GW1]),
        http_route("apps", "web", on("gw"), &[HOST]),
    ];
    let index = self::index(Config::default(), &sole);
    index.set_target_health(failing(&[("infra/gw", GW1)]));
    let kept = outcome(&index);
    assert_eq!(targets_of(&kept), [vec![GW1]]);
    assert_eq!(
        only_violation(&kept, "Gateway/infra/gw").reason,
        Reason::TargetUnhealthy
    );
    // No route is told: the finding is the Gateway's.
    assert!(violations_of(&kept, "HTTPRoute/apps/web").is_empty());
}

#[test]
fn an_address_two_gateways_share_serves_while_either_passes() {
    let mut objects = vec![infra(), apps()];
    for (name, addresses) in [("a", [GW1, GW3]), ("b", [GW2, GW3])] {
        objects.push(simple_gateway("infra", name, None, &addresses));
        objects.push(http_route("apps", name, on(name), &[HOST]));
    }
    let index = index(shared(&[HOST]), &objects);
    index.set_target_health(failing(&[("infra/a", GW3)]));
    assert_eq!(targets_of(&outcome(&index)), [vec![GW1, GW2, GW3]]);
    index.set_target_health(failing(&[("infra/a", GW3), ("infra/b", GW3)]));
    assert_eq!(targets_of(&outcome(&index)), [vec![GW1, GW2]]);
}

#[test]
fn health_changes_no_conflict_rule_of_the_webhook() {
    let index = index(shared(&[HOST]), &three_gateways());
    let newcomer = decode(&created(
        http_route("apps", "new", on("a"), &[HOST]),
        "2026-01-01T00:00:00Z",
    ));
    let Object::Route(route) = newcomer else {
        panic!("a route")
    };
    let judged = |index: &Index| {
        let snapshot = index.snapshot();
        let eval = evaluate_route(&*snapshot, &index.config(), &route);
        newcomer_conflicts(&*snapshot, &route, &eval)
    };
    let before = judged(&index);
    index.set_target_health(failing(&[
        ("infra/a", GW1),
        ("infra/b", GW2),
        ("infra/c", GW3),
    ]));
    assert_eq!(judged(&index), before);
}

#[test]
fn explain_shows_each_failing_target_and_what_became_of_it() {
    let index = index(shared(&[HOST]), &three_gateways());
    index.set_target_health(failing(&[("infra/a", GW1)]));
    let explained = explain_name(&*index.snapshot(), HOST);
    let claim_of = |route: &str| {
        explained
            .routes
            .iter()
            .find(|r| r.route == route)
            .map(|r| r.claims[0].clone())
            .unwrap()
    };
    let a = claim_of("HTTPRoute/apps/a");
    assert_eq!(a.failing_targets.len(), 1, "{a:#?}");
    assert_eq!(a.failing_targets[0].target, GW1);
    assert_eq!(a.failing_targets[0].last_error, "connection refused");
    assert!(a.failing_targets[0].left_out);
    assert_eq!(
        a.failing_targets[0].since.as_deref(),
        Some("2023-11-14T22:13:20Z")
    );
    assert!(a.why.contains("left out"), "{}", a.why);
    assert!(claim_of("HTTPRoute/apps/b").failing_targets.is_empty());
    let json = serde_json::to_value(&a).unwrap();
    assert_eq!(json["failingTargets"][0]["lastError"], "connection refused");
    assert!(
        serde_json::to_value(claim_of("HTTPRoute/apps/b"))
            .unwrap()
            .get("failingTargets")
            .is_none(),
        "no key when nothing fails: explain's JSON is unchanged"
    );
}
