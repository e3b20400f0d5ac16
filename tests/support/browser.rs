//! Headless Chromium driven over WebDriver (Debian's `chromium` and `chromium-driver`), and
//! axe-core (npm, `tests/browser/package.json`) to check a page's accessibility in it.
//! `scripts/test.sh` installs both; `GATEWAY_DNS_AXE` names axe-core's `axe.min.js`.

use std::os::unix::process::CommandExt as _;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::net::free_port;

const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
const CHROMIUM: &str = "/usr/bin/chromium";

/// A chromedriver on a loopback port and one browser session in it. Dropping it ends the
/// session (which stops the browser) and then chromedriver's whole process group.
pub struct Browser {
    driver: Option<Child>,
    base: String,
    session: String,
    _profile: tempfile::TempDir,
}

impl Browser {
    pub fn start() -> Browser {
        for tool in [CHROMEDRIVER, CHROMIUM] {
            assert!(
                std::path::Path::new(tool).exists(),
                "{tool} is missing: scripts/test.sh installs Debian's chromium and chromium-driver"
            );
        }
        let port = free_port();
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .arg("--allowed-ips=127.0.0.1")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // Its own process group, so that a browser it leaves behind goes with it.
            .process_group(0)
            .spawn()
            .expect("chromedriver starts");
        let profile = tempfile::Builder::new()
            .prefix("gateway-dns-chromium-")
            .tempdir()
            .unwrap();
        // The guard first: a failure below still stops chromedriver.
        let mut browser = Browser {
            driver: Some(driver),
            base: format!("http://127.0.0.1:{port}"),
            session: String::new(),
            _profile: profile,
        };
        let start = Instant::now();
        while ureq::get(&format!("{}/status", browser.base))
            .call()
            .is_err()
        {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "chromedriver did not answer on {}",
                browser.base
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let created = browser.post(
            "/session",
            json!({"capabilities": {"alwaysMatch": {
                "browserName": "chrome",
                "goog:chromeOptions": {
                    "binary": CHROMIUM,
                    "args": [
                        "--headless=new", "--no-sandbox", "--disable-gpu",
                        "--disable-dev-shm-usage", "--window-size=1280,900",
                        "--no-first-run", "--disable-background-networking",
                        "--disable-component-update", "--disable-sync",
                        format!("--user-data-dir={}", browser._profile.path().display()),
                    ]
                }
            }}}),
        );
        browser.session = created["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {created}"))
            .to_owned();
        browser
    }

    fn post(&self, path: &str, body: Value) -> Value {
        let url = format!("{}{path}", self.base);
        let mut response = ureq::post(&url)
            .config()
            .http_status_as_error(false)
            .build()
            .send_json(&body)
            .unwrap_or_else(|e| panic!("POST {url}: {e}"));
        let value: Value = response.body_mut().read_json().unwrap();
        assert!(
            response.status().is_success(),
            "POST {path} {body}: {value}"
        );
        value["value"].clone()
    }

    fn get(&self, path: &str) -> Value {
        let url = format!("{}{path}", self.base);
        let mut response = ureq::get(&url)
            .config()
            .http_status_as_error(false)
            .build()
            .call()
            .unwrap_or_else(|e| panic!("GET {url}: {e}"));
        let value: Value = response.body_mut().read_json().unwrap();
        assert!(response.status().is_success(), "GET {path}: {value}");
        value["value"].clone()
    }

    fn session(&self, path: &str) -> String {
        format!("/session/{}{path}", self.session)
    }

    pub fn open(&self, url: &str) {
        self.post(&self.session("/url"), json!({ "url": url }));
    }

    pub fn url(&self) -> String {
        self.get(&self.session("/url")).as_str().unwrap().to_owned()
    }

    /// Runs `script` (a function body) with `args` and returns what it returns.
    pub fn run(&self, script: &str, args: Value) -> Value {
        self.post(
            &self.session("/execute/sync"),
            json!({ "script": script, "args": args }),
        )
    }

    /// The text of the first element `selector` finds (empty when none does).
    pub fn text(&self, selector: &str) -> String {
        self.run(
            "const e = document.querySelector(arguments[0]); return e ? e.textContent : '';",
            json!([selector]),
        )
        .as_str()
        .unwrap_or_default()
        .to_owned()
    }

    /// Types `text` into the element `selector` finds, as a person would (key events).
    pub fn type_into(&self, selector: &str, text: &str) {
        let found = self.post(
            &self.session("/element"),
            json!({ "using": "css selector", "value": selector }),
        );
        let id = found
            .as_object()
            .and_then(|o| o.values().next())
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("no element {selector}: {found}"))
            .to_owned();
        self.post(
            &self.session(&format!("/element/{id}/value")),
            json!({ "text": text }),
        );
    }

    /// A PNG of the window.
    pub fn screenshot(&self) -> Vec<u8> {
        let encoded = self.get(&self.session("/screenshot"));
        data_encoding::BASE64
            .decode(encoded.as_str().unwrap().as_bytes())
            .unwrap()
    }

    /// axe-core's WCAG 2 A and AA violations on the current page, as `id: help (n nodes)`.
    pub fn accessibility_violations(&self) -> Vec<String> {
        let axe = std::fs::read_to_string(axe_path()).unwrap();
        self.run(&format!("{axe}\n;return true;"), json!([]));
        let found = self.post(
            &self.session("/execute/async"),
            json!({
                "script": "const done = arguments[arguments.length - 1];
                    axe.run(document, { runOnly: ['wcag2a', 'wcag2aa', 'wcag21aa'] })
                       .then(r => done(r.violations.map(v =>
                           v.id + ': ' + v.help + ' (' + v.nodes.length + ' nodes: ' +
                           v.nodes.map(n => n.target.join(' ')).join(', ') + ')')))
                       .catch(e => done(['axe failed: ' + e]));",
                "args": []
            }),
        );
        found
            .as_array()
            .unwrap_or_else(|| panic!("axe answered {found}"))
            .iter()
            .map(|v| v.as_str().unwrap_or_default().to_owned())
            .collect()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            // Bounded: ending the session stops the browser, and the profile is removed after.
            let _ = ureq::delete(&format!("{}/session/{}", self.base, self.session))
                .config()
                .timeout_global(Some(Duration::from_secs(10)))
                .build()
                .call();
        }
        if let Some(mut driver) = self.driver.take() {
            let _ = Command::new("kill")
                .args(["-TERM", "--", &format!("-{}", driver.id())])
                .status();
            let _ = driver.wait();
        }
    }
}

/// axe-core's script: `GATEWAY_DNS_AXE`, else where scripts/test.sh installs it.
fn axe_path() -> PathBuf {
    let path = std::env::var_os("GATEWAY_DNS_AXE").map_or_else(
        || {
            let cache = std::env::var_os("XDG_CACHE_HOME").map_or_else(
                || PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache"),
                PathBuf::from,
            );
            cache.join("gateway-dns/browser/node_modules/axe-core/axe.min.js")
        },
        PathBuf::from,
    );
    assert!(
        path.exists(),
        "{} is missing: scripts/test.sh installs axe-core (tests/browser/package.json) and sets GATEWAY_DNS_AXE",
        path.display()
    );
    path
}
