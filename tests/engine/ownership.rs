//! Namespaces and hostnames (ARCHITECTURE.md, "Namespaces and hostnames"): with
//! `--hostname-ownership namespace` a name belongs to the namespace of its oldest route and others
//! claim it only with that Namespace's consent; a Namespace's allowed-hostnames annotation limits
//! what its routes publish. Settled over whole worlds (what `check` and the sync loop see) and
//! decided as admission requests (what the webhook answers), so both are held to one rule.

use std::sync::Arc;

use gateway_dns::engine::admission::{Decision, decide};
use gateway_dns::engine::hostname_ownership::{
    ALLOWED_HOSTNAMES_ANNOTATION, SHARE_HOSTNAMES_ANNOTATION,
};
use gateway_dns::engine::settle::settle_all;
use gateway_dns::engine::{Action, Config, HostnameOwnership, Outcome, Reason};
use gateway_dns::index::Index;
use gateway_dns::model::Object;
use serde_json::{Value, json};

use crate::objects::*;

fn owned() -> Config {
    Config {
        hostname_ownership: HostnameOwnership::Namespace,
        ..Config::default()
    }
}

fn team(name: &str) -> Value {
    namespace(name, json!({}))
}

fn sharing(name: &str, with: &str) -> Value {
    annotated(team(name), SHARE_HOSTNAMES_ANNOTATION, with)
}

fn allowing(name: &str, patterns: &str) -> Value {
    annotated(team(name), ALLOWED_HOSTNAMES_ANNOTATION, patterns)
}

fn route_at(ns: &str, name: &str, hostnames: &[&str], at: &str) -> Value {
    created(http_route(ns, name, on("gw1"), hostnames), at)
}

/// `infra/gw1` (any hostname, routes from every namespace) and the given objects.
fn world(objects: &[Value]) -> Vec<Value> {
    [infra(), simple_gateway("infra", "gw1", None, &[GW1])]
        .into_iter()
        .chain(objects.iter().cloned())
        .collect()
}

/// The routes each record of `name` is published for.
fn publishers(outcome: &Outcome, name: &str) -> Vec<String> {
    outcome
        .records
        .iter()
        .filter(|r| r.dns_name == name)
        .flat_map(|r| r.routes.clone())
        .collect()
}

#[test]
fn the_oldest_routes_namespace_owns_a_name_even_on_the_same_gateway() {
    let objects = world(&[
        team("team-a"),
        team("team-b"),
        route_at(
            "team-b",
            "late",
            &["shop.example.com"],
            "2025-02-01T00:00:00Z",
        ),
        route_at(
            "team-a",
            "site",
            &["shop.example.com"],
            "2025-01-01T00:00:00Z",
        ),
    ]);
    let outcome = settle(owned(), &objects);
    let v = only_violation(&outcome, "HTTPRoute/team-b/late");
    assert_finding(
        v,
        Reason::HostnameOwnedByOtherNamespace,
        Action::Deny,
        "spec.hostnames[0]",
        &[
            "shop.example.com",
            "namespace team-a",
            "HTTPRoute team-a/site",
            SHARE_HOSTNAMES_ANNOTATION,
            "team-b",
        ],
    );
    assert_eq!(v.hostname.as_deref(), Some("shop.example.com"));
    assert!(violations_of(&outcome, "HTTPRoute/team-a/site").is_empty());
    assert_eq!(
        publishers(&outcome, "shop.example.com"),
        ["HTTPRoute/team-a/site"]
    );
    // Off (the default), the same world merges both routes onto the name.
    let off = settle_default(&objects);
    assert!(off.violations.is_empty(), "{:#?}", off.violations);
    assert_eq!(
        publishers(&off, "shop.example.com"),
        ["HTTPRoute/team-a/site", "HTTPRoute/team-b/late"]
    );
}

#[test]
fn ownership_ties_break_by_namespace_then_name_and_no_timestamp_is_newest() {
    let same = "2025-01-01T00:00:00Z";
    let outcome = settle(
        owned(),
        &world(&[
            team("alpha"),
            team("beta"),
            route_at("beta", "a", &["x.example.com"], same),
            route_at("alpha", "z", &["x.example.com"], same),
        ]),
    );
    assert_eq!(
        only_violation(&outcome, "HTTPRoute/beta/a").reason,
        Reason::HostnameOwnedByOtherNamespace
    );
    assert!(violations_of(&outcome, "HTTPRoute/alpha/z").is_empty());
    // A route without a creationTimestamp (a file written by hand) counts as the newest.
    let outcome = settle(
        owned(),
        &world(&[
            team("alpha"),
            team("beta"),
            http_route("alpha", "undated", on("gw1"), &["x.example.com"]),
            route_at("beta", "dated", &["x.example.com"], same),
        ]),
    );
    let v = only_violation(&outcome, "HTTPRoute/alpha/undated");
    assert!(v.message.contains("beta/dated"), "{}", v.message);
    assert_eq!(
        publishers(&outcome, "x.example.com"),
        ["HTTPRoute/beta/dated"]
    );
}

#[test]
fn routes_of_the_owner_namespace_share_freely_and_consent_admits_named_namespaces() {
    let routes = [
        route_at(
            "team-a",
            "one",
            &["shop.example.com"],
            "2025-01-01T00:00:00Z",
        ),
        route_at(
            "team-a",
            "two",
            &["shop.example.com"],
            "2025-01-02T00:00:00Z",
        ),
        route_at("team-b", "b", &["shop.example.com"], "2025-01-03T00:00:00Z"),
        route_at("team-c", "c", &["shop.example.com"], "2025-01-04T00:00:00Z"),
    ];
    let mut objects = world(&routes);
    objects.extend([
        sharing("team-a", " team-b ,team-x"),
        team("team-b"),
        team("team-c"),
    ]);
    let outcome = settle(owned(), &objects);
    assert_eq!(
        outcome
            .violations
            .iter()
            .map(|v| (v.object.as_str(), v.reason))
            .collect::<Vec<_>>(),
        [("HTTPRoute/team-c/c", Reason::HostnameOwnedByOtherNamespace)]
    );
    assert_eq!(
        publishers(&outcome, "shop.example.com"),
        [
            "HTTPRoute/team-a/one",
            "HTTPRoute/team-a/two",
            "HTTPRoute/team-b/b"
        ]
    );
    // Consent is the owner's to give: team-b's annotation does not let team-c in.
    let mut objects = world(&routes);
    objects.extend([team("team-a"), sharing("team-b", "team-c"), team("team-c")]);
    let outcome = settle(owned(), &objects);
    let refused: Vec<&str> = outcome
        .violations
        .iter()
        .map(|v| v.object.as_str())
        .collect();
    assert_eq!(refused, ["HTTPRoute/team-b/b", "HTTPRoute/team-c/c"]);
}

#[test]
fn ownership_is_per_exact_name_after_normalisation() {
    let outcome = settle(
        owned(),
        &world(&[
            team("team-a"),
            team("team-b"),
            route_at(
                "team-a",
                "site",
                &["*.example.com", "shop.example.com"],
                "2025-01-01T00:00:00Z",
            ),
            route_at(
                "team-b",
                "late",
                &["a.example.com", "Shop.Example.COM."],
                "2025-02-01T00:00:00Z",
            ),
        ]),
    );
    // The wildcard owns only the name `*.example.com`; the spelling of a name changes nothing.
    let v = only_violation(&outcome, "HTTPRoute/team-b/late");
    assert_eq!(v.reason, Reason::HostnameOwnedByOtherNamespace);
    assert_eq!(v.hostname.as_deref(), Some("shop.example.com"));
    assert_eq!(v.field, "spec.hostnames[1]");
    assert_eq!(
        publishers(&outcome, "a.example.com"),
        ["HTTPRoute/team-b/late"]
    );
}

#[test]
fn annotation_hostnames_are_owned_and_allowed_like_spec_hostnames() {
    let late = annotated(
        route_at("team-b", "late", &[], "2025-02-01T00:00:00Z"),
        "external-dns.kubernetes.io/hostname",
        "shop.example.com,b.example.com",
    );
    let outcome = settle(
        owned(),
        &world(&[
            team("team-a"),
            allowing("team-b", "*.example.com"),
            route_at(
                "team-a",
                "site",
                &["shop.example.com"],
                "2025-01-01T00:00:00Z",
            ),
            late.clone(),
        ]),
    );
    let v = only_violation(&outcome, "HTTPRoute/team-b/late");
    assert_finding(
        v,
        Reason::HostnameOwnedByOtherNamespace,
        Action::Deny,
        "metadata.annotations[external-dns.kubernetes.io/hostname]",
        &["shop.example.com", "team-a/site"],
    );
    assert_eq!(
        publishers(&outcome, "b.example.com"),
        ["HTTPRoute/team-b/late"]
    );
    // The same annotation under a namespace that may publish only one of the names.
    let outcome = settle_default(&world(&[allowing("team-b", "b.example.com"), late]));
    let v = only_violation(&outcome, "HTTPRoute/team-b/late");
    assert_finding(
        v,
        Reason::HostnameNotAllowedForNamespace,
        Action::Deny,
        "metadata.annotations[external-dns.kubernetes.io/hostname]",
        &["shop.example.com", "team-b", "b.example.com"],
    );
    assert!(publishers(&outcome, "shop.example.com").is_empty());
}

#[test]
fn allowed_hostnames_cover_exact_names_and_equal_or_narrower_wildcards() {
    let outcome = settle_default(&world(&[
        allowing("shop", "SHOP.example.com., *.shop.example.com, not a name"),
        http_route(
            "shop",
            "r",
            on("gw1"),
            &[
                "shop.example.com",
                "a.b.shop.example.com",
                "*.shop.example.com",
                "*.x.shop.example.com",
                "other.example.com",
                "*.example.com",
                "example.com",
            ],
        ),
    ]));
    let published: Vec<&str> = outcome
        .records
        .iter()
        .map(|r| r.dns_name.as_str())
        .collect();
    assert_eq!(
        published,
        [
            "*.shop.example.com",
            "*.x.shop.example.com",
            "a.b.shop.example.com",
            "shop.example.com"
        ]
    );
    let refused: Vec<(&str, &str, Action)> = violations_of(&outcome, "HTTPRoute/shop/r")
        .iter()
        .map(|v| {
            assert_eq!(v.reason, Reason::HostnameNotAllowedForNamespace);
            assert!(v.message.contains("*.shop.example.com"), "{}", v.message);
            (
                v.hostname.as_deref().unwrap_or(""),
                v.field.as_str(),
                v.action,
            )
        })
        .collect();
    assert_eq!(
        refused,
        [
            ("*.example.com", "spec.hostnames[5]", Action::Deny),
            ("example.com", "spec.hostnames[6]", Action::Deny),
            ("other.example.com", "spec.hostnames[4]", Action::Deny),
        ]
    );
}

#[test]
fn require_allowed_hostnames_leaves_unannotated_namespaces_nothing() {
    let objects = world(&[
        team("free"),
        allowing("shop", "shop.example.com"),
        http_route("free", "r", on("gw1"), &["free.example.com"]),
        http_route("shop", "r", on("gw1"), &["shop.example.com"]),
    ]);
    assert_eq!(settle_default(&objects).records.len(), 2);
    let required = Config {
        require_allowed_hostnames: true,
        ..Config::default()
    };
    let outcome = settle(required, &objects);
    assert_eq!(
        publishers(&outcome, "shop.example.com"),
        ["HTTPRoute/shop/r"]
    );
    assert!(publishers(&outcome, "free.example.com").is_empty());
    assert_finding(
        only_violation(&outcome, "HTTPRoute/free/r"),
        Reason::HostnameNotAllowedForNamespace,
        Action::Deny,
        "spec.hostnames[0]",
        &["namespace free", ALLOWED_HOSTNAMES_ANNOTATION, "requires"],
    );
}

#[test]
fn both_reasons_follow_actions_and_modes() {
    let mut cfg = owned();
    cfg.actions
        .insert(Reason::HostnameOwnedByOtherNamespace, Action::Warn);
    let outcome = settle(
        cfg,
        &world(&[
            team("team-a"),
            labelled(
                allowing("team-b", "shop.example.com"),
                "gateway-dns.io/mode",
                "audit",
            ),
            route_at(
                "team-a",
                "site",
                &["shop.example.com"],
                "2025-01-01T00:00:00Z",
            ),
            route_at(
                "team-b",
                "late",
                &["shop.example.com", "c.example.com"],
                "2025-02-01T00:00:00Z",
            ),
            route_at(
                "team-c",
                "late",
                &["shop.example.com"],
                "2025-02-01T00:00:00Z",
            ),
        ]),
    );
    let actions: Vec<(&str, Reason, Action)> = outcome
        .violations
        .iter()
        .map(|v| (v.object.as_str(), v.reason, v.action))
        .collect();
    assert_eq!(
        actions,
        [
            (
                "HTTPRoute/team-b/late",
                Reason::HostnameOwnedByOtherNamespace,
                Action::Audit
            ),
            (
                "HTTPRoute/team-b/late",
                Reason::HostnameNotAllowedForNamespace,
                Action::Audit
            ),
            (
                "HTTPRoute/team-c/late",
                Reason::HostnameOwnedByOtherNamespace,
                Action::Warn
            ),
        ]
    );
}

// ---------------------------------------------------------------- admission (the webhook's view)

/// An object under review, with the object it replaces on UPDATE.
struct Review {
    object: Object,
    old: Option<Object>,
}

fn review(operation: &str, object: &Value, old: Option<&Value>) -> Review {
    Review {
        object: decode(object),
        old: old.filter(|_| operation == "UPDATE").map(decode),
    }
}

fn decided(cfg: Config, objects: &[Value], review: &Review) -> Decision {
    let index = Index::with_config(Arc::new(cfg));
    index.replace_all(decode_all(objects));
    index.read(|snapshot| decide(snapshot, &review.object, review.old.as_ref()))
}

fn reasons(decision: &Decision) -> Vec<(Reason, Option<&str>, Action)> {
    decision
        .findings
        .iter()
        .map(|v| (v.reason, v.hostname.as_deref(), v.action))
        .collect()
}

#[test]
fn the_newcomer_is_refused_whatever_its_age_and_only_new_names_deny_on_update() {
    let owner = route_at(
        "team-a",
        "site",
        &["a.example.com", "b.example.com"],
        "2025-06-01T00:00:00Z",
    );
    // Already there (the webhook was bypassed): team-b claims a.example.com.
    let squatter = route_at("team-b", "late", &["a.example.com"], "2025-07-01T00:00:00Z");
    let objects = world(&[team("team-a"), team("team-b"), owner, squatter.clone()]);
    // A route created long ago (a restored backup) still does not take the name from its owner.
    let older = route_at("team-c", "old", &["b.example.com"], "2020-01-01T00:00:00Z");
    let decision = decided(owned(), &objects, &review("CREATE", &older, None));
    assert!(!decision.allowed);
    let message = decision.denial_message();
    assert!(
        message.starts_with("HostnameOwnedByOtherNamespace: b.example.com belongs to namespace team-a, where HTTPRoute team-a/site claimed it first"),
        "{message}"
    );
    // UPDATE adding b.example.com: the new name denies, the one it already had only warns.
    let updated = route_at(
        "team-b",
        "late",
        &["a.example.com", "b.example.com"],
        "2025-07-01T00:00:00Z",
    );
    let decision = decided(
        owned(),
        &objects,
        &review("UPDATE", &updated, Some(&squatter)),
    );
    assert!(!decision.allowed);
    assert_eq!(
        reasons(&decision),
        [
            (
                Reason::HostnameOwnedByOtherNamespace,
                Some("a.example.com"),
                Action::Warn
            ),
            (
                Reason::HostnameOwnedByOtherNamespace,
                Some("b.example.com"),
                Action::Deny
            ),
        ]
    );
    assert!(
        decision.warnings[0].ends_with("(already the case before this change)"),
        "{:?}",
        decision.warnings
    );
    // An UPDATE that changes nothing about its names is allowed, with the warning.
    let relabelled = labelled(squatter.clone(), "app", "web");
    let decision = decided(
        owned(),
        &objects,
        &review("UPDATE", &relabelled, Some(&squatter)),
    );
    assert!(decision.allowed, "{decision:?}");
    assert_eq!(decision.warnings.len(), 1);
    // Off, the same CREATE is allowed: sharing across namespaces is legal.
    assert!(decided(Config::default(), &objects, &review("CREATE", &older, None)).allowed);
}

#[test]
fn the_owners_own_update_is_judged_with_its_age() {
    let site = route_at("team-a", "site", &["a.example.com"], "2025-01-01T00:00:00Z");
    let objects = world(&[
        team("team-a"),
        sharing("team-a", "team-b"),
        site.clone(),
        route_at(
            "team-b",
            "guest",
            &["a.example.com"],
            "2025-02-01T00:00:00Z",
        ),
        route_at(
            "team-c",
            "squatter",
            &["a.example.com"],
            "2025-03-01T00:00:00Z",
        ),
    ]);
    // team-b shares the name with consent and team-c squats it: the owner's UPDATE is clean.
    let relabelled = labelled(site.clone(), "app", "web");
    let decision = decided(
        owned(),
        &objects,
        &review("UPDATE", &relabelled, Some(&site)),
    );
    assert_eq!(
        decision,
        Decision {
            allowed: true,
            ..Decision::default()
        }
    );
    // The guest's UPDATE is clean too; the squatter's only warns (it had the name before).
    let guest = route_at(
        "team-b",
        "guest",
        &["a.example.com"],
        "2025-02-01T00:00:00Z",
    );
    let decision = decided(owned(), &objects, &review("UPDATE", &guest, Some(&guest)));
    assert!(
        decision.allowed && decision.warnings.is_empty(),
        "{decision:?}"
    );
    let squatter = route_at(
        "team-c",
        "squatter",
        &["a.example.com"],
        "2025-03-01T00:00:00Z",
    );
    let decision = decided(
        owned(),
        &objects,
        &review("UPDATE", &squatter, Some(&squatter)),
    );
    assert!(decision.allowed, "{decision:?}");
    assert_eq!(
        reasons(&decision),
        [(
            Reason::HostnameOwnedByOtherNamespace,
            Some("a.example.com"),
            Action::Warn
        )]
    );
}

#[test]
fn the_newcomer_is_denied_names_its_namespace_may_not_publish() {
    let objects = world(&[allowing("shop", "*.shop.example.com")]);
    let route = http_route(
        "shop",
        "r",
        on("gw1"),
        &["www.shop.example.com", "www.example.com"],
    );
    let decision = decided(Config::default(), &objects, &review("CREATE", &route, None));
    assert!(!decision.allowed);
    assert_eq!(
        reasons(&decision),
        [(
            Reason::HostnameNotAllowedForNamespace,
            Some("www.example.com"),
            Action::Deny
        )]
    );
}

#[test]
fn a_namespace_annotation_change_is_never_denied_and_names_the_routes_it_unpublishes() {
    let shop = allowing("shop", "*.shop.example.com");
    let objects = world(&[
        shop.clone(),
        sharing("team-a", "team-b"),
        team("team-b"),
        http_route("shop", "web", on("gw1"), &["www.shop.example.com"]),
        http_route("shop", "api", on("gw1"), &["api.shop.example.com"]),
        route_at("team-a", "site", &["a.example.com"], "2025-01-01T00:00:00Z"),
        route_at(
            "team-b",
            "guest",
            &["a.example.com"],
            "2025-02-01T00:00:00Z",
        ),
    ]);
    let narrowed = allowing("shop", "www.shop.example.com");
    let decision = decided(owned(), &objects, &review("UPDATE", &narrowed, Some(&shop)));
    assert!(decision.allowed);
    assert_eq!(decision.warnings.len(), 1, "{:?}", decision.warnings);
    assert!(
        decision.warnings[0].starts_with(
            "HostnameNotAllowedForNamespace: HTTPRoute/shop/api would no longer publish api.shop.example.com: "
        ),
        "{:?}",
        decision.warnings
    );
    // Withdrawing consent names the guest route in the other namespace.
    let withdrawn = team("team-a");
    let decision = decided(
        owned(),
        &objects,
        &review("UPDATE", &withdrawn, Some(&sharing("team-a", "team-b"))),
    );
    assert!(decision.allowed);
    assert_eq!(decision.warnings.len(), 1, "{:?}", decision.warnings);
    assert!(
        decision.warnings[0].starts_with(
            "HostnameOwnedByOtherNamespace: HTTPRoute/team-b/guest would no longer publish a.example.com: a.example.com belongs to namespace team-a"
        ),
        "{:?}",
        decision.warnings
    );
    // A change of anything else (a label) costs nothing and says nothing.
    let relabelled = labelled(shop.clone(), "team", "shop");
    let decision = decided(
        owned(),
        &objects,
        &review("UPDATE", &relabelled, Some(&shop)),
    );
    assert_eq!(
        decision,
        Decision {
            allowed: true,
            ..Decision::default()
        }
    );
}

#[test]
fn an_index_that_follows_namespace_changes_settles_as_a_fresh_one() {
    let before = allowing("shop", "*.shop.example.com");
    let after = allowing("shop", "www.shop.example.com");
    let rest = world(&[
        http_route("shop", "web", on("gw1"), &["www.shop.example.com"]),
        http_route("shop", "api", on("gw1"), &["api.shop.example.com"]),
    ]);
    let index = Index::with_config(Arc::new(owned()));
    index.replace_all(decode_all(&[rest.clone(), vec![before]].concat()));
    assert_eq!(index.read(settle_all).records.len(), 2);
    index.apply(decode(&after));
    let fresh = settle(owned(), &[rest, vec![after]].concat());
    assert_eq!(index.read(settle_all), fresh);
    assert_eq!(fresh.records.len(), 1);
}

/// `explain` tells the story the engine settles: the other namespace's claim takes no part
/// (owned elsewhere, with the ownership message), and the owner keeps the name alone.
#[test]
fn explain_shows_a_claim_owned_by_another_namespace_as_out_of_the_settlement() {
    use gateway_dns::engine::explain::{ClaimResult, Fate, explain_name};
    let objects = world(&[
        team("team-a"),
        team("team-b"),
        route_at(
            "team-b",
            "late",
            &["shop.example.com"],
            "2025-02-01T00:00:00Z",
        ),
        route_at(
            "team-a",
            "site",
            &["shop.example.com"],
            "2025-01-01T00:00:00Z",
        ),
    ]);
    let world = snapshot(owned(), &objects);
    let explained = explain_name(&world, "shop.example.com");
    assert_eq!(explained.winner.as_deref(), Some("HTTPRoute/team-a/site"));
    let route = |name: &str| {
        explained
            .routes
            .iter()
            .find(|r| r.route == name)
            .unwrap_or_else(|| panic!("{name} in {explained:#?}"))
    };
    let owner = route("HTTPRoute/team-a/site");
    assert_eq!(owner.fate, Fate::Published);
    assert_eq!(owner.claims[0].result, ClaimResult::Wins);
    assert_eq!(
        owner.claims[0].why,
        "the only claim from the namespace that owns the name"
    );
    let other = route("HTTPRoute/team-b/late");
    assert_eq!(other.fate, Fate::Denied);
    assert_eq!(other.claims[0].result, ClaimResult::OwnedElsewhere);
    assert!(
        other.claims[0].why.contains("belongs to namespace team-a"),
        "{:?}",
        other.claims[0].why
    );
    assert!(
        other
            .findings
            .iter()
            .any(|f| f.reason == "HostnameOwnedByOtherNamespace" && f.action == "deny"),
        "{:#?}",
        other.findings
    );
    // Off, the same world shares the name and explain says so.
    let off = snapshot(Config::default(), &objects);
    let explained = explain_name(&off, "shop.example.com");
    let other = explained
        .routes
        .iter()
        .find(|r| r.route == "HTTPRoute/team-b/late")
        .map(|r| r.claims[0].result);
    assert_eq!(other, Some(ClaimResult::Shares));
}
