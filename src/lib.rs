//! gateway-dns: DNS governance for the Kubernetes Gateway API.
//!
//! Data flows one way: sources → index → engine → (admission | plan → provider).

pub mod allocator;
pub mod authority;
pub mod cli;
pub mod cmd;
pub mod dns;
pub mod engine;
pub mod feedback;
pub mod findings;
pub mod health;
pub mod index;
pub mod leader;
pub mod metrics;
pub mod model;
pub mod net;
pub mod retry;
pub mod secret;
pub mod source;
pub mod status;
pub mod sync;
pub mod tsig;
pub mod webhook;
pub mod zone_view;
