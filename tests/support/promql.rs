//! The metric names a PromQL expression reads, for checking dashboards and alerting rules
//! against the series an exporter really has. A small scanner, not a parser: it skips strings,
//! label matchers (`{...}`), ranges (`[...]`), Grafana variables (`$x`, `${x}`), numbers and
//! durations, aggregation operators, function names (an identifier before `(`), keywords, and the label
//! lists after `by`, `without`, `on`, `ignoring`, `group_left` and `group_right`. Every other
//! identifier is a metric name.

use std::collections::BTreeSet;

const KEYWORDS: [&str; 9] = [
    "offset", "bool", "and", "or", "unless", "atan2", "inf", "nan", "start",
];
/// Aggregation operators: followed by `(` or by a `by`/`without` clause.
const AGGREGATIONS: [&str; 14] = [
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
    "limitk",
    "limit_ratio",
];
const LABEL_LIST_KEYWORDS: [&str; 6] = [
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

fn is_identifier_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == ':'
}

fn is_identifier_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

/// Index just past the string literal that starts at `start` (its opening quote).
fn skip_string(chars: &[char], start: usize) -> usize {
    let quote = chars[start];
    let mut i = start + 1;
    while i < chars.len() && chars[i] != quote {
        if chars[i] == '\\' && quote != '`' {
            i += 1;
        }
        i += 1;
    }
    i + 1
}

/// Index just past the bracketed group (`{}`, `[]` or `()`) that opens at `start`.
fn skip_group(chars: &[char], start: usize) -> usize {
    let (open, close) = match chars[start] {
        '{' => ('{', '}'),
        '[' => ('[', ']'),
        _ => ('(', ')'),
    };
    let mut depth = 0;
    let mut i = start;
    while i < chars.len() {
        match chars[i] {
            '"' | '\'' | '`' => {
                i = skip_string(chars, i);
                continue;
            }
            c if c == open => depth += 1,
            c if c == close => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    i
}

fn next_non_space(chars: &[char], mut i: usize) -> usize {
    while i < chars.len() && chars[i].is_whitespace() {
        i += 1;
    }
    i
}

/// Every metric name `expr` selects.
pub fn metric_names(expr: &str) -> BTreeSet<String> {
    let chars: Vec<char> = expr.chars().collect();
    let mut names = BTreeSet::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '"' || c == '\'' || c == '`' {
            i = skip_string(&chars, i);
        } else if c == '{' || c == '[' {
            i = skip_group(&chars, i);
        } else if c == '$' {
            i += 1;
            if chars.get(i) == Some(&'{') {
                i = skip_group(&chars, i);
            } else {
                while i < chars.len() && is_identifier_char(chars[i]) {
                    i += 1;
                }
            }
        } else if c.is_ascii_digit()
            || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit))
        {
            // Numbers and durations (5m, 1d, 1e3, 0x1f).
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                i += 1;
            }
        } else if is_identifier_start(c) {
            let start = i;
            while i < chars.len() && is_identifier_char(chars[i]) {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let next = next_non_space(&chars, i);
            if LABEL_LIST_KEYWORDS.contains(&word.as_str()) {
                if chars.get(next) == Some(&'(') {
                    i = skip_group(&chars, next);
                }
            } else if KEYWORDS.contains(&word.as_str())
                || AGGREGATIONS.contains(&word.as_str())
                || chars.get(next) == Some(&'(')
            {
                // A keyword, or a function or aggregation being called.
            } else {
                names.insert(word);
            }
        } else {
            i += 1;
        }
    }
    names
}

/// The metric families a Prometheus text exposition declares (`# TYPE` lines), each with the
/// series names it may produce (a histogram's `_bucket`, `_sum` and `_count`).
pub fn exposed_series(exposition: &str) -> BTreeSet<String> {
    let mut series = BTreeSet::new();
    for line in exposition.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, ""));
            series.insert(name.to_string());
            if kind.trim() == "histogram" || kind.trim() == "summary" {
                for suffix in ["_bucket", "_sum", "_count"] {
                    series.insert(format!("{name}{suffix}"));
                }
            }
        }
    }
    series
}
