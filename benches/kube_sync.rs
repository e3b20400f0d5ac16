//! Initial sync and memory of the `kube` source, with the goals they are held to: heap per route
//! the process holds for routes (the index and whatever the source keeps) at most 600 B, a
//! relist (410 Gone) peaking at most 1.25 × the steady heap, and time to ready at most the time
//! of a plain paged list of the same objects with kube-rs (`Api::list`, 500 a page, into
//! `DynamicObject`s: what a kube-rs reflector store would start from), measured in the same run.
//!
//! On the real kube-apiserver of the test control plane (`GATEWAY_DNS_CONTROL_PLANE`, see
//! `tests/support/cluster.rs`), which offers streaming lists: each size up to
//! `GATEWAY_DNS_BENCH_REAL_MAX` routes (default 10,000; creating routes through the API is the
//! slow part). The relist there is forced as `tests/cluster/faults.rs` does: etcd compacted and
//! the API server restarted, so every watch resumes into 410 Gone. Then on the in-process API
//! double, which refuses streaming lists, so a relist falls back to pages: every size, the
//! relist forced by compacting its history and cutting its watches.
//!
//! Each round times, in turn: the plain paged list, a plain streaming list (kube-rs, into
//! `DynamicObject`s: what the server's streaming costs by itself), the source as configured
//! (its first list in pages fetched ahead), and the source with kube-rs's watcher
//! (`streaming_lists` off). Rounds on the real server: `GATEWAY_DNS_BENCH_ROUNDS` (default 5).
//!
//! Heap is counted by a counting allocator in this process (the API servers run apart).
//!
//! Run: `cargo bench --bench kube_sync` (optionally `-- 1000 10000` for other sizes).
//! `GATEWAY_DNS_BENCH_INDEX_ONLY=1` prints only the index fed directly, with no API server.

#[path = "support/route_api.rs"]
mod route_api;
#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use futures::StreamExt;
use gateway_dns::index::Index;
use gateway_dns::model::ObjectKind;
use gateway_dns::source::kube::{Config, KubeSource};
use kube::api::{Api, DynamicObject, ListParams, WatchEvent, WatchParams};
use serde_json::{Value, json};

use route_api::{create_routes, routes_resource};
use support::apiserver::{ApiServer, gateway_api_v1_6_standard, namespace_type};
use support::cluster::{ControlPlane, GatewayApi, Options, TOOLS_ENV};

#[path = "support/counting.rs"]
mod counting;

#[global_allocator]
static ALLOCATOR: counting::Counting = counting::Counting;

/// Live heap bytes (never below zero: every allocation of the process is counted).
fn heap() -> usize {
    usize::try_from(counting::live()).unwrap_or(0)
}

fn reset_peak() -> usize {
    usize::try_from(counting::reset_peak()).unwrap_or(0)
}

fn peak() -> usize {
    usize::try_from(counting::peak()).unwrap_or(0)
}

const NAMESPACES: usize = 50;
const LIMIT: Duration = Duration::from_secs(900);

/// The goals (see the module doc).
const GOAL_BYTES_PER_ROUTE: f64 = 600.0;
const GOAL_RELIST_PEAK: f64 = 1.25;
const GOAL_READY_RATIO: f64 = 1.0;

/// A typical HTTPRoute as written: two hostnames, one parent, rules, labels, an annotation.
fn http_route(i: usize) -> Value {
    let name = format!("app-{i}");
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {
            "namespace": format!("team-{}", i % NAMESPACES), "name": name,
            "labels": {"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "shop"},
            "annotations": {"external-dns.kubernetes.io/ttl": "300"},
        },
        "spec": {
            "parentRefs": [{"name": "public", "namespace": "infra", "sectionName": "https"}],
            "hostnames": [format!("app-{i}.example.com"), format!("www.app-{i}.example.com")],
            "rules": [{
                "matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                "backendRefs": [{"name": name, "port": 8080, "weight": 1}],
            }],
        },
    })
}

/// The same route as a cluster holds it: managedFields and a controller's status besides (the
/// real API server adds its own managedFields; the double stores what it is given).
fn http_route_as_stored(i: usize) -> Value {
    let mut route = http_route(i);
    route["metadata"]["managedFields"] = json!([{
        "manager": "kubectl", "operation": "Apply", "apiVersion": "gateway.networking.k8s.io/v1",
        "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1",
        "fieldsV1": {"f:spec": {"f:hostnames": {}, "f:parentRefs": {}, "f:rules": {}}},
    }]);
    route["status"] = json!({"parents": [{
        "parentRef": {"name": "public", "namespace": "infra", "sectionName": "https"},
        "controllerName": "example.net/gateway-controller",
        "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted", "observedGeneration": 1,
                        "lastTransitionTime": "2026-01-01T00:00:00Z", "message": ""}],
    }]});
    route
}

/// The Gateway every route attaches to, so routes claim their names as in a real cluster.
fn gateway() -> Value {
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"namespace": "infra", "name": "public"},
        "spec": {"gatewayClassName": "example", "listeners": [{
            "name": "https", "port": 443, "protocol": "HTTPS", "hostname": "*.example.com",
            "allowedRoutes": {"namespaces": {"from": "All"}},
        }]},
    })
}

fn namespace(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
}

/// Heap held by an index fed directly (no client, no watcher): the projections alone, then
/// the whole index, per route.
fn index_only(routes: usize) -> (f64, f64) {
    let before = heap();
    let mut gateway = gateway();
    gateway["status"] = json!({"addresses": [{"type": "IPAddress", "value": "203.0.113.10"}]});
    let gateway = gateway_dns::model::decode_value(&gateway).unwrap().unwrap();
    let mut projections = Vec::with_capacity(routes);
    for i in 0..routes {
        let mut value = http_route_as_stored(i);
        value["metadata"]["creationTimestamp"] = json!("2026-01-01T00:00:00Z");
        value["metadata"]["resourceVersion"] = json!(i.to_string());
        value["metadata"]["uid"] = json!(format!("6d8f0c1e-0000-4000-8000-{i:012x}"));
        projections.push(gateway_dns::model::decode_value(&value).unwrap().unwrap());
    }
    let projections_heap = heap()
        .saturating_sub(before)
        .saturating_sub(projections.capacity() * std::mem::size_of::<gateway_dns::model::Object>());
    let index = Index::new();
    index.apply(gateway);
    index.reset(ObjectKind::HTTPRoute, projections);
    let index_heap = heap().saturating_sub(before);
    assert_eq!(index.len_of(ObjectKind::HTTPRoute), routes);
    drop(index);
    (
        projections_heap as f64 / routes as f64,
        index_heap as f64 / routes as f64,
    )
}

fn mib(bytes: usize) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

async fn settle() {
    tokio::time::sleep(Duration::from_millis(300)).await;
}

/// Where the routes are served from.
enum Server {
    Real(ControlPlane),
    Double(ApiServer),
}

impl Server {
    /// Something changes, then every watch can only resume into 410 Gone.
    async fn force_relist(&self) {
        match self {
            Server::Real(cluster) => tokio::task::block_in_place(|| {
                cluster.kubectl(&["create", "namespace", "bump"]).ok();
                cluster.compact();
                cluster.stop_apiserver();
                cluster.start_apiserver();
            }),
            Server::Double(server) => {
                server.create(namespace("bump")).unwrap();
                server.compact();
                server.drop_watches();
            }
        }
    }
}

async fn real_server(routes: usize) -> (Server, kube::Client) {
    let cluster = tokio::task::block_in_place(|| {
        let cluster = ControlPlane::start_with(&Options {
            gateway_api: GatewayApi::Standard,
            ..Options::default()
        });
        let mut objects = vec![namespace("infra")];
        objects.extend((0..NAMESPACES).map(|i| namespace(&format!("team-{i}"))));
        objects.push(gateway());
        let yaml: String = objects
            .iter()
            .map(|o| format!("---\n{}\n", serde_json::to_string(o).unwrap()))
            .collect();
        cluster.apply(&yaml, &[]).ok();
        cluster.gateway_address("infra/public", &["203.0.113.10"]);
        cluster
    });
    let client = cluster.admin_client().await;
    let started = Instant::now();
    create_routes(&client, routes, http_route).await;
    println!(
        "  ({routes} routes created through the API in {:.1} s)",
        started.elapsed().as_secs_f64()
    );
    (Server::Real(cluster), client)
}

async fn double_server(routes: usize) -> (Server, kube::Client) {
    let server = ApiServer::builder()
        .resources([vec![namespace_type()], gateway_api_v1_6_standard()].concat())
        .bookmark_interval(None)
        .start()
        .await;
    server.create(namespace("infra")).unwrap();
    for i in 0..NAMESPACES {
        server.create(namespace(&format!("team-{i}"))).unwrap();
    }
    let mut gateway = gateway();
    gateway["status"] = json!({"addresses": [{"type": "IPAddress", "value": "203.0.113.10"}]});
    server.create(gateway).unwrap();
    for i in 0..routes {
        server.create(http_route_as_stored(i)).unwrap();
    }
    server.compact();
    let client = server.client().await;
    (Server::Double(server), client)
}

/// A plain paged list (500 a page) of every route into DynamicObjects: its time and the heap
/// the objects hold.
async fn plain_list(client: &kube::Client, routes: usize) -> (Duration, usize) {
    settle().await;
    let before = heap();
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &routes_resource());
    let started = Instant::now();
    let mut objects: Vec<DynamicObject> = Vec::with_capacity(routes);
    let mut token: Option<String> = None;
    loop {
        let mut params = ListParams::default().limit(500);
        if let Some(t) = &token {
            params = params.continue_token(t);
        }
        let page = api.list(&params).await.unwrap();
        objects.extend(page.items);
        token = page.metadata.continue_.filter(|t| !t.is_empty());
        if token.is_none() {
            break;
        }
    }
    let elapsed = started.elapsed();
    let held = heap().saturating_sub(before);
    assert_eq!(objects.len(), routes);
    (elapsed, held)
}

/// A plain streaming list (WatchList: one watch with `sendInitialEvents`) of every route into
/// DynamicObjects, until the bookmark that ends the initial events; None when the server
/// refuses it.
async fn plain_streaming_list(client: &kube::Client, routes: usize) -> Option<Duration> {
    settle().await;
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &routes_resource());
    let started = Instant::now();
    let params = WatchParams::streaming_lists().timeout(290);
    let stream = api.watch(&params, "0").await.ok()?;
    let mut stream = std::pin::pin!(stream);
    let mut objects = Vec::with_capacity(routes);
    while let Some(event) = stream.next().await {
        match event.ok()? {
            WatchEvent::Added(object) => objects.push(object),
            WatchEvent::Bookmark(mark)
                if mark
                    .metadata
                    .annotations
                    .contains_key("k8s.io/initial-events-end") =>
            {
                break;
            }
            WatchEvent::Error(_) => return None,
            _ => {}
        }
    }
    let elapsed = started.elapsed();
    assert_eq!(objects.len(), routes);
    Some(elapsed)
}

fn source_config(streaming_lists: bool) -> Config {
    Config {
        backoff_min: Duration::from_millis(10),
        backoff_max: Duration::from_millis(500),
        streaming_lists,
        ..Config::default()
    }
}

/// Spawns the source and waits for ready: (time to ready, the source, its index, the heap at
/// spawn).
async fn sync(
    client: &kube::Client,
    routes: usize,
    streaming_lists: bool,
) -> (Duration, KubeSource, Index, usize) {
    settle().await;
    let base = reset_peak();
    let index = Index::new();
    let started = Instant::now();
    let source = KubeSource::spawn(
        client.clone(),
        index.clone(),
        source_config(streaming_lists),
    );
    let mut ready = source.ready();
    tokio::time::timeout(LIMIT, ready.wait_for(|r| *r))
        .await
        .unwrap()
        .unwrap();
    let time_to_ready = started.elapsed();
    assert_eq!(index.len_of(ObjectKind::HTTPRoute), routes);
    (time_to_ready, source, index, base)
}

fn lists_of(source: &KubeSource) -> u64 {
    source
        .status()
        .into_iter()
        .find(|s| s.kind == ObjectKind::HTTPRoute)
        .map_or(0, |s| s.lists)
}

struct Memory {
    steady: usize,
    sync_peak: usize,
    relist_peak: usize,
    relist_time: Duration,
    after_relist: usize,
    streamed: bool,
}

/// Steady heap after the first sync, then the peak of a forced relist.
async fn memory(server: &Server, client: &kube::Client, routes: usize) -> Memory {
    let (_, source, index, base) = sync(client, routes, true).await;
    let sync_peak = peak().saturating_sub(base);
    settle().await;
    let steady = heap().saturating_sub(base);
    let streamed = source.streams_lists();

    let lists_before = lists_of(&source);
    reset_peak();
    let started = Instant::now();
    server.force_relist().await;
    while lists_of(&source) == lists_before {
        assert!(started.elapsed() < LIMIT, "relist did not happen");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let relist_time = started.elapsed();
    let relist_peak = peak().saturating_sub(base);
    assert_eq!(index.len_of(ObjectKind::HTTPRoute), routes);
    settle().await;
    let after_relist = heap().saturating_sub(base);
    drop(source);
    Memory {
        steady,
        sync_peak,
        relist_peak,
        relist_time,
        after_relist,
        streamed,
    }
}

fn goal(value: f64, goal: f64) -> String {
    let verdict = if value <= goal { "met" } else { "NOT met" };
    format!("{:.2} of the goal, {verdict}", value / goal)
}

async fn run(label: &str, server: Server, client: kube::Client, routes: usize, rounds: usize) {
    println!("{routes} HTTPRoutes on {label}");
    // First, while nothing else in this process allocates or frees.
    settle().await;
    let (projection_per_route, index_per_route) = index_only(routes);
    // Time to ready against a plain list, alternated: the source as configured (a first list
    // in pages fetched ahead, streaming relists) and with kube-rs's watcher (streaming lists
    // off); beside them a plain streaming list, where the server offers one, for what the
    // server's streaming costs by itself.
    let mut ratios = Vec::new();
    let mut list_heap = 0;
    for round in 1..=rounds {
        // The order turns each round: what runs just after a large list pays for the server's
        // clean-up of it (garbage collection, closed watches), so a fixed order would favour one.
        let (mut list, mut streaming, mut ready, mut watcher) = (None, None, None, None);
        for step in 0..4 {
            match (step + round - 1) % 4 {
                0 => {
                    let (time, held) = plain_list(&client, routes).await;
                    list_heap = held;
                    list = Some(time);
                }
                1 => streaming = plain_streaming_list(&client, routes).await,
                2 => {
                    let (time, source, index, _) = sync(&client, routes, true).await;
                    drop((source, index));
                    ready = Some(time);
                }
                _ => {
                    let (time, source, index, _) = sync(&client, routes, false).await;
                    drop((source, index));
                    watcher = Some(time);
                }
            }
        }
        let (Some(list), Some(ready), Some(watcher)) = (list, ready, watcher) else {
            unreachable!("every step runs once a round");
        };
        let ratio = ready.as_secs_f64() / list.as_secs_f64();
        ratios.push(ratio);
        let streaming = match streaming {
            Some(time) => format!(
                "{:>7.1} ms ({:.2}x)",
                ms(time),
                time.as_secs_f64() / list.as_secs_f64()
            ),
            None => "refused".to_string(),
        };
        println!(
            "  round {round}: plain paged list {:>7.1} ms | plain streaming list {streaming} | source {:>7.1} ms ({ratio:.2}x) | source, kube-rs watcher {:>7.1} ms ({:.2}x)",
            ms(list),
            ms(ready),
            ms(watcher),
            watcher.as_secs_f64() / list.as_secs_f64(),
        );
    }
    ratios.sort_by(f64::total_cmp);
    let median = ratios[ratios.len() / 2];

    let memory = memory(&server, &client, routes).await;
    let per_route = memory.steady as f64 / routes as f64;
    let relist_ratio = memory.relist_peak as f64 / memory.steady as f64;
    println!(
        "  time to ready / plain paged list  {median:>6.2}x median of {rounds} ({})",
        goal(median, GOAL_READY_RATIO)
    );
    println!(
        "  steady heap              {:>9.2} MiB = {per_route:.0} B/route ({}); plain list's DynamicObjects {:.0} B/route",
        mib(memory.steady),
        goal(per_route, GOAL_BYTES_PER_ROUTE),
        list_heap as f64 / routes as f64,
    );
    println!(
        "  index fed directly       {index_per_route:>9.0} B/route, of which projections {projection_per_route:.0} B/route"
    );
    println!(
        "  peak during first sync   {:>9.2} MiB ({:.2}x steady)",
        mib(memory.sync_peak),
        memory.sync_peak as f64 / memory.steady as f64
    );
    println!(
        "  relist (410, {})  {:>9.1} ms, peak {:.2} MiB = {relist_ratio:.2}x steady ({}), after {:.2} MiB",
        if memory.streamed {
            "streaming"
        } else {
            "paged"
        },
        ms(memory.relist_time),
        mib(memory.relist_peak),
        goal(relist_ratio, GOAL_RELIST_PEAK),
        mib(memory.after_relist)
    );
    drop(server);
}

fn main() {
    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let sizes = if sizes.is_empty() {
        vec![10_000, 50_000]
    } else {
        sizes
    };
    let real_max: usize = std::env::var("GATEWAY_DNS_BENCH_REAL_MAX")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let real_rounds: usize = std::env::var("GATEWAY_DNS_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let real = std::env::var_os(TOOLS_ENV).is_some();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    println!(
        "kube source sync (counting allocator; goals: ≤ {GOAL_BYTES_PER_ROUTE} B/route, relist peak ≤ {GOAL_RELIST_PEAK}x steady, time to ready ≤ {GOAL_READY_RATIO}x a plain paged list)"
    );
    if !real {
        println!("{TOOLS_ENV} is not set: the real kube-apiserver is skipped");
    }
    if std::env::var_os("GATEWAY_DNS_BENCH_INDEX_ONLY").is_some() {
        for routes in sizes {
            let (projection_per_route, index_per_route) = index_only(routes);
            println!(
                "{routes} HTTPRoutes: index fed directly {index_per_route:.0} B/route ({}), of which projections {projection_per_route:.0} B/route",
                goal(index_per_route, GOAL_BYTES_PER_ROUTE)
            );
        }
        return;
    }
    for routes in sizes {
        if real && routes <= real_max {
            runtime.block_on(async {
                let (server, client) = real_server(routes).await;
                run(
                    "the real kube-apiserver v1.37 (streaming lists offered)",
                    server,
                    client,
                    routes,
                    real_rounds,
                )
                .await;
            });
        } else if real {
            println!(
                "{routes} HTTPRoutes: not on the real kube-apiserver (above GATEWAY_DNS_BENCH_REAL_MAX={real_max})"
            );
        }
        runtime.block_on(async {
            let (server, client) = double_server(routes).await;
            run(
                "the API double (refuses streaming lists: relists fall back to pages)",
                server,
                client,
                routes,
                1,
            )
            .await;
        });
    }
}
