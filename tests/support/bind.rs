//! A real BIND 9 (`named`, Debian package bind9) on 127.0.0.1 at a free port, in a temp dir:
//! one primary zone, a TSIG key, allow-update and allow-transfer for that key; or a secondary
//! pulling a zone from gateway-dns's embedded server.

use std::fs;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::dig;
use super::net::{free_port, require_binary, wait_until};

pub const KEY_NAME: &str = "gateway-dns-key";
/// base64 of 32 fixed bytes; tests are about behaviour, not key secrecy.
pub const SECRET: &str = "Z2F0ZXdheS1kbnMtdGVzdC1zZWNyZXQtMzItYnl0ZXM=";

pub struct Bind {
    pub dir: tempfile::TempDir,
    pub port: u16,
    pub zone: String,
    pub algorithm: String,
    /// Key names besides [`KEY_NAME`] that may update the zone.
    writers: Vec<String>,
    /// Where BIND sends NOTIFY after each change.
    notify: Vec<SocketAddr>,
    child: Option<Child>,
}

/// named.conf's options (and no control channel) for a server on 127.0.0.1:`port` whose files
/// are in `root`, with `extra` option lines.
fn options(root: &str, port: u16, extra: &str) -> String {
    format!(
        r#"options {{
    directory "{root}";
    listen-on port {port} {{ 127.0.0.1; }};
    listen-on-v6 {{ none; }};
    pid-file none;
    session-keyfile none;
    recursion no;
    notify no;
    dnssec-validation no;
{extra}}};
controls {{ }};
"#
    )
}

/// named.conf of a primary for `zone` that `keys` may update (unless `refused`) and transfer,
/// logging each UPDATE with its signer.
fn primary_conf(
    root: &str,
    port: u16,
    zone: &str,
    algorithm: &str,
    keys: &[&str],
    refused: bool,
    notify: &[SocketAddr],
) -> String {
    let key_blocks: String = keys
        .iter()
        .map(|key| format!("key \"{key}\" {{ algorithm {algorithm}; secret \"{SECRET}\"; }};\n"))
        .collect();
    let key_list: String = keys.iter().map(|key| format!("key \"{key}\"; ")).collect();
    let update = if refused {
        "none; ".to_string()
    } else {
        key_list.clone()
    };
    let options = options(root, port, "    max-journal-size unlimited;\n");
    // NOTIFY to each of `notify` after every change (BIND's also-notify).
    let notify = if notify.is_empty() {
        String::new()
    } else {
        let targets: String = notify
            .iter()
            .map(|addr| format!("{} port {}; ", addr.ip(), addr.port()))
            .collect();
        // notify-delay 0: BIND otherwise holds a zone's NOTIFY up to 5s after the last one.
        format!("    notify explicit;\n    notify-delay 0;\n    also-notify {{ {targets}}};\n")
    };
    format!(
        r#"{options}{key_blocks}zone "{zone}" {{
    type primary;
    file "{root}/{zone}.zone";
    allow-update {{ {update}}};
    allow-transfer {{ {key_list}}};
{notify}}};
"#
    )
}

impl Bind {
    /// Start BIND serving `zone` (e.g. `example.com`) with `extra` zone-file lines seeded.
    pub fn start(zone: &str, extra: &str) -> Bind {
        Self::start_with_algorithm(zone, extra, "hmac-sha256")
    }

    pub fn start_with_algorithm(zone: &str, extra: &str, algorithm: &str) -> Bind {
        Self::start_with_keys(zone, extra, algorithm, &[])
    }

    /// [`Bind::start`] that also lets each of `writers` (key names, with the same secret)
    /// update the zone, so that its log tells which writer sent each UPDATE.
    pub fn start_with_keys(zone: &str, extra: &str, algorithm: &str, writers: &[&str]) -> Bind {
        Self::start_full(zone, extra, algorithm, writers, &[])
    }

    /// [`Bind::start`] that sends NOTIFY to each of `notify` after every change.
    pub fn start_notifying(zone: &str, extra: &str, notify: &[SocketAddr]) -> Bind {
        Self::start_full(zone, extra, "hmac-sha256", &[], notify)
    }

    fn start_full(
        zone: &str,
        extra: &str,
        algorithm: &str,
        writers: &[&str],
        notify: &[SocketAddr],
    ) -> Bind {
        let dir = tempfile::tempdir().expect("temp dir");
        let port = free_port();
        let mut keys: Vec<&str> = vec![KEY_NAME];
        keys.extend_from_slice(writers);
        let conf = primary_conf(
            &dir.path().display().to_string(),
            port,
            zone,
            algorithm,
            &keys,
            false,
            notify,
        );
        fs::write(dir.path().join("named.conf"), conf).expect("write named.conf");
        let zone_file = format!(
            "$TTL 300\n@ IN SOA ns1.{zone}. hostmaster.{zone}. 1 3600 600 86400 60\n@ IN NS ns1.{zone}.\nns1 IN A 127.0.0.1\n{extra}\n"
        );
        fs::write(dir.path().join(format!("{zone}.zone")), zone_file).expect("write zone");
        let mut bind = Bind {
            dir,
            port,
            zone: zone.to_string(),
            algorithm: algorithm.to_string(),
            writers: writers.iter().map(|w| w.to_string()).collect(),
            notify: notify.to_vec(),
            child: None,
        };
        bind.resume();
        bind
    }

    /// Refuses every UPDATE (REFUSED), or accepts them again: the configuration is rewritten
    /// and reloaded (SIGHUP), as an operator freezing the zone would.
    pub fn set_updates_refused(&self, refused: bool) {
        let mut keys: Vec<&str> = vec![KEY_NAME];
        keys.extend(self.writers.iter().map(String::as_str));
        let root = self.dir.path().display().to_string();
        let conf = primary_conf(
            &root,
            self.port,
            &self.zone,
            &self.algorithm,
            &keys,
            refused,
            &self.notify,
        );
        fs::write(self.dir.path().join("named.conf"), conf).expect("write named.conf");
        self.reload();
    }

    /// Makes BIND read its configuration again (SIGHUP).
    fn reload(&self) {
        let pid = self.child.as_ref().expect("BIND running").id();
        let status = Command::new("kill")
            .args(["-HUP", &pid.to_string()])
            .status()
            .expect("kill -HUP");
        assert!(status.success(), "kill -HUP {pid}");
    }

    /// Listens on `ip` too (e.g. a test node's address, for pods), same port: the configuration
    /// is rewritten and reloaded (SIGHUP). Returns once the zone answers there.
    pub fn also_listen_on(&self, ip: std::net::IpAddr) {
        let path = self.dir.path().join("named.conf");
        let conf = fs::read_to_string(&path).expect("read named.conf");
        let from = format!("listen-on port {} {{ 127.0.0.1; }};", self.port);
        assert!(conf.contains(&from), "named.conf listens elsewhere already");
        let to = format!("listen-on port {} {{ 127.0.0.1; {ip}; }};", self.port);
        fs::write(&path, conf.replace(&from, &to)).expect("write named.conf");
        self.reload();
        let addr = SocketAddr::new(ip, self.port);
        wait_until(&format!("BIND on {addr}"), Duration::from_secs(20), || {
            dig::query(addr, &self.zone, "SOA", false).status == "NOERROR"
        });
    }

    /// The source address of each UPDATE BIND applied, in order, from its log.
    pub fn update_sources(&self) -> Vec<String> {
        let log = fs::read_to_string(self.log_path()).unwrap_or_default();
        log.lines()
            .filter(|line| line.contains("updating zone"))
            .filter_map(|line| {
                let client = line.split("client @").nth(1)?;
                let address = client.split_whitespace().nth(1)?;
                Some(address.split('#').next()?.to_string())
            })
            .collect()
    }

    /// Start BIND on `port` as a secondary of `zone`, pulling it from `primary` with the key
    /// (the hidden-primary setup of docs/install.md); returns once it serves the zone.
    pub fn start_secondary(zone: &str, port: u16, primary: SocketAddr) -> Bind {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().display().to_string();
        let (primary_ip, primary_port) = (primary.ip(), primary.port());
        let options = options(&root, port, "");
        let conf = format!(
            r#"{options}key "{KEY_NAME}" {{ algorithm hmac-sha256; secret "{SECRET}"; }};
zone "{zone}" {{
    type secondary;
    file "{root}/{zone}.secondary";
    primaries {{ {primary_ip} port {primary_port} key "{KEY_NAME}"; }};
}};
"#
        );
        fs::write(dir.path().join("named.conf"), conf).expect("write named.conf");
        let mut bind = Bind {
            dir,
            port,
            zone: zone.to_string(),
            algorithm: "hmac-sha256".to_string(),
            writers: Vec::new(),
            notify: Vec::new(),
            child: None,
        };
        bind.resume();
        bind
    }

    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("named.log")
    }

    /// Start (again) on the same port with the same files (zone journal included).
    pub fn resume(&mut self) {
        assert!(self.child.is_none(), "BIND already running");
        let named = require_binary("named", "bind9");
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .expect("open named.log");
        let child = Command::new(named)
            .arg("-g")
            .args(["-n", "2"])
            .arg("-c")
            .arg(self.dir.path().join("named.conf"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log handle"))
            .stderr(log)
            .spawn()
            .expect("spawn named");
        self.child = Some(child);
        let addr = self.addr();
        let zone = self.zone.clone();
        let log_path = self.log_path();
        wait_until(
            &format!("BIND on {addr} (log: {})", log_path.display()),
            Duration::from_secs(20),
            || {
                if let Some(child) = self.child.as_mut()
                    && let Ok(Some(status)) = child.try_wait()
                {
                    panic!(
                        "named exited with {status}: {}",
                        fs::read_to_string(&log_path).unwrap_or_default()
                    );
                }
                dig::query(addr, &zone, "SOA", false).status == "NOERROR"
                    && dig::query(addr, &zone, "SOA", true).status == "NOERROR"
            },
        );
    }

    /// Kill the server (the zone's journal stays on disk).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Every record of the zone, by zone transfer (AXFR, signed with the key), in BIND's order.
    pub fn axfr(&self) -> Vec<dig::Rr> {
        let output = Command::new(require_binary("dig", "bind9-dnsutils"))
            .arg("@127.0.0.1")
            .args(["-p", &self.port.to_string()])
            .args(["-y", &format!("{}:{KEY_NAME}:{SECRET}", self.algorithm)])
            .args(["+noall", "+answer", "+time=5", "+tries=1"])
            .arg(&self.zone)
            .arg("AXFR")
            .output()
            .expect("run dig");
        let text = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success() && !text.contains("Transfer failed"),
            "AXFR of {} failed: {text}{}",
            self.zone,
            String::from_utf8_lossy(&output.stderr)
        );
        dig::parse(&format!(";; ANSWER SECTION:\n{text}")).answer
    }

    /// `gateway-dns serve` arguments that write to this zone through RFC 2136 and TSIG; the
    /// secret goes in the environment ([`Bind::serve_env`]), as in a cluster.
    pub fn serve_args(&self) -> Vec<String> {
        [
            "--provider",
            "rfc2136",
            "--zone",
            &self.zone,
            "--rfc2136-server",
            &self.addr().to_string(),
            "--rfc2136-tsig-key-name",
            KEY_NAME,
            "--rfc2136-tsig-algorithm",
            &self.algorithm,
        ]
        .map(String::from)
        .to_vec()
    }

    pub fn serve_env(&self) -> [(&'static str, &'static str); 1] {
        [("GATEWAY_DNS_RFC2136_TSIG_SECRET", SECRET)]
    }

    pub fn tsig_key(&self) -> gateway_dns::tsig::TsigKey {
        gateway_dns::tsig::TsigKey::from_base64(
            KEY_NAME,
            self.algorithm.parse().expect("algorithm"),
            SECRET,
        )
        .expect("tsig key")
    }

    pub fn provider_config(&self) -> gateway_dns::dns::provider::rfc2136::Rfc2136Config {
        gateway_dns::dns::provider::rfc2136::Rfc2136Config::new(
            self.addr(),
            vec![self.zone.clone()],
            Some(self.tsig_key()),
        )
    }
}

impl Drop for Bind {
    fn drop(&mut self) {
        self.stop();
    }
}
