//! Active health checks as the engine reads them (ARCHITECTURE.md, "Health checks"): the targets
//! the Lease holder's probes found failing, per Gateway. Pure data: the prober (`crate::health`)
//! decides when a target fails or passes again, the index holds the result, and the settlement
//! reads it (`settle::records_for`). The engine never probes and never reads a clock.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::Address;

/// The Lease annotation by which the holder shares the failing targets with every other replica
/// (and with `explain`): [`TargetHealth::to_annotation`].
pub const FAILING_TARGETS_ANNOTATION: &str = "gateway-dns.io/failing-targets";

/// The most failing targets the annotation carries; more are left out (and fail open there).
const MAX_SHARED: usize = 1000;
/// The most bytes the annotation takes, far below the API server's 256 KiB for all of an
/// object's annotations, so that a Lease write never fails for its size; targets past it are
/// left out as past [`MAX_SHARED`].
const MAX_SHARED_BYTES: usize = 32 * 1024;
/// The longest error text the annotation carries per target.
const MAX_SHARED_ERROR: usize = 256;

/// One failing target as the annotation carries it.
#[derive(Serialize, Deserialize)]
struct SharedTarget {
    gateway: String,
    address: std::net::IpAddr,
    since: i64,
    error: String,
}

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

    /// The failing targets as the Lease annotation [`FAILING_TARGETS_ANNOTATION`] carries them:
    /// a JSON list, at most [`MAX_SHARED`] targets and [`MAX_SHARED_BYTES`], with their errors
    /// cut to [`MAX_SHARED_ERROR`] bytes, so that the Lease stays small.
    pub fn to_annotation(&self) -> String {
        let mut text = String::from("[");
        let entries = self
            .iter()
            .filter_map(|(gateway, address, unhealthy)| match address {
                Address::Ip(ip) => Some(SharedTarget {
                    gateway: gateway.to_owned(),
                    address: *ip,
                    since: unhealthy.since,
                    error: cut(&unhealthy.error, MAX_SHARED_ERROR).to_owned(),
                }),
                _ => None,
            })
            .take(MAX_SHARED);
        for entry in entries {
            // Strings and numbers always serialize.
            let entry = serde_json::to_string(&entry).unwrap_or_default();
            if text.len() + entry.len() + 2 > MAX_SHARED_BYTES {
                break;
            }
            if text.len() > 1 {
                text.push(',');
            }
            text.push_str(&entry);
        }
        text.push(']');
        text
    }

    /// Reads [`Self::to_annotation`]'s text back; empty text is no failing target.
    pub fn from_annotation(text: &str) -> Result<TargetHealth, String> {
        let mut health = TargetHealth::new();
        if text.trim().is_empty() {
            return Ok(health);
        }
        let shared: Vec<SharedTarget> = serde_json::from_str(text).map_err(|e| e.to_string())?;
        for target in shared.into_iter().take(MAX_SHARED) {
            health.set_unhealthy(
                &target.gateway,
                Address::Ip(target.address),
                Unhealthy {
                    since: target.since,
                    error: target.error.into(),
                },
            );
        }
        Ok(health)
    }
}

/// The longest prefix of `text` of at most `max` bytes that ends on a character boundary.
fn cut(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_annotation_reads_back_what_it_was_made_of() {
        let mut health = TargetHealth::new();
        health.set_unhealthy(
            "infra/gw1",
            Address::Ip("10.0.0.1".parse().unwrap()),
            Unhealthy {
                since: 1_700_000_000,
                error: "connection refused".into(),
            },
        );
        health.set_unhealthy(
            "infra/gw2",
            Address::Ip("2001:db8::1".parse().unwrap()),
            Unhealthy {
                since: 1_700_000_001,
                error: "é".repeat(200).into(),
            },
        );
        let text = health.to_annotation();
        let back = TargetHealth::from_annotation(&text).unwrap();
        let error = |h: &TargetHealth| {
            h.unhealthy("infra/gw2", &Address::Ip("2001:db8::1".parse().unwrap()))
                .map(|u| u.error.len())
        };
        // The error is cut at a character boundary, the rest is whole.
        assert_eq!(error(&back), Some(256));
        assert_eq!(
            back.unhealthy("infra/gw1", &Address::Ip("10.0.0.1".parse().unwrap())),
            health.unhealthy("infra/gw1", &Address::Ip("10.0.0.1".parse().unwrap()))
        );
        assert!(TargetHealth::from_annotation("").unwrap().is_empty());
        // Many targets with long errors stay within the byte cap, as a list that reads back.
        let mut many = TargetHealth::new();
        for i in 0..1000u32 {
            many.set_unhealthy(
                "infra/gw",
                Address::Ip(std::net::IpAddr::from(std::net::Ipv4Addr::from(
                    0x0a00_0000 + i,
                ))),
                Unhealthy {
                    since: 0,
                    error: "\"quoted\" ".repeat(40).into(),
                },
            );
        }
        let text = many.to_annotation();
        assert!(text.len() <= MAX_SHARED_BYTES, "{}", text.len());
        let back = TargetHealth::from_annotation(&text).unwrap();
        assert!(back.iter().count() > 10);
        assert!(TargetHealth::from_annotation("{not json").is_err());
    }
}
