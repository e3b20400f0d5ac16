//! The read-only status page `serve` shows on the metrics listener (`--status-page`): an
//! overview, the names table, the findings by namespace, and a page per name with what
//! `explain NAME` says, from the engine's own explanation and `explain`'s own formatters.
//! HTML is rendered here (askama templates in `templates/`, with their style sheet and script
//! served beside them); the same data is `/status.json`. Nothing secret is shown: no TSIG key
//! names, no keys, no provider addresses.

pub mod view;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use askama::Template;
use axum::Router;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::sync::{Semaphore, watch};

use crate::engine::Outcome;
use crate::engine::explain::{explain_name, parse_name};
use crate::engine::explain_text::{Explained, Held, to_json, to_text};
use crate::index::{Index, Snapshot};
use crate::metrics::{BlockedGroup, Metrics};
use crate::model::format_rfc3339;
use view::{Health, NameQuery, NamesPage, NamespaceFindings, Overview};

/// Pages built at once; a caller beyond that is asked to come back, so that the page never
/// takes more than one core from the webhook.
const CONCURRENT_BUILDS: usize = 1;
/// How often the webhook's answer count is sampled, and the settled outcome the page keeps
/// is let go of when unused.
const SAMPLE: Duration = Duration::from_secs(5);
/// The window of the admission answers per minute.
const ANSWER_WINDOW: Duration = Duration::from_secs(60);
/// How long the page keeps a settled outcome it read after its last request: a page loaded
/// again soon (a filter changed) settles nothing anew, and an idle page holds no memory.
const KEEP_OUTCOME: Duration = Duration::from_secs(60);

/// The page's headers: nothing may be loaded from elsewhere, nor the page framed.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; style-src 'self'; script-src 'self'; \
     form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

/// The style sheet and the script of every page, served from this listener.
const STYLE: &str = include_str!("templates/status.css");
const SCRIPT: &str = include_str!("templates/status.js");

/// What the page reads: the index, the metrics, and what `serve` knows of its sync and Lease.
#[derive(Clone)]
pub struct StatusState {
    index: Index,
    metrics: Arc<Metrics>,
    context: Arc<Context>,
    builds: Arc<Semaphore>,
    samples: Arc<Mutex<Vec<(Instant, u64)>>>,
    /// The last snapshot and outcome a page read, and when.
    kept: Arc<Mutex<Option<Kept>>>,
}

struct Kept {
    snapshot: Arc<Snapshot>,
    outcome: Arc<Outcome>,
    used: Instant,
}

/// What `serve` was started with, as the page shows it.
#[derive(Debug, Clone, Default)]
pub struct Context {
    /// The DNS provider's name (`rfc2136`, …); None without the sync loop.
    pub provider: Option<&'static str>,
    pub zones: Vec<String>,
    pub owner_id: String,
    /// Who holds the Lease; None without an election.
    pub lease_holder: Option<watch::Receiver<Option<String>>>,
}

impl StatusState {
    pub fn new(index: Index, metrics: Arc<Metrics>, context: Context) -> StatusState {
        StatusState {
            index,
            metrics,
            context: Arc::new(context),
            builds: Arc::new(Semaphore::new(CONCURRENT_BUILDS)),
            samples: Arc::new(Mutex::new(Vec::new())),
            kept: Arc::new(Mutex::new(None)),
        }
    }

    /// Every [`SAMPLE`]: samples the webhook's answer count for the answers per minute, and
    /// lets go of a settled outcome no page has read for [`KEEP_OUTCOME`]; for as long as the
    /// returned future runs.
    pub async fn run(self) {
        let mut tick = tokio::time::interval(SAMPLE);
        loop {
            tick.tick().await;
            let now = Instant::now();
            self.sample(now);
            let mut kept = self
                .kept
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            if kept
                .as_ref()
                .is_some_and(|k| now.duration_since(k.used) >= KEEP_OUTCOME)
            {
                *kept = None;
            }
        }
    }

    fn sample(&self, now: Instant) {
        let mut samples = self
            .samples
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        samples.push((now, self.metrics.admission_requests_total()));
        // Keep one sample at least a window old, to measure the window against.
        while samples.len() > 2 && now.duration_since(samples[1].0) >= ANSWER_WINDOW {
            samples.remove(0);
        }
    }

    fn answers_per_minute(&self) -> Option<f64> {
        let samples = self
            .samples
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let (first, last) = (samples.first()?, samples.last()?);
        let span = last.0.duration_since(first.0);
        (span >= ANSWER_WINDOW)
            .then(|| (last.1.saturating_sub(first.1)) as f64 * 60.0 / span.as_secs_f64())
    }

    /// The current snapshot and the outcome settled from it: the one kept when the index has
    /// not changed since, else settled now (and kept).
    fn settled(&self) -> (Arc<Snapshot>, Arc<Outcome>) {
        let current = self.index.snapshot();
        let mut kept = self
            .kept
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(k) = kept.as_mut()
            && Arc::ptr_eq(&k.snapshot, &current)
        {
            k.used = Instant::now();
            return (k.snapshot.clone(), k.outcome.clone());
        }
        drop(current);
        let (snapshot, outcome) = self.index.settled_with_snapshot();
        *kept = Some(Kept {
            snapshot: snapshot.clone(),
            outcome: outcome.clone(),
            used: Instant::now(),
        });
        (snapshot, outcome)
    }

    fn health(&self) -> Health {
        let last = self.metrics.last_successful_sync_seconds();
        let provider = self.context.provider;
        Health {
            provider: provider.map(str::to_owned),
            zones: self.context.zones.clone(),
            owner_id: self.context.owner_id.clone(),
            last_successful_sync: (last > 0.0).then(|| format_rfc3339(last as i64)).flatten(),
            sync_errors: provider.map_or(0, |p| self.metrics.sync_errors(p)),
            leading: self.metrics.leading(),
            lease_holder: self
                .context
                .lease_holder
                .as_ref()
                .and_then(|h| h.borrow().clone()),
            blocked: BlockedGroup::ALL
                .into_iter()
                .map(|g| (g.as_str(), self.metrics.records_blocked(g)))
                .collect(),
            answers_per_minute: self.answers_per_minute(),
            answers_total: self.metrics.admission_requests_total(),
        }
    }
}

/// The status page's routes, to be merged into the metrics listener's router.
pub fn router(state: StatusState) -> Router {
    Router::new()
        .route("/", get(overview_page))
        .route("/names", get(names_page))
        .route("/names/{name}", get(name_page))
        .route("/names/{name}/explain.json", get(name_json))
        .route("/findings", get(findings_page))
        .route("/status.json", get(status_json))
        .route(
            "/status.css",
            get(|| async { asset("text/css; charset=utf-8", STYLE) }),
        )
        .route(
            "/status.js",
            get(|| async { asset("text/javascript; charset=utf-8", SCRIPT) }),
        )
        .with_state(state)
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
            (
                header::CACHE_CONTROL,
                HeaderValue::from_static("max-age=300"),
            ),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
        ],
        body,
    )
        .into_response()
}

/// Builds a page on the blocking pool, at most [`CONCURRENT_BUILDS`] at once.
async fn build<T: Send + 'static>(
    state: &StatusState,
    make: impl FnOnce(&StatusState) -> T + Send + 'static,
) -> Result<T, Response> {
    let Ok(permit) = state.builds.clone().try_acquire_owned() else {
        return Err((
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::RETRY_AFTER, HeaderValue::from_static("1"))],
            "the status page is busy; try again in a second\n",
        )
            .into_response());
    };
    let state = state.clone();
    // The permit goes with the build: a request dropped mid-build frees no slot early.
    tokio::task::spawn_blocking(move || {
        let _permit = permit;
        make(&state)
    })
    .await
    .map_err(|_| {
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            "building the page failed\n",
        )
            .into_response()
    })
}

fn html(body: Result<String, askama::Error>) -> Response {
    match body {
        Ok(body) => (
            [
                (
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("text/html; charset=utf-8"),
                ),
                (
                    header::CONTENT_SECURITY_POLICY,
                    HeaderValue::from_static(CONTENT_SECURITY_POLICY),
                ),
                (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
                (
                    header::X_CONTENT_TYPE_OPTIONS,
                    HeaderValue::from_static("nosniff"),
                ),
            ],
            body,
        )
            .into_response(),
        Err(error) => {
            tracing::warn!(%error, "rendering the status page failed");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "rendering the page failed\n",
            )
                .into_response()
        }
    }
}

fn json(body: String) -> Response {
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
        ],
        body + "\n",
    )
        .into_response()
}

/// Everything the page shows, as one value (`/status.json`).
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    pub overview: Overview,
    pub names: NamesPage,
    pub findings: Vec<NamespaceFindings>,
}

/// Everything, with the names table's page `query` asks for; without a query (a page that shows
/// no table) the table is left empty, unbuilt.
fn status(state: &StatusState, query: Option<&NameQuery>) -> Status {
    let (snapshot, outcome) = state.settled();
    // The budget is the table's own: settling, shared with the sync loop, is not counted.
    let deadline = Instant::now() + view::BUILD_BUDGET;
    let unfiltered = NameQuery::default();
    let (rows, total, partial) = match query {
        Some(query) => view::rows(
            &*snapshot,
            &outcome,
            &state.context.zones,
            &state.context.owner_id,
            query,
            deadline,
        ),
        None => (Vec::new(), 0, false),
    };
    Status {
        overview: view::overview(&*snapshot, &outcome, state.health()),
        names: view::names_page(rows, total, partial, query.unwrap_or(&unfiltered)),
        findings: view::findings_by_namespace(&outcome.violations),
    }
}

mod pages {
    //! The templates' values. Each page is one struct; `templates/` has its HTML.

    use askama::Template;

    use super::view::{NameQuery, NamesPage, NamespaceFindings, Overview};

    #[derive(Template)]
    #[template(path = "overview.html", config = "src/status/askama.toml")]
    pub struct OverviewHtml<'a> {
        /// Which navigation link is the current page.
        pub page: &'static str,
        pub overview: &'a Overview,
        pub now: String,
    }

    #[derive(Template)]
    #[template(path = "names.html", config = "src/status/askama.toml")]
    pub struct NamesHtml<'a> {
        /// Which navigation link is the current page.
        pub page: &'static str,
        pub names: &'a NamesPage,
        pub query: &'a NameQuery,
        pub reasons: Vec<&'static str>,
        pub now: String,
    }

    #[derive(Template)]
    #[template(path = "findings.html", config = "src/status/askama.toml")]
    pub struct FindingsHtml<'a> {
        /// Which navigation link is the current page.
        pub page: &'static str,
        pub groups: &'a [NamespaceFindings],
        pub now: String,
    }

    #[derive(Template)]
    #[template(path = "name.html", config = "src/status/askama.toml")]
    pub struct NameHtml<'a> {
        /// Which navigation link is the current page.
        pub page: &'static str,
        pub name: &'a str,
        pub resolves: bool,
        pub winner: Option<&'a str>,
        pub text: &'a str,
        pub json: &'a str,
        pub now: String,
    }

    /// A path segment for a name (`*.example.com` keeps its star readable).
    pub fn name_href(name: &str) -> String {
        let mut href = String::from("/names/");
        href.extend(
            percent_encoding::utf8_percent_encode(name, super::PATH_SEGMENT).flat_map(str::chars),
        );
        href
    }
}

/// What a path segment must escape.
const PATH_SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'/')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'`')
    .add(b'{')
    .add(b'}');

fn now() -> String {
    let seconds = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    format_rfc3339(i64::try_from(seconds).unwrap_or(i64::MAX)).unwrap_or_default()
}

async fn overview_page(State(state): State<StatusState>) -> Response {
    match build(&state, |state| status(state, None)).await {
        Ok(status) => html(
            pages::OverviewHtml {
                page: "overview",
                overview: &status.overview,
                now: now(),
            }
            .render(),
        ),
        Err(busy) => busy,
    }
}

/// The query, or what is wrong with it.
fn read_query(query: Result<Query<NameQuery>, QueryRejection>) -> Result<NameQuery, String> {
    query
        .map(|Query(query)| query)
        .map_err(|rejection| rejection.body_text())
}

fn bad_request(why: String) -> Response {
    (
        StatusCode::BAD_REQUEST,
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            ),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
        ],
        why + "\n",
    )
        .into_response()
}

async fn names_page(
    State(state): State<StatusState>,
    query: Result<Query<NameQuery>, QueryRejection>,
) -> Response {
    let query = match read_query(query) {
        Ok(query) => query,
        Err(why) => return bad_request(why),
    };
    let asked = query.clone();
    match build(&state, move |state| status(state, Some(&asked))).await {
        Ok(status) => html(
            pages::NamesHtml {
                page: "names",
                names: &status.names,
                query: &query,
                reasons: view::reason_names(),
                now: now(),
            }
            .render(),
        ),
        Err(busy) => busy,
    }
}

async fn findings_page(State(state): State<StatusState>) -> Response {
    match build(&state, |state| status(state, None)).await {
        Ok(status) => html(
            pages::FindingsHtml {
                page: "findings",
                groups: &status.findings,
                now: now(),
            }
            .render(),
        ),
        Err(busy) => busy,
    }
}

async fn status_json(
    State(state): State<StatusState>,
    query: Result<Query<NameQuery>, QueryRejection>,
) -> Response {
    let query = match read_query(query) {
        Ok(query) => query,
        Err(why) => return bad_request(why),
    };
    match build(&state, move |state| status(state, Some(&query))).await {
        // Serializing strings, numbers and lists cannot fail.
        Ok(status) => json(serde_json::to_string_pretty(&status).unwrap_or_default()),
        Err(busy) => busy,
    }
}

/// `explain NAME`'s explanation of one name, with what the page can say of the provider.
fn explained(state: &StatusState, name: &str) -> Result<(Explained, Held), String> {
    let name = parse_name(name).map_err(|e| e.to_string())?;
    let explanation = explain_name(&*state.index.snapshot(), &name);
    let held = Held {
        provider: state.context.provider,
        zones: state.context.zones.clone(),
        note: Some(
            "not listed by the status page: `gateway-dns explain NAME --provider …` lists it"
                .to_owned(),
        ),
        ..Held::default()
    };
    Ok((Explained::Name(explanation), held))
}

async fn name_page(State(state): State<StatusState>, Path(name): Path<String>) -> Response {
    let made = build(&state, move |state| {
        explained(state, &name).map(|(explained, held)| {
            let text = to_text(&explained, &held);
            let json = to_json(&explained, &held);
            (explained, text, json)
        })
    })
    .await;
    match made {
        Ok(Ok((Explained::Name(explanation), text, json))) => html(
            pages::NameHtml {
                page: "name",
                name: &explanation.name,
                resolves: explanation.resolves,
                winner: explanation.winner.as_deref(),
                text: &text,
                json: &json,
                now: now(),
            }
            .render(),
        ),
        Ok(Ok(_)) => (StatusCode::INTERNAL_SERVER_ERROR, "not a name\n").into_response(),
        Ok(Err(why)) => bad_request(why),
        Err(busy) => busy,
    }
}

async fn name_json(State(state): State<StatusState>, Path(name): Path<String>) -> Response {
    match build(&state, move |state| {
        explained(state, &name).map(|(explained, held)| to_json(&explained, &held))
    })
    .await
    {
        Ok(Ok(body)) => json(body),
        Ok(Err(why)) => bad_request(why),
        Err(busy) => busy,
    }
}
