//! The files source: YAML/JSON files and directories (multi-document, `kind: List`), decoded
//! with the same decoder as every other source.

use std::collections::HashMap;
use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use crate::model::{self, Object, ObjectKey};

/// Where a document came from: file, 1-based document number, and item within a `List`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    pub file: String,
    pub document: usize,
    pub item: Option<usize>,
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: document {}", self.file, self.document)?;
        if let Some(item) = self.item {
            write!(f, ", items[{item}]")?;
        }
        Ok(())
    }
}

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
        place: Place,
        format: &'static str,
        message: String,
    },
    #[error("{place}: {message}")]
    NotAnObject { place: Place, message: String },
    #[error("{place}: {object}: {source}")]
    Decode {
        place: Place,
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
    #[error("{0}: no .yaml, .yml or .json files found")]
    Empty(String),
}

/// A loaded object and where it was read.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub object: Object,
    pub place: Place,
}

/// Reads every path (file, directory, or `-` for stdin) into objects. Documents of kinds
/// gateway-dns does not read are skipped; anything unreadable is an error naming its place.
pub fn load_paths(paths: &[PathBuf]) -> Result<Vec<Loaded>, Error> {
    let mut loaded = Vec::new();
    for path in paths {
        if path.as_os_str() == "-" {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .map_err(|source| Error::Io {
                    path: "<stdin>".to_owned(),
                    source,
                })?;
            parse_text("<stdin>", &text, false, &mut loaded)?;
            continue;
        }
        let files = collect_files(path)?;
        if files.is_empty() {
            return Err(Error::Empty(path.display().to_string()));
        }
        for file in files {
            let text = std::fs::read_to_string(&file).map_err(|source| Error::Io {
                path: file.display().to_string(),
                source,
            })?;
            let is_json = file.extension().is_some_and(|e| e == "json");
            parse_text(&file.display().to_string(), &text, is_json, &mut loaded)?;
        }
    }
    check_duplicates(&loaded)?;
    Ok(loaded)
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
    let place = |document: usize| Place {
        file: file.to_owned(),
        document,
        item: None,
    };
    if is_json {
        let stream = serde_json::Deserializer::from_str(text).into_iter::<Value>();
        for (i, doc) in stream.enumerate() {
            let value = doc.map_err(|err| Error::Syntax {
                place: place(i + 1),
                format: "JSON",
                message: err.to_string(),
            })?;
            decode_document(place(i + 1), value, out)?;
        }
        return Ok(());
    }
    for (i, document) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let value = Value::deserialize(document).map_err(|err| Error::Syntax {
            place: place(i + 1),
            format: "YAML",
            message: err.to_string(),
        })?;
        decode_document(place(i + 1), value, out)?;
    }
    Ok(())
}

fn decode_document(place: Place, value: Value, out: &mut Vec<Loaded>) -> Result<(), Error> {
    match &value {
        Value::Null => return Ok(()),
        Value::Object(_) => {}
        _ => {
            return Err(Error::NotAnObject {
                place,
                message: "expected a Kubernetes object (a mapping with apiVersion and kind)"
                    .to_owned(),
            });
        }
    }
    let Some((_, kind)) = model::type_of(&value) else {
        return Err(Error::NotAnObject {
            place,
            message: "missing apiVersion or kind".to_owned(),
        });
    };
    if kind == "List" || (kind.ends_with("List") && value.get("items").is_some()) {
        let items = value
            .get("items")
            .and_then(Value::as_array)
            .ok_or_else(|| Error::NotAnObject {
                place: place.clone(),
                message: format!("{kind} without an items array"),
            })?;
        for (i, item) in items.iter().enumerate() {
            let item_place = Place {
                item: Some(i),
                ..place.clone()
            };
            decode_one(item_place, item, out)?;
        }
        return Ok(());
    }
    decode_one(place, &value, out)
}

fn decode_one(place: Place, value: &Value, out: &mut Vec<Loaded>) -> Result<(), Error> {
    if model::type_of(value).is_none() {
        return Err(Error::NotAnObject {
            place,
            message: "missing apiVersion or kind".to_owned(),
        });
    }
    match model::decode_value(value) {
        Ok(Some(object)) => out.push(Loaded { object, place }),
        Ok(None) => {}
        Err(source) => {
            let kind = value
                .get("kind")
                .and_then(Value::as_str)
                .unwrap_or("object");
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
                place,
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
fn fingerprint(
    paths: &[PathBuf],
) -> Result<Vec<(PathBuf, u64, Option<std::time::SystemTime>)>, Error> {
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
    Ok(out)
}

/// Keeps an index equal to the files under `paths`: loads them now, then re-reads whenever they
/// change (polled every `interval`). A load that fails keeps the last good content and logs why.
/// `ready` turns true after the first successful load.
pub async fn watch(
    paths: Vec<PathBuf>,
    index: crate::index::Index,
    interval: std::time::Duration,
    ready: tokio::sync::watch::Sender<bool>,
) {
    let mut last_seen = None;
    loop {
        let paths_now = paths.clone();
        let scanned = tokio::task::spawn_blocking(move || {
            let print = fingerprint(&paths_now)?;
            Ok::<_, Error>(print)
        })
        .await;
        match scanned {
            Ok(Ok(print)) if last_seen.as_ref() != Some(&print) => {
                let paths_now = paths.clone();
                match tokio::task::spawn_blocking(move || load_paths(&paths_now)).await {
                    Ok(Ok(loaded)) => {
                        let count = loaded.len();
                        index.replace_all(loaded.into_iter().map(|l| l.object).collect());
                        tracing::info!(objects = count, "loaded manifests");
                        last_seen = Some(print);
                        ready.send_replace(true);
                    }
                    Ok(Err(err)) => {
                        tracing::error!(error = %err, "manifests not reloaded; keeping the last good content");
                        last_seen = Some(print);
                    }
                    Err(err) => tracing::error!(error = %err, "manifest loader failed"),
                }
            }
            Ok(Ok(_)) => {}
            Ok(Err(err)) => tracing::error!(error = %err, "cannot scan manifests"),
            Err(err) => tracing::error!(error = %err, "manifest scan failed"),
        }
        tokio::time::sleep(interval).await;
    }
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
    fn multi_document_and_lists() {
        let text = "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\n---\napiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Namespace\n  metadata: {name: b}\n- apiVersion: v1\n  kind: Service\n  metadata: {name: s}\n";
        let loaded = parse(text).unwrap();
        assert_eq!(loaded.len(), 2);
        assert_eq!(loaded[1].place.to_string(), "t.yaml: document 3, items[0]");
    }

    #[test]
    fn errors_name_file_document_and_field() {
        let text = "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: r, namespace: x}\nspec:\n  parentRefs: [{name: 5, port: web}]\n";
        let err = parse(text).unwrap_err().to_string();
        assert!(
            err.starts_with("t.yaml: document 2: HTTPRoute x/r: spec.parentRefs[0]"),
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
            err.contains("defined twice: at t.yaml: document 1 and at t.yaml: document 2"),
            "{err}"
        );
        let err = parse("- just\n- a list\n").unwrap_err().to_string();
        assert!(err.contains("expected a Kubernetes object"), "{err}");
    }
}
