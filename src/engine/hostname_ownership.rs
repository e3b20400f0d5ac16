//! Namespaces and hostnames (ARCHITECTURE.md, "Namespaces and hostnames"): the names a namespace
//! may publish (its allowed-hostnames annotation), and, under `--hostname-ownership namespace`,
//! the namespace a name belongs to (that of its oldest route) and the namespaces it shares it with.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::str::FromStr;

use super::claimants::{Claimant, precedence};
use super::hostname;
use super::world::{Claim, NameSource, RawFinding, World};
use super::{Config, ConfigError, Reason, concat};
use crate::model::dns_name::parse_hostname;
use crate::model::{Name, Namespace, Route};

/// Namespace annotation: the hostnames (exact, or `*.suffix`) routes in the namespace may publish.
pub const ALLOWED_HOSTNAMES_ANNOTATION: &str = "gateway-dns.io/allowed-hostnames";
/// Namespace annotation: the other namespaces that may share the names this namespace owns.
pub const SHARE_HOSTNAMES_ANNOTATION: &str = "gateway-dns.io/share-hostnames-with";

/// Who may claim a name another namespace claimed first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HostnameOwnership {
    /// Anyone: cross-namespace sharing is legal in the Gateway API.
    #[default]
    Off,
    /// Only the owner namespace and the namespaces it shares with.
    Namespace,
}

impl FromStr for HostnameOwnership {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<HostnameOwnership, ConfigError> {
        match s {
            "off" => Ok(HostnameOwnership::Off),
            "namespace" => Ok(HostnameOwnership::Namespace),
            _ => Err(ConfigError::UnknownValue {
                what: "hostname ownership",
                value: s.to_owned(),
                expected: "off, namespace",
            }),
        }
    }
}

/// The entries of a comma-separated annotation value, trimmed, empty ones left out.
fn list(value: &str) -> impl Iterator<Item = &str> {
    value
        .split(',')
        .map(str::trim)
        .filter(|entry| !entry.is_empty())
}

/// The patterns of a Namespace's allowed-hostnames annotation in canonical form (None: no
/// annotation). An entry that is no valid hostname covers nothing.
pub fn allowed_hostnames(namespace: &Namespace) -> Option<Vec<Cow<'_, str>>> {
    let value = namespace
        .meta
        .annotations
        .get(ALLOWED_HOSTNAMES_ANNOTATION)?;
    Some(
        list(value)
            .filter_map(|entry| parse_hostname(entry).ok())
            .collect(),
    )
}

/// Does an allowed pattern cover a route's name (both canonical)? An exact pattern covers only
/// itself and `*.s` covers the names under `s`; a wildcard name is covered only by an equal or
/// broader wildcard.
pub fn allowed_pattern_covers(pattern: &str, name: &str) -> bool {
    match name.strip_prefix("*.") {
        Some(suffix) => pattern
            .strip_prefix("*.")
            .is_some_and(|allowed| allowed == suffix || hostname::matches(pattern, suffix)),
        None => hostname::matches(pattern, name),
    }
}

/// Removes the claims on names the route's namespace may not publish, with one
/// `HostnameNotAllowedForNamespace` finding per name.
pub(crate) fn keep_allowed_claims<W: World>(
    world: &W,
    cfg: &Config,
    route: &Route,
    claims: &mut Vec<Claim>,
    findings: &mut Vec<RawFinding>,
) {
    let namespace_name = route.meta.namespace();
    let allowed = world.namespace(namespace_name).and_then(allowed_hostnames);
    if allowed.is_none() && !cfg.require_allowed_hostnames {
        return;
    }
    let patterns = allowed.as_deref().unwrap_or_default();
    let mut refused: Vec<(Name, NameSource)> = Vec::new();
    claims.retain(|claim| {
        let covered = patterns
            .iter()
            .any(|pattern| allowed_pattern_covers(pattern, &claim.name));
        if !covered {
            refused.push((claim.name.clone(), claim.source));
        }
        covered
    });
    refused.sort();
    refused.dedup_by(|a, b| a.0 == b.0);
    for (name, source) in refused {
        let message = match &allowed {
            Some(patterns) => {
                let patterns: Vec<&str> = patterns.iter().map(|p| &**p).collect();
                concat(&[
                    &name,
                    " is not among the hostnames namespace ",
                    namespace_name,
                    " may publish (",
                    &patterns.join(", "),
                    "), so it is not published; use one of them, or ask the platform team to add it to the Namespace annotation ",
                    ALLOWED_HOSTNAMES_ANNOTATION,
                ])
            }
            None => concat(&[
                "namespace ",
                namespace_name,
                " has no annotation ",
                ALLOWED_HOSTNAMES_ANNOTATION,
                " and this installation requires one, so ",
                &name,
                " is not published; ask the platform team to annotate the Namespace",
            ]),
        };
        findings.push(RawFinding {
            reason: Reason::HostnameNotAllowedForNamespace,
            hostname: Some((*name).into()),
            field: source.field(world.config()).into(),
            message: message.into(),
        });
    }
}

/// May routes in `namespace` claim a name owned by `owner`?
pub fn shares<W: World>(world: &W, owner: &str, namespace: &str) -> bool {
    owner == namespace
        || world
            .namespace(owner)
            .and_then(|ns| ns.meta.annotations.get(SHARE_HOSTNAMES_ANNOTATION))
            .is_some_and(|value| list(value).any(|entry| entry == namespace))
}

/// Under `--hostname-ownership namespace`, takes from a name's claims (in precedence order) those
/// outside its owner namespace (that of the first claim) and the namespaces it shares with, each
/// with its message. Off, nothing is taken.
pub fn take_from_other_namespaces<'a, W: World>(
    world: &W,
    name: &str,
    claims: &mut Vec<Claimant<'a>>,
) -> Vec<(Claimant<'a>, String)> {
    let Some(owner) = claims.first().copied() else {
        return Vec::new();
    };
    if world.config().hostname_ownership == HostnameOwnership::Off {
        return Vec::new();
    }
    let owner_namespace = owner.route.meta.namespace();
    let mut taken = Vec::new();
    claims.retain(|claim| {
        let namespace = claim.route.meta.namespace();
        let kept = shares(world, owner_namespace, namespace);
        if !kept {
            taken.push((*claim, owned_message(name, &owner, namespace)));
        }
        kept
    });
    taken
}

/// For a route under review claiming `name`: under `--hostname-ownership namespace`, removes
/// from `incumbents` (in precedence order, without the route) the claims outside the owner's
/// namespaces, and returns the owner when the route's own namespace may not claim the name.
/// The owner is the first incumbent, unless the route's stored version already claims the name
/// and precedes it: a name the route already had keeps the route's age, a name it adds is
/// judged as a newcomer's, so an UPDATE never takes a name from its owner.
pub fn owner_refusing<'a, W: World>(
    world: &'a W,
    route: &Route,
    name: &str,
    incumbents: &mut Vec<Claimant<'a>>,
) -> Option<Claimant<'a>> {
    if world.config().hostname_ownership == HostnameOwnership::Off {
        return None;
    }
    let first_incumbent = incumbents.first().copied()?;
    let stored = world.route(&route.meta.key).and_then(|entry| {
        entry.eval.claims_on(name).first().map(|claim| Claimant {
            route: &entry.route,
            claim,
            ttl: entry.eval.ttl.or(claim.origin.ttl),
        })
    });
    let owner = match stored {
        Some(stored) if precedence(&stored, &first_incumbent) == Ordering::Less => stored,
        _ => first_incumbent,
    };
    let owner_namespace = owner.route.meta.namespace();
    incumbents.retain(|claim| shares(world, owner_namespace, claim.route.meta.namespace()));
    (!shares(world, owner_namespace, route.meta.namespace())).then_some(owner)
}

/// The one-line message for a route in `namespace` that claims `name`, owned through `owner`.
pub fn owned_message(name: &str, owner: &Claimant, namespace: &str) -> String {
    let route = owner.route;
    let owner_namespace = route.meta.namespace();
    concat(&[
        name,
        " belongs to namespace ",
        owner_namespace,
        ", where ",
        route.kind().kind(),
        " ",
        owner_namespace,
        "/",
        route.meta.name(),
        " claimed it first; use another hostname, or ask the owners of ",
        owner_namespace,
        " to add ",
        namespace,
        " to its Namespace annotation ",
        SHARE_HOSTNAMES_ANNOTATION,
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_cover_exact_names_and_narrower_wildcards() {
        assert!(allowed_pattern_covers(
            "shop.example.com",
            "shop.example.com"
        ));
        assert!(!allowed_pattern_covers(
            "shop.example.com",
            "a.shop.example.com"
        ));
        assert!(allowed_pattern_covers(
            "*.shop.example.com",
            "a.shop.example.com"
        ));
        assert!(allowed_pattern_covers(
            "*.shop.example.com",
            "a.b.shop.example.com"
        ));
        assert!(!allowed_pattern_covers(
            "*.shop.example.com",
            "shop.example.com"
        ));
        assert!(allowed_pattern_covers(
            "*.shop.example.com",
            "*.shop.example.com"
        ));
        assert!(allowed_pattern_covers(
            "*.shop.example.com",
            "*.a.shop.example.com"
        ));
        assert!(!allowed_pattern_covers(
            "*.a.shop.example.com",
            "*.shop.example.com"
        ));
        assert!(!allowed_pattern_covers(
            "a.shop.example.com",
            "*.shop.example.com"
        ));
        assert!(!allowed_pattern_covers(
            "*.shop.example.com",
            "*.example.com"
        ));
    }

    #[test]
    fn ownership_values() {
        assert_eq!("off".parse(), Ok(HostnameOwnership::Off));
        assert_eq!("namespace".parse(), Ok(HostnameOwnership::Namespace));
        assert!("strict".parse::<HostnameOwnership>().is_err());
    }
}
