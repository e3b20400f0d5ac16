//! End-to-end tests: one test binary, real components on loopback.

#[path = "../support/mod.rs"]
mod support;

mod dns_bind;
mod dns_embedded;
mod dns_pdns;
