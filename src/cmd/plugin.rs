//! `kubectl gateway-dns`: what the plugin adds to `explain`, `check` and `zone owners` (read by
//! [`crate::cli::parse_plugin`]): the namespace kubectl takes when `-n` is not given.

use crate::cli::PluginCluster;
use crate::source::kube;

/// The namespace of the context kubectl's flags name (its current one without `--context`),
/// else `default`, as kubectl takes it. A kubeconfig that cannot be read gives `default`:
/// the client made from it next says what is wrong with it, once.
pub fn context_namespace(cluster: &PluginCluster) -> String {
    kube::context_namespace(cluster.kubeconfig.as_deref(), cluster.context.as_deref())
        .ok()
        .flatten()
        .unwrap_or_else(|| "default".to_owned())
}
