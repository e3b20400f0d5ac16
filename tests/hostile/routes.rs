//! Routes far bigger than any real one: denied by the size caps within the deadline, and, with
//! the caps lifted, still evaluated within the deadline because evaluation is linear in size.

use std::sync::Arc;
use std::time::Instant;

use gateway_dns::engine::{Config, Reason, World as _};
use gateway_dns::index::Index;
use gateway_dns::metrics::Metrics;
use gateway_dns::model::{ObjectKey, ObjectKind};
use gateway_dns::webhook::handler::EngineHandler;
use gateway_dns::webhook::state::WebhookOptions;
use hyper::http::StatusCode;
use serde_json::Value;

use crate::support::big_route;
use crate::support::objects;
use crate::support::webhook::TestWebhook;

/// The route of the report: 20k hostnames on 4 Gateways of 64 listeners each.
const HOSTNAMES: usize = 20_000;
const GATEWAYS: usize = 4;
const LISTENERS: usize = 64;

fn index_with_gateways(cfg: Config) -> Index {
    let index = Index::with_config(Arc::new(cfg));
    index.replace_all(big_route::gateways(GATEWAYS, LISTENERS));
    index
}

async fn review_the_big_route(cfg: Config) -> (Value, std::time::Duration) {
    let index = index_with_gateways(cfg);
    let handler = Arc::new(EngineHandler::new(index, Arc::new(Metrics::new())));
    let webhook = TestWebhook::start(handler, WebhookOptions::default()).await;
    let mut connection = webhook.connect().await;
    let review = big_route::review(HOSTNAMES, GATEWAYS, LISTENERS);
    let started = Instant::now();
    let (status, body) = connection.post_review(&review).await;
    let elapsed = started.elapsed();
    assert_eq!(status, StatusCode::OK);
    (body, elapsed)
}

fn warnings(body: &Value) -> Vec<&str> {
    body["response"]["warnings"]
        .as_array()
        .map(|w| w.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_route_over_the_hostname_cap_is_denied_within_the_deadline() {
    let (body, elapsed) = review_the_big_route(Config::default()).await;
    let response = &body["response"];
    assert_eq!(response["allowed"], false, "{response}");
    assert_eq!(
        response["status"]["details"]["causes"][0]["reason"],
        "TooManyHostnames"
    );
    println!("20k-hostname route denied in {elapsed:?}");
    assert!(elapsed < WebhookOptions::default().admission_deadline);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_caps_lifted_the_route_is_still_decided_within_the_deadline() {
    let cfg = Config {
        max_route_hostnames: usize::MAX,
        max_route_parent_refs: usize::MAX,
        ..Config::default()
    };
    let (body, elapsed) = review_the_big_route(cfg).await;
    let response = &body["response"];
    // A real decision, not the deadline's "allowed" with an EvaluationTimeout warning.
    assert_eq!(response["allowed"], true, "{}", warnings(&body).join("\n"));
    assert!(
        warnings(&body).iter().all(|w| !w.starts_with("Evaluation")),
        "{:?}",
        warnings(&body)
    );
    println!(
        "20k-hostname route x {GATEWAYS} Gateways x {LISTENERS} listeners decided in {elapsed:?}"
    );
    assert!(elapsed < WebhookOptions::default().admission_deadline);
}

#[test]
fn the_index_keeps_an_oversized_route_without_expanding_it() {
    let index = index_with_gateways(Config::default());
    index.apply(big_route::decode(big_route::route_json(
        HOSTNAMES, GATEWAYS, LISTENERS,
    )));
    let key = ObjectKey::new(ObjectKind::HTTPRoute, "shop", "big");
    index.read(|snapshot| {
        let entry = snapshot.route(&key).expect("the route is indexed");
        assert!(entry.eval.claims.is_empty());
        let reasons: Vec<Reason> = entry.eval.findings.iter().map(|f| f.reason).collect();
        assert_eq!(reasons, [Reason::TooManyHostnames]);
        assert_eq!(snapshot.claims().count(), 0);
    });
}

#[test]
fn field_paths_count_past_65535() {
    let cfg = Config {
        max_route_hostnames: usize::MAX,
        ..Config::default()
    };
    let index = index_with_gateways(cfg.clone());
    // Hostname 65,537 (index 65,536) is the invalid one.
    let mut hostnames: Vec<String> = (0..65_536)
        .map(|i| format!("h{i}.l0.example.com"))
        .collect();
    hostnames.push("not_valid.l0.example.com".to_owned());
    let hostnames: Vec<&str> = hostnames.iter().map(String::as_str).collect();
    let parents = serde_json::json!([objects::parent("infra", "gw0")]);
    let route = big_route::decode(objects::http_route("shop", "long", parents, &hostnames));
    let gateway_dns::model::Object::Route(route) = route else {
        panic!("a route")
    };
    let eval = index.read(|snapshot| gateway_dns::engine::evaluate_route(snapshot, &cfg, &route));
    let invalid: Vec<&str> = eval
        .findings
        .iter()
        .filter(|f| f.reason == Reason::InvalidHostname)
        .map(|f| &*f.field)
        .collect();
    assert_eq!(invalid, ["spec.hostnames[65536]"]);
}
