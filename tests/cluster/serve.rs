//! `gateway-dns serve` on the cluster source, end to end: the example cluster (`examples/cluster`)
//! is applied with kubectl to a real API server, with each Gateway's addresses written through
//! the status subresource as its controller would. `serve` (the real binary, as serve's
//! least-privilege ServiceAccount) answers a real HTTPS AdmissionReview with the expected denial
//! and publishes the oldest claim in its embedded DNS server; deleting the incumbent route turns
//! the same review into an allow and moves the record.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use crate::support::cluster::{ControlPlane, Serve, repo_root};
use crate::support::webhook::HttpsConnection;

/// The YAML documents of an example file, each as text and as JSON.
fn documents(file: &str) -> Vec<(String, Value)> {
    let path = repo_root().join("examples/cluster").join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    text.split("\n---\n")
        .map(|document| {
            let value = Value::deserialize(serde_yaml_ng::Deserializer::from_str(document))
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            (document.to_string(), value)
        })
        .filter(|(_, value)| !value.is_null())
        .collect()
}

fn name_of(object: &Value) -> String {
    let metadata = &object["metadata"];
    match metadata["namespace"].as_str() {
        Some(namespace) => format!("{namespace}/{}", metadata["name"].as_str().unwrap()),
        None => metadata["name"].as_str().unwrap().to_string(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_on_the_cluster_source_denies_then_allows_as_the_api_changes() {
    let cluster = tokio::task::block_in_place(|| {
        let cluster = ControlPlane::start();
        cluster.install_gateway_dns_rbac();
        cluster
    });
    // The Gateways, with the addresses the example gives their status (the API server drops a
    // status sent with the object; a controller writes it).
    let mut address_of = BTreeMap::new();
    tokio::task::block_in_place(|| {
        for (text, object) in documents("gateways.yaml") {
            cluster.apply(&text, &[]).ok();
            if object["kind"] == "Gateway" {
                let addresses: Vec<&str> = object["status"]["addresses"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|a| a["value"].as_str().unwrap())
                    .collect();
                cluster.gateway_address(&name_of(&object), &addresses);
                address_of.insert(name_of(&object), addresses[0].to_string());
            }
        }
        // The routes in file order, each in a later second than the one before: the API server
        // sets creationTimestamp (1 s resolution), and the example's order of age must hold.
        let mut created = Vec::new();
        for (text, object) in documents("routes.yaml") {
            cluster.apply(&text, &[]).ok();
            if object["kind"] == "HTTPRoute" {
                let stamp = cluster
                    .kubectl(&[
                        "get",
                        "httproute",
                        object["metadata"]["name"].as_str().unwrap(),
                        "-n",
                        object["metadata"]["namespace"].as_str().unwrap(),
                        "-o",
                        "jsonpath={.metadata.creationTimestamp}",
                    ])
                    .ok();
                created.push(stamp);
            }
            std::thread::sleep(Duration::from_millis(1100));
        }
        assert!(
            created.is_sorted() && created.windows(2).all(|w| w[0] != w[1]),
            "{created:?}"
        );
    });
    let gw1 = address_of["infra/gw1"].as_str();
    let gw2 = address_of["infra/gw2"].as_str();

    let identity = tokio::task::block_in_place(|| {
        cluster.service_account_kubeconfig("gateway-dns", "gateway-dns", None)
    });
    let serve = Serve::start(&identity, "serve-under-test", &["--zone", "example.com"]);
    serve.wait_ready(Duration::from_secs(60)).await;

    // Records come from the cluster: the older b1 keeps the contested name.
    let limit = Duration::from_secs(30);
    serve.wait_answer("a.example.com", "A", &[gw1], limit).await;
    serve.wait_answer("b.example.com", "A", &[gw1], limit).await;
    // Only the Lease holder writes DNS: the one replica took the Lease.
    let holder = tokio::task::block_in_place(|| {
        cluster
            .kubectl(&[
                "get",
                "lease",
                "gateway-dns",
                "-n",
                "gateway-dns",
                "-o",
                "jsonpath={.spec.holderIdentity}",
            ])
            .ok()
    });
    assert_eq!(holder, serve.identity);

    let ca_pem = std::fs::read_to_string(serve.ca_file()).unwrap();
    let mut connection = HttpsConnection::connect(serve.webhook, &ca_pem, "localhost")
        .await
        .unwrap();
    let b2 = connection.example_review("b2-conflict.json").await;
    assert_eq!(b2["allowed"], false, "{b2}");
    assert_eq!(
        b2["status"]["details"]["causes"][0]["reason"],
        "HostnameConflict"
    );

    // The incumbent goes away in the cluster: b2's Gateway now gets the name, and the same
    // review is allowed.
    tokio::task::block_in_place(|| {
        cluster
            .kubectl(&["delete", "httproute", "b1", "-n", "apps"])
            .ok()
    });
    serve.wait_answer("b.example.com", "A", &[gw2], limit).await;
    let b2 = connection.example_review("b2-conflict.json").await;
    assert_eq!(b2["allowed"], true, "{b2}");
    serve.assert_running();
}
