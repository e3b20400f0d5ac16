//! `helm upgrade` with a changed value while routes are applied and deleted, under a webhook
//! that fails closed: no admission fails, and the Lease passes to a pod of the new ReplicaSet.

use std::time::{Duration, Instant};

use crate::{Node, Repeated, kubectl_at, route_yaml};

pub fn a_rolling_upgrade_fails_no_admission_and_hands_the_lease_over(node: &Node) {
    let before: Vec<String> = node.pods().into_iter().map(|(name, _, _)| name).collect();
    // A leader that stops frees the Lease; the next one takes it within a retry period.
    node.wait_for("a pod holds the Lease", Duration::from_secs(60), || {
        node.lease_holder().is_some_and(|h| before.contains(&h))
    });
    let leader = node.lease_holder().expect("a pod holds the Lease");
    let acquired = |node: &Node| -> String {
        node.kubectl(&[
            "get",
            "lease",
            crate::RELEASE,
            "-n",
            crate::NAMESPACE,
            "-o",
            "jsonpath={.spec.acquireTime}",
        ])
        .ok()
        .trim()
        .to_string()
    };
    let acquired_before = acquired(node);

    let kubeconfig = node.kubeconfig();
    let churn = Repeated::start(Duration::from_millis(50), move |i| {
        let name = format!("roll-{}", i % 20);
        let yaml = route_yaml(&name, "team-a");
        let applied = kubectl_at(&kubeconfig, &["apply", "-f", "-"], Some(&yaml));
        if !applied.success {
            return Err(format!("apply {name}: {}", applied.stderr));
        }
        let deleted = kubectl_at(
            &kubeconfig,
            &["delete", "httproute", &name, "-n", "team-a", "--wait=false"],
            None,
        );
        if !deleted.success {
            return Err(format!("delete {name}: {}", deleted.stderr));
        }
        Ok(())
    });
    let started = Instant::now();
    let run = node.helm_install(&["--reuse-values", "--set", "logLevel=debug"]);
    let rolled = started.elapsed();
    // Until the old pods are gone: the last of them leaves after its preStop pause.
    node.wait_for("the old pods are gone", Duration::from_secs(120), || {
        let pods = node.pods();
        pods.len() == 3
            && pods
                .iter()
                .all(|(name, _, ready)| *ready && !before.contains(name))
    });
    let (changes, failures) = churn.stop();
    assert!(run.success, "helm upgrade: {run:?}");
    println!(
        "helm upgrade rolled 3 pods in {:.1} s; {changes} apply+delete pairs, {} failed",
        rolled.as_secs_f64(),
        failures.len()
    );
    assert!(changes >= 20, "only {changes} changes during the upgrade");
    assert!(
        failures.is_empty(),
        "admissions failed during the upgrade: {failures:#?}"
    );

    // The Lease moved to a new pod, handed over rather than left to expire.
    let after: Vec<String> = node.pods().into_iter().map(|(name, _, _)| name).collect();
    node.wait_for("a new pod holds the Lease", Duration::from_secs(60), || {
        node.lease_holder().is_some_and(|h| after.contains(&h))
    });
    assert_ne!(
        acquired(node),
        acquired_before,
        "the Lease was not acquired again"
    );
    assert_ne!(node.lease_holder(), Some(leader));
}
