//! The `kube` source under faults a real API server cannot be made to produce on demand, against
//! the API double (`tests/support/apiserver`): an object the CRD schema would refuse, error
//! answers (500, 503, 429), slow answers, and watch streams cut in the middle of an event or
//! ended all at once, a restarted server that has not registered its CRDs yet, and lists that
//! come back empty. Everything a real server can do is tested on one, in `tests/cluster`.

use std::time::{Duration, Instant};

use gateway_dns::engine::World as _;
use gateway_dns::index::Index;
use gateway_dns::model::{self, Object, ObjectKind};
use gateway_dns::source::kube::{Absence, AbsenceDecision, Config, KindStatus, KubeSource, client};
use serde_json::{Value, json};

use crate::support::apiserver::ApiServer;
use crate::support::objects;

fn fast_config() -> Config {
    Config {
        discovery_interval: Duration::from_millis(200),
        page_size: 7,
        streaming_lists: true,
        backoff_min: Duration::from_millis(20),
        backoff_max: Duration::from_millis(300),
        recheck_after: Duration::from_secs(2),
        // Short, so that absences confirmed (a CRD removed, every object deleted while a
        // watch was down) show within the tests' limits.
        absence_grace: Duration::from_secs(1),
        absence_rounds: 3,
    }
}

async fn start_source(server: &ApiServer) -> (Index, KubeSource) {
    start_source_with(server, fast_config()).await
}

async fn start_source_with(server: &ApiServer, config: Config) -> (Index, KubeSource) {
    let client = client(Some(server.kubeconfig_path())).await.unwrap();
    let index = Index::new();
    let source = KubeSource::spawn(client, index.clone(), config);
    (index, source)
}

/// An HTTPRoute in namespace `shop` with one hostname, created on the double.
fn add_http_route(server: &ApiServer, name: &str, hostname: &str) {
    server
        .create(route(ObjectKind::HTTPRoute, "shop", name, hostname))
        .unwrap();
}

/// Lists completed so far, every kind together.
fn lists(source: &KubeSource) -> u64 {
    source.status().iter().map(|s| s.lists).sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relist_on_a_server_without_streaming_lists_falls_back_to_pages() {
    let server = ApiServer::start().await;
    add_http_route(&server, "first", "a.example.com");
    let (index, source) = start_source(&server).await;
    wait_ready(&source).await;
    // The first list is paged (nothing stored yet), so the double's refusal of streaming
    // lists (a watch from resourceVersion 0) is not met before a relist.
    assert!(source.streams_lists());
    let listed = lists(&source);

    // History compacted past every watch: each kind lists again, tries a streaming list,
    // is refused, and lists in pages.
    add_http_route(&server, "second", "b.example.com");
    server.compact();
    server.drop_watches();
    assert!(
        eventually(Duration::from_secs(5), || !source.streams_lists()
            && lists(&source) > listed
            && index.len_of(ObjectKind::HTTPRoute) == 2)
        .await,
        "{:?}",
        source.status()
    );
    converges(&index, &server, Duration::from_secs(5))
        .await
        .unwrap();
    // And the watches after it still deliver changes.
    add_http_route(&server, "third", "c.example.com");
    converges(&index, &server, Duration::from_secs(5))
        .await
        .unwrap();
}

async fn wait_ready(source: &KubeSource) {
    let mut ready = source.ready();
    let synced = tokio::time::timeout(Duration::from_secs(10), ready.wait_for(|r| *r)).await;
    assert!(synced.is_ok_and(|r| r.is_ok()), "{:?}", source.status());
}

/// Polls `condition` every 10 ms for at most `limit`.
async fn eventually(limit: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if condition() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    condition()
}

fn namespace_object(name: &str, team: &str) -> Value {
    objects::namespace(name, json!({"team": team}))
}

/// One HTTP listener for `hostname`, routes and ListenerSets from every namespace, one address.
fn gateway(namespace: &str, name: &str, hostname: &str, address: &str) -> Value {
    let gateway = objects::http_gateway(namespace, name, hostname);
    objects::addressed(objects::open_to_listener_sets(gateway), &[address])
}

/// Under Gateway infra/`parent`: one HTTPS listener `extra` for `hostname` (its own namespace's
/// routes only).
fn listener_set(namespace: &str, name: &str, parent: &str, hostname: &str) -> Value {
    let listener = objects::listener_from("extra", "HTTPS", Some(hostname), None);
    objects::listener_set_of(namespace, name, ("infra", parent), json!([listener]))
}

/// A route of `kind` on Gateway infra/public claiming `hostname`.
fn route(kind: ObjectKind, namespace: &str, name: &str, hostname: &str) -> Value {
    let parents = json!([objects::parent("infra", "public")]);
    objects::claiming_route(kind, namespace, name, parents, hostname)
}

fn object_of(kind: ObjectKind, namespace: &str, name: &str, variant: &str) -> Value {
    match kind {
        ObjectKind::Namespace => namespace_object(name, variant),
        ObjectKind::Gateway => gateway(
            namespace,
            name,
            &format!("*.{variant}.example.com"),
            "203.0.113.10",
        ),
        ObjectKind::ListenerSet => {
            listener_set(namespace, name, "public", &format!("{variant}.example.net"))
        }
        route_kind => route(
            route_kind,
            namespace,
            name,
            &format!("{variant}.example.com"),
        ),
    }
}

/// Gives `object` the spec of `replacement` (Namespaces have none).
fn take_spec(object: &mut Value, replacement: Value) {
    if let Some(spec) = replacement.get("spec") {
        object["spec"] = spec.clone();
    }
}

/// Compares the index with the double: same keys per kind, same projections.
fn mismatch(index: &Index, server: &ApiServer) -> Option<String> {
    let snapshot = index.snapshot();
    for kind in ObjectKind::ALL {
        let objects = server.objects(kind.kind());
        if snapshot.len_of(kind) != objects.len() {
            return Some(format!(
                "{kind}: index has {}, API has {}",
                snapshot.len_of(kind),
                objects.len()
            ));
        }
        for value in objects {
            let expected = match model::decode_value(&value) {
                Ok(Some(object)) => object,
                other => {
                    return Some(format!(
                        "cannot decode the double's object {value}: {other:?}"
                    ));
                }
            };
            let key = expected.key();
            let same = match &expected {
                Object::Namespace(ns) => snapshot.namespace(key.name()) == Some(&**ns),
                Object::Gateway(gw) => snapshot.gateway(key.namespace(), key.name()) == Some(gw),
                Object::ListenerSet(ls) => {
                    snapshot.listener_set(key.namespace(), key.name()) == Some(ls)
                }
                // The index keeps routes trimmed to what its configuration reads.
                Object::Route(route) => snapshot.route(&key).is_some_and(|entry| {
                    entry.route == snapshot.config().trim_route(route.clone())
                }),
            };
            if !same {
                return Some(format!("{key} differs or is missing"));
            }
        }
    }
    None
}

async fn converges(index: &Index, server: &ApiServer, limit: Duration) -> Result<(), String> {
    let ok = eventually(limit, || mismatch(index, server).is_none()).await;
    if ok {
        Ok(())
    } else {
        Err(mismatch(index, server).unwrap_or_default())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_object_is_skipped_and_the_stream_goes_on() {
    let server = ApiServer::start().await;
    // Shapes the HTTPRoute CRD's schema would refuse: only a store without one can hold them.
    let mut broken = route(ObjectKind::HTTPRoute, "shop", "broken", "x.example.com");
    broken["spec"]["hostnames"] = json!(5);
    server.create(broken).unwrap();
    add_http_route(&server, "fine", "a.example.com");
    let (index, source) = start_source(&server).await;
    wait_ready(&source).await;
    let http = |source: &KubeSource| {
        source
            .status()
            .into_iter()
            .find(|s| s.kind == ObjectKind::HTTPRoute)
            .unwrap()
    };
    let fine = model::ObjectKey::new(ObjectKind::HTTPRoute, "shop", "fine");
    assert_eq!(index.len_of(ObjectKind::HTTPRoute), 1);
    assert!(index.snapshot().route(&fine).is_some());
    assert_eq!(http(&source).decode_errors, 1);

    // A valid object turned unreadable leaves the index (as a relist would skip it) ...
    let mut fine_now = server.get("HTTPRoute", "shop", "fine").unwrap();
    fine_now["spec"]["parentRefs"] = json!("not a list");
    server.replace(fine_now).unwrap();
    assert!(
        eventually(Duration::from_secs(2), || index
            .len_of(ObjectKind::HTTPRoute)
            == 0)
        .await
    );
    assert_eq!(http(&source).decode_errors, 2);
    // ... and the stream goes on: later changes still arrive.
    add_http_route(&server, "later", "b.example.com");
    let mut readable_again = server.get("HTTPRoute", "shop", "fine").unwrap();
    take_spec(
        &mut readable_again,
        route(ObjectKind::HTTPRoute, "shop", "fine", "a.example.com"),
    );
    server.replace(readable_again).unwrap();
    assert!(
        eventually(Duration::from_secs(2), || index
            .len_of(ObjectKind::HTTPRoute)
            == 2)
        .await
    );
    assert_eq!(http(&source).errors, 0);
}

/// A small deterministic generator (xorshift64*), seeded per run and printed on failure.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_random_mutations_with_error_answers_and_cut_streams_end_equal_to_the_api() {
    // Pages fetched ahead, then the source's own watch loop.
    random_mutations(fast_config()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_random_mutations_end_equal_to_the_api_without_streaming_lists() {
    // kube-rs's watcher: what a relist on a server that refuses streaming lists falls back to.
    random_mutations(Config {
        streaming_lists: false,
        ..fast_config()
    })
    .await;
}

async fn random_mutations(config: Config) {
    let seed = std::env::var("GATEWAY_DNS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    println!("seed {seed} (rerun with GATEWAY_DNS_SEED={seed})");
    let mut rng = Rng(seed);
    let server = ApiServer::start().await;
    let (index, source) = start_source_with(&server, config).await;
    wait_ready(&source).await;

    let namespaces = ["a", "b", "c"];
    let mut faults = Vec::new();
    for step in 0..1000u32 {
        let kind = ObjectKind::ALL[rng.below(ObjectKind::ALL.len() as u64) as usize];
        let namespace = if kind == ObjectKind::Namespace {
            ""
        } else {
            namespaces[rng.below(3) as usize]
        };
        let name = format!("o{}", rng.below(12));
        let variant = format!("v{}", rng.below(5));
        match server.get(kind.kind(), namespace, &name) {
            None => {
                server
                    .create(object_of(kind, namespace, &name, &variant))
                    .unwrap();
            }
            Some(_) if rng.below(3) == 0 => {
                server.delete(kind.kind(), namespace, &name).unwrap();
            }
            Some(mut current) => {
                take_spec(&mut current, object_of(kind, namespace, &name, &variant));
                current["metadata"]["labels"] = json!({"step": step.to_string()});
                server.replace(current).unwrap();
            }
        }
        if step % 40 == 39 {
            // Every fault comes up about equally often, in a seed-dependent order.
            let fault = (faults.len() as u64 + seed) % 4;
            faults.push(fault);
            let error_answers = 1 + rng.below(5) as usize;
            let status = [500, 503, 429][rng.below(3) as usize];
            match fault {
                0 => server.fail_next(error_answers, status),
                1 => {
                    // The streams break mid-event and the re-watches are answered with errors.
                    server.fail_next(error_answers, status);
                    server.drop_watches();
                }
                2 => {
                    server.set_delay(Duration::from_millis(30));
                    server.drop_watches();
                }
                _ => server.end_watches(),
            }
        }
        if step % 40 == 19 {
            server.set_delay(Duration::ZERO);
        }
        if rng.below(10) == 0 {
            tokio::time::sleep(Duration::from_millis(rng.below(20))).await;
        }
    }
    server.set_delay(Duration::ZERO);
    converges(&index, &server, Duration::from_secs(30))
        .await
        .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    let errors: u64 = source.status().iter().map(|s| s.errors).sum();
    println!("faults {faults:?}; watch errors {errors}");
    assert!(errors > 0, "faults surfaced as errors (seed {seed})");
    // Settled: stays equal (no late stale event undoes the state).
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(mismatch(&index, &server), None, "seed {seed}");
}

/// A watch cut and resumed is in sync again by itself, also for a kind with nothing to deliver
/// (no objects, no changes): a replica whose watches blipped must not stop writing DNS until a
/// recheck relists. The recheck is put out of reach here, so only the resumed watch can do it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_resumed_after_a_cut_is_in_sync_without_a_relist_even_with_nothing_to_deliver() {
    let server = ApiServer::start().await;
    add_http_route(&server, "first", "a.example.com");
    let config = Config {
        recheck_after: Duration::from_secs(3600),
        ..fast_config()
    };
    let (_index, source) = start_source_with(&server, config).await;
    wait_ready(&source).await;
    assert!(eventually(Duration::from_secs(10), || source.in_sync()).await);
    let listed = lists(&source);
    let errors = status_of(&source, ObjectKind::TCPRoute).errors;
    assert!(status_of(&source, ObjectKind::TCPRoute).synced);

    // A watch not yet reopened after the first list has nothing to cut: cut until the kind's
    // watch was.
    assert!(
        eventually(Duration::from_secs(10), || {
            server.drop_watches();
            status_of(&source, ObjectKind::TCPRoute).errors > errors
        })
        .await,
        "the cut was not seen: {:?}",
        source.status()
    );
    assert!(
        eventually(Duration::from_secs(20), || source.in_sync()).await,
        "still not in sync: {:?}",
        source.status()
    );
    assert_eq!(lists(&source), listed, "a relist, not the resumed watch");
    assert!(
        status_of(&source, ObjectKind::TCPRoute)
            .failing_since
            .is_none()
    );
}

fn status_of(source: &KubeSource, kind: ObjectKind) -> KindStatus {
    source.kind_status(kind).unwrap()
}

/// How often `kind`'s source decided `decision` of `absence`.
fn absences(
    source: &KubeSource,
    kind: ObjectKind,
    absence: Absence,
    decision: AbsenceDecision,
) -> u64 {
    status_of(source, kind)
        .absences
        .get(&(absence, decision))
        .copied()
        .unwrap_or(0)
}

/// A Gateway, a ListenerSet and one route of each kind: every Gateway API kind holds objects.
fn populate(server: &ApiServer) {
    server.create(namespace_object("shop", "a")).unwrap();
    server
        .create(gateway("shop", "public", "*.example.com", "203.0.113.10"))
        .unwrap();
    server
        .create(listener_set("shop", "extra", "public", "*.example.net"))
        .unwrap();
    for (i, kind) in ObjectKind::ALL
        .into_iter()
        .filter(|k| k.is_route())
        .enumerate()
    {
        server
            .create(route(
                kind,
                "shop",
                &format!("r{i}"),
                &format!("r{i}.example.com"),
            ))
            .unwrap();
    }
}

/// A source with `absence_grace` set to `grace`, once it holds what the server does.
async fn synced_with_grace(server: &ApiServer, grace: Duration) -> (Index, KubeSource) {
    let config = Config {
        absence_grace: grace,
        ..fast_config()
    };
    let (index, source) = start_source_with(server, config).await;
    wait_ready(&source).await;
    converges(&index, server, SETTLE).await.unwrap();
    (index, source)
}

/// Objects held in the index, every kind together.
fn held(index: &Index) -> usize {
    ObjectKind::ALL.into_iter().map(|k| index.len_of(k)).sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_server_without_its_crds_yet_takes_nothing_out_of_the_index() {
    let server = ApiServer::start().await;
    populate(&server);
    let (index, source) = synced_with_grace(&server, Duration::from_millis(600)).await;
    let before = held(&index);
    assert_eq!(source.removals_held(), None, "{:?}", source.status());

    // The restart: every watch breaks, and the server comes back answering discovery without
    // the Gateway API group (its CRDs not registered yet) and /readyz with 500. However many
    // rounds discovery makes, and for however long past the grace, nothing leaves the index
    // and DNS deletions are held: rounds made while the server is not ready do not count.
    server.set_starting(true, false);
    server.drop_watches();
    let started = Instant::now();
    assert!(
        eventually(SETTLE, || status_of(&source, ObjectKind::HTTPRoute)
            .unserved
            .is_some())
        .await,
        "{:?}",
        source.status()
    );
    while started.elapsed() < Duration::from_secs(3) {
        assert_eq!(held(&index), before, "{:?}", source.status());
        assert!(source.removals_held().is_some());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let unserved = status_of(&source, ObjectKind::HTTPRoute).unserved.unwrap();
    assert_eq!(unserved.ready_rounds, 0, "{unserved:?}");

    // Registered again: every kind is watched and listed again, and nothing was removed.
    server.set_starting(false, true);
    converges(&index, &server, SETTLE).await.unwrap();
    assert!(
        eventually(SETTLE, || source.removals_held().is_none()).await,
        "{:?}",
        source.removals_held()
    );
    for kind in ObjectKind::ALL
        .into_iter()
        .filter(|k| *k != ObjectKind::Namespace)
    {
        assert_eq!(
            absences(&source, kind, Absence::NotServed, AbsenceDecision::Held),
            1,
            "{kind}"
        );
        assert_eq!(
            absences(&source, kind, Absence::NotServed, AbsenceDecision::Returned),
            1,
            "{kind}"
        );
        assert_eq!(
            absences(
                &source,
                kind,
                Absence::NotServed,
                AbsenceDecision::Confirmed
            ),
            0,
            "{kind}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kind_no_longer_served_leaves_the_index_only_once_confirmed() {
    let server = ApiServer::start().await;
    populate(&server);
    let grace = Duration::from_millis(1500);
    let (index, source) = synced_with_grace(&server, grace).await;
    let namespaces = index.len_of(ObjectKind::Namespace);
    let full = held(&index);

    // Gone from a ready server: the objects stay for the grace, then leave.
    server.set_starting(true, true);
    let gone = Instant::now();
    while held(&index) > namespaces {
        let waited = gone.elapsed();
        assert!(waited < SETTLE, "{:?}", source.status());
        if held(&index) < full {
            assert!(
                waited >= grace,
                "objects left after {waited:?}, before the grace"
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        gone.elapsed() >= grace,
        "removed after {:?}",
        gone.elapsed()
    );
    let http = status_of(&source, ObjectKind::HTTPRoute);
    assert_eq!(http.version, None, "{http:?}");
    assert_eq!(
        absences(
            &source,
            ObjectKind::HTTPRoute,
            Absence::NotServed,
            AbsenceDecision::Confirmed
        ),
        1
    );
    assert!(
        eventually(SETTLE, || source.removals_held().is_none()).await,
        "{:?}",
        source.removals_held()
    );

    // And back when the CRDs are: watched and listed without a restart.
    server.set_starting(false, true);
    converges(&index, &server, SETTLE).await.unwrap();
}

/// Long enough that no test step outlasts it on a loaded machine: an absence held with it
/// stays held for the whole test.
const LONG_GRACE: Duration = Duration::from_secs(600);
/// Short enough to see an absence confirmed; a test only asserts that nothing left before it.
const SHORT_GRACE: Duration = Duration::from_millis(1500);
/// Upper bound of a wait on a loaded two-core machine; nothing here measures speed.
const SETTLE: Duration = Duration::from_secs(30);

/// Makes every watch start over with a relist: the history is compacted past a change made
/// now (a watch resuming from the current version would not need one), and every watch drops.
fn force_relists(server: &ApiServer, change: &str) {
    server.create(namespace_object(change, "none")).unwrap();
    server.compact();
    server.drop_watches();
}

/// Waits while `held` says what an absence at `since` holds is still there, then checks it
/// left no sooner than [`SHORT_GRACE`].
async fn gone_after_the_grace(
    since: Instant,
    source: &KubeSource,
    kind: ObjectKind,
    held: impl Fn() -> bool,
) {
    while held() {
        assert!(since.elapsed() < SETTLE, "{:?}", status_of(source, kind));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        since.elapsed() >= SHORT_GRACE,
        "gone after {:?}",
        since.elapsed()
    );
}

/// Every HTTPRoute deleted while the watch was down: answers are held back meanwhile, so no
/// watch sees the deletions, and the history is compacted, so the source must relist.
fn delete_routes_unseen(server: &ApiServer) {
    server.set_delay(Duration::from_millis(200));
    server.drop_watches();
    for route in server.objects("HTTPRoute") {
        let name = route["metadata"]["name"].as_str().unwrap_or_default();
        server.delete("HTTPRoute", "shop", name).unwrap();
    }
    server.compact();
    server.set_delay(Duration::ZERO);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_relist_is_held_and_a_later_relist_with_the_objects_ends_it() {
    let server = ApiServer::start().await;
    populate(&server);
    add_http_route(&server, "second", "second.example.com");
    let (index, source) = synced_with_grace(&server, LONG_GRACE).await;
    let routes = index.len_of(ObjectKind::HTTPRoute);
    assert_eq!(routes, 2);
    let count = |decision| absences(&source, ObjectKind::HTTPRoute, Absence::EmptyList, decision);

    // A relist (410 Gone) answered with no HTTPRoute while the index holds two: held.
    server.set_empty_lists("HTTPRoute", true);
    force_relists(&server, "first-relist");
    assert!(
        eventually(SETTLE, || count(AbsenceDecision::Held) == 1).await,
        "{:?}",
        status_of(&source, ObjectKind::HTTPRoute)
    );
    assert_eq!(index.len_of(ObjectKind::HTTPRoute), routes);
    assert!(source.removals_held().is_some());

    // The server's view comes back; the next relist finds the routes and ends the hold.
    server.set_empty_lists("HTTPRoute", false);
    force_relists(&server, "second-relist");
    assert!(
        eventually(SETTLE, || count(AbsenceDecision::Returned) == 1).await,
        "{:?}",
        status_of(&source, ObjectKind::HTTPRoute)
    );
    assert_eq!(index.len_of(ObjectKind::HTTPRoute), routes);
    assert_eq!(count(AbsenceDecision::Confirmed), 0);
    assert!(
        source.removals_held().is_none(),
        "{:?}",
        source.removals_held()
    );
    converges(&index, &server, SETTLE).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_relist_is_confirmed_by_a_relist_after_the_grace() {
    let server = ApiServer::start().await;
    populate(&server);
    add_http_route(&server, "second", "second.example.com");
    let (index, source) = synced_with_grace(&server, SHORT_GRACE).await;
    let count = |decision| absences(&source, ObjectKind::HTTPRoute, Absence::EmptyList, decision);

    // The empty relist is held, then confirmed by the relist after the grace: the routes
    // leave, never before the grace.
    delete_routes_unseen(&server);
    gone_after_the_grace(Instant::now(), &source, ObjectKind::HTTPRoute, || {
        index.len_of(ObjectKind::HTTPRoute) > 0
    })
    .await;
    assert_eq!(count(AbsenceDecision::Held), 1);
    assert_eq!(count(AbsenceDecision::Confirmed), 1);
    assert!(source.removals_held().is_none());
    converges(&index, &server, SETTLE).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_deleted_before_its_routes_stays_until_they_are_gone() {
    let server = ApiServer::start().await;
    populate(&server);
    server.create(namespace_object("blog", "b")).unwrap();
    server
        .create(route(
            ObjectKind::HTTPRoute,
            "blog",
            "post",
            "post.example.com",
        ))
        .unwrap();
    let (index, source) = synced_with_grace(&server, LONG_GRACE).await;
    let stored = |name: &str| index.snapshot().namespace(name).is_some();
    let count = |decision| absences(&source, ObjectKind::Namespace, Absence::InUse, decision);

    // The Namespace's deletion arrives before its route's (they come on different watches):
    // it stays, with its labels, until the route is gone too.
    server.delete("Namespace", "", "blog").unwrap();
    assert!(
        eventually(SETTLE, || count(AbsenceDecision::Held) == 1).await,
        "{:?}",
        status_of(&source, ObjectKind::Namespace)
    );
    assert!(stored("blog"));
    assert!(source.removals_held().is_some());
    server.delete("HTTPRoute", "blog", "post").unwrap();
    assert!(eventually(SETTLE, || !stored("blog")).await);
    assert_eq!(count(AbsenceDecision::Confirmed), 1);
    assert!(
        source.removals_held().is_none(),
        "{:?}",
        source.removals_held()
    );
    converges(&index, &server, SETTLE).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_left_out_of_a_relist_while_in_use_stays_for_the_grace() {
    let server = ApiServer::start().await;
    populate(&server);
    let (index, source) = synced_with_grace(&server, SHORT_GRACE).await;
    let stored = |name: &str| index.snapshot().namespace(name).is_some();
    let count = |decision| absences(&source, ObjectKind::Namespace, Absence::InUse, decision);

    // Deleted while the watch was down, its routes still there: it leaves after the grace.
    server.set_delay(Duration::from_millis(200));
    server.drop_watches();
    server.delete("Namespace", "", "shop").unwrap();
    server.compact();
    server.set_delay(Duration::ZERO);
    gone_after_the_grace(Instant::now(), &source, ObjectKind::Namespace, || {
        stored("shop")
    })
    .await;
    assert_eq!(count(AbsenceDecision::Held), 1);
    assert_eq!(count(AbsenceDecision::Confirmed), 1);
    converges(&index, &server, SETTLE).await.unwrap();
}
