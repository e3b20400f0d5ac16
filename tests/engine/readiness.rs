//! Readiness (ARCHITECTURE.md, "Readiness"): a Gateway whose status says it is not programmed
//! (or whose listeners a route attaches through say so, or conflict) gives its addresses to a
//! name only when no other Gateway of the name can; a name is never left without an answer.

use gateway_dns::engine::{Action, Config, Reason};
use serde_json::{Value, json};

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

/// The Gateway with `status.conditions` holding `Programmed` = `status`, observed at
/// `observed` (the Gateway's generation is 2).
fn programmed(gateway: Value, status: &str, observed: i64) -> Value {
    let gateway = with(gateway, &["metadata", "generation"], json!(2));
    with(
        gateway,
        &["status", "conditions"],
        json!([{"type": "Programmed", "status": status, "observedGeneration": observed}]),
    )
}

/// The Gateway's listener `https` reports `kind` = `status`.
fn listener_condition(gateway: Value, kind: &str, status: &str) -> Value {
    with(
        gateway,
        &["status", "listeners"],
        json!([{"name": "https", "conditions": [{"type": kind, "status": status}]}]),
    )
}

/// Two Gateways (`blue` with GW2, `green` with GW1), each with a route claiming `host`; the
/// Gateways pass through `blue_as` and `green_as` first.
fn two_gateways(
    host: &str,
    blue_as: fn(Value) -> Value,
    green_as: fn(Value) -> Value,
) -> Vec<Value> {
    vec![
        infra(),
        apps(),
        blue_as(simple_gateway("infra", "blue", None, &[GW2])),
        green_as(simple_gateway("infra", "green", None, &[GW1])),
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

fn a_records(outcome: &gateway_dns::engine::settle::Outcome) -> Vec<Vec<String>> {
    outcome.records.iter().map(|r| r.targets.clone()).collect()
}

fn not_programmed(gateway: Value) -> Value {
    programmed(gateway, "False", 2)
}

fn same(gateway: Value) -> Value {
    gateway
}

#[test]
fn a_shared_name_leaves_out_a_gateway_that_is_not_programmed() {
    let cfg = || shared(&["app.example.com"]);
    let both = settle(cfg(), &two_gateways("app.example.com", same, same));
    assert_eq!(a_records(&both), [vec![GW1.to_owned(), GW2.to_owned()]]);

    let outcome = settle(
        cfg(),
        &two_gateways("app.example.com", same, not_programmed),
    );
    assert_eq!(a_records(&outcome), [vec![GW2.to_owned()]], "{outcome:#?}");
    assert_eq!(outcome.records[0].gateways, ["infra/blue"]);
    assert_eq!(outcome.records[0].routes, ["HTTPRoute/apps/blue"]);
    // Another Gateway serves the name: nothing to warn about.
    assert!(outcome.violations.is_empty(), "{outcome:#?}");

    // Programmed again (True, or a condition of an older generation): both again.
    for back in [programmed as fn(Value, &str, i64) -> Value, |g, _, _| {
        programmed(g, "False", 1)
    }] {
        let objects: Vec<Value> = two_gateways("app.example.com", same, same)
            .into_iter()
            .map(|o| {
                if o["metadata"]["name"] == "green" && o["kind"] == "Gateway" {
                    back(o, "True", 2)
                } else {
                    o
                }
            })
            .collect();
        assert_eq!(settle(cfg(), &objects), both);
    }
}

#[test]
fn a_name_with_no_other_target_keeps_its_records_and_says_why() {
    for objects in [
        two_gateways("app.example.com", not_programmed, not_programmed),
        vec![
            infra(),
            apps(),
            not_programmed(simple_gateway("infra", "blue", None, &[GW2])),
            http_route("apps", "blue", on("blue"), &["app.example.com"]),
        ],
    ] {
        let cfg = shared(&["app.example.com"]);
        let outcome = settle(cfg.clone(), &objects);
        let mut expected = vec![GW2.to_owned()];
        if objects.len() > 4 {
            expected.insert(0, GW1.to_owned());
        }
        assert_eq!(a_records(&outcome), [expected], "{outcome:#?}");
        let route = only_violation(&outcome, "HTTPRoute/apps/blue");
        assert_eq!(route.reason, Reason::GatewayNotProgrammed);
        assert_eq!(route.action, Action::Warn);
        assert_eq!(route.hostname.as_deref(), Some("app.example.com"));
        assert!(
            route.message.contains("infra/blue") && route.message.contains(GW2),
            "{}",
            route.message
        );
        let gateway = only_violation(&outcome, "Gateway/infra/blue");
        assert_eq!(gateway.reason, Reason::GatewayNotProgrammed);
        assert_eq!(gateway.field, "status.conditions");
    }
}

#[test]
fn a_listener_not_programmed_or_conflicted_counts_for_the_routes_it_takes() {
    for (kind, status) in [("Programmed", "False"), ("Conflicted", "True")] {
        let objects: Vec<Value> = two_gateways("app.example.com", same, same)
            .into_iter()
            .map(|o| {
                if o["metadata"]["name"] == "green" && o["kind"] == "Gateway" {
                    listener_condition(o, kind, status)
                } else {
                    o
                }
            })
            .collect();
        let outcome = settle(shared(&["app.example.com"]), &objects);
        assert_eq!(a_records(&outcome), [vec![GW2.to_owned()]], "{kind}");
    }
    // A listener that says all is well changes nothing.
    let objects: Vec<Value> = two_gateways("app.example.com", same, |g| {
        listener_condition(g, "Programmed", "True")
    });
    let outcome = settle(shared(&["app.example.com"]), &objects);
    assert_eq!(a_records(&outcome), [vec![GW1.to_owned(), GW2.to_owned()]]);
}

#[test]
fn publish_unprogrammed_restores_every_target_without_a_finding() {
    let cfg = Config {
        publish_unprogrammed: true,
        ..shared(&["app.example.com"])
    };
    let outcome = settle(
        cfg,
        &two_gateways("app.example.com", not_programmed, not_programmed),
    );
    assert_eq!(a_records(&outcome), [vec![GW1.to_owned(), GW2.to_owned()]]);
    assert!(outcome.violations.is_empty(), "{outcome:#?}");
}

/// A Gateway that is not programmed still holds its names against newcomers: readiness decides
/// what is published, never who owns a name.
#[test]
fn readiness_does_not_decide_conflicts() {
    let outcome = settle_default(&two_gateways("app.example.com", not_programmed, same));
    assert_eq!(a_records(&outcome), [vec![GW2.to_owned()]], "{outcome:#?}");
    assert_eq!(
        only_violation(&outcome, "HTTPRoute/apps/green").reason,
        Reason::HostnameConflict
    );
    assert_eq!(
        violations_of(&outcome, "HTTPRoute/apps/blue")[0].reason,
        Reason::GatewayNotProgrammed
    );
}

/// `explain` says, per claim, what readiness made of its targets.
#[test]
fn explain_says_which_targets_readiness_left_out() {
    use gateway_dns::engine::explain::explain_name;
    let claims = |objects: &[Value]| -> Vec<(String, bool, String)> {
        let world = snapshot(shared(&["app.example.com"]), objects);
        explain_name(&world, "app.example.com")
            .routes
            .iter()
            .flat_map(|r| {
                r.claims
                    .iter()
                    .map(|c| (c.gateway.clone(), c.programmed, c.why.clone()))
            })
            .collect()
    };
    let left_out = claims(&two_gateways("app.example.com", same, not_programmed));
    assert_eq!(left_out.len(), 2);
    for (gateway, programmed, why) in &left_out {
        assert_eq!(*programmed, gateway == "infra/blue", "{left_out:#?}");
        assert_eq!(why.contains("left out"), gateway == "infra/green", "{why}");
    }
    let kept = claims(&two_gateways(
        "app.example.com",
        not_programmed,
        not_programmed,
    ));
    for (_, programmed, why) in &kept {
        assert!(!programmed);
        assert!(why.contains("so its targets stay"), "{why}");
    }
}

/// The webhook tells a newcomer whose name would resolve only through Gateways that say they
/// are not programmed; a name another Gateway serves gets no such word.
#[test]
fn the_webhook_warns_a_newcomer_whose_name_only_unprogrammed_gateways_serve() {
    use gateway_dns::engine::admission::route_findings;
    use gateway_dns::model::Object;
    let findings = |objects: &[Value]| {
        let (incumbents, newcomer) = objects.split_at(objects.len() - 1);
        let Object::Route(route) = decode(&newcomer[0]) else {
            unreachable!()
        };
        let world = snapshot(shared(&["app.example.com"]), incumbents);
        route_findings(&world, &route)
    };
    let warned = findings(&two_gateways(
        "app.example.com",
        not_programmed,
        not_programmed,
    ));
    assert_eq!(warned.len(), 1, "{warned:#?}");
    assert_eq!(warned[0].reason, Reason::GatewayNotProgrammed);
    assert_eq!(warned[0].action, Action::Warn);
    assert!(
        warned[0].message.contains("infra/green"),
        "{}",
        warned[0].message
    );
    for objects in [
        two_gateways("app.example.com", same, not_programmed),
        two_gateways("app.example.com", not_programmed, same),
    ] {
        let quiet = findings(&objects);
        assert!(quiet.is_empty(), "{quiet:#?}");
    }
}
