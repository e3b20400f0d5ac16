//! Attachment (ARCHITECTURE.md, "Attachment"): which listeners of the Gateways and ListenerSets a
//! route names take it, and where names published through them point (their origin).

use std::sync::Arc;

use super::grace::AddressLoss;
use super::world::{KeptAddresses, Origin, RawFinding, World};
use super::{AttachmentMode, Config, Reason, selector};
use crate::model::{
    Acceptance, Address, Gateway, Listener, ListenerSet, Meta, NamespacesFrom, ObjectKind,
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
pub(super) fn target_override(cfg: &Config, annotations: &StringMap) -> Option<Vec<Address>> {
    let raw = cfg.annotation(annotations, "target")?;
    Some(raw.split(',').filter_map(Address::parse).collect())
}

pub(super) fn sorted_targets(mut targets: Vec<Address>) -> Arc<[Address]> {
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
pub(super) struct Attached<'w> {
    pub(super) parent_index: u32,
    pub(super) origin: Arc<Origin>,
    pub(super) listeners: Vec<&'w Listener>,
    /// The parent's other candidate listeners, each with why it refuses the route (kept for
    /// explanations; empty, so without an allocation, when every candidate accepts).
    pub(super) refused: Vec<(&'w Listener, String)>,
}

pub(super) fn finding(
    reason: Reason,
    hostname: Option<&str>,
    field: String,
    message: String,
) -> RawFinding {
    RawFinding {
        reason,
        hostname: hostname.map(Into::into),
        field: field.into(),
        message: message.into(),
    }
}

/// Resolves one parentRef: the listeners that accept the route, or a finding explaining why none.
pub(super) fn attach_parent<'w, W: World>(
    world: &'w W,
    cfg: &Config,
    route: &Route,
    index: usize,
    parent_ref: &ParentRef,
    findings: &mut Vec<RawFinding>,
) -> Option<Attached<'w>> {
    let kind = parent_ref.target_kind()?;
    if kind == ObjectKind::ListenerSet && !cfg.listener_sets {
        return None;
    }
    if !parent_accepted_by_status(cfg, parent_ref) {
        return None;
    }
    let parent = match kind {
        ObjectKind::Gateway => resolve_gateway(world, cfg, index, parent_ref, findings)?,
        _ => resolve_listener_set(world, cfg, index, parent_ref, findings)?,
    };
    // With `--attachment status` the route's status entry for this parent says which listeners
    // count (its sectionName and port), as external-dns reads it; else the spec does.
    let (section_name, port) = match (&cfg.attachment, parent_ref.status_listener()) {
        (AttachmentMode::Status, Some(listener)) => listener,
        _ => (parent_ref.section_name.as_deref(), parent_ref.port),
    };
    let candidates = candidate_listeners(&parent, index, parent_ref, section_name, port, findings)?;
    let status_only = cfg.attachment == AttachmentMode::Status && parent.listener_set.is_some();
    let Taking { accepted, refused } =
        split_by_refusal(world, route, &parent_ref.namespace, status_only, candidates);
    if accepted.is_empty() {
        findings.push(refused_by_all(&parent, parent_ref, index, route, &refused));
        return None;
    }
    // Without an origin kept by the World (plain data in tests, `check`), there is no address
    // history, so no grace either.
    let mut origin = parent.shared_origin.unwrap_or_else(|| {
        Arc::new(origin_of(
            cfg,
            parent.gateway,
            parent.listener_set.map(|ls| &**ls),
            None,
            0,
        ))
    });
    if origin.programmed && !accepted.iter().any(|l| l.programmed) {
        // Every listener that takes the route says it is not programmed (or conflicts): the
        // route's names come through an origin that does not serve. Rare, so made per route.
        origin = Arc::new(Origin {
            programmed: false,
            ..(*origin).clone()
        });
    }
    Some(Attached {
        parent_index: field_index(index),
        origin,
        listeners: accepted,
        refused,
    })
}

/// The Gateway or ListenerSet a parentRef names, found in the World.
struct Parent<'w> {
    gateway: &'w Gateway,
    listener_set: Option<&'w Arc<ListenerSet>>,
    listeners: &'w [Listener],
    /// The origin the World keeps for routes attached through this parent, if any.
    shared_origin: Option<Arc<Origin>>,
}

impl Parent<'_> {
    /// `Gateway ns/name` or `ListenerSet ns/name`, as the parentRef names it.
    fn label(&self, parent_ref: &ParentRef) -> String {
        let (ns, name) = (&*parent_ref.namespace, &*parent_ref.name);
        match self.listener_set {
            Some(_) => format!("ListenerSet {ns}/{name}"),
            None => format!("Gateway {ns}/{name}"),
        }
    }
}

/// The field of `spec.parentRefs[index]`, built only for a finding: most parents attach
/// without one.
fn parent_field(index: usize) -> String {
    format!("spec.parentRefs[{index}]")
}

/// `ParentNotFound` on `spec.parentRefs[index]`.
fn parent_not_found(index: usize, what: String) -> RawFinding {
    finding(
        Reason::ParentNotFound,
        None,
        parent_field(index),
        format!("{what}; no DNS will be published through it until it exists"),
    )
}

/// The Gateway a parentRef names, when it is known and in scope.
fn resolve_gateway<'w, W: World>(
    world: &'w W,
    cfg: &Config,
    index: usize,
    parent_ref: &ParentRef,
    findings: &mut Vec<RawFinding>,
) -> Option<Parent<'w>> {
    let (ns, name) = (&*parent_ref.namespace, &*parent_ref.name);
    let Some((gw, origin)) = world
        .gateway_with_origin(ns, name)
        .filter(|(gw, _)| gateway_in_scope(cfg, gw))
    else {
        let what = match world
            .gateway(ns, name)
            .and_then(|gw| other_controller(cfg, &gw.meta))
        {
            Some(other) => {
                format!("Gateway {ns}/{name} is annotated for another DNS controller ({other})")
            }
            None => format!("Gateway {ns}/{name} is not known to gateway-dns"),
        };
        findings.push(parent_not_found(index, what));
        return None;
    };
    Some(Parent {
        gateway: gw,
        listener_set: None,
        listeners: &gw.listeners,
        shared_origin: origin.cloned(),
    })
}

/// The ListenerSet a parentRef names, when it is known, ours, and its Gateway (known and in
/// scope) allows and accepts it.
fn resolve_listener_set<'w, W: World>(
    world: &'w W,
    cfg: &Config,
    index: usize,
    parent_ref: &ParentRef,
    findings: &mut Vec<RawFinding>,
) -> Option<Parent<'w>> {
    let (ns, name) = (&*parent_ref.namespace, &*parent_ref.name);
    let Some(ls) = world.listener_set(ns, name) else {
        findings.push(parent_not_found(
            index,
            format!("ListenerSet {ns}/{name} is not known to gateway-dns"),
        ));
        return None;
    };
    if let Some(other) = other_controller(cfg, &ls.meta) {
        findings.push(parent_not_found(
            index,
            format!("ListenerSet {ns}/{name} is annotated for another DNS controller ({other})"),
        ));
        return None;
    }
    let Some(gw) = world
        .gateway(&ls.parent.namespace, &ls.parent.name)
        .filter(|gw| gateway_in_scope(cfg, gw))
    else {
        findings.push(parent_not_found(
            index,
            format!(
                "ListenerSet {ns}/{name} belongs to Gateway {}/{}, which is not known to gateway-dns",
                ls.parent.namespace, ls.parent.name
            ),
        ));
        return None;
    };
    if let Some(message) = listener_set_refusal(world, cfg, gw, ls, ns, name) {
        findings.push(finding(
            Reason::NotAllowedByListeners,
            None,
            parent_field(index),
            message,
        ));
        return None;
    }
    Some(Parent {
        gateway: gw,
        listener_set: Some(ls),
        listeners: &ls.listeners,
        shared_origin: world.listener_set_origin(gw, ls),
    })
}

/// Why `gw` does not take the ListenerSet `ns/name`: its allowedListeners exclude the
/// namespace, or its controller rejected (or, in `status` mode, has not accepted) it.
fn listener_set_refusal<W: World>(
    world: &W,
    cfg: &Config,
    gw: &Gateway,
    ls: &ListenerSet,
    ns: &str,
    name: &str,
) -> Option<String> {
    let (gw_ns, gw_name) = (gw.meta.namespace(), gw.meta.name());
    if !admits_listener_set(world, gw, ns) {
        return Some(format!(
            "Gateway {gw_ns}/{gw_name} does not allow ListenerSet {ns}/{name}: its spec.allowedListeners exclude namespace {ns}; attach to the Gateway directly or ask its owner to allow it"
        ));
    }
    match (cfg.attachment, ls.accepted) {
        (_, Some(Acceptance::Rejected)) => Some(format!(
            "ListenerSet {ns}/{name} was not accepted by the controller of Gateway {gw_ns}/{gw_name} (Accepted=False); see its status.conditions"
        )),
        (AttachmentMode::Status, accepted) if accepted != Some(Acceptance::Accepted) => {
            Some(format!(
                "ListenerSet {ns}/{name} is not accepted yet by the controller of Gateway {gw_ns}/{gw_name} (no Accepted=True); its DNS follows once it is"
            ))
        }
        _ => None,
    }
}

/// The parent's listeners the parentRef's sectionName and port select; `NoMatchingParent`
/// when none.
fn candidate_listeners<'w>(
    parent: &Parent<'w>,
    index: usize,
    parent_ref: &ParentRef,
    section_name: Option<&str>,
    port: Option<i32>,
    findings: &mut Vec<RawFinding>,
) -> Option<Vec<&'w Listener>> {
    let candidates: Vec<&Listener> = parent
        .listeners
        .iter()
        .filter(|l| section_name.is_none_or(|s| s == &*l.name))
        .filter(|l| port.is_none_or(|p| l.port == Some(p)))
        .collect();
    if !candidates.is_empty() {
        return Some(candidates);
    }
    let mut wanted = Vec::new();
    if let Some(section) = section_name {
        wanted.push(format!("sectionName {section}"));
    }
    if let Some(port) = port {
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
        parent_field(index),
        format!(
            "{} has no listener matching {what}; check sectionName/port",
            parent.label(parent_ref)
        ),
    ));
    None
}

/// The candidate listeners that take the route, and the others with why each refuses.
struct Taking<'w> {
    accepted: Vec<&'w Listener>,
    refused: Vec<(&'w Listener, String)>,
}

fn split_by_refusal<'w, W: World>(
    world: &W,
    route: &Route,
    owner_ns: &str,
    status_only: bool,
    candidates: Vec<&'w Listener>,
) -> Taking<'w> {
    let mut refused: Vec<(&Listener, String)> = Vec::new();
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
    Taking { accepted, refused }
}

/// `NotAllowedByListeners` when every candidate listener refuses the route, with their reasons.
fn refused_by_all(
    parent: &Parent,
    parent_ref: &ParentRef,
    index: usize,
    route: &Route,
    refused: &[(&Listener, String)],
) -> RawFinding {
    let refusals: Vec<&str> = refused.iter().map(|(_, why)| why.as_str()).collect();
    finding(
        Reason::NotAllowedByListeners,
        None,
        parent_field(index),
        format!(
            "{} refuses this {}: {}",
            parent.label(parent_ref),
            route.kind(),
            refusals.join("; ")
        ),
    )
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
        programmed: gateway.programmed && listener_set.is_none_or(|ls| ls.programmed),
    }
}

/// In `status` mode a parent counts only when the route's status says Accepted=True; in `spec`
/// mode a parent is dropped only when the status says Accepted=False for the current generation.
fn parent_accepted_by_status(cfg: &Config, parent_ref: &ParentRef) -> bool {
    let status = parent_ref.status.as_ref();
    match cfg.attachment {
        AttachmentMode::Status => status.is_some_and(|s| s.accepted == Acceptance::Accepted),
        // Only a rejection of this very reference (same sectionName) drops it from a prediction.
        AttachmentMode::Spec => !status.is_some_and(|s| {
            s.listener
                .as_ref()
                .is_none_or(|l| l.section_name == parent_ref.section_name)
                && s.accepted == Acceptance::Rejected
                && s.current
        }),
    }
}

/// A field index as it is kept in a [`NameSource`]: a route with more than `u32::MAX` entries
/// cannot be decoded, but the index saturates rather than wrap.
pub(super) fn field_index(index: usize) -> u32 {
    u32::try_from(index).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn protocols() {
        assert!(protocol_compatible("HTTP", "HTTPS"));
        assert!(protocol_compatible("TCP", "TLS"));
        assert!(!protocol_compatible("TLS", "TCP"));
        assert!(!protocol_compatible("TCP", "HTTPS"));
        assert!(protocol_compatible("UDP", "UDP"));
    }
}
