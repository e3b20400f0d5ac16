//! external-dns parity: every endpoint case of the reference case `extdns-visible.yaml`
//! (external-dns's Gateway API source tests, transcribed) runs through the built binary as
//!
//! ```text
//! gateway-dns check --output json --attachment status --allow-inherited-wildcards --mode warn \
//!     --listener-sets true|false [the case's flags] FILE
//! ```
//!
//! with FILE the case's objects, and its JSON is compared with the endpoints external-dns
//! produces. Exit 0 and 1 are both answers; anything else fails the case. Only FQDN-template
//! cases (not supported) and unit cases (ported in `unit_cases.rs`) are skipped.
//!
//! The case `config` keys are external-dns flags: `gatewayName`, `gatewayNamespace`,
//! `gatewayLabelFilter`, `namespace`, `labelFilter`, `annotationFilter` map to `--gateway-name`,
//! `--gateway-namespace`, `--gateway-selector`, `--namespace`, `--route-selector`,
//! `--annotation-filter`; `ignoreHostnameAnnotation` to `--ignore-hostname-annotation`;
//! `gatewayListenerSets` to `--listener-sets` (false when absent, external-dns's default).
//!
//! Endpoints compare as (lower-cased dnsName, recordType, target set, TTL when the case sets one);
//! no other record may appear. Where gateway-dns differs on purpose:
//! - external-dns merges the addresses of different Gateways into one record when their routes
//!   share a hostname; gateway-dns refuses. For such a name (expected targets within no single
//!   Gateway's, or target-annotated ListenerSet's, set but within their union) a
//!   `HostnameConflict` on that hostname is required, and only records whose targets all come
//!   from one of them are accepted.
//! - No CNAME beside A/AAAA: where external-dns lists both for one name, the CNAME expectation is
//!   dropped (its planner discards that CNAME too).
//!
//! Status-based attachment and inherited wildcard records are external-dns behaviours, hence the
//! parity flags above.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::objects::{case_file, cases_dir};

const UNIT_SKIP: &str = "unit case: covered by the project's own unit tests";
const TEMPLATE_SKIP: &str = "FQDN templates not supported";
const ALWAYS_FLAGS: &[&str] = &[
    "--attachment",
    "status",
    "--allow-inherited-wildcards",
    "--mode",
    "warn",
];
const TARGET_ANNOTATIONS: &[&str] = &[
    "external-dns.kubernetes.io/target",
    "external-dns.alpha.kubernetes.io/target",
];
/// external-dns case config key → gateway-dns flag taking a value.
const VALUE_FLAGS: &[(&str, &str)] = &[
    ("gatewayName", "--gateway-name"),
    ("gatewayNamespace", "--gateway-namespace"),
    ("gatewayLabelFilter", "--gateway-selector"),
    ("namespace", "--namespace"),
    ("labelFilter", "--route-selector"),
    ("annotationFilter", "--annotation-filter"),
];
const TEMPLATE_KEYS: &[&str] = &["fqdnTemplate", "combineFQDNAnnotation"];
const RECORD_TYPES: &[&str] = &["A", "AAAA", "CNAME"];
const ACTIONS: &[&str] = &["deny", "warn", "audit", "ignore"];
const CONFLICT: &str = "HostnameConflict";

#[test]
fn extdns_cases_pass() {
    let file = case_file("extdns-visible.yaml");
    let dir = tempfile::tempdir().unwrap();
    let (mut passed, mut failed, mut skipped) = (Vec::new(), Vec::new(), Vec::new());
    for section in ["cases", "derivedCases"] {
        for case in file[section].as_array().into_iter().flatten() {
            let id = text(&case["id"]);
            let flags = match flags(&case["config"]) {
                Ok(flags) => flags,
                Err(reason) => {
                    skipped.push((id, reason));
                    continue;
                }
            };
            match run_case(dir.path(), &id, case, &flags) {
                Ok(()) => passed.push(id),
                Err(reason) => failed.push(format!("FAIL {id}: {reason}")),
            }
        }
    }
    let units: Vec<String> = match &file["unitCases"] {
        Value::Object(groups) => groups
            .iter()
            .flat_map(|(group, items)| {
                let items = items.as_array().into_iter().flatten();
                items.map(move |item| format!("unit/{group}/{}", text(&item["id"])))
            })
            .collect(),
        other => (other.as_array().into_iter().flatten())
            .map(|item| format!("unit/{}", text(&item["id"])))
            .collect(),
    };
    skipped.extend(units.into_iter().map(|id| (id, UNIT_SKIP.to_owned())));

    let summary = format!(
        "{} passed, {} failed, {} skipped (cases from {})",
        passed.len(),
        failed.len(),
        skipped.len(),
        cases_dir().display()
    );
    println!("{summary}");
    assert!(
        failed.is_empty(),
        "{summary}\n{}\n(binary: {})",
        failed.join("\n"),
        env!("CARGO_BIN_EXE_gateway-dns")
    );
    assert!(!passed.is_empty(), "nothing passed: {summary}");
    let unexpected: Vec<_> = skipped
        .iter()
        .filter(|(id, reason)| {
            let unit = id.starts_with("unit/") && reason == UNIT_SKIP;
            !(unit || reason.starts_with(TEMPLATE_SKIP))
        })
        .collect();
    assert!(
        unexpected.is_empty(),
        "skips other than FQDN-template and unit cases:\n{unexpected:#?}"
    );
    assert!(
        skipped.iter().any(|(_, reason)| reason == UNIT_SKIP),
        "the unit cases are listed as skipped"
    );
}

/// The command-line flags of a case's `config`, or why the case is skipped.
fn flags(config: &Value) -> Result<Vec<String>, String> {
    let empty = serde_json::Map::new();
    let config = config.as_object().unwrap_or(&empty);
    let templates: Vec<&str> = TEMPLATE_KEYS
        .iter()
        .copied()
        .filter(|k| config.contains_key(*k))
        .collect();
    if !templates.is_empty() {
        return Err(format!("{TEMPLATE_SKIP} ({})", templates.join(", ")));
    }
    let mut flags = Vec::new();
    for (key, value) in config {
        if let Some((_, flag)) = VALUE_FLAGS.iter().find(|(k, _)| k == key) {
            if !(value.is_null() || value == "") {
                flags.extend([flag.to_string(), text(value)]);
            }
        } else if key == "ignoreHostnameAnnotation" {
            if truthy(value) {
                flags.push("--ignore-hostname-annotation".into());
            }
        } else if key != "gatewayListenerSets" {
            return Err(format!("unsupported config key {key:?}"));
        }
    }
    let listener_sets = config.get("gatewayListenerSets").is_some_and(truthy);
    flags.extend(["--listener-sets".into(), listener_sets.to_string()]);
    flags.extend(ALWAYS_FLAGS.iter().map(|f| f.to_string()));
    Ok(flags)
}

fn run_case(dir: &Path, id: &str, case: &Value, flags: &[String]) -> Result<(), String> {
    let safe: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    let path = dir.join(format!("{safe}.yaml"));
    let documents: Vec<String> = (case["objects"].as_array().into_iter().flatten())
        .map(|object| serde_yaml_ng::to_string(object).unwrap())
        .collect();
    std::fs::write(&path, documents.join("---\n")).unwrap();

    let binary = env!("CARGO_BIN_EXE_gateway-dns");
    let out = Command::new(binary)
        .args(["check", "--output", "json"])
        .args(flags)
        .arg(&path)
        .output()
        .map_err(|err| format!("cannot run {binary}: {err}"))?;
    let command = format!("cmd: {binary} check --output json {} FILE", flags.join(" "));
    let stderr = String::from_utf8_lossy(&out.stderr);
    match out.status.code() {
        Some(0 | 1) => {}
        Some(2) => {
            let first = stderr.lines().next().unwrap_or_default();
            return Err(format!("input error (exit 2): {first}\n    {command}"));
        }
        _ => return Err(format!("unexpected exit {}\n    {command}", out.status)),
    }
    let doc: Value = serde_json::from_slice(&out.stdout)
        .map_err(|err| format!("stdout is not valid JSON ({err})\n    {command}"))?;
    validate(&doc).map_err(|err| format!("bad JSON: {err}"))?;
    let (problems, diff) = compare(case, &doc);
    if problems.is_empty() {
        return Ok(());
    }
    Err(format!(
        "{}\n    {command}\n{}",
        problems.join("; "),
        diff.join("\n")
    ))
}

/// Python's `str()` of a YAML scalar, which the case files were written to be read with.
fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => "None".into(),
        other => other.to_string(),
    }
}

fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64() != Some(0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

type TargetSets = Vec<(String, BTreeSet<String>)>;

fn split_targets(value: &Value) -> Vec<String> {
    text(value)
        .replace(' ', "")
        .split(',')
        .map(|t| t.strip_suffix('.').unwrap_or(t).to_owned())
        .filter(|t| !t.is_empty())
        .collect()
}

fn own_target_annotation(object: &Value) -> Option<Vec<String>> {
    let annotations = &object["metadata"]["annotations"];
    TARGET_ANNOTATIONS
        .iter()
        .map(|key| &annotations[*key])
        .find(|value| truthy(value))
        .map(split_targets)
}

/// The target set of every Gateway (its target annotation, else its addresses) and of every
/// ListenerSet with a target annotation of its own: the sets one record may come from.
fn target_sets(objects: &Value) -> TargetSets {
    let mut sets = Vec::new();
    for object in objects.as_array().into_iter().flatten() {
        let targets = match object["kind"].as_str() {
            Some("Gateway") => own_target_annotation(object).unwrap_or_else(|| {
                (object["status"]["addresses"]
                    .as_array()
                    .into_iter()
                    .flatten())
                .filter(|a| truthy(&a["value"]))
                .map(|a| text(&a["value"]))
                .collect()
            }),
            Some("ListenerSet") => match own_target_annotation(object) {
                Some(targets) => targets,
                None => continue,
            },
            _ => continue,
        };
        if !targets.is_empty() {
            let metadata = &object["metadata"];
            let reference = format!(
                "{}/{}/{}",
                text(&object["kind"]),
                metadata["namespace"].as_str().unwrap_or_default(),
                metadata["name"].as_str().unwrap_or_default()
            );
            sets.push((reference, targets.into_iter().collect()));
        }
    }
    sets
}

fn single_owner<'a>(targets: impl IntoIterator<Item = &'a String>, sets: &TargetSets) -> bool {
    let targets: BTreeSet<&String> = targets.into_iter().collect();
    sets.iter()
        .any(|(_, set)| targets.iter().all(|t| set.contains(*t)))
}

/// (sorted targets, TTL when the case sets a non-zero one) of an expected record.
type Expected = (Vec<String>, Option<i64>);

fn expected_ttl(endpoint: &Value) -> Option<i64> {
    let value = ["recordTTL", "ttl"].iter().find_map(|k| endpoint.get(*k))?;
    match value {
        Value::Number(n) => n.as_i64().filter(|&t| t != 0),
        Value::String(s) if !s.is_empty() => Some(s.parse().expect("a TTL")),
        _ => None,
    }
}

struct Expectation {
    records: BTreeMap<(String, String), Expected>,
    /// Names external-dns merges across Gateways, with the objects whose targets it merges.
    merged: BTreeMap<String, Vec<String>>,
    sets: TargetSets,
    notes: Vec<String>,
}

fn expectation(case: &Value) -> Expectation {
    let sets = target_sets(&case["objects"]);
    let mut by_name: BTreeMap<String, BTreeMap<String, Expected>> = BTreeMap::new();
    for endpoint in case["expected"]["endpoints"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let name = text(&endpoint["dnsName"]).to_lowercase();
        let record_type = text(&endpoint["recordType"]);
        let mut targets: Vec<String> = (endpoint["targets"].as_array().into_iter().flatten())
            .map(text)
            .collect();
        targets.sort();
        let mut ttl = expected_ttl(endpoint);
        let types = by_name.entry(name).or_default();
        // The same name and type listed twice: their union, as external-dns would merge them.
        if let Some((previous, previous_ttl)) = types.get(&record_type) {
            let union: BTreeSet<String> = previous.iter().chain(&targets).cloned().collect();
            targets = union.into_iter().collect();
            ttl = previous_ttl.or(ttl);
        }
        types.insert(record_type, (targets, ttl));
    }

    let union: BTreeSet<&String> = sets.iter().flat_map(|(_, set)| set).collect();
    let mut merged = BTreeMap::new();
    for (name, types) in &by_name {
        // Every record type, CNAME included, before a CNAME beside A/AAAA is dropped.
        let all: BTreeSet<&String> = types.values().flat_map(|(t, _)| t).collect();
        if !all.is_empty() && !single_owner(all.iter().copied(), &sets) && all.is_subset(&union) {
            let refs = (sets.iter())
                .filter(|(_, set)| all.iter().any(|t| set.contains(*t)))
                .map(|(reference, _)| reference.clone())
                .collect();
            merged.insert(name.clone(), refs);
        }
    }

    let mut records = BTreeMap::new();
    let mut notes = Vec::new();
    for (name, mut types) in by_name {
        if types.contains_key("CNAME") && (types.contains_key("A") || types.contains_key("AAAA")) {
            let (cname, _) = types.remove("CNAME").unwrap();
            notes.push(format!(
                "dropped expected CNAME {name} -> {} (no CNAME beside A/AAAA)",
                cname.join(",")
            ));
        }
        if merged.contains_key(&name) {
            continue;
        }
        for (record_type, value) in types {
            records.insert((name.clone(), record_type), value);
        }
    }
    Expectation {
        records,
        merged,
        sets,
        notes,
    }
}

fn strings(value: &Value) -> Option<Vec<String>> {
    value
        .as_array()?
        .iter()
        .map(|v| v.as_str().map(str::to_owned))
        .collect()
}

/// The fields of `check`'s JSON this comparison reads, with their types.
fn validate(doc: &Value) -> Result<(), String> {
    let records = doc["records"].as_array().ok_or("records is not a list")?;
    let violations = doc["violations"]
        .as_array()
        .ok_or("violations is not a list")?;
    for (i, r) in records.iter().enumerate() {
        let ok = r["dnsName"].is_string()
            && RECORD_TYPES.contains(&r["recordType"].as_str().unwrap_or_default())
            && strings(&r["targets"]).is_some()
            && r.get("ttl").is_some_and(|t| t.is_null() || t.is_i64())
            && strings(&r["gateways"]).is_some()
            && strings(&r["routes"]).is_some();
        if !ok {
            return Err(format!("records[{i}] does not follow the contract: {r}"));
        }
    }
    for (i, v) in violations.iter().enumerate() {
        let ok = ["reason", "object", "message"]
            .iter()
            .all(|k| v[*k].is_string())
            && ACTIONS.contains(&v["action"].as_str().unwrap_or_default())
            && v.get("hostname")
                .is_some_and(|h| h.is_null() || h.is_string());
        if !ok {
            return Err(format!("violations[{i}] does not follow the contract: {v}"));
        }
    }
    Ok(())
}

fn record_line(name: &str, record_type: &str, targets: &[String], ttl: Option<i64>) -> String {
    let ttl = ttl.map(|t| format!(" ttl={t}")).unwrap_or_default();
    format!("{name} {record_type} [{}]{ttl}", targets.join(", "))
}

/// (problems, an expected-vs-got listing) of `check`'s JSON against a case.
fn compare(case: &Value, doc: &Value) -> (Vec<String>, Vec<String>) {
    let expected = expectation(case);
    let records = doc["records"].as_array().unwrap();
    let violations = doc["violations"].as_array().unwrap();
    let targets_of = |r: &Value| strings(&r["targets"]).unwrap();
    let mut problems = Vec::new();

    let mut got: BTreeMap<(String, String), Vec<&Value>> = BTreeMap::new();
    for r in records {
        got.entry((text(&r["dnsName"]), text(&r["recordType"])))
            .or_default()
            .push(r);
    }
    let conflicts: BTreeSet<String> = violations
        .iter()
        .filter(|v| v["reason"] == CONFLICT)
        .filter_map(|v| v["hostname"].as_str().filter(|h| !h.is_empty()))
        .map(|h| {
            let h = h.to_lowercase();
            h.strip_suffix('.').map(str::to_owned).unwrap_or(h)
        })
        .collect();

    for (name, refs) in &expected.merged {
        if !conflicts.contains(name) {
            problems.push(format!(
                "no {CONFLICT} violation for {name} (external-dns merges targets of {})",
                refs.join(", ")
            ));
        }
        for r in records.iter().filter(|r| r["dnsName"] == name.as_str()) {
            let targets = targets_of(r);
            if !single_owner(&targets, &expected.sets) {
                let line = record_line(name, &text(&r["recordType"]), &targets, r["ttl"].as_i64());
                problems.push(format!("merged record {line}"));
            }
        }
    }

    for ((name, record_type), (targets, ttl)) in &expected.records {
        let found = got.get(&(name.clone(), record_type.clone()));
        match found.map(Vec::as_slice).unwrap_or_default() {
            [] => problems.push(format!(
                "missing {}",
                record_line(name, record_type, targets, *ttl)
            )),
            [r] => {
                let mut got_targets = targets_of(r);
                got_targets.sort();
                if &got_targets != targets {
                    problems.push(format!(
                        "{name} {record_type} targets [{}], expected [{}]",
                        got_targets.join(", "),
                        targets.join(", ")
                    ));
                }
                if ttl.is_some() && r["ttl"].as_i64() != *ttl {
                    problems.push(format!(
                        "{name} {record_type} ttl {}, expected {}",
                        r["ttl"],
                        ttl.unwrap()
                    ));
                }
            }
            many => problems.push(format!("{} records for {name} {record_type}", many.len())),
        }
    }
    let expected_names: BTreeSet<&String> = expected.records.keys().map(|(n, _)| n).collect();
    for name in expected_names.iter().filter(|n| conflicts.contains(**n)) {
        problems.push(format!("unexpected {CONFLICT} violation for {name}"));
    }
    for ((name, record_type), rs) in &got {
        if expected.merged.contains_key(name)
            || expected
                .records
                .contains_key(&(name.clone(), record_type.clone()))
        {
            continue;
        }
        for r in rs {
            let line = record_line(name, record_type, &targets_of(r), r["ttl"].as_i64());
            problems.push(format!("extra record {line}"));
        }
    }

    let mut diff: Vec<String> = (expected.notes.iter())
        .map(|n| format!("    note: {n}"))
        .collect();
    diff.push("    expected:".into());
    for ((name, record_type), (targets, ttl)) in &expected.records {
        diff.push(format!(
            "      {}",
            record_line(name, record_type, targets, *ttl)
        ));
    }
    for (name, refs) in &expected.merged {
        diff.push(format!(
            "      {name}: {CONFLICT} violation (merged targets of {})",
            refs.join(", ")
        ));
    }
    diff.push("    got:".into());
    for ((name, record_type), rs) in &got {
        for r in rs {
            let mut targets = targets_of(r);
            targets.sort();
            let line = record_line(name, record_type, &targets, r["ttl"].as_i64());
            diff.push(format!("      {line}"));
        }
    }
    for v in violations {
        diff.push(format!(
            "      violation {} {} {} hostname={}: {}",
            text(&v["reason"]),
            text(&v["action"]),
            text(&v["object"]),
            text(&v["hostname"]),
            text(&v["message"])
        ));
    }
    (problems, diff)
}
