//! Active health checks as the engine reads them (ARCHITECTURE.md, "Health checks"): the targets
//! the Lease holder's probes found failing, per Gateway. Pure data: the prober (`crate::health`)
//! decides when a target fails or passes again, the index holds the result, and the settlement
//! reads it (`settle::records_for`). The engine never probes and never reads a clock.

use std::collections::BTreeMap;

use crate::model::Address;

/// A target whose probes failed as many times in a row as its failure threshold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unhealthy {
    /// Unix seconds of the probe that made it unhealthy.
    pub since: i64,
    /// What that probe said. Kept as of the change (later failures do not rewrite it), so the
    /// findings made from it stay the same until the target passes again.
    pub error: Box<str>,
}

/// The failing targets, by Gateway (`namespace/name`) and address. A target that is not listed
/// is healthy or not probed: both count as serving.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TargetHealth {
    unhealthy: BTreeMap<Box<str>, BTreeMap<Address, Unhealthy>>,
}

static NONE: TargetHealth = TargetHealth::new();

impl TargetHealth {
    pub const fn new() -> TargetHealth {
        TargetHealth {
            unhealthy: BTreeMap::new(),
        }
    }

    /// No failing target: what a world without probes reads.
    pub fn none() -> &'static TargetHealth {
        &NONE
    }

    pub fn is_empty(&self) -> bool {
        self.unhealthy.is_empty()
    }

    /// Marks `address` of `gateway` failing.
    pub fn set_unhealthy(&mut self, gateway: &str, address: Address, unhealthy: Unhealthy) {
        self.unhealthy
            .entry(gateway.into())
            .or_default()
            .insert(address, unhealthy);
    }

    /// Is `address` of `gateway` failing?
    pub fn unhealthy(&self, gateway: &str, address: &Address) -> Option<&Unhealthy> {
        self.unhealthy.get(gateway)?.get(address)
    }

    /// Every failing target: (Gateway, address, since when and why).
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Address, &Unhealthy)> {
        self.unhealthy.iter().flat_map(|(gateway, targets)| {
            targets
                .iter()
                .map(move |(address, unhealthy)| (&**gateway, address, unhealthy))
        })
    }
}
