//! Heartbeat records: each owner id's installation says it is alive in every zone it writes, so
//! that an owner that is gone can be told from one that is quiet (docs/multi-cluster.md). One TXT
//! record per owner and zone, at `_gateway-dns.<owner label>.<zone>`, rewritten by the Lease
//! holder every `--owner-heartbeat-interval`, holding the time, the writing process's instance id
//! and the owner id itself (the name's label is only a readable slot: the value says whose it is).

use std::collections::BTreeMap;

use crate::dns::{Changes, Endpoint};
use crate::model::RecordType;

/// The first label of every heartbeat name.
pub const LABEL: &str = "_gateway-dns";
const MARK: &str = "gateway-dns-heartbeat";

/// One heartbeat as read from the zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Heartbeat {
    pub owner: String,
    pub instance: String,
    /// Unix seconds.
    pub time: i64,
}

/// The DNS label an owner id gets in its heartbeat's name: lower case, with every character
/// that is no letter, digit or `-` made a `-`, at most 63 bytes.
pub fn owner_label(owner: &str) -> String {
    let mut label: String = owner
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    label.truncate(63);
    if label.is_empty() {
        label.push('-');
    }
    label
}

/// The heartbeat record's name for `owner` in `zone`.
pub fn name(owner: &str, zone: &str) -> String {
    format!("{LABEL}.{}.{zone}", owner_label(owner))
}

/// The heartbeat record's value.
pub fn value(owner: &str, instance: &str, time: i64) -> String {
    format!("{MARK};time={time};instance={instance};owner={owner}")
}

/// The heartbeat record of `owner` in `zone`, as the providers write it.
pub fn record(owner: &str, instance: &str, time: i64, zone: &str) -> Endpoint {
    Endpoint::new(
        &name(owner, zone),
        RecordType::TXT,
        [value(owner, instance, time)],
    )
    .with_ttl(60)
}

/// The change that writes `owner`'s heartbeat in every zone of `zones`, after `listing` (the
/// zones as last listed): an update where the listing holds this owner's heartbeat record, a
/// create where it does not. A create rather than an update of nothing, because providers that
/// name the record an update replaces (external-dns's webhook protocol: `updateOld`) can only
/// update what they listed.
pub fn changes(
    listing: &[Endpoint],
    owner: &str,
    instance: &str,
    time: i64,
    zones: &[String],
) -> Changes {
    let mut changes = Changes::default();
    for zone in zones {
        let beat = record(owner, instance, time, zone);
        let listed = listing
            .iter()
            .any(|r| r.record_type == RecordType::TXT && r.dns_name == beat.dns_name);
        if listed {
            changes.update.push(beat);
        } else {
            changes.create.push(beat);
        }
    }
    changes
}

/// True when `dns_name` is a heartbeat record's name.
pub fn is_name(dns_name: &str) -> bool {
    dns_name
        .strip_prefix(LABEL)
        .is_some_and(|rest| rest.starts_with('.'))
}

/// A heartbeat value, when `value` is one.
pub fn parse(value: &str) -> Option<Heartbeat> {
    let rest = value.strip_prefix(MARK)?.strip_prefix(";time=")?;
    let (time, rest) = rest.split_once(";instance=")?;
    let (instance, owner) = rest.split_once(";owner=")?;
    Some(Heartbeat {
        owner: owner.to_owned(),
        instance: instance.to_owned(),
        time: time.parse().ok()?,
    })
}

/// Every heartbeat in a listing.
fn all(listing: &[Endpoint]) -> impl Iterator<Item = Heartbeat> + '_ {
    listing
        .iter()
        .filter(|r| r.record_type == RecordType::TXT && is_name(&r.dns_name))
        .flat_map(|r| r.targets.iter().filter_map(|v| parse(v)))
}

/// The latest heartbeat of each owner in a listing (over every zone).
pub fn latest(listing: &[Endpoint]) -> BTreeMap<String, Heartbeat> {
    let mut out: BTreeMap<String, Heartbeat> = BTreeMap::new();
    for beat in all(listing) {
        match out.get(&beat.owner) {
            Some(known) if known.time >= beat.time => {}
            _ => {
                out.insert(beat.owner.clone(), beat);
            }
        }
    }
    out
}

/// The owners but `us` whose last heartbeat in `listing` is older than `after` at `now` (Unix
/// seconds): gone, for `--adopt-after`. An owner that writes no heartbeat is never among them:
/// nothing says it is gone.
pub fn gone_silent(
    listing: &[Endpoint],
    after: std::time::Duration,
    now: i64,
    us: &str,
) -> Vec<String> {
    let after = i64::try_from(after.as_secs()).unwrap_or(i64::MAX);
    latest(listing)
        .into_values()
        .filter(|beat| beat.owner != us && now.saturating_sub(beat.time) > after)
        .map(|beat| beat.owner)
        .collect()
}

/// The time in Unix seconds, as heartbeats hold it.
pub fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// The heartbeats of `owner` in a listing, one per zone.
pub fn latest_of(listing: &[Endpoint], owner: &str) -> Vec<Heartbeat> {
    all(listing).filter(|beat| beat.owner == owner).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_heartbeat_reads_back_whatever_the_owner_id() {
        for owner in ["east", "East Cluster/1", "a;b=c"] {
            let written = record(owner, "4f2a", 1_764_900_000, "example.com");
            assert!(written.dns_name.starts_with("_gateway-dns."));
            assert!(written.dns_name.ends_with(".example.com"));
            let beat = parse(written.targets.first().unwrap()).unwrap();
            assert_eq!(
                beat,
                Heartbeat {
                    owner: owner.to_owned(),
                    instance: "4f2a".to_owned(),
                    time: 1_764_900_000
                }
            );
        }
        assert_eq!(
            name("East Cluster/1", "example.com"),
            "_gateway-dns.east-cluster-1.example.com"
        );
        assert_eq!(parse("heritage=external-dns,external-dns/owner=east"), None);
    }

    #[test]
    fn the_latest_heartbeat_of_each_owner_counts() {
        let listing = vec![
            record("east", "a", 100, "example.com"),
            record("east", "b", 200, "example.org"),
            record("west", "c", 150, "example.com"),
            Endpoint::new("_gateway-dns.x.example.com", RecordType::TXT, ["not one"]),
        ];
        let latest = latest(&listing);
        assert_eq!(latest["east"].time, 200);
        assert_eq!(latest["east"].instance, "b");
        assert_eq!(latest["west"].time, 150);
        assert_eq!(latest.len(), 2);
    }

    #[test]
    fn a_zone_without_this_owners_heartbeat_gets_a_create_the_others_an_update() {
        let zones = vec!["example.com".to_owned(), "example.org".to_owned()];
        let listing = vec![
            record("east", "old", 100, "example.com"),
            // Another owner's heartbeat in example.org is not this owner's.
            record("west", "w", 100, "example.org"),
            Endpoint::new(
                "a-b.example.org",
                RecordType::TXT,
                ["heritage=external-dns"],
            ),
        ];
        let changes = changes(&listing, "east", "new", 200, &zones);
        assert_eq!(changes.update, [record("east", "new", 200, "example.com")]);
        assert_eq!(changes.create, [record("east", "new", 200, "example.org")]);
        assert!(changes.delete.is_empty());
        // Nothing listed yet: a create in every zone.
        let first = super::changes(&[], "east", "new", 200, &zones);
        assert_eq!(first.create.len(), 2);
        assert!(first.update.is_empty());
    }

    #[test]
    fn heartbeat_names_start_with_the_whole_label() {
        assert!(is_name("_gateway-dns.east.example.com"));
        assert!(!is_name("_gateway-dnsx.east.example.com"));
        assert!(!is_name("a-_gateway-dns.example.com"));
    }
}
