//! `--provider dnsendpoint`: gateway-dns as the governance layer in front of an existing
//! external-dns. Records become `externaldns.k8s.io/v1alpha1` DNSEndpoint objects, which
//! external-dns (`--source=crd`) publishes to whatever provider it is configured with.
//!
//! **One object per published DNS name**, holding every record type of that name. The engine
//! settles conflicts per name, so each name has exactly one winner: an object per name means no
//! two objects ever carry one name with different targets (external-dns would merge or flap
//! them), a route's change rewrites only the names it touches, and the object's name follows
//! from the DNS name alone. An object per route would put one name in several objects whenever
//! routes share it.
//!
//! **Ownership** is the object's labels: `app.kubernetes.io/managed-by: gateway-dns` and
//! `gateway-dns.io/owner: <--txt-owner-id>`; only objects with both are listed, changed or
//! deleted. Routes live in other namespaces, so an owner reference (which cannot cross
//! namespaces) cannot tie an object to them; the route is named in the annotation
//! `gateway-dns.io/resource`. The sync loop's ownership TXT records are not written as objects:
//! they are read back from the labels, and external-dns's own TXT registry guards the records in
//! DNS. Objects are written by server-side apply with field manager `gateway-dns`.
//!
//! **Heartbeats** (`dns::registry::heartbeat`) are objects of their own, with the same labels and
//! one TXT endpoint, listed back as they are (no ownership record stands for them), so that
//! `gateway-dns zone owners` and the check for a second installation with this owner id read
//! them as they read a zone. external-dns leaves them out of DNS unless its
//! `--managed-record-types` has TXT.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Mutex;

use futures::future::BoxFuture;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
};
use serde::{Deserialize, Serialize};

use crate::dns::registry::{Covers, TxtRegistry, Value, heartbeat};
use crate::dns::{Changes, Endpoint, Provider, Targets, in_zone};
use crate::model::RecordType;
use crate::model::dns_name::canonical;

pub const GROUP: &str = "externaldns.k8s.io";
pub const VERSION: &str = "v1alpha1";
pub const KIND: &str = "DNSEndpoint";
pub const PLURAL: &str = "dnsendpoints";
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
pub const MANAGED_BY: &str = "gateway-dns";
pub const OWNER_LABEL: &str = "gateway-dns.io/owner";
pub const RESOURCE_ANNOTATION: &str = "gateway-dns.io/resource";
pub const DNS_NAME_ANNOTATION: &str = "gateway-dns.io/dns-name";
const FIELD_MANAGER: &str = "gateway-dns";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "--txt-owner-id {0:?} cannot be a label value (at most 63 of a-z, A-Z, 0-9, '-', '_', '.', starting and ending alphanumeric), which --provider dnsendpoint needs"
    )]
    OwnerNotALabel(String),
    #[error("listing DNSEndpoints in namespace {namespace}: {source}")]
    List {
        namespace: String,
        source: Box<kube::Error>,
    },
    #[error("writing DNSEndpoint {namespace}/{name}: {source}")]
    Write {
        namespace: String,
        name: String,
        source: Box<kube::Error>,
    },
    #[error("deleting DNSEndpoint {namespace}/{name}: {source}")]
    Delete {
        namespace: String,
        name: String,
        source: Box<kube::Error>,
    },
    #[error("cannot encode DNSEndpoint {name}: {source}")]
    Encode {
        name: String,
        source: serde_json::Error,
    },
}

impl crate::dns::ProviderError for Error {}

/// external-dns's endpoint in a DNSEndpoint's `spec.endpoints`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
struct SpecEndpoint {
    #[serde(default)]
    dns_name: String,
    #[serde(default)]
    targets: Vec<String>,
    #[serde(default)]
    record_type: String,
    #[serde(default, rename = "recordTTL", skip_serializing_if = "Option::is_none")]
    record_ttl: Option<i64>,
}

#[derive(Debug, Default, Deserialize)]
struct Spec {
    #[serde(default)]
    endpoints: Vec<SpecEndpoint>,
}

/// What one object (one DNS name) holds.
#[derive(Debug, Clone, Default, PartialEq)]
struct Entry {
    records: BTreeMap<RecordType, Endpoint>,
    resource: Option<String>,
}

pub struct DnsEndpointProvider {
    api: Api<DynamicObject>,
    resource: ApiResource,
    namespace: String,
    registry: TxtRegistry,
    zones: Vec<String>,
    /// The last listing, by DNS name: a change batch names records, an object holds a name.
    listed: Mutex<BTreeMap<String, Entry>>,
}

impl DnsEndpointProvider {
    pub fn new(
        client: kube::Client,
        namespace: &str,
        registry: TxtRegistry,
        zones: Vec<String>,
    ) -> Result<Self, Error> {
        if !is_label_value(&registry.owner_id) {
            return Err(Error::OwnerNotALabel(registry.owner_id.clone()));
        }
        let gvk = GroupVersionKind::gvk(GROUP, VERSION, KIND);
        let resource = ApiResource::from_gvk_with_plural(&gvk, PLURAL);
        Ok(DnsEndpointProvider {
            api: Api::namespaced_with(client, namespace, &resource),
            resource,
            namespace: namespace.to_string(),
            registry,
            zones: zones.iter().map(|z| canonical(z).into_owned()).collect(),
            listed: Mutex::new(BTreeMap::new()),
        })
    }

    fn selector(&self) -> String {
        format!(
            "{MANAGED_BY_LABEL}={MANAGED_BY},{OWNER_LABEL}={}",
            self.registry.owner_id
        )
    }

    async fn list(&self) -> Result<Vec<Endpoint>, Error> {
        let objects = self
            .api
            .list(&ListParams::default().labels(&self.selector()))
            .await
            .map_err(|source| Error::List {
                namespace: self.namespace.clone(),
                source: Box::new(source),
            })?;
        let mut entries: BTreeMap<String, Entry> = BTreeMap::new();
        for object in objects.items {
            let resource = object
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(RESOURCE_ANNOTATION))
                .cloned();
            // An object whose spec does not decode holds nothing we can read; it is rewritten
            // or deleted as the records of its name require.
            let spec: Spec = object
                .data
                .get("spec")
                .cloned()
                .and_then(|spec| serde_json::from_value(spec).ok())
                .unwrap_or_default();
            for raw in spec.endpoints {
                let Ok(record_type) = raw.record_type.parse::<RecordType>() else {
                    continue;
                };
                let endpoint = Endpoint {
                    dns_name: canonical(&raw.dns_name).into_owned(),
                    record_type,
                    targets: raw
                        .targets
                        .iter()
                        .map(|t| normalise(record_type, t))
                        .collect(),
                    ttl: raw
                        .record_ttl
                        .and_then(|ttl| u32::try_from(ttl).ok())
                        .filter(|ttl| *ttl > 0),
                    resource: resource.clone(),
                };
                if endpoint.targets.is_empty()
                    || !self.zones.iter().any(|z| in_zone(&endpoint.dns_name, z))
                {
                    continue;
                }
                let entry = entries.entry(endpoint.dns_name.clone()).or_default();
                entry.resource = resource.clone();
                entry.records.insert(record_type, endpoint);
            }
        }
        let mut endpoints = Vec::new();
        for (name, entry) in &entries {
            for (record_type, endpoint) in &entry.records {
                endpoints.push(endpoint.clone());
                // The only TXT records written as objects are heartbeats, which no ownership
                // record covers.
                if *record_type == RecordType::TXT {
                    continue;
                }
                // The ownership the labels stand for, as the sync loop's registry reads it.
                endpoints.push(Endpoint {
                    dns_name: self.registry.txt_name(name, *record_type),
                    record_type: RecordType::TXT,
                    targets: Targets::from([self.registry.value(entry.resource.as_deref())]),
                    ttl: endpoint.ttl,
                    resource: None,
                });
            }
        }
        *self
            .listed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = entries;
        Ok(endpoints)
    }

    async fn apply_changes(&self, changes: &Changes) -> Result<(), Error> {
        let before = self
            .listed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let mut after = before.clone();
        for endpoint in &changes.delete {
            if endpoint.record_type != RecordType::TXT
                && let Some(entry) = after.get_mut(&endpoint.dns_name)
            {
                entry.records.remove(&endpoint.record_type);
            }
        }
        for endpoint in changes.update.iter().chain(&changes.create) {
            if endpoint.record_type == RecordType::TXT && heartbeat::is_name(&endpoint.dns_name) {
                after
                    .entry(endpoint.dns_name.clone())
                    .or_default()
                    .records
                    .insert(RecordType::TXT, endpoint.clone());
            } else if endpoint.record_type == RecordType::TXT {
                // An ownership record: the route it names becomes the object's resource.
                let Covers::Record(registry_name, _) = self.registry.covered_by(&endpoint.dns_name)
                else {
                    continue;
                };
                let resource = endpoint
                    .targets
                    .iter()
                    .filter_map(|value| match self.registry.parse(value) {
                        Value::Ownership(labels) => Some(labels),
                        Value::Undecryptable | Value::Other => None,
                    })
                    .find(|labels| labels.owner == self.registry.owner_id)
                    .and_then(|labels| labels.resource.map(Cow::into_owned));
                for name in self.registry.record_names(&registry_name) {
                    after.entry(name).or_default().resource = resource.clone();
                }
            } else {
                let entry = after.entry(endpoint.dns_name.clone()).or_default();
                if entry.resource.is_none() {
                    entry.resource = endpoint.resource.clone();
                }
                entry.records.insert(endpoint.record_type, endpoint.clone());
            }
        }
        for (name, entry) in &after {
            if before.get(name) == Some(entry) {
                continue;
            }
            if entry.records.is_empty() {
                if before.get(name).is_some_and(|b| !b.records.is_empty()) {
                    self.delete(name).await?;
                }
            } else {
                self.write(name, entry).await?;
            }
        }
        after.retain(|_, entry| !entry.records.is_empty());
        *self
            .listed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = after;
        Ok(())
    }

    async fn write(&self, dns_name: &str, entry: &Entry) -> Result<(), Error> {
        let name = object_name(dns_name);
        let endpoints: Vec<SpecEndpoint> = entry
            .records
            .values()
            .map(|e| SpecEndpoint {
                dns_name: e.dns_name.clone(),
                targets: e.targets.iter().cloned().collect(),
                record_type: e.record_type.as_str().to_string(),
                record_ttl: e.ttl.map(i64::from),
            })
            .collect();
        let mut annotations = serde_json::Map::new();
        annotations.insert(DNS_NAME_ANNOTATION.into(), dns_name.into());
        if let Some(resource) = &entry.resource {
            annotations.insert(RESOURCE_ANNOTATION.into(), resource.clone().into());
        }
        let object = serde_json::json!({
            "apiVersion": self.resource.api_version,
            "kind": KIND,
            "metadata": {
                "name": name,
                "namespace": self.namespace,
                "labels": {
                    MANAGED_BY_LABEL: MANAGED_BY,
                    OWNER_LABEL: self.registry.owner_id,
                },
                "annotations": annotations,
            },
            "spec": {"endpoints": endpoints},
        });
        let params = PatchParams::apply(FIELD_MANAGER).force();
        self.api
            .patch(&name, &params, &Patch::Apply(&object))
            .await
            .map_err(|source| Error::Write {
                namespace: self.namespace.clone(),
                name: name.clone(),
                source: Box::new(source),
            })?;
        Ok(())
    }

    async fn delete(&self, dns_name: &str) -> Result<(), Error> {
        let name = object_name(dns_name);
        match self.api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
            Err(source) => Err(Error::Delete {
                namespace: self.namespace.clone(),
                name,
                source: Box::new(source),
            }),
        }
    }
}

impl Provider for DnsEndpointProvider {
    fn name(&self) -> &'static str {
        "dnsendpoint"
    }

    fn records(&self) -> BoxFuture<'_, Result<Vec<Endpoint>, crate::dns::Error>> {
        Box::pin(async move { Ok(self.list().await?) })
    }

    fn apply<'a>(&'a self, changes: &'a Changes) -> BoxFuture<'a, Result<(), crate::dns::Error>> {
        Box::pin(async move { Ok(self.apply_changes(changes).await?) })
    }

    fn zones(&self) -> &[String] {
        &self.zones
    }
}

/// The object holding `dns_name`: `gateway-dns.<name>`, `gateway-dns-wildcard.<rest>` for
/// `*.<rest>`, or `gateway-dns-heartbeat.<rest>` for the heartbeat `_gateway-dns.<rest>` (object
/// names are DNS subdomains, without `*` or `_`); a name too long for that gets a hash of it
/// instead.
pub fn object_name(dns_name: &str) -> String {
    let heartbeat = dns_name
        .strip_prefix(heartbeat::LABEL)
        .and_then(|rest| rest.strip_prefix('.'));
    let name = match (dns_name.strip_prefix("*."), heartbeat) {
        (Some(rest), _) => format!("gateway-dns-wildcard.{rest}"),
        (None, Some(rest)) => format!("gateway-dns-heartbeat.{rest}"),
        (None, None) => format!("gateway-dns.{dns_name}"),
    };
    if name.len() <= 253 && name.split('.').all(|label| label.len() <= 63) {
        return name;
    }
    // FNV-1a: stable across versions and platforms.
    let hash = dns_name.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    format!("gateway-dns-{hash:016x}")
}

fn normalise(record_type: RecordType, target: &str) -> String {
    match record_type {
        RecordType::A | RecordType::AAAA => target
            .parse::<std::net::IpAddr>()
            .map(|ip| ip.to_string())
            .unwrap_or_else(|_| target.to_string()),
        RecordType::CNAME => canonical(target).into_owned(),
        RecordType::TXT => target.to_string(),
    }
}

/// A Kubernetes label value: at most 63 characters, alphanumerics with `-`, `_`, `.` inside.
fn is_label_value(value: &str) -> bool {
    value.is_empty()
        || (value.len() <= 63
            && value.starts_with(|c: char| c.is_ascii_alphanumeric())
            && value.ends_with(|c: char| c.is_ascii_alphanumeric())
            && value
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_names_are_dns_subdomains_one_per_name() {
        assert_eq!(
            object_name("app.example.com"),
            "gateway-dns.app.example.com"
        );
        assert_eq!(
            object_name("*.apps.example.com"),
            "gateway-dns-wildcard.apps.example.com"
        );
        let long = format!("{}.example.com", vec!["a".repeat(60); 4].join("."));
        let hashed = object_name(&long);
        assert!(
            hashed.starts_with("gateway-dns-") && hashed.len() == 28,
            "{hashed}"
        );
        assert_ne!(hashed, object_name(&format!("b{long}")));
        assert_eq!(
            object_name("_gateway-dns.east.example.com"),
            "gateway-dns-heartbeat.east.example.com"
        );
    }

    #[test]
    fn owner_ids_must_be_label_values() {
        assert!(is_label_value("gateway-dns"));
        assert!(is_label_value("team.a_1"));
        assert!(!is_label_value("-x"));
        assert!(!is_label_value("a/b"));
        assert!(!is_label_value(&"a".repeat(64)));
    }
}
