//! `gateway-dns check`: the engine over YAML files, for pipelines and terminals; with
//! `--kubeconfig`, the files over the cluster's live objects as if applied.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::io::{IsTerminal, Write as _};
use std::sync::Arc;

use serde::Serialize;

use super::{EXIT_DENIED, EXIT_INPUT, EXIT_OK};
use crate::cli::{CheckArgs, FailOn, OutputFormat};
use crate::dns::registry::TxtRegistry;
use crate::dns::zone_file;
use crate::engine::settle::settle_all;
use crate::engine::zone::ZoneView;
use crate::engine::{Action, ActionCounts, Config, Finding, Record};
use crate::index::Snapshot;
use crate::model::{Object, ObjectKey, ObjectKind};
use crate::source::files::{self, Loaded, Place, Skipped};
use crate::source::kube;

/// Runs `check`; returns the process exit code.
pub fn run(args: &CheckArgs) -> u8 {
    let cfg = match args.engine.to_config() {
        Ok(cfg) => cfg.with_zones(&args.zones),
        Err(err) => return input_error(args.output, &err),
    };
    let report = match files::load_paths_in(&args.paths, args.default_namespace.as_deref()) {
        Ok(report) => report,
        Err(err) => return input_error(args.output, &err),
    };
    let reads_cluster = args.kubeconfig.is_some() || args.context.is_some() || args.read_cluster;
    let live = if reads_cluster {
        match read_live_objects(args.kubeconfig.as_deref(), args.context.as_deref()) {
            Ok(objects) => Some(objects),
            Err(err) => return input_error(args.output, err.as_ref()),
        }
    } else {
        None
    };
    let zone = match read_zone_files(args) {
        Ok(zone) => zone,
        Err(err) => return input_error(args.output, err.as_ref()),
    };
    let checked = check_over_zone(Arc::new(cfg), report.objects, report.skipped, live, zone);
    let text = match args.output {
        OutputFormat::Json => to_json(&checked) + "\n",
        OutputFormat::Github => to_github(&checked),
        OutputFormat::Text => {
            let colour = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
            to_text(&checked, colour)
        }
    };
    // A reader that went away (`| head`) is not an error worth a panic; the exit code stands.
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
    if checked.fails(args.fail_on) {
        EXIT_DENIED
    } else {
        EXIT_OK
    }
}

/// An input error: its message (with every cause, once) on stderr, and in GitHub's format on
/// stdout when that is the output, so the run's annotations say why it stopped.
fn input_error(output: OutputFormat, err: &(dyn std::error::Error + 'static)) -> u8 {
    let message = super::error_chain(err);
    eprintln!("gateway-dns check: {message}");
    if let OutputFormat::Github = output {
        println!(
            "::error title=gateway-dns check::{}",
            github_escape_data(&message)
        );
    }
    EXIT_INPUT
}

/// The cluster's Namespaces, Gateways, ListenerSets and routes, read once with `list`.
fn read_live_objects(
    kubeconfig: Option<&std::path::Path>,
    context: Option<&str>,
) -> anyhow::Result<Vec<Object>> {
    use anyhow::Context as _;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    Ok(runtime.block_on(kube::list_cluster(kubeconfig, context))?)
}

/// The names other owners hold in the `--zone-file` zones, read as serve's zone view reads a
/// provider's listing, under the `--txt-*` flags' registry.
fn read_zone_files(args: &CheckArgs) -> anyhow::Result<ZoneView> {
    use anyhow::Context as _;
    if args.zone_file.is_empty() {
        return Ok(ZoneView::new());
    }
    let mut listing = Vec::new();
    for path in &args.zone_file {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the zone file {}", path.display()))?;
        let records = zone_file::parse(&text)
            .with_context(|| format!("reading the zone file {}", path.display()))?;
        listing.extend(records);
    }
    let registry = TxtRegistry::new(args.txt_owner_id.clone())
        .with_wildcard_replacement(args.txt_wildcard_replacement.clone())
        .with_affixes(args.txt_prefix.clone(), args.txt_suffix.clone());
    Ok(crate::zone_view::view_of(&listing, &registry))
}

/// A finding and where its object (and field, when written down) is in the files.
#[derive(Debug, Clone)]
pub struct Located {
    pub violation: Finding,
    pub place: Option<Place>,
    pub field_line: Option<usize>,
}

/// What `check` found: the records and findings of the files' objects, located.
#[derive(Debug, Clone)]
pub struct Checked {
    pub records: Vec<Record>,
    pub findings: Vec<Located>,
    pub skipped: Vec<Skipped>,
}

impl Checked {
    /// The findings by action, counted as `serve`'s summary line counts them.
    pub fn counts(&self) -> ActionCounts {
        ActionCounts::of(self.findings.iter().map(|f| &f.violation))
    }

    /// Whether a finding reaches the `--fail-on` threshold.
    pub fn fails(&self, fail_on: FailOn) -> bool {
        self.findings.iter().any(|f| match fail_on {
            FailOn::Deny => f.violation.action == Action::Deny,
            FailOn::Warn => matches!(f.violation.action, Action::Deny | Action::Warn),
        })
    }
}

/// The files' objects, settled alone or over `live` ones (same-named objects replaced, as
/// `kubectl apply` would). Over live objects only the records and findings of the files'
/// objects are kept, so a cluster's own problems do not fail an app team's pipeline.
pub fn check(
    cfg: Arc<Config>,
    files: Vec<Loaded>,
    skipped: Vec<Skipped>,
    live: Option<Vec<Object>>,
) -> Checked {
    check_over_zone(cfg, files, skipped, live, ZoneView::new())
}

/// [`check`], with the names other owners hold in the zones (`--zone-file`).
pub fn check_over_zone(
    cfg: Arc<Config>,
    files: Vec<Loaded>,
    skipped: Vec<Skipped>,
    live: Option<Vec<Object>>,
    zone: ZoneView,
) -> Checked {
    let from_files: HashMap<String, &Loaded> = files
        .iter()
        .map(|loaded| (loaded.object.key().to_string(), loaded))
        .collect();
    let overlay = live.is_some();
    let mut world: HashMap<ObjectKey, Object> =
        live.into_iter().flatten().map(|o| (o.key(), o)).collect();
    for loaded in &files {
        let key = loaded.object.key();
        let object = if overlay {
            super::as_applied(&loaded.object, world.get(&key))
        } else {
            loaded.object.clone()
        };
        world.insert(key, object);
    }
    let outcome =
        settle_all(&Snapshot::from_objects(cfg, world.into_values()).with_zone_view(zone));
    // A record belongs to the files when one of its routes or Gateways came from them.
    let file_gateways: HashSet<String> = files
        .iter()
        .map(|l| l.object.key())
        .filter(|k| k.kind() == ObjectKind::Gateway)
        .map(|k| format!("{}/{}", k.namespace(), k.name()))
        .collect();
    let records = outcome
        .records
        .into_iter()
        .filter(|r| {
            !overlay
                || r.routes.iter().any(|route| from_files.contains_key(route))
                || r.gateways.iter().any(|gw| file_gateways.contains(gw))
        })
        .collect();
    let findings = outcome
        .violations
        .into_iter()
        .filter_map(|violation| {
            let loaded = from_files.get(&violation.object);
            if overlay && loaded.is_none() {
                return None;
            }
            let field_line = loaded.and_then(|l| l.fields.nearest_line(&violation.field));
            Some(Located {
                place: loaded.map(|l| l.place.clone()),
                field_line,
                violation,
            })
        })
        .collect();
    Checked {
        records,
        findings,
        skipped,
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonViolation<'a> {
    reason: &'a str,
    action: &'a str,
    object: &'a str,
    hostname: Option<&'a str>,
    field: &'a str,
    message: &'a str,
    file: Option<&'a str>,
    document: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    item: Option<usize>,
    /// The line the object starts on.
    line: Option<usize>,
    /// The line of `field`, or of its nearest ancestor written in the file.
    field_line: Option<usize>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonSkipped<'a> {
    file: &'a str,
    document: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    item: Option<usize>,
    line: Option<usize>,
    api_version: Option<&'a str>,
    kind: Option<&'a str>,
}

#[derive(Serialize)]
struct JsonSummary {
    records: usize,
    denials: usize,
    warnings: usize,
    audits: usize,
    skipped: usize,
}

#[derive(Serialize)]
struct JsonOutcome<'a> {
    records: &'a [Record],
    violations: Vec<JsonViolation<'a>>,
    skipped: Vec<JsonSkipped<'a>>,
    summary: JsonSummary,
}

/// The stable JSON interface (ARCHITECTURE.md, "Stable interfaces").
pub fn to_json(checked: &Checked) -> String {
    let counts = checked.counts();
    let out = JsonOutcome {
        records: &checked.records,
        violations: checked
            .findings
            .iter()
            .map(|f| {
                let v = &f.violation;
                JsonViolation {
                    reason: v.reason.as_str(),
                    action: v.action.as_str(),
                    object: &v.object,
                    hostname: v.hostname.as_deref(),
                    field: &v.field,
                    message: &v.message,
                    file: f.place.as_ref().map(|p| p.file.as_str()),
                    document: f.place.as_ref().map(|p| p.document),
                    item: f.place.as_ref().and_then(|p| p.item),
                    line: f.place.as_ref().and_then(|p| p.line),
                    field_line: f.field_line,
                }
            })
            .collect(),
        skipped: checked
            .skipped
            .iter()
            .map(|s| JsonSkipped {
                file: &s.place.file,
                document: s.place.document,
                item: s.place.item,
                line: s.place.line,
                api_version: s.api_version.as_deref(),
                kind: s.kind.as_deref(),
            })
            .collect(),
        summary: JsonSummary {
            records: checked.records.len(),
            denials: counts.denials,
            warnings: counts.warnings,
            audits: counts.audits,
            skipped: checked.skipped.len(),
        },
    };
    // Serializing plain strings and numbers cannot fail.
    serde_json::to_string_pretty(&out).unwrap_or_default()
}

/// `file:line` of a finding: its field's line when known, else its object's.
fn file_and_line(finding: &Located) -> Option<(&str, Option<usize>)> {
    let place = finding.place.as_ref()?;
    Some((&place.file, finding.field_line.or(place.line)))
}

/// Text for a person: records as an aligned table, then findings grouped by object, each
/// with the file and line to change.
pub fn to_text(checked: &Checked, colour: bool) -> String {
    let paint = |code: &str, text: &str| {
        if colour {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    };
    let mut out = String::new();
    if checked.records.is_empty() {
        out.push_str("No DNS records would be published.\n");
    } else {
        let rows: Vec<[String; 5]> = checked
            .records
            .iter()
            .map(|r| {
                [
                    if r.shared {
                        format!("{} (shared)", r.dns_name)
                    } else {
                        r.dns_name.clone()
                    },
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
    if !checked.findings.is_empty() {
        out.push('\n');
        let mut current: Option<&str> = None;
        for finding in &checked.findings {
            let v = &finding.violation;
            if current != Some(&v.object) {
                current = Some(&v.object);
                let _ = write!(out, "{}", paint("1", &v.object));
                if let Some(place) = &finding.place {
                    let _ = write!(out, "  {}", place_in_short(place));
                }
                out.push('\n');
            }
            let action = match v.action {
                Action::Deny => paint("31", "deny "),
                Action::Warn => paint("33", "warn "),
                Action::Audit => paint("36", "audit"),
                Action::Ignore => "ignore".to_owned(),
            };
            let _ = writeln!(out, "  {action} {}: {}", v.reason, v.message);
            if let Some((file, line)) = file_and_line(finding) {
                let at = line.map_or_else(|| file.to_owned(), |line| format!("{file}:{line}"));
                let _ = writeln!(out, "        at {at} ({})", v.field);
            }
        }
    }
    if !checked.skipped.is_empty() {
        let _ = writeln!(
            out,
            "\nSkipped {} document(s) that gateway-dns does not read:",
            checked.skipped.len()
        );
        for skipped in &checked.skipped {
            let _ = writeln!(out, "  {skipped}");
        }
    }
    let _ = writeln!(out, "\n{}", summary_line(checked));
    out
}

/// `file:line (document N, items[i])`, the way editors and terminals link a place.
fn place_in_short(place: &Place) -> String {
    let mut text = place.file.clone();
    if let Some(line) = place.line {
        let _ = write!(text, ":{line}");
    }
    let _ = write!(text, " (document {}", place.document);
    if let Some(item) = place.item {
        let _ = write!(text, ", items[{item}]");
    }
    text.push(')');
    text
}

fn summary_line(checked: &Checked) -> String {
    let counts = checked.counts();
    format!(
        "{} record(s), {} denial(s), {} warning(s), {} skipped document(s)",
        checked.records.len(),
        counts.denials,
        counts.warnings,
        checked.skipped.len()
    )
}

/// GitHub Actions workflow commands: an `error` per denial, a `warning` per warning, a
/// `notice` per audit finding and per skipped document, then the summary as a plain line.
pub fn to_github(checked: &Checked) -> String {
    let mut out = String::new();
    let location = |file: &str, line: Option<usize>| {
        let mut properties = format!("file={}", github_escape_property(file));
        if let Some(line) = line {
            let _ = write!(properties, ",line={line}");
        }
        properties
    };
    for finding in &checked.findings {
        let v = &finding.violation;
        let command = match v.action {
            Action::Deny => "error",
            Action::Warn => "warning",
            Action::Audit => "notice",
            Action::Ignore => continue,
        };
        let mut properties = file_and_line(finding)
            .map(|(file, line)| location(file, line) + ",")
            .unwrap_or_default();
        properties.push_str(&format!(
            "title={}",
            github_escape_property(&format!("{} ({})", v.reason, v.object))
        ));
        let _ = writeln!(
            out,
            "::{command} {properties}::{}",
            github_escape_data(&format!("{}: {} [{}]", v.reason, v.message, v.field))
        );
    }
    for skipped in &checked.skipped {
        let _ = writeln!(
            out,
            "::notice {},title=Skipped::{}",
            location(&skipped.place.file, skipped.place.line),
            github_escape_data(&format!("not read by gateway-dns: {skipped}"))
        );
    }
    let _ = writeln!(out, "gateway-dns check: {}", summary_line(checked));
    out
}

/// Escapes a workflow command's message (GitHub's `escapeData`).
fn github_escape_data(text: &str) -> String {
    text.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// Escapes a workflow command's property value (GitHub's `escapeProperty`).
fn github_escape_property(text: &str) -> String {
    github_escape_data(text)
        .replace(':', "%3A")
        .replace(',', "%2C")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn github_escaping() {
        assert_eq!(github_escape_data("50%\nnext"), "50%25%0Anext");
        assert_eq!(
            github_escape_property("HostnameConflict (HTTPRoute/a/b), x:y"),
            "HostnameConflict (HTTPRoute/a/b)%2C x%3Ay"
        );
    }
}
