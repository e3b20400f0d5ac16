//! `helm upgrade` with a changed value while routes are applied and deleted, under a webhook
//! that fails closed: no admission fails, and the Lease passes to a pod of the new ReplicaSet
//! with no double write: the replicas write a real BIND (RFC 2136) on the node's address, whose
//! log shows which pod sent each UPDATE, and no pod writes again once another has.

use std::time::{Duration, Instant};

use crate::support::bind::{self, Bind};
use crate::support::dig;
use crate::{NAMESPACE, NODE_IP, Node, Repeated, kubectl_at, route_yaml};

pub fn a_rolling_upgrade_fails_no_admission_and_hands_the_lease_over(node: &Node) {
    // The replicas write BIND, which pods reach on the node's address.
    let bind = Bind::start("example.com", "");
    bind.also_listen_on(NODE_IP.parse().unwrap());
    node.kubectl(&[
        "create",
        "secret",
        "generic",
        "gateway-dns-rfc2136-tsig",
        "-n",
        NAMESPACE,
        &format!("--from-literal=secret={}", bind::SECRET),
    ])
    .ok();
    let server = format!("dns.rfc2136.server={NODE_IP}:{}", bind.port);
    let key = format!("dns.rfc2136.tsigKeyName={}", bind::KEY_NAME);
    let run = node.helm_install(&[
        "--reuse-values",
        "--set",
        "dns.provider=rfc2136",
        "--set",
        &server,
        "--set",
        &key,
    ]);
    assert!(run.success, "{run:?}");
    node.wait_for(
        "the leader publishes app.example.com",
        Duration::from_secs(90),
        || dig::query(bind.addr(), "app.example.com", "A", false).data("A") == ["203.0.113.10"],
    );
    let ips_before: Vec<(String, String)> = node
        .pods()
        .into_iter()
        .map(|(name, ip, _)| (ip, name))
        .collect();
    let before: Vec<String> = node.pods().into_iter().map(|(name, _, _)| name).collect();
    // A leader that stops frees the Lease; the next one takes it within a retry period.
    let leader = node.wait_lease_held_by_one_of(&before, "a pod holds the Lease");
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
    node.wait_rolled(&before);
    // The Lease moved to a new pod, which writes the churn from then on.
    let after: Vec<(String, String, bool)> = node.pods();
    let new_names: Vec<String> = after.iter().map(|(name, _, _)| name.clone()).collect();
    node.wait_lease_held_by_one_of(&new_names, "a new pod holds the Lease");
    node.wait_for("the new leader writes", Duration::from_secs(60), || {
        bind.update_sources()
            .iter()
            .any(|source| after.iter().any(|(_, ip, _)| ip == source))
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
    assert_ne!(
        acquired(node),
        acquired_before,
        "the Lease was not acquired again"
    );
    assert_ne!(node.lease_holder(), Some(leader));

    // One writer at a time: in BIND's order of UPDATEs, a pod that has been followed by
    // another never writes again.
    let mut names = ips_before;
    names.extend(after.into_iter().map(|(name, ip, _)| (ip, name)));
    let pod_of = |ip: &str| -> String {
        names
            .iter()
            .find(|(address, _)| address == ip)
            .map_or_else(|| ip.to_string(), |(_, name)| name.clone())
    };
    let sources = bind.update_sources();
    let mut writers: Vec<&String> = Vec::new();
    for source in &sources {
        if writers.last() != Some(&source) {
            assert!(
                !writers.contains(&source),
                "{} wrote again after {}: {:?}",
                pod_of(source),
                pod_of(writers[writers.len() - 1]),
                writers.iter().map(|w| pod_of(w)).collect::<Vec<_>>()
            );
            writers.push(source);
        }
    }
    println!(
        "{} UPDATEs applied by BIND, from {} writers in turn: {}",
        sources.len(),
        writers.len(),
        writers
            .iter()
            .map(|w| pod_of(w))
            .collect::<Vec<_>>()
            .join(" -> ")
    );
    assert!(sources.len() >= 20, "only {} UPDATEs", sources.len());
    assert!(writers.len() >= 2, "the writer did not change: {writers:?}");
}
