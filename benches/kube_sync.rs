//! Initial sync and memory of the `kube` source for 1k / 10k / 50k HTTPRoutes served by the
//! API double over a real socket: time to ready, heap per route held by the index (a counting
//! allocator), and peak heap during a forced relist (410 Gone).
//!
//! Baseline, measured in the same process: a plain paged list of the same routes with
//! kube-rs into `Vec<DynamicObject>` (what a kube-rs reflector store would hold).
//!
//! Run: `cargo bench --bench kube_sync` (optionally `-- 1000 10000` for other sizes).

#[path = "../tests/support/apiserver/mod.rs"]
mod apiserver;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use gateway_dns::index::Index;
use gateway_dns::model::ObjectKind;
use gateway_dns::source::kube::{Config, KubeSource};
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use serde_json::json;

use apiserver::{ApiServer, gateway_api_v1_6_standard, namespace_type};

/// Counts live heap bytes and the peak since the last reset.
struct Counting;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(bytes: usize) {
    let now = CURRENT.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let pointer = unsafe { System.alloc(layout) };
        if !pointer.is_null() {
            grew(layout.size());
        }
        pointer
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let pointer = unsafe { System.alloc_zeroed(layout) };
        if !pointer.is_null() {
            grew(layout.size());
        }
        pointer
    }

    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        unsafe { System.dealloc(pointer, layout) };
        CURRENT.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, pointer: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let moved = unsafe { System.realloc(pointer, layout, new_size) };
        if !moved.is_null() {
            if new_size >= layout.size() {
                grew(new_size - layout.size());
            } else {
                CURRENT.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
            }
        }
        moved
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn heap() -> usize {
    CURRENT.load(Ordering::Relaxed)
}

fn reset_peak() -> usize {
    let now = heap();
    PEAK.store(now, Ordering::Relaxed);
    now
}

fn peak() -> usize {
    PEAK.load(Ordering::Relaxed)
}

/// A typical HTTPRoute as a cluster holds it: two hostnames, one parent, rules, labels, an
/// annotation, status from a controller, managedFields.
fn http_route(i: usize) -> serde_json::Value {
    let namespace = format!("team-{}", i % 50);
    let name = format!("app-{i}");
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {
            "namespace": namespace, "name": name,
            "labels": {"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "shop"},
            "annotations": {"external-dns.kubernetes.io/ttl": "300"},
            "managedFields": [{
                "manager": "kubectl", "operation": "Apply", "apiVersion": "gateway.networking.k8s.io/v1",
                "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {"f:hostnames": {}, "f:parentRefs": {}, "f:rules": {}}},
            }],
        },
        "spec": {
            "parentRefs": [{"name": "public", "namespace": "infra", "sectionName": "https"}],
            "hostnames": [format!("app-{i}.example.com"), format!("www.app-{i}.example.com")],
            "rules": [{
                "matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                "backendRefs": [{"name": format!("app-{i}"), "port": 8080, "weight": 1}],
            }],
        },
        "status": {"parents": [{
            "parentRef": {"name": "public", "namespace": "infra", "sectionName": "https"},
            "controllerName": "example.net/gateway-controller",
            "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted", "observedGeneration": 1,
                            "lastTransitionTime": "2026-01-01T00:00:00Z", "message": ""}],
        }]},
    })
}

/// The Gateway every route attaches to, so routes claim their names as in a real cluster.
fn gateway() -> serde_json::Value {
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"namespace": "infra", "name": "public", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"gatewayClassName": "example", "listeners": [{
            "name": "https", "port": 443, "protocol": "HTTPS", "hostname": "*.example.com",
            "allowedRoutes": {"namespaces": {"from": "All"}},
        }]},
        "status": {"addresses": [{"type": "IPAddress", "value": "203.0.113.10"}]},
    })
}

/// Heap held by an index fed directly (no client, no watcher): the projections alone, then
/// the whole index, per route.
fn index_only(routes: usize) -> (f64, f64) {
    let before = heap();
    let gateway = gateway_dns::model::decode_value(&gateway())
        .unwrap()
        .unwrap();
    let mut projections = Vec::with_capacity(routes);
    for i in 0..routes {
        let mut value = http_route(i);
        value["metadata"]["creationTimestamp"] = json!("2026-01-01T00:00:00Z");
        value["metadata"]["resourceVersion"] = json!(i.to_string());
        value["metadata"]["uid"] = json!(format!("6d8f0c1e-0000-4000-8000-{i:012x}"));
        projections.push(gateway_dns::model::decode_value(&value).unwrap().unwrap());
    }
    let projections_heap = heap().saturating_sub(before)
        - projections.capacity() * std::mem::size_of::<gateway_dns::model::Object>();
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

fn kib(bytes: usize) -> f64 {
    bytes as f64 / 1024.0
}

fn mib(bytes: usize) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

async fn settle() {
    tokio::time::sleep(Duration::from_millis(300)).await;
}

async fn run(routes: usize) {
    let server = ApiServer::builder()
        .resources([vec![namespace_type()], gateway_api_v1_6_standard()].concat())
        .bookmark_interval(None)
        .start()
        .await;
    server
        .create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "infra"}}))
        .unwrap();
    server.create(gateway()).unwrap();
    for i in 0..routes {
        server.create(http_route(i)).unwrap();
    }
    server.compact();
    let client = server.client().await;

    // Baseline: a plain paged list into DynamicObjects.
    settle().await;
    let before = heap();
    let started = Instant::now();
    let api: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource {
            group: "gateway.networking.k8s.io".into(),
            version: "v1".into(),
            api_version: "gateway.networking.k8s.io/v1".into(),
            kind: "HTTPRoute".into(),
            plural: "httproutes".into(),
        },
    );
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
    let list_time = started.elapsed();
    let dynamic_heap = heap().saturating_sub(before);
    assert_eq!(objects.len(), routes);
    drop(objects);

    settle().await;
    let (projection_per_route, index_per_route) = index_only(routes);

    // The source: initial sync.
    settle().await;
    let base = reset_peak();
    let index = Index::new();
    let config = Config {
        backoff_min: Duration::from_millis(10),
        ..Config::default()
    };
    let started = Instant::now();
    let source = KubeSource::spawn(client.clone(), index.clone(), config);
    let mut ready = source.ready();
    tokio::time::timeout(Duration::from_secs(600), ready.wait_for(|r| *r))
        .await
        .unwrap()
        .unwrap();
    let time_to_ready = started.elapsed();
    assert_eq!(index.len_of(ObjectKind::HTTPRoute), routes);
    let sync_peak = peak().saturating_sub(base);
    settle().await;
    let steady = heap().saturating_sub(base);

    // A forced relist: history compacted, watches cut, the watcher gets 410 and lists again.
    let lists = |source: &KubeSource| {
        source
            .status()
            .into_iter()
            .find(|s| s.kind == ObjectKind::HTTPRoute)
            .map_or(0, |s| s.lists)
    };
    let lists_before = lists(&source);
    let relist_base = reset_peak();
    let started = Instant::now();
    // Something changes, then history is compacted: the watcher's resourceVersion is too old.
    server
        .create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bump"}}))
        .unwrap();
    server.compact();
    server.drop_watches();
    while lists(&source) == lists_before {
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "relist did not happen"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let relist_time = started.elapsed();
    let relist_peak = peak().saturating_sub(base);
    let relist_rise = peak().saturating_sub(relist_base);
    assert_eq!(index.len_of(ObjectKind::HTTPRoute), routes);
    settle().await;
    let after_relist = heap().saturating_sub(base);

    println!("{routes} HTTPRoutes");
    println!(
        "  time to ready        {:>9.1} ms   (baseline plain list {:.1} ms, ratio {:.2}x)",
        time_to_ready.as_secs_f64() * 1e3,
        list_time.as_secs_f64() * 1e3,
        time_to_ready.as_secs_f64() / list_time.as_secs_f64()
    );
    println!(
        "  steady heap          {:>9.2} MiB = {:.0} B/route   (baseline DynamicObjects {:.0} B/route, ratio {:.2})",
        mib(steady),
        steady as f64 / routes as f64,
        dynamic_heap as f64 / routes as f64,
        steady as f64 / dynamic_heap as f64
    );
    println!(
        "  index fed directly   {index_per_route:>9.0} B/route, of which projections {projection_per_route:.0} B/route"
    );
    println!(
        "  peak during sync     {:>9.2} MiB ({:.2}x steady)",
        mib(sync_peak),
        sync_peak as f64 / steady as f64
    );
    println!(
        "  relist (410)         {:>9.1} ms, peak {:.2} MiB = {:.2}x steady (rise {:.1} KiB), after {:.2} MiB",
        relist_time.as_secs_f64() * 1e3,
        mib(relist_peak),
        relist_peak as f64 / steady as f64,
        kib(relist_rise),
        mib(after_relist)
    );
    drop(source);
}

fn main() {
    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let sizes = if sizes.is_empty() {
        vec![1_000, 10_000, 50_000]
    } else {
        sizes
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    println!("kube source sync (API double on 127.0.0.1, page size 500, counting allocator)");
    for routes in sizes {
        runtime.block_on(run(routes));
    }
}
