//! The claims on one name and the one order between them (ARCHITECTURE.md, "Records and
//! conflicts"): oldest route first, then namespace/name, then Gateway. Settling a name and
//! deciding its owner namespace both read claims in this order; neither restates it.

use std::cmp::Ordering;

use serde::Serialize;

use super::world::{Claim, RouteId, World};
use crate::model::Route;

/// One route's claim on a name.
#[derive(Clone, Copy)]
pub struct Claimant<'a> {
    pub route: &'a Route,
    pub claim: &'a Claim,
    /// The route's `ttl` annotation, else its Gateway's or ListenerSet's.
    pub ttl: Option<u32>,
}

impl Claimant<'_> {
    pub fn route_ref(&self) -> String {
        route_ref(self.route)
    }
}

/// `Kind/namespace/name`; built by hand, as every finding of every review names its route.
pub fn route_ref(route: &Route) -> String {
    let (kind, namespace, name) = (
        route.kind().kind(),
        route.meta.namespace(),
        route.meta.name(),
    );
    let mut out = String::with_capacity(kind.len() + namespace.len() + name.len() + 2);
    out.push_str(kind);
    out.push('/');
    out.push_str(namespace);
    out.push('/');
    out.push_str(name);
    out
}

/// Oldest route first (creationTimestamp; objects without one count as newest), then
/// namespace/name, then Gateway namespace/name: a total order, so a result never flaps.
pub fn precedence(a: &Claimant, b: &Claimant) -> Ordering {
    precedence_deciding(a, b).0
}

/// The key of [`precedence`] that orders two claims (the first that differs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum PrecedenceKey {
    /// The older route comes first (a route without a creationTimestamp counts as newest).
    CreationTimestamp,
    Namespace,
    Name,
    Kind,
    Gateway,
    ListenerSet,
    /// The two claims are the same.
    Equal,
}

impl PrecedenceKey {
    pub fn as_str(self) -> &'static str {
        match self {
            PrecedenceKey::CreationTimestamp => "creationTimestamp",
            PrecedenceKey::Namespace => "namespace",
            PrecedenceKey::Name => "name",
            PrecedenceKey::Kind => "kind",
            PrecedenceKey::Gateway => "gateway",
            PrecedenceKey::ListenerSet => "listenerSet",
            PrecedenceKey::Equal => "equal",
        }
    }
}

/// [`precedence`] with the key that decided it, so an explanation names the very comparison
/// the sync loop makes.
pub fn precedence_deciding(a: &Claimant, b: &Claimant) -> (Ordering, PrecedenceKey) {
    let created = |c: &Claimant| {
        let created = c.route.meta.created.get();
        (created.is_none(), created)
    };
    // Compared lazily, key by key: the webhook sorts incumbents on every review.
    let decided = |order: Ordering, key| order.is_ne().then_some((order, key));
    decided(
        created(a).cmp(&created(b)),
        PrecedenceKey::CreationTimestamp,
    )
    .or_else(|| {
        decided(
            a.route.meta.namespace().cmp(b.route.meta.namespace()),
            PrecedenceKey::Namespace,
        )
    })
    .or_else(|| {
        decided(
            a.route.meta.name().cmp(b.route.meta.name()),
            PrecedenceKey::Name,
        )
    })
    .or_else(|| decided(a.route.kind().cmp(&b.route.kind()), PrecedenceKey::Kind))
    .or_else(|| {
        decided(
            a.claim.origin.gateway.cmp(&b.claim.origin.gateway),
            PrecedenceKey::Gateway,
        )
    })
    .or_else(|| {
        decided(
            a.claim
                .origin
                .listener_set
                .cmp(&b.claim.origin.listener_set),
            PrecedenceKey::ListenerSet,
        )
    })
    .unwrap_or((Ordering::Equal, PrecedenceKey::Equal))
}

/// Every claim on `name`, in precedence order.
pub fn claimants<'a, W: World>(world: &'a W, name: &str) -> Vec<Claimant<'a>> {
    claimants_among(world, name, world.claimants(name))
}

pub(super) fn claimants_among<'a, W: World>(
    world: &'a W,
    name: &str,
    ids: &[RouteId],
) -> Vec<Claimant<'a>> {
    let mut out = Vec::new();
    for id in ids {
        if let Some(entry) = world.route(id) {
            for claim in entry.eval.claims_on(name) {
                out.push(Claimant {
                    route: &entry.route,
                    claim,
                    ttl: entry.eval.ttl.or(claim.origin.ttl),
                });
            }
        }
    }
    if out.len() > 1 {
        out.sort_by(precedence);
    }
    out
}
