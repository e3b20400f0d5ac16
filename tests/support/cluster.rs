//! A real Kubernetes control plane for tests: embedded etcd and kube-apiserver built from the
//! Kubernetes Go modules, kubectl of the same release, and the Gateway API CRDs of the pinned
//! `sigs.k8s.io/gateway-api` module. `tests/control-plane/build.sh OUT` builds them;
//! `scripts/test.sh` does so and names OUT in `GATEWAY_DNS_CONTROL_PLANE`.
//!
//! Each [`ControlPlane`] runs under its own temporary directory, on random loopback ports, with
//! RBAC on; it is stopped on drop, and by a watchdog if the test process dies first.
//! [`Serve`] runs the real `gateway-dns serve` binary against it, as the least-privilege
//! ServiceAccount of `manifests/base`, with the webhook registered from `manifests/base` too.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::net::free_port;
use super::webhook::HttpsConnection;

/// Names the directory `tests/control-plane/build.sh` built into.
pub const TOOLS_ENV: &str = "GATEWAY_DNS_CONTROL_PLANE";

/// The project's root (manifests, examples).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A file of `tests/fixtures/cluster` (manifests several cluster tests apply), as text.
pub fn fixture(name: &str) -> String {
    let path = repo_root().join("tests/fixtures/cluster").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A file of the seed story (`tests/fixtures/cluster/seed`), as text.
pub fn seed(name: &str) -> String {
    fixture(&format!("seed/{name}"))
}

/// Namespaces infra and apps, and Gateway infra/public for `*.example.com`.
pub fn public_gateway() -> String {
    [fixture("namespaces.yaml"), fixture("gateway-public.yaml")].join("---\n")
}

/// The built control plane, or a failure that says how to build it.
pub fn tools() -> PathBuf {
    let Some(dir) = std::env::var_os(TOOLS_ENV) else {
        panic!(
            "{TOOLS_ENV} is not set: build the test control plane with \
             `tests/control-plane/build.sh DIR` and export {TOOLS_ENV}=DIR \
             (scripts/test.sh does both)"
        );
    };
    let dir = PathBuf::from(dir);
    assert!(
        dir.join("bin/kube-apiserver").exists(),
        "{TOOLS_ENV}={} holds no bin/kube-apiserver: run tests/control-plane/build.sh {}",
        dir.display(),
        dir.display()
    );
    dir
}

fn cluster_tool() -> PathBuf {
    tools().join("bin/cluster")
}

/// Which Gateway API CRDs `up` installs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GatewayApi {
    Experimental,
    Standard,
    None,
}

impl GatewayApi {
    fn flag(self) -> &'static str {
        match self {
            GatewayApi::Experimental => "experimental",
            GatewayApi::Standard => "standard",
            GatewayApi::None => "none",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Options {
    pub gateway_api: GatewayApi,
    /// Gateway API resources (plurals) left out of the install.
    pub skip_crds: Vec<String>,
    pub apiserver_args: Vec<String>,
    /// A node beside the control plane (one per machine), with the images (OCI or Docker
    /// archives) in this directory imported into its containerd.
    pub node_images: Option<PathBuf>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            gateway_api: GatewayApi::Experimental,
            skip_crds: Vec::new(),
            apiserver_args: Vec::new(),
            node_images: None,
        }
    }
}

/// What a kubectl (or cluster tool) run left behind.
#[derive(Debug)]
pub struct Run {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
}

impl From<Output> for Run {
    fn from(output: Output) -> Run {
        Run {
            success: output.status.success(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }
}

impl Run {
    /// stdout, or a panic that shows what went wrong.
    #[track_caller]
    pub fn ok(self) -> String {
        assert!(
            self.success,
            "command failed:\nstdout: {}\nstderr: {}",
            self.stdout, self.stderr
        );
        self.stdout
    }
}

/// etcd + kube-apiserver on loopback, stopped on drop.
pub struct ControlPlane {
    dir: tempfile::TempDir,
}

impl ControlPlane {
    pub fn start() -> ControlPlane {
        ControlPlane::start_with(&Options::default())
    }

    pub fn start_with(options: &Options) -> ControlPlane {
        let dir = tempfile::Builder::new()
            .prefix("gateway-dns-cluster-")
            .tempdir()
            .expect("a temporary directory");
        let mut command = Command::new(cluster_tool());
        command
            .arg("up")
            .arg(dir.path())
            .args(["--gateway-api", options.gateway_api.flag()])
            .args(["--watch-pid", &std::process::id().to_string()]);
        for plural in &options.skip_crds {
            command.args(["--skip-crd", plural]);
        }
        for arg in &options.apiserver_args {
            command.arg(format!("--apiserver-arg={arg}"));
        }
        if let Some(images) = &options.node_images {
            command.arg("--node").arg("--images").arg(images);
        }
        let run = Run::from(command.output().expect("the cluster tool runs"));
        assert!(
            run.success,
            "the control plane did not start:\n{}{}",
            run.stdout, run.stderr
        );
        ControlPlane { dir }
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The admin kubeconfig (system:masters by client certificate).
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir().join("kubeconfig")
    }

    /// A copy of the admin kubeconfig that reaches the API server through `port` (a
    /// [`Proxy`](super::proxy::Proxy) in front of it: the certificate's 127.0.0.1 SAN still fits).
    pub fn admin_kubeconfig_via(&self, port: u16) -> PathBuf {
        let text = std::fs::read_to_string(self.kubeconfig()).unwrap();
        let direct = format!("server: https://127.0.0.1:{}\n", self.api_port());
        assert!(text.contains(&direct), "{text}");
        let path = self.dir().join(format!("admin-via-{port}.kubeconfig"));
        let proxied = text.replace(&direct, &format!("server: https://127.0.0.1:{port}\n"));
        std::fs::write(&path, proxied).unwrap();
        path
    }

    fn state(&self) -> Value {
        let text = std::fs::read_to_string(self.dir().join("run/state.json")).unwrap();
        serde_json::from_str(&text).unwrap()
    }

    pub fn api_port(&self) -> u16 {
        self.state()["apiServerPort"].as_u64().unwrap() as u16
    }

    /// PEM of the cluster CA (what a client verifies the API server with).
    pub fn ca_pem(&self) -> String {
        std::fs::read_to_string(self.dir().join("pki/ca.crt")).unwrap()
    }

    /// kubectl as the cluster admin.
    pub fn kubectl(&self, args: &[&str]) -> Run {
        self.kubectl_as(&self.kubeconfig(), args, None)
    }

    /// kubectl with `kubeconfig`, optionally feeding `stdin`.
    pub fn kubectl_as(&self, kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> Run {
        kubectl(kubeconfig, args, stdin)
    }

    /// `kubectl apply -f -` of `yaml` as the admin, with `extra` flags (e.g. `--dry-run=server`).
    pub fn apply(&self, yaml: &str, extra: &[&str]) -> Run {
        let mut args = vec!["apply", "-f", "-"];
        args.extend_from_slice(extra);
        kubectl(&self.kubeconfig(), &args, Some(yaml))
    }

    fn tool(&self, args: &[&str]) -> Run {
        let mut command = Command::new(cluster_tool());
        command.arg(args[0]).arg(self.dir()).args(&args[1..]);
        Run::from(command.output().expect("the cluster tool runs"))
    }

    /// Stops kube-apiserver (etcd keeps the state); every watch and connection drops.
    pub fn stop_apiserver(&self) {
        self.tool(&["stop-apiserver"]).ok();
    }

    /// Starts kube-apiserver again on the same port with the same arguments; returns once
    /// `/readyz` answers 200.
    pub fn start_apiserver(&self) {
        self.tool(&["start-apiserver"]).ok();
    }

    /// Compacts etcd past every revision seen so far: a watch that resumes from an older
    /// resourceVersion gets 410 Gone.
    pub fn compact(&self) {
        self.tool(&["compact"]).ok();
    }

    pub fn install_crds(&self, channel: GatewayApi, skip: &[&str]) {
        let mut args = vec!["install-crds", "--gateway-api", channel.flag()];
        for plural in skip {
            args.extend(["--skip-crd", plural]);
        }
        self.tool(&args).ok();
    }

    /// Applies the CRDs that `build.sh` copied to `crds/SET` from a pinned Go module
    /// (`cert-manager`, `prometheus-operator`) and waits until they are Established.
    pub fn install_crd_set(&self, set: &str) {
        let dir = tools().join("crds").join(set);
        let mut files: Vec<String> = std::fs::read_dir(&dir)
            .unwrap_or_else(|error| {
                panic!(
                    "{}: {error}; rebuild the control plane with tests/control-plane/build.sh",
                    dir.display()
                )
            })
            .map(|entry| entry.unwrap().path().display().to_string())
            .collect();
        files.sort();
        assert!(!files.is_empty(), "{} holds no CRDs", dir.display());
        let mut apply = vec!["apply", "--server-side"];
        let mut wait = vec!["wait", "--for=condition=Established", "--timeout=60s"];
        for file in &files {
            apply.extend(["-f", file.as_str()]);
            wait.extend(["-f", file.as_str()]);
        }
        self.kubectl(&apply).ok();
        self.kubectl(&wait).ok();
    }

    /// Installs the PolicyReport CRD of `tests/fixtures/crds` (wgpolicyk8s.io/v1alpha2) and waits
    /// until it is Established.
    pub fn install_policy_report_crd(&self) {
        let file = repo_root().join("tests/fixtures/crds/wgpolicyk8s.io_policyreports.yaml");
        let file = file.display().to_string();
        self.kubectl(&["apply", "--server-side", "-f", &file]).ok();
        self.kubectl(&[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "-f",
            &file,
        ])
        .ok();
    }

    /// Writes a Gateway's `status.addresses` and Accepted/Programmed conditions, as its
    /// controller would (no addresses: Programmed=False).
    pub fn gateway_address(&self, gateway: &str, addresses: &[&str]) {
        let mut args = vec!["gateway-address", gateway];
        args.extend_from_slice(addresses);
        self.tool(&args).ok();
    }

    /// A kube client as the admin.
    pub async fn admin_client(&self) -> kube::Client {
        client_for(&self.kubeconfig()).await
    }

    /// The seed story of `examples/cluster` applied with kubectl and no webhook, so that the
    /// losing route b2 is stored too, with the Gateways' addresses set in their status; and the
    /// RBAC `serve` runs with.
    pub fn seed_story_without_webhook(&self) {
        let example = |name: &str| {
            let path = repo_root().join("examples/cluster").join(name);
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        };
        self.install_gateway_dns_rbac();
        self.apply(&example("gateways.yaml"), &[]).ok();
        self.gateway_address("infra/gw1", &["203.0.113.10"]);
        self.gateway_address("infra/gw2", &["203.0.113.20"]);
        self.gateway_address("infra/gw3", &["203.0.113.30"]);
        self.apply(&example("routes.yaml"), &[]).ok();
    }

    /// Applies the RBAC of `manifests/base` (Namespace, ServiceAccount, ClusterRole, Role and
    /// their bindings) unchanged: the identity `serve` runs as in a cluster.
    pub fn install_gateway_dns_rbac(&self) {
        let base = repo_root().join("manifests/base");
        let mut args = vec!["apply".to_string()];
        for file in RBAC_MANIFESTS {
            args.push("-f".into());
            args.push(base.join(file).display().to_string());
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.kubectl(&args).ok();
    }

    /// A kubeconfig that authenticates as ServiceAccount `namespace/name` with a fresh token
    /// (TokenRequest), against `server_port` (default: the API server's own port).
    pub fn service_account_kubeconfig(
        &self,
        namespace: &str,
        name: &str,
        server_port: Option<u16>,
    ) -> PathBuf {
        let token = self
            .kubectl(&["create", "token", name, "-n", namespace, "--duration=24h"])
            .ok();
        let port = server_port.unwrap_or_else(|| self.api_port());
        let path = self
            .dir()
            .join(format!("{namespace}-{name}-{port}.kubeconfig"));
        let ca = data_encoding::BASE64.encode(self.ca_pem().as_bytes());
        let config = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n    server: \
             https://127.0.0.1:{port}\n    certificate-authority-data: {ca}\nusers:\n- name: \
             {name}\n  user:\n    token: {token}\ncontexts:\n- name: sa\n  context:\n    cluster: \
             test\n    user: {name}\n    namespace: {namespace}\ncurrent-context: sa\n",
            token = token.trim()
        );
        std::fs::write(&path, config).unwrap();
        path
    }

    /// Registers the ValidatingWebhookConfiguration of `manifests/base` with a `url` client
    /// config and the CA that signed the webhook's certificate.
    pub fn register_webhook(&self, url: &str, ca_file: &Path) {
        let manifest = repo_root().join("manifests/base/validatingwebhookconfiguration.yaml");
        let rendered = Run::from(
            Command::new(cluster_tool())
                .arg("webhook-config")
                .arg("--manifest")
                .arg(&manifest)
                .args(["--url", url])
                .arg("--ca-file")
                .arg(ca_file)
                .output()
                .expect("the cluster tool runs"),
        )
        .ok();
        self.apply(&rendered, &[]).ok();
    }

    /// Waits until the API server calls the webhook for routes in `namespace`: a server-side
    /// dry run of a route without a known parent gets the webhook's ParentNotFound warning.
    pub fn wait_webhook_active(&self, namespace: &str) {
        let probe = format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata:\n  name: \
             webhook-probe\n  namespace: {namespace}\nspec:\n  parentRefs:\n  - name: \
             no-such-gateway\n"
        );
        let start = Instant::now();
        loop {
            let run = self.apply(&probe, &["--dry-run=server"]);
            if run.stderr.contains("Warning: ParentNotFound") {
                return;
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "the API server does not call the webhook: {run:?}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        let _ = Command::new(cluster_tool())
            .arg("down")
            .arg(self.dir())
            .output();
    }
}

/// The RBAC objects of `manifests/base` that `serve` runs with.
pub const RBAC_MANIFESTS: [&str; 6] = [
    "namespace.yaml",
    "serviceaccount.yaml",
    "clusterrole.yaml",
    "clusterrolebinding.yaml",
    "role.yaml",
    "rolebinding.yaml",
];

/// Runs the kubectl built with the control plane.
pub fn kubectl(kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> Run {
    use std::io::Write as _;
    let mut child = Command::new(tools().join("bin/kubectl"))
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    if let Some(text) = stdin {
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
    }
    Run::from(child.wait_with_output().unwrap())
}

pub async fn client_for(kubeconfig: &Path) -> kube::Client {
    let file = kube::config::Kubeconfig::read_from(kubeconfig).unwrap();
    let config =
        kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
            .await
            .unwrap();
    kube::Client::try_from(config).unwrap()
}

/// `gateway-dns serve` against a control plane: webhook (certificates from `gateway-dns
/// certs`), embedded DNS and metrics on free loopback ports. Killed on drop.
pub struct Serve {
    child: Option<Child>,
    work: tempfile::TempDir,
    pub webhook: SocketAddr,
    pub dns: SocketAddr,
    pub metrics: SocketAddr,
    pub identity: String,
}

impl Serve {
    /// Starts serve with `kubeconfig` and `args` (zones, provider, mode...). Returns at once;
    /// see [`Serve::wait_ready`].
    pub fn start(kubeconfig: &Path, identity: &str, args: &[&str]) -> Serve {
        Serve::start_with_env(kubeconfig, identity, args, &[])
    }

    /// [`Serve::start`] with extra environment variables (secrets such as a TSIG key).
    pub fn start_with_env(
        kubeconfig: &Path,
        identity: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Serve {
        let work = tempfile::Builder::new()
            .prefix("gateway-dns-serve-")
            .tempdir()
            .unwrap();
        // `GATEWAY_DNS_BENCH_BINARY` runs another build, for a benchmark comparing two.
        let binary = std::env::var("GATEWAY_DNS_BENCH_BINARY")
            .unwrap_or_else(|_| env!("CARGO_BIN_EXE_gateway-dns").to_string());
        let certs = work.path().join("certs");
        let made = Command::new(&binary)
            .args(["certs", "--out"])
            .arg(&certs)
            .output()
            .unwrap();
        assert!(made.status.success(), "gateway-dns certs: {made:?}");
        let (webhook, dns, metrics) = (free_port(), free_port(), free_port());
        let address = |port: u16| SocketAddr::from(([127, 0, 0, 1], port));
        // Tests want CRDs that appear later found within a second; a caller measuring serve's
        // load on the API server passes its own (e.g. the default, 60s).
        let discovery: &[&str] = if args.contains(&"--discovery-interval") {
            &[]
        } else {
            &["--discovery-interval", "1s"]
        };
        let child = Command::new(&binary)
            .arg("serve")
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["--listen", &address(webhook).to_string()])
            .args(["--dns-listen", &address(dns).to_string()])
            .args(["--metrics-listen", &address(metrics).to_string()])
            .arg("--tls-cert")
            .arg(certs.join("tls.crt"))
            .arg("--tls-key")
            .arg(certs.join("tls.key"))
            .args(discovery)
            .args(args)
            .env("GATEWAY_DNS_LOG", "info,gateway_dns=debug")
            .env("POD_NAME", identity)
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(work.path().join("serve.log")).unwrap())
            .spawn()
            .expect("gateway-dns serve starts");
        Serve {
            child: Some(child),
            work,
            webhook: address(webhook),
            dns: address(dns),
            metrics: address(metrics),
            identity: identity.to_string(),
        }
    }

    pub fn ca_file(&self) -> PathBuf {
        self.work.path().join("certs/ca.crt")
    }

    pub fn url(&self) -> String {
        format!("https://{}/validate", self.webhook)
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.work.path().join("serve.log")).unwrap_or_default()
    }

    /// The last lines of the log, for failure messages.
    pub fn log_tail(&self) -> String {
        let log = self.log();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    /// Waits until `/readyz` answers 200 (TLS bound, first full sync done).
    pub async fn wait_ready(&self, limit: Duration) {
        let ca = std::fs::read_to_string(self.ca_file()).unwrap();
        let start = Instant::now();
        while start.elapsed() < limit {
            if let Ok(mut connection) =
                HttpsConnection::connect(self.webhook, &ca, "localhost").await
                && let Ok(reply) = connection
                    .send(hyper::Method::GET, "/readyz", &[], Vec::new())
                    .await
                && reply.status == 200
            {
                return;
            }
            self.assert_running();
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!(
            "serve not ready after {limit:?}; its log ends with:\n{}",
            self.log_tail()
        );
    }

    #[track_caller]
    pub fn assert_running(&self) {
        if let Some(child) = &self.child {
            let mut probe = Command::new("kill");
            probe.args(["-0", &child.id().to_string()]);
            let alive = probe.status().is_ok_and(|status| status.success());
            assert!(
                alive,
                "serve exited; its log ends with:\n{}",
                self.log_tail()
            );
        }
    }

    /// The plain-HTTP `/metrics` text.
    pub async fn metrics_text(&self) -> String {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let mut stream = tokio::net::TcpStream::connect(self.metrics).await.unwrap();
        stream
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut text = String::new();
        stream.read_to_string(&mut text).await.unwrap();
        text
    }

    /// The value of one metric series (`name{labels}` exactly as exported), if present.
    pub async fn metric(&self, series: &str) -> Option<f64> {
        self.metrics_text()
            .await
            .lines()
            .find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
    }

    /// A/AAAA/CNAME data the embedded DNS server answers for `name`.
    pub async fn dig(&self, name: &str, rtype: &str) -> Vec<String> {
        let (server, name, rtype) = (self.dns, name.to_string(), rtype.to_string());
        tokio::task::spawn_blocking(move || {
            super::dig::query(server, &name, &rtype, false).data(&rtype)
        })
        .await
        .unwrap()
    }

    /// Polls `dig` until the answer equals `expected`, or panics after `limit` with the log.
    pub async fn wait_answer(&self, name: &str, rtype: &str, expected: &[&str], limit: Duration) {
        let start = Instant::now();
        let mut last = Vec::new();
        while start.elapsed() < limit {
            last = self.dig(name, rtype).await;
            if last == expected {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!(
            "{name} {rtype}: wanted {expected:?}, the embedded DNS still answers {last:?} after \
             {limit:?}; serve's log ends with:\n{}",
            self.log_tail()
        );
    }

    /// Waits until a sync pass converges that began after this call (the second converged
    /// pass after now began after the first ended), or panics after `limit` with the log.
    pub async fn wait_synced(&self, limit: Duration) {
        const LAST_SYNC: &str = "gateway_dns_last_successful_sync_timestamp_seconds";
        let since = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let start = Instant::now();
        let mut first: Option<f64> = None;
        while start.elapsed() < limit {
            match (first, self.metric(LAST_SYNC).await) {
                (None, Some(at)) if at > since => first = Some(at),
                (Some(earlier), Some(at)) if at > earlier => return,
                _ => {}
            }
            self.assert_running();
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!(
            "serve converged no sync pass in {limit:?}; its log ends with:\n{}",
            self.log_tail()
        );
    }

    /// SIGKILL, as a crash would.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM, as Kubernetes stops a pod, then waits for the process to exit; its exit status.
    pub fn terminate(&mut self, limit: Duration) -> std::process::ExitStatus {
        self.signal("TERM");
        let mut child = self.child.take().expect("serve is running");
        let start = Instant::now();
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return status;
            }
            if start.elapsed() > limit {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "serve did not exit within {limit:?} of SIGTERM:\n{}",
                    self.log_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Sends a signal (STOP/CONT/TERM) to the process.
    pub fn signal(&self, signal: &str) {
        if let Some(pid) = self.pid() {
            let status = Command::new("kill")
                .args([&format!("-{signal}"), &pid.to_string()])
                .status()
                .unwrap();
            assert!(status.success(), "kill -{signal} {pid}");
        }
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        // A stopped process cannot act on SIGKILL's cleanup until continued.
        self.signal("CONT");
        self.kill();
    }
}
