//! PowerDNS authoritative HTTP API: list a zone's RRsets, PATCH RRsets with REPLACE/DELETE.
//!
//! Plain HTTP (the API is meant for loopback or a sidecar); the key goes in `X-API-Key`.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use hyper::{Method, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde::{Deserialize, Serialize};

use crate::dns::batches::HalvingBatches;
use crate::dns::http::{self, ExchangeError, HttpClient};
use crate::dns::{Changes, Endpoint, Provider, Targets, zone_of};
use crate::model::RecordType;
use crate::model::dns_name::canonical;
use crate::secret::SecretSource;

/// Environment variable read for the API key when no key file is given.
pub const API_KEY_ENV: &str = "GATEWAY_DNS_PDNS_API_KEY";
/// How long an idle API connection is kept: less than any sync interval worth having.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(5);

/// Largest API answer read (a zone listing of many thousand records fits easily).
const MAX_RESPONSE_BYTES: usize = 64 * 1024 * 1024;

#[derive(Clone)]
pub struct PdnsConfig {
    /// Base URL of the API server, e.g. `http://127.0.0.1:8081`.
    pub api_url: String,
    /// PowerDNS server id (always `localhost` for the authoritative server).
    pub server_id: String,
    pub api_key: String,
    /// Zones managed (lower-case, no trailing dot).
    pub zones: Vec<String>,
    /// Per HTTP request.
    pub timeout: Duration,
    /// RRsets per PATCH request.
    pub batch_size: usize,
}

impl fmt::Debug for PdnsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PdnsConfig")
            .field("api_url", &self.api_url)
            .field("server_id", &self.server_id)
            .field("api_key", &"<redacted>")
            .field("zones", &self.zones)
            .finish()
    }
}

impl PdnsConfig {
    pub fn new(api_url: impl Into<String>, api_key: impl Into<String>, zones: Vec<String>) -> Self {
        PdnsConfig {
            api_url: api_url.into(),
            server_id: "localhost".into(),
            api_key: api_key.into(),
            zones: zones.iter().map(|z| canonical(z).into_owned()).collect(),
            timeout: Duration::from_secs(30),
            batch_size: 500,
        }
    }

    /// Configuration whose API key is read from a file or an environment variable.
    pub fn load(
        api_url: impl Into<String>,
        api_key: &SecretSource,
        zones: Vec<String>,
    ) -> Result<Self, Error> {
        Ok(Self::new(api_url, api_key.load()?, zones))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("PowerDNS API URL {0:?} is not a valid http:// URL")]
    BadUrl(String),
    #[error(transparent)]
    Secret(#[from] crate::secret::Error),
    #[error("PowerDNS API at {url}: {source}")]
    Exchange { url: String, source: ExchangeError },
    #[error("PowerDNS API refused {method} {url}: HTTP {status}: {message}")]
    Api {
        method: Method,
        url: String,
        status: StatusCode,
        message: String,
    },
    #[error("PowerDNS API at {url}: unexpected answer: {source}")]
    Decode {
        url: String,
        source: serde_json::Error,
    },
    #[error("cannot encode PowerDNS request: {0}")]
    Encode(serde_json::Error),
    #[error("{0} is in none of the managed zones")]
    OutsideZones(String),
    #[error("{failed} of {total} RRset changes were rejected; first: {first}")]
    Partial {
        failed: usize,
        total: usize,
        first: Box<Error>,
    },
}

impl crate::dns::ProviderError for Error {}

pub struct PdnsProvider {
    config: PdnsConfig,
    base: String,
    client: HttpClient,
}

#[derive(Deserialize)]
struct ZoneBody {
    #[serde(default)]
    rrsets: Vec<RrsetBody>,
}

#[derive(Deserialize)]
struct RrsetBody {
    name: String,
    #[serde(rename = "type")]
    rtype: String,
    ttl: u32,
    #[serde(default)]
    records: Vec<RecordBody>,
}

#[derive(Deserialize, Serialize)]
struct RecordBody {
    content: String,
    #[serde(default)]
    disabled: bool,
}

#[derive(Serialize)]
struct PatchBody<'a> {
    rrsets: &'a [PatchRrset],
}

#[derive(Serialize)]
struct PatchRrset {
    name: String,
    #[serde(rename = "type")]
    rtype: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    ttl: Option<u32>,
    changetype: &'static str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    records: Vec<RecordBody>,
}

#[derive(Deserialize)]
struct ErrorBody {
    error: String,
}

impl PdnsProvider {
    pub fn new(config: PdnsConfig) -> Result<Self, Error> {
        let base = http::http_base(&config.api_url)
            .ok_or_else(|| Error::BadUrl(config.api_url.clone()))?;
        // A host name in the URL is resolved for each new connection; closing idle ones soon
        // makes every sync pass resolve it again, so a Service or server that moves is followed.
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(POOL_IDLE_TIMEOUT)
            .build_http();
        Ok(PdnsProvider {
            config,
            base,
            client,
        })
    }

    fn zone_url(&self, zone: &str) -> String {
        format!(
            "{}/api/v1/servers/{}/zones/{}.",
            self.base, self.config.server_id, zone
        )
    }

    async fn request(
        &self,
        method: Method,
        url: &str,
        body: Option<Vec<u8>>,
    ) -> Result<Bytes, Error> {
        let request = http::request(
            method.clone(),
            url,
            "application/json",
            &[("X-API-Key", self.config.api_key.as_str())],
            body,
        )
        .ok_or_else(|| Error::BadUrl(url.to_string()))?;
        let reply = http::exchange(
            &self.client,
            request,
            self.config.timeout,
            MAX_RESPONSE_BYTES,
        )
        .await
        .map_err(|source| Error::Exchange {
            url: url.to_string(),
            source,
        })?;
        if !reply.status.is_success() {
            let message = api_error_message(&reply.body);
            return Err(Error::Api {
                method,
                url: url.to_string(),
                status: reply.status,
                message,
            });
        }
        Ok(reply.body)
    }

    async fn zone_records(&self, zone: &str) -> Result<Vec<Endpoint>, Error> {
        let url = self.zone_url(zone);
        let body = self.request(Method::GET, &url, None).await?;
        zone_endpoints(&body).map_err(|source| Error::Decode { url, source })
    }

    async fn apply_changes(&self, changes: &Changes) -> Result<(), Error> {
        let mut per_zone: BTreeMap<&str, Vec<PatchRrset>> = BTreeMap::new();
        let ordered = changes
            .delete
            .iter()
            .map(|e| (e, "DELETE"))
            .chain(changes.update.iter().map(|e| (e, "REPLACE")))
            .chain(changes.create.iter().map(|e| (e, "REPLACE")));
        for (endpoint, changetype) in ordered {
            let zone = zone_of(&endpoint.dns_name, &self.config.zones)
                .ok_or_else(|| Error::OutsideZones(endpoint.dns_name.clone()))?;
            let replace = changetype == "REPLACE";
            per_zone.entry(zone).or_default().push(PatchRrset {
                name: format!("{}.", endpoint.dns_name),
                rtype: endpoint.record_type.as_str(),
                ttl: replace.then(|| endpoint.ttl_or_default()),
                changetype,
                records: if replace {
                    endpoint
                        .targets
                        .iter()
                        .map(|target| RecordBody {
                            content: format_content(endpoint.record_type, target),
                            disabled: false,
                        })
                        .collect()
                } else {
                    Vec::new()
                },
            });
        }
        let total = changes.len();
        let mut rejected = Vec::new();
        for (zone, rrsets) in per_zone {
            let url = self.zone_url(zone);
            // A PATCH is all-or-nothing: one RRset PowerDNS rejects (HTTP 422) would hold back
            // the batch, so a rejected batch is split in halves until the culprit is isolated.
            let mut batches = HalvingBatches::new(&rrsets, self.config.batch_size);
            while let Some(batch) = batches.next() {
                let body =
                    serde_json::to_vec(&PatchBody { rrsets: batch }).map_err(Error::Encode)?;
                match self.request(Method::PATCH, &url, Some(body)).await {
                    Ok(_) => {}
                    Err(err) if is_content_error(&err) => {
                        if !batches.split_rejected(batch) {
                            rejected.push(err);
                        }
                    }
                    Err(err) => return Err(err),
                }
            }
        }
        match rejected.len() {
            0 => Ok(()),
            failed => Err(Error::Partial {
                failed,
                total,
                first: Box::new(rejected.swap_remove(0)),
            }),
        }
    }
}

/// PowerDNS answers 422 when it rejects the content of a change (a name, a conflict).
fn is_content_error(err: &Error) -> bool {
    matches!(err, Error::Api { status, .. } if *status == StatusCode::UNPROCESSABLE_ENTITY)
}

impl Provider for PdnsProvider {
    fn name(&self) -> &'static str {
        "pdns"
    }

    fn records(&self) -> BoxFuture<'_, Result<Vec<Endpoint>, crate::dns::Error>> {
        Box::pin(async move {
            let mut all = Vec::new();
            for zone in &self.config.zones {
                all.extend(self.zone_records(zone).await?);
            }
            Ok(all)
        })
    }

    fn apply<'a>(&'a self, changes: &'a Changes) -> BoxFuture<'a, Result<(), crate::dns::Error>> {
        Box::pin(async move { Ok(self.apply_changes(changes).await?) })
    }

    fn zones(&self) -> &[String] {
        &self.config.zones
    }
}

/// A zone as the PowerDNS API returns it (`GET .../zones/<zone>.`) → its RRsets of the types
/// gateway-dns handles. The provider's listing decodes with this; the fuzz targets
/// (docs/fuzzing.md) call it directly.
pub fn zone_endpoints(body: &[u8]) -> Result<Vec<Endpoint>, serde_json::Error> {
    let parsed: ZoneBody = serde_json::from_slice(body)?;
    let mut endpoints = Vec::new();
    for rrset in parsed.rrsets {
        let Ok(record_type) = rrset.rtype.parse::<RecordType>() else {
            continue;
        };
        let targets: Targets = rrset
            .records
            .iter()
            .map(|record| parse_content(record_type, &record.content))
            .collect();
        if targets.is_empty() {
            continue;
        }
        endpoints.push(Endpoint {
            dns_name: canonical(&rrset.name).into_owned(),
            record_type,
            targets,
            ttl: Some(rrset.ttl),
            resource: None,
        });
    }
    Ok(endpoints)
}

/// The message of an API error answer: its `error` member, else the start of the body.
pub fn api_error_message(body: &[u8]) -> String {
    serde_json::from_slice::<ErrorBody>(body)
        .map(|e| e.error)
        .unwrap_or_else(|_| String::from_utf8_lossy(body).chars().take(300).collect())
}

/// Our target → PowerDNS record content (zone-file presentation).
fn format_content(record_type: RecordType, target: &str) -> String {
    match record_type {
        RecordType::A | RecordType::AAAA => target.to_string(),
        RecordType::CNAME => format!("{}.", canonical(target)),
        RecordType::TXT => quote_txt(target),
    }
}

/// PowerDNS record content → our target.
fn parse_content(record_type: RecordType, content: &str) -> String {
    match record_type {
        RecordType::A | RecordType::AAAA => content
            .parse::<std::net::IpAddr>()
            .map(|ip| ip.to_string())
            .unwrap_or_else(|_| content.to_string()),
        RecordType::CNAME => canonical(content).into_owned(),
        RecordType::TXT => unquote_txt(content),
    }
}

/// TXT text as quoted character-strings of at most 255 bytes, escaping `"` and `\` and
/// non-printable bytes as `\DDD`.
fn quote_txt(text: &str) -> String {
    let bytes = text.as_bytes();
    let chunks: Vec<&[u8]> = if bytes.is_empty() {
        vec![&[][..]]
    } else {
        bytes.chunks(255).collect()
    };
    chunks
        .iter()
        .map(|chunk| {
            let mut quoted = String::from("\"");
            for &byte in *chunk {
                match byte {
                    b'"' | b'\\' => {
                        quoted.push('\\');
                        quoted.push(byte as char);
                    }
                    0x20..=0x7e => quoted.push(byte as char),
                    _ => quoted.push_str(&format!("\\{byte:03}")),
                }
            }
            quoted.push('"');
            quoted
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Presentation-format TXT content (one or more character-strings, quoted or not) → the
/// concatenated text.
fn unquote_txt(content: &str) -> String {
    let mut out: Vec<u8> = Vec::new();
    let bytes = content.as_bytes();
    let mut i = 0;
    let mut in_quotes = false;
    while i < bytes.len() {
        let byte = bytes[i];
        match byte {
            b'"' => in_quotes = !in_quotes,
            b'\\' if i + 1 < bytes.len() => {
                let digits = &bytes[i + 1..(i + 4).min(bytes.len())];
                if digits.len() == 3 && digits.iter().all(u8::is_ascii_digit) {
                    let value = digits
                        .iter()
                        .fold(0u32, |acc, d| acc * 10 + u32::from(d - b'0'));
                    out.push(value.min(255) as u8);
                    i += 3;
                } else {
                    out.push(bytes[i + 1]);
                    i += 1;
                }
            }
            b' ' | b'\t' if !in_quotes => {}
            _ => out.push(byte),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn txt_quoting_round_trips() {
        for text in [
            "heritage=external-dns,external-dns/owner=gw",
            "with \"quotes\" and \\ backslash",
            "",
            &"x".repeat(600),
            "tab\there",
        ] {
            let quoted = quote_txt(text);
            assert_eq!(unquote_txt(&quoted), text, "{quoted}");
        }
        assert_eq!(quote_txt(&"y".repeat(300)).matches('"').count(), 4);
        assert_eq!(unquote_txt("\"a\" \"b\""), "ab");
    }

    #[test]
    fn content_formats() {
        assert_eq!(
            format_content(RecordType::CNAME, "lb.example.net"),
            "lb.example.net."
        );
        assert_eq!(
            parse_content(RecordType::CNAME, "LB.example.net."),
            "lb.example.net"
        );
        assert_eq!(
            parse_content(RecordType::AAAA, "2001:db8:0::1"),
            "2001:db8::1"
        );
    }

    #[test]
    fn only_http_urls() {
        let config = |url: &str| PdnsConfig::new(url, "k", vec!["example.com".into()]);
        assert!(PdnsProvider::new(config("https://pdns:8081")).is_err());
        assert!(PdnsProvider::new(config("not a url")).is_err());
        assert!(format!("{:?}", config("http://x")).contains("redacted"));
    }
}
