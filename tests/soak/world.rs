//! The parts the soak runs against, and the faults it can inject into them: the real control
//! plane, BIND seeded with foreign records (each replica writing with a TSIG key of its own, so
//! BIND's log names the writer of every UPDATE), and three `serve` replicas on one Lease, each
//! reaching the API server through a proxy of its own.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::checker::{Checked, Checker};
use crate::schedule::Report;
use crate::support::bind::{Bind, SECRET};
use crate::support::cluster::{ControlPlane, Serve};
use crate::support::proxy::Proxy;
use crate::support::records::foreign_zone_lines;

pub const ZONE: &str = "example.com";
pub const GROUP: &str = "gateway.networking.k8s.io";
pub const TEAMS: [&str; 3] = ["team-a", "team-b", "team-c"];
pub const GATEWAYS: [&str; 3] = ["gw0", "gw1", "gw2"];
pub const LISTENER_SET: &str = "extra";
/// The Lease serve's Role allows (manifests/base/role.yaml).
pub const LEASE_NAMESPACE: &str = "gateway-dns";
pub const LEASE_NAME: &str = "gateway-dns";

/// The addresses Gateway `index` may ever have: a range of its own, so that an address in DNS
/// always tells which Gateway it came from.
pub fn address_of(index: usize, n: u8) -> String {
    let n = 100 + n % 150;
    match index {
        0 => format!("203.0.113.{n}"),
        1 => format!("198.51.100.{n}"),
        _ => format!("192.0.2.{n}"),
    }
}

/// Which Gateway an address in DNS belongs to, if any.
pub fn gateway_of(address: &str) -> Option<usize> {
    let (prefix, last) = address.rsplit_once('.')?;
    let last: u8 = last.parse().ok()?;
    if last < 100 {
        return None;
    }
    match prefix {
        "203.0.113" => Some(0),
        "198.51.100" => Some(1),
        "192.0.2" => Some(2),
        _ => None,
    }
}

pub struct Replica {
    pub identity: String,
    pub proxy: Proxy,
    kubeconfig: PathBuf,
    pub serve: Option<Serve>,
}

pub struct World {
    pub cluster: ControlPlane,
    pub bind: Bind,
    pub replicas: Vec<Replica>,
    pub client: kube::Client,
    pub checker: Checker,
    /// The replica whose webhook the API server calls.
    webhook_replica: usize,
    /// Started: a replica started again re-registers the webhook if it serves it.
    running: bool,
}

fn resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: GROUP.into(),
        version: "v1".into(),
        api_version: format!("{GROUP}/v1"),
        kind: kind.into(),
        plural: plural.into(),
    }
}

pub fn route_resource() -> ApiResource {
    resource("HTTPRoute", "httproutes")
}

pub fn gateway_resource() -> ApiResource {
    resource("Gateway", "gateways")
}

pub fn listener_set_resource() -> ApiResource {
    resource("ListenerSet", "listenersets")
}

pub fn namespace_resource() -> ApiResource {
    ApiResource {
        group: String::new(),
        version: "v1".into(),
        api_version: "v1".into(),
        kind: "Namespace".into(),
        plural: "namespaces".into(),
    }
}

pub fn gateway(name: &str, hostname: &str) -> Value {
    json!({
        "apiVersion": format!("{GROUP}/v1"), "kind": "Gateway",
        "metadata": {"namespace": "infra", "name": name},
        "spec": {
            "gatewayClassName": "example",
            "listeners": [{"name": "http", "protocol": "HTTP", "port": 80, "hostname": hostname,
                           "allowedRoutes": {"namespaces": {"from": "All"}}}],
            "allowedListeners": {"namespaces": {"from": "All"}},
        },
    })
}

pub fn listener_set() -> Value {
    json!({
        "apiVersion": format!("{GROUP}/v1"), "kind": "ListenerSet",
        "metadata": {"namespace": "infra", "name": LISTENER_SET},
        "spec": {
            "parentRef": {"name": "gw1", "namespace": "infra"},
            "listeners": [{"name": "extra", "port": 8080, "protocol": "HTTP",
                           "hostname": "*.example.com",
                           "allowedRoutes": {"namespaces": {"from": "All"}}}],
        },
    })
}

/// The serve arguments of a replica writing to `bind` as `identity` (its own TSIG key).
fn replica_args(bind: &Bind, identity: &str) -> Vec<String> {
    [
        "--provider",
        "rfc2136",
        "--zone",
        ZONE,
        "--rfc2136-server",
        &bind.addr().to_string(),
        "--rfc2136-tsig-key-name",
        identity,
        "--interval",
        "5s",
        "--leader-election-lease-duration",
        "4s",
        "--leader-election-renew-deadline",
        "3s",
        "--leader-election-retry-period",
        "1s",
        // Shorter than the default so that a confirmed absence (a kind whose every object was
        // deleted while a watch was down is relisted empty, and held) comes to a quiet point
        // within seconds: more of them per run, and the same rules.
        "--absence-grace",
        "15s",
    ]
    .map(String::from)
    .to_vec()
}

impl World {
    pub async fn start() -> World {
        let cluster = tokio::task::block_in_place(ControlPlane::start);
        tokio::task::block_in_place(|| cluster.install_gateway_dns_rbac());
        let client = cluster.admin_client().await;
        let identities = ["soak-a", "soak-b", "soak-c"];
        let bind = Bind::start_with_keys(ZONE, &foreign_zone_lines(), "hmac-sha256", &identities);
        let namespaces: Api<DynamicObject> = Api::all_with(client.clone(), &namespace_resource());
        for name in ["infra"].into_iter().chain(TEAMS) {
            let object =
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
            namespaces
                .create(
                    &PostParams::default(),
                    &serde_json::from_value(object).unwrap(),
                )
                .await
                .unwrap();
        }
        let gateways: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), "infra", &gateway_resource());
        for (index, name) in GATEWAYS.into_iter().enumerate() {
            gateways
                .create(
                    &PostParams::default(),
                    &serde_json::from_value(gateway(name, "*.example.com")).unwrap(),
                )
                .await
                .unwrap();
            set_addresses(&client, name, &[address_of(index, 0)])
                .await
                .unwrap();
        }
        let mut replicas = Vec::new();
        for identity in identities {
            let api = std::net::SocketAddr::from(([127, 0, 0, 1], cluster.api_port()));
            let proxy = Proxy::start(api).await;
            let kubeconfig = tokio::task::block_in_place(|| {
                cluster.service_account_kubeconfig(
                    LEASE_NAMESPACE,
                    "gateway-dns",
                    Some(proxy.port()),
                )
            });
            replicas.push(Replica {
                identity: identity.to_string(),
                proxy,
                kubeconfig,
                serve: None,
            });
        }
        let checker = Checker::start(&bind, client.clone());
        let mut world = World {
            cluster,
            bind,
            replicas,
            client,
            checker,
            webhook_replica: 0,
            running: false,
        };
        for index in 0..world.replicas.len() {
            world.start_replica(index).await;
        }
        world.register_webhook();
        tokio::task::block_in_place(|| world.cluster.wait_webhook_active("team-a"));
        world.running = true;
        world
    }

    /// Starts (again) replica `index` and waits until it is ready.
    pub async fn start_replica(&mut self, index: usize) {
        let args = replica_args(&self.bind, &self.replicas[index].identity);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let replica = &mut self.replicas[index];
        let serve = Serve::start_with_env(
            &replica.kubeconfig,
            &replica.identity,
            &args,
            &[("GATEWAY_DNS_RFC2136_TSIG_SECRET", SECRET)],
        );
        serve.wait_ready(Duration::from_secs(60)).await;
        replica.serve = Some(serve);
        if index == self.webhook_replica && self.running {
            self.register_webhook();
        }
    }

    /// Points the API server's webhook at the webhook replica (its address and CA change with
    /// each start).
    fn register_webhook(&self) {
        if let Some(serve) = &self.replicas[self.webhook_replica].serve {
            let (url, ca) = (serve.url(), serve.ca_file());
            tokio::task::block_in_place(|| self.cluster.register_webhook(&url, &ca));
        }
    }

    /// The replica that holds the Lease now, if a live one does.
    pub async fn leader(&self) -> Option<usize> {
        let holder = self.checker.holder_now(&self.client).await?;
        self.replicas
            .iter()
            .position(|r| r.identity == holder && r.serve.is_some())
    }

    /// Every object the engine reads, as the API server holds it now, written as one JSON
    /// list into `dir` for `gateway-dns check`.
    pub async fn dump(&self, dir: &std::path::Path) -> Result<PathBuf, kube::Error> {
        let mut items: Vec<Value> = Vec::new();
        for resource in [
            namespace_resource(),
            gateway_resource(),
            listener_set_resource(),
            route_resource(),
        ] {
            let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &resource);
            for object in api.list(&Default::default()).await?.items {
                let mut value = serde_json::to_value(&object).unwrap_or_default();
                value["apiVersion"] = json!(resource.api_version);
                value["kind"] = json!(resource.kind);
                items.push(value);
            }
        }
        let path = dir.join("cluster.json");
        let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
        std::fs::write(&path, serde_json::to_vec(&list).unwrap_or_default()).unwrap();
        Ok(path)
    }

    /// Each route's key (`httproute/ns/name`) and hostnames, as the API server holds them.
    pub async fn routes(&self) -> Result<BTreeMap<String, BTreeSet<String>>, kube::Error> {
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &route_resource());
        let mut routes = BTreeMap::new();
        for route in api.list(&Default::default()).await?.items {
            let key = format!(
                "httproute/{}/{}",
                route.metadata.namespace.unwrap_or_default(),
                route.metadata.name.unwrap_or_default()
            );
            let names = route.data["spec"]["hostnames"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|h| h.as_str().map(String::from))
                .collect();
            routes.insert(key, names);
        }
        Ok(routes)
    }

    /// The objects of each kind the API server holds now: what every replica's index must hold.
    pub async fn counts(&self) -> Result<Vec<(&'static str, usize)>, kube::Error> {
        let mut counts = Vec::new();
        for (kind, resource) in [
            ("Namespace", namespace_resource()),
            ("Gateway", gateway_resource()),
            ("ListenerSet", listener_set_resource()),
            ("HTTPRoute", route_resource()),
        ] {
            let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &resource);
            counts.push((kind, api.list(&Default::default()).await?.items.len()));
        }
        Ok(counts)
    }

    /// The checks of the end, after the last quiet point.
    pub async fn finish(&mut self, report: &Report) -> Checked {
        let mut checked = self.checker.stop(&self.bind);
        checked.absorb(report);
        for replica in &mut self.replicas {
            if let Some(mut serve) = replica.serve.take() {
                serve.kill();
                keep_log(&serve);
            }
        }
        checked
    }
}

/// With `GATEWAY_DNS_SOAK_TRACE=1`, a replica's log outlives it: appended to
/// `soak-<identity>.log` in the temporary directory, to read beside the trace.
fn keep_log(serve: &Serve) {
    if !crate::schedule::trace() {
        return;
    }
    let path = std::env::temp_dir().join(format!("soak-{}.log", serve.identity));
    if let Ok(mut file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
    {
        let _ = std::io::Write::write_all(&mut file, serve.log().as_bytes());
    }
}

/// Sets a Gateway's `status.addresses`.
pub async fn set_addresses(
    client: &kube::Client,
    gateway: &str,
    addresses: &[String],
) -> Result<(), kube::Error> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "infra", &gateway_resource());
    let addresses: Vec<Value> = addresses
        .iter()
        .map(|a| json!({"type": "IPAddress", "value": a}))
        .collect();
    let patch = json!({"status": {"addresses": addresses}});
    api.patch_status(gateway, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
}

/// A server-side apply of `object` by field manager `manager` (one per kind of change, so that
/// leaving a field out of one change removes only what that change set).
pub async fn apply(
    client: &kube::Client,
    manager: &str,
    resource: &ApiResource,
    object: &Value,
) -> Result<(), kube::Error> {
    let namespace = object["metadata"]["namespace"].as_str();
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let api: Api<DynamicObject> = match namespace {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, resource),
        None => Api::all_with(client.clone(), resource),
    };
    api.patch(
        name,
        &PatchParams::apply(manager).force(),
        &Patch::Apply(object),
    )
    .await
    .map(|_| ())
}

/// Whether the API server holds `namespace`/`name` (false too when it cannot say).
pub async fn exists(
    client: &kube::Client,
    resource: &ApiResource,
    namespace: &str,
    name: &str,
) -> bool {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, resource);
    matches!(api.get_opt(name).await, Ok(Some(_)))
}

pub async fn delete(
    client: &kube::Client,
    resource: &ApiResource,
    namespace: &str,
    name: &str,
) -> Result<(), kube::Error> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, resource);
    api.delete(name, &Default::default()).await.map(|_| ())
}

/// A fault, and how to undo it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Fault {
    KillLeader,
    KillFollower,
    ApiServerRestart,
    Compaction,
    BindDown,
    BindRefusing,
    WatchCut,
    WatchStall,
}

impl Fault {
    pub const ALL: [Fault; 8] = [
        Fault::KillLeader,
        Fault::KillFollower,
        Fault::ApiServerRestart,
        Fault::Compaction,
        Fault::BindDown,
        Fault::BindRefusing,
        Fault::WatchCut,
        Fault::WatchStall,
    ];
}

/// What injecting a fault left to undo.
pub enum Undo {
    Nothing,
    StartReplica(usize),
    /// A killed leader comes back once another replica took the Lease, as a new pod would
    /// (a process started at once under the same identity would take its own Lease back).
    StartLeader(usize),
    StartApiServer,
    StartBind,
    AcceptUpdates,
    RestoreProxy(usize),
}

impl World {
    /// Injects `fault` (`pick` chooses among replicas); the returned undo heals it.
    pub async fn inject(&mut self, fault: Fault, pick: usize) -> Undo {
        match fault {
            Fault::KillLeader | Fault::KillFollower => {
                let leader = self.leader().await;
                let live: Vec<usize> = (0..self.replicas.len())
                    .filter(|&i| self.replicas[i].serve.is_some())
                    .collect();
                let target = match (fault, leader) {
                    (Fault::KillLeader, Some(leader)) => Some(leader),
                    (Fault::KillFollower, leader) => {
                        let followers: Vec<usize> = live
                            .iter()
                            .copied()
                            .filter(|&i| Some(i) != leader)
                            .collect();
                        followers.get(pick % followers.len().max(1)).copied()
                    }
                    _ => live.get(pick % live.len().max(1)).copied(),
                };
                let Some(target) = target else {
                    return Undo::Nothing;
                };
                if let Some(mut serve) = self.replicas[target].serve.take() {
                    serve.kill();
                    keep_log(&serve);
                }
                if Some(target) == leader {
                    Undo::StartLeader(target)
                } else {
                    Undo::StartReplica(target)
                }
            }
            Fault::ApiServerRestart => {
                tokio::task::block_in_place(|| self.cluster.stop_apiserver());
                Undo::StartApiServer
            }
            Fault::Compaction => {
                tokio::task::block_in_place(|| self.cluster.compact());
                Undo::Nothing
            }
            Fault::BindDown => {
                // Killed, BIND may lose the UPDATEs it had not yet written to its journal: a
                // name that goes then is the DNS server's loss, which serve must repair.
                self.checker
                    .touched(vec![crate::checker::DNS_LOST.to_string()]);
                self.bind.stop();
                Undo::StartBind
            }
            Fault::BindRefusing => {
                self.bind.set_updates_refused(true);
                Undo::AcceptUpdates
            }
            Fault::WatchCut | Fault::WatchStall => {
                let target = pick % self.replicas.len();
                if fault == Fault::WatchCut {
                    self.replicas[target].proxy.cut();
                } else {
                    self.replicas[target].proxy.stall();
                }
                Undo::RestoreProxy(target)
            }
        }
    }

    pub async fn undo(&mut self, undo: Undo) {
        match undo {
            Undo::Nothing => {}
            Undo::StartReplica(index) => self.start_replica(index).await,
            Undo::StartLeader(index) => {
                let identity = self.replicas[index].identity.clone();
                let start = Instant::now();
                while start.elapsed() < Duration::from_secs(20)
                    && self.checker.holder_now(&self.client).await.as_ref() == Some(&identity)
                {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                self.start_replica(index).await;
            }
            Undo::StartApiServer => {
                tokio::task::block_in_place(|| self.cluster.start_apiserver());
            }
            Undo::StartBind => tokio::task::block_in_place(|| self.bind.resume()),
            Undo::AcceptUpdates => self.bind.set_updates_refused(false),
            Undo::RestoreProxy(index) => self.replicas[index].proxy.restore(),
        }
    }

    /// Waits until DNS equals what `gateway-dns check` computes over the cluster's objects and
    /// every live replica's index holds what the API server holds. Answers how long that took,
    /// or None (with the last difference recorded as a violation) after `limit`.
    pub async fn quiesce(&mut self, limit: Duration) -> Option<Duration> {
        let start = Instant::now();
        let dir = tempfile::tempdir().unwrap();
        let mut last = String::new();
        while start.elapsed() < limit {
            match self.converged(dir.path()).await {
                Ok(()) => {
                    self.checker.quiet_point(self.routes().await.ok());
                    if crate::schedule::trace() && start.elapsed() > Duration::from_secs(5) {
                        eprintln!(
                            "soak {}: quiet after {:.1} s; until then: {last}",
                            crate::schedule::clock(),
                            start.elapsed().as_secs_f64()
                        );
                    }
                    return Some(start.elapsed());
                }
                Err(difference) => {
                    if crate::schedule::trace() && difference != last {
                        eprintln!(
                            "soak {}: +{:.1} s not quiet: {difference}",
                            crate::schedule::clock(),
                            start.elapsed().as_secs_f64()
                        );
                    }
                    last = difference
                }
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        self.checker
            .violation(format!("no quiet point within {limit:?}: {last}"));
        None
    }

    async fn converged(&self, dir: &std::path::Path) -> Result<(), String> {
        let file = self.dump(dir).await.map_err(|e| format!("dump: {e}"))?;
        let expected = crate::checker::oracle(&file)?;
        let zone = crate::checker::transfer(&self.bind)?;
        crate::checker::compare(&expected, &zone)?;
        let counts = self.counts().await.map_err(|e| format!("counts: {e}"))?;
        for replica in &self.replicas {
            let Some(serve) = &replica.serve else {
                continue;
            };
            for (kind, count) in &counts {
                let series = format!("gateway_dns_cache_objects{{kind=\"{kind}\"}}");
                let held = serve.metric(&series).await;
                if held != Some(*count as f64) {
                    return Err(format!(
                        "{} holds {held:?} {kind} objects, the API server {count}",
                        replica.identity
                    ));
                }
            }
        }
        Ok(())
    }
}
