//! What the parts of the cluster source share: the configuration, each kind's status, the
//! absences held, and the readiness they add up to.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio::task::AbortHandle;
use tracing::info;

use crate::index::Index;
use crate::model::ObjectKind;

#[derive(Clone, Debug)]
pub struct Config {
    /// How often discovery re-checks which kinds are served (CRDs added, removed, upgraded).
    pub discovery_interval: Duration,
    /// Objects per list page (initial sync and relists) when lists are paged. The default,
    /// 1,000: the API server's cost per request made a first list of 10,000 routes take 0.86 s in
    /// pages of 250 and 0.71 s in pages of 1,000 (medians of five); a page's text (a kilobyte
    /// or a few a route) is held about twice while it is read.
    pub page_size: u32,
    /// List with streaming lists (WatchList) where the server offers them; in pages otherwise,
    /// and always when false.
    pub streaming_lists: bool,
    /// First delay after a watch error; doubles up to `backoff_max`, with jitter.
    pub backoff_min: Duration,
    pub backoff_max: Duration,
    /// A kind whose watch failed and has shown no progress for this long is relisted, which
    /// proves (or disproves) that it is back in sync even when nothing changes in the cluster.
    pub recheck_after: Duration,
    /// How long an absence (a kind discovery stopped serving, a relist that came back empty)
    /// must last before objects leave the index for it (`--absence-grace`).
    pub absence_grace: Duration,
    /// Discovery rounds, each with the API server ready, that must agree a kind is not served.
    pub absence_rounds: u32,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            discovery_interval: Duration::from_secs(60),
            page_size: 1000,
            streaming_lists: true,
            backoff_min: Duration::from_millis(800),
            backoff_max: Duration::from_secs(30),
            recheck_after: Duration::from_secs(30),
            absence_grace: DEFAULT_ABSENCE_GRACE,
            absence_rounds: 3,
        }
    }
}

/// The default `--absence-grace`: longer than a kube-apiserver takes to register its CRDs after
/// a restart, short enough that a CRD really removed is followed within minutes.
pub const DEFAULT_ABSENCE_GRACE: Duration = Duration::from_secs(60);

/// What might have looked like objects going away.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Absence {
    /// Discovery does not serve the kind (its CRD removed, or not registered yet).
    NotServed,
    /// A relist came back empty while the index held objects of the kind.
    EmptyList,
    /// A Namespace deleted, or left out of a relist, while routes, Gateways or ListenerSets in
    /// it are still held (their own deletions come on other watches, in no set order).
    InUse,
}

impl Absence {
    pub const ALL: [Absence; 3] = [Absence::NotServed, Absence::EmptyList, Absence::InUse];

    /// The metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Absence::NotServed => "not_served",
            Absence::EmptyList => "empty_list",
            Absence::InUse => "in_use",
        }
    }
}

/// What was made of an absence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AbsenceDecision {
    /// Seen, not yet confirmed: nothing left the index for it, no DNS deletion is written.
    Held,
    /// The objects came back before the absence was confirmed: nothing was removed.
    Returned,
    /// Confirmed: the kind's objects (if any) leave the index.
    Confirmed,
}

impl AbsenceDecision {
    pub const ALL: [AbsenceDecision; 3] = [
        AbsenceDecision::Held,
        AbsenceDecision::Returned,
        AbsenceDecision::Confirmed,
    ];

    /// The metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            AbsenceDecision::Held => "held",
            AbsenceDecision::Returned => "returned",
            AbsenceDecision::Confirmed => "confirmed",
        }
    }
}

/// A kind discovery does not serve, not yet confirmed.
#[derive(Clone, Copy, Debug)]
pub struct Unserved {
    /// The first round that counted (the API server ready).
    pub first_ready: Option<Instant>,
    /// Rounds that found the kind unserved with the API server ready.
    pub ready_rounds: u32,
}

/// A relist that came back empty and is held.
#[derive(Clone, Copy, Debug)]
pub struct Emptied {
    pub at: Instant,
    /// The relist that confirms it has been started.
    pub confirming: bool,
}

/// What is known about one kind's watch, for readiness and metrics.
#[derive(Clone, Debug)]
pub struct KindStatus {
    pub kind: ObjectKind,
    /// The version watched; None while the kind is not served (CRD not installed) or before
    /// the first discovery.
    pub version: Option<&'static str>,
    /// The current watcher completed a full list.
    pub synced: bool,
    /// When the current watcher last delivered something (start, list, event).
    pub last_progress: Instant,
    /// Set on a watch error, cleared by the next list or event.
    pub failing_since: Option<Instant>,
    pub errors: u64,
    pub decode_errors: u64,
    /// Full lists completed (the first sync plus every relist).
    pub lists: u64,
    /// Discovery does not serve the kind and that is not confirmed yet. A watched kind keeps
    /// its watcher and its objects meanwhile.
    pub unserved: Option<Unserved>,
    /// A relist came back empty and its objects are kept until that is confirmed.
    pub emptied: Option<Emptied>,
    /// Absences seen and what was decided, over the source's life.
    pub absences: BTreeMap<(Absence, AbsenceDecision), u64>,
    pub(super) restarted_at: Instant,
    pub(super) epoch: u64,
}

impl KindStatus {
    pub(super) fn new(kind: ObjectKind, now: Instant) -> KindStatus {
        KindStatus {
            kind,
            version: None,
            synced: false,
            last_progress: now,
            failing_since: None,
            errors: 0,
            decode_errors: 0,
            lists: 0,
            unserved: None,
            emptied: None,
            absences: BTreeMap::new(),
            restarted_at: now,
            epoch: 0,
        }
    }

    pub(super) fn count(&mut self, absence: Absence, decision: AbsenceDecision) {
        *self.absences.entry((absence, decision)).or_default() += 1;
    }

    /// How far behind the cluster this kind may be: zero while the watch is known to be in
    /// sync (or the kind is not served), else the time since its last progress.
    pub fn staleness(&self, now: Instant) -> Duration {
        if self.version.is_none() || (self.synced && self.failing_since.is_none()) {
            Duration::ZERO
        } else {
            now.saturating_duration_since(self.last_progress)
        }
    }
}

pub(super) struct Shared {
    pub(super) client: kube::Client,
    pub(super) index: Index,
    pub(super) config: Config,
    pub(super) status: Mutex<BTreeMap<ObjectKind, KindStatus>>,
    pub(super) watchers: Mutex<BTreeMap<ObjectKind, AbortHandle>>,
    pub(super) discovered: Mutex<bool>,
    pub(super) ready: watch::Sender<bool>,
    /// The server refused a streaming list: every later list is paged.
    pub(super) streaming_refused: AtomicBool,
    /// Namespaces gone from the API while objects in them are still held, and since when: they
    /// stay in the index until those objects are gone too, or for `absence_grace`.
    pub(super) departing: Mutex<BTreeMap<String, Instant>>,
}

pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding a lock cannot leave these maps half-updated in a harmful way.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

pub(super) fn update_readiness(shared: &Shared) {
    if *shared.ready.borrow() || !*lock(&shared.discovered) {
        return;
    }
    let all_synced = lock(&shared.status)
        .values()
        .all(|s| s.version.is_none() || s.synced);
    if all_synced {
        info!("first sync complete for every served kind");
        shared.ready.send_replace(true);
    }
}

/// Runs `change` against the index only if this watcher is still the current one for `kind`,
/// and records progress.
pub(super) fn with_current<R>(
    shared: &Shared,
    kind: ObjectKind,
    epoch: u64,
    change: impl FnOnce(&Index, &mut KindStatus) -> R,
) -> Option<R> {
    let mut status = lock(&shared.status);
    let entry = status.get_mut(&kind).filter(|s| s.epoch == epoch)?;
    let result = change(&shared.index, entry);
    entry.last_progress = Instant::now();
    entry.failing_since = None;
    Some(result)
}
