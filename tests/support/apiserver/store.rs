//! The double's state: an etcd-like multi-version store with one global resourceVersion,
//! per-resource change history (for watch resumption and consistent paged lists) and the
//! registry of open watches. Pure data structure: no IO, no async.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use serde_json::{Map, Value, json};
use tokio::sync::mpsc::UnboundedSender;

use super::selector::{FieldSelector, LabelSelector};

/// One served resource (a CRD, or a built-in kind such as Namespace or Lease).
#[derive(Clone, Debug, PartialEq)]
pub struct ResourceType {
    /// API group; empty for the core group.
    pub group: String,
    pub kind: String,
    pub plural: String,
    pub namespaced: bool,
    /// Served versions; the first is the storage (and preferred) version.
    pub versions: Vec<String>,
    /// Whether `status` is a subresource (PUT on the main resource keeps the old status and
    /// only spec changes bump `metadata.generation`), as for every Gateway API CRD.
    pub status_subresource: bool,
    /// A built-in kind (not a CRD): like the real server, list items carry no apiVersion/kind.
    pub builtin: bool,
}

impl ResourceType {
    pub fn api_version(&self, version: &str) -> String {
        if self.group.is_empty() {
            version.to_string()
        } else {
            format!("{}/{}", self.group, version)
        }
    }

    pub fn storage_version(&self) -> &str {
        self.versions.first().map(String::as_str).unwrap_or("v1")
    }

    pub fn serves(&self, version: &str) -> bool {
        self.versions.iter().any(|v| v == version)
    }

    fn uses_generation(&self) -> bool {
        // Built-in Namespaces and Leases have no metadata.generation; custom resources do.
        self.status_subresource
    }
}

/// `(namespace, name)`; the namespace is empty for cluster-scoped objects. Ordered like etcd keys.
pub type ObjectKey = (String, String);

/// One stored version of an object (its JSON always carries `metadata.resourceVersion`).
#[derive(Debug)]
pub struct StoredObject {
    pub rv: u64,
    pub value: Value,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One entry of a resource's history.
#[derive(Debug)]
pub struct Change {
    pub rv: u64,
    pub event: EventType,
    pub key: ObjectKey,
    /// The object after the change (for a deletion: the last state, at the deletion's rv).
    pub object: Arc<StoredObject>,
    /// The object before the change.
    pub previous: Option<Arc<StoredObject>>,
}

/// What a watch stream receives.
#[derive(Debug)]
pub enum WatchMessage {
    Event(EventType, Arc<StoredObject>),
    Bookmark {
        rv: u64,
        initial_events_end: bool,
    },
    /// End the stream cleanly (as on a watch timeout).
    End,
    /// Break the connection mid-stream (as a network failure or a crashed server does).
    Abort,
}

#[derive(Clone, Debug, Default)]
pub struct Filter {
    pub namespace: Option<String>,
    pub labels: LabelSelector,
    pub fields: FieldSelector,
}

impl Filter {
    pub fn matches(&self, key: &ObjectKey, object: &StoredObject) -> bool {
        self.namespace.as_ref().is_none_or(|ns| *ns == key.0)
            && self.labels.matches(&object.value)
            && self.fields.matches(&object.value)
    }

    /// The event a watcher with this filter sees for a change, as the apiserver's watch cache
    /// computes it: an object that starts (stops) matching is ADDED (DELETED).
    fn event_for(&self, change: &Change) -> Option<(EventType, Arc<StoredObject>)> {
        let was = change
            .previous
            .as_ref()
            .is_some_and(|p| self.matches(&change.key, p));
        let now = change.event != EventType::Deleted && self.matches(&change.key, &change.object);
        match (change.event, was, now) {
            (EventType::Deleted, true, _) => Some((EventType::Deleted, change.object.clone())),
            (EventType::Deleted, false, _) => None,
            (_, true, true) => Some((EventType::Modified, change.object.clone())),
            (_, false, true) => Some((EventType::Added, change.object.clone())),
            (_, true, false) => {
                let previous = change.previous.as_ref()?;
                Some((
                    EventType::Deleted,
                    Arc::new(with_resource_version(&previous.value, change.rv)),
                ))
            }
            (_, false, false) => None,
        }
    }
}

fn with_resource_version(value: &Value, rv: u64) -> StoredObject {
    let mut value = value.clone();
    if let Some(metadata) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
    StoredObject { rv, value }
}

struct Watcher {
    filter: Filter,
    bookmarks: bool,
    sender: UnboundedSender<WatchMessage>,
}

impl Watcher {
    fn send(&self, message: WatchMessage) -> bool {
        self.sender.send(message).is_ok()
    }
}

struct Collection {
    resource: ResourceType,
    objects: BTreeMap<ObjectKey, Arc<StoredObject>>,
    history: VecDeque<Change>,
    /// Changes with rv <= this are no longer in `history`: older resourceVersions are expired.
    compacted_rv: u64,
    watchers: Vec<Watcher>,
}

/// An error the API answers with a `Status` object.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
}

impl ApiError {
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            code,
            reason,
            message: message.into(),
        }
    }

    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(404, "NotFound", message)
    }

    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(400, "BadRequest", message)
    }

    pub fn status(&self) -> Value {
        json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Failure", "message": self.message, "reason": self.reason, "code": self.code,
        })
    }
}

/// Where a watch starts.
#[derive(Clone, Copy, Debug)]
pub enum WatchStart {
    /// After the given resourceVersion (events with a larger rv are replayed first).
    After(u64),
    /// `resourceVersion` empty or "0": synthetic ADDED events for the current state, then changes.
    Now,
    /// `sendInitialEvents=true`: like `Now`, then a BOOKMARK marking the end of the initial events.
    InitialEvents,
}

#[derive(Clone, Debug, Default)]
pub struct ListRequest {
    pub filter: Filter,
    pub limit: Option<usize>,
    pub continue_token: Option<String>,
    /// `resourceVersion` with `resourceVersionMatch=Exact`: list the state at that version.
    pub exact_rv: Option<u64>,
}

pub struct ListPage {
    pub rv: u64,
    pub items: Vec<Arc<StoredObject>>,
    pub continue_token: Option<String>,
}

/// How `replace` treats `status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplaceScope {
    /// PUT on the main resource: status is kept from the stored object when it is a subresource.
    Main,
    /// PUT on `/status`: only status is taken from the new object.
    Status,
    /// The test API: spec and status at once (a controller's two writes, as one event).
    All,
}

pub struct Store {
    rv: u64,
    collections: BTreeMap<(String, String), Collection>,
    /// How many changes each resource keeps for watch resumption (0 = unlimited).
    history_limit: usize,
    uid_counter: u64,
}

impl Store {
    pub fn new(history_limit: usize) -> Store {
        Store {
            rv: 1,
            collections: BTreeMap::new(),
            history_limit,
            uid_counter: 0,
        }
    }

    pub fn resource_version(&self) -> u64 {
        self.rv
    }

    pub fn set_history_limit(&mut self, limit: usize) {
        self.history_limit = limit;
        for collection in self.collections.values_mut() {
            trim_history(collection, limit);
        }
    }

    /// Installs (or updates the served versions of) a resource type.
    pub fn install(&mut self, resource: ResourceType) {
        let key = (resource.group.clone(), resource.plural.clone());
        if let Some(existing) = self.collections.get_mut(&key) {
            existing.resource = resource;
            return;
        }
        let compacted_rv = self.rv;
        self.collections.insert(
            key,
            Collection {
                resource,
                objects: BTreeMap::new(),
                history: VecDeque::new(),
                compacted_rv,
                watchers: Vec::new(),
            },
        );
    }

    /// Removes a resource type as deleting a CRD does: every object is deleted (watchers see
    /// DELETED), then open watches end and the endpoints disappear.
    pub fn uninstall(&mut self, group: &str, plural: &str) -> bool {
        let keys: Vec<ObjectKey> = match self
            .collections
            .get(&(group.to_string(), plural.to_string()))
        {
            Some(c) => c.objects.keys().cloned().collect(),
            None => return false,
        };
        for key in keys {
            let _ = self.delete(group, plural, &key, None);
        }
        if let Some(collection) = self
            .collections
            .remove(&(group.to_string(), plural.to_string()))
        {
            for watcher in collection.watchers {
                watcher.send(WatchMessage::End);
            }
        }
        true
    }

    pub fn resources(&self) -> impl Iterator<Item = &ResourceType> {
        self.collections.values().map(|c| &c.resource)
    }

    pub fn resource(&self, group: &str, plural: &str) -> Option<&ResourceType> {
        self.collections
            .get(&(group.to_string(), plural.to_string()))
            .map(|c| &c.resource)
    }

    pub fn resource_by_kind(&self, group: &str, kind: &str) -> Option<&ResourceType> {
        self.resources()
            .find(|r| r.group == group && r.kind == kind)
    }

    fn collection(&self, group: &str, plural: &str) -> Result<&Collection, ApiError> {
        self.collections
            .get(&(group.to_string(), plural.to_string()))
            .ok_or_else(|| {
                ApiError::not_found(format!(
                    "the server could not find the requested resource ({plural}.{group})"
                ))
            })
    }

    fn collection_mut(&mut self, group: &str, plural: &str) -> Result<&mut Collection, ApiError> {
        self.collections
            .get_mut(&(group.to_string(), plural.to_string()))
            .ok_or_else(|| {
                ApiError::not_found(format!(
                    "the server could not find the requested resource ({plural}.{group})"
                ))
            })
    }

    /// Forgets all history: any resourceVersion older than now is expired (410 Gone).
    pub fn compact(&mut self) {
        let rv = self.rv;
        for collection in self.collections.values_mut() {
            collection.history.clear();
            collection.compacted_rv = rv;
        }
    }

    pub fn get(
        &self,
        group: &str,
        plural: &str,
        key: &ObjectKey,
    ) -> Result<Arc<StoredObject>, ApiError> {
        let collection = self.collection(group, plural)?;
        collection
            .objects
            .get(key)
            .cloned()
            .ok_or_else(|| not_found_object(&collection.resource, key))
    }

    pub fn objects(&self, group: &str, plural: &str) -> Vec<Arc<StoredObject>> {
        self.collection(group, plural)
            .map(|c| c.objects.values().cloned().collect())
            .unwrap_or_default()
    }

    pub fn create(
        &mut self,
        group: &str,
        plural: &str,
        mut value: Value,
        now: &str,
    ) -> Result<Arc<StoredObject>, ApiError> {
        self.uid_counter += 1;
        let uid = fake_uid(self.uid_counter);
        let rv = self.rv + 1;
        let collection = self.collection_mut(group, plural)?;
        let key = object_key(&collection.resource, &value)?;
        if collection.objects.contains_key(&key) {
            return Err(ApiError::new(
                409,
                "AlreadyExists",
                format!(
                    "{}.{} \"{}\" already exists",
                    collection.resource.plural, collection.resource.group, key.1
                ),
            ));
        }
        let resource = collection.resource.clone();
        set_type_meta(&mut value, &resource);
        let metadata = metadata_mut(&mut value)?;
        metadata.insert("uid".into(), Value::String(uid));
        metadata.insert("creationTimestamp".into(), Value::String(now.to_string()));
        metadata.insert("resourceVersion".into(), Value::String(rv.to_string()));
        if resource.uses_generation() {
            metadata.insert("generation".into(), json!(1));
        } else {
            metadata.remove("generation");
        }
        metadata.remove("deletionTimestamp");
        let stored = Arc::new(StoredObject { rv, value });
        self.rv = rv;
        let limit = self.history_limit;
        let collection = self.collection_mut(group, plural)?;
        collection.objects.insert(key.clone(), stored.clone());
        record(
            collection,
            limit,
            Change {
                rv,
                event: EventType::Added,
                key,
                object: stored.clone(),
                previous: None,
            },
        );
        Ok(stored)
    }

    /// Replaces an existing object. A non-empty `metadata.resourceVersion` in `value` is a
    /// precondition (409 Conflict when stale), as for a PUT.
    pub fn replace(
        &mut self,
        group: &str,
        plural: &str,
        mut value: Value,
        scope: ReplaceScope,
    ) -> Result<Arc<StoredObject>, ApiError> {
        let rv = self.rv + 1;
        let collection = self.collection_mut(group, plural)?;
        let resource = collection.resource.clone();
        let key = object_key(&resource, &value)?;
        let old = collection
            .objects
            .get(&key)
            .cloned()
            .ok_or_else(|| not_found_object(&resource, &key))?;
        let requested_rv = value
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        if !requested_rv.is_empty() && requested_rv != old.rv.to_string() {
            return Err(ApiError::new(
                409,
                "Conflict",
                format!(
                    "Operation cannot be fulfilled on {}.{} \"{}\": the object has been modified; please apply your changes to the latest version and try again",
                    resource.plural, resource.group, key.1
                ),
            ));
        }
        let requested_uid = value
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .unwrap_or("");
        let old_uid = old
            .value
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .unwrap_or("");
        if !requested_uid.is_empty() && requested_uid != old_uid {
            return Err(ApiError::new(
                409,
                "Conflict",
                format!(
                    "Precondition failed: UID in precondition: {requested_uid}, UID in object meta: {old_uid}"
                ),
            ));
        }
        set_type_meta(&mut value, &resource);
        if resource.status_subresource {
            match scope {
                ReplaceScope::Main => copy_field(&old.value, &mut value, "status"),
                ReplaceScope::Status => {
                    let status = value.get("status").cloned();
                    value = old.value.clone();
                    match status {
                        Some(status) => value["status"] = status,
                        None => {
                            if let Some(object) = value.as_object_mut() {
                                object.remove("status");
                            }
                        }
                    }
                }
                ReplaceScope::All => {}
            }
        }
        let spec_changed =
            without_metadata_and_status(&old.value) != without_metadata_and_status(&value);
        let metadata = metadata_mut(&mut value)?;
        for preserved in ["uid", "creationTimestamp"] {
            match old.value.pointer(&format!("/metadata/{preserved}")) {
                Some(v) => metadata.insert(preserved.into(), v.clone()),
                None => metadata.remove(preserved),
            };
        }
        metadata.insert("resourceVersion".into(), Value::String(rv.to_string()));
        if resource.uses_generation() {
            let generation = old
                .value
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(1);
            metadata.insert(
                "generation".into(),
                json!(if spec_changed {
                    generation + 1
                } else {
                    generation
                }),
            );
        } else {
            metadata.remove("generation");
        }
        let stored = Arc::new(StoredObject { rv, value });
        self.rv = rv;
        let limit = self.history_limit;
        let collection = self.collection_mut(group, plural)?;
        collection.objects.insert(key.clone(), stored.clone());
        record(
            collection,
            limit,
            Change {
                rv,
                event: EventType::Modified,
                key,
                object: stored.clone(),
                previous: Some(old),
            },
        );
        Ok(stored)
    }

    pub fn delete(
        &mut self,
        group: &str,
        plural: &str,
        key: &ObjectKey,
        precondition_rv: Option<&str>,
    ) -> Result<Arc<StoredObject>, ApiError> {
        let rv = self.rv + 1;
        let limit = self.history_limit;
        let collection = self.collection_mut(group, plural)?;
        let old = collection
            .objects
            .get(key)
            .cloned()
            .ok_or_else(|| not_found_object(&collection.resource, key))?;
        if let Some(expected) = precondition_rv.filter(|v| !v.is_empty())
            && expected != old.rv.to_string()
        {
            return Err(ApiError::new(
                409,
                "Conflict",
                "Precondition failed: resourceVersion does not match",
            ));
        }
        collection.objects.remove(key);
        let last = Arc::new(with_resource_version(&old.value, rv));
        self.rv = rv;
        let collection = self.collection_mut(group, plural)?;
        record(
            collection,
            limit,
            Change {
                rv,
                event: EventType::Deleted,
                key: key.clone(),
                object: last.clone(),
                previous: Some(old),
            },
        );
        Ok(last)
    }

    /// One page of a list; `continue` tokens list the same snapshot as the first page did.
    pub fn list(
        &self,
        group: &str,
        plural: &str,
        request: &ListRequest,
    ) -> Result<ListPage, ApiError> {
        let collection = self.collection(group, plural)?;
        let (snapshot_rv, start_after) = match &request.continue_token {
            Some(token) => {
                let (rv, key) = decode_continue(token)?;
                if rv < collection.compacted_rv {
                    return Err(ApiError::new(
                        410,
                        "Expired",
                        "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.",
                    ));
                }
                (rv, Some(key))
            }
            None => match request.exact_rv {
                Some(rv) if rv < collection.compacted_rv => {
                    return Err(ApiError::new(
                        410,
                        "Expired",
                        format!(
                            "too old resource version: {rv} ({})",
                            collection.compacted_rv
                        ),
                    ));
                }
                Some(rv) if rv > self.rv => {
                    return Err(ApiError::new(
                        504,
                        "Timeout",
                        format!("Too large resource version: {rv}, current: {}", self.rv),
                    ));
                }
                Some(rv) => (rv, None),
                None => (self.rv, None),
            },
        };
        // The state at `snapshot_rv` = current objects, with every key changed after it rolled
        // back to its value before the first such change.
        let mut overlay: BTreeMap<&ObjectKey, Option<&Arc<StoredObject>>> = BTreeMap::new();
        for change in collection
            .history
            .iter()
            .rev()
            .take_while(|c| c.rv > snapshot_rv)
        {
            overlay.insert(&change.key, change.previous.as_ref());
        }
        let limit = request.limit.filter(|l| *l > 0).unwrap_or(usize::MAX);
        let mut items = Vec::new();
        let mut last_key: Option<&ObjectKey> = None;
        let mut more = false;
        let lower = match &start_after {
            Some(key) => std::ops::Bound::Excluded(key),
            None => std::ops::Bound::Unbounded,
        };
        let mut current = collection
            .objects
            .range::<ObjectKey, _>((lower, std::ops::Bound::Unbounded))
            .peekable();
        let mut rolled_back = overlay
            .range::<ObjectKey, _>((lower, std::ops::Bound::Unbounded))
            .peekable();
        loop {
            // Merge the two ordered sequences; the overlay wins for keys present in both.
            let next = match (current.peek(), rolled_back.peek()) {
                (None, None) => break,
                (Some((ck, _)), Some((ok, _))) if ck < *ok => {
                    current.next().map(|(k, v)| (k, Some(v)))
                }
                (Some((ck, _)), Some((ok, _))) if *ck == **ok => {
                    current.next();
                    rolled_back.next().map(|(k, v)| (*k, *v))
                }
                (Some(_), None) => current.next().map(|(k, v)| (k, Some(v))),
                _ => rolled_back.next().map(|(k, v)| (*k, *v)),
            };
            let Some((key, Some(object))) = next else {
                continue;
            };
            if !request.filter.matches(key, object) {
                continue;
            }
            if items.len() == limit {
                more = true;
                break;
            }
            items.push(object.clone());
            last_key = Some(key);
        }
        let continue_token = match (more, last_key) {
            (true, Some(key)) => Some(encode_continue(snapshot_rv, key)),
            _ => None,
        };
        Ok(ListPage {
            rv: snapshot_rv,
            items,
            continue_token,
        })
    }

    /// Registers a watch and returns the events to replay first; later changes are pushed to
    /// `sender` under the same lock, so nothing is missed or duplicated between the two.
    pub fn watch(
        &mut self,
        group: &str,
        plural: &str,
        start: WatchStart,
        filter: Filter,
        bookmarks: bool,
        sender: UnboundedSender<WatchMessage>,
    ) -> Result<Vec<WatchMessage>, ApiError> {
        let current_rv = self.rv;
        let collection = self.collection_mut(group, plural)?;
        let mut backlog = Vec::new();
        match start {
            WatchStart::After(rv) => {
                if rv < collection.compacted_rv {
                    return Err(ApiError::new(
                        410,
                        "Expired",
                        format!(
                            "too old resource version: {rv} ({})",
                            collection.compacted_rv
                        ),
                    ));
                }
                for change in collection.history.iter().filter(|c| c.rv > rv) {
                    if let Some((event, object)) = filter.event_for(change) {
                        backlog.push(WatchMessage::Event(event, object));
                    }
                }
            }
            WatchStart::Now | WatchStart::InitialEvents => {
                for (key, object) in &collection.objects {
                    if filter.matches(key, object) {
                        backlog.push(WatchMessage::Event(EventType::Added, object.clone()));
                    }
                }
                if matches!(start, WatchStart::InitialEvents) {
                    backlog.push(WatchMessage::Bookmark {
                        rv: current_rv,
                        initial_events_end: true,
                    });
                }
            }
        }
        collection.watchers.push(Watcher {
            filter,
            bookmarks,
            sender,
        });
        Ok(backlog)
    }

    /// Sends a BOOKMARK with the current resourceVersion to every watch that asked for them.
    pub fn send_bookmarks(&mut self) {
        let rv = self.rv;
        for collection in self.collections.values_mut() {
            collection.watchers.retain(|w| {
                !w.bookmarks
                    || w.send(WatchMessage::Bookmark {
                        rv,
                        initial_events_end: false,
                    })
            });
        }
    }

    /// Ends (`abort == false`) or breaks (`abort == true`) every open watch.
    pub fn close_watches(&mut self, abort: bool) {
        for collection in self.collections.values_mut() {
            for watcher in collection.watchers.drain(..) {
                watcher.send(if abort {
                    WatchMessage::Abort
                } else {
                    WatchMessage::End
                });
            }
        }
    }

    pub fn open_watches(&mut self) -> usize {
        let mut count = 0;
        for collection in self.collections.values_mut() {
            collection.watchers.retain(|w| !w.sender.is_closed());
            count += collection.watchers.len();
        }
        count
    }
}

fn record(collection: &mut Collection, history_limit: usize, change: Change) {
    collection
        .watchers
        .retain(|watcher| match watcher.filter.event_for(&change) {
            Some((event, object)) => watcher.send(WatchMessage::Event(event, object)),
            None => !watcher.sender.is_closed(),
        });
    collection.history.push_back(change);
    trim_history(collection, history_limit);
}

fn trim_history(collection: &mut Collection, limit: usize) {
    while limit > 0 && collection.history.len() > limit {
        if let Some(dropped) = collection.history.pop_front() {
            collection.compacted_rv = dropped.rv;
        }
    }
}

fn object_key(resource: &ResourceType, value: &Value) -> Result<ObjectKey, ApiError> {
    let name = value
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if name.is_empty() {
        return Err(ApiError::new(
            422,
            "Invalid",
            format!(
                "{}.{} is invalid: metadata.name: Required value",
                resource.kind, resource.group
            ),
        ));
    }
    let namespace = value
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("");
    match (resource.namespaced, namespace.is_empty()) {
        (true, true) => Err(ApiError::bad_request(
            "the namespace of the object is required",
        )),
        (false, _) => Ok((String::new(), name.to_string())),
        (true, false) => Ok((namespace.to_string(), name.to_string())),
    }
}

fn not_found_object(resource: &ResourceType, key: &ObjectKey) -> ApiError {
    let resource_name = if resource.group.is_empty() {
        resource.plural.clone()
    } else {
        format!("{}.{}", resource.plural, resource.group)
    };
    ApiError::not_found(format!("{resource_name} \"{}\" not found", key.1))
}

fn set_type_meta(value: &mut Value, resource: &ResourceType) {
    if let Some(object) = value.as_object_mut() {
        object.insert(
            "apiVersion".into(),
            Value::String(resource.api_version(resource.storage_version())),
        );
        object.insert("kind".into(), Value::String(resource.kind.clone()));
    }
}

fn metadata_mut(value: &mut Value) -> Result<&mut Map<String, Value>, ApiError> {
    value
        .get_mut("metadata")
        .and_then(Value::as_object_mut)
        .ok_or_else(|| ApiError::bad_request("object has no metadata"))
}

fn copy_field(from: &Value, to: &mut Value, field: &str) {
    if let Some(object) = to.as_object_mut() {
        match from.get(field) {
            Some(v) => object.insert(field.to_string(), v.clone()),
            None => object.remove(field),
        };
    }
}

fn without_metadata_and_status(value: &Value) -> Value {
    let mut value = value.clone();
    if let Some(object) = value.as_object_mut() {
        object.remove("metadata");
        object.remove("status");
        object.remove("apiVersion");
    }
    value
}

fn fake_uid(counter: u64) -> String {
    format!(
        "6d8f0c1e-{:04x}-4{:03x}-8{:03x}-{:012x}",
        (counter >> 24) & 0xffff,
        (counter >> 12) & 0xfff,
        counter & 0xfff,
        counter
    )
}

/// Continue tokens are opaque to clients; ours encode the snapshot rv and the last key returned.
fn encode_continue(rv: u64, key: &ObjectKey) -> String {
    let text = format!("{rv}\n{}\n{}", key.0, key.1);
    text.bytes().map(|b| format!("{b:02x}")).collect()
}

fn decode_continue(token: &str) -> Result<(u64, ObjectKey), ApiError> {
    let invalid = || ApiError::bad_request(format!("continue key is not valid: {token}"));
    if !token.len().is_multiple_of(2) {
        return Err(invalid());
    }
    let bytes = (0..token.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(token.get(i..i + 2).unwrap_or("zz"), 16))
        .collect::<Result<Vec<u8>, _>>()
        .map_err(|_| invalid())?;
    let text = String::from_utf8(bytes).map_err(|_| invalid())?;
    let mut parts = text.splitn(3, '\n');
    let rv = parts
        .next()
        .and_then(|p| p.parse().ok())
        .ok_or_else(invalid)?;
    let namespace = parts.next().ok_or_else(invalid)?.to_string();
    let name = parts.next().ok_or_else(invalid)?.to_string();
    Ok((rv, (namespace, name)))
}
