//! `gateway-dns serve`: one process, one index, fed by a source and read by the webhook and the
//! sync loop. This is the application edge: errors are `anyhow`.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use tokio::sync::watch;

use crate::admission::EngineHandler;
use crate::cli::ServeArgs;
use crate::index::Index;
use crate::metrics::Metrics;
use crate::model::ObjectKind;
use crate::server::{self, Readiness, WebhookOptions, WebhookState};
use crate::tls::{self, CertSource};

/// How often the files source looks for changed manifests.
const MANIFEST_POLL: Duration = Duration::from_secs(1);

/// Runs until Ctrl-C / SIGTERM (or, with `--once`, until one sync pass ends).
pub async fn run(args: ServeArgs) -> Result<u8> {
    let cfg = Arc::new(args.engine.to_config()?);
    let index = Index::with_config(cfg);
    let metrics = Arc::new(Metrics::new());
    let readiness = Readiness::new();
    let (synced_tx, mut synced_rx) = watch::channel(false);

    match (&args.manifests, &args.kubeconfig) {
        (Some(dir), _) => {
            let paths = vec![dir.clone()];
            // Fail fast on a bad start: an operator typo should not look like an empty cluster.
            crate::source::files::load_paths(&paths)
                .with_context(|| format!("reading manifests from {}", dir.display()))?;
            tokio::spawn(crate::source::files::watch(
                paths,
                index.clone(),
                MANIFEST_POLL,
                synced_tx,
            ));
        }
        (None, _) => bail!(
            "no source: pass --manifests DIR (the cluster source is not built into this version yet)"
        ),
    }

    let shutdown = shutdown_signal();
    tokio::pin!(shutdown);
    let mut tasks = tokio::task::JoinSet::new();

    // Readiness and cache gauges follow the index.
    {
        let readiness = readiness.clone();
        let metrics = metrics.clone();
        let index = index.clone();
        tasks.spawn(async move {
            let mut changes = index.subscribe();
            loop {
                if *synced_rx.borrow_and_update() {
                    readiness.set_sources_synced(true);
                }
                let snapshot = index.snapshot();
                for kind in ObjectKind::ALL {
                    metrics.set_cache_objects(kind.kind(), snapshot.len_of(kind) as u64);
                }
                tokio::select! {
                    changed = changes.changed() => if changed.is_err() { break },
                    changed = synced_rx.changed() => if changed.is_err() && !readiness.is_sources_synced() { break },
                }
            }
            Ok::<(), anyhow::Error>(())
        });
    }

    if args.webhook {
        let cert_source = match (&args.tls_cert, &args.tls_key) {
            (Some(cert_path), Some(key_path)) => CertSource::Files {
                cert_path: cert_path.clone(),
                key_path: key_path.clone(),
                poll_interval: tls::DEFAULT_POLL_INTERVAL,
            },
            (None, None) => CertSource::InMemory {
                service: args.service_name.clone(),
                namespace: args.service_namespace.clone(),
                ca_out: args.local_ca_out.clone(),
            },
            _ => bail!("--tls-cert and --tls-key go together"),
        };
        let tls_runtime = tls::start(cert_source, metrics.clone())
            .await
            .context("setting up TLS")?;
        let options = WebhookOptions {
            admission_deadline: args.admission_deadline,
            ..WebhookOptions::default()
        };
        let handler = Arc::new(EngineHandler::new(index.clone(), metrics.clone()));
        let app = server::router(WebhookState::new(
            handler,
            metrics.clone(),
            readiness.clone(),
            options,
        ));
        let listener = server::bind(args.listen).await?;
        tracing::info!(addr = %args.listen, "webhook listening (HTTPS)");
        let readiness = readiness.clone();
        let config = tls_runtime.server_config.clone();
        tasks.spawn(async move {
            // Keep the TLS runtime (and its reloader) alive as long as the server runs.
            let _tls_runtime = tls_runtime;
            server::serve_tls(
                listener,
                config,
                app,
                readiness,
                std::future::pending::<()>(),
            )
            .await?;
            Ok(())
        });
    }

    if let Some(addr) = args.metrics_listen {
        let listener = server::bind(addr).await?;
        tracing::info!(%addr, "metrics listening (HTTP)");
        let app = server::metrics_router(metrics.clone());
        tasks.spawn(async move {
            server::serve_plain(listener, app, std::future::pending::<()>()).await?;
            Ok(())
        });
    }

    tokio::select! {
        () = &mut shutdown => {
            tracing::info!("shutting down");
            Ok(0)
        }
        Some(result) = tasks.join_next() => match result {
            Ok(Ok(())) => bail!("a serving task ended unexpectedly"),
            Ok(Err(err)) => Err(err),
            Err(err) => Err(err).context("a serving task failed"),
        },
    }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
}
