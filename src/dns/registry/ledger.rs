//! The registry's side of a sync pass: who owns each listed record, the ownership values the
//! plan claims and releases, and the TXT changes they come to. The planner asks this and never
//! reads or writes ownership values itself.

use std::collections::BTreeMap;

use super::{OwnershipIndex, TxtRegistry};
use crate::dns::txt_crypto::CryptoError;
use crate::dns::{DEFAULT_TTL, Endpoint, Targets, zone_of};
use crate::model::RecordType;

/// Who holds a record, as the listing's ownership records say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holder<'a> {
    /// Our owner id.
    Us,
    /// Another owner id.
    Other(&'a str),
    /// No ownership record covers it.
    Nobody,
}

/// One change of an ownership TXT RRset, for the planner to allow or hold back by its policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxtChange {
    Create(Endpoint),
    Update(Endpoint),
    Delete(Endpoint),
}

/// Ownership TXT values to add and remove at one TXT name: one or two each, so vectors (a
/// B-tree set's first node alone is some 300 bytes, and a pass keeps one edit per record).
#[derive(Default)]
struct TxtEdit {
    add: Vec<String>,
    remove: Vec<String>,
}

/// Adds `value` to `values` unless it is there.
fn add_once(values: &mut Vec<String>, value: String) {
    if !values.contains(&value) {
        values.push(value);
    }
}

/// The ownership of one listing, and the claims and releases of one plan over it.
pub struct OwnershipLedger<'r> {
    registry: &'r TxtRegistry,
    index: OwnershipIndex<'r>,
    /// Ownership changes by TXT name, turned into RRset changes at the end.
    edits: BTreeMap<String, TxtEdit>,
    /// Ownership values claimed that are already there with no other value of ours: nothing to
    /// write, so no edit is made (a resync claims every record again). By the TXT name's place
    /// in the index, the value's place among its values: a resync keeps one per record, and a
    /// map of names to values took some 60 bytes each.
    kept: Vec<Option<u32>>,
}

impl<'r> OwnershipLedger<'r> {
    /// The ownership `listing` (every record of the zones) records under `registry`'s rules.
    pub fn new(listing: &'r [Endpoint], registry: &'r TxtRegistry) -> Self {
        let index = OwnershipIndex::from_records(listing, registry);
        OwnershipLedger {
            registry,
            kept: vec![None; index.registry_txt.len()],
            index,
            edits: BTreeMap::new(),
        }
    }

    /// What the listing says, for readers that only look.
    pub fn index(&self) -> &OwnershipIndex<'r> {
        &self.index
    }

    pub fn owner_id(&self) -> &'r str {
        &self.registry.owner_id
    }

    /// Who holds the record `name`/`record_type`.
    pub fn holder(&self, name: &str, record_type: RecordType) -> Holder<'_> {
        match self.index.owner_of(name, record_type) {
            Some(owner) if owner.owner == self.owner_id() => Holder::Us,
            Some(owner) => Holder::Other(owner.owner),
            None => Holder::Nobody,
        }
    }

    pub fn owned_by_us(&self, name: &str, record_type: RecordType) -> bool {
        self.holder(name, record_type) == Holder::Us
    }

    /// Ownership records of ours in the listing (new format per record, legacy per name).
    pub fn owned(&self) -> usize {
        let owner_id = self.owner_id();
        self.index.owned_new_format(owner_id).count()
            + self.index.owned_legacy_names(owner_id).len()
    }

    /// The TXT name that owns the record `name`/`record_type`.
    pub fn txt_name(&self, name: &str, record_type: RecordType) -> String {
        self.registry.txt_name(name, record_type)
    }

    /// Our ownership value at `txt_name` for `resource` (an encrypted one kept when it says the
    /// same), or why it cannot be made.
    pub fn value_for(&self, txt_name: &str, resource: Option<&str>) -> Result<String, CryptoError> {
        self.registry
            .value_for(resource, self.index.registry_values(txt_name))
    }

    /// Our ownership value at `txt_name` for our part of a shared name: `endpoint`'s targets
    /// and resource, at `ttl`.
    pub fn shared_value_for(
        &self,
        txt_name: &str,
        endpoint: &Endpoint,
        ttl: u32,
    ) -> Result<String, CryptoError> {
        self.registry.shared_value_for(
            endpoint.resource.as_deref(),
            endpoint.targets.iter().map(String::as_str),
            ttl,
            self.index.registry_values(txt_name),
        )
    }

    /// Our ownership `value` at `txt_name`, replacing other values of ours there.
    pub fn claim(&mut self, txt_name: String, value: String) {
        let owner_id = self.owner_id();
        let at = self.index.txt_at(&txt_name);
        if let Some(at) = at
            && self.kept[at].is_none()
            && !self.edits.contains_key(&txt_name)
        {
            let present = &self.index.registry_txt[at].1.values;
            if !present
                .iter()
                .any(|(raw, labels)| labels.owner == owner_id && *raw != value)
                && let Some(position) = present.iter().position(|(raw, _)| *raw == value)
                && let Ok(position) = u32::try_from(position)
            {
                // Already there, and no other value of ours: nothing to change (the usual
                // resync).
                self.kept[at] = Some(position);
                return;
            }
        }
        let kept = at.and_then(|at| {
            let position = self.kept[at].take()?;
            let values = &self.index.registry_txt[at].1.values;
            values
                .get(usize::try_from(position).ok()?)
                .map(|(raw, _)| *raw)
        });
        let present = self.index.registry_values(&txt_name);
        let edit = self.edits.entry(txt_name).or_default();
        for (raw, labels) in present {
            if labels.owner == owner_id && *raw != value {
                add_once(&mut edit.remove, (*raw).to_owned());
            }
        }
        add_once(&mut edit.add, value);
        if let Some(kept) = kept {
            add_once(&mut edit.add, kept.to_owned());
        }
    }

    /// Our ownership `value` at `txt_name` in place of `from`'s (an owner gone silent whose
    /// record we adopt): its values there go, ours comes.
    pub fn adopt(&mut self, txt_name: String, value: String, from: &str) {
        let present = self.index.registry_values(&txt_name);
        let edit = self.edits.entry(txt_name).or_default();
        for (raw, labels) in present {
            if labels.owner == from {
                add_once(&mut edit.remove, (*raw).to_owned());
            }
        }
        add_once(&mut edit.add, value);
    }

    /// Removes every ownership value of ours at `txt_name`.
    pub fn release(&mut self, txt_name: &str) {
        // A value claimed and kept stays: releasing ours there and adding it back is no change.
        if self
            .index
            .txt_at(txt_name)
            .is_some_and(|at| self.kept[at].is_some())
        {
            return;
        }
        let owner_id = self.owner_id();
        let edit = self.edits.entry(txt_name.to_string()).or_default();
        for (raw, labels) in self.index.registry_values(txt_name) {
            if labels.owner == owner_id {
                add_once(&mut edit.remove, (*raw).to_owned());
            }
        }
    }

    /// Releases ownership records of ours inside `zones` that cover nothing any more: legacy
    /// ones at names `wants_name` says no record is wanted at and where nothing of ours stays
    /// `published`, and new-format ones whose record is neither `wanted` nor `listed`.
    pub fn release_orphans(
        &mut self,
        zones: &[String],
        wants_name: impl Fn(&str) -> bool,
        wanted: impl Fn(&str, RecordType) -> bool,
        listed: impl Fn(&str, RecordType) -> bool,
        published: impl Fn(&str, RecordType) -> bool,
    ) {
        let owner_id = self.owner_id();
        let mut orphans: Vec<String> = Vec::new();
        for name in self.index.owned_legacy_names(owner_id) {
            if !wants_name(name) && zone_of(name, zones).is_some() {
                let still_published = RecordType::ALL
                    .into_iter()
                    .any(|t| self.owned_by_us(name, t) && published(name, t));
                if !still_published {
                    orphans.push(name.to_string());
                }
            }
        }
        for ((registry_name, record_type), owner) in self.index.owned_new_format(owner_id) {
            let in_use = self
                .registry
                .record_names(registry_name)
                .iter()
                .any(|name| wanted(name, record_type) || listed(name, record_type));
            if !in_use && zone_of(owner.txt_name, zones).is_some() {
                orphans.push(owner.txt_name.to_owned());
            }
        }
        for txt_name in orphans {
            self.release(&txt_name);
        }
    }

    /// The claims and releases as changes of TXT RRsets; `listed` gives the TXT RRset listed at
    /// a name. A claim where nothing is listed creates; one that leaves no value deletes.
    pub fn changes(&mut self, listed: impl Fn(&str) -> Option<&'r Endpoint>) -> Vec<TxtChange> {
        let edits = std::mem::take(&mut self.edits);
        // Sized once: a first pass makes one per record, and a vector grown to them holds
        // spare room and, while it grows, two copies.
        let mut changes = Vec::with_capacity(edits.len());
        changes.extend(edits.into_iter().filter_map(|(txt_name, edit)| {
            let existing = listed(&txt_name);
            let before: Targets = existing.map(|r| r.targets.clone()).unwrap_or_default();
            let after: Targets = before
                .iter()
                .filter(|value| !edit.remove.contains(*value))
                .cloned()
                .chain(edit.add)
                .collect();
            if after == before {
                return None;
            }
            Some(match existing {
                None => TxtChange::Create(Endpoint {
                    dns_name: txt_name,
                    record_type: RecordType::TXT,
                    targets: after,
                    ttl: Some(DEFAULT_TTL),
                    resource: None,
                }),
                Some(existing) if after.is_empty() => TxtChange::Delete(existing.clone()),
                Some(existing) => TxtChange::Update(Endpoint {
                    targets: after,
                    ..existing.clone()
                }),
            })
        }));
        changes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dns::registry::ownership_value;

    fn listing() -> Vec<Endpoint> {
        vec![
            Endpoint::new("app.example.com", RecordType::A, ["192.0.2.1"]),
            Endpoint::new(
                "a-app.example.com",
                RecordType::TXT,
                [ownership_value("us", None)],
            ),
            Endpoint::new("old.example.com", RecordType::A, ["192.0.2.2"]),
            Endpoint::new(
                "a-old.example.com",
                RecordType::TXT,
                [ownership_value("them", None)],
            ),
        ]
    }

    #[test]
    fn holders_claims_and_releases_become_txt_changes() {
        let registry = TxtRegistry::new("us");
        let listing = listing();
        let listed = |name: &str| {
            listing
                .iter()
                .find(|r| r.dns_name == name && r.record_type == RecordType::TXT)
        };
        let mut ledger = OwnershipLedger::new(&listing, &registry);
        assert_eq!(ledger.holder("app.example.com", RecordType::A), Holder::Us);
        assert_eq!(
            ledger.holder("old.example.com", RecordType::A),
            Holder::Other("them")
        );
        assert_eq!(
            ledger.holder("new.example.com", RecordType::A),
            Holder::Nobody
        );
        assert_eq!(ledger.owned(), 1);

        // A claim already listed changes nothing, and a release after it keeps it.
        let app = ledger.txt_name("app.example.com", RecordType::A);
        let value = ledger.value_for(&app, None).unwrap();
        ledger.claim(app.clone(), value);
        ledger.release(&app);
        assert_eq!(ledger.changes(listed), []);

        // A new claim creates its TXT; a release that leaves nothing deletes it.
        let mut ledger = OwnershipLedger::new(&listing, &registry);
        let new = ledger.txt_name("new.example.com", RecordType::A);
        let value = ledger.value_for(&new, Some("httproute/shop/web")).unwrap();
        ledger.claim(new, value.clone());
        ledger.release(&app);
        let changes = ledger.changes(listed);
        assert_eq!(changes.len(), 2, "{changes:?}");
        assert!(changes.contains(&TxtChange::Delete(listing[1].clone())));
        assert!(changes.iter().any(|change| matches!(
            change,
            TxtChange::Create(record)
                if record.dns_name == "a-new.example.com" && record.targets.contains(&value)
        )));
    }

    #[test]
    fn orphans_are_our_records_nothing_wants_or_lists() {
        let registry = TxtRegistry::new("us");
        let mut listing = listing();
        listing.remove(0); // app.example.com's A record went, its ownership stayed
        let zones = vec!["example.com".to_string()];
        let mut ledger = OwnershipLedger::new(&listing, &registry);
        ledger.release_orphans(&zones, |_| false, |_, _| false, |_, _| false, |_, _| false);
        let listed = |name: &str| {
            listing
                .iter()
                .find(|r| r.dns_name == name && r.record_type == RecordType::TXT)
        };
        assert_eq!(
            ledger.changes(listed),
            [TxtChange::Delete(listing[0].clone())],
            "only ours goes, not another owner's"
        );
    }
}
