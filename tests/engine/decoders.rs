//! The three ways an object reaches the projection agree: a JSON tree (files, `check`), JSON
//! text (the webhook's object under review) and a watched object held raw until its kind is
//! applied (the cluster source). The webhook and the index must never read one object two
//! ways.

use std::path::Path;

use gateway_dns::model::{DecodeError, Object, ObjectKind, RawObject, decode_json, decode_value};
use proptest::prelude::*;
use serde_json::{Value, json};

/// What the cluster source makes of a watched object whose kind it knows (it reads the
/// object's text as it arrives).
fn through_raw(value: &Value) -> Result<Option<Object>, DecodeError> {
    let kind = value["apiVersion"]
        .as_str()
        .zip(value["kind"].as_str())
        .and_then(|(api_version, kind)| ObjectKind::from_type(api_version, kind));
    match kind {
        None => Ok(None),
        Some(kind) => RawObject::from_json(&value.to_string())?
            .into_object(kind)
            .map(Some),
    }
}

/// Same projection, or an error from each reader.
fn assert_agree(value: &Value) {
    let tree = decode_value(value);
    let text = decode_json(&value.to_string());
    match (&tree, &text) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "tree and text differ for {value}"),
        (Err(_), Err(_)) => {}
        _ => panic!("tree {tree:?} but text {text:?} for {value}"),
    }
    if matches!(tree, Err(DecodeError::MissingType)) {
        return;
    }
    let raw = through_raw(value);
    match (&tree, &raw) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "tree and raw differ for {value}"),
        (Err(_), Err(_)) => {}
        _ => panic!("tree {tree:?} but raw {raw:?} for {value}"),
    }
}

#[test]
fn every_fixture_object_reads_the_same_three_ways() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut objects = crate::index::pool();
    for file in [
        "examples/cluster/gateways.yaml",
        "examples/cluster/routes.yaml",
        "tests/fixtures/admission/cluster.yaml",
    ] {
        objects.extend(crate::objects::yaml_documents(&root.join(file)));
    }
    let reviews = root.join("tests/fixtures/admission/reviews");
    for entry in std::fs::read_dir(&reviews).expect("review fixtures") {
        let path = entry.expect("fixture entry").path();
        let review: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        for member in ["object", "oldObject"] {
            if review["request"][member].is_object() {
                objects.push(review["request"][member].clone());
            }
        }
    }
    let mut read = 0;
    for object in &objects {
        assert_agree(object);
        read += usize::from(matches!(decode_value(object), Ok(Some(_))));
    }
    assert!(read >= 60, "only {read} objects read");
}

/// A route with every field the projection reads.
fn full_route() -> Value {
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": "web", "namespace": "shop", "generation": 2,
                     "creationTimestamp": "2026-01-01T00:00:00Z",
                     "labels": {"app": "web", "tier": "front"},
                     "annotations": {"external-dns.kubernetes.io/ttl": "60", "other": "x"}},
        "spec": {"hostnames": ["web.example.com", "www.example.com"],
                 "parentRefs": [{"name": "public", "namespace": "infra", "sectionName": "https",
                                 "port": 443, "group": "gateway.networking.k8s.io", "kind": "Gateway"}],
                 "rules": [{"backendRefs": [{"name": "web", "port": 8080}]}]},
        "status": {"parents": [{"parentRef": {"name": "public", "namespace": "infra", "sectionName": "https"},
                                "controllerName": "example.net/gw",
                                "conditions": [{"type": "Accepted", "status": "True", "observedGeneration": 2}]}]}
    })
}

/// Every path into `value` (objects' members and arrays' items).
fn paths(value: &Value, prefix: &mut Vec<Value>, out: &mut Vec<Vec<Value>>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                prefix.push(Value::from(key.as_str()));
                out.push(prefix.clone());
                paths(child, prefix, out);
                prefix.pop();
            }
        }
        Value::Array(items) => {
            for (index, child) in items.iter().enumerate() {
                prefix.push(Value::from(index));
                out.push(prefix.clone());
                paths(child, prefix, out);
                prefix.pop();
            }
        }
        _ => {}
    }
}

fn replace_at(value: &mut Value, path: &[Value], replacement: Value) {
    let mut target = value;
    for step in path {
        target = match step {
            Value::String(key) => &mut target[key.as_str()],
            _ => &mut target[step.as_u64().unwrap_or(0) as usize],
        };
    }
    *target = replacement;
}

fn any_json() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (-1e6f64..1e6).prop_map(Value::from),
        "[a-zA-Z0-9.*/_-]{0,12}".prop_map(Value::from),
        Just(json!([])),
        Just(json!(["a.example.com", 7])),
        Just(json!({})),
        Just(json!({"name": "x"})),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 600, ..ProptestConfig::default() })]

    /// Whatever value of whatever type sits at any path of a route, the three readers agree.
    #[test]
    fn any_reshaped_route_reads_the_same_three_ways(pick in any::<prop::sample::Index>(), replacement in any_json()) {
        let base = full_route();
        let mut all = Vec::new();
        paths(&base, &mut Vec::new(), &mut all);
        let path = pick.get(&all).clone();
        let mut value = base;
        replace_at(&mut value, &path, replacement);
        assert_agree(&value);
    }
}
