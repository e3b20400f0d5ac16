//! Shared support for the end-to-end tests (and, through `#[path]`, benchmarks): real servers
//! started on loopback, killed on Drop.
#![allow(dead_code)]

pub mod bind;
pub mod dig;
pub mod net;
pub mod pdns;
pub mod webhook;
