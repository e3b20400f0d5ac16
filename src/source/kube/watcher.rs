//! A kind's lists and watches: the first list in pages fetched ahead, relists streamed where
//! the server offers it (in pages through kube-rs's watcher where it does not), then one
//! watch resumed from the last resourceVersion.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use kube::core::ListMeta;
use kube::runtime::utils::{ResetTimerBackoff, StreamBackoff};
use kube::runtime::watcher;
use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use tokio::task::JoinHandle;
use tracing::info;

use crate::model::ObjectKind;
use crate::retry::Backoff;

use super::discovery::api_resource;
use super::feed::{Feed, Watched};
use super::state::Shared;

/// kube-rs's watcher takes its delays from an iterator it can reset.
impl kube::runtime::utils::Backoff for Backoff {
    fn reset(&mut self) {
        Backoff::reset(self);
    }
}

pub(super) async fn run_watcher(
    shared: Arc<Shared>,
    kind: ObjectKind,
    version: &'static str,
    epoch: u64,
) {
    let api: Api<Watched> = Api::all_with(shared.client.clone(), &api_resource(kind, version));
    let mut feed = Feed {
        shared: shared.clone(),
        kind,
        version,
        epoch,
        listing: None,
    };
    if shared.config.streaming_lists && !shared.streaming_refused.load(Ordering::Relaxed) {
        match watch_streaming(&api, &mut feed).await {
            Streaming::Superseded => return,
            Streaming::Refused(status) => {
                if !shared.streaming_refused.swap(true, Ordering::Relaxed) {
                    info!(%kind, code = status.code, reason = %status.reason, message = %status.message,
                        "the API server refuses streaming lists (WatchList); listing in pages");
                }
            }
        }
    }
    watch_paged(api, &mut feed).await;
}

/// Lists in pages (`page_size` objects a request), then watches: kube-rs's watcher.
pub(super) async fn watch_paged(api: Api<Watched>, feed: &mut Feed) {
    let config = &feed.shared.config;
    let watch_config = watcher::Config::default().page_size(config.page_size);
    let backoff = ResetTimerBackoff::new(
        Backoff::new(config.backoff_min, config.backoff_max),
        config.backoff_max * 2,
    );
    let mut events = StreamBackoff::new(watcher(api, watch_config), backoff).boxed();
    while let Some(event) = events.next().await {
        let current = match event {
            Ok(watcher::Event::Init) => {
                feed.list_started();
                true
            }
            Ok(watcher::Event::InitApply(object)) => feed.listed(object),
            Ok(watcher::Event::InitDone) => feed.list_done(),
            Ok(watcher::Event::Apply(object)) => feed.applied(object),
            Ok(watcher::Event::Delete(object)) => feed.deleted(&object),
            Err(error) => feed.failed(&error),
        };
        if !current {
            return;
        }
    }
}

/// A list page as it is read: the next page is asked for as soon as `metadata` (with the
/// continue token) is read (`on_metadata`). kube-apiserver writes it before `items` for a
/// built-in kind, and after them for a custom resource (an unstructured list's keys are
/// written in order), so there the next page is asked for once this one's objects are
/// decoded, while they go to the index.
pub(super) struct PageSeed<'a> {
    on_metadata: &'a mut dyn FnMut(&ListMeta),
}

pub(super) struct Page {
    metadata: ListMeta,
    items: Vec<Watched>,
}

impl<'de> DeserializeSeed<'de> for PageSeed<'_> {
    type Value = Page;

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<Page, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for PageSeed<'_> {
    type Value = Page;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a list")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Page, A::Error> {
        let mut page = Page {
            metadata: ListMeta::default(),
            items: Vec::new(),
        };
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "metadata" => {
                    page.metadata = map.next_value()?;
                    (self.on_metadata)(&page.metadata);
                }
                "items" => {
                    page.items = map
                        .next_value::<Option<Vec<Watched>>>()?
                        .unwrap_or_default()
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        // A page without metadata has no continue token: nothing to ask for ahead.
        Ok(page)
    }
}

/// Aborts the page being fetched ahead when the list ends early (an error, or superseded).
pub(super) struct FetchAhead(Option<JoinHandle<Result<String, kube::Error>>>);

impl Drop for FetchAhead {
    fn drop(&mut self) {
        if let Some(fetch) = self.0.take() {
            fetch.abort();
        }
    }
}

/// The next page's continue token, if there is one.
pub(super) fn continue_token(metadata: &ListMeta) -> Option<&str> {
    metadata
        .continue_
        .as_deref()
        .filter(|token| !token.is_empty())
}

/// Lists the kind in pages of `page_size`, each page asked for as soon as the previous one's
/// continue token is read ([`PageSeed`]), so the server prepares a page while this one's
/// objects are read (a built-in kind's) or go to the index (a custom resource's).
/// Returns the list's resourceVersion to watch from, or None when this watcher was superseded.
pub(super) async fn list_in_pages_ahead(
    api: &Api<Watched>,
    feed: &mut Feed,
) -> Result<Option<String>, kube::Error> {
    let client = feed.shared.client.clone();
    let url = api.resource_url().to_string();
    let fetch = move |params: ListParams| {
        let client = client.clone();
        let url = url.clone();
        tokio::spawn(async move {
            let request = kube::core::Request::new(url)
                .list(&params)
                .map_err(kube::Error::BuildRequest)?;
            client.request_text(request).await
        })
    };
    let first = ListParams::default().limit(feed.shared.config.page_size);
    let mut ahead = FetchAhead(Some(fetch(first.clone())));
    feed.list_started();
    loop {
        let Some(pending) = ahead.0.take() else {
            return Ok(None);
        };
        let text = match pending.await {
            Ok(result) => result?,
            Err(join_error) => {
                return Err(kube::Error::Service(join_error.to_string().into()));
            }
        };
        let mut on_metadata = |metadata: &ListMeta| {
            if let Some(token) = continue_token(metadata)
                && let Some(replaced) = ahead.0.replace(fetch(first.clone().continue_token(token)))
            {
                replaced.abort();
            }
        };
        let page = PageSeed {
            on_metadata: &mut on_metadata,
        }
        .deserialize(&mut serde_json::Deserializer::from_str(&text))
        .map_err(kube::Error::SerdeError)?;
        drop(text);
        for object in page.items {
            if !feed.listed(object) {
                return Ok(None);
            }
        }
        if continue_token(&page.metadata).is_none() {
            if !feed.list_done() {
                return Ok(None);
            }
            return Ok(Some(page.metadata.resource_version.unwrap_or_default()));
        }
    }
}

/// How a streaming watcher ended.
pub(super) enum Streaming {
    /// Another watcher took over this kind (restart, new version, CRD removed).
    Superseded,
    /// The server answered the streaming list with this refusal: list in pages instead.
    Refused(Box<kube::core::Status>),
}

/// How long a watch request may stay open (`timeoutSeconds`); the server ends it then and it is
/// resumed from the last resourceVersion, as kube-rs's watcher does.
pub(super) const WATCH_TIMEOUT_SECS: u32 = 290;

/// A watch silent this much longer than its timeout is dead (a half-open connection).
pub(super) const WATCH_SILENCE: Duration = Duration::from_secs(WATCH_TIMEOUT_SECS as u64 + 30);

/// How long a watch resumed after a failure must run without an error to count as in sync
/// when it has nothing to deliver.
pub(super) const RESUME_CONFIRM: Duration = Duration::from_secs(1);

/// The bookmark that ends a streaming list's initial events.
pub(super) const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

/// A server without streaming lists refuses the parameters: 422 Invalid (WatchList off, or a
/// server older than it that forbids `resourceVersionMatch` on a watch) or 400 Bad Request.
pub(super) fn refuses_streaming(status: &kube::core::Status) -> bool {
    matches!(status.code, 400 | 422)
}

/// Lists with a streaming list (WatchList: one watch request with `sendInitialEvents=true` that
/// sends every object as an event, then a bookmark), then watches on the same stream. Each
/// object is read as it arrives, so no page of objects is ever held. The list starts over on
/// 410 Gone and whenever a stream ends before its initial events did; a watch resumes from the
/// last resourceVersion otherwise. Owned here rather than left to kube-rs's watcher because a
/// list started over must be told apart from one going on (its objects replace, not add to,
/// the first attempt's).
pub(super) async fn watch_streaming(api: &Api<Watched>, feed: &mut Feed) -> Streaming {
    let config = feed.shared.config.clone();
    let mut backoff = Backoff::new(config.backoff_min, config.backoff_max);
    // Where to resume watching from; None: list again.
    let mut resume: Option<String> = None;
    loop {
        if resume.is_none() && feed.first_list() {
            // Nothing is stored yet, so nothing is held twice: the quickest list wins, and on
            // kube-apiserver that is pages fetched ahead (a streaming list costs the server
            // more per object). Relists stream, beside the index they replace.
            match list_in_pages_ahead(api, feed).await {
                Ok(Some(version)) => resume = Some(version),
                Ok(None) => return Streaming::Superseded,
                Err(error) => {
                    if !feed.failed(&error) {
                        return Streaming::Superseded;
                    }
                    let delay = backoff.next().unwrap_or(config.backoff_max);
                    tokio::time::sleep(delay).await;
                }
            }
            continue;
        }
        let listing = resume.is_none();
        let params = if listing {
            WatchParams::streaming_lists()
        } else {
            WatchParams::default()
        }
        .timeout(WATCH_TIMEOUT_SECS);
        let from = resume.clone().unwrap_or_else(|| "0".to_string());
        let mut failure: Option<String> = None;
        match api.watch(&params, &from).await {
            Err(kube::Error::Api(status)) if listing && refuses_streaming(&status) => {
                return Streaming::Refused(status);
            }
            Err(error) => failure = Some(error.to_string()),
            Ok(stream) => {
                let mut stream = std::pin::pin!(stream);
                if listing {
                    feed.list_started();
                }
                let mut in_list = listing;
                let mut received = false;
                // A watch resumed after a failure proves itself by a short while without an
                // error: the server sends what it missed, or 410 Gone, at once. A kind with
                // nothing to send (no objects, no changes) would else stay failing, and its
                // replica not write DNS, until a recheck relists it.
                let mut unconfirmed = !listing && feed.failing();
                loop {
                    let limit = if unconfirmed {
                        RESUME_CONFIRM
                    } else {
                        WATCH_SILENCE
                    };
                    let Ok(next) = tokio::time::timeout(limit, stream.next()).await else {
                        if std::mem::take(&mut unconfirmed) {
                            if !feed.resumed() {
                                return Streaming::Superseded;
                            }
                            continue;
                        }
                        failure = Some(format!("no event for {WATCH_SILENCE:?}; reconnecting"));
                        break;
                    };
                    let event = match next {
                        None => break,
                        Some(Ok(event)) => event,
                        Some(Err(kube::Error::Api(status)))
                            if listing && !received && refuses_streaming(&status) =>
                        {
                            return Streaming::Refused(status);
                        }
                        Some(Err(error)) => {
                            failure = Some(error.to_string());
                            break;
                        }
                    };
                    let first = !received;
                    received = true;
                    let current = match event {
                        WatchEvent::Added(object) | WatchEvent::Modified(object) if in_list => {
                            feed.listed(object)
                        }
                        WatchEvent::Added(object) | WatchEvent::Modified(object) => {
                            let version = object.metadata.resource_version.clone();
                            resume = version.or(resume);
                            feed.applied(object)
                        }
                        WatchEvent::Deleted(object) => {
                            // A streaming list sends no deletions; one would be a change.
                            let version = object.metadata.resource_version.clone();
                            if !in_list {
                                resume = version.or(resume);
                            }
                            feed.deleted(&object)
                        }
                        WatchEvent::Bookmark(mark) => {
                            let ends_list =
                                mark.metadata.annotations.contains_key(INITIAL_EVENTS_END);
                            resume = Some(mark.metadata.resource_version);
                            if in_list && ends_list {
                                in_list = false;
                                feed.list_done()
                            } else {
                                true
                            }
                        }
                        WatchEvent::Error(status)
                            if listing && first && refuses_streaming(&status) =>
                        {
                            return Streaming::Refused(status);
                        }
                        WatchEvent::Error(status) => {
                            if status.code == 410 {
                                // History compacted past our version: list again.
                                resume = None;
                            }
                            failure = Some(format!(
                                "error returned by apiserver during watch: {}: {} ({})",
                                status.code, status.message, status.reason
                            ));
                            break;
                        }
                    };
                    if !current {
                        return Streaming::Superseded;
                    }
                    backoff.reset();
                }
                if in_list {
                    // A list cut short is started over, from scratch.
                    resume = None;
                }
            }
        }
        if let Some(error) = failure {
            if !feed.failed(&error) {
                return Streaming::Superseded;
            }
            let delay = backoff.next().unwrap_or(config.backoff_max);
            tokio::time::sleep(delay).await;
        }
    }
}
