//! `gateway-dns serve`: one process, one index, fed by a source and read by the webhook and the
//! sync loop. This is the application edge: errors are `anyhow`.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use tokio::sync::{Notify, mpsc, watch};
use tokio::task::JoinSet;

use super::{EXIT_OK, EXIT_ONCE_BLOCKED, EXIT_ONCE_FAILED};
use crate::authority;
use crate::cli::{ProviderKind, ServeArgs};
use crate::dns::{Changes, Provider};
use crate::engine::World;
use crate::engine::claimants::route_ref;
use crate::feedback::cluster::{ClusterFeedback, FeedbackConfig, ServedVersion};
use crate::feedback::limit::Limits;
use crate::feedback::{AppliedRecord, ObjectRef};
use crate::findings::FindingsReport;
use crate::health;
use crate::index::Index;
use crate::leader::{LeaderConfig, LeaderElection};
use crate::metrics::Metrics;
use crate::model::ObjectKind;
use crate::model::dns_name::canonical;
use crate::net::{CapEvent, CapObserver, ConnectionLimits};
use crate::secret::SecretSource;
use crate::source::{files, kube};
use crate::sync::desired::{EngineDesired, inferred_zones};
use crate::sync::{SyncConfig, Syncer};
use crate::tsig::TsigKey;
use crate::webhook::handler::EngineHandler;
use crate::webhook::server;
use crate::webhook::state::{Readiness, WebhookOptions, WebhookState};
use crate::webhook::tls::{self, CertSource};

/// How often the files source looks for changed manifests.
const MANIFEST_POLL: Duration = Duration::from_secs(1);
/// How often the cluster source's staleness is exported.
const STALENESS_EXPORT: Duration = Duration::from_secs(5);
/// How long `--once` waits for the source's first full sync.
const ONCE_SYNC_TIMEOUT: Duration = Duration::from_secs(120);

/// Runs until Ctrl-C / SIGTERM (or, with `--once`, until one sync pass ends). Returns the exit
/// code.
pub async fn run(args: ServeArgs) -> Result<u8> {
    if !args.webhook && !args.sync {
        bail!("--webhook=false and --sync=false leave nothing to run");
    }
    let cfg = Arc::new(
        args.engine.to_config()?.with_zones(
            args.provider_flags
                .zones
                .iter()
                .chain(&args.provider_flags.rfc2136_zones),
        ),
    );
    let mut process = Process::new(Index::with_config(cfg));
    process.status.owner_id = args.provider_flags.txt_owner_id.clone();
    let source = start_source(&args, &mut process).await?;
    process.watch_index(source.synced.clone());
    process.end_address_loss_graces();
    process.report_findings(source.synced.clone());
    // Events and PolicyReports go to the cluster the source reads; `--once` writes only DNS.
    let feedback =
        !args.once && source.cluster.is_some() && (args.kubernetes_events || args.policy_reports);
    // One election for every cluster writer: DNS, Events and PolicyReports.
    let leader = match &source.cluster {
        Some((client, _)) if args.leader_election && (args.sync || feedback) => {
            Some(start_leader_election(&args, client, &mut process)?)
        }
        _ => None,
    };
    // What the sync loop writes, for the DNSRecordPublished/Removed Events.
    let (applied_tx, applied_rx) = mpsc::channel(APPLIED_BACKLOG);
    if args.sync {
        let mut syncer = build_syncer(&args, &source, leader.clone(), &mut process).await?;
        if args.once {
            return run_once(Arc::new(syncer), source.synced, args.dry_run).await;
        }
        if feedback {
            syncer = syncer.with_applied_observer(applied_tx);
        }
        process.spawn_sync(Arc::new(syncer), source.synced.clone());
        // Probing, and keeping the results on the Lease, waits for the cluster view too: a new
        // holder that has not listed every Gateway yet would publish a partial list.
        let probing = match (&leader, &source.cluster) {
            (Some(_), Some((_, cluster_source))) => {
                Some(write_gate(leader.clone(), cluster_source.clone(), None))
            }
            _ => leader.clone(),
        };
        process.spawn_health_checks(&args, probing)?;
    }
    if feedback && let Some((client, cluster_source)) = &source.cluster {
        process.spawn_feedback(
            &args,
            client,
            cluster_source,
            leader,
            applied_rx,
            source.synced.clone(),
        );
    }
    if args.webhook {
        start_webhook(&args, &mut process).await?;
    } else {
        // Without the webhook there is no TLS to wait for: readiness is the source's.
        process.readiness.set_tls_bound(true);
    }
    if let Some(addr) = args.metrics_listen {
        let options = listener_options(&args, &process.metrics, "metrics");
        start_metrics_listener(addr, options, args.status_page, &mut process).await?;
    }
    process.until_shutdown().await
}

/// What the parts of `serve` share: one index, one set of metrics, the webhook's readiness, and
/// the tasks that run for the life of the process (one ending ends the process).
struct Process {
    index: Index,
    metrics: Arc<Metrics>,
    readiness: Arc<Readiness>,
    tasks: JoinSet<Result<()>>,
    /// Kept apart from the tasks so that a shutdown can free the Lease after they stopped.
    election: Option<LeaderElection>,
    /// Turns true on SIGTERM: the webhook stops accepting and lets its connections drain.
    stopping: watch::Sender<bool>,
    /// Closed when the webhook server has drained.
    webhook_drained: Option<tokio::sync::oneshot::Receiver<()>>,
    /// What the status page says of the sync loop and the Lease.
    status: crate::status::Context,
}

/// The running source.
struct Source {
    /// Turns true after the source's first full sync.
    synced: watch::Receiver<bool>,
    /// The cluster source and its client; None with `--manifests`.
    cluster: Option<(::kube::Client, Arc<kube::KubeSource>)>,
    /// The files source (`--manifests`), whose first read is in the index before the sync loop
    /// is built, so zones can be inferred from it.
    manifests: bool,
}

/// How often the cache gauges may be recomputed (counting routes walks the index).
const GAUGE_REFRESH: Duration = Duration::from_secs(1);

/// How often `serve` looks for an address-loss grace that is over: a grace ends at most this late.
const GRACE_CHECK: Duration = Duration::from_secs(1);

impl Process {
    fn new(index: Index) -> Process {
        Process {
            index,
            metrics: Arc::new(Metrics::new()),
            readiness: Readiness::new(),
            tasks: JoinSet::new(),
            election: None,
            stopping: watch::channel(false).0,
            webhook_drained: None,
            status: crate::status::Context::default(),
        }
    }

    /// Readiness follows the source's first sync; cache gauges follow the index, at most once
    /// per [`GAUGE_REFRESH`] so a burst of changes costs one count, not one per change.
    fn watch_index(&mut self, mut synced: watch::Receiver<bool>) {
        let readiness = self.readiness.clone();
        self.tasks.spawn(async move {
            wait_synced(&mut synced).await?;
            readiness.set_sources_synced(true);
            std::future::pending::<()>().await;
            Ok(())
        });
        let (index, metrics) = (self.index.clone(), self.metrics.clone());
        self.tasks.spawn(async move {
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

    /// Ends each address-loss grace when it is over (ARCHITECTURE.md, "Address-loss grace"): the
    /// index changes then, which wakes the sync loop and the findings report. The check is a walk
    /// of the Gateways under the index's lock, once per [`GRACE_CHECK`].
    fn end_address_loss_graces(&mut self) {
        let index = self.index.clone();
        self.tasks.spawn(async move {
            let mut tick = tokio::time::interval(GRACE_CHECK);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                if index.expire_address_losses() {
                    tracing::info!("an address-loss grace ended; the Gateway's names follow its addresses again");
                }
            }
        });
    }

    /// After the source's first full sync, every current finding is logged once with a
    /// summary, then what changes, at most once per [`GAUGE_REFRESH`]; the findings gauges
    /// follow. The outcome is the one the sync loop publishes from (one evaluation per
    /// snapshot).
    fn report_findings(&mut self, mut synced: watch::Receiver<bool>) {
        let (index, metrics) = (self.index.clone(), self.metrics.clone());
        self.tasks.spawn(async move {
            wait_synced(&mut synced).await?;
            let mut changes = index.subscribe();
            let mut report = FindingsReport::new(metrics);
            loop {
                changes.borrow_and_update();
                let current = index.clone();
                report = tokio::task::spawn_blocking(move || {
                    report.report_index(&current);
                    report
                })
                .await
                .context("reporting the findings")?;
                if changes.changed().await.is_err() {
                    return Ok(());
                }
                tokio::time::sleep(GAUGE_REFRESH).await;
            }
        });
    }

    /// Events and PolicyReports follow the index's settled outcome, written only while this
    /// replica holds the Lease (or, without an election, always), at most once per
    /// [`GAUGE_REFRESH`] after a change.
    fn spawn_feedback(
        &mut self,
        args: &ServeArgs,
        client: &::kube::Client,
        cluster_source: &Arc<kube::KubeSource>,
        mut leader: Option<watch::Receiver<bool>>,
        applied: mpsc::Receiver<Changes>,
        mut synced: watch::Receiver<bool>,
    ) {
        let watched = cluster_source.clone();
        let served: ServedVersion = Arc::new(move |kind| {
            watched
                .status()
                .into_iter()
                .find(|status| status.kind == kind)
                .and_then(|status| status.version)
        });
        let config = FeedbackConfig {
            events: args.kubernetes_events,
            policy_reports: args.policy_reports,
            instance: pod_identity(),
            limits: Limits::default(),
        };
        tracing::info!(events = config.events, policy_reports = config.policy_reports, instance = %config.instance, "feedback to the cluster configured");
        let mut feedback = ClusterFeedback::new(client.clone(), served, config);
        let (index, with_routes) = (self.index.clone(), args.policy_reports);
        self.tasks.spawn(async move {
            let mut applied = Some(applied);
            wait_synced(&mut synced).await?;
            let mut changes = index.subscribe();
            loop {
                changes.borrow_and_update();
                let leading = leader.as_mut().is_none_or(|l| *l.borrow_and_update());
                let current = index.clone();
                let (outcome, routes) = tokio::task::spawn_blocking(move || {
                    let routes = match with_routes {
                        true => current.read(|snapshot| {
                            snapshot
                                .routes()
                                .filter_map(|(_, entry)| ObjectRef::parse(&route_ref(&entry.route)))
                                .collect()
                        }),
                        false => Vec::new(),
                    };
                    (current.settled(), routes)
                })
                .await
                .context("reading the findings for Events and PolicyReports")?;
                feedback
                    .update(&index.config(), &outcome, routes, leading)
                    .await;
                // Not held while waiting: the index keeps an outcome only while it is read.
                drop(outcome);
                // Until the index or the leadership changes, tell what the sync loop writes.
                loop {
                    let leadership_changed = async {
                        match leader.as_mut() {
                            Some(l) => l.changed().await.is_ok(),
                            None => std::future::pending().await,
                        }
                    };
                    let written = async {
                        match applied.as_mut() {
                            Some(applied) => applied.recv().await,
                            None => std::future::pending().await,
                        }
                    };
                    tokio::select! {
                        changed = changes.changed() => match changed {
                            Ok(()) => break,
                            Err(_) => return Ok(()),
                        },
                        alive = leadership_changed => match alive {
                            true => break,
                            false => return Ok(()),
                        },
                        written = written => match written {
                            Some(written) => {
                                let current = index.clone();
                                let outcome = tokio::task::spawn_blocking(move || current.settled())
                                    .await
                                    .context("reading the records the sync loop wrote")?;
                                feedback.applied(&applied_records(&written), &outcome).await;
                            }
                            // No sync loop (or it ended): nothing more to tell.
                            None => applied = None,
                        },
                    }
                }
                tokio::time::sleep(GAUGE_REFRESH).await;
            }
        });
    }

    /// Probes the targets of annotated Gateways while this replica holds the Lease
    /// (ARCHITECTURE.md, "Health checks"); the failing ones go into the index, which wakes the
    /// sync loop and the feedback.
    fn spawn_health_checks(
        &mut self,
        args: &ServeArgs,
        leader: Option<watch::Receiver<bool>>,
    ) -> Result<()> {
        let expected_codes = health::spec::ExpectedCodes::parse(&args.health_check_expected_codes)
            .with_context(|| {
                format!(
                    "--health-check-expected-codes {:?}: codes from 100 to 599 and ranges of \
                     them, comma-separated, e.g. 200-399,404",
                    args.health_check_expected_codes
                )
            })?;
        if !args.health_check_path.starts_with('/') {
            bail!(
                "--health-check-path {:?}: a path starts with /",
                args.health_check_path
            );
        }
        let config = health::HealthConfig {
            defaults: health::spec::Defaults {
                interval: args.health_check_interval.max(Duration::from_secs(1)),
                timeout: args.health_check_timeout.min(args.health_check_interval),
                failure_threshold: args.health_check_failure_threshold,
                success_threshold: args.health_check_success_threshold,
                expected_codes,
                path: args.health_check_path.clone(),
            },
            concurrency: usize::try_from(args.health_check_concurrency).unwrap_or(1),
        };
        let tls = health::probe::tls_connector()
            .context("building the TLS client of https health checks")?;
        let (index, metrics) = (self.index.clone(), self.metrics.clone());
        // The holder keeps the failing targets on the Lease for the other replicas.
        let shared = self.election.as_ref().map(LeaderElection::shared);
        self.tasks.spawn(async move {
            health::run(
                index,
                metrics,
                config,
                leader,
                shared,
                tls,
                crate::index::system_clock(),
            )
            .await;
            Ok(())
        });
        Ok(())
    }

    /// Index changes wake the sync loop, which starts only after the source's first full sync:
    /// with an empty index, policy `sync` would delete every record it owns.
    fn spawn_sync(&mut self, syncer: Arc<Syncer>, mut synced: watch::Receiver<bool>) {
        let notify = Arc::new(Notify::new());
        let (index, changed) = (self.index.clone(), notify.clone());
        self.tasks.spawn(async move {
            let mut changes = index.subscribe();
            while changes.changed().await.is_ok() {
                changed.notify_one();
            }
            Ok(())
        });
        self.tasks.spawn(async move {
            wait_synced(&mut synced).await?;
            syncer.run(notify, std::future::pending::<()>()).await;
            Ok(())
        });
    }

    /// Serves until Ctrl-C / SIGTERM (exit 0) or until a task ends, which is an error.
    async fn until_shutdown(mut self) -> Result<u8> {
        let outcome = tokio::select! {
            () = shutdown_signal() => {
                tracing::info!("shutting down");
                // The webhook answers what it has started, and closes keep-alive connections
                // so that their clients go to another replica, before the process ends.
                let _ = self.stopping.send(true);
                if let Some(drained) = self.webhook_drained.take() {
                    let _ = tokio::time::timeout(
                        server::SHUTDOWN_GRACE + Duration::from_secs(1),
                        drained,
                    )
                    .await;
                }
                Ok(0)
            }
            Some(result) = self.tasks.join_next() => match result {
                Ok(Ok(())) => Err(anyhow::anyhow!("a serving task ended unexpectedly")),
                Ok(Err(err)) => Err(err),
                Err(err) => Err(err).context("a serving task failed"),
            },
        };
        // Stop writing first, then free the Lease: the next replica (a rolling update's new
        // pod) takes it at once instead of waiting out the lease duration.
        self.tasks.shutdown().await;
        if let Some(election) = self.election.take() {
            election.release().await;
        }
        outcome
    }
}

/// Starts the files source (`--manifests`) or the cluster source.
async fn start_source(args: &ServeArgs, process: &mut Process) -> Result<Source> {
    let Some(dir) = &args.manifests else {
        return start_cluster_source(args, process).await;
    };
    let paths = vec![dir.clone()];
    // Fail fast on a bad start: an operator typo should not look like an empty cluster. Read
    // once, into the index itself: the watcher starts from what was read.
    let (read, objects) = files::load_into(&paths, &process.index)
        .with_context(|| format!("reading manifests from {}", dir.display()))?;
    tracing::info!(objects, "loaded manifests");
    let (synced_tx, synced) = watch::channel(true);
    tokio::spawn(files::watch(
        paths,
        process.index.clone(),
        MANIFEST_POLL,
        synced_tx,
        Some(read),
    ));
    Ok(Source {
        synced,
        cluster: None,
        manifests: true,
    })
}

async fn start_cluster_source(args: &ServeArgs, process: &mut Process) -> Result<Source> {
    let client = kube::client(args.kubeconfig.as_deref())
        .await
        .context("connecting to the cluster (pass --manifests DIR to run without one)")?;
    let config = kube::Config {
        discovery_interval: args.discovery_interval,
        absence_grace: args.absence_grace,
        ..kube::Config::default()
    };
    let source = Arc::new(kube::KubeSource::spawn(
        client.clone(),
        process.index.clone(),
        config,
    ));
    let synced = source.ready();
    let (exported, metrics) = (source.clone(), process.metrics.clone());
    // Keep the source alive and export its staleness and absences.
    process.tasks.spawn(async move {
        loop {
            for (kind, staleness) in exported.staleness() {
                metrics.set_source_staleness(kind.kind(), staleness);
            }
            for status in exported.status() {
                for ((absence, decision), total) in &status.absences {
                    metrics.set_absences(
                        status.kind.kind(),
                        absence.as_str(),
                        decision.as_str(),
                        *total,
                    );
                }
            }
            tokio::time::sleep(STALENESS_EXPORT).await;
        }
    });
    Ok(Source {
        synced,
        cluster: Some((client, source)),
        manifests: false,
    })
}

/// The sync loop's syncer: zones, provider and policy from the flags; with the cluster source,
/// writes gated by the Lease (when leader election is on) and the source's health.
async fn build_syncer(
    args: &ServeArgs,
    source: &Source,
    leader: Option<watch::Receiver<bool>>,
    process: &mut Process,
) -> Result<Syncer> {
    let zones = zones_for(args, source.manifests.then_some(&process.index))?;
    let provider = provider_for(args, &zones, process).await?;
    let mut sync_config = SyncConfig::new(args.provider_flags.txt_owner_id.clone(), zones.clone());
    sync_config.policy = args.policy.parse().map_err(|e| anyhow::anyhow!("{e}"))?;
    sync_config.interval = args.interval;
    sync_config.dry_run = args.dry_run;
    sync_config.registry = super::provider::registry(&args.provider_flags)?;
    sync_config.shared_names =
        crate::engine::Config::parse_shared_names(&args.engine.shared_names)?;
    sync_config.adopt_after = args.adopt_after;
    if matches!(args.provider, ProviderKind::Dnsendpoint) {
        // Its ownership records are read back from the DNSEndpoint objects' labels, never
        // written as TXT: external-dns, which writes them, applies its own encryption.
        sync_config.registry = sync_config.registry.with_encryption(None, false);
    }
    // The embedded server's zones are this installation's own: no one else holds a name there.
    let viewing = args.zone_view && !matches!(args.provider, ProviderKind::Embedded);
    if args.zone_notify_listen.is_some() && !viewing {
        bail!("--zone-notify-listen needs the zone view: --provider rfc2136 and --zone-view");
    }
    if viewing && !args.once {
        let config = crate::zone_view::ZoneViewConfig {
            interval: args.zone_refresh_interval,
            max_age: args.zone_view_max_age,
            adopt_after: args.adopt_after,
        };
        let wake = Arc::new(Notify::new());
        if let Some(listen) = args.zone_notify_listen {
            spawn_zone_notify(args, listen, &zones, wake.clone(), process).await?;
        }
        let (provider, registry) = (provider.clone(), sync_config.registry.clone());
        let (index, metrics) = (process.index.clone(), process.metrics.clone());
        process.tasks.spawn(async move {
            crate::zone_view::run(provider, registry, index, metrics, config, wake).await;
            Ok(())
        });
    }
    // Heartbeats, for `zone release` to tell this installation from a dead one: written by the
    // Lease holder (the write gate's leader) through every outside provider; the embedded
    // server's zones are this installation's alone. While another installation writes with this
    // owner id, no DNS write. --dry-run writes nothing, heartbeats included.
    let mut writes_allowed: Option<watch::Receiver<bool>> = None;
    if !args.once
        && !args.dry_run
        && !args.owner_heartbeat_interval.is_zero()
        && !matches!(args.provider, ProviderKind::Embedded)
    {
        let instance = format!("{:016x}", fastrand::u64(..));
        let (provider, owner) = (provider.clone(), args.provider_flags.txt_owner_id.clone());
        let (interval, leader) = (args.owner_heartbeat_interval, leader.clone());
        let (allowed, allowed_rx) = watch::channel(true);
        if let Some((client, _)) = &source.cluster
            && args.leader_election
        {
            spawn_conflict_events(args, client.clone(), allowed_rx.clone(), process);
        }
        writes_allowed = Some(allowed_rx);
        let metrics = process.metrics.clone();
        process.tasks.spawn(async move {
            crate::zone_view::heartbeat::run(
                provider, owner, instance, interval, leader, allowed, metrics,
            )
            .await;
            Ok(())
        });
    }
    let mut syncer = Syncer::new(
        provider,
        Arc::new(EngineDesired::new(process.index.clone())),
        sync_config,
        process.metrics.clone(),
    );
    // Without an election this replica is the only writer: it counts as the leader.
    if leader.is_none() {
        process.metrics.set_leader(true);
    }
    if let Some((_, cluster_source)) = &source.cluster {
        syncer = syncer.with_write_gate(write_gate(leader, cluster_source.clone(), writes_allowed));
        let held = cluster_source.clone();
        syncer = syncer.with_removal_hold(Arc::new(move || held.removals_held()));
    } else if let Some(allowed) = writes_allowed {
        syncer = syncer.with_write_gate(allowed);
    }
    tracing::info!(provider = ?args.provider, zones = ?zones, "DNS sync configured");
    process.status.provider = Some(args.provider.name());
    process.status.zones = zones;
    Ok(syncer)
}

/// Takes NOTIFY from the RFC 2136 server on `listen`, waking the zone view.
async fn spawn_zone_notify(
    args: &ServeArgs,
    listen: std::net::SocketAddr,
    zones: &[String],
    wake: Arc<Notify>,
    process: &mut Process,
) -> Result<()> {
    use crate::zone_view::notify;
    if !matches!(args.provider, ProviderKind::Rfc2136) {
        bail!("--zone-notify-listen takes NOTIFY from an RFC 2136 server: --provider rfc2136");
    }
    let server = super::provider::rfc2136_server(&args.provider_flags)?;
    let primaries: Vec<std::net::IpAddr> = tokio::net::lookup_host((server.host(), server.port()))
        .await
        .with_context(|| format!("resolving the RFC 2136 server {server}"))?
        .map(|addr| addr.ip())
        .collect();
    let socket = notify::bind(listen)
        .await
        .with_context(|| format!("--zone-notify-listen {listen}"))?;
    tracing::info!(%listen, ?primaries, "zone view: taking NOTIFY");
    let config = notify::NotifyConfig {
        primaries,
        zones: zones.to_vec(),
    };
    process.tasks.spawn(async move {
        notify::run(socket, config, wake).await;
        Ok(())
    });
    Ok(())
}

/// The sync loop's writes as the feedback module reads them.
fn applied_records(changes: &Changes) -> Vec<AppliedRecord> {
    let adopted_from = |endpoint: &crate::dns::Endpoint| {
        changes
            .adopted
            .iter()
            .find(|(name, t, _)| *name == endpoint.dns_name && *t == endpoint.record_type)
            .map(|(_, _, from)| from.clone())
    };
    let written = changes.create.iter().chain(&changes.update);
    let mut records: Vec<AppliedRecord> = written
        .map(|endpoint| (endpoint, false))
        .chain(changes.delete.iter().map(|endpoint| (endpoint, true)))
        .map(|(endpoint, removed)| AppliedRecord {
            dns_name: canonical(&endpoint.dns_name).into_owned(),
            record_type: endpoint.record_type,
            targets: endpoint.targets.iter().cloned().collect(),
            removed,
            resource: endpoint.resource.clone(),
            adopted_from: adopted_from(endpoint),
        })
        .collect();
    // Our part of shared names: published with the name's targets, or removed.
    records.extend(changes.shared.iter().map(|edit| {
        let (data, _) = edit.outcome();
        AppliedRecord {
            dns_name: edit.dns_name.clone(),
            record_type: edit.record_type,
            targets: data
                .map(|d| d.targets.into_iter().collect())
                .unwrap_or_default(),
            removed: edit.txt_add.is_none(),
            resource: None,
            adopted_from: None,
        }
    }));
    records
}

/// A Warning Event on the Lease each time another installation is found writing DNS with this
/// owner id, so that `kubectl get events -n NAMESPACE` says why nothing is written.
fn spawn_conflict_events(
    args: &ServeArgs,
    client: ::kube::Client,
    mut allowed: watch::Receiver<bool>,
    process: &mut Process,
) {
    let namespace = args.leader_election_namespace.clone();
    let lease = args.lease_name.clone();
    let owner = args.provider_flags.txt_owner_id.clone();
    process.tasks.spawn(async move {
        while allowed.changed().await.is_ok() {
            if *allowed.borrow_and_update() {
                continue;
            }
            let note = format!(
                "another installation writes DNS with --txt-owner-id {owner:?}: neither writes \
                 until one of them is given another owner id"
            );
            if let Err(error) = crate::feedback::cluster::warn_on_lease(
                &client,
                (&namespace, &lease),
                &pod_identity(),
                crate::feedback::cluster::OWNER_ID_CONFLICT,
                &note,
            )
            .await
            {
                tracing::warn!(%error, "could not write the owner id conflict's Event");
            }
        }
        Ok(())
    });
}

/// This replica's name: the Lease holder identity and the Events' `reportingInstance`.
fn pod_identity() -> String {
    std::env::var("POD_NAME")
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| format!("gateway-dns-{}", std::process::id()))
}

/// Campaigns for the Lease for the life of the process; the receiver says whether we hold it.
fn start_leader_election(
    args: &ServeArgs,
    client: &::kube::Client,
    process: &mut Process,
) -> Result<watch::Receiver<bool>> {
    let identity = pod_identity();
    let leader_config = LeaderConfig {
        lease_duration: args.leader_election_lease_duration,
        renew_deadline: args.leader_election_renew_deadline,
        retry_period: args.leader_election_retry_period,
        ..LeaderConfig::new(&args.leader_election_namespace, &args.lease_name, &identity)
    };
    let election =
        LeaderElection::spawn(client.clone(), leader_config).context("starting leader election")?;
    let leader = election.is_leader();
    process.status.lease_holder = Some(election.holder());
    process.election = Some(election);
    let (mut holding, metrics) = (leader.clone(), process.metrics.clone());
    metrics.set_leader(*holding.borrow_and_update());
    process.tasks.spawn(async move {
        // Export who holds the Lease for the life of the process.
        while holding.changed().await.is_ok() {
            metrics.set_leader(*holding.borrow_and_update());
        }
        std::future::pending::<()>().await;
        Ok(())
    });
    Ok(leader)
}

/// The HTTPS webhook: certificates (files, reloaded on change, or made in memory), the engine's
/// handler, bound before this returns so a taken port fails the start.
async fn start_webhook(args: &ServeArgs, process: &mut Process) -> Result<()> {
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
    let tls_runtime = tls::start(cert_source, process.metrics.clone())
        .await
        .context("setting up TLS")?;
    let options = WebhookOptions {
        admission_deadline: args.admission_deadline,
        ..WebhookOptions::default()
    };
    let handler = Arc::new(EngineHandler::new(
        process.index.clone(),
        process.metrics.clone(),
    ));
    let app = server::router(WebhookState::new(
        handler,
        process.metrics.clone(),
        process.readiness.clone(),
        options,
    ));
    let listener = server::bind(args.listen).await?;
    tracing::info!(addr = %args.listen, "webhook listening (HTTPS)");
    let readiness = process.readiness.clone();
    let config = match &args.client_ca {
        Some(client_ca) => tls::requiring_client_certs(&tls_runtime, client_ca)
            .with_context(|| format!("--client-ca {}", client_ca.display()))?,
        None => tls_runtime.server_config.clone(),
    };
    let listener_options = listener_options(args, &process.metrics, "webhook");
    let mut stopping = process.stopping.subscribe();
    let (drained, drained_receiver) = tokio::sync::oneshot::channel();
    process.webhook_drained = Some(drained_receiver);
    process.tasks.spawn(async move {
        // Keep the TLS runtime (and its reloader) alive as long as the server runs.
        let _tls_runtime = tls_runtime;
        let stop = async move {
            let _ = stopping.wait_for(|stop| *stop).await;
        };
        server::serve_tls_with(listener, config, app, readiness, listener_options, stop).await?;
        let _ = drained.send(());
        // Drained: this task waits to be stopped with the others.
        std::future::pending::<()>().await;
        Ok(())
    });
    Ok(())
}

/// The transport limits of the webhook and metrics listeners, from the flags, with their cap
/// events counted under `listener`.
fn listener_options(
    args: &ServeArgs,
    metrics: &Arc<Metrics>,
    listener: &'static str,
) -> server::ListenerOptions {
    server::ListenerOptions {
        caps: Some(cap_observer(metrics, listener)),
        connections: ConnectionLimits {
            max_connections: args.max_connections,
            max_per_source: args.max_connections_per_source,
            first_request_timeout: args.first_request_timeout,
            idle_timeout: args.idle_timeout,
        },
        handshake_timeout: args.handshake_timeout,
        http2_keepalive_interval: args.http2_keepalive_interval,
        ..server::ListenerOptions::default()
    }
}

/// Counts the connections a listener closes or refuses at a cap (`net` knows no metrics).
fn cap_observer(metrics: &Arc<Metrics>, listener: &'static str) -> CapObserver {
    let metrics = metrics.clone();
    CapObserver::new(move |event| match event {
        CapEvent::Evicted(cap) => metrics.record_connection_evicted(listener, cap.as_str()),
        CapEvent::Refused(cap) => metrics.record_connection_refused(listener, cap.as_str()),
    })
}

/// The plain-HTTP listener for `/metrics` and `/healthz` (`--metrics-listen`), and the status
/// page (`--status-page`).
async fn start_metrics_listener(
    addr: std::net::SocketAddr,
    options: server::ListenerOptions,
    status_page: bool,
    process: &mut Process,
) -> Result<()> {
    let listener = server::bind(addr).await?;
    tracing::info!(%addr, status_page, "metrics listening (HTTP)");
    let mut app = server::metrics_router(process.metrics.clone(), process.readiness.clone());
    if status_page {
        let state = crate::status::StatusState::new(
            process.index.clone(),
            process.metrics.clone(),
            std::mem::take(&mut process.status),
        );
        let sampler = state.clone();
        process.tasks.spawn(async move {
            sampler.run().await;
            Ok(())
        });
        app = crate::status::router(state).merge(app);
    }
    process.tasks.spawn(async move {
        server::serve_plain(listener, app, options, std::future::pending::<()>()).await?;
        Ok(())
    });
    Ok(())
}

/// Sync passes whose writes may wait to be told as Events; more are dropped (best effort).
const APPLIED_BACKLOG: usize = 16;

/// How often the write gate looks at the source's health between leadership changes.
const GATE_POLL: Duration = Duration::from_millis(250);

/// Open while this replica may write DNS: it holds the Lease (when there is an election) and its
/// cluster source is in sync. Leadership changes pass through at once; source health is polled.
pub fn write_gate(
    mut leader: Option<watch::Receiver<bool>>,
    source: Arc<kube::KubeSource>,
    mut allowed: Option<watch::Receiver<bool>>,
) -> watch::Receiver<bool> {
    let (gate, open) = watch::channel(false);
    let mut ready = source.ready();
    tokio::spawn(async move {
        // Said once per wait, so that a closed gate is never taken for a lost Lease.
        let mut said_waiting = false;
        loop {
            let leading = leader.as_mut().is_none_or(|l| *l.borrow_and_update());
            let in_sync = source.in_sync();
            let no_conflict = allowed.as_mut().is_none_or(|a| *a.borrow_and_update());
            let should_open = leading && in_sync && no_conflict;
            if leading && !in_sync && !said_waiting {
                let kinds: Vec<String> = source
                    .status()
                    .iter()
                    .filter(|s| s.version.is_some() && (!s.synced || s.failing_since.is_some()))
                    .map(|s| s.kind.to_string())
                    .collect();
                tracing::info!(
                    ?kinds,
                    "the cluster view is not in sync: DNS writes wait for it"
                );
            }
            said_waiting = leading && !in_sync;
            gate.send_if_modified(|current| std::mem::replace(current, should_open) != should_open);
            let leadership_changed = async {
                match leader.as_mut() {
                    Some(l) => l.changed().await.is_ok(),
                    None => std::future::pending().await,
                }
            };
            // The source's first full sync opens the gate at once: a replica that starts
            // alone writes as soon as it has both the Lease and the cluster's objects.
            let source_ready = async {
                if ready.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            };
            let conflict_changed = async {
                let changed = match allowed.as_mut() {
                    Some(a) => a.changed().await.is_ok(),
                    None => false,
                };
                if !changed {
                    std::future::pending::<()>().await;
                }
            };
            tokio::select! {
                alive = leadership_changed => if !alive {
                    gate.send_replace(false);
                    return;
                },
                () = source_ready => {}
                () = conflict_changed => {}
                () = tokio::time::sleep(GATE_POLL) => {}
                () = gate.closed() => return,
            }
        }
    });
    open
}

/// The managed zones: `--zone`, or for the embedded server alone, inferred from the records the
/// manifests would publish (so the local quick start needs no flags).
fn zones_for(args: &ServeArgs, manifests: Option<&Index>) -> Result<Vec<String>> {
    let zones = super::provider::zones(&args.provider_flags);
    if !zones.is_empty() {
        return Ok(zones);
    }
    match (args.provider, manifests) {
        (ProviderKind::Embedded, Some(index)) => {
            // The outcome the first sync pass publishes from (one evaluation per snapshot).
            let inferred = inferred_zones(&index.settled());
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

/// The embedded server's secondaries, as `gateway_dns_secondary_serial_lag` (serials and
/// seconds) tells them.
pub fn export_secondaries(server: &authority::EmbeddedDns, metrics: &Metrics) {
    let now = std::time::Instant::now();
    for status in server.secondaries() {
        metrics.set_secondary_lag(
            &status.secondary.to_string(),
            if status.caught_up() {
                0
            } else {
                status.behind.unwrap_or(0)
            },
            status.lag(now),
        );
    }
}

async fn provider_for(
    args: &ServeArgs,
    zones: &[String],
    process: &mut Process,
) -> Result<Arc<dyn Provider>> {
    Ok(match args.provider {
        ProviderKind::Embedded => {
            let mut config = authority::EmbeddedConfig::new(zones.to_vec());
            config.listen = args.dns_listen;
            config.tcp_limits = ConnectionLimits {
                max_connections: args.dns_tcp_max_connections,
                max_per_source: args.dns_tcp_max_connections_per_source,
                first_request_timeout: args.dns_tcp_idle_timeout,
                idle_timeout: args.dns_tcp_idle_timeout,
            };
            config.tcp_caps = Some(cap_observer(&process.metrics, "dns"));
            config.udp_answers_per_source_per_second = args.dns_rrl_rate;
            config.secondaries = args.embedded_secondaries.clone();
            config.secondary_check_interval = args.embedded_secondary_check_interval;
            config.transfer_key = match &args.embedded_tsig_key_name {
                None => None,
                Some(name) => {
                    let algorithm = args
                        .embedded_tsig_algorithm
                        .parse()
                        .map_err(|e| anyhow::anyhow!("--embedded-tsig-algorithm: {e}"))?;
                    let secret = SecretSource::pick(
                        args.embedded_tsig_secret_file.clone(),
                        authority::TSIG_SECRET_ENV,
                    );
                    Some(
                        TsigKey::load(name, algorithm, &secret)
                            .context("loading the embedded DNS transfer TSIG key")?,
                    )
                }
            };
            config.dnssec_keys = args
                .embedded_dnssec_keys
                .iter()
                .map(|path| authority::ZoneKey::load(path).map(Arc::new))
                .collect::<Result<_, _>>()
                .context("--embedded-dnssec-key")?;
            if !config.secondaries.is_empty() && config.transfer_key.is_none() {
                bail!("--embedded-secondary needs --embedded-tsig-key-name (transfers are signed)");
            }
            let server = Arc::new(authority::EmbeddedDns::start(config).await?);
            tracing::info!(addr = %server.local_addr(), "embedded DNS server listening (UDP and TCP)");
            if !args.embedded_secondaries.is_empty() {
                let (exported, metrics) = (server.clone(), process.metrics.clone());
                process.tasks.spawn(async move {
                    loop {
                        export_secondaries(&exported, &metrics);
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                });
            }
            server
        }
        kind => {
            super::provider::reader_writer(
                kind,
                &args.provider_flags,
                args.kubeconfig.as_deref(),
                None,
                zones,
            )
            .await?
        }
    })
}

async fn wait_synced(synced: &mut watch::Receiver<bool>) -> Result<()> {
    synced
        .wait_for(|ready| *ready)
        .await
        .map(|_| ())
        .map_err(|_| anyhow::anyhow!("the source stopped before its first sync"))
}

/// `--once`: one pass after the first full sync. Exit status (`serve --help`): 0 converged, or
/// with `--dry-run` the plan computed (and printed); 1 the pass failed or changes remain; 3 only
/// records blocked by records gateway-dns does not own stand in the way.
async fn run_once(
    syncer: Arc<Syncer>,
    mut synced: watch::Receiver<bool>,
    dry_run: bool,
) -> Result<u8> {
    tokio::time::timeout(ONCE_SYNC_TIMEOUT, wait_synced(&mut synced))
        .await
        .context("the source did not complete its first sync in time")??;
    let report = match syncer.run_once().await {
        Ok(report) => report,
        Err(err) => {
            // A failed pass is the outcome `--once` reports, not a configuration error.
            eprintln!("gateway-dns serve --once: {}", super::error_chain(&err));
            return Ok(EXIT_ONCE_FAILED);
        }
    };
    let plan = &report.pass.plan;
    let blocked = &report.remaining.blocked;
    println!(
        "planned {} create, {} update, {} delete; applied {}; blocked {}; {}",
        plan.changes.create.len(),
        plan.changes.update.len(),
        plan.changes.delete.len(),
        report.pass.applied,
        blocked.len(),
        if dry_run {
            "dry run: nothing written"
        } else if report.converged {
            "converged"
        } else {
            "not converged"
        }
    );
    if dry_run {
        for (verb, endpoints) in [
            ("create", &plan.changes.create),
            ("update", &plan.changes.update),
            ("delete", &plan.changes.delete),
        ] {
            for endpoint in endpoints {
                println!("{verb}: {endpoint}");
            }
        }
    }
    for blocked in blocked {
        println!("blocked: {blocked}");
    }
    Ok(if dry_run || report.converged {
        EXIT_OK
    } else if report.remaining.is_empty() {
        EXIT_ONCE_BLOCKED
    } else {
        EXIT_ONCE_FAILED
    })
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
