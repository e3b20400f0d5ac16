//! gateway-dns: DNS governance for the Kubernetes Gateway API.
//!
//! Data flows one way: sources → index → engine → (admission | plan → provider).
pub mod certs;
pub mod metrics;
pub mod server;
pub mod tls;
pub mod webhook;
