//! Records and conflicts: settles every claimed name into DNS records and findings, over any
//! [`World`]. ("Plan" is kept for the DNS changes the sync loop makes.)

use std::net::IpAddr;

use serde::Serialize;

use std::borrow::Cow;
use std::collections::BTreeMap;

use super::claimants::{Claimant, claimants_among, precedence, route_ref};
use super::health::{TargetHealth, Unhealthy};
use super::hostname_ownership;
use super::world::{Origin, RawFinding, RouteEval, RouteId, World};
use super::zone;
use super::{Action, Config, ConflictResolution, Finding, Reason, concat};
use crate::model::{Address, RecordType, Route};

/// One DNS record set gateway-dns wants published (the `check` JSON shape).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    pub dns_name: String,
    pub record_type: RecordType,
    pub targets: Vec<String>,
    pub ttl: Option<u32>,
    /// `namespace/name` of the Gateways the name resolves to.
    pub gateways: Vec<String>,
    /// `Kind/namespace/name` of the routes that claim it.
    pub routes: Vec<String>,
    /// The name is on the `--shared-name` list: its targets are the union of its Gateways'.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub shared: bool,
}

/// Everything one installation would publish, and every finding.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Sorted by (dnsName, recordType).
    pub records: Vec<Record>,
    /// Sorted by object, then reason; `ignore` actions are left out.
    pub violations: Vec<Finding>,
}

impl Outcome {
    pub fn denies(&self) -> bool {
        self.violations.iter().any(|v| v.action == Action::Deny)
    }
}

/// The outcome for one name.
pub struct Settlement<'a> {
    pub name: &'a str,
    /// Claims that keep the name (all with the same targets). Empty under `exclude` conflicts.
    pub winners: Vec<Claimant<'a>>,
    /// Claims that lose it, each with the message explaining why.
    pub losers: Vec<(Claimant<'a>, String)>,
}

pub fn settle<'a>(cfg: &Config, name: &'a str, claims: Vec<Claimant<'a>>) -> Settlement<'a> {
    // A name shared on purpose is everyone's: no claim loses it.
    let agree = cfg.is_shared_name(name)
        || claims
            .windows(2)
            .all(|pair| pair[0].claim.origin.targets == pair[1].claim.origin.targets);
    if agree {
        return Settlement {
            name,
            winners: claims,
            losers: Vec::new(),
        };
    }
    match cfg.conflict_resolution {
        ConflictResolution::OldestWins => {
            let first = claims[0];
            let (winners, losing): (Vec<_>, Vec<_>) = claims
                .into_iter()
                .partition(|c| c.claim.origin.targets == first.claim.origin.targets);
            let losers = losing
                .into_iter()
                .map(|c| {
                    let message = conflict_message(name, &first, &c);
                    (c, message)
                })
                .collect();
            Settlement {
                name,
                winners,
                losers,
            }
        }
        ConflictResolution::Exclude => {
            let mut gateways: Vec<String> = claims
                .iter()
                .map(|c| {
                    format!(
                        "{} ({})",
                        c.claim.origin.gateway,
                        c.claim.origin.targets_text()
                    )
                })
                .collect();
            gateways.sort();
            gateways.dedup();
            let message = format!(
                "{name} would resolve to {}; it is published nowhere until only one Gateway claims it",
                gateways.join(" and ")
            );
            let losers = claims.into_iter().map(|c| (c, message.clone())).collect();
            Settlement {
                name,
                winners: Vec::new(),
                losers,
            }
        }
    }
}

/// The one-line message for a claim that loses `name` to `incumbent`.
pub fn conflict_message(name: &str, incumbent: &Claimant, loser: &Claimant) -> String {
    let gw = &*incumbent.claim.origin.gateway;
    let targets = incumbent.claim.origin.targets_text();
    if std::ptr::eq(incumbent.route, loser.route) {
        concat(&[
            name,
            " would resolve to Gateway ",
            gw,
            " (",
            &targets,
            ") and Gateway ",
            &loser.claim.origin.gateway,
            " (",
            &loser.claim.origin.targets_text(),
            "); attach the hostname to one Gateway",
        ])
    } else if incumbent.claim.origin.gateway == loser.claim.origin.gateway {
        // Same Gateway, different targets: a target annotation on one of the routes.
        let route = incumbent.route;
        concat(&[
            name,
            " is already served by Gateway ",
            gw,
            " at ",
            &targets,
            " for ",
            route.kind().kind(),
            " ",
            route.meta.namespace(),
            "/",
            route.meta.name(),
            ", not at ",
            &loser.claim.origin.targets_text(),
            "; use the same target annotation or drop the hostname",
        ])
    } else {
        let route = incumbent.route;
        concat(&[
            name,
            " is already served by Gateway ",
            gw,
            " (",
            &targets,
            ") for ",
            route.kind().kind(),
            " ",
            route.meta.namespace(),
            "/",
            route.meta.name(),
            "; attach to ",
            gw,
            " or drop the hostname",
        ])
    }
}

/// Turns a settled name into its records (A/AAAA, or CNAME only when there is no IP target).
/// The targets are the union of the winners' (they are all the same unless the name is shared),
/// less those failing their health checks while another target serves (ARCHITECTURE.md, "Health
/// checks").
pub fn records_for(cfg: &Config, health: &TargetHealth, settlement: &Settlement) -> Vec<Record> {
    if settlement.winners.is_empty() {
        return Vec::new();
    }
    let shared = cfg.is_shared_name(settlement.name);
    let serving = serving_winners(cfg, settlement);
    let all = name_targets(cfg, settlement, &serving);
    let after_health = serving_targets(health, &serving, &all);
    let targets: &[Address] = after_health.as_deref().unwrap_or(&all);
    let mut gateways: Vec<String> = serving
        .iter()
        .map(|c| c.claim.origin.gateway.to_string())
        .collect();
    gateways.sort();
    gateways.dedup();
    let mut routes: Vec<String> = serving.iter().map(|c| c.route_ref()).collect();
    routes.sort();
    routes.dedup();
    // Routes that set different TTLs for one name: the lowest wins (`TtlConflict` says so), so
    // no cache keeps the name longer than any of them asked.
    let ttl = serving.iter().filter_map(|c| c.ttl).min();
    let (mut v4, mut v6, mut names) = (Vec::new(), Vec::new(), Vec::new());
    for target in targets.iter() {
        match target {
            Address::Ip(IpAddr::V4(ip)) => v4.push(ip.to_string()),
            Address::Ip(IpAddr::V6(ip)) => v6.push(ip.to_string()),
            Address::Hostname(h) => names.push(h.to_string()),
        }
    }
    let mut out = Vec::new();
    let mut push = |record_type, targets: Vec<String>| {
        if !targets.is_empty() {
            out.push(Record {
                dns_name: settlement.name.to_owned(),
                record_type,
                targets,
                ttl,
                gateways: gateways.clone(),
                routes: routes.clone(),
                shared,
            });
        }
    };
    // Never a CNAME beside A/AAAA for one name: the addresses win. A CNAME has one target: the
    // first (sorted). The engine reports both as `CnameNotAllowed`.
    let has_ip = !v4.is_empty() || !v6.is_empty();
    push(RecordType::A, v4);
    push(RecordType::AAAA, v6);
    if !has_ip {
        names.truncate(1);
        push(RecordType::CNAME, names);
    }
    out
}

/// The winners whose targets a name publishes: those whose origin is programmed, or every
/// winner when none is, or under `--publish-unprogrammed` (ARCHITECTURE.md, "Readiness"). A
/// name is never left without an answer because its Gateways say they are not programmed.
pub fn serving_winners<'s, 'a>(
    cfg: &Config,
    settlement: &'s Settlement<'a>,
) -> Vec<&'s Claimant<'a>> {
    let programmed = |c: &&Claimant| cfg.publish_unprogrammed || c.claim.origin.programmed;
    if settlement.winners.iter().any(|c| programmed(&c)) {
        settlement.winners.iter().filter(programmed).collect()
    } else {
        settlement.winners.iter().collect()
    }
}

/// The targets the serving winners give a name, before health checks: the union of theirs on a
/// name shared on purpose, else the first's (every winner has the same). Borrowed unless a
/// union is made.
fn name_targets<'s>(
    cfg: &Config,
    settlement: &'s Settlement,
    serving: &[&'s Claimant],
) -> Cow<'s, [Address]> {
    if cfg.is_shared_name(settlement.name) && serving.len() > 1 {
        let mut all: Vec<Address> = serving
            .iter()
            .flat_map(|c| c.claim.origin.targets.iter().cloned())
            .collect();
        all.sort();
        all.dedup();
        return Cow::Owned(all);
    }
    // Never empty while there are winners: with none programmed, every winner serves.
    match serving.first() {
        Some(c) => Cow::Borrowed(&c.claim.origin.targets),
        None => Cow::Borrowed(&[]),
    }
}

/// Is `target` failing for every claim among `serving` that brings it? A target that two
/// Gateways share serves the name while either of them passes.
fn failing(health: &TargetHealth, serving: &[&Claimant], target: &Address) -> bool {
    let mut bringing = serving
        .iter()
        .filter(|c| c.claim.origin.targets.contains(target))
        .peekable();
    bringing.peek().is_some()
        && bringing.all(|c| health.unhealthy(&c.claim.origin.gateway, target).is_some())
}

/// The targets a name publishes after health checks: `targets` without the failing ones, unless
/// none would be left. Then every target stays: a name never loses its last answer because its
/// targets fail their probes (the DNS fails open). None when nothing is left out.
fn serving_targets(
    health: &TargetHealth,
    serving: &[&Claimant],
    targets: &[Address],
) -> Option<Vec<Address>> {
    if health.is_empty() {
        return None;
    }
    let healthy: Vec<Address> = targets
        .iter()
        .filter(|t| !failing(health, serving, t))
        .cloned()
        .collect();
    (!healthy.is_empty() && healthy.len() < targets.len()).then_some(healthy)
}

/// A failing target behind a settled name, and what became of it there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthEffect {
    /// `namespace/name` of the Gateway whose probes of `address` fail.
    pub gateway: Box<str>,
    pub address: Address,
    pub name: String,
    /// True when it left the name; false when the name kept it, having no healthy target left.
    pub left_out: bool,
    pub unhealthy: Unhealthy,
}

/// Every failing target that a settled name would publish but for health checks, and whether it
/// was left out. Empty without failing targets.
pub fn health_effects(
    cfg: &Config,
    health: &TargetHealth,
    settlement: &Settlement,
) -> Vec<HealthEffect> {
    if health.is_empty() || settlement.winners.is_empty() {
        return Vec::new();
    }
    let serving = serving_winners(cfg, settlement);
    let all = name_targets(cfg, settlement, &serving);
    let after = serving_targets(health, &serving, &all);
    let mut effects = Vec::new();
    for c in &serving {
        let gateway = &c.claim.origin.gateway;
        for target in c.claim.origin.targets.iter().filter(|t| all.contains(t)) {
            if let Some(unhealthy) = health.unhealthy(gateway, target) {
                effects.push(HealthEffect {
                    gateway: gateway.clone(),
                    address: target.clone(),
                    name: settlement.name.to_owned(),
                    left_out: after.as_ref().is_some_and(|kept| !kept.contains(target)),
                    unhealthy: unhealthy.clone(),
                });
            }
        }
    }
    effects.sort_by(|a, b| (&a.gateway, &a.address).cmp(&(&b.gateway, &b.address)));
    effects.dedup();
    effects
}

/// Most names a `TargetUnhealthy` message lists per target; the rest are counted.
const HEALTH_NAMES_LISTED: usize = 3;

/// One `TargetUnhealthy` finding per Gateway with a failing target behind some name: per
/// target, the error that made it unhealthy, the names it left and the names that kept it
/// because they had no healthy target left. One per Gateway, not per name, so a Gateway behind
/// many names makes one Event when a target fails, and `TargetHealthy` when all pass again.
pub fn health_findings(cfg: &Config, effects: &[HealthEffect]) -> Vec<Finding> {
    type PerTarget<'e> = BTreeMap<&'e Address, (&'e Unhealthy, Vec<&'e str>, Vec<&'e str>)>;
    let mut by_gateway: BTreeMap<&str, PerTarget> = BTreeMap::new();
    for effect in effects {
        let (_, left, kept) = by_gateway
            .entry(&effect.gateway)
            .or_default()
            .entry(&effect.address)
            .or_insert((&effect.unhealthy, Vec::new(), Vec::new()));
        match effect.left_out {
            true => left.push(&effect.name),
            false => kept.push(&effect.name),
        }
    }
    let listed = |names: &mut Vec<&str>| {
        names.sort_unstable();
        names.dedup();
        let mut text = names
            .iter()
            .take(HEALTH_NAMES_LISTED)
            .copied()
            .collect::<Vec<_>>()
            .join(", ");
        if names.len() > HEALTH_NAMES_LISTED {
            text.push_str(&format!(" and {} more", names.len() - HEALTH_NAMES_LISTED));
        }
        text
    };
    by_gateway
        .into_iter()
        .map(|(gateway, targets)| {
            let parts: Vec<String> = targets
                .into_iter()
                .map(|(address, (unhealthy, mut left, mut kept))| {
                    let mut part =
                        format!("{address} fails its health checks ({})", unhealthy.error);
                    if !left.is_empty() {
                        part.push_str(&format!(
                            "; left out of {}, which other targets serve",
                            listed(&mut left)
                        ));
                    }
                    if !kept.is_empty() {
                        part.push_str(&format!(
                            "; still published for {}, which has no healthy target left",
                            listed(&mut kept)
                        ));
                    }
                    part
                })
                .collect();
            Finding {
                object: concat(&["Gateway/", gateway]),
                reason: Reason::TargetUnhealthy,
                action: cfg.action_for(Reason::TargetUnhealthy, cfg.mode),
                hostname: None,
                field: "status.addresses".to_owned(),
                message: concat(&[
                    &parts.join("; "),
                    ": fix what serves there, or check the health-check annotations",
                ]),
            }
        })
        .collect()
}

/// `GatewayNotProgrammed` for a name whose every winning origin says it is not programmed: its
/// records stay (the answer fails open), and each route and Gateway behind it is told.
fn readiness_findings<W: World>(world: &W, settlement: &Settlement) -> Vec<Finding> {
    let cfg = world.config();
    if cfg.publish_unprogrammed
        || settlement.winners.is_empty()
        || settlement.winners.iter().any(|c| c.claim.origin.programmed)
    {
        return Vec::new();
    }
    let name = settlement.name;
    let mut findings = Vec::new();
    let mut gateways: Vec<&str> = Vec::new();
    for c in &settlement.winners {
        let origin = &c.claim.origin;
        findings.push(route_finding(
            world,
            c.route,
            Reason::GatewayNotProgrammed,
            Some(name.to_owned()),
            c.claim.source.field(cfg),
            not_programmed_message(name, origin),
        ));
        gateways.push(&origin.gateway);
    }
    gateways.sort_unstable();
    gateways.dedup();
    for gateway in gateways {
        findings.push(Finding {
            object: concat(&["Gateway/", gateway]),
            reason: Reason::GatewayNotProgrammed,
            action: cfg.action_for(Reason::GatewayNotProgrammed, cfg.mode),
            hostname: Some(name.to_owned()),
            field: "status.conditions".to_owned(),
            message: concat(&[
                "not programmed, yet its addresses stay published for ",
                name,
                ", which has no other target",
            ]),
        });
    }
    findings
}

/// The one line a route is told when `name` resolves only through `origin`, which says it is
/// not programmed.
fn not_programmed_message(name: &str, origin: &Origin) -> String {
    let through = origin
        .listener_set
        .as_deref()
        .map(|ls| concat(&[" through ListenerSet ", ls]))
        .unwrap_or_default();
    concat(&[
        "Gateway ",
        &origin.gateway,
        &through,
        " says it is not programmed (Programmed=False, or its listeners for this route are not \
         programmed or conflict); ",
        name,
        " has no other target, so it still resolves to ",
        &origin.targets_text(),
        ": fix the Gateway, or attach the route to one that serves",
    ])
}

/// Resolves a finding's action for a route (mode from its Namespace label, then `--action`).
pub fn resolve<W: World>(world: &W, route: &Route, finding: &RawFinding) -> Finding {
    route_finding(
        world,
        route,
        finding.reason,
        finding.hostname.as_deref().map(str::to_owned),
        finding.field.to_string(),
        finding.message.to_string(),
    )
}

/// [`resolve`] for a finding that is no longer needed: its strings move, not copied.
pub fn resolve_owned<W: World>(world: &W, route: &Route, finding: RawFinding) -> Finding {
    route_finding(
        world,
        route,
        finding.reason,
        finding.hostname.map(Into::into),
        finding.field.into(),
        finding.message.into(),
    )
}

pub fn route_finding<W: World>(
    world: &W,
    route: &Route,
    reason: Reason,
    hostname: Option<String>,
    field: String,
    message: String,
) -> Finding {
    let cfg = world.config();
    let mode = cfg.mode_for(
        world
            .namespace(route.meta.namespace())
            .map(|ns| &ns.meta.labels),
    );
    Finding {
        object: route_ref(route),
        reason,
        action: cfg.action_for(reason, mode),
        hostname,
        field,
        message,
    }
}

/// Why every claim on `name` is refused by what the zone holds, when it is (ARCHITECTURE.md,
/// "Many clusters, one zone").
fn zone_refusal<W: World>(world: &W, name: &str) -> Option<String> {
    let holder = world.zone().holder(name)?;
    zone::refusal(world.config().is_shared_name(name), name, holder)
}

/// Settles one name: its records and the conflict findings of the claims that lose it.
pub fn settle_name<W: World>(world: &W, name: &str) -> (Vec<Record>, Vec<Finding>) {
    let (records, mut findings, effects) = settle_claimed_name(world, name, world.claimants(name));
    findings.extend(health_findings(world.config(), &effects));
    (records, findings)
}

/// A name's claims decided in the engine's one order, for `settle_name`, `settle_all` and
/// `explain` alike: ownership first — a claim from a namespace that may not have the name is no
/// contender for it (ARCHITECTURE.md, "Namespaces and hostnames") and comes back with its
/// message — then the settlement of the rest.
pub fn contest<'a, W: World>(
    world: &W,
    name: &'a str,
    mut claims: Vec<Claimant<'a>>,
) -> (Settlement<'a>, Vec<(Claimant<'a>, Reason, String)>) {
    // A name another owner holds in the zone is no cluster's to settle: every claim is refused
    // it (ARCHITECTURE.md, "Many clusters, one zone").
    if let Some(message) = zone_refusal(world, name) {
        let taken = claims
            .drain(..)
            .map(|c| (c, Reason::HostnameOwnedInZone, message.clone()))
            .collect();
        return (settle(world.config(), name, claims), taken);
    }
    let taken = hostname_ownership::take_from_other_namespaces(world, name, &mut claims)
        .into_iter()
        .map(|(c, message)| (c, Reason::HostnameOwnedByOtherNamespace, message))
        .collect();
    (settle(world.config(), name, claims), taken)
}

/// A name's records, its findings, and what health checks did to it (made into findings per
/// Gateway by the caller, over every name it settles).
fn settle_claimed_name<W: World>(
    world: &W,
    name: &str,
    ids: &[RouteId],
) -> (Vec<Record>, Vec<Finding>, Vec<HealthEffect>) {
    let cfg = world.config();
    let (settlement, taken) = contest(world, name, claimants_among(world, name, ids));
    let records = records_for(cfg, world.target_health(), &settlement);
    let effects = health_effects(cfg, world.target_health(), &settlement);
    let mut violations = shared_cname_findings(world, &settlement, &records);
    let (records, mismatched) = zone_sharing_findings(world, &settlement, records);
    violations.extend(mismatched);
    violations.extend(ttl_findings(world, &settlement));
    violations.extend(readiness_findings(world, &settlement));
    let losers = settlement
        .losers
        .into_iter()
        .map(|(c, message)| (Reason::HostnameConflict, c, message));
    let taken = taken
        .into_iter()
        .map(|(c, reason, message)| (reason, c, message));
    violations.extend(losers.chain(taken).map(|(reason, c, message)| {
        route_finding(
            world,
            c.route,
            reason,
            Some(name.to_owned()),
            c.claim.source.field(world.config()),
            message,
        )
    }));
    (records, violations, effects)
}

/// A name shared across clusters whose records here can't join the other owners' (another
/// record type, another TTL): every claim gets `HostnameOwnedInZone`, and nothing is published
/// (ARCHITECTURE.md, "Many clusters, one zone").
fn zone_sharing_findings<W: World>(
    world: &W,
    settlement: &Settlement,
    records: Vec<Record>,
) -> (Vec<Record>, Vec<Finding>) {
    let sharing = world
        .zone()
        .holder(settlement.name)
        .and_then(|holder| holder.shared.as_deref());
    let Some(sharing) = sharing else {
        return (records, Vec::new());
    };
    let mismatch = records.iter().find_map(|record| {
        let ttl = record.ttl.unwrap_or(crate::model::DEFAULT_TTL);
        zone::sharing_mismatch(settlement.name, sharing, record.record_type, ttl)
    });
    let Some(message) = mismatch else {
        return (records, Vec::new());
    };
    let findings = settlement
        .winners
        .iter()
        .map(|c| {
            route_finding(
                world,
                c.route,
                Reason::HostnameOwnedInZone,
                Some(settlement.name.to_owned()),
                c.claim.source.field(world.config()),
                message.clone(),
            )
        })
        .collect();
    (Vec::new(), findings)
}

/// `TtlConflict` for each claim on a settled name whose TTL is not the one published (the
/// lowest of those set).
fn ttl_findings<W: World>(world: &W, settlement: &Settlement) -> Vec<Finding> {
    let Some(lowest) = settlement.winners.iter().filter_map(|c| c.ttl).min() else {
        return Vec::new();
    };
    let Some(holder) = settlement.winners.iter().find(|c| c.ttl == Some(lowest)) else {
        return Vec::new();
    };
    settlement
        .winners
        .iter()
        .filter(|c| c.ttl.is_some_and(|ttl| ttl != lowest))
        .map(|c| {
            route_finding(
                world,
                c.route,
                Reason::TtlConflict,
                Some(settlement.name.to_owned()),
                c.claim.source.field(world.config()),
                ttl_message(settlement.name, c, holder, lowest),
            )
        })
        .collect()
}

/// The one-line message for a claim whose TTL yields to `holder`'s lower one.
fn ttl_message(name: &str, claim: &Claimant, holder: &Claimant, lowest: u32) -> String {
    let mine = claim.ttl.unwrap_or_default().to_string();
    let lowest = lowest.to_string();
    concat(&[
        name,
        " asks for TTL ",
        &mine,
        " here, but ",
        holder.route.kind().kind(),
        " ",
        holder.route.meta.namespace(),
        "/",
        holder.route.meta.name(),
        " (or its Gateway) sets ",
        &lowest,
        " for it; the lowest, ",
        &lowest,
        ", is published; set the same ttl annotation on both",
    ])
}

/// The CNAME rules over a shared name's union of targets (each claim alone was checked when its
/// route was evaluated): a hostname beside addresses, or several hostnames, are `CnameNotAllowed`
/// for the claims that bring a hostname.
fn shared_cname_findings<W: World>(
    world: &W,
    settlement: &Settlement,
    records: &[Record],
) -> Vec<Finding> {
    if settlement.winners.len() < 2 || !world.config().is_shared_name(settlement.name) {
        return Vec::new();
    }
    let hostnames = |targets: &[Address]| -> Vec<String> {
        targets
            .iter()
            .filter_map(|t| match t {
                Address::Hostname(h) => Some(h.to_string()),
                Address::Ip(_) => None,
            })
            .collect()
    };
    let mut all: Vec<String> = settlement
        .winners
        .iter()
        .flat_map(|c| hostnames(&c.claim.origin.targets))
        .collect();
    all.sort();
    all.dedup();
    let published: Vec<&str> = records
        .iter()
        .filter(|r| r.record_type == RecordType::CNAME)
        .flat_map(|r| r.targets.iter().map(String::as_str))
        .collect();
    let dropped: Vec<&str> = all
        .iter()
        .map(String::as_str)
        .filter(|h| !published.contains(h))
        .collect();
    if dropped.is_empty() {
        return Vec::new();
    }
    let name = settlement.name;
    let message = concat(&[
        name,
        " is shared, and its Gateways' targets together hold ",
        &dropped.join(", "),
        ", which cannot be published: a CNAME cannot share its name and has one target; give the Gateways sharing it targets of one kind",
    ]);
    settlement
        .winners
        .iter()
        .filter(|c| {
            hostnames(&c.claim.origin.targets)
                .iter()
                .any(|h| dropped.contains(&h.as_str()))
        })
        .map(|c| {
            route_finding(
                world,
                c.route,
                Reason::CnameNotAllowed,
                Some(name.to_owned()),
                c.claim.source.field(world.config()),
                message.clone(),
            )
        })
        .collect()
}

/// Every record and every finding of a world.
pub fn settle_all<W: World>(world: &W) -> Outcome {
    let mut records = Vec::new();
    let mut violations = Vec::new();
    let mut effects = Vec::new();
    for (name, ids) in world.claims() {
        let (r, v, e) = settle_claimed_name(world, name, ids);
        records.extend(r);
        violations.extend(v);
        effects.extend(e);
    }
    violations.extend(health_findings(world.config(), &effects));
    for (_, entry) in world.routes() {
        violations.extend(
            entry
                .eval
                .findings
                .iter()
                .map(|f| resolve(world, &entry.route, f)),
        );
    }
    finish(records, violations)
}

/// Sorts and filters records and findings into their stable output order.
pub fn finish(mut records: Vec<Record>, mut violations: Vec<Finding>) -> Outcome {
    records.sort_by(|a, b| (&a.dns_name, a.record_type).cmp(&(&b.dns_name, b.record_type)));
    violations.retain(|v| v.action != Action::Ignore);
    violations.sort();
    violations.dedup();
    // Kept for as long as the snapshot it settles (the sync loop and the findings report share
    // it): not with the spare capacity the vectors grew by.
    records.shrink_to_fit();
    violations.shrink_to_fit();
    Outcome {
        records,
        violations,
    }
}

/// One finding of `reason` on `name` for each of the newcomer's own claims on it, at the
/// claim's field.
fn for_each_claim<W: World>(
    world: &W,
    route: &Route,
    name: &str,
    own: &[Claimant],
    reason: Reason,
    out: &mut Vec<Finding>,
    message: impl Fn(&Claimant) -> String,
) {
    for claim in own {
        out.push(route_finding(
            world,
            route,
            reason,
            Some(name.to_owned()),
            claim.claim.source.field(world.config()),
            message(claim),
        ));
    }
}

/// Conflicts of a route under review (the newcomer), and names it would take from the namespace
/// that owns them, evaluated against a world that does not need to contain it: it never
/// displaces an incumbent, whatever the ages. Claims by the route's
/// own earlier version (same key) are not incumbents. One finding per (name, field) it would lose.
pub fn newcomer_conflicts<W: World>(world: &W, route: &Route, eval: &RouteEval) -> Vec<Finding> {
    // The route's own earlier version (same key) is not an incumbent.
    let is_self = |id: &RouteId| {
        id.kind() == route.kind()
            && id.namespace() == route.meta.namespace()
            && id.name() == route.meta.name()
    };
    let mut out = Vec::new();
    // Reused for every name: a route has a few names, and each would allocate both anew.
    let mut own: Vec<Claimant> = Vec::new();
    let mut incumbents: Vec<Claimant> = Vec::new();
    // Claims are sorted by name: each name's claims are one run, visited once.
    for own_claims in eval.claims.chunk_by(|a, b| a.name == b.name) {
        let name = &*own_claims[0].name;
        own.clear();
        own.extend(own_claims.iter().map(|claim| Claimant {
            route,
            claim,
            ttl: eval.ttl.or(claim.origin.ttl),
        }));
        incumbents.clear();
        for id in world.claimants(name).iter().filter(|id| !is_self(id)) {
            if let Some(entry) = world.route(id) {
                incumbents.extend(entry.eval.claims_on(name).iter().map(|claim| Claimant {
                    route: &entry.route,
                    claim,
                    ttl: entry.eval.ttl.or(claim.origin.ttl),
                }));
            }
        }
        incumbents.sort_by(precedence);
        // Every claim on the name says it is not programmed: the name resolves all the same
        // (ARCHITECTURE.md, "Readiness"), and the newcomer is told.
        if !world.config().publish_unprogrammed
            && !own
                .iter()
                .chain(&incumbents)
                .any(|c| c.claim.origin.programmed)
        {
            for_each_claim(
                world,
                route,
                name,
                &own,
                Reason::GatewayNotProgrammed,
                &mut out,
                |c| not_programmed_message(name, &c.claim.origin),
            );
        }
        // A name another owner holds in the zone is refused whatever this cluster's claims
        // say (ARCHITECTURE.md, "Many clusters, one zone").
        if let Some(message) = zone_refusal(world, name) {
            for_each_claim(
                world,
                route,
                name,
                &own,
                Reason::HostnameOwnedInZone,
                &mut out,
                |_| message.clone(),
            );
            continue;
        }
        if world.config().is_shared_name(name) {
            continue;
        }
        // Incumbents that lose the name to its owner namespace are no reference; a newcomer
        // outside the owner's namespaces is refused the name whatever it resolves to.
        if let Some(owner) = hostname_ownership::owner_refusing(world, route, name, &mut incumbents)
        {
            let message = hostname_ownership::owned_message(name, &owner, route.meta.namespace());
            for_each_claim(
                world,
                route,
                name,
                &own,
                Reason::HostnameOwnedByOtherNamespace,
                &mut out,
                |_| message.clone(),
            );
            continue;
        }
        let Some(reference) = incumbents.first().or(own.first()).copied() else {
            continue;
        };
        for claim in &own {
            let incumbent = match incumbents
                .iter()
                .find(|inc| inc.claim.origin.targets != claim.claim.origin.targets)
            {
                Some(inc) => Some(*inc),
                // No incumbent: the route conflicts with itself across Gateways.
                None if incumbents.is_empty()
                    && reference.claim.origin.targets != claim.claim.origin.targets =>
                {
                    Some(reference)
                }
                None => None,
            };
            if let Some(incumbent) = incumbent {
                out.push(route_finding(
                    world,
                    route,
                    Reason::HostnameConflict,
                    Some(name.to_owned()),
                    claim.claim.source.field(world.config()),
                    conflict_message(name, &incumbent, claim),
                ));
            } else if let Some(mine) = claim.ttl
                && let Some(lower) = incumbents
                    .iter()
                    .filter(|inc| inc.ttl.is_some_and(|ttl| ttl < mine))
                    .min_by_key(|inc| inc.ttl)
            {
                out.push(route_finding(
                    world,
                    route,
                    Reason::TtlConflict,
                    Some(name.to_owned()),
                    claim.claim.source.field(world.config()),
                    ttl_message(name, claim, lower, lower.ttl.unwrap_or(mine)),
                ));
            }
        }
    }
    out.sort();
    out.dedup_by(|a, b| a.hostname == b.hostname && a.field == b.field);
    out
}
