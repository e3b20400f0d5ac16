//! The zone view (ARCHITECTURE.md, "Many clusters, one zone"), measured:
//!
//! - **propagation**: another owner (`east`) writes a new name to a real BIND zone with one
//!   signed UPDATE; the time until a `gateway-dns serve` of owner `west` holds it in its zone
//!   view (`gateway_dns_zone_view_names` moves: the webhook reads the same snapshot, so from
//!   then on it refuses the name) is measured over rounds, p50 and p99, for two replicas side by
//!   side: one told by BIND's NOTIFY (`--zone-notify-listen`, polling every 10 minutes), one
//!   polling at the default `--zone-refresh-interval` of 30s;
//! - **memory**: the heap a zone view holds per record, for zones of 1k and 10k names held by
//!   others (each an A record and its ownership TXT, every fourth one unmanaged), counted by
//!   the allocator, beside the listing it is built from.
//!
//! Needs BIND (`named`, Debian bind9) on loopback. Run:
//! `cargo bench --bench zone_view [-- ROUNDS]` (default 20 rounds; each waits a random 0–30 s
//! before its write, and the polling replica takes up to 30 s more: some 15 minutes).

// Shared with the tests, which use more of them.
#[allow(dead_code)]
#[path = "../tests/support/bind.rs"]
mod bind;
#[path = "support/counting.rs"]
mod counting;
#[allow(dead_code)]
#[path = "../tests/support/dig.rs"]
mod dig;
#[allow(dead_code)]
#[path = "../tests/support/net.rs"]
mod net;

#[global_allocator]
static ALLOCATOR: counting::Counting = counting::Counting;

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use gateway_dns::dns::provider::rfc2136::Rfc2136Provider;
use gateway_dns::dns::registry::{TxtRegistry, ownership_value};
use gateway_dns::dns::{Changes, Endpoint, Provider};
use gateway_dns::model::RecordType;
use gateway_dns::zone_view::view_of;

const LIMIT: Duration = Duration::from_secs(90);

struct Replica {
    child: Child,
    metrics: SocketAddr,
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn replica(bind: &bind::Bind, manifests: &std::path::Path, extra: &[&str]) -> Replica {
    let metrics = SocketAddr::from(([127, 0, 0, 1], net::free_port()));
    let child = Command::new(env!("CARGO_BIN_EXE_gateway-dns"))
        .args(["serve", "--webhook=false", "--manifests"])
        .arg(manifests)
        .args(bind.serve_args())
        .args([
            "--txt-owner-id",
            "west",
            "--metrics-listen",
            &metrics.to_string(),
            // Two replicas of one owner id without a Lease: with heartbeats each would take the
            // other for a second installation.
            "--owner-heartbeat-interval=0",
        ])
        .args(extra)
        .envs(bind.serve_env())
        .env("GATEWAY_DNS_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("gateway-dns serve starts");
    Replica { child, metrics }
}

/// `gateway_dns_zone_view_names{holder="other_owner"}` of a replica (None before it answers):
/// one plain HTTP/1.0 GET of /metrics, in process, so that polling every 2 ms costs little.
async fn held(replica: &Replica) -> Option<f64> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut tcp = tokio::net::TcpStream::connect(replica.metrics).await.ok()?;
    tcp.write_all(b"GET /metrics HTTP/1.0\r\nHost: metrics\r\n\r\n")
        .await
        .ok()?;
    let mut body = Vec::new();
    tcp.read_to_end(&mut body).await.ok()?;
    let text = String::from_utf8_lossy(&body);
    text.lines().find_map(|line| {
        line.strip_prefix("gateway_dns_zone_view_names{holder=\"other_owner\"} ")?
            .parse()
            .ok()
    })
}

/// Waits until `replica` holds at least `count` names of other owners; the time it took.
async fn wait_held(replica: &Replica, count: f64, since: Instant) -> Duration {
    loop {
        if held(replica).await.unwrap_or(-1.0) >= count {
            return since.elapsed();
        }
        assert!(
            since.elapsed() < LIMIT,
            "the zone view never held {count} names"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let at = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[at.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1000.0)
}

/// A name `east` writes: its A record and ownership record.
fn east_name(name: &str) -> Vec<Endpoint> {
    vec![
        Endpoint::new(
            &format!("a-{name}"),
            RecordType::TXT,
            [ownership_value("east", Some("httproute/apps/east"))],
        ),
        Endpoint::new(name, RecordType::A, ["203.0.113.10"]),
    ]
}

async fn propagation(rounds: usize) {
    let notify = SocketAddr::from(([127, 0, 0, 1], net::free_port()));
    let bind = bind::Bind::start_notifying("example.com", "", &[notify]);
    // West publishes nothing here: its manifests hold one Namespace.
    let manifests = tempfile::tempdir().unwrap();
    std::fs::write(
        manifests.path().join("apps.yaml"),
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: apps}\n",
    )
    .unwrap();
    let listen = notify.to_string();
    let told = replica(
        &bind,
        manifests.path(),
        &[
            "--zone-refresh-interval",
            "10m",
            "--zone-notify-listen",
            &listen,
        ],
    );
    let polling = replica(&bind, manifests.path(), &[]);
    for replica in [&told, &polling] {
        wait_held(replica, 0.0, Instant::now()).await;
    }
    let east = Rfc2136Provider::new(bind.provider_config()).unwrap();
    let (mut by_notify, mut by_poll) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        // A write at a random point of the polling interval, as another cluster's would come:
        // back to back, every write would fall just after a poll.
        tokio::time::sleep(Duration::from_millis(fastrand::u64(0..30_000))).await;
        let changes = Changes {
            create: east_name(&format!("east-{round}.example.com")),
            ..Changes::default()
        };
        east.apply(&changes).await.expect("east's UPDATE");
        let written = Instant::now();
        let count = (round + 1) as f64;
        let (notified, polled) = tokio::join!(
            wait_held(&told, count, written),
            wait_held(&polling, count, written)
        );
        by_notify.push(notified);
        by_poll.push(polled);
    }
    by_notify.sort();
    by_poll.sort();
    println!("east's write → west's zone view holds the name ({rounds} rounds):");
    for (how, figures) in [
        ("NOTIFY (--zone-notify-listen)", &by_notify),
        ("poll (--zone-refresh-interval 30s)", &by_poll),
    ] {
        println!(
            "  {how:<36} p50 {:>9}  p99 {:>9}  max {:>9}",
            ms(percentile(figures, 0.5)),
            ms(percentile(figures, 0.99)),
            ms(*figures.last().unwrap())
        );
    }
    println!(
        "  ratio NOTIFY / poll: p50 {:.4}, p99 {:.4}",
        percentile(&by_notify, 0.5).as_secs_f64() / percentile(&by_poll, 0.5).as_secs_f64(),
        percentile(&by_notify, 0.99).as_secs_f64() / percentile(&by_poll, 0.99).as_secs_f64()
    );
}

/// A listing of `names` names held by others: an A record each, with an ownership record of
/// `east` for three in four (the fourth is unmanaged), and one of `west`'s own.
fn listing(names: usize) -> Vec<Endpoint> {
    let mut out = Vec::with_capacity(names * 2 + 2);
    for i in 0..names {
        let name = format!("app-{i:05}.team-{}.example.com", i % 40);
        out.push(Endpoint::new(
            &name,
            RecordType::A,
            [format!("10.{}.{}.{}", i >> 16 & 255, i >> 8 & 255, i & 255)],
        ));
        if i % 4 != 3 {
            out.push(Endpoint::new(
                &format!("a-{name}"),
                RecordType::TXT,
                [ownership_value(
                    "east",
                    Some(&format!("httproute/team-{}/app-{i}", i % 40)),
                )],
            ));
        }
    }
    out
}

fn memory() {
    println!("zone view memory (heap held, counted by the allocator):");
    let registry = TxtRegistry::new("west");
    for names in [1_000usize, 10_000] {
        let before = counting::live();
        let records = listing(names);
        let listed = counting::live() - before;
        let before = counting::live();
        let view = view_of(&records, &registry);
        let held = counting::live() - before;
        assert_eq!(view.len(), names);
        drop(records);
        println!(
            "  {names:>6} names: view {:>8} B, {:>5.1} B per name; the listing it is read from {:>8} B ({:.1} B per name)",
            held,
            held as f64 / names as f64,
            listed,
            listed as f64 / names as f64
        );
        drop(view);
    }
}

fn main() {
    let rounds: usize = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .and_then(|a| a.parse().ok())
        .unwrap_or(20);
    memory();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(propagation(rounds));
}
