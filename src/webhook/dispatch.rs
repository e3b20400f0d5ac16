//! Deciding one review within its deadline: a decision the handler calls quick (bounded to
//! microseconds by the object's size) runs on the request's own task when a slot is free; the
//! others run on the blocking pool. Both take an evaluation slot, at most
//! [`WebhookOptions::max_in_flight`](super::state::WebhookOptions::max_in_flight) at once. A
//! request that finds no free slot waits until its deadline and is then answered *allowed* with
//! an `EvaluationOverloaded` warning, like an evaluation that overruns the deadline
//! (`EvaluationTimeout`) or panics (`EvaluationError`): gateway-dns never blocks a valid object
//! because of its own limits.

use std::time::Duration;

use axum::http::Uri;
use tokio::time::Instant as TokioInstant;

use super::review::{AdmissionAnswer, AdmissionRequest};
use super::state::WebhookState;
use crate::metrics::EvaluationErrorKind;

/// Kept out of the API server's own timeout so our answer arrives before it gives up.
const APISERVER_TIMEOUT_MARGIN: Duration = Duration::from_millis(200);

/// Decides `review`, which arrived at `arrived`, within its deadline.
pub(super) async fn answer_within_deadline(
    state: &WebhookState,
    review: &AdmissionRequest<'_>,
    uri: &Uri,
    arrived: TokioInstant,
) -> AdmissionAnswer {
    let deadline = effective_deadline(state.options.admission_deadline, uri);
    // A quick decision still takes a slot: the slot limit holds for every review. With no
    // slot free it waits like any other, until its deadline.
    // Borrowed, not owned: an owned permit clones the semaphore's Arc, one more count shared
    // between cores on every review.
    let slot = state
        .handler
        .is_quick(review)
        .then(|| state.evaluation_slots.try_acquire().ok())
        .flatten();
    if let Some(_slot) = slot {
        handle_inline(state, review)
    } else {
        // The blocking pool outlives the body the review borrows from: it gets its own copy
        // (the objects are shared, only the envelope's texts are copied).
        let owned = review.clone().into_owned();
        // Boxed: held inline, its timers would make every review's future (moved several
        // times on its way through the router) over twice the size of the quick path's.
        Box::pin(evaluate_on_blocking_pool(
            state,
            owned,
            arrived + deadline,
            deadline,
        ))
        .await
    }
}

/// A decision the handler calls quick runs right on the request's task: it takes
/// microseconds, and handing it to a blocking thread (a wake-up each way, dozens of threads on
/// a small machine) cost several times the decision itself. It runs only with a free slot and
/// never waits; a panic becomes an "allowed" answer with a warning and a metric.
fn handle_inline(state: &WebhookState, request: &AdmissionRequest<'_>) -> AdmissionAnswer {
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        state.handler.handle(request)
    }));
    outcome.unwrap_or_else(|_| handler_failed(state, &"panicked"))
}

/// Runs the handler on the blocking pool within the deadline, where an overrun cannot stall
/// the server and the deadline answer always goes out; every failure mode becomes an
/// "allowed" answer with a warning and a metric.
async fn evaluate_on_blocking_pool(
    state: &WebhookState,
    request: AdmissionRequest<'static>,
    deadline_at: TokioInstant,
    deadline: Duration,
) -> AdmissionAnswer {
    // A free slot is the common case: take it without arming a timer.
    let slot = match state.evaluation_slots.clone().try_acquire_owned() {
        Ok(permit) => Ok(Ok(permit)),
        Err(_) => {
            tokio::time::timeout_at(deadline_at, state.evaluation_slots.clone().acquire_owned())
                .await
        }
    };
    let permit = match slot {
        Ok(Ok(permit)) => permit,
        // Timed out waiting (a closed semaphore cannot happen: we never close it).
        Ok(Err(_)) | Err(_) => {
            state
                .metrics
                .record_evaluation_error(EvaluationErrorKind::Overloaded);
            tracing::warn!(
                max_in_flight = state.options.max_in_flight,
                "no evaluation slot before the deadline; allowing"
            );
            return AdmissionAnswer::allow_with_warnings(vec![format!(
                "EvaluationOverloaded: gateway-dns was too busy to evaluate this in {}; allowed",
                human_duration(deadline)
            )]);
        }
    };
    let handler = state.handler.clone();
    let evaluation = tokio::task::spawn_blocking(move || {
        // The slot stays taken until the handler returns, even after a timeout answer.
        let _permit = permit;
        handler.handle(&request)
    });
    match tokio::time::timeout_at(deadline_at, evaluation).await {
        Ok(Ok(answer)) => answer,
        Ok(Err(join_error)) => handler_failed(state, &join_error),
        Err(_) => {
            state
                .metrics
                .record_evaluation_error(EvaluationErrorKind::Timeout);
            tracing::warn!(deadline = ?deadline, "admission handler overran the deadline; allowing");
            AdmissionAnswer::allow_with_warnings(vec![format!(
                "EvaluationTimeout: gateway-dns did not finish in {}; allowed",
                human_duration(deadline)
            )])
        }
    }
}

fn handler_failed(state: &WebhookState, error: &dyn std::fmt::Display) -> AdmissionAnswer {
    state
        .metrics
        .record_evaluation_error(EvaluationErrorKind::Panic);
    tracing::error!(%error, "admission handler failed; allowing");
    AdmissionAnswer::allow_with_warnings(vec![
        "EvaluationError: gateway-dns failed while evaluating this object; allowed".to_string(),
    ])
}

/// Our deadline, shortened when the API server says it will give up sooner (`?timeout=10s`).
fn effective_deadline(configured: Duration, uri: &Uri) -> Duration {
    let apiserver_timeout = uri.query().and_then(|query| {
        query
            .split('&')
            .find_map(|pair| pair.strip_prefix("timeout="))
            .and_then(parse_go_seconds)
    });
    match apiserver_timeout {
        Some(timeout) => configured.min(timeout.saturating_sub(APISERVER_TIMEOUT_MARGIN)),
        None => configured,
    }
}

/// Parses the `<N>s` form kube-apiserver uses for the webhook timeout.
fn parse_go_seconds(text: &str) -> Option<Duration> {
    let seconds: u64 = text.strip_suffix('s')?.parse().ok()?;
    Some(Duration::from_secs(seconds))
}

/// `2s`, `1.5s` or `250ms`.
fn human_duration(duration: Duration) -> String {
    let millis = duration.as_millis();
    if millis < 1000 {
        format!("{millis}ms")
    } else if millis.is_multiple_of(1000) {
        format!("{}s", millis / 1000)
    } else {
        format!("{}s", duration.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadline_follows_a_shorter_apiserver_timeout() {
        let configured = Duration::from_secs(2);
        let uri: Uri = "/validate?timeout=10s".parse().unwrap();
        assert_eq!(effective_deadline(configured, &uri), configured);
        let uri: Uri = "/validate?timeout=1s".parse().unwrap();
        assert_eq!(
            effective_deadline(configured, &uri),
            Duration::from_millis(800)
        );
        let uri: Uri = "/validate?timeout=bogus".parse().unwrap();
        assert_eq!(effective_deadline(configured, &uri), configured);
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(human_duration(Duration::from_secs(2)), "2s");
        assert_eq!(human_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(human_duration(Duration::from_millis(300)), "300ms");
    }
}
