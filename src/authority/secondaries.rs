//! How far each secondary is behind the hidden primary: its SOA serial for every zone, asked a
//! moment after each change (time for the NOTIFY and the transfer it starts) and on an
//! interval. What `serve` exports as `gateway_dns_secondary_serial_lag`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use hickory_proto::op::{Message, Query};
use hickory_proto::rr::{RData, RecordType as WireType};
use tokio::net::UdpSocket;
use tokio::sync::Notify;
use tracing::debug;

use crate::dns::wire::wire_name;

use super::zone::Store;

/// How often the secondaries are asked when nothing changes.
pub const DEFAULT_SECONDARY_CHECK_INTERVAL: Duration = Duration::from_secs(30);

/// After a change, the wait before asking: NOTIFY and the transfer it starts take a moment.
const AFTER_CHANGE: Duration = Duration::from_secs(1);

/// While a secondary is behind, it is asked again this soon, so that catching up shows.
const WHILE_BEHIND: Duration = Duration::from_secs(5);

/// The wait for one SOA answer.
const ANSWER_WAIT: Duration = Duration::from_secs(2);

/// What is known of one secondary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecondaryStatus {
    pub secondary: SocketAddr,
    /// Serials behind the primary, the most over the zones (RFC 1982 arithmetic), from the
    /// last serials it answered: it grows with the primary's changes while the secondary does
    /// not answer. None before the first answer. A secondary that claims a serial ahead of the
    /// primary's counts as not caught up, with 0 here: it will not transfer until the primary
    /// passes it.
    pub behind: Option<u32>,
    /// The last serial it answered, per zone.
    pub known: BTreeMap<String, u32>,
    /// Every zone's serial matched the primary's at the last check.
    pub matched: bool,
    /// When every zone's serial last matched the primary's.
    pub matched_at: Option<Instant>,
    /// When watching began: the lag in seconds of a secondary that never matched counts from
    /// here.
    pub since: Instant,
    /// The last failure to get an answer, cleared by the next answer.
    pub error: Option<String>,
}

impl SecondaryStatus {
    fn new(secondary: SocketAddr, now: Instant) -> Self {
        SecondaryStatus {
            secondary,
            behind: None,
            known: BTreeMap::new(),
            matched: false,
            matched_at: None,
            since: now,
            error: None,
        }
    }

    /// Up to date at the last check.
    pub fn caught_up(&self) -> bool {
        self.error.is_none() && self.matched
    }

    /// The time since this secondary last matched the primary: zero while it does.
    pub fn lag(&self, now: Instant) -> Duration {
        if self.caught_up() {
            return Duration::ZERO;
        }
        now.saturating_duration_since(self.matched_at.unwrap_or(self.since))
    }
}

/// Serials `secondary` is behind `primary` (RFC 1982): None when it is ahead.
pub fn serials_behind(primary: u32, secondary: u32) -> Option<u32> {
    let distance = primary.wrapping_sub(secondary);
    (distance < 1 << 31).then_some(distance)
}

/// The shared table of statuses and the task that fills it.
pub(super) struct SecondaryWatch {
    pub(super) statuses: Arc<Mutex<Vec<SecondaryStatus>>>,
    pub(super) changed: Arc<Notify>,
}

impl SecondaryWatch {
    pub(super) fn new(secondaries: &[SocketAddr]) -> Self {
        let now = Instant::now();
        SecondaryWatch {
            statuses: Arc::new(Mutex::new(
                secondaries
                    .iter()
                    .map(|s| SecondaryStatus::new(*s, now))
                    .collect(),
            )),
            changed: Arc::new(Notify::new()),
        }
    }
}

/// Asks every secondary for every zone's serial, after each change and every `interval`
/// (sooner while one is behind), and records how far behind each is.
pub(super) async fn watch_secondaries(
    store: Arc<RwLock<Store>>,
    statuses: Arc<Mutex<Vec<SecondaryStatus>>>,
    changed: Arc<Notify>,
    interval: Duration,
) {
    let mut wait = Duration::ZERO;
    loop {
        tokio::select! {
            () = changed.notified() => tokio::time::sleep(AFTER_CHANGE).await,
            () = tokio::time::sleep(wait) => {}
        }
        let primary: Vec<(String, u32)> = match store.read() {
            Ok(store) => store
                .zones
                .iter()
                .map(|z| (z.apex.clone(), z.serial))
                .collect(),
            Err(_) => return,
        };
        let secondaries: Vec<SocketAddr> = lock(&statuses).iter().map(|s| s.secondary).collect();
        let mut any_behind = false;
        for secondary in secondaries {
            let mut answers = Vec::new();
            let mut error = None;
            for (apex, _) in &primary {
                match soa_serial(secondary, apex).await {
                    Ok(theirs) => answers.push((apex.clone(), theirs)),
                    Err(e) => error = Some(format!("zone {apex}: {e}")),
                }
            }
            let now = Instant::now();
            let mut statuses = lock(&statuses);
            if let Some(status) = statuses.iter_mut().find(|s| s.secondary == secondary) {
                status.known.extend(answers);
                let mut matched = error.is_none();
                let mut behind: Option<u32> = None;
                for (apex, serial) in &primary {
                    let Some(theirs) = status.known.get(apex) else {
                        matched = false;
                        continue;
                    };
                    matched &= theirs == serial;
                    let this = serials_behind(*serial, *theirs).unwrap_or(0);
                    behind = Some(behind.map_or(this, |most| most.max(this)));
                }
                status.behind = behind;
                status.matched = matched;
                if matched {
                    status.matched_at = Some(now);
                }
                if let Some(e) = &error {
                    debug!(%secondary, error = %e, "embedded DNS: a secondary did not answer its SOA");
                }
                status.error = error;
                any_behind |= !status.caught_up();
            }
        }
        wait = if any_behind {
            interval.min(WHILE_BEHIND)
        } else {
            interval
        };
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// `secondary`'s SOA serial of `apex`, over UDP.
async fn soa_serial(secondary: SocketAddr, apex: &str) -> Result<u32, String> {
    let answer = ask(secondary, apex, WireType::SOA).await?;
    answer
        .answers
        .iter()
        .find_map(|record| match &record.data {
            RData::SOA(soa) => Some(soa.serial),
            _ => None,
        })
        .ok_or_else(|| format!("answered {} without a SOA", answer.metadata.response_code))
}

/// What `server` serves for `name`'s A, AAAA and CNAME records, asked over UDP (TCP when the
/// answer is cut short): each as (type, target), IP addresses as they print, CNAME targets
/// without the root dot. Empty when it has none (NXDOMAIN, or no data); an error when it does not
/// answer, or answers with an error code.
pub async fn address_records(
    server: SocketAddr,
    name: &str,
) -> Result<Vec<(crate::model::RecordType, String)>, String> {
    use crate::model::RecordType;
    use hickory_proto::op::ResponseCode;
    let mut found = Vec::new();
    for (asked, ours) in [
        (WireType::A, RecordType::A),
        (WireType::AAAA, RecordType::AAAA),
        (WireType::CNAME, RecordType::CNAME),
    ] {
        let answer = ask(server, name, asked).await?;
        let code = answer.metadata.response_code;
        if code != ResponseCode::NoError && code != ResponseCode::NXDomain {
            return Err(format!("answered {code} for {name} {asked}"));
        }
        for record in &answer.answers {
            // An answer may carry other names' records too (a CNAME's in-zone target).
            if !record
                .name
                .to_ascii()
                .trim_end_matches('.')
                .eq_ignore_ascii_case(name.trim_end_matches('.'))
            {
                continue;
            }
            let target = match &record.data {
                RData::A(a) if asked == WireType::A => a.to_string(),
                RData::AAAA(aaaa) if asked == WireType::AAAA => aaaa.to_string(),
                RData::CNAME(cname) if asked == WireType::CNAME => cname
                    .0
                    .to_ascii()
                    .trim_end_matches('.')
                    .to_ascii_lowercase(),
                _ => continue,
            };
            found.push((ours, target));
        }
    }
    found.sort();
    found.dedup();
    Ok(found)
}

/// One question to `server` over UDP, asked again over TCP when the answer is cut short.
async fn ask(server: SocketAddr, name: &str, asked: WireType) -> Result<Message, String> {
    let wire = wire_name(name).map_err(|e| e.to_string())?;
    let local: SocketAddr = if server.is_ipv4() {
        SocketAddr::from(([0, 0, 0, 0], 0))
    } else {
        SocketAddr::from(([0u16; 8], 0))
    };
    let socket = UdpSocket::bind(local).await.map_err(|e| e.to_string())?;
    let id = fastrand::u16(..);
    let mut message = Message::query();
    message.metadata.id = id;
    message.metadata.recursion_desired = false;
    message.add_query(Query::query(wire, asked));
    let bytes = message.to_vec().map_err(|e| e.to_string())?;
    socket
        .send_to(&bytes, server)
        .await
        .map_err(|e| e.to_string())?;
    let deadline = tokio::time::Instant::now() + ANSWER_WAIT;
    let mut buffer = [0u8; 4096];
    // Bounded by the deadline: each receive waits at most until then.
    let answer = loop {
        let (len, from) = tokio::time::timeout_at(deadline, socket.recv_from(&mut buffer))
            .await
            .map_err(|_| format!("no answer within {ANSWER_WAIT:?}"))?
            .map_err(|e| e.to_string())?;
        if from != server {
            continue;
        }
        let Ok(answer) = Message::from_vec(&buffer[..len]) else {
            continue;
        };
        if answer.metadata.id == id {
            break answer;
        }
    };
    if !answer.metadata.truncation {
        return Ok(answer);
    }
    tokio::time::timeout_at(deadline, ask_over_tcp(server, &bytes, id))
        .await
        .map_err(|_| format!("no answer over TCP within {ANSWER_WAIT:?}"))?
}

async fn ask_over_tcp(server: SocketAddr, query: &[u8], id: u16) -> Result<Message, String> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut stream = tokio::net::TcpStream::connect(server)
        .await
        .map_err(|e| e.to_string())?;
    let length = u16::try_from(query.len()).map_err(|_| "query too long".to_owned())?;
    let mut framed = length.to_be_bytes().to_vec();
    framed.extend_from_slice(query);
    stream.write_all(&framed).await.map_err(|e| e.to_string())?;
    let mut length = [0u8; 2];
    stream
        .read_exact(&mut length)
        .await
        .map_err(|e| e.to_string())?;
    let mut answer = vec![0u8; usize::from(u16::from_be_bytes(length))];
    stream
        .read_exact(&mut answer)
        .await
        .map_err(|e| e.to_string())?;
    let answer = Message::from_vec(&answer).map_err(|e| e.to_string())?;
    if answer.metadata.id != id {
        return Err("answered another question".to_owned());
    }
    Ok(answer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serials_behind_follow_serial_arithmetic() {
        assert_eq!(serials_behind(10, 10), Some(0));
        assert_eq!(serials_behind(10, 7), Some(3));
        assert_eq!(serials_behind(2, u32::MAX), Some(3));
        assert_eq!(serials_behind(7, 10), None);
    }

    #[test]
    fn lag_counts_from_the_last_match_or_the_start() {
        let start = Instant::now();
        let mut status = SecondaryStatus::new("127.0.0.1:53".parse().unwrap(), start);
        let later = start + Duration::from_secs(40);
        assert_eq!(status.lag(later), Duration::from_secs(40));
        status.behind = Some(0);
        status.matched = true;
        status.matched_at = Some(start + Duration::from_secs(10));
        assert_eq!(status.lag(later), Duration::ZERO);
        status.behind = Some(2);
        status.matched = false;
        assert_eq!(status.lag(later), Duration::from_secs(30));
        status.behind = Some(0);
        status.matched = true;
        status.error = Some("no answer".into());
        assert_eq!(status.lag(later), Duration::from_secs(30));
    }
}
