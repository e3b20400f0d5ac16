//! Lease-based leader election against the API double: one leader at a time, hand-over on a
//! crash or a release, and a cut-off leader stepping down before anyone else takes over.

use std::time::{Duration, Instant};

use gateway_dns::leader::{LeaderConfig, LeaderElection};

use crate::support::apiserver::ApiServer;

const LEASE: Duration = Duration::from_secs(2);
const RENEW_DEADLINE: Duration = Duration::from_millis(1400);
const RETRY: Duration = Duration::from_millis(200);

fn config(identity: &str) -> LeaderConfig {
    LeaderConfig {
        lease_duration: LEASE,
        renew_deadline: RENEW_DEADLINE,
        retry_period: RETRY,
        ..LeaderConfig::new("gateway-dns", "gateway-dns-sync", identity)
    }
}

async fn elector(server: &ApiServer, identity: &str) -> LeaderElection {
    LeaderElection::spawn(server.client_named(identity).await, config(identity)).unwrap()
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
        let server = ApiServer::start().await;
        let client = server.client().await;
        assert!(LeaderElection::spawn(client.clone(), unsafe_deadline).is_err());
        let mut fractional = config("a");
        fractional.lease_duration = Duration::from_millis(2500);
        assert!(LeaderElection::spawn(client, fractional).is_err());
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leader_and_a_crashed_leader_is_replaced_after_the_lease_expires() {
    let server = ApiServer::start().await;
    let a = elector(&server, "a").await;
    let b = elector(&server, "b").await;
    let (elected, _, _) = sample_pair(&a, &b, Duration::from_secs(3), |a, b| a || b).await;
    assert!(elected, "someone is elected");
    // Stays exactly one for a while (several renewals).
    let (_, _, _) = sample_pair(&a, &b, Duration::from_secs(2), |_, _| false).await;
    assert!(a.is_leader_now() ^ b.is_leader_now());
    let (leader, follower, leader_id, follower_id) = if a.is_leader_now() {
        (a, b, "a", "b")
    } else {
        (b, a, "b", "a")
    };
    let lease = server
        .get("Lease", "gateway-dns", "gateway-dns-sync")
        .unwrap();
    assert_eq!(lease["spec"]["holderIdentity"], leader_id);
    assert_eq!(lease["spec"]["leaseDurationSeconds"], 2);

    // Crash: the leader stops without releasing.
    let crashed_at = Instant::now();
    drop(leader);
    let mut follower_leads = follower.is_leader();
    tokio::time::timeout(LEASE + RETRY * 3, follower_leads.wait_for(|l| *l))
        .await
        .expect("the follower takes over within the lease duration (plus a retry)")
        .unwrap();
    let takeover = crashed_at.elapsed();
    assert!(
        takeover >= LEASE - RETRY * 2,
        "waited out the lease: {takeover:?}"
    );
    let lease = server
        .get("Lease", "gateway-dns", "gateway-dns-sync")
        .unwrap();
    assert_eq!(lease["spec"]["holderIdentity"], follower_id);
    assert_eq!(lease["spec"]["leaseTransitions"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_released_lease_is_taken_over_at_once() {
    let server = ApiServer::start().await;
    let a = elector(&server, "a").await;
    let mut a_leads = a.is_leader();
    tokio::time::timeout(Duration::from_secs(3), a_leads.wait_for(|l| *l))
        .await
        .unwrap()
        .unwrap();
    let b = elector(&server, "b").await;
    tokio::time::sleep(RETRY * 3).await;
    assert!(!b.is_leader_now());

    let released_at = Instant::now();
    a.release().await;
    assert!(!*a_leads.borrow());
    let mut b_leads = b.is_leader();
    tokio::time::timeout(RETRY * 3, b_leads.wait_for(|l| *l))
        .await
        .expect("prompt hand-over")
        .unwrap();
    assert!(released_at.elapsed() < LEASE);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_off_leader_steps_down_before_anyone_takes_over() {
    // 500: every request fails at once; 0: requests hang without an answer.
    for status in [500, 0] {
        let server = ApiServer::start().await;
        let a = elector(&server, "a").await;
        let mut a_leads = a.is_leader();
        tokio::time::timeout(Duration::from_secs(3), a_leads.wait_for(|l| *l))
            .await
            .unwrap()
            .unwrap();
        let b = elector(&server, "b").await;
        tokio::time::sleep(RETRY * 3).await;

        let cut_at = Instant::now();
        server.isolate_client("a", status);
        let (handed_over, a_changed, b_changed) =
            sample_pair(&a, &b, LEASE * 3, |a_leads, b_leads| !a_leads && b_leads).await;
        assert!(handed_over, "status {status}: b takes over");
        let (a_stopped, b_started) = (a_changed.unwrap(), b_changed.unwrap());
        assert!(
            a_stopped < b_started,
            "status {status}: a stepped down before b started"
        );
        let stop_delay = a_stopped - cut_at;
        assert!(
            stop_delay <= RENEW_DEADLINE + Duration::from_millis(100),
            "status {status}: {stop_delay:?}"
        );
        assert!(
            b_started - cut_at >= LEASE - RETRY * 2,
            "status {status}: b waited out the lease"
        );

        // Reconnected, a stays a follower.
        server.clear_failures();
        let (_, _, _) = sample_pair(&a, &b, RETRY * 5, |_, _| false).await;
        assert!(b.is_leader_now() && !a.is_leader_now());
    }
}
