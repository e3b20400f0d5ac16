//! Real DNS queries with `dig` (Debian package bind9-dnsutils), parsed just enough for tests.

use std::net::SocketAddr;
use std::process::Command;

use super::net::require_binary;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rr {
    pub name: String,
    pub ttl: u32,
    pub rtype: String,
    pub data: String,
}

#[derive(Debug, Clone, Default)]
pub struct Answer {
    /// NOERROR, NXDOMAIN, REFUSED, ...
    pub status: String,
    pub flags: Vec<String>,
    pub answer: Vec<Rr>,
    pub authority: Vec<Rr>,
}

impl Answer {
    pub fn authoritative(&self) -> bool {
        self.flags.iter().any(|f| f == "aa")
    }

    /// Record data of the answer section for `rtype`, sorted (TXT without quotes).
    pub fn data(&self, rtype: &str) -> Vec<String> {
        let mut data: Vec<String> = self
            .answer
            .iter()
            .filter(|rr| rr.rtype == rtype)
            .map(|rr| rr.data.trim_matches('"').to_string())
            .collect();
        data.sort();
        data
    }

    pub fn soa_serial(&self) -> Option<u32> {
        self.answer
            .iter()
            .chain(&self.authority)
            .find(|rr| rr.rtype == "SOA")
            .and_then(|rr| rr.data.split_whitespace().nth(2)?.parse().ok())
    }
}

/// Query `server` for `name`/`rtype` over UDP (or TCP with `tcp`).
pub fn query(server: SocketAddr, name: &str, rtype: &str, tcp: bool) -> Answer {
    query_with(server, name, rtype, &[if tcp { "+tcp" } else { "+notcp" }])
}

/// dig's exit status when no server answered in time.
const NO_REPLY: i32 = 9;

/// Queries sent before giving up on a server that does not reply.
const ATTEMPTS: usize = 3;

/// Query with extra dig options (e.g. `+ignore` to see a truncated UDP answer as is). A query
/// that gets no reply at all is sent again (a loopback datagram can wait past dig's 2 s on a
/// loaded machine); after the last one, the empty answer is returned, its status empty.
pub fn query_with(server: SocketAddr, name: &str, rtype: &str, options: &[&str]) -> Answer {
    let dig = require_binary("dig", "bind9-dnsutils");
    let mut answer = Answer::default();
    for _ in 0..ATTEMPTS {
        let output = Command::new(&dig)
            .arg(format!("@{}", server.ip()))
            .arg("-p")
            .arg(server.port().to_string())
            .args(options)
            .args(["+norec", "+noall", "+comments", "+answer", "+authority"])
            .args(["+time=2", "+tries=1"])
            .arg(name)
            .arg(rtype)
            .output()
            .expect("run dig");
        answer = parse(&String::from_utf8_lossy(&output.stdout));
        if output.status.code() != Some(NO_REPLY) {
            break;
        }
    }
    answer
}

pub fn parse(text: &str) -> Answer {
    let mut answer = Answer::default();
    let mut section = "";
    for line in text.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix(";; ->>HEADER<<-") {
            if let Some(status) = rest.split("status: ").nth(1) {
                answer.status = status.split(',').next().unwrap_or("").trim().to_string();
            }
        } else if let Some(rest) = line.strip_prefix(";; flags:") {
            let flags = rest.split(';').next().unwrap_or("");
            answer.flags = flags.split_whitespace().map(str::to_string).collect();
        } else if line.starts_with(";; ANSWER SECTION") {
            section = "answer";
        } else if line.starts_with(";; AUTHORITY SECTION") {
            section = "authority";
        } else if line.starts_with(";;") && line.ends_with("SECTION:") {
            section = "";
        } else if !line.is_empty() && !line.starts_with(';') {
            let mut parts = line.split_whitespace();
            let (Some(name), Some(ttl), Some(_class), Some(rtype)) =
                (parts.next(), parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            let rr = Rr {
                name: name.trim_end_matches('.').to_string(),
                ttl: ttl.parse().unwrap_or(0),
                rtype: rtype.to_string(),
                data: parts.collect::<Vec<_>>().join(" "),
            };
            match section {
                "answer" => answer.answer.push(rr),
                "authority" => answer.authority.push(rr),
                _ => {}
            }
        }
    }
    answer
}
