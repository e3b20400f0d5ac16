//! `gateway-dns serve` on the embedded defaults (files source, embedded DNS, webhook, metrics),
//! as a real process, on generated manifests: N HTTPRoutes with one hostname each over 200
//! Gateways in 20 namespaces, every name published. For each size it waits until the first sync
//! pass is done and a sample of names (and the last one) answer from the embedded DNS, then
//! reads the process's VmHWM (peak) and VmRSS from /proc/PID/status and prints them against the
//! goals (36 MiB at 10,000 routes, 120 MiB at 50,000), with the CPU time it used until then.
//!
//! Then, in this process with a counting allocator, where the memory goes: the manifests'
//! loading peak, the index, the engine's settled outcome, and the sync side (the embedded DNS
//! server's records and a sync pass), per published record (one name: its A RRset and its
//! ownership TXT).
//!
//! Run: `cargo bench --bench serve_memory [-- ROUTES...]` (default 10000 50000). Prints figures;
//! asserts nothing about size or speed. `GATEWAY_DNS_BENCH_BINARY=PATH` spawns another build of
//! the binary (to alternate an old and a new build on a shared machine);
//! `GATEWAY_DNS_BENCH_ONLY=process|heap` runs one half; `GATEWAY_DNS_BENCH_SETTLE_SECONDS=N`
//! (default 2) waits longer before reading the process's figures, e.g. with
//! `GATEWAY_DNS_INTERVAL=2s` (serve's `--interval`) to take resyncs into the peak.

use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gateway_dns::authority::{EmbeddedConfig, EmbeddedDns};
use gateway_dns::dns::Provider;
use gateway_dns::engine::Config;
use gateway_dns::index::Index;
use gateway_dns::metrics::Metrics;
use gateway_dns::source::files;
use gateway_dns::sync::desired::{EngineDesired, inferred_zones};
use gateway_dns::sync::{SyncConfig, Syncer};
use hickory_proto::op::{Message, Query};
use hickory_proto::rr::{Name, RData, RecordType};

#[path = "support/counting.rs"]
mod counting;
use counting::{live, peak, reset_peak};

#[global_allocator]
static ALLOC: counting::Counting = counting::Counting;

const GATEWAYS: usize = 200;
const NAMESPACES: usize = 20;
const LIMIT: Duration = Duration::from_secs(600);
/// Names queried to confirm the embedded DNS answers (the last route's name among them); the
/// server answers 100 queries a second to one source by default.
const SAMPLE: usize = 64;
const MIB: f64 = 1024.0 * 1024.0;

/// Gateway `infra/gw{i}`: one HTTPS listener taking routes from every namespace, one address.
fn gateway_yaml(i: usize) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata:\n  name: gw{i}\n  \
         namespace: infra\nspec:\n  gatewayClassName: bench\n  listeners:\n  - name: https\n    \
         protocol: HTTPS\n    port: 443\n    allowedRoutes:\n      namespaces:\n        from: All\n\
         status:\n  addresses:\n  - type: IPAddress\n    value: {}\n",
        address(i)
    )
}

fn address(gateway: usize) -> String {
    format!("10.{}.{}.1", gateway / 250, gateway % 250)
}

fn namespace(route: usize) -> String {
    format!("team{}", route % NAMESPACES)
}

/// The one hostname of route `i`: below its namespace's domain (so 20 zones are inferred).
fn hostname(route: usize) -> String {
    format!("app{route}.{}.example.com", namespace(route))
}

/// A typical HTTPRoute: one hostname, one parent, one rule, labels.
fn route_yaml(i: usize) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata:\n  name: app{i}\n  \
         namespace: {ns}\n  labels:\n    app.kubernetes.io/name: app{i}\n    \
         app.kubernetes.io/part-of: shop\nspec:\n  parentRefs:\n  - name: gw{gw}\n    \
         namespace: infra\n    sectionName: https\n  hostnames:\n  - {host}\n  rules:\n  - matches:\n    \
         - path:\n        type: PathPrefix\n        value: /\n    backendRefs:\n    - name: app{i}\n      \
         port: 8080\n",
        ns = namespace(i),
        gw = i % GATEWAYS,
        host = hostname(i),
    )
}

/// The manifests, as a GitOps repository would hold them: the Gateways in one file, each
/// namespace's routes in another.
fn write_manifests(dir: &Path, routes: usize) {
    let gateways: Vec<String> = (0..GATEWAYS).map(gateway_yaml).collect();
    std::fs::write(dir.join("gateways.yaml"), gateways.join("---\n")).unwrap();
    for ns in 0..NAMESPACES {
        let documents: Vec<String> = (ns..routes).step_by(NAMESPACES).map(route_yaml).collect();
        std::fs::write(
            dir.join(format!("routes-team{ns}.yaml")),
            documents.join("---\n"),
        )
        .unwrap();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One `/proc/PID/status` field in KiB (or a plain count), 0 when absent.
fn status_field(pid: u32, name: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// CPU time the process has used, user and system, from /proc/PID/stat (in clock ticks of
/// 1/100 s: Linux's USER_HZ on the architectures it runs here).
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command, which is in parentheses and may hold spaces.
    let after_command = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<u64> = after_command
        .split_whitespace()
        .map(|field| field.parse().unwrap_or(0))
        .collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the command.
    let ticks = fields.get(11).unwrap_or(&0) + fields.get(12).unwrap_or(&0);
    Duration::from_millis(ticks * 10)
}

/// `serve` killed on drop.
struct Served {
    child: Child,
    dns: SocketAddr,
    metrics: SocketAddr,
    log: std::path::PathBuf,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Served {
    fn start(work: &Path, manifests: &Path) -> Served {
        let address = |port: u16| SocketAddr::from(([127, 0, 0, 1], port));
        let (webhook, dns, metrics) = (
            address(free_port()),
            address(free_port()),
            address(free_port()),
        );
        let log = work.join("serve.log");
        // The embedded defaults (README, "Quick start"): in-memory certificates (the CA is
        // written under the working directory), zones inferred from the manifests.
        let binary = std::env::var_os("GATEWAY_DNS_BENCH_BINARY")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| env!("CARGO_BIN_EXE_gateway-dns").into());
        let child = Command::new(binary)
            .current_dir(work)
            .arg("serve")
            .arg("--manifests")
            .arg(manifests)
            .args(["--listen", &webhook.to_string()])
            .args(["--dns-listen", &dns.to_string()])
            .args(["--metrics-listen", &metrics.to_string()])
            .env("GATEWAY_DNS_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("gateway-dns serve starts");
        Served {
            child,
            dns,
            metrics,
            log,
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn assert_running(&mut self) {
        if let Ok(Some(status)) = self.child.try_wait() {
            panic!(
                "serve exited ({status}); its log:\n{}",
                std::fs::read_to_string(&self.log).unwrap_or_default()
            );
        }
    }

    /// Whether the metrics say a sync pass has completed.
    fn synced_once(&self) -> bool {
        use std::io::{Read as _, Write as _};
        let Ok(mut stream) = std::net::TcpStream::connect(self.metrics) else {
            return false;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
        if stream
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            .is_err()
        {
            return false;
        }
        let mut text = String::new();
        let _ = stream.read_to_string(&mut text);
        text.lines().any(|line| {
            line.strip_prefix("gateway_dns_last_successful_sync_timestamp_seconds ")
                .and_then(|value| value.parse::<f64>().ok())
                .is_some_and(|at| at > 0.0)
        })
    }
}

/// The A targets the server answers for `name` (empty when it does not, or not in time).
fn ask_a(socket: &UdpSocket, server: SocketAddr, name: &str, id: u16) -> Vec<String> {
    let Ok(name) = Name::from_ascii(format!("{name}.")) else {
        return Vec::new();
    };
    let mut query = Message::query();
    query.metadata.id = id;
    query.add_query(Query::query(name, RecordType::A));
    let Ok(bytes) = query.to_vec() else {
        return Vec::new();
    };
    if socket.send_to(&bytes, server).is_err() {
        return Vec::new();
    }
    let mut reply = [0u8; 1232];
    let deadline = Instant::now() + Duration::from_millis(500);
    while Instant::now() < deadline {
        let Ok((len, _)) = socket.recv_from(&mut reply) else {
            return Vec::new();
        };
        let Ok(answer) = Message::from_vec(&reply[..len]) else {
            continue;
        };
        if answer.metadata.id != id {
            continue;
        }
        return answer
            .answers
            .iter()
            .filter_map(|record| match &record.data {
                RData::A(a) => Some(a.0.to_string()),
                _ => None,
            })
            .collect();
    }
    Vec::new()
}

struct ProcessFigures {
    hwm_kib: u64,
    rss_kib: u64,
    threads: u64,
    converged: Duration,
    cpu: Duration,
}

/// Spawns serve over the manifests and waits until the first pass is done and the sample of
/// names answers with its Gateway's address.
fn measure_process(work: &Path, manifests: &Path, routes: usize) -> ProcessFigures {
    let started = Instant::now();
    let mut served = Served::start(work, manifests);
    while !served.synced_once() {
        served.assert_running();
        assert!(started.elapsed() < LIMIT, "no sync pass within {LIMIT:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let step = (routes / SAMPLE).max(1);
    let sample: Vec<usize> = (0..routes).step_by(step).chain([routes - 1]).collect();
    for (n, route) in sample.iter().enumerate() {
        let expected = vec![address(route % GATEWAYS)];
        let mut id = n as u16;
        while ask_a(&socket, served.dns, &hostname(*route), id) != expected {
            served.assert_running();
            assert!(
                started.elapsed() < LIMIT,
                "{} does not answer {expected:?} within {LIMIT:?}",
                hostname(*route)
            );
            id = id.wrapping_add(SAMPLE as u16 + 1);
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let converged = started.elapsed();
    // Let anything the first pass set off (the findings report, the manifests' poll) settle;
    // longer, with `GATEWAY_DNS_INTERVAL` (serve's `--interval`) short, to take resyncs in.
    let settle = std::env::var("GATEWAY_DNS_BENCH_SETTLE_SECONDS")
        .ok()
        .and_then(|seconds| seconds.parse().ok())
        .unwrap_or(2);
    std::thread::sleep(Duration::from_secs(settle));
    let pid = served.pid();
    ProcessFigures {
        hwm_kib: status_field(pid, "VmHWM"),
        rss_kib: status_field(pid, "VmRSS"),
        threads: status_field(pid, "Threads"),
        converged,
        cpu: cpu_time(pid),
    }
}

/// Heap bytes in this process, from the counting allocator.
struct HeapFigures {
    load_peak: isize,
    index: isize,
    settled: isize,
    records: usize,
    store: isize,
    first_pass_peak: isize,
    resync_peak: isize,
    quiet_resync_peak: isize,
}

/// The same manifests loaded, settled and synced into an embedded DNS server in this process,
/// measuring the heap each step keeps and its peak.
fn measure_heap(runtime: &tokio::runtime::Runtime, manifests: &Path) -> HeapFigures {
    let base = reset_peak();
    // As serve reads them.
    let objects = files::load_objects(&[manifests.to_path_buf()]).unwrap();
    let load_peak = peak() - base;
    let before_index = live();
    let index = Index::with_config(Arc::new(Config::default()));
    index.replace_all(objects);
    let index_bytes = live() - before_index;
    let before_settled = live();
    let outcome = index.settled();
    let settled = live() - before_settled;
    let records = outcome.records.len();
    let zones = inferred_zones(&outcome);
    drop(outcome);

    runtime.block_on(async {
        let mut config = EmbeddedConfig::new(zones.clone());
        config.listen = SocketAddr::from(([127, 0, 0, 1], 0));
        let server: Arc<dyn Provider> = Arc::new(EmbeddedDns::start(config).await.unwrap());
        let syncer = Syncer::new(
            server,
            Arc::new(EngineDesired::new(index.clone())),
            SyncConfig::new("default", zones),
            Arc::new(Metrics::new()),
        );
        let before_pass = reset_peak();
        let report = syncer.sync_pass().await.unwrap();
        assert!(report.plan.blocked.is_empty(), "{:?}", report.plan.blocked);
        drop(report);
        let first_pass_peak = peak() - before_pass;
        let store = live() - before_pass;
        let before_resync = reset_peak();
        let report = syncer.sync_pass().await.unwrap();
        assert!(report.plan.is_empty(), "a resync found changes");
        drop(report);
        let resync_peak = peak() - before_resync;
        // Nothing moved since that pass found DNS in sync: nothing is listed or planned.
        let before_quiet = reset_peak();
        let report = syncer.sync_pass().await.unwrap();
        assert!(report.plan.is_empty(), "a quiet resync found changes");
        drop(report);
        let quiet_resync_peak = peak() - before_quiet;
        HeapFigures {
            quiet_resync_peak,
            load_peak,
            index: index_bytes,
            settled,
            records,
            store,
            first_pass_peak,
            resync_peak,
        }
    })
}

fn mib(bytes: f64) -> f64 {
    bytes / MIB
}

/// The goal for this many routes, in MiB, where one is set.
fn goal_mib(routes: usize) -> Option<f64> {
    match routes {
        10_000 => Some(36.0),
        50_000 => Some(120.0),
        _ => None,
    }
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|_| "unknown".to_owned())
}

fn main() {
    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .filter(|routes| *routes > 0)
        .collect();
    let sizes = if sizes.is_empty() {
        vec![10_000, 50_000]
    } else {
        sizes
    };
    // `process` or `heap`: only that half (the heap figures do not depend on the build's
    // optimisation, so they may come from a quicker build).
    let only = std::env::var("GATEWAY_DNS_BENCH_ONLY").ok();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    println!(
        "gateway-dns serve --manifests DIR on the embedded defaults: HTTPRoutes with one hostname \
         each, {GATEWAYS} Gateways, {NAMESPACES} namespaces (one file each); load average at the \
         start: {}",
        load_average()
    );
    for routes in sizes {
        let work = tempfile::Builder::new()
            .prefix("gateway-dns-serve-memory-")
            .tempdir()
            .unwrap();
        let manifests = work.path().join("manifests");
        std::fs::create_dir(&manifests).unwrap();
        write_manifests(&manifests, routes);
        println!("{routes} routes (load average {})", load_average());
        if only.as_deref() != Some("heap") {
            print_process(&measure_process(work.path(), &manifests, routes), routes);
        }
        if only.as_deref() != Some("process") {
            print_heap(&measure_heap(&runtime, &manifests), routes);
        }
    }
}

fn print_process(process: &ProcessFigures, routes: usize) {
    let hwm = process.hwm_kib as f64 * 1024.0;
    let rss = process.rss_kib as f64 * 1024.0;
    println!(
        "  serve converged in {:.1} s, {} threads; CPU time when read {:.2} s",
        process.converged.as_secs_f64(),
        process.threads,
        process.cpu.as_secs_f64()
    );
    let goal = goal_mib(routes);
    println!(
        "  peak RSS (VmHWM)            {:>8.1} MiB  {:>6.0} B/route{}",
        mib(hwm),
        hwm / routes as f64,
        goal.map(|g| format!("  goal {g:.0} MiB, ratio {:.2}", mib(hwm) / g))
            .unwrap_or_default()
    );
    println!(
        "  RSS after the first pass    {:>8.1} MiB  {:>6.0} B/route",
        mib(rss),
        rss / routes as f64
    );
}

fn print_heap(heap: &HeapFigures, routes: usize) {
    let per_record = |bytes: isize| bytes as f64 / heap.records as f64;
    println!(
        "  heap in-process, per route: manifests' loading peak {:.0} B, index {:.0} B, settled \
         outcome {:.0} B",
        heap.load_peak as f64 / routes as f64,
        heap.index as f64 / routes as f64,
        heap.settled as f64 / routes as f64,
    );
    println!(
        "  sync side per record ({} records): embedded DNS server state {:.0} B (goal 300 B, \
         ratio {:.2}); first pass peak {:.0} B, resync peak {:.0} B (a resync with nothing \
         moved since DNS was in sync: {:.0} B)",
        heap.records,
        per_record(heap.store),
        per_record(heap.store) / 300.0,
        per_record(heap.first_pass_peak),
        per_record(heap.resync_peak),
        per_record(heap.quiet_resync_peak),
    );
}
