//! The rule engine and `gateway-dns check`, tested from the outside, and the import rules of
//! ARCHITECTURE.md. One test binary: `cargo test --test engine`.
//!
//! Tests that read the reference cases (external-dns's and the Gateway API conformance tests',
//! transcribed) find them where `objects::cases_dir` says: `tests/fixtures/cases`, or another
//! copy named by `GATEWAY_DNS_SHARED_DIR`.

/// The object builders every test binary shares (the rest of `support` starts servers, which
/// these tests do not need).
#[allow(dead_code)]
#[path = "../support/objects.rs"]
mod builders;

mod attachment;
mod cli;
mod cname;
mod conformance;
mod decoders;
mod explain;
mod extdns;
mod grace;
mod health;
mod index;
mod l4;
mod layers;
mod objects;
mod ownership;
mod props;
mod readiness;
mod rules;
mod schema;
mod shared;
mod status_page;
mod target_cidr;
mod targets;
mod ttl;
mod unit_cases;
mod zone;
