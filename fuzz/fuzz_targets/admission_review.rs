//! AdmissionReview bytes → decision: the webhook's decode, decide and encode over the index of
//! the admission fixtures' cluster (tests/fixtures/admission/cluster.yaml), and the quick scan of
//! a review checked against the serde readers (`inputs::scan_agrees`).
#![no_main]

use std::sync::{Arc, OnceLock};

use gateway_dns::engine::Config;
use gateway_dns::index::Snapshot;
use gateway_dns::source::files::parse_text;
use gateway_dns::webhook::handler::{decide_request, answer};
use gateway_dns::webhook::encode::encode_review_response;
use gateway_dns::webhook::review::parse_review;
use libfuzzer_sys::fuzz_target;

#[path = "../inputs.rs"]
mod inputs;

const CLUSTER: &str = include_str!("../../tests/fixtures/admission/cluster.yaml");

fn snapshot() -> &'static Snapshot {
    static SNAPSHOT: OnceLock<Snapshot> = OnceLock::new();
    SNAPSHOT.get_or_init(|| {
        let mut loaded = Vec::new();
        parse_text("cluster.yaml", CLUSTER, false, &mut loaded).expect("the fixture cluster reads");
        Snapshot::from_objects(
            Arc::new(Config::default()),
            loaded.into_iter().map(|l| l.object),
        )
    })
}

fuzz_target!(|body: &[u8]| {
    if let Err(failed) = inputs::scan_agrees(body) {
        panic!("{failed}");
    }
    let Ok(request) = parse_review(body) else {
        return;
    };
    let decision = decide_request(snapshot(), &request);
    let answer = encode_review_response(&request.uid, &answer(decision));
    // The answer goes back to the API server: it must be JSON and carry the request's uid.
    let value: serde_json::Value = match serde_json::from_slice(&answer) {
        Ok(value) => value,
        Err(error) => panic!(
            "the encoded answer does not parse: {error}\n{}",
            String::from_utf8_lossy(&answer)
        ),
    };
    assert_eq!(
        value["response"]["uid"].as_str(),
        Some(&*request.uid)
    );
});
