//! The Kubernetes objects the tests feed the engine: the shared builders of
//! `tests/support/objects.rs` (as JSON, decoded here with the one decoder every source uses),
//! and small readers over outcomes.

use std::path::PathBuf;
use std::sync::Arc;

use gateway_dns::engine::Outcome;
use gateway_dns::engine::settle::settle_all;
use gateway_dns::engine::{Action, Config, Finding, Reason};
use gateway_dns::index::Snapshot;
use gateway_dns::model::{self, Object};
use serde_json::{Value, json};

pub use crate::builders::*;

/// The non-empty documents of a YAML file, as JSON trees.
pub fn yaml_documents(path: &std::path::Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|doc| serde::Deserialize::deserialize(doc).unwrap())
        .filter(|v: &Value| !v.is_null())
        .collect()
}

/// Decodes a value that must be an object gateway-dns reads.
pub fn decode(value: &Value) -> Object {
    match model::decode_value(value) {
        Ok(Some(object)) => object,
        Ok(None) => panic!("not a kind gateway-dns reads: {value}"),
        Err(err) => panic!("does not decode: {err}: {value}"),
    }
}

pub fn decode_all(values: &[Value]) -> Vec<Object> {
    values.iter().map(decode).collect()
}

pub fn snapshot(cfg: Config, values: &[Value]) -> Snapshot {
    Snapshot::from_objects(Arc::new(cfg), decode_all(values))
}

pub fn settle(cfg: Config, values: &[Value]) -> Outcome {
    settle_all(&snapshot(cfg, values))
}

pub fn settle_default(values: &[Value]) -> Outcome {
    settle(Config::default(), values)
}

pub fn violations_of<'a>(outcome: &'a Outcome, object: &str) -> Vec<&'a Finding> {
    outcome
        .violations
        .iter()
        .filter(|v| v.object == object)
        .collect()
}

/// The one violation of `object`; fails listing everything when there is not exactly one.
pub fn only_violation<'a>(outcome: &'a Outcome, object: &str) -> &'a Finding {
    let found = violations_of(outcome, object);
    assert_eq!(
        found.len(),
        1,
        "expected exactly one violation for {object}, got {:#?}",
        outcome.violations
    );
    found[0]
}

/// (dnsName, type, targets) of every record, for compact assertions.
pub fn record_summary(outcome: &Outcome) -> Vec<(String, &'static str, Vec<String>)> {
    outcome
        .records
        .iter()
        .map(|r| {
            (
                r.dns_name.clone(),
                r.record_type.as_str(),
                r.targets.clone(),
            )
        })
        .collect()
}

pub fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The reference cases: `$GATEWAY_DNS_SHARED_DIR/cases` when that variable is set (another copy
/// to compare with), else the repository's own copies in `tests/fixtures/cases` (its README
/// says where they come from).
pub fn cases_dir() -> PathBuf {
    let Some(dir) = std::env::var_os("GATEWAY_DNS_SHARED_DIR") else {
        return crate_dir().join("tests").join("fixtures").join("cases");
    };
    let dir = PathBuf::from(dir).join("cases");
    // Set but wrong must fail, not fall back: the run was asked to check that corpus.
    assert!(
        dir.is_dir(),
        "GATEWAY_DNS_SHARED_DIR is set but {} is not a directory",
        dir.display()
    );
    dir
}

/// A YAML file of the reference cases, as JSON values.
pub fn case_file(name: &str) -> Value {
    let path = cases_dir().join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|err| panic!("cannot read the reference cases {}: {err}", path.display()));
    serde_yaml_ng::from_str(&text)
        .unwrap_or_else(|err| panic!("{} is not valid YAML: {err}", path.display()))
}

// ---------------------------------------------------------------- shared by the rule tests

pub const GW1: &str = "10.0.0.1";
pub const GW2: &str = "10.0.0.2";

pub fn infra() -> Value {
    namespace("infra", json!({}))
}

pub fn apps() -> Value {
    namespace("apps", json!({}))
}

pub fn on(gw: &str) -> Value {
    json!([parent("infra", gw)])
}

/// Asserts the common shape of a finding: reason, action, field, one line, naming what it is about.
pub fn assert_finding(v: &Finding, reason: Reason, action: Action, field: &str, names: &[&str]) {
    assert_eq!(v.reason, reason, "{v:#?}");
    assert_eq!(v.action, action, "{v:#?}");
    assert_eq!(v.field, field, "{v:#?}");
    assert!(!v.message.contains('\n'), "one line: {v:#?}");
    for name in names {
        assert!(
            v.message.contains(name),
            "message should name {name}: {}",
            v.message
        );
    }
}
