//! PowerDNS provider and sync loop against a real PowerDNS (gsqlite3), checked with `dig`.

use std::sync::{Arc, Mutex};

use gateway_dns::dns::provider::pdns::{PdnsConfig, PdnsProvider};
use gateway_dns::dns::{Endpoint, Provider};
use gateway_dns::model::RecordType;
use gateway_dns::sync::{Policy, SyncConfig, Syncer};

use crate::support::dig;
use crate::support::pdns::{API_KEY, Pdns};
use crate::support::records::source_of;
use crate::support::records::{
    a, assert_blocked_by_foreign, change_app_targets_and_ttl, colliding_with_foreign, foreign_rows,
    remove_everything,
};

const ZONE: &str = "example.com";

/// PowerDNS with the foreign records, and a record external-dns wrote with our owner id (to be
/// adopted).
fn start() -> Pdns {
    let mut seed = foreign_rows();
    seed.push(("adopt", "A", 300, "192.0.2.50".into()));
    seed.push((
        "a-adopt",
        "TXT",
        300,
        "\"heritage=external-dns,external-dns/owner=gw,external-dns/resource=ingress/default/old\""
            .into(),
    ));
    let rows: Vec<(&str, &str, u32, &str)> = seed
        .iter()
        .map(|(label, rtype, ttl, content)| (*label, *rtype, *ttl, content.as_str()))
        .collect();
    Pdns::start(ZONE, &rows)
}

fn lookup(pdns: &Pdns, name: &str, rtype: &str) -> Vec<String> {
    dig::query(pdns.dns_addr(), name, rtype, false).data(rtype)
}

fn assert_foreign_untouched(pdns: &Pdns) {
    crate::support::records::assert_foreign_untouched(pdns.dns_addr(), ZONE);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pdns_records_follow_desired_set_foreign_survive_and_adoption() {
    let pdns = start();
    let provider = Arc::new(
        PdnsProvider::new(PdnsConfig::new(pdns.api_url(), API_KEY, vec![ZONE.into()])).unwrap(),
    );
    let mut wanted = vec![
        a("app.example.com", &["192.0.2.1"]).with_ttl(120),
        a("*.wild.example.com", &["192.0.2.5"]),
        Endpoint::new("alias.example.com", RecordType::CNAME, ["lb.example.net"]),
        Endpoint::new("v6.example.com", RecordType::AAAA, ["2001:db8::1"]),
        a("adopt.example.com", &["192.0.2.51"]),
    ];
    wanted.extend(colliding_with_foreign(ZONE));
    let desired = Arc::new(Mutex::new(wanted));
    let source = source_of(&desired);
    let mut config = SyncConfig::new("gw", vec![ZONE.into()]);
    // PowerDNS rejects `a-*.wild…`: use external-dns's wildcard replacement.
    config.registry = config
        .registry
        .with_wildcard_replacement(Some("any".into()));
    let syncer = Syncer::new(provider.clone(), source, config, Default::default());

    let first = syncer.run_once().await.unwrap();
    assert_blocked_by_foreign(&first.pass.plan);
    assert!(first.remaining.is_empty(), "{:?}", first.remaining.changes);

    let app = dig::query(pdns.dns_addr(), "app.example.com", "A", false);
    assert_eq!(app.data("A"), ["192.0.2.1"]);
    assert_eq!(app.answer[0].ttl, 120);
    assert_eq!(lookup(&pdns, "x.y.wild.example.com", "A"), ["192.0.2.5"]);
    assert_eq!(
        lookup(&pdns, "alias.example.com", "CNAME"),
        ["lb.example.net."]
    );
    assert_eq!(lookup(&pdns, "v6.example.com", "AAAA"), ["2001:db8::1"]);
    let ours =
        "heritage=external-dns,external-dns/owner=gw,external-dns/resource=httproute/shop/web";
    assert_eq!(lookup(&pdns, "a-app.example.com", "TXT"), [ours]);
    assert_eq!(lookup(&pdns, "a-any.wild.example.com", "TXT").len(), 1);
    assert_eq!(
        lookup(&pdns, "adopt.example.com", "A"),
        ["192.0.2.51"],
        "adopted and updated"
    );
    assert_eq!(lookup(&pdns, "a-adopt.example.com", "TXT"), [ours]);
    assert_foreign_untouched(&pdns);

    // The listing reads back what was written, quoting included.
    let listed = provider.records().await.unwrap();
    let app_txt = listed
        .iter()
        .find(|e| e.dns_name == "a-app.example.com" && e.record_type == RecordType::TXT)
        .unwrap();
    assert_eq!(app_txt.targets.iter().next().unwrap(), ours);

    change_app_targets_and_ttl(&syncer, &desired, pdns.dns_addr(), ZONE).await;

    // Disappear: ours only, under policy sync.
    let ours = [
        ("app.example.com", "A"),
        ("a-app.example.com", "TXT"),
        ("alias.example.com", "CNAME"),
        ("adopt.example.com", "A"),
        ("a-adopt.example.com", "TXT"),
        ("a-any.wild.example.com", "TXT"),
    ];
    remove_everything(&syncer, &desired, pdns.dns_addr(), &ours).await;
    assert!(lookup(&pdns, "x.wild.example.com", "A").is_empty());
    assert_foreign_untouched(&pdns);
    assert_eq!(syncer.sync_pass().await.unwrap().applied, 0, "steady state");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pdns_wrong_api_key_is_a_clear_error_and_nothing_is_deleted() {
    let pdns = start();
    let wrong = Arc::new(
        PdnsProvider::new(PdnsConfig::new(
            pdns.api_url(),
            "wrong-key",
            vec![ZONE.into()],
        ))
        .unwrap(),
    );
    let err = wrong.records().await.unwrap_err().to_string();
    assert!(
        err.contains("PowerDNS API refused GET") && err.contains("401"),
        "{err}"
    );

    // A listing error (here: a zone the server does not have) means no write at all.
    let provider = Arc::new(
        PdnsProvider::new(PdnsConfig::new(
            pdns.api_url(),
            API_KEY,
            vec![ZONE.into(), "missing.example".into()],
        ))
        .unwrap(),
    );
    let mut config = SyncConfig::new("gw", vec![ZONE.into(), "missing.example".into()]);
    config.policy = Policy::Sync;
    let syncer = Syncer::new(provider, Arc::new(Vec::new), config, Default::default());
    let err = syncer.sync_pass().await.unwrap_err().to_string();
    assert!(
        err.contains("listing the records failed, nothing written"),
        "{err}"
    );
    // The adopted-by-owner-id record would have been deleted by an empty desired set.
    assert_eq!(lookup(&pdns, "adopt.example.com", "A"), ["192.0.2.50"]);
    assert_foreign_untouched(&pdns);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pdns_one_rejected_change_does_not_hold_back_the_batch() {
    let pdns = start();
    let provider =
        PdnsProvider::new(PdnsConfig::new(pdns.api_url(), API_KEY, vec![ZONE.into()])).unwrap();
    let changes = gateway_dns::dns::Changes {
        create: vec![
            a("first.example.com", &["192.0.2.1"]),
            // PowerDNS refuses a `*` inside a label (HTTP 422).
            Endpoint::new("a-*.bad.example.com", RecordType::TXT, ["x"]),
            a("last.example.com", &["192.0.2.3"]),
        ],
        ..Default::default()
    };
    let err = provider.apply(&changes).await.unwrap_err().to_string();
    assert!(
        err.contains("1 of 3 RRset changes were rejected") && err.contains("422"),
        "{err}"
    );
    assert_eq!(lookup(&pdns, "first.example.com", "A"), ["192.0.2.1"]);
    assert_eq!(lookup(&pdns, "last.example.com", "A"), ["192.0.2.3"]);
}
