//! Two `serve` processes on one Lease, writing to one real BIND through RFC 2136: only the
//! Lease holder writes; when it is killed the other takes the Lease once it expires and takes
//! over the records without writing them a second time; when it is stopped it frees the Lease,
//! and the next replica need not wait.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::bind::{Bind, KEY_NAME, SECRET};
use crate::support::cluster::{ControlPlane, Serve, public_gateway};
use crate::support::dig;
use crate::support::objects;

/// serve's Lease duration (20 s) plus its retry period (5 s, with jitter up to 6 s), and some
/// slack for a busy two-core machine.
const TAKEOVER_LIMIT: Duration = Duration::from_secs(32);
const LIMIT: Duration = Duration::from_secs(30);
/// The series of the changes written, one per action.
const WRITTEN: [&str; 3] = [
    "gateway_dns_sync_changes_total{action=\"create\"}",
    "gateway_dns_sync_changes_total{action=\"update\"}",
    "gateway_dns_sync_changes_total{action=\"delete\"}",
];
const LEADER: &str = "gateway_dns_leader";
const LAST_SYNC: &str = "gateway_dns_last_successful_sync_timestamp_seconds";

/// On Gateway `public` of its own namespace (the parentRef leaves the namespace out).
fn route(name: &str, hostname: &str) -> String {
    let parents = json!([{"name": "public"}]);
    objects::yaml(&objects::http_route("infra", name, parents, &[hostname]))
}

fn holder(cluster: &ControlPlane) -> String {
    cluster
        .kubectl(&[
            "get",
            "lease",
            "gateway-dns",
            "-n",
            "gateway-dns",
            "-o",
            "jsonpath={.spec.holderIdentity}",
        ])
        .stdout
}

async fn wait_holder(cluster: &ControlPlane, identity: &str, limit: Duration) -> Duration {
    let start = Instant::now();
    while start.elapsed() < limit {
        if holder(cluster) == identity {
            return start.elapsed();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "{identity} does not hold the Lease after {limit:?} (holder: {:?})",
        holder(cluster)
    );
}

async fn bind_answer(bind: &Bind, name: &str) -> Vec<String> {
    let (server, name) = (bind.addr(), name.to_string());
    tokio::task::spawn_blocking(move || dig::query(server, &name, "A", false).data("A"))
        .await
        .unwrap()
}

async fn wait_bind(bind: &Bind, name: &str, expected: &[&str]) {
    let start = Instant::now();
    while start.elapsed() < LIMIT {
        if bind_answer(bind, name).await == expected {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("BIND does not answer {expected:?} for {name}");
}

async fn serial(bind: &Bind) -> u32 {
    let (server, zone) = (bind.addr(), bind.zone.clone());
    tokio::task::spawn_blocking(move || dig::query(server, &zone, "SOA", false).soa_serial())
        .await
        .unwrap()
        .expect("BIND answers the SOA")
}

/// Changes written so far, all actions together; each series exists from the start, at 0.
async fn applied(serve: &Serve) -> f64 {
    let mut total = 0.0;
    for series in WRITTEN {
        total += serve
            .metric(series)
            .await
            .unwrap_or_else(|| panic!("{series} is not exported"));
    }
    total
}

async fn leader(serve: &Serve) -> f64 {
    serve
        .metric(LEADER)
        .await
        .unwrap_or_else(|| panic!("{LEADER} is not exported"))
}

fn replica(kubeconfig: &std::path::Path, bind: &Bind, identity: &str) -> Serve {
    replica_with(kubeconfig, bind, identity, &[])
}

fn replica_with(
    kubeconfig: &std::path::Path,
    bind: &Bind,
    identity: &str,
    extra: &[&str],
) -> Serve {
    let server = bind.addr().to_string();
    let mut args = vec![
        "--provider",
        "rfc2136",
        "--zone",
        "example.com",
        "--rfc2136-server",
        &server,
        "--rfc2136-tsig-key-name",
        KEY_NAME,
        "--interval",
        "2s",
        // These tests count UPDATEs by BIND's serial; the new holder's heartbeat would be one.
        "--owner-heartbeat-interval=0",
    ];
    args.extend_from_slice(extra);
    Serve::start_with_env(
        kubeconfig,
        identity,
        &args,
        &[("GATEWAY_DNS_RFC2136_TSIG_SECRET", SECRET)],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_only_the_holder_writes_and_a_killed_holder_is_replaced() {
    let cluster = ControlPlane::start();
    cluster.install_gateway_dns_rbac();
    let kubeconfig = cluster.service_account_kubeconfig("gateway-dns", "gateway-dns", None);
    let bind = Bind::start("example.com", "");
    cluster.apply(&public_gateway(), &[]).ok();
    cluster.gateway_address("infra/public", &["203.0.113.10"]);
    cluster.apply(&route("one", "one.example.com"), &[]).ok();

    let mut first = replica(&kubeconfig, &bind, "replica-a");
    first.wait_ready(LIMIT).await;
    wait_holder(&cluster, "replica-a", LIMIT).await;
    wait_bind(&bind, "one.example.com", &["203.0.113.10"]).await;
    let second = replica(&kubeconfig, &bind, "replica-b");
    second.wait_ready(LIMIT).await;

    // Both replicas see the new route; only the holder writes it.
    cluster.apply(&route("two", "two.example.com"), &[]).ok();
    wait_bind(&bind, "two.example.com", &["203.0.113.10"]).await;
    // Several resync intervals pass with both running: still one writer.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(holder(&cluster), "replica-a");
    assert!(applied(&first).await > 0.0, "the holder applied nothing");
    assert_eq!(applied(&second).await, 0.0, "the standby wrote to DNS");
    assert_eq!(leader(&first).await, 1.0, "the holder's {LEADER}");
    assert_eq!(leader(&second).await, 0.0, "the standby's {LEADER}");
    let serial_before = serial(&bind).await;

    first.kill();
    let takeover = wait_holder(&cluster, "replica-b", TAKEOVER_LIMIT).await;
    let led_at = Instant::now();
    while leader(&second).await != 1.0 {
        assert!(
            led_at.elapsed() < LIMIT,
            "the new holder's {LEADER} stays 0"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The new holder's first passes find every record in place and its own (same owner id):
    // nothing is written twice, and BIND's serial (one step per UPDATE) does not move.
    let synced_at = Instant::now();
    while second.metric(LAST_SYNC).await.unwrap_or(0.0) == 0.0 {
        assert!(
            synced_at.elapsed() < LIMIT,
            "the new holder never completed a sync pass:\n{}",
            second.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        applied(&second).await,
        0.0,
        "the new holder rewrote existing records"
    );
    assert_eq!(
        serial(&bind).await,
        serial_before,
        "an UPDATE was sent for records in place"
    );
    assert_eq!(
        bind_answer(&bind, "one.example.com").await,
        ["203.0.113.10"]
    );

    // And it writes what changes from now on.
    cluster
        .apply(&route("three", "three.example.com"), &[])
        .ok();
    wait_bind(&bind, "three.example.com", &["203.0.113.10"]).await;
    assert!(serial(&bind).await > serial_before);
    // The counter follows the pass that wrote (metrics are exported every few seconds).
    let counted = Instant::now();
    while applied(&second).await == 0.0 {
        assert!(
            counted.elapsed() < LIMIT,
            "the new holder's writes were not counted"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    eprintln!("takeover after the holder was killed: {takeover:?}");
}

/// A lease duration no test waits out: a replica that holds the Lease under it did not wait.
const HOUR_LEASE: [&str; 6] = [
    "--leader-election-lease-duration",
    "3600s",
    "--leader-election-renew-deadline",
    "3000s",
    "--leader-election-retry-period",
    "1s",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_starts_alone_after_a_shutdown_writes_without_waiting_out_the_lease() {
    let cluster = ControlPlane::start();
    cluster.install_gateway_dns_rbac();
    let kubeconfig = cluster.service_account_kubeconfig("gateway-dns", "gateway-dns", None);
    let bind = Bind::start("example.com", "");
    cluster.apply(&public_gateway(), &[]).ok();
    cluster.gateway_address("infra/public", &["203.0.113.10"]);
    cluster.apply(&route("one", "one.example.com"), &[]).ok();

    let mut first = replica_with(&kubeconfig, &bind, "replica-a", &HOUR_LEASE);
    first.wait_ready(LIMIT).await;
    wait_holder(&cluster, "replica-a", LIMIT).await;
    wait_bind(&bind, "one.example.com", &["203.0.113.10"]).await;

    // Stopped as Kubernetes stops a pod (a rolling update): it frees the Lease on its way out.
    let status = tokio::task::block_in_place(|| first.terminate(LIMIT));
    assert!(
        status.success(),
        "serve exits cleanly on SIGTERM: {status:?}"
    );
    assert_eq!(holder(&cluster), "", "the Lease is freed");

    // The next replica, alone and under another name, takes it and writes at once: under an
    // hour-long lease, holding it within the test's limit means it did not wait the lease out.
    cluster.apply(&route("two", "two.example.com"), &[]).ok();
    let second = replica_with(&kubeconfig, &bind, "replica-b", &HOUR_LEASE);
    second.wait_ready(LIMIT).await;
    wait_holder(&cluster, "replica-b", LIMIT).await;
    wait_bind(&bind, "two.example.com", &["203.0.113.10"]).await;
    assert_eq!(leader(&second).await, 1.0, "the new holder's {LEADER}");
}
