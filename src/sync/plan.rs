//! The plan: desired records vs the records a provider holds → the changes to make. Pure.
//!
//! Rules: only records inside the managed zones; only records we own (ownership TXT with our
//! owner id) are updated or deleted; a record that exists without our ownership blocks our
//! create and is reported; records that external-dns wrote with our owner id are adopted.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use crate::dns::registry::{Holder, OwnershipIndex, OwnershipLedger, TxtChange, TxtRegistry};
use crate::dns::{Changes, DEFAULT_TTL, Endpoint, SharedEdit, sort_later_wins, zone_of};
use crate::metrics::BlockedGroup;
use crate::model::RecordType;
use crate::model::dns_name::{canonical, in_name_list};

/// What the sync may do to records it owns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Policy {
    /// Create, update and delete.
    #[default]
    Sync,
    /// Create and update, never delete.
    UpsertOnly,
    /// Create only.
    CreateOnly,
}

impl Policy {
    pub fn allows_update(self) -> bool {
        self != Policy::CreateOnly
    }

    pub fn allows_delete(self) -> bool {
        self == Policy::Sync
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Policy::Sync => "sync",
            Policy::UpsertOnly => "upsert-only",
            Policy::CreateOnly => "create-only",
        })
    }
}

#[derive(Debug, thiserror::Error)]
#[error("unknown policy {0:?} (expected sync, upsert-only or create-only)")]
pub struct UnknownPolicy(String);

impl FromStr for Policy {
    type Err = UnknownPolicy;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "sync" => Ok(Policy::Sync),
            "upsert-only" => Ok(Policy::UpsertOnly),
            "create-only" => Ok(Policy::CreateOnly),
            other => Err(UnknownPolicy(other.to_string())),
        }
    }
}

/// Why a desired record was not written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BlockReason {
    /// The name is in none of the managed zones.
    OutsideZones,
    /// The ownership TXT name falls outside the record's zone (a record at the zone apex).
    OwnershipOutsideZone { txt_name: String },
    /// The ownership TXT name breaks DNS limits (labels ≤ 63, names ≤ 253 bytes): the type
    /// prefix makes the first label longer than the record's own.
    OwnershipNameTooLong { txt_name: String },
    /// A record of that name and type exists and nobody claims it.
    ForeignRecord,
    /// Another owner id claims the record.
    OwnedByOther { owner: String },
    /// A CNAME cannot share its name with other data.
    CnameConflict { existing: RecordType },
    /// An ordinary TXT record already sits at the ownership TXT name.
    RegistryNameTaken { txt_name: String },
    /// The desired set holds this name and type twice.
    DuplicateDesired,
    /// `--txt-encrypt-enabled` is on and the ownership value could not be encrypted; it is
    /// never written in the clear instead.
    OwnershipNotEncrypted,
    /// Another owner shares the name, and the two disagree on how (`--shared-name` on one side
    /// only, or another TTL): neither writes over the other.
    SharedDisagreement { owner: String, detail: String },
}

impl BlockReason {
    /// The group `gateway_dns_records_blocked` counts this reason under.
    pub fn group(&self) -> BlockedGroup {
        match self {
            BlockReason::OutsideZones | BlockReason::OwnershipOutsideZone { .. } => {
                BlockedGroup::Zone
            }
            BlockReason::ForeignRecord
            | BlockReason::OwnedByOther { .. }
            | BlockReason::RegistryNameTaken { .. }
            | BlockReason::OwnershipNotEncrypted
            | BlockReason::SharedDisagreement { .. } => BlockedGroup::Ownership,
            BlockReason::OwnershipNameTooLong { .. }
            | BlockReason::CnameConflict { .. }
            | BlockReason::DuplicateDesired => BlockedGroup::Conflict,
        }
    }
}

impl fmt::Display for BlockReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BlockReason::OutsideZones => write!(f, "the name is outside the managed zones"),
            BlockReason::OwnershipOutsideZone { txt_name } => write!(
                f,
                "its ownership record {txt_name} would fall outside the zone"
            ),
            BlockReason::OwnershipNameTooLong { txt_name } => write!(
                f,
                "its ownership record name {txt_name} exceeds DNS length limits; shorten the first label"
            ),
            BlockReason::ForeignRecord => {
                write!(f, "a record exists that gateway-dns does not own")
            }
            BlockReason::OwnedByOther { owner } => {
                write!(f, "the record is owned by owner id {owner:?}")
            }
            BlockReason::CnameConflict { existing } => write!(
                f,
                "a {existing} record at that name is not ours; a CNAME cannot share a name"
            ),
            BlockReason::RegistryNameTaken { txt_name } => write!(
                f,
                "an unrelated TXT record occupies the ownership name {txt_name}"
            ),
            BlockReason::DuplicateDesired => write!(f, "the desired set lists it twice"),
            BlockReason::OwnershipNotEncrypted => {
                write!(f, "its ownership value could not be encrypted")
            }
            BlockReason::SharedDisagreement { owner, detail } => {
                write!(
                    f,
                    "owner id {owner:?} shares the name differently: {detail}"
                )
            }
        }
    }
}

/// A desired record that the plan will not write, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocked {
    pub dns_name: String,
    pub record_type: RecordType,
    pub resource: Option<String>,
    pub reason: BlockReason,
}

impl fmt::Display for Blocked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.dns_name, self.record_type, self.reason)?;
        if let Some(resource) = &self.resource {
            write!(f, " (wanted by {resource})")?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    pub changes: Changes,
    pub blocked: Vec<Blocked>,
    /// Changes the policy held back (updates under create-only, deletes unless sync).
    pub held_by_policy: usize,
    /// TXT records whose value looks encrypted but does not open with our key: not ours.
    pub undecryptable: Vec<String>,
}

impl Plan {
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }
}

/// Compute the changes that bring `current` (a full listing of the zones, ownership TXT
/// records included) to `desired`, touching only what `owner_id` owns.
pub fn plan(
    desired: &[Endpoint],
    current: &[Endpoint],
    owner_id: &str,
    policy: Policy,
    zones: &[String],
) -> Plan {
    plan_with(desired, current, &TxtRegistry::new(owner_id), policy, zones)
}

/// [`plan`] with the registry's full settings (wildcard replacement).
pub fn plan_with(
    desired: &[Endpoint],
    current: &[Endpoint],
    registry: &TxtRegistry,
    policy: Policy,
    zones: &[String],
) -> Plan {
    Planned::new(desired, current, registry, policy, zones, &Scope::default()).copying(desired)
}

/// What a plan may touch beyond what this owner holds alone.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    /// `--shared-name`: names shared with owners of other clusters (names, `*.suffix`), of
    /// which this owner writes its own targets only.
    pub shared_names: Vec<String>,
    /// Owners gone silent (`--adopt-after`), whose records a wanted record takes over.
    pub adoptable: Vec<String>,
}

/// [`plan_with`] where the names on `shared_names` (`--shared-name`: names, `*.suffix`) are
/// shared across clusters: this owner adds and removes its own targets of them only.
pub fn plan_shared(
    desired: &[Endpoint],
    current: &[Endpoint],
    registry: &TxtRegistry,
    policy: Policy,
    zones: &[String],
    shared_names: &[String],
) -> Plan {
    let scope = Scope {
        shared_names: shared_names.to_vec(),
        adoptable: Vec::new(),
    };
    Planned::new(desired, current, registry, policy, zones, &scope).copying(desired)
}

/// A plan decided but not yet written out: the records to create are still positions in the
/// desired records, so that a caller that owns them can move them into the plan
/// ([`Planned::taking`]) rather than copy them.
pub(crate) struct Planned<'a> {
    planner: Planner<'a>,
    /// Positions in the desired records, in the order they are created.
    creates: Vec<usize>,
    /// Canonical copies of the desired records that were not canonical, by position.
    canonical_copies: BTreeMap<usize, Endpoint>,
    updates: Vec<Endpoint>,
    deletes: Vec<Endpoint>,
}

impl<'a> Planned<'a> {
    /// Decides the plan that brings `current` to `desired` (see [`plan`]).
    pub(crate) fn new(
        desired: &[Endpoint],
        current: &'a [Endpoint],
        registry: &'a TxtRegistry,
        policy: Policy,
        zones: &[String],
        scope: &Scope,
    ) -> Planned<'a> {
        let zones: Vec<String> = zones.iter().map(|z| canonical(z).into_owned()).collect();
        let ledger = OwnershipLedger::new(current, registry);
        let undecryptable = ledger.index().undecryptable().iter().cloned().collect();
        let mut planner = Planner {
            current: Current::read(current, &zones, ledger.index()),
            policy,
            zones,
            shared_names: scope.shared_names.clone(),
            adoptable: scope.adoptable.clone(),
            ledger,
            shared: Vec::new(),
            owned_by: BTreeMap::new(),
            adopted: Vec::new(),
            plan: Plan {
                undecryptable,
                ..Plan::default()
            },
        };
        // Copies only of the records not in canonical form already (nearly none are): the plan
        // reads the desired records where they are.
        let canonical_copies: BTreeMap<usize, Endpoint> = desired
            .iter()
            .enumerate()
            .filter_map(|(i, endpoint)| Some((i, normalized(endpoint)?)))
            .collect();
        let wanted = planner.wanted(desired, &canonical_copies);
        let unwanted = planner.unwanted(&wanted);
        let (creates, updates) = planner.place_wanted(&wanted, &unwanted);
        let deletes = planner.delete_unwanted(&unwanted);
        if policy.allows_delete() {
            planner.release_orphaned_ownership(&wanted, &unwanted);
        }
        drop(wanted);
        Planned {
            planner,
            creates,
            canonical_copies,
            updates,
            deletes,
        }
    }

    /// Ownership records of ours in the listing (new format per record, legacy per name).
    pub(crate) fn owned(&self) -> usize {
        self.planner.ledger.owned()
    }

    /// The desired records blocked, and why.
    pub(crate) fn blocked(&self) -> &[Blocked] {
        &self.planner.plan.blocked
    }

    /// The plan, its creates copied from `desired` (the records given to [`Planned::new`]).
    pub(crate) fn copying(mut self, desired: &[Endpoint]) -> Plan {
        let creates = self.creates_from(|i| desired.get(i).cloned());
        self.planner.finish(creates, self.updates, self.deletes)
    }

    /// The plan, its creates moved out of `desired` (the records given to [`Planned::new`]),
    /// the rest of which is dropped before the ownership records are written out: a first pass
    /// then holds every record once, not twice.
    pub(crate) fn taking(mut self, desired: Vec<Endpoint>) -> Plan {
        let mut slots: Vec<Option<Endpoint>> = desired.into_iter().map(Some).collect();
        let creates = self.creates_from(|i| slots.get_mut(i).and_then(Option::take));
        drop(slots);
        self.planner.finish(creates, self.updates, self.deletes)
    }

    /// The records to create, each from its canonical copy or from `desired_at` its position,
    /// with the TTL it is written with.
    fn creates_from(
        &mut self,
        mut desired_at: impl FnMut(usize) -> Option<Endpoint>,
    ) -> Vec<Endpoint> {
        let positions = std::mem::take(&mut self.creates);
        // Sized once, as the plan's other vectors of every record.
        let mut creates = Vec::with_capacity(positions.len());
        creates.extend(
            positions
                .into_iter()
                .filter_map(|i| self.canonical_copies.remove(&i).or_else(|| desired_at(i)))
                .map(|endpoint| Endpoint {
                    ttl: Some(endpoint.ttl_or_default()),
                    ..endpoint
                }),
        );
        creates
    }
}

/// The records the zones hold now, as the plan reads them: each with whether it is registry
/// bookkeeping rather than data, sorted by (name, type). A sorted vector of references, not
/// maps: a resync holds this beside the listing and the desired records, and hash and B-tree
/// maps of every listed record were the largest part of a resync's peak after the listing.
struct Current<'a> {
    records: Vec<(&'a Endpoint, bool)>,
}

/// A set of the record types gateway-dns reads, in one byte: a set per listed name, in a
/// B-tree node of its own each, took more than the name's entry.
#[derive(Clone, Copy, Debug, Default)]
struct RecordTypes(u8);

impl RecordTypes {
    fn bit(record_type: RecordType) -> u8 {
        match record_type {
            RecordType::A => 1,
            RecordType::AAAA => 2,
            RecordType::CNAME => 4,
            RecordType::TXT => 8,
        }
    }

    fn insert(&mut self, record_type: RecordType) {
        self.0 |= RecordTypes::bit(record_type);
    }

    /// In `RecordType`'s order, as a sorted set would give them.
    fn iter(self) -> impl Iterator<Item = RecordType> {
        RecordType::ALL
            .into_iter()
            .filter(move |record_type| self.0 & RecordTypes::bit(*record_type) != 0)
    }
}

impl<'a> Current<'a> {
    /// The records inside `zones`; of two listed under one name and type, the later.
    fn read(current: &'a [Endpoint], zones: &[String], ownership: &OwnershipIndex<'a>) -> Self {
        // Sized once: grown, it would be copied and hold spare room beside the listing.
        let mut records: Vec<(&Endpoint, bool)> = Vec::with_capacity(current.len());
        records.extend(
            current
                .iter()
                .filter(|record| zone_of(&record.dns_name, zones).is_some())
                .map(|record| (record, ownership.is_registry_record(record))),
        );
        sort_later_wins(&mut records, |(a, _), (b, _)| key(a).cmp(&key(b)));
        Current { records }
    }

    /// The listed records at `name`, in type order.
    fn at(&self, name: &str) -> &[(&'a Endpoint, bool)] {
        let start = self
            .records
            .partition_point(|(record, _)| record.dns_name.as_str() < name);
        let len = self.records[start..]
            .iter()
            .take_while(|(record, _)| record.dns_name == name)
            .count();
        &self.records[start..start + len]
    }

    fn entry(&self, name: &str, record_type: RecordType) -> Option<(&'a Endpoint, bool)> {
        let at = self
            .records
            .binary_search_by(|(record, _)| key(record).cmp(&(name, record_type)));
        at.ok().map(|i| self.records[i])
    }

    /// The record of that name and type, ownership records included.
    fn record(&self, name: &str, record_type: RecordType) -> Option<&'a Endpoint> {
        self.entry(name, record_type).map(|(record, _)| record)
    }

    /// The data record of that name and type (not ownership bookkeeping).
    fn data_record(&self, name: &str, record_type: RecordType) -> Option<&'a Endpoint> {
        self.entry(name, record_type)
            .filter(|(_, registry_only)| !registry_only)
            .map(|(record, _)| record)
    }

    /// The types of the data records at `name` (ownership records left out).
    fn data_types_at(&self, name: &str) -> RecordTypes {
        data_types(self.at(name))
    }

    /// Each listed name with the types of its data records, in name order (names holding
    /// only ownership records left out).
    fn data_types(&self) -> impl Iterator<Item = (&'a str, RecordTypes)> + '_ {
        self.records
            .chunk_by(|(a, _), (b, _)| a.dns_name == b.dns_name)
            .map(|records| (records[0].0.dns_name.as_str(), data_types(records)))
            .filter(|(_, types)| types.0 != 0)
    }
}

/// A listed record's place in [`Current`].
fn key(record: &Endpoint) -> (&str, RecordType) {
    (record.dns_name.as_str(), record.record_type)
}

fn data_types(records: &[(&Endpoint, bool)]) -> RecordTypes {
    let mut types = RecordTypes::default();
    for (record, registry_only) in records {
        if !registry_only {
            types.insert(record.record_type);
        }
    }
    types
}

/// The desired records in canonical form, one per (name, type), with their positions, sorted
/// by (name, type): a sorted vector, for the same reason as [`Current`].
struct Wanted<'d>(Vec<(usize, &'d Endpoint)>);

impl<'d> Wanted<'d> {
    fn contains_key(&self, &(name, record_type): &(&str, RecordType)) -> bool {
        self.0
            .binary_search_by(|(_, endpoint)| key(endpoint).cmp(&(name, record_type)))
            .is_ok()
    }

    fn iter(&self) -> impl Iterator<Item = ((&'d str, RecordType), (usize, &'d Endpoint))> + '_ {
        self.0
            .iter()
            .map(|&(index, endpoint)| (key(endpoint), (index, endpoint)))
    }
}

/// Does `wanted` hold a record of any type at `name`?
fn wants_name(wanted: &Wanted<'_>, name: &str) -> bool {
    let at = wanted
        .0
        .partition_point(|(_, endpoint)| endpoint.dns_name.as_str() < name);
    wanted
        .0
        .get(at)
        .is_some_and(|(_, endpoint)| endpoint.dns_name == name)
}

/// What becomes of one wanted record that nothing blocks.
enum Placement {
    Create,
    Update,
    Unchanged,
    /// It differs, and the policy forbids updates.
    HeldByPolicy,
    /// Another owner's, gone silent: taken over (replaced, or created where only its
    /// ownership record is left).
    Adopt {
        from: String,
        exists: bool,
    },
}

/// What a plan is made from, and the plan as it grows, step by step.
struct Planner<'a> {
    current: Current<'a>,
    policy: Policy,
    zones: Vec<String>,
    /// `--shared-name`: names this owner shares with owners of other clusters.
    shared_names: Vec<String>,
    /// Owners gone silent, whose records wanted records take over.
    adoptable: Vec<String>,
    /// Who owns what, and the ownership this plan claims and releases.
    ledger: OwnershipLedger<'a>,
    /// Edits of this owner's part of shared names.
    shared: Vec<SharedEdit>,
    /// The ownership TXT RRset, as listed, of each RRset updated or deleted.
    owned_by: BTreeMap<(String, RecordType), Endpoint>,
    /// Records taken over from owners gone silent.
    adopted: Vec<(String, RecordType, String)>,
    plan: Plan,
}

impl Planner<'_> {
    /// The desired records in canonical form (`canonical_copies[i]` for `desired[i]` when it
    /// was not), one per (name, type); the others are blocked.
    fn wanted<'d>(
        &mut self,
        desired: &'d [Endpoint],
        canonical_copies: &'d BTreeMap<usize, Endpoint>,
    ) -> Wanted<'d> {
        let canonical = |i: usize| canonical_copies.get(&i).unwrap_or(&desired[i]);
        let mut refused: Vec<(usize, BlockReason)> = Vec::new();
        let mut wanted: Vec<(usize, &Endpoint)> = Vec::with_capacity(desired.len());
        for i in 0..desired.len() {
            let endpoint = canonical(i);
            if zone_of(&endpoint.dns_name, &self.zones).is_none() {
                refused.push((i, BlockReason::OutsideZones));
            } else {
                wanted.push((i, endpoint));
            }
        }
        // Stable: of equal keys, the first desired comes first and is the one kept. The engine's
        // records come sorted, and then the sort's scratch space is not needed.
        if !wanted.is_sorted_by(|(_, a), (_, b)| key(a) <= key(b)) {
            wanted.sort_by(|(_, a), (_, b)| key(a).cmp(&key(b)));
        }
        refused.extend(
            wanted
                .windows(2)
                .filter(|pair| key(pair[0].1) == key(pair[1].1))
                .map(|pair| (pair[1].0, BlockReason::DuplicateDesired)),
        );
        wanted.dedup_by(|later, kept| key(later.1) == key(kept.1));
        wanted.shrink_to_fit();
        // The blocked ones in the order they were desired.
        refused.sort_by_key(|(i, _)| *i);
        for (i, reason) in refused {
            self.plan.blocked.push(blocked(canonical(i), reason));
        }
        Wanted(wanted)
    }

    /// Our data records that are no longer wanted (only deleted under the sync policy).
    fn unwanted(&self, wanted: &Wanted<'_>) -> BTreeSet<(String, RecordType)> {
        self.current
            .data_types()
            .flat_map(|(name, types)| types.iter().map(move |t| (name, t)))
            .filter(|&(name, t)| {
                self.ledger.owned_by_us(name, t) && !wanted.contains_key(&(name, t))
            })
            .map(|(name, t)| (name.to_owned(), t))
            .collect()
    }

    fn deleting(
        &self,
        unwanted: &BTreeSet<(String, RecordType)>,
        name: &str,
        record_type: RecordType,
    ) -> bool {
        self.policy.allows_delete() && unwanted.contains(&(name.to_string(), record_type))
    }

    /// Creates and updates for the wanted records, each claimed in the ownership registry.
    fn place_wanted(
        &mut self,
        wanted: &Wanted<'_>,
        unwanted: &BTreeSet<(String, RecordType)>,
    ) -> (Vec<usize>, Vec<Endpoint>) {
        let (mut creates, mut updates) = (Vec::new(), Vec::new());
        for ((name, record_type), (index, endpoint)) in wanted.iter() {
            if in_name_list(&self.shared_names, name) {
                match self.place_shared(name, record_type, endpoint) {
                    Ok(Some(edit)) if !self.policy.allows_update() && edit.listed.is_some() => {
                        self.plan.held_by_policy += 1;
                    }
                    Ok(Some(edit)) => self.shared.push(edit),
                    Ok(None) => {}
                    Err(reason) => self.plan.blocked.push(blocked(endpoint, reason)),
                }
                continue;
            }
            let record_type = &record_type;
            let txt_name = self.ledger.txt_name(name, *record_type);
            let value = self
                .ledger
                .value_for(&txt_name, endpoint.resource.as_deref());
            let placement = value
                .map_err(|_| BlockReason::OwnershipNotEncrypted)
                .and_then(|value| {
                    self.placement(name, *record_type, endpoint, &txt_name, unwanted)
                        .map(|placement| (placement, value))
                });
            match placement {
                Err(reason) => self.plan.blocked.push(blocked(endpoint, reason)),
                Ok((placement, value)) => {
                    match placement {
                        Placement::Create => creates.push(index),
                        Placement::Update => {
                            self.guard(name, *record_type);
                            // A TTL no annotation asks for stays what the record has.
                            let ttl = endpoint.ttl.or_else(|| {
                                self.current
                                    .data_record(name, *record_type)
                                    .and_then(|existing| existing.ttl)
                            });
                            updates.push(Endpoint {
                                ttl: Some(ttl.unwrap_or(DEFAULT_TTL)),
                                ..endpoint.clone()
                            });
                        }
                        Placement::HeldByPolicy => self.plan.held_by_policy += 1,
                        Placement::Unchanged => {}
                        Placement::Adopt { from, exists } => {
                            if exists {
                                self.guard(name, *record_type);
                                updates.push(Endpoint {
                                    ttl: Some(endpoint.ttl_or_default()),
                                    ..endpoint.clone()
                                });
                            } else {
                                creates.push(index);
                            }
                            self.adopted
                                .push((name.to_owned(), *record_type, from.clone()));
                            self.ledger.adopt(txt_name, value, &from);
                            continue;
                        }
                    }
                    self.ledger.claim(txt_name, value);
                }
            }
        }
        (creates, updates)
    }

    /// Whether and how one wanted record can be written, or why not.
    fn placement(
        &self,
        name: &str,
        record_type: RecordType,
        endpoint: &Endpoint,
        txt_name: &str,
        unwanted: &BTreeSet<(String, RecordType)>,
    ) -> Result<Placement, BlockReason> {
        let txt_name_owned = || txt_name.to_string();
        self.ownership_fits(name, txt_name)?;
        let holder = self.ledger.holder(name, record_type);
        if let Some(other) = self.other_sharer(name, record_type) {
            return Err(BlockReason::SharedDisagreement {
                owner: other.to_owned(),
                detail: "it shares the name with this owner id, which no longer lists it in \
                         --shared-name"
                    .to_owned(),
            });
        }
        if let Holder::Other(owner) = holder
            && self.adoptable.iter().any(|gone| gone == owner)
            && self.policy.allows_update()
            && self.other_owner_alone(name, record_type, owner)
        {
            return Ok(Placement::Adopt {
                from: owner.to_owned(),
                exists: self.current.data_record(name, record_type).is_some(),
            });
        }
        if let Some(existing) = self.current.data_record(name, record_type) {
            return match holder {
                Holder::Us => Ok(if !differs(existing, endpoint) {
                    Placement::Unchanged
                } else if self.policy.allows_update() {
                    Placement::Update
                } else {
                    Placement::HeldByPolicy
                }),
                Holder::Other(owner) => Err(BlockReason::OwnedByOther {
                    owner: owner.to_owned(),
                }),
                Holder::Nobody => Err(BlockReason::ForeignRecord),
            };
        }
        if let Holder::Other(owner) = holder {
            return Err(BlockReason::OwnedByOther {
                owner: owner.to_owned(),
            });
        }
        let cname_clash = self.current.data_types_at(name).iter().find(|other| {
            *other != record_type
                && (record_type == RecordType::CNAME || *other == RecordType::CNAME)
                && !self.deleting(unwanted, name, *other)
        });
        if let Some(existing) = cname_clash {
            return Err(BlockReason::CnameConflict { existing });
        }
        if self
            .current
            .data_record(txt_name, RecordType::TXT)
            .is_some()
        {
            return Err(BlockReason::RegistryNameTaken {
                txt_name: txt_name_owned(),
            });
        }
        Ok(Placement::Create)
    }

    /// The ownership record of `name` can be written: inside the record's zone, within DNS
    /// limits.
    fn ownership_fits(&self, name: &str, txt_name: &str) -> Result<(), BlockReason> {
        if zone_of(txt_name, &self.zones) != zone_of(name, &self.zones) {
            return Err(BlockReason::OwnershipOutsideZone {
                txt_name: txt_name.to_owned(),
            });
        }
        if !fits_dns_limits(txt_name) {
            return Err(BlockReason::OwnershipNameTooLong {
                txt_name: txt_name.to_owned(),
            });
        }
        Ok(())
    }

    /// Makes the update or delete of `name`/`record_type` conditional on its ownership RRset
    /// as listed.
    fn guard(&mut self, name: &str, record_type: RecordType) {
        let index = self.ledger.index();
        if let Some(txt_name) = index.owning_txt(name, record_type)
            && let Some(listed) = self.current.record(txt_name, RecordType::TXT)
        {
            self.owned_by
                .insert((name.to_owned(), record_type), listed.clone());
        }
    }

    /// `owner`'s ownership values are the only ones at the record's ownership name (no other
    /// owner's beside them, none shared): a record that can be adopted whole.
    fn other_owner_alone(&self, name: &str, record_type: RecordType, owner: &str) -> bool {
        let index = self.ledger.index();
        index.owning_txt(name, record_type).is_some_and(|txt_name| {
            index
                .registry_values(txt_name)
                .iter()
                .all(|(_, labels)| labels.owner == owner && labels.shared.is_none())
        })
    }

    /// Another owner id sharing `name`/`record_type` with ours, when our value there marks it
    /// shared.
    fn other_sharer(&self, name: &str, record_type: RecordType) -> Option<&str> {
        let index = self.ledger.index();
        let owner = index.owner_of(name, record_type)?;
        if !owner.shared || owner.owner != self.ledger.owner_id() {
            return None;
        }
        index
            .registry_values(owner.txt_name)
            .iter()
            .find(|(_, labels)| labels.owner != self.ledger.owner_id())
            .map(|(_, labels)| labels.owner.as_ref())
    }

    /// Our part of the shared name `name`/`record_type`, as `endpoint` wants it: the edit that
    /// adds our missing targets, removes those we no longer want (never one another owner
    /// adds too), and writes our ownership value; `None` when nothing changes.
    fn place_shared(
        &self,
        name: &str,
        record_type: RecordType,
        endpoint: &Endpoint,
    ) -> Result<Option<SharedEdit>, BlockReason> {
        let txt_name = self.ledger.txt_name(name, record_type);
        self.ownership_fits(name, &txt_name)?;
        if self
            .current
            .data_record(&txt_name, RecordType::TXT)
            .is_some()
        {
            return Err(BlockReason::RegistryNameTaken { txt_name });
        }
        let index = self.ledger.index();
        let ttl = endpoint.ttl_or_default();
        let owner_id = self.ledger.owner_id();
        // A legacy ownership record at the name itself is never a shared one.
        if let Some(owner) = index.owner_of(name, record_type)
            && owner.legacy
            && owner.owner != owner_id
        {
            return Err(BlockReason::OwnedByOther {
                owner: owner.owner.to_owned(),
            });
        }
        let values = index.registry_values(&txt_name);
        for (_, labels) in values.iter().filter(|(_, l)| l.owner != owner_id) {
            let owner = labels.owner.to_string();
            if labels.shared.is_none() {
                return Err(BlockReason::SharedDisagreement {
                    owner,
                    detail: "it holds the name alone, while this owner id lists it in \
                             --shared-name"
                        .to_owned(),
                });
            }
            if labels.ttl.unwrap_or(DEFAULT_TTL) != ttl {
                let theirs = labels.ttl.unwrap_or(DEFAULT_TTL);
                return Err(BlockReason::SharedDisagreement {
                    owner,
                    detail: format!("it writes TTL {theirs}, this owner id TTL {ttl}"),
                });
            }
        }
        if values.is_empty() && self.current.data_record(name, record_type).is_some() {
            return Err(BlockReason::ForeignRecord);
        }
        let cname_clash = self.current.data_types_at(name).iter().find(|other| {
            *other != record_type
                && (record_type == RecordType::CNAME || *other == RecordType::CNAME)
        });
        if let Some(existing) = cname_clash {
            return Err(BlockReason::CnameConflict { existing });
        }
        let value = self
            .ledger
            .shared_value_for(&txt_name, endpoint, ttl)
            .map_err(|_| BlockReason::OwnershipNotEncrypted)?;
        Ok(self.shared_edit(name, record_type, Some((&endpoint.targets, ttl, value))))
    }

    /// The edit that brings our part of the shared name to `wanted` (targets, TTL, our new
    /// ownership value), or removes it (`None`); `None` when nothing changes.
    fn shared_edit(
        &self,
        name: &str,
        record_type: RecordType,
        wanted: Option<(&crate::dns::Targets, u32, String)>,
    ) -> Option<SharedEdit> {
        let index = self.ledger.index();
        let owner_id = self.ledger.owner_id();
        let txt_name = index
            .owning_txt(name, record_type)
            .map_or_else(|| self.ledger.txt_name(name, record_type), str::to_owned);
        let listed = self.current.data_record(name, record_type);
        let listed_txt = self.current.record(&txt_name, RecordType::TXT);
        let values = index.registry_values(&txt_name);
        let ours = values.iter().find(|(_, l)| l.owner == owner_id);
        let others: BTreeSet<&str> = values
            .iter()
            .filter(|(_, l)| l.owner != owner_id)
            .flat_map(|(_, l)| l.shared_targets())
            .collect();
        // What we added before: our value's targets, or every target of a name we held alone.
        let before: BTreeSet<&str> = match ours {
            Some((_, labels)) if labels.shared.is_some() => labels.shared_targets().collect(),
            Some(_) => listed
                .map(|l| l.targets.iter().map(String::as_str).collect())
                .unwrap_or_default(),
            None => BTreeSet::new(),
        };
        let listed_targets = listed.map(|l| &l.targets);
        let in_listing = |t: &str| listed_targets.is_some_and(|l| l.contains(t));
        let (wanted_targets, ttl, value) = match wanted {
            Some((targets, ttl, value)) => (Some(targets), ttl, Some(value)),
            None => (
                None,
                listed.map_or(DEFAULT_TTL, Endpoint::ttl_or_default),
                None,
            ),
        };
        let wants = |t: &str| wanted_targets.is_some_and(|w| w.contains(t));
        let add: Vec<String> = wanted_targets
            .into_iter()
            .flatten()
            .filter(|t| !in_listing(t))
            .cloned()
            .collect();
        let remove: Vec<String> = before
            .iter()
            .filter(|t| in_listing(t) && !wants(t) && !others.contains(*t))
            .map(|t| (*t).to_owned())
            .collect();
        let ours_raw = ours.map(|(raw, _)| (*raw).to_owned());
        let (txt_add, txt_remove) = match (value, ours_raw) {
            (Some(value), Some(raw)) if value == raw => (None, None),
            (value, raw) => (value, raw),
        };
        if add.is_empty() && remove.is_empty() && txt_add.is_none() && txt_remove.is_none() {
            return None;
        }
        Some(SharedEdit {
            dns_name: name.to_owned(),
            record_type,
            ttl,
            add,
            remove,
            listed: listed.cloned(),
            txt_name,
            txt_add,
            txt_remove,
            listed_txt: listed_txt.cloned(),
        })
    }

    /// Deletes of our unwanted records, each releasing its ownership (unless the policy holds
    /// deletes back).
    fn delete_unwanted(&mut self, unwanted: &BTreeSet<(String, RecordType)>) -> Vec<Endpoint> {
        let mut deletes = Vec::new();
        for (name, record_type) in unwanted {
            if !self.policy.allows_delete() {
                self.plan.held_by_policy += 1;
                continue;
            }
            if self
                .ledger
                .index()
                .owner_of(name, *record_type)
                .is_some_and(|owner| owner.shared)
            {
                // Our part of a shared name: our targets go, the other owners' stay.
                if let Some(edit) = self.shared_edit(name, *record_type, None) {
                    self.shared.push(edit);
                }
                continue;
            }
            if let Some(record) = self.current.data_record(name, *record_type) {
                self.guard(name, *record_type);
                deletes.push(record.clone());
            }
            let txt_name = self.ledger.txt_name(name, *record_type);
            self.ledger.release(&txt_name);
        }
        deletes
    }

    /// Ownership records of ours that cover nothing any more (the ledger decides which).
    fn release_orphaned_ownership(
        &mut self,
        wanted: &Wanted<'_>,
        unwanted: &BTreeSet<(String, RecordType)>,
    ) {
        let current = &self.current;
        let deletes = self.policy.allows_delete();
        let deleting = |name: &str, t| deletes && unwanted.contains(&(name.to_string(), t));
        self.ledger.release_orphans(
            &self.zones,
            |name| wants_name(wanted, name),
            |name, t| wanted.contains_key(&(name, t)),
            |name, t| current.data_record(name, t).is_some(),
            |name, t| current.data_record(name, t).is_some() && !deleting(name, t),
        );
    }

    /// The plan: ownership written before the records it covers and removed after them, so a
    /// pass cut short never leaves a record of ours without its ownership TXT.
    fn finish(
        mut self,
        creates: Vec<Endpoint>,
        mut updates: Vec<Endpoint>,
        mut deletes: Vec<Endpoint>,
    ) -> Plan {
        let (txt_creates, txt_updates, txt_deletes) = self.ownership_changes();
        // Sized once: a first pass creates every record and its ownership record here.
        let mut create = Vec::with_capacity(txt_creates.len() + creates.len());
        create.extend(txt_creates);
        create.extend(creates);
        updates.extend(txt_updates);
        deletes.extend(txt_deletes);
        self.plan.changes = Changes {
            create,
            update: updates,
            delete: deletes,
            shared: std::mem::take(&mut self.shared),
            owned_by: std::mem::take(&mut self.owned_by),
            adopted: std::mem::take(&mut self.adopted),
        };
        self.plan
    }

    /// The ownership edits as RRset changes: creates, updates and deletes of TXT records,
    /// the updates and deletes as the policy allows.
    fn ownership_changes(&mut self) -> (Vec<Endpoint>, Vec<Endpoint>, Vec<Endpoint>) {
        let current = &self.current;
        let changes = self
            .ledger
            .changes(|txt_name| current.record(txt_name, RecordType::TXT));
        let creates = changes
            .iter()
            .filter(|change| matches!(change, TxtChange::Create(_)))
            .count();
        let (mut creates, mut updates, mut deletes) =
            (Vec::with_capacity(creates), Vec::new(), Vec::new());
        for change in changes {
            // An ownership RRset is replaced or deleted only while it is as listed.
            let mut guard = |record: &Endpoint| {
                if let Some(listed) = current.record(&record.dns_name, RecordType::TXT) {
                    self.owned_by
                        .insert((record.dns_name.clone(), RecordType::TXT), listed.clone());
                }
            };
            match change {
                TxtChange::Create(record) => creates.push(record),
                TxtChange::Delete(record) if self.policy.allows_delete() => {
                    guard(&record);
                    deletes.push(record);
                }
                TxtChange::Update(record) if self.policy.allows_update() => {
                    guard(&record);
                    updates.push(record);
                }
                TxtChange::Delete(_) | TxtChange::Update(_) => self.plan.held_by_policy += 1,
            }
        }
        (creates, updates, deletes)
    }
}

/// Labels of 1–63 bytes, at most 253 bytes in all (presentation form, no trailing dot).
fn fits_dns_limits(name: &str) -> bool {
    name.len() <= 253
        && name
            .split('.')
            .all(|label| !label.is_empty() && label.len() <= 63)
}

fn blocked(endpoint: &Endpoint, reason: BlockReason) -> Blocked {
    Blocked {
        dns_name: endpoint.dns_name.clone(),
        record_type: endpoint.record_type,
        resource: endpoint.resource.clone(),
        reason,
    }
}

/// Canonical form so that equal records compare equal: lower-case names, canonical addresses;
/// `None` when the record is in that form already. The TTL stays unset when no annotation sets
/// it: see [`differs`].
fn normalized(endpoint: &Endpoint) -> Option<Endpoint> {
    let canonical_target = |target: &String| -> Option<String> {
        let normal = match endpoint.record_type {
            RecordType::A | RecordType::AAAA => target.parse::<IpAddr>().ok()?.to_string(),
            RecordType::CNAME => canonical(target).into_owned(),
            RecordType::TXT => return None,
        };
        (normal != *target).then_some(normal)
    };
    let name = canonical(&endpoint.dns_name);
    if *name == *endpoint.dns_name
        && endpoint
            .targets
            .iter()
            .all(|t| canonical_target(t).is_none())
    {
        return None;
    }
    let targets = endpoint
        .targets
        .iter()
        .map(|target| canonical_target(target).unwrap_or_else(|| target.clone()))
        .collect();
    Some(Endpoint {
        dns_name: name.into_owned(),
        record_type: endpoint.record_type,
        targets,
        ttl: endpoint.ttl,
        resource: endpoint.resource.clone(),
    })
}

/// Whether an owned record must be rewritten. Its TTL counts only when the desired record sets
/// one (a `ttl` annotation): a record that another writer (external-dns, with its TTL 0 = the
/// provider's default) or an operator left at some TTL is not rewritten for the TTL alone, so a
/// take-over changes nothing that the routes do not ask to change. New records get
/// [`DEFAULT_TTL`].
fn differs(existing: &Endpoint, wanted: &Endpoint) -> bool {
    existing.targets != wanted.targets
        || wanted
            .ttl
            .is_some_and(|ttl| existing.ttl.unwrap_or(DEFAULT_TTL) != ttl)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dns::registry::{self, ownership_value};

    const OWNER: &str = "gw";

    fn zones() -> Vec<String> {
        vec!["example.com".to_string()]
    }

    /// The plan of owner [`OWNER`] under policy sync in the zone `example.com`.
    fn plan_sync(desired: &[Endpoint], current: &[Endpoint]) -> Plan {
        plan(desired, current, OWNER, Policy::Sync, &zones())
    }

    fn a(name: &str, ip: &str) -> Endpoint {
        Endpoint::new(name, RecordType::A, [ip]).with_resource("httproute/shop/web")
    }

    fn txt(name: &str, values: &[String]) -> Endpoint {
        Endpoint::new(name, RecordType::TXT, values.iter().cloned()).with_ttl(300)
    }

    fn ours(name: &str, record_type: RecordType) -> Endpoint {
        txt(
            &registry::txt_name(name, record_type),
            &[ownership_value(OWNER, Some("httproute/shop/web"))],
        )
    }

    #[test]
    fn a_plan_taking_the_desired_records_equals_one_copying_them() {
        // Created, updated, unchanged, blocked (outside the zones, a duplicate, not canonical).
        let desired = vec![
            a("new.example.com", "192.0.2.1"),
            a("moved.example.com", "192.0.2.9"),
            a("same.example.com", "192.0.2.3"),
            a("elsewhere.example.org", "192.0.2.4"),
            a("new.example.com", "192.0.2.5"),
            Endpoint {
                dns_name: "Upper.Example.com.".to_string(),
                ..a("x", "192.0.2.6")
            },
        ];
        let current = vec![
            a("moved.example.com", "192.0.2.2").with_ttl(300),
            ours("moved.example.com", RecordType::A),
            a("same.example.com", "192.0.2.3").with_ttl(300),
            ours("same.example.com", RecordType::A),
            a("gone.example.com", "192.0.2.7").with_ttl(300),
            ours("gone.example.com", RecordType::A),
        ];
        let registry = TxtRegistry::new(OWNER);
        let copied = plan_with(&desired, &current, &registry, Policy::Sync, &zones());
        let planned = Planned::new(
            &desired,
            &current,
            &registry,
            Policy::Sync,
            &zones(),
            &Scope::default(),
        );
        assert_eq!(planned.blocked(), copied.blocked.as_slice());
        let taken = planned.taking(desired.clone());
        assert_eq!(taken.changes, copied.changes);
        assert_eq!(taken.blocked, copied.blocked);
        assert_eq!(
            names(&copied.changes.create),
            [
                "a-new.example.com TXT",
                "a-upper.example.com TXT",
                "new.example.com A",
                "upper.example.com A"
            ]
        );
        assert_eq!(
            copied.changes.delete.len(),
            2,
            "{:?}",
            copied.changes.delete
        );
    }

    fn names(endpoints: &[Endpoint]) -> Vec<String> {
        endpoints
            .iter()
            .map(|e| format!("{} {}", e.dns_name, e.record_type))
            .collect()
    }

    #[test]
    fn creates_record_and_ownership_into_empty_zone() {
        let plan = plan_sync(&[a("app.example.com", "192.0.2.1")], &[]);
        assert_eq!(
            names(&plan.changes.create),
            ["a-app.example.com TXT", "app.example.com A"]
        );
        assert_eq!(
            plan.changes.create[0].targets.iter().next().unwrap(),
            "heritage=external-dns,external-dns/owner=gw,external-dns/resource=httproute/shop/web"
        );
        assert_eq!(plan.changes.create[1].ttl, Some(DEFAULT_TTL));
        assert!(plan.changes.update.is_empty() && plan.changes.delete.is_empty());
    }

    #[test]
    fn nothing_to_do_when_converged() {
        let current = vec![
            a("app.example.com", "192.0.2.1").with_ttl(300),
            ours("app.example.com", RecordType::A),
        ];
        let plan = plan_sync(&[a("app.example.com", "192.0.2.1")], &current);
        assert!(plan.is_empty(), "{plan:?}");
        assert!(plan.blocked.is_empty());
    }

    #[test]
    fn updates_targets_and_ttl_of_owned_records() {
        let current = vec![
            a("app.example.com", "192.0.2.1").with_ttl(300),
            ours("app.example.com", RecordType::A),
        ];
        let new_ip = plan_sync(&[a("app.example.com", "192.0.2.2")], &current);
        assert_eq!(names(&new_ip.changes.update), ["app.example.com A"]);
        let new_ttl = plan_sync(&[a("app.example.com", "192.0.2.1").with_ttl(60)], &current);
        assert_eq!(new_ttl.changes.update[0].ttl, Some(60));
    }

    #[test]
    fn takes_over_records_at_another_ttl_without_rewriting_them() {
        // external-dns writes TTL 0 (the provider's default) when no annotation sets one.
        let current = vec![
            a("app.example.com", "192.0.2.1").with_ttl(0),
            ours("app.example.com", RecordType::A),
        ];
        let plan = plan_sync(&[a("app.example.com", "192.0.2.1")], &current);
        assert!(plan.is_empty(), "{plan:?}");
        // A target change keeps the record's TTL; an annotation's TTL replaces it.
        let moved = plan_sync(&[a("app.example.com", "192.0.2.2")], &current);
        assert_eq!(moved.changes.update[0].ttl, Some(0));
        let annotated = plan_sync(&[a("app.example.com", "192.0.2.1").with_ttl(300)], &current);
        assert_eq!(annotated.changes.update[0].ttl, Some(300));
    }

    #[test]
    fn deletes_owned_records_no_longer_wanted_only_under_sync() {
        let current = vec![
            a("app.example.com", "192.0.2.1").with_ttl(300),
            ours("app.example.com", RecordType::A),
        ];
        let sync = plan_sync(&[], &current);
        assert_eq!(
            names(&sync.changes.delete),
            ["app.example.com A", "a-app.example.com TXT"]
        );
        for policy in [Policy::UpsertOnly, Policy::CreateOnly] {
            let held = plan(&[], &current, OWNER, policy, &zones());
            assert!(held.is_empty(), "{policy}: {held:?}");
            assert_eq!(held.held_by_policy, 1);
        }
    }

    #[test]
    fn create_only_never_updates() {
        let current = vec![
            a("app.example.com", "192.0.2.1").with_ttl(300),
            ours("app.example.com", RecordType::A),
        ];
        let held = plan(
            &[
                a("app.example.com", "192.0.2.9"),
                a("new.example.com", "192.0.2.3"),
            ],
            &current,
            OWNER,
            Policy::CreateOnly,
            &zones(),
        );
        assert!(held.changes.update.is_empty());
        assert_eq!(
            names(&held.changes.create),
            ["a-new.example.com TXT", "new.example.com A"]
        );
        assert_eq!(held.held_by_policy, 1);
    }

    #[test]
    fn foreign_and_other_owner_records_block_and_survive() {
        let current = vec![
            a("foreign.example.com", "198.51.100.1").with_ttl(300),
            a("other.example.com", "198.51.100.2").with_ttl(300),
            txt(
                "a-other.example.com",
                &[ownership_value("someone-else", None)],
            ),
        ];
        let desired = [
            a("foreign.example.com", "192.0.2.1"),
            a("other.example.com", "192.0.2.1"),
        ];
        for policy in [Policy::Sync, Policy::UpsertOnly, Policy::CreateOnly] {
            let plan = plan(&desired, &current, OWNER, policy, &zones());
            assert!(plan.is_empty(), "{policy}: {plan:?}");
            let reasons: Vec<_> = plan.blocked.iter().map(|b| b.reason.clone()).collect();
            assert_eq!(
                reasons,
                [
                    BlockReason::ForeignRecord,
                    BlockReason::OwnedByOther {
                        owner: "someone-else".into()
                    }
                ]
            );
        }
        // Not desired at all: still untouched under sync.
        assert!(plan_sync(&[], &current).is_empty());
    }

    #[test]
    fn claim_of_another_owner_blocks_even_when_record_is_missing() {
        let current = vec![txt(
            "a-app.example.com",
            &[ownership_value("someone-else", None)],
        )];
        let plan = plan_sync(&[a("app.example.com", "192.0.2.1")], &current);
        assert!(plan.is_empty());
        assert_eq!(plan.blocked.len(), 1);
    }

    #[test]
    fn adopts_external_dns_records_with_our_owner_id() {
        // external-dns wrote both formats, with its own resource label.
        let value = ownership_value(OWNER, Some("ingress/shop/old"));
        let current = vec![
            a("app.example.com", "192.0.2.1").with_ttl(300),
            txt("a-app.example.com", std::slice::from_ref(&value)),
            txt("app.example.com", &[value]),
        ];
        let plan = plan_sync(&[a("app.example.com", "192.0.2.1")], &current);
        assert!(plan.blocked.is_empty());
        // The record is kept as is; only the new-format TXT's resource label is refreshed.
        assert_eq!(names(&plan.changes.update), ["a-app.example.com TXT"]);
        assert!(plan.changes.create.is_empty() && plan.changes.delete.is_empty());
    }

    #[test]
    fn adopts_legacy_format_and_writes_the_new_one() {
        let current = vec![
            Endpoint::new("app.example.com", RecordType::CNAME, ["lb.example.net"]).with_ttl(300),
            txt("app.example.com", &[ownership_value(OWNER, None)]),
        ];
        let desired = [Endpoint::new(
            "app.example.com",
            RecordType::CNAME,
            ["lb.example.net."],
        )];
        let plan = plan_sync(&desired, &current);
        assert!(plan.blocked.is_empty());
        assert_eq!(names(&plan.changes.create), ["cname-app.example.com TXT"]);
        assert!(plan.changes.update.is_empty() && plan.changes.delete.is_empty());
        // Once the record goes, both ownership records go with it.
        let gone = plan_all_deleted(&current);
        assert_eq!(
            names(&gone),
            ["app.example.com CNAME", "app.example.com TXT"]
        );
    }

    fn plan_all_deleted(current: &[Endpoint]) -> Vec<Endpoint> {
        plan(&[], current, OWNER, Policy::Sync, &zones())
            .changes
            .delete
    }

    #[test]
    fn limited_to_managed_zones() {
        let current = vec![
            a("app.example.org", "192.0.2.1").with_ttl(300),
            ours("app.example.org", RecordType::A),
        ];
        let plan = plan_sync(&[a("new.example.org", "192.0.2.1")], &current);
        assert!(plan.is_empty(), "{plan:?}");
        assert_eq!(plan.blocked[0].reason, BlockReason::OutsideZones);
    }

    #[test]
    fn apex_records_cannot_carry_ownership_inside_the_zone() {
        let plan = plan_sync(&[a("example.com", "192.0.2.1")], &[]);
        assert!(plan.is_empty());
        assert!(matches!(
            plan.blocked[0].reason,
            BlockReason::OwnershipOutsideZone { .. }
        ));
    }

    #[test]
    fn cname_cannot_join_foreign_data_but_replaces_our_own() {
        let foreign = vec![txt("app.example.com", &["v=spf1 -all".to_string()])];
        let cname = [Endpoint::new(
            "app.example.com",
            RecordType::CNAME,
            ["lb.example.net"],
        )];
        let blocked_plan = plan_sync(&cname, &foreign);
        assert!(blocked_plan.is_empty());
        assert_eq!(
            blocked_plan.blocked[0].reason,
            BlockReason::CnameConflict {
                existing: RecordType::TXT
            }
        );

        let ours_a = vec![
            a("app.example.com", "192.0.2.1").with_ttl(300),
            ours("app.example.com", RecordType::A),
        ];
        let switch = plan_sync(&cname, &ours_a);
        assert!(switch.blocked.is_empty(), "{switch:?}");
        assert_eq!(
            names(&switch.changes.delete),
            ["app.example.com A", "a-app.example.com TXT"]
        );
        assert_eq!(
            names(&switch.changes.create),
            ["cname-app.example.com TXT", "app.example.com CNAME"]
        );
        // Without deletes the A stays and the CNAME cannot be added.
        let upsert = plan(&cname, &ours_a, OWNER, Policy::UpsertOnly, &zones());
        assert!(upsert.changes.create.is_empty());
        assert_eq!(upsert.blocked.len(), 1);
    }

    #[test]
    fn orphan_ownership_records_are_cleaned_and_drift_is_repaired() {
        let orphan = vec![ours("gone.example.com", RecordType::A)];
        let cleaned = plan_sync(&[], &orphan);
        assert_eq!(names(&cleaned.changes.delete), ["a-gone.example.com TXT"]);
        // Record deleted by hand while still desired: recreated, ownership kept.
        let repaired = plan_sync(&[a("gone.example.com", "192.0.2.1")], &orphan);
        assert_eq!(names(&repaired.changes.create), ["gone.example.com A"]);
    }

    #[test]
    fn unrelated_txt_at_ownership_name_blocks() {
        let current = vec![txt("a-app.example.com", &["hello".to_string()])];
        let plan = plan_sync(&[a("app.example.com", "192.0.2.1")], &current);
        assert!(plan.is_empty());
        assert!(matches!(
            plan.blocked[0].reason,
            BlockReason::RegistryNameTaken { .. }
        ));
    }

    #[test]
    fn blocked_records_come_in_desired_order_and_the_first_of_a_duplicate_is_kept() {
        let desired = [
            a("b.example.com", "192.0.2.1"),
            a("a.example.com", "192.0.2.2"),
            a("elsewhere.example.org", "192.0.2.3"),
            a("a.example.com", "192.0.2.4"),
            a("b.example.com", "192.0.2.5"),
        ];
        let plan = plan_sync(&desired, &[]);
        let blocked: Vec<(&str, &BlockReason)> = plan
            .blocked
            .iter()
            .map(|b| (b.dns_name.as_str(), &b.reason))
            .collect();
        assert_eq!(
            blocked,
            [
                ("elsewhere.example.org", &BlockReason::OutsideZones),
                ("a.example.com", &BlockReason::DuplicateDesired),
                ("b.example.com", &BlockReason::DuplicateDesired),
            ]
        );
        let created: Vec<(&str, &str)> = plan
            .changes
            .create
            .iter()
            .filter(|e| e.record_type == RecordType::A)
            .map(|e| {
                (
                    e.dns_name.as_str(),
                    e.targets.iter().next().unwrap().as_str(),
                )
            })
            .collect();
        assert_eq!(
            created,
            [
                ("a.example.com", "192.0.2.2"),
                ("b.example.com", "192.0.2.1")
            ]
        );
    }

    #[test]
    fn of_a_record_listed_twice_the_plan_reads_the_later() {
        let current = [
            a("app.example.com", "192.0.2.1"),
            ours("app.example.com", RecordType::A),
            a("app.example.com", "192.0.2.2"),
        ];
        let plan = plan_sync(&[a("app.example.com", "192.0.2.2")], &current);
        assert!(plan.is_empty(), "{:?}", plan.changes);
        let plan = plan_sync(&[a("app.example.com", "192.0.2.1")], &current);
        assert_eq!(plan.changes.update.len(), 1, "{:?}", plan.changes);
    }

    #[test]
    fn duplicates_and_normalization() {
        let desired = [
            Endpoint::new("App.Example.COM.", RecordType::AAAA, ["2001:DB8:0::1"]),
            Endpoint::new("app.example.com", RecordType::AAAA, ["2001:db8::2"]),
        ];
        let plan = plan_sync(&desired, &[]);
        assert_eq!(plan.blocked[0].reason, BlockReason::DuplicateDesired);
        let created = &plan.changes.create[1];
        assert_eq!(created.dns_name, "app.example.com");
        assert_eq!(created.targets.iter().next().unwrap(), "2001:db8::1");
    }

    #[test]
    fn wildcard_records_get_prefixed_ownership() {
        let plan = plan_sync(&[a("*.example.com", "192.0.2.1")], &[]);
        assert_eq!(
            names(&plan.changes.create),
            ["a-*.example.com TXT", "*.example.com A"]
        );
    }

    #[test]
    fn wildcard_replacement_names_ownership_and_keeps_it() {
        let registry = TxtRegistry::new(OWNER).with_wildcard_replacement(Some("any".into()));
        let desired = [a("*.example.com", "192.0.2.1")];
        let created = plan_with(&desired, &[], &registry, Policy::Sync, &zones());
        assert_eq!(
            names(&created.changes.create),
            ["a-any.example.com TXT", "*.example.com A"]
        );
        let current: Vec<Endpoint> = created
            .changes
            .create
            .iter()
            .map(|e| e.clone().with_ttl(300))
            .collect();
        let steady = plan_with(&desired, &current, &registry, Policy::Sync, &zones());
        assert!(steady.is_empty() && steady.blocked.is_empty(), "{steady:?}");
        let gone = plan_with(&[], &current, &registry, Policy::Sync, &zones());
        assert_eq!(
            names(&gone.changes.delete),
            ["*.example.com A", "a-any.example.com TXT"]
        );
    }

    #[test]
    fn ownership_name_over_63_byte_label_blocks() {
        let label = "x".repeat(60);
        let ok_for_a = plan_sync(&[a(&format!("{label}.example.com"), "192.0.2.1")], &[]);
        assert!(ok_for_a.blocked.is_empty(), "a- prefix fits: 62 bytes");
        let cname = Endpoint::new(
            &format!("{label}.example.com"),
            RecordType::CNAME,
            ["t.example.net"],
        );
        let too_long = plan_sync(&[cname], &[]);
        assert!(too_long.is_empty());
        assert!(matches!(
            too_long.blocked[0].reason,
            BlockReason::OwnershipNameTooLong { .. }
        ));
    }

    #[test]
    fn policy_parses() {
        assert_eq!("upsert-only".parse::<Policy>().unwrap(), Policy::UpsertOnly);
        assert!("everything".parse::<Policy>().is_err());
    }

    fn shared_plan(desired: &[Endpoint], current: &[Endpoint]) -> Plan {
        let shared = vec!["b.example.com".to_string()];
        plan_shared(
            desired,
            current,
            &TxtRegistry::new(OWNER),
            Policy::Sync,
            &zones(),
            &shared,
        )
    }

    fn shared_by(owner: &str, targets: &[&str], ttl: u32) -> String {
        registry::shared_value(
            owner,
            Some("httproute/shop/web"),
            targets.iter().copied(),
            ttl,
        )
    }

    #[test]
    fn a_shared_name_gets_our_targets_added_and_removed_record_by_record() {
        // East shares b with 10.0.0.2; we add 10.0.0.1 and our value, nothing of east's.
        let east = shared_by("east", &["10.0.0.2"], 300);
        let current = vec![
            a("b.example.com", "10.0.0.2").with_ttl(300),
            txt("a-b.example.com", std::slice::from_ref(&east)),
        ];
        let plan = shared_plan(&[a("b.example.com", "10.0.0.1").with_ttl(300)], &current);
        assert!(plan.blocked.is_empty(), "{:?}", plan.blocked);
        assert!(plan.changes.create.is_empty() && plan.changes.update.is_empty());
        let [edit] = &plan.changes.shared[..] else {
            panic!("one shared edit: {:?}", plan.changes);
        };
        assert_eq!(edit.add, ["10.0.0.1"]);
        assert!(edit.remove.is_empty() && edit.txt_remove.is_none());
        let ours = shared_by(OWNER, &["10.0.0.1"], 300);
        assert_eq!(edit.txt_add.as_deref(), Some(ours.as_str()));
        let (data, txt_after) = edit.outcome();
        let data = data.unwrap();
        assert_eq!(data.targets.len(), 2);
        assert_eq!(txt_after.unwrap().targets.len(), 2);

        // Both there: a resync changes nothing.
        let both = vec![
            Endpoint::new("b.example.com", RecordType::A, ["10.0.0.1", "10.0.0.2"]).with_ttl(300),
            txt("a-b.example.com", &[east.clone(), ours.clone()]),
        ];
        let plan = shared_plan(&[a("b.example.com", "10.0.0.1").with_ttl(300)], &both);
        assert!(plan.is_empty(), "{:?}", plan.changes);

        // Our route goes: our target and our value go, east's stay.
        let plan = shared_plan(&[], &both);
        let [edit] = &plan.changes.shared[..] else {
            panic!("one shared edit: {:?}", plan.changes);
        };
        assert_eq!(edit.remove, ["10.0.0.1"]);
        assert_eq!(edit.txt_remove.as_deref(), Some(ours.as_str()));
        assert!(edit.add.is_empty() && edit.txt_add.is_none());
        assert!(plan.changes.delete.is_empty(), "no RRset is deleted whole");
        let (data, txt_after) = edit.outcome();
        assert_eq!(
            data.unwrap().targets.iter().collect::<Vec<_>>(),
            ["10.0.0.2"]
        );
        assert_eq!(txt_after.unwrap().targets.len(), 1);

        // A target both add stays while the other still adds it.
        let same = shared_by("east", &["10.0.0.1"], 300);
        let current = vec![
            a("b.example.com", "10.0.0.1").with_ttl(300),
            txt("a-b.example.com", &[same, ours.clone()]),
        ];
        let plan = shared_plan(&[], &current);
        let [edit] = &plan.changes.shared[..] else {
            panic!("one shared edit: {:?}", plan.changes);
        };
        assert!(edit.remove.is_empty(), "east still adds 10.0.0.1");

        // The last owner's removal removes the name and its ownership record.
        let alone = vec![
            a("b.example.com", "10.0.0.1").with_ttl(300),
            txt("a-b.example.com", std::slice::from_ref(&ours)),
        ];
        let plan = shared_plan(&[], &alone);
        let whole = plan.changes.whole_rrsets();
        assert_eq!(
            names(&whole.delete),
            ["b.example.com A", "a-b.example.com TXT"],
            "the record before its ownership"
        );
    }

    #[test]
    fn a_shared_name_is_never_joined_against_an_owner_that_holds_it_alone_or_another_ttl() {
        let alone = vec![
            a("b.example.com", "10.0.0.2"),
            txt("a-b.example.com", &[ownership_value("east", None)]),
        ];
        let plan = shared_plan(&[a("b.example.com", "10.0.0.1")], &alone);
        assert!(plan.is_empty());
        assert!(matches!(
            &plan.blocked[0].reason,
            BlockReason::SharedDisagreement { owner, .. } if owner == "east"
        ));
        let other_ttl = vec![
            a("b.example.com", "10.0.0.2").with_ttl(60),
            txt("a-b.example.com", &[shared_by("east", &["10.0.0.2"], 60)]),
        ];
        let plan = shared_plan(&[a("b.example.com", "10.0.0.1").with_ttl(300)], &other_ttl);
        assert!(plan.is_empty());
        assert!(
            plan.blocked[0].reason.to_string().contains("TTL 60"),
            "{}",
            plan.blocked[0].reason
        );
        // An unmanaged record is no one's to share.
        let plan = shared_plan(
            &[a("b.example.com", "10.0.0.1")],
            &[a("b.example.com", "10.0.0.9")],
        );
        assert_eq!(plan.blocked[0].reason, BlockReason::ForeignRecord);
        // Not shared here any more, while east shares it with us: we leave it as it is.
        let both = vec![
            Endpoint::new("b.example.com", RecordType::A, ["10.0.0.1", "10.0.0.2"]).with_ttl(300),
            txt(
                "a-b.example.com",
                &[
                    shared_by("east", &["10.0.0.2"], 300),
                    shared_by(OWNER, &["10.0.0.1"], 300),
                ],
            ),
        ];
        let plan = plan_sync(&[a("b.example.com", "10.0.0.1")], &both);
        assert!(plan.is_empty(), "{:?}", plan.changes);
        assert!(matches!(
            &plan.blocked[0].reason,
            BlockReason::SharedDisagreement { owner, .. } if owner == "east"
        ));
    }

    #[test]
    fn updates_and_deletes_carry_the_ownership_rrset_they_were_planned_against() {
        let current = vec![
            a("app.example.com", "192.0.2.1"),
            ours("app.example.com", RecordType::A),
            a("old.example.com", "192.0.2.2"),
            ours("old.example.com", RecordType::A),
        ];
        let plan = plan_sync(&[a("app.example.com", "192.0.2.9")], &current);
        let owned_by = &plan.changes.owned_by;
        assert_eq!(
            owned_by.get(&("app.example.com".to_string(), RecordType::A)),
            Some(&current[1])
        );
        assert_eq!(
            owned_by.get(&("old.example.com".to_string(), RecordType::A)),
            Some(&current[3])
        );
        assert_eq!(
            owned_by.get(&("a-old.example.com".to_string(), RecordType::TXT)),
            Some(&current[3]),
            "the ownership record's own delete too"
        );
    }

    #[test]
    fn a_record_of_an_owner_gone_silent_is_adopted_under_its_ownership_as_listed() {
        let theirs = txt("a-b.example.com", &[ownership_value("east", None)]);
        let current = vec![a("b.example.com", "10.0.0.2"), theirs.clone()];
        let desired = [a("b.example.com", "10.0.0.1")];
        // East still counts: blocked as before.
        let plan = plan_sync(&desired, &current);
        assert!(plan.is_empty());
        assert_eq!(
            plan.blocked[0].reason,
            BlockReason::OwnedByOther {
                owner: "east".into()
            }
        );
        // East gone silent: the record is replaced, its ownership value becomes ours, both
        // only while east's ownership record is as listed.
        let scope = Scope {
            adoptable: vec!["east".into()],
            ..Scope::default()
        };
        let registry = TxtRegistry::new(OWNER);
        let plan = Planned::new(
            &desired,
            &current,
            &registry,
            Policy::Sync,
            &zones(),
            &scope,
        )
        .copying(&desired);
        assert!(plan.blocked.is_empty(), "{:?}", plan.blocked);
        assert_eq!(
            names(&plan.changes.update),
            ["b.example.com A", "a-b.example.com TXT"]
        );
        let txt_after = &plan.changes.update[1];
        assert_eq!(txt_after.targets.len(), 1);
        assert!(txt_after.targets.iter().all(|v| v.contains("owner=gw")));
        assert_eq!(
            plan.changes
                .owned_by
                .get(&("b.example.com".to_string(), RecordType::A)),
            Some(&theirs)
        );
        assert_eq!(
            plan.changes.adopted,
            [(
                "b.example.com".to_string(),
                RecordType::A,
                "east".to_string()
            )]
        );
        // Under create-only nothing is taken over.
        let plan = Planned::new(
            &desired,
            &current,
            &registry,
            Policy::CreateOnly,
            &zones(),
            &scope,
        )
        .copying(&desired);
        assert!(plan.changes.adopted.is_empty());
    }
}
