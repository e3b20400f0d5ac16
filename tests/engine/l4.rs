//! Listener hostnames for L4 and passthrough routes (ARCHITECTURE.md, "Names"): TCPRoute and
//! UDPRoute have no hostnames, and a TLSRoute for passthrough may set none; each inherits the
//! non-wildcard hostname of the listener it attaches to, which is published and conflicts like
//! any route hostname.

use gateway_dns::engine::Reason;
use serde_json::json;

use crate::objects::*;

fn l4_gateway(name: &str, address: &str) -> serde_json::Value {
    gateway(
        "infra",
        name,
        json!([
            listener("db", "TCP", Some("db.example.com")),
            listener("dns", "UDP", Some("resolver.example.com")),
            listener("tls", "TLS", Some("passthrough.example.com")),
            listener("any", "TCP", Some("*.example.com")),
        ]),
        &[address],
    )
}

#[test]
fn l4_routes_publish_their_listeners_hostnames() {
    let parent =
        |section: &str| json!([{"name": "gw", "namespace": "infra", "sectionName": section}]);
    let outcome = settle_default(&[
        infra(),
        apps(),
        l4_gateway("gw", GW1),
        route("TCPRoute", "apps", "db", parent("db"), &[]),
        route("UDPRoute", "apps", "dns", parent("dns"), &[]),
        route("TLSRoute", "apps", "tls", parent("tls"), &[]),
        // A wildcard listener hostname is not published without --allow-inherited-wildcards.
        route("TCPRoute", "apps", "wild", parent("any"), &[]),
    ]);
    let names: Vec<&str> = outcome
        .records
        .iter()
        .map(|r| r.dns_name.as_str())
        .collect();
    assert_eq!(
        names,
        [
            "db.example.com",
            "passthrough.example.com",
            "resolver.example.com"
        ]
    );
    assert_eq!(
        only_violation(&outcome, "TCPRoute/apps/wild").reason,
        Reason::InheritedWildcardHostname
    );
}

#[test]
fn l4_listener_hostnames_conflict_like_route_hostnames() {
    let parent = |gw: &str| json!([{"name": gw, "namespace": "infra", "sectionName": "db"}]);
    let outcome = settle_default(&[
        infra(),
        apps(),
        l4_gateway("gw", GW1),
        l4_gateway("other", GW2),
        created(
            route("TCPRoute", "apps", "first", parent("gw"), &[]),
            "2025-01-01T00:00:00Z",
        ),
        created(
            route("TCPRoute", "apps", "second", parent("other"), &[]),
            "2025-06-01T00:00:00Z",
        ),
    ]);
    assert_eq!(
        record_summary(&outcome),
        [("db.example.com".to_owned(), "A", vec![GW1.to_owned()])]
    );
    let conflict = only_violation(&outcome, "TCPRoute/apps/second");
    assert_eq!(conflict.reason, Reason::HostnameConflict);
    assert_eq!(conflict.field, "spec.parentRefs[0]");
}
