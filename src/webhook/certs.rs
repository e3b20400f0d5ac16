//! Certificates for the webhook: a private CA and a serving certificate for the Service.
//!
//! The CA signs one serving certificate whose SANs are every name kube-apiserver (and a local
//! client) may use to reach the webhook. The CA key is never written: regenerate to rotate.

use std::fs::{self, OpenOptions};
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use time::{Duration, OffsetDateTime};

/// Validity of the generated CA.
pub const CA_VALIDITY_DAYS: i64 = 3650;
/// Validity of the generated serving certificate.
pub const SERVING_VALIDITY_DAYS: i64 = 365;
/// Start validity slightly in the past so small clock skew between nodes does not matter.
const BACKDATE_MINUTES: i64 = 5;

pub const CA_CERT_FILE: &str = "ca.crt";
pub const TLS_CERT_FILE: &str = "tls.crt";
pub const TLS_KEY_FILE: &str = "tls.key";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "invalid {what} {value:?}: must be a DNS label (lower-case letters, digits, '-'; 1-63 chars)"
    )]
    InvalidName { what: &'static str, value: String },
    #[error("certificate generation failed: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("{} already exists; pass --force to overwrite", .path.display())]
    WouldOverwrite { path: PathBuf },
    #[error("cannot create directory {}: {source}", .path.display())]
    CreateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write {}: {source}", .path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// A freshly generated CA and serving pair, PEM-encoded.
#[derive(Clone)]
pub struct GeneratedCerts {
    /// The CA certificate: the `caBundle` of the webhook configuration.
    pub ca_cert_pem: String,
    /// The serving certificate (leaf only).
    pub cert_pem: String,
    /// The serving certificate's private key (PKCS#8).
    pub key_pem: String,
}

impl std::fmt::Debug for GeneratedCerts {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the private key.
        formatter
            .debug_struct("GeneratedCerts")
            .field("ca_cert_pem", &self.ca_cert_pem)
            .field("cert_pem", &self.cert_pem)
            .finish_non_exhaustive()
    }
}

/// The names kube-apiserver may call Service `service` in `namespace` by.
pub fn service_names(service: &str, namespace: &str) -> Vec<String> {
    vec![
        service.to_string(),
        format!("{service}.{namespace}"),
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
    ]
}

/// The subject alternative names of the serving certificate for Service `service` in
/// `namespace`, in the order they are written: the Service's names, then the local ones.
pub fn service_sans(service: &str, namespace: &str) -> Vec<String> {
    let mut names = service_names(service, namespace);
    names.extend(["localhost".to_string(), "127.0.0.1".to_string()]);
    names
}

/// Generates a CA (10 years) and a serving certificate (1 year) for the Service.
pub fn generate(service: &str, namespace: &str) -> Result<GeneratedCerts, Error> {
    check_dns_label("service name", service)?;
    check_dns_label("namespace", namespace)?;
    let now = OffsetDateTime::now_utc();
    let not_before = now - Duration::minutes(BACKDATE_MINUTES);

    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.distinguished_name = rcgen::DistinguishedName::new();
    ca_params.distinguished_name.push(
        DnType::CommonName,
        format!("gateway-dns CA for {service}.{namespace}"),
    );
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    ca_params.not_before = not_before;
    ca_params.not_after = now + Duration::days(CA_VALIDITY_DAYS);
    let ca_key = KeyPair::generate()?;
    let ca_cert = ca_params.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca_params, ca_key);

    let mut leaf_params = CertificateParams::new(service_sans(service, namespace))?;
    leaf_params.distinguished_name = rcgen::DistinguishedName::new();
    leaf_params
        .distinguished_name
        .push(DnType::CommonName, format!("{service}.{namespace}.svc"));
    leaf_params.is_ca = IsCa::ExplicitNoCa;
    leaf_params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    leaf_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    leaf_params.use_authority_key_identifier_extension = true;
    leaf_params.not_before = not_before;
    leaf_params.not_after = now + Duration::days(SERVING_VALIDITY_DAYS);
    let leaf_key = KeyPair::generate()?;
    let leaf_cert = leaf_params.signed_by(&leaf_key, &issuer)?;

    Ok(GeneratedCerts {
        ca_cert_pem: ca_cert.pem(),
        cert_pem: leaf_cert.pem(),
        key_pem: leaf_key.serialize_pem(),
    })
}

/// Writes `ca.crt`, `tls.crt` and `tls.key` into `out_dir` (created if missing) and returns
/// their paths. The key is created with mode 0600, certificates 0644. Without `force`, nothing
/// is written when any of the three files already exists.
pub fn write_dir(
    certs: &GeneratedCerts,
    out_dir: &Path,
    force: bool,
) -> Result<Vec<PathBuf>, Error> {
    fs::create_dir_all(out_dir).map_err(|source| Error::CreateDir {
        path: out_dir.to_path_buf(),
        source,
    })?;
    let files = [
        (CA_CERT_FILE, certs.ca_cert_pem.as_str(), 0o644),
        (TLS_CERT_FILE, certs.cert_pem.as_str(), 0o644),
        (TLS_KEY_FILE, certs.key_pem.as_str(), 0o600),
    ];
    if !force {
        // Check all three first so a refusal leaves the directory untouched.
        for (name, _, _) in &files {
            let path = out_dir.join(name);
            if fs::symlink_metadata(&path).is_ok() {
                return Err(Error::WouldOverwrite { path });
            }
        }
    }
    let mut written = Vec::with_capacity(files.len());
    for (name, contents, mode) in files {
        let path = out_dir.join(name);
        write_file_atomically(&path, contents.as_bytes(), mode, force)?;
        written.push(path);
    }
    Ok(written)
}

/// Generates a pair for the Service and writes it into `out_dir`: what `gateway-dns certs` does.
pub fn run(
    service: &str,
    namespace: &str,
    out_dir: &Path,
    force: bool,
) -> Result<Vec<PathBuf>, Error> {
    let certs = generate(service, namespace)?;
    write_dir(&certs, out_dir, force)
}

/// Writes `contents` to `path` with `mode` through a temporary file in the same directory and a
/// rename, so readers (such as a reloading server) never see a half-written file. Without
/// `overwrite`, an existing `path` is an error.
pub(crate) fn write_file_atomically(
    path: &Path,
    contents: &[u8],
    mode: u32,
    overwrite: bool,
) -> Result<(), Error> {
    let write_error = |source| Error::Write {
        path: path.to_path_buf(),
        source,
    };
    let file_name = path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temporary = path.with_file_name(format!(".{file_name}.tmp-{}", std::process::id()));
    // A leftover from an interrupted run must not make `create_new` fail forever.
    let _ = fs::remove_file(&temporary);
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&temporary)
        .map_err(write_error)?;
    let result = file
        .write_all(contents)
        .and_then(|()| file.sync_all())
        .and_then(|()| {
            if overwrite {
                fs::rename(&temporary, path)
            } else {
                // hard_link fails if `path` appeared meanwhile: never clobber without force.
                fs::hard_link(&temporary, path).and_then(|()| fs::remove_file(&temporary))
            }
        });
    if let Err(source) = result {
        let _ = fs::remove_file(&temporary);
        if source.kind() == std::io::ErrorKind::AlreadyExists {
            return Err(Error::WouldOverwrite {
                path: path.to_path_buf(),
            });
        }
        return Err(write_error(source));
    }
    Ok(())
}

fn check_dns_label(what: &'static str, value: &str) -> Result<(), Error> {
    let valid = !value.is_empty()
        && value.len() <= 63
        && value
            .bytes()
            .all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'-')
        && !value.starts_with('-')
        && !value.ends_with('-');
    if valid {
        Ok(())
    } else {
        Err(Error::InvalidName {
            what,
            value: value.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sans_cover_every_service_form() {
        assert_eq!(
            service_sans("gw", "infra"),
            vec![
                "gw",
                "gw.infra",
                "gw.infra.svc",
                "gw.infra.svc.cluster.local",
                "localhost",
                "127.0.0.1"
            ]
        );
    }

    #[test]
    fn rejects_names_that_are_not_dns_labels() {
        assert!(matches!(
            generate("Bad_Name", "ns"),
            Err(Error::InvalidName { .. })
        ));
        assert!(matches!(
            generate("ok", "-ns"),
            Err(Error::InvalidName { .. })
        ));
        assert!(matches!(generate("", "ns"), Err(Error::InvalidName { .. })));
    }
}
