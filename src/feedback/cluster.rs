//! Writes the feedback to the API server: Events (events.k8s.io/v1) with series and rate limits,
//! and PolicyReports (wgpolicyk8s.io/v1alpha2). Only the Lease holder calls [`ClusterFeedback::update`]
//! with `leader` true; a replica that is not the leader writes nothing and forgets what it
//! wrote, so that when it becomes the leader it starts from what the cluster holds.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
use serde_json::json;
use tracing::{debug, info, warn};

use super::limit::{Limits, Occurrence, RateLimiter, SERIES_WINDOW, SeriesCache};
use super::{
    AppliedRecord, CONTROLLER, EventIntent, EventType, ObjectRef, POLICY, RecordRoutes,
    ReportContent, Summary, events_for, record_events, recovery_events, remember_routes,
    report_changes, reports_for,
};
use crate::engine::{Config, Finding, Outcome};
use crate::model::ObjectKind;

/// The label on every PolicyReport gateway-dns writes (found again by it after a restart).
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "gateway-dns");
/// Server-side apply field manager of the reports.
const FIELD_MANAGER: &str = "gateway-dns";
/// Room for the object's name in an Event's name (253 less a dot and 32 hex digits).
const EVENT_NAME_PREFIX_LIMIT: usize = 220;
/// The Events API caps `note` at 1 kB.
const NOTE_LIMIT: usize = 1024;

/// Which version of a kind the cluster serves now (the cluster source's discovery).
pub type ServedVersion = Arc<dyn Fn(ObjectKind) -> Option<&'static str> + Send + Sync>;

#[derive(Debug, Clone)]
pub struct FeedbackConfig {
    pub events: bool,
    pub policy_reports: bool,
    /// `reportingInstance`: the pod (the Lease holder identity).
    pub instance: String,
    pub limits: Limits,
}

/// The key of a series: one object (by uid, so a recreated object starts afresh), one Event.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct SeriesKey {
    uid: String,
    intent: EventIntent,
}

pub struct ClusterFeedback {
    client: kube::Client,
    served: ServedVersion,
    config: FeedbackConfig,
    limiter: RateLimiter<ObjectRef>,
    series: SeriesCache<SeriesKey>,
    /// The findings Events were emitted for; None until the first update as the leader.
    announced: Option<BTreeSet<Finding>>,
    /// The reports as last written (route → report name, results); None until read back from
    /// the cluster after becoming the leader.
    reports: Option<BTreeMap<ObjectRef, (String, ReportContent)>>,
    /// The routes of the records seen, for the Events of records the sync loop removes.
    record_routes: RecordRoutes,
    /// Events dropped by the rate limits since the start (logged with each drop).
    rate_limited: u64,
}

impl ClusterFeedback {
    pub fn new(client: kube::Client, served: ServedVersion, config: FeedbackConfig) -> Self {
        ClusterFeedback {
            client,
            served,
            limiter: RateLimiter::new(config.limits, Instant::now()),
            series: SeriesCache::new(SERIES_WINDOW),
            config,
            announced: None,
            reports: None,
            record_routes: RecordRoutes::new(),
            rate_limited: 0,
        }
    }

    /// Brings Events and reports in line with `outcome` (`routes`: every route in the index).
    pub async fn update(
        &mut self,
        cfg: &Config,
        outcome: &Outcome,
        routes: Vec<ObjectRef>,
        leader: bool,
    ) {
        remember_routes(&mut self.record_routes, outcome);
        if !leader {
            self.announced = None;
            self.reports = None;
            return;
        }
        if self.config.events {
            let mut intents = events_for(self.announced.as_ref(), &outcome.violations);
            intents.extend(recovery_events(
                self.announced.as_ref(),
                &outcome.violations,
            ));
            for intent in intents {
                self.emit(intent).await;
            }
            self.announced = Some(outcome.violations.iter().cloned().collect());
        }
        if self.config.policy_reports {
            let wanted = reports_for(cfg, routes, &outcome.violations);
            self.sync_reports(wanted).await;
        }
    }

    /// Tells the routes of the records the sync loop wrote or deleted (Normal Events). The sync
    /// loop writes only as the Lease holder, so this is only called then.
    pub async fn applied(&mut self, records: &[AppliedRecord], outcome: &Outcome) {
        remember_routes(&mut self.record_routes, outcome);
        if !self.config.events {
            return;
        }
        for intent in record_events(records, &mut self.record_routes) {
            self.emit(intent).await;
        }
    }

    /// Emits one Event (a Normal one, e.g. from the sync loop, or a finding's Warning).
    pub async fn emit(&mut self, intent: EventIntent) {
        // The limit first: the uid costs a request, and a pass that wrote 10,000 records would
        // otherwise read every route only to drop most of its Events.
        if !self.limiter.allow(&intent.regarding, Instant::now()) {
            self.rate_limited += 1;
            debug!(object = %intent.regarding, reason = %intent.reason, dropped = self.rate_limited, "event rate-limited; dropped");
            return;
        }
        let Some(uid) = self.uid_of(&intent.regarding).await else {
            return;
        };
        let key = SeriesKey { uid, intent };
        let result = match self.series.occurrence(&key, Instant::now()) {
            Occurrence::Repeat { name, count } => match self.repeat(&key, &name, count).await {
                Err(kube::Error::Api(status)) if status.code == 404 => {
                    // Expired by the API server's event TTL: start a new Event.
                    self.series.forget(&key);
                    self.create(&key).await
                }
                other => other,
            },
            Occurrence::New => self.create(&key).await,
        };
        if let Err(error) = result {
            warn!(object = %key.intent.regarding, reason = %key.intent.reason, %error, "could not write the event");
        }
    }

    async fn create(&mut self, key: &SeriesKey) -> Result<(), kube::Error> {
        let now = Timestamp::now();
        let regarding = &key.intent.regarding;
        let Some(reference) = self.reference(regarding, &key.uid) else {
            return Ok(());
        };
        // client-go's name, `<object>.<nanoseconds in hex>`, kept within the 253 characters of
        // a name however long the object's is.
        let name = format!(
            "{}.{:x}",
            truncate(&regarding.name, EVENT_NAME_PREFIX_LIMIT).trim_end_matches(['.', '-']),
            now.as_nanosecond()
        );
        let event = Event {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(regarding.namespace.clone()),
                ..ObjectMeta::default()
            },
            event_time: Some(MicroTime(now)),
            action: Some(key.intent.action.to_string()),
            reason: Some(key.intent.reason.clone()),
            note: Some(truncate(&key.intent.note, NOTE_LIMIT).to_string()),
            type_: Some(key.intent.event_type.as_str().to_string()),
            regarding: Some(reference),
            reporting_controller: Some(CONTROLLER.to_string()),
            reporting_instance: Some(self.config.instance.clone()),
            ..Event::default()
        };
        let events: Api<Event> = Api::namespaced(self.client.clone(), &regarding.namespace);
        events.create(&PostParams::default(), &event).await?;
        debug!(object = %regarding, reason = %key.intent.reason, event = %name, "event created");
        self.series.written(key.clone(), name, 1, Instant::now());
        Ok(())
    }

    async fn repeat(&mut self, key: &SeriesKey, name: &str, count: i32) -> Result<(), kube::Error> {
        let regarding = &key.intent.regarding;
        let series = EventSeries {
            count,
            last_observed_time: MicroTime(Timestamp::now()),
        };
        let patch = json!({ "series": series });
        let events: Api<Event> = Api::namespaced(self.client.clone(), &regarding.namespace);
        events
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        debug!(object = %regarding, reason = %key.intent.reason, event = %name, count, "event series updated");
        self.series
            .written(key.clone(), name.to_string(), count, Instant::now());
        Ok(())
    }

    fn api_resource(&self, kind: ObjectKind) -> Option<ApiResource> {
        let version = (self.served)(kind)?;
        let group = kind.group();
        Some(ApiResource {
            group: group.to_string(),
            version: version.to_string(),
            api_version: format!("{group}/{version}"),
            kind: kind.kind().to_string(),
            plural: kind.plural().to_string(),
        })
    }

    fn reference(&self, object: &ObjectRef, uid: &str) -> Option<ObjectReference> {
        let resource = self.api_resource(object.kind)?;
        Some(ObjectReference {
            api_version: Some(resource.api_version),
            kind: Some(resource.kind),
            namespace: Some(object.namespace.clone()),
            name: Some(object.name.clone()),
            uid: Some(uid.to_string()),
            ..ObjectReference::default()
        })
    }

    /// The object's uid now; None when it is gone or cannot be read (logged).
    async fn uid_of(&self, object: &ObjectRef) -> Option<String> {
        let resource = self.api_resource(object.kind)?;
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), &object.namespace, &resource);
        match api.get_metadata_opt(&object.name).await {
            Ok(Some(found)) => found.metadata.uid,
            Ok(None) => None,
            Err(error) => {
                warn!(%object, %error, "could not read the object to report on");
                None
            }
        }
    }

    fn reports_api(&self, namespace: Option<&str>) -> Api<DynamicObject> {
        let resource = policy_report_resource();
        match namespace {
            Some(namespace) => Api::namespaced_with(self.client.clone(), namespace, &resource),
            None => Api::all_with(self.client.clone(), &resource),
        }
    }

    /// The reports gateway-dns wrote earlier (by any replica), by route; their results are
    /// not read back, so every wanted report is written once after becoming the leader.
    async fn existing_reports(
        &self,
    ) -> Result<BTreeMap<ObjectRef, (String, ReportContent)>, kube::Error> {
        let (label, value) = MANAGED_BY;
        let params = ListParams::default().labels(&format!("{label}={value}"));
        let listed = self.reports_api(None).list(&params).await?;
        let mut existing = BTreeMap::new();
        for report in listed.items {
            let scope = &report.data["scope"];
            let route = match (
                scope["kind"].as_str(),
                scope["namespace"].as_str(),
                scope["name"].as_str(),
            ) {
                (Some(kind), Some(namespace), Some(name)) => {
                    ObjectRef::parse(&format!("{kind}/{namespace}/{name}"))
                }
                _ => None,
            };
            let (Some(route), Some(name)) = (route, report.metadata.name.clone()) else {
                continue;
            };
            if let Some((older, _)) = existing.insert(route, (name, ReportContent::new())) {
                // Two reports for one route (it was recreated): the older goes.
                self.delete_report(report.metadata.namespace.as_deref(), &older)
                    .await;
            }
        }
        Ok(existing)
    }

    async fn sync_reports(&mut self, wanted: BTreeMap<ObjectRef, ReportContent>) {
        let mut reports = match self.reports.take() {
            Some(reports) => reports,
            None => match self.existing_reports().await {
                Ok(existing) => existing,
                Err(error) => {
                    warn!(%error, "could not list PolicyReports (is the wgpolicyk8s.io CRD installed?)");
                    return;
                }
            },
        };
        let written: BTreeMap<ObjectRef, ReportContent> = reports
            .iter()
            .map(|(route, (_, content))| (route.clone(), content.clone()))
            .collect();
        let changes = report_changes(&written, &wanted);
        for route in changes.delete {
            if let Some((name, _)) = reports.remove(&route) {
                self.delete_report(Some(&route.namespace), &name).await;
            }
        }
        for (route, content) in changes.write {
            match self.write_report(&route, &content).await {
                Ok(Some(name)) => {
                    if let Some((old, _)) = reports.get(&route).filter(|(old, _)| *old != name) {
                        // The route was recreated: its new uid names a new report.
                        self.delete_report(Some(&route.namespace), old).await;
                    }
                    reports.insert(route, (name, content));
                }
                // Gone before we got to it: the next update drops it from `wanted`.
                Ok(None) => {}
                Err(error) => warn!(%route, %error, "could not write the PolicyReport"),
            }
        }
        self.reports = Some(reports);
    }

    /// Writes one route's report (server-side apply); the name is `gateway-dns-<route uid>`.
    async fn write_report(
        &self,
        route: &ObjectRef,
        results: &ReportContent,
    ) -> Result<Option<String>, kube::Error> {
        let Some(uid) = self.uid_of(route).await else {
            return Ok(None);
        };
        let Some(scope) = self.reference(route, &uid) else {
            return Ok(None);
        };
        let name = format!("gateway-dns-{uid}");
        let now = Timestamp::now();
        let summary = Summary::of(results);
        let results: Vec<serde_json::Value> = results
            .iter()
            .map(|line| {
                let mut properties = serde_json::Map::new();
                if let Some(hostname) = &line.hostname {
                    properties.insert("hostname".into(), hostname.clone().into());
                }
                if let Some(field) = &line.field {
                    properties.insert("field".into(), field.clone().into());
                }
                let mut result = json!({
                    "source": POLICY,
                    "policy": POLICY,
                    "result": line.result.as_str(),
                    "message": line.message,
                    "scored": true,
                    "timestamp": {"seconds": now.as_second(), "nanos": 0},
                });
                if !line.rule.is_empty() {
                    result["rule"] = line.rule.clone().into();
                }
                if !properties.is_empty() {
                    result["properties"] = properties.into();
                }
                result
            })
            .collect();
        let (label, value) = MANAGED_BY;
        let report = json!({
            "apiVersion": "wgpolicyk8s.io/v1alpha2",
            "kind": "PolicyReport",
            "metadata": {
                "name": name,
                "namespace": route.namespace,
                "labels": {label: value},
                "ownerReferences": [{
                    "apiVersion": scope.api_version,
                    "kind": scope.kind,
                    "name": route.name,
                    "uid": uid,
                }],
            },
            "scope": scope,
            "summary": {
                "pass": summary.pass, "fail": summary.fail, "warn": summary.warn,
                "error": 0, "skip": 0,
            },
            "results": results,
        });
        let params = PatchParams::apply(FIELD_MANAGER).force();
        self.reports_api(Some(&route.namespace))
            .patch(&name, &params, &Patch::Apply(&report))
            .await?;
        info!(%route, report = %name, pass = summary.pass, warn = summary.warn, fail = summary.fail, "PolicyReport written");
        Ok(Some(name))
    }

    async fn delete_report(&self, namespace: Option<&str>, name: &str) {
        let Some(namespace) = namespace else {
            return;
        };
        match self
            .reports_api(Some(namespace))
            .delete(name, &DeleteParams::default())
            .await
        {
            Ok(_) => {
                info!(namespace, report = %name, "PolicyReport of a route that is gone deleted")
            }
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(error) => {
                warn!(namespace, report = %name, %error, "could not delete the PolicyReport")
            }
        }
    }
}

/// wgpolicyk8s.io/v1alpha2 PolicyReport.
pub fn policy_report_resource() -> ApiResource {
    ApiResource {
        group: "wgpolicyk8s.io".to_string(),
        version: "v1alpha2".to_string(),
        api_version: "wgpolicyk8s.io/v1alpha2".to_string(),
        kind: "PolicyReport".to_string(),
        plural: "policyreports".to_string(),
    }
}

/// At most `limit` bytes of `text`, cut at a character boundary.
/// `reason` of the Warning Event on serve's Lease while another installation writes DNS with
/// this owner id.
pub const OWNER_ID_CONFLICT: &str = "OwnerIdConflict";

/// A Warning Event on serve's Lease (`namespace`/`lease`): what concerns the installation as a
/// whole rather than one route, such as a second installation writing with its owner id.
/// Nothing is written when the Lease is not there (no leader election).
pub async fn warn_on_lease(
    client: &kube::Client,
    (namespace, lease): (&str, &str),
    instance: &str,
    reason: &str,
    note: &str,
) -> Result<(), kube::Error> {
    use k8s_openapi::api::coordination::v1::Lease;
    let leases: Api<Lease> = Api::namespaced(client.clone(), namespace);
    let Some(found) = leases.get_metadata_opt(lease).await? else {
        return Ok(());
    };
    let now = Timestamp::now();
    let event = Event {
        metadata: ObjectMeta {
            name: Some(format!("{lease}.{:x}", now.as_nanosecond())),
            namespace: Some(namespace.to_owned()),
            ..ObjectMeta::default()
        },
        event_time: Some(MicroTime(now)),
        action: Some("WriteDNS".to_owned()),
        reason: Some(reason.to_owned()),
        note: Some(truncate(note, NOTE_LIMIT).to_owned()),
        type_: Some(EventType::Warning.as_str().to_owned()),
        regarding: Some(ObjectReference {
            api_version: Some("coordination.k8s.io/v1".to_owned()),
            kind: Some("Lease".to_owned()),
            namespace: Some(namespace.to_owned()),
            name: Some(lease.to_owned()),
            uid: found.metadata.uid,
            ..ObjectReference::default()
        }),
        reporting_controller: Some(CONTROLLER.to_owned()),
        reporting_instance: Some(instance.to_owned()),
        ..Event::default()
    };
    let events: Api<Event> = Api::namespaced(client.clone(), namespace);
    events.create(&PostParams::default(), &event).await?;
    Ok(())
}

fn truncate(text: &str, limit: usize) -> &str {
    if text.len() <= limit {
        return text;
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::truncate;

    #[test]
    fn notes_are_cut_at_a_character_boundary() {
        assert_eq!(truncate("abc", 10), "abc");
        assert_eq!(truncate("abcdef", 3), "abc");
        assert_eq!(truncate("aé", 2), "a");
    }
}
