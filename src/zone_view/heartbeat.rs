//! The heartbeat writer: while this replica holds the Lease, it rewrites this owner id's
//! heartbeat record in every managed zone every `--owner-heartbeat-interval` (one small UPDATE
//! per zone), so that `gateway-dns zone release` can tell this installation from a dead one
//! (`dns::registry::heartbeat`, docs/multi-cluster.md).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::dns::registry::heartbeat;
use crate::dns::{Changes, Provider};

/// Writes heartbeats for the life of the process.
pub async fn run(
    provider: Arc<dyn Provider>,
    owner: String,
    instance: String,
    interval: Duration,
    mut leader: Option<watch::Receiver<bool>>,
) {
    let mut tick = tokio::time::interval(interval.max(Duration::from_secs(1)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if !leader.as_mut().is_none_or(|l| *l.borrow_and_update()) {
            continue;
        }
        let time = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        let changes = Changes {
            update: provider
                .zones()
                .iter()
                .map(|zone| heartbeat::record(&owner, &instance, time, zone))
                .collect(),
            ..Changes::default()
        };
        if let Err(error) = provider.apply(&changes).await {
            tracing::warn!(%error, "writing the heartbeat record failed; the next interval tries again");
        }
    }
}
