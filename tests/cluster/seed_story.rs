//! The story gateway-dns exists for, told through `kubectl apply` to a real API server: team A
//! gets DNS for its name, team B's claim on the same name through another Gateway is denied
//! with our reason and one-line message, a hostname outside the listener is accepted with a
//! warning, and `--dry-run=server` gets the same answers while changing nothing.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::support::cluster::{ControlPlane, Run, Serve, seed};

/// What `gateway-dns check` says about `extra` applied over a dump of the cluster
/// (`kubectl get ... -o yaml`, as docs/troubleshooting.md tells users to run): the one engine
/// must give the webhook's answer offline too.
fn check_over_dump(cluster: &ControlPlane, extra: &str) -> String {
    let dump = cluster
        .kubectl(&[
            "get",
            "namespaces,gateways.gateway.networking.k8s.io,httproutes.gateway.networking.k8s.io",
            "-A",
            "-o",
            "yaml",
        ])
        .ok();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("cluster.yaml"), dump).unwrap();
    std::fs::write(dir.path().join("new.yaml"), extra).unwrap();
    check_json(dir.path())
}

fn check_json(dir: &Path) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_gateway-dns"))
        .args(["check", "--output", "json"])
        .arg(dir)
        .output()
        .unwrap();
    String::from_utf8(output.stdout).unwrap()
}

/// The message `check` gives `object` for `reason`.
fn message_of(check: &str, object: &str, reason: &str) -> String {
    let report: serde_json::Value = serde_json::from_str(check).unwrap();
    report["violations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["object"] == object && v["reason"] == reason)
        .unwrap_or_else(|| panic!("check reports no {reason} for {object}: {check}"))["message"]
        .as_str()
        .unwrap()
        .to_string()
}

fn assert_exists(cluster: &ControlPlane, namespace: &str, name: &str, exists: bool) {
    let run = cluster.kubectl(&["get", "httproute", name, "-n", namespace, "-o", "name"]);
    assert_eq!(run.success, exists, "httproute {namespace}/{name}: {run:?}");
    if !exists {
        assert!(run.stderr.contains("NotFound"), "{run:?}");
    }
}

#[track_caller]
fn assert_denied(run: &Run, line: &str) {
    assert!(!run.success, "kubectl apply succeeded: {run:?}");
    let expected =
        format!("admission webhook \"validate.gateway-dns.io\" denied the request: {line}");
    assert!(
        run.stderr.contains(&expected),
        "kubectl's stderr lacks {expected:?}:\n{}",
        run.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seed_story_through_kubectl_apply() {
    let cluster = ControlPlane::start();
    cluster.install_gateway_dns_rbac();
    let identity = cluster.service_account_kubeconfig("gateway-dns", "gateway-dns", None);
    let serve = Serve::start(&identity, "seed-story", &["--zone", "example.com"]);
    serve.wait_ready(Duration::from_secs(60)).await;
    cluster.register_webhook(&serve.url(), &serve.ca_file());

    cluster.apply(&seed("gateways.yaml"), &[]).ok();
    cluster.gateway_address("infra/public", &["203.0.113.10"]);
    cluster.gateway_address("infra/internal", &["198.51.100.20"]);
    cluster.wait_webhook_active("team-a");

    // Team A: accepted without a word, and published.
    let team_a = cluster.apply(&seed("team-a.yaml"), &[]);
    assert!(team_a.success, "{team_a:?}");
    assert!(!team_a.stderr.contains("Warning"), "{team_a:?}");
    serve
        .wait_answer(
            "app.example.com",
            "A",
            &["203.0.113.10"],
            Duration::from_secs(20),
        )
        .await;

    // Team B: the same name through the internal Gateway. The dry run gets the denial and
    // creates nothing; the real apply gets the same denial.
    let team_b = seed("team-b.yaml");
    let expected = message_of(
        &check_over_dump(&cluster, &team_b),
        "HTTPRoute/team-b/web",
        "HostnameConflict",
    );
    assert!(
        expected.starts_with("app.example.com is already served by Gateway infra/public"),
        "{expected}"
    );
    let line = format!("HostnameConflict: {expected}");
    assert_denied(&cluster.apply(&team_b, &["--dry-run=server"]), &line);
    assert_exists(&cluster, "team-b", "web", false);
    assert_denied(&cluster.apply(&team_b, &[]), &line);
    assert_exists(&cluster, "team-b", "web", false);
    assert_eq!(serve.dig("app.example.com", "A").await, ["203.0.113.10"]);

    // A hostname outside the listener: accepted, with kubectl's `Warning:` line.
    let outside = seed("outside-listener.yaml");
    let warning = format!(
        "Warning: HostnameOutsideListener: {}",
        message_of(
            &check_over_dump(&cluster, &outside),
            "HTTPRoute/team-a/shop",
            "HostnameOutsideListener"
        )
    );
    assert!(warning.contains("shop.example.org"), "{warning}");
    let dry = cluster.apply(&outside, &["--dry-run=server"]);
    assert!(dry.success, "{dry:?}");
    assert!(dry.stderr.contains(&warning), "{dry:?}");
    assert_exists(&cluster, "team-a", "shop", false);
    let applied = cluster.apply(&outside, &[]);
    assert!(applied.success, "{applied:?}");
    assert!(applied.stderr.contains(&warning), "{applied:?}");
    assert_exists(&cluster, "team-a", "shop", true);
    serve
        .wait_answer(
            "shop.example.com",
            "A",
            &["203.0.113.10"],
            Duration::from_secs(20),
        )
        .await;
    assert!(serve.dig("shop.example.org", "A").await.is_empty());
    // The dry runs changed nothing: exactly the two accepted routes exist.
    let routes = cluster
        .kubectl(&["get", "httproutes", "-A", "-o", "name"])
        .ok();
    let mut routes: Vec<&str> = routes.lines().collect();
    routes.sort();
    assert_eq!(
        routes,
        [
            "httproute.gateway.networking.k8s.io/shop",
            "httproute.gateway.networking.k8s.io/web"
        ]
    );
    serve.assert_running();
}
