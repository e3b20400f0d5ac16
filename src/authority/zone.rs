//! The zones in memory: RRsets sorted for lookup, merged a batch of changes at a time; the
//! IXFR journal; the SOA serial policy (the module comment of `authority` says why it holds).

use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use hickory_proto::rr::rdata::{NS, SOA};
use hickory_proto::rr::{Name, RData, Record, SerialNumber};

use crate::dns::wire::{InvalidTarget, wire_name, wire_rrset};
use crate::dns::{Endpoint, in_zone, sort_later_wins};
use crate::model::RecordType;

use super::dnssec::{SignedZone, ZoneKey};

pub(super) const SOA_REFRESH: i32 = 3600;

pub(super) const SOA_RETRY: i32 = 600;

pub(super) const SOA_EXPIRE: i32 = 86400;

/// SOA MINIMUM: the negative-caching TTL (RFC 2308).
pub(super) const SOA_MINIMUM: u32 = 60;

/// Changes kept per zone for IXFR; an older serial gets the whole zone (AXFR-style).
pub(super) const JOURNAL_CHANGES: usize = 64;

/// Records (removed plus added) kept per zone's journal at most.
pub(super) const JOURNAL_RECORDS: usize = 20_000;

/// One RRset as the server keeps it: the owner name once, the targets without slack. The
/// server holds every record the sync loop publishes, so this is the sync side's steady memory
/// (docs/benchmarks.md, "Memory of `serve`").
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct RrSet {
    pub(super) name: Box<str>,
    pub(super) record_type: RecordType,
    pub(super) ttl: u32,
    /// Sorted, each once (as [`Endpoint::targets`]).
    pub(super) targets: Box<[Box<str>]>,
}

impl RrSet {
    pub(super) fn from_endpoint(endpoint: &Endpoint) -> RrSet {
        RrSet {
            name: endpoint.dns_name.as_str().into(),
            record_type: endpoint.record_type,
            ttl: endpoint.ttl_or_default(),
            targets: endpoint.targets.iter().map(|t| t.as_str().into()).collect(),
        }
    }

    pub(super) fn key(&self) -> (&str, RecordType) {
        (&self.name, self.record_type)
    }

    pub(super) fn endpoint(&self) -> Endpoint {
        Endpoint {
            dns_name: self.name.to_string(),
            record_type: self.record_type,
            targets: self.targets.iter().map(|t| t.to_string()).collect(),
            ttl: Some(self.ttl),
            resource: None,
        }
    }

    pub(super) fn wire(&self) -> Result<Vec<Record>, InvalidTarget> {
        wire_rrset(
            &self.name,
            self.record_type,
            self.targets.iter().map(|t| &**t),
            self.ttl,
        )
    }
}

pub(super) struct Zone {
    pub(super) apex: String,
    pub(super) serial: u32,
    /// Every RRset, sorted by (name, type): looked up by binary search, rewritten by merging a
    /// batch of changes in.
    pub(super) rrsets: Vec<RrSet>,
    /// The names that exist without records of their own: ancestors of records up to the apex
    /// (empty non-terminals). The apex and the owners of records exist too.
    pub(super) empty_non_terminals: BTreeSet<Box<str>>,
    /// The latest changes, oldest first, for IXFR; bounded by [`JOURNAL_CHANGES`] and
    /// [`JOURNAL_RECORDS`]. Kept only when there are secondaries to ask for them.
    pub(super) journal: VecDeque<Delta>,
    /// The zone signed for the current serial, when DNSSEC is on.
    pub(super) signed: Option<SignedZone>,
}

/// The final state of the RRsets one batch of changes touches (`None`: deleted), sorted by
/// key; of two changes of one RRset, the later.
pub(super) struct Touched<'a>(Vec<((&'a str, RecordType), Option<&'a Endpoint>)>);

impl<'a> FromIterator<((&'a str, RecordType), Option<&'a Endpoint>)> for Touched<'a> {
    fn from_iter<I>(changes: I) -> Self
    where
        I: IntoIterator<Item = ((&'a str, RecordType), Option<&'a Endpoint>)>,
    {
        let mut changes: Vec<_> = changes.into_iter().collect();
        sort_later_wins(&mut changes, |(a, _), (b, _)| a.cmp(b));
        Touched(changes)
    }
}

/// One RRset before and after a change (`None`: absent).
pub(super) type Difference = (Option<RrSet>, Option<RrSet>);

/// One change of a zone, as IXFR sends it (RFC 1995).
pub(super) struct Delta {
    pub(super) from: u32,
    pub(super) to: u32,
    pub(super) removed: Vec<Record>,
    pub(super) added: Vec<Record>,
}

impl Zone {
    pub(super) fn new(apex: String, serial: u32) -> Self {
        Zone {
            apex,
            serial,
            rrsets: Vec::new(),
            empty_non_terminals: BTreeSet::new(),
            journal: VecDeque::new(),
            signed: None,
        }
    }

    pub(super) fn record(&mut self, delta: Delta) {
        self.journal.push_back(delta);
        let mut records: usize = self
            .journal
            .iter()
            .map(|d| d.removed.len() + d.added.len())
            .sum();
        while self.journal.len() > JOURNAL_CHANGES || records > JOURNAL_RECORDS {
            let Some(oldest) = self.journal.pop_front() else {
                break;
            };
            records -= oldest.removed.len() + oldest.added.len();
        }
    }

    /// The changes from `serial` to the current one, when the journal still holds them all.
    pub(super) fn changes_since(&self, serial: u32) -> Option<Vec<&Delta>> {
        let first = self.journal.iter().position(|d| d.from == serial)?;
        let deltas: Vec<&Delta> = self.journal.iter().skip(first).collect();
        // Each delta must start where the one before ended, and the last end at the current.
        let contiguous = deltas.windows(2).all(|pair| pair[0].to == pair[1].from);
        (contiguous && deltas.last().is_some_and(|d| d.to == self.serial)).then_some(deltas)
    }

    pub(super) fn reindex(&mut self) {
        let mut empty = BTreeSet::new();
        for set in &self.rrsets {
            let mut current = &*set.name;
            while let Some((_, parent)) = current.split_once('.') {
                if parent.len() <= self.apex.len() || self.has_records_at(parent) {
                    break;
                }
                if !empty.insert(Box::<str>::from(parent)) {
                    break;
                }
                current = parent;
            }
        }
        self.empty_non_terminals = empty;
    }

    /// Merges the final state of the `touched` RRsets in. `None` when nothing changed; else
    /// the RRsets that changed as (before, after) when `keep` asks for them (for the journal),
    /// or no pairs.
    pub(super) fn merge(&mut self, touched: &Touched<'_>, keep: bool) -> Option<Vec<Difference>> {
        let creates = touched
            .0
            .iter()
            .filter(|(_, wanted)| wanted.is_some())
            .count();
        let mut merged = Vec::with_capacity(self.rrsets.len() + creates);
        let mut old = std::mem::take(&mut self.rrsets).into_iter().peekable();
        let (mut changes, mut differences) = (0usize, Vec::new());
        for &(key, wanted) in &touched.0 {
            while let Some(set) = old.next_if(|set| set.key() < key) {
                merged.push(set);
            }
            let before = old.next_if(|set| set.key() == key);
            let after = wanted.map(RrSet::from_endpoint);
            if before != after {
                changes += 1;
                if keep {
                    differences.push((before, after.clone()));
                }
            }
            merged.extend(after);
        }
        merged.extend(old);
        merged.shrink_to_fit();
        self.rrsets = merged;
        (changes > 0).then_some(differences)
    }

    /// Journals one change for IXFR: the records removed and added (RFC 1995). A change larger
    /// than the journal may hold empties it: older serials get the whole zone.
    pub(super) fn journal_change(&mut self, from: u32, to: u32, differences: &[Difference]) {
        let size = |set: &Option<RrSet>| set.as_ref().map_or(0, |set| set.targets.len());
        let records: usize = differences
            .iter()
            .map(|(before, after)| size(before) + size(after))
            .sum();
        if records > JOURNAL_RECORDS {
            self.journal.clear();
            return;
        }
        let as_records = |set: &Option<RrSet>| -> Vec<Record> {
            set.as_ref()
                .and_then(|set| set.wire().ok())
                .unwrap_or_default()
        };
        let (mut removed, mut added) = (Vec::new(), Vec::new());
        for (before, after) in differences {
            let (old, new) = (as_records(before), as_records(after));
            removed.extend(old.iter().filter(|r| !new.contains(r)).cloned());
            added.extend(new.iter().filter(|r| !old.contains(r)).cloned());
        }
        self.record(Delta {
            from,
            to,
            removed,
            added,
        });
    }

    /// The RRset of that name and type.
    pub(super) fn rrset(&self, name: &str, record_type: RecordType) -> Option<&RrSet> {
        self.rrsets
            .binary_search_by(|set| set.key().cmp(&(name, record_type)))
            .ok()
            .map(|at| &self.rrsets[at])
    }

    /// Signs the zone as it is now (after a change of serial); returns what changed in the
    /// signed zone, as IXFR sends it. `None` without keys.
    pub(super) fn sign(
        &mut self,
        keys: &[Arc<ZoneKey>],
        soa_ttl: u32,
        now: u64,
    ) -> Option<(Vec<Record>, Vec<Record>)> {
        if keys.is_empty() {
            return None;
        }
        let apex = wire_name(&self.apex).ok()?;
        let records = zone_records(self, soa_ttl);
        let nsec_ttl = soa_ttl.min(SOA_MINIMUM);
        let previous = self.signed.take();
        let signed = SignedZone::build(
            &apex,
            records,
            keys,
            soa_ttl,
            nsec_ttl,
            now,
            previous.as_ref(),
        );
        let diff = match &previous {
            Some(previous) => previous.diff(&signed),
            None => (Vec::new(), signed.records_without_soa().cloned().collect()),
        };
        self.signed = Some(signed);
        Some(diff)
    }

    pub(super) fn has_records_at(&self, name: &str) -> bool {
        let first = self.rrsets.partition_point(|set| &*set.name < name);
        self.rrsets.get(first).is_some_and(|set| &*set.name == name)
    }

    /// Whether the name exists: the apex, an owner of records, or an empty non-terminal.
    pub(super) fn has_name(&self, name: &str) -> bool {
        name == self.apex || self.has_records_at(name) || self.empty_non_terminals.contains(name)
    }
}

pub(super) struct Store {
    pub(super) zones: Vec<Zone>,
    /// Moves whenever what the zones answer changes (records, serial, signatures): the UDP
    /// answer caches empty themselves then. Shared so the receive loops read it without the lock.
    pub(super) generation: Arc<AtomicU64>,
}

impl Store {
    /// Called with the write lock held after any change to the zones.
    pub(super) fn changed(&self) {
        self.generation.fetch_add(1, Ordering::Release);
    }

    pub(super) fn zone(&self, name: &str) -> Option<&Zone> {
        self.zones
            .iter()
            .filter(|zone| in_zone(name, &zone.apex))
            .max_by_key(|zone| zone.apex.len())
    }
}

/// Serials are the start of a [`SERIAL_WINDOW`] in Unix seconds, plus the changes made since
/// in that window. See the module comment for why this is the same on every replica and never
/// goes backwards.
pub(super) const SERIAL_WINDOW: u64 = 60;

pub(super) fn window_start(now: u64) -> u32 {
    // Unix seconds fit in 32 bits until 2106; past that they wrap, as RFC 1982 serials may.
    ((now / SERIAL_WINDOW) * SERIAL_WINDOW) as u32
}

/// The serial a server starts with: the start of the next window, above every serial the
/// previous process gave out (those are below the end of the window it last changed in).
pub(super) fn initial_serial(now: u64) -> u32 {
    window_start(now).wrapping_add(SERIAL_WINDOW as u32)
}

/// The serial after a change: the start of the current window when that is higher (RFC 1982
/// order), else one more than now.
pub(super) fn next_serial(current: u32, now: u64) -> u32 {
    let window = window_start(now);
    if SerialNumber::from(window) > SerialNumber::from(current) {
        window
    } else {
        current.wrapping_add(1)
    }
}

/// The zone's records: SOA, NS, every RRset in name order.
pub(super) fn zone_records(zone: &Zone, soa_ttl: u32) -> Vec<Record> {
    let mut records = vec![soa_record(zone, soa_ttl, false), ns_record(zone, soa_ttl)];
    for set in &zone.rrsets {
        if let Ok(wire) = set.wire() {
            records.extend(wire);
        }
    }
    records
}

pub(super) fn soa_with_serial(zone: &Zone, ttl: u32, serial: u32) -> Record {
    let apex = wire_name(&zone.apex).unwrap_or_else(|_| Name::root());
    let mname = wire_name(&format!("ns1.{}", zone.apex)).unwrap_or_else(|_| apex.clone());
    let rname = wire_name(&format!("hostmaster.{}", zone.apex)).unwrap_or_else(|_| apex.clone());
    let soa = SOA::new(
        mname,
        rname,
        serial,
        SOA_REFRESH,
        SOA_RETRY,
        SOA_EXPIRE,
        SOA_MINIMUM,
    );
    Record::from_rdata(apex, ttl, RData::SOA(soa))
}

pub(super) fn soa_record(zone: &Zone, ttl: u32, negative: bool) -> Record {
    // RFC 2308: the SOA in a negative answer carries min(SOA TTL, MINIMUM).
    let ttl = if negative { ttl.min(SOA_MINIMUM) } else { ttl };
    soa_with_serial(zone, ttl, zone.serial)
}

pub(super) fn ns_record(zone: &Zone, ttl: u32) -> Record {
    let apex = wire_name(&zone.apex).unwrap_or_else(|_| Name::root());
    let ns = wire_name(&format!("ns1.{}", zone.apex)).unwrap_or_else(|_| apex.clone());
    Record::from_rdata(apex, ttl, RData::NS(NS(ns)))
}

/// Unix seconds now: serials and signatures follow the clock.
pub(super) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dns::wire::wire_records;

    #[test]
    fn serials_follow_minute_windows_and_never_go_back() {
        let t = 1_800_000_000; // a window start
        let start = initial_serial(t + 5);
        assert_eq!(start, (t + 60) as u32, "starts at the next window");
        // Same minute: one more each change; a later quiet minute: that window's start.
        assert_eq!(next_serial(start, t + 10), start + 1);
        assert_eq!(next_serial(start + 1, t + 130), (t + 120) as u32);
        // A restart in the minute of the last change starts above it.
        let last = next_serial(next_serial((t + 120) as u32, t + 125), t + 126);
        assert!(initial_serial(t + 127) > last);
        // Two replicas with different histories agree on a change after a quiet minute.
        assert_eq!(next_serial(start + 7, t + 200), next_serial(start, t + 201));
    }

    #[test]
    fn the_journal_is_bounded_and_answers_only_unbroken_chains() {
        let mut zone = Zone::new("example.com".into(), 100);
        let a = || {
            wire_records(
                &Endpoint::new("a.example.com", RecordType::A, ["192.0.2.1"]),
                60,
            )
        };
        for serial in 100..100 + JOURNAL_CHANGES as u32 + 10 {
            zone.record(Delta {
                from: serial,
                to: serial + 1,
                removed: Vec::new(),
                added: a().unwrap(),
            });
            zone.serial = serial + 1;
        }
        assert_eq!(zone.journal.len(), JOURNAL_CHANGES);
        assert!(zone.changes_since(100).is_none(), "fell out: AXFR instead");
        assert_eq!(
            zone.changes_since(zone.serial - 2).map(|d| d.len()),
            Some(2)
        );
        assert!(zone.changes_since(zone.serial + 5).is_none());
    }
}
