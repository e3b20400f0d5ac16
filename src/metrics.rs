//! A small Prometheus text-format registry for gateway-dns.
//!
//! Hand-rolled on purpose: the set of series is fixed and small, and the exposition format is
//! simple. Every recorder is cheap and thread-safe; share one `Arc<Metrics>` across the webhook,
//! the sync loop and the sources.

use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Upper bounds (seconds) of the admission latency histogram buckets.
const LATENCY_BUCKETS_SECONDS: [f64; 14] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

/// Content type of the Prometheus text exposition format served at `/metrics`.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Errors of the metrics module (rendering is infallible today; kept for API stability).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("formatting metrics failed")]
    Format(#[from] std::fmt::Error),
}

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
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Timeout => "timeout",
            Self::Panic => "panic",
            Self::Overloaded => "overloaded",
            Self::Unreadable => "unreadable",
        }
    }
}

/// All gateway-dns metrics. Create one with [`Metrics::new`] and share it in an `Arc`.
#[derive(Debug)]
pub struct Metrics {
    admission_latency: Histogram,
    admission_requests: KnownCounters,
    admission_decisions: KnownCounters,
    evaluation_errors: LabeledCounters,
    cache_objects: LabeledGauges,
    sync_passes: LabeledCounters,
    sync_changes: LabeledCounters,
    sync_errors: LabeledCounters,
    last_successful_sync: LabeledGauges,
    source_staleness: LabeledGauges,
    tls_reloads: LabeledCounters,
}

impl Default for Metrics {
    fn default() -> Self {
        use crate::engine::{Action, Reason};
        let reasons = Reason::ALL.map(Reason::as_str);
        let actions = Action::ALL.map(Action::as_str);
        Self {
            admission_latency: Histogram::default(),
            admission_requests: KnownCounters::new(vec![OUTCOMES.to_vec()]),
            admission_decisions: KnownCounters::new(vec![reasons.to_vec(), actions.to_vec()]),
            evaluation_errors: LabeledCounters::default(),
            cache_objects: LabeledGauges::default(),
            sync_passes: LabeledCounters::default(),
            sync_changes: LabeledCounters::default(),
            sync_errors: LabeledCounters::default(),
            last_successful_sync: LabeledGauges::default(),
            source_staleness: LabeledGauges::default(),
            tls_reloads: LabeledCounters::default(),
        }
    }
}

impl Metrics {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records the time spent answering one `/validate` request (decode to response).
    pub fn observe_admission_latency(&self, elapsed: Duration) {
        self.admission_latency.observe(elapsed);
    }

    /// Counts one answered AdmissionReview by outcome: `allowed`, `denied` or `error`
    /// (an HTTP error status for bad input).
    pub fn record_admission_request(&self, outcome: &str) {
        self.admission_requests.inc(&[outcome]);
    }

    /// Counts one finding reported to the user, by reason (e.g. `HostnameConflict`) and action
    /// (`deny`, `warn`, `ignore`, or the mode-adjusted action). Called by the admission handler.
    pub fn record_decision(&self, reason: &str, action: &str) {
        self.admission_decisions.inc(&[reason, action]);
    }

    /// Counts one evaluation that did not complete normally.
    pub fn record_evaluation_error(&self, kind: EvaluationErrorKind) {
        self.evaluation_errors.inc(&[kind.as_str()], 1);
    }

    /// Sets the number of objects of `kind` (e.g. `HTTPRoute`) held in the in-memory cache.
    pub fn set_cache_objects(&self, kind: &str, count: u64) {
        self.cache_objects.set(&[kind], count as f64);
    }

    /// Counts one sync pass attempted (listing, planning and, unless withheld, applying).
    pub fn record_sync_pass(&self) {
        self.sync_passes.inc(&[], 1);
    }

    /// Sync passes attempted so far.
    pub fn sync_passes(&self) -> u64 {
        self.sync_passes.get(&[])
    }

    /// Counts DNS record changes applied by the sync loop, by action (`applied`).
    pub fn add_sync_changes(&self, action: &str, count: u64) {
        self.sync_changes.inc(&[action], count);
    }

    /// DNS record changes counted under `action` so far.
    pub fn sync_changes(&self, action: &str) -> u64 {
        self.sync_changes.get(&[action])
    }

    /// Counts one failed sync pass (or failed provider call), by provider name.
    pub fn record_sync_error(&self, provider: &str) {
        self.sync_errors.inc(&[provider], 1);
    }

    /// Failed sync passes counted under `provider` so far.
    pub fn sync_errors(&self, provider: &str) -> u64 {
        self.sync_errors.get(&[provider])
    }

    /// Records the wall-clock time of the last sync pass that converged.
    pub fn set_last_successful_sync(&self, at: SystemTime) {
        let seconds = at
            .duration_since(UNIX_EPOCH)
            .map(|since_epoch| since_epoch.as_secs_f64())
            .unwrap_or(0.0);
        self.last_successful_sync.set(&[], seconds);
    }

    /// Unix seconds of the last successful sync pass (0 before the first).
    pub fn last_successful_sync_seconds(&self) -> f64 {
        self.last_successful_sync.get(&[])
    }

    /// Records how long ago `source` (e.g. `kube`, `files`) last delivered a consistent view.
    pub fn set_source_staleness(&self, source: &str, staleness: Duration) {
        self.source_staleness
            .set(&[source], staleness.as_secs_f64());
    }

    /// Counts one attempt to reload the TLS pair from disk: `reloaded` or `rejected`.
    pub fn record_tls_reload(&self, result: &str) {
        self.tls_reloads.inc(&[result], 1);
    }

    /// Current value of the TLS reload counter for `result` (used by tests and logs).
    pub fn tls_reloads(&self, result: &str) -> u64 {
        self.tls_reloads.get(&[result])
    }

    /// Current value of the evaluation error counter for `kind`.
    pub fn evaluation_errors(&self, kind: EvaluationErrorKind) -> u64 {
        self.evaluation_errors.get(&[kind.as_str()])
    }

    /// Number of admission latency observations so far.
    pub fn admission_latency_count(&self) -> u64 {
        self.admission_latency.count()
    }

    /// Renders every series in the Prometheus text exposition format (version 0.0.4).
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(4096);
        // Writing into a String cannot fail; the Result only exists for the fmt::Write API.
        let _ = self.render_into(&mut out);
        out
    }

    fn render_into(&self, out: &mut String) -> Result<(), Error> {
        self.admission_latency.render(
            out,
            "gateway_dns_admission_duration_seconds",
            "Time to answer one AdmissionReview, from request to response.",
        )?;
        self.admission_requests.render(
            out,
            "gateway_dns_admission_requests_total",
            "AdmissionReview requests answered, by outcome.",
            &["outcome"],
        )?;
        self.admission_decisions.render(
            out,
            "gateway_dns_admission_decisions_total",
            "Findings reported by the admission webhook, by reason and action.",
            &["reason", "action"],
        )?;
        self.evaluation_errors.render(
            out,
            "gateway_dns_admission_evaluation_errors_total",
            "Evaluations that did not complete (the request was allowed), by kind.",
            &["kind"],
        )?;
        self.cache_objects.render(
            out,
            "gateway_dns_cache_objects",
            "Objects held in the in-memory cache, by kind.",
            &["kind"],
        )?;
        self.sync_passes.render(
            out,
            "gateway_dns_sync_passes_total",
            "Sync passes attempted (list, plan, apply).",
            &[],
        )?;
        self.sync_changes.render(
            out,
            "gateway_dns_sync_changes_total",
            "DNS record changes applied by the sync loop, by action.",
            &["action"],
        )?;
        self.sync_errors.render(
            out,
            "gateway_dns_sync_errors_total",
            "Failed sync passes, by provider.",
            &["provider"],
        )?;
        self.last_successful_sync.render(
            out,
            "gateway_dns_last_successful_sync_timestamp_seconds",
            "Unix time of the last sync pass that converged.",
            &[],
        )?;
        self.source_staleness.render(
            out,
            "gateway_dns_source_staleness_seconds",
            "Seconds since the source last delivered a consistent view.",
            &["source"],
        )?;
        self.tls_reloads.render(
            out,
            "gateway_dns_tls_reloads_total",
            "Attempts to load a changed TLS certificate pair from disk, by result.",
            &["result"],
        )?;
        Ok(())
    }
}

/// Shards of a per-request series: every `/validate` request updates the latency histogram and
/// the outcome counter, and one shared cache line would move between cores on each of them.
const SHARDS: usize = 8;

/// This thread's shard: threads take shards in turn, so a runtime's workers rarely share one.
fn shard_index() -> usize {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    thread_local! {
        static SHARD: usize = (NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS as u64) as usize;
    }
    SHARD.with(|shard| *shard)
}

/// One shard of the latency histogram: its buckets and sum, on cache lines of its own.
#[derive(Debug)]
#[repr(align(128))]
struct HistogramShard {
    /// Non-cumulative counts per bucket; the last slot is `+Inf`.
    buckets: [AtomicU64; LATENCY_BUCKETS_SECONDS.len() + 1],
    sum_nanos: AtomicU64,
}

impl Default for HistogramShard {
    fn default() -> Self {
        Self {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            sum_nanos: AtomicU64::new(0),
        }
    }
}

/// A latency histogram with fixed buckets, updated without locks; the count is the bucket total.
#[derive(Debug, Default)]
struct Histogram {
    shards: [HistogramShard; SHARDS],
}

impl Histogram {
    fn observe(&self, elapsed: Duration) {
        let seconds = elapsed.as_secs_f64();
        let slot = LATENCY_BUCKETS_SECONDS
            .iter()
            .position(|upper| seconds <= *upper)
            .unwrap_or(LATENCY_BUCKETS_SECONDS.len());
        let shard = &self.shards[shard_index()];
        shard.buckets[slot].fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        shard.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    fn bucket(&self, slot: usize) -> u64 {
        self.shards
            .iter()
            .map(|shard| shard.buckets[slot].load(Ordering::Relaxed))
            .sum()
    }

    fn count(&self) -> u64 {
        (0..=LATENCY_BUCKETS_SECONDS.len())
            .map(|slot| self.bucket(slot))
            .sum()
    }

    fn render(&self, out: &mut String, name: &str, help: &str) -> Result<(), Error> {
        writeln!(out, "# HELP {name} {help}")?;
        writeln!(out, "# TYPE {name} histogram")?;
        let mut cumulative = 0u64;
        for (slot, upper) in LATENCY_BUCKETS_SECONDS.iter().enumerate() {
            cumulative += self.bucket(slot);
            writeln!(out, "{name}_bucket{{le=\"{upper}\"}} {cumulative}")?;
        }
        cumulative += self.bucket(LATENCY_BUCKETS_SECONDS.len());
        writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {cumulative}")?;
        let sum_nanos: u64 = self
            .shards
            .iter()
            .map(|shard| shard.sum_nanos.load(Ordering::Relaxed))
            .sum();
        let sum_seconds = sum_nanos as f64 / 1e9;
        writeln!(out, "{name}_sum {sum_seconds}")?;
        // Use the bucket total so that `_count` always equals the `+Inf` bucket.
        writeln!(out, "{name}_count {cumulative}")?;
        Ok(())
    }
}

/// The outcomes every `/validate` answer is counted under.
const OUTCOMES: [&str; 3] = ["allowed", "denied", "error"];

/// Counters for series whose label values are known up front (every combination of the known
/// values of each label has a slot): lock-free and sharded per thread, since requests update
/// them on every answer. Any other label values go to labelled series.
#[derive(Debug)]
struct KnownCounters {
    /// The known values of each label, in label order.
    dimensions: Vec<Vec<&'static str>>,
    /// Per shard, one counter per combination; each shard padded to whole cache lines.
    shards: Vec<Box<[AtomicU64]>>,
    others: LabeledCounters,
}

/// Counters per cache line pair (128 bytes).
const COUNTERS_PER_LINE_PAIR: usize = 16;

impl KnownCounters {
    fn new(dimensions: Vec<Vec<&'static str>>) -> KnownCounters {
        let slots: usize = dimensions.iter().map(Vec::len).product();
        // Rounded up, plus a spare pair of lines, so no two shards share a line.
        let padded = slots.div_ceil(COUNTERS_PER_LINE_PAIR) * COUNTERS_PER_LINE_PAIR
            + COUNTERS_PER_LINE_PAIR;
        let shards = (0..SHARDS)
            .map(|_| (0..padded).map(|_| AtomicU64::new(0)).collect())
            .collect();
        KnownCounters {
            dimensions,
            shards,
            others: LabeledCounters::default(),
        }
    }

    fn slot(&self, labels: &[&str]) -> Option<usize> {
        if labels.len() != self.dimensions.len() {
            return None;
        }
        let mut slot = 0;
        for (value, known) in labels.iter().zip(&self.dimensions) {
            slot = slot * known.len() + known.iter().position(|k| k == value)?;
        }
        Some(slot)
    }

    fn inc(&self, labels: &[&str]) {
        match self.slot(labels) {
            Some(slot) => {
                self.shards[shard_index()][slot].fetch_add(1, Ordering::Relaxed);
            }
            None => self.others.inc(labels, 1),
        }
    }

    fn render(
        &self,
        out: &mut String,
        name: &str,
        help: &str,
        label_names: &[&str],
    ) -> Result<(), Error> {
        let slots: usize = self.dimensions.iter().map(Vec::len).product();
        let mut series: Vec<(Vec<String>, u64)> = Vec::new();
        for slot in 0..slots {
            let total: u64 = self
                .shards
                .iter()
                .map(|shard| shard[slot].load(Ordering::Relaxed))
                .sum();
            if total == 0 {
                continue;
            }
            // The slot's label values, from its mixed-radix digits.
            let mut rest = slot;
            let mut values = vec![String::new(); self.dimensions.len()];
            for (value, known) in values.iter_mut().zip(&self.dimensions).rev() {
                *value = known[rest % known.len()].to_string();
                rest /= known.len();
            }
            series.push((values, total));
        }
        series.extend(self.others.snapshot());
        series.sort();
        render_series(out, name, help, label_names, &series)
    }
}

/// A metric value kind: what `# TYPE` says of it.
trait SeriesValue: Copy + Default + std::fmt::Display {
    const TYPE: &'static str;
}

impl SeriesValue for u64 {
    const TYPE: &'static str = "counter";
}

impl SeriesValue for f64 {
    const TYPE: &'static str = "gauge";
}

/// Series keyed by label values (in the order of the label names given at render time), kept
/// sorted so the request path finds its series by binary search, without allocating.
#[derive(Debug, Default)]
struct Labeled<V> {
    values: Mutex<Vec<(Vec<String>, V)>>,
}

type LabeledCounters = Labeled<u64>;
type LabeledGauges = Labeled<f64>;

fn compare_labels(key: &[String], labels: &[&str]) -> std::cmp::Ordering {
    key.iter().map(String::as_str).cmp(labels.iter().copied())
}

impl<V: SeriesValue> Labeled<V> {
    /// Updates one series; only a new series allocates its key.
    fn update(&self, labels: &[&str], change: impl FnOnce(&mut V)) {
        let mut values = self
            .values
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        match values.binary_search_by(|(key, _)| compare_labels(key, labels)) {
            Ok(found) => change(&mut values[found].1),
            Err(position) => {
                let mut value = V::default();
                change(&mut value);
                let key = labels.iter().map(|label| label.to_string()).collect();
                values.insert(position, (key, value));
            }
        }
    }

    fn get(&self, labels: &[&str]) -> V {
        let values = self
            .values
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        values
            .binary_search_by(|(key, _)| compare_labels(key, labels))
            .map_or_else(|_| V::default(), |found| values[found].1)
    }

    fn snapshot(&self) -> Vec<(Vec<String>, V)> {
        self.values
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    fn render(
        &self,
        out: &mut String,
        name: &str,
        help: &str,
        label_names: &[&str],
    ) -> Result<(), Error> {
        render_series(out, name, help, label_names, &self.snapshot())
    }
}

/// Writes one metric family: its help and type lines, then one line per series.
fn render_series<V: SeriesValue>(
    out: &mut String,
    name: &str,
    help: &str,
    label_names: &[&str],
    series: &[(Vec<String>, V)],
) -> Result<(), Error> {
    writeln!(out, "# HELP {name} {help}")?;
    writeln!(out, "# TYPE {name} {}", V::TYPE)?;
    for (label_values, value) in series {
        writeln!(
            out,
            "{name}{} {value}",
            label_set(label_names, label_values)
        )?;
    }
    Ok(())
}

impl Labeled<u64> {
    fn inc(&self, labels: &[&str], by: u64) {
        self.update(labels, |value| *value += by);
    }
}

impl Labeled<f64> {
    fn set(&self, labels: &[&str], to: f64) {
        self.update(labels, |value| *value = to);
    }
}

/// Formats `{a="x",b="y"}` (or nothing when there are no labels), escaping values as the
/// exposition format requires.
fn label_set(names: &[&str], values: &[String]) -> String {
    if names.is_empty() {
        return String::new();
    }
    let pairs: Vec<String> = names
        .iter()
        .zip(values)
        .map(|(name, value)| format!("{name}=\"{}\"", escape_label_value(value)))
        .collect();
    format!("{{{}}}", pairs.join(","))
}

fn escape_label_value(value: &str) -> String {
    let mut escaped = String::with_capacity(value.len());
    for character in value.chars() {
        match character {
            '\\' => escaped.push_str("\\\\"),
            '"' => escaped.push_str("\\\""),
            '\n' => escaped.push_str("\\n"),
            other => escaped.push(other),
        }
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }

    #[test]
    fn labeled_series_are_escaped_and_summed() {
        let metrics = Metrics::new();
        metrics.record_decision("HostnameConflict", "deny");
        metrics.record_decision("HostnameConflict", "deny");
        metrics.record_decision("Odd\"Reason\\", "warn");
        metrics.set_cache_objects("HTTPRoute", 20_000);
        let text = metrics.render();
        assert!(text.contains(
            "gateway_dns_admission_decisions_total{reason=\"HostnameConflict\",action=\"deny\"} 2\n"
        ));
        assert!(text.contains(
            "gateway_dns_admission_decisions_total{reason=\"Odd\\\"Reason\\\\\",action=\"warn\"} 1\n"
        ));
        assert!(text.contains("gateway_dns_cache_objects{kind=\"HTTPRoute\"} 20000\n"));
    }

    #[test]
    fn many_series_in_any_order_each_keep_their_own_count() {
        let metrics = Metrics::new();
        let reasons = ["Zeta", "Alpha", "Mid", "Alpha2", "B"];
        let actions = ["warn", "deny", "audit"];
        for round in 1..=3u64 {
            for (r, reason) in reasons.iter().enumerate() {
                for (a, action) in actions.iter().enumerate() {
                    if (r + a) as u64 % 3 < round {
                        metrics.record_decision(reason, action);
                    }
                }
            }
        }
        let text = metrics.render();
        let mut seen = Vec::new();
        for (r, reason) in reasons.iter().enumerate() {
            for (a, action) in actions.iter().enumerate() {
                let expected = 3 - (r + a) as u64 % 3;
                let line = format!(
                    "gateway_dns_admission_decisions_total{{reason=\"{reason}\",action=\"{action}\"}} {expected}\n"
                );
                assert!(text.contains(&line), "{line} in\n{text}");
                seen.push((text.find(&line), reason, action));
            }
        }
        // Rendered in label order, whatever the order of first use.
        seen.sort();
        let order: Vec<_> = seen.iter().map(|(_, r, a)| (**r, **a)).collect();
        let mut sorted = order.clone();
        sorted.sort();
        assert_eq!(order, sorted);
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
        assert!(
            text.contains("gateway_dns_admission_duration_seconds_sum 0.36\n"),
            "{text}"
        );
    }

    #[test]
    fn unlabeled_gauge_renders_without_braces() {
        let metrics = Metrics::new();
        metrics.set_last_successful_sync(UNIX_EPOCH + Duration::from_secs(1_700_000_000));
        let text = metrics.render();
        assert!(text.contains("gateway_dns_last_successful_sync_timestamp_seconds 1700000000\n"));
    }
}
