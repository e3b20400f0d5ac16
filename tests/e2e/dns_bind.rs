//! RFC 2136 provider and sync loop against a real BIND 9, checked with real DNS queries.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use gateway_dns::dns::provider::rfc2136::{Rfc2136Config, Rfc2136Provider};
use gateway_dns::dns::{Changes, Endpoint, Provider};
use gateway_dns::metrics::Metrics;
use gateway_dns::model::RecordType;
use gateway_dns::sync::{self, Policy, SyncConfig, Syncer};
use gateway_dns::tsig::TsigKey;
use tokio::sync::Notify;

use crate::support::bind::{Bind, KEY_NAME};
use crate::support::dig;
use crate::support::records::{Desired, source_of};
use crate::support::records::{
    a, assert_blocked_by_foreign, change_app_targets_and_ttl, colliding_with_foreign,
    foreign_zone_lines, remove_everything,
};

const ZONE: &str = "example.com";
const OWNER: &str = "gw-test";

fn syncer(bind: &Bind, desired: &Desired, policy: Policy) -> Syncer {
    let provider = Arc::new(Rfc2136Provider::new(bind.provider_config()).unwrap());
    let mut config = SyncConfig::new(OWNER, vec![ZONE.into()]);
    config.policy = policy;
    Syncer::new(provider, source_of(desired), config, Default::default())
}

fn lookup(bind: &Bind, name: &str, rtype: &str) -> Vec<String> {
    dig::query(bind.addr(), name, rtype, false).data(rtype)
}

fn assert_foreign_untouched(bind: &Bind) {
    crate::support::records::assert_foreign_untouched(bind.addr(), ZONE);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bind_records_follow_desired_set_and_foreign_records_survive() {
    let bind = Bind::start(ZONE, &foreign_zone_lines());
    let mut wanted = vec![
        a("app.example.com", &["192.0.2.1"]).with_ttl(120),
        a("*.wild.example.com", &["192.0.2.5"]),
        Endpoint::new("alias.example.com", RecordType::CNAME, ["lb.example.net"]),
        Endpoint::new("v6.example.com", RecordType::AAAA, ["2001:db8::1"]),
    ];
    // Wanted, but someone else's: must be reported and left alone.
    wanted.extend(colliding_with_foreign(ZONE));
    let desired: Desired = Arc::new(Mutex::new(wanted));
    let syncer = syncer(&bind, &desired, Policy::Sync);

    let first = syncer.run_once().await.unwrap();
    assert!(!first.converged, "blocked records mean not converged");
    assert_blocked_by_foreign(&first.pass.plan);
    assert!(
        first.remaining.is_empty(),
        "second listing finds nothing left to write"
    );

    let app = dig::query(bind.addr(), "app.example.com", "A", false);
    assert_eq!(app.data("A"), ["192.0.2.1"]);
    assert_eq!(app.answer[0].ttl, 120, "TTL honoured");
    assert_eq!(lookup(&bind, "x.y.wild.example.com", "A"), ["192.0.2.5"]);
    assert_eq!(
        lookup(&bind, "alias.example.com", "CNAME"),
        ["lb.example.net."]
    );
    assert_eq!(lookup(&bind, "v6.example.com", "AAAA"), ["2001:db8::1"]);
    assert_eq!(
        lookup(&bind, "a-app.example.com", "TXT"),
        [
            "heritage=external-dns,external-dns/owner=gw-test,external-dns/resource=httproute/shop/web"
        ]
    );
    assert_eq!(lookup(&bind, "a-*.wild.example.com", "TXT").len(), 1);
    assert_foreign_untouched(&bind);

    change_app_targets_and_ttl(&syncer, &desired, bind.addr(), ZONE).await;

    // Everything disappears, ours only.
    let ours = [
        ("app.example.com", "A"),
        ("a-app.example.com", "TXT"),
        ("alias.example.com", "CNAME"),
        ("v6.example.com", "AAAA"),
        ("aaaa-v6.example.com", "TXT"),
    ];
    remove_everything(&syncer, &desired, bind.addr(), &ours).await;
    assert!(lookup(&bind, "x.wild.example.com", "A").is_empty());
    assert_foreign_untouched(&bind);

    // Steady state: a further pass writes nothing.
    let idle = syncer.sync_pass().await.unwrap();
    assert_eq!(idle.applied, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bind_upsert_only_and_create_only_never_delete() {
    let bind = Bind::start(ZONE, &foreign_zone_lines());
    let desired: Desired = Arc::new(Mutex::new(vec![a("keep.example.com", &["192.0.2.1"])]));
    syncer(&bind, &desired, Policy::Sync)
        .run_once()
        .await
        .unwrap();

    *desired.lock().unwrap() = vec![a("keep.example.com", &["192.0.2.2"])];
    let create_only = syncer(&bind, &desired, Policy::CreateOnly)
        .run_once()
        .await
        .unwrap();
    assert_eq!(create_only.pass.applied, 0);
    assert_eq!(lookup(&bind, "keep.example.com", "A"), ["192.0.2.1"]);

    let upsert = syncer(&bind, &desired, Policy::UpsertOnly);
    upsert.run_once().await.unwrap();
    assert_eq!(lookup(&bind, "keep.example.com", "A"), ["192.0.2.2"]);
    desired.lock().unwrap().clear();
    upsert.run_once().await.unwrap();
    assert_eq!(
        lookup(&bind, "keep.example.com", "A"),
        ["192.0.2.2"],
        "upsert-only keeps it"
    );
    assert_foreign_untouched(&bind);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bind_wrong_tsig_secret_is_a_clear_error_and_writes_nothing() {
    let bind = Bind::start(ZONE, "");
    let wrong =
        TsigKey::from_base64(KEY_NAME, "hmac-sha256".parse().unwrap(), "d3Jvbmctc2VjcmV0").unwrap();
    let provider = Rfc2136Provider::new(Rfc2136Config::new(
        bind.addr(),
        vec![ZONE.into()],
        Some(wrong),
    ))
    .unwrap();
    let changes = Changes {
        create: vec![a("sneaky.example.com", &["192.0.2.66"])],
        ..Changes::default()
    };
    let err = provider.apply(&changes).await.unwrap_err().to_string();
    assert!(
        err.contains(&format!(
            "DNS server {} refused the update of zone example.com",
            bind.addr()
        )) && err.contains("TSIG BADSIG/NOTAUTH"),
        "{err}"
    );
    let listing = provider.records().await.unwrap_err().to_string();
    assert!(listing.contains("BADSIG"), "{listing}");
    assert_eq!(
        dig::query(bind.addr(), "sneaky.example.com", "A", false).status,
        "NXDOMAIN"
    );

    // Without any key, BIND refuses the update too.
    let unsigned =
        Rfc2136Provider::new(Rfc2136Config::new(bind.addr(), vec![ZONE.into()], None)).unwrap();
    let err = unsigned.apply(&changes).await.unwrap_err().to_string();
    assert!(err.contains("REFUSED"), "{err}");
    assert_eq!(
        dig::query(bind.addr(), "sneaky.example.com", "A", false).status,
        "NXDOMAIN"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bind_tsig_sha384_and_sha512_work() {
    for algorithm in ["hmac-sha384", "hmac-sha512"] {
        let bind = Bind::start_with_algorithm(ZONE, "", algorithm);
        let desired: Desired = Arc::new(Mutex::new(vec![a("alg.example.com", &["192.0.2.7"])]));
        let report = syncer(&bind, &desired, Policy::Sync)
            .run_once()
            .await
            .unwrap();
        assert!(report.converged, "{algorithm}");
        assert_eq!(
            lookup(&bind, "alg.example.com", "A"),
            ["192.0.2.7"],
            "{algorithm}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bind_adopts_external_dns_records_with_same_owner_id() {
    let seed = "adopt IN A 192.0.2.50
a-adopt IN TXT \"heritage=external-dns,external-dns/owner=gw-test,external-dns/resource=ingress/default/old\"
legacy IN A 192.0.2.60
legacy IN TXT \"heritage=external-dns,external-dns/owner=gw-test,external-dns/resource=ingress/default/old\"";
    let bind = Bind::start(ZONE, seed);
    let desired: Desired = Arc::new(Mutex::new(vec![
        a("adopt.example.com", &["192.0.2.51"]),
        a("legacy.example.com", &["192.0.2.60"]),
    ]));
    let syncer = syncer(&bind, &desired, Policy::Sync);
    let report = syncer.run_once().await.unwrap();
    assert!(report.converged, "{:?}", report.pass.plan.blocked);
    assert_eq!(lookup(&bind, "adopt.example.com", "A"), ["192.0.2.51"]);
    let ours =
        "heritage=external-dns,external-dns/owner=gw-test,external-dns/resource=httproute/shop/web";
    assert_eq!(lookup(&bind, "a-adopt.example.com", "TXT"), [ours]);
    assert_eq!(
        lookup(&bind, "legacy.example.com", "A"),
        ["192.0.2.60"],
        "no downtime"
    );
    assert_eq!(
        lookup(&bind, "a-legacy.example.com", "TXT"),
        [ours],
        "new format written"
    );

    desired.lock().unwrap().clear();
    syncer.run_once().await.unwrap();
    for (name, rtype) in [
        ("adopt.example.com", "A"),
        ("a-adopt.example.com", "TXT"),
        ("legacy.example.com", "A"),
        ("legacy.example.com", "TXT"),
        ("a-legacy.example.com", "TXT"),
    ] {
        assert_eq!(
            dig::query(bind.addr(), name, rtype, false).status,
            "NXDOMAIN",
            "{name} {rtype}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bind_outage_is_retried_then_converges_with_nothing_lost() {
    let mut bind = Bind::start(ZONE, &foreign_zone_lines());
    let desired: Desired = Arc::new(Mutex::new(vec![
        a("one.example.com", &["192.0.2.1"]),
        a("two.example.com", &["192.0.2.2"]),
    ]));
    let provider = Arc::new(Rfc2136Provider::new(bind.provider_config()).unwrap());
    let mut config = SyncConfig::new(OWNER, vec![ZONE.into()]);
    config.interval = Duration::from_secs(30);
    config.pass_spacing = Duration::from_millis(50);
    config.backoff_min = Duration::from_millis(100);
    config.backoff_max = Duration::from_millis(800);
    let metrics = Arc::new(Metrics::new());
    let syncer = Arc::new(Syncer::new(
        provider,
        source_of(&desired),
        config,
        metrics.clone(),
    ));
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
    let addr = bind.addr();
    wait_for(Duration::from_secs(10), || {
        dig::query(addr, "two.example.com", "A", false).data("A") == ["192.0.2.2"]
    })
    .await;

    bind.stop();
    {
        let mut desired = desired.lock().unwrap();
        desired[0] = a("one.example.com", &["192.0.2.11"]);
        desired.push(a("three.example.com", &["192.0.2.3"]));
    }
    changes.notify_one();
    wait_for(Duration::from_secs(10), || {
        metrics.sync_errors("rfc2136") >= 3
    })
    .await;
    let errors_while_down = metrics.sync_errors("rfc2136");
    // A stopped server fails the listing: nothing was written.
    let listing_errors: f64 = metrics
        .render()
        .lines()
        .find_map(|l| {
            l.strip_prefix("gateway_dns_sync_errors_total{provider=\"rfc2136\",kind=\"list\"} ")
        })
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    assert!(listing_errors >= 3.0, "listing errors: {listing_errors}");

    bind.resume();
    wait_for(Duration::from_secs(15), || {
        dig::query(addr, "three.example.com", "A", false).data("A") == ["192.0.2.3"]
            && dig::query(addr, "one.example.com", "A", false).data("A") == ["192.0.2.11"]
    })
    .await;
    assert_eq!(
        lookup(&bind, "two.example.com", "A"),
        ["192.0.2.2"],
        "nothing lost"
    );
    assert_foreign_untouched(&bind);
    assert!(errors_while_down >= 3);
    assert!(metrics.last_successful_sync_seconds() > 0.0);
    let _ = stop_tx.send(());
    tokio::time::timeout(Duration::from_secs(5), loop_task)
        .await
        .expect("loop stops on shutdown")
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bind_dry_run_and_closed_write_gate_write_nothing() {
    let bind = Bind::start(ZONE, "");
    let desired: Desired = Arc::new(Mutex::new(vec![a("dry.example.com", &["192.0.2.1"])]));
    let provider = Arc::new(Rfc2136Provider::new(bind.provider_config()).unwrap());
    let mut config = SyncConfig::new(OWNER, vec![ZONE.into()]);
    config.dry_run = true;
    let dry = Syncer::new(
        provider.clone(),
        source_of(&desired),
        config,
        Default::default(),
    );
    let report = dry.run_once().await.unwrap();
    assert_eq!(report.pass.withheld, Some("dry run"));
    assert!(!report.converged);
    assert_eq!(report.pass.plan.changes.create.len(), 2);
    assert_eq!(
        provider
            .stats()
            .update_messages
            .load(std::sync::atomic::Ordering::Relaxed),
        0
    );

    let (gate_tx, gate_rx) = tokio::sync::watch::channel(false);
    let gated = Syncer::new(
        provider.clone(),
        source_of(&desired),
        SyncConfig::new(OWNER, vec![ZONE.into()]),
        Default::default(),
    )
    .with_write_gate(gate_rx);
    assert_eq!(
        gated.sync_pass().await.unwrap().withheld,
        Some("not the writer")
    );
    assert_eq!(
        dig::query(bind.addr(), "dry.example.com", "A", false).status,
        "NXDOMAIN"
    );
    gate_tx.send(true).unwrap();
    assert!(gated.run_once().await.unwrap().converged);
    assert_eq!(lookup(&bind, "dry.example.com", "A"), ["192.0.2.1"]);
}

async fn wait_for(limit: Duration, mut ready: impl FnMut() -> bool) {
    let start = tokio::time::Instant::now();
    while start.elapsed() < limit {
        if ready() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("condition not met within {limit:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bind_one_rejected_change_does_not_hold_back_the_batch() {
    // "foreign" appears between a listing and the apply (another writer): its create fails
    // on the "RRset does not exist" prerequisite, the other creates of the batch still land.
    let bind = Bind::start(ZONE, &foreign_zone_lines());
    let provider = Rfc2136Provider::new(bind.provider_config()).unwrap();
    let changes = Changes {
        create: vec![
            a("first.example.com", &["192.0.2.1"]),
            a("foreign.example.com", &["192.0.2.99"]),
            a("last.example.com", &["192.0.2.3"]),
        ],
        ..Changes::default()
    };
    let err = provider.apply(&changes).await.unwrap_err().to_string();
    assert!(
        err.contains("1 of 3 RRset changes were rejected") && err.contains("YXRRSET"),
        "{err}"
    );
    assert_eq!(lookup(&bind, "first.example.com", "A"), ["192.0.2.1"]);
    assert_eq!(lookup(&bind, "last.example.com", "A"), ["192.0.2.3"]);
    assert_foreign_untouched(&bind);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bind_listing_cache_is_used_only_while_the_serial_proves_it_current() {
    use std::sync::atomic::Ordering::Relaxed;
    let bind = Bind::start(ZONE, &foreign_zone_lines());
    let desired: Desired = Arc::new(Mutex::new(vec![a("app.example.com", &["192.0.2.1"])]));
    let provider = Arc::new(Rfc2136Provider::new(bind.provider_config()).unwrap());
    let syncer = Syncer::new(
        provider.clone(),
        source_of(&desired),
        SyncConfig::new(OWNER, vec![ZONE.into()]),
        Default::default(),
    );
    let stats = provider.stats();
    assert!(syncer.run_once().await.unwrap().converged);
    let transfers = stats.transfers.load(Relaxed);

    // Our own change: the serial moves by exactly our messages, the cache follows.
    desired
        .lock()
        .unwrap()
        .push(a("more.example.com", &["192.0.2.2"]));
    assert_eq!(syncer.sync_pass().await.unwrap().applied, 2);
    let idle = syncer.sync_pass().await.unwrap();
    assert!(
        idle.plan.is_empty(),
        "cache carried our writes: {:?}",
        idle.plan
    );
    assert_eq!(stats.transfers.load(Relaxed), transfers, "no AXFR needed");
    assert!(stats.cache_hits.load(Relaxed) >= 2);

    // Someone else deletes our record by dynamic update: the serial gives it away.
    let other = Rfc2136Provider::new(bind.provider_config()).unwrap();
    other
        .apply(&Changes {
            delete: vec![a("more.example.com", &[])],
            ..Changes::default()
        })
        .await
        .unwrap();
    assert_eq!(
        dig::query(bind.addr(), "more.example.com", "A", false).status,
        "NXDOMAIN"
    );
    let repair = syncer.sync_pass().await.unwrap();
    assert_eq!(
        stats.incremental_transfers.load(Relaxed),
        1,
        "serial changed: what changed is read (IXFR)"
    );
    assert_eq!(stats.transfers.load(Relaxed), transfers, "no AXFR");
    assert_eq!(repair.applied, 1, "{:?}", repair.plan.changes);
    assert_eq!(lookup(&bind, "more.example.com", "A"), ["192.0.2.2"]);
    assert_foreign_untouched(&bind);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletions_wait_while_the_removal_hold_gives_a_reason() {
    let bind = Bind::start(ZONE, &foreign_zone_lines());
    let desired: Desired = Arc::new(Mutex::new(vec![
        a("keep.example.com", &["192.0.2.1"]),
        a("gone.example.com", &["192.0.2.2"]),
    ]));
    let why = "HTTPRoute not served, not yet confirmed";
    let hold = Arc::new(Mutex::new(Some(why.to_string())));
    let syncer = syncer(&bind, &desired, Policy::Sync).with_removal_hold({
        let hold = hold.clone();
        Arc::new(move || hold.lock().unwrap().clone())
    });
    // Creates go through a hold.
    let report = syncer.run_once().await.unwrap();
    assert!(report.converged, "{report:?}");
    assert_eq!(lookup(&bind, "gone.example.com", "A"), ["192.0.2.2"]);

    // A name no longer desired while the hold lasts: nothing is deleted, and the pass says why.
    desired
        .lock()
        .unwrap()
        .retain(|e| e.dns_name.starts_with("keep"));
    let report = syncer.run_once().await.unwrap();
    assert_eq!(report.pass.removals_held.as_deref(), Some(why));
    assert!(report.pass.plan.changes.delete.is_empty(), "{report:?}");
    assert!(report.pass.plan.held_by_policy > 0, "{report:?}");
    assert!(!report.converged, "held deletions are not convergence");
    assert_eq!(lookup(&bind, "gone.example.com", "A"), ["192.0.2.2"]);

    // The hold ends: the next pass deletes, and only what we own.
    *hold.lock().unwrap() = None;
    let report = syncer.run_once().await.unwrap();
    assert!(report.converged, "{report:?}");
    assert_eq!(report.pass.removals_held, None);
    assert!(lookup(&bind, "gone.example.com", "A").is_empty());
    assert_eq!(lookup(&bind, "keep.example.com", "A"), ["192.0.2.1"]);
    assert_foreign_untouched(&bind);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_without_our_records_is_listed_again_before_anything_is_written() {
    let bind = Bind::start(ZONE, "");
    let desired: Desired = Arc::new(Mutex::new(vec![
        a("one.example.com", &["192.0.2.1"]),
        a("two.example.com", &["192.0.2.2"]),
    ]));
    let metrics = Arc::new(Metrics::new());
    let provider = Arc::new(Rfc2136Provider::new(bind.provider_config()).unwrap());
    let syncer = Syncer::new(
        provider,
        source_of(&desired),
        SyncConfig::new(OWNER, vec![ZONE.into()]),
        metrics.clone(),
    );
    assert!(syncer.run_once().await.unwrap().converged);

    // Another client removes every record of ours (the zone's own NS address stays): the
    // next listing holds none of our two ownership records. Nothing is written on the strength
    // of one such listing.
    let other = Rfc2136Provider::new(bind.provider_config()).unwrap();
    let ours: Vec<Endpoint> = other
        .records()
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.dns_name.contains("one") || r.dns_name.contains("two"))
        .collect();
    assert_eq!(ours.len(), 4, "{ours:?}");
    other
        .apply(&Changes {
            delete: ours,
            ..Changes::default()
        })
        .await
        .unwrap();
    let error = syncer.run_once().await.unwrap_err();
    assert!(
        matches!(error, sync::Error::OwnedRecordsMissing { before: 2 }),
        "{error}"
    );
    assert!(lookup(&bind, "one.example.com", "A").is_empty());
    let series = |decision: &str| {
        format!(
            "gateway_dns_absences_total{{source=\"rfc2136\",absence=\"owned_missing\",decision=\"{decision}\"}} 1"
        )
    };
    assert!(
        metrics.render().contains(&series("held")),
        "{}",
        metrics.render()
    );

    // The next listing agrees: the zone is empty, and the records are written again.
    let report = syncer.run_once().await.unwrap();
    assert!(report.converged, "{report:?}");
    assert_eq!(lookup(&bind, "one.example.com", "A"), ["192.0.2.1"]);
    assert!(
        metrics.render().contains(&series("confirmed")),
        "{}",
        metrics.render()
    );
}

/// A syncer of `owner` that shares `b.example.com` with other owners (`--shared-name`).
fn sharing(bind: &Bind, owner: &str, desired: &Desired) -> Syncer {
    let provider = Arc::new(Rfc2136Provider::new(bind.provider_config()).unwrap());
    let mut config = SyncConfig::new(owner, vec![ZONE.into()]);
    config.shared_names = vec!["b.example.com".into()];
    Syncer::new(provider, source_of(desired), config, Default::default())
}

fn sorted(mut values: Vec<String>) -> Vec<String> {
    values.sort();
    values
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bind_a_shared_name_is_the_union_of_its_owners_and_each_removes_only_its_own() {
    let bind = Bind::start(ZONE, "");
    let east_wants: Desired = Arc::new(Mutex::new(vec![
        a("b.example.com", &["10.0.0.2"]).with_ttl(300),
    ]));
    let west_wants: Desired = Arc::new(Mutex::new(vec![
        a("b.example.com", &["10.0.0.1"]).with_ttl(300),
    ]));
    let east = sharing(&bind, "east", &east_wants);
    let west = sharing(&bind, "west", &west_wants);
    assert!(east.run_once().await.unwrap().converged);
    assert!(west.run_once().await.unwrap().converged);
    assert_eq!(
        sorted(lookup(&bind, "b.example.com", "A")),
        ["10.0.0.1", "10.0.0.2"]
    );
    let values = lookup(&bind, "a-b.example.com", "TXT");
    assert_eq!(values.len(), 2, "one ownership value per owner: {values:?}");
    assert!(
        values
            .iter()
            .any(|v| v.contains("owner=east") && v.contains("gateway-dns/shared=10.0.0.2"))
    );
    assert!(
        values
            .iter()
            .any(|v| v.contains("owner=west") && v.contains("gateway-dns/shared=10.0.0.1"))
    );
    // No flap: each owner's next pass writes nothing.
    for syncer in [&east, &west, &east] {
        assert_eq!(syncer.sync_pass().await.unwrap().applied, 0);
    }

    // An edit planned against a listing that no longer holds is refused whole by BIND.
    let provider = Rfc2136Provider::new(bind.provider_config()).unwrap();
    let stale = provider.records().await.unwrap();
    east_wants.lock().unwrap()[0] = a("b.example.com", &["10.0.0.3"]).with_ttl(300);
    assert!(east.run_once().await.unwrap().converged);
    let late = sync::plan_shared(
        &[],
        &stale,
        &gateway_dns::dns::registry::TxtRegistry::new("west"),
        Policy::Sync,
        &[ZONE.into()],
        &["b.example.com".into()],
    );
    assert_eq!(late.changes.shared.len(), 1, "{:?}", late.changes);
    let refused = provider.apply(&late.changes).await;
    assert!(
        refused.is_err(),
        "a stale shared edit must fail its prerequisites"
    );
    assert_eq!(
        sorted(lookup(&bind, "b.example.com", "A")),
        ["10.0.0.1", "10.0.0.3"],
        "nothing of the stale edit landed"
    );

    // `zone owners` lists the name under both owners; `zone release --owner east` removes
    // east's part only, as east's own sync loop would.
    let zone = |args: &[&str]| {
        let mut all: Vec<String> = vec!["zone".into(), args[0].into()];
        all.extend(bind.serve_args());
        all.extend(args[1..].iter().map(|a| a.to_string()));
        let run = std::process::Command::new(env!("CARGO_BIN_EXE_gateway-dns"))
            .args(&all)
            .envs(bind.serve_env())
            .output()
            .unwrap();
        assert!(run.status.success(), "{run:?}");
        String::from_utf8_lossy(&run.stdout).into_owned()
    };
    let owners: serde_json::Value =
        serde_json::from_str(&zone(&["owners", "--output", "json"])).unwrap();
    for owner in ["east", "west"] {
        let listed = owners["owners"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["owner"] == owner)
            .unwrap_or_else(|| panic!("{owner} in {owners:#}"));
        assert_eq!(listed["names"], serde_json::json!(["b.example.com"]));
    }
    let released = zone(&["release", "--owner", "east", "--force"]);
    assert!(
        released.contains("part of shared b.example.com A: 10.0.0.3"),
        "{released}"
    );
    assert_eq!(lookup(&bind, "b.example.com", "A"), ["10.0.0.1"]);
    let values = lookup(&bind, "a-b.example.com", "TXT");
    assert_eq!(values.len(), 1);
    assert!(values[0].contains("owner=west"));
    // East's route goes too: nothing of west's moves.
    east_wants.lock().unwrap().clear();
    assert!(
        east.run_once().await.is_err(),
        "east lists none of its own records: held once"
    );
    assert!(east.run_once().await.unwrap().converged);
    assert_eq!(lookup(&bind, "b.example.com", "A"), ["10.0.0.1"]);
    // The last owner's removal removes the name and its ownership record.
    west_wants.lock().unwrap().clear();
    assert!(west.run_once().await.unwrap().converged);
    assert!(lookup(&bind, "b.example.com", "A").is_empty());
    assert!(lookup(&bind, "a-b.example.com", "TXT").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bind_an_update_or_delete_needs_its_ownership_record_as_listed() {
    let bind = Bind::start(ZONE, "");
    let desired: Desired = Arc::new(Mutex::new(vec![
        a("app.example.com", &["192.0.2.1"]),
        a("old.example.com", &["192.0.2.2"]),
    ]));
    let syncer = syncer(&bind, &desired, Policy::Sync);
    assert!(syncer.run_once().await.unwrap().converged);
    let provider = Rfc2136Provider::new(bind.provider_config()).unwrap();
    let listed = provider.records().await.unwrap();
    let plan = sync::plan(
        &[a("app.example.com", &["192.0.2.9"])],
        &listed,
        OWNER,
        Policy::Sync,
        &[ZONE.into()],
    );
    assert_eq!(plan.changes.update.len(), 1);
    assert_eq!(
        plan.changes.delete.len(),
        2,
        "old's record and its ownership"
    );
    // Meanwhile the names change hands (a release and another owner's claim).
    let east = gateway_dns::dns::registry::ownership_value("east", None);
    let handed = Changes {
        update: ["a-app.example.com", "a-old.example.com"]
            .map(|name| Endpoint::new(name, RecordType::TXT, [east.clone()]))
            .to_vec(),
        ..Changes::default()
    };
    provider.apply(&handed).await.unwrap();
    assert!(
        provider.apply(&plan.changes).await.is_err(),
        "the stale update and deletes fail their prerequisites"
    );
    assert_eq!(lookup(&bind, "app.example.com", "A"), ["192.0.2.1"]);
    assert_eq!(lookup(&bind, "old.example.com", "A"), ["192.0.2.2"]);
    assert_eq!(lookup(&bind, "a-old.example.com", "TXT").len(), 1);
    // The next passes see the new owner and leave both alone (the first holds back: no
    // record of ours is listed any more, which the second listing confirms).
    assert!(syncer.sync_pass().await.is_err());
    assert_eq!(syncer.sync_pass().await.unwrap().applied, 0);
    assert_eq!(lookup(&bind, "app.example.com", "A"), ["192.0.2.1"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bind_a_record_of_an_owner_gone_silent_is_adopted_after_the_bound() {
    use gateway_dns::dns::registry::{heartbeat, ownership_value};
    let bind = Bind::start(ZONE, "");
    let provider = Rfc2136Provider::new(bind.provider_config()).unwrap();
    let now = heartbeat::unix_now();
    let east = |beat_at: i64| Changes {
        update: vec![heartbeat::record("east", "e1", beat_at, ZONE)],
        ..Changes::default()
    };
    provider
        .apply(&Changes {
            create: vec![
                Endpoint::new(
                    "a-b.example.com",
                    RecordType::TXT,
                    [ownership_value("east", Some("httproute/apps/b1"))],
                ),
                a("b.example.com", &["203.0.113.10"]),
            ],
            ..east(now)
        })
        .await
        .unwrap();
    let desired: Desired = Arc::new(Mutex::new(vec![a("b.example.com", &["198.51.100.20"])]));
    let mut config = SyncConfig::new("west", vec![ZONE.into()]);
    config.adopt_after = Some(Duration::from_secs(60));
    let west = Syncer::new(
        Arc::new(Rfc2136Provider::new(bind.provider_config()).unwrap()),
        source_of(&desired),
        config,
        Default::default(),
    );
    // A fresh heartbeat: east's, blocked.
    let pass = west.sync_pass().await.unwrap();
    assert_eq!(pass.applied, 0);
    assert_eq!(pass.plan.blocked.len(), 1, "{:?}", pass.plan);
    assert_eq!(lookup(&bind, "b.example.com", "A"), ["203.0.113.10"]);
    // Silent for longer than the bound: adopted, the ownership value now west's.
    provider.apply(&east(now - 120)).await.unwrap();
    let pass = west.sync_pass().await.unwrap();
    assert_eq!(
        pass.plan.changes.adopted,
        [(
            "b.example.com".to_string(),
            RecordType::A,
            "east".to_string()
        )]
    );
    assert_eq!(lookup(&bind, "b.example.com", "A"), ["198.51.100.20"]);
    let values = lookup(&bind, "a-b.example.com", "TXT");
    assert_eq!(values.len(), 1);
    assert!(values[0].contains("owner=west"), "{values:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bind_a_zone_read_before_is_brought_up_to_date_by_ixfr() {
    use std::sync::atomic::Ordering;
    // A zone larger than the changes: BIND answers an IXFR whole (AXFR-style) when the
    // differences would outweigh the zone (max-ixfr-ratio).
    let filler: Vec<String> = (0..200)
        .map(|i| format!("filler-{i} IN A 198.51.100.{}", i % 250))
        .collect();
    let lines = format!("{}\n{}", foreign_zone_lines(), filler.join("\n"));
    let bind = Bind::start(ZONE, &lines);
    let reader = Rfc2136Provider::new(bind.provider_config()).unwrap();
    let writer = Rfc2136Provider::new(bind.provider_config()).unwrap();
    let first = reader.records().await.unwrap();
    assert_eq!(reader.stats().transfers.load(Ordering::Relaxed), 1);
    // Another writer: creates, then changes one record and deletes another, in three UPDATEs
    // (three versions in BIND's journal).
    let created = Changes {
        create: vec![
            a("ixfr-x.example.com", &["192.0.2.1"]),
            a("ixfr-y.example.com", &["192.0.2.2", "192.0.2.3"]),
            Endpoint::new("ixfr-note.example.com", RecordType::TXT, ["some text"]),
        ],
        ..Changes::default()
    };
    writer.apply(&created).await.unwrap();
    let changed = Changes {
        update: vec![a("ixfr-y.example.com", &["192.0.2.3", "192.0.2.4"])],
        ..Changes::default()
    };
    writer.apply(&changed).await.unwrap();
    writer
        .apply(&Changes {
            delete: vec![a("ixfr-x.example.com", &["192.0.2.1"])],
            ..Changes::default()
        })
        .await
        .unwrap();
    let second = reader.records().await.unwrap();
    assert_eq!(
        reader.stats().incremental_transfers.load(Ordering::Relaxed),
        1,
        "read by IXFR"
    );
    assert_eq!(
        reader.stats().transfers.load(Ordering::Relaxed),
        1,
        "no second AXFR"
    );
    let fresh = Rfc2136Provider::new(bind.provider_config())
        .unwrap()
        .records()
        .await
        .unwrap();
    let sorted = |mut records: Vec<Endpoint>| {
        records.sort_by(|a, b| a.key().cmp(&b.key()));
        records
    };
    assert_eq!(sorted(second), sorted(fresh), "the IXFR result is the zone");
    assert_ne!(first.len(), 0);
}
