//! One file per subcommand: what `gateway-dns check`, `serve`, `explain`, `certs`, `dnssec`,
//! `completions` and `man` do; the DNS provider clients `serve` and `explain` use (`provider`);
//! what `kubectl gateway-dns` adds (`plugin`); and the generator of the flags reference. The application's edge: errors here are
//! `anyhow`.

pub mod certs;
pub mod check;
pub mod completions;
pub mod dnssec;
pub mod explain;
pub mod flags_doc;
pub mod man;
pub mod plugin;
pub mod provider;
pub mod serve;
pub mod zone;

/// Exit codes of `check` (and `certs`, which fails with `EXIT_INPUT`).
pub const EXIT_OK: u8 = 0;
pub const EXIT_DENIED: u8 = 1;
pub const EXIT_INPUT: u8 = 2;
/// `serve --once`: the pass failed, or changes remain after it.
pub const EXIT_ONCE_FAILED: u8 = 1;
/// `serve --once`: converged but for records blocked by records gateway-dns does not own.
pub const EXIT_ONCE_BLOCKED: u8 = 3;

/// An error and its causes on one line, each cause once: library errors often repeat their
/// source in their own message as well as returning it from `source()`, so a cause whose text
/// the line already holds is not added again.
pub fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut line = err.to_string();
    let mut cause = err.source();
    while let Some(next) = cause {
        let text = next.to_string();
        if !text.is_empty() && !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        cause = next.source();
    }
    line
}

/// A file's object as the API server would store it over the cluster, where `live` is the
/// object of that name the cluster has: the server keeps a live object's creationTimestamp and
/// gives a new one its own, later than any other (none here, which the engine counts as
/// newest), whatever the file says. So `check` and `explain` over a cluster judge a newcomer as
/// the webhook does.
pub fn as_applied(
    file: &crate::model::Object,
    live: Option<&crate::model::Object>,
) -> crate::model::Object {
    let created = live.map_or(crate::model::OptionalI64::NONE, |live| live.meta().created);
    file.with_created(created)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("reading config: {0}")]
    struct Repeats(#[source] std::io::Error);

    #[derive(Debug, thiserror::Error)]
    #[error("starting")]
    struct Outer(#[source] Repeats);

    #[test]
    fn each_cause_once() {
        let err = Outer(Repeats(std::io::Error::other("disk on fire")));
        assert_eq!(error_chain(&err), "starting: reading config: disk on fire");
        let anyhow_err = anyhow::Error::new(std::io::Error::other("refused"))
            .context("connecting to 127.0.0.1:53")
            .context("listing the zone");
        assert_eq!(
            error_chain(anyhow_err.as_ref()),
            "listing the zone: connecting to 127.0.0.1:53: refused"
        );
    }
}
