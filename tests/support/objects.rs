//! Builders of the Kubernetes objects the tests hand to gateway-dns, as JSON: the shape the API
//! server stores and the one decoder reads. Self-contained (only crates, no `super::`), so the
//! engine tests, which start no servers and do not include the rest of `support`, take it with
//! `#[path]`.

use gateway_dns::model::ObjectKind;
use serde_json::{Value, json};

pub const V1: &str = "gateway.networking.k8s.io/v1";

pub fn namespace(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})
}

/// A listener (protocol decides the port) taking routes from the namespaces `from` says
/// (`All`, `Same`); None leaves `allowedRoutes` unset, which the API reads as `Same`.
pub fn listener_from(
    name: &str,
    protocol: &str,
    hostname: Option<&str>,
    from: Option<&str>,
) -> Value {
    let port = match protocol {
        "HTTP" => 80,
        "UDP" => 53,
        "TCP" => 5432,
        _ => 443,
    };
    let mut l = json!({"name": name, "protocol": protocol, "port": port});
    if let Some(from) = from {
        l["allowedRoutes"] = json!({"namespaces": {"from": from}});
    }
    if let Some(h) = hostname {
        l["hostname"] = json!(h);
    }
    l
}

/// A listener that takes routes from every namespace (protocol decides the port).
pub fn listener(name: &str, protocol: &str, hostname: Option<&str>) -> Value {
    listener_from(name, protocol, hostname, Some("All"))
}

/// A Gateway of `class` with these listeners and no status: what a client creates.
pub fn gateway_of_class(class: &str, ns: &str, name: &str, listeners: Value) -> Value {
    json!({"apiVersion": V1, "kind": "Gateway",
           "metadata": {"name": name, "namespace": ns},
           "spec": {"gatewayClassName": class, "listeners": listeners}})
}

/// `gateway` with these `status.addresses` (IPs or hostnames).
pub fn addressed(gateway: Value, addresses: &[&str]) -> Value {
    let addresses: Vec<Value> = addresses
        .iter()
        .map(|a| {
            let kind = if a.parse::<std::net::IpAddr>().is_ok() {
                "IPAddress"
            } else {
                "Hostname"
            };
            json!({"type": kind, "value": a})
        })
        .collect();
    with(gateway, &["status", "addresses"], json!(addresses))
}

/// A Gateway with these listeners and `status.addresses` (IPs or hostnames).
pub fn gateway(ns: &str, name: &str, listeners: Value, addresses: &[&str]) -> Value {
    addressed(gateway_of_class("test", ns, name, listeners), addresses)
}

/// A Gateway with one HTTPS listener `https` for `hostname` (None: any) open to all namespaces.
pub fn simple_gateway(ns: &str, name: &str, hostname: Option<&str>, addresses: &[&str]) -> Value {
    gateway(
        ns,
        name,
        json!([listener("https", "HTTPS", hostname)]),
        addresses,
    )
}

/// A Gateway of class `example` with one HTTP listener `http` for `hostname` open to all
/// namespaces, without status: the one the tests against an API server create.
pub fn http_gateway(ns: &str, name: &str, hostname: &str) -> Value {
    let listeners = json!([listener("http", "HTTP", Some(hostname))]);
    gateway_of_class("example", ns, name, listeners)
}

/// `gateway` admitting ListenerSets from every namespace.
pub fn open_to_listener_sets(gateway: Value) -> Value {
    with(
        gateway,
        &["spec", "allowedListeners"],
        json!({"namespaces": {"from": "All"}}),
    )
}

/// A ListenerSet in `ns` under `gateway` (namespace, name) with these listeners.
pub fn listener_set_of(ns: &str, name: &str, gateway: (&str, &str), listeners: Value) -> Value {
    json!({"apiVersion": V1, "kind": "ListenerSet",
           "metadata": {"name": name, "namespace": ns},
           "spec": {"parentRef": {"name": gateway.1, "namespace": gateway.0},
                    "listeners": listeners}})
}

/// A ListenerSet in `ns` under `gateway` (namespace, name) with one HTTPS listener for `hostname`.
pub fn listener_set(ns: &str, name: &str, gateway: (&str, &str), hostname: &str) -> Value {
    let listeners = json!([listener("ls-https", "HTTPS", Some(hostname))]);
    listener_set_of(ns, name, gateway, listeners)
}

pub fn parent(ns: &str, name: &str) -> Value {
    json!({"name": name, "namespace": ns})
}

/// A route of `kind` (apiVersion v1) with parentRefs and spec.hostnames.
pub fn route(kind: &str, ns: &str, name: &str, parent_refs: Value, hostnames: &[&str]) -> Value {
    let mut spec = json!({"parentRefs": parent_refs});
    if !hostnames.is_empty() {
        spec["hostnames"] = json!(hostnames);
    }
    json!({"apiVersion": V1, "kind": kind, "metadata": {"name": name, "namespace": ns}, "spec": spec})
}

pub fn http_route(ns: &str, name: &str, parent_refs: Value, hostnames: &[&str]) -> Value {
    route("HTTPRoute", ns, name, parent_refs, hostnames)
}

/// A route of `kind` claiming `hostname`: in `spec.hostnames`, or for kinds without them
/// (TCPRoute, UDPRoute) in the external-dns hostname annotation.
pub fn claiming_route(
    kind: ObjectKind,
    ns: &str,
    name: &str,
    parent_refs: Value,
    hostname: &str,
) -> Value {
    if kind.has_hostnames() {
        return route(kind.kind(), ns, name, parent_refs, &[hostname]);
    }
    let route = route(kind.kind(), ns, name, parent_refs, &[]);
    annotated(route, "external-dns.kubernetes.io/hostname", hostname)
}

/// Sets `value` at a path of object keys, creating objects on the way.
pub fn with(mut object: Value, path: &[&str], value: Value) -> Value {
    let (last, parents) = path.split_last().expect("a non-empty path");
    let mut at = &mut object;
    for key in parents {
        if !at.get(*key).is_some_and(Value::is_object) {
            at[*key] = json!({});
        }
        at = &mut at[*key];
    }
    at[*last] = value;
    object
}

pub fn created(object: Value, timestamp: &str) -> Value {
    with(object, &["metadata", "creationTimestamp"], json!(timestamp))
}

pub fn annotated(object: Value, key: &str, value: &str) -> Value {
    with(object, &["metadata", "annotations", key], json!(value))
}

pub fn labelled(object: Value, key: &str, value: &str) -> Value {
    with(object, &["metadata", "labels", key], json!(value))
}

/// `object` as one YAML document, for kubectl and `check`.
pub fn yaml(object: &Value) -> String {
    serde_yaml_ng::to_string(object).expect("JSON is YAML")
}
