//! TSIG keys (RFC 8945): shared by the RFC 2136 provider, which signs its UPDATEs and zone
//! transfers, and the authoritative server, which verifies requests and signs transfers and
//! NOTIFYs. Below both, so neither imports the other for a key.

use std::fmt;
use std::str::FromStr;

use hickory_proto::rr::rdata::tsig::TsigAlgorithm;
use hickory_proto::rr::{Name, TSigner};

use crate::secret::SecretSource;

/// Clock skew the server may accept (seconds), as `nsupdate` uses.
const TSIG_FUDGE: u16 = 300;

/// TSIG algorithms we sign with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TsigAlgorithmName {
    HmacSha256,
    HmacSha384,
    HmacSha512,
}

impl TsigAlgorithmName {
    pub(crate) fn to_hickory(self) -> TsigAlgorithm {
        match self {
            TsigAlgorithmName::HmacSha256 => TsigAlgorithm::HmacSha256,
            TsigAlgorithmName::HmacSha384 => TsigAlgorithm::HmacSha384,
            TsigAlgorithmName::HmacSha512 => TsigAlgorithm::HmacSha512,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TsigAlgorithmName::HmacSha256 => "hmac-sha256",
            TsigAlgorithmName::HmacSha384 => "hmac-sha384",
            TsigAlgorithmName::HmacSha512 => "hmac-sha512",
        }
    }
}

impl fmt::Display for TsigAlgorithmName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for TsigAlgorithmName {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim_end_matches('.').to_ascii_lowercase().as_str() {
            "hmac-sha256" => Ok(TsigAlgorithmName::HmacSha256),
            "hmac-sha384" => Ok(TsigAlgorithmName::HmacSha384),
            "hmac-sha512" => Ok(TsigAlgorithmName::HmacSha512),
            _ => Err(Error::UnsupportedAlgorithm(s.to_string())),
        }
    }
}

/// A TSIG key: its name as the server knows it, the algorithm, the raw secret.
#[derive(Clone)]
pub struct TsigKey {
    pub name: String,
    pub algorithm: TsigAlgorithmName,
    pub secret: Vec<u8>,
}

impl fmt::Debug for TsigKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TsigKey")
            .field("name", &self.name)
            .field("algorithm", &self.algorithm)
            .field("secret", &"<redacted>")
            .finish()
    }
}

impl TsigKey {
    /// Key whose base64 secret is read from a file or an environment variable.
    pub fn load(
        name: &str,
        algorithm: TsigAlgorithmName,
        secret: &SecretSource,
    ) -> Result<Self, Error> {
        Self::from_base64(name, algorithm, &secret.load()?)
    }

    /// The signer (and verifier) of messages with this key.
    pub fn signer(&self) -> Result<TSigner, Error> {
        let name = wire_name(&self.name).map_err(|_| Error::BadKeyName(self.name.clone()))?;
        TSigner::new(
            self.secret.clone(),
            self.algorithm.to_hickory(),
            name,
            TSIG_FUDGE,
        )
        .map_err(|_| Error::UnsupportedAlgorithm(self.algorithm.to_string()))
    }

    /// `secret_base64` as in a BIND `key` statement or `tsig-keygen` output.
    pub fn from_base64(
        name: &str,
        algorithm: TsigAlgorithmName,
        secret_base64: &str,
    ) -> Result<Self, Error> {
        let secret = data_encoding::BASE64
            .decode(secret_base64.trim().as_bytes())
            .map_err(|_| Error::BadSecret)?;
        if secret.is_empty() {
            return Err(Error::BadSecret);
        }
        Ok(TsigKey {
            name: name.trim_end_matches('.').to_string(),
            algorithm,
            secret,
        })
    }
}

/// The key name as a wire name, written as `dns::wire` writes names (any label bytes), kept
/// here so that TSIG sits below `dns`.
fn wire_name(name: &str) -> Result<Name, hickory_proto::ProtoError> {
    let name = name.strip_suffix('.').unwrap_or(name);
    let mut wire = if name.is_empty() {
        Name::root()
    } else {
        Name::from_labels(name.split('.').map(str::as_bytes))?
    };
    wire.set_fqdn(true);
    Ok(wire)
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("unsupported TSIG algorithm {0:?} (use hmac-sha256, hmac-sha384 or hmac-sha512)")]
    UnsupportedAlgorithm(String),
    #[error("TSIG secret is not valid base64")]
    BadSecret,
    #[error("TSIG key name {0:?} is not a valid DNS name")]
    BadKeyName(String),
    #[error(transparent)]
    Secret(#[from] crate::secret::Error),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn algorithm_names_parse() {
        assert_eq!(
            "HMAC-SHA512.".parse::<TsigAlgorithmName>().unwrap(),
            TsigAlgorithmName::HmacSha512
        );
        assert!("hmac-md5".parse::<TsigAlgorithmName>().is_err());
    }

    #[test]
    fn secret_must_be_base64_and_is_not_printed() {
        assert!(TsigKey::from_base64("k", TsigAlgorithmName::HmacSha256, "not base64!").is_err());
        let key = TsigKey::from_base64("k.", TsigAlgorithmName::HmacSha256, "c2VjcmV0").unwrap();
        assert_eq!(key.secret, b"secret");
        assert_eq!(key.name, "k");
        assert!(!format!("{key:?}").contains("secret\""));
    }

    #[test]
    fn a_key_whose_secret_cannot_be_read_says_why() {
        let dir = tempfile::tempdir().unwrap();
        let key = TsigKey::load(
            "k",
            TsigAlgorithmName::HmacSha256,
            &SecretSource::File(dir.path().join("absent")),
        );
        assert!(matches!(
            key,
            Err(Error::Secret(crate::secret::Error::File { .. }))
        ));
    }
}
