//! What `serve` tells its operators, as a process: each current finding logged once with a
//! summary, enforce-mode denials at INFO, the findings gauges following the seed story (a
//! HostnameConflict at 1, then 0 after the fix), and no secret in a trace-level log.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::support::bind::{Bind, SECRET};
use crate::support::net::{free_port, wait_until};
use crate::support::pdns::{API_KEY, Pdns};
use crate::support::webhook::{HttpsConnection, examples_dir};

/// The `serve` process, killed on drop; its stderr goes to a file.
struct Serve {
    child: Child,
    log: PathBuf,
}

impl Serve {
    fn start(work: &Path, args: &[String], env: &[(&str, &str)]) -> Serve {
        let log = work.join("serve.log");
        let file = std::fs::File::create(&log).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_gateway-dns"))
            .arg("serve")
            .args(args)
            .args(["--log-level", "trace", "--log-format", "json"])
            .env_remove("GATEWAY_DNS_LOG")
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .expect("serve starts");
        Serve { child, log }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The log's JSON lines whose message is `prefix` or starts with `prefix: `.
    fn lines(&self, prefix: &str) -> Vec<serde_json::Value> {
        self.log()
            .lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .filter(|line| {
                line["fields"]["message"].as_str().is_some_and(|message| {
                    message == prefix || message.starts_with(&format!("{prefix}: "))
                })
            })
            .collect()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

/// `/metrics` as text, or "" while the listener is not up.
fn metrics(port: u16) -> String {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return String::new();
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let request = "GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
    if stream.write_all(request.as_bytes()).is_err() {
        return String::new();
    }
    let mut text = String::new();
    let _ = stream.read_to_string(&mut text);
    text
}

/// The value of one series in a Prometheus text answer.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|value| value.trim().parse().ok())
}

const CONFLICTS: &str = "gateway_dns_findings{reason=\"HostnameConflict\"}";

fn assert_no_secret(log: &str, secret: &str, what: &str) {
    assert!(!log.is_empty(), "serve logged nothing");
    assert!(
        !log.contains(secret),
        "the {what} appears in serve's trace-level log"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_logs_each_finding_and_denial_and_the_gauges_follow_the_fix_without_the_tsig_secret()
{
    let work = tempfile::tempdir().unwrap();
    let manifests = work.path().join("cluster");
    copy_dir(&examples_dir().join("cluster"), &manifests);
    // A document of a kind gateway-dns does not read, as a repo of manifests holds.
    std::fs::write(
        manifests.join("config.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: apps}\n",
    )
    .unwrap();
    let bind = Bind::start("example.com", "");
    let (https, metrics_port) = (free_port(), free_port());
    let ca = work.path().join("ca.crt");
    let mut args: Vec<String> = vec![
        "--manifests".into(),
        manifests.display().to_string(),
        "--listen".into(),
        format!("127.0.0.1:{https}"),
        "--metrics-listen".into(),
        format!("127.0.0.1:{metrics_port}"),
        "--service-name".into(),
        "gateway-dns".into(),
        "--service-namespace".into(),
        "gateway-dns-system".into(),
        "--local-ca-out".into(),
        ca.display().to_string(),
    ];
    args.extend(bind.serve_args());
    let serve = Serve::start(work.path(), &args, &bind.serve_env());

    // The seed story: b2 claims b.example.com, which b1 already publishes through another
    // Gateway.
    wait_until(
        "the conflict gauge reads 1",
        Duration::from_secs(60),
        || sample(&metrics(metrics_port), CONFLICTS) == Some(1.0),
    );
    let text = metrics(metrics_port);
    assert_eq!(
        sample(&text, "gateway_dns_findings{reason=\"TooManyParentRefs\"}"),
        Some(0.0),
        "every reason is exported from the start"
    );
    assert!(
        sample(
            &text,
            "gateway_dns_namespace_findings{object_namespace=\"apps\"}"
        )
        .unwrap_or(0.0)
            >= 1.0,
        "{text}"
    );
    wait_until("a sync pass succeeds", Duration::from_secs(30), || {
        sample(
            &metrics(metrics_port),
            "gateway_dns_last_successful_sync_timestamp_seconds",
        )
        .is_some_and(|at| at > 0.0)
    });

    // Each finding once, then the summary.
    let findings = serve.lines("finding");
    let conflicts: Vec<_> = findings
        .iter()
        .filter(|line| line["fields"]["reason"] == "HostnameConflict")
        .collect();
    assert_eq!(conflicts.len(), 1, "logged once: {findings:?}");
    assert_eq!(conflicts[0]["fields"]["hostname"], "b.example.com");
    assert!(
        conflicts[0]["fields"]["object"]
            .as_str()
            .is_some_and(|o| o.starts_with("HTTPRoute/apps/")),
        "{:?}",
        conflicts[0]
    );
    assert!(
        conflicts[0]["fields"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("b.example.com is already served by Gateway")),
        "{:?}",
        conflicts[0]
    );
    // Skipped documents are logged as `check` lists them.
    let skipped = serve.lines("skipped a document gateway-dns does not read");
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert!(
        skipped[0]["fields"]["document"]
            .as_str()
            .is_some_and(|d| d.ends_with("config.yaml: document 1: ConfigMap (v1)")),
        "{:?}",
        skipped[0]
    );

    // The summary counts the findings as `check` does over the same files.
    let summaries = serve.lines("summary");
    let summary = summaries
        .last()
        .unwrap_or_else(|| panic!("no summary line in:\n{}", serve.log()));
    let checked = Command::new(env!("CARGO_BIN_EXE_gateway-dns"))
        .args(["check", "--output", "json"])
        .arg(&manifests)
        .output()
        .unwrap();
    let checked: serde_json::Value = serde_json::from_slice(&checked.stdout).unwrap();
    for count in ["records", "denials", "warnings", "audits"] {
        assert_eq!(
            summary["fields"][count], checked["summary"][count],
            "{count}: {summary} against check's {}",
            checked["summary"]
        );
    }
    assert_eq!(summary["fields"]["denials"], 2, "{summary}");

    // An enforce-mode denial is logged at INFO with the review's uid, the object and reason.
    wait_until("the CA file is written", Duration::from_secs(10), || {
        ca.exists()
    });
    let ca_pem = std::fs::read_to_string(&ca).unwrap();
    let mut connection = HttpsConnection::connect(
        ([127, 0, 0, 1], https).into(),
        &ca_pem,
        "gateway-dns.gateway-dns-system.svc",
    )
    .await
    .unwrap();
    let b2 = connection.example_review("b2-conflict.json").await;
    assert_eq!(b2["allowed"], false, "{b2}");
    wait_until("the denial is logged", Duration::from_secs(10), || {
        !serve.lines("admission denied").is_empty()
    });
    let denied = &serve.lines("admission denied")[0];
    assert_eq!(denied["level"], "INFO");
    assert_eq!(
        denied["fields"]["uid"],
        "7d0b6a3c-0000-4000-8000-0000000000b2"
    );
    assert_eq!(denied["fields"]["object"], "HTTPRoute/apps/b2");
    assert_eq!(denied["fields"]["reason"], "HostnameConflict");
    assert_eq!(denied["fields"]["dry_run"], false);

    // The fix: b1 goes away, the conflict is resolved, the gauge is back at 0.
    let routes_path = manifests.join("routes.yaml");
    let routes = std::fs::read_to_string(&routes_path).unwrap();
    let without_b1: Vec<&str> = routes
        .split("\n---\n")
        .filter(|doc| !doc.contains("name: b1"))
        .collect();
    std::fs::write(&routes_path, without_b1.join("\n---\n")).unwrap();
    wait_until(
        "the conflict gauge reads 0",
        Duration::from_secs(60),
        || sample(&metrics(metrics_port), CONFLICTS) == Some(0.0),
    );
    wait_until("the resolution is logged", Duration::from_secs(10), || {
        serve
            .lines("finding resolved")
            .iter()
            .any(|line| line["fields"]["reason"] == "HostnameConflict")
    });
    assert!(
        serve
            .lines("summary")
            .iter()
            .any(|line| line["fields"]["denials"] == 1),
        "a new summary after the fix: {}",
        serve.log()
    );
    assert_eq!(
        serve
            .lines("finding")
            .iter()
            .filter(|line| line["fields"]["reason"] == "HostnameConflict")
            .count(),
        1,
        "not logged again on every resync"
    );

    assert_no_secret(&serve.log(), SECRET, "TSIG secret");
    // The same secret decoded.
    assert_no_secret(&serve.log(), "gateway-dns-test-secret", "TSIG secret");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trace_level_log_of_syncs_to_powerdns_holds_no_api_key() {
    let work = tempfile::tempdir().unwrap();
    let manifests = work.path().join("cluster");
    copy_dir(&examples_dir().join("cluster"), &manifests);
    let pdns = Pdns::start("example.com", &[]);
    let key_file = work.path().join("pdns-api-key");
    std::fs::write(&key_file, API_KEY).unwrap();
    let metrics_port = free_port();
    let args: Vec<String> = vec![
        "--manifests".into(),
        manifests.display().to_string(),
        "--webhook=false".into(),
        "--metrics-listen".into(),
        format!("127.0.0.1:{metrics_port}"),
        "--provider".into(),
        "pdns".into(),
        "--zone".into(),
        "example.com".into(),
        "--pdns-server".into(),
        pdns.api_url(),
        "--pdns-api-key-file".into(),
        key_file.display().to_string(),
        "--txt-wildcard-replacement".into(),
        "any".into(),
    ];
    let serve = Serve::start(work.path(), &args, &[]);
    // Records written through the API with the key: the requests were made and traced.
    wait_until("a sync pass writes", Duration::from_secs(60), || {
        let text = metrics(metrics_port);
        sample(&text, "gateway_dns_last_successful_sync_timestamp_seconds")
            .is_some_and(|at| at > 0.0)
            && sample(&text, "gateway_dns_sync_changes_total{action=\"create\"}")
                .is_some_and(|n| n > 0.0)
    });
    assert!(
        serve.log().contains("TRACE"),
        "the log is at trace level: {}",
        serve.log()
    );
    assert_no_secret(&serve.log(), API_KEY, "PowerDNS API key");
}
