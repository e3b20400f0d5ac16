//! The `kube` source against a real API server: first sync, live changes of every kind, CRDs
//! installed late and removed, the served-version choice, and convergence through network cuts,
//! lost permissions, API server restarts and compacted history (watches resumed with 410 Gone).

use std::path::Path;
use std::time::{Duration, Instant};

use gateway_dns::engine::World as _;
use gateway_dns::index::Index;
use gateway_dns::model::{self, ObjectKind};
use gateway_dns::source::kube::{Config, KindStatus, KubeSource, client};
use serde_json::json;

use crate::api::{ClusterApi, mismatch, namespace_object, object_of, route, take_spec};
use crate::support::cluster::{ControlPlane, GatewayApi, Options, repo_root};
use crate::support::proxy::Proxy;

fn fast_config() -> Config {
    Config {
        discovery_interval: Duration::from_millis(200),
        // Small pages: the initial lists and relists span several requests.
        page_size: 7,
        streaming_lists: true,
        backoff_min: Duration::from_millis(20),
        backoff_max: Duration::from_millis(300),
        recheck_after: Duration::from_secs(2),
        // Short, so that absences confirmed (a CRD removed, every object deleted while a
        // watch was down) show within the tests' limits.
        absence_grace: Duration::from_secs(2),
        absence_rounds: 3,
    }
}

/// Generous for a loaded 2-core machine: nothing here measures speed.
const SETTLE: Duration = Duration::from_secs(20);

/// Runs blocking control-plane work (kubectl, restarts) off the runtime's worker.
fn blocking<R>(work: impl FnOnce() -> R) -> R {
    tokio::task::block_in_place(work)
}

async fn start_source(kubeconfig: &Path, config: Config) -> (Index, KubeSource) {
    let client = client(Some(kubeconfig)).await.unwrap();
    let index = Index::new();
    let source = KubeSource::spawn(client, index.clone(), config);
    (index, source)
}

async fn wait_ready(source: &KubeSource) {
    let mut ready = source.ready();
    let limit = Duration::from_secs(60);
    let synced = tokio::time::timeout(limit, ready.wait_for(|r| *r)).await;
    assert!(
        synced.is_ok_and(|r| r.is_ok()),
        "not ready after {limit:?}: {:?}",
        source.status()
    );
}

fn status_of(source: &KubeSource, kind: ObjectKind) -> KindStatus {
    source.kind_status(kind).unwrap()
}

/// Polls `condition` every 20 ms for at most `limit`.
async fn eventually(limit: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if condition() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    condition()
}

/// Waits until every served kind's watch has failed (what a cut does to each open stream).
async fn every_served_kind_failing(source: &KubeSource) {
    assert!(
        eventually(SETTLE, || source
            .status()
            .iter()
            .all(|s| s.version.is_none() || s.failing_since.is_some()))
        .await,
        "{:#?}",
        source.status()
    );
}

async fn converges(api: &ClusterApi, index: &Index, what: &str) {
    api.converges(index, SETTLE)
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_sync_then_every_kind_follows() {
    let cluster = blocking(ControlPlane::start);
    let api = ClusterApi::new(cluster.admin_client().await);
    api.create(namespace_object("infra", "platform")).await;
    for kind in ObjectKind::ALL
        .into_iter()
        .filter(|k| *k != ObjectKind::Namespace)
    {
        api.create(object_of(kind, "infra", "public", "first"))
            .await;
    }
    api.set_gateway_address("infra", "public", "203.0.113.10")
        .await;
    // A route as kubectl leaves it, with fields a projection must not keep: the last-applied
    // annotation and managedFields the server writes, labels and foreign annotations.
    api.ensure_namespace("shop").await;
    let noisy = "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata:\n  \
                 name: noisy\n  namespace: shop\n  labels:\n    app.kubernetes.io/managed-by: \
                 Helm\n  annotations:\n    team: shop\n    external-dns.kubernetes.io/ttl: \
                 \"60\"\nspec:\n  parentRefs:\n  - name: public\n    namespace: infra\n  \
                 hostnames:\n  - noisy.example.com\n";
    blocking(|| cluster.apply(noisy, &[]).ok());
    let stored = api
        .get(ObjectKind::HTTPRoute, "shop", "noisy")
        .await
        .unwrap();
    assert!(
        stored["metadata"]["annotations"]
            .get("kubectl.kubernetes.io/last-applied-configuration")
            .is_some()
            && stored["metadata"]["managedFields"].is_array(),
        "the API holds the noise: {stored}"
    );

    let (index, source) = start_source(&cluster.kubeconfig(), fast_config()).await;
    wait_ready(&source).await;
    // Ready means listed: the index already holds what the API held.
    assert_eq!(mismatch(&index, &api.state().await.unwrap()), None);
    // kube-apiserver offers streaming lists, so no list was paged.
    assert!(source.streams_lists());
    let snapshot = index.snapshot();
    let noisy = snapshot
        .route(&model::ObjectKey::new(
            ObjectKind::HTTPRoute,
            "shop",
            "noisy",
        ))
        .unwrap();
    // Only what the engine reads stays: no labels (no route selector), only external-dns
    // annotations (no annotation filter).
    let annotations: Vec<_> = noisy.route.meta.annotations.iter().collect();
    assert_eq!(annotations, [("external-dns.kubernetes.io/ttl", "60")]);
    assert!(noisy.route.meta.labels.is_empty());
    assert_eq!(noisy.eval.ttl, Some(60));

    api.ensure_namespace("apps").await;
    for kind in ObjectKind::ALL {
        let namespace = if kind == ObjectKind::Namespace {
            ""
        } else {
            "apps"
        };
        api.create(object_of(kind, namespace, "second", "created"))
            .await;
        converges(&api, &index, &format!("{kind} create")).await;

        let mut changed = api.get(kind, namespace, "second").await.unwrap();
        take_spec(
            &mut changed,
            object_of(kind, namespace, "second", "changed"),
        );
        changed["metadata"]["labels"] = json!({"changed": "yes"});
        api.replace(changed).await;
        if kind == ObjectKind::Gateway {
            api.set_gateway_address("apps", "second", "203.0.113.20")
                .await;
        }
        converges(&api, &index, &format!("{kind} modify")).await;

        api.delete(kind, namespace, "second").await;
        converges(&api, &index, &format!("{kind} delete")).await;
    }
    for status in source.status() {
        assert_eq!(
            status.staleness(Instant::now()),
            Duration::ZERO,
            "{status:?}"
        );
        assert_eq!(status.errors, 0, "{status:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_crds_never_block_readiness_and_are_picked_up_later() {
    let cluster = blocking(|| {
        ControlPlane::start_with(&Options {
            gateway_api: GatewayApi::None,
            ..Options::default()
        })
    });
    let api = ClusterApi::new(cluster.admin_client().await);
    let (index, source) = start_source(&cluster.kubeconfig(), fast_config()).await;
    wait_ready(&source).await;
    for status in source.status() {
        let expected = (status.kind == ObjectKind::Namespace).then_some("v1");
        assert_eq!(
            status.version, expected,
            "no Gateway API installed: {status:?}"
        );
    }
    converges(&api, &index, "Namespaces only").await;

    // The Gateway API appears, without TCPRoute and ListenerSet: watched without a restart.
    blocking(|| cluster.install_crds(GatewayApi::Experimental, &["tcproutes", "listenersets"]));
    api.ensure_namespace("shop").await;
    api.create(route(ObjectKind::HTTPRoute, "shop", "web", "a.example.com"))
        .await;
    converges(&api, &index, "HTTPRoute after its CRD").await;
    assert_eq!(index.len_of(ObjectKind::HTTPRoute), 1);
    assert_eq!(status_of(&source, ObjectKind::TCPRoute).version, None);
    assert!(source.is_ready());

    blocking(|| cluster.install_crds(GatewayApi::Experimental, &["listenersets"]));
    api.ensure_namespace("db").await;
    api.create(route(
        ObjectKind::TCPRoute,
        "db",
        "postgres",
        "db.example.com",
    ))
    .await;
    converges(&api, &index, "TCPRoute after its CRD").await;
    assert!(
        eventually(SETTLE, || {
            let tcp = status_of(&source, ObjectKind::TCPRoute);
            tcp.version == Some("v1") && tcp.synced
        })
        .await,
        "{:?}",
        status_of(&source, ObjectKind::TCPRoute)
    );

    // ListenerSet appears, then its CRD is deleted: its objects leave the index, nothing breaks.
    blocking(|| cluster.install_crds(GatewayApi::Experimental, &[]));
    api.ensure_namespace("infra").await;
    api.create(crate::api::listener_set(
        "infra",
        "extra",
        "public",
        "x.example.net",
    ))
    .await;
    converges(&api, &index, "ListenerSet after its CRD").await;
    assert_eq!(index.len_of(ObjectKind::ListenerSet), 1);
    blocking(|| {
        cluster
            .kubectl(&["delete", "crd", "listenersets.gateway.networking.k8s.io"])
            .ok()
    });
    assert!(eventually(SETTLE, || index.len_of(ObjectKind::ListenerSet) == 0).await);
    assert!(
        eventually(SETTLE, || status_of(&source, ObjectKind::ListenerSet)
            .version
            .is_none())
        .await
    );
    api.create(route(
        ObjectKind::HTTPRoute,
        "shop",
        "after",
        "b.example.com",
    ))
    .await;
    converges(&api, &index, "after the CRD's removal").await;
    assert!(source.is_ready());
}

/// Sets whether `version` of a Gateway API CRD is served, and waits until discovery says so.
fn set_served(cluster: &ControlPlane, kind: ObjectKind, version: &str, served: bool) {
    let crd = format!("{}.{}", kind.plural(), kind.group());
    let text = cluster.kubectl(&["get", "crd", &crd, "-o", "json"]).ok();
    let definition: serde_json::Value = serde_json::from_str(&text).unwrap();
    let position = definition["spec"]["versions"]
        .as_array()
        .unwrap()
        .iter()
        .position(|v| v["name"] == version)
        .unwrap_or_else(|| panic!("{crd} has no version {version}"));
    let patch = json!([{"op": "replace", "path": format!("/spec/versions/{position}/served"), "value": served}]);
    cluster
        .kubectl(&[
            "patch",
            "crd",
            &crd,
            "--type=json",
            "-p",
            &patch.to_string(),
        ])
        .ok();
    let group_version = format!("/apis/{}/{version}", kind.group());
    let start = Instant::now();
    loop {
        let run = cluster.kubectl(&["get", "--raw", &group_version]);
        let listed = run.success
            && serde_json::from_str::<serde_json::Value>(&run.stdout).is_ok_and(|list| {
                list["resources"]
                    .as_array()
                    .is_some_and(|r| r.iter().any(|r| r["name"] == kind.plural()))
            });
        if listed == served {
            return;
        }
        assert!(
            start.elapsed() < SETTLE,
            "{group_version} still {}lists {}",
            if served { "un" } else { "" },
            kind.plural()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_newest_served_version_is_watched() {
    let cluster = blocking(ControlPlane::start);
    // An older installation: TCPRoute only at v1alpha2, HTTPRoute only at v1beta1, TLSRoute at
    // v1alpha3 and v1alpha2 (the newer of two old versions wins).
    blocking(|| {
        set_served(&cluster, ObjectKind::TCPRoute, "v1", false);
        set_served(&cluster, ObjectKind::HTTPRoute, "v1", false);
        set_served(&cluster, ObjectKind::TLSRoute, "v1", false);
    });
    let api = ClusterApi::new(cluster.admin_client().await);
    for namespace in ["db", "shop", "edge"] {
        api.ensure_namespace(namespace).await;
    }
    let at = |mut object: serde_json::Value, version: &str| {
        object["apiVersion"] = json!(format!("gateway.networking.k8s.io/{version}"));
        object
    };
    api.create(at(
        route(ObjectKind::TCPRoute, "db", "pg", "db.example.com"),
        "v1alpha2",
    ))
    .await;
    api.create(at(
        route(ObjectKind::HTTPRoute, "shop", "web", "web.example.com"),
        "v1beta1",
    ))
    .await;
    api.create(at(
        route(ObjectKind::TLSRoute, "edge", "tls", "tls.example.com"),
        "v1alpha3",
    ))
    .await;

    let (index, source) = start_source(&cluster.kubeconfig(), fast_config()).await;
    wait_ready(&source).await;
    let watched = |kind| status_of(&source, kind).version;
    assert_eq!(watched(ObjectKind::TCPRoute), Some("v1alpha2"));
    assert_eq!(watched(ObjectKind::HTTPRoute), Some("v1beta1"));
    assert_eq!(watched(ObjectKind::TLSRoute), Some("v1alpha3"));
    assert_eq!(watched(ObjectKind::UDPRoute), Some("v1"));
    assert_eq!(index.len_of(ObjectKind::TCPRoute), 1);
    assert_eq!(index.len_of(ObjectKind::HTTPRoute), 1);
    assert_eq!(index.len_of(ObjectKind::TLSRoute), 1);
    assert_eq!(mismatch(&index, &api.state().await.unwrap()), None);

    // The CRD is upgraded to serve v1 again: the source moves to v1 and stays in sync.
    blocking(|| set_served(&cluster, ObjectKind::TCPRoute, "v1", true));
    assert!(
        eventually(SETTLE, || watched(ObjectKind::TCPRoute) == Some("v1")
            && status_of(&source, ObjectKind::TCPRoute).synced)
        .await,
        "{:?}",
        status_of(&source, ObjectKind::TCPRoute)
    );
    api.create(route(
        ObjectKind::TCPRoute,
        "db",
        "mysql",
        "mysql.example.com",
    ))
    .await;
    converges(&api, &index, "TCPRoute at v1").await;
    assert_eq!(index.len_of(ObjectKind::TCPRoute), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_watch_keeps_the_last_state_reports_staleness_and_recovers() {
    let cluster = blocking(ControlPlane::start);
    let api = ClusterApi::new(cluster.admin_client().await);
    api.ensure_namespace("shop").await;
    api.create(route(ObjectKind::HTTPRoute, "shop", "web", "a.example.com"))
        .await;
    // The source alone reaches the API server through a proxy that the test cuts.
    let proxy = Proxy::start(([127, 0, 0, 1], cluster.api_port()).into()).await;
    let (index, source) =
        start_source(&cluster.admin_kubeconfig_via(proxy.port()), fast_config()).await;
    wait_ready(&source).await;

    proxy.cut();
    api.create(route(
        ObjectKind::HTTPRoute,
        "shop",
        "unseen",
        "b.example.com",
    ))
    .await;
    every_served_kind_failing(&source).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let http = status_of(&source, ObjectKind::HTTPRoute);
    assert!(
        http.staleness(Instant::now()) >= Duration::from_secs(1),
        "{http:?}"
    );
    assert!(http.errors > 0, "{http:?}");
    assert_eq!(
        index.len_of(ObjectKind::HTTPRoute),
        1,
        "the last good state is still served"
    );
    assert!(source.is_ready(), "readiness stays once synced");
    assert!(
        !source.in_sync(),
        "a failing watch closes the DNS write gate"
    );

    proxy.restore();
    converges(&api, &index, "after the cut").await;
    assert_eq!(index.len_of(ObjectKind::HTTPRoute), 2);
    assert!(
        eventually(SETTLE, || source
            .status()
            .iter()
            .all(|s| s.staleness(Instant::now()) == Duration::ZERO))
        .await,
        "{:#?}",
        source.status()
    );
    assert!(
        eventually(SETTLE, || source.in_sync()).await,
        "back in sync: DNS writes may resume"
    );
}

/// `manifests/base/clusterrole.yaml` without read access to `plural`.
fn cluster_role_without(plural: &str) -> String {
    let path = repo_root().join("manifests/base/clusterrole.yaml");
    let role = std::fs::read_to_string(&path).unwrap();
    let line = format!("      - {plural}\n");
    assert!(role.contains(&line), "{} lists no {plural}", path.display());
    role.replace(&line, "")
}

/// Waits until the API server's authorizer gives the installed ServiceAccount `verb` on
/// `resource` (or refuses it).
fn wait_permission(cluster: &ControlPlane, verb: &str, resource: &str, allowed: bool) {
    let start = Instant::now();
    loop {
        let run = cluster.kubectl(&[
            "auth",
            "can-i",
            verb,
            resource,
            "--all-namespaces",
            "--as=system:serviceaccount:gateway-dns:gateway-dns",
        ]);
        if run.stdout.trim() == if allowed { "yes" } else { "no" } {
            return;
        }
        assert!(start.elapsed() < SETTLE, "can-i {verb} {resource}: {run:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kind_the_source_may_no_longer_read_fails_alone_and_recovers() {
    let cluster = blocking(ControlPlane::start);
    blocking(|| cluster.install_gateway_dns_rbac());
    let api = ClusterApi::new(cluster.admin_client().await);
    api.ensure_namespace("shop").await;
    api.create(route(ObjectKind::HTTPRoute, "shop", "web", "a.example.com"))
        .await;
    // The source runs as serve's own ServiceAccount, through a proxy that can break its streams.
    let proxy = Proxy::start(([127, 0, 0, 1], cluster.api_port()).into()).await;
    let identity = blocking(|| {
        cluster.service_account_kubeconfig("gateway-dns", "gateway-dns", Some(proxy.port()))
    });
    let (index, source) = start_source(&identity, fast_config()).await;
    wait_ready(&source).await;

    // HTTPRoutes become unreadable. An open watch outlives the change (permissions are checked
    // when a request starts), so the streams are broken once: every kind re-watches, and only
    // HTTPRoute is refused (403).
    let httproutes = "httproutes.gateway.networking.k8s.io";
    blocking(|| {
        cluster.apply(&cluster_role_without("httproutes"), &[]).ok();
        wait_permission(&cluster, "watch", httproutes, false);
    });
    proxy.cut();
    every_served_kind_failing(&source).await;
    proxy.restore();
    api.create(route(
        ObjectKind::HTTPRoute,
        "shop",
        "unseen",
        "b.example.com",
    ))
    .await;
    api.create(route(
        ObjectKind::GRPCRoute,
        "shop",
        "grpc",
        "g.example.com",
    ))
    .await;
    assert!(
        eventually(SETTLE, || index.len_of(ObjectKind::GRPCRoute) == 1).await,
        "other kinds follow the API"
    );
    assert!(
        eventually(SETTLE, || source
            .status()
            .iter()
            .filter(|s| s.kind != ObjectKind::HTTPRoute)
            .all(|s| s.failing_since.is_none()))
        .await,
        "other kinds recovered: {:#?}",
        source.status()
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let http = status_of(&source, ObjectKind::HTTPRoute);
    assert!(http.failing_since.is_some(), "{http:?}");
    assert!(
        http.staleness(Instant::now()) >= Duration::from_secs(1),
        "{http:?}"
    );
    assert_eq!(
        index.len_of(ObjectKind::HTTPRoute),
        1,
        "the last good state is still served"
    );
    assert!(source.is_ready(), "readiness stays once synced");
    assert!(
        !source.in_sync(),
        "a failing watch closes the DNS write gate"
    );

    // Read access comes back: the kind catches up without any other fault clearing.
    blocking(|| {
        cluster.install_gateway_dns_rbac();
        wait_permission(&cluster, "watch", httproutes, true);
    });
    converges(&api, &index, "after the permission returned").await;
    assert_eq!(index.len_of(ObjectKind::HTTPRoute), 2);
    assert!(
        eventually(SETTLE, || status_of(&source, ObjectKind::HTTPRoute)
            .staleness(Instant::now())
            == Duration::ZERO)
        .await
    );
    assert!(
        eventually(SETTLE, || source.in_sync()).await,
        "back in sync: DNS writes may resume"
    );
}

/// After a cut, a kind with nothing to deliver (no change in the cluster) is in sync again by
/// its resumed watch alone: the recheck that would relist it is put out of reach, so a replica
/// whose watches blipped writes DNS again at once, not after a recheck.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_kind_recovering_from_a_fault_is_in_sync_again_by_its_resumed_watch() {
    let cluster = blocking(ControlPlane::start);
    let api = ClusterApi::new(cluster.admin_client().await);
    api.ensure_namespace("dns").await;
    api.create(route(ObjectKind::UDPRoute, "dns", "udp", "u.example.com"))
        .await;
    let proxy = Proxy::start(([127, 0, 0, 1], cluster.api_port()).into()).await;
    let config = Config {
        recheck_after: Duration::from_secs(3600),
        ..fast_config()
    };
    let (index, source) = start_source(&cluster.admin_kubeconfig_via(proxy.port()), config).await;
    wait_ready(&source).await;
    let lists_before: Vec<u64> = source.status().iter().map(|s| s.lists).collect();

    // The streams break and re-watch at once; then nothing changes in the cluster, so no event
    // can show that a watch is healthy again.
    proxy.cut();
    every_served_kind_failing(&source).await;
    proxy.restore();
    assert!(
        eventually(SETTLE, || source.status().iter().all(|s| {
            s.failing_since.is_none() && s.staleness(Instant::now()) == Duration::ZERO
        }))
        .await,
        "{:#?}",
        source.status()
    );
    for (status, before) in source.status().iter().zip(&lists_before) {
        assert_eq!(status.lists, *before, "resumed, not relisted: {status:?}");
    }
    assert!(source.in_sync());
    assert_eq!(mismatch(&index, &api.state().await.unwrap()), None);
}

/// A small deterministic generator (xorshift64*), seeded per run and printed on failure.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The faults of the random run, each as a real cluster or network has it.
#[derive(Clone, Copy, Debug)]
enum Fault {
    /// The source's link is cut for twenty mutations; its watches resume where they were.
    Cut,
    /// Cut likewise, and etcd compacted before the link returns: every resume gets 410 Gone.
    CutAndCompact,
    /// kube-apiserver stops and starts again (etcd keeps the state).
    Restart,
    /// kube-apiserver stops, etcd is compacted meanwhile, and it starts again.
    RestartAndCompact,
}

/// Each fault comes up about equally often, restarts less (each takes seconds).
const FAULT_CYCLE: [Fault; 6] = [
    Fault::Cut,
    Fault::CutAndCompact,
    Fault::Restart,
    Fault::Cut,
    Fault::CutAndCompact,
    Fault::RestartAndCompact,
];

/// One random mutation of `kind`/`namespace`/`name`: created when absent, else deleted (one
/// time in three) or given new content. Gateways get a new address through their status.
async fn mutate(
    api: &ClusterApi,
    rng: &mut Rng,
    step: u32,
    kind: ObjectKind,
    namespace: &str,
    name: &str,
) -> Result<(), kube::Error> {
    let variant = rng.below(5);
    let address = format!("203.0.113.{}", 10 + variant);
    let variant = format!("v{variant}");
    match api.try_get(kind, namespace, name).await? {
        None => {
            api.try_create(&object_of(kind, namespace, name, &variant))
                .await?;
        }
        Some(_) if rng.below(3) == 0 => return api.try_delete(kind, namespace, name).await,
        Some(mut current) => {
            take_spec(&mut current, object_of(kind, namespace, name, &variant));
            current["metadata"]["labels"] = json!({"step": step.to_string()});
            api.try_replace(&current).await?;
        }
    }
    if kind == ObjectKind::Gateway {
        api.try_set_gateway_address(namespace, name, &address)
            .await?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_random_mutations_with_faults_end_equal_to_the_api() {
    let seed = std::env::var("GATEWAY_DNS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    println!("seed {seed} (rerun with GATEWAY_DNS_SEED={seed})");
    let mut rng = Rng(seed);
    // Without the watch cache, watches are served from etcd: a resume from a compacted
    // revision is answered 410 Gone, as on a server whose cache window has passed it.
    let cluster = blocking(|| {
        ControlPlane::start_with(&Options {
            apiserver_args: vec!["--watch-cache=false".into()],
            ..Options::default()
        })
    });
    let mut api = ClusterApi::new(cluster.admin_client().await);
    let namespaces = ["a", "b", "c"];
    for namespace in namespaces {
        api.ensure_namespace(namespace).await;
    }
    let proxy = Proxy::start(([127, 0, 0, 1], cluster.api_port()).into()).await;
    let (index, source) =
        start_source(&cluster.admin_kubeconfig_via(proxy.port()), fast_config()).await;
    wait_ready(&source).await;

    let mut faults = Vec::new();
    let mut cut: Option<Fault> = None;
    let mut failed_writes = 0u32;
    for step in 0..1000u32 {
        let kind = ObjectKind::ALL[rng.below(ObjectKind::ALL.len() as u64) as usize];
        // Namespaces of their own: the ones holding objects are never deleted.
        let namespace = if kind == ObjectKind::Namespace {
            ""
        } else {
            namespaces[rng.below(3) as usize]
        };
        let name = format!("o{}", rng.below(12));
        match mutate(&api, &mut rng, step, kind, namespace, &name).await {
            Ok(()) => {}
            // A connection the restarted server closed: the next step reads the truth again.
            Err(kube::Error::Api(status)) => {
                panic!("step {step}, {kind} {namespace}/{name} (seed {seed}): {status:?}")
            }
            Err(_) => failed_writes += 1,
        }
        if step % 40 == 19
            && let Some(fault) = cut.take()
        {
            if matches!(fault, Fault::CutAndCompact) {
                blocking(|| cluster.compact());
            }
            proxy.restore();
        }
        if step % 40 == 39 {
            let fault = FAULT_CYCLE[(faults.len() + seed as usize) % FAULT_CYCLE.len()];
            faults.push(fault);
            match fault {
                Fault::Cut | Fault::CutAndCompact => {
                    proxy.cut();
                    cut = Some(fault);
                }
                Fault::Restart | Fault::RestartAndCompact => {
                    let downtime = Duration::from_millis(rng.below(300));
                    blocking(|| {
                        cluster.stop_apiserver();
                        std::thread::sleep(downtime);
                        if matches!(fault, Fault::RestartAndCompact) {
                            cluster.compact();
                        }
                        cluster.start_apiserver();
                    });
                    api = ClusterApi::new(cluster.admin_client().await);
                }
            }
        }
        if rng.below(10) == 0 {
            tokio::time::sleep(Duration::from_millis(rng.below(20))).await;
        }
    }
    proxy.restore();
    api.converges(&index, Duration::from_secs(60))
        .await
        .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    let status = source.status();
    let lists: u64 = status.iter().map(|s| s.lists).sum();
    let errors: u64 = status.iter().map(|s| s.errors).sum();
    println!(
        "faults {faults:?}; lists {lists}, watch errors {errors}, writes lost to restarts \
         {failed_writes}"
    );
    assert!(
        lists > ObjectKind::ALL.len() as u64,
        "faults forced relists (seed {seed})"
    );
    assert!(errors > 0, "faults surfaced as errors (seed {seed})");
    // Settled: stays equal (no late stale event undoes the state).
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        mismatch(&index, &api.state().await.unwrap()),
        None,
        "seed {seed}"
    );
}
