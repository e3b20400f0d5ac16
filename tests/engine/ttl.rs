//! Gateway-level defaults (ARCHITECTURE.md, "Names"): a `ttl` annotation on a Gateway or
//! ListenerSet is the TTL of names whose route sets none; different TTLs for one name resolve
//! to the lowest, with `TtlConflict`.

use gateway_dns::engine::settle::newcomer_conflicts;
use gateway_dns::engine::{Action, Config, Reason, evaluate_route};
use gateway_dns::model::Object;
use serde_json::{Value, json};

use crate::objects::*;

const TTL: &str = "external-dns.kubernetes.io/ttl";

fn ttls(objects: &[Value]) -> Vec<(String, Option<u32>)> {
    settle_default(objects)
        .records
        .iter()
        .map(|r| (r.dns_name.clone(), r.ttl))
        .collect()
}

fn gw_with_ttl(ttl: &str) -> Value {
    annotated(
        with(
            simple_gateway("infra", "gw", None, &[GW1]),
            &["spec", "allowedListeners", "namespaces"],
            json!({"from": "All"}),
        ),
        TTL,
        ttl,
    )
}

#[test]
fn a_gateway_ttl_applies_unless_the_route_sets_its_own() {
    let got = ttls(&[
        infra(),
        apps(),
        gw_with_ttl("2m"),
        http_route("apps", "plain", on("gw"), &["plain.example.com"]),
        annotated(
            http_route("apps", "own", on("gw"), &["own.example.com"]),
            TTL,
            "30",
        ),
    ]);
    assert_eq!(
        got,
        [
            ("own.example.com".to_owned(), Some(30)),
            ("plain.example.com".to_owned(), Some(120)),
        ]
    );
}

#[test]
fn a_listener_set_ttl_wins_over_its_gateway() {
    let got = ttls(&[
        infra(),
        apps(),
        gw_with_ttl("120"),
        annotated(
            listener_set("apps", "ls", ("infra", "gw"), "*.ls.example.com"),
            TTL,
            "45",
        ),
        http_route(
            "apps",
            "via-set",
            json!([{"group": "gateway.networking.k8s.io", "kind": "ListenerSet", "name": "ls"}]),
            &["a.ls.example.com"],
        ),
    ]);
    assert_eq!(got, [("a.ls.example.com".to_owned(), Some(45))]);
}

fn sharing(first: &str, second: Option<&str>) -> Vec<Value> {
    let mut second_route = created(
        http_route("apps", "second", on("gw"), &["app.example.com"]),
        "2025-06-01T00:00:00Z",
    );
    if let Some(ttl) = second {
        second_route = annotated(second_route, TTL, ttl);
    }
    vec![
        infra(),
        apps(),
        gw_with_ttl("600"),
        created(
            annotated(
                http_route("apps", "first", on("gw"), &["app.example.com"]),
                TTL,
                first,
            ),
            "2025-01-01T00:00:00Z",
        ),
        second_route,
    ]
}

#[test]
fn different_ttls_for_one_name_publish_the_lowest_with_a_warning() {
    for (first, second, lowest, warned) in [
        ("300", Some("60"), 60, "HTTPRoute/apps/first"),
        ("60", Some("300"), 60, "HTTPRoute/apps/second"),
        // The second route takes its Gateway's 600.
        ("300", None, 300, "HTTPRoute/apps/second"),
    ] {
        let objects = sharing(first, second);
        let outcome = settle_default(&objects);
        assert_eq!(outcome.records[0].ttl, Some(lowest), "{first} {second:?}");
        let finding = only_violation(&outcome, warned);
        assert_finding(
            finding,
            Reason::TtlConflict,
            Action::Warn,
            "spec.hostnames[0]",
            &["app.example.com", &format!("the lowest, {lowest}")],
        );
        assert_eq!(outcome.violations.len(), 1, "{outcome:#?}");
        let mut reversed = objects.clone();
        reversed.reverse();
        assert_eq!(settle_default(&reversed), outcome, "order does not matter");
    }
    assert!(
        settle_default(&sharing("60", Some("60")))
            .violations
            .is_empty()
    );
}

#[test]
fn the_webhook_warns_a_newcomer_asking_for_a_higher_ttl() {
    let objects = sharing("60", None);
    let incumbents = &objects[..objects.len() - 1];
    let world = snapshot(Config::default(), incumbents);
    for (ttl, warned) in [("3600", true), ("30", false), ("60", false)] {
        let Object::Route(route) = decode(&annotated(
            http_route("apps", "newcomer", on("gw"), &["app.example.com"]),
            TTL,
            ttl,
        )) else {
            unreachable!()
        };
        let eval = evaluate_route(&world, &Config::default(), &route);
        let found = newcomer_conflicts(&world, &route, &eval);
        assert_eq!(found.len(), usize::from(warned), "{ttl}: {found:#?}");
        if warned {
            assert_finding(
                &found[0],
                Reason::TtlConflict,
                Action::Warn,
                "spec.hostnames[0]",
                &["TTL 3600", "HTTPRoute apps/first", "60"],
            );
        }
    }
}
