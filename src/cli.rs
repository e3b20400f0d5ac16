//! Command line: the clap definitions of `check`, `serve` and `certs` (what they do is in
//! [`crate::cmd`]). Every flag can also come from `GATEWAY_DNS_<FLAG>`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::{ArgAction, Args, Parser, Subcommand, ValueEnum};

use crate::engine::{
    AttachmentMode, Config, ConfigError, ConflictResolution, DEFAULT_MAX_ROUTE_HOSTNAMES,
    DEFAULT_MAX_ROUTE_PARENT_REFS, Mode, Scope, selector,
};

#[derive(Debug, Parser)]
#[command(
    name = "gateway-dns",
    version,
    about = "DNS governance for the Kubernetes Gateway API"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Evaluate YAML/JSON files offline: the records they would publish and every finding.
    Check(Box<CheckArgs>),
    /// Run the admission webhook and the DNS sync loop over one in-memory index.
    Serve(Box<ServeArgs>),
    /// Write a CA and a serving certificate for the webhook's Service.
    Certs(CertsArgs),
}

#[derive(Debug, Args)]
pub struct CertsArgs {
    /// The webhook's Service name.
    #[arg(long, default_value = "gateway-dns", env = "GATEWAY_DNS_SERVICE")]
    pub service: String,
    /// The webhook's Service namespace.
    #[arg(
        long,
        default_value = "gateway-dns",
        env = "GATEWAY_DNS_NAMESPACE_OF_SERVICE"
    )]
    pub namespace: String,
    /// Directory for ca.crt, tls.crt and tls.key.
    #[arg(long, default_value = "certs", env = "GATEWAY_DNS_OUT")]
    pub out: PathBuf,
    /// Replace existing files.
    #[arg(long, env = "GATEWAY_DNS_FORCE")]
    pub force: bool,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Files source: a directory of manifests, re-read on change (the embedded default).
    #[arg(long, value_name = "DIR", env = "GATEWAY_DNS_MANIFESTS")]
    pub manifests: Option<PathBuf>,
    /// Cluster source: a kubeconfig (default: in-cluster config, or KUBECONFIG).
    #[arg(long, value_name = "FILE", env = "GATEWAY_DNS_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Webhook listen address (HTTPS).
    #[arg(long, default_value = "0.0.0.0:8443", env = "GATEWAY_DNS_LISTEN")]
    pub listen: std::net::SocketAddr,
    /// Serving certificate (PEM); reloaded when it changes. Without it a pair is made in memory.
    #[arg(long, value_name = "FILE", env = "GATEWAY_DNS_TLS_CERT")]
    pub tls_cert: Option<PathBuf>,
    /// Serving key (PEM), with --tls-cert.
    #[arg(long, value_name = "FILE", env = "GATEWAY_DNS_TLS_KEY")]
    pub tls_key: Option<PathBuf>,
    /// Where the in-memory CA certificate is written for local clients.
    #[arg(long, default_value = "certs/ca.crt", env = "GATEWAY_DNS_LOCAL_CA_OUT")]
    pub local_ca_out: PathBuf,
    /// Service name the in-memory certificate is made for.
    #[arg(long, default_value = "gateway-dns", env = "GATEWAY_DNS_SERVICE_NAME")]
    pub service_name: String,
    /// Service namespace the in-memory certificate is made for.
    #[arg(
        long,
        default_value = "gateway-dns",
        env = "GATEWAY_DNS_SERVICE_NAMESPACE"
    )]
    pub service_namespace: String,
    /// Plain-HTTP listener for /metrics and /healthz.
    #[arg(
        long,
        default_value = "0.0.0.0:9090",
        env = "GATEWAY_DNS_METRICS_LISTEN"
    )]
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// Every admission request is answered within this time (else allowed with a warning).
    #[arg(long, default_value = "2s", value_parser = parse_duration, env = "GATEWAY_DNS_ADMISSION_DEADLINE")]
    pub admission_deadline: std::time::Duration,
    /// Webhook and metrics listeners: a TLS handshake not finished within this is dropped.
    #[arg(long, default_value = "10s", value_parser = parse_duration, env = "GATEWAY_DNS_HANDSHAKE_TIMEOUT")]
    pub handshake_timeout: std::time::Duration,
    /// Webhook and metrics listeners: a connection that starts no request within this of its
    /// accept (TLS handshake included) is closed.
    #[arg(long, default_value = "10s", value_parser = parse_duration, env = "GATEWAY_DNS_FIRST_REQUEST_TIMEOUT")]
    pub first_request_timeout: std::time::Duration,
    /// Webhook and metrics listeners: a connection (HTTP/1.1 keep-alive or h2) with no request
    /// in progress for this long is closed.
    #[arg(long, default_value = "60s", value_parser = parse_duration, env = "GATEWAY_DNS_IDLE_TIMEOUT")]
    pub idle_timeout: std::time::Duration,
    /// Webhook and metrics listeners: h2 connections are pinged this often, and closed when a
    /// ping goes unanswered for as long.
    #[arg(long, default_value = "30s", value_parser = parse_duration, env = "GATEWAY_DNS_HTTP2_KEEPALIVE_INTERVAL")]
    pub http2_keepalive_interval: std::time::Duration,
    /// Webhook and metrics listeners, each: open connections at once. At the cap the
    /// longest-idle connection is closed to make room; accept never pauses.
    #[arg(long, default_value_t = 4096, env = "GATEWAY_DNS_MAX_CONNECTIONS")]
    pub max_connections: usize,
    /// Webhook and metrics listeners, each: open connections from one source address. At the
    /// cap that address's longest-idle connection is closed to make room.
    #[arg(
        long,
        default_value_t = 1024,
        env = "GATEWAY_DNS_MAX_CONNECTIONS_PER_SOURCE"
    )]
    pub max_connections_per_source: usize,
    /// Embedded DNS over TCP: a connection with no query for this long is closed (RFC 7766
    /// suggests seconds).
    #[arg(long, default_value = "10s", value_parser = parse_duration, env = "GATEWAY_DNS_DNS_TCP_IDLE_TIMEOUT")]
    pub dns_tcp_idle_timeout: std::time::Duration,
    /// Embedded DNS over TCP: open connections at once (the longest-idle one makes room).
    #[arg(
        long,
        default_value_t = 256,
        env = "GATEWAY_DNS_DNS_TCP_MAX_CONNECTIONS"
    )]
    pub dns_tcp_max_connections: usize,
    /// Embedded DNS over TCP: open connections from one source address.
    #[arg(
        long,
        default_value_t = 64,
        env = "GATEWAY_DNS_DNS_TCP_MAX_CONNECTIONS_PER_SOURCE"
    )]
    pub dns_tcp_max_connections_per_source: usize,
    /// Embedded DNS over UDP: answers per second to one source address (response rate
    /// limiting, a token bucket per source; queries beyond it are dropped); 0 turns it off.
    #[arg(long, default_value_t = 100, env = "GATEWAY_DNS_DNS_RRL_RATE")]
    pub dns_rrl_rate: u32,
    /// Webhook: require a client certificate signed by a CA in this PEM file (kube-apiserver
    /// presents one when its AdmissionConfiguration gives it a kubeconfig for the webhook).
    /// Without it any client may call the webhook.
    #[arg(long, value_name = "FILE", env = "GATEWAY_DNS_CLIENT_CA")]
    pub client_ca: Option<PathBuf>,
    /// Run the webhook (false: the sync loop alone).
    #[arg(long, default_value_t = true, action = ArgAction::Set, value_name = "BOOL", env = "GATEWAY_DNS_WEBHOOK")]
    pub webhook: bool,
    /// Cluster source: how often discovery looks for CRDs that appeared or went away.
    #[arg(long, default_value = "60s", value_parser = parse_duration, env = "GATEWAY_DNS_DISCOVERY_INTERVAL")]
    pub discovery_interval: std::time::Duration,

    /// Run the DNS sync loop (false: the webhook alone).
    #[arg(long, default_value_t = true, action = ArgAction::Set, value_name = "BOOL", env = "GATEWAY_DNS_SYNC")]
    pub sync: bool,
    /// Where records are written.
    #[arg(
        long,
        value_enum,
        default_value = "embedded",
        env = "GATEWAY_DNS_PROVIDER"
    )]
    pub provider: ProviderKind,
    /// A zone gateway-dns manages (repeatable or comma-separated). The embedded server infers
    /// zones from the manifests when none is given.
    #[arg(
        long = "zone",
        value_name = "ZONE",
        value_delimiter = ',',
        env = "GATEWAY_DNS_ZONE"
    )]
    pub zones: Vec<String>,
    /// Embedded DNS server listen address (UDP and TCP).
    #[arg(long, default_value = "127.0.0.1:5353", env = "GATEWAY_DNS_DNS_LISTEN")]
    pub dns_listen: std::net::SocketAddr,
    /// Owner id in the ownership TXT records (external-dns's --txt-owner-id, to take over).
    #[arg(long, default_value = "default", env = "GATEWAY_DNS_TXT_OWNER_ID")]
    pub txt_owner_id: String,
    /// Replaces `*` in ownership record names (external-dns's --txt-wildcard-replacement).
    #[arg(long, env = "GATEWAY_DNS_TXT_WILDCARD_REPLACEMENT")]
    pub txt_wildcard_replacement: Option<String>,
    /// sync: create, update, delete; upsert-only: never delete; create-only: only create.
    #[arg(long, default_value = "sync", value_parser = ["sync", "upsert-only", "create-only"], env = "GATEWAY_DNS_POLICY")]
    pub policy: String,
    /// Periodic resync that repairs drift.
    #[arg(long, default_value = "60s", value_parser = parse_duration, env = "GATEWAY_DNS_INTERVAL")]
    pub interval: std::time::Duration,
    /// Log the plan; write nothing.
    #[arg(long, env = "GATEWAY_DNS_DRY_RUN")]
    pub dry_run: bool,
    /// One sync pass, then exit: 0 when converged, 1 otherwise.
    #[arg(long, env = "GATEWAY_DNS_ONCE")]
    pub once: bool,
    /// RFC 2136 server, HOST:PORT.
    #[arg(long, value_name = "ADDR", env = "GATEWAY_DNS_RFC2136_SERVER")]
    pub rfc2136_server: Option<std::net::SocketAddr>,
    /// RFC 2136 zone (repeatable; same as --zone).
    #[arg(
        long = "rfc2136-zone",
        value_name = "ZONE",
        value_delimiter = ',',
        env = "GATEWAY_DNS_RFC2136_ZONE"
    )]
    pub rfc2136_zones: Vec<String>,
    /// TSIG key name (no TSIG when unset).
    #[arg(long, env = "GATEWAY_DNS_RFC2136_TSIG_KEY_NAME")]
    pub rfc2136_tsig_key_name: Option<String>,
    /// TSIG algorithm: hmac-sha256, hmac-sha384 or hmac-sha512.
    #[arg(
        long,
        default_value = "hmac-sha256",
        env = "GATEWAY_DNS_RFC2136_TSIG_ALGORITHM"
    )]
    pub rfc2136_tsig_algorithm: String,
    /// File holding the base64 TSIG secret (else the env var GATEWAY_DNS_RFC2136_TSIG_SECRET).
    #[arg(
        long,
        value_name = "FILE",
        env = "GATEWAY_DNS_RFC2136_TSIG_SECRET_FILE"
    )]
    pub rfc2136_tsig_secret_file: Option<PathBuf>,
    /// PowerDNS API base URL, e.g. http://pdns:8081.
    #[arg(long, value_name = "URL", env = "GATEWAY_DNS_PDNS_SERVER")]
    pub pdns_server: Option<String>,
    /// File holding the PowerDNS API key (else the env var GATEWAY_DNS_PDNS_API_KEY).
    #[arg(long, value_name = "FILE", env = "GATEWAY_DNS_PDNS_API_KEY_FILE")]
    pub pdns_api_key_file: Option<PathBuf>,
    /// Cluster source: only the holder of a coordination.k8s.io Lease writes DNS.
    #[arg(long, default_value_t = true, action = ArgAction::Set, value_name = "BOOL", env = "GATEWAY_DNS_LEADER_ELECTION")]
    pub leader_election: bool,
    /// Namespace of the Lease.
    #[arg(
        long,
        default_value = "gateway-dns",
        env = "GATEWAY_DNS_LEADER_ELECTION_NAMESPACE"
    )]
    pub leader_election_namespace: String,
    /// Name of the Lease.
    #[arg(long, default_value = "gateway-dns", env = "GATEWAY_DNS_LEASE_NAME")]
    pub lease_name: String,
    #[command(flatten)]
    pub engine: EngineArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ProviderKind {
    /// An authoritative DNS server inside gateway-dns (the default).
    Embedded,
    /// RFC 2136 dynamic updates (BIND and others), TSIG, AXFR to list.
    Rfc2136,
    /// The PowerDNS authoritative HTTP API.
    Pdns,
}

/// Parses a duration such as `500ms`, `2s`, `1m30s` or a bare number of seconds.
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let text = text.trim();
    if let Ok(seconds) = text.parse::<u64>() {
        return Ok(std::time::Duration::from_secs(seconds));
    }
    let bad = || format!("{text:?} is not a duration (e.g. 500ms, 2s, 1m30s)");
    let mut total = std::time::Duration::ZERO;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let number: u64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_len = rest.bytes().take_while(|b| b.is_ascii_alphabetic()).count();
        let unit = match &rest[..unit_len] {
            "ms" => std::time::Duration::from_millis(number),
            "s" => std::time::Duration::from_secs(number),
            "m" => std::time::Duration::from_secs(number * 60),
            "h" => std::time::Duration::from_secs(number * 3600),
            _ => return Err(bad()),
        };
        total += unit;
        rest = &rest[unit_len..];
    }
    if total.is_zero() {
        Err(bad())
    } else {
        Ok(total)
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum OutputFormat {
    Text,
    Json,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Files or directories (multi-document YAML, JSON, `kind: List`); `-` reads stdin.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text", env = "GATEWAY_DNS_OUTPUT")]
    pub output: OutputFormat,
    #[command(flatten)]
    pub engine: EngineArgs,
}

/// Flags shared by `check` and `serve`: what the engine decides and for which objects.
#[derive(Debug, Clone, Args)]
pub struct EngineArgs {
    /// How routes attach: predicted from spec, or only where status says Accepted=True.
    #[arg(long, default_value = "spec", value_parser = ["spec", "status"], env = "GATEWAY_DNS_ATTACHMENT")]
    pub attachment: String,
    /// Only Gateways with this name.
    #[arg(long, env = "GATEWAY_DNS_GATEWAY_NAME")]
    pub gateway_name: Option<String>,
    /// Only Gateways in this namespace.
    #[arg(long, env = "GATEWAY_DNS_GATEWAY_NAMESPACE")]
    pub gateway_namespace: Option<String>,
    /// Only Gateways whose labels match this selector (e.g. `dns=public,tier in (edge)`).
    #[arg(long, env = "GATEWAY_DNS_GATEWAY_SELECTOR")]
    pub gateway_selector: Option<String>,
    /// Only routes in this namespace.
    #[arg(long, env = "GATEWAY_DNS_NAMESPACE")]
    pub namespace: Option<String>,
    /// Only routes whose labels match this selector.
    #[arg(long, env = "GATEWAY_DNS_ROUTE_SELECTOR")]
    pub route_selector: Option<String>,
    /// Only routes whose annotations match this selector.
    #[arg(long, env = "GATEWAY_DNS_ANNOTATION_FILTER")]
    pub annotation_filter: Option<String>,
    /// Read ListenerSets (true|false).
    #[arg(long, default_value_t = true, action = ArgAction::Set, value_name = "BOOL", env = "GATEWAY_DNS_LISTENER_SETS")]
    pub listener_sets: bool,
    /// Publish the wildcard hostname a hostless route inherits from its listener.
    #[arg(long, env = "GATEWAY_DNS_ALLOW_INHERITED_WILDCARDS")]
    pub allow_inherited_wildcards: bool,
    /// Ignore the external-dns hostname annotation on routes.
    #[arg(long, env = "GATEWAY_DNS_IGNORE_HOSTNAME_ANNOTATION")]
    pub ignore_hostname_annotation: bool,
    /// Who keeps a name claimed through Gateways with different addresses.
    #[arg(long, default_value = "oldest-wins", value_parser = ["oldest-wins", "exclude"], env = "GATEWAY_DNS_CONFLICT_RESOLUTION")]
    pub conflict_resolution: String,
    /// enforce: deny; warn: denials become warnings; audit: only logged and counted.
    #[arg(long, default_value = "enforce", value_parser = ["enforce", "warn", "audit"], env = "GATEWAY_DNS_MODE")]
    pub mode: String,
    /// Override one reason's action: REASON=deny|warn|ignore (repeatable).
    #[arg(
        long = "action",
        value_name = "REASON=ACTION",
        env = "GATEWAY_DNS_ACTION",
        value_delimiter = ','
    )]
    pub actions: Vec<String>,
    /// Most hostnames (spec.hostnames plus the external-dns annotation) one route may have;
    /// a route with more is denied (TooManyHostnames) and publishes nothing.
    #[arg(long, default_value_t = DEFAULT_MAX_ROUTE_HOSTNAMES, env = "GATEWAY_DNS_MAX_ROUTE_HOSTNAMES")]
    pub max_route_hostnames: usize,
    /// Most parentRefs one route may have; a route with more is denied (TooManyParentRefs) and
    /// publishes nothing.
    #[arg(long, default_value_t = DEFAULT_MAX_ROUTE_PARENT_REFS, env = "GATEWAY_DNS_MAX_ROUTE_PARENT_REFS")]
    pub max_route_parent_refs: usize,
}

impl EngineArgs {
    pub fn to_config(&self) -> Result<Config, ConfigError> {
        let parse_selector = |s: &Option<String>| s.as_deref().map(selector::parse).transpose();
        let mut actions = BTreeMap::new();
        for text in &self.actions {
            let (reason, action) = Config::parse_action(text)?;
            actions.insert(reason, action);
        }
        Ok(Config {
            attachment: self.attachment.parse::<AttachmentMode>()?,
            scope: Scope {
                gateway_name: self.gateway_name.clone(),
                gateway_namespace: self.gateway_namespace.clone(),
                gateway_selector: parse_selector(&self.gateway_selector)?,
                namespace: self.namespace.clone(),
                route_selector: parse_selector(&self.route_selector)?,
                annotation_filter: parse_selector(&self.annotation_filter)?,
            },
            listener_sets: self.listener_sets,
            allow_inherited_wildcards: self.allow_inherited_wildcards,
            ignore_hostname_annotation: self.ignore_hostname_annotation,
            conflict_resolution: self.conflict_resolution.parse::<ConflictResolution>()?,
            mode: self.mode.parse::<Mode>()?,
            actions,
            max_route_hostnames: self.max_route_hostnames,
            max_route_parent_refs: self.max_route_parent_refs,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("2s"), Ok(std::time::Duration::from_secs(2)));
        assert_eq!(
            parse_duration("1m30s"),
            Ok(std::time::Duration::from_secs(90))
        );
        assert_eq!(
            parse_duration("250ms"),
            Ok(std::time::Duration::from_millis(250))
        );
        assert_eq!(parse_duration("7"), Ok(std::time::Duration::from_secs(7)));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("5x").is_err());
    }

    #[test]
    fn cli_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
