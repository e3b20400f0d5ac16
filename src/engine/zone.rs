//! The managed zones as the DNS provider holds them, as the engine reads them
//! (ARCHITECTURE.md, "Many clusters, one zone"): the names some other owner holds there. Pure
//! data: the runtime (`crate::zone_view`) reads the provider and the ownership records, the index
//! holds the result, and the settlement and the admission rules read it. The engine never lists
//! a zone.

use std::collections::BTreeMap;

use super::concat;
use crate::model::{ObjectKind, RecordType};

/// Who holds one name in the zone, when it is not this installation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneHolder {
    /// The owner id of the ownership record covering the name's records; `None` when no
    /// ownership record covers them (an unmanaged record).
    pub owner: Option<Box<str>>,
    /// The ownership record's resource label (`httproute/apps/b1`), when it has one.
    pub resource: Option<Box<str>>,
    /// The name's A, AAAA and CNAME targets, sorted.
    pub targets: Box<[Box<str>]>,
    /// Every ownership value at the name marks it shared across clusters (`--shared-name`):
    /// how the others share it. `None`: held alone.
    pub shared: Option<Box<Sharing>>,
}

/// How the other owners of a name shared across clusters publish it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sharing {
    /// Their owner ids, sorted.
    pub owners: Box<[Box<str>]>,
    /// The record types they publish (A and AAAA, or CNAME).
    pub record_types: Box<[RecordType]>,
    /// The TTL the first of them writes (`gateway-dns/ttl`), when its value says.
    pub ttl: Option<u32>,
}

impl ZoneHolder {
    /// `owner "east"`, or `an unmanaged record`.
    pub fn who(&self) -> String {
        match &self.owner {
            Some(owner) => concat(&["owner \"", owner, "\""]),
            None => "an unmanaged record".to_owned(),
        }
    }

    /// The resource label as a person reads it: `httproute/apps/b1` → `HTTPRoute apps/b1`.
    pub fn resource_text(&self) -> Option<String> {
        let resource = self.resource.as_deref()?;
        let (kind, rest) = resource.split_once('/')?;
        let kind = ObjectKind::ROUTES
            .iter()
            .map(|k| k.kind())
            .find(|k| k.eq_ignore_ascii_case(kind))
            .unwrap_or(kind);
        Some(concat(&[kind, " ", rest]))
    }
}

/// The names of the managed zones held by another owner or by no owner at all, by canonical
/// name. Names this installation holds (any address record of the name is ours) are not in it.
/// Empty until the provider was read: then nothing is held, and the cross-cluster rules say
/// nothing (the checks fail open, and the runtime says so).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ZoneView {
    held: BTreeMap<Box<str>, ZoneHolder>,
}

static NONE: ZoneView = ZoneView::new();

impl ZoneView {
    pub const fn new() -> ZoneView {
        ZoneView {
            held: BTreeMap::new(),
        }
    }

    /// No zone read: what `check` without a zone file and the tests' plain worlds read.
    pub fn none() -> &'static ZoneView {
        &NONE
    }

    /// Records that `holder` holds `name` (canonical). A second holder of one name (another
    /// record type) adds its targets; the first owner named stays.
    pub fn hold(&mut self, name: &str, holder: ZoneHolder) {
        match self.held.get_mut(name) {
            None => {
                self.held.insert(name.into(), holder);
            }
            Some(held) => {
                // Held alone through one record type is held alone.
                held.shared = match (held.shared.take(), holder.shared) {
                    (Some(a), Some(b)) => {
                        let mut owners = a.owners.into_vec();
                        owners.extend(b.owners.into_vec());
                        owners.sort_unstable();
                        owners.dedup();
                        let mut record_types = a.record_types.into_vec();
                        record_types.extend(b.record_types.into_vec());
                        record_types.sort_unstable();
                        record_types.dedup();
                        Some(Box::new(Sharing {
                            owners: owners.into_boxed_slice(),
                            record_types: record_types.into_boxed_slice(),
                            ttl: a.ttl.or(b.ttl),
                        }))
                    }
                    _ => None,
                };
                let mut targets: Vec<Box<str>> = std::mem::take(&mut held.targets).into_vec();
                targets.extend(holder.targets.into_vec());
                targets.sort_unstable();
                targets.dedup();
                held.targets = targets.into_boxed_slice();
                if held.owner.is_none() {
                    held.owner = holder.owner;
                    held.resource = holder.resource;
                }
            }
        }
    }

    /// Who holds `name` (canonical), when someone other than this installation does.
    pub fn holder(&self, name: &str) -> Option<&ZoneHolder> {
        self.held.get(name)
    }

    pub fn len(&self) -> usize {
        self.held.len()
    }

    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &ZoneHolder)> {
        self.held.iter().map(|(name, holder)| (&**name, holder))
    }
}

/// Why a claim on `name` is refused, which `holder` holds in the zone, when it is: a name held
/// alone is refused, a name shared across clusters only when this cluster does not share it
/// too (`shared_here`: it is on this cluster's `--shared-name` list).
pub fn refusal(shared_here: bool, name: &str, holder: &ZoneHolder) -> Option<String> {
    match (&holder.shared, shared_here) {
        (Some(_), true) => None,
        (Some(sharing), false) => {
            let owners: Vec<String> = sharing
                .owners
                .iter()
                .map(|owner| concat(&["\"", owner, "\""]))
                .collect();
            let owners = owners.join(", ");
            Some(concat(&[
                name,
                " is shared across clusters by owner ",
                &owners,
                " (",
                &holder_what(holder),
                "); this cluster does not list it in --shared-name: add it there to join them, \
                 or drop the hostname",
            ]))
        }
        (None, true) if holder.owner.is_some() => {
            let owner = holder.owner.as_deref().unwrap_or_default();
            Some(concat(&[
                name,
                " is published by ",
                &holder.who(),
                " (",
                &holder_what(holder),
                ") as its own: this cluster lists it in --shared-name, but a name held alone \
                 can't be joined: drop the hostname, or have \"",
                owner,
                "\" share it (--shared-name) or release it",
            ]))
        }
        _ => Some(held_message(name, holder)),
    }
}

/// Why this cluster's `record_type` records of a name it shares with `sharing`'s owners, at
/// `ttl`, can't join theirs, when they can't: a CNAME can't share a name with addresses, and
/// one RRset has one TTL.
pub fn sharing_mismatch(
    name: &str,
    sharing: &Sharing,
    record_type: RecordType,
    ttl: u32,
) -> Option<String> {
    let owner = sharing.owners.first().map_or("", |o| &**o);
    let clash = sharing.record_types.iter().find(|theirs| {
        **theirs != record_type
            && (record_type == RecordType::CNAME || **theirs == RecordType::CNAME)
    });
    if let Some(theirs) = clash {
        return Some(concat(&[
            name,
            " is shared across clusters by owner \"",
            owner,
            "\" as ",
            theirs.as_str(),
            " records; this cluster's Gateways give a ",
            record_type.as_str(),
            ", which can't join them: give the Gateways addresses of one kind",
        ]));
    }
    match sharing.ttl {
        Some(theirs) if theirs != ttl => Some(concat(&[
            name,
            " is shared across clusters by owner \"",
            owner,
            "\" with TTL ",
            &theirs.to_string(),
            "; this cluster publishes it with TTL ",
            &ttl.to_string(),
            ", and one name has one TTL: set the same TTL in both clusters",
        ])),
        _ => None,
    }
}

/// The holder's resource and targets: `HTTPRoute apps/b1, 203.0.113.10`.
fn holder_what(holder: &ZoneHolder) -> String {
    let targets: Vec<&str> = holder.targets.iter().map(|t| &**t).collect();
    let targets = targets.join(", ");
    match holder.resource_text() {
        Some(resource) if targets.is_empty() => resource,
        Some(resource) => concat(&[&resource, ", ", &targets]),
        None => targets,
    }
}

/// The one-line message of a claim on `name`, which `holder` holds in the zone.
pub fn held_message(name: &str, holder: &ZoneHolder) -> String {
    let what = holder_what(holder);
    let remedy = match &holder.owner {
        Some(owner) => concat(&["drop the hostname, or have \"", owner, "\" release it"]),
        None => "drop the hostname, or remove that record from the zone".to_owned(),
    };
    concat(&[
        name,
        " is published by ",
        &holder.who(),
        " (",
        &what,
        "); it can't also point at this cluster's Gateways: ",
        &remedy,
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holder(owner: Option<&str>, resource: Option<&str>, targets: &[&str]) -> ZoneHolder {
        ZoneHolder {
            owner: owner.map(Into::into),
            resource: resource.map(Into::into),
            targets: targets.iter().map(|t| (*t).into()).collect(),
            shared: None,
        }
    }

    #[test]
    fn messages_name_the_owner_its_resource_and_targets() {
        let east = holder(Some("east"), Some("httproute/apps/b1"), &["203.0.113.10"]);
        assert_eq!(
            held_message("b.example.com", &east),
            "b.example.com is published by owner \"east\" (HTTPRoute apps/b1, 203.0.113.10); \
             it can't also point at this cluster's Gateways: drop the hostname, or have \"east\" \
             release it"
        );
        let unmanaged = holder(None, None, &["203.0.113.9"]);
        assert_eq!(
            held_message("c.example.com", &unmanaged),
            "c.example.com is published by an unmanaged record (203.0.113.9); it can't also \
             point at this cluster's Gateways: drop the hostname, or remove that record from the \
             zone"
        );
        let service = holder(
            Some("ext"),
            Some("service/default/web"),
            &["web.lb.example"],
        );
        assert_eq!(
            service.resource_text().as_deref(),
            Some("service default/web")
        );
    }

    #[test]
    fn a_second_record_of_a_name_adds_its_targets() {
        let mut view = ZoneView::new();
        view.hold("b.example.com", holder(None, None, &["192.0.2.1"]));
        view.hold(
            "b.example.com",
            holder(
                Some("east"),
                Some("httproute/a/b"),
                &["2001:db8::1", "192.0.2.1"],
            ),
        );
        let held = view.holder("b.example.com").unwrap();
        assert_eq!(held.owner.as_deref(), Some("east"));
        assert_eq!(
            &*held.targets,
            &["192.0.2.1".into(), "2001:db8::1".into()][..]
        );
        assert_eq!(view.len(), 1);
        assert!(ZoneView::none().holder("b.example.com").is_none());
    }

    #[test]
    fn a_shared_name_is_joined_only_with_the_same_record_kind_and_ttl() {
        let sharing = Sharing {
            owners: Box::new(["east".into()]),
            record_types: Box::new([RecordType::A]),
            ttl: Some(300),
        };
        let name = "s.example.com";
        assert_eq!(sharing_mismatch(name, &sharing, RecordType::A, 300), None);
        assert_eq!(
            sharing_mismatch(name, &sharing, RecordType::AAAA, 300),
            None
        );
        assert_eq!(
            sharing_mismatch(name, &sharing, RecordType::A, 60).as_deref(),
            Some(
                "s.example.com is shared across clusters by owner \"east\" with TTL 300; this \
                 cluster publishes it with TTL 60, and one name has one TTL: set the same TTL in \
                 both clusters"
            )
        );
        assert!(
            sharing_mismatch(name, &sharing, RecordType::CNAME, 300)
                .unwrap()
                .contains("as A records; this cluster's Gateways give a CNAME")
        );
    }
}
