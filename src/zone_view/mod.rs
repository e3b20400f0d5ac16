//! The zone view (ARCHITECTURE.md, "Many clusters, one zone"): every replica reads the managed
//! zones from the provider it writes through, and tells the index which names another owner
//! holds there, or no owner at all, so that the webhook refuses them at `kubectl apply` and the
//! engine reports them as findings. The zones are the state every cluster already shares: their
//! ownership records say who holds each name.
//!
//! [`view_of`] is pure (a listing and the ownership registry in, the engine's
//! [`ZoneView`] out); [`run`] reads the provider on an interval. An RFC 2136 provider first
//! asks each zone's SOA and transfers only a zone whose serial moved, so the interval polls
//! serials. Until the view is first read, and while it is older than its bound, the index holds
//! an empty view: the cross-cluster checks are skipped (they fail open, as the webhook's
//! `failurePolicy: Ignore` does), and the log and `gateway_dns_zone_view_in_use` say so.

pub mod heartbeat;
pub mod notify;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::dns::registry::heartbeat::{gone_silent, unix_now};
use crate::dns::registry::{OwnershipIndex, TxtRegistry};
use crate::dns::{Endpoint, Provider};
use crate::engine::zone::{Sharing, ZoneHolder, ZoneView};
use crate::index::Index;
use crate::metrics::Metrics;
use crate::model::RecordType;

/// How the zone view reads the provider.
#[derive(Clone, Debug)]
pub struct ZoneViewConfig {
    /// Time between reads (`--zone-refresh-interval`).
    pub interval: Duration,
    /// A view not read whole for longer is not used (`--zone-view-max-age`).
    pub max_age: Duration,
    /// Names held by an owner silent for longer are free (`--adopt-after`).
    pub adopt_after: Option<Duration>,
}

/// The names of `listing` (every record of the managed zones) held by another owner id or by no
/// owner, under `registry`'s rules. A name with any A, AAAA or CNAME record of ours is ours
/// (any other record there is the sync loop's to report), and TXT records hold no name.
pub fn view_of(listing: &[Endpoint], registry: &TxtRegistry) -> ZoneView {
    view_without(listing, registry, &[])
}

/// [`view_of`] without the names held alone by the owners `gone` (silent longer than
/// `--adopt-after`): free for a claim here, whose sync loop takes them over.
pub fn view_without(listing: &[Endpoint], registry: &TxtRegistry, gone: &[String]) -> ZoneView {
    let index = OwnershipIndex::from_records(listing, registry);
    let addresses = || {
        listing.iter().filter(|record| {
            matches!(
                record.record_type,
                RecordType::A | RecordType::AAAA | RecordType::CNAME
            )
        })
    };
    // The other owners' values where a name is ours, or shared with others.
    let others_at = |txt_name: &str| {
        index
            .registry_values(txt_name)
            .iter()
            .filter(|(_, labels)| labels.owner != registry.owner_id)
            .map(|(_, labels)| labels)
    };
    let ours: BTreeSet<&str> = addresses()
        .filter(|record| {
            index
                .owner_of(&record.dns_name, record.record_type)
                .is_some_and(|owner| {
                    owner.owner == registry.owner_id
                        && (!owner.shared || others_at(owner.txt_name).next().is_none())
                })
        })
        .map(|record| record.dns_name.as_str())
        .collect();
    let mut view = ZoneView::new();
    for record in addresses().filter(|record| !ours.contains(record.dns_name.as_str())) {
        let owner = index.owner_of(&record.dns_name, record.record_type);
        // A name every value marks shared is held by the owners sharing it; else by the owner
        // external-dns reads, or by another owner when that one is us.
        let (shared, owner_labels) = match owner {
            Some(owner) => {
                let values = index.registry_values(owner.txt_name);
                let others: Vec<_> = others_at(owner.txt_name).collect();
                let all_shared = values.iter().all(|(_, l)| l.shared.is_some());
                let shared = all_shared.then(|| {
                    let mut owners: Vec<Box<str>> =
                        others.iter().map(|l| (*l.owner).into()).collect();
                    owners.sort_unstable();
                    owners.dedup();
                    Box::new(Sharing {
                        owners: owners.into_boxed_slice(),
                        record_types: Box::new([record.record_type]),
                        ttl: others.iter().find_map(|l| l.ttl),
                    })
                });
                let first = others
                    .iter()
                    .find(|l| all_shared || l.shared.is_none())
                    .or(others.first())
                    .map(|l| (l.owner.as_ref(), l.resource.as_deref()))
                    .unwrap_or((owner.owner, owner.resource));
                (shared, Some(first))
            }
            None => (None, None),
        };
        if shared.is_none()
            && let Some((owner, _)) = owner_labels
            && gone.iter().any(|g| g == owner)
        {
            continue;
        }
        view.hold(
            &record.dns_name,
            ZoneHolder {
                owner: owner_labels.map(|(o, _)| o.into()),
                resource: owner_labels.and_then(|(_, r)| r).map(Into::into),
                targets: record.targets.iter().map(|t| t.as_str().into()).collect(),
                shared,
            },
        );
    }
    view
}

/// Names held by another owner id, and by no owner.
fn counts(view: &ZoneView) -> (usize, usize) {
    view.iter().fold((0, 0), |(owned, unmanaged), (_, holder)| {
        match holder.owner {
            Some(_) => (owned + 1, unmanaged),
            None => (owned, unmanaged + 1),
        }
    })
}

/// Reads the provider every interval, and at once when `wake` is notified (a NOTIFY came), and
/// sets the view on the index, for the life of the process. A failed read keeps the last view
/// until it is older than the bound; then the index gets an empty one until a read succeeds.
pub async fn run(
    provider: Arc<dyn Provider>,
    registry: TxtRegistry,
    index: Index,
    metrics: Arc<Metrics>,
    config: ZoneViewConfig,
    wake: Arc<Notify>,
) {
    let started = Instant::now();
    let mut last_read: Option<Instant> = None;
    let mut in_use = false;
    let mut tick = tokio::time::interval(config.interval.max(Duration::from_secs(1)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    metrics.set_zone_view_state(Duration::ZERO, false);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = wake.notified() => {}
        }
        match provider.records().await {
            Ok(listing) => {
                let registry = registry.clone();
                let adopt_after = config.adopt_after;
                let Ok(view) = tokio::task::spawn_blocking(move || {
                    let gone = adopt_after.map_or_else(Vec::new, |after| {
                        gone_silent(&listing, after, unix_now(), &registry.owner_id)
                    });
                    view_without(&listing, &registry, &gone)
                })
                .await
                else {
                    continue;
                };
                let (owned, unmanaged) = counts(&view);
                metrics.set_zone_view(owned, unmanaged);
                index.set_zone_view(view);
                last_read = Some(Instant::now());
                if !in_use {
                    tracing::info!(
                        other_owners = owned,
                        unmanaged,
                        "zone view read: names held in the zones by others are refused"
                    );
                    in_use = true;
                }
            }
            Err(error) => {
                let age = last_read.unwrap_or(started).elapsed();
                tracing::warn!(
                    %error,
                    age_seconds = age.as_secs(),
                    "reading the zone view failed; the last one is kept until it is older than --zone-view-max-age"
                );
                if age > config.max_age && (in_use || last_read.is_none()) {
                    index.set_zone_view(ZoneView::new());
                    if in_use {
                        tracing::warn!(
                            max_age_seconds = config.max_age.as_secs(),
                            "zone view too old: names held in the zones by others are not \
                             checked until it is read again (the sync loop still never writes \
                             over them)"
                        );
                    }
                    in_use = false;
                }
            }
        }
        let age = last_read.map_or(started.elapsed(), |at| at.elapsed());
        metrics.set_zone_view_state(age, in_use);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dns::registry::ownership_value;

    fn a(name: &str, target: &str) -> Endpoint {
        Endpoint::new(name, RecordType::A, [target])
    }

    fn txt(name: &str, value: String) -> Endpoint {
        Endpoint::new(name, RecordType::TXT, [value])
    }

    #[test]
    fn other_owners_and_unmanaged_names_are_held_ours_are_not() {
        let registry = TxtRegistry::new("west");
        let listing = vec![
            a("b.example.com", "203.0.113.10"),
            txt(
                "a-b.example.com",
                ownership_value("east", Some("httproute/apps/b1")),
            ),
            a("mine.example.com", "192.0.2.1"),
            txt("a-mine.example.com", ownership_value("west", None)),
            a("legacy.example.com", "198.51.100.7"),
            txt("note.example.com", "v=spf1 -all".to_owned()),
        ];
        let view = view_of(&listing, &registry);
        let east = view.holder("b.example.com").unwrap();
        assert_eq!(east.owner.as_deref(), Some("east"));
        assert_eq!(east.resource.as_deref(), Some("httproute/apps/b1"));
        assert_eq!(&*east.targets, &["203.0.113.10".into()][..]);
        let unmanaged = view.holder("legacy.example.com").unwrap();
        assert_eq!(unmanaged.owner, None);
        assert!(view.holder("mine.example.com").is_none());
        assert!(view.holder("note.example.com").is_none());
        assert_eq!(counts(&view), (1, 1));
    }

    #[test]
    fn a_name_every_owner_shares_is_held_shared_and_refused_only_where_it_is_not_shared() {
        use crate::dns::registry::shared_value;
        use crate::engine::zone::refusal;
        let registry = TxtRegistry::new("west");
        let east = shared_value("east", Some("httproute/apps/b1"), ["203.0.113.10"], 300);
        let west = shared_value("west", Some("httproute/apps/b2"), ["203.0.113.20"], 300);
        let listing = vec![
            Endpoint::new(
                "b.example.com",
                RecordType::A,
                ["203.0.113.10", "203.0.113.20"],
            ),
            Endpoint::new("a-b.example.com", RecordType::TXT, [east.clone(), west]),
            a("c.example.com", "203.0.113.30"),
            txt("a-c.example.com", east),
        ];
        let view = view_of(&listing, &registry);
        let b = view.holder("b.example.com").unwrap();
        assert_eq!(
            b.shared.as_ref().map(|s| &*s.owners),
            Some(&["east".into()][..])
        );
        assert_eq!(b.shared.as_ref().and_then(|s| s.ttl), Some(300));
        assert_eq!(refusal(true, "b.example.com", b), None);
        let refused = refusal(false, "b.example.com", b).unwrap();
        assert!(
            refused.starts_with("b.example.com is shared across clusters by owner \"east\""),
            "{refused}"
        );
        // East alone shares c: west may join it where it shares it too.
        let c = view.holder("c.example.com").unwrap();
        assert_eq!(refusal(true, "c.example.com", c), None);
        // A name held alone is refused whether or not it is shared here.
        let alone = vec![
            a("d.example.com", "203.0.113.40"),
            txt("a-d.example.com", ownership_value("east", None)),
        ];
        let view = view_of(&alone, &registry);
        let d = view.holder("d.example.com").unwrap();
        assert_eq!(d.shared, None);
        assert!(
            refusal(true, "d.example.com", d)
                .unwrap()
                .contains("as its own")
        );
        assert!(refusal(false, "d.example.com", d).is_some());
    }
}
