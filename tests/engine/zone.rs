//! Many clusters, one zone (ARCHITECTURE.md, "Many clusters, one zone"): a name another owner
//! id, or no owner, holds in the zone is refused to every claim of this cluster, in the
//! settlement and at admission alike; names held by this owner id are no finding. The zone
//! view is plain data set on the index.

use std::sync::Arc;

use gateway_dns::dns::registry::{TxtRegistry, ownership_value, shared_value};
use gateway_dns::dns::{Endpoint, zone_file};
use gateway_dns::engine::admission::decide;
use gateway_dns::engine::explain::explain_name;
use gateway_dns::engine::settle::settle_all;
use gateway_dns::engine::zone::ZoneView;
use gateway_dns::engine::{Action, Config, Reason};
use gateway_dns::index::Index;
use gateway_dns::model::RecordType;
use gateway_dns::zone_view::view_of;
use serde_json::Value;

use crate::objects::*;

const HELD: &str = "b.example.com";
const EAST: &str = "203.0.113.10";

/// The zone as another cluster (`east`) and an unmanaged record left it, beside this
/// cluster's (`west`) own name.
fn listing() -> Vec<Endpoint> {
    vec![
        Endpoint::new(HELD, RecordType::A, [EAST]),
        Endpoint::new(
            "a-b.example.com",
            RecordType::TXT,
            [ownership_value("east", Some("httproute/apps/b1"))],
        ),
        Endpoint::new("old.example.com", RecordType::A, ["198.51.100.1"]),
        Endpoint::new("mine.example.com", RecordType::A, [GW1]),
        Endpoint::new(
            "a-mine.example.com",
            RecordType::TXT,
            [ownership_value("west", Some("httproute/apps/mine"))],
        ),
    ]
}

fn zone() -> ZoneView {
    view_of(&listing(), &TxtRegistry::new("west"))
}

fn world() -> Vec<Value> {
    vec![
        infra(),
        apps(),
        simple_gateway("infra", "a", None, &[GW1]),
        created(
            http_route("apps", "b", on("a"), &[HELD, "free.example.com"]),
            "2025-01-01T00:00:00Z",
        ),
        created(
            http_route("apps", "mine", on("a"), &["mine.example.com"]),
            "2025-01-01T00:00:00Z",
        ),
    ]
}

fn index(objects: &[Value]) -> Index {
    let index = Index::with_config(Arc::new(Config::default()));
    for object in objects {
        index.apply(decode(object));
    }
    index
}

#[test]
fn a_name_another_owner_holds_is_refused_and_not_published() {
    let index = index(&world());
    let before = settle_all(&*index.snapshot());
    assert!(before.records.iter().any(|r| r.dns_name == HELD));
    assert!(index.set_zone_view(zone()));
    let outcome = settle_all(&*index.snapshot());
    let names: Vec<&str> = outcome
        .records
        .iter()
        .map(|r| r.dns_name.as_str())
        .collect();
    assert_eq!(names, ["free.example.com", "mine.example.com"]);
    let held: Vec<_> = outcome
        .violations
        .iter()
        .filter(|f| f.reason == Reason::HostnameOwnedInZone)
        .collect();
    assert_eq!(held.len(), 1, "{:#?}", outcome.violations);
    assert_finding(
        held[0],
        Reason::HostnameOwnedInZone,
        Action::Deny,
        "spec.hostnames[0]",
        &[HELD, "\"east\"", "HTTPRoute apps/b1", EAST],
    );
    // The same view again changes nothing (no new snapshot, no sync pass).
    assert!(!index.set_zone_view(zone()));
}

#[test]
fn a_newcomer_is_denied_a_held_name_and_an_unmanaged_one_and_told_by_whom() {
    let index = index(&world());
    index.set_zone_view(zone());
    let judge = |hostnames: &[&str]| {
        let object = decode(&created(
            http_route("apps", "new", on("a"), hostnames),
            "2026-01-01T00:00:00Z",
        ));
        index.read(|snapshot| decide(snapshot, &object, None))
    };
    let held = judge(&[HELD]);
    assert!(!held.allowed);
    let finding = held
        .findings
        .iter()
        .find(|f| f.reason == Reason::HostnameOwnedInZone)
        .expect("HostnameOwnedInZone");
    assert!(
        finding.message.starts_with(
            "b.example.com is published by owner \"east\" (HTTPRoute apps/b1, 203.0.113.10); \
             it can't also point at this cluster's Gateways"
        ),
        "{}",
        finding.message
    );
    let unmanaged = judge(&["old.example.com"]);
    assert!(!unmanaged.allowed);
    assert!(
        unmanaged.findings[0]
            .message
            .contains("published by an unmanaged record (198.51.100.1)"),
        "{:?}",
        unmanaged.findings
    );
    // Names this owner id holds, and names nobody holds, are no finding.
    assert!(judge(&["mine.example.com"]).allowed);
    assert!(judge(&["fresh.example.com"]).allowed);
}

#[test]
fn without_a_zone_view_nothing_is_held() {
    let index = index(&world());
    let object = decode(&created(
        http_route("apps", "new", on("a"), &[HELD]),
        "2026-01-01T00:00:00Z",
    ));
    // A route of its own claims HELD on the same Gateway: no conflict, and no zone read.
    assert!(
        index
            .read(|snapshot| decide(snapshot, &object, None))
            .allowed
    );
    index.set_zone_view(zone());
    assert!(
        !index
            .read(|snapshot| decide(snapshot, &object, None))
            .allowed
    );
    // A view that fails open again (too old) lets it through.
    index.set_zone_view(ZoneView::new());
    assert!(
        index
            .read(|snapshot| decide(snapshot, &object, None))
            .allowed
    );
}

#[test]
fn explain_shows_the_claim_as_owned_elsewhere_with_the_holder() {
    let index = index(&world());
    index.set_zone_view(zone());
    let explained = serde_json::to_value(explain_name(&*index.snapshot(), HELD)).unwrap();
    let claim = &explained["routes"][0]["claims"][0];
    assert_eq!(claim["result"], "ownedElsewhere", "{explained:#}");
    assert!(
        claim["why"].as_str().unwrap().contains("owner \"east\""),
        "{explained:#}"
    );
}

#[test]
fn a_zone_dump_reads_into_the_same_view_as_a_listing() {
    let dump = "\
example.com. 300 IN SOA ns.example.com. admin.example.com. 1 3600 600 86400 300
b.example.com. 300 IN A 203.0.113.10
a-b.example.com. 300 IN TXT \"heritage=external-dns,external-dns/owner=east,external-dns/resource=httproute/apps/b1\"
old.example.com. 300 IN A 198.51.100.1
mine.example.com. 300 IN A 192.0.2.1
a-mine.example.com. 300 IN TXT \"heritage=external-dns,external-dns/owner=west,external-dns/resource=httproute/apps/mine\"
example.com. 300 IN SOA ns.example.com. admin.example.com. 1 3600 600 86400 300
";
    let from_dump = view_of(&zone_file::parse(dump).unwrap(), &TxtRegistry::new("west"));
    assert_eq!(from_dump, zone());
}

/// The same world in a cluster that shares `b.example.com` (`--shared-name`).
fn sharing_index(objects: &[Value]) -> Index {
    let config = Config {
        shared_names: Config::parse_shared_names(&[HELD.to_owned()]).unwrap(),
        ..Config::default()
    };
    let index = Index::with_config(Arc::new(config));
    for object in objects {
        index.apply(decode(object));
    }
    index
}

fn shared_zone(ttl: u32) -> ZoneView {
    let listing = vec![
        Endpoint::new(HELD, RecordType::A, [EAST]),
        Endpoint::new(
            "a-b.example.com",
            RecordType::TXT,
            [shared_value("east", Some("httproute/apps/b1"), [EAST], ttl)],
        ),
    ];
    view_of(&listing, &TxtRegistry::new("west"))
}

#[test]
fn a_name_shared_across_clusters_is_joined_only_where_it_is_shared_with_one_ttl() {
    // Shared here and there, one TTL: published, no finding, admitted.
    let sharing = sharing_index(&world());
    sharing.set_zone_view(shared_zone(300));
    let outcome = settle_all(&*sharing.snapshot());
    assert!(outcome.records.iter().any(|r| r.dns_name == HELD));
    assert!(outcome.violations.is_empty(), "{:?}", outcome.violations);
    let object = decode(&created(
        http_route("apps", "new", on("a"), &[HELD]),
        "2026-01-01T00:00:00Z",
    ));
    assert!(
        sharing
            .read(|snapshot| decide(snapshot, &object, None))
            .allowed
    );

    // Another TTL there: a finding, and nothing published.
    sharing.set_zone_view(shared_zone(60));
    let outcome = settle_all(&*sharing.snapshot());
    assert!(!outcome.records.iter().any(|r| r.dns_name == HELD));
    let finding = outcome
        .violations
        .iter()
        .find(|f| f.reason == Reason::HostnameOwnedInZone)
        .expect("HostnameOwnedInZone");
    assert!(
        finding.message.contains("with TTL 60"),
        "{}",
        finding.message
    );

    // Not shared here: refused, saying the others share it.
    let plain = index(&world());
    plain.set_zone_view(shared_zone(300));
    let held = plain.read(|snapshot| decide(snapshot, &object, None));
    assert!(!held.allowed);
    assert!(
        held.findings[0]
            .message
            .contains("this cluster does not list it in --shared-name"),
        "{:?}",
        held.findings
    );
}
