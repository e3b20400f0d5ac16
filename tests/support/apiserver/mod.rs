//! An in-process Kubernetes API double for tests: plain HTTP on 127.0.0.1 speaking the real
//! discovery, list (paged, consistent snapshots), watch (chunked JSON lines, BOOKMARK, 410 Gone)
//! and get/create/replace/delete protocol, so kube-rs's real client and watcher run against it.
//!
//! It has no admission, no RBAC, no PATCH and no garbage collection. Tests drive it directly
//! (create/replace/delete objects, install/remove CRDs) and inject faults (dropped watches,
//! error answers, delays, restarts, history compaction).
// Shared by the e2e test binary and the benches; each uses a different subset.
#![allow(dead_code)]

pub mod selector;
pub mod store;

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};
use tokio::task::{AbortHandle, JoinHandle};

pub use store::{ApiError, ReplaceScope, ResourceType};
use store::{Filter, ListRequest, Store, StoredObject, WatchMessage, WatchStart};

use selector::{FieldSelector, LabelSelector};

type Body = BoxBody<Bytes, io::Error>;

pub const GATEWAY_GROUP: &str = "gateway.networking.k8s.io";

/// A Gateway API CRD (namespaced, with a status subresource).
pub fn gateway_api_type(kind: &str, plural: &str, versions: &[&str]) -> ResourceType {
    ResourceType {
        group: GATEWAY_GROUP.into(),
        kind: kind.into(),
        plural: plural.into(),
        namespaced: true,
        versions: versions.iter().map(|v| v.to_string()).collect(),
        status_subresource: true,
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
        status_subresource: false,
        builtin: true,
    }
}

pub fn lease_type() -> ResourceType {
    ResourceType {
        group: "coordination.k8s.io".into(),
        kind: "Lease".into(),
        plural: "leases".into(),
        namespaced: true,
        versions: vec!["v1".into()],
        status_subresource: false,
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
    history_limit: usize,
}

impl Default for ApiServerBuilder {
    fn default() -> Self {
        let mut resources = vec![namespace_type(), lease_type()];
        resources.extend(gateway_api_v1_6_experimental());
        ApiServerBuilder {
            resources,
            bookmark_interval: Some(Duration::from_secs(1)),
            history_limit: 0,
        }
    }
}

impl ApiServerBuilder {
    /// Serves exactly these resource types (Namespace and Lease are built in unless left out).
    pub fn resources(mut self, resources: Vec<ResourceType>) -> Self {
        self.resources = resources;
        self
    }

    /// Leaves a resource type out (its CRD "not installed").
    pub fn without(mut self, kind: &str) -> Self {
        self.resources.retain(|r| r.kind != kind);
        self
    }

    /// How often open watches get a BOOKMARK (None: only on `send_bookmarks`).
    pub fn bookmark_interval(mut self, interval: Option<Duration>) -> Self {
        self.bookmark_interval = interval;
        self
    }

    /// How many changes per resource are kept for resuming watches (0 = all until `compact`).
    pub fn history_limit(mut self, limit: usize) -> Self {
        self.history_limit = limit;
        self
    }

    pub async fn start(self) -> ApiServer {
        let mut store = Store::new(self.history_limit);
        for resource in self.resources {
            store.install(resource);
        }
        let listener = bind(SocketAddr::from(([127, 0, 0, 1], 0))).expect("bind the API double");
        let addr = listener.local_addr().expect("local address");
        let shared = Arc::new(Shared {
            store: Mutex::new(store),
            faults: Mutex::new(Faults::default()),
            connections: Mutex::new(HashMap::new()),
            next_connection: AtomicU64::new(0),
            accept_task: Mutex::new(None),
            requests: Mutex::new(Vec::new()),
            clock_offset_secs: AtomicI64::new(0),
            addr,
        });
        let accept = tokio::spawn(accept_loop(listener, shared.clone()));
        *lock(&shared.accept_task) = Some(accept);
        let bookmark_task = self.bookmark_interval.map(|interval| {
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
            addr,
            _kubeconfig_dir: kubeconfig_dir,
            kubeconfig_path,
            bookmark_task,
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
    failures: VecDeque<Failure>,
    delay: Duration,
}

struct Failure {
    remaining: usize,
    status: u16,
    path_contains: Option<String>,
    /// Only requests from the client built by `client_named` with this name.
    client: Option<String>,
}

/// The header `client_named` adds so faults can target one client.
const CLIENT_HEADER: &str = "x-test-client";

struct Shared {
    store: Mutex<Store>,
    faults: Mutex<Faults>,
    connections: Mutex<HashMap<u64, AbortHandle>>,
    next_connection: AtomicU64,
    accept_task: Mutex<Option<JoinHandle<()>>>,
    requests: Mutex<Vec<String>>,
    clock_offset_secs: AtomicI64,
    addr: SocketAddr,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The running double; stops serving when dropped.
pub struct ApiServer {
    shared: Arc<Shared>,
    addr: SocketAddr,
    _kubeconfig_dir: tempfile::TempDir,
    kubeconfig_path: PathBuf,
    bookmark_task: Option<JoinHandle<()>>,
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        if let Some(task) = self.bookmark_task.take() {
            task.abort();
        }
        if let Some(task) = lock(&self.shared.accept_task).take() {
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

    /// Starts with Namespace, Lease and Gateway API v1.6 (experimental channel).
    pub async fn start() -> ApiServer {
        ApiServerBuilder::default().start().await
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
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

    /// A client like `client()`, whose requests carry its name so faults can target it.
    pub async fn client_named(&self, name: &str) -> kube::Client {
        let kubeconfig =
            kube::config::Kubeconfig::read_from(&self.kubeconfig_path).expect("read kubeconfig");
        let mut config = kube::Config::from_custom_kubeconfig(
            kubeconfig,
            &kube::config::KubeConfigOptions::default(),
        )
        .await
        .expect("kubeconfig to config");
        config.headers.push((
            hyper::header::HeaderName::from_static(CLIENT_HEADER),
            hyper::header::HeaderValue::from_str(name)
                .expect("client name is a valid header value"),
        ));
        kube::Client::try_from(config).expect("kube client")
    }

    // ---- objects ----

    fn resource_of(&self, object: &Value) -> Result<ResourceType, ApiError> {
        let api_version = object
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let store = lock(&self.shared.store);
        let resource = store.resource_by_kind(group, kind).ok_or_else(|| {
            ApiError::not_found(format!("no matches for kind {kind:?} in group {group:?}"))
        })?;
        if !resource.serves(version) {
            return Err(ApiError::not_found(format!(
                "no matches for kind {kind:?} in version {api_version:?}"
            )));
        }
        Ok(resource.clone())
    }

    fn resource_by_kind(&self, kind: &str) -> ResourceType {
        lock(&self.shared.store)
            .resources()
            .find(|r| r.kind == kind)
            .cloned()
            .unwrap_or_else(|| panic!("kind {kind} is not installed in the API double"))
    }

    fn now(&self) -> String {
        let now = k8s_openapi::jiff::Timestamp::now().as_second()
            + self.shared.clock_offset_secs.load(Ordering::Relaxed);
        k8s_openapi::jiff::Timestamp::from_second(now)
            .map(|t| t.to_string())
            .unwrap_or_default()
    }

    /// Creates an object (its `apiVersion`/`kind` pick the resource), assigning uid,
    /// resourceVersion, creationTimestamp and generation; watchers see ADDED.
    pub fn create(&self, object: Value) -> Result<Value, ApiError> {
        let resource = self.resource_of(&object)?;
        let now = self.now();
        let stored =
            lock(&self.shared.store).create(&resource.group, &resource.plural, object, &now)?;
        Ok(stored.value.clone())
    }

    /// Replaces spec and status of an existing object (a non-empty resourceVersion is a
    /// precondition); watchers see MODIFIED.
    pub fn replace(&self, object: Value) -> Result<Value, ApiError> {
        let resource = self.resource_of(&object)?;
        let stored = lock(&self.shared.store).replace(
            &resource.group,
            &resource.plural,
            object,
            ReplaceScope::All,
        )?;
        Ok(stored.value.clone())
    }

    /// Creates the object, or replaces it unconditionally when it exists.
    pub fn apply(&self, mut object: Value) -> Value {
        if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            metadata.remove("resourceVersion");
        }
        match self.create(object.clone()) {
            Ok(created) => created,
            Err(e) if e.code == 409 => self.replace(object).expect("replace existing object"),
            Err(e) => panic!("apply failed: {e:?}"),
        }
    }

    /// Deletes an object by kind (e.g. "HTTPRoute"), namespace ("" if cluster-scoped) and name.
    pub fn delete(&self, kind: &str, namespace: &str, name: &str) -> Result<Value, ApiError> {
        let resource = self.resource_by_kind(kind);
        let key = (
            if resource.namespaced {
                namespace.to_string()
            } else {
                String::new()
            },
            name.to_string(),
        );
        let stored =
            lock(&self.shared.store).delete(&resource.group, &resource.plural, &key, None)?;
        Ok(stored.value.clone())
    }

    pub fn get(&self, kind: &str, namespace: &str, name: &str) -> Option<Value> {
        let resource = self.resource_by_kind(kind);
        let key = (
            if resource.namespaced {
                namespace.to_string()
            } else {
                String::new()
            },
            name.to_string(),
        );
        lock(&self.shared.store)
            .get(&resource.group, &resource.plural, &key)
            .ok()
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

    pub fn resource_version(&self) -> u64 {
        lock(&self.shared.store).resource_version()
    }

    /// Makes wall-clock time (creationTimestamp) run ahead by `seconds`.
    pub fn advance_clock(&self, seconds: i64) {
        self.shared
            .clock_offset_secs
            .fetch_add(seconds, Ordering::Relaxed);
    }

    // ---- CRDs ----

    /// Installs a CRD (or changes its served versions); discovery shows it at once.
    pub fn install(&self, resource: ResourceType) {
        lock(&self.shared.store).install(resource);
    }

    /// Removes a CRD: its objects are deleted (watchers see DELETED), its watches end and
    /// its endpoints answer 404.
    pub fn uninstall(&self, kind: &str) {
        let resource = self.resource_by_kind(kind);
        lock(&self.shared.store).uninstall(&resource.group, &resource.plural);
    }

    pub fn installed(&self) -> Vec<ResourceType> {
        lock(&self.shared.store).resources().cloned().collect()
    }

    // ---- faults and observation ----

    /// Forgets all change history: resuming a watch or a paged list from any older
    /// resourceVersion now gets 410 Gone / Expired.
    pub fn compact(&self) {
        lock(&self.shared.store).compact();
    }

    pub fn set_history_limit(&self, limit: usize) {
        lock(&self.shared.store).set_history_limit(limit);
    }

    /// Sends a BOOKMARK to every open watch that asked for bookmarks.
    pub fn send_bookmarks(&self) {
        lock(&self.shared.store).send_bookmarks();
    }

    /// Breaks every open watch connection mid-stream (clients see a connection error).
    pub fn drop_watches(&self) {
        lock(&self.shared.store).close_watches(true);
    }

    /// Ends every open watch cleanly, as the server does when `timeoutSeconds` elapses.
    pub fn end_watches(&self) {
        lock(&self.shared.store).close_watches(false);
    }

    pub fn open_watches(&self) -> usize {
        lock(&self.shared.store).open_watches()
    }

    /// The next `count` requests get `status` (e.g. 500, 503, 429) with a Status body.
    pub fn fail_next(&self, count: usize, status: u16) {
        self.fail_next_matching(count, status, None);
    }

    /// Like `fail_next`, only for requests whose path and query contain `path_contains`.
    pub fn fail_next_matching(&self, count: usize, status: u16, path_contains: Option<&str>) {
        lock(&self.shared.faults).failures.push_back(Failure {
            remaining: count,
            status,
            path_contains: path_contains.map(str::to_string),
            client: None,
        });
    }

    /// Cuts one client off (a network partition for it alone): every request from the client
    /// built by `client_named(name)` gets `status`, or no answer at all when `status` is 0,
    /// until `clear_failures`.
    pub fn isolate_client(&self, name: &str, status: u16) {
        lock(&self.shared.faults).failures.push_back(Failure {
            remaining: usize::MAX,
            status,
            path_contains: None,
            client: Some(name.to_string()),
        });
    }

    /// Cancels injected failures not yet used.
    pub fn clear_failures(&self) {
        lock(&self.shared.faults).failures.clear();
    }

    /// Delays every answer by `delay` (zero to stop).
    pub fn set_delay(&self, delay: Duration) {
        lock(&self.shared.faults).delay = delay;
    }

    /// Simulates an apiserver restart: every connection is cut, nothing listens for
    /// `downtime`, then the same port serves again with the same objects. With
    /// `lose_history` the watch history is gone too (a fresh watch cache): resuming from an
    /// older resourceVersion gets 410.
    pub async fn restart(&self, downtime: Duration, lose_history: bool) {
        let accept = lock(&self.shared.accept_task).take();
        if let Some(task) = accept {
            task.abort();
            let _ = task.await;
        }
        for (_, connection) in lock(&self.shared.connections).drain() {
            connection.abort();
        }
        {
            let mut store = lock(&self.shared.store);
            store.close_watches(true);
            if lose_history {
                store.compact();
            }
        }
        tokio::time::sleep(downtime).await;
        let mut listener = None;
        for _ in 0..100 {
            match bind(self.addr) {
                Ok(l) => {
                    listener = Some(l);
                    break;
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
        let listener = listener.expect("re-bind the API double's port after restart");
        let accept = tokio::spawn(accept_loop(listener, self.shared.clone()));
        *lock(&self.shared.accept_task) = Some(accept);
    }

    /// Requests received so far, as "METHOD /path?query".
    pub fn requests(&self) -> Vec<String> {
        lock(&self.shared.requests).clone()
    }

    pub fn clear_requests(&self) {
        lock(&self.shared.requests).clear();
    }
}

fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = TcpSocket::new_v4()?;
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(1024)
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
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
    let target = request
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_default();
    {
        let mut requests = lock(&shared.requests);
        if requests.len() < 200_000 {
            requests.push(format!("{} {}", request.method(), target));
        }
    }
    let client = request
        .headers()
        .get(CLIENT_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let (delay, injected) = {
        let mut faults = lock(&shared.faults);
        let mut injected = None;
        for failure in faults.failures.iter_mut() {
            if failure.remaining > 0
                && failure
                    .path_contains
                    .as_ref()
                    .is_none_or(|p| target.contains(p.as_str()))
                && failure
                    .client
                    .as_ref()
                    .is_none_or(|c| client.as_ref() == Some(c))
            {
                failure.remaining -= 1;
                injected = Some(failure.status);
                break;
            }
        }
        faults.failures.retain(|f| f.remaining > 0);
        (faults.delay, injected)
    };
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    if injected == Some(0) {
        // No answer: the client sees a request that never completes.
        tokio::time::sleep(Duration::from_secs(3600)).await;
    }
    if let Some(status) = injected {
        let reason = match status {
            429 => "TooManyRequests",
            503 => "ServiceUnavailable",
            504 => "Timeout",
            _ => "InternalError",
        };
        return Ok(error_response(&ApiError::new(
            status,
            reason,
            format!("injected failure ({status})"),
        )));
    }
    Ok(route(&shared, request)
        .await
        .unwrap_or_else(|e| error_response(&e)))
}

fn parse_query(query: &str) -> HashMap<String, String> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => match text
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
            {
                Some(b) => {
                    out.push(b);
                    i += 2;
                }
                None => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Kubernetes version priority: GA > beta > alpha, then by number, newest first.
fn version_priority(version: &str) -> (u8, u32, u32) {
    let Some(rest) = version.strip_prefix('v') else {
        return (0, 0, 0);
    };
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let major = digits.parse().unwrap_or(0);
    let tail = &rest[digits.len()..];
    let (stability, minor) = if tail.is_empty() {
        (3, 0)
    } else if let Some(n) = tail.strip_prefix("beta") {
        (2, n.parse().unwrap_or(0))
    } else if let Some(n) = tail.strip_prefix("alpha") {
        (1, n.parse().unwrap_or(0))
    } else {
        (0, 0)
    };
    (stability, major, minor)
}

fn group_versions(resources: &[ResourceType], group: &str) -> Vec<String> {
    let mut versions: Vec<String> = resources
        .iter()
        .filter(|r| r.group == group)
        .flat_map(|r| r.versions.iter().cloned())
        .collect();
    versions.sort_by(|a, b| version_priority(b).cmp(&version_priority(a)).then(a.cmp(b)));
    versions.dedup();
    versions
}

fn api_group(resources: &[ResourceType], group: &str) -> Option<Value> {
    let versions = group_versions(resources, group);
    let preferred = versions.first()?;
    let entry = |v: &String| json!({"groupVersion": format!("{group}/{v}"), "version": v});
    Some(json!({
        "name": group,
        "versions": versions.iter().map(entry).collect::<Vec<_>>(),
        "preferredVersion": entry(preferred),
    }))
}

fn resource_list(resources: &[ResourceType], group: &str, version: &str) -> Option<Value> {
    let served: Vec<&ResourceType> = resources
        .iter()
        .filter(|r| r.group == group && r.serves(version))
        .collect();
    if served.is_empty() {
        return None;
    }
    let mut entries = Vec::new();
    for resource in served {
        entries.push(json!({
            "name": resource.plural,
            "singularName": resource.kind.to_lowercase(),
            "namespaced": resource.namespaced,
            "kind": resource.kind,
            "verbs": ["create", "delete", "get", "list", "update", "watch"],
        }));
        if resource.status_subresource {
            entries.push(json!({
                "name": format!("{}/status", resource.plural),
                "singularName": "",
                "namespaced": resource.namespaced,
                "kind": resource.kind,
                "verbs": ["get", "update"],
            }));
        }
    }
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": if group.is_empty() { version.to_string() } else { format!("{group}/{version}") },
        "resources": entries,
    }))
}

async fn route(
    shared: &Arc<Shared>,
    request: Request<Incoming>,
) -> Result<Response<Body>, ApiError> {
    let path = request.uri().path().to_string();
    let query = parse_query(request.uri().query().unwrap_or(""));
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let resources: Vec<ResourceType> = lock(&shared.store).resources().cloned().collect();
    let not_found = || ApiError::not_found("the server could not find the requested resource");
    match segments.as_slice() {
        ["version"] => Ok(json_response(
            StatusCode::OK,
            &json!({"major": "1", "minor": "34", "gitVersion": "v1.34.0-apidouble", "platform": "linux/amd64"}),
        )),
        ["api"] => Ok(json_response(
            StatusCode::OK,
            &json!({"kind": "APIVersions", "versions": ["v1"],
                    "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": shared.addr.to_string()}]}),
        )),
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
            Ok(json_response(
                StatusCode::OK,
                &json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}),
            ))
        }
        ["api", version] => resource_list(&resources, "", version)
            .map(|list| json_response(StatusCode::OK, &list))
            .ok_or_else(not_found),
        ["apis", group] => {
            let mut value = api_group(&resources, group).ok_or_else(not_found)?;
            value["kind"] = json!("APIGroup");
            value["apiVersion"] = json!("v1");
            Ok(json_response(StatusCode::OK, &value))
        }
        ["apis", group, version] => resource_list(&resources, group, version)
            .map(|list| json_response(StatusCode::OK, &list))
            .ok_or_else(not_found),
        ["api", version, rest @ ..] => {
            serve_resource(shared, request, &resources, "", version, rest, &query).await
        }
        ["apis", group, version, rest @ ..] => {
            serve_resource(shared, request, &resources, group, version, rest, &query).await
        }
        _ => Err(not_found()),
    }
}

struct Target<'a> {
    resource: ResourceType,
    version: &'a str,
    namespace: Option<&'a str>,
    name: Option<&'a str>,
    subresource: Option<&'a str>,
}

fn resolve<'a>(
    resources: &[ResourceType],
    group: &str,
    version: &'a str,
    rest: &[&'a str],
) -> Result<Target<'a>, ApiError> {
    let find = |plural: &str| {
        resources
            .iter()
            .find(|r| r.group == group && r.plural == plural && r.serves(version))
    };
    let not_found = || ApiError::not_found("the server could not find the requested resource");
    let (namespace, plural, tail) = match rest {
        ["namespaces", namespace, plural, tail @ ..]
            if find(plural).is_some_and(|r| r.namespaced) =>
        {
            (Some(*namespace), *plural, tail)
        }
        [plural, tail @ ..] => (None, *plural, tail),
        [] => return Err(not_found()),
    };
    let resource = find(plural).ok_or_else(not_found)?.clone();
    if tail.len() > 2 || (tail.len() == 2 && !(tail[1] == "status" && resource.status_subresource))
    {
        return Err(not_found());
    }
    Ok(Target {
        resource,
        version,
        namespace,
        name: tail.first().copied(),
        subresource: tail.get(1).copied(),
    })
}

fn render(object: &StoredObject, api_version: &str) -> Value {
    let mut value = object.value.clone();
    value["apiVersion"] = Value::String(api_version.to_string());
    value
}

/// A list item: built-in kinds are listed without apiVersion/kind, as the real server does.
fn write_list_item(
    out: &mut Vec<u8>,
    object: &StoredObject,
    resource: &ResourceType,
    api_version: &str,
) {
    if resource.builtin {
        let mut value = object.value.clone();
        if let Some(fields) = value.as_object_mut() {
            fields.remove("apiVersion");
            fields.remove("kind");
        }
        let _ = serde_json::to_writer(&mut *out, &value);
    } else {
        write_object(out, object, api_version);
    }
}

fn write_object(out: &mut Vec<u8>, object: &StoredObject, api_version: &str) {
    if object.value.get("apiVersion").and_then(Value::as_str) == Some(api_version) {
        let _ = serde_json::to_writer(&mut *out, &object.value);
    } else {
        let _ = serde_json::to_writer(&mut *out, &render(object, api_version));
    }
}

async fn read_json(request: Request<Incoming>) -> Result<Value, ApiError> {
    let body = request
        .into_body()
        .collect()
        .await
        .map_err(|e| ApiError::bad_request(format!("reading body: {e}")))?
        .to_bytes();
    if body.is_empty() {
        return Ok(Value::Null);
    }
    serde_json::from_slice(&body).map_err(|e| ApiError::bad_request(format!("decoding body: {e}")))
}

async fn serve_resource(
    shared: &Arc<Shared>,
    request: Request<Incoming>,
    resources: &[ResourceType],
    group: &str,
    version: &str,
    rest: &[&str],
    query: &HashMap<String, String>,
) -> Result<Response<Body>, ApiError> {
    let target = resolve(resources, group, version, rest)?;
    let resource = &target.resource;
    let api_version = resource.api_version(version);
    if target.namespace.is_some() && !resource.namespaced {
        return Err(ApiError::not_found(
            "the server could not find the requested resource",
        ));
    }
    let key_of = |name: &str| (target.namespace.unwrap_or("").to_string(), name.to_string());
    let method = request.method().clone();
    match (method, target.name) {
        (Method::GET, None) => {
            let filter = Filter {
                namespace: target.namespace.map(str::to_string),
                labels: LabelSelector::parse(query.get("labelSelector").map_or("", String::as_str))
                    .map_err(ApiError::bad_request)?,
                fields: FieldSelector::parse(query.get("fieldSelector").map_or("", String::as_str))
                    .map_err(ApiError::bad_request)?,
            };
            if matches!(query.get("watch").map(String::as_str), Some("true" | "1")) {
                serve_watch(shared, resource, &api_version, filter, query)
            } else {
                serve_list(shared, resource, &api_version, filter, query)
            }
        }
        (Method::GET, Some(name)) => {
            if resource.namespaced && target.namespace.is_none() {
                return Err(ApiError::not_found(
                    "the server could not find the requested resource",
                ));
            }
            let object = lock(&shared.store).get(group, &resource.plural, &key_of(name))?;
            Ok(json_response(
                StatusCode::OK,
                &render(&object, &api_version),
            ))
        }
        (Method::POST, None) => {
            let mut body = read_json(request).await?;
            let Some(metadata) = body.get_mut("metadata").and_then(Value::as_object_mut) else {
                return Err(ApiError::bad_request("object has no metadata"));
            };
            if resource.namespaced {
                let Some(namespace) = target.namespace else {
                    return Err(ApiError::not_found(
                        "the server could not find the requested resource",
                    ));
                };
                match metadata.get("namespace").and_then(Value::as_str) {
                    Some(ns) if ns != namespace => {
                        return Err(ApiError::bad_request(
                            "the namespace of the provided object does not match the namespace sent on the request",
                        ));
                    }
                    _ => {
                        metadata.insert("namespace".into(), Value::String(namespace.to_string()));
                    }
                }
            }
            metadata.remove("resourceVersion");
            let now = {
                let secs = k8s_openapi::jiff::Timestamp::now().as_second()
                    + shared.clock_offset_secs.load(Ordering::Relaxed);
                k8s_openapi::jiff::Timestamp::from_second(secs)
                    .map(|t| t.to_string())
                    .unwrap_or_default()
            };
            let created = lock(&shared.store).create(group, &resource.plural, body, &now)?;
            Ok(json_response(
                StatusCode::CREATED,
                &render(&created, &api_version),
            ))
        }
        (Method::PUT, Some(name)) => {
            let body = read_json(request).await?;
            if body.pointer("/metadata/name").and_then(Value::as_str) != Some(name) {
                return Err(ApiError::bad_request(
                    "the name of the object does not match the name on the URL",
                ));
            }
            if resource.namespaced
                && body.pointer("/metadata/namespace").and_then(Value::as_str) != target.namespace
            {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            let scope = if target.subresource == Some("status") {
                ReplaceScope::Status
            } else {
                ReplaceScope::Main
            };
            let replaced = lock(&shared.store).replace(group, &resource.plural, body, scope)?;
            Ok(json_response(
                StatusCode::OK,
                &render(&replaced, &api_version),
            ))
        }
        (Method::DELETE, Some(name)) if target.subresource.is_none() => {
            let options = read_json(request).await?;
            let precondition = options
                .pointer("/preconditions/resourceVersion")
                .and_then(Value::as_str);
            let deleted =
                lock(&shared.store).delete(group, &resource.plural, &key_of(name), precondition)?;
            Ok(json_response(
                StatusCode::OK,
                &render(&deleted, &api_version),
            ))
        }
        (method, _) => Err(ApiError::new(
            405,
            "MethodNotAllowed",
            format!("{method} is not supported by the API double"),
        )),
    }
}

fn parse_rv(text: &str) -> Result<u64, ApiError> {
    text.parse()
        .map_err(|_| ApiError::bad_request(format!("invalid resource version {text:?}")))
}

fn serve_list(
    shared: &Arc<Shared>,
    resource: &ResourceType,
    api_version: &str,
    filter: Filter,
    query: &HashMap<String, String>,
) -> Result<Response<Body>, ApiError> {
    let rv = query
        .get("resourceVersion")
        .map(String::as_str)
        .unwrap_or("");
    let exact = query.get("resourceVersionMatch").map(String::as_str) == Some("Exact");
    let request = ListRequest {
        filter,
        limit: query
            .get("limit")
            .map(|l| l.parse())
            .transpose()
            .map_err(|_| ApiError::bad_request("invalid limit"))?,
        continue_token: query.get("continue").filter(|c| !c.is_empty()).cloned(),
        exact_rv: if exact && !rv.is_empty() {
            Some(parse_rv(rv)?)
        } else {
            None
        },
    };
    let page = lock(&shared.store).list(&resource.group, &resource.plural, &request)?;
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
        write_list_item(&mut out, item, resource, api_version);
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

struct WatchState {
    backlog: VecDeque<WatchMessage>,
    receiver: UnboundedReceiver<WatchMessage>,
    deadline: tokio::time::Instant,
    resource: ResourceType,
    api_version: String,
    broken: bool,
}

fn serve_watch(
    shared: &Arc<Shared>,
    resource: &ResourceType,
    api_version: &str,
    filter: Filter,
    query: &HashMap<String, String>,
) -> Result<Response<Body>, ApiError> {
    let rv = query
        .get("resourceVersion")
        .map(String::as_str)
        .unwrap_or("");
    let start = if query.get("sendInitialEvents").map(String::as_str) == Some("true") {
        WatchStart::InitialEvents
    } else if rv.is_empty() || rv == "0" {
        WatchStart::Now
    } else {
        WatchStart::After(parse_rv(rv)?)
    };
    let bookmarks = query.get("allowWatchBookmarks").map(String::as_str) == Some("true");
    let timeout = match query.get("timeoutSeconds") {
        Some(t) => Duration::from_secs(
            t.parse()
                .map_err(|_| ApiError::bad_request("invalid timeoutSeconds"))?,
        ),
        None => Duration::from_secs(1800),
    };
    let (sender, receiver) = unbounded_channel();
    let registered = lock(&shared.store).watch(
        &resource.group,
        &resource.plural,
        start,
        filter,
        bookmarks,
        sender,
    );
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
        resource: resource.clone(),
        api_version: api_version.to_string(),
        broken: false,
    };
    let stream = futures::stream::unfold(state, |mut state| async move {
        if state.broken {
            return None;
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
                state.broken = true;
                return Some((
                    Err(io::Error::new(
                        io::ErrorKind::ConnectionReset,
                        "watch dropped by the test",
                    )),
                    state,
                ));
            }
            WatchMessage::Event(event_type, object) => watch_line(event_type.as_str(), |out| {
                write_object(out, &object, &state.api_version)
            }),
            WatchMessage::Bookmark {
                rv,
                initial_events_end,
            } => {
                let mut metadata = json!({"resourceVersion": rv.to_string()});
                if initial_events_end {
                    metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
                }
                let object = json!({"kind": state.resource.kind, "apiVersion": state.api_version, "metadata": metadata});
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
