//! Synthetic clusters shared by the benchmarks: 200 Gateways (10 % with a wildcard listener),
//! routes with 2 hostnames each, 1 % of them claiming a name another route holds on another
//! Gateway (a conflict).

use gateway_dns::model::{Object, decode_value};
use serde_json::{Value, json};

pub const GATEWAYS: usize = 200;

pub fn decode(value: Value) -> Object {
    match decode_value(&value) {
        Ok(Some(object)) => object,
        other => panic!("synthetic object did not decode: {other:?}"),
    }
}

pub fn gateway(i: usize) -> Object {
    // 10 % of Gateways have a wildcard listener; the rest take any hostname.
    let hostname = i
        .is_multiple_of(10)
        .then(|| format!("*.zone{i}.example.com"));
    decode(json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": format!("gw{i}"), "namespace": "infra", "labels": {"team": "platform"}},
        "spec": {"gatewayClassName": "bench", "listeners": [{
            "name": "https", "protocol": "HTTPS", "port": 443, "hostname": hostname,
            "allowedRoutes": {"namespaces": {"from": "All"}}}]},
        "status": {"addresses": [{"type": "IPAddress", "value": format!("10.{}.{}.1", i / 250, i % 250)}]}
    }))
}

pub fn route_value(i: usize, routes: usize, salt: &str) -> Value {
    let gw = i % GATEWAYS;
    let domain = if gw.is_multiple_of(10) {
        format!("zone{gw}.example.com")
    } else {
        "example.org".to_owned()
    };
    // 1 % of routes reuse the first hostname of a route on another Gateway: a conflict.
    let first = if i % 100 == 99 {
        let other = (i + 1) % routes;
        let other_gw = other % GATEWAYS;
        let other_domain = if other_gw.is_multiple_of(10) {
            format!("zone{other_gw}.example.com")
        } else {
            "example.org".to_owned()
        };
        format!("app{other}.{other_domain}")
    } else {
        format!("app{i}.{domain}")
    };
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": format!("route{i}{salt}"), "namespace": format!("team{}", i % 500),
                     "creationTimestamp": format!("2026-01-01T00:{:02}:{:02}Z", (i / 60) % 60, i % 60),
                     "labels": {"app": format!("app{i}")}},
        "spec": {"parentRefs": [{"name": format!("gw{gw}"), "namespace": "infra", "sectionName": "https"}],
                 "hostnames": [first, format!("www{i}.{domain}")]}
    })
}

pub fn cluster(routes: usize) -> Vec<Object> {
    let mut objects: Vec<Object> = (0..GATEWAYS).map(gateway).collect();
    objects.extend((0..routes).map(|i| decode(route_value(i, routes, ""))));
    objects
}
