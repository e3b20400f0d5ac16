//! Where a secret (a TSIG key, a provider's API key) comes from: a file or an environment
//! variable, never the command line itself.

use std::path::PathBuf;

/// Why a secret could not be read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read secret file {path}: {source}")]
    File {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("secret file {0} is empty")]
    EmptyFile(PathBuf),
    #[error("no secret given: set {env} or pass a secret file")]
    Missing { env: String },
}

/// Where a secret (TSIG key, API key) comes from: never the command line itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretSource {
    File(PathBuf),
    Env(String),
}

impl SecretSource {
    /// The file if one is given, else the environment variable `env`.
    pub fn pick(file: Option<PathBuf>, env: &str) -> Self {
        match file {
            Some(path) => SecretSource::File(path),
            None => SecretSource::Env(env.to_string()),
        }
    }

    /// Read the secret, trimmed of surrounding white space.
    pub fn load(&self) -> Result<String, Error> {
        match self {
            SecretSource::File(path) => {
                let text = std::fs::read_to_string(path).map_err(|source| Error::File {
                    path: path.clone(),
                    source,
                })?;
                let secret = text.trim().to_string();
                if secret.is_empty() {
                    return Err(Error::EmptyFile(path.clone()));
                }
                Ok(secret)
            }
            SecretSource::Env(env) => match std::env::var(env) {
                Ok(value) if !value.trim().is_empty() => Ok(value.trim().to_string()),
                _ => Err(Error::Missing { env: env.clone() }),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_come_from_a_file_or_the_environment() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret");
        std::fs::write(&path, "  c2VjcmV0\n").unwrap();
        let source = SecretSource::pick(Some(path.clone()), "UNUSED");
        assert_eq!(source.load().unwrap(), "c2VjcmV0");
        std::fs::write(&path, "\n").unwrap();
        assert!(matches!(source.load(), Err(Error::EmptyFile(_))));
        let missing = SecretSource::pick(None, "GATEWAY_DNS_TEST_SURELY_UNSET_VARIABLE");
        let err = missing.load().unwrap_err().to_string();
        assert!(
            err.contains("GATEWAY_DNS_TEST_SURELY_UNSET_VARIABLE"),
            "{err}"
        );
    }
}
