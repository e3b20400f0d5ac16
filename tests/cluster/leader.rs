//! Lease-based leader election against a real API server, as serve's least-privilege
//! ServiceAccount (its Role allows the one Lease `gateway-dns` in namespace `gateway-dns`): one
//! leader at a time, hand-over on a crash or a release, and a leader cut off from the API server
//! stepping down before anyone else takes over. Each elector reaches the server through its own
//! proxy, so one can be cut off alone.

use std::time::{Duration, Instant};

use gateway_dns::leader::{LeaderConfig, LeaderElection};
use k8s_openapi::api::coordination::v1::LeaseSpec;
use kube::api::Api;

use crate::support::cluster::{ControlPlane, client_for};
use crate::support::proxy::Proxy;

const LEASE: Duration = Duration::from_secs(3);
const RENEW_DEADLINE: Duration = Duration::from_secs(2);
const RETRY: Duration = Duration::from_millis(500);
/// What serve's Role allows (manifests/base/role.yaml).
const NAMESPACE: &str = "gateway-dns";
const LEASE_NAME: &str = "gateway-dns";

fn config(identity: &str) -> LeaderConfig {
    LeaderConfig {
        lease_duration: LEASE,
        renew_deadline: RENEW_DEADLINE,
        retry_period: RETRY,
        ..LeaderConfig::new(NAMESPACE, LEASE_NAME, identity)
    }
}

/// A lease long enough that a take-over at once and one that waited the lease out are told
/// apart on a busy machine.
const LONG_LEASE: Duration = Duration::from_secs(15);

fn long_config(identity: &str) -> LeaderConfig {
    LeaderConfig {
        lease_duration: LONG_LEASE,
        renew_deadline: Duration::from_secs(10),
        ..config(identity)
    }
}

fn cluster_with_rbac() -> ControlPlane {
    tokio::task::block_in_place(|| {
        let cluster = ControlPlane::start();
        cluster.install_gateway_dns_rbac();
        cluster
    })
}

/// An election as the ServiceAccount, through a proxy of its own.
async fn elector(cluster: &ControlPlane, identity: &str) -> (LeaderElection, Proxy) {
    elector_with(cluster, config(identity)).await
}

async fn elector_with(cluster: &ControlPlane, config: LeaderConfig) -> (LeaderElection, Proxy) {
    let proxy = Proxy::start(([127, 0, 0, 1], cluster.api_port()).into()).await;
    let kubeconfig = tokio::task::block_in_place(|| {
        cluster.service_account_kubeconfig(NAMESPACE, "gateway-dns", Some(proxy.port()))
    });
    let client = client_for(&kubeconfig).await;
    let election = LeaderElection::spawn(client, config).unwrap();
    (election, proxy)
}

/// The Lease as the API server holds it.
async fn lease(cluster: &ControlPlane) -> LeaseSpec {
    let leases = Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(
        cluster.admin_client().await,
        NAMESPACE,
    );
    leases.get(LEASE_NAME).await.unwrap().spec.unwrap()
}

async fn wait_leader(election: &LeaderElection, limit: Duration) {
    let mut leads = election.is_leader();
    tokio::time::timeout(limit, leads.wait_for(|l| *l))
        .await
        .expect("elected")
        .unwrap();
}

/// Samples both flags every 2 ms until `done` holds or `limit` passes; panics if both are
/// ever leader at once. Returns the time each flag was last seen changing.
async fn sample_pair(
    a: &LeaderElection,
    b: &LeaderElection,
    limit: Duration,
    done: impl Fn(bool, bool) -> bool,
) -> (bool, Option<Instant>, Option<Instant>) {
    let start = Instant::now();
    let (mut last_a, mut last_b) = (a.is_leader_now(), b.is_leader_now());
    let (mut changed_a, mut changed_b) = (None, None);
    while start.elapsed() < limit {
        let (now_a, now_b) = (a.is_leader_now(), b.is_leader_now());
        assert!(
            !(now_a && now_b),
            "two leaders at once after {:?}",
            start.elapsed()
        );
        if now_a != last_a {
            changed_a = Some(Instant::now());
            last_a = now_a;
        }
        if now_b != last_b {
            changed_b = Some(Instant::now());
            last_b = now_b;
        }
        if done(now_a, now_b) {
            return (true, changed_a, changed_b);
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    (false, changed_a, changed_b)
}

#[test]
fn settings_that_could_allow_two_leaders_are_refused() {
    let mut unsafe_deadline = config("a");
    unsafe_deadline.renew_deadline = LEASE;
    assert!(unsafe_deadline.renew_deadline >= unsafe_deadline.lease_duration);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        // Settings are refused before any request: nothing needs to listen at this address.
        let unused = kube::Config::new("http://127.0.0.1:1".parse().unwrap());
        let client = kube::Client::try_from(unused).unwrap();
        assert!(LeaderElection::spawn(client.clone(), unsafe_deadline).is_err());
        let mut fractional = config("a");
        fractional.lease_duration = Duration::from_millis(2500);
        assert!(LeaderElection::spawn(client.clone(), fractional).is_err());
        // A candidate's wait (up to 1.2 retry periods, client-go's jitter) must fit in the
        // renew deadline.
        let mut jittered = config("a");
        jittered.retry_period = RENEW_DEADLINE.mul_f64(0.9);
        assert!(jittered.retry_period < jittered.renew_deadline);
        assert!(LeaderElection::spawn(client.clone(), jittered).is_err());
        assert!(LeaderElection::spawn(client, config("a")).is_ok());
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leader_and_a_crashed_leader_is_replaced_after_the_lease_expires() {
    let cluster = cluster_with_rbac();
    let (a, _a_link) = elector(&cluster, "a").await;
    let (b, _b_link) = elector(&cluster, "b").await;
    let (elected, _, _) = sample_pair(&a, &b, LEASE * 2, |a, b| a || b).await;
    assert!(elected, "someone is elected");
    // Stays exactly one for a while (several renewals).
    let (_, _, _) = sample_pair(&a, &b, RETRY * 5, |_, _| false).await;
    assert!(a.is_leader_now() ^ b.is_leader_now());
    let (leader, follower, leader_id, follower_id) = if a.is_leader_now() {
        (a, b, "a", "b")
    } else {
        (b, a, "b", "a")
    };
    let spec = lease(&cluster).await;
    assert_eq!(spec.holder_identity.as_deref(), Some(leader_id));
    assert_eq!(spec.lease_duration_seconds, Some(LEASE.as_secs() as i32));

    // Crash: the leader stops without releasing.
    let crashed_at = Instant::now();
    drop(leader);
    let mut follower_leads = follower.is_leader();
    tokio::time::timeout(LEASE + RETRY * 3, follower_leads.wait_for(|l| *l))
        .await
        .expect("the follower takes over within the lease duration (plus retries)")
        .unwrap();
    let takeover = crashed_at.elapsed();
    assert!(
        takeover >= LEASE - RETRY * 2,
        "waited out the lease: {takeover:?}"
    );
    let spec = lease(&cluster).await;
    assert_eq!(spec.holder_identity.as_deref(), Some(follower_id));
    assert_eq!(spec.lease_transitions, Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_released_lease_is_taken_over_at_once() {
    let cluster = cluster_with_rbac();
    let (a, _a_link) = elector_with(&cluster, long_config("a")).await;
    wait_leader(&a, LONG_LEASE).await;
    let (b, _b_link) = elector_with(&cluster, long_config("b")).await;
    tokio::time::sleep(RETRY * 3).await;
    assert!(!b.is_leader_now());

    let a_leads = a.is_leader();
    let released_at = Instant::now();
    a.release().await;
    assert!(!*a_leads.borrow());
    // At once: within a few retry periods, where waiting the lease out would take 15 s (a
    // busy machine may stretch the retries, never to a third of the lease).
    let mut b_leads = b.is_leader();
    tokio::time::timeout(LONG_LEASE / 3, b_leads.wait_for(|l| *l))
        .await
        .expect("prompt hand-over")
        .unwrap();
    assert!(released_at.elapsed() < LONG_LEASE / 3);
    assert_eq!(lease(&cluster).await.holder_identity.as_deref(), Some("b"));
}

/// How the leader loses the API server.
#[derive(Clone, Copy, Debug)]
enum CutOff {
    /// Connections are refused: every request fails at once.
    Refused,
    /// The link holds every byte: requests hang without an answer.
    Stalled,
}

async fn a_cut_off_leader_steps_down_before_anyone_takes_over(fault: CutOff) {
    let cluster = cluster_with_rbac();
    let (a, a_link) = elector(&cluster, "a").await;
    wait_leader(&a, LEASE * 2).await;
    let (b, _b_link) = elector(&cluster, "b").await;
    tokio::time::sleep(RETRY * 3).await;

    let cut_at = Instant::now();
    match fault {
        CutOff::Refused => a_link.cut(),
        CutOff::Stalled => a_link.stall(),
    }
    let (handed_over, a_changed, b_changed) =
        sample_pair(&a, &b, LEASE * 3, |a_leads, b_leads| !a_leads && b_leads).await;
    assert!(handed_over, "{fault:?}: b takes over");
    let (a_stopped, b_started) = (a_changed.unwrap(), b_changed.unwrap());
    assert!(
        a_stopped < b_started,
        "{fault:?}: a stepped down before b started"
    );
    let stop_delay = a_stopped - cut_at;
    assert!(
        stop_delay <= RENEW_DEADLINE + Duration::from_millis(100),
        "{fault:?}: {stop_delay:?}"
    );
    assert!(
        b_started - cut_at >= LEASE - RETRY * 2,
        "{fault:?}: b waited out the lease"
    );
    assert_eq!(lease(&cluster).await.holder_identity.as_deref(), Some("b"));

    // Reconnected (a stalled request of a's arrives late now), a stays a follower.
    a_link.restore();
    let (_, _, _) = sample_pair(&a, &b, RETRY * 5, |_, _| false).await;
    assert!(b.is_leader_now() && !a.is_leader_now());
    assert_eq!(lease(&cluster).await.holder_identity.as_deref(), Some("b"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_refused_by_the_network_steps_down_before_anyone_takes_over() {
    a_cut_off_leader_steps_down_before_anyone_takes_over(CutOff::Refused).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_whose_requests_hang_steps_down_before_anyone_takes_over() {
    a_cut_off_leader_steps_down_before_anyone_takes_over(CutOff::Stalled).await;
}
