//! The cluster source: one watch per kind feeding the index.
//!
//! Discovery picks the newest served version of each kind (`ObjectKind::versions`, newest
//! first). A kind whose CRD is not installed is treated as empty, logged once and re-checked
//! every `discovery_interval`; when it appears it is watched without a restart. Nothing about a
//! missing CRD is fatal.
//!
//! Absence is not deletion. A kind that discovery stops serving keeps its objects in the index
//! until the absence is confirmed: by `absence_rounds` discovery rounds, each made while the API
//! server answers `/readyz`, spread over at least `absence_grace` (a restarting kube-apiserver
//! answers discovery before it has registered every CRD). A relist that comes back empty while
//! the index holds objects of the kind is held the same way, until a relist after the grace
//! confirms it. A Namespace deleted (or left out of a relist) while objects in it are held
//! stays until they are gone, or for the grace. Until every absence is confirmed,
//! [`KubeSource::removals_held`] says why, and the sync loop writes no deletion.
//!
//! A kind's first list is read in pages, each asked for as soon as the previous one's continue
//! token is read, so the server prepares a page while the source reads or stores the last one
//! (a custom resource's list carries its token after its items, a built-in kind's before):
//! nothing is stored yet that a page could be held beside, and on kube-apiserver a streaming
//! list was not quicker to ready (docs/benchmarks.md). Every relist is a streaming list (WatchList:
//! `sendInitialEvents=true` on a watch, one object per event, no page held) where the server
//! offers it, and in pages (kube-rs's watcher) where it refuses one. A list (the first and
//! every relist after a 410 or a restart) is gathered as pointers to
//! the projections the index already holds, new projections only for what changed, and handed
//! to `Index::reset` once complete, so objects deleted while disconnected are dropped and a
//! relist costs little beside the index. Errors back off with jitter while the index keeps
//! serving the last good state.
//!
//! The files: `state.rs` (what every part shares: the configuration, each kind's status and
//! the absences held), `discovery.rs` (which kinds and versions are served, `/readyz`),
//! `supervise.rs` (discovery rounds, watchers started and stopped, absences confirmed),
//! `watcher.rs` (lists in pages or streamed, then watches), `feed.rs` (each watcher's objects
//! into the index).

mod discovery;
mod feed;
mod state;
mod supervise;
mod watcher;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::api::Api;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::warn;

use crate::index::Index;
use crate::model::{Object, ObjectKind};

use discovery::{api_resource, discover};
use feed::{Watched, decode};
pub use state::{
    Absence, AbsenceDecision, Config, DEFAULT_ABSENCE_GRACE, Emptied, KindStatus, Unserved,
};
use state::{Shared, lock};
use supervise::supervise;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("reading kubeconfig: {0}")]
    Kubeconfig(#[from] kube::config::KubeconfigError),
    #[error("finding the cluster configuration (KUBECONFIG, ~/.kube/config or in-cluster): {0}")]
    Infer(#[from] kube::config::InferConfigError),
    #[error("creating the Kubernetes client: {0}")]
    Client(#[source] kube::Error),
    #[error("reading the cluster at {server}")]
    Server {
        server: String,
        #[source]
        source: Box<Error>,
    },
    #[error("finding which Gateway API kinds the cluster serves")]
    Discovery(#[source] kube::Error),
    #[error("listing {kind} ({version})")]
    List {
        kind: ObjectKind,
        version: &'static str,
        #[source]
        source: kube::Error,
    },
}

/// One read of every object the engine reads (Namespaces, Gateways, ListenerSets, routes) at
/// the newest version the cluster serves, in pages: the same `list` verbs serve's RBAC grants,
/// nothing written. An object the decoder cannot read is left out with a warning, as serve
/// does; a kind whose CRD is not installed is empty.
pub async fn list_once(client: &kube::Client) -> Result<Vec<Object>, Error> {
    let served = discover(client).await.map_err(Error::Discovery)?;
    let mut objects = Vec::new();
    for (kind, version) in served {
        let api: Api<Watched> = Api::all_with(client.clone(), &api_resource(kind, version));
        let mut params = kube::api::ListParams::default().limit(500);
        loop {
            let page = api.list(&params).await.map_err(|source| Error::List {
                kind,
                version,
                source,
            })?;
            for item in page.items {
                match decode(kind, item) {
                    Ok(object) => objects.push(object),
                    Err((key, error)) => {
                        warn!(object = %key, %error, "cannot read object; skipped")
                    }
                }
            }
            match page.metadata.continue_ {
                Some(token) if !token.is_empty() => params = params.continue_token(&token),
                _ => break,
            }
        }
    }
    Ok(objects)
}

/// A client from an explicit kubeconfig file, or else as kubectl finds one (`KUBECONFIG`,
/// `~/.kube/config`, then the in-cluster service account).
pub async fn client(kubeconfig: Option<&Path>) -> Result<kube::Client, Error> {
    client_in(kubeconfig, None).await
}

/// [`client`] through one context of the kubeconfig, as kubectl's `--context`; without one,
/// the kubeconfig's current context. A context is only a kubeconfig's: with one and no file,
/// `KUBECONFIG` or `~/.kube/config` is read, never the in-cluster config.
pub async fn client_in(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
) -> Result<kube::Client, Error> {
    kube::Client::try_from(config_in(kubeconfig, context).await?).map_err(Error::Client)
}

/// [`list_once`] over the cluster [`client_in`] finds, its API server named in any error: a
/// context's address, not only its name, says which cluster did not answer.
pub async fn list_cluster(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
) -> Result<Vec<Object>, Error> {
    list_cluster_with_client(kubeconfig, context)
        .await
        .map(|(objects, _)| objects)
}

/// [`list_cluster`], and the client it read with, for a caller that reads more.
pub async fn list_cluster_with_client(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
) -> Result<(Vec<Object>, kube::Client), Error> {
    let config = config_in(kubeconfig, context).await?;
    let server = config.cluster_url.to_string();
    let client = kube::Client::try_from(config).map_err(Error::Client)?;
    let objects = list_once(&client).await.map_err(|source| Error::Server {
        server,
        source: Box::new(source),
    })?;
    Ok((objects, client))
}

async fn config_in(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
) -> Result<kube::Config, Error> {
    let options = kube::config::KubeConfigOptions {
        context: context.map(str::to_owned),
        ..kube::config::KubeConfigOptions::default()
    };
    let config = match (kubeconfig, context) {
        (Some(path), _) => {
            let file = kube::config::Kubeconfig::read_from(path)?;
            kube::Config::from_custom_kubeconfig(file, &options).await?
        }
        (None, Some(_)) => kube::Config::from_kubeconfig(&options).await?,
        (None, None) => kube::Config::infer().await?,
    };
    Ok(config)
}

/// The namespace of a kubeconfig's context (`context`, else its current one), as kubectl
/// takes it for a missing `-n`: None when the context names none. The file is `kubeconfig`,
/// else `KUBECONFIG` (its files merged) or `~/.kube/config`.
pub fn context_namespace(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
) -> Result<Option<String>, kube::config::KubeconfigError> {
    let file = match kubeconfig {
        Some(path) => kube::config::Kubeconfig::read_from(path)?,
        None => kube::config::Kubeconfig::read()?,
    };
    let Some(name) = context
        .map(str::to_owned)
        .or_else(|| file.current_context.clone())
    else {
        return Ok(None);
    };
    Ok(file
        .contexts
        .iter()
        .find(|named| named.name == name)
        .and_then(|named| named.context.as_ref())
        .and_then(|context| context.namespace.clone())
        .filter(|namespace| !namespace.is_empty()))
}

/// The running source. Dropping it stops every watcher.
pub struct KubeSource {
    shared: Arc<Shared>,
    supervisor: JoinHandle<()>,
}

impl Drop for KubeSource {
    fn drop(&mut self) {
        self.supervisor.abort();
        for (_, watcher) in std::mem::take(&mut *lock(&self.shared.watchers)) {
            watcher.abort();
        }
    }
}

impl KubeSource {
    /// Starts discovery and the watchers on the current tokio runtime.
    pub fn spawn(client: kube::Client, index: Index, config: Config) -> KubeSource {
        let now = Instant::now();
        let status = ObjectKind::ALL
            .into_iter()
            .map(|k| (k, KindStatus::new(k, now)))
            .collect();
        let shared = Arc::new(Shared {
            client,
            index,
            config,
            status: Mutex::new(status),
            watchers: Mutex::new(BTreeMap::new()),
            discovered: Mutex::new(false),
            ready: watch::Sender::new(false),
            streaming_refused: AtomicBool::new(false),
            departing: Mutex::new(BTreeMap::new()),
        });
        let supervisor = tokio::spawn(supervise(shared.clone()));
        KubeSource { shared, supervisor }
    }

    /// Becomes true once every served kind completed its first list; then stays true (the
    /// index keeps serving its last good state through later faults).
    pub fn ready(&self) -> watch::Receiver<bool> {
        self.shared.ready.subscribe()
    }

    pub fn is_ready(&self) -> bool {
        *self.shared.ready.borrow()
    }

    /// Every served kind has completed a list and none of their watches is failing right now:
    /// the index mirrors the API server. DNS writes wait for this, so a replica whose watches
    /// just broke (or that just took the Lease after a partition) never deletes records on the
    /// strength of a stale index.
    pub fn in_sync(&self) -> bool {
        *self.shared.ready.borrow()
            && lock(&self.shared.status)
                .values()
                .all(|s| s.version.is_none() || (s.synced && s.failing_since.is_none()))
    }

    /// What is known about one kind's watch.
    pub fn kind_status(&self, kind: ObjectKind) -> Option<KindStatus> {
        lock(&self.shared.status).get(&kind).cloned()
    }

    pub fn status(&self) -> Vec<KindStatus> {
        lock(&self.shared.status).values().cloned().collect()
    }

    /// Why DNS deletions must wait, if they must: before the first discovery, and while an
    /// absence (a kind not served, a relist that came back empty) is not confirmed. Records
    /// of objects that may only look gone are never deleted.
    pub fn removals_held(&self) -> Option<String> {
        if !*lock(&self.shared.discovered) {
            return Some("the cluster's kinds are not discovered yet".to_string());
        }
        let status = lock(&self.shared.status);
        let mut why: Vec<String> = lock(&self.shared.departing)
            .keys()
            .map(|name| format!("Namespace {name} gone while objects in it remain"))
            .collect();
        for entry in status.values() {
            if entry.unserved.is_some() {
                why.push(format!("{} not served, not yet confirmed", entry.kind));
            }
            if entry.emptied.is_some() {
                why.push(format!("{} listed empty, not yet confirmed", entry.kind));
            }
        }
        (!why.is_empty()).then(|| why.join("; "))
    }

    /// Whether lists are streamed (WatchList): configured so and not refused by the server.
    pub fn streams_lists(&self) -> bool {
        self.shared.config.streaming_lists && !self.shared.streaming_refused.load(Ordering::Relaxed)
    }

    /// Seconds-resolution staleness per kind, for a gauge.
    pub fn staleness(&self) -> Vec<(ObjectKind, Duration)> {
        let now = Instant::now();
        lock(&self.shared.status)
            .values()
            .map(|s| (s.kind, s.staleness(now)))
            .collect()
    }
}
