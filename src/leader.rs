//! Leader election with a coordination.k8s.io/v1 Lease, so that of several replicas only one
//! writes DNS.
//!
//! The algorithm is client-go's: a candidate takes the Lease when it is free or when its
//! record has not changed for `leaseDurationSeconds` of the candidate's own clock; the holder
//! renews every `retry_period`, with one write on the Lease it last wrote (client-go's fast
//! path), reading it again only when that write conflicts. Safety does not depend on clocks
//! agreeing: the holder counts
//! `renew_deadline` from the moment it *sent* its last successful renewal, while a rival counts
//! `lease_duration` from when it *saw* that renewal, which is later. With
//! `renew_deadline < lease_duration`, the holder stops acting as leader before any rival can
//! take over. Writes use the Lease's resourceVersion, so racing candidates get 409 Conflict.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::{debug, info, warn};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid leader election settings: {0}")]
    InvalidConfig(String),
}

#[derive(Clone, Debug)]
pub struct LeaderConfig {
    pub namespace: String,
    pub lease_name: String,
    /// Unique per replica (e.g. the pod name).
    pub identity: String,
    /// How long a rival waits after last seeing the Lease change before taking it
    /// (whole seconds, as the Lease stores it).
    pub lease_duration: Duration,
    /// The holder steps down when it has not renewed for this long; must be shorter than
    /// `lease_duration`.
    pub renew_deadline: Duration,
    /// How often the holder renews and candidates retry.
    pub retry_period: Duration,
}

/// client-go's jitter factor: a candidate waits up to this many retry periods between tries,
/// and the renew deadline must leave room for one such wait.
const JITTER: f64 = 1.2;

impl LeaderConfig {
    /// A 20 s lease, 15 s renew deadline and 5 s retry period: the holder makes 12 requests a
    /// minute (client-go's 15/10/2 s made 30, 60 with a read before each write), and a crashed
    /// holder is replaced within 20–26 s instead of 15–17 s.
    pub fn new(namespace: &str, lease_name: &str, identity: &str) -> LeaderConfig {
        LeaderConfig {
            namespace: namespace.to_string(),
            lease_name: lease_name.to_string(),
            identity: identity.to_string(),
            lease_duration: Duration::from_secs(20),
            renew_deadline: Duration::from_secs(15),
            retry_period: Duration::from_secs(5),
        }
    }

    fn validate(&self) -> Result<(), Error> {
        let invalid = |message: &str| Err(Error::InvalidConfig(message.to_string()));
        if self.identity.is_empty() || self.lease_name.is_empty() || self.namespace.is_empty() {
            return invalid("namespace, lease name and identity must not be empty");
        }
        if self.lease_duration.subsec_nanos() != 0 || self.lease_duration < Duration::from_secs(1) {
            return invalid("the lease duration must be a whole number of seconds, at least 1");
        }
        if self.lease_duration.as_secs() > i32::MAX as u64 {
            return invalid("the lease duration is too long");
        }
        if self.renew_deadline >= self.lease_duration {
            return invalid("the renew deadline must be shorter than the lease duration");
        }
        if self.retry_period.is_zero() || self.retry_period.mul_f64(JITTER) >= self.renew_deadline {
            return invalid(
                "the retry period must be positive and, times 1.2 (the jitter), shorter than the \
                 renew deadline",
            );
        }
        Ok(())
    }
}

/// A running election. `is_leader` says whether this replica may act as the leader now.
/// Dropping it stops taking part without releasing the Lease (as a crash would);
/// `release` steps down and frees the Lease so another replica takes over at once.
pub struct LeaderElection {
    leader: watch::Receiver<bool>,
    holder: watch::Receiver<Option<String>>,
    shared: Shared,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
}

impl Drop for LeaderElection {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

impl LeaderElection {
    pub fn spawn(client: kube::Client, config: LeaderConfig) -> Result<LeaderElection, Error> {
        config.validate()?;
        let api: Api<Lease> = Api::namespaced(client, &config.namespace);
        let (leader_sender, leader) = watch::channel(false);
        let (holder_sender, holder) = watch::channel(None);
        let (stop, stop_receiver) = watch::channel(false);
        let shared = Shared::new();
        let task = tokio::spawn(run(
            api,
            config,
            leader_sender,
            holder_sender,
            shared.clone(),
            stop_receiver,
        ));
        Ok(LeaderElection {
            leader,
            holder,
            shared,
            stop,
            task: Some(task),
        })
    }

    /// True while this replica holds the Lease and renewed it within the renew deadline.
    pub fn is_leader(&self) -> watch::Receiver<bool> {
        self.leader.clone()
    }

    /// What the holder keeps on the Lease for the other replicas (see [`Shared`]).
    pub fn shared(&self) -> Shared {
        self.shared.clone()
    }

    /// The identity last seen holding the Lease (this replica's own while it holds it); None
    /// before the first answer, and after this replica stepped down for want of a renewal
    /// (until the Lease is read again).
    pub fn holder(&self) -> watch::Receiver<Option<String>> {
        self.holder.clone()
    }

    pub fn is_leader_now(&self) -> bool {
        *self.leader.borrow()
    }

    /// Stops acting as leader, then frees the Lease (best effort) and ends the election.
    pub async fn release(mut self) {
        self.stop.send_replace(true);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

/// Annotations the holder keeps on the Lease for every other replica, which reads the Lease
/// anyway (each retry period): state only the holder makes, shared at no extra request. Each
/// replica sets what it would write while holding (`keep`) and reads what the Lease carried
/// when it last read or wrote it (`seen`).
#[derive(Clone, Debug)]
pub struct Shared {
    keep: watch::Sender<BTreeMap<String, String>>,
    seen: watch::Sender<BTreeMap<String, String>>,
}

impl Shared {
    /// Forgets what this replica would write: it no longer holds the Lease, and what it kept
    /// must not overwrite a later holder's when it holds the Lease again.
    fn forget(&self) {
        self.keep.send_if_modified(|kept| {
            let had = !kept.is_empty();
            kept.clear();
            had
        });
    }

    pub fn new() -> Shared {
        Shared {
            keep: watch::channel(BTreeMap::new()).0,
            seen: watch::channel(BTreeMap::new()).0,
        }
    }

    /// Sets the annotation `key` that this replica writes on the Lease while it holds it (at
    /// its next renewal).
    pub fn keep(&self, key: &str, value: String) {
        self.keep.send_if_modified(|kept| {
            if kept.get(key) == Some(&value) {
                return false;
            }
            kept.insert(key.to_owned(), value);
            true
        });
    }

    /// The annotations `keep` names, as the Lease carried them when last read or written.
    pub fn seen(&self) -> watch::Receiver<BTreeMap<String, String>> {
        self.seen.subscribe()
    }

    /// Writes the kept annotations into `lease` before it is written.
    fn apply(&self, lease: &mut Lease) {
        let kept = self.keep.borrow();
        if kept.is_empty() {
            return;
        }
        let annotations = lease.metadata.annotations.get_or_insert_with(BTreeMap::new);
        for (key, value) in kept.iter() {
            annotations.insert(key.clone(), value.clone());
        }
    }

    /// Remembers the annotations of a Lease read or written.
    fn observe(&self, lease: &Lease) {
        let seen: BTreeMap<String, String> = lease
            .metadata
            .annotations
            .iter()
            .flatten()
            .filter(|(key, _)| key.starts_with(SHARED_PREFIX))
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect();
        self.seen.send_if_modified(|current| {
            let changed = *current != seen;
            if changed {
                *current = seen;
            }
            changed
        });
    }
}

impl Default for Shared {
    fn default() -> Shared {
        Shared::new()
    }
}

/// The prefix of every annotation [`Shared`] reads back.
pub const SHARED_PREFIX: &str = "gateway-dns.io/";

/// What a candidate remembers of the Lease record it last saw, and when it saw it change.
#[derive(Clone, Debug, PartialEq)]
struct Observed {
    holder: Option<String>,
    renew_time: Option<Timestamp>,
    duration_seconds: Option<i32>,
    resource_version: Option<String>,
}

impl Observed {
    fn of(lease: &Lease) -> Observed {
        let spec = lease.spec.as_ref();
        Observed {
            holder: spec
                .and_then(|s| s.holder_identity.clone())
                .filter(|h| !h.is_empty()),
            renew_time: spec.and_then(|s| s.renew_time.as_ref()).map(|t| t.0),
            duration_seconds: spec.and_then(|s| s.lease_duration_seconds),
            resource_version: lease.metadata.resource_version.clone(),
        }
    }
}

struct Candidate {
    api: Api<Lease>,
    config: LeaderConfig,
    observed: Option<(Observed, Instant)>,
    /// The Lease as our last successful write left it: the holder renews it without reading.
    written: Option<Lease>,
    shared: Shared,
}

enum Attempt {
    /// We hold the Lease as of the request sent at the attempt's start.
    Held,
    /// Someone else holds it (or won a race to it).
    HeldByOther(Option<String>),
}

impl Candidate {
    fn now() -> MicroTime {
        MicroTime(Timestamp::now())
    }

    /// Renews the Lease we hold with one write on the version we last wrote; None when that
    /// version is stale (someone else wrote since), and the Lease must be read again.
    async fn try_renew(&mut self, leading: bool) -> Result<Option<Attempt>, kube::Error> {
        let Some(mut lease) = self.written.take().filter(|_| leading) else {
            return Ok(None);
        };
        let Some(spec) = lease.spec.as_mut() else {
            return Ok(None);
        };
        spec.renew_time = Some(Self::now());
        self.shared.apply(&mut lease);
        match self
            .api
            .replace(&self.config.lease_name, &PostParams::default(), &lease)
            .await
        {
            Ok(written) => {
                self.shared.observe(&written);
                self.written = Some(written);
                Ok(Some(Attempt::Held))
            }
            Err(kube::Error::Api(status)) if status.code == 409 => {
                debug!("the Lease changed since our last renewal; reading it again");
                Ok(None)
            }
            Err(other) => Err(other),
        }
    }

    /// `leading`: we hold the Lease as of our last renewal, which may then skip the read.
    async fn try_acquire_or_renew(&mut self, leading: bool) -> Result<Attempt, kube::Error> {
        if let Some(renewed) = self.try_renew(leading).await? {
            return Ok(renewed);
        }
        let name = self.config.lease_name.clone();
        let Some(mut lease) = self.api.get_opt(&name).await? else {
            let mut lease = Lease {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    namespace: Some(self.config.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.config.identity.clone()),
                    lease_duration_seconds: Some(self.lease_seconds()),
                    acquire_time: Some(Self::now()),
                    renew_time: Some(Self::now()),
                    lease_transitions: Some(0),
                    ..LeaseSpec::default()
                }),
            };
            self.shared.apply(&mut lease);
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(written) => {
                    self.shared.observe(&written);
                    self.written = Some(written);
                    Ok(Attempt::Held)
                }
                Err(kube::Error::Api(status)) if status.code == 409 => {
                    Ok(Attempt::HeldByOther(None))
                }
                Err(other) => Err(other),
            };
        };
        let seen = Observed::of(&lease);
        self.shared.observe(&lease);
        let seen_at = match &self.observed {
            Some((previous, at)) if *previous == seen => *at,
            _ => Instant::now(),
        };
        self.observed = Some((seen.clone(), seen_at));
        let ours = seen.holder.as_deref() == Some(self.config.identity.as_str());
        if let Some(holder) = seen.holder.as_ref().filter(|_| !ours) {
            let duration = Duration::from_secs(seen.duration_seconds.unwrap_or(0).max(1) as u64);
            if seen_at.elapsed() < duration {
                return Ok(Attempt::HeldByOther(Some(holder.clone())));
            }
            info!(previous = %holder, "the Lease expired; taking it over");
        }
        let mut spec = lease.spec.take().unwrap_or_default();
        if !ours {
            spec.acquire_time = Some(Self::now());
            if seen.holder.is_some() {
                spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
            }
        }
        spec.holder_identity = Some(self.config.identity.clone());
        spec.lease_duration_seconds = Some(self.lease_seconds());
        spec.renew_time = Some(Self::now());
        lease.spec = Some(spec);
        // A replica taking the Lease over leaves the last holder's annotations as they are:
        // its own are written from its first renewal, once it has made them.
        if ours {
            self.shared.apply(&mut lease);
        }
        // The resourceVersion read above makes this a compare-and-swap.
        match self
            .api
            .replace(&name, &PostParams::default(), &lease)
            .await
        {
            Ok(written) => {
                self.shared.observe(&written);
                self.written = Some(written);
                Ok(Attempt::Held)
            }
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(Attempt::HeldByOther(None)),
            Err(other) => Err(other),
        }
    }

    fn lease_seconds(&self) -> i32 {
        i32::try_from(self.config.lease_duration.as_secs()).unwrap_or(i32::MAX)
    }

    /// Frees the Lease if we still hold it, so the next candidate need not wait it out.
    async fn release(&self) {
        let name = &self.config.lease_name;
        let Ok(Some(mut lease)) = self.api.get_opt(name).await else {
            return;
        };
        let Some(spec) = lease.spec.as_mut() else {
            return;
        };
        if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
            return;
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(Self::now());
        // The next holder starts from what this one knew last.
        self.shared.apply(&mut lease);
        match self.api.replace(name, &PostParams::default(), &lease).await {
            Ok(_) => info!("released the Lease"),
            Err(error) => warn!(%error, "could not release the Lease; it will expire"),
        }
    }
}

/// Stops acting as leader once `step_down_at` has passed without a renewal; true when it did.
fn step_down_if_due(step_down_at: &mut Option<Instant>, leader: &watch::Sender<bool>) -> bool {
    if step_down_at.is_some_and(|t| Instant::now() >= t) {
        *step_down_at = None;
        set_leader(
            leader,
            false,
            "could not renew the Lease before the renew deadline",
        );
        return true;
    }
    false
}

fn set_leader(sender: &watch::Sender<bool>, leader: bool, why: &str) {
    if *sender.borrow() != leader {
        if leader {
            info!(why, "became the leader");
        } else {
            warn!(why, "stopped being the leader");
        }
        sender.send_replace(leader);
    }
}

async fn run(
    api: Api<Lease>,
    config: LeaderConfig,
    leader: watch::Sender<bool>,
    holder: watch::Sender<Option<String>>,
    shared: Shared,
    mut stop: watch::Receiver<bool>,
) {
    let mut candidate = Candidate {
        api,
        config: config.clone(),
        observed: None,
        written: None,
        shared,
    };
    // While leader: the instant by which a renewal must succeed, else we step down.
    let mut step_down_at: Option<Instant> = None;
    loop {
        let attempt_start = Instant::now();
        // No request may outlive the renew deadline of the current term.
        let request_deadline = step_down_at.unwrap_or(attempt_start + config.renew_deadline);
        let outcome = tokio::select! {
            outcome = tokio::time::timeout_at(
                request_deadline,
                candidate.try_acquire_or_renew(step_down_at.is_some()),
            ) => outcome,
            _ = stop.changed() => break,
        };
        match outcome {
            Ok(Ok(Attempt::Held)) => {
                step_down_at = Some(attempt_start + config.renew_deadline);
                set_leader(&leader, true, "holding the Lease");
                holder.send_if_modified(|h| {
                    let ours = Some(config.identity.clone());
                    std::mem::replace(h, ours.clone()) != ours
                });
            }
            Ok(Ok(Attempt::HeldByOther(seen))) => {
                step_down_at = None;
                set_leader(&leader, false, "the Lease is held by another replica");
                candidate.shared.forget();
                debug!(holder = seen.as_deref().unwrap_or("?"), "not the leader");
                // Unnamed (a write that lost a race) leaves the last name seen.
                if seen.is_some() {
                    holder.send_if_modified(|h| std::mem::replace(h, seen.clone()) != seen);
                }
            }
            Ok(Err(error)) => warn!(%error, "Lease request failed"),
            Err(_elapsed) => warn!("Lease request timed out"),
        }
        if step_down_if_due(&mut step_down_at, &leader) {
            candidate.shared.forget();
            holder.send_replace(None);
        }
        // Candidates spread their retries; the holder renews on time.
        let period = if step_down_at.is_some() {
            config.retry_period
        } else {
            config.retry_period.mul_f64(1.0 + 0.2 * fastrand::f64())
        };
        let wake = match step_down_at {
            Some(t) => (Instant::now() + period).min(t),
            None => Instant::now() + period,
        };
        tokio::select! {
            _ = tokio::time::sleep_until(wake) => {}
            _ = stop.changed() => break,
        }
        if step_down_if_due(&mut step_down_at, &leader) {
            candidate.shared.forget();
            holder.send_replace(None);
        }
    }
    // Stop acting first, then let the others in.
    set_leader(&leader, false, "shutting down");
    let _ = tokio::time::timeout(config.retry_period, candidate.release()).await;
}
