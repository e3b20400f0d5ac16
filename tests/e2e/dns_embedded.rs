//! The embedded authoritative server, driven by the sync loop, checked with `dig`.

use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use gateway_dns::authority::{EmbeddedConfig, EmbeddedDns};
use gateway_dns::dns::{Changes, Endpoint, Provider};
use gateway_dns::metrics::{ChangeAction, Metrics};
use gateway_dns::model::RecordType;
use gateway_dns::sync::{DesiredSource, SyncConfig, Syncer};

use crate::support::dig;
use crate::support::records::source_of;

fn a(name: &str, ip: &str) -> Endpoint {
    Endpoint::new(name, RecordType::A, [ip]).with_resource("httproute/shop/web")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_server_answers_synced_records_over_udp_and_tcp() {
    let mut config = EmbeddedConfig::new(vec!["example.com".into()]);
    config.listen = "127.0.0.1:0".parse().unwrap();
    let server = Arc::new(EmbeddedDns::start(config).await.unwrap());
    let addr = server.local_addr();
    let desired = Arc::new(Mutex::new(vec![
        a("app.example.com", "192.0.2.1").with_ttl(90),
        a("deep.ent.example.com", "192.0.2.2"),
        a("*.wild.example.com", "192.0.2.3"),
        Endpoint::new("alias.example.com", RecordType::CNAME, ["app.example.com"]),
        Endpoint::new("text.example.com", RecordType::TXT, ["hello world"]),
    ]));
    let source = source_of(&desired);
    let syncer = Syncer::new(
        server.clone(),
        source,
        SyncConfig::new("gw", vec!["example.com".into()]),
        Default::default(),
    );
    let serial_before = dig::query(addr, "example.com", "SOA", false)
        .soa_serial()
        .unwrap();
    assert!(syncer.run_once().await.unwrap().converged);

    for tcp in [false, true] {
        let app = dig::query(addr, "app.example.com", "A", tcp);
        assert_eq!(app.status, "NOERROR");
        assert!(app.authoritative(), "AA bit (tcp={tcp})");
        assert_eq!(app.data("A"), ["192.0.2.1"]);
        assert_eq!(app.answer[0].ttl, 90);

        let missing = dig::query(addr, "missing.example.com", "A", tcp);
        assert_eq!(missing.status, "NXDOMAIN");
        assert!(missing.authoritative());
        assert_eq!(missing.authority[0].rtype, "SOA");

        let nodata = dig::query(addr, "app.example.com", "AAAA", tcp);
        assert_eq!(nodata.status, "NOERROR");
        assert!(nodata.answer.is_empty());
        assert_eq!(nodata.authority[0].rtype, "SOA", "NODATA carries the SOA");

        let outside = dig::query(addr, "app.example.org", "A", tcp);
        assert_eq!(outside.status, "REFUSED");
        assert!(!outside.authoritative());
    }

    // An empty non-terminal exists: NODATA, not NXDOMAIN.
    let ent = dig::query(addr, "ent.example.com", "A", false);
    assert_eq!((ent.status.as_str(), ent.answer.len()), ("NOERROR", 0));
    // Wildcard: one or more labels, never the parent itself.
    assert_eq!(
        dig::query(addr, "x.wild.example.com", "A", false).data("A"),
        ["192.0.2.3"]
    );
    assert_eq!(
        dig::query(addr, "x.y.wild.example.com", "A", false).data("A"),
        ["192.0.2.3"]
    );
    let wild_owner = dig::query(addr, "x.wild.example.com", "A", false);
    assert_eq!(wild_owner.answer[0].name, "x.wild.example.com");
    assert_eq!(
        dig::query(addr, "wild.example.com", "A", false)
            .answer
            .len(),
        0
    );
    // CNAME followed inside the zone.
    let alias = dig::query(addr, "alias.example.com", "A", false);
    assert_eq!(alias.data("CNAME"), ["app.example.com."]);
    assert_eq!(alias.data("A"), ["192.0.2.1"]);
    assert_eq!(
        dig::query(addr, "text.example.com", "TXT", true).data("TXT"),
        ["hello world"]
    );
    // Ownership records are served too (external-dns format).
    assert_eq!(
        dig::query(addr, "a-app.example.com", "TXT", false).data("TXT"),
        ["heritage=external-dns,external-dns/owner=gw,external-dns/resource=httproute/shop/web"]
    );
    assert_eq!(
        dig::query(addr, "example.com", "NS", false).data("NS"),
        ["ns1.example.com."]
    );

    // The serial grows with every change, and not without one.
    let serial_after_create = dig::query(addr, "example.com", "SOA", true)
        .soa_serial()
        .unwrap();
    assert!(serial_after_create > serial_before);
    assert_eq!(server.serial("example.com"), Some(serial_after_create));
    desired.lock().unwrap()[0] = a("app.example.com", "192.0.2.10");
    syncer.run_once().await.unwrap();
    assert_eq!(
        dig::query(addr, "app.example.com", "A", false).data("A"),
        ["192.0.2.10"]
    );
    let serial_after_update = dig::query(addr, "example.com", "SOA", false)
        .soa_serial()
        .unwrap();
    assert!(serial_after_update > serial_after_create);
    syncer.run_once().await.unwrap();
    assert_eq!(
        dig::query(addr, "example.com", "SOA", false).soa_serial(),
        Some(serial_after_update),
        "no change, no new serial"
    );

    desired.lock().unwrap().clear();
    syncer.run_once().await.unwrap();
    assert_eq!(
        dig::query(addr, "app.example.com", "A", false).status,
        "NXDOMAIN"
    );
    assert_eq!(
        dig::query(addr, "a-app.example.com", "TXT", false).status,
        "NXDOMAIN"
    );
    assert_eq!(
        dig::query(addr, "x.wild.example.com", "A", false).status,
        "NXDOMAIN"
    );
    assert!(
        dig::query(addr, "example.com", "SOA", false)
            .soa_serial()
            .unwrap()
            > serial_after_update
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_server_truncates_large_udp_answers() {
    let mut config = EmbeddedConfig::new(vec!["example.com".into()]);
    config.listen = "127.0.0.1:0".parse().unwrap();
    let server = Arc::new(EmbeddedDns::start(config).await.unwrap());
    let many: Vec<String> = (1..=200)
        .map(|i| format!("10.0.{}.{}", i / 250, i % 250))
        .collect();
    let source = move || {
        vec![Endpoint::new(
            "big.example.com",
            RecordType::A,
            many.clone(),
        )]
    };
    let syncer = Syncer::new(
        server.clone(),
        Arc::new(source),
        SyncConfig::new("gw", vec!["example.com".into()]),
        Default::default(),
    );
    syncer.run_once().await.unwrap();
    let truncated = dig::query_with(
        server.local_addr(),
        "big.example.com",
        "A",
        &["+notcp", "+ignore"],
    );
    assert!(truncated.flags.iter().any(|f| f == "tc"), "{truncated:?}");
    assert!(truncated.answer.is_empty());
    // dig retries over TCP on TC=1 by default and gets all 200.
    let full = dig::query(server.local_addr(), "big.example.com", "A", false);
    assert_eq!(full.data("A").len(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loop_writes_only_while_the_write_gate_is_open_and_catches_up_when_it_opens() {
    use std::time::Duration;
    let mut config = EmbeddedConfig::new(vec!["example.com".into()]);
    config.listen = "127.0.0.1:0".parse().unwrap();
    let server = Arc::new(EmbeddedDns::start(config).await.unwrap());
    let addr = server.local_addr();
    let (gate_tx, gate_rx) = tokio::sync::watch::channel(false);
    let source = || vec![a("leader.example.com", "192.0.2.1")];
    let mut sync_config = SyncConfig::new("gw", vec!["example.com".into()]);
    sync_config.interval = Duration::from_secs(3600);
    let metrics = Arc::new(Metrics::new());
    let syncer = Arc::new(
        Syncer::new(
            server.clone(),
            Arc::new(source),
            sync_config,
            metrics.clone(),
        )
        .with_write_gate(gate_rx),
    );
    let changes = Arc::new(tokio::sync::Notify::new());
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let task = {
        let syncer = syncer.clone();
        tokio::spawn(async move {
            syncer
                .run(changes, async {
                    let _ = stop_rx.await;
                })
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(metrics.sync_passes() >= 1);
    assert_eq!(
        dig::query(addr, "leader.example.com", "A", false).status,
        "NXDOMAIN"
    );

    gate_tx.send(true).unwrap();
    let start = std::time::Instant::now();
    while dig::query(addr, "leader.example.com", "A", false).data("A") != ["192.0.2.1"] {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "no catch-up after the gate opened"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = stop_tx.send(());
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .unwrap()
        .unwrap();
}

/// The names a pass wrote, sorted, ownership records left out.
fn written_names(changes: &Changes) -> Vec<String> {
    let mut names: Vec<String> = changes
        .create
        .iter()
        .filter(|e| e.record_type == RecordType::A)
        .map(|e| e.dns_name.clone())
        .collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_change_is_written_at_once_and_a_burst_after_it_in_one_pass() {
    use std::time::Duration;
    let mut config = EmbeddedConfig::new(vec!["example.com".into()]);
    config.listen = "127.0.0.1:0".parse().unwrap();
    let server = Arc::new(EmbeddedDns::start(config).await.unwrap());
    let desired = Arc::new(Mutex::new(Vec::new()));
    let source = source_of(&desired);
    let mut sync_config = SyncConfig::new("gw", vec!["example.com".into()]);
    // The allowance covers the initial pass and one more; it refills only after an hour, so
    // the first change can only be written at once (leading edge), and everything after it
    // waits for the next resync.
    sync_config.burst_passes = 2;
    sync_config.pass_spacing = Duration::from_secs(3600);
    sync_config.interval = Duration::from_secs(2);
    let metrics = Arc::new(Metrics::new());
    let (applied_tx, mut applied) = tokio::sync::mpsc::channel(16);
    let syncer = Arc::new(
        Syncer::new(server.clone(), source, sync_config, metrics.clone())
            .with_applied_observer(applied_tx),
    );
    let changes = Arc::new(tokio::sync::Notify::new());
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let task = {
        let (syncer, changes) = (syncer.clone(), changes.clone());
        tokio::spawn(async move {
            syncer
                .run(changes, async {
                    let _ = stop_rx.await;
                })
                .await
        })
    };
    let limit = Duration::from_secs(30);
    let waited = tokio::time::Instant::now();
    // The initial pass has ended (not only started) before the first change.
    while metrics.last_successful_sync_seconds() <= 0.0 {
        assert!(waited.elapsed() < limit, "no initial pass");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    desired
        .lock()
        .unwrap()
        .push(a("burst0.example.com", "192.0.2.1"));
    changes.notify_one();
    let first = tokio::time::timeout(limit, applied.recv())
        .await
        .expect("the first change is written without waiting for the spacing")
        .unwrap();
    assert_eq!(written_names(&first), ["burst0.example.com"]);
    assert_eq!(
        metrics.sync_passes(),
        2,
        "the initial pass, then the change's"
    );

    // Nine more, notified one by one while no allowance is left: one pass takes them all.
    for i in 1..10 {
        desired
            .lock()
            .unwrap()
            .push(a(&format!("burst{i}.example.com"), "192.0.2.1"));
        changes.notify_one();
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let rest = tokio::time::timeout(limit, applied.recv())
        .await
        .expect("the burst is written by the next pass")
        .unwrap();
    let expected: Vec<String> = (1..10).map(|i| format!("burst{i}.example.com")).collect();
    assert_eq!(
        written_names(&rest),
        expected,
        "nine notifications, one pass"
    );
    assert_eq!(metrics.sync_passes(), 3);
    let addr = server.local_addr();
    assert_eq!(
        dig::query(addr, "burst9.example.com", "A", false).data("A"),
        ["192.0.2.1"]
    );
    assert_eq!(
        metrics.sync_changes_written(),
        20,
        "10 records + 10 ownership TXT"
    );
    assert_eq!(metrics.sync_changes(ChangeAction::Create), 20);
    // The pass after the burst counted the ten records in their zone, none blocked.
    let text = metrics.render();
    for line in [
        "gateway_dns_records{zone=\"example.com\"} 10",
        "gateway_dns_records_blocked{reason=\"ownership\"} 0",
        "gateway_dns_sync_errors_total{provider=\"embedded\",kind=\"list\"} 0",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
    }
    let _ = stop_tx.send(());
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .unwrap()
        .unwrap();
}

/// The embedded server, counting how often the sync loop lists it; `with_generation` false
/// hides the server's change counter, as a provider others may write would.
struct CountedListings {
    server: Arc<EmbeddedDns>,
    listings: std::sync::atomic::AtomicUsize,
    with_generation: bool,
}

impl CountedListings {
    fn listings(&self) -> usize {
        self.listings.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Provider for CountedListings {
    fn records(&self) -> BoxFuture<'_, Result<Vec<Endpoint>, gateway_dns::dns::Error>> {
        self.listings
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.server.records()
    }

    fn apply<'a>(
        &'a self,
        changes: &'a Changes,
    ) -> BoxFuture<'a, Result<(), gateway_dns::dns::Error>> {
        self.server.apply(changes)
    }

    fn zones(&self) -> &[String] {
        self.server.zones()
    }

    fn generation(&self) -> Option<u64> {
        self.server.generation().filter(|_| self.with_generation)
    }
}

/// Desired records with a change counter, as the engine's index has one.
struct CountedDesired {
    records: Mutex<Vec<Endpoint>>,
    generation: std::sync::atomic::AtomicU64,
}

impl CountedDesired {
    fn set(&self, records: Vec<Endpoint>) {
        *self.records.lock().unwrap() = records;
        self.generation
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

impl DesiredSource for CountedDesired {
    fn desired(&self) -> Vec<Endpoint> {
        self.records.lock().unwrap().clone()
    }

    fn generation(&self) -> Option<u64> {
        Some(self.generation.load(std::sync::atomic::Ordering::SeqCst))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pass_lists_the_embedded_server_only_after_something_moved() {
    for with_generation in [true, false] {
        let mut config = EmbeddedConfig::new(vec!["example.com".into()]);
        config.listen = "127.0.0.1:0".parse().unwrap();
        let server = Arc::new(EmbeddedDns::start(config).await.unwrap());
        let addr = server.local_addr();
        let provider = Arc::new(CountedListings {
            server,
            listings: Default::default(),
            with_generation,
        });
        let source = Arc::new(CountedDesired {
            records: Mutex::new(vec![a("app.example.com", "192.0.2.1")]),
            generation: Default::default(),
        });
        let syncer = Syncer::new(
            provider.clone(),
            source.clone(),
            SyncConfig::new("gw", vec!["example.com".into()]),
            Default::default(),
        );
        // Writes, then a pass that finds nothing to change: in sync.
        assert_eq!(syncer.sync_pass().await.unwrap().applied, 2);
        assert!(syncer.sync_pass().await.unwrap().plan.is_empty());
        assert_eq!(provider.listings(), 2);
        // Nothing moved since: nothing to list, unless the provider cannot tell.
        assert!(syncer.sync_pass().await.unwrap().plan.is_empty());
        let quiet = if with_generation { 2 } else { 3 };
        assert_eq!(
            provider.listings(),
            quiet,
            "with_generation={with_generation}"
        );

        // The desired records move: listed, planned, written, answered.
        source.set(vec![a("app.example.com", "192.0.2.9")]);
        assert_eq!(syncer.sync_pass().await.unwrap().applied, 1);
        assert_eq!(provider.listings(), quiet + 1);
        let answer = dig::query(addr, "app.example.com", "A", false);
        assert_eq!(answer.data("A"), ["192.0.2.9"]);
        // The write moved the server's counter: the next pass lists and finds DNS in sync,
        // the one after has nothing to list again.
        assert!(syncer.sync_pass().await.unwrap().plan.is_empty());
        assert!(syncer.sync_pass().await.unwrap().plan.is_empty());
        let settled = if with_generation {
            quiet + 2
        } else {
            quiet + 3
        };
        assert_eq!(
            provider.listings(),
            settled,
            "with_generation={with_generation}"
        );
    }
}
