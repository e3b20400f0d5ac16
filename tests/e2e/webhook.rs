//! The `/validate` envelope, bad input, deadlines, concurrency and the probe routes, over real
//! HTTPS with a client set up as kube-apiserver; what only the routes decide is sent to them
//! in-process.

use std::sync::Arc;
use std::time::{Duration, Instant};

use gateway_dns::metrics::EvaluationErrorKind;
use gateway_dns::webhook::encode::MAX_WARNINGS_BYTES;
use gateway_dns::webhook::review::{AdmissionHandler, AdmissionRequest};
use gateway_dns::webhook::server;
use gateway_dns::webhook::state::{self, WebhookOptions};
use hyper::http::{Method, StatusCode};
use serde_json::{Value, json};

use crate::support::webhook::{
    HttpsConnection, InProcess, TestHandler, TestWebhook, VALIDATE_PATH, post_review, review,
    service_host,
};

async fn start_default() -> TestWebhook {
    TestWebhook::start(Arc::new(TestHandler), WebhookOptions::default()).await
}

fn warnings(body: &Value) -> Vec<String> {
    body["response"]["warnings"]
        .as_array()
        .expect("warnings is always an array")
        .iter()
        .map(|warning| warning.as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn an_allowed_review_echoes_the_uid_without_status() {
    let webhook = start_default().await;
    let uid = "705ab4f5-6393-11e8-b7cc-42010a800002";
    let (status, body) = post_review(
        webhook.addr,
        &webhook.ca_pem,
        &service_host(),
        &review(uid, "web", "allow"),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(body["kind"], "AdmissionReview");
    assert_eq!(body["response"]["uid"], uid);
    assert_eq!(body["response"]["allowed"], true);
    assert_eq!(body["response"]["warnings"], json!([]));
    assert!(body["response"].get("status").is_none(), "{body}");
}

#[tokio::test]
async fn a_denial_is_forbidden_with_one_cause_per_finding() {
    let webhook = start_default().await;
    let (status, body) = post_review(
        webhook.addr,
        &webhook.ca_pem,
        &service_host(),
        &review("uid-deny", "shop", "deny"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "a denial is still HTTP 200");
    let response = &body["response"];
    assert_eq!(response["uid"], "uid-deny");
    assert_eq!(response["allowed"], false);
    assert_eq!(response["status"]["code"], 403);
    assert_eq!(response["status"]["reason"], "Forbidden");
    assert_eq!(response["status"]["status"], "Failure");
    let message = response["status"]["message"].as_str().unwrap();
    assert_eq!(
        message.lines().collect::<Vec<_>>(),
        [
            "HostnameConflict: shop.example.com is already served by Gateway infra/other",
            "InvalidHostname: 10.0.0.1 is an IP address, not a hostname"
        ]
    );
    let causes = response["status"]["details"]["causes"].as_array().unwrap();
    let reasons: Vec<_> = causes
        .iter()
        .map(|cause| cause["reason"].as_str().unwrap())
        .collect();
    let fields: Vec<_> = causes
        .iter()
        .map(|cause| cause["field"].as_str().unwrap())
        .collect();
    assert_eq!(reasons, ["HostnameConflict", "InvalidHostname"]);
    assert_eq!(fields, ["spec.hostnames[0]", "spec.hostnames[1]"]);
    assert_eq!(
        warnings(&body),
        ["NoParentRefs: HTTPRoute shop/shop attaches to nothing"]
    );
}

#[tokio::test]
async fn warnings_are_kept_verbatim_until_4096_characters_then_counted() {
    let webhook = start_default().await;
    let mut connection = webhook.connect().await;

    let (_, few) = connection.post_review(&review("w3", "web", "warn:3")).await;
    let few = warnings(&few);
    assert_eq!(few.len(), 3);
    assert!(
        few.iter()
            .all(|warning| warning.starts_with("TestWarning: warning 000"))
    );

    let (status, many) = connection
        .post_review(&review("w500", "web", "warn:500"))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(many["response"]["allowed"], true);
    let many = warnings(&many);
    let total: usize = many.iter().map(String::len).sum();
    assert!(
        total <= MAX_WARNINGS_BYTES,
        "{total} characters of warnings"
    );
    let (summary, kept) = many.split_last().unwrap();
    assert!(
        kept.len() > 30,
        "most of the budget is used: {}",
        kept.len()
    );
    for (index, warning) in kept.iter().enumerate() {
        assert!(
            warning.starts_with(&format!("TestWarning: warning {index:04} ")),
            "{warning}"
        );
    }
    assert_eq!(summary, &format!("... {} more warnings", 500 - kept.len()));
}

/// Sends one request through the routes and checks the JSON error answer.
async fn expect_error(
    webhook: &InProcess,
    method: Method,
    path: &str,
    content_type: Option<&str>,
    body: Vec<u8>,
    expected: StatusCode,
    needle: &str,
) {
    let headers: Vec<(&str, &str)> = content_type
        .map(|value| vec![("content-type", value)])
        .unwrap_or_default();
    let reply = webhook.send(method.clone(), path, &headers, body).await;
    assert_eq!(reply.status, expected, "{method} {path}: {:?}", reply.body);
    assert_eq!(reply.headers["content-type"], "application/json");
    let error = reply.json()["error"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        error.contains(needle),
        "{method} {path}: error {error:?} lacks {needle:?}"
    );
}

#[tokio::test]
async fn bad_input_gets_an_http_error_with_a_json_body() {
    let webhook = InProcess::new(Arc::new(TestHandler), WebhookOptions::default());
    let json = Some("application/json");
    let envelope = |value: Value| serde_json::to_vec(&value).unwrap();
    let cases: Vec<(&str, Vec<u8>, StatusCode, &str)> = vec![
        (
            "not JSON",
            b"{\"apiVersion\": ".to_vec(),
            StatusCode::BAD_REQUEST,
            "not valid JSON",
        ),
        (
            "a JSON array",
            b"[]".to_vec(),
            StatusCode::BAD_REQUEST,
            "not a JSON object",
        ),
        (
            "wrong apiVersion",
            envelope(
                json!({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview", "request": {"uid": "a"}}),
            ),
            StatusCode::BAD_REQUEST,
            "apiVersion",
        ),
        (
            "wrong kind",
            envelope(
                json!({"apiVersion": "admission.k8s.io/v1", "kind": "ConversionReview", "request": {"uid": "a"}}),
            ),
            StatusCode::BAD_REQUEST,
            "kind",
        ),
        (
            "no request",
            envelope(json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"})),
            StatusCode::BAD_REQUEST,
            "request",
        ),
        (
            "no uid",
            envelope(
                json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"operation": "CREATE"}}),
            ),
            StatusCode::BAD_REQUEST,
            "uid",
        ),
        (
            "over 3 MiB",
            vec![b' '; state::DEFAULT_MAX_BODY_BYTES + 1],
            StatusCode::PAYLOAD_TOO_LARGE,
            "exceeds",
        ),
    ];
    for (what, body, expected, needle) in cases {
        println!("case: {what}");
        expect_error(
            &webhook,
            Method::POST,
            VALIDATE_PATH,
            json,
            body,
            expected,
            needle,
        )
        .await;
    }
    let valid = serde_json::to_vec(&review("ct", "web", "allow")).unwrap();
    for content_type in [Some("text/plain"), Some("application/yaml"), None] {
        expect_error(
            &webhook,
            Method::POST,
            VALIDATE_PATH,
            content_type,
            valid.clone(),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "application/json",
        )
        .await;
    }
    for method in [Method::GET, Method::PUT, Method::DELETE] {
        expect_error(
            &webhook,
            method,
            VALIDATE_PATH,
            json,
            vec![],
            StatusCode::METHOD_NOT_ALLOWED,
            "POST",
        )
        .await;
    }
    expect_error(
        &webhook,
        Method::POST,
        "/healthz",
        json,
        vec![],
        StatusCode::METHOD_NOT_ALLOWED,
        "GET",
    )
    .await;
    expect_error(
        &webhook,
        Method::GET,
        "/nowhere",
        None,
        vec![],
        StatusCode::NOT_FOUND,
        "/nowhere",
    )
    .await;

    // A body exactly at the limit is read (and then judged on its content, not its size).
    let mut at_limit =
        b"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\"}".to_vec();
    at_limit.resize(state::DEFAULT_MAX_BODY_BYTES, b' ');
    expect_error(
        &webhook,
        Method::POST,
        VALIDATE_PATH,
        json,
        at_limit,
        StatusCode::BAD_REQUEST,
        "request",
    )
    .await;

    // A charset parameter is fine.
    let reply = webhook
        .send(
            Method::POST,
            VALIDATE_PATH,
            &[("content-type", "application/json; charset=utf-8")],
            valid,
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.json()["response"]["uid"], "ct");
}

#[tokio::test]
async fn an_oversized_body_over_http2_is_refused_too() {
    let webhook = start_default().await;
    let mut connection = webhook.connect().await;
    assert_eq!(connection.alpn.as_deref(), Some(&b"h2"[..]));
    let reply = connection
        .send(
            Method::POST,
            VALIDATE_PATH,
            &[("content-type", "application/json")],
            vec![b'x'; state::DEFAULT_MAX_BODY_BYTES + 10],
        )
        .await
        .unwrap();
    assert_eq!(reply.status, StatusCode::PAYLOAD_TOO_LARGE);
    // The connection (and the server) still answer afterwards.
    let mut again = webhook.connect().await;
    let (status, body) = again
        .post_review(&review("after-413", "web", "allow"))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["response"]["uid"], "after-413");
}

#[tokio::test]
async fn a_slow_handler_is_answered_allowed_at_the_deadline() {
    let deadline = Duration::from_millis(300);
    let options = WebhookOptions {
        admission_deadline: deadline,
        ..WebhookOptions::default()
    };
    let webhook = TestWebhook::start(Arc::new(TestHandler), options).await;
    let mut connection = webhook.connect().await;
    let started = Instant::now();
    let (status, body) = connection
        .post_review(&review("slow", "web", "slow:3000"))
        .await;
    let elapsed = started.elapsed();
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["response"]["uid"], "slow");
    assert_eq!(body["response"]["allowed"], true);
    assert_eq!(
        warnings(&body),
        ["EvaluationTimeout: gateway-dns did not finish in 300ms; allowed"]
    );
    assert!(
        elapsed >= deadline,
        "answered before the deadline: {elapsed:?}"
    );
    assert!(
        elapsed < deadline + Duration::from_millis(1500),
        "answered late: {elapsed:?}"
    );
    assert_eq!(
        webhook
            .metrics
            .evaluation_errors(EvaluationErrorKind::Timeout),
        1
    );

    // The API server's shorter timeout wins over ours.
    let mut connection = webhook.connect().await;
    let reply = connection
        .send(
            Method::POST,
            "/validate?timeout=0s",
            &[("content-type", "application/json")],
            serde_json::to_vec(&review("zero", "web", "slow:3000")).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(
        warnings(&reply.json()),
        ["EvaluationTimeout: gateway-dns did not finish in 0ms; allowed"]
    );
}

#[tokio::test]
async fn a_panicking_handler_is_answered_allowed_and_the_connection_survives() {
    let webhook = start_default().await;
    let mut connection = webhook.connect().await;
    let answer = connection
        .post_review(&review("boom", "web", "panic"))
        .await;
    assert_allowed_after_a_panic(answer, "boom", &webhook);
    let (_, body) = connection.post_review(&review("next", "web", "deny")).await;
    assert_eq!(body["response"]["allowed"], false);
}

/// A handler panicked on review `uid`: the answer is still 200 and allowed, with the
/// EvaluationError warning, and the panic is counted once.
fn assert_allowed_after_a_panic(answer: (StatusCode, Value), uid: &str, webhook: &TestWebhook) {
    let (status, body) = answer;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["response"]["uid"], uid);
    assert_eq!(body["response"]["allowed"], true);
    assert_eq!(
        warnings(&body),
        ["EvaluationError: gateway-dns failed while evaluating this object; allowed"]
    );
    assert_eq!(
        webhook
            .metrics
            .evaluation_errors(EvaluationErrorKind::Panic),
        1
    );
}

/// The test handler, declared quick: the server runs it on the request's own task.
struct QuickHandler;

impl AdmissionHandler for QuickHandler {
    fn handle(&self, request: &AdmissionRequest) -> gateway_dns::webhook::review::AdmissionAnswer {
        TestHandler.handle(request)
    }
    fn is_quick(&self, _request: &AdmissionRequest) -> bool {
        true
    }
}

#[tokio::test]
async fn a_quick_handler_runs_inline_with_the_same_answers_and_panic_safety() {
    let webhook = TestWebhook::start(Arc::new(QuickHandler), WebhookOptions::default()).await;
    let mut connection = webhook.connect().await;
    let (_, denied) = connection.post_review(&review("q1", "web", "deny")).await;
    assert_eq!(denied["response"]["allowed"], false);
    let (_, warned) = connection.post_review(&review("q2", "web", "warn:2")).await;
    assert_eq!(
        warned["response"]["warnings"].as_array().map(Vec::len),
        Some(2)
    );
    let answer = connection.post_review(&review("q3", "web", "panic")).await;
    assert_allowed_after_a_panic(answer, "q3", &webhook);
    let (_, body) = connection.post_review(&review("q4", "web", "allow")).await;
    assert_eq!(
        body["response"]["allowed"], true,
        "the connection survives the panic"
    );
}

#[tokio::test]
async fn requests_beyond_the_concurrency_limit_are_allowed_with_a_warning() {
    let options = WebhookOptions {
        admission_deadline: Duration::from_millis(400),
        max_in_flight: 1,
        ..WebhookOptions::default()
    };
    let webhook = TestWebhook::start(Arc::new(TestHandler), options).await;
    let mut busy = webhook.connect().await;
    let mut waiting = webhook.connect().await;
    let occupy =
        tokio::spawn(async move { busy.post_review(&review("busy", "web", "slow:1500")).await });
    // Give the slow request time to take the only slot.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (status, body) = waiting.post_review(&review("waits", "web", "allow")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["response"]["uid"], "waits");
    assert_eq!(body["response"]["allowed"], true);
    assert_eq!(
        warnings(&body),
        ["EvaluationOverloaded: gateway-dns was too busy to evaluate this in 400ms; allowed"]
    );
    let (_, busy_body) = occupy.await.unwrap();
    assert!(warnings(&busy_body)[0].starts_with("EvaluationTimeout:"));
    assert_eq!(
        webhook
            .metrics
            .evaluation_errors(EvaluationErrorKind::Overloaded),
        1
    );
}

#[tokio::test]
async fn two_hundred_concurrent_requests_match_sequential_answers() {
    let webhook = Arc::new(start_default().await);
    let verdicts = ["allow", "deny", "warn:2", "warn:60"];
    let reviews: Vec<Value> = (0..200)
        .map(|index| {
            review(
                &format!("uid-{index}"),
                &format!("route-{index}"),
                verdicts[index % 4],
            )
        })
        .collect();

    let mut sequential = Vec::new();
    let mut connection = webhook.connect().await;
    for review in &reviews {
        sequential.push(connection.post_review(review).await);
    }

    // Half over their own HTTP/1.1 connections, half multiplexed on shared HTTP/2 connections.
    let mut tasks = Vec::new();
    for (index, review) in reviews.iter().cloned().enumerate() {
        let webhook = webhook.clone();
        tasks.push(tokio::spawn(async move {
            let alpn: &[&[u8]] = if index % 2 == 0 {
                &[b"http/1.1"]
            } else {
                &[b"h2"]
            };
            let config = crate::support::webhook::client_tls_config(
                &[&webhook.ca_pem],
                alpn,
                &[&rustls::version::TLS13, &rustls::version::TLS12],
            );
            let mut connection =
                HttpsConnection::connect_with(webhook.addr, config, &service_host())
                    .await
                    .unwrap();
            connection.post_review(&review).await
        }));
    }
    let mut concurrent = Vec::new();
    for task in tasks {
        concurrent.push(task.await.unwrap());
    }
    assert_eq!(concurrent.len(), sequential.len());
    for (index, (parallel, alone)) in concurrent.iter().zip(&sequential).enumerate() {
        assert_eq!(parallel, alone, "request {index}");
        assert_eq!(parallel.1["response"]["uid"], format!("uid-{index}"));
    }
    let denied = sequential
        .iter()
        .filter(|(_, body)| body["response"]["allowed"] == false)
        .count();
    assert_eq!(denied, 50);
    assert_eq!(webhook.metrics.admission_latency_count(), 400);
}

#[tokio::test]
async fn readyz_waits_for_the_sources_and_healthz_does_not() {
    let directory = tempfile::tempdir().unwrap();
    let webhook = TestWebhook::start_with(
        Arc::new(TestHandler),
        WebhookOptions::default(),
        gateway_dns::webhook::tls::CertSource::InMemory {
            service: crate::support::webhook::SERVICE.into(),
            namespace: crate::support::webhook::NAMESPACE.into(),
            ca_out: directory.path().join("ca.crt"),
        },
    )
    .await;
    let mut connection = webhook.connect().await;
    let ready = connection
        .send(Method::GET, "/readyz", &[], vec![])
        .await
        .unwrap();
    assert_eq!(ready.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(ready.json()["tlsBound"], true);
    assert_eq!(ready.json()["sourcesSynced"], false);
    let health = connection
        .send(Method::GET, "/healthz", &[], vec![])
        .await
        .unwrap();
    assert_eq!(health.status, StatusCode::OK);

    webhook.readiness.set_sources_synced(true);
    let ready = connection
        .send(Method::GET, "/readyz", &[], vec![])
        .await
        .unwrap();
    assert_eq!(ready.status, StatusCode::OK);
    assert_eq!(ready.json()["status"], "ready");
}

#[tokio::test]
async fn metrics_are_served_on_the_webhook_and_on_a_plain_listener() {
    let webhook = start_default().await;
    let mut connection = webhook.connect().await;
    connection.post_review(&review("m1", "web", "deny")).await;
    connection.post_review(&review("m2", "web", "allow")).await;

    let reply = connection
        .send(Method::GET, "/metrics", &[], vec![])
        .await
        .unwrap();
    assert_eq!(reply.status, StatusCode::OK);
    assert!(
        reply.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    let text = String::from_utf8(reply.body.to_vec()).unwrap();
    assert!(
        text.contains("gateway_dns_admission_duration_seconds_count 2\n"),
        "{text}"
    );
    assert!(
        text.contains("gateway_dns_admission_requests_total{outcome=\"denied\"} 1\n"),
        "{text}"
    );
    assert!(
        text.contains("gateway_dns_admission_requests_total{outcome=\"allowed\"} 1\n"),
        "{text}"
    );

    // The plain-HTTP metrics listener, read with a raw HTTP/1.1 request.
    let listener = server::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(server::serve_plain(
        listener,
        server::metrics_router(webhook.metrics.clone(), webhook.readiness.clone()),
        server::ListenerOptions::default(),
        async {
            let _ = stopped.await;
        },
    ));
    let text = plain_get(addr, "/metrics").await;
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains("gateway_dns_admission_requests_total{outcome=\"denied\"} 1\n"));
    assert!(
        text.to_ascii_lowercase()
            .contains("content-type: text/plain; version=0.0.4; charset=utf-8\r\n"),
        "{text}"
    );
    // A scraper that asks for OpenMetrics (Prometheus does) gets it: typed by family, `# EOF`.
    let accept = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5";
    let open = plain_get_with(addr, "/metrics", &[("Accept", accept)]).await;
    assert!(
        open.to_ascii_lowercase().contains(
            "content-type: application/openmetrics-text; version=1.0.0; charset=utf-8\r\n"
        ),
        "{open}"
    );
    assert!(
        open.contains("# TYPE gateway_dns_admission_requests counter\n"),
        "{open}"
    );
    assert!(open.contains("gateway_dns_admission_requests_total{outcome=\"denied\"} 1\n"));
    assert!(open.ends_with("# EOF\n"), "{open}");
    assert!(
        plain_get(addr, "/healthz")
            .await
            .starts_with("HTTP/1.1 200")
    );
    // Readiness too, for probes when the webhook requires client certificates.
    assert!(plain_get(addr, "/readyz").await.starts_with("HTTP/1.1 200"));
    stop.send(()).unwrap();
    serving.await.unwrap().unwrap();
}

async fn plain_get(addr: std::net::SocketAddr, path: &str) -> String {
    plain_get_with(addr, path, &[]).await
}

async fn plain_get_with(
    addr: std::net::SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
) -> String {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let extra: String = headers
        .iter()
        .map(|(name, value)| format!("{name}: {value}\r\n"))
        .collect();
    let request =
        format!("GET {path} HTTP/1.1\r\nHost: metrics\r\n{extra}Connection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    tokio::time::timeout(
        Duration::from_secs(10),
        stream.read_to_string(&mut response),
    )
    .await
    .unwrap()
    .unwrap();
    response
}

#[tokio::test]
async fn the_baseline_route_exists_only_when_enabled() {
    let body = serde_json::to_vec(&review("b", "web", "allow")).unwrap();
    for (enabled, status) in [(false, StatusCode::NOT_FOUND), (true, StatusCode::OK)] {
        let options = WebhookOptions {
            enable_baseline_route: enabled,
            ..WebhookOptions::default()
        };
        let webhook = InProcess::new(Arc::new(TestHandler), options);
        let reply = webhook
            .send(
                Method::POST,
                "/baseline-allow",
                &[("content-type", "application/json")],
                body.clone(),
            )
            .await;
        assert_eq!(reply.status, status, "enabled: {enabled}");
        if enabled {
            assert_eq!(reply.json()["response"]["allowed"], true);
        }
    }
}

#[tokio::test]
async fn a_closure_can_be_the_handler() {
    let handler: Arc<dyn AdmissionHandler> = Arc::new(|request: &AdmissionRequest| {
        let operation = request.operation;
        gateway_dns::webhook::review::AdmissionAnswer::allow_with_warnings(vec![format!(
            "Seen: {operation}"
        )])
    });
    let webhook = InProcess::new(handler, WebhookOptions::default());
    let (_, body) = webhook.post_review(&review("c", "web", "deny")).await;
    assert_eq!(warnings(&body), ["Seen: CREATE"]);
}

#[tokio::test]
async fn shutdown_lets_an_open_request_finish() {
    let webhook = start_default().await;
    let mut connection = webhook.connect().await;
    let in_flight = tokio::spawn(async move {
        connection
            .post_review(&review("late", "web", "slow:300"))
            .await
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let addr = webhook.addr;
    webhook.stop().await;
    let (status, body) = in_flight.await.unwrap();
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["response"]["uid"], "late");
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "still accepting after stop"
    );
}

/// A keep-alive client (kube-apiserver) learns of a shutdown only from the server. An idle
/// HTTP/1.1 connection stays open a little after stop and answers a request sent on it, with
/// `Connection: close`, instead of being closed under it; an h2 one hears GOAWAY at once.
#[tokio::test]
async fn shutdown_answers_a_request_on_an_idle_keep_alive_connection_and_closes_it() {
    let webhook = start_default().await;
    let http1 = crate::support::webhook::client_tls_config(
        &[&webhook.ca_pem],
        &[b"http/1.1"],
        &[&rustls::version::TLS13],
    );
    let mut idle = HttpsConnection::connect_with(webhook.addr, http1, &service_host())
        .await
        .unwrap();
    let (status, _) = idle.post_review(&review("before", "web", "allow")).await;
    assert_eq!(status, StatusCode::OK);
    let mut h2 = webhook.connect().await;
    assert_eq!(h2.alpn.as_deref(), Some(&b"h2"[..]));
    h2.post_review(&review("h2-before", "web", "allow")).await;

    let stopping = tokio::spawn(webhook.stop());
    // The stop has begun: the h2 client is told to go elsewhere (GOAWAY) ...
    tokio::time::sleep(Duration::from_millis(300)).await;
    let refused = h2
        .send(
            Method::POST,
            VALIDATE_PATH,
            &[("content-type", "application/json")],
            "{}",
        )
        .await;
    assert!(
        refused.is_err(),
        "an h2 request after GOAWAY was served: {refused:?}"
    );
    // ... and the idle HTTP/1.1 connection answers, saying it closes.
    let reply = idle
        .send(
            Method::POST,
            VALIDATE_PATH,
            &[("content-type", "application/json")],
            serde_json::to_vec(&review("after", "web", "allow")).unwrap(),
        )
        .await
        .expect("a request on an idle connection during the drain is answered");
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.json()["response"]["uid"], "after");
    assert_eq!(reply.headers.get("connection").unwrap(), "close");
    tokio::time::timeout(Duration::from_secs(10), stopping)
        .await
        .expect("the server stops after the drain")
        .unwrap();
}

#[tokio::test]
async fn run_webhook_fails_fast_on_a_bad_pair_and_serves_a_good_one() {
    let directory = tempfile::tempdir().unwrap();
    let first = gateway_dns::webhook::certs::generate("gateway-dns", "gateway-dns-system").unwrap();
    let second =
        gateway_dns::webhook::certs::generate("gateway-dns", "gateway-dns-system").unwrap();
    std::fs::write(directory.path().join("tls.crt"), &first.cert_pem).unwrap();
    std::fs::write(directory.path().join("tls.key"), &second.key_pem).unwrap();
    let files = gateway_dns::webhook::tls::CertSource::Files {
        cert_path: directory.path().join("tls.crt"),
        key_path: directory.path().join("tls.key"),
        poll_interval: Duration::from_secs(2),
    };
    let state = |readiness| {
        state::WebhookState::new(
            Arc::new(TestHandler),
            Arc::new(gateway_dns::metrics::Metrics::new()),
            readiness,
            WebhookOptions::default(),
        )
    };
    let readiness = state::Readiness::new();
    let error = server::run_webhook(
        "127.0.0.1:0".parse().unwrap(),
        files.clone(),
        state(readiness.clone()),
        std::future::pending(),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(
            error,
            server::Error::Tls(gateway_dns::webhook::tls::Error::KeyMismatch(_))
        ),
        "{error:?}"
    );
    assert!(!readiness.is_tls_bound());

    // With the matching key it serves; find a free port first (run_webhook binds itself).
    std::fs::write(directory.path().join("tls.key"), &first.key_pem).unwrap();
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(server::run_webhook(
        addr,
        files,
        state(readiness.clone()),
        async {
            let _ = stopped.await;
        },
    ));
    let started = Instant::now();
    while !readiness.is_tls_bound() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "webhook never bound"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (status, body) = post_review(
        addr,
        &first.ca_cert_pem,
        &service_host(),
        &review("run", "web", "deny"),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["response"]["allowed"], false);
    stop.send(()).unwrap();
    serving.await.unwrap().unwrap();
    assert!(!readiness.is_tls_bound());
}
