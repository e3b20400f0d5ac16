//! Command line: the clap definitions of `check`, `serve`, `explain`, `certs`, `dnssec`,
//! `completions` and `man` (what they do is in [`crate::cmd`]). Every flag can also come from
//! `GATEWAY_DNS_<FLAG>`. Run as `kubectl-gateway_dns`, the binary is kubectl's plugin
//! `kubectl gateway-dns`, whose command line ([`plugin_command`]) is a part of this one with
//! kubectl's flags.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;

use clap::{ArgAction, Args, Parser, Subcommand, ValueEnum};

use crate::engine::cidr::{Cidr, TargetFilter};
use crate::engine::{
    AttachmentMode, Config, ConfigError, ConflictResolution, DEFAULT_MAX_ROUTE_HOSTNAMES,
    DEFAULT_MAX_ROUTE_PARENT_REFS, HostnameOwnership, Mode, Scope, selector,
};

/// What `--version` prints after the name: the crate version, the git revision and the build
/// date, as build.rs found them (`unknown` revision when built without git).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (revision ",
    env!("GATEWAY_DNS_REVISION"),
    ", built ",
    env!("GATEWAY_DNS_BUILD_DATE"),
    ")"
);

/// The UTC date (YYYY-MM-DD) the binary was built on, or of `SOURCE_DATE_EPOCH`.
pub const BUILD_DATE: &str = env!("GATEWAY_DNS_BUILD_DATE");

#[derive(Debug, Parser)]
#[command(
    name = "gateway-dns",
    version = VERSION,
    about = "DNS governance for the Kubernetes Gateway API"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Evaluate YAML/JSON files offline: the records they would publish and every finding.
    #[command(after_help = CHECK_EXIT_CODES)]
    Check(Box<CheckArgs>),
    /// Run the admission webhook and the DNS sync loop over one in-memory index.
    #[command(after_help = SERVE_EXIT_CODES)]
    Serve(Box<ServeArgs>),
    /// Say why a DNS name resolves (or does not) and to what, or what becomes of each name of
    /// a route: the routes that claim it, their parents and listeners, which claim wins and why,
    /// the record the sync loop would write, and what the DNS provider holds now.
    #[command(after_help = EXPLAIN_EXIT_CODES)]
    Explain(Box<ExplainArgs>),
    /// Write a CA and a serving certificate for the webhook's Service to files, or (as the Helm
    /// chart's Jobs do) keep them in a Secret and copy the CA into the webhook configuration.
    #[command(after_help = CERTS_EXIT_CODES)]
    Certs(CertsArgs),
    /// Print the DNSKEY and the DS record (for the parent zone) of an embedded DNS server's
    /// DNSSEC key file, making the key first with --generate.
    #[command(after_help = DNSSEC_EXIT_CODES)]
    Dnssec(DnssecArgs),
    /// The managed zones' owners: who holds which names and their last heartbeats, and the
    /// release of a dead owner's names.
    #[command(subcommand)]
    Zone(ZoneCommand),
    /// Print a shell completion script for bash, zsh, fish, elvish or powershell.
    Completions(CompletionsArgs),
    /// Print the gateway-dns(1) man page, or write every page (one per subcommand) to a directory.
    Man(ManArgs),
}

#[derive(Debug, Subcommand)]
pub enum ZoneCommand {
    /// List every owner of the zones' names (the owner ids of their ownership records, and
    /// "unmanaged" for records without one), the names each holds, and its last heartbeat.
    #[command(after_help = ZONE_EXIT_CODES)]
    Owners(Box<ZoneOwnersArgs>),
    /// Remove an owner's records and their ownership records (every name it holds, or the
    /// --name ones). Refused while its heartbeat is younger than --dead-after, or when it writes
    /// none, unless --force.
    #[command(after_help = ZONE_EXIT_CODES)]
    Release(Box<ZoneReleaseArgs>),
}

const ZONE_EXIT_CODES: &str = "Exit status: 0 done; 1 refused (the owner looks alive, or holds no \
     such name); 2 bad input, or a provider that cannot be read or written.";

#[derive(Debug, Args)]
pub struct ZoneOwnersArgs {
    /// The DNS provider to list.
    #[arg(long, value_enum, env = "GATEWAY_DNS_PROVIDER")]
    pub provider: ProviderKind,
    /// Output format.
    #[arg(long, value_enum, default_value = "text", env = "GATEWAY_DNS_OUTPUT")]
    pub output: ExplainOutput,
    #[command(flatten)]
    pub provider_flags: ProviderArgs,
    /// The kubeconfig --provider dnsendpoint reads with (`kubectl gateway-dns`'s --kubeconfig);
    /// None: KUBECONFIG, ~/.kube/config, or the in-cluster config.
    #[arg(skip)]
    pub kubeconfig: Option<PathBuf>,
    /// Its context (`kubectl gateway-dns`'s --context); None: the current one.
    #[arg(skip)]
    pub context: Option<String>,
}

#[derive(Debug, Args)]
pub struct ZoneReleaseArgs {
    /// The DNS provider to write.
    #[arg(long, value_enum, env = "GATEWAY_DNS_PROVIDER")]
    pub provider: ProviderKind,
    /// The owner id whose names are released.
    #[arg(long, value_name = "ID")]
    pub owner: String,
    /// Release only these names (repeatable or comma-separated); default every name it holds.
    #[arg(long, value_name = "NAME", value_delimiter = ',')]
    pub name: Vec<String>,
    /// An owner whose last heartbeat is older than this is taken for dead.
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    pub dead_after: std::time::Duration,
    /// Release even an owner that looks alive, or writes no heartbeat.
    #[arg(long)]
    pub force: bool,
    /// Print what would be removed, and remove nothing.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub provider_flags: ProviderArgs,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write gateway-dns.1 and gateway-dns-SUBCOMMAND.1 here instead of printing gateway-dns(1).
    #[arg(long, value_name = "DIR", env = "GATEWAY_DNS_OUT_DIR")]
    pub out_dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct CertsArgs {
    /// The webhook's Service name (the certificate is made for its DNS names).
    #[arg(
        long,
        alias = "service",
        default_value = "gateway-dns",
        env = "GATEWAY_DNS_SERVICE_NAME"
    )]
    pub service_name: String,
    /// The webhook's Service namespace.
    #[arg(
        long,
        alias = "namespace",
        default_value = "gateway-dns",
        env = "GATEWAY_DNS_SERVICE_NAMESPACE"
    )]
    pub service_namespace: String,
    /// Directory for ca.crt, tls.crt and tls.key.
    #[arg(
        long,
        default_value = "certs",
        env = "GATEWAY_DNS_OUT",
        conflicts_with = "secret"
    )]
    pub out: PathBuf,
    /// Keep the pair in this kubernetes.io/tls Secret (ca.crt, tls.crt, tls.key) instead of
    /// files, through the cluster's API (in-cluster config in a pod, else KUBECONFIG): create
    /// it, keep it while it is good for the Service for 30 more days, else replace its three
    /// keys. Never deletes. NAME alone is in --service-namespace.
    #[arg(
        long,
        value_name = "[NAMESPACE/]NAME",
        env = "GATEWAY_DNS_SECRET",
        value_parser = parse_secret_location
    )]
    pub secret: Option<SecretLocation>,
    /// Instead of making the --secret, copy its ca.crt into the caBundle of every webhook of
    /// this ValidatingWebhookConfiguration.
    #[arg(
        long,
        value_name = "NAME",
        env = "GATEWAY_DNS_PATCH_WEBHOOK",
        requires = "secret"
    )]
    pub patch_webhook: Option<String>,
    /// Replace existing files, or with --secret a pair that is still good.
    #[arg(long, env = "GATEWAY_DNS_FORCE", default_value = "false", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_bool, action = ArgAction::Set, value_name = "BOOL", conflicts_with = "patch_webhook")]
    pub force: bool,
}

/// `certs --secret`: a Secret's name, and its namespace unless it is the Service's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretLocation {
    pub namespace: Option<String>,
    pub name: String,
}

/// `[NAMESPACE/]NAME`, each part a Kubernetes object name.
pub fn parse_secret_location(text: &str) -> Result<SecretLocation, String> {
    let (namespace, name) = match text.trim().split_once('/') {
        Some((namespace, name)) => (Some(namespace), name),
        None => (None, text.trim()),
    };
    let valid = |part: &str, max: usize| {
        !part.is_empty()
            && part.len() <= max
            && part.bytes().all(|byte| {
                byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'-' || byte == b'.'
            })
            && part.starts_with(|c: char| c.is_ascii_alphanumeric())
            && part.ends_with(|c: char| c.is_ascii_alphanumeric())
    };
    if namespace.is_some_and(|namespace| !valid(namespace, 63) || namespace.contains('.'))
        || !valid(name, 253)
    {
        return Err(format!(
            "{text:?} is not [NAMESPACE/]NAME (lower-case letters, digits, '-', and '.' in NAME)"
        ));
    }
    Ok(SecretLocation {
        namespace: namespace.map(str::to_string),
        name: name.to_string(),
    })
}

/// `dnssec --algorithm`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DnssecAlgorithm {
    /// Algorithm 13: ECDSA with curve P-256 and SHA-256.
    Ecdsap256sha256,
    /// Algorithm 15: Ed25519 (deterministic signatures: replicas sign identically).
    Ed25519,
}

#[derive(Debug, Args)]
pub struct DnssecArgs {
    /// The key file (PEM PKCS#8), as `serve --embedded-dnssec-key` reads it.
    #[arg(long, value_name = "FILE", env = "GATEWAY_DNS_KEY")]
    pub key: PathBuf,
    /// A zone signed with the key (repeatable): its DNSKEY and DS are printed.
    #[arg(
        long = "zone",
        value_name = "ZONE",
        required = true,
        value_delimiter = ',',
        env = "GATEWAY_DNS_ZONE"
    )]
    pub zones: Vec<String>,
    /// Make a new key and write it to --key first (mode 0600).
    #[arg(long, env = "GATEWAY_DNS_GENERATE", default_value = "false", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_bool, action = ArgAction::Set, value_name = "BOOL")]
    pub generate: bool,
    /// The algorithm of a key made with --generate.
    #[arg(
        long,
        value_enum,
        default_value = "ecdsap256sha256",
        env = "GATEWAY_DNS_ALGORITHM"
    )]
    pub algorithm: DnssecAlgorithm,
    /// TTL printed on the DNSKEY and DS records.
    #[arg(long, default_value_t = 3600, env = "GATEWAY_DNS_TTL")]
    pub ttl: u32,
    /// With --generate, replace an existing key file.
    #[arg(long, env = "GATEWAY_DNS_FORCE", default_value = "false", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_bool, action = ArgAction::Set, value_name = "BOOL")]
    pub force: bool,
}

/// `serve --help` headings, in the order a request and a record travel.
const SOURCES: &str = "Sources";
const WEBHOOK: &str = "Webhook";
const DNS: &str = "DNS";
const PROVIDER: &str = "Provider (RFC 2136, PowerDNS)";
const CONNECTIONS: &str = "Connections (limits and timeouts of every listener)";
const LEADER_ELECTION: &str = "Leader election";
const OBSERVABILITY: &str = "Metrics and logs";
const FEEDBACK: &str = "Events and PolicyReports (cluster source; written by the Lease holder)";
const HEALTH: &str = "Health checks (of Gateways annotated gateway-dns.io/health-check-protocol; probed by the Lease holder)";

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Files source: a directory of manifests, re-read on change (without it, serve reads the
    /// cluster).
    #[arg(long, value_name = "DIR", env = "GATEWAY_DNS_MANIFESTS", help_heading = SOURCES)]
    pub manifests: Option<PathBuf>,
    /// Cluster source: a kubeconfig (default: in-cluster config, or KUBECONFIG).
    #[arg(long, value_name = "FILE", env = "GATEWAY_DNS_KUBECONFIG", help_heading = SOURCES)]
    pub kubeconfig: Option<PathBuf>,
    /// Cluster source: how often discovery looks for CRDs that appeared or went away.
    #[arg(long, default_value = "60s", value_parser = parse_duration, env = "GATEWAY_DNS_DISCOVERY_INTERVAL", help_heading = SOURCES)]
    pub discovery_interval: std::time::Duration,
    /// Cluster source: how long a kind the API server stopped serving (over 3 discovery rounds
    /// with the server ready), or a relist that came back empty, must last before objects leave
    /// the index; meanwhile no DNS record is deleted.
    #[arg(long, default_value = "60s", value_parser = parse_duration, env = "GATEWAY_DNS_ABSENCE_GRACE", help_heading = SOURCES)]
    pub absence_grace: std::time::Duration,

    /// Run the webhook (--webhook=false: the sync loop alone).
    #[arg(long, default_value = "true", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_bool, action = ArgAction::Set, value_name = "BOOL", env = "GATEWAY_DNS_WEBHOOK", help_heading = WEBHOOK)]
    pub webhook: bool,
    /// Webhook listen address (HTTPS).
    #[arg(long, default_value = "0.0.0.0:8443", value_parser = parse_listen_address, env = "GATEWAY_DNS_LISTEN", help_heading = WEBHOOK)]
    pub listen: std::net::SocketAddr,
    /// Serving certificate (PEM); reloaded when it changes. Without it a pair is made in memory.
    #[arg(long, value_name = "FILE", env = "GATEWAY_DNS_TLS_CERT", help_heading = WEBHOOK)]
    pub tls_cert: Option<PathBuf>,
    /// Serving key (PEM), with --tls-cert.
    #[arg(long, value_name = "FILE", env = "GATEWAY_DNS_TLS_KEY", help_heading = WEBHOOK)]
    pub tls_key: Option<PathBuf>,
    /// Where the in-memory CA certificate is written for local clients.
    #[arg(long, default_value = "certs/ca.crt", env = "GATEWAY_DNS_LOCAL_CA_OUT", help_heading = WEBHOOK)]
    pub local_ca_out: PathBuf,
    /// Service name the in-memory certificate is made for.
    #[arg(long, default_value = "gateway-dns", env = "GATEWAY_DNS_SERVICE_NAME", help_heading = WEBHOOK)]
    pub service_name: String,
    /// Service namespace the in-memory certificate is made for.
    #[arg(long, default_value = "gateway-dns", env = "GATEWAY_DNS_SERVICE_NAMESPACE", help_heading = WEBHOOK)]
    pub service_namespace: String,
    /// Every admission request is answered within this time (else allowed with a warning).
    #[arg(long, default_value = "2s", value_parser = parse_duration, env = "GATEWAY_DNS_ADMISSION_DEADLINE", help_heading = WEBHOOK)]
    pub admission_deadline: std::time::Duration,
    /// Webhook: require a client certificate signed by a CA in this PEM file (kube-apiserver
    /// presents one when its AdmissionConfiguration gives it a kubeconfig for the webhook).
    /// Without it any client may call the webhook.
    #[arg(long, value_name = "FILE", env = "GATEWAY_DNS_CLIENT_CA", help_heading = WEBHOOK)]
    pub client_ca: Option<PathBuf>,

    /// Webhook and metrics listeners: a TLS handshake not finished within this is dropped.
    #[arg(long, default_value = "10s", value_parser = parse_duration, env = "GATEWAY_DNS_HANDSHAKE_TIMEOUT", help_heading = CONNECTIONS)]
    pub handshake_timeout: std::time::Duration,
    /// Webhook and metrics listeners: a connection that starts no request within this of its
    /// accept (TLS handshake included) is closed.
    #[arg(long, default_value = "10s", value_parser = parse_duration, env = "GATEWAY_DNS_FIRST_REQUEST_TIMEOUT", help_heading = CONNECTIONS)]
    pub first_request_timeout: std::time::Duration,
    /// Webhook and metrics listeners: a connection (HTTP/1.1 keep-alive or h2) with no request
    /// in progress for this long is closed.
    #[arg(long, default_value = "60s", value_parser = parse_duration, env = "GATEWAY_DNS_IDLE_TIMEOUT", help_heading = CONNECTIONS)]
    pub idle_timeout: std::time::Duration,
    /// Webhook and metrics listeners: h2 connections are pinged this often, and closed when a
    /// ping goes unanswered for as long.
    #[arg(long, default_value = "30s", value_parser = parse_duration, env = "GATEWAY_DNS_HTTP2_KEEPALIVE_INTERVAL", help_heading = CONNECTIONS)]
    pub http2_keepalive_interval: std::time::Duration,
    /// Webhook and metrics listeners, each: open connections at once. At the cap the
    /// longest-idle connection is closed to make room; accept never pauses.
    #[arg(long, default_value_t = 4096, env = "GATEWAY_DNS_MAX_CONNECTIONS", help_heading = CONNECTIONS)]
    pub max_connections: usize,
    /// Webhook and metrics listeners, each: open connections from one source address. At the
    /// cap that address's longest-idle connection is closed to make room.
    #[arg(long, default_value_t = 1024, env = "GATEWAY_DNS_MAX_CONNECTIONS_PER_SOURCE", help_heading = CONNECTIONS)]
    pub max_connections_per_source: usize,
    /// Embedded DNS over TCP: a connection with no query for this long is closed (RFC 7766
    /// suggests seconds).
    #[arg(long, default_value = "10s", value_parser = parse_duration, env = "GATEWAY_DNS_DNS_TCP_IDLE_TIMEOUT", help_heading = CONNECTIONS)]
    pub dns_tcp_idle_timeout: std::time::Duration,
    /// Embedded DNS over TCP: open connections at once (the longest-idle one makes room).
    #[arg(long, default_value_t = 256, env = "GATEWAY_DNS_DNS_TCP_MAX_CONNECTIONS", help_heading = CONNECTIONS)]
    pub dns_tcp_max_connections: usize,
    /// Embedded DNS over TCP: open connections from one source address.
    #[arg(long, default_value_t = 64, env = "GATEWAY_DNS_DNS_TCP_MAX_CONNECTIONS_PER_SOURCE", help_heading = CONNECTIONS)]
    pub dns_tcp_max_connections_per_source: usize,
    /// Embedded DNS over UDP: answers per second to one source address (response rate
    /// limiting, a token bucket per source; queries beyond it are dropped); 0 turns it off.
    #[arg(long, default_value_t = 100, env = "GATEWAY_DNS_DNS_RRL_RATE", help_heading = CONNECTIONS)]
    pub dns_rrl_rate: u32,

    /// Run the DNS sync loop (--sync=false: the webhook alone).
    #[arg(long, default_value = "true", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_bool, action = ArgAction::Set, value_name = "BOOL", env = "GATEWAY_DNS_SYNC", help_heading = DNS)]
    pub sync: bool,
    /// Where records are written.
    #[arg(long, value_enum, default_value = "embedded", env = "GATEWAY_DNS_PROVIDER", help_heading = DNS)]
    pub provider: ProviderKind,
    /// Embedded DNS server listen address (UDP and TCP).
    #[arg(long, default_value = "127.0.0.1:5353", value_parser = parse_listen_address, env = "GATEWAY_DNS_DNS_LISTEN", help_heading = DNS)]
    pub dns_listen: std::net::SocketAddr,
    /// Embedded DNS: a secondary server, IP[:PORT] (port 53 by default; repeatable), sent
    /// NOTIFY on each change and allowed AXFR/IXFR when signed with the transfer TSIG key.
    #[arg(long = "embedded-secondary", value_name = "ADDR", value_delimiter = ',', value_parser = parse_secondary_address, env = "GATEWAY_DNS_EMBEDDED_SECONDARY", help_heading = DNS)]
    pub embedded_secondaries: Vec<std::net::SocketAddr>,
    /// Embedded DNS: how often each secondary is asked for its SOA serials when nothing
    /// changes (they are also asked a moment after each change, and every 5s while one is
    /// behind): gateway_dns_secondary_serial_lag.
    #[arg(long, default_value = "30s", value_parser = parse_duration, env = "GATEWAY_DNS_EMBEDDED_SECONDARY_CHECK_INTERVAL", help_heading = DNS)]
    pub embedded_secondary_check_interval: std::time::Duration,
    /// Embedded DNS: name of the TSIG key for zone transfers and NOTIFY (needed with
    /// --embedded-secondary).
    #[arg(long, value_name = "NAME", env = "GATEWAY_DNS_EMBEDDED_TSIG_KEY_NAME", help_heading = DNS)]
    pub embedded_tsig_key_name: Option<String>,
    /// Embedded DNS: TSIG algorithm: hmac-sha256, hmac-sha384 or hmac-sha512.
    #[arg(long, value_name = "ALGORITHM", default_value = "hmac-sha256", env = "GATEWAY_DNS_EMBEDDED_TSIG_ALGORITHM", help_heading = DNS)]
    pub embedded_tsig_algorithm: String,
    /// Embedded DNS: file holding the base64 TSIG secret (else the env var
    /// GATEWAY_DNS_EMBEDDED_TSIG_SECRET).
    #[arg(long, value_name = "FILE", env = "GATEWAY_DNS_EMBEDDED_TSIG_SECRET_FILE", help_heading = DNS)]
    pub embedded_tsig_secret_file: Option<PathBuf>,
    /// Embedded DNS: sign the zones with DNSSEC with this key file (PEM PKCS#8, ECDSAP256SHA256
    /// or ED25519, made by `gateway-dns dnssec --generate`; repeatable: every key signs, as in
    /// a rollover). Answers to queries with the DO bit carry RRSIGs and NSEC proofs.
    #[arg(long = "embedded-dnssec-key", value_name = "FILE", value_delimiter = ',', env = "GATEWAY_DNS_EMBEDDED_DNSSEC_KEY", help_heading = DNS)]
    pub embedded_dnssec_keys: Vec<PathBuf>,
    /// sync: create, update, delete; upsert-only: never delete; create-only: only create.
    #[arg(long, default_value = "sync", value_parser = ["sync", "upsert-only", "create-only"], env = "GATEWAY_DNS_POLICY", help_heading = DNS)]
    pub policy: String,
    /// Periodic resync that repairs drift.
    #[arg(long, default_value = "60s", value_parser = parse_duration, env = "GATEWAY_DNS_INTERVAL", help_heading = DNS)]
    pub interval: std::time::Duration,
    /// Keep a view of the managed zones (every replica; not with the embedded server) and
    /// refuse names another owner id, or no owner, holds there (HostnameOwnedInZone).
    #[arg(long, default_value = "true", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_bool, action = ArgAction::Set, value_name = "BOOL", env = "GATEWAY_DNS_ZONE_VIEW", help_heading = DNS)]
    pub zone_view: bool,
    /// How often the zone view reads the zones (an RFC 2136 server is asked their SOA serials,
    /// and a zone is transferred only when its serial moved).
    #[arg(long, default_value = "30s", value_parser = parse_duration, env = "GATEWAY_DNS_ZONE_REFRESH_INTERVAL", help_heading = DNS)]
    pub zone_refresh_interval: std::time::Duration,
    /// A zone view not read whole for longer is not used: the names others hold are not
    /// checked (fail open) until a read succeeds.
    #[arg(long, default_value = "5m", value_parser = parse_duration, env = "GATEWAY_DNS_ZONE_VIEW_MAX_AGE", help_heading = DNS)]
    pub zone_view_max_age: std::time::Duration,
    /// Take NOTIFY (UDP) from the RFC 2136 server on this address, and read a zone as soon as
    /// the server says it changed (BIND: also-notify { ADDRESS port PORT; };). Only NOTIFY
    /// from the server's own address is taken.
    #[arg(long, value_name = "ADDR:PORT", env = "GATEWAY_DNS_ZONE_NOTIFY_LISTEN", help_heading = DNS)]
    pub zone_notify_listen: Option<std::net::SocketAddr>,
    /// How often the Lease holder rewrites this owner id's heartbeat record
    /// (_gateway-dns.OWNER.ZONE) in each zone, so that `gateway-dns zone release` can tell it is
    /// alive and a second installation with this owner id is found; 0 writes none. The embedded
    /// DNS server writes none: its zones are one installation's own.
    #[arg(long, default_value = "1m", value_parser = parse_duration, env = "GATEWAY_DNS_OWNER_HEARTBEAT_INTERVAL", help_heading = DNS)]
    pub owner_heartbeat_interval: std::time::Duration,
    /// Take over a name this cluster's routes want from an owner whose last heartbeat in the
    /// zone is older than this (its installation is gone), with a Normal Event on the route.
    /// Off by default; an owner that writes no heartbeat is never adopted from.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION", env = "GATEWAY_DNS_ADOPT_AFTER", help_heading = DNS)]
    pub adopt_after: Option<std::time::Duration>,
    /// Compute and print the plan; write nothing.
    #[arg(long, default_value = "false", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_bool, action = ArgAction::Set, value_name = "BOOL", env = "GATEWAY_DNS_DRY_RUN", help_heading = DNS)]
    pub dry_run: bool,
    /// One sync pass, then exit (exit status below).
    #[arg(long, default_value = "false", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_bool, action = ArgAction::Set, value_name = "BOOL", env = "GATEWAY_DNS_ONCE", help_heading = DNS)]
    pub once: bool,

    #[command(flatten)]
    pub provider_flags: ProviderArgs,

    /// Cluster source: only the holder of a coordination.k8s.io Lease writes DNS.
    #[arg(long, default_value = "true", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_bool, action = ArgAction::Set, value_name = "BOOL", env = "GATEWAY_DNS_LEADER_ELECTION", help_heading = LEADER_ELECTION)]
    pub leader_election: bool,
    /// Namespace of the Lease.
    #[arg(long, default_value = "gateway-dns", env = "GATEWAY_DNS_LEADER_ELECTION_NAMESPACE", help_heading = LEADER_ELECTION)]
    pub leader_election_namespace: String,
    /// Name of the Lease.
    #[arg(long, default_value = "gateway-dns", env = "GATEWAY_DNS_LEASE_NAME", help_heading = LEADER_ELECTION)]
    pub lease_name: String,
    /// How long a candidate waits after last seeing the Lease renewed before taking it (whole
    /// seconds); a dead leader is replaced this much later (plus up to 1.2 retry periods). A
    /// leader that shuts down frees the Lease, so this wait is only after a crash.
    #[arg(long, default_value = "20s", value_parser = parse_duration, env = "GATEWAY_DNS_LEADER_ELECTION_LEASE_DURATION", help_heading = LEADER_ELECTION)]
    pub leader_election_lease_duration: std::time::Duration,
    /// The holder stops writing when it could not renew for this long; shorter than the lease
    /// duration, so that it stops before anyone else may start, and longer than 1.2 retry
    /// periods.
    #[arg(long, default_value = "15s", value_parser = parse_duration, env = "GATEWAY_DNS_LEADER_ELECTION_RENEW_DEADLINE", help_heading = LEADER_ELECTION)]
    pub leader_election_renew_deadline: std::time::Duration,
    /// How often the holder renews (one request) and candidates try (one request, spread up to
    /// 1.2 times this).
    #[arg(long, default_value = "5s", value_parser = parse_duration, env = "GATEWAY_DNS_LEADER_ELECTION_RETRY_PERIOD", help_heading = LEADER_ELECTION)]
    pub leader_election_retry_period: std::time::Duration,

    /// Plain-HTTP listener for /metrics and /healthz (`:PORT` listens on every address).
    #[arg(
        long,
        // external-dns's name (it takes `:7979` too).
        alias = "metrics-address",
        default_value = "0.0.0.0:9090",
        value_parser = parse_listen_address,
        env = "GATEWAY_DNS_METRICS_LISTEN",
        help_heading = OBSERVABILITY
    )]
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// Serve the read-only status page (names, findings, sync health; docs/status-page.md) on
    /// the metrics listener at `/`, with its data at `/status.json`.
    #[arg(long, default_value = "true", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_bool, action = ArgAction::Set, value_name = "BOOL", env = "GATEWAY_DNS_STATUS_PAGE", help_heading = OBSERVABILITY)]
    pub status_page: bool,
    /// Log level: error, warn, info, debug or trace (GATEWAY_DNS_LOG, a tracing filter such as
    /// `info,gateway_dns::sync=debug`, takes precedence).
    #[arg(long, default_value = "info", value_parser = parse_log_level, env = "GATEWAY_DNS_LOG_LEVEL", help_heading = OBSERVABILITY)]
    pub log_level: String,
    /// Log format: text, json, or auto (text on a terminal, JSON otherwise).
    #[arg(long, value_enum, default_value = "auto", env = "GATEWAY_DNS_LOG_FORMAT", help_heading = OBSERVABILITY)]
    pub log_format: LogFormat,

    /// Emit a Kubernetes Event (events.k8s.io/v1) on the route, Gateway or ListenerSet when a
    /// finding appears, rate-limited (docs/troubleshooting.md, "Events and PolicyReports").
    #[arg(long, default_value = "true", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_bool, action = ArgAction::Set, value_name = "BOOL", env = "GATEWAY_DNS_KUBERNETES_EVENTS", help_heading = FEEDBACK)]
    pub kubernetes_events: bool,
    /// Keep one wgpolicyk8s.io/v1alpha2 PolicyReport per route (pass, warn or fail per
    /// finding); needs the PolicyReport CRD.
    #[arg(long, default_value = "false", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_bool, action = ArgAction::Set, value_name = "BOOL", env = "GATEWAY_DNS_POLICY_REPORTS", help_heading = FEEDBACK)]
    pub policy_reports: bool,

    /// How often each target is probed, where a Gateway or ListenerSet sets no
    /// gateway-dns.io/health-check-interval.
    #[arg(long, default_value = "30s", value_parser = parse_duration, env = "GATEWAY_DNS_HEALTH_CHECK_INTERVAL", help_heading = HEALTH)]
    pub health_check_interval: std::time::Duration,
    /// How long one probe may take (connection, TLS and answer), where no
    /// gateway-dns.io/health-check-timeout is set; at most the interval.
    #[arg(long, default_value = "5s", value_parser = parse_duration, env = "GATEWAY_DNS_HEALTH_CHECK_TIMEOUT", help_heading = HEALTH)]
    pub health_check_timeout: std::time::Duration,
    /// Failed probes in a row that make a target unhealthy, where no
    /// gateway-dns.io/health-check-failure-threshold is set.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100), env = "GATEWAY_DNS_HEALTH_CHECK_FAILURE_THRESHOLD", help_heading = HEALTH)]
    pub health_check_failure_threshold: u32,
    /// Good probes in a row that make an unhealthy target healthy again, where no
    /// gateway-dns.io/health-check-success-threshold is set.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=100), env = "GATEWAY_DNS_HEALTH_CHECK_SUCCESS_THRESHOLD", help_heading = HEALTH)]
    pub health_check_success_threshold: u32,
    /// HTTP(S) status codes that pass (codes and ranges, e.g. 200-399,404), where no
    /// gateway-dns.io/health-check-expected-codes is set.
    #[arg(long, default_value = "200-399", value_name = "CODES", env = "GATEWAY_DNS_HEALTH_CHECK_EXPECTED_CODES", help_heading = HEALTH)]
    pub health_check_expected_codes: String,
    /// HTTP(S) path probed, where no gateway-dns.io/health-check-path is set.
    #[arg(long, default_value = "/", value_name = "PATH", env = "GATEWAY_DNS_HEALTH_CHECK_PATH", help_heading = HEALTH)]
    pub health_check_path: String,
    /// Most probes in flight at once, over every target.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=4096), env = "GATEWAY_DNS_HEALTH_CHECK_CONCURRENCY", help_heading = HEALTH)]
    pub health_check_concurrency: u32,

    #[command(flatten, next_help_heading = "Engine (shared with check)")]
    pub engine: EngineArgs,
}

/// How to reach the DNS provider's records: shared by `serve` (which writes them) and
/// `explain` (which only reads them).
#[derive(Debug, Clone, Args)]
pub struct ProviderArgs {
    /// A zone gateway-dns manages (repeatable or comma-separated): serve writes inside these
    /// (the embedded server infers them from the manifests when none is given), explain lists
    /// them.
    #[arg(
        long = "zone",
        // external-dns's name for the same list.
        alias = "domain-filter",
        value_name = "ZONE",
        value_delimiter = ',',
        env = "GATEWAY_DNS_ZONE",
        help_heading = DNS
    )]
    pub zones: Vec<String>,
    /// Owner id in the ownership TXT records (external-dns's --txt-owner-id, to take over).
    #[arg(long, default_value = "default", env = "GATEWAY_DNS_TXT_OWNER_ID", help_heading = DNS)]
    pub txt_owner_id: String,
    /// Replaces `*` in ownership record names (external-dns's --txt-wildcard-replacement).
    #[arg(long, env = "GATEWAY_DNS_TXT_WILDCARD_REPLACEMENT", help_heading = DNS)]
    pub txt_wildcard_replacement: Option<String>,
    /// Put in front of each ownership record name, as external-dns's --txt-prefix (may hold
    /// `%{record_type}`, which then replaces the `a-`/`cname-` type mark).
    #[arg(long, value_name = "PREFIX", env = "GATEWAY_DNS_TXT_PREFIX", conflicts_with = "txt_suffix", allow_hyphen_values = true, help_heading = DNS)]
    pub txt_prefix: Option<String>,
    /// Put after the first label of each ownership record name, as external-dns's --txt-suffix
    /// (may hold `%{record_type}`); exclusive with --txt-prefix.
    // A suffix usually starts with `-` (`-%{record_type}`): it is a value, not a flag.
    #[arg(long, value_name = "SUFFIX", env = "GATEWAY_DNS_TXT_SUFFIX", allow_hyphen_values = true, help_heading = DNS)]
    pub txt_suffix: Option<String>,
    /// Write ownership records encrypted with AES-256-GCM, as external-dns's
    /// --txt-encrypt-enabled (needs the key; a key alone only reads encrypted records).
    #[arg(long, default_value = "false", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_bool, action = ArgAction::Set, value_name = "BOOL", env = "GATEWAY_DNS_TXT_ENCRYPT_ENABLED", help_heading = DNS)]
    pub txt_encrypt_enabled: bool,
    /// File holding external-dns's --txt-encrypt-aes-key (32 bytes, plain or base64; else the
    /// env var GATEWAY_DNS_TXT_ENCRYPT_AES_KEY). With a key, encrypted records are read.
    #[arg(long, value_name = "FILE", env = "GATEWAY_DNS_TXT_ENCRYPT_AES_KEY_FILE", help_heading = DNS)]
    pub txt_encrypt_aes_key_file: Option<PathBuf>,
    /// RFC 2136 server, HOST:PORT; a host name is resolved again at every sync.
    #[arg(long, value_name = "HOST:PORT", env = "GATEWAY_DNS_RFC2136_SERVER", help_heading = PROVIDER)]
    pub rfc2136_server: Option<String>,
    /// external-dns's --rfc2136-host: the server's host, with --rfc2136-port.
    #[arg(
        long,
        hide = true,
        conflicts_with = "rfc2136_server",
        env = "GATEWAY_DNS_RFC2136_HOST"
    )]
    pub rfc2136_host: Option<String>,
    /// external-dns's --rfc2136-port (default 53), with --rfc2136-host.
    #[arg(
        long,
        hide = true,
        requires = "rfc2136_host",
        env = "GATEWAY_DNS_RFC2136_PORT"
    )]
    pub rfc2136_port: Option<u16>,
    /// RFC 2136 zone (repeatable; same as --zone).
    #[arg(
        long = "rfc2136-zone",
        value_name = "ZONE",
        value_delimiter = ',',
        env = "GATEWAY_DNS_RFC2136_ZONE",
        help_heading = PROVIDER
    )]
    pub rfc2136_zones: Vec<String>,
    /// TSIG key name (no TSIG when unset).
    #[arg(long, env = "GATEWAY_DNS_RFC2136_TSIG_KEY_NAME", help_heading = PROVIDER)]
    pub rfc2136_tsig_key_name: Option<String>,
    /// TSIG algorithm: hmac-sha256, hmac-sha384 or hmac-sha512.
    #[arg(long, default_value = "hmac-sha256", env = "GATEWAY_DNS_RFC2136_TSIG_ALGORITHM", help_heading = PROVIDER)]
    pub rfc2136_tsig_algorithm: String,
    /// File holding the base64 TSIG secret (else the env var GATEWAY_DNS_RFC2136_TSIG_SECRET).
    #[arg(long, value_name = "FILE", env = "GATEWAY_DNS_RFC2136_TSIG_SECRET_FILE", help_heading = PROVIDER)]
    pub rfc2136_tsig_secret_file: Option<PathBuf>,
    /// PowerDNS API base URL, e.g. http://pdns.dns.svc:8081 (a host name is resolved again at
    /// every sync: idle connections close after 5 s).
    #[arg(long, value_name = "URL", env = "GATEWAY_DNS_PDNS_SERVER", help_heading = PROVIDER)]
    pub pdns_server: Option<String>,
    /// File holding the PowerDNS API key (else the env var GATEWAY_DNS_PDNS_API_KEY).
    #[arg(long, value_name = "FILE", env = "GATEWAY_DNS_PDNS_API_KEY_FILE", help_heading = PROVIDER)]
    pub pdns_api_key_file: Option<PathBuf>,
    /// external-dns webhook provider URL (plain HTTP, e.g. a sidecar at http://127.0.0.1:8888).
    #[arg(long, value_name = "URL", env = "GATEWAY_DNS_WEBHOOK_PROVIDER_URL", help_heading = PROVIDER)]
    pub webhook_provider_url: Option<String>,
    /// --provider dnsendpoint: the namespace the DNSEndpoint objects are written to.
    #[arg(long, default_value = "gateway-dns", env = "GATEWAY_DNS_DNSENDPOINT_NAMESPACE", help_heading = PROVIDER)]
    pub dnsendpoint_namespace: String,
}

/// `serve`'s exit status (ARCHITECTURE.md, "Stable interfaces").
pub const SERVE_EXIT_CODES: &str = "\
Exit status:
  0  stopped by SIGTERM or Ctrl-C; with --once: converged, or with --once --dry-run: the plan
     was computed and printed
  1  with --once: the sync pass failed (listing or writing DNS) or changes remain after it
  2  bad configuration, or a part could not start
  3  with --once: converged except records blocked by records gateway-dns does not own";

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Text on a terminal, JSON otherwise (in a cluster).
    Auto,
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// The file name kubectl runs for `kubectl gateway-dns`: kubectl looks on PATH for
/// `kubectl-` and the plugin's name, its dashes written as underscores.
pub const PLUGIN_FILE_NAME: &str = "kubectl-gateway_dns";

/// Whether the binary runs as kubectl's plugin: it was started by the plugin's file name (a
/// link or a copy of gateway-dns), as kubectl starts it.
pub fn invoked_as_plugin(argv0: &std::ffi::OsStr) -> bool {
    // The stem, so that kubectl-gateway_dns.exe is the plugin too.
    std::path::Path::new(argv0)
        .file_stem()
        .is_some_and(|stem| stem == PLUGIN_FILE_NAME)
}

/// kubectl's flags of a `kubectl gateway-dns` command line, which name the cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PluginCluster {
    /// `--kubeconfig`; None: KUBECONFIG, else ~/.kube/config.
    pub kubeconfig: Option<PathBuf>,
    /// `--context`; None: the kubeconfig's current context.
    pub context: Option<String>,
    /// `-n`/`--namespace`; None: the context's namespace, else `default`.
    pub namespace: Option<String>,
}

const PLUGIN_AFTER_HELP: &str = "\
kubectl's --kubeconfig, --context and -n/--namespace go after `kubectl gateway-dns`, before or
after the subcommand (kubectl takes no flag before a plugin's name). Without them the cluster is
kubectl's: the current context of KUBECONFIG, else ~/.kube/config, and its namespace.";

/// The command line of `kubectl gateway-dns`: `explain`, `check` and `zone owners` as
/// `gateway-dns` has them, and kubectl's flags for the cluster, which every subcommand takes
/// before or after its name (kubectl passes everything after the plugin's name through).
pub fn plugin_command() -> clap::Command {
    use clap::{Arg, CommandFactory as _};
    let cli = Cli::command();
    let subcommand = |name: &'static str| {
        cli.find_subcommand(name)
            .cloned()
            .unwrap_or_else(|| clap::Command::new(name))
    };
    // The engine's route filter keeps --route-namespace: --namespace is kubectl's here.
    let without_namespace_alias = |arg: Arg| arg.alias(None);
    let kubeconfig_help = "kubectl's --kubeconfig: the kubeconfig file (default: KUBECONFIG, \
                           else ~/.kube/config)";
    let context_help = "kubectl's --context: the kubeconfig's context (default: its current one)";
    let explain = subcommand("explain")
        .mut_arg("route_namespace", |arg| {
            arg.long("namespace")
                .env(None)
                .hide_default_value(true)
                .help(
                    "kubectl's -n: the namespace of a route given as KIND/NAME, and of the \
                     --manifests objects written without one (default: the context's, else \
                     default)",
                )
        })
        .mut_arg("namespace", without_namespace_alias)
        .mut_arg("kubeconfig", |arg| arg.help(kubeconfig_help))
        .mut_arg("context", |arg| arg.help(context_help))
        .mut_arg("manifests", |arg| {
            arg.help(
                "Files or directories (as `check` reads them) laid over the cluster's \
                 objects, as if applied",
            )
        });
    let check = subcommand("check")
        .mut_arg("namespace", without_namespace_alias)
        .mut_arg("kubeconfig", |arg| arg.help(kubeconfig_help))
        .mut_arg("context", |arg| arg.help(context_help))
        .about(
            "Evaluate YAML/JSON files as if applied over the cluster's objects: the records \
             they would publish and every finding about them",
        );
    let owners = subcommand("zone")
        .find_subcommand("owners")
        .cloned()
        .unwrap_or_else(|| clap::Command::new("owners"));
    let zone = clap::Command::new("zone")
        .about(
            "The managed zones' owners: who holds which names and their last heartbeats \
             (`gateway-dns zone release` releases a dead owner's names)",
        )
        .subcommand_required(true)
        .subcommand(owners);
    clap::Command::new(PLUGIN_FILE_NAME)
        .display_name("kubectl gateway-dns")
        .bin_name("kubectl gateway-dns")
        .version(VERSION)
        .about(
            "DNS governance for the Kubernetes Gateway API, as a kubectl plugin: explain a \
             name or a route, check files against the cluster, list the zones' owners",
        )
        .after_help(PLUGIN_AFTER_HELP)
        .subcommand_required(true)
        .arg_required_else_help(true)
        // These ids are the subcommands' own where they have the flag, so a value given before
        // the subcommand reaches its field.
        .arg(
            Arg::new("kubeconfig")
                .long("kubeconfig")
                .value_name("FILE")
                .value_parser(clap::value_parser!(PathBuf))
                .global(true)
                .help(kubeconfig_help),
        )
        .arg(
            Arg::new("context")
                .long("context")
                .value_name("NAME")
                .global(true)
                .help(context_help),
        )
        .arg(
            Arg::new("route_namespace")
                .short('n')
                .long("namespace")
                .value_name("NAMESPACE")
                .global(true)
                .help("kubectl's -n: the namespace (default: the context's, else default)"),
        )
        .subcommand(explain)
        .subcommand(check)
        .subcommand(zone)
}

/// Reads a `kubectl gateway-dns` command line into the command `gateway-dns` runs for it:
/// `explain` and `check` read the cluster kubectl's flags name (check always, and lays the
/// files over it), and the namespace they take for a missing one is `-n`, else what
/// `context_namespace` says for the cluster (the context's namespace, as kubectl takes it).
/// `zone owners` takes the cluster for `--provider dnsendpoint`; `-n` means nothing to it.
pub fn parse_plugin(
    args: impl IntoIterator<Item = OsString>,
    context_namespace: impl FnOnce(&PluginCluster) -> String,
) -> Result<Cli, clap::Error> {
    use clap::FromArgMatches as _;
    use clap::parser::ValueSource;
    let matches = plugin_command().try_get_matches_from(args)?;
    let cluster = |m: &clap::ArgMatches| {
        // explain's -n has a default; only one given counts.
        let given = matches!(
            m.value_source("route_namespace"),
            Some(ValueSource::CommandLine | ValueSource::EnvVariable)
        );
        PluginCluster {
            kubeconfig: m.get_one::<PathBuf>("kubeconfig").cloned(),
            context: m.get_one::<String>("context").cloned(),
            namespace: m
                .get_one::<String>("route_namespace")
                .filter(|_| given)
                .cloned(),
        }
    };
    let command = match matches.subcommand() {
        Some(("explain", m)) => {
            let mut args = ExplainArgs::from_arg_matches(m)?;
            let cluster = cluster(m);
            let namespace = match cluster.namespace.clone() {
                Some(namespace) => namespace,
                None => context_namespace(&cluster),
            };
            args.route_namespace.clone_from(&namespace);
            args.default_namespace = Some(namespace);
            args.read_cluster = true;
            Command::Explain(Box::new(args))
        }
        Some(("check", m)) => {
            let mut args = CheckArgs::from_arg_matches(m)?;
            let cluster = cluster(m);
            args.default_namespace = Some(match cluster.namespace.clone() {
                Some(namespace) => namespace,
                None => context_namespace(&cluster),
            });
            args.read_cluster = true;
            Command::Check(Box::new(args))
        }
        Some(("zone", zone)) => match zone.subcommand() {
            Some(("owners", m)) => {
                let mut args = ZoneOwnersArgs::from_arg_matches(m)?;
                let cluster = cluster(m);
                args.kubeconfig = cluster.kubeconfig;
                args.context = cluster.context;
                Command::Zone(ZoneCommand::Owners(Box::new(args)))
            }
            _ => {
                return Err(plugin_command().error(
                    clap::error::ErrorKind::MissingSubcommand,
                    "kubectl gateway-dns zone takes `owners`",
                ));
            }
        },
        _ => {
            return Err(plugin_command().error(
                clap::error::ErrorKind::MissingSubcommand,
                "kubectl gateway-dns takes `explain`, `check` or `zone owners`",
            ));
        }
    };
    Ok(Cli { command })
}

/// The command line with the older boolean form joined into the one clap reads: `--flag true`
/// and `--flag false` (a separate word, which earlier versions and scripts use, e.g.
/// `--listener-sets false`) become `--flag=true` and `--flag=false`. Only those two words are
/// joined, so `check --allow-inherited-wildcards routes.yaml` still reads a path; nothing after
/// a bare `--` is touched.
pub fn join_boolean_values(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    use clap::CommandFactory as _;
    let command = Cli::command();
    let mut switches = std::collections::BTreeSet::new();
    for subcommand in command.get_subcommands() {
        for argument in subcommand.get_arguments() {
            let optional_value = argument
                .get_num_args()
                .is_some_and(|range| range.min_values() == 0 && range.takes_values());
            if !optional_value {
                continue;
            }
            let names = argument
                .get_long()
                .into_iter()
                .chain(argument.get_all_aliases().unwrap_or_default());
            switches.extend(names.map(|name| format!("--{name}")));
        }
    }
    let mut joined: Vec<OsString> = Vec::new();
    let mut args = args.into_iter().peekable();
    while let Some(arg) = args.next() {
        if arg == "--" {
            joined.push(arg);
            joined.extend(args);
            break;
        }
        let is_switch = arg.to_str().is_some_and(|text| switches.contains(text));
        let value = args
            .peek()
            .and_then(|next| next.to_str())
            .filter(|next| matches!(*next, "true" | "false"))
            .map(str::to_owned);
        match value {
            Some(value) if is_switch => {
                args.next();
                let mut with_value = arg;
                with_value.push(format!("={value}"));
                joined.push(with_value);
            }
            _ => joined.push(arg),
        }
    }
    joined
}

/// external-dns flags an existing command line carries, read before clap: a flag whose meaning
/// holds is renamed or dropped with one note saying what it maps to; one that cannot hold is
/// refused with what to do instead. clap would otherwise refuse them with a tip picked by
/// spelling, which can name an unrelated flag. Nothing after a bare `--` is touched.
pub fn external_dns_flags(
    args: impl IntoIterator<Item = OsString>,
) -> Result<(Vec<OsString>, Vec<String>), String> {
    /// Flags of external-dns that are one of ours under another name.
    const RENAMED: [(&str, &str); 3] = [
        ("gateway-label-filter", "gateway-selector"),
        ("rfc2136-tsig-keyname", "rfc2136-tsig-key-name"),
        ("rfc2136-tsig-secret-alg", "rfc2136-tsig-algorithm"),
    ];
    /// Secrets external-dns takes on its command line, where gateway-dns never reads one.
    const SECRETS: [(&str, &str, &str); 3] = [
        (
            "rfc2136-tsig-secret",
            "rfc2136-tsig-secret-file",
            "GATEWAY_DNS_RFC2136_TSIG_SECRET",
        ),
        (
            "pdns-api-key",
            "pdns-api-key-file",
            "GATEWAY_DNS_PDNS_API_KEY",
        ),
        (
            "txt-encrypt-aes-key",
            "txt-encrypt-aes-key-file",
            "GATEWAY_DNS_TXT_ENCRYPT_AES_KEY",
        ),
    ];
    const ROUTE_SOURCES: [&str; 5] = [
        "gateway-httproute",
        "gateway-grpcroute",
        "gateway-tlsroute",
        "gateway-tcproute",
        "gateway-udproute",
    ];
    let mut out = Vec::new();
    let mut notes = Vec::new();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        if arg == "--" {
            out.push(arg);
            out.extend(args);
            break;
        }
        let Some((name, inline)) = arg.to_str().and_then(|text| {
            let flag = text.strip_prefix("--")?;
            Some(match flag.split_once('=') {
                Some((name, value)) => (name.to_owned(), Some(value.to_owned())),
                None => (flag.to_owned(), None),
            })
        }) else {
            out.push(arg);
            continue;
        };
        if let Some((_, ours)) = RENAMED.iter().find(|(theirs, _)| *theirs == name) {
            notes.push(format!(
                "--{name} is external-dns's name for --{ours}; read as --{ours}"
            ));
            out.push(match inline {
                Some(value) => OsString::from(format!("--{ours}={value}")),
                None => OsString::from(format!("--{ours}")),
            });
            continue;
        }
        if let Some((_, file, env)) = SECRETS.iter().find(|(theirs, _, _)| *theirs == name) {
            return Err(format!(
                "--{name} is not accepted: gateway-dns never reads a secret from its command \
                 line; put it in a file and pass --{file} FILE, or set {env}"
            ));
        }
        if name != "source" && name != "registry" {
            out.push(arg);
            continue;
        }
        let value = match inline {
            Some(value) => value,
            None => args
                .next()
                .and_then(|value| value.into_string().ok())
                .ok_or_else(|| format!("--{name} needs a value"))?,
        };
        if name == "registry" {
            if value != "txt" {
                return Err(format!(
                    "--registry={value} is not accepted: gateway-dns keeps record ownership \
                     only in TXT records, as external-dns's txt registry does; remove \
                     --registry (or give --registry=txt)"
                ));
            }
            notes.push(
                "--registry=txt: record ownership is kept in TXT records, as external-dns's txt \
                 registry does (the only registry gateway-dns has); nothing to set"
                    .to_owned(),
            );
        } else if ROUTE_SOURCES.contains(&value.as_str()) {
            notes.push(format!(
                "--source={value}: gateway-dns always reads HTTPRoutes, GRPCRoutes, TLSRoutes, \
                 TCPRoutes and UDPRoutes (every gateway-* source of external-dns); nothing to set"
            ));
        } else {
            return Err(format!(
                "--source={value} is not accepted: gateway-dns publishes names from Gateway API \
                 routes only (external-dns's gateway-* sources); keep the {value} source in \
                 external-dns, with its own --txt-owner-id, and remove --source={value} here"
            ));
        }
    }
    Ok((out, notes))
}

/// A boolean flag's or environment variable's value: true|false|1|0|yes|no (any case).
pub fn parse_bool(text: &str) -> Result<bool, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" => Ok(true),
        "false" | "0" | "no" => Ok(false),
        _ => Err(format!("{text:?} is not a boolean (true|false|1|0|yes|no)")),
    }
}

/// A listen address `HOST:PORT`, or `:PORT` for every address (external-dns's form).
pub fn parse_listen_address(text: &str) -> Result<std::net::SocketAddr, String> {
    let text = text.trim();
    let full = match text.strip_prefix(':') {
        Some(port) => format!("0.0.0.0:{port}"),
        None => text.to_owned(),
    };
    full.parse()
        .map_err(|_| format!("{text:?} is not a listen address (IP:PORT or :PORT)"))
}

/// A secondary DNS server: `IP:PORT`, or a bare IP for port 53.
pub fn parse_secondary_address(text: &str) -> Result<std::net::SocketAddr, String> {
    let text = text.trim();
    if let Ok(addr) = text.parse() {
        return Ok(addr);
    }
    text.trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<std::net::IpAddr>()
        .map(|ip| std::net::SocketAddr::new(ip, 53))
        .map_err(|_| format!("{text:?} is not IP[:PORT] (e.g. 192.0.2.53 or 192.0.2.53:5300)"))
}

/// external-dns's levels are accepted too: `warning`, `fatal` and `panic` mean warn, error,
/// error.
pub fn parse_log_level(text: &str) -> Result<String, String> {
    let level = match text.trim().to_ascii_lowercase().as_str() {
        "trace" => "trace",
        "debug" => "debug",
        "info" => "info",
        "warn" | "warning" => "warn",
        "error" | "fatal" | "panic" => "error",
        _ => {
            return Err(format!(
                "{text:?} is not a log level (error, warn, info, debug, trace)"
            ));
        }
    };
    Ok(level.to_owned())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ProviderKind {
    /// An authoritative DNS server inside serve (explain does not list it: ask it with dig).
    Embedded,
    /// RFC 2136 dynamic updates (BIND and others), TSIG, AXFR to list.
    Rfc2136,
    /// The PowerDNS authoritative HTTP API.
    Pdns,
    /// An external-dns webhook provider (its HTTP protocol, version 1), e.g. a sidecar.
    Webhook,
    /// DNSEndpoint objects (externaldns.k8s.io/v1alpha1), published by an external-dns running
    /// with --source=crd.
    Dnsendpoint,
}

impl ProviderKind {
    /// The name `--provider` takes.
    pub fn name(self) -> &'static str {
        match self {
            ProviderKind::Embedded => "embedded",
            ProviderKind::Rfc2136 => "rfc2136",
            ProviderKind::Pdns => "pdns",
            ProviderKind::Webhook => "webhook",
            ProviderKind::Dnsendpoint => "dnsendpoint",
        }
    }
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

/// `check`'s exit status (ARCHITECTURE.md, "Stable interfaces").
pub const CHECK_EXIT_CODES: &str = "\
Exit status:
  0  no finding at or above --fail-on (default: no denial)
  1  a finding at or above --fail-on: a denial, or with --fail-on warn also a warning
  2  bad input: unreadable or invalid file, duplicate key, unknown Gateway API kind,
     bad flag value, or (with --kubeconfig) the cluster could not be read";

/// `explain`'s exit status (ARCHITECTURE.md, "Stable interfaces"), in the manner of `check`'s.
pub const EXPLAIN_EXIT_CODES: &str = "\
Exit status:
  0  the name resolves (a record of its own or a wildcard's) and no finding on it denies; for a
     route: every name of the route is published and none of its findings denies
  1  the name does not resolve, or a finding on it denies; for a route: a name is not
     published, or a finding denies
  2  bad input: not a DNS name, an unknown kind or route, unreadable or invalid files, bad
     flag value, or the cluster or the DNS provider could not be read";

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ExplainOutput {
    /// Sentences and indented lists, for a person.
    Text,
    /// The stable JSON documented in README.md.
    Json,
}

#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// A DNS name (`app.example.com`, `*.example.com`), or a route as KIND/NAME
    /// (`httproute/web`, namespace from -n) or KIND/NAMESPACE/NAME (`HTTPRoute/apps/web`, as
    /// `check` names routes). KIND is a route kind in any case, singular or plural.
    #[arg(value_name = "NAME|KIND/NAME")]
    pub target: String,
    /// The route's namespace, with KIND/NAME (as kubectl's -n).
    #[arg(
        short = 'n',
        value_name = "NAMESPACE",
        default_value = "default",
        env = "GATEWAY_DNS_NAMESPACE"
    )]
    pub route_namespace: String,
    /// Read the objects from these files or directories (as `check` reads them) instead of the
    /// cluster; with --kubeconfig, the files as if applied over the cluster's objects.
    #[arg(long, value_name = "PATH", env = "GATEWAY_DNS_MANIFESTS")]
    pub manifests: Vec<PathBuf>,
    /// Read the cluster's objects (read-only) with this kubeconfig. Without it and without
    /// --manifests: the in-cluster config, or KUBECONFIG (KUBECONFIG is read only without
    /// --manifests, or with --context; with them, this flag adds the cluster).
    #[arg(long, value_name = "FILE", env = "GATEWAY_DNS_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Read the cluster through this context of the kubeconfig (--kubeconfig, else KUBECONFIG
    /// or ~/.kube/config) instead of its current one, as kubectl's --context; with
    /// --manifests, the files as if applied over that cluster.
    #[arg(long, value_name = "NAME", env = "GATEWAY_DNS_CONTEXT")]
    pub context: Option<String>,
    /// Read the cluster even with --manifests (`kubectl gateway-dns` always does).
    #[arg(skip)]
    pub read_cluster: bool,
    /// The namespace of the --manifests objects written without one (`kubectl gateway-dns`'s
    /// -n); None: `default`.
    #[arg(skip)]
    pub default_namespace: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text", env = "GATEWAY_DNS_OUTPUT")]
    pub output: ExplainOutput,
    /// The DNS provider to read the name's records from (list only, never a write); without
    /// it the provider is not consulted. The embedded server lives in `serve`: ask it with dig.
    /// Ask these DNS servers (IP[:PORT], port 53 by default; the embedded server's
    /// secondaries, as serve's --embedded-secondary) for the names' records, and say whether each
    /// serves what the sync loop would write.
    #[arg(long = "embedded-secondary", value_name = "ADDR", value_delimiter = ',', value_parser = parse_secondary_address, env = "GATEWAY_DNS_EMBEDDED_SECONDARY", help_heading = PROVIDER)]
    pub embedded_secondaries: Vec<std::net::SocketAddr>,
    /// The namespace of serve's Lease, whose holder keeps the health checks' failing targets
    /// on it (read with the cluster; serve's --leader-election-namespace, the release's
    /// namespace in the chart). Without such a Lease no target is shown failing.
    #[arg(
        long,
        default_value = "gateway-dns",
        env = "GATEWAY_DNS_LEADER_ELECTION_NAMESPACE"
    )]
    pub leader_election_namespace: String,
    /// The name of serve's Lease (serve's --lease-name; the release's full name in the chart).
    #[arg(long, default_value = "gateway-dns", env = "GATEWAY_DNS_LEASE_NAME")]
    pub lease_name: String,
    #[arg(long, value_enum, env = "GATEWAY_DNS_PROVIDER", help_heading = PROVIDER)]
    pub provider: Option<ProviderKind>,
    #[command(flatten)]
    pub provider_flags: ProviderArgs,
    #[command(flatten, next_help_heading = "Engine (shared with check and serve)")]
    pub engine: EngineArgs,
}

/// `dnssec`'s exit status.
pub const DNSSEC_EXIT_CODES: &str = "\
Exit status:
  0  the records were printed
  2  the key file cannot be read or is not a supported key, or (with --generate) it exists
     without --force or cannot be written";

/// `certs`'s exit status.
pub const CERTS_EXIT_CODES: &str = "\
Exit status:
  0  the files were written; with --secret, the Secret was created, kept or replaced; with
     --patch-webhook, every caBundle holds the Secret's ca.crt
  2  they could not be (they exist without --force, or the directory is not writable), or the
     API server refused, or the Secret, its ca.crt or the webhook configuration is missing";

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum OutputFormat {
    /// A table of records and the findings grouped by object, for a person.
    Text,
    /// The stable JSON: records, violations, skipped documents and a summary.
    Json,
    /// GitHub Actions workflow commands (`::error file=F,line=N::`), one per finding.
    Github,
}

/// The lowest action that fails `check`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FailOn {
    /// Exit 1 when anything is denied.
    Deny,
    /// Exit 1 when anything is denied or warned about.
    Warn,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Files or directories (multi-document YAML, JSON, `kind: List`); `-` reads stdin.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text", env = "GATEWAY_DNS_OUTPUT")]
    pub output: OutputFormat,
    /// Read the cluster's Namespaces, Gateways, ListenerSets and routes (read-only) and check
    /// the files as if applied over them; only the files' objects are reported.
    #[arg(long, value_name = "FILE", env = "GATEWAY_DNS_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Read the cluster, as --kubeconfig does, through this context of the kubeconfig
    /// (--kubeconfig, else KUBECONFIG or ~/.kube/config) instead of its current one, as
    /// kubectl's --context.
    #[arg(long, value_name = "NAME", env = "GATEWAY_DNS_CONTEXT")]
    pub context: Option<String>,
    /// Read the cluster without --kubeconfig or --context (`kubectl gateway-dns` always does).
    #[arg(skip)]
    pub read_cluster: bool,
    /// The namespace of the files' objects written without one (`kubectl gateway-dns`'s -n);
    /// None: `default`.
    #[arg(skip)]
    pub default_namespace: Option<String>,
    /// A zone the records go into (repeatable or comma-separated), as `serve --zone`: a CNAME
    /// at a zone's apex is reported (CnameNotAllowed) and left out.
    #[arg(
        long = "zone",
        value_name = "ZONE",
        value_delimiter = ',',
        env = "GATEWAY_DNS_ZONE"
    )]
    pub zones: Vec<String>,
    /// The lowest action that makes `check` exit 1.
    #[arg(long, value_enum, default_value = "deny", env = "GATEWAY_DNS_FAIL_ON")]
    pub fail_on: FailOn,
    /// A zone in master-file format (what `dig AXFR` prints; repeatable): names another owner
    /// id, or no owner, holds there are refused (HostnameOwnedInZone), as serve's zone view does.
    #[arg(
        long,
        value_name = "FILE",
        env = "GATEWAY_DNS_ZONE_FILE",
        value_delimiter = ','
    )]
    pub zone_file: Vec<PathBuf>,
    /// With --zone-file: this installation's owner id; its names in the zone are its own.
    #[arg(long, default_value = "default", env = "GATEWAY_DNS_TXT_OWNER_ID")]
    pub txt_owner_id: String,
    /// With --zone-file: the ownership records' prefix, as serve's --txt-prefix.
    #[arg(
        long,
        value_name = "PREFIX",
        env = "GATEWAY_DNS_TXT_PREFIX",
        conflicts_with = "txt_suffix",
        allow_hyphen_values = true
    )]
    pub txt_prefix: Option<String>,
    /// With --zone-file: the ownership records' suffix, as serve's --txt-suffix.
    #[arg(
        long,
        value_name = "SUFFIX",
        env = "GATEWAY_DNS_TXT_SUFFIX",
        allow_hyphen_values = true
    )]
    pub txt_suffix: Option<String>,
    /// With --zone-file: as serve's --txt-wildcard-replacement.
    #[arg(long, env = "GATEWAY_DNS_TXT_WILDCARD_REPLACEMENT")]
    pub txt_wildcard_replacement: Option<String>,
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
    #[arg(
        long = "route-namespace",
        // The earlier name, and external-dns's for the same filter.
        alias = "namespace",
        value_name = "NAMESPACE",
        env = "GATEWAY_DNS_ROUTE_NAMESPACE"
    )]
    pub namespace: Option<String>,
    /// Only routes whose labels match this selector.
    #[arg(
        long,
        // external-dns's name for the same selector.
        alias = "label-filter",
        env = "GATEWAY_DNS_ROUTE_SELECTOR"
    )]
    pub route_selector: Option<String>,
    /// Publish only the Gateway addresses inside one of these IP networks (repeatable or
    /// comma-separated, e.g. 10.0.0.0/8); hostname addresses are then left out. One Gateway with
    /// public and internal addresses can so feed two installations (split-horizon).
    #[arg(
        long = "target-cidr",
        // external-dns's name for the same filter.
        alias = "target-net-filter",
        value_name = "CIDR",
        value_delimiter = ',',
        env = "GATEWAY_DNS_TARGET_CIDR"
    )]
    pub target_cidrs: Vec<String>,
    /// Leave out the Gateway addresses inside these IP networks (repeatable or comma-separated).
    #[arg(
        long = "exclude-target-cidr",
        // external-dns's name for the same filter.
        alias = "exclude-target-net",
        value_name = "CIDR",
        value_delimiter = ',',
        env = "GATEWAY_DNS_EXCLUDE_TARGET_CIDR"
    )]
    pub exclude_target_cidrs: Vec<String>,
    /// Only routes whose annotations match this selector.
    #[arg(long, env = "GATEWAY_DNS_ANNOTATION_FILTER")]
    pub annotation_filter: Option<String>,
    /// Read ListenerSets (--listener-sets=false: ignore them).
    #[arg(long, default_value = "true", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_bool, action = ArgAction::Set, value_name = "BOOL", env = "GATEWAY_DNS_LISTENER_SETS")]
    pub listener_sets: bool,
    /// Publish the wildcard hostname a hostless route inherits from its listener.
    #[arg(long, default_value = "false", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_bool, action = ArgAction::Set, value_name = "BOOL", env = "GATEWAY_DNS_ALLOW_INHERITED_WILDCARDS")]
    pub allow_inherited_wildcards: bool,
    /// Ignore the external-dns hostname annotation on routes.
    #[arg(long, default_value = "false", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_bool, action = ArgAction::Set, value_name = "BOOL", env = "GATEWAY_DNS_IGNORE_HOSTNAME_ANNOTATION")]
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
    /// How long a Gateway whose status.addresses went empty keeps its DNS names at its last
    /// addresses (a GatewayHasNoAddress warning meanwhile); 0 removes them at once.
    #[arg(long, default_value = "10m", value_parser = parse_duration, env = "GATEWAY_DNS_ADDRESS_LOSS_GRACE")]
    pub address_loss_grace: std::time::Duration,
    /// Let the external-dns target annotation on a route replace its Gateway's addresses
    /// (RouteTargetNotAllowed otherwise); the Namespace label gateway-dns.io/route-targets=allow|forbid
    /// overrides this per namespace.
    #[arg(long, default_value = "true", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_bool, action = ArgAction::Set, value_name = "BOOL", env = "GATEWAY_DNS_ALLOW_ROUTE_TARGETS")]
    pub allow_route_targets: bool,
    /// A name that may resolve to several Gateways on purpose (exact, or *.suffix for every
    /// name below suffix; repeatable or comma-separated): it publishes the union of its routes'
    /// targets and is never a HostnameConflict. Set by the platform team, not by app owners.
    #[arg(
        long = "shared-name",
        value_name = "NAME",
        value_delimiter = ',',
        env = "GATEWAY_DNS_SHARED_NAME"
    )]
    pub shared_names: Vec<String>,
    /// off: any namespace may claim any name; namespace: a name belongs to the namespace of its
    /// oldest route, and others may claim it only when that Namespace's annotation
    /// gateway-dns.io/share-hostnames-with lists them (HostnameOwnedByOtherNamespace).
    #[arg(long, default_value = "off", value_parser = ["off", "namespace"], env = "GATEWAY_DNS_HOSTNAME_OWNERSHIP")]
    pub hostname_ownership: String,
    /// A namespace without the annotation gateway-dns.io/allowed-hostnames may publish no name
    /// (HostnameNotAllowedForNamespace); by default such a namespace is unrestricted.
    #[arg(long, default_value = "false", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_bool, action = ArgAction::Set, value_name = "BOOL", env = "GATEWAY_DNS_REQUIRE_ALLOWED_HOSTNAMES")]
    pub require_allowed_hostnames: bool,
    /// Prefix of the external-dns annotations read on routes, Gateways and ListenerSets
    /// (external-dns's --annotation-prefix; ends with `/`). The older
    /// external-dns.alpha.kubernetes.io/ prefix is read too.
    #[arg(long, default_value = crate::engine::DEFAULT_ANNOTATION_PREFIX, value_name = "PREFIX", env = "GATEWAY_DNS_ANNOTATION_PREFIX")]
    pub annotation_prefix: String,
    /// Publish a Gateway's addresses even while its status says Programmed=False (or the
    /// listeners a route attaches through say they are not programmed, or conflict). By
    /// default such a Gateway's addresses leave every name that another Gateway still serves;
    /// a name with no other target keeps them either way (GatewayNotProgrammed).
    #[arg(long, default_value = "false", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_bool, action = ArgAction::Set, value_name = "BOOL", env = "GATEWAY_DNS_PUBLISH_UNPROGRAMMED")]
    pub publish_unprogrammed: bool,
}

/// external-dns's rule: the prefix ends with `/` (it is glued to the annotation's name).
fn annotation_prefix(prefix: &str) -> Result<String, ConfigError> {
    if prefix.len() < 2 || !prefix.ends_with('/') || prefix.chars().any(char::is_whitespace) {
        return Err(ConfigError::BadAnnotationPrefix(prefix.to_owned()));
    }
    Ok(prefix.to_owned())
}

fn parse_cidrs(values: &[String]) -> Result<Vec<Cidr>, ConfigError> {
    values
        .iter()
        .map(|value| value.parse::<Cidr>().map_err(ConfigError::from))
        .collect()
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
                targets: TargetFilter {
                    include: parse_cidrs(&self.target_cidrs)?,
                    exclude: parse_cidrs(&self.exclude_target_cidrs)?,
                },
            },
            listener_sets: self.listener_sets,
            allow_inherited_wildcards: self.allow_inherited_wildcards,
            ignore_hostname_annotation: self.ignore_hostname_annotation,
            conflict_resolution: self.conflict_resolution.parse::<ConflictResolution>()?,
            mode: self.mode.parse::<Mode>()?,
            actions,
            max_route_hostnames: self.max_route_hostnames,
            max_route_parent_refs: self.max_route_parent_refs,
            address_loss_grace: self.address_loss_grace,
            allow_route_targets: self.allow_route_targets,
            zones: Vec::new(),
            shared_names: Config::parse_shared_names(&self.shared_names)?,
            hostname_ownership: self.hostname_ownership.parse::<HostnameOwnership>()?,
            require_allowed_hostnames: self.require_allowed_hostnames,
            annotation_prefix: annotation_prefix(&self.annotation_prefix)?,
            publish_unprogrammed: self.publish_unprogrammed,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_locations() {
        let at = |namespace: Option<&str>, name: &str| SecretLocation {
            namespace: namespace.map(str::to_string),
            name: name.to_string(),
        };
        assert_eq!(
            parse_secret_location("gateway-dns/gateway-dns-tls"),
            Ok(at(Some("gateway-dns"), "gateway-dns-tls"))
        );
        assert_eq!(parse_secret_location("web.tls"), Ok(at(None, "web.tls")));
        for bad in [
            "", "/x", "ns/", "Ns/x", "n.s/x", "ns/x/y", "ns/-x", "ns/x_y",
        ] {
            assert!(parse_secret_location(bad).is_err(), "{bad:?}");
        }
    }

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

    #[test]
    fn plugin_definition_is_consistent() {
        plugin_command().debug_assert();
    }

    #[test]
    fn invoked_as_the_plugin_by_its_file_name() {
        for plugin in [
            "kubectl-gateway_dns",
            "/usr/local/bin/kubectl-gateway_dns",
            "kubectl-gateway_dns.exe",
        ] {
            assert!(invoked_as_plugin(std::ffi::OsStr::new(plugin)), "{plugin}");
        }
        for not in [
            "gateway-dns",
            "/bin/gateway-dns",
            "kubectl-gateway-dns",
            "kubectl",
        ] {
            assert!(!invoked_as_plugin(std::ffi::OsStr::new(not)), "{not}");
        }
    }

    fn plugin(args: &[&str]) -> Result<Command, clap::Error> {
        let argv = std::iter::once("kubectl-gateway_dns")
            .chain(args.iter().copied())
            .map(OsString::from);
        parse_plugin(argv, |cluster| {
            format!("ns-of-{}", cluster.context.as_deref().unwrap_or("current"))
        })
        .map(|cli| cli.command)
    }

    #[test]
    fn plugin_flags_before_or_after_the_subcommand() {
        for args in [
            &["-n", "apps", "--context", "two", "explain", "httproute/b2"][..],
            &[
                "explain",
                "httproute/b2",
                "--namespace",
                "apps",
                "--context=two",
            ],
            &[
                "--namespace=apps",
                "explain",
                "--context",
                "two",
                "httproute/b2",
            ],
        ] {
            let Ok(Command::Explain(explain)) = plugin(args) else {
                panic!("{args:?}");
            };
            assert_eq!(explain.route_namespace, "apps", "{args:?}");
            assert_eq!(explain.default_namespace.as_deref(), Some("apps"));
            assert_eq!(explain.context.as_deref(), Some("two"));
            assert!(explain.read_cluster);
            // --namespace is kubectl's, not the engine's route filter.
            assert_eq!(explain.engine.namespace, None, "{args:?}");
        }
        let Ok(Command::Explain(explain)) = plugin(&["explain", "b.example.com"]) else {
            panic!("explain");
        };
        assert_eq!(explain.route_namespace, "ns-of-current");
        assert_eq!(explain.kubeconfig, None);
    }

    #[test]
    fn plugin_check_reads_the_cluster() {
        let Ok(Command::Check(check)) = plugin(&[
            "--kubeconfig",
            "/k",
            "check",
            "routes.yaml",
            "--context",
            "c",
        ]) else {
            panic!("check");
        };
        assert!(check.read_cluster);
        assert_eq!(check.kubeconfig, Some(PathBuf::from("/k")));
        assert_eq!(check.default_namespace.as_deref(), Some("ns-of-c"));
        assert_eq!(check.engine.namespace, None);
        let Ok(Command::Check(check)) = plugin(&["check", "-n", "apps", "r.yaml"]) else {
            panic!("check -n");
        };
        assert_eq!(check.default_namespace.as_deref(), Some("apps"));
    }

    #[test]
    fn plugin_zone_owners_and_nothing_else() {
        let Ok(Command::Zone(ZoneCommand::Owners(owners))) = plugin(&[
            "--context",
            "c",
            "zone",
            "owners",
            "--provider",
            "dnsendpoint",
            "--zone",
            "example.com",
        ]) else {
            panic!("zone owners");
        };
        assert_eq!(owners.context.as_deref(), Some("c"));
        for refused in [
            &["serve"][..],
            &["zone", "release", "--provider", "rfc2136", "--owner", "x"],
            &["certs"],
            &["zone"],
        ] {
            assert!(plugin(refused).is_err(), "{refused:?}");
        }
    }
}
