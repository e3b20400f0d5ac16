//! PowerDNS provider and sync loop against a real PowerDNS (gsqlite3), checked with `dig`.

use std::sync::{Arc, Mutex};

use gateway_dns::dns::pdns::{PdnsConfig, PdnsProvider};
use gateway_dns::dns::{Endpoint, Provider};
use gateway_dns::model::RecordType;
use gateway_dns::sync::{BlockReason, Policy, SyncConfig, Syncer};

use crate::support::dig;
use crate::support::pdns::{API_KEY, Pdns};

const ZONE: &str = "example.com";

fn a(name: &str, ips: &[&str]) -> Endpoint {
    Endpoint::new(name, RecordType::A, ips.iter().copied()).with_resource("httproute/shop/web")
}

fn start() -> Pdns {
    Pdns::start(
        ZONE,
        &[
            ("foreign", "A", 300, "198.51.100.7"),
            ("other", "A", 300, "198.51.100.8"),
            (
                "a-other",
                "TXT",
                300,
                "\"heritage=external-dns,external-dns/owner=someone-else\"",
            ),
            ("note", "TXT", 300, "\"v=spf1 -all\""),
            // external-dns with our owner id: adopted.
            ("adopt", "A", 300, "192.0.2.50"),
            (
                "a-adopt",
                "TXT",
                300,
                "\"heritage=external-dns,external-dns/owner=gw,external-dns/resource=ingress/default/old\"",
            ),
        ],
    )
}

fn lookup(pdns: &Pdns, name: &str, rtype: &str) -> Vec<String> {
    dig::query(pdns.dns_addr(), name, rtype, false).data(rtype)
}

fn assert_foreign_untouched(pdns: &Pdns) {
    assert_eq!(lookup(pdns, "foreign.example.com", "A"), ["198.51.100.7"]);
    assert_eq!(lookup(pdns, "other.example.com", "A"), ["198.51.100.8"]);
    assert_eq!(
        lookup(pdns, "a-other.example.com", "TXT"),
        ["heritage=external-dns,external-dns/owner=someone-else"]
    );
    assert_eq!(lookup(pdns, "note.example.com", "TXT"), ["v=spf1 -all"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pdns_records_follow_desired_set_foreign_survive_and_adoption() {
    let pdns = start();
    let provider = Arc::new(
        PdnsProvider::new(PdnsConfig::new(pdns.api_url(), API_KEY, vec![ZONE.into()])).unwrap(),
    );
    let desired = Arc::new(Mutex::new(vec![
        a("app.example.com", &["192.0.2.1"]).with_ttl(120),
        a("*.wild.example.com", &["192.0.2.5"]),
        Endpoint::new("alias.example.com", RecordType::CNAME, ["lb.example.net"]),
        Endpoint::new("v6.example.com", RecordType::AAAA, ["2001:db8::1"]),
        a("adopt.example.com", &["192.0.2.51"]),
        a("foreign.example.com", &["192.0.2.99"]),
        a("other.example.com", &["192.0.2.99"]),
    ]));
    let source = {
        let desired = desired.clone();
        Arc::new(move || desired.lock().unwrap().clone())
    };
    let mut config = SyncConfig::new("gw", vec![ZONE.into()]);
    // PowerDNS rejects `a-*.wild…`: use external-dns's wildcard replacement.
    config.txt_wildcard_replacement = Some("any".into());
    let syncer = Syncer::new(provider.clone(), source, config, Default::default());

    let first = syncer.run_once().await.unwrap();
    let mut reasons: Vec<_> = first
        .pass
        .plan
        .blocked
        .iter()
        .map(|b| b.reason.clone())
        .collect();
    reasons.sort_by_key(|r| format!("{r:?}"));
    assert_eq!(
        reasons,
        [
            BlockReason::ForeignRecord,
            BlockReason::OwnedByOther {
                owner: "someone-else".into()
            }
        ]
    );
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

    // Change.
    desired.lock().unwrap()[0] = a("app.example.com", &["192.0.2.2", "192.0.2.3"]).with_ttl(60);
    let second = syncer.run_once().await.unwrap();
    assert_eq!(second.pass.applied, 1);
    let app = dig::query(pdns.dns_addr(), "app.example.com", "A", false);
    assert_eq!(app.data("A"), ["192.0.2.2", "192.0.2.3"]);
    assert!(app.answer.iter().all(|rr| rr.ttl == 60));

    // Disappear: ours only, under policy sync.
    desired.lock().unwrap().clear();
    let third = syncer.run_once().await.unwrap();
    assert!(third.converged);
    for (name, rtype) in [
        ("app.example.com", "A"),
        ("a-app.example.com", "TXT"),
        ("alias.example.com", "CNAME"),
        ("adopt.example.com", "A"),
        ("a-adopt.example.com", "TXT"),
        ("a-any.wild.example.com", "TXT"),
    ] {
        assert_eq!(
            dig::query(pdns.dns_addr(), name, rtype, false).status,
            "NXDOMAIN",
            "{name}"
        );
    }
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
