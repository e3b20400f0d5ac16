//! gateway-dns: DNS governance for the Kubernetes Gateway API.
//!
//! Data flows one way: sources → index → engine → (admission | plan → provider).

pub mod dns;
pub mod sync;
