//! What every route of the webhook shares: the handler, the options, readiness and metrics.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::Semaphore;

use super::review::AdmissionHandler;
use crate::metrics::Metrics;

/// Largest AdmissionReview body accepted (kube-apiserver's own request limit is 3 MiB).
pub const DEFAULT_MAX_BODY_BYTES: usize = 3 * 1024 * 1024;
pub const DEFAULT_ADMISSION_DEADLINE: Duration = Duration::from_secs(2);
pub const DEFAULT_MAX_IN_FLIGHT: usize = 256;
const DEFAULT_BODY_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Tunables of the `/validate` route.
#[derive(Debug, Clone)]
pub struct WebhookOptions {
    /// Every review is answered within this time from its arrival (or the API server's
    /// `?timeout=`, whichever is shorter), if need be "allowed" with a warning.
    pub admission_deadline: Duration,
    /// Evaluations running at once (quick ones included); more wait for a slot until their
    /// deadline.
    pub max_in_flight: usize,
    /// Larger bodies get 413.
    pub max_body_bytes: usize,
    /// A body not received within this gets 408.
    pub body_read_timeout: Duration,
    /// Serve `POST /baseline-allow` (for the load benchmark only).
    pub enable_baseline_route: bool,
}

impl Default for WebhookOptions {
    fn default() -> Self {
        Self {
            admission_deadline: DEFAULT_ADMISSION_DEADLINE,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            body_read_timeout: DEFAULT_BODY_READ_TIMEOUT,
            enable_baseline_route: false,
        }
    }
}

/// Readiness of the webhook: TLS bound (set by [`super::server::serve_tls`]) and sources synced
/// (set by the caller once every source completed its first sync).
#[derive(Debug, Default)]
pub struct Readiness {
    tls_bound: AtomicBool,
    sources_synced: AtomicBool,
}

impl Readiness {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    pub fn set_sources_synced(&self, synced: bool) {
        self.sources_synced.store(synced, Ordering::Release);
    }

    pub fn set_tls_bound(&self, bound: bool) {
        self.tls_bound.store(bound, Ordering::Release);
    }

    pub fn is_tls_bound(&self) -> bool {
        self.tls_bound.load(Ordering::Acquire)
    }

    pub fn is_sources_synced(&self) -> bool {
        self.sources_synced.load(Ordering::Acquire)
    }

    pub fn is_ready(&self) -> bool {
        self.is_tls_bound() && self.is_sources_synced()
    }
}

/// Shared state of the webhook routes.
#[derive(Clone)]
pub struct WebhookState {
    pub(super) handler: Arc<dyn AdmissionHandler>,
    pub(super) metrics: Arc<Metrics>,
    pub(super) readiness: Arc<Readiness>,
    pub(super) options: Arc<WebhookOptions>,
    /// Evaluations on the blocking pool at once (see [`super::dispatch`]).
    pub(super) evaluation_slots: Arc<Semaphore>,
}

impl WebhookState {
    pub fn new(
        handler: Arc<dyn AdmissionHandler>,
        metrics: Arc<Metrics>,
        readiness: Arc<Readiness>,
        options: WebhookOptions,
    ) -> Self {
        Self {
            handler,
            metrics,
            readiness,
            evaluation_slots: Arc::new(Semaphore::new(options.max_in_flight.max(1))),
            options: Arc::new(options),
        }
    }
}
