//! Function-level facts ported to Rust tables: the `unitCases` of the reference case
//! `extdns-visible.yaml` (external-dns's TestGatewayMatchingHost, TestGatewayMatchingProtocol,
//! TestIsDNS1123Domain) and the `intersection_rules_table` of
//! `gateway-api-conformance-hostnames.yaml` (where they are: `objects::cases_dir`).
//!
//! The data is transcribed here, one row per case; `tables_match_the_reference_cases` checks the
//! transcription against the files so the two cannot drift apart unnoticed.

use gateway_dns::engine::attach::{protocol_compatible, route_protocol};
use gateway_dns::engine::hostname::intersect;
use gateway_dns::model::ObjectKind;
use gateway_dns::model::dns_name::{is_dns1123_domain, parse_hostname};
use serde_json::Value;

use crate::objects::case_file;

/// extdns-visible.yaml `unitCases.hostIntersection`: (id, a, b, expectHost, expectOk, symmetric).
/// external-dns writes an unset hostname as `''`.
const HOST_INTERSECTION: &[(&str, &str, &str, &str, bool, bool)] = &[
    ("ipv4-rejected", "1.2.3.4", "", "", false, true),
    (
        "ipv6-rejected",
        "2001:0db8:85a3:0000:0000:8a2e:0370:7334",
        "",
        "",
        false,
        true,
    ),
    ("empty-matches-empty", "", "", "", true, true),
    (
        "empty-matches-nonempty",
        "example.net",
        "",
        "example.net",
        true,
        true,
    ),
    (
        "simple-match",
        "example.net",
        "example.net",
        "example.net",
        true,
        true,
    ),
    (
        "wildcard-matches-longer",
        "*.example.net",
        "test.example.net",
        "test.example.net",
        true,
        true,
    ),
    (
        "wildcard-matches-equal-length",
        "*.example.net",
        "a.example.net",
        "a.example.net",
        true,
        true,
    ),
    (
        "wildcard-matches-multiple-subdomains",
        "*.example.net",
        "foo.bar.test.example.net",
        "foo.bar.test.example.net",
        true,
        true,
    ),
    (
        "wildcard-doesnt-match-parent",
        "*.example.net",
        "example.net",
        "",
        false,
        true,
    ),
    (
        "wildcard-must-be-complete-label",
        "*example.net",
        "test.example.net",
        "",
        false,
        true,
    ),
];

/// extdns-visible.yaml `unitCases.protocolCompatibility`: (id, route protocol, listener protocol, ok).
const PROTOCOL_COMPATIBILITY: &[(&str, &str, &str, bool)] = &[
    (
        "protocol-matches-lis-https-route-http",
        "HTTP",
        "HTTPS",
        true,
    ),
    (
        "protocol-match-invalid-list-https-route-tcp",
        "TCP",
        "HTTPS",
        false,
    ),
    ("protocol-match-valid-lis-tls-route-tls", "TLS", "TLS", true),
    ("protocol-match-valid-lis-TLS-route-TCP", "TCP", "TLS", true),
    (
        "protocol-match-valid-lis-TLS-route-TCP (2nd, actually route TLS on TCP listener)",
        "TLS",
        "TCP",
        false,
    ),
];

/// extdns-visible.yaml `unitCases.dns1123Domain`: (id, input, ok).
const DNS1123_DOMAIN: &[(&str, &str, bool)] = &[
    ("empty", "", false),
    (
        "label-too-long",
        "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx.example.net",
        false,
    ),
    (
        "domain-too-long",
        "testing.testing.testing.testing.testing.testing.testing.testing.testing.testing.testing.testing.testing.testing.testing.testing.testing.testing.testing.testing.testing.testing.testing.testing.testing.testing.testing.testing.testing.testing.testing.testing.example.net",
        false,
    ),
    ("hostname", "example", true),
    ("domain", "example.net", true),
    ("subdomain", "test.example.net", true),
    ("dashes", "test-with-dash.example.net", true),
    ("dash-prefix", "-dash-prefix.example.net", false),
    ("dash-suffix", "dash-suffix-.example.net", false),
    ("underscore", "under_score.example.net", false),
    ("plus", "pl+us.example.net", false),
    ("brackets", "bra[k]ets.example.net", false),
    ("parens", "pa[re]ns.example.net", false),
    ("wild", "*.example.net", false),
];

/// gateway-api-conformance-hostnames.yaml `intersection_rules_table`: (listener, route,
/// intersection); None = unset / no intersection, `*` = any name.
const INTERSECTION_RULES: &[(Option<&str>, Option<&str>, Option<&str>)] = &[
    (
        Some("www.example.com"),
        Some("www.example.com"),
        Some("www.example.com"),
    ),
    (
        Some("*.example.com"),
        Some("www.example.com"),
        Some("www.example.com"),
    ),
    (
        Some("*.example.com"),
        Some("sub.domain.example.com"),
        Some("sub.domain.example.com"),
    ),
    (
        Some("www.example.com"),
        Some("*.example.com"),
        Some("www.example.com"),
    ),
    (
        Some("sub.domain.example.com"),
        Some("*.example.com"),
        Some("sub.domain.example.com"),
    ),
    (
        Some("*.example.com"),
        Some("*.example.com"),
        Some("*.example.com"),
    ),
    (Some("*.com"), Some("*.example.com"), Some("*.example.com")),
    (None, Some("www.example.com"), Some("www.example.com")),
    (None, None, Some("*")),
    (Some("*.example.com"), Some("example.com"), None),
    (Some("*.example.com"), Some("test.example.net"), None),
];

/// external-dns's matching-host function in gateway-dns terms: `''` is unset, anything else must
/// normalize (IP literals and malformed names are refused), then the engine's intersection.
fn extdns_intersection(a: &str, b: &str) -> (String, bool) {
    let parse = |s: &str| -> Result<Option<String>, ()> {
        if s.is_empty() {
            Ok(None)
        } else {
            parse_hostname(s)
                .map(|h| Some(h.into_owned()))
                .map_err(|_| ())
        }
    };
    let (Ok(a), Ok(b)) = (parse(a), parse(b)) else {
        return (String::new(), false);
    };
    match intersect(a.as_deref(), b.as_deref()) {
        None => (String::new(), false),
        Some(None) => (String::new(), true),
        Some(Some(host)) => (host.to_owned(), true),
    }
}

#[test]
fn extdns_host_intersection() {
    let mut failures = Vec::new();
    for &(id, a, b, host, ok, symmetric) in HOST_INTERSECTION {
        let mut directions = vec![(a, b)];
        if symmetric {
            directions.push((b, a));
        }
        for (x, y) in directions {
            let got = extdns_intersection(x, y);
            if got != (host.to_owned(), ok) {
                failures.push(format!(
                    "hostIntersection/{id}: ({x:?}, {y:?}) gave {got:?}, expected ({host:?}, {ok})"
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn extdns_protocol_compatibility() {
    let failures: Vec<String> = PROTOCOL_COMPATIBILITY
        .iter()
        .filter(|(_, route, listener, ok)| protocol_compatible(route, listener) != *ok)
        .map(|(id, route, listener, ok)| {
            format!(
                "protocolCompatibility/{id}: route {route} on listener {listener}: expected {ok}"
            )
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn route_kinds_speak_the_protocols_of_the_spec() {
    // ARCHITECTURE.md, "Attachment": HTTPRoute and GRPCRoute: HTTP/HTTPS; TLSRoute: TLS; TCPRoute: TCP/TLS; UDPRoute: UDP.
    let listeners = ["HTTP", "HTTPS", "TLS", "TCP", "UDP"];
    let table: [(ObjectKind, &[&str]); 5] = [
        (ObjectKind::HTTPRoute, &["HTTP", "HTTPS"]),
        (ObjectKind::GRPCRoute, &["HTTP", "HTTPS"]),
        (ObjectKind::TLSRoute, &["TLS"]),
        (ObjectKind::TCPRoute, &["TCP", "TLS"]),
        (ObjectKind::UDPRoute, &["UDP"]),
    ];
    for (kind, accepted) in table {
        for listener in listeners {
            assert_eq!(
                protocol_compatible(route_protocol(kind), listener),
                accepted.contains(&listener),
                "{kind} on a {listener} listener"
            );
        }
    }
}

#[test]
fn extdns_dns1123_domain() {
    let failures: Vec<String> = DNS1123_DOMAIN
        .iter()
        .filter(|(_, input, ok)| is_dns1123_domain(input) != *ok)
        .map(|(id, input, ok)| format!("dns1123Domain/{id}: {input:?}: expected {ok}"))
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn conformance_intersection_rules_both_directions() {
    let mut failures = Vec::new();
    for &(listener, route, expected) in INTERSECTION_RULES {
        let expected = match expected {
            None => None,
            Some("*") => Some(None),
            Some(host) => Some(Some(host)),
        };
        // The table is written listener-first; the spec's rule is symmetric, so check both ways.
        for (l, r) in [(listener, route), (route, listener)] {
            let got = intersect(l, r);
            if got != expected {
                failures.push(format!(
                    "intersection_rules_table: listener {l:?} x route {r:?} gave {got:?}, expected {expected:?}"
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn text(value: &Value, key: &str) -> String {
    match value.get(key) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

/// The Rust tables above are a faithful transcription of the case files (same ids, same data).
#[test]
fn tables_match_the_reference_cases() {
    let extdns = case_file("extdns-visible.yaml");
    let units = &extdns["unitCases"];

    let hosts: Vec<(String, String, String, String, bool, bool)> = units["hostIntersection"]
        .as_array()
        .expect("unitCases.hostIntersection")
        .iter()
        .map(|c| {
            (
                text(c, "id"),
                text(c, "a"),
                text(c, "b"),
                text(c, "expectHost"),
                c["expectOk"].as_bool().expect("expectOk"),
                c["symmetric"].as_bool().unwrap_or(false),
            )
        })
        .collect();
    let ours: Vec<_> = HOST_INTERSECTION
        .iter()
        .map(|&(id, a, b, h, ok, sym)| (id.into(), a.into(), b.into(), h.into(), ok, sym))
        .collect();
    assert_eq!(ours, hosts, "hostIntersection table drifted from the file");

    let protocols: Vec<(String, String, String, bool)> = units["protocolCompatibility"]
        .as_array()
        .expect("unitCases.protocolCompatibility")
        .iter()
        .map(|c| {
            (
                text(c, "id"),
                text(c, "routeProtocol"),
                text(c, "listenerProtocol"),
                c["expectOk"].as_bool().expect("expectOk"),
            )
        })
        .collect();
    let ours: Vec<_> = PROTOCOL_COMPATIBILITY
        .iter()
        .map(|&(id, r, l, ok)| (id.into(), r.into(), l.into(), ok))
        .collect();
    assert_eq!(
        ours, protocols,
        "protocolCompatibility table drifted from the file"
    );

    let domains: Vec<(String, String, bool)> = units["dns1123Domain"]
        .as_array()
        .expect("unitCases.dns1123Domain")
        .iter()
        .map(|c| {
            (
                text(c, "id"),
                text(c, "input"),
                c["expectOk"].as_bool().expect("expectOk"),
            )
        })
        .collect();
    let ours: Vec<_> = DNS1123_DOMAIN
        .iter()
        .map(|&(id, input, ok)| (id.into(), input.into(), ok))
        .collect();
    assert_eq!(ours, domains, "dns1123Domain table drifted from the file");

    let conformance = case_file("gateway-api-conformance-hostnames.yaml");
    let opt = |v: &Value| v.as_str().map(str::to_owned);
    let rules: Vec<(Option<String>, Option<String>, Option<String>)> =
        conformance["intersection_rules_table"]
            .as_array()
            .expect("intersection_rules_table")
            .iter()
            .map(|r| {
                (
                    opt(&r["listener"]),
                    opt(&r["route"]),
                    opt(&r["intersection"]),
                )
            })
            .collect();
    let ours: Vec<_> = INTERSECTION_RULES
        .iter()
        .map(|&(l, r, i)| (l.map(Into::into), r.map(Into::into), i.map(Into::into)))
        .collect();
    assert_eq!(
        ours, rules,
        "intersection_rules_table drifted from the file"
    );
}
