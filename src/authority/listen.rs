//! The UDP and TCP listeners: receive loops, the UDP answer cache, response rate limiting per
//! source, and TCP connections under the shared connection limits.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::task::JoinSet;
use tokio::time::timeout;
use tracing::debug;

use crate::dns::wire::DNS_HEADER_LEN;
use crate::net::{CapObserver, ConnectionGuard, ConnectionLimits, ConnectionTable};

use super::answer::{answer_bytes, answer_request};
use super::error::Error;
use super::transfer::Transfers;
use super::zone::Store;

/// A TCP query's body (after its length) and its answer must move within this.
pub(super) const QUERY_READ_TIMEOUT: Duration = Duration::from_secs(5);

/// How often a random port (`--dns-listen` with port 0) is drawn again when its TCP side is
/// already taken: the kernel picks the UDP port without looking at TCP.
pub(super) const RANDOM_PORT_TRIES: usize = 16;

/// UDP and TCP on one address and port.
pub(super) async fn bind_pair(
    listen: SocketAddr,
) -> Result<(UdpSocket, TcpListener, SocketAddr), Error> {
    let mut tries = 0;
    loop {
        let udp = UdpSocket::bind(listen)
            .await
            .map_err(|source| Error::Bind {
                addr: listen,
                protocol: "UDP",
                source,
            })?;
        let local_addr = udp.local_addr().map_err(|source| Error::Bind {
            addr: listen,
            protocol: "UDP",
            source,
        })?;
        match TcpListener::bind(local_addr).await {
            Ok(tcp) => return Ok((udp, tcp, local_addr)),
            Err(source)
                if listen.port() == 0
                    && source.kind() == std::io::ErrorKind::AddrInUse
                    && tries + 1 < RANDOM_PORT_TRIES =>
            {
                tries += 1;
            }
            Err(source) => {
                return Err(Error::Bind {
                    addr: local_addr,
                    protocol: "TCP",
                    source,
                });
            }
        }
    }
}

/// UDP receive loops sharing the socket: one per core (at most this many), so that answering
/// is not bound to one thread.
pub(super) const MAX_UDP_RECEIVERS: usize = 8;

pub(super) fn udp_receivers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(MAX_UDP_RECEIVERS))
}

pub(super) async fn serve_udp(
    socket: Arc<UdpSocket>,
    store: Arc<RwLock<Store>>,
    soa_ttl: u32,
    limiter: Arc<Mutex<AnswerRateLimiter>>,
    transfers: Arc<Transfers>,
    generation: Arc<AtomicU64>,
) {
    let mut buffer = vec![0u8; 4096];
    // The receive loops share one budget for their caches.
    let mut cache = AnswerCache::new(ANSWER_CACHE_BYTES / udp_receivers());
    let mut cached = Vec::with_capacity(512);
    // The limit is fixed at start: without one, the lock is never taken.
    let limited = limiter.lock().map_or(true, |limiter| limiter.rate > 0.0);
    loop {
        let (len, peer) = match socket.recv_from(&mut buffer).await {
            Ok(received) => received,
            Err(err) => {
                debug!(error = %err, "embedded DNS: UDP receive failed");
                continue;
            }
        };
        if limited {
            let mut limiter = limiter.lock().unwrap_or_else(PoisonError::into_inner);
            if !limiter.allow(peer.ip(), std::time::Instant::now()) {
                continue;
            }
        }
        let request = &buffer[..len];
        let current = generation.load(Ordering::Acquire);
        if cache.answer_into(request, current, &mut cached) {
            let _ = socket.send_to(&cached, peer).await;
            continue;
        }
        let Some(answered) = answer_request(request, &store, soa_ttl, None, &transfers) else {
            continue;
        };
        if let Some(answer) = answered.messages.first() {
            if answered.repeatable {
                cache.insert(request, answer, current);
            }
            let _ = socket.send_to(answer, peer).await;
        }
    }
}

/// Bytes of requests and answers the receive loops' [`AnswerCache`]s hold at most together
/// (entries count [`ANSWER_CACHE_ENTRY_OVERHEAD`] more each); a full cache starts again empty.
/// About 20,000 answers of a typical size: more than the names of most zones.
pub(super) const ANSWER_CACHE_BYTES: usize = 4 << 20;

pub(super) const ANSWER_CACHE_ENTRY_OVERHEAD: usize = 64;

/// Encoded answers to unsigned UDP requests, by the request's bytes after its ID: the answer
/// is a function of those bytes and the zones alone, so a repeated request gets a copy with
/// its own ID instead of being decoded, looked up and encoded again. Tied to one generation of
/// the zones.
pub(super) struct AnswerCache {
    pub(super) generation: u64,
    pub(super) bytes: usize,
    pub(super) limit: usize,
    pub(super) answers: HashMap<Box<[u8]>, Box<[u8]>>,
}

impl AnswerCache {
    pub(super) fn new(limit: usize) -> Self {
        AnswerCache {
            generation: 0,
            bytes: 0,
            limit,
            answers: HashMap::new(),
        }
    }

    /// Writes the cached answer to `request`, with the request's ID, into `out`; false when
    /// there is none for the zones' `generation`.
    pub(super) fn answer_into(
        &mut self,
        request: &[u8],
        generation: u64,
        out: &mut Vec<u8>,
    ) -> bool {
        if generation != self.generation {
            self.answers.clear();
            self.bytes = 0;
            self.generation = generation;
            return false;
        }
        let (Some(id), Some(key)) = (request.get(..2), request.get(2..)) else {
            return false;
        };
        let Some(answer) = self.answers.get(key) else {
            return false;
        };
        out.clear();
        out.extend_from_slice(id);
        out.extend_from_slice(answer.get(2..).unwrap_or_default());
        true
    }

    pub(super) fn insert(&mut self, request: &[u8], answer: &[u8], generation: u64) {
        let Some(key) = request.get(2..) else {
            return;
        };
        if generation != self.generation || answer.len() < DNS_HEADER_LEN {
            return;
        }
        let size = key.len() + answer.len() + ANSWER_CACHE_ENTRY_OVERHEAD;
        if self.bytes + size > self.limit {
            self.answers.clear();
            self.bytes = 0;
        }
        self.bytes += size;
        self.answers.insert(key.into(), answer.into());
    }
}

/// Sources whose buckets are kept at once; beyond, full buckets are forgotten first.
pub(super) const MAX_TRACKED_SOURCES: usize = 65_536;

/// Response rate limiting: one token bucket per source address, `rate` tokens a second and
/// as many at most; an answer takes a token, and without one the query is dropped.
pub(super) struct AnswerRateLimiter {
    pub(super) rate: f64,
    pub(super) buckets: HashMap<IpAddr, (f64, std::time::Instant)>,
}

impl AnswerRateLimiter {
    pub(super) fn new(rate: u32) -> Self {
        Self {
            rate: f64::from(rate),
            buckets: HashMap::new(),
        }
    }

    pub(super) fn allow(&mut self, source: IpAddr, now: std::time::Instant) -> bool {
        if self.rate == 0.0 {
            return true;
        }
        let rate = self.rate;
        let refilled = |(tokens, since): (f64, std::time::Instant)| {
            (tokens + now.duration_since(since).as_secs_f64() * rate).min(rate)
        };
        if self.buckets.len() >= MAX_TRACKED_SOURCES && !self.buckets.contains_key(&source) {
            // Memory stays bounded however many sources (spoofed or not) ask.
            self.buckets.retain(|_, bucket| refilled(*bucket) < rate);
            if self.buckets.len() >= MAX_TRACKED_SOURCES {
                self.buckets.clear();
            }
        }
        let bucket = self.buckets.entry(source).or_insert((rate, now));
        let tokens = refilled(*bucket);
        if tokens >= 1.0 {
            *bucket = (tokens - 1.0, now);
            true
        } else {
            *bucket = (tokens, now);
            false
        }
    }
}

pub(super) async fn serve_tcp(
    listener: TcpListener,
    store: Arc<RwLock<Store>>,
    soa_ttl: u32,
    limits: ConnectionLimits,
    caps: Option<CapObserver>,
    transfers: Arc<Transfers>,
) {
    // Connection tasks live in this set: aborting the server aborts them too.
    let mut connections = JoinSet::new();
    let table = ConnectionTable::observed(limits, caps);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(err) => {
                // E.g. out of file descriptors: back off instead of spinning.
                debug!(error = %err, "embedded DNS: TCP accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        // A full table closes its longest-idle connection; accept never pauses.
        let Ok(guard) = table.admit(peer.ip()) else {
            continue; // every connection is mid-query: drop this one
        };
        let store = store.clone();
        let transfers = transfers.clone();
        connections.spawn(async move {
            tokio::select! {
                () = serve_connection(stream, peer.ip(), &store, soa_ttl, &guard, &transfers) => {}
                () = guard.expired() => {}
            }
        });
    }
}

pub(super) async fn serve_connection(
    mut stream: TcpStream,
    peer: IpAddr,
    store: &RwLock<Store>,
    soa_ttl: u32,
    guard: &ConnectionGuard,
    transfers: &Transfers,
) {
    // Bounded by the idle timeout: `guard.expired()` ends this loop when no query arrives.
    loop {
        let mut len = [0u8; 2];
        if stream.read_exact(&mut len).await.is_err() {
            return;
        }
        // From the first byte of a query to its answer, the connection is busy.
        let _in_progress = guard.begin_request();
        let mut request = vec![0u8; u16::from_be_bytes(len) as usize];
        // A query that starts must finish promptly, or the connection was only pretending.
        match timeout(QUERY_READ_TIMEOUT, stream.read_exact(&mut request)).await {
            Ok(Ok(_)) => {}
            _ => return,
        }
        let Some(answers) = answer_bytes(&request, store, soa_ttl, Some(peer), transfers) else {
            return;
        };
        // A zone transfer is many messages; each must move within the timeout.
        for answer in answers {
            let Ok(answer_len) = u16::try_from(answer.len()) else {
                return;
            };
            let mut framed = Vec::with_capacity(answer.len() + 2);
            framed.extend_from_slice(&answer_len.to_be_bytes());
            framed.extend_from_slice(&answer);
            if timeout(QUERY_READ_TIMEOUT, stream.write_all(&framed))
                .await
                .map_or(true, |written| written.is_err())
            {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answer_cache_is_keyed_past_the_id_tied_to_a_generation_and_bounded() {
        const LIMIT: usize = 64 << 10;
        let mut cache = AnswerCache::new(LIMIT);
        let mut out = Vec::new();
        let request = [0xAB, 0xCD, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 7];
        let answer = [0xAB, 0xCD, 0x85, 0, 0, 1, 0, 0, 0, 0, 0, 0, 7, 9];
        assert!(!cache.answer_into(&request, 0, &mut out));
        cache.insert(&request, &answer, 0);
        let mut again = request;
        again[..2].copy_from_slice(&[0x12, 0x34]);
        assert!(cache.answer_into(&again, 0, &mut out));
        assert_eq!(out[..2], [0x12, 0x34]);
        assert_eq!(out[2..], answer[2..]);
        assert!(
            !cache.answer_into(&again, 1, &mut out),
            "a change empties it"
        );
        cache.insert(&request, &answer, 0);
        assert!(
            !cache.answer_into(&again, 1, &mut out),
            "an answer of an old generation is not kept"
        );
        let entry = request.len() - 2 + answer.len() + ANSWER_CACHE_ENTRY_OVERHEAD;
        for i in 0..2 * LIMIT / entry {
            let mut other = request.to_vec();
            other.extend_from_slice(&i.to_be_bytes());
            cache.insert(&other, &answer, 1);
            assert!(cache.bytes <= LIMIT);
        }
    }

    #[test]
    fn answers_per_source_are_limited_and_refill() {
        let mut limiter = AnswerRateLimiter::new(3);
        let start = std::time::Instant::now();
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let b: IpAddr = "192.0.2.2".parse().unwrap();
        let allowed = (0..10).filter(|_| limiter.allow(a, start)).count();
        assert_eq!(allowed, 3);
        assert!(limiter.allow(b, start), "another source has its own bucket");
        assert!(limiter.allow(a, start + Duration::from_millis(400)));
        assert!(AnswerRateLimiter::new(0).allow(a, start), "0 turns it off");
    }
}
