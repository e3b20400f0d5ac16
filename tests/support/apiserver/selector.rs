//! Label and field selectors as kube-apiserver parses them (the subset a list/watch client sends).

use serde_json::Value;

#[derive(Clone, Debug, PartialEq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

/// A parsed `labelSelector` query parameter; empty matches everything.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

impl LabelSelector {
    /// Parses `a=b,c!=d,e in (f,g),h notin (i),j,!k`.
    pub fn parse(text: &str) -> Result<LabelSelector, String> {
        let mut requirements = Vec::new();
        for term in split_top_level(text) {
            let term = term.trim();
            if term.is_empty() {
                continue;
            }
            requirements.push(parse_requirement(term)?);
        }
        Ok(LabelSelector { requirements })
    }

    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    pub fn matches(&self, object: &Value) -> bool {
        let labels = object
            .pointer("/metadata/labels")
            .and_then(Value::as_object);
        let label = |key: &str| labels.and_then(|l| l.get(key)).and_then(Value::as_str);
        self.requirements
            .iter()
            .all(|requirement| match requirement {
                Requirement::Equals(k, v) => label(k) == Some(v.as_str()),
                // As in Kubernetes, `k!=v` also matches objects without the label.
                Requirement::NotEquals(k, v) => label(k) != Some(v.as_str()),
                Requirement::In(k, values) => {
                    label(k).is_some_and(|x| values.iter().any(|v| v == x))
                }
                Requirement::NotIn(k, values) => {
                    label(k).is_none_or(|x| values.iter().all(|v| v != x))
                }
                Requirement::Exists(k) => label(k).is_some(),
                Requirement::DoesNotExist(k) => label(k).is_none(),
            })
    }
}

/// Splits on commas that are not inside `( … )`.
fn split_top_level(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

fn parse_requirement(term: &str) -> Result<Requirement, String> {
    if let Some(key) = term.strip_prefix('!') {
        return Ok(Requirement::DoesNotExist(valid_key(key.trim())?));
    }
    if let Some((key, value)) = term.split_once("!=") {
        return Ok(Requirement::NotEquals(
            valid_key(key.trim())?,
            value.trim().to_string(),
        ));
    }
    if let Some((key, value)) = term.split_once("==").or_else(|| term.split_once('=')) {
        return Ok(Requirement::Equals(
            valid_key(key.trim())?,
            value.trim().to_string(),
        ));
    }
    for (operator, negated) in [(" notin ", true), (" in ", false)] {
        if let Some((key, set)) = term.split_once(operator) {
            let set = set.trim();
            let inner = set
                .strip_prefix('(')
                .and_then(|s| s.strip_suffix(')'))
                .ok_or_else(|| format!("unable to parse requirement: {term:?}: expected ( … )"))?;
            let values = inner.split(',').map(|v| v.trim().to_string()).collect();
            let key = valid_key(key.trim())?;
            return Ok(if negated {
                Requirement::NotIn(key, values)
            } else {
                Requirement::In(key, values)
            });
        }
    }
    Ok(Requirement::Exists(valid_key(term)?))
}

fn valid_key(key: &str) -> Result<String, String> {
    let ok = !key.is_empty()
        && key.len() <= 317
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c));
    if ok {
        Ok(key.to_string())
    } else {
        Err(format!("invalid label key {key:?}"))
    }
}

/// A parsed `fieldSelector`: like the real server for custom resources, only
/// `metadata.name` and `metadata.namespace` are supported.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FieldSelector {
    requirements: Vec<(String, String, bool)>,
}

impl FieldSelector {
    pub fn parse(text: &str) -> Result<FieldSelector, String> {
        let mut requirements = Vec::new();
        for term in text.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (field, value, equal) = if let Some((f, v)) = term.split_once("!=") {
                (f, v, false)
            } else if let Some((f, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                (f, v, true)
            } else {
                return Err(format!("invalid field selector term {term:?}"));
            };
            let field = field.trim();
            if field != "metadata.name" && field != "metadata.namespace" {
                return Err(format!("field label not supported: {field}"));
            }
            requirements.push((field.to_string(), value.trim().to_string(), equal));
        }
        Ok(FieldSelector { requirements })
    }

    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    pub fn matches(&self, object: &Value) -> bool {
        self.requirements.iter().all(|(field, value, equal)| {
            let pointer = if field == "metadata.name" {
                "/metadata/name"
            } else {
                "/metadata/namespace"
            };
            let actual = object
                .pointer(pointer)
                .and_then(Value::as_str)
                .unwrap_or("");
            (actual == value) == *equal
        })
    }
}
