//! DNS sync against a real BIND 9 (bind9, bind9-dnsutils), in one run:
//!
//! (b) converge N records (default 10 000) into an empty zone, vs the same RRsets (records and
//!     ownership TXT, same prerequisites, same batch size) sent by `nsupdate` — the baseline —
//!     and the ratio;
//! (c) a resync with nothing to change: messages sent and time;
//! (a) apply-to-resolvable latency: desired set changed + notification → the name answers
//!     from BIND, p50/p99 over 100 names, driven by the sync loop with a closure source (the
//!     baseline); then the same from an HTTPRoute created in the Kubernetes API double, through
//!     the kube source, the index, the engine (`EngineDesired`) and the sync loop woken by
//!     `index.subscribe()`, as `serve` runs it; and the ratio.
//!
//! `cargo bench --bench dns_sync` (BENCH_RECORDS=N to change N). Prints figures; asserts only
//! that the work was really done.

#[path = "../tests/support/mod.rs"]
mod support;

use std::fmt::Write as _;
use std::net::{SocketAddr, UdpSocket};
use std::process::Command;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gateway_dns::dns::provider::rfc2136::{MESSAGE_BUDGET, Rfc2136Provider, create_batches};
use gateway_dns::dns::{Endpoint, Provider, registry};
use gateway_dns::engine::World;
use gateway_dns::index::Index;
use gateway_dns::model::RecordType;
use gateway_dns::source::kube::{Config as SourceConfig, KubeSource};
use gateway_dns::sync::desired::EngineDesired;
use gateway_dns::sync::{Policy, SyncConfig, Syncer, plan};
use hickory_proto::op::{Message, Query};
use hickory_proto::rr::{Name, RecordType as WireType};
use serde_json::json;
use support::apiserver::ApiServer;
use support::bind::{Bind, KEY_NAME, SECRET};
use tokio::sync::Notify;

const ZONE: &str = "example.com";
const OWNER: &str = "bench";

fn desired_records(count: usize) -> Vec<Endpoint> {
    (0..count)
        .map(|i| {
            let ip = format!("10.{}.{}.{}", (i >> 16) & 255, (i >> 8) & 255, i & 255);
            Endpoint::new(&format!("r{i}.{ZONE}"), RecordType::A, [ip])
                .with_resource(format!("httproute/bench/r{i}"))
        })
        .collect()
}

/// The nsupdate script that writes exactly what our plan writes, batch for batch.
fn nsupdate_script(server: SocketAddr, desired: &[Endpoint], batch_size: usize) -> String {
    let changes = plan(desired, &[], OWNER, Policy::Sync, &[ZONE.to_string()]).changes;
    let mut script = format!("server {} {}\nzone {ZONE}\n", server.ip(), server.port());
    let mut rest = changes.create.as_slice();
    for count in create_batches(rest, batch_size) {
        let (batch, after) = rest.split_at(count);
        rest = after;
        for endpoint in batch {
            let name = &endpoint.dns_name;
            let rtype = endpoint.record_type;
            let ttl = endpoint.ttl_or_default();
            let _ = writeln!(script, "prereq nxrrset {name} {rtype}");
            for target in &endpoint.targets {
                let data = match rtype {
                    RecordType::TXT => format!("\"{target}\""),
                    _ => target.clone(),
                };
                let _ = writeln!(script, "update add {name} {ttl} {rtype} {data}");
            }
        }
        script.push_str("send\n");
    }
    script
}

fn run_nsupdate(bind: &Bind, script: &str) -> Duration {
    let nsupdate = support::net::require_binary("nsupdate", "bind9-dnsutils");
    let key_file = bind.dir.path().join("nsupdate.key");
    std::fs::write(
        &key_file,
        format!("key \"{KEY_NAME}\" {{ algorithm hmac-sha256; secret \"{SECRET}\"; }};\n"),
    )
    .expect("write key file");
    let script_file = bind.dir.path().join("nsupdate.txt");
    std::fs::write(&script_file, script).expect("write script");
    let start = Instant::now();
    let output = Command::new(nsupdate)
        .arg("-v") // TCP, as our provider uses
        .arg("-k")
        .arg(&key_file)
        .arg(&script_file)
        .output()
        .expect("run nsupdate");
    let elapsed = start.elapsed();
    assert!(
        output.status.success(),
        "nsupdate failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    elapsed
}

/// One UDP query; true when the answer has a record of `qtype`.
fn resolves(socket: &UdpSocket, server: SocketAddr, name: &str, qtype: WireType) -> bool {
    let mut query = Message::query();
    let Ok(qname) = Name::from_ascii(format!("{name}.")) else {
        return false;
    };
    query.add_query(Query::query(qname, qtype));
    let id = query.metadata.id;
    let Ok(bytes) = query.to_vec() else {
        return false;
    };
    if socket.send_to(&bytes, server).is_err() {
        return false;
    }
    let mut buffer = [0u8; 4096];
    let Ok((len, _)) = socket.recv_from(&mut buffer) else {
        return false;
    };
    Message::from_vec(&buffer[..len]).is_ok_and(|answer| {
        answer.metadata.id == id && answer.answers.iter().any(|r| r.record_type() == qtype)
    })
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let count: usize = std::env::var("BENCH_RECORDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let desired = desired_records(count);
    println!("dns_sync bench: BIND 9 on loopback, {count} records (+{count} ownership TXT)");

    // (b) baseline: nsupdate into a fresh zone.
    let baseline_bind = Bind::start(ZONE, "");
    let batch_size = baseline_bind.provider_config().batch_size;
    let script = nsupdate_script(baseline_bind.addr(), &desired, batch_size);
    let nsupdate_time = run_nsupdate(&baseline_bind, &script);
    let last = format!("r{}.{ZONE}", count - 1);
    let socket = UdpSocket::bind("127.0.0.1:0").expect("udp socket");
    socket
        .set_read_timeout(Some(Duration::from_millis(500)))
        .expect("timeout");
    assert!(resolves(&socket, baseline_bind.addr(), &last, WireType::A));
    drop(baseline_bind);

    // (b) ours: the sync loop's pass into a fresh zone.
    let bind = Bind::start(ZONE, "");
    let provider = Arc::new(Rfc2136Provider::new(bind.provider_config()).expect("provider"));
    let source_records = Arc::new(Mutex::new(desired.clone()));
    let source = {
        let records = source_records.clone();
        Arc::new(move || records.lock().map(|r| r.clone()).unwrap_or_default())
    };
    // The sync loop's defaults (burst allowance and pass spacing).
    let config = SyncConfig::new(OWNER, vec![ZONE.into()]);
    let syncer = Arc::new(Syncer::new(
        provider.clone(),
        source,
        config,
        Default::default(),
    ));
    let start = Instant::now();
    let pass = syncer.sync_pass().await.expect("converge pass");
    let ours_time = start.elapsed();
    assert_eq!(pass.applied, 2 * count);
    assert!(resolves(&socket, bind.addr(), &last, WireType::A));
    let listed = provider.records().await.expect("listing");
    let owned = listed
        .iter()
        .filter(|e| {
            e.record_type == RecordType::TXT
                && registry::parse_ownership(
                    e.targets.iter().next().map(String::as_str).unwrap_or(""),
                )
                .is_some()
        })
        .count();
    assert_eq!(owned, count);
    let messages = provider.stats().update_messages.load(Ordering::Relaxed);
    let rate = |d: Duration| (2 * count) as f64 / d.as_secs_f64();
    println!(
        "(b) converge {count} records into an empty zone: gateway-dns {:.2} s ({:.0} RRsets/s, {messages} UPDATE messages of <= {batch_size} RRsets and <= {MESSAGE_BUDGET} bytes of records)",
        ours_time.as_secs_f64(),
        rate(ours_time)
    );
    println!(
        "    nsupdate baseline (same RRsets, prerequisites, batches, TCP): {:.2} s ({:.0} RRsets/s)",
        nsupdate_time.as_secs_f64(),
        rate(nsupdate_time)
    );
    println!(
        "    speed ratio gateway-dns / nsupdate: {:.2}x (goal >= 0.8x)",
        nsupdate_time.as_secs_f64() / ours_time.as_secs_f64()
    );

    // (c) resyncs with nothing to change: the event-driven kind (listing cache validated by
    // the SOA serial) and the periodic kind (full AXFR).
    for (kind, full) in [
        ("event-driven (SOA-validated cache)", false),
        ("periodic (full AXFR)", true),
    ] {
        if full {
            provider.invalidate_cache();
        }
        let updates_before = provider.stats().update_messages.load(Ordering::Relaxed);
        let transfers_before = provider.stats().transfers.load(Ordering::Relaxed);
        let soa_before = provider.stats().soa_queries.load(Ordering::Relaxed);
        let start = Instant::now();
        let idle = syncer.sync_pass().await.expect("resync");
        let resync_time = start.elapsed();
        assert_eq!(idle.applied, 0);
        let updates = provider.stats().update_messages.load(Ordering::Relaxed) - updates_before;
        let transfers = provider.stats().transfers.load(Ordering::Relaxed) - transfers_before;
        let soa = provider.stats().soa_queries.load(Ordering::Relaxed) - soa_before;
        assert_eq!(updates, 0, "a no-change resync sends no update");
        println!(
            "(c) no-change resync, {kind}, {} RRsets: {:.3} s, {updates} UPDATE messages, {transfers} AXFR, {soa} SOA queries",
            listed.len(),
            resync_time.as_secs_f64()
        );
    }

    // Where a cached pass spends its time.
    let start = Instant::now();
    let cached_listing = provider.records().await.expect("listing");
    let listing_time = start.elapsed();
    let start = Instant::now();
    let idle_plan = plan(
        &desired,
        &cached_listing,
        OWNER,
        Policy::Sync,
        &[ZONE.to_string()],
    );
    let plan_time = start.elapsed();
    assert!(idle_plan.is_empty());
    println!(
        "    of which: cached listing {:.1} ms, plan() over {} desired / {} current {:.1} ms",
        listing_time.as_secs_f64() * 1000.0,
        desired.len(),
        cached_listing.len(),
        plan_time.as_secs_f64() * 1000.0
    );

    // (a) apply-to-resolvable latency through the loop (its default pacing).
    let changes = Arc::new(Notify::new());
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let loop_task = {
        let syncer = syncer.clone();
        let changes = changes.clone();
        tokio::spawn(async move {
            syncer
                .run(changes, async {
                    let _ = stop_rx.await;
                })
                .await
        })
    };
    // Let the loop's first pass (nothing to do) finish.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut latencies = Vec::new();
    for i in 0..100 {
        let name = format!("latency{i}.{ZONE}");
        let endpoint = Endpoint::new(&name, RecordType::A, ["192.0.2.1"]);
        let start = Instant::now();
        if let Ok(mut records) = source_records.lock() {
            records.push(endpoint);
        }
        changes.notify_one();
        let deadline = start + Duration::from_secs(10);
        loop {
            let server = bind.addr();
            let socket_ref = &socket;
            let name_ref = name.clone();
            let found = tokio::task::block_in_place(|| {
                resolves(socket_ref, server, &name_ref, WireType::A)
            });
            if found {
                latencies.push(start.elapsed());
                break;
            }
            assert!(Instant::now() < deadline, "{name} never resolved");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
    let _ = stop_tx.send(());
    let _ = loop_task.await;
    latencies.sort();
    println!(
        "(a) apply-to-resolvable over 100 names ({count} records in zone, default pacing): p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms (goal p99 < 1 s)",
        percentile(&latencies, 0.5).as_secs_f64() * 1000.0,
        percentile(&latencies, 0.99).as_secs_f64() * 1000.0,
        latencies
            .last()
            .map(|d| d.as_secs_f64() * 1000.0)
            .unwrap_or_default()
    );

    // (a) through the engine, from a route created in the Kubernetes API (the double).
    let (routes, index_lag) = route_to_resolvable(&bind, &socket).await;
    println!(
        "(a) apply-to-resolvable from HTTPRoutes created in the API double (kube watch → index → engine → sync loop → BIND), 100 routes: p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms (goal p99 < 1 s)",
        percentile(&routes, 0.5).as_secs_f64() * 1000.0,
        percentile(&routes, 0.99).as_secs_f64() * 1000.0,
        routes
            .last()
            .map(|d| d.as_secs_f64() * 1000.0)
            .unwrap_or_default()
    );
    println!(
        "    of which route created → in the index: p50 {:.1} ms, p99 {:.1} ms; ratio to the closure-source line above: p50 {:.2}x, p99 {:.2}x \
         (that loop plans its {count} desired records each pass, this one only its own routes)",
        percentile(&index_lag, 0.5).as_secs_f64() * 1000.0,
        percentile(&index_lag, 0.99).as_secs_f64() * 1000.0,
        percentile(&routes, 0.5).as_secs_f64() / percentile(&latencies, 0.5).as_secs_f64(),
        percentile(&routes, 0.99).as_secs_f64() / percentile(&latencies, 0.99).as_secs_f64()
    );
}

/// The owner id of the engine-driven loop: the records the closure-driven loop wrote above
/// (owner `bench`) are foreign to it, so it leaves them alone as a second installation would.
const ENGINE_OWNER: &str = "bench-engine";

/// Creates 100 HTTPRoutes one after the other in the API double and times each from the
/// create until BIND answers its name, with the pipeline `serve` runs on a cluster: kube
/// source → index → `EngineDesired` → `Syncer::run` woken by the index. Returns the sorted
/// latencies and, sorted, how long each route took to reach the index.
async fn route_to_resolvable(bind: &Bind, socket: &UdpSocket) -> (Vec<Duration>, Vec<Duration>) {
    let server = ApiServer::start().await;
    server
        .create(json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"namespace": "infra", "name": "public"},
            "spec": {
                "gatewayClassName": "example",
                "listeners": [{"name": "http", "port": 80, "protocol": "HTTP",
                               "hostname": format!("*.{ZONE}"),
                               "allowedRoutes": {"namespaces": {"from": "All"}}}],
            },
            "status": {"addresses": [{"type": "IPAddress", "value": "192.0.2.80"}]},
        }))
        .expect("create the Gateway");
    let index = Index::new();
    let source = KubeSource::spawn(
        server.client().await,
        index.clone(),
        SourceConfig::default(),
    );
    let mut ready = source.ready();
    tokio::time::timeout(Duration::from_secs(30), ready.wait_for(|r| *r))
        .await
        .expect("the kube source syncs")
        .expect("the kube source runs");

    let provider = Arc::new(Rfc2136Provider::new(bind.provider_config()).expect("provider"));
    let config = SyncConfig::new(ENGINE_OWNER, vec![ZONE.into()]);
    let syncer = Arc::new(Syncer::new(
        provider,
        Arc::new(EngineDesired::new(index.clone())),
        config,
        Default::default(),
    ));
    let changes = Arc::new(Notify::new());
    let feeder = {
        let (changes, mut subscription) = (changes.clone(), index.subscribe());
        tokio::spawn(async move {
            while subscription.changed().await.is_ok() {
                changes.notify_one();
            }
        })
    };
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let loop_task = {
        let (syncer, changes) = (syncer.clone(), changes.clone());
        tokio::spawn(async move {
            syncer
                .run(changes, async {
                    let _ = stop_rx.await;
                })
                .await
        })
    };
    // Let the loop's first pass (nothing to do) finish.
    tokio::time::sleep(Duration::from_secs(1)).await;

    let mut latencies = Vec::new();
    let mut index_lag = Vec::new();
    let mut index_changes = index.subscribe();
    for i in 0..100 {
        let host = format!("route{i}.{ZONE}");
        let start = Instant::now();
        server
            .create(json!({
                "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
                "metadata": {"namespace": "bench", "name": format!("route{i}")},
                "spec": {"parentRefs": [{"name": "public", "namespace": "infra"}],
                         "hostnames": [host]},
            }))
            .expect("create the HTTPRoute");
        let deadline = start + Duration::from_secs(10);
        while index.snapshot().claimants(&host).is_empty() {
            tokio::time::timeout_at(deadline.into(), index_changes.changed())
                .await
                .unwrap_or_else(|_| panic!("{host} never reached the index"))
                .expect("the index lives");
        }
        index_lag.push(start.elapsed());
        loop {
            let found =
                tokio::task::block_in_place(|| resolves(socket, bind.addr(), &host, WireType::A));
            if found {
                latencies.push(start.elapsed());
                break;
            }
            assert!(Instant::now() < deadline, "{host} never resolved");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
    let _ = stop_tx.send(());
    let _ = loop_task.await;
    feeder.abort();
    latencies.sort();
    index_lag.sort();
    (latencies, index_lag)
}
