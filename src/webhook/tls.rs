//! TLS for the webhook: a rustls server configuration (ring provider, TLS 1.2 and 1.3, ALPN h2
//! and http/1.1) whose certificate can be swapped at run time.
//!
//! Two sources of certificates:
//! - files (`--tls-cert`, `--tls-key`), polled for changes. Kubernetes Secret volumes replace the
//!   files by atomically swapping a `..data` symlink, which inotify on the file alone misses, so
//!   the reloader compares the *content* every poll interval. A changed pair is validated (both
//!   parse, the key matches the certificate) before it is swapped in; an invalid or half-written
//!   pair is logged and the previous pair keeps being served.
//! - in memory: a fresh CA and serving certificate at every start, with only `ca.crt` written
//!   so a local client (curl, tests) can trust it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{
    ClientHello, ResolvesServerCert, ServerSessionMemoryCache, StoresServerSessions,
};
use rustls::sign::CertifiedKey;

use super::certs;
use crate::metrics::Metrics;

/// How often the certificate files are compared with the pair being served.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(2);
/// Where the in-memory mode writes its CA certificate by default.
pub const DEFAULT_LOCAL_CA_OUT: &str = "certs/ca.crt";
/// TLS sessions remembered for resumption (per certificate generation).
const SESSION_CACHE_SIZE: usize = 256;
/// ALPN protocols offered, in order of preference.
pub const ALPN_PROTOCOLS: [&[u8]; 2] = [b"h2", b"http/1.1"];

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read {}: {source}", .path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("no PEM certificate found")]
    NoCertificate,
    #[error("certificate PEM is invalid: {0:?}")]
    CertificatePem(rustls::pki_types::pem::Error),
    #[error("private key PEM is invalid or missing: {0:?}")]
    KeyPem(rustls::pki_types::pem::Error),
    #[error("private key is not usable: {0}")]
    Key(rustls::Error),
    #[error("private key does not match the certificate: {0}")]
    KeyMismatch(rustls::Error),
    #[error("TLS configuration failed: {0}")]
    Config(rustls::Error),
    #[error(transparent)]
    Certs(#[from] certs::Error),
}

/// The ring crypto provider; gateway-dns never uses another one.
pub fn crypto_provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Parses and validates a PEM certificate chain (leaf first) and private key.
pub fn load_pair(cert_pem: &[u8], key_pem: &[u8]) -> Result<Arc<CertifiedKey>, Error> {
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(Error::CertificatePem)?;
    if chain.is_empty() {
        return Err(Error::NoCertificate);
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(Error::KeyPem)?;
    let signing_key = crypto_provider()
        .key_provider
        .load_private_key(key)
        .map_err(Error::Key)?;
    let certified = CertifiedKey::new(chain, signing_key);
    // Strict: parses the leaf and compares its public key with the private key's.
    certified.keys_match().map_err(Error::KeyMismatch)?;
    Ok(Arc::new(certified))
}

/// Serves whichever certificate pair is current; swapping it affects the next handshake only.
///
/// Swapping also forgets the TLS sessions resumable so far, so every client's next handshake
/// is a full one that verifies the new certificate (a broken rotation shows up at once instead
/// of when old sessions expire).
#[derive(Debug)]
pub struct CertResolver {
    current: ArcSwap<CertifiedKey>,
    sessions: Arc<RotatingSessionCache>,
}

impl CertResolver {
    pub fn new(initial: Arc<CertifiedKey>) -> Self {
        Self {
            current: ArcSwap::new(initial),
            sessions: Arc::new(RotatingSessionCache::new()),
        }
    }

    pub fn replace(&self, pair: Arc<CertifiedKey>) {
        self.current.store(pair);
        self.sessions.forget_all();
    }

    pub fn current(&self) -> Arc<CertifiedKey> {
        self.current.load_full()
    }
}

impl ResolvesServerCert for CertResolver {
    fn resolve(&self, _client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.load_full())
    }
}

/// rustls's in-memory session cache, replaced by an empty one when the certificate changes.
#[derive(Debug)]
struct RotatingSessionCache {
    current: ArcSwap<ServerSessionMemoryCache>,
}

impl RotatingSessionCache {
    fn new() -> Self {
        Self {
            current: ArcSwap::new(ServerSessionMemoryCache::new(SESSION_CACHE_SIZE)),
        }
    }

    fn forget_all(&self) {
        self.current
            .store(ServerSessionMemoryCache::new(SESSION_CACHE_SIZE));
    }
}

impl StoresServerSessions for RotatingSessionCache {
    fn put(&self, key: Vec<u8>, value: Vec<u8>) -> bool {
        self.current.load().put(key, value)
    }

    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.current.load().get(key)
    }

    fn take(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.current.load().take(key)
    }

    fn can_cache(&self) -> bool {
        self.current.load().can_cache()
    }
}

/// A rustls server configuration on the ring provider, TLS 1.3 and 1.2, ALPN h2 then http/1.1.
pub fn server_config(resolver: Arc<CertResolver>) -> Result<Arc<rustls::ServerConfig>, Error> {
    build_server_config(resolver, None)
}

/// The same configuration as the runtime's, but requiring a client certificate signed by one of
/// the CAs in the PEM file `client_ca` (`--client-ca`): only kube-apiserver, given a client
/// certificate for this webhook, may call it.
pub fn requiring_client_certs(
    runtime: &TlsRuntime,
    client_ca: &std::path::Path,
) -> Result<Arc<rustls::ServerConfig>, Error> {
    let pem = std::fs::read(client_ca).map_err(|source| Error::Read {
        path: client_ca.to_path_buf(),
        source,
    })?;
    let mut roots = rustls::RootCertStore::empty();
    for certificate in CertificateDer::pem_slice_iter(&pem) {
        roots
            .add(certificate.map_err(Error::CertificatePem)?)
            .map_err(Error::Config)?;
    }
    if roots.is_empty() {
        return Err(Error::NoCertificate);
    }
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        crypto_provider(),
    )
    .build()
    .map_err(|error| Error::Config(rustls::Error::General(error.to_string())))?;
    build_server_config(runtime.resolver.clone(), Some(verifier))
}

fn build_server_config(
    resolver: Arc<CertResolver>,
    client_verifier: Option<Arc<dyn rustls::server::danger::ClientCertVerifier>>,
) -> Result<Arc<rustls::ServerConfig>, Error> {
    let builder = rustls::ServerConfig::builder_with_provider(crypto_provider())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(Error::Config)?;
    let builder = match client_verifier {
        Some(verifier) => builder.with_client_cert_verifier(verifier),
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_cert_resolver(resolver.clone());
    config.session_storage = resolver.sessions.clone();
    config.alpn_protocols = ALPN_PROTOCOLS
        .iter()
        .map(|protocol| protocol.to_vec())
        .collect();
    Ok(Arc::new(config))
}

/// Where the serving certificate comes from.
#[derive(Debug, Clone)]
pub enum CertSource {
    /// PEM files on disk, re-read when their content changes.
    Files {
        cert_path: PathBuf,
        key_path: PathBuf,
        poll_interval: Duration,
    },
    /// A pair generated in memory at start; only the CA certificate is written, to `ca_out`.
    InMemory {
        service: String,
        namespace: String,
        ca_out: PathBuf,
    },
}

/// Everything the server needs for TLS; keep it alive as long as the server runs (dropping it
/// stops the reloader).
#[derive(Debug)]
pub struct TlsRuntime {
    pub server_config: Arc<rustls::ServerConfig>,
    pub resolver: Arc<CertResolver>,
    /// Present for [`CertSource::Files`].
    pub reloader: Option<ReloaderHandle>,
    /// Present for [`CertSource::InMemory`]: the CA that signed the serving certificate.
    pub ca_cert_pem: Option<String>,
}

/// Loads the initial pair (failing fast if it is invalid) and, for files, starts the reloader.
/// Must be called inside a tokio runtime.
pub async fn start(source: CertSource, metrics: Arc<Metrics>) -> Result<TlsRuntime, Error> {
    match source {
        CertSource::Files {
            cert_path,
            key_path,
            poll_interval,
        } => {
            let (reloader, resolver) = FileReloader::load(cert_path, key_path, metrics).await?;
            let server_config = server_config(resolver.clone())?;
            Ok(TlsRuntime {
                server_config,
                resolver,
                reloader: Some(reloader.spawn(poll_interval)),
                ca_cert_pem: None,
            })
        }
        CertSource::InMemory {
            service,
            namespace,
            ca_out,
        } => {
            let generated = in_memory_pair(&service, &namespace, &ca_out)?;
            let resolver = Arc::new(CertResolver::new(load_pair(
                generated.cert_pem.as_bytes(),
                generated.key_pem.as_bytes(),
            )?));
            let server_config = server_config(resolver.clone())?;
            Ok(TlsRuntime {
                server_config,
                resolver,
                reloader: None,
                ca_cert_pem: Some(generated.ca_cert_pem),
            })
        }
    }
}

/// Generates a CA and serving pair for the Service and writes only the CA certificate to
/// `ca_out` (parent directories created, an older file replaced).
pub fn in_memory_pair(
    service: &str,
    namespace: &str,
    ca_out: &Path,
) -> Result<certs::GeneratedCerts, Error> {
    let generated = certs::generate(service, namespace)?;
    if let Some(parent) = ca_out
        .parent()
        .filter(|parent| !parent.as_os_str().is_empty())
    {
        std::fs::create_dir_all(parent).map_err(|source| {
            Error::Certs(certs::Error::CreateDir {
                path: parent.to_path_buf(),
                source,
            })
        })?;
    }
    certs::write_file_atomically(ca_out, generated.ca_cert_pem.as_bytes(), 0o644, true)?;
    tracing::info!(path = %ca_out.display(), "wrote the in-memory CA certificate for local clients");
    Ok(generated)
}

/// What one poll of the certificate files found.
#[derive(Debug)]
pub enum ReloadOutcome {
    /// Same content as the pair being served (or as the last rejected pair).
    Unchanged,
    /// A new valid pair is now served.
    Reloaded,
    /// New content that is not a valid pair; the old pair is still served.
    Rejected(Error),
    /// A file could not be read (e.g. mid-swap); the old pair is still served.
    Unreadable(Error),
}

/// Compares the certificate files with the pair being served and swaps in valid changes.
#[derive(Debug)]
pub struct FileReloader {
    cert_path: PathBuf,
    key_path: PathBuf,
    resolver: Arc<CertResolver>,
    metrics: Arc<Metrics>,
    served: (Vec<u8>, Vec<u8>),
    last_rejected: Option<(Vec<u8>, Vec<u8>)>,
    unreadable: bool,
}

impl FileReloader {
    /// Reads and validates the initial pair.
    pub async fn load(
        cert_path: PathBuf,
        key_path: PathBuf,
        metrics: Arc<Metrics>,
    ) -> Result<(Self, Arc<CertResolver>), Error> {
        let (cert_pem, key_pem) = read_pair(&cert_path, &key_path).await?;
        let pair = load_pair(&cert_pem, &key_pem)?;
        let resolver = Arc::new(CertResolver::new(pair));
        let reloader = Self {
            cert_path,
            key_path,
            resolver: resolver.clone(),
            metrics,
            served: (cert_pem, key_pem),
            last_rejected: None,
            unreadable: false,
        };
        Ok((reloader, resolver))
    }

    /// Polls once. Logs each new problem once rather than at every poll.
    pub async fn check(&mut self) -> ReloadOutcome {
        let contents = match read_pair(&self.cert_path, &self.key_path).await {
            Ok(contents) => contents,
            Err(error) => {
                if !self.unreadable {
                    tracing::error!(%error, "cannot read the TLS pair; still serving the previous certificate");
                }
                self.unreadable = true;
                return ReloadOutcome::Unreadable(error);
            }
        };
        self.unreadable = false;
        if contents == self.served || self.last_rejected.as_ref() == Some(&contents) {
            return ReloadOutcome::Unchanged;
        }
        match load_pair(&contents.0, &contents.1) {
            Ok(pair) => {
                self.resolver.replace(pair);
                self.served = contents;
                self.last_rejected = None;
                self.metrics.record_tls_reload("reloaded");
                tracing::info!(cert = %self.cert_path.display(), "serving a new TLS certificate");
                ReloadOutcome::Reloaded
            }
            Err(error) => {
                self.metrics.record_tls_reload("rejected");
                tracing::error!(
                    %error,
                    cert = %self.cert_path.display(),
                    key = %self.key_path.display(),
                    "rejected a changed TLS pair; still serving the previous certificate"
                );
                self.last_rejected = Some(contents);
                ReloadOutcome::Rejected(error)
            }
        }
    }

    /// Polls every `interval` on a tokio task until the handle is dropped.
    pub fn spawn(mut self, interval: Duration) -> ReloaderHandle {
        let task = tokio::spawn(async move {
            let mut ticker = tokio::time::interval(interval);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            ticker.tick().await; // the first tick is immediate; the pair was just loaded
            loop {
                ticker.tick().await;
                self.check().await;
            }
        });
        ReloaderHandle { task }
    }
}

/// Stops the reloader task when dropped.
#[derive(Debug)]
pub struct ReloaderHandle {
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ReloaderHandle {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn read_pair(cert_path: &Path, key_path: &Path) -> Result<(Vec<u8>, Vec<u8>), Error> {
    let read = |path: &Path| {
        let path = path.to_path_buf();
        async move {
            tokio::fs::read(&path)
                .await
                .map_err(|source| Error::Read { path, source })
        }
    };
    Ok((read(cert_path).await?, read(key_path).await?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_pair_accepts_a_generated_pair_and_rejects_a_foreign_key() {
        let first = certs::generate("svc", "ns").unwrap();
        let second = certs::generate("svc", "ns").unwrap();
        assert!(load_pair(first.cert_pem.as_bytes(), first.key_pem.as_bytes()).is_ok());
        assert!(matches!(
            load_pair(first.cert_pem.as_bytes(), second.key_pem.as_bytes()),
            Err(Error::KeyMismatch(_))
        ));
        assert!(matches!(
            load_pair(b"", first.key_pem.as_bytes()),
            Err(Error::NoCertificate)
        ));
        let truncated = &first.key_pem.as_bytes()[..first.key_pem.len() / 2];
        assert!(load_pair(first.cert_pem.as_bytes(), truncated).is_err());
    }
}
