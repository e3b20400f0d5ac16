//! The index: any sequence of apply / delete / reset leaves the same state (evaluations, claims,
//! outcome) as building a snapshot from the final set of objects at once; and the webhook's
//! newcomer rule (`newcomer_conflicts`): a route under review never displaces the incumbent.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use gateway_dns::engine::World;
use gateway_dns::engine::names::evaluate_route;
use gateway_dns::engine::settle::{newcomer_conflicts, settle_all};
use gateway_dns::engine::{Action, Config, MODE_LABEL, Reason};
use gateway_dns::index::{Index, Snapshot};
use gateway_dns::model::{Object, ObjectKey, ObjectKind};
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::objects::*;

/// Every version of every object the random sequences draw from: several versions per key, so
/// applies replace objects, move routes between parents, change labels, addresses and hostnames.
pub fn pool() -> Vec<Value> {
    let all = json!({"from": "All"});
    let team_a = json!({"from": "Selector", "selector": {"matchLabels": {"team": "a"}}});
    let ls = |ns: &str, name: &str, gw: &str, hostname: &str| {
        json!({"apiVersion": V1, "kind": "ListenerSet", "metadata": {"name": name, "namespace": ns},
               "spec": {"parentRef": {"name": gw, "namespace": "infra"},
                        "listeners": [listener("l", "HTTPS", Some(hostname))]}})
    };
    let gw_parent = |gw: &str| json!({"name": gw, "namespace": "infra"});
    vec![
        namespace("infra", json!({})),
        namespace("infra", json!({"team": "a"})),
        namespace("apps", json!({})),
        namespace("apps", json!({"team": "a"})),
        namespace("apps", json!({MODE_LABEL: "warn", "team": "b"})),
        with(
            simple_gateway("infra", "gw1", Some("*.example.com"), &["10.0.0.1"]),
            &["spec", "allowedListeners", "namespaces"],
            all.clone(),
        ),
        gateway(
            "infra",
            "gw1",
            json!([{"name": "web", "protocol": "HTTP", "port": 80,
                    "allowedRoutes": {"namespaces": team_a.clone()}}]),
            &["10.0.0.2"],
        ),
        with(
            simple_gateway("infra", "gw1", Some("a.example.com"), &[]),
            &["spec", "allowedListeners", "namespaces"],
            team_a,
        ),
        simple_gateway("infra", "gw2", None, &["10.0.0.2", "2001:db8::2"]),
        annotated(
            gateway(
                "infra",
                "gw2",
                json!([{"name": "web", "protocol": "HTTP", "port": 80, "hostname": "b.example.com"},
                       listener("tcp", "TCP", None)]),
                &["10.0.0.3"],
            ),
            "external-dns.kubernetes.io/target",
            "lb.example.net",
        ),
        ls("apps", "ls1", "gw1", "*.ls.example.com"),
        ls("apps", "ls1", "gw2", "x.ls.example.com"),
        with(
            ls("infra", "ls2", "gw1", "*.example.com"),
            &["status", "conditions"],
            json!([{"type": "Accepted", "status": "False"}]),
        ),
        ls("infra", "ls2", "gw1", "y.example.com"),
        created(
            http_route("apps", "r1", json!([gw_parent("gw1")]), &["a.example.com"]),
            "2025-01-01T00:00:00Z",
        ),
        created(
            http_route(
                "apps",
                "r1",
                json!([gw_parent("gw2")]),
                &["a.example.com", "b.example.com"],
            ),
            "2025-01-01T00:00:00Z",
        ),
        http_route(
            "apps",
            "r1",
            json!([{"name": "gw1", "namespace": "infra", "sectionName": "https"}]),
            &[],
        ),
        created(
            http_route("apps", "r2", json!([gw_parent("gw2")]), &["a.example.com"]),
            "2025-01-02T00:00:00Z",
        ),
        http_route(
            "apps",
            "r2",
            json!([gw_parent("gw1"), gw_parent("gw2")]),
            &["*.example.com", "b.example.com"],
        ),
        http_route(
            "apps",
            "r2",
            json!([{"kind": "ListenerSet", "name": "ls1"}]),
            &["a.ls.example.com", "x.ls.example.com"],
        ),
        created(
            http_route("infra", "r3", json!([gw_parent("gw1")]), &["a.example.com"]),
            "2024-12-31T00:00:00Z",
        ),
        http_route(
            "infra",
            "r3",
            json!([{"kind": "ListenerSet", "name": "ls2"}, gw_parent("gw2")]),
            &["y.example.com"],
        ),
        route("GRPCRoute", "apps", "g", json!([gw_parent("gw1")]), &[]),
        route(
            "GRPCRoute",
            "apps",
            "g",
            json!([gw_parent("gw2")]),
            &["b.example.com"],
        ),
        annotated(
            route("TCPRoute", "apps", "t", json!([gw_parent("gw2")]), &[]),
            "external-dns.kubernetes.io/hostname",
            "t.example.com,b.example.com",
        ),
    ]
}

#[derive(Debug, Clone)]
enum Op {
    Apply(usize),
    Delete(usize),
    /// A relist of one kind: the pool entries of that kind picked by the mask (last one per key wins).
    Reset(ObjectKind, Vec<bool>),
}

fn ops(pool_len: usize) -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        6 => (0..pool_len).prop_map(Op::Apply),
        2 => (0..pool_len).prop_map(Op::Delete),
        1 => (prop::sample::select(ObjectKind::ALL.to_vec()), prop::collection::vec(any::<bool>(), pool_len))
            .prop_map(|(kind, mask)| Op::Reset(kind, mask)),
    ];
    prop::collection::vec(op, 0..30)
}

/// Everything observable about a snapshot must equal a fresh build over the same objects.
fn assert_same_state(incremental: &Snapshot, fresh: &Snapshot) -> Result<(), TestCaseError> {
    for kind in ObjectKind::ALL {
        prop_assert_eq!(
            incremental.len_of(kind),
            fresh.len_of(kind),
            "count of {}",
            kind
        );
    }
    for (id, entry) in fresh.routes() {
        let Some(mine) = incremental.route(id) else {
            return Err(TestCaseError::fail(format!("{id} missing")));
        };
        prop_assert_eq!(&mine.route, &entry.route, "route {}", id);
        prop_assert_eq!(&mine.eval, &entry.eval, "evaluation of {}", id);
    }
    let names = |s: &Snapshot| {
        s.claims()
            .map(|(name, _)| name)
            .map(str::to_owned)
            .collect::<BTreeSet<_>>()
    };
    prop_assert_eq!(names(incremental), names(fresh));
    for (name, _) in fresh.claims() {
        prop_assert_eq!(
            incremental.claimants(name),
            fresh.claimants(name),
            "claimants of {}",
            name
        );
    }
    prop_assert_eq!(settle_all(incremental), settle_all(fresh));
    Ok(())
}

/// A clock the test moves by hand (Unix seconds).
pub fn manual_clock(start: i64) -> (Arc<AtomicI64>, gateway_dns::index::Clock) {
    let now = Arc::new(AtomicI64::new(start));
    let read = now.clone();
    (now, Arc::new(move || read.load(Ordering::SeqCst)))
}

/// With an address-loss grace, a Gateway that loses its addresses keeps its names until the
/// grace ends, which a fresh build (no history) does not: after each step the clock moves past
/// the grace and the grace is ended, and only then is the state compared.
fn run_ops(cfg: Config, ops: &[Op]) -> Result<(), TestCaseError> {
    let pool: Vec<Object> = pool().iter().map(decode).collect();
    let cfg = Arc::new(cfg);
    let (now, clock) = manual_clock(1_700_000_000);
    let mut snap = Snapshot::with_clock(cfg.clone(), clock.clone());
    let index = Index::with_clock(cfg.clone(), clock);
    let grace = i64::try_from(cfg.address_loss_grace.as_secs()).unwrap();
    let mut changes = index.subscribe();
    let mut model: BTreeMap<ObjectKey, Object> = BTreeMap::new();
    for op in ops {
        let before = index.snapshot();
        match op {
            Op::Apply(i) => {
                let object = pool[*i].clone();
                model.insert(object.key(), object.clone());
                snap.apply(object.clone());
                index.apply(object);
            }
            Op::Delete(i) => {
                let key = pool[*i].key();
                model.remove(&key);
                snap.delete(&key);
                index.delete(&key);
            }
            Op::Reset(kind, mask) => {
                let mut chosen: BTreeMap<ObjectKey, Object> = BTreeMap::new();
                for (object, keep) in pool.iter().zip(mask) {
                    if *keep && object.kind() == *kind {
                        chosen.insert(object.key(), object.clone());
                    }
                }
                model.retain(|k, _| k.kind() != *kind);
                model.extend(chosen.clone());
                let objects: Vec<Object> = chosen.into_values().collect();
                snap.reset(*kind, objects.clone());
                index.reset(*kind, objects);
            }
        }
        if grace > 0 {
            now.fetch_add(grace, Ordering::SeqCst);
            snap.expire_address_losses();
            index.expire_address_losses();
        }
        // Checked after every step, so a failure shrinks to the first divergent operation.
        let fresh = Snapshot::from_objects(cfg.clone(), model.values().cloned());
        assert_same_state(&snap, &fresh)?;
        assert_same_state(&index.snapshot(), &fresh)?;
        // Every change is announced (the sync loop follows the counter); a step announced as
        // no change left the index as it was.
        if changes.has_changed().unwrap_or(false) {
            changes.mark_unchanged();
        } else {
            assert_same_state(&index.snapshot(), &before)?;
            prop_assert!(
                Arc::ptr_eq(&index.snapshot(), &before),
                "no new snapshot without a change"
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn incremental_index_equals_a_fresh_build(ops in ops(pool().len())) {
        run_ops(Config::default(), &ops)?;
    }

    #[test]
    fn incremental_index_equals_a_fresh_build_with_other_flags(ops in ops(pool().len())) {
        let cfg = Config {
            attachment: gateway_dns::engine::AttachmentMode::Status,
            allow_inherited_wildcards: true,
            listener_sets: false,
            conflict_resolution: gateway_dns::engine::ConflictResolution::Exclude,
            address_loss_grace: std::time::Duration::ZERO,
            ..Config::default()
        };
        run_ops(cfg, &ops)?;
    }
}

#[test]
fn pool_exercises_claims_conflicts_and_listener_sets() {
    // Guards the property test: its objects must produce conflicts and ListenerSet claims.
    let pool: Vec<Object> = pool().iter().map(decode).collect();
    let outcome_of = |indices: &[usize]| {
        let objects = indices.iter().map(|i| pool[*i].clone());
        settle_all(&Snapshot::from_objects(
            Arc::new(Config::default()),
            objects,
        ))
    };
    // apps, gw1 (*.example.com), gw2, r1 on gw1 and r2 on gw2, both a.example.com.
    let conflict = outcome_of(&[2, 5, 8, 14, 17]);
    assert!(
        conflict
            .violations
            .iter()
            .any(|v| v.reason == Reason::HostnameConflict),
        "{conflict:#?}"
    );
    // apps, gw1 (allows all ListenerSets), ls1 on gw1, r2 on ls1.
    let via_set = outcome_of(&[2, 5, 10, 19]);
    assert!(
        via_set
            .records
            .iter()
            .any(|r| r.dns_name == "a.ls.example.com"),
        "{via_set:#?}"
    );
}

#[test]
fn applying_what_is_stored_or_deleting_what_is_not_announces_nothing() {
    let index = Index::new();
    let route = decode(&http_route(
        "apps",
        "r",
        json!([{"name": "gw"}]),
        &["a.example.com"],
    ));
    let mut changes = index.subscribe();
    index.apply(route.clone());
    assert!(changes.has_changed().unwrap());
    changes.mark_unchanged();
    let published = index.snapshot();
    index.apply(route.clone());
    index.delete(&ObjectKey::new(ObjectKind::HTTPRoute, "apps", "absent"));
    assert!(!changes.has_changed().unwrap());
    assert!(Arc::ptr_eq(&published, &index.snapshot()));
    index.delete(&route.key());
    assert!(changes.has_changed().unwrap());
}

#[test]
fn delete_of_an_absent_object_is_a_no_op() {
    let cfg = Arc::new(Config::default());
    let objects: Vec<Object> = [
        namespace("apps", json!({})),
        simple_gateway("apps", "gw", None, &["10.0.0.1"]),
        http_route("apps", "r", json!([{"name": "gw"}]), &["a.example.com"]),
    ]
    .iter()
    .map(decode)
    .collect();
    let mut snap = Snapshot::from_objects(cfg.clone(), objects.clone());
    for kind in ObjectKind::ALL {
        snap.delete(&ObjectKey::new(kind, "apps", "absent"));
    }
    assert_eq!(
        settle_all(&snap),
        settle_all(&Snapshot::from_objects(cfg, objects))
    );
}

#[test]
fn with_applied_leaves_the_original_untouched() {
    let cfg = Arc::new(Config::default());
    let base = Snapshot::from_objects(
        cfg,
        [
            namespace("apps", json!({})),
            simple_gateway("apps", "gw", None, &["10.0.0.1"]),
        ]
        .iter()
        .map(decode),
    );
    let next = base.with_applied(decode(&http_route(
        "apps",
        "r",
        json!([{"name": "gw"}]),
        &["a.example.com"],
    )));
    assert!(settle_all(&base).records.is_empty());
    assert_eq!(settle_all(&next).records.len(), 1);
}

// ---------------------------------------------------------------- newcomer_conflicts

fn incumbent_world() -> Snapshot {
    snapshot(
        Config::default(),
        &[
            namespace("infra", json!({})),
            namespace("apps", json!({})),
            namespace("relaxed", json!({MODE_LABEL: "warn"})),
            simple_gateway("infra", "gw1", None, &["10.0.0.1"]),
            simple_gateway("infra", "gw2", None, &["10.0.0.2"]),
            simple_gateway("infra", "gw1-twin", None, &["10.0.0.1"]),
            created(
                http_route(
                    "apps",
                    "incumbent",
                    json!([parent("infra", "gw1")]),
                    &["a.example.com"],
                ),
                "2025-06-01T00:00:00Z",
            ),
        ],
    )
}

/// The newcomer's conflicts, as the webhook computes them: the route evaluated against the
/// cluster as it is, then compared with the incumbents' claims. The same answer must come from a
/// snapshot that already holds the route (the sync loop's view of an applied object).
fn review(snap: &Snapshot, newcomer: Value) -> Vec<gateway_dns::engine::Finding> {
    let Object::Route(route) = decode(&newcomer) else {
        panic!("not a route: {newcomer}");
    };
    let eval = evaluate_route(snap, snap.config(), &route);
    let found = newcomer_conflicts(snap, &route, &eval);
    let applied = snap.with_applied(Object::Route(route.clone()));
    let entry = applied.route(&route.key()).expect("applied");
    assert_eq!(
        newcomer_conflicts(&applied, &entry.route, &entry.eval),
        found,
        "the answer does not depend on whether the snapshot already holds the route"
    );
    found
}

#[test]
fn a_newer_route_never_displaces_the_incumbent() {
    let base = incumbent_world();
    // The newcomer is *older* by timestamp (restored from a backup, say): still the newcomer.
    let newcomer = created(
        http_route(
            "apps",
            "newcomer",
            json!([parent("infra", "gw2")]),
            &["b.example.com", "a.example.com"],
        ),
        "2020-01-01T00:00:00Z",
    );
    let found = review(&base, newcomer.clone());
    assert_eq!(found.len(), 1, "{found:#?}");
    let v = &found[0];
    assert_eq!(v.reason, Reason::HostnameConflict);
    assert_eq!(v.action, Action::Deny);
    assert_eq!(v.object, "HTTPRoute/apps/newcomer");
    assert_eq!(v.hostname.as_deref(), Some("a.example.com"));
    assert_eq!(v.field, "spec.hostnames[1]");
    for part in ["a.example.com", "infra/gw1", "10.0.0.1", "apps/incumbent"] {
        assert!(v.message.contains(part), "{}", v.message);
    }
    // The incumbent's own review stays clean, and the base snapshot never saw the newcomer.
    let incumbent = base
        .route(&ObjectKey::new(ObjectKind::HTTPRoute, "apps", "incumbent"))
        .unwrap();
    assert!(newcomer_conflicts(&base, &incumbent.route, &incumbent.eval).is_empty());
    assert!(
        base.route(&ObjectKey::new(ObjectKind::HTTPRoute, "apps", "newcomer"))
            .is_none()
    );
}

#[test]
fn newcomer_sharing_the_incumbents_targets_is_fine() {
    let base = incumbent_world();
    let on_twin = http_route(
        "apps",
        "twin",
        json!([parent("infra", "gw1-twin")]),
        &["a.example.com"],
    );
    assert!(review(&base, on_twin).is_empty());
    let same_gateway = http_route(
        "apps",
        "same",
        json!([parent("infra", "gw1")]),
        &["a.example.com"],
    );
    assert!(review(&base, same_gateway).is_empty());
}

#[test]
fn newcomer_wildcard_does_not_conflict_with_an_exact_incumbent() {
    let base = incumbent_world();
    let wildcard = http_route(
        "apps",
        "wild",
        json!([parent("infra", "gw2")]),
        &["*.example.com"],
    );
    assert!(review(&base, wildcard).is_empty());
}

#[test]
fn updating_the_incumbent_is_not_a_conflict_with_itself() {
    let base = incumbent_world();
    let update = created(
        http_route(
            "apps",
            "incumbent",
            json!([parent("infra", "gw1")]),
            &["a.example.com", "c.example.com"],
        ),
        "2025-06-01T00:00:00Z",
    );
    assert!(review(&base, update).is_empty());
}

#[test]
fn newcomer_across_two_gateways_conflicts_with_itself() {
    let base = incumbent_world();
    let split = http_route(
        "apps",
        "split",
        json!([parent("infra", "gw1"), parent("infra", "gw2")]),
        &["new.example.com"],
    );
    let found = review(&base, split);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(
        found[0].message.contains("infra/gw1") && found[0].message.contains("infra/gw2"),
        "{}",
        found[0].message
    );
}

#[test]
fn newcomer_conflicts_follow_the_namespace_mode() {
    let base = incumbent_world();
    let newcomer = http_route(
        "relaxed",
        "r",
        json!([parent("infra", "gw2")]),
        &["a.example.com"],
    );
    let found = review(&base, newcomer);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].action, Action::Warn);
}

// ---------------------------------------------------------------- what the index keeps

fn route_with_bookkeeping() -> Value {
    let route = http_route("apps", "r", json!([{"name": "gw"}]), &["a.example.com"]);
    let route = labelled(route, "app.kubernetes.io/managed-by", "Helm");
    let route = annotated(route, "meta.helm.sh/release-name", "shop");
    annotated(route, "external-dns.kubernetes.io/ttl", "60")
}

fn stored_route(cfg: Config) -> Arc<gateway_dns::model::Route> {
    let snap = snapshot(
        cfg,
        &[
            namespace("apps", json!({})),
            simple_gateway("apps", "gw", None, &["10.0.0.1"]),
            route_with_bookkeeping(),
        ],
    );
    let key = ObjectKey::new(ObjectKind::HTTPRoute, "apps", "r");
    let entry = snap.route(&key).expect("route stored");
    // Still evaluated as written: the TTL annotation is read.
    assert_eq!(entry.eval.ttl, Some(60));
    entry.route.clone()
}

#[test]
fn the_index_keeps_only_the_metadata_the_configuration_reads() {
    let trimmed = stored_route(Config::default());
    assert!(trimmed.meta.labels.is_empty());
    let annotations: Vec<_> = trimmed.meta.annotations.iter().collect();
    assert_eq!(annotations, [("external-dns.kubernetes.io/ttl", "60")]);

    let mut by_label = Config::default();
    by_label.scope.route_selector =
        Some(gateway_dns::engine::selector::parse("app.kubernetes.io/managed-by=Helm").unwrap());
    let kept = stored_route(by_label);
    assert_eq!(
        kept.meta.labels.get("app.kubernetes.io/managed-by"),
        Some("Helm")
    );
    assert_eq!(kept.meta.annotations.iter().count(), 1);

    let mut by_annotation = Config::default();
    by_annotation.scope.annotation_filter =
        Some(gateway_dns::engine::selector::parse("meta.helm.sh/release-name=shop").unwrap());
    let kept = stored_route(by_annotation);
    assert!(kept.meta.labels.is_empty());
    assert_eq!(
        kept.meta.annotations.get("meta.helm.sh/release-name"),
        Some("shop")
    );
}

#[test]
fn a_relist_of_unchanged_routes_keeps_their_evaluations() {
    let index = Index::new();
    let objects = decode_all(&[
        namespace("apps", json!({})),
        simple_gateway("apps", "gw", None, &["10.0.0.1"]),
        route_with_bookkeeping(),
    ]);
    index.replace_all(objects);
    let key = ObjectKey::new(ObjectKind::HTTPRoute, "apps", "r");
    let before = index.snapshot().route(&key).expect("stored").clone();
    // The relist carries the labels and annotations the index dropped: still the same route.
    index.reset(
        ObjectKind::HTTPRoute,
        vec![decode(&route_with_bookkeeping())],
    );
    let after = index.snapshot().route(&key).expect("stored").clone();
    assert!(Arc::ptr_eq(&before.route, &after.route));
    assert!(Arc::ptr_eq(&before.eval, &after.eval));
}

#[test]
fn a_relist_buffers_the_stored_projection_of_what_did_not_change() {
    let index = Index::new();
    index.replace_all(decode_all(&[
        namespace("apps", json!({})),
        simple_gateway("apps", "gw", None, &["10.0.0.1"]),
        route_with_bookkeeping(),
    ]));
    let snap = index.snapshot();
    let key = ObjectKey::new(ObjectKind::HTTPRoute, "apps", "r");
    let stored = snap.route(&key).expect("stored").route.clone();
    let gateway = snap.gateways().next().expect("stored").clone();

    // The same route, labels and all: the pointer to the stored (trimmed) projection.
    let Object::Route(shared) = index.share_stored(decode(&route_with_bookkeeping())) else {
        panic!("a route stays a route");
    };
    assert!(Arc::ptr_eq(&shared, &stored));
    let Object::Gateway(shared) =
        index.share_stored(decode(&simple_gateway("apps", "gw", None, &["10.0.0.1"])))
    else {
        panic!("a Gateway stays a Gateway");
    };
    assert!(Arc::ptr_eq(&shared, &gateway));

    // A changed one is its own projection, trimmed as the index would store it.
    let changed = http_route("apps", "r", json!([{"name": "gw"}]), &["other.example.com"]);
    let Object::Route(own) = index.share_stored(decode(&with(
        changed,
        &["metadata", "labels"],
        json!({"app": "shop"}),
    ))) else {
        panic!("a route stays a route");
    };
    assert!(!Arc::ptr_eq(&own, &stored));
    assert!(own.meta.labels.is_empty());
    assert_eq!(&*own.hostnames, ["other.example.com"]);
}

#[test]
fn a_relist_delivered_twice_keeps_the_latest_of_each_object() {
    let index = Index::new();
    let route = |name: &str, host: &str| {
        decode(&http_route("apps", name, json!([{"name": "gw"}]), &[host]))
    };
    index.replace_all(decode_all(&[
        namespace("apps", json!({})),
        simple_gateway("apps", "gw", None, &["10.0.0.1"]),
    ]));
    index.apply(route("gone", "gone.example.com"));
    // A list cut short and sent again: the second copy of "a" is the newer one.
    index.reset(
        ObjectKind::HTTPRoute,
        vec![
            route("a", "old.example.com"),
            route("b", "b.example.com"),
            route("a", "new.example.com"),
        ],
    );
    let snap = index.snapshot();
    assert_eq!(snap.len_of(ObjectKind::HTTPRoute), 2);
    let a = snap
        .route(&ObjectKey::new(ObjectKind::HTTPRoute, "apps", "a"))
        .expect("stored");
    assert_eq!(&*a.route.hostnames, ["new.example.com"]);
    assert!(!snap.contains(&ObjectKey::new(ObjectKind::HTTPRoute, "apps", "gone")));
    assert_eq!(snap.claimants("old.example.com"), &[]);
}

#[test]
fn routes_on_one_gateway_share_its_origin_and_follow_its_changes() {
    let index = Index::new();
    let gateway = |address: &str| simple_gateway("apps", "gw", None, &[address]);
    index.replace_all(decode_all(&[
        namespace("apps", json!({})),
        gateway("10.0.0.1"),
        http_route("apps", "r1", json!([{"name": "gw"}]), &["a.example.com"]),
        http_route("apps", "r2", json!([{"name": "gw"}]), &["b.example.com"]),
    ]));
    let origins = |index: &Index| {
        let snap = index.snapshot();
        ["r1", "r2"].map(|name| {
            let key = ObjectKey::new(ObjectKind::HTTPRoute, "apps", name);
            snap.route(&key).expect("stored").eval.claims[0]
                .origin
                .clone()
        })
    };
    let [first, second] = origins(&index);
    assert!(Arc::ptr_eq(&first, &second));
    assert_eq!(first.targets_text(), "10.0.0.1");

    index.apply(decode(&gateway("10.0.0.9")));
    let [first, second] = origins(&index);
    assert!(Arc::ptr_eq(&first, &second));
    assert_eq!(first.targets_text(), "10.0.0.9");
}

#[test]
fn routes_through_one_listener_set_share_its_origin_and_follow_their_gateway() {
    let index = Index::new();
    let gateway = |address: &str| {
        with(
            simple_gateway("infra", "gw", None, &[address]),
            &["spec", "allowedListeners", "namespaces"],
            json!({"from": "All"}),
        )
    };
    let through_set = json!([{"group": "gateway.networking.k8s.io", "kind": "ListenerSet",
                              "name": "ls", "namespace": "apps"}]);
    index.replace_all(decode_all(&[
        namespace("infra", json!({})),
        namespace("apps", json!({})),
        gateway("10.0.0.1"),
        listener_set("apps", "ls", ("infra", "gw"), "*.example.com"),
        http_route("apps", "r1", through_set.clone(), &["a.example.com"]),
        http_route("apps", "r2", through_set, &["b.example.com"]),
    ]));
    let origins = |index: &Index| {
        let snap = index.snapshot();
        ["r1", "r2"].map(|name| {
            let key = ObjectKey::new(ObjectKind::HTTPRoute, "apps", name);
            let entry = snap.route(&key).expect("stored");
            assert_eq!(entry.eval.claims.len(), 1, "{name}: {:?}", entry.eval);
            entry.eval.claims[0].origin.clone()
        })
    };
    let [first, second] = origins(&index);
    assert!(Arc::ptr_eq(&first, &second));
    assert_eq!(first.listener_set.as_deref(), Some("apps/ls"));
    assert_eq!(first.targets_text(), "10.0.0.1");

    // A new address on the Gateway reaches the routes through the ListenerSet, still shared.
    index.apply(decode(&gateway("10.0.0.9")));
    let [first, second] = origins(&index);
    assert!(Arc::ptr_eq(&first, &second));
    assert_eq!(first.targets_text(), "10.0.0.9");

    // Without its Gateway the ListenerSet publishes nothing; back with it, names return.
    index.delete(&ObjectKey::new(ObjectKind::Gateway, "infra", "gw"));
    let key = ObjectKey::new(ObjectKind::HTTPRoute, "apps", "r1");
    assert!(
        index
            .snapshot()
            .route(&key)
            .expect("stored")
            .eval
            .claims
            .is_empty()
    );
    index.apply(decode(&gateway("10.0.0.7")));
    let [first, second] = origins(&index);
    assert!(Arc::ptr_eq(&first, &second));
    assert_eq!(first.targets_text(), "10.0.0.7");
}

/// The settled outcome is computed once per snapshot while it is read, and shared (the sync loop
/// and the findings report read the same one), follows every change, and is not kept past its
/// readers.
#[test]
fn settled_is_one_evaluation_per_snapshot_and_follows_changes() {
    let index = Index::new();
    for object in decode_all(&[
        namespace("infra", json!({})),
        namespace("apps", json!({})),
        simple_gateway("infra", "gw1", None, &["10.0.0.1"]),
        simple_gateway("infra", "gw2", None, &["10.0.0.2"]),
        created(
            http_route(
                "apps",
                "b1",
                json!([parent("infra", "gw1")]),
                &["b.example.com"],
            ),
            "2025-06-01T00:00:00Z",
        ),
        created(
            http_route(
                "apps",
                "b2",
                json!([parent("infra", "gw2")]),
                &["b.example.com"],
            ),
            "2025-06-02T00:00:00Z",
        ),
    ]) {
        index.apply(object);
    }
    let first = index.settled();
    assert!(Arc::ptr_eq(&first, &index.settled()), "not evaluated twice");
    assert_eq!(*first, settle_all(&*index.snapshot()));
    assert!(
        first
            .violations
            .iter()
            .any(|v| v.reason == Reason::HostnameConflict && v.object == "HTTPRoute/apps/b2")
    );
    index.delete(&ObjectKey::new(ObjectKind::HTTPRoute, "apps", "b1"));
    let fixed = index.settled();
    assert!(!Arc::ptr_eq(&first, &fixed));
    assert_eq!(*fixed, settle_all(&*index.snapshot()));
    assert!(fixed.violations.is_empty(), "{:?}", fixed.violations);
    // Kept only while read: once every reader let go it is freed, and asked again, evaluated
    // again.
    let read = Arc::downgrade(&fixed);
    drop(fixed);
    assert!(
        read.upgrade().is_none(),
        "the index keeps an outcome nobody reads"
    );
    assert_eq!(*index.settled(), settle_all(&*index.snapshot()));
}
