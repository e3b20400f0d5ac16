//! Hostile clients against real listeners on loopback: idle and silent connections, oversized
//! routes, malformed DNS. Each test is bounded in count and time, and each one failed before the
//! defence it covers existed.

#[path = "../support/mod.rs"]
mod support;

mod client_certs;
mod connections;
mod dns;
mod fuzz_corpus;
/// The fuzz targets' reading of an input, replayed by `fuzz_corpus`.
#[path = "../../fuzz/inputs.rs"]
mod inputs;
mod routes;
