//! Attachment (route → listeners) and the DNS names a route contributes (ARCHITECTURE.md,
//! "Attachment" and "Names").

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use super::grace::{AddressLoss, rfc3339};
use super::hostname::{intersect, is_wildcard};
use super::world::{Claim, Finding, KeptAddresses, NameSource, Origin, RouteEval, World};
use super::{AttachmentMode, Config, Reason, concat, selector};
use crate::model::dns_name::parse_hostname;
use crate::model::{
    Acceptance, Address, Gateway, Listener, ListenerSet, Meta, Name, NamespacesFrom, ObjectKind,
    ParentRef, Route, StringMap,
};

/// Does the route pass the route filters of this installation?
pub fn route_in_scope(cfg: &Config, route: &Route) -> bool {
    let scope = &cfg.scope;
    if scope
        .namespace
        .as_deref()
        .is_some_and(|ns| ns != route.meta.namespace())
    {
        return false;
    }
    if let Some(sel) = &scope.route_selector
        && !selector::matches(sel, &route.meta.labels)
    {
        return false;
    }
    if let Some(sel) = &scope.annotation_filter
        && !selector::matches(sel, &route.meta.annotations)
    {
        return false;
    }
    controller_is_ours(cfg, &route.meta)
}

/// external-dns's `controller` annotation: an object (route, Gateway or ListenerSet) claimed by
/// another DNS controller is not ours.
pub fn controller_is_ours(cfg: &Config, meta: &Meta) -> bool {
    other_controller(cfg, meta).is_none()
}

/// The other DNS controller an object's `controller` annotation names, if it names one.
fn other_controller<'m>(cfg: &Config, meta: &'m Meta) -> Option<&'m str> {
    cfg.annotation(&meta.annotations, "controller")
        .filter(|c| *c != "dns-controller")
}

/// Does the Gateway pass the Gateway filters of this installation?
pub fn gateway_in_scope(cfg: &Config, gateway: &Gateway) -> bool {
    let scope = &cfg.scope;
    scope
        .gateway_name
        .as_deref()
        .is_none_or(|n| n == gateway.meta.name())
        && scope
            .gateway_namespace
            .as_deref()
            .is_none_or(|n| n == gateway.meta.namespace())
        && scope
            .gateway_selector
            .as_ref()
            .is_none_or(|sel| selector::matches(sel, &gateway.meta.labels))
        && controller_is_ours(cfg, &gateway.meta)
}

/// The protocol a route kind speaks, as listeners name it.
pub fn route_protocol(kind: ObjectKind) -> &'static str {
    match kind {
        ObjectKind::TLSRoute => "TLS",
        ObjectKind::TCPRoute => "TCP",
        ObjectKind::UDPRoute => "UDP",
        _ => "HTTP",
    }
}

/// Can a route speaking `route_protocol` attach to a listener of `listener_protocol`?
pub fn protocol_compatible(route_protocol: &str, listener_protocol: &str) -> bool {
    match route_protocol {
        "HTTP" => matches!(listener_protocol, "HTTP" | "HTTPS"),
        "TLS" => listener_protocol == "TLS",
        "TCP" => matches!(listener_protocol, "TCP" | "TLS"),
        "UDP" => listener_protocol == "UDP",
        _ => false,
    }
}

/// Why a listener refuses a route, or None when it accepts it.
fn listener_refusal<W: World>(
    world: &W,
    listener: &Listener,
    owner_namespace: &str,
    route: &Route,
    status_only: bool,
) -> Option<String> {
    match listener.accepted {
        Some(Acceptance::Rejected) => {
            return Some(format!(
                "listener {} is not accepted by its controller",
                listener.name
            ));
        }
        // With `--attachment status` a ListenerSet's listener counts only when the ListenerSet's
        // own status accepts it (external-dns's rule).
        Some(Acceptance::Accepted) => {}
        _ if status_only => {
            return Some(format!(
                "listener {} has no Accepted=True in the ListenerSet's status.listeners yet",
                listener.name
            ));
        }
        _ => {}
    }
    if !protocol_compatible(route_protocol(route.kind()), &listener.protocol) {
        return Some(format!(
            "listener {} speaks {}, which does not carry {}",
            display_name(&listener.name),
            listener.protocol,
            route.kind()
        ));
    }
    if let Some(kinds) = &listener.allowed_routes.kinds
        && !kinds
            .iter()
            .any(|k| &*k.kind == route.kind().kind() && &*k.group == route.kind().group())
    {
        return Some(format!(
            "listener {} allows only {}",
            display_name(&listener.name),
            kinds
                .iter()
                .map(|k| &*k.kind)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let route_ns = route.meta.namespace();
    let allowed = match &listener.allowed_routes.namespaces {
        NamespacesFrom::Same => route_ns == owner_namespace,
        NamespacesFrom::All => true,
        NamespacesFrom::None => false,
        NamespacesFrom::Selector(sel) => world
            .namespace(route_ns)
            .is_some_and(|ns| selector::matches(sel, &ns.meta.labels)),
    };
    (!allowed).then(|| {
        format!(
            "listener {} does not allow routes from namespace {route_ns}",
            display_name(&listener.name)
        )
    })
}

fn display_name(name: &str) -> &str {
    if name.is_empty() { "(unnamed)" } else { name }
}

/// Does a Gateway's `allowedListeners` admit a ListenerSet from `namespace`?
fn admits_listener_set<W: World>(world: &W, gateway: &Gateway, namespace: &str) -> bool {
    match &gateway.allowed_listeners {
        NamespacesFrom::None => false,
        NamespacesFrom::All => true,
        NamespacesFrom::Same => namespace == gateway.meta.namespace(),
        NamespacesFrom::Selector(sel) => world
            .namespace(namespace)
            .is_some_and(|ns| selector::matches(sel, &ns.meta.labels)),
    }
}

/// Addresses from the target annotation (comma-separated IPs or hostnames), if set.
fn target_override(cfg: &Config, annotations: &StringMap) -> Option<Vec<Address>> {
    let raw = cfg.annotation(annotations, "target")?;
    Some(raw.split(',').filter_map(Address::parse).collect())
}

fn sorted_targets(mut targets: Vec<Address>) -> Arc<[Address]> {
    targets.sort();
    targets.dedup();
    targets.into()
}

/// Parses the TTL annotation: whole seconds, or a Go-style duration such as `90s`, `5m`, `1h30m`.
pub fn parse_ttl(text: &str) -> Option<u32> {
    let text = text.trim();
    if let Ok(seconds) = text.parse::<u32>() {
        return Some(seconds);
    }
    let (mut total, mut number) = (0u64, String::new());
    for c in text.chars() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let value: u64 = number.parse().ok()?;
        number.clear();
        total += value
            * match c {
                's' => 1,
                'm' => 60,
                'h' => 3600,
                _ => return None,
            };
    }
    if !number.is_empty() {
        return None;
    }
    u32::try_from(total).ok()
}

/// A parent the route attaches to, with the listeners that accept it.
struct Attached<'w> {
    parent_index: u32,
    origin: Arc<Origin>,
    listeners: Vec<&'w Listener>,
    /// The parent's other candidate listeners, each with why it refuses the route (kept for
    /// explanations; empty, so without an allocation, when every candidate accepts).
    refused: Vec<(&'w Listener, String)>,
}

/// Requested hostnames (spec and annotation), validated.
struct Requested<'r> {
    hosts: Vec<(Cow<'r, str>, NameSource)>,
    any_written: bool,
    /// Whether a route that writes no hostname inherits its listeners' hostnames: not when
    /// `gateway-hostname-source` restricts the route's names to its spec or its annotation.
    inherits: bool,
}

fn requested_hostnames<'r>(
    cfg: &Config,
    route: &'r Route,
    findings: &mut Vec<Finding>,
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
            Err(err) => findings.push(Finding {
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

fn finding(reason: Reason, hostname: Option<&str>, field: String, message: String) -> Finding {
    Finding {
        reason,
        hostname: hostname.map(Into::into),
        field: field.into(),
        message: message.into(),
    }
}

/// Resolves one parentRef: the listeners that accept the route, or a finding explaining why none.
fn attach_parent<'w, W: World>(
    world: &'w W,
    cfg: &Config,
    route: &Route,
    index: usize,
    parent_ref: &ParentRef,
    findings: &mut Vec<Finding>,
) -> Option<Attached<'w>> {
    // Built only for a finding: most parents attach without one.
    let field = || format!("spec.parentRefs[{index}]");
    let kind = parent_ref.target_kind()?;
    if kind == ObjectKind::ListenerSet && !cfg.listener_sets {
        return None;
    }
    if !parent_accepted_by_status(cfg, route, parent_ref) {
        return None;
    }
    let (ns, name) = (&*parent_ref.namespace, &*parent_ref.name);
    let not_found = |what: String| {
        finding(
            Reason::ParentNotFound,
            None,
            field(),
            format!("{what}; no DNS will be published through it until it exists"),
        )
    };
    let (gateway, listener_set, listeners, owner_ns, shared_origin) = match kind {
        ObjectKind::Gateway => {
            let Some((gw, origin)) = world
                .gateway_with_origin(ns, name)
                .filter(|(gw, _)| gateway_in_scope(cfg, gw))
            else {
                let what = match world
                    .gateway(ns, name)
                    .and_then(|gw| other_controller(cfg, &gw.meta))
                {
                    Some(other) => format!(
                        "Gateway {ns}/{name} is annotated for another DNS controller ({other})"
                    ),
                    None => format!("Gateway {ns}/{name} is not known to gateway-dns"),
                };
                findings.push(not_found(what));
                return None;
            };
            (gw, None, &gw.listeners, ns, origin.cloned())
        }
        _ => {
            let Some(ls) = world.listener_set(ns, name) else {
                findings.push(not_found(format!(
                    "ListenerSet {ns}/{name} is not known to gateway-dns"
                )));
                return None;
            };
            if let Some(other) = other_controller(cfg, &ls.meta) {
                findings.push(not_found(format!(
                    "ListenerSet {ns}/{name} is annotated for another DNS controller ({other})"
                )));
                return None;
            }
            let Some(gw) = world
                .gateway(&ls.parent.namespace, &ls.parent.name)
                .filter(|gw| gateway_in_scope(cfg, gw))
            else {
                findings.push(not_found(format!(
                        "ListenerSet {ns}/{name} belongs to Gateway {}/{}, which is not known to gateway-dns",
                        ls.parent.namespace, ls.parent.name
                    )));
                return None;
            };
            let (gw_ns, gw_name) = (gw.meta.namespace(), gw.meta.name());
            let refusal = if !admits_listener_set(world, gw, ns) {
                Some(format!(
                    "Gateway {gw_ns}/{gw_name} does not allow ListenerSet {ns}/{name}: its spec.allowedListeners exclude namespace {ns}; attach to the Gateway directly or ask its owner to allow it"
                ))
            } else {
                match (cfg.attachment, ls.accepted) {
                    (_, Some(Acceptance::Rejected)) => Some(format!(
                        "ListenerSet {ns}/{name} was not accepted by the controller of Gateway {gw_ns}/{gw_name} (Accepted=False); see its status.conditions"
                    )),
                    (AttachmentMode::Status, accepted)
                        if accepted != Some(Acceptance::Accepted) =>
                    {
                        Some(format!(
                            "ListenerSet {ns}/{name} is not accepted yet by the controller of Gateway {gw_ns}/{gw_name} (no Accepted=True); its DNS follows once it is"
                        ))
                    }
                    _ => None,
                }
            };
            if let Some(message) = refusal {
                findings.push(finding(
                    Reason::NotAllowedByListeners,
                    None,
                    field(),
                    message,
                ));
                return None;
            }
            let origin = world.listener_set_origin(gw, ls);
            (gw, Some(ls), &ls.listeners, ns, origin)
        }
    };
    let candidates: Vec<&Listener> = listeners
        .iter()
        .filter(|l| {
            parent_ref
                .section_name
                .as_deref()
                .is_none_or(|s| s == &*l.name)
        })
        .filter(|l| parent_ref.port.is_none_or(|p| l.port == Some(p)))
        .collect();
    let parent_label = || match listener_set {
        Some(_) => format!("ListenerSet {ns}/{name}"),
        None => format!("Gateway {ns}/{name}"),
    };
    if candidates.is_empty() {
        let mut wanted = Vec::new();
        if let Some(section) = &parent_ref.section_name {
            wanted.push(format!("sectionName {section}"));
        }
        if let Some(port) = parent_ref.port {
            wanted.push(format!("port {port}"));
        }
        let what = if wanted.is_empty() {
            "any listener".to_owned()
        } else {
            wanted.join(" and ")
        };
        findings.push(finding(
            Reason::NoMatchingParent,
            None,
            field(),
            format!(
                "{} has no listener matching {what}; check sectionName/port",
                parent_label()
            ),
        ));
        return None;
    }
    let mut refused: Vec<(&Listener, String)> = Vec::new();
    let status_only = cfg.attachment == AttachmentMode::Status && listener_set.is_some();
    let accepted: Vec<&Listener> = candidates
        .into_iter()
        .filter(
            |l| match listener_refusal(world, l, owner_ns, route, status_only) {
                None => true,
                Some(why) => {
                    refused.push((l, why));
                    false
                }
            },
        )
        .collect();
    if accepted.is_empty() {
        let refusals: Vec<&str> = refused.iter().map(|(_, why)| why.as_str()).collect();
        findings.push(finding(
            Reason::NotAllowedByListeners,
            None,
            field(),
            format!(
                "{} refuses this {}: {}",
                parent_label(),
                route.kind(),
                refusals.join("; ")
            ),
        ));
        return None;
    }
    // Without an origin kept by the World (plain data in tests, `check`), there is no address
    // history, so no grace either.
    let origin = shared_origin.unwrap_or_else(|| {
        Arc::new(origin_of(
            cfg,
            gateway,
            listener_set.map(|ls| &**ls),
            None,
            0,
        ))
    });
    Some(Attached {
        parent_index: field_index(index),
        origin,
        listeners: accepted,
        refused,
    })
}

/// Where the names of a route attached to `gateway` (through `listener_set`, if any) point: the
/// target annotation, else the Gateway's addresses, else, while `loss` is in its grace at `now`,
/// the addresses it last had (ARCHITECTURE.md, "Address-loss grace").
pub fn origin_of(
    cfg: &Config,
    gateway: &Gateway,
    listener_set: Option<&ListenerSet>,
    loss: Option<&AddressLoss>,
    now: i64,
) -> Origin {
    let grace = cfg.address_loss_grace;
    // `--target-cidr` / `--exclude-target-cidr` choose among the Gateway's own addresses (a
    // target annotation is an explicit choice and is taken whole).
    let chosen = |addresses: &[Address]| -> Arc<[Address]> {
        if cfg.scope.targets.is_empty() {
            return sorted_targets(addresses.to_vec());
        }
        sorted_targets(
            addresses
                .iter()
                .filter(|a| cfg.scope.targets.keeps(a))
                .cloned()
                .collect(),
        )
    };
    let overridden = listener_set
        .and_then(|ls| target_override(cfg, &ls.meta.annotations))
        .or_else(|| target_override(cfg, &gateway.meta.annotations));
    let (targets, kept) = match (overridden, loss) {
        (Some(targets), _) => (sorted_targets(targets), None),
        (None, Some(loss)) if gateway.addresses.is_empty() && loss.in_grace(now, grace) => (
            chosen(&loss.addresses),
            Some(KeptAddresses {
                since: loss.since,
                until: loss.until(grace),
            }),
        ),
        (None, _) => (chosen(&gateway.addresses), None),
    };
    let ttl = listener_set
        .and_then(|ls| cfg.annotation(&ls.meta.annotations, "ttl"))
        .or_else(|| cfg.annotation(&gateway.meta.annotations, "ttl"))
        .and_then(parse_ttl);
    Origin {
        gateway: format!("{}/{}", gateway.meta.namespace(), gateway.meta.name()).into(),
        listener_set: listener_set
            .map(|ls| format!("{}/{}", ls.meta.namespace(), ls.meta.name()).into()),
        targets,
        kept,
        ttl,
    }
}

/// In `status` mode a parent counts only when the route's status says Accepted=True; in `spec`
/// mode a parent is dropped only when the status says Accepted=False for the current generation.
fn parent_accepted_by_status(cfg: &Config, route: &Route, parent_ref: &ParentRef) -> bool {
    let status = parent_ref.status.as_ref();
    match cfg.attachment {
        AttachmentMode::Status => status.is_some_and(|s| s.accepted == Acceptance::Accepted),
        AttachmentMode::Spec => !status.is_some_and(|s| {
            s.accepted == Acceptance::Rejected
                && s.observed_generation
                    .get()
                    .is_none_or(|g| Some(g) == route.meta.generation.get())
        }),
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
    let mut attached: Vec<Attached> = route
        .parent_refs
        .iter()
        .enumerate()
        .filter_map(|(i, p)| attach_parent(world, cfg, route, i, p, &mut findings))
        .collect();
    if let Some(targets) = route_target_override(world, cfg, route, &mut findings) {
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

    let mut claims: Vec<Claim> = Vec::new();
    if requested.any_written {
        let mut matched_any = false;
        let mut outside = Vec::new();
        let listener_hosts = ListenerHosts::of(&attached);
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
            let listener_hosts = listener_hostnames(&attached);
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
    } else if !requested.inherits {
        // `gateway-hostname-source` names where the route's names come from; listener hostnames
        // are not among them, even with `--allow-inherited-wildcards` (as in external-dns).
    } else {
        for parent in &attached {
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
    for parent in &attached {
        if let Some(kept) = parent.origin.kept
            && !claims.is_empty()
        {
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
        if parent.origin.targets.is_empty() && !claims.is_empty() {
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
    super::ownership::keep_allowed_claims(world, cfg, route, &mut claims, &mut findings);
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

/// The CNAME rules (ARCHITECTURE.md, "Records and conflicts"): a CNAME is the only record of its
/// name and has one target. A claim whose targets break them gets `CnameNotAllowed`; it is kept
/// (its addresses, or its first hostname, are published) unless its CNAME would sit at a zone
/// apex, where nothing of it can be.
fn cname_allowed(cfg: &Config, claim: &Claim, findings: &mut Vec<Finding>) -> bool {
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
    findings: &mut Vec<Finding>,
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

/// A field index as it is kept in a [`NameSource`]: a route with more than `u32::MAX` entries
/// cannot be decoded, but the index saturates rather than wrap.
fn field_index(index: usize) -> u32 {
    u32::try_from(index).unwrap_or(u32::MAX)
}

/// `TooManyHostnames` or `TooManyParentRefs` when the route is over a cap.
fn size_finding(cfg: &Config, route: &Route) -> Option<Finding> {
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
        for group in groups {
            out.push((host, &self.groups[group].1));
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

/// One listener a route attaches to, and the hostnames it gets there (the intersections).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerAttachment {
    /// `Kind/namespace/name` of the Gateway or ListenerSet.
    pub parent: String,
    pub listener: String,
    /// Intersected hostnames, sorted; for a hostless route, the listener's own hostname if any.
    pub hostnames: Vec<String>,
}

/// Which listeners a route attaches to and the hostnames it gets on each (for conformance
/// reporting and explanations). Listeners where the route's hostnames intersect nothing are
/// left out, as the Gateway API does.
pub fn attachments<W: World>(world: &W, cfg: &Config, route: &Route) -> Vec<ListenerAttachment> {
    let mut scratch = Vec::new();
    let requested = requested_hostnames(cfg, route, &mut scratch);
    let mut out = Vec::new();
    for (i, parent_ref) in route.parent_refs.iter().enumerate() {
        let Some(parent) = attach_parent(world, cfg, route, i, parent_ref, &mut scratch) else {
            continue;
        };
        let kind = parent_ref.target_kind().map_or("Gateway", ObjectKind::kind);
        for listener in &parent.listeners {
            let mut hostnames: Vec<String> = if requested.any_written {
                requested
                    .hosts
                    .iter()
                    .filter_map(|(h, _)| intersect(listener.hostname.as_deref(), Some(h)).flatten())
                    .map(str::to_owned)
                    .collect()
            } else {
                listener.hostname.iter().map(|h| h.to_string()).collect()
            };
            if requested.any_written && hostnames.is_empty() {
                continue;
            }
            hostnames.sort();
            hostnames.dedup();
            out.push(ListenerAttachment {
                parent: format!("{kind}/{}/{}", parent_ref.namespace, parent_ref.name),
                listener: listener.name.to_string(),
                hostnames,
            });
        }
    }
    out
}

/// What one listener of a parent makes of a route (for explanations).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerVerdict {
    pub name: String,
    /// The listener's hostname; None serves any name.
    pub hostname: Option<String>,
    /// Why the listener refuses the route; None when it takes it.
    pub refusal: Option<String>,
    /// The names the route gets on this listener (intersections; for a route without
    /// hostnames, the listener's own hostname); empty on a refusing listener.
    pub hostnames: Vec<String>,
}

/// One `spec.parentRefs[index]` of a route as the engine resolved it (for explanations).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParentVerdict {
    pub index: usize,
    /// `Kind/namespace/name` of the parent the reference names.
    pub parent: String,
    pub section_name: Option<String>,
    pub port: Option<i32>,
    /// Where names published through this parent point; None when the route does not attach
    /// through it (the route's findings on `spec.parentRefs[index]` say why).
    pub origin: Option<Arc<Origin>>,
    /// The candidate listeners (after sectionName and port), taking or refusing the route.
    pub listeners: Vec<ListenerVerdict>,
}

/// The route's requested hostnames (spec and annotation, valid ones, canonical) with the field
/// each came from, as the engine reads them under `cfg`.
pub fn requested_names(cfg: &Config, route: &Route) -> Vec<(String, NameSource)> {
    let mut scratch = Vec::new();
    requested_hostnames(cfg, route, &mut scratch)
        .hosts
        .into_iter()
        .map(|(name, source)| (name.into_owned(), source))
        .collect()
}

/// Each parentRef of a route: attached or not, through which listeners, refused by which and
/// why — the same resolution [`evaluate_route`] makes.
pub fn parent_verdicts<W: World>(world: &W, cfg: &Config, route: &Route) -> Vec<ParentVerdict> {
    let mut scratch = Vec::new();
    let requested = requested_hostnames(cfg, route, &mut scratch);
    let served = |listener: &Listener| -> Vec<String> {
        let mut hostnames: Vec<String> = if requested.any_written {
            requested
                .hosts
                .iter()
                .filter_map(|(h, _)| intersect(listener.hostname.as_deref(), Some(h)).flatten())
                .map(str::to_owned)
                .collect()
        } else {
            listener.hostname.iter().map(|h| h.to_string()).collect()
        };
        hostnames.sort();
        hostnames.dedup();
        hostnames
    };
    let mut out = Vec::with_capacity(route.parent_refs.len());
    for (index, parent_ref) in route.parent_refs.iter().enumerate() {
        let kind = parent_ref
            .target_kind()
            .map_or_else(|| parent_ref.kind().to_owned(), |k| k.kind().to_owned());
        let mut verdict = ParentVerdict {
            index,
            parent: format!("{kind}/{}/{}", parent_ref.namespace, parent_ref.name),
            section_name: parent_ref.section_name.as_deref().map(str::to_owned),
            port: parent_ref.port,
            origin: None,
            listeners: Vec::new(),
        };
        if let Some(attached) = attach_parent(world, cfg, route, index, parent_ref, &mut scratch) {
            verdict
                .listeners
                .extend(attached.listeners.iter().map(|l| ListenerVerdict {
                    name: l.name.to_string(),
                    hostname: l.hostname.as_deref().map(str::to_owned),
                    refusal: None,
                    hostnames: served(l),
                }));
            verdict
                .listeners
                .extend(attached.refused.iter().map(|(l, why)| ListenerVerdict {
                    name: l.name.to_string(),
                    hostname: l.hostname.as_deref().map(str::to_owned),
                    refusal: Some(why.clone()),
                    hostnames: Vec::new(),
                }));
            verdict.listeners.sort_by(|a, b| a.name.cmp(&b.name));
            verdict.origin = Some(attached.origin);
        }
        out.push(verdict);
    }
    out
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
    use crate::model::AllowedRoutes;

    #[test]
    fn ttl_forms() {
        assert_eq!(parse_ttl("60"), Some(60));
        assert_eq!(parse_ttl("1m30s"), Some(90));
        assert_eq!(parse_ttl("2h"), Some(7200));
        assert_eq!(parse_ttl("soon"), None);
        assert_eq!(parse_ttl("10x"), None);
        assert_eq!(parse_ttl("5m3"), None);
    }

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
        };
        let origin = |gateway: &str| {
            Arc::new(Origin {
                gateway: gateway.into(),
                listener_set: None,
                targets: Arc::from(Vec::new()),
                kept: None,
                ttl: None,
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

    #[test]
    fn protocols() {
        assert!(protocol_compatible("HTTP", "HTTPS"));
        assert!(protocol_compatible("TCP", "TLS"));
        assert!(!protocol_compatible("TLS", "TCP"));
        assert!(!protocol_compatible("TCP", "HTTPS"));
        assert!(protocol_compatible("UDP", "UDP"));
    }
}
