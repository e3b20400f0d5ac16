//! The same install from `manifests/`: the self-signed overlay over `manifests/base`, with only
//! the image pointed at the local one. Same result as the chart: Ready pods under the restricted
//! profile, one Lease holder, the webhook answering through its Service.

use std::time::{Duration, Instant};

use crate::support::cluster::{repo_root, seed};
use crate::{IMAGE_REPOSITORY, IMAGE_TAG, NAMESPACE, Node};

pub fn manifests_base_gives_the_same_result(node: &Node) {
    // The chart goes first, with what it left (the Secret its Job made, and the namespace).
    node.helm(&[
        "uninstall",
        crate::RELEASE,
        "--namespace",
        NAMESPACE,
        "--wait",
        "--timeout",
        "120s",
    ])
    .ok();
    node.kubectl(&["delete", "namespace", NAMESPACE, "--timeout=120s"])
        .ok();

    // The self-signed overlay as its comment says to use it, from a directory of its own.
    let work = tempfile::tempdir().unwrap();
    let overlay = repo_root().join("manifests/overlays/self-signed/kustomization.yaml");
    let base = repo_root().join("manifests/base");
    // kustomize takes only a relative path to another kustomization.
    let up = "../".repeat(work.path().components().count() - 1);
    let base = format!("{up}{}", base.display().to_string().trim_start_matches('/'));
    let kustomization = std::fs::read_to_string(overlay)
        .unwrap()
        .replace("../../base", &base);
    assert!(kustomization.contains(&base));
    let kustomization = format!(
        "{kustomization}images:\n  - name: gateway-dns\n    newName: {IMAGE_REPOSITORY}\n    newTag: {IMAGE_TAG}\n"
    );
    std::fs::write(work.path().join("kustomization.yaml"), kustomization).unwrap();
    let certs = std::process::Command::new(env!("CARGO_BIN_EXE_gateway-dns"))
        .args(["certs", "--out"])
        .arg(work.path().join("certs"))
        .output()
        .unwrap();
    assert!(certs.status.success(), "{certs:?}");

    let started = Instant::now();
    node.kubectl(&["apply", "-k", &work.path().display().to_string()])
        .ok();
    node.kubectl(&[
        "rollout",
        "status",
        "deployment/gateway-dns",
        "-n",
        NAMESPACE,
        "--timeout=180s",
    ])
    .ok();
    println!(
        "kubectl apply -k: 3 pods Ready in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let labels = node
        .kubectl(&[
            "get",
            "namespace",
            NAMESPACE,
            "-o",
            "jsonpath={.metadata.labels}",
        ])
        .ok();
    assert!(
        labels.contains("\"pod-security.kubernetes.io/enforce\":\"restricted\""),
        "{labels}"
    );
    let pods = node.pods();
    assert_eq!(pods.len(), 3, "{pods:?}");
    assert!(pods.iter().all(|(_, _, ready)| *ready), "{pods:?}");
    let names: Vec<String> = pods.iter().map(|(name, _, _)| name.clone()).collect();
    node.wait_lease_held_by_one_of(&names, "a pod holds the Lease");
    // The story's denial, now from these pods.
    let denied = "denied the request: HostnameConflict: app.example.com is already served by \
                  Gateway infra/public";
    node.wait_for("team B's claim is denied", Duration::from_secs(60), || {
        let run = node
            .cluster()
            .apply(&seed("team-b.yaml"), &["--dry-run=server"]);
        !run.success && run.stderr.contains(denied)
    });
}
