//! A real PowerDNS authoritative server (`pdns_server`, Debian packages pdns-server and
//! pdns-backend-sqlite3) on 127.0.0.1 at free ports, in a temp dir: gsqlite3 backend with the
//! schema the package ships, one zone, the HTTP API enabled with a key.

use std::fs;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::dig;
use super::net::{free_port, require_binary, wait_until};

pub const API_KEY: &str = "gateway-dns-test-api-key";

const SCHEMA_PATHS: [&str; 2] = [
    "/usr/share/pdns-backend-sqlite3/schema/schema.sqlite3.sql",
    "/usr/share/doc/pdns-backend-sqlite3/schema.sqlite3.sql",
];

pub struct Pdns {
    pub dir: tempfile::TempDir,
    pub dns_port: u16,
    pub api_port: u16,
    pub zone: String,
    child: Option<Child>,
}

impl Pdns {
    /// Start PowerDNS serving `zone`, with `seed` records as (name, type, ttl, content) given
    /// in pdnsutil's syntax (content of TXT records quoted).
    pub fn start(zone: &str, seed: &[(&str, &str, u32, &str)]) -> Pdns {
        let pdns_server = require_binary("pdns_server", "pdns-server");
        let pdnsutil = require_binary("pdnsutil", "pdns-server");
        let sqlite3 = require_binary("sqlite3", "sqlite3");
        let schema = SCHEMA_PATHS
            .iter()
            .map(Path::new)
            .find(|p| p.exists())
            .unwrap_or_else(|| {
                panic!("PowerDNS sqlite3 schema not found: install the Debian package `pdns-backend-sqlite3`")
            });
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().display().to_string();
        let db = dir.path().join("pdns.sqlite3");
        let status = Command::new(sqlite3)
            .arg(&db)
            .stdin(fs::File::open(schema).expect("open schema"))
            .status()
            .expect("run sqlite3");
        assert!(status.success(), "creating the PowerDNS database failed");

        let dns_port = free_port();
        let api_port = loop {
            let port = free_port();
            if port != dns_port {
                break port;
            }
        };
        let conf = format!(
            "launch=gsqlite3\ngsqlite3-database={db}\nlocal-address=127.0.0.1\nlocal-port={dns_port}\n\
             api=yes\napi-key={API_KEY}\nwebserver=yes\nwebserver-address=127.0.0.1\n\
             webserver-port={api_port}\nwebserver-allow-from=127.0.0.0/8\nsocket-dir={root}\n\
             daemon=no\nguardian=no\ndisable-syslog=yes\ncache-ttl=0\nquery-cache-ttl=0\n\
             negquery-cache-ttl=0\nzone-cache-refresh-interval=0\nloglevel=4\n",
            db = db.display()
        );
        fs::write(dir.path().join("pdns.conf"), conf).expect("write pdns.conf");

        let util = |args: &[&str]| {
            let output = Command::new(&pdnsutil)
                .arg(format!("--config-dir={root}"))
                .args(args)
                .output()
                .expect("run pdnsutil");
            assert!(
                output.status.success(),
                "pdnsutil {args:?} failed: {}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        };
        util(&["create-zone", zone, &format!("ns1.{zone}")]);
        for (name, rtype, ttl, content) in seed {
            util(&["add-record", zone, name, rtype, &ttl.to_string(), content]);
        }

        let log = fs::File::create(dir.path().join("pdns.log")).expect("log file");
        let child = Command::new(pdns_server)
            .arg(format!("--config-dir={root}"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log handle"))
            .stderr(log)
            .spawn()
            .expect("spawn pdns_server");
        let mut pdns = Pdns {
            dir,
            dns_port,
            api_port,
            zone: zone.to_string(),
            child: Some(child),
        };
        let addr = pdns.dns_addr();
        let api = pdns.api_addr();
        let log_path = pdns.log_path();
        let zone = zone.to_string();
        wait_until("PowerDNS", Duration::from_secs(20), || {
            if let Some(child) = pdns.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                panic!(
                    "pdns_server exited with {status}: {}",
                    fs::read_to_string(&log_path).unwrap_or_default()
                );
            }
            TcpStream::connect_timeout(&api, Duration::from_millis(200)).is_ok()
                && dig::query(addr, &zone, "SOA", false).status == "NOERROR"
        });
        pdns
    }

    pub fn dns_addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.dns_port))
    }

    pub fn api_addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.api_port))
    }

    pub fn api_url(&self) -> String {
        format!("http://{}", self.api_addr())
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("pdns.log")
    }
}

impl Drop for Pdns {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
