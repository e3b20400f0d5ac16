//! The HTTPS admission webhook server: axum routes served over tokio-rustls with hyper-util's
//! auto builder (HTTP/1.1 and HTTP/2), plus an optional plain-HTTP listener for `/metrics`.
//!
//! Routes on the webhook listener:
//! - `POST /validate`: AdmissionReview `admission.k8s.io/v1` → the [`AdmissionHandler`];
//! - `GET /healthz`: 200 while the process serves;
//! - `GET /readyz`: 200 once TLS is bound *and* the caller marked its sources synced, else 503;
//! - `GET /metrics`: Prometheus text;
//! - `POST /baseline-allow` (only with [`WebhookOptions::enable_baseline_route`]): a fixed
//!   "allowed" answer without decoding, the baseline of the load benchmark.
//!
//! Overload policy: evaluations run on the blocking pool, at most
//! [`WebhookOptions::max_in_flight`] at once (a handler's quick decisions, microseconds each,
//! run on the request's own task and take no slot). A request that finds no free slot waits
//! until its admission deadline and is then answered *allowed* with an `EvaluationOverloaded`
//! warning, like an evaluation that overruns the deadline (`EvaluationTimeout`) or panics
//! (`EvaluationError`): gateway-dns never blocks a valid object because of its own limits.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use http_body_util::{BodyExt as _, LengthLimitError, Limited};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;
use tokio::time::Instant as TokioInstant;
use tokio_rustls::TlsAcceptor;

use crate::metrics::{self, EvaluationErrorKind, Metrics};
use crate::webhook::{self, AdmissionHandler, AdmissionRequest, Verdict};

/// Largest AdmissionReview body accepted (kube-apiserver's own request limit is 3 MiB).
pub const DEFAULT_MAX_BODY_BYTES: usize = 3 * 1024 * 1024;
pub const DEFAULT_ADMISSION_DEADLINE: Duration = Duration::from_secs(2);
pub const DEFAULT_MAX_IN_FLIGHT: usize = 256;
const DEFAULT_BODY_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// A client that opens TCP but never finishes the TLS handshake is dropped after this.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// HTTP/1.1 request headers must arrive within this (also closes idle keep-alive connections).
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);
const MAX_CONNECTIONS: usize = 4096;
const MAX_HTTP2_STREAMS: u32 = 256;
/// How long in-flight requests may finish after shutdown is requested.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// Kept out of the API server's own timeout so our answer arrives before it gives up.
const APISERVER_TIMEOUT_MARGIN: Duration = Duration::from_millis(200);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot listen on {addr}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("server failed: {0}")]
    Serve(std::io::Error),
    #[error(transparent)]
    Tls(#[from] crate::tls::Error),
}

/// Tunables of the `/validate` route.
#[derive(Debug, Clone)]
pub struct WebhookOptions {
    /// Every review is answered within this time from its arrival (or the API server's
    /// `?timeout=`, whichever is shorter), if need be "allowed" with a warning.
    pub admission_deadline: Duration,
    /// Evaluations on the blocking pool running at once; more wait for a slot until their
    /// deadline. Quick decisions (see `AdmissionHandler::is_quick`) need no slot.
    pub max_in_flight: usize,
    /// Larger bodies get 413.
    pub max_body_bytes: usize,
    /// A body not received within this gets 408.
    pub body_read_timeout: Duration,
    /// Serve `POST /baseline-allow` (for the load benchmark only).
    pub enable_baseline_route: bool,
}

impl Default for WebhookOptions {
    fn default() -> Self {
        Self {
            admission_deadline: DEFAULT_ADMISSION_DEADLINE,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            body_read_timeout: DEFAULT_BODY_READ_TIMEOUT,
            enable_baseline_route: false,
        }
    }
}

/// Readiness of the webhook: TLS bound (set by [`serve_tls`]) and sources synced (set by the
/// caller once every source completed its first sync).
#[derive(Debug, Default)]
pub struct Readiness {
    tls_bound: AtomicBool,
    sources_synced: AtomicBool,
}

impl Readiness {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    pub fn set_sources_synced(&self, synced: bool) {
        self.sources_synced.store(synced, Ordering::Release);
    }

    pub fn set_tls_bound(&self, bound: bool) {
        self.tls_bound.store(bound, Ordering::Release);
    }

    pub fn is_tls_bound(&self) -> bool {
        self.tls_bound.load(Ordering::Acquire)
    }

    pub fn is_sources_synced(&self) -> bool {
        self.sources_synced.load(Ordering::Acquire)
    }

    pub fn is_ready(&self) -> bool {
        self.is_tls_bound() && self.is_sources_synced()
    }
}

/// Shared state of the webhook routes.
#[derive(Clone)]
pub struct WebhookState {
    handler: Arc<dyn AdmissionHandler>,
    metrics: Arc<Metrics>,
    readiness: Arc<Readiness>,
    options: Arc<WebhookOptions>,
    evaluation_slots: Arc<Semaphore>,
}

impl WebhookState {
    pub fn new(
        handler: Arc<dyn AdmissionHandler>,
        metrics: Arc<Metrics>,
        readiness: Arc<Readiness>,
        options: WebhookOptions,
    ) -> Self {
        Self {
            handler,
            metrics,
            readiness,
            evaluation_slots: Arc::new(Semaphore::new(options.max_in_flight.max(1))),
            options: Arc::new(options),
        }
    }
}

/// The routes of the HTTPS webhook listener.
pub fn router(state: WebhookState) -> Router {
    let mut router = Router::new()
        .route("/validate", post(validate).fallback(only_post))
        .route("/healthz", get(healthz).fallback(only_get))
        .route("/readyz", get(readyz).fallback(only_get))
        .route("/metrics", get(metrics_text).fallback(only_get));
    if state.options.enable_baseline_route {
        router = router.route("/baseline-allow", post(baseline_allow).fallback(only_post));
    }
    router.fallback(not_found).with_state(state)
}

/// The routes of the plain-HTTP metrics listener (`--metrics-listen`): `/metrics`, `/healthz`.
pub fn metrics_router(metrics: Arc<Metrics>) -> Router {
    Router::new()
        .route(
            "/metrics",
            get(|State(metrics): State<Arc<Metrics>>| async move { metrics_response(&metrics) })
                .fallback(only_get),
        )
        .route("/healthz", get(healthz).fallback(only_get))
        .fallback(not_found)
        .with_state(metrics)
}

/// Runs the HTTPS webhook on `listen` until `shutdown` completes: loads the certificates from
/// `cert_source` (files are then reloaded on change), binds, serves `router(state)`. This is
/// all `gateway-dns serve` needs for the webhook side.
pub async fn run_webhook(
    listen: SocketAddr,
    cert_source: crate::tls::CertSource,
    state: WebhookState,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), Error> {
    // Keep the runtime (and its reloader) alive while serving.
    let tls = crate::tls::start(cert_source, state.metrics.clone()).await?;
    let listener = bind(listen).await?;
    let readiness = state.readiness.clone();
    tracing::info!(addr = %listen, "admission webhook listening (HTTPS)");
    serve_tls(
        listener,
        tls.server_config.clone(),
        router(state),
        readiness,
        shutdown,
    )
    .await
}

/// Runs the plain-HTTP metrics listener (`--metrics-listen`) until `shutdown` completes.
pub async fn run_metrics(
    listen: SocketAddr,
    metrics: Arc<Metrics>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), Error> {
    let listener = bind(listen).await?;
    tracing::info!(addr = %listen, "metrics listening (HTTP)");
    serve_plain(listener, metrics_router(metrics), shutdown).await
}

/// Binds a TCP listener (a helper so callers get this module's error type).
pub async fn bind(addr: SocketAddr) -> Result<TcpListener, Error> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| Error::Bind { addr, source })
}

/// Serves `app` over TLS on `listener` until `shutdown` completes, then lets open requests
/// finish for a few seconds. Marks `readiness` TLS-bound while accepting.
pub async fn serve_tls(
    listener: TcpListener,
    tls_config: Arc<rustls::ServerConfig>,
    app: Router,
    readiness: Arc<Readiness>,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), Error> {
    let acceptor = TlsAcceptor::from(tls_config);
    let (stop_sender, stop_receiver) = watch::channel(false);
    let mut connections = JoinSet::new();
    readiness.set_tls_bound(true);
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            accepted = listener.accept(), if connections.len() < MAX_CONNECTIONS => match accepted {
                Ok((stream, peer)) => {
                    connections.spawn(serve_tls_connection(
                        acceptor.clone(),
                        stream,
                        peer,
                        app.clone(),
                        stop_receiver.clone(),
                    ));
                }
                Err(error) => {
                    // E.g. out of file descriptors: back off instead of spinning.
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
        }
    }
    readiness.set_tls_bound(false);
    drain(connections, stop_sender).await;
    Ok(())
}

/// Serves `app` over plain HTTP (HTTP/1.1 and h2c) until `shutdown` completes.
pub async fn serve_plain(
    listener: TcpListener,
    app: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), Error> {
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(Error::Serve)
}

async fn drain(mut connections: JoinSet<()>, stop_sender: watch::Sender<bool>) {
    let _ = stop_sender.send(true);
    let all_closed = async { while connections.join_next().await.is_some() {} };
    if tokio::time::timeout(SHUTDOWN_GRACE, all_closed)
        .await
        .is_err()
    {
        tracing::warn!("closing connections still open after the shutdown grace period");
    }
    connections.abort_all();
}

async fn serve_tls_connection(
    acceptor: TlsAcceptor,
    stream: TcpStream,
    peer: SocketAddr,
    app: Router,
    mut stop: watch::Receiver<bool>,
) {
    let tls_stream = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
        Ok(Ok(tls_stream)) => tls_stream,
        Ok(Err(error)) => {
            tracing::debug!(%peer, %error, "TLS handshake failed");
            return;
        }
        Err(_) => {
            tracing::debug!(%peer, "TLS handshake timed out");
            return;
        }
    };
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(MAX_HTTP2_STREAMS);
    let connection = builder
        .serve_connection(TokioIo::new(tls_stream), TowerToHyperService::new(app))
        .into_owned();
    tokio::pin!(connection);
    let finished_early = tokio::select! {
        result = connection.as_mut() => Some(result),
        _ = stop.wait_for(|stopping| *stopping) => None,
    };
    let result = match finished_early {
        Some(result) => result,
        None => {
            connection.as_mut().graceful_shutdown();
            connection.await
        }
    };
    if let Err(error) = result {
        tracing::debug!(%peer, %error, "connection ended with an error");
    }
}

async fn validate(State(state): State<WebhookState>, request: Request) -> Response {
    // One clock read for both the deadline and the latency metric (clock reads are not free
    // on every VM).
    let started = Instant::now();
    let arrived = TokioInstant::from_std(started);
    // Taken apart rather than extracted: extractors would copy the headers and the URI.
    let (parts, body) = request.into_parts();
    let (response, outcome) =
        answer_review(&state, &parts.uri, &parts.headers, body, arrived).await;
    state.metrics.observe_admission_latency(started.elapsed());
    state.metrics.record_admission_request(outcome);
    response
}

async fn answer_review(
    state: &WebhookState,
    uri: &Uri,
    headers: &HeaderMap,
    body: Body,
    arrived: TokioInstant,
) -> (Response, &'static str) {
    let body = match read_json_body(&state.options, headers, body).await {
        Ok(body) => body,
        Err(rejection) => return (rejection.into_response(), "error"),
    };
    let review = match webhook::parse_review(&body) {
        Ok(review) => review,
        Err(error) => {
            return (
                error_response(StatusCode::BAD_REQUEST, error.to_string()),
                "error",
            );
        }
    };
    drop(body);
    let deadline = effective_deadline(state.options.admission_deadline, uri);
    let (uid, verdict) = if state.handler.is_quick(&review) {
        let verdict = decide_inline(state, &review);
        (review.uid, verdict)
    } else {
        let uid = review.uid.clone();
        let verdict = evaluate_on_blocking_pool(state, review, arrived + deadline, deadline).await;
        (uid, verdict)
    };
    let outcome = if verdict.allowed { "allowed" } else { "denied" };
    tracing::debug!(
        %uid,
        outcome,
        warnings = verdict.warnings.len(),
        elapsed = ?arrived.elapsed(),
        "answered admission review"
    );
    let answer = webhook::encode_review_response(&uid, &verdict);
    (
        (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            answer,
        )
            .into_response(),
        outcome,
    )
}

/// A decision the handler calls quick runs right on the request's task: it takes
/// microseconds, and handing it to a blocking thread (a wake-up each way, dozens of threads on
/// a small machine) cost several times the decision itself. It never waits, so it takes no
/// evaluation slot; a panic becomes an "allowed" verdict with a warning and a metric.
fn decide_inline(state: &WebhookState, request: &AdmissionRequest) -> Verdict {
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        state.handler.handle(request)
    }));
    outcome.unwrap_or_else(|_| handler_failed(state, &"panicked"))
}

/// Runs the handler on the blocking pool within the deadline, where an overrun cannot stall
/// the server and the deadline answer always goes out; every failure mode becomes an
/// "allowed" verdict with a warning and a metric.
async fn evaluate_on_blocking_pool(
    state: &WebhookState,
    request: AdmissionRequest,
    deadline_at: TokioInstant,
    deadline: Duration,
) -> Verdict {
    // A free slot is the common case: take it without arming a timer.
    let slot = match state.evaluation_slots.clone().try_acquire_owned() {
        Ok(permit) => Ok(Ok(permit)),
        Err(_) => {
            tokio::time::timeout_at(deadline_at, state.evaluation_slots.clone().acquire_owned())
                .await
        }
    };
    let permit = match slot {
        Ok(Ok(permit)) => permit,
        // Timed out waiting (a closed semaphore cannot happen: we never close it).
        Ok(Err(_)) | Err(_) => {
            state
                .metrics
                .record_evaluation_error(EvaluationErrorKind::Overloaded);
            tracing::warn!(
                max_in_flight = state.options.max_in_flight,
                "no evaluation slot before the deadline; allowing"
            );
            return Verdict::allow_with_warnings(vec![format!(
                "EvaluationOverloaded: gateway-dns was too busy to evaluate this in {}; allowed",
                human_duration(deadline)
            )]);
        }
    };
    let handler = state.handler.clone();
    let evaluation = tokio::task::spawn_blocking(move || {
        // The slot stays taken until the handler returns, even after a timeout answer.
        let _permit = permit;
        handler.handle(&request)
    });
    match tokio::time::timeout_at(deadline_at, evaluation).await {
        Ok(Ok(verdict)) => verdict,
        Ok(Err(join_error)) => handler_failed(state, &join_error),
        Err(_) => {
            state
                .metrics
                .record_evaluation_error(EvaluationErrorKind::Timeout);
            tracing::warn!(deadline = ?deadline, "admission handler overran the deadline; allowing");
            Verdict::allow_with_warnings(vec![format!(
                "EvaluationTimeout: gateway-dns did not finish in {}; allowed",
                human_duration(deadline)
            )])
        }
    }
}

fn handler_failed(state: &WebhookState, error: &dyn std::fmt::Display) -> Verdict {
    state
        .metrics
        .record_evaluation_error(EvaluationErrorKind::Panic);
    tracing::error!(%error, "admission handler failed; allowing");
    Verdict::allow_with_warnings(vec![
        "EvaluationError: gateway-dns failed while evaluating this object; allowed".to_string(),
    ])
}

/// Our deadline, shortened when the API server says it will give up sooner (`?timeout=10s`).
fn effective_deadline(configured: Duration, uri: &Uri) -> Duration {
    let apiserver_timeout = uri.query().and_then(|query| {
        query
            .split('&')
            .find_map(|pair| pair.strip_prefix("timeout="))
            .and_then(parse_go_seconds)
    });
    match apiserver_timeout {
        Some(timeout) => configured.min(timeout.saturating_sub(APISERVER_TIMEOUT_MARGIN)),
        None => configured,
    }
}

/// Parses the `<N>s` form kube-apiserver uses for the webhook timeout.
fn parse_go_seconds(text: &str) -> Option<Duration> {
    let seconds: u64 = text.strip_suffix('s')?.parse().ok()?;
    Some(Duration::from_secs(seconds))
}

/// `2s`, `1.5s` or `250ms`.
pub fn human_duration(duration: Duration) -> String {
    let millis = duration.as_millis();
    if millis < 1000 {
        format!("{millis}ms")
    } else if millis.is_multiple_of(1000) {
        format!("{}s", millis / 1000)
    } else {
        format!("{}s", duration.as_secs_f64())
    }
}

/// An HTTP error answer with a JSON body `{"error": "..."}`.
struct Rejection {
    status: StatusCode,
    message: String,
}

impl IntoResponse for Rejection {
    fn into_response(self) -> Response {
        error_response(self.status, self.message)
    }
}

/// Checks the content type and size, then reads the body within the read timeout.
async fn read_json_body(
    options: &WebhookOptions,
    headers: &HeaderMap,
    body: Body,
) -> Result<Bytes, Rejection> {
    if !is_json_content_type(headers) {
        return Err(Rejection {
            status: StatusCode::UNSUPPORTED_MEDIA_TYPE,
            message: "Content-Type must be application/json".to_string(),
        });
    }
    read_limited_body(options, headers, body).await
}

async fn read_limited_body(
    options: &WebhookOptions,
    headers: &HeaderMap,
    body: Body,
) -> Result<Bytes, Rejection> {
    let too_large = || Rejection {
        status: StatusCode::PAYLOAD_TOO_LARGE,
        message: format!("request body exceeds {} bytes", options.max_body_bytes),
    };
    let declared_length = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<u64>().ok());
    if declared_length.is_some_and(|length| length > options.max_body_bytes as u64) {
        return Err(too_large());
    }
    let collect = Limited::new(body, options.max_body_bytes).collect();
    match tokio::time::timeout(options.body_read_timeout, collect).await {
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(error)) if error.downcast_ref::<LengthLimitError>().is_some() => Err(too_large()),
        Ok(Err(error)) => Err(Rejection {
            status: StatusCode::BAD_REQUEST,
            message: format!("cannot read request body: {error}"),
        }),
        Err(_) => Err(Rejection {
            status: StatusCode::REQUEST_TIMEOUT,
            message: "request body not received in time".to_string(),
        }),
    }
}

fn is_json_content_type(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|media_type| media_type.trim().eq_ignore_ascii_case("application/json"))
}

/// The fixed answer of the baseline route: the cost of transport alone.
async fn baseline_allow(State(state): State<WebhookState>, request: Request) -> Response {
    const FIXED: &str = r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"baseline","allowed":true,"warnings":[]}}"#;
    // Read the body like /validate does, so keep-alive behaves the same; never decode it.
    let (parts, body) = request.into_parts();
    if let Err(rejection) = read_limited_body(&state.options, &parts.headers, body).await {
        return rejection.into_response();
    }
    ([(header::CONTENT_TYPE, "application/json")], FIXED).into_response()
}

async fn healthz() -> Response {
    json_response(StatusCode::OK, &json!({"status": "ok"}))
}

async fn readyz(State(state): State<WebhookState>) -> Response {
    let readiness = &state.readiness;
    let status = if readiness.is_ready() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    json_response(
        status,
        &json!({
            "status": if readiness.is_ready() { "ready" } else { "not ready" },
            "tlsBound": readiness.is_tls_bound(),
            "sourcesSynced": readiness.is_sources_synced(),
        }),
    )
}

async fn metrics_text(State(state): State<WebhookState>) -> Response {
    metrics_response(&state.metrics)
}

fn metrics_response(metrics: &Metrics) -> Response {
    (
        [(header::CONTENT_TYPE, metrics::CONTENT_TYPE)],
        metrics.render(),
    )
        .into_response()
}

async fn only_post(method: Method) -> Response {
    method_not_allowed(method, "POST")
}

async fn only_get(method: Method) -> Response {
    method_not_allowed(method, "GET, HEAD")
}

fn method_not_allowed(method: Method, allowed: &'static str) -> Response {
    let mut response = error_response(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("method {method} not allowed; use {allowed}"),
    );
    response
        .headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static(allowed));
    response
}

async fn not_found(uri: Uri) -> Response {
    error_response(
        StatusCode::NOT_FOUND,
        format!("no route for {}", uri.path()),
    )
}

fn error_response(status: StatusCode, message: String) -> Response {
    json_response(status, &json!({ "error": message }))
}

fn json_response(status: StatusCode, value: &Value) -> Response {
    // Serializing a serde_json::Value cannot fail.
    let body = serde_json::to_vec(value).unwrap_or_default();
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadline_follows_a_shorter_apiserver_timeout() {
        let configured = Duration::from_secs(2);
        let uri: Uri = "/validate?timeout=10s".parse().unwrap();
        assert_eq!(effective_deadline(configured, &uri), configured);
        let uri: Uri = "/validate?timeout=1s".parse().unwrap();
        assert_eq!(
            effective_deadline(configured, &uri),
            Duration::from_millis(800)
        );
        let uri: Uri = "/validate?timeout=bogus".parse().unwrap();
        assert_eq!(effective_deadline(configured, &uri), configured);
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(human_duration(Duration::from_secs(2)), "2s");
        assert_eq!(human_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(human_duration(Duration::from_millis(300)), "300ms");
    }

    #[test]
    fn json_content_type_allows_parameters() {
        let mut headers = HeaderMap::new();
        assert!(!is_json_content_type(&headers));
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("Application/JSON; charset=utf-8"),
        );
        assert!(is_json_content_type(&headers));
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        assert!(!is_json_content_type(&headers));
    }
}
