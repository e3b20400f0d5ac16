//! `gateway-dns explain`: why a DNS name resolves (or does not) and to what, or what becomes of
//! each name of a route. The explanation is the engine's (`engine::explain`); this file reads
//! the objects (files as `check` reads them, or the cluster), lists the DNS provider when asked
//! (read-only), and prints.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::Arc;

use anyhow::{Context, Result, anyhow, bail};
use serde::Serialize;

use super::{EXIT_DENIED, EXIT_INPUT, EXIT_OK};
use crate::cli::{ExplainArgs, ExplainOutput, ProviderKind};
use crate::dns::registry::OwnershipIndex;
use crate::dns::{DEFAULT_TTL, Endpoint, in_zone};
use crate::engine::explain::{
    ClaimView, ExplainedFinding, NameExplanation, ParentView, RouteExplanation, explain_name,
    explain_route, parse_name,
};
use crate::engine::zone::ZoneView;
use crate::engine::{Outcome, Record};
use crate::index::Snapshot;
use crate::model::{Object, ObjectKey, ObjectKind, RecordType};
use crate::source::{files, kube};

/// What was asked about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Name(String),
    Route {
        kind: ObjectKind,
        namespace: String,
        name: String,
    },
}

/// `app.example.com`, `httproute/web` (namespace from `-n`) or `HTTPRoute/apps/web`.
pub fn parse_target(text: &str, namespace: &str) -> Result<Target> {
    let text = text.trim();
    let parts: Vec<&str> = text.split('/').collect();
    let (kind, namespace, name) = match parts.as_slice() {
        [name] => return Ok(Target::Name(parse_name(name)?)),
        [kind, name] => (*kind, namespace, *name),
        [kind, namespace, name] => (*kind, *namespace, *name),
        _ => bail!("{text:?} is neither a DNS name nor KIND/NAME or KIND/NAMESPACE/NAME"),
    };
    if namespace.is_empty() || name.is_empty() {
        bail!("{text:?}: the namespace and the name of a route cannot be empty");
    }
    Ok(Target::Route {
        kind: route_kind(kind)?,
        namespace: namespace.to_owned(),
        name: name.to_owned(),
    })
}

/// A route kind as kubectl takes it: `HTTPRoute`, `httproute`, `httproutes`, with or without
/// `.gateway.networking.k8s.io`.
fn route_kind(text: &str) -> Result<ObjectKind> {
    let lower = text.to_ascii_lowercase();
    let bare = lower
        .strip_suffix(".gateway.networking.k8s.io")
        .unwrap_or(&lower);
    let kind = ObjectKind::ALL
        .into_iter()
        .find(|k| k.kind().to_ascii_lowercase() == bare || k.plural() == bare);
    let routes = "HTTPRoute, GRPCRoute, TLSRoute, TCPRoute, UDPRoute";
    match kind {
        Some(kind) if kind.is_route() => Ok(kind),
        Some(kind) => Err(anyhow!(
            "{kind} is not a route kind: explain takes a DNS name or a route ({routes})"
        )),
        None => Err(anyhow!(
            "unknown kind {text:?}: explain takes a DNS name or a route ({routes})"
        )),
    }
}

/// Runs `explain`; returns the process exit code.
pub fn run(args: &ExplainArgs) -> u8 {
    match explain(args) {
        Ok((text, code)) => {
            // A reader that went away (`| head`) is not an error worth a panic.
            let _ = std::io::stdout().lock().write_all(text.as_bytes());
            code
        }
        Err(err) => {
            eprintln!("gateway-dns explain: {}", super::error_chain(err.as_ref()));
            EXIT_INPUT
        }
    }
}

/// The explanation and what the provider holds, printed, with the exit code.
fn explain(args: &ExplainArgs) -> Result<(String, u8)> {
    let cfg = Arc::new(args.engine.to_config()?);
    let target = parse_target(&args.target, &args.route_namespace)?;
    let files = if args.manifests.is_empty() {
        Vec::new()
    } else {
        files::load_paths_in(&args.manifests, args.default_namespace.as_deref())?.objects
    };
    let read_cluster = args.manifests.is_empty()
        || args.kubeconfig.is_some()
        || args.context.is_some()
        || args.read_cluster;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let live = if read_cluster {
        runtime.block_on(read_live_objects(
            args.kubeconfig.as_deref(),
            args.context.as_deref(),
        ))?
    } else {
        Vec::new()
    };
    // The files replace live objects of the same name, as `kubectl apply` would.
    let mut world: BTreeMap<ObjectKey, Object> = live.into_iter().map(|o| (o.key(), o)).collect();
    for loaded in files {
        let key = loaded.object.key();
        let object = if read_cluster {
            super::as_applied(&loaded.object, world.get(&key))
        } else {
            loaded.object
        };
        world.insert(key, object);
    }
    // The provider is listed first: the zone view it gives decides the claims on names other
    // owners hold, as serve's does.
    let listing = runtime.block_on(list_provider(args))?;
    let zone = match &listing {
        Listing::Listed { listed, .. } => {
            crate::zone_view::view_of(listed, &super::provider::registry(&args.provider_flags)?)
        }
        Listing::Not(_) => ZoneView::new(),
    };
    let snapshot = Snapshot::from_objects(cfg, world.into_values()).with_zone_view(zone);
    let explained = match target {
        Target::Name(name) => Explained::Name(explain_name(&snapshot, &name)),
        Target::Route {
            kind,
            namespace,
            name,
        } => Explained::Route(explain_route(&snapshot, kind, &namespace, &name)?),
    };
    let provider = held(args, listing, &explained)?;
    let code = if explained.fine() {
        EXIT_OK
    } else {
        EXIT_DENIED
    };
    let text = match args.output {
        ExplainOutput::Json => to_json(&explained, &provider) + "\n",
        ExplainOutput::Text => to_text(&explained, &provider),
    };
    Ok((text, code))
}

async fn read_live_objects(
    kubeconfig: Option<&std::path::Path>,
    context: Option<&str>,
) -> Result<Vec<Object>> {
    kube::list_cluster(kubeconfig, context)
        .await
        .context("connecting to the cluster (pass --manifests PATH to explain files offline)")
}

/// An explanation of either form.
pub enum Explained {
    Name(NameExplanation),
    Route(RouteExplanation),
}

impl Explained {
    /// Exit 0 (see `EXPLAIN_EXIT_CODES`).
    fn fine(&self) -> bool {
        match self {
            Explained::Name(name) => name.resolves && !name.denied(),
            Explained::Route(route) => route.all_published(),
        }
    }

    /// The names whose records the provider is asked about, and the records the sync loop
    /// would write for them.
    fn names_and_records(&self) -> (BTreeSet<String>, Vec<Record>) {
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
}

/// The provider's records, or why it was not listed.
enum Listing {
    Listed {
        provider: &'static str,
        zones: Vec<String>,
        listed: Vec<Endpoint>,
    },
    Not(Held),
}

/// Lists the provider `--provider` names, in every zone.
async fn list_provider(args: &ExplainArgs) -> Result<Listing> {
    let Some(kind) = args.provider else {
        return Ok(Listing::Not(Held {
            note: Some("not consulted: no --provider given".to_owned()),
            ..Held::default()
        }));
    };
    let provider_name = match kind {
        ProviderKind::Embedded => "embedded",
        ProviderKind::Rfc2136 => "rfc2136",
        ProviderKind::Pdns => "pdns",
        ProviderKind::Webhook => "webhook",
        ProviderKind::Dnsendpoint => "dnsendpoint",
    };
    if kind == ProviderKind::Embedded {
        return Ok(Listing::Not(Held {
            provider: Some(provider_name),
            note: Some(
                "not consulted: the embedded DNS server's records live in its serve process; ask it with dig @ADDRESS -p PORT NAME".to_owned(),
            ),
            ..Held::default()
        }));
    }
    let zones = super::provider::zones(&args.provider_flags);
    if zones.is_empty() {
        bail!("--provider {provider_name} needs --zone ZONE: the zones to list");
    }
    let provider = super::provider::reader_writer(
        kind,
        &args.provider_flags,
        args.kubeconfig.as_deref(),
        args.context.as_deref(),
        &zones,
    )
    .await?;
    let listed = provider.records().await.with_context(|| {
        format!(
            "listing the records of {} ({provider_name})",
            zones.join(", ")
        )
    })?;
    Ok(Listing::Listed {
        provider: provider_name,
        zones,
        listed,
    })
}

/// What the provider holds for the names explained, and whether the records of this owner id
/// are the ones the sync loop would write.
fn held(args: &ExplainArgs, listing: Listing, explained: &Explained) -> Result<Held> {
    let (provider_name, zones, listed) = match listing {
        Listing::Not(held) => return Ok(held),
        Listing::Listed {
            provider,
            zones,
            listed,
        } => (provider, zones, listed),
    };
    let (names, wanted) = explained.names_and_records();
    let outside: Vec<&str> = names
        .iter()
        .map(String::as_str)
        .filter(|name| {
            !zones
                .iter()
                .any(|zone| in_zone(name.trim_start_matches("*."), zone))
        })
        .collect();
    let registry = super::provider::registry(&args.provider_flags)?;
    let owners = OwnershipIndex::from_records(&listed, &registry);
    let held: Vec<&Endpoint> = listed
        .iter()
        .filter(|e| names.contains(&e.dns_name))
        .filter(|e| {
            matches!(
                e.record_type,
                RecordType::A | RecordType::AAAA | RecordType::CNAME
            )
        })
        .collect();
    let wanted = crate::sync::desired::endpoints(&Outcome {
        records: wanted,
        violations: Vec::new(),
    });
    // Records another owner holds, or nobody, are not ours to write (the zone view refuses the
    // claims on them): only ours count for being in sync.
    let ours = |h: &&&Endpoint| {
        owners
            .owner_of(&h.dns_name, h.record_type)
            .is_some_and(|o| o.owner == registry.owner_id)
    };
    let comparable: Vec<&&Endpoint> = held.iter().filter(ours).collect();
    let in_sync = wanted.len() == comparable.len()
        && wanted.iter().all(|w| {
            comparable.iter().any(|h| {
                h.key() == w.key()
                    && h.targets == w.targets
                    && w.ttl.is_none_or(|ttl| h.ttl.unwrap_or(DEFAULT_TTL) == ttl)
            })
        });
    let mut records: Vec<HeldRecord> = held
        .into_iter()
        .map(|e| {
            let owner = owners.owner_of(&e.dns_name, e.record_type);
            HeldRecord {
                dns_name: e.dns_name.clone(),
                record_type: e.record_type,
                targets: e.targets.iter().cloned().collect(),
                ttl: e.ttl,
                owner: owner.map(|o| o.owner.to_owned()),
                resource: owner.and_then(|o| o.resource.map(str::to_owned)),
            }
        })
        .collect();
    records.sort_by(|a, b| (&a.dns_name, a.record_type).cmp(&(&b.dns_name, b.record_type)));
    Ok(Held {
        consulted: true,
        provider: Some(provider_name),
        note: (!outside.is_empty()).then(|| {
            format!(
                "outside the zones listed ({}): {}",
                zones.join(", "),
                outside.join(", ")
            )
        }),
        zones,
        records,
        in_sync: Some(in_sync),
    })
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
        let owner = match (&record.owner, &record.resource) {
            (Some(owner), Some(resource)) => format!("owner {owner}, {resource}"),
            (Some(owner), None) => format!("owner {owner}"),
            _ => "no ownership record: not gateway-dns's".to_owned(),
        };
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_read_like_kubectl() {
        let route = |text: &str| parse_target(text, "apps").unwrap();
        let expected = Target::Route {
            kind: ObjectKind::HTTPRoute,
            namespace: "apps".to_owned(),
            name: "web".to_owned(),
        };
        assert_eq!(route("httproute/web"), expected);
        assert_eq!(route("httproutes/web"), expected);
        assert_eq!(route("HTTPRoute/apps/web"), expected);
        assert_eq!(route("httproute.gateway.networking.k8s.io/web"), expected);
        assert_eq!(
            route("App.Example.COM."),
            Target::Name("app.example.com".to_owned())
        );
        let err = |text: &str| parse_target(text, "apps").unwrap_err().to_string();
        assert!(err("gateway/gw").contains("Gateway is not a route kind"));
        assert!(err("ingress/web").contains("unknown kind \"ingress\""));
        assert!(err("bad_name.example.com").contains("is not a valid DNS name"));
        assert!(err("a/b/c/d").contains("neither a DNS name"));
    }
}
