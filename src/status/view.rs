//! What the status page shows, as data: the overview, the table of names with its filters, sort
//! and pages, and the findings by namespace. Pure: built from the index's snapshot and settled
//! outcome plus the readings `mod.rs` passes in; the same data is `/status.json` and the HTML.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::engine::admission::finding_line;
use crate::engine::{Finding, Outcome, Reason, World};
use crate::model::DEFAULT_TTL;
use crate::model::dns_name::canonical;

/// Rows on one page of the names table, unless the query asks for fewer.
pub const PAGE_SIZE: usize = 100;
/// The most rows one page may ask for.
pub const MAX_PAGE_SIZE: usize = 500;

/// The query string of the names table: its filters, sort and page. Every field is optional,
/// so a filtered view is a URL of its own.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default)]
pub struct NameQuery {
    /// Rows with a route or Gateway in this namespace.
    pub namespace: String,
    /// Rows published through this Gateway (`namespace/name`).
    pub gateway: String,
    /// Rows with a finding of this reason.
    pub reason: String,
    /// Rows whose name, targets, routes or owners contain this text.
    pub q: String,
    /// `name` (the default), `type`, `targets`, `route`, `gateway`, `zone`, `owner` or `ttl`.
    pub sort: String,
    /// `desc` for the other way round.
    pub order: String,
    /// From 1.
    pub page: usize,
    pub per_page: usize,
}

impl NameQuery {
    /// The query as a URL query string, with `page` replaced (for the page links).
    pub fn with_page(&self, page: usize) -> String {
        let mut query = self.clone();
        query.page = page;
        query.to_query_string()
    }

    /// The query with a new sort column: the same column again turns the order round.
    pub fn sorted_by(&self, column: &str) -> String {
        let mut query = self.clone();
        query.order = if query.sort_column() == column && query.order != "desc" {
            "desc".to_owned()
        } else {
            String::new()
        };
        query.sort = column.to_owned();
        query.page = 0;
        query.to_query_string()
    }

    pub fn sort_column(&self) -> &str {
        if self.sort.is_empty() {
            "name"
        } else {
            &self.sort
        }
    }

    fn to_query_string(&self) -> String {
        let pairs = [
            ("namespace", self.namespace.as_str()),
            ("gateway", self.gateway.as_str()),
            ("reason", self.reason.as_str()),
            ("q", self.q.as_str()),
            ("sort", self.sort.as_str()),
            ("order", self.order.as_str()),
        ];
        let mut out = String::new();
        for (key, value) in pairs {
            if !value.is_empty() {
                push_pair(&mut out, key, value);
            }
        }
        if self.page > 1 {
            push_pair(&mut out, "page", &self.page.to_string());
        }
        if self.per_page != 0 && self.per_page != PAGE_SIZE {
            push_pair(&mut out, "per_page", &self.per_page.to_string());
        }
        out
    }

    fn page_size(&self) -> usize {
        match self.per_page {
            0 => PAGE_SIZE,
            n => n.min(MAX_PAGE_SIZE),
        }
    }
}

fn push_pair(out: &mut String, key: &str, value: &str) {
    out.push(if out.is_empty() { '?' } else { '&' });
    out.push_str(key);
    out.push('=');
    out.extend(
        percent_encoding::utf8_percent_encode(value, percent_encoding::NON_ALPHANUMERIC)
            .flat_map(str::chars),
    );
}

/// One row of the names table: one record of a name, or a name that has findings and no
/// record (its claim was refused).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NameRow {
    pub name: String,
    /// `A`, `AAAA` or `CNAME`; None for a name without a record.
    pub record_type: Option<&'static str>,
    pub targets: Vec<String>,
    /// `Kind/namespace/name` of the routes whose claims the record serves.
    pub routes: Vec<String>,
    /// `namespace/name` of the Gateways the name resolves to.
    pub gateways: Vec<String>,
    /// The managed zone the name is in, when it is in one.
    pub zone: Option<String>,
    /// This installation's owner id for a record it publishes; for a name another owner holds
    /// in the zone, that holder (`owner "east"`, `an unmanaged record`).
    pub owner: String,
    /// Other owners seen for the name in the zone view.
    pub other_owners: Vec<String>,
    pub ttl: Option<u32>,
    /// The targets the health checks find failing, of the name's Gateways: `address: error`.
    pub failing_targets: Vec<String>,
    /// The reasons of the findings about the name, sorted.
    pub reasons: Vec<&'static str>,
}

/// One page of the names table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NamesPage {
    pub rows: Vec<NameRow>,
    /// Rows before the filters.
    pub total: usize,
    /// Rows the filters keep (of those made, when the build was cut short).
    pub matched: usize,
    pub page: usize,
    pub pages: usize,
    /// The build ran out of time: the table has only the rows made by then.
    pub partial: bool,
}

/// A finding as the page lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FindingRow {
    pub reason: &'static str,
    pub action: &'static str,
    pub object: String,
    pub hostname: Option<String>,
    /// The webhook's line for it: `Reason: message`.
    pub line: String,
}

/// The findings of one namespace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NamespaceFindings {
    pub namespace: String,
    pub findings: Vec<FindingRow>,
}

/// What the page reads besides the index: the sync loop's and the webhook's state.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Health {
    /// The DNS provider the sync loop writes through; None without the sync loop.
    pub provider: Option<String>,
    pub zones: Vec<String>,
    /// `--txt-owner-id`.
    pub owner_id: String,
    /// RFC 3339 of the last sync pass that converged; None before the first.
    pub last_successful_sync: Option<String>,
    pub sync_errors: u64,
    /// Whether this replica may write DNS now.
    pub leading: bool,
    /// The identity last seen holding the Lease; None without an election or before it answers.
    pub lease_holder: Option<String>,
    /// Desired records the last pass could not publish: ownership, zone, conflict.
    pub blocked: BTreeMap<&'static str, i64>,
    /// Admission answers over the last minute, scaled to a minute; None until a minute of
    /// samples is there.
    pub answers_per_minute: Option<f64>,
    pub answers_total: u64,
}

/// The overview's counts.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Overview {
    pub names: usize,
    pub records: usize,
    pub findings: usize,
    /// Counts by reason, the reasons with findings only, by reason name.
    pub findings_by_reason: BTreeMap<&'static str, usize>,
    pub held_by_others: usize,
    pub health: Health,
}

/// Builds the overview.
pub fn overview<W: World>(world: &W, outcome: &Outcome, health: Health) -> Overview {
    let mut names: Vec<&str> = outcome
        .records
        .iter()
        .map(|r| r.dns_name.as_str())
        .collect();
    names.dedup();
    let mut findings_by_reason = BTreeMap::new();
    for finding in &outcome.violations {
        *findings_by_reason
            .entry(finding.reason.as_str())
            .or_default() += 1;
    }
    Overview {
        names: names.len(),
        records: outcome.records.len(),
        findings: outcome.violations.len(),
        findings_by_reason,
        held_by_others: world.zone().len(),
        health,
    }
}

/// The rows of the names table that `query`'s filters keep, sorted by name, then record type:
/// each record, then each name that only findings speak of; with how many rows there are
/// before the filters. The filters apply as the rows are made, so a build cut short at
/// `deadline` (said with `true`) has every row a narrower filter would keep up to where it
/// stopped.
pub fn rows<W: World>(
    world: &W,
    outcome: &Outcome,
    zones: &[String],
    owner_id: &str,
    query: &NameQuery,
    deadline: Instant,
) -> (Vec<NameRow>, usize, bool) {
    let filter = Filter::of(query);
    let mut reasons: BTreeMap<&str, Vec<&'static str>> = BTreeMap::new();
    for finding in &outcome.violations {
        if let Some(name) = &finding.hostname {
            let list = reasons.entry(name.as_str()).or_default();
            if !list.contains(&finding.reason.as_str()) {
                list.push(finding.reason.as_str());
            }
        }
    }
    for list in reasons.values_mut() {
        list.sort_unstable();
    }
    // Names that findings speak of and no record publishes (the records are sorted by name).
    let unpublished: Vec<(&str, &Vec<&'static str>)> = reasons
        .iter()
        .filter(|(name, _)| {
            outcome
                .records
                .binary_search_by(|r| r.dns_name.as_str().cmp(name))
                .is_err()
        })
        .map(|(name, list)| (*name, list))
        .collect();
    let total = outcome.records.len() + unpublished.len();
    let mut rows = Vec::new();
    for (visited, record) in outcome.records.iter().enumerate() {
        if visited % 256 == 0 && Instant::now() >= deadline {
            return (rows, total, true);
        }
        let failing_targets = record
            .gateways
            .iter()
            .flat_map(|gateway| {
                world
                    .target_health()
                    .iter()
                    .filter(move |(g, _, _)| *g == gateway.as_str())
                    .map(|(_, address, unhealthy)| format!("{address}: {}", unhealthy.error))
            })
            .collect();
        let row = NameRow {
            name: record.dns_name.clone(),
            record_type: Some(record.record_type.as_str()),
            targets: record.targets.clone(),
            routes: record.routes.clone(),
            gateways: record.gateways.clone(),
            zone: zone_of(&record.dns_name, zones),
            owner: owner_id.to_owned(),
            other_owners: world
                .zone()
                .holder(&record.dns_name)
                .map(|h| vec![h.who()])
                .unwrap_or_default(),
            ttl: record.ttl,
            failing_targets,
            reasons: reasons
                .get(record.dns_name.as_str())
                .cloned()
                .unwrap_or_default(),
        };
        if filter.keeps(&row) {
            rows.push(row);
        }
    }
    for (name, list) in unpublished {
        let holder = world.zone().holder(name);
        let routes: Vec<String> = outcome
            .violations
            .iter()
            .filter(|f| f.hostname.as_deref() == Some(name))
            .map(|f| f.object.clone())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let row = NameRow {
            name: name.to_owned(),
            record_type: None,
            targets: holder
                .map(|h| h.targets.iter().map(|t| t.to_string()).collect())
                .unwrap_or_default(),
            routes,
            gateways: Vec::new(),
            zone: zone_of(name, zones),
            owner: holder.map_or_else(String::new, |h| h.who()),
            other_owners: Vec::new(),
            ttl: None,
            failing_targets: Vec::new(),
            reasons: list.clone(),
        };
        if filter.keeps(&row) {
            rows.push(row);
        }
    }
    rows.sort_by(|a, b| (&a.name, a.record_type).cmp(&(&b.name, b.record_type)));
    (rows, total, false)
}

/// The names table's filters, read once per build.
struct Filter<'q> {
    namespace: &'q str,
    gateway: &'q str,
    reason: &'q str,
    text: String,
}

impl Filter<'_> {
    fn of(query: &NameQuery) -> Filter<'_> {
        Filter {
            namespace: query.namespace.trim(),
            gateway: query.gateway.trim(),
            reason: query.reason.trim(),
            text: query.q.trim().to_ascii_lowercase(),
        }
    }

    fn keeps(&self, row: &NameRow) -> bool {
        let namespace = self.namespace;
        (namespace.is_empty()
            || row
                .routes
                .iter()
                .any(|r| r.split('/').nth(1) == Some(namespace))
            || row
                .gateways
                .iter()
                .any(|g| g.split('/').next() == Some(namespace)))
            && (self.gateway.is_empty() || row.gateways.iter().any(|g| g == self.gateway))
            && (self.reason.is_empty()
                || row
                    .reasons
                    .iter()
                    .any(|r| r.eq_ignore_ascii_case(self.reason)))
            && (self.text.is_empty() || row_contains(row, &self.text))
    }
}

/// The rows a build kept (see [`rows`]), sorted as `query` asks, cut to its page.
pub fn names_page(
    mut kept: Vec<NameRow>,
    total: usize,
    partial: bool,
    query: &NameQuery,
) -> NamesPage {
    let key = |row: &NameRow| -> String {
        match query.sort_column() {
            "type" => row.record_type.unwrap_or("~").to_owned(),
            "targets" => row.targets.join(","),
            "route" => row.routes.join(","),
            "gateway" => row.gateways.join(","),
            "zone" => row.zone.clone().unwrap_or_default(),
            "owner" => row.owner.clone(),
            // The TTL a record gets (a name without a record last), as a number sorts.
            "ttl" => match row.record_type {
                Some(_) => format!("{:010}", row.ttl.unwrap_or(DEFAULT_TTL)),
                None => "~".to_owned(),
            },
            _ => String::new(),
        }
    };
    let descending = query.order == "desc";
    if query.sort_column() == "name" {
        if descending {
            kept.reverse();
        }
    } else if descending {
        // Stable: rows with the same key stay in name order either way.
        kept.sort_by_cached_key(|row| std::cmp::Reverse(key(row)));
    } else {
        kept.sort_by_cached_key(key);
    }
    let matched = kept.len();
    let size = query.page_size();
    let pages = matched.div_ceil(size).max(1);
    let page = query.page.clamp(1, pages);
    let rows = kept
        .into_iter()
        .skip((page - 1) * size)
        .take(size)
        .collect();
    NamesPage {
        rows,
        total,
        matched,
        page,
        pages,
        partial,
    }
}

fn row_contains(row: &NameRow, text: &str) -> bool {
    let has = |s: &str| s.to_ascii_lowercase().contains(text);
    has(&row.name)
        || row.targets.iter().any(|t| has(t))
        || row.routes.iter().any(|r| has(r))
        || row.gateways.iter().any(|g| has(g))
        || has(&row.owner)
        || row.other_owners.iter().any(|o| has(o))
}

/// The findings grouped by the namespace of their object, namespaces sorted; cluster-scoped
/// objects under "".
pub fn findings_by_namespace(violations: &[Finding]) -> Vec<NamespaceFindings> {
    let mut groups: BTreeMap<&str, Vec<FindingRow>> = BTreeMap::new();
    for finding in violations {
        let namespace = finding.object.split('/').nth(1).unwrap_or("");
        groups.entry(namespace).or_default().push(FindingRow {
            reason: finding.reason.as_str(),
            action: finding.action.as_str(),
            object: finding.object.clone(),
            hostname: finding.hostname.clone(),
            line: finding_line(finding),
        });
    }
    groups
        .into_iter()
        .map(|(namespace, findings)| NamespaceFindings {
            namespace: namespace.to_owned(),
            findings,
        })
        .collect()
}

/// The reasons a filter may name, for the page's select box.
pub fn reason_names() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = Reason::ALL.iter().map(|r| r.as_str()).collect();
    names.sort_unstable();
    names
}

/// The longest managed zone `name` is in.
fn zone_of(name: &str, zones: &[String]) -> Option<String> {
    let name = canonical(name.trim_start_matches("*."));
    zones
        .iter()
        .filter(|zone| {
            name.as_ref() == zone.as_str()
                || name
                    .strip_suffix(zone.as_str())
                    .is_some_and(|rest| rest.ends_with('.'))
        })
        .max_by_key(|zone| zone.len())
        .cloned()
}

/// How long building one page may take before it is cut short.
pub const BUILD_BUDGET: Duration = Duration::from_millis(500);
