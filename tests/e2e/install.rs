//! The cluster install (`manifests/`, `Dockerfile`, `docs/`) checked against the code it
//! deploys: every manifest in its k8s-openapi type, the kustomize output of the base and every
//! overlay (when `kubectl kustomize` is installed), the cross-references between objects, the
//! real binary started with the Deployment's own arguments and called as kube-apiserver calls
//! the webhook, and the docs that are generated from, or must follow, the code.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{CommandFactory as _, Parser as _};
use gateway_dns::cli::{Cli, Command as CliCommand, ServeArgs};
use gateway_dns::engine::Reason;
use gateway_dns::model::{GATEWAY_GROUP, ObjectKind};
use hyper::http::{Method, StatusCode};
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhook;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{
    Container, PodSpec, Probe, Secret, SecretVolumeSource, Service, ServiceAccount, VolumeMount,
};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::Value;

use crate::support::install::{
    Adaptation, Certificate, Doc, Install, Issuer, RunningBinary, copy_tree, eventually,
    flag_value, http_get, is_kustomization, kustomize, kustomize_tool, manifest_docs,
    manifests_dir, notice, relative, repo, run_certs, yaml_docs, yaml_files,
};
use crate::support::webhook::HttpsConnection;

const READY_WITHIN: Duration = Duration::from_secs(20);

/// The overlays and the base, as directories under `manifests/`.
fn kustomize_dirs() -> Vec<PathBuf> {
    let mut dirs = vec![manifests_dir().join("base")];
    let mut overlays: Vec<PathBuf> = std::fs::read_dir(manifests_dir().join("overlays"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.join("kustomization.yaml").is_file())
        .collect();
    overlays.sort();
    dirs.extend(overlays);
    dirs
}

fn base() -> Install {
    let dir = manifests_dir().join("base");
    Install::from_docs("manifests/base", &manifest_docs(&dir))
}

/// Environment variables the binary reads that are not flags: the log filter (main.rs) and
/// the pod name, the leader-election identity (src/cmd/serve.rs).
const NON_FLAG_ENV: [&str; 2] = ["GATEWAY_DNS_LOG", "POD_NAME"];

/// The Deployment's configuration as the binary's own parser reads it: its args, plus every
/// `GATEWAY_DNS_*` variable turned into the flag that reads it (a variable no flag reads fails).
fn effective_args(install: &Install) -> Vec<String> {
    let mut args = install.args();
    let command = Cli::command();
    let serve = command.find_subcommand("serve").unwrap();
    for (name, value) in install.env() {
        if NON_FLAG_ENV.contains(&name.as_str()) {
            continue;
        }
        let flag = serve
            .get_arguments()
            .find(|arg| arg.get_env().is_some_and(|env| env == name.as_str()))
            .and_then(|arg| arg.get_long())
            .unwrap_or_else(|| {
                panic!(
                    "{}: env {name} is read by no flag of `gateway-dns serve`",
                    install.origin
                )
            });
        args.push(format!("--{flag}={value}"));
    }
    args
}

fn parse_serve_args(args: &[String], origin: &str) -> ServeArgs {
    let argv = std::iter::once("gateway-dns".to_string()).chain(args.iter().cloned());
    match Cli::try_parse_from(argv) {
        Ok(Cli {
            command: CliCommand::Serve(serve),
        }) => *serve,
        Ok(other) => panic!("{origin}: the Deployment runs {other:?}, not `serve`"),
        Err(error) => {
            panic!("{origin}: gateway-dns refuses the Deployment's args {args:?}:\n{error}")
        }
    }
}

fn webhook(install: &Install) -> &ValidatingWebhook {
    let webhooks = install
        .webhook_configuration()
        .webhooks
        .as_deref()
        .unwrap_or_default();
    assert_eq!(webhooks.len(), 1, "{}: one webhook", install.origin);
    &webhooks[0]
}

/// `NAME.NS.svc`, the host kube-apiserver calls (and sends as SNI) for the webhook's Service.
fn webhook_service_host(install: &Install) -> String {
    let service = webhook(install)
        .client_config
        .service
        .as_ref()
        .expect("the webhook calls a Service");
    format!("{}.{}.svc", service.name, service.namespace)
}

fn pod_spec(install: &Install) -> &PodSpec {
    install
        .deployment()
        .spec
        .as_ref()
        .and_then(|spec| spec.template.spec.as_ref())
        .expect("pod spec")
}

/// The container port a Service or probe names (by name or number).
fn container_port(container: &Container, port: &IntOrString) -> i32 {
    let ports = container.ports.as_deref().unwrap_or_default();
    let found = match port {
        IntOrString::Int(number) => ports.iter().find(|p| p.container_port == *number),
        IntOrString::String(name) => ports.iter().find(|p| p.name.as_deref() == Some(name)),
    };
    found
        .unwrap_or_else(|| panic!("no container port {port:?} in {ports:?}"))
        .container_port
}

/// Whether `selector` selects an object with `labels` (matchLabels and matchExpressions).
fn selects(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let labels_match = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(key, value)| labels.get(key) == Some(value));
    let expressions_match = selector.match_expressions.iter().flatten().all(|rule| {
        let values = rule.values.as_deref().unwrap_or_default();
        let value = labels.get(&rule.key);
        match rule.operator.as_str() {
            "In" => value.is_some_and(|v| values.contains(v)),
            "NotIn" => value.is_none_or(|v| !values.contains(v)),
            "Exists" => value.is_some(),
            "DoesNotExist" => value.is_none(),
            other => panic!("unknown selector operator {other}"),
        }
    });
    labels_match && expressions_match
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(key, value)| (key.to_string(), value.to_string()))
        .collect()
}

/// An object of an installation: its kind and its metadata.
trait Manifest {
    const KIND: &'static str;
    fn meta(&self) -> &ObjectMeta;
}

/// The namespaced kinds an installation has, named as in the manifests.
macro_rules! namespaced_kinds {
    ($($kind:ident),* $(,)?) => {$(
        impl Manifest for $kind {
            const KIND: &'static str = stringify!($kind);
            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }
        }
    )*};
}

namespaced_kinds!(
    ServiceAccount,
    Role,
    RoleBinding,
    Deployment,
    Service,
    Secret,
    PodDisruptionBudget,
    NetworkPolicy,
    Issuer,
    Certificate,
);

fn metas<T: Manifest>(objects: &[T]) -> Vec<(&'static str, &ObjectMeta)> {
    objects
        .iter()
        .map(|object| (T::KIND, object.meta()))
        .collect()
}

/// Everything that must agree between the objects of one installation and the binary.
fn check_installation(install: &Install, expect_failure_policy: &str) {
    let origin = &install.origin;
    let namespace = install.namespace().metadata.name.clone().unwrap();

    // Every namespaced object lives in the installation's namespace.
    let namespaced = [
        metas(&install.service_accounts),
        metas(&install.roles),
        metas(&install.role_bindings),
        metas(&install.deployments),
        metas(&install.services),
        metas(&install.secrets),
        metas(&install.disruption_budgets),
        metas(&install.network_policies),
        metas(&install.issuers),
        metas(&install.certificates),
    ];
    for (kind, meta) in namespaced.into_iter().flatten() {
        assert_eq!(
            meta.namespace.as_ref(),
            Some(&namespace),
            "{origin}: {kind} namespace"
        );
    }

    // Selectors ↔ pod labels.
    let pod_labels = install.pod_labels();
    assert!(!pod_labels.is_empty(), "{origin}: pod template labels");
    let deployment_spec = install.deployment().spec.as_ref().unwrap();
    assert!(
        selects(&deployment_spec.selector, &pod_labels),
        "{origin}: Deployment selector"
    );
    let service = install.service();
    let service_selector = service
        .spec
        .as_ref()
        .and_then(|s| s.selector.clone())
        .unwrap_or_default();
    assert!(
        !service_selector.is_empty(),
        "{origin}: the Service selects pods"
    );
    for (key, value) in &service_selector {
        assert_eq!(
            pod_labels.get(key),
            Some(value),
            "{origin}: Service selector {key} ↔ pod labels"
        );
    }
    let budget = install
        .disruption_budgets
        .first()
        .expect("a PodDisruptionBudget");
    let budget_spec = budget.spec.as_ref().unwrap();
    assert!(
        selects(budget_spec.selector.as_ref().unwrap(), &pod_labels),
        "{origin}: PDB selector"
    );
    let policy = install.network_policies.first().expect("a NetworkPolicy");
    let policy_spec = policy.spec.as_ref().unwrap();
    assert!(
        selects(
            policy_spec.pod_selector.as_ref().expect("podSelector"),
            &pod_labels
        ),
        "{origin}: NetworkPolicy podSelector"
    );

    // Availability: three replicas spread over nodes, two always up.
    assert_eq!(deployment_spec.replicas, Some(3), "{origin}: replicas");
    assert_eq!(
        budget_spec.min_available,
        Some(IntOrString::Int(2)),
        "{origin}: PDB minAvailable"
    );
    let pod = pod_spec(install);
    let anti_affinity = pod
        .affinity
        .as_ref()
        .and_then(|a| a.pod_anti_affinity.as_ref())
        .expect("pod anti-affinity");
    let terms: Vec<_> = anti_affinity
        .preferred_during_scheduling_ignored_during_execution
        .iter()
        .flatten()
        .map(|weighted| &weighted.pod_affinity_term)
        .chain(
            anti_affinity
                .required_during_scheduling_ignored_during_execution
                .iter()
                .flatten(),
        )
        .collect();
    assert!(
        terms
            .iter()
            .any(|term| term.topology_key == "kubernetes.io/hostname"
                && selects(term.label_selector.as_ref().unwrap(), &pod_labels)),
        "{origin}: anti-affinity across nodes for these pods"
    );

    // Hardening.
    let pod_security = pod.security_context.as_ref().expect("pod securityContext");
    assert_eq!(
        pod_security.run_as_non_root,
        Some(true),
        "{origin}: runAsNonRoot"
    );
    assert!(
        pod_security.run_as_user.is_some_and(|uid| uid > 0),
        "{origin}: non-root UID"
    );
    assert_eq!(
        pod_security
            .seccomp_profile
            .as_ref()
            .map(|p| p.type_.as_str()),
        Some("RuntimeDefault"),
        "{origin}: seccomp"
    );
    let container = install.container();
    let security = container
        .security_context
        .as_ref()
        .expect("container securityContext");
    assert_eq!(
        security.read_only_root_filesystem,
        Some(true),
        "{origin}: read-only root"
    );
    assert_eq!(
        security.allow_privilege_escalation,
        Some(false),
        "{origin}: no escalation"
    );
    let capabilities = security.capabilities.as_ref().expect("capabilities");
    assert_eq!(
        capabilities.drop.as_deref(),
        Some(&["ALL".to_string()][..]),
        "{origin}: drop ALL"
    );
    assert!(capabilities.add.is_none(), "{origin}: no capability added");
    let resources = container.resources.as_ref().expect("resources");
    let requests = resources.requests.as_ref().expect("requests");
    assert!(
        requests.contains_key("cpu") && requests.contains_key("memory"),
        "{origin}: requests"
    );
    assert!(
        resources
            .limits
            .as_ref()
            .is_some_and(|l| l.contains_key("memory")),
        "{origin}: memory limit"
    );
    let image = container.image.as_deref().unwrap_or_default();
    assert!(
        image.ends_with(&format!(":{}", env!("CARGO_PKG_VERSION"))),
        "{origin}: image {image} is tagged with the crate version {}",
        env!("CARGO_PKG_VERSION")
    );

    // The args and env: accepted by the binary's own parser, consistent with ports and volumes.
    let args = effective_args(install);
    let serve = parse_serve_args(&args, origin);
    assert!(serve.webhook, "{origin}: the Deployment runs the webhook");
    let webhook_port = container_port(container, &IntOrString::String("webhook".into()));
    assert_eq!(
        webhook_port,
        i32::from(serve.listen.port()),
        "{origin}: webhook port ↔ --listen"
    );
    let metrics_port = container_port(container, &IntOrString::String("metrics".into()));
    let metrics_listen = serve.metrics_listen.expect("--metrics-listen");
    assert_eq!(
        metrics_port,
        i32::from(metrics_listen.port()),
        "{origin}: metrics port ↔ --metrics-listen"
    );
    assert!(
        serve.manifests.is_none(),
        "{origin}: in a cluster the source is the cluster"
    );

    // The TLS Secret volume holds the files --tls-cert/--tls-key name.
    let tls_cert = serve.tls_cert.as_ref().expect("--tls-cert");
    let tls_key = serve.tls_key.as_ref().expect("--tls-key");
    let (mount, secret_volume) = secret_mount(install, "--tls-cert", tls_cert);
    assert!(
        tls_key.starts_with(&mount.mount_path),
        "{origin}: --tls-key in the same volume"
    );
    assert!(
        secret_volume.items.is_none(),
        "{origin}: Secret keys are the file names"
    );
    let file_name = |path: &PathBuf| path.file_name().unwrap().to_string_lossy().into_owned();
    assert_eq!(
        file_name(tls_cert),
        gateway_dns::webhook::certs::TLS_CERT_FILE,
        "{origin}: cert file = Secret key"
    );
    assert_eq!(
        file_name(tls_key),
        gateway_dns::webhook::certs::TLS_KEY_FILE,
        "{origin}: key file = Secret key"
    );
    assert!(
        pod_security.fs_group.is_some(),
        "{origin}: fsGroup lets the user read the 0440 key"
    );

    // Probes hit the server's routes on its listeners.
    let readiness = container.readiness_probe.as_ref().expect("readiness probe");
    let liveness = container.liveness_probe.as_ref().expect("liveness probe");
    for (probe, path) in [(readiness, "/readyz"), (liveness, "/healthz")] {
        let get = probe.http_get.as_ref().expect("HTTP probe");
        assert_eq!(get.path.as_deref(), Some(path), "{origin}: probe path");
        let port = container_port(container, &get.port);
        if port == webhook_port {
            assert_eq!(
                get.scheme.as_deref(),
                Some("HTTPS"),
                "{origin}: the webhook port is HTTPS"
            );
        } else {
            assert_eq!(port, metrics_port, "{origin}: probe on a served port");
            assert_eq!(
                path, "/healthz",
                "{origin}: the metrics listener serves /healthz only"
            );
        }
    }

    // Service: 443 → the webhook port.
    let service_ports = service
        .spec
        .as_ref()
        .unwrap()
        .ports
        .as_deref()
        .unwrap_or_default();
    let https = service_ports
        .iter()
        .find(|p| p.port == 443)
        .expect("Service port 443");
    assert_eq!(
        container_port(container, https.target_port.as_ref().unwrap()),
        webhook_port,
        "{origin}: Service 443 → --listen port"
    );

    // The webhook configuration ↔ Service ↔ server.
    let hook = webhook(install);
    let client_service = hook.client_config.service.as_ref().unwrap();
    assert!(
        hook.client_config.url.is_none(),
        "{origin}: webhook calls the Service, not a URL"
    );
    assert_eq!(
        Some(&client_service.name),
        service.metadata.name.as_ref(),
        "{origin}: webhook Service name"
    );
    assert_eq!(
        Some(&client_service.namespace),
        service.metadata.namespace.as_ref(),
        "{origin}: webhook Service namespace"
    );
    assert_eq!(
        client_service.port,
        Some(https.port),
        "{origin}: webhook Service port"
    );
    assert_eq!(
        client_service.path.as_deref(),
        Some("/validate"),
        "{origin}: the server's admission route"
    );
    assert_eq!(
        hook.admission_review_versions,
        ["v1"],
        "{origin}: admissionReviewVersions"
    );
    assert_eq!(hook.side_effects, "None", "{origin}: sideEffects");
    assert_eq!(hook.timeout_seconds, Some(3), "{origin}: timeoutSeconds");
    assert_eq!(
        hook.match_policy.as_deref(),
        Some("Equivalent"),
        "{origin}: matchPolicy"
    );
    assert_eq!(
        hook.failure_policy.as_deref(),
        Some(expect_failure_policy),
        "{origin}: failurePolicy"
    );
    assert!(
        serve.admission_deadline < Duration::from_secs(3),
        "{origin}: gateway-dns answers (--admission-deadline) before the API server gives up"
    );
    let rules = hook.rules.as_deref().unwrap_or_default();
    assert_eq!(rules.len(), 2, "{origin}: Gateway API kinds and Namespaces");
    let namespaces = &rules[1];
    assert_eq!(
        (
            namespaces.api_groups.as_deref(),
            namespaces.api_versions.as_deref(),
            namespaces.operations.as_deref(),
            namespaces.resources.as_deref(),
            namespaces.scope.as_deref(),
        ),
        (
            Some(&[String::new()][..]),
            Some(&["v1".to_string()][..]),
            Some(&["UPDATE".to_string()][..]),
            Some(&["namespaces".to_string()][..]),
            Some("Cluster"),
        ),
        "{origin}: Namespace UPDATEs are reviewed (their hostname annotations)"
    );
    let rule = &rules[0];
    assert_eq!(
        rule.api_groups.as_deref(),
        Some(&[GATEWAY_GROUP.to_string()][..]),
        "{origin}: group"
    );
    assert_eq!(
        rule.api_versions.as_deref(),
        Some(&["*".to_string()][..]),
        "{origin}: all versions"
    );
    let operations: BTreeSet<&str> = rule
        .operations
        .iter()
        .flatten()
        .map(String::as_str)
        .collect();
    assert_eq!(
        operations,
        BTreeSet::from(["CREATE", "UPDATE"]),
        "{origin}: operations"
    );
    let reviewed: BTreeSet<&str> = rule
        .resources
        .iter()
        .flatten()
        .map(String::as_str)
        .collect();
    let gateway_kinds: BTreeSet<&str> = ObjectKind::ALL
        .iter()
        .filter(|kind| kind.group() == GATEWAY_GROUP)
        .map(|kind| kind.plural())
        .collect();
    assert_eq!(
        reviewed, gateway_kinds,
        "{origin}: the webhook reviews every Gateway API kind the binary reads"
    );
    assert_eq!(rule.scope.as_deref(), Some("Namespaced"), "{origin}: scope");
    let selector = hook.namespace_selector.as_ref().expect("namespaceSelector");
    let name_label = "kubernetes.io/metadata.name";
    for (excluded, extra) in [
        ("kube-system", None),
        (namespace.as_str(), None),
        ("apps", Some(("gateway-dns.io/ignore", "true"))),
    ] {
        let mut namespace_labels = labels(&[(name_label, excluded)]);
        if let Some((key, value)) = extra {
            namespace_labels.insert(key.into(), value.into());
        }
        assert!(
            !selects(selector, &namespace_labels),
            "{origin}: namespace {namespace_labels:?} must be excluded"
        );
    }
    assert!(
        selects(selector, &labels(&[(name_label, "apps")])),
        "{origin}: ordinary namespaces are reviewed"
    );
    assert!(
        selects(
            selector,
            &labels(&[(name_label, "apps"), ("gateway-dns.io/mode", "audit")])
        ),
        "{origin}: mode-labelled namespaces are still reviewed (the mode is applied by gateway-dns)"
    );

    // The certificate names kube-apiserver checks.
    let sans =
        gateway_dns::webhook::certs::service_sans(&client_service.name, &client_service.namespace);
    assert!(
        sans.contains(&webhook_service_host(install)),
        "{origin}: SANs {sans:?}"
    );

    check_dns(install, &serve);
    check_rbac(install, &namespace, &serve);
}

/// Least privilege: read exactly what the binary watches, write only Events and Leases.
/// Files the binary reads (TLS pair, provider secrets) are in read-only Secret volumes; the
/// DNS configuration is complete for the provider; ports it listens on are open.
/// The read-only Secret volume (mode 0440, so not world-readable) that holds the file `flag`
/// points to, and where it is mounted.
fn secret_mount<'a>(
    install: &'a Install,
    flag: &str,
    path: &Path,
) -> (&'a VolumeMount, &'a SecretVolumeSource) {
    let origin = &install.origin;
    let mount = install
        .container()
        .volume_mounts
        .iter()
        .flatten()
        .find(|mount| path.starts_with(&mount.mount_path))
        .unwrap_or_else(|| panic!("{origin}: {flag} {} is on no volume", path.display()));
    assert_eq!(
        mount.read_only,
        Some(true),
        "{origin}: {flag} volume read-only"
    );
    let volume = pod_spec(install)
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == mount.name)
        .unwrap();
    let secret = volume
        .secret
        .as_ref()
        .unwrap_or_else(|| panic!("{origin}: {flag} is not from a Secret"));
    assert_eq!(
        secret.default_mode,
        Some(0o440),
        "{origin}: {flag} not world-readable"
    );
    (mount, secret)
}

fn check_dns(install: &Install, serve: &ServeArgs) {
    let origin = &install.origin;
    let container = install.container();
    let files = [
        ("--tls-cert", serve.tls_cert.as_ref()),
        ("--tls-key", serve.tls_key.as_ref()),
        (
            "--rfc2136-tsig-secret-file",
            serve.provider_flags.rfc2136_tsig_secret_file.as_ref(),
        ),
        (
            "--pdns-api-key-file",
            serve.provider_flags.pdns_api_key_file.as_ref(),
        ),
    ];
    let install_doc = std::fs::read_to_string(repo().join("docs/install.md")).unwrap_or_default();
    for (flag, path) in files
        .iter()
        .filter_map(|(flag, path)| Some((flag, (*path)?)))
    {
        let (_, secret) = secret_mount(install, flag, path);
        let secret_name = secret.secret_name.as_deref().unwrap();
        // A Secret this installation neither generates nor issues is created by hand: the
        // install guide must say how.
        let provided = install
            .secrets
            .iter()
            .any(|s| s.metadata.name.as_deref() == Some(secret_name))
            || install
                .certificates
                .iter()
                .any(|c| c.spec.secret_name == secret_name);
        if !provided {
            assert!(
                install_doc.contains(&format!("create secret generic {secret_name} ")),
                "{origin}: docs/install.md must show how to create Secret {secret_name}"
            );
        }
    }
    let ports = container.ports.as_deref().unwrap_or_default();
    if serve.sync {
        assert!(
            !serve.provider_flags.zones.is_empty()
                || !serve.provider_flags.rfc2136_zones.is_empty(),
            "{origin}: in a cluster the zones cannot be inferred: set --zone"
        );
        match serve.provider {
            gateway_dns::cli::ProviderKind::Rfc2136 => {
                assert!(
                    serve.provider_flags.rfc2136_server.is_some(),
                    "{origin}: --rfc2136-server"
                );
                assert!(
                    serve.provider_flags.rfc2136_tsig_key_name.is_some()
                        && serve.provider_flags.rfc2136_tsig_secret_file.is_some(),
                    "{origin}: TSIG key and secret file"
                );
            }
            gateway_dns::cli::ProviderKind::Pdns => {
                assert!(
                    serve.provider_flags.pdns_server.is_some()
                        && serve.provider_flags.pdns_api_key_file.is_some(),
                    "{origin}: PowerDNS URL and API key file"
                );
            }
            gateway_dns::cli::ProviderKind::Webhook => {
                assert!(
                    serve.provider_flags.webhook_provider_url.is_some(),
                    "{origin}: --webhook-provider-url"
                );
            }
            // Writes to the cluster it runs in, with the base Role.
            gateway_dns::cli::ProviderKind::Dnsendpoint => {}
            gateway_dns::cli::ProviderKind::Embedded => {
                assert!(
                    serve.dns_listen.ip().is_unspecified(),
                    "{origin}: the embedded server must listen beyond loopback in a pod"
                );
                assert!(
                    !serve.leader_election,
                    "{origin}: every replica fills its own embedded server, so none may wait for a Lease"
                );
                for protocol in ["UDP", "TCP"] {
                    let port = ports
                        .iter()
                        .find(|p| {
                            p.container_port == i32::from(serve.dns_listen.port())
                                && p.protocol.as_deref() == Some(protocol)
                        })
                        .unwrap_or_else(|| {
                            panic!(
                                "{origin}: container port {} {protocol}",
                                serve.dns_listen.port()
                            )
                        });
                    let name = IntOrString::String(port.name.clone().expect("named DNS port"));
                    assert!(
                        install
                            .services
                            .iter()
                            .flat_map(|s| s
                                .spec
                                .iter()
                                .flat_map(|spec| spec.ports.iter().flatten()))
                            .any(|p| p.target_port.as_ref() == Some(&name)
                                && p.protocol.as_deref() == Some(protocol)),
                        "{origin}: a Service forwards DNS over {protocol}"
                    );
                }
            }
        }
    }
    // The NetworkPolicy admits exactly the ports the container listens on.
    let policy = install.network_policies.first().unwrap();
    let admitted: BTreeSet<(i32, String)> = policy
        .spec
        .iter()
        .flat_map(|spec| spec.ingress.iter().flatten())
        .flat_map(|rule| rule.ports.iter().flatten())
        .map(|p| {
            (
                container_port(container, p.port.as_ref().expect("port")),
                p.protocol.clone().unwrap_or_else(|| "TCP".into()),
            )
        })
        .collect();
    let listening: BTreeSet<(i32, String)> = ports
        .iter()
        .map(|p| {
            (
                p.container_port,
                p.protocol.clone().unwrap_or_else(|| "TCP".into()),
            )
        })
        .collect();
    assert_eq!(
        admitted, listening,
        "{origin}: NetworkPolicy admits the container's ports only"
    );
    assert!(
        policy
            .spec
            .iter()
            .flat_map(|spec| spec.policy_types.iter().flatten())
            .any(|t| t == "Ingress"),
        "{origin}: NetworkPolicy restricts ingress"
    );
    // Metrics only from the monitoring namespaces: every rule admitting the metrics port names
    // its sources by namespace selector.
    let metrics_rules: Vec<_> = policy
        .spec
        .iter()
        .flat_map(|spec| spec.ingress.iter().flatten())
        .filter(|rule| {
            rule.ports.iter().flatten().any(|p| {
                p.port.as_ref().is_some_and(|port| {
                    ports.iter().any(|c| {
                        c.name.as_deref() == Some("metrics")
                            && container_port(container, port) == c.container_port
                    })
                })
            })
        })
        .collect();
    assert!(
        !metrics_rules.is_empty(),
        "{origin}: a rule admits the metrics port"
    );
    for rule in metrics_rules {
        let sources = rule.from.as_deref().unwrap_or_default();
        assert!(
            !sources.is_empty() && sources.iter().all(|peer| peer.namespace_selector.is_some()),
            "{origin}: metrics only from selected namespaces"
        );
    }
}

fn check_rbac(install: &Install, namespace: &str, serve: &ServeArgs) {
    let origin = &install.origin;
    let service_account =
        crate::support::install::only(&install.service_accounts, origin, "ServiceAccount");
    let account_name = service_account.metadata.name.clone().unwrap();
    assert_eq!(
        pod_spec(install).service_account_name.as_deref(),
        Some(account_name.as_str()),
        "{origin}: the pod runs as the ServiceAccount"
    );
    // --policy-reports has a ClusterRole of its own (components/policy-reports), present
    // exactly when the flag is on; the main ClusterRole is the other one.
    let is_reports = |name: Option<&String>| name.is_some_and(|n| n.ends_with("-policy-reports"));
    let (reports_roles, main_roles): (Vec<_>, Vec<_>) = install
        .cluster_roles
        .iter()
        .cloned()
        .partition(|role| is_reports(role.metadata.name.as_ref()));
    let (reports_bindings, main_bindings): (Vec<_>, Vec<_>) = install
        .cluster_role_bindings
        .iter()
        .cloned()
        .partition(|binding| is_reports(binding.metadata.name.as_ref()));
    assert_eq!(
        reports_roles.len(),
        usize::from(serve.policy_reports),
        "{origin}: the PolicyReport ClusterRole exists exactly with --policy-reports"
    );
    for role in &reports_roles {
        for rule in role.rules.iter().flatten() {
            assert_eq!(
                rule.api_groups.as_deref(),
                Some(&["wgpolicyk8s.io".to_string()][..])
            );
            assert_eq!(
                rule.resources.as_deref(),
                Some(&["policyreports".to_string()][..])
            );
            assert!(
                rule.verbs
                    .iter()
                    .all(|v| ["get", "list", "create", "patch", "delete"].contains(&v.as_str())),
                "{origin}: PolicyReport verbs (feedback/cluster.rs: list, server-side apply, delete)"
            );
        }
        let binding = reports_bindings
            .iter()
            .find(|b| b.role_ref.name.as_str() == role.metadata.name.as_deref().unwrap_or(""))
            .unwrap_or_else(|| panic!("{origin}: no binding of the PolicyReport ClusterRole"));
        let subjects = binding.subjects.as_deref().unwrap_or_default();
        assert!(
            subjects.len() == 1 && subjects[0].name == account_name,
            "{origin}: PolicyReport ClusterRoleBinding subject"
        );
    }
    let cluster_role = crate::support::install::only(&main_roles, origin, "ClusterRole");
    let rules = cluster_role.rules.as_deref().unwrap_or_default();
    let read = ["get", "list", "watch"];
    for kind in ObjectKind::ALL {
        assert!(
            rules.iter().any(|rule| {
                rule.api_groups.iter().flatten().any(|g| g == kind.group())
                    && rule.resources.iter().flatten().any(|r| r == kind.plural())
                    && read.iter().all(|verb| rule.verbs.iter().any(|v| v == verb))
            }),
            "{origin}: the ClusterRole lets the binary get/list/watch {}",
            kind.plural()
        );
    }
    let watched: BTreeSet<(&str, &str)> = ObjectKind::ALL
        .iter()
        .map(|k| (k.group(), k.plural()))
        .collect();
    for rule in rules {
        let everything = rule
            .verbs
            .iter()
            .chain(rule.api_groups.iter().flatten())
            .chain(rule.resources.iter().flatten());
        assert!(
            everything.clone().all(|word| !word.contains('*')),
            "{origin}: no wildcard grants: {rule:?}"
        );
        assert!(rule.resource_names.is_none(), "{origin}: {rule:?}");
        if let Some(urls) = &rule.non_resource_urls {
            assert_eq!(rule.verbs, ["get"], "{origin}: discovery is read-only");
            assert!(urls.iter().all(|url| url == "/apis" || url.starts_with(&format!("/apis/{GATEWAY_GROUP}"))), "{origin}: only Gateway API discovery: {urls:?}");
            continue;
        }
        for group in rule.api_groups.iter().flatten() {
            for resource in rule.resources.iter().flatten() {
                if resource == "events" {
                    assert!(
                        rule.verbs.iter().all(|v| v == "create" || v == "patch"),
                        "{origin}: events: create/patch only"
                    );
                } else {
                    assert!(
                        watched.contains(&(group.as_str(), resource.as_str())),
                        "{origin}: {group}/{resource} is not a kind the binary watches"
                    );
                    assert!(
                        rule.verbs.iter().all(|v| read.contains(&v.as_str())),
                        "{origin}: read-only on {resource}"
                    );
                }
            }
        }
    }
    // Two Roles, both in the installation's namespace: the Lease, and the DNSEndpoint objects
    // of --provider dnsendpoint.
    assert_eq!(install.roles.len(), 2, "{origin}: expected the two Roles");
    for role in &install.roles {
        assert_eq!(
            role.metadata.namespace.as_deref(),
            Some(namespace),
            "{origin}: Role namespace"
        );
    }
    let named = |name: &str| {
        install
            .roles
            .iter()
            .find(|r| r.metadata.name.as_deref() == Some(name))
            .unwrap_or_else(|| panic!("{origin}: no Role {name}"))
    };
    let endpoints_role = named("gateway-dns-dnsendpoints");
    for rule in endpoints_role.rules.iter().flatten() {
        assert_eq!(
            rule.api_groups.as_deref(),
            Some(&["externaldns.k8s.io".to_string()][..]),
            "{origin}: DNSEndpoint Role: externaldns.k8s.io only"
        );
        assert_eq!(
            rule.resources.as_deref(),
            Some(&["dnsendpoints".to_string()][..]),
            "{origin}: DNSEndpoint Role: dnsendpoints only (not their status)"
        );
        assert!(
            rule.verbs
                .iter()
                .all(|v| ["get", "list", "create", "patch", "delete"].contains(&v.as_str())),
            "{origin}: DNSEndpoint verbs (dnsendpoint.rs: list, server-side apply, delete)"
        );
    }
    let role = named("gateway-dns-leases");
    assert_eq!(
        serve.leader_election_namespace, namespace,
        "{origin}: the Lease is in the Role's namespace"
    );
    let mut lease_verbs = BTreeSet::new();
    for rule in role.rules.iter().flatten() {
        match rule.resource_names.as_deref() {
            None => assert_eq!(
                rule.verbs,
                ["create"],
                "{origin}: only create is not limited to the Lease's name"
            ),
            Some(names) => assert_eq!(
                names,
                std::slice::from_ref(&serve.lease_name),
                "{origin}: Role limited to --lease-name"
            ),
        }
        lease_verbs.extend(rule.verbs.iter().map(String::as_str));
        assert_eq!(
            rule.api_groups.as_deref(),
            Some(&["coordination.k8s.io".to_string()][..]),
            "{origin}: Role: leases only"
        );
        assert_eq!(
            rule.resources.as_deref(),
            Some(&["leases".to_string()][..]),
            "{origin}: Role: leases only"
        );
    }
    assert_eq!(
        lease_verbs,
        BTreeSet::from(["get", "create", "update"]),
        "{origin}: lease verbs (leader.rs: get, create, replace)"
    );
    let subject_is_account = |subjects: &Option<Vec<k8s_openapi::api::rbac::v1::Subject>>| {
        let subjects = subjects.as_deref().unwrap_or_default();
        subjects.len() == 1
            && subjects[0].kind == "ServiceAccount"
            && subjects[0].name == account_name
            && subjects[0].namespace.as_deref() == Some(namespace)
    };
    let cluster_binding =
        crate::support::install::only(&main_bindings, origin, "ClusterRoleBinding");
    assert_eq!(cluster_binding.role_ref.kind, "ClusterRole");
    assert_eq!(
        Some(&cluster_binding.role_ref.name),
        cluster_role.metadata.name.as_ref(),
        "{origin}: ClusterRoleBinding → ClusterRole"
    );
    assert!(
        subject_is_account(&cluster_binding.subjects),
        "{origin}: ClusterRoleBinding subject"
    );
    assert_eq!(
        install.role_bindings.len(),
        install.roles.len(),
        "{origin}: one RoleBinding per Role"
    );
    for role in &install.roles {
        let binding = install
            .role_bindings
            .iter()
            .find(|b| {
                b.role_ref.kind == "Role" && Some(&b.role_ref.name) == role.metadata.name.as_ref()
            })
            .unwrap_or_else(|| {
                panic!("{origin}: no RoleBinding for Role {:?}", role.metadata.name)
            });
        assert!(
            subject_is_account(&binding.subjects),
            "{origin}: RoleBinding subject"
        );
    }
}

/// The local paths a kustomization refers to (resources, components, patch files).
fn kustomization_paths(kustomization: &Value) -> Vec<String> {
    let mut paths = Vec::new();
    for key in ["resources", "components"] {
        for entry in kustomization[key].as_array().into_iter().flatten() {
            paths.extend(entry.as_str().map(str::to_string));
        }
    }
    for patch in kustomization["patches"].as_array().into_iter().flatten() {
        paths.extend(patch["path"].as_str().map(str::to_string));
    }
    paths
}

#[test]
fn every_manifest_parses_into_its_kubernetes_type() {
    let all = manifest_docs(&manifests_dir());
    assert!(all.len() >= 11, "manifests found: {}", all.len());
    // Parsing is strict: an unknown field fails (see support::install::strict).
    let install = Install::from_docs("manifests/", &all);
    assert!(!install.deployments.is_empty() && !install.webhook_configurations.is_empty());

    // Every kustomization refers to files that exist, and every manifest file is used by one.
    let mut used = BTreeSet::new();
    for path in yaml_files(&manifests_dir())
        .into_iter()
        .filter(|p| is_kustomization(p))
    {
        let dir = path.parent().unwrap();
        let docs = yaml_docs(&relative(&path), &std::fs::read_to_string(&path).unwrap());
        let kustomization = &docs[0].value;
        let kind = kustomization["kind"].as_str().unwrap_or_default();
        assert!(
            kind == "Kustomization" || kind == "Component",
            "{}: kind {kind}",
            relative(&path)
        );
        for entry in kustomization_paths(kustomization) {
            let target = dir.join(&entry);
            assert!(
                target.exists(),
                "{}: {entry} does not exist",
                relative(&path)
            );
            if target.is_file() {
                used.insert(target.canonicalize().unwrap());
            } else {
                assert!(
                    target.join("kustomization.yaml").is_file(),
                    "{}: {entry} is no kustomization",
                    relative(&path)
                );
            }
        }
    }
    for path in yaml_files(&manifests_dir())
        .into_iter()
        .filter(|p| !is_kustomization(p))
    {
        assert!(
            used.contains(&path.canonicalize().unwrap()),
            "{} is not listed in any kustomization",
            relative(&path)
        );
    }
}

#[test]
fn base_cross_references_hold() {
    check_installation(&base(), "Ignore");
}

/// The failure policy an overlay ends with: Fail when it adds the fail-closed component.
fn expected_failure_policy(overlay: &Path) -> &'static str {
    let text = std::fs::read_to_string(overlay.join("kustomization.yaml")).unwrap();
    if text
        .lines()
        .any(|line| line.trim_start().starts_with("- ") && line.contains("components/fail-closed"))
    {
        "Fail"
    } else {
        "Ignore"
    }
}

/// Copies the manifests and adds what the self-signed overlay needs: `gateway-dns certs`
/// output for the Service in the base.
fn prepared_manifests(base: &Install) -> tempfile::TempDir {
    let copy = tempfile::tempdir().unwrap();
    copy_tree(&manifests_dir(), copy.path());
    let service = base.service();
    run_certs(
        service.metadata.name.as_deref().unwrap(),
        service.metadata.namespace.as_deref().unwrap(),
        &copy.path().join("overlays/self-signed/certs"),
    );
    copy
}

#[test]
fn kustomize_output_of_base_and_every_overlay_holds_together() {
    if let Err(reason) = kustomize_tool() {
        notice(&format!(
            "SKIPPED kustomize builds of manifests/ (base and overlays): {reason}. The source \
             files were still parsed and cross-checked. Install kubectl (kustomize v5+) to run it."
        ));
        return;
    }
    let base = base();
    let copy = prepared_manifests(&base);
    let mut built = 0;
    for dir in kustomize_dirs() {
        let name = dir.strip_prefix(manifests_dir()).unwrap().to_path_buf();
        let install = Install::from_docs(
            &format!("kustomize {}", name.display()),
            &kustomize(&copy.path().join(&name)),
        );
        let is_base = name == Path::new("base");
        check_installation(
            &install,
            if is_base {
                "Ignore"
            } else {
                expected_failure_policy(&dir)
            },
        );
        built += 1;
        if is_base {
            continue;
        }
        // Every overlay supplies the TLS Secret the Deployment mounts and the webhook's CA.
        let tls_secret = tls_secret_name(&install);
        let configuration = install.webhook_configuration();
        let injected = configuration
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("cert-manager.io/inject-ca-from"));
        if let Some(from) = injected {
            check_cert_manager(&install, from, &tls_secret);
        } else {
            check_self_signed(
                &install,
                &tls_secret,
                &copy.path().join(&name).join("certs"),
            );
        }
    }
    assert!(built >= 3, "base and at least two overlays built");
}

/// The Secret mounted where `--tls-cert` points.
fn tls_secret_name(install: &Install) -> String {
    let serve = parse_serve_args(&effective_args(install), &install.origin);
    let cert = serve.tls_cert.expect("--tls-cert");
    let (_, secret) = secret_mount(install, "--tls-cert", &cert);
    secret
        .secret_name
        .clone()
        .expect("the TLS Secret has a name")
}

fn check_cert_manager(install: &Install, inject_from: &str, tls_secret: &str) {
    let origin = &install.origin;
    let (namespace, name) = inject_from
        .split_once('/')
        .expect("inject-ca-from is NAMESPACE/NAME");
    let certificate = install
        .certificates
        .iter()
        .find(|c| {
            c.metadata.name.as_deref() == Some(name)
                && c.metadata.namespace.as_deref() == Some(namespace)
        })
        .unwrap_or_else(|| {
            panic!("{origin}: inject-ca-from names Certificate {inject_from}, which is not there")
        });
    assert_eq!(
        certificate.spec.secret_name, tls_secret,
        "{origin}: the Certificate writes the Secret the Deployment mounts"
    );
    let dns_names = certificate.spec.dns_names.clone().unwrap_or_default();
    let host = webhook_service_host(install);
    assert!(
        dns_names.contains(&host),
        "{origin}: Certificate dnsNames {dns_names:?} lack {host}"
    );
    let service = install.service();
    let sans = gateway_dns::webhook::certs::service_sans(
        service.metadata.name.as_deref().unwrap(),
        service.metadata.namespace.as_deref().unwrap(),
    );
    assert!(
        dns_names.iter().all(|n| sans.contains(n)),
        "{origin}: dnsNames {dns_names:?} are names `gateway-dns certs` uses too ({sans:?})"
    );
    assert_ne!(
        certificate.spec.is_ca,
        Some(true),
        "{origin}: the serving certificate is not a CA"
    );
    // Its issuer chain exists: serving ← CA issuer ← CA certificate ← self-signed issuer.
    let issuer = |name: &str| {
        install
            .issuers
            .iter()
            .find(|i| i.metadata.name.as_deref() == Some(name))
            .unwrap_or_else(|| panic!("{origin}: Issuer {name} is missing"))
    };
    let ca_issuer = issuer(&certificate.spec.issuer_ref.name);
    let ca_secret = &ca_issuer.spec.ca.as_ref().expect("a CA issuer").secret_name;
    let ca_certificate = install
        .certificates
        .iter()
        .find(|c| &c.spec.secret_name == ca_secret)
        .unwrap_or_else(|| panic!("{origin}: no Certificate writes the CA Secret {ca_secret}"));
    assert_eq!(
        ca_certificate.spec.is_ca,
        Some(true),
        "{origin}: CA certificate isCA"
    );
    assert!(
        issuer(&ca_certificate.spec.issuer_ref.name)
            .spec
            .self_signed
            .is_some(),
        "{origin}: the CA is self-signed"
    );
}

fn check_self_signed(install: &Install, tls_secret: &str, certs_dir: &Path) {
    let origin = &install.origin;
    let secret = install
        .secrets
        .iter()
        .find(|s| s.metadata.name.as_deref() == Some(tls_secret))
        .unwrap_or_else(|| {
            panic!("{origin}: the mounted Secret {tls_secret} is neither generated nor issued")
        });
    assert_eq!(
        secret.type_.as_deref(),
        Some("kubernetes.io/tls"),
        "{origin}: Secret type"
    );
    let data = secret.data.clone().unwrap_or_default();
    for file in [
        gateway_dns::webhook::certs::CA_CERT_FILE,
        gateway_dns::webhook::certs::TLS_CERT_FILE,
        gateway_dns::webhook::certs::TLS_KEY_FILE,
    ] {
        let on_disk = std::fs::read(certs_dir.join(file)).unwrap();
        assert_eq!(
            data.get(file).map(|b| &b.0),
            Some(&on_disk),
            "{origin}: Secret key {file} = `gateway-dns certs` output"
        );
    }
    let bundle = webhook(install)
        .client_config
        .ca_bundle
        .as_ref()
        .expect("caBundle");
    assert_eq!(
        bundle.0,
        std::fs::read(certs_dir.join(gateway_dns::webhook::certs::CA_CERT_FILE)).unwrap(),
        "{origin}: caBundle = ca.crt"
    );
}

/// A running binary with the Deployment's args, its certificates from `gateway-dns certs` for
/// the webhook's Service, and the admission test cluster as its (files) source.
struct Deployed {
    binary: RunningBinary,
    ca_pem: String,
    host: String,
    _dir: tempfile::TempDir,
}

impl Deployed {
    fn start(install: &Install, certs: impl FnOnce(&Path)) -> Deployed {
        Self::start_with(install, certs, Adaptation::default())
    }

    /// Starts the binary; `adaptation` may add mounts, env overrides and arguments (its
    /// cluster is replaced by the admission test cluster).
    fn start_with(
        install: &Install,
        certs: impl FnOnce(&Path),
        mut adaptation: Adaptation,
    ) -> Deployed {
        let dir = tempfile::tempdir().unwrap();
        let tls_dir = dir.path().join("tls");
        certs(&tls_dir);
        let cluster = dir.path().join("cluster");
        std::fs::create_dir_all(&cluster).unwrap();
        std::fs::copy(
            repo().join("tests/fixtures/admission/cluster.yaml"),
            cluster.join("cluster.yaml"),
        )
        .unwrap();
        let args = effective_args(install);
        let mount = install
            .container()
            .volume_mounts
            .iter()
            .flatten()
            .find(|m| flag_value(&args, "--tls-cert").is_some_and(|c| c.starts_with(&m.mount_path)))
            .expect("TLS mount")
            .mount_path
            .clone();
        adaptation.mounts.push((mount, tls_dir.clone()));
        adaptation.cluster = cluster;
        let binary = RunningBinary::start(
            &install.args(),
            &install.env(),
            &adaptation,
            dir.path().join("serve.log"),
        );
        Deployed {
            binary,
            ca_pem: std::fs::read_to_string(
                tls_dir.join(gateway_dns::webhook::certs::CA_CERT_FILE),
            )
            .unwrap_or_default(),
            host: webhook_service_host(install),
            _dir: dir,
        }
    }

    async fn https(&self, port: u16) -> Option<HttpsConnection> {
        HttpsConnection::connect(self.binary.addr_for(port), &self.ca_pem, &self.host)
            .await
            .ok()
    }

    /// GETs `path` on the listener the manifest puts on `port` (HTTPS or plain HTTP).
    async fn get(&self, port: u16, https: bool, path: &str) -> Option<(u16, String)> {
        if https {
            let mut connection = self.https(port).await?;
            let reply = connection
                .send(Method::GET, path, &[], Vec::new())
                .await
                .ok()?;
            Some((
                reply.status.as_u16(),
                String::from_utf8_lossy(&reply.body).into_owned(),
            ))
        } else {
            http_get(self.binary.addr_for(port), path).await
        }
    }

    /// Waits until the readiness probe, as the manifest defines it, passes.
    async fn wait_ready(&mut self, install: &Install) {
        let (port, https, path) = probe_target(
            install.container(),
            install.container().readiness_probe.as_ref().unwrap(),
        );
        let ready = eventually(READY_WITHIN, || async {
            self.get(port, https, &path)
                .await
                .filter(|(status, _)| *status == 200)
        })
        .await;
        self.binary.assert_running();
        assert!(
            ready.is_some(),
            "readiness probe {path} never passed: {}",
            self.binary.log()
        );
    }

    /// POSTs an AdmissionReview where the webhook configuration says, as kube-apiserver does.
    async fn review(&self, install: &Install, review: &Value) -> Value {
        let client = webhook(install).client_config.service.as_ref().unwrap();
        let service_port = install
            .service()
            .spec
            .as_ref()
            .unwrap()
            .ports
            .iter()
            .flatten()
            .find(|p| Some(p.port) == client.port)
            .unwrap();
        let port = container_port(
            install.container(),
            service_port.target_port.as_ref().unwrap(),
        );
        let path = format!(
            "{}?timeout={}s",
            client.path.as_deref().unwrap(),
            webhook(install).timeout_seconds.unwrap()
        );
        let mut connection = self
            .https(u16::try_from(port).unwrap())
            .await
            .expect("connect to the webhook");
        let reply = connection
            .send(
                Method::POST,
                &path,
                &[("content-type", "application/json")],
                serde_json::to_vec(review).unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(
            reply.status,
            StatusCode::OK,
            "POST {path}: {}",
            String::from_utf8_lossy(&reply.body)
        );
        reply.json()
    }
}

/// Port number, HTTPS or not, and path of an HTTP probe.
fn probe_target(container: &Container, probe: &Probe) -> (u16, bool, String) {
    let get = probe.http_get.as_ref().unwrap();
    let port = u16::try_from(container_port(container, &get.port)).unwrap();
    (
        port,
        get.scheme.as_deref() == Some("HTTPS"),
        get.path.clone().unwrap(),
    )
}

fn read_json(path: &Path) -> Value {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{}: {error}", relative(path)));
    serde_json::from_str(&text).unwrap_or_else(|error| panic!("{}: {error}", relative(path)))
}

fn certs_for_service(install: &Install) -> impl FnOnce(&Path) + '_ {
    move |dir: &Path| {
        let client = webhook(install).client_config.service.as_ref().unwrap();
        run_certs(&client.name, &client.namespace, dir);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_serves_what_the_manifests_call() {
    let install = base();
    let mut deployed = Deployed::start(&install, certs_for_service(&install));
    deployed.wait_ready(&install).await;

    let (port, https, path) = probe_target(
        install.container(),
        install.container().liveness_probe.as_ref().unwrap(),
    );
    let (status, _) = deployed
        .get(port, https, &path)
        .await
        .expect("liveness probe answers");
    assert_eq!(status, 200, "liveness probe {path}");

    // The webhook path, Service host (SNI) and certificates as kube-apiserver uses them.
    let review = read_json(&repo().join("tests/fixtures/admission/reviews/hostname-conflict.json"));
    let answer = deployed.review(&install, &review).await;
    assert_eq!(answer["response"]["uid"], review["request"]["uid"]);
    assert_eq!(answer["response"]["allowed"], false, "{answer}");
    assert_eq!(
        answer["response"]["status"]["details"]["causes"][0]["reason"],
        "HostnameConflict"
    );

    // The metrics port (the Service's and the container's) serves Prometheus text.
    let metrics_port = u16::try_from(container_port(
        install.container(),
        &IntOrString::String("metrics".into()),
    ))
    .unwrap();
    let (status, text) = http_get(deployed.binary.addr_for(metrics_port), "/metrics")
        .await
        .expect("metrics answer");
    assert_eq!(status, 200);
    assert!(
        text.contains("gateway_dns_admission_requests_total{outcome=\"denied\"} 1"),
        "{text}"
    );
    deployed.binary.assert_running();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn self_signed_overlay_certificates_satisfy_the_api_server_client() {
    if let Err(reason) = kustomize_tool() {
        notice(&format!(
            "SKIPPED the self-signed overlay served by the binary: {reason}."
        ));
        return;
    }
    let base = base();
    let copy = prepared_manifests(&base);
    let install = Install::from_docs(
        "kustomize overlays/self-signed",
        &kustomize(&copy.path().join("overlays/self-signed")),
    );
    // The files the Deployment would mount: the generated Secret's keys, written out; the client
    // trusts only the caBundle of the webhook configuration.
    let secret_name = tls_secret_name(&install);
    let secret = install
        .secrets
        .iter()
        .find(|s| s.metadata.name.as_deref() == Some(&secret_name))
        .unwrap()
        .clone();
    let mut deployed = Deployed::start(&install, |dir: &Path| {
        std::fs::create_dir_all(dir).unwrap();
        for (key, bytes) in secret.data.clone().unwrap_or_default() {
            std::fs::write(dir.join(key), bytes.0).unwrap();
        }
    });
    deployed.ca_pem =
        String::from_utf8(webhook(&install).client_config.ca_bundle.clone().unwrap().0).unwrap();
    deployed.wait_ready(&install).await;
    let review = read_json(&repo().join("tests/fixtures/admission/reviews/no-parent-refs.json"));
    let answer = deployed.review(&install, &review).await;
    assert_eq!(answer["response"]["allowed"], true, "{answer}");
    deployed.binary.assert_running();
}

/// `HostnameConflict` → `hostname-conflict`: the admission fixture for that reason.
fn fixture_name(reason: Reason) -> String {
    let mut name = String::new();
    for (index, character) in reason.as_str().chars().enumerate() {
        if character.is_uppercase() && index > 0 {
            name.push('-');
        }
        name.push(character.to_ascii_lowercase());
    }
    name
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn troubleshooting_shows_the_messages_the_webhook_really_sends() {
    let install = base();
    let doc_path = repo().join("docs/troubleshooting.md");
    let doc = std::fs::read_to_string(&doc_path).unwrap();
    let webhook_name = &webhook(&install).name;
    assert!(
        doc.contains(&format!(
            "admission webhook \"{webhook_name}\" denied the request"
        )),
        "docs/troubleshooting.md shows kubectl's denial line with the webhook's name {webhook_name}"
    );
    // Hostname ownership is off by default; the page shows its message as an installation that
    // turned it on sees it (every other example is about routes of one namespace, unchanged).
    let ownership = Adaptation {
        extra_args: vec!["--hostname-ownership=namespace".to_owned()],
        ..Adaptation::default()
    };
    let mut deployed = Deployed::start_with(&install, certs_for_service(&install), ownership);
    deployed.wait_ready(&install).await;
    let mut stale = Vec::new();
    for reason in Reason::ALL {
        assert!(
            doc.contains(&format!("## {}", reason.as_str())),
            "docs/troubleshooting.md has no section for {reason}"
        );
        // Found by the Lease holder's probes, never by the webhook: its section has no
        // admission message to compare. HostnameOwnedInZone needs a zone another owner wrote
        // to: the two-cluster test (`tests/cluster/zones.rs`) compares its message.
        if matches!(
            reason,
            Reason::TargetUnhealthy | Reason::HostnameOwnedInZone
        ) {
            continue;
        }
        let fixture = repo().join(format!(
            "tests/fixtures/admission/reviews/{}.json",
            fixture_name(reason)
        ));
        let answer = deployed.review(&install, &read_json(&fixture)).await;
        let response = &answer["response"];
        // kubectl prints a warning as `Warning: TEXT` and a denial after its own prefix
        // (`... denied the request: `), one line per finding.
        let mut shown: Vec<String> = response["warnings"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|w| w.as_str())
            .filter(|w| w.starts_with(&format!("{reason}: ")))
            .map(|w| format!("Warning: {w}"))
            .collect();
        shown.extend(
            response["status"]["message"]
                .as_str()
                .unwrap_or_default()
                .lines()
                .filter(|line| line.starts_with(&format!("{reason}: ")))
                .map(|line| format!("denied the request: {line}")),
        );
        assert!(
            !shown.is_empty(),
            "{}: no {reason} finding in {answer}",
            relative(&fixture)
        );
        stale.extend(
            shown
                .into_iter()
                .filter(|line| !doc.contains(line.as_str())),
        );
    }
    assert!(
        stale.is_empty(),
        "docs/troubleshooting.md does not show these messages the webhook sends today \
         (update its examples): {stale:#?}"
    );
}

#[test]
fn flags_reference_is_current() {
    let path = repo().join("docs/flags.md");
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        on_disk == gateway_dns::cmd::flags_doc::flags_markdown(),
        "docs/flags.md is stale: regenerate it with `{}` and commit it",
        gateway_dns::cmd::flags_doc::FLAGS_DOC_COMMAND
    );
}

/// README.md and every page under docs/.
fn docs_pages() -> Vec<(String, String)> {
    let mut pages = vec![repo().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).unwrap();
            (
                path.strip_prefix(repo()).unwrap().display().to_string(),
                text,
            )
        })
        .collect()
}

/// Long flags other tools take that the docs show, by tool: any other `--flag` in the docs must
/// be one of gateway-dns's own (or a hidden alias).
const OTHER_TOOLS_FLAGS: [(&str, &[&str]); 13] = [
    (
        "kubectl",
        &[
            "--client",
            "--field-selector",
            "--from-file",
            "--from-literal",
            "--overwrite",
            "--raw",
            "--replicas",
            "--type",
        ],
    ),
    (
        "cargo",
        &[
            "--all-targets",
            "--bench",
            "--bin",
            "--check",
            "--example",
            "--locked",
            "--path",
            "--release",
            "--test",
        ],
    ),
    // The test harness's own, after `cargo test … --`.
    ("libtest", &["--nocapture"]),
    ("curl", &["--cacert", "--data", "--resolve"]),
    // The side-by-side benchmark's own, after `cargo bench --bench peer_perf --`.
    (
        "peer_perf",
        &["--applies", "--burst", "--sizes", "--window", "--spawns"],
    ),
    (
        "helm",
        &[
            "--create-namespace",
            "--reuse-values",
            "--set",
            "--set-json",
        ],
    ),
    ("docker", &["--build-arg"]),
    // How the tests build the image (tests/control-plane/images.sh).
    ("buildah", &["--isolation", "--pull"]),
    // The revision and date of an image build.
    ("git", &["--format", "--short"]),
    // scripts/dev-cluster's own: a node, with the chart on it.
    ("dev-cluster", &["--node"]),
    (
        "kube-apiserver",
        &["--admission-control-config-file", "--event-ttl"],
    ),
    // Named where the docs compare external-dns's flags with ours.
    (
        "external-dns",
        &[
            "--events",
            "--gateway-label-filter",
            "--gateway-listener-sets",
            "--managed-record-types",
            "--min-event-sync-interval",
            "--pdns-api-key",
            "--registry",
            "--rfc2136-axfr",
            "--rfc2136-tsig-keyname",
            "--rfc2136-tsig-secret",
            "--rfc2136-tsig-secret-alg",
            "--source",
            "--txt-encrypt-aes-key",
        ],
    ),
    // docs/flags.md's own prose: `--flag` and `--flag=false`.
    ("placeholder", &["--flag"]),
];

/// Every `--flag` token of a text (a trailing `=value` or `[=BOOL]` left off).
fn long_flags(text: &str) -> BTreeSet<String> {
    let bytes = text.as_bytes();
    let mut flags = BTreeSet::new();
    let mut i = 0;
    while let Some(offset) = text[i..].find("--") {
        let start = i + offset;
        let boundary =
            start == 0 || !(bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'-');
        let name_len = text[start + 2..]
            .bytes()
            .take_while(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
            .count();
        if boundary && name_len > 0 && bytes[start + 2].is_ascii_lowercase() {
            flags.insert(
                text[start..start + 2 + name_len]
                    .trim_end_matches('-')
                    .to_owned(),
            );
        }
        i = start + 2 + name_len;
    }
    flags
}

/// The exit codes a subcommand's `--help` declares (`  N  meaning` lines under "Exit status:").
fn declared_exit_codes(subcommand: &str) -> BTreeSet<u8> {
    let mut cli = Cli::command();
    cli.build();
    let help = cli
        .find_subcommand(subcommand)
        .and_then(|c| c.get_after_help())
        .map(|h| h.to_string())
        .unwrap_or_default();
    assert!(
        help.contains("Exit status:"),
        "{subcommand} --help has its exit status"
    );
    help.lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("  ")?;
            let (code, meaning) = rest.split_once("  ")?;
            (!meaning.trim().is_empty())
                .then(|| code.trim().parse().ok())
                .flatten()
        })
        .collect()
}

/// The single-digit numbers of a sentence: the codes an "exit" sentence names.
fn digits(sentence: &str) -> BTreeSet<u8> {
    let bytes = sentence.as_bytes();
    (0..bytes.len())
        .filter(|&i| bytes[i].is_ascii_digit())
        .filter(|&i| i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'.'))
        .filter(|&i| {
            i + 1 == bytes.len()
                || !(bytes[i + 1].is_ascii_alphanumeric()
                    || (bytes[i + 1] == b'.' && bytes.get(i + 2).is_some_and(u8::is_ascii_digit)))
        })
        .map(|i| bytes[i] - b'0')
        .collect()
}

#[test]
fn docs_name_only_flags_and_exit_codes_the_binary_has() {
    let mut own = BTreeSet::new();
    let mut cli = Cli::command();
    cli.build();
    // The top-level flags (`--version`, `--help`) are gateway-dns's too.
    for argument in cli.get_arguments() {
        if let Some(long) = argument.get_long() {
            own.insert(format!("--{long}"));
        }
    }
    // Every subcommand's, and theirs (`zone owners`, `zone release`).
    let mut pending: Vec<&clap::Command> = cli.get_subcommands().collect();
    while let Some(subcommand) = pending.pop() {
        pending.extend(subcommand.get_subcommands());
        for argument in subcommand.get_arguments() {
            if let Some(long) = argument.get_long() {
                own.insert(format!("--{long}"));
            }
            for alias in argument.get_all_aliases().unwrap_or_default() {
                own.insert(format!("--{alias}"));
            }
        }
    }
    let others: BTreeSet<String> = OTHER_TOOLS_FLAGS
        .iter()
        .flat_map(|(_, flags)| flags.iter().map(|f| (*f).to_owned()))
        .collect();
    let overlap: Vec<&String> = others.intersection(&own).collect();
    assert!(
        overlap.is_empty(),
        "listed as other tools' flags but ours: {overlap:?}"
    );
    let pages = docs_pages();
    let mut unknown = Vec::new();
    for (page, text) in &pages {
        for flag in long_flags(text) {
            if !own.contains(&flag) && !others.contains(&flag) {
                unknown.push(format!("{page}: {flag}"));
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "flags the docs name but gateway-dns does not have: {unknown:#?}"
    );

    // Exit codes: every code a sentence about exiting names is declared by some --help, and
    // the pages that spell out a subcommand's exit status name exactly its codes.
    let check = declared_exit_codes("check");
    let serve = declared_exit_codes("serve");
    let certs = declared_exit_codes("certs");
    let explain = declared_exit_codes("explain");
    assert_eq!(check, BTreeSet::from([0, 1, 2]));
    assert_eq!(serve, BTreeSet::from([0, 1, 2, 3]));
    assert_eq!(explain, BTreeSet::from([0, 1, 2]));
    let all: BTreeSet<u8> = check
        .iter()
        .chain(&serve)
        .chain(&certs)
        .chain(&explain)
        .copied()
        .collect();
    let mut spelled_out = Vec::new();
    for (page, text) in &pages {
        let flat = text.replace('\n', " ");
        for sentence in flat.split(". ") {
            let lower = sentence.to_lowercase();
            if !(lower.contains("exit status")
                || lower.contains("exits ")
                || lower.contains("exit code"))
            {
                continue;
            }
            let named = digits(sentence);
            assert!(
                named.is_subset(&all),
                "{page}: exit codes {named:?} not declared by any --help: {sentence}"
            );
            if sentence.contains("Exit status") {
                spelled_out.push((page.clone(), sentence.to_owned(), named));
            }
        }
    }
    for (page, subcommand, codes) in [
        ("README.md", "check", &check),
        ("docs/rollout.md", "check", &check),
        ("docs/migrating-from-external-dns.md", "serve", &serve),
    ] {
        let (_, sentence, named) = spelled_out
            .iter()
            .find(|(p, _, _)| p == page)
            .unwrap_or_else(|| panic!("{page} spells out the exit status of {subcommand}"));
        assert_eq!(named, codes, "{page}: {sentence}");
    }
}

#[test]
fn deployment_resources_are_the_ones_the_sizing_table_states() {
    let install = base();
    let resources = pod_spec(&install).containers[0]
        .resources
        .as_ref()
        .expect("the container states its resources");
    let quantity = |map: &Option<
        BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    >,
                    key: &str| {
        map.as_ref()
            .and_then(|m| m.get(key))
            .map(|q| q.0.clone())
            .unwrap_or_else(|| panic!("{key} is set"))
    };
    let install_md = std::fs::read_to_string(repo().join("docs/install.md")).unwrap();
    let sizing = &install_md[install_md.find("## Sizing").expect("a Sizing section")..];
    let sizing = &sizing[..sizing[3..]
        .find("\n## ")
        .map_or(sizing.len(), |end| end + 3)];
    for value in [
        quantity(&resources.requests, "cpu"),
        quantity(&resources.requests, "memory"),
        quantity(&resources.limits, "memory"),
    ] {
        assert!(
            sizing.contains(&format!("`{value}`")),
            "docs/install.md#sizing states {value}"
        );
    }
    // One table: the manifest cites it instead of repeating figures that could disagree.
    let deployment =
        std::fs::read_to_string(repo().join("manifests/base/deployment.yaml")).unwrap();
    assert!(deployment.contains("docs/install.md#sizing"));
    assert!(
        !deployment.contains(" MiB"),
        "no figures in deployment.yaml"
    );
    assert_eq!(sizing.matches("| routes |").count(), 1, "one sizing table");
}

#[test]
fn metrics_reference_names_every_series() {
    let doc = std::fs::read_to_string(repo().join("docs/metrics.md")).unwrap();
    // As a process starts: every family is described before it has series.
    let rendered = gateway_dns::metrics::Metrics::new().render();
    let mut families = 0;
    for line in rendered.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            families += 1;
            let row = doc
                .lines()
                .find(|l| l.contains(&format!("`{name}`")))
                .unwrap_or_else(|| panic!("docs/metrics.md does not describe {name}"));
            assert!(
                row.contains(kind),
                "docs/metrics.md: {name} is a {kind}: {row}"
            );
        }
    }
    assert!(families >= 20, "metrics rendered: {rendered}");
}

#[test]
fn docs_links_point_at_files_that_exist() {
    let mut files = vec![
        repo().join("README.md"),
        repo().join("certs/README.md"),
        repo().join("charts/gateway-dns/README.md"),
    ];
    files.extend(
        std::fs::read_dir(repo().join("docs"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "md")),
    );
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for (_, rest) in text.match_indices("](").map(|(i, _)| ((), &text[i + 2..])) {
            let target = rest.split(')').next().unwrap().split('#').next().unwrap();
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let resolved = file.parent().unwrap().join(target);
            assert!(
                resolved.exists(),
                "{}: link to {target} points nowhere",
                relative(&file)
            );
        }
    }
}

/// One Dockerfile instruction per logical line (continuations joined).
fn dockerfile_instructions() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(repo().join("Dockerfile")).unwrap();
    let mut instructions = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('#') && current.is_empty() || trimmed.is_empty() {
            continue;
        }
        match trimmed.strip_suffix('\\') {
            Some(part) => current.push_str(part),
            None => {
                current.push_str(trimmed);
                let (keyword, rest) = current
                    .split_once(char::is_whitespace)
                    .unwrap_or((&current, ""));
                instructions.push((keyword.to_uppercase(), rest.trim().to_string()));
                current.clear();
            }
        }
    }
    instructions
}

#[test]
fn dockerfile_agrees_with_the_binary_and_the_manifests() {
    let instructions = dockerfile_instructions();
    let all = |keyword: &str| -> Vec<String> {
        instructions
            .iter()
            .filter(|(k, _)| k == keyword)
            .map(|(_, v)| v.clone())
            .collect()
    };
    let binary_name = Cli::command().get_name().to_string();
    let built = PathBuf::from(env!("CARGO_BIN_EXE_gateway-dns"));
    assert_eq!(
        built.file_name().unwrap().to_string_lossy(),
        binary_name,
        "cargo's binary is the CLI's name"
    );

    // Build stage: the official Rust image at the crate's rust-version; final: distroless.
    let stages = all("FROM");
    assert!(stages.len() >= 2, "multi-stage: {stages:?}");
    assert!(
        stages[0].contains("docker.io/library/rust:"),
        "build in the official Rust image: {}",
        stages[0]
    );
    let cargo_toml = std::fs::read_to_string(repo().join("Cargo.toml")).unwrap();
    let rust_version = cargo_toml
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = "))
        .unwrap()
        .trim_matches('"');
    assert!(
        all("ARG").contains(&format!("RUST_VERSION={rust_version}")),
        "Dockerfile RUST_VERSION = Cargo.toml rust-version {rust_version}"
    );
    let last = stages.last().unwrap();
    assert!(
        last.starts_with("gcr.io/distroless/") && !last.contains(" AS "),
        "final image distroless: {last}"
    );

    let runs = all("RUN").join("\n");
    assert!(
        runs.contains(&format!("--bin {binary_name}"))
            && runs.contains("--locked")
            && runs.contains("--release"),
        "builds the binary: {runs}"
    );
    assert!(
        runs.contains("--mount=type=cache,target=/usr/local/cargo/registry"),
        "dependencies cached"
    );
    assert!(
        all("COPY")
            .iter()
            .any(|c| c.starts_with("--from=") && c.ends_with(&format!("/{binary_name}"))),
        "the binary is copied to /{binary_name}"
    );
    assert_eq!(
        all("ENTRYPOINT"),
        [format!("[\"/{binary_name}\"]")],
        "ENTRYPOINT"
    );

    // USER = the Deployment's runAsUser/runAsGroup, not root.
    let install = base();
    let pod_security = pod_spec(&install).security_context.clone().unwrap();
    let user = all("USER");
    assert_eq!(
        user.last().map(String::as_str),
        Some(
            format!(
                "{}:{}",
                pod_security.run_as_user.unwrap(),
                pod_security.run_as_group.unwrap()
            )
            .as_str()
        ),
        "Dockerfile USER = Deployment runAsUser:runAsGroup"
    );

    // EXPOSE = the ports of every listen address the binary has by default.
    let exposed: BTreeSet<u16> = all("EXPOSE")
        .join(" ")
        .split_whitespace()
        .map(|p| p.split('/').next().unwrap().parse().unwrap())
        .collect();
    let mut command = Cli::command();
    let serve = command.find_subcommand_mut("serve").unwrap();
    let default_ports: BTreeSet<u16> = serve
        .get_arguments()
        .filter_map(|a| a.get_default_values().first())
        .filter_map(|v| v.to_str()?.parse::<std::net::SocketAddr>().ok())
        .map(|addr| addr.port())
        .collect();
    assert!(
        default_ports.is_subset(&exposed),
        "every default listen port is exposed: {default_ports:?} vs {exposed:?}"
    );
    for port in install.container().ports.iter().flatten() {
        assert!(
            exposed.contains(&u16::try_from(port.container_port).unwrap()),
            "container port {} exposed",
            port.container_port
        );
    }
    // 5353 is the embedded DNS server's port (see docs): exposed whether or not a flag sets it.
    assert!(exposed.contains(&5353), "EXPOSE 5353 (embedded DNS)");

    // The build context: an allow-list that holds every source cargo needs and no keys.
    let ignore = std::fs::read_to_string(repo().join(".dockerignore")).unwrap();
    let allowed: Vec<&str> = ignore
        .lines()
        .filter_map(|l| l.trim().strip_prefix('!'))
        .collect();
    assert!(
        ignore.lines().any(|l| l.trim() == "*"),
        ".dockerignore starts from nothing"
    );
    for needed in ["Cargo.toml", "Cargo.lock", "build.rs", "src/"] {
        assert!(allowed.contains(&needed), ".dockerignore lets {needed} in");
    }
    // build.rs stamps the revision; without .git in the context it comes from a build argument.
    assert!(
        all("COPY")
            .iter()
            .any(|c| c.split_whitespace().any(|word| word == "build.rs")),
        "Dockerfile copies build.rs"
    );
    assert!(
        all("ARG")
            .iter()
            .any(|a| a.starts_with("GATEWAY_DNS_REVISION")),
        "Dockerfile takes the GATEWAY_DNS_REVISION build argument"
    );
    // Cargo looks for the file of a target whose table gives no `path` when it reads the
    // manifest, and fails the whole build when it is missing; a given path is read only when
    // that target is built, never by `cargo build --bin` (the node test's table gives one).
    let needs_its_folder = |section: &str| {
        cargo_toml.split(section).skip(1).any(|table| {
            let table = table.split("\n[").next().unwrap_or_default();
            !table
                .lines()
                .any(|line| line.trim_start().starts_with("path ="))
        })
    };
    for (section, dir) in [
        ("[[bench]]", "benches/"),
        ("[[test]]", "tests/"),
        ("[[example]]", "examples/"),
    ] {
        if needs_its_folder(section) {
            assert!(
                allowed.contains(&dir),
                "Cargo.toml declares {section}: .dockerignore must let {dir} in"
            );
            assert!(
                all("COPY")
                    .iter()
                    .any(|c| c.starts_with(dir.trim_end_matches('/'))),
                "Dockerfile copies {dir}"
            );
        }
    }
    assert!(
        allowed
            .iter()
            .all(|a| !a.contains("cert") && !a.contains("key")),
        "no certificate or key enters the image"
    );
}

#[test]
fn generated_keys_stay_out_of_git() {
    for dir in ["certs", "manifests/overlays/self-signed/certs"] {
        let ignore = std::fs::read_to_string(repo().join(dir).join(".gitignore"))
            .unwrap_or_else(|e| panic!("{dir}/.gitignore: {e}"));
        let rules: Vec<&str> = ignore
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .collect();
        assert_eq!(
            rules.first(),
            Some(&"*"),
            "{dir}/.gitignore ignores everything first"
        );
        assert!(
            rules
                .iter()
                .filter(|r| r.starts_with('!'))
                .all(|r| *r == "!.gitignore" || *r == "!README.md"),
            "{dir}/.gitignore lets only docs back in: {rules:?}"
        );
    }
    // No Secret in the manifests carries data: Secrets are referenced or generated, never committed.
    let docs: Vec<Doc> = manifest_docs(&manifests_dir());
    for doc in docs.iter().filter(|d| d.value["kind"] == "Secret") {
        assert!(
            doc.value.get("data").is_none() && doc.value.get("stringData").is_none(),
            "{}: a committed Secret value",
            doc.origin
        );
    }
}

/// The kustomize build of `overlays/NAME`, or None (and a notice) without kubectl.
fn built_overlay(name: &str) -> Option<Install> {
    if let Err(reason) = kustomize_tool() {
        notice(&format!(
            "SKIPPED the overlays/{name} run against a real server: {reason}."
        ));
        return None;
    }
    let copy = prepared_manifests(&base());
    Some(Install::from_docs(
        &format!("kustomize overlays/{name}"),
        &kustomize(&copy.path().join("overlays").join(name)),
    ))
}

/// Writes `content` as the file a flag points to, in a local stand-in for its mount; returns
/// the (mount path, local dir) pair for [`Adaptation::mounts`].
fn secret_file(install: &Install, path: &Path, content: &str, dir: &Path) -> (String, PathBuf) {
    let mount = install
        .container()
        .volume_mounts
        .iter()
        .flatten()
        .find(|mount| path.starts_with(&mount.mount_path))
        .expect("the secret file is on a volume")
        .mount_path
        .clone();
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join(path.strip_prefix(&mount).unwrap()), content).unwrap();
    (mount, dir.to_path_buf())
}

/// `--once` with an overlay's own configuration, but for its provider's secret file (written
/// from `secret` where the flag at `secret_path` expects it) and `env_overrides` that point it at
/// the test's DNS server: it exits 0 having converged, and `dns` answers for the example route.
fn once_publishes(
    install: &Install,
    secret_path: &Path,
    secret: &str,
    env_overrides: BTreeMap<String, String>,
    dns: std::net::SocketAddr,
) {
    let secrets = tempfile::tempdir().unwrap();
    let adaptation = Adaptation {
        mounts: vec![secret_file(install, secret_path, secret, secrets.path())],
        env_overrides,
        extra_args: vec!["--once".into()],
        ..Adaptation::default()
    };
    let mut deployed = Deployed::start_with(install, certs_for_service(install), adaptation);
    let code = deployed.binary.wait_exit(Duration::from_secs(90));
    let log = deployed.binary.log();
    assert_eq!(code, Some(0), "gateway-dns --once did not converge: {log}");
    assert!(log.contains("converged"), "{log}");
    let answer = crate::support::dig::query(dns, "app.example.com", "A", false);
    assert_eq!(answer.data("A"), ["203.0.113.10"], "{answer:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bind_overlay_configuration_publishes_to_a_real_bind() {
    let Some(install) = built_overlay("bind") else {
        return;
    };
    let serve = parse_serve_args(&effective_args(&install), &install.origin);
    let bind = crate::support::bind::Bind::start(&serve.provider_flags.zones[0], "");
    // The test server's address and key name; everything else is the overlay's.
    let env_overrides = BTreeMap::from([
        ("GATEWAY_DNS_RFC2136_SERVER".into(), bind.addr().to_string()),
        (
            "GATEWAY_DNS_RFC2136_TSIG_KEY_NAME".into(),
            crate::support::bind::KEY_NAME.into(),
        ),
    ]);
    once_publishes(
        &install,
        serve
            .provider_flags
            .rfc2136_tsig_secret_file
            .as_ref()
            .unwrap(),
        crate::support::bind::SECRET,
        env_overrides,
        bind.addr(),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn powerdns_overlay_configuration_publishes_through_a_real_powerdns() {
    let Some(install) = built_overlay("powerdns") else {
        return;
    };
    let serve = parse_serve_args(&effective_args(&install), &install.origin);
    let pdns = crate::support::pdns::Pdns::start(&serve.provider_flags.zones[0], &[]);
    once_publishes(
        &install,
        serve.provider_flags.pdns_api_key_file.as_ref().unwrap(),
        crate::support::pdns::API_KEY,
        BTreeMap::from([("GATEWAY_DNS_PDNS_SERVER".into(), pdns.api_url())]),
        pdns.dns_addr(),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_dns_overlay_answers_on_its_service_port() {
    let Some(install) = built_overlay("embedded-dns") else {
        return;
    };
    let serve = parse_serve_args(&effective_args(&install), &install.origin);
    let mut deployed = Deployed::start(&install, certs_for_service(&install));
    deployed.wait_ready(&install).await;
    let dns = deployed.binary.addr_for(serve.dns_listen.port());
    let answered = eventually(Duration::from_secs(20), || async {
        let answer = crate::support::dig::query(dns, "app.example.com", "A", false);
        (answer.data("A") == ["203.0.113.10"]).then_some(answer)
    })
    .await;
    deployed.binary.assert_running();
    assert!(
        answered.is_some(),
        "no A record from the embedded server: {}",
        deployed.binary.log()
    );
}
