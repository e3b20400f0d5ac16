//! Two replicas against one real BIND and a real API server's Lease. Each replica is wired as
//! `serve` wires itself on the cluster source: its own kube client (serve's least-privilege
//! ServiceAccount, through a proxy of its own), kube source, index, engine-backed desired set,
//! RFC 2136 provider (so each one's UPDATE messages can be counted) and leader election gating
//! its sync loop.
//!
//! Only the Lease holder writes. A partitioned leader (its proxy cut: Lease renewals and watches
//! fail) steps down before the other takes over; a crashed leader is replaced within the lease
//! duration.
//! Routes created before and after each hand-over answer from BIND. A sampler watches both
//! leader flags throughout, and BIND's SOA serial (one step per accepted UPDATE) shows that
//! every UPDATE sent came from one writer at a time.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gateway_dns::dns::provider::rfc2136::Rfc2136Provider;
use gateway_dns::index::Index;
use gateway_dns::leader::{LeaderConfig, LeaderElection};
use gateway_dns::metrics::Metrics;
use gateway_dns::source::kube::{Config as SourceConfig, KubeSource, client};
use gateway_dns::sync::desired::EngineDesired;
use gateway_dns::sync::{DesiredSource, SyncConfig, Syncer};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use serde_json::{Value, json};
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

use crate::api::ClusterApi;
use crate::support::bind::Bind;
use crate::support::cluster::ControlPlane;
use crate::support::dig;
use crate::support::objects;
use crate::support::proxy::Proxy;

const ZONE: &str = "example.com";
const GATEWAY_ADDRESS: &str = "203.0.113.10";
const OWNER: &str = "gateway-dns";
/// The Lease serve's Role allows (manifests/base/role.yaml).
const LEASE_NAMESPACE: &str = "gateway-dns";
const LEASE_NAME: &str = "gateway-dns";

const LEASE: Duration = Duration::from_secs(3);
const RENEW_DEADLINE: Duration = Duration::from_secs(2);
const RETRY: Duration = Duration::from_millis(500);
/// A candidate retries every RETRY × (1..1.2): it notices a renewal at most that late and
/// retries at most that late after the lease ran out.
const TAKEOVER_LIMIT: Duration = Duration::from_millis(3000 + 3 * 500);

/// Upper bound for the sampler, well past the test's own length.
const SAMPLER_LIMIT: Duration = Duration::from_secs(180);

fn gateway() -> Value {
    objects::http_gateway("infra", "public", "*.example.com")
}

fn route(name: &str, hostname: &str) -> Value {
    let parents = json!([objects::parent("infra", "public")]);
    objects::http_route("shop", name, parents, &[hostname])
}

/// One replica: kube source → index → engine → sync loop → its own RFC 2136 provider, writes
/// gated by its own leader election. Dropping it is a crash (nothing released).
struct Replica {
    name: &'static str,
    index: Index,
    provider: Arc<Rfc2136Provider>,
    metrics: Arc<Metrics>,
    leader: watch::Receiver<bool>,
    /// Cleared when the replica crashes: a dead process is no leader, whatever its last flag.
    alive: Arc<AtomicBool>,
    election: Option<LeaderElection>,
    source: Option<Arc<KubeSource>>,
    tasks: Vec<JoinHandle<()>>,
    /// This replica's link to the API server.
    link: Proxy,
}

impl Replica {
    async fn start(cluster: &ControlPlane, bind: &Bind, name: &'static str) -> Replica {
        // One client per replica, through its own proxy so that it can be partitioned alone.
        let link = Proxy::start(([127, 0, 0, 1], cluster.api_port()).into()).await;
        let kubeconfig = tokio::task::block_in_place(|| {
            cluster.service_account_kubeconfig(LEASE_NAMESPACE, "gateway-dns", Some(link.port()))
        });
        let client = client(Some(&kubeconfig)).await.unwrap();
        let index = Index::new();
        let source = Arc::new(KubeSource::spawn(
            client.clone(),
            index.clone(),
            SourceConfig {
                discovery_interval: Duration::from_secs(1),
                backoff_min: Duration::from_millis(100),
                backoff_max: Duration::from_secs(1),
                recheck_after: Duration::from_secs(2),
                ..SourceConfig::default()
            },
        ));
        let election = LeaderElection::spawn(
            client,
            LeaderConfig {
                lease_duration: LEASE,
                renew_deadline: RENEW_DEADLINE,
                retry_period: RETRY,
                ..LeaderConfig::new(LEASE_NAMESPACE, LEASE_NAME, name)
            },
        )
        .unwrap();
        let leader = election.is_leader();
        let provider = Arc::new(Rfc2136Provider::new(bind.provider_config()).unwrap());
        let mut config = SyncConfig::new(OWNER, vec![ZONE.into()]);
        // Frequent periodic passes: a follower gets many chances to write when it must not.
        config.interval = Duration::from_secs(1);
        config.backoff_min = Duration::from_millis(100);
        config.backoff_max = Duration::from_secs(1);
        let metrics = Arc::new(Metrics::new());
        let syncer = Arc::new(
            Syncer::new(
                provider.clone(),
                Arc::new(EngineDesired::new(index.clone())),
                config,
                metrics.clone(),
            )
            // The gate `serve` uses: the Lease, and a cluster source in sync.
            .with_write_gate(gateway_dns::cmd::serve::write_gate(
                Some(election.is_leader()),
                source.clone(),
                None,
            )),
        );

        // As `serve` does: index changes wake the loop, which starts after the first full sync.
        let notify = Arc::new(Notify::new());
        let feeder = {
            let notify = notify.clone();
            let mut changes = index.subscribe();
            tokio::spawn(async move {
                while changes.changed().await.is_ok() {
                    notify.notify_one();
                }
            })
        };
        let mut ready = source.ready();
        let sync = tokio::spawn(async move {
            if ready.wait_for(|ready| *ready).await.is_ok() {
                syncer.run(notify, std::future::pending::<()>()).await;
            }
        });
        Replica {
            name,
            index,
            provider,
            metrics,
            leader,
            alive: Arc::new(AtomicBool::new(true)),
            election: Some(election),
            source: Some(source),
            tasks: vec![feeder, sync],
            link,
        }
    }

    fn leads(&self) -> bool {
        self.alive.load(Ordering::SeqCst) && *self.leader.borrow()
    }

    fn flag(&self) -> LeaderFlag {
        LeaderFlag {
            leader: self.leader.clone(),
            alive: self.alive.clone(),
        }
    }

    /// UPDATE messages this replica's provider sent.
    fn updates(&self) -> u64 {
        self.provider.stats().update_messages.load(Ordering::SeqCst)
    }

    fn passes(&self) -> u64 {
        self.metrics.sync_passes()
    }

    fn is_ready(&self) -> bool {
        self.source.as_ref().is_some_and(|s| s.is_ready())
    }

    /// Whether this replica's own index and engine would publish `host`.
    fn would_publish(&self, host: &str) -> bool {
        EngineDesired::new(self.index.clone())
            .desired()
            .iter()
            .any(|endpoint| endpoint.dns_name == host)
    }

    fn is_alive(&self) -> bool {
        self.alive.load(Ordering::SeqCst)
    }

    /// Stops everything at once without releasing the Lease, as a killed process would.
    fn crash(&mut self) {
        self.alive.store(false, Ordering::SeqCst);
        for task in self.tasks.drain(..) {
            task.abort();
        }
        self.election.take();
        self.source.take();
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.crash();
    }
}

#[derive(Clone)]
struct LeaderFlag {
    leader: watch::Receiver<bool>,
    alive: Arc<AtomicBool>,
}

impl LeaderFlag {
    fn leads(&self) -> bool {
        self.alive.load(Ordering::SeqCst) && *self.leader.borrow()
    }
}

#[derive(Default)]
struct LeaderLog {
    samples: u64,
    /// Samples in which more than one replica acted as leader.
    overlaps: u64,
    /// (replica, leads now, when the sampler saw the change), in time order.
    changes: Vec<(usize, bool, Instant)>,
}

impl LeaderLog {
    /// When the sampler first saw `replica` start (or stop) leading after `since`.
    fn change_after(&self, replica: usize, leads: bool, since: Instant) -> Option<Instant> {
        self.changes
            .iter()
            .find(|(r, l, at)| *r == replica && *l == leads && *at >= since)
            .map(|(_, _, at)| *at)
    }
}

/// Samples every replica's leader flag every 2 ms until stopped (or SAMPLER_LIMIT).
struct Sampler {
    log: Arc<Mutex<LeaderLog>>,
    stop: Arc<AtomicBool>,
    task: Option<JoinHandle<()>>,
}

impl Sampler {
    fn spawn(flags: Vec<LeaderFlag>) -> Sampler {
        let log = Arc::new(Mutex::new(LeaderLog::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let task = {
            let (log, stop) = (log.clone(), stop.clone());
            tokio::spawn(async move {
                let start = Instant::now();
                let mut last = vec![false; flags.len()];
                while !stop.load(Ordering::SeqCst) && start.elapsed() < SAMPLER_LIMIT {
                    let now: Vec<bool> = flags.iter().map(LeaderFlag::leads).collect();
                    let at = Instant::now();
                    {
                        let mut log = log.lock().unwrap();
                        log.samples += 1;
                        if now.iter().filter(|leads| **leads).count() > 1 {
                            log.overlaps += 1;
                        }
                        for (replica, (was, is)) in last.iter().zip(&now).enumerate() {
                            if was != is {
                                log.changes.push((replica, *is, at));
                            }
                        }
                    }
                    last = now;
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
            })
        };
        Sampler {
            log,
            stop,
            task: Some(task),
        }
    }

    fn overlaps(&self) -> u64 {
        self.log.lock().unwrap().overlaps
    }

    fn change_after(&self, replica: usize, leads: bool, since: Instant) -> Option<Instant> {
        self.log.lock().unwrap().change_after(replica, leads, since)
    }

    async fn finish(mut self) -> LeaderLog {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(task) = self.task.take() {
            task.await.unwrap();
        }
        std::mem::take(&mut *self.log.lock().unwrap())
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// Polls an async condition every 50 ms for at most `limit`; panics naming `what`.
async fn wait_for<F, Fut>(what: &str, limit: Duration, mut ready: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let start = Instant::now();
    loop {
        if ready().await {
            return;
        }
        assert!(
            start.elapsed() < limit,
            "timed out after {limit:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn answer(bind: &Bind, host: &str) -> Vec<String> {
    let (addr, host) = (bind.addr(), host.to_string());
    tokio::task::spawn_blocking(move || dig::query(addr, &host, "A", false).data("A"))
        .await
        .unwrap()
}

/// The zone's SOA serial as BIND answers it; BIND adds one per accepted UPDATE message.
async fn serial(bind: &Bind) -> u32 {
    let addr = bind.addr();
    tokio::task::spawn_blocking(move || dig::query(addr, ZONE, "SOA", false).soa_serial())
        .await
        .unwrap()
        .expect("BIND answers the zone's SOA")
}

fn leader_of(replicas: &[Replica]) -> Option<usize> {
    let leaders: Vec<usize> = (0..replicas.len())
        .filter(|&i| replicas[i].leads())
        .collect();
    assert!(leaders.len() <= 1, "two leaders at once: {leaders:?}");
    leaders.first().copied()
}

/// What each replica sent and what BIND accepted while one route was published.
#[derive(Debug)]
struct Writes {
    updates: Vec<u64>,
    accepted: u32,
}

/// Creates a route for `host`, waits until BIND answers it, then lets every live replica
/// complete at least one more sync pass (a follower that would write wrongly gets its chance)
/// before counting.
async fn publish(api: &ClusterApi, bind: &Bind, replicas: &[Replica], host: &str) -> Writes {
    let updates_before: Vec<u64> = replicas.iter().map(Replica::updates).collect();
    let serial_before = serial(bind).await;
    let name = host.split('.').next().unwrap();
    api.create(route(name, host)).await;
    wait_for(
        &format!("{host} to answer from BIND"),
        Duration::from_secs(15),
        || async { answer(bind, host).await == [GATEWAY_ADDRESS] },
    )
    .await;
    for replica in replicas.iter().filter(|r| r.is_alive()) {
        // `passes` counts passes started: two more means at least one whole pass after now.
        let started = replica.passes();
        wait_for(
            &format!("{} to run a sync pass", replica.name),
            Duration::from_secs(10),
            || async { replica.passes() >= started + 2 },
        )
        .await;
    }
    Writes {
        updates: replicas
            .iter()
            .zip(&updates_before)
            .map(|(replica, before)| replica.updates() - before)
            .collect(),
        accepted: serial(bind).await.wrapping_sub(serial_before),
    }
}

/// Only `writer` sent UPDATEs for the route, and BIND accepted every one of them (a second
/// writer's would either show in its counter or be rejected and leave the serial behind).
fn assert_single_writer(writes: &Writes, writer: usize, host: &str) {
    for (replica, sent) in writes.updates.iter().enumerate() {
        if replica != writer {
            assert_eq!(
                *sent, 0,
                "{host}: replica {replica} wrote without the Lease"
            );
        }
    }
    assert!(writes.updates[writer] >= 1, "{host}: the leader wrote it");
    assert_eq!(
        writes.updates[writer],
        u64::from(writes.accepted),
        "{host}: every UPDATE sent was accepted, and none came from elsewhere"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_only_the_lease_holder_writes_and_hand_overs_never_double_write() {
    let bind = Bind::start(ZONE, "");
    let cluster = tokio::task::block_in_place(|| {
        let cluster = ControlPlane::start();
        cluster.install_gateway_dns_rbac();
        cluster
    });
    let api = ClusterApi::new(cluster.admin_client().await);
    for namespace in ["infra", "shop"] {
        api.ensure_namespace(namespace).await;
    }
    api.create(gateway()).await;
    tokio::task::block_in_place(|| cluster.gateway_address("infra/public", &[GATEWAY_ADDRESS]));
    let leases = Api::<Lease>::namespaced(cluster.admin_client().await, LEASE_NAMESPACE);
    let serial_at_start = serial(&bind).await;

    let mut replicas = vec![
        Replica::start(&cluster, &bind, "replica-a").await,
        Replica::start(&cluster, &bind, "replica-b").await,
    ];
    let sampler = Sampler::spawn(replicas.iter().map(Replica::flag).collect());
    wait_for("both sources to sync", Duration::from_secs(15), || async {
        replicas.iter().all(Replica::is_ready)
    })
    .await;
    wait_for("a leader", Duration::from_secs(10), || async {
        leader_of(&replicas).is_some()
    })
    .await;
    let first = leader_of(&replicas).unwrap();
    let second = 1 - first;

    // 1. The leader publishes; the follower, whose index holds the same route, writes nothing.
    let writes = publish(&api, &bind, &replicas, "one.example.com").await;
    assert!(replicas[second].would_publish("one.example.com"));
    assert_single_writer(&writes, first, "one.example.com");
    assert_eq!(replicas[second].updates(), 0, "the follower never wrote");
    assert_eq!(leader_of(&replicas), Some(first), "no flapping");

    // 2. Partition the leader from the API (its Lease renewals and watches fail): it steps down
    //    before the other can take over, and the other does within the lease duration.
    let isolated_at = Instant::now();
    replicas[first].link.cut();
    wait_for(
        "the follower to take over",
        TAKEOVER_LIMIT + Duration::from_secs(2),
        || async { sampler.change_after(second, true, isolated_at).is_some() },
    )
    .await;
    let stepped_down = sampler
        .change_after(first, false, isolated_at)
        .expect("the partitioned leader stepped down");
    let took_over = sampler.change_after(second, true, isolated_at).unwrap();
    assert!(
        replicas[second].leads() && !replicas[first].leads(),
        "one leader after the hand-over"
    );
    assert!(
        stepped_down < took_over,
        "the old leader stopped before the new one started"
    );
    assert!(
        stepped_down - isolated_at <= RENEW_DEADLINE + Duration::from_millis(200),
        "stepped down within the renew deadline: {:?}",
        stepped_down - isolated_at
    );
    assert!(
        took_over - isolated_at <= TAKEOVER_LIMIT,
        "took over within the lease duration plus retries: {:?}",
        took_over - isolated_at
    );
    let partition_takeover = took_over - isolated_at;
    let stale_updates = replicas[first].updates();

    // A route created after the hand-over: the new leader publishes it. The partitioned replica
    // cannot see it, so its own plan would delete the owned record; it must not write.
    let writes = publish(&api, &bind, &replicas, "two.example.com").await;
    assert!(
        !replicas[first].would_publish("two.example.com"),
        "the partitioned replica's index is stale (the partition is real)"
    );
    assert_single_writer(&writes, second, "two.example.com");
    assert_eq!(replicas[first].updates(), stale_updates);
    assert_eq!(answer(&bind, "one.example.com").await, [GATEWAY_ADDRESS]);

    // 3. The partition heals: the old leader catches up as a follower. Then the new leader
    //    crashes without releasing the Lease; the old one takes over once the Lease expires.
    replicas[first].link.restore();
    wait_for(
        "the healed replica to catch up",
        Duration::from_secs(20),
        || async { replicas[first].would_publish("two.example.com") },
    )
    .await;
    assert_eq!(
        leader_of(&replicas),
        Some(second),
        "healing changes no leader"
    );
    let crashed_at = Instant::now();
    replicas[second].crash();
    wait_for(
        "the healed replica to take over",
        TAKEOVER_LIMIT + Duration::from_secs(2),
        || async { sampler.change_after(first, true, crashed_at).is_some() },
    )
    .await;
    let takeover = sampler.change_after(first, true, crashed_at).unwrap() - crashed_at;
    assert!(
        takeover <= TAKEOVER_LIMIT,
        "took over within the lease duration plus retries: {takeover:?}"
    );
    assert!(
        takeover >= LEASE - RETRY * 2,
        "waited out the crashed leader's Lease: {takeover:?}"
    );
    let lease = leases.get(LEASE_NAME).await.unwrap().spec.unwrap();
    assert_eq!(lease.holder_identity.as_deref(), Some(replicas[first].name));
    assert_eq!(lease.lease_transitions, Some(2));

    let writes = publish(&api, &bind, &replicas, "three.example.com").await;
    assert_single_writer(&writes, first, "three.example.com");
    for host in ["one.example.com", "two.example.com"] {
        assert_eq!(answer(&bind, host).await, [GATEWAY_ADDRESS], "{host} kept");
    }

    // Over the whole run: never two leaders in any sample, and BIND accepted exactly the
    // UPDATEs the replicas sent (no duplicate write was ever attempted and rejected).
    let total_sent: u64 = replicas.iter().map(Replica::updates).sum();
    let accepted = serial(&bind).await.wrapping_sub(serial_at_start);
    assert_eq!(total_sent, u64::from(accepted));
    assert_eq!(sampler.overlaps(), 0);
    let log = sampler.finish().await;
    assert_eq!(log.overlaps, 0, "two leaders at once in some sample");
    assert!(
        log.samples > 1000,
        "the sampler ran: {} samples",
        log.samples
    );
    // Leadership moved first → second → first, and each change of hands had a gap.
    let starts: Vec<usize> = log
        .changes
        .iter()
        .filter(|(_, leads, _)| *leads)
        .map(|(replica, _, _)| *replica)
        .collect();
    assert_eq!(starts, [first, second, first]);
    println!(
        "partition: stepped down after {:?}, taken over after {:?}; crash: taken over after \
         {takeover:?}; {total_sent} UPDATEs, {} leader samples",
        stepped_down - isolated_at,
        partition_takeover,
        log.samples
    );
}
