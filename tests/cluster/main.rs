//! Tests against a real Kubernetes control plane: etcd and kube-apiserver built from the
//! Kubernetes Go modules, real kubectl, the Gateway API CRDs, and the real `gateway-dns serve`
//! binary with the RBAC and webhook configuration of `manifests/base`.

#[path = "../support/mod.rs"]
mod support;

mod api;
mod certs;
mod check;
mod dev_cluster;
mod explain;
mod faults;
mod feedback;
mod findings;
mod health;
mod helm;
mod leader;
mod lease;
mod ownership;
mod peer;
mod plugin;
mod rbac;
mod readiness;
mod replicas;
mod seed_story;
mod serve;
mod source;
mod status_page;
mod zones;
