//! The CNAME rules (ARCHITECTURE.md, "Records and conflicts"): a CNAME is alone at its name, has
//! one target and never sits at a zone apex. What breaks them is `CnameNotAllowed`, found by the
//! engine, not left for the DNS provider to refuse.

use gateway_dns::engine::{Action, Config, Reason};
use serde_json::Value;

use crate::objects::*;

fn gw(addresses: &[&str]) -> Value {
    simple_gateway("infra", "gw", None, addresses)
}

fn web(host: &str) -> Value {
    http_route("apps", "web", on("gw"), &[host])
}

#[test]
fn a_hostname_beside_addresses_publishes_the_addresses_and_says_so() {
    let outcome = settle_default(&[
        infra(),
        apps(),
        gw(&[GW1, "lb.example.net"]),
        web("app.example.com"),
    ]);
    assert_eq!(
        record_summary(&outcome),
        [("app.example.com".to_owned(), "A", vec![GW1.to_owned()])]
    );
    assert_finding(
        only_violation(&outcome, "HTTPRoute/apps/web"),
        Reason::CnameNotAllowed,
        Action::Warn,
        "spec.hostnames[0]",
        &[
            "app.example.com",
            "lb.example.net",
            "infra/gw",
            "only the addresses",
        ],
    );
}

#[test]
fn a_cname_has_one_target() {
    let outcome = settle_default(&[
        infra(),
        apps(),
        annotated(
            web("app.example.com"),
            "external-dns.kubernetes.io/target",
            "b.example.net,a.example.net",
        ),
        gw(&[GW1]),
    ]);
    assert_eq!(
        record_summary(&outcome),
        [(
            "app.example.com".to_owned(),
            "CNAME",
            vec!["a.example.net".to_owned()]
        )]
    );
    assert_finding(
        only_violation(&outcome, "HTTPRoute/apps/web"),
        Reason::CnameNotAllowed,
        Action::Warn,
        "spec.hostnames[0]",
        &["a.example.net, b.example.net", "only a.example.net"],
    );
}

#[test]
fn no_cname_at_a_zone_apex() {
    let zoned = || Config::default().with_zones(&["Example.COM.".to_owned()]);
    let by_name = settle(
        zoned(),
        &[infra(), apps(), gw(&["lb.example.net"]), web("example.com")],
    );
    assert!(by_name.records.is_empty(), "{by_name:#?}");
    assert_finding(
        only_violation(&by_name, "HTTPRoute/apps/web"),
        Reason::CnameNotAllowed,
        Action::Warn,
        "spec.hostnames[0]",
        &["example.com is the apex", "lb.example.net", "infra/gw"],
    );
    // Below the apex, or with an address, or without known zones, nothing to report.
    for (cfg, gateway, host) in [
        (zoned(), gw(&["lb.example.net"]), "www.example.com"),
        (zoned(), gw(&[GW1]), "example.com"),
        (Config::default(), gw(&["lb.example.net"]), "example.com"),
    ] {
        let outcome = settle(cfg, &[infra(), apps(), gateway, web(host)]);
        assert_eq!(outcome.records.len(), 1, "{outcome:#?}");
        assert!(outcome.violations.is_empty(), "{outcome:#?}");
    }
}
