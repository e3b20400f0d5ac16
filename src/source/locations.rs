//! Where things are in a YAML (or JSON) text: the line of every document's root and of every
//! field below it, and duplicate mapping keys, which the value decoder would otherwise merge
//! silently (the later value wins). Read with an event parser that keeps positions; the
//! values themselves are still decoded by the one decoder.

use std::collections::HashMap;

use granit_parser::{Event, Parser, Span};

/// Lines (1-based) of the fields of one document, keyed by field path as the engine writes it
/// (`spec.hostnames[1]`); the root is the empty path.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DocumentLines {
    lines: HashMap<String, usize>,
}

impl DocumentLines {
    /// The line of the document's root node.
    pub fn root(&self) -> Option<usize> {
        self.lines.get("").copied()
    }

    /// The line of exactly this path.
    pub fn line_of(&self, path: &str) -> Option<usize> {
        self.lines.get(path).copied()
    }

    /// The fields of the node at `prefix` (e.g. `items[2]`), with paths relative to it.
    pub fn below(&self, prefix: &str) -> DocumentLines {
        let lines = self
            .lines
            .iter()
            .filter_map(|(path, line)| {
                let rest = path.strip_prefix(prefix)?;
                let rest = if rest.is_empty() {
                    rest
                } else {
                    rest.strip_prefix('.')
                        .or_else(|| rest.starts_with('[').then_some(rest))?
                };
                Some((rest.to_owned(), *line))
            })
            .collect();
        DocumentLines { lines }
    }

    /// The line of the path, or of its nearest ancestor that is written down (a finding about
    /// `spec.parentRefs[0].sectionName` points at the parentRef when the field is absent).
    /// None when not even the first segment is written (a missing `spec.parentRefs`).
    pub fn nearest_line(&self, path: &str) -> Option<usize> {
        let mut candidate = path;
        loop {
            if candidate.is_empty() {
                return None;
            }
            if let Some(line) = self.lines.get(candidate) {
                return Some(*line);
            }
            let cut = candidate.rfind(['.', '[']).unwrap_or(0);
            candidate = &candidate[..cut];
        }
    }
}

/// A key written twice in one mapping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DuplicateKey {
    /// 1-based document number in the text.
    pub document: usize,
    pub key: String,
    /// Path of the mapping that holds the key (empty for the root).
    pub mapping: String,
    /// 1-based line and column of the second occurrence.
    pub line: usize,
    pub column: usize,
    /// 1-based line of the first occurrence.
    pub first_line: usize,
}

/// What scanning a text found: per document, its lines; or the first duplicate key.
#[derive(Debug)]
pub enum Scan {
    Documents(Vec<DocumentLines>),
    Duplicate(DuplicateKey),
    /// The text is not YAML this parser accepts; the decoder reports why.
    Unreadable,
}

enum Frame {
    Mapping {
        path: String,
        /// Keys seen so far and the line each was first written on.
        keys: HashMap<String, usize>,
        /// The key whose value comes next; None while a key is expected.
        pending_key: Option<String>,
    },
    Sequence {
        path: String,
        next_index: usize,
    },
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

/// Scans a YAML stream (JSON is YAML here too). `first_line` is the line the text starts on in
/// its file, for a slice of a larger file.
pub fn scan(text: &str, first_line: usize) -> Scan {
    scan_with(text, first_line, true)
}

/// Whether a YAML stream writes a key twice in one mapping, without keeping the lines of its
/// fields (`serve` needs the objects only; [`scan`] keeps them for `check`'s findings).
pub fn has_duplicate_key(text: &str) -> bool {
    matches!(scan_with(text, 1, false), Scan::Duplicate(_))
}

fn scan_with(text: &str, first_line: usize, record_lines: bool) -> Scan {
    let line_of = |span: &Span| span.start.line() + first_line - 1;
    let mut documents: Vec<DocumentLines> = Vec::new();
    let mut stack: Vec<Frame> = Vec::new();
    // Depth inside a non-scalar mapping key, whose contents are skipped.
    let mut skip_depth = 0usize;
    for event in Parser::new_from_str(text) {
        let Ok((event, span)) = event else {
            return Scan::Unreadable;
        };
        let opens = matches!(event, Event::MappingStart(..) | Event::SequenceStart(..));
        let closes = matches!(event, Event::MappingEnd | Event::SequenceEnd);
        match event {
            Event::DocumentStart(..) => {
                documents.push(DocumentLines::default());
                stack.clear();
                continue;
            }
            Event::StreamStart
            | Event::StreamEnd
            | Event::DocumentEnd
            | Event::Nothing
            | Event::Comment(..) => continue,
            _ => {}
        }
        if skip_depth > 0 {
            if opens {
                skip_depth += 1;
            } else if closes {
                skip_depth -= 1;
            }
            continue;
        }
        if closes {
            stack.pop();
            continue;
        }
        let document_number = documents.len();
        let Some(document) = documents.last_mut() else {
            return Scan::Unreadable;
        };
        // The path of this node, or None when it is a mapping key.
        let path = match stack.last_mut() {
            None => Some(String::new()),
            Some(Frame::Sequence { path, next_index }) => {
                let node = format!("{path}[{next_index}]");
                *next_index += 1;
                Some(node)
            }
            Some(Frame::Mapping {
                path,
                keys,
                pending_key,
            }) => match pending_key.take() {
                Some(key) => Some(join(path, &key)),
                None => {
                    let Event::Scalar(key, ..) = &event else {
                        // A mapping or sequence as a key (never in Kubernetes objects): skip
                        // its contents; its value is located under a placeholder key.
                        if opens {
                            skip_depth = 1;
                        }
                        *pending_key = Some("?".to_owned());
                        continue;
                    };
                    let line = line_of(&span);
                    if let Some(first_line) = keys.get(key.as_ref()) {
                        return Scan::Duplicate(DuplicateKey {
                            document: document_number,
                            key: key.to_string(),
                            mapping: path.clone(),
                            line,
                            column: span.start.col() + 1,
                            first_line: *first_line,
                        });
                    }
                    keys.insert(key.to_string(), line);
                    if record_lines {
                        document.lines.insert(join(path, key), line);
                    }
                    *pending_key = Some(key.to_string());
                    None
                }
            },
        };
        let Some(path) = path else {
            continue;
        };
        // A value's line is its key's when it has one (already recorded); else its own.
        if record_lines {
            document
                .lines
                .entry(path.clone())
                .or_insert_with(|| line_of(&span));
        }
        match event {
            Event::MappingStart(..) => stack.push(Frame::Mapping {
                path,
                keys: HashMap::new(),
                pending_key: None,
            }),
            Event::SequenceStart(..) => stack.push(Frame::Sequence {
                path,
                next_index: 0,
            }),
            _ => {}
        }
    }
    Scan::Documents(documents)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn documents(text: &str) -> Vec<DocumentLines> {
        match scan(text, 1) {
            Scan::Documents(documents) => documents,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn lines_of_fields_and_list_items() {
        let text = "\
apiVersion: v1
kind: List
items:
- kind: HTTPRoute
  spec:
    hostnames:
    - a.example.com
    - b.example.com
---
# a comment
kind: Gateway
spec: {listeners: [{name: web}]}
";
        let docs = documents(text);
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[0].root(), Some(1));
        assert_eq!(docs[0].line_of("items[0]"), Some(4));
        assert_eq!(docs[0].line_of("items[0].spec.hostnames[1]"), Some(8));
        let item = docs[0].below("items[0]");
        assert_eq!(item.root(), Some(4));
        assert_eq!(item.line_of("spec.hostnames[0]"), Some(7));
        assert_eq!(docs[1].root(), Some(11));
        assert_eq!(docs[1].line_of("spec.listeners[0].name"), Some(12));
        assert_eq!(docs[1].nearest_line("spec.listeners[0].port"), Some(12));
        assert_eq!(docs[1].nearest_line("metadata.name"), None);
    }

    #[test]
    fn empty_documents_are_counted() {
        assert_eq!(documents("a: 1\n---\n---\nb: 2\n").len(), 3);
        assert_eq!(documents("").len(), 0);
        assert_eq!(documents("# only a comment\n").len(), 0);
        assert_eq!(documents("---\na: 1\n").len(), 1);
    }

    #[test]
    fn duplicate_keys_are_found_with_their_place() {
        let text = "a: 1\n---\nkind: Gateway\nmetadata:\n  name: x\n  name: y\n";
        let Scan::Duplicate(dup) = scan(text, 1) else {
            panic!("a duplicate")
        };
        assert_eq!(
            dup,
            DuplicateKey {
                document: 2,
                key: "name".to_owned(),
                mapping: "metadata".to_owned(),
                line: 6,
                column: 3,
                first_line: 5,
            }
        );
        // The same key in two mappings is no duplicate.
        assert!(matches!(
            scan("a: {x: 1}\nb: {x: 2}\n", 1),
            Scan::Documents(_)
        ));
    }
}
