//! One watcher's objects into the index: read out of the API's JSON, gathered while a list
//! runs, applied when it completes (or held, when it would empty a kind), and each watch event
//! as it comes.

use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use kube::api::{ApiResource, ObjectMeta};
use kube::core::{DynamicResourceScope, Resource};
use serde::Deserialize;
use serde::de::Error as _;
use serde_json::Value;
use serde_json::value::RawValue;
use tracing::{debug, info, warn};

use crate::index::Index;
use crate::model::{self, DecodeError, Object, ObjectKey, ObjectKind};

use super::state::{
    Absence, AbsenceDecision, Emptied, KindStatus, Shared, lock, update_readiness, with_current,
};

/// A watched object as it leaves the API response: its identity and the fields the engine
/// reads, already out of the JSON tree. A list page of these costs a fraction of the same page
/// of `DynamicObject`s (managedFields, rules, the rest of status never stay in memory), which
/// keeps a relist's peak close to the steady state.
#[derive(Clone, Debug)]
pub(super) struct Watched {
    /// Only name, namespace and resourceVersion: what the watcher and the index need.
    pub(super) metadata: ObjectMeta,
    pub(super) raw: Result<model::RawObject, DecodeError>,
}

impl Resource for Watched {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;

    fn kind(resource: &ApiResource) -> Cow<'_, str> {
        resource.kind.as_str().into()
    }
    fn group(resource: &ApiResource) -> Cow<'_, str> {
        resource.group.as_str().into()
    }
    fn version(resource: &ApiResource) -> Cow<'_, str> {
        resource.version.as_str().into()
    }
    fn api_version(resource: &ApiResource) -> Cow<'_, str> {
        resource.api_version.as_str().into()
    }
    fn plural(resource: &ApiResource) -> Cow<'_, str> {
        resource.plural.as_str().into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl<'de> Deserialize<'de> for Watched {
    /// Any JSON object is accepted: one the engine cannot read becomes a decode error for this
    /// object alone, never a failed list page (which would stall the whole kind). The object's
    /// text is set apart first (a copy, no tree), then read straight into the raw shapes; only
    /// an object that fails that read is read again as a tree, for its identity.
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Watched, D::Error> {
        let text = Box::<RawValue>::deserialize(deserializer)?;
        match model::RawObject::from_json(text.get()) {
            Ok(mut raw) => {
                let metadata = ObjectMeta {
                    name: raw.name().map(str::to_owned),
                    namespace: raw.namespace().map(str::to_owned),
                    resource_version: raw.take_resource_version(),
                    ..ObjectMeta::default()
                };
                Ok(Watched {
                    metadata,
                    raw: Ok(raw),
                })
            }
            Err(error) => {
                let value: Value = serde_json::from_str(text.get()).map_err(D::Error::custom)?;
                let text = |pointer: &str| {
                    value
                        .pointer(pointer)
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                };
                let metadata = ObjectMeta {
                    name: text("/metadata/name"),
                    namespace: text("/metadata/namespace"),
                    resource_version: text("/metadata/resourceVersion"),
                    ..ObjectMeta::default()
                };
                Ok(Watched {
                    metadata,
                    raw: Err(error),
                })
            }
        }
    }
}

/// The projection of a watched object (the last-applied annotation is dropped by the decoder),
/// and the object's key when it cannot be read (the key is only built then).
pub(super) fn decode(
    kind: ObjectKind,
    object: Watched,
) -> Result<Object, (ObjectKey, DecodeError)> {
    let Watched { metadata, raw } = object;
    raw.and_then(|raw| raw.into_object(kind))
        .map_err(|error| (key_of(kind, &metadata), error))
}

pub(super) fn key_of(kind: ObjectKind, metadata: &ObjectMeta) -> ObjectKey {
    let namespace = if kind.is_namespaced() {
        metadata.namespace.as_deref().unwrap_or("default")
    } else {
        ""
    };
    ObjectKey::new(kind, namespace, metadata.name.as_deref().unwrap_or(""))
}

/// A relist of Namespaces leaves out some still in use: they stay (added to `listed`) as
/// departing, and listed ones that were departing have returned.
pub(super) fn keep_departing(
    shared: &Shared,
    index: &Index,
    status: &mut KindStatus,
    listed: &mut Vec<Object>,
) {
    let names: HashSet<&str> = listed
        .iter()
        .map(|object| match object {
            Object::Namespace(namespace) => namespace.meta.name(),
            _ => "",
        })
        .collect();
    let snapshot = index.snapshot();
    let mut departing = lock(&shared.departing);
    let returned: Vec<String> = departing
        .keys()
        .filter(|name| names.contains(name.as_str()))
        .cloned()
        .collect();
    for name in returned {
        departing.remove(&name);
        status.count(Absence::InUse, AbsenceDecision::Returned);
    }
    let kept: Vec<Arc<model::Namespace>> = snapshot
        .namespace_names()
        .filter(|name| !names.contains(name) && snapshot.holds_in_namespace(name))
        .filter_map(|name| snapshot.stored_namespace(name))
        .collect();
    drop(names);
    for namespace in kept {
        let name = namespace.meta.name().to_string();
        if let std::collections::btree_map::Entry::Vacant(entry) = departing.entry(name) {
            warn!(namespace = %entry.key(), "Namespace not relisted while objects in it remain; it stays until they are gone");
            entry.insert(Instant::now());
            status.count(Absence::InUse, AbsenceDecision::Held);
        }
        listed.push(Object::Namespace(namespace));
    }
}

/// What a completed list did.
pub(super) enum ListOutcome {
    First,
    Relist,
    /// An empty relist held: this many objects stay.
    Held(usize),
}

/// One watcher's events into the index. Every method answers false once this watcher is no
/// longer the current one for its kind (restarted or stopped): the caller then ends.
pub(super) struct Feed {
    pub(super) shared: Arc<Shared>,
    pub(super) kind: ObjectKind,
    pub(super) version: &'static str,
    pub(super) epoch: u64,
    /// The list in progress. An object that did not change is held as a pointer to the
    /// projection the index already stores, so a relist costs little beside the index.
    pub(super) listing: Option<Vec<Object>>,
}

impl Feed {
    /// A (re)list begins: whatever an interrupted one gathered is dropped. Sized for as many
    /// objects as the kind holds, so a relist never copies a grown buffer beside the index.
    pub(super) fn list_started(&mut self) {
        let stored = self.shared.index.len_of(self.kind);
        self.listing = Some(Vec::with_capacity(stored));
    }

    /// No list of this kind has completed yet (over the kind's life, across restarts).
    pub(super) fn first_list(&self) -> bool {
        lock(&self.shared.status)
            .get(&self.kind)
            .is_none_or(|status| status.lists == 0)
    }

    pub(super) fn listed(&mut self, object: Watched) -> bool {
        match decode(self.kind, object) {
            Ok(projection) => {
                let projection = self.shared.index.share_stored(projection);
                self.listing.get_or_insert_with(Vec::new).push(projection);
            }
            Err((key, error)) => self.decode_error(&key, &error),
        }
        // Listing progresses, but the kind is not in sync again before the list ends.
        match lock(&self.shared.status)
            .get_mut(&self.kind)
            .filter(|s| s.epoch == self.epoch)
        {
            Some(entry) => {
                entry.last_progress = Instant::now();
                true
            }
            None => false,
        }
    }

    pub(super) fn list_done(&mut self) -> bool {
        let (kind, version) = (self.kind, self.version);
        let objects = self.listing.take().unwrap_or_default();
        let count = objects.len();
        let grace = self.shared.config.absence_grace;
        let outcome = with_current(&self.shared, kind, self.epoch, |index, status| {
            status.lists += 1;
            status.synced = true;
            // Counted over the kind's life, so a watcher restarted by a recheck or a version
            // change reports its list as the relist it is.
            let first = status.lists == 1;
            let stored = index.len_of(kind);
            let confirmed = status
                .emptied
                .is_some_and(|emptied| emptied.confirming && emptied.at.elapsed() >= grace);
            if count == 0 && stored > 0 && !first && !confirmed {
                // Every object gone at once is more often a server that lost its view than a
                // cluster emptied: keep them until a relist after the grace agrees.
                if status.emptied.is_none() {
                    status.emptied = Some(Emptied {
                        at: Instant::now(),
                        confirming: false,
                    });
                    status.count(Absence::EmptyList, AbsenceDecision::Held);
                }
                return ListOutcome::Held(stored);
            }
            if status.emptied.take().is_some() {
                let decision = if count == 0 {
                    AbsenceDecision::Confirmed
                } else {
                    AbsenceDecision::Returned
                };
                status.count(Absence::EmptyList, decision);
            }
            let mut objects = objects;
            if kind == ObjectKind::Namespace {
                keep_departing(&self.shared, index, status, &mut objects);
            }
            index.reset(kind, objects);
            if first {
                ListOutcome::First
            } else {
                ListOutcome::Relist
            }
        });
        match outcome {
            Some(ListOutcome::First) => info!(%kind, version, objects = count, "synced"),
            Some(ListOutcome::Relist) => info!(%kind, version, objects = count, "relisted"),
            Some(ListOutcome::Held(stored)) => warn!(%kind, version, stored, ?grace,
                "relisted empty; the objects stay in the index and no DNS record is deleted until \
                 a relist after the grace confirms it"),
            None => return false,
        }
        update_readiness(&self.shared);
        true
    }

    pub(super) fn applied(&mut self, object: Watched) -> bool {
        let (kind, epoch) = (self.kind, self.epoch);
        let shared = &self.shared;
        match decode(kind, object) {
            Ok(projection) => with_current(shared, kind, epoch, |index, status| {
                if let Object::Namespace(namespace) = &projection
                    && lock(&shared.departing)
                        .remove(namespace.meta.name())
                        .is_some()
                {
                    status.count(Absence::InUse, AbsenceDecision::Returned);
                }
                index.apply(projection)
            })
            .is_some(),
            Err((key, error)) => {
                // The object as it is now cannot be read: drop the older projection too, as a
                // relist would, rather than keep a version that no longer exists.
                self.decode_error(&key, &error);
                with_current(&self.shared, kind, epoch, |index, _| index.delete(&key)).is_some()
            }
        }
    }

    pub(super) fn deleted(&mut self, object: &Watched) -> bool {
        let key = key_of(self.kind, &object.metadata);
        let shared = &self.shared;
        with_current(shared, self.kind, self.epoch, |index, status| {
            let name = key.name();
            if key.kind() == ObjectKind::Namespace && index.snapshot().holds_in_namespace(name) {
                // Its routes' deletions are on their way on other watches: until they land,
                // the Namespace's labels and annotations still decide for them.
                let mut departing = lock(&shared.departing);
                if !departing.contains_key(name) {
                    debug!(namespace = %name, "Namespace deleted while objects in it remain; it stays until they are gone");
                    departing.insert(name.to_string(), Instant::now());
                    status.count(Absence::InUse, AbsenceDecision::Held);
                }
                return;
            }
            index.delete(&key)
        })
        .is_some()
    }

    /// The kind's watch failed and has not delivered anything since.
    pub(super) fn failing(&self) -> bool {
        lock(&self.shared.status)
            .get(&self.kind)
            .filter(|s| s.epoch == self.epoch)
            .is_some_and(|s| s.failing_since.is_some())
    }

    /// A watch resumed after a failure and ran without an error: the kind is in sync again,
    /// though it had nothing to deliver. False when another watcher took over the kind.
    pub(super) fn resumed(&mut self) -> bool {
        let (kind, version) = (self.kind, self.version);
        let was_failing = with_current(&self.shared, kind, self.epoch, |_, status| {
            status.failing_since.is_some()
        });
        if was_failing == Some(true) {
            info!(%kind, version, "watch resumed");
        }
        was_failing.is_some()
    }

    pub(super) fn failed(&mut self, error: &dyn std::fmt::Display) -> bool {
        let mut status = lock(&self.shared.status);
        let Some(entry) = status.get_mut(&self.kind).filter(|s| s.epoch == self.epoch) else {
            return false;
        };
        entry.errors += 1;
        entry.failing_since.get_or_insert_with(Instant::now);
        drop(status);
        let (kind, version) = (self.kind, self.version);
        warn!(%kind, version, %error, "watch error; retrying with backoff, serving the last good state");
        true
    }

    pub(super) fn decode_error(&self, key: &ObjectKey, error: &DecodeError) {
        warn!(object = %key, %error, "cannot read object; skipped");
        if let Some(entry) = lock(&self.shared.status)
            .get_mut(&self.kind)
            .filter(|s| s.epoch == self.epoch)
        {
            entry.decode_errors += 1;
        }
    }
}
