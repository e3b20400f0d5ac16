//! No panic on any input, and the algebra of hostnames: property tests over the hostname parser
//! and intersection, the file loader and the object decoder (whose output also goes through the
//! whole engine).

use std::sync::Arc;

use gateway_dns::engine::Config;
use gateway_dns::engine::hostname::{intersect, is_wildcard, matches};
use gateway_dns::engine::settle::settle_all;
use gateway_dns::index::Snapshot;
use gateway_dns::model::dns_name::{is_dns1123_domain, parse_hostname};
use gateway_dns::model::{Object, decode_value};
use gateway_dns::source::files::{Loaded, parse_text};
use proptest::prelude::*;
use serde_json::{Map, Value};

// ---------------------------------------------------------------- hostnames

/// Hostname-like text: few distinct labels so that names often overlap, plus case, wildcards,
/// digits, stray characters and the odd over-long label.
fn hostnameish() -> impl Strategy<Value = String> {
    let label = prop_oneof![
        4 => prop::sample::select(vec!["a", "b", "example", "com", "io", "x-y", "1", "255", "A", "Ex"])
            .prop_map(str::to_owned),
        1 => "[a-z0-9*_:.-]{0,6}",
        1 => Just("z".repeat(64)),
    ];
    (
        prop::option::of(Just("*.")),
        prop::collection::vec(label, 1..5),
        prop::option::of(Just(".")),
    )
        .prop_map(|(wild, labels, dot)| {
            format!(
                "{}{}{}",
                wild.unwrap_or(""),
                labels.join("."),
                dot.unwrap_or("")
            )
        })
}

/// A normalized pattern (exact or wildcard) or unset.
fn pattern() -> impl Strategy<Value = Option<String>> {
    prop::option::of(hostnameish().prop_filter_map("valid hostnames only", |h| {
        parse_hostname(&h).ok().map(String::from)
    }))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn normalize_never_panics_on_any_string(s in any::<String>()) {
        let _ = parse_hostname(&s);
        let _ = is_dns1123_domain(&s);
    }

    #[test]
    fn normalize_never_panics_on_long_strings(s in "[a-z.*-]{200,300}") {
        let _ = parse_hostname(&s);
    }

    #[test]
    fn normalize_is_idempotent_and_yields_valid_lower_case(s in hostnameish()) {
        if let Ok(name) = parse_hostname(&s) {
            prop_assert_eq!(parse_hostname(&name), Ok(name.clone()));
            prop_assert_eq!(name.to_ascii_lowercase(), name.clone());
            prop_assert!(name.len() <= 253, "{}", name);
            let base = name.strip_prefix("*.").unwrap_or(&name);
            prop_assert!(is_dns1123_domain(base), "{}", name);
            prop_assert!(name.parse::<std::net::IpAddr>().is_err());
        }
    }

    #[test]
    fn intersect_never_panics_on_any_strings(a in any::<Option<String>>(), b in any::<Option<String>>()) {
        let _ = intersect(a.as_deref(), b.as_deref());
        if let (Some(a), Some(b)) = (&a, &b) {
            let _ = matches(a, b);
        }
    }

    #[test]
    fn intersect_is_symmetric(l in pattern(), r in pattern()) {
        prop_assert_eq!(intersect(l.as_deref(), r.as_deref()), intersect(r.as_deref(), l.as_deref()));
    }

    #[test]
    fn an_intersection_lies_within_both_sides(l in pattern(), r in pattern()) {
        match intersect(l.as_deref(), r.as_deref()) {
            None => prop_assert!(l.is_some() && r.is_some()),
            Some(None) => prop_assert!(l.is_none() && r.is_none()),
            Some(Some(x)) => {
                for side in [&l, &r].into_iter().flatten() {
                    prop_assert!(
                        side == x || matches(side, x),
                        "{} is neither equal to nor matched by {}", x, side
                    );
                }
                // The result is one of the two inputs: intersection never invents a name.
                prop_assert!(l.as_deref() == Some(x) || r.as_deref() == Some(x));
            }
        }
    }

    #[test]
    fn a_name_matched_by_both_sides_is_matched_by_their_intersection(
        l in pattern(),
        r in pattern(),
        name in hostnameish().prop_filter_map("concrete names", |h| parse_hostname(&h).ok().filter(|n| !is_wildcard(n)).map(String::from)),
    ) {
        let covers = |p: &Option<String>| p.as_deref().is_none_or(|p| matches(p, &name));
        if covers(&l) && covers(&r) {
            match intersect(l.as_deref(), r.as_deref()) {
                None => prop_assert!(false, "{:?} and {:?} both match {} but do not intersect", l, r, name),
                Some(None) => {}
                Some(Some(x)) => prop_assert!(matches(x, &name), "{} does not match {}", x, name),
            }
        }
    }
}

// ---------------------------------------------------------------- the loader

const EXAMPLE_GATEWAYS: &str = include_str!("../../examples/cluster/gateways.yaml");
const EXAMPLE_ROUTES: &str = include_str!("../../examples/cluster/routes.yaml");

#[derive(Debug, Clone)]
enum Mutation {
    Delete { at: usize, len: usize },
    Insert { at: usize, text: String },
    Replace { at: usize, with: char },
    DuplicateLine { line: usize },
    SwapLines { a: usize, b: usize },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let at = any::<usize>();
    prop_oneof![
        (at, 1..20usize).prop_map(|(at, len)| Mutation::Delete { at, len }),
        (
            at,
            prop_oneof![
                Just("\n".to_owned()),
                Just(": ".to_owned()),
                Just("- ".to_owned()),
                Just("---\n".to_owned()),
                Just("{".to_owned()),
                Just("[".to_owned()),
                Just("\t".to_owned()),
                Just("&a ".to_owned()),
                Just("*a".to_owned()),
                Just("!!binary ".to_owned()),
                Just("~".to_owned()),
                Just("'".to_owned()),
                "[ -~]{1,8}",
            ]
        )
            .prop_map(|(at, text)| Mutation::Insert { at, text }),
        (at, any::<char>()).prop_map(|(at, with)| Mutation::Replace { at, with }),
        at.prop_map(|line| Mutation::DuplicateLine { line }),
        (at, at).prop_map(|(a, b)| Mutation::SwapLines { a, b }),
    ]
}

fn mutate(text: &str, mutations: &[Mutation]) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    for m in mutations {
        let n = chars.len().max(1);
        match m {
            Mutation::Delete { at, len } => {
                let start = at % n;
                let end = (start + len).min(chars.len());
                if start < end {
                    chars.drain(start..end);
                }
            }
            Mutation::Insert { at, text } => {
                let pos = at % (chars.len() + 1);
                chars.splice(pos..pos, text.chars());
            }
            Mutation::Replace { at, with } => {
                if !chars.is_empty() {
                    chars[at % n] = *with;
                }
            }
            Mutation::DuplicateLine { line } | Mutation::SwapLines { a: line, .. } => {
                let s: String = chars.iter().collect();
                let mut lines: Vec<String> = s.split('\n').map(str::to_owned).collect();
                let i = line % lines.len();
                match m {
                    Mutation::SwapLines { b, .. } => {
                        let j = b % lines.len();
                        lines.swap(i, j);
                    }
                    _ => {
                        let copy = lines[i].clone();
                        lines.insert(i, copy);
                    }
                }
                chars = lines.join("\n").chars().collect();
            }
        }
    }
    chars.into_iter().collect()
}

/// Loads text; whatever loads also goes through the engine. Panics are the only failure.
fn load_and_plan(text: &str, is_json: bool) {
    let mut loaded: Vec<Loaded> = Vec::new();
    if parse_text("fuzz.yaml", text, is_json, &mut loaded).is_ok() {
        let objects = loaded.into_iter().map(|l| l.object);
        let _ = settle_all(&Snapshot::from_objects(
            Arc::new(Config::default()),
            objects,
        ));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn loader_never_panics_on_arbitrary_text(text in any::<String>(), is_json in any::<bool>()) {
        load_and_plan(&text, is_json);
    }

    #[test]
    fn loader_never_panics_on_yamlish_text(text in "([ -~]|\n|\t){0,200}") {
        load_and_plan(&text, false);
    }

    #[test]
    fn loader_never_panics_on_mutated_valid_yaml(
        routes in any::<bool>(),
        mutations in prop::collection::vec(mutation(), 1..6),
    ) {
        let base = if routes { EXAMPLE_ROUTES } else { EXAMPLE_GATEWAYS };
        let text = format!("{EXAMPLE_GATEWAYS}---\n{base}");
        load_and_plan(&mutate(&text, &mutations), false);
    }

    #[test]
    fn loader_never_panics_on_mutated_valid_json(
        mutations in prop::collection::vec(mutation(), 1..6),
    ) {
        let mut values = Vec::new();
        for doc in [EXAMPLE_GATEWAYS, EXAMPLE_ROUTES] {
            for d in serde_yaml_ng::Deserializer::from_str(doc) {
                values.push(<Value as serde::Deserialize>::deserialize(d).unwrap().to_string());
            }
        }
        load_and_plan(&mutate(&values.join("\n"), &mutations), true);
    }
}

#[test]
fn the_unmutated_examples_load() {
    // Guards the mutation tests: their starting point is valid.
    let mut loaded = Vec::new();
    parse_text(
        "x.yaml",
        &format!("{EXAMPLE_GATEWAYS}---\n{EXAMPLE_ROUTES}"),
        false,
        &mut loaded,
    )
    .unwrap();
    assert_eq!(loaded.len(), 10);
}

// ---------------------------------------------------------------- the decoder

const KEYS: &[&str] = &[
    "apiVersion",
    "kind",
    "metadata",
    "spec",
    "status",
    "name",
    "namespace",
    "labels",
    "annotations",
    "creationTimestamp",
    "generation",
    "listeners",
    "hostname",
    "hostnames",
    "parentRefs",
    "parentRef",
    "port",
    "protocol",
    "allowedRoutes",
    "namespaces",
    "from",
    "selector",
    "matchLabels",
    "matchExpressions",
    "key",
    "operator",
    "values",
    "kinds",
    "group",
    "sectionName",
    "addresses",
    "type",
    "value",
    "parents",
    "conditions",
    "observedGeneration",
    "allowedListeners",
    "items",
    "external-dns.kubernetes.io/hostname",
    "external-dns.kubernetes.io/target",
    "external-dns.kubernetes.io/ttl",
];

const STRINGS: &[&str] = &[
    "",
    "a",
    "default",
    "gw",
    "HTTP",
    "HTTPS",
    "TLS",
    "TCP",
    "UDP",
    "All",
    "Same",
    "Selector",
    "None",
    "In",
    "NotIn",
    "Exists",
    "DoesNotExist",
    "True",
    "False",
    "Accepted",
    "IPAddress",
    "Hostname",
    "10.0.0.1",
    "::1",
    "*.example.com",
    "a.example.com",
    "Gateway",
    "ListenerSet",
    "gateway.networking.k8s.io",
    "2024-01-01T00:00:00Z",
    "2024-13-45T99:99:99Z",
    "1h",
    "é",
];

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        prop::sample::select(STRINGS).prop_map(Value::from),
        any::<String>().prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(KEYS), inner), 0..6).prop_map(|pairs| {
                Value::Object(
                    pairs
                        .into_iter()
                        .map(|(k, v)| (k.to_owned(), v))
                        .collect::<Map<_, _>>(),
                )
            }),
        ]
    })
}

/// An object whose apiVersion/kind is one we read, with arbitrary everything else.
fn kube_object() -> impl Strategy<Value = Value> {
    let types = prop::sample::select(vec![
        ("v1", "Namespace"),
        ("gateway.networking.k8s.io/v1", "Gateway"),
        ("gateway.networking.k8s.io/v1", "ListenerSet"),
        ("gateway.networking.k8s.io/v1", "HTTPRoute"),
        ("gateway.networking.k8s.io/v1beta1", "HTTPRoute"),
        ("gateway.networking.k8s.io/v1", "GRPCRoute"),
        ("gateway.networking.k8s.io/v1", "TLSRoute"),
        ("gateway.networking.k8s.io/v1alpha2", "TCPRoute"),
        ("gateway.networking.k8s.io/v1", "UDPRoute"),
        ("v1", "List"),
    ]);
    (
        types,
        json_value(),
        json_value(),
        json_value(),
        any::<bool>(),
    )
        .prop_map(|((api_version, kind), metadata, spec, status, named)| {
            let mut metadata = metadata;
            if named {
                // Often a valid name, so decoding gets past metadata into spec and status.
                metadata = match metadata {
                    Value::Object(mut m) => {
                        m.insert("name".into(), Value::from("n"));
                        Value::Object(m)
                    }
                    _ => serde_json::json!({"name": "n"}),
                };
            }
            serde_json::json!({"apiVersion": api_version, "kind": kind,
                               "metadata": metadata, "spec": spec, "status": status})
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(384))]

    #[test]
    fn decoder_never_panics_on_arbitrary_json(value in json_value()) {
        let _ = decode_value(&value);
    }

    #[test]
    fn decoded_objects_never_panic_the_engine(values in prop::collection::vec(kube_object(), 1..6)) {
        let objects: Vec<Object> = values
            .iter()
            .filter_map(|v| decode_value(v).ok().flatten())
            .collect();
        for cfg in [Config::default(), Config { attachment: gateway_dns::engine::AttachmentMode::Status, allow_inherited_wildcards: true, ..Config::default() }] {
            let snap = Snapshot::from_objects(Arc::new(cfg), objects.clone());
            let _ = settle_all(&snap);
        }
        // The same text through the loader (YAML and JSON) as well.
        let text = values.iter().map(Value::to_string).collect::<Vec<_>>().join("\n---\n");
        load_and_plan(&text, false);
        load_and_plan(&values.iter().map(Value::to_string).collect::<Vec<_>>().join("\n"), true);
    }
}
