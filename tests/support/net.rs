//! Loopback ports and bounded waiting.

use std::net::{TcpListener, UdpSocket};
use std::time::{Duration, Instant};

/// A loopback port free for both UDP and TCP right now (DNS servers need both).
pub fn free_port() -> u16 {
    for _ in 0..100 {
        let Ok(udp) = UdpSocket::bind("127.0.0.1:0") else {
            continue;
        };
        let Ok(addr) = udp.local_addr() else {
            continue;
        };
        if TcpListener::bind(addr).is_ok() {
            return addr.port();
        }
    }
    panic!("no free loopback port for UDP+TCP after 100 tries");
}

/// Poll `ready` until it is true or `limit` passes; panics with `what` on timeout.
pub fn wait_until(what: &str, limit: Duration, mut ready: impl FnMut() -> bool) {
    let start = Instant::now();
    while start.elapsed() < limit {
        if ready() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{what}: not ready after {limit:?}");
}

/// The binary's path, or a failure telling which Debian package provides it.
pub fn require_binary(name: &str, package: &str) -> std::path::PathBuf {
    for dir in [
        "/usr/sbin",
        "/usr/bin",
        "/sbin",
        "/bin",
        "/usr/local/sbin",
        "/usr/local/bin",
    ] {
        let path = std::path::Path::new(dir).join(name);
        if path.exists() {
            return path;
        }
    }
    panic!(
        "`{name}` not found: install the Debian package `{package}` (apt-get install {package})"
    );
}
