//! The rule engine and `gateway-dns check`, tested from the outside, and the import rules of
//! ARCHITECTURE.md. One test binary: `cargo test --test engine`.
//!
//! Tests that read the shared reference cases and the extdns-compare tool look for them where
//! `objects::shared_dir` says; when they are absent those tests fail saying so.

mod attachment;
mod cli;
mod cname;
mod conformance;
mod decoders;
mod explain;
mod extdns;
mod grace;
mod index;
mod l4;
mod layers;
mod objects;
mod ownership;
mod props;
mod rules;
mod schema;
mod shared;
mod target_cidr;
mod targets;
mod ttl;
mod unit_cases;
