//! The current findings of `serve`, from the engine's settled outcome (the one the sync loop
//! publishes from, shared through [`Index::settled`]): each finding logged once when it appears
//! (`finding: MESSAGE` with its reason, action, object and hostname) and once when it is gone, a one-line summary whenever they change, and the findings gauges.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::engine::settle::Outcome;
use crate::engine::{ActionCounts, Finding};
use crate::index::Index;
use crate::metrics::Metrics;

/// What was last reported; `None` before the first report (start-up logs every finding).
pub struct FindingsReport {
    metrics: Arc<Metrics>,
    reported: Option<BTreeSet<Finding>>,
}

/// The counts of the summary line: the findings counted by action as `check` counts them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    pub records: usize,
    pub findings: ActionCounts,
}

impl Summary {
    pub fn of(outcome: &Outcome) -> Summary {
        Summary {
            records: outcome.records.len(),
            findings: ActionCounts::of(&outcome.violations),
        }
    }
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} record(s), {} denial(s), {} warning(s), {} audit(s)",
            self.records, self.findings.denials, self.findings.warnings, self.findings.audits
        )
    }
}

impl FindingsReport {
    pub fn new(metrics: Arc<Metrics>) -> FindingsReport {
        FindingsReport {
            metrics,
            reported: None,
        }
    }

    /// Reports the index's current outcome (evaluated once per snapshot, shared with the sync
    /// loop). Returns whether the findings changed since the last report.
    pub fn report_index(&mut self, index: &Index) -> bool {
        self.report(&index.settled())
    }

    /// Logs what changed since the last report (everything, the first time) and sets the
    /// gauges. Returns whether the findings changed.
    pub fn report(&mut self, outcome: &Outcome) -> bool {
        let current: BTreeSet<Finding> = outcome.violations.iter().cloned().collect();
        let first = self.reported.is_none();
        let previous = self.reported.take().unwrap_or_default();
        let changed = first || previous != current;
        if changed {
            for gone in previous.difference(&current) {
                tracing::info!(
                    reason = %gone.reason,
                    object = %gone.object,
                    hostname = gone.hostname.as_deref().unwrap_or(""),
                    "finding resolved"
                );
            }
            for new in current.difference(&previous) {
                tracing::warn!(
                    reason = %new.reason,
                    action = %new.action.as_str(),
                    object = %new.object,
                    hostname = new.hostname.as_deref().unwrap_or(""),
                    "finding: {}",
                    new.message
                );
            }
            let summary = Summary::of(outcome);
            tracing::info!(
                records = summary.records,
                denials = summary.findings.denials,
                warnings = summary.findings.warnings,
                audits = summary.findings.audits,
                "summary: {summary}"
            );
            self.metrics.set_findings(&outcome.violations);
        }
        self.reported = Some(current);
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::settle::Record;
    use crate::engine::{Action, Reason};
    use crate::model::RecordType;

    fn finding(reason: Reason, object: &str) -> Finding {
        Finding {
            object: object.to_string(),
            reason,
            action: Action::Deny,
            hostname: Some("b.example.com".to_string()),
            field: "spec.hostnames[0]".to_string(),
            message: "m".to_string(),
        }
    }

    fn record(name: &str) -> Record {
        Record {
            dns_name: name.to_string(),
            record_type: RecordType::A,
            targets: vec!["192.0.2.1".to_string()],
            ttl: None,
            gateways: vec![],
            routes: vec![],
            shared: false,
        }
    }

    #[test]
    fn reports_at_start_and_on_change_only_and_gauges_follow() {
        let metrics = Arc::new(Metrics::new());
        let mut report = FindingsReport::new(metrics.clone());
        let clean = Outcome {
            records: vec![record("a.example.com")],
            violations: vec![],
        };
        assert!(report.report(&clean), "the first report always logs");
        assert!(!report.report(&clean), "nothing changed");
        assert_eq!(metrics.findings(Reason::HostnameConflict), 0);

        let conflict = Outcome {
            records: vec![record("a.example.com"), record("b.example.com")],
            violations: vec![
                finding(Reason::HostnameConflict, "HTTPRoute/team-b/b2"),
                finding(Reason::NoMatchingListenerHostname, "HTTPRoute/team-d/d1"),
            ],
        };
        assert_eq!(
            Summary::of(&conflict).to_string(),
            "2 record(s), 2 denial(s), 0 warning(s), 0 audit(s)"
        );
        assert!(report.report(&conflict));
        assert!(!report.report(&conflict));
        assert_eq!(metrics.findings(Reason::HostnameConflict), 1);
        assert_eq!(metrics.findings(Reason::NoMatchingListenerHostname), 1);
        let text = metrics.render();
        assert!(
            text.contains("gateway_dns_namespace_findings{object_namespace=\"team-b\"} 1"),
            "{text}"
        );

        assert!(report.report(&clean));
        assert_eq!(metrics.findings(Reason::HostnameConflict), 0);
        let text = metrics.render();
        assert!(
            text.contains("gateway_dns_namespace_findings{object_namespace=\"team-b\"} 0"),
            "a namespace whose findings are gone reads 0: {text}"
        );
        assert!(text.contains("gateway_dns_findings{reason=\"TooManyParentRefs\"} 0"));
    }
}
