//! `gateway-dns certs --secret`: the webhook's certificates kept in the cluster, as the Helm
//! chart's certificate Jobs use them. One step makes (or keeps) the TLS Secret, a later one copies
//! its CA into a ValidatingWebhookConfiguration's `caBundle`; each reads before it writes, so a
//! rerun changes nothing that is still good. Nothing is ever deleted.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::api::PostParams;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::ServerCertVerifier as _;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, RootCertStore};
use time::{Duration, OffsetDateTime};

use super::certs::{self, CA_CERT_FILE, GeneratedCerts, TLS_CERT_FILE, TLS_KEY_FILE};
use super::tls;

/// A kept certificate must stay valid at least this long; closer to its end it is replaced.
pub const RENEW_BEFORE_DAYS: i64 = 30;
/// The Secret type the pods' volume expects (`tls.crt`, `tls.key`).
const TLS_SECRET_TYPE: &str = "kubernetes.io/tls";
/// Read-modify-write rounds before giving up on objects someone else keeps changing.
const ATTEMPTS: usize = 5;

/// Where a Secret is: `NAMESPACE/NAME`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretRef {
    pub namespace: String,
    pub name: String,
}

impl std::fmt::Display for SecretRef {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "{}/{}", self.namespace, self.name)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Generate(#[from] certs::Error),
    // `cause`, not `source`: kube's own text of a refusal repeats it with Rust debug output.
    #[error("cannot {action} Secret {secret}: {}", describe(.cause))]
    Secret {
        action: &'static str,
        secret: SecretRef,
        cause: kube::Error,
    },
    #[error(
        "Secret {secret} does not exist: make it first with `gateway-dns certs --secret {secret}`"
    )]
    SecretMissing { secret: SecretRef },
    #[error("Secret {secret} has no {CA_CERT_FILE}")]
    NoCa { secret: SecretRef },
    #[error("the {CA_CERT_FILE} of Secret {secret} holds no PEM certificate")]
    BadCa { secret: SecretRef },
    #[error("cannot {action} ValidatingWebhookConfiguration {name}: {}", describe(.cause))]
    Webhook {
        action: &'static str,
        name: String,
        cause: kube::Error,
    },
    #[error("ValidatingWebhookConfiguration {name} does not exist")]
    WebhookMissing { name: String },
    #[error("ValidatingWebhookConfiguration {name} has no webhooks to patch")]
    NoWebhooks { name: String },
    #[error("{what} kept changing under us; gave up after {ATTEMPTS} attempts")]
    Contended { what: String },
}

/// What became of the Secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretOutcome {
    Created {
        expires: OffsetDateTime,
    },
    /// Still good: left as it was.
    Kept {
        expires: OffsetDateTime,
    },
    /// Replaced for this reason: its three keys rewritten, its other keys and type kept.
    Replaced {
        reason: String,
        expires: OffsetDateTime,
    },
}

/// What became of the webhook configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WebhookOutcome {
    Patched { webhooks: usize },
    Unchanged { webhooks: usize },
}

/// Makes Secret `secret` hold a CA and a serving certificate for Service `service` in
/// `namespace`, unless it holds a pair that is still good for it (see [`check_pair`]) and
/// `force` is off. Another writer creating the Secret meanwhile is no error: it is read again.
pub async fn ensure_secret(
    client: kube::Client,
    secret: &SecretRef,
    service: &str,
    namespace: &str,
    force: bool,
) -> Result<SecretOutcome, Error> {
    let api: Api<Secret> = Api::namespaced(client, &secret.namespace);
    let error = |action| {
        let secret = secret.clone();
        move |cause| Error::Secret {
            action,
            secret,
            cause,
        }
    };
    for _ in 0..ATTEMPTS {
        let Some(mut existing) = api.get_opt(&secret.name).await.map_err(error("read"))? else {
            let pair = certs::generate(service, namespace)?;
            let expires = expiry(&pair);
            let object = Secret {
                metadata: ObjectMeta {
                    name: Some(secret.name.clone()),
                    namespace: Some(secret.namespace.clone()),
                    labels: Some(BTreeMap::from([(
                        "app.kubernetes.io/managed-by".to_string(),
                        "gateway-dns-certs".to_string(),
                    )])),
                    ..ObjectMeta::default()
                },
                type_: Some(TLS_SECRET_TYPE.to_string()),
                data: Some(secret_data(&pair)),
                ..Secret::default()
            };
            match api.create(&PostParams::default(), &object).await {
                Ok(_) => return Ok(SecretOutcome::Created { expires }),
                Err(kube::Error::Api(status)) if status.is_already_exists() => continue,
                Err(cause) => return Err(error("create")(cause)),
            }
        };
        let data = existing.data.clone().unwrap_or_default();
        let reason = match check_pair(&data, service, namespace, OffsetDateTime::now_utc()) {
            Ok(expires) if !force => return Ok(SecretOutcome::Kept { expires }),
            Ok(_) => "--force".to_string(),
            Err(stale) => stale,
        };
        let pair = certs::generate(service, namespace)?;
        let expires = expiry(&pair);
        // Other keys, labels and the type (immutable) stay; the resourceVersion read above makes
        // the replace fail rather than overwrite a concurrent change.
        let mut merged = data;
        merged.extend(secret_data(&pair));
        existing.data = Some(merged);
        existing.string_data = None;
        match api
            .replace(&secret.name, &PostParams::default(), &existing)
            .await
        {
            Ok(_) => return Ok(SecretOutcome::Replaced { reason, expires }),
            Err(kube::Error::Api(status)) if status.is_conflict() => continue,
            Err(cause) => return Err(error("update")(cause)),
        }
    }
    Err(Error::Contended {
        what: format!("Secret {secret}"),
    })
}

/// Sets the `caBundle` of every webhook of ValidatingWebhookConfiguration `name` to the
/// `ca.crt` of Secret `secret`.
pub async fn patch_webhook(
    client: kube::Client,
    secret: &SecretRef,
    name: &str,
) -> Result<WebhookOutcome, Error> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &secret.namespace);
    let found = secrets
        .get_opt(&secret.name)
        .await
        .map_err(|cause| Error::Secret {
            action: "read",
            secret: secret.clone(),
            cause,
        })?
        .ok_or_else(|| Error::SecretMissing {
            secret: secret.clone(),
        })?;
    let ca = found
        .data
        .and_then(|mut data| data.remove(CA_CERT_FILE))
        .ok_or_else(|| Error::NoCa {
            secret: secret.clone(),
        })?;
    if parse_pem_certificates(&ca.0).is_none() {
        return Err(Error::BadCa {
            secret: secret.clone(),
        });
    }

    let configurations: Api<ValidatingWebhookConfiguration> = Api::all(client);
    let error = |action| {
        let name = name.to_string();
        move |cause| Error::Webhook {
            action,
            name,
            cause,
        }
    };
    for _ in 0..ATTEMPTS {
        let mut configuration = configurations
            .get_opt(name)
            .await
            .map_err(error("read"))?
            .ok_or_else(|| Error::WebhookMissing {
                name: name.to_string(),
            })?;
        let webhooks = configuration.webhooks.get_or_insert_with(Vec::new);
        if webhooks.is_empty() {
            return Err(Error::NoWebhooks {
                name: name.to_string(),
            });
        }
        let count = webhooks.len();
        if webhooks
            .iter()
            .all(|webhook| webhook.client_config.ca_bundle.as_ref() == Some(&ca))
        {
            return Ok(WebhookOutcome::Unchanged { webhooks: count });
        }
        for webhook in webhooks.iter_mut() {
            webhook.client_config.ca_bundle = Some(ca.clone());
        }
        match configurations
            .replace(name, &PostParams::default(), &configuration)
            .await
        {
            Ok(_) => return Ok(WebhookOutcome::Patched { webhooks: count }),
            Err(kube::Error::Api(status)) if status.is_conflict() => continue,
            Err(cause) => return Err(error("update")(cause)),
        }
    }
    Err(Error::Contended {
        what: format!("ValidatingWebhookConfiguration {name}"),
    })
}

/// The API server's own words for a refusal, else the client's error.
fn describe(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => format!("{} ({})", status.message, status.reason),
        other => other.to_string(),
    }
}

fn secret_data(pair: &GeneratedCerts) -> BTreeMap<String, ByteString> {
    [
        (CA_CERT_FILE, &pair.ca_cert_pem),
        (TLS_CERT_FILE, &pair.cert_pem),
        (TLS_KEY_FILE, &pair.key_pem),
    ]
    .into_iter()
    .map(|(key, pem)| (key.to_string(), ByteString(pem.as_bytes().to_vec())))
    .collect()
}

/// Whether a Secret's data holds a pair still good for the Service at `now`: `tls.key` matches
/// `tls.crt`, which `ca.crt` signed for every name kube-apiserver may call the Service by, and
/// both certificates stay valid for [`RENEW_BEFORE_DAYS`] more. Returns the serving
/// certificate's end, or why the pair is not good (a sentence for the log).
pub fn check_pair(
    data: &BTreeMap<String, ByteString>,
    service: &str,
    namespace: &str,
    now: OffsetDateTime,
) -> Result<OffsetDateTime, String> {
    let get = |key: &str| {
        data.get(key)
            .map(|value| value.0.as_slice())
            .filter(|value| !value.is_empty())
            .ok_or_else(|| format!("it has no {key}"))
    };
    let (ca_pem, cert_pem, key_pem) = (get(CA_CERT_FILE)?, get(TLS_CERT_FILE)?, get(TLS_KEY_FILE)?);
    tls::load_pair(cert_pem, key_pem).map_err(|err| format!("its {TLS_CERT_FILE}: {err}"))?;
    let chain = parse_pem_certificates(cert_pem)
        .ok_or_else(|| format!("its {TLS_CERT_FILE} holds no PEM certificate"))?;
    let anchors = parse_pem_certificates(ca_pem)
        .ok_or_else(|| format!("its {CA_CERT_FILE} holds no PEM certificate"))?;

    let renew_from = now + Duration::days(RENEW_BEFORE_DAYS);
    let expires = not_after(&chain[0]).ok_or("its serving certificate cannot be parsed")?;
    if expires < renew_from {
        return Err(format!(
            "its serving certificate ends {} (renewed within {RENEW_BEFORE_DAYS} days)",
            utc(expires)
        ));
    }
    for anchor in &anchors {
        let ca_end = not_after(anchor).ok_or("its CA certificate cannot be parsed")?;
        if ca_end < renew_from {
            return Err(format!(
                "its CA certificate ends {} (renewed within {RENEW_BEFORE_DAYS} days)",
                utc(ca_end)
            ));
        }
    }

    let mut roots = RootCertStore::empty();
    let (_, rejected) = roots.add_parsable_certificates(anchors);
    if rejected > 0 || roots.is_empty() {
        return Err(format!("its {CA_CERT_FILE} is not a usable CA certificate"));
    }
    let verifier =
        WebPkiServerVerifier::builder_with_provider(Arc::new(roots), tls::crypto_provider())
            .build()
            .map_err(|err| format!("its {CA_CERT_FILE}: {err}"))?;
    let at = UnixTime::since_unix_epoch(std::time::Duration::from_secs(
        u64::try_from(now.unix_timestamp()).unwrap_or(0),
    ));
    // The Service's own names: a pair made elsewhere need not carry localhost.
    for host in certs::service_names(service, namespace) {
        let name = ServerName::try_from(host.as_str())
            .map_err(|err| format!("{host} is not a server name: {err}"))?;
        verifier
            .verify_server_cert(&chain[0], &chain[1..], &name, &[], at)
            .map_err(|err| match err {
                rustls::Error::InvalidCertificate(
                    CertificateError::NotValidForName
                    | CertificateError::NotValidForNameContext { .. },
                ) => format!("its certificate does not name {host}"),
                other => format!("its certificate is not valid for {host}: {other}"),
            })?;
    }
    Ok(expires)
}

/// Every certificate of a PEM text; `None` when it holds none, or a broken one.
fn parse_pem_certificates(pem: &[u8]) -> Option<Vec<CertificateDer<'static>>> {
    let certificates = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .ok()?;
    (!certificates.is_empty()).then_some(certificates)
}

fn not_after(certificate: &CertificateDer<'_>) -> Option<OffsetDateTime> {
    let (_, parsed) = x509_parser::parse_x509_certificate(certificate.as_ref()).ok()?;
    OffsetDateTime::from_unix_timestamp(parsed.validity().not_after.timestamp()).ok()
}

/// `2026-05-04T03:02:01Z`, for people and logs alike.
pub fn utc(at: OffsetDateTime) -> String {
    let at = at.to_offset(time::UtcOffset::UTC);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        at.year(),
        u8::from(at.month()),
        at.day(),
        at.hour(),
        at.minute(),
        at.second()
    )
}

/// The end of a freshly generated serving certificate.
fn expiry(pair: &GeneratedCerts) -> OffsetDateTime {
    parse_pem_certificates(pair.cert_pem.as_bytes())
        .and_then(|chain| not_after(chain.first()?))
        .unwrap_or_else(|| OffsetDateTime::now_utc() + Duration::days(certs::SERVING_VALIDITY_DAYS))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(pair: &GeneratedCerts) -> BTreeMap<String, ByteString> {
        secret_data(pair)
    }

    #[test]
    fn a_fresh_pair_is_good_for_its_service_only() {
        let pair = certs::generate("gw", "infra").unwrap();
        let now = OffsetDateTime::now_utc();
        let expires = check_pair(&data(&pair), "gw", "infra", now).unwrap();
        assert!(expires > now + Duration::days(300));
        let other = check_pair(&data(&pair), "gw", "other", now).unwrap_err();
        assert_eq!(other, "its certificate does not name gw.other");
    }

    #[test]
    fn times_are_rfc3339_utc() {
        let at = OffsetDateTime::from_unix_timestamp(1_777_777_777).unwrap();
        assert_eq!(utc(at), "2026-05-03T03:09:37Z");
    }

    #[test]
    fn a_pair_near_its_end_is_renewed() {
        let pair = certs::generate("gw", "infra").unwrap();
        let later = OffsetDateTime::now_utc() + Duration::days(certs::SERVING_VALIDITY_DAYS - 10);
        let stale = check_pair(&data(&pair), "gw", "infra", later).unwrap_err();
        assert!(stale.contains("serving certificate ends"), "{stale}");
    }

    #[test]
    fn a_pair_with_a_missing_or_foreign_part_is_not_kept() {
        let pair = certs::generate("gw", "infra").unwrap();
        let other = certs::generate("gw", "infra").unwrap();
        let now = OffsetDateTime::now_utc();

        let mut without_ca = data(&pair);
        without_ca.remove(CA_CERT_FILE);
        assert_eq!(
            check_pair(&without_ca, "gw", "infra", now).unwrap_err(),
            "it has no ca.crt"
        );

        let mut foreign_ca = data(&pair);
        foreign_ca.insert(
            CA_CERT_FILE.to_string(),
            ByteString(other.ca_cert_pem.into_bytes()),
        );
        assert!(check_pair(&foreign_ca, "gw", "infra", now).is_err());

        let mut foreign_key = data(&pair);
        foreign_key.insert(
            TLS_KEY_FILE.to_string(),
            ByteString(other.key_pem.into_bytes()),
        );
        let mismatch = check_pair(&foreign_key, "gw", "infra", now).unwrap_err();
        assert!(mismatch.contains("does not match"), "{mismatch}");
    }
}
