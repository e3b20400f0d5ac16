//! The embedded server's tests as a whole: changes, serials, signatures, the UDP cache.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hickory_proto::op::{Edns, Message, Query, ResponseCode};
use hickory_proto::rr::{RData, RecordType as WireType};
use tokio::net::UdpSocket;
use tokio::time::timeout;

use crate::dns::wire::wire_name;
use crate::dns::{Changes, Endpoint};
use crate::model::RecordType;

use super::dnssec::ZoneKey;
use super::zone::{JOURNAL_RECORDS, Touched, Zone, next_serial, unix_now};
use super::{EmbeddedConfig, EmbeddedDns, Error};

#[tokio::test]
async fn a_change_that_changes_nothing_keeps_the_serial() {
    let mut config = EmbeddedConfig::new(vec!["example.com".into()]);
    config.listen = "127.0.0.1:0".parse().unwrap();
    let server = EmbeddedDns::start(config).await.unwrap();
    let record = Endpoint::new("a.example.com", RecordType::A, ["192.0.2.1"]);
    let create = Changes {
        create: vec![record.clone()],
        ..Changes::default()
    };
    server.apply_changes(&create).unwrap();
    let serial = server.serial("example.com");
    server.apply_changes(&create).unwrap();
    let same = Changes {
        delete: vec![record.clone()],
        create: vec![record],
        ..Changes::default()
    };
    server.apply_changes(&same).unwrap();
    assert_eq!(server.serial("example.com"), serial);
    assert!(matches!(
        EmbeddedDns::start(EmbeddedConfig {
            secondaries: vec!["127.0.0.1:53".parse().unwrap()],
            listen: "127.0.0.1:0".parse().unwrap(),
            ..EmbeddedConfig::new(vec!["example.com".into()])
        })
        .await,
        Err(Error::SecondariesWithoutKey)
    ));
}

/// A signed server (no per-source answer limit) holding a.example.com A 192.0.2.1.
async fn signed_server(algorithm: super::dnssec::KeyAlgorithm) -> EmbeddedDns {
    let (key, _) = ZoneKey::generate(algorithm).unwrap();
    let mut config = EmbeddedConfig::new(vec!["example.com".into()]);
    config.listen = "127.0.0.1:0".parse().unwrap();
    config.udp_answers_per_source_per_second = 0;
    config.dnssec_keys = vec![Arc::new(key)];
    let server = EmbeddedDns::start(config).await.unwrap();
    server
        .apply_changes(&Changes {
            create: vec![Endpoint::new("a.example.com", RecordType::A, ["192.0.2.1"])],
            ..Changes::default()
        })
        .unwrap();
    server
}

/// The expiration of the first RRSIG in an answer section.
fn rrsig_expiration(answer: &Message) -> Option<u32> {
    answer.answers.iter().find_map(|record| match &record.data {
        RData::DNSSEC(hickory_proto::dnssec::rdata::DNSSECRData::RRSIG(sig)) => {
            Some(sig.input().sig_expiration.get())
        }
        _ => None,
    })
}

/// The signature expiration on the A answer of a.example.com asked with the DO bit.
fn signed_a_expiration(server: &EmbeddedDns) -> u32 {
    let answer = server
        .answer(&a_query(0, true).to_vec().unwrap(), None)
        .unwrap();
    rrsig_expiration(&Message::from_vec(&answer[0]).unwrap()).expect("an RRSIG with the DO bit")
}

#[tokio::test]
async fn signatures_are_renewed_at_the_next_signing_period_with_a_new_serial() {
    use super::dnssec::{KeyAlgorithm, RESIGN_PERIOD, VALIDITY_PERIODS};
    let server = signed_server(KeyAlgorithm::Ed25519).await;
    let now = unix_now();
    let serial = server.serial("example.com").unwrap();
    let expiration = signed_a_expiration(&server);
    assert!(u64::from(expiration) >= now + (VALIDITY_PERIODS - 1) * RESIGN_PERIOD);

    // Within the period nothing is re-signed.
    assert!(server.refresh_signatures(now).unwrap().is_empty());
    assert_eq!(server.serial("example.com"), Some(serial));

    // The clock in the next period: new signatures, expiring a period later, a new serial
    // (by the usual rule: that minute's window start), and the change in the IXFR journal.
    let later = now + RESIGN_PERIOD;
    let changed = server.refresh_signatures(later).unwrap();
    let renewed = server.serial("example.com").unwrap();
    assert_eq!(changed, [("example.com".to_string(), renewed)]);
    assert_eq!(renewed, next_serial(serial, later));
    assert_eq!(
        signed_a_expiration(&server),
        expiration + RESIGN_PERIOD as u32
    );
    let store = server.store.read().unwrap();
    let deltas = store.zones[0].changes_since(serial).unwrap();
    assert!(
        deltas[0]
            .added
            .iter()
            .any(|r| r.record_type() == WireType::RRSIG)
    );
    drop(store);
    assert!(server.refresh_signatures(later + 60).unwrap().is_empty());
}

#[tokio::test]
async fn rrsig_queries_get_the_signatures_and_no_denial_proof() {
    let server = signed_server(super::dnssec::KeyAlgorithm::Ecdsap256sha256).await;
    let mut request = Message::query();
    request.add_query(Query::query(
        wire_name("a.example.com").unwrap(),
        WireType::RRSIG,
    ));
    let mut edns = Edns::new();
    edns.set_dnssec_ok(true);
    request.set_edns(edns);
    let answer = server.answer(&request.to_vec().unwrap(), None).unwrap();
    let answer = Message::from_vec(&answer[0]).unwrap();
    // The RRSIGs of the A and the NSEC RRsets; nothing to deny.
    assert_eq!(answer.answers.len(), 2, "{answer:?}");
    assert!(answer.authorities.is_empty(), "{answer:?}");
}

/// Changes merge into the sorted RRsets as a map would take them; without secondaries no
/// journal is kept, and a change larger than the journal empties it.
#[test]
fn changes_merge_in_order_and_only_secondaries_get_a_journal() {
    let mut zone = Zone::new("example.com".into(), 1);
    let a = |name: &str, ip: &str| Endpoint::new(name, RecordType::A, [ip]).with_ttl(60);
    let (b, c, d) = (
        a("b.example.com", "192.0.2.2"),
        a("c.x.example.com", "192.0.2.3"),
        a("d.example.com", "192.0.2.4"),
    );
    let touched: Touched<'_> = [&d, &b, &c]
        .into_iter()
        .map(|e| (e.key(), Some(e)))
        .collect();
    assert!(zone.merge(&touched, false).is_some_and(|d| d.is_empty()));
    zone.reindex();
    let names: Vec<&str> = zone.rrsets.iter().map(|set| &*set.name).collect();
    assert_eq!(names, ["b.example.com", "c.x.example.com", "d.example.com"]);
    assert!(zone.has_name("x.example.com") && !zone.has_records_at("x.example.com"));
    // Delete one, change one, keep one: two differences, in key order.
    let b2 = a("b.example.com", "192.0.2.20");
    let touched: Touched<'_> = [(d.key(), None), (b2.key(), Some(&b2)), (c.key(), Some(&c))]
        .into_iter()
        .collect();
    let differences = zone.merge(&touched, true).unwrap();
    let changed: Vec<(bool, bool)> = differences
        .iter()
        .map(|(before, after)| (before.is_some(), after.is_some()))
        .collect();
    assert_eq!(changed, [(true, true), (true, false)]);
    assert_eq!(
        zone.rrset("b.example.com", RecordType::A).map(|s| s.ttl),
        Some(60)
    );
    assert!(zone.rrset("d.example.com", RecordType::A).is_none());
    zone.journal_change(1, 2, &differences);
    assert_eq!(zone.journal.len(), 1);
    let many: Vec<Endpoint> = (0..JOURNAL_RECORDS + 1)
        .map(|i| a(&format!("n{i}.example.com"), "192.0.2.9"))
        .collect();
    let touched: Touched<'_> = many.iter().map(|e| (e.key(), Some(e))).collect();
    let differences = zone.merge(&touched, true).unwrap();
    zone.journal_change(2, 3, &differences);
    assert!(
        zone.journal.is_empty(),
        "too large for the journal: AXFR for everyone"
    );
    assert!(
        zone.merge(&touched, true).is_none(),
        "the same again changes nothing"
    );
}

/// Of two changes of one RRset in a batch, the later is the one merged (a delete then a write,
/// as an apply lists them, writes; a write then a delete deletes).
#[test]
fn the_later_change_of_one_rrset_in_a_batch_is_merged() {
    let mut zone = Zone::new("example.com".into(), 1);
    let a = |ip: &str| Endpoint::new("b.example.com", RecordType::A, [ip]).with_ttl(60);
    let (first, second) = (a("192.0.2.1"), a("192.0.2.2"));
    let touched: Touched<'_> = [(first.key(), None), (second.key(), Some(&second))]
        .into_iter()
        .collect();
    assert!(zone.merge(&touched, false).is_some());
    let held = zone
        .rrset("b.example.com", RecordType::A)
        .map(|set| set.targets.to_vec());
    assert_eq!(held, Some(vec!["192.0.2.2".into()]));
    let touched: Touched<'_> = [(first.key(), Some(&first)), (second.key(), None)]
        .into_iter()
        .collect();
    assert!(zone.merge(&touched, false).is_some());
    assert!(zone.rrset("b.example.com", RecordType::A).is_none());
}

/// One request over UDP to `server`, its answer decoded.
async fn ask_over_udp(client: &UdpSocket, server: SocketAddr, request: &Message) -> Message {
    client
        .send_to(&request.to_vec().unwrap(), server)
        .await
        .unwrap();
    let mut buffer = [0u8; 4096];
    let (len, _) = timeout(Duration::from_secs(5), client.recv_from(&mut buffer))
        .await
        .unwrap()
        .unwrap();
    Message::from_vec(&buffer[..len]).unwrap()
}

fn a_query(id: u16, dnssec_ok: bool) -> Message {
    let mut request = Message::query();
    request.metadata.id = id;
    request.add_query(Query::query(
        wire_name("a.example.com").unwrap(),
        WireType::A,
    ));
    if dnssec_ok {
        let mut edns = Edns::new();
        edns.set_dnssec_ok(true);
        request.set_edns(edns);
    }
    request
}

#[tokio::test]
async fn a_cached_answer_takes_the_request_id_and_never_outlives_a_change() {
    let mut config = EmbeddedConfig::new(vec!["example.com".into()]);
    config.listen = "127.0.0.1:0".parse().unwrap();
    config.udp_answers_per_source_per_second = 0;
    let server = EmbeddedDns::start(config).await.unwrap();
    let client = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    // The same request again and again (from the cache after the first): each answer has
    // its own ID.
    for id in 1..=4 {
        let missing = ask_over_udp(&client, server.local_addr(), &a_query(id, false)).await;
        assert_eq!(missing.metadata.id, id);
        assert_eq!(missing.metadata.response_code, ResponseCode::NXDomain);
    }
    let create = Changes {
        create: vec![Endpoint::new("a.example.com", RecordType::A, ["192.0.2.1"])],
        ..Changes::default()
    };
    server.apply_changes(&create).unwrap();
    let found = ask_over_udp(&client, server.local_addr(), &a_query(3, false)).await;
    assert_eq!(found.metadata.id, 3);
    assert_eq!(found.metadata.response_code, ResponseCode::NoError);
    assert_eq!(found.answers.len(), 1, "the change is seen at once");
}

#[tokio::test]
async fn re_signing_empties_the_udp_answer_cache() {
    use super::dnssec::{KeyAlgorithm, RESIGN_PERIOD};
    let server = signed_server(KeyAlgorithm::Ed25519).await;
    let client = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let expiration = rrsig_expiration;
    let before = ask_over_udp(&client, server.local_addr(), &a_query(1, true)).await;
    let cached = ask_over_udp(&client, server.local_addr(), &a_query(2, true)).await;
    assert_eq!(expiration(&before), expiration(&cached));
    assert!(expiration(&before).is_some(), "{before:?}");
    // The next signing period: no record changed, yet the answers must carry the new
    // signatures, not the cached ones.
    let changed = server
        .refresh_signatures(unix_now() + RESIGN_PERIOD)
        .unwrap();
    assert_eq!(changed.len(), 1);
    let after = ask_over_udp(&client, server.local_addr(), &a_query(3, true)).await;
    assert_eq!(
        expiration(&after),
        expiration(&before).map(|e| e + RESIGN_PERIOD as u32)
    );
}
