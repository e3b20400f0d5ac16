//! The one integration test binary: each module covers one area against real components.

#[path = "../support/mod.rs"]
mod support;

mod admission;
mod certs;
mod install;
mod tls;
mod webhook;
