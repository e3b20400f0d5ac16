//! The one integration test binary: each module covers one area against real components.

#[path = "../support/mod.rs"]
mod support;

mod certs;
mod tls;
mod webhook;
