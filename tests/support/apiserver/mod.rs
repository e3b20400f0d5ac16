//! An in-process Kubernetes API double, kept only for faults a real API server cannot be made to
//! produce on demand. Everything else runs against the real control plane (`cluster.rs`, the
//! `tests/cluster` binary). What remains, and why:
//!
//! - Discovery (`/apis`, `/apis/GROUP/VERSION`), paged cluster-wide lists that are consistent
//!   snapshots, and watches resuming from a list's resourceVersion (chunked JSON lines,
//!   BOOKMARK, 410 Gone): the least that kube-rs's real client and watcher, as the kube source
//!   runs them, need.
//! - `create`/`replace`/`delete`/`get`/`objects` straight on the store, with no schema: objects
//!   the Gateway API CRDs would refuse, for the test that an unreadable object is skipped
//!   (`tests/e2e/kube_faults.rs`).
//! - `set_starting` (a kube-apiserver that has restarted and not yet registered its CRDs:
//!   discovery without the Gateway API group, 404 for its resources, `/readyz` as told), and
//!   an empty answer to every list of a kind (`set_empty_lists`): `tests/e2e/kube_faults.rs`.
//! - `fail_next` (error answers: 500, 503, 429 with Retry-After), `set_delay` (slow answers),
//!   `end_watches` (every watch ended cleanly at once, as on its timeout) and `drop_watches`
//!   (every watch broken in the middle of an event line): `tests/e2e/kube_faults.rs`.
//! - `compact`, the builder's `resources` and `bookmark_interval`, and list items without
//!   apiVersion/kind for built-in kinds: `benches/kube_sync.rs` and `benches/dns_sync.rs`
//!   still measure the source against the double (a relist forced by 410 Gone).
//!
//! It has no admission, no RBAC, no PATCH, no writes over HTTP, no selectors and no garbage
//! collection; tests and benches write to it directly.
// Shared by the e2e test binary and the benches; each uses a different subset.
#![allow(dead_code)]

pub mod store;

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};
use tokio::task::{AbortHandle, JoinHandle};

pub use store::{ApiError, ResourceType};
use store::{Store, StoredObject, WatchMessage};

type Body = BoxBody<Bytes, io::Error>;

pub const GATEWAY_GROUP: &str = "gateway.networking.k8s.io";

/// A Gateway API CRD (namespaced).
pub fn gateway_api_type(kind: &str, plural: &str, versions: &[&str]) -> ResourceType {
    ResourceType {
        group: GATEWAY_GROUP.into(),
        kind: kind.into(),
        plural: plural.into(),
        namespaced: true,
        versions: versions.iter().map(|v| v.to_string()).collect(),
        builtin: false,
    }
}

pub fn namespace_type() -> ResourceType {
    ResourceType {
        group: String::new(),
        kind: "Namespace".into(),
        plural: "namespaces".into(),
        namespaced: false,
        versions: vec!["v1".into()],
        builtin: true,
    }
}

/// The CRDs of Gateway API v1.6's standard channel, as served (`served: true` versions only).
pub fn gateway_api_v1_6_standard() -> Vec<ResourceType> {
    vec![
        gateway_api_type("Gateway", "gateways", &["v1", "v1beta1"]),
        gateway_api_type("ListenerSet", "listenersets", &["v1"]),
        gateway_api_type("HTTPRoute", "httproutes", &["v1", "v1beta1"]),
        gateway_api_type("GRPCRoute", "grpcroutes", &["v1"]),
        gateway_api_type("TLSRoute", "tlsroutes", &["v1"]),
        gateway_api_type("TCPRoute", "tcproutes", &["v1"]),
        gateway_api_type("UDPRoute", "udproutes", &["v1"]),
    ]
}

/// The CRDs of Gateway API v1.6's experimental channel (older versions still served).
pub fn gateway_api_v1_6_experimental() -> Vec<ResourceType> {
    vec![
        gateway_api_type("Gateway", "gateways", &["v1", "v1beta1"]),
        gateway_api_type("ListenerSet", "listenersets", &["v1"]),
        gateway_api_type("HTTPRoute", "httproutes", &["v1", "v1beta1"]),
        gateway_api_type("GRPCRoute", "grpcroutes", &["v1"]),
        gateway_api_type("TLSRoute", "tlsroutes", &["v1", "v1alpha2", "v1alpha3"]),
        gateway_api_type("TCPRoute", "tcproutes", &["v1", "v1alpha2"]),
        gateway_api_type("UDPRoute", "udproutes", &["v1", "v1alpha2"]),
    ]
}

pub struct ApiServerBuilder {
    resources: Vec<ResourceType>,
    bookmark_interval: Option<Duration>,
}

impl Default for ApiServerBuilder {
    fn default() -> Self {
        let mut resources = vec![namespace_type()];
        resources.extend(gateway_api_v1_6_experimental());
        ApiServerBuilder {
            resources,
            bookmark_interval: Some(Duration::from_secs(1)),
        }
    }
}

impl ApiServerBuilder {
    /// Serves exactly these resource types.
    pub fn resources(mut self, resources: Vec<ResourceType>) -> Self {
        self.resources = resources;
        self
    }

    /// How often open watches get a BOOKMARK (None: never).
    pub fn bookmark_interval(mut self, interval: Option<Duration>) -> Self {
        self.bookmark_interval = interval;
        self
    }

    pub async fn start(self) -> ApiServer {
        let mut store = Store::new();
        for resource in self.resources {
            store.install(resource);
        }
        let listener = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .expect("bind the API double");
        let addr = listener.local_addr().expect("local address");
        let shared = Arc::new(Shared {
            store: Mutex::new(store),
            faults: Mutex::new(Faults::default()),
            connections: Mutex::new(HashMap::new()),
            next_connection: AtomicU64::new(0),
        });
        let accept = tokio::spawn(accept_loop(listener, shared.clone()));
        let bookmarks = self.bookmark_interval.map(|interval| {
            let shared = shared.clone();
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(interval).await;
                    lock(&shared.store).send_bookmarks();
                }
            })
        });
        let kubeconfig_dir = tempfile::tempdir().expect("temp dir for the kubeconfig");
        let kubeconfig_path = kubeconfig_dir.path().join("kubeconfig");
        std::fs::write(&kubeconfig_path, kubeconfig_yaml(addr)).expect("write kubeconfig");
        ApiServer {
            shared,
            tasks: [Some(accept), bookmarks].into_iter().flatten().collect(),
            _kubeconfig_dir: kubeconfig_dir,
            kubeconfig_path,
        }
    }
}

fn kubeconfig_yaml(addr: SocketAddr) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: double\n  cluster:\n    server: http://{addr}\n\
         users:\n- name: tester\n  user: {{}}\ncontexts:\n- name: double\n  context:\n    cluster: double\n    user: tester\n    namespace: default\n\
         current-context: double\n"
    )
}

#[derive(Default)]
struct Faults {
    /// (requests left, status to answer them with), used in order.
    failures: VecDeque<(usize, u16)>,
    delay: Duration,
    /// Groups left out of discovery, whose resources answer 404.
    unregistered: Vec<String>,
    /// What `/readyz` answers: false for 500.
    not_ready: bool,
    /// Kinds whose lists come back empty (watches still carry their events).
    empty_lists: Vec<String>,
}

struct Shared {
    store: Mutex<Store>,
    faults: Mutex<Faults>,
    connections: Mutex<HashMap<u64, AbortHandle>>,
    next_connection: AtomicU64,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The running double; stops serving when dropped.
pub struct ApiServer {
    shared: Arc<Shared>,
    tasks: Vec<JoinHandle<()>>,
    _kubeconfig_dir: tempfile::TempDir,
    kubeconfig_path: PathBuf,
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
        for (_, connection) in lock(&self.shared.connections).drain() {
            connection.abort();
        }
        lock(&self.shared.store).close_watches(true);
    }
}

impl ApiServer {
    pub fn builder() -> ApiServerBuilder {
        ApiServerBuilder::default()
    }

    /// Starts with Namespace and Gateway API v1.6 (experimental channel).
    pub async fn start() -> ApiServer {
        ApiServerBuilder::default().start().await
    }

    /// A kubeconfig file whose current context points at this server.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig_path
    }

    /// A kube-rs client built the way the product builds one: from the kubeconfig file.
    pub async fn client(&self) -> kube::Client {
        let kubeconfig =
            kube::config::Kubeconfig::read_from(&self.kubeconfig_path).expect("read kubeconfig");
        let config = kube::Config::from_custom_kubeconfig(
            kubeconfig,
            &kube::config::KubeConfigOptions::default(),
        )
        .await
        .expect("kubeconfig to config");
        kube::Client::try_from(config).expect("kube client")
    }

    // ---- objects, written straight to the store ----

    fn resource_by_kind(&self, kind: &str) -> ResourceType {
        lock(&self.shared.store)
            .resources()
            .find(|r| r.kind == kind)
            .cloned()
            .unwrap_or_else(|| panic!("kind {kind} is not installed in the API double"))
    }

    fn key(resource: &ResourceType, namespace: &str, name: &str) -> (String, String) {
        let namespace = if resource.namespaced { namespace } else { "" };
        (namespace.to_string(), name.to_string())
    }

    /// Creates an object (its `kind` picks the resource), assigning resourceVersion,
    /// creationTimestamp and generation; watchers see ADDED.
    pub fn create(&self, object: Value) -> Result<Value, ApiError> {
        let resource = self.resource_by_kind(object["kind"].as_str().unwrap_or_default());
        // Whole seconds, as the real server writes creationTimestamp.
        let now = k8s_openapi::jiff::Timestamp::from_second(
            k8s_openapi::jiff::Timestamp::now().as_second(),
        )
        .expect("now is a valid timestamp")
        .to_string();
        let stored =
            lock(&self.shared.store).create(&resource.group, &resource.plural, object, &now)?;
        Ok(stored.value.clone())
    }

    /// Replaces spec and status of an existing object (a non-empty resourceVersion is a
    /// precondition); watchers see MODIFIED.
    pub fn replace(&self, object: Value) -> Result<Value, ApiError> {
        let resource = self.resource_by_kind(object["kind"].as_str().unwrap_or_default());
        let stored = lock(&self.shared.store).replace(&resource.group, &resource.plural, object)?;
        Ok(stored.value.clone())
    }

    /// Deletes an object by kind (e.g. "HTTPRoute"), namespace ("" if cluster-scoped) and name.
    pub fn delete(&self, kind: &str, namespace: &str, name: &str) -> Result<Value, ApiError> {
        let resource = self.resource_by_kind(kind);
        let key = Self::key(&resource, namespace, name);
        let stored = lock(&self.shared.store).delete(&resource.group, &resource.plural, &key)?;
        Ok(stored.value.clone())
    }

    pub fn get(&self, kind: &str, namespace: &str, name: &str) -> Option<Value> {
        let resource = self.resource_by_kind(kind);
        let key = Self::key(&resource, namespace, name);
        lock(&self.shared.store)
            .get(&resource.group, &resource.plural, &key)
            .map(|o| o.value.clone())
    }

    /// Every stored object of a kind (empty when the kind is not installed).
    pub fn objects(&self, kind: &str) -> Vec<Value> {
        let store = lock(&self.shared.store);
        let Some(resource) = store.resources().find(|r| r.kind == kind).cloned() else {
            return Vec::new();
        };
        store
            .objects(&resource.group, &resource.plural)
            .iter()
            .map(|o| o.value.clone())
            .collect()
    }

    // ---- faults ----

    /// Forgets all change history: resuming a watch or a paged list from any older
    /// resourceVersion now gets 410 Gone / Expired.
    pub fn compact(&self) {
        lock(&self.shared.store).compact();
    }

    /// Breaks every open watch in the middle of an event line (clients see half an event, then
    /// a connection error).
    pub fn drop_watches(&self) {
        lock(&self.shared.store).close_watches(true);
    }

    /// Ends every open watch cleanly, as the server does when `timeoutSeconds` elapses.
    pub fn end_watches(&self) {
        lock(&self.shared.store).close_watches(false);
    }

    /// The next `count` requests get `status` (e.g. 500, 503, 429) with a Status body.
    pub fn fail_next(&self, count: usize, status: u16) {
        if count > 0 {
            lock(&self.shared.faults)
                .failures
                .push_back((count, status));
        }
    }

    /// As a restarted kube-apiserver that has not registered its CRDs yet: with `starting`,
    /// discovery leaves out the Gateway API group and its resources answer 404 Not Found
    /// (watches open until then are unaffected unless dropped); `ready` is what `/readyz`
    /// says meanwhile.
    pub fn set_starting(&self, starting: bool, ready: bool) {
        let mut faults = lock(&self.shared.faults);
        faults.unregistered = if starting {
            vec![GATEWAY_GROUP.to_string()]
        } else {
            Vec::new()
        };
        faults.not_ready = !ready;
    }

    /// Every list of `kind` comes back empty (a server that lost its view), or as stored again
    /// with `empty` false.
    pub fn set_empty_lists(&self, kind: &str, empty: bool) {
        let mut faults = lock(&self.shared.faults);
        faults.empty_lists.retain(|k| k != kind);
        if empty {
            faults.empty_lists.push(kind.to_string());
        }
    }

    /// Delays every answer by `delay` (zero to stop).
    pub fn set_delay(&self, delay: Duration) {
        lock(&self.shared.faults).delay = delay;
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let _ = stream.set_nodelay(true);
        let id = shared.next_connection.fetch_add(1, Ordering::Relaxed);
        let connection_shared = shared.clone();
        let task = tokio::spawn(async move {
            let service_shared = connection_shared.clone();
            let service =
                hyper::service::service_fn(move |request| handle(service_shared.clone(), request));
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
            lock(&connection_shared.connections).remove(&id);
        });
        let mut connections = lock(&shared.connections);
        connections.retain(|_, handle| !handle.is_finished());
        connections.insert(id, task.abort_handle());
    }
}

// ---- HTTP handling ----

fn full(status: StatusCode, body: Vec<u8>) -> Response<Body> {
    let mut response = Response::new(
        Full::new(Bytes::from(body))
            .map_err(|never| match never {})
            .boxed(),
    );
    *response.status_mut() = status;
    response.headers_mut().insert(
        "content-type",
        "application/json".parse().expect("static header"),
    );
    response
}

fn json_response(status: StatusCode, value: &Value) -> Response<Body> {
    full(status, serde_json::to_vec(value).unwrap_or_default())
}

fn error_response(error: &ApiError) -> Response<Body> {
    let status = StatusCode::from_u16(error.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = json_response(status, &error.status());
    if error.code == 429 {
        response
            .headers_mut()
            .insert("retry-after", "1".parse().expect("static header"));
    }
    response
}

async fn handle(
    shared: Arc<Shared>,
    request: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    let (delay, injected) = {
        let mut faults = lock(&shared.faults);
        let injected = faults.failures.front_mut().map(|(left, status)| {
            *left -= 1;
            *status
        });
        if faults.failures.front().is_some_and(|(left, _)| *left == 0) {
            faults.failures.pop_front();
        }
        (faults.delay, injected)
    };
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    if let Some(status) = injected {
        let reason = match status {
            429 => "TooManyRequests",
            503 => "ServiceUnavailable",
            _ => "InternalError",
        };
        return Ok(error_response(&ApiError::new(
            status,
            reason,
            format!("injected failure ({status})"),
        )));
    }
    Ok(route(&shared, &request).unwrap_or_else(|e| error_response(&e)))
}

fn parse_query(query: &str) -> HashMap<String, String> {
    query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn api_group(resources: &[ResourceType], group: &str) -> Option<Value> {
    // In the order the resources list them (the source reads the set, not the order).
    let mut versions: Vec<&String> = Vec::new();
    for version in resources
        .iter()
        .filter(|r| r.group == group)
        .flat_map(|r| &r.versions)
    {
        if !versions.contains(&version) {
            versions.push(version);
        }
    }
    let entry = |v: &&String| json!({"groupVersion": format!("{group}/{v}"), "version": v});
    Some(json!({
        "name": group,
        "versions": versions.iter().map(entry).collect::<Vec<_>>(),
        "preferredVersion": entry(versions.first()?),
    }))
}

fn resource_list(resources: &[ResourceType], group: &str, version: &str) -> Option<Value> {
    let entries: Vec<Value> = resources
        .iter()
        .filter(|r| r.group == group && r.serves(version))
        .map(|r| {
            json!({
                "name": r.plural, "singularName": r.kind.to_lowercase(),
                "namespaced": r.namespaced, "kind": r.kind, "verbs": ["list", "watch"],
            })
        })
        .collect();
    (!entries.is_empty()).then(|| {
        json!({
            "kind": "APIResourceList", "apiVersion": "v1",
            "groupVersion": format!("{group}/{version}"), "resources": entries,
        })
    })
}

fn route(shared: &Arc<Shared>, request: &Request<Incoming>) -> Result<Response<Body>, ApiError> {
    let not_found = || ApiError::not_found("the server could not find the requested resource");
    if request.method() != Method::GET {
        return Err(ApiError::new(
            405,
            "MethodNotAllowed",
            "the API double serves GET only",
        ));
    }
    let path = request.uri().path();
    let query = parse_query(request.uri().query().unwrap_or(""));
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let (unregistered, not_ready, empty_lists) = {
        let faults = lock(&shared.faults);
        (
            faults.unregistered.clone(),
            faults.not_ready,
            faults.empty_lists.clone(),
        )
    };
    if segments == ["readyz"] {
        return if not_ready {
            Err(ApiError::new(500, "InternalError", "readyz check failed"))
        } else {
            Ok(full(StatusCode::OK, b"ok".to_vec()))
        };
    }
    let resources: Vec<ResourceType> = lock(&shared.store)
        .resources()
        .filter(|r| !unregistered.contains(&r.group))
        .cloned()
        .collect();
    let (group, version, plural) = match segments.as_slice() {
        ["apis"] => {
            let mut groups: Vec<&str> = resources
                .iter()
                .map(|r| r.group.as_str())
                .filter(|g| !g.is_empty())
                .collect();
            groups.sort();
            groups.dedup();
            let groups: Vec<Value> = groups
                .iter()
                .filter_map(|g| api_group(&resources, g))
                .collect();
            return Ok(json_response(
                StatusCode::OK,
                &json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}),
            ));
        }
        ["apis", group, version] => {
            return resource_list(&resources, group, version)
                .map(|list| json_response(StatusCode::OK, &list))
                .ok_or_else(not_found);
        }
        ["api", version, plural] => ("", *version, *plural),
        ["apis", group, version, plural] => (*group, *version, *plural),
        _ => return Err(not_found()),
    };
    let resource = resources
        .iter()
        .find(|r| r.group == group && r.plural == plural && r.serves(version))
        .ok_or_else(not_found)?;
    let api_version = resource.api_version(version);
    if query.get("watch").map(String::as_str) == Some("true") {
        serve_watch(shared, resource, &api_version, &query)
    } else {
        let empty = empty_lists.contains(&resource.kind);
        serve_list(shared, resource, &api_version, &query, empty)
    }
}

fn write_object(out: &mut Vec<u8>, object: &StoredObject, api_version: &str) {
    if object.value["apiVersion"] == api_version {
        let _ = serde_json::to_writer(&mut *out, &object.value);
    } else {
        let mut value = object.value.clone();
        value["apiVersion"] = Value::String(api_version.to_string());
        let _ = serde_json::to_writer(&mut *out, &value);
    }
}

fn serve_list(
    shared: &Arc<Shared>,
    resource: &ResourceType,
    api_version: &str,
    query: &HashMap<String, String>,
    empty: bool,
) -> Result<Response<Body>, ApiError> {
    let limit = query
        .get("limit")
        .map(|l| l.parse())
        .transpose()
        .map_err(|_| ApiError::bad_request("invalid limit"))?;
    let continue_token = query.get("continue").filter(|c| !c.is_empty());
    let mut page = lock(&shared.store).list(
        &resource.group,
        &resource.plural,
        limit,
        continue_token.map(String::as_str),
    )?;
    if empty {
        page.items.clear();
        page.continue_token = None;
    }
    let mut metadata = json!({"resourceVersion": page.rv.to_string()});
    if let Some(token) = &page.continue_token {
        metadata["continue"] = json!(token);
    }
    let mut out = Vec::with_capacity(256 + page.items.len() * 1024);
    out.extend_from_slice(
        format!(
            "{{\"apiVersion\":{},\"kind\":\"{}List\",\"metadata\":{},\"items\":[",
            Value::String(api_version.to_string()),
            resource.kind,
            metadata
        )
        .as_bytes(),
    );
    for (i, item) in page.items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        if resource.builtin {
            // Items of built-in lists carry no apiVersion/kind, as the real server sends them.
            let mut value = item.value.clone();
            if let Some(fields) = value.as_object_mut() {
                fields.remove("apiVersion");
                fields.remove("kind");
            }
            let _ = serde_json::to_writer(&mut out, &value);
        } else {
            write_object(&mut out, item, api_version);
        }
    }
    out.extend_from_slice(b"]}");
    Ok(full(StatusCode::OK, out))
}

fn watch_line(event_type: &str, object: impl FnOnce(&mut Vec<u8>)) -> Bytes {
    let mut out = Vec::with_capacity(1024);
    out.extend_from_slice(b"{\"type\":\"");
    out.extend_from_slice(event_type.as_bytes());
    out.extend_from_slice(b"\",\"object\":");
    object(&mut out);
    out.extend_from_slice(b"}\n");
    Bytes::from(out)
}

/// Where a watch stream is.
enum Stream {
    Open,
    /// Half an event was sent: the connection breaks next.
    Cut,
    Closed,
}

struct WatchState {
    backlog: VecDeque<WatchMessage>,
    receiver: UnboundedReceiver<WatchMessage>,
    deadline: tokio::time::Instant,
    kind: String,
    api_version: String,
    stream: Stream,
}

fn serve_watch(
    shared: &Arc<Shared>,
    resource: &ResourceType,
    api_version: &str,
    query: &HashMap<String, String>,
) -> Result<Response<Body>, ApiError> {
    let rv = query
        .get("resourceVersion")
        .and_then(|rv| rv.parse().ok())
        .filter(|rv| *rv > 0)
        .ok_or_else(|| {
            ApiError::bad_request("the API double serves watches resuming from a list's version")
        })?;
    let bookmarks = query.get("allowWatchBookmarks").map(String::as_str) == Some("true");
    let timeout = match query.get("timeoutSeconds") {
        Some(t) => Duration::from_secs(
            t.parse()
                .map_err(|_| ApiError::bad_request("invalid timeoutSeconds"))?,
        ),
        None => Duration::from_secs(1800),
    };
    let (sender, receiver) = unbounded_channel();
    let registered =
        lock(&shared.store).watch(&resource.group, &resource.plural, rv, bookmarks, sender);
    let backlog = match registered {
        Ok(backlog) => backlog,
        // The real server answers an expired watch with 200 and a single ERROR event.
        Err(error) if error.code == 410 => {
            let line = watch_line("ERROR", |out| {
                let _ = serde_json::to_writer(out, &error.status());
            });
            return Ok(full(StatusCode::OK, line.to_vec()));
        }
        Err(error) => return Err(error),
    };
    let state = WatchState {
        backlog: backlog.into(),
        receiver,
        deadline: tokio::time::Instant::now() + timeout,
        kind: resource.kind.clone(),
        api_version: api_version.to_string(),
        stream: Stream::Open,
    };
    let stream = futures::stream::unfold(state, |mut state| async move {
        match state.stream {
            Stream::Open => {}
            Stream::Cut => {
                state.stream = Stream::Closed;
                let reset = io::Error::new(io::ErrorKind::ConnectionReset, "watch cut by the test");
                return Some((Err(reset), state));
            }
            Stream::Closed => return None,
        }
        let message = match state.backlog.pop_front() {
            Some(message) => message,
            None => tokio::select! {
                message = state.receiver.recv() => message.unwrap_or(WatchMessage::End),
                _ = tokio::time::sleep_until(state.deadline) => WatchMessage::End,
            },
        };
        let line = match message {
            WatchMessage::End => return None,
            WatchMessage::Abort => {
                state.stream = Stream::Cut;
                let half = format!(
                    "{{\"type\":\"MODIFIED\",\"object\":{{\"kind\":\"{}\",",
                    state.kind
                );
                Bytes::from(half)
            }
            WatchMessage::Event(event_type, object) => watch_line(event_type.as_str(), |out| {
                write_object(out, &object, &state.api_version)
            }),
            WatchMessage::Bookmark(rv) => {
                let object = json!({"kind": state.kind, "apiVersion": state.api_version,
                                    "metadata": {"resourceVersion": rv.to_string()}});
                watch_line("BOOKMARK", |out| {
                    let _ = serde_json::to_writer(out, &object);
                })
            }
        };
        Some((Ok(Frame::data(line)), state))
    });
    let mut response = Response::new(StreamBody::new(stream).boxed());
    response.headers_mut().insert(
        "content-type",
        "application/json".parse().expect("static header"),
    );
    Ok(response)
}
