//! The `kube` source against the API double: first sync, live changes, missing and late CRDs,
//! served-version choice, and convergence under injected faults.

use std::time::{Duration, Instant};

use gateway_dns::engine::World;
use gateway_dns::index::Index;
use gateway_dns::model::{self, Object, ObjectKind};
use gateway_dns::source::kube::{Config, KubeSource, client};
use serde_json::{Value, json};

use crate::support::apiserver::{
    ApiServer, GATEWAY_GROUP, gateway_api_type, gateway_api_v1_6_experimental, lease_type,
    namespace_type,
};

fn fast_config() -> Config {
    Config {
        discovery_interval: Duration::from_millis(200),
        page_size: 7,
        backoff_min: Duration::from_millis(20),
        backoff_max: Duration::from_millis(300),
        recheck_after: Duration::from_secs(2),
    }
}

/// Ready means listed; each watch opens just after. A fault test waits for them: a watch request
/// still on its way when the streams are cut would open afterwards and escape the fault.
async fn every_kind_watching(server: &ApiServer, source: &KubeSource) -> bool {
    let watched = source
        .status()
        .iter()
        .filter(|s| s.version.is_some())
        .count();
    eventually(Duration::from_secs(5), || server.open_watches() == watched).await
}

async fn start_source(server: &ApiServer, config: Config) -> (Index, KubeSource) {
    let client = client(Some(server.kubeconfig_path())).await.unwrap();
    let index = Index::new();
    let source = KubeSource::spawn(client, index.clone(), config);
    (index, source)
}

async fn wait_ready(source: &KubeSource, limit: Duration) -> bool {
    let mut ready = source.ready();
    tokio::time::timeout(limit, ready.wait_for(|r| *r))
        .await
        .is_ok_and(|r| r.is_ok())
}

/// Polls `condition` every 10 ms for at most `limit`.
async fn eventually(limit: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if condition() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    condition()
}

fn namespace_object(name: &str, team: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {"team": team}}})
}

fn gateway(namespace: &str, name: &str, hostname: &str, address: &str) -> Value {
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"namespace": namespace, "name": name},
        "spec": {
            "gatewayClassName": "example",
            "listeners": [{"name": "http", "port": 80, "protocol": "HTTP", "hostname": hostname,
                           "allowedRoutes": {"namespaces": {"from": "All"}}}],
            "allowedListeners": {"namespaces": {"from": "All"}},
        },
        "status": {"addresses": [{"type": "IPAddress", "value": address}]},
    })
}

fn listener_set(namespace: &str, name: &str, parent: &str, hostname: &str) -> Value {
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "ListenerSet",
        "metadata": {"namespace": namespace, "name": name},
        "spec": {
            "parentRef": {"name": parent, "namespace": "infra"},
            "listeners": [{"name": "extra", "port": 443, "protocol": "HTTPS", "hostname": hostname}],
        },
    })
}

fn route(kind: ObjectKind, namespace: &str, name: &str, hostname: &str) -> Value {
    let mut spec = json!({"parentRefs": [{"name": "public", "namespace": "infra"}]});
    let mut metadata = json!({"namespace": namespace, "name": name});
    if kind.has_hostnames() {
        spec["hostnames"] = json!([hostname]);
    } else {
        metadata["annotations"] = json!({"external-dns.kubernetes.io/hostname": hostname});
    }
    json!({"apiVersion": format!("{GATEWAY_GROUP}/v1"), "kind": kind.kind(), "metadata": metadata, "spec": spec})
}

fn object_of(kind: ObjectKind, namespace: &str, name: &str, variant: &str) -> Value {
    match kind {
        ObjectKind::Namespace => namespace_object(name, variant),
        ObjectKind::Gateway => gateway(
            namespace,
            name,
            &format!("*.{variant}.example.com"),
            "203.0.113.10",
        ),
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
fn take_spec(object: &mut Value, replacement: Value) {
    if let Some(spec) = replacement.get("spec") {
        object["spec"] = spec.clone();
    }
}

/// Compares the index with the double: same keys per kind, same projections.
fn mismatch(index: &Index, server: &ApiServer) -> Option<String> {
    let snapshot = index.snapshot();
    for kind in ObjectKind::ALL {
        let objects = server.objects(kind.kind());
        if snapshot.len_of(kind) != objects.len() {
            return Some(format!(
                "{kind}: index has {}, API has {}",
                snapshot.len_of(kind),
                objects.len()
            ));
        }
        for value in objects {
            let expected = match model::decode_value(&value) {
                Ok(Some(object)) => object,
                other => {
                    return Some(format!(
                        "cannot decode the double's object {value}: {other:?}"
                    ));
                }
            };
            let key = expected.key();
            let same = match &expected {
                Object::Namespace(ns) => snapshot.namespace(&key.name) == Some(&**ns),
                Object::Gateway(gw) => snapshot.gateway(&key.namespace, &key.name) == Some(gw),
                Object::ListenerSet(ls) => {
                    snapshot.listener_set(&key.namespace, &key.name) == Some(ls)
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

async fn converges(index: &Index, server: &ApiServer, limit: Duration) -> Result<(), String> {
    let ok = eventually(limit, || mismatch(index, server).is_none()).await;
    if ok {
        Ok(())
    } else {
        Err(mismatch(index, server).unwrap_or_default())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_sync_then_every_kind_follows_within_a_second() {
    let server = ApiServer::start().await;
    server
        .create(namespace_object("infra", "platform"))
        .unwrap();
    for kind in ObjectKind::ALL
        .into_iter()
        .filter(|k| *k != ObjectKind::Namespace)
    {
        server
            .create(object_of(kind, "infra", "public", "first"))
            .unwrap();
    }
    // Fields a projection must not keep.
    let mut noisy = route(ObjectKind::HTTPRoute, "shop", "noisy", "noisy.example.com");
    noisy["metadata"]["annotations"] = json!({
        "kubectl.kubernetes.io/last-applied-configuration": "{\"big\": true}",
        "team": "shop",
        "external-dns.kubernetes.io/ttl": "60",
    });
    noisy["metadata"]["labels"] = json!({"app.kubernetes.io/managed-by": "Helm"});
    noisy["metadata"]["managedFields"] =
        json!([{"manager": "kubectl", "operation": "Apply", "fieldsV1": {"f:spec": {}}}]);
    server.create(noisy).unwrap();

    let (index, source) = start_source(&server, fast_config()).await;
    assert!(
        wait_ready(&source, Duration::from_secs(10)).await,
        "ready after the first sync"
    );
    assert_eq!(mismatch(&index, &server), None);
    let snapshot = index.snapshot();
    let noisy = snapshot
        .route(&model::ObjectKey::new(
            ObjectKind::HTTPRoute,
            "shop",
            "noisy",
        ))
        .unwrap();
    assert_eq!(
        noisy
            .route
            .meta
            .annotations
            .get("kubectl.kubernetes.io/last-applied-configuration"),
        None
    );
    // Only what the engine reads stays: no labels (no route selector), only external-dns
    // annotations (no annotation filter).
    let annotations: Vec<_> = noisy.route.meta.annotations.iter().collect();
    assert_eq!(annotations, [("external-dns.kubernetes.io/ttl", "60")]);
    assert!(noisy.route.meta.labels.is_empty());
    assert_eq!(noisy.eval.ttl, Some(60));

    for kind in ObjectKind::ALL {
        let namespace = if kind == ObjectKind::Namespace {
            ""
        } else {
            "apps"
        };
        server
            .create(object_of(kind, namespace, "second", "created"))
            .unwrap();
        converges(&index, &server, Duration::from_secs(1))
            .await
            .unwrap_or_else(|e| panic!("{kind} create: {e}"));

        let mut changed = server.get(kind.kind(), namespace, "second").unwrap();
        take_spec(
            &mut changed,
            object_of(kind, namespace, "second", "changed"),
        );
        changed["metadata"]["labels"] = json!({"changed": "yes"});
        server.replace(changed).unwrap();
        converges(&index, &server, Duration::from_secs(1))
            .await
            .unwrap_or_else(|e| panic!("{kind} modify: {e}"));

        server.delete(kind.kind(), namespace, "second").unwrap();
        converges(&index, &server, Duration::from_secs(1))
            .await
            .unwrap_or_else(|e| panic!("{kind} delete: {e}"));
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
    let server = ApiServer::builder()
        .without("TCPRoute")
        .without("ListenerSet")
        .start()
        .await;
    server
        .create(route(ObjectKind::HTTPRoute, "shop", "web", "a.example.com"))
        .unwrap();
    let (index, source) = start_source(&server, fast_config()).await;
    assert!(
        wait_ready(&source, Duration::from_secs(10)).await,
        "absent CRDs do not block readiness"
    );
    let status = source.status();
    let tcp = status
        .iter()
        .find(|s| s.kind == ObjectKind::TCPRoute)
        .unwrap();
    assert_eq!(tcp.version, None);
    assert_eq!(index.len_of(ObjectKind::HTTPRoute), 1);

    // The CRD appears: watched without a restart.
    server.install(gateway_api_type(
        "TCPRoute",
        "tcproutes",
        &["v1", "v1alpha2"],
    ));
    server
        .create(route(
            ObjectKind::TCPRoute,
            "db",
            "postgres",
            "db.example.com",
        ))
        .unwrap();
    converges(&index, &server, Duration::from_secs(5))
        .await
        .unwrap();
    assert!(
        eventually(Duration::from_secs(2), || source.status().iter().any(|s| s
            .kind
            == ObjectKind::TCPRoute
            && s.version == Some("v1")
            && s.synced))
        .await
    );

    // ListenerSet appears, then is removed again: its objects leave the index, nothing breaks.
    server.install(gateway_api_type("ListenerSet", "listenersets", &["v1"]));
    server
        .create(listener_set("infra", "extra", "public", "x.example.net"))
        .unwrap();
    converges(&index, &server, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(index.len_of(ObjectKind::ListenerSet), 1);
    server.uninstall("ListenerSet");
    assert!(
        eventually(Duration::from_secs(5), || index
            .len_of(ObjectKind::ListenerSet)
            == 0)
        .await
    );
    server
        .create(route(
            ObjectKind::HTTPRoute,
            "shop",
            "after",
            "b.example.com",
        ))
        .unwrap();
    converges(&index, &server, Duration::from_secs(2))
        .await
        .unwrap();
    assert!(source.is_ready());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_newest_served_version_is_watched() {
    // An older installation: TCPRoute only at v1alpha2, HTTPRoute only at v1beta1.
    let server = ApiServer::builder()
        .resources(vec![
            namespace_type(),
            lease_type(),
            gateway_api_type("Gateway", "gateways", &["v1"]),
            gateway_api_type("HTTPRoute", "httproutes", &["v1beta1"]),
            gateway_api_type("TCPRoute", "tcproutes", &["v1alpha2"]),
        ])
        .start()
        .await;
    let mut old_route = route(ObjectKind::TCPRoute, "db", "pg", "db.example.com");
    old_route["apiVersion"] = json!("gateway.networking.k8s.io/v1alpha2");
    server.create(old_route).unwrap();
    let mut http = route(ObjectKind::HTTPRoute, "shop", "web", "web.example.com");
    http["apiVersion"] = json!("gateway.networking.k8s.io/v1beta1");
    server.create(http).unwrap();

    let (index, source) = start_source(&server, fast_config()).await;
    assert!(wait_ready(&source, Duration::from_secs(10)).await);
    assert_eq!(index.len_of(ObjectKind::TCPRoute), 1);
    assert_eq!(index.len_of(ObjectKind::HTTPRoute), 1);
    let requests = server.requests();
    assert!(
        requests
            .iter()
            .any(|r| r.starts_with("GET /apis/gateway.networking.k8s.io/v1alpha2/tcproutes?"))
    );
    assert!(
        requests
            .iter()
            .any(|r| r.starts_with("GET /apis/gateway.networking.k8s.io/v1beta1/httproutes?"))
    );

    // The CRD is upgraded to serve v1 as well: the source moves to v1 and stays in sync.
    server.install(gateway_api_type(
        "TCPRoute",
        "tcproutes",
        &["v1", "v1alpha2"],
    ));
    assert!(
        eventually(Duration::from_secs(5), || server.requests().iter().any(
            |r| r.starts_with("GET /apis/gateway.networking.k8s.io/v1/tcproutes?")
        ))
        .await
    );
    server
        .create(route(
            ObjectKind::TCPRoute,
            "db",
            "mysql",
            "mysql.example.com",
        ))
        .unwrap();
    converges(&index, &server, Duration::from_secs(2))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_watch_keeps_the_last_state_reports_staleness_and_recovers() {
    let server = ApiServer::start().await;
    server
        .create(route(ObjectKind::HTTPRoute, "shop", "web", "a.example.com"))
        .unwrap();
    let (index, source) = start_source(&server, fast_config()).await;
    assert!(wait_ready(&source, Duration::from_secs(10)).await);
    let http_status = |source: &KubeSource| {
        source
            .status()
            .into_iter()
            .find(|s| s.kind == ObjectKind::HTTPRoute)
            .unwrap()
    };

    assert!(every_kind_watching(&server, &source).await);

    // Every HTTPRoute request fails from now on; the open watch is cut.
    server.fail_next_matching(1_000_000, 500, Some("/httproutes"));
    server.drop_watches();
    server
        .create(route(
            ObjectKind::HTTPRoute,
            "shop",
            "unseen",
            "b.example.com",
        ))
        .unwrap();
    assert!(
        eventually(Duration::from_secs(5), || http_status(&source)
            .failing_since
            .is_some())
        .await
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let status = http_status(&source);
    assert!(
        status.staleness(Instant::now()) >= Duration::from_secs(1),
        "{status:?}"
    );
    assert!(status.errors > 0);
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
    // Other kinds are unaffected.
    server
        .create(route(
            ObjectKind::GRPCRoute,
            "shop",
            "grpc",
            "g.example.com",
        ))
        .unwrap();
    assert!(
        eventually(Duration::from_secs(2), || index
            .len_of(ObjectKind::GRPCRoute)
            == 1)
        .await
    );

    server.clear_failures();
    converges(&index, &server, Duration::from_secs(5))
        .await
        .unwrap();
    assert!(
        eventually(Duration::from_secs(5), || http_status(&source)
            .staleness(Instant::now())
            == Duration::ZERO)
        .await
    );
    assert!(
        eventually(Duration::from_secs(5), || source.in_sync()).await,
        "back in sync: DNS writes may resume"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_kind_recovering_from_a_fault_is_confirmed_by_a_relist() {
    let server = ApiServer::start().await;
    server
        .create(route(ObjectKind::UDPRoute, "dns", "udp", "u.example.com"))
        .unwrap();
    let (index, source) = start_source(&server, fast_config()).await;
    assert!(wait_ready(&source, Duration::from_secs(10)).await);
    let udp = |source: &KubeSource| {
        source
            .status()
            .into_iter()
            .find(|s| s.kind == ObjectKind::UDPRoute)
            .unwrap()
    };
    let lists_before = udp(&source).lists;
    assert!(every_kind_watching(&server, &source).await);

    // One failed re-watch after a dropped stream, then nothing changes in the cluster.
    server.fail_next_matching(1, 500, Some("udproutes?&watch=true"));
    server.drop_watches();
    assert!(
        eventually(Duration::from_secs(5), || udp(&source)
            .failing_since
            .is_some())
        .await,
        "{:?}",
        udp(&source)
    );
    // Within recheck_after (2 s) plus a tick the kind is relisted and known in sync again.
    assert!(
        eventually(Duration::from_secs(6), || {
            let s = udp(&source);
            s.failing_since.is_none() && s.staleness(Instant::now()) == Duration::ZERO
        })
        .await,
        "{:?}",
        udp(&source)
    );
    assert!(udp(&source).lists > lists_before);
    assert_eq!(mismatch(&index, &server), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_object_is_skipped_and_the_stream_goes_on() {
    let server = ApiServer::start().await;
    let mut broken = route(ObjectKind::HTTPRoute, "shop", "broken", "x.example.com");
    broken["spec"]["hostnames"] = json!(5);
    server.create(broken).unwrap();
    server
        .create(route(
            ObjectKind::HTTPRoute,
            "shop",
            "fine",
            "a.example.com",
        ))
        .unwrap();
    let (index, source) = start_source(&server, fast_config()).await;
    assert!(wait_ready(&source, Duration::from_secs(10)).await);
    let http = |source: &KubeSource| {
        source
            .status()
            .into_iter()
            .find(|s| s.kind == ObjectKind::HTTPRoute)
            .unwrap()
    };
    let fine = model::ObjectKey::new(ObjectKind::HTTPRoute, "shop", "fine");
    assert_eq!(index.len_of(ObjectKind::HTTPRoute), 1);
    assert!(index.snapshot().route(&fine).is_some());
    assert_eq!(http(&source).decode_errors, 1);

    // A valid object turned unreadable leaves the index (as a relist would skip it) ...
    let mut fine_now = server.get("HTTPRoute", "shop", "fine").unwrap();
    fine_now["spec"]["parentRefs"] = json!("not a list");
    server.replace(fine_now).unwrap();
    assert!(
        eventually(Duration::from_secs(2), || index
            .len_of(ObjectKind::HTTPRoute)
            == 0)
        .await
    );
    assert_eq!(http(&source).decode_errors, 2);
    // ... and the stream goes on: later changes still arrive.
    server
        .create(route(
            ObjectKind::HTTPRoute,
            "shop",
            "later",
            "b.example.com",
        ))
        .unwrap();
    server.apply(route(
        ObjectKind::HTTPRoute,
        "shop",
        "fine",
        "a.example.com",
    ));
    assert!(
        eventually(Duration::from_secs(2), || index
            .len_of(ObjectKind::HTTPRoute)
            == 2)
        .await
    );
    assert_eq!(http(&source).errors, 0);
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
    let server = ApiServer::builder()
        .resources([vec![namespace_type()], gateway_api_v1_6_experimental()].concat())
        .start()
        .await;
    let (index, source) = start_source(&server, fast_config()).await;
    assert!(wait_ready(&source, Duration::from_secs(10)).await);

    let namespaces = ["a", "b", "c"];
    let mut faults = Vec::new();
    for step in 0..1000u32 {
        let kind = ObjectKind::ALL[rng.below(ObjectKind::ALL.len() as u64) as usize];
        let namespace = if kind == ObjectKind::Namespace {
            ""
        } else {
            namespaces[rng.below(3) as usize]
        };
        let name = format!("o{}", rng.below(12));
        let variant = format!("v{}", rng.below(5));
        match server.get(kind.kind(), namespace, &name) {
            None => {
                server
                    .create(object_of(kind, namespace, &name, &variant))
                    .unwrap();
            }
            Some(_) if rng.below(3) == 0 => {
                server.delete(kind.kind(), namespace, &name).unwrap();
            }
            Some(mut current) => {
                take_spec(&mut current, object_of(kind, namespace, &name, &variant));
                current["metadata"]["labels"] = json!({"step": step.to_string()});
                server.replace(current).unwrap();
            }
        }
        if step % 40 == 39 {
            // Every kind of fault comes up about equally often, in a seed-dependent order.
            let fault = (faults.len() as u64 + seed) % 6;
            faults.push(fault);
            match fault {
                0 => server.drop_watches(),
                1 => {
                    // History lost: resuming watches get 410 and relist.
                    server.compact();
                    server.drop_watches();
                }
                2 => {
                    server
                        .restart(Duration::from_millis(rng.below(300)), rng.below(2) == 0)
                        .await
                }
                3 => server.fail_next(
                    1 + rng.below(5) as usize,
                    [500, 503, 429][rng.below(3) as usize],
                ),
                4 => {
                    server.set_delay(Duration::from_millis(30));
                    server.drop_watches();
                }
                _ => server.end_watches(),
            }
        }
        if step % 40 == 19 {
            server.set_delay(Duration::ZERO);
        }
        if rng.below(10) == 0 {
            tokio::time::sleep(Duration::from_millis(rng.below(20))).await;
        }
    }
    server.set_delay(Duration::ZERO);
    converges(&index, &server, Duration::from_secs(30))
        .await
        .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    let status = source.status();
    let lists: u64 = status.iter().map(|s| s.lists).sum();
    let errors: u64 = status.iter().map(|s| s.errors).sum();
    println!("faults {faults:?}; lists {lists}, watch errors {errors}");
    assert!(
        lists > ObjectKind::ALL.len() as u64,
        "faults forced relists (seed {seed})"
    );
    assert!(errors > 0, "faults surfaced as errors (seed {seed})");
    // Settled: stays equal (no late stale event undoes the state).
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(mismatch(&index, &server), None, "seed {seed}");
}
