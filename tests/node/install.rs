//! `helm install` with the chart's default values and the local image, into a namespace that
//! enforces the restricted Pod Security profile.

use std::time::Instant;

use crate::{NAMESPACE, Node, RELEASE};

pub fn the_chart_with_default_values_runs_under_the_restricted_profile(node: &Node) {
    node.kubectl(&["create", "namespace", NAMESPACE]).ok();
    // Enforced: a pod the profile refuses is never created, so Ready pods are the proof.
    node.kubectl(&[
        "label",
        "namespace",
        NAMESPACE,
        "pod-security.kubernetes.io/enforce=restricted",
        "pod-security.kubernetes.io/warn=restricted",
    ])
    .ok();
    let started = Instant::now();
    let run = node.helm_install(&[]);
    assert!(run.success, "helm install: {run:?}");
    println!(
        "helm install: 3 pods Ready in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert!(
        !run.stderr.contains("violate PodSecurity"),
        "the chart's pods break the restricted profile: {}",
        run.stderr
    );

    let pods = node.pods();
    assert_eq!(pods.len(), 3, "{pods:?}");
    assert!(pods.iter().all(|(_, _, ready)| *ready), "{pods:?}");

    // One pod holds the Lease.
    let names: Vec<String> = pods.iter().map(|(name, _, _)| name.clone()).collect();
    node.wait_lease_held_by_one_of(&names, "a pod holds the Lease");

    // The certificate Job ran from gateway-dns's own image: the Secret it makes holds the CA
    // that it put in the webhook configuration.
    let ca = node
        .kubectl(&[
            "get",
            "secret",
            "gateway-dns-tls",
            "-n",
            NAMESPACE,
            "-o",
            "jsonpath={.data.ca\\.crt}",
        ])
        .ok();
    assert!(!ca.trim().is_empty(), "the Secret has no ca.crt");
    let bundles = node
        .kubectl(&[
            "get",
            "validatingwebhookconfiguration",
            RELEASE,
            "-o",
            "jsonpath={range .webhooks[*]}{.clientConfig.caBundle}{\"\\n\"}{end}",
        ])
        .ok();
    assert!(!bundles.trim().is_empty());
    for bundle in bundles.lines() {
        assert_eq!(
            bundle.trim(),
            ca.trim(),
            "a caBundle is not the Secret's CA"
        );
    }
    // The Jobs ran the chart's image, nothing else: every image the release's pods ran is it.
    let events = node
        .kubectl(&[
            "get",
            "events",
            "-n",
            NAMESPACE,
            "-o",
            "jsonpath={range .items[*]}{.message}{\"\\n\"}{end}",
        ])
        .ok();
    assert!(
        events.contains("gateway-dns-certgen-create"),
        "no event of the certificate Job: {events}"
    );
    for line in events.lines().filter(|l| l.contains("Container image")) {
        assert!(line.contains("\"localhost/gateway-dns:test\""), "{line}");
    }
}
