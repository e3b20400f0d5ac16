//! Namespaces and hostnames through `kubectl` against a real API server, with
//! `--hostname-ownership namespace`: a team's name cannot be taken by another namespace, even on
//! the same Gateway; the owner's consent (a Namespace annotation) lets one in; withdrawing it and
//! narrowing a namespace's domains are answered with `Warning:` lines naming the routes that
//! would stop publishing, and are never denied; the owner's record never moves.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::cluster::{ControlPlane, Run, Serve, seed};
use crate::support::objects;

fn route(namespace: &str, name: &str, hostname: &str) -> String {
    let parents = json!([objects::parent("infra", "public")]);
    objects::yaml(&objects::http_route(namespace, name, parents, &[hostname]))
}

/// Runs `attempt` until `done` holds for its result (the webhook decides from its own view of
/// the cluster, which follows a change within a watch event); bounded.
#[track_caller]
fn until(what: &str, mut attempt: impl FnMut() -> Run, done: impl Fn(&Run) -> bool) -> Run {
    let start = Instant::now();
    loop {
        let run = attempt();
        if done(&run) {
            return run;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{what}: not after 30 s; last: {run:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn warnings(run: &Run) -> Vec<&str> {
    run.stderr
        .lines()
        .filter(|line| line.starts_with("Warning: "))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_teams_name_stays_its_own_through_kubectl() {
    let cluster = ControlPlane::start();
    cluster.install_gateway_dns_rbac();
    let identity = cluster.service_account_kubeconfig("gateway-dns", "gateway-dns", None);
    let serve = Serve::start(
        &identity,
        "ownership",
        &["--zone", "example.com", "--hostname-ownership", "namespace"],
    );
    serve.wait_ready(Duration::from_secs(60)).await;
    cluster.register_webhook(&serve.url(), &serve.ca_file());
    cluster.apply(&seed("gateways.yaml"), &[]).ok();
    cluster.gateway_address("infra/public", &["203.0.113.10"]);
    cluster.wait_webhook_active("team-b");

    let team_a = cluster.apply(&seed("team-a.yaml"), &[]);
    assert!(team_a.success, "{team_a:?}");
    serve
        .wait_answer(
            "app.example.com",
            "A",
            &["203.0.113.10"],
            Duration::from_secs(20),
        )
        .await;

    // Team B takes the same name on the same Gateway (DNS would not even change): denied,
    // naming the owner namespace and its route. Nothing is stored.
    let takeover = route("team-b", "web", "app.example.com");
    // (team-a/web's name resolving shows the webhook's view holds it: both read one index.)
    let denied = cluster.apply(&takeover, &[]);
    assert!(!denied.success, "{denied:?}");
    assert!(
        denied.stderr.contains(
            "admission webhook \"validate.gateway-dns.io\" denied the request: \
             HostnameOwnedByOtherNamespace: app.example.com belongs to namespace team-a, where \
             HTTPRoute team-a/web claimed it first"
        ),
        "{denied:?}"
    );
    let stored = cluster.kubectl(&["get", "httproute", "web", "-n", "team-b"]);
    assert!(
        !stored.success && stored.stderr.contains("NotFound"),
        "{stored:?}"
    );

    // The owner consents: a Namespace UPDATE that unpublishes nothing, answered without a word.
    let consent = cluster.kubectl(&[
        "annotate",
        "namespace",
        "team-a",
        "gateway-dns.io/share-hostnames-with=team-b",
    ]);
    assert!(consent.success, "{consent:?}");
    assert!(warnings(&consent).is_empty(), "{consent:?}");
    let shared = until(
        "team-b is let in once the webhook sees the consent",
        || cluster.apply(&takeover, &[]),
        |run| run.success,
    );
    assert!(warnings(&shared).is_empty(), "{shared:?}");
    let api = cluster.apply(&route("team-b", "api", "api.example.com"), &[]);
    assert!(api.success, "{api:?}");
    serve
        .wait_answer(
            "api.example.com",
            "A",
            &["203.0.113.10"],
            Duration::from_secs(20),
        )
        .await;

    // Withdrawing consent is allowed, with a warning naming team-b's route. The dry run waits
    // until the webhook's view holds team-b/web; it changes nothing.
    let withdraw = [
        "annotate",
        "namespace",
        "team-a",
        "gateway-dns.io/share-hostnames-with-",
    ];
    let expected = "Warning: HostnameOwnedByOtherNamespace: HTTPRoute/team-b/web would no longer \
                    publish app.example.com: app.example.com belongs to namespace team-a";
    let dry = until(
        "the consent's withdrawal names team-b/web",
        || cluster.kubectl(&[&withdraw[..], &["--dry-run=server"]].concat()),
        |run| run.stderr.contains(expected),
    );
    assert!(dry.success, "{dry:?}");
    let withdrawn = cluster.kubectl(&withdraw);
    assert!(withdrawn.success, "{withdrawn:?}");
    assert_eq!(warnings(&withdrawn).len(), 1, "{withdrawn:?}");
    assert!(withdrawn.stderr.contains(expected), "{withdrawn:?}");
    // The owner's record never moved.
    assert_eq!(serve.dig("app.example.com", "A").await, ["203.0.113.10"]);

    // Once the webhook's view holds the withdrawal, team-b/web's unchanged apply only warns.
    until(
        "team-b/web's name is team-a's again",
        || cluster.apply(&takeover, &["--dry-run=server"]),
        |run| {
            run.stderr
                .contains("Warning: HostnameOwnedByOtherNamespace")
        },
    );

    // The platform team gives team-b its domains: allowed, with a warning for the name that
    // would stop being published, which then leaves DNS.
    let domains = cluster.kubectl(&[
        "annotate",
        "namespace",
        "team-b",
        "gateway-dns.io/allowed-hostnames=*.b.example.com",
    ]);
    assert!(domains.success, "{domains:?}");
    assert_eq!(
        warnings(&domains),
        [
            "Warning: HostnameNotAllowedForNamespace: HTTPRoute/team-b/api would no longer \
             publish api.example.com: api.example.com is not among the hostnames namespace \
             team-b may publish (*.b.example.com), so it is not published; use one of them, or \
             ask the platform team to add it to the Namespace annotation \
             gateway-dns.io/allowed-hostnames"
        ],
        "{domains:?}"
    );
    serve
        .wait_answer("api.example.com", "A", &[], Duration::from_secs(20))
        .await;
    assert_eq!(serve.dig("app.example.com", "A").await, ["203.0.113.10"]);
    // A new route outside the domains is denied; one inside them is published.
    let outside = cluster.apply(&route("team-b", "more", "more.example.com"), &[]);
    assert!(
        !outside.success && outside.stderr.contains("HostnameNotAllowedForNamespace"),
        "{outside:?}"
    );
    let inside = cluster.apply(&route("team-b", "shop", "shop.b.example.com"), &[]);
    assert!(inside.success, "{inside:?}");
    serve
        .wait_answer(
            "shop.b.example.com",
            "A",
            &["203.0.113.10"],
            Duration::from_secs(20),
        )
        .await;

    // Only Namespace updates that change a hostname annotation reach the webhook (its
    // matchConditions): a label, or another tool's annotation, is never sent to it.
    let reviewed = || async {
        serve
            .metric("gateway_dns_admission_requests_total{outcome=\"allowed\"}")
            .await
            .unwrap_or_default()
    };
    let before = reviewed().await;
    for change in [
        &["label", "namespace", "team-b", "team=b"][..],
        &[
            "annotate",
            "namespace",
            "team-b",
            "example.com/owner=someone",
        ][..],
    ] {
        let run = cluster.kubectl(change);
        assert!(run.success && warnings(&run).is_empty(), "{run:?}");
    }
    assert_eq!(
        reviewed().await,
        before,
        "other Namespace changes were sent"
    );
    let narrower = cluster.kubectl(&[
        "annotate",
        "--overwrite",
        "namespace",
        "team-b",
        "gateway-dns.io/allowed-hostnames=*.b.example.com,extra.example.com",
    ]);
    assert!(narrower.success, "{narrower:?}");
    assert_eq!(
        reviewed().await,
        before + 1.0,
        "the annotation change was reviewed"
    );
    serve.assert_running();
}
