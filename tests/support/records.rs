//! What the DNS provider tests share: records gateway-dns does not own, seeded into a real server
//! before a test, the desired records that collide with them, and what a sync pass reports.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use gateway_dns::dns::Endpoint;
use gateway_dns::model::RecordType;
use gateway_dns::sync::{BlockReason, DesiredSource, Plan, Syncer};

use super::dig;

/// The desired records of a test, which it changes between sync passes.
pub type Desired = Arc<Mutex<Vec<Endpoint>>>;

/// A sync loop's source reading `desired` as it is at each pass.
pub fn source_of(desired: &Desired) -> Arc<dyn DesiredSource> {
    let desired = desired.clone();
    Arc::new(move || desired.lock().unwrap().clone())
}

/// Records another party wrote: (label in the zone, type, data). `other` is claimed by another
/// owner id; the rest carry no ownership record at all.
pub const FOREIGN: [(&str, &str, &str); 4] = [
    ("foreign", "A", "198.51.100.7"),
    ("other", "A", "198.51.100.8"),
    (
        "a-other",
        "TXT",
        "heritage=external-dns,external-dns/owner=someone-else",
    ),
    ("note", "TXT", "v=spf1 -all"),
];

/// [`FOREIGN`] as zone-file lines, for BIND's seed.
pub fn foreign_zone_lines() -> String {
    FOREIGN
        .iter()
        .map(|(label, rtype, data)| format!("{label} IN {rtype} {}", quoted(rtype, data)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// [`FOREIGN`] as (label, type, TTL, content) rows, for PowerDNS's seed.
pub fn foreign_rows() -> Vec<(&'static str, &'static str, u32, String)> {
    FOREIGN
        .iter()
        .map(|(label, rtype, data)| (*label, *rtype, 300, quoted(rtype, data)))
        .collect()
}

/// TXT data is written quoted in zone files and in PowerDNS's content.
fn quoted(rtype: &str, data: &str) -> String {
    match rtype {
        "TXT" => format!("\"{data}\""),
        _ => data.to_string(),
    }
}

/// Every [`FOREIGN`] record still answers at `server` as it was seeded.
pub fn assert_foreign_untouched(server: SocketAddr, zone: &str) {
    for (label, rtype, data) in FOREIGN {
        let name = format!("{label}.{zone}");
        assert_eq!(
            dig::query(server, &name, rtype, false).data(rtype),
            [data],
            "{name} {rtype}"
        );
    }
}

/// An A record the route `httproute/shop/web` wants.
pub fn a(name: &str, ips: &[&str]) -> Endpoint {
    Endpoint::new(name, RecordType::A, ips.iter().copied()).with_resource("httproute/shop/web")
}

/// The desired records that collide with [`FOREIGN`]: both must be blocked, not written.
pub fn colliding_with_foreign(zone: &str) -> [Endpoint; 2] {
    [
        a(&format!("foreign.{zone}"), &["192.0.2.99"]),
        a(&format!("other.{zone}"), &["192.0.2.99"]),
    ]
}

/// The plan blocked exactly the records that collide with [`FOREIGN`]: one for a record nobody
/// claims, one for the record another owner id claims.
pub fn assert_blocked_by_foreign(plan: &Plan) {
    let mut reasons: Vec<BlockReason> = plan.blocked.iter().map(|b| b.reason.clone()).collect();
    reasons.sort_by_key(|reason| format!("{reason:?}"));
    assert_eq!(
        reasons,
        [
            BlockReason::ForeignRecord,
            BlockReason::OwnedByOther {
                owner: "someone-else".into()
            }
        ]
    );
}

/// Changes the first desired record, `app.<zone>`, to two addresses with TTL 60 and runs a pass:
/// one change is written, and `server` answers the new set.
pub async fn change_app_targets_and_ttl(
    syncer: &Syncer,
    desired: &Mutex<Vec<Endpoint>>,
    server: SocketAddr,
    zone: &str,
) {
    let app = format!("app.{zone}");
    desired.lock().unwrap()[0] = a(&app, &["192.0.2.2", "192.0.2.3"]).with_ttl(60);
    let pass = syncer.run_once().await.unwrap();
    assert_eq!(pass.pass.applied, 1, "{:?}", pass.pass.plan.changes);
    let answer = dig::query(server, &app, "A", false);
    assert_eq!(answer.data("A"), ["192.0.2.2", "192.0.2.3"]);
    assert!(answer.answer.iter().all(|rr| rr.ttl == 60), "{answer:?}");
}

/// Empties the desired set and runs a pass: it converges, and every record of `ours` (name,
/// type) is gone from `server`.
pub async fn remove_everything(
    syncer: &Syncer,
    desired: &Mutex<Vec<Endpoint>>,
    server: SocketAddr,
    ours: &[(&str, &str)],
) {
    desired.lock().unwrap().clear();
    assert!(syncer.run_once().await.unwrap().converged);
    for (name, rtype) in ours {
        assert_eq!(
            dig::query(server, name, rtype, false).status,
            "NXDOMAIN",
            "{name} {rtype}"
        );
    }
}
