//! Names and targets, end to end: the real binary's `check --output json` shows the records, and
//! `serve --once` writes them into real BIND, checked with `dig`. Route target overrides (and a
//! namespace that may not use them), the CNAME rules, names shared on purpose, Gateway-level
//! TTLs, address filters for split-horizon and listener hostnames of L4 routes.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::support::bind::Bind;
use crate::support::dig;

/// Runs the binary with no GATEWAY_DNS_ variable from the test's environment, logs off.
pub fn gateway_dns(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_gateway-dns"));
    command.args(args);
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("GATEWAY_DNS_") {
            command.env_remove(key);
        }
    }
    command
        .env("GATEWAY_DNS_LOG", "off")
        .envs(env.iter().copied());
    command.output().expect("gateway-dns runs")
}

/// `check --output json` over `dir`, with its exit status.
pub fn check_json(dir: &Path, flags: &[&str]) -> (i32, Value) {
    let dir = dir.display().to_string();
    let out = gateway_dns(&[&["check", "--output", "json", &dir], flags].concat(), &[]);
    let json = serde_json::from_slice(&out.stdout).unwrap_or_else(|err| {
        panic!(
            "check prints JSON ({err}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().expect("exited"), json)
}

/// `serve --once` over the manifests in `dir` into `bind`; returns the exit status.
pub fn serve_once_into(bind: &Bind, dir: &Path, flags: &[&str]) -> i32 {
    let dir = dir.display().to_string();
    let bind_args = bind.serve_args();
    let bind_args: Vec<&str> = bind_args.iter().map(String::as_str).collect();
    let args = [
        &["serve", "--once", "--webhook=false", "--manifests", &dir][..],
        &bind_args,
        flags,
    ]
    .concat();
    let out = gateway_dns(&args, &bind.serve_env());
    let code = out.status.code().expect("exited");
    assert!(
        code == 0 || code == 3,
        "serve --once: {code}\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    code
}

/// (dnsName, recordType, targets) of check's JSON records.
pub fn records(json: &Value) -> Vec<(String, String, Vec<String>)> {
    json["records"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            (
                r["dnsName"].as_str().unwrap_or_default().to_owned(),
                r["recordType"].as_str().unwrap_or_default().to_owned(),
                r["targets"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|t| t.as_str().map(str::to_owned))
                    .collect(),
            )
        })
        .collect()
}

/// (reason, object, action) of check's JSON violations.
pub fn violations(json: &Value) -> Vec<(String, String, String)> {
    json["violations"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|v| {
            let field = |k: &str| v[k].as_str().unwrap_or_default().to_owned();
            (field("reason"), field("object"), field("action"))
        })
        .collect()
}

pub fn owned(rows: &[(&str, &str, &[&str])]) -> Vec<(String, String, Vec<String>)> {
    rows.iter()
        .map(|(name, kind, targets)| {
            (
                name.to_string(),
                kind.to_string(),
                targets.iter().map(|t| t.to_string()).collect(),
            )
        })
        .collect()
}

const MANIFESTS: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: apps}
---
apiVersion: v1
kind: Namespace
metadata:
  name: locked
  labels: {gateway-dns.io/route-targets: forbid}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: public, namespace: infra}
spec:
  gatewayClassName: example
  listeners:
  - {name: https, protocol: HTTPS, port: 443, hostname: "*.example.com", allowedRoutes: {namespaces: {from: All}}}
status:
  addresses: [{type: IPAddress, value: 203.0.113.10}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: by-ip
  namespace: apps
  annotations: {external-dns.kubernetes.io/target: "198.51.100.7"}
spec:
  parentRefs: [{name: public, namespace: infra}]
  hostnames: [ip.example.com]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: by-name
  namespace: apps
  annotations: {external-dns.alpha.kubernetes.io/target: "edge.example.net"}
spec:
  parentRefs: [{name: public, namespace: infra}]
  hostnames: [alias.example.com]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: plain, namespace: apps}
spec:
  parentRefs: [{name: public, namespace: infra}]
  hostnames: [plain.example.com]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: not-allowed
  namespace: locked
  annotations: {external-dns.kubernetes.io/target: "198.51.100.66"}
spec:
  parentRefs: [{name: public, namespace: infra}]
  hostnames: [locked.example.com]
"#;

#[test]
fn route_targets_reach_dns_as_a_records_and_cnames() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("cluster.yaml"), MANIFESTS).unwrap();

    let (code, json) = check_json(dir.path(), &[]);
    assert_eq!(code, 1, "the forbidden target is a denial: {json:#}");
    assert_eq!(
        records(&json),
        owned(&[
            ("alias.example.com", "CNAME", &["edge.example.net"]),
            ("ip.example.com", "A", &["198.51.100.7"]),
            ("locked.example.com", "A", &["203.0.113.10"]),
            ("plain.example.com", "A", &["203.0.113.10"]),
        ])
    );
    assert_eq!(
        violations(&json),
        [(
            "RouteTargetNotAllowed".to_owned(),
            "HTTPRoute/locked/not-allowed".to_owned(),
            "deny".to_owned()
        )]
    );
    // With the flag off everywhere, no route target counts.
    let (_, strict) = check_json(dir.path(), &["--allow-route-targets=false"]);
    assert_eq!(violations(&strict).len(), 3, "{strict:#}");

    let bind = Bind::start("example.com", "");
    serve_once_into(&bind, dir.path(), &[]);
    let a = |name: &str| dig::query(bind.addr(), name, "A", false);
    assert_eq!(a("ip.example.com").data("A"), ["198.51.100.7"]);
    assert_eq!(a("plain.example.com").data("A"), ["203.0.113.10"]);
    assert_eq!(a("locked.example.com").data("A"), ["203.0.113.10"]);
    assert_eq!(
        dig::query(bind.addr(), "alias.example.com", "CNAME", false).data("CNAME"),
        ["edge.example.net."]
    );
}

const CNAME_MANIFESTS: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: apps}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: edge, namespace: infra}
spec:
  gatewayClassName: example
  listeners:
  - {name: https, protocol: HTTPS, port: 443, allowedRoutes: {namespaces: {from: All}}}
status:
  addresses: [{type: Hostname, value: lb.example.net}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: apex, namespace: apps}
spec:
  parentRefs: [{name: edge, namespace: infra}]
  hostnames: [example.com, www.example.com]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: mixed
  namespace: apps
  annotations: {external-dns.kubernetes.io/target: "198.51.100.8,other.example.net"}
spec:
  parentRefs: [{name: edge, namespace: infra}]
  hostnames: [mixed.example.com]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: two-names
  namespace: apps
  annotations: {external-dns.kubernetes.io/target: "z.example.net,a.example.net"}
spec:
  parentRefs: [{name: edge, namespace: infra}]
  hostnames: [two.example.com]
"#;

#[test]
fn cname_rules_are_reported_and_dns_gets_only_what_it_can_hold() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("cluster.yaml"), CNAME_MANIFESTS).unwrap();

    let (code, json) = check_json(dir.path(), &["--zone", "example.com"]);
    assert_eq!(code, 0, "CnameNotAllowed warns: {json:#}");
    assert_eq!(
        records(&json),
        owned(&[
            ("mixed.example.com", "A", &["198.51.100.8"]),
            ("two.example.com", "CNAME", &["a.example.net"]),
            ("www.example.com", "CNAME", &["lb.example.net"]),
        ])
    );
    let found: Vec<(String, String)> = json["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["reason"].as_str().unwrap().to_owned(),
                v["hostname"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        found,
        [
            ("CnameNotAllowed".to_owned(), "example.com".to_owned()),
            ("CnameNotAllowed".to_owned(), "mixed.example.com".to_owned()),
            ("CnameNotAllowed".to_owned(), "two.example.com".to_owned()),
        ]
    );
    // Without the zone, check cannot know example.com is an apex.
    let (_, unzoned) = check_json(dir.path(), &[]);
    assert!(
        records(&unzoned)
            .iter()
            .any(|(name, kind, _)| name == "example.com" && kind == "CNAME")
    );

    // The sync converges: nothing is sent that BIND would refuse or silently drop.
    let bind = Bind::start("example.com", "");
    assert_eq!(serve_once_into(&bind, dir.path(), &[]), 0);
    let query = |name: &str, rtype: &str| dig::query(bind.addr(), name, rtype, false).data(rtype);
    assert_eq!(query("www.example.com", "CNAME"), ["lb.example.net."]);
    assert_eq!(query("two.example.com", "CNAME"), ["a.example.net."]);
    assert_eq!(query("mixed.example.com", "A"), ["198.51.100.8"]);
    assert!(query("mixed.example.com", "CNAME").is_empty());
    assert!(query("example.com", "CNAME").is_empty());
    assert_eq!(query("example.com", "NS").len(), 1, "the apex keeps its NS");
}

const SHARED_MANIFESTS: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: apps}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: blue, namespace: infra}
spec:
  gatewayClassName: example
  listeners:
  - {name: https, protocol: HTTPS, port: 443, allowedRoutes: {namespaces: {from: All}}}
status:
  addresses: [{type: IPAddress, value: 203.0.113.20}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: green, namespace: infra}
spec:
  gatewayClassName: example
  listeners:
  - {name: https, protocol: HTTPS, port: 443, allowedRoutes: {namespaces: {from: All}}}
status:
  addresses: [{type: IPAddress, value: 203.0.113.10}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: blue, namespace: apps, creationTimestamp: "2025-01-01T00:00:00Z"}
spec:
  parentRefs: [{name: blue, namespace: infra}]
  hostnames: [shop.example.com, www.example.com]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: green, namespace: apps, creationTimestamp: "2025-06-01T00:00:00Z"}
spec:
  parentRefs: [{name: green, namespace: infra}]
  hostnames: [shop.example.com, www.example.com]
"#;

#[test]
fn a_shared_name_resolves_to_every_gateway_and_others_still_conflict() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("cluster.yaml"), SHARED_MANIFESTS).unwrap();
    let flags = ["--shared-name", "shop.example.com"];

    let (code, json) = check_json(dir.path(), &flags);
    assert_eq!(code, 1, "www.example.com still conflicts: {json:#}");
    assert_eq!(
        records(&json),
        owned(&[
            ("shop.example.com", "A", &["203.0.113.10", "203.0.113.20"]),
            ("www.example.com", "A", &["203.0.113.20"]),
        ])
    );
    assert_eq!(json["records"][0]["shared"], true);
    assert_eq!(
        json["records"][0]["gateways"],
        serde_json::json!(["infra/blue", "infra/green"])
    );
    assert!(json["records"][1].get("shared").is_none());
    assert_eq!(
        violations(&json),
        [(
            "HostnameConflict".to_owned(),
            "HTTPRoute/apps/green".to_owned(),
            "deny".to_owned()
        )]
    );
    // The text output marks it too.
    let text = gateway_dns(
        &[
            "check",
            &dir.path().display().to_string(),
            "--shared-name",
            "shop.example.com",
        ],
        &[],
    );
    assert!(
        String::from_utf8_lossy(&text.stdout).contains("shop.example.com (shared)"),
        "{}",
        String::from_utf8_lossy(&text.stdout)
    );

    let bind = Bind::start("example.com", "");
    serve_once_into(&bind, dir.path(), &flags);
    let a = |name: &str| {
        let mut found = dig::query(bind.addr(), name, "A", false).data("A");
        found.sort();
        found
    };
    assert_eq!(a("shop.example.com"), ["203.0.113.10", "203.0.113.20"]);
    assert_eq!(
        a("www.example.com"),
        ["203.0.113.20"],
        "the oldest route keeps it"
    );
}

const TTL_MANIFESTS: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: apps}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: public
  namespace: infra
  annotations: {external-dns.kubernetes.io/ttl: "2m"}
spec:
  gatewayClassName: example
  listeners:
  - {name: https, protocol: HTTPS, port: 443, allowedRoutes: {namespaces: {from: All}}}
status:
  addresses: [{type: IPAddress, value: 203.0.113.10}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: plain, namespace: apps}
spec:
  parentRefs: [{name: public, namespace: infra}]
  hostnames: [plain.example.com]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: short
  namespace: apps
  annotations: {external-dns.kubernetes.io/ttl: "45"}
spec:
  parentRefs: [{name: public, namespace: infra}]
  hostnames: [shared-ttl.example.com]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: long
  namespace: apps
  annotations: {external-dns.alpha.kubernetes.io/ttl: "1h"}
spec:
  parentRefs: [{name: public, namespace: infra}]
  hostnames: [shared-ttl.example.com]
"#;

#[test]
fn a_gateway_ttl_reaches_dns_and_one_name_gets_the_lowest_ttl() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("cluster.yaml"), TTL_MANIFESTS).unwrap();

    let (code, json) = check_json(dir.path(), &[]);
    assert_eq!(code, 0, "TtlConflict warns: {json:#}");
    let ttls: Vec<(&str, u64)> = json["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["dnsName"].as_str().unwrap(), r["ttl"].as_u64().unwrap()))
        .collect();
    assert_eq!(
        ttls,
        [("plain.example.com", 120), ("shared-ttl.example.com", 45)]
    );
    assert_eq!(
        violations(&json),
        [(
            "TtlConflict".to_owned(),
            "HTTPRoute/apps/long".to_owned(),
            "warn".to_owned()
        )]
    );

    let bind = Bind::start("example.com", "");
    serve_once_into(&bind, dir.path(), &[]);
    let ttl_of = |name: &str| dig::query(bind.addr(), name, "A", false).answer[0].ttl;
    assert_eq!(ttl_of("plain.example.com"), 120);
    assert_eq!(ttl_of("shared-ttl.example.com"), 45);
}

/// The `yaml` code blocks of a Markdown file, in order.
fn yaml_blocks(markdown: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in markdown.lines() {
        match (&mut current, line.trim_end()) {
            (None, "```yaml") => current = Some(String::new()),
            (Some(_), "```") => blocks.extend(current.take()),
            (Some(block), text) => {
                block.push_str(text);
                block.push('\n');
            }
            (None, _) => {}
        }
    }
    blocks
}

#[test]
fn split_horizon_example_gives_each_view_its_own_address() {
    let doc_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/split-horizon.md");
    let doc = std::fs::read_to_string(doc_path).unwrap();
    let example = yaml_blocks(&doc)
        .into_iter()
        .find(|block| block.contains("name: edge"))
        .expect("docs/split-horizon.md has the one-Gateway example");
    for documented in [
        "GATEWAY_DNS_TARGET_CIDR, value: \"10.0.0.0/8\"",
        "GATEWAY_DNS_EXCLUDE_TARGET_CIDR, value: \"10.0.0.0/8\"",
    ] {
        assert!(doc.contains(documented), "the doc shows {documented}");
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("example.yaml"), &example).unwrap();

    let (_, inside) = check_json(dir.path(), &["--target-cidr", "10.0.0.0/8"]);
    assert_eq!(
        records(&inside),
        owned(&[("app.example.com", "A", &["10.0.0.10"])])
    );

    let internal = Bind::start("example.com", "");
    let public = Bind::start("example.com", "");
    // The variables, as the installations set them.
    let dir_text = dir.path().display().to_string();
    for (bind, variable, owner) in [
        (&internal, "GATEWAY_DNS_TARGET_CIDR", "internal"),
        (&public, "GATEWAY_DNS_EXCLUDE_TARGET_CIDR", "public"),
    ] {
        let bind_args = bind.serve_args();
        let bind_args: Vec<&str> = bind_args.iter().map(String::as_str).collect();
        let args = [
            &[
                "serve",
                "--once",
                "--webhook=false",
                "--manifests",
                &dir_text,
            ][..],
            &bind_args,
            &["--txt-owner-id", owner],
        ]
        .concat();
        let env = [bind.serve_env()[0], (variable, "10.0.0.0/8")];
        let out = gateway_dns(&args, &env);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let a = |bind: &Bind| dig::query(bind.addr(), "app.example.com", "A", false).data("A");
    assert_eq!(a(&internal), ["10.0.0.10"]);
    assert_eq!(a(&public), ["203.0.113.10"]);
}

const L4_MANIFESTS: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: apps}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: l4, namespace: infra}
spec:
  gatewayClassName: example
  listeners:
  - {name: db, protocol: TCP, port: 5432, hostname: db.example.com, allowedRoutes: {namespaces: {from: All}}}
  - {name: dns, protocol: UDP, port: 53, hostname: resolver.example.com, allowedRoutes: {namespaces: {from: All}}}
  - {name: tls, protocol: TLS, port: 443, hostname: passthrough.example.com, allowedRoutes: {namespaces: {from: All}}}
status:
  addresses: [{type: IPAddress, value: 203.0.113.30}]
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TCPRoute
metadata: {name: db, namespace: apps}
spec:
  parentRefs: [{name: l4, namespace: infra, sectionName: db}]
  rules: [{backendRefs: [{name: db, port: 5432}]}]
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: UDPRoute
metadata: {name: dns, namespace: apps}
spec:
  parentRefs: [{name: l4, namespace: infra, sectionName: dns}]
  rules: [{backendRefs: [{name: dns, port: 53}]}]
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TLSRoute
metadata: {name: tls, namespace: apps}
spec:
  parentRefs: [{name: l4, namespace: infra, sectionName: tls}]
  rules: [{backendRefs: [{name: web, port: 443}]}]
"#;

#[test]
fn l4_and_passthrough_routes_publish_their_listener_hostnames() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("cluster.yaml"), L4_MANIFESTS).unwrap();
    let (code, json) = check_json(dir.path(), &[]);
    assert_eq!(code, 0, "{json:#}");
    assert_eq!(
        records(&json),
        owned(&[
            ("db.example.com", "A", &["203.0.113.30"]),
            ("passthrough.example.com", "A", &["203.0.113.30"]),
            ("resolver.example.com", "A", &["203.0.113.30"]),
        ])
    );
    let bind = Bind::start("example.com", "");
    assert_eq!(serve_once_into(&bind, dir.path(), &[]), 0);
    for name in [
        "db.example.com",
        "resolver.example.com",
        "passthrough.example.com",
    ] {
        assert_eq!(
            dig::query(bind.addr(), name, "A", false).data("A"),
            ["203.0.113.30"],
            "{name}"
        );
    }
}
