//! `gateway-dns serve`: one process, one index, fed by a source and read by the webhook and the
//! sync loop. This is the application edge: errors are `anyhow`.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use tokio::sync::{Notify, watch};

use crate::cli::{ProviderKind, ServeArgs};
use crate::dns::secret::SecretSource;
use crate::dns::{self, Provider};
use crate::engine::settle::settle_all;
use crate::index::{Index, Snapshot};
use crate::metrics::Metrics;
use crate::model::ObjectKind;
use crate::model::dns_name::canonical;
use crate::sync::desired::{EngineDesired, inferred_zones};
use crate::sync::{SyncConfig, Syncer};
use crate::webhook::decide::EngineHandler;
use crate::webhook::server;
use crate::webhook::state::{Readiness, WebhookOptions, WebhookState};
use crate::webhook::tls::{self, CertSource};

/// How often the files source looks for changed manifests.
const MANIFEST_POLL: Duration = Duration::from_secs(1);
/// How long `--once` waits for the source's first full sync.
const ONCE_SYNC_TIMEOUT: Duration = Duration::from_secs(120);

/// The environment variables secrets are read from when no file is given.
pub const TSIG_SECRET_ENV: &str = "GATEWAY_DNS_RFC2136_TSIG_SECRET";
pub const PDNS_API_KEY_ENV: &str = "GATEWAY_DNS_PDNS_API_KEY";

/// Runs until Ctrl-C / SIGTERM (or, with `--once`, until one sync pass ends). Returns the exit
/// code.
pub async fn run(args: ServeArgs) -> Result<u8> {
    if !args.webhook && !args.sync {
        bail!("--webhook false and --sync false leave nothing to run");
    }
    let cfg = Arc::new(args.engine.to_config()?);
    let index = Index::with_config(cfg.clone());
    let metrics = Arc::new(Metrics::new());
    let readiness = Readiness::new();
    let mut tasks = tokio::task::JoinSet::new();

    // The source, and a receiver that turns true after its first full sync.
    let kube_source: Option<Arc<crate::source::kube::KubeSource>>;
    let (synced, kube_client, initial_snapshot) = match &args.manifests {
        Some(dir) => {
            let paths = vec![dir.clone()];
            // Fail fast on a bad start: an operator typo should not look like an empty cluster.
            let loaded = crate::source::files::load_paths(&paths)
                .with_context(|| format!("reading manifests from {}", dir.display()))?;
            let initial = Snapshot::from_objects(cfg.clone(), loaded.into_iter().map(|l| l.object));
            let (synced_tx, synced_rx) = watch::channel(false);
            tokio::spawn(crate::source::files::watch(
                paths,
                index.clone(),
                MANIFEST_POLL,
                synced_tx,
            ));
            kube_source = None;
            (synced_rx, None, Some(initial))
        }
        None => {
            let client = crate::source::kube::client(args.kubeconfig.as_deref())
                .await
                .context("connecting to the cluster (pass --manifests DIR to run without one)")?;
            let config = crate::source::kube::Config {
                discovery_interval: args.discovery_interval,
                ..crate::source::kube::Config::default()
            };
            let source = Arc::new(crate::source::kube::KubeSource::spawn(
                client.clone(),
                index.clone(),
                config,
            ));
            let ready = source.ready();
            let metrics = metrics.clone();
            kube_source = Some(source.clone());
            // Keep the source alive and export its staleness.
            tasks.spawn(async move {
                loop {
                    for (kind, staleness) in source.staleness() {
                        metrics.set_source_staleness(kind.kind(), staleness);
                    }
                    tokio::time::sleep(Duration::from_secs(5)).await;
                }
            });
            (ready, Some(client), None)
        }
    };

    spawn_index_watchers(&mut tasks, &index, &metrics, &readiness, synced.clone());

    if args.sync {
        let zones = zones_for(&args, initial_snapshot.as_ref())?;
        let provider = provider_for(&args, &zones).await?;
        let mut sync_config = SyncConfig::new(args.txt_owner_id.clone(), zones.clone());
        sync_config.policy = args.policy.parse().map_err(|e| anyhow::anyhow!("{e}"))?;
        sync_config.interval = args.interval;
        sync_config.dry_run = args.dry_run;
        sync_config.txt_wildcard_replacement = args.txt_wildcard_replacement.clone();
        let mut syncer = Syncer::new(
            provider,
            Arc::new(EngineDesired::new(index.clone())),
            sync_config,
            metrics.clone(),
        );
        let mut leader = None;
        if let (Some(client), true) = (&kube_client, args.leader_election) {
            let identity = std::env::var("POD_NAME")
                .or_else(|_| std::env::var("HOSTNAME"))
                .unwrap_or_else(|_| format!("gateway-dns-{}", std::process::id()));
            let leader_config = crate::leader::LeaderConfig::new(
                &args.leader_election_namespace,
                &args.lease_name,
                &identity,
            );
            let election = crate::leader::LeaderElection::spawn(client.clone(), leader_config)
                .context("starting leader election")?;
            leader = Some(election.is_leader());
            tasks.spawn(async move {
                // Keep the election alive for the life of the process.
                let _election = election;
                std::future::pending::<()>().await;
                Ok(())
            });
        }
        if let Some(source) = &kube_source {
            syncer = syncer.with_write_gate(write_gate(leader, source.clone()));
        }
        tracing::info!(provider = ?args.provider, zones = ?zones, "DNS sync configured");
        let syncer = Arc::new(syncer);
        if args.once {
            return run_once(syncer, synced).await;
        }
        spawn_sync(&mut tasks, syncer, &index, synced.clone());
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
    } else {
        // Without the webhook there is no TLS to wait for: readiness is the source's.
        readiness.set_tls_bound(true);
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
        () = shutdown_signal() => {
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

/// How often the write gate looks at the source's health between leadership changes.
const GATE_POLL: Duration = Duration::from_millis(250);

/// Open while this replica may write DNS: it holds the Lease (when there is an election) and its
/// cluster source is in sync. Leadership changes pass through at once; source health is polled.
pub fn write_gate(
    mut leader: Option<watch::Receiver<bool>>,
    source: Arc<crate::source::kube::KubeSource>,
) -> watch::Receiver<bool> {
    let (gate, open) = watch::channel(false);
    tokio::spawn(async move {
        loop {
            let leading = leader.as_mut().is_none_or(|l| *l.borrow_and_update());
            let should_open = leading && source.in_sync();
            gate.send_if_modified(|current| std::mem::replace(current, should_open) != should_open);
            let leadership_changed = async {
                match leader.as_mut() {
                    Some(l) => l.changed().await.is_ok(),
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                alive = leadership_changed => if !alive {
                    gate.send_replace(false);
                    return;
                },
                () = tokio::time::sleep(GATE_POLL) => {}
                () = gate.closed() => return,
            }
        }
    });
    open
}

/// The managed zones: `--zone`, or for the embedded server alone, inferred from the records the
/// manifests would publish (so the local quick start needs no flags).
fn zones_for(args: &ServeArgs, initial: Option<&Snapshot>) -> Result<Vec<String>> {
    let mut zones: Vec<String> = args
        .zones
        .iter()
        .chain(&args.rfc2136_zones)
        .map(|z| canonical(z.trim()).into_owned())
        .collect();
    zones.sort();
    zones.dedup();
    if !zones.is_empty() {
        return Ok(zones);
    }
    match (args.provider, initial) {
        (ProviderKind::Embedded, Some(snapshot)) => {
            let inferred = inferred_zones(&settle_all(snapshot));
            if inferred.is_empty() {
                bail!(
                    "no --zone given and none can be inferred from the manifests: pass --zone ZONE"
                );
            }
            tracing::info!(zones = ?inferred, "serving zones inferred from the manifests; pass --zone to choose");
            Ok(inferred)
        }
        _ => bail!("pass --zone ZONE (repeatable): the zones gateway-dns manages"),
    }
}

async fn provider_for(args: &ServeArgs, zones: &[String]) -> Result<Arc<dyn Provider>> {
    Ok(match args.provider {
        ProviderKind::Embedded => {
            let mut config = dns::embedded::EmbeddedConfig::new(zones.to_vec());
            config.listen = args.dns_listen;
            let server = dns::embedded::EmbeddedDns::start(config).await?;
            tracing::info!(addr = %server.local_addr(), "embedded DNS server listening (UDP and TCP)");
            Arc::new(server)
        }
        ProviderKind::Rfc2136 => {
            let Some(server) = args.rfc2136_server else {
                bail!("--provider rfc2136 needs --rfc2136-server HOST:PORT");
            };
            let tsig = match &args.rfc2136_tsig_key_name {
                None => None,
                Some(name) => {
                    let algorithm = args
                        .rfc2136_tsig_algorithm
                        .parse()
                        .map_err(|e| anyhow::anyhow!("--rfc2136-tsig-algorithm: {e}"))?;
                    let secret =
                        SecretSource::pick(args.rfc2136_tsig_secret_file.clone(), TSIG_SECRET_ENV);
                    Some(
                        dns::rfc2136::TsigKey::load(name, algorithm, &secret)
                            .context("loading the TSIG key")?,
                    )
                }
            };
            let config = dns::rfc2136::Rfc2136Config::new(server, zones.to_vec(), tsig);
            Arc::new(dns::rfc2136::Rfc2136Provider::new(config)?)
        }
        ProviderKind::Pdns => {
            let Some(url) = &args.pdns_server else {
                bail!("--provider pdns needs --pdns-server URL (e.g. http://127.0.0.1:8081)");
            };
            let key = SecretSource::pick(args.pdns_api_key_file.clone(), PDNS_API_KEY_ENV);
            let config = dns::pdns::PdnsConfig::load(url.clone(), &key, zones.to_vec())
                .context("loading the PowerDNS API key")?;
            Arc::new(dns::pdns::PdnsProvider::new(config)?)
        }
    })
}

/// How often the cache gauges may be recomputed (counting routes walks the index).
const GAUGE_REFRESH: Duration = Duration::from_secs(1);

/// Readiness follows the source's first sync; cache gauges follow the index, at most once per
/// [`GAUGE_REFRESH`] so a burst of changes costs one count, not one per change.
fn spawn_index_watchers(
    tasks: &mut tokio::task::JoinSet<Result<()>>,
    index: &Index,
    metrics: &Arc<Metrics>,
    readiness: &Arc<Readiness>,
    mut synced: watch::Receiver<bool>,
) {
    let readiness = readiness.clone();
    tasks.spawn(async move {
        wait_synced(&mut synced).await?;
        readiness.set_sources_synced(true);
        std::future::pending::<()>().await;
        Ok(())
    });
    let (index, metrics) = (index.clone(), metrics.clone());
    tasks.spawn(async move {
        let mut changes = index.subscribe();
        loop {
            let snapshot = index.snapshot();
            for kind in ObjectKind::ALL {
                metrics.set_cache_objects(kind.kind(), snapshot.len_of(kind) as u64);
            }
            drop(snapshot);
            if changes.changed().await.is_err() {
                return Ok(());
            }
            tokio::time::sleep(GAUGE_REFRESH).await;
        }
    });
}

async fn wait_synced(synced: &mut watch::Receiver<bool>) -> Result<()> {
    synced
        .wait_for(|ready| *ready)
        .await
        .map(|_| ())
        .map_err(|_| anyhow::anyhow!("the source stopped before its first sync"))
}

/// The sync loop starts only after the source's first full sync: with an empty index, policy
/// `sync` would delete every record it owns.
fn spawn_sync(
    tasks: &mut tokio::task::JoinSet<Result<()>>,
    syncer: Arc<Syncer>,
    index: &Index,
    mut synced: watch::Receiver<bool>,
) {
    let notify = Arc::new(Notify::new());
    {
        let (index, notify) = (index.clone(), notify.clone());
        tasks.spawn(async move {
            let mut changes = index.subscribe();
            while changes.changed().await.is_ok() {
                notify.notify_one();
            }
            Ok(())
        });
    }
    tasks.spawn(async move {
        wait_synced(&mut synced).await?;
        syncer.run(notify, std::future::pending::<()>()).await;
        Ok(())
    });
}

/// `--once`: one pass after the first full sync; exit 0 when converged, 1 otherwise.
async fn run_once(syncer: Arc<Syncer>, mut synced: watch::Receiver<bool>) -> Result<u8> {
    tokio::time::timeout(ONCE_SYNC_TIMEOUT, wait_synced(&mut synced))
        .await
        .context("the source did not complete its first sync in time")??;
    let report = syncer.run_once().await?;
    let plan = &report.pass.plan;
    println!(
        "planned {} create, {} update, {} delete; applied {}; blocked {}; {}",
        plan.changes.create.len(),
        plan.changes.update.len(),
        plan.changes.delete.len(),
        report.pass.applied,
        report.remaining.blocked.len(),
        if report.converged {
            "converged"
        } else {
            "not converged"
        }
    );
    for blocked in &report.remaining.blocked {
        println!("blocked: {blocked}");
    }
    Ok(if report.converged { 0 } else { 1 })
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
