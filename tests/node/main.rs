//! gateway-dns as users run it: the image built from the repository's Dockerfile, the chart
//! installed on a real node (containerd, kubelet, kube-proxy, scheduler and controller manager
//! beside the test control plane), pods serving the webhook through their Service and DNS
//! through theirs.
//!
//! One node per machine (fixed ports, one bridge, global iptables rules), so the steps run one
//! at a time, in order, on one node, and each builds on the one before: the install, admission
//! through the Service, DNS through the Service, killing pods, a rolling upgrade, memory at 10k
//! routes, and the same install with kustomize. The node is stopped, and what it changed on the
//! machine put back, before the binary exits. Needs root and the Debian packages that
//! scripts/test.sh installs (containerd, runc, CNI plugins, buildah, iptables).
//!
//! `cargo test --test node [FILTER...] [--skip FILTER]...`: a step that FILTER leaves out is
//! skipped, and so are the ones after a failed step that needs it.

#[path = "../support/mod.rs"]
mod support;

mod admission;
mod dns;
mod install;
mod kustomize;
mod memory;
mod pods;
mod upgrade;

use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use support::cluster::{ControlPlane, Options, Run, repo_root, tools};

/// The image the node runs, as `tests/control-plane/images.sh` tags it.
pub const IMAGE_REPOSITORY: &str = "localhost/gateway-dns";
pub const IMAGE_TAG: &str = "test";
pub const NAMESPACE: &str = "gateway-dns";
pub const RELEASE: &str = "gateway-dns";
/// The node's address (the bridge's): the API server's, the kubelet's and NodePorts'.
pub const NODE_IP: &str = "10.244.0.1";

/// The node, its control plane and what the steps left for the next ones.
pub struct Node {
    cluster: ControlPlane,
    _images: tempfile::TempDir,
}

impl Node {
    fn start() -> Node {
        let images = tempfile::Builder::new()
            .prefix("gateway-dns-images-")
            .tempdir()
            .expect("a temporary directory");
        let started = Instant::now();
        let built = Run::from(
            Command::new(repo_root().join("tests/control-plane/images.sh"))
                .arg(images.path())
                .arg(env!("CARGO_BIN_EXE_gateway-dns"))
                .output()
                .expect("images.sh runs"),
        );
        assert!(
            built.success,
            "the images were not built:\n{}{}",
            built.stdout, built.stderr
        );
        println!(
            "images built from the Dockerfile in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        let started = Instant::now();
        let cluster = ControlPlane::start_with(&Options {
            node_images: Some(images.path().to_path_buf()),
            ..Options::default()
        });
        println!(
            "control plane and node Ready in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        Node {
            cluster,
            _images: images,
        }
    }

    pub fn cluster(&self) -> &ControlPlane {
        &self.cluster
    }

    pub fn kubectl(&self, args: &[&str]) -> Run {
        self.cluster.kubectl(args)
    }

    /// helm against the node's cluster.
    pub fn helm(&self, args: &[&str]) -> Run {
        support::helm::helm(args, Some(&self.cluster.kubeconfig()))
    }

    /// `helm upgrade --install` of the chart with the local image, waiting for the rollout.
    pub fn helm_install(&self, extra: &[&str]) -> Run {
        let chart = support::helm::chart_dir().display().to_string();
        let repository = format!("image.repository={IMAGE_REPOSITORY}");
        let tag = format!("image.tag={IMAGE_TAG}");
        let mut args = vec![
            "upgrade",
            "--install",
            RELEASE,
            &chart,
            "--namespace",
            NAMESPACE,
            "--set",
            &repository,
            "--set",
            &tag,
            "--wait",
            "--timeout",
            "180s",
        ];
        args.extend_from_slice(extra);
        self.helm(&args)
    }

    /// The gateway-dns pods: (name, IP, ready).
    pub fn pods(&self) -> Vec<(String, String, bool)> {
        let out = self
            .kubectl(&[
                "get",
                "pods",
                "-n",
                NAMESPACE,
                "-l",
                "app.kubernetes.io/name=gateway-dns,app.kubernetes.io/component!=certgen",
                "-o",
                "json",
            ])
            .ok();
        let list: serde_json::Value = serde_json::from_str(&out).expect("pods as JSON");
        list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|pod| pod["metadata"]["deletionTimestamp"].is_null())
            .map(|pod| {
                let ready = pod["status"]["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True");
                (
                    pod["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    pod["status"]["podIP"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    ready,
                )
            })
            .collect()
    }

    /// The pod holding the Lease, if any.
    pub fn lease_holder(&self) -> Option<String> {
        let run = self.kubectl(&[
            "get",
            "lease",
            RELEASE,
            "-n",
            NAMESPACE,
            "-o",
            "jsonpath={.spec.holderIdentity}",
        ]);
        (run.success && !run.stdout.trim().is_empty()).then(|| run.stdout.trim().to_string())
    }

    /// Waits until `check` holds, or panics with `what` after `limit`.
    #[track_caller]
    pub fn wait_for(&self, what: &str, limit: Duration, mut check: impl FnMut() -> bool) {
        let start = Instant::now();
        while !check() {
            assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Waits until 3 pods are Ready and none of `before` is among them (a roll has ended).
    pub fn wait_rolled(&self, before: &[String]) {
        self.wait_for("the old pods are gone", Duration::from_secs(120), || {
            let pods = self.pods();
            pods.len() == 3
                && pods
                    .iter()
                    .all(|(name, _, ready)| *ready && !before.contains(name))
        });
    }

    /// Waits until one of `names` holds the Lease; returns it.
    pub fn wait_lease_held_by_one_of(&self, names: &[String], what: &str) -> String {
        let mut holder = None;
        self.wait_for(what, Duration::from_secs(60), || {
            holder = self.lease_holder().filter(|h| names.contains(h));
            holder.is_some()
        });
        holder.unwrap_or_default()
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.cluster.kubeconfig()
    }

    pub fn dir(&self) -> &Path {
        self.cluster.dir()
    }
}

/// One step: its name and what it does on the node.
struct Step {
    name: &'static str,
    run: fn(&Node),
}

const STEPS: &[Step] = &[
    Step {
        name: "install::the_chart_with_default_values_runs_under_the_restricted_profile",
        run: install::the_chart_with_default_values_runs_under_the_restricted_profile,
    },
    Step {
        name: "admission::the_seed_story_is_answered_by_the_pods_through_the_service",
        run: admission::the_seed_story_is_answered_by_the_pods_through_the_service,
    },
    Step {
        name: "pods::a_killed_leader_is_replaced_and_no_killed_pod_stops_the_webhook",
        run: pods::a_killed_leader_is_replaced_and_no_killed_pod_stops_the_webhook,
    },
    Step {
        name: "upgrade::a_rolling_upgrade_fails_no_admission_and_hands_the_lease_over",
        run: upgrade::a_rolling_upgrade_fails_no_admission_and_hands_the_lease_over,
    },
    Step {
        name: "dns::the_embedded_server_answers_through_its_service_and_keeps_answering_in_a_roll",
        run: dns::the_embedded_server_answers_through_its_service_and_keeps_answering_in_a_roll,
    },
    Step {
        name: "memory::at_10k_routes_the_pods_stay_under_the_charts_memory_limit",
        run: memory::at_10k_routes_the_pods_stay_under_the_charts_memory_limit,
    },
    Step {
        name: "kustomize::manifests_base_gives_the_same_result",
        run: kustomize::manifests_base_gives_the_same_result,
    },
];

/// libtest's command line, as far as it matters here: filters, `--skip`, `--exact`, `--list`;
/// other flags (`--nocapture`, `--test-threads`...) change nothing, since steps run in order.
struct Selection {
    filters: Vec<String>,
    skips: Vec<String>,
    exact: bool,
    list: bool,
}

impl Selection {
    fn parse() -> Selection {
        let mut selection = Selection {
            filters: Vec::new(),
            skips: Vec::new(),
            exact: false,
            list: false,
        };
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--skip" => selection.skips.extend(args.next()),
                "--exact" => selection.exact = true,
                "--list" => selection.list = true,
                "--test-threads" | "--format" | "--color" | "-Z" | "--logfile" => {
                    args.next();
                }
                flag if flag.starts_with('-') => {}
                filter => selection.filters.push(filter.to_string()),
            }
        }
        selection
    }

    fn matches(&self, pattern: &str, name: &str) -> bool {
        if self.exact {
            name == pattern
        } else {
            name.contains(pattern)
        }
    }

    fn selects(&self, name: &str) -> bool {
        (self.filters.is_empty() || self.filters.iter().any(|f| self.matches(f, name)))
            && !self.skips.iter().any(|s| self.matches(s, name))
    }
}

fn main() -> ExitCode {
    let selection = Selection::parse();
    if selection.list {
        for step in STEPS {
            println!("{}: test", step.name);
        }
        return ExitCode::SUCCESS;
    }
    let chosen: Vec<&Step> = STEPS.iter().filter(|s| selection.selects(s.name)).collect();
    let filtered = STEPS.len() - chosen.len();
    println!("\nrunning {} tests", chosen.len());
    let started = Instant::now();
    let mut passed = 0;
    let mut failed = Vec::new();
    if !chosen.is_empty() {
        let _ = tools();
        // /proc/self belongs to the process's effective user.
        let root = std::os::unix::fs::MetadataExt::uid(
            &std::fs::metadata("/proc/self").expect("/proc is mounted"),
        ) == 0;
        if !root {
            eprintln!(
                "tests/node needs root: it runs containerd and a kubelet, and changes iptables, \
                 mounts and cgroups (which it puts back). Run it as root, as scripts/test.sh does."
            );
            return ExitCode::FAILURE;
        }
        let node = std::panic::catch_unwind(Node::start);
        match node {
            Ok(node) => {
                for step in &chosen {
                    let step_started = Instant::now();
                    let result = std::panic::catch_unwind(AssertUnwindSafe(|| (step.run)(&node)));
                    let took = step_started.elapsed().as_secs_f64();
                    match result {
                        Ok(()) => {
                            println!("test {} ... ok ({took:.1} s)", step.name);
                            passed += 1;
                        }
                        Err(_) => {
                            println!("test {} ... FAILED ({took:.1} s)", step.name);
                            failed.push(step.name);
                        }
                    }
                }
                let stopping = Instant::now();
                drop(node);
                println!(
                    "node stopped and the machine put back in {:.1} s",
                    stopping.elapsed().as_secs_f64()
                );
            }
            Err(_) => {
                for step in &chosen {
                    println!("test {} ... FAILED (the node did not start)", step.name);
                    failed.push(step.name);
                }
            }
        }
    }
    if !failed.is_empty() {
        println!("\nfailures:");
        for name in &failed {
            println!("    {name}");
        }
    }
    println!(
        "\ntest result: {}. {passed} passed; {} failed; 0 ignored; 0 measured; {filtered} filtered out; finished in {:.2}s\n",
        if failed.is_empty() { "ok" } else { "FAILED" },
        failed.len(),
        started.elapsed().as_secs_f64()
    );
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// An operation repeated in the background until stopped: how often it ran and how it failed.
pub struct Repeated {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    handle: std::thread::JoinHandle<(usize, Vec<String>)>,
}

impl Repeated {
    /// Runs `op(i)` for i = 0, 1, ... with `pause` between runs; `op` returns an error to record.
    pub fn start(
        pause: Duration,
        mut op: impl FnMut(usize) -> Result<(), String> + Send + 'static,
    ) -> Repeated {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::spawn(move || {
            let mut failures = Vec::new();
            let mut runs = 0;
            // Bounded: a step that forgets to stop it still ends within the hour.
            while !flag.load(std::sync::atomic::Ordering::SeqCst) && runs < 100_000 {
                if let Err(failure) = op(runs) {
                    failures.push(failure);
                }
                runs += 1;
                std::thread::sleep(pause);
            }
            (runs, failures)
        });
        Repeated { stop, handle }
    }

    /// Stops it; returns the number of runs and the failures.
    pub fn stop(self) -> (usize, Vec<String>) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        self.handle
            .join()
            .expect("the repeated operation does not panic")
    }
}

/// A route of team A for `name`.example.com on the public Gateway.
pub fn route_yaml(name: &str, namespace: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata:\n  name: {name}\n  \
         namespace: {namespace}\nspec:\n  parentRefs:\n  - name: public\n    namespace: infra\n  \
         hostnames:\n  - {name}.example.com\n"
    )
}

/// kubectl with the node's admin kubeconfig, from any thread.
pub fn kubectl_at(kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> Run {
    support::cluster::kubectl(kubeconfig, args, stdin)
}

/// Evicts a pod through the Eviction API, as `kubectl drain` does: the PodDisruptionBudget
/// decides. Returns whether the eviction was allowed.
pub fn evict(node: &Node, pod: &str) -> bool {
    let eviction = format!(
        "{{\"apiVersion\":\"policy/v1\",\"kind\":\"Eviction\",\"metadata\":{{\"name\":\"{pod}\",\"namespace\":\"{NAMESPACE}\"}}}}"
    );
    let path = format!("/api/v1/namespaces/{NAMESPACE}/pods/{pod}/eviction");
    let run = kubectl_at(
        &node.kubeconfig(),
        &["create", "--raw", &path, "-f", "-"],
        Some(&eviction),
    );
    if !run.success {
        assert!(
            run.stderr.contains("disruption budget") || run.stderr.contains("TooManyRequests"),
            "eviction of {pod}: {run:?}"
        );
    }
    run.success
}
