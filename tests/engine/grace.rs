//! Address-loss grace (ARCHITECTURE.md, "Address-loss grace"): a Gateway whose addresses go
//! empty keeps its names at its last addresses until the grace ends. The clock is moved by hand.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use gateway_dns::engine::settle::{newcomer_conflicts, settle_all};
use gateway_dns::engine::{Action, Config, Outcome, Reason, evaluate_route};
use gateway_dns::index::Index;
use gateway_dns::model::Object;
use serde_json::{Value, json};

use crate::index::manual_clock;
use crate::objects::*;

const START: i64 = 1_700_000_000;
const GRACE: i64 = 600;

struct World {
    now: Arc<AtomicI64>,
    index: Index,
}

impl World {
    fn new(cfg: Config, objects: &[Value]) -> World {
        let (now, clock) = manual_clock(START);
        let index = Index::with_clock(Arc::new(cfg), clock);
        for object in objects {
            index.apply(decode(object));
        }
        World { now, index }
    }

    fn at(&self, seconds_after_start: i64) {
        self.now
            .store(START + seconds_after_start, Ordering::SeqCst);
    }

    fn apply(&self, object: &Value) {
        self.index.apply(decode(object));
    }

    fn outcome(&self) -> Outcome {
        settle_all(&*self.index.snapshot())
    }
}

fn gw(addresses: &[&str]) -> Value {
    simple_gateway("infra", "gw", Some("*.example.com"), addresses)
}

fn web() -> Value {
    created(
        http_route("apps", "web", on("gw"), &["app.example.com"]),
        "2025-01-01T00:00:00Z",
    )
}

fn start(cfg: Config) -> World {
    World::new(cfg, &[infra(), apps(), gw(&[GW1]), web()])
}

#[test]
fn addresses_lost_and_back_within_the_grace_change_no_record() {
    let world = start(Config::default());
    let before = world.outcome();
    assert_eq!(
        record_summary(&before),
        [("app.example.com".to_owned(), "A", vec![GW1.to_owned()])]
    );
    assert!(before.violations.is_empty(), "{before:#?}");

    world.at(10);
    world.apply(&gw(&[]));
    let during = world.outcome();
    assert_eq!(
        during.records, before.records,
        "the records stay as they were"
    );
    let finding = only_violation(&during, "HTTPRoute/apps/web");
    assert_finding(
        finding,
        Reason::GatewayHasNoAddress,
        Action::Warn,
        "spec.parentRefs[0]",
        &[
            "infra/gw",
            GW1,
            // Lost at START + 10 (2023-11-14T22:13:30Z); kept until 600 s later.
            "since 2023-11-14T22:13:30Z",
            "until 2023-11-14T22:23:30Z",
        ],
    );
    // Another change of the Gateway during the grace does not restart it.
    world.at(300);
    world.apply(&labelled(gw(&[]), "touched", "yes"));
    let later = world.outcome();
    assert_eq!(later.records, before.records);
    assert_eq!(later.violations, during.violations);

    // Addresses back within the grace: exactly the state before, nothing to change in DNS.
    world.at(400);
    world.apply(&gw(&[GW1]));
    assert!(!world.index.expire_address_losses());
    assert_eq!(world.outcome(), before);
}

#[test]
fn past_the_grace_the_names_are_removed() {
    let world = start(Config::default());
    world.apply(&gw(&[]));
    world.at(GRACE - 1);
    assert!(
        !world.index.expire_address_losses(),
        "one second before the end"
    );
    assert_eq!(
        world.index.snapshot().next_address_loss_end(),
        Some(START + GRACE)
    );
    assert_eq!(world.outcome().records.len(), 1);

    world.at(GRACE);
    assert!(world.index.expire_address_losses());
    assert_eq!(world.index.snapshot().next_address_loss_end(), None);
    let after = world.outcome();
    assert!(after.records.is_empty(), "{after:#?}");
    let finding = only_violation(&after, "HTTPRoute/apps/web");
    assert_finding(
        finding,
        Reason::GatewayHasNoAddress,
        Action::Warn,
        "spec.parentRefs[0]",
        &["infra/gw", "has no address yet"],
    );
    // A later return of the addresses publishes again, as for a new Gateway.
    world.at(GRACE + 5);
    world.apply(&gw(&[GW2]));
    assert_eq!(
        record_summary(&world.outcome()),
        [("app.example.com".to_owned(), "A", vec![GW2.to_owned()])]
    );
}

#[test]
fn a_zero_grace_removes_at_once() {
    let world = start(Config {
        address_loss_grace: Duration::ZERO,
        ..Config::default()
    });
    world.apply(&gw(&[]));
    let outcome = world.outcome();
    assert!(outcome.records.is_empty(), "{outcome:#?}");
    assert_eq!(
        only_violation(&outcome, "HTTPRoute/apps/web").reason,
        Reason::GatewayHasNoAddress
    );
}

#[test]
fn a_gateway_first_seen_without_an_address_has_no_grace() {
    let world = World::new(Config::default(), &[infra(), apps(), gw(&[]), web()]);
    assert!(world.outcome().records.is_empty());
    assert_eq!(world.index.snapshot().next_address_loss_end(), None);
}

#[test]
fn during_the_grace_the_claim_keeps_its_age_and_a_newcomer_is_denied() {
    let world = start(Config::default());
    world.apply(&simple_gateway(
        "infra",
        "other",
        Some("*.example.com"),
        &[GW2],
    ));
    world.at(60);
    world.apply(&gw(&[]));
    // A newer route through another Gateway asks for the same name.
    let newcomer = decode(&created(
        http_route("apps", "takeover", on("other"), &["app.example.com"]),
        "2026-06-01T00:00:00Z",
    ));
    let Object::Route(route) = newcomer.clone() else {
        unreachable!()
    };
    let snapshot = world.index.snapshot();
    let cfg = world.index.config();
    let eval = evaluate_route(&*snapshot, &cfg, &route);
    let denials = newcomer_conflicts(&*snapshot, &route, &eval);
    assert_eq!(denials.len(), 1, "{denials:#?}");
    assert_finding(
        &denials[0],
        Reason::HostnameConflict,
        Action::Deny,
        "spec.hostnames[0]",
        &["app.example.com", "infra/gw", GW1, "HTTPRoute apps/web"],
    );
    // Had it been stored anyway (webhook bypassed), the sync loop keeps the incumbent's name.
    world.index.apply(newcomer);
    let settled = world.outcome();
    assert_eq!(
        record_summary(&settled),
        [("app.example.com".to_owned(), "A", vec![GW1.to_owned()])]
    );
    assert!(
        violations_of(&settled, "HTTPRoute/apps/takeover")
            .iter()
            .any(|v| v.reason == Reason::HostnameConflict)
    );
}

#[test]
fn routes_through_a_listener_set_keep_their_names_too() {
    let gateway = |addresses: &[&str]| {
        with(
            gw(addresses),
            &["spec", "allowedListeners", "namespaces"],
            json!({"from": "All"}),
        )
    };
    let world = World::new(
        Config::default(),
        &[
            infra(),
            apps(),
            gateway(&[GW1]),
            listener_set("apps", "ls", ("infra", "gw"), "*.ls.example.com"),
            http_route(
                "apps",
                "via-set",
                json!([{"group": "gateway.networking.k8s.io", "kind": "ListenerSet", "name": "ls"}]),
                &["a.ls.example.com"],
            ),
        ],
    );
    let before = world.outcome();
    assert_eq!(before.records.len(), 1, "{before:#?}");
    world.apply(&gateway(&[]));
    assert_eq!(world.outcome().records, before.records);
    world.at(GRACE);
    assert!(world.index.expire_address_losses());
    assert!(world.outcome().records.is_empty());
}

#[test]
fn a_directory_read_again_is_no_address_loss_and_keeps_the_grace() {
    let world = start(Config::default());
    world.at(30);
    world.apply(&gw(&[]));
    let during = world.outcome();
    // The files source replaces everything on each read: the Gateway's history carries over.
    world.at(90);
    world
        .index
        .replace_all(decode_all(&[infra(), apps(), gw(&[]), web()]));
    assert_eq!(world.outcome(), during);
    assert_eq!(
        world.index.snapshot().next_address_loss_end(),
        Some(START + 30 + GRACE)
    );
}

#[test]
fn a_target_annotation_is_not_an_address_loss() {
    let annotated_gw = |addresses: &[&str]| {
        annotated(
            gw(addresses),
            "external-dns.kubernetes.io/target",
            "lb.example.net",
        )
    };
    let world = World::new(
        Config::default(),
        &[infra(), apps(), annotated_gw(&[GW1]), web()],
    );
    world.apply(&annotated_gw(&[]));
    let outcome = world.outcome();
    assert_eq!(
        record_summary(&outcome),
        [(
            "app.example.com".to_owned(),
            "CNAME",
            vec!["lb.example.net".to_owned()]
        )]
    );
    assert!(outcome.violations.is_empty(), "{outcome:#?}");
}
