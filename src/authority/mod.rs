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
//! DNSSEC (opt-in, [`dnssec`] says how and why): with keys, each zone is signed when it
//! is built, per serial, and re-signed at each signing period; queries with the DO bit get the
//! RRSIGs and the NSEC proofs, and transfers carry the signed zone.

mod answer;
mod auth;
pub mod dnssec;
mod error;
mod listen;
mod secondaries;
#[cfg(test)]
mod tests;
mod transfer;
mod zone;

pub use dnssec::ZoneKey;
pub use error::Error;

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tracing::debug;

use crate::dns::wire::wire_records;
use crate::dns::{Changes, Endpoint, Provider, in_zone, zone_of};
use crate::model::dns_name::canonical;
use crate::net::{CapObserver, ConnectionLimits};
use crate::tsig::TsigKey;

use self::answer::answer_bytes;
use self::dnssec::signing_period;
use self::listen::{AnswerRateLimiter, bind_pair, serve_tcp, serve_udp, udp_receivers};
use self::secondaries::{SecondaryWatch, watch_secondaries};
use self::transfer::{Transfers, notify_secondaries};

pub use self::secondaries::{
    DEFAULT_SECONDARY_CHECK_INTERVAL, SecondaryStatus, address_records, serials_behind,
};
use self::zone::{Delta, RrSet, Store, Touched, Zone, initial_serial, next_serial, unix_now};

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
    /// Told of each TCP connection closed or refused at a cap (for the metrics).
    pub tcp_caps: Option<CapObserver>,
    /// UDP answers per second to one source address (a token bucket holding as many), so that
    /// spoofed queries cannot turn the server into an amplifier; 0 turns the limit off.
    pub udp_answers_per_source_per_second: u32,
    /// Secondaries (`--embedded-secondary`): sent NOTIFY on each change, allowed to transfer.
    pub secondaries: Vec<SocketAddr>,
    /// The TSIG key transfers and NOTIFYs are signed with; needed when there are secondaries.
    pub transfer_key: Option<TsigKey>,
    /// DNSSEC keys (`--embedded-dnssec-key`); none: the zones are served unsigned.
    pub dnssec_keys: Vec<Arc<ZoneKey>>,
    /// How often each secondary is asked for its serials when nothing changes
    /// (`--embedded-secondary-check-interval`).
    pub secondary_check_interval: Duration,
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
            tcp_caps: None,
            udp_answers_per_source_per_second: DEFAULT_UDP_ANSWERS_PER_SOURCE_PER_SECOND,
            secondaries: Vec::new(),
            transfer_key: None,
            dnssec_keys: Vec::new(),
            secondary_check_interval: DEFAULT_SECONDARY_CHECK_INTERVAL,
        }
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
    /// How far each secondary is behind; empty without secondaries.
    secondaries: Arc<Mutex<Vec<SecondaryStatus>>>,
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
            config.tcp_caps.clone(),
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
        let watch = SecondaryWatch::new(&transfers.secondaries);
        let notify = if transfers.secondaries.is_empty() {
            None
        } else {
            let (sender, receiver) = mpsc::channel(NOTIFY_QUEUE);
            tasks.push(tokio::spawn(notify_secondaries(
                receiver,
                transfers.clone(),
                soa_ttl,
                watch.changed.clone(),
            )));
            tasks.push(tokio::spawn(watch_secondaries(
                store.clone(),
                watch.statuses.clone(),
                watch.changed.clone(),
                config.secondary_check_interval,
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
            secondaries: watch.statuses,
        })
    }

    /// How far each secondary (`--embedded-secondary`) is behind, as last asked.
    pub fn secondaries(&self) -> Vec<SecondaryStatus> {
        self.secondaries
            .lock()
            .map(|s| s.clone())
            .unwrap_or_else(|p| p.into_inner().clone())
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
        let mut by_zone: BTreeMap<usize, Vec<_>> = BTreeMap::new();
        let deletes = changes.delete.iter().map(|endpoint| (endpoint, None));
        let writes = (changes.update.iter().chain(&changes.create)).map(|e| (e, Some(e)));
        for (endpoint, wanted) in deletes.chain(writes) {
            if let Some(i) = zone_index(&store, &endpoint.dns_name) {
                by_zone.entry(i).or_default().push((endpoint.key(), wanted));
            }
        }
        let touched = by_zone
            .into_iter()
            .map(|(i, changes)| (i, changes.into_iter().collect::<Touched<'_>>()));
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
        let boundary = (signing_period(now) + 1) * dnssec::RESIGN_PERIOD;
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

    fn records(&self) -> BoxFuture<'_, Result<Vec<Endpoint>, crate::dns::Error>> {
        Box::pin(async move { Ok(self.all_records()?) })
    }

    fn apply<'a>(&'a self, changes: &'a Changes) -> BoxFuture<'a, Result<(), crate::dns::Error>> {
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
