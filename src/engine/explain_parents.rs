//! A route's parentRefs and listeners as `explain` shows them (and the conformance tests read):
//! the same resolution [`super::names::evaluate_route`] makes, kept per parentRef and listener
//! with why each refuses.

use std::sync::Arc;

use super::Config;
use super::attach::attach_parent;
use super::hostname::names_on_listener;
use super::names::{Requested, requested_hostnames};
use super::world::{NameSource, Origin, World};
use crate::model::{Listener, ObjectKind, Route};

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
            let hostnames = served(&requested, listener);
            if requested.any_written && hostnames.is_empty() {
                continue;
            }
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
pub struct ListenerResolution {
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
pub struct ParentResolution {
    pub index: usize,
    /// `Kind/namespace/name` of the parent the reference names.
    pub parent: String,
    pub section_name: Option<String>,
    pub port: Option<i32>,
    /// Where names published through this parent point; None when the route does not attach
    /// through it (the route's findings on `spec.parentRefs[index]` say why).
    pub origin: Option<Arc<Origin>>,
    /// The candidate listeners (after sectionName and port), taking or refusing the route.
    pub listeners: Vec<ListenerResolution>,
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
pub fn parent_resolutions<W: World>(
    world: &W,
    cfg: &Config,
    route: &Route,
) -> Vec<ParentResolution> {
    let mut scratch = Vec::new();
    let requested = requested_hostnames(cfg, route, &mut scratch);
    let mut out = Vec::with_capacity(route.parent_refs.len());
    for (index, parent_ref) in route.parent_refs.iter().enumerate() {
        let kind = parent_ref
            .target_kind()
            .map_or_else(|| parent_ref.kind().to_owned(), |k| k.kind().to_owned());
        let mut resolution = ParentResolution {
            index,
            parent: format!("{kind}/{}/{}", parent_ref.namespace, parent_ref.name),
            section_name: parent_ref.section_name.as_deref().map(str::to_owned),
            port: parent_ref.port,
            origin: None,
            listeners: Vec::new(),
        };
        if let Some(attached) = attach_parent(world, cfg, route, index, parent_ref, &mut scratch) {
            resolution
                .listeners
                .extend(attached.listeners.iter().map(|l| ListenerResolution {
                    name: l.name.to_string(),
                    hostname: l.hostname.as_deref().map(str::to_owned),
                    refusal: None,
                    hostnames: served(&requested, l),
                }));
            resolution
                .listeners
                .extend(attached.refused.iter().map(|(l, why)| ListenerResolution {
                    name: l.name.to_string(),
                    hostname: l.hostname.as_deref().map(str::to_owned),
                    refusal: Some(why.clone()),
                    hostnames: Vec::new(),
                }));
            resolution.listeners.sort_by(|a, b| a.name.cmp(&b.name));
            resolution.origin = Some(attached.origin);
        }
        out.push(resolution);
    }
    out
}

/// The names the route gets on `listener`, as [`names_on_listener`] meets them.
fn served(requested: &Requested, listener: &Listener) -> Vec<String> {
    let written = requested
        .any_written
        .then(|| requested.hosts.iter().map(|(h, _)| &**h));
    names_on_listener(listener.hostname.as_deref(), written)
}
