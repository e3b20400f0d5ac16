//! RFC 2136 dynamic updates (BIND 9 and friends), signed with TSIG; listing by AXFR over TCP.
//!
//! Updates are batched per zone, at most `batch_size` RRset operations per UPDATE message and
//! fewer when they would not fit in [`MESSAGE_BUDGET`] bytes, sent one after the other over one
//! TCP connection. Each message is atomic on the server.
//! Creates carry an "RRset does not exist" prerequisite, so a record that appeared since the
//! listing is never overwritten (the batch fails, the next pass re-lists and reports it).
//!
//! Listing cache: a zone's last AXFR is kept with its SOA serial. A listing first asks for the
//! SOA; an unchanged serial means an unchanged zone, so the cached copy is used and no AXFR is
//! needed. After an apply the cache is updated only when the serial moved by exactly the number
//! of UPDATE messages we had accepted (BIND's default `serial-update-method increment`):
//! anything else (another writer, another serial method) drops the cache.
//! [`Provider::invalidate_cache`] forces the next listing to transfer the zone (the sync
//! loop's periodic resync does, to repair drift that bypassed the serial).

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::future::BoxFuture;
use hickory_proto::op::update_message::UpdateMessage;
use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::rdata::SOA;
use hickory_proto::rr::{
    DNSClass, Name, RData, Record, RecordType as WireType, TSigVerifier, TSigner,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;

use crate::model::RecordType;
use crate::model::dns_name::canonical;
use crate::tsig::TsigKey;

use crate::dns::batches::HalvingBatches;
use crate::dns::wire::{
    InvalidTarget, group_records, wire_name, wire_records, wire_rrset, wire_type,
};
use crate::dns::{Changes, DEFAULT_TTL, Endpoint, Provider, SharedEdit, zone_of};

/// Environment variable read for the TSIG secret when no secret file is given.
pub const TSIG_SECRET_ENV: &str = "GATEWAY_DNS_RFC2136_TSIG_SECRET";

/// Upper bound on AXFR messages for one zone (guards against a server that never ends).
const MAX_AXFR_MESSAGES: usize = 1_000_000;

/// A DNS server as `HOST:PORT` (`[v6]:PORT` for an IPv6 literal; the port defaults to 53). A
/// host name is looked up at every connection, so the sync follows a Service or a server whose
/// address changes (`bind.dns.svc:53`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerAddress {
    host: String,
    port: u16,
}

impl ServerAddress {
    pub fn new(host: impl Into<String>, port: u16) -> ServerAddress {
        ServerAddress {
            host: host.into(),
            port,
        }
    }

    pub fn host(&self) -> &str {
        &self.host
    }

    pub fn port(&self) -> u16 {
        self.port
    }
}

impl From<SocketAddr> for ServerAddress {
    fn from(addr: SocketAddr) -> ServerAddress {
        ServerAddress::new(addr.ip().to_string(), addr.port())
    }
}

impl std::str::FromStr for ServerAddress {
    type Err = String;

    fn from_str(text: &str) -> Result<ServerAddress, String> {
        let text = text.trim();
        if let Ok(addr) = text.parse::<SocketAddr>() {
            return Ok(addr.into());
        }
        let bad = || format!("{text:?} is not HOST:PORT (e.g. 192.0.2.53:53, bind.dns.svc:53)");
        let (host, port) = match text.rsplit_once(':') {
            // Not an IPv6 literal without brackets (several colons, no port).
            Some((host, port)) if !host.contains(':') => {
                (host, port.parse::<u16>().map_err(|_| bad())?)
            }
            Some(_) => return Err(bad()),
            None => (text, 53),
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() || host.contains(['/', ' ']) {
            return Err(bad());
        }
        Ok(ServerAddress::new(host, port))
    }
}

impl fmt::Display for ServerAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

#[derive(Debug, Clone)]
pub struct Rfc2136Config {
    pub server: ServerAddress,
    /// Zones managed (lower-case, no trailing dot).
    pub zones: Vec<String>,
    pub tsig: Option<TsigKey>,
    /// Per network operation (connect, one message exchange, one AXFR message).
    pub timeout: Duration,
    /// RRset operations per UPDATE message, at most: fewer when they would not fit in
    /// [`MESSAGE_BUDGET`] bytes.
    pub batch_size: usize,
}

impl Rfc2136Config {
    pub fn new(
        server: impl Into<ServerAddress>,
        zones: Vec<String>,
        tsig: Option<TsigKey>,
    ) -> Self {
        Rfc2136Config {
            server: server.into(),
            zones: zones.iter().map(|z| canonical(z).into_owned()).collect(),
            tsig,
            timeout: Duration::from_secs(10),
            batch_size: 1000,
        }
    }
}

/// The bytes of an UPDATE message's records, at most: a message over TCP stops at 64 KiB, and
/// the header, the zone and a TSIG record need room too. Each message is a version of the zone
/// the server commits and journals on its own, and that its secondaries' IXFR walks: fewer,
/// fuller messages.
pub const MESSAGE_BUDGET: usize = 60_000;

/// Traffic counters (for tests and benchmarks).
#[derive(Debug, Default)]
pub struct Rfc2136Stats {
    pub update_messages: AtomicU64,
    pub transfers: AtomicU64,
    /// SOA queries (listing cache checks).
    pub soa_queries: AtomicU64,
    /// Listings of a zone answered from the cache.
    pub cache_hits: AtomicU64,
    /// Listings of a zone brought up to date by an incremental transfer (IXFR).
    pub incremental_transfers: AtomicU64,
}

pub struct Rfc2136Provider {
    config: Rfc2136Config,
    signer: Option<TSigner>,
    stats: Rfc2136Stats,
    cache: Mutex<BTreeMap<String, ZoneCache>>,
}

/// A zone's content as of `serial`.
struct ZoneCache {
    serial: u32,
    records: BTreeMap<(String, RecordType), Endpoint>,
}

impl ZoneCache {
    fn store(&mut self, endpoint: &Endpoint) {
        let stored = Endpoint {
            ttl: Some(endpoint.ttl_or_default()),
            resource: None,
            ..endpoint.clone()
        };
        self.records
            .insert((endpoint.dns_name.clone(), endpoint.record_type), stored);
    }

    fn apply(&mut self, operations: &[Operation<'_>]) {
        for operation in operations {
            match operation {
                Operation::Delete(endpoint, _) => {
                    self.records
                        .remove(&(endpoint.dns_name.clone(), endpoint.record_type));
                }
                Operation::Replace(endpoint, _) | Operation::Create(endpoint) => {
                    self.store(endpoint);
                }
                Operation::Shared(edit) => {
                    let (data, txt) = edit.outcome();
                    for (key, after) in [
                        ((edit.dns_name.clone(), edit.record_type), data),
                        ((edit.txt_name.clone(), RecordType::TXT), txt),
                    ] {
                        match after {
                            Some(after) => self.store(&after),
                            None => {
                                self.records.remove(&key);
                            }
                        }
                    }
                }
            }
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Tsig(#[from] crate::tsig::Error),
    #[error("cannot reach DNS server {server}: {source}")]
    Connect {
        server: ServerAddress,
        source: std::io::Error,
    },
    #[error("DNS server {server}: connection failed during {operation}: {source}")]
    Io {
        server: ServerAddress,
        operation: String,
        source: std::io::Error,
    },
    #[error("DNS server {server} did not answer the {operation} within {timeout:?}")]
    Timeout {
        server: ServerAddress,
        operation: String,
        timeout: Duration,
    },
    #[error("DNS server {server} refused the {operation}: {detail}")]
    Refused {
        server: ServerAddress,
        operation: String,
        detail: String,
        /// The server objected to the content (a prerequisite, a name), not to who we are.
        content: bool,
    },
    #[error("{failed} of {total} RRset changes were rejected; first: {first}")]
    Partial {
        failed: usize,
        total: usize,
        first: Box<Error>,
    },
    #[error("DNS server {server}: bad response to the {operation}: {detail}")]
    BadResponse {
        server: ServerAddress,
        operation: String,
        detail: String,
    },
    #[error("cannot encode DNS message: {0}")]
    Encode(String),
    #[error("{0} is in none of the managed zones")]
    OutsideZones(String),
    #[error(transparent)]
    InvalidTarget(#[from] InvalidTarget),
}

impl crate::dns::ProviderError for Error {}

/// One RRset operation in an UPDATE message.
enum Operation<'a> {
    /// An RRset deleted, and the ownership RRset that must still be as listed.
    Delete(&'a Endpoint, Option<&'a Endpoint>),
    /// An RRset replaced, and the ownership RRset that must still be as listed.
    Replace(&'a Endpoint, Option<&'a Endpoint>),
    Create(&'a Endpoint),
    Shared(&'a SharedEdit),
}

impl Operation<'_> {
    /// The name the operation is placed in a zone by.
    fn dns_name(&self) -> &str {
        match self {
            Operation::Delete(e, _) | Operation::Replace(e, _) | Operation::Create(e) => {
                &e.dns_name
            }
            Operation::Shared(edit) => &edit.dns_name,
        }
    }

    /// An upper bound of the bytes the operation takes in an UPDATE message (names taken
    /// uncompressed): what batches are packed by, to stay within a message.
    fn size_bound(&self) -> usize {
        let owned = |owned_by: &Option<&Endpoint>| owned_by.map_or(0, endpoint_bound);
        match self {
            Operation::Delete(e, owned_by) => rrset_bound(&e.dns_name, []) + owned(owned_by),
            Operation::Replace(e, owned_by) => {
                rrset_bound(&e.dns_name, []) + endpoint_bound(e) + owned(owned_by)
            }
            Operation::Create(e) => rrset_bound(&e.dns_name, []) + endpoint_bound(e),
            Operation::Shared(edit) => {
                let as_listed = |name: &str, listed: &Option<Endpoint>| {
                    listed
                        .as_ref()
                        .map_or_else(|| rrset_bound(name, []), endpoint_bound)
                };
                let txt = [&edit.txt_remove, &edit.txt_add].into_iter().flatten();
                as_listed(&edit.txt_name, &edit.listed_txt)
                    + as_listed(&edit.dns_name, &edit.listed)
                    + rrset_bound(&edit.txt_name, txt.map(String::as_str))
                    + rrset_bound(
                        &edit.dns_name,
                        edit.add.iter().chain(&edit.remove).map(String::as_str),
                    )
            }
        }
    }
}

/// How many of `creates` each UPDATE message carries, in order, as [`Rfc2136Provider`] packs
/// them (a benchmark's `nsupdate` baseline sends the same batches).
pub fn create_batches(creates: &[Endpoint], batch_size: usize) -> Vec<usize> {
    let operations: Vec<Operation<'_>> = creates.iter().map(Operation::Create).collect();
    HalvingBatches::packed(
        &operations,
        batch_size,
        MESSAGE_BUDGET,
        Operation::size_bound,
    )
    .map(<[_]>::len)
    .collect()
}

/// At most the bytes of `name`'s records of `values` in a message, plus one record without
/// data (an RRset deleted, or a prerequisite on it): a name takes at most its text and two
/// bytes; a record's type, class, TTL and length ten more; its data at most the value's text
/// and two bytes (a TXT string's length byte per 255), or the 16 of an AAAA address.
fn rrset_bound<'a>(name: &str, values: impl IntoIterator<Item = &'a str>) -> usize {
    let record = name.len() + 2 + 10;
    let mut bytes = record;
    for value in values {
        bytes += record + (value.len() + 2 + value.len() / 255).max(16);
    }
    bytes
}

fn endpoint_bound(endpoint: &Endpoint) -> usize {
    rrset_bound(
        &endpoint.dns_name,
        endpoint.targets.iter().map(String::as_str),
    )
}

impl Rfc2136Provider {
    pub fn new(config: Rfc2136Config) -> Result<Self, Error> {
        let signer = match &config.tsig {
            Some(key) => Some(key.signer()?),
            None => None,
        };
        Ok(Rfc2136Provider {
            config,
            signer,
            stats: Rfc2136Stats::default(),
            cache: Mutex::new(BTreeMap::new()),
        })
    }

    pub fn stats(&self) -> &Rfc2136Stats {
        &self.stats
    }

    async fn connect(&self) -> Result<TcpStream, Error> {
        let server = self.config.server.clone();
        // (host, port): resolved now, at each connection; every address is tried in turn.
        let connect = TcpStream::connect((server.host(), server.port()));
        match timeout(self.config.timeout, connect).await {
            Ok(Ok(stream)) => {
                let _ = stream.set_nodelay(true);
                Ok(stream)
            }
            Ok(Err(source)) => Err(Error::Connect { server, source }),
            Err(_) => Err(Error::Timeout {
                server,
                operation: "connect".into(),
                timeout: self.config.timeout,
            }),
        }
    }

    /// Sign (when a key is configured) and encode; returns the verifier for the answer.
    fn seal(&self, message: &mut Message) -> Result<(Vec<u8>, Option<TSigVerifier>), Error> {
        let verifier = match &self.signer {
            Some(signer) => message
                .finalize(signer, unix_now())
                .map_err(|e| Error::Encode(e.to_string()))?,
            None => None,
        };
        let bytes = message.to_vec().map_err(|e| Error::Encode(e.to_string()))?;
        Ok((bytes, verifier))
    }

    async fn send(
        &self,
        stream: &mut TcpStream,
        bytes: &[u8],
        operation: &str,
    ) -> Result<(), Error> {
        let len = u16::try_from(bytes.len())
            .map_err(|_| Error::Encode(format!("{operation}: message over 64 KiB")))?;
        let mut framed = Vec::with_capacity(bytes.len() + 2);
        framed.extend_from_slice(&len.to_be_bytes());
        framed.extend_from_slice(bytes);
        self.io(operation, stream.write_all(&framed)).await
    }

    async fn receive(&self, stream: &mut TcpStream, operation: &str) -> Result<Vec<u8>, Error> {
        let mut len = [0u8; 2];
        self.io(operation, stream.read_exact(&mut len)).await?;
        let mut buffer = vec![0u8; u16::from_be_bytes(len) as usize];
        self.io(operation, stream.read_exact(&mut buffer)).await?;
        Ok(buffer)
    }

    async fn io<T>(
        &self,
        operation: &str,
        future: impl Future<Output = std::io::Result<T>>,
    ) -> Result<T, Error> {
        let server = self.config.server.clone();
        match timeout(self.config.timeout, future).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(source)) => Err(Error::Io {
                server,
                operation: operation.to_string(),
                source,
            }),
            Err(_) => Err(Error::Timeout {
                server,
                operation: operation.to_string(),
                timeout: self.config.timeout,
            }),
        }
    }

    /// Decode an answer, turn an error rcode or a TSIG failure into a clear error, and check
    /// the answer's own signature.
    fn check_answer(
        &self,
        bytes: &[u8],
        request_id: u16,
        verifier: Option<&mut TSigVerifier>,
        operation: &str,
    ) -> Result<Message, Error> {
        read_answer(&self.config.server, bytes, request_id, verifier, operation)
    }

    /// The zone's current SOA serial.
    async fn soa_serial(&self, stream: &mut TcpStream, zone: &str) -> Result<u32, Error> {
        let operation = format!("SOA query of {zone}");
        let zone_name = wire_name(zone).map_err(|e| Error::Encode(e.to_string()))?;
        let mut query = Message::new(fastrand::u16(..), MessageType::Query, OpCode::Query);
        query.add_query(Query::query(zone_name, WireType::SOA));
        let request_id = query.metadata.id;
        let (bytes, mut verifier) = self.seal(&mut query)?;
        self.stats.soa_queries.fetch_add(1, Ordering::Relaxed);
        self.send(stream, &bytes, &operation).await?;
        let answer = self.receive(stream, &operation).await?;
        let message = self.check_answer(&answer, request_id, verifier.as_mut(), &operation)?;
        soa_serial_of(&message).ok_or_else(|| Error::BadResponse {
            server: self.config.server.clone(),
            operation,
            detail: "no SOA record in the answer".into(),
        })
    }

    /// Full zone transfer of one zone: its RRsets (SOA left out) and its serial.
    async fn transfer(&self, zone: &str) -> Result<(Vec<Endpoint>, u32), Error> {
        let operation = format!("zone transfer (AXFR) of {zone}");
        let zone_name = wire_name(zone).map_err(|e| Error::Encode(e.to_string()))?;
        let mut query = Message::new(fastrand::u16(..), MessageType::Query, OpCode::Query);
        query.add_query(Query::query(zone_name, WireType::AXFR));
        let request_id = query.metadata.id;
        let (bytes, mut verifier) = self.seal(&mut query)?;
        let mut stream = self.connect().await?;
        self.stats.transfers.fetch_add(1, Ordering::Relaxed);
        self.send(&mut stream, &bytes, &operation).await?;

        let mut transfer = ZoneTransfer::new();
        for _ in 0..MAX_AXFR_MESSAGES {
            let answer = self.receive(&mut stream, &operation).await?;
            let message = self.check_answer(&answer, request_id, verifier.as_mut(), &operation)?;
            if let Some(serial) = transfer.absorb(message) {
                return Ok((transfer.endpoints(), serial));
            }
        }
        Err(Error::BadResponse {
            server: self.config.server.clone(),
            operation,
            detail: "transfer did not end".into(),
        })
    }

    /// The zone's RRsets brought from the cached serial `since` to the server's by an
    /// incremental transfer (IXFR, RFC 1995), the cache updated; `None` when the server sent
    /// the zone whole instead, or the cache moved meanwhile (the caller transfers it whole).
    async fn incremental(&self, zone: &str, since: u32) -> Result<Option<Vec<Endpoint>>, Error> {
        let operation = format!("incremental zone transfer (IXFR) of {zone}");
        let zone_name = wire_name(zone).map_err(|e| Error::Encode(e.to_string()))?;
        let mut query = Message::new(fastrand::u16(..), MessageType::Query, OpCode::Query);
        query.add_query(Query::query(zone_name.clone(), WireType::IXFR));
        // Only the serial of the SOA in the authority section counts (RFC 1995 3).
        let soa = SOA::new(zone_name.clone(), zone_name.clone(), since, 0, 0, 0, 0);
        query.add_authority(Record::from_rdata(zone_name, 0, RData::SOA(soa)));
        let request_id = query.metadata.id;
        let (bytes, mut verifier) = self.seal(&mut query)?;
        let mut stream = self.connect().await?;
        self.send(&mut stream, &bytes, &operation).await?;
        let mut diff = IncrementalTransfer::new(since);
        for _ in 0..MAX_AXFR_MESSAGES {
            let answer = self.receive(&mut stream, &operation).await?;
            let message = self.check_answer(&answer, request_id, verifier.as_mut(), &operation)?;
            match diff.absorb(message) {
                TransferStep::More => continue,
                TransferStep::Whole => return Ok(None),
                TransferStep::Done(serial) => {
                    let Ok(mut cache) = self.cache.lock() else {
                        return Ok(None);
                    };
                    let Some(cached) = cache.get_mut(zone).filter(|c| c.serial == since) else {
                        return Ok(None);
                    };
                    diff.apply(cached);
                    cached.serial = serial;
                    return Ok(Some(cached.records.values().cloned().collect()));
                }
            }
        }
        Err(Error::BadResponse {
            server: self.config.server.clone(),
            operation,
            detail: "transfer did not end".into(),
        })
    }

    /// Every zone's RRsets, from the cache when the zone's serial says it is current.
    async fn list(&self) -> Result<Vec<Endpoint>, Error> {
        let mut stream = self.connect().await?;
        let mut all = Vec::new();
        for zone in &self.config.zones {
            let serial = self.soa_serial(&mut stream, zone).await?;
            if let Ok(cache) = self.cache.lock()
                && let Some(cached) = cache.get(zone).filter(|c| c.serial == serial)
            {
                self.stats.cache_hits.fetch_add(1, Ordering::Relaxed);
                all.extend(cached.records.values().cloned());
                continue;
            }
            let stale = match self.cache.lock() {
                Ok(cache) => cache.get(zone).map(|c| c.serial),
                Err(_) => None,
            };
            // A zone read before: only what changed since, when the server keeps the journal.
            if let Some(since) = stale {
                match self.incremental(zone, since).await {
                    Ok(Some(records)) => {
                        self.stats
                            .incremental_transfers
                            .fetch_add(1, Ordering::Relaxed);
                        all.extend(records);
                        continue;
                    }
                    Ok(None) => {}
                    Err(error) => {
                        tracing::debug!(%error, zone, "incremental transfer failed; transferring the zone whole");
                    }
                }
            }
            let (endpoints, serial) = self.transfer(zone).await?;
            if let Ok(mut cache) = self.cache.lock() {
                let records = endpoints
                    .iter()
                    .map(|e| ((e.dns_name.clone(), e.record_type), e.clone()))
                    .collect();
                cache.insert(zone.clone(), ZoneCache { serial, records });
            }
            all.extend(endpoints);
        }
        Ok(all)
    }

    fn forget(&self, zone: Option<&str>) {
        if let Ok(mut cache) = self.cache.lock() {
            match zone {
                Some(zone) => {
                    cache.remove(zone);
                }
                None => cache.clear(),
            }
        }
    }

    fn update_message(&self, zone: &Name, operations: &[Operation<'_>]) -> Result<Message, Error> {
        let mut message = Message::new(fastrand::u16(..), MessageType::Query, OpCode::Update);
        let mut zone_query = Query::query(zone.clone(), WireType::SOA);
        zone_query.set_query_class(DNSClass::IN);
        message.add_zone(zone_query);
        let delete_rrset = |endpoint: &Endpoint| -> Result<Record, Error> {
            let name = wire_name(&endpoint.dns_name).map_err(|e| Error::Encode(e.to_string()))?;
            let mut record = Record::update0(name, 0, wire_type(endpoint.record_type));
            record.dns_class = DNSClass::ANY;
            Ok(record)
        };
        // Prerequisite "RRset does not exist" (RFC 2136 2.4.3).
        let absent = |name: &str, record_type: RecordType| -> Result<Record, Error> {
            let name = wire_name(name).map_err(|e| Error::Encode(e.to_string()))?;
            let mut record = Record::update0(name, 0, wire_type(record_type));
            record.dns_class = DNSClass::NONE;
            Ok(record)
        };
        // Prerequisite "RRset exists (value dependent)" (RFC 2136 2.4.2): exactly these
        // records, TTL zero.
        let exactly =
            |endpoint: &Endpoint| -> Result<Vec<Record>, Error> { Ok(wire_records(endpoint, 0)?) };
        let as_listed =
            |name: &str, record_type: RecordType, listed: Option<&Endpoint>| match listed {
                Some(listed) => exactly(listed),
                None => absent(name, record_type).map(|r| vec![r]),
            };
        // One record removed from its RRset (RFC 2136 2.5.4): class NONE, TTL zero.
        let remove_one = |name: &str, record_type: RecordType, target: &str| {
            let mut records = wire_rrset(name, record_type, std::iter::once(target), 0)?;
            for record in &mut records {
                record.dns_class = DNSClass::NONE;
            }
            Ok::<_, Error>(records)
        };
        for operation in operations {
            match operation {
                Operation::Delete(endpoint, owned_by) => {
                    if let Some(owned_by) = owned_by {
                        message.add_pre_requisites(exactly(owned_by)?);
                    }
                    message.add_update(delete_rrset(endpoint)?);
                }
                Operation::Replace(endpoint, owned_by) => {
                    if let Some(owned_by) = owned_by {
                        message.add_pre_requisites(exactly(owned_by)?);
                    }
                    message.add_update(delete_rrset(endpoint)?);
                    message.add_updates(wire_records(endpoint, endpoint.ttl_or_default())?);
                }
                Operation::Create(endpoint) => {
                    message.add_pre_requisite(absent(&endpoint.dns_name, endpoint.record_type)?);
                    message.add_updates(wire_records(endpoint, endpoint.ttl_or_default())?);
                }
                Operation::Shared(edit) => {
                    message.add_pre_requisites(as_listed(
                        &edit.txt_name,
                        RecordType::TXT,
                        edit.listed_txt.as_ref(),
                    )?);
                    message.add_pre_requisites(as_listed(
                        &edit.dns_name,
                        edit.record_type,
                        edit.listed.as_ref(),
                    )?);
                    // Ownership before the record, in one message: applied whole or not at all.
                    if let Some(value) = &edit.txt_remove {
                        message.add_updates(remove_one(&edit.txt_name, RecordType::TXT, value)?);
                    }
                    if let Some(value) = &edit.txt_add {
                        let ttl = edit
                            .listed_txt
                            .as_ref()
                            .map_or(DEFAULT_TTL, Endpoint::ttl_or_default);
                        message.add_updates(wire_rrset(
                            &edit.txt_name,
                            RecordType::TXT,
                            std::iter::once(value.as_str()),
                            ttl,
                        )?);
                    }
                    for target in &edit.remove {
                        message.add_updates(remove_one(&edit.dns_name, edit.record_type, target)?);
                    }
                    message.add_updates(wire_rrset(
                        &edit.dns_name,
                        edit.record_type,
                        edit.add.iter().map(String::as_str),
                        edit.ttl,
                    )?);
                }
            }
        }
        let mut edns = Edns::new();
        edns.set_max_payload(1232);
        message.set_edns(edns);
        Ok(message)
    }

    async fn apply_changes(&self, changes: &Changes) -> Result<(), Error> {
        // Per zone, in the order the plan relies on: deletes, updates, creates.
        let mut per_zone: BTreeMap<&str, Vec<Operation<'_>>> = BTreeMap::new();
        let owned_by = |e: &Endpoint| changes.owned_by.get(&(e.dns_name.clone(), e.record_type));
        let ordered = changes
            .delete
            .iter()
            .map(|e| Operation::Delete(e, owned_by(e)))
            .chain(
                changes
                    .update
                    .iter()
                    .map(|e| Operation::Replace(e, owned_by(e))),
            )
            .chain(changes.create.iter().map(Operation::Create))
            .chain(changes.shared.iter().map(Operation::Shared));
        for operation in ordered {
            let name = operation.dns_name();
            let zone = zone_of(name, &self.config.zones)
                .ok_or_else(|| Error::OutsideZones(name.to_owned()))?;
            per_zone.entry(zone).or_default().push(operation);
        }
        if per_zone.is_empty() {
            return Ok(());
        }
        let mut stream = self.connect().await?;
        let total = changes.len();
        let mut rejected: Vec<Error> = Vec::new();
        for (zone, operations) in per_zone {
            let zone_name = wire_name(zone).map_err(|e| Error::Encode(e.to_string()))?;
            let label = format!("update of zone {zone}");
            // One bad change cannot hold back the others: see HalvingBatches.
            let mut batches = HalvingBatches::packed(
                &operations,
                self.config.batch_size,
                MESSAGE_BUDGET,
                Operation::size_bound,
            );
            let rejected_before = rejected.len();
            let mut accepted = 0u32;
            while let Some(batch) = batches.next() {
                match self
                    .send_update(&mut stream, &zone_name, batch, &label)
                    .await
                {
                    Ok(()) => accepted = accepted.wrapping_add(1),
                    Err(err) if is_content_error(&err) => {
                        if !batches.split_rejected(batch) {
                            rejected.push(err);
                        }
                    }
                    Err(err) => return Err(err),
                }
            }
            if rejected.len() > rejected_before {
                self.forget(Some(zone));
            } else {
                self.advance_cache(&mut stream, zone, accepted, &operations)
                    .await?;
            }
        }
        match rejected.len() {
            0 => Ok(()),
            failed => Err(Error::Partial {
                failed,
                total,
                first: Box::new(rejected.swap_remove(0)),
            }),
        }
    }

    /// Carry our own changes into the cached listing when the serial proves nobody else wrote.
    async fn advance_cache(
        &self,
        stream: &mut TcpStream,
        zone: &str,
        accepted: u32,
        operations: &[Operation<'_>],
    ) -> Result<(), Error> {
        let cached_serial = match self.cache.lock() {
            Ok(cache) => cache.get(zone).map(|c| c.serial),
            Err(_) => None,
        };
        let Some(before) = cached_serial else {
            return Ok(());
        };
        let after = self.soa_serial(stream, zone).await?;
        // Else someone else wrote too: the entry stays the zone at `before`, and the next
        // listing reads what changed since by IXFR.
        if let Ok(mut cache) = self.cache.lock()
            && let Some(cached) = cache.get_mut(zone)
            && cached.serial == before
            && after == before.wrapping_add(accepted)
        {
            cached.apply(operations);
            cached.serial = after;
        }
        Ok(())
    }

    async fn send_update(
        &self,
        stream: &mut TcpStream,
        zone_name: &Name,
        batch: &[Operation<'_>],
        label: &str,
    ) -> Result<(), Error> {
        let mut message = self.update_message(zone_name, batch)?;
        let request_id = message.metadata.id;
        let (bytes, mut verifier) = self.seal(&mut message)?;
        self.stats.update_messages.fetch_add(1, Ordering::Relaxed);
        self.send(stream, &bytes, label).await?;
        let answer = self.receive(stream, label).await?;
        self.check_answer(&answer, request_id, verifier.as_mut(), label)?;
        Ok(())
    }
}

/// Errors about the changes themselves (worth isolating), as opposed to transport or
/// authentication failures (which stop the whole apply).
/// Decodes one answer of `server` to the request `request_id`: an error rcode or a TSIG failure
/// becomes a clear error, and with a `verifier` (the request was signed) the answer's own
/// signature must check out. Every exchange of [`Rfc2136Provider`] goes through here; the
/// fuzz targets (docs/fuzzing.md) call it directly.
pub fn read_answer(
    server: &ServerAddress,
    bytes: &[u8],
    request_id: u16,
    verifier: Option<&mut TSigVerifier>,
    operation: &str,
) -> Result<Message, Error> {
    let bad = |detail: String| Error::BadResponse {
        server: server.clone(),
        operation: operation.to_string(),
        detail,
    };
    let message = Message::from_vec(bytes).map_err(|e| bad(e.to_string()))?;
    if message.metadata.id != request_id {
        return Err(bad(format!(
            "answer id {} does not match request id {request_id}",
            message.metadata.id
        )));
    }
    let tsig_error = message
        .signature
        .as_ref()
        .and_then(|sig| sig.data.error)
        .map(|error| format!("{error:?}").to_ascii_uppercase());
    let rcode = message.metadata.response_code;
    if rcode != ResponseCode::NoError || tsig_error.is_some() {
        let content = tsig_error.is_none()
            && matches!(
                rcode,
                ResponseCode::YXRRSet
                    | ResponseCode::NXRRSet
                    | ResponseCode::YXDomain
                    | ResponseCode::NXDomain
                    | ResponseCode::NotZone
                    | ResponseCode::FormErr
            );
        let detail = match tsig_error {
            Some(tsig) => format!("TSIG {tsig}/{}", rcode_name(rcode)),
            None => rcode_name(rcode),
        };
        return Err(Error::Refused {
            server: server.clone(),
            operation: operation.to_string(),
            detail,
            content,
        });
    }
    if let Some(verifier) = verifier {
        if message.signature.is_none() {
            return Err(bad("answer is not TSIG-signed".into()));
        }
        verifier
            .verify(bytes)
            .map_err(|e| bad(format!("TSIG verification failed: {e}")))?;
    }
    Ok(message)
}

/// The serial of the first SOA record in an answer (to a SOA query, or opening a transfer).
pub fn soa_serial_of(message: &Message) -> Option<u32> {
    message
        .answers
        .iter()
        .find_map(|record| match &record.data {
            RData::SOA(soa) => Some(soa.serial),
            _ => None,
        })
}

/// The records of a zone transfer (AXFR) as its answer messages arrive: the transfer opens
/// with the zone's SOA and ends at the next SOA; the records between are the zone.
#[derive(Debug, Default)]
pub struct ZoneTransfer {
    records: Vec<Record>,
    serial: Option<u32>,
}

impl ZoneTransfer {
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes one decoded answer message; returns the zone's serial once the closing SOA came.
    pub fn absorb(&mut self, message: Message) -> Option<u32> {
        for record in message.answers {
            if let RData::SOA(soa) = &record.data {
                match self.serial {
                    None => self.serial = Some(soa.serial),
                    Some(serial) => return Some(serial),
                }
                continue;
            }
            self.records.push(record);
        }
        None
    }

    /// The zone's RRsets (the types gateway-dns handles), from the records seen so far.
    pub fn endpoints(&self) -> Vec<Endpoint> {
        group_records(&self.records)
    }
}

/// Where an incremental transfer stands after a message.
pub enum TransferStep {
    /// More messages to read.
    More,
    /// The server sends the zone whole (no journal back to our serial): read it with AXFR.
    Whole,
    /// Every difference read, up to this serial.
    Done(u32),
}

/// The differences an incremental transfer (RFC 1995 4) brings: the new SOA, then for each
/// version the old SOA and the records it deletes, the next SOA and the records it adds, and
/// the new SOA again.
pub struct IncrementalTransfer {
    since: u32,
    new: Option<u32>,
    /// Per version: the records deleted, the records added.
    versions: Vec<(Vec<Record>, Vec<Record>)>,
    /// Inside a version, reading the records it adds (else those it deletes).
    adding: bool,
}

impl IncrementalTransfer {
    /// A transfer asked for from serial `since`.
    pub fn new(since: u32) -> Self {
        IncrementalTransfer {
            since,
            new: None,
            versions: Vec::new(),
            adding: false,
        }
    }

    /// Reads one message of the answer.
    pub fn absorb(&mut self, message: Message) -> TransferStep {
        for record in message.answers {
            let soa = match &record.data {
                RData::SOA(soa) => Some(soa.serial),
                _ => None,
            };
            let Some(new) = self.new else {
                match soa {
                    // The server is at our serial: nothing to read.
                    Some(serial) if serial == self.since => return TransferStep::Done(serial),
                    Some(serial) => self.new = Some(serial),
                    None => return TransferStep::Whole,
                }
                continue;
            };
            match (soa, self.versions.last_mut()) {
                // After the first SOA, a record that is no SOA: the zone whole (AXFR-style).
                (None, None) => return TransferStep::Whole,
                (Some(serial), None) if serial == new => return TransferStep::Done(new),
                (Some(_), None) => {
                    self.versions.push((Vec::new(), Vec::new()));
                    self.adding = false;
                }
                (Some(serial), Some(_)) if self.adding && serial == new => {
                    return TransferStep::Done(new);
                }
                (Some(_), Some(_)) if self.adding => {
                    self.versions.push((Vec::new(), Vec::new()));
                    self.adding = false;
                }
                (Some(_), Some(_)) => self.adding = true,
                (None, Some((_, added))) if self.adding => added.push(record),
                (None, Some((deleted, _))) => deleted.push(record),
            }
        }
        TransferStep::More
    }

    /// Per version, oldest first: the records it deletes and the records it adds.
    pub fn versions(&self) -> &[(Vec<Record>, Vec<Record>)] {
        &self.versions
    }

    /// The differences applied to the cached zone, version by version, deletions first.
    fn apply(self, cache: &mut ZoneCache) {
        for (deleted, added) in self.versions {
            for removed in group_records(&deleted) {
                let key = (removed.dns_name.clone(), removed.record_type);
                if let Some(cached) = cache.records.get_mut(&key) {
                    cached.targets = cached
                        .targets
                        .iter()
                        .filter(|t| !removed.targets.contains(t))
                        .cloned()
                        .collect();
                    if cached.targets.is_empty() {
                        cache.records.remove(&key);
                    }
                }
            }
            for added in group_records(&added) {
                let key = (added.dns_name.clone(), added.record_type);
                match cache.records.get_mut(&key) {
                    Some(cached) => {
                        for target in added.targets {
                            cached.targets.insert(target);
                        }
                        cached.ttl = added.ttl;
                    }
                    None => {
                        cache.records.insert(key, added);
                    }
                }
            }
        }
    }
}

fn is_content_error(err: &Error) -> bool {
    matches!(
        err,
        Error::Refused { content: true, .. } | Error::Encode(_) | Error::InvalidTarget(_)
    )
}

impl Provider for Rfc2136Provider {
    fn name(&self) -> &'static str {
        "rfc2136"
    }

    fn records(&self) -> BoxFuture<'_, Result<Vec<Endpoint>, crate::dns::Error>> {
        Box::pin(async move { Ok(self.list().await?) })
    }

    fn apply<'a>(&'a self, changes: &'a Changes) -> BoxFuture<'a, Result<(), crate::dns::Error>> {
        Box::pin(async move {
            let result = self.apply_changes(changes).await;
            if result.is_err() {
                // Unknown how much landed: the next listing transfers the zones again.
                self.forget(None);
            }
            Ok(result?)
        })
    }

    fn zones(&self) -> &[String] {
        &self.config.zones
    }

    fn invalidate_cache(&self) {
        self.forget(None);
    }

    fn edits_records(&self) -> bool {
        true
    }
}

fn rcode_name(rcode: ResponseCode) -> String {
    match rcode {
        ResponseCode::NoError => "NOERROR".into(),
        ResponseCode::FormErr => "FORMERR".into(),
        ResponseCode::ServFail => "SERVFAIL".into(),
        ResponseCode::NXDomain => "NXDOMAIN".into(),
        ResponseCode::NotImp => "NOTIMP".into(),
        ResponseCode::Refused => "REFUSED".into(),
        ResponseCode::YXDomain => "YXDOMAIN".into(),
        ResponseCode::YXRRSet => "YXRRSET (a record to create already exists)".into(),
        ResponseCode::NXRRSet => "NXRRSET".into(),
        ResponseCode::NotAuth => "NOTAUTH".into(),
        ResponseCode::NotZone => "NOTZONE".into(),
        other => format!("{other:?}").to_ascii_uppercase(),
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::RecordType;

    /// A provider for example.com, unsigned, that is never connected to.
    fn example_provider() -> Rfc2136Provider {
        Rfc2136Provider::new(Rfc2136Config::new(
            "127.0.0.1:53".parse::<SocketAddr>().unwrap(),
            vec!["example.com".into()],
            None,
        ))
        .unwrap()
    }

    #[test]
    fn batches_are_packed_by_bytes_and_each_message_fits() {
        let provider = example_provider();
        let zone = wire_name("example.com").unwrap();
        // Long names and ownership values, and short ones: the count stops the short.
        let endpoints: Vec<Endpoint> = (0..4000)
            .map(|i| {
                let (label, value) = match i < 3000 {
                    true => (format!("{i}-{}", "x".repeat(55)), "v".repeat(300)),
                    false => (format!("s{i}"), "v".to_string()),
                };
                match i % 2 {
                    0 => Endpoint::new(
                        &format!("{label}.example.com"),
                        RecordType::A,
                        ["192.0.2.1"],
                    ),
                    _ => Endpoint::new(&format!("a-{label}.example.com"), RecordType::TXT, [value]),
                }
            })
            .collect();
        let operations: Vec<Operation<'_>> = endpoints.iter().map(Operation::Create).collect();
        let batches: Vec<&[Operation<'_>]> =
            HalvingBatches::packed(&operations, 500, MESSAGE_BUDGET, Operation::size_bound)
                .collect();
        let mut sizes = Vec::new();
        for batch in &batches {
            let bound: usize = batch.iter().map(Operation::size_bound).sum();
            let bytes = provider
                .update_message(&zone, batch)
                .unwrap()
                .to_vec()
                .unwrap();
            assert!(
                bytes.len() <= bound,
                "{} bytes over the bound {bound}",
                bytes.len()
            );
            sizes.push((batch.len(), bytes.len()));
        }
        assert_eq!(batches.iter().map(|b| b.len()).sum::<usize>(), 4000);
        assert!(
            sizes.iter().all(|&(_, bytes)| bytes < 65_535 - 1_000),
            "room for a TSIG record: {sizes:?}"
        );
        assert!(
            sizes.iter().any(|&(count, _)| count == 500),
            "the short ones by count: {sizes:?}"
        );
        assert!(
            sizes[0].1 > 30_000,
            "the long ones fill a message by half at least: {sizes:?}"
        );
    }

    #[test]
    fn update_message_layout() {
        let provider = example_provider();
        let create = Endpoint::new("a.example.com", RecordType::A, ["192.0.2.1", "192.0.2.2"]);
        let delete = Endpoint::new("b.example.com", RecordType::TXT, ["x"]);
        let zone = wire_name("example.com").unwrap();
        let message = provider
            .update_message(
                &zone,
                &[Operation::Delete(&delete, None), Operation::Create(&create)],
            )
            .unwrap();
        assert_eq!(message.metadata.op_code, OpCode::Update);
        assert_eq!(message.prerequisites().len(), 1);
        assert_eq!(message.prerequisites()[0].dns_class, DNSClass::NONE);
        // One "delete RRset" then the two added records.
        assert_eq!(message.updates().len(), 3);
        assert_eq!(message.updates()[0].dns_class, DNSClass::ANY);
        assert_eq!(message.updates()[1].ttl, crate::dns::DEFAULT_TTL);
    }

    #[test]
    fn server_addresses_take_host_names() {
        let parse = |text: &str| text.parse::<ServerAddress>();
        assert_eq!(
            parse("192.0.2.53:53"),
            Ok(ServerAddress::new("192.0.2.53", 53))
        );
        assert_eq!(
            parse("bind.dns.svc:5353"),
            Ok(ServerAddress::new("bind.dns.svc", 5353))
        );
        assert_eq!(
            parse("bind.dns.svc"),
            Ok(ServerAddress::new("bind.dns.svc", 53))
        );
        assert_eq!(
            parse("[2001:db8::53]:53"),
            Ok(ServerAddress::new("2001:db8::53", 53))
        );
        assert_eq!(
            parse("[2001:db8::53]:53").unwrap().to_string(),
            "[2001:db8::53]:53"
        );
        for bad in [
            "",
            ":53",
            "bind:port",
            "2001:db8::53",
            "a b:53",
            "http://bind:53",
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }
}
