//! Reading the install manifests (`manifests/`) the way the cluster will: every document into its
//! k8s-openapi type, strictly (a field the type does not know fails, so a typo cannot hide),
//! `kubectl kustomize` when it is installed, and the real `gateway-dns` binary started with the
//! Deployment's own arguments.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Container, Namespace, Secret, Service, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn manifests_dir() -> PathBuf {
    repo().join("manifests")
}

/// The `gateway-dns` binary cargo built for this test run.
pub fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_gateway-dns"))
}

/// Writes straight to the process's stderr, past the test harness's output capture, so a
/// skipped part is visible in every test log (CI's included).
pub fn notice(text: &str) {
    let _ = writeln!(std::io::stderr(), "{text}");
}

/// One YAML document and where it came from.
#[derive(Debug, Clone)]
pub struct Doc {
    pub origin: String,
    pub value: Value,
}

/// Every document of a multi-document YAML text (empty documents skipped).
pub fn yaml_docs(origin: &str, text: &str) -> Vec<Doc> {
    let mut docs = Vec::new();
    for (number, document) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let value = Value::deserialize(document)
            .unwrap_or_else(|error| panic!("{origin}: document {}: {error}", number + 1));
        if !value.is_null() {
            docs.push(Doc {
                origin: format!("{origin} (document {})", number + 1),
                value,
            });
        }
    }
    docs
}

/// Every `*.yaml` file below `dir`, sorted.
pub fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(current) = pending.pop() {
        for entry in std::fs::read_dir(&current).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|ext| ext == "yaml") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

pub fn is_kustomization(path: &Path) -> bool {
    path.file_name()
        .is_some_and(|name| name == "kustomization.yaml")
}

pub fn relative(path: &Path) -> String {
    path.strip_prefix(repo())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// Every manifest document (not kustomization files) in the files below `dir`.
pub fn manifest_docs(dir: &Path) -> Vec<Doc> {
    yaml_files(dir)
        .into_iter()
        .filter(|path| !is_kustomization(path))
        .flat_map(|path| yaml_docs(&relative(&path), &std::fs::read_to_string(&path).unwrap()))
        .collect()
}

/// Deserializes `doc` into `T` and serializes it back: anything the type dropped (an unknown or
/// misspelled field, a value of the wrong shape) is reported, because the API server would
/// reject or silently drop it too.
pub fn strict<T: DeserializeOwned + Serialize>(doc: &Doc) -> T {
    let typed: T = serde_json::from_value(doc.value.clone())
        .unwrap_or_else(|error| panic!("{}: does not parse: {error}", doc.origin));
    let back = serde_json::to_value(&typed).unwrap();
    let mut lost = Vec::new();
    differences("", &doc.value, &back, &mut lost);
    assert!(
        lost.is_empty(),
        "{}: fields that {} does not read back (misspelled or misplaced?): {lost:#?}",
        doc.origin,
        std::any::type_name::<T>()
    );
    typed
}

fn differences(path: &str, original: &Value, back: &Value, lost: &mut Vec<String>) {
    match (original, back) {
        (Value::Object(original), Value::Object(back)) => {
            for (key, value) in original {
                let child = format!("{path}.{key}");
                match back.get(key) {
                    Some(back_value) => differences(&child, value, back_value, lost),
                    None => lost.push(child),
                }
            }
        }
        (Value::Array(original), Value::Array(back)) if original.len() == back.len() => {
            for (index, (value, back_value)) in original.iter().zip(back).enumerate() {
                differences(&format!("{path}[{index}]"), value, back_value, lost);
            }
        }
        _ if original == back => {}
        _ => lost.push(format!("{path}: {original} became {back}")),
    }
}

/// cert-manager's `Certificate` (cert-manager.io/v1): the fields these manifests use. Unknown
/// fields are refused, so a misspelled one fails here instead of being ignored.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Certificate {
    pub api_version: String,
    pub kind: String,
    pub metadata: ObjectMeta,
    pub spec: CertificateSpec,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CertificateSpec {
    #[serde(rename = "isCA")]
    pub is_ca: Option<bool>,
    pub common_name: Option<String>,
    pub secret_name: String,
    pub duration: Option<String>,
    pub renew_before: Option<String>,
    pub dns_names: Option<Vec<String>>,
    pub usages: Option<Vec<String>>,
    pub private_key: Option<PrivateKey>,
    pub issuer_ref: IssuerRef,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PrivateKey {
    pub algorithm: String,
    pub size: u32,
    pub rotation_policy: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IssuerRef {
    pub group: String,
    pub kind: String,
    pub name: String,
}

/// cert-manager's namespaced `Issuer`: self-signed or CA.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Issuer {
    pub api_version: String,
    pub kind: String,
    pub metadata: ObjectMeta,
    pub spec: IssuerSpec,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IssuerSpec {
    pub self_signed: Option<BTreeMap<String, Value>>,
    pub ca: Option<CaIssuer>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CaIssuer {
    pub secret_name: String,
}

pub const CERT_MANAGER_API_VERSION: &str = "cert-manager.io/v1";

/// Every object of an installation, each in its type.
#[derive(Debug, Default)]
pub struct Install {
    pub origin: String,
    pub namespaces: Vec<Namespace>,
    pub service_accounts: Vec<ServiceAccount>,
    pub cluster_roles: Vec<ClusterRole>,
    pub cluster_role_bindings: Vec<ClusterRoleBinding>,
    pub roles: Vec<Role>,
    pub role_bindings: Vec<RoleBinding>,
    pub deployments: Vec<Deployment>,
    pub disruption_budgets: Vec<PodDisruptionBudget>,
    pub services: Vec<Service>,
    pub network_policies: Vec<NetworkPolicy>,
    pub webhook_configurations: Vec<ValidatingWebhookConfiguration>,
    pub secrets: Vec<Secret>,
    pub issuers: Vec<Issuer>,
    pub certificates: Vec<Certificate>,
    /// prometheus-operator's ServiceMonitor and PrometheusRule (components/monitoring), kept as
    /// they are: tests/cluster/helm.rs validates them against their CRDs on the API server.
    pub monitoring: Vec<Value>,
}

impl Install {
    /// Parses every document; a kind this installation should not contain fails.
    pub fn from_docs(origin: &str, docs: &[Doc]) -> Install {
        let mut install = Install {
            origin: origin.to_string(),
            ..Install::default()
        };
        for doc in docs {
            let api_version = doc.value["apiVersion"].as_str().unwrap_or_default();
            let kind = doc.value["kind"].as_str().unwrap_or_default();
            match (api_version, kind) {
                ("v1", "Namespace") => install.namespaces.push(strict(doc)),
                ("v1", "ServiceAccount") => install.service_accounts.push(strict(doc)),
                ("v1", "Service") => install.services.push(strict(doc)),
                ("v1", "Secret") => install.secrets.push(strict(&go_base64(doc))),
                ("apps/v1", "Deployment") => install.deployments.push(strict(doc)),
                ("policy/v1", "PodDisruptionBudget") => {
                    install.disruption_budgets.push(strict(doc))
                }
                ("networking.k8s.io/v1", "NetworkPolicy") => {
                    install.network_policies.push(strict(doc))
                }
                ("rbac.authorization.k8s.io/v1", "ClusterRole") => {
                    install.cluster_roles.push(strict(doc))
                }
                ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") => {
                    install.cluster_role_bindings.push(strict(doc))
                }
                ("rbac.authorization.k8s.io/v1", "Role") => install.roles.push(strict(doc)),
                ("rbac.authorization.k8s.io/v1", "RoleBinding") => {
                    install.role_bindings.push(strict(doc))
                }
                ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration") => {
                    install.webhook_configurations.push(strict(&go_base64(doc)))
                }
                (CERT_MANAGER_API_VERSION, "Issuer") => install.issuers.push(cert_manager(doc)),
                (CERT_MANAGER_API_VERSION, "Certificate") => {
                    install.certificates.push(cert_manager(doc))
                }
                ("monitoring.coreos.com/v1", "ServiceMonitor" | "PrometheusRule") => {
                    install.monitoring.push(doc.value.clone())
                }
                _ => panic!(
                    "{}: unexpected object {api_version} {kind}: add it to Install with its type",
                    doc.origin
                ),
            }
        }
        install
    }

    pub fn deployment(&self) -> &Deployment {
        only(&self.deployments, &self.origin, "Deployment")
    }

    /// The Service the webhook configuration calls.
    pub fn service(&self) -> &Service {
        let configuration = self.webhook_configuration();
        let name = configuration
            .webhooks
            .iter()
            .flatten()
            .find_map(|webhook| webhook.client_config.service.as_ref())
            .map(|service| service.name.clone())
            .expect("the webhook calls a Service");
        let services: Vec<Service> = self
            .services
            .iter()
            .filter(|service| service.metadata.name.as_deref() == Some(name.as_str()))
            .cloned()
            .collect();
        assert_eq!(services.len(), 1, "{}: one Service {name}", self.origin);
        self.services
            .iter()
            .find(|service| service.metadata.name.as_deref() == Some(name.as_str()))
            .unwrap()
    }

    pub fn namespace(&self) -> &Namespace {
        only(&self.namespaces, &self.origin, "Namespace")
    }

    pub fn webhook_configuration(&self) -> &ValidatingWebhookConfiguration {
        only(
            &self.webhook_configurations,
            &self.origin,
            "ValidatingWebhookConfiguration",
        )
    }

    pub fn container(&self) -> &Container {
        let containers = &self
            .deployment()
            .spec
            .as_ref()
            .and_then(|spec| spec.template.spec.as_ref())
            .expect("the Deployment has a pod spec")
            .containers;
        only(containers, &self.origin, "container")
    }

    /// The Deployment container's arguments.
    pub fn args(&self) -> Vec<String> {
        self.container().args.clone().unwrap_or_default()
    }

    /// The container's environment as the pod would see it: literal values, and the pod name and
    /// namespace for `fieldRef`s (the only other kind of source these manifests use).
    pub fn env(&self) -> Vec<(String, String)> {
        let namespace = self
            .deployment()
            .metadata
            .namespace
            .clone()
            .unwrap_or_default();
        let pod_name = format!(
            "{}-5d9c8b7f6-x2k4q",
            self.deployment().metadata.name.clone().unwrap_or_default()
        );
        self.container()
            .env
            .iter()
            .flatten()
            .map(|variable| {
                let value = match (&variable.value, &variable.value_from) {
                    (Some(value), None) => value.clone(),
                    (None, Some(source)) => {
                        let field = source
                            .field_ref
                            .as_ref()
                            .map(|field| field.field_path.as_str())
                            .unwrap_or_else(|| {
                                panic!(
                                    "{}: env {} has an unexpected source",
                                    self.origin, variable.name
                                )
                            });
                        match field {
                            "metadata.namespace" => namespace.clone(),
                            "metadata.name" => pod_name.clone(),
                            other => {
                                panic!("{}: env {}: fieldRef {other}", self.origin, variable.name)
                            }
                        }
                    }
                    _ => panic!("{}: env {} needs one value", self.origin, variable.name),
                };
                (variable.name.clone(), value)
            })
            .collect()
    }

    /// The Deployment's pod template labels.
    pub fn pod_labels(&self) -> BTreeMap<String, String> {
        self.deployment()
            .spec
            .as_ref()
            .and_then(|spec| spec.template.metadata.as_ref())
            .and_then(|metadata| metadata.labels.clone())
            .unwrap_or_default()
    }
}

fn cert_manager<T: DeserializeOwned>(doc: &Doc) -> T {
    serde_json::from_value(doc.value.clone())
        .unwrap_or_else(|error| panic!("{}: does not parse: {error}", doc.origin))
}

/// kustomize wraps long base64 values over several lines; the API server's Go decoder skips the
/// line breaks, k8s-openapi's does not, so drop them before parsing `data` and `caBundle`.
fn go_base64(doc: &Doc) -> Doc {
    fn strip(value: &mut Value) {
        if let Some(text) = value.as_str() {
            *value = Value::String(text.chars().filter(|c| !c.is_whitespace()).collect());
        }
    }
    let mut doc = doc.clone();
    if let Some(data) = doc.value.get_mut("data").and_then(Value::as_object_mut) {
        data.values_mut().for_each(strip);
    }
    if let Some(webhooks) = doc.value.get_mut("webhooks").and_then(Value::as_array_mut) {
        for webhook in webhooks {
            if let Some(bundle) = webhook.pointer_mut("/clientConfig/caBundle") {
                strip(bundle);
            }
        }
    }
    doc
}

pub fn only<'a, T>(items: &'a [T], origin: &str, what: &str) -> &'a T {
    assert_eq!(items.len(), 1, "{origin}: expected exactly one {what}");
    &items[0]
}

/// The kubectl (and kustomize) of the test control plane; `Err` never happens since that kubectl
/// is built by the test command (a missing build fails the test with a hint instead).
pub fn kustomize_tool() -> Result<(), String> {
    let output = Command::new(kubectl_binary())
        .args(["version", "--client"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    let version = text
        .lines()
        .find_map(|line| line.strip_prefix("Kustomize Version: v"))
        .unwrap_or_else(|| panic!("kubectl reports no kustomize version: {text}"));
    let major: u32 = version
        .split('.')
        .next()
        .and_then(|major| major.parse().ok())
        .unwrap_or(0);
    assert!(
        major >= 5,
        "kubectl's kustomize is v{version}; the overlays need v5 or newer"
    );
    Ok(())
}

fn kubectl_binary() -> std::path::PathBuf {
    super::cluster::tools().join("bin/kubectl")
}

/// Builds `dir` with `kubectl kustomize` and returns the documents.
pub fn kustomize(dir: &Path) -> Vec<Doc> {
    let output = Command::new(kubectl_binary())
        .arg("kustomize")
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "kubectl kustomize {} failed: {}",
        dir.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    yaml_docs(
        &format!("kustomize {}", dir.display()),
        &String::from_utf8(output.stdout).unwrap(),
    )
}

/// Copies a directory tree (the manifests, so a test can add generated files to its copy).
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// Runs `gateway-dns certs` (the real binary) for a Service into `out`.
pub fn run_certs(service: &str, namespace: &str, out: &Path) {
    let output = Command::new(binary())
        .args([
            "certs",
            "--service-name",
            service,
            "--service-namespace",
            namespace,
            "--out",
        ])
        .arg(out)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "gateway-dns certs failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The value of `--flag` in `args` (`--flag=value` or `--flag value`).
pub fn flag_value<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        if let Some(value) = arg
            .strip_prefix(flag)
            .and_then(|rest| rest.strip_prefix('='))
        {
            return Some(value);
        }
        if arg == flag {
            return iter.next().map(String::as_str);
        }
    }
    None
}

/// How a Deployment's configuration is moved onto a test machine.
#[derive(Debug, Default)]
pub struct Adaptation {
    /// Pod mount path → local directory holding the same files.
    pub mounts: Vec<(String, PathBuf)>,
    /// Environment values replaced outright (e.g. a DNS server's address).
    pub env_overrides: BTreeMap<String, String>,
    /// The files source standing in for the cluster.
    pub cluster: PathBuf,
    pub extra_args: Vec<String>,
}

/// The real binary, started with a Deployment's arguments and environment adapted to a test
/// machine: every listen address moved to a free loopback port, mounted files taken from local
/// directories, and the files source pointed at a local cluster. Killed on drop.
pub struct RunningBinary {
    child: Child,
    /// Original port in the manifest → where this process listens instead.
    pub listeners: BTreeMap<u16, SocketAddr>,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    log: PathBuf,
}

impl RunningBinary {
    pub fn start(
        manifest_args: &[String],
        manifest_env: &[(String, String)],
        adaptation: &Adaptation,
        log: PathBuf,
    ) -> RunningBinary {
        let mut listeners = BTreeMap::new();
        let mut adapt = |value: &str| -> String {
            if let Ok(addr) = value.parse::<SocketAddr>()
                && addr.ip().is_unspecified()
            {
                let local = SocketAddr::from(([127, 0, 0, 1], super::net::free_port()));
                listeners.insert(addr.port(), local);
                return local.to_string();
            }
            for (mount, local) in &adaptation.mounts {
                if let Some(file) = value.strip_prefix(mount.as_str()) {
                    return local
                        .join(file.trim_start_matches('/'))
                        .display()
                        .to_string();
                }
            }
            value.to_string()
        };
        let mut args = Vec::new();
        for arg in manifest_args {
            args.push(match arg.split_once('=') {
                Some((flag, value)) if flag.starts_with("--") => format!("{flag}={}", adapt(value)),
                _ => arg.clone(),
            });
        }
        let env: Vec<(String, String)> = manifest_env
            .iter()
            .map(|(name, value)| match adaptation.env_overrides.get(name) {
                Some(replaced) => (name.clone(), replaced.clone()),
                None => (name.clone(), adapt(value)),
            })
            .collect();
        args.push(format!("--manifests={}", adaptation.cluster.display()));
        args.extend(adaptation.extra_args.iter().cloned());
        let log_file = std::fs::File::create(&log).unwrap();
        let mut command = Command::new(binary());
        // Only the manifest's configuration: nothing inherited from the test's environment.
        for (name, _) in std::env::vars() {
            if name.starts_with("GATEWAY_DNS_") || name == "POD_NAME" {
                command.env_remove(name);
            }
        }
        let child = command
            .args(&args)
            .envs(env.iter().map(|(name, value)| (name, value)))
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().unwrap())
            .stderr(log_file)
            .spawn()
            .unwrap();
        RunningBinary {
            child,
            listeners,
            args,
            env,
            log,
        }
    }

    /// Where the process serves what the manifest says is on `port`.
    pub fn addr_for(&self, port: u16) -> SocketAddr {
        *self.listeners.get(&port).unwrap_or_else(|| {
            panic!(
                "no listen address in the Deployment serves port {port}: {:?} {:?}",
                self.args, self.env
            )
        })
    }

    /// Fails the test (with the process's log) if it has exited.
    pub fn assert_running(&mut self) {
        if let Some(status) = self.child.try_wait().unwrap() {
            panic!(
                "gateway-dns {:?} exited with {status}: {}",
                self.args,
                self.log()
            );
        }
    }

    /// Waits (at most `limit`) for the process to exit; its exit code, or None while it runs.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<i32> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for RunningBinary {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Retries `attempt` every 100 ms until it returns `Some` or `limit` passes.
pub async fn eventually<T, F, Fut>(limit: Duration, mut attempt: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + limit;
    loop {
        if let Some(value) = attempt().await {
            return Some(value);
        }
        if Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A plain-HTTP GET (the metrics listener); returns the status and body.
pub async fn http_get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    use http_body_util::{BodyExt as _, Empty};
    use hyper::body::Bytes;
    let stream = tokio::net::TcpStream::connect(addr).await.ok()?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .ok()?;
    tokio::spawn(connection);
    let request = hyper::Request::get(path)
        .header("host", addr.to_string())
        .body(Empty::<Bytes>::new())
        .ok()?;
    let response = tokio::time::timeout(Duration::from_secs(10), sender.send_request(request))
        .await
        .ok()?
        .ok()?;
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.ok()?.to_bytes();
    Some((status, String::from_utf8_lossy(&body).into_owned()))
}
