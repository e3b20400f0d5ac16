//! Explanations for people: why a DNS name resolves (or does not) and to what, and what becomes
//! of each name of a route. Built over a [`World`] from the engine's own functions (attachment,
//! settlement, the order of claims), never a second copy of a rule, and without IO; `explain`
//! prints them. Findings are carried as the engine resolved them, whatever their reason, so a
//! reason added to the engine shows up here unchanged.

use serde::Serialize;

use super::claimants::{Claimant, PrecedenceKey, claimants, precedence_deciding, route_ref};
use super::explain_parents::{ParentResolution, parent_resolutions, requested_names};
use super::hostname::intersect;
use super::settle::{Record, contest, resolve, settle_name};
use super::world::{RouteEntry, World};
use super::{Action, Finding};
use crate::model::dns_name::{HostnameError, parse_hostname};
use crate::model::{ObjectKey, ObjectKind, Route, format_rfc3339};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExplainError {
    #[error("{name:?} is not a valid DNS name: it {error}")]
    InvalidName { name: String, error: HostnameError },
    #[error("{kind} {namespace}/{name} is not known to gateway-dns (no such route was read)")]
    RouteNotFound {
        kind: &'static str,
        namespace: String,
        name: String,
    },
}

/// What becomes of a name, for one route or for the name as a whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Fate {
    /// The name gets a record through this route.
    Published,
    /// Not published, and a finding that denies concerns it.
    Denied,
    /// Not published; its findings only warn, are audited or ignored, or there is none.
    Dropped,
}

impl Fate {
    pub fn as_str(self) -> &'static str {
        match self {
            Fate::Published => "published",
            Fate::Denied => "denied",
            Fate::Dropped => "dropped",
        }
    }
}

/// A finding as the engine resolved it for its route (mode and `--action` applied).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExplainedFinding {
    pub reason: String,
    pub action: String,
    pub field: String,
    pub hostname: Option<String>,
    pub message: String,
}

impl From<Finding> for ExplainedFinding {
    fn from(v: Finding) -> ExplainedFinding {
        ExplainedFinding {
            reason: v.reason.as_str().to_owned(),
            action: v.action.as_str().to_owned(),
            field: v.field,
            hostname: v.hostname,
            message: v.message,
        }
    }
}

impl ExplainedFinding {
    fn denies(&self) -> bool {
        self.action == Action::Deny.as_str()
    }
}

/// One listener of a parent, taking or refusing the route.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListenerView {
    pub name: String,
    pub hostname: Option<String>,
    pub accepted: bool,
    pub refusal: Option<String>,
    /// The route's names this listener serves.
    pub hostnames: Vec<String>,
}

/// One `spec.parentRefs[i]` of a route.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ParentView {
    pub index: usize,
    pub field: String,
    /// `Kind/namespace/name`.
    pub parent: String,
    pub section_name: Option<String>,
    pub port: Option<i32>,
    /// Whether the route attaches through this parent.
    pub attached: bool,
    /// `namespace/name` of the Gateway whose addresses the names get.
    pub gateway: Option<String>,
    pub listener_set: Option<String>,
    /// The addresses names get through this parent (sorted); empty while the Gateway has none.
    pub targets: Vec<String>,
    pub listeners: Vec<ListenerView>,
    /// The route's findings on this parentRef.
    pub findings: Vec<ExplainedFinding>,
}

/// One claim of a route on a name: through which Gateway, to which targets, and how it fared
/// in the engine's order of claims.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimView {
    /// 1-based place in the engine's order of the name's claims (oldest route first).
    pub rank: usize,
    pub gateway: String,
    pub listener_set: Option<String>,
    pub targets: Vec<String>,
    /// The route field the name came from.
    pub field: String,
    pub result: ClaimResult,
    /// For a losing claim: the key of the order that put the winner first.
    pub decided_by: Option<PrecedenceKey>,
    /// One line saying why, with the creationTimestamps or names that decided.
    pub why: String,
    /// False when the Gateway, ListenerSet or listeners behind the claim say they are not
    /// programmed (ARCHITECTURE.md, "Readiness"); `why` says what became of its targets.
    pub programmed: bool,
    /// The claim's targets that fail their health checks (ARCHITECTURE.md, "Health checks"),
    /// each with the probe's error and what became of it on this name; empty when none does.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub failing_targets: Vec<FailingTargetView>,
}

/// A target of a claim failing its health checks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FailingTargetView {
    pub target: String,
    /// When it became unhealthy (RFC 3339).
    pub since: Option<String>,
    /// What the probe that made it unhealthy said.
    pub last_error: String,
    /// True when it left the name; false when the name keeps it, having no healthy target left.
    pub left_out: bool,
}

/// How a claim fared in the settlement of its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ClaimResult {
    /// First in the engine's order: its targets are the name's.
    Wins,
    /// Published with the winner: same targets, or a name shared on purpose (`--shared-name`).
    Shares,
    /// Other targets: the winner keeps the name.
    Loses,
    /// `--conflict-resolution exclude`: nobody keeps a contested name.
    Excluded,
    /// `--hostname-ownership namespace`: the name belongs to another namespace, which does not
    /// share it with this route's; or another owner holds the name in the zone (the zone
    /// view). The claim takes no part in the settlement.
    OwnedElsewhere,
}

impl ClaimResult {
    pub fn as_str(self) -> &'static str {
        match self {
            ClaimResult::Wins => "wins",
            ClaimResult::Shares => "shares",
            ClaimResult::Loses => "loses",
            ClaimResult::Excluded => "excluded",
            ClaimResult::OwnedElsewhere => "owned elsewhere",
        }
    }
}

/// One route concerned with a name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteOnName {
    /// `Kind/namespace/name`.
    pub route: String,
    /// RFC 3339; None when the object has none (a file written by hand counts as newest).
    pub created: Option<String>,
    /// False when the route is outside this installation's scope (route filters, another DNS
    /// controller's annotation): it contributes nothing.
    pub in_scope: bool,
    pub fate: Fate,
    /// One line: why the name is (not) published through this route.
    pub why: String,
    /// The route's claims on the name, in the engine's order.
    pub claims: Vec<ClaimView>,
    pub parents: Vec<ParentView>,
    /// The route's findings that concern the name.
    pub findings: Vec<ExplainedFinding>,
}

/// A wildcard record that answers for a name that has none of its own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WildcardCover {
    pub name: String,
    pub records: Vec<Record>,
}

/// Why a DNS name resolves, or does not, and to what.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NameExplanation {
    pub name: String,
    /// Whether the name gets a record, of its own or from a wildcard.
    pub resolves: bool,
    /// `Kind/namespace/name` of the route whose claim keeps the name, if one does.
    pub winner: Option<String>,
    /// Every route that claims or asks for the name: claimants in the engine's order, then
    /// routes that ask for it and get no claim, by name.
    pub routes: Vec<RouteOnName>,
    /// The records the sync loop would write for the name.
    pub records: Vec<Record>,
    /// Wildcard records that answer for the name when it has none of its own.
    pub covered_by: Vec<WildcardCover>,
}

impl NameExplanation {
    /// A finding that denies concerns the name.
    pub fn denied(&self) -> bool {
        self.routes
            .iter()
            .any(|r| r.findings.iter().any(ExplainedFinding::denies))
    }
}

/// One name of a route and its fate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteName {
    pub name: String,
    pub fate: Fate,
    pub why: String,
    /// The route's claims on the name, in the engine's order of all the name's claims.
    pub claims: Vec<ClaimView>,
    /// The name's records, when this route publishes it.
    pub records: Vec<Record>,
    pub findings: Vec<ExplainedFinding>,
}

/// What becomes of each of a route's names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteExplanation {
    /// `Kind/namespace/name`.
    pub route: String,
    pub created: Option<String>,
    pub in_scope: bool,
    pub ttl: Option<u32>,
    pub parents: Vec<ParentView>,
    /// Every name the route asks for, gets from its listeners, or has a finding about, sorted.
    pub names: Vec<RouteName>,
    /// Every finding of the route (intrinsic ones and conflicts), as `check` reports them.
    pub findings: Vec<ExplainedFinding>,
}

impl RouteExplanation {
    /// Every name is published and no finding of the route denies.
    pub fn all_published(&self) -> bool {
        self.names.iter().all(|n| n.fate == Fate::Published)
            && !self.findings.iter().any(ExplainedFinding::denies)
    }
}

/// A name as the engine compares names (canonical), or why it is not one.
pub fn parse_name(text: &str) -> Result<String, ExplainError> {
    parse_hostname(text.trim())
        .map(std::borrow::Cow::into_owned)
        .map_err(|error| ExplainError::InvalidName {
            name: text.to_owned(),
            error,
        })
}

/// Explains `name` (canonical, see [`parse_name`]).
pub fn explain_name<W: World>(world: &W, name: &str) -> NameExplanation {
    let settled = settled_name(world, name);
    let mut routes: Vec<RouteOnName> = Vec::new();
    // Claimants first, in the engine's order (the order of their first claim).
    let mut seen: Vec<ObjectKey> = Vec::new();
    for claimant in claimants(world, name) {
        let key = claimant.route.key();
        if seen.contains(&key) {
            continue;
        }
        seen.push(key.clone());
        if let Some(entry) = world.route(&key) {
            routes.push(route_on_name(world, entry, name, &settled));
        }
    }
    // Then every other route that asks for the name or has a finding about it.
    for (id, entry) in world.routes() {
        if seen.contains(id) || !concerns(world, entry, name) {
            continue;
        }
        routes.push(route_on_name(world, entry, name, &settled));
    }
    let winner = settled
        .claims
        .iter()
        .find(|(_, view)| view.result == ClaimResult::Wins)
        .map(|(route, _)| route.clone());
    let records = settled.records;
    let covered_by = if records.is_empty() {
        covering_wildcards(world, name)
    } else {
        Vec::new()
    };
    NameExplanation {
        name: name.to_owned(),
        resolves: !records.is_empty() || !covered_by.is_empty(),
        winner,
        routes,
        records,
        covered_by,
    }
}

/// Explains every name of the route `kind namespace/name`.
pub fn explain_route<W: World>(
    world: &W,
    kind: ObjectKind,
    namespace: &str,
    name: &str,
) -> Result<RouteExplanation, ExplainError> {
    let key = ObjectKey::new(kind, namespace, name);
    let entry = world
        .route(&key)
        .ok_or_else(|| ExplainError::RouteNotFound {
            kind: kind.kind(),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        })?;
    let cfg = world.config();
    let route = &*entry.route;
    let mut names: Vec<String> = requested_names(cfg, route)
        .into_iter()
        .map(|(name, _)| name)
        .chain(entry.eval.names().map(str::to_owned))
        .chain(
            entry
                .eval
                .findings
                .iter()
                .filter_map(|f| f.hostname.as_deref())
                .map(|h| parse_hostname(h).map_or_else(|_| h.to_owned(), |c| c.into_owned())),
        )
        .collect();
    names.sort();
    names.dedup();
    let mut all_findings: Vec<ExplainedFinding> = Vec::new();
    let mut route_names = Vec::with_capacity(names.len());
    let parents = parent_views(world, route);
    for dns_name in &names {
        let settled = settled_name(world, dns_name);
        let on_name = route_on_name(world, entry, dns_name, &settled);
        // A wildcard the listeners narrow to names of their own is told through those names.
        let narrowed = on_name.claims.is_empty()
            && !on_name.findings.iter().any(|f| f.hostname.is_some())
            && !narrowed_to(&parents, dns_name).is_empty();
        if narrowed {
            continue;
        }
        all_findings.extend(
            on_name
                .findings
                .iter()
                .filter(|f| f.hostname.as_deref() == Some(dns_name.as_str()))
                .cloned(),
        );
        route_names.push(RouteName {
            name: dns_name.clone(),
            fate: on_name.fate,
            why: on_name.why,
            records: if on_name.fate == Fate::Published {
                settled.records
            } else {
                Vec::new()
            },
            claims: on_name.claims,
            findings: on_name.findings,
        });
    }
    all_findings.extend(
        entry
            .eval
            .findings
            .iter()
            .map(|f| resolve(world, route, f).into()),
    );
    // By field first, as a person reads the route; every field in the key, so equal findings
    // are neighbours and go once.
    let order = |f: &ExplainedFinding| {
        (
            f.field.clone(),
            f.reason.clone(),
            f.message.clone(),
            f.hostname.clone(),
            f.action.clone(),
        )
    };
    all_findings.sort_by_key(order);
    all_findings.dedup();
    Ok(RouteExplanation {
        route: route_ref(route),
        created: route.meta.created.get().and_then(format_rfc3339),
        in_scope: entry.eval.in_scope,
        ttl: entry.eval.ttl,
        parents,
        names: route_names,
        findings: all_findings,
    })
}

/// Does a route without a claim on `name` ask for it, or have a finding about it?
fn concerns<W: World>(world: &W, entry: &RouteEntry, name: &str) -> bool {
    requested_names(world.config(), &entry.route)
        .iter()
        .any(|(requested, _)| requested == name)
        || entry
            .eval
            .findings
            .iter()
            .any(|f| f.hostname.as_deref().is_some_and(|h| same_name(h, name)))
}

fn same_name(written: &str, name: &str) -> bool {
    parse_hostname(written).map_or(written == name, |c| c == name)
}

/// Every claim on `name` in the engine's order, each with how it fared: (route, view).
fn claim_views<W: World>(world: &W, name: &str) -> Vec<(String, ClaimView)> {
    let ordered = claimants(world, name);
    let (settlement, taken) = contest(world, name, ordered.clone());
    let contender_count = ordered.len() - taken.len();
    let first = settlement.winners.first().copied();
    let shared_on_purpose = world.config().is_shared_name(name);
    let is = |a: &Claimant, b: &Claimant| {
        std::ptr::eq(a.route, b.route) && std::ptr::eq(a.claim, b.claim)
    };
    let serving = crate::engine::settle::serving_winners(world.config(), &settlement);
    let health =
        crate::engine::settle::health_effects(world.config(), world.target_health(), &settlement);
    ordered
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let loss = settlement.losers.iter().find(|(l, _)| is(l, c));
            let owned_elsewhere = taken.iter().find(|(t, _, _)| is(t, c));
            let (result, decided_by, why) = match (loss, first) {
                _ if owned_elsewhere.is_some() => {
                    let why = owned_elsewhere.map(|(_, _, m)| m.clone()).unwrap_or_default();
                    (ClaimResult::OwnedElsewhere, None, why)
                }
                (Some((_, message)), Some(winner)) => {
                    let (_, key) = precedence_deciding(&winner, c);
                    let why = format!("{message}; {}", deciding_text(key, &winner, c));
                    (ClaimResult::Loses, Some(key), why)
                }
                // No winner: every claim is excluded.
                (Some((_, message)), None) => (ClaimResult::Excluded, None, message.clone()),
                (None, Some(winner)) if is(&winner, c) => {
                    let why = match settlement.losers.first() {
                        None if ordered.len() == 1 => "the only claim on the name".to_owned(),
                        None if contender_count == 1 => "the only claim from the namespace that owns the name".to_owned(),
                        None if shared_on_purpose => "first claim in the engine's order; the name is shared on purpose (--shared-name), so every claim adds its targets".to_owned(),
                        None => "first claim in the engine's order; every claim on the name has the same targets, so they share it".to_owned(),
                        Some((loser, _)) => {
                            let (_, key) = precedence_deciding(&winner, loser);
                            format!("keeps the name: {}", deciding_text(key, &winner, loser))
                        }
                    };
                    (ClaimResult::Wins, None, why)
                }
                (None, _) if shared_on_purpose => {
                    let why = "the name is shared on purpose (--shared-name): its targets join the name's".to_owned();
                    (ClaimResult::Shares, None, why)
                }
                (None, _) => {
                    let why = match first {
                        Some(winner) => format!(
                            "same targets as the claim of {} through Gateway {}; they share the name",
                            winner.route_ref(),
                            winner.claim.origin.gateway
                        ),
                        None => "shares the name".to_owned(),
                    };
                    (ClaimResult::Shares, None, why)
                }
            };
            let programmed = c.claim.origin.programmed;
            let mut why = why;
            if !programmed && matches!(result, ClaimResult::Wins | ClaimResult::Shares) {
                why.push_str(if world.config().publish_unprogrammed {
                    "; its Gateway says it is not programmed, and --publish-unprogrammed \
                     publishes its targets all the same"
                } else if serving.iter().any(|s| is(s, c)) {
                    "; its Gateway says it is not programmed, but no other claim's can serve \
                     the name, so its targets stay (GatewayNotProgrammed)"
                } else {
                    "; its Gateway says it is not programmed, so its targets are left out while \
                     another Gateway serves the name"
                });
            }
            let failing_targets: Vec<FailingTargetView> = health
                .iter()
                .filter(|e| {
                    *e.gateway == *c.claim.origin.gateway
                        && c.claim.origin.targets.contains(&e.address)
                })
                .map(|e| FailingTargetView {
                    target: e.address.to_string(),
                    since: format_rfc3339(e.unhealthy.since),
                    last_error: e.unhealthy.error.to_string(),
                    left_out: e.left_out,
                })
                .collect();
            for failing in &failing_targets {
                why.push_str(&if failing.left_out {
                    format!(
                        "; {} fails its health checks ({}), so it is left out while another target serves the name",
                        failing.target, failing.last_error
                    )
                } else {
                    format!(
                        "; {} fails its health checks ({}), but the name has no healthy target left, so it stays (TargetUnhealthy)",
                        failing.target, failing.last_error
                    )
                });
            }
            (
                c.route_ref(),
                ClaimView {
                    rank: i + 1,
                    gateway: c.claim.origin.gateway.to_string(),
                    listener_set: c.claim.origin.listener_set.as_deref().map(str::to_owned),
                    targets: c.claim.origin.targets.iter().map(ToString::to_string).collect(),
                    field: c.claim.source.field(world.config()),
                    result,
                    decided_by,
                    why,
                    programmed,
                    failing_targets,
                },
            )
        })
        .collect()
}

/// The comparison that put `winner` before `loser`, in words.
fn deciding_text(key: PrecedenceKey, winner: &Claimant, loser: &Claimant) -> String {
    let created = |c: &Claimant| {
        c.route
            .meta
            .created
            .get()
            .and_then(format_rfc3339)
            .unwrap_or_else(|| "no creationTimestamp".to_owned())
    };
    match key {
        PrecedenceKey::CreationTimestamp => match loser.route.meta.created.get() {
            Some(_) => format!(
                "oldest claim wins: {} was created {}, before {} (created {})",
                winner.route_ref(),
                created(winner),
                loser.route_ref(),
                created(loser)
            ),
            None => format!(
                "oldest claim wins: {} was created {}; {} has no creationTimestamp, which counts as newest",
                winner.route_ref(),
                created(winner),
                loser.route_ref()
            ),
        },
        PrecedenceKey::Namespace | PrecedenceKey::Name | PrecedenceKey::Kind => format!(
            "same creationTimestamp ({}), so namespace/name decides: {} sorts before {}",
            created(winner),
            winner.route_ref(),
            loser.route_ref()
        ),
        PrecedenceKey::Gateway | PrecedenceKey::ListenerSet => format!(
            "one route through two Gateways: Gateway {} sorts before Gateway {}",
            winner.claim.origin.gateway, loser.claim.origin.gateway
        ),
        PrecedenceKey::Equal => "the same claim".to_owned(),
    }
}

/// A name as the engine settles it: its records and the findings of settling it (conflicts),
/// exactly as `check` and the sync loop get them, and every claim on it with how it fared.
struct SettledName {
    records: Vec<Record>,
    findings: Vec<Finding>,
    claims: Vec<(String, ClaimView)>,
}

fn settled_name<W: World>(world: &W, name: &str) -> SettledName {
    let (records, findings) = settle_name(world, name);
    SettledName {
        records,
        findings,
        claims: claim_views(world, name),
    }
}

fn route_on_name<W: World>(
    world: &W,
    entry: &RouteEntry,
    name: &str,
    settled: &SettledName,
) -> RouteOnName {
    let SettledName {
        records,
        findings: conflicts,
        claims,
    } = settled;
    let route = &*entry.route;
    let this = route_ref(route);
    let own_claims: Vec<ClaimView> = claims
        .iter()
        .filter(|(r, _)| *r == this)
        .map(|(_, view)| view.clone())
        .collect();
    let source_fields: Vec<String> = own_claims
        .iter()
        .map(|c| c.field.clone())
        .chain(
            requested_names(world.config(), route)
                .into_iter()
                .filter(|(requested, _)| requested == name)
                .map(|(_, source)| source.field(world.config())),
        )
        .collect();
    let intrinsic: Vec<ExplainedFinding> = entry
        .eval
        .findings
        .iter()
        .map(|f| ExplainedFinding::from(resolve(world, route, f)))
        .collect();
    let mut findings: Vec<ExplainedFinding> = conflicts
        .iter()
        .filter(|v| v.object == this)
        .cloned()
        .map(ExplainedFinding::from)
        .chain(
            intrinsic
                .iter()
                .filter(|f| {
                    f.hostname.as_deref().is_some_and(|h| same_name(h, name))
                        || source_fields.contains(&f.field)
                })
                .cloned(),
        )
        .collect();
    // Published when the engine's records for the name come from this route.
    let published = records.iter().any(|r| r.routes.contains(&this));
    if !published && findings.is_empty() {
        // Nothing names the name: what stops the whole route (its parents, its size) does.
        findings.extend(intrinsic.iter().filter(|f| f.hostname.is_none()).cloned());
        if findings.is_empty() {
            findings = intrinsic;
        }
    }
    findings.dedup();
    let fate = if published {
        Fate::Published
    } else if findings.iter().any(ExplainedFinding::denies) {
        Fate::Denied
    } else {
        Fate::Dropped
    };
    let parents = parent_views(world, route);
    let narrowed = narrowed_to(&parents, name);
    let why = if let Some(claim) = own_claims
        .iter()
        .find(|c| matches!(c.result, ClaimResult::Wins | ClaimResult::Shares))
    {
        claim.why.clone()
    } else if let Some(claim) = own_claims.first() {
        claim.why.clone()
    } else if !narrowed.is_empty() && findings.iter().all(|f| f.hostname.is_none()) {
        format!(
            "its listeners serve only part of {name}: the route gets {} there instead",
            narrowed.join(", ")
        )
    } else if !entry.eval.in_scope {
        "outside this installation's scope (route filters, or another DNS controller's annotation): it contributes nothing".to_owned()
    } else if let Some(finding) = findings.first() {
        format!("{}: {}", finding.reason, finding.message)
    } else {
        "no parent takes the route for this name, and the engine reports no finding (with --attachment status, a parent counts only when the route's status accepts it)".to_owned()
    };
    RouteOnName {
        route: this,
        created: route.meta.created.get().and_then(format_rfc3339),
        in_scope: entry.eval.in_scope,
        fate,
        why,
        claims: own_claims,
        parents,
        findings,
    }
}

/// The narrower names accepting listeners give a route's `name` (a wildcard route hostname on
/// a listener for one name of it, say), other than `name` itself.
fn narrowed_to(parents: &[ParentView], name: &str) -> Vec<String> {
    let mut out: Vec<String> = parents
        .iter()
        .flat_map(|p| &p.listeners)
        .filter(|l| l.accepted)
        .filter_map(|l| intersect(l.hostname.as_deref(), Some(name)).flatten())
        .filter(|narrower| *narrower != name)
        .map(str::to_owned)
        .collect();
    out.sort();
    out.dedup();
    out
}

fn parent_views<W: World>(world: &W, route: &Route) -> Vec<ParentView> {
    let findings: Vec<Finding> = world
        .route(&route.meta.key)
        .map(|entry| {
            entry
                .eval
                .findings
                .iter()
                .map(|f| resolve(world, route, f))
                .collect()
        })
        .unwrap_or_default();
    parent_resolutions(world, world.config(), route)
        .into_iter()
        .map(|resolution: ParentResolution| {
            let field = format!("spec.parentRefs[{}]", resolution.index);
            let origin = resolution.origin.as_deref();
            ParentView {
                index: resolution.index,
                parent: resolution.parent,
                section_name: resolution.section_name,
                port: resolution.port,
                attached: origin.is_some(),
                gateway: origin.map(|o| o.gateway.to_string()),
                listener_set: origin.and_then(|o| o.listener_set.as_deref().map(str::to_owned)),
                targets: origin
                    .map(|o| o.targets.iter().map(ToString::to_string).collect())
                    .unwrap_or_default(),
                listeners: resolution
                    .listeners
                    .into_iter()
                    .map(|l| ListenerView {
                        name: l.name,
                        hostname: l.hostname,
                        accepted: l.refusal.is_none(),
                        refusal: l.refusal,
                        hostnames: l.hostnames,
                    })
                    .collect(),
                findings: findings
                    .iter()
                    .filter(|v| v.field == field)
                    .cloned()
                    .map(ExplainedFinding::from)
                    .collect(),
                field,
            }
        })
        .collect()
}

/// Wildcard names (`*.b.c`, `*.c` for `a.b.c`) whose records answer for `name`.
fn covering_wildcards<W: World>(world: &W, name: &str) -> Vec<WildcardCover> {
    let bare = name.strip_prefix("*.").unwrap_or(name);
    let mut out = Vec::new();
    let mut rest = bare;
    while let Some((_, parent)) = rest.split_once('.') {
        let wildcard = format!("*.{parent}");
        if wildcard != name && !world.claimants(&wildcard).is_empty() {
            let (records, _) = settle_name(world, &wildcard);
            if !records.is_empty() {
                out.push(WildcardCover {
                    name: wildcard,
                    records,
                });
            }
        }
        rest = parent;
    }
    out
}
