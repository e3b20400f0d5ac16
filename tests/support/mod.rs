//! Shared support for the end-to-end tests (and, through `#[path]`, benchmarks): real servers
//! started on loopback, killed on Drop, and the Kubernetes API double.
#![allow(dead_code)]

pub mod apiserver;
pub mod bind;
pub mod chart_values;
pub mod cluster;
pub mod dig;
pub mod helm;
pub mod install;
pub mod net;
pub mod pdns;
pub mod promql;
pub mod proxy;
pub mod webhook;
