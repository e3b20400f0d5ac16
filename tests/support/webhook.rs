//! Talking to the webhook as kube-apiserver does: HTTPS on loopback, trusting only the
//! generated CA, SNI and Host `NAME.NS.svc`, `POST /validate?timeout=10s`.
//!
//! Also starts a real webhook server (TLS socket, real rustls) for a given handler, drives the
//! same routes in-process where the transport adds nothing, and provides a test handler whose
//! answer is chosen by an annotation on the reviewed object.
//!
//! Self-contained (only crates, no `super::`), so the benchmark can include it with `#[path]`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use gateway_dns::metrics::Metrics;
use gateway_dns::webhook::review::{
    AdmissionAnswer, AdmissionHandler, AdmissionRequest, Cause, Denial,
};
use gateway_dns::webhook::server;
use gateway_dns::webhook::state::{Readiness, WebhookOptions, WebhookState};
use gateway_dns::webhook::tls::{self, CertSource, TlsRuntime};
use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use hyper::client::conn::{http1, http2};
use hyper::http::{HeaderMap, Method, Request, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// The Service the test certificates are issued for.
pub const SERVICE: &str = "gateway-dns";
pub const NAMESPACE: &str = "gateway-dns-system";
/// The path kube-apiserver calls (it always appends the webhook's timeout).
pub const VALIDATE_PATH: &str = "/validate?timeout=10s";
/// The headers of an AdmissionReview request.
pub const JSON: [(&str, &str); 1] = [("content-type", "application/json")];
/// Annotation read by [`TestHandler`].
pub const VERDICT_ANNOTATION: &str = "test.gateway-dns.io/answer";
/// No single request in these tests may take longer than this (catches hung connections).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(20);

pub type ClientError = Box<dyn std::error::Error + Send + Sync>;

/// `NAME.NS.svc`: the name kube-apiserver uses as SNI and Host for a Service webhook.
pub fn service_host() -> String {
    format!("{SERVICE}.{NAMESPACE}.svc")
}

/// A rustls client configuration on ring that trusts only `ca_pems`.
pub fn client_tls_config(
    ca_pems: &[&str],
    alpn: &[&[u8]],
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for ca_pem in ca_pems {
        for certificate in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
            roots.add(certificate.unwrap()).unwrap();
        }
    }
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(versions)
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|protocol| protocol.to_vec()).collect();
    Arc::new(config)
}

/// The client configuration kube-apiserver effectively uses: h2 preferred, TLS 1.2 and 1.3.
pub fn apiserver_tls_config(ca_pem: &str) -> Arc<rustls::ClientConfig> {
    client_tls_config(
        &[ca_pem],
        &[b"h2", b"http/1.1"],
        &[&rustls::version::TLS13, &rustls::version::TLS12],
    )
}

enum Sender {
    Http1(http1::SendRequest<Full<Bytes>>),
    Http2(http2::SendRequest<Full<Bytes>>),
}

/// One response, fully read.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Reply {
    /// The body as JSON (panics with the body text if it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|error| {
            panic!(
                "body is not JSON ({error}): {}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }
}

/// One keep-alive HTTPS connection to the webhook.
pub struct HttpsConnection {
    sender: Sender,
    authority: String,
    /// The ALPN protocol the server chose (`h2` or `http/1.1`), if any.
    pub alpn: Option<Vec<u8>>,
    pub tls_version: Option<rustls::ProtocolVersion>,
    /// Full or resumed handshake.
    pub handshake_kind: Option<rustls::HandshakeKind>,
    /// The leaf certificate the server presented.
    pub server_certificate: CertificateDer<'static>,
}

impl HttpsConnection {
    /// Connects as kube-apiserver would: trusting only `ca_pem`, SNI `sni`.
    pub async fn connect(addr: SocketAddr, ca_pem: &str, sni: &str) -> Result<Self, ClientError> {
        Self::connect_with(addr, apiserver_tls_config(ca_pem), sni).await
    }

    pub async fn connect_with(
        addr: SocketAddr,
        config: Arc<rustls::ClientConfig>,
        sni: &str,
    ) -> Result<Self, ClientError> {
        let tcp = TcpStream::connect(addr).await?;
        tcp.set_nodelay(true)?;
        let server_name = ServerName::try_from(sni.to_string())?;
        let tls = tokio::time::timeout(
            REQUEST_TIMEOUT,
            TlsConnector::from(config).connect(server_name, tcp),
        )
        .await??;
        let (_, session) = tls.get_ref();
        let alpn = session.alpn_protocol().map(<[u8]>::to_vec);
        let tls_version = session.protocol_version();
        let handshake_kind = session.handshake_kind();
        let server_certificate = session
            .peer_certificates()
            .and_then(|chain| chain.first())
            .ok_or("server presented no certificate")?
            .clone()
            .into_owned();
        let io = TokioIo::new(tls);
        let sender = if alpn.as_deref() == Some(b"h2") {
            let (sender, connection) = http2::handshake(TokioExecutor::new(), io).await?;
            tokio::spawn(connection);
            Sender::Http2(sender)
        } else {
            let (sender, connection) = http1::handshake(io).await?;
            tokio::spawn(connection);
            Sender::Http1(sender)
        };
        Ok(Self {
            sender,
            authority: sni.to_string(),
            alpn,
            tls_version,
            handshake_kind,
            server_certificate,
        })
    }

    /// Sends one request and reads the whole response, failing if it takes over
    /// [`REQUEST_TIMEOUT`].
    pub async fn send(
        &mut self,
        method: Method,
        path_and_query: &str,
        headers: &[(&str, &str)],
        body: impl Into<Bytes>,
    ) -> Result<Reply, ClientError> {
        let uri = match self.sender {
            // h2 carries the authority in the :authority pseudo-header, taken from the URI.
            Sender::Http2(_) => format!("https://{}{path_and_query}", self.authority),
            Sender::Http1(_) => path_and_query.to_string(),
        };
        let mut builder = Request::builder().method(method).uri(uri);
        if matches!(self.sender, Sender::Http1(_)) {
            builder = builder.header("host", &self.authority);
        }
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        let request = builder.body(Full::new(body.into()))?;
        let exchange = async {
            let response = match &mut self.sender {
                Sender::Http1(sender) => {
                    sender.ready().await?;
                    sender.send_request(request).await?
                }
                Sender::Http2(sender) => {
                    sender.ready().await?;
                    sender.send_request(request).await?
                }
            };
            let (parts, body) = response.into_parts();
            let body = body.collect().await?.to_bytes();
            Ok::<_, ClientError>(Reply {
                status: parts.status,
                headers: parts.headers,
                body,
            })
        };
        tokio::time::timeout(REQUEST_TIMEOUT, exchange)
            .await
            .map_err(|_| "request timed out (hung connection?)")?
    }

    /// POSTs an AdmissionReview to `/validate?timeout=10s`; returns the status and JSON body.
    pub async fn post_review(&mut self, review: &Value) -> (StatusCode, Value) {
        let body = serde_json::to_vec(review).unwrap();
        let reply = self.send(Method::POST, VALIDATE_PATH, &JSON, body).await;
        let reply = reply.unwrap();
        (reply.status, reply.json())
    }
}

/// Connects as kube-apiserver, POSTs one review and returns the status and JSON body.
pub async fn post_review(
    addr: SocketAddr,
    ca_pem: &str,
    sni: &str,
    review: &Value,
) -> (StatusCode, Value) {
    let mut connection = HttpsConnection::connect(addr, ca_pem, sni).await.unwrap();
    connection.post_review(review).await
}

/// An AdmissionReview for CREATE of an HTTPRoute carrying `answer` in the test annotation.
pub fn review(uid: &str, name: &str, answer: &str) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "gateway.networking.k8s.io", "version": "v1", "kind": "HTTPRoute"},
            "resource": {"group": "gateway.networking.k8s.io", "version": "v1", "resource": "httproutes"},
            "namespace": "shop",
            "name": name,
            "operation": "CREATE",
            "userInfo": {"username": "alice"},
            "object": {
                "apiVersion": "gateway.networking.k8s.io/v1",
                "kind": "HTTPRoute",
                "metadata": {
                    "name": name,
                    "namespace": "shop",
                    "annotations": {VERDICT_ANNOTATION: answer},
                },
                "spec": {"hostnames": [format!("{name}.example.com")]},
            },
            "oldObject": null,
            "dryRun": false,
        }
    })
}

/// Answers according to the object's [`VERDICT_ANNOTATION`]:
/// `allow`; `deny` (two causes naming the route); `warn:N` (N warnings of ~100 characters);
/// `slow:MS` (sleeps, then allows); `panic`. Anything else: allow.
#[derive(Debug, Default)]
pub struct TestHandler;

impl AdmissionHandler for TestHandler {
    fn handle(&self, request: &AdmissionRequest) -> AdmissionAnswer {
        let meta = request.object().map(|object| object.meta());
        let name = meta.map_or("unnamed", |meta| meta.name());
        let answer = meta
            .and_then(|meta| meta.annotations.get(VERDICT_ANNOTATION))
            .unwrap_or("allow");
        if answer == "deny" {
            let causes = vec![
                Cause {
                    reason: "HostnameConflict".into(),
                    field: "spec.hostnames[0]".into(),
                    message: format!("{name}.example.com is already served by Gateway infra/other"),
                },
                Cause {
                    reason: "InvalidHostname".into(),
                    field: "spec.hostnames[1]".into(),
                    message: "10.0.0.1 is an IP address, not a hostname".into(),
                },
            ];
            let message = causes
                .iter()
                .map(|cause| format!("{}: {}", cause.reason, cause.message))
                .collect::<Vec<_>>()
                .join("\n");
            return AdmissionAnswer::deny(
                Denial { message, causes },
                vec![format!(
                    "NoParentRefs: HTTPRoute shop/{name} attaches to nothing"
                )],
            );
        }
        if let Some(count) = answer.strip_prefix("warn:") {
            let count: usize = count.parse().unwrap_or(1);
            return AdmissionAnswer::allow_with_warnings(
                (0..count)
                    .map(|index| {
                        format!(
                            "TestWarning: warning {index:04} for {name} {}",
                            "x".repeat(70)
                        )
                    })
                    .collect(),
            );
        }
        if let Some(millis) = answer.strip_prefix("slow:") {
            std::thread::sleep(Duration::from_millis(millis.parse().unwrap_or(1000)));
            return AdmissionAnswer::allow();
        }
        if answer == "panic" {
            panic!("test handler asked to panic for {name}");
        }
        AdmissionAnswer::allow()
    }
}

/// A webhook server on 127.0.0.1 (random port) with a real TLS socket; stopped on drop.
pub struct TestWebhook {
    pub addr: SocketAddr,
    /// The CA that signed the serving certificate (in-memory mode only).
    pub ca_pem: String,
    pub metrics: Arc<Metrics>,
    pub readiness: Arc<Readiness>,
    pub tls: TlsRuntime,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl TestWebhook {
    /// In-memory certificates for [`SERVICE`].[`NAMESPACE`]; sources marked synced.
    pub async fn start(handler: Arc<dyn AdmissionHandler>, options: WebhookOptions) -> Self {
        let ca_dir = tempfile::tempdir().unwrap();
        let source = CertSource::InMemory {
            service: SERVICE.into(),
            namespace: NAMESPACE.into(),
            ca_out: ca_dir.path().join("certs/ca.crt"),
        };
        let webhook = Self::start_with(handler, options, source).await;
        webhook.readiness.set_sources_synced(true);
        webhook
    }

    /// In-memory certificates, sources synced, and these transport limits.
    pub async fn start_limited(
        handler: Arc<dyn AdmissionHandler>,
        options: WebhookOptions,
        listener_options: server::ListenerOptions,
    ) -> Self {
        let ca_dir = tempfile::tempdir().unwrap();
        let source = CertSource::InMemory {
            service: SERVICE.into(),
            namespace: NAMESPACE.into(),
            ca_out: ca_dir.path().join("certs/ca.crt"),
        };
        let webhook = Self::start_full(handler, options, source, listener_options).await;
        webhook.readiness.set_sources_synced(true);
        webhook
    }

    /// Any certificate source; readiness left as the caller wants it (sources not synced).
    pub async fn start_with(
        handler: Arc<dyn AdmissionHandler>,
        options: WebhookOptions,
        source: CertSource,
    ) -> Self {
        Self::start_full(handler, options, source, server::ListenerOptions::default()).await
    }

    async fn start_full(
        handler: Arc<dyn AdmissionHandler>,
        options: WebhookOptions,
        source: CertSource,
        listener_options: server::ListenerOptions,
    ) -> Self {
        let metrics = Arc::new(Metrics::new());
        let readiness = Readiness::new();
        let tls = tls::start(source, metrics.clone()).await.unwrap();
        let listener = server::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = server::router(WebhookState::new(
            handler,
            metrics.clone(),
            readiness.clone(),
            options,
        ));
        let (shutdown, stop) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn({
            let config = tls.server_config.clone();
            let readiness = readiness.clone();
            async move {
                server::serve_tls_with(listener, config, app, readiness, listener_options, async {
                    let _ = stop.await;
                })
                .await
                .unwrap();
            }
        });
        Self {
            addr,
            ca_pem: tls.ca_cert_pem.clone().unwrap_or_default(),
            metrics,
            readiness,
            tls,
            shutdown: Some(shutdown),
            task,
        }
    }

    pub async fn connect(&self) -> HttpsConnection {
        HttpsConnection::connect(self.addr, &self.ca_pem, &service_host())
            .await
            .unwrap()
    }

    /// Stops accepting, lets open requests finish, and waits for the server task.
    pub async fn stop(mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        let _ = (&mut self.task).await;
    }
}

impl Drop for TestWebhook {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        self.task.abort();
    }
}

/// The webhook's routes called in-process, without TLS or a socket: for what the routes answer,
/// where the transport adds nothing.
pub struct InProcess {
    router: axum::Router,
    pub metrics: Arc<Metrics>,
}

impl InProcess {
    /// The routes for `handler`, sources marked synced.
    pub fn new(handler: Arc<dyn AdmissionHandler>, options: WebhookOptions) -> Self {
        let metrics = Arc::new(Metrics::new());
        let readiness = Readiness::new();
        readiness.set_sources_synced(true);
        let router = server::router(WebhookState::new(
            handler,
            metrics.clone(),
            readiness,
            options,
        ));
        Self { router, metrics }
    }

    /// Sends one request through the router and reads the whole response.
    pub async fn send(
        &self,
        method: Method,
        path_and_query: &str,
        headers: &[(&str, &str)],
        body: impl Into<Bytes>,
    ) -> Reply {
        use tower::ServiceExt as _;
        let mut builder = Request::builder().method(method).uri(path_and_query);
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        let request = builder
            .body(axum::body::Body::from(body.into()))
            .expect("a valid request");
        let response = self
            .router
            .clone()
            .oneshot(request)
            .await
            .expect("the router always answers");
        let (parts, body) = response.into_parts();
        Reply {
            status: parts.status,
            headers: parts.headers,
            body: body.collect().await.expect("the whole body").to_bytes(),
        }
    }

    /// POSTs an AdmissionReview to `/validate?timeout=10s`; returns the status and JSON body.
    pub async fn post_review(&self, review: &Value) -> (StatusCode, Value) {
        let body = serde_json::to_vec(review).unwrap();
        let reply = self.send(Method::POST, VALIDATE_PATH, &JSON, body).await;
        (reply.status, reply.json())
    }
}

/// The repository's `examples/` directory.
pub fn examples_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples")
}

impl HttpsConnection {
    /// POSTs `examples/admission/<file>` and returns the review's `response` (asserting HTTP 200).
    pub async fn example_review(&mut self, file: &str) -> Value {
        let path = examples_dir().join("admission").join(file);
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let (status, body) = self
            .post_review(&serde_json::from_str(&text).unwrap())
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body["response"].clone()
    }
}
