//! The seed story through `kubectl apply`, answered by the pods: the API server calls the
//! webhook by its Service (no URL, no aggregator routing), which kube-proxy sends to a pod.

use crate::support::cluster::seed;
use crate::{Node, RELEASE};

pub fn the_seed_story_is_answered_by_the_pods_through_the_service(node: &Node) {
    // The configuration names the Service, so the API server goes through kube-proxy.
    let config = node
        .kubectl(&[
            "get",
            "validatingwebhookconfiguration",
            RELEASE,
            "-o",
            "json",
        ])
        .ok();
    let config: serde_json::Value = serde_json::from_str(&config).unwrap();
    for webhook in config["webhooks"].as_array().unwrap() {
        assert!(webhook["clientConfig"]["url"].is_null(), "{webhook}");
        assert_eq!(
            webhook["clientConfig"]["service"]["name"], RELEASE,
            "{webhook}"
        );
    }
    let args = std::fs::read_to_string(node.dir().join("run/state.json")).unwrap();
    assert!(!args.contains("enable-aggregator-routing"), "{args}");

    let cluster = node.cluster();
    cluster.apply(&seed("gateways.yaml"), &[]).ok();
    cluster.gateway_address("infra/public", &["203.0.113.10"]);
    cluster.gateway_address("infra/internal", &["198.51.100.20"]);
    cluster.wait_webhook_active("team-a");

    let team_a = cluster.apply(&seed("team-a.yaml"), &[]);
    assert!(team_a.success, "{team_a:?}");
    assert!(!team_a.stderr.contains("Warning"), "{team_a:?}");

    // Team B claims app.example.com through the other Gateway: denied, in kubectl's words.
    let denied = "admission webhook \"validate.gateway-dns.io\" denied the request: \
                  HostnameConflict: app.example.com is already served by Gateway infra/public";
    // The pods learn of team A's route from their watch; the denial follows within moments.
    node.wait_for(
        "team B's claim is denied",
        std::time::Duration::from_secs(30),
        || {
            let run = cluster.apply(&seed("team-b.yaml"), &["--dry-run=server"]);
            !run.success && run.stderr.contains(denied)
        },
    );
    let team_b = cluster.apply(&seed("team-b.yaml"), &[]);
    assert!(!team_b.success, "{team_b:?}");
    assert!(team_b.stderr.contains(denied), "{team_b:?}");

    // A hostname outside the listener: accepted with kubectl's Warning line.
    let outside = cluster.apply(&seed("outside-listener.yaml"), &[]);
    assert!(outside.success, "{outside:?}");
    assert!(
        outside
            .stderr
            .contains("Warning: HostnameOutsideListener: shop.example.org"),
        "{outside:?}"
    );
}
