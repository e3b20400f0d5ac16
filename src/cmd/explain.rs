//! `gateway-dns explain`: why a DNS name resolves (or does not) and to what, or what becomes of
//! each name of a route. The explanation is the engine's (`engine::explain`); this file reads
//! the objects (files as `check` reads them, or the cluster), lists the DNS provider when asked
//! (read-only), and prints.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::sync::Arc;

use anyhow::{Context, Result, anyhow, bail};
use k8s_openapi::api::coordination::v1::Lease;

use super::{EXIT_DENIED, EXIT_INPUT, EXIT_OK};
use crate::cli::{ExplainArgs, ExplainOutput, ProviderKind};
use crate::dns::registry::OwnershipIndex;
use crate::dns::{DEFAULT_TTL, Endpoint, in_zone};
use crate::engine::Outcome;
use crate::engine::Record;
use crate::engine::explain::{explain_name, explain_route, parse_name};
use crate::engine::explain_text::{
    Explained, Held, HeldHeartbeat, HeldRecord, SecondaryHeld, SecondaryRecord, to_json, to_text,
};
use crate::engine::health::{FAILING_TARGETS_ANNOTATION, TargetHealth};
use crate::engine::zone::ZoneView;
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
    let (live, failing) = if read_cluster {
        runtime.block_on(read_live_objects(
            args.kubeconfig.as_deref(),
            args.context.as_deref(),
            (&args.leader_election_namespace, &args.lease_name),
        ))?
    } else {
        (Vec::new(), TargetHealth::new())
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
    let snapshot = Snapshot::from_objects(cfg, world.into_values())
        .with_zone_view(zone)
        .with_target_health(failing);
    let explained = match target {
        Target::Name(name) => Explained::Name(explain_name(&snapshot, &name)),
        Target::Route {
            kind,
            namespace,
            name,
        } => Explained::Route(explain_route(&snapshot, kind, &namespace, &name)?),
    };
    let mut provider = held(args, listing, &explained)?;
    if !args.embedded_secondaries.is_empty() {
        let (names, mut wanted) = explained.names_and_records();
        // A name a wildcard answers for is answered with the wildcard's records, under its own
        // name.
        if let Explained::Name(name) = &explained
            && name.records.is_empty()
        {
            for cover in &name.covered_by {
                wanted.extend(cover.records.iter().map(|record| Record {
                    dns_name: name.name.clone(),
                    ..record.clone()
                }));
            }
        }
        provider.secondaries =
            runtime.block_on(ask_secondaries(&args.embedded_secondaries, &names, &wanted));
    }
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

/// The cluster's objects, and the failing targets the Lease holder keeps on the Lease.
async fn read_live_objects(
    kubeconfig: Option<&std::path::Path>,
    context: Option<&str>,
    lease: (&str, &str),
) -> Result<(Vec<Object>, TargetHealth)> {
    let (objects, client) = kube::list_cluster_with_client(kubeconfig, context)
        .await
        .context("connecting to the cluster (pass --manifests PATH to explain files offline)")?;
    Ok((objects, failing_targets(&client, lease).await))
}

/// The failing targets on serve's Lease `(namespace, name)`; none when there is no such Lease
/// (no election, or health checks that never ran), said on stderr when it cannot be read.
async fn failing_targets(client: &::kube::Client, (namespace, name): (&str, &str)) -> TargetHealth {
    let leases: ::kube::Api<Lease> = ::kube::Api::namespaced(client.clone(), namespace);
    let lease = match leases.get_opt(name).await {
        Ok(lease) => lease,
        Err(error) => {
            eprintln!(
                "gateway-dns explain: the Lease {namespace}/{name} cannot be read ({error}): the health checks' failing targets are not shown"
            );
            return TargetHealth::new();
        }
    };
    // No such Lease is no news: no election, or health checks that never ran. The flags' help
    // says to name serve's Lease when it is not at the defaults.
    let text = lease
        .and_then(|l| l.metadata.annotations)
        .and_then(|mut a| a.remove(FAILING_TARGETS_ANNOTATION))
        .unwrap_or_default();
    TargetHealth::from_annotation(&text).unwrap_or_else(|error| {
        eprintln!(
            "gateway-dns explain: the failing targets on the Lease {namespace}/{name} cannot be read ({error})"
        );
        TargetHealth::new()
    })
}

/// What each secondary answers for `names`, and whether it is what the sync loop would write
/// (`wanted`): the same targets for every name and type.
async fn ask_secondaries(
    secondaries: &[std::net::SocketAddr],
    names: &std::collections::BTreeSet<String>,
    wanted: &[Record],
) -> Vec<SecondaryHeld> {
    let mut expected: Vec<SecondaryRecord> = wanted
        .iter()
        .flat_map(|record| {
            record.targets.iter().map(|target| SecondaryRecord {
                dns_name: record.dns_name.clone(),
                record_type: record.record_type,
                target: match record.record_type {
                    RecordType::CNAME => target.trim_end_matches('.').to_ascii_lowercase(),
                    _ => target
                        .parse::<std::net::IpAddr>()
                        .map_or_else(|_| target.clone(), |ip| ip.to_string()),
                },
            })
        })
        .collect();
    expected.sort();
    expected.dedup();
    let expected = &expected;
    let asked =
        secondaries.iter().map(|&secondary| async move {
            let mut records = Vec::new();
            let mut error = None;
            for name in names {
                match crate::authority::address_records(secondary, name).await {
                    Ok(found) => records.extend(found.into_iter().map(|(record_type, target)| {
                        SecondaryRecord {
                            dns_name: name.clone(),
                            record_type,
                            target,
                        }
                    })),
                    Err(e) => {
                        error = Some(e);
                        break;
                    }
                }
            }
            records.sort();
            SecondaryHeld {
                secondary: secondary.to_string(),
                current: error.is_none() && records == *expected,
                records,
                error,
            }
        });
    futures::future::join_all(asked).await
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
    let provider_name = kind.name();
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
    // The owners of a shared name's record: every value at its ownership name is shared.
    let shared_by = |e: &Endpoint| -> Vec<String> {
        let Some(txt_name) = owners.owning_txt(&e.dns_name, e.record_type) else {
            return Vec::new();
        };
        let values = owners.registry_values(txt_name);
        if values.is_empty() || values.iter().any(|(_, l)| l.shared.is_none()) {
            return Vec::new();
        }
        let mut by: Vec<String> = values.iter().map(|(_, l)| l.owner.to_string()).collect();
        by.sort();
        by.dedup();
        by
    };
    // Of a shared name, ours is in sync when our targets are among the name's.
    let in_sync = wanted.len() == comparable.len()
        && wanted.iter().all(|w| {
            comparable.iter().any(|h| {
                let targets = if shared_by(h).is_empty() {
                    h.targets == w.targets
                } else {
                    w.targets.iter().all(|t| h.targets.contains(t))
                };
                h.key() == w.key()
                    && targets
                    && w.ttl.is_none_or(|ttl| h.ttl.unwrap_or(DEFAULT_TTL) == ttl)
            })
        });
    let beats = crate::dns::registry::heartbeat::latest(&listed);
    let now = crate::dns::registry::heartbeat::unix_now();
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
                heartbeat: owner
                    .and_then(|o| beats.get(o.owner))
                    .map(|beat| HeldHeartbeat {
                        time: crate::model::format_rfc3339(beat.time).unwrap_or_default(),
                        age_seconds: now - beat.time,
                        instance: beat.instance.clone(),
                    }),
                shared_by: shared_by(e),
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
        secondaries: Vec::new(),
    })
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
