//! The peer: real external-dns and a webhook-provider server around its RFC 2136 provider,
//! built from the `sigs.k8s.io/external-dns` Go module by `tests/peer/build.sh OUT`
//! (`scripts/test.sh` does so and names OUT in `GATEWAY_DNS_PEER`).
//!
//! [`ExternalDns`] runs external-dns against a [`ControlPlane`] and a [`Bind`] as its own
//! ServiceAccount (the RBAC external-dns documents for its Gateway API and CRD sources), with
//! its own TXT owner id, writing with RFC 2136 + TSIG; loopback only, killed on drop, logging to
//! a file in its temp dir. [`WebhookRfc2136`] serves external-dns's webhook-provider protocol.
//!
//! external-dns publishes a route only for parents that the route's `status.parents` marks
//! `Accepted=True` (and a ListenerSet only once its status accepts it and its listener): a
//! Gateway controller writes those. No controller runs in the tests, so [`accept_route`] and
//! [`accept_listener_set`] write them as one would.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::bind::{Bind, KEY_NAME, SECRET};
use super::cluster::{ControlPlane, Run};
use super::net::free_port;

/// Names the directory `tests/peer/build.sh` built into.
pub const PEER_ENV: &str = "GATEWAY_DNS_PEER";

/// The ServiceAccount external-dns runs as (namespace and name are the same).
pub const SERVICE_ACCOUNT: &str = "external-dns";

/// What a Gateway controller names itself in the status it writes.
pub const CONTROLLER_NAME: &str = "example.com/test-gateway-controller";

/// The built peer, or a failure that says how to build it.
pub fn peer() -> PathBuf {
    let Some(dir) = std::env::var_os(PEER_ENV) else {
        panic!(
            "{PEER_ENV} is not set: build external-dns and the webhook server with \
             `tests/peer/build.sh DIR` and export {PEER_ENV}=DIR (scripts/test.sh does both)"
        );
    };
    let dir = PathBuf::from(dir);
    assert!(
        dir.join("bin/external-dns").exists() && dir.join("bin/webhook-rfc2136").exists(),
        "{PEER_ENV}={} holds no bin/external-dns or bin/webhook-rfc2136: run tests/peer/build.sh {}",
        dir.display(),
        dir.display()
    );
    dir
}

/// The external-dns release the peer was built from (`tests/peer/go.mod`).
pub fn version() -> String {
    std::fs::read_to_string(peer().join("VERSION"))
        .map(|text| text.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// The DNSEndpoint CRD of the pinned external-dns module.
pub fn dnsendpoint_crd() -> PathBuf {
    peer().join("crds/dnsendpoints.externaldns.k8s.io.yaml")
}

/// The RBAC external-dns documents for its Gateway API route sources (docs/sources/gateway-api.md)
/// and its CRD source (docs/sources/crd.md), bound to a ServiceAccount of its own.
const RBAC: &str = r#"apiVersion: v1
kind: Namespace
metadata:
  name: external-dns
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: external-dns
  namespace: external-dns
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: external-dns
rules:
- apiGroups: [""]
  resources: ["namespaces"]
  verbs: ["get", "watch", "list"]
- apiGroups: ["gateway.networking.k8s.io"]
  resources: ["gateways", "httproutes", "grpcroutes", "tlsroutes", "tcproutes", "udproutes", "listenersets"]
  verbs: ["get", "watch", "list"]
- apiGroups: ["externaldns.k8s.io"]
  resources: ["dnsendpoints"]
  verbs: ["get", "watch", "list"]
- apiGroups: ["externaldns.k8s.io"]
  resources: ["dnsendpoints/status"]
  verbs: ["update"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create", "patch"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: external-dns
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: external-dns
subjects:
- kind: ServiceAccount
  name: external-dns
  namespace: external-dns
"#;

/// Installs external-dns's RBAC and returns a kubeconfig for its ServiceAccount.
pub fn install_rbac(cluster: &ControlPlane) -> PathBuf {
    cluster.apply(RBAC, &[]).ok();
    cluster.service_account_kubeconfig(SERVICE_ACCOUNT, SERVICE_ACCOUNT, None)
}

/// Installs the DNSEndpoint CRD and waits until the API serves it.
pub fn install_dnsendpoint_crd(cluster: &ControlPlane) {
    let crd = dnsendpoint_crd().display().to_string();
    cluster.kubectl(&["apply", "-f", &crd]).ok();
    cluster
        .kubectl(&[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd/dnsendpoints.externaldns.k8s.io",
        ])
        .ok();
}

/// How external-dns is run; [`Config::rfc2136`] gives the Gateway API setup the tests use.
#[derive(Clone, Debug)]
pub struct Config {
    pub owner_id: String,
    /// `--source` values.
    pub sources: Vec<String>,
    /// `--interval`: the periodic reconcile (its loop ticks once a second, so below 1s is moot).
    pub interval: String,
    /// `--min-event-sync-interval`: how soon after the last run an event may trigger another.
    pub min_event_sync_interval: String,
    /// More arguments, appended last.
    pub extra: Vec<String>,
}

impl Config {
    /// Gateway API routes (HTTP, gRPC, TLS) and ListenerSets, `--events`, a 1s interval.
    pub fn gateway_routes(owner_id: &str) -> Config {
        Config {
            owner_id: owner_id.to_string(),
            sources: ["gateway-httproute", "gateway-grpcroute", "gateway-tlsroute"]
                .map(String::from)
                .to_vec(),
            interval: "1s".into(),
            min_event_sync_interval: "1s".into(),
            extra: vec!["--gateway-listener-sets".into()],
        }
    }

    /// The DNSEndpoint CRD source.
    pub fn dnsendpoints(owner_id: &str) -> Config {
        Config {
            sources: vec!["crd".into()],
            extra: Vec::new(),
            ..Config::gateway_routes(owner_id)
        }
    }

    fn args(&self, kubeconfig: &Path, bind: &Bind, metrics: SocketAddr) -> Vec<String> {
        let mut args = vec![
            format!("--kubeconfig={}", kubeconfig.display()),
            format!("--metrics-address={metrics}"),
            "--log-level=debug".into(),
            "--provider=rfc2136".into(),
            "--rfc2136-host=127.0.0.1".into(),
            format!("--rfc2136-port={}", bind.port),
            format!("--rfc2136-zone={}", bind.zone),
            format!("--rfc2136-tsig-keyname={KEY_NAME}"),
            format!("--rfc2136-tsig-secret-alg={}", bind.algorithm),
            // Without zone transfers external-dns cannot list records (never updates or deletes).
            "--rfc2136-axfr".into(),
            format!("--domain-filter={}", bind.zone),
            "--registry=txt".into(),
            format!("--txt-owner-id={}", self.owner_id),
            "--policy=sync".into(),
            "--events".into(),
            format!("--interval={}", self.interval),
            format!("--min-event-sync-interval={}", self.min_event_sync_interval),
        ];
        args.extend(self.sources.iter().map(|s| format!("--source={s}")));
        args.extend(self.extra.iter().cloned());
        args
    }
}

/// A real external-dns process, killed on drop.
pub struct ExternalDns {
    child: Option<Child>,
    work: tempfile::TempDir,
    pub metrics: SocketAddr,
    pub owner_id: String,
}

impl ExternalDns {
    /// Starts external-dns with `kubeconfig`, writing into `bind`'s zone. Returns at once; see
    /// [`ExternalDns::wait_synced`].
    pub fn start(kubeconfig: &Path, bind: &Bind, config: &Config) -> ExternalDns {
        let work = tempfile::Builder::new()
            .prefix("gateway-dns-extdns-")
            .tempdir()
            .unwrap();
        let metrics = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let log = std::fs::File::create(work.path().join("external-dns.log")).unwrap();
        let child = Command::new(peer().join("bin/external-dns"))
            .args(config.args(kubeconfig, bind, metrics))
            // Every flag can come from the environment; a secret should, as from a Secret.
            .env("EXTERNAL_DNS_RFC2136_TSIG_SECRET", SECRET)
            .current_dir(work.path())
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("external-dns starts");
        ExternalDns {
            child: Some(child),
            work,
            metrics,
            owner_id: config.owner_id.clone(),
        }
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.work.path().join("external-dns.log")).unwrap_or_default()
    }

    /// The last lines of the log, for failure messages.
    pub fn log_tail(&self) -> String {
        let log = self.log();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    #[track_caller]
    pub fn assert_running(&mut self) {
        if let Some(child) = self.child.as_mut()
            && let Ok(Some(status)) = child.try_wait()
        {
            panic!(
                "external-dns exited with {status}; its log ends with:\n{}",
                self.log_tail()
            );
        }
    }

    /// The Unix time of the last reconcile that completed, from its own metrics.
    pub fn last_sync(&self) -> Option<f64> {
        let reply = http(self.metrics, "GET", "/metrics", &[], "").ok()?;
        metric(
            &reply.body,
            "external_dns_controller_last_sync_timestamp_seconds",
        )
    }

    /// Waits until a reconcile completes that began after this call (so it saw everything
    /// applied before), or panics after `limit` with the log: the second completion after now
    /// began after the first ended.
    pub fn wait_synced(&mut self, limit: Duration) {
        let start = Instant::now();
        let since = unix_now();
        let mut first: Option<f64> = None;
        while start.elapsed() < limit {
            match (first, self.last_sync()) {
                (None, Some(at)) if at > since => first = Some(at),
                (Some(earlier), Some(at)) if at > earlier => return,
                _ => {}
            }
            self.assert_running();
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!(
            "external-dns completed no reconcile in {limit:?}; its log ends with:\n{}",
            self.log_tail()
        );
    }

    /// SIGKILL, as a crash would.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for ExternalDns {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `webhook-rfc2136`: external-dns's webhook-provider server around its RFC 2136 provider,
/// writing into `bind`'s zone. Killed on drop.
pub struct WebhookRfc2136 {
    child: Option<Child>,
    work: tempfile::TempDir,
    pub addr: SocketAddr,
}

impl WebhookRfc2136 {
    /// Starts the server on a free loopback port; returns once it listens.
    pub fn start(bind: &Bind) -> WebhookRfc2136 {
        let work = tempfile::Builder::new()
            .prefix("gateway-dns-webhook-rfc2136-")
            .tempdir()
            .unwrap();
        let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let stdout = work.path().join("stdout.log");
        let child = Command::new(peer().join("bin/webhook-rfc2136"))
            .arg(format!("--listen={addr}"))
            .arg(format!("--zone={}", bind.zone))
            .arg("--host=127.0.0.1")
            .arg(format!("--port={}", bind.port))
            .arg(format!("--tsig-keyname={KEY_NAME}"))
            .arg(format!("--tsig-secret-alg={}", bind.algorithm))
            .env("WEBHOOK_RFC2136_TSIG_SECRET", SECRET)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&stdout).unwrap())
            .stderr(std::fs::File::create(work.path().join("stderr.log")).unwrap())
            .spawn()
            .expect("webhook-rfc2136 starts");
        let mut server = WebhookRfc2136 {
            child: Some(child),
            work,
            addr,
        };
        let start = Instant::now();
        while !std::fs::read_to_string(&stdout)
            .unwrap_or_default()
            .contains("listening on")
        {
            if let Some(child) = server.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                panic!("webhook-rfc2136 exited with {status}: {}", server.log());
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "webhook-rfc2136 does not listen: {}",
                server.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.work.path().join("stderr.log")).unwrap_or_default()
    }

    /// One request to the server; `headers` as (name, value).
    pub fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> HttpReply {
        http(self.addr, method, path, headers, body).unwrap_or_else(|e| {
            panic!(
                "{method} {path} to webhook-rfc2136: {e}; its log:\n{}",
                self.log()
            )
        })
    }
}

impl Drop for WebhookRfc2136 {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A plain-HTTP reply.
#[derive(Debug)]
pub struct HttpReply {
    pub status: u16,
    /// Header names lower-cased.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl HttpReply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.body))
    }
}

/// One HTTP/1.0 request (the server closes the connection and never chunks the reply), with a
/// 10 s limit on each socket operation.
pub fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> std::io::Result<HttpReply> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(10))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    stream.set_write_timeout(Some(Duration::from_secs(10)))?;
    let mut request = format!("{method} {path} HTTP/1.0\r\nHost: {addr}\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    stream.write_all(request.as_bytes())?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("no HTTP status line in {head:?}")))?;
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Ok(HttpReply {
        status,
        headers,
        body: body.to_string(),
    })
}

/// The value of an unlabelled series in Prometheus text.
pub fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines().find_map(|line| {
        line.strip_prefix(name)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

pub fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// The route's `status.parents`: `Accepted=True` and `ResolvedRefs=True` for each of its
/// parentRefs, for its current generation.
pub fn accepted_route_status(route: &Value) -> Value {
    let generation = route["metadata"]["generation"].as_i64().unwrap_or(1);
    let parents: Vec<Value> = route["spec"]["parentRefs"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|parent_ref| {
            json!({
                "parentRef": parent_ref,
                "controllerName": CONTROLLER_NAME,
                "conditions": [
                    condition("Accepted", "Accepted", generation),
                    condition("ResolvedRefs", "ResolvedRefs", generation),
                ],
            })
        })
        .collect();
    json!({"status": {"parents": parents}})
}

fn condition(kind: &str, reason: &str, generation: i64) -> Value {
    json!({
        "type": kind, "status": "True", "reason": reason,
        "message": "set by the test Gateway controller",
        "observedGeneration": generation,
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    })
}

/// Accepts route `namespace/name` of `resource` (e.g. `httproutes`) on every parent it
/// references, as the Gateway controller would (the tests have no other controller).
pub fn accept_route(cluster: &ControlPlane, resource: &str, route: &str) {
    let (namespace, name) = route.split_once('/').expect("NAMESPACE/NAME");
    let resource = format!("{resource}.gateway.networking.k8s.io");
    let object: Value = serde_json::from_str(
        &cluster
            .kubectl(&["get", &resource, name, "-n", namespace, "-o", "json"])
            .ok(),
    )
    .unwrap();
    patch_status(
        cluster,
        &resource,
        namespace,
        name,
        &accepted_route_status(&object),
    );
}

/// Accepts every route of the kinds external-dns reads here (HTTP, gRPC, TLS) in the cluster.
pub fn accept_all_routes(cluster: &ControlPlane) {
    for resource in ["httproutes", "grpcroutes", "tlsroutes"] {
        let list = cluster.kubectl(&[
            "get",
            &format!("{resource}.gateway.networking.k8s.io"),
            "-A",
            "-o",
            "json",
        ]);
        let list: Value = serde_json::from_str(&list.ok()).unwrap();
        for route in list["items"].as_array().into_iter().flatten() {
            let (namespace, name) = (
                route["metadata"]["namespace"].as_str().unwrap(),
                route["metadata"]["name"].as_str().unwrap(),
            );
            patch_status(
                cluster,
                &format!("{resource}.gateway.networking.k8s.io"),
                namespace,
                name,
                &accepted_route_status(route),
            );
        }
    }
}

/// Accepts ListenerSet `namespace/name` and each of its listeners, as the Gateway controller
/// would once the parent Gateway admits it.
pub fn accept_listener_set(cluster: &ControlPlane, listener_set: &str) {
    let (namespace, name) = listener_set.split_once('/').expect("NAMESPACE/NAME");
    let resource = "listenersets.gateway.networking.k8s.io";
    let object: Value = serde_json::from_str(
        &cluster
            .kubectl(&["get", resource, name, "-n", namespace, "-o", "json"])
            .ok(),
    )
    .unwrap();
    let generation = object["metadata"]["generation"].as_i64().unwrap_or(1);
    let listeners: Vec<Value> = object["spec"]["listeners"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|listener| {
            json!({
                "name": listener["name"],
                "attachedRoutes": 0,
                "supportedKinds": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"}],
                "conditions": [
                    condition("Accepted", "Accepted", generation),
                    condition("Programmed", "Programmed", generation),
                ],
            })
        })
        .collect();
    let status = json!({"status": {
        "conditions": [
            condition("Accepted", "Accepted", generation),
            condition("Programmed", "Programmed", generation),
        ],
        "listeners": listeners,
    }});
    patch_status(cluster, resource, namespace, name, &status);
}

fn patch_status(
    cluster: &ControlPlane,
    resource: &str,
    namespace: &str,
    name: &str,
    patch: &Value,
) {
    let run: Run = cluster.kubectl(&[
        "patch",
        resource,
        name,
        "-n",
        namespace,
        "--subresource=status",
        "--type=merge",
        "-p",
        &patch.to_string(),
    ]);
    run.ok();
}
