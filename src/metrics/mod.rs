//! The Prometheus registry of gateway-dns, on the Prometheus project's Rust client
//! (`prometheus-client`): typed metric families, Prometheus text (0.0.4) or OpenMetrics on
//! request, names with their unit and `_total` suffixes added by the client.
//!
//! Every recorder is cheap and thread-safe; share one `Arc<Metrics>` across the webhook, the
//! sync loop and the sources. Every labelled series whose label values are known up front is
//! created at 0 when the registry is made (or, for the provider and the zones, when the sync
//! loop is configured), so dashboards show 0 rather than "no data".
//!
//! The webhook records two series on every `/validate` request (the latency histogram and the
//! outcome counter) and one per finding: their label values are looked up once, here, so the
//! request path only increments a counter it already holds.

mod process;

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use prometheus_client::encoding::text as openmetrics_text;
use prometheus_client::encoding::{EncodeLabelSet, EncodeMetric, MetricEncoder, prometheus_text};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::{Registry, Unit};

use crate::engine::{Action, Finding, Reason};

/// Upper bounds (seconds) of the admission latency histogram buckets.
const LATENCY_BUCKETS_SECONDS: [f64; 14] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

/// Content type of the Prometheus text exposition format (0.0.4), served at `/metrics` unless
/// the scraper asks for OpenMetrics.
pub const CONTENT_TYPE: &str = prometheus_text::CONTENT_TYPE;

/// Content type of the OpenMetrics text format, served when the `Accept` header names it.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The git revision the binary was built from (`unknown` when built without git).
pub const REVISION: &str = env!("GATEWAY_DNS_REVISION");

/// Kinds of evaluation failure counted by `gateway_dns_admission_evaluation_errors_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EvaluationErrorKind {
    /// The handler did not finish before the admission deadline.
    Timeout,
    /// The handler panicked.
    Panic,
    /// No evaluation slot freed up before the deadline.
    Overloaded,
    /// The object could not be read by gateway-dns (reported by the handler).
    Unreadable,
}

impl EvaluationErrorKind {
    pub const ALL: [EvaluationErrorKind; 4] = [
        Self::Timeout,
        Self::Panic,
        Self::Overloaded,
        Self::Unreadable,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Timeout => "timeout",
            Self::Panic => "panic",
            Self::Overloaded => "overloaded",
            Self::Unreadable => "unreadable",
        }
    }
}

/// What a DNS change did to an RRset, for `gateway_dns_sync_changes_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeAction {
    Create,
    Update,
    Delete,
}

impl ChangeAction {
    pub const ALL: [ChangeAction; 3] = [Self::Create, Self::Update, Self::Delete];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Create => "create",
            Self::Update => "update",
            Self::Delete => "delete",
        }
    }
}

/// Which step of a sync pass failed, for `gateway_dns_sync_errors_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncErrorKind {
    /// Listing the zones' records (nothing was written).
    List,
    /// The provider's adjustment of the desired records, before planning (nothing was written).
    Adjust,
    /// Writing the changes (some batches may have been written).
    Apply,
}

impl SyncErrorKind {
    pub const ALL: [SyncErrorKind; 3] = [Self::List, Self::Adjust, Self::Apply];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::List => "list",
            Self::Adjust => "adjust",
            Self::Apply => "apply",
        }
    }
}

/// Why a desired record is not published, grouped for `gateway_dns_records_blocked`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockedGroup {
    /// Another owner, or nobody, holds the name (or its ownership TXT name).
    Ownership,
    /// The name, or its ownership TXT name, is outside the managed zones.
    Zone,
    /// The record cannot coexist with other data (a CNAME beside others, a duplicate, a name
    /// too long for its ownership record).
    Conflict,
}

impl BlockedGroup {
    pub const ALL: [BlockedGroup; 3] = [Self::Ownership, Self::Zone, Self::Conflict];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ownership => "ownership",
            Self::Zone => "zone",
            Self::Conflict => "conflict",
        }
    }
}

/// The outcomes every `/validate` answer is counted under.
const OUTCOMES: [&str; 3] = ["allowed", "denied", "error"];

/// The results a TLS reload is counted under.
const TLS_RELOAD_RESULTS: [&str; 2] = ["reloaded", "rejected"];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DecisionLabels {
    reason: String,
    action: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SourceLabels {
    source: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HolderLabels {
    holder: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SecondaryLabels {
    secondary: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GatewayLabels {
    /// Not `namespace`: Prometheus's scrape adds the target's own `namespace` label.
    gateway_namespace: String,
    gateway: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AbsenceLabels {
    source: String,
    absence: String,
    decision: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ActionLabels {
    action: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SyncErrorLabels {
    provider: String,
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ZoneLabels {
    zone: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NamespaceLabels {
    /// Not `namespace`: Prometheus's scrape adds the target's own `namespace` label.
    object_namespace: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CapLabels {
    listener: String,
    cap: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: String,
    revision: String,
}

type FloatGauge = Gauge<f64, std::sync::atomic::AtomicU64>;

/// A family registered so that it is described (HELP and TYPE) before its first series, as
/// every other metric is: scrapers, dashboards and alerts see every name from the start.
#[derive(Debug)]
struct Described<F>(F);

impl<F: EncodeMetric> EncodeMetric for Described<F> {
    fn encode(&self, encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        self.0.encode(encoder)
    }

    fn metric_type(&self) -> MetricType {
        self.0.metric_type()
    }
}

/// The listeners whose connections are capped, as the `listener` label names them.
pub const CAPPED_LISTENERS: [&str; 3] = ["webhook", "metrics", "dns"];

/// The caps, as the `cap` label names them (`net::Cap::as_str`).
pub const CAPS: [&str; 2] = ["connections", "per_source"];

/// All gateway-dns metrics. Create one with [`Metrics::new`] and share it in an `Arc`.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    admission_latency: Histogram,
    admission_requests: Family<OutcomeLabels, Counter>,
    /// The counters of [`OUTCOMES`], in that order.
    known_outcomes: [Counter; OUTCOMES.len()],
    admission_decisions: Family<DecisionLabels, Counter>,
    /// The counter of every (reason, action) pair, reason-major in the order of `Reason::ALL`
    /// and `Action::ALL`.
    known_decisions: Vec<Counter>,
    evaluation_errors: Family<KindLabels, Counter>,
    cache_objects: Family<KindLabels, Gauge>,
    source_staleness: Family<SourceLabels, FloatGauge>,
    secondary_serial_lag: Family<SecondaryLabels, Gauge>,
    secondary_lag_seconds: Family<SecondaryLabels, FloatGauge>,
    target_healthy: Family<GatewayLabels, Gauge>,
    zone_view_names: Family<HolderLabels, Gauge>,
    zone_view_age: FloatGauge,
    zone_view_in_use: Gauge,
    owner_id_conflict: Gauge,
    absences: Family<AbsenceLabels, Counter>,
    sync_passes: Counter,
    sync_changes: Family<ActionLabels, Counter>,
    sync_errors: Family<SyncErrorLabels, Counter>,
    last_successful_sync: FloatGauge,
    records: Family<ZoneLabels, Gauge>,
    records_blocked: Family<ReasonLabels, Gauge>,
    registry_undecryptable: Gauge,
    leader: Gauge,
    tls_reloads: Family<ResultLabels, Counter>,
    findings: Family<ReasonLabels, Gauge>,
    namespace_findings: Family<NamespaceLabels, Gauge>,
    /// Namespaces that have had a findings series, so one whose findings are gone reads 0.
    finding_namespaces: std::sync::Mutex<std::collections::BTreeSet<String>>,
    /// The Gateways with a `gateway_dns_target_healthy` series, so the ones no longer probed
    /// lose theirs.
    probed_gateways: std::sync::Mutex<std::collections::HashSet<GatewayLabels>>,
    connections_evicted: Family<CapLabels, Counter>,
    connections_refused: Family<CapLabels, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let admission_latency = Histogram::new(LATENCY_BUCKETS_SECONDS);
        registry.register_with_unit(
            "gateway_dns_admission_duration",
            "Time to answer one AdmissionReview, from request to response",
            Unit::Seconds,
            admission_latency.clone(),
        );
        let admission_requests = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "gateway_dns_admission_requests",
            "AdmissionReview requests answered, by outcome",
            Described(admission_requests.clone()),
        );
        let known_outcomes = OUTCOMES.map(|outcome| {
            admission_requests.get_or_create_owned(&OutcomeLabels {
                outcome: outcome.to_string(),
            })
        });
        let admission_decisions = Family::<DecisionLabels, Counter>::default();
        registry.register(
            "gateway_dns_admission_decisions",
            "Findings reported by the admission webhook, by reason and action",
            Described(admission_decisions.clone()),
        );
        let known_decisions = Reason::ALL
            .iter()
            .flat_map(|reason| Action::ALL.iter().map(move |action| (reason, action)))
            .map(|(reason, action)| {
                admission_decisions.get_or_create_owned(&DecisionLabels {
                    reason: reason.as_str().to_string(),
                    action: action.as_str().to_string(),
                })
            })
            .collect();
        let evaluation_errors = Family::<KindLabels, Counter>::default();
        registry.register(
            "gateway_dns_admission_evaluation_errors",
            "Evaluations that did not complete (the request was allowed), by kind",
            Described(evaluation_errors.clone()),
        );
        for kind in EvaluationErrorKind::ALL {
            evaluation_errors.get_or_create_owned(&KindLabels {
                kind: kind.as_str().to_string(),
            });
        }
        let cache_objects = Family::<KindLabels, Gauge>::default();
        registry.register(
            "gateway_dns_cache_objects",
            "Objects held in the in-memory cache, by kind",
            Described(cache_objects.clone()),
        );
        let source_staleness = Family::<SourceLabels, FloatGauge>::default();
        registry.register_with_unit(
            "gateway_dns_source_staleness",
            "Time since the source last delivered a consistent view, by watched kind",
            Unit::Seconds,
            Described(source_staleness.clone()),
        );
        let secondary_serial_lag = Family::<SecondaryLabels, Gauge>::default();
        registry.register(
            "gateway_dns_secondary_serial_lag",
            "Serials an embedded server's secondary is behind the primary, the most over its zones",
            Described(secondary_serial_lag.clone()),
        );
        let secondary_lag_seconds = Family::<SecondaryLabels, FloatGauge>::default();
        registry.register_with_unit(
            "gateway_dns_secondary_serial_lag",
            "Time since an embedded server's secondary last held every zone's current serial",
            Unit::Seconds,
            Described(secondary_lag_seconds.clone()),
        );
        let absences = Family::<AbsenceLabels, Counter>::default();
        registry.register(
            "gateway_dns_absences",
            "Absences that could have removed objects or records (a kind not served, an empty \
             relist, an empty DNS listing), by source and what was decided: held until \
             confirmed, returned, or confirmed",
            Described(absences.clone()),
        );
        let target_healthy = Family::<GatewayLabels, Gauge>::default();
        registry.register(
            "gateway_dns_target_healthy",
            "1 while every probed address of a Gateway passes its health checks, 0 while one \
             fails; only the Lease holder probes, so only it has series",
            Described(target_healthy.clone()),
        );
        let zone_view_names = Family::<HolderLabels, Gauge>::default();
        registry.register(
            "gateway_dns_zone_view_names",
            "Names of the managed zones held by someone else, in this replica's zone view: by \
             another owner id (other_owner) or by records without an ownership record (unmanaged)",
            Described(zone_view_names.clone()),
        );
        let zone_view_age = FloatGauge::default();
        registry.register_with_unit(
            "gateway_dns_zone_view_age",
            "Time since this replica's zone view last read every managed zone whole",
            Unit::Seconds,
            zone_view_age.clone(),
        );
        let zone_view_in_use = Gauge::default();
        registry.register(
            "gateway_dns_zone_view_in_use",
            "1 while the zone view is loaded and fresh, so names held in the zone by others are \
             refused; 0 while those checks are skipped (not loaded yet, too old, or turned off)",
            zone_view_in_use.clone(),
        );
        let owner_id_conflict = Gauge::default();
        registry.register(
            "gateway_dns_owner_id_conflict",
            "1 while another installation writes heartbeats with this --txt-owner-id (DNS writes \
             stop meanwhile), else 0; read by the Lease holder with --owner-heartbeat-interval",
            owner_id_conflict.clone(),
        );
        let sync_passes = Counter::default();
        registry.register(
            "gateway_dns_sync_passes",
            "Sync passes attempted (list, plan, apply)",
            sync_passes.clone(),
        );
        let sync_changes = Family::<ActionLabels, Counter>::default();
        registry.register(
            "gateway_dns_sync_changes",
            "DNS RRset changes written by the sync loop, by action",
            Described(sync_changes.clone()),
        );
        for action in ChangeAction::ALL {
            sync_changes.get_or_create_owned(&ActionLabels {
                action: action.as_str().to_string(),
            });
        }
        let sync_errors = Family::<SyncErrorLabels, Counter>::default();
        registry.register(
            "gateway_dns_sync_errors",
            "Failed sync passes, by provider and the step that failed",
            Described(sync_errors.clone()),
        );
        let last_successful_sync = FloatGauge::default();
        registry.register_with_unit(
            "gateway_dns_last_successful_sync_timestamp",
            "Unix time of the last sync pass that converged",
            Unit::Seconds,
            last_successful_sync.clone(),
        );
        let records = Family::<ZoneLabels, Gauge>::default();
        registry.register(
            "gateway_dns_records",
            "Records gateway-dns keeps in each managed zone (would keep, in dry-run or on a \
             replica not holding the Lease), blocked ones not counted",
            Described(records.clone()),
        );
        let records_blocked = Family::<ReasonLabels, Gauge>::default();
        registry.register(
            "gateway_dns_records_blocked",
            "Desired records not published at the last sync pass, by reason: ownership, zone \
             or conflict",
            Described(records_blocked.clone()),
        );
        for group in BlockedGroup::ALL {
            records_blocked.get_or_create_owned(&ReasonLabels {
                reason: group.as_str().to_string(),
            });
        }
        let registry_undecryptable = Gauge::default();
        registry.register(
            "gateway_dns_registry_undecryptable_records",
            "TXT records at the last sync pass whose value looks like an encrypted ownership \
             value that the configured key does not open (treated as not ours)",
            registry_undecryptable.clone(),
        );
        let leader = Gauge::default();
        registry.register(
            "gateway_dns_leader",
            "1 while this replica holds the sync loop's Lease (always 1 when it syncs without \
             leader election), else 0",
            leader.clone(),
        );
        let tls_reloads = Family::<ResultLabels, Counter>::default();
        registry.register(
            "gateway_dns_tls_reloads",
            "Attempts to load a changed TLS certificate pair from disk, by result",
            Described(tls_reloads.clone()),
        );
        for result in TLS_RELOAD_RESULTS {
            tls_reloads.get_or_create_owned(&ResultLabels {
                result: result.to_string(),
            });
        }
        let findings = Family::<ReasonLabels, Gauge>::default();
        registry.register(
            "gateway_dns_findings",
            "Current findings over every route, Gateway and ListenerSet, by reason (ignored \
             reasons left out)",
            Described(findings.clone()),
        );
        for reason in Reason::ALL {
            findings.get_or_create_owned(&ReasonLabels {
                reason: reason.as_str().to_string(),
            });
        }
        let connections_evicted = Family::<CapLabels, Counter>::default();
        registry.register(
            "gateway_dns_connections_evicted",
            "Idle connections closed to make room for a new one at a cap, by listener \
             (webhook, metrics, dns) and cap (connections, per_source)",
            Described(connections_evicted.clone()),
        );
        let connections_refused = Family::<CapLabels, Counter>::default();
        registry.register(
            "gateway_dns_connections_refused",
            "New connections turned away at a cap because every connection there was busy, by \
             listener and cap",
            Described(connections_refused.clone()),
        );
        for listener in CAPPED_LISTENERS {
            for cap in CAPS {
                let labels = CapLabels {
                    listener: listener.to_string(),
                    cap: cap.to_string(),
                };
                connections_evicted.get_or_create_owned(&labels);
                connections_refused.get_or_create_owned(&labels);
            }
        }
        let namespace_findings = Family::<NamespaceLabels, Gauge>::default();
        registry.register(
            "gateway_dns_namespace_findings",
            "Current findings by the namespace of the object concerned",
            Described(namespace_findings.clone()),
        );
        registry.register(
            "gateway_dns_build",
            "The version and git revision of the running binary",
            Info::new(BuildLabels {
                version: env!("CARGO_PKG_VERSION").to_string(),
                revision: REVISION.to_string(),
            }),
        );
        registry.register_collector(Box::new(Arc::new(process::ProcessCollector::new())));
        Metrics {
            registry,
            admission_latency,
            admission_requests,
            known_outcomes,
            admission_decisions,
            known_decisions,
            evaluation_errors,
            cache_objects,
            source_staleness,
            secondary_serial_lag,
            secondary_lag_seconds,
            target_healthy,
            zone_view_names,
            zone_view_age,
            zone_view_in_use,
            owner_id_conflict,
            absences,
            sync_passes,
            sync_changes,
            sync_errors,
            last_successful_sync,
            records,
            records_blocked,
            registry_undecryptable,
            leader,
            tls_reloads,
            findings,
            namespace_findings,
            finding_namespaces: Default::default(),
            probed_gateways: Default::default(),
            connections_evicted,
            connections_refused,
        }
    }

    /// Sets the findings gauges from the current findings (the engine's settled outcome): one
    /// series per reason and one per namespace that has had findings, at 0 once they are gone.
    pub fn set_findings(&self, violations: &[Finding]) {
        let mut by_reason = [0i64; Reason::ALL.len()];
        let mut by_namespace: std::collections::BTreeMap<&str, i64> = Default::default();
        for violation in violations {
            if let Some(at) = Reason::ALL.iter().position(|r| *r == violation.reason) {
                by_reason[at] += 1;
            }
            // `Kind/namespace/name`.
            if let Some(namespace) = violation.object.split('/').nth(1) {
                *by_namespace.entry(namespace).or_default() += 1;
            }
        }
        for (reason, count) in Reason::ALL.iter().zip(by_reason) {
            self.findings
                .get_or_create(&ReasonLabels {
                    reason: reason.as_str().to_string(),
                })
                .set(count);
        }
        let mut known = self
            .finding_namespaces
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        known.extend(by_namespace.keys().map(|ns| ns.to_string()));
        for namespace in known.iter() {
            let count = by_namespace.get(namespace.as_str()).copied().unwrap_or(0);
            self.namespace_findings
                .get_or_create(&NamespaceLabels {
                    object_namespace: namespace.clone(),
                })
                .set(count);
        }
    }

    /// The current findings for one reason, as last set.
    pub fn findings(&self, reason: Reason) -> i64 {
        self.findings
            .get_or_create(&ReasonLabels {
                reason: reason.as_str().to_string(),
            })
            .get()
    }

    /// Records the time spent answering one `/validate` request (decode to response).
    pub fn observe_admission_latency(&self, elapsed: Duration) {
        self.admission_latency.observe(elapsed.as_secs_f64());
    }

    /// Counts one answered AdmissionReview by outcome: `allowed`, `denied` or `error`
    /// (an HTTP error status for bad input).
    pub fn record_admission_request(&self, outcome: &str) {
        match OUTCOMES.iter().position(|known| *known == outcome) {
            Some(slot) => {
                self.known_outcomes[slot].inc();
            }
            None => {
                self.admission_requests
                    .get_or_create(&OutcomeLabels {
                        outcome: outcome.to_string(),
                    })
                    .inc();
            }
        }
    }

    /// AdmissionReviews answered so far, every outcome together.
    pub fn admission_requests_total(&self) -> u64 {
        self.known_outcomes.iter().map(Counter::get).sum()
    }

    /// Counts one finding reported to the user, by reason (e.g. `HostnameConflict`) and action
    /// (`deny`, `warn`, `ignore`, or the mode-adjusted action). Called by the admission handler.
    pub fn record_decision(&self, reason: &str, action: &str) {
        let reason_slot = Reason::ALL.iter().position(|r| r.as_str() == reason);
        let action_slot = Action::ALL.iter().position(|a| a.as_str() == action);
        let known = reason_slot
            .zip(action_slot)
            .and_then(|(r, a)| self.known_decisions.get(r * Action::ALL.len() + a));
        match known {
            Some(counter) => {
                counter.inc();
            }
            None => {
                self.admission_decisions
                    .get_or_create(&DecisionLabels {
                        reason: reason.to_string(),
                        action: action.to_string(),
                    })
                    .inc();
            }
        }
    }

    /// [`Self::record_decision`] for a finding the engine made: its counter is found by the
    /// enums' positions, without comparing names.
    pub fn record_finding(&self, reason: Reason, action: Action) {
        let reason_slot = Reason::ALL.iter().position(|r| *r == reason);
        let action_slot = Action::ALL.iter().position(|a| *a == action);
        match reason_slot
            .zip(action_slot)
            .and_then(|(r, a)| self.known_decisions.get(r * Action::ALL.len() + a))
        {
            Some(counter) => {
                counter.inc();
            }
            None => self.record_decision(reason.as_str(), action.as_str()),
        }
    }

    /// Counts one evaluation that did not complete normally.
    pub fn record_evaluation_error(&self, kind: EvaluationErrorKind) {
        self.evaluation_errors
            .get_or_create(&KindLabels {
                kind: kind.as_str().to_string(),
            })
            .inc();
    }

    /// Sets the number of objects of `kind` (e.g. `HTTPRoute`) held in the in-memory cache.
    pub fn set_cache_objects(&self, kind: &str, count: u64) {
        self.cache_objects
            .get_or_create(&KindLabels {
                kind: kind.to_string(),
            })
            .set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// Records how long ago `source` (the watched kind) last delivered a consistent view.
    pub fn set_source_staleness(&self, source: &str, staleness: Duration) {
        self.source_staleness
            .get_or_create(&SourceLabels {
                source: source.to_string(),
            })
            .set(staleness.as_secs_f64());
    }

    /// Records how far `secondary` is behind: serials, and the time since it last matched.
    pub fn set_secondary_lag(&self, secondary: &str, serials: u32, since_matched: Duration) {
        let labels = SecondaryLabels {
            secondary: secondary.to_string(),
        };
        self.secondary_serial_lag
            .get_or_create(&labels)
            .set(i64::from(serials));
        self.secondary_lag_seconds
            .get_or_create(&labels)
            .set(since_matched.as_secs_f64());
    }

    /// Sets what the zone view holds: names held by another owner id and by no owner.
    pub fn set_zone_view(&self, other_owner: usize, unmanaged: usize) {
        for (holder, count) in [("other_owner", other_owner), ("unmanaged", unmanaged)] {
            self.zone_view_names
                .get_or_create(&HolderLabels {
                    holder: holder.to_owned(),
                })
                .set(i64::try_from(count).unwrap_or(i64::MAX));
        }
    }

    /// Sets the zone view's age and whether the cross-cluster checks use it.
    pub fn set_zone_view_state(&self, age: Duration, in_use: bool) {
        self.zone_view_age.set(age.as_secs_f64());
        self.zone_view_in_use.set(i64::from(in_use));
    }

    /// Sets whether another installation writes with this owner id.
    pub fn set_owner_id_conflict(&self, conflict: bool) {
        self.owner_id_conflict.set(i64::from(conflict));
    }

    /// Sets the health of the Gateways probed, `namespace/name` → every target passes; a
    /// Gateway no longer listed loses its series (no longer probed, or this replica lost the
    /// Lease).
    pub fn set_target_health<'a>(&self, gateways: impl IntoIterator<Item = (&'a str, bool)>) {
        let mut current = std::collections::HashSet::new();
        for (gateway, healthy) in gateways {
            let (namespace, name) = gateway.split_once('/').unwrap_or(("", gateway));
            let labels = GatewayLabels {
                gateway_namespace: namespace.to_owned(),
                gateway: name.to_owned(),
            };
            self.target_healthy
                .get_or_create(&labels)
                .set(i64::from(healthy));
            current.insert(labels);
        }
        let mut known = self
            .probed_gateways
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        for gone in known.difference(&current) {
            self.target_healthy.remove(gone);
        }
        *known = current;
    }

    /// Counts one absence seen by `source` (a watched kind, or a DNS provider) and what was
    /// decided of it (`held`, `returned`, `confirmed`).
    pub fn record_absence(&self, source: &str, absence: &str, decision: &str) {
        self.absence(source, absence, decision).inc();
    }

    /// Sets the absences count of `source` to `total`, the source's own count over its life.
    pub fn set_absences(&self, source: &str, absence: &str, decision: &str, total: u64) {
        self.absence(source, absence, decision)
            .inner()
            .store(total, std::sync::atomic::Ordering::Relaxed);
    }

    fn absence(&self, source: &str, absence: &str, decision: &str) -> Counter {
        self.absences
            .get_or_create(&AbsenceLabels {
                source: source.to_string(),
                absence: absence.to_string(),
                decision: decision.to_string(),
            })
            .clone()
    }

    /// Creates, at 0, the series of a configured sync loop: its provider's errors by kind and
    /// its zones' record counts.
    pub fn init_sync(&self, provider: &str, zones: &[String]) {
        for kind in SyncErrorKind::ALL {
            self.sync_errors.get_or_create_owned(&SyncErrorLabels {
                provider: provider.to_string(),
                kind: kind.as_str().to_string(),
            });
        }
        for zone in zones {
            self.records
                .get_or_create_owned(&ZoneLabels { zone: zone.clone() });
        }
    }

    /// Counts one sync pass attempted (listing, planning and, unless withheld, applying).
    pub fn record_sync_pass(&self) {
        self.sync_passes.inc();
    }

    /// Sync passes attempted so far.
    pub fn sync_passes(&self) -> u64 {
        self.sync_passes.get()
    }

    /// Counts DNS RRset changes written by the sync loop.
    pub fn add_sync_changes(&self, action: ChangeAction, count: u64) {
        self.sync_changes
            .get_or_create(&ActionLabels {
                action: action.as_str().to_string(),
            })
            .inc_by(count);
    }

    /// DNS RRset changes written under `action` so far.
    pub fn sync_changes(&self, action: ChangeAction) -> u64 {
        self.sync_changes
            .get(&ActionLabels {
                action: action.as_str().to_string(),
            })
            .map_or(0, |counter| counter.get())
    }

    /// DNS RRset changes written so far, all actions together.
    pub fn sync_changes_written(&self) -> u64 {
        ChangeAction::ALL
            .into_iter()
            .map(|action| self.sync_changes(action))
            .sum()
    }

    /// Counts one failed sync pass, by provider name and the step that failed.
    pub fn record_sync_error(&self, provider: &str, kind: SyncErrorKind) {
        self.sync_errors
            .get_or_create(&SyncErrorLabels {
                provider: provider.to_string(),
                kind: kind.as_str().to_string(),
            })
            .inc();
    }

    /// Failed sync passes counted under `provider` so far, all kinds together.
    pub fn sync_errors(&self, provider: &str) -> u64 {
        SyncErrorKind::ALL
            .into_iter()
            .filter_map(|kind| {
                self.sync_errors.get(&SyncErrorLabels {
                    provider: provider.to_string(),
                    kind: kind.as_str().to_string(),
                })
            })
            .map(|counter| counter.get())
            .sum()
    }

    /// Records the wall-clock time of the last sync pass that converged.
    pub fn set_last_successful_sync(&self, at: SystemTime) {
        let seconds = at
            .duration_since(UNIX_EPOCH)
            .map(|since_epoch| since_epoch.as_secs_f64())
            .unwrap_or(0.0);
        self.last_successful_sync.set(seconds);
    }

    /// Unix seconds of the last successful sync pass (0 before the first).
    pub fn last_successful_sync_seconds(&self) -> f64 {
        self.last_successful_sync.get()
    }

    /// Sets the number of records kept in `zone`.
    pub fn set_records(&self, zone: &str, count: u64) {
        self.records
            .get_or_create(&ZoneLabels {
                zone: zone.to_string(),
            })
            .set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// Sets the number of desired records that the last pass could not publish, for one group
    /// of reasons.
    pub fn set_records_blocked(&self, group: BlockedGroup, count: u64) {
        self.records_blocked
            .get_or_create(&ReasonLabels {
                reason: group.as_str().to_string(),
            })
            .set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// The desired records the last pass could not publish, for one group of reasons.
    pub fn records_blocked(&self, group: BlockedGroup) -> i64 {
        self.records_blocked
            .get(&ReasonLabels {
                reason: group.as_str().to_string(),
            })
            .map_or(0, |gauge| gauge.get())
    }

    /// Sets how many TXT records our key could not decrypt at the last sync pass.
    pub fn set_registry_undecryptable(&self, count: u64) {
        self.registry_undecryptable
            .set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// Sets whether this replica may write DNS now.
    pub fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    /// Whether this replica may write DNS now, as last set.
    pub fn leading(&self) -> bool {
        self.leader.get() != 0
    }

    /// Counts one attempt to reload the TLS pair from disk: `reloaded` or `rejected`.
    pub fn record_tls_reload(&self, result: &str) {
        self.tls_reloads
            .get_or_create(&ResultLabels {
                result: result.to_string(),
            })
            .inc();
    }

    /// Current value of the TLS reload counter for `result` (used by tests and logs).
    pub fn tls_reloads(&self, result: &str) -> u64 {
        self.tls_reloads
            .get(&ResultLabels {
                result: result.to_string(),
            })
            .map_or(0, |counter| counter.get())
    }

    /// Current value of the evaluation error counter for `kind`.
    pub fn evaluation_errors(&self, kind: EvaluationErrorKind) -> u64 {
        self.evaluation_errors
            .get(&KindLabels {
                kind: kind.as_str().to_string(),
            })
            .map_or(0, |counter| counter.get())
    }

    /// Number of admission latency observations so far (read from the exposition: the
    /// client's histogram keeps its count to itself, and the request path pays for nothing
    /// more).
    pub fn admission_latency_count(&self) -> u64 {
        self.render()
            .lines()
            .find_map(|line| line.strip_prefix("gateway_dns_admission_duration_seconds_count "))
            .and_then(|count| count.parse().ok())
            .unwrap_or(0)
    }

    /// A connection of `listener` closed to make room at `cap` (a value of [`CAPS`]).
    pub fn record_connection_evicted(&self, listener: &str, cap: &str) {
        self.connections_evicted
            .get_or_create(&CapLabels {
                listener: listener.to_string(),
                cap: cap.to_string(),
            })
            .inc();
    }

    /// A new connection of `listener` turned away at `cap`.
    pub fn record_connection_refused(&self, listener: &str, cap: &str) {
        self.connections_refused
            .get_or_create(&CapLabels {
                listener: listener.to_string(),
                cap: cap.to_string(),
            })
            .inc();
    }

    /// Renders every series in the Prometheus text exposition format (version 0.0.4).
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(8192);
        // Writing into a String cannot fail; the Result only exists for the fmt::Write API.
        let _ = prometheus_text::encode(&mut out, &self.registry);
        out
    }

    /// Renders every series in the OpenMetrics text format (with units and `# EOF`).
    pub fn render_openmetrics(&self) -> String {
        let mut out = String::with_capacity(8192);
        let _ = openmetrics_text::encode(&mut out, &self.registry);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_without_series_are_described() {
        let metrics = Metrics::new();
        for text in [metrics.render(), metrics.render_openmetrics()] {
            for family in [
                "gateway_dns_sync_errors",
                "gateway_dns_namespace_findings",
                "gateway_dns_cache_objects",
                "gateway_dns_absences",
            ] {
                assert!(
                    text.contains(&format!("# HELP {family}")),
                    "{family}: {text}"
                );
                assert!(
                    text.contains(&format!("# TYPE {family}")),
                    "{family}: {text}"
                );
                assert!(
                    !text.lines().any(|l| l.starts_with(&format!("{family}{{"))),
                    "{family} has no series yet"
                );
            }
        }
    }

    #[test]
    fn connections_closed_or_refused_at_a_cap_are_counted_from_zero() {
        let metrics = Metrics::new();
        let text = metrics.render();
        for listener in CAPPED_LISTENERS {
            for cap in CAPS {
                let labels = format!("{{listener=\"{listener}\",cap=\"{cap}\"}}");
                assert!(
                    text.contains(&format!(
                        "gateway_dns_connections_evicted_total{labels} 0\n"
                    )),
                    "{text}"
                );
                assert!(
                    text.contains(&format!(
                        "gateway_dns_connections_refused_total{labels} 0\n"
                    )),
                    "{text}"
                );
            }
        }
        metrics.record_connection_evicted("dns", "per_source");
        metrics.record_connection_refused("webhook", "connections");
        let text = metrics.render();
        assert!(text.contains(
            "gateway_dns_connections_evicted_total{listener=\"dns\",cap=\"per_source\"} 1\n"
        ));
        assert!(text.contains(
            "gateway_dns_connections_refused_total{listener=\"webhook\",cap=\"connections\"} 1\n"
        ));
    }

    #[test]
    fn histogram_buckets_are_cumulative_and_count_matches() {
        let metrics = Metrics::new();
        metrics.observe_admission_latency(Duration::from_micros(50));
        metrics.observe_admission_latency(Duration::from_micros(700));
        metrics.observe_admission_latency(Duration::from_secs(5));
        let text = metrics.render();
        assert!(text.contains("gateway_dns_admission_duration_seconds_bucket{le=\"0.0001\"} 1\n"));
        assert!(text.contains("gateway_dns_admission_duration_seconds_bucket{le=\"0.001\"} 2\n"));
        assert!(text.contains("gateway_dns_admission_duration_seconds_bucket{le=\"2.5\"} 2\n"));
        assert!(text.contains("gateway_dns_admission_duration_seconds_bucket{le=\"+Inf\"} 3\n"));
        assert!(text.contains("gateway_dns_admission_duration_seconds_count 3\n"));
        assert_eq!(metrics.admission_latency_count(), 3);
    }

    #[test]
    fn labeled_series_are_escaped_and_summed() {
        let metrics = Metrics::new();
        metrics.record_decision("HostnameConflict", "deny");
        metrics.record_decision("HostnameConflict", "deny");
        // The engine's findings count into the same series as their names.
        metrics.record_finding(Reason::HostnameConflict, Action::Deny);
        metrics.record_decision("Odd\"Reason\\", "warn");
        metrics.set_cache_objects("HTTPRoute", 20_000);
        let text = metrics.render();
        assert!(text.contains(
            "gateway_dns_admission_decisions_total{reason=\"HostnameConflict\",action=\"deny\"} 3\n"
        ));
        assert!(text.contains(
            "gateway_dns_admission_decisions_total{reason=\"Odd\\\"Reason\\\\\",action=\"warn\"} 1\n"
        ));
        assert!(text.contains("gateway_dns_cache_objects{kind=\"HTTPRoute\"} 20000\n"));
    }

    #[test]
    fn known_label_values_start_at_zero() {
        let metrics = Metrics::new();
        metrics.init_sync("rfc2136", &["example.com".to_string()]);
        let text = metrics.render();
        let mut expected = vec![
            "gateway_dns_admission_requests_total{outcome=\"allowed\"} 0".to_string(),
            "gateway_dns_admission_requests_total{outcome=\"error\"} 0".to_string(),
            "gateway_dns_sync_changes_total{action=\"create\"} 0".to_string(),
            "gateway_dns_sync_changes_total{action=\"delete\"} 0".to_string(),
            "gateway_dns_sync_errors_total{provider=\"rfc2136\",kind=\"list\"} 0".to_string(),
            "gateway_dns_sync_errors_total{provider=\"rfc2136\",kind=\"apply\"} 0".to_string(),
            "gateway_dns_records{zone=\"example.com\"} 0".to_string(),
            "gateway_dns_records_blocked{reason=\"ownership\"} 0".to_string(),
            "gateway_dns_records_blocked{reason=\"zone\"} 0".to_string(),
            "gateway_dns_tls_reloads_total{result=\"rejected\"} 0".to_string(),
            "gateway_dns_admission_evaluation_errors_total{kind=\"timeout\"} 0".to_string(),
            "gateway_dns_leader 0".to_string(),
        ];
        for reason in Reason::ALL {
            for action in Action::ALL {
                expected.push(format!(
                    "gateway_dns_admission_decisions_total{{reason=\"{}\",action=\"{}\"}} 0",
                    reason.as_str(),
                    action.as_str()
                ));
            }
        }
        for line in expected {
            assert!(
                text.lines().any(|l| l == line),
                "{line} missing from\n{text}"
            );
        }
    }

    #[test]
    fn outcomes_counted_on_every_thread_add_up() {
        let metrics = std::sync::Arc::new(Metrics::new());
        let threads: Vec<_> = (0..12)
            .map(|thread| {
                let metrics = metrics.clone();
                std::thread::spawn(move || {
                    for request in 0..100 {
                        let outcome = ["allowed", "denied", "error", "odd"][(thread + request) % 4];
                        metrics.record_admission_request(outcome);
                        metrics.record_decision("HostnameConflict", ["deny", "warn"][request % 2]);
                        metrics.observe_admission_latency(Duration::from_micros(300));
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        let text = metrics.render();
        for outcome in ["allowed", "denied", "error", "odd"] {
            let line =
                format!("gateway_dns_admission_requests_total{{outcome=\"{outcome}\"}} 300\n");
            assert!(text.contains(&line), "{line} in\n{text}");
        }
        for action in ["deny", "warn"] {
            let line = format!(
                "gateway_dns_admission_decisions_total{{reason=\"HostnameConflict\",action=\"{action}\"}} 600\n"
            );
            assert!(text.contains(&line), "{line} in\n{text}");
        }
        assert_eq!(metrics.admission_latency_count(), 1200);
        assert!(
            text.contains("gateway_dns_admission_duration_seconds_bucket{le=\"0.0005\"} 1200\n")
        );
        let sum: f64 = text
            .lines()
            .find_map(|l| l.strip_prefix("gateway_dns_admission_duration_seconds_sum "))
            .and_then(|v| v.parse().ok())
            .unwrap_or(f64::NAN);
        assert!((sum - 0.36).abs() < 1e-9, "{text}");
    }

    #[test]
    fn sync_counters_read_back_by_action_and_provider() {
        let metrics = Metrics::new();
        metrics.add_sync_changes(ChangeAction::Create, 3);
        metrics.add_sync_changes(ChangeAction::Delete, 1);
        metrics.record_sync_error("pdns", SyncErrorKind::List);
        metrics.record_sync_error("pdns", SyncErrorKind::Apply);
        metrics.record_sync_error("pdns", SyncErrorKind::Apply);
        assert_eq!(metrics.sync_changes(ChangeAction::Create), 3);
        assert_eq!(metrics.sync_changes(ChangeAction::Update), 0);
        assert_eq!(metrics.sync_changes_written(), 4);
        assert_eq!(metrics.sync_errors("pdns"), 3);
        assert_eq!(metrics.sync_errors("rfc2136"), 0);
        let text = metrics.render();
        assert!(
            text.contains("gateway_dns_sync_errors_total{provider=\"pdns\",kind=\"apply\"} 2\n")
        );
    }

    #[test]
    fn unlabeled_gauges_render_without_braces() {
        let metrics = Metrics::new();
        metrics.set_last_successful_sync(UNIX_EPOCH + Duration::from_secs(1_700_000_000));
        metrics.set_leader(true);
        let text = metrics.render();
        assert!(
            text.contains("gateway_dns_last_successful_sync_timestamp_seconds 1700000000"),
            "{text}"
        );
        assert!(text.contains("\ngateway_dns_leader 1\n"), "{text}");
    }

    #[test]
    fn build_info_names_the_version_and_revision() {
        let text = Metrics::new().render();
        let line = format!(
            "gateway_dns_build_info{{version=\"{}\",revision=\"{}\"}} 1\n",
            env!("CARGO_PKG_VERSION"),
            REVISION
        );
        assert!(text.contains(&line), "{line} in\n{text}");
        assert!(!REVISION.is_empty());
    }

    #[test]
    fn openmetrics_has_units_and_ends_with_eof() {
        let text = Metrics::new().render_openmetrics();
        assert!(text.contains("# UNIT gateway_dns_admission_duration_seconds seconds\n"));
        assert!(text.contains("# TYPE gateway_dns_admission_requests counter\n"));
        assert!(text.ends_with("# EOF\n"), "{text}");
    }
}
