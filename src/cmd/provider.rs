//! The DNS provider clients the provider flags describe, shared by `serve` (which writes
//! through them) and `explain` (which only lists). The embedded server is not among them: it
//! lives inside `serve`.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result, bail};

use crate::cli::{ProviderArgs, ProviderKind};
use crate::dns::Provider;
use crate::dns::provider::{dnsendpoint, external_dns_webhook, pdns, rfc2136};
use crate::dns::registry::TxtRegistry;
use crate::dns::txt_crypto::TxtCipher;
use crate::model::dns_name::canonical;
use crate::secret::SecretSource;
use crate::source::kube;
use crate::tsig::TsigKey;

/// `--zone` and `--rfc2136-zone`, canonical, sorted, each once.
pub fn zones(flags: &ProviderArgs) -> Vec<String> {
    let mut zones: Vec<String> = flags
        .zones
        .iter()
        .chain(&flags.rfc2136_zones)
        .map(|z| canonical(z.trim()).into_owned())
        .collect();
    zones.sort();
    zones.dedup();
    zones
}

/// A client of an outside provider (RFC 2136, PowerDNS, an external-dns webhook provider,
/// DNSEndpoint objects) for `zones`.
pub async fn reader_writer(
    kind: ProviderKind,
    flags: &ProviderArgs,
    kubeconfig: Option<&Path>,
    context: Option<&str>,
    zones: &[String],
) -> Result<Arc<dyn Provider>> {
    Ok(match kind {
        ProviderKind::Embedded => {
            bail!("the embedded DNS server runs inside gateway-dns serve; it has no client")
        }
        ProviderKind::Rfc2136 => {
            let server = rfc2136_server(flags)?;
            let tsig = match &flags.rfc2136_tsig_key_name {
                None => None,
                Some(name) => {
                    let algorithm = flags
                        .rfc2136_tsig_algorithm
                        .parse()
                        .map_err(|e| anyhow::anyhow!("--rfc2136-tsig-algorithm: {e}"))?;
                    let secret = SecretSource::pick(
                        flags.rfc2136_tsig_secret_file.clone(),
                        rfc2136::TSIG_SECRET_ENV,
                    );
                    Some(TsigKey::load(name, algorithm, &secret).context("loading the TSIG key")?)
                }
            };
            let config = rfc2136::Rfc2136Config::new(server, zones.to_vec(), tsig);
            Arc::new(rfc2136::Rfc2136Provider::new(config)?)
        }
        ProviderKind::Pdns => {
            let Some(url) = &flags.pdns_server else {
                bail!("--provider pdns needs --pdns-server URL (e.g. http://127.0.0.1:8081)");
            };
            let key = SecretSource::pick(flags.pdns_api_key_file.clone(), pdns::API_KEY_ENV);
            let config = pdns::PdnsConfig::load(url.clone(), &key, zones.to_vec())
                .context("loading the PowerDNS API key")?;
            Arc::new(pdns::PdnsProvider::new(config)?)
        }
        ProviderKind::Webhook => {
            let Some(url) = &flags.webhook_provider_url else {
                bail!(
                    "--provider webhook needs --webhook-provider-url URL (e.g. http://127.0.0.1:8888)"
                );
            };
            let config =
                external_dns_webhook::ExternalDnsWebhookConfig::new(url.clone(), zones.to_vec());
            Arc::new(
                external_dns_webhook::ExternalDnsWebhookProvider::connect(config)
                    .await
                    .with_context(|| format!("negotiating with the webhook provider at {url}"))?,
            )
        }
        ProviderKind::Dnsendpoint => {
            let client = kube::client_in(kubeconfig, context)
                .await
                .context("--provider dnsendpoint writes to the cluster")?;
            Arc::new(dnsendpoint::DnsEndpointProvider::new(
                client,
                &flags.dnsendpoint_namespace,
                registry(flags)?.with_encryption(None, false),
                zones.to_vec(),
            )?)
        }
    })
}

/// The RFC 2136 server `--rfc2136-server` (or external-dns's `--rfc2136-host` and
/// `--rfc2136-port`) names.
pub fn rfc2136_server(flags: &ProviderArgs) -> Result<rfc2136::ServerAddress> {
    Ok(match (&flags.rfc2136_server, &flags.rfc2136_host) {
        (Some(server), _) => server
            .parse()
            .map_err(|e| anyhow::anyhow!("--rfc2136-server: {e}"))?,
        // external-dns's pair of flags, checked as one address.
        (None, Some(host)) => {
            let host = host.trim().trim_start_matches('[').trim_end_matches(']');
            let port = flags.rfc2136_port.unwrap_or(53);
            let joined = if host.contains(':') {
                format!("[{host}]:{port}")
            } else {
                format!("{host}:{port}")
            };
            joined
                .parse()
                .map_err(|e| anyhow::anyhow!("--rfc2136-host: {e}"))?
        }
        (None, None) => bail!("--provider rfc2136 needs --rfc2136-server HOST:PORT"),
    })
}

/// The environment variable holding the TXT encryption key when no key file is given.
pub const TXT_ENCRYPT_AES_KEY_ENV: &str = "GATEWAY_DNS_TXT_ENCRYPT_AES_KEY";

/// The ownership registry the flags describe (`--txt-owner-id`, `--txt-prefix`/`--txt-suffix`,
/// `--txt-wildcard-replacement`, the encryption key). A key file must be readable; the
/// environment variable is used when set; `--txt-encrypt-enabled` without a key is an error.
pub fn registry(flags: &ProviderArgs) -> Result<TxtRegistry> {
    let key = match &flags.txt_encrypt_aes_key_file {
        Some(path) => Some(SecretSource::File(path.clone()).load()?),
        None => SecretSource::Env(TXT_ENCRYPT_AES_KEY_ENV.to_string())
            .load()
            .ok(),
    };
    if flags.txt_encrypt_enabled && key.is_none() {
        bail!(
            "--txt-encrypt-enabled needs a key: --txt-encrypt-aes-key-file or {TXT_ENCRYPT_AES_KEY_ENV}"
        );
    }
    let cipher = key
        .map(|key| TxtCipher::from_key_text(&key))
        .transpose()
        .context("the TXT encryption key")?;
    Ok(TxtRegistry::new(flags.txt_owner_id.clone())
        .with_wildcard_replacement(flags.txt_wildcard_replacement.clone())
        .with_affixes(flags.txt_prefix.clone(), flags.txt_suffix.clone())
        .with_encryption(cipher, flags.txt_encrypt_enabled))
}
