//! The in-memory index the engine reads: trimmed projections fed by apply / delete / reset, with
//! each route's evaluation kept current and a DNS-name → claimants map, so evaluating one route
//! costs O(names in that route), not O(cluster).
//!
//! Every map is a persistent (structurally shared) B-tree: a snapshot is an O(1) clone, so readers
//! (webhook requests, a sync pass) work on a consistent view while writers go on. B-trees rather
//! than HAMTs because their dense nodes take less memory per entry (docs/benchmarks.md).

use std::sync::{Arc, Mutex, MutexGuard, Weak};

use arc_swap::ArcSwap;
use imbl::{OrdMap, OrdSet};
use tokio::sync::watch;
use triomphe::ThinArc;

use crate::engine::admission::WhatIf;
use crate::engine::attach::origin_of;
use crate::engine::grace::{AddressLoss, address_loss};
use crate::engine::health::TargetHealth;
use crate::engine::settle::{Outcome, settle_all};
use crate::engine::zone::ZoneView;
use crate::engine::{Config, Origin, RouteEntry, RouteEval, RouteId, World, evaluate_route};
use crate::model::{Gateway, ListenerSet, Name, Namespace, Object, ObjectKey, ObjectKind, Route};

/// Unix seconds now. Injected, so that tests move time without sleeping; the engine is handed
/// the time and never reads a clock (ARCHITECTURE.md, "Address-loss grace").
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// The system's clock.
pub fn system_clock() -> Clock {
    Arc::new(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| {
                i64::try_from(elapsed.as_secs()).unwrap_or(i64::MAX)
            })
    })
}

/// A Gateway with the origin its directly attached routes share, and the addresses it lost, if
/// it lost them and the grace still runs.
#[derive(Clone, Debug)]
struct GatewayEntry {
    gateway: Arc<Gateway>,
    origin: Arc<Origin>,
    loss: Option<AddressLoss>,
}

impl GatewayEntry {
    /// The entry for `gateway`, replacing `previous` (the entry stored for it before) at `now`.
    fn new(
        cfg: &Config,
        gateway: Arc<Gateway>,
        previous: Option<&GatewayEntry>,
        now: i64,
    ) -> GatewayEntry {
        let loss = address_loss(
            previous.map(|p| (&*p.gateway, p.loss.as_ref())),
            &gateway,
            now,
            cfg.address_loss_grace,
        );
        let origin = Arc::new(origin_of(cfg, &gateway, None, loss.as_ref(), now));
        GatewayEntry {
            gateway,
            origin,
            loss,
        }
    }
}

/// The origin of routes attached through a ListenerSet, with the two objects it was built from.
#[derive(Clone, Debug)]
struct ListenerSetOrigin {
    listener_set: Arc<ListenerSet>,
    gateway: Arc<Gateway>,
    origin: Arc<Origin>,
}

/// A consistent, immutable view of everything the engine reads.
#[derive(Clone)]
pub struct Snapshot {
    cfg: Arc<Config>,
    clock: Clock,
    namespaces: OrdMap<Box<str>, Arc<Namespace>>,
    /// Keyed by `namespace/name`.
    gateways: OrdMap<Box<str>, GatewayEntry>,
    listener_sets: OrdMap<Box<str>, Arc<ListenerSet>>,
    /// ListenerSet `namespace/name` → the origin its routes share (while its Gateway is known).
    listener_set_origins: OrdMap<Box<str>, ListenerSetOrigin>,
    routes: OrdMap<RouteId, RouteEntry>,
    /// `Kind/namespace/name` of a parent → routes whose spec.parentRefs name it.
    routes_by_parent: OrdMap<Box<str>, OrdSet<RouteId>>,
    /// Gateway `namespace/name` → ListenerSets (`namespace/name`) whose parentRef names it.
    listener_sets_by_gateway: OrdMap<Box<str>, OrdSet<Box<str>>>,
    /// DNS name → routes claiming it (few per name; kept sorted).
    claims: OrdMap<Name, Claimants>,
    /// The targets failing their health checks, as the prober last set them (ARCHITECTURE.md,
    /// "Health checks"); changes only when a target crosses a threshold.
    health: Arc<TargetHealth>,
    /// The names another owner holds in the managed zones, as the zone view last read them
    /// (ARCHITECTURE.md, "Many clusters, one zone").
    zone: Arc<ZoneView>,
}

/// Runs `lookup` with the `namespace/name` key built on the stack: lookups happen on every
/// admission request, and Kubernetes names are short (a longer pair falls back to the heap).
fn with_ns_name<R>(namespace: &str, name: &str, lookup: impl FnOnce(&str) -> R) -> R {
    let len = namespace.len() + 1 + name.len();
    let mut buffer = [0u8; 320];
    if len > buffer.len() {
        return lookup(&ns_name(namespace, name));
    }
    buffer[..namespace.len()].copy_from_slice(namespace.as_bytes());
    buffer[namespace.len()] = b'/';
    buffer[namespace.len() + 1..len].copy_from_slice(name.as_bytes());
    match std::str::from_utf8(&buffer[..len]) {
        Ok(key) => lookup(key),
        // Two strs joined by '/' are UTF-8; kept total rather than assumed.
        Err(_) => lookup(&ns_name(namespace, name)),
    }
}

/// `sorted` reordered for inserting into an empty B-tree: every other item first, then the
/// rest. Inserted in key order, a full leaf splits in two halves and the left one is never
/// touched again, so leaves stay half full; the second round fills each leaf's gaps up to
/// nearly full (docs/benchmarks.md, "Memory of the index").
fn fill_order<T>(sorted: Vec<T>) -> impl Iterator<Item = T> {
    let mut first = Vec::with_capacity(sorted.len().div_ceil(2));
    let mut second = Vec::with_capacity(sorted.len() / 2);
    for (i, item) in sorted.into_iter().enumerate() {
        if i % 2 == 0 {
            first.push(item);
        } else {
            second.push(item);
        }
    }
    first.into_iter().chain(second)
}

/// The key order of routes: kind, namespace, name.
fn name_of_route(route: &Route) -> (ObjectKind, &str, &str) {
    (route.kind(), route.meta.namespace(), route.meta.name())
}

/// The (namespace, name) an object is listed under.
fn name_of(object: &Object) -> (&str, &str) {
    let meta = object.meta();
    (meta.namespace(), meta.name())
}

fn ns_name(namespace: &str, name: &str) -> Box<str> {
    format!("{namespace}/{name}").into()
}

fn parent_key(kind: ObjectKind, namespace: &str, name: &str) -> Box<str> {
    format!("{kind}/{namespace}/{name}").into()
}

impl World for Snapshot {
    fn config(&self) -> &Config {
        &self.cfg
    }
    fn namespace(&self, name: &str) -> Option<&Namespace> {
        self.namespaces.get(name).map(|ns| &**ns)
    }
    fn gateway(&self, namespace: &str, name: &str) -> Option<&Arc<Gateway>> {
        self.gateway_with_origin(namespace, name)
            .map(|(gateway, _)| gateway)
    }
    fn gateway_with_origin(
        &self,
        namespace: &str,
        name: &str,
    ) -> Option<(&Arc<Gateway>, Option<&Arc<Origin>>)> {
        with_ns_name(namespace, name, |key| self.gateways.get(key))
            .map(|entry| (&entry.gateway, Some(&entry.origin)))
    }
    fn listener_set_origin(
        &self,
        gateway: &Arc<Gateway>,
        listener_set: &Arc<ListenerSet>,
    ) -> Option<Arc<Origin>> {
        let meta = &listener_set.meta;
        with_ns_name(meta.namespace(), meta.name(), |key| {
            self.listener_set_origins.get(key)
        })
        .filter(|entry| {
            Arc::ptr_eq(&entry.listener_set, listener_set) && Arc::ptr_eq(&entry.gateway, gateway)
        })
        .map(|entry| entry.origin.clone())
    }
    fn listener_set(&self, namespace: &str, name: &str) -> Option<&Arc<ListenerSet>> {
        with_ns_name(namespace, name, |key| self.listener_sets.get(key))
    }
    fn route(&self, key: &ObjectKey) -> Option<&RouteEntry> {
        self.routes.get(key)
    }
    fn routes(&self) -> impl Iterator<Item = (&RouteId, &RouteEntry)> {
        self.routes.iter()
    }
    fn claimants(&self, name: &str) -> &[RouteId] {
        self.claims.get(name).map_or(&[], Claimants::as_slice)
    }
    fn claims(&self) -> impl Iterator<Item = (&str, &[RouteId])> {
        self.claims
            .iter()
            .map(|(name, ids)| (&**name, ids.as_slice()))
    }
    fn target_health(&self) -> &TargetHealth {
        &self.health
    }
    fn zone(&self) -> &ZoneView {
        &self.zone
    }
}

impl WhatIf for Snapshot {
    fn with_applied(&self, object: Object) -> Snapshot {
        Snapshot::with_applied(self, object)
    }

    fn affected_routes(&self, key: &ObjectKey) -> Vec<RouteId> {
        Snapshot::affected_routes(self, key)
    }
}

impl Snapshot {
    pub fn new(cfg: Arc<Config>) -> Snapshot {
        Snapshot::with_clock(cfg, system_clock())
    }

    /// An empty snapshot that reads the time from `clock`.
    pub fn with_clock(cfg: Arc<Config>, clock: Clock) -> Snapshot {
        Snapshot {
            cfg,
            clock,
            namespaces: OrdMap::new(),
            gateways: OrdMap::new(),
            listener_sets: OrdMap::new(),
            listener_set_origins: OrdMap::new(),
            routes: OrdMap::new(),
            routes_by_parent: OrdMap::new(),
            listener_sets_by_gateway: OrdMap::new(),
            claims: OrdMap::new(),
            health: Arc::new(TargetHealth::new()),
            zone: Arc::new(ZoneView::new()),
        }
    }

    /// Builds a snapshot from a whole set of objects, evaluating each route once.
    pub fn from_objects(cfg: Arc<Config>, objects: impl IntoIterator<Item = Object>) -> Snapshot {
        Snapshot::with_clock(cfg, system_clock()).rebuilt(objects)
    }

    /// This snapshot with the names other owners hold in the zones (`check --zone-file`).
    pub fn with_zone_view(mut self, zone: ZoneView) -> Snapshot {
        self.zone = Arc::new(zone);
        self
    }

    /// This snapshot with the targets the health checks found failing (`explain`, from the
    /// Lease's annotation).
    pub fn with_target_health(mut self, health: TargetHealth) -> Snapshot {
        self.health = Arc::new(health);
        self
    }

    /// A snapshot of `objects` alone, under this one's configuration and clock. A Gateway keeps
    /// the address history it has here, so a rebuild (a directory read again) is no address loss
    /// and does not restart a grace.
    pub fn rebuilt(&self, objects: impl IntoIterator<Item = Object>) -> Snapshot {
        let mut snap = Snapshot::with_clock(self.cfg.clone(), self.clock.clone());
        snap.health = self.health.clone();
        snap.zone = self.zone.clone();
        let mut routes = Vec::new();
        for object in objects {
            match object {
                Object::Route(route) => routes.push(route),
                other => {
                    if let Object::Gateway(gw) = &other {
                        let id = ns_name(gw.meta.namespace(), gw.meta.name());
                        if let Some(previous) = self.gateways.get(&*id) {
                            snap.gateways.insert(id, previous.clone());
                        }
                    }
                    snap.store(other)
                }
            }
        }
        // Of routes listed twice the last one wins, as when applied one after the other.
        routes.reverse();
        routes.sort_by(|a, b| name_of_route(a).cmp(&name_of_route(b)));
        routes.dedup_by(|later, kept| name_of_route(later) == name_of_route(kept));
        snap.add_routes_in_bulk(routes);
        snap
    }

    /// Stores `routes` (sorted by key, none stored yet) and evaluates them, building the maps
    /// in [`fill_order`] rather than one route at a time: the index of a whole directory or a
    /// first list then takes about half the memory in its B-tree nodes.
    fn add_routes_in_bulk(&mut self, routes: Vec<Arc<Route>>) {
        // An empty list (a route kind nobody uses) adds nothing: rebuilding every name's
        // claimants for it would cost a pass over all routes and a second claims map.
        if routes.is_empty() {
            return;
        }
        let entries: Vec<(RouteId, RouteEntry)> = routes
            .into_iter()
            .map(|route| {
                let route = self.cfg.trim_route(route);
                let eval = Arc::new(evaluate_route(self, &self.cfg, &route));
                (route.key(), RouteEntry { route, eval })
            })
            .collect();
        for (id, entry) in fill_order(entries) {
            self.link_parents(&id, &entry.route);
            self.routes.insert(id, entry);
        }
        self.rebuild_claims();
    }

    /// The name → claimants map built anew from every route's evaluation.
    fn rebuild_claims(&mut self) {
        let mut claimed: Vec<(Name, RouteId)> = Vec::new();
        for (id, entry) in self.routes.iter() {
            let mut last: Option<&Name> = None;
            for claim in entry.eval.claims.iter() {
                if last.is_some_and(|l| *l == claim.name) {
                    continue;
                }
                last = Some(&claim.name);
                claimed.push((claim.name.clone(), id.clone()));
            }
        }
        // By name, then route: each name's claimants come out sorted.
        claimed.sort_unstable();
        let mut grouped: Vec<(Name, Claimants)> = Vec::new();
        let mut claimed = claimed.into_iter().peekable();
        while let Some((name, id)) = claimed.next() {
            let mut ids = vec![id];
            while let Some((_, id)) = claimed.next_if(|(next, _)| *next == name) {
                ids.push(id);
            }
            let claimants = match ids.len() {
                1 => ids.pop().map(Claimants::One),
                _ => Some(Claimants::many(ids)),
            };
            grouped.extend(claimants.map(|claimants| (name, claimants)));
        }
        self.claims = OrdMap::new();
        for (name, claimants) in fill_order(grouped) {
            self.claims.insert(name, claimants);
        }
    }

    pub fn gateways(&self) -> impl Iterator<Item = &Arc<Gateway>> {
        self.gateways.values().map(|entry| &entry.gateway)
    }

    pub fn listener_sets(&self) -> impl Iterator<Item = &Arc<ListenerSet>> {
        self.listener_sets.values()
    }

    /// Whether a route, Gateway or ListenerSet of `namespace` is stored.
    pub fn holds_in_namespace(&self, namespace: &str) -> bool {
        let prefix = format!("{namespace}/");
        self.routes.keys().any(|key| key.namespace() == namespace)
            || self.gateways.keys().any(|key| key.starts_with(&prefix))
            || self
                .listener_sets
                .keys()
                .any(|key| key.starts_with(&prefix))
    }

    /// The names of the stored Namespaces.
    pub fn namespace_names(&self) -> impl Iterator<Item = &str> {
        self.namespaces.keys().map(|name| &**name)
    }

    /// The stored Namespace of this name.
    pub fn stored_namespace(&self, name: &str) -> Option<Arc<Namespace>> {
        self.namespaces.get(name).cloned()
    }

    pub fn len_of(&self, kind: ObjectKind) -> usize {
        match kind {
            ObjectKind::Namespace => self.namespaces.len(),
            ObjectKind::Gateway => self.gateways.len(),
            ObjectKind::ListenerSet => self.listener_sets.len(),
            route_kind => self
                .routes
                .keys()
                .filter(|k| k.kind() == route_kind)
                .count(),
        }
    }

    pub fn contains(&self, key: &ObjectKey) -> bool {
        match key.kind() {
            ObjectKind::Namespace => self.namespaces.contains_key(key.name()),
            ObjectKind::Gateway => self
                .gateways
                .contains_key(&*ns_name(key.namespace(), key.name())),
            ObjectKind::ListenerSet => self
                .listener_sets
                .contains_key(&*ns_name(key.namespace(), key.name())),
            _ => self.routes.contains_key(key),
        }
    }

    /// This snapshot with one object applied (for "as if applied" admission checks).
    pub fn with_applied(&self, object: Object) -> Snapshot {
        let mut next = self.clone();
        next.apply(object);
        next
    }

    /// Inserts or replaces an object and re-evaluates the routes it affects.
    pub fn apply(&mut self, object: Object) {
        let key = object.key();
        match object {
            Object::Route(route) => self.apply_route(route),
            other => {
                let affected_before = self.affected_routes(&key);
                self.store(other);
                let mut affected = self.affected_routes(&key);
                affected.extend(affected_before);
                for id in affected {
                    self.reevaluate(&id);
                }
            }
        }
    }

    /// Removes an object (no-op when absent) and re-evaluates the routes it affected.
    pub fn delete(&mut self, key: &ObjectKey) {
        let affected = self.affected_routes(key);
        match key.kind() {
            ObjectKind::Namespace => {
                self.namespaces.remove(key.name());
            }
            ObjectKind::Gateway => {
                let id = ns_name(key.namespace(), key.name());
                self.gateways.remove(&*id);
                self.refresh_listener_set_origins_of(&id);
            }
            ObjectKind::ListenerSet => {
                let id = ns_name(key.namespace(), key.name());
                if let Some(old) = self.listener_sets.remove(&*id) {
                    self.unlink_listener_set(&old, &id);
                }
                self.listener_set_origins.remove(&*id);
            }
            _ => {
                if let Some((id, entry)) = self.routes.remove_with_key(key) {
                    self.unlink_route(&id, &entry);
                }
                return;
            }
        }
        for id in affected {
            self.reevaluate(&id);
        }
    }

    /// Replaces every object of `kind` with `objects` (a relist), then re-evaluates. Of
    /// duplicates (a list delivered again after a cut) the last one wins. Nothing is copied for
    /// the comparison: `objects` is sorted by name and each stored object is looked up in it.
    pub fn reset(&mut self, kind: ObjectKind, mut objects: Vec<Object>) {
        objects.retain(|o| o.kind() == kind);
        // A stable sort of the reversed list keeps the latest of equal names first, which
        // `dedup_by` keeps.
        objects.reverse();
        objects.sort_by(|a, b| name_of(a).cmp(&name_of(b)));
        objects.dedup_by(|later, kept| name_of(later) == name_of(kept));
        let listed = |namespace: &str, name: &str| {
            objects
                .binary_search_by(|o| name_of(o).cmp(&(namespace, name)))
                .is_ok()
        };
        let gone: Vec<ObjectKey> = match kind {
            ObjectKind::Namespace => self
                .namespaces
                .values()
                .filter(|o| !listed(o.meta.namespace(), o.meta.name()))
                .map(|o| ObjectKey::new(kind, "", o.meta.name()))
                .collect(),
            ObjectKind::Gateway => self
                .gateways()
                .filter(|o| !listed(o.meta.namespace(), o.meta.name()))
                .map(|o| ObjectKey::new(kind, o.meta.namespace(), o.meta.name()))
                .collect(),
            ObjectKind::ListenerSet => self
                .listener_sets
                .values()
                .filter(|o| !listed(o.meta.namespace(), o.meta.name()))
                .map(|o| ObjectKey::new(kind, o.meta.namespace(), o.meta.name()))
                .collect(),
            _ => self
                .routes
                .keys()
                .filter(|k| k.kind() == kind && !listed(k.namespace(), k.name()))
                .cloned()
                .collect(),
        };
        for key in &gone {
            self.delete(key);
        }
        if kind.is_route() && !self.holds_routes_of(kind) {
            // A first list: nothing to compare with, every route is new.
            let routes = objects
                .into_iter()
                .filter_map(|object| match object {
                    Object::Route(route) => Some(route),
                    _ => None,
                })
                .collect();
            self.add_routes_in_bulk(routes);
            return;
        }
        // A relist mostly repeats what is stored: only changed objects cost a re-evaluation.
        for object in objects {
            let object = self.trimmed(object);
            if !self.holds_same(&object) {
                self.apply(object);
            }
        }
    }

    /// `object` as this snapshot would store it: a route trimmed of what the engine does not read.
    pub fn trimmed(&self, object: Object) -> Object {
        match object {
            Object::Route(route) => Object::Route(self.cfg.trim_route(route)),
            other => other,
        }
    }

    /// `object` as this snapshot would store it (a route trimmed), sharing the stored
    /// projection when it is the same: a relist then buffers pointers to what did not change,
    /// not a second copy of it.
    pub fn share_stored(&self, object: Object) -> Object {
        match object {
            Object::Namespace(ns) => match self.namespaces.get(ns.meta.name()) {
                Some(stored) if *stored == ns => Object::Namespace(stored.clone()),
                _ => Object::Namespace(ns),
            },
            Object::Gateway(gw) => {
                match with_ns_name(gw.meta.namespace(), gw.meta.name(), |key| {
                    self.gateways.get(key)
                }) {
                    Some(entry) if entry.gateway == gw => Object::Gateway(entry.gateway.clone()),
                    _ => Object::Gateway(gw),
                }
            }
            Object::ListenerSet(ls) => {
                match with_ns_name(ls.meta.namespace(), ls.meta.name(), |key| {
                    self.listener_sets.get(key)
                }) {
                    Some(stored) if *stored == ls => Object::ListenerSet(stored.clone()),
                    _ => Object::ListenerSet(ls),
                }
            }
            Object::Route(route) => {
                let route = self.cfg.trim_route(route);
                match self.routes.get(&route.meta.key) {
                    Some(entry) if entry.route == route => Object::Route(entry.route.clone()),
                    _ => Object::Route(route),
                }
            }
        }
    }

    /// Are routes of `kind` stored? (Routes are keyed by kind first.)
    fn holds_routes_of(&self, kind: ObjectKind) -> bool {
        self.routes
            .range(ObjectKey::new(kind, "", "")..)
            .next()
            .is_some_and(|(key, _)| key.kind() == kind)
    }

    /// Is exactly this object (same projection) stored already?
    fn holds_same(&self, object: &Object) -> bool {
        match object {
            Object::Namespace(ns) => self.namespaces.get(ns.meta.name()) == Some(ns),
            Object::Gateway(gw) => self
                .gateways
                .get(&*ns_name(gw.meta.namespace(), gw.meta.name()))
                .is_some_and(|entry| entry.gateway == *gw),
            Object::ListenerSet(ls) => {
                self.listener_sets
                    .get(&*ns_name(ls.meta.namespace(), ls.meta.name()))
                    == Some(ls)
            }
            Object::Route(route) => self
                .routes
                .get(&route.meta.key)
                .is_some_and(|e| e.route == *route),
        }
    }

    /// Stores a non-route object and its reverse links, without re-evaluating.
    fn store(&mut self, object: Object) {
        match object {
            Object::Namespace(ns) => {
                self.namespaces.insert(ns.meta.name().into(), ns);
            }
            Object::Gateway(gw) => {
                let id = ns_name(gw.meta.namespace(), gw.meta.name());
                let entry =
                    GatewayEntry::new(&self.cfg, gw, self.gateways.get(&*id), (self.clock)());
                self.gateways.insert(id.clone(), entry);
                self.refresh_listener_set_origins_of(&id);
            }
            Object::ListenerSet(ls) => {
                let id = ns_name(ls.meta.namespace(), ls.meta.name());
                if let Some(old) = self.listener_sets.insert(id.clone(), ls.clone()) {
                    self.unlink_listener_set(&old, &id);
                }
                self.listener_sets_by_gateway
                    .entry(ns_name(&ls.parent.namespace, &ls.parent.name))
                    .or_default()
                    .insert(id.clone());
                self.refresh_listener_set_origin(&id);
            }
            Object::Route(route) => self.apply_route(route),
        }
    }

    /// Rebuilds the shared origin of one ListenerSet from it and its Gateway, or drops it when
    /// either is unknown.
    fn refresh_listener_set_origin(&mut self, id: &str) {
        let entry = self.listener_sets.get(id).and_then(|ls| {
            let gateway = self
                .gateways
                .get(&*ns_name(&ls.parent.namespace, &ls.parent.name))?;
            Some(ListenerSetOrigin {
                listener_set: ls.clone(),
                gateway: gateway.gateway.clone(),
                origin: Arc::new(origin_of(
                    &self.cfg,
                    &gateway.gateway,
                    Some(ls),
                    gateway.loss.as_ref(),
                    (self.clock)(),
                )),
            })
        });
        match entry {
            Some(entry) => {
                self.listener_set_origins.insert(id.into(), entry);
            }
            None => {
                self.listener_set_origins.remove(id);
            }
        }
    }

    fn refresh_listener_set_origins_of(&mut self, gateway_id: &str) {
        let ids: Vec<Box<str>> = self
            .listener_sets_by_gateway
            .get(gateway_id)
            .map(|ids| ids.iter().cloned().collect())
            .unwrap_or_default();
        for id in ids {
            self.refresh_listener_set_origin(&id);
        }
    }

    fn unlink_listener_set(&mut self, old: &ListenerSet, id: &str) {
        let gateway = ns_name(&old.parent.namespace, &old.parent.name);
        if let Some(set) = self.listener_sets_by_gateway.get_mut(&gateway) {
            set.remove(id);
            if set.is_empty() {
                self.listener_sets_by_gateway.remove(&gateway);
            }
        }
    }

    /// Inserts or replaces a route: evaluates it, then updates only what changed (parent links,
    /// claimed names), so an update costs a handful of path copies.
    fn apply_route(&mut self, route: Arc<Route>) {
        let mut route = self.cfg.trim_route(route);
        let previous = self
            .routes
            .get_key_value(&route.meta.key)
            .map(|(id, entry)| (id.clone(), entry.clone()));
        // The maps that name the route keep the key they hold; the new version takes it over, so
        // the route and the maps share one key across updates. A projection someone else still
        // holds is not copied for that: it keeps its own key.
        let id = match &previous {
            Some((id, _)) => {
                if let Some(unshared) = Arc::get_mut(&mut route) {
                    unshared.meta.key = id.clone();
                }
                id.clone()
            }
            None => route.key(),
        };
        let parents_unchanged = previous
            .as_ref()
            .is_some_and(|(_, p)| p.route.parent_refs == route.parent_refs);
        if !parents_unchanged {
            if let Some((_, p)) = &previous {
                self.unlink_parents(&id, &p.route);
            }
            self.link_parents(&id, &route);
        }
        let eval = evaluate_route(self, &self.cfg, &route);
        let eval = match previous {
            Some((_, p)) if *p.eval == eval => p.eval,
            Some((_, p)) => {
                self.update_claims(&id, &p.eval, &eval);
                Arc::new(eval)
            }
            None => {
                self.update_claims(&id, &RouteEval::default(), &eval);
                Arc::new(eval)
            }
        };
        self.routes.insert(id, RouteEntry { route, eval });
    }

    fn link_parents(&mut self, id: &RouteId, route: &Route) {
        for parent in route.parent_refs.iter() {
            if let Some(kind) = parent.target_kind() {
                self.routes_by_parent
                    .entry(parent_key(kind, &parent.namespace, &parent.name))
                    .or_default()
                    .insert(id.clone());
            }
        }
    }

    fn unlink_parents(&mut self, id: &RouteId, route: &Route) {
        for parent in route.parent_refs.iter() {
            if let Some(kind) = parent.target_kind() {
                let key = parent_key(kind, &parent.namespace, &parent.name);
                if let Some(set) = self.routes_by_parent.get_mut(&key) {
                    set.remove(id);
                    if set.is_empty() {
                        self.routes_by_parent.remove(&key);
                    }
                }
            }
        }
    }

    fn unlink_route(&mut self, id: &RouteId, entry: &RouteEntry) {
        self.unlink_parents(id, &entry.route);
        self.update_claims(id, &entry.eval, &RouteEval::default());
    }

    /// Routes whose evaluation may change when the object `key` changes.
    pub fn affected_routes(&self, key: &ObjectKey) -> Vec<RouteId> {
        let mut out: Vec<RouteId> = Vec::new();
        let add_parent = |out: &mut Vec<RouteId>, kind, ns: &str, name: &str| {
            if let Some(set) = self.routes_by_parent.get(&*parent_key(kind, ns, name)) {
                out.extend(set.iter().cloned());
            }
        };
        match key.kind() {
            ObjectKind::Namespace => {
                // Routes are keyed by (kind, namespace, name): each kind's routes in one
                // namespace form one contiguous range.
                for kind in ObjectKind::ROUTES {
                    let from = ObjectKey::new(kind, key.name(), "");
                    let to = ObjectKey::new(kind, &format!("{}\0", key.name()), "");
                    out.extend(self.routes.range(from..to).map(|(id, _)| id.clone()));
                }
                for ls in self
                    .listener_sets
                    .values()
                    .filter(|ls| *ls.meta.namespace() == *key.name())
                {
                    add_parent(
                        &mut out,
                        ObjectKind::ListenerSet,
                        ls.meta.namespace(),
                        ls.meta.name(),
                    );
                }
            }
            ObjectKind::Gateway => {
                add_parent(&mut out, ObjectKind::Gateway, key.namespace(), key.name());
                if let Some(sets) = self
                    .listener_sets_by_gateway
                    .get(&*ns_name(key.namespace(), key.name()))
                {
                    for ls in sets.iter() {
                        if let Some((ns, name)) = ls.split_once('/') {
                            add_parent(&mut out, ObjectKind::ListenerSet, ns, name);
                        }
                    }
                }
            }
            ObjectKind::ListenerSet => {
                add_parent(
                    &mut out,
                    ObjectKind::ListenerSet,
                    key.namespace(),
                    key.name(),
                );
            }
            _ => {
                if let Some((id, _)) = self.routes.get_key_value(key) {
                    out.push(id.clone());
                }
            }
        }
        out.sort();
        out.dedup();
        out
    }

    /// Ends the address-loss grace of every Gateway whose grace is over: its names lose the
    /// addresses they kept and follow the Gateway's (none). True when one ended.
    pub fn expire_address_losses(&mut self) -> bool {
        let now = (self.clock)();
        let grace = self.cfg.address_loss_grace;
        let ended: Vec<Box<str>> = self
            .gateways
            .iter()
            .filter(|(_, entry)| entry.loss.as_ref().is_some_and(|l| !l.in_grace(now, grace)))
            .map(|(id, _)| id.clone())
            .collect();
        for id in &ended {
            let Some(entry) = self.gateways.get(&**id) else {
                continue;
            };
            let gateway = entry.gateway.clone();
            let key = ObjectKey::new(
                ObjectKind::Gateway,
                gateway.meta.namespace(),
                gateway.meta.name(),
            );
            let origin = Arc::new(origin_of(&self.cfg, &gateway, None, None, now));
            self.gateways.insert(
                id.clone(),
                GatewayEntry {
                    gateway,
                    origin,
                    loss: None,
                },
            );
            self.refresh_listener_set_origins_of(id);
            for route in self.affected_routes(&key) {
                self.reevaluate(&route);
            }
        }
        !ended.is_empty()
    }

    /// When the first running address-loss grace ends (Unix seconds), if one runs.
    pub fn next_address_loss_end(&self) -> Option<i64> {
        let grace = self.cfg.address_loss_grace;
        self.gateways
            .values()
            .filter_map(|entry| entry.loss.as_ref().map(|l| l.until(grace)))
            .min()
    }

    fn reevaluate(&mut self, id: &RouteId) {
        let Some(entry) = self.routes.get(id).cloned() else {
            return;
        };
        let eval = evaluate_route(self, &self.cfg, &entry.route);
        if *entry.eval == eval {
            return;
        }
        self.update_claims(id, &entry.eval, &eval);
        self.routes.insert(
            id.clone(),
            RouteEntry {
                route: entry.route,
                eval: Arc::new(eval),
            },
        );
    }

    /// Moves the route's entries in the name → claimants map from `old`'s names to `new`'s,
    /// touching only the names that differ.
    fn update_claims(&mut self, id: &RouteId, old: &RouteEval, new: &RouteEval) {
        // Binary searches (claims are sorted by name): a route's names are never compared
        // pairwise, whatever their number.
        for name in old.names() {
            if new.claims_name(name) {
                continue;
            }
            let remaining = self
                .claims
                .get_key_value(name)
                .map(|(key, claimants)| (key.clone(), claimants.without(id)));
            match remaining {
                Some((key, Some(rest))) => {
                    self.claims.insert(key, rest);
                }
                Some((_, None)) => {
                    self.claims.remove(name);
                }
                None => {}
            }
        }
        let mut last: Option<&Name> = None;
        for claim in &new.claims {
            if last.is_some_and(|l| *l == claim.name) || old.claims_name(&claim.name) {
                last = Some(&claim.name);
                continue;
            }
            last = Some(&claim.name);
            let claimants = match self.claims.get(&*claim.name) {
                Some(existing) => existing.with(id),
                None => Claimants::One(id.clone()),
            };
            self.claims.insert(claim.name.clone(), claimants);
        }
    }
}

/// The routes claiming one name, sorted. Nearly every name has one claimant, kept inline.
#[derive(Clone, Debug)]
enum Claimants {
    One(RouteId),
    /// Behind a one-word pointer, so that the common case above stays two words.
    Many(ThinArc<(), RouteId>),
}

impl Claimants {
    /// Several claimants, sorted.
    fn many(ids: Vec<RouteId>) -> Claimants {
        Claimants::Many(ThinArc::from_header_and_iter((), ids.into_iter()))
    }

    fn as_slice(&self) -> &[RouteId] {
        match self {
            Claimants::One(id) => std::slice::from_ref(id),
            Claimants::Many(ids) => &ids.slice,
        }
    }

    fn with(&self, id: &RouteId) -> Claimants {
        let ids = self.as_slice();
        match ids.binary_search(id) {
            Ok(_) => self.clone(),
            Err(pos) => {
                let mut all = ids.to_vec();
                all.insert(pos, id.clone());
                Claimants::many(all)
            }
        }
    }

    /// Without `id`; None when nothing is left.
    fn without(&self, id: &RouteId) -> Option<Claimants> {
        let rest: Vec<RouteId> = self
            .as_slice()
            .iter()
            .filter(|c| *c != id)
            .cloned()
            .collect();
        match rest.len() {
            0 => None,
            1 => rest.into_iter().next().map(Claimants::One),
            _ => Some(Claimants::many(rest)),
        }
    }
}

/// The live index: a writer side guarded by a mutex and a published snapshot readers load
/// without waiting. Cheap to clone.
#[derive(Clone)]
pub struct Index {
    inner: Arc<Inner>,
}

struct Inner {
    state: Mutex<Snapshot>,
    published: ArcSwap<Snapshot>,
    changes: watch::Sender<u64>,
    /// The settled outcome of a published snapshot while someone holds it, and the snapshot it
    /// was computed over (compared by identity), so the sync loop and the findings report share
    /// one evaluation. Not kept past its readers: between passes the records are in DNS, and
    /// the outcome held on its own was a third of `serve`'s heap (docs/benchmarks.md).
    settled: Mutex<Option<(Weak<Snapshot>, Weak<Outcome>)>>,
}

impl Default for Index {
    fn default() -> Index {
        Index::new()
    }
}

impl Index {
    pub fn new() -> Index {
        Index::with_config(Arc::new(Config::default()))
    }

    pub fn with_config(cfg: Arc<Config>) -> Index {
        Index::with_clock(cfg, system_clock())
    }

    /// An index that reads the time from `clock` (tests move it to end an address-loss grace).
    pub fn with_clock(cfg: Arc<Config>, clock: Clock) -> Index {
        let snapshot = Snapshot::with_clock(cfg, clock);
        Index {
            inner: Arc::new(Inner {
                published: ArcSwap::from_pointee(snapshot.clone()),
                state: Mutex::new(snapshot),
                changes: watch::Sender::new(0),
                settled: Mutex::new(None),
            }),
        }
    }

    pub fn config(&self) -> Arc<Config> {
        self.snapshot().cfg.clone()
    }

    /// The current consistent view. Never blocks on writers.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.inner.published.load_full()
    }

    /// Runs `read` on the current snapshot without taking a reference count on it: a webhook
    /// request reads for microseconds, and a shared count would move between cores on each one.
    pub fn read<R>(&self, read: impl FnOnce(&Snapshot) -> R) -> R {
        read(&self.inner.published.load())
    }

    /// The engine's settled outcome (records and findings) over the current snapshot: whoever
    /// asks first evaluates, callers while it is held get the same result, and a caller after
    /// every holder let go evaluates again.
    pub fn settled(&self) -> Arc<Outcome> {
        self.settled_with_snapshot().1
    }

    /// [`Self::settled`] with the snapshot it was settled from, for a reader that needs both
    /// to agree (records from one, zone view or failing targets from the other).
    pub fn settled_with_snapshot(&self) -> (Arc<Snapshot>, Arc<Outcome>) {
        let snapshot = self.snapshot();
        let mut settled = self
            .inner
            .settled
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        // A `Weak` keeps its allocation, so no later snapshot can take the address compared.
        if let Some((of, outcome)) = settled.as_ref()
            && std::ptr::eq(of.as_ptr(), Arc::as_ptr(&snapshot))
            && let Some(outcome) = outcome.upgrade()
        {
            return (snapshot, outcome);
        }
        let outcome = Arc::new(settle_all(&*snapshot));
        *settled = Some((Arc::downgrade(&snapshot), Arc::downgrade(&outcome)));
        (snapshot, outcome)
    }

    /// A receiver whose value (a change counter) moves on every change.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.inner.changes.subscribe()
    }

    /// Stores `object` and re-evaluates what it affects. An object stored as it is (a watch
    /// event for a field gateway-dns does not read, a status rewritten unchanged) changes
    /// nothing: no snapshot is published and the change counter stays, so the sync loop has
    /// nothing to follow.
    pub fn apply(&self, object: Object) {
        self.write_if(|s| {
            let object = s.trimmed(object);
            if s.holds_same(&object) {
                return false;
            }
            s.apply(object);
            true
        });
    }

    /// Removes the object; deleting what is not stored changes nothing (see [`Index::apply`]).
    pub fn delete(&self, key: &ObjectKey) {
        self.write_if(|s| {
            if !s.contains(key) {
                return false;
            }
            s.delete(key);
            true
        });
    }

    pub fn reset(&self, kind: ObjectKind, objects: Vec<Object>) {
        self.write(|s| s.reset(kind, objects));
    }

    /// See [`Snapshot::share_stored`]; reads the published snapshot, never waits for writers.
    pub fn share_stored(&self, object: Object) -> Object {
        self.read(|s| s.share_stored(object))
    }

    /// Replaces the whole content (the files source re-reading its directory).
    pub fn replace_all(&self, objects: Vec<Object>) {
        self.write(|s| *s = s.rebuilt(objects));
    }

    /// Ends every address-loss grace that is over (see [`Snapshot::expire_address_losses`]);
    /// publishes a new snapshot only when one ended. True when one did.
    pub fn expire_address_losses(&self) -> bool {
        self.write_if(Snapshot::expire_address_losses)
    }

    pub fn len_of(&self, kind: ObjectKind) -> usize {
        self.snapshot().len_of(kind)
    }

    /// Replaces the targets failing their health checks; publishes a new snapshot (which wakes
    /// the sync loop) only when they changed. True when they did.
    pub fn set_target_health(&self, health: TargetHealth) -> bool {
        self.write_if(|s| {
            if *s.health == health {
                return false;
            }
            s.health = Arc::new(health);
            true
        })
    }

    /// Replaces the names other owners hold in the zones; publishes a new snapshot (which wakes
    /// the sync loop) only when they changed. True when they did.
    pub fn set_zone_view(&self, zone: ZoneView) -> bool {
        self.write_if(|s| {
            if *s.zone == zone {
                return false;
            }
            s.zone = Arc::new(zone);
            true
        })
    }

    fn lock(&self) -> MutexGuard<'_, Snapshot> {
        // A panic while writing leaves the previous published snapshot intact; keep going.
        self.inner
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn write(&self, change: impl FnOnce(&mut Snapshot)) {
        self.write_if(|state| {
            change(state);
            true
        });
    }

    /// Publishes the changed state and moves the change counter, unless `change` says it
    /// changed nothing. Answers what `change` said.
    fn write_if(&self, change: impl FnOnce(&mut Snapshot) -> bool) -> bool {
        let mut state = self.lock();
        if !change(&mut state) {
            return false;
        }
        self.inner.published.store(Arc::new(state.clone()));
        drop(state);
        self.inner.changes.send_modify(|n| *n = n.wrapping_add(1));
        true
    }
}
