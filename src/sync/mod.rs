//! The sync loop: desired records (from the caller, e.g. the engine) vs what the provider holds →
//! a plan → the provider. Event-driven plus a periodic resync that repairs drift: the first change
//! after a quiet period is written at once, and a burst of changes is paced into few passes.
//!
//! Safety rules: when the listing fails (providers fail rather than return a partial listing)
//! nothing is written at all, so nothing is deleted; `dry_run` and a closed write gate compute
//! and log the plan but never write. While the removal hold says an absence upstream is not
//! confirmed (a kind the API server stopped serving, say), the plan is made as under
//! `upsert-only`: nothing is deleted. A listing that shows none of our ownership records after
//! one that showed some is listed again before anything is written: a provider that lost its
//! view (a zone reloaded from an old file, an API answering an empty list) would otherwise
//! have records written beside ones it no longer shows.

pub mod desired;
pub(crate) mod plan;

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::FutureExt;
use tokio::sync::{Notify, mpsc, watch};
use tokio::time::{Instant, sleep_until};
use tracing::{debug, info, warn};

use crate::dns::registry::TxtRegistry;
use crate::dns::{self, Changes, Endpoint, Provider};
use crate::metrics::{BlockedGroup, ChangeAction, Metrics, SyncErrorKind};
use crate::model::dns_name::canonical;
use crate::retry::Backoff;
pub use plan::{BlockReason, Blocked, Plan, Policy, Scope, plan, plan_shared, plan_with};

/// Says why DNS deletions must wait, while they must (e.g. the cluster source's unconfirmed
/// absences).
pub type RemovalHold = Arc<dyn Fn() -> Option<String> + Send + Sync>;

/// How soon a pass that held deletions back is followed by another, to write them once the hold
/// ends.
const HOLD_RECHECK: Duration = Duration::from_secs(5);

/// The `absence` label of an empty listing in `gateway_dns_absences_total`.
const OWNED_MISSING: &str = "owned_missing";

/// What the last listing held.
#[derive(Debug, Clone, Copy)]
enum Listed {
    Never,
    Counted(usize),
    /// None of ours after a listing of this many: held until the next listing.
    EmptyAfter(usize),
}

/// Where the desired records come from (the engine, a file, a test closure).
pub trait DesiredSource: Send + Sync {
    fn desired(&self) -> Vec<Endpoint>;

    /// A counter that moves whenever the desired records may have changed; None (the default)
    /// when there is none, and every pass then lists the provider.
    fn generation(&self) -> Option<u64> {
        None
    }
}

impl<F> DesiredSource for F
where
    F: Fn() -> Vec<Endpoint> + Send + Sync,
{
    fn desired(&self) -> Vec<Endpoint> {
        self()
    }
}

#[derive(Debug, Clone)]
pub struct SyncConfig {
    /// The ownership registry: owner id (`--txt-owner-id`) and external-dns's other TXT
    /// registry options (prefix or suffix, wildcard replacement, encryption).
    pub registry: TxtRegistry,
    pub policy: Policy,
    /// The managed zones (lower-case, no trailing dot).
    pub zones: Vec<String>,
    /// `--shared-name`: names shared with owners of other clusters (names, `*.suffix`), of
    /// which this owner writes its own targets only.
    pub shared_names: Vec<String>,
    /// `--adopt-after`: a wanted record held by an owner whose last heartbeat is older than
    /// this is taken over. `None`: never.
    pub adopt_after: Option<Duration>,
    /// Periodic resync (`--interval`).
    pub interval: Duration,
    /// Passes that changes may start back to back after a quiet period, so the first change
    /// is written at once (leading edge) rather than after a quiet time.
    pub burst_passes: u32,
    /// Past that allowance, changes start one pass per this long (the allowance refills at this
    /// rate); changes that arrive meanwhile, or while a pass is in flight, go into that pass, so
    /// a burst of changes still makes few writes.
    pub pass_spacing: Duration,
    pub dry_run: bool,
    /// First retry delay after a provider error; doubles up to `backoff_max`.
    pub backoff_min: Duration,
    pub backoff_max: Duration,
}

impl SyncConfig {
    pub fn new(owner_id: impl Into<String>, zones: Vec<String>) -> Self {
        SyncConfig {
            registry: TxtRegistry::new(owner_id),
            policy: Policy::Sync,
            zones: zones.iter().map(|z| canonical(z).into_owned()).collect(),
            shared_names: Vec::new(),
            adopt_after: None,
            interval: Duration::from_secs(60),
            // An apply is usually two notifications (the object, then its status): applies a
            // few hundred ms apart never wait for the allowance, and a burst's first eight
            // passes cost a few UPDATE messages more than pacing from the start.
            burst_passes: 8,
            pass_spacing: Duration::from_millis(200),
            dry_run: false,
            backoff_min: Duration::from_millis(500),
            backoff_max: Duration::from_secs(60),
        }
    }
}

/// What one pass did.
#[derive(Debug, Clone)]
pub struct PassReport {
    pub plan: Plan,
    /// Changes written (0 in dry-run or when the write gate is closed).
    pub applied: usize,
    /// Why nothing was written although the plan had changes, if so.
    pub withheld: Option<&'static str>,
    /// Why deletions were held back this pass (the removal hold), if they were.
    pub removals_held: Option<String>,
}

/// Outcome of [`Syncer::run_once`].
#[derive(Debug, Clone)]
pub struct OnceReport {
    pub pass: PassReport,
    /// The plan computed from a fresh listing after the pass.
    pub remaining: Plan,
    /// Nothing left to change, no desired record blocked and no deletion held back.
    pub converged: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("listing the records failed, nothing written: {0}")]
    Listing(#[source] dns::Error),
    #[error("the provider could not adjust the desired records: {0}")]
    Adjust(#[source] dns::Error),
    #[error(
        "the provider listed none of our records where it listed {before} before; listing \
         again before writing anything"
    )]
    OwnedRecordsMissing { before: usize },
    #[error("applying {planned} changes failed: {source}")]
    Apply {
        planned: usize,
        #[source]
        source: dns::Error,
    },
}

pub struct Syncer {
    provider: Arc<dyn Provider>,
    source: Arc<dyn DesiredSource>,
    config: SyncConfig,
    /// The process's metrics, shared with the webhook and the sources: each pass records into
    /// them as it goes.
    metrics: Arc<Metrics>,
    write_gate: Option<watch::Receiver<bool>>,
    /// Told the changes of each pass that wrote them (for the Events on the routes); a full
    /// channel drops them rather than hold the loop up.
    applied: Option<mpsc::Sender<Changes>>,
    /// Blocked records already reported, so each is logged once, not every pass.
    reported_blocked: std::sync::Mutex<Vec<Blocked>>,
    /// Undecryptable TXT records already reported.
    last_undecryptable: std::sync::Mutex<Vec<String>>,
    /// The provider's and the source's generations when a pass last found nothing to change;
    /// while both stay there, a pass has nothing to list or plan.
    in_sync_at: std::sync::Mutex<Option<(u64, u64)>>,
    removal_hold: Option<RemovalHold>,
    /// Our ownership records in the last listing; a listing without any after one with some
    /// is confirmed by the next.
    last_listed: std::sync::Mutex<Listed>,
}

impl Syncer {
    pub fn new(
        provider: Arc<dyn Provider>,
        source: Arc<dyn DesiredSource>,
        config: SyncConfig,
        metrics: Arc<Metrics>,
    ) -> Self {
        metrics.init_sync(provider.name(), &config.zones);
        Syncer {
            provider,
            source,
            config,
            metrics,
            write_gate: None,
            applied: None,
            reported_blocked: std::sync::Mutex::new(Vec::new()),
            last_undecryptable: std::sync::Mutex::new(Vec::new()),
            in_sync_at: std::sync::Mutex::new(None),
            removal_hold: None,
            last_listed: std::sync::Mutex::new(Listed::Never),
        }
    }

    /// Deletes nothing while `hold` gives a reason.
    pub fn with_removal_hold(mut self, hold: RemovalHold) -> Self {
        self.removal_hold = Some(hold);
        self
    }

    /// Only write while the gate holds `true` (e.g. "this replica holds the Lease").
    pub fn with_write_gate(mut self, gate: watch::Receiver<bool>) -> Self {
        self.write_gate = Some(gate);
        self
    }

    /// Sends the changes of every pass that wrote some to `observer`.
    pub fn with_applied_observer(mut self, observer: mpsc::Sender<Changes>) -> Self {
        self.applied = Some(observer);
        self
    }

    pub fn config(&self) -> &SyncConfig {
        &self.config
    }

    fn may_write(&self) -> bool {
        self.write_gate.as_ref().is_none_or(|gate| *gate.borrow())
    }

    /// The plan, and why deletions were held back from it if they were.
    async fn compute(&self) -> Result<(Plan, Option<String>), Error> {
        // Desired first: the engine's outcome it is read from is let go before the listing and
        // the plan are held, so a pass never holds all three.
        let desired = self
            .provider
            .adjust(self.source.desired())
            .await
            .map_err(Error::Adjust)?;
        let current = self.provider.records().await.map_err(Error::Listing)?;
        let held = self.removal_hold.as_ref().and_then(|hold| hold());
        let policy = match (&held, self.config.policy) {
            (Some(_), Policy::Sync) => Policy::UpsertOnly,
            (_, policy) => policy,
        };
        let planned = plan::Planned::new(
            &desired,
            &current,
            &self.config.registry,
            policy,
            &self.config.zones,
            &plan::Scope {
                shared_names: self.config.shared_names.clone(),
                adoptable: self.adoptable(&current),
            },
        );
        self.confirm_listing(planned.owned())?;
        self.record_gauges(&desired, planned.blocked());
        // The records to create move into the plan: a first pass holds them once.
        let plan = planned.taking(desired);
        self.report_undecryptable(&plan.undecryptable);
        let held = held.filter(|_| policy != self.config.policy && plan.held_by_policy > 0);
        Ok((plan, held))
    }

    /// The owners whose heartbeats in `listing` are older than `--adopt-after`.
    fn adoptable(&self, listing: &[Endpoint]) -> Vec<String> {
        use dns::registry::heartbeat::{gone_silent, unix_now};
        self.config.adopt_after.map_or_else(Vec::new, |after| {
            gone_silent(listing, after, unix_now(), &self.config.registry.owner_id)
        })
    }

    /// A listing without any record of ours after one with some is taken only when the next
    /// listing agrees.
    fn confirm_listing(&self, listed: usize) -> Result<(), Error> {
        let mut last = self.last_listed();
        let provider = self.provider.name();
        let previous = std::mem::replace(&mut *last, Listed::Counted(listed));
        match previous {
            Listed::Counted(before) if listed == 0 && before > 0 => {
                *last = Listed::EmptyAfter(before);
                self.metrics.record_absence(provider, OWNED_MISSING, "held");
                Err(Error::OwnedRecordsMissing { before })
            }
            Listed::EmptyAfter(before) => {
                let outcome = if listed == 0 {
                    warn!(
                        provider,
                        before,
                        "the provider listed no record twice in a row; taking that as the zone's state"
                    );
                    "confirmed"
                } else {
                    "returned"
                };
                self.metrics
                    .record_absence(provider, OWNED_MISSING, outcome);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// TXT records our key does not open are not ours: the metric counts them, and the log names
    /// them whenever the set changes (not at every pass), never showing the key.
    fn report_undecryptable(&self, names: &[String]) {
        self.metrics.set_registry_undecryptable(names.len() as u64);
        let mut last = self
            .last_undecryptable
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if *last != names {
            if !names.is_empty() {
                tracing::warn!(
                    records = ?names,
                    "TXT records look like encrypted ownership records but do not decrypt with \
                     the configured --txt-encrypt-aes-key; they are treated as not ours, and the \
                     records they would cover are left alone"
                );
            }
            *last = names.to_vec();
        }
    }

    /// The records kept per zone (desired and not blocked) and the blocked ones by group.
    fn record_gauges(&self, desired: &[Endpoint], blocked: &[Blocked]) {
        let blocked_records: std::collections::HashSet<(std::borrow::Cow<'_, str>, _)> = blocked
            .iter()
            .map(|b| (canonical(&b.dns_name), b.record_type))
            .collect();
        let mut per_zone: std::collections::BTreeMap<&str, u64> = self
            .config
            .zones
            .iter()
            .map(|zone| (zone.as_str(), 0))
            .collect();
        for endpoint in desired {
            let name = canonical(&endpoint.dns_name);
            if blocked_records.contains(&(name.clone(), endpoint.record_type)) {
                continue;
            }
            if let Some(zone) = dns::zone_of(&name, &self.config.zones) {
                *per_zone.entry(zone).or_default() += 1;
            }
        }
        for (zone, count) in per_zone {
            self.metrics.set_records(zone, count);
        }
        for group in BlockedGroup::ALL {
            let count = blocked.iter().filter(|b| b.reason.group() == group).count();
            self.metrics.set_records_blocked(group, count as u64);
        }
    }

    /// One pass: list, plan, apply (unless dry-run or the write gate is closed).
    pub async fn sync_pass(&self) -> Result<PassReport, Error> {
        self.metrics.record_sync_pass();
        let result = self.pass_inner().await;
        match &result {
            Ok(_) => self.metrics.set_last_successful_sync(SystemTime::now()),
            Err(error) => {
                let kind = match error {
                    Error::Listing(_) | Error::OwnedRecordsMissing { .. } => SyncErrorKind::List,
                    Error::Adjust(_) => SyncErrorKind::Adjust,
                    Error::Apply { .. } => SyncErrorKind::Apply,
                };
                self.metrics.record_sync_error(self.provider.name(), kind);
            }
        }
        result
    }

    /// Both generations, read before the listing and the desired records they stand for (a
    /// change after this read moves them, and the next pass lists again).
    fn generations(&self) -> Option<(u64, u64)> {
        self.provider.generation().zip(self.source.generation())
    }

    fn last_listed(&self) -> std::sync::MutexGuard<'_, Listed> {
        self.last_listed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn in_sync_at(&self) -> std::sync::MutexGuard<'_, Option<(u64, u64)>> {
        self.in_sync_at
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    async fn pass_inner(&self) -> Result<PassReport, Error> {
        let generations = self.generations();
        if generations.is_some() && *self.in_sync_at() == generations {
            debug!("nothing changed since DNS was last in sync; nothing to list");
            return Ok(PassReport {
                plan: Plan::default(),
                applied: 0,
                withheld: None,
                removals_held: None,
            });
        }
        let (plan, removals_held) = self.compute().await?;
        if let Some(why) = &removals_held {
            info!(deletions = plan.held_by_policy, %why, "DNS deletions held back until the absence is confirmed");
        }
        self.report_blocked(&plan.blocked);
        if plan.is_empty() {
            debug!("DNS in sync, nothing to change");
            if removals_held.is_none() {
                *self.in_sync_at() = generations;
            }
            return Ok(PassReport {
                plan,
                applied: 0,
                withheld: None,
                removals_held,
            });
        }
        log_plan(&plan);
        let withheld = if self.config.dry_run {
            Some("dry run")
        } else if !self.may_write() {
            // No Lease, or a cluster view not in sync (the write gate says which).
            Some("not the writer")
        } else {
            None
        };
        if let Some(why) = withheld {
            info!(
                changes = plan.changes.len(),
                "{why}: DNS changes not written"
            );
            return Ok(PassReport {
                plan,
                applied: 0,
                withheld,
                removals_held,
            });
        }
        let planned = plan.changes.len();
        let whole;
        let changes = if plan.changes.shared.is_empty() || self.provider.edits_records() {
            &plan.changes
        } else {
            // This provider replaces whole RRsets: the shared edits become such, over the
            // listing they were planned against.
            whole = plan.changes.clone().whole_rrsets();
            &whole
        };
        self.provider
            .apply(changes)
            .await
            .map_err(|source| Error::Apply { planned, source })?;
        let releases_shared = changes.shared.iter().any(|edit| edit.txt_add.is_none());
        if !plan.changes.delete.is_empty() || releases_shared {
            // Records of ours we deleted ourselves are no sign of a provider that lost its view.
            *self.last_listed() = Listed::Never;
        }
        let changes = &plan.changes;
        for (action, count) in [
            (ChangeAction::Create, changes.create.len()),
            (
                ChangeAction::Update,
                changes.update.len() + changes.shared.len(),
            ),
            (ChangeAction::Delete, changes.delete.len()),
        ] {
            self.metrics.add_sync_changes(action, count as u64);
        }
        info!(changes = planned, "DNS changes applied");
        if let Some(observer) = &self.applied {
            let _ = observer.try_send(plan.changes.clone());
        }
        Ok(PassReport {
            plan,
            applied: planned,
            withheld: None,
            removals_held,
        })
    }

    fn report_blocked(&self, blocked: &[Blocked]) {
        let Ok(mut reported) = self.reported_blocked.lock() else {
            return;
        };
        for item in blocked.iter().filter(|b| !reported.contains(b)) {
            warn!(record = %item, "DNS record not published");
        }
        *reported = blocked.to_vec();
    }

    /// The `--once` mode: one pass, then a fresh listing to tell whether it converged.
    pub async fn run_once(&self) -> Result<OnceReport, Error> {
        self.provider.invalidate_cache();
        let pass = self.sync_pass().await?;
        let (remaining, held) = self.compute().await?;
        let converged = remaining.is_empty() && remaining.blocked.is_empty() && held.is_none();
        Ok(OnceReport {
            pass,
            remaining,
            converged,
        })
    }

    /// Run until `shutdown` completes: a pass after each notification on `changes` (at once
    /// while the burst allowance lasts, then paced by `pass_spacing`) and every `interval`;
    /// provider errors are retried with exponential backoff and jitter.
    ///
    /// Signal changes with `changes.notify_one()` so a notification sent while a pass runs is
    /// kept for the next one.
    pub async fn run(&self, changes: Arc<Notify>, shutdown: impl Future<Output = ()>) {
        tokio::pin!(shutdown);
        let mut backoff = Backoff::new(self.config.backoff_min, self.config.backoff_max);
        let mut pacer = Pacer::new(self.config.burst_passes, self.config.pass_spacing);
        // First pass right away.
        let mut next_pass = Instant::now();
        let mut gate = self.write_gate.clone();
        // A change was notified and waits for the allowance.
        let mut pending = false;
        loop {
            let paced_start = pacer.ready_at(Instant::now());
            tokio::select! {
                _ = &mut shutdown => return,
                // Becoming the writer (e.g. the Lease was won): catch up at once.
                _ = gate_opened(&mut gate), if backoff.failures() == 0 => {}
                _ = sleep_until(next_pass) => {
                    // Periodic resync (or retry): read everything from the server.
                    self.provider.invalidate_cache();
                }
                _ = changes.notified(), if backoff.failures() == 0 && !pending => {
                    pending = true;
                    continue;
                }
                _ = sleep_until(paced_start), if backoff.failures() == 0 && pending => {}
            }
            pending = false;
            // Whatever was notified up to here is read by this pass: absorb the stored permit so
            // it does not cause a second one. Changes from now on make a new permit.
            let _ = changes.notified().now_or_never();
            pacer.take(Instant::now());
            match self.sync_pass().await {
                Ok(report) => {
                    backoff.reset();
                    let wait = if report.removals_held.is_some() {
                        self.config.interval.min(HOLD_RECHECK)
                    } else {
                        self.config.interval
                    };
                    next_pass = Instant::now() + wait;
                }
                Err(err) => {
                    let delay = backoff.next_delay();
                    warn!(error = %err, retry_in = ?delay, "DNS sync failed");
                    next_pass = Instant::now() + delay;
                }
            }
        }
    }
}

/// The burst allowance of change-driven passes: a token bucket of `burst` passes refilled one
/// per `spacing`. Every pass takes a token (a resync costs the provider as much as a change).
#[derive(Debug, Clone)]
struct Pacer {
    tokens: f64,
    burst: f64,
    spacing: Duration,
    at: Instant,
}

impl Pacer {
    fn new(burst: u32, spacing: Duration) -> Pacer {
        let burst = f64::from(burst.max(1));
        Pacer {
            tokens: burst,
            burst,
            spacing,
            at: Instant::now(),
        }
    }

    fn refill(&mut self, now: Instant) {
        if self.spacing.is_zero() {
            self.tokens = self.burst;
        } else {
            let earned =
                now.saturating_duration_since(self.at).as_secs_f64() / self.spacing.as_secs_f64();
            self.tokens = (self.tokens + earned).min(self.burst);
        }
        self.at = self.at.max(now);
    }

    /// When a change-driven pass may start: `now` while a token is left.
    fn ready_at(&mut self, now: Instant) -> Instant {
        self.refill(now);
        if self.tokens >= 1.0 {
            now
        } else {
            now + self.spacing.mul_f64(1.0 - self.tokens)
        }
    }

    fn take(&mut self, now: Instant) {
        self.refill(now);
        self.tokens = (self.tokens - 1.0).max(0.0);
    }
}

/// Completes when the gate turns to `true`; never when there is no gate or its sender is gone.
async fn gate_opened(gate: &mut Option<watch::Receiver<bool>>) {
    let Some(receiver) = gate else {
        return std::future::pending().await;
    };
    loop {
        if receiver.changed().await.is_err() {
            return std::future::pending().await;
        }
        if *receiver.borrow_and_update() {
            return;
        }
    }
}

fn log_plan(plan: &Plan) {
    for endpoint in &plan.changes.delete {
        info!(record = %endpoint, "DNS delete");
    }
    for endpoint in &plan.changes.update {
        info!(record = %endpoint, "DNS update");
    }
    for endpoint in &plan.changes.create {
        info!(record = %endpoint, "DNS create");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_passes_after_a_quiet_period_start_at_once_then_one_per_spacing() {
        let spacing = Duration::from_millis(200);
        let mut pacer = Pacer::new(2, spacing);
        let start = pacer.at;
        for _ in 0..2 {
            assert_eq!(
                pacer.ready_at(start),
                start,
                "within the allowance: at once"
            );
            pacer.take(start);
        }
        // Spent: the next waits one spacing, and half of one once half has passed.
        assert_eq!(pacer.ready_at(start), start + spacing);
        let half = start + spacing / 2;
        assert_eq!(pacer.ready_at(half), start + spacing);
        pacer.take(start + spacing);
        assert_eq!(pacer.ready_at(start + spacing), start + spacing * 2);
        // A quiet period refills the allowance, never beyond it.
        let quiet = start + spacing * 100;
        for _ in 0..2 {
            assert_eq!(pacer.ready_at(quiet), quiet);
            pacer.take(quiet);
        }
        assert!(pacer.ready_at(quiet) > quiet);
    }

    #[test]
    fn no_spacing_never_holds_a_pass_back() {
        let mut pacer = Pacer::new(1, Duration::ZERO);
        let now = pacer.at;
        for _ in 0..10 {
            assert_eq!(pacer.ready_at(now), now);
            pacer.take(now);
        }
    }
}
