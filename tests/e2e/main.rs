//! End-to-end tests, one of the four integration test binaries (beside `engine`, `cluster` and
//! `hostile`): each module covers one area against real components (`kube_faults` against the
//! API double, for faults a real API server cannot produce).

#[path = "../support/mod.rs"]
mod support;

mod admission;
mod certs;
mod cli;
mod dns_bind;
mod dns_dnssec;
mod dns_embedded;
mod dns_grace;
mod dns_pdns;
mod dns_secondary;
mod dns_targets;
mod dns_txt_registry;
mod explain;
mod helm;
mod install;
mod krew;
mod kube_faults;
mod logs;
mod once;
mod serve;
mod tls;
mod webhook;
