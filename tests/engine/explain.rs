//! `engine::explain`: the explanation of a name and of a route, over the seed story of
//! examples/cluster and a wildcard listener. Every explanation is checked against what the
//! engine publishes and reports (`settle_all`), so the two cannot drift apart.

use gateway_dns::engine::explain::{
    ExplainError, Fate, NameExplanation, explain_name, explain_route, parse_name,
};
use gateway_dns::engine::settle::settle_all;
use gateway_dns::engine::{Config, ConflictResolution, Mode};
use gateway_dns::index::Snapshot;
use gateway_dns::model::ObjectKind;
use serde_json::{Value, json};

use crate::objects::*;

/// The objects of examples/cluster (the seed story).
fn seed_story(cfg: Config) -> Snapshot {
    let dir = crate_dir().join("examples/cluster");
    let values: Vec<Value> = ["gateways.yaml", "routes.yaml"]
        .iter()
        .flat_map(|file| yaml_documents(&dir.join(file)))
        .collect();
    snapshot(cfg, &values)
}

fn route<'a>(
    explanation: &'a NameExplanation,
    name: &str,
) -> &'a gateway_dns::engine::explain::RouteOnName {
    explanation
        .routes
        .iter()
        .find(|r| r.route == name)
        .unwrap_or_else(|| panic!("{name} in {explanation:#?}"))
}

/// The explanation's records and findings are the ones `check` and the sync loop get.
fn assert_agrees_with_engine(world: &Snapshot, explanation: &NameExplanation) {
    let outcome = settle_all(world);
    let records: Vec<_> = outcome
        .records
        .iter()
        .filter(|r| r.dns_name == explanation.name)
        .cloned()
        .collect();
    assert_eq!(explanation.records, records);
    for route in &explanation.routes {
        for finding in &route.findings {
            assert!(
                outcome.violations.iter().any(|v| v.object == route.route
                    && v.reason.as_str() == finding.reason
                    && v.action.as_str() == finding.action
                    && v.message == finding.message
                    && v.field == finding.field),
                "{finding:?} of {} is not among the engine's findings: {:#?}",
                route.route,
                outcome.violations
            );
        }
    }
}

#[test]
fn seed_story_names_the_winner_and_the_loser_with_their_reasons() {
    let world = seed_story(Config::default());
    let b = explain_name(&world, "b.example.com");
    assert_agrees_with_engine(&world, &b);
    assert!(b.resolves);
    assert!(b.denied(), "the loser's claim is denied");
    assert_eq!(b.winner.as_deref(), Some("HTTPRoute/apps/b1"));
    let order: Vec<&str> = b.routes.iter().map(|r| r.route.as_str()).collect();
    assert_eq!(order, ["HTTPRoute/apps/b1", "HTTPRoute/apps/b2"]);

    let b1 = route(&b, "HTTPRoute/apps/b1");
    assert_eq!(b1.fate, Fate::Published);
    assert_eq!(b1.created.as_deref(), Some("2026-01-12T09:00:00Z"));
    assert_eq!(b1.claims.len(), 1);
    assert_eq!(b1.claims[0].result.as_str(), "wins");
    assert_eq!(b1.claims[0].rank, 1);
    assert_eq!(b1.claims[0].gateway, "infra/gw1");
    assert_eq!(b1.claims[0].targets, ["203.0.113.10"]);
    assert_eq!(
        b1.why,
        "keeps the name: oldest claim wins: HTTPRoute/apps/b1 was created 2026-01-12T09:00:00Z, \
         before HTTPRoute/apps/b2 (created 2026-01-13T09:00:00Z)"
    );
    assert!(b1.findings.is_empty(), "{:?}", b1.findings);
    let parent = &b1.parents[0];
    assert!(parent.attached);
    assert_eq!(parent.parent, "Gateway/infra/gw1");
    assert_eq!(parent.listeners[0].name, "https");
    assert_eq!(
        parent.listeners[0].hostname.as_deref(),
        Some("*.example.com")
    );
    assert_eq!(parent.listeners[0].hostnames, ["b.example.com"]);

    let b2 = route(&b, "HTTPRoute/apps/b2");
    assert_eq!(b2.fate, Fate::Denied);
    assert_eq!(b2.claims[0].result.as_str(), "loses");
    assert_eq!(b2.claims[0].rank, 2);
    assert_eq!(
        b2.claims[0].decided_by.map(|k| k.as_str()),
        Some("creationTimestamp")
    );
    assert_eq!(b2.claims[0].targets, ["203.0.113.20"]);
    assert_eq!(b2.findings.len(), 1, "{:?}", b2.findings);
    assert_eq!(b2.findings[0].reason, "HostnameConflict");
    assert_eq!(b2.findings[0].action, "deny");
    assert!(
        b2.why.starts_with(&b2.findings[0].message) && b2.why.contains("oldest claim wins"),
        "{}",
        b2.why
    );

    let records: Vec<(&str, &str, &[String])> = b
        .records
        .iter()
        .map(|r| {
            (
                r.dns_name.as_str(),
                r.record_type.as_str(),
                r.targets.as_slice(),
            )
        })
        .collect();
    assert_eq!(
        records,
        [("b.example.com", "A", &["203.0.113.10".to_owned()][..])]
    );
}

#[test]
fn seed_story_shared_names_and_names_outside_the_listener() {
    let world = seed_story(Config::default());
    let a = explain_name(&world, "a.example.com");
    assert_agrees_with_engine(&world, &a);
    assert!(a.resolves && !a.denied());
    let results: Vec<(&str, &str)> = a
        .routes
        .iter()
        .map(|r| (r.route.as_str(), r.claims[0].result.as_str()))
        .collect();
    assert_eq!(
        results,
        [
            ("HTTPRoute/apps/a1", "wins"),
            ("HTTPRoute/apps/a2", "shares")
        ]
    );

    // d1 asks for a name its Gateway's listener does not serve: no claim, a denial.
    let d = explain_name(&world, "d.example.com");
    assert_agrees_with_engine(&world, &d);
    assert!(!d.resolves);
    assert_eq!(d.winner, None);
    let d1 = route(&d, "HTTPRoute/apps/d1");
    assert_eq!(d1.fate, Fate::Denied);
    assert!(d1.claims.is_empty());
    assert_eq!(d1.findings[0].reason, "NoMatchingListenerHostname");
    let listener = &d1.parents[0].listeners[0];
    assert!(
        listener.accepted,
        "the listener takes the route: {listener:?}"
    );
    assert_eq!(listener.hostname.as_deref(), Some("c.example.com"));
    assert!(listener.hostnames.is_empty());

    // Nobody asks for this one.
    let nobody = explain_name(&world, "nobody.example.com");
    assert!(nobody.routes.is_empty() && nobody.records.is_empty() && !nobody.resolves);
}

#[test]
fn seed_story_in_audit_mode_drops_rather_than_denies() {
    let world = seed_story(Config {
        mode: Mode::Audit,
        ..Config::default()
    });
    let b = explain_name(&world, "b.example.com");
    assert_agrees_with_engine(&world, &b);
    assert!(b.resolves && !b.denied());
    let b2 = route(&b, "HTTPRoute/apps/b2");
    assert_eq!(b2.fate, Fate::Dropped);
    assert_eq!(b2.findings[0].action, "audit");
}

#[test]
fn route_form_lists_each_name_with_its_fate() {
    let world = seed_story(Config::default());
    let b2 = explain_route(&world, ObjectKind::HTTPRoute, "apps", "b2").unwrap();
    assert_eq!(b2.route, "HTTPRoute/apps/b2");
    assert!(!b2.all_published());
    let fates: Vec<(&str, Fate)> = b2.names.iter().map(|n| (n.name.as_str(), n.fate)).collect();
    assert_eq!(fates, [("b.example.com", Fate::Denied)]);
    assert_eq!(b2.names[0].findings[0].reason, "HostnameConflict");
    assert!(b2.names[0].records.is_empty());

    let b1 = explain_route(&world, ObjectKind::HTTPRoute, "apps", "b1").unwrap();
    assert!(b1.all_published());
    assert_eq!(b1.names[0].records[0].targets, ["203.0.113.10"]);

    assert_eq!(
        explain_route(&world, ObjectKind::HTTPRoute, "apps", "nope"),
        Err(ExplainError::RouteNotFound {
            kind: "HTTPRoute",
            namespace: "apps".to_owned(),
            name: "nope".to_owned()
        })
    );
    // A GRPCRoute of that name is another object.
    assert!(explain_route(&world, ObjectKind::GRPCRoute, "apps", "b1").is_err());
}

#[test]
fn a_route_with_several_names_gets_each_its_own_fate() {
    let world = snapshot(
        Config::default(),
        &[
            infra(),
            apps(),
            simple_gateway("infra", "gw1", Some("*.example.com"), &[GW1]),
            http_route(
                "apps",
                "mixed",
                on("gw1"),
                &["ok.example.com", "else.example.org", "Bad_Name.example.com"],
            ),
        ],
    );
    let mixed = explain_route(&world, ObjectKind::HTTPRoute, "apps", "mixed").unwrap();
    let fates: Vec<(&str, Fate, Vec<&str>)> = mixed
        .names
        .iter()
        .map(|n| {
            (
                n.name.as_str(),
                n.fate,
                n.findings.iter().map(|f| f.reason.as_str()).collect(),
            )
        })
        .collect();
    assert_eq!(
        fates,
        [
            (
                "Bad_Name.example.com",
                Fate::Denied,
                vec!["InvalidHostname"]
            ),
            (
                "else.example.org",
                Fate::Dropped,
                vec!["HostnameOutsideListener"]
            ),
            ("ok.example.com", Fate::Published, vec![]),
        ]
    );
    // Every finding of the route is there, as `check` reports it.
    let outcome = settle_all(&world);
    assert_eq!(
        mixed.findings.len(),
        violations_of(&outcome, "HTTPRoute/apps/mixed").len()
    );
}

#[test]
fn same_creation_time_is_decided_by_namespace_and_name_as_the_engine_orders() {
    let same = "2026-03-01T00:00:00Z";
    let world = snapshot(
        Config::default(),
        &[
            infra(),
            apps(),
            namespace("shop", json!({})),
            simple_gateway("infra", "gw1", None, &[GW1]),
            simple_gateway("infra", "gw2", None, &[GW2]),
            created(
                http_route("shop", "first", on("gw2"), &["x.example.com"]),
                same,
            ),
            created(
                http_route("apps", "second", on("gw1"), &["x.example.com"]),
                same,
            ),
        ],
    );
    let x = explain_name(&world, "x.example.com");
    assert_agrees_with_engine(&world, &x);
    // `apps` sorts before `shop`: the engine's record goes to gw1.
    let outcome = settle_all(&world);
    assert_eq!(outcome.records[0].routes, ["HTTPRoute/apps/second"]);
    assert_eq!(x.winner.as_deref(), Some("HTTPRoute/apps/second"));
    let loser = route(&x, "HTTPRoute/shop/first");
    assert_eq!(
        loser.claims[0].decided_by.map(|k| k.as_str()),
        Some("namespace")
    );
    assert!(
        loser.why.contains(
            "same creationTimestamp (2026-03-01T00:00:00Z), so namespace/name decides: \
             HTTPRoute/apps/second sorts before HTTPRoute/shop/first"
        ),
        "{}",
        loser.why
    );
}

#[test]
fn exclude_leaves_the_name_to_nobody() {
    let world = seed_story(Config {
        conflict_resolution: ConflictResolution::Exclude,
        ..Config::default()
    });
    let b = explain_name(&world, "b.example.com");
    assert_agrees_with_engine(&world, &b);
    assert!(!b.resolves);
    assert_eq!(b.winner, None);
    for route in &b.routes {
        assert_eq!(route.claims[0].result.as_str(), "excluded", "{route:?}");
        assert!(route.why.contains("published nowhere"), "{}", route.why);
    }
}

/// A Gateway with a wildcard listener, a route with a name under it, a route with no
/// hostnames (it inherits the wildcard), and a route asking for a wildcard that a listener for
/// one name narrows.
fn wildcard_world(allow_inherited_wildcards: bool) -> Snapshot {
    snapshot(
        Config {
            allow_inherited_wildcards,
            ..Config::default()
        },
        &[
            infra(),
            apps(),
            simple_gateway("infra", "wild", Some("*.example.com"), &[GW1]),
            simple_gateway("infra", "one", Some("app.example.net"), &[GW2]),
            created(
                http_route("apps", "named", on("wild"), &["shop.example.com"]),
                "2026-02-01T00:00:00Z",
            ),
            created(
                http_route("apps", "hostless", on("wild"), &[]),
                "2026-02-02T00:00:00Z",
            ),
            created(
                http_route("apps", "narrowed", on("one"), &["*.example.net"]),
                "2026-02-03T00:00:00Z",
            ),
        ],
    )
}

#[test]
fn wildcard_listener_serves_a_name_under_it() {
    let world = wildcard_world(false);
    let shop = explain_name(&world, "shop.example.com");
    assert_agrees_with_engine(&world, &shop);
    assert!(shop.resolves);
    let named = route(&shop, "HTTPRoute/apps/named");
    assert_eq!(named.fate, Fate::Published);
    let listener = &named.parents[0].listeners[0];
    assert_eq!(listener.hostname.as_deref(), Some("*.example.com"));
    assert_eq!(listener.hostnames, ["shop.example.com"]);
}

#[test]
fn an_inherited_wildcard_is_dropped_unless_allowed_then_answers_for_names_under_it() {
    let world = wildcard_world(false);
    let wildcard = explain_name(&world, "*.example.com");
    assert_agrees_with_engine(&world, &wildcard);
    assert!(!wildcard.resolves);
    let hostless = route(&wildcard, "HTTPRoute/apps/hostless");
    assert_eq!(hostless.fate, Fate::Dropped);
    assert_eq!(hostless.findings[0].reason, "InheritedWildcardHostname");
    assert_eq!(hostless.findings[0].action, "warn");
    // No record of its own and no wildcard record: other.example.com does not resolve.
    assert!(!explain_name(&world, "other.example.com").resolves);

    let allowed = wildcard_world(true);
    let wildcard = explain_name(&allowed, "*.example.com");
    assert_agrees_with_engine(&allowed, &wildcard);
    assert!(wildcard.resolves);
    assert_eq!(wildcard.winner.as_deref(), Some("HTTPRoute/apps/hostless"));
    let other = explain_name(&allowed, "deep.other.example.com");
    assert!(other.resolves && other.records.is_empty());
    assert_eq!(other.covered_by.len(), 1);
    assert_eq!(other.covered_by[0].name, "*.example.com");
    assert_eq!(other.covered_by[0].records[0].targets, [GW1]);
}

#[test]
fn a_wildcard_hostname_narrowed_by_the_listener_is_told_through_the_narrower_name() {
    let world = wildcard_world(false);
    let narrowed = explain_route(&world, ObjectKind::HTTPRoute, "apps", "narrowed").unwrap();
    assert!(narrowed.all_published(), "{narrowed:#?}");
    let names: Vec<&str> = narrowed.names.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["app.example.net"]);
    assert_eq!(narrowed.names[0].claims[0].field, "spec.hostnames[0]");
    let asked = explain_name(&world, "*.example.net");
    let route = route(&asked, "HTTPRoute/apps/narrowed");
    assert_eq!(route.fate, Fate::Dropped);
    assert_eq!(
        route.why,
        "its listeners serve only part of *.example.net: the route gets app.example.net there instead"
    );
}

#[test]
fn names_are_read_as_the_engine_compares_them() {
    assert_eq!(parse_name("App.Example.COM.").unwrap(), "app.example.com");
    assert!(matches!(
        parse_name("bad_name.example.com"),
        Err(ExplainError::InvalidName { .. })
    ));
    assert!(parse_name("203.0.113.10").is_err());
}

#[test]
fn listeners_that_refuse_say_why_beside_those_that_take_the_route() {
    let same_namespace_only = with(
        listener("internal", "HTTP", None),
        &["allowedRoutes", "namespaces", "from"],
        json!("Same"),
    );
    let world = snapshot(
        Config::default(),
        &[
            infra(),
            apps(),
            gateway(
                "infra",
                "mixed",
                json!([same_namespace_only, listener("public", "HTTPS", None)]),
                &[GW1],
            ),
            gateway(
                "infra",
                "closed",
                json!([with(
                    listener("only", "HTTP", None),
                    &["allowedRoutes", "namespaces", "from"],
                    json!("Same")
                )]),
                &[GW2],
            ),
            http_route(
                "apps",
                "web",
                json!([parent("infra", "mixed"), parent("infra", "closed")]),
                &["web.example.com"],
            ),
        ],
    );
    let web = explain_name(&world, "web.example.com");
    assert_agrees_with_engine(&world, &web);
    let route = route(&web, "HTTPRoute/apps/web");
    assert_eq!(route.fate, Fate::Published);
    let (mixed, closed) = (&route.parents[0], &route.parents[1]);
    assert!(mixed.attached);
    let listeners: Vec<(&str, bool, Option<&str>)> = mixed
        .listeners
        .iter()
        .map(|l| (l.name.as_str(), l.accepted, l.refusal.as_deref()))
        .collect();
    assert_eq!(
        listeners,
        [
            (
                "internal",
                false,
                Some("listener internal does not allow routes from namespace apps")
            ),
            ("public", true, None),
        ]
    );
    // Every listener of the other Gateway refuses: not attached, and the finding says why.
    assert!(!closed.attached);
    assert!(closed.listeners.is_empty());
    assert_eq!(closed.field, "spec.parentRefs[1]");
    assert_eq!(closed.findings.len(), 1);
    assert_eq!(closed.findings[0].reason, "NotAllowedByListeners");
    assert!(
        closed.findings[0]
            .message
            .contains("listener only does not allow routes from namespace apps"),
        "{:?}",
        closed.findings[0]
    );
}

#[test]
fn a_route_through_a_listener_set_names_it_and_its_gateway() {
    let gw = with(
        simple_gateway("infra", "gw", Some("*.example.com"), &[GW1]),
        &["spec", "allowedListeners", "namespaces", "from"],
        json!("All"),
    );
    let world = snapshot(
        Config::default(),
        &[
            infra(),
            apps(),
            gw,
            listener_set("apps", "team", ("infra", "gw"), "team.example.org"),
            http_route(
                "apps",
                "r",
                json!([{"group": "gateway.networking.k8s.io", "kind": "ListenerSet",
                        "name": "team", "namespace": "apps"}]),
                &["team.example.org"],
            ),
        ],
    );
    let team = explain_name(&world, "team.example.org");
    assert_agrees_with_engine(&world, &team);
    assert!(team.resolves, "{team:#?}");
    let route = route(&team, "HTTPRoute/apps/r");
    let parent = &route.parents[0];
    assert_eq!(parent.parent, "ListenerSet/apps/team");
    assert_eq!(parent.gateway.as_deref(), Some("infra/gw"));
    assert_eq!(parent.listener_set.as_deref(), Some("apps/team"));
    assert_eq!(parent.listeners[0].hostnames, ["team.example.org"]);
    assert_eq!(route.claims[0].listener_set.as_deref(), Some("apps/team"));
}
