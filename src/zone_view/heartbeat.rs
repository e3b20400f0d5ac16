//! The heartbeat writer: while this replica holds the Lease, it rewrites this owner id's
//! heartbeat record in every managed zone every `--owner-heartbeat-interval` (one small write
//! per zone: a create where the listing has none yet, else an update), so that `gateway-dns zone release` can tell this installation from a dead one
//! (`dns::registry::heartbeat`, docs/multi-cluster.md).
//!
//! It also finds a second installation configured with the same owner id: before each write it
//! reads the heartbeat back, and a heartbeat of this owner id written by another instance after
//! this one's last write, twice in a row, is a conflict. Both installations see it; while it
//! lasts neither writes DNS (each would take the other's records for its own and overwrite
//! them), the log says so at error level, and `gateway_dns_owner_id_conflict` reads 1. One
//! interval without a foreign write ends it. Twice, because a replica that has just lost the
//! Lease may write once more after the new holder's first write.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::dns::Provider;
use crate::dns::registry::heartbeat;
use crate::metrics::Metrics;

/// Foreign writes in a row that make a conflict.
const CONFLICT_AFTER: u32 = 2;

/// What the writer knows of other writers of its owner id.
#[derive(Debug, Default)]
pub struct Conflict {
    /// This term's last write (Unix seconds).
    last_written: Option<i64>,
    /// Foreign writes seen in a row.
    in_a_row: u32,
}

impl Conflict {
    /// Takes the heartbeats of this owner id read before a write (from every zone); true while
    /// another instance writes them too.
    pub fn observe(&mut self, instance: &str, read: &[heartbeat::Heartbeat]) -> bool {
        let foreign = self.last_written.is_some_and(|last| {
            read.iter()
                .any(|beat| beat.instance != instance && beat.time >= last)
        });
        self.in_a_row = if foreign { self.in_a_row + 1 } else { 0 };
        self.in_a_row >= CONFLICT_AFTER
    }

    pub fn written(&mut self, time: i64) {
        self.last_written = Some(time);
    }

    /// The Lease was lost: the next term starts afresh.
    pub fn forget(&mut self) {
        *self = Conflict::default();
    }
}

/// Writes heartbeats for the life of the process; `writes_allowed` turns false while another
/// installation writes this owner id's heartbeats too.
pub async fn run(
    provider: Arc<dyn Provider>,
    owner: String,
    instance: String,
    interval: Duration,
    mut leader: Option<watch::Receiver<bool>>,
    writes_allowed: watch::Sender<bool>,
    metrics: Arc<Metrics>,
) {
    let mut tick = tokio::time::interval(interval.max(Duration::from_secs(1)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut seen = Conflict::default();
    metrics.set_owner_id_conflict(false);
    loop {
        tick.tick().await;
        if let Some(lease) = leader.as_mut()
            && !*lease.borrow_and_update()
        {
            seen.forget();
            if !writes_allowed.send_replace(true) {
                metrics.set_owner_id_conflict(false);
            }
            // A new holder beats as soon as it holds the Lease, not an interval later: until
            // then `zone release` may take the installation for dead.
            loop {
                if lease.changed().await.is_err() {
                    // No election any more (the process is ending): nothing to wait for.
                    std::future::pending::<()>().await;
                }
                if *lease.borrow_and_update() {
                    break;
                }
            }
            tick.reset();
        }
        // The read goes through the provider's listing cache: one SOA query per zone when
        // nothing changed. It also says, per zone, whether the heartbeat is created or updated.
        let listed = match provider.records().await {
            Ok(listed) => listed,
            Err(error) => {
                // Without the listing neither the conflict nor create-or-update can be told;
                // a few missed beats are far inside any --dead-after.
                tracing::warn!(%error, "reading the heartbeat back failed; the next interval tries again");
                continue;
            }
        };
        let ours: Vec<heartbeat::Heartbeat> = heartbeat::latest_of(&listed, &owner);
        let now_conflicting = seen.observe(&instance, &ours);
        let was = !writes_allowed.send_replace(!now_conflicting);
        if now_conflicting != was {
            metrics.set_owner_id_conflict(now_conflicting);
            if now_conflicting {
                let others: Vec<&str> = ours
                    .iter()
                    .filter(|b| b.instance != instance)
                    .map(|b| b.instance.as_str())
                    .collect();
                tracing::error!(
                    owner = %owner,
                    instance = %instance,
                    ?others,
                    "another installation writes with this --txt-owner-id: DNS writes \
                     stop until one of them is given another owner id"
                );
            } else {
                tracing::info!(owner = %owner, "no other installation writes with this owner id any more: DNS writes resume");
            }
        }
        // The Lease may have gone while the listing was read: only its holder writes.
        if leader.as_ref().is_some_and(|lease| !*lease.borrow()) {
            continue;
        }
        let time = heartbeat::unix_now();
        let changes = heartbeat::changes(&listed, &owner, &instance, time, provider.zones());
        match provider.apply(&changes).await {
            Ok(()) => seen.written(time),
            Err(error) => {
                // A create that raced another writer's (or a stale listing) fails here; the
                // next interval lists again and updates.
                provider.invalidate_cache();
                tracing::warn!(%error, "writing the heartbeat record failed; the next interval tries again")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn beat(instance: &str, time: i64) -> heartbeat::Heartbeat {
        heartbeat::Heartbeat {
            owner: "east".into(),
            instance: instance.into(),
            time,
        }
    }

    #[test]
    fn a_second_writer_of_the_owner_id_is_a_conflict_after_two_writes_in_a_row() {
        let mut seen = Conflict::default();
        // Before this term's first write, another instance's heartbeat is the last holder's.
        assert!(!seen.observe("me", &[beat("old", 100)]));
        seen.written(110);
        // One foreign write after ours (a holder that just lost the Lease): not yet.
        assert!(!seen.observe("me", &[beat("old", 111)]));
        seen.written(120);
        // Ours read back: the count starts over.
        assert!(!seen.observe("me", &[beat("me", 120)]));
        seen.written(130);
        assert!(!seen.observe("me", &[beat("other", 131)]));
        seen.written(140);
        assert!(seen.observe("me", &[beat("other", 141)]));
        seen.written(150);
        assert!(
            !seen.observe("me", &[beat("me", 150)]),
            "one quiet interval ends it"
        );
        seen.forget();
        assert!(!seen.observe("me", &[beat("other", 999)]));
    }
}
