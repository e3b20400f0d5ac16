//! gateway-dns and real external-dns side by side, in one run on one machine, each against the
//! same real kube-apiserver and a BIND zone of its own (RFC 2136 + TSIG), one at a time so
//! neither competes with the other for the CPU:
//!
//! - apply → resolvable: from the create of an HTTPRoute (and the test Gateway controller's
//!   `Accepted` status right after it) until BIND answers its name, p50/p99 over N applies
//!   (default 200), one at a time. gateway-dns on its defaults (event-driven); external-dns with
//!   `--events` and its best interval (1s: its loop wakes once a second). The DNS UPDATE
//!   messages those applies took; then a burst of M routes (default 1,000) created at once, 16
//!   requests in flight: the wall time until all are in BIND and the UPDATE messages it took.
//! - at 1k and 10k routes, both with `--interval 30s`: CPU seconds (utime+stime from
//!   /proc/PID/stat) and peak RSS (VmHWM) from spawn until every name is in BIND; then over a
//!   steady window with nothing changing: CPU seconds per minute, requests to kube-apiserver per
//!   minute (from the apiserver's `/metrics`: `apiserver_request_total` has no client label, so
//!   each tool's ServiceAccount gets a FlowSchema of its own and
//!   `apiserver_flowcontrol_dispatched_requests_total` counts its requests), and DNS UPDATE
//!   messages per resync (from BIND's log: one `approved` line per signed UPDATE).
//!
//! Needs `GATEWAY_DNS_CONTROL_PLANE` and `GATEWAY_DNS_PEER`. Run: `cargo bench --bench peer_perf
//! [-- --applies N --burst M --sizes 1000,10000 --window SECS --spawns K --out FILE]`;
//! scripts/benchmarks writes docs/benchmarks.md with it. `GATEWAY_DNS_BENCH_BINARY=PATH` runs another build of
//! gateway-dns (to alternate an old and a new one).

#[path = "support/route_api.rs"]
#[allow(dead_code)]
mod route_api;
#[path = "../tests/support/mod.rs"]
mod support;
#[path = "support/zone_watch.rs"]
mod zone_watch;

use std::fmt::Write as _;
use std::net::{SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use futures::{StreamExt as _, TryStreamExt as _};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use support::bind::{Bind, KEY_NAME};
use support::cluster::{ControlPlane, Serve};
use support::extdns::{self, ExternalDns};
use zone_watch::ZoneWatch;

const NAMESPACES: usize = 20;
const ADDRESS: &str = "203.0.113.10";
const LIMIT: Duration = Duration::from_secs(900);
const STEADY_INTERVAL: &str = "30s";

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Tool {
    GatewayDns,
    ExternalDns,
}

impl Tool {
    fn label(self) -> &'static str {
        match self {
            Tool::GatewayDns => "gateway-dns",
            Tool::ExternalDns => "external-dns",
        }
    }

    /// The FlowSchema that counts this tool's requests.
    fn flow_schema(self) -> String {
        format!("peer-{}", self.label())
    }

    fn service_account(self) -> (&'static str, &'static str) {
        match self {
            Tool::GatewayDns => ("gateway-dns", "gateway-dns"),
            Tool::ExternalDns => (extdns::SERVICE_ACCOUNT, extdns::SERVICE_ACCOUNT),
        }
    }
}

/// One tool's process.
enum Running {
    GatewayDns(Serve),
    ExternalDns(ExternalDns),
}

impl Running {
    fn pid(&self) -> u32 {
        match self {
            Running::GatewayDns(serve) => serve.pid().unwrap(),
            Running::ExternalDns(peer) => peer.pid().unwrap(),
        }
    }

    /// The Unix time of the tool's last completed (converged) pass.
    async fn last_sync(&self) -> Option<f64> {
        match self {
            Running::GatewayDns(serve) => {
                serve
                    .metric("gateway_dns_last_successful_sync_timestamp_seconds")
                    .await
            }
            Running::ExternalDns(peer) => peer.last_sync(),
        }
    }

    fn log_tail(&self) -> String {
        match self {
            Running::GatewayDns(serve) => serve.log_tail(),
            Running::ExternalDns(peer) => peer.log_tail(),
        }
    }
}

struct Bench {
    cluster: ControlPlane,
    client: kube::Client,
    clk_tck: f64,
}

impl Bench {
    async fn start() -> Bench {
        let cluster = ControlPlane::start();
        cluster.install_gateway_dns_rbac();
        extdns::install_rbac(&cluster);
        let mut setup = String::new();
        for name in ["infra", "latency", "burst"] {
            let _ = write!(
                setup,
                "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n---\n"
            );
        }
        for i in 0..NAMESPACES {
            let _ = write!(
                setup,
                "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-{i}\n---\n"
            );
        }
        setup.push_str(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata:\n  name: public\n  \
             namespace: infra\nspec:\n  gatewayClassName: example\n  listeners:\n  - name: https\n    \
             protocol: HTTPS\n    port: 443\n    hostname: \"*.example.com\"\n    allowedRoutes:\n      \
             namespaces:\n        from: All\n---\n",
        );
        // Two FlowSchemas per tool: its Lease requests (leader election), then the rest.
        for tool in [Tool::GatewayDns, Tool::ExternalDns] {
            let (namespace, name) = tool.service_account();
            for (schema, precedence, group, resource) in [
                (
                    tool.flow_schema() + "-leases",
                    400,
                    "coordination.k8s.io",
                    "leases",
                ),
                (tool.flow_schema(), 500, "*", "*"),
            ] {
                let _ = write!(
                    setup,
                    "apiVersion: flowcontrol.apiserver.k8s.io/v1\nkind: FlowSchema\nmetadata:\n  \
                     name: {schema}\nspec:\n  priorityLevelConfiguration:\n    name: workload-low\n  \
                     matchingPrecedence: {precedence}\n  distinguisherMethod:\n    type: ByUser\n  \
                     rules:\n  - subjects:\n    - kind: ServiceAccount\n      serviceAccount:\n        \
                     name: {name}\n        namespace: {namespace}\n    resourceRules:\n    - verbs: \
                     [\"*\"]\n      apiGroups: [\"{group}\"]\n      resources: [\"{resource}\"]\n      \
                     clusterScope: true\n      namespaces: [\"*\"]\n"
                );
                if resource == "*" {
                    setup.push_str(
                        "    nonResourceRules:\n    - verbs: [\"*\"]\n      nonResourceURLs: [\"*\"]\n",
                    );
                }
                setup.push_str("---\n");
            }
        }
        cluster.apply(&setup, &[]).ok();
        cluster.gateway_address("infra/public", &[ADDRESS]);
        let client = cluster.admin_client().await;
        let clk_tck = String::from_utf8(
            std::process::Command::new("getconf")
                .arg("CLK_TCK")
                .output()
                .unwrap()
                .stdout,
        )
        .unwrap()
        .trim()
        .parse()
        .unwrap();
        Bench {
            cluster,
            client,
            clk_tck,
        }
    }

    fn start_tool(&self, tool: Tool, bind: &Bind, interval: Option<&str>) -> Running {
        let (namespace, name) = tool.service_account();
        let kubeconfig = self
            .cluster
            .service_account_kubeconfig(namespace, name, None);
        match tool {
            Tool::GatewayDns => {
                let mut args = bind.serve_args();
                // Its defaults, not the test harness's one-second CRD discovery.
                args.extend(
                    [
                        "--txt-owner-id",
                        "gateway-dns",
                        "--discovery-interval",
                        "60s",
                        // UPDATE messages are counted: the heartbeat's, one a minute, are not
                        // the comparison's (external-dns writes none).
                        "--owner-heartbeat-interval=0",
                    ]
                    .map(String::from),
                );
                if let Some(interval) = interval {
                    args.extend(["--interval", interval].map(String::from));
                }
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                Running::GatewayDns(Serve::start_with_env(
                    &kubeconfig,
                    "bench",
                    &args,
                    &bind.serve_env(),
                ))
            }
            Tool::ExternalDns => {
                let mut config = extdns::Config::gateway_routes("external-dns");
                if let Some(interval) = interval {
                    // Its default: events wait at least 5s after the last run.
                    config.interval = interval.into();
                    config.min_event_sync_interval = "5s".into();
                }
                Running::ExternalDns(ExternalDns::start(&kubeconfig, bind, &config))
            }
        }
    }

    /// CPU seconds the process has used.
    fn cpu_seconds(&self, pid: u32) -> f64 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        // Fields after the command name (which may hold spaces) in parentheses.
        let rest = &stat[stat.rfind(')').unwrap() + 2..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // utime and stime are fields 14 and 15 of the line: 12 and 13 after the name.
        let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
        ticks / self.clk_tck
    }

    async fn apiserver_metrics(&self) -> String {
        let request = hyper::http::Request::get("/metrics")
            .body(Vec::new())
            .unwrap();
        self.client.request_text(request).await.unwrap()
    }

    /// Requests the apiserver dispatched for `tool`'s ServiceAccount so far: (all, Lease).
    async fn requests(&self, tool: Tool) -> (f64, f64) {
        let text = self.apiserver_metrics().await;
        let count = |schema: String| -> f64 {
            let selector = format!("flow_schema=\"{schema}\"");
            text.lines()
                .filter(|line| {
                    line.starts_with("apiserver_flowcontrol_dispatched_requests_total{")
                        && line.contains(&selector)
                })
                .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
                .sum()
        };
        let leases = count(tool.flow_schema() + "-leases");
        (count(tool.flow_schema()) + leases, leases)
    }
}

fn http_route(namespace: &str, name: &str, hostname: &str) -> Value {
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"namespace": namespace, "name": name},
        "spec": {
            "parentRefs": [{"name": "public", "namespace": "infra"}],
            "hostnames": [hostname],
            "rules": [{"backendRefs": [{"name": name, "port": 8080}]}],
        },
    })
}

/// Creates the route, then writes the `Accepted` status a Gateway controller would.
async fn create_accepted(client: &kube::Client, route: Value) {
    let namespace = route["metadata"]["namespace"].as_str().unwrap().to_string();
    let name = route["metadata"]["name"].as_str().unwrap().to_string();
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &namespace, &route_api::routes_resource());
    let object: DynamicObject = serde_json::from_value(route).unwrap();
    let created = api.create(&PostParams::default(), &object).await.unwrap();
    let status = extdns::accepted_route_status(&serde_json::to_value(&created).unwrap());
    api.patch_status(&name, &PatchParams::default(), &Patch::Merge(status))
        .await
        .unwrap();
}

/// Creates routes `from..to` across the team namespaces, 16 requests in flight.
async fn create_routes(client: &kube::Client, from: usize, to: usize) {
    futures::stream::iter(from..to)
        .map(|i| {
            let route = http_route(
                &format!("team-{}", i % NAMESPACES),
                &format!("app-{i}"),
                &format!("app-{i}.example.com"),
            );
            async move {
                create_accepted(client, route).await;
                Ok::<(), ()>(())
            }
        })
        .buffer_unordered(16)
        .try_collect::<Vec<()>>()
        .await
        .unwrap();
}

/// Whether `server` answers `name` with at least one A record (a hand-made query: the poll
/// runs every few milliseconds, a `dig` process each time would dominate).
fn resolves(socket: &UdpSocket, server: SocketAddr, name: &str, id: u16) -> bool {
    let mut query = Vec::with_capacity(64);
    query.extend_from_slice(&id.to_be_bytes());
    query.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in name.split('.') {
        query.push(label.len() as u8);
        query.extend_from_slice(label.as_bytes());
    }
    query.extend_from_slice(&[0, 0, 1, 0, 1]);
    if socket.send_to(&query, server).is_err() {
        return false;
    }
    let mut reply = [0u8; 512];
    let deadline = Instant::now() + Duration::from_millis(500);
    while Instant::now() < deadline {
        let Ok((len, _)) = socket.recv_from(&mut reply) else {
            return false;
        };
        if len >= 12 && reply[..2] == id.to_be_bytes() {
            let rcode = reply[3] & 0x0f;
            let answers = u16::from_be_bytes([reply[6], reply[7]]);
            return rcode == 0 && answers > 0;
        }
    }
    false
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

struct Latency {
    p50: Duration,
    p99: Duration,
    max: Duration,
    /// UPDATE messages the single applies took.
    updates: usize,
    /// The burst: wall time from its first create until all its names are in DNS, and the
    /// UPDATE messages until then.
    burst: Duration,
    burst_updates: usize,
}

/// Creates `count` routes in namespace `burst` at once (16 requests in flight) and waits until
/// BIND holds every name: the wall time and the UPDATE messages it took. The routes are deleted
/// after, so that the other tool and the scale runs do not see them.
async fn burst(
    bench: &Bench,
    tool: Tool,
    bind: &Bind,
    running: &Running,
    count: usize,
) -> (Duration, usize) {
    if count == 0 {
        return (Duration::ZERO, 0);
    }
    let before = updates(bind);
    let label = tool.label();
    let names: Vec<String> = (0..count)
        .map(|i| format!("burst-{label}-{i}.example.com"))
        .collect();
    let mut watch = ZoneWatch::new(bind.addr(), "example.com", bind.tsig_key(), &names);
    let started = Instant::now();
    futures::stream::iter(0..count)
        .map(|i| {
            let name = format!("burst-{label}-{i}");
            let route = http_route("burst", &name, &format!("{name}.example.com"));
            async move {
                create_accepted(&bench.client, route).await;
                Ok::<(), ()>(())
            }
        })
        .buffer_unordered(16)
        .try_collect::<Vec<()>>()
        .await
        .unwrap();
    let Some(wall) = watch
        .wait_all(started, Duration::from_millis(5), LIMIT)
        .await
    else {
        panic!(
            "{label} published {} of the burst's {count} names; log:\n{}",
            count - watch.missing(),
            running.log_tail()
        );
    };
    // The ownership records of the last names may still be on their way.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let burst_updates = updates(bind) - before;
    let api: Api<DynamicObject> =
        Api::namespaced_with(bench.client.clone(), "burst", &route_api::routes_resource());
    api.delete_collection(&Default::default(), &Default::default())
        .await
        .unwrap();
    (wall, burst_updates)
}

async fn latency(bench: &Bench, tool: Tool, applies: usize, burst_size: usize) -> Latency {
    let bind = Bind::start("example.com", "");
    let running = bench.start_tool(tool, &bind, None);
    wait_first_sync(&running).await;
    // Let the first pass's follow-ups end before counting UPDATEs.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let updates_before = updates(&bind);
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut samples = Vec::with_capacity(applies);
    let mut id: u16 = 0;
    for i in 0..applies {
        let name = latency_name(tool, i);
        let hostname = format!("{name}.example.com");
        let started = Instant::now();
        create_accepted(&bench.client, http_route("latency", &name, &hostname)).await;
        loop {
            id = id.wrapping_add(1);
            if resolves(&socket, bind.addr(), &hostname, id) {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "{hostname} not resolvable after 60s; {}'s log ends with:\n{}",
                tool.label(),
                running.log_tail()
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        samples.push(started.elapsed());
        // The next apply at a random point of the tool's cycle: back-to-back applies would
        // each start just after a periodic run has ended, always waiting a full period.
        tokio::time::sleep(Duration::from_millis(fastrand::u64(0..1000))).await;
    }
    let single_updates = updates(&bind) - updates_before;
    let (burst, burst_updates) = burst(bench, tool, &bind, &running, burst_size).await;
    samples.sort();
    Latency {
        p50: percentile(&samples, 50.0),
        p99: percentile(&samples, 99.0),
        max: *samples.last().unwrap(),
        updates: single_updates,
        burst,
        burst_updates,
    }
}

/// The route (and first label of the hostname) of a tool's `i`th apply.
fn latency_name(tool: Tool, i: usize) -> String {
    format!("lat-{}-{i}", tool.label())
}

async fn wait_first_sync(running: &Running) {
    if let Running::GatewayDns(serve) = running {
        // Its metrics listener is up once it is ready.
        serve.wait_ready(LIMIT).await;
    }
    let started = Instant::now();
    while running.last_sync().await.is_none_or(|at| at <= 0.0) {
        assert!(
            started.elapsed() < LIMIT,
            "no sync pass completed; log:\n{}",
            running.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// UPDATE messages BIND approved so far (each signed UPDATE logs one `approved` line).
fn updates(bind: &Bind) -> usize {
    let signer = format!("signer \"{KEY_NAME}\" approved");
    std::fs::read_to_string(bind.log_path())
        .unwrap_or_default()
        .lines()
        .filter(|line| line.contains(&signer))
        .count()
}

/// Where gateway-dns's time from spawn to every name in DNS went, from its log: the seconds
/// after spawn of each milestone (the first occurrence of each message).
fn spawn_breakdown(log: &str, spawned: f64, converged: f64) -> String {
    let milestones = [
        ("process logging", None),
        ("Lease held", Some("became the leader")),
        (
            "every kind listed (source ready)",
            Some("first sync complete for every served kind"),
        ),
        ("first plan made", Some("DNS create")),
        ("first write done", Some("DNS changes applied")),
    ];
    let mut seen: Vec<Option<f64>> = vec![None; milestones.len()];
    for line in log.lines() {
        let Ok(entry) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let Some(at) = entry["timestamp"]
            .as_str()
            .and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok())
        else {
            continue;
        };
        let at = at.as_millisecond() as f64 / 1e3 - spawned;
        let message = entry["fields"]["message"].as_str().unwrap_or_default();
        for (slot, (_, wanted)) in seen.iter_mut().zip(&milestones) {
            if slot.is_none() && wanted.is_none_or(|w| message == w) {
                *slot = Some(at);
            }
        }
    }
    let mut parts: Vec<String> = milestones
        .iter()
        .zip(&seen)
        .map(|((label, _), at)| match at {
            Some(at) => format!("{label} {at:.2} s"),
            None => format!("{label} —"),
        })
        .collect();
    parts.push(format!("every name seen in BIND {converged:.2} s"));
    parts.join(", ")
}

struct Scale {
    breakdown: Option<String>,
    /// The median wall time, and each spawn's in order.
    converge: f64,
    walls: Vec<f64>,
    converge_cpu: f64,
    first_pass_updates: usize,
    peak_rss_mib: f64,
    steady_cpu_per_minute: f64,
    requests_per_minute: f64,
    lease_requests_per_minute: f64,
    resyncs: usize,
    updates_per_resync: Option<f64>,
}

/// One spawn of a tool with every route in the cluster and an empty zone of its own, until
/// every name is in DNS.
struct Spawn {
    converge: Duration,
    cpu: f64,
    peak_rss_mib: f64,
    /// The spawn's time (Unix seconds).
    unix: f64,
}

async fn spawn(bench: &Bench, tool: Tool, hostnames: &[String]) -> (Spawn, Running, Bind) {
    let bind = Bind::start("example.com", "");
    // Every route's name in the zone, to within the watch's poll of 5 ms.
    let mut watch = ZoneWatch::new(bind.addr(), "example.com", bind.tsig_key(), hostnames);
    let running = bench.start_tool(tool, &bind, Some(STEADY_INTERVAL));
    // From the process's spawn: what the harness does before it (gateway-dns's test
    // certificates, which a cluster gets from a Secret) is not the tool's time.
    let started = Instant::now();
    let unix = extdns::unix_now();
    let Some(converge) = watch
        .wait_all(started, Duration::from_millis(5), LIMIT)
        .await
    else {
        panic!(
            "{}: {} of {} names missing; log:\n{}",
            tool.label(),
            watch.missing(),
            hostnames.len(),
            running.log_tail()
        );
    };
    let pid = running.pid();
    let spawn = Spawn {
        converge,
        cpu: bench.cpu_seconds(pid),
        peak_rss_mib: peak_rss_kib(pid) as f64 / 1024.0,
        unix,
    };
    (spawn, running, bind)
}

/// The middle value (the upper one of an even count).
fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// A spawn (see [`spawn`]) and a steady window after it; `earlier` are spawns of the same tool
/// made before, each stopped once its names were in: the spawn figures are the median of all.
async fn scale(
    bench: &Bench,
    tool: Tool,
    hostnames: &[String],
    window: Duration,
    earlier: Vec<Spawn>,
) -> Scale {
    let (latest, running, bind) = spawn(bench, tool, hostnames).await;
    let (converge, spawn_unix) = (latest.converge, latest.unix);
    let started = Instant::now();
    let pid = running.pid();
    let mut spawns = earlier;
    spawns.push(latest);
    let walls: Vec<f64> = spawns.iter().map(|s| s.converge.as_secs_f64()).collect();
    let converge_cpu = median(spawns.iter().map(|s| s.cpu).collect());
    let peak_rss_mib = median(spawns.iter().map(|s| s.peak_rss_mib).collect());
    // The names resolve before the last UPDATEs of the first pass (ownership records) are in:
    // count them once that pass has completed.
    while running.last_sync().await.is_none_or(|at| at < spawn_unix) {
        assert!(
            started.elapsed() < LIMIT,
            "{}: the first pass does not complete; log:\n{}",
            tool.label(),
            running.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let first_pass_updates = updates(&bind);
    let breakdown = match &running {
        Running::GatewayDns(serve) => Some(spawn_breakdown(
            &serve.log(),
            spawn_unix,
            converge.as_secs_f64(),
        )),
        Running::ExternalDns(_) => None,
    };

    // Steady state: let the initial pass and its follow-ups finish, then watch a window in
    // which nothing changes.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (cpu_before, requests_before, updates_before) = (
        bench.cpu_seconds(pid),
        bench.requests(tool).await,
        updates(&bind),
    );
    let window_start = Instant::now();
    let mut last = running.last_sync().await;
    let mut resyncs = 0;
    while window_start.elapsed() < window {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = running.last_sync().await;
        if now != last {
            resyncs += 1;
            last = now;
        }
    }
    let minutes = window_start.elapsed().as_secs_f64() / 60.0;
    let steady_cpu_per_minute = (bench.cpu_seconds(pid) - cpu_before) / minutes;
    let requests_after = bench.requests(tool).await;
    let requests_per_minute = (requests_after.0 - requests_before.0) / minutes;
    let lease_requests_per_minute = (requests_after.1 - requests_before.1) / minutes;
    let window_updates = updates(&bind) - updates_before;
    drop(running);
    Scale {
        breakdown,
        converge: median(walls.clone()),
        walls,
        converge_cpu,
        first_pass_updates,
        peak_rss_mib,
        steady_cpu_per_minute,
        requests_per_minute,
        lease_requests_per_minute,
        resyncs,
        updates_per_resync: (resyncs > 0).then(|| window_updates as f64 / resyncs as f64),
    }
}

fn peak_rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

struct Options {
    applies: usize,
    burst: usize,
    sizes: Vec<usize>,
    window: Duration,
    /// Spawns of each tool per size (the spawn figures are their median).
    spawns: usize,
    out: Option<PathBuf>,
}

fn options() -> Options {
    let mut options = Options {
        applies: 200,
        burst: 1_000,
        sizes: vec![1_000, 10_000],
        window: Duration::from_secs(60),
        spawns: 5,
        out: None,
    };
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    while let Some(arg) = args.next() {
        let mut value = || args.next().unwrap_or_else(|| panic!("{arg} needs a value"));
        match arg.as_str() {
            "--applies" => options.applies = value().parse().unwrap(),
            "--burst" => options.burst = value().parse().unwrap(),
            "--sizes" => {
                options.sizes = value().split(',').map(|s| s.parse().unwrap()).collect();
            }
            "--window" => options.window = Duration::from_secs(value().parse().unwrap()),
            "--spawns" => options.spawns = value().parse::<usize>().unwrap().max(1),
            "--out" => options.out = Some(PathBuf::from(value())),
            other => panic!("unknown argument {other}"),
        }
    }
    options
}

fn ratio(ours: f64, theirs: f64) -> String {
    if theirs == 0.0 {
        if ours == 0.0 {
            "— (both 0)".into()
        } else {
            "— (external-dns 0)".into()
        }
    } else {
        format!("{:.2}", ours / theirs)
    }
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .find_map(|line| line.strip_prefix("model name")?.split(':').nth(1))
        .unwrap_or("unknown CPU")
        .trim()
        .to_string();
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    let memory = std::fs::read_to_string("/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .find_map(|line| line.strip_prefix("MemTotal:"))
        .and_then(|rest| rest.split_whitespace().next()?.parse::<u64>().ok())
        .unwrap_or(0);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    format!(
        "{cores} cores ({cpu}), {:.0} GiB memory; load average at the start: {}",
        memory as f64 / 1024.0 / 1024.0,
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    )
}

fn main() {
    let options = options();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let machine = machine();
    let mut rows: Vec<(String, String, String, String)> = Vec::new();
    let mut row = |figure: String, ours: f64, theirs: f64, unit: &str, digits: usize| {
        rows.push((
            figure,
            format!("{ours:.digits$} {unit}"),
            format!("{theirs:.digits$} {unit}"),
            ratio(ours, theirs),
        ));
    };
    let mut notes = Vec::new();
    runtime.block_on(async {
        let bench = Bench::start().await;
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        eprintln!("apply → resolvable, {} applies each …", options.applies);
        let ours = latency(&bench, Tool::GatewayDns, options.applies, options.burst).await;
        let theirs = latency(&bench, Tool::ExternalDns, options.applies, options.burst).await;
        let n = options.applies;
        row(
            format!("apply → resolvable, p50 ({n} applies)"),
            ms(ours.p50),
            ms(theirs.p50),
            "ms",
            0,
        );
        row(
            format!("apply → resolvable, p99 ({n} applies)"),
            ms(ours.p99),
            ms(theirs.p99),
            "ms",
            0,
        );
        row(
            format!("apply → resolvable: DNS UPDATE messages for the {n} applies"),
            ours.updates as f64,
            theirs.updates as f64,
            "",
            0,
        );
        if options.burst > 0 {
            let b = options.burst;
            row(
                format!("burst of {b} applies: wall time until all names are in DNS"),
                ours.burst.as_secs_f64(),
                theirs.burst.as_secs_f64(),
                "s",
                1,
            );
            row(
                format!("burst of {b} applies: DNS UPDATE messages"),
                ours.burst_updates as f64,
                theirs.burst_updates as f64,
                "",
                0,
            );
        }
        notes.push(format!(
            "Slowest apply: gateway-dns {:.0} ms, external-dns {:.0} ms.",
            ms(ours.max),
            ms(theirs.max)
        ));

        let mut created = 0;
        for &size in &options.sizes {
            eprintln!("{size} routes …");
            create_routes(&bench.client, created, size).await;
            created = size;
            // The latency routes are in the cluster too; every tool publishes them as well.
            let hostnames: Vec<String> = (0..size)
                .map(|i| format!("app-{i}"))
                .chain((0..options.applies).flat_map(|i| {
                    [Tool::GatewayDns, Tool::ExternalDns].map(|tool| latency_name(tool, i))
                }))
                .map(|name| format!("{name}.example.com"))
                .collect();
            // Spawns alternated between the tools, each but the last stopped at once: a
            // spawn's wall time moves with the machine more than the tools differ.
            let (mut ours_earlier, mut theirs_earlier) = (Vec::new(), Vec::new());
            for _ in 1..options.spawns {
                ours_earlier.push(spawn(&bench, Tool::GatewayDns, &hostnames).await.0);
                theirs_earlier.push(spawn(&bench, Tool::ExternalDns, &hostnames).await.0);
            }
            let ours = scale(
                &bench,
                Tool::GatewayDns,
                &hostnames,
                options.window,
                ours_earlier,
            )
            .await;
            let theirs = scale(
                &bench,
                Tool::ExternalDns,
                &hostnames,
                options.window,
                theirs_earlier,
            )
            .await;
            let label = format!("{size} routes");
            let spawns = options.spawns;
            let walls = |walls: &[f64]| {
                walls
                    .iter()
                    .map(|w| format!("{w:.2}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            notes.push(format!(
                "{label}: wall time of each spawn, spawn → all names in DNS (s): gateway-dns {}; \
                 external-dns {}.",
                walls(&ours.walls),
                walls(&theirs.walls)
            ));
            row(
                format!("{label}: CPU seconds, spawn → all names in DNS (median of {spawns})"),
                ours.converge_cpu,
                theirs.converge_cpu,
                "s",
                2,
            );
            row(
                format!("{label}: wall time, spawn → all names in DNS (median of {spawns})"),
                ours.converge,
                theirs.converge,
                "s",
                2,
            );
            row(
                format!("{label}: DNS UPDATE messages in the first pass (every name created)"),
                ours.first_pass_updates as f64,
                theirs.first_pass_updates as f64,
                "",
                0,
            );
            row(
                format!("{label}: peak RSS (VmHWM, median of {spawns})"),
                ours.peak_rss_mib,
                theirs.peak_rss_mib,
                "MiB",
                1,
            );
            row(
                format!("{label}: CPU seconds per minute, steady state"),
                ours.steady_cpu_per_minute,
                theirs.steady_cpu_per_minute,
                "s",
                2,
            );
            row(
                format!("{label}: kube-apiserver requests per minute, steady state"),
                ours.requests_per_minute,
                theirs.requests_per_minute,
                "",
                1,
            );
            row(
                format!("{label}: … of them for its Lease (leader election)"),
                ours.lease_requests_per_minute,
                theirs.lease_requests_per_minute,
                "",
                1,
            );
            match (ours.updates_per_resync, theirs.updates_per_resync) {
                (Some(o), Some(t)) => row(
                    format!("{label}: DNS UPDATE messages per no-change resync"),
                    o,
                    t,
                    "",
                    1,
                ),
                _ => notes.push(format!(
                    "{label}: a resync did not complete in the window (gateway-dns {}, \
                     external-dns {}): no UPDATE-per-resync figure.",
                    ours.resyncs, theirs.resyncs
                )),
            }
            notes.push(format!(
                "{label}: resyncs in the steady window: gateway-dns {}, external-dns {}.",
                ours.resyncs, theirs.resyncs
            ));
            if let Some(breakdown) = &ours.breakdown {
                notes.push(format!(
                    "{label}: gateway-dns from its last spawn (its log): {breakdown}."
                ));
            }
        }
    });

    let mut document = String::new();
    let _ = writeln!(
        document,
        "## gateway-dns beside external-dns\n\n\
         One run, one machine: {machine}. Both against the same real kube-apiserver (v1.37, \
         built from the Kubernetes Go modules) as least-privilege ServiceAccounts, each writing \
         its own real BIND zone through RFC 2136 with TSIG, one at a time. external-dns {version} \
         is built from its Go module (`--source=gateway-httproute --source=gateway-grpcroute \
         --source=gateway-tlsroute --provider=rfc2136 --rfc2136-axfr --registry=txt --events`). \
         Ratio = gateway-dns / external-dns (below 1: gateway-dns uses less or is faster).\n",
        version = extdns::version()
    );
    let _ = writeln!(
        document,
        "| figure | gateway-dns | external-dns | ratio |\n|---|---|---|---|"
    );
    for (figure, ours, theirs, ratio) in &rows {
        let _ = writeln!(
            document,
            "| {figure} | {} | {} | {ratio} |",
            ours.trim(),
            theirs.trim()
        );
    }
    let _ = writeln!(
        document,
        "\n{}\n\n### How each figure is measured\n\n\
         - **apply → resolvable**: the benchmark creates an HTTPRoute with a new hostname through \
           the API, writes the `Accepted` route status a Gateway controller would (external-dns \
           publishes nothing before it; gateway-dns does not need it), and polls the tool's \
           BIND every 5 ms until the name has an A record. One apply at a time; p50/p99 over \
           all. gateway-dns on its defaults (event-driven sync); external-dns with `--events`, \
           `--interval=1s` and `--min-event-sync-interval=1s`, its fastest setting (its loop \
           checks once a second whether to run). UPDATE messages: `signer … approved` lines in \
           BIND's log over the applies.\n\
         - **burst**: the routes created at once (16 requests in flight, each with its status), \
           from the first create until BIND's zone holds every name (watched as below); \
           UPDATE messages until then plus 2 s. They are deleted after.\n\
         - **spawn → all names in DNS**: routes (one hostname each, 20 namespaces, all accepted) \
           exist before the tool starts; wall time from the process's spawn until the tool's \
           BIND serves every name (its SOA serial asked every 5 ms, each new serial's records \
           read by IXFR: no query per name, whatever order the tool writes in); CPU is \
           utime+stime from /proc/PID/stat then; each figure is the median of {spawns} spawns \
           per tool, alternated between the tools (the wall time of each is in the notes); \
           peak RSS is VmHWM then; UPDATE messages (counted as below) once the tool reports \
           its first pass complete.\n\
         - **steady state**: both with `--interval={STEADY_INTERVAL}`, nothing changing, over a \
           {window}-second window starting 5 s after convergence. Requests per minute come from \
           the apiserver's `/metrics`: `apiserver_request_total` has no client label, so each \
           tool's ServiceAccount has a FlowSchema of its own and \
           `apiserver_flowcontrol_dispatched_requests_total{{flow_schema=…}}` counts its \
           requests (a watch counts once, when it starts); a second FlowSchema of higher \
           precedence counts its Lease requests apart (gateway-dns elects a leader by default, \
           external-dns has no leader election). UPDATE messages per resync: `signer … approved` lines in BIND's log (one per signed UPDATE) \
           divided by the passes completed in the window (each tool's last-sync metric).\n\n\
         Regenerate with `scripts/benchmarks` (builds the control plane and external-dns if \
         needed). Figures vary with the machine and its load; compare ratios, not absolutes.",
        notes
            .iter()
            .map(|n| format!("- {n}"))
            .collect::<Vec<_>>()
            .join("\n"),
        window = options.window.as_secs(),
        spawns = options.spawns,
    );
    print!("{document}");
    if let Some(path) = options.out {
        support::docs::write_generated_section(
            &path,
            "peer_perf",
            "scripts/benchmarks (`cargo bench --bench peer_perf`)",
            &document,
        );
        eprintln!("wrote the peer_perf section of {}", path.display());
    }
}
