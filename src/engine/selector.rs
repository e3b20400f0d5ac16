//! Label selectors: matching (matchLabels + matchExpressions) and the string syntax of
//! `kubectl -l` (`a=b,c!=d,e in (x,y),f notin (z),g,!h`).

use crate::model::{LabelSelector, Requirement, SelectorOp, StringMap};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    #[error("invalid selector {selector:?}: {reason}")]
    Invalid { selector: String, reason: String },
}

pub fn matches(selector: &LabelSelector, labels: &StringMap) -> bool {
    selector
        .requirements
        .iter()
        .all(|r| requirement_matches(r, labels))
}

fn requirement_matches(req: &Requirement, labels: &StringMap) -> bool {
    let value = labels.get(&req.key);
    match req.operator {
        SelectorOp::Equals | SelectorOp::In => {
            value.is_some_and(|v| req.values.iter().any(|x| x == v))
        }
        SelectorOp::NotEquals | SelectorOp::NotIn => {
            value.is_none_or(|v| !req.values.iter().any(|x| x == v))
        }
        SelectorOp::Exists => value.is_some(),
        SelectorOp::DoesNotExist => value.is_none(),
    }
}

/// Parses the string form of a label selector.
pub fn parse(text: &str) -> Result<LabelSelector, SelectorError> {
    let invalid = |reason: &str| SelectorError::Invalid {
        selector: text.to_owned(),
        reason: reason.to_owned(),
    };
    let mut requirements = Vec::new();
    for term in split_terms(text).map_err(&invalid)? {
        let term = term.trim();
        if term.is_empty() {
            continue;
        }
        requirements.push(parse_term(term).map_err(|r| invalid(&r))?);
    }
    Ok(LabelSelector { requirements })
}

/// Splits on commas that are not inside a `( … )` value list.
fn split_terms(text: &str) -> Result<Vec<&str>, &'static str> {
    let mut terms = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.checked_sub(1).ok_or("unbalanced ')'")?,
            ',' if depth == 0 => {
                terms.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err("unbalanced '('");
    }
    terms.push(&text[start..]);
    Ok(terms)
}

fn parse_term(term: &str) -> Result<Requirement, String> {
    let requirement = |key: &str, operator, values: Vec<String>| -> Result<Requirement, String> {
        let key = key.trim();
        check_key(key)?;
        Ok(Requirement {
            key: key.to_owned(),
            operator,
            values,
        })
    };
    if let Some(key) = term.strip_prefix('!') {
        return requirement(key, SelectorOp::DoesNotExist, Vec::new());
    }
    if let Some((key, value)) = term.split_once("!=") {
        return requirement(key, SelectorOp::NotEquals, vec![check_value(value.trim())?]);
    }
    if let Some((key, value)) = term.split_once("==").or_else(|| term.split_once('=')) {
        return requirement(key, SelectorOp::Equals, vec![check_value(value.trim())?]);
    }
    for (word, operator) in [(" notin ", SelectorOp::NotIn), (" in ", SelectorOp::In)] {
        if let Some((key, list)) = term.split_once(word) {
            let list = list.trim();
            let inner = list
                .strip_prefix('(')
                .and_then(|l| l.strip_suffix(')'))
                .ok_or_else(|| format!("{term:?}: values must be in parentheses"))?;
            let values = inner
                .split(',')
                .map(|v| check_value(v.trim()))
                .collect::<Result<Vec<_>, _>>()?;
            return requirement(key, operator, values);
        }
    }
    requirement(term, SelectorOp::Exists, Vec::new())
}

fn check_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix
        && !crate::model::dns_name::is_dns1123_domain(prefix)
    {
        return Err(format!("{key:?}: prefix must be a DNS subdomain"));
    }
    if name.is_empty() || name.len() > 63 || !valid_name_chars(name) {
        return Err(format!("{key:?} is not a valid label key"));
    }
    Ok(())
}

fn check_value(value: &str) -> Result<String, String> {
    if value.len() > 63 || (!value.is_empty() && !valid_name_chars(value)) {
        return Err(format!("{value:?} is not a valid label value"));
    }
    Ok(value.to_owned())
}

fn valid_name_chars(s: &str) -> bool {
    let bytes = s.as_bytes();
    bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> StringMap {
        StringMap::from_pairs(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())))
    }

    #[test]
    fn string_syntax() {
        let sel = parse("env=prod, tier in (web, api),!legacy,team,zone notin (a),x!=y").unwrap();
        assert_eq!(sel.requirements.len(), 6);
        let l = labels(&[
            ("env", "prod"),
            ("tier", "api"),
            ("team", "t"),
            ("zone", "b"),
        ]);
        assert!(matches(&sel, &l));
        let l2 = labels(&[
            ("env", "prod"),
            ("tier", "api"),
            ("team", "t"),
            ("legacy", "1"),
        ]);
        assert!(!matches(&sel, &l2));
        let l3 = labels(&[("env", "prod"), ("tier", "api"), ("team", "t"), ("x", "y")]);
        assert!(!matches(&sel, &l3));
    }

    #[test]
    fn empty_selector_matches_everything() {
        assert!(matches(&parse("").unwrap(), &labels(&[])));
    }

    #[test]
    fn operators() {
        let l = labels(&[("a", "1")]);
        let req = |operator, values: &[&str]| LabelSelector {
            requirements: vec![Requirement {
                key: "a".into(),
                operator,
                values: values.iter().map(|v| v.to_string()).collect(),
            }],
        };
        assert!(matches(&req(SelectorOp::In, &["1", "2"]), &l));
        assert!(!matches(&req(SelectorOp::In, &["2"]), &l));
        assert!(matches(&req(SelectorOp::NotIn, &["2"]), &l));
        assert!(!matches(&req(SelectorOp::NotIn, &["1"]), &l));
        assert!(matches(&req(SelectorOp::Exists, &[]), &l));
        assert!(!matches(&req(SelectorOp::DoesNotExist, &[]), &l));
        assert!(matches(&req(SelectorOp::NotIn, &["1"]), &labels(&[])));
    }

    #[test]
    fn rejects_garbage() {
        assert!(parse("a in b").is_err());
        assert!(parse("a in (b").is_err());
        assert!(parse("=b").is_err());
        assert!(parse("a=b c").is_err());
    }
}
