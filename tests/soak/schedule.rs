//! The seeded schedule: ordinary changes through the API server (routes created, changed,
//! moved between Gateways and deleted over a small pool of hostnames, so that names are shared
//! and contested; Gateway addresses and listeners changed; Namespace ownership annotations and
//! mode labels changed; a ListenerSet attached and detached), with a fault injected every so
//! often in the middle of them and healed a few operations later. After each fault is healed
//! the run waits for a quiet point, where the checker compares DNS with the offline oracle.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::Settings;
use crate::checker::Checked;
use crate::world::{
    self, Fault, GATEWAYS, GROUP, LISTENER_SET, TEAMS, World, address_of, gateway,
    gateway_resource, listener_set, listener_set_resource, namespace_resource, route_resource,
};

/// A small deterministic generator (xorshift64*): the same seed, the same schedule.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

const HOSTNAMES: usize = 16;
const ROUTES: usize = 30;
/// Operations between a fault's injection and its healing.
const FAULT_SPAN: usize = 6;
/// How long a quiet point may take after a fault is healed (a Lease to expire, BIND to come
/// back, a relist): generous for a loaded two-core machine.
const QUIET_LIMIT: Duration = Duration::from_secs(90);

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum OpKind {
    CreateRoute,
    ChangeHostnames,
    MoveRoute,
    DeleteRoute,
    GatewayAddresses,
    GatewayListener,
    NamespaceOwnership,
    NamespaceMode,
    ListenerSet,
}

/// Where a route is attached.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Parent {
    Gateway(usize),
    ListenerSet,
}

impl Parent {
    fn key(&self) -> String {
        match self {
            Parent::Gateway(i) => format!("gateway/infra/{}", GATEWAYS[*i]),
            Parent::ListenerSet => format!("listenerset/infra/{LISTENER_SET}"),
        }
    }

    fn reference(&self) -> Value {
        match self {
            Parent::Gateway(i) => json!({"name": GATEWAYS[*i], "namespace": "infra"}),
            Parent::ListenerSet => json!({"group": GROUP, "kind": "ListenerSet",
                                          "name": LISTENER_SET, "namespace": "infra"}),
        }
    }
}

#[derive(Clone, Debug)]
struct RouteModel {
    hostnames: Vec<usize>,
    parent: Parent,
}

impl RouteModel {
    fn names(&self) -> Vec<String> {
        self.hostnames.iter().map(|h| hostname(*h)).collect()
    }
}

fn route_namespace(index: usize) -> &'static str {
    TEAMS[index % TEAMS.len()]
}

fn route_key(index: usize) -> String {
    format!("httproute/{}/r{index}", route_namespace(index))
}

fn hostname(index: usize) -> String {
    format!("h{index}.{}", world::ZONE)
}

fn route_object(index: usize, model: &RouteModel) -> Value {
    let hostnames = model.names();
    json!({
        "apiVersion": format!("{GROUP}/v1"), "kind": "HTTPRoute",
        "metadata": {"namespace": route_namespace(index), "name": format!("r{index}")},
        "spec": {"parentRefs": [model.parent.reference()], "hostnames": hostnames},
    })
}

/// What the run did, for the report.
#[derive(Default)]
pub struct Report {
    pub ops: BTreeMap<OpKind, usize>,
    pub denied: usize,
    pub failed: usize,
    pub faults: BTreeMap<Fault, usize>,
    /// From each fault's healing to the quiet point after it (None: the end of the run).
    pub convergence: Vec<(Duration, Option<Fault>)>,
}

impl Report {
    pub fn ops_done(&self) -> usize {
        self.ops.values().sum()
    }

    pub fn faults_done(&self) -> usize {
        self.faults.values().sum()
    }

    pub fn render(&self, checked: &Checked, took: Duration) -> String {
        let mut sorted: Vec<Duration> = self.convergence.iter().map(|(took, _)| *took).collect();
        sorted.sort();
        let at = |q: f64| -> String {
            if sorted.is_empty() {
                return "-".into();
            }
            let i = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len()) - 1;
            format!("{:.2} s", sorted[i].as_secs_f64())
        };
        let mut out = format!("soak report ({:.0} s)\n", took.as_secs_f64());
        out += &format!(
            "  operations: {} ({} denied by the webhook, {} failed under a fault)\n",
            self.ops_done(),
            self.denied,
            self.failed
        );
        for (kind, count) in &self.ops {
            out += &format!("    {kind:?}: {count}\n");
        }
        out += &format!("  faults: {}\n", self.faults_done());
        for (kind, count) in &self.faults {
            out += &format!("    {kind:?}: {count}\n");
        }
        out += &format!(
            "  invariant checks: {} over {} zone samples and {} quiet points; writer runs {} \
             over {} Lease terms; flaps {}; violations {}\n",
            checked.checks,
            checked.samples,
            checked.quiet_points,
            checked.writer_runs,
            checked.holder_terms,
            checked.flaps,
            checked.violations.len()
        );
        out += &format!(
            "  last fault healed → quiet point: p50 {}, p99 {} (over {})\n",
            at(0.5),
            at(0.99),
            sorted.len()
        );
        let mut slowest: BTreeMap<Fault, Duration> = BTreeMap::new();
        for (took, fault) in &self.convergence {
            if let Some(fault) = fault {
                let max = slowest.entry(*fault).or_default();
                *max = (*max).max(*took);
            }
        }
        let slowest: Vec<String> = slowest
            .iter()
            .map(|(fault, took)| format!("{fault:?} {:.2} s", took.as_secs_f64()))
            .collect();
        out += &format!("    slowest after each fault: {}\n", slowest.join(", "));
        out
    }
}

pub struct Schedule {
    rng: Rng,
    ops: usize,
    fault_every: usize,
    routes: BTreeMap<usize, RouteModel>,
    listener_set: bool,
    addresses: [Vec<String>; 3],
    narrow_listener: bool,
    /// The hostnames each team's Namespace owns by annotation.
    owned: BTreeMap<&'static str, Vec<String>>,
    report: Report,
}

impl Schedule {
    pub fn new(rng: Rng, settings: &Settings) -> Schedule {
        Schedule {
            rng,
            ops: settings.ops,
            fault_every: (settings.ops / settings.faults.max(1)).max(FAULT_SPAN + 1),
            routes: BTreeMap::new(),
            listener_set: false,
            addresses: std::array::from_fn(|i| vec![address_of(i, 0)]),
            narrow_listener: false,
            owned: BTreeMap::new(),
            report: Report::default(),
        }
    }

    pub async fn run(&mut self, world: &mut World, deadline: Instant) -> Report {
        let started = Instant::now();
        let mut pending: Option<(usize, world::Undo, Fault)> = None;
        for op in 0..self.ops {
            if Instant::now() >= deadline {
                break;
            }
            if pending.is_none() && op % self.fault_every == self.fault_every / 2 {
                let fault = Fault::ALL[self.rng.below(Fault::ALL.len())];
                let undo = world.inject(fault, self.rng.below(3)).await;
                if trace() {
                    eprintln!("soak {}: fault {fault:?}", crate::schedule::clock());
                }
                *self.report.faults.entry(fault).or_default() += 1;
                pending = Some((op + FAULT_SPAN, undo, fault));
            }
            self.step(world).await;
            if op > 0 && op % 500 == 0 {
                eprintln!(
                    "soak: {op} operations, {} faults, {:.0} s",
                    self.report.faults_done(),
                    started.elapsed().as_secs_f64()
                );
            }
            if let Some((heal_at, _, _)) = &pending
                && op >= *heal_at
            {
                let (_, undo, fault) = pending.take().expect("a pending fault");
                world.undo(undo).await;
                if trace() {
                    eprintln!("soak {}: healed {fault:?}", crate::schedule::clock());
                }
                if let Some(took) = world.quiesce(QUIET_LIMIT).await {
                    self.report.convergence.push((took, Some(fault)));
                }
            }
        }
        if let Some((_, undo, _)) = pending.take() {
            world.undo(undo).await;
        }
        if let Some(took) = world.quiesce(QUIET_LIMIT).await {
            self.report.convergence.push((took, None));
        }
        std::mem::take(&mut self.report)
    }

    /// One operation, chosen at random among those that make sense now.
    async fn step(&mut self, world: &mut World) {
        let roll = self.rng.below(100);
        let kind = match roll {
            0..30 => OpKind::CreateRoute,
            30..48 => OpKind::ChangeHostnames,
            48..62 => OpKind::MoveRoute,
            62..76 => OpKind::DeleteRoute,
            76..84 => OpKind::GatewayAddresses,
            84..87 => OpKind::GatewayListener,
            87..92 => OpKind::NamespaceOwnership,
            92..95 => OpKind::NamespaceMode,
            _ => OpKind::ListenerSet,
        };
        let client = world.client.clone();
        // A route version sent to the API server: the route and its hostnames.
        let mut offered: Option<(String, Vec<String>)> = None;
        let result: Result<Vec<String>, kube::Error> = match kind {
            OpKind::CreateRoute => {
                let index = self.rng.below(ROUTES);
                let model = RouteModel {
                    hostnames: self.some_hostnames(),
                    parent: self.some_parent(index),
                };
                let object = route_object(index, &model);
                offered = Some((route_key(index), model.names()));
                let created = world::apply(&client, "soak-route", &route_resource(), &object).await;
                match created {
                    Ok(()) => {
                        let mut keys = vec![route_key(index), model.parent.key()];
                        if let Some(old) = self.routes.insert(index, model) {
                            keys.push(old.parent.key());
                        }
                        Ok(keys)
                    }
                    Err(error) => {
                        // Denied, and not there: a create the webhook refused. (A call that
                        // failed under a fault may have been applied all the same, so the
                        // schedule's own record of what exists is not proof.)
                        if denied(&error)
                            && !world::exists(
                                &client,
                                &route_resource(),
                                route_namespace(index),
                                &format!("r{index}"),
                            )
                            .await
                        {
                            world.checker.denied(route_key(index));
                        }
                        Err(error)
                    }
                }
            }
            OpKind::ChangeHostnames | OpKind::MoveRoute => {
                let Some(index) = self.some_route() else {
                    return;
                };
                let mut model = self.routes[&index].clone();
                if kind == OpKind::ChangeHostnames {
                    model.hostnames = self.some_hostnames();
                } else {
                    model.parent = self.some_parent(index);
                }
                let object = route_object(index, &model);
                offered = Some((route_key(index), model.names()));
                world::apply(&client, "soak-route", &route_resource(), &object)
                    .await
                    .map(|()| {
                        let old = self.routes.insert(index, model.clone());
                        let mut keys = vec![route_key(index), model.parent.key()];
                        keys.extend(old.map(|o| o.parent.key()));
                        keys
                    })
            }
            OpKind::DeleteRoute => {
                let Some(index) = self.some_route() else {
                    return;
                };
                world::delete(
                    &client,
                    &route_resource(),
                    route_namespace(index),
                    &format!("r{index}"),
                )
                .await
                .map(|()| {
                    let old = self.routes.remove(&index);
                    let mut keys = vec![route_key(index)];
                    keys.extend(old.map(|o| o.parent.key()));
                    keys
                })
            }
            OpKind::GatewayAddresses => {
                let index = self.rng.below(GATEWAYS.len());
                let count = 1 + self.rng.below(2);
                let addresses: Vec<String> = (0..count)
                    .map(|_| address_of(index, self.rng.below(150) as u8))
                    .collect();
                world::set_addresses(&client, GATEWAYS[index], &addresses)
                    .await
                    .map(|()| {
                        self.addresses[index] = addresses;
                        vec![format!("gateway/infra/{}", GATEWAYS[index])]
                    })
            }
            OpKind::GatewayListener => {
                // gw2's listener narrows to names no route asks for, and widens again.
                self.narrow_listener = !self.narrow_listener;
                let hostname = if self.narrow_listener {
                    "*.narrow.example.com"
                } else {
                    "*.example.com"
                };
                world::apply(
                    &client,
                    "soak-listener",
                    &gateway_resource(),
                    &gateway("gw2", hostname),
                )
                .await
                .map(|()| vec!["gateway/infra/gw2".to_string()])
            }
            OpKind::NamespaceOwnership => {
                let team = TEAMS[self.rng.below(TEAMS.len())];
                // Left out, the annotation this field manager set goes.
                let mut metadata = json!({"name": team});
                let mut owned = Vec::new();
                if self.rng.chance(50) {
                    let first = self.rng.below(HOSTNAMES);
                    owned = vec![hostname(first), hostname((first + 1) % HOSTNAMES)];
                    metadata["annotations"] =
                        json!({"gateway-dns.io/allowed-hostnames": owned.join(",")});
                }
                let object = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": metadata});
                world::apply(&client, "soak-ownership", &namespace_resource(), &object)
                    .await
                    .map(|()| {
                        // The names it owned before and owns now change hands.
                        let before = self.owned.insert(team, owned.clone()).unwrap_or_default();
                        let mut keys = vec![format!("namespace/{team}")];
                        keys.extend(before.iter().chain(&owned).map(|h| format!("hostname/{h}")));
                        keys
                    })
            }
            OpKind::NamespaceMode => {
                let team = TEAMS[self.rng.below(TEAMS.len())];
                let mode = ["enforce", "warn", "audit"][self.rng.below(3)];
                let object = json!({"apiVersion": "v1", "kind": "Namespace",
                                    "metadata": {"name": team,
                                                 "labels": {"gateway-dns.io/mode": mode}}});
                world::apply(&client, "soak-mode", &namespace_resource(), &object)
                    .await
                    .map(|()| vec![format!("namespace/{team}")])
            }
            OpKind::ListenerSet => {
                let keys = vec![
                    format!("listenerset/infra/{LISTENER_SET}"),
                    "gateway/infra/gw1".to_string(),
                ];
                if self.listener_set {
                    world::delete(&client, &listener_set_resource(), "infra", LISTENER_SET)
                        .await
                        .map(|()| {
                            self.listener_set = false;
                            keys
                        })
                } else {
                    world::apply(
                        &client,
                        "soak-listener-set",
                        &listener_set_resource(),
                        &listener_set(),
                    )
                    .await
                    .map(|()| {
                        self.listener_set = true;
                        keys
                    })
                }
            }
        };
        if let Some((route, names)) = offered
            && !matches!(&result, Err(error) if denied(error))
        {
            // Accepted, or failed under a fault and so perhaps applied all the same.
            world.checker.accepted(route, names);
        }
        if let Err(error) = &result
            && !denied(error)
        {
            self.reread_routes(world).await;
        }
        *self.report.ops.entry(kind).or_default() += 1;
        if trace() {
            eprintln!("soak {}: op {kind:?}: {result:?}", crate::schedule::clock());
        }
        match result {
            Ok(keys) => world.checker.touched(keys),
            Err(error) if denied(&error) => self.report.denied += 1,
            Err(_) => self.report.failed += 1,
        }
    }

    /// After a call that failed under a fault (it may have been applied all the same), the
    /// routes the schedule believes exist are those the API server has, once it answers.
    async fn reread_routes(&mut self, world: &World) {
        let api: kube::Api<kube::api::DynamicObject> =
            kube::Api::all_with(world.client.clone(), &route_resource());
        let Ok(list) = api.list(&Default::default()).await else {
            return;
        };
        let existing: std::collections::BTreeSet<String> = list
            .items
            .iter()
            .filter_map(|route| route.metadata.name.clone())
            .collect();
        self.routes
            .retain(|index, _| existing.contains(&format!("r{index}")));
    }

    fn some_hostnames(&mut self) -> Vec<usize> {
        let count = 1 + self.rng.below(2);
        let mut hostnames: Vec<usize> = (0..count).map(|_| self.rng.below(HOSTNAMES)).collect();
        hostnames.sort();
        hostnames.dedup();
        hostnames
    }

    fn some_parent(&mut self, index: usize) -> Parent {
        // Routes of team-c may attach through the ListenerSet (when it is there or not).
        if route_namespace(index) == "team-c" && self.rng.chance(30) {
            Parent::ListenerSet
        } else {
            Parent::Gateway(self.rng.below(GATEWAYS.len()))
        }
    }

    fn some_route(&mut self) -> Option<usize> {
        let existing: Vec<usize> = self.routes.keys().copied().collect();
        (!existing.is_empty()).then(|| existing[self.rng.below(existing.len())])
    }
}

/// The webhook's denial, as the API server returns it.
fn denied(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.message.contains("denied the request"))
}

/// `GATEWAY_DNS_SOAK_TRACE=1` prints every operation and fault as it happens.
/// The time of day (UTC) to the millisecond, as serve's logs give it, to line the trace up with
/// them.
pub fn clock() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let (secs, millis) = (now.as_secs() % 86_400, now.subsec_millis());
    format!(
        "{:02}:{:02}:{:02}.{millis:03}",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

pub fn trace() -> bool {
    std::env::var_os("GATEWAY_DNS_SOAK_TRACE").is_some_and(|v| v == "1")
}
