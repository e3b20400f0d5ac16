//! `gateway-dns serve` on the cluster source, end to end: the example cluster lives in the
//! API double, `serve` (a real process, reaching the double through a kubeconfig) answers a
//! real HTTPS AdmissionReview with the expected denial and publishes the oldest claim in its
//! embedded DNS server; deleting the incumbent route in the double turns the same review
//! into an allow and moves the record.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::Value;

use crate::support::apiserver::ApiServer;
use crate::support::dig;
use crate::support::net::free_port;
use crate::support::webhook::{HttpsConnection, examples_dir};

/// The `serve` process, killed on drop.
struct Serve {
    child: Child,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The YAML documents of an example file, as JSON values.
fn documents(file: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(examples_dir().join("cluster").join(file)).unwrap();
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|document| Value::deserialize(document).unwrap())
        .filter(|value| !value.is_null())
        .collect()
}

async fn answer(port: u16, name: &str) -> Vec<String> {
    let name = name.to_string();
    tokio::task::spawn_blocking(move || {
        dig::query(([127, 0, 0, 1], port).into(), &name, "A", false).data("A")
    })
    .await
    .unwrap()
}

/// Polls an async condition every 100 ms for at most `limit`; on failure shows serve's log.
async fn wait_for<F, Fut>(what: &str, limit: Duration, log: &Path, mut ready: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    while start.elapsed() < limit {
        if ready().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let log = std::fs::read_to_string(log).unwrap_or_default();
    let tail: Vec<&str> = log.lines().rev().take(30).collect();
    panic!(
        "timed out waiting for {what}; serve's log ends with:\n{}",
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_on_the_cluster_source_denies_then_allows_as_the_api_changes() {
    let server = ApiServer::start().await;
    // Created in file order, a minute apart: creationTimestamps keep the example's order.
    for document in documents("gateways.yaml")
        .into_iter()
        .chain(documents("routes.yaml"))
    {
        server.create(document).unwrap();
        server.advance_clock(60);
    }

    let work = tempfile::tempdir().unwrap();
    let (https, dns, metrics) = (free_port(), free_port(), free_port());
    let ca = work.path().join("certs/ca.crt");
    let log = work.path().join("serve.log");
    let child = Command::new(env!("CARGO_BIN_EXE_gateway-dns"))
        .arg("serve")
        .arg("--kubeconfig")
        .arg(server.kubeconfig_path())
        .args(["--zone", "example.com", "--discovery-interval", "1s"])
        .args(["--listen", &format!("127.0.0.1:{https}")])
        .args(["--dns-listen", &format!("127.0.0.1:{dns}")])
        .args(["--metrics-listen", &format!("127.0.0.1:{metrics}")])
        .args([
            "--service-name",
            "gateway-dns",
            "--service-namespace",
            "gateway-dns-system",
        ])
        .arg("--local-ca-out")
        .arg(&ca)
        .env("RUST_LOG", "info")
        .env("POD_NAME", "serve-under-test")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("serve starts");
    let _serve = Serve { child };

    // Records come from the cluster: the older b1 keeps the contested name.
    wait_for(
        "a.example.com to resolve",
        Duration::from_secs(30),
        &log,
        || async { answer(dns, "a.example.com").await == ["203.0.113.10"] },
    )
    .await;
    assert_eq!(answer(dns, "b.example.com").await, ["203.0.113.10"]);
    // Only the Lease holder writes DNS: the one replica took the Lease in the double.
    let lease = server
        .get("Lease", "gateway-dns", "gateway-dns")
        .expect("the Lease was created");
    assert_eq!(lease["spec"]["holderIdentity"], "serve-under-test");

    wait_for("the CA file", Duration::from_secs(10), &log, || async {
        ca.exists()
    })
    .await;
    let ca_pem = std::fs::read_to_string(&ca).unwrap();
    let mut connection = HttpsConnection::connect(
        ([127, 0, 0, 1], https).into(),
        &ca_pem,
        "gateway-dns.gateway-dns-system.svc",
    )
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
    server.delete("HTTPRoute", "apps", "b1").unwrap();
    wait_for(
        "b.example.com to move to gw2",
        Duration::from_secs(30),
        &log,
        || async { answer(dns, "b.example.com").await == ["203.0.113.20"] },
    )
    .await;
    let b2 = connection.example_review("b2-conflict.json").await;
    assert_eq!(b2["allowed"], true, "{b2}");
}
