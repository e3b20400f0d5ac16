//! Builders for the Kubernetes objects the tests feed the engine (as JSON, decoded with the one
//! decoder every source uses), and small readers over outcomes.

use std::path::PathBuf;
use std::sync::Arc;

use gateway_dns::engine::Outcome;
use gateway_dns::engine::settle::settle_all;
use gateway_dns::engine::{Action, Config, Finding, Reason};
use gateway_dns::index::Snapshot;
use gateway_dns::model::{self, Object};
use serde_json::{Value, json};

pub const V1: &str = "gateway.networking.k8s.io/v1";

/// Decodes a value that must be an object gateway-dns reads.
/// The non-empty documents of a YAML file, as JSON trees.
pub fn yaml_documents(path: &std::path::Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|doc| serde::Deserialize::deserialize(doc).unwrap())
        .filter(|v: &Value| !v.is_null())
        .collect()
}

pub fn decode(value: &Value) -> Object {
    match model::decode_value(value) {
        Ok(Some(object)) => object,
        Ok(None) => panic!("not a kind gateway-dns reads: {value}"),
        Err(err) => panic!("does not decode: {err}: {value}"),
    }
}

pub fn decode_all(values: &[Value]) -> Vec<Object> {
    values.iter().map(decode).collect()
}

pub fn namespace(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})
}

/// A listener that takes routes from every namespace (protocol decides the port).
pub fn listener(name: &str, protocol: &str, hostname: Option<&str>) -> Value {
    let port = match protocol {
        "HTTP" => 80,
        "UDP" => 53,
        "TCP" => 5432,
        _ => 443,
    };
    let mut l = json!({"name": name, "protocol": protocol, "port": port,
                       "allowedRoutes": {"namespaces": {"from": "All"}}});
    if let Some(h) = hostname {
        l["hostname"] = json!(h);
    }
    l
}

/// A Gateway with these listeners and `status.addresses` (IPs or hostnames).
pub fn gateway(ns: &str, name: &str, listeners: Value, addresses: &[&str]) -> Value {
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
    json!({"apiVersion": V1, "kind": "Gateway",
           "metadata": {"name": name, "namespace": ns},
           "spec": {"gatewayClassName": "test", "listeners": listeners},
           "status": {"addresses": addresses}})
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

/// A ListenerSet in `ns` under `gateway` (namespace, name) with one HTTPS listener for `hostname`.
pub fn listener_set(ns: &str, name: &str, gateway: (&str, &str), hostname: &str) -> Value {
    json!({"apiVersion": V1, "kind": "ListenerSet",
           "metadata": {"name": name, "namespace": ns},
           "spec": {"parentRef": {"name": gateway.1, "namespace": gateway.0},
                    "listeners": [listener("ls-https", "HTTPS", Some(hostname))]}})
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

pub fn snapshot(cfg: Config, values: &[Value]) -> Snapshot {
    Snapshot::from_objects(Arc::new(cfg), decode_all(values))
}

pub fn settle(cfg: Config, values: &[Value]) -> Outcome {
    settle_all(&snapshot(cfg, values))
}

pub fn settle_default(values: &[Value]) -> Outcome {
    settle(Config::default(), values)
}

pub fn violations_of<'a>(outcome: &'a Outcome, object: &str) -> Vec<&'a Finding> {
    outcome
        .violations
        .iter()
        .filter(|v| v.object == object)
        .collect()
}

/// The one violation of `object`; fails listing everything when there is not exactly one.
pub fn only_violation<'a>(outcome: &'a Outcome, object: &str) -> &'a Finding {
    let found = violations_of(outcome, object);
    assert_eq!(
        found.len(),
        1,
        "expected exactly one violation for {object}, got {:#?}",
        outcome.violations
    );
    found[0]
}

/// (dnsName, type, targets) of every record, for compact assertions.
pub fn record_summary(outcome: &Outcome) -> Vec<(String, &'static str, Vec<String>)> {
    outcome
        .records
        .iter()
        .map(|r| {
            (
                r.dns_name.clone(),
                r.record_type.as_str(),
                r.targets.clone(),
            )
        })
        .collect()
}

pub fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The shared reference cases and tools: `GATEWAY_DNS_SHARED_DIR`, else the `shared` folder beside
/// the checkout. Fails the test when it is absent: a checkout without the shared cases must not
/// pass these tests silently.
pub fn shared_dir() -> PathBuf {
    let dir = std::env::var_os("GATEWAY_DNS_SHARED_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate_dir().join("..").join("shared"));
    assert!(
        dir.join("cases").is_dir(),
        "the shared cases are missing: {} has no cases/ directory (expected a shared folder \
         beside the checkout; set GATEWAY_DNS_SHARED_DIR to point elsewhere)",
        dir.display()
    );
    dir
}

/// A YAML file of the shared reference cases, as JSON values.
pub fn shared_case_file(name: &str) -> Value {
    let path = shared_dir().join("cases").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|err| {
        panic!(
            "the shared cases are missing: cannot read {}: {err}",
            path.display()
        )
    });
    serde_yaml_ng::from_str(&text)
        .unwrap_or_else(|err| panic!("{} is not valid YAML: {err}", path.display()))
}

// ---------------------------------------------------------------- shared by the rule tests

pub const GW1: &str = "10.0.0.1";
pub const GW2: &str = "10.0.0.2";

pub fn infra() -> Value {
    namespace("infra", json!({}))
}

pub fn apps() -> Value {
    namespace("apps", json!({}))
}

pub fn on(gw: &str) -> Value {
    json!([parent("infra", gw)])
}

/// Asserts the common shape of a finding: reason, action, field, one line, naming what it is about.
pub fn assert_finding(v: &Finding, reason: Reason, action: Action, field: &str, names: &[&str]) {
    assert_eq!(v.reason, reason, "{v:#?}");
    assert_eq!(v.action, action, "{v:#?}");
    assert_eq!(v.field, field, "{v:#?}");
    assert!(!v.message.contains('\n'), "one line: {v:#?}");
    for name in names {
        assert!(
            v.message.contains(name),
            "message should name {name}: {}",
            v.message
        );
    }
}
