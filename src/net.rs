//! Connection limits shared by every TCP listener (the webhook, the metrics listener and the
//! embedded DNS server over TCP): a cap on open connections overall and per source address, a
//! first-request timeout and an idle timeout.
//!
//! A full table never stops the accept loop: a newcomer is admitted by closing the connection
//! that has been idle longest (overall, or from the newcomer's own address when that address is
//! at its cap). Only when every connection is busy is the newcomer refused. A client that opens
//! connections and sends nothing therefore only ever pushes out its own idle connections and
//! other idle ones, never a request in progress, and never blocks the accept loop.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
// Tokio's clock, so that tests with a paused clock see idleness grow.
use tokio::time::Instant;

/// Limits of one listener. See `docs/flags.md` for the flags that set them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Open connections at once; beyond this the longest-idle one is closed.
    pub max_connections: usize,
    /// Open connections from one source address; beyond this its longest-idle one is closed.
    pub max_per_source: usize,
    /// A connection that has not started its first request this long after accept is closed
    /// (covers the TLS handshake and the silence after it).
    pub first_request_timeout: Duration,
    /// A connection with no request in progress for this long is closed.
    pub idle_timeout: Duration,
}

impl ConnectionLimits {
    /// The webhook and metrics listeners' defaults: kube-apiserver keeps a few connections per
    /// replica and reuses them within seconds, so a minute of idleness is plenty.
    pub const HTTP_DEFAULT: ConnectionLimits = ConnectionLimits {
        max_connections: 4096,
        max_per_source: 1024,
        first_request_timeout: Duration::from_secs(10),
        idle_timeout: Duration::from_secs(60),
    };

    /// DNS over TCP: RFC 7766 (section 6.2.3) suggests an idle timeout of seconds.
    pub const DNS_TCP_DEFAULT: ConnectionLimits = ConnectionLimits {
        max_connections: 256,
        max_per_source: 64,
        first_request_timeout: Duration::from_secs(10),
        idle_timeout: Duration::from_secs(10),
    };
}

/// Which cap made a table close or turn away a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cap {
    /// The listener's cap on open connections.
    Connections,
    /// The cap on open connections from one source address.
    PerSource,
}

impl Cap {
    pub const ALL: [Cap; 2] = [Cap::Connections, Cap::PerSource];

    pub fn as_str(self) -> &'static str {
        match self {
            Cap::Connections => "connections",
            Cap::PerSource => "per_source",
        }
    }
}

/// What a table did at a cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CapEvent {
    /// The longest-idle connection was closed to make room.
    Evicted(Cap),
    /// Every connection was busy: the newcomer was turned away.
    Refused(Cap),
}

/// Told of every [`CapEvent`] of a table. `net` knows no metrics; whoever runs the listener
/// counts them.
#[derive(Clone)]
pub struct CapObserver(Arc<dyn Fn(CapEvent) + Send + Sync>);

impl CapObserver {
    pub fn new(observe: impl Fn(CapEvent) + Send + Sync + 'static) -> CapObserver {
        CapObserver(Arc::new(observe))
    }

    fn tell(&self, event: CapEvent) {
        (self.0)(event);
    }
}

impl std::fmt::Debug for CapObserver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CapObserver")
    }
}

/// Two observers are the same when they are one closure.
impl PartialEq for CapObserver {
    fn eq(&self, other: &CapObserver) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for CapObserver {}

/// The open connections of one listener.
#[derive(Debug)]
pub struct ConnectionTable {
    limits: ConnectionLimits,
    started: Instant,
    inner: Mutex<TableInner>,
    observer: Option<CapObserver>,
}

#[derive(Debug, Default)]
struct TableInner {
    next_id: u64,
    /// By id, which is the order of accept.
    open: BTreeMap<u64, Arc<Connection>>,
    per_source: HashMap<IpAddr, usize>,
}

/// Why a connection was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("every connection is busy ({0} open)")]
    Full(usize),
    #[error("every connection from this address is busy ({0} open)")]
    SourceFull(usize),
}

/// One open connection's bookkeeping.
#[derive(Debug)]
pub struct Connection {
    id: u64,
    source: IpAddr,
    /// Milliseconds since the table started, at the last request's start or end.
    last_active_ms: AtomicU64,
    in_flight: AtomicUsize,
    served_any: AtomicBool,
    evicted: AtomicBool,
    close: Notify,
}

impl Connection {
    fn is_idle(&self) -> bool {
        self.in_flight.load(Ordering::Acquire) == 0
    }
}

/// Keeps a connection in its table; dropping it (when the connection's task ends) frees the slot.
#[derive(Debug)]
pub struct ConnectionGuard {
    table: Arc<ConnectionTable>,
    connection: Arc<Connection>,
}

/// Marks a request in progress on a connection until dropped.
#[derive(Debug)]
pub struct RequestGuard {
    table: Arc<ConnectionTable>,
    connection: Arc<Connection>,
}

impl ConnectionTable {
    pub fn new(limits: ConnectionLimits) -> Arc<ConnectionTable> {
        ConnectionTable::observed(limits, None)
    }

    /// A table that tells `observer` of every connection it closes or refuses at a cap.
    pub fn observed(
        limits: ConnectionLimits,
        observer: Option<CapObserver>,
    ) -> Arc<ConnectionTable> {
        Arc::new(ConnectionTable {
            limits: ConnectionLimits {
                max_connections: limits.max_connections.max(1),
                max_per_source: limits.max_per_source.max(1),
                ..limits
            },
            started: Instant::now(),
            inner: Mutex::new(TableInner::default()),
            observer,
        })
    }

    fn tell(&self, event: CapEvent) {
        if let Some(observer) = &self.observer {
            observer.tell(event);
        }
    }

    pub fn limits(&self) -> &ConnectionLimits {
        &self.limits
    }

    /// Open connections.
    pub fn len(&self) -> usize {
        self.lock().open.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> MutexGuard<'_, TableInner> {
        // The table stays consistent across a panic elsewhere: every update is one step.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Admits a connection from `source`, closing the longest-idle connection first when a cap
    /// is reached (from the same source when that source is at its cap).
    pub fn admit(self: &Arc<Self>, source: IpAddr) -> Result<ConnectionGuard, Refused> {
        let mut inner = self.lock();
        let from_source = inner.per_source.get(&source).copied().unwrap_or(0);
        if from_source >= self.limits.max_per_source {
            let victim = longest_idle(inner.open.values().filter(|c| c.source == source));
            match victim {
                Some(id) => {
                    evict(&mut inner, id);
                    self.tell(CapEvent::Evicted(Cap::PerSource));
                }
                None => {
                    self.tell(CapEvent::Refused(Cap::PerSource));
                    return Err(Refused::SourceFull(from_source));
                }
            }
        }
        if inner.open.len() >= self.limits.max_connections {
            match longest_idle(inner.open.values()) {
                Some(id) => {
                    evict(&mut inner, id);
                    self.tell(CapEvent::Evicted(Cap::Connections));
                }
                None => {
                    self.tell(CapEvent::Refused(Cap::Connections));
                    return Err(Refused::Full(inner.open.len()));
                }
            }
        }
        let id = inner.next_id;
        inner.next_id += 1;
        let connection = Arc::new(Connection {
            id,
            source,
            last_active_ms: AtomicU64::new(self.now_ms()),
            in_flight: AtomicUsize::new(0),
            served_any: AtomicBool::new(false),
            evicted: AtomicBool::new(false),
            close: Notify::new(),
        });
        inner.open.insert(id, connection.clone());
        *inner.per_source.entry(source).or_insert(0) += 1;
        Ok(ConnectionGuard {
            table: self.clone(),
            connection,
        })
    }

    fn remove(&self, id: u64) {
        let mut inner = self.lock();
        if let Some(connection) = inner.open.remove(&id) {
            forget_source(&mut inner, connection.source);
        }
    }
}

/// The idle connection that was active least recently.
fn longest_idle<'c>(connections: impl Iterator<Item = &'c Arc<Connection>>) -> Option<u64> {
    connections
        .filter(|c| c.is_idle())
        .min_by_key(|c| (c.last_active_ms.load(Ordering::Relaxed), c.id))
        .map(|c| c.id)
}

/// Takes a connection out of the table at once (so the slot is free now) and tells its task
/// to close it.
fn evict(inner: &mut TableInner, id: u64) {
    if let Some(connection) = inner.open.remove(&id) {
        forget_source(inner, connection.source);
        connection.evicted.store(true, Ordering::Release);
        // notify_one keeps a permit when the task is not waiting yet.
        connection.close.notify_one();
    }
}

fn forget_source(inner: &mut TableInner, source: IpAddr) {
    if let Some(count) = inner.per_source.get_mut(&source) {
        *count -= 1;
        if *count == 0 {
            inner.per_source.remove(&source);
        }
    }
}

impl ConnectionGuard {
    /// Marks a request in progress until the returned guard drops.
    pub fn begin_request(&self) -> RequestGuard {
        let connection = &self.connection;
        connection.served_any.store(true, Ordering::Release);
        connection.in_flight.fetch_add(1, Ordering::AcqRel);
        connection
            .last_active_ms
            .store(self.table.now_ms(), Ordering::Release);
        RequestGuard {
            table: self.table.clone(),
            connection: connection.clone(),
        }
    }

    /// Completes when the connection should be closed: it was evicted, or it has had no
    /// request in progress for the idle timeout (the first-request timeout before its first
    /// request).
    pub async fn expired(&self) {
        let connection = &self.connection;
        let limits = &self.table.limits;
        loop {
            if connection.evicted.load(Ordering::Acquire) {
                return;
            }
            let timeout = if connection.served_any.load(Ordering::Acquire) {
                limits.idle_timeout
            } else {
                limits.first_request_timeout
            };
            let wait = if connection.is_idle() {
                let idle_ms = self
                    .table
                    .now_ms()
                    .saturating_sub(connection.last_active_ms.load(Ordering::Acquire));
                let idle = Duration::from_millis(idle_ms);
                if idle >= timeout {
                    return;
                }
                timeout - idle
            } else {
                // Busy: look again after a full timeout (a request ends by touching the clock).
                timeout
            };
            tokio::select! {
                () = connection.close.notified() => return,
                () = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// Was this connection closed to make room for another?
    pub fn was_evicted(&self) -> bool {
        self.connection.evicted.load(Ordering::Acquire)
    }
}

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        self.table.remove(self.connection.id);
    }
}

impl Drop for RequestGuard {
    fn drop(&mut self) {
        self.connection
            .last_active_ms
            .store(self.table.now_ms(), Ordering::Release);
        self.connection.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max_connections: usize, max_per_source: usize) -> ConnectionLimits {
        ConnectionLimits {
            max_connections,
            max_per_source,
            first_request_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
        }
    }

    const A: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 1));
    const B: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 2));

    #[test]
    fn a_full_table_closes_the_longest_idle_connection_not_a_busy_one() {
        let table = ConnectionTable::new(limits(2, 2));
        let busy = table.admit(A).unwrap();
        let _request = busy.begin_request();
        let idle = table.admit(B).unwrap();
        let newcomer = table.admit(B).unwrap();
        assert!(idle.was_evicted());
        assert!(!busy.was_evicted());
        assert_eq!(table.len(), 2);
        // Every connection busy: the next one is refused.
        let _second_request = newcomer.begin_request();
        assert_eq!(table.admit(A).unwrap_err(), Refused::Full(2));
    }

    #[test]
    fn a_source_at_its_cap_pushes_out_its_own_idle_connections_only() {
        let table = ConnectionTable::new(limits(10, 2));
        let other = table.admit(B).unwrap();
        let first = table.admit(A).unwrap();
        let _second = table.admit(A).unwrap();
        let _third = table.admit(A).unwrap();
        assert!(first.was_evicted());
        assert!(!other.was_evicted());
        assert_eq!(table.len(), 3);
        drop(first);
        assert_eq!(
            table.len(),
            3,
            "an evicted connection left the table already"
        );
    }

    #[test]
    fn the_observer_hears_each_eviction_and_refusal_with_its_cap() {
        let heard = Arc::new(Mutex::new(Vec::new()));
        let log = heard.clone();
        let observer = CapObserver::new(move |event| log.lock().unwrap().push(event));
        let table = ConnectionTable::observed(limits(3, 2), Some(observer));
        let a1 = table.admit(A).unwrap();
        let a2 = table.admit(A).unwrap();
        let a3 = table.admit(A).unwrap(); // A at its cap: its idlest, a1, makes room
        assert!(a1.was_evicted());
        let b1 = table.admit(B).unwrap();
        let b2 = table.admit(B).unwrap(); // the table at its cap: the idlest, a2, makes room
        assert!(a2.was_evicted());
        let _requests = [a3.begin_request(), b1.begin_request(), b2.begin_request()];
        assert_eq!(table.admit(B).unwrap_err(), Refused::SourceFull(2));
        assert_eq!(table.admit(A).unwrap_err(), Refused::Full(3));
        assert_eq!(
            *heard.lock().unwrap(),
            [
                CapEvent::Evicted(Cap::PerSource),
                CapEvent::Evicted(Cap::Connections),
                CapEvent::Refused(Cap::PerSource),
                CapEvent::Refused(Cap::Connections),
            ]
        );
    }

    #[tokio::test]
    async fn silence_expires_at_the_first_request_timeout_then_idleness_at_the_idle_timeout() {
        let table = ConnectionTable::new(ConnectionLimits {
            first_request_timeout: Duration::from_millis(50),
            idle_timeout: Duration::from_secs(2),
            ..limits(10, 10)
        });
        let connection = table.admit(A).unwrap();
        let started = Instant::now();
        connection.expired().await;
        let silent_for = started.elapsed();
        assert!(silent_for >= Duration::from_millis(50), "{silent_for:?}");
        assert!(silent_for < Duration::from_secs(2), "{silent_for:?}");

        drop(connection.begin_request());
        let started = Instant::now();
        connection.expired().await;
        assert!(started.elapsed() >= Duration::from_secs(2));
    }

    #[tokio::test]
    async fn an_evicted_connection_expires_at_once() {
        let table = ConnectionTable::new(limits(1, 1));
        let first = table.admit(A).unwrap();
        let _second = table.admit(A).unwrap();
        // Would otherwise wait the ten-second first-request timeout.
        tokio::time::timeout(Duration::from_secs(1), first.expired())
            .await
            .expect("expired at once");
    }
}
