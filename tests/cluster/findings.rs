//! The seed story in audit mode against a real API server, seen by an operator: team B's
//! namespace is in audit mode (`gateway-dns.io/mode`), its conflicting route is let in, `serve` logs the finding once and sets the findings gauge to 1;
//! once team B drops the route the finding is logged as resolved and the gauge reads 0. At trace
//! level, with a ServiceAccount token in its kubeconfig, the log never holds the token.

use std::time::{Duration, Instant};

use crate::support::cluster::{ControlPlane, Serve, seed};

const CONFLICTS: &str = "gateway_dns_findings{reason=\"HostnameConflict\"}";

async fn wait_metric(serve: &Serve, series: &str, value: f64, limit: Duration) {
    let start = Instant::now();
    while start.elapsed() < limit {
        if serve.metric(series).await == Some(value) {
            return;
        }
        serve.assert_running();
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!(
        "{series} is not {value} after {limit:?} ({:?}); serve's log ends with:\n{}",
        serve.metric(series).await,
        serve.log_tail()
    );
}

/// The log's JSON lines whose message starts with `prefix`.
fn lines(serve: &Serve, prefix: &str) -> Vec<serde_json::Value> {
    serve
        .log()
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|line| {
            line["fields"]["message"]
                .as_str()
                .is_some_and(|message| message.starts_with(prefix))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_audit_mode_the_seed_storys_conflict_is_logged_and_gauged_until_fixed() {
    let cluster = ControlPlane::start();
    cluster.install_gateway_dns_rbac();
    let identity = cluster.service_account_kubeconfig("gateway-dns", "gateway-dns", None);
    let kubeconfig = std::fs::read_to_string(&identity).unwrap();
    let token = kubeconfig
        .lines()
        .find_map(|line| line.trim().strip_prefix("token: "))
        .expect("a token in the ServiceAccount kubeconfig")
        .to_string();
    let serve = Serve::start_with_env(
        &identity,
        "findings",
        // The default --log-format auto: JSON, stderr being a file. GATEWAY_DNS_LOG takes
        // precedence over --log-level (info).
        &["--zone", "example.com"],
        &[("GATEWAY_DNS_LOG", "trace")],
    );
    serve.wait_ready(Duration::from_secs(60)).await;
    cluster.register_webhook(&serve.url(), &serve.ca_file());
    assert_eq!(
        serve.metric(CONFLICTS).await,
        Some(0.0),
        "every reason reads 0 from the start"
    );

    cluster.apply(&seed("gateways.yaml"), &[]).ok();
    cluster.gateway_address("infra/public", &["203.0.113.10"]);
    cluster.gateway_address("infra/internal", &["198.51.100.20"]);
    cluster.wait_webhook_active("team-a");
    cluster.apply(&seed("team-a.yaml"), &[]).ok();
    serve
        .wait_answer(
            "app.example.com",
            "A",
            &["203.0.113.10"],
            Duration::from_secs(20),
        )
        .await;

    // Team B's namespace in audit mode lets its claim in (once serve has seen the label); the
    // conflict exists now, and stays visible.
    cluster
        .kubectl(&["label", "namespace", "team-b", "gateway-dns.io/mode=audit"])
        .ok();
    let start = Instant::now();
    while !cluster
        .apply(&seed("team-b.yaml"), &["--dry-run=server"])
        .success
    {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "team-b's audit mode not seen"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let team_b = cluster.apply(&seed("team-b.yaml"), &[]);
    assert!(team_b.success, "{team_b:?}");
    wait_metric(&serve, CONFLICTS, 1.0, Duration::from_secs(30)).await;
    assert_eq!(
        serve
            .metric("gateway_dns_namespace_findings{object_namespace=\"team-b\"}")
            .await,
        Some(1.0)
    );
    let findings: Vec<_> = lines(&serve, "finding: ")
        .into_iter()
        .filter(|line| line["fields"]["reason"] == "HostnameConflict")
        .collect();
    assert_eq!(findings.len(), 1, "logged once: {findings:?}");
    assert_eq!(findings[0]["fields"]["object"], "HTTPRoute/team-b/web");
    assert_eq!(findings[0]["fields"]["hostname"], "app.example.com");
    assert_eq!(findings[0]["fields"]["action"], "audit");
    assert!(
        !lines(&serve, "audit finding: ").is_empty(),
        "the webhook logged its audit finding"
    );
    // The loser is not published: team A keeps the name.
    assert_eq!(serve.dig("app.example.com", "A").await, ["203.0.113.10"]);

    // The fix: team B drops its route.
    cluster
        .kubectl(&["delete", "httproute", "web", "-n", "team-b"])
        .ok();
    wait_metric(&serve, CONFLICTS, 0.0, Duration::from_secs(30)).await;
    assert_eq!(
        serve
            .metric("gateway_dns_namespace_findings{object_namespace=\"team-b\"}")
            .await,
        Some(0.0)
    );
    assert!(
        lines(&serve, "finding resolved")
            .iter()
            .any(|line| line["fields"]["object"] == "HTTPRoute/team-b/web"),
        "{}",
        serve.log_tail()
    );
    assert!(
        serve
            .log()
            .lines()
            // Team B's audit-mode conflict was the one audit finding.
            .any(|line| line.contains("summary: ") && line.contains(", 0 audit(s)")),
        "{}",
        serve.log_tail()
    );

    let log = serve.log();
    assert!(
        log.lines()
            .all(|line| serde_json::from_str::<serde_json::Value>(line).is_ok()),
        "auto is JSON when stderr is not a terminal"
    );
    assert!(
        log.contains("\"level\":\"TRACE\""),
        "the log is at trace level"
    );
    assert!(
        !log.contains(&token),
        "the ServiceAccount token appears in serve's log"
    );
    // Its signature alone neither.
    let signature = token.rsplit('.').next().unwrap_or(&token);
    assert!(signature.len() > 20 && !log.contains(signature));
    serve.assert_running();
}
