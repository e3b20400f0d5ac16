//! The HTTP exchange shared by the providers that speak to an HTTP API (PowerDNS, an
//! external-dns webhook provider): one request, a deadline over the whole exchange, and a cap
//! on the answer's size, so a slow or hostile server can neither hang a sync pass nor exhaust
//! memory.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::{Method, Request, StatusCode, Uri};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use tokio::time::timeout;

pub(super) type HttpClient = Client<HttpConnector, Full<Bytes>>;

/// How one exchange failed before any HTTP status was seen.
#[derive(Debug, thiserror::Error)]
pub enum ExchangeError {
    #[error("{0}")]
    Connect(#[source] hyper_util::client::legacy::Error),
    #[error("reading the answer failed: {0}")]
    Body(String),
    #[error("no answer within {0:?}")]
    Timeout(Duration),
}

impl ExchangeError {
    /// The server was not reachable (yet): worth another attempt while starting up.
    pub fn is_unreachable(&self) -> bool {
        matches!(self, ExchangeError::Connect(_) | ExchangeError::Timeout(_))
    }
}

/// What came back.
pub(super) struct Reply {
    pub status: StatusCode,
    /// Empty when the server sent none.
    pub content_type: String,
    pub body: Bytes,
}

/// The configured base URL without trailing slashes, when it is a plain `http://` URL with a
/// host; `None` otherwise.
pub(super) fn http_base(configured: &str) -> Option<String> {
    let base = configured.trim_end_matches('/');
    let uri: Uri = base.parse().ok()?;
    (uri.scheme_str() == Some("http") && uri.host().is_some()).then(|| base.to_string())
}

/// A request that accepts `media_type` and, when it has a body, declares it as `media_type`.
/// `None` when `url` or a header value is not valid HTTP.
pub(super) fn request(
    method: Method,
    url: &str,
    media_type: &str,
    extra_headers: &[(&str, &str)],
    body: Option<Vec<u8>>,
) -> Option<Request<Full<Bytes>>> {
    let mut builder = Request::builder()
        .method(method)
        .uri(url)
        .header("Accept", media_type);
    for (name, value) in extra_headers {
        builder = builder.header(*name, *value);
    }
    if body.is_some() {
        builder = builder.header("Content-Type", media_type);
    }
    builder
        .body(Full::new(Bytes::from(body.unwrap_or_default())))
        .ok()
}

/// Sends `request` and reads at most `max_body` bytes of the answer, all within `deadline`.
pub(super) async fn exchange(
    client: &HttpClient,
    request: Request<Full<Bytes>>,
    deadline: Duration,
    max_body: usize,
) -> Result<Reply, ExchangeError> {
    let exchange = async {
        let response = client
            .request(request)
            .await
            .map_err(ExchangeError::Connect)?;
        let status = response.status();
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let body = Limited::new(response.into_body(), max_body)
            .collect()
            .await
            .map_err(|e| ExchangeError::Body(e.to_string()))?
            .to_bytes();
        Ok(Reply {
            status,
            content_type,
            body,
        })
    };
    timeout(deadline, exchange)
        .await
        .map_err(|_| ExchangeError::Timeout(deadline))?
}
