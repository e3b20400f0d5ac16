//! Active health checks (ARCHITECTURE.md, "Health checks"): the Lease holder probes each
//! published IP address of every Gateway (or ListenerSet) annotated
//! `gateway-dns.io/health-check-protocol`, with Host and SNI set to a name published through it,
//! and tells the index which targets fail, with hysteresis: a target fails after its failure
//! threshold of failed probes in a row and passes after its success threshold of good ones. What
//! a failing target changes in DNS is the engine's to decide (`engine::settle`), from that data.
//!
//! [`spec`] reads the annotations, [`probe`] is one probe (the only IO), this file chooses the
//! targets, keeps each one's state and runs the rounds.

pub mod probe;
pub mod spec;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::engine::World;
use crate::engine::health::{FAILING_TARGETS_ANNOTATION, TargetHealth, Unhealthy};
use crate::index::Index;
use crate::leader::Shared;
use crate::metrics::Metrics;
use crate::model::Address;
use spec::{CheckSpec, Defaults, SpecError};

/// How often the prober looks for targets that are due: a probe starts at most this late.
const TICK: Duration = Duration::from_secs(1);

/// The label a probe of a wildcard-only Gateway puts in place of `*` in its Host.
const WILDCARD_LABEL: &str = "gateway-dns-health-check";

/// The prober's settings: the annotations' defaults and how many probes may run at once.
#[derive(Clone, Debug)]
pub struct HealthConfig {
    pub defaults: Defaults,
    pub concurrency: usize,
}

/// One target: a published IP address of a Gateway, the name its probes carry, and how they go.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Target {
    /// `namespace/name` of the Gateway.
    pub gateway: Box<str>,
    pub address: IpAddr,
    /// Host and SNI of its probes: a name published through the Gateway.
    pub host: String,
    pub spec: CheckSpec,
}

impl Target {
    fn key(&self) -> (Box<str>, IpAddr) {
        (self.gateway.clone(), self.address)
    }
}

/// An annotated object whose annotations cannot be used: it is not probed.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BadSpec {
    /// `Kind/namespace/name`.
    pub object: String,
    pub error: SpecError,
}

/// What a Gateway's names and addresses are, gathered over the claims through it.
#[derive(Default)]
struct Published {
    names: BTreeSet<String>,
    addresses: BTreeSet<IpAddr>,
    listener_sets: BTreeSet<Box<str>>,
}

/// The targets of `world`: for every Gateway with a name published through it and a check
/// asked by its annotations (else by one of its ListenerSets', the first by name), each of its
/// IP addresses the address filters keep (`--target-cidr`, `--exclude-target-cidr`). Hostname
/// targets are not probed: where they lead is another DNS name's business.
pub fn targets<W: World>(world: &W, defaults: &Defaults) -> (Vec<Target>, Vec<BadSpec>) {
    let filter = &world.config().scope.targets;
    let mut published: BTreeMap<&str, Published> = BTreeMap::new();
    for (_, entry) in world.routes() {
        if !entry.eval.in_scope {
            continue;
        }
        for claim in entry.eval.claims.iter() {
            let origin = &claim.origin;
            let gateway = published.entry(&origin.gateway).or_default();
            gateway.names.insert(claim.name.to_string());
            if let Some(listener_set) = &origin.listener_set {
                gateway.listener_sets.insert(listener_set.clone());
            }
            gateway
                .addresses
                .extend(origin.targets.iter().filter_map(|target| match target {
                    Address::Ip(ip) if filter.keeps(target) => Some(*ip),
                    _ => None,
                }));
        }
    }
    let mut targets = Vec::new();
    let mut bad = Vec::new();
    for (gateway, published) in published {
        if published.addresses.is_empty() {
            continue;
        }
        let Some((object, read)) = spec_of(world, gateway, &published, defaults) else {
            continue;
        };
        let spec = match read {
            Ok(spec) => spec,
            Err(error) => {
                bad.push(BadSpec { object, error });
                continue;
            }
        };
        let Some(host) = host_of(&published.names) else {
            continue;
        };
        targets.extend(published.addresses.iter().map(|address| Target {
            gateway: gateway.into(),
            address: *address,
            host: host.clone(),
            spec: spec.clone(),
        }));
    }
    (targets, bad)
}

/// The check of a Gateway: its own annotations, else the first annotated ListenerSet's among
/// those its names come through; with the object it was read from.
fn spec_of<W: World>(
    world: &W,
    gateway: &str,
    published: &Published,
    defaults: &Defaults,
) -> Option<(String, Result<CheckSpec, SpecError>)> {
    let (namespace, name) = gateway.split_once('/')?;
    if let Some(found) = world
        .gateway(namespace, name)
        .and_then(|gw| spec::read(&gw.meta.annotations, defaults))
    {
        return Some((format!("Gateway/{gateway}"), found));
    }
    published.listener_sets.iter().find_map(|key| {
        let (namespace, name) = key.split_once('/')?;
        let listener_set = world.listener_set(namespace, name)?;
        let found = spec::read(&listener_set.meta.annotations, defaults)?;
        Some((format!("ListenerSet/{key}"), found))
    })
}

/// The Host of a Gateway's probes: its first exact name, else its first wildcard with `*`
/// replaced by [`WILDCARD_LABEL`].
fn host_of(names: &BTreeSet<String>) -> Option<String> {
    names
        .iter()
        .find(|n| !n.starts_with("*."))
        .cloned()
        .or_else(|| {
            names
                .iter()
                .next()
                .and_then(|n| n.strip_prefix('*'))
                .map(|suffix| format!("{WILDCARD_LABEL}{suffix}"))
        })
}

/// One target's probe history, with hysteresis: it changes state only after its threshold of
/// results in a row that disagree with it, so a target that fails and passes by turns changes
/// nothing, and a steady change is one change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetState {
    /// Set while the target is unhealthy: since when and the error that made it so.
    pub unhealthy: Option<Unhealthy>,
    /// Results in a row that disagree with the state.
    pub streak: u32,
    /// The latest probe's error, if it failed.
    pub last_error: Option<String>,
}

/// What one probe result did to a target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    None,
    BecameUnhealthy,
    BecameHealthy,
}

impl Default for TargetState {
    /// A target starts healthy: no probe yet is no news.
    fn default() -> TargetState {
        TargetState {
            unhealthy: None,
            streak: 0,
            last_error: None,
        }
    }
}

impl TargetState {
    /// Records one probe's result at `now` (Unix seconds).
    pub fn record(&mut self, result: Result<(), String>, now: i64, spec: &CheckSpec) -> Change {
        let agrees = result.is_ok() == self.unhealthy.is_none();
        self.last_error = result.as_ref().err().cloned();
        if agrees {
            self.streak = 0;
            return Change::None;
        }
        self.streak = self.streak.saturating_add(1);
        match result {
            Err(error) if self.streak >= spec.failure_threshold => {
                self.streak = 0;
                self.unhealthy = Some(Unhealthy {
                    since: now,
                    error: error.into(),
                });
                Change::BecameUnhealthy
            }
            Ok(()) if self.streak >= spec.success_threshold => {
                self.streak = 0;
                self.unhealthy = None;
                Change::BecameHealthy
            }
            _ => Change::None,
        }
    }
}

/// A target's state and when it is probed next.
struct Tracked {
    target: Target,
    state: TargetState,
    due: Instant,
}

/// Probes while this replica holds the Lease (always without an election), and keeps the
/// failing targets on the Lease (`shared`) for the others. A replica that does not hold it
/// forgets every probe state and clears the gauges, and its index follows the failing targets
/// the Lease carries; a new holder starts from them, so a hand-over brings no failing target
/// back before it passes its success threshold.
pub async fn run(
    index: Index,
    metrics: Arc<Metrics>,
    config: HealthConfig,
    mut leader: Option<watch::Receiver<bool>>,
    shared: Option<Shared>,
    tls: tokio_rustls::TlsConnector,
    clock: Arc<dyn Fn() -> i64 + Send + Sync>,
) {
    let mut seen = shared.as_ref().map(Shared::seen);
    let mut following = false;
    let mut changes = index.subscribe();
    let mut tracked: HashMap<(Box<str>, IpAddr), Tracked> = HashMap::new();
    let mut reported: HashSet<BadSpec> = HashSet::new();
    let mut stale = true;
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let leading = leader.as_mut().is_none_or(|l| *l.borrow_and_update());
        if !leading {
            if !tracked.is_empty() {
                tracked.clear();
                metrics.set_target_health([]);
                tracing::info!("not the Lease holder: health checks stopped");
            }
            match seen.as_mut() {
                Some(seen) if !following || seen.has_changed().unwrap_or(false) => {
                    let text = seen
                        .borrow_and_update()
                        .get(FAILING_TARGETS_ANNOTATION)
                        .cloned()
                        .unwrap_or_default();
                    match TargetHealth::from_annotation(&text) {
                        Ok(health) => {
                            if index.set_target_health(health) {
                                tracing::debug!(
                                    "failing targets changed on the Lease; names follow"
                                );
                            }
                        }
                        Err(error) => {
                            tracing::warn!(%error, "the failing targets on the Lease cannot be read; the last ones read stay")
                        }
                    }
                }
                Some(_) => {}
                None => {
                    index.set_target_health(TargetHealth::new());
                }
            }
            following = true;
            stale = true;
            continue;
        }
        following = false;
        if stale || changes.has_changed().unwrap_or(false) {
            changes.borrow_and_update();
            stale = false;
            // A walk of every route: off the async threads.
            let (reader, defaults) = (index.clone(), config.defaults.clone());
            let Ok((current, bad)) = tokio::task::spawn_blocking(move || {
                reader.read(|snapshot| targets(snapshot, &defaults))
            })
            .await
            else {
                stale = true;
                continue;
            };
            for spec in &bad {
                if !reported.contains(spec) {
                    tracing::warn!(object = %spec.object, error = %spec.error, "health-check annotation not usable");
                }
            }
            reported = bad.into_iter().collect();
            let published = index.snapshot();
            follow(&mut tracked, current, published.target_health());
        }
        let now = Instant::now();
        let due: Vec<Target> = tracked
            .values_mut()
            .filter(|t| t.due <= now)
            .map(|t| {
                // On the schedule, not from now: ticks a hair late would otherwise stretch
                // every interval by a tick. Behind the schedule, one interval from now.
                let interval = t.target.spec.interval;
                let next = t.due + interval;
                t.due = if next > now { next } else { now + interval };
                t.target.clone()
            })
            .collect();
        if due.is_empty() {
            // Targets may have gone (a Gateway no longer annotated): what fails is set anew
            // each tick, and the index publishes only a change.
            publish(&index, &metrics, shared.as_ref(), &tracked);
            continue;
        }
        let results: Vec<(Target, Result<(), String>)> = futures::stream::iter(due)
            .map(|target| {
                let tls = &tls;
                async move {
                    let address = SocketAddr::new(target.address, target.spec.port);
                    let result = probe::probe(tls, address, &target.host, &target.spec)
                        .await
                        .map_err(|e| e.to_string());
                    (target, result)
                }
            })
            .buffer_unordered(config.concurrency.max(1))
            .collect()
            .await;
        let at = clock();
        for (target, result) in results {
            let Some(entry) = tracked.get_mut(&target.key()) else {
                continue;
            };
            match entry.state.record(result, at, &target.spec) {
                Change::None => {}
                Change::BecameUnhealthy => {
                    tracing::warn!(gateway = %target.gateway, target = %target.address, host = %target.host, error = entry.state.last_error.as_deref().unwrap_or_default(), "target failed its health checks; it leaves every name another healthy target serves");
                }
                Change::BecameHealthy => {
                    tracing::info!(gateway = %target.gateway, target = %target.address, "target passes its health checks again");
                }
            }
        }
        publish(&index, &metrics, shared.as_ref(), &tracked);
    }
}

/// Keeps the state of every target still wanted (a changed check or Host starts it afresh),
/// drops the others, and adds the new ones, due at once: failing if `published` says so (what
/// the Lease carried from the last holder), else healthy.
fn follow(
    tracked: &mut HashMap<(Box<str>, IpAddr), Tracked>,
    current: Vec<Target>,
    published: &TargetHealth,
) {
    let wanted: HashSet<(Box<str>, IpAddr)> = current.iter().map(Target::key).collect();
    tracked.retain(|key, _| wanted.contains(key));
    for target in current {
        let key = target.key();
        match tracked.get_mut(&key) {
            Some(entry) if entry.target == target => {}
            Some(entry) if entry.target.spec == target.spec => entry.target = target,
            _ => {
                let state = TargetState {
                    unhealthy: published
                        .unhealthy(&target.gateway, &Address::Ip(target.address))
                        .cloned(),
                    ..TargetState::default()
                };
                tracked.insert(
                    key,
                    Tracked {
                        target,
                        state,
                        due: Instant::now(),
                    },
                );
            }
        }
    }
}

/// Sets the failing targets on the index (which publishes only a change), on the Lease for the
/// other replicas, and the gauges.
fn publish(
    index: &Index,
    metrics: &Metrics,
    shared: Option<&Shared>,
    tracked: &HashMap<(Box<str>, IpAddr), Tracked>,
) {
    let mut health = TargetHealth::new();
    let mut gateways: BTreeMap<&str, bool> = BTreeMap::new();
    for entry in tracked.values() {
        let passing = gateways.entry(&entry.target.gateway).or_insert(true);
        if let Some(unhealthy) = &entry.state.unhealthy {
            *passing = false;
            health.set_unhealthy(
                &entry.target.gateway,
                Address::Ip(entry.target.address),
                unhealthy.clone(),
            );
        }
    }
    metrics.set_target_health(gateways);
    if let Some(shared) = shared {
        shared.keep(FAILING_TARGETS_ANNOTATION, health.to_annotation());
    }
    if index.set_target_health(health) {
        tracing::debug!("failing targets changed; names follow");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(failures: u32, successes: u32) -> CheckSpec {
        CheckSpec {
            failure_threshold: failures,
            success_threshold: successes,
            ..spec::read(
                &crate::model::StringMap::from_pairs([
                    (format!("{}protocol", spec::PREFIX), "tcp".to_owned()),
                    (format!("{}port", spec::PREFIX), "80".to_owned()),
                ]),
                &Defaults::default(),
            )
            .and_then(Result::ok)
            .unwrap()
        }
    }

    fn fail() -> Result<(), String> {
        Err("connection refused".to_owned())
    }

    #[test]
    fn a_target_changes_after_its_thresholds_in_a_row() {
        let spec = spec(3, 2);
        let mut state = TargetState::default();
        assert_eq!(state.record(fail(), 1, &spec), Change::None);
        assert_eq!(state.record(fail(), 2, &spec), Change::None);
        assert_eq!(state.record(fail(), 3, &spec), Change::BecameUnhealthy);
        let unhealthy = state.unhealthy.clone().unwrap();
        assert_eq!(
            (unhealthy.since, &*unhealthy.error),
            (3, "connection refused")
        );
        // Later failures keep the error that made it unhealthy.
        assert_eq!(
            state.record(Err("timeout".to_owned()), 4, &spec),
            Change::None
        );
        assert_eq!(
            state.unhealthy.as_ref().unwrap().error.as_ref(),
            "connection refused"
        );
        assert_eq!(state.last_error.as_deref(), Some("timeout"));
        assert_eq!(state.record(Ok(()), 5, &spec), Change::None);
        assert_eq!(state.record(Ok(()), 6, &spec), Change::BecameHealthy);
        assert_eq!(state, TargetState::default());
    }

    #[test]
    fn a_flapping_target_changes_nothing() {
        let spec = spec(2, 2);
        let mut state = TargetState::default();
        for at in 0..100 {
            let result = if at % 2 == 0 { fail() } else { Ok(()) };
            assert_eq!(state.record(result, at, &spec), Change::None, "probe {at}");
        }
        // Down for good: one change, then nothing while it stays down.
        let changes: Vec<Change> = (0..10).map(|at| state.record(fail(), at, &spec)).collect();
        assert_eq!(
            changes.iter().filter(|c| **c != Change::None).count(),
            1,
            "{changes:?}"
        );
    }

    fn world(annotations: serde_json::Value, cfg: crate::engine::Config) -> crate::index::Snapshot {
        let gateway = serde_json::json!({
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "Gateway",
            "metadata": {"name": "gw", "namespace": "infra", "annotations": annotations},
            "spec": {"gatewayClassName": "x", "listeners": [{"name": "http", "protocol": "HTTP", "port": 80}]},
            "status": {"addresses": [
                {"type": "IPAddress", "value": "10.0.0.1"},
                {"type": "IPAddress", "value": "192.0.2.1"},
                {"type": "Hostname", "value": "lb.example.net"}
            ]}
        });
        let route = serde_json::json!({
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "HTTPRoute",
            "metadata": {"name": "web", "namespace": "infra"},
            "spec": {"parentRefs": [{"name": "gw"}], "hostnames": ["b.example.com", "a.example.com"]}
        });
        let objects = [gateway, route]
            .iter()
            .map(|v| crate::model::decode_value(v).unwrap().unwrap())
            .collect::<Vec<_>>();
        crate::index::Snapshot::from_objects(Arc::new(cfg), objects)
    }

    #[test]
    fn every_published_ip_of_an_annotated_gateway_is_a_target() {
        let annotated = serde_json::json!({"gateway-dns.io/health-check-protocol": "http"});
        let (found, bad) = targets(
            &world(annotated.clone(), Default::default()),
            &Defaults::default(),
        );
        assert!(bad.is_empty());
        let seen: Vec<(&str, String, &str)> = found
            .iter()
            .map(|t| (&*t.gateway, t.address.to_string(), t.host.as_str()))
            .collect();
        assert_eq!(
            seen,
            [
                ("infra/gw", "10.0.0.1".to_owned(), "a.example.com"),
                ("infra/gw", "192.0.2.1".to_owned(), "a.example.com"),
            ],
            "IP addresses only, with the first name as Host"
        );

        // Only what --target-cidr keeps.
        let mut cfg = crate::engine::Config::default();
        cfg.scope.targets.include = vec!["10.0.0.0/8".parse().unwrap()];
        let (found, _) = targets(&world(annotated, cfg), &Defaults::default());
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].address.to_string(), "10.0.0.1");

        // Not annotated: nothing; badly annotated: nothing, and why.
        let (found, bad) = targets(
            &world(serde_json::json!({}), Default::default()),
            &Defaults::default(),
        );
        assert!(found.is_empty() && bad.is_empty());
        let wrong = serde_json::json!({"gateway-dns.io/health-check-protocol": "icmp"});
        let (found, bad) = targets(&world(wrong, Default::default()), &Defaults::default());
        assert!(found.is_empty());
        assert_eq!(bad.len(), 1);
        assert_eq!(bad[0].object, "Gateway/infra/gw");
        assert_eq!(bad[0].error.annotation, "protocol");
    }

    #[test]
    fn hosts_are_exact_names_first() {
        let names = |list: &[&str]| list.iter().map(|s| s.to_string()).collect();
        assert_eq!(
            host_of(&names(&["*.a.example", "b.example"])).as_deref(),
            Some("b.example")
        );
        assert_eq!(
            host_of(&names(&["*.a.example"])).as_deref(),
            Some("gateway-dns-health-check.a.example")
        );
        assert_eq!(host_of(&BTreeSet::new()), None);
    }
}
