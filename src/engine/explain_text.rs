//! The two forms `explain` prints an explanation in: the stable JSON (README.md,
//! "`gateway-dns explain`") and text for a person. `explain` prints them, and the status page's
//! page per name shows the same, so no second formatter states the facts differently.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use serde::Serialize;

use super::Record;
use super::explain::{ClaimView, ExplainedFinding, NameExplanation, ParentView, RouteExplanation};
use crate::model::{DEFAULT_TTL, RecordType};

/// An explanation of either form.
pub enum Explained {
    Name(NameExplanation),
    Route(RouteExplanation),
}

impl Explained {
    /// Exit 0 (see `EXPLAIN_EXIT_CODES`).
    pub fn fine(&self) -> bool {
        match self {
            Explained::Name(name) => name.resolves && !name.denied(),
            Explained::Route(route) => route.all_published(),
        }
    }

    /// The names whose records the provider is asked about, and the records the sync loop
    /// would write for them.
    pub fn names_and_records(&self) -> (BTreeSet<String>, Vec<Record>) {
        match self {
            Explained::Name(name) => {
                let mut names = BTreeSet::from([name.name.clone()]);
                let mut records = name.records.clone();
                for cover in &name.covered_by {
                    names.insert(cover.name.clone());
                    records.extend(cover.records.iter().cloned());
                }
                (names, records)
            }
            Explained::Route(route) => (
                route.names.iter().map(|n| n.name.clone()).collect(),
                route
                    .names
                    .iter()
                    .flat_map(|n| n.records.iter().cloned())
                    .collect(),
            ),
        }
    }
}

/// What the DNS provider holds for the names explained.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Held {
    /// Whether the provider was listed.
    pub consulted: bool,
    /// `rfc2136`, `pdns`, `webhook`, `dnsendpoint` or `embedded`; None without `--provider`.
    pub provider: Option<&'static str>,
    pub zones: Vec<String>,
    /// Why it was not consulted, or which names are outside its zones.
    pub note: Option<String>,
    /// Its A, AAAA and CNAME records for the names, with their owners.
    pub records: Vec<HeldRecord>,
    /// Whether they are the records the sync loop would write (names, types, targets, and the
    /// TTL where a route asks for one); None when not consulted.
    pub in_sync: Option<bool>,
    /// What each secondary of the embedded server answers for the names, asked by DNS.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub secondaries: Vec<SecondaryHeld>,
}

/// What one secondary answers for the names explained.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SecondaryHeld {
    /// `IP:PORT`.
    pub secondary: String,
    /// Its A, AAAA and CNAME records of the names: (name, type, target).
    pub records: Vec<SecondaryRecord>,
    /// It serves exactly the targets the sync loop would write, for every name and type.
    pub current: bool,
    /// Why it could not be asked, or what it answered instead of records.
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SecondaryRecord {
    pub dns_name: String,
    pub record_type: RecordType,
    pub target: String,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HeldRecord {
    pub dns_name: String,
    pub record_type: RecordType,
    pub targets: Vec<String>,
    pub ttl: Option<u32>,
    /// The owner id in its ownership TXT record (`--txt-owner-id`), if it has one.
    pub owner: Option<String>,
    /// The resource the ownership record names (`httproute/apps/web`).
    pub resource: Option<String>,
    /// The owner's last heartbeat in the zone, when it writes one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub heartbeat: Option<HeldHeartbeat>,
    /// Every owner of a name shared across clusters (`--shared-name`), whose targets make the
    /// RRset; empty for a name held alone.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub shared_by: Vec<String>,
}

/// An owner's last heartbeat, as `explain` shows it beside the owner's records.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HeldHeartbeat {
    /// RFC 3339.
    pub time: String,
    pub age_seconds: i64,
    pub instance: String,
}

// ---------------------------------------------------------------------------------- JSON

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonExplanation<'a, T: Serialize> {
    /// `name` or `route`: which form follows.
    explains: &'static str,
    #[serde(flatten)]
    explanation: &'a T,
    provider: &'a Held,
}

/// The stable JSON (README.md, "`gateway-dns explain`").
pub fn to_json(explained: &Explained, held: &Held) -> String {
    // Serializing strings, numbers and lists cannot fail.
    match explained {
        Explained::Name(explanation) => serde_json::to_string_pretty(&JsonExplanation {
            explains: "name",
            explanation,
            provider: held,
        }),
        Explained::Route(explanation) => serde_json::to_string_pretty(&JsonExplanation {
            explains: "route",
            explanation,
            provider: held,
        }),
    }
    .unwrap_or_default()
}

// ---------------------------------------------------------------------------------- text

/// Text for a person.
pub fn to_text(explained: &Explained, held: &Held) -> String {
    let mut out = String::new();
    match explained {
        Explained::Name(name) => name_text(&mut out, name),
        Explained::Route(route) => route_text(&mut out, route),
    }
    held_text(&mut out, held);
    out
}

fn name_text(out: &mut String, name: &NameExplanation) {
    let n = &name.name;
    // Writing into a String cannot fail.
    if !name.records.is_empty() {
        let _ = writeln!(out, "{n} resolves to {}.", records_in_words(&name.records));
        let sharing: BTreeSet<&str> = name
            .records
            .iter()
            .flat_map(|r| r.routes.iter().map(String::as_str))
            .collect();
        let shared_on_purpose = name.records.iter().any(|r| r.shared);
        match &name.winner {
            Some(_) if shared_on_purpose && sharing.len() > 1 => {
                let routes: Vec<&str> = sharing.iter().copied().collect();
                let _ = writeln!(
                    out,
                    "The name is shared on purpose (--shared-name): {} publish the union of their targets.",
                    routes.join(", ")
                );
            }
            Some(winner) if sharing.len() > 1 => {
                let others: Vec<&str> = sharing.iter().copied().filter(|r| r != winner).collect();
                let verb = if others.len() == 1 { "shares" } else { "share" };
                let _ = writeln!(
                    out,
                    "The claim of {winner} keeps the name; {} {verb} it (same targets).",
                    others.join(", ")
                );
            }
            Some(winner) => {
                let _ = writeln!(out, "The claim of {winner} keeps the name.");
            }
            None => {}
        }
    } else if let Some(cover) = name.covered_by.first() {
        let _ = writeln!(
            out,
            "{n} has no record of its own; the wildcard {} answers for it with {}.",
            cover.name,
            records_in_words(&cover.records)
        );
    } else if name.routes.is_empty() {
        let _ = writeln!(
            out,
            "{n} does not resolve through gateway-dns: no route claims or asks for it."
        );
    } else {
        let _ = writeln!(out, "{n} does not resolve: no claim on it is published.");
    }
    if !name.routes.is_empty() {
        let _ = writeln!(
            out,
            "\nRoutes, claims first in the engine's order (oldest creationTimestamp, then namespace/name):"
        );
    }
    for route in &name.routes {
        let created = route.created.as_deref().map_or_else(
            || "no creationTimestamp".to_owned(),
            |c| format!("created {c}"),
        );
        let _ = writeln!(
            out,
            "\n{} ({created}): {}",
            route.route,
            route.fate.as_str()
        );
        let _ = writeln!(out, "  why: {}", route.why);
        claims_text(out, &route.claims);
        parents_text(out, &route.parents, Some(n));
        findings_text(out, "  ", &route.findings);
    }
    let _ = writeln!(out, "\nRecords the sync loop would write:");
    if name.records.is_empty() {
        let _ = writeln!(out, "  none for {n}");
    }
    records_text(out, &name.records);
    for cover in &name.covered_by {
        records_text(out, &cover.records);
    }
}

fn route_text(out: &mut String, route: &RouteExplanation) {
    let created = route.created.as_deref().map_or_else(
        || "no creationTimestamp".to_owned(),
        |c| format!("created {c}"),
    );
    let published = route
        .names
        .iter()
        .filter(|n| n.fate == crate::engine::explain::Fate::Published)
        .count();
    let _ = writeln!(
        out,
        "{} ({created}): {} name(s), {published} published.",
        route.route,
        route.names.len()
    );
    if !route.in_scope {
        let _ = writeln!(
            out,
            "It is outside this installation's scope (route filters, or another DNS controller's annotation): it contributes nothing."
        );
    }
    if let Some(ttl) = route.ttl {
        let _ = writeln!(out, "TTL asked by its annotation: {ttl}");
    }
    let _ = writeln!(out, "\nParents:");
    if route.parents.is_empty() {
        let _ = writeln!(out, "  none (spec.parentRefs is empty)");
    }
    parents_text(out, &route.parents, None);
    let _ = writeln!(out, "\nNames:");
    if route.names.is_empty() {
        let _ = writeln!(out, "  none");
    }
    for name in &route.names {
        let _ = writeln!(out, "\n  {}: {}", name.name, name.fate.as_str());
        let _ = writeln!(out, "    why: {}", name.why);
        for claim in &name.claims {
            let _ = writeln!(out, "    {}", claim_line(claim));
        }
        for record in &name.records {
            let _ = writeln!(out, "    record: {}", record_line(record));
        }
        findings_text(out, "    ", &name.findings);
    }
    let unnamed: Vec<&ExplainedFinding> = route
        .findings
        .iter()
        .filter(|f| !route.names.iter().any(|n| n.findings.contains(f)))
        .collect();
    if !unnamed.is_empty() {
        let _ = writeln!(out, "\nOther findings of the route:");
        for finding in unnamed {
            let _ = writeln!(out, "  {}", finding_line(finding));
        }
    }
}

fn claims_text(out: &mut String, claims: &[ClaimView]) {
    for claim in claims {
        let _ = writeln!(out, "  {}", claim_line(claim));
    }
}

fn claim_line(claim: &ClaimView) -> String {
    let mut line = format!("claim #{} through Gateway {}", claim.rank, claim.gateway);
    if let Some(listener_set) = &claim.listener_set {
        let _ = write!(line, " (ListenerSet {listener_set})");
    }
    let _ = write!(
        line,
        " -> {} [{}]: {}",
        claim.targets.join(", "),
        claim.field,
        claim.result.as_str()
    );
    if let Some(key) = claim.decided_by {
        let _ = write!(line, " (decided by {})", key.as_str());
    }
    for failing in &claim.failing_targets {
        let fate = if failing.left_out {
            "left out"
        } else {
            "kept: no healthy target left"
        };
        let _ = write!(
            line,
            "; {} unhealthy since {}: {} ({fate})",
            failing.target,
            failing.since.as_deref().unwrap_or("?"),
            failing.last_error
        );
    }
    line
}

fn parents_text(out: &mut String, parents: &[ParentView], name: Option<&str>) {
    for parent in parents {
        let mut line = format!("  {} {}", parent.field, parent.parent);
        if let Some(section) = &parent.section_name {
            let _ = write!(line, " sectionName {section}");
        }
        if let Some(port) = parent.port {
            let _ = write!(line, " port {port}");
        }
        if parent.attached {
            let targets = if parent.targets.is_empty() {
                "no address yet".to_owned()
            } else {
                parent.targets.join(", ")
            };
            let _ = write!(line, ": attached -> {targets}");
        } else {
            line.push_str(": not attached");
        }
        let _ = writeln!(out, "{line}");
        for listener in &parent.listeners {
            let hostname = listener.hostname.as_deref().unwrap_or("any hostname");
            let verdict = match &listener.refusal {
                Some(why) => format!("refuses: {why}"),
                None if listener.hostnames.is_empty() => {
                    "accepts the route; serves none of its names".to_owned()
                }
                None => {
                    let serves = match name {
                        Some(name) if listener.hostnames.iter().any(|h| h == name) => {
                            format!("serves {name}")
                        }
                        Some(name) => format!(
                            "does not serve {name} (serves {})",
                            listener.hostnames.join(", ")
                        ),
                        None => format!("serves {}", listener.hostnames.join(", ")),
                    };
                    format!("accepts the route; {serves}")
                }
            };
            let _ = writeln!(
                out,
                "    listener {} ({hostname}): {verdict}",
                if listener.name.is_empty() {
                    "(unnamed)"
                } else {
                    &listener.name
                }
            );
        }
        for finding in &parent.findings {
            let _ = writeln!(out, "    {}", finding_line(finding));
        }
    }
}

fn findings_text(out: &mut String, indent: &str, findings: &[ExplainedFinding]) {
    for finding in findings {
        let _ = writeln!(out, "{indent}{}", finding_line(finding));
    }
}

fn finding_line(finding: &ExplainedFinding) -> String {
    format!(
        "{:<5} {}: {} [{}]",
        finding.action, finding.reason, finding.message, finding.field
    )
}

fn records_in_words(records: &[Record]) -> String {
    records
        .iter()
        .map(|r| format!("{} ({})", r.targets.join(", "), r.record_type.as_str()))
        .collect::<Vec<_>>()
        .join(" and ")
}

fn ttl_text(ttl: Option<u32>) -> String {
    match ttl {
        Some(ttl) => format!("ttl {ttl}"),
        None => format!("ttl {DEFAULT_TTL} (default)"),
    }
}

fn record_line(record: &Record) -> String {
    format!(
        "{} {} {} {} (from {}; Gateway {})",
        record.dns_name,
        record.record_type.as_str(),
        record.targets.join(","),
        ttl_text(record.ttl),
        record.routes.join(", "),
        record.gateways.join(", ")
    )
}

fn records_text(out: &mut String, records: &[Record]) {
    for record in records {
        let _ = writeln!(out, "  {}", record_line(record));
    }
}

fn held_text(out: &mut String, held: &Held) {
    provider_text(out, held);
    if held.secondaries.is_empty() {
        return;
    }
    let _ = writeln!(out, "\nOn the secondaries (asked by DNS):");
    for secondary in &held.secondaries {
        let serves = if secondary.records.is_empty() {
            "no A, AAAA or CNAME record".to_owned()
        } else {
            secondary
                .records
                .iter()
                .map(|r| format!("{} {} {}", r.dns_name, r.record_type.as_str(), r.target))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let state = match (&secondary.error, secondary.current) {
            (Some(error), _) => format!("no usable answer: {error}"),
            (None, true) => format!("current: {serves}"),
            (None, false) => format!("not current yet: serves {serves}"),
        };
        let _ = writeln!(out, "  {}: {state}", secondary.secondary);
    }
}

fn provider_text(out: &mut String, held: &Held) {
    let provider = held.provider.unwrap_or("the DNS provider");
    if !held.consulted {
        let _ = writeln!(
            out,
            "\nDNS provider: {}",
            held.note.as_deref().unwrap_or("not consulted")
        );
        return;
    }
    let _ = writeln!(
        out,
        "\nWhat {provider} holds now (zones {}):",
        held.zones.join(", ")
    );
    if held.records.is_empty() {
        let _ = writeln!(out, "  no A, AAAA or CNAME record for these names");
    }
    for record in &held.records {
        let mut owner = match (&record.owner, &record.resource) {
            (Some(owner), Some(resource)) => format!("owner {owner}, {resource}"),
            (Some(owner), None) => format!("owner {owner}"),
            _ => "no ownership record: not gateway-dns's".to_owned(),
        };
        if !record.shared_by.is_empty() {
            owner = format!("shared by {}", record.shared_by.join(", "));
        }
        if let Some(beat) = &record.heartbeat {
            owner.push_str(&format!(
                "; last heartbeat {} ({}s ago)",
                beat.time, beat.age_seconds
            ));
        }
        let ttl = record
            .ttl
            .map_or_else(|| "ttl ?".to_owned(), |ttl| format!("ttl {ttl}"));
        let _ = writeln!(
            out,
            "  {} {} {} {ttl} ({owner})",
            record.dns_name,
            record.record_type.as_str(),
            record.targets.join(",")
        );
    }
    if let Some(note) = &held.note {
        let _ = writeln!(out, "  note: {note}");
    }
    let _ = writeln!(
        out,
        "  {}",
        if held.in_sync == Some(true) {
            "in sync: the provider holds what the sync loop would write"
        } else {
            "not in sync: the provider differs from what the sync loop would write (the next sync pass changes it, unless another owner blocks it)"
        }
    );
}
