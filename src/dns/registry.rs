//! Ownership registry in external-dns's TXT format, so an installation can take over records
//! that external-dns wrote with the same owner id (and leave every other record alone).
//!
//! Value: `heritage=external-dns,external-dns/owner=<id>,external-dns/resource=<kind>/<ns>/<name>`.
//! Name (external-dns's default mapper, no prefix/suffix): the record type, lower-cased, and a
//! dash are put in front of the first label — `a-app.example.com`, `cname-app.example.com`,
//! `a-*.example.com` for a wildcard. Older external-dns wrote the TXT at the record's own name
//! (the "legacy" format, which external-dns applies to every type but AAAA); we read both and
//! write only the new one.

use std::collections::{BTreeMap, BTreeSet};

use super::Endpoint;
use crate::model::RecordType;

pub const HERITAGE: &str = "external-dns";
const LABEL_PREFIX: &str = "external-dns/";
const OWNER_KEY: &str = "owner";
const RESOURCE_KEY: &str = "resource";

/// The prefixes external-dns's mapper recognises (it manages more types than we do; a TXT
/// named `mx-…` belongs to an MX record, not to a record named `mx-…`), plus `txt`, which
/// external-dns writes for TXT records but does not read back; we do, for our own TXT records.
const TYPE_PREFIXES: [&str; 8] = ["a", "aaaa", "cname", "txt", "ns", "mx", "srv", "naptr"];

/// Labels parsed from one ownership TXT value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Labels {
    pub owner: String,
    pub resource: Option<String>,
    /// Every `external-dns/<key>=<value>` pair, owner and resource included.
    pub all: BTreeMap<String, String>,
}

/// The TXT value that marks a record as owned by `owner_id`, in external-dns's layout
/// (heritage first, then the labels sorted by key).
pub fn ownership_value(owner_id: &str, resource: Option<&str>) -> String {
    let mut value = format!("heritage={HERITAGE},{LABEL_PREFIX}{OWNER_KEY}={owner_id}");
    if let Some(resource) = resource {
        value.push_str(&format!(",{LABEL_PREFIX}{RESOURCE_KEY}={resource}"));
    }
    value
}

/// Parse an ownership value; `None` when it is not an external-dns heritage record (an
/// ordinary TXT record). Surrounding quotes, as some APIs return them, are tolerated.
pub fn parse_ownership(value: &str) -> Option<Labels> {
    let value = value.trim();
    let value = value
        .strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .unwrap_or(value);
    let mut heritage_ok = false;
    let mut all = BTreeMap::new();
    for pair in value.split(',') {
        let (key, val) = pair.split_once('=')?;
        if key == "heritage" {
            if val != HERITAGE {
                return None;
            }
            heritage_ok = true;
        } else if let Some(key) = key.strip_prefix(LABEL_PREFIX) {
            all.insert(key.to_string(), val.to_string());
        }
    }
    if !heritage_ok {
        return None;
    }
    let owner = all.get(OWNER_KEY).cloned().unwrap_or_default();
    let resource = all.get(RESOURCE_KEY).cloned();
    Some(Labels {
        owner,
        resource,
        all,
    })
}

/// Name of the ownership TXT record for `dns_name`/`record_type` (external-dns's new format,
/// without `--txt-wildcard-replacement`).
pub fn txt_name(dns_name: &str, record_type: RecordType) -> String {
    let prefix = record_type.as_str().to_ascii_lowercase();
    format!("{prefix}-{dns_name}")
}

/// The registry's settings: our owner id, and external-dns's `--txt-wildcard-replacement`
/// (many providers, PowerDNS among them, reject a `*` inside a label such as `a-*.example.com`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxtRegistry {
    pub owner_id: String,
    pub wildcard_replacement: Option<String>,
}

impl TxtRegistry {
    pub fn new(owner_id: impl Into<String>) -> Self {
        TxtRegistry {
            owner_id: owner_id.into(),
            wildcard_replacement: None,
        }
    }

    pub fn with_wildcard_replacement(mut self, replacement: Option<String>) -> Self {
        self.wildcard_replacement = replacement
            .map(|r| r.to_ascii_lowercase())
            .filter(|r| !r.is_empty());
        self
    }

    /// The name under which the registry knows `dns_name` (the leading `*` replaced).
    pub fn registry_name<'n>(&self, dns_name: &'n str) -> std::borrow::Cow<'n, str> {
        match (&self.wildcard_replacement, dns_name.strip_prefix("*.")) {
            (Some(replacement), Some(rest)) => format!("{replacement}.{rest}").into(),
            _ => dns_name.into(),
        }
    }

    /// The records a registry name may stand for: itself, and the wildcard it replaced.
    pub fn record_names(&self, registry_name: &str) -> Vec<String> {
        let mut names = vec![registry_name.to_string()];
        if let Some(replacement) = &self.wildcard_replacement
            && let Some(rest) = registry_name
                .strip_prefix(replacement.as_str())
                .and_then(|r| r.strip_prefix('.'))
        {
            names.push(format!("*.{rest}"));
        }
        names
    }

    pub fn txt_name(&self, dns_name: &str, record_type: RecordType) -> String {
        txt_name(&self.registry_name(dns_name), record_type)
    }

    pub fn value(&self, resource: Option<&str>) -> String {
        ownership_value(&self.owner_id, resource)
    }
}

/// What an ownership TXT record's name says it covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Covers {
    /// New format: the record of this name and type.
    Record(String, RecordType),
    /// New format for a type we do not manage (NS, MX, SRV, NAPTR).
    OtherType,
    /// Legacy format: records at this very name (every type but AAAA, as external-dns reads it).
    Legacy(String),
}

/// Reverse of [`txt_name`], reading the legacy layout too.
pub fn covered_by(txt_name: &str) -> Covers {
    if let Some((first, rest)) = txt_name.split_once('-')
        && TYPE_PREFIXES.contains(&first)
    {
        return match first.to_ascii_uppercase().parse::<RecordType>() {
            Ok(record_type) => Covers::Record(rest.to_string(), record_type),
            Err(_) => Covers::OtherType,
        };
    }
    Covers::Legacy(txt_name.to_string())
}

/// Who owns a record, and through which TXT record we know it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    pub owner: String,
    pub resource: Option<String>,
    pub txt_name: String,
    pub legacy: bool,
}

/// Ownership of every record, read from the TXT records of a listing.
#[derive(Debug, Clone)]
pub struct OwnershipIndex {
    registry: TxtRegistry,
    by_record: BTreeMap<(String, RecordType), Owner>,
    legacy_by_name: BTreeMap<String, Owner>,
    /// TXT names holding at least one heritage value, with those values parsed.
    registry_txt: BTreeMap<String, Vec<(String, Labels)>>,
}

impl OwnershipIndex {
    pub fn from_records(records: &[Endpoint], registry: &TxtRegistry) -> Self {
        let mut index = OwnershipIndex {
            registry: registry.clone(),
            by_record: BTreeMap::new(),
            legacy_by_name: BTreeMap::new(),
            registry_txt: BTreeMap::new(),
        };
        for record in records.iter().filter(|r| r.record_type == RecordType::TXT) {
            let parsed: Vec<(String, Labels)> = record
                .targets
                .iter()
                .filter_map(|value| parse_ownership(value).map(|labels| (value.clone(), labels)))
                .collect();
            let Some((_, labels)) = parsed.first() else {
                continue;
            };
            let owner = |legacy| Owner {
                owner: labels.owner.clone(),
                resource: labels.resource.clone(),
                txt_name: record.dns_name.clone(),
                legacy,
            };
            match covered_by(&record.dns_name) {
                Covers::Record(name, record_type) => {
                    index.by_record.insert((name, record_type), owner(false));
                }
                Covers::Legacy(name) => {
                    index.legacy_by_name.insert(name, owner(true));
                }
                Covers::OtherType => {}
            }
            index.registry_txt.insert(record.dns_name.clone(), parsed);
        }
        index
    }

    /// The owner of the record `name`/`record_type`: the new format first, then the legacy one
    /// (which external-dns never applies to AAAA).
    pub fn owner_of(&self, name: &str, record_type: RecordType) -> Option<&Owner> {
        let name = self.registry.registry_name(name);
        let name = name.as_ref();
        self.by_record
            .get(&(name.to_string(), record_type))
            .or_else(|| {
                if record_type == RecordType::AAAA {
                    None
                } else {
                    self.legacy_by_name.get(name)
                }
            })
    }

    /// Heritage values (raw text, parsed) stored at `txt_name`.
    pub fn registry_values(&self, txt_name: &str) -> &[(String, Labels)] {
        self.registry_txt
            .get(txt_name)
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// True when `record` is a TXT RRset made only of heritage values: registry bookkeeping,
    /// not a record anyone published for its own sake.
    pub fn is_registry_record(&self, record: &Endpoint) -> bool {
        record.record_type == RecordType::TXT
            && !record.targets.is_empty()
            && record
                .targets
                .iter()
                .all(|value| parse_ownership(value).is_some())
    }

    /// New-format ownership records whose owner is `owner_id` (name, type covered, TXT name).
    pub fn owned_new_format<'a>(
        &'a self,
        owner_id: &'a str,
    ) -> impl Iterator<Item = (&'a (String, RecordType), &'a Owner)> + 'a {
        self.by_record
            .iter()
            .filter(move |(_, owner)| owner.owner == owner_id)
    }

    /// Names covered by a legacy TXT owned by `owner_id`.
    pub fn owned_legacy_names<'a>(&'a self, owner_id: &'a str) -> BTreeSet<&'a str> {
        self.legacy_by_name
            .iter()
            .filter(|(_, owner)| owner.owner == owner_id)
            .map(|(name, _)| name.as_str())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_matches_external_dns_layout() {
        assert_eq!(
            ownership_value("gw", Some("httproute/shop/web")),
            "heritage=external-dns,external-dns/owner=gw,external-dns/resource=httproute/shop/web"
        );
        assert_eq!(
            ownership_value("gw", None),
            "heritage=external-dns,external-dns/owner=gw"
        );
    }

    #[test]
    fn parses_quoted_and_unquoted_values_and_rejects_others() {
        let labels = parse_ownership(
            "\"heritage=external-dns,external-dns/owner=a,external-dns/resource=ingress/x/y\"",
        )
        .unwrap();
        assert_eq!(labels.owner, "a");
        assert_eq!(labels.resource.as_deref(), Some("ingress/x/y"));
        assert!(parse_ownership("v=spf1 -all").is_none());
        assert!(parse_ownership("heritage=someone-else,external-dns/owner=a").is_none());
        assert!(parse_ownership("external-dns/owner=a").is_none());
    }

    #[test]
    fn txt_names_follow_the_type_prefixed_format() {
        assert_eq!(
            txt_name("app.example.com", RecordType::A),
            "a-app.example.com"
        );
        assert_eq!(
            txt_name("app.example.com", RecordType::CNAME),
            "cname-app.example.com"
        );
        assert_eq!(
            txt_name("*.example.com", RecordType::AAAA),
            "aaaa-*.example.com"
        );
        assert_eq!(
            covered_by("aaaa-*.example.com"),
            Covers::Record("*.example.com".into(), RecordType::AAAA)
        );
        assert_eq!(covered_by("mx-example.com"), Covers::OtherType);
        assert_eq!(
            covered_by("txt-note.example.com"),
            Covers::Record("note.example.com".into(), RecordType::TXT)
        );
        assert_eq!(
            covered_by("app.example.com"),
            Covers::Legacy("app.example.com".into())
        );
        assert_eq!(
            covered_by("my-app.example.com"),
            Covers::Legacy("my-app.example.com".into())
        );
    }

    #[test]
    fn wildcard_replacement_maps_both_ways() {
        let registry = TxtRegistry::new("gw").with_wildcard_replacement(Some("Any".into()));
        assert_eq!(
            registry.txt_name("*.example.com", RecordType::A),
            "a-any.example.com"
        );
        assert_eq!(
            registry.record_names("any.example.com"),
            ["any.example.com", "*.example.com"]
        );
        let records = vec![Endpoint::new(
            "a-any.example.com",
            RecordType::TXT,
            [ownership_value("gw", None)],
        )];
        let index = OwnershipIndex::from_records(&records, &registry);
        assert!(index.owner_of("*.example.com", RecordType::A).is_some());
    }

    #[test]
    fn index_prefers_new_format_and_skips_legacy_for_aaaa() {
        let records = vec![
            Endpoint::new(
                "a-app.example.com",
                RecordType::TXT,
                [ownership_value("new", None)],
            ),
            Endpoint::new(
                "app.example.com",
                RecordType::TXT,
                [ownership_value("old", None), "v=spf1 -all".to_string()],
            ),
        ];
        let index = OwnershipIndex::from_records(&records, &TxtRegistry::new("x"));
        assert_eq!(
            index
                .owner_of("app.example.com", RecordType::A)
                .unwrap()
                .owner,
            "new"
        );
        assert_eq!(
            index
                .owner_of("app.example.com", RecordType::CNAME)
                .unwrap()
                .owner,
            "old"
        );
        assert!(
            index
                .owner_of("app.example.com", RecordType::AAAA)
                .is_none()
        );
        assert!(index.is_registry_record(&records[0]));
        assert!(!index.is_registry_record(&records[1]));
    }
}
