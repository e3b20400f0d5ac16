//! Many clusters, one zone (ARCHITECTURE.md, "Many clusters, one zone"), on real parts: two
//! real control planes (`east` and `west`), each with its own `serve` and owner id, writing one
//! BIND zone. A name one cluster publishes is refused at the other's `kubectl apply`, naming the
//! owner; so is a record nobody owns; a free name is published by whoever asks first; and
//! `check --zone-file` over `dig AXFR`'s dump gives the webhook's answer offline.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::bind::{Bind, KEY_NAME, SECRET};
use crate::support::cluster::{ControlPlane, Serve};
use crate::support::net::require_binary;

const EAST: &str = "203.0.113.10";
const WEST: &str = "198.51.100.20";
/// A record in the zone that no ownership record covers.
const UNMANAGED: &str = "legacy.example.com. IN A 198.51.100.1";

fn objects(address_note: &str) -> String {
    format!(
        "
apiVersion: v1
kind: Namespace
metadata: {{name: infra}}
---
apiVersion: v1
kind: Namespace
metadata: {{name: apps}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw, namespace: infra, annotations: {{note: {address_note}}}}}
spec:
  gatewayClassName: example
  listeners:
  - {{name: http, protocol: HTTP, port: 80, allowedRoutes: {{namespaces: {{from: All}}}}}}
"
    )
}

fn route(name: &str, hostname: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: {name}, namespace: apps}}
spec:
  parentRefs: [{{name: gw, namespace: infra}}]
  hostnames: [{hostname}]
"
    )
}

/// One cluster with its gateway-dns writing to `bind` as `owner`, its webhook registered; the
/// zone view polls every second unless `extra` says otherwise.
async fn cluster(bind: &Bind, owner: &str, address: &str) -> (ControlPlane, Serve) {
    cluster_with(bind, owner, address, &["--zone-refresh-interval", "1s"]).await
}

async fn cluster_with(
    bind: &Bind,
    owner: &str,
    address: &str,
    extra: &[&str],
) -> (ControlPlane, Serve) {
    let cluster = tokio::task::block_in_place(|| {
        let cluster = ControlPlane::start();
        cluster.install_gateway_dns_rbac();
        cluster.apply(&objects(owner), &[]).ok();
        cluster.gateway_address("infra/gw", &[address]);
        cluster
    });
    let identity = tokio::task::block_in_place(|| {
        cluster.service_account_kubeconfig("gateway-dns", "gateway-dns", None)
    });
    let mut args = bind.serve_args();
    // `owner` names the process; `extra` may give another owner id.
    if !extra.contains(&"--txt-owner-id") {
        args.extend(["--txt-owner-id", owner].map(String::from));
    }
    args.extend(["--interval", "5s"].map(String::from));
    args.extend(extra.iter().map(|a| a.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let serve = Serve::start_with_env(&identity, owner, &args, &bind.serve_env());
    serve.wait_ready(Duration::from_secs(60)).await;
    tokio::task::block_in_place(|| {
        cluster.register_webhook(&serve.url(), &serve.ca_file());
        cluster.wait_webhook_active("apps");
    });
    (cluster, serve)
}

/// The A data BIND has for `name`, by zone transfer.
fn in_zone(bind: &Bind, name: &str) -> Vec<String> {
    let mut data: Vec<String> = bind
        .axfr()
        .into_iter()
        .filter(|rr| rr.rtype == "A" && rr.name.trim_end_matches('.') == name)
        .map(|rr| rr.data)
        .collect();
    data.sort();
    data
}

async fn wait_in_zone(bind: &Bind, name: &str, expected: &[&str], serve: &Serve) {
    let start = Instant::now();
    loop {
        let data = tokio::task::block_in_place(|| in_zone(bind, name));
        if data == expected {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{name}: wanted {expected:?} in the zone, it has {data:?}; serve's log ends with:\n{}",
            serve.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until `serve`'s zone view holds at least `owned` names of other owners.
async fn wait_view(serve: &Serve, owned: f64) {
    let series = "gateway_dns_zone_view_names{holder=\"other_owner\"}";
    let start = Instant::now();
    while serve.metric(series).await.unwrap_or(0.0) < owned {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the zone view holds no {owned} names of other owners; log:\n{}",
            serve.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits (at most 20 s) for an Event in `namespace` that `wanted` accepts, and returns it.
async fn wait_event(
    cluster: &ControlPlane,
    namespace: &str,
    wanted: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let start = Instant::now();
    loop {
        let json = tokio::task::block_in_place(|| {
            cluster
                .kubectl(&["get", "events.events.k8s.io", "-n", namespace, "-o", "json"])
                .ok()
        });
        let list: serde_json::Value = serde_json::from_str(&json).unwrap();
        if let Some(found) = list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|e| wanted(e))
        {
            return found.clone();
        }
        assert!(start.elapsed() < Duration::from_secs(20), "{list:#}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The webhook's denial line as kubectl prints it, from `denied the request: ` on.
fn denial(stderr: &str) -> &str {
    stderr
        .lines()
        .find_map(|line| line.split_once("denied the request: ").map(|(_, d)| d))
        .unwrap_or_default()
}

/// `dig AXFR` of the zone, as an operator dumps it for a pipeline.
fn dig_axfr(bind: &Bind) -> String {
    let output = Command::new(require_binary("dig", "bind9-dnsutils"))
        .arg("@127.0.0.1")
        .args(["-p", &bind.port.to_string()])
        .args(["-y", &format!("{}:{KEY_NAME}:{SECRET}", bind.algorithm)])
        .arg(&bind.zone)
        .arg("AXFR")
        .output()
        .expect("run dig");
    assert!(output.status.success(), "{output:?}");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// East's zone view polls every second; west's polls every ten minutes and takes BIND's
/// NOTIFY, so west learns of east's writes by NOTIFY alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_another_cluster_publishes_is_refused_at_kubectl_apply() {
    let notify = std::net::SocketAddr::from(([127, 0, 0, 1], crate::support::net::free_port()));
    let bind = Bind::start_notifying("example.com", UNMANAGED, &[notify]);
    let (east, east_serve) = cluster(&bind, "east", EAST).await;
    let listen = notify.to_string();
    let west_args = [
        "--zone-refresh-interval",
        "10m",
        "--zone-notify-listen",
        &listen,
    ];
    let (west, west_serve) = cluster_with(&bind, "west", WEST, &west_args).await;

    // East publishes b.example.com; BIND's NOTIFY makes west's zone view read it.
    tokio::task::block_in_place(|| east.apply(&route("b1", "b.example.com"), &[]).ok());
    wait_in_zone(&bind, "b.example.com", &[EAST], &east_serve).await;
    wait_view(&west_serve, 1.0).await;

    // West's kubectl apply of the same name is denied, naming east, its route and target; a
    // server-side dry run gives the same answer, and nothing is stored.
    let expected = "HostnameOwnedInZone: b.example.com is published by owner \"east\" \
                    (HTTPRoute apps/b1, 203.0.113.10); it can't also point at this cluster's \
                    Gateways: drop the hostname, or have \"east\" release it";
    let b2 = route("b1", "b.example.com");
    for extra in [&["--dry-run=server"][..], &[]] {
        let denied = tokio::task::block_in_place(|| west.apply(&b2, extra));
        assert!(!denied.success, "{denied:?}");
        assert_eq!(denial(&denied.stderr), expected, "{denied:?}");
    }
    // docs/troubleshooting.md shows this very line.
    let doc = std::fs::read_to_string(
        crate::support::cluster::repo_root().join("docs/troubleshooting.md"),
    )
    .unwrap();
    assert!(doc.contains(&format!("denied the request: {expected}")));
    let stored = tokio::task::block_in_place(|| {
        west.kubectl(&["get", "httproutes", "-n", "apps", "-o", "name"])
            .ok()
    });
    assert!(!stored.contains("b1"), "{stored}");

    // A record nobody owns is refused too.
    let legacy =
        tokio::task::block_in_place(|| west.apply(&route("legacy", "legacy.example.com"), &[]));
    assert!(!legacy.success, "{legacy:?}");
    assert!(
        denial(&legacy.stderr).contains("published by an unmanaged record (198.51.100.1)"),
        "{legacy:?}"
    );

    // A free name is west's to publish, and then east is refused it, naming west.
    tokio::task::block_in_place(|| west.apply(&route("w1", "w.example.com"), &[]).ok());
    wait_in_zone(&bind, "w.example.com", &[WEST], &west_serve).await;
    wait_view(&east_serve, 1.0).await;
    let denied = tokio::task::block_in_place(|| east.apply(&route("w2", "w.example.com"), &[]));
    assert!(
        denial(&denied.stderr).starts_with(
            "HostnameOwnedInZone: w.example.com is published by owner \"west\" (HTTPRoute apps/w1, 198.51.100.20)"
        ),
        "{denied:?}"
    );
    // Neither cluster touched the other's name or the unmanaged record.
    assert_eq!(
        tokio::task::block_in_place(|| in_zone(&bind, "b.example.com")),
        [EAST]
    );
    assert_eq!(
        tokio::task::block_in_place(|| in_zone(&bind, "legacy.example.com")),
        ["198.51.100.1"]
    );

    // Offline: `check --zone-file` over dig's dump and west's objects (read with
    // --kubeconfig), for the refused route's file, says what west's webhook said.
    let dir = tempfile::tempdir().unwrap();
    let dump = dir.path().join("example.com.zone");
    std::fs::write(&dump, tokio::task::block_in_place(|| dig_axfr(&bind))).unwrap();
    let manifest = dir.path().join("route.yaml");
    std::fs::write(&manifest, &b2).unwrap();
    let checked = Command::new(env!("CARGO_BIN_EXE_gateway-dns"))
        .args([
            "check",
            "--output",
            "json",
            "--txt-owner-id",
            "west",
            "--zone-file",
        ])
        .arg(&dump)
        .arg("--kubeconfig")
        .arg(west.kubeconfig())
        .arg(&manifest)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&checked.stdout);
    assert_eq!(checked.status.code(), Some(1), "{stdout}{checked:?}");
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let messages: Vec<String> = json["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            format!(
                "{}: {}",
                v["reason"].as_str().unwrap(),
                v["message"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(messages, [expected], "{stdout}");
    // explain, from west with the refused route's file, lists the zone: the claim is owned
    // elsewhere, east holds the record, and west's records are in sync (it wants none there).
    let mut explain: Vec<String> = ["explain", "--output", "json", "--kubeconfig"]
        .map(String::from)
        .to_vec();
    explain.push(west.kubeconfig().display().to_string());
    explain.extend(["--manifests".to_owned(), manifest.display().to_string()]);
    explain.extend(bind.serve_args());
    explain.extend(["--txt-owner-id", "west", "b.example.com"].map(String::from));
    let explained = Command::new(env!("CARGO_BIN_EXE_gateway-dns"))
        .args(&explain)
        .envs(bind.serve_env())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&explained.stdout);
    let json: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|_| panic!("{explained:?}"));
    assert_eq!(
        json["routes"][0]["claims"][0]["result"], "ownedElsewhere",
        "{json:#}"
    );
    let record = &json["provider"]["records"][0];
    assert_eq!(
        (record["owner"].as_str(), record["resource"].as_str()),
        (Some("east"), Some("httproute/apps/b1")),
        "{json:#}"
    );
    // East's heartbeat (every minute by default, the first at once) beside its record.
    assert!(
        record["heartbeat"]["ageSeconds"]
            .as_i64()
            .is_some_and(|age| age < 120)
            && record["heartbeat"]["instance"].is_string(),
        "{json:#}"
    );
    assert_eq!(json["provider"]["inSync"], true, "{json:#}");
    // Without the zone, check knows nothing of east: the name looks free.
    let blind = Command::new(env!("CARGO_BIN_EXE_gateway-dns"))
        .args(["check", "--kubeconfig"])
        .arg(west.kubeconfig())
        .arg(&manifest)
        .output()
        .unwrap();
    assert_eq!(blind.status.code(), Some(0), "{blind:?}");
}

/// The zone's owners of `name`: the owner ids in its A record's ownership TXT.
fn owners_in_zone(records: &[crate::support::dig::Rr], name: &str) -> Vec<String> {
    let txt = format!("a-{name}");
    let mut owners: Vec<String> = records
        .iter()
        .filter(|rr| rr.rtype == "TXT" && rr.name == txt)
        .filter_map(|rr| {
            let value = rr.data.trim_matches('"');
            value
                .split(',')
                .find_map(|label| label.strip_prefix("external-dns/owner="))
                .map(str::to_owned)
        })
        .collect();
    owners.sort();
    owners
}

/// What the zone says of each of `names`: (owners, A data).
fn claims_in_zone(bind: &Bind, names: &[String]) -> Vec<(Vec<String>, Vec<String>)> {
    let records = bind.axfr();
    names
        .iter()
        .map(|name| {
            let mut data: Vec<String> = records
                .iter()
                .filter(|rr| rr.rtype == "A" && rr.name.trim_end_matches('.') == name)
                .map(|rr| rr.data.clone())
                .collect();
            data.sort();
            (owners_in_zone(&records, name), data)
        })
        .collect()
}

/// Both clusters create the same new names at the same moment, 50 of them in 5 rounds: each
/// name ends with exactly one owner and that owner's target alone (never a mixed RRset), the
/// loser's route is refused the name (`HostnameOwnedInZone`), and nothing moves afterwards.
/// An RFC 2136 create carries the prerequisite "RRset does not exist" for the record and its
/// ownership record, so BIND takes exactly one of two racing creates.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_clusters_racing_for_new_names_end_with_one_owner_each() {
    let bind = Bind::start("example.com", "");
    let (east, east_serve) = cluster(&bind, "east", EAST).await;
    let (west, west_serve) = cluster(&bind, "west", WEST).await;
    let mut all: Vec<String> = Vec::new();
    for round in 0..5 {
        let names: Vec<String> = (0..10)
            .map(|i| format!("race-{round}-{i}.example.com"))
            .collect();
        let manifest: String = names
            .iter()
            .enumerate()
            .map(|(i, name)| format!("---\n{}", route(&format!("race-{round}-{i}"), name)))
            .collect();
        // Both applies at once, from two threads.
        let (east_run, west_run) = tokio::task::block_in_place(|| {
            std::thread::scope(|scope| {
                let e = scope.spawn(|| east.apply(&manifest, &[]));
                let w = scope.spawn(|| west.apply(&manifest, &[]));
                (e.join().unwrap(), w.join().unwrap())
            })
        });
        // The webhooks admit each name at least once (a view that already saw the other's
        // write refuses it, which is the point): nothing else may fail.
        for run in [&east_run, &west_run] {
            for line in run.stderr.lines() {
                assert!(line.contains("HostnameOwnedInZone"), "{run:?}");
            }
        }
        let start = Instant::now();
        loop {
            let claims = tokio::task::block_in_place(|| claims_in_zone(&bind, &names));
            for ((owners, data), name) in claims.iter().zip(&names) {
                // Never a mixed RRset, never two owners, at any sample.
                assert!(owners.len() <= 1, "{name}: owners {owners:?}");
                assert!(data.len() <= 1, "{name}: mixed RRset {data:?}");
            }
            if claims
                .iter()
                .all(|(owners, data)| owners.len() == 1 && data.len() == 1)
            {
                for ((owners, data), name) in claims.iter().zip(&names) {
                    let target = if owners[0] == "east" { EAST } else { WEST };
                    assert_eq!(data, &[target], "{name} is {owners:?}'s");
                }
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "round {round} did not settle: {claims:?}\neast:\n{}\nwest:\n{}",
                east_serve.log_tail(),
                west_serve.log_tail()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        all.extend(names);
    }
    let settled = tokio::task::block_in_place(|| claims_in_zone(&bind, &all));
    let east_won = settled
        .iter()
        .filter(|(owners, _)| owners[0] == "east")
        .count();
    // The losers see the names in their zone views; their routes are refused them.
    wait_view(&east_serve, (all.len() - east_won) as f64).await;
    wait_view(&west_serve, east_won as f64).await;
    let held = "gateway_dns_findings{reason=\"HostnameOwnedInZone\"}";
    // A cluster whose webhook already saw the other's write refused the route: only the
    // routes it stored and lost have the finding.
    let lost_with_route = |cluster: &ControlPlane, me: &str| {
        let stored = cluster
            .kubectl(&["get", "httproutes", "-n", "apps", "-o", "name"])
            .ok();
        settled
            .iter()
            .zip(&all)
            .filter(|((owners, _), _)| owners[0] != me)
            .filter(|(_, name)| {
                let route = name.trim_end_matches(".example.com");
                stored
                    .lines()
                    .any(|line| line == format!("httproute.gateway.networking.k8s.io/{route}"))
            })
            .count()
    };
    let east_lost = tokio::task::block_in_place(|| lost_with_route(&east, "east"));
    let west_lost = tokio::task::block_in_place(|| lost_with_route(&west, "west"));
    for (serve, lost) in [(&east_serve, east_lost), (&west_serve, west_lost)] {
        let start = Instant::now();
        while serve.metric(held).await.unwrap_or(0.0) < lost as f64 {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "{held} below {lost}:\n{}",
                serve.log_tail()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    // Nothing moves afterwards: several resyncs (--interval 5s) later the zone is the same.
    tokio::time::sleep(Duration::from_secs(12)).await;
    assert_eq!(
        tokio::task::block_in_place(|| claims_in_zone(&bind, &all)),
        settled
    );
    let races_lost = [&east_serve, &west_serve]
        .iter()
        .map(|s| s.log().matches("YXRRSET").count())
        .sum::<usize>();
    println!(
        "50 names: east won {east_won}, west {}; routes stored and refused: east {east_lost}, \
         west {west_lost}; creates refused by BIND's prerequisite: {races_lost}",
        all.len() - east_won
    );
}

/// Real external-dns (owner `extdns`, its own control plane) writes the same zone as west's
/// gateway-dns: its name is refused at west's `kubectl apply`, naming it, and it never touches
/// the name west published, though a route in its own cluster asks for it too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn external_dns_is_a_third_owner_whose_names_are_refused_and_who_leaves_ours_alone() {
    use crate::support::cluster::public_gateway;
    use crate::support::extdns::{self, ExternalDns};
    const THEIRS: &str = "192.0.2.30";
    let bind = Bind::start("example.com", "");
    let (west, west_serve) = cluster(&bind, "west", WEST).await;
    // West publishes y.example.com first.
    tokio::task::block_in_place(|| west.apply(&route("ext-y", "y.example.com"), &[]).ok());
    wait_in_zone(&bind, "y.example.com", &[WEST], &west_serve).await;

    // external-dns's cluster: its Gateway, and accepted routes for x and for west's y.
    let third = tokio::task::block_in_place(|| {
        let third = ControlPlane::start();
        third.apply(&public_gateway(), &[]).ok();
        third.gateway_address("infra/public", &[THEIRS]);
        for (name, hostname) in [("ext-x", "x.example.com"), ("ext-y", "y.example.com")] {
            let parents = serde_json::json!([crate::support::objects::parent("infra", "public")]);
            let yaml = crate::support::objects::yaml(&crate::support::objects::http_route(
                "apps",
                name,
                parents,
                &[hostname],
            ));
            third.apply(&yaml, &[]).ok();
            extdns::accept_route(&third, "httproutes", &format!("apps/{name}"));
        }
        third
    });
    let identity = tokio::task::block_in_place(|| extdns::install_rbac(&third));
    let mut peer = ExternalDns::start(&identity, &bind, &extdns::Config::gateway_routes("extdns"));
    let start = Instant::now();
    while tokio::task::block_in_place(|| in_zone(&bind, "x.example.com")) != [THEIRS] {
        peer.assert_running();
        assert!(
            start.elapsed() < Duration::from_secs(45),
            "external-dns never published x.example.com:\n{}",
            peer.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    wait_view(&west_serve, 1.0).await;

    // West may not take external-dns's name.
    let denied = tokio::task::block_in_place(|| west.apply(&route("ext-x", "x.example.com"), &[]));
    assert!(!denied.success, "{denied:?}");
    assert_eq!(
        denial(&denied.stderr),
        "HostnameOwnedInZone: x.example.com is published by owner \"extdns\" (HTTPRoute apps/ext-x, \
         192.0.2.30); it can't also point at this cluster's Gateways: drop the hostname, or have \
         \"extdns\" release it",
        "{denied:?}"
    );
    // external-dns ran its 1s loop many times over: west's y is untouched.
    tokio::time::sleep(Duration::from_secs(5)).await;
    peer.assert_running();
    assert_eq!(
        tokio::task::block_in_place(|| in_zone(&bind, "y.example.com")),
        [WEST]
    );
    let records = tokio::task::block_in_place(|| bind.axfr());
    assert_eq!(owners_in_zone(&records, "y.example.com"), ["west"]);
    assert_eq!(owners_in_zone(&records, "x.example.com"), ["extdns"]);
}

/// `gateway-dns zone` against the BIND of a test, as an operator runs it.
fn zone_command(bind: &Bind, args: &[&str]) -> std::process::Output {
    let mut all: Vec<String> = vec!["zone".into(), args[0].into()];
    all.extend(bind.serve_args());
    all.extend(args[1..].iter().map(|a| a.to_string()));
    Command::new(env!("CARGO_BIN_EXE_gateway-dns"))
        .args(&all)
        .envs(bind.serve_env())
        .output()
        .unwrap()
}

/// Owners that die: each cluster's Lease holder writes a heartbeat record every second;
/// `zone owners` lists both owners with their names and heartbeats; `zone release` refuses
/// while east's heartbeat is fresh, and once east is killed and its heartbeat is older than
/// --dead-after, removes east's names (records first, then their ownership records), after which
/// west may take the name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_owners_names_are_released_and_a_live_ones_are_not() {
    let bind = Bind::start("example.com", "");
    let beat = [
        "--zone-refresh-interval",
        "1s",
        "--owner-heartbeat-interval",
        "1s",
    ];
    let (east, mut east_serve) = cluster_with(&bind, "east", EAST, &beat).await;
    let (west, west_serve) = cluster_with(&bind, "west", WEST, &beat).await;
    tokio::task::block_in_place(|| east.apply(&route("b1", "b.example.com"), &[]).ok());
    wait_in_zone(&bind, "b.example.com", &[EAST], &east_serve).await;

    // Both owners, with east's name, and fresh heartbeats.
    let start = Instant::now();
    let listed = loop {
        let run =
            tokio::task::block_in_place(|| zone_command(&bind, &["owners", "--output", "json"]));
        assert!(run.status.success(), "{run:?}");
        let json: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
        let owners: Vec<&str> = json["owners"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|o| !o["heartbeat"].is_null())
            .filter_map(|o| o["owner"].as_str())
            .collect();
        if owners == ["east", "west"] {
            break json;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "{json:#}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let east_view = listed["owners"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["owner"] == "east")
        .unwrap();
    // The zone's own name server is nobody's.
    assert!(
        listed["owners"]
            .as_array()
            .unwrap()
            .iter()
            .any(|o| o["owner"].is_null() && o["names"] == serde_json::json!(["ns1.example.com"]))
    );
    assert_eq!(
        east_view["names"],
        serde_json::json!(["b.example.com"]),
        "{listed:#}"
    );
    assert!(
        east_view["heartbeat"]["ageSeconds"].as_i64().unwrap() < 5,
        "{listed:#}"
    );

    // East is alive: refused, and nothing removed.
    let refused = tokio::task::block_in_place(|| {
        zone_command(&bind, &["release", "--owner", "east", "--dead-after", "3s"])
    });
    assert_eq!(refused.status.code(), Some(1), "{refused:?}");
    assert!(
        String::from_utf8_lossy(&refused.stdout).contains("refused: owner \"east\" is alive"),
        "{refused:?}"
    );
    assert_eq!(
        tokio::task::block_in_place(|| in_zone(&bind, "b.example.com")),
        [EAST]
    );

    // East dies; once its heartbeat is 3s old its names are released.
    east_serve.kill();
    tokio::time::sleep(Duration::from_secs(4)).await;
    let released = tokio::task::block_in_place(|| {
        zone_command(&bind, &["release", "--owner", "east", "--dead-after", "3s"])
    });
    let text = String::from_utf8_lossy(&released.stdout);
    assert!(released.status.success(), "{released:?}");
    assert!(
        text.contains("released 1 names of owner \"east\""),
        "{text}"
    );
    assert!(
        text.find("removed b.example.com A").unwrap()
            < text.find("removed a-b.example.com TXT").unwrap(),
        "records before their ownership records: {text}"
    );
    let records = tokio::task::block_in_place(|| bind.axfr());
    assert!(owners_in_zone(&records, "b.example.com").is_empty());
    assert!(tokio::task::block_in_place(|| in_zone(&bind, "b.example.com")).is_empty());

    // The name is free: west's view lets its route through, and west publishes it.
    let start = Instant::now();
    loop {
        let run = tokio::task::block_in_place(|| west.apply(&route("b1", "b.example.com"), &[]));
        if run.success {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "{run:?}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    wait_in_zone(&bind, "b.example.com", &[WEST], &west_serve).await;
    drop(east);
}

/// Two clusters configured with one owner id: each sees the other's heartbeats, says so
/// (`gateway_dns_owner_id_conflict`, an error in the log) and writes no DNS; once one is gone,
/// the other writes again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_installations_with_one_owner_id_find_each_other_and_stop_writing() {
    let bind = Bind::start("example.com", "");
    let args = [
        "--txt-owner-id",
        "shared",
        "--owner-heartbeat-interval",
        "1s",
    ];
    let (east, east_serve) = cluster_with(&bind, "east", EAST, &args).await;
    let (_west, mut west_serve) = cluster_with(&bind, "west", WEST, &args).await;
    let conflict = "gateway_dns_owner_id_conflict";
    for serve in [&east_serve, &west_serve] {
        let start = Instant::now();
        while serve.metric(conflict).await != Some(1.0) {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "no conflict seen:\n{}",
                serve.log_tail()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        assert!(
            serve
                .log()
                .contains("another installation writes with this --txt-owner-id"),
            "{}",
            serve.log_tail()
        );
    }
    // A Warning Event on each installation's Lease says why nothing is written.
    for cluster in [&east, &_west] {
        wait_event(cluster, "gateway-dns", |e| {
            e["reason"] == "OwnerIdConflict"
                && e["type"] == "Warning"
                && e["regarding"]["kind"] == "Lease"
        })
        .await;
    }
    // East's new route is admitted, but nothing is written while the conflict lasts.
    tokio::task::block_in_place(|| east.apply(&route("c1", "c.example.com"), &[]).ok());
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(
        tokio::task::block_in_place(|| in_zone(&bind, "c.example.com")).is_empty(),
        "written during a conflict:\n{}",
        east_serve.log_tail()
    );
    // West goes; east sees no other writer any more and publishes.
    west_serve.kill();
    wait_in_zone(&bind, "c.example.com", &[EAST], &east_serve).await;
    assert_eq!(east_serve.metric(conflict).await, Some(0.0));
}

/// A name both clusters list in `--shared-name` is the union of their targets, each cluster
/// adding and removing its own; a name only east shares is refused at west's `kubectl apply`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_shared_across_clusters_is_the_union_and_each_cluster_removes_only_its_own() {
    let bind = Bind::start("example.com", "");
    let fast = ["--zone-refresh-interval", "1s"];
    let east_args = [&fast[..], &["--shared-name", "s.example.com,t.example.com"]].concat();
    let west_args = [&fast[..], &["--shared-name", "s.example.com"]].concat();
    let (east, east_serve) = cluster_with(&bind, "east", EAST, &east_args).await;
    let (west, west_serve) = cluster_with(&bind, "west", WEST, &west_args).await;

    tokio::task::block_in_place(|| east.apply(&route("s1", "s.example.com"), &[]).ok());
    wait_in_zone(&bind, "s.example.com", &[EAST], &east_serve).await;
    wait_view(&west_serve, 1.0).await;
    // West shares the name too: its apply is admitted, and its target joins east's.
    let joined = tokio::task::block_in_place(|| west.apply(&route("s2", "s.example.com"), &[]));
    assert!(joined.success, "{joined:?}");
    let both = [WEST, EAST];
    wait_in_zone(&bind, "s.example.com", &both, &west_serve).await;
    // No flap: resyncs of both (every 5 s) leave the union as it is.
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(7) {
        assert_eq!(
            tokio::task::block_in_place(|| in_zone(&bind, "s.example.com")),
            both
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let owners = tokio::task::block_in_place(|| {
        let records = bind.axfr();
        owners_in_zone(&records, "s.example.com")
    });
    assert_eq!(owners, ["east", "west"], "one ownership value per cluster");
    // explain from west shows both owners of the name, and west's part in sync.
    let mut explain: Vec<String> = ["explain", "--output", "json", "--kubeconfig"]
        .map(String::from)
        .to_vec();
    explain.push(west.kubeconfig().display().to_string());
    explain.extend(bind.serve_args());
    explain.extend(["--txt-owner-id", "west", "--shared-name", "s.example.com"].map(String::from));
    explain.push("s.example.com".to_owned());
    let explained = Command::new(env!("CARGO_BIN_EXE_gateway-dns"))
        .args(&explain)
        .envs(bind.serve_env())
        .output()
        .unwrap();
    let json: serde_json::Value =
        serde_json::from_slice(&explained.stdout).unwrap_or_else(|_| panic!("{explained:?}"));
    assert_eq!(
        json["provider"]["records"][0]["sharedBy"],
        serde_json::json!(["east", "west"]),
        "{json:#}"
    );
    assert_eq!(json["provider"]["inSync"], true, "{json:#}");

    // East alone shares t: west, which does not, is refused it, and told why.
    tokio::task::block_in_place(|| east.apply(&route("t1", "t.example.com"), &[]).ok());
    wait_in_zone(&bind, "t.example.com", &[EAST], &east_serve).await;
    let start = Instant::now();
    let refused = loop {
        let run = tokio::task::block_in_place(|| {
            west.apply(&route("t2", "t.example.com"), &["--dry-run=server"])
        });
        if !run.success {
            break run;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "{run:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert!(
        denial(&refused.stderr).starts_with(
            "HostnameOwnedInZone: t.example.com is shared across clusters by owner \"east\" \
             (HTTPRoute apps/t1, 203.0.113.10); this cluster does not list it in --shared-name"
        ),
        "{refused:?}"
    );

    // East's route goes: only east's target goes.
    tokio::task::block_in_place(|| {
        east.kubectl(&["delete", "httproute", "-n", "apps", "s1"])
            .ok()
    });
    wait_in_zone(&bind, "s.example.com", &[WEST], &east_serve).await;
    let owners = tokio::task::block_in_place(|| owners_in_zone(&bind.axfr(), "s.example.com"));
    assert_eq!(owners, ["west"]);
    // And the last owner's removal removes the name.
    tokio::task::block_in_place(|| {
        west.kubectl(&["delete", "httproute", "-n", "apps", "s2"])
            .ok()
    });
    wait_in_zone(&bind, "s.example.com", &[], &west_serve).await;
    assert!(
        tokio::task::block_in_place(|| owners_in_zone(&bind.axfr(), "s.example.com")).is_empty()
    );
}

/// With `--adopt-after 6s`, west takes over a name whose owner's heartbeat stopped: refused
/// while east beats (every second), admitted and written under west's ownership once east has
/// been silent longer, with a Normal `DNSRecordAdopted` Event on west's route.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_of_an_owner_gone_silent_is_adopted_after_the_bound() {
    let bind = Bind::start("example.com", "");
    let beat = [
        "--zone-refresh-interval",
        "1s",
        "--owner-heartbeat-interval",
        "1s",
    ];
    let adopting = [&beat[..], &["--adopt-after", "6s"]].concat();
    let (east, mut east_serve) = cluster_with(&bind, "east", EAST, &beat).await;
    let (west, west_serve) = cluster_with(&bind, "west", WEST, &adopting).await;
    tokio::task::block_in_place(|| east.apply(&route("b1", "b.example.com"), &[]).ok());
    wait_in_zone(&bind, "b.example.com", &[EAST], &east_serve).await;
    wait_view(&west_serve, 1.0).await;
    // Alive: refused, and past the bound still east's.
    let refused = tokio::task::block_in_place(|| west.apply(&route("b2", "b.example.com"), &[]));
    assert!(!refused.success, "{refused:?}");
    tokio::time::sleep(Duration::from_secs(8)).await;
    assert_eq!(
        tokio::task::block_in_place(|| in_zone(&bind, "b.example.com")),
        [EAST]
    );

    east_serve.kill();
    let killed = Instant::now();
    // West's view frees the name once east has been silent past the bound.
    let admitted = loop {
        let run = tokio::task::block_in_place(|| west.apply(&route("b2", "b.example.com"), &[]));
        if run.success {
            break killed.elapsed();
        }
        assert!(
            killed.elapsed() < Duration::from_secs(30),
            "{run:?}\n{}",
            west_serve.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    // East's last beat came up to an interval before the kill, and heartbeats hold whole
    // seconds: the bound counts from that beat, so the kill is at most ~2 s into it.
    assert!(
        admitted >= Duration::from_secs(3),
        "admitted {admitted:?} after the kill"
    );
    wait_in_zone(&bind, "b.example.com", &[WEST], &west_serve).await;
    let owners = tokio::task::block_in_place(|| owners_in_zone(&bind.axfr(), "b.example.com"));
    assert_eq!(owners, ["west"]);
    let event = wait_event(&west, "apps", |e| {
        e["reason"] == "DNSRecordAdopted" && e["regarding"]["name"] == "b2"
    })
    .await;
    assert_eq!(event["type"], "Normal");
    assert!(
        event["note"]
            .as_str()
            .unwrap_or_default()
            .contains("adopted from owner \"east\""),
        "{event:#}"
    );
    drop(east);
}
