//! Shared support for the integration tests (and, through `#[path]`, benchmarks): real servers
//! started on loopback and stopped on Drop. `cluster` is a real Kubernetes control plane and
//! `proxy` the network between one client and it; `apiserver` is the in-process API double,
//! kept only for faults a real API server cannot produce (its module doc says which).
#![allow(dead_code)]

pub mod apiserver;
pub mod big_route;
pub mod bind;
pub mod browser;
pub mod chart_values;
pub mod cluster;
pub mod dig;
pub mod docs;
pub mod extdns;
pub mod helm;
pub mod install;
pub mod net;
pub mod objects;
pub mod pdns;
pub mod promql;
pub mod proxy;
pub mod records;
pub mod webhook;
