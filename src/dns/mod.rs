//! DNS layer: the records we want or have, and the providers that hold them.
//!
//! Everything above this module (the engine, the sync loop) speaks in [`Endpoint`]s: one RRset,
//! named in lower case without the trailing dot. Providers translate to their wire or API format.

pub(crate) mod batches;
mod http;
pub use http::ExchangeError;
pub mod provider;
pub mod registry;
pub mod txt_crypto;
pub(crate) mod wire;
pub mod zone_file;

use std::collections::BTreeMap;
use std::fmt;

use futures::future::BoxFuture;

use crate::model::RecordType;
use crate::model::dns_name::canonical;

pub use crate::model::DEFAULT_TTL;

/// One RRset we want or have.
///
/// `dns_name`: lower-case, no trailing dot, may start with `*.` (wildcard).
/// `targets`: addresses for A/AAAA, a host name (lower-case, no trailing dot) for CNAME, the
/// text (character-strings joined, no quotes) for TXT.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub dns_name: String,
    pub record_type: RecordType,
    pub targets: Targets,
    /// `None` → the configured default ([`DEFAULT_TTL`]).
    pub ttl: Option<u32>,
    /// Owner resource for the registry, e.g. `httproute/shop/web`.
    pub resource: Option<String>,
}

impl Endpoint {
    pub fn new<I, S>(dns_name: &str, record_type: RecordType, targets: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Endpoint {
            dns_name: canonical(dns_name).into_owned(),
            record_type,
            targets: targets.into_iter().map(Into::into).collect(),
            ttl: None,
            resource: None,
        }
    }

    pub fn with_ttl(mut self, ttl: u32) -> Self {
        self.ttl = Some(ttl);
        self
    }

    pub fn with_resource(mut self, resource: impl Into<String>) -> Self {
        self.resource = Some(resource.into());
        self
    }

    pub fn key(&self) -> (&str, RecordType) {
        (&self.dns_name, self.record_type)
    }

    pub fn ttl_or_default(&self) -> u32 {
        self.ttl.unwrap_or(DEFAULT_TTL)
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let targets: Vec<&str> = self.targets.iter().map(String::as_str).collect();
        write!(
            f,
            "{} {} {}",
            self.dns_name,
            self.record_type,
            targets.join(",")
        )?;
        if let Some(ttl) = self.ttl {
            write!(f, " ttl={ttl}")?;
        }
        Ok(())
    }
}

/// The targets of one RRset: sorted, each once. A boxed slice rather than a `BTreeSet`: an
/// RRset has one or a few targets, and a B-tree's first node alone costs some 300 bytes, which
/// every endpoint of a sync pass (desired, listed, planned) paid (docs/benchmarks.md, "Memory
/// of `serve`").
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Targets(Box<[String]>);

impl Targets {
    pub fn new() -> Targets {
        Targets::default()
    }

    pub fn iter(&self) -> std::slice::Iter<'_, String> {
        self.0.iter()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn contains(&self, target: &str) -> bool {
        self.0
            .binary_search_by(|probe| probe.as_str().cmp(target))
            .is_ok()
    }

    /// The first target in sorted order.
    pub fn first(&self) -> Option<&String> {
        self.0.first()
    }

    /// Adds `target` unless it is there; true when it was added.
    pub fn insert(&mut self, target: String) -> bool {
        match self.0.binary_search(&target) {
            Ok(_) => false,
            Err(at) => {
                let mut targets = std::mem::take(&mut self.0).into_vec();
                targets.insert(at, target);
                self.0 = targets.into_boxed_slice();
                true
            }
        }
    }
}

impl FromIterator<String> for Targets {
    fn from_iter<I: IntoIterator<Item = String>>(iter: I) -> Targets {
        let mut targets: Vec<String> = iter.into_iter().collect();
        targets.sort_unstable();
        targets.dedup();
        Targets(targets.into_boxed_slice())
    }
}

impl<const N: usize> From<[String; N]> for Targets {
    fn from(targets: [String; N]) -> Targets {
        targets.into_iter().collect()
    }
}

impl<'a> IntoIterator for &'a Targets {
    type Item = &'a String;
    type IntoIter = std::slice::Iter<'a, String>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl IntoIterator for Targets {
    type Item = String;
    type IntoIter = std::vec::IntoIter<String>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_vec().into_iter()
    }
}

/// A batch of RRset-level changes. Providers apply `delete`, then `update`, then `create`, each
/// list in order (the plan relies on this to write ownership before records and delete it
/// after), then `shared`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    /// RRsets that do not exist yet.
    pub create: Vec<Endpoint>,
    /// RRsets replaced wholesale by the new value.
    pub update: Vec<Endpoint>,
    /// RRsets removed (matched by name and type).
    pub delete: Vec<Endpoint>,
    /// This owner's part of names shared across clusters, added and removed record by record.
    /// A provider that only replaces whole RRsets gets them as such ([`Changes::whole_rrsets`]).
    pub shared: Vec<SharedEdit>,
    /// For each update and delete (by the changed RRset's name and type), the ownership TXT
    /// RRset that made it ours, as listed: a provider that can make the change conditional
    /// (RFC 2136 prerequisites) writes only while that RRset is still exactly so.
    pub owned_by: BTreeMap<(String, RecordType), Endpoint>,
    /// Records taken over from an owner gone silent (`--adopt-after`): (name, type, owner).
    pub adopted: Vec<(String, RecordType, String)>,
}

impl Changes {
    pub fn is_empty(&self) -> bool {
        self.create.is_empty()
            && self.update.is_empty()
            && self.delete.is_empty()
            && self.shared.is_empty()
    }

    pub fn len(&self) -> usize {
        self.create.len() + self.update.len() + self.delete.len() + self.shared.len()
    }

    /// The shared edits as whole-RRset creates, updates and deletes over the RRsets they were
    /// planned against, for providers that can only replace RRsets: what another owner writes
    /// between that listing and this write is overwritten, and written again by its next pass.
    pub fn whole_rrsets(mut self) -> Changes {
        for edit in std::mem::take(&mut self.shared) {
            let (data, txt) = edit.outcome();
            // Ownership is created before the record and deleted after it, as the plan orders.
            let mut deletes = Vec::new();
            for (before, after) in [(edit.listed_txt, txt), (edit.listed, data)] {
                match (before, after) {
                    (None, Some(after)) => self.create.push(after),
                    (Some(_), Some(after)) => self.update.push(after),
                    (Some(before), None) => deletes.push(before),
                    (None, None) => {}
                }
            }
            self.delete.extend(deletes.into_iter().rev());
        }
        self
    }
}

/// One owner's edit of a name shared across clusters: targets added to and removed from the
/// name's RRset, and the owner's ownership value at the TXT name replaced, never another
/// owner's record. RFC 2136 sends it as one UPDATE whose prerequisites are both RRsets as
/// listed, so that it applies to exactly the state it was planned against or not at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedEdit {
    pub dns_name: String,
    pub record_type: RecordType,
    pub ttl: u32,
    pub add: Vec<String>,
    pub remove: Vec<String>,
    /// The name's RRset as listed (`None`: none).
    pub listed: Option<Endpoint>,
    pub txt_name: String,
    /// Our ownership value written, and ours removed (a value replaced is both).
    pub txt_add: Option<String>,
    pub txt_remove: Option<String>,
    /// The TXT RRset at `txt_name` as listed (`None`: none).
    pub listed_txt: Option<Endpoint>,
}

impl SharedEdit {
    /// The name's RRset and the TXT RRset once the edit is applied (`None`: gone).
    pub fn outcome(&self) -> (Option<Endpoint>, Option<Endpoint>) {
        let data = edited(
            self.listed.as_ref(),
            &self.dns_name,
            self.record_type,
            &self.add,
            &self.remove,
            self.ttl,
        );
        let txt = edited(
            self.listed_txt.as_ref(),
            &self.txt_name,
            RecordType::TXT,
            self.txt_add.as_slice(),
            self.txt_remove.as_slice(),
            self.listed_txt
                .as_ref()
                .map_or(DEFAULT_TTL, Endpoint::ttl_or_default),
        );
        (data, txt)
    }
}

/// `listed` with `add` added and `remove` removed, at `ttl`; `None` when nothing is left.
fn edited(
    listed: Option<&Endpoint>,
    dns_name: &str,
    record_type: RecordType,
    add: &[String],
    remove: &[String],
    ttl: u32,
) -> Option<Endpoint> {
    let targets: Targets = listed
        .into_iter()
        .flat_map(|e| e.targets.iter())
        .filter(|t| !remove.contains(*t))
        .chain(add)
        .cloned()
        .collect();
    (!targets.is_empty()).then(|| Endpoint {
        dns_name: dns_name.to_owned(),
        record_type,
        targets,
        ttl: Some(ttl),
        resource: None,
    })
}

/// Sorts `entries` by `order`, keeping of entries that compare equal only the one that came
/// last, as inserting each into a map would. A sorted vector in place of a map over every
/// record of a pass: a pass holds several such at once beside the listing, and a map's nodes
/// or empty buckets cost more than its entries.
pub fn sort_later_wins<T>(entries: &mut Vec<T>, order: impl Fn(&T, &T) -> std::cmp::Ordering) {
    // Listings often come sorted (the embedded server's): then the sort's scratch space, as
    // large as half the entries, is not needed.
    if entries.is_sorted_by(|a, b| order(a, b).is_lt()) {
        entries.shrink_to_fit();
        return;
    }
    // Stable: of equal entries, the last comes last.
    entries.sort_by(&order);
    entries.dedup_by(|later, kept| {
        let same = order(later, kept).is_eq();
        if same {
            std::mem::swap(later, kept);
        }
        same
    });
    entries.shrink_to_fit();
}

/// A DNS backend: list the RRsets of the managed zones, apply a change batch.
///
/// Object-safe (boxed futures) so the sync loop can hold an `Arc<dyn Provider>`.
pub trait Provider: Send + Sync {
    /// All A/AAAA/CNAME/TXT RRsets in the managed zones. Must fail (not return a subset) when any
    /// zone could not be listed completely: the sync loop deletes nothing unless this is whole.
    fn records(&self) -> BoxFuture<'_, Result<Vec<Endpoint>, Error>>;

    /// Apply the changes; on error, some batches may have been applied (the next pass re-lists).
    fn apply<'a>(&'a self, changes: &'a Changes) -> BoxFuture<'a, Result<(), Error>>;

    /// The desired records as the provider will store them (external-dns's `AdjustEndpoints`:
    /// a provider's TTL limits, for example), so that they compare equal to what it lists. Most
    /// providers store what they are given.
    fn adjust(&self, desired: Vec<Endpoint>) -> BoxFuture<'_, Result<Vec<Endpoint>, Error>> {
        Box::pin(std::future::ready(Ok(desired)))
    }

    /// The zones this provider manages (lower-case, no trailing dot).
    fn zones(&self) -> &[String];

    /// The provider's name in metrics (`rfc2136`, `pdns`, `embedded`, `webhook`, `dnsendpoint`).
    fn name(&self) -> &'static str {
        "custom"
    }

    /// Make the next [`records`](Provider::records) read everything from the server, bypassing
    /// any listing cache (the periodic resync calls this to catch drift).
    fn invalidate_cache(&self) {}

    /// A counter that moves whenever the records this provider holds change, for a provider
    /// nothing else writes (the embedded server): the sync loop then skips listing when neither
    /// it nor the desired records moved since DNS was last in sync. None (the default): others
    /// may change the records, so every pass lists them to catch drift.
    fn generation(&self) -> Option<u64> {
        None
    }

    /// Whether [`apply`](Provider::apply) takes [`Changes::shared`] record by record; when
    /// false (the default), the sync loop hands it [`Changes::whole_rrsets`] instead.
    fn edits_records(&self) -> bool {
        false
    }
}

/// A provider's failure: the provider's own error, carried as the source and shown as it is.
/// Each provider keeps its error type and marks it [`ProviderError`], so that adding a provider
/// does not touch this module.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct Error(Box<dyn std::error::Error + Send + Sync>);

/// A provider's error type: `?` turns it into an [`Error`].
pub trait ProviderError: std::error::Error + Send + Sync + 'static {}

impl<E: ProviderError> From<E> for Error {
    fn from(err: E) -> Error {
        Error(Box::new(err))
    }
}

/// True when `name` is `zone` or below it.
pub fn in_zone(name: &str, zone: &str) -> bool {
    name == zone
        || (name.len() > zone.len()
            && name.ends_with(zone)
            && name.as_bytes()[name.len() - zone.len() - 1] == b'.')
}

/// The most specific of `zones` that contains `name`.
pub fn zone_of<'z>(name: &str, zones: &'z [String]) -> Option<&'z str> {
    zones
        .iter()
        .map(String::as_str)
        .filter(|zone| in_zone(name, zone))
        .max_by_key(|zone| zone.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorting_keeps_the_last_of_equal_entries_as_a_map_would() {
        let mut entries = vec![
            (3, "c"),
            (1, "a"),
            (3, "c2"),
            (2, "b"),
            (1, "a2"),
            (1, "a3"),
        ];
        let map: BTreeMap<i32, &str> = entries.iter().copied().collect();
        sort_later_wins(&mut entries, |(a, _), (b, _)| a.cmp(b));
        assert_eq!(entries, map.into_iter().collect::<Vec<_>>());
        assert_eq!(entries, [(1, "a3"), (2, "b"), (3, "c2")]);
    }

    #[test]
    fn zone_of_picks_the_most_specific_zone() {
        let zones = vec!["example.com".to_string(), "sub.example.com".to_string()];
        assert_eq!(
            zone_of("a.sub.example.com", &zones),
            Some("sub.example.com")
        );
        assert_eq!(zone_of("a.example.com", &zones), Some("example.com"));
        assert_eq!(zone_of("example.com", &zones), Some("example.com"));
        assert_eq!(zone_of("badexample.com", &zones), None);
        assert_eq!(zone_of("example.org", &zones), None);
    }
}
