//! `gateway-dns serve` as a process: the main job on its embedded defaults (files source,
//! self-signed TLS, embedded DNS), and the engine's records synced into a real BIND.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use gateway_dns::engine::Config;
use gateway_dns::index::Index;
use gateway_dns::metrics::Metrics;
use gateway_dns::source::files::load_paths;
use gateway_dns::sync::desired::EngineDesired;
use gateway_dns::sync::{SyncConfig, Syncer};

use crate::support::bind::Bind;
use crate::support::dig;
use crate::support::net::{free_port, wait_until};
use crate::support::webhook::{HttpsConnection, examples_dir};

/// The `serve` process, killed on drop.
struct Serve {
    child: Child,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

fn answer(port: u16, name: &str) -> Vec<String> {
    dig::query(([127, 0, 0, 1], port).into(), name, "A", false).data("A")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn main_job_serves_the_example_cluster_and_follows_file_changes() {
    let work = tempfile::tempdir().unwrap();
    let manifests = work.path().join("cluster");
    copy_dir(&examples_dir().join("cluster"), &manifests);
    let (https, dns, metrics) = (free_port(), free_port(), free_port());
    let ca = work.path().join("certs/ca.crt");
    let child = Command::new(env!("CARGO_BIN_EXE_gateway-dns"))
        .args(["serve", "--manifests"])
        .arg(&manifests)
        .args(["--listen", &format!("127.0.0.1:{https}")])
        .args(["--dns-listen", &format!("127.0.0.1:{dns}")])
        .args(["--metrics-listen", &format!("127.0.0.1:{metrics}")])
        .args([
            "--service-name",
            "gateway-dns",
            "--service-namespace",
            "gateway-dns-system",
        ])
        .arg("--local-ca-out")
        .arg(&ca)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("serve starts");
    let _serve = Serve { child };

    // The embedded DNS server answers with the oldest claim only for the contested name.
    wait_until("a.example.com resolves", Duration::from_secs(30), || {
        answer(dns, "a.example.com") == ["203.0.113.10"]
    });
    assert_eq!(answer(dns, "b.example.com"), ["203.0.113.10"]);
    let d = dig::query(([127, 0, 0, 1], dns).into(), "d.example.com", "A", false);
    assert!(
        d.data("A").is_empty(),
        "d1's name is outside its listener: never published"
    );

    // The webhook answers kube-apiserver-style over HTTPS, trusting the CA it wrote.
    wait_until("the CA file is written", Duration::from_secs(10), || {
        ca.exists()
    });
    let ca_pem = std::fs::read_to_string(&ca).unwrap();
    let addr = ([127, 0, 0, 1], https).into();
    let mut connection =
        HttpsConnection::connect(addr, &ca_pem, "gateway-dns.gateway-dns-system.svc")
            .await
            .unwrap();
    let b2 = connection.example_review("b2-conflict.json").await;
    assert_eq!(b2["allowed"], false, "{b2}");
    assert_eq!(
        b2["status"]["details"]["causes"][0]["reason"],
        "HostnameConflict"
    );

    // b1 goes away (files re-read on change): b2's Gateway now owns b.example.com, and the same
    // review is allowed.
    let routes_path = manifests.join("routes.yaml");
    let routes = std::fs::read_to_string(&routes_path).unwrap();
    let without_b1: Vec<&str> = routes
        .split("\n---\n")
        .filter(|doc| !doc.contains("name: b1"))
        .collect();
    std::fs::write(&routes_path, without_b1.join("\n---\n")).unwrap();
    wait_until(
        "b.example.com moves to gw2",
        Duration::from_secs(30),
        || answer(dns, "b.example.com") == ["203.0.113.20"],
    );
    let b2 = connection.example_review("b2-conflict.json").await;
    assert_eq!(b2["allowed"], true, "{b2}");

    // The status page (on by default, on the metrics listener) follows the index too.
    let status = fetch(metrics, "/status.json");
    let body = status.split("\r\n\r\n").nth(1).unwrap_or_default();
    let status: serde_json::Value =
        serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {status}"));
    let b = status["names"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["name"] == "b.example.com")
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        b["targets"],
        serde_json::json!(["203.0.113.20"]),
        "{status}"
    );
    assert_eq!(
        b["routes"],
        serde_json::json!(["HTTPRoute/apps/b2"]),
        "{status}"
    );
}

#[test]
fn status_page_false_leaves_the_metrics_listener_to_the_metrics() {
    let (dns, metrics) = (free_port(), free_port());
    let child = Command::new(env!("CARGO_BIN_EXE_gateway-dns"))
        .args([
            "serve",
            "--webhook=false",
            "--status-page=false",
            "--manifests",
        ])
        .arg(examples_dir().join("cluster"))
        .args(["--dns-listen", &format!("127.0.0.1:{dns}")])
        .args(["--metrics-listen", &format!("127.0.0.1:{metrics}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("serve starts");
    let _serve = Serve { child };
    wait_until(
        "the metrics listener answers",
        Duration::from_secs(30),
        || scrape(metrics).starts_with("HTTP/1.1 200"),
    );
    for path in ["/", "/names", "/status.json"] {
        let answer = fetch(metrics, path);
        assert!(answer.starts_with("HTTP/1.1 404"), "{path}: {answer}");
    }
}

/// Two teams on two Gateways: team-a's route is the oldest claim on shop.example.com; team-b
/// (whose domains are `*.b.example.com`) claims it too, through the other Gateway.
const TEAMS_CLUSTER: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: team-a}
---
apiVersion: v1
kind: Namespace
metadata:
  name: team-b
  annotations: {gateway-dns.io/allowed-hostnames: "*.b.example.com, shop.example.com"}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: east, namespace: infra}
spec:
  listeners: [{name: http, protocol: HTTP, port: 80, allowedRoutes: {namespaces: {from: All}}}]
status: {addresses: [{type: IPAddress, value: 192.0.2.1}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: west, namespace: infra}
spec:
  listeners: [{name: http, protocol: HTTP, port: 80, allowedRoutes: {namespaces: {from: All}}}]
status: {addresses: [{type: IPAddress, value: 192.0.2.2}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: site, namespace: team-a, creationTimestamp: "2026-05-01T00:00:00Z"}
spec:
  parentRefs: [{name: east, namespace: infra}]
  hostnames: [shop.example.com]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: takeover, namespace: team-b, creationTimestamp: "2026-05-02T00:00:00Z"}
spec:
  parentRefs: [{name: west, namespace: infra}]
  hostnames: [shop.example.com, www.b.example.com, api.example.com]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owner_namespaces_records_never_move_and_names_outside_a_namespaces_domains_stay_unpublished()
 {
    let work = tempfile::tempdir().unwrap();
    let manifests = work.path().join("cluster");
    std::fs::create_dir_all(&manifests).unwrap();
    let cluster = manifests.join("cluster.yaml");
    std::fs::write(&cluster, TEAMS_CLUSTER).unwrap();
    let (https, dns, metrics) = (free_port(), free_port(), free_port());
    // `exclude` would publish a contested name nowhere: only ownership keeps team-a's record.
    let child = Command::new(env!("CARGO_BIN_EXE_gateway-dns"))
        .args(["serve", "--manifests"])
        .arg(&manifests)
        .args(["--listen", &format!("127.0.0.1:{https}")])
        .args(["--dns-listen", &format!("127.0.0.1:{dns}")])
        .args(["--metrics-listen", &format!("127.0.0.1:{metrics}")])
        .args(["--zone", "example.com"])
        .args(["--hostname-ownership", "namespace"])
        .args(["--conflict-resolution", "exclude"])
        .arg("--local-ca-out")
        .arg(work.path().join("certs/ca.crt"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("serve starts");
    let _serve = Serve { child };

    wait_until(
        "www.b.example.com resolves",
        Duration::from_secs(30),
        || answer(dns, "www.b.example.com") == ["192.0.2.2"],
    );
    assert_eq!(answer(dns, "shop.example.com"), ["192.0.2.1"]);
    let api = dig::query(([127, 0, 0, 1], dns).into(), "api.example.com", "A", false);
    assert_eq!(
        (api.status.as_str(), api.data("A")),
        ("NXDOMAIN", vec![]),
        "outside team-b's domains: never published"
    );

    // team-b tries again, through a second route on the owner's own Gateway (where DNS would
    // not even change); the owner's record stays where it is through every pass that follows.
    let more = TEAMS_CLUSTER.to_owned()
        + r#"---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: again, namespace: team-b, creationTimestamp: "2026-05-03T00:00:00Z"}
spec:
  parentRefs: [{name: east, namespace: infra}]
  hostnames: [shop.example.com, new.b.example.com]
"#;
    std::fs::write(&cluster, more).unwrap();
    wait_until(
        "new.b.example.com resolves",
        Duration::from_secs(30),
        || !answer(dns, "new.b.example.com").is_empty(),
    );
    for _ in 0..5 {
        assert_eq!(answer(dns, "shop.example.com"), ["192.0.2.1"]);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Widening team-b's domains (the Namespace annotation) publishes the name it was refused.
    let widened = std::fs::read_to_string(&cluster).unwrap().replace(
        "\"*.b.example.com, shop.example.com\"",
        "\"*.b.example.com, shop.example.com, api.example.com\"",
    );
    std::fs::write(&cluster, widened).unwrap();
    wait_until("api.example.com resolves", Duration::from_secs(30), || {
        answer(dns, "api.example.com") == ["192.0.2.2"]
    });
    assert_eq!(answer(dns, "shop.example.com"), ["192.0.2.1"]);
}

fn engine_index(dir: &Path) -> Index {
    let index = Index::with_config(Arc::new(Config::default()));
    let loaded = load_paths(&[dir.to_path_buf()]).unwrap();
    index.replace_all(loaded.into_iter().map(|l| l.object).collect());
    index
}

const CONFLICT_CLUSTER: &str = r#"
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: east, namespace: infra}
spec:
  listeners: [{name: http, protocol: HTTP, port: 80, allowedRoutes: {namespaces: {from: All}}}]
status: {addresses: [{type: IPAddress, value: 192.0.2.1}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: west, namespace: infra}
spec:
  listeners: [{name: http, protocol: HTTP, port: 80, allowedRoutes: {namespaces: {from: All}}}]
status: {addresses: [{type: IPAddress, value: 192.0.2.2}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: newer
  namespace: shop
  creationTimestamp: "2026-05-02T00:00:00Z"
  annotations: {external-dns.kubernetes.io/ttl: "120"}
spec:
  parentRefs: [{name: west, namespace: infra}]
  hostnames: [shop.example.com]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: older
  namespace: shop
  creationTimestamp: "2026-05-01T00:00:00Z"
  annotations: {external-dns.kubernetes.io/ttl: "90"}
spec:
  parentRefs: [{name: east, namespace: infra}]
  hostnames: [shop.example.com, only.example.com]
"#;

fn ttl_of(bind: &Bind, name: &str) -> Option<u32> {
    let answer = dig::query(bind.addr(), name, "A", false);
    answer
        .answer
        .iter()
        .find(|rr| rr.rtype == "A")
        .map(|rr| rr.ttl)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflict_that_slipped_past_the_webhook_settles_oldest_wins_in_bind_without_flapping() {
    let bind = Bind::start("example.com", "");
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("cluster.yaml"), CONFLICT_CLUSTER).unwrap();
    let index = engine_index(work.path());
    let provider = Arc::new(
        gateway_dns::dns::provider::rfc2136::Rfc2136Provider::new(bind.provider_config()).unwrap(),
    );
    let metrics = Arc::new(Metrics::new());
    let syncer = Syncer::new(
        provider,
        Arc::new(EngineDesired::new(index.clone())),
        SyncConfig::new("gateway-dns-test", vec!["example.com".into()]),
        metrics.clone(),
    );
    syncer.sync_pass().await.unwrap();
    assert_eq!(
        dig::query(bind.addr(), "shop.example.com", "A", false).data("A"),
        ["192.0.2.1"]
    );
    assert_eq!(
        ttl_of(&bind, "shop.example.com"),
        Some(90),
        "the winning route's TTL annotation"
    );
    let applied_first = metrics.sync_changes_written();
    assert!(applied_first > 0);
    for pass in 0..10 {
        let report = syncer.sync_pass().await.unwrap();
        assert!(
            report.plan.changes.is_empty(),
            "pass {pass} wanted changes: {:?}",
            report.plan.changes
        );
        // A query BIND leaves unanswered on a busy machine says nothing of a flap (the plan
        // above would show one): ask again until it answers.
        let mut answer = dig::query(bind.addr(), "shop.example.com", "A", false);
        for _ in 0..5 {
            if !answer.status.is_empty() {
                break;
            }
            answer = dig::query(bind.addr(), "shop.example.com", "A", false);
        }
        assert_eq!(answer.data("A"), ["192.0.2.1"], "pass {pass}: {answer:?}");
    }
    assert_eq!(metrics.sync_changes_written(), applied_first);

    // Routes change: the older route drops the contested name, the newer one takes it; a
    // removed hostname disappears from DNS.
    let text = CONFLICT_CLUSTER.replace(
        "hostnames: [shop.example.com, only.example.com]",
        "hostnames: [solo.example.com]",
    );
    std::fs::write(work.path().join("cluster.yaml"), text).unwrap();
    let loaded = load_paths(&[work.path().to_path_buf()]).unwrap();
    index.replace_all(loaded.into_iter().map(|l| l.object).collect());
    syncer.sync_pass().await.unwrap();
    assert_eq!(
        dig::query(bind.addr(), "shop.example.com", "A", false).data("A"),
        ["192.0.2.2"]
    );
    assert_eq!(ttl_of(&bind, "shop.example.com"), Some(120));
    assert_eq!(
        dig::query(bind.addr(), "solo.example.com", "A", false).data("A"),
        ["192.0.2.1"]
    );
    assert!(
        dig::query(bind.addr(), "only.example.com", "A", false)
            .data("A")
            .is_empty()
    );
}

/// `/metrics` over a new connection, or "" while the listener is not up.
fn scrape(port: u16) -> String {
    fetch(port, "/metrics")
}

/// `GET path` over a new connection: the whole answer (status line, headers, body), or ""
/// while the listener is not up.
fn fetch(port: u16, path: &str) -> String {
    use std::io::{Read as _, Write as _};
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return String::new();
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return String::new();
    }
    let mut text = String::new();
    let _ = stream.read_to_string(&mut text);
    text
}

#[test]
fn connections_closed_at_a_cap_are_counted_per_listener_and_cap() {
    let (dns, metrics) = (free_port(), free_port());
    let child = Command::new(env!("CARGO_BIN_EXE_gateway-dns"))
        .args(["serve", "--manifests"])
        .arg(examples_dir().join("cluster"))
        .args(["--webhook=false", "--max-connections", "2"])
        .args(["--dns-tcp-max-connections-per-source", "1"])
        .args(["--dns-listen", &format!("127.0.0.1:{dns}")])
        .args(["--metrics-listen", &format!("127.0.0.1:{metrics}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("serve starts");
    let _serve = Serve { child };
    wait_until(
        "the metrics listener answers",
        Duration::from_secs(30),
        || scrape(metrics).contains("gateway_dns_connections_evicted_total"),
    );
    let sample = |text: &str, series: &str| -> Option<f64> {
        text.lines()
            .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
            .and_then(|value| value.trim().parse().ok())
    };
    let metrics_evicted =
        "gateway_dns_connections_evicted_total{listener=\"metrics\",cap=\"connections\"}";
    let dns_evicted = "gateway_dns_connections_evicted_total{listener=\"dns\",cap=\"per_source\"}";
    let before = scrape(metrics);
    let evicted_before = sample(&before, metrics_evicted).unwrap();
    assert_eq!(sample(&before, dns_evicted), Some(0.0), "{before}");

    // Two silent connections fill the metrics listener: the scrape's own makes room.
    let silent: Vec<_> = (0..2)
        .map(|_| std::net::TcpStream::connect(("127.0.0.1", metrics)).unwrap())
        .collect();
    // A second silent DNS connection from the same address pushes out the first.
    let dns_silent: Vec<_> = (0..2)
        .map(|_| std::net::TcpStream::connect(("127.0.0.1", dns)).unwrap())
        .collect();
    let mut after = String::new();
    wait_until("the evictions are counted", Duration::from_secs(10), || {
        after = scrape(metrics);
        sample(&after, metrics_evicted).is_some_and(|n| n > evicted_before)
            && sample(&after, dns_evicted) == Some(1.0)
    });
    assert_eq!(
        sample(
            &after,
            "gateway_dns_connections_refused_total{listener=\"metrics\",cap=\"connections\"}"
        ),
        Some(0.0),
        "idle connections make room, nothing is refused: {after}"
    );
    drop((silent, dns_silent));
}
