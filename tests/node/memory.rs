//! 10,000 routes through the webhook into the cluster: every pod indexes them, publishes their
//! names (embedded DNS), and stays under the chart's memory limit. The RSS is each pod's own
//! `process_resident_memory_bytes`.

use std::time::{Duration, Instant};

use futures::StreamExt as _;
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};

use crate::support::cluster::client_for;
use crate::{NAMESPACE, Node};

const ROUTES: usize = 10_000;
const NAMESPACE_OF_ROUTES: &str = "load";

/// The series' value in a Prometheus text exposition.
fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find(|line| line.starts_with(series) && line[series.len()..].starts_with(' '))
        .and_then(|line| line.rsplit(' ').next())
        .and_then(|value| value.parse().ok())
}

fn metrics_of(ip: &str) -> String {
    let url = format!("http://{ip}:9090/metrics");
    let out = std::process::Command::new("curl")
        .args(["-sf", "--max-time", "5", &url])
        .output()
        .expect("curl runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn bytes_of(quantity: &str) -> f64 {
    let units = [
        ("Ki", 1024.0),
        ("Mi", 1024.0 * 1024.0),
        ("Gi", 1024.0 * 1024.0 * 1024.0),
    ];
    for (suffix, factor) in units {
        if let Some(number) = quantity.strip_suffix(suffix) {
            return number.parse::<f64>().expect("a quantity") * factor;
        }
    }
    quantity.parse().expect("a quantity in bytes")
}

pub fn at_10k_routes_the_pods_stay_under_the_charts_memory_limit(node: &Node) {
    node.kubectl(&["create", "namespace", NAMESPACE_OF_ROUTES])
        .ok();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let started = Instant::now();
    runtime.block_on(async {
        let client = client_for(&node.kubeconfig()).await;
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(
            "gateway.networking.k8s.io",
            "v1",
            "HTTPRoute",
        ));
        let api: Api<DynamicObject> = Api::namespaced_with(client, NAMESPACE_OF_ROUTES, &resource);
        let created = futures::stream::iter(0..ROUTES)
            .map(|i| {
                let api = api.clone();
                async move {
                    let route: DynamicObject = serde_json::from_value(serde_json::json!({
                        "apiVersion": "gateway.networking.k8s.io/v1",
                        "kind": "HTTPRoute",
                        "metadata": {"name": format!("r{i}"), "namespace": NAMESPACE_OF_ROUTES},
                        "spec": {
                            "parentRefs": [{"name": "public", "namespace": "infra"}],
                            "hostnames": [format!("r{i}.example.com")],
                        },
                    }))
                    .expect("a route");
                    api.create(&PostParams::default(), &route).await
                }
            })
            .buffer_unordered(16)
            .filter(|result| std::future::ready(result.is_err()))
            .collect::<Vec<_>>()
            .await;
        assert!(
            created.is_empty(),
            "routes refused: {:?}",
            &created[..created.len().min(3)]
        );
    });
    println!(
        "{ROUTES} routes created through the webhook in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let pods = node.pods();
    node.wait_for(
        "every pod indexes the routes",
        Duration::from_secs(300),
        || {
            pods.iter().all(|(_, ip, _)| {
                metric(
                    &metrics_of(ip),
                    "gateway_dns_cache_objects{kind=\"HTTPRoute\"}",
                )
                .is_some_and(|n| n >= ROUTES as f64)
            })
        },
    );
    let limit = node
        .kubectl(&[
            "get",
            "deployment",
            crate::RELEASE,
            "-n",
            NAMESPACE,
            "-o",
            "jsonpath={.spec.template.spec.containers[0].resources.limits.memory}",
        ])
        .ok();
    let limit = bytes_of(limit.trim());
    let mut figures = Vec::new();
    for (name, ip, _) in &pods {
        let text = metrics_of(ip);
        let rss = metric(&text, "process_resident_memory_bytes").expect("an RSS");
        figures.push(format!("{name} {:.1} MiB", rss / 1048576.0));
        assert!(rss < limit, "{name}: {rss} bytes, limit {limit}");
    }
    println!(
        "at {ROUTES} routes (embedded DNS, test build): {}; limit {:.0} MiB",
        figures.join(", "),
        limit / 1048576.0
    );
    // No pod was killed for memory on the way.
    let restarts = node
        .kubectl(&[
            "get",
            "pods",
            "-n",
            NAMESPACE,
            "-o",
            "jsonpath={range .items[*]}{.status.containerStatuses[0].restartCount}{\"\\n\"}{end}",
        ])
        .ok();
    assert!(
        restarts.lines().all(|n| n.trim() == "0"),
        "restarts: {restarts}"
    );
    node.kubectl(&["delete", "namespace", NAMESPACE_OF_ROUTES, "--wait=false"])
        .ok();
}
