//! Our decoder against the Gateway API schema as the `gateway-api` crate types it: every fixture
//! object goes through the typed struct (which keeps only schema fields, under schema names) and
//! back; decoding the round-tripped JSON must give the same projection as decoding the original.
//! A field we read under a wrong name, or one the schema does not have, would be lost on the way
//! and fail here.

use std::path::{Path, PathBuf};

use gateway_api::apis::experimental::{tcproutes::TcpRoute, udproutes::UdpRoute};
use gateway_api::apis::standard::{
    gateways::Gateway, grpcroutes::GrpcRoute, httproutes::HttpRoute, listenersets::ListenerSet,
    tlsroutes::TlsRoute,
};
use gateway_dns::model::{NamespacesFrom, Object, ObjectKind, decode_value};
use k8s_openapi::api::core::v1::Namespace;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

fn through<T: DeserializeOwned + Serialize>(value: &Value) -> Value {
    let typed: T = serde_json::from_value(value.clone())
        .unwrap_or_else(|e| panic!("not valid for the typed schema: {e}\n{value:#}"));
    serde_json::to_value(typed).unwrap()
}

fn round_trip(value: &Value) -> Value {
    let kind = value["kind"].as_str().unwrap_or_default();
    match ObjectKind::from_kind_name(kind) {
        Some(ObjectKind::Namespace) => through::<Namespace>(value),
        Some(ObjectKind::Gateway) => through::<Gateway>(value),
        Some(ObjectKind::ListenerSet) => through::<ListenerSet>(value),
        Some(ObjectKind::HTTPRoute) => through::<HttpRoute>(value),
        Some(ObjectKind::GRPCRoute) => through::<GrpcRoute>(value),
        Some(ObjectKind::TLSRoute) => through::<TlsRoute>(value),
        Some(ObjectKind::TCPRoute) => through::<TcpRoute>(value),
        Some(ObjectKind::UDPRoute) => through::<UdpRoute>(value),
        None => panic!("unexpected kind {kind}"),
    }
}

fn fixture_files() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    vec![
        root.join("examples/cluster/gateways.yaml"),
        root.join("examples/cluster/routes.yaml"),
        root.join("tests/fixtures/admission/cluster.yaml"),
    ]
}

#[test]
fn the_decoder_reads_only_schema_fields_under_schema_names() {
    let mut checked = 0;
    for file in fixture_files() {
        for original in crate::objects::yaml_documents(&file) {
            let typed = round_trip(&original);
            let ours = decode_value(&original).unwrap().expect("a kind we read");
            let via_schema = decode_value(&typed).unwrap().expect("a kind we read");
            assert_eq!(
                ours,
                via_schema,
                "{}: {} differs through the typed schema",
                file.display(),
                ours.key()
            );
            checked += 1;
        }
    }
    assert!(checked >= 20, "only {checked} objects checked");
}

#[test]
fn every_field_the_engine_reads_survives_the_schema() {
    // One object per kind with every field the projection reads set to a non-default value.
    let objects = [
        serde_json::json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": "g", "namespace": "infra", "labels": {"a": "b"},
                         "annotations": {"external-dns.kubernetes.io/target": "lb.example.net"}},
            "spec": {"gatewayClassName": "c",
                "allowedListeners": {"namespaces": {"from": "Selector", "selector": {
                    "matchLabels": {"x": "y"},
                    "matchExpressions": [{"key": "k", "operator": "In", "values": ["v"]}]}}},
                "listeners": [{"name": "l", "hostname": "*.example.com", "port": 443, "protocol": "HTTPS",
                    "allowedRoutes": {"namespaces": {"from": "All"}, "kinds": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"}]}}]},
            "status": {"addresses": [{"type": "IPAddress", "value": "192.0.2.1"}, {"type": "Hostname", "value": "lb.example.net"}]}}),
        serde_json::json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "ListenerSet",
            "metadata": {"name": "ls", "namespace": "apps"},
            "spec": {"parentRef": {"name": "g", "namespace": "infra", "kind": "Gateway", "group": "gateway.networking.k8s.io"},
                "listeners": [{"name": "l2", "hostname": "a.example.com", "port": 443, "protocol": "HTTPS",
                    "allowedRoutes": {"namespaces": {"from": "Same"}}}]}}),
        serde_json::json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": "r", "namespace": "apps", "generation": 3, "creationTimestamp": "2026-01-01T00:00:00Z",
                         "annotations": {"external-dns.kubernetes.io/hostname": "x.example.com", "external-dns.kubernetes.io/ttl": "60"}},
            "spec": {"hostnames": ["a.example.com"],
                "parentRefs": [{"group": "gateway.networking.k8s.io", "kind": "ListenerSet", "name": "ls", "namespace": "apps", "sectionName": "l2", "port": 443}]}}),
        serde_json::json!({"apiVersion": "gateway.networking.k8s.io/v1alpha2", "kind": "TCPRoute",
            "metadata": {"name": "t", "namespace": "apps"},
            "spec": {"parentRefs": [{"name": "g", "namespace": "infra", "sectionName": "tcp", "port": 9000}],
                     "rules": [{"backendRefs": [{"name": "svc", "port": 9000}]}]}}),
    ];
    let mut decoded = Vec::new();
    for original in objects {
        let typed = round_trip(&original);
        let ours = decode_value(&original).unwrap().unwrap();
        assert_eq!(
            ours,
            decode_value(&typed).unwrap().unwrap(),
            "{}",
            ours.key()
        );
        decoded.push(ours);
    }
    // ... and the decoder really read them (a misnamed field would decode as its default).
    let [
        Object::Gateway(gw),
        Object::ListenerSet(ls),
        Object::Route(http),
        Object::Route(tcp),
    ] = &decoded[..]
    else {
        panic!("unexpected kinds: {decoded:?}");
    };
    assert!(
        matches!(&gw.allowed_listeners, NamespacesFrom::Selector(sel) if sel.requirements.len() == 2)
    );
    let listener = &gw.listeners[0];
    assert_eq!(
        (
            listener.hostname.as_deref(),
            listener.port,
            &*listener.protocol
        ),
        (Some("*.example.com"), Some(443), "HTTPS")
    );
    assert_eq!(listener.allowed_routes.namespaces, NamespacesFrom::All);
    assert_eq!(
        listener.allowed_routes.kinds.as_ref().map(|k| k.len()),
        Some(1)
    );
    assert_eq!(gw.addresses.len(), 2);
    assert_eq!(
        gw.meta.annotations.get("external-dns.kubernetes.io/target"),
        Some("lb.example.net")
    );
    assert_eq!((&*ls.parent.namespace, &*ls.parent.name), ("infra", "g"));
    assert_eq!(
        ls.listeners[0].allowed_routes.namespaces,
        NamespacesFrom::Same
    );
    assert_eq!(
        (
            http.meta.generation.get(),
            http.meta.created.get().is_some()
        ),
        (Some(3), true)
    );
    assert_eq!(&*http.hostnames[0], "a.example.com");
    let parent = &http.parent_refs[0];
    assert_eq!(
        (parent.kind(), parent.section_name.as_deref(), parent.port),
        ("ListenerSet", Some("l2"), Some(443))
    );
    assert_eq!(
        (tcp.kind(), tcp.parent_refs[0].port),
        (ObjectKind::TCPRoute, Some(9000))
    );
}
