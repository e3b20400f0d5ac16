//! Connections that open and then say nothing: they must neither lock out a real client nor stay
//! open for ever.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gateway_dns::net::ConnectionLimits;
use gateway_dns::webhook::server::ListenerOptions;
use gateway_dns::webhook::state::WebhookOptions;
use hyper::http::StatusCode;
use rustls::pki_types::ServerName;
use tokio::io::AsyncReadExt as _;
use tokio::net::{TcpSocket, TcpStream};
use tokio::task::JoinSet;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use crate::support::webhook::{
    TestHandler, TestWebhook, apiserver_tls_config, review, service_host,
};

/// Silent clients opened by the lockout test: more than the listener's connection cap.
const SILENT_CLIENTS: usize = 5000;
/// Handshakes in flight at once while the silent clients connect.
const CONNECT_CONCURRENCY: usize = 64;

/// A TCP connection from `source` (any 127.0.0.0/8 address is loopback on Linux).
pub async fn connect_from(source: Ipv4Addr, server: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(IpAddr::V4(source), 0))?;
    socket.connect(server).await
}

/// Connects from `source`, completes the TLS handshake, then sends nothing.
async fn silent_tls(
    source: Ipv4Addr,
    server: SocketAddr,
    config: Arc<rustls::ClientConfig>,
) -> Option<TlsStream<TcpStream>> {
    let tcp = connect_from(source, server).await.ok()?;
    let name = ServerName::try_from(service_host()).ok()?;
    let handshake = TlsConnector::from(config).connect(name, tcp);
    tokio::time::timeout(Duration::from_secs(30), handshake)
        .await
        .ok()?
        .ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_tls_connections_beyond_the_cap_do_not_lock_out_a_review() {
    // Timeouts far beyond the test: only making room by eviction can let the review in.
    let listener_options = ListenerOptions {
        connections: ConnectionLimits {
            first_request_timeout: Duration::from_secs(300),
            idle_timeout: Duration::from_secs(300),
            ..ConnectionLimits::HTTP_DEFAULT
        },
        handshake_timeout: Duration::from_secs(300),
        ..ListenerOptions::default()
    };
    assert!(SILENT_CLIENTS > listener_options.connections.max_connections);
    let webhook = TestWebhook::start_limited(
        Arc::new(TestHandler),
        WebhookOptions::default(),
        listener_options.clone(),
    )
    .await;
    let config = apiserver_tls_config(&webhook.ca_pem);

    // Spread over eight source addresses, each under the per-source cap: the listener-wide
    // cap is what they exhaust.
    let mut silent = Vec::with_capacity(SILENT_CLIENTS);
    let mut handshakes = JoinSet::new();
    for index in 0..SILENT_CLIENTS {
        if handshakes.len() == CONNECT_CONCURRENCY
            && let Some(done) = handshakes.join_next().await
        {
            silent.extend(done.unwrap());
        }
        let source = Ipv4Addr::new(127, 0, 0, 2 + (index % 8) as u8);
        handshakes.spawn(silent_tls(source, webhook.addr, config.clone()));
    }
    while let Some(done) = handshakes.join_next().await {
        silent.extend(done.unwrap());
    }
    assert!(
        silent.len() > listener_options.connections.max_connections / 2,
        "only {} silent clients completed the TLS handshake",
        silent.len()
    );

    let started = Instant::now();
    let mut connection = webhook.connect().await;
    let (status, body) = connection.post_review(&review("u1", "web", "allow")).await;
    let elapsed = started.elapsed();
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["response"]["allowed"], true, "{body}");
    println!(
        "{} silent TLS clients completed their handshake; a new connection's review answered in {elapsed:?}",
        silent.len()
    );
    assert!(
        elapsed < WebhookOptions::default().admission_deadline,
        "the review took {elapsed:?}"
    );
    drop(silent);
}

fn short_timeouts() -> ListenerOptions {
    ListenerOptions {
        connections: ConnectionLimits {
            first_request_timeout: Duration::from_millis(500),
            idle_timeout: Duration::from_millis(500),
            ..ConnectionLimits::HTTP_DEFAULT
        },
        ..ListenerOptions::default()
    }
}

/// Reads until the server closes the connection (EOF or reset), or `limit` passes.
async fn closed_within<S: tokio::io::AsyncRead + Unpin>(stream: &mut S, limit: Duration) -> bool {
    let mut buffer = [0u8; 256];
    let read_until_closed = async {
        // Bounded: every read either returns data the server sent (a few frames at most) or ends.
        for _ in 0..64 {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => return true,
                Ok(_) => {}
            }
        }
        false
    };
    tokio::time::timeout(limit, read_until_closed)
        .await
        .unwrap_or(false)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_tls_connection_is_closed_after_the_first_request_timeout() {
    let webhook = TestWebhook::start_limited(
        Arc::new(TestHandler),
        WebhookOptions::default(),
        short_timeouts(),
    )
    .await;
    let config = apiserver_tls_config(&webhook.ca_pem);
    let mut tls = silent_tls(Ipv4Addr::LOCALHOST, webhook.addr, config)
        .await
        .expect("the TLS handshake completes");
    assert!(closed_within(&mut tls, Duration::from_secs(5)).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_h2_connection_is_closed_after_the_idle_timeout() {
    let webhook = TestWebhook::start_limited(
        Arc::new(TestHandler),
        WebhookOptions::default(),
        short_timeouts(),
    )
    .await;
    let mut connection = webhook.connect().await;
    assert_eq!(connection.alpn.as_deref(), Some(&b"h2"[..]));
    let (status, _) = connection.post_review(&review("u1", "web", "allow")).await;
    assert_eq!(status, StatusCode::OK);
    // Well past the idle timeout and the goodbye's grace: the connection is gone.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let second = connection
        .send(
            hyper::http::Method::GET,
            "/healthz",
            &[],
            hyper::body::Bytes::new(),
        )
        .await;
    assert!(second.is_err(), "the idle h2 connection still answered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_connection_is_not_closed_as_idle() {
    let webhook = TestWebhook::start_limited(
        Arc::new(TestHandler),
        WebhookOptions::default(),
        short_timeouts(),
    )
    .await;
    let mut connection = webhook.connect().await;
    // Slower than the idle timeout, yet in progress the whole time.
    let (status, body) = connection
        .post_review(&review("u1", "slow", "slow:1200"))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["response"]["allowed"], true, "{body}");
}
