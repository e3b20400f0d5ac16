//! The Helm chart against a real API server: every documented values example (and a render
//! that sets the optional fields) passes server-side validation with the cert-manager and
//! prometheus-operator CRDs installed; `helm install` creates the webhook and RBAC objects, a
//! local `gateway-dns serve` running with a token of the chart's ServiceAccount answers
//! `kubectl apply` through the chart's webhook configuration (pointed at it with the chart's
//! `webhook.url` and `webhook.caBundle` values, by `helm upgrade`), and `helm uninstall` leaves
//! no webhook configuration or RBAC behind.

use std::collections::BTreeSet;
use std::io::Write as _;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::cluster::{ControlPlane, GatewayApi, Options, Run, Serve};
use crate::support::helm::{
    APISERVER_SERIES, NAMESPACE, RELEASE, chart_dir, examples, helm, kustomization, render,
};
use crate::support::install::kustomize;
use crate::support::objects;
use crate::support::promql::{exposed_series, metric_names};

/// Values for a render that sets the optional fields the examples leave alone, so their shape
/// reaches the API server's validation too.
const OPTIONAL_FIELDS: [&str; 26] = [
    "--set",
    "imagePullSecrets[0].name=registry",
    "--set",
    "podAnnotations.team=dns",
    "--set",
    "podLabels.team=dns",
    "--set",
    "nodeSelector.pool=system",
    "--set-json",
    r#"tolerations=[{"key":"system","operator":"Exists","effect":"NoSchedule"}]"#,
    "--set-json",
    r#"affinity={"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"pool","operator":"In","values":["system"]}]}]}}}"#,
    "--set",
    "priorityClassName=system-cluster-critical",
    "--set",
    "serviceAccount.annotations.owner=dns",
    "--set-json",
    r#"extraEnv=[{"name":"GATEWAY_DNS_INTERVAL","value":"30s"}]"#,
    "--set-json",
    r#"webhook.namespaceSelector={"matchLabels":{"dns":"managed"},"matchExpressions":[{"key":"team","operator":"Exists"}]}"#,
    "--set",
    "mode=warn",
    "--set",
    "actions.HostnameOutsideListener=deny",
    "--set",
    "podDisruptionBudget.minAvailable=50%",
];

fn dry_run(cluster: &ControlPlane, what: &str, yaml: &str) {
    let run = cluster.apply(yaml, &["--dry-run=server"]);
    assert!(
        run.success,
        "the API server refuses {what}:\n{}{}",
        run.stdout, run.stderr
    );
    let objects = yaml.matches("\nkind: ").count() + usize::from(yaml.starts_with("kind: "));
    let accepted = run.stdout.matches("(server dry run)").count();
    assert!(
        accepted >= objects && objects > 0,
        "{what}: {accepted} of {objects} objects accepted:\n{}",
        run.stdout
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_chart_render_passes_server_side_validation() {
    let cluster = ControlPlane::start_with(&Options {
        gateway_api: GatewayApi::None,
        ..Options::default()
    });
    cluster.install_crd_set("cert-manager");
    cluster.install_crd_set("prometheus-operator");
    cluster.kubectl(&["create", "namespace", NAMESPACE]).ok();

    // The validation does catch a misspelled field in a custom resource (kubectl validates
    // strictly by default), so the runs below mean something.
    let misspelled = "apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata:\n  \
                      name: probe\n  namespace: gateway-dns\nspec:\n  selector: {}\n  \
                      endpoints:\n    - port: metrics\n      intervall: 30s\n";
    let refused = cluster.apply(misspelled, &["--dry-run=server"]);
    assert!(
        !refused.success && refused.stderr.contains("intervall"),
        "{refused:?}"
    );

    dry_run(&cluster, "the chart's defaults", &render(&[], &[]).ok());
    for file in examples() {
        let yaml = render(&[&file], &[]).ok();
        let name = file.file_name().unwrap().to_string_lossy();
        dry_run(&cluster, &format!("examples/{name}"), &yaml);
    }
    let monitoring = chart_dir().join("examples/monitoring.yaml");
    let yaml = render(&[&monitoring], &OPTIONAL_FIELDS).ok();
    dry_run(&cluster, "the chart with its optional fields set", &yaml);
    for (provider, server) in [
        ("rfc2136", "dns.rfc2136.server=10.0.0.53:53"),
        ("pdns", "dns.pdns.server=http://pdns:8081"),
        ("embedded", "dns.zones={example.com}"),
        ("webhook", "dns.webhook.url=http://dns-provider:8888"),
        ("dnsendpoint", "dns.zones={example.com}"),
    ] {
        let provider = format!("dns.provider={provider}");
        let yaml = render(&[], &["--set", &provider, "--set", server]).ok();
        dry_run(&cluster, &provider, &yaml);
    }
    // The kustomize side of the monitoring bundle too.
    let dir = kustomization(&["overlays/cert-manager"], &["components/monitoring"]);
    let docs = kustomize(dir.path());
    let yaml = docs
        .iter()
        .map(|doc| serde_yaml_ng::to_string(&doc.value).unwrap())
        .collect::<Vec<_>>()
        .join("---\n");
    dry_run(
        &cluster,
        "manifests/overlays/cert-manager + components/monitoring",
        &yaml,
    );
}

const GATEWAYS: &str = r#"apiVersion: v1
kind: Namespace
metadata:
  name: infra
---
apiVersion: v1
kind: Namespace
metadata:
  name: shop
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: public
  namespace: infra
spec:
  gatewayClassName: example
  listeners:
  - name: http
    protocol: HTTP
    port: 80
    allowedRoutes:
      namespaces:
        from: All
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: private
  namespace: infra
spec:
  gatewayClassName: example
  listeners:
  - name: http
    protocol: HTTP
    port: 80
    allowedRoutes:
      namespaces:
        from: All
"#;

fn route(name: &str, gateway: &str) -> String {
    let parents = json!([objects::parent("infra", gateway)]);
    objects::yaml(&objects::http_route(
        "shop",
        name,
        parents,
        &["app.example.com"],
    ))
}

/// `kind/name` of every object `kubectl get KINDS` lists (in `namespace`, if given).
fn names(cluster: &ControlPlane, kinds: &str, namespace: Option<&str>) -> BTreeSet<String> {
    let mut args = vec!["get", kinds, "-o", "name"];
    if let Some(namespace) = namespace {
        args.extend(["-n", namespace]);
    }
    cluster
        .kubectl(&args)
        .ok()
        .lines()
        .map(str::to_string)
        .collect()
}

fn promtool_check_metrics(exposition: &str) -> Run {
    let mut child = Command::new("/usr/bin/promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool runs (scripts/test.sh installs Debian's prometheus package)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(exposition.as_bytes())
        .unwrap();
    Run::from(child.wait_with_output().unwrap())
}

/// The exposition `serve` answers with at `/metrics`, without the HTTP response head.
async fn scrape(serve: &Serve) -> String {
    let response = serve.metrics_text().await;
    let (_, body) = response
        .split_once("\r\n\r\n")
        .expect("an HTTP response with a body");
    body.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_install_runs_the_webhook_and_uninstall_removes_it() {
    let cluster = ControlPlane::start();
    let admin = cluster.kubeconfig();
    let chart = chart_dir().display().to_string();
    let values = chart_dir()
        .join("examples/out-of-cluster.yaml")
        .display()
        .to_string();

    // No Pods run here (no nodes), so the chart's own gateway-dns runs on this machine instead,
    // as examples/out-of-cluster.yaml describes.
    let install = helm(
        &[
            "install",
            RELEASE,
            chart.as_str(),
            "--namespace",
            NAMESPACE,
            "--create-namespace",
            "--values",
            values.as_str(),
        ],
        Some(&admin),
    );
    assert!(install.success, "helm install: {install:?}");
    let cluster_scoped = "validatingwebhookconfigurations,clusterroles,clusterrolebindings";
    let namespaced = "deployments,services,serviceaccounts,roles,rolebindings,networkpolicies,\
                      poddisruptionbudgets,jobs,secrets,configmaps";
    let ours = |kind: &str| format!("{kind}/gateway-dns");
    let expected_cluster: BTreeSet<String> = [
        "validatingwebhookconfiguration.admissionregistration.k8s.io",
        "clusterrole.rbac.authorization.k8s.io",
        "clusterrolebinding.rbac.authorization.k8s.io",
    ]
    .iter()
    .map(|kind| ours(kind))
    .collect();
    let present = names(&cluster, cluster_scoped, None);
    assert!(
        present.is_superset(&expected_cluster),
        "after helm install: {present:?}"
    );
    let in_namespace = names(&cluster, namespaced, Some(NAMESPACE));
    for object in [
        "deployment.apps/gateway-dns",
        "service/gateway-dns",
        "serviceaccount/gateway-dns",
        "role.rbac.authorization.k8s.io/gateway-dns-leases",
        "rolebinding.rbac.authorization.k8s.io/gateway-dns-leases",
        "networkpolicy.networking.k8s.io/gateway-dns",
    ] {
        assert!(
            in_namespace.contains(object),
            "{object} after helm install: {in_namespace:?}"
        );
    }
    let excluded = cluster
        .kubectl(&[
            "get",
            "validatingwebhookconfiguration",
            "gateway-dns",
            "-o",
            "jsonpath={.webhooks[0].namespaceSelector.matchExpressions[0].values}",
        ])
        .ok();
    assert!(
        excluded.contains(NAMESPACE),
        "namespaceSelector: {excluded}"
    );

    // Nothing answers the Service yet: the API server gives up on the webhook and, under
    // failurePolicy Ignore, admits. Its own metric counts that, which the alert
    // GatewayDnsWebhookFailingOpen reads.
    cluster.apply(GATEWAYS, &[]).ok();
    let admitted = cluster.apply(&route("early", "public"), &["--dry-run=server"]);
    assert!(admitted.success, "{admitted:?}");
    let apiserver_metrics = cluster.kubectl(&["get", "--raw", "/metrics"]).ok();
    let apiserver_series = exposed_series(&apiserver_metrics);
    for series in APISERVER_SERIES {
        assert!(
            apiserver_series.contains(series),
            "kube-apiserver exports no {series}, which the alerting rules read"
        );
    }
    assert!(
        apiserver_metrics.lines().any(|line| line
            .starts_with("apiserver_admission_webhook_fail_open_count{")
            && line.contains("name=\"validate.gateway-dns.io\"")),
        "kube-apiserver did not count a fail-open call to our webhook"
    );

    // gateway-dns with a token of the chart's ServiceAccount: what the chart grants is enough to
    // watch, take the chart's Lease and publish, and nothing is refused.
    let identity = cluster.service_account_kubeconfig(NAMESPACE, "gateway-dns", None);
    let serve = Serve::start(&identity, "helm-chart", &["--zone", "example.com"]);
    serve.wait_ready(Duration::from_secs(60)).await;
    let ca = std::fs::read(serve.ca_file()).unwrap();
    let url = format!("webhook.url={}", serve.url());
    let bundle = format!("webhook.caBundle={}", data_encoding::BASE64.encode(&ca));
    let upgrade = helm(
        &[
            "upgrade",
            RELEASE,
            chart.as_str(),
            "--namespace",
            NAMESPACE,
            "--reuse-values",
            "--set",
            url.as_str(),
            "--set",
            bundle.as_str(),
        ],
        Some(&admin),
    );
    assert!(upgrade.success, "helm upgrade: {upgrade:?}");
    cluster.wait_webhook_active("shop");

    cluster.gateway_address("infra/public", &["203.0.113.10"]);
    cluster.gateway_address("infra/private", &["203.0.113.20"]);
    cluster.apply(&route("web", "public"), &[]).ok();
    let denied = cluster.apply(&route("web2", "private"), &[]);
    assert!(
        !denied.success,
        "the conflicting route was admitted: {denied:?}"
    );
    assert!(
        denied.stderr.contains(
            "admission webhook \"validate.gateway-dns.io\" denied the request: HostnameConflict: \
             app.example.com is already served by Gateway infra/public"
        ),
        "{}",
        denied.stderr
    );
    serve
        .wait_answer(
            "app.example.com",
            "A",
            &["203.0.113.10"],
            Duration::from_secs(30),
        )
        .await;
    let holder = cluster
        .kubectl(&[
            "get",
            "lease",
            "gateway-dns",
            "-n",
            NAMESPACE,
            "-o",
            "jsonpath={.spec.holderIdentity}",
        ])
        .ok();
    assert_eq!(
        holder, "helm-chart",
        "the chart's Role lets serve take its Lease"
    );
    let log = serve.log().to_lowercase();
    assert!(
        !log.contains("forbidden") && !log.contains("\"code\":403"),
        "serve met a refusal with the chart's RBAC:\n{}",
        serve.log_tail()
    );

    // What a Prometheus would scrape from it is valid exposition, and has every series the
    // dashboard and the alerting rules read (kube-apiserver's aside).
    let exposition = scrape(&serve).await;
    let lint = promtool_check_metrics(&exposition);
    assert!(
        lint.success,
        "promtool check metrics: {}{}",
        lint.stdout, lint.stderr
    );
    let scraped = exposed_series(&exposition);
    let rules = std::fs::read_to_string(chart_dir().join("files/prometheus-rules.yaml")).unwrap();
    let dashboard =
        std::fs::read_to_string(chart_dir().join("files/gateway-dns-dashboard.json")).unwrap();
    let mut read = BTreeSet::new();
    for line in rules.lines().chain(dashboard.lines()) {
        if line.contains("gateway_dns_") {
            read.extend(
                metric_names(line)
                    .into_iter()
                    .filter(|name| name.starts_with("gateway_dns_")),
            );
        }
    }
    assert!(read.len() >= 8, "series read: {read:?}");
    // A series keyed by data appears with its first sample: findings by namespace need a
    // namespace with a finding, and this cluster has none (the e2e exposition test fills it).
    let only_with_data = ["gateway_dns_namespace_findings"];
    let missing: Vec<&String> = read
        .difference(&scraped)
        .filter(|name| !only_with_data.contains(&name.as_str()))
        .collect();
    assert!(missing.is_empty(), "a running serve exports no {missing:?}");

    // helm uninstall removes every object the chart made: with serve still answering, the
    // conflicting route now goes through, because nothing calls it any more.
    let denied_before = serve
        .metric("gateway_dns_admission_requests_total{outcome=\"denied\"}")
        .await;
    let uninstall = helm(
        &["uninstall", RELEASE, "--namespace", NAMESPACE],
        Some(&admin),
    );
    assert!(uninstall.success, "helm uninstall: {uninstall:?}");
    let leftover = names(&cluster, cluster_scoped, None);
    assert!(
        leftover.is_disjoint(&expected_cluster),
        "after helm uninstall: {leftover:?}"
    );
    let leftover = names(
        &cluster,
        &format!("{namespaced},leases.coordination.k8s.io"),
        Some(NAMESPACE),
    );
    // The Lease is gateway-dns's own (it took it at run time), not the chart's.
    let allowed: BTreeSet<String> = ["lease.coordination.k8s.io/gateway-dns".to_string()].into();
    assert!(
        leftover.is_subset(&allowed),
        "left in {NAMESPACE} after helm uninstall: {leftover:?}"
    );
    let start = Instant::now();
    loop {
        let run = cluster.apply(&route("web2", "private"), &[]);
        if run.success {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the API server still calls the webhook after helm uninstall: {run:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let denied_after = serve
        .metric("gateway_dns_admission_requests_total{outcome=\"denied\"}")
        .await;
    assert_eq!(
        denied_before, denied_after,
        "serve was asked after uninstall"
    );
}
