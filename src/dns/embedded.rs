//! An authoritative DNS server in-process, for the managed zones, over UDP and TCP.
//!
//! It is its own [`Provider`]: the sync loop writes records into its memory, and it answers
//! from them. Answers: A, AAAA, CNAME, TXT from the synced records, SOA and NS at each apex;
//! NXDOMAIN vs NODATA (SOA in the authority section) per RFC 2308, wildcards per RFC 4592
//! (closest encloser; an existing name, even an empty non-terminal, is never wildcard-matched),
//! REFUSED for names outside the zones.
//!
//! Why a loop of our own over hickory-proto rather than hickory-server's authority: serving
//! the same zone of 10 000 A records, 500 CNAMEs and a wildcard over loopback UDP under
//! dnsperf (`cargo bench --bench dns_serve`; figures and machine in docs/benchmarks.md),
//! hickory-server 0.26's in-memory authority answered 0.05–0.07× BIND 9's queries/s at 24–30×
//! its CPU per query; this server answers 1.48–2.04× BIND's queries/s at 0.38–0.42× its CPU
//! on a mix of repeated questions (its UDP answer cache), and 1.01–1.06× on unique names
//! (2 threads each, 2 shared cores).
//!
//! The SOA serial: the same on every replica for the same content, never backwards across a
//! restart, without shared state. It is made of Unix time in one-minute windows: a server
//! starts at the start of the *next* window; a change that alters the zone (a no-op change does
//! not count) takes the start of the current window when that is higher, else the serial + 1.
//! - Replicas: a change after a quiet minute gets the window start, which depends only on the
//!   clock, not on the replica's history; replicas that start in the same minute and sync the
//!   same content get start + 1 each. They agree unless a change lands on a minute boundary
//!   between them, and converge at the next change after a quiet minute.
//! - Restarts: a process that has lived into a later minute than its start gave out serials
//!   below the end of the window of its last change (window start + the changes in that window,
//!   under 60 unless more than 60 syncs changed the zone within one minute), so the start of the
//!   next window, where the new process begins, is above them. The one gap: a process restarted
//!   in the very minute its predecessor started begins at the same serial as it did, so if the
//!   predecessor made two or more changes in that first minute, the new serial can be lower
//!   (the same content after one change gets the same serial again). Closing it needs state
//!   kept across restarts, which replicas do not share.
//! - The clock must not step back by more than a minute (NTP keeps it far closer).
//!
//! Serials compare in RFC 1982 order; Unix seconds fit 32 bits until 2106.
//!
//! Hidden primary: zone transfers (AXFR, and IXFR from a bounded journal of recent changes per
//! zone; past it, the whole zone, the AXFR-style reply RFC 1995 section 4 allows) go over TCP
//! only to the configured secondaries,
//! and only when the request carries a valid TSIG of the transfer key (RFC 8945); every other
//! transfer request is REFUSED. Any TSIG-signed query is verified and its answer signed; a bad
//! key, MAC or time gets NOTAUTH with the TSIG error, unsigned. After each change every
//! secondary gets a signed NOTIFY (RFC 1996) over UDP, retried a bounded number of times with
//! a growing delay until it answers.
//!
//! DNSSEC (opt-in, [`super::dnssec`] says how and why): with keys, each zone is signed when it
//! is built, per serial, and re-signed at each signing period; queries with the DO bit get the
//! RRSIGs and the NSEC proofs, and transfers carry the signed zone.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::future::BoxFuture;
use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::rdata::tsig::{TSIG, TsigError, make_tsig_record};
use hickory_proto::rr::rdata::{NS, SOA};
use hickory_proto::rr::{
    DNSClass, Name, RData, Record, RecordType as WireType, SerialNumber, TSigResponseContext,
    TSigner,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::sync::mpsc;
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::timeout;
use tracing::debug;

use crate::model::RecordType;
use crate::model::dns_name::canonical;
use crate::net::{ConnectionGuard, ConnectionLimits, ConnectionTable};
use crate::tsig::TsigKey;

pub use super::dnssec::ZoneKey;
use super::dnssec::{SignedZone, signing_period};
use super::wire::{InvalidTarget, name_string, wire_name, wire_records, wire_rrset, wire_type};
use super::{Changes, Endpoint, Provider, in_zone, zone_of};

/// Largest UDP answer we send (the EDNS buffer size recommended since DNS flag day 2020).
const MAX_UDP_PAYLOAD: u16 = 1232;
const DNS_HEADER_LEN: usize = 12;
/// The QR bit in the third byte of the header: set on responses.
const QR_BIT: u8 = 0x80;
/// A TCP query's body (after its length) and its answer must move within this.
const QUERY_READ_TIMEOUT: Duration = Duration::from_secs(5);
/// CNAME chains followed inside our zones.
const MAX_CNAME_HOPS: usize = 8;
const SOA_REFRESH: i32 = 3600;
const SOA_RETRY: i32 = 600;
const SOA_EXPIRE: i32 = 86400;
/// SOA MINIMUM: the negative-caching TTL (RFC 2308).
const SOA_MINIMUM: u32 = 60;
/// Changes kept per zone for IXFR; an older serial gets the whole zone (AXFR-style).
const JOURNAL_CHANGES: usize = 64;
/// Records (removed plus added) kept per zone's journal at most.
const JOURNAL_RECORDS: usize = 20_000;
/// Records per message of a zone transfer: far below 64 KiB even with long TXT values.
const TRANSFER_RECORDS_PER_MESSAGE: usize = 64;
/// Room kept in a UDP answer for the TSIG record of a signed answer.
const TSIG_ROOM: usize = 256;
/// NOTIFY attempts per secondary and change; the wait for an answer doubles from the first.
const NOTIFY_ATTEMPTS: u32 = 5;
const NOTIFY_FIRST_WAIT: Duration = Duration::from_secs(1);
/// Changes waiting to be notified; beyond, a change is skipped (the next one carries its
/// serial, and the secondaries' SOA refresh catches up anyway).
const NOTIFY_QUEUE: usize = 256;

#[derive(Debug, Clone)]
pub struct EmbeddedConfig {
    /// UDP and TCP listen address (`--dns-listen`); port 0 picks a free port.
    pub listen: SocketAddr,
    /// Zones served (lower-case, no trailing dot).
    pub zones: Vec<String>,
    /// TTL of the SOA and NS records.
    pub soa_ttl: u32,
    /// Connection caps and idle timeout of the TCP side.
    pub tcp_limits: ConnectionLimits,
    /// UDP answers per second to one source address (a token bucket holding as many), so that
    /// spoofed queries cannot turn the server into an amplifier; 0 turns the limit off.
    pub udp_answers_per_source_per_second: u32,
    /// Secondaries (`--embedded-secondary`): sent NOTIFY on each change, allowed to transfer.
    pub secondaries: Vec<SocketAddr>,
    /// The TSIG key transfers and NOTIFYs are signed with; needed when there are secondaries.
    pub transfer_key: Option<TsigKey>,
    /// DNSSEC keys (`--embedded-dnssec-key`); none: the zones are served unsigned.
    pub dnssec_keys: Vec<Arc<ZoneKey>>,
}

/// Environment variable read for the transfer TSIG secret when no secret file is given.
pub const TSIG_SECRET_ENV: &str = "GATEWAY_DNS_EMBEDDED_TSIG_SECRET";

/// The default of [`EmbeddedConfig::udp_answers_per_source_per_second`]: far above what one
/// resolver asks of a few zones, far below what makes a useful reflector.
pub const DEFAULT_UDP_ANSWERS_PER_SOURCE_PER_SECOND: u32 = 100;

impl EmbeddedConfig {
    pub fn new(zones: Vec<String>) -> Self {
        EmbeddedConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 5353)),
            zones: zones.iter().map(|z| canonical(z).into_owned()).collect(),
            soa_ttl: 300,
            tcp_limits: ConnectionLimits::DNS_TCP_DEFAULT,
            udp_answers_per_source_per_second: DEFAULT_UDP_ANSWERS_PER_SOURCE_PER_SECOND,
            secondaries: Vec::new(),
            transfer_key: None,
            dnssec_keys: Vec::new(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("embedded DNS server: cannot listen on {addr} ({protocol}): {source}")]
    Bind {
        addr: SocketAddr,
        protocol: &'static str,
        source: std::io::Error,
    },
    #[error("embedded DNS server: no zone configured")]
    NoZones,
    #[error("embedded DNS server: {0} is in none of the served zones")]
    OutsideZones(String),
    #[error(transparent)]
    InvalidTarget(#[from] InvalidTarget),
    #[error("embedded DNS server: zone data lock poisoned")]
    Poisoned,
    #[error("embedded DNS server: secondaries need a TSIG key for transfers and NOTIFY")]
    SecondariesWithoutKey,
    #[error("embedded DNS server: transfer key: {0}")]
    TransferKey(#[from] crate::tsig::Error),
}

/// Who may pull the zones, and the key that signs transfers and NOTIFYs.
struct Transfers {
    secondaries: Vec<SocketAddr>,
    signer: Option<TSigner>,
}

impl Transfers {
    fn allowed(&self, peer: IpAddr) -> bool {
        self.signer.is_some() && self.secondaries.iter().any(|s| s.ip() == peer)
    }
}

/// One RRset as the server keeps it: the owner name once, the targets without slack. The
/// server holds every record the sync loop publishes, so this is the sync side's steady memory
/// (docs/benchmarks.md, "Memory of `serve`").
#[derive(Debug, Clone, PartialEq, Eq)]
struct RrSet {
    name: Box<str>,
    record_type: RecordType,
    ttl: u32,
    /// Sorted, each once (as [`Endpoint::targets`]).
    targets: Box<[Box<str>]>,
}

impl RrSet {
    fn from_endpoint(endpoint: &Endpoint) -> RrSet {
        RrSet {
            name: endpoint.dns_name.as_str().into(),
            record_type: endpoint.record_type,
            ttl: endpoint.ttl_or_default(),
            targets: endpoint.targets.iter().map(|t| t.as_str().into()).collect(),
        }
    }

    fn key(&self) -> (&str, RecordType) {
        (&self.name, self.record_type)
    }

    fn endpoint(&self) -> Endpoint {
        Endpoint {
            dns_name: self.name.to_string(),
            record_type: self.record_type,
            targets: self.targets.iter().map(|t| t.to_string()).collect(),
            ttl: Some(self.ttl),
            resource: None,
        }
    }

    fn wire(&self) -> Result<Vec<Record>, InvalidTarget> {
        wire_rrset(
            &self.name,
            self.record_type,
            self.targets.iter().map(|t| &**t),
            self.ttl,
        )
    }
}

struct Zone {
    apex: String,
    serial: u32,
    /// Every RRset, sorted by (name, type): looked up by binary search, rewritten by merging a
    /// batch of changes in.
    rrsets: Vec<RrSet>,
    /// The names that exist without records of their own: ancestors of records up to the apex
    /// (empty non-terminals). The apex and the owners of records exist too.
    empty_non_terminals: BTreeSet<Box<str>>,
    /// The latest changes, oldest first, for IXFR; bounded by [`JOURNAL_CHANGES`] and
    /// [`JOURNAL_RECORDS`]. Kept only when there are secondaries to ask for them.
    journal: VecDeque<Delta>,
    /// The zone signed for the current serial, when DNSSEC is on.
    signed: Option<SignedZone>,
}

/// The final state of the RRsets one batch of changes touches (`None`: deleted), by key.
type Touched<'a> = BTreeMap<(&'a str, RecordType), Option<&'a Endpoint>>;

/// One RRset before and after a change (`None`: absent).
type Difference = (Option<RrSet>, Option<RrSet>);

/// One change of a zone, as IXFR sends it (RFC 1995).
struct Delta {
    from: u32,
    to: u32,
    removed: Vec<Record>,
    added: Vec<Record>,
}

impl Zone {
    fn new(apex: String, serial: u32) -> Self {
        Zone {
            apex,
            serial,
            rrsets: Vec::new(),
            empty_non_terminals: BTreeSet::new(),
            journal: VecDeque::new(),
            signed: None,
        }
    }

    fn record(&mut self, delta: Delta) {
        self.journal.push_back(delta);
        let mut records: usize = self
            .journal
            .iter()
            .map(|d| d.removed.len() + d.added.len())
            .sum();
        while self.journal.len() > JOURNAL_CHANGES || records > JOURNAL_RECORDS {
            let Some(oldest) = self.journal.pop_front() else {
                break;
            };
            records -= oldest.removed.len() + oldest.added.len();
        }
    }

    /// The changes from `serial` to the current one, when the journal still holds them all.
    fn changes_since(&self, serial: u32) -> Option<Vec<&Delta>> {
        let first = self.journal.iter().position(|d| d.from == serial)?;
        let deltas: Vec<&Delta> = self.journal.iter().skip(first).collect();
        // Each delta must start where the one before ended, and the last end at the current.
        let contiguous = deltas.windows(2).all(|pair| pair[0].to == pair[1].from);
        (contiguous && deltas.last().is_some_and(|d| d.to == self.serial)).then_some(deltas)
    }

    fn reindex(&mut self) {
        let mut empty = BTreeSet::new();
        for set in &self.rrsets {
            let mut current = &*set.name;
            while let Some((_, parent)) = current.split_once('.') {
                if parent.len() <= self.apex.len() || self.has_records_at(parent) {
                    break;
                }
                if !empty.insert(Box::<str>::from(parent)) {
                    break;
                }
                current = parent;
            }
        }
        self.empty_non_terminals = empty;
    }

    /// Merges the final state of the `touched` RRsets in. `None` when nothing changed; else
    /// the RRsets that changed as (before, after) when `keep` asks for them (for the journal),
    /// or no pairs.
    fn merge(&mut self, touched: &Touched<'_>, keep: bool) -> Option<Vec<Difference>> {
        let creates = touched.values().filter(|wanted| wanted.is_some()).count();
        let mut merged = Vec::with_capacity(self.rrsets.len() + creates);
        let mut old = std::mem::take(&mut self.rrsets).into_iter().peekable();
        let (mut changes, mut differences) = (0usize, Vec::new());
        for (key, wanted) in touched {
            while let Some(set) = old.next_if(|set| set.key() < *key) {
                merged.push(set);
            }
            let before = old.next_if(|set| set.key() == *key);
            let after = wanted.map(RrSet::from_endpoint);
            if before != after {
                changes += 1;
                if keep {
                    differences.push((before, after.clone()));
                }
            }
            merged.extend(after);
        }
        merged.extend(old);
        merged.shrink_to_fit();
        self.rrsets = merged;
        (changes > 0).then_some(differences)
    }

    /// Journals one change for IXFR: the records removed and added (RFC 1995). A change larger
    /// than the journal may hold empties it: older serials get the whole zone.
    fn journal_change(&mut self, from: u32, to: u32, differences: &[Difference]) {
        let size = |set: &Option<RrSet>| set.as_ref().map_or(0, |set| set.targets.len());
        let records: usize = differences
            .iter()
            .map(|(before, after)| size(before) + size(after))
            .sum();
        if records > JOURNAL_RECORDS {
            self.journal.clear();
            return;
        }
        let as_records = |set: &Option<RrSet>| -> Vec<Record> {
            set.as_ref()
                .and_then(|set| set.wire().ok())
                .unwrap_or_default()
        };
        let (mut removed, mut added) = (Vec::new(), Vec::new());
        for (before, after) in differences {
            let (old, new) = (as_records(before), as_records(after));
            removed.extend(old.iter().filter(|r| !new.contains(r)).cloned());
            added.extend(new.iter().filter(|r| !old.contains(r)).cloned());
        }
        self.record(Delta {
            from,
            to,
            removed,
            added,
        });
    }

    /// The RRset of that name and type.
    fn rrset(&self, name: &str, record_type: RecordType) -> Option<&RrSet> {
        self.rrsets
            .binary_search_by(|set| set.key().cmp(&(name, record_type)))
            .ok()
            .map(|at| &self.rrsets[at])
    }

    /// Signs the zone as it is now (after a change of serial); returns what changed in the
    /// signed zone, as IXFR sends it. `None` without keys.
    fn sign(
        &mut self,
        keys: &[Arc<ZoneKey>],
        soa_ttl: u32,
        now: u64,
    ) -> Option<(Vec<Record>, Vec<Record>)> {
        if keys.is_empty() {
            return None;
        }
        let apex = wire_name(&self.apex).ok()?;
        let records = zone_records(self, soa_ttl);
        let nsec_ttl = soa_ttl.min(SOA_MINIMUM);
        let previous = self.signed.take();
        let signed = SignedZone::build(
            &apex,
            records,
            keys,
            soa_ttl,
            nsec_ttl,
            now,
            previous.as_ref(),
        );
        let diff = match &previous {
            Some(previous) => previous.diff(&signed),
            None => (Vec::new(), signed.records_without_soa().cloned().collect()),
        };
        self.signed = Some(signed);
        Some(diff)
    }

    fn has_records_at(&self, name: &str) -> bool {
        let first = self.rrsets.partition_point(|set| &*set.name < name);
        self.rrsets.get(first).is_some_and(|set| &*set.name == name)
    }

    /// Whether the name exists: the apex, an owner of records, or an empty non-terminal.
    fn has_name(&self, name: &str) -> bool {
        name == self.apex || self.has_records_at(name) || self.empty_non_terminals.contains(name)
    }
}

struct Store {
    zones: Vec<Zone>,
    /// Moves whenever what the zones answer changes (records, serial, signatures): the UDP
    /// answer caches empty themselves then. Shared so the receive loops read it without the lock.
    generation: Arc<AtomicU64>,
}

impl Store {
    /// Called with the write lock held after any change to the zones.
    fn changed(&self) {
        self.generation.fetch_add(1, Ordering::Release);
    }

    fn zone(&self, name: &str) -> Option<&Zone> {
        self.zones
            .iter()
            .filter(|zone| in_zone(name, &zone.apex))
            .max_by_key(|zone| zone.apex.len())
    }
}

pub struct EmbeddedDns {
    store: Arc<RwLock<Store>>,
    zones: Vec<String>,
    local_addr: SocketAddr,
    tasks: Vec<JoinHandle<()>>,
    /// (apex, serial) of each change, to the NOTIFY task; `None` without secondaries.
    notify: Option<mpsc::Sender<(String, u32)>>,
    /// What the listeners answer with, kept for [`EmbeddedDns::answer`].
    soa_ttl: u32,
    transfers: Arc<Transfers>,
    dnssec_keys: Vec<Arc<ZoneKey>>,
}

/// How often a random port (`--dns-listen` with port 0) is drawn again when its TCP side is
/// already taken: the kernel picks the UDP port without looking at TCP.
const RANDOM_PORT_TRIES: usize = 16;

/// UDP and TCP on one address and port.
async fn bind_pair(listen: SocketAddr) -> Result<(UdpSocket, TcpListener, SocketAddr), Error> {
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

impl EmbeddedDns {
    /// Bind UDP and TCP on `config.listen` and start answering.
    pub async fn start(config: EmbeddedConfig) -> Result<Self, Error> {
        if config.zones.is_empty() {
            return Err(Error::NoZones);
        }
        let signer = match &config.transfer_key {
            Some(key) => Some(key.signer()?),
            None if config.secondaries.is_empty() => None,
            None => return Err(Error::SecondariesWithoutKey),
        };
        let transfers = Arc::new(Transfers {
            secondaries: config.secondaries.clone(),
            signer,
        });
        let now = unix_now();
        let initial_serial = initial_serial(now);
        let mut zones: Vec<Zone> = config
            .zones
            .iter()
            .map(|apex| Zone::new(apex.clone(), initial_serial))
            .collect();
        for zone in &mut zones {
            zone.sign(&config.dnssec_keys, config.soa_ttl, now);
        }
        let generation = Arc::new(AtomicU64::new(0));
        let store = Arc::new(RwLock::new(Store {
            zones,
            generation: generation.clone(),
        }));
        let (udp, tcp, local_addr) = bind_pair(config.listen).await?;
        let soa_ttl = config.soa_ttl;
        let mut tasks = vec![tokio::spawn(serve_tcp(
            tcp,
            store.clone(),
            soa_ttl,
            config.tcp_limits,
            transfers.clone(),
        ))];
        // One rate limiter for all receive loops: the limit is per source, not per loop.
        let udp = Arc::new(udp);
        let limiter = Arc::new(Mutex::new(AnswerRateLimiter::new(
            config.udp_answers_per_source_per_second,
        )));
        for _ in 0..udp_receivers() {
            tasks.push(tokio::spawn(serve_udp(
                udp.clone(),
                store.clone(),
                soa_ttl,
                limiter.clone(),
                transfers.clone(),
                generation.clone(),
            )));
        }
        let notify = if transfers.secondaries.is_empty() {
            None
        } else {
            let (sender, receiver) = mpsc::channel(NOTIFY_QUEUE);
            tasks.push(tokio::spawn(notify_secondaries(
                receiver,
                transfers.clone(),
                soa_ttl,
            )));
            Some(sender)
        };
        if !config.dnssec_keys.is_empty() {
            tasks.push(tokio::spawn(resign_periodically(
                store.clone(),
                config.dnssec_keys.clone(),
                soa_ttl,
                notify.clone(),
            )));
        }
        Ok(EmbeddedDns {
            store,
            zones: config.zones,
            local_addr,
            tasks,
            notify,
            soa_ttl,
            transfers,
            dnssec_keys: config.dnssec_keys,
        })
    }

    /// Answers one raw request exactly as the listeners do: `tcp_peer` is the client's address
    /// for a request that came over TCP (zone transfers are possible only there), `None` for
    /// UDP. Returns the encoded answer messages (several for a zone transfer), or `None` when
    /// the request is dropped. The fuzz targets (docs/fuzzing.md) feed packets in here.
    pub fn answer(&self, request: &[u8], tcp_peer: Option<IpAddr>) -> Option<Vec<Vec<u8>>> {
        answer_bytes(
            request,
            &self.store,
            self.soa_ttl,
            tcp_peer,
            &self.transfers,
        )
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The current SOA serial of `zone`.
    pub fn serial(&self, zone: &str) -> Option<u32> {
        let store = self.store.read().ok()?;
        store
            .zones
            .iter()
            .find(|z| z.apex == canonical(zone))
            .map(|z| z.serial)
    }

    fn apply_changes(&self, changes: &Changes) -> Result<(), Error> {
        // Validate everything first so a bad change leaves the zones untouched.
        for endpoint in changes
            .create
            .iter()
            .chain(&changes.update)
            .chain(&changes.delete)
        {
            if zone_of(&endpoint.dns_name, &self.zones).is_none() {
                return Err(Error::OutsideZones(endpoint.dns_name.clone()));
            }
            wire_records(endpoint, endpoint.ttl_or_default())?;
        }
        let mut store = self.store.write().map_err(|_| Error::Poisoned)?;
        let zone_index = |store: &Store, name: &str| {
            store
                .zones
                .iter()
                .enumerate()
                .filter(|(_, zone)| in_zone(name, &zone.apex))
                .max_by_key(|(_, zone)| zone.apex.len())
                .map(|(i, _)| i)
        };
        // The state each touched RRset ends in, per zone: deletes first, then updates and
        // creates (the order providers apply them in).
        let mut touched: BTreeMap<usize, Touched<'_>> = BTreeMap::new();
        for endpoint in &changes.delete {
            if let Some(i) = zone_index(&store, &endpoint.dns_name) {
                touched.entry(i).or_default().insert(endpoint.key(), None);
            }
        }
        for endpoint in changes.update.iter().chain(&changes.create) {
            if let Some(i) = zone_index(&store, &endpoint.dns_name) {
                touched
                    .entry(i)
                    .or_default()
                    .insert(endpoint.key(), Some(endpoint));
            }
        }
        // Only secondaries ask for IXFR: without them no journal is kept.
        let journaling = self.notify.is_some();
        let now = unix_now();
        let mut changed = Vec::new();
        for (i, touched) in touched {
            let zone = &mut store.zones[i];
            let Some(differences) = zone.merge(&touched, journaling) else {
                continue;
            };
            let from = zone.serial;
            zone.serial = next_serial(zone.serial, now);
            let to = zone.serial;
            zone.reindex();
            // Signed zones journal the signed zone's difference (signatures and NSEC included);
            // unsigned ones the RRsets that changed.
            match zone.sign(&self.dnssec_keys, self.soa_ttl, now) {
                Some((removed, added)) if journaling => zone.record(Delta {
                    from,
                    to,
                    removed,
                    added,
                }),
                Some(_) => {}
                None if journaling => zone.journal_change(from, to, &differences),
                None => {}
            }
            changed.push((zone.apex.clone(), zone.serial));
        }
        if !changed.is_empty() {
            // Inside the write: an answer cached under the old generation is dropped, never kept.
            store.changed();
        }
        drop(store);
        queue_notify(self.notify.as_ref(), changed);
        Ok(())
    }

    /// Re-signs the zones whose signatures were made in an earlier signing period than `now`'s:
    /// what the re-signing task does at each period boundary, with the clock passed in.
    pub fn refresh_signatures(&self, now: u64) -> Result<Vec<(String, u32)>, Error> {
        let changed = refresh_signatures(&self.store, &self.dnssec_keys, self.soa_ttl, now)?;
        queue_notify(self.notify.as_ref(), changed.clone());
        Ok(changed)
    }

    fn all_records(&self) -> Result<Vec<Endpoint>, Error> {
        let store = self.store.read().map_err(|_| Error::Poisoned)?;
        // Sized once: a listing of every record, collected growing, would hold up to twice
        // its size while a resync plans.
        let mut records =
            Vec::with_capacity(store.zones.iter().map(|zone| zone.rrsets.len()).sum());
        for zone in &store.zones {
            records.extend(zone.rrsets.iter().map(RrSet::endpoint));
        }
        Ok(records)
    }
}

fn queue_notify(notify: Option<&mpsc::Sender<(String, u32)>>, changed: Vec<(String, u32)>) {
    let Some(notify) = notify else { return };
    for change in changed {
        if notify.try_send(change).is_err() {
            debug!("embedded DNS: NOTIFY queue full, a change waits for the next one");
        }
    }
}

fn refresh_signatures(
    store: &RwLock<Store>,
    keys: &[Arc<ZoneKey>],
    soa_ttl: u32,
    now: u64,
) -> Result<Vec<(String, u32)>, Error> {
    let mut store = store.write().map_err(|_| Error::Poisoned)?;
    let mut changed = Vec::new();
    for zone in &mut store.zones {
        let due = zone
            .signed
            .as_ref()
            .is_some_and(|signed| signed.period < signing_period(now));
        if !due {
            continue;
        }
        // New signatures are a change of the zone: a new serial by the usual rule, so the
        // replicas, re-signing at the same boundary, agree on it.
        let from = zone.serial;
        zone.serial = next_serial(zone.serial, now);
        if let Some((removed, added)) = zone.sign(keys, soa_ttl, now) {
            zone.record(Delta {
                from,
                to: zone.serial,
                removed,
                added,
            });
        }
        changed.push((zone.apex.clone(), zone.serial));
    }
    if !changed.is_empty() {
        store.changed();
    }
    Ok(changed)
}

/// Longest sleep between checks of the signing period (a suspended process or a clock step
/// is caught up within this).
const RESIGN_CHECK: Duration = Duration::from_secs(60);

/// Re-signs at each signing period boundary, and tells the secondaries.
async fn resign_periodically(
    store: Arc<RwLock<Store>>,
    keys: Vec<Arc<ZoneKey>>,
    soa_ttl: u32,
    notify: Option<mpsc::Sender<(String, u32)>>,
) {
    loop {
        let now = unix_now();
        let boundary = (signing_period(now) + 1) * super::dnssec::RESIGN_PERIOD;
        let wait = Duration::from_secs(boundary.saturating_sub(now).max(1)).min(RESIGN_CHECK);
        tokio::time::sleep(wait).await;
        match refresh_signatures(&store, &keys, soa_ttl, unix_now()) {
            Ok(changed) => queue_notify(notify.as_ref(), changed),
            Err(err) => debug!(error = %err, "embedded DNS: re-signing failed"),
        }
    }
}

impl Drop for EmbeddedDns {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl Provider for EmbeddedDns {
    fn name(&self) -> &'static str {
        "embedded"
    }

    fn records(&self) -> BoxFuture<'_, Result<Vec<Endpoint>, super::Error>> {
        Box::pin(async move { Ok(self.all_records()?) })
    }

    fn apply<'a>(&'a self, changes: &'a Changes) -> BoxFuture<'a, Result<(), super::Error>> {
        Box::pin(async move { Ok(self.apply_changes(changes)?) })
    }

    /// Only the sync loop writes these zones (and re-signing, which moves the counter too).
    fn generation(&self) -> Option<u64> {
        let store = self.store.read().ok()?;
        Some(store.generation.load(Ordering::Acquire))
    }

    fn zones(&self) -> &[String] {
        &self.zones
    }
}

/// UDP receive loops sharing the socket: one per core (at most this many), so that answering
/// is not bound to one thread.
const MAX_UDP_RECEIVERS: usize = 8;

fn udp_receivers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(MAX_UDP_RECEIVERS))
}

async fn serve_udp(
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
const ANSWER_CACHE_BYTES: usize = 4 << 20;
const ANSWER_CACHE_ENTRY_OVERHEAD: usize = 64;

/// Encoded answers to unsigned UDP requests, by the request's bytes after its ID: the answer
/// is a function of those bytes and the zones alone, so a repeated request gets a copy with
/// its own ID instead of being decoded, looked up and encoded again. Tied to one generation of
/// the zones.
struct AnswerCache {
    generation: u64,
    bytes: usize,
    limit: usize,
    answers: HashMap<Box<[u8]>, Box<[u8]>>,
}

impl AnswerCache {
    fn new(limit: usize) -> Self {
        AnswerCache {
            generation: 0,
            bytes: 0,
            limit,
            answers: HashMap::new(),
        }
    }

    /// Writes the cached answer to `request`, with the request's ID, into `out`; false when
    /// there is none for the zones' `generation`.
    fn answer_into(&mut self, request: &[u8], generation: u64, out: &mut Vec<u8>) -> bool {
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

    fn insert(&mut self, request: &[u8], answer: &[u8], generation: u64) {
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
const MAX_TRACKED_SOURCES: usize = 65_536;

/// Response rate limiting: one token bucket per source address, `rate` tokens a second and
/// as many at most; an answer takes a token, and without one the query is dropped.
struct AnswerRateLimiter {
    rate: f64,
    buckets: HashMap<IpAddr, (f64, std::time::Instant)>,
}

impl AnswerRateLimiter {
    fn new(rate: u32) -> Self {
        Self {
            rate: f64::from(rate),
            buckets: HashMap::new(),
        }
    }

    fn allow(&mut self, source: IpAddr, now: std::time::Instant) -> bool {
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

async fn serve_tcp(
    listener: TcpListener,
    store: Arc<RwLock<Store>>,
    soa_ttl: u32,
    limits: ConnectionLimits,
    transfers: Arc<Transfers>,
) {
    // Connection tasks live in this set: aborting the server aborts them too.
    let mut connections = JoinSet::new();
    let table = ConnectionTable::new(limits);
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

async fn serve_connection(
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

/// Serials are the start of a [`SERIAL_WINDOW`] in Unix seconds, plus the changes made since
/// in that window. See the module comment for why this is the same on every replica and never
/// goes backwards.
const SERIAL_WINDOW: u64 = 60;

fn window_start(now: u64) -> u32 {
    // Unix seconds fit in 32 bits until 2106; past that they wrap, as RFC 1982 serials may.
    ((now / SERIAL_WINDOW) * SERIAL_WINDOW) as u32
}

/// The serial a server starts with: the start of the next window, above every serial the
/// previous process gave out (those are below the end of the window it last changed in).
fn initial_serial(now: u64) -> u32 {
    window_start(now).wrapping_add(SERIAL_WINDOW as u32)
}

/// The serial after a change: the start of the current window when that is higher (RFC 1982
/// order), else one more than now.
fn next_serial(current: u32, now: u64) -> u32 {
    let window = window_start(now);
    if SerialNumber::from(window) > SerialNumber::from(current) {
        window
    } else {
        current.wrapping_add(1)
    }
}

/// What the TSIG of a request says.
enum Auth {
    Unsigned,
    /// Signed with our key, in time: the request MAC, which the answer's MAC covers.
    Signed {
        mac: Vec<u8>,
    },
    /// NOTAUTH with this TSIG error (RFC 8945 5.2).
    Rejected(Rejection),
}

enum Rejection {
    UnknownKey(Name),
    BadSig,
    BadTime { mac: Vec<u8> },
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn authenticate(raw: &[u8], request: &Message, signer: Option<&TSigner>, now: u64) -> Auth {
    let Some(tsig) = request.signature() else {
        return Auth::Unsigned;
    };
    let Some(signer) =
        signer.filter(|s| s.signer_name() == &tsig.name && s.algorithm() == &tsig.data.algorithm)
    else {
        return Auth::Rejected(Rejection::UnknownKey(tsig.name.clone()));
    };
    match signer.verify_message_byte(raw, None, true) {
        Err(_) => Auth::Rejected(Rejection::BadSig),
        Ok((mac, _, window)) if window.start <= now && now <= window.end => Auth::Signed { mac },
        Ok((mac, _, _)) => Auth::Rejected(Rejection::BadTime { mac }),
    }
}

/// Decode a request and encode the answer: one message, or a zone transfer's several over TCP
/// (`peer` is the TCP client; `None` for UDP). `None` when there is nothing sensible to send.
fn answer_bytes(
    request: &[u8],
    store: &RwLock<Store>,
    soa_ttl: u32,
    peer: Option<IpAddr>,
    transfers: &Transfers,
) -> Option<Vec<Vec<u8>>> {
    answer_request(request, store, soa_ttl, peer, transfers).map(|answered| answered.messages)
}

struct Answered {
    messages: Vec<Vec<u8>>,
    /// The same request bytes (after the ID) get the same bytes again until the zones change:
    /// an answer that fits, to a request without TSIG (a signed answer covers the time).
    repeatable: bool,
}

impl Answered {
    fn once(messages: Vec<Vec<u8>>) -> Self {
        Answered {
            messages,
            repeatable: false,
        }
    }
}

/// [`answer_bytes`], also saying whether the answer may be replayed.
fn answer_request(
    request: &[u8],
    store: &RwLock<Store>,
    soa_ttl: u32,
    peer: Option<IpAddr>,
    transfers: &Transfers,
) -> Option<Answered> {
    // Shorter than a header, or itself a response (QR=1): answering would only feed loops
    // and reflection, so such packets are dropped (RFC 1035 4.1.1; RFC 5358).
    if request.len() < DNS_HEADER_LEN || request[2] & QR_BIT != 0 {
        return None;
    }
    let raw = request;
    let request = match Message::from_vec(request) {
        Ok(request) => request,
        Err(_) => {
            // Answer FORMERR when at least the header is there.
            let id = u16::from_be_bytes([*request.first()?, *request.get(1)?]);
            let error = Message::error_msg(id, OpCode::Query, ResponseCode::FormErr);
            return error.to_vec().ok().map(|bytes| Answered::once(vec![bytes]));
        }
    };
    if request.metadata.message_type != MessageType::Query {
        return None;
    }
    let now = unix_now();
    let auth = authenticate(raw, &request, transfers.signer.as_ref(), now);
    let signer = transfers.signer.as_ref();
    let mut response = match &auth {
        Auth::Rejected(_) => {
            let mut response = Message::response(request.metadata.id, request.metadata.op_code);
            response.add_queries(request.queries.iter().cloned());
            response.metadata.response_code = ResponseCode::NotAuth;
            response
        }
        Auth::Unsigned | Auth::Signed { .. } => {
            let may_transfer = matches!(auth, Auth::Signed { .. })
                && peer.is_some_and(|peer| transfers.allowed(peer));
            let store = store.read().ok()?;
            let mut response = respond(&store, &request, soa_ttl, may_transfer);
            if dnssec_ok(&request) {
                add_dnssec(&store, &request, &mut response);
            }
            response
        }
    };
    let id = request.metadata.id;
    let transfer = request
        .queries
        .iter()
        .any(|q| matches!(q.query_type(), WireType::AXFR | WireType::IXFR));
    if transfer && peer.is_some() && response.answers.len() > TRANSFER_RECORDS_PER_MESSAGE {
        // A zone transfer: split into messages, the first carrying the question.
        let records = std::mem::take(&mut response.answers);
        let mut messages = Vec::new();
        for (index, chunk) in records.chunks(TRANSFER_RECORDS_PER_MESSAGE).enumerate() {
            let mut message = Message::response(id, response.metadata.op_code);
            message.metadata.authoritative = true;
            if index == 0 {
                message.add_queries(response.queries.iter().cloned());
            }
            message.add_answers(chunk.iter().cloned());
            messages.push(message);
        }
        return seal_all(messages, &auth, signer, id, now).map(Answered::once);
    }
    let limit = if peer.is_some() {
        u16::MAX as usize
    } else {
        let limit = match &request.edns {
            Some(edns) => edns.max_payload().clamp(512, MAX_UDP_PAYLOAD) as usize,
            None => 512,
        };
        if matches!(auth, Auth::Unsigned) {
            limit
        } else {
            limit - TSIG_ROOM
        }
    };
    let bytes = response.to_vec().ok()?;
    if bytes.len() > limit {
        // Too big for UDP: an empty truncated answer tells the client to retry over TCP.
        response.metadata.truncation = true;
        response.answers.clear();
        response.authorities.clear();
        response.additionals.clear();
    } else if matches!(auth, Auth::Unsigned) {
        // Nothing to sign: the encoding just measured is the answer (no second encoding).
        return Some(Answered {
            messages: vec![bytes],
            repeatable: true,
        });
    }
    seal_all(vec![response], &auth, signer, id, now).map(Answered::once)
}

/// Encode the messages of one answer, each TSIG-signed when the request was (RFC 8945 5.3.1:
/// the first covers the request MAC, each next one the MAC before it and the timers only).
fn seal_all(
    messages: Vec<Message>,
    auth: &Auth,
    signer: Option<&TSigner>,
    id: u16,
    now: u64,
) -> Option<Vec<Vec<u8>>> {
    let mut encoded = Vec::with_capacity(messages.len());
    let mut previous_mac: Option<Vec<u8>> = None;
    for mut message in messages {
        let bytes = message.to_vec().ok()?;
        let tsig = match (auth, signer) {
            (Auth::Unsigned, _) => None,
            (Auth::Rejected(Rejection::UnknownKey(name)), _) => {
                Some(TSigResponseContext::unknown_key(id, now, name.clone()).sign(&bytes))
            }
            (Auth::Rejected(_), None) | (Auth::Signed { .. }, None) => None,
            (Auth::Rejected(Rejection::BadSig), Some(signer)) => {
                Some(TSigResponseContext::bad_signature(id, now, signer.clone()).sign(&bytes))
            }
            (Auth::Rejected(Rejection::BadTime { mac }), Some(signer)) => Some(
                TSigResponseContext::new(
                    id,
                    now,
                    signer.clone(),
                    mac.clone(),
                    Some(TsigError::BadTime),
                )
                .sign(&bytes),
            ),
            (Auth::Signed { mac }, Some(signer)) => match &previous_mac {
                None => Some(
                    TSigResponseContext::new(id, now, signer.clone(), mac.clone(), None)
                        .sign(&bytes),
                ),
                Some(previous) => Some(sign_continuation(signer, previous, &bytes, id, now)),
            },
        };
        if let Some(tsig) = tsig {
            let tsig = tsig.ok()?;
            previous_mac = Some(tsig.data.mac.clone());
            message.set_signature(tsig);
            encoded.push(message.to_vec().ok()?);
        } else {
            encoded.push(bytes);
        }
    }
    Some(encoded)
}

/// The TSIG of a message after the first of a multi-message answer (RFC 8945 5.3.1): its MAC
/// covers the previous MAC, the message and the timers (time signed, fudge).
fn sign_continuation(
    signer: &TSigner,
    previous_mac: &[u8],
    message: &[u8],
    id: u16,
    now: u64,
) -> Result<Box<Record<TSIG>>, hickory_proto::ProtoError> {
    let previous_len = u16::try_from(previous_mac.len())
        .map_err(|_| hickory_proto::ProtoError::from("TSIG MAC over 64 KiB"))?;
    let mut tbs = Vec::with_capacity(previous_mac.len() + message.len() + 10);
    tbs.extend_from_slice(&previous_len.to_be_bytes());
    tbs.extend_from_slice(previous_mac);
    tbs.extend_from_slice(message);
    tbs.extend_from_slice(&now.to_be_bytes()[2..]);
    tbs.extend_from_slice(&signer.fudge().to_be_bytes());
    let mac = signer
        .sign(&tbs)
        .map_err(|e| hickory_proto::ProtoError::from(e.to_string()))?;
    let tsig = TSIG::new(
        signer.algorithm().clone(),
        now,
        signer.fudge(),
        mac,
        id,
        None,
        Vec::new(),
    );
    Ok(Box::new(make_tsig_record(
        signer.signer_name().clone(),
        tsig,
    )))
}

/// Sends NOTIFY for each (apex, serial) received to every secondary, each with its retries.
async fn notify_secondaries(
    mut changes: mpsc::Receiver<(String, u32)>,
    transfers: Arc<Transfers>,
    soa_ttl: u32,
) {
    // Aborting this task drops the set, which aborts the NOTIFYs in flight.
    let mut in_flight = JoinSet::new();
    loop {
        tokio::select! {
            change = changes.recv() => {
                let Some((apex, serial)) = change else { return };
                for secondary in &transfers.secondaries {
                    in_flight.spawn(notify_one(
                        *secondary,
                        transfers.signer.clone(),
                        apex.clone(),
                        serial,
                        soa_ttl,
                        NOTIFY_FIRST_WAIT,
                    ));
                }
            }
            Some(_) = in_flight.join_next(), if !in_flight.is_empty() => {}
        }
    }
}

/// One NOTIFY (RFC 1996) for `apex` at `serial`, signed, until `secondary` answers or the
/// attempts run out; the wait for an answer starts at `first_wait` and doubles. Returns the
/// attempts made when answered.
async fn notify_one(
    secondary: SocketAddr,
    signer: Option<TSigner>,
    apex: String,
    serial: u32,
    soa_ttl: u32,
    first_wait: Duration,
) -> Option<u32> {
    let Ok(name) = wire_name(&apex) else {
        return None;
    };
    let local: SocketAddr = if secondary.is_ipv4() {
        SocketAddr::from(([0, 0, 0, 0], 0))
    } else {
        SocketAddr::from(([0u16; 8], 0))
    };
    let socket = match UdpSocket::bind(local).await {
        Ok(socket) => socket,
        Err(err) => {
            debug!(error = %err, "embedded DNS: no socket for NOTIFY");
            return None;
        }
    };
    let mut wait = first_wait;
    for attempt in 1..=NOTIFY_ATTEMPTS {
        let id = fastrand::u16(..);
        let mut message = Message::query();
        message.metadata.id = id;
        message.metadata.op_code = OpCode::Notify;
        message.metadata.authoritative = true;
        message.metadata.recursion_desired = false;
        message.add_query(Query::query(name.clone(), WireType::SOA));
        let zone = Zone::new(apex.clone(), serial);
        message.add_answer(soa_record(&zone, soa_ttl, false));
        if let Some(signer) = &signer
            && message.finalize(signer, unix_now()).is_err()
        {
            return None;
        }
        let Ok(bytes) = message.to_vec() else {
            return None;
        };
        if socket.send_to(&bytes, secondary).await.is_ok()
            && wait_for_answer(&socket, secondary, id, wait).await
        {
            debug!(%secondary, zone = %apex, serial, attempt, "embedded DNS: NOTIFY answered");
            return Some(attempt);
        }
        wait *= 2;
    }
    tracing::warn!(%secondary, zone = %apex, serial, "embedded DNS: NOTIFY unanswered");
    None
}

/// Whether an answer with `id` comes from `secondary` within `wait`.
async fn wait_for_answer(
    socket: &UdpSocket,
    secondary: SocketAddr,
    id: u16,
    wait: Duration,
) -> bool {
    let deadline = tokio::time::Instant::now() + wait;
    let mut buffer = [0u8; 4096];
    // Bounded by the deadline: each receive waits at most until then.
    loop {
        match tokio::time::timeout_at(deadline, socket.recv_from(&mut buffer)).await {
            Ok(Ok((len, from))) => {
                if from == secondary
                    && len >= DNS_HEADER_LEN
                    && buffer[2] & QR_BIT != 0
                    && u16::from_be_bytes([buffer[0], buffer[1]]) == id
                {
                    return true;
                }
            }
            Ok(Err(_)) | Err(_) => return false,
        }
    }
}

/// The answer to one query message. Pure apart from reading the zone data.
fn respond(store: &Store, request: &Message, soa_ttl: u32, may_transfer: bool) -> Message {
    let mut response = Message::response(request.metadata.id, request.metadata.op_code);
    response.metadata.recursion_desired = request.metadata.recursion_desired;
    if request.edns.is_some() {
        let mut edns = Edns::new();
        edns.set_max_payload(MAX_UDP_PAYLOAD);
        // RFC 3225: the DO bit is copied into the response.
        edns.set_dnssec_ok(dnssec_ok(request));
        response.set_edns(edns);
    }
    // Only EDNS version 0 exists; anything else gets BADVERS (RFC 6891 6.1.3).
    if request
        .edns
        .as_ref()
        .is_some_and(|edns| edns.version() != 0)
    {
        response.metadata.response_code = ResponseCode::BADVERS;
        return response;
    }
    if request.metadata.op_code != OpCode::Query {
        response.metadata.response_code = ResponseCode::NotImp;
        return response;
    }
    let [query] = request.queries.as_slice() else {
        response.metadata.response_code = ResponseCode::FormErr;
        return response;
    };
    response.add_query(query.clone());
    let qname = name_string(query.name());
    let Some(zone) = store.zone(&qname) else {
        response.metadata.response_code = ResponseCode::Refused;
        return response;
    };
    // Zone transfers only to the secondaries, signed; and only the IN class.
    if matches!(query.query_type(), WireType::AXFR | WireType::IXFR)
        && may_transfer
        && zone.apex == qname
        && query.query_class() == DNSClass::IN
    {
        response.metadata.authoritative = true;
        let known = request
            .authorities
            .iter()
            .find_map(|record| match &record.data {
                RData::SOA(soa) if query.query_type() == WireType::IXFR => Some(soa.serial),
                _ => None,
            });
        let records = match known {
            // Up to date: the current SOA alone (RFC 1995 2).
            Some(serial) if serial == zone.serial => vec![soa_record(zone, soa_ttl, false)],
            Some(serial) => match zone.changes_since(serial) {
                Some(deltas) => incremental_records(zone, soa_ttl, &deltas),
                None => transfer_records(zone, soa_ttl),
            },
            None => transfer_records(zone, soa_ttl),
        };
        response.add_answers(records);
        return response;
    }
    if matches!(query.query_type(), WireType::AXFR | WireType::IXFR)
        || !matches!(query.query_class(), DNSClass::IN | DNSClass::ANY)
    {
        response.metadata.response_code = ResponseCode::Refused;
        return response;
    }
    response.metadata.authoritative = true;

    let qtype = query.query_type();
    let mut owner = query.name().clone();
    let mut name = qname;
    for _ in 0..MAX_CNAME_HOPS {
        let Some(node) = find_node(zone, &name) else {
            // The first name decides the rcode; a dangling CNAME inside the zone still NOERROR.
            if response.answers.is_empty() {
                response.metadata.response_code = ResponseCode::NXDomain;
                response.add_authority(soa_record(zone, soa_ttl, true));
            }
            return response;
        };
        let before = response.answers.len();
        if name == zone.apex && matches!(qtype, WireType::SOA | WireType::ANY) {
            response.add_answer(soa_record(zone, soa_ttl, false));
        }
        if name == zone.apex && matches!(qtype, WireType::NS | WireType::ANY) {
            response.add_answer(ns_record(zone, soa_ttl));
        }
        let matching: Vec<RecordType> = RecordType::ALL
            .into_iter()
            .filter(|t| qtype == WireType::ANY || wire_type(*t) == qtype)
            .filter(|t| zone.rrset(&node, *t).is_some())
            .collect();
        for record_type in &matching {
            add_rrset(&mut response, zone, &node, *record_type, &owner);
        }
        // A signed zone's own records: the apex DNSKEY, the NSEC of a name, and its RRSIGs
        // when asked for them (the NSEC bitmap says the name has them).
        if let Some(signed) = &zone.signed
            && node == name
        {
            for record_type in [WireType::DNSKEY, WireType::NSEC] {
                if qtype == record_type || (qtype == WireType::ANY && node == zone.apex) {
                    response.add_answers(signed.rrset(&owner, record_type).iter().cloned());
                }
            }
            if qtype == WireType::RRSIG {
                response.add_answers(signed.signatures_at(&owner).cloned());
            }
        }
        if response.answers.len() > before || qtype == WireType::ANY {
            if response.answers.is_empty() {
                response.add_authority(soa_record(zone, soa_ttl, true));
            }
            return response;
        }
        let cname = zone.rrset(&node, RecordType::CNAME);
        match cname.and_then(|set| set.targets.first()) {
            Some(target) if qtype != WireType::CNAME => {
                add_rrset(&mut response, zone, &node, RecordType::CNAME, &owner);
                let target = canonical(target).into_owned();
                if !in_zone(&target, &zone.apex) {
                    return response; // the resolver follows it elsewhere
                }
                let Ok(next_owner) = wire_name(&target) else {
                    return response;
                };
                owner = next_owner;
                name = target;
            }
            _ => {
                // NODATA: the name exists, not with this type.
                if response.answers.is_empty() {
                    response.add_authority(soa_record(zone, soa_ttl, true));
                }
                return response;
            }
        }
    }
    response
}

fn dnssec_ok(request: &Message) -> bool {
    request
        .edns
        .as_ref()
        .is_some_and(|edns| edns.flags().dnssec_ok)
}

/// DNSSEC for an answer from a signed zone (RFC 4035 3.1): the RRSIGs of every RRset in the
/// answer and authority sections; for a wildcard answer, the NSEC proving the name itself
/// absent; for NXDOMAIN and NODATA (also at the end of a CNAME chain), the NSEC records that
/// prove it, with their RRSIGs.
fn add_dnssec(store: &Store, request: &Message, response: &mut Message) {
    let [query] = request.queries.as_slice() else {
        return;
    };
    let Some(zone) = store.zone(&name_string(query.name())) else {
        return;
    };
    let Some(signed) = &zone.signed else { return };
    if !response.metadata.authoritative
        || !matches!(
            response.metadata.response_code,
            ResponseCode::NoError | ResponseCode::NXDomain
        )
        || matches!(query.query_type(), WireType::AXFR | WireType::IXFR)
    {
        return;
    }
    let mut proofs: Vec<Record> = Vec::new();
    let mut answer_signatures = Vec::new();
    let mut sets: Vec<(Name, WireType)> = Vec::new();
    for record in &response.answers {
        let set = (record.name.clone(), record.record_type());
        if !sets.contains(&set) {
            sets.push(set);
        }
    }
    for (owner, record_type) in sets {
        let own = signed.signatures(&owner, record_type);
        if !own.is_empty() {
            answer_signatures.extend(own.iter().cloned());
            continue;
        }
        // Synthesised from a wildcard: its signatures (their label count tells the validator)
        // under the name asked, and the NSEC proving no closer name exists.
        let Some(node) = find_node(zone, &name_string(&owner)) else {
            continue;
        };
        if !node.starts_with("*.") || node == name_string(&owner) {
            continue; // not synthesised: an RRset without signatures of its own (RRSIG)
        }
        let Ok(wildcard) = wire_name(&node) else {
            continue;
        };
        for signature in signed.signatures(&wildcard, record_type) {
            let mut signature = signature.clone();
            signature.name = owner.clone();
            answer_signatures.push(signature);
        }
        proofs.extend(signed.nsec_covering(&owner).cloned());
    }
    response.add_answers(answer_signatures);

    // The name the answer ends at: the question, or the target of its CNAME chain.
    let qtype = query.query_type();
    let mut last = query.name().clone();
    if qtype != WireType::CNAME {
        for _ in 0..=MAX_CNAME_HOPS {
            let target = response
                .answers
                .iter()
                .find_map(|record| match &record.data {
                    RData::CNAME(target) if record.name == last => Some(target.0.clone()),
                    _ => None,
                });
            match target {
                Some(target) => last = target,
                None => break,
            }
        }
    }
    let answered = response.answers.iter().any(|record| {
        record.name == last && (qtype == WireType::ANY || record.record_type() == qtype)
    });
    let last_name = name_string(&last);
    if !answered && in_zone(&last_name, &zone.apex) {
        match find_node(zone, &last_name) {
            // NODATA at a name that owns records: its NSEC lists what it has; at an empty
            // non-terminal, the NSEC covering it (its next name is below it).
            Some(node) if node == last_name => {
                proofs.extend(
                    signed
                        .nsec_at(&last)
                        .or_else(|| signed.nsec_covering(&last))
                        .cloned(),
                );
            }
            // NODATA from a wildcard: no closer name, and the wildcard's own NSEC.
            Some(wildcard) => {
                proofs.extend(signed.nsec_covering(&last).cloned());
                if let Ok(wildcard) = wire_name(&wildcard) {
                    proofs.extend(signed.nsec_at(&wildcard).cloned());
                }
            }
            // NXDOMAIN: no such name, and no wildcard at the closest encloser.
            None => {
                proofs.extend(signed.nsec_covering(&last).cloned());
                let mut encloser = last_name.as_str();
                while !zone.has_name(encloser) {
                    match encloser.split_once('.') {
                        Some((_, parent)) => encloser = parent,
                        None => break,
                    }
                }
                if let Ok(wildcard) = wire_name(&format!("*.{encloser}")) {
                    proofs.extend(signed.nsec_covering(&wildcard).cloned());
                }
            }
        }
    }
    let mut authority_sets: Vec<(Name, WireType)> = Vec::new();
    for record in response.authorities.iter().chain(&proofs) {
        let set = (record.name.clone(), record.record_type());
        if !authority_sets.contains(&set) {
            authority_sets.push(set);
        }
    }
    let mut seen: Vec<Name> = Vec::new();
    for proof in proofs {
        if !seen.contains(&proof.name) {
            seen.push(proof.name.clone());
            response.add_authority(proof);
        }
    }
    for (owner, record_type) in authority_sets {
        response.add_authorities(signed.signatures(&owner, record_type).iter().cloned());
    }
}

/// The node whose records answer `name`: the name itself when it exists (with records or as an
/// empty non-terminal), else the wildcard at its closest encloser, else none (NXDOMAIN).
fn find_node(zone: &Zone, name: &str) -> Option<String> {
    if zone.has_name(name) {
        return Some(name.to_string());
    }
    let mut encloser = name;
    while encloser != zone.apex {
        encloser = encloser.split_once('.').map(|(_, parent)| parent)?;
        if zone.has_name(encloser) {
            let wildcard = format!("*.{encloser}");
            return zone.has_records_at(&wildcard).then_some(wildcard);
        }
    }
    None
}

fn add_rrset(
    response: &mut Message,
    zone: &Zone,
    node: &str,
    record_type: RecordType,
    owner: &Name,
) {
    let Some(set) = zone.rrset(node, record_type) else {
        return;
    };
    if let Ok(records) = set.wire() {
        for mut record in records {
            record.name = owner.clone();
            response.add_answer(record);
        }
    }
}

/// The zone's records: SOA, NS, every RRset in name order.
fn zone_records(zone: &Zone, soa_ttl: u32) -> Vec<Record> {
    let mut records = vec![soa_record(zone, soa_ttl, false), ns_record(zone, soa_ttl)];
    for set in &zone.rrsets {
        if let Ok(wire) = set.wire() {
            records.extend(wire);
        }
    }
    records
}

/// The whole zone as AXFR sends it: SOA, the rest (signed, when DNSSEC is on), SOA again.
fn transfer_records(zone: &Zone, soa_ttl: u32) -> Vec<Record> {
    let mut records = match &zone.signed {
        Some(signed) => {
            let mut records = vec![soa_record(zone, soa_ttl, false)];
            records.extend(signed.records_without_soa().cloned());
            records
        }
        None => zone_records(zone, soa_ttl),
    };
    records.push(soa_record(zone, soa_ttl, false));
    records
}

/// An incremental transfer (RFC 1995 4): the current SOA; per change the old SOA, the records
/// removed, the new SOA, the records added; the current SOA again.
fn incremental_records(zone: &Zone, soa_ttl: u32, deltas: &[&Delta]) -> Vec<Record> {
    let soa = |serial| soa_with_serial(zone, soa_ttl, serial);
    let mut records = vec![soa(zone.serial)];
    for delta in deltas {
        records.push(soa(delta.from));
        records.extend(delta.removed.iter().cloned());
        records.push(soa(delta.to));
        records.extend(delta.added.iter().cloned());
    }
    records.push(soa(zone.serial));
    records
}

fn soa_with_serial(zone: &Zone, ttl: u32, serial: u32) -> Record {
    let apex = wire_name(&zone.apex).unwrap_or_else(|_| Name::root());
    let mname = wire_name(&format!("ns1.{}", zone.apex)).unwrap_or_else(|_| apex.clone());
    let rname = wire_name(&format!("hostmaster.{}", zone.apex)).unwrap_or_else(|_| apex.clone());
    let soa = SOA::new(
        mname,
        rname,
        serial,
        SOA_REFRESH,
        SOA_RETRY,
        SOA_EXPIRE,
        SOA_MINIMUM,
    );
    Record::from_rdata(apex, ttl, RData::SOA(soa))
}

fn soa_record(zone: &Zone, ttl: u32, negative: bool) -> Record {
    // RFC 2308: the SOA in a negative answer carries min(SOA TTL, MINIMUM).
    let ttl = if negative { ttl.min(SOA_MINIMUM) } else { ttl };
    soa_with_serial(zone, ttl, zone.serial)
}

fn ns_record(zone: &Zone, ttl: u32) -> Record {
    let apex = wire_name(&zone.apex).unwrap_or_else(|_| Name::root());
    let ns = wire_name(&format!("ns1.{}", zone.apex)).unwrap_or_else(|_| apex.clone());
    Record::from_rdata(apex, ttl, RData::NS(NS(ns)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::op::Query;

    fn store() -> Store {
        let mut zone = Zone::new("example.com".into(), 7);
        for endpoint in [
            Endpoint::new("a.b.example.com", RecordType::A, ["192.0.2.1"]),
            Endpoint::new("*.example.com", RecordType::A, ["192.0.2.9"]),
            Endpoint::new("*.example.com", RecordType::TXT, ["wild"]),
            Endpoint::new("www.example.com", RecordType::CNAME, ["a.b.example.com"]),
        ] {
            zone.rrsets.push(RrSet::from_endpoint(&endpoint));
        }
        zone.rrsets.sort_by(|a, b| a.key().cmp(&b.key()));
        zone.reindex();
        Store {
            zones: vec![zone],
            generation: Arc::default(),
        }
    }

    fn ask(name: &str, qtype: WireType) -> Message {
        let mut request = Message::query();
        request.add_query(Query::query(wire_name(name).unwrap(), qtype));
        respond(&store(), &request, 300, false)
    }

    #[test]
    fn serials_follow_minute_windows_and_never_go_back() {
        let t = 1_800_000_000; // a window start
        let start = initial_serial(t + 5);
        assert_eq!(start, (t + 60) as u32, "starts at the next window");
        // Same minute: one more each change; a later quiet minute: that window's start.
        assert_eq!(next_serial(start, t + 10), start + 1);
        assert_eq!(next_serial(start + 1, t + 130), (t + 120) as u32);
        // A restart in the minute of the last change starts above it.
        let last = next_serial(next_serial((t + 120) as u32, t + 125), t + 126);
        assert!(initial_serial(t + 127) > last);
        // Two replicas with different histories agree on a change after a quiet minute.
        assert_eq!(next_serial(start + 7, t + 200), next_serial(start, t + 201));
    }

    #[test]
    fn the_journal_is_bounded_and_answers_only_unbroken_chains() {
        let mut zone = Zone::new("example.com".into(), 100);
        let a = || {
            wire_records(
                &Endpoint::new("a.example.com", RecordType::A, ["192.0.2.1"]),
                60,
            )
        };
        for serial in 100..100 + JOURNAL_CHANGES as u32 + 10 {
            zone.record(Delta {
                from: serial,
                to: serial + 1,
                removed: Vec::new(),
                added: a().unwrap(),
            });
            zone.serial = serial + 1;
        }
        assert_eq!(zone.journal.len(), JOURNAL_CHANGES);
        assert!(zone.changes_since(100).is_none(), "fell out: AXFR instead");
        assert_eq!(
            zone.changes_since(zone.serial - 2).map(|d| d.len()),
            Some(2)
        );
        assert!(zone.changes_since(zone.serial + 5).is_none());
    }

    #[tokio::test]
    async fn notify_is_retried_a_bounded_number_of_times_until_answered() {
        let key = TsigKey::from_base64(
            "k",
            "hmac-sha256".parse().unwrap(),
            "Z2F0ZXdheS1kbnMtdGVzdC1zZWNyZXQtMzItYnl0ZXM=",
        )
        .unwrap();
        let signer = key.signer().unwrap();
        // A secondary that never answers: exactly NOTIFY_ATTEMPTS signed NOTIFYs, then give up.
        let silent = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = silent.local_addr().unwrap();
        let wait = Duration::from_millis(10);
        let outcome = notify_one(
            addr,
            Some(signer.clone()),
            "example.com".into(),
            7,
            300,
            wait,
        );
        assert_eq!(outcome.await, None);
        let mut buffer = [0u8; 4096];
        let mut received = 0;
        while let Ok(Ok((len, _))) =
            timeout(Duration::from_millis(50), silent.recv_from(&mut buffer)).await
        {
            let message = Message::from_vec(&buffer[..len]).unwrap();
            assert_eq!(message.metadata.op_code, OpCode::Notify);
            assert!(message.signature().is_some(), "signed");
            received += 1;
        }
        assert_eq!(received, NOTIFY_ATTEMPTS);

        // A secondary that answers the second NOTIFY: two attempts.
        let answering = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = answering.local_addr().unwrap();
        let responder = tokio::spawn(async move {
            let mut buffer = [0u8; 4096];
            for seen in 1..=2 {
                let (len, from) = answering.recv_from(&mut buffer).await.unwrap();
                if seen == 2 {
                    let mut answer = buffer[..len].to_vec();
                    answer[2] |= QR_BIT;
                    answering.send_to(&answer, from).await.unwrap();
                }
            }
        });
        let attempts = notify_one(addr, Some(signer), "example.com".into(), 7, 300, wait).await;
        assert_eq!(attempts, Some(2));
        responder.await.unwrap();
    }

    #[test]
    fn transfers_need_a_listed_peer_and_a_key() {
        let key = TsigKey::from_base64(
            "k",
            "hmac-sha256".parse().unwrap(),
            "Z2F0ZXdheS1kbnMtdGVzdC1zZWNyZXQtMzItYnl0ZXM=",
        )
        .unwrap();
        let transfers = Transfers {
            secondaries: vec!["192.0.2.53:53".parse().unwrap()],
            signer: Some(key.signer().unwrap()),
        };
        assert!(transfers.allowed("192.0.2.53".parse().unwrap()));
        assert!(!transfers.allowed("192.0.2.54".parse().unwrap()));
        let keyless = Transfers {
            signer: None,
            ..transfers
        };
        assert!(!keyless.allowed("192.0.2.53".parse().unwrap()));
    }

    #[tokio::test]
    async fn a_change_that_changes_nothing_keeps_the_serial() {
        let mut config = EmbeddedConfig::new(vec!["example.com".into()]);
        config.listen = "127.0.0.1:0".parse().unwrap();
        let server = EmbeddedDns::start(config).await.unwrap();
        let record = Endpoint::new("a.example.com", RecordType::A, ["192.0.2.1"]);
        let create = Changes {
            create: vec![record.clone()],
            ..Changes::default()
        };
        server.apply_changes(&create).unwrap();
        let serial = server.serial("example.com");
        server.apply_changes(&create).unwrap();
        let same = Changes {
            delete: vec![record.clone()],
            create: vec![record],
            ..Changes::default()
        };
        server.apply_changes(&same).unwrap();
        assert_eq!(server.serial("example.com"), serial);
        assert!(matches!(
            EmbeddedDns::start(EmbeddedConfig {
                secondaries: vec!["127.0.0.1:53".parse().unwrap()],
                listen: "127.0.0.1:0".parse().unwrap(),
                ..EmbeddedConfig::new(vec!["example.com".into()])
            })
            .await,
            Err(Error::SecondariesWithoutKey)
        ));
    }

    /// A signed server (no per-source answer limit) holding a.example.com A 192.0.2.1.
    async fn signed_server(algorithm: crate::dns::dnssec::KeyAlgorithm) -> EmbeddedDns {
        let (key, _) = ZoneKey::generate(algorithm).unwrap();
        let mut config = EmbeddedConfig::new(vec!["example.com".into()]);
        config.listen = "127.0.0.1:0".parse().unwrap();
        config.udp_answers_per_source_per_second = 0;
        config.dnssec_keys = vec![Arc::new(key)];
        let server = EmbeddedDns::start(config).await.unwrap();
        server
            .apply_changes(&Changes {
                create: vec![Endpoint::new("a.example.com", RecordType::A, ["192.0.2.1"])],
                ..Changes::default()
            })
            .unwrap();
        server
    }

    /// The expiration of the first RRSIG in an answer section.
    fn rrsig_expiration(answer: &Message) -> Option<u32> {
        answer.answers.iter().find_map(|record| match &record.data {
            RData::DNSSEC(hickory_proto::dnssec::rdata::DNSSECRData::RRSIG(sig)) => {
                Some(sig.input().sig_expiration.get())
            }
            _ => None,
        })
    }

    /// The signature expiration on the A answer of a.example.com asked with the DO bit.
    fn signed_a_expiration(server: &EmbeddedDns) -> u32 {
        let answer = server
            .answer(&a_query(0, true).to_vec().unwrap(), None)
            .unwrap();
        rrsig_expiration(&Message::from_vec(&answer[0]).unwrap()).expect("an RRSIG with the DO bit")
    }

    #[tokio::test]
    async fn signatures_are_renewed_at_the_next_signing_period_with_a_new_serial() {
        use crate::dns::dnssec::{KeyAlgorithm, RESIGN_PERIOD, VALIDITY_PERIODS};
        let server = signed_server(KeyAlgorithm::Ed25519).await;
        let now = unix_now();
        let serial = server.serial("example.com").unwrap();
        let expiration = signed_a_expiration(&server);
        assert!(u64::from(expiration) >= now + (VALIDITY_PERIODS - 1) * RESIGN_PERIOD);

        // Within the period nothing is re-signed.
        assert!(server.refresh_signatures(now).unwrap().is_empty());
        assert_eq!(server.serial("example.com"), Some(serial));

        // The clock in the next period: new signatures, expiring a period later, a new serial
        // (by the usual rule: that minute's window start), and the change in the IXFR journal.
        let later = now + RESIGN_PERIOD;
        let changed = server.refresh_signatures(later).unwrap();
        let renewed = server.serial("example.com").unwrap();
        assert_eq!(changed, [("example.com".to_string(), renewed)]);
        assert_eq!(renewed, next_serial(serial, later));
        assert_eq!(
            signed_a_expiration(&server),
            expiration + RESIGN_PERIOD as u32
        );
        let store = server.store.read().unwrap();
        let deltas = store.zones[0].changes_since(serial).unwrap();
        assert!(
            deltas[0]
                .added
                .iter()
                .any(|r| r.record_type() == WireType::RRSIG)
        );
        drop(store);
        assert!(server.refresh_signatures(later + 60).unwrap().is_empty());
    }

    #[tokio::test]
    async fn rrsig_queries_get_the_signatures_and_no_denial_proof() {
        let server = signed_server(crate::dns::dnssec::KeyAlgorithm::Ecdsap256sha256).await;
        let mut request = Message::query();
        request.add_query(Query::query(
            wire_name("a.example.com").unwrap(),
            WireType::RRSIG,
        ));
        let mut edns = Edns::new();
        edns.set_dnssec_ok(true);
        request.set_edns(edns);
        let answer = server.answer(&request.to_vec().unwrap(), None).unwrap();
        let answer = Message::from_vec(&answer[0]).unwrap();
        // The RRSIGs of the A and the NSEC RRsets; nothing to deny.
        assert_eq!(answer.answers.len(), 2, "{answer:?}");
        assert!(answer.authorities.is_empty(), "{answer:?}");
    }

    /// Changes merge into the sorted RRsets as a map would take them; without secondaries no
    /// journal is kept, and a change larger than the journal empties it.
    #[test]
    fn changes_merge_in_order_and_only_secondaries_get_a_journal() {
        let mut zone = Zone::new("example.com".into(), 1);
        let a = |name: &str, ip: &str| Endpoint::new(name, RecordType::A, [ip]).with_ttl(60);
        let (b, c, d) = (
            a("b.example.com", "192.0.2.2"),
            a("c.x.example.com", "192.0.2.3"),
            a("d.example.com", "192.0.2.4"),
        );
        let touched: Touched<'_> = [&d, &b, &c]
            .into_iter()
            .map(|e| (e.key(), Some(e)))
            .collect();
        assert!(zone.merge(&touched, false).is_some_and(|d| d.is_empty()));
        zone.reindex();
        let names: Vec<&str> = zone.rrsets.iter().map(|set| &*set.name).collect();
        assert_eq!(names, ["b.example.com", "c.x.example.com", "d.example.com"]);
        assert!(zone.has_name("x.example.com") && !zone.has_records_at("x.example.com"));
        // Delete one, change one, keep one: two differences, in key order.
        let b2 = a("b.example.com", "192.0.2.20");
        let touched: Touched<'_> = [(d.key(), None), (b2.key(), Some(&b2)), (c.key(), Some(&c))]
            .into_iter()
            .collect();
        let differences = zone.merge(&touched, true).unwrap();
        let changed: Vec<(bool, bool)> = differences
            .iter()
            .map(|(before, after)| (before.is_some(), after.is_some()))
            .collect();
        assert_eq!(changed, [(true, true), (true, false)]);
        assert_eq!(
            zone.rrset("b.example.com", RecordType::A).map(|s| s.ttl),
            Some(60)
        );
        assert!(zone.rrset("d.example.com", RecordType::A).is_none());
        zone.journal_change(1, 2, &differences);
        assert_eq!(zone.journal.len(), 1);
        let many: Vec<Endpoint> = (0..JOURNAL_RECORDS + 1)
            .map(|i| a(&format!("n{i}.example.com"), "192.0.2.9"))
            .collect();
        let touched: Touched<'_> = many.iter().map(|e| (e.key(), Some(e))).collect();
        let differences = zone.merge(&touched, true).unwrap();
        zone.journal_change(2, 3, &differences);
        assert!(
            zone.journal.is_empty(),
            "too large for the journal: AXFR for everyone"
        );
        assert!(
            zone.merge(&touched, true).is_none(),
            "the same again changes nothing"
        );
    }

    /// One request over UDP to `server`, its answer decoded.
    async fn ask_over_udp(client: &UdpSocket, server: SocketAddr, request: &Message) -> Message {
        client
            .send_to(&request.to_vec().unwrap(), server)
            .await
            .unwrap();
        let mut buffer = [0u8; 4096];
        let (len, _) = timeout(Duration::from_secs(5), client.recv_from(&mut buffer))
            .await
            .unwrap()
            .unwrap();
        Message::from_vec(&buffer[..len]).unwrap()
    }

    fn a_query(id: u16, dnssec_ok: bool) -> Message {
        let mut request = Message::query();
        request.metadata.id = id;
        request.add_query(Query::query(
            wire_name("a.example.com").unwrap(),
            WireType::A,
        ));
        if dnssec_ok {
            let mut edns = Edns::new();
            edns.set_dnssec_ok(true);
            request.set_edns(edns);
        }
        request
    }

    #[tokio::test]
    async fn a_cached_answer_takes_the_request_id_and_never_outlives_a_change() {
        let mut config = EmbeddedConfig::new(vec!["example.com".into()]);
        config.listen = "127.0.0.1:0".parse().unwrap();
        config.udp_answers_per_source_per_second = 0;
        let server = EmbeddedDns::start(config).await.unwrap();
        let client = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        // The same request again and again (from the cache after the first): each answer has
        // its own ID.
        for id in 1..=4 {
            let missing = ask_over_udp(&client, server.local_addr(), &a_query(id, false)).await;
            assert_eq!(missing.metadata.id, id);
            assert_eq!(missing.metadata.response_code, ResponseCode::NXDomain);
        }
        let create = Changes {
            create: vec![Endpoint::new("a.example.com", RecordType::A, ["192.0.2.1"])],
            ..Changes::default()
        };
        server.apply_changes(&create).unwrap();
        let found = ask_over_udp(&client, server.local_addr(), &a_query(3, false)).await;
        assert_eq!(found.metadata.id, 3);
        assert_eq!(found.metadata.response_code, ResponseCode::NoError);
        assert_eq!(found.answers.len(), 1, "the change is seen at once");
    }

    #[tokio::test]
    async fn re_signing_empties_the_udp_answer_cache() {
        use crate::dns::dnssec::{KeyAlgorithm, RESIGN_PERIOD};
        let server = signed_server(KeyAlgorithm::Ed25519).await;
        let client = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let expiration = rrsig_expiration;
        let before = ask_over_udp(&client, server.local_addr(), &a_query(1, true)).await;
        let cached = ask_over_udp(&client, server.local_addr(), &a_query(2, true)).await;
        assert_eq!(expiration(&before), expiration(&cached));
        assert!(expiration(&before).is_some(), "{before:?}");
        // The next signing period: no record changed, yet the answers must carry the new
        // signatures, not the cached ones.
        let changed = server
            .refresh_signatures(unix_now() + RESIGN_PERIOD)
            .unwrap();
        assert_eq!(changed.len(), 1);
        let after = ask_over_udp(&client, server.local_addr(), &a_query(3, true)).await;
        assert_eq!(
            expiration(&after),
            expiration(&before).map(|e| e + RESIGN_PERIOD as u32)
        );
    }

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

    #[test]
    fn exact_wildcard_empty_non_terminal_and_nxdomain() {
        let exact = ask("a.b.example.com", WireType::A);
        assert_eq!(exact.metadata.response_code, ResponseCode::NoError);
        assert!(exact.metadata.authoritative);
        assert_eq!(exact.answers.len(), 1);

        // b.example.com exists as an empty non-terminal: NODATA, never the wildcard.
        let ent = ask("b.example.com", WireType::A);
        assert_eq!(ent.metadata.response_code, ResponseCode::NoError);
        assert!(ent.answers.is_empty());
        assert_eq!(ent.authorities[0].record_type(), WireType::SOA);

        // Below the empty non-terminal: closest encloser b.example.com has no wildcard.
        let below = ask("x.b.example.com", WireType::A);
        assert_eq!(below.metadata.response_code, ResponseCode::NXDomain);

        // Synthesised from *.example.com, owner = the query name, several labels deep.
        let wild = ask("q.r.example.com", WireType::A);
        assert_eq!(wild.metadata.response_code, ResponseCode::NoError);
        assert_eq!(name_string(&wild.answers[0].name), "q.r.example.com");
        let wild_nodata = ask("q.example.com", WireType::AAAA);
        assert!(wild_nodata.answers.is_empty());
        assert_eq!(wild_nodata.metadata.response_code, ResponseCode::NoError);
    }

    #[test]
    fn cname_is_followed_inside_the_zone() {
        let answer = ask("www.example.com", WireType::A);
        let types: Vec<WireType> = answer.answers.iter().map(|r| r.record_type()).collect();
        assert_eq!(types, [WireType::CNAME, WireType::A]);
    }

    #[test]
    fn refuses_outside_and_answers_apex() {
        assert_eq!(
            ask("example.org", WireType::A).metadata.response_code,
            ResponseCode::Refused
        );
        let soa = ask("example.com", WireType::SOA);
        assert_eq!(soa.answers[0].record_type(), WireType::SOA);
        assert_eq!(
            ask("example.com", WireType::AXFR).metadata.response_code,
            ResponseCode::Refused
        );
        let ns = ask("example.com", WireType::NS);
        assert_eq!(ns.answers[0].record_type(), WireType::NS);
    }
}
