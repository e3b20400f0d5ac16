//! Address-loss grace end to end: the engine's records through the sync loop (policy sync) into
//! the embedded authoritative server, checked with `dig`. The index's clock is moved by hand, so
//! the ten-minute default grace is tested without waiting.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use gateway_dns::authority::{EmbeddedConfig, EmbeddedDns};
use gateway_dns::engine::Config;
use gateway_dns::index::Index;
use gateway_dns::model::{Object, decode_value};
use gateway_dns::sync::desired::EngineDesired;
use gateway_dns::sync::{OnceReport, Policy, SyncConfig, Syncer};
use serde_json::{Value, json};

use crate::support::dig;
use crate::support::objects;

const START: i64 = 1_700_000_000;

fn object(value: Value) -> Object {
    decode_value(&value).unwrap().unwrap()
}

fn gateway(addresses: &[&str]) -> Object {
    let listeners = json!([objects::listener("https", "HTTPS", Some("*.example.com"))]);
    object(objects::gateway("infra", "gw", listeners, addresses))
}

fn changes(report: &OnceReport) -> usize {
    let changes = &report.pass.plan.changes;
    changes.create.len() + changes.update.len() + changes.delete.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_survive_an_address_flap_within_the_grace_and_go_after_it() {
    let mut config = EmbeddedConfig::new(vec!["example.com".into()]);
    config.listen = "127.0.0.1:0".parse().unwrap();
    let server = Arc::new(EmbeddedDns::start(config).await.unwrap());
    let addr = server.local_addr();

    let now = Arc::new(AtomicI64::new(START));
    let clock = {
        let now = now.clone();
        Arc::new(move || now.load(Ordering::SeqCst))
    };
    let index = Index::with_clock(Arc::new(Config::default()), clock);
    index.apply(object(
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "apps"}}),
    ));
    index.apply(gateway(&["192.0.2.10"]));
    let parents = json!([objects::parent("infra", "gw")]);
    index.apply(object(objects::http_route(
        "apps",
        "web",
        parents,
        &["app.example.com"],
    )));

    let mut sync_config = SyncConfig::new("grace", vec!["example.com".into()]);
    sync_config.policy = Policy::Sync;
    let syncer = Syncer::new(
        server.clone(),
        Arc::new(EngineDesired::new(index.clone())),
        sync_config,
        Default::default(),
    );
    let first = syncer.run_once().await.unwrap();
    assert!(first.converged);
    assert!(changes(&first) > 0, "the record is created");
    assert_eq!(
        dig::query(addr, "app.example.com", "A", false).data("A"),
        ["192.0.2.10"]
    );

    // The load balancer is re-provisioned: status.addresses empty for two minutes, then back.
    now.store(START + 60, Ordering::SeqCst);
    index.apply(gateway(&[]));
    let lost = syncer.run_once().await.unwrap();
    assert_eq!(changes(&lost), 0, "{:?}", lost.pass.plan);
    assert_eq!(
        dig::query(addr, "app.example.com", "A", true).data("A"),
        ["192.0.2.10"],
        "policy sync deletes nothing inside the grace"
    );
    now.store(START + 180, Ordering::SeqCst);
    assert!(!index.expire_address_losses());
    index.apply(gateway(&["192.0.2.10"]));
    let back = syncer.run_once().await.unwrap();
    assert_eq!(changes(&back), 0, "{:?}", back.pass.plan);
    assert!(back.converged);

    // Lost again, for good this time: kept through the grace, removed once it is over.
    now.store(START + 1_000, Ordering::SeqCst);
    index.apply(gateway(&[]));
    now.store(START + 1_000 + 599, Ordering::SeqCst);
    assert!(!index.expire_address_losses());
    assert_eq!(changes(&syncer.run_once().await.unwrap()), 0);
    assert_eq!(
        dig::query(addr, "app.example.com", "A", false).data("A"),
        ["192.0.2.10"]
    );
    now.store(START + 1_000 + 600, Ordering::SeqCst);
    assert!(index.expire_address_losses());
    let removed = syncer.run_once().await.unwrap();
    assert!(removed.converged);
    let deleted: Vec<(&str, &str)> = removed
        .pass
        .plan
        .changes
        .delete
        .iter()
        .map(|e| (e.dns_name.as_str(), e.record_type.as_str()))
        .collect();
    assert_eq!(
        deleted,
        [("app.example.com", "A"), ("a-app.example.com", "TXT")],
        "the record, then its ownership record"
    );
    let gone = dig::query(addr, "app.example.com", "A", false);
    assert_eq!(gone.status, "NXDOMAIN", "{gone:?}");
}
