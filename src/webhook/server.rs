//! The HTTPS webhook server: axum routes served over tokio-rustls with hyper-util's auto builder
//! (HTTP/1.1 and HTTP/2), plus an optional plain-HTTP listener for `/metrics`.
//!
//! Routes on the webhook listener:
//! - `POST /validate`: AdmissionReview `admission.k8s.io/v1` → read ([`super::review`]),
//!   decided within its deadline ([`super::dispatch`]), answered ([`super::encode`]);
//! - `GET /healthz`: 200 while the process serves;
//! - `GET /readyz`: 200 once TLS is bound *and* the caller marked its sources synced, else 503;
//! - `GET /metrics`: Prometheus text;
//! - `POST /baseline-allow` (only with [`WebhookOptions::enable_baseline_route`]): a fixed
//!   "allowed" answer without decoding, the baseline of the load benchmark.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
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
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant as TokioInstant;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt as _;

use super::state::{Readiness, WebhookOptions, WebhookState};
use super::{dispatch, encode, review, tls};
use crate::metrics::{self, Metrics};
use crate::net::{CapObserver, ConnectionGuard, ConnectionLimits, ConnectionTable};

const MAX_HTTP2_STREAMS: u32 = 256;
/// How long in-flight requests may finish after shutdown is requested.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// After shutdown is requested, how long an HTTP/1.1 connection stays open, answering with
/// `Connection: close`, before it is closed. A keep-alive client (kube-apiserver) learns of the
/// shutdown only from such an answer; closing an idle connection at once races with a request
/// it may be sending on it, which then fails instead of going to another replica.
const DRAIN_LINGER: Duration = Duration::from_secs(3);
/// How long an idle or evicted connection may take to say goodbye (h2 GOAWAY) before it is
/// dropped.
const CLOSE_GRACE: Duration = Duration::from_secs(1);

/// Transport limits of an HTTP listener (the webhook's or the metrics listener).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerOptions {
    /// Open connections, per source, first-request and idle timeouts.
    pub connections: ConnectionLimits,
    /// Told of each connection closed or refused at a cap (for the metrics).
    pub caps: Option<CapObserver>,
    /// A client that opens TCP but never finishes the TLS handshake is dropped after this.
    pub handshake_timeout: Duration,
    /// HTTP/1.1 request headers must arrive within this once they start.
    pub header_read_timeout: Duration,
    /// An h2 connection is pinged this often; a ping unanswered for as long closes it.
    pub http2_keepalive_interval: Duration,
}

impl Default for ListenerOptions {
    fn default() -> Self {
        Self {
            connections: ConnectionLimits::HTTP_DEFAULT,
            caps: None,
            handshake_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(30),
            http2_keepalive_interval: Duration::from_secs(30),
        }
    }
}

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
    Tls(#[from] tls::Error),
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

/// The routes of the plain-HTTP metrics listener (`--metrics-listen`): `/metrics`, `/healthz`
/// and `/readyz` (so that probes need no client certificate when `--client-ca` is set).
pub fn metrics_router(metrics: Arc<Metrics>, readiness: Arc<Readiness>) -> Router {
    Router::new()
        .route(
            "/metrics",
            get(
                |State((metrics, _)): State<(Arc<Metrics>, Arc<Readiness>)>, headers: HeaderMap| async move {
                    metrics_response(&metrics, &headers)
                },
            )
            .fallback(only_get),
        )
        .route("/healthz", get(healthz).fallback(only_get))
        .route(
            "/readyz",
            get(
                |State((_, readiness)): State<(Arc<Metrics>, Arc<Readiness>)>| async move {
                    readiness_response(&readiness)
                },
            )
            .fallback(only_get),
        )
        .fallback(not_found)
        .with_state((metrics, readiness))
}

/// Runs the HTTPS webhook on `listen` until `shutdown` completes: loads the certificates from
/// `cert_source` (files are then reloaded on change), binds, serves `router(state)`. This is
/// all `gateway-dns serve` needs for the webhook side.
pub async fn run_webhook(
    listen: SocketAddr,
    cert_source: tls::CertSource,
    state: WebhookState,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), Error> {
    // Keep the runtime (and its reloader) alive while serving.
    let tls = tls::start(cert_source, state.metrics.clone()).await?;
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

/// Binds a TCP listener (a helper so callers get this module's error type).
pub async fn bind(addr: SocketAddr) -> Result<TcpListener, Error> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| Error::Bind { addr, source })
}

/// Serves `app` over TLS on `listener` with the default [`ListenerOptions`] until `shutdown`
/// completes, then lets open requests finish for a few seconds. Marks `readiness` TLS-bound
/// while accepting.
pub async fn serve_tls(
    listener: TcpListener,
    tls_config: Arc<rustls::ServerConfig>,
    app: Router,
    readiness: Arc<Readiness>,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), Error> {
    serve_tls_with(
        listener,
        tls_config,
        app,
        readiness,
        ListenerOptions::default(),
        shutdown,
    )
    .await
}

/// [`serve_tls`] with explicit transport limits.
pub async fn serve_tls_with(
    listener: TcpListener,
    tls_config: Arc<rustls::ServerConfig>,
    app: Router,
    readiness: Arc<Readiness>,
    options: ListenerOptions,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), Error> {
    readiness.set_tls_bound(true);
    let acceptor = Some(TlsAcceptor::from(tls_config));
    serve_connections(listener, acceptor, app, options, shutdown).await;
    readiness.set_tls_bound(false);
    Ok(())
}

/// Serves `app` over plain HTTP (HTTP/1.1 and h2c) until `shutdown` completes, under the same
/// connection limits as the webhook.
pub async fn serve_plain(
    listener: TcpListener,
    app: Router,
    options: ListenerOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), Error> {
    serve_connections(listener, None, app, options, shutdown).await;
    Ok(())
}

/// The accept loop: never paused; a full table makes room by closing its longest-idle
/// connection (see [`crate::net`]).
async fn serve_connections(
    listener: TcpListener,
    acceptor: Option<TlsAcceptor>,
    app: Router,
    options: ListenerOptions,
    shutdown: impl Future<Output = ()> + Send,
) {
    let table = ConnectionTable::observed(options.connections, options.caps.clone());
    let (stop_sender, stop_receiver) = watch::channel(false);
    let mut connections = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => {
                // Refused rather than left waiting in the backlog: new connections go elsewhere.
                drop(listener);
                break;
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let guard = match table.admit(peer.ip()) {
                        Ok(guard) => guard,
                        Err(refused) => {
                            tracing::debug!(%peer, %refused, "connection refused");
                            continue;
                        }
                    };
                    connections.spawn(serve_connection(
                        acceptor.clone(),
                        stream,
                        peer,
                        app.clone(),
                        options.clone(),
                        guard,
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
    drain(connections, stop_sender).await;
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

async fn serve_connection(
    acceptor: Option<TlsAcceptor>,
    stream: TcpStream,
    peer: SocketAddr,
    app: Router,
    options: ListenerOptions,
    guard: ConnectionGuard,
    stop: watch::Receiver<bool>,
) {
    let Some(acceptor) = acceptor else {
        serve_http(TokioIo::new(stream), peer, app, options, guard, stop).await;
        return;
    };
    // The handshake counts against the first-request timeout too, and an eviction ends it.
    let handshake = tokio::time::timeout(options.handshake_timeout, acceptor.accept(stream));
    let tls_stream = tokio::select! {
        handshake = handshake => match handshake {
            Ok(Ok(tls_stream)) => tls_stream,
            Ok(Err(error)) => {
                tracing::debug!(%peer, %error, "TLS handshake failed");
                return;
            }
            Err(_) => {
                tracing::debug!(%peer, "TLS handshake timed out");
                return;
            }
        },
        () = guard.expired() => {
            tracing::debug!(%peer, "connection closed during the TLS handshake");
            return;
        }
    };
    serve_http(TokioIo::new(tls_stream), peer, app, options, guard, stop).await;
}

async fn serve_http<I>(
    io: I,
    peer: SocketAddr,
    app: Router,
    options: ListenerOptions,
    guard: ConnectionGuard,
    mut stop: watch::Receiver<bool>,
) where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(options.header_read_timeout);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(MAX_HTTP2_STREAMS)
        .keep_alive_interval(options.http2_keepalive_interval)
        .keep_alive_timeout(options.http2_keepalive_interval);
    let guard = Arc::new(guard);
    // h2 clients hear of a shutdown from GOAWAY at once; HTTP/1.1 ones from a closing answer.
    let http2 = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let service = {
        let guard = guard.clone();
        let http2 = http2.clone();
        let draining = stop.clone();
        hyper::service::service_fn(move |request: Request<hyper::body::Incoming>| {
            // Counted from the request's start to its answer: only then is the connection busy.
            let in_progress = guard.begin_request();
            let app = app.clone();
            let version = request.version();
            if version == axum::http::Version::HTTP_2 {
                http2.store(true, std::sync::atomic::Ordering::Relaxed);
            }
            let draining = draining.clone();
            async move {
                let mut response = app.oneshot(request.map(Body::new)).await;
                if *draining.borrow()
                    && version < axum::http::Version::HTTP_2
                    && let Ok(response) = response.as_mut()
                {
                    response
                        .headers_mut()
                        .insert(header::CONNECTION, HeaderValue::from_static("close"));
                }
                drop(in_progress);
                response
            }
        })
    };
    let connection = builder.serve_connection(io, service).into_owned();
    tokio::pin!(connection);
    enum Ended<T> {
        Finished(T),
        Stopping,
        Idle,
    }
    let ended = tokio::select! {
        result = connection.as_mut() => Ended::Finished(result),
        _ = stop.wait_for(|stopping| *stopping) => Ended::Stopping,
        () = guard.expired() => Ended::Idle,
    };
    let result = match ended {
        Ended::Finished(result) => result,
        Ended::Stopping => {
            if !http2.load(std::sync::atomic::Ordering::Relaxed) {
                // Open a little longer: a request sent now is answered, with `Connection: close`.
                if let Ok(result) = tokio::time::timeout(DRAIN_LINGER, connection.as_mut()).await {
                    if let Err(error) = result {
                        tracing::debug!(%peer, %error, "connection ended with an error");
                    }
                    return;
                }
            }
            connection.as_mut().graceful_shutdown();
            connection.await
        }
        Ended::Idle => {
            tracing::debug!(%peer, evicted = guard.was_evicted(), "closing an idle connection");
            connection.as_mut().graceful_shutdown();
            // Idle: nothing is lost when the goodbye does not finish in time.
            let _ = tokio::time::timeout(CLOSE_GRACE, connection.as_mut()).await;
            return;
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
    let review = match review::parse_review(&body) {
        Ok(review) => review,
        Err(error) => {
            return (
                error_response(StatusCode::BAD_REQUEST, error.to_string()),
                "error",
            );
        }
    };
    let answer = dispatch::answer_within_deadline(state, &review, uri, arrived).await;
    let uid = &*review.uid;
    let outcome = if answer.allowed { "allowed" } else { "denied" };
    tracing::debug!(
        %uid,
        outcome,
        warnings = answer.warnings.len(),
        elapsed = ?arrived.elapsed(),
        "answered admission review"
    );
    (json_body_response(encoded_answer(uid, &answer)), outcome)
}

/// The answer's JSON, written into a buffer kept per thread and copied out at its exact size:
/// one allocation per answer, none for growing the buffer or for the body's bookkeeping.
fn encoded_answer(uid: &str, answer: &review::AdmissionAnswer) -> Bytes {
    /// A buffer grown past this by a rare large answer is given back rather than kept.
    const KEPT_CAPACITY: usize = 64 * 1024;
    thread_local! {
        static ANSWER_BUFFER: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    ANSWER_BUFFER.with(|buffer| {
        let Ok(mut buffer) = buffer.try_borrow_mut() else {
            return Bytes::from(encode::encode_review_response(uid, answer));
        };
        buffer.clear();
        encode::encode_review_response_into(&mut buffer, uid, answer);
        let answer = Bytes::copy_from_slice(&buffer);
        if buffer.capacity() > KEPT_CAPACITY {
            *buffer = Vec::new();
        }
        answer
    })
}

/// A 200 answer with a JSON body; the header value is static, not parsed and copied per answer.
fn json_body_response(body: impl Into<Body>) -> Response {
    let mut response = Response::new(body.into());
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
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
    json_body_response(FIXED)
}

async fn healthz() -> Response {
    json_response(StatusCode::OK, &json!({"status": "ok"}))
}

async fn readyz(State(state): State<WebhookState>) -> Response {
    readiness_response(&state.readiness)
}

fn readiness_response(readiness: &Readiness) -> Response {
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

async fn metrics_text(State(state): State<WebhookState>, headers: HeaderMap) -> Response {
    metrics_response(&state.metrics, &headers)
}

/// Prometheus text (0.0.4), or OpenMetrics when the scraper's `Accept` header names it (as
/// Prometheus's does by default).
fn metrics_response(metrics: &Metrics, headers: &HeaderMap) -> Response {
    let openmetrics = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .any(|value| value.contains("application/openmetrics-text"));
    if openmetrics {
        (
            [(header::CONTENT_TYPE, metrics::OPENMETRICS_CONTENT_TYPE)],
            metrics.render_openmetrics(),
        )
            .into_response()
    } else {
        (
            [(header::CONTENT_TYPE, metrics::CONTENT_TYPE)],
            metrics.render(),
        )
            .into_response()
    }
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
