//! The supervisor: discovery rounds, watchers started, restarted and stopped, and absences
//! confirmed or let go.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::{debug, info, warn};

use crate::model::{ObjectKey, ObjectKind};
use crate::retry::Backoff;

use super::discovery::{Served, api_ready, discover};
use super::state::{
    Absence, AbsenceDecision, KindStatus, Shared, Unserved, lock, update_readiness,
};
use super::watcher::run_watcher;

pub(super) async fn supervise(shared: Arc<Shared>) {
    let tick = Duration::from_secs(1).min(shared.config.discovery_interval);
    let mut discovery_backoff =
        Backoff::new(Duration::from_millis(500), shared.config.discovery_interval);
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
pub(super) fn discovery_pause(shared: &Shared) -> Duration {
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

pub(super) fn apply_discovery(
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
pub(super) fn start_watcher(
    shared: &Arc<Shared>,
    kind: ObjectKind,
    version: &'static str,
    recheck: bool,
) {
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

pub(super) fn stop_watcher(shared: &Arc<Shared>, kind: ObjectKind) {
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
pub(super) fn recheck_failing(shared: &Arc<Shared>) {
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
pub(super) fn confirm_emptied(shared: &Arc<Shared>) {
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
pub(super) fn settle_departing(shared: &Arc<Shared>) {
    if lock(&shared.departing).is_empty() {
        return;
    }
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
