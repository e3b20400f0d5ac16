//! `gateway-dns explain` against a real API server: the seed story of examples/cluster applied
//! with kubectl (no webhook, so the losing route exists), read with the least-privilege identity
//! `serve` runs as. `explain b.example.com` names the winner and the loser with their reasons and
//! the creationTimestamps the API server gave them.

use std::process::Command;

use serde_json::Value;

use crate::support::cluster::ControlPlane;

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn explain(args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut command = Command::new(env!("CARGO_BIN_EXE_gateway-dns"));
    command.arg("explain").args(args);
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("GATEWAY_DNS_") || key == "KUBECONFIG" {
            command.env_remove(key);
        }
    }
    command.envs(env.iter().copied());
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

#[test]
fn explain_names_the_winner_and_the_loser_of_the_seed_story() {
    let cluster = ControlPlane::start();
    cluster.seed_story_without_webhook();
    let created = |name: &str| {
        cluster
            .kubectl(&[
                "get",
                "httproute",
                name,
                "-n",
                "apps",
                "-o",
                "jsonpath={.metadata.creationTimestamp}",
            ])
            .ok()
            .trim()
            .to_owned()
    };
    let (b1_created, b2_created) = (created("b1"), created("b2"));
    let identity = cluster.service_account_kubeconfig("gateway-dns", "gateway-dns", None);
    let identity = identity.to_str().unwrap();

    let run = explain(
        &[
            "--kubeconfig",
            identity,
            "--output",
            "json",
            "b.example.com",
        ],
        &[],
    );
    assert_eq!(run.code, 1, "a denied claim: {}{}", run.stdout, run.stderr);
    let out = json(&run);
    assert_eq!(out["resolves"], true);
    assert_eq!(out["winner"], "HTTPRoute/apps/b1");
    assert_eq!(
        out["records"][0]["targets"],
        serde_json::json!(["203.0.113.10"])
    );
    let routes = out["routes"].as_array().unwrap();
    let names: Vec<&str> = routes
        .iter()
        .map(|r| r["route"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["HTTPRoute/apps/b1", "HTTPRoute/apps/b2"]);
    let (winner, loser) = (&routes[0], &routes[1]);
    assert_eq!(winner["fate"], "published");
    assert_eq!(winner["created"].as_str(), Some(b1_created.as_str()));
    assert_eq!(winner["claims"][0]["result"], "wins");
    assert_eq!(loser["fate"], "denied");
    assert_eq!(loser["created"].as_str(), Some(b2_created.as_str()));
    assert_eq!(loser["claims"][0]["result"], "loses");
    assert_eq!(loser["findings"][0]["reason"], "HostnameConflict");
    assert_eq!(loser["findings"][0]["action"], "deny");
    // kubectl applied b1 before b2, perhaps within the same second: the API server's
    // timestamps decide, else the names, and the explanation says which.
    let why = loser["why"].as_str().unwrap();
    if b1_created == b2_created {
        assert_eq!(loser["claims"][0]["decidedBy"], "name");
        assert!(
            why.contains(&format!(
                "same creationTimestamp ({b1_created}), so namespace/name decides"
            )),
            "{why}"
        );
    } else {
        assert_eq!(loser["claims"][0]["decidedBy"], "creationTimestamp");
        assert!(
            why.contains(&format!(
                "oldest claim wins: HTTPRoute/apps/b1 was created {b1_created}, before HTTPRoute/apps/b2 (created {b2_created})"
            )),
            "{why}"
        );
    }
    assert!(
        why.starts_with("b.example.com is already served by Gateway infra/gw1 (203.0.113.10) for HTTPRoute apps/b1"),
        "{why}"
    );

    // The text, with the cluster found through KUBECONFIG as in a shell.
    let text = explain(&["b.example.com"], &[("KUBECONFIG", identity)]);
    assert_eq!(text.code, 1, "{}", text.stderr);
    for line in [
        "b.example.com resolves to 203.0.113.10 (A).",
        "The claim of HTTPRoute/apps/b1 keeps the name.",
        &format!("HTTPRoute/apps/b2 (created {b2_created}): denied"),
    ] {
        assert!(
            text.stdout.lines().any(|l| l == line),
            "missing {line:?} in:\n{}",
            text.stdout
        );
    }

    // The route form, kubectl's way.
    let d1 = explain(
        &[
            "--kubeconfig",
            identity,
            "--output",
            "json",
            "-n",
            "apps",
            "httproute/d1",
        ],
        &[],
    );
    assert_eq!(d1.code, 1, "{}", d1.stderr);
    let d1 = json(&d1);
    assert_eq!(d1["names"][0]["name"], "d.example.com");
    assert_eq!(d1["names"][0]["fate"], "denied");
    assert_eq!(
        d1["names"][0]["findings"][0]["reason"],
        "NoMatchingListenerHostname"
    );

    // A team in audit mode: the losing claim is only audited, and the name resolves cleanly.
    cluster
        .kubectl(&["label", "namespace", "apps", "gateway-dns.io/mode=audit"])
        .ok();
    let audit = explain(
        &[
            "--kubeconfig",
            identity,
            "--output",
            "json",
            "b.example.com",
        ],
        &[],
    );
    assert_eq!(audit.code, 0, "{}{}", audit.stdout, audit.stderr);
    let audit = json(&audit);
    assert_eq!(audit["routes"][1]["fate"], "dropped");
    assert_eq!(audit["routes"][1]["findings"][0]["action"], "audit");

    // Files over the cluster, as if applied: b1 moves to another name, so b2 would keep it.
    let dir = tempfile::tempdir().unwrap();
    let moved = dir.path().join("b1.yaml");
    std::fs::write(
        &moved,
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\n\
         metadata: {name: b1, namespace: apps}\n\
         spec:\n  parentRefs: [{name: gw1, namespace: infra}]\n  hostnames: [old-b.example.com]\n",
    )
    .unwrap();
    let moved = moved.to_str().unwrap();
    let what_if = explain(
        &[
            "--kubeconfig",
            identity,
            "--manifests",
            moved,
            "--output",
            "json",
            "b.example.com",
        ],
        &[],
    );
    assert_eq!(what_if.code, 0, "{}{}", what_if.stdout, what_if.stderr);
    let what_if = json(&what_if);
    assert_eq!(what_if["winner"], "HTTPRoute/apps/b2");
    assert_eq!(
        what_if["records"][0]["targets"],
        serde_json::json!(["203.0.113.20"])
    );
    // explain only reads: the live b1 still has the name.
    let hostnames = cluster
        .kubectl(&[
            "get",
            "httproute",
            "b1",
            "-n",
            "apps",
            "-o",
            "jsonpath={.spec.hostnames}",
        ])
        .ok();
    assert_eq!(hostnames.trim(), r#"["b.example.com"]"#);

    // A route the cluster does not have.
    let missing = explain(
        &["--kubeconfig", identity, "-n", "apps", "httproute/nope"],
        &[],
    );
    assert_eq!(missing.code, 2);
    assert_eq!(
        missing.stderr.trim_end(),
        "gateway-dns explain: HTTPRoute apps/nope is not known to gateway-dns (no such route was read)"
    );
}
