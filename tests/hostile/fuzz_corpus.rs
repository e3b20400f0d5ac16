//! The committed fuzz corpus (fuzz/corpus, docs/fuzzing.md) replayed through the same entry
//! points as the fuzz targets, on the stable toolchain: every input the fuzzers kept, and every
//! input that once crashed one, must go through without a panic and with the same checks on
//! the answers.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::Arc;

use gateway_dns::authority::{EmbeddedConfig, EmbeddedDns};
use gateway_dns::dns::provider::pdns::{api_error_message, zone_endpoints};
use gateway_dns::dns::{Changes, Endpoint, Provider};
use gateway_dns::engine::Config;
use gateway_dns::index::Snapshot;
use gateway_dns::model::{Object, RecordType};
use gateway_dns::source::files::parse_text;
use gateway_dns::webhook::encode::encode_review_response;
use gateway_dns::webhook::handler::{answer, decide_request};
use gateway_dns::webhook::review::parse_review;

const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// Every input of one target's corpus; a corpus must not be empty.
fn corpus(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut inputs: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| {
            let path = entry.expect("a corpus entry").path();
            let bytes = std::fs::read(&path).expect("a corpus file");
            (path.display().to_string(), bytes)
        })
        .collect();
    inputs.sort();
    assert!(inputs.len() >= 5, "{target}: only {} inputs", inputs.len());
    inputs
}

fn fixture_cluster() -> Vec<Object> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/admission/cluster.yaml");
    let text = std::fs::read_to_string(&path).expect("the admission fixture cluster");
    let mut loaded = Vec::new();
    parse_text("cluster.yaml", &text, false, &mut loaded).expect("the fixture cluster reads");
    loaded.into_iter().map(|l| l.object).collect()
}

#[test]
fn admission_reviews_of_the_corpus_get_a_json_answer_with_their_uid() {
    let snapshot = Snapshot::from_objects(Arc::new(Config::default()), fixture_cluster());
    let mut decided = 0;
    for (name, body) in corpus("admission_review") {
        if let Err(failed) = crate::inputs::scan_agrees(&body) {
            panic!("{name}: {failed}");
        }
        let Ok(request) = parse_review(&body) else {
            continue;
        };
        let answer =
            encode_review_response(&request.uid, &answer(decide_request(&snapshot, &request)));
        let value: serde_json::Value = serde_json::from_slice(&answer)
            .unwrap_or_else(|e| panic!("{name}: the answer does not parse: {e}"));
        assert_eq!(
            value["response"]["uid"].as_str(),
            Some(&*request.uid),
            "{name}"
        );
        decided += 1;
    }
    assert!(decided >= 5, "only {decided} reviews decided");
}

#[test]
fn check_reports_of_the_corpus_documents_stay_json() {
    let live = fixture_cluster();
    let mut checked_files = 0;
    for (name, data) in corpus("check_documents") {
        match crate::inputs::check_documents(&data, &live) {
            Ok(checked) => checked_files += usize::from(checked),
            Err(failed) => panic!("{name}: {failed}"),
        }
    }
    assert!(checked_files >= 5, "only {checked_files} documents checked");
}

#[tokio::test]
async fn embedded_dns_answers_every_corpus_packet_within_its_transport() {
    let mut config = EmbeddedConfig::new(vec!["example.com".into(), "sub.example.com".into()]);
    config.listen = SocketAddr::from((LOOPBACK, 0));
    config.secondaries = vec![SocketAddr::from((LOOPBACK, 9))];
    config.transfer_key = Some(
        gateway_dns::tsig::TsigKey::from_base64(
            "transfer",
            "hmac-sha256".parse().unwrap(),
            "c2VjcmV0LWZvci10aGUtZnV6emVy",
        )
        .unwrap(),
    );
    let dns = EmbeddedDns::start(config).await.unwrap();
    let mut create = vec![
        Endpoint::new("www.example.com", RecordType::A, ["192.0.2.2"]),
        Endpoint::new("alias.example.com", RecordType::CNAME, ["www.example.com"]),
        Endpoint::new("*.apps.example.com", RecordType::A, ["192.0.2.4"]),
        Endpoint::new("txt.example.com", RecordType::TXT, ["x".repeat(700)]),
    ];
    create.extend((0..80).map(|i| {
        Endpoint::new(
            &format!("r{i}.example.com"),
            RecordType::A,
            [format!("192.0.2.{i}")],
        )
    }));
    dns.apply(&Changes {
        create,
        ..Changes::default()
    })
    .await
    .unwrap();
    let mut answered = 0;
    for (name, packet) in corpus("embedded_dns") {
        for tcp_peer in [None, Some(LOOPBACK)] {
            let Some(answers) = dns.answer(&packet, tcp_peer) else {
                continue;
            };
            let limit = if tcp_peer.is_some() { 65_535 } else { 1232 };
            for answer in answers {
                assert!(
                    answer.len() <= limit && answer.len() >= 12,
                    "{name}: {} bytes",
                    answer.len()
                );
                hickory_proto::op::Message::from_vec(&answer)
                    .unwrap_or_else(|e| panic!("{name}: unreadable answer: {e}"));
                answered += 1;
            }
        }
    }
    assert!(answered >= 5, "only {answered} answers");
}

#[test]
fn rfc2136_client_reads_every_corpus_answer_without_panicking() {
    let mut read = 0;
    for (name, data) in corpus("rfc2136_answers") {
        match crate::inputs::rfc2136_answers(&data) {
            Ok(soa_read) => read += usize::from(soa_read),
            Err(failed) => panic!("{name}: {failed}"),
        }
    }
    assert!(read >= 1, "no answer of the corpus read");
}

#[test]
fn pdns_client_decodes_every_corpus_body_without_panicking() {
    let mut zones = 0;
    for (name, body) in corpus("pdns_zone") {
        if let Ok(endpoints) = zone_endpoints(&body) {
            zones += 1;
            for endpoint in endpoints {
                assert!(!endpoint.targets.is_empty(), "{name}: {endpoint}");
            }
        }
        let _ = api_error_message(&body);
    }
    assert!(zones >= 1, "no zone body of the corpus decoded");
}
