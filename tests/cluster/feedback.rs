//! Feedback where people look, against a real API server with real kubectl: the seed story in
//! audit mode leaves a Warning Event on the losing route that `kubectl describe` shows, and a
//! PolicyReport (`--policy-reports`, with the RBAC of manifests/components/policy-reports) that
//! reads `fail`, back to `pass` after the fix; the conflict coming back updates the Event's series
//! instead of creating another; the report of a deleted route is deleted. The sync loop's writes
//! leave Normal `DNSRecordPublished` and `DNSRecordRemoved` Events on the routes concerned. Of two replicas only
//! the Lease holder emits Events, until the other takes the Lease over.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::cluster::{ControlPlane, Serve, repo_root, seed};

/// Team B's route with another name: no conflict (the internal listener takes any name).
const TEAM_B_FIXED: &str = "
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: web
  namespace: team-b
spec:
  parentRefs:
  - name: internal
    namespace: infra
  hostnames:
  - web.team-b.example.com
";

const CONTROLLER: &str = "gateway-dns.io/gateway-dns";

fn items(cluster: &ControlPlane, resource: &str, namespace: &str) -> Vec<Value> {
    let json = cluster
        .kubectl(&["get", resource, "-n", namespace, "-o", "json"])
        .ok();
    let list: Value = serde_json::from_str(&json).unwrap();
    list["items"].as_array().cloned().unwrap_or_default()
}

/// gateway-dns's Events about `route` in its namespace with `reason`.
fn events(cluster: &ControlPlane, namespace: &str, route: &str, reason: &str) -> Vec<Value> {
    items(cluster, "events.events.k8s.io", namespace)
        .into_iter()
        .filter(|e| {
            e["regarding"]["name"] == route
                && e["reason"] == reason
                && e["reportingController"] == CONTROLLER
        })
        .collect()
}

/// Polls `probe` every 200 ms until it returns Some, for at most `limit`.
fn wait_for<T>(
    what: &str,
    limit: Duration,
    serve: &Serve,
    mut probe: impl FnMut() -> Option<T>,
) -> T {
    let start = Instant::now();
    loop {
        if let Some(found) = probe() {
            return found;
        }
        serve.assert_running();
        assert!(
            start.elapsed() < limit,
            "{what}: not seen after {limit:?}; serve's log ends with:\n{}",
            serve.log_tail()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The PolicyReport whose scope is `route` in `namespace`.
fn report(cluster: &ControlPlane, namespace: &str, route: &str) -> Option<Value> {
    items(cluster, "policyreports.wgpolicyk8s.io", namespace)
        .into_iter()
        .find(|r| r["scope"]["name"] == route && r["scope"]["kind"] == "HTTPRoute")
}

fn results(report: &Value) -> Vec<(String, String)> {
    report["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["rule"].as_str().unwrap_or("").to_string(),
                r["result"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn route_uid(cluster: &ControlPlane, namespace: &str, name: &str) -> String {
    cluster
        .kubectl(&[
            "get",
            "httproute",
            name,
            "-n",
            namespace,
            "-o",
            "jsonpath={.metadata.uid}",
        ])
        .ok()
}

fn start_seed_story(cluster: &ControlPlane, register: Option<&Serve>) {
    cluster.apply(&seed("gateways.yaml"), &[]).ok();
    cluster.gateway_address("infra/public", &["203.0.113.10"]);
    cluster.gateway_address("infra/internal", &["198.51.100.20"]);
    if let Some(serve) = register {
        cluster.register_webhook(&serve.url(), &serve.ca_file());
        cluster.wait_webhook_active("team-a");
    }
    cluster.apply(&seed("team-a.yaml"), &[]).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_audit_mode_the_losing_route_gets_a_warning_event_and_a_failing_policy_report() {
    let cluster = ControlPlane::start();
    cluster.install_gateway_dns_rbac();
    cluster.install_policy_report_crd();
    let rbac = repo_root().join("manifests/components/policy-reports/rbac.yaml");
    cluster
        .kubectl(&["apply", "-f", &rbac.display().to_string()])
        .ok();
    let identity = cluster.service_account_kubeconfig("gateway-dns", "gateway-dns", None);
    let serve = Serve::start(
        &identity,
        "feedback-0",
        &["--zone", "example.com", "--policy-reports"],
    );
    serve.wait_ready(Duration::from_secs(60)).await;
    start_seed_story(&cluster, Some(&serve));
    let limit = Duration::from_secs(30);

    // Team A has a report that passes.
    let team_a = wait_for("team A's report", limit, &serve, || {
        report(&cluster, "team-a", "web")
    });
    assert_eq!(results(&team_a), [(String::new(), "pass".to_string())]);
    assert_eq!(team_a["summary"]["pass"], 1);
    // And a Normal Event once the sync loop has published its name.
    let published = wait_for("team A's DNSRecordPublished", limit, &serve, || {
        events(&cluster, "team-a", "web", "DNSRecordPublished")
            .into_iter()
            .next()
    });
    assert_eq!(published["type"], "Normal");
    assert_eq!(
        published["note"],
        "DNS record app.example.com A 203.0.113.10 published"
    );

    // Team B, in audit mode, gets its conflicting claim in.
    cluster
        .kubectl(&["label", "namespace", "team-b", "gateway-dns.io/mode=audit"])
        .ok();
    let start = Instant::now();
    while !cluster
        .apply(&seed("team-b.yaml"), &["--dry-run=server"])
        .success
    {
        assert!(start.elapsed() < limit, "team-b's audit mode not seen");
        std::thread::sleep(Duration::from_millis(200));
    }
    cluster.apply(&seed("team-b.yaml"), &[]).ok();
    let uid = route_uid(&cluster, "team-b", "web");

    // A Warning Event on the losing route, with our reason and the webhook's message.
    let event = wait_for("the HostnameConflict event", limit, &serve, || {
        events(&cluster, "team-b", "web", "HostnameConflict")
            .into_iter()
            .next()
    });
    assert_eq!(event["type"], "Warning");
    assert_eq!(event["reportingInstance"], "feedback-0");
    assert_eq!(event["regarding"]["kind"], "HTTPRoute");
    assert_eq!(event["regarding"]["uid"], uid.as_str());
    let note = event["note"].as_str().unwrap().to_string();
    assert!(
        note.starts_with("app.example.com is already served by Gateway infra/public"),
        "{note}"
    );
    assert!(
        event["series"].is_null(),
        "a first occurrence has no series"
    );
    let describe = cluster
        .kubectl(&["describe", "httproute", "web", "-n", "team-b"])
        .ok();
    let events_section = describe
        .split("\nEvents:")
        .nth(1)
        .unwrap_or_else(|| panic!("kubectl describe shows no Events:\n{describe}"));
    assert!(
        events_section.contains("Warning")
            && events_section.contains("HostnameConflict")
            && events_section.contains("app.example.com is already served")
            && events_section.contains(CONTROLLER),
        "kubectl describe does not show the event:\n{describe}"
    );

    // A report that fails, owned by the route.
    let failing = wait_for("team B's failing report", limit, &serve, || {
        report(&cluster, "team-b", "web").filter(|r| r["summary"]["fail"] == 1)
    });
    assert_eq!(
        results(&failing),
        [("HostnameConflict".to_string(), "fail".to_string())]
    );
    let result = &failing["results"][0];
    assert_eq!(result["policy"], "gateway-dns");
    assert_eq!(result["source"], "gateway-dns");
    assert_eq!(result["message"], note.as_str());
    assert_eq!(result["properties"]["hostname"], "app.example.com");
    assert_eq!(failing["scope"]["uid"], uid.as_str());
    assert_eq!(
        failing["metadata"]["ownerReferences"][0]["uid"],
        uid.as_str()
    );
    assert_eq!(
        failing["metadata"]["ownerReferences"][0]["kind"],
        "HTTPRoute"
    );
    assert_eq!(
        items(&cluster, "policyreports.wgpolicyk8s.io", "team-b").len(),
        1,
        "one report per route"
    );

    // The fix: back to pass.
    cluster.apply(TEAM_B_FIXED, &[]).ok();
    let passing = wait_for("team B's report back to pass", limit, &serve, || {
        report(&cluster, "team-b", "web").filter(|r| r["summary"]["pass"] == 1)
    });
    assert_eq!(results(&passing), [(String::new(), "pass".to_string())]);
    assert_eq!(passing["summary"]["fail"], 0);
    serve
        .wait_answer(
            "web.team-b.example.com",
            "A",
            &["198.51.100.20"],
            Duration::from_secs(20),
        )
        .await;
    wait_for("team B's DNSRecordPublished", limit, &serve, || {
        events(&cluster, "team-b", "web", "DNSRecordPublished")
            .into_iter()
            .find(|e| e["note"] == "DNS record web.team-b.example.com A 198.51.100.20 published")
    });

    // The conflict comes back: the same Event counts it (series), no second Event.
    cluster.apply(&seed("team-b.yaml"), &[]).ok();
    let repeated = wait_for("the event's series", limit, &serve, || {
        events(&cluster, "team-b", "web", "HostnameConflict")
            .into_iter()
            .find(|e| e["series"]["count"] == 2)
    });
    assert_eq!(repeated["metadata"]["name"], event["metadata"]["name"]);
    assert!(repeated["series"]["lastObservedTime"].is_string());
    wait_for("team B's report failing again", limit, &serve, || {
        report(&cluster, "team-b", "web").filter(|r| r["summary"]["fail"] == 1)
    });
    assert_eq!(
        events(&cluster, "team-b", "web", "HostnameConflict").len(),
        1,
        "a repeat is a series, not a new Event"
    );
    // Its own name, no longer claimed, is deleted from DNS and the route is told.
    wait_for("team B's DNSRecordRemoved", limit, &serve, || {
        events(&cluster, "team-b", "web", "DNSRecordRemoved")
            .into_iter()
            .find(|e| e["note"] == "DNS record web.team-b.example.com A removed")
    });

    // The route deleted: its report goes too (this API server runs no garbage collector).
    cluster
        .kubectl(&["delete", "httproute", "web", "-n", "team-b"])
        .ok();
    wait_for("team B's report deleted", limit, &serve, || {
        report(&cluster, "team-b", "web").is_none().then_some(())
    });
    assert!(report(&cluster, "team-a", "web").is_some());
    // The command docs/troubleshooting.md gives finds them.
    let listed = cluster
        .kubectl(&[
            "get",
            "events",
            "-A",
            "--field-selector",
            &format!("reportingComponent={CONTROLLER}"),
        ])
        .ok();
    assert!(listed.contains("HostnameConflict"), "{listed}");
    serve.assert_running();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_lease_holder_emits_events() {
    let cluster = ControlPlane::start();
    cluster.install_gateway_dns_rbac();
    let identity = cluster.service_account_kubeconfig("gateway-dns", "gateway-dns", None);
    let mut leader = Serve::start(&identity, "replica-a", &["--zone", "example.com"]);
    leader.wait_ready(Duration::from_secs(60)).await;
    let start = Instant::now();
    while leader.metric("gateway_dns_leader").await != Some(1.0) {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "replica-a never led"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let follower = Serve::start(&identity, "replica-b", &["--zone", "example.com"]);
    follower.wait_ready(Duration::from_secs(60)).await;
    assert_eq!(follower.metric("gateway_dns_leader").await, Some(0.0));

    // No webhook registered: the conflict gets in, as if the webhook were bypassed.
    start_seed_story(&cluster, None);
    cluster.apply(&seed("team-b.yaml"), &[]).ok();
    let limit = Duration::from_secs(30);
    wait_for("the leader's event", limit, &leader, || {
        events(&cluster, "team-b", "web", "HostnameConflict")
            .into_iter()
            .find(|e| e["reportingInstance"] == "replica-a")
    });
    // The follower has seen the finding too (its gauge), and a few rounds of its loop pass.
    let start = Instant::now();
    while follower
        .metric("gateway_dns_findings{reason=\"HostnameConflict\"}")
        .await
        != Some(1.0)
    {
        assert!(
            start.elapsed() < limit,
            "the follower never saw the finding"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let from_follower: Vec<Value> = items(&cluster, "events.events.k8s.io", "team-b")
        .into_iter()
        .filter(|e| e["reportingInstance"] == "replica-b")
        .collect();
    assert!(from_follower.is_empty(), "{from_follower:?}");

    // The leader gone, the follower takes the Lease over (after it expires) and reports the
    // findings it now owns.
    leader.kill();
    wait_for(
        "the new leader's event",
        Duration::from_secs(60),
        &follower,
        || {
            events(&cluster, "team-b", "web", "HostnameConflict")
                .into_iter()
                .find(|e| e["reportingInstance"] == "replica-b")
        },
    );
    follower.assert_running();
}
