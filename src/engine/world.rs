//! What the engine reads and what it keeps per route: the [`World`] trait, through which it looks
//! up objects and the claimants of a name, and the evaluation of a route. The index implements
//! `World`; the engine never sees the index itself (ARCHITECTURE.md, "Import rules").

use std::sync::Arc;

use super::health::TargetHealth;
use super::zone::ZoneView;
use super::{Config, Reason, concat, decimal};
use crate::model::{Address, Gateway, ListenerSet, Name, Namespace, ObjectKey, Route};

/// A route's identity, shared by every map that mentions the route.
pub type RouteId = ObjectKey;

/// A route with its current evaluation.
#[derive(Clone, Debug)]
pub struct RouteEntry {
    pub route: Arc<Route>,
    pub eval: Arc<RouteEval>,
}

/// Read-only lookups the engine needs: objects by name for attachment, and routes, their
/// evaluations and the routes claiming a DNS name for records and conflicts. Generic callers
/// (never `dyn`): the webhook evaluates through it on every review.
pub trait World {
    /// The configuration the evaluations were made under.
    fn config(&self) -> &Config;
    fn namespace(&self, name: &str) -> Option<&Namespace>;
    fn gateway(&self, namespace: &str, name: &str) -> Option<&Arc<Gateway>>;
    fn listener_set(&self, namespace: &str, name: &str) -> Option<&Arc<ListenerSet>>;
    /// The Gateway and, when one is kept, the origin its directly attached routes share (built
    /// from this very Gateway object), found in one lookup.
    fn gateway_with_origin(
        &self,
        namespace: &str,
        name: &str,
    ) -> Option<(&Arc<Gateway>, Option<&Arc<Origin>>)> {
        self.gateway(namespace, name).map(|gateway| (gateway, None))
    }
    /// The same for routes attached through `listener_set` (a child of `gateway`).
    fn listener_set_origin(
        &self,
        _gateway: &Arc<Gateway>,
        _listener_set: &Arc<ListenerSet>,
    ) -> Option<Arc<Origin>> {
        None
    }
    /// A route and its evaluation.
    fn route(&self, key: &ObjectKey) -> Option<&RouteEntry>;
    /// Every route with its evaluation, in key order.
    fn routes(&self) -> impl Iterator<Item = (&RouteId, &RouteEntry)>;
    /// The routes claiming a DNS name, sorted by key.
    fn claimants(&self, name: &str) -> &[RouteId];
    /// Every DNS name some route claims, in name order, with its claimants.
    fn claims(&self) -> impl Iterator<Item = (&str, &[RouteId])>;
    /// The targets failing their health checks (ARCHITECTURE.md, "Health checks"); none where
    /// nothing probes (`check`, the webhook's what-ifs over plain worlds).
    fn target_health(&self) -> &TargetHealth {
        TargetHealth::none()
    }
    /// The names another owner, or no owner, holds in the managed zones (ARCHITECTURE.md,
    /// "Many clusters, one zone"); none where no zone was read.
    fn zone(&self) -> &ZoneView {
        ZoneView::none()
    }
}

/// Where a name's addresses come from: a Gateway, possibly through one of its ListenerSets.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Origin {
    /// `namespace/name` of the Gateway.
    pub gateway: Box<str>,
    /// `namespace/name` of the ListenerSet the route attached through, if any.
    pub listener_set: Option<Box<str>>,
    /// Sorted, without duplicates. Empty when the Gateway has no address yet.
    pub targets: Arc<[Address]>,
    /// Set while the Gateway has lost its addresses and `targets` are the ones it last had
    /// (ARCHITECTURE.md, "Address-loss grace").
    pub kept: Option<KeptAddresses>,
    /// The `ttl` annotation of the ListenerSet, else of the Gateway: the TTL of names published
    /// through it whose route sets none (ARCHITECTURE.md, "Names").
    pub ttl: Option<u32>,
    /// The Gateway (and ListenerSet, and at least one listener the route attached through)
    /// does not say it is not programmed. An origin that does gives its targets to a name only
    /// when no other origin of the name can (ARCHITECTURE.md, "Readiness").
    pub programmed: bool,
}

/// When a Gateway lost its addresses and until when its last ones are kept (Unix seconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KeptAddresses {
    pub since: i64,
    pub until: i64,
}

impl Origin {
    /// The targets, comma-separated, written into one String (it is in every conflict message).
    pub fn targets_text(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        for (i, target) in self.targets.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            match target {
                Address::Hostname(name) => out.push_str(name),
                // Writing into a String cannot fail.
                Address::Ip(ip) => {
                    let _ = write!(out, "{ip}");
                }
            }
        }
        out
    }
}

/// Which field of the route produced a name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NameSource {
    SpecHostname(u32),
    Annotation,
    /// Inherited from the listener of `spec.parentRefs[i]`.
    Inherited(u32),
}

impl NameSource {
    /// The field path of the name, the annotation named with the configured prefix.
    pub fn field(self, cfg: &Config) -> String {
        let (prefix, index) = match self {
            NameSource::SpecHostname(i) => ("spec.hostnames[", i),
            NameSource::Annotation => return cfg.annotation_field("hostname"),
            NameSource::Inherited(i) => ("spec.parentRefs[", i),
        };
        // u32 always fits a usize on the targets gateway-dns builds for (32 and 64 bits).
        let index = usize::try_from(index).unwrap_or(usize::MAX);
        concat(&[prefix, decimal(index, &mut [0; 20]), "]"])
    }
}

/// One DNS name a route would publish through one origin.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Claim {
    /// Shared with the index's name → claimants map.
    pub name: Name,
    pub origin: Arc<Origin>,
    pub source: NameSource,
}

/// A finding before its action is resolved.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct RawFinding {
    pub reason: Reason,
    pub hostname: Option<Box<str>>,
    pub field: Box<str>,
    pub message: Box<str>,
}

/// What one route contributes, computed from it and the Gateways/ListenerSets/Namespaces it names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RouteEval {
    /// Sorted by name; one entry per (name, distinct origin).
    pub claims: Box<[Claim]>,
    /// Findings intrinsic to the route (conflicts are found across routes, elsewhere).
    pub findings: Box<[RawFinding]>,
    pub ttl: Option<u32>,
    /// False when the route is outside this installation's scope: it contributes nothing.
    pub in_scope: bool,
}

impl RouteEval {
    pub fn names(&self) -> impl Iterator<Item = &str> {
        let mut last: Option<&str> = None;
        self.claims.iter().filter_map(move |c| {
            let name = &*c.name;
            (last.replace(name) != Some(name)).then_some(name)
        })
    }

    /// The claims on `name`, found by binary search (claims are sorted by name).
    pub fn claims_on(&self, name: &str) -> &[Claim] {
        let start = self.claims.partition_point(|c| &*c.name < name);
        let len = self.claims[start..].partition_point(|c| &*c.name == name);
        &self.claims[start..start + len]
    }

    /// Does this evaluation claim `name`?
    pub fn claims_name(&self, name: &str) -> bool {
        !self.claims_on(name).is_empty()
    }

    pub fn heap_bytes(&self) -> usize {
        self.claims.len() * std::mem::size_of::<Claim>()
            + self.claims.iter().map(|c| c.name.len()).sum::<usize>()
            + self
                .findings
                .iter()
                .map(|f| std::mem::size_of::<RawFinding>() + f.message.len() + f.field.len())
                .sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_read_as_their_display_forms_joined() {
        let targets: Vec<Address> = ["203.0.113.1", "2001:db8::1", "lb.example.net"]
            .into_iter()
            .filter_map(Address::parse)
            .collect();
        let origin = Origin {
            gateway: "infra/gw".into(),
            listener_set: None,
            targets: targets.clone().into(),
            kept: None,
            ttl: None,
            programmed: true,
        };
        let joined: Vec<String> = targets.iter().map(ToString::to_string).collect();
        assert_eq!(origin.targets_text(), joined.join(", "));
        assert_eq!(
            origin.targets_text(),
            "203.0.113.1, 2001:db8::1, lb.example.net"
        );
        let no_address = Origin {
            targets: Vec::new().into(),
            ..origin
        };
        assert_eq!(no_address.targets_text(), "");
    }
}
