//! Address-loss grace (ARCHITECTURE.md, "Address-loss grace"): a Gateway whose `status.addresses`
//! go empty keeps publishing the addresses it last had for `--address-loss-grace`, so a load
//! balancer being re-provisioned or a Gateway controller restarting deletes no record.
//!
//! Pure: the time is always a parameter (Unix seconds), never read here.

use std::sync::Arc;
use std::time::Duration;

use crate::model::{Address, Gateway};

/// A Gateway's addresses as it last published them, and when it lost them.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AddressLoss {
    /// The last non-empty `status.addresses`, sorted, without duplicates.
    pub addresses: Arc<[Address]>,
    /// Unix seconds at which the Gateway was first seen without an address.
    pub since: i64,
}

impl AddressLoss {
    /// Unix seconds at which the grace ends and the normal removal follows.
    pub fn until(&self, grace: Duration) -> i64 {
        let grace = i64::try_from(grace.as_secs()).unwrap_or(i64::MAX);
        self.since.saturating_add(grace)
    }

    /// Is the grace still running at `now`?
    pub fn in_grace(&self, now: i64, grace: Duration) -> bool {
        now < self.until(grace)
    }
}

/// The address loss to keep for `current`, given what was stored before for the same Gateway
/// (`previous`: its object and the loss kept with it), at `now`.
///
/// A loss starts when a Gateway that had addresses has none; it keeps its first time (so the
/// claim on the names keeps its age and no second flap restarts the clock) until the addresses
/// return or the grace ends. With a zero grace there is never a loss.
pub fn address_loss(
    previous: Option<(&Gateway, Option<&AddressLoss>)>,
    current: &Gateway,
    now: i64,
    grace: Duration,
) -> Option<AddressLoss> {
    if grace.is_zero() || !current.addresses.is_empty() {
        return None;
    }
    let (before, kept) = previous?;
    if let Some(kept) = kept {
        return kept.in_grace(now, grace).then(|| kept.clone());
    }
    if before.addresses.is_empty() {
        return None;
    }
    let mut addresses = before.addresses.to_vec();
    addresses.sort();
    addresses.dedup();
    Some(AddressLoss {
        addresses: addresses.into(),
        since: now,
    })
}
