//! Serving one zone of 10 000 A records, 500 CNAMEs and a wildcard over loopback UDP, in one
//! run, from three servers loaded in turn by `dnsperf` (Debian package dnsperf):
//!
//! - gateway-dns's embedded server (`EmbeddedDns`, the zone written through its `Provider`
//!   side as the sync loop writes it), on its own Tokio runtime of 2 worker threads;
//! - BIND 9 (`named -n 2`, the Debian package bind9) with the same records in its zone file;
//! - hickory-server's in-memory authority (`InMemoryZoneHandler` behind a `Catalog`), on its own
//!   Tokio runtime of 2 worker threads.
//!
//! All three get 2 threads: `-n 2` is how tests/support starts BIND, and the machine the
//! figures in docs/benchmarks.md come from has 2 cores, which `dnsperf` shares.
//!
//! The query mix (10 000 lines, cycled): 60 % existing names, 10 % CNAMEs to chase, 15 % missing
//! names (NXDOMAIN), 5 % existing names with a missing type (NODATA), 10 % wildcard matches.
//! Then, each round, the embedded server and BIND (alternating) under a random-subdomain flood:
//! every query a name never asked before (half missing, half under the wildcard), so the
//! embedded server's answer cache never hits.
//! Before loading, each server's answers to one query of each kind are compared with BIND's.
//! Rounds alternate the servers (the order rotates each round); each load is
//! `dnsperf -l SECONDS -c 4 -q 100 -v`: queries/s and the average latency from dnsperf's
//! summary, p50/p99 from its per-query lines (`-v`), and the server's CPU time during the load.
//!
//! `cargo bench --bench dns_serve` (DNS_SERVE_ROUNDS=3, DNS_SERVE_SECONDS=10 change the rounds
//! and each load's length). Prints figures and ratios; asserts only that the work was done.

#[path = "../tests/support/mod.rs"]
mod support;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gateway_dns::authority::{EmbeddedConfig, EmbeddedDns};
use gateway_dns::dns::{Changes, Endpoint, Provider};
use gateway_dns::model::RecordType;
use hickory_proto::op::{Message, Query, ResponseCode};
use hickory_proto::rr::rdata::{A, CNAME, NS, SOA};
use hickory_proto::rr::{Name, RData, Record, RecordType as WireType};
use hickory_server::Server;
use hickory_server::net::runtime::TokioRuntimeProvider;
use hickory_server::store::in_memory::InMemoryZoneHandler;
use hickory_server::zone_handler::{AxfrPolicy, Catalog, ZoneHandler, ZoneType};
use support::bind::Bind;
use support::net::require_binary;

const ZONE: &str = "example.com";
const A_RECORDS: usize = 10_000;
const CNAMES: usize = 500;
const QUERY_LINES: usize = 10_000;
const SERVER_THREADS: usize = 2;
const TTL: u32 = 300;
/// Concurrent dnsperf clients (each its own socket) and queries in flight.
const CLIENTS: usize = 4;
const IN_FLIGHT: usize = 100;

fn address(i: usize) -> String {
    format!("10.{}.{}.{}", (i >> 16) & 255, (i >> 8) & 255, i & 255)
}

/// The zone's content, as the sync loop would hand it to the embedded server.
fn endpoints() -> Vec<Endpoint> {
    let mut records: Vec<Endpoint> = (0..A_RECORDS)
        .map(|i| Endpoint::new(&format!("r{i}.{ZONE}"), RecordType::A, [address(i)]))
        .collect();
    records.extend((0..CNAMES).map(|i| {
        Endpoint::new(
            &format!("c{i}.{ZONE}"),
            RecordType::CNAME,
            [format!("r{i}.{ZONE}")],
        )
    }));
    records.push(Endpoint::new(
        &format!("*.wild.{ZONE}"),
        RecordType::A,
        ["192.0.2.9"],
    ));
    // BIND's zone in tests/support names ns1 with this address; the others get it too.
    records.push(Endpoint::new(
        &format!("ns1.{ZONE}"),
        RecordType::A,
        ["127.0.0.1"],
    ));
    records
}

/// The same records as zone-file lines for BIND (SOA, NS and ns1 come from tests/support).
fn zone_file_lines() -> String {
    let mut lines = String::new();
    for i in 0..A_RECORDS {
        let _ = writeln!(lines, "r{i} IN A {}", address(i));
    }
    for i in 0..CNAMES {
        let _ = writeln!(lines, "c{i} IN CNAME r{i}");
    }
    lines.push_str("*.wild IN A 192.0.2.9\n");
    lines
}

/// The query kinds of the mix, with one sample each for the answer comparison.
const SAMPLES: [(&str, &str, &str); 5] = [
    ("existing", "r42", "A"),
    ("cname", "c42", "A"),
    ("missing", "nx42", "A"),
    ("nodata", "r42", "AAAA"),
    ("wildcard", "w42.wild", "A"),
];

fn query_file(path: &Path) {
    let mut rng = fastrand::Rng::with_seed(53);
    let mut lines = String::new();
    for _ in 0..QUERY_LINES {
        let line = match rng.u32(0..100) {
            0..60 => format!("r{}.{ZONE} A", rng.usize(0..A_RECORDS)),
            60..70 => format!("c{}.{ZONE} A", rng.usize(0..CNAMES)),
            70..85 => format!("nx{}.{ZONE} A", rng.usize(0..A_RECORDS)),
            85..90 => format!("r{}.{ZONE} AAAA", rng.usize(0..A_RECORDS)),
            _ => format!("w{}.wild.{ZONE} A", rng.usize(0..A_RECORDS)),
        };
        lines.push_str(&line);
        lines.push('\n');
    }
    std::fs::write(path, lines).expect("write the query file");
}

/// Queries per second the unique-name file is sized for (dnsperf starts the file again past
/// its end; names must not repeat within one load).
const UNIQUE_QPS_BOUND: u64 = 250_000;

/// A random-subdomain flood: every query a name never asked before, half missing (NXDOMAIN),
/// half under the wildcard. No answer can come from a cache of earlier answers.
fn unique_query_file(path: &Path, seconds: u64) {
    let mut lines = String::new();
    for i in 0..seconds * UNIQUE_QPS_BOUND {
        let line = if i % 2 == 0 {
            format!("u{i}.{ZONE} A\n")
        } else {
            format!("u{i}.wild.{ZONE} A\n")
        };
        lines.push_str(&line);
    }
    std::fs::write(path, lines).expect("write the unique query file");
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(SERVER_THREADS)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// gateway-dns's embedded server with the zone written through its provider side.
fn start_embedded(runtime: &tokio::runtime::Runtime) -> Arc<EmbeddedDns> {
    runtime.block_on(async {
        let mut config = EmbeddedConfig::new(vec![ZONE.into()]);
        config.listen = "127.0.0.1:0".parse().expect("loopback");
        config.soa_ttl = TTL;
        // One source sends every query here; BIND and hickory-server have no such limit.
        config.udp_answers_per_source_per_second = 0;
        let server = EmbeddedDns::start(config).await.expect("embedded server");
        let changes = Changes {
            create: endpoints(),
            ..Changes::default()
        };
        server.apply(&changes).await.expect("write the zone");
        Arc::new(server)
    })
}

fn wire_name(name: &str) -> Name {
    Name::from_str(&format!("{name}.")).expect("a valid name")
}

/// hickory-server's in-memory authority with the same records, SOA and NS as BIND's zone.
fn start_hickory(runtime: &tokio::runtime::Runtime) -> (Server<Catalog>, SocketAddr) {
    let apex = wire_name(ZONE);
    let mut zone = InMemoryZoneHandler::<TokioRuntimeProvider>::empty(
        apex.clone(),
        ZoneType::Primary,
        AxfrPolicy::Deny,
    );
    let serial = 1;
    let soa = SOA::new(
        wire_name(&format!("ns1.{ZONE}")),
        wire_name(&format!("hostmaster.{ZONE}")),
        serial,
        3600,
        600,
        86400,
        60,
    );
    let mut records = vec![
        Record::from_rdata(apex.clone(), TTL, RData::SOA(soa)),
        Record::from_rdata(
            apex.clone(),
            TTL,
            RData::NS(NS(wire_name(&format!("ns1.{ZONE}")))),
        ),
    ];
    for endpoint in endpoints() {
        let owner = wire_name(&endpoint.dns_name);
        for target in &endpoint.targets {
            let data = match endpoint.record_type {
                RecordType::A => RData::A(A::from_str(target).expect("an IPv4 address")),
                RecordType::CNAME => RData::CNAME(CNAME(wire_name(target))),
                other => panic!("no {other} records in this zone"),
            };
            records.push(Record::from_rdata(owner.clone(), TTL, data));
        }
    }
    for record in records {
        assert!(
            zone.upsert_mut(record, serial),
            "hickory-server took a record"
        );
    }
    let mut catalog = Catalog::new();
    let handler: Arc<dyn ZoneHandler> = Arc::new(zone);
    catalog.upsert(apex.into(), vec![handler]);
    runtime.block_on(async {
        let socket = tokio::net::UdpSocket::bind("127.0.0.1:0")
            .await
            .expect("udp socket");
        let addr = socket.local_addr().expect("local address");
        let mut server = Server::new(catalog);
        server.register_socket(socket);
        (server, addr)
    })
}

/// One UDP exchange: (rcode, answer types, authority types).
fn ask(server: SocketAddr, name: &str, qtype: &str) -> (ResponseCode, Vec<String>, Vec<String>) {
    let socket = UdpSocket::bind("127.0.0.1:0").expect("udp socket");
    socket
        .set_read_timeout(Some(Duration::from_secs(2)))
        .expect("timeout");
    let mut query = Message::query();
    // As dnsperf sends them: BIND then leaves its NS out of the authority section.
    query.metadata.recursion_desired = true;
    let qtype = WireType::from_str(qtype).expect("a record type");
    query.add_query(Query::query(wire_name(name), qtype));
    let bytes = query.to_vec().expect("encode");
    socket.send_to(&bytes, server).expect("send");
    let mut buffer = [0u8; 4096];
    let (len, _) = socket.recv_from(&mut buffer).expect("an answer");
    let answer = Message::from_vec(&buffer[..len]).expect("decode");
    let types = |records: &[Record]| {
        records
            .iter()
            .map(|r| format!("{} {}", r.name, r.record_type()))
            .collect()
    };
    (
        answer.metadata.response_code,
        types(&answer.answers),
        types(&answer.authorities),
    )
}

/// One dnsperf load's figures.
#[derive(Debug, Clone, Default)]
struct Load {
    qps: f64,
    average_ms: f64,
    p50_ms: f64,
    p99_ms: f64,
    completed: u64,
    lost: u64,
    /// Server CPU seconds (user + system) during the load.
    cpu_seconds: f64,
    rcodes: BTreeMap<String, u64>,
}

/// User + system CPU seconds of a process, from /proc (clock ticks of 1/100 s on Linux).
fn cpu_seconds(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return f64::NAN;
    };
    // Fields after the command name (which may hold spaces) start at the state, field 3.
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return f64::NAN;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok());
    match (ticks(11), ticks(12)) {
        (Some(user), Some(system)) => (user + system) / 100.0,
        _ => f64::NAN,
    }
}

/// The pid of the `named` whose command line names `dir` (its config is in there).
fn named_pid(dir: &Path) -> u32 {
    let needle = dir.display().to_string();
    std::fs::read_dir("/proc")
        .expect("/proc")
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .find(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|cmdline| {
                let cmdline = String::from_utf8_lossy(&cmdline);
                cmdline.contains("named") && cmdline.contains(&needle)
            })
        })
        .expect("the named process of this BIND")
}

fn summary_value(output: &str, label: &str) -> Option<f64> {
    output
        .lines()
        .find_map(|line| line.trim().strip_prefix(label))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|value| value.parse().ok())
}

fn percentile_ms(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)] * 1000.0
}

fn run_dnsperf(
    server: SocketAddr,
    queries: &Path,
    seconds: u64,
    output: &Path,
    server_pid: u32,
) -> Load {
    let dnsperf = require_binary("dnsperf", "dnsperf");
    // Per-query lines go to a file, so that reading them takes no CPU from an in-process
    // server during the load.
    let out = std::fs::File::create(output).expect("dnsperf output file");
    let cpu_before = cpu_seconds(server_pid);
    let status = Command::new(dnsperf)
        .args(["-s", &server.ip().to_string()])
        .args(["-p", &server.port().to_string()])
        .arg("-d")
        .arg(queries)
        .args(["-l", &seconds.to_string()])
        .args(["-c", &CLIENTS.to_string()])
        .args(["-q", &IN_FLIGHT.to_string()])
        .args(["-t", "2"])
        .arg("-v")
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(Stdio::null())
        .status()
        .expect("run dnsperf");
    let cpu = cpu_seconds(server_pid) - cpu_before;
    assert!(status.success(), "dnsperf failed: {status}");
    let text = std::fs::read_to_string(output).expect("dnsperf output");
    let mut latencies = Vec::new();
    let mut rcodes = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("> ") else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if let (Some(rcode), Some(latency)) = (fields.first(), fields.last())
            && let Ok(latency) = latency.parse::<f64>()
        {
            latencies.push(latency);
            *rcodes.entry((*rcode).to_string()).or_insert(0) += 1;
        }
    }
    latencies.sort_by(f64::total_cmp);
    let load = Load {
        qps: summary_value(&text, "Queries per second:").unwrap_or(f64::NAN),
        average_ms: summary_value(&text, "Average Latency (s):").unwrap_or(f64::NAN) * 1000.0,
        p50_ms: percentile_ms(&latencies, 0.5),
        p99_ms: percentile_ms(&latencies, 0.99),
        completed: summary_value(&text, "Queries completed:").unwrap_or(0.0) as u64,
        lost: summary_value(&text, "Queries lost:").unwrap_or(0.0) as u64,
        cpu_seconds: cpu,
        rcodes,
    };
    assert!(load.completed > 0, "dnsperf got no answer from {server}");
    load
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

/// "median`unit` [each value]", each with `digits` decimals.
fn summary(values: &[f64], digits: usize, unit: &str) -> String {
    format!(
        "{:.digits$}{unit} [{}]",
        median(&mut values.to_vec()),
        spread(values, digits)
    )
}

fn column(loads: &[Load], f: fn(&Load) -> f64) -> Vec<f64> {
    loads.iter().map(f).collect()
}

/// Each round's `f(a) / f(b)`.
fn ratios(a: &[Load], b: &[Load], f: fn(&Load) -> f64) -> Vec<f64> {
    a.iter().zip(b).map(|(x, y)| f(x) / f(y)).collect()
}

fn spread(values: &[f64], digits: usize) -> String {
    values
        .iter()
        .map(|v| format!("{v:.digits$}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Mean µs per query of `EmbeddedDns::answer` over the query file's mix, for about 2 s.
fn answer_cost(embedded: &EmbeddedDns, queries: &Path) -> (f64, usize) {
    let text = std::fs::read_to_string(queries).expect("the query file");
    let requests: Vec<Vec<u8>> = text
        .lines()
        .filter_map(|line| line.split_once(' '))
        .map(|(name, qtype)| {
            let mut query = Message::query();
            query.add_query(Query::query(
                wire_name(name),
                WireType::from_str(qtype).expect("a record type"),
            ));
            query.to_vec().expect("encode")
        })
        .collect();
    let start = Instant::now();
    let mut answered = 0;
    while start.elapsed() < Duration::from_secs(2) {
        for request in &requests {
            let answer = embedded.answer(request, None);
            assert!(answer.is_some_and(|a| !a.is_empty()), "an answer");
            answered += 1;
        }
    }
    (
        start.elapsed().as_secs_f64() * 1e6 / answered as f64,
        answered,
    )
}

struct Target {
    name: &'static str,
    addr: SocketAddr,
    pid: u32,
    loads: Vec<Load>,
    /// Loads of the unique-name flood (the embedded server and BIND only).
    unique_loads: Vec<Load>,
}

fn print_load(round: usize, label: &str, load: &Load) {
    println!(
        "round {}: {:<34} {:>8.0} q/s, avg {:.3} ms, p50 {:.3} ms, p99 {:.3} ms, lost {}, \
         server CPU {:.2} s ({:.1} µs/query), rcodes {:?}",
        round + 1,
        label,
        load.qps,
        load.average_ms,
        load.p50_ms,
        load.p99_ms,
        load.lost,
        load.cpu_seconds,
        load.cpu_seconds * 1e6 / load.completed as f64,
        load.rcodes
    );
}

fn main() {
    let rounds: usize = std::env::var("DNS_SERVE_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let seconds: u64 = std::env::var("DNS_SERVE_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "dns_serve bench: one zone of {A_RECORDS} A + {CNAMES} CNAME + a wildcard, loopback UDP, \
         dnsperf -l {seconds} -c {CLIENTS} -q {IN_FLIGHT}, {rounds} rounds; {cores} cores, \
         load average {} at start",
        load_average()
    );
    let work = tempfile::tempdir().expect("temp dir");
    let queries = work.path().join("queries.txt");
    query_file(&queries);
    let unique_queries = work.path().join("unique-queries.txt");
    unique_query_file(&unique_queries, seconds);

    let embedded_runtime = runtime();
    let embedded = start_embedded(&embedded_runtime);
    let bind = Bind::start(ZONE, &zone_file_lines());
    let hickory_runtime = runtime();
    let (hickory_server, hickory_addr) = start_hickory(&hickory_runtime);
    let own_pid = std::process::id();
    let mut targets = [
        Target {
            name: "gateway-dns embedded",
            addr: embedded.local_addr(),
            pid: own_pid,
            loads: Vec::new(),
            unique_loads: Vec::new(),
        },
        Target {
            name: "BIND 9 (named -n 2)",
            addr: bind.addr(),
            pid: named_pid(bind.dir.path()),
            loads: Vec::new(),
            unique_loads: Vec::new(),
        },
        Target {
            name: "hickory-server in-memory",
            addr: hickory_addr,
            pid: own_pid,
            loads: Vec::new(),
            unique_loads: Vec::new(),
        },
    ];

    // Same answers for each kind of query (rcode, owner and type of each record).
    for (kind, name, qtype) in SAMPLES {
        let name = format!("{name}.{ZONE}");
        let reference = ask(targets[1].addr, &name, qtype);
        let ours = ask(targets[0].addr, &name, qtype);
        assert_eq!(
            ours, reference,
            "embedded: {kind} query {name} {qtype} answered unlike BIND"
        );
        // hickory-server is measured, not judged: a difference is printed.
        let hickory = ask(targets[2].addr, &name, qtype);
        let hickory_note = if hickory == reference {
            "the same from hickory-server".to_string()
        } else {
            format!("hickory-server differs: {hickory:?}")
        };
        println!(
            "  {kind:<8} {name} {qtype}: {} with {} answer(s), {} authority record(s) from BIND \
             and embedded; {hickory_note}",
            reference.0,
            reference.1.len(),
            reference.2.len()
        );
    }

    for round in 0..rounds {
        let mut order: Vec<usize> = (0..targets.len()).collect();
        order.rotate_left(round % targets.len());
        for index in order {
            let target = &mut targets[index];
            let output: PathBuf = work.path().join(format!("dnsperf-{round}-{index}.txt"));
            let load = run_dnsperf(target.addr, &queries, seconds, &output, target.pid);
            let _ = std::fs::remove_file(&output);
            print_load(round, target.name, &load);
            target.loads.push(load);
        }
        // The flood of unique names, embedded and BIND in alternating order.
        let pair = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for index in pair {
            let target = &mut targets[index];
            let output: PathBuf = work
                .path()
                .join(format!("dnsperf-unique-{round}-{index}.txt"));
            let load = run_dnsperf(target.addr, &unique_queries, seconds, &output, target.pid);
            let _ = std::fs::remove_file(&output);
            print_load(round, &format!("{} (unique names)", target.name), &load);
            target.unique_loads.push(load);
        }
    }

    println!("summary over {rounds} rounds (median; each round's value in brackets):");
    for target in &targets {
        let loads = &target.loads;
        println!(
            "  {:<26} {}, avg {}, p99 {}, CPU {}",
            target.name,
            summary(&column(loads, |l| l.qps), 0, " q/s"),
            summary(&column(loads, |l| l.average_ms), 3, " ms"),
            summary(&column(loads, |l| l.p99_ms), 3, " ms"),
            summary(
                &column(loads, |l| l.cpu_seconds * 1e6 / l.completed as f64),
                1,
                " µs/query"
            ),
        );
    }
    // Ratios per round (neighbouring loads share the machine's mood), then their median.
    let per_query_cpu: fn(&Load) -> f64 = |l| l.cpu_seconds / l.completed as f64;
    let ratios_line = |a: &[Load], b: &[Load]| {
        format!(
            "q/s {}, p99 {}, CPU per query {}",
            summary(&ratios(a, b, |l| l.qps), 2, "x"),
            summary(&ratios(a, b, |l| l.p99_ms), 2, "x"),
            summary(&ratios(a, b, per_query_cpu), 2, "x"),
        )
    };
    for (a, b) in [(0, 1), (2, 1), (0, 2)] {
        let (a, b) = (&targets[a], &targets[b]);
        println!(
            "  {} / {}: {}",
            a.name,
            b.name,
            ratios_line(&a.loads, &b.loads)
        );
    }
    let (a, b) = (&targets[0], &targets[1]);
    println!(
        "  unique names (no answer repeats): {} {}, {} {}; ratio {}",
        a.name,
        summary(&column(&a.unique_loads, |l| l.qps), 0, " q/s"),
        b.name,
        summary(&column(&b.unique_loads, |l| l.qps), 0, " q/s"),
        ratios_line(&a.unique_loads, &b.unique_loads)
    );
    // The embedded server's answer path alone (decode, look up, encode), without socket or
    // runtime: what is left of its CPU per query under load is the UDP path.
    let (per_query, answered) = answer_cost(&embedded, &queries);
    println!(
        "  gateway-dns embedded in-process (EmbeddedDns::answer over the same mix, {answered} queries, one thread): {per_query:.2} µs/query"
    );
    println!("load average at end {}", load_average());
    drop(hickory_server);
    drop(embedded);
}
