//! The double's state: an etcd-like multi-version store with one global resourceVersion,
//! per-resource change history (for watch resumption and consistent paged lists, until
//! `compact`) and the registry of open watches. Pure data structure: no IO, no async.

use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::sync::Arc;

use serde_json::{Map, Value, json};
use tokio::sync::mpsc::UnboundedSender;

/// One served resource (a Gateway API CRD, or the built-in Namespace).
#[derive(Clone, Debug, PartialEq)]
pub struct ResourceType {
    /// API group; empty for the core group.
    pub group: String,
    pub kind: String,
    pub plural: String,
    pub namespaced: bool,
    /// Served versions; the first is the storage (and preferred) version.
    pub versions: Vec<String>,
    /// A built-in kind (not a CRD): like the real server, list items carry no apiVersion/kind,
    /// and objects have no `metadata.generation`.
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
struct Change {
    rv: u64,
    event: EventType,
    key: ObjectKey,
    /// The object after the change (for a deletion: the last state, at the deletion's rv).
    object: Arc<StoredObject>,
    /// The object before the change: a paged list rolls back to it.
    previous: Option<Arc<StoredObject>>,
}

/// What a watch stream receives.
#[derive(Debug)]
pub enum WatchMessage {
    Event(EventType, Arc<StoredObject>),
    Bookmark(u64),
    /// End the stream cleanly (as on a watch timeout).
    End,
    /// Break the connection in the middle of an event.
    Abort,
}

struct Watcher {
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

    fn expired(message: impl Into<String>) -> ApiError {
        ApiError::new(410, "Expired", message)
    }

    pub fn status(&self) -> Value {
        json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Failure", "message": self.message, "reason": self.reason, "code": self.code,
        })
    }
}

pub struct ListPage {
    pub rv: u64,
    pub items: Vec<Arc<StoredObject>>,
    pub continue_token: Option<String>,
}

pub struct Store {
    rv: u64,
    collections: BTreeMap<(String, String), Collection>,
}

impl Store {
    pub fn new() -> Store {
        Store {
            rv: 1,
            collections: BTreeMap::new(),
        }
    }

    pub fn install(&mut self, resource: ResourceType) {
        let compacted_rv = self.rv;
        self.collections.insert(
            (resource.group.clone(), resource.plural.clone()),
            Collection {
                resource,
                objects: BTreeMap::new(),
                history: VecDeque::new(),
                compacted_rv,
                watchers: Vec::new(),
            },
        );
    }

    pub fn resources(&self) -> impl Iterator<Item = &ResourceType> {
        self.collections.values().map(|c| &c.resource)
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

    pub fn get(&self, group: &str, plural: &str, key: &ObjectKey) -> Option<Arc<StoredObject>> {
        self.collection(group, plural)
            .ok()?
            .objects
            .get(key)
            .cloned()
    }

    pub fn objects(&self, group: &str, plural: &str) -> Vec<Arc<StoredObject>> {
        self.collection(group, plural)
            .map(|c| c.objects.values().cloned().collect())
            .unwrap_or_default()
    }

    /// Stores a new object, assigning resourceVersion, creationTimestamp (`now`) and, for
    /// custom resources, generation 1.
    pub fn create(
        &mut self,
        group: &str,
        plural: &str,
        mut value: Value,
        now: &str,
    ) -> Result<Arc<StoredObject>, ApiError> {
        let rv = self.rv + 1;
        let collection = self.collection_mut(group, plural)?;
        let resource = collection.resource.clone();
        let key = object_key(&resource, &value)?;
        if collection.objects.contains_key(&key) {
            return Err(ApiError::new(
                409,
                "AlreadyExists",
                format!("{}.{} \"{}\" already exists", resource.plural, group, key.1),
            ));
        }
        set_type_meta(&mut value, &resource);
        let metadata = metadata_mut(&mut value)?;
        metadata.insert("creationTimestamp".into(), Value::String(now.to_string()));
        metadata.insert("resourceVersion".into(), Value::String(rv.to_string()));
        if resource.builtin {
            metadata.remove("generation");
        } else {
            metadata.insert("generation".into(), json!(1));
        }
        let stored = Arc::new(StoredObject { rv, value });
        collection.objects.insert(key.clone(), stored.clone());
        record(collection, rv, EventType::Added, key, stored.clone(), None);
        self.rv = rv;
        Ok(stored)
    }

    /// Replaces an existing object, spec and status at once (a controller's two writes as one
    /// event). A non-empty `metadata.resourceVersion` in `value` is a precondition (409 Conflict
    /// when stale), as for a PUT.
    pub fn replace(
        &mut self,
        group: &str,
        plural: &str,
        mut value: Value,
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
                "the object has been modified; please apply your changes to the latest version",
            ));
        }
        set_type_meta(&mut value, &resource);
        let spec_changed = old.value.get("spec") != value.get("spec");
        let metadata = metadata_mut(&mut value)?;
        match old.value.pointer("/metadata/creationTimestamp") {
            Some(created) => metadata.insert("creationTimestamp".into(), created.clone()),
            None => metadata.remove("creationTimestamp"),
        };
        metadata.insert("resourceVersion".into(), Value::String(rv.to_string()));
        if !resource.builtin {
            let generation = old
                .value
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(1);
            metadata.insert(
                "generation".into(),
                json!(generation + i64::from(spec_changed)),
            );
        }
        let stored = Arc::new(StoredObject { rv, value });
        collection.objects.insert(key.clone(), stored.clone());
        record(
            collection,
            rv,
            EventType::Modified,
            key,
            stored.clone(),
            Some(old),
        );
        self.rv = rv;
        Ok(stored)
    }

    pub fn delete(
        &mut self,
        group: &str,
        plural: &str,
        key: &ObjectKey,
    ) -> Result<Arc<StoredObject>, ApiError> {
        let rv = self.rv + 1;
        let collection = self.collection_mut(group, plural)?;
        let old = collection
            .objects
            .remove(key)
            .ok_or_else(|| not_found_object(&collection.resource, key))?;
        let mut last = old.value.clone();
        if let Some(metadata) = last.get_mut("metadata").and_then(Value::as_object_mut) {
            metadata.insert("resourceVersion".into(), Value::String(rv.to_string()));
        }
        let last = Arc::new(StoredObject { rv, value: last });
        record(
            collection,
            rv,
            EventType::Deleted,
            key.clone(),
            last.clone(),
            Some(old),
        );
        self.rv = rv;
        Ok(last)
    }

    /// One page of a cluster-wide list; `continue` tokens list the same snapshot as the first
    /// page did, or get 410 Expired once that snapshot was compacted away.
    pub fn list(
        &self,
        group: &str,
        plural: &str,
        limit: Option<usize>,
        continue_token: Option<&str>,
    ) -> Result<ListPage, ApiError> {
        let collection = self.collection(group, plural)?;
        let (snapshot_rv, start_after) = match continue_token {
            Some(token) => {
                let (rv, key) = decode_continue(token)?;
                if rv < collection.compacted_rv {
                    return Err(ApiError::expired(
                        "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.",
                    ));
                }
                (rv, Some(key))
            }
            None => (self.rv, None),
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
        let lower = match &start_after {
            Some(key) => Bound::Excluded(key),
            None => Bound::Unbounded,
        };
        let mut current = collection
            .objects
            .range::<ObjectKey, _>((lower, Bound::Unbounded))
            .peekable();
        let mut rolled_back = overlay
            .range::<ObjectKey, _>((lower, Bound::Unbounded))
            .peekable();
        let limit = limit.filter(|l| *l > 0).unwrap_or(usize::MAX);
        let mut items = Vec::new();
        let mut last_key: Option<&ObjectKey> = None;
        let mut more = false;
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

    /// Registers a watch resuming after `rv` and returns the events to replay first; later
    /// changes are pushed to `sender` under the same lock, so nothing is missed or duplicated
    /// between the two. 410 Expired when `rv` was compacted away.
    pub fn watch(
        &mut self,
        group: &str,
        plural: &str,
        rv: u64,
        bookmarks: bool,
        sender: UnboundedSender<WatchMessage>,
    ) -> Result<Vec<WatchMessage>, ApiError> {
        let collection = self.collection_mut(group, plural)?;
        if rv < collection.compacted_rv {
            return Err(ApiError::expired(format!(
                "too old resource version: {rv} ({})",
                collection.compacted_rv
            )));
        }
        let backlog = collection
            .history
            .iter()
            .filter(|c| c.rv > rv)
            .map(|c| WatchMessage::Event(c.event, c.object.clone()))
            .collect();
        collection.watchers.push(Watcher { bookmarks, sender });
        Ok(backlog)
    }

    /// Sends a BOOKMARK with the current resourceVersion to every watch that asked for them.
    pub fn send_bookmarks(&mut self) {
        let rv = self.rv;
        for collection in self.collections.values_mut() {
            collection
                .watchers
                .retain(|w| !w.bookmarks || w.send(WatchMessage::Bookmark(rv)));
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
}

fn record(
    collection: &mut Collection,
    rv: u64,
    event: EventType,
    key: ObjectKey,
    object: Arc<StoredObject>,
    previous: Option<Arc<StoredObject>>,
) {
    collection
        .watchers
        .retain(|watcher| watcher.send(WatchMessage::Event(event, object.clone())));
    collection.history.push_back(Change {
        rv,
        event,
        key,
        object,
        previous,
    });
}

fn object_key(resource: &ResourceType, value: &Value) -> Result<ObjectKey, ApiError> {
    let text = |pointer: &str| value.pointer(pointer).and_then(Value::as_str).unwrap_or("");
    let (namespace, name) = (text("/metadata/namespace"), text("/metadata/name"));
    if name.is_empty() || (resource.namespaced && namespace.is_empty()) {
        return Err(ApiError::new(
            422,
            "Invalid",
            format!("{} needs metadata.name (and namespace)", resource.kind),
        ));
    }
    let namespace = if resource.namespaced { namespace } else { "" };
    Ok((namespace.to_string(), name.to_string()))
}

fn not_found_object(resource: &ResourceType, key: &ObjectKey) -> ApiError {
    ApiError::not_found(format!("{} \"{}\" not found", resource.plural, key.1))
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
