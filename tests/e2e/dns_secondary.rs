//! The embedded server as a hidden primary: a real BIND secondary pulls the zone with TSIG,
//! and follows each change through NOTIFY and a transfer.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gateway_dns::authority::{EmbeddedConfig, EmbeddedDns};
use gateway_dns::dns::Endpoint;
use gateway_dns::model::RecordType;
use gateway_dns::sync::{SyncConfig, Syncer};

use crate::support::bind::{Bind, KEY_NAME, SECRET};
use crate::support::dig;
use crate::support::net::{free_port, require_binary};
use crate::support::records::source_of;

fn a(name: &str, ip: &str) -> Endpoint {
    Endpoint::new(name, RecordType::A, [ip]).with_resource("httproute/shop/web")
}

/// `dig AXFR` against `server`, with `key` as dig's `-y` (`None`: unsigned); dig's output.
pub fn axfr(server: std::net::SocketAddr, zone: &str, key: Option<&str>) -> String {
    transfer(server, zone, "AXFR", key)
}

/// A zone transfer of `kind` (`AXFR`, or `IXFR=SERIAL`) with dig; its output.
pub fn transfer(server: std::net::SocketAddr, zone: &str, kind: &str, key: Option<&str>) -> String {
    transfer_from("127.0.0.1", server, zone, kind, key)
}

/// [`transfer`] from the local address `source` (any of 127.0.0.0/8 on Linux).
pub fn transfer_from(
    source: &str,
    server: std::net::SocketAddr,
    zone: &str,
    kind: &str,
    key: Option<&str>,
) -> String {
    let mut command = Command::new(require_binary("dig", "bind9-dnsutils"));
    command.args(["-b", source]);
    command
        .arg(format!("@{}", server.ip()))
        .args(["-p", &server.port().to_string()])
        .args(["+noall", "+answer", "+comments", "+time=3", "+tries=1"]);
    if let Some(key) = key {
        command.args(["-y", key]);
    }
    let output = command.arg(zone).arg(kind).output().expect("run dig");
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bind_secondary_follows_changes_through_notify_and_transfer() {
    let zone = "example.com";
    let bind_port = free_port();
    let bind_addr = std::net::SocketAddr::from(([127, 0, 0, 1], bind_port));
    let mut config = EmbeddedConfig::new(vec![zone.into()]);
    config.listen = "127.0.0.1:0".parse().unwrap();
    config.secondaries = vec![bind_addr];
    config.transfer_key = Some(
        gateway_dns::tsig::TsigKey::from_base64(KEY_NAME, "hmac-sha256".parse().unwrap(), SECRET)
            .unwrap(),
    );
    let server = Arc::new(EmbeddedDns::start(config).await.unwrap());
    let primary = server.local_addr();
    let desired = Arc::new(Mutex::new(vec![
        a("app.example.com", "192.0.2.1"),
        a("*.wild.example.com", "192.0.2.3"),
        Endpoint::new("text.example.com", RecordType::TXT, ["hello world"]),
    ]));
    // Enough records that a transfer takes several messages, each signed (RFC 8945 5.3.1).
    desired
        .lock()
        .unwrap()
        .extend((0..150).map(|i| a(&format!("host{i}.example.com"), "192.0.2.50")));
    let source = source_of(&desired);
    let syncer = Syncer::new(
        server.clone(),
        source,
        SyncConfig::new("gw", vec![zone.into()]),
        Default::default(),
    );
    assert!(syncer.run_once().await.unwrap().converged);

    // BIND starts, transfers the zone, and answers from it.
    let bind = tokio::task::spawn_blocking(move || Bind::start_secondary(zone, bind_port, primary))
        .await
        .unwrap();
    assert_eq!(
        dig::query(bind.addr(), "app.example.com", "A", false).data("A"),
        ["192.0.2.1"]
    );
    assert_eq!(
        dig::query(bind.addr(), "x.wild.example.com", "A", false).data("A"),
        ["192.0.2.3"]
    );
    assert_eq!(
        dig::query(bind.addr(), "host149.example.com", "A", false).data("A"),
        ["192.0.2.50"]
    );
    let log = std::fs::read_to_string(bind.log_path()).unwrap_or_default();
    assert!(
        log.lines()
            .any(|line| line.contains("Transfer completed") && !line.contains(": 1 messages")),
        "the first transfer took several messages: {log}"
    );
    assert_eq!(
        dig::query(bind.addr(), "example.com", "SOA", false).soa_serial(),
        server.serial(zone)
    );

    // A change: NOTIFY, then BIND pulls it (the SOA refresh is an hour: only NOTIFY explains
    // it arriving now).
    let serial_before = server.serial(zone).unwrap();
    desired.lock().unwrap()[0] = a("app.example.com", "192.0.2.10");
    let changed = Instant::now();
    assert!(syncer.run_once().await.unwrap().converged);
    // Only NOTIFY can bring the change this soon: BIND's own refresh timer is the SOA refresh
    // (an hour). Measured 0.3–0.4 s here; the bound leaves room for a busy machine, and the
    // figure is printed.
    let limit = Duration::from_secs(5);
    let mut seen = None;
    while changed.elapsed() < limit {
        let bind_addr = bind.addr();
        let answer = tokio::task::spawn_blocking(move || {
            dig::query(bind_addr, "app.example.com", "A", false).data("A")
        })
        .await
        .unwrap();
        if answer == ["192.0.2.10"] {
            seen = Some(changed.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let elapsed = seen.unwrap_or_else(|| {
        panic!(
            "BIND never saw the change; its log:\n{}",
            std::fs::read_to_string(bind.log_path()).unwrap_or_default()
        )
    });
    eprintln!("change visible on the BIND secondary after {elapsed:?}");
    assert_eq!(
        dig::query(bind.addr(), "example.com", "SOA", false).soa_serial(),
        server.serial(zone)
    );

    // BIND pulled the change alone (IXFR from the journal): 4 SOAs, the old A, the new A.
    let log = std::fs::read_to_string(bind.log_path()).unwrap_or_default();
    let completed = format!("(serial {})", server.serial(zone).unwrap());
    let last_transfer = log
        .lines()
        .find(|line| line.contains("Transfer completed") && line.contains(&completed))
        .unwrap_or_else(|| panic!("no transfer of the change in BIND's log:\n{log}"));
    assert!(last_transfer.contains(" 6 records"), "{last_transfer}");
    let key = format!("hmac-sha256:{KEY_NAME}:{SECRET}");
    let soas = |text: &str| text.matches("\tSOA\t").count();
    let ixfr = transfer(primary, zone, &format!("IXFR={serial_before}"), Some(&key));
    assert!(
        ixfr.contains("192.0.2.1\n") && ixfr.contains("192.0.2.10"),
        "{ixfr}"
    );
    assert!(!ixfr.contains("hello world"), "the change only: {ixfr}");
    assert_eq!(soas(&ixfr), 4, "{ixfr}");
    // Older than the journal: the whole zone, AXFR-style.
    let full = transfer(primary, zone, "IXFR=1", Some(&key));
    assert!(
        full.contains("hello world") && full.contains("192.0.2.10"),
        "{full}"
    );
    assert_eq!(soas(&full), 2, "{full}");

    // Transfers: the right key from a secondary's address works; a wrong key or none doesn't.
    let good = axfr(
        primary,
        zone,
        Some(&format!("hmac-sha256:{KEY_NAME}:{SECRET}")),
    );
    assert!(
        good.contains("192.0.2.10") && good.contains("host149"),
        "{good}"
    );
    assert_eq!(good.matches("\tSOA\t").count(), 2, "{good}");
    let wrong_secret = "d3Jvbmctc2VjcmV0LXdyb25nLXNlY3JldC13cm9uZw==";
    let wrong = axfr(
        primary,
        zone,
        Some(&format!("hmac-sha256:{KEY_NAME}:{wrong_secret}")),
    );
    assert!(!wrong.contains("192.0.2.10"), "{wrong}");
    assert!(
        wrong.contains("NOTAUTH") || wrong.contains("failed"),
        "{wrong}"
    );
    let unknown = axfr(
        primary,
        zone,
        Some(&format!("hmac-sha256:other-key:{SECRET}")),
    );
    assert!(!unknown.contains("192.0.2.10"), "{unknown}");
    // The right key from an address that is not a secondary.
    let elsewhere = transfer_from("127.0.0.2", primary, zone, "AXFR", Some(&key));
    assert!(!elsewhere.contains("192.0.2.10"), "{elsewhere}");
    assert!(elsewhere.contains("REFUSED"), "{elsewhere}");
    let unsigned = axfr(primary, zone, None);
    assert!(!unsigned.contains("192.0.2.10"), "{unsigned}");
    assert!(unsigned.contains("REFUSED"), "{unsigned}");
    // Ordinary queries still work, and names outside the zones are still refused.
    assert_eq!(
        dig::query(primary, "app.example.com", "A", false).data("A"),
        ["192.0.2.10"]
    );
    assert_eq!(
        dig::query(primary, "app.example.org", "A", false).status,
        "REFUSED"
    );
}

/// The series of `gateway_dns_secondary_serial_lag` (serials, or with `_seconds`) for
/// `secondary`, as serve exports them.
fn lag_metric(server: &EmbeddedDns, secondary: std::net::SocketAddr, suffix: &str) -> f64 {
    let metrics = gateway_dns::metrics::Metrics::new();
    gateway_dns::cmd::serve::export_secondaries(server, &metrics);
    let series = format!("gateway_dns_secondary_serial_lag{suffix}{{secondary=\"{secondary}\"}} ");
    metrics
        .render()
        .lines()
        .find_map(|line| line.strip_prefix(&series)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {series}in:\n{}", metrics.render()))
}

/// Waits up to 30 s for `condition` over the server's view of its one secondary.
async fn wait_secondary(
    server: &EmbeddedDns,
    what: &str,
    condition: impl Fn(&gateway_dns::authority::SecondaryStatus) -> bool,
) {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(30) {
        if server.secondaries().first().is_some_and(&condition) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{what}: {:?}", server.secondaries());
}

/// The hidden primary asks its secondary for its serial: caught up, then behind while BIND is
/// down and the zone changes (the lag metric rises, in serials and seconds), then caught up
/// again once BIND is back (the metric falls to 0).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_serial_lag_of_a_secondary_rises_while_it_is_down_and_falls_when_it_catches_up() {
    let zone = "example.com";
    let bind_port = free_port();
    let bind_addr = std::net::SocketAddr::from(([127, 0, 0, 1], bind_port));
    let mut config = EmbeddedConfig::new(vec![zone.into()]);
    config.listen = "127.0.0.1:0".parse().unwrap();
    config.secondaries = vec![bind_addr];
    config.secondary_check_interval = Duration::from_secs(1);
    config.transfer_key = Some(
        gateway_dns::tsig::TsigKey::from_base64(KEY_NAME, "hmac-sha256".parse().unwrap(), SECRET)
            .unwrap(),
    );
    let server = Arc::new(EmbeddedDns::start(config).await.unwrap());
    let primary = server.local_addr();
    let desired = Arc::new(Mutex::new(vec![a("app.example.com", "192.0.2.1")]));
    let syncer = Syncer::new(
        server.clone(),
        source_of(&desired),
        SyncConfig::new("gw", vec![zone.into()]),
        Default::default(),
    );
    assert!(syncer.run_once().await.unwrap().converged);
    let mut bind =
        tokio::task::spawn_blocking(move || Bind::start_secondary(zone, bind_port, primary))
            .await
            .unwrap();
    wait_secondary(&server, "caught up", |s| s.caught_up()).await;
    assert_eq!(lag_metric(&server, bind_addr, ""), 0.0);
    assert_eq!(lag_metric(&server, bind_addr, "_seconds"), 0.0);

    // BIND down, the zone changes twice: the secondary is behind, by serials and in time.
    tokio::task::block_in_place(|| bind.stop());
    for address in ["192.0.2.2", "192.0.2.3"] {
        desired.lock().unwrap()[0] = a("app.example.com", address);
        assert!(syncer.run_once().await.unwrap().converged);
    }
    wait_secondary(&server, "behind and unanswering", |s| {
        !s.caught_up() && s.error.is_some() && s.behind.is_some_and(|b| b > 0)
    })
    .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(lag_metric(&server, bind_addr, "") > 0.0);
    assert!(lag_metric(&server, bind_addr, "_seconds") >= 1.0);

    // Back: it transfers what it missed, and the lag falls to 0.
    tokio::task::block_in_place(|| bind.resume());
    wait_secondary(&server, "caught up again", |s| s.caught_up()).await;
    assert_eq!(lag_metric(&server, bind_addr, ""), 0.0);
    assert_eq!(lag_metric(&server, bind_addr, "_seconds"), 0.0);
    assert_eq!(
        dig::query(bind.addr(), "app.example.com", "A", false).data("A"),
        ["192.0.2.3"]
    );
}

/// `gateway-dns serve` over `manifests` with the embedded server on `dns`, a secondary
/// (nothing listens there: its NOTIFYs go unanswered) and the transfer key; killed on drop.
pub(crate) struct Replica(std::process::Child);

impl Replica {
    fn start(manifests: &Path, work: &Path, dns: u16) -> Replica {
        Self::start_with(manifests, work, dns, &[])
    }

    /// [`Replica::start`] with `extra` arguments to `serve`.
    pub(crate) fn start_with(
        manifests: &Path,
        work: &Path,
        dns: u16,
        extra: &[&std::ffi::OsStr],
    ) -> Replica {
        let secret = work.join("tsig.secret");
        std::fs::write(&secret, SECRET).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_gateway-dns"))
            .args(["serve", "--manifests"])
            .arg(manifests)
            .args(["--listen", &format!("127.0.0.1:{}", free_port())])
            .args(["--dns-listen", &format!("127.0.0.1:{dns}")])
            .args(["--metrics-listen", &format!("127.0.0.1:{}", free_port())])
            .args(["--service-name", "gateway-dns"])
            .args(["--service-namespace", "gateway-dns-system"])
            .arg("--local-ca-out")
            .arg(work.join("ca.crt"))
            .args([
                "--embedded-secondary",
                &format!("127.0.0.1:{}", free_port()),
            ])
            .args(["--embedded-tsig-key-name", KEY_NAME])
            .arg("--embedded-tsig-secret-file")
            .arg(&secret)
            .args(extra)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("serve starts");
        let replica = Replica(child);
        crate::support::net::wait_until("a.example.com resolves", Duration::from_secs(30), || {
            dig::query(([127, 0, 0, 1], dns).into(), "a.example.com", "A", false).data("A")
                == ["203.0.113.10"]
        });
        replica
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits until at most 40 s into the current minute: serials follow one-minute windows, so
/// replicas started now (and restarted within seconds) share one window.
pub(crate) fn wait_for_early_in_a_minute() {
    let seconds_into_minute = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |now| now.as_secs() % 60)
    };
    while seconds_into_minute() > 40 {
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Two replicas' working directories, made under `work`.
pub(crate) fn replica_dirs(work: &Path) -> (PathBuf, PathBuf) {
    let dirs = (work.join("a"), work.join("b"));
    std::fs::create_dir_all(&dirs.0).unwrap();
    std::fs::create_dir_all(&dirs.1).unwrap();
    dirs
}

/// The records of a `dig` zone transfer's output, without comments and blank lines.
pub(crate) fn zone_records(transfer: &str) -> Vec<String> {
    transfer
        .lines()
        .filter(|line| !line.is_empty() && !line.starts_with(';'))
        .map(String::from)
        .collect()
}

fn serial(dns: u16) -> u32 {
    dig::query(([127, 0, 0, 1], dns).into(), "example.com", "SOA", true)
        .soa_serial()
        .expect("SOA serial")
}

#[test]
fn replicas_over_the_same_manifests_agree_and_a_restart_keeps_the_serial() {
    let work = tempfile::tempdir().unwrap();
    let manifests = crate::support::webhook::examples_dir().join("cluster");
    let key = format!("hmac-sha256:{KEY_NAME}:{SECRET}");
    // The serial follows minute windows: both start in the same one, and the restart too.
    wait_for_early_in_a_minute();
    let (dns_a, dns_b) = (free_port(), free_port());
    let (dir_a, dir_b) = replica_dirs(work.path());
    let replica_a = Replica::start(&manifests, &dir_a, dns_a);
    let _replica_b = Replica::start(&manifests, &dir_b, dns_b);
    let transfer_a = axfr(([127, 0, 0, 1], dns_a).into(), "example.com", Some(&key));
    let transfer_b = axfr(([127, 0, 0, 1], dns_b).into(), "example.com", Some(&key));
    assert!(transfer_a.contains("203.0.113.10"), "{transfer_a}");
    assert_eq!(zone_records(&transfer_a), zone_records(&transfer_b));
    let before = serial(dns_a);
    assert_eq!(before, serial(dns_b));

    drop(replica_a);
    let _replica_a = Replica::start(&manifests, &dir_a, dns_a);
    let after = serial(dns_a);
    eprintln!("serial before the restart {before}, after {after}");
    assert!(
        after >= before,
        "restart lowered the serial: {before} -> {after}"
    );
    assert_eq!(
        zone_records(&axfr(
            ([127, 0, 0, 1], dns_a).into(),
            "example.com",
            Some(&key)
        )),
        zone_records(&transfer_b)
    );
}
