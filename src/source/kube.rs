//! The cluster source: one watch per kind feeding the index.
//!
//! Discovery picks the newest served version of each kind (`ObjectKind::versions`, newest
//! first). A kind whose CRD is not installed is treated as empty, logged once and re-checked
//! every `discovery_interval`; when it appears it is watched without a restart. Nothing about a
//! missing CRD is fatal.
//!
//! Absence is not deletion. A kind that discovery stops serving keeps its objects in the index
//! until the absence is confirmed: by `absence_rounds` discovery rounds, each made while the API
//! server answers `/readyz`, spread over at least `absence_grace` (a restarting kube-apiserver
//! answers discovery before it has registered every CRD). A relist that comes back empty while
//! the index holds objects of the kind is held the same way, until a relist after the grace
//! confirms it. A Namespace deleted (or left out of a relist) while objects in it are held
//! stays until they are gone, or for the grace. Until every absence is confirmed,
//! [`KubeSource::removals_held`] says why, and the sync loop writes no deletion.
//!
//! A kind's first list is read in pages, each asked for as soon as the previous one's continue
//! token is read, so the server prepares a page while the source reads the last one: nothing
//! is stored yet that a page could be held beside, and on kube-apiserver a streaming list was
//! not quicker to ready (docs/benchmarks.md). Every relist is a streaming list (WatchList:
//! `sendInitialEvents=true` on a watch, one object per event, no page held) where the server
//! offers it, and in pages (kube-rs's watcher) where it refuses one. A list (the first and
//! every relist after a 410 or a restart) is gathered as pointers to
//! the projections the index already holds, new projections only for what changed, and handed
//! to `Index::reset` once complete, so objects deleted while disconnected are dropped and a
//! relist costs little beside the index. Errors back off with jitter while the index keeps
//! serving the last good state.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{Api, ApiResource, ListParams, ObjectMeta, WatchEvent, WatchParams};
use kube::core::ListMeta;
use kube::core::{DynamicResourceScope, Resource};
use kube::runtime::utils::{Backoff, ResetTimerBackoff, StreamBackoff};
use kube::runtime::watcher;
use serde::Deserialize;
use serde::de::{DeserializeSeed, Error as _, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::sync::watch;
use tokio::task::{AbortHandle, JoinHandle};
use tracing::{debug, info, warn};

use crate::index::Index;
use crate::model::{self, DecodeError, GATEWAY_GROUP, Object, ObjectKey, ObjectKind};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("reading kubeconfig: {0}")]
    Kubeconfig(#[from] kube::config::KubeconfigError),
    #[error("finding the cluster configuration (KUBECONFIG, ~/.kube/config or in-cluster): {0}")]
    Infer(#[from] kube::config::InferConfigError),
    #[error("creating the Kubernetes client: {0}")]
    Client(#[source] kube::Error),
    #[error("finding which Gateway API kinds the cluster serves")]
    Discovery(#[source] kube::Error),
    #[error("listing {kind} ({version})")]
    List {
        kind: ObjectKind,
        version: &'static str,
        #[source]
        source: kube::Error,
    },
}

/// One read of every object the engine reads (Namespaces, Gateways, ListenerSets, routes) at
/// the newest version the cluster serves, in pages: the same `list` verbs serve's RBAC grants,
/// nothing written. An object the decoder cannot read is left out with a warning, as serve
/// does; a kind whose CRD is not installed is empty.
pub async fn list_once(client: &kube::Client) -> Result<Vec<Object>, Error> {
    let served = discover(client).await.map_err(Error::Discovery)?;
    let mut objects = Vec::new();
    for (kind, version) in served {
        let api: Api<Watched> = Api::all_with(client.clone(), &api_resource(kind, version));
        let mut params = kube::api::ListParams::default().limit(500);
        loop {
            let page = api.list(&params).await.map_err(|source| Error::List {
                kind,
                version,
                source,
            })?;
            for item in page.items {
                match decode(kind, item) {
                    Ok(object) => objects.push(object),
                    Err((key, error)) => {
                        warn!(object = %key, %error, "cannot read object; skipped")
                    }
                }
            }
            match page.metadata.continue_ {
                Some(token) if !token.is_empty() => params = params.continue_token(&token),
                _ => break,
            }
        }
    }
    Ok(objects)
}

/// A client from an explicit kubeconfig file, or else as kubectl finds one (`KUBECONFIG`,
/// `~/.kube/config`, then the in-cluster service account).
pub async fn client(kubeconfig: Option<&Path>) -> Result<kube::Client, Error> {
    let config = match kubeconfig {
        Some(path) => {
            let file = kube::config::Kubeconfig::read_from(path)?;
            kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
                .await?
        }
        None => kube::Config::infer().await?,
    };
    kube::Client::try_from(config).map_err(Error::Client)
}

#[derive(Clone, Debug)]
pub struct Config {
    /// How often discovery re-checks which kinds are served (CRDs added, removed, upgraded).
    pub discovery_interval: Duration,
    /// Objects per list page (initial sync and relists) when lists are paged. The default, 250,
    /// keeps a relist's transient memory (a page's text is held about twice while it is read)
    /// small beside the index even for a thousand routes, for a few more round trips on large
    /// clusters.
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
            page_size: 250,
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
    restarted_at: Instant,
    epoch: u64,
}

impl KindStatus {
    fn new(kind: ObjectKind, now: Instant) -> KindStatus {
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

    fn count(&mut self, absence: Absence, decision: AbsenceDecision) {
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

struct Shared {
    client: kube::Client,
    index: Index,
    config: Config,
    status: Mutex<BTreeMap<ObjectKind, KindStatus>>,
    watchers: Mutex<BTreeMap<ObjectKind, AbortHandle>>,
    discovered: Mutex<bool>,
    ready: watch::Sender<bool>,
    /// The server refused a streaming list: every later list is paged.
    streaming_refused: AtomicBool,
    /// Namespaces gone from the API while objects in them are still held, and since when: they
    /// stay in the index until those objects are gone too, or for `absence_grace`.
    departing: Mutex<BTreeMap<String, Instant>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding a lock cannot leave these maps half-updated in a harmful way.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The running source. Dropping it stops every watcher.
pub struct KubeSource {
    shared: Arc<Shared>,
    supervisor: JoinHandle<()>,
}

impl Drop for KubeSource {
    fn drop(&mut self) {
        self.supervisor.abort();
        for (_, watcher) in std::mem::take(&mut *lock(&self.shared.watchers)) {
            watcher.abort();
        }
    }
}

impl KubeSource {
    /// Starts discovery and the watchers on the current tokio runtime.
    pub fn spawn(client: kube::Client, index: Index, config: Config) -> KubeSource {
        let now = Instant::now();
        let status = ObjectKind::ALL
            .into_iter()
            .map(|k| (k, KindStatus::new(k, now)))
            .collect();
        let shared = Arc::new(Shared {
            client,
            index,
            config,
            status: Mutex::new(status),
            watchers: Mutex::new(BTreeMap::new()),
            discovered: Mutex::new(false),
            ready: watch::Sender::new(false),
            streaming_refused: AtomicBool::new(false),
            departing: Mutex::new(BTreeMap::new()),
        });
        let supervisor = tokio::spawn(supervise(shared.clone()));
        KubeSource { shared, supervisor }
    }

    /// Becomes true once every served kind completed its first list; then stays true (the
    /// index keeps serving its last good state through later faults).
    pub fn ready(&self) -> watch::Receiver<bool> {
        self.shared.ready.subscribe()
    }

    pub fn is_ready(&self) -> bool {
        *self.shared.ready.borrow()
    }

    /// Every served kind has completed a list and none of their watches is failing right now:
    /// the index mirrors the API server. DNS writes wait for this, so a replica whose watches
    /// just broke (or that just took the Lease after a partition) never deletes records on the
    /// strength of a stale index.
    pub fn in_sync(&self) -> bool {
        *self.shared.ready.borrow()
            && lock(&self.shared.status)
                .values()
                .all(|s| s.version.is_none() || (s.synced && s.failing_since.is_none()))
    }

    pub fn status(&self) -> Vec<KindStatus> {
        lock(&self.shared.status).values().cloned().collect()
    }

    /// Why DNS deletions must wait, if they must: before the first discovery, and while an
    /// absence (a kind not served, a relist that came back empty) is not confirmed. Records
    /// of objects that may only look gone are never deleted.
    pub fn removals_held(&self) -> Option<String> {
        if !*lock(&self.shared.discovered) {
            return Some("the cluster's kinds are not discovered yet".to_string());
        }
        let status = lock(&self.shared.status);
        let mut why: Vec<String> = lock(&self.shared.departing)
            .keys()
            .map(|name| format!("Namespace {name} gone while objects in it remain"))
            .collect();
        for entry in status.values() {
            if entry.unserved.is_some() {
                why.push(format!("{} not served, not yet confirmed", entry.kind));
            }
            if entry.emptied.is_some() {
                why.push(format!("{} listed empty, not yet confirmed", entry.kind));
            }
        }
        (!why.is_empty()).then(|| why.join("; "))
    }

    /// Whether lists are streamed (WatchList): configured so and not refused by the server.
    pub fn streams_lists(&self) -> bool {
        self.shared.config.streaming_lists && !self.shared.streaming_refused.load(Ordering::Relaxed)
    }

    /// Seconds-resolution staleness per kind, for a gauge.
    pub fn staleness(&self) -> Vec<(ObjectKind, Duration)> {
        let now = Instant::now();
        lock(&self.shared.status)
            .values()
            .map(|s| (s.kind, s.staleness(now)))
            .collect()
    }
}

/// Which version of each kind the cluster serves (absent: not served).
type Served = BTreeMap<ObjectKind, &'static str>;

async fn discover(client: &kube::Client) -> Result<Served, kube::Error> {
    // Namespaces are core: always served.
    let mut served = BTreeMap::from([(ObjectKind::Namespace, "v1")]);
    let groups = client.list_api_groups().await?;
    let Some(group) = groups.groups.iter().find(|g| g.name == GATEWAY_GROUP) else {
        return Ok(served);
    };
    let group_versions: HashSet<&str> = group.versions.iter().map(|v| v.version.as_str()).collect();
    let mut plurals_by_version: BTreeMap<&'static str, HashSet<String>> = BTreeMap::new();
    for kind in ObjectKind::ALL
        .into_iter()
        .filter(|k| k.group() == GATEWAY_GROUP)
    {
        for version in kind.versions() {
            if !group_versions.contains(version) || plurals_by_version.contains_key(version) {
                continue;
            }
            let plurals = match client
                .list_api_group_resources(&format!("{GATEWAY_GROUP}/{version}"))
                .await
            {
                Ok(list) => list.resources.into_iter().map(|r| r.name).collect(),
                // Removed between the two requests: nothing served there.
                Err(kube::Error::Api(status)) if status.code == 404 => HashSet::new(),
                Err(other) => return Err(other),
            };
            plurals_by_version.insert(version, plurals);
        }
    }
    for kind in ObjectKind::ALL
        .into_iter()
        .filter(|k| k.group() == GATEWAY_GROUP)
    {
        let newest = kind.versions().iter().find(|v| {
            plurals_by_version
                .get(*v)
                .is_some_and(|p| p.contains(kind.plural()))
        });
        if let Some(version) = newest {
            served.insert(kind, version);
        }
    }
    Ok(served)
}

/// Exponential backoff with jitter (each delay drawn from [d/2, d]).
struct JitterBackoff {
    min: Duration,
    max: Duration,
    next: Duration,
}

impl JitterBackoff {
    fn new(min: Duration, max: Duration) -> JitterBackoff {
        JitterBackoff {
            min,
            max: max.max(min),
            next: min,
        }
    }
}

impl Iterator for JitterBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let delay = self.next;
        self.next = (self.next * 2).min(self.max);
        Some(delay.mul_f64(0.5 + fastrand::f64() * 0.5))
    }
}

impl Backoff for JitterBackoff {
    fn reset(&mut self) {
        self.next = self.min;
    }
}

async fn supervise(shared: Arc<Shared>) {
    let tick = Duration::from_secs(1).min(shared.config.discovery_interval);
    let mut discovery_backoff =
        JitterBackoff::new(Duration::from_millis(500), shared.config.discovery_interval);
    let mut next_discovery = Instant::now();
    let mut announced_missing: HashSet<ObjectKind> = HashSet::new();
    loop {
        let now = Instant::now();
        if now >= next_discovery {
            match discover(&shared.client).await {
                Ok(served) => {
                    discovery_backoff.reset();
                    // A round counts toward confirming an absence only while the API server
                    // says it is ready: one still starting serves a partial discovery.
                    let unconfirmed = ObjectKind::ALL
                        .iter()
                        .any(|k| !served.contains_key(k) && !announced_missing.contains(k));
                    let ready = unconfirmed && api_ready(&shared.client).await;
                    apply_discovery(&shared, &served, ready, &mut announced_missing);
                    *lock(&shared.discovered) = true;
                    update_readiness(&shared);
                    next_discovery = Instant::now() + discovery_pause(&shared);
                }
                Err(error) => {
                    let delay = discovery_backoff
                        .next()
                        .unwrap_or(shared.config.discovery_interval);
                    warn!(%error, retry_in = ?delay, "API discovery failed; keeping the current watches");
                    next_discovery = Instant::now() + delay;
                }
            }
        }
        recheck_failing(&shared);
        confirm_emptied(&shared);
        settle_departing(&shared);
        let until_discovery = next_discovery.saturating_duration_since(Instant::now());
        tokio::time::sleep(tick.min(until_discovery).max(Duration::from_millis(10))).await;
    }
}

/// Until the next discovery: `discovery_interval`, or while an absence awaits confirmation
/// often enough that its rounds fit in the grace.
fn discovery_pause(shared: &Shared) -> Duration {
    let config = &shared.config;
    let confirming = lock(&shared.status).values().any(|s| s.unserved.is_some());
    if confirming {
        let every = config.absence_grace / config.absence_rounds.max(1);
        every
            .max(Duration::from_millis(100))
            .min(config.discovery_interval)
    } else {
        config.discovery_interval
    }
}

/// Whether the API server answers `/readyz` with 200 (any authenticated client may read it).
async fn api_ready(client: &kube::Client) -> bool {
    let Ok(request) = hyper::Request::get("/readyz").body(Vec::new()) else {
        return false;
    };
    match client.request_text(request).await {
        Ok(_) => true,
        Err(error) => {
            debug!(%error, "the API server is not ready");
            false
        }
    }
}

fn apply_discovery(
    shared: &Arc<Shared>,
    served: &Served,
    ready: bool,
    announced_missing: &mut HashSet<ObjectKind>,
) {
    let now = Instant::now();
    let (grace, rounds) = (shared.config.absence_grace, shared.config.absence_rounds);
    for kind in ObjectKind::ALL {
        let (current, returned) = {
            let mut status = lock(&shared.status);
            let Some(entry) = status.get_mut(&kind) else {
                continue;
            };
            let returned = served.contains_key(&kind) && entry.unserved.take().is_some();
            if returned && entry.version.is_some() {
                entry.count(Absence::NotServed, AbsenceDecision::Returned);
            }
            (entry.version, returned)
        };
        if returned && let Some(version) = current {
            info!(%kind, version, "served again; nothing left the index meanwhile");
        }
        match (served.get(&kind).copied(), current) {
            (Some(version), Some(watched)) if version == watched => {}
            (Some(version), previous) => {
                match previous {
                    Some(old) => {
                        info!(%kind, from = old, to = version, "served version changed; re-watching")
                    }
                    None if announced_missing.remove(&kind) || returned => {
                        info!(%kind, version, "CRD now installed; watching")
                    }
                    None => debug!(%kind, version, "watching"),
                }
                start_watcher(shared, kind, version, false);
            }
            // Confirmed before, still not served: nothing to do.
            (None, None) if announced_missing.contains(&kind) => {}
            (None, watched) => {
                let confirmed = {
                    let mut status = lock(&shared.status);
                    let Some(entry) = status.get_mut(&kind) else {
                        continue;
                    };
                    let first = entry.unserved.is_none();
                    if first && watched.is_some() {
                        entry.count(Absence::NotServed, AbsenceDecision::Held);
                    }
                    let unserved = entry.unserved.get_or_insert(Unserved {
                        first_ready: None,
                        ready_rounds: 0,
                    });
                    if ready {
                        unserved.ready_rounds += 1;
                        unserved.first_ready.get_or_insert(now);
                    }
                    let confirmed = unserved.ready_rounds >= rounds
                        && unserved
                            .first_ready
                            .is_some_and(|at| now.saturating_duration_since(at) >= grace);
                    if first && let Some(old) = watched {
                        warn!(%kind, version = old, ?grace, rounds,
                            "not served by the API server's discovery; its objects stay in the index \
                             and no DNS record is deleted until that is confirmed");
                    }
                    if confirmed {
                        entry.unserved = None;
                        if watched.is_some() {
                            entry.count(Absence::NotServed, AbsenceDecision::Confirmed);
                        }
                    }
                    confirmed
                };
                match (confirmed, watched) {
                    (true, Some(old)) => {
                        warn!(%kind, version = old, ?grace, rounds,
                            "confirmed not served (CRD removed); its objects leave the index");
                        stop_watcher(shared, kind);
                        announced_missing.insert(kind);
                    }
                    (true, None) => {
                        if announced_missing.insert(kind) {
                            info!(
                                %kind,
                                recheck_every = ?shared.config.discovery_interval,
                                "not served (CRD not installed); treated as empty"
                            );
                        }
                    }
                    (false, _) => {}
                }
            }
        }
    }
}

/// Starts (or restarts) the watcher of `kind` at `version`; a new epoch makes any event still
/// in flight from a previous watcher of this kind be ignored. A `recheck` keeps the failure
/// record: only a completed list clears it.
fn start_watcher(shared: &Arc<Shared>, kind: ObjectKind, version: &'static str, recheck: bool) {
    let epoch = {
        let mut status = lock(&shared.status);
        let now = Instant::now();
        let entry = status
            .entry(kind)
            .or_insert_with(|| KindStatus::new(kind, now));
        entry.epoch += 1;
        entry.version = Some(version);
        entry.synced = false;
        entry.restarted_at = now;
        if !recheck {
            entry.failing_since = None;
            entry.last_progress = now;
        }
        entry.epoch
    };
    let task = tokio::spawn(run_watcher(shared.clone(), kind, version, epoch));
    if let Some(old) = lock(&shared.watchers).insert(kind, task.abort_handle()) {
        old.abort();
    }
}

fn stop_watcher(shared: &Arc<Shared>, kind: ObjectKind) {
    if let Some(old) = lock(&shared.watchers).remove(&kind) {
        old.abort();
    }
    let mut status = lock(&shared.status);
    if let Some(entry) = status.get_mut(&kind) {
        entry.epoch += 1;
        entry.version = None;
        entry.synced = false;
        entry.failing_since = None;
    }
    // Under the status lock, so no event of the stopped watcher can land after this.
    shared.index.reset(kind, Vec::new());
}

/// Relists a kind whose watch failed and has shown no progress for `recheck_after`: the
/// watcher recovers by itself, but only a list proves it is in sync when nothing changes.
fn recheck_failing(shared: &Arc<Shared>) {
    let now = Instant::now();
    let due: Vec<(ObjectKind, &'static str)> = lock(&shared.status)
        .values()
        .filter_map(|s| {
            let failing_since = s.failing_since?;
            let quiet_since = failing_since.max(s.last_progress).max(s.restarted_at);
            (now.saturating_duration_since(quiet_since) >= shared.config.recheck_after)
                .then_some((s.kind, s.version?))
        })
        .collect();
    for (kind, version) in due {
        info!(%kind, "watch failed and made no progress since; relisting");
        start_watcher(shared, kind, version, true);
    }
}

/// Relists a kind whose empty relist is held once the grace is over: that list is applied as it
/// comes, and so confirms the absence (or ends it).
fn confirm_emptied(shared: &Arc<Shared>) {
    let grace = shared.config.absence_grace;
    let due: Vec<(ObjectKind, &'static str)> = lock(&shared.status)
        .values_mut()
        .filter_map(|s| {
            let emptied = s.emptied.as_mut()?;
            if emptied.confirming || emptied.at.elapsed() < grace {
                return None;
            }
            let version = s.version?;
            emptied.confirming = true;
            Some((s.kind, version))
        })
        .collect();
    for (kind, version) in due {
        info!(%kind, "relisting to confirm an empty relist");
        start_watcher(shared, kind, version, true);
    }
}

/// Lets go of the held Namespaces whose objects are gone, or whose grace is over.
fn settle_departing(shared: &Arc<Shared>) {
    let grace = shared.config.absence_grace;
    let snapshot = shared.index.snapshot();
    let due: Vec<(String, bool)> = lock(&shared.departing)
        .iter()
        .filter_map(|(name, since)| {
            let in_use = snapshot.holds_in_namespace(name);
            (!in_use || since.elapsed() >= grace).then(|| (name.clone(), in_use))
        })
        .collect();
    drop(snapshot);
    for (name, in_use) in due {
        let mut status = lock(&shared.status);
        if lock(&shared.departing).remove(&name).is_none() {
            continue;
        }
        if let Some(entry) = status.get_mut(&ObjectKind::Namespace) {
            entry.count(Absence::InUse, AbsenceDecision::Confirmed);
        }
        // Under the status lock, as every change of a watcher is.
        shared
            .index
            .delete(&ObjectKey::new(ObjectKind::Namespace, "", &name));
        drop(status);
        if in_use {
            warn!(namespace = %name, ?grace, "Namespace still gone after the grace; it leaves the index");
        } else {
            debug!(namespace = %name, "Namespace gone with everything in it; it leaves the index");
        }
    }
}

fn update_readiness(shared: &Shared) {
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

fn api_resource(kind: ObjectKind, version: &str) -> ApiResource {
    let group = kind.group();
    ApiResource {
        group: group.to_string(),
        version: version.to_string(),
        api_version: if group.is_empty() {
            version.to_string()
        } else {
            format!("{group}/{version}")
        },
        kind: kind.kind().to_string(),
        plural: kind.plural().to_string(),
    }
}

/// A watched object as it leaves the API response: its identity and the fields the engine
/// reads, already out of the JSON tree. A list page of these costs a fraction of the same page
/// of `DynamicObject`s (managedFields, rules, the rest of status never stay in memory), which
/// keeps a relist's peak close to the steady state.
#[derive(Clone, Debug)]
struct Watched {
    /// Only name, namespace and resourceVersion: what the watcher and the index need.
    metadata: ObjectMeta,
    raw: Result<model::RawObject, DecodeError>,
}

impl Resource for Watched {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;

    fn kind(resource: &ApiResource) -> Cow<'_, str> {
        resource.kind.as_str().into()
    }
    fn group(resource: &ApiResource) -> Cow<'_, str> {
        resource.group.as_str().into()
    }
    fn version(resource: &ApiResource) -> Cow<'_, str> {
        resource.version.as_str().into()
    }
    fn api_version(resource: &ApiResource) -> Cow<'_, str> {
        resource.api_version.as_str().into()
    }
    fn plural(resource: &ApiResource) -> Cow<'_, str> {
        resource.plural.as_str().into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl<'de> Deserialize<'de> for Watched {
    /// Any JSON object is accepted: one the engine cannot read becomes a decode error for this
    /// object alone, never a failed list page (which would stall the whole kind). The object's
    /// text is set apart first (a copy, no tree), then read straight into the raw shapes; only
    /// an object that fails that read is read again as a tree, for its identity.
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Watched, D::Error> {
        let text = Box::<RawValue>::deserialize(deserializer)?;
        match model::RawObject::from_json(text.get()) {
            Ok(mut raw) => {
                let metadata = ObjectMeta {
                    name: raw.name().map(str::to_owned),
                    namespace: raw.namespace().map(str::to_owned),
                    resource_version: raw.take_resource_version(),
                    ..ObjectMeta::default()
                };
                Ok(Watched {
                    metadata,
                    raw: Ok(raw),
                })
            }
            Err(error) => {
                let value: Value = serde_json::from_str(text.get()).map_err(D::Error::custom)?;
                let text = |pointer: &str| {
                    value
                        .pointer(pointer)
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                };
                let metadata = ObjectMeta {
                    name: text("/metadata/name"),
                    namespace: text("/metadata/namespace"),
                    resource_version: text("/metadata/resourceVersion"),
                    ..ObjectMeta::default()
                };
                Ok(Watched {
                    metadata,
                    raw: Err(error),
                })
            }
        }
    }
}

/// The projection of a watched object (the last-applied annotation is dropped by the decoder),
/// and the object's key when it cannot be read (the key is only built then).
fn decode(kind: ObjectKind, object: Watched) -> Result<Object, (ObjectKey, DecodeError)> {
    let Watched { metadata, raw } = object;
    raw.and_then(|raw| raw.into_object(kind))
        .map_err(|error| (key_of(kind, &metadata), error))
}

fn key_of(kind: ObjectKind, metadata: &ObjectMeta) -> ObjectKey {
    let namespace = if kind.is_namespaced() {
        metadata.namespace.as_deref().unwrap_or("default")
    } else {
        ""
    };
    ObjectKey::new(kind, namespace, metadata.name.as_deref().unwrap_or(""))
}

/// Runs `change` against the index only if this watcher is still the current one for `kind`,
/// and records progress.
fn with_current<R>(
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

/// A relist of Namespaces leaves out some still in use: they stay (added to `listed`) as
/// departing, and listed ones that were departing have returned.
fn keep_departing(
    shared: &Shared,
    index: &Index,
    status: &mut KindStatus,
    listed: &mut Vec<Object>,
) {
    let names: HashSet<&str> = listed
        .iter()
        .map(|object| match object {
            Object::Namespace(namespace) => namespace.meta.name(),
            _ => "",
        })
        .collect();
    let snapshot = index.snapshot();
    let mut departing = lock(&shared.departing);
    let returned: Vec<String> = departing
        .keys()
        .filter(|name| names.contains(name.as_str()))
        .cloned()
        .collect();
    for name in returned {
        departing.remove(&name);
        status.count(Absence::InUse, AbsenceDecision::Returned);
    }
    let kept: Vec<Arc<model::Namespace>> = snapshot
        .namespace_names()
        .filter(|name| !names.contains(name) && snapshot.holds_in_namespace(name))
        .filter_map(|name| snapshot.stored_namespace(name))
        .collect();
    drop(names);
    for namespace in kept {
        let name = namespace.meta.name().to_string();
        if let std::collections::btree_map::Entry::Vacant(entry) = departing.entry(name) {
            warn!(namespace = %entry.key(), "Namespace not relisted while objects in it remain; it stays until they are gone");
            entry.insert(Instant::now());
            status.count(Absence::InUse, AbsenceDecision::Held);
        }
        listed.push(Object::Namespace(namespace));
    }
}

/// What a completed list did.
enum ListOutcome {
    First,
    Relist,
    /// An empty relist held: this many objects stay.
    Held(usize),
}

/// One watcher's events into the index. Every method answers false once this watcher is no
/// longer the current one for its kind (restarted or stopped): the caller then ends.
struct Feed {
    shared: Arc<Shared>,
    kind: ObjectKind,
    version: &'static str,
    epoch: u64,
    /// The list in progress. An object that did not change is held as a pointer to the
    /// projection the index already stores, so a relist costs little beside the index.
    listing: Option<Vec<Object>>,
}

impl Feed {
    /// A (re)list begins: whatever an interrupted one gathered is dropped. Sized for as many
    /// objects as the kind holds, so a relist never copies a grown buffer beside the index.
    fn list_started(&mut self) {
        let stored = self.shared.index.len_of(self.kind);
        self.listing = Some(Vec::with_capacity(stored));
    }

    /// No list of this kind has completed yet (over the kind's life, across restarts).
    fn first_list(&self) -> bool {
        lock(&self.shared.status)
            .get(&self.kind)
            .is_none_or(|status| status.lists == 0)
    }

    fn listed(&mut self, object: Watched) -> bool {
        match decode(self.kind, object) {
            Ok(projection) => {
                let projection = self.shared.index.share_stored(projection);
                self.listing.get_or_insert_with(Vec::new).push(projection);
            }
            Err((key, error)) => self.decode_error(&key, &error),
        }
        // Listing progresses, but the kind is not in sync again before the list ends.
        match lock(&self.shared.status)
            .get_mut(&self.kind)
            .filter(|s| s.epoch == self.epoch)
        {
            Some(entry) => {
                entry.last_progress = Instant::now();
                true
            }
            None => false,
        }
    }

    fn list_done(&mut self) -> bool {
        let (kind, version) = (self.kind, self.version);
        let objects = self.listing.take().unwrap_or_default();
        let count = objects.len();
        let grace = self.shared.config.absence_grace;
        let outcome = with_current(&self.shared, kind, self.epoch, |index, status| {
            status.lists += 1;
            status.synced = true;
            // Counted over the kind's life, so a watcher restarted by a recheck or a version
            // change reports its list as the relist it is.
            let first = status.lists == 1;
            let stored = index.len_of(kind);
            let confirmed = status
                .emptied
                .is_some_and(|emptied| emptied.confirming && emptied.at.elapsed() >= grace);
            if count == 0 && stored > 0 && !first && !confirmed {
                // Every object gone at once is more often a server that lost its view than a
                // cluster emptied: keep them until a relist after the grace agrees.
                if status.emptied.is_none() {
                    status.emptied = Some(Emptied {
                        at: Instant::now(),
                        confirming: false,
                    });
                    status.count(Absence::EmptyList, AbsenceDecision::Held);
                }
                return ListOutcome::Held(stored);
            }
            if status.emptied.take().is_some() {
                let decision = if count == 0 {
                    AbsenceDecision::Confirmed
                } else {
                    AbsenceDecision::Returned
                };
                status.count(Absence::EmptyList, decision);
            }
            let mut objects = objects;
            if kind == ObjectKind::Namespace {
                keep_departing(&self.shared, index, status, &mut objects);
            }
            index.reset(kind, objects);
            if first {
                ListOutcome::First
            } else {
                ListOutcome::Relist
            }
        });
        match outcome {
            Some(ListOutcome::First) => info!(%kind, version, objects = count, "synced"),
            Some(ListOutcome::Relist) => info!(%kind, version, objects = count, "relisted"),
            Some(ListOutcome::Held(stored)) => warn!(%kind, version, stored, ?grace,
                "relisted empty; the objects stay in the index and no DNS record is deleted until \
                 a relist after the grace confirms it"),
            None => return false,
        }
        update_readiness(&self.shared);
        true
    }

    fn applied(&mut self, object: Watched) -> bool {
        let (kind, epoch) = (self.kind, self.epoch);
        let shared = &self.shared;
        match decode(kind, object) {
            Ok(projection) => with_current(shared, kind, epoch, |index, status| {
                if let Object::Namespace(namespace) = &projection
                    && lock(&shared.departing)
                        .remove(namespace.meta.name())
                        .is_some()
                {
                    status.count(Absence::InUse, AbsenceDecision::Returned);
                }
                index.apply(projection)
            })
            .is_some(),
            Err((key, error)) => {
                // The object as it is now cannot be read: drop the older projection too, as a
                // relist would, rather than keep a version that no longer exists.
                self.decode_error(&key, &error);
                with_current(&self.shared, kind, epoch, |index, _| index.delete(&key)).is_some()
            }
        }
    }

    fn deleted(&mut self, object: &Watched) -> bool {
        let key = key_of(self.kind, &object.metadata);
        let shared = &self.shared;
        with_current(shared, self.kind, self.epoch, |index, status| {
            let name = key.name();
            if key.kind() == ObjectKind::Namespace && index.snapshot().holds_in_namespace(name) {
                // Its routes' deletions are on their way on other watches: until they land,
                // the Namespace's labels and annotations still decide for them.
                let mut departing = lock(&shared.departing);
                if !departing.contains_key(name) {
                    debug!(namespace = %name, "Namespace deleted while objects in it remain; it stays until they are gone");
                    departing.insert(name.to_string(), Instant::now());
                    status.count(Absence::InUse, AbsenceDecision::Held);
                }
                return;
            }
            index.delete(&key)
        })
        .is_some()
    }

    fn failed(&mut self, error: &dyn std::fmt::Display) -> bool {
        let mut status = lock(&self.shared.status);
        let Some(entry) = status.get_mut(&self.kind).filter(|s| s.epoch == self.epoch) else {
            return false;
        };
        entry.errors += 1;
        entry.failing_since.get_or_insert_with(Instant::now);
        drop(status);
        let (kind, version) = (self.kind, self.version);
        warn!(%kind, version, %error, "watch error; retrying with backoff, serving the last good state");
        true
    }

    fn decode_error(&self, key: &ObjectKey, error: &DecodeError) {
        warn!(object = %key, %error, "cannot read object; skipped");
        if let Some(entry) = lock(&self.shared.status)
            .get_mut(&self.kind)
            .filter(|s| s.epoch == self.epoch)
        {
            entry.decode_errors += 1;
        }
    }
}

async fn run_watcher(shared: Arc<Shared>, kind: ObjectKind, version: &'static str, epoch: u64) {
    let api: Api<Watched> = Api::all_with(shared.client.clone(), &api_resource(kind, version));
    let mut feed = Feed {
        shared: shared.clone(),
        kind,
        version,
        epoch,
        listing: None,
    };
    if shared.config.streaming_lists && !shared.streaming_refused.load(Ordering::Relaxed) {
        match watch_streaming(&api, &mut feed).await {
            Streaming::Superseded => return,
            Streaming::Refused(status) => {
                if !shared.streaming_refused.swap(true, Ordering::Relaxed) {
                    info!(%kind, code = status.code, reason = %status.reason, message = %status.message,
                        "the API server refuses streaming lists (WatchList); listing in pages");
                }
            }
        }
    }
    watch_paged(api, &mut feed).await;
}

/// Lists in pages (`page_size` objects a request), then watches: kube-rs's watcher.
async fn watch_paged(api: Api<Watched>, feed: &mut Feed) {
    let config = &feed.shared.config;
    let watch_config = watcher::Config::default().page_size(config.page_size);
    let backoff = ResetTimerBackoff::new(
        JitterBackoff::new(config.backoff_min, config.backoff_max),
        config.backoff_max * 2,
    );
    let mut events = StreamBackoff::new(watcher(api, watch_config), backoff).boxed();
    while let Some(event) = events.next().await {
        let current = match event {
            Ok(watcher::Event::Init) => {
                feed.list_started();
                true
            }
            Ok(watcher::Event::InitApply(object)) => feed.listed(object),
            Ok(watcher::Event::InitDone) => feed.list_done(),
            Ok(watcher::Event::Apply(object)) => feed.applied(object),
            Ok(watcher::Event::Delete(object)) => feed.deleted(&object),
            Err(error) => feed.failed(&error),
        };
        if !current {
            return;
        }
    }
}

/// A list page as it arrives: `metadata` (with the continue token) comes before `items` in
/// what the API server writes, so the next page is asked for before this one's objects are
/// read (`on_metadata`).
struct PageSeed<'a> {
    on_metadata: &'a mut dyn FnMut(&ListMeta),
}

struct Page {
    metadata: ListMeta,
    items: Vec<Watched>,
}

impl<'de> DeserializeSeed<'de> for PageSeed<'_> {
    type Value = Page;

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<Page, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for PageSeed<'_> {
    type Value = Page;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a list")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Page, A::Error> {
        let mut page = Page {
            metadata: ListMeta::default(),
            items: Vec::new(),
        };
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "metadata" => {
                    page.metadata = map.next_value()?;
                    (self.on_metadata)(&page.metadata);
                }
                "items" => {
                    page.items = map
                        .next_value::<Option<Vec<Watched>>>()?
                        .unwrap_or_default()
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        // A page without metadata has no continue token: nothing to ask for ahead.
        Ok(page)
    }
}

/// Aborts the page being fetched ahead when the list ends early (an error, or superseded).
struct FetchAhead(Option<JoinHandle<Result<String, kube::Error>>>);

impl Drop for FetchAhead {
    fn drop(&mut self) {
        if let Some(fetch) = self.0.take() {
            fetch.abort();
        }
    }
}

/// The next page's continue token, if there is one.
fn continue_token(metadata: &ListMeta) -> Option<&str> {
    metadata
        .continue_
        .as_deref()
        .filter(|token| !token.is_empty())
}

/// Lists the kind in pages of `page_size`, each page asked for as soon as the previous one's
/// continue token is read, so the server prepares a page while this one's objects are read.
/// Returns the list's resourceVersion to watch from, or None when this watcher was superseded.
async fn list_in_pages_ahead(
    api: &Api<Watched>,
    feed: &mut Feed,
) -> Result<Option<String>, kube::Error> {
    let client = feed.shared.client.clone();
    let url = api.resource_url().to_string();
    let fetch = move |params: ListParams| {
        let client = client.clone();
        let url = url.clone();
        tokio::spawn(async move {
            let request = kube::core::Request::new(url)
                .list(&params)
                .map_err(kube::Error::BuildRequest)?;
            client.request_text(request).await
        })
    };
    let first = ListParams::default().limit(feed.shared.config.page_size);
    let mut ahead = FetchAhead(Some(fetch(first.clone())));
    feed.list_started();
    loop {
        let Some(pending) = ahead.0.take() else {
            return Ok(None);
        };
        let text = match pending.await {
            Ok(result) => result?,
            Err(join_error) => {
                return Err(kube::Error::Service(join_error.to_string().into()));
            }
        };
        let mut on_metadata = |metadata: &ListMeta| {
            if let Some(token) = continue_token(metadata)
                && let Some(replaced) = ahead.0.replace(fetch(first.clone().continue_token(token)))
            {
                replaced.abort();
            }
        };
        let page = PageSeed {
            on_metadata: &mut on_metadata,
        }
        .deserialize(&mut serde_json::Deserializer::from_str(&text))
        .map_err(kube::Error::SerdeError)?;
        drop(text);
        for object in page.items {
            if !feed.listed(object) {
                return Ok(None);
            }
        }
        if continue_token(&page.metadata).is_none() {
            if !feed.list_done() {
                return Ok(None);
            }
            return Ok(Some(page.metadata.resource_version.unwrap_or_default()));
        }
    }
}

/// How a streaming watcher ended.
enum Streaming {
    /// Another watcher took over this kind (restart, new version, CRD removed).
    Superseded,
    /// The server answered the streaming list with this refusal: list in pages instead.
    Refused(Box<kube::core::Status>),
}

/// How long a watch request may stay open (`timeoutSeconds`); the server ends it then and it is
/// resumed from the last resourceVersion, as kube-rs's watcher does.
const WATCH_TIMEOUT_SECS: u32 = 290;

/// A watch silent this much longer than its timeout is dead (a half-open connection).
const WATCH_SILENCE: Duration = Duration::from_secs(WATCH_TIMEOUT_SECS as u64 + 30);

/// The bookmark that ends a streaming list's initial events.
const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

/// A server without streaming lists refuses the parameters: 422 Invalid (WatchList off, or a
/// server older than it that forbids `resourceVersionMatch` on a watch) or 400 Bad Request.
fn refuses_streaming(status: &kube::core::Status) -> bool {
    matches!(status.code, 400 | 422)
}

/// Lists with a streaming list (WatchList: one watch request with `sendInitialEvents=true` that
/// sends every object as an event, then a bookmark), then watches on the same stream. Each
/// object is read as it arrives, so no page of objects is ever held. The list starts over on
/// 410 Gone and whenever a stream ends before its initial events did; a watch resumes from the
/// last resourceVersion otherwise. Owned here rather than left to kube-rs's watcher because a
/// list started over must be told apart from one going on (its objects replace, not add to,
/// the first attempt's).
async fn watch_streaming(api: &Api<Watched>, feed: &mut Feed) -> Streaming {
    let config = feed.shared.config.clone();
    let mut backoff = JitterBackoff::new(config.backoff_min, config.backoff_max);
    // Where to resume watching from; None: list again.
    let mut resume: Option<String> = None;
    loop {
        if resume.is_none() && feed.first_list() {
            // Nothing is stored yet, so nothing is held twice: the quickest list wins, and on
            // kube-apiserver that is pages fetched ahead (a streaming list costs the server
            // more per object). Relists stream, beside the index they replace.
            match list_in_pages_ahead(api, feed).await {
                Ok(Some(version)) => resume = Some(version),
                Ok(None) => return Streaming::Superseded,
                Err(error) => {
                    if !feed.failed(&error) {
                        return Streaming::Superseded;
                    }
                    let delay = backoff.next().unwrap_or(config.backoff_max);
                    tokio::time::sleep(delay).await;
                }
            }
            continue;
        }
        let listing = resume.is_none();
        let params = if listing {
            WatchParams::streaming_lists()
        } else {
            WatchParams::default()
        }
        .timeout(WATCH_TIMEOUT_SECS);
        let from = resume.clone().unwrap_or_else(|| "0".to_string());
        let mut failure: Option<String> = None;
        match api.watch(&params, &from).await {
            Err(kube::Error::Api(status)) if listing && refuses_streaming(&status) => {
                return Streaming::Refused(status);
            }
            Err(error) => failure = Some(error.to_string()),
            Ok(stream) => {
                let mut stream = std::pin::pin!(stream);
                if listing {
                    feed.list_started();
                }
                let mut in_list = listing;
                let mut received = false;
                loop {
                    let Ok(next) = tokio::time::timeout(WATCH_SILENCE, stream.next()).await else {
                        failure = Some(format!("no event for {WATCH_SILENCE:?}; reconnecting"));
                        break;
                    };
                    let event = match next {
                        None => break,
                        Some(Ok(event)) => event,
                        Some(Err(kube::Error::Api(status)))
                            if listing && !received && refuses_streaming(&status) =>
                        {
                            return Streaming::Refused(status);
                        }
                        Some(Err(error)) => {
                            failure = Some(error.to_string());
                            break;
                        }
                    };
                    let first = !received;
                    received = true;
                    let current = match event {
                        WatchEvent::Added(object) | WatchEvent::Modified(object) if in_list => {
                            feed.listed(object)
                        }
                        WatchEvent::Added(object) | WatchEvent::Modified(object) => {
                            let version = object.metadata.resource_version.clone();
                            resume = version.or(resume);
                            feed.applied(object)
                        }
                        WatchEvent::Deleted(object) => {
                            // A streaming list sends no deletions; one would be a change.
                            let version = object.metadata.resource_version.clone();
                            if !in_list {
                                resume = version.or(resume);
                            }
                            feed.deleted(&object)
                        }
                        WatchEvent::Bookmark(mark) => {
                            let ends_list =
                                mark.metadata.annotations.contains_key(INITIAL_EVENTS_END);
                            resume = Some(mark.metadata.resource_version);
                            if in_list && ends_list {
                                in_list = false;
                                feed.list_done()
                            } else {
                                true
                            }
                        }
                        WatchEvent::Error(status)
                            if listing && first && refuses_streaming(&status) =>
                        {
                            return Streaming::Refused(status);
                        }
                        WatchEvent::Error(status) => {
                            if status.code == 410 {
                                // History compacted past our version: list again.
                                resume = None;
                            }
                            failure = Some(format!(
                                "error returned by apiserver during watch: {}: {} ({})",
                                status.code, status.message, status.reason
                            ));
                            break;
                        }
                    };
                    if !current {
                        return Streaming::Superseded;
                    }
                    backoff.reset();
                }
                if in_list {
                    // A list cut short is started over, from scratch.
                    resume = None;
                }
            }
        }
        if let Some(error) = failure {
            if !feed.failed(&error) {
                return Streaming::Superseded;
            }
            let delay = backoff.next().unwrap_or(config.backoff_max);
            tokio::time::sleep(delay).await;
        }
    }
}
