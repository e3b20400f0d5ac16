//! The Helm chart (`charts/gateway-dns`) as the tests read it: the helm built with the test
//! control plane (`tests/control-plane/build.sh` builds `helm.sh/helm/v4` beside kubectl), its
//! renders keyed by object, and the comparison with the kustomize output of `manifests/`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use super::cluster::{Run, TOOLS_ENV, tools};
use super::install::{Doc, repo, yaml_docs};

/// The release the documentation installs: its name and namespace give every object the name
/// `manifests/` uses.
pub const RELEASE: &str = "gateway-dns";
pub const NAMESPACE: &str = "gateway-dns";

/// kube-apiserver's series the alerting rules read (it alone sees the calls that never reached
/// gateway-dns). tests/cluster/helm.rs checks that the real API server exports them.
pub const APISERVER_SERIES: [&str; 1] = ["apiserver_admission_webhook_fail_open_count"];

pub fn chart_dir() -> PathBuf {
    repo().join("charts/gateway-dns")
}

/// The documented values examples, `charts/gateway-dns/examples/*.yaml`, sorted.
pub fn examples() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(chart_dir().join("examples"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
        .collect();
    files.sort();
    files
}

/// The helm binary, or a failure that says how to build it.
pub fn helm_binary() -> PathBuf {
    let helm = tools().join("bin/helm");
    assert!(
        helm.exists(),
        "{TOOLS_ENV}={} holds no bin/helm: rebuild it with tests/control-plane/build.sh {}",
        tools().display(),
        tools().display()
    );
    helm
}

/// Runs helm with its caches and configuration in a fresh directory (nothing read from or
/// written to the user's ~/.config/helm), and `kubeconfig` for commands that reach a cluster.
pub fn helm(args: &[&str], kubeconfig: Option<&Path>) -> Run {
    let home = tempfile::tempdir().unwrap();
    let mut command = Command::new(helm_binary());
    command
        .env("HELM_CACHE_HOME", home.path().join("cache"))
        .env("HELM_CONFIG_HOME", home.path().join("config"))
        .env("HELM_DATA_HOME", home.path().join("data"))
        .env_remove("KUBECONFIG")
        .args(args);
    if let Some(kubeconfig) = kubeconfig {
        command.arg("--kubeconfig").arg(kubeconfig);
    }
    Run::from(command.output().expect("helm runs"))
}

/// `helm template` of the chart as release `gateway-dns` in namespace `gateway-dns`, with
/// values files and `--set`-style arguments (e.g. `["--set", "replicas=1"]`).
pub fn render(values: &[&Path], extra: &[&str]) -> Run {
    render_release(RELEASE, NAMESPACE, values, extra)
}

pub fn render_release(release: &str, namespace: &str, values: &[&Path], extra: &[&str]) -> Run {
    let chart = chart_dir().display().to_string();
    let mut args = vec![
        "template",
        release,
        chart.as_str(),
        "--namespace",
        namespace,
    ];
    let files: Vec<String> = values.iter().map(|p| p.display().to_string()).collect();
    for file in &files {
        args.extend(["--values", file.as_str()]);
    }
    args.extend_from_slice(extra);
    helm(&args, None)
}

/// The documents of a successful render.
#[track_caller]
pub fn rendered(values: &[&Path], extra: &[&str]) -> Vec<Doc> {
    let origin = format!("helm template {values:?} {extra:?}");
    yaml_docs(&origin, &render(values, extra).ok())
}

/// One object's identity: kind, namespace (empty when cluster-scoped) and name.
pub type Key = (String, String, String);

pub fn key_of(value: &Value) -> Key {
    let text = |pointer: &str| {
        value
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    (
        text("/kind"),
        text("/metadata/namespace"),
        text("/metadata/name"),
    )
}

/// Objects by identity; a duplicate fails.
pub fn by_key(docs: &[Doc]) -> BTreeMap<Key, Value> {
    let mut objects = BTreeMap::new();
    for doc in docs {
        let key = key_of(&doc.value);
        assert!(
            objects.insert(key.clone(), doc.value.clone()).is_none(),
            "{}: {key:?} twice",
            doc.origin
        );
    }
    objects
}

/// The labels every Helm chart adds (Helm's own bookkeeping, the chart version, and the release
/// name that keeps two releases' pods apart). The chart-equals-kustomize comparison drops them
/// wherever they appear: object labels, pod template labels and label selectors.
pub const HELM_LABELS: [&str; 4] = [
    "helm.sh/chart",
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
];

/// Lists whose order carries no meaning here and differs between a kustomize patch (which puts
/// its entries first) and the chart's template: sorted by `name`.
const NAMED_LISTS: [&str; 4] = ["env", "ports", "volumes", "volumeMounts"];

/// An object as the comparison sees it: Helm's labels dropped, named lists sorted.
pub fn normalized(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut out = serde_json::Map::new();
            for (key, child) in map {
                if HELM_LABELS.contains(&key.as_str()) {
                    continue;
                }
                let mut child = normalized(child);
                if NAMED_LISTS.contains(&key.as_str())
                    && let Value::Array(items) = &mut child
                {
                    items.sort_by_key(|item| item["name"].as_str().unwrap_or_default().to_string());
                }
                out.insert(key.clone(), child);
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(normalized).collect()),
        other => other.clone(),
    }
}

/// An object one side has and the other has not, on purpose, with the reason.
pub struct Exception {
    pub kind: &'static str,
    pub name: &'static str,
    pub reason: &'static str,
}

/// Compares a chart render with a kustomize build: the same objects (normalized), except the
/// ones listed as only in the chart or only in kustomize. Every exception must still apply, so
/// a stale one fails too. Returns the differences, one line each.
pub fn compare(
    chart: &[Doc],
    kustomize: &[Doc],
    only_chart: &[Exception],
    only_kustomize: &[Exception],
) -> Vec<String> {
    let chart = by_key(chart);
    let kustomize = by_key(kustomize);
    let excepted = |exceptions: &[Exception], key: &Key| {
        exceptions
            .iter()
            .any(|e| e.kind == key.0 && e.name == key.2)
    };
    let mut problems = Vec::new();
    for (key, object) in &chart {
        match kustomize.get(key) {
            Some(other) => {
                let (ours, theirs) = (normalized(object), normalized(other));
                if ours != theirs {
                    problems.push(format!(
                        "{key:?} differs:\n  chart:     {}\n  kustomize: {}",
                        serde_json::to_string(&ours).unwrap(),
                        serde_json::to_string(&theirs).unwrap()
                    ));
                }
            }
            None if excepted(only_chart, key) => {}
            None => problems.push(format!("{key:?} is only in the chart")),
        }
    }
    for key in kustomize.keys() {
        if !chart.contains_key(key) && !excepted(only_kustomize, key) {
            problems.push(format!("{key:?} is only in kustomize"));
        }
    }
    for (exceptions, side, other) in [
        (only_chart, &chart, &kustomize),
        (only_kustomize, &kustomize, &chart),
    ] {
        for exception in exceptions {
            let holds = side
                .keys()
                .any(|k| k.0 == exception.kind && k.2 == exception.name)
                && !other
                    .keys()
                    .any(|k| k.0 == exception.kind && k.2 == exception.name);
            if !holds {
                problems.push(format!(
                    "stale exception {} {} ({})",
                    exception.kind, exception.name, exception.reason
                ));
            }
        }
    }
    problems
}

/// A directory holding a kustomization of `resources` and `components` given relative to
/// `manifests/` (kustomize refuses absolute paths), for combinations no overlay holds.
pub fn kustomization(resources: &[&str], components: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let up = relative_to(&repo().join("manifests"), dir.path());
    let list = |items: &[&str]| {
        items
            .iter()
            .map(|item| format!("  - {}/{item}\n", up.display()))
            .collect::<String>()
    };
    let text = format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n{}components:\n{}",
        list(resources),
        list(components)
    );
    std::fs::write(dir.path().join("kustomization.yaml"), text).unwrap();
    dir
}

/// `target` as a path relative to `from` (both absolute).
fn relative_to(target: &Path, from: &Path) -> PathBuf {
    let target: Vec<_> = target.components().collect();
    let from: Vec<_> = from.components().collect();
    let common = target.iter().zip(&from).take_while(|(a, b)| a == b).count();
    let mut path = PathBuf::new();
    for _ in common..from.len() {
        path.push("..");
    }
    for part in &target[common..] {
        path.push(part);
    }
    path
}
