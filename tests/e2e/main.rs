//! The one integration-test binary: each module tests one area against real components.
#[path = "../support/mod.rs"]
mod support;

mod apiserver_double;
mod kube_source;
mod leader;
