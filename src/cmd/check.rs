//! `gateway-dns check`: the engine over YAML files, for pipelines and terminals.

use std::fmt::Write as _;
use std::io::IsTerminal;
use std::sync::Arc;

use serde::Serialize;

use super::{EXIT_DENIED, EXIT_INPUT, EXIT_OK};
use crate::cli::{CheckArgs, OutputFormat};
use crate::engine::settle::settle_all;
use crate::engine::{Action, Config, Outcome, Record, Violation};
use crate::index::Snapshot;
use crate::source::files::{self, Loaded};

/// Runs `check`; returns the process exit code.
pub fn run(args: &CheckArgs) -> u8 {
    let cfg = match args.engine.to_config() {
        Ok(cfg) => cfg,
        Err(err) => {
            eprintln!("gateway-dns check: {err}");
            return EXIT_INPUT;
        }
    };
    let loaded = match files::load_paths(&args.paths) {
        Ok(loaded) => loaded,
        Err(err) => {
            eprintln!("gateway-dns check: {err}");
            return EXIT_INPUT;
        }
    };
    let outcome = evaluate(Arc::new(cfg), loaded);
    match args.output {
        OutputFormat::Json => println!("{}", to_json(&outcome)),
        OutputFormat::Text => {
            let colour = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
            print!("{}", to_text(&outcome, colour));
        }
    }
    if outcome.denies() {
        EXIT_DENIED
    } else {
        EXIT_OK
    }
}

/// Runs the engine over loaded objects.
pub fn evaluate(cfg: Arc<Config>, loaded: Vec<Loaded>) -> Outcome {
    let snapshot = Snapshot::from_objects(cfg, loaded.into_iter().map(|l| l.object));
    settle_all(&snapshot)
}

#[derive(Serialize)]
struct JsonViolation<'a> {
    reason: &'a str,
    action: &'a str,
    object: &'a str,
    hostname: Option<&'a str>,
    field: &'a str,
    message: &'a str,
}

#[derive(Serialize)]
struct JsonOutcome<'a> {
    records: &'a [Record],
    violations: Vec<JsonViolation<'a>>,
}

/// The stable JSON interface (ARCHITECTURE.md, "Stable interfaces").
pub fn to_json(outcome: &Outcome) -> String {
    let out = JsonOutcome {
        records: &outcome.records,
        violations: outcome
            .violations
            .iter()
            .map(|v| JsonViolation {
                reason: v.reason.as_str(),
                action: v.action.as_str(),
                object: &v.object,
                hostname: v.hostname.as_deref(),
                field: &v.field,
                message: &v.message,
            })
            .collect(),
    };
    // Serializing plain strings and numbers cannot fail.
    serde_json::to_string_pretty(&out).unwrap_or_default()
}

/// Text for a person: records as an aligned table, then findings grouped by object.
pub fn to_text(outcome: &Outcome, colour: bool) -> String {
    let paint = |code: &str, text: &str| {
        if colour {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    };
    let mut out = String::new();
    if outcome.records.is_empty() {
        out.push_str("No DNS records would be published.\n");
    } else {
        let rows: Vec<[String; 5]> = outcome
            .records
            .iter()
            .map(|r| {
                [
                    r.dns_name.clone(),
                    r.record_type.as_str().to_owned(),
                    r.targets.join(","),
                    r.gateways.join(","),
                    r.routes.join(","),
                ]
            })
            .collect();
        let header = ["NAME", "TYPE", "TARGETS", "GATEWAYS", "ROUTES"];
        let mut widths = header.map(str::len);
        for row in &rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let line = |cells: [&str; 5]| {
            let mut l = String::new();
            for (i, cell) in cells.iter().enumerate() {
                if i + 1 == cells.len() {
                    l.push_str(cell);
                } else {
                    let _ = write!(l, "{cell:<width$}  ", width = widths[i]);
                }
            }
            l.trim_end().to_owned() + "\n"
        };
        out.push_str(&paint("1", line(header).trim_end()));
        out.push('\n');
        for row in &rows {
            out.push_str(&line([&row[0], &row[1], &row[2], &row[3], &row[4]]));
        }
    }
    if !outcome.violations.is_empty() {
        out.push('\n');
        let mut current: Option<&str> = None;
        for v in &outcome.violations {
            if current != Some(&v.object) {
                current = Some(&v.object);
                let _ = writeln!(out, "{}", paint("1", &v.object));
            }
            let action = match v.action {
                Action::Deny => paint("31", "deny "),
                Action::Warn => paint("33", "warn "),
                Action::Audit => paint("36", "audit"),
                Action::Ignore => "ignore".to_owned(),
            };
            let _ = writeln!(out, "  {action} {}: {}", v.reason, v.message);
        }
    }
    let (denies, warns) = counts(&outcome.violations);
    let _ = writeln!(
        out,
        "\n{} record(s), {denies} denial(s), {warns} warning(s)",
        outcome.records.len()
    );
    out
}

fn counts(violations: &[Violation]) -> (usize, usize) {
    let denies = violations
        .iter()
        .filter(|v| v.action == Action::Deny)
        .count();
    let warns = violations
        .iter()
        .filter(|v| v.action == Action::Warn)
        .count();
    (denies, warns)
}
