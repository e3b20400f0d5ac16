//! `gateway-dns serve` on a cluster of N HTTPRoutes (default 2,000), as a real process: the
//! real kube-apiserver (etcd, RBAC, the manifests' ServiceAccount) against the in-process API
//! double, in one run. For each: how long the routes take to apply, time from spawn to
//! `/readyz`, time until the embedded DNS answers the last route's name, and the process's
//! resident memory (VmRSS after the first sync, VmHWM its peak). Also, as a floor, a plain
//! paged list of the same routes with kube-rs against the real server.
//!
//! Needs the test control plane (`tests/control-plane/build.sh DIR`, then
//! `GATEWAY_DNS_CONTROL_PLANE=DIR`). Run: `cargo bench --bench serve_ready [-- ROUTES...]`.

#[path = "support/route_api.rs"]
mod route_api;
#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use kube::api::{Api, DynamicObject, ListParams};
use serde_json::{Value, json};

use route_api::{create_routes, routes_resource};
use support::apiserver::ApiServer;
use support::cluster::{ControlPlane, Serve};

const NAMESPACES: usize = 50;
const LIMIT: Duration = Duration::from_secs(600);

fn namespace(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
}

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

/// A typical HTTPRoute: two hostnames, one parent, one rule, labels, an annotation.
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

/// A plain paged list (500 per page) of every route into DynamicObjects.
async fn plain_list(client: &kube::Client, routes: usize) -> Duration {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &routes_resource());
    let started = Instant::now();
    let mut count = 0;
    let mut token: Option<String> = None;
    loop {
        let mut params = ListParams::default().limit(500);
        if let Some(t) = &token {
            params = params.continue_token(t);
        }
        let page = api.list(&params).await.unwrap();
        count += page.items.len();
        token = page.metadata.continue_.filter(|t| !t.is_empty());
        if token.is_none() {
            break;
        }
    }
    assert_eq!(count, routes);
    started.elapsed()
}

struct Figures {
    apply: Duration,
    ready: Duration,
    dns: Duration,
    rss_kib: u64,
    hwm_kib: u64,
}

/// VmRSS and VmHWM of `pid`, in KiB.
fn memory(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Spawns serve on `kubeconfig` and measures it until the last route's name resolves.
async fn measure_serve(kubeconfig: &std::path::Path, routes: usize, apply: Duration) -> Figures {
    let started = Instant::now();
    let serve = Serve::start(kubeconfig, "bench", &["--zone", "example.com"]);
    serve.wait_ready(LIMIT).await;
    let ready = started.elapsed();
    let last = format!("www.app-{}.example.com", routes - 1);
    serve
        .wait_answer(&last, "A", &["203.0.113.10"], LIMIT)
        .await;
    let dns = started.elapsed();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (rss_kib, hwm_kib) = memory(serve.pid().unwrap());
    Figures {
        apply,
        ready,
        dns,
        rss_kib,
        hwm_kib,
    }
}

async fn on_real_server(routes: usize) -> (Figures, Duration) {
    let cluster = ControlPlane::start();
    cluster.install_gateway_dns_rbac();
    let client = cluster.admin_client().await;
    let mut objects = vec![namespace("infra")];
    objects.extend((0..NAMESPACES).map(|i| namespace(&format!("team-{i}"))));
    objects.push(gateway());
    for object in objects {
        let yaml = serde_json::to_string(&object).unwrap();
        cluster.apply(&yaml, &[]).ok();
    }
    cluster.gateway_address("infra/public", &["203.0.113.10"]);
    let started = Instant::now();
    create_routes(&client, routes, http_route).await;
    let apply = started.elapsed();
    let list = plain_list(&client, routes).await;
    let identity = cluster.service_account_kubeconfig("gateway-dns", "gateway-dns", None);
    (measure_serve(&identity, routes, apply).await, list)
}

async fn on_double(routes: usize) -> Figures {
    let server = ApiServer::start().await;
    server.create(namespace("infra")).unwrap();
    for i in 0..NAMESPACES {
        server.create(namespace(&format!("team-{i}"))).unwrap();
    }
    let mut gateway = gateway();
    gateway["status"] = json!({"addresses": [{"type": "IPAddress", "value": "203.0.113.10"}]});
    server.create(gateway).unwrap();
    let started = Instant::now();
    for i in 0..routes {
        server.create(http_route(i)).unwrap();
    }
    let apply = started.elapsed();
    measure_serve(server.kubeconfig_path(), routes, apply).await
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

fn main() {
    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let sizes = if sizes.is_empty() { vec![2_000] } else { sizes };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    println!(
        "gateway-dns serve on a cluster source: real kube-apiserver v1.37 against the API double"
    );
    for routes in sizes {
        let (real, list) = runtime.block_on(on_real_server(routes));
        let double = runtime.block_on(on_double(routes));
        println!("{routes} HTTPRoutes ({NAMESPACES} namespaces, one Gateway)");
        println!(
            "  {:<34} {:>12} {:>12} {:>7}",
            "", "real", "double", "ratio"
        );
        let row = |label: &str, real: f64, double: f64, unit: &str| {
            println!(
                "  {label:<34} {:>9.1} {unit} {:>9.1} {unit} {:>6.2}x",
                real,
                double,
                real / double
            );
        };
        row("apply the routes", ms(real.apply), ms(double.apply), "ms");
        row(
            "spawn to /readyz (time to ready)",
            ms(real.ready),
            ms(double.ready),
            "ms",
        );
        row(
            "spawn to the last name in DNS",
            ms(real.dns),
            ms(double.dns),
            "ms",
        );
        row(
            "resident memory after sync",
            real.rss_kib as f64 / 1024.0,
            double.rss_kib as f64 / 1024.0,
            "MiB",
        );
        row(
            "peak resident memory (VmHWM)",
            real.hwm_kib as f64 / 1024.0,
            double.hwm_kib as f64 / 1024.0,
            "MiB",
        );
        println!(
            "  plain paged list on the real server: {:.0} ms (time to ready / list: {:.2}x)",
            ms(list),
            real.ready.as_secs_f64() / list.as_secs_f64()
        );
    }
}
