//! The independent checker. It reads only what an outsider can: the zone by AXFR, BIND's log,
//! the Lease, the API server's objects, and `gateway-dns check` run offline over a dump of them.
//! It checks:
//!
//! 1. no name ever holds the addresses of two Gateways (each Gateway's addresses come from a
//!    range of its own; the soak configures no shared names), sampled all along;
//! 2. no foreign record is ever changed or removed, sampled all along;
//! 3. at each quiet point the zone equals what `gateway-dns check` computes offline over a dump
//!    of the cluster's objects (`World::quiesce`);
//! 4. a route the webhook denied (and that was never created since) never owns a name, but
//!    for those an earlier version may hold until its deletion is confirmed;
//! 5. a name's owner route changes, or the name goes, only after an operation touched the
//!    owner, the new owner, their namespaces or their parents, or gave the name to a Namespace,
//!    since the owner took the name: anything else is a flap, and the count must be 0;
//! 6. the writers of the UPDATEs in BIND's log, in BIND's order, follow the Lease's holders in
//!    theirs: two replicas never write in one Lease term;
//! 7. at each quiet point every live replica's index holds what the API server holds
//!    (`World::quiesce`).

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use serde_json::Value;

use crate::schedule::Report;
use crate::support::bind::{Bind, KEY_NAME, SECRET};
use crate::support::dig::{self, Rr};
use crate::support::records::FOREIGN;
use crate::world::{LEASE_NAME, LEASE_NAMESPACE, ZONE, gateway_of};

/// The key a fault that may lose DNS data touches: it explains a name that goes.
pub const DNS_LOST: &str = "fault/dns-lost";

/// The owner id serve writes with (`--txt-owner-id`'s default).
const OWNER: &str = "default";
/// How often the zone and the Lease are sampled.
const SAMPLE_EVERY: Duration = Duration::from_millis(300);
const LEASE_EVERY: Duration = Duration::from_millis(100);

/// One operation of the schedule as the checker needs it: what it touched.
#[derive(Debug, Clone)]
pub struct Touch {
    pub keys: Vec<String>,
}

#[derive(Debug)]
struct Owned {
    resource: String,
    /// The operation that may have given the name to this owner: the last one on the route
    /// before the owner was first seen (operations logged by then, if none).
    since: usize,
}

#[derive(Default)]
struct State {
    samples: usize,
    checks: usize,
    violations: Vec<String>,
    flaps: usize,
    owners: BTreeMap<String, Owned>,
    /// The Lease's holders in order (consecutive repeats collapsed).
    holders: Vec<String>,
    touches: Vec<Touch>,
    /// Routes (`httproute/ns/name`) denied at creation and not created since.
    denied: BTreeSet<String>,
    /// The hostnames of each route's versions the API server took (or may have taken) since
    /// the last quiet point: a route deleted and then denied may still own these in DNS while
    /// its deletion is confirmed (absence is not deletion), but no other.
    accepted: BTreeMap<String, BTreeSet<String>>,
    quiet_points: usize,
}

pub struct Checker {
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
    sampler: Option<std::thread::JoinHandle<()>>,
    lease: Option<tokio::task::JoinHandle<()>>,
}

/// What the checker found, for the report.
#[derive(Debug, Default)]
pub struct Checked {
    pub samples: usize,
    pub checks: usize,
    pub flaps: usize,
    pub quiet_points: usize,
    pub writer_runs: usize,
    pub holder_terms: usize,
    pub violations: Vec<String>,
}

impl Checked {
    pub fn absorb(&mut self, report: &Report) {
        if report.ops_done() == 0 {
            self.violations.push("no operation ran".into());
        }
    }
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

impl Checker {
    pub fn start(bind: &Bind, client: kube::Client) -> Checker {
        let state = Arc::new(Mutex::new(State::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let sampler = {
            let (state, stop, addr) = (state.clone(), stop.clone(), bind.addr());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    // BIND may be down (a fault): a transfer that fails is no sample.
                    if let Ok(zone) = transfer_from(addr) {
                        sample(&mut lock(&state), &zone);
                    }
                    std::thread::sleep(SAMPLE_EVERY);
                }
            })
        };
        let lease = {
            let (state, stop) = (state.clone(), stop.clone());
            tokio::spawn(async move {
                let leases: Api<Lease> = Api::namespaced(client, LEASE_NAMESPACE);
                while !stop.load(Ordering::Relaxed) {
                    if let Ok(lease) = leases.get(LEASE_NAME).await
                        && let Some(holder) = lease.spec.and_then(|s| s.holder_identity)
                    {
                        let mut state = lock(&state);
                        if state.holders.last() != Some(&holder) {
                            state.holders.push(holder);
                        }
                    }
                    tokio::time::sleep(LEASE_EVERY).await;
                }
            })
        };
        Checker {
            state,
            stop,
            sampler: Some(sampler),
            lease: Some(lease),
        }
    }

    pub async fn holder_now(&self, client: &kube::Client) -> Option<String> {
        let leases: Api<Lease> = Api::namespaced(client.clone(), LEASE_NAMESPACE);
        leases.get(LEASE_NAME).await.ok()?.spec?.holder_identity
    }

    /// Logs an operation that succeeded, with what it touched.
    pub fn touched(&self, keys: Vec<String>) {
        let mut state = lock(&self.state);
        for key in &keys {
            state.denied.remove(key);
        }
        state.touches.push(Touch { keys });
    }

    /// A route the webhook denied at creation.
    pub fn denied(&self, route: String) {
        lock(&self.state).denied.insert(route);
    }

    /// A version of `route` with `names` that the API server took, or may have taken.
    pub fn accepted(&self, route: String, names: Vec<String>) {
        lock(&self.state)
            .accepted
            .entry(route)
            .or_default()
            .extend(names);
    }

    pub fn violation(&self, what: String) {
        lock(&self.state).violations.push(what);
    }

    /// DNS equals the oracle: what routes may own is what they have now (`routes`: each
    /// route's key and hostnames, as the API server holds them; None when it did not answer).
    pub fn quiet_point(&self, routes: Option<BTreeMap<String, BTreeSet<String>>>) {
        let mut state = lock(&self.state);
        if let Some(routes) = routes {
            state.accepted = routes;
        }
        state.quiet_points += 1;
        state.checks += 2;
    }

    /// Stops sampling and checks BIND's writers against the Lease's holders.
    pub fn stop(&mut self, bind: &Bind) -> Checked {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(sampler) = self.sampler.take() {
            let _ = sampler.join();
        }
        if let Some(lease) = self.lease.take() {
            lease.abort();
        }
        let log = std::fs::read_to_string(bind.log_path()).unwrap_or_default();
        let writers = writer_runs(&log);
        let mut state = lock(&self.state);
        state.checks += 1;
        if !follows(&writers, &state.holders) {
            let violation = format!(
                "BIND's writers {writers:?} do not follow the Lease's holders {:?}",
                state.holders
            );
            state.violations.push(violation);
        }
        if state.flaps > 0 {
            let flaps = state.flaps;
            state.violations.push(format!("{flaps} flap(s)"));
        }
        Checked {
            samples: state.samples,
            checks: state.checks,
            flaps: state.flaps,
            quiet_points: state.quiet_points,
            writer_runs: writers.len(),
            holder_terms: state.holders.len(),
            violations: std::mem::take(&mut state.violations),
        }
    }
}

/// Checks one sample of the zone (invariants 1, 2, 4 and 5).
fn sample(state: &mut State, zone: &[Rr]) {
    state.samples += 1;
    state.checks += 4;
    let foreign: BTreeSet<String> = FOREIGN
        .iter()
        .map(|(label, _, _)| format!("{label}.{ZONE}"))
        .collect();
    for (label, rtype, data) in FOREIGN {
        let name = format!("{label}.{ZONE}");
        let found: Vec<&Rr> = zone
            .iter()
            .filter(|rr| rr.name.trim_end_matches('.') == name && rr.rtype == rtype)
            .collect();
        if found.len() != 1 || found[0].data.trim_matches('"') != data {
            let violation = format!("foreign record {name} {rtype} {data:?} is now {found:?}");
            state.violations.push(violation);
        }
    }
    let mut addresses: BTreeMap<String, BTreeSet<usize>> = BTreeMap::new();
    let mut owners: BTreeMap<String, String> = BTreeMap::new();
    for rr in zone {
        let name = rr.name.trim_end_matches('.').to_string();
        if foreign.contains(&name) {
            continue;
        }
        match rr.rtype.as_str() {
            "A" => {
                if let Some(gateway) = gateway_of(&rr.data) {
                    addresses.entry(name).or_default().insert(gateway);
                }
            }
            "TXT" => {
                if let Some((covered, resource)) = ownership(&name, &rr.data) {
                    owners.insert(covered, resource);
                }
            }
            _ => {}
        }
    }
    for (name, gateways) in &addresses {
        if gateways.len() > 1 {
            let violation = format!("{name} holds the addresses of Gateways {gateways:?}");
            state.violations.push(violation);
        }
    }
    for (name, resource) in &owners {
        let leftover = state
            .accepted
            .get(resource)
            .is_some_and(|names| names.contains(name));
        if state.denied.contains(resource) && !leftover {
            let violation = format!("{name} is owned by {resource}, which the webhook denied");
            state.violations.push(violation);
        }
    }
    let touched = state.touches.len();
    let previous = std::mem::take(&mut state.owners);
    for (name, before) in &previous {
        let now = owners.get(name);
        if now == Some(&before.resource) {
            continue;
        }
        let mut keys = related(&state.touches, &before.resource);
        // A Namespace that takes a hostname for itself takes it from routes elsewhere.
        keys.insert(format!("hostname/{name}"));
        if now.is_none() {
            keys.insert(DNS_LOST.to_string());
        }
        if let Some(now) = now {
            keys.extend(related(&state.touches, now));
        }
        let explained = state.touches[before.since.min(touched)..]
            .iter()
            .any(|touch| touch.keys.iter().any(|k| keys.contains(k)));
        if std::env::var_os("GATEWAY_DNS_SOAK_TRACE").is_some_and(|v| v == "1") {
            eprintln!(
                "soak {}: sample {}: {name} {} -> {now:?} (explained: {explained}; operations {}..{touched})",
                crate::schedule::clock(),
                state.samples,
                before.resource,
                before.since
            );
        }
        if !explained {
            state.flaps += 1;
            let violation = format!(
                "flap: {name} went from {} to {now:?} with no operation on either since",
                before.resource
            );
            state.violations.push(violation);
        }
    }
    for (name, resource) in owners {
        // DNS follows the API late: a name seen with a new owner now may stand for an operation
        // on that route logged before this sample, and a later one may already have undone it.
        let since = match previous.get(&name) {
            Some(before) if before.resource == resource => before.since,
            _ => state
                .touches
                .iter()
                .rposition(|t| t.keys.contains(&resource))
                .unwrap_or(touched),
        };
        state.owners.insert(name, Owned { resource, since });
    }
}

/// A route's key, its namespace, and every parent any operation gave it.
fn related(touches: &[Touch], resource: &str) -> BTreeSet<String> {
    let mut keys = BTreeSet::from([resource.to_string()]);
    if let Some(namespace) = resource.split('/').nth(1) {
        keys.insert(format!("namespace/{namespace}"));
    }
    for touch in touches
        .iter()
        .filter(|t| t.keys.iter().any(|k| k == resource))
    {
        keys.extend(
            touch
                .keys
                .iter()
                .filter(|k| k.starts_with("gateway/") || k.starts_with("listenerset/"))
                .cloned(),
        );
    }
    keys
}

/// The name an ownership TXT record of ours covers, and its resource label.
fn ownership(name: &str, data: &str) -> Option<(String, String)> {
    let value = data.trim_matches('"');
    let mut owner = None;
    let mut resource = None;
    for label in value.split(',') {
        if let Some(o) = label.strip_prefix("external-dns/owner=") {
            owner = Some(o);
        }
        if let Some(r) = label.strip_prefix("external-dns/resource=") {
            resource = Some(r);
        }
    }
    if owner? != OWNER {
        return None;
    }
    let covered = name.strip_prefix("a-")?;
    Some((covered.to_string(), resource?.to_string()))
}

/// Writers of the UPDATEs BIND logged, in its order, consecutive repeats collapsed.
fn writer_runs(log: &str) -> Vec<String> {
    let mut runs: Vec<String> = Vec::new();
    for line in log.lines().filter(|l| l.contains("updating zone")) {
        let Some(after) = line.split("/key ").nth(1) else {
            continue;
        };
        let key = after.split(':').next().unwrap_or("").trim().to_string();
        if runs.last() != Some(&key) {
            runs.push(key);
        }
    }
    runs
}

/// Whether `writers` is a subsequence of `holders`: each run of writes lies in a term of its
/// writer, in order.
fn follows(writers: &[String], holders: &[String]) -> bool {
    let mut holders = holders.iter();
    writers
        .iter()
        .all(|writer| holders.any(|holder| holder == writer))
}

/// The zone by AXFR, signed with the key; an error when BIND does not answer it.
pub fn transfer(bind: &Bind) -> Result<Vec<Rr>, String> {
    transfer_from(bind.addr())
}

fn transfer_from(addr: std::net::SocketAddr) -> Result<Vec<Rr>, String> {
    let output = Command::new("dig")
        .arg(format!("@{}", addr.ip()))
        .args(["-p", &addr.port().to_string()])
        .args(["-y", &format!("hmac-sha256:{KEY_NAME}:{SECRET}")])
        .args(["+noall", "+answer", "+time=2", "+tries=1"])
        .arg(ZONE)
        .arg("AXFR")
        .output()
        .map_err(|e| format!("dig: {e}"))?;
    let text = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() || text.contains("Transfer failed") {
        return Err(format!("AXFR failed: {text}"));
    }
    let records = dig::parse(&format!(";; ANSWER SECTION:\n{text}")).answer;
    // A whole transfer begins and ends with the SOA; one cut short (BIND stopped in the middle)
    // would look like names gone.
    let soa = records.iter().filter(|rr| rr.rtype == "SOA").count();
    if soa < 2 || records.last().is_none_or(|rr| rr.rtype != "SOA") {
        return Err(format!("AXFR cut short: {text}"));
    }
    Ok(records)
}

/// Name → sorted A targets that `gateway-dns check` computes over the dump at `file`.
pub fn oracle(file: &std::path::Path) -> Result<BTreeMap<String, Vec<String>>, String> {
    let output = Command::new(env!("CARGO_BIN_EXE_gateway-dns"))
        .args(["check", "--output", "json", "--zone", ZONE])
        .arg(file)
        .output()
        .map_err(|e| format!("check: {e}"))?;
    let report: Value = serde_json::from_slice(&output.stdout).map_err(|e| {
        format!(
            "check printed no JSON ({e}): {}",
            String::from_utf8_lossy(&output.stderr)
        )
    })?;
    let mut records = BTreeMap::new();
    for record in report["records"].as_array().into_iter().flatten() {
        if record["recordType"] != "A" {
            continue;
        }
        let name = record["dnsName"].as_str().unwrap_or_default().to_string();
        let mut targets: Vec<String> = record["targets"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t.as_str().map(str::to_string))
            .collect();
        targets.sort();
        records.insert(name, targets);
    }
    Ok(records)
}

/// The zone's A records of ours equal `expected`.
pub fn compare(expected: &BTreeMap<String, Vec<String>>, zone: &[Rr]) -> Result<(), String> {
    let foreign: BTreeSet<String> = FOREIGN
        .iter()
        .map(|(label, _, _)| format!("{label}.{ZONE}"))
        .chain([format!("ns1.{ZONE}")])
        .collect();
    let mut actual: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for rr in zone.iter().filter(|rr| rr.rtype == "A") {
        let name = rr.name.trim_end_matches('.').to_string();
        if !foreign.contains(&name) {
            actual.entry(name).or_default().push(rr.data.clone());
        }
    }
    for targets in actual.values_mut() {
        targets.sort();
    }
    if &actual == expected {
        return Ok(());
    }
    let missing: Vec<_> = expected
        .iter()
        .filter(|(n, t)| actual.get(*n) != Some(t))
        .collect();
    let extra: Vec<_> = actual
        .iter()
        .filter(|(n, t)| expected.get(*n) != Some(t))
        .collect();
    Err(format!(
        "the zone differs from check's records: expected {missing:?}, found {extra:?}"
    ))
}
