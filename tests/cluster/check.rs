//! `check --kubeconfig` against a real API server: the files over the live objects as if
//! applied, read with the least-privilege identity `serve` runs as, and only the files'
//! findings reported.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::support::cluster::ControlPlane;

/// Live: two Gateways with different addresses, a route that owns `shop.example.com` on gw1,
/// and a route of another team with a problem of its own (a parent that does not exist).
const LIVE: &str = "\
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
metadata: {name: gw1, namespace: infra}
spec:
  gatewayClassName: test
  listeners:
  - {name: web, protocol: HTTP, port: 80, allowedRoutes: {namespaces: {from: All}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw2, namespace: infra}
spec:
  gatewayClassName: test
  listeners:
  - {name: web, protocol: HTTP, port: 80, allowedRoutes: {namespaces: {from: All}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: owner, namespace: apps}
spec:
  parentRefs: [{name: gw1, namespace: infra}]
  hostnames: [shop.example.com]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: orphan, namespace: apps}
spec:
  parentRefs: [{name: nope, namespace: infra}]
  hostnames: [orphan.example.com]
";

/// The app repo: a new route for the same name on the other Gateway.
const NEWCOMER: &str = "\
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: newcomer, namespace: apps}
spec:
  parentRefs: [{name: gw2, namespace: infra}]
  hostnames: [shop.example.com]
";

/// The newcomer copied from a dump of another cluster, with a creationTimestamp older than the
/// live owner's; and the live owner as a file that claims to be newer than the newcomer.
const NEWCOMER_DATED: &str = "\
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: newcomer, namespace: apps, creationTimestamp: '2000-01-01T00:00:00Z'}
spec:
  parentRefs: [{name: gw2, namespace: infra}]
  hostnames: [shop.example.com]
";
const OWNER_DATED: &str = "\
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: owner, namespace: apps, creationTimestamp: '2100-01-01T00:00:00Z'}
spec:
  parentRefs: [{name: gw1, namespace: infra}]
  hostnames: [shop.example.com]
";

/// The same repo also moving the live owner away from the name.
const OWNER_MOVES: &str = "\
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: owner, namespace: apps}
spec:
  parentRefs: [{name: gw1, namespace: infra}]
  hostnames: [old-shop.example.com]
";

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn check(args: &[&str]) -> Run {
    let mut command = Command::new(env!("CARGO_BIN_EXE_gateway-dns"));
    command.arg("check").args(args);
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("GATEWAY_DNS_") || key == "KUBECONFIG" {
            command.env_remove(key);
        }
    }
    let out = command.output().expect("gateway-dns runs");
    Run {
        code: out.status.code().expect("exited, not signalled"),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn json(run: &Run) -> Value {
    serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\nstderr: {}", run.stdout, run.stderr))
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

#[test]
fn files_are_checked_over_the_live_cluster_read_only() {
    let cluster = ControlPlane::start();
    cluster.install_gateway_dns_rbac();
    cluster.apply(LIVE, &[]).ok();
    cluster.gateway_address("infra/gw1", &["192.0.2.1"]);
    cluster.gateway_address("infra/gw2", &["192.0.2.2"]);
    // serve's ServiceAccount: list on what the engine reads, nothing else.
    let identity = cluster.service_account_kubeconfig("gateway-dns", "gateway-dns", None);
    let identity = identity.to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let newcomer = write(dir.path(), "newcomer.yaml", NEWCOMER);

    // Offline the route's Gateway is unknown: a warning, exit 0.
    let offline = check(&["--output", "json", &newcomer]);
    assert_eq!(offline.code, 0, "{}", offline.stderr);
    assert_eq!(json(&offline)["violations"][0]["reason"], "ParentNotFound");

    // Over the cluster it meets what `kubectl apply` would: the live owner of the name.
    let over = check(&["--output", "json", "--kubeconfig", identity, &newcomer]);
    assert_eq!(
        over.code, 1,
        "stdout: {}\nstderr: {}",
        over.stdout, over.stderr
    );
    let outcome = json(&over);
    let violations = outcome["violations"].as_array().unwrap();
    assert_eq!(
        violations.len(),
        1,
        "only the files' findings: {violations:#?}"
    );
    let conflict = &violations[0];
    assert_eq!(conflict["reason"], "HostnameConflict");
    assert_eq!(conflict["action"], "deny");
    assert_eq!(conflict["object"], "HTTPRoute/apps/newcomer");
    assert_eq!(conflict["file"], newcomer.as_str());
    assert_eq!(conflict["fieldLine"], 6);
    assert!(
        conflict["message"].as_str().unwrap().contains("apps/owner"),
        "{conflict}"
    );
    // The orphan's own warning and the owner's record are the cluster's business, not the repo's.
    assert_eq!(outcome["records"], serde_json::json!([]));
    assert_eq!(outcome["summary"]["warnings"], 0);

    // A file's creationTimestamp is not what the API server will give: an object the cluster
    // does not have is the newcomer, and a live one keeps its own time, as the webhook judges.
    let dated = write(dir.path(), "dated.yaml", NEWCOMER_DATED);
    let owner_dated = write(dir.path(), "owner-dated.yaml", OWNER_DATED);
    for files in [
        vec![dated.as_str()],
        vec![dated.as_str(), owner_dated.as_str()],
    ] {
        let mut args = vec!["--output", "json", "--kubeconfig", identity];
        args.extend(&files);
        let run = check(&args);
        assert_eq!(run.code, 1, "{files:?}: {}\n{}", run.stdout, run.stderr);
        let outcome = json(&run);
        let objects: Vec<(&str, &str)> = outcome["violations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| (v["reason"].as_str().unwrap(), v["object"].as_str().unwrap()))
            .collect();
        assert_eq!(
            objects,
            [("HostnameConflict", "HTTPRoute/apps/newcomer")],
            "{files:?}"
        );
    }
    // explain lays files over the cluster the same way.
    let explained = Command::new(env!("CARGO_BIN_EXE_gateway-dns"))
        .args(["explain", "--output", "json", "--kubeconfig", identity])
        .args(["--manifests", &dated, "shop.example.com"])
        .env_remove("KUBECONFIG")
        .output()
        .unwrap();
    let explained: Value = serde_json::from_slice(&explained.stdout).unwrap();
    let fates: Vec<(&str, &str)> = explained["routes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["route"].as_str().unwrap(), r["fate"].as_str().unwrap()))
        .collect();
    assert_eq!(
        fates,
        [
            ("HTTPRoute/apps/owner", "published"),
            ("HTTPRoute/apps/newcomer", "denied")
        ],
        "{explained:#}"
    );

    // A file replaces the live object of the same name: the owner moves away, the name is free.
    let owner = write(dir.path(), "owner.yaml", OWNER_MOVES);
    let moved = check(&[
        "--output",
        "json",
        "--kubeconfig",
        identity,
        &newcomer,
        &owner,
    ]);
    assert_eq!(moved.code, 0, "{}\n{}", moved.stdout, moved.stderr);
    let outcome = json(&moved);
    assert_eq!(outcome["violations"], serde_json::json!([]));
    let records: Vec<(String, Value)> = outcome["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["dnsName"].as_str().unwrap().to_owned(),
                r["targets"].clone(),
            )
        })
        .collect();
    assert_eq!(
        records,
        [
            (
                "old-shop.example.com".to_owned(),
                serde_json::json!(["192.0.2.1"])
            ),
            (
                "shop.example.com".to_owned(),
                serde_json::json!(["192.0.2.2"])
            ),
        ]
    );

    // The live objects are untouched: check only reads.
    let hostnames = cluster
        .kubectl(&[
            "get",
            "httproute",
            "owner",
            "-n",
            "apps",
            "-o",
            "jsonpath={.spec.hostnames}",
        ])
        .ok();
    assert_eq!(hostnames.trim(), r#"["shop.example.com"]"#);
    assert!(
        !cluster
            .kubectl(&["get", "httproute", "newcomer", "-n", "apps"])
            .success
    );

    // A cluster that cannot be read is an input error, said once.
    let unreachable = "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:1'}\n\
         users:\n- name: u\n  user: {token: t}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n";
    let kubeconfig = write(dir.path(), "unreachable.kubeconfig", unreachable);
    let down = check(&["--kubeconfig", &kubeconfig, &newcomer]);
    assert_eq!(down.code, 2, "{}", down.stdout);
    assert!(down.stdout.is_empty());
    assert_eq!(down.stderr.lines().count(), 1, "{}", down.stderr);
    assert!(
        down.stderr.starts_with(
            "gateway-dns check: reading the cluster at https://127.0.0.1:1/: finding which \
             Gateway API kinds the cluster serves"
        ),
        "{}",
        down.stderr
    );
}
