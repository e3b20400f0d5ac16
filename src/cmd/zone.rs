//! `gateway-dns zone`: the managed zones' owners (`owners`), and the release of a dead owner's
//! names (`release`), read from and written through the DNS provider (docs/multi-cluster.md).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use serde::Serialize;

use super::{EXIT_DENIED, EXIT_INPUT, EXIT_OK};
use crate::cli::{
    ExplainOutput, ProviderArgs, ProviderKind, ZoneCommand, ZoneOwnersArgs, ZoneReleaseArgs,
};
use crate::dns::registry::heartbeat::{self, Heartbeat};
use crate::dns::registry::{OwnershipIndex, TxtRegistry};
use crate::dns::{Changes, Endpoint, Provider};
use crate::model::RecordType;
use crate::model::format_rfc3339;

/// Runs a `zone` subcommand; returns the process exit code.
pub fn run(command: &ZoneCommand) -> u8 {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("gateway-dns zone: starting the async runtime: {err}");
            return EXIT_INPUT;
        }
    };
    let result = runtime.block_on(async {
        match command {
            ZoneCommand::Owners(args) => owners(args).await,
            ZoneCommand::Release(args) => release(args).await,
        }
    });
    match result {
        Ok((text, code)) => {
            print!("{text}");
            code
        }
        Err(err) => {
            eprintln!("gateway-dns zone: {}", super::error_chain(err.as_ref()));
            EXIT_INPUT
        }
    }
}

/// The provider, its zones and the registry the flags describe; `cluster` is the kubeconfig
/// and context --provider dnsendpoint reads with (None, None: as kubectl finds one).
async fn open(
    kind: ProviderKind,
    flags: &ProviderArgs,
    cluster: (Option<&Path>, Option<&str>),
) -> Result<(Arc<dyn Provider>, Vec<String>, TxtRegistry)> {
    let zones = super::provider::zones(flags);
    if zones.is_empty() {
        bail!("--zone ZONE: the zones to read");
    }
    let (kubeconfig, context) = cluster;
    let provider = super::provider::reader_writer(kind, flags, kubeconfig, context, &zones).await?;
    Ok((provider, zones, super::provider::registry(flags)?))
}

/// Every name of the listing by its owner id (None: an unmanaged record), with the records
/// (address records and their ownership records) each holds there.
struct Holdings {
    by_owner: BTreeMap<Option<String>, BTreeMap<String, Vec<Endpoint>>>,
}

fn holdings(listed: &[Endpoint], registry: &TxtRegistry) -> Holdings {
    let index = OwnershipIndex::from_records(listed, registry);
    let mut by_owner: BTreeMap<Option<String>, BTreeMap<String, Vec<Endpoint>>> = BTreeMap::new();
    // Looked up once per address record: a map, not a walk of the listing each time.
    let txt_records: std::collections::HashMap<&str, &Endpoint> = listed
        .iter()
        .filter(|r| r.record_type == RecordType::TXT)
        .map(|r| (r.dns_name.as_str(), r))
        .collect();
    let txt = |name: &str| txt_records.get(name).copied();
    for record in listed.iter().filter(|r| {
        matches!(
            r.record_type,
            RecordType::A | RecordType::AAAA | RecordType::CNAME
        )
    }) {
        let owner = index.owner_of(&record.dns_name, record.record_type);
        // A name shared across clusters is held by each of its owners, whose part is not
        // whole records (`zone release` removes it through the sync loop's own edit).
        if let Some(owner) = owner
            && owner.shared
        {
            let values = index.registry_values(owner.txt_name);
            if values.iter().all(|(_, labels)| labels.shared.is_some()) {
                for (_, labels) in values {
                    by_owner
                        .entry(Some(labels.owner.to_string()))
                        .or_default()
                        .entry(record.dns_name.clone())
                        .or_default();
                }
                continue;
            }
        }
        let records = by_owner
            .entry(owner.map(|o| o.owner.to_owned()))
            .or_default()
            .entry(record.dns_name.clone())
            .or_default();
        records.push(record.clone());
        // The ownership record, once per name, and only when it holds nothing but ownership
        // values (another owner's value beside it keeps it).
        if let Some(owner) = owner
            && let Some(ownership) = txt(owner.txt_name)
            && index.is_registry_record(ownership)
            && ownership.targets.len() == 1
            && !records.contains(ownership)
        {
            records.push(ownership.clone());
        }
    }
    Holdings { by_owner }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct OwnerView {
    /// The owner id; null for records without an ownership record.
    owner: Option<String>,
    names: Vec<String>,
    heartbeat: Option<HeartbeatView>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct HeartbeatView {
    time: Option<String>,
    age_seconds: i64,
    instance: String,
}

fn heartbeat_view(beat: &Heartbeat) -> HeartbeatView {
    HeartbeatView {
        time: format_rfc3339(beat.time),
        age_seconds: heartbeat::unix_now() - beat.time,
        instance: beat.instance.clone(),
    }
}

async fn owners(args: &ZoneOwnersArgs) -> Result<(String, u8)> {
    let cluster = (args.kubeconfig.as_deref(), args.context.as_deref());
    let (provider, zones, registry) = open(args.provider, &args.provider_flags, cluster).await?;
    let listed = provider
        .records()
        .await
        .with_context(|| format!("listing {}", zones.join(", ")))?;
    let holdings = holdings(&listed, &registry);
    let beats = heartbeat::latest(&listed);
    let mut seen: BTreeSet<Option<String>> = BTreeSet::new();
    let mut views: Vec<OwnerView> = Vec::new();
    for (owner, names) in &holdings.by_owner {
        seen.insert(owner.clone());
        views.push(OwnerView {
            owner: owner.clone(),
            names: names.keys().cloned().collect(),
            heartbeat: owner
                .as_ref()
                .and_then(|o| beats.get(o))
                .map(heartbeat_view),
        });
    }
    // Owners alive but holding nothing yet.
    for (owner, beat) in &beats {
        if !seen.contains(&Some(owner.clone())) {
            views.push(OwnerView {
                owner: Some(owner.clone()),
                names: Vec::new(),
                heartbeat: Some(heartbeat_view(beat)),
            });
        }
    }
    views.sort_by(|a, b| a.owner.cmp(&b.owner));
    let text = match args.output {
        ExplainOutput::Json => {
            serde_json::to_string_pretty(&serde_json::json!({ "zones": zones, "owners": views }))
                .context("writing JSON")?
                + "\n"
        }
        ExplainOutput::Text => {
            let mut out = format!("Owners in {}:\n", zones.join(", "));
            for view in &views {
                let who = view
                    .owner
                    .as_deref()
                    .unwrap_or("(unmanaged: no ownership record)");
                let beat = match &view.heartbeat {
                    Some(b) => format!(
                        "last heartbeat {} ({}s ago, instance {})",
                        b.time.as_deref().unwrap_or("?"),
                        b.age_seconds,
                        b.instance
                    ),
                    None => "no heartbeat".to_owned(),
                };
                let _ = writeln!(out, "  {who}: {} names; {beat}", view.names.len());
                for name in &view.names {
                    let _ = writeln!(out, "    {name}");
                }
            }
            out
        }
    };
    Ok((text, EXIT_OK))
}

async fn release(args: &ZoneReleaseArgs) -> Result<(String, u8)> {
    let (provider, zones, registry) =
        open(args.provider, &args.provider_flags, (None, None)).await?;
    let listed = provider
        .records()
        .await
        .with_context(|| format!("listing {}", zones.join(", ")))?;
    let beats = heartbeat::latest(&listed);
    let dead_after = i64::try_from(args.dead_after.as_secs()).unwrap_or(i64::MAX);
    let refusal = match beats.get(&args.owner) {
        Some(beat) if heartbeat::unix_now() - beat.time < dead_after => Some(format!(
            "owner \"{}\" is alive: its last heartbeat is {}s old (instance {}), younger than \
             --dead-after {}s; stop it first, or --force",
            args.owner,
            heartbeat::unix_now() - beat.time,
            beat.instance,
            dead_after
        )),
        Some(_) => None,
        None => Some(format!(
            "owner \"{}\" writes no heartbeat (an external-dns, or a gateway-dns that writes \
             none): nothing says it is gone; --force to release its names anyway",
            args.owner
        )),
    };
    if let Some(refusal) = refusal
        && !args.force
    {
        return Ok((format!("refused: {refusal}\n"), EXIT_DENIED));
    }
    let holdings = holdings(&listed, &registry);
    let Some(held) = holdings.by_owner.get(&Some(args.owner.clone())) else {
        return Ok((
            format!(
                "owner \"{}\" holds no name in {}\n",
                args.owner,
                zones.join(", ")
            ),
            EXIT_DENIED,
        ));
    };
    let wanted: BTreeSet<String> = args
        .name
        .iter()
        .map(|n| crate::model::dns_name::canonical(n).into_owned())
        .collect();
    let missing: Vec<&String> = wanted.iter().filter(|n| !held.contains_key(*n)).collect();
    if !missing.is_empty() {
        let missing: Vec<&str> = missing.iter().map(|s| s.as_str()).collect();
        return Ok((
            format!(
                "owner \"{}\" does not hold {}; nothing removed\n",
                args.owner,
                missing.join(", ")
            ),
            EXIT_DENIED,
        ));
    }
    let chosen: Vec<(&String, &Vec<Endpoint>)> = held
        .iter()
        .filter(|(name, _)| wanted.is_empty() || wanted.contains(*name))
        .collect();
    // Records first, their ownership records after them.
    let (records, ownership): (Vec<Endpoint>, Vec<Endpoint>) = chosen
        .iter()
        .flat_map(|(_, records)| records.iter().cloned())
        .partition(|r| r.record_type != RecordType::TXT);
    let mut out = String::new();
    let verb = if args.dry_run {
        "would remove"
    } else {
        "removed"
    };
    for record in records.iter().chain(&ownership) {
        let _ = writeln!(out, "{verb} {record}");
    }
    // The owner's part of names shared across clusters: its targets (none another owner lists)
    // and its ownership value, as its own sync loop would remove them.
    let mut as_owner = registry.clone();
    as_owner.owner_id.clone_from(&args.owner);
    let shared: Vec<crate::dns::SharedEdit> =
        crate::sync::plan_with(&[], &listed, &as_owner, crate::sync::Policy::Sync, &zones)
            .changes
            .shared
            .into_iter()
            .filter(|edit| chosen.iter().any(|(name, _)| **name == edit.dns_name))
            .collect();
    for edit in &shared {
        let _ = writeln!(
            out,
            "{verb} owner \"{}\"'s part of shared {} {}: {} and its ownership value",
            args.owner,
            edit.dns_name,
            edit.record_type,
            if edit.remove.is_empty() {
                "no target (the others list them too)".to_owned()
            } else {
                edit.remove.join(", ")
            }
        );
    }
    if !args.dry_run {
        let changes = Changes {
            delete: records.into_iter().chain(ownership).collect(),
            shared,
            ..Changes::default()
        };
        let changes = if provider.edits_records() {
            changes
        } else {
            changes.whole_rrsets()
        };
        provider
            .apply(&changes)
            .await
            .with_context(|| format!("removing owner \"{}\"'s records", args.owner))?;
    }
    let _ = writeln!(
        out,
        "{} {} names of owner \"{}\"",
        if args.dry_run {
            "would release"
        } else {
            "released"
        },
        chosen.len(),
        args.owner
    );
    Ok((out, EXIT_OK))
}
