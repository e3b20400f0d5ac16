//! The DNS names a route contributes (ARCHITECTURE.md, "Names"): its requested hostnames met
//! with the listeners it attaches to ([`super::attach`]), or the listeners' own, and the findings
//! about them; the result is the route's evaluation.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use super::attach::{
    Attached, attach_parent, field_index, finding, parse_ttl, route_in_scope, sorted_targets,
    target_override,
};
use super::hostname::{intersect, is_wildcard};
use super::world::{Claim, NameSource, Origin, RawFinding, RouteEval, World};
use super::{Config, Reason, concat};
use crate::model::dns_name::parse_hostname;
use crate::model::{Address, Name, Route, format_rfc3339};

/// Requested hostnames (spec and annotation), validated.
pub(super) struct Requested<'r> {
    pub(super) hosts: Vec<(Cow<'r, str>, NameSource)>,
    pub(super) any_written: bool,
    /// Whether a route that writes no hostname inherits its listeners' hostnames: not when
    /// `gateway-hostname-source` restricts the route's names to its spec or its annotation.
    pub(super) inherits: bool,
}

pub(super) fn requested_hostnames<'r>(
    cfg: &Config,
    route: &'r Route,
    findings: &mut Vec<RawFinding>,
) -> Requested<'r> {
    let source = cfg.annotation(&route.meta.annotations, "gateway-hostname-source");
    let use_spec = source != Some("annotation-only");
    let use_annotation = !cfg.ignore_hostname_annotation && source != Some("defined-hosts-only");
    let mut raw: Vec<(&str, NameSource)> = Vec::new();
    if use_spec {
        raw.extend(
            route
                .hostnames
                .iter()
                .enumerate()
                .map(|(i, h)| (&**h, NameSource::SpecHostname(field_index(i)))),
        );
    }
    if use_annotation && let Some(list) = cfg.annotation(&route.meta.annotations, "hostname") {
        raw.extend(
            list.split(',')
                .map(str::trim)
                .filter(|h| !h.is_empty())
                .map(|h| (h, NameSource::Annotation)),
        );
    }
    let mut hosts: Vec<(Cow<'r, str>, NameSource)> = Vec::with_capacity(raw.len());
    // Each name once, from its first field: duplicates would only be expanded again. A route
    // decided inline has a few names, which a look through those kept finds quicker than a
    // hash; a set takes over for the big ones.
    const FEW_NAMES: usize = 16;
    let mut seen: Option<std::collections::HashSet<Cow<'r, str>>> =
        (raw.len() > FEW_NAMES).then(std::collections::HashSet::new);
    for (host, source) in &raw {
        match parse_hostname(host) {
            Ok(name) => {
                let first = match &mut seen {
                    Some(seen) => seen.insert(name.clone()),
                    None => !hosts.iter().any(|(kept, _)| *kept == name),
                };
                if first {
                    hosts.push((name, *source));
                }
            }
            Err(err) => findings.push(RawFinding {
                reason: Reason::InvalidHostname,
                hostname: Some((*host).into()),
                field: source.field(cfg).into(),
                message: format!("{host} {err}; use a DNS name such as app.example.com").into(),
            }),
        }
    }
    Requested {
        hosts,
        any_written: !raw.is_empty(),
        inherits: source.is_none_or(|s| s != "annotation-only" && s != "defined-hosts-only"),
    }
}

/// Computes what a route contributes: its claims (name → origin) and intrinsic findings.
pub fn evaluate_route<W: World>(world: &W, cfg: &Config, route: &Route) -> RouteEval {
    if !route_in_scope(cfg, route) {
        return RouteEval::default();
    }
    if let Some(too_big) = size_finding(cfg, route) {
        // Nothing of an oversized route is expanded: its cost stays bounded by the caps.
        return RouteEval {
            claims: Box::default(),
            findings: vec![too_big].into_boxed_slice(),
            ttl: None,
            in_scope: true,
        };
    }
    let mut findings = Vec::new();
    let requested = requested_hostnames(cfg, route, &mut findings);
    let ttl = cfg
        .annotation(&route.meta.annotations, "ttl")
        .and_then(parse_ttl);
    if route.parent_refs.is_empty() {
        findings.push(finding(
            Reason::NoParentRefs,
            None,
            "spec.parentRefs".to_owned(),
            format!(
                "{} attaches to no Gateway, so no DNS is published; add spec.parentRefs",
                route.kind()
            ),
        ));
    }
    let attached = attach_parents(world, cfg, route, &mut findings);

    let mut claims: Vec<Claim> = Vec::new();
    if requested.any_written {
        claims_of_written_names(
            cfg,
            route,
            &requested,
            &attached,
            &mut claims,
            &mut findings,
        );
    } else if !requested.inherits {
        // `gateway-hostname-source` names where the route's names come from; listener hostnames
        // are not among them, even with `--allow-inherited-wildcards` (as in external-dns).
    } else {
        inherited_claims(cfg, &attached, &mut claims, &mut findings);
    }
    if !claims.is_empty() {
        address_findings(cfg, &attached, &mut findings);
    }
    super::hostname_ownership::keep_allowed_claims(world, cfg, route, &mut claims, &mut findings);
    claims.retain(|c| !c.origin.targets.is_empty());
    claims.sort();
    claims.dedup_by(|a, b| a.name == b.name && a.origin == b.origin);
    claims.retain(|claim| cname_allowed(cfg, claim, &mut findings));
    findings.sort();
    findings.dedup();
    // Evaluations live in the index for every route: no spare capacity, no capacity field.
    RouteEval {
        claims: claims.into_boxed_slice(),
        findings: findings.into_boxed_slice(),
        ttl,
        in_scope: true,
    }
}

/// Each parentRef the route attaches through, with the route's own targets in place of its
/// parents' when it may set them.
fn attach_parents<'w, W: World>(
    world: &'w W,
    cfg: &Config,
    route: &Route,
    findings: &mut Vec<RawFinding>,
) -> Vec<Attached<'w>> {
    let mut attached: Vec<Attached> = route
        .parent_refs
        .iter()
        .enumerate()
        .filter_map(|(i, p)| attach_parent(world, cfg, route, i, p, findings))
        .collect();
    if let Some(targets) = route_target_override(world, cfg, route, findings) {
        // The route's own targets replace its parents' for its names; the parents stay what
        // they are, so conflicts compare the targets the names would really get.
        for parent in &mut attached {
            parent.origin = Arc::new(Origin {
                targets: targets.clone(),
                kept: None,
                ..(*parent.origin).clone()
            });
        }
    }
    attached
}

/// The claims of the hostnames the route writes, met with its listeners' (ARCHITECTURE.md,
/// "Hostnames"), and a finding for each that meets none.
fn claims_of_written_names(
    cfg: &Config,
    route: &Route,
    requested: &Requested,
    attached: &[Attached],
    claims: &mut Vec<Claim>,
    findings: &mut Vec<RawFinding>,
) {
    let mut matched_any = false;
    let mut outside = Vec::new();
    let listener_hosts = ListenerHosts::of(attached);
    let mut matches = Vec::new();
    for (host, source) in &requested.hosts {
        matches.clear();
        listener_hosts.intersections(host, &mut matches);
        for (name, origins) in &matches {
            // The spec's own string when the name is written as published (nearly always):
            // the index then keeps each name once.
            let written = match source {
                NameSource::SpecHostname(i) => usize::try_from(*i)
                    .ok()
                    .and_then(|i| route.hostnames.get(i))
                    .filter(|written| written.as_str() == *name),
                _ => None,
            };
            let name: Name = written.map_or_else(|| Name::new(name), Name::clone);
            claims.extend(origins.iter().map(|origin| Claim {
                name: name.clone(),
                origin: origin.clone(),
                source: *source,
            }));
        }
        let matched = !matches.is_empty();
        matched_any |= matched;
        if !matched && !attached.is_empty() {
            outside.push((host, *source));
        }
    }
    if !outside.is_empty() {
        let listener_hosts = listener_hostnames(attached);
        if !matched_any {
            let names: Vec<&str> = outside.iter().map(|(h, _)| &***h).collect();
            findings.push(finding(
                Reason::NoMatchingListenerHostname,
                names.first().copied(),
                outside[0].1.field(cfg),
                concat(&[
                    &names.join(", "),
                    if names.len() == 1 { " is" } else { " are" },
                    " outside the listener hostnames of ",
                    &listener_hosts,
                    "; use a hostname they serve or attach elsewhere",
                ]),
            ));
        } else {
            for (host, source) in outside {
                findings.push(finding(
                    Reason::HostnameOutsideListener,
                    Some(host),
                    source.field(cfg),
                    concat(&[
                        host,
                        " is outside the listener hostnames of ",
                        &listener_hosts,
                        "; it is ignored",
                    ]),
                ));
            }
        }
    }
}

/// The claims a route without hostnames inherits from its listeners: every listener hostname,
/// but a wildcard one only with `--allow-inherited-wildcards` (ARCHITECTURE.md, "Names").
fn inherited_claims(
    cfg: &Config,
    attached: &[Attached],
    claims: &mut Vec<Claim>,
    findings: &mut Vec<RawFinding>,
) {
    for parent in attached {
        for listener in &parent.listeners {
            let Some(host) = listener.hostname.as_deref() else {
                continue;
            };
            let Ok(name) = parse_hostname(host) else {
                continue;
            };
            if is_wildcard(&name) && !cfg.allow_inherited_wildcards {
                findings.push(finding(
                    Reason::InheritedWildcardHostname,
                    Some(&name),
                    format!("spec.parentRefs[{}]", parent.parent_index),
                    format!(
                        "no hostnames set; the listener's {name} is not published as a wildcard record; set spec.hostnames"
                    ),
                ));
                continue;
            }
            claims.push(Claim {
                name: Name::new(&name),
                origin: parent.origin.clone(),
                source: NameSource::Inherited(parent.parent_index),
            });
        }
    }
}

/// `GatewayHasNoAddress` for each parent, of a route with claims, whose Gateway has no address:
/// kept ones in their grace, or none at all (ARCHITECTURE.md, "Address-loss grace").
fn address_findings(cfg: &Config, attached: &[Attached], findings: &mut Vec<RawFinding>) {
    // A time RFC 3339 cannot write (never one a clock gives) shows as Unix seconds.
    let rfc3339 = |at: i64| format_rfc3339(at).unwrap_or_else(|| format!("@{at}"));
    for parent in attached {
        if let Some(kept) = parent.origin.kept {
            findings.push(finding(
                Reason::GatewayHasNoAddress,
                None,
                format!("spec.parentRefs[{}]", parent.parent_index),
                format!(
                    "Gateway {} has had no address since {}; its names keep its last addresses ({}) until {}, then they are removed unless it gets one back",
                    parent.origin.gateway,
                    rfc3339(kept.since),
                    parent.origin.targets_text(),
                    rfc3339(kept.until)
                ),
            ));
            continue;
        }
        if parent.origin.targets.is_empty() {
            findings.push(finding(
                Reason::GatewayHasNoAddress,
                None,
                format!("spec.parentRefs[{}]", parent.parent_index),
                if cfg.scope.targets.is_empty() {
                    format!(
                        "Gateway {} has no address yet; its names are published once it has one",
                        parent.origin.gateway
                    )
                } else {
                    format!(
                        "Gateway {} has no address this installation publishes (--target-cidr, --exclude-target-cidr); its names are published once it has one",
                        parent.origin.gateway
                    )
                },
            ));
        }
    }
}

/// The CNAME rules (ARCHITECTURE.md, "Records and conflicts"): a CNAME is the only record of its
/// name and has one target. A claim whose targets break them gets `CnameNotAllowed`; it is kept
/// (its addresses, or its first hostname, are published) unless its CNAME would sit at a zone
/// apex, where nothing of it can be.
fn cname_allowed(cfg: &Config, claim: &Claim, findings: &mut Vec<RawFinding>) -> bool {
    let targets = &claim.origin.targets;
    let hostnames: Vec<&str> = targets
        .iter()
        .filter_map(|t| match t {
            Address::Hostname(h) => Some(&**h),
            Address::Ip(_) => None,
        })
        .collect();
    if hostnames.is_empty() {
        return true;
    }
    let name = &*claim.name;
    let gateway = &*claim.origin.gateway;
    let message = if hostnames.len() < targets.len() {
        format!(
            "{name} would get a CNAME to {} beside the addresses it gets through Gateway {gateway}; a CNAME cannot share its name, so only the addresses are published; give the Gateway (or the target annotation) addresses of one kind",
            hostnames.join(", ")
        )
    } else if cfg.zones.iter().any(|zone| zone == name) {
        findings.push(finding(
            Reason::CnameNotAllowed,
            Some(name),
            claim.source.field(cfg),
            format!(
                "{name} is the apex of a managed zone, where a CNAME cannot be (the zone's SOA and NS records are there), so its CNAME to {} through Gateway {gateway} is not published; use a name below the zone or an IP target",
                hostnames.join(", ")
            ),
        ));
        return false;
    } else if hostnames.len() > 1 {
        format!(
            "{name} would get a CNAME to {} through Gateway {gateway}; a CNAME has one target, so only {} is published; give the Gateway (or the target annotation) one hostname",
            hostnames.join(", "),
            hostnames[0]
        )
    } else {
        return true;
    };
    findings.push(finding(
        Reason::CnameNotAllowed,
        Some(name),
        claim.source.field(cfg),
        message,
    ));
    true
}

/// The route's target annotation (ARCHITECTURE.md, "Names"), when it has one with at least one
/// valid target and its namespace may use it; `RouteTargetNotAllowed` when it may not (the
/// route's names then follow its Gateways).
fn route_target_override<W: World>(
    world: &W,
    cfg: &Config,
    route: &Route,
    findings: &mut Vec<RawFinding>,
) -> Option<Arc<[Address]>> {
    let targets = target_override(cfg, &route.meta.annotations).filter(|t| !t.is_empty())?;
    let labels = world
        .namespace(route.meta.namespace())
        .map(|ns| &ns.meta.labels);
    if !cfg.route_targets_allowed(labels) {
        findings.push(finding(
            Reason::RouteTargetNotAllowed,
            None,
            cfg.annotation_field("target"),
            format!(
                "routes in namespace {} may not set their own DNS targets, so the target annotation is ignored and the names point at the Gateway's addresses; remove it or ask the platform team",
                route.meta.namespace()
            ),
        ));
        return None;
    }
    Some(sorted_targets(targets))
}

/// `TooManyHostnames` or `TooManyParentRefs` when the route is over a cap.
fn size_finding(cfg: &Config, route: &Route) -> Option<RawFinding> {
    let parent_refs = route.parent_refs.len();
    if parent_refs > cfg.max_route_parent_refs {
        return Some(finding(
            Reason::TooManyParentRefs,
            None,
            "spec.parentRefs".to_owned(),
            format!(
                "{} has {parent_refs} parentRefs, more than the {} gateway-dns accepts; split it into smaller routes",
                route.kind(),
                cfg.max_route_parent_refs
            ),
        ));
    }
    let annotated = cfg
        .annotation(&route.meta.annotations, "hostname")
        .map_or(0, |list| {
            list.split(',').filter(|h| !h.trim().is_empty()).count()
        });
    let hostnames = route.hostnames.len() + annotated;
    if hostnames > cfg.max_route_hostnames {
        let field = if annotated > 0 {
            NameSource::Annotation.field(cfg)
        } else {
            "spec.hostnames".to_owned()
        };
        return Some(finding(
            Reason::TooManyHostnames,
            None,
            field,
            format!(
                "{} has {hostnames} hostnames (spec and annotation), more than the {} gateway-dns accepts; split it into smaller routes",
                route.kind(),
                cfg.max_route_hostnames
            ),
        ));
    }
    None
}

/// The distinct listener hostnames of a route's attached parents, each with the distinct
/// origins behind it, indexed so that an exact route hostname finds its listeners in
/// O(its labels) rather than by trying every listener: a route's cost is O(hostnames +
/// listeners), not their product. (Wildcard route hostnames, rare, still try each distinct
/// listener hostname.)
struct ListenerHosts<'w> {
    groups: Vec<(Option<&'w str>, Vec<Arc<Origin>>)>,
    /// Whether the maps below are built: only for many listeners. A route's few listeners
    /// (nearly always) are found by a look through `groups`, quicker than hashing each name
    /// and suffix.
    indexed: bool,
    /// Exact listener hostname → group.
    exact: HashMap<&'w str, usize>,
    /// `suffix` of a wildcard listener hostname `*.suffix` → group.
    wildcard: HashMap<&'w str, usize>,
    /// The group of listeners without a hostname (they take any name).
    any: Option<usize>,
}

/// Up to this many listeners, [`ListenerHosts`] builds no maps.
const FEW_LISTENERS: usize = 8;

impl<'w> ListenerHosts<'w> {
    fn of(attached: &[Attached<'w>]) -> ListenerHosts<'w> {
        let listeners: usize = attached.iter().map(|parent| parent.listeners.len()).sum();
        ListenerHosts::grouped(attached, listeners > FEW_LISTENERS)
    }

    fn grouped(attached: &[Attached<'w>], indexed: bool) -> ListenerHosts<'w> {
        let mut hosts = ListenerHosts {
            groups: Vec::new(),
            indexed,
            exact: HashMap::new(),
            wildcard: HashMap::new(),
            any: None,
        };
        for parent in attached {
            for listener in &parent.listeners {
                let hostname = listener.hostname.as_deref();
                if !hosts.indexed {
                    match hosts.group_where(|group| group == hostname) {
                        Some(group) => push_origin(&mut hosts.groups[group].1, &parent.origin),
                        None => {
                            if hostname.is_none() {
                                hosts.any = Some(hosts.groups.len());
                            }
                            hosts.groups.push((hostname, vec![parent.origin.clone()]));
                        }
                    }
                    continue;
                }
                let slot = match hostname {
                    None => &mut hosts.any,
                    Some(name) => {
                        let map = match name.strip_prefix("*.") {
                            Some(suffix) => hosts.wildcard.entry(suffix),
                            None => hosts.exact.entry(name),
                        };
                        match map {
                            std::collections::hash_map::Entry::Occupied(entry) => {
                                let group = *entry.get();
                                push_origin(&mut hosts.groups[group].1, &parent.origin);
                                continue;
                            }
                            std::collections::hash_map::Entry::Vacant(entry) => {
                                entry.insert(hosts.groups.len());
                                hosts.groups.push((hostname, vec![parent.origin.clone()]));
                                continue;
                            }
                        }
                    }
                };
                match *slot {
                    Some(group) => push_origin(&mut hosts.groups[group].1, &parent.origin),
                    None => {
                        *slot = Some(hosts.groups.len());
                        hosts.groups.push((None, vec![parent.origin.clone()]));
                    }
                }
            }
        }
        hosts
    }

    /// Every (intersected name, origins) for the route hostname `host`.
    fn intersections<'h>(&'h self, host: &'h str, out: &mut Vec<(&'h str, &'h [Arc<Origin>])>) {
        if is_wildcard(host) {
            for (listener_host, origins) in &self.groups {
                if let Some(Some(name)) = intersect(*listener_host, Some(host)) {
                    out.push((name, origins));
                }
            }
            return;
        }
        let exact = if self.indexed {
            self.exact.get(host).copied()
        } else {
            self.group_where(|group| group == Some(host))
        };
        let wildcard = |suffix: &str| {
            if self.indexed {
                self.wildcard.get(suffix).copied()
            } else {
                self.group_where(|group| {
                    group.and_then(|group| group.strip_prefix("*.")) == Some(suffix)
                })
            }
        };
        let groups = self
            .any
            .into_iter()
            .chain(exact)
            .chain(parent_suffixes(host).filter_map(wildcard));
        // The maps only find the candidates; the one intersection rule decides.
        for group in groups {
            let (listener_host, origins) = &self.groups[group];
            if let Some(Some(name)) = intersect(*listener_host, Some(host)) {
                out.push((name, origins));
            }
        }
    }

    /// The first group whose listener hostname passes `wanted`.
    fn group_where(&self, wanted: impl Fn(Option<&str>) -> bool) -> Option<usize> {
        self.groups
            .iter()
            .position(|(hostname, _)| wanted(*hostname))
    }
}

fn push_origin(origins: &mut Vec<Arc<Origin>>, origin: &Arc<Origin>) {
    // A group has as many origins as the route has parents (capped), so a scan is cheap.
    if !origins
        .iter()
        .any(|known| Arc::ptr_eq(known, origin) || known == origin)
    {
        origins.push(origin.clone());
    }
}

/// `b.c` and `c` for `a.b.c`: the names a wildcard `*.suffix` must have to cover it.
fn parent_suffixes(name: &str) -> impl Iterator<Item = &str> {
    name.match_indices('.').map(move |(at, _)| &name[at + 1..])
}

fn listener_hostnames(attached: &[Attached]) -> String {
    let mut out = String::new();
    for parent in attached {
        let mut hosts: Vec<&str> = parent
            .listeners
            .iter()
            .map(|l| l.hostname.as_deref().unwrap_or("*"))
            .collect();
        hosts.sort_unstable();
        hosts.dedup();
        if !out.is_empty() {
            out.push_str(", ");
        }
        match parent.origin.listener_set.as_deref() {
            Some(listener_set) => {
                out.push_str("ListenerSet ");
                out.push_str(listener_set);
            }
            None => {
                out.push_str("Gateway ");
                out.push_str(&parent.origin.gateway);
            }
        }
        out.push_str(" (");
        for (i, host) in hosts.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            out.push_str(host);
        }
        out.push(')');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{AllowedRoutes, Listener, NamespacesFrom};

    #[test]
    fn listener_hosts_match_alike_with_and_without_maps() {
        let listener = |hostname: Option<&str>| Listener {
            name: "l".into(),
            hostname: hostname.map(Into::into),
            port: None,
            protocol: "HTTPS".into(),
            allowed_routes: AllowedRoutes {
                namespaces: NamespacesFrom::Same,
                kinds: None,
            },
            accepted: None,
            programmed: true,
        };
        let origin = |gateway: &str| {
            Arc::new(Origin {
                gateway: gateway.into(),
                listener_set: None,
                targets: Arc::from(Vec::new()),
                kept: None,
                ttl: None,
                programmed: true,
            })
        };
        let first = [
            listener(Some("a.example.com")),
            listener(Some("*.example.com")),
            listener(Some("*.b.example.com")),
            listener(Some("*")),
        ];
        let second = [
            listener(None),
            listener(Some("a.example.com")),
            listener(Some("*.example.com")),
        ];
        let attached = [
            Attached {
                parent_index: 0,
                origin: origin("infra/one"),
                listeners: first.iter().collect(),
                refused: Vec::new(),
            },
            Attached {
                parent_index: 1,
                origin: origin("infra/two"),
                listeners: second.iter().collect(),
                refused: Vec::new(),
            },
        ];
        let matches = |indexed: bool, host: &str| {
            let hosts = ListenerHosts::grouped(&attached, indexed);
            let mut out = Vec::new();
            hosts.intersections(host, &mut out);
            out.iter()
                .map(|(name, origins)| {
                    let gateways: Vec<String> =
                        origins.iter().map(|o| o.gateway.to_string()).collect();
                    (name.to_string(), gateways)
                })
                .collect::<Vec<_>>()
        };
        for host in [
            "a.example.com",
            "x.b.example.com",
            "c.d.example.com",
            "example.com",
            "other.net",
            "*.example.com",
            "*.b.example.com",
            "*",
        ] {
            let without_maps = matches(false, host);
            assert_eq!(without_maps, matches(true, host), "{host}");
            if host != "other.net" {
                assert!(!without_maps.is_empty(), "{host}");
            }
        }
        assert_eq!(
            matches(false, "a.example.com"),
            [
                ("a.example.com".to_owned(), vec!["infra/two".to_owned()]),
                (
                    "a.example.com".to_owned(),
                    vec!["infra/one".to_owned(), "infra/two".to_owned()]
                ),
                (
                    "a.example.com".to_owned(),
                    vec!["infra/one".to_owned(), "infra/two".to_owned()]
                ),
            ]
        );
    }
}
