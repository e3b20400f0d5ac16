//! Gateway API conformance hostname cases (the reference case
//! `gateway-api-conformance-hostnames.yaml`, read at test time): for every test in the file, build its Gateways, ListenerSets and Routes,
//! and check which listeners each route attaches to and which hostnames it gets there
//! (`engine::explain_parents::attachments`) against the file's `derived_intersections` and `expected`.
//!
//! Reading the file: `derived_intersections` is the spec's hostname algorithm over Gateway parents
//! only (protocol is not considered); where upstream's `expected.route_conditions` says a parent
//! refused the route (Accepted=false with a reason), that verdict wins and we assert our finding
//! of the same reason instead. `*` in a derived list means "any name": a route without hostnames
//! on a listener without hostname, for which `attachments` lists no hostname.

use std::collections::{BTreeMap, BTreeSet};

use gateway_dns::engine::World;
use gateway_dns::engine::explain_parents::attachments;
use gateway_dns::engine::hostname::intersect;
use gateway_dns::engine::names::evaluate_route;
use gateway_dns::engine::{Config, Reason};
use gateway_dns::index::Snapshot;
use gateway_dns::model::dns_name::parse_hostname;
use gateway_dns::model::{ObjectKey, ObjectKind};
use serde_json::{Value, json};

use crate::objects::{V1, case_file, namespace, snapshot};

/// Every object of a conformance test lives here, as in upstream's `gateway-conformance-infra`.
const NS: &str = "gateway-conformance-infra";
/// `allowedRoutesFrom: Selector` in the file does not carry the selector; upstream selects this label.
const SELECTOR_LABEL: (&str, &str) = ("gateway-conformance", "infra");

/// ListenerSetHTTPRouting: `derived_intersections` covers Gateway parents only. These ListenerSet
/// attachments are read off the test's `expected.requests` (a route answers a listener's hostname
/// exactly when it attaches to that listener): (route, ListenerSet, listeners).
const LISTENER_SET_ATTACHMENTS: &[(&str, &str, &[&str])] = &[
    (
        "attaches-to-all-listeners",
        "listener-set-http-routing-1",
        &[
            "listener-set-http-routing-1-listener-1",
            "listener-set-http-routing-1-listener-2",
        ],
    ),
    (
        "attaches-to-all-listeners",
        "listener-set-http-routing-2",
        &[
            "listener-set-http-routing-2-listener-1",
            "listener-set-http-routing-2-listener-2",
        ],
    ),
    (
        "listener-set-http-routing-1-route",
        "listener-set-http-routing-1",
        &[
            "listener-set-http-routing-1-listener-1",
            "listener-set-http-routing-1-listener-2",
        ],
    ),
    (
        "listener-set-http-routing-1-section-route",
        "listener-set-http-routing-1",
        &["listener-set-http-routing-1-listener-1"],
    ),
    (
        "listener-set-http-routing-2-route",
        "listener-set-http-routing-2",
        &[
            "listener-set-http-routing-2-listener-1",
            "listener-set-http-routing-2-listener-2",
        ],
    ),
];

/// Reasons that mean "this parent did not accept the route".
const REFUSALS: [Reason; 4] = [
    Reason::NoMatchingListenerHostname,
    Reason::NotAllowedByListeners,
    Reason::NoMatchingParent,
    Reason::ParentNotFound,
];

fn str_of<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    value.get(key).and_then(Value::as_str)
}

fn list(value: &Value, key: &str) -> Vec<Value> {
    value
        .get(key)
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn listener_json(l: &Value) -> Value {
    let from = str_of(l, "allowedRoutesFrom").unwrap_or("Same");
    let mut namespaces = json!({"from": from});
    if from == "Selector" {
        namespaces["selector"] = json!({"matchLabels": {SELECTOR_LABEL.0: SELECTOR_LABEL.1}});
    }
    let mut allowed = json!({"namespaces": namespaces});
    if let Some(kinds) = l.get("allowedKinds").and_then(Value::as_array) {
        allowed["kinds"] = kinds.iter().map(|k| json!({"kind": k})).collect();
    }
    let mut out = json!({
        "name": l["name"], "protocol": l["protocol"], "port": l["port"], "allowedRoutes": allowed,
    });
    if let Some(hostname) = str_of(l, "hostname") {
        out["hostname"] = json!(hostname);
    }
    out
}

/// The objects of one conformance test: Namespace, Gateways (each with its own address),
/// ListenerSets and Routes.
fn build_objects(test: &Value) -> Vec<Value> {
    let mut objects = vec![namespace(NS, json!({SELECTOR_LABEL.0: SELECTOR_LABEL.1}))];
    for (i, gw) in list(test, "gateways").iter().enumerate() {
        let mut spec = json!({
            "gatewayClassName": "conformance",
            "listeners": list(gw, "listeners").iter().map(listener_json).collect::<Vec<_>>(),
        });
        if let Some(allowed) = gw.get("allowedListeners") {
            spec["allowedListeners"] = allowed.clone();
        }
        objects.push(json!({
            "apiVersion": V1, "kind": "Gateway",
            "metadata": {"name": gw["name"], "namespace": NS},
            "spec": spec,
            "status": {"addresses": [{"type": "IPAddress", "value": format!("192.0.2.{}", i + 1)}]},
        }));
    }
    for ls in list(test, "listenerSets") {
        objects.push(json!({
            "apiVersion": V1, "kind": "ListenerSet",
            "metadata": {"name": ls["name"], "namespace": NS},
            "spec": {
                "parentRef": {"name": ls["parentRef"]},
                "listeners": list(&ls, "listeners").iter().map(listener_json).collect::<Vec<_>>(),
            },
        }));
    }
    for route in list(test, "routes") {
        let parent_refs: Vec<Value> = list(&route, "parentRefs")
            .iter()
            .map(|p| {
                let mut r = json!({"kind": p["kind"], "name": p["name"]});
                if let Some(section) = str_of(p, "sectionName") {
                    r["sectionName"] = json!(section);
                }
                r
            })
            .collect();
        let mut spec = json!({"parentRefs": parent_refs});
        if let Some(hostnames) = route.get("hostnames").filter(|h| !h.is_null()) {
            spec["hostnames"] = hostnames.clone();
        }
        objects.push(json!({
            "apiVersion": V1, "kind": route["kind"],
            "metadata": {"name": route["name"], "namespace": NS},
            "spec": spec,
        }));
    }
    objects
}

/// Listener → sorted hostnames.
type Listeners = BTreeMap<String, Vec<String>>;

fn gateway_parent(name: &str) -> String {
    format!("Gateway/{NS}/{name}")
}

/// `gw` or `gw/listener-a+listener-b` (the sectionNames of the parentRefs) → (parent, sections).
fn parse_parent(text: &str) -> (String, Option<Vec<String>>) {
    match text.split_once('/') {
        Some((gw, sections)) => (
            gateway_parent(gw),
            Some(sections.split('+').map(str::to_owned).collect()),
        ),
        None => (gateway_parent(text), None),
    }
}

/// One conformance test, checked; returns one line per failing case.
fn check_test(test: &Value) -> Vec<String> {
    let short = str_of(test, "short_name").unwrap_or("<unnamed test>");
    let mut failures = Vec::new();
    let cfg = Config::default();
    let snap: Snapshot = snapshot(cfg.clone(), &build_objects(test));
    let routes = list(test, "routes");

    // Our view: (route, parent) → listeners with hostnames, and each route's findings.
    let mut ours: BTreeMap<(String, String), Listeners> = BTreeMap::new();
    let mut findings = BTreeMap::new();
    for route in &routes {
        let (Some(kind), Some(name)) = (str_of(route, "kind"), str_of(route, "name")) else {
            failures.push(format!("{short}: a route without kind or name: {route}"));
            continue;
        };
        let Some(kind) = ObjectKind::from_kind_name(kind) else {
            failures.push(format!("{short}/{name}: unknown route kind {kind}"));
            continue;
        };
        let Some(entry) = snap.route(&ObjectKey::new(kind, NS, name)) else {
            failures.push(format!("{short}/{name}: not in the snapshot"));
            continue;
        };
        for a in attachments(&snap, &cfg, &entry.route) {
            ours.entry((name.to_owned(), a.parent))
                .or_default()
                .insert(a.listener, a.hostnames);
        }
        findings.insert(
            name.to_owned(),
            evaluate_route(&snap, &cfg, &entry.route).findings,
        );
    }

    // Upstream's verdicts per (route, parent).
    let mut refused: BTreeSet<(String, String)> = BTreeSet::new();
    let mut covered: BTreeSet<String> = BTreeSet::new();
    let parents_of = |route: &str| -> Vec<String> {
        routes
            .iter()
            .filter(|r| str_of(r, "name") == Some(route))
            .flat_map(|r| list(r, "parentRefs"))
            .filter_map(|p| {
                let name = str_of(&p, "name")?;
                Some(match str_of(&p, "kind") {
                    Some("ListenerSet") => format!("ListenerSet/{NS}/{name}"),
                    _ => gateway_parent(name),
                })
            })
            .collect()
    };
    for condition in list(&test["expected"], "route_conditions") {
        let Some(route) = str_of(&condition, "route") else {
            continue;
        };
        covered.insert(route.to_owned());
        let parents = match str_of(&condition, "parent") {
            Some(p) => vec![parse_parent(p)],
            None => parents_of(route).into_iter().map(|p| (p, None)).collect(),
        };
        let route_findings: &[_] = match findings.get(route) {
            Some(f) => f,
            None => continue,
        };
        for (parent, sections) in parents {
            let attached = ours.get(&(route.to_owned(), parent.clone()));
            match condition.get("Accepted").and_then(Value::as_bool) {
                Some(false) => {
                    refused.insert((route.to_owned(), parent.clone()));
                    if let Some(listeners) = attached {
                        failures.push(format!(
                            "{short}/{route}: upstream says {parent} does not accept it, but it attaches to {listeners:?}"
                        ));
                    }
                    let reason = str_of(&condition, "reason").unwrap_or("");
                    if !route_findings.iter().any(|f| f.reason.as_str() == reason) {
                        failures.push(format!(
                            "{short}/{route}: upstream says Accepted=False/{reason} on {parent}; our findings: {route_findings:?}"
                        ));
                    }
                }
                Some(true) => {
                    match attached {
                        None => failures.push(format!(
                            "{short}/{route}: upstream says {parent} accepts it, but it attaches to no listener there"
                        )),
                        Some(listeners) => {
                            for section in sections.iter().flatten() {
                                if !listeners.contains_key(section) {
                                    failures.push(format!(
                                        "{short}/{route}: upstream says it is accepted on {parent}/{section}; we attach to {listeners:?}"
                                    ));
                                }
                            }
                        }
                    }
                    let refusals: Vec<_> = route_findings
                        .iter()
                        .filter(|f| REFUSALS.contains(&f.reason))
                        .collect();
                    if !refusals.is_empty() {
                        failures.push(format!(
                            "{short}/{route}: upstream accepts it on {parent}, but we report {refusals:?}"
                        ));
                    }
                }
                // ResolvedRefs-only conditions (backend references) are not about attachment.
                None => {}
            }
        }
    }

    // Expected attachments: derived (Gateway parents) plus the ListenerSet table. A derived entry
    // with no listeners says the route attaches nowhere on that parent.
    let mut expected: BTreeMap<(String, String), Listeners> = BTreeMap::new();
    let mut checked: BTreeSet<String> = BTreeSet::new();
    for derived in list(test, "derived_intersections") {
        let (Some(route), Some(parent)) = (str_of(&derived, "route"), str_of(&derived, "parent"))
        else {
            failures.push(format!(
                "{short}: malformed derived_intersections entry {derived}"
            ));
            continue;
        };
        covered.insert(route.to_owned());
        let key = (route.to_owned(), parse_parent(parent).0);
        if refused.contains(&key) {
            // Upstream's verdict (e.g. a protocol refusal) supersedes the hostname-only derivation.
            continue;
        }
        checked.insert(route.to_owned());
        let listeners = derived
            .get("derived_attached_listeners")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        for (listener, hosts) in listeners {
            let mut hosts: Vec<String> = hosts
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .filter(|h| *h != "*")
                .map(str::to_owned)
                .collect();
            hosts.sort();
            expected
                .entry(key.clone())
                .or_default()
                .insert(listener, hosts);
        }
    }
    if short == "ListenerSetHTTPRouting" {
        for &(route, listener_set, listeners) in LISTENER_SET_ATTACHMENTS {
            covered.insert(route.to_owned());
            checked.insert(route.to_owned());
            let slot = expected
                .entry((route.to_owned(), format!("ListenerSet/{NS}/{listener_set}")))
                .or_default();
            for listener in listeners {
                // A route without hostnames gets the listener's own hostname, `<listener>.com`.
                slot.insert((*listener).to_owned(), vec![format!("{listener}.com")]);
            }
        }
    }
    for route in &checked {
        let mine: BTreeMap<_, _> = ours.iter().filter(|((r, _), _)| r == route).collect();
        let theirs: BTreeMap<_, _> = expected.iter().filter(|((r, _), _)| r == route).collect();
        if mine != theirs {
            failures.push(format!(
                "{short}/{route}: attachments differ\n    expected {theirs:?}\n    got      {mine:?}"
            ));
        }
    }

    // Hostnames of a route that intersect no listener it attaches to are reported, one by one.
    for route in &routes {
        let name = str_of(route, "name").unwrap_or_default();
        let attached: Vec<(&String, &Listeners)> = ours
            .iter()
            .filter(|((r, _), _)| r == name)
            .map(|((_, p), l)| (p, l))
            .collect();
        let hostnames: Vec<String> = list(route, "hostnames")
            .iter()
            .filter_map(Value::as_str)
            .filter_map(|h| parse_hostname(h).ok().map(String::from))
            .collect();
        if attached.is_empty() || hostnames.is_empty() {
            continue;
        }
        let listener_hostnames = listener_hostnames(test);
        let unmatched: BTreeSet<&str> = hostnames
            .iter()
            .filter(|h| {
                !attached.iter().any(|(parent, listeners)| {
                    listeners.keys().any(|l| {
                        let lh = listener_hostnames
                            .get(&((*parent).clone(), l.clone()))
                            .cloned()
                            .flatten();
                        intersect(lh.as_deref(), Some(h.as_str())).is_some()
                    })
                })
            })
            .map(String::as_str)
            .collect();
        let reported: BTreeSet<&str> = findings
            .get(name)
            .into_iter()
            .flatten()
            .filter(|f| f.reason == Reason::HostnameOutsideListener)
            .filter_map(|f| f.hostname.as_deref())
            .collect();
        if unmatched != reported {
            failures.push(format!(
                "{short}/{name}: hostnames outside every listener {unmatched:?}, reported as HostnameOutsideListener {reported:?}"
            ));
        }
    }

    // attachedRoutes per listener.
    if let Some(counts) = test["expected"]
        .get("listener_attached_routes")
        .and_then(Value::as_object)
    {
        for (gw, listeners) in counts {
            for (listener, count) in listeners.as_object().into_iter().flatten() {
                let ours_count = ours
                    .iter()
                    .filter(|((_, p), ls)| *p == gateway_parent(gw) && ls.contains_key(listener))
                    .count() as u64;
                if Some(ours_count) != count.as_u64() {
                    failures.push(format!(
                        "{short}: {gw}/{listener} has {ours_count} attached routes, upstream counts {count}"
                    ));
                }
            }
        }
    }

    for route in &routes {
        let name = str_of(route, "name").unwrap_or_default();
        if !covered.contains(name) {
            failures.push(format!(
                "{short}/{name}: the file states nothing about this route and no table here does"
            ));
        }
    }
    failures
}

/// (parent, listener) → the listener's hostname, for Gateways and ListenerSets of a test.
fn listener_hostnames(test: &Value) -> BTreeMap<(String, String), Option<String>> {
    let mut out = BTreeMap::new();
    for (kind, key) in [("Gateway", "gateways"), ("ListenerSet", "listenerSets")] {
        for owner in list(test, key) {
            let owner_name = str_of(&owner, "name").unwrap_or_default();
            for l in list(&owner, "listeners") {
                out.insert(
                    (
                        format!("{kind}/{NS}/{owner_name}"),
                        str_of(&l, "name").unwrap_or_default().to_owned(),
                    ),
                    str_of(&l, "hostname").map(str::to_owned),
                );
            }
        }
    }
    out
}

#[test]
fn conformance_hostname_cases() {
    let file = case_file("gateway-api-conformance-hostnames.yaml");
    let tests = file["tests"]
        .as_array()
        .expect("the conformance file has a tests list");
    assert!(
        !tests.is_empty(),
        "the conformance file lists no tests: nothing was checked"
    );
    let mut failures = Vec::new();
    for test in tests {
        failures.extend(check_test(test));
    }
    assert!(
        failures.is_empty(),
        "{} conformance case(s) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// ListenerSetHostnameConflict has no routes: it is about which listener wins a hostname inside
/// one Gateway, a controller's decision. What gateway-dns owes it: every object decodes, and the
/// ListenerSets in the Gateway's namespace are admitted (`allowedListeners.from: Same`).
#[test]
fn conformance_listener_set_objects_decode_and_attach() {
    let file = case_file("gateway-api-conformance-hostnames.yaml");
    let test = file["tests"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|t| str_of(t, "short_name") == Some("ListenerSetHostnameConflict"))
        .expect("ListenerSetHostnameConflict is in the conformance file");
    let mut objects = build_objects(test);
    let sets = list(test, "listenerSets");
    assert_eq!(sets.len(), 4);
    // A probe route per ListenerSet, without hostnames: it inherits the set's listener hostnames.
    for ls in &sets {
        let name = str_of(ls, "name").unwrap();
        objects.push(json!({
            "apiVersion": V1, "kind": "HTTPRoute",
            "metadata": {"name": format!("probe-{name}"), "namespace": NS},
            "spec": {"parentRefs": [{"kind": "ListenerSet", "name": name}]},
        }));
    }
    let cfg = Config::default();
    let snap = snapshot(cfg.clone(), &objects);
    for ls in &sets {
        let name = str_of(ls, "name").unwrap();
        let entry = snap
            .route(&ObjectKey::new(
                ObjectKind::HTTPRoute,
                NS,
                &format!("probe-{name}"),
            ))
            .unwrap();
        let got: BTreeSet<String> = attachments(&snap, &cfg, &entry.route)
            .into_iter()
            .map(|a| a.listener)
            .collect();
        let want: BTreeSet<String> = list(ls, "listeners")
            .iter()
            .filter_map(|l| str_of(l, "name").map(str::to_owned))
            .collect();
        assert_eq!(got, want, "probe route on ListenerSet {name}");
    }
}
