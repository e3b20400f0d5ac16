//! gateway-dns: DNS governance for the Kubernetes Gateway API.
//!
//! Data flows one way: sources → index → engine → (admission | plan → provider).

pub mod check;
pub mod cli;
pub mod engine;
pub mod index;
pub mod leader;
pub mod model;
pub mod source;
