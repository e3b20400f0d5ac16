//! `gateway-dns explain` as a user runs it: the real binary over the example cluster's
//! manifests (text, JSON, the route form, bad input and exit codes), and against real BIND,
//! whose records it lists (read-only) beside what the sync loop would write.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use crate::support::bind::{Bind, SECRET};
use crate::support::dig;

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn manifests() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/cluster")
        .display()
        .to_string()
}

/// The binary with a clean `GATEWAY_DNS_*` environment (and no KUBECONFIG) plus `env`.
fn gateway_dns(args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut command = Command::new(env!("CARGO_BIN_EXE_gateway-dns"));
    command.args(args);
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("GATEWAY_DNS_") || key == "KUBECONFIG" {
            command.env_remove(key);
        }
    }
    command
        .env("GATEWAY_DNS_LOG", "off")
        .envs(env.iter().copied());
    let out = command.output().expect("gateway-dns runs");
    Run {
        code: out.status.code().expect("exited, not signalled"),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `explain ARGS --manifests examples/cluster`.
fn explain(args: &[&str]) -> Run {
    let dir = manifests();
    let mut all = vec!["explain", "--manifests", &dir];
    all.extend_from_slice(args);
    gateway_dns(&all, &[])
}

fn json(run: &Run) -> Value {
    serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\nstderr: {}", run.stdout, run.stderr))
}

#[test]
fn a_contested_name_in_text_names_the_winner_the_loser_and_the_record() {
    let run = explain(&["b.example.com"]);
    // A claim on the name is denied: 1, as `check` exits on a denial.
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(run.stderr.is_empty(), "{}", run.stderr);
    let text = &run.stdout;
    for line in [
        "b.example.com resolves to 203.0.113.10 (A).",
        "The claim of HTTPRoute/apps/b1 keeps the name.",
        "HTTPRoute/apps/b1 (created 2026-01-12T09:00:00Z): published",
        "  why: keeps the name: oldest claim wins: HTTPRoute/apps/b1 was created 2026-01-12T09:00:00Z, before HTTPRoute/apps/b2 (created 2026-01-13T09:00:00Z)",
        "  claim #1 through Gateway infra/gw1 -> 203.0.113.10 [spec.hostnames[0]]: wins",
        "    listener https (*.example.com): accepts the route; serves b.example.com",
        "HTTPRoute/apps/b2 (created 2026-01-13T09:00:00Z): denied",
        "  claim #2 through Gateway infra/gw2 -> 203.0.113.20 [spec.hostnames[0]]: loses (decided by creationTimestamp)",
        "  deny  HostnameConflict: b.example.com is already served by Gateway infra/gw1 (203.0.113.10) for HTTPRoute apps/b1; attach to infra/gw1 or drop the hostname [spec.hostnames[0]]",
        "  b.example.com A 203.0.113.10 ttl 300 (default) (from HTTPRoute/apps/b1; Gateway infra/gw1)",
        "DNS provider: not consulted: no --provider given",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "missing line {line:?} in:\n{text}"
        );
    }
    // The winner is told before the loser.
    let b1 = text.find("HTTPRoute/apps/b1 (created").unwrap();
    let b2 = text.find("HTTPRoute/apps/b2 (created").unwrap();
    assert!(b1 < b2, "{text}");
}

#[test]
fn manifests_alone_read_no_cluster_whatever_kubeconfig_says() {
    // As README and the help say: KUBECONFIG is read only without --manifests; with them only
    // --kubeconfig adds the cluster. A KUBECONFIG that cannot be read changes nothing here.
    let dir = manifests();
    let plain = explain(&["b.example.com"]);
    let with_env = gateway_dns(
        &["explain", "--manifests", &dir, "b.example.com"],
        &[("KUBECONFIG", "/nonexistent/kubeconfig")],
    );
    assert_eq!(with_env.code, plain.code, "{}", with_env.stderr);
    assert_eq!(with_env.stdout, plain.stdout);
    assert!(with_env.stderr.is_empty(), "{}", with_env.stderr);
    let flag = gateway_dns(
        &[
            "explain",
            "--manifests",
            &dir,
            "--kubeconfig",
            "/nonexistent/kubeconfig",
            "b.example.com",
        ],
        &[],
    );
    assert_eq!(flag.code, 2, "--kubeconfig is read: {}", flag.stdout);
    let help = gateway_dns(&["explain", "--help"], &[]);
    assert!(
        help.stdout
            .contains("KUBECONFIG is read only without --manifests"),
        "{}",
        help.stdout
    );
}

#[test]
fn json_is_stable_and_complete() {
    let run = explain(&["--output", "json", "b.example.com"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let out = json(&run);
    assert_eq!(out["explains"], "name");
    assert_eq!(out["name"], "b.example.com");
    assert_eq!(out["resolves"], true);
    assert_eq!(out["winner"], "HTTPRoute/apps/b1");
    assert_eq!(
        out["records"],
        json!([{"dnsName": "b.example.com", "recordType": "A", "targets": ["203.0.113.10"],
                "ttl": null, "gateways": ["infra/gw1"], "routes": ["HTTPRoute/apps/b1"]}])
    );
    assert_eq!(out["coveredBy"], json!([]));
    let routes = out["routes"].as_array().unwrap();
    assert_eq!(routes.len(), 2);
    let loser = &routes[1];
    assert_eq!(loser["route"], "HTTPRoute/apps/b2");
    assert_eq!(loser["created"], "2026-01-13T09:00:00Z");
    assert_eq!(loser["inScope"], true);
    assert_eq!(loser["fate"], "denied");
    assert_eq!(
        loser["claims"],
        json!([{"rank": 2, "gateway": "infra/gw2", "listenerSet": null,
                "targets": ["203.0.113.20"], "field": "spec.hostnames[0]", "result": "loses",
                "decidedBy": "creationTimestamp", "why": loser["why"], "programmed": true}])
    );
    assert_eq!(
        loser["parents"],
        json!([{"index": 0, "field": "spec.parentRefs[0]", "parent": "Gateway/infra/gw2",
                "sectionName": null, "port": null, "attached": true, "gateway": "infra/gw2",
                "listenerSet": null, "targets": ["203.0.113.20"],
                "listeners": [{"name": "http", "hostname": null, "accepted": true,
                               "refusal": null, "hostnames": ["b.example.com"]}],
                "findings": []}])
    );
    assert_eq!(loser["findings"][0]["reason"], "HostnameConflict");
    assert_eq!(loser["findings"][0]["action"], "deny");
    assert_eq!(loser["findings"][0]["hostname"], "b.example.com");
    assert_eq!(
        out["provider"],
        json!({"consulted": false, "provider": null, "zones": [],
               "note": "not consulted: no --provider given", "records": [], "inSync": null})
    );
    // The same run gives the same bytes: stable.
    assert_eq!(
        explain(&["--output", "json", "b.example.com"]).stdout,
        run.stdout
    );
    // The output format is read from the environment too.
    let dir = manifests();
    let by_env = gateway_dns(
        &["explain", "--manifests", &dir, "b.example.com"],
        &[("GATEWAY_DNS_OUTPUT", "json")],
    );
    assert_eq!(by_env.stdout, run.stdout);
}

#[test]
fn exit_status_says_whether_the_name_resolves_cleanly() {
    let a = explain(&["a.example.com"]);
    assert_eq!(a.code, 0, "{}{}", a.stdout, a.stderr);
    assert!(
        a.stdout
            .contains("HTTPRoute/apps/a2 (created 2026-01-11T09:00:00Z): published")
    );
    assert!(
        a.stdout.lines().any(|l| l
            == "The claim of HTTPRoute/apps/a1 keeps the name; HTTPRoute/apps/a2 shares it (same targets)."),
        "{}",
        a.stdout
    );
    let d = explain(&["d.example.com"]);
    assert_eq!(d.code, 1, "{}", d.stdout);
    assert!(
        d.stdout
            .starts_with("d.example.com does not resolve: no claim on it is published."),
        "{}",
        d.stdout
    );
    assert!(
        d.stdout
            .contains("deny  NoMatchingListenerHostname: d.example.com is outside")
    );
    let nobody = explain(&["nobody.example.com"]);
    assert_eq!(nobody.code, 1);
    assert!(
        nobody
            .stdout
            .starts_with("nobody.example.com does not resolve through gateway-dns: no route claims or asks for it."),
        "{}",
        nobody.stdout
    );
    // In audit mode the losing claim is only audited: the name resolves cleanly.
    let audit = explain(&["--mode", "audit", "b.example.com"]);
    assert_eq!(audit.code, 0, "{}", audit.stdout);
    assert!(
        audit
            .stdout
            .contains("HTTPRoute/apps/b2 (created 2026-01-13T09:00:00Z): dropped")
    );
}

#[test]
fn the_route_form_lists_each_name_with_its_fate() {
    // kubectl's form: -n NS kind/name, any case, singular or plural.
    let b2 = explain(&["-n", "apps", "httproute/b2"]);
    assert_eq!(b2.code, 1, "{}{}", b2.stdout, b2.stderr);
    let text = &b2.stdout;
    for line in [
        "HTTPRoute/apps/b2 (created 2026-01-13T09:00:00Z): 1 name(s), 0 published.",
        "  spec.parentRefs[0] Gateway/infra/gw2: attached -> 203.0.113.20",
        "  b.example.com: denied",
        "    claim #2 through Gateway infra/gw2 -> 203.0.113.20 [spec.hostnames[0]]: loses (decided by creationTimestamp)",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "missing {line:?} in:\n{text}"
        );
    }
    // check's form names the same route; the JSON lists names with their fates.
    let a1 = explain(&["--output", "json", "HTTPRoute/apps/a1"]);
    assert_eq!(a1.code, 0, "{}", a1.stderr);
    let out = json(&a1);
    assert_eq!(out["explains"], "route");
    assert_eq!(out["route"], "HTTPRoute/apps/a1");
    assert_eq!(out["names"][0]["name"], "a.example.com");
    assert_eq!(out["names"][0]["fate"], "published");
    assert_eq!(
        out["names"][0]["records"][0]["targets"],
        json!(["203.0.113.10"])
    );
    assert_eq!(
        explain(&["--output", "json", "-n", "apps", "httproutes/a1"]).stdout,
        a1.stdout
    );
}

#[test]
fn bad_input_is_said_once_with_exit_2() {
    for (args, message) in [
        (
            &["bad_name.example.com"][..],
            "gateway-dns explain: \"bad_name.example.com\" is not a valid DNS name: it contains '_'; only a-z, 0-9, '-' and '.' are allowed",
        ),
        (
            &["-n", "infra", "gateway/gw1"][..],
            "gateway-dns explain: Gateway is not a route kind: explain takes a DNS name or a route (HTTPRoute, GRPCRoute, TLSRoute, TCPRoute, UDPRoute)",
        ),
        (
            &["ingress/web"][..],
            "gateway-dns explain: unknown kind \"ingress\": explain takes a DNS name or a route (HTTPRoute, GRPCRoute, TLSRoute, TCPRoute, UDPRoute)",
        ),
        (
            &["-n", "apps", "httproute/nope"][..],
            "gateway-dns explain: HTTPRoute apps/nope is not known to gateway-dns (no such route was read)",
        ),
        (
            &[
                "--provider",
                "rfc2136",
                "--rfc2136-server",
                "127.0.0.1:1",
                "b.example.com",
            ][..],
            "gateway-dns explain: --provider rfc2136 needs --zone ZONE: the zones to list",
        ),
    ] {
        let run = explain(args);
        assert_eq!(run.code, 2, "{args:?}: {}{}", run.stdout, run.stderr);
        assert!(run.stdout.is_empty(), "{args:?}: {}", run.stdout);
        assert_eq!(run.stderr.trim_end(), message, "{args:?}");
    }
    let missing = gateway_dns(
        &[
            "explain",
            "--manifests",
            "/nonexistent/manifests",
            "a.example.com",
        ],
        &[],
    );
    assert_eq!(missing.code, 2);
    assert!(
        missing
            .stderr
            .starts_with("gateway-dns explain: /nonexistent/manifests"),
        "{}",
        missing.stderr
    );
    // The embedded server cannot be listed from outside serve: said, not an error.
    let embedded = explain(&["--provider", "embedded", "a.example.com"]);
    assert_eq!(embedded.code, 0, "{}", embedded.stderr);
    assert!(
        embedded
            .stdout
            .contains("DNS provider: not consulted: the embedded DNS server's records live in its serve process"),
        "{}",
        embedded.stdout
    );
}

/// `serve --once` over the example cluster into `bind`.
fn sync_once(bind: &Bind) {
    let dir = manifests();
    let mut args = vec!["serve", "--once", "--webhook=false", "--manifests", &dir];
    let serve_args = bind.serve_args();
    args.extend(serve_args.iter().map(String::as_str));
    let run = gateway_dns(&args, &bind.serve_env());
    assert_eq!(run.code, 0, "serve --once: {}{}", run.stdout, run.stderr);
}

#[test]
fn explain_lists_what_bind_holds_read_only() {
    // d.example.com is someone else's record: gateway-dns would write nothing there.
    let bind = Bind::start("example.com", "d IN A 198.51.100.99");
    let dir = manifests();
    let serve_args = bind.serve_args();
    let explain_bind = |name: &str| {
        let mut args = vec!["explain", "--output", "json", "--manifests", &dir, name];
        args.extend(serve_args.iter().map(String::as_str));
        let run = gateway_dns(&args, &[("GATEWAY_DNS_RFC2136_TSIG_SECRET", SECRET)]);
        assert!(
            run.code == 0 || run.code == 1,
            "{name}: {}{}",
            run.stdout,
            run.stderr
        );
        json(&run)["provider"].clone()
    };

    // Before any sync: BIND has nothing for the name, so it is not in sync.
    let before = explain_bind("a.example.com");
    assert_eq!(before["consulted"], true);
    assert_eq!(before["provider"], "rfc2136");
    assert_eq!(before["zones"], json!(["example.com"]));
    assert_eq!(before["records"], json!([]));
    assert_eq!(before["inSync"], false);
    // explain only lists: still nothing there.
    assert!(
        dig::query(bind.addr(), "a.example.com", "A", false)
            .data("A")
            .is_empty()
    );

    sync_once(&bind);
    assert_eq!(
        dig::query(bind.addr(), "b.example.com", "A", false).data("A"),
        ["203.0.113.10"]
    );
    let after = explain_bind("b.example.com");
    assert_eq!(
        after["records"],
        json!([{"dnsName": "b.example.com", "recordType": "A", "targets": ["203.0.113.10"],
                "ttl": 300, "owner": "default", "resource": "httproute/apps/b1"}])
    );
    assert_eq!(after["inSync"], true);

    // A record gateway-dns does not own, where it would write nothing.
    let foreign = explain_bind("d.example.com");
    assert_eq!(
        foreign["records"],
        json!([{"dnsName": "d.example.com", "recordType": "A", "targets": ["198.51.100.99"],
                "ttl": foreign["records"][0]["ttl"], "owner": null, "resource": null}])
    );
    // Not ours, and nothing of ours is wanted there: the sync loop has nothing to change.
    assert_eq!(foreign["inSync"], true);

    // The text says the same to a person.
    let mut args = vec!["explain", "--manifests", &dir, "b.example.com"];
    args.extend(serve_args.iter().map(String::as_str));
    let text = gateway_dns(&args, &[("GATEWAY_DNS_RFC2136_TSIG_SECRET", SECRET)]).stdout;
    for line in [
        "What rfc2136 holds now (zones example.com):",
        "  b.example.com A 203.0.113.10 ttl 300 (owner default, httproute/apps/b1)",
        "  in sync: the provider holds what the sync loop would write",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "missing {line:?} in:\n{text}"
        );
    }

    // A provider that cannot be listed is an input error, said once.
    let mut args = vec!["explain", "--manifests", &dir, "b.example.com"];
    args.extend(serve_args.iter().map(String::as_str));
    let wrong = gateway_dns(
        &args,
        &[(
            "GATEWAY_DNS_RFC2136_TSIG_SECRET",
            "d3Jvbmctc2VjcmV0LXdyb25nLXNlY3JldC0zMiE=",
        )],
    );
    assert_eq!(wrong.code, 2, "{}{}", wrong.stdout, wrong.stderr);
    assert!(wrong.stdout.is_empty());
    assert_eq!(wrong.stderr.lines().count(), 1, "{}", wrong.stderr);
    assert!(
        wrong
            .stderr
            .starts_with("gateway-dns explain: listing the records of example.com (rfc2136)"),
        "{}",
        wrong.stderr
    );
}

/// `serve`'s embedded DNS server stands in for a secondary (any server that answers will do):
/// explain asks it for the name, says it is current when it serves what the sync loop would
/// write, not current when the files differ from what it serves, and names a server that does
/// not answer.
#[test]
fn secondaries_are_asked_whether_they_serve_the_current_records() {
    use crate::support::net::{free_port, wait_until};
    let (dns, silent, metrics) = (free_port(), free_port(), free_port());
    /// Killed on drop, so that a failed assertion leaves nothing running.
    struct Killed(std::process::Child);
    impl Drop for Killed {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _serve = Killed(
        Command::new(env!("CARGO_BIN_EXE_gateway-dns"))
            .args(["serve", "--webhook=false", "--manifests", &manifests()])
            .args(["--dns-listen", &format!("127.0.0.1:{dns}")])
            .args(["--metrics-listen", &format!("127.0.0.1:{metrics}")])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("serve starts"),
    );
    let server: std::net::SocketAddr = ([127, 0, 0, 1], dns).into();
    wait_until(
        "b.example.com resolves",
        std::time::Duration::from_secs(30),
        || dig::query(server, "b.example.com", "A", false).data("A") == ["203.0.113.10"],
    );
    let secondaries = format!("127.0.0.1:{dns},127.0.0.1:{silent}");
    let run = explain(&[
        "b.example.com",
        "--provider",
        "embedded",
        "--embedded-secondary",
        &secondaries,
        "--output",
        "json",
    ]);
    let asked = json(&run)["provider"]["secondaries"].clone();
    assert_eq!(
        asked[0]["secondary"],
        format!("127.0.0.1:{dns}"),
        "{asked:#}"
    );
    assert_eq!(asked[0]["current"], true, "{asked:#}");
    assert_eq!(
        asked[0]["records"],
        json!([{"dnsName": "b.example.com", "recordType": "A", "target": "203.0.113.10"}])
    );
    assert_eq!(asked[1]["current"], false, "{asked:#}");
    assert!(
        asked[1]["error"]
            .as_str()
            .is_some_and(|e| e.contains("no answer")),
        "{asked:#}"
    );

    // Without b1 in the files, the sync loop would write gw2's address: the server, which still
    // serves gw1's, is not current.
    let work = tempfile::tempdir().unwrap();
    let routes = std::fs::read_to_string(Path::new(&manifests()).join("routes.yaml")).unwrap();
    let without_b1: Vec<&str> = routes
        .split("\n---\n")
        .filter(|doc| !doc.contains("name: b1"))
        .collect();
    std::fs::write(work.path().join("routes.yaml"), without_b1.join("\n---\n")).unwrap();
    std::fs::copy(
        Path::new(&manifests()).join("gateways.yaml"),
        work.path().join("gateways.yaml"),
    )
    .unwrap();
    let changed = work.path().display().to_string();
    let run = gateway_dns(
        &[
            "explain",
            "--manifests",
            &changed,
            "b.example.com",
            "--provider",
            "embedded",
            "--embedded-secondary",
            &format!("127.0.0.1:{dns}"),
        ],
        &[],
    );
    assert!(
        run.stdout.contains(&format!(
            "127.0.0.1:{dns}: not current yet: serves b.example.com A 203.0.113.10"
        )),
        "{}{}",
        run.stdout,
        run.stderr
    );
}
