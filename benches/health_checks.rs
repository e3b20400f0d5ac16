//! Health checks as a real `gateway-dns serve` process runs them (ARCHITECTURE.md, "Health
//! checks"), over manifests and the embedded DNS server, with small HTTP servers on loopback
//! addresses 127.0.x.y that this bench starts:
//!
//! - **time to leave DNS**: two Gateways share one name; the server behind one stops, and the
//!   time until the embedded server no longer answers its address is measured, over rounds
//!   (p50, p99), beside `interval × failure-threshold`, the floor hysteresis sets;
//! - **probe CPU**: the process's CPU time (utime + stime) over a window with N Gateways
//!   unannotated, then annotated (one probe per target per second), per target per minute.
//!
//! Needs nothing but Linux loopback. Run: `cargo bench --bench health_checks [-- ROUNDS TARGETS]`
//! (default 20 rounds, 100 targets).

// Shared with the tests, which use more of them.
#[allow(dead_code)]
#[path = "../tests/support/dig.rs"]
mod dig;
#[allow(dead_code)]
#[path = "../tests/support/net.rs"]
mod net;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::task::JoinHandle;

const NAME: &str = "app.example.com";
const INTERVAL: Duration = Duration::from_secs(1);
const FAILURE_THRESHOLD: u32 = 3;
const LIMIT: Duration = Duration::from_secs(60);

/// A server that answers 200 to everything at one address while it runs.
struct Site {
    address: SocketAddr,
    task: Option<JoinHandle<()>>,
}

impl Site {
    fn new(address: SocketAddr) -> Site {
        Site {
            address,
            task: None,
        }
    }

    fn start(&mut self) {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.set_reuseaddr(true).unwrap();
        socket.bind(self.address).unwrap();
        let listener = socket.listen(64).unwrap();
        self.task = Some(tokio::spawn(async move {
            while let Ok((mut tcp, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut buffer = [0u8; 2048];
                    let _ = tcp.read(&mut buffer).await;
                    let _ = tcp
                        .write_all(
                            b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                        )
                        .await;
                });
            }
        }));
    }

    fn stop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// `count` Gateways `gw-i` at 127.0.1.i (from .2), each with a route on `name-i`, or all on
/// [`NAME`] when `shared`; annotated for health checks when `probed`.
fn manifests(count: usize, port: u16, shared: bool, probed: bool) -> String {
    let mut out = String::from("apiVersion: v1\nkind: Namespace\nmetadata: {name: infra}\n---\n");
    for i in 0..count {
        let annotations = if probed {
            format!(
                "  annotations:\n    gateway-dns.io/health-check-protocol: http\n    \
                 gateway-dns.io/health-check-port: \"{port}\"\n    \
                 gateway-dns.io/health-check-interval: {}s\n    \
                 gateway-dns.io/health-check-timeout: 500ms\n    \
                 gateway-dns.io/health-check-failure-threshold: \"{FAILURE_THRESHOLD}\"\n",
                INTERVAL.as_secs()
            )
        } else {
            String::new()
        };
        let host = if shared {
            NAME.to_owned()
        } else {
            format!("name-{i}.example.com")
        };
        out.push_str(&format!(
            "apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: gw-{i}
  namespace: infra
{annotations}spec:
  gatewayClassName: example
  listeners:
  - {{name: http, protocol: HTTP, port: 80}}
status:
  addresses: [{{type: IPAddress, value: {}}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: web-{i}, namespace: infra}}
spec:
  parentRefs: [{{name: gw-{i}}}]
  hostnames: [{host}]
---
",
            address(i)
        ));
    }
    out
}

fn address(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(127, 0, 1, u8::try_from(i + 2).unwrap())
}

fn serve(dir: &Path, dns: SocketAddr) -> Child {
    Command::new(env!("CARGO_BIN_EXE_gateway-dns"))
        .args(["serve", "--webhook=false", "--manifests"])
        .arg(dir)
        .args(["--zone", "example.com", "--shared-name", NAME])
        .args(["--dns-listen", &dns.to_string()])
        .env("GATEWAY_DNS_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("gateway-dns serve starts")
}

async fn answer(dns: SocketAddr, name: &str) -> Vec<String> {
    let name = name.to_owned();
    tokio::task::spawn_blocking(move || {
        let mut data = dig::query(dns, &name, "A", false).data("A");
        data.sort();
        data
    })
    .await
    .unwrap()
}

async fn wait_answer(dns: SocketAddr, expected: &[String]) -> Duration {
    let start = Instant::now();
    while start.elapsed() < LIMIT {
        if answer(dns, NAME).await == expected {
            return start.elapsed();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{NAME} never answered {expected:?}");
}

/// CPU seconds (user + system) the process has used.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    // USER_HZ is 100 on every Linux this runs on.
    ticks / 100.0
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let at = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[at]
}

async fn time_to_leave(rounds: usize) {
    let work = tempfile::tempdir().unwrap();
    let port = net::free_port();
    let mut sites: Vec<Site> = (0..2)
        .map(|i| Site::new(SocketAddr::new(IpAddr::V4(address(i)), port)))
        .collect();
    for site in &mut sites {
        site.start();
    }
    std::fs::write(work.path().join("all.yaml"), manifests(2, port, true, true)).unwrap();
    let dns = SocketAddr::from(([127, 0, 0, 1], net::free_port()));
    let mut child = serve(work.path(), dns);
    let both = vec![address(0).to_string(), address(1).to_string()];
    let one = vec![address(0).to_string()];
    wait_answer(dns, &both).await;
    let mut samples = Vec::new();
    for _ in 0..rounds {
        sites[1].stop();
        samples.push(wait_answer(dns, &one).await);
        sites[1].start();
        wait_answer(dns, &both).await;
    }
    let _ = child.kill();
    let _ = child.wait();
    samples.sort();
    let floor = INTERVAL * FAILURE_THRESHOLD;
    println!(
        "time from a target's death to its address leaving DNS, {rounds} rounds: p50 {:.2}s, \
         p99 {:.2}s (interval × failure-threshold = {:.0}s; min {:.2}s, max {:.2}s)",
        percentile(&samples, 0.5).as_secs_f64(),
        percentile(&samples, 0.99).as_secs_f64(),
        floor.as_secs_f64(),
        samples[0].as_secs_f64(),
        samples[samples.len() - 1].as_secs_f64(),
    );
}

async fn probe_cpu(targets: usize) {
    let work = tempfile::tempdir().unwrap();
    let port = net::free_port();
    let mut sites: Vec<Site> = (0..targets)
        .map(|i| Site::new(SocketAddr::new(IpAddr::V4(address(i)), port)))
        .collect();
    for site in &mut sites {
        site.start();
    }
    let file = work.path().join("all.yaml");
    std::fs::write(&file, manifests(targets, port, false, false)).unwrap();
    let dns = SocketAddr::from(([127, 0, 0, 1], net::free_port()));
    let mut child = serve(work.path(), dns);
    let last = format!("name-{}.example.com", targets - 1);
    let start = Instant::now();
    while answer(dns, &last).await.is_empty() && start.elapsed() < LIMIT {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let window = Duration::from_secs(30);
    let measure = || async {
        let before = cpu_seconds(child.id());
        tokio::time::sleep(window).await;
        cpu_seconds(child.id()) - before
    };
    let idle = measure().await;
    std::fs::write(&file, manifests(targets, port, false, true)).unwrap();
    // The files source reads the change within a second; the first probes follow.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let probing = measure().await;
    let _ = child.kill();
    let _ = child.wait();
    let minutes = window.as_secs_f64() / 60.0;
    let per_target = (probing - idle).max(0.0) / targets as f64 / minutes;
    println!(
        "probe CPU, {targets} targets probed every {}s: {:.3}s CPU over {}s probing, {:.3}s \
         idle; {:.2} ms CPU per target per minute",
        INTERVAL.as_secs(),
        probing,
        window.as_secs(),
        idle,
        per_target * 1000.0,
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let rounds = args.first().copied().unwrap_or(20).max(1);
    let targets = args.get(1).copied().unwrap_or(100).clamp(1, 250);
    time_to_leave(rounds).await;
    probe_cpu(targets).await;
}
