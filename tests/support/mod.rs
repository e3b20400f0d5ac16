//! Support code shared by the end-to-end tests (and, through `#[path]`, by benchmarks).
#![allow(dead_code)]

pub mod install;
pub mod webhook;
