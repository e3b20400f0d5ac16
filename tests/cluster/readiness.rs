//! Readiness on the real API server (ARCHITECTURE.md, "Readiness"): a Gateway's controller
//! writes `Programmed=False` through the status subresource; its address leaves a name another
//! Gateway still serves and stays, with a Warning Event, for a name it alone serves; True again
//! brings it back.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::cluster::{ControlPlane, Serve};

const OBJECTS: &str = "
apiVersion: v1
kind: Namespace
metadata: {name: infra}
---
apiVersion: v1
kind: Namespace
metadata: {name: apps}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: east, namespace: infra}
spec:
  gatewayClassName: example
  listeners:
  - {name: http, protocol: HTTP, port: 80, allowedRoutes: {namespaces: {from: All}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: west, namespace: infra}
spec:
  gatewayClassName: example
  listeners:
  - {name: http, protocol: HTTP, port: 80, allowedRoutes: {namespaces: {from: All}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: app-east, namespace: apps}
spec:
  parentRefs: [{name: east, namespace: infra}]
  hostnames: [app.example.com]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: app-west, namespace: apps}
spec:
  parentRefs: [{name: west, namespace: infra}]
  hostnames: [app.example.com, west-only.example.com]
";

const EAST: &str = "192.0.2.10";
const WEST: &str = "192.0.2.20";

/// Writes the Gateway's Programmed condition as its controller would (status subresource).
fn set_programmed(cluster: &ControlPlane, gateway: &str, status: &str) {
    let generation = cluster
        .kubectl(&[
            "get",
            "gateway",
            gateway,
            "-n",
            "infra",
            "-o",
            "jsonpath={.metadata.generation}",
        ])
        .ok();
    let generation: i64 = generation.trim().parse().unwrap_or(1);
    let reason = if status == "True" {
        "Programmed"
    } else {
        "AddressNotUsable"
    };
    let patch = json!({"status": {"conditions": [{
        "type": "Programmed",
        "status": status,
        "reason": reason,
        "message": "set by the test",
        "observedGeneration": generation,
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }]}});
    cluster
        .kubectl(&[
            "patch",
            "gateway",
            gateway,
            "-n",
            "infra",
            "--subresource=status",
            "--type=merge",
            "-p",
            &patch.to_string(),
        ])
        .ok();
}

/// gateway-dns's Warning Events with `reason` about the object `name` in `namespace`.
fn warnings(cluster: &ControlPlane, namespace: &str, name: &str, reason: &str) -> usize {
    let json = cluster
        .kubectl(&["get", "events.events.k8s.io", "-n", namespace, "-o", "json"])
        .ok();
    let list: Value = serde_json::from_str(&json).unwrap_or_default();
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| {
            e["regarding"]["name"] == name && e["reason"] == reason && e["type"] == "Warning"
        })
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_that_is_not_programmed_leaves_a_shared_name_and_keeps_a_sole_one() {
    let cluster = tokio::task::block_in_place(|| {
        let cluster = ControlPlane::start();
        cluster.install_gateway_dns_rbac();
        cluster.apply(OBJECTS, &[]).ok();
        cluster.gateway_address("infra/east", &[EAST]);
        cluster.gateway_address("infra/west", &[WEST]);
        cluster
    });
    let identity = tokio::task::block_in_place(|| {
        cluster.service_account_kubeconfig("gateway-dns", "gateway-dns", None)
    });
    let serve = Serve::start(
        &identity,
        "serve-readiness",
        &["--zone", "example.com", "--shared-name", "app.example.com"],
    );
    serve.wait_ready(Duration::from_secs(60)).await;
    let limit = Duration::from_secs(30);
    serve
        .wait_answer("app.example.com", "A", &[EAST, WEST], limit)
        .await;
    serve
        .wait_answer("west-only.example.com", "A", &[WEST], limit)
        .await;

    tokio::task::block_in_place(|| set_programmed(&cluster, "west", "False"));
    serve
        .wait_answer("app.example.com", "A", &[EAST], limit)
        .await;
    // The name west alone serves keeps its answer, and both the route and the Gateway are told.
    assert_eq!(serve.dig("west-only.example.com", "A").await, [WEST]);
    let start = Instant::now();
    while start.elapsed() < limit {
        let told = tokio::task::block_in_place(|| {
            warnings(&cluster, "apps", "app-west", "GatewayNotProgrammed") > 0
                && warnings(&cluster, "infra", "west", "GatewayNotProgrammed") > 0
        });
        if told {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        start.elapsed() < limit,
        "no GatewayNotProgrammed Events on the route and the Gateway; serve's log ends with:\n{}",
        serve.log_tail()
    );
    assert!(
        serve.log().contains("GatewayNotProgrammed"),
        "{}",
        serve.log_tail()
    );
    assert_eq!(serve.dig("west-only.example.com", "A").await, [WEST]);

    tokio::task::block_in_place(|| set_programmed(&cluster, "west", "True"));
    serve
        .wait_answer("app.example.com", "A", &[EAST, WEST], limit)
        .await;
    serve.assert_running();
}
