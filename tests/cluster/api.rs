//! The cluster as a test drives and reads it through the real API: objects of every kind
//! gateway-dns watches, written as their owners would (Gateway addresses only through the
//! status subresource; an empty Namespace finalized as the namespace controller would), and the
//! API's own state compared with a source's index.

use std::time::{Duration, Instant};

use gateway_dns::engine::World as _;
use gateway_dns::index::Index;
use gateway_dns::model::{self, Object, ObjectKind};
use kube::api::PostParams;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

use crate::support::objects;

pub fn api_resource(kind: ObjectKind, version: &str) -> ApiResource {
    let group = kind.group();
    ApiResource {
        group: group.to_string(),
        version: version.to_string(),
        api_version: api_version(kind, version),
        kind: kind.kind().to_string(),
        plural: kind.plural().to_string(),
    }
}

fn api_version(kind: ObjectKind, version: &str) -> String {
    if kind.group().is_empty() {
        version.to_string()
    } else {
        format!("{}/{version}", kind.group())
    }
}

/// `kind` named by an object's `kind` field.
pub fn kind_of(object: &Value) -> ObjectKind {
    let kind = object["kind"].as_str().unwrap_or_default();
    ObjectKind::ALL
        .into_iter()
        .find(|k| k.kind() == kind)
        .unwrap_or_else(|| panic!("not a kind gateway-dns watches: {object}"))
}

fn version_of(object: &Value) -> &str {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    api_version.rsplit('/').next().unwrap_or(api_version)
}

fn is_not_found(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 404)
}

pub fn namespace_object(name: &str, team: &str) -> Value {
    objects::namespace(name, json!({"team": team}))
}

/// The Gateway `namespace/name` the tests create: one HTTP listener for `hostname`, routes and
/// ListenerSets from every namespace.
pub fn gateway(namespace: &str, name: &str, hostname: &str) -> Value {
    objects::open_to_listener_sets(objects::http_gateway(namespace, name, hostname))
}

/// A ListenerSet under Gateway infra/`parent` with one HTTPS listener `extra` for `hostname`
/// (routes of its own namespace only).
pub fn listener_set(namespace: &str, name: &str, parent: &str, hostname: &str) -> Value {
    let listener = objects::listener_from("extra", "HTTPS", Some(hostname), None);
    objects::listener_set_of(namespace, name, ("infra", parent), json!([listener]))
}

/// A route of `kind` attached to Gateway infra/public, claiming `hostname` in `spec.hostnames`
/// or, for kinds without it, in the external-dns annotation. TCP, UDP and TLS routes must have
/// rules (the CRD schema says so).
pub fn route(kind: ObjectKind, namespace: &str, name: &str, hostname: &str) -> Value {
    let parents = json!([objects::parent("infra", "public")]);
    let route = objects::claiming_route(kind, namespace, name, parents, hostname);
    let rules = json!([{"backendRefs": [{"name": "backend", "port": 8080}]}]);
    objects::with(route, &["spec", "rules"], rules)
}

/// An object of `kind` whose content depends on `variant`.
pub fn object_of(kind: ObjectKind, namespace: &str, name: &str, variant: &str) -> Value {
    match kind {
        ObjectKind::Namespace => namespace_object(name, variant),
        ObjectKind::Gateway => gateway(namespace, name, &format!("*.{variant}.example.com")),
        ObjectKind::ListenerSet => {
            listener_set(namespace, name, "public", &format!("{variant}.example.net"))
        }
        route_kind => route(
            route_kind,
            namespace,
            name,
            &format!("{variant}.example.com"),
        ),
    }
}

/// Gives `object` the spec of `replacement` (Namespaces have none).
pub fn take_spec(object: &mut Value, replacement: Value) {
    if let Some(spec) = replacement.get("spec") {
        object["spec"] = spec.clone();
    }
}

/// Every object gateway-dns watches, as the API serves it, per kind.
pub type ApiState = Vec<(ObjectKind, Vec<Value>)>;

/// Objects of the kinds gateway-dns watches, through one client.
#[derive(Clone)]
pub struct ClusterApi {
    client: kube::Client,
}

impl ClusterApi {
    pub fn new(client: kube::Client) -> ClusterApi {
        ClusterApi { client }
    }

    fn api(&self, kind: ObjectKind, version: &str, namespace: &str) -> Api<DynamicObject> {
        let resource = api_resource(kind, version);
        if kind.is_namespaced() {
            Api::namespaced_with(self.client.clone(), namespace, &resource)
        } else {
            Api::all_with(self.client.clone(), &resource)
        }
    }

    fn api_for(&self, object: &Value) -> (Api<DynamicObject>, String) {
        let namespace = object["metadata"]["namespace"].as_str().unwrap_or_default();
        let name = object["metadata"]["name"].as_str().unwrap().to_string();
        (
            self.api(kind_of(object), version_of(object), namespace),
            name,
        )
    }

    /// Creates `object` at the version its apiVersion names.
    pub async fn try_create(&self, object: &Value) -> Result<Value, kube::Error> {
        let (api, _) = self.api_for(object);
        let object: DynamicObject = serde_json::from_value(object.clone()).unwrap();
        let created = api.create(&PostParams::default(), &object).await?;
        Ok(serde_json::to_value(created).unwrap())
    }

    pub async fn create(&self, object: Value) -> Value {
        match self.try_create(&object).await {
            Ok(created) => created,
            Err(error) => panic!("creating {object}: {error}"),
        }
    }

    /// Creates a Namespace unless it exists.
    pub async fn ensure_namespace(&self, name: &str) {
        match self.try_create(&namespace_object(name, "tests")).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(error) => panic!("creating namespace {name}: {error}"),
        }
    }

    /// The object as the API serves it at v1, or None when it does not exist.
    pub async fn try_get(
        &self,
        kind: ObjectKind,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Value>, kube::Error> {
        let found = self.api(kind, "v1", namespace).get_opt(name).await?;
        Ok(found.map(|object| serde_json::to_value(object).unwrap()))
    }

    pub async fn get(&self, kind: ObjectKind, namespace: &str, name: &str) -> Option<Value> {
        self.try_get(kind, namespace, name)
            .await
            .unwrap_or_else(|e| panic!("getting {kind} {namespace}/{name}: {e}"))
    }

    /// Replaces an object read before: its resourceVersion makes this a compare-and-swap.
    pub async fn try_replace(&self, object: &Value) -> Result<Value, kube::Error> {
        let (api, name) = self.api_for(object);
        let object: DynamicObject = serde_json::from_value(object.clone()).unwrap();
        let replaced = api.replace(&name, &PostParams::default(), &object).await?;
        Ok(serde_json::to_value(replaced).unwrap())
    }

    pub async fn replace(&self, object: Value) -> Value {
        match self.try_replace(&object).await {
            Ok(replaced) => replaced,
            Err(error) => panic!("replacing {object}: {error}"),
        }
    }

    /// Writes a Gateway's `status.addresses` through the status subresource, as its controller
    /// would.
    pub async fn try_set_gateway_address(
        &self,
        namespace: &str,
        name: &str,
        address: &str,
    ) -> Result<(), kube::Error> {
        let status = json!({"status": {"addresses": [{"type": "IPAddress", "value": address}]}});
        self.api(ObjectKind::Gateway, "v1", namespace)
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .map(drop)
    }

    pub async fn set_gateway_address(&self, namespace: &str, name: &str, address: &str) {
        self.try_set_gateway_address(namespace, name, address)
            .await
            .unwrap_or_else(|e| panic!("status of Gateway {namespace}/{name}: {e}"));
    }

    /// Deletes an object. A Namespace is then finalized as the namespace controller would once
    /// it is empty (none runs here, and the Namespaces a test deletes hold nothing).
    pub async fn try_delete(
        &self,
        kind: ObjectKind,
        namespace: &str,
        name: &str,
    ) -> Result<(), kube::Error> {
        self.api(kind, "v1", namespace)
            .delete(name, &DeleteParams::default())
            .await?;
        if kind == ObjectKind::Namespace {
            self.finalize_namespace(name).await?;
        }
        Ok(())
    }

    pub async fn delete(&self, kind: ObjectKind, namespace: &str, name: &str) {
        self.try_delete(kind, namespace, name)
            .await
            .unwrap_or_else(|e| panic!("deleting {kind} {namespace}/{name}: {e}"));
    }

    async fn finalize_namespace(&self, name: &str) -> Result<(), kube::Error> {
        let Some(mut namespace) = self.try_get(ObjectKind::Namespace, "", name).await? else {
            return Ok(());
        };
        namespace["spec"]["finalizers"] = json!([]);
        let request = hyper::Request::put(format!("/api/v1/namespaces/{name}/finalize"))
            .header("content-type", "application/json")
            .body(serde_json::to_vec(&namespace).unwrap())
            .unwrap();
        match self.client.request::<Value>(request).await {
            Err(error) if is_not_found(&error) => Ok(()),
            other => other.map(drop),
        }
    }

    /// Every object of `kind`, listed at the newest version the API serves (none when no
    /// version is served: the CRD is not installed).
    pub async fn list(&self, kind: ObjectKind) -> Result<Vec<Value>, kube::Error> {
        for version in kind.versions() {
            match self
                .api(kind, version, "")
                .list(&ListParams::default())
                .await
            {
                Ok(list) => {
                    return Ok(list
                        .items
                        .into_iter()
                        .map(|object| {
                            let mut value = serde_json::to_value(object).unwrap();
                            // Items of built-in lists carry no type; the decoder needs it.
                            value["apiVersion"] = json!(api_version(kind, version));
                            value["kind"] = json!(kind.kind());
                            value
                        })
                        .collect());
                }
                Err(error) if is_not_found(&error) => continue,
                Err(error) => return Err(error),
            }
        }
        Ok(Vec::new())
    }

    pub async fn state(&self) -> Result<ApiState, kube::Error> {
        let mut state = Vec::new();
        for kind in ObjectKind::ALL {
            state.push((kind, self.list(kind).await?));
        }
        Ok(state)
    }

    /// Polls until the index holds exactly what the API serves, or gives the last difference
    /// after `limit`.
    pub async fn converges(&self, index: &Index, limit: Duration) -> Result<(), String> {
        let start = Instant::now();
        loop {
            let difference = match self.state().await {
                Ok(state) => match mismatch(index, &state) {
                    None => return Ok(()),
                    Some(difference) => difference,
                },
                Err(error) => format!("reading the API: {error}"),
            };
            if start.elapsed() > limit {
                return Err(difference);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// Compares the index with the API: same keys per kind, same projections.
pub fn mismatch(index: &Index, state: &ApiState) -> Option<String> {
    let snapshot = index.snapshot();
    for (kind, objects) in state {
        let kind = *kind;
        if snapshot.len_of(kind) != objects.len() {
            return Some(format!(
                "{kind}: index has {}, API has {}",
                snapshot.len_of(kind),
                objects.len()
            ));
        }
        for value in objects {
            let expected = match model::decode_value(value) {
                Ok(Some(object)) => object,
                other => return Some(format!("cannot decode the API's object {value}: {other:?}")),
            };
            let key = expected.key();
            let same = match &expected {
                Object::Namespace(ns) => snapshot.namespace(key.name()) == Some(&**ns),
                Object::Gateway(gw) => snapshot.gateway(key.namespace(), key.name()) == Some(gw),
                Object::ListenerSet(ls) => {
                    snapshot.listener_set(key.namespace(), key.name()) == Some(ls)
                }
                // The index keeps routes trimmed to what its configuration reads.
                Object::Route(route) => snapshot.route(&key).is_some_and(|entry| {
                    entry.route == snapshot.config().trim_route(route.clone())
                }),
            };
            if !same {
                return Some(format!("{key} differs or is missing"));
            }
        }
    }
    None
}
