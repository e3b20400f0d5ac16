//! The files source: YAML/JSON files and directories (multi-document, `kind: List`), decoded
//! with the same decoder as every other source.

use std::collections::HashMap;
use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use super::locations::{DocumentLines, DuplicateKey, Scan, has_duplicate_key, scan};
use crate::model::{self, Object, ObjectKey, ObjectKind};

/// Where a document came from: file, 1-based document number, item within a `List`, and the
/// 1-based line the object starts on (when the text could be located).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    pub file: String,
    pub document: usize,
    pub item: Option<usize>,
    pub line: Option<usize>,
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: document {}", self.file, self.document)?;
        if let Some(item) = self.item {
            write!(f, ", items[{item}]")?;
        }
        if let Some(line) = self.line {
            write!(f, " (line {line})")?;
        }
        Ok(())
    }
}

/// Kinds of the Gateway API group that gateway-dns knows and does not need: skipped like any
/// other kind. Any other kind in the group is a typo (`HTTPRoutes`) and an input error.
pub const GATEWAY_API_KINDS_NOT_READ: [&str; 6] = [
    "GatewayClass",
    "ReferenceGrant",
    "BackendTLSPolicy",
    "BackendLBPolicy",
    "BackendTrafficPolicy",
    "Mesh",
];

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{place}: not valid {format}: {message}")]
    Syntax {
        place: Box<Place>,
        format: &'static str,
        message: String,
    },
    #[error("{place}: {message}")]
    NotAnObject { place: Box<Place>, message: String },
    #[error("{place}: {object}: {source}")]
    Decode {
        place: Box<Place>,
        object: String,
        #[source]
        source: model::DecodeError,
    },
    #[error("{key} is defined twice: at {first} and at {second}")]
    Duplicate {
        key: Box<ObjectKey>,
        first: Box<Place>,
        second: Box<Place>,
    },
    #[error(
        "{file}:{line}:{column}: document {document}: duplicate key {key:?} in {mapping} (first written on line {first_line}); documents joined without `---`?",
        line = .duplicate.line,
        column = .duplicate.column,
        document = .duplicate.document,
        key = .duplicate.key,
        mapping = if .duplicate.mapping.is_empty() { "the top-level mapping".to_owned() } else { format!("`{}`", .duplicate.mapping) },
        first_line = .duplicate.first_line,
    )]
    DuplicateKey {
        file: String,
        duplicate: Box<DuplicateKey>,
    },
    #[error("{place}: unknown kind {kind:?} in {api_version} (a typo? gateway-dns reads {known})")]
    UnknownGatewayKind {
        place: Box<Place>,
        api_version: String,
        kind: String,
        known: String,
    },
    #[error("{0}: no .yaml, .yml or .json files found")]
    Empty(String),
}

/// A loaded object and where it was read.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub object: Object,
    pub place: Place,
    /// Lines of the object's fields, by path relative to the object (`spec.hostnames[0]`).
    pub fields: DocumentLines,
}

/// A document that was read but holds nothing gateway-dns reads: another kind, or an empty file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    pub place: Place,
    /// None for an empty file.
    pub api_version: Option<String>,
    pub kind: Option<String>,
}

impl fmt::Display for Skipped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.kind, &self.api_version) {
            (Some(kind), Some(api_version)) => write!(f, "{}: {kind} ({api_version})", self.place),
            _ => write!(f, "{}: no documents", self.place.file),
        }
    }
}

/// Everything read from some paths: the objects gateway-dns reads and the documents it skipped.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub objects: Vec<Loaded>,
    pub skipped: Vec<Skipped>,
    /// The namespace of objects written without one (kubectl's `-n`); None: `default`.
    default_namespace: Option<String>,
}

/// Reads every path (file, directory, or `-` for stdin) into objects. Documents of kinds
/// gateway-dns does not read are skipped; anything unreadable is an error naming its place.
pub fn load_paths(paths: &[PathBuf]) -> Result<Vec<Loaded>, Error> {
    load_paths_with_skipped(paths).map(|report| report.objects)
}

/// [`load_paths`], also saying which documents were skipped.
pub fn load_paths_with_skipped(paths: &[PathBuf]) -> Result<Report, Error> {
    load_paths_in(paths, None)
}

/// [`load_paths_with_skipped`], with the objects written without a namespace in `namespace`
/// (as `kubectl apply -n` puts them) rather than in `default`.
pub fn load_paths_in(paths: &[PathBuf], namespace: Option<&str>) -> Result<Report, Error> {
    let mut report = Report {
        default_namespace: namespace.map(str::to_owned),
        ..Report::default()
    };
    for path in paths {
        if path.as_os_str() == "-" {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .map_err(|source| Error::Io {
                    path: "<stdin>".to_owned(),
                    source,
                })?;
            parse_text_into("<stdin>", &text, false, &mut report)?;
            continue;
        }
        for file in files_under(path)? {
            let (name, text, is_json) = read_manifest(&file)?;
            parse_text_into(&name, &text, is_json, &mut report)?;
        }
    }
    check_duplicates(&report.objects)?;
    Ok(report)
}

/// The manifest files of a path given on the command line; none is an error.
fn files_under(path: &Path) -> Result<Vec<PathBuf>, Error> {
    let files = collect_files(path)?;
    if files.is_empty() {
        return Err(Error::Empty(path.display().to_string()));
    }
    Ok(files)
}

/// One manifest file: its name as findings cite it, its text, and whether it is JSON.
fn read_manifest(file: &Path) -> Result<(String, String, bool), Error> {
    let name = file.display().to_string();
    let text = std::fs::read_to_string(file).map_err(|source| Error::Io {
        path: name.clone(),
        source,
    })?;
    let is_json = file.extension().is_some_and(|e| e == "json");
    Ok((name, text, is_json))
}

/// The objects of every path, as [`load_paths`] reads them, for `serve`: each YAML document is
/// decoded as it is parsed and dropped, and the lines of fields are not kept, so reading costs
/// one document at a time rather than a whole file's documents and their lines. Anything wrong
/// is read again the way [`load_paths`] reads it, for the same error.
pub fn load_objects(paths: &[PathBuf]) -> Result<Vec<Object>, Error> {
    load_objects_with_skipped(paths).map(|(objects, _)| objects)
}

/// [`load_objects`], also saying which documents were skipped, as `check` does (without their
/// lines, which this reader does not keep).
pub fn load_objects_with_skipped(paths: &[PathBuf]) -> Result<(Vec<Object>, Vec<Skipped>), Error> {
    let mut objects = Vec::new();
    let mut skipped = Vec::new();
    for path in paths {
        if path.as_os_str() == "-" {
            let report = load_paths_with_skipped(std::slice::from_ref(path))?;
            objects.extend(report.objects.into_iter().map(|l| l.object));
            skipped.extend(report.skipped);
            continue;
        }
        for file in files_under(path)? {
            let (name, text, is_json) = read_manifest(&file)?;
            let (start, skipped_start) = (objects.len(), skipped.len());
            if is_json || !decode_each_document(&name, &text, &mut objects, &mut skipped) {
                objects.truncate(start);
                skipped.truncate(skipped_start);
                let mut report = Report::default();
                parse_text_into(&name, &text, is_json, &mut report)?;
                objects.extend(report.objects.into_iter().map(|l| l.object));
                skipped.extend(report.skipped);
            }
        }
    }
    let mut seen = std::collections::HashSet::with_capacity(objects.len());
    if !objects.iter().all(|object| seen.insert(object.key())) {
        // Names the places of both definitions.
        load_paths(paths)?;
    }
    Ok((objects, skipped))
}

/// The objects of one YAML text, each document decoded as it is parsed; false when anything is
/// wrong (a duplicate key, bad YAML, an object that does not decode) or the text holds nothing
/// (the full reader says so, as `check` does).
fn decode_each_document(
    file: &str,
    text: &str,
    out: &mut Vec<Object>,
    skipped: &mut Vec<Skipped>,
) -> bool {
    if has_duplicate_key(text) {
        return false;
    }
    let no_lines = DocumentLines::default();
    let mut with_content = 0;
    for (i, document) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let Ok(value) = Value::deserialize(document) else {
            return false;
        };
        with_content += usize::from(!value.is_null());
        let place = Place {
            file: file.to_owned(),
            document: i + 1,
            item: None,
            line: None,
        };
        let mut report = Report::default();
        if decode_document(place, value, &no_lines, &mut report).is_err() {
            return false;
        }
        out.extend(report.objects.into_iter().map(|l| l.object));
        skipped.extend(report.skipped);
    }
    with_content > 0
}

/// Files under a path: the path itself if a file, else every .yaml/.yml/.json below it, sorted.
pub fn collect_files(path: &Path) -> Result<Vec<PathBuf>, Error> {
    let io_err = |source| Error::Io {
        path: path.display().to_string(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(io_err)?;
    if meta.is_file() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut files = Vec::new();
    let mut pending = vec![path.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|source| Error::Io {
            path: dir.display().to_string(),
            source,
        })?;
        for entry in entries {
            let entry = entry.map_err(|source| Error::Io {
                path: dir.display().to_string(),
                source,
            })?;
            let entry_path = entry.path();
            let name = entry.file_name();
            // Hidden entries include Kubernetes' `..data` symlink farms: read through the plain names.
            if name.to_string_lossy().starts_with('.') {
                continue;
            }
            if entry_path.is_dir() {
                pending.push(entry_path);
            } else if entry_path
                .extension()
                .is_some_and(|e| e == "yaml" || e == "yml" || e == "json")
            {
                files.push(entry_path);
            }
        }
    }
    files.sort();
    Ok(files)
}

/// Parses one file's text (multi-document YAML, or JSON documents) and decodes its objects.
pub fn parse_text(
    file: &str,
    text: &str,
    is_json: bool,
    out: &mut Vec<Loaded>,
) -> Result<(), Error> {
    let mut report = Report::default();
    parse_text_into(file, text, is_json, &mut report)?;
    out.append(&mut report.objects);
    Ok(())
}

/// [`parse_text`] into a report that also keeps the skipped documents.
pub fn parse_text_into(
    file: &str,
    text: &str,
    is_json: bool,
    report: &mut Report,
) -> Result<(), Error> {
    let place = |document: usize, line: Option<usize>| Place {
        file: file.to_owned(),
        document,
        item: None,
        line,
    };
    // Documents that hold anything at all (an empty one between `---` is no news).
    let mut documents_with_content = 0;
    if is_json {
        let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Value>();
        let mut number = 0;
        loop {
            let start = stream.byte_offset();
            let Some(doc) = stream.next() else { break };
            number += 1;
            let value = doc.map_err(|err| Error::Syntax {
                place: Box::new(place(number, None)),
                format: "JSON",
                message: err.to_string(),
            })?;
            // JSON is YAML: the same scan finds the lines and duplicate keys of this document.
            let slice = &text[start..stream.byte_offset()];
            let leading = slice.len() - slice.trim_start().len();
            let first_line = text[..start + leading].matches('\n').count() + 1;
            let lines = match scan(slice.trim_start(), first_line) {
                Scan::Documents(mut docs) if docs.len() == 1 => docs.pop().unwrap_or_default(),
                Scan::Duplicate(duplicate) => {
                    return Err(Error::DuplicateKey {
                        file: file.to_owned(),
                        duplicate: Box::new(DuplicateKey {
                            document: number,
                            ..duplicate
                        }),
                    });
                }
                _ => DocumentLines::default(),
            };
            documents_with_content += usize::from(!value.is_null());
            decode_document(place(number, lines.root()), value, &lines, report)?;
        }
    } else {
        let located = match scan(text, 1) {
            Scan::Duplicate(duplicate) => {
                return Err(Error::DuplicateKey {
                    file: file.to_owned(),
                    duplicate: Box::new(duplicate),
                });
            }
            Scan::Documents(docs) => docs,
            // The decoder below says what is wrong.
            Scan::Unreadable => Vec::new(),
        };
        let mut values = Vec::new();
        for (i, document) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
            values.push(Value::deserialize(document).map_err(|err| Error::Syntax {
                place: Box::new(place(i + 1, None)),
                format: "YAML",
                message: err.to_string(),
            })?);
        }
        // Lines are only trusted when both parsers saw the same documents.
        let located = if located.len() == values.len() {
            located
        } else {
            Vec::new()
        };
        for (i, value) in values.into_iter().enumerate() {
            let lines = located.get(i).cloned().unwrap_or_default();
            documents_with_content += usize::from(!value.is_null());
            decode_document(place(i + 1, lines.root()), value, &lines, report)?;
        }
    }
    // A file with nothing in it is worth a word: it may be a path or a generator gone wrong.
    if documents_with_content == 0 {
        report.skipped.push(Skipped {
            place: place(1, None),
            api_version: None,
            kind: None,
        });
    }
    Ok(())
}

fn decode_document(
    place: Place,
    value: Value,
    lines: &DocumentLines,
    report: &mut Report,
) -> Result<(), Error> {
    match &value {
        Value::Null => return Ok(()),
        Value::Object(_) => {}
        _ => {
            return Err(Error::NotAnObject {
                place: Box::new(place),
                message: "expected a Kubernetes object (a mapping with apiVersion and kind)"
                    .to_owned(),
            });
        }
    }
    let Some((_, kind)) = model::type_of(&value) else {
        return Err(Error::NotAnObject {
            place: Box::new(place),
            message: "missing apiVersion or kind".to_owned(),
        });
    };
    if kind == "List" || (kind.ends_with("List") && value.get("items").is_some()) {
        let items = value
            .get("items")
            .and_then(Value::as_array)
            .ok_or_else(|| Error::NotAnObject {
                place: Box::new(place.clone()),
                message: format!("{kind} without an items array"),
            })?;
        for (i, item) in items.iter().enumerate() {
            let item_lines = lines.below(&format!("items[{i}]"));
            let item_place = Place {
                item: Some(i),
                line: item_lines.root().or(place.line),
                ..place.clone()
            };
            decode_one(item_place, item, item_lines, report)?;
        }
        return Ok(());
    }
    decode_one(place, &value, lines.clone(), report)
}

/// Whether a document says its namespace (an empty one is none, as kubectl reads it).
fn has_namespace(value: &Value) -> bool {
    value
        .get("metadata")
        .and_then(|meta| meta.get("namespace"))
        .and_then(Value::as_str)
        .is_some_and(|namespace| !namespace.is_empty())
}

fn decode_one(
    place: Place,
    value: &Value,
    fields: DocumentLines,
    report: &mut Report,
) -> Result<(), Error> {
    let Some((api_version, kind)) = model::type_of(value) else {
        return Err(Error::NotAnObject {
            place: Box::new(place),
            message: "missing apiVersion or kind".to_owned(),
        });
    };
    let decoded = match &report.default_namespace {
        Some(namespace) if !has_namespace(value) => {
            // A copy only of the documents that need one; the decoder ignores the namespace
            // of a cluster-scoped kind.
            let mut value = value.clone();
            if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.insert("namespace".to_owned(), Value::String(namespace.clone()));
            }
            model::decode_value(&value)
        }
        _ => model::decode_value(value),
    };
    match decoded {
        Ok(Some(object)) => report.objects.push(Loaded {
            object,
            place,
            fields,
        }),
        Ok(None) => {
            let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
            if group == model::GATEWAY_GROUP && !GATEWAY_API_KINDS_NOT_READ.contains(&kind) {
                let known = ObjectKind::ALL
                    .into_iter()
                    .filter(|k| k.group() == model::GATEWAY_GROUP)
                    .map(|k| format!("{} ({})", k.kind(), k.versions().join(", ")))
                    .collect::<Vec<_>>()
                    .join(", ");
                return Err(Error::UnknownGatewayKind {
                    place: Box::new(place),
                    api_version: api_version.to_owned(),
                    kind: kind.to_owned(),
                    known,
                });
            }
            report.skipped.push(Skipped {
                place,
                api_version: Some(api_version.to_owned()),
                kind: Some(kind.to_owned()),
            });
        }
        Err(source) => {
            let meta = value.get("metadata");
            let name = meta
                .and_then(|m| m.get("name"))
                .and_then(Value::as_str)
                .unwrap_or("<unnamed>");
            let object = match meta
                .and_then(|m| m.get("namespace"))
                .and_then(Value::as_str)
            {
                Some(ns) => format!("{kind} {ns}/{name}"),
                None => format!("{kind} {name}"),
            };
            return Err(Error::Decode {
                place: Box::new(place),
                object,
                source,
            });
        }
    }
    Ok(())
}

fn check_duplicates(loaded: &[Loaded]) -> Result<(), Error> {
    let mut seen: HashMap<ObjectKey, &Place> = HashMap::new();
    for item in loaded {
        let key = item.object.key();
        if let Some(first) = seen.get(&key) {
            return Err(Error::Duplicate {
                key: Box::new(key),
                first: Box::new((*first).clone()),
                second: Box::new(item.place.clone()),
            });
        }
        seen.insert(key, &item.place);
    }
    Ok(())
}

/// A fingerprint of everything under the paths (file names, sizes, modification times), cheap
/// enough to poll; Secret/ConfigMap volumes swap a `..data` symlink, which changes the targets'
/// metadata as seen through the plain names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fingerprint(Vec<(PathBuf, u64, Option<std::time::SystemTime>)>);

fn fingerprint(paths: &[PathBuf]) -> Result<Fingerprint, Error> {
    let mut out = Vec::new();
    for path in paths {
        for file in collect_files(path)? {
            let meta = std::fs::metadata(&file).map_err(|source| Error::Io {
                path: file.display().to_string(),
                source,
            })?;
            out.push((file, meta.len(), meta.modified().ok()));
        }
    }
    Ok(Fingerprint(out))
}

/// Reads the paths into `index` (replacing its content): the fingerprint taken before reading,
/// for [`watch`], and the number of objects. The documents are dropped as soon as their objects
/// are decoded; only the objects reach the index.
pub fn load_into(
    paths: &[PathBuf],
    index: &crate::index::Index,
) -> Result<(Fingerprint, usize), Error> {
    let print = fingerprint(paths)?;
    let (objects, skipped) = load_objects_with_skipped(paths)?;
    // As `check` lists them: a document of another kind may be a typo in its kind.
    for document in &skipped {
        tracing::info!(document = %document, "skipped a document gateway-dns does not read");
    }
    let count = objects.len();
    index.replace_all(objects);
    Ok((print, count))
}

/// Keeps an index equal to the files under `paths`: loads them unless `last_seen` says they
/// were loaded as they are (see [`load_into`]), then re-reads whenever they change (polled every
/// `interval`). A load that fails keeps the last good content and logs why. `ready` turns true
/// after the first successful load.
pub async fn watch(
    paths: Vec<PathBuf>,
    index: crate::index::Index,
    interval: std::time::Duration,
    ready: tokio::sync::watch::Sender<bool>,
    mut last_seen: Option<Fingerprint>,
) {
    loop {
        let paths_now = paths.clone();
        let scanned = tokio::task::spawn_blocking(move || {
            let print = fingerprint(&paths_now)?;
            Ok::<_, Error>(print)
        })
        .await;
        match scanned {
            Ok(Ok(print)) if last_seen.as_ref() != Some(&print) => {
                let (paths_now, index_now) = (paths.clone(), index.clone());
                match tokio::task::spawn_blocking(move || load_into(&paths_now, &index_now)).await {
                    Ok(Ok((_, count))) => {
                        tracing::info!(objects = count, "loaded manifests");
                        last_seen = Some(print);
                        ready.send_replace(true);
                    }
                    Ok(Err(err)) => {
                        tracing::error!(error = %err, "manifests not reloaded; keeping the last good content");
                        last_seen = Some(print);
                    }
                    Err(err) => {
                        if shutting_down(&err, "manifest loader failed") {
                            return;
                        }
                    }
                }
            }
            Ok(Ok(_)) => {}
            Ok(Err(err)) => tracing::error!(error = %err, "cannot scan manifests"),
            Err(err) => {
                if shutting_down(&err, "manifest scan failed") {
                    return;
                }
            }
        }
        tokio::time::sleep(interval).await;
    }
}

/// Whether a blocking step of [`watch`] was cancelled, which happens only when the runtime
/// shuts down (the end of `serve --once`, or a signal): its pool cancels the steps not yet
/// started and wakes their waiter before the waiter itself is dropped. That is the end of the
/// watch, not a failure. Anything else (a panic) is logged as `what`.
fn shutting_down(err: &tokio::task::JoinError, what: &str) -> bool {
    if err.is_cancelled() {
        return true;
    }
    tracing::error!(error = %err, "{what}");
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Vec<Loaded>, Error> {
        let mut out = Vec::new();
        parse_text("t.yaml", text, false, &mut out)?;
        check_duplicates(&out)?;
        Ok(out)
    }

    #[test]
    fn a_step_cancelled_by_the_runtime_ends_the_watch_without_an_error() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let (cancelled, panicked) = runtime.block_on(async {
            let pending = tokio::spawn(std::future::pending::<()>());
            pending.abort();
            let panics = tokio::spawn(async { panic!("a bug") });
            (pending.await.unwrap_err(), panics.await.unwrap_err())
        });
        assert!(shutting_down(&cancelled, "manifest scan failed"));
        assert!(!shutting_down(&panicked, "manifest scan failed"));
    }

    #[test]
    fn serves_reader_lists_skipped_documents_as_checks_does() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("a.yaml"),
            "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Service\nmetadata: {name: s}\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("b.yaml"), "# nothing yet\n").unwrap();
        let paths = [dir.path().to_path_buf()];
        let (objects, skipped) = load_objects_with_skipped(&paths).unwrap();
        assert_eq!(objects.len(), 1);
        let checks = load_paths_with_skipped(&paths).unwrap().skipped;
        let described = |list: &[Skipped]| -> Vec<(String, usize, Option<String>)> {
            list.iter()
                .map(|s| (s.place.file.clone(), s.place.document, s.kind.clone()))
                .collect()
        };
        assert_eq!(described(&skipped), described(&checks));
        assert_eq!(skipped.len(), 2, "{skipped:?}");
    }

    #[test]
    fn objects_without_a_namespace_take_the_one_given() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.yaml");
        std::fs::write(
            &path,
            "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: a}\n---\n\
             apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: b, namespace: x}\n---\n\
             apiVersion: v1\nkind: Namespace\nmetadata: {name: c}\n",
        )
        .unwrap();
        let keys = |namespace: Option<&str>| -> Vec<String> {
            load_paths_in(std::slice::from_ref(&path), namespace)
                .unwrap()
                .objects
                .iter()
                .map(|loaded| loaded.object.key().to_string())
                .collect()
        };
        assert_eq!(
            keys(Some("apps")),
            ["HTTPRoute/apps/a", "HTTPRoute/x/b", "Namespace/c"]
        );
        assert_eq!(
            keys(None),
            ["HTTPRoute/default/a", "HTTPRoute/x/b", "Namespace/c"]
        );
    }

    #[test]
    fn multi_document_and_lists() {
        let text = "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\n---\napiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Namespace\n  metadata: {name: b}\n- apiVersion: v1\n  kind: Service\n  metadata: {name: s}\n";
        let loaded = parse(text).unwrap();
        assert_eq!(loaded.len(), 2);
        assert_eq!(
            loaded[1].place.to_string(),
            "t.yaml: document 3, items[0] (line 9)"
        );
    }

    #[test]
    fn errors_name_file_document_and_field() {
        let text = "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: r, namespace: x}\nspec:\n  parentRefs: [{name: 5, port: web}]\n";
        let err = parse(text).unwrap_err().to_string();
        assert!(
            err.starts_with("t.yaml: document 2 (line 5): HTTPRoute x/r: spec.parentRefs[0]"),
            "{err}"
        );
    }

    #[test]
    fn syntax_errors_and_duplicates() {
        let err = parse("a: [unclosed\n").unwrap_err().to_string();
        assert!(err.contains("document 1: not valid YAML"), "{err}");
        let dup = "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n";
        let err = parse(dup).unwrap_err().to_string();
        assert!(
            err.contains(
                "defined twice: at t.yaml: document 1 (line 1) and at t.yaml: document 2 (line 5)"
            ),
            "{err}"
        );
        let err = parse("- just\n- a list\n").unwrap_err().to_string();
        assert!(err.contains("expected a Kubernetes object"), "{err}");
    }

    fn read(text: &str) -> Result<Report, Error> {
        let mut report = Report::default();
        parse_text_into("t.yaml", text, false, &mut report)?;
        Ok(report)
    }

    #[test]
    fn skipped_documents_are_reported_with_place_and_kind() {
        let text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n---\n---\napiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: g}\n";
        let report = read(text).unwrap();
        assert!(report.objects.is_empty());
        let skipped: Vec<String> = report.skipped.iter().map(ToString::to_string).collect();
        assert_eq!(
            skipped,
            [
                "t.yaml: document 1 (line 1): ConfigMap (v1)",
                "t.yaml: document 3 (line 6): GatewayClass (gateway.networking.k8s.io/v1)",
            ]
        );
        for empty in ["", "# nothing here\n", "---\n---\n"] {
            let report = read(empty).unwrap();
            assert_eq!(report.skipped.len(), 1, "{empty:?}");
            assert_eq!(report.skipped[0].to_string(), "t.yaml: no documents");
        }
    }

    #[test]
    fn unknown_gateway_api_kinds_are_errors() {
        let text = "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoutes\nmetadata: {name: r, namespace: a}\n";
        let err = read(text).unwrap_err().to_string();
        assert!(
            err.starts_with("t.yaml: document 2 (line 5): unknown kind \"HTTPRoutes\" in gateway.networking.k8s.io/v1"),
            "{err}"
        );
        assert!(err.contains("HTTPRoute (v1, v1beta1)"), "{err}");
    }

    #[test]
    fn duplicate_keys_are_errors_with_line_and_column() {
        // Two files joined without `---`: the route's keys land in the Gateway's mapping.
        let text = "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: g, namespace: a}\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\n";
        let err = read(text).unwrap_err().to_string();
        assert!(
            err.starts_with("t.yaml:8:1: document 2: duplicate key \"apiVersion\" in the top-level mapping (first written on line 5)"),
            "{err}"
        );
        let json = "{\"apiVersion\": \"v1\", \"kind\": \"Namespace\", \"metadata\": {\"name\": \"a\", \"name\": \"b\"}}";
        let mut json_report = Report::default();
        let err = parse_text_into("t.json", json, true, &mut json_report)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("t.json:1:") && err.contains("duplicate key \"name\" in `metadata`"),
            "{err}"
        );
    }

    /// `serve`'s reader gives the objects and the errors `check`'s reader gives.
    #[test]
    fn objects_alone_read_as_with_their_places() {
        let good = "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\n---\napiVersion: v1\nkind: List\nitems:\n- apiVersion: gateway.networking.k8s.io/v1\n  kind: HTTPRoute\n  metadata: {name: r, namespace: a}\n  spec:\n    hostnames: [a.example.com]\n- apiVersion: v1\n  kind: Service\n  metadata: {name: s}\n";
        let json =
            "{\"apiVersion\": \"v1\", \"kind\": \"Namespace\", \"metadata\": {\"name\": \"b\"}}";
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("good.yaml"), good).unwrap();
        std::fs::write(dir.path().join("more.json"), json).unwrap();
        let paths = [dir.path().to_path_buf()];
        let with_places: Vec<Object> = load_paths(&paths)
            .unwrap()
            .into_iter()
            .map(|l| l.object)
            .collect();
        let alone = load_objects(&paths).unwrap();
        assert_eq!(alone.len(), 3);
        assert_eq!(
            alone.iter().map(Object::key).collect::<Vec<_>>(),
            with_places.iter().map(Object::key).collect::<Vec<_>>()
        );
        for bad in [
            // a duplicate key, a bad field, bad YAML, an object defined twice
            "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\nkind: Namespace\n",
            "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: r, namespace: x}\nspec:\n  parentRefs: [{name: 5, port: web}]\n",
            "a: [unclosed\n",
            "apiVersion: v1\nkind: Namespace\nmetadata: {name: b}\n",
        ] {
            std::fs::write(dir.path().join("bad.yaml"), bad).unwrap();
            let expected = load_paths(&paths).unwrap_err().to_string();
            assert_eq!(load_objects(&paths).unwrap_err().to_string(), expected);
        }
    }

    #[test]
    fn objects_carry_their_field_lines() {
        let text = "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: r, namespace: a}\nspec:\n  hostnames:\n  - a.example.com\n";
        let report = read(text).unwrap();
        let route = &report.objects[1];
        assert_eq!(route.place.line, Some(5));
        assert_eq!(route.fields.line_of("spec.hostnames[0]"), Some(10));
    }
}
