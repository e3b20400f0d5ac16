//! The status page in a real browser (headless Chromium over WebDriver), served by a real
//! `gateway-dns serve` over the seed story on a real API server: the conflict on
//! `b.example.com` with the route that keeps the name and the owner id, the filters narrowing
//! the table (typed, and through the form's own URL), a name's page equal to `explain --output
//! json`, and axe-core's accessibility check of every page. Screenshots are taken of the
//! overview and a name's page; `GATEWAY_DNS_WRITE_SCREENSHOTS=1` writes them to docs/images/.

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::browser::Browser;
use crate::support::cluster::{ControlPlane, Serve, repo_root};

/// `/status.json` once it shows `records` records.
fn status_with_records(base: &str, records: usize, serve: &Serve) -> Value {
    let start = Instant::now();
    loop {
        let status: Option<Value> = ureq::get(&format!("{base}/status.json"))
            .call()
            .ok()
            .and_then(|mut r| r.body_mut().read_json().ok());
        if let Some(status) = status
            && status["overview"]["records"] == records
        {
            return status;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the status page never showed {records} records\n{}",
            serve.log_tail()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn png(bytes: &[u8], name: &str) {
    assert!(
        bytes.starts_with(b"\x89PNG\r\n\x1a\n") && bytes.len() > 10_000,
        "{name}: not a screenshot ({} bytes)",
        bytes.len()
    );
    if std::env::var_os("GATEWAY_DNS_WRITE_SCREENSHOTS").is_some() {
        std::fs::write(repo_root().join("docs/images").join(name), bytes).unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_page_shows_the_seed_story_in_a_real_browser() {
    let cluster = ControlPlane::start();
    cluster.seed_story_without_webhook();
    let serve = Serve::start(
        &cluster.kubeconfig(),
        "status-0",
        &["--zone", "example.com", "--txt-owner-id", "west"],
    );
    serve.wait_ready(Duration::from_secs(60)).await;
    let base = format!("http://{}", serve.metrics);
    let status = status_with_records(&base, 2, &serve);
    let browser = tokio::task::block_in_place(Browser::start);

    tokio::task::block_in_place(|| {
        // The overview: its counts are /status.json's.
        browser.open(&format!("{base}/"));
        assert_eq!(browser.text("#count-records"), "2");
        assert_eq!(
            browser.text("#count-findings"),
            status["overview"]["findings"].to_string()
        );
        assert!(
            browser
                .text("#findings-by-reason")
                .contains("HostnameConflict")
        );
        png(&browser.screenshot(), "status-overview.png");
        let mut violations = browser.accessibility_violations();

        // The names table: b.example.com kept by b1 through gw1, under this owner id, with
        // the conflict b2 lost.
        browser.open(&format!("{base}/names"));
        let row = browser.text(r#"tr[data-name="b.example.com"]"#);
        for shown in [
            "HTTPRoute/apps/b1",
            "infra/gw1",
            "203.0.113.10",
            "west",
            "HostnameConflict",
        ] {
            assert!(row.contains(shown), "{shown} not in the row: {row}");
        }
        assert!(!row.contains("HTTPRoute/apps/b2"), "{row}");
        let visible = || {
            browser
                .run(
                    "return Array.from(document.querySelectorAll('#names tbody tr'))
                        .filter(r => !r.hidden).map(r => r.dataset.name);",
                    json!([]),
                )
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        };
        let all = visible();
        assert!(all.len() >= 3, "{all:?}");
        violations.extend(browser.accessibility_violations());
        // Typing narrows the rows at once ...
        browser.type_into("#filter-text", "b.exam");
        assert_eq!(visible(), ["b.example.com"]);
        // ... and the form's filter is a URL of its own.
        browser.run(
            "document.querySelector('select[name=reason]').value = 'HostnameConflict';
             document.querySelector('form.filters').submit();",
            json!([]),
        );
        let start = Instant::now();
        while !browser.url().contains("reason=HostnameConflict") {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "{}",
                browser.url()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let filtered = browser.url();
        assert_eq!(visible(), ["b.example.com"], "{filtered}");
        browser.open(&filtered);
        assert_eq!(visible(), ["b.example.com"]);
        assert!(browser.text("#names-summary").starts_with("1 of "));

        // The findings, by namespace, with the webhook's line.
        browser.open(&format!("{base}/findings"));
        assert!(browser.text("main").contains("HTTPRoute/apps/b2"));
        violations.extend(browser.accessibility_violations());

        // A name's page says what `explain` says.
        browser.open(&format!("{base}/names/b.example.com"));
        assert!(
            browser
                .text("#verdict")
                .contains("kept by HTTPRoute/apps/b1")
        );
        let page: Value = serde_json::from_str(&browser.text("#explain-json")).unwrap();
        let explained = Command::new(env!("CARGO_BIN_EXE_gateway-dns"))
            .args([
                "explain",
                "b.example.com",
                "--output",
                "json",
                "--kubeconfig",
            ])
            .arg(cluster.kubeconfig())
            .env_remove("KUBECONFIG")
            .output()
            .unwrap();
        let mut cli: Value = serde_json::from_slice(&explained.stdout)
            .unwrap_or_else(|e| panic!("{e}: {explained:?}"));
        let mut page = page;
        // The provider part differs by design: explain lists the provider it is given, the page
        // lists none.
        for v in [&mut cli, &mut page] {
            v.as_object_mut().unwrap().remove("provider");
        }
        assert_eq!(page, cli);
        png(&browser.screenshot(), "status-name.png");
        violations.extend(browser.accessibility_violations());
        assert!(violations.is_empty(), "axe-core: {violations:#?}");
    });
    drop(browser);
}
