//! The rule engine and `gateway-dns check`, tested from the outside (issue 2's "Tests it must
//! have"). One test binary: `cargo test --test engine`.
//!
//! Tests that read `../shared` (the reference cases and the extdns-compare tool) look for it next
//! to the crate, or where `GATEWAY_DNS_SHARED_DIR` points; when it is absent they fail saying so.

mod attachment;
mod cli;
mod conformance;
mod decoders;
mod extdns;
mod index;
mod objects;
mod props;
mod rules;
mod schema;
mod unit_cases;
