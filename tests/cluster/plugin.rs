//! `kubectl gateway-dns`: the gateway-dns binary linked as `kubectl-gateway_dns` on PATH, run
//! by the control plane's real kubectl over the seed story of examples/cluster (applied with
//! kubectl, no webhook, so the losing route exists). The cluster is kubectl's: KUBECONFIG's
//! current context and its namespace, or `--context` and `-n` after the plugin's name (kubectl
//! refuses flags before it).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::support::cluster::{ControlPlane, kubectl, tools};

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}\nstderr: {}", self.stdout, self.stderr))
    }
}

fn run(command: &mut Command) -> Run {
    // Nothing of the shell running the tests: the plugin finds the cluster as kubectl does.
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("GATEWAY_DNS_") || key == "KUBECONFIG" {
            command.env_remove(key);
        }
    }
    let out = command.output().expect("the command runs");
    Run {
        code: out.status.code().expect("exited, not signalled"),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// gateway-dns installed as kubectl's plugin, as docs/kubectl-plugin.md says: a link named
/// `kubectl-gateway_dns` in a directory first on PATH; HOME is a fresh directory, so only
/// KUBECONFIG names a cluster.
struct Plugin {
    _dir: tempfile::TempDir,
    bin: PathBuf,
    home: PathBuf,
    kubeconfig: PathBuf,
}

impl Plugin {
    fn install(kubeconfig: &Path) -> Plugin {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        let home = dir.path().join("home");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        std::os::unix::fs::symlink(
            env!("CARGO_BIN_EXE_gateway-dns"),
            bin.join("kubectl-gateway_dns"),
        )
        .unwrap();
        let copy = dir.path().join("kubeconfig");
        std::fs::copy(kubeconfig, &copy).unwrap();
        Plugin {
            _dir: dir,
            bin,
            home,
            kubeconfig: copy,
        }
    }

    /// The control plane's kubectl with `args`, KUBECONFIG the plugin's copy.
    fn kubectl(&self, args: &[&str]) -> Run {
        let path = std::env::var_os("PATH").unwrap_or_default();
        let path = std::env::join_paths(
            std::iter::once(self.bin.clone()).chain(std::env::split_paths(&path)),
        )
        .unwrap();
        run(Command::new(tools().join("bin/kubectl"))
            .args(args)
            .env("PATH", path)
            .env("HOME", &self.home)
            .env("KUBECONFIG", &self.kubeconfig))
    }

    /// `kubectl gateway-dns ARGS`.
    fn gateway_dns(&self, args: &[&str]) -> Run {
        let mut all = vec!["gateway-dns"];
        all.extend(args);
        self.kubectl(&all)
    }

    /// `kubectl config ARGS` on the plugin's kubeconfig.
    fn config(&self, args: &[&str]) -> String {
        let mut all = vec!["config"];
        all.extend(args);
        kubectl(&self.kubeconfig, &all, None).ok()
    }
}

/// `gateway-dns ARGS`, the binary under its own name.
fn gateway_dns(args: &[&str]) -> Run {
    run(Command::new(env!("CARGO_BIN_EXE_gateway-dns")).args(args))
}

/// external-dns's DNSEndpoint kind, as little of its CRD as `--provider dnsendpoint` reads.
const DNSENDPOINT_CRD: &str = "\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: dnsendpoints.externaldns.k8s.io
  # A *.k8s.io group needs it, as external-dns's own CRD has it.
  annotations: {api-approved.kubernetes.io: \"https://github.com/kubernetes-sigs/external-dns/pull/2007\"}
spec:
  group: externaldns.k8s.io
  scope: Namespaced
  names: {kind: DNSEndpoint, plural: dnsendpoints, singular: dnsendpoint, listKind: DNSEndpointList}
  versions:
  - name: v1alpha1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
";

/// b.example.com as gateway-dns's dnsendpoint provider writes it for owner `default`.
const DNSENDPOINT: &str = "\
apiVersion: externaldns.k8s.io/v1alpha1
kind: DNSEndpoint
metadata:
  name: b.example.com
  namespace: gateway-dns
  labels: {app.kubernetes.io/managed-by: gateway-dns, gateway-dns.io/owner: default}
  annotations: {gateway-dns.io/resource: httproute/apps/b1, gateway-dns.io/dns-name: b.example.com}
spec:
  endpoints:
  - {dnsName: b.example.com, recordType: A, targets: [203.0.113.10]}
";

/// A route in a file without a namespace: `-n` places it.
const NEWCOMER: &str = "\
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: newcomer}
spec:
  parentRefs: [{name: gw2, namespace: infra}]
  hostnames: [b.example.com]
";

#[test]
fn kubectl_runs_gateway_dns_as_its_plugin() {
    let cluster = ControlPlane::start();
    cluster.seed_story_without_webhook();
    let plugin = Plugin::install(&cluster.kubeconfig());

    // kubectl finds it on PATH.
    let list = plugin.kubectl(&["plugin", "list"]);
    assert!(
        list.stdout
            .lines()
            .any(|l| l.ends_with("/kubectl-gateway_dns")),
        "{}{}",
        list.stdout,
        list.stderr
    );

    // The winner and the loser, from KUBECONFIG's current context.
    let text = plugin.gateway_dns(&["explain", "b.example.com"]);
    assert_eq!(
        text.code, 1,
        "a denied claim: {}{}",
        text.stdout, text.stderr
    );
    for line in [
        "b.example.com resolves to 203.0.113.10 (A).",
        "The claim of HTTPRoute/apps/b1 keeps the name.",
    ] {
        assert!(
            text.stdout.lines().any(|l| l == line),
            "missing {line:?} in:\n{}",
            text.stdout
        );
    }
    assert!(
        text.stdout
            .lines()
            .any(|l| l.starts_with("HTTPRoute/apps/b2 (created ") && l.ends_with("): denied")),
        "{}",
        text.stdout
    );

    // The same explanation as gateway-dns's own with that kubeconfig.
    let json = plugin.gateway_dns(&["explain", "b.example.com", "--output", "json"]);
    let kubeconfig = plugin.kubeconfig.to_str().unwrap();
    let direct = gateway_dns(&[
        "explain",
        "b.example.com",
        "--kubeconfig",
        kubeconfig,
        "--output",
        "json",
    ]);
    assert_eq!(json.code, 1, "{}", json.stderr);
    assert_eq!(json.json(), direct.json());
    assert_eq!(json.json()["winner"], "HTTPRoute/apps/b1");

    // A route by KIND/NAME: -n, before or after the subcommand.
    for args in [
        &["-n", "apps", "explain", "httproute/b2", "--output", "json"][..],
        &[
            "explain",
            "httproute/b2",
            "--namespace=apps",
            "--output",
            "json",
        ],
    ] {
        let b2 = plugin.gateway_dns(args);
        assert_eq!(b2.code, 1, "{args:?}: {}", b2.stderr);
        let b2 = b2.json();
        assert_eq!(b2["explains"], "route", "{args:?}");
        assert_eq!(b2["names"][0]["name"], "b.example.com");
        assert_eq!(b2["names"][0]["fate"], "denied");
    }
    // Without -n, the context's namespace: the admin's context names none, so `default`.
    let elsewhere = plugin.gateway_dns(&["explain", "httproute/b2"]);
    assert_eq!(elsewhere.code, 2, "{}", elsewhere.stdout);
    assert!(
        elsewhere
            .stderr
            .contains("HTTPRoute default/b2 is not known"),
        "{}",
        elsewhere.stderr
    );

    // kubectl refuses flags before the plugin's name; they go after it.
    let before = plugin.kubectl(&["-n", "apps", "gateway-dns", "explain", "httproute/b2"]);
    assert_ne!(before.code, 0);
    assert!(
        before
            .stderr
            .contains("flags cannot be placed before plugin name"),
        "{}",
        before.stderr
    );

    // --context: a second context on the same cluster whose namespace is apps, and one whose
    // server does not answer.
    let current = plugin.config(&["current-context"]);
    let current = current.trim();
    let field = |path: &str| {
        plugin.config(&[
            "view",
            "-o",
            &format!("jsonpath={{.contexts[?(@.name==\"{current}\")].context.{path}}}"),
        ])
    };
    let (cluster_name, user) = (field("cluster"), field("user"));
    plugin.config(&[
        "set-context",
        "apps",
        &format!("--cluster={cluster_name}"),
        &format!("--user={user}"),
        "--namespace=apps",
    ]);
    plugin.config(&["set-cluster", "nowhere", "--server=https://127.0.0.1:1"]);
    plugin.config(&[
        "set-context",
        "broken",
        "--cluster=nowhere",
        &format!("--user={user}"),
    ]);
    let apps = plugin.gateway_dns(&["--context", "apps", "explain", "httproute/b2"]);
    assert_eq!(apps.code, 1, "{}{}", apps.stdout, apps.stderr);
    assert!(apps.stdout.contains("HTTPRoute/apps/b2"), "{}", apps.stdout);
    let broken = plugin.gateway_dns(&["explain", "b.example.com", "--context", "broken"]);
    assert_eq!(broken.code, 2, "{}", broken.stdout);
    assert!(
        broken.stderr.starts_with(
            "gateway-dns explain: connecting to the cluster (pass --manifests PATH to explain \
             files offline): reading the cluster at https://127.0.0.1:1/: "
        ),
        "{}",
        broken.stderr
    );
    let unknown = plugin.gateway_dns(&["--context", "nope", "explain", "b.example.com"]);
    assert_eq!(unknown.code, 2, "{}", unknown.stdout);
    assert!(unknown.stderr.contains("nope"), "{}", unknown.stderr);

    // check lays a file over the current context's cluster; -n places its route, and its
    // verdict is explain's.
    let dir = tempfile::tempdir().unwrap();
    let newcomer = dir.path().join("newcomer.yaml");
    std::fs::write(&newcomer, NEWCOMER).unwrap();
    let newcomer = newcomer.to_str().unwrap();
    let checked = plugin.gateway_dns(&["-n", "apps", "check", newcomer, "--output", "json"]);
    assert_eq!(checked.code, 1, "{}{}", checked.stdout, checked.stderr);
    let checked = checked.json();
    let violations: Vec<(&str, &str)> = checked["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| (v["reason"].as_str().unwrap(), v["object"].as_str().unwrap()))
        .collect();
    assert_eq!(
        violations,
        [("HostnameConflict", "HTTPRoute/apps/newcomer")],
        "{checked:#}"
    );
    let explained = plugin.gateway_dns(&[
        "--namespace",
        "apps",
        "explain",
        "b.example.com",
        "--manifests",
        newcomer,
        "--output",
        "json",
    ]);
    let explained = explained.json();
    let fates: Vec<(&str, &str)> = explained["routes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["route"].as_str().unwrap(), r["fate"].as_str().unwrap()))
        .collect();
    assert_eq!(
        fates,
        [
            ("HTTPRoute/apps/b1", "published"),
            ("HTTPRoute/apps/b2", "denied"),
            ("HTTPRoute/apps/newcomer", "denied")
        ],
        "{explained:#}"
    );
    // The context's namespace places it otherwise: apps/newcomer is not in the cluster.
    let in_default = plugin.gateway_dns(&["check", newcomer, "--output", "json"]);
    let in_default = in_default.json();
    assert_eq!(
        in_default["violations"][0]["object"], "HTTPRoute/default/newcomer",
        "{in_default:#}"
    );

    // zone owners, from DNSEndpoint objects in the current context's cluster.
    cluster.apply(DNSENDPOINT_CRD, &[]).ok();
    cluster
        .kubectl(&[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd/dnsendpoints.externaldns.k8s.io",
        ])
        .ok();
    cluster.apply(DNSENDPOINT, &[]).ok();
    let owners = plugin.gateway_dns(&[
        "zone",
        "owners",
        "--provider",
        "dnsendpoint",
        "--zone",
        "example.com",
        "--output",
        "json",
    ]);
    assert_eq!(owners.code, 0, "{}{}", owners.stdout, owners.stderr);
    let owners = owners.json();
    assert_eq!(owners["owners"][0]["owner"], "default", "{owners:#}");
    assert_eq!(
        owners["owners"][0]["names"],
        serde_json::json!(["b.example.com"])
    );
    let nowhere = plugin.gateway_dns(&[
        "zone",
        "owners",
        "--provider",
        "dnsendpoint",
        "--zone",
        "example.com",
        "--context",
        "broken",
    ]);
    assert_eq!(nowhere.code, 2, "{}", nowhere.stdout);

    // Only explain, check and zone owners.
    for refused in [&["serve"][..], &["zone", "release"]] {
        let run = plugin.gateway_dns(refused);
        assert_eq!(run.code, 2, "{refused:?}: {}", run.stdout);
        assert!(
            run.stderr.contains("kubectl gateway-dns"),
            "{refused:?}: {}",
            run.stderr
        );
    }
    let help = plugin.gateway_dns(&["--help"]);
    assert_eq!(help.code, 0, "{}", help.stderr);
    assert!(
        help.stdout
            .contains("Usage: kubectl gateway-dns [OPTIONS] <COMMAND>"),
        "{}",
        help.stdout
    );
}
