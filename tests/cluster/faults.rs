//! `serve` through the faults a real control plane produces: a kube-apiserver restart (every
//! watch drops, then resumes), restarts one after another while names are queried without a
//! pause, a history compacted past what serve saw (410 Gone, then a relist that drops what was
//! deleted meanwhile), and the Gateway API CRDs arriving only after serve started (without
//! ListenerSets at all).

use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::cluster::{ControlPlane, GatewayApi, Options, Serve, fixture};
use crate::support::objects;
use crate::support::proxy::Proxy;

const LIMIT: Duration = Duration::from_secs(30);

/// Gateway infra/`name` (`public` or `internal`) for `*.example.com`.
fn gateway(name: &str) -> String {
    fixture(&format!("gateway-{name}.yaml"))
}

fn route(name: &str, hostname: &str, gateway: &str) -> String {
    let parents = json!([objects::parent("infra", gateway)]);
    objects::yaml(&objects::http_route("apps", name, parents, &[hostname]))
}

/// serve as the manifests' ServiceAccount, reaching the API server on `port` (its own, or a
/// proxy's).
async fn start_serve(cluster: &ControlPlane, identity: &str, port: Option<u16>) -> Serve {
    cluster.install_gateway_dns_rbac();
    let kubeconfig = cluster.service_account_kubeconfig("gateway-dns", "gateway-dns", port);
    let serve = Serve::start(&kubeconfig, identity, &["--zone", "example.com"]);
    serve.wait_ready(Duration::from_secs(60)).await;
    serve
}

/// Polls until `series` reads `value` in serve's metrics.
async fn wait_metric(serve: &Serve, series: &str, value: f64) {
    let start = Instant::now();
    let mut last = None;
    while start.elapsed() < LIMIT {
        last = serve.metric(series).await;
        if last == Some(value) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!(
        "{series}: wanted {value}, have {last:?}; serve's log:\n{}",
        serve.log_tail()
    );
}

/// A control plane with Gateway infra/public at 203.0.113.10 and route `name` for `hostname`
/// through it.
fn cluster_with_route(name: &str, hostname: &str) -> ControlPlane {
    let cluster = ControlPlane::start();
    cluster.apply(&fixture("namespaces.yaml"), &[]).ok();
    cluster.apply(&gateway("public"), &[]).ok();
    cluster.gateway_address("infra/public", &["203.0.113.10"]);
    cluster.apply(&route(name, hostname, "public"), &[]).ok();
    cluster
}

fn count(text: &str, needle: &str) -> usize {
    text.matches(needle).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_resume_after_an_apiserver_restart() {
    let cluster = cluster_with_route("before", "before.example.com");
    let serve = start_serve(&cluster, "restart", None).await;
    serve
        .wait_answer("before.example.com", "A", &["203.0.113.10"], LIMIT)
        .await;

    cluster.stop_apiserver();
    // Without the API server serve keeps answering from its last good state.
    tokio::time::sleep(Duration::from_secs(2)).await;
    serve.assert_running();
    assert_eq!(serve.dig("before.example.com", "A").await, ["203.0.113.10"]);
    cluster.start_apiserver();

    // A change made after the restart arrives through the resumed watches, and meanwhile the
    // names that never changed keep answering: nothing the restart interrupted is taken away
    // while the server comes back.
    cluster
        .apply(&route("after", "after.example.com", "public"), &[])
        .ok();
    let started = std::time::Instant::now();
    while serve.dig("after.example.com", "A").await != ["203.0.113.10"] {
        assert_eq!(
            serve.dig("before.example.com", "A").await,
            ["203.0.113.10"],
            "an unchanged name stopped answering after the restart"
        );
        assert!(
            started.elapsed() < LIMIT,
            "the change after the restart never arrived"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        count(&serve.log(), "its objects leave the index"),
        0,
        "a kind left the index during the restart"
    );
    cluster
        .kubectl(&["delete", "httproute", "before", "-n", "apps"])
        .ok();
    serve
        .wait_answer("before.example.com", "A", &[], LIMIT)
        .await;
    wait_metric(
        &serve,
        "gateway_dns_source_staleness_seconds{source=\"HTTPRoute\"}",
        0.0,
    )
    .await;
    let log = serve.log();
    assert!(
        count(&log, "watch error") > 0,
        "the restart never reached serve's watches"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_keep_answering_through_apiserver_restarts_one_after_another() {
    let cluster = cluster_with_route("steady", "steady.example.com");
    // Discovery every second, so that a round falls in the outage, fails, and is retried
    // (with backoff) right as the new server starts answering.
    cluster.install_gateway_dns_rbac();
    let kubeconfig = cluster.service_account_kubeconfig("gateway-dns", "gateway-dns", None);
    let serve = Serve::start(
        &kubeconfig,
        "restarts",
        &["--zone", "example.com", "--discovery-interval", "1s"],
    );
    serve.wait_ready(Duration::from_secs(60)).await;
    serve
        .wait_answer("steady.example.com", "A", &["203.0.113.10"], LIMIT)
        .await;

    // Each restart leaves a window in which the new kube-apiserver answers discovery before it
    // has registered every CRD; a name must never stop answering across it. One thread asks
    // without a pause while the other restarts.
    const RESTARTS: usize = 4;
    let dns = serve.dns;
    let answers = tokio::task::block_in_place(|| {
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|scope| {
            let asker = scope.spawn(|| {
                let mut answers: Vec<Vec<String>> = Vec::new();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    answers.push(
                        crate::support::dig::query(dns, "steady.example.com", "A", false).data("A"),
                    );
                    std::thread::sleep(Duration::from_millis(20));
                }
                answers
            });
            for _ in 0..RESTARTS {
                cluster.stop_apiserver();
                std::thread::sleep(Duration::from_millis(1500));
                cluster.start_apiserver();
                std::thread::sleep(Duration::from_millis(1500));
            }
            // Past the restarts by more than a discovery round or two.
            std::thread::sleep(Duration::from_secs(3));
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            asker.join().unwrap()
        })
    });
    let wrong: Vec<&Vec<String>> = answers.iter().filter(|a| *a != &["203.0.113.10"]).collect();
    assert!(answers.len() > 20, "only {} queries", answers.len());
    assert!(
        wrong.is_empty(),
        "{} of {} answers were wrong: {:?}\n{}",
        wrong.len(),
        answers.len(),
        wrong.first(),
        serve.log_tail()
    );
    let log = serve.log();
    assert_eq!(
        count(&log, "its objects leave the index"),
        0,
        "a kind left the index:\n{}",
        serve.log_tail()
    );
    let metrics = serve.metrics_text().await;
    assert!(
        !metrics
            .lines()
            .any(|l| l.contains("decision=\"confirmed\"") && !l.ends_with(" 0")),
        "an absence was confirmed:\n{metrics}"
    );
    // And the cluster is followed again afterwards.
    cluster
        .apply(&route("after", "after.example.com", "public"), &[])
        .ok();
    serve
        .wait_answer("after.example.com", "A", &["203.0.113.10"], LIMIT)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compacted_history_forces_a_relist_that_ends_equal_to_the_api() {
    let cluster = ControlPlane::start();
    cluster.apply(&fixture("namespaces.yaml"), &[]).ok();
    cluster.apply(&gateway("public"), &[]).ok();
    cluster.apply(&gateway("internal"), &[]).ok();
    cluster.gateway_address("infra/public", &["203.0.113.10"]);
    cluster.gateway_address("infra/internal", &["198.51.100.20"]);
    for (name, host) in [("stays", "stays"), ("goes", "goes"), ("moves", "moves")] {
        cluster
            .apply(&route(name, &format!("{host}.example.com"), "public"), &[])
            .ok();
    }
    // serve reaches the API server through a proxy the test can cut, so the API moves on while
    // serve cannot see it, as in a network partition.
    let proxy = Proxy::start(([127, 0, 0, 1], cluster.api_port()).into()).await;
    let serve = start_serve(&cluster, "compaction", Some(proxy.port())).await;
    serve
        .wait_answer("moves.example.com", "A", &["203.0.113.10"], LIMIT)
        .await;

    proxy.cut();
    cluster
        .kubectl(&["delete", "httproute", "goes", "-n", "apps"])
        .ok();
    cluster
        .apply(&route("moves", "moves.example.com", "internal"), &[])
        .ok();
    cluster
        .apply(&route("new", "new.example.com", "public"), &[])
        .ok();
    cluster.gateway_address("infra/public", &["203.0.113.11"]);
    // Every revision serve saw is compacted away, and the restarted API server's watch cache
    // starts after them too: serve's watches can only resume with 410 Gone.
    cluster.compact();
    cluster.stop_apiserver();
    cluster.start_apiserver();
    // Meanwhile serve answers from its last good state.
    assert_eq!(serve.dig("goes.example.com", "A").await, ["203.0.113.10"]);
    proxy.restore();

    serve.wait_answer("goes.example.com", "A", &[], LIMIT).await;
    serve
        .wait_answer("moves.example.com", "A", &["198.51.100.20"], LIMIT)
        .await;
    serve
        .wait_answer("new.example.com", "A", &["203.0.113.11"], LIMIT)
        .await;
    serve
        .wait_answer("stays.example.com", "A", &["203.0.113.11"], LIMIT)
        .await;
    // The index holds exactly what the API server holds.
    for (kind, plural) in [("HTTPRoute", "httproutes"), ("Gateway", "gateways")] {
        let listed = cluster
            .kubectl(&["get", plural, "-A", "-o", "name"])
            .ok()
            .lines()
            .count();
        wait_metric(
            &serve,
            &format!("gateway_dns_cache_objects{{kind=\"{kind}\"}}"),
            listed as f64,
        )
        .await;
    }
    // The HTTPRoute watch resumed into 410 Gone, then relisted.
    let log = serve.log();
    let lines: Vec<&str> = log.lines().collect();
    let http_routes = |line: &&str| line.contains("\"kind\":\"HTTPRoute\"");
    let gone = lines
        .iter()
        .position(|l| http_routes(l) && l.contains("too old resource version"))
        .unwrap_or_else(|| {
            panic!(
                "the HTTPRoute watch never met 410 Gone:\n{}",
                serve.log_tail()
            )
        });
    let relisted = lines
        .iter()
        .rposition(|l| http_routes(l) && l.contains("\"relisted\""))
        .unwrap_or_else(|| panic!("HTTPRoutes never relisted:\n{}", serve.log_tail()));
    assert!(relisted > gone, "the relist came before the 410");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crds_installed_after_serve_started_are_picked_up_without_listener_sets() {
    let cluster = ControlPlane::start_with(&Options {
        gateway_api: GatewayApi::None,
        ..Options::default()
    });
    // Ready with nothing but Namespaces: a missing CRD is not an error.
    let serve = start_serve(&cluster, "late-crds", None).await;
    cluster.install_crds(GatewayApi::Experimental, &["listenersets"]);
    cluster.register_webhook(&serve.url(), &serve.ca_file());
    cluster.apply(&fixture("namespaces.yaml"), &[]).ok();
    cluster.apply(&gateway("public"), &[]).ok();
    cluster.gateway_address("infra/public", &["203.0.113.10"]);
    cluster.wait_webhook_active("apps");
    let applied = cluster.apply(&route("web", "late.example.com", "public"), &[]);
    assert!(
        applied.success && !applied.stderr.contains("Warning"),
        "{applied:?}"
    );
    serve
        .wait_answer("late.example.com", "A", &["203.0.113.10"], LIMIT)
        .await;
    // The webhook sees the late kinds too: a conflicting claim is denied.
    cluster.apply(&gateway("internal"), &[]).ok();
    cluster.gateway_address("infra/internal", &["198.51.100.20"]);
    wait_metric(&serve, "gateway_dns_cache_objects{kind=\"Gateway\"}", 2.0).await;
    let denied = cluster.apply(&route("other", "late.example.com", "internal"), &[]);
    assert!(
        !denied.success && denied.stderr.contains("HostnameConflict"),
        "{denied:?}"
    );
    let log = serve.log();
    assert!(log.contains("CRD now installed"), "{}", serve.log_tail());
    assert!(
        !log.contains("\"kind\":\"ListenerSet\",\"version\""),
        "ListenerSets are not served, yet serve watched them:\n{}",
        serve.log_tail()
    );
}
