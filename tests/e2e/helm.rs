//! The Helm chart (`charts/gateway-dns`) rendered by real helm: `helm lint --strict`, the same
//! objects as the kustomize manifests it mirrors (defaults = `manifests/base`, each values
//! example = its overlay), a render test for every value in the schema, the values reference,
//! and the monitoring bundle (alerting rules through promtool, dashboard queries) against the
//! metrics the binary exports. tests/cluster/helm.rs sends the renders to a real API server and
//! installs the chart.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::support::chart_values;
use crate::support::helm::{
    APISERVER_SERIES, Exception, by_key, chart_dir, compare, examples, helm, kustomization, render,
    render_release, rendered,
};
use crate::support::install::{Doc, kustomize, manifests_dir, repo, yaml_docs};
use crate::support::promql::{exposed_series, metric_names};

const NO_NAMESPACE: Exception = Exception {
    kind: "Namespace",
    name: "gateway-dns",
    reason: "Helm does not create its release namespace (helm install --create-namespace does, \
             without the labels of manifests/base/namespace.yaml; docs/install.md says how)",
};

/// The chart makes its own certificate (certificates.source job); the base leaves it to an
/// overlay. These exist only while the Jobs run (Helm hooks).
const CERTIFICATE_JOB: [Exception; 7] = {
    const REASON: &str = "the chart's certificate Jobs (certificates.source job, hooks)";
    [
        Exception {
            kind: "ServiceAccount",
            name: "gateway-dns-certgen",
            reason: REASON,
        },
        Exception {
            kind: "Role",
            name: "gateway-dns-certgen",
            reason: REASON,
        },
        Exception {
            kind: "RoleBinding",
            name: "gateway-dns-certgen",
            reason: REASON,
        },
        Exception {
            kind: "ClusterRole",
            name: "gateway-dns-certgen",
            reason: REASON,
        },
        Exception {
            kind: "ClusterRoleBinding",
            name: "gateway-dns-certgen",
            reason: REASON,
        },
        Exception {
            kind: "Job",
            name: "gateway-dns-certgen-create",
            reason: REASON,
        },
        Exception {
            kind: "Job",
            name: "gateway-dns-certgen-patch",
            reason: REASON,
        },
    ]
};

/// A values example and the kustomize build it must equal.
struct Counterpart {
    example: &'static str,
    resources: &'static [&'static str],
    components: &'static [&'static str],
    only_kustomize: &'static [Exception],
}

const NO_LEASE_ROLE: [Exception; 3] = [
    NO_NAMESPACE,
    Exception {
        kind: "Role",
        name: "gateway-dns-leases",
        reason: "nothing takes a Lease with the embedded provider, so the chart grants none",
    },
    Exception {
        kind: "RoleBinding",
        name: "gateway-dns-leases",
        reason: "nothing takes a Lease with the embedded provider, so the chart grants none",
    },
];

const COUNTERPARTS: [Counterpart; 7] = [
    Counterpart {
        example: "cert-manager.yaml",
        resources: &["overlays/cert-manager"],
        components: &[],
        only_kustomize: &[NO_NAMESPACE],
    },
    Counterpart {
        example: "fail-closed.yaml",
        resources: &["overlays/fail-closed"],
        components: &[],
        only_kustomize: &[NO_NAMESPACE],
    },
    Counterpart {
        example: "rfc2136.yaml",
        resources: &["overlays/bind"],
        components: &[],
        only_kustomize: &[NO_NAMESPACE],
    },
    Counterpart {
        example: "pdns.yaml",
        resources: &["overlays/powerdns"],
        components: &[],
        only_kustomize: &[NO_NAMESPACE],
    },
    Counterpart {
        example: "embedded.yaml",
        resources: &["overlays/embedded-dns"],
        components: &[],
        only_kustomize: &NO_LEASE_ROLE,
    },
    Counterpart {
        example: "policy-reports.yaml",
        resources: &["overlays/policy-reports"],
        components: &[],
        only_kustomize: &[NO_NAMESPACE],
    },
    Counterpart {
        example: "monitoring.yaml",
        resources: &["overlays/cert-manager"],
        components: &["components/monitoring"],
        only_kustomize: &[NO_NAMESPACE],
    },
];

/// Examples with no kustomize counterpart, and why.
const WITHOUT_COUNTERPART: [(&str, &str); 2] = [
    (
        "out-of-cluster.yaml",
        "the webhook outside the cluster: scripts/dev-cluster does this without manifests; \
         tests/cluster/helm.rs installs it and runs gateway-dns behind it",
    ),
    (
        "webhook-provider.yaml",
        "a provider sidecar is the provider's own image: the kustomize manifests ship none, \
         and every value it sets has its render test in effects()",
    ),
];

fn example(name: &str) -> PathBuf {
    chart_dir().join("examples").join(name)
}

fn file_name(path: &Path) -> String {
    path.file_name().unwrap().to_string_lossy().into_owned()
}

#[test]
fn chart_passes_helm_lint_strictly_with_every_example() {
    let chart = chart_dir().display().to_string();
    let run = helm(&["lint", "--strict", chart.as_str()], None);
    assert!(
        run.success,
        "helm lint --strict: {}{}",
        run.stdout, run.stderr
    );
    for file in examples() {
        let path = file.display().to_string();
        let run = helm(
            &[
                "lint",
                "--strict",
                chart.as_str(),
                "--values",
                path.as_str(),
            ],
            None,
        );
        assert!(
            run.success,
            "helm lint --strict --values {}: {}{}",
            file_name(&file),
            run.stdout,
            run.stderr
        );
    }
}

#[test]
fn chart_defaults_render_the_kustomize_base() {
    let chart = rendered(&[], &[]);
    let base = kustomize(&manifests_dir().join("base"));
    let problems = compare(&chart, &base, &CERTIFICATE_JOB, &[NO_NAMESPACE]);
    assert!(
        problems.is_empty(),
        "the chart's defaults and manifests/base differ (change both, or list an exception with \
         its reason):\n{}",
        problems.join("\n")
    );
}

#[test]
fn every_values_example_renders_its_kustomize_overlay() {
    let listed: BTreeSet<String> = COUNTERPARTS
        .iter()
        .map(|c| c.example.to_string())
        .chain(WITHOUT_COUNTERPART.iter().map(|(name, _)| name.to_string()))
        .collect();
    let found: BTreeSet<String> = examples().iter().map(|p| file_name(p)).collect();
    assert_eq!(
        found, listed,
        "every example under charts/gateway-dns/examples is compared with kustomize or listed \
         in WITHOUT_COUNTERPART with the reason"
    );
    for counterpart in &COUNTERPARTS {
        let chart = rendered(&[&example(counterpart.example)], &[]);
        let dir = kustomization(counterpart.resources, counterpart.components);
        let built = kustomize(dir.path());
        let problems = compare(&chart, &built, &[], counterpart.only_kustomize);
        assert!(
            problems.is_empty(),
            "examples/{} and kustomize {:?} + {:?} differ:\n{}",
            counterpart.example,
            counterpart.resources,
            counterpart.components,
            problems.join("\n")
        );
    }
}

#[test]
fn every_values_example_is_documented() {
    let readme = std::fs::read_to_string(chart_dir().join("README.md")).unwrap();
    for file in examples() {
        let name = file_name(&file);
        assert!(
            readme.contains(&format!("examples/{name}")),
            "charts/gateway-dns/README.md does not document examples/{name}"
        );
    }
}

#[test]
fn chart_version_follows_the_crate() {
    let chart: Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(chart_dir().join("Chart.yaml")).unwrap())
            .unwrap();
    assert_eq!(chart["apiVersion"], "v2");
    assert_eq!(chart["appVersion"], env!("CARGO_PKG_VERSION"));
    assert_eq!(chart["version"], env!("CARGO_PKG_VERSION"));
}

/// The rendered objects of one render, with lookups for the checks below.
struct Objects(std::collections::BTreeMap<crate::support::helm::Key, Value>);

impl Objects {
    fn of(docs: &[Doc]) -> Objects {
        Objects(by_key(docs))
    }

    fn get(&self, kind: &str, name: &str) -> Option<&Value> {
        self.0
            .iter()
            .find(|(key, _)| key.0 == kind && key.2 == name)
            .map(|(_, value)| value)
    }

    fn has(&self, kind: &str, name: &str) -> bool {
        self.get(kind, name).is_some()
    }

    fn at(&self, kind: &str, name: &str, pointer: &str) -> Value {
        self.get(kind, name)
            .and_then(|object| object.pointer(pointer))
            .cloned()
            .unwrap_or(Value::Null)
    }

    fn deployment(&self, pointer: &str) -> Value {
        self.at("Deployment", "gateway-dns", pointer)
    }

    fn container(&self, pointer: &str) -> Value {
        self.deployment(&format!("/spec/template/spec/containers/0{pointer}"))
    }

    fn env(&self, name: &str) -> Option<String> {
        self.container("/env")
            .as_array()?
            .iter()
            .find(|variable| variable["name"] == name)
            .and_then(|variable| variable["value"].as_str().map(str::to_string))
    }

    fn webhook(&self, pointer: &str) -> Value {
        self.at(
            "ValidatingWebhookConfiguration",
            "gateway-dns",
            &format!("/webhooks/0{pointer}"),
        )
    }
}

/// One value of the schema set to something other than its default, and what must then differ
/// in the render. Each check must fail on the defaults, so none can pass by accident.
struct Effect {
    value: &'static str,
    args: Vec<&'static str>,
    check: fn(&Objects) -> bool,
}

const RFC2136: [&str; 4] = [
    "--set",
    "dns.provider=rfc2136",
    "--set",
    "dns.rfc2136.server=10.0.0.53:53",
];
const EMBEDDED_SECONDARY: [&str; 4] = [
    "--set",
    "dns.provider=embedded",
    "--set-json",
    r#"dns.embedded.secondaries=["192.0.2.53","192.0.2.54:5300"]"#,
];
const PDNS: [&str; 4] = [
    "--set",
    "dns.provider=pdns",
    "--set",
    "dns.pdns.server=http://pdns.dns.svc:8081",
];
const WEBHOOK_SIDECAR: [&str; 4] = [
    "--set",
    "dns.provider=webhook",
    "--set",
    "dns.webhook.sidecar.image.repository=ghcr.io/example/external-dns-provider",
];
const TXT_KEY: [&str; 2] = ["--set", "dns.txtRegistry.encryption.keySecret.name=txt-aes"];

impl Objects {
    /// A field of the external-dns webhook provider sidecar (the pod's second container).
    fn sidecar(&self, pointer: &str) -> Value {
        self.deployment(&format!("/spec/template/spec/containers/1{pointer}"))
    }
}

fn effects() -> Vec<Effect> {
    vec![
        Effect {
            value: "fullnameOverride",
            args: vec!["--set", "fullnameOverride=dns-internal"],
            check: |o| {
                o.has("Deployment", "dns-internal")
                    && o.has("ValidatingWebhookConfiguration", "dns-internal")
                    && o.at("Role", "dns-internal-leases", "/rules/1/resourceNames")
                        == json!(["dns-internal"])
                    && o.at(
                        "Deployment",
                        "dns-internal",
                        "/spec/template/spec/containers/0/env",
                    )
                    .as_array()
                    .is_some_and(|env| {
                        env.iter().any(|v| {
                            v["name"] == "GATEWAY_DNS_LEASE_NAME" && v["value"] == "dns-internal"
                        })
                    })
            },
        },
        Effect {
            value: "image.repository",
            args: vec!["--set", "image.repository=registry.example.com/gateway-dns"],
            check: |o| {
                o.container("/image") == "registry.example.com/gateway-dns:0.1.0"
                    && o.job_images() == ["registry.example.com/gateway-dns:0.1.0"; 2]
            },
        },
        Effect {
            value: "image.tag",
            args: vec!["--set", "image.tag=0.2.0"],
            check: |o| {
                o.container("/image") == "gateway-dns:0.2.0"
                    && o.job_images() == ["gateway-dns:0.2.0"; 2]
            },
        },
        Effect {
            value: "image.pullPolicy",
            args: vec!["--set", "image.pullPolicy=Always"],
            check: |o| {
                o.container("/imagePullPolicy") == "Always"
                    && CERTIFICATE_JOBS.iter().all(|job| {
                        o.at(
                            "Job",
                            job,
                            "/spec/template/spec/containers/0/imagePullPolicy",
                        ) == "Always"
                    })
            },
        },
        Effect {
            value: "imagePullSecrets",
            args: vec!["--set", "imagePullSecrets[0].name=registry"],
            check: |o| {
                o.deployment("/spec/template/spec/imagePullSecrets")
                    == json!([{"name": "registry"}])
                    && o.at(
                        "Job",
                        "gateway-dns-certgen-create",
                        "/spec/template/spec/imagePullSecrets",
                    ) == json!([{"name": "registry"}])
            },
        },
        Effect {
            value: "replicas",
            args: vec!["--set", "replicas=5"],
            check: |o| o.deployment("/spec/replicas") == 5,
        },
        Effect {
            value: "logLevel",
            args: vec!["--set", "logLevel=debug"],
            check: |o| o.env("GATEWAY_DNS_LOG").as_deref() == Some("debug"),
        },
        Effect {
            value: "healthChecks.interval",
            args: vec!["--set", "healthChecks.interval=10s"],
            check: |o| o.env("GATEWAY_DNS_HEALTH_CHECK_INTERVAL").as_deref() == Some("10s"),
        },
        Effect {
            value: "healthChecks.timeout",
            args: vec!["--set", "healthChecks.timeout=2s"],
            check: |o| o.env("GATEWAY_DNS_HEALTH_CHECK_TIMEOUT").as_deref() == Some("2s"),
        },
        Effect {
            value: "healthChecks.failureThreshold",
            args: vec!["--set", "healthChecks.failureThreshold=5"],
            check: |o| o.env("GATEWAY_DNS_HEALTH_CHECK_FAILURE_THRESHOLD").as_deref() == Some("5"),
        },
        Effect {
            value: "healthChecks.successThreshold",
            args: vec!["--set", "healthChecks.successThreshold=1"],
            check: |o| o.env("GATEWAY_DNS_HEALTH_CHECK_SUCCESS_THRESHOLD").as_deref() == Some("1"),
        },
        Effect {
            value: "healthChecks.expectedCodes",
            args: vec!["--set", "healthChecks.expectedCodes=200-299\\,404"],
            check: |o| {
                o.env("GATEWAY_DNS_HEALTH_CHECK_EXPECTED_CODES").as_deref() == Some("200-299,404")
            },
        },
        Effect {
            value: "healthChecks.path",
            args: vec!["--set", "healthChecks.path=/healthz"],
            check: |o| o.env("GATEWAY_DNS_HEALTH_CHECK_PATH").as_deref() == Some("/healthz"),
        },
        Effect {
            value: "healthChecks.concurrency",
            args: vec!["--set", "healthChecks.concurrency=8"],
            check: |o| o.env("GATEWAY_DNS_HEALTH_CHECK_CONCURRENCY").as_deref() == Some("8"),
        },
        Effect {
            value: "statusPage.enabled",
            args: vec!["--set", "statusPage.enabled=false"],
            check: |o| o.env("GATEWAY_DNS_STATUS_PAGE").as_deref() == Some("false"),
        },
        Effect {
            value: "mode",
            args: vec!["--set", "mode=audit"],
            check: |o| o.env("GATEWAY_DNS_MODE").as_deref() == Some("audit"),
        },
        Effect {
            value: "actions",
            args: vec![
                "--set",
                "actions.NoParentRefs=ignore",
                "--set",
                "actions.HostnameOutsideListener=deny",
            ],
            check: |o| {
                o.env("GATEWAY_DNS_ACTION").as_deref()
                    == Some("HostnameOutsideListener=deny,NoParentRefs=ignore")
            },
        },
        Effect {
            value: "extraArgs",
            args: vec![
                "--set-json",
                r#"extraArgs=["--gateway-selector=dns=public"]"#,
            ],
            check: |o| {
                o.container("/args").as_array().and_then(|args| args.last())
                    == Some(&json!("--gateway-selector=dns=public"))
            },
        },
        Effect {
            value: "extraEnv",
            args: vec![
                "--set-json",
                r#"extraEnv=[{"name":"GATEWAY_DNS_INTERVAL","value":"30s"}]"#,
            ],
            check: |o| o.env("GATEWAY_DNS_INTERVAL").as_deref() == Some("30s"),
        },
        Effect {
            value: "dns.provider",
            args: vec!["--set", "dns.provider=embedded"],
            check: |o| {
                o.env("GATEWAY_DNS_PROVIDER").as_deref() == Some("embedded")
                    && o.env("GATEWAY_DNS_SYNC").as_deref() == Some("true")
                    && o.has("Service", "gateway-dns-dns")
            },
        },
        Effect {
            value: "dns.zones",
            args: vec![
                "--set",
                "dns.provider=embedded",
                "--set",
                "dns.zones={apps.example.com,example.org}",
            ],
            check: |o| o.env("GATEWAY_DNS_ZONE").as_deref() == Some("apps.example.com,example.org"),
        },
        Effect {
            value: "dns.txtOwnerId",
            args: [RFC2136.as_slice(), &["--set", "dns.txtOwnerId=cluster-a"]].concat(),
            check: |o| o.env("GATEWAY_DNS_TXT_OWNER_ID").as_deref() == Some("cluster-a"),
        },
        Effect {
            value: "dns.zoneView.enabled",
            args: [RFC2136.as_slice(), &["--set", "dns.zoneView.enabled=false"]].concat(),
            check: |o| o.env("GATEWAY_DNS_ZONE_VIEW").as_deref() == Some("false"),
        },
        Effect {
            value: "dns.zoneView.refreshInterval",
            args: [RFC2136.as_slice(), &["--set", "dns.zoneView.refreshInterval=5s"]].concat(),
            check: |o| o.env("GATEWAY_DNS_ZONE_REFRESH_INTERVAL").as_deref() == Some("5s"),
        },
        Effect {
            value: "dns.zoneView.notifyPort",
            args: [RFC2136.as_slice(), &["--set", "dns.zoneView.notifyPort=5300"]].concat(),
            check: |o| {
                o.env("GATEWAY_DNS_ZONE_NOTIFY_LISTEN").as_deref() == Some("0.0.0.0:5300")
                    && o.container("/ports")
                        .as_array()
                        .is_some_and(|ports| ports.iter().any(|p| p["name"] == "zone-notify" && p["containerPort"] == 5300 && p["protocol"] == "UDP"))
                    && o.at("NetworkPolicy", "gateway-dns", "/spec/ingress")
                        .as_array()
                        .is_some_and(|rules| rules.iter().any(|r| r["ports"][0]["port"] == "zone-notify"))
                    && o.at("Service", "gateway-dns-notify", "/spec/type") == "ClusterIP"
            },
        },
        Effect {
            value: "dns.zoneView.notifyService.type",
            args: [
                RFC2136.as_slice(),
                &[
                    "--set",
                    "dns.zoneView.notifyPort=5300",
                    "--set",
                    "dns.zoneView.notifyService.type=NodePort",
                ],
            ]
            .concat(),
            check: |o| {
                o.at("Service", "gateway-dns-notify", "/spec/type") == "NodePort"
                    && o.at("Service", "gateway-dns-notify", "/spec/externalTrafficPolicy")
                        == "Local"
                    && o.at("Service", "gateway-dns-notify", "/spec/ports/0")
                        == serde_json::json!({"name": "zone-notify", "port": 5300, "targetPort": "zone-notify", "protocol": "UDP"})
                    && o.at("Service", "gateway-dns-notify", "/spec/selector")
                        == o.deployment("/spec/selector/matchLabels")
            },
        },
        Effect {
            value: "dns.ownerHeartbeatInterval",
            args: [WEBHOOK_SIDECAR.as_slice(), &["--set-string", "dns.ownerHeartbeatInterval=0"]].concat(),
            check: |o| o.env("GATEWAY_DNS_OWNER_HEARTBEAT_INTERVAL").as_deref() == Some("0"),
        },
        Effect {
            value: "sharedNames",
            args: vec!["--set", "sharedNames={www.example.com,*.global.example.com}"],
            check: |o| {
                o.env("GATEWAY_DNS_SHARED_NAME").as_deref()
                    == Some("www.example.com,*.global.example.com")
            },
        },
        Effect {
            value: "dns.adoptAfter",
            args: [RFC2136.as_slice(), &["--set", "dns.adoptAfter=10m"]].concat(),
            check: |o| o.env("GATEWAY_DNS_ADOPT_AFTER").as_deref() == Some("10m"),
        },
        Effect {
            value: "dns.provider",
            args: vec!["--set", "dns.provider=dnsendpoint"],
            check: |o| {
                o.env("GATEWAY_DNS_PROVIDER").as_deref() == Some("dnsendpoint")
                    && o.env("GATEWAY_DNS_TXT_OWNER_ID").as_deref() == Some("gateway-dns")
            },
        },
        Effect {
            value: "dns.txtRegistry.prefix",
            args: [RFC2136.as_slice(), &["--set", "dns.txtRegistry.prefix=%{record_type}-own."]]
                .concat(),
            check: |o| o.env("GATEWAY_DNS_TXT_PREFIX").as_deref() == Some("%{record_type}-own."),
        },
        Effect {
            value: "dns.txtRegistry.suffix",
            args: [PDNS.as_slice(), &["--set", "dns.txtRegistry.suffix=-%{record_type}"]].concat(),
            check: |o| o.env("GATEWAY_DNS_TXT_SUFFIX").as_deref() == Some("-%{record_type}"),
        },
        Effect {
            value: "dns.txtRegistry.wildcardReplacement",
            args: [
                WEBHOOK_SIDECAR.as_slice(),
                &["--set", "dns.txtRegistry.wildcardReplacement=any"],
            ]
            .concat(),
            check: |o| o.env("GATEWAY_DNS_TXT_WILDCARD_REPLACEMENT").as_deref() == Some("any"),
        },
        Effect {
            value: "dns.txtRegistry.encryption.enabled",
            args: [
                RFC2136.as_slice(),
                &TXT_KEY,
                &["--set", "dns.txtRegistry.encryption.enabled=true"],
            ]
            .concat(),
            check: |o| o.env("GATEWAY_DNS_TXT_ENCRYPT_ENABLED").as_deref() == Some("true"),
        },
        Effect {
            value: "dns.txtRegistry.encryption.keySecret.name",
            args: [RFC2136.as_slice(), &TXT_KEY].concat(),
            check: |o| {
                o.volume_secret("txt-encryption") == "txt-aes"
                    && o.env("GATEWAY_DNS_TXT_ENCRYPT_AES_KEY_FILE").as_deref()
                        == Some("/etc/gateway-dns/txt-encryption/aes-key")
                    && o.env("GATEWAY_DNS_TXT_ENCRYPT_ENABLED").is_none()
            },
        },
        Effect {
            value: "dns.txtRegistry.encryption.keySecret.key",
            args: [
                RFC2136.as_slice(),
                &TXT_KEY,
                &["--set", "dns.txtRegistry.encryption.keySecret.key=key.b64"],
            ]
            .concat(),
            check: |o| {
                o.env("GATEWAY_DNS_TXT_ENCRYPT_AES_KEY_FILE").as_deref()
                    == Some("/etc/gateway-dns/txt-encryption/key.b64")
            },
        },
        Effect {
            value: "dns.webhook.url",
            args: vec![
                "--set",
                "dns.provider=webhook",
                "--set",
                "dns.webhook.url=http://dns-provider.dns.svc:8888",
            ],
            check: |o| {
                o.env("GATEWAY_DNS_WEBHOOK_PROVIDER_URL").as_deref()
                    == Some("http://dns-provider.dns.svc:8888")
                    && o.sidecar("").is_null()
            },
        },
        Effect {
            value: "dns.webhook.sidecar.image.repository",
            args: WEBHOOK_SIDECAR.to_vec(),
            check: |o| {
                o.env("GATEWAY_DNS_WEBHOOK_PROVIDER_URL").as_deref()
                    == Some("http://127.0.0.1:8888")
                    && o.sidecar("/image") == "ghcr.io/example/external-dns-provider"
                    && o.sidecar("/securityContext/readOnlyRootFilesystem") == true
            },
        },
        Effect {
            value: "dns.webhook.sidecar.image.tag",
            args: [
                WEBHOOK_SIDECAR.as_slice(),
                &["--set", "dns.webhook.sidecar.image.tag=v0.5.0"],
            ]
            .concat(),
            check: |o| o.sidecar("/image") == "ghcr.io/example/external-dns-provider:v0.5.0",
        },
        Effect {
            value: "dns.webhook.sidecar.image.pullPolicy",
            args: [
                WEBHOOK_SIDECAR.as_slice(),
                &["--set", "dns.webhook.sidecar.image.pullPolicy=Always"],
            ]
            .concat(),
            check: |o| o.sidecar("/imagePullPolicy") == "Always",
        },
        Effect {
            value: "dns.webhook.sidecar.port",
            args: [
                WEBHOOK_SIDECAR.as_slice(),
                &["--set", "dns.webhook.sidecar.port=9999"],
            ]
            .concat(),
            check: |o| {
                o.env("GATEWAY_DNS_WEBHOOK_PROVIDER_URL").as_deref()
                    == Some("http://127.0.0.1:9999")
            },
        },
        Effect {
            value: "dns.webhook.sidecar.args",
            args: [
                WEBHOOK_SIDECAR.as_slice(),
                &["--set-json", r#"dns.webhook.sidecar.args=["--log-level=debug"]"#],
            ]
            .concat(),
            check: |o| o.sidecar("/args") == json!(["--log-level=debug"]),
        },
        Effect {
            value: "dns.webhook.sidecar.env",
            args: [
                WEBHOOK_SIDECAR.as_slice(),
                &[
                    "--set-json",
                    r#"dns.webhook.sidecar.env=[{"name":"API_TOKEN","valueFrom":{"secretKeyRef":{"name":"provider","key":"token"}}}]"#,
                ],
            ]
            .concat(),
            check: |o| {
                o.sidecar("/env/0/valueFrom/secretKeyRef")
                    == json!({"name": "provider", "key": "token"})
            },
        },
        Effect {
            value: "dns.webhook.sidecar.resources",
            args: [
                WEBHOOK_SIDECAR.as_slice(),
                &["--set-json", r#"dns.webhook.sidecar.resources={"limits":{"memory":"64Mi"}}"#],
            ]
            .concat(),
            check: |o| o.sidecar("/resources/limits/memory") == "64Mi",
        },
        Effect {
            value: "dns.rfc2136.server",
            args: RFC2136.to_vec(),
            check: |o| o.env("GATEWAY_DNS_RFC2136_SERVER").as_deref() == Some("10.0.0.53:53"),
        },
        Effect {
            value: "dns.rfc2136.tsigKeyName",
            args: [
                RFC2136.as_slice(),
                &["--set", "dns.rfc2136.tsigKeyName=k8s"],
            ]
            .concat(),
            check: |o| o.env("GATEWAY_DNS_RFC2136_TSIG_KEY_NAME").as_deref() == Some("k8s"),
        },
        Effect {
            value: "dns.rfc2136.tsigAlgorithm",
            args: [
                RFC2136.as_slice(),
                &["--set", "dns.rfc2136.tsigAlgorithm=hmac-sha512"],
            ]
            .concat(),
            check: |o| {
                o.env("GATEWAY_DNS_RFC2136_TSIG_ALGORITHM").as_deref() == Some("hmac-sha512")
            },
        },
        Effect {
            value: "dns.rfc2136.tsigSecret.name",
            args: [
                RFC2136.as_slice(),
                &["--set", "dns.rfc2136.tsigSecret.name=bind-key"],
            ]
            .concat(),
            check: |o| o.volume_secret("rfc2136-tsig") == "bind-key",
        },
        Effect {
            value: "dns.rfc2136.tsigSecret.key",
            args: [
                RFC2136.as_slice(),
                &["--set", "dns.rfc2136.tsigSecret.key=tsig.key"],
            ]
            .concat(),
            check: |o| {
                o.env("GATEWAY_DNS_RFC2136_TSIG_SECRET_FILE").as_deref()
                    == Some("/etc/gateway-dns/rfc2136/tsig.key")
            },
        },
        Effect {
            value: "dns.pdns.server",
            args: PDNS.to_vec(),
            check: |o| {
                o.env("GATEWAY_DNS_PDNS_SERVER").as_deref() == Some("http://pdns.dns.svc:8081")
            },
        },
        Effect {
            value: "dns.pdns.apiKeySecret.name",
            args: [
                PDNS.as_slice(),
                &["--set", "dns.pdns.apiKeySecret.name=pdns"],
            ]
            .concat(),
            check: |o| o.volume_secret("pdns-api-key") == "pdns",
        },
        Effect {
            value: "dns.pdns.apiKeySecret.key",
            args: [PDNS.as_slice(), &["--set", "dns.pdns.apiKeySecret.key=key"]].concat(),
            check: |o| {
                o.env("GATEWAY_DNS_PDNS_API_KEY_FILE").as_deref()
                    == Some("/etc/gateway-dns/pdns/key")
            },
        },
        Effect {
            value: "dns.embedded.service.type",
            args: vec![
                "--set",
                "dns.provider=embedded",
                "--set",
                "dns.embedded.service.type=NodePort",
            ],
            check: |o| o.at("Service", "gateway-dns-dns", "/spec/type") == "NodePort",
        },
        Effect {
            value: "dns.embedded.service.annotations",
            args: vec![
                "--set",
                "dns.provider=embedded",
                "--set-string",
                "dns.embedded.service.annotations.lb\\.example\\.com/internal=true",
            ],
            check: |o| {
                o.at("Service", "gateway-dns-dns", "/metadata/annotations")
                    == json!({"lb.example.com/internal": "true"})
            },
        },
        Effect {
            value: "dns.embedded.secondaries",
            args: EMBEDDED_SECONDARY.to_vec(),
            check: |o| {
                o.env("GATEWAY_DNS_EMBEDDED_SECONDARY").as_deref()
                    == Some("192.0.2.53,192.0.2.54:5300")
                    && o.env("GATEWAY_DNS_EMBEDDED_TSIG_SECRET_FILE").as_deref()
                        == Some("/etc/gateway-dns/transfer-tsig/secret")
                    && o.volume_secret("transfer-tsig") == "gateway-dns-transfer-tsig"
            },
        },
        Effect {
            value: "dns.embedded.transferKey.name",
            args: [
                EMBEDDED_SECONDARY.as_slice(),
                &["--set", "dns.embedded.transferKey.name=transfer"],
            ]
            .concat(),
            check: |o| o.env("GATEWAY_DNS_EMBEDDED_TSIG_KEY_NAME").as_deref() == Some("transfer"),
        },
        Effect {
            value: "dns.embedded.transferKey.algorithm",
            args: [
                EMBEDDED_SECONDARY.as_slice(),
                &["--set", "dns.embedded.transferKey.algorithm=hmac-sha512"],
            ]
            .concat(),
            check: |o| {
                o.env("GATEWAY_DNS_EMBEDDED_TSIG_ALGORITHM").as_deref() == Some("hmac-sha512")
            },
        },
        Effect {
            value: "dns.embedded.transferKey.secret.name",
            args: [
                EMBEDDED_SECONDARY.as_slice(),
                &["--set", "dns.embedded.transferKey.secret.name=xfr"],
            ]
            .concat(),
            check: |o| o.volume_secret("transfer-tsig") == "xfr",
        },
        Effect {
            value: "dns.embedded.transferKey.secret.key",
            args: [
                EMBEDDED_SECONDARY.as_slice(),
                &["--set", "dns.embedded.transferKey.secret.key=tsig.key"],
            ]
            .concat(),
            check: |o| {
                o.env("GATEWAY_DNS_EMBEDDED_TSIG_SECRET_FILE").as_deref()
                    == Some("/etc/gateway-dns/transfer-tsig/tsig.key")
            },
        },
        Effect {
            value: "dns.embedded.dnssec.keySecret.name",
            args: vec![
                "--set",
                "dns.provider=embedded",
                "--set",
                "dns.embedded.dnssec.keySecret.name=zone-keys",
            ],
            check: |o| {
                o.volume_secret("dnssec-keys") == "zone-keys"
                    && o.env("GATEWAY_DNS_EMBEDDED_DNSSEC_KEY").as_deref()
                        == Some("/etc/gateway-dns/dnssec/zone.key")
            },
        },
        Effect {
            value: "dns.embedded.dnssec.keySecret.keys",
            args: vec![
                "--set",
                "dns.provider=embedded",
                "--set",
                "dns.embedded.dnssec.keySecret.name=zone-keys",
                "--set-json",
                r#"dns.embedded.dnssec.keySecret.keys=["old.pem","new.pem"]"#,
            ],
            check: |o| {
                o.env("GATEWAY_DNS_EMBEDDED_DNSSEC_KEY").as_deref()
                    == Some("/etc/gateway-dns/dnssec/old.pem,/etc/gateway-dns/dnssec/new.pem")
            },
        },
        Effect {
            value: "leaderElection.enabled",
            args: vec!["--set", "leaderElection.enabled=false"],
            check: |o| {
                o.env("GATEWAY_DNS_LEADER_ELECTION").as_deref() == Some("false")
                    && !o.has("Role", "gateway-dns-leases")
                    && !o.has("RoleBinding", "gateway-dns-leases")
            },
        },
        Effect {
            value: "policyReports.enabled",
            args: vec!["--set", "policyReports.enabled=true"],
            check: |o| {
                o.env("GATEWAY_DNS_POLICY_REPORTS").as_deref() == Some("true")
                    && o.has("ClusterRole", "gateway-dns-policy-reports")
                    && o.has("ClusterRoleBinding", "gateway-dns-policy-reports")
            },
        },
        Effect {
            value: "certificates.source",
            args: vec!["--set", "certificates.source=cert-manager"],
            check: |o| {
                o.has("Certificate", "gateway-dns-tls")
                    && !o.has("Job", "gateway-dns-certgen-create")
                    && o.at(
                        "ValidatingWebhookConfiguration",
                        "gateway-dns",
                        "/metadata/annotations/cert-manager.io~1inject-ca-from",
                    ) == "gateway-dns/gateway-dns-tls"
            },
        },
        Effect {
            value: "certificates.source",
            args: vec!["--set", "certificates.source=secret"],
            check: |o| {
                !o.has("Job", "gateway-dns-certgen-create")
                    && !o.has("Job", "gateway-dns-certgen-patch")
                    && !o.has("Certificate", "gateway-dns-tls")
                    && o.volume_secret("tls") == "gateway-dns-tls"
            },
        },
        Effect {
            value: "certificates.secretName",
            args: vec!["--set", "certificates.secretName=webhook-pair"],
            check: |o| {
                o.volume_secret("tls") == "webhook-pair"
                    && CERTIFICATE_JOBS.iter().all(|job| {
                        o.job_args(job)
                            .contains(&"--secret=gateway-dns/webhook-pair".to_string())
                    })
                    && o.at("Role", "gateway-dns-certgen", "/rules/1/resourceNames")
                        == json!(["webhook-pair"])
            },
        },
        Effect {
            value: "certificates.certManager.issuerRef",
            args: vec![
                "--set",
                "certificates.source=cert-manager",
                "--set-json",
                r#"certificates.certManager.issuerRef={"group":"cert-manager.io","kind":"ClusterIssuer","name":"internal-ca"}"#,
            ],
            check: |o| {
                o.at("Certificate", "gateway-dns-tls", "/spec/issuerRef")
                    == json!({"group": "cert-manager.io", "kind": "ClusterIssuer", "name": "internal-ca"})
                    && !o.has("Issuer", "gateway-dns-ca")
                    && !o.has("Certificate", "gateway-dns-ca")
            },
        },
        Effect {
            value: "webhook.failurePolicy",
            args: vec!["--set", "webhook.failurePolicy=Fail"],
            check: |o| o.webhook("/failurePolicy") == "Fail",
        },
        Effect {
            value: "webhook.timeoutSeconds",
            args: vec!["--set", "webhook.timeoutSeconds=10"],
            check: |o| o.webhook("/timeoutSeconds") == 10,
        },
        Effect {
            value: "webhook.excludedNamespaces",
            args: vec!["--set", "webhook.excludedNamespaces={kube-system,infra}"],
            check: |o| {
                o.webhook("/namespaceSelector/matchExpressions/0/values")
                    == json!(["kube-system", "infra", "gateway-dns"])
            },
        },
        Effect {
            value: "webhook.namespaceSelector.matchLabels",
            args: vec!["--set", "webhook.namespaceSelector.matchLabels.dns=managed"],
            check: |o| o.webhook("/namespaceSelector/matchLabels") == json!({"dns": "managed"}),
        },
        Effect {
            value: "webhook.namespaceSelector.matchExpressions",
            args: vec![
                "--set-json",
                r#"webhook.namespaceSelector.matchExpressions=[{"key":"team","operator":"Exists"}]"#,
            ],
            check: |o| {
                o.webhook("/namespaceSelector/matchExpressions/2")
                    == json!({"key": "team", "operator": "Exists"})
            },
        },
        Effect {
            value: "webhook.url",
            args: vec!["--set", "webhook.url=https://192.0.2.10:8443/validate"],
            check: |o| {
                o.webhook("/clientConfig") == json!({"url": "https://192.0.2.10:8443/validate"})
            },
        },
        Effect {
            value: "webhook.caBundle",
            args: vec!["--set", "webhook.caBundle=Q0EK"],
            check: |o| o.webhook("/clientConfig/caBundle") == "Q0EK",
        },
        Effect {
            value: "resources",
            args: vec![
                "--set-json",
                r#"resources={"requests":{"cpu":"1","memory":"1Gi"}}"#,
            ],
            check: |o| o.container("/resources/requests") == json!({"cpu": "1", "memory": "1Gi"}),
        },
        Effect {
            value: "podAnnotations",
            args: vec!["--set", "podAnnotations.team=dns"],
            check: |o| {
                o.deployment("/spec/template/metadata/annotations") == json!({"team": "dns"})
            },
        },
        Effect {
            value: "podLabels",
            args: vec!["--set", "podLabels.team=dns"],
            check: |o| o.deployment("/spec/template/metadata/labels/team") == "dns",
        },
        Effect {
            value: "nodeSelector",
            args: vec!["--set", "nodeSelector.pool=system"],
            check: |o| {
                o.deployment("/spec/template/spec/nodeSelector") == json!({"pool": "system"})
                    && o.at(
                        "Job",
                        "gateway-dns-certgen-create",
                        "/spec/template/spec/nodeSelector",
                    ) == json!({"pool": "system"})
            },
        },
        Effect {
            value: "tolerations",
            args: vec![
                "--set-json",
                r#"tolerations=[{"key":"system","operator":"Exists","effect":"NoSchedule"}]"#,
            ],
            check: |o| {
                o.deployment("/spec/template/spec/tolerations/0/key") == "system"
                    && o.at(
                        "Job",
                        "gateway-dns-certgen-patch",
                        "/spec/template/spec/tolerations/0/key",
                    ) == "system"
            },
        },
        Effect {
            value: "affinity",
            args: vec![
                "--set-json",
                r#"affinity={"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"pool","operator":"In","values":["system"]}]}]}}}"#,
            ],
            check: |o| {
                let affinity = o.deployment("/spec/template/spec/affinity");
                affinity.get("nodeAffinity").is_some() && affinity.get("podAntiAffinity").is_none()
            },
        },
        Effect {
            value: "priorityClassName",
            args: vec!["--set", "priorityClassName=system-cluster-critical"],
            check: |o| {
                o.deployment("/spec/template/spec/priorityClassName") == "system-cluster-critical"
            },
        },
        Effect {
            value: "serviceAccount.annotations",
            args: vec!["--set", "serviceAccount.annotations.owner=dns"],
            check: |o| {
                o.at("ServiceAccount", "gateway-dns", "/metadata/annotations")
                    == json!({"owner": "dns"})
            },
        },
        Effect {
            value: "podDisruptionBudget.enabled",
            args: vec!["--set", "podDisruptionBudget.enabled=false"],
            check: |o| !o.has("PodDisruptionBudget", "gateway-dns"),
        },
        Effect {
            value: "podDisruptionBudget.minAvailable",
            args: vec!["--set", "podDisruptionBudget.minAvailable=50%"],
            check: |o| o.at("PodDisruptionBudget", "gateway-dns", "/spec/minAvailable") == "50%",
        },
        Effect {
            value: "networkPolicy.enabled",
            args: vec!["--set", "networkPolicy.enabled=false"],
            check: |o| !o.has("NetworkPolicy", "gateway-dns"),
        },
        Effect {
            value: "networkPolicy.metricsNamespaceSelector",
            args: vec![
                "--set-json",
                r#"networkPolicy.metricsNamespaceSelector={"matchLabels":{"kubernetes.io/metadata.name":"monitoring"}}"#,
            ],
            check: |o| {
                o.at(
                    "NetworkPolicy",
                    "gateway-dns",
                    "/spec/ingress/1/from/0/namespaceSelector/matchLabels/kubernetes.io~1metadata.name",
                ) == "monitoring"
            },
        },
        Effect {
            value: "monitoring.serviceMonitor.enabled",
            args: vec!["--set", "monitoring.serviceMonitor.enabled=true"],
            check: |o| o.has("ServiceMonitor", "gateway-dns"),
        },
        Effect {
            value: "monitoring.serviceMonitor.interval",
            args: vec![
                "--set",
                "monitoring.serviceMonitor.enabled=true",
                "--set",
                "monitoring.serviceMonitor.interval=15s",
            ],
            check: |o| {
                o.at(
                    "ServiceMonitor",
                    "gateway-dns",
                    "/spec/endpoints/0/interval",
                ) == "15s"
            },
        },
        Effect {
            value: "monitoring.serviceMonitor.labels",
            args: vec![
                "--set",
                "monitoring.serviceMonitor.enabled=true",
                "--set",
                "monitoring.serviceMonitor.labels.release=prometheus",
            ],
            check: |o| {
                o.at("ServiceMonitor", "gateway-dns", "/metadata/labels/release") == "prometheus"
            },
        },
        Effect {
            value: "monitoring.prometheusRule.enabled",
            args: vec!["--set", "monitoring.prometheusRule.enabled=true"],
            check: |o| o.has("PrometheusRule", "gateway-dns"),
        },
        Effect {
            value: "monitoring.prometheusRule.labels",
            args: vec![
                "--set",
                "monitoring.prometheusRule.enabled=true",
                "--set",
                "monitoring.prometheusRule.labels.release=prometheus",
            ],
            check: |o| {
                o.at("PrometheusRule", "gateway-dns", "/metadata/labels/release") == "prometheus"
            },
        },
        Effect {
            value: "monitoring.dashboard.enabled",
            args: vec!["--set", "monitoring.dashboard.enabled=true"],
            check: |o| {
                o.at(
                    "ConfigMap",
                    "gateway-dns-dashboard",
                    "/metadata/labels/grafana_dashboard",
                ) == "1"
            },
        },
        Effect {
            value: "monitoring.dashboard.labels",
            args: vec![
                "--set",
                "monitoring.dashboard.enabled=true",
                "--set-json",
                r#"monitoring.dashboard.labels={"dashboards":"gateway-dns"}"#,
            ],
            check: |o| {
                o.at(
                    "ConfigMap",
                    "gateway-dns-dashboard",
                    "/metadata/labels/dashboards",
                ) == "gateway-dns"
            },
        },
        Effect {
            value: "monitoring.dashboard.annotations",
            args: vec![
                "--set",
                "monitoring.dashboard.enabled=true",
                "--set",
                "monitoring.dashboard.annotations.grafana_folder=DNS",
            ],
            check: |o| {
                o.at(
                    "ConfigMap",
                    "gateway-dns-dashboard",
                    "/metadata/annotations",
                ) == json!({"grafana_folder": "DNS"})
            },
        },
    ]
}

impl Objects {
    fn volume_secret(&self, volume: &str) -> String {
        self.deployment("/spec/template/spec/volumes")
            .as_array()
            .and_then(|volumes| volumes.iter().find(|v| v["name"] == volume))
            .and_then(|v| v["secret"]["secretName"].as_str())
            .unwrap_or_default()
            .to_string()
    }

    /// The image of each certificate Job, create then patch.
    fn job_images(&self) -> Vec<String> {
        CERTIFICATE_JOBS
            .iter()
            .map(|job| {
                self.at("Job", job, "/spec/template/spec/containers/0/image")
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            })
            .collect()
    }

    fn job_args(&self, job: &str) -> Vec<String> {
        self.at("Job", job, "/spec/template/spec/containers/0/args")
            .as_array()
            .map(|args| {
                args.iter()
                    .filter_map(|arg| arg.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// The certificate Jobs of certificates.source job, in the order they run.
const CERTIFICATE_JOBS: [&str; 2] = ["gateway-dns-certgen-create", "gateway-dns-certgen-patch"];

/// Every `image` field of a render, wherever it is.
fn images(value: &Value, found: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, value) in map {
                match (key.as_str(), value) {
                    ("image", Value::String(image)) => found.push(image.clone()),
                    _ => images(value, found),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| images(item, found)),
        _ => {}
    }
}

#[test]
fn certificate_jobs_run_gateway_dns_certs_from_the_chart_image() {
    let docs = rendered(
        &[],
        &["--set", "image.repository=registry.example.com/gateway-dns"],
    );
    let image = format!(
        "registry.example.com/gateway-dns:{}",
        env!("CARGO_PKG_VERSION")
    );
    // One image for everything the chart runs: an air-gapped install mirrors only that one.
    let mut found = Vec::new();
    for doc in &docs {
        images(&doc.value, &mut found);
    }
    assert_eq!(found, vec![image.clone(); 3], "every image in the render");

    let o = Objects::of(&docs);
    assert_eq!(o.container("/image"), image.as_str());
    assert_eq!(o.job_images(), [image.clone(), image]);
    assert_eq!(
        o.job_args("gateway-dns-certgen-create"),
        [
            "certs",
            "--secret=gateway-dns/gateway-dns-tls",
            "--service-name=gateway-dns",
            "--service-namespace=gateway-dns",
        ]
    );
    assert_eq!(
        o.job_args("gateway-dns-certgen-patch"),
        [
            "certs",
            "--secret=gateway-dns/gateway-dns-tls",
            "--patch-webhook=gateway-dns",
        ]
    );
    for job in CERTIFICATE_JOBS {
        let pod = |pointer: &str| o.at("Job", job, &format!("/spec/template/spec{pointer}"));
        assert_eq!(pod("/serviceAccountName"), "gateway-dns-certgen", "{job}");
        // The restricted Pod Security Standard, as the namespace enforces it.
        assert_eq!(
            pod("/securityContext"),
            json!({"runAsNonRoot": true, "runAsUser": 65532, "runAsGroup": 65532,
                   "seccompProfile": {"type": "RuntimeDefault"}}),
            "{job}"
        );
        assert_eq!(
            pod("/containers/0/securityContext"),
            json!({"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
                   "runAsNonRoot": true, "capabilities": {"drop": ["ALL"]},
                   "seccompProfile": {"type": "RuntimeDefault"}}),
            "{job}"
        );
    }

    // Exactly what `certs` uses: create any Secret (the API server cannot check a name that
    // does not exist yet), read and renew its own, read and update its own webhook.
    assert_eq!(
        o.at("Role", "gateway-dns-certgen", "/rules"),
        json!([
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
            {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["gateway-dns-tls"],
             "verbs": ["get", "update"]},
        ])
    );
    assert_eq!(
        o.at("ClusterRole", "gateway-dns-certgen", "/rules"),
        json!([{"apiGroups": ["admissionregistration.k8s.io"],
                "resources": ["validatingwebhookconfigurations"],
                "resourceNames": ["gateway-dns"], "verbs": ["get", "update"]}])
    );
    let subject = json!([{"kind": "ServiceAccount", "name": "gateway-dns-certgen",
                          "namespace": "gateway-dns"}]);
    for kind in ["RoleBinding", "ClusterRoleBinding"] {
        assert_eq!(
            o.at(kind, "gateway-dns-certgen", "/subjects"),
            subject,
            "{kind}"
        );
        let role = kind.trim_end_matches("Binding");
        assert_eq!(
            o.at(kind, "gateway-dns-certgen", "/roleRef"),
            json!({"apiGroup": "rbac.authorization.k8s.io", "kind": role,
                   "name": "gateway-dns-certgen"}),
            "{kind}"
        );
    }
}

#[test]
fn certificate_jobs_follow_the_release_name_and_namespace() {
    let docs = yaml_docs(
        "helm template edge",
        &render_release("edge", "dns", &[], &[]).ok(),
    );
    let objects = by_key(&docs);
    let args = |job: &str| {
        objects
            .get(&("Job".to_string(), "dns".to_string(), job.to_string()))
            .and_then(|job| job.pointer("/spec/template/spec/containers/0/args"))
            .cloned()
            .unwrap_or(Value::Null)
    };
    assert_eq!(
        args("edge-gateway-dns-certgen-create"),
        json!([
            "certs",
            "--secret=dns/edge-gateway-dns-tls",
            "--service-name=edge-gateway-dns",
            "--service-namespace=dns",
        ])
    );
    assert_eq!(
        args("edge-gateway-dns-certgen-patch"),
        json!([
            "certs",
            "--secret=dns/edge-gateway-dns-tls",
            "--patch-webhook=edge-gateway-dns",
        ])
    );
}

/// Values of the schema without a render test here, each with the reason. Kept empty: a new
/// value needs a line in `effects()` (or a reason here), or this test fails.
const UNTESTED: [(&str, &str); 0] = [];

#[test]
fn every_schema_value_changes_the_render() {
    let (schema, _) = chart_values::load(&chart_dir());
    let leaves: BTreeSet<String> = chart_values::leaves(&schema)
        .into_iter()
        .map(|(path, _)| path)
        .collect();
    let effects = effects();
    let tested: BTreeSet<String> = effects.iter().map(|e| e.value.to_string()).collect();
    let untested: BTreeSet<String> = UNTESTED.iter().map(|(v, _)| v.to_string()).collect();
    let covered: BTreeSet<String> = tested.union(&untested).cloned().collect();
    assert_eq!(
        leaves, covered,
        "every value in values.schema.json has a render test in effects() or a reason in UNTESTED"
    );
    let defaults = Objects::of(&rendered(&[], &[]));
    // Two renders at a time: helm is single-threaded and these are independent.
    let failures: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = effects
            .chunks(effects.len().div_ceil(2))
            .map(|chunk| {
                let defaults = &defaults;
                scope.spawn(move || {
                    let mut failures = Vec::new();
                    for effect in chunk {
                        if (effect.check)(defaults) {
                            failures.push(format!(
                                "{} {:?}: the check already holds on the defaults",
                                effect.value, effect.args
                            ));
                            continue;
                        }
                        let run = render(&[], &effect.args);
                        if !run.success {
                            failures.push(format!(
                                "{} {:?}: helm template failed: {}",
                                effect.value, effect.args, run.stderr
                            ));
                            continue;
                        }
                        let docs = yaml_docs(effect.value, &run.stdout);
                        if !(effect.check)(&Objects::of(&docs)) {
                            failures.push(format!(
                                "{} {:?}: the render does not show it",
                                effect.value, effect.args
                            ));
                        }
                    }
                    failures
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|handle| handle.join().unwrap())
            .collect()
    });
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn schema_refuses_values_the_binary_would_refuse() {
    let (schema, _) = chart_values::load(&chart_dir());
    // The reasons an action may name are the engine's.
    let reasons: BTreeSet<&str> = schema
        .pointer("/properties/actions/propertyNames/enum")
        .and_then(Value::as_array)
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    let engine: BTreeSet<&str> = gateway_dns::engine::Reason::ALL
        .iter()
        .map(|r| r.as_str())
        .collect();
    assert_eq!(
        reasons, engine,
        "values.schema.json actions ↔ engine reasons"
    );
    for (args, names) in [
        (&["--set", "mode=strict"][..], "mode"),
        (&["--set", "actions.HostnameConflict=audit"][..], "actions"),
        (&["--set", "actions.NoSuchReason=warn"][..], "NoSuchReason"),
        (&["--set", "dns.provider=route53"][..], "provider"),
        (&["--set", "dns.provider=rfc2136"][..], "server"),
        (&["--set", "dns.provider=pdns"][..], "server"),
        (
            &[
                "--set",
                "dns.provider=rfc2136",
                "--set",
                "dns.rfc2136.server=bind.example:53",
            ][..],
            "server",
        ),
        (
            &["--set", "webhook.failurePolicy=Never"][..],
            "failurePolicy",
        ),
        (
            &["--set", "webhook.url=http://192.0.2.1/validate"][..],
            "url",
        ),
        (
            &[
                "--set",
                "dns.provider=embedded",
                "--set-json",
                r#"dns.embedded.secondaries=["bind.example"]"#,
            ][..],
            "secondaries",
        ),
        (&["--set", "dns.provider=webhook"][..], "webhook"),
        (
            &[
                "--set",
                "dns.txtRegistry.prefix=a-",
                "--set",
                "dns.txtRegistry.suffix=-b",
            ][..],
            "suffix",
        ),
        (
            &["--set", "dns.txtRegistry.encryption.enabled=true"][..],
            "name",
        ),
        (
            &["--set", "dns.webhook.url=https://provider.example"][..],
            "url",
        ),
        (&["--set", "certificates.source=vault"][..], "source"),
        (&["--set", "replica=2"][..], "replica"),
        (
            &["--set", "podDisruptionBudget.minAvailable=half"][..],
            "minAvailable",
        ),
    ] {
        let run = render(&[], args);
        assert!(!run.success, "helm template {args:?} was accepted");
        assert!(
            run.stderr.contains(names),
            "helm template {args:?}: the error does not name {names}: {}",
            run.stderr
        );
    }
}

#[test]
fn another_release_keeps_its_objects_to_its_name_and_namespace() {
    // A second installation (split-horizon DNS), in a namespace named unlike the release.
    let (release, namespace) = ("gateway-dns-internal", "dns-internal");
    let run = render_release(release, namespace, &[&example("cert-manager.yaml")], &[]);
    let docs = yaml_docs("helm template gateway-dns-internal", &run.ok());
    let objects = Objects::of(&docs);
    for doc in &docs {
        let (kind, object_namespace, name) = crate::support::helm::key_of(&doc.value);
        assert!(
            name.starts_with(release),
            "{kind} {name} is not named after the release"
        );
        let cluster_scoped = matches!(
            kind.as_str(),
            "ClusterRole" | "ClusterRoleBinding" | "ValidatingWebhookConfiguration"
        );
        assert_eq!(
            object_namespace,
            if cluster_scoped { "" } else { namespace },
            "{kind} {name}"
        );
    }
    let webhook = |pointer: &str| objects.at("ValidatingWebhookConfiguration", release, pointer);
    assert_eq!(
        webhook("/webhooks/0/namespaceSelector/matchExpressions/0/values"),
        json!(["kube-system", namespace]),
        "the webhook never reviews its own namespace"
    );
    assert_eq!(
        webhook("/metadata/annotations/cert-manager.io~1inject-ca-from"),
        "dns-internal/gateway-dns-internal-tls"
    );
    assert_eq!(
        webhook("/webhooks/0/clientConfig/service"),
        json!({"name": release, "namespace": namespace, "path": "/validate", "port": 443})
    );
    // Its pods are its own: the selectors name the release.
    let deployment = objects.get("Deployment", release).unwrap();
    assert_eq!(
        deployment["spec"]["selector"]["matchLabels"]["app.kubernetes.io/instance"],
        release
    );
    assert_eq!(
        objects.at(
            "Service",
            release,
            "/spec/selector/app.kubernetes.io~1instance"
        ),
        release
    );
    // The Lease it takes is the one its Role grants, in its namespace.
    let env = &deployment["spec"]["template"]["spec"]["containers"][0]["env"];
    assert!(
        env.as_array()
            .unwrap()
            .iter()
            .any(|v| v["name"] == "GATEWAY_DNS_LEASE_NAME" && v["value"] == release),
        "{env}"
    );
    assert_eq!(
        objects.at(
            "Role",
            "gateway-dns-internal-leases",
            "/rules/1/resourceNames"
        ),
        json!([release])
    );
    assert_eq!(
        objects.at("Certificate", "gateway-dns-internal-tls", "/spec/dnsNames"),
        json!([
            "gateway-dns-internal",
            "gateway-dns-internal.dns-internal",
            "gateway-dns-internal.dns-internal.svc",
            "gateway-dns-internal.dns-internal.svc.cluster.local"
        ])
    );
    // A release whose name lacks the chart's gets it appended.
    let docs = yaml_docs(
        "helm template internal",
        &render_release("internal", namespace, &[], &[]).ok(),
    );
    assert!(Objects::of(&docs).has("Deployment", "internal-gateway-dns"));
}

#[test]
fn values_reference_is_current() {
    let chart = chart_dir();
    let (schema, values) = chart_values::load(&chart);
    let readme = std::fs::read_to_string(chart.join("README.md")).unwrap();
    let expected = chart_values::with_table(&readme, &chart_values::table(&schema, &values))
        .expect("charts/gateway-dns/README.md has the values table markers");
    assert!(
        readme == expected,
        "charts/gateway-dns/README.md's values table is stale: regenerate it with `{}`",
        chart_values::REGENERATE
    );
}

// ---- The monitoring bundle ----

/// Every series `gateway-dns serve` can export, from the binary's own registry as it starts:
/// every family is described from the first scrape, with or without series.
fn exported_series() -> BTreeSet<String> {
    exposed_series(&gateway_dns::metrics::Metrics::new().render())
}

fn dashboard() -> Value {
    serde_json::from_str(
        &std::fs::read_to_string(chart_dir().join("files/gateway-dns-dashboard.json")).unwrap(),
    )
    .unwrap()
}

/// Every PromQL expression of the dashboard (panel targets and query variables), with where it
/// is. Grafana's `label_values(METRIC, LABEL)` is reduced to the metric it reads.
fn dashboard_queries(dashboard: &Value) -> Vec<(String, String)> {
    fn panels(list: &Value, out: &mut Vec<(String, String)>) {
        for panel in list.as_array().into_iter().flatten() {
            let title = panel["title"].as_str().unwrap_or_default();
            for target in panel["targets"].as_array().into_iter().flatten() {
                if let Some(expr) = target["expr"].as_str() {
                    out.push((format!("panel {title:?}"), expr.to_string()));
                }
            }
            panels(&panel["panels"], out);
        }
    }
    let mut queries = Vec::new();
    panels(&dashboard["panels"], &mut queries);
    for variable in dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
    {
        if variable["type"] != "query" {
            continue;
        }
        let query = variable["query"]["query"]
            .as_str()
            .or(variable["query"].as_str())
            .unwrap_or_default();
        let inner = query
            .strip_prefix("label_values(")
            .and_then(|rest| rest.strip_suffix(')'))
            .and_then(|args| args.rsplit_once(','))
            .map(|(metric, _label)| metric.trim().to_string())
            .unwrap_or_else(|| query.to_string());
        queries.push((format!("variable {}", variable["name"]), inner));
    }
    queries
}

#[test]
fn promql_scanner_finds_metrics_and_skips_everything_else() {
    let expr = r#"histogram_quantile(0.99, sum by (le, namespace) (rate(a_seconds_bucket{job=~"x|y", le!="+Inf"}[$__rate_interval])))
        / on (namespace) group_left (pod) b_total offset 1d > bool 3 * (c or 0 * d_total) unless max without (kind) (e{x="}"})"#;
    let names: Vec<String> = metric_names(expr).into_iter().collect();
    assert_eq!(names, ["a_seconds_bucket", "b_total", "c", "d_total", "e"]);
}

#[test]
fn dashboard_queries_name_only_exported_metrics() {
    let dashboard = dashboard();
    let exported = exported_series();
    let queries = dashboard_queries(&dashboard);
    assert!(queries.len() >= 10, "dashboard queries: {queries:?}");
    let mut used = BTreeSet::new();
    for (place, expr) in &queries {
        let names = metric_names(expr);
        assert!(!names.is_empty(), "{place}: {expr} reads no metric");
        for name in names {
            assert!(
                exported.contains(&name),
                "dashboard {place}: {name} is not a series gateway-dns exports ({exported:?})"
            );
            used.insert(name);
        }
    }
    // What the dashboard is for: admission rate and latency, denials by reason, sync freshness
    // and errors, records by zone and blocked, the Lease holder, cache objects, the processes.
    for needed in [
        "gateway_dns_admission_requests_total",
        "gateway_dns_admission_duration_seconds_bucket",
        "gateway_dns_admission_decisions_total",
        "gateway_dns_last_successful_sync_timestamp_seconds",
        "gateway_dns_sync_errors_total",
        "gateway_dns_sync_changes_total",
        "gateway_dns_records",
        "gateway_dns_records_blocked",
        "gateway_dns_findings",
        "gateway_dns_namespace_findings",
        "gateway_dns_leader",
        "gateway_dns_cache_objects",
        "process_resident_memory_bytes",
        "process_cpu_seconds_total",
    ] {
        assert!(used.contains(needed), "the dashboard shows no {needed}");
    }
    assert!(
        queries
            .iter()
            .any(|(_, e)| e.contains("gateway_dns_admission_decisions_total")
                && e.contains("by (reason)")
                && e.contains("action=\"deny\"")),
        "a panel shows denials by reason"
    );
    // Every panel reads the data source variable, so the dashboard imports anywhere.
    let mut titles = Vec::new();
    fn check_panels(list: &Value, titles: &mut Vec<String>) {
        for panel in list.as_array().into_iter().flatten() {
            if panel["type"] != "row" {
                assert_eq!(
                    panel["datasource"]["uid"], "${datasource}",
                    "panel {}",
                    panel["title"]
                );
                titles.push(panel["title"].as_str().unwrap().to_string());
            }
            check_panels(&panel["panels"], titles);
        }
    }
    check_panels(&dashboard["panels"], &mut titles);
    let unique: BTreeSet<&String> = titles.iter().collect();
    assert_eq!(
        unique.len(),
        titles.len(),
        "panel titles are unique: {titles:?}"
    );
    // The kustomize component ships the same file.
    let component = std::fs::read_to_string(
        manifests_dir().join("components/monitoring/gateway-dns-dashboard.json"),
    )
    .unwrap();
    let chart =
        std::fs::read_to_string(chart_dir().join("files/gateway-dns-dashboard.json")).unwrap();
    assert!(
        component == chart,
        "manifests/components/monitoring/gateway-dns-dashboard.json and \
         charts/gateway-dns/files/gateway-dns-dashboard.json differ: copy one over the other"
    );
}

fn promtool() -> PathBuf {
    let path = PathBuf::from("/usr/bin/promtool");
    assert!(
        path.exists(),
        "promtool is missing: install Debian's prometheus package (scripts/test.sh does)"
    );
    path
}

/// Every family with values in it, as a busy replica exports them: Prometheus text and
/// OpenMetrics.
pub(crate) fn busy_exposition() -> (String, String) {
    use gateway_dns::metrics::{ChangeAction, EvaluationErrorKind, Metrics, SyncErrorKind};
    let metrics = Metrics::new();
    metrics.init_sync("rfc2136", &["example.com".into(), "example.org".into()]);
    metrics.observe_admission_latency(std::time::Duration::from_micros(700));
    metrics.record_admission_request("denied");
    metrics.record_decision("HostnameConflict", "deny");
    metrics.record_evaluation_error(EvaluationErrorKind::Timeout);
    metrics.set_cache_objects("HTTPRoute", 3);
    metrics.set_source_staleness("HTTPRoute", std::time::Duration::from_millis(1500));
    metrics.set_secondary_lag("192.0.2.53:53", 2, std::time::Duration::from_secs(30));
    metrics.set_target_health([("infra/blue", false), ("infra/green", true)]);
    metrics.record_sync_pass();
    metrics.add_sync_changes(ChangeAction::Update, 2);
    metrics.record_sync_error("rfc2136", SyncErrorKind::Apply);
    metrics.set_last_successful_sync(std::time::SystemTime::now());
    metrics.set_records("example.com", 7);
    metrics.set_leader(true);
    metrics.record_tls_reload("reloaded");
    metrics.set_findings(&[gateway_dns::engine::Finding {
        object: "HTTPRoute/team-b/web".into(),
        reason: gateway_dns::engine::Reason::HostnameConflict,
        action: gateway_dns::engine::Action::Deny,
        hostname: Some("app.example.com".into()),
        field: "spec.hostnames[0]".into(),
        message: "app.example.com is already served".into(),
    }]);
    (metrics.render(), metrics.render_openmetrics())
}

fn promtool_check_metrics(exposition: &str) -> crate::support::cluster::Run {
    use std::io::Write as _;
    let mut child = Command::new(promtool())
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(exposition.as_bytes())
        .unwrap();
    crate::support::cluster::Run::from(child.wait_with_output().unwrap())
}

#[test]
fn exposition_passes_promtool_check_metrics() {
    let (text, openmetrics) = busy_exposition();
    let run = promtool_check_metrics(&text);
    assert!(
        run.success && run.stdout.trim().is_empty() && run.stderr.trim().is_empty(),
        "promtool check metrics: {}{}\n{text}",
        run.stdout,
        run.stderr
    );
    // As a process starts, families without series yet are only described: still valid.
    let fresh = gateway_dns::metrics::Metrics::new().render();
    let run = promtool_check_metrics(&fresh);
    assert!(
        run.success && run.stdout.trim().is_empty() && run.stderr.trim().is_empty(),
        "promtool check metrics (fresh registry): {}{}\n{fresh}",
        run.stdout,
        run.stderr
    );
    // The checker does find problems: a counter without `_total` and a family without help.
    let bad = "# TYPE gateway_dns_bad counter\ngateway_dns_bad 1\n";
    assert!(!promtool_check_metrics(bad).success);
    // The exporter conventions, family by family.
    let families: BTreeSet<(String, String)> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_once(' '))
        .map(|(name, kind)| (name.to_string(), kind.to_string()))
        .collect();
    for (name, kind) in &families {
        match kind.as_str() {
            "counter" => assert!(name.ends_with("_total"), "counter {name}"),
            _ => assert!(!name.ends_with("_total"), "{kind} {name}"),
        }
    }
    for (name, kind) in [
        ("process_resident_memory_bytes", "gauge"),
        ("process_cpu_seconds_total", "counter"),
        ("process_open_fds", "gauge"),
        ("process_start_time_seconds", "gauge"),
        ("gateway_dns_build_info", "gauge"),
        ("gateway_dns_sync_errors_total", "counter"),
        ("gateway_dns_sync_changes_total", "counter"),
        ("gateway_dns_records", "gauge"),
        ("gateway_dns_records_blocked", "gauge"),
        ("gateway_dns_leader", "gauge"),
    ] {
        assert!(
            families.contains(&(name.to_string(), kind.to_string())),
            "{name} ({kind}) in {families:?}"
        );
    }
    // OpenMetrics, for scrapers that ask for it: typed by family name, units declared, `# EOF`.
    assert!(openmetrics.contains("# TYPE gateway_dns_sync_errors counter\n"));
    assert!(openmetrics.contains("# UNIT process_cpu_seconds seconds\n"));
    assert!(openmetrics.ends_with("# EOF\n"));
}

fn rules_file() -> PathBuf {
    chart_dir().join("files/prometheus-rules.yaml")
}

#[test]
fn alert_rules_pass_promtool_and_read_only_exported_metrics() {
    let run = crate::support::cluster::Run::from(
        Command::new(promtool())
            .args(["check", "rules"])
            .arg(rules_file())
            .output()
            .unwrap(),
    );
    assert!(
        run.success,
        "promtool check rules: {}{}",
        run.stdout, run.stderr
    );
    let rules: Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(rules_file()).unwrap()).unwrap();
    let exported = exported_series();
    let mut alerts = BTreeSet::new();
    let mut read = BTreeSet::new();
    for rule in rules["groups"][0]["rules"].as_array().unwrap() {
        let alert = rule["alert"].as_str().unwrap().to_string();
        for name in metric_names(rule["expr"].as_str().unwrap()) {
            assert!(
                exported.contains(&name) || APISERVER_SERIES.contains(&name.as_str()),
                "alert {alert}: {name} is neither exported by gateway-dns nor in APISERVER_SERIES"
            );
            read.insert(name);
        }
        assert!(
            rule["annotations"]["summary"].is_string()
                && rule["annotations"]["description"].is_string(),
            "alert {alert} has a summary and a description"
        );
        alerts.insert(alert);
    }
    for needed in [
        "GatewayDnsHostnameConflicts",
        "GatewayDnsHostnameConflictPresent",
        "GatewayDnsFindingsPresent",
        "GatewayDnsDenialsRising",
        "GatewayDnsSyncStale",
        "GatewayDnsAdmissionEvaluationErrors",
        "GatewayDnsAdmissionSlow",
    ] {
        assert!(alerts.contains(needed), "no alert {needed}");
    }
    assert!(read.contains("gateway_dns_last_successful_sync_timestamp_seconds"));
    assert!(read.contains("gateway_dns_findings"));
    // The kustomize component carries the same rules.
    let component = yaml_docs(
        "components/monitoring/prometheusrule.yaml",
        &std::fs::read_to_string(manifests_dir().join("components/monitoring/prometheusrule.yaml"))
            .unwrap(),
    );
    assert_eq!(component[0].value["spec"], rules);
}

#[test]
fn the_rules_in_docs_alerts_md_are_the_shipped_ones() {
    let rules: Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(rules_file()).unwrap()).unwrap();
    let shipped = rules["groups"][0]["rules"].as_array().unwrap();
    let doc = std::fs::read_to_string(repo().join("docs/alerts.md")).unwrap();
    let mut shown = BTreeSet::new();
    for block in doc.split("```yaml\n").skip(1) {
        let block = block.split("```").next().unwrap();
        let documented: Value = serde_yaml_ng::from_str(block)
            .unwrap_or_else(|err| panic!("docs/alerts.md: {err}:\n{block}"));
        for rule in documented.as_array().unwrap() {
            let name = rule["alert"].as_str().unwrap();
            let same = shipped.iter().find(|r| r["alert"] == name);
            assert_eq!(
                same,
                Some(rule),
                "docs/alerts.md shows {name} unlike the shipped rules"
            );
            shown.insert(name.to_string());
        }
    }
    for needed in [
        "GatewayDnsHostnameConflictPresent",
        "GatewayDnsSyncStale",
        "GatewayDnsFindingsPresent",
    ] {
        assert!(
            shown.contains(needed),
            "docs/alerts.md does not show {needed}"
        );
    }
}

#[test]
fn alerts_fire_on_their_symptoms_and_stay_quiet_when_healthy() {
    // promtool's rule unit tests: synthetic series in, the alerts that must (not) fire out.
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(rules_file(), dir.path().join("prometheus-rules.yaml")).unwrap();
    let tests = repo().join("tests/fixtures/monitoring/rules-test.yaml");
    std::fs::copy(&tests, dir.path().join("rules-test.yaml")).unwrap();
    let run = crate::support::cluster::Run::from(
        Command::new(promtool())
            .args(["test", "rules", "rules-test.yaml"])
            .current_dir(dir.path())
            .output()
            .unwrap(),
    );
    assert!(
        run.success,
        "promtool test rules (tests/fixtures/monitoring/rules-test.yaml): {}{}",
        run.stdout, run.stderr
    );
    // Every alert has a test that fires it.
    let rules: Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(rules_file()).unwrap()).unwrap();
    let fixtures: Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(&tests).unwrap()).unwrap();
    let fired: BTreeSet<&str> = fixtures["tests"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|test| test["alert_rule_test"].as_array().into_iter().flatten())
        .filter(|case| {
            case["exp_alerts"]
                .as_array()
                .is_some_and(|alerts| !alerts.is_empty())
        })
        .filter_map(|case| case["alertname"].as_str())
        .collect();
    for rule in rules["groups"][0]["rules"].as_array().unwrap() {
        let alert = rule["alert"].as_str().unwrap();
        assert!(fired.contains(alert), "no promtool test fires {alert}");
    }
}

#[test]
fn service_monitor_scrapes_the_services_metrics_port() {
    // The ServiceMonitor scrapes the port the Service names "metrics", which serves /metrics.
    let docs = rendered(&[&example("monitoring.yaml")], &[]);
    let objects = Objects::of(&docs);
    let port = objects.at("ServiceMonitor", "gateway-dns", "/spec/endpoints/0/port");
    let service_ports = objects.at("Service", "gateway-dns", "/spec/ports");
    assert!(
        service_ports
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == port && p["targetPort"] == "metrics"),
        "ServiceMonitor port {port} ↔ Service ports {service_ports}"
    );
    let selector = objects.at(
        "ServiceMonitor",
        "gateway-dns",
        "/spec/selector/matchLabels",
    );
    let labels = objects.at("Service", "gateway-dns", "/metadata/labels");
    for (key, value) in selector.as_object().unwrap() {
        assert_eq!(&labels[key], value, "ServiceMonitor selector {key}");
    }
}
