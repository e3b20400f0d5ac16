//! Attachment (ARCHITECTURE.md, "Attachment"): allowedRoutes namespaces and kinds, the protocol of each route
//! kind, sectionName and port, ListenerSets and allowedListeners, the two attachment modes, and
//! the external-dns annotations.

use gateway_dns::engine::Outcome;
use gateway_dns::engine::World;
use gateway_dns::engine::explain_parents::attachments;
use gateway_dns::engine::{Action, AttachmentMode, Config, Reason};
use gateway_dns::model::{ObjectKey, ObjectKind};
use serde_json::{Value, json};

use crate::objects::*;

// ---------------------------------------------------------------- allowedRoutes

fn gateway_allowing(namespaces: Value) -> Value {
    gateway(
        "infra",
        "gw1",
        json!([{"name": "web", "protocol": "HTTP", "port": 80,
                "allowedRoutes": {"namespaces": namespaces}}]),
        &[GW1],
    )
}

/// Does a route in `apps` (with these Namespace labels) attach to a Gateway allowing `namespaces`?
fn attaches_from_apps(namespaces: Value, apps_labels: Option<Value>) -> bool {
    let mut objects = vec![
        infra(),
        gateway_allowing(namespaces),
        http_route("apps", "r", on("gw1"), &["a.example.com"]),
    ];
    if let Some(labels) = apps_labels {
        objects.push(namespace("apps", labels));
    }
    let got = settle_default(&objects);
    let attached = !got.records.is_empty();
    let refused = got
        .violations
        .iter()
        .any(|v| v.reason == Reason::NotAllowedByListeners);
    assert_ne!(attached, refused, "{got:#?}");
    attached
}

#[test]
fn allowed_routes_same_is_the_default() {
    assert!(!attaches_from_apps(json!({}), Some(json!({}))));
    assert!(!attaches_from_apps(
        json!({"from": "Same"}),
        Some(json!({}))
    ));
    // The same route in the Gateway's namespace attaches.
    let got = settle_default(&[
        infra(),
        gateway_allowing(json!({"from": "Same"})),
        http_route("infra", "r", on("gw1"), &["a.example.com"]),
    ]);
    assert_eq!(got.records.len(), 1, "{got:#?}");
}

#[test]
fn allowed_routes_all() {
    assert!(attaches_from_apps(json!({"from": "All"}), Some(json!({}))));
    assert!(attaches_from_apps(json!({"from": "All"}), None));
}

#[test]
fn allowed_routes_selector_match_labels() {
    let sel =
        json!({"from": "Selector", "selector": {"matchLabels": {"dns": "public", "team": "a"}}});
    assert!(attaches_from_apps(
        sel.clone(),
        Some(json!({"dns": "public", "team": "a", "x": "y"}))
    ));
    assert!(!attaches_from_apps(
        sel.clone(),
        Some(json!({"dns": "public"}))
    ));
    assert!(!attaches_from_apps(
        sel.clone(),
        Some(json!({"dns": "private", "team": "a"}))
    ));
    // A route whose Namespace is unknown matches no selector.
    assert!(!attaches_from_apps(sel, None));
    // An empty selector selects every (known) namespace.
    assert!(attaches_from_apps(
        json!({"from": "Selector", "selector": {}}),
        Some(json!({}))
    ));
}

#[test]
fn allowed_routes_selector_match_expressions() {
    let expr = |operator: &str, values: &[&str]| {
        json!({"from": "Selector", "selector": {"matchExpressions": [
            {"key": "env", "operator": operator, "values": values}]}})
    };
    let cases: &[(&str, &[&str], Value, bool)] = &[
        ("In", &["prod", "stage"], json!({"env": "prod"}), true),
        ("In", &["prod", "stage"], json!({"env": "dev"}), false),
        ("In", &["prod"], json!({}), false),
        ("NotIn", &["prod"], json!({"env": "dev"}), true),
        ("NotIn", &["prod"], json!({"env": "prod"}), false),
        ("NotIn", &["prod"], json!({}), true),
        ("Exists", &[], json!({"env": ""}), true),
        ("Exists", &[], json!({"other": "x"}), false),
        ("DoesNotExist", &[], json!({"other": "x"}), true),
        ("DoesNotExist", &[], json!({"env": "prod"}), false),
    ];
    for (operator, values, labels, expected) in cases {
        assert_eq!(
            attaches_from_apps(expr(operator, values), Some(labels.clone())),
            *expected,
            "{operator} {values:?} against {labels}"
        );
    }
    // matchLabels and matchExpressions are ANDed.
    let both = json!({"from": "Selector", "selector": {
        "matchLabels": {"dns": "public"},
        "matchExpressions": [{"key": "env", "operator": "In", "values": ["prod"]}]}});
    assert!(attaches_from_apps(
        both.clone(),
        Some(json!({"dns": "public", "env": "prod"}))
    ));
    assert!(!attaches_from_apps(both, Some(json!({"env": "prod"}))));
}

#[test]
fn unknown_selector_operator_is_a_decode_error_naming_the_field() {
    let gw = gateway_allowing(
        json!({"from": "Selector", "selector": {"matchExpressions": [
        {"key": "env", "operator": "Near", "values": ["prod"]}]}}),
    );
    let err = gateway_dns::model::decode_value(&gw)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(
            "spec.listeners[0].allowedRoutes.namespaces.selector.matchExpressions[0].operator"
        ),
        "{err}"
    );
}

#[test]
fn allowed_routes_kinds() {
    let with_kinds = |kinds: Value| {
        gateway(
            "infra",
            "gw1",
            json!([{"name": "web", "protocol": "HTTPS", "port": 443,
                    "allowedRoutes": {"namespaces": {"from": "All"}, "kinds": kinds}}]),
            &[GW1],
        )
    };
    let route = http_route("apps", "r", on("gw1"), &["a.example.com"]);
    let grpc_only = settle_default(&[
        infra(),
        apps(),
        with_kinds(json!([{"kind": "GRPCRoute"}])),
        route.clone(),
    ]);
    let v = only_violation(&grpc_only, "HTTPRoute/apps/r");
    assert_finding(
        v,
        Reason::NotAllowedByListeners,
        Action::Deny,
        "spec.parentRefs[0]",
        &["infra/gw1", "GRPCRoute"],
    );
    let other_group = settle_default(&[
        infra(),
        apps(),
        with_kinds(json!([{"group": "example.io", "kind": "HTTPRoute"}])),
        route.clone(),
    ]);
    assert_eq!(
        only_violation(&other_group, "HTTPRoute/apps/r").reason,
        Reason::NotAllowedByListeners
    );
    let listed = settle_default(&[
        infra(),
        apps(),
        with_kinds(
            json!([{"kind": "GRPCRoute"}, {"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"}]),
        ),
        route,
    ]);
    assert!(listed.violations.is_empty(), "{:#?}", listed.violations);
    assert_eq!(listed.records.len(), 1);
}

// ---------------------------------------------------------------- protocols and listeners

#[test]
fn protocol_per_route_kind_for_all_five_kinds() {
    let gw = gateway(
        "infra",
        "gw1",
        json!([
            listener("http", "HTTP", None),
            listener("https", "HTTPS", None),
            listener("tls", "TLS", None),
            listener("tcp", "TCP", None),
            listener("udp", "UDP", None),
        ]),
        &[GW1],
    );
    let cases: [(&str, &[&str]); 5] = [
        ("HTTPRoute", &["http", "https"]),
        ("GRPCRoute", &["http", "https"]),
        ("TLSRoute", &["tls"]),
        ("TCPRoute", &["tcp", "tls"]),
        ("UDPRoute", &["udp"]),
    ];
    let mut objects = vec![infra(), apps(), gw];
    for (kind, _) in cases {
        objects.push(route(kind, "apps", "r", on("gw1"), &[]));
    }
    let cfg = Config::default();
    let snap = snapshot(cfg.clone(), &objects);
    for (kind, expected) in cases {
        let key = ObjectKey::new(ObjectKind::from_kind_name(kind).unwrap(), "apps", "r");
        let entry = snap.route(&key).unwrap();
        let mut got: Vec<String> = attachments(&snap, &cfg, &entry.route)
            .into_iter()
            .map(|a| a.listener)
            .collect();
        got.sort();
        assert_eq!(got, expected, "{kind}");
    }
}

#[test]
fn protocol_mismatch_is_not_allowed_by_listeners() {
    let gw = gateway(
        "infra",
        "gw1",
        json!([listener("udp", "UDP", None)]),
        &[GW1],
    );
    let outcome = settle_default(&[
        infra(),
        apps(),
        gw,
        route("TLSRoute", "apps", "t", on("gw1"), &["t.example.com"]),
    ]);
    let v = only_violation(&outcome, "TLSRoute/apps/t");
    assert_finding(
        v,
        Reason::NotAllowedByListeners,
        Action::Deny,
        "spec.parentRefs[0]",
        &["infra/gw1", "UDP", "TLSRoute"],
    );
}

fn three_listener_gateway() -> Value {
    gateway(
        "infra",
        "gw1",
        json!([
            {"name": "a", "protocol": "HTTP", "port": 80, "hostname": "a.example.com",
             "allowedRoutes": {"namespaces": {"from": "All"}}},
            {"name": "b", "protocol": "HTTPS", "port": 443, "hostname": "b.example.com",
             "allowedRoutes": {"namespaces": {"from": "All"}}},
            {"name": "c", "protocol": "HTTPS", "port": 443, "hostname": "c.example.com",
             "allowedRoutes": {"namespaces": {"from": "All"}}},
        ]),
        &[GW1],
    )
}

/// Names published by a hostless route whose only parentRef is `parent_ref`, and its findings.
fn through(parent_ref: Value) -> (Vec<String>, Vec<(Reason, String)>) {
    let got = settle_default(&[
        infra(),
        apps(),
        three_listener_gateway(),
        http_route("apps", "r", json!([parent_ref]), &[]),
    ]);
    (
        got.records.iter().map(|r| r.dns_name.clone()).collect(),
        got.violations
            .iter()
            .map(|v| (v.reason, v.message.clone()))
            .collect(),
    )
}

#[test]
fn section_name_and_port_narrow_the_listeners() {
    let base = json!({"name": "gw1", "namespace": "infra"});
    let (names, findings) = through(base.clone());
    assert_eq!(names, ["a.example.com", "b.example.com", "c.example.com"]);
    assert!(findings.is_empty());

    let (names, _) = through(with(base.clone(), &["sectionName"], json!("b")));
    assert_eq!(names, ["b.example.com"]);

    let (names, _) = through(with(base.clone(), &["port"], json!(443)));
    assert_eq!(names, ["b.example.com", "c.example.com"]);

    let both = with(
        with(base.clone(), &["sectionName"], json!("c")),
        &["port"],
        json!(443),
    );
    assert_eq!(through(both).0, ["c.example.com"]);

    let (names, findings) = through(with(
        with(base.clone(), &["sectionName"], json!("a")),
        &["port"],
        json!(443),
    ));
    assert!(names.is_empty());
    assert_eq!(findings.len(), 1, "{findings:?}");
    assert_eq!(findings[0].0, Reason::NoMatchingParent);
    assert!(
        findings[0].1.contains("sectionName a") && findings[0].1.contains("port 443"),
        "{}",
        findings[0].1
    );

    let (names, findings) = through(with(base, &["port"], json!(8080)));
    assert!(names.is_empty());
    assert_eq!(findings[0].0, Reason::NoMatchingParent);
    assert!(findings[0].1.contains("port 8080"), "{}", findings[0].1);
}

#[test]
fn parent_ref_defaults_group_kind_and_namespace() {
    // No namespace: the route's own. Explicit group/kind as defaults: same thing.
    let got = settle_default(&[
        infra(),
        simple_gateway("infra", "gw1", None, &[GW1]),
        http_route(
            "infra",
            "implicit",
            json!([{"name": "gw1"}]),
            &["a.example.com"],
        ),
        http_route(
            "infra",
            "explicit",
            json!([{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "gw1", "namespace": "infra"}]),
            &["a.example.com"],
        ),
        // A parentRef to another kind (a Service, for GAMMA) is not a Gateway: no DNS, no finding.
        http_route(
            "infra",
            "mesh",
            json!([{"group": "", "kind": "Service", "name": "gw1"}]),
            &["m.example.com"],
        ),
    ]);
    assert_eq!(
        got.records[0].routes,
        ["HTTPRoute/infra/explicit", "HTTPRoute/infra/implicit"]
    );
    assert_eq!(got.records.len(), 1);
    assert!(got.violations.is_empty(), "{:#?}", got.violations);
}

// ---------------------------------------------------------------- ListenerSets

fn gateway_with_allowed_listeners(allowed: Option<Value>) -> Value {
    let gw = simple_gateway("infra", "gw1", Some("gw.example.com"), &[GW1]);
    match allowed {
        Some(a) => with(gw, &["spec", "allowedListeners"], json!({"namespaces": a})),
        None => gw,
    }
}

/// Records and violations of a route on ListenerSet `team/ls` under a Gateway with `allowed`.
fn via_listener_set(allowed: Option<Value>, cfg: Config) -> Outcome {
    settle(
        cfg,
        &[
            infra(),
            namespace("team", json!({"ls": "ok"})),
            gateway_with_allowed_listeners(allowed),
            listener_set("team", "ls", ("infra", "gw1"), "*.team.example.com"),
            http_route(
                "team",
                "r",
                json!([{"kind": "ListenerSet", "name": "ls"}]),
                &["app.team.example.com"],
            ),
        ],
    )
}

#[test]
fn listener_sets_need_allowed_listeners_default_none() {
    let got = via_listener_set(None, Config::default());
    assert!(got.records.is_empty());
    let v = only_violation(&got, "HTTPRoute/team/r");
    assert_finding(
        v,
        Reason::NotAllowedByListeners,
        Action::Deny,
        "spec.parentRefs[0]",
        &["infra/gw1", "team/ls"],
    );
    let none = via_listener_set(Some(json!({"from": "None"})), Config::default());
    assert_eq!(
        only_violation(&none, "HTTPRoute/team/r").reason,
        Reason::NotAllowedByListeners
    );
}

#[test]
fn listener_sets_admitted_by_all_same_and_selector() {
    for (allowed, admitted) in [
        (json!({"from": "All"}), true),
        (json!({"from": "Same"}), false), // the ListenerSet is in `team`, the Gateway in `infra`
        (
            json!({"from": "Selector", "selector": {"matchLabels": {"ls": "ok"}}}),
            true,
        ),
        (
            json!({"from": "Selector", "selector": {"matchLabels": {"ls": "no"}}}),
            false,
        ),
    ] {
        let got = via_listener_set(Some(allowed.clone()), Config::default());
        assert_eq!(!got.records.is_empty(), admitted, "{allowed}: {got:#?}");
        if admitted {
            // A ListenerSet's addresses are its parent Gateway's.
            assert_eq!(
                record_summary(&got),
                vec![("app.team.example.com".into(), "A", vec![GW1.into()])]
            );
            assert_eq!(got.records[0].gateways, ["infra/gw1"]);
            assert!(got.violations.is_empty(), "{:#?}", got.violations);
        }
    }
    // Same admits a ListenerSet in the Gateway's own namespace.
    let got = settle_default(&[
        infra(),
        gateway_with_allowed_listeners(Some(json!({"from": "Same"}))),
        listener_set("infra", "ls", ("infra", "gw1"), "*.team.example.com"),
        http_route(
            "infra",
            "r",
            json!([{"kind": "ListenerSet", "name": "ls"}]),
            &["app.team.example.com"],
        ),
    ]);
    assert_eq!(got.records.len(), 1, "{got:#?}");
}

#[test]
fn listener_sets_off_ignores_them() {
    let cfg = Config {
        listener_sets: false,
        ..Config::default()
    };
    let got = via_listener_set(Some(json!({"from": "All"})), cfg);
    assert!(got.records.is_empty(), "{got:#?}");
}

#[test]
fn gateway_parent_does_not_reach_listener_set_listeners() {
    let got = settle_default(&[
        infra(),
        namespace("team", json!({})),
        gateway_with_allowed_listeners(Some(json!({"from": "All"}))),
        listener_set("team", "ls", ("infra", "gw1"), "app.team.example.com"),
        http_route("team", "r", on("gw1"), &[]),
    ]);
    let names: Vec<_> = got.records.iter().map(|r| r.dns_name.as_str()).collect();
    assert_eq!(names, ["gw.example.com"]);
}

#[test]
fn listener_set_rejected_by_its_controller_is_refused() {
    let ls = with(
        listener_set("infra", "ls", ("infra", "gw1"), "*.team.example.com"),
        &["status", "conditions"],
        json!([{"type": "Accepted", "status": "False"}]),
    );
    let got = settle_default(&[
        infra(),
        gateway_with_allowed_listeners(Some(json!({"from": "All"}))),
        ls,
        http_route(
            "infra",
            "r",
            json!([{"kind": "ListenerSet", "name": "ls"}]),
            &["app.team.example.com"],
        ),
    ]);
    assert_eq!(
        only_violation(&got, "HTTPRoute/infra/r").reason,
        Reason::NotAllowedByListeners
    );
}

/// A ListenerSet on a Gateway admitting all namespaces, with this `status`, and a route on it
/// accepted by its controller, settled in `mode`.
fn listener_set_with_status(status: Value, mode: AttachmentMode) -> Outcome {
    let ls = with(
        listener_set("infra", "ls", ("infra", "gw1"), "*.team.example.com"),
        &["status"],
        status,
    );
    let route = with(
        http_route(
            "infra",
            "r",
            json!([{"kind": "ListenerSet", "name": "ls"}]),
            &["app.team.example.com"],
        ),
        &["status", "parents"],
        json!([{"parentRef": {"kind": "ListenerSet", "name": "ls", "namespace": "infra"},
                "conditions": [{"type": "Accepted", "status": "True"}]}]),
    );
    settle(
        Config {
            attachment: mode,
            ..Config::default()
        },
        &[
            infra(),
            gateway_with_allowed_listeners(Some(json!({"from": "All"}))),
            ls,
            route,
        ],
    )
}

#[test]
fn status_mode_counts_a_listener_set_listener_only_when_its_own_status_accepts_it() {
    let accepted = json!([{"type": "Accepted", "status": "True"}]);
    let listener = |status: &str| json!([{"name": "ls-https", "conditions": [{"type": "Accepted", "status": status}]}]);
    for (status, published) in [
        (
            json!({"conditions": accepted, "listeners": listener("True")}),
            true,
        ),
        // The ListenerSet is accepted but does not list the listener, or has not accepted it.
        (json!({"conditions": accepted}), false),
        (
            json!({"conditions": accepted, "listeners": listener("Unknown")}),
            false,
        ),
        (
            json!({"conditions": accepted, "listeners": listener("False")}),
            false,
        ),
    ] {
        let got = listener_set_with_status(status.clone(), AttachmentMode::Status);
        assert_eq!(!got.records.is_empty(), published, "{status}: {got:#?}");
        if !published {
            assert_eq!(
                only_violation(&got, "HTTPRoute/infra/r").reason,
                Reason::NotAllowedByListeners,
                "{status}"
            );
        }
    }
    // Spec mode predicts: only an explicit refusal of the listener leaves it out.
    let unlisted = listener_set_with_status(json!({}), AttachmentMode::Spec);
    assert_eq!(unlisted.records.len(), 1, "{unlisted:#?}");
}

#[test]
fn a_listener_set_not_attached_says_why() {
    // Not accepted yet, with `--attachment status`: the controller has not decided.
    let pending = listener_set_with_status(json!({}), AttachmentMode::Status);
    let message = &only_violation(&pending, "HTTPRoute/infra/r").message;
    assert!(
        message.contains("ListenerSet infra/ls is not accepted yet")
            && !message.contains("does not accept"),
        "{message}"
    );
    // Refused by the controller.
    let refused = listener_set_with_status(
        json!({"conditions": [{"type": "Accepted", "status": "False"}]}),
        AttachmentMode::Spec,
    );
    let message = &only_violation(&refused, "HTTPRoute/infra/r").message;
    assert!(message.contains("(Accepted=False)"), "{message}");
    // Not admitted by the Gateway's allowedListeners.
    let got = via_listener_set(None, Config::default());
    let message = &only_violation(&got, "HTTPRoute/team/r").message;
    assert!(
        message.contains("allowedListeners exclude namespace team"),
        "{message}"
    );
}

#[test]
fn listener_set_unknown_or_orphaned_is_parent_not_found() {
    let got = settle_default(&[
        infra(),
        listener_set("infra", "orphan", ("infra", "gone"), "*.example.com"),
        http_route(
            "infra",
            "r",
            json!([{"kind": "ListenerSet", "name": "orphan"}, {"kind": "ListenerSet", "name": "nope"}]),
            &["a.example.com"],
        ),
    ]);
    let found = violations_of(&got, "HTTPRoute/infra/r");
    assert_eq!(found.len(), 2, "{found:#?}");
    assert_finding(
        found[0],
        Reason::ParentNotFound,
        Action::Warn,
        "spec.parentRefs[0]",
        &["infra/orphan", "infra/gone"],
    );
    assert_finding(
        found[1],
        Reason::ParentNotFound,
        Action::Warn,
        "spec.parentRefs[1]",
        &["infra/nope"],
    );
}

// ---------------------------------------------------------------- attachment modes

fn status_parent(gw: &str, status: &str, observed: Option<i64>) -> Value {
    let mut condition = json!({"type": "Accepted", "status": status});
    if let Some(g) = observed {
        condition["observedGeneration"] = json!(g);
    }
    json!({"parentRef": {"name": gw, "namespace": "infra"}, "conditions": [condition]})
}

fn two_gateway_world(route: Value) -> Vec<Value> {
    vec![
        infra(),
        apps(),
        simple_gateway("infra", "gw1", None, &[GW1]),
        simple_gateway("infra", "gw2", Some("*.example.com"), &[GW1]),
        route,
    ]
}

fn gateways_published(cfg: Config, route: Value) -> Vec<String> {
    let got = settle(cfg, &two_gateway_world(route));
    got.records
        .iter()
        .flat_map(|r| r.gateways.clone())
        .collect()
}

fn status_route(parents: Value, generation: i64) -> Value {
    let r = http_route(
        "apps",
        "r",
        json!([parent("infra", "gw1"), parent("infra", "gw2")]),
        &["a.example.com"],
    );
    let r = with(r, &["metadata", "generation"], json!(generation));
    with(r, &["status", "parents"], parents)
}

#[test]
fn status_mode_uses_only_accepted_parents_still_in_spec() {
    let status = Config {
        attachment: AttachmentMode::Status,
        ..Config::default()
    };
    // No status yet: nothing attaches in status mode, everything in spec mode.
    assert!(gateways_published(status.clone(), status_route(json!([]), 1)).is_empty());
    assert_eq!(
        gateways_published(Config::default(), status_route(json!([]), 1)),
        ["infra/gw1", "infra/gw2"]
    );
    let parents = json!([
        status_parent("gw1", "True", None),
        status_parent("gw2", "False", None)
    ]);
    assert_eq!(
        gateways_published(status.clone(), status_route(parents, 1)),
        ["infra/gw1"]
    );
    let unknown = json!([
        status_parent("gw1", "Unknown", None),
        status_parent("gw2", "True", None)
    ]);
    assert_eq!(
        gateways_published(status.clone(), status_route(unknown, 1)),
        ["infra/gw2"]
    );
    // Accepted in status but dropped from spec.parentRefs: not a parent any more.
    let dropped = with(
        http_route("apps", "r", on("gw2"), &["a.example.com"]),
        &["status", "parents"],
        json!([
            status_parent("gw1", "True", None),
            status_parent("gw2", "True", None)
        ]),
    );
    assert_eq!(gateways_published(status, dropped), ["infra/gw2"]);
}

#[test]
fn status_mode_still_applies_listener_rules() {
    let status = Config {
        attachment: AttachmentMode::Status,
        ..Config::default()
    };
    let r = with(
        http_route("apps", "r", on("gw2"), &["a.example.org"]),
        &["status", "parents"],
        json!([status_parent("gw2", "True", None)]),
    );
    let got = settle(status, &two_gateway_world(r));
    assert!(got.records.is_empty());
    assert_eq!(
        only_violation(&got, "HTTPRoute/apps/r").reason,
        Reason::NoMatchingListenerHostname
    );
}

#[test]
fn status_mode_matches_a_status_parent_on_the_parent_and_its_section_and_port_choose_listeners() {
    let status = Config {
        attachment: AttachmentMode::Status,
        ..Config::default()
    };
    // Listener `a` serves a.example.com on 443, `b` b.example.com on 8443.
    let mut a = listener("a", "HTTPS", Some("a.example.com"));
    a["port"] = json!(443);
    let mut b = listener("b", "HTTPS", Some("b.example.com"));
    b["port"] = json!(8443);
    let published = |cfg: Config, spec_parent: Value, status_parent: Value| {
        let route = http_route(
            "apps",
            "r",
            json!([spec_parent]),
            &["a.example.com", "b.example.com"],
        );
        let mut entry = json!({"parentRef": status_parent,
                               "conditions": [{"type": "Accepted", "status": "True"}]});
        entry["parentRef"]["namespace"] = json!("infra");
        let route = with(route, &["status", "parents"], json!([entry]));
        let got = settle(
            cfg,
            &[
                infra(),
                apps(),
                gateway("infra", "gw", json!([a.clone(), b.clone()]), &[GW1]),
                route,
            ],
        );
        got.records
            .iter()
            .map(|r| r.dns_name.clone())
            .collect::<Vec<_>>()
    };
    let spec_any = parent("infra", "gw");
    // No sectionName in spec; the status names listener a: a's name only, not none at all.
    assert_eq!(
        published(
            status.clone(),
            spec_any.clone(),
            json!({"name": "gw", "sectionName": "a"})
        ),
        ["a.example.com"]
    );
    // The status entry's port chooses listener b.
    assert_eq!(
        published(
            status.clone(),
            spec_any.clone(),
            json!({"name": "gw", "port": 8443})
        ),
        ["b.example.com"]
    );
    // A sectionName in spec the status entry does not repeat: the status entry decides.
    let mut spec_a = spec_any.clone();
    spec_a["sectionName"] = json!("a");
    assert_eq!(
        published(status.clone(), spec_a.clone(), json!({"name": "gw"})),
        ["a.example.com", "b.example.com"]
    );
    // Another parent in status is no match.
    assert!(published(status, spec_any.clone(), json!({"name": "other"})).is_empty());
    // spec mode predicts from spec, whatever the status names.
    assert_eq!(
        published(
            Config::default(),
            spec_a,
            json!({"name": "gw", "sectionName": "b"})
        ),
        ["a.example.com"]
    );
}

#[test]
fn spec_mode_vetoes_parents_refused_for_the_current_generation() {
    let cases = [
        // (observedGeneration of the Accepted=False condition, route generation, gateways)
        (Some(3), 3, vec!["infra/gw1"]),
        (None, 3, vec!["infra/gw1"]),
        // The refusal is about an older generation: the new spec is predicted afresh.
        (Some(2), 3, vec!["infra/gw1", "infra/gw2"]),
    ];
    for (observed, generation, expected) in cases {
        let parents = json!([status_parent("gw2", "False", observed)]);
        assert_eq!(
            gateways_published(Config::default(), status_route(parents, generation)),
            expected,
            "observedGeneration {observed:?}, generation {generation}"
        );
    }
    // Accepted=True or Unknown never removes a parent in spec mode.
    let parents = json!([
        status_parent("gw1", "Unknown", Some(1)),
        status_parent("gw2", "True", Some(1))
    ]);
    assert_eq!(
        gateways_published(Config::default(), status_route(parents, 1)),
        ["infra/gw1", "infra/gw2"]
    );
}

// ---------------------------------------------------------------- annotations

#[test]
fn hostname_annotation_with_both_prefixes() {
    for key in [
        "external-dns.kubernetes.io/hostname",
        "external-dns.alpha.kubernetes.io/hostname",
    ] {
        let r = annotated(
            route("TCPRoute", "apps", "db", on("gw1"), &[]),
            key,
            " db.example.com, db2.example.com ,",
        );
        let gw = gateway(
            "infra",
            "gw1",
            json!([listener("tcp", "TCP", None)]),
            &[GW1],
        );
        let got = settle_default(&[infra(), apps(), gw, r]);
        let names: Vec<_> = got.records.iter().map(|r| r.dns_name.as_str()).collect();
        assert_eq!(names, ["db.example.com", "db2.example.com"], "{key}");
        assert!(got.violations.is_empty(), "{key}: {:#?}", got.violations);
    }
}

#[test]
fn current_annotation_prefix_wins_over_the_older_one() {
    let r = annotated(
        annotated(
            http_route("apps", "r", on("gw1"), &[]),
            "external-dns.kubernetes.io/hostname",
            "new.example.com",
        ),
        "external-dns.alpha.kubernetes.io/hostname",
        "old.example.com",
    );
    let got = settle_default(&[
        infra(),
        apps(),
        simple_gateway("infra", "gw1", None, &[GW1]),
        r,
    ]);
    let names: Vec<_> = got.records.iter().map(|r| r.dns_name.as_str()).collect();
    assert_eq!(names, ["new.example.com"]);
}

#[test]
fn annotation_hostnames_are_filtered_by_listener_hostnames() {
    let r = annotated(
        http_route("apps", "r", on("gw1"), &["a.example.com"]),
        "external-dns.kubernetes.io/hostname",
        "b.example.com,c.example.org",
    );
    let got = settle_default(&[
        infra(),
        apps(),
        simple_gateway("infra", "gw1", Some("*.example.com"), &[GW1]),
        r,
    ]);
    let names: Vec<_> = got.records.iter().map(|r| r.dns_name.as_str()).collect();
    assert_eq!(names, ["a.example.com", "b.example.com"]);
    let v = only_violation(&got, "HTTPRoute/apps/r");
    assert_finding(
        v,
        Reason::HostnameOutsideListener,
        Action::Warn,
        "metadata.annotations[external-dns.kubernetes.io/hostname]",
        &["c.example.org"],
    );
}

#[test]
fn ttl_annotation() {
    for (value, ttl) in [
        ("300", Some(300)),
        ("5m", Some(300)),
        ("1h30m", Some(5400)),
        ("soon", None),
    ] {
        let r = annotated(
            http_route("apps", "r", on("gw1"), &["a.example.com"]),
            "external-dns.alpha.kubernetes.io/ttl",
            value,
        );
        let got = settle_default(&[
            infra(),
            apps(),
            simple_gateway("infra", "gw1", None, &[GW1]),
            r,
        ]);
        assert_eq!(got.records[0].ttl, ttl, "ttl {value:?}");
    }
}

#[test]
fn target_annotation_on_gateway_replaces_its_addresses() {
    let gw = annotated(
        simple_gateway("infra", "gw1", None, &[GW1]),
        "external-dns.kubernetes.io/target",
        "198.51.100.7,2001:db8::7",
    );
    let got = settle_default(&[
        infra(),
        apps(),
        gw,
        http_route("apps", "r", on("gw1"), &["a.example.com"]),
    ]);
    assert_eq!(
        record_summary(&got),
        vec![
            ("a.example.com".into(), "A", vec!["198.51.100.7".into()]),
            ("a.example.com".into(), "AAAA", vec!["2001:db8::7".into()]),
        ]
    );
    // A Gateway with no address of its own gets one from the annotation.
    let lb = annotated(
        simple_gateway("infra", "gw1", None, &[]),
        "external-dns.alpha.kubernetes.io/target",
        "LB.Example.NET.",
    );
    let got = settle_default(&[
        infra(),
        apps(),
        lb,
        http_route("apps", "r", on("gw1"), &["a.example.com"]),
    ]);
    assert_eq!(
        record_summary(&got),
        vec![(
            "a.example.com".into(),
            "CNAME",
            vec!["lb.example.net".into()]
        )]
    );
    assert!(got.violations.is_empty(), "{:#?}", got.violations);
}

#[test]
fn target_annotation_on_listener_set_replaces_the_gateways_addresses() {
    let ls = annotated(
        listener_set("infra", "ls", ("infra", "gw1"), "*.team.example.com"),
        "external-dns.kubernetes.io/target",
        "198.51.100.9",
    );
    let got = settle_default(&[
        infra(),
        gateway_with_allowed_listeners(Some(json!({"from": "Same"}))),
        ls,
        http_route(
            "infra",
            "via-ls",
            json!([{"kind": "ListenerSet", "name": "ls"}]),
            &["a.team.example.com"],
        ),
        http_route("infra", "via-gw", on("gw1"), &["gw.example.com"]),
    ]);
    assert_eq!(
        record_summary(&got),
        vec![
            (
                "a.team.example.com".into(),
                "A",
                vec!["198.51.100.9".into()]
            ),
            ("gw.example.com".into(), "A", vec![GW1.into()]),
        ]
    );
}

#[test]
fn gateway_hostname_source_annotation() {
    let build = |source: Option<&str>| {
        let mut r = annotated(
            http_route("apps", "r", on("gw1"), &["spec.example.com"]),
            "external-dns.kubernetes.io/hostname",
            "annotated.example.com",
        );
        if let Some(source) = source {
            r = annotated(
                r,
                "external-dns.kubernetes.io/gateway-hostname-source",
                source,
            );
        }
        let got = settle_default(&[
            infra(),
            apps(),
            simple_gateway("infra", "gw1", None, &[GW1]),
            r,
        ]);
        got.records
            .iter()
            .map(|r| r.dns_name.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(build(None), ["annotated.example.com", "spec.example.com"]);
    assert_eq!(build(Some("annotation-only")), ["annotated.example.com"]);
    assert_eq!(build(Some("defined-hosts-only")), ["spec.example.com"]);
}

#[test]
fn gateway_hostname_source_suppresses_listener_hostname_inheritance() {
    let names = |source: Option<&str>| {
        let mut r = http_route("apps", "r", on("gw1"), &[]);
        if let Some(source) = source {
            r = annotated(
                r,
                "external-dns.kubernetes.io/gateway-hostname-source",
                source,
            );
        }
        let gw = gateway(
            "infra",
            "gw1",
            json!([
                listener("exact", "HTTP", Some("app.example.com")),
                listener("wild", "HTTPS", Some("*.example.com"))
            ]),
            &[GW1],
        );
        let cfg = Config {
            allow_inherited_wildcards: true,
            ..Config::default()
        };
        let got = settle(cfg, &[infra(), apps(), gw, r]);
        got.records
            .iter()
            .map(|r| r.dns_name.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(names(None), ["*.example.com", "app.example.com"]);
    assert!(names(Some("defined-hosts-only")).is_empty());
    assert!(names(Some("annotation-only")).is_empty());
}

#[test]
fn ignore_hostname_annotation_flag() {
    let r = annotated(
        http_route("apps", "r", on("gw1"), &["spec.example.com"]),
        "external-dns.kubernetes.io/hostname",
        "annotated.example.com",
    );
    let objects = [
        infra(),
        apps(),
        simple_gateway("infra", "gw1", None, &[GW1]),
        r,
    ];
    let got = settle(
        Config {
            ignore_hostname_annotation: true,
            ..Config::default()
        },
        &objects,
    );
    let names: Vec<_> = got.records.iter().map(|r| r.dns_name.as_str()).collect();
    assert_eq!(names, ["spec.example.com"]);
}

#[test]
fn tcp_and_udp_routes_take_no_spec_hostnames() {
    // Their schema has no spec.hostnames; a stray one must not publish anything.
    let gw = gateway(
        "infra",
        "gw1",
        json!([
            listener("tcp", "TCP", Some("*.example.com")),
            listener("udp", "UDP", Some("*.example.com"))
        ]),
        &[GW1],
    );
    let got = settle_default(&[
        infra(),
        apps(),
        gw,
        route("TCPRoute", "apps", "t", on("gw1"), &["t.example.com"]),
        route("UDPRoute", "apps", "u", on("gw1"), &["u.example.com"]),
    ]);
    assert!(got.records.is_empty(), "{got:#?}");
}
