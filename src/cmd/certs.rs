//! `gateway-dns certs`: a CA and a serving certificate for the webhook's Service, written to a
//! directory, or kept in a Secret whose CA is then copied into the webhook configuration.

use anyhow::Context as _;

use super::{EXIT_INPUT, EXIT_OK};
use crate::cli::CertsArgs;
use crate::webhook::certs;
use crate::webhook::certs_in_cluster::{self, SecretOutcome, SecretRef, WebhookOutcome, utc};

/// Runs `certs`; returns the process exit code.
pub fn run(args: &CertsArgs) -> u8 {
    let result = match &args.secret {
        None => write_files(args),
        Some(location) => {
            let secret = SecretRef {
                namespace: location
                    .namespace
                    .clone()
                    .unwrap_or_else(|| args.service_namespace.clone()),
                name: location.name.clone(),
            };
            in_cluster(args, &secret)
        }
    };
    match result {
        Ok(()) => EXIT_OK,
        Err(err) => {
            eprintln!("gateway-dns certs: {}", super::error_chain(err.as_ref()));
            EXIT_INPUT
        }
    }
}

fn write_files(args: &CertsArgs) -> anyhow::Result<()> {
    let written = certs::run(
        &args.service_name,
        &args.service_namespace,
        &args.out,
        args.force,
    )?;
    for path in written {
        println!("wrote {}", path.display());
    }
    Ok(())
}

fn in_cluster(args: &CertsArgs, secret: &SecretRef) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async {
        let client = kube::Client::try_default()
            .await
            .context("no Kubernetes API to talk to (in-cluster config or KUBECONFIG)")?;
        let service = format!("{}.{}.svc", args.service_name, args.service_namespace);
        match &args.patch_webhook {
            Some(name) => match certs_in_cluster::patch_webhook(client, secret, name).await? {
                WebhookOutcome::Patched { webhooks } => println!(
                    "set the caBundle of {webhooks} webhook(s) of \
                         ValidatingWebhookConfiguration {name} to the ca.crt of Secret {secret}"
                ),
                WebhookOutcome::Unchanged { webhooks } => println!(
                    "ValidatingWebhookConfiguration {name}: the caBundle of its \
                         {webhooks} webhook(s) already is the ca.crt of Secret {secret}"
                ),
            },
            None => {
                let outcome = certs_in_cluster::ensure_secret(
                    client,
                    secret,
                    &args.service_name,
                    &args.service_namespace,
                    args.force,
                )
                .await?;
                match outcome {
                    SecretOutcome::Created { expires } => println!(
                        "created Secret {secret}: a new CA and a certificate for {service}, \
                         valid until {}",
                        utc(expires)
                    ),
                    SecretOutcome::Kept { expires } => println!(
                        "kept Secret {secret}: its certificate is good for {service} until {}",
                        utc(expires)
                    ),
                    SecretOutcome::Replaced { reason, expires } => println!(
                        "replaced the pair in Secret {secret} ({reason}): a new CA and a \
                         certificate for {service}, valid until {}",
                        utc(expires)
                    ),
                }
            }
        }
        Ok(())
    })
}
