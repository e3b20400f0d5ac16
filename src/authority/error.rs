//! Why the embedded server cannot start or take a change.

use std::net::SocketAddr;

use crate::dns::wire::InvalidTarget;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("embedded DNS server: cannot listen on {addr} ({protocol}): {source}")]
    Bind {
        addr: SocketAddr,
        protocol: &'static str,
        source: std::io::Error,
    },
    #[error("embedded DNS server: no zone configured")]
    NoZones,
    #[error("embedded DNS server: {0} is in none of the served zones")]
    OutsideZones(String),
    #[error(transparent)]
    InvalidTarget(#[from] InvalidTarget),
    #[error("embedded DNS server: zone data lock poisoned")]
    Poisoned,
    #[error("embedded DNS server: secondaries need a TSIG key for transfers and NOTIFY")]
    SecondariesWithoutKey,
    #[error("embedded DNS server: transfer key: {0}")]
    TransferKey(#[from] crate::tsig::Error),
}

impl crate::dns::ProviderError for Error {}
