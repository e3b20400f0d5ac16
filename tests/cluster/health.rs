//! Health checks on real parts (ARCHITECTURE.md, "Health checks"): three Gateways at 127.0.0.2,
//! .3 and .4, each served by a small HTTP (or HTTPS) server this test starts, share one name;
//! `serve` reads them from the real API server and writes BIND, checked with `dig`. A server
//! stopped leaves the RRset after the failure threshold and comes back after the success
//! threshold; all stopped, the records stay, with Events; a flapping server changes DNS no more
//! than once per threshold of probes.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::task::JoinHandle;

use crate::support::bind::Bind;
use crate::support::cluster::{ControlPlane, Serve};
use crate::support::dig;
use crate::support::net::free_port;

const NAME: &str = "app.example.com";
const A: &str = "127.0.0.2";
const B: &str = "127.0.0.3";
const C: &str = "127.0.0.4";
/// Probes every second; two failures in a row make a target unhealthy, two successes healthy.
const INTERVAL: Duration = Duration::from_secs(1);
const THRESHOLD: u32 = 2;
const LIMIT: Duration = Duration::from_secs(60);

fn objects(port: u16) -> String {
    let gateway = |name: &str, protocol: &str| {
        format!(
            "apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: {name}
  namespace: infra
  annotations:
    gateway-dns.io/health-check-protocol: {protocol}
    gateway-dns.io/health-check-port: \"{port}\"
    gateway-dns.io/health-check-path: /healthz
    gateway-dns.io/health-check-interval: 1s
    gateway-dns.io/health-check-timeout: 500ms
    gateway-dns.io/health-check-failure-threshold: \"{THRESHOLD}\"
    gateway-dns.io/health-check-success-threshold: \"{THRESHOLD}\"
spec:
  gatewayClassName: example
  listeners:
  - {{name: http, protocol: HTTP, port: 80, allowedRoutes: {{namespaces: {{from: All}}}}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: app-{name}, namespace: apps}}
spec:
  parentRefs: [{{name: {name}, namespace: infra}}]
  hostnames: [{NAME}]
---
"
        )
    };
    format!(
        "apiVersion: v1
kind: Namespace
metadata: {{name: infra}}
---
apiVersion: v1
kind: Namespace
metadata: {{name: apps}}
---
{}{}{}",
        gateway("a", "http"),
        gateway("b", "http"),
        gateway("c", "https"),
    )
}

/// A small HTTP(S) server at one loopback address that answers 200 to every request and
/// remembers the Host headers it saw; stopped, its port refuses connections.
struct Site {
    address: SocketAddr,
    tls: Option<tokio_rustls::TlsAcceptor>,
    hosts: Arc<Mutex<Vec<String>>>,
    task: Option<JoinHandle<()>>,
}

impl Site {
    fn new(ip: &str, port: u16, tls: Option<tokio_rustls::TlsAcceptor>) -> Site {
        let ip: Ipv4Addr = ip.parse().unwrap();
        Site {
            address: SocketAddr::new(IpAddr::V4(ip), port),
            tls,
            hosts: Arc::default(),
            task: None,
        }
    }

    fn start(&mut self) {
        if self.task.is_some() {
            return;
        }
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.set_reuseaddr(true).unwrap();
        socket.bind(self.address).unwrap();
        let listener = socket.listen(64).unwrap();
        let (tls, hosts) = (self.tls.clone(), self.hosts.clone());
        self.task = Some(tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (tls, hosts) = (tls.clone(), hosts.clone());
                tokio::spawn(async move {
                    match tls {
                        Some(tls) => {
                            if let Ok(stream) = tls.accept(tcp).await {
                                answer(stream, hosts).await;
                            }
                        }
                        None => answer(tcp, hosts).await,
                    }
                });
            }
        }));
    }

    fn stop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }

    fn hosts(&self) -> Vec<String> {
        self.hosts.lock().unwrap().clone()
    }
}

impl Drop for Site {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Reads one request head, notes its Host, answers 200 and closes.
async fn answer<S: AsyncRead + AsyncWrite + Unpin>(mut stream: S, hosts: Arc<Mutex<Vec<String>>>) {
    let mut head = Vec::new();
    let mut buffer = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
        match stream.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buffer[..n]),
        }
    }
    let text = String::from_utf8_lossy(&head);
    if let Some(host) = text
        .lines()
        .find_map(|line| line.strip_prefix("host: ").or(line.strip_prefix("Host: ")))
    {
        hosts.lock().unwrap().push(host.trim().to_string());
    }
    let _ = stream
        .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
        .await;
    let _ = stream.shutdown().await;
}

/// A TLS acceptor with a self-signed certificate for [`NAME`]: the probe accepts any.
fn self_signed() -> tokio_rustls::TlsAcceptor {
    let certified = rcgen::generate_simple_self_signed(vec![NAME.to_string()]).unwrap();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(certified.signing_key.serialize_der().into());
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![certified.cert.der().clone()], key)
    .unwrap();
    tokio_rustls::TlsAcceptor::from(Arc::new(config))
}

/// The A records BIND answers for [`NAME`], sorted.
async fn answer_of(bind: SocketAddr) -> Vec<String> {
    tokio::task::spawn_blocking(move || {
        let mut data = dig::query(bind, NAME, "A", false).data("A");
        data.sort();
        data
    })
    .await
    .unwrap()
}

async fn wait_answer(bind: SocketAddr, serve: &Serve, expected: &[&str]) {
    let start = Instant::now();
    let mut last = Vec::new();
    while start.elapsed() < LIMIT {
        last = answer_of(bind).await;
        if last == expected {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!(
        "{NAME} A: wanted {expected:?}, BIND still answers {last:?} after {LIMIT:?}; serve's \
         log ends with:\n{}",
        serve.log_tail()
    );
}

/// gateway-dns's Events of `event_type` with `reason` about Gateway `name`.
fn events(cluster: &ControlPlane, name: &str, reason: &str, event_type: &str) -> usize {
    let json = cluster
        .kubectl(&["get", "events.events.k8s.io", "-n", "infra", "-o", "json"])
        .ok();
    let list: Value = serde_json::from_str(&json).unwrap_or_default();
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| {
            e["regarding"]["kind"] == "Gateway"
                && e["regarding"]["name"] == name
                && e["reason"] == reason
                && e["type"] == event_type
        })
        .count()
}

async fn wait_events(
    cluster: &ControlPlane,
    serve: &Serve,
    gateways: &[&str],
    reason: &str,
    event_type: &str,
) {
    let start = Instant::now();
    while start.elapsed() < LIMIT {
        let told = tokio::task::block_in_place(|| {
            gateways
                .iter()
                .all(|g| events(cluster, g, reason, event_type) > 0)
        });
        if told {
            return;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    panic!(
        "no {event_type} {reason} Event on every Gateway of {gateways:?}; serve's log ends \
         with:\n{}",
        serve.log_tail()
    );
}

/// Changes of state of Gateway a's target in serve's log.
fn transitions_of_a(serve: &Serve) -> usize {
    serve
        .log()
        .lines()
        .filter(|line| {
            line.contains("infra/a")
                && (line.contains("target failed its health checks")
                    || line.contains("target passes its health checks again"))
        })
        .count()
}

/// The three sites, serving, and the control plane with their Gateways and the name; serve's
/// identity there.
struct World {
    a: Site,
    b: Site,
    c: Site,
    cluster: ControlPlane,
    identity: std::path::PathBuf,
}

impl World {
    fn start() -> World {
        let port = free_port();
        let mut a = Site::new(A, port, None);
        let mut b = Site::new(B, port, None);
        let mut c = Site::new(C, port, Some(self_signed()));
        for site in [&mut a, &mut b, &mut c] {
            site.start();
        }
        let (cluster, identity) = tokio::task::block_in_place(|| {
            let cluster = ControlPlane::start();
            cluster.install_gateway_dns_rbac();
            cluster.apply(&objects(port), &[]).ok();
            cluster.gateway_address("infra/a", &[A]);
            cluster.gateway_address("infra/b", &[B]);
            cluster.gateway_address("infra/c", &[C]);
            let identity = cluster.service_account_kubeconfig("gateway-dns", "gateway-dns", None);
            (cluster, identity)
        });
        World {
            a,
            b,
            c,
            cluster,
            identity,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_take_a_dead_target_out_of_a_shared_name_and_never_the_last() {
    let World {
        mut a,
        mut b,
        mut c,
        cluster,
        identity,
    } = World::start();
    let bind = Bind::start("example.com", "");
    let mut args: Vec<String> = bind.serve_args();
    args.extend(["--shared-name", NAME].map(String::from));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let serve = Serve::start_with_env(&identity, "serve-health", &args, &bind.serve_env());
    serve.wait_ready(LIMIT).await;
    wait_answer(bind.addr(), &serve, &[A, B, C]).await;
    // Probes carry a name published through the Gateway, over HTTP and over TLS alike.
    let probed = |site: &Site| site.hosts().iter().any(|h| h.starts_with(NAME));
    let start = Instant::now();
    while !(probed(&a) && probed(&c)) && start.elapsed() < LIMIT {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        probed(&a) && probed(&c),
        "hosts seen: {:?} {:?}; serve's log ends with:\n{}",
        a.hosts(),
        c.hosts(),
        serve.log_tail()
    );

    // One target dies: it leaves the name after the failure threshold, and the Gateway is told.
    b.stop();
    wait_answer(bind.addr(), &serve, &[A, C]).await;
    wait_events(&cluster, &serve, &["b"], "TargetUnhealthy", "Warning").await;
    let metrics = serve.metrics_text().await;
    assert!(
        metrics.contains(r#"gateway_dns_target_healthy{gateway_namespace="infra",gateway="b"} 0"#)
            && metrics
                .contains(r#"gateway_dns_target_healthy{gateway_namespace="infra",gateway="a"} 1"#),
        "{metrics}"
    );

    // Back: in the name again after the success threshold, and told so.
    b.start();
    wait_answer(bind.addr(), &serve, &[A, B, C]).await;
    wait_events(&cluster, &serve, &["b"], "TargetHealthy", "Normal").await;

    // Every target dies: the name keeps its records (fails open), every Gateway is told.
    for site in [&mut a, &mut b, &mut c] {
        site.stop();
    }
    wait_events(
        &cluster,
        &serve,
        &["a", "b", "c"],
        "TargetUnhealthy",
        "Warning",
    )
    .await;
    wait_answer(bind.addr(), &serve, &[A, B, C]).await;
    assert!(
        serve.log().contains("TargetUnhealthy"),
        "{}",
        serve.log_tail()
    );
    // And stays so: the last targets are never removed.
    tokio::time::sleep(INTERVAL * 4).await;
    assert_eq!(answer_of(bind.addr()).await, [A, B, C]);

    for site in [&mut a, &mut b, &mut c] {
        site.start();
    }
    // Healthy again: wait until every Gateway has passed the success threshold.
    wait_events(
        &cluster,
        &serve,
        &["a", "b", "c"],
        "TargetHealthy",
        "Normal",
    )
    .await;
    wait_answer(bind.addr(), &serve, &[A, B, C]).await;

    // A flapping server: up and down faster than the probes. Each change of its state takes
    // THRESHOLD probes in a row that agree, so no more than one change per THRESHOLD probes.
    let before = transitions_of_a(&serve);
    let mut dns_changes = 0;
    let mut last = answer_of(bind.addr()).await;
    let flapping = Duration::from_secs(16);
    let start = Instant::now();
    let mut up = true;
    while start.elapsed() < flapping {
        up = !up;
        if up {
            a.start()
        } else {
            a.stop()
        }
        tokio::time::sleep(Duration::from_millis(350)).await;
        let now = answer_of(bind.addr()).await;
        if now != last {
            dns_changes += 1;
            last = now;
        }
    }
    a.start();
    let changes = transitions_of_a(&serve) - before;
    let windows = (flapping.as_secs_f64() / (INTERVAL * THRESHOLD).as_secs_f64()).ceil() as usize;
    assert!(
        changes <= windows,
        "{changes} changes of a flapping target's state in {flapping:?}, more than one per \
         {THRESHOLD} probes of {INTERVAL:?}; serve's log ends with:\n{}",
        serve.log_tail()
    );
    assert!(
        dns_changes <= changes,
        "{dns_changes} DNS changes for {changes} changes of state"
    );
    wait_answer(bind.addr(), &serve, &[A, B, C]).await;
    serve.assert_running();
}

/// `/status.json` of one replica.
async fn status_of(serve: &Serve) -> Value {
    let (_, body) = crate::support::install::http_get(serve.metrics, "/status.json")
        .await
        .unwrap_or_default();
    serde_json::from_str(&body).unwrap_or_default()
}

/// The failing targets one replica's status page shows for [`NAME`].
async fn failing_shown_by(serve: &Serve) -> Vec<String> {
    let status = status_of(serve).await;
    status["names"]["rows"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|row| row["name"] == NAME)
        .flat_map(|row| {
            row["failingTargets"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|t| t.as_str().map(str::to_owned))
        .collect()
}

/// Only the holder probes; the others read its failing targets off the Lease, and so does
/// `explain`. When the holder dies, the next one starts from them: the dead target never comes
/// back into DNS during the hand-over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_replica_and_explain_see_the_holders_failing_targets_and_a_new_holder_keeps_them() {
    let World {
        a: _a,
        mut b,
        c: _c,
        cluster,
        identity,
    } = World::start();
    let bind = Bind::start("example.com", "");
    let mut args: Vec<String> = bind.serve_args();
    // A short Lease, so that the hand-over below takes seconds.
    args.extend(
        [
            "--shared-name",
            NAME,
            "--leader-election-lease-duration",
            "4s",
            "--leader-election-renew-deadline",
            "3s",
            "--leader-election-retry-period",
            "1s",
        ]
        .map(String::from),
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut first = Serve::start_with_env(&identity, "health-0", &args, &bind.serve_env());
    first.wait_ready(LIMIT).await;
    wait_answer(bind.addr(), &first, &[A, B, C]).await;
    let start = Instant::now();
    while status_of(&first).await["overview"]["health"]["leaseHolder"] != "health-0" {
        assert!(start.elapsed() < LIMIT, "{}", first.log_tail());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let second = Serve::start_with_env(&identity, "health-1", &args, &bind.serve_env());
    second.wait_ready(LIMIT).await;

    // b dies: the holder takes it out, and the other replica, which never probes it, shows it
    // failing with the holder's error.
    b.stop();
    wait_answer(bind.addr(), &first, &[A, C]).await;
    let start = Instant::now();
    let shown = loop {
        let shown = failing_shown_by(&second).await;
        if !shown.is_empty() {
            break shown;
        }
        assert!(
            start.elapsed() < LIMIT,
            "health-1 never showed b failing; its log ends with:\n{}",
            second.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(shown.len(), 1, "{shown:?}");
    assert!(shown[0].starts_with(&format!("{B}: ")), "{shown:?}");

    // explain reads them off the Lease too.
    let admin = cluster.kubeconfig();
    let explained = tokio::task::block_in_place(|| {
        std::process::Command::new(env!("CARGO_BIN_EXE_gateway-dns"))
            .args(["explain", NAME, "--shared-name", NAME, "--output", "json"])
            .arg("--kubeconfig")
            .arg(&admin)
            .env_remove("KUBECONFIG")
            .output()
            .unwrap()
    });
    let json: Value =
        serde_json::from_slice(&explained.stdout).unwrap_or_else(|e| panic!("{e}: {explained:?}"));
    let text = json.to_string();
    assert!(
        text.contains(&format!(r#""target":"{B}""#)) && text.contains(r#""leftOut":true"#),
        "{json:#}"
    );

    // The holder dies: the next one starts from b failing, so b stays out of DNS throughout.
    first.kill();
    let start = Instant::now();
    let mut leading_since: Option<Instant> = None;
    while leading_since.is_none_or(|t| t.elapsed() < INTERVAL * 6) {
        assert!(
            start.elapsed() < LIMIT,
            "health-1 never held the Lease; its log ends with:\n{}",
            second.log_tail()
        );
        let answer = answer_of(bind.addr()).await;
        assert!(
            !answer.iter().any(|a| a == B),
            "b came back into DNS during the hand-over: {answer:?}; health-1's log ends with:\n{}",
            second.log_tail()
        );
        if leading_since.is_none()
            && status_of(&second).await["overview"]["health"]["leaseHolder"] == "health-1"
        {
            leading_since = Some(Instant::now());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // And the new holder probes: b back, back in DNS after the success threshold.
    b.start();
    wait_answer(bind.addr(), &second, &[A, B, C]).await;
    let start = Instant::now();
    while !failing_shown_by(&second).await.is_empty() {
        assert!(start.elapsed() < LIMIT, "{}", second.log_tail());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    second.assert_running();
}
