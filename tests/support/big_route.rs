//! A hostile route: thousands of hostnames in the external-dns annotation, attached to several
//! Gateways of many listeners each. Self-contained (only crates, no `super::`), so the
//! benchmark can include it with `#[path]`.

use gateway_dns::model::Object;
use serde_json::{Value, json};

/// Gateways `infra/gw0..` of `listeners` HTTPS listeners each (`*.l<i>.example.com`), all with
/// the address 203.0.113.10, accepting routes from every namespace.
pub fn gateways(count: usize, listeners: usize) -> Vec<Object> {
    (0..count)
        .map(|gateway| {
            let listeners: Vec<Value> = (0..listeners)
                .map(|listener| {
                    json!({
                        "name": format!("l{listener}"),
                        "protocol": "HTTPS",
                        "port": 443,
                        "hostname": format!("*.l{listener}.example.com"),
                        "allowedRoutes": {"namespaces": {"from": "All"}},
                    })
                })
                .collect();
            decode(json!({
                "apiVersion": "gateway.networking.k8s.io/v1",
                "kind": "Gateway",
                "metadata": {"name": format!("gw{gateway}"), "namespace": "infra"},
                "spec": {"gatewayClassName": "example", "listeners": listeners},
                "status": {"addresses": [{"type": "IPAddress", "value": "203.0.113.10"}]},
            }))
        })
        .collect()
}

/// The HTTPRoute `shop/big` as JSON: `hostnames` names in the annotation (spread over
/// `listeners` listener hostnames) and one parentRef per Gateway of [`gateways`].
pub fn route_json(hostnames: usize, gateways: usize, listeners: usize) -> Value {
    let names: Vec<String> = (0..hostnames)
        .map(|i| format!("h{i}.l{}.example.com", i % listeners.max(1)))
        .collect();
    let parent_refs: Vec<Value> = (0..gateways)
        .map(|gateway| json!({"name": format!("gw{gateway}"), "namespace": "infra"}))
        .collect();
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {
            "name": "big",
            "namespace": "shop",
            "annotations": {"external-dns.kubernetes.io/hostname": names.join(",")},
        },
        "spec": {"parentRefs": parent_refs},
    })
}

/// An AdmissionReview for CREATE of [`route_json`].
pub fn review(hostnames: usize, gateways: usize, listeners: usize) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "big",
            "kind": {"group": "gateway.networking.k8s.io", "version": "v1", "kind": "HTTPRoute"},
            "resource": {"group": "gateway.networking.k8s.io", "version": "v1", "resource": "httproutes"},
            "namespace": "shop",
            "name": "big",
            "operation": "CREATE",
            "userInfo": {"username": "mallory"},
            "object": route_json(hostnames, gateways, listeners),
            "oldObject": null,
            "dryRun": false,
        }
    })
}

pub fn decode(value: Value) -> Object {
    gateway_dns::model::decode_value(&value)
        .expect("a valid object")
        .expect("a kind gateway-dns reads")
}
