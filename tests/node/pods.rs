//! Pods killed under a webhook that fails closed: a leader deleted by force is replaced by
//! another pod within the lease duration, and pods evicted one after another (the
//! PodDisruptionBudget decides when) never leave the API server without an answer.

use std::time::{Duration, Instant};

use crate::{NAMESPACE, Node, Repeated, evict, kubectl_at, route_yaml};

/// The chart's default --leader-election-lease-duration and --leader-election-retry-period.
const LEASE_DURATION: Duration = Duration::from_secs(20);
const RETRY_PERIOD: Duration = Duration::from_secs(5);
/// A dead leader's Lease is taken once a follower has seen it unrenewed for the lease duration;
/// the follower looks every retry period (with 20 % jitter), both before and after.
const TAKEOVER_LIMIT: Duration = Duration::from_millis(20_000 + 2 * 6_000);

pub fn a_killed_leader_is_replaced_and_no_killed_pod_stops_the_webhook(node: &Node) {
    let run = node.helm_install(&["--reuse-values", "--set", "webhook.failurePolicy=Fail"]);
    assert!(run.success, "{run:?}");

    // The leader, deleted by force: no graceful release of the Lease.
    let leader = node.lease_holder().expect("a pod holds the Lease");
    let killed = Instant::now();
    node.kubectl(&[
        "delete",
        "pod",
        &leader,
        "-n",
        NAMESPACE,
        "--force",
        "--grace-period=0",
    ])
    .ok();
    let mut holder = None;
    node.wait_for(
        "another pod takes the Lease",
        TAKEOVER_LIMIT + Duration::from_secs(10),
        || {
            holder = node.lease_holder().filter(|h| *h != leader);
            holder.is_some()
        },
    );
    let took = killed.elapsed();
    println!(
        "leader {leader} deleted by force: {} took the Lease after {:.1} s (lease duration {} s, retry period {} s)",
        holder.unwrap_or_default(),
        took.as_secs_f64(),
        LEASE_DURATION.as_secs(),
        RETRY_PERIOD.as_secs()
    );
    assert!(took <= TAKEOVER_LIMIT, "{took:?}");
    node.wait_for("3 pods Ready again", Duration::from_secs(120), || {
        let pods = node.pods();
        pods.len() == 3 && pods.iter().all(|(_, _, ready)| *ready)
    });

    // Every pod evicted in turn while the API server keeps asking; with failurePolicy Fail a
    // single unanswered review fails a dry run.
    let kubeconfig = node.kubeconfig();
    let probe = route_yaml("probe", "team-a");
    let asking = Repeated::start(Duration::from_millis(100), move |_| {
        let run = kubectl_at(
            &kubeconfig,
            &["apply", "--dry-run=server", "-f", "-"],
            Some(&probe),
        );
        if run.success { Ok(()) } else { Err(run.stderr) }
    });
    let originals: Vec<String> = node.pods().into_iter().map(|(name, _, _)| name).collect();
    for pod in &originals {
        node.wait_for(
            &format!("the PodDisruptionBudget allows evicting {pod}"),
            Duration::from_secs(120),
            || evict(node, pod),
        );
    }
    node.wait_for("3 new pods Ready", Duration::from_secs(120), || {
        let pods = node.pods();
        pods.len() == 3
            && pods
                .iter()
                .all(|(name, _, ready)| *ready && !originals.contains(name))
    });
    // Asked until the evicted pods are gone, through their preStop pause and drain.
    node.wait_for(
        "the evicted pods are gone",
        Duration::from_secs(120),
        || {
            originals.iter().all(|pod| {
                let run = node.kubectl(&["get", "pod", pod, "-n", NAMESPACE, "-o", "name"]);
                !run.success && run.stderr.contains("NotFound")
            })
        },
    );
    let (asked, failures) = asking.stop();
    println!(
        "3 pods evicted in turn: {asked} dry runs, {} failed",
        failures.len()
    );
    assert!(asked >= 20, "only {asked} dry runs");
    assert!(
        failures.is_empty(),
        "reviews failed while pods were evicted: {failures:#?}"
    );
}
