//! A client of external-dns's webhook-provider protocol, so that every external-dns webhook
//! provider (Cloudflare, Route53 adapters, Infoblox, …) can hold gateway-dns's records.
//!
//! The protocol (external-dns `provider/webhook/api`), media type
//! `application/external.dns.webhook+json;version=1` on every request and answer:
//! - `GET /` negotiates: the server answers its domain filter (`{"include": [...], "exclude": [...]}`);
//! - `GET /records` lists every record the provider holds, as external-dns endpoints;
//! - `POST /records` applies `{"create", "updateOld", "updateNew", "delete"}` (answer 204);
//! - `POST /adjustendpoints` lets the provider rewrite desired endpoints to what it will store
//!   (its TTL limits, for example) before they are compared with what it holds.
//!
//! Plain HTTP: a webhook provider runs as a sidecar on loopback. TXT targets are sent quoted, as
//! external-dns's TXT registry sends them (providers that build zone-file records need the quotes),
//! and read back with or without quotes; a value the provider split into 255-byte strings (as
//! several quoted strings, or as several targets) is joined again.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use hyper::{Method, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde::{Deserialize, Serialize};

use crate::dns::http::{self, ExchangeError, HttpClient};
use crate::dns::{Changes, Endpoint, Provider, Targets, in_zone};
use crate::model::RecordType;
use crate::model::dns_name::canonical;

/// The media type of every request and answer, with its version.
pub const MEDIA_TYPE: &str = "application/external.dns.webhook+json;version=1";

/// Largest answer read (a listing of many thousand records fits easily).
const MAX_RESPONSE_BYTES: usize = 64 * 1024 * 1024;

#[derive(Debug, Clone)]
pub struct ExternalDnsWebhookConfig {
    /// Base URL of the webhook provider, e.g. `http://127.0.0.1:8888`.
    pub url: String,
    /// Zones managed (lower-case, no trailing dot).
    pub zones: Vec<String>,
    /// Per HTTP request.
    pub timeout: Duration,
    /// Negotiation attempts at start-up, one a second: a sidecar may start after gateway-dns.
    pub connect_attempts: u32,
}

impl ExternalDnsWebhookConfig {
    pub fn new(url: impl Into<String>, zones: Vec<String>) -> Self {
        ExternalDnsWebhookConfig {
            url: url.into(),
            zones: zones.iter().map(|z| canonical(z).into_owned()).collect(),
            timeout: Duration::from_secs(30),
            connect_attempts: 30,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("webhook provider URL {0:?} is not a valid http:// URL")]
    BadUrl(String),
    #[error("webhook provider at {url}: {source}")]
    Exchange { url: String, source: ExchangeError },
    #[error("webhook provider refused {method} {url}: HTTP {status}: {message}")]
    Status {
        method: Method,
        url: String,
        status: StatusCode,
        message: String,
    },
    #[error(
        "webhook provider at {url} answered content type {found:?}, not {MEDIA_TYPE:?}; is it an external-dns webhook provider of protocol version 1?"
    )]
    MediaType { url: String, found: String },
    #[error("webhook provider at {url}: unexpected answer: {source}")]
    Decode {
        url: String,
        source: serde_json::Error,
    },
    #[error("cannot encode the webhook request: {0}")]
    Encode(serde_json::Error),
    #[error(
        "zone {zone} is outside the webhook provider's domain filter (it includes {include:?}); pass only --zone values it serves"
    )]
    ZoneOutsideFilter { zone: String, include: Vec<String> },
    #[error(
        "the webhook provider's domain filter excludes {excluded} inside zone {zone}; gateway-dns cannot manage that zone whole"
    )]
    ZoneExcluded { zone: String, excluded: String },
    #[error(
        "the webhook provider's domain filter is a regular expression; gateway-dns needs plain domains"
    )]
    RegexFilter,
    #[error(
        "cannot update {name} {record_type}: it was not in the last listing (the next pass lists again)"
    )]
    UnknownUpdate {
        name: String,
        record_type: RecordType,
    },
}

impl crate::dns::ProviderError for Error {}

/// external-dns's endpoint, as the protocol carries it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
struct WireEndpoint {
    #[serde(default)]
    dns_name: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    targets: Vec<String>,
    #[serde(default)]
    record_type: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    set_identifier: String,
    /// 0: not configured (the provider's default).
    #[serde(default, rename = "recordTTL", skip_serializing_if = "is_zero")]
    record_ttl: i64,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    provider_specific: Vec<ProviderSpecific>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
struct ProviderSpecific {
    #[serde(default)]
    name: String,
    #[serde(default)]
    value: String,
}

fn is_zero(value: &i64) -> bool {
    *value == 0
}

/// external-dns's `plan.Changes`.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
struct WireChanges {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    create: Vec<WireEndpoint>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    update_old: Vec<WireEndpoint>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    update_new: Vec<WireEndpoint>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    delete: Vec<WireEndpoint>,
}

/// external-dns's domain filter as `GET /` answers it.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct DomainFilter {
    #[serde(default)]
    include: Option<Vec<String>>,
    #[serde(default)]
    exclude: Option<Vec<String>>,
    #[serde(default)]
    regex_include: Option<String>,
    #[serde(default)]
    regex_exclude: Option<String>,
}

pub struct ExternalDnsWebhookProvider {
    config: ExternalDnsWebhookConfig,
    base: String,
    client: HttpClient,
    /// The last listing, by (name, type): an update names the record it replaces
    /// (`updateOld`), which the plan does not carry.
    listed: Mutex<BTreeMap<(String, RecordType), WireEndpoint>>,
}

impl ExternalDnsWebhookProvider {
    /// Connects: negotiates at `GET /` and checks that the provider's domain filter covers every
    /// managed zone whole.
    pub async fn connect(config: ExternalDnsWebhookConfig) -> Result<Self, Error> {
        let base = http::http_base(&config.url).ok_or_else(|| Error::BadUrl(config.url.clone()))?;
        let provider = ExternalDnsWebhookProvider {
            config,
            base,
            client: Client::builder(TokioExecutor::new()).build_http(),
            listed: Mutex::new(BTreeMap::new()),
        };
        let url = format!("{}/", provider.base);
        let mut attempt = 1;
        let body = loop {
            match provider.request(Method::GET, &url, None).await {
                Err(Error::Exchange { source, .. })
                    if source.is_unreachable() && attempt < provider.config.connect_attempts =>
                {
                    attempt += 1;
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                answer => break answer?,
            }
        };
        let filter: DomainFilter =
            serde_json::from_slice(&body).map_err(|source| Error::Decode { url, source })?;
        check_filter(&filter, &provider.config.zones)?;
        Ok(provider)
    }

    async fn request(
        &self,
        method: Method,
        url: &str,
        body: Option<Vec<u8>>,
    ) -> Result<Bytes, Error> {
        let request = http::request(method.clone(), url, MEDIA_TYPE, &[], body)
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
            return Err(Error::Status {
                method,
                url: url.to_string(),
                status: reply.status,
                message: String::from_utf8_lossy(&reply.body)
                    .chars()
                    .take(300)
                    .collect(),
            });
        }
        // 204 (applied) has no body and so no content type.
        if reply.status != StatusCode::NO_CONTENT && reply.content_type != MEDIA_TYPE {
            return Err(Error::MediaType {
                url: url.to_string(),
                found: reply.content_type,
            });
        }
        Ok(reply.body)
    }

    async fn list(&self) -> Result<Vec<Endpoint>, Error> {
        let url = format!("{}/records", self.base);
        let body = self.request(Method::GET, &url, None).await?;
        let wire: Vec<WireEndpoint> =
            serde_json::from_slice(&body).map_err(|source| Error::Decode { url, source })?;
        let mut listed = BTreeMap::new();
        let mut endpoints = Vec::new();
        for raw in wire {
            // Records of other types, and routing-policy records (set identifiers), are not
            // gateway-dns's: the plan never sees them.
            let Ok(record_type) = raw.record_type.parse::<RecordType>() else {
                continue;
            };
            if !raw.set_identifier.is_empty() {
                continue;
            }
            let endpoint = from_wire(&raw, record_type);
            // An update names the old record as the provider holds it: a TXT value it split is
            // sent whole, in quotes, as it was written.
            let mut raw = raw;
            if record_type == RecordType::TXT {
                raw.targets = endpoint.targets.iter().map(|t| quote_txt(t)).collect();
            }
            if endpoint.targets.is_empty()
                || !self
                    .config
                    .zones
                    .iter()
                    .any(|zone| in_zone(&endpoint.dns_name, zone))
            {
                continue;
            }
            listed.insert((endpoint.dns_name.clone(), record_type), raw);
            endpoints.push(endpoint);
        }
        *self
            .listed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = listed;
        Ok(endpoints)
    }

    async fn apply_changes(&self, changes: &Changes) -> Result<(), Error> {
        let mut wire = WireChanges {
            create: changes.create.iter().map(to_wire).collect(),
            delete: changes.delete.iter().map(to_wire).collect(),
            ..WireChanges::default()
        };
        {
            let listed = self
                .listed
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            for endpoint in &changes.update {
                let key = (endpoint.dns_name.clone(), endpoint.record_type);
                let Some(old) = listed.get(&key) else {
                    return Err(Error::UnknownUpdate {
                        name: key.0,
                        record_type: key.1,
                    });
                };
                // What the provider holds, as it listed it, with TXT targets quoted like ours.
                let mut old = old.clone();
                if endpoint.record_type == RecordType::TXT {
                    old.targets = old
                        .targets
                        .iter()
                        .map(|t| quote_txt(&unquote_txt(t)))
                        .collect();
                }
                wire.update_old.push(old);
                wire.update_new.push(to_wire(endpoint));
            }
        }
        let body = serde_json::to_vec(&wire).map_err(Error::Encode)?;
        let url = format!("{}/records", self.base);
        self.request(Method::POST, &url, Some(body)).await?;
        Ok(())
    }

    async fn adjust_endpoints(&self, desired: Vec<Endpoint>) -> Result<Vec<Endpoint>, Error> {
        if desired.is_empty() {
            return Ok(desired);
        }
        let wire: Vec<WireEndpoint> = desired.iter().map(to_wire).collect();
        let body = serde_json::to_vec(&wire).map_err(Error::Encode)?;
        let url = format!("{}/adjustendpoints", self.base);
        let answer = self.request(Method::POST, &url, Some(body)).await?;
        let adjusted: Vec<WireEndpoint> =
            serde_json::from_slice(&answer).map_err(|source| Error::Decode { url, source })?;
        // The provider may rewrite or drop endpoints; the owner resource is ours to keep.
        let resources: BTreeMap<(String, RecordType), Option<String>> = desired
            .into_iter()
            .map(|e| ((e.dns_name, e.record_type), e.resource))
            .collect();
        Ok(adjusted
            .iter()
            .filter_map(|raw| {
                let record_type = raw.record_type.parse::<RecordType>().ok()?;
                let mut endpoint = from_wire(raw, record_type);
                endpoint.resource = resources
                    .get(&(endpoint.dns_name.clone(), record_type))
                    .cloned()
                    .flatten();
                Some(endpoint)
            })
            .collect())
    }
}

/// Every managed zone must be inside the provider's filter, and no part of it excluded: the
/// sync loop deletes what it owns in its zones, so it must see them whole.
fn check_filter(filter: &DomainFilter, zones: &[String]) -> Result<(), Error> {
    if filter
        .regex_include
        .as_deref()
        .is_some_and(|r| !r.is_empty())
        || filter
            .regex_exclude
            .as_deref()
            .is_some_and(|r| !r.is_empty())
    {
        return Err(Error::RegexFilter);
    }
    let include: Vec<String> = filter
        .include
        .iter()
        .flatten()
        .map(|d| canonical(d.trim_start_matches('.')).into_owned())
        .filter(|d| !d.is_empty())
        .collect();
    for zone in zones {
        if !include.is_empty() && !include.iter().any(|domain| in_zone(zone, domain)) {
            return Err(Error::ZoneOutsideFilter {
                zone: zone.clone(),
                include,
            });
        }
        for excluded in filter.exclude.iter().flatten() {
            let excluded = canonical(excluded.trim_start_matches('.')).into_owned();
            if in_zone(&excluded, zone) || in_zone(zone, &excluded) {
                return Err(Error::ZoneExcluded {
                    zone: zone.clone(),
                    excluded,
                });
            }
        }
    }
    Ok(())
}

fn to_wire(endpoint: &Endpoint) -> WireEndpoint {
    WireEndpoint {
        dns_name: endpoint.dns_name.clone(),
        targets: endpoint
            .targets
            .iter()
            .map(|t| match endpoint.record_type {
                RecordType::TXT => quote_txt(t),
                _ => t.clone(),
            })
            .collect(),
        record_type: endpoint.record_type.as_str().to_string(),
        record_ttl: endpoint.ttl.map_or(0, i64::from),
        ..WireEndpoint::default()
    }
}

fn from_wire(raw: &WireEndpoint, record_type: RecordType) -> Endpoint {
    let targets: Targets = match record_type {
        RecordType::TXT => rejoin_txt(raw.targets.iter().map(|target| unquote_txt(target))),
        _ => raw
            .targets
            .iter()
            .map(|target| match record_type {
                RecordType::A | RecordType::AAAA => target
                    .parse::<std::net::IpAddr>()
                    .map(|ip| ip.to_string())
                    .unwrap_or_else(|_| target.clone()),
                _ => canonical(target).into_owned(),
            })
            .collect(),
    };
    Endpoint {
        dns_name: canonical(&raw.dns_name).into_owned(),
        record_type,
        targets,
        ttl: u32::try_from(raw.record_ttl).ok().filter(|ttl| *ttl > 0),
        resource: None,
    }
}

/// A TXT value as external-dns's registry writes it: in double quotes, with `"` and `\` escaped.
fn quote_txt(text: &str) -> String {
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    for c in text.chars() {
        if c == '"' || c == '\\' {
            quoted.push('\\');
        }
        quoted.push(c);
    }
    quoted.push('"');
    quoted
}

/// The most a TXT character-string holds (RFC 1035, 3.3): a longer value is stored as several.
const TXT_STRING_MAX: usize = 255;

/// A TXT value as a provider lists it: unquoted, quoted, or as several quoted strings
/// (`"abc" "def"`, a value the provider split), which are joined.
fn unquote_txt(text: &str) -> String {
    quoted_strings(text)
        .map(|strings| strings.concat())
        .unwrap_or_else(|| text.to_string())
}

/// The strings of a text made only of quoted strings separated by blanks; None otherwise.
fn quoted_strings(text: &str) -> Option<Vec<String>> {
    let mut strings = Vec::new();
    let mut chars = text.trim().chars().peekable();
    while let Some(open) = chars.next() {
        if open != '"' {
            return None;
        }
        let mut string = String::new();
        loop {
            match chars.next()? {
                '\\' => string.push(chars.next()?),
                '"' => break,
                c => string.push(c),
            }
        }
        strings.push(string);
        while chars.next_if(|c| c.is_ascii_whitespace()).is_some() {}
    }
    (!strings.is_empty()).then_some(strings)
}

/// TXT targets with a value a provider split into character-strings joined again. Providers
/// that list each string as a target (external-dns's RFC 2136 provider does) cut a long value
/// into strings of exactly 255 bytes and a shorter last one, so a full-length target continues
/// in the next.
fn rejoin_txt(values: impl Iterator<Item = String>) -> Targets {
    let mut joined = Vec::new();
    let mut pending = String::new();
    for value in values {
        let continues = value.len() == TXT_STRING_MAX;
        pending.push_str(&value);
        if !continues {
            joined.push(std::mem::take(&mut pending));
        }
    }
    if !pending.is_empty() {
        joined.push(pending);
    }
    joined.into_iter().collect()
}

impl Provider for ExternalDnsWebhookProvider {
    fn name(&self) -> &'static str {
        "webhook"
    }

    fn records(&self) -> BoxFuture<'_, Result<Vec<Endpoint>, crate::dns::Error>> {
        Box::pin(async move { Ok(self.list().await?) })
    }

    fn apply<'a>(&'a self, changes: &'a Changes) -> BoxFuture<'a, Result<(), crate::dns::Error>> {
        Box::pin(async move { Ok(self.apply_changes(changes).await?) })
    }

    fn adjust(
        &self,
        desired: Vec<Endpoint>,
    ) -> BoxFuture<'_, Result<Vec<Endpoint>, crate::dns::Error>> {
        Box::pin(async move { Ok(self.adjust_endpoints(desired).await?) })
    }

    fn zones(&self) -> &[String] {
        &self.config.zones
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zones() -> Vec<String> {
        vec!["example.com".to_string()]
    }

    /// A provider that starts listening after gateway-dns began negotiating is waited for;
    /// one that never answers fails after the configured attempts.
    #[tokio::test]
    async fn negotiation_waits_for_a_provider_that_starts_later() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let probe = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = probe.local_addr().unwrap();
        drop(probe);
        let mut config = ExternalDnsWebhookConfig::new(format!("http://{addr}"), zones());
        config.connect_attempts = 1;
        assert!(matches!(
            ExternalDnsWebhookProvider::connect(config.clone()).await,
            Err(Error::Exchange {
                source: ExchangeError::Connect(_),
                ..
            })
        ));
        let server = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(1500)).await;
            let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut request = vec![0u8; 4096];
            let _ = socket.read(&mut request).await.unwrap();
            let body = r#"{"include":["example.com"]}"#;
            let answer = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: {MEDIA_TYPE}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            socket.write_all(answer.as_bytes()).await.unwrap();
        });
        config.connect_attempts = 10;
        let provider = ExternalDnsWebhookProvider::connect(config).await;
        assert!(provider.is_ok(), "{:?}", provider.err());
        server.await.unwrap();
    }

    #[test]
    fn txt_values_round_trip_through_quotes() {
        let value = r#"heritage=external-dns,external-dns/owner=a "b" \c"#;
        assert_eq!(unquote_txt(&quote_txt(value)), value);
        assert_eq!(
            unquote_txt("heritage=external-dns"),
            "heritage=external-dns"
        );
    }

    #[test]
    fn a_txt_value_split_by_the_provider_is_read_whole() {
        let value = format!(
            "heritage=external-dns,external-dns/owner={}",
            "o".repeat(600)
        );
        let (first, rest) = value.split_at(TXT_STRING_MAX);
        let (second, third) = rest.split_at(TXT_STRING_MAX);
        // Each string a target, as external-dns's RFC 2136 provider lists it, beside a record
        // of its own.
        let raw = WireEndpoint {
            dns_name: "a-web.example.com".into(),
            record_type: "TXT".into(),
            targets: vec![
                format!("\"{first}\""),
                second.to_owned(),
                format!("\"{third}\""),
                "\"other\"".into(),
            ],
            ..WireEndpoint::default()
        };
        let endpoint = from_wire(&raw, RecordType::TXT);
        let targets: Vec<&str> = endpoint.targets.iter().map(String::as_str).collect();
        assert_eq!(targets, [value.as_str(), "other"]);
        // Several quoted strings in one target.
        let one = format!("\"{first}\" \"{}\"", &value[TXT_STRING_MAX..]);
        assert_eq!(unquote_txt(&one), value);
        assert_eq!(unquote_txt(r#""a\"b" "c""#), "a\"bc");
        // Not only quoted strings: taken as written.
        assert_eq!(unquote_txt(r#""a" b"#), r#""a" b"#);
    }

    #[test]
    fn endpoints_on_the_wire_are_external_dns_endpoints() {
        let endpoint = Endpoint::new("App.Example.com.", RecordType::TXT, ["v=1"]).with_ttl(60);
        let wire = serde_json::to_value(to_wire(&endpoint)).unwrap();
        assert_eq!(
            wire,
            serde_json::json!({"dnsName": "app.example.com", "targets": ["\"v=1\""],
                               "recordType": "TXT", "recordTTL": 60})
        );
        // No TTL: recordTTL left out (0, the provider's default).
        let plain = to_wire(&Endpoint::new(
            "a.example.com",
            RecordType::A,
            ["192.0.2.1"],
        ));
        let back = from_wire(&plain, RecordType::A);
        assert_eq!(back.ttl, None);
        assert!(!serde_json::to_string(&plain).unwrap().contains("recordTTL"));
    }

    #[test]
    fn the_domain_filter_must_cover_every_zone_whole() {
        let filter =
            |json: serde_json::Value| -> DomainFilter { serde_json::from_value(json).unwrap() };
        assert!(check_filter(&filter(serde_json::json!({})), &zones()).is_ok());
        assert!(
            check_filter(
                &filter(serde_json::json!({"include": ["example.com"]})),
                &zones()
            )
            .is_ok()
        );
        assert!(check_filter(&filter(serde_json::json!({"include": ["com"]})), &zones()).is_ok());
        assert!(matches!(
            check_filter(
                &filter(serde_json::json!({"include": ["example.org"]})),
                &zones()
            ),
            Err(Error::ZoneOutsideFilter { .. })
        ));
        assert!(matches!(
            check_filter(
                &filter(
                    serde_json::json!({"include": ["example.com"], "exclude": ["internal.example.com"]})
                ),
                &zones()
            ),
            Err(Error::ZoneExcluded { .. })
        ));
        assert!(matches!(
            check_filter(&filter(serde_json::json!({"regexInclude": ".*"})), &zones()),
            Err(Error::RegexFilter)
        ));
    }
}
