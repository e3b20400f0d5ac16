//! The one integration test binary: each module covers one area against real components.

#[path = "../support/mod.rs"]
mod support;

mod admission;
mod apiserver_double;
mod certs;
mod dns_bind;
mod dns_embedded;
mod dns_pdns;
mod helm;
mod install;
mod kube_serve;
mod kube_source;
mod leader;
mod replicas;
mod serve;
mod tls;
mod webhook;
