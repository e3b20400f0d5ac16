//! Loopback ports and bounded waiting.

use std::net::{TcpListener, UdpSocket};
use std::time::{Duration, Instant};

/// A loopback port free for both UDP and TCP right now (DNS servers need both), never handed
/// out before by this process.
///
/// Chosen below the kernel's ephemeral range (`ip_local_port_range`): a port the kernel picks
/// for `bind(0)` can be given again to any outgoing connection (kubectl's, a client's) between
/// this check and the server's bind, and a test then fails with "address already in use". Ports
/// below that range are never assigned by the kernel on its own.
pub fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<std::collections::BTreeSet<u16>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    let ephemeral_start = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    let mut given = GIVEN
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    // No room below a range that starts low: the kernel's choice, as before.
    if ephemeral_start <= 11_000 {
        for _ in 0..100 {
            let Ok(udp) = UdpSocket::bind("127.0.0.1:0") else {
                continue;
            };
            let Ok(addr) = udp.local_addr() else {
                continue;
            };
            if !given.contains(&addr.port()) && TcpListener::bind(addr).is_ok() {
                given.insert(addr.port());
                return addr.port();
            }
        }
        panic!("no free loopback port for UDP+TCP after 100 tries");
    }
    let (low, high) = (10_000u16, ephemeral_start - 1);
    for _ in 0..1000 {
        let port = fastrand::u16(low..=high);
        if given.contains(&port) {
            continue;
        }
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
        let Ok(_udp) = UdpSocket::bind(addr) else {
            continue;
        };
        if TcpListener::bind(addr).is_ok() {
            given.insert(port);
            return port;
        }
    }
    panic!("no free loopback port for UDP+TCP in {low}-{high} after 1000 tries");
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
