//! Imports follow the table in ARCHITECTURE.md ("Import rules"): every `crate::…` path in `src/`
//! names a module its file may import, and every module has a row. Reads the sources as text,
//! so it runs in milliseconds and needs nothing but the checkout.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::objects::crate_dir;

/// Row name → the modules it may import, from the "Import rules" table.
fn import_rules() -> BTreeMap<String, BTreeSet<String>> {
    let path = crate_dir().join("ARCHITECTURE.md");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()));
    let section = text
        .split("\n## ")
        .find(|section| section.starts_with("Import rules"))
        .expect("ARCHITECTURE.md has an \"Import rules\" section");
    let backticked = |cell: &str| -> Vec<String> {
        cell.split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect()
    };
    let mut rules = BTreeMap::new();
    for row in section.lines().filter(|line| line.starts_with("| `")) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        // "", module, owns, may import, "".
        assert_eq!(cells.len(), 5, "a row of module | owns | may import: {row}");
        let name = backticked(cells[1]).concat();
        let allowed = backticked(cells[3]).into_iter().collect();
        assert!(
            rules.insert(name.clone(), allowed).is_none(),
            "{name} has two rows"
        );
    }
    assert!(!rules.is_empty(), "the Import rules table has no rows");
    rules
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            out.push(path);
        }
    }
}

/// Every Rust file below `src/`, sorted, with its path below `src/` (`/` between folders).
fn source_files() -> Vec<(PathBuf, String)> {
    let src = crate_dir().join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let relative = path
                .strip_prefix(&src)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            (path, relative)
        })
        .collect()
}

/// The module a file belongs to (`engine` for `src/engine/attach.rs`, `index` for
/// `src/index.rs`), and its path below `src/`.
fn module_of(relative: &str) -> String {
    match relative.split_once('/') {
        Some((folder, _)) => folder.to_string(),
        None => relative.trim_end_matches(".rs").to_string(),
    }
}

/// The first segment of every path that starts with `root::` in `code` (braced groups
/// included: `crate::{a, b::c}` names `a` and `b`).
fn referenced_modules(code: &str, root: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let prefix = format!("{root}::");
    let mut rest = code;
    while let Some(at) = rest.find(&prefix) {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + prefix.len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1;
            let mut item_start = true;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 1 => item_start = true,
                    c if depth == 1 && item_start && !c.is_whitespace() => {
                        item_start = false;
                        let name: String = group[i..]
                            .chars()
                            .take_while(|c| c.is_alphanumeric() || *c == '_')
                            .collect();
                        found.insert(name);
                    }
                    _ => {}
                }
                if depth == 0 {
                    break;
                }
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            found.insert(name);
        }
    }
    found.retain(|name| name != "self" && !name.is_empty());
    found
}

/// The code of a file without its comments (line comments, doc comments included): a doc link
/// to a module is not an import.
fn code_of(text: &str) -> String {
    text.lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn imports_follow_the_table_in_architecture_md() {
    let rules = import_rules();
    let src = crate_dir().join("src");
    let mut broken = Vec::new();
    let mut modules = BTreeSet::new();
    for (path, relative) in &source_files() {
        let relative = relative.clone();
        if relative == "lib.rs" {
            continue;
        }
        let module = module_of(&relative);
        modules.insert(module.clone());
        let row = if rules.contains_key(&relative) {
            relative.clone()
        } else {
            module.clone()
        };
        let Some(allowed) = rules.get(&row) else {
            broken.push(format!(
                "{relative}: no row for `{row}` in the Import rules table"
            ));
            continue;
        };
        let code = code_of(&std::fs::read_to_string(path).unwrap());
        // The binary reaches the library by its crate name.
        let root = if relative == "main.rs" {
            "gateway_dns"
        } else {
            "crate"
        };
        for imported in referenced_modules(&code, root) {
            if imported != module && !allowed.contains(&imported) {
                broken.push(format!(
                    "{relative} imports `{imported}`, which `{row}` may not"
                ));
            }
        }
        if code.contains("super::super") {
            broken.push(format!(
                "{relative}: `super::super` leaves its folder; name the module with `crate::`"
            ));
        }
    }
    for (row, allowed) in &rules {
        let exists = match row.contains('/') {
            true => src.join(row).is_file(),
            false => modules.contains(row),
        };
        if !exists {
            broken.push(format!(
                "the table has a row for `{row}`, which is not in src/"
            ));
        }
        for imported in allowed {
            if !rules.contains_key(imported) {
                broken.push(format!("`{row}` may import `{imported}`, which has no row"));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "imports against ARCHITECTURE.md (\"Import rules\"):\n{}",
        broken.join("\n")
    );
}

#[test]
fn the_reference_reader_finds_plain_grouped_and_nested_paths() {
    let code = "use crate::engine::World;\nuse crate::{model::{Object, ObjectKind}, dns};\n\
                let x = crate::index::Index::new(); // mycrate::nope\nuse super::state;";
    let found: Vec<String> = referenced_modules(code, "crate").into_iter().collect();
    assert_eq!(found, ["dns", "engine", "index", "model"]);
    assert_eq!(
        code_of("// crate::cmd\n/// [`crate::sync`]\nlet a = 1;"),
        "let a = 1;"
    );
}

/// A module's path below the crate for a file below `src/` (`source/kube/feed.rs` is
/// `source::kube::feed`, `source/kube/mod.rs` is `source::kube`).
fn module_path(relative: &str) -> Vec<String> {
    let mut parts: Vec<String> = relative
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_string)
        .collect();
    if parts.last().is_some_and(|last| last == "mod") {
        parts.pop();
    }
    parts
}

/// Every path that starts with `crate::` or `super::` in `code`, resolved to the crate's
/// module path from `module` (the file's own; not a mod.rs, whose `super` is one folder
/// higher), with each item of a braced group its own path.
fn referenced_paths(code: &str, module: &[String]) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    let parent = module[..module.len().saturating_sub(1)].to_vec();
    for (root, base) in [("crate::", Vec::new()), ("super::", parent)] {
        let mut rest = code;
        while let Some(at) = rest.find(root) {
            let before = rest[..at].chars().next_back();
            rest = &rest[at + root.len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let mut path = base.clone();
            let mut tail = rest;
            loop {
                let name: String = tail
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if name.is_empty() {
                    break;
                }
                path.push(name.clone());
                tail = &tail[name.len()..];
                match tail.strip_prefix("::") {
                    Some(next) => tail = next,
                    None => break,
                }
            }
            if let Some(group) = tail.strip_prefix('{') {
                let end = group.find('}').unwrap_or(group.len());
                for item in group[..end].split(',') {
                    let first: String = item
                        .trim()
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    if !first.is_empty() && first != "self" {
                        let mut grouped = path.clone();
                        grouped.push(first);
                        found.push(grouped);
                    }
                }
            } else {
                found.push(path);
            }
        }
    }
    found
}

/// The cycles among the files and subfolders of each folder of `src/`, as `folder: a -> b -> a`.
/// A mod.rs, which declares and re-exports its folder's files, is not a node.
fn folder_cycles() -> Vec<String> {
    let src = crate_dir().join("src");
    // folder → node → the nodes it imports.
    let mut graph: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (path, relative) in &source_files() {
        if relative == "lib.rs" || relative == "main.rs" || relative.ends_with("mod.rs") {
            continue;
        }
        let module = module_path(relative);
        let code = code_of(&std::fs::read_to_string(path).unwrap());
        for target in referenced_paths(&code, &module) {
            let common = module
                .iter()
                .zip(&target)
                .take_while(|(a, b)| a == b)
                .count();
            let (Some(from), Some(to)) = (module.get(common), target.get(common)) else {
                continue;
            };
            let folder = module[..common].join("/");
            let base = if folder.is_empty() {
                src.clone()
            } else {
                src.join(&folder)
            };
            // Only a file or subfolder of the folder is a node; an item of its mod.rs is not.
            if !base.join(format!("{to}.rs")).is_file() && !base.join(to).is_dir() {
                continue;
            }
            graph
                .entry(folder)
                .or_default()
                .entry(from.clone())
                .or_default()
                .insert(to.clone());
        }
    }
    let mut cycles = Vec::new();
    for (folder, edges) in &graph {
        // Depth-first search; a node met again on the current path closes a cycle.
        fn visit(
            node: &str,
            edges: &BTreeMap<String, BTreeSet<String>>,
            path: &mut Vec<String>,
            done: &mut BTreeSet<String>,
            cycles: &mut Vec<Vec<String>>,
        ) {
            if let Some(at) = path.iter().position(|n| n == node) {
                let mut cycle = path[at..].to_vec();
                cycle.push(node.to_string());
                cycles.push(cycle);
                return;
            }
            if !done.insert(node.to_string()) {
                return;
            }
            path.push(node.to_string());
            for next in edges.get(node).into_iter().flatten() {
                visit(next, edges, path, done, cycles);
            }
            path.pop();
        }
        let mut found = Vec::new();
        let mut done = BTreeSet::new();
        for node in edges.keys() {
            visit(node, edges, &mut Vec::new(), &mut done, &mut found);
        }
        let folder = if folder.is_empty() { "src" } else { folder };
        cycles.extend(
            found
                .into_iter()
                .map(|cycle| format!("{folder}: {}", cycle.join(" -> "))),
        );
    }
    cycles
}

#[test]
fn no_folder_has_an_import_cycle() {
    let cycles = folder_cycles();
    assert!(
        cycles.is_empty(),
        "imports that run in a circle inside a folder:\n{}",
        cycles.join("\n")
    );
}

#[test]
fn paths_resolve_from_the_file_that_names_them() {
    let module: Vec<String> = ["source", "kube", "feed"].map(String::from).to_vec();
    let code = "use super::state::{Shared, lock};\nuse crate::index::Index;\n\
                use super::{discovery::api_resource, watcher};";
    let found: Vec<String> = referenced_paths(code, &module)
        .into_iter()
        .map(|p| p.join("::"))
        .collect();
    assert_eq!(
        found,
        [
            "index::Index",
            "source::kube::state::Shared",
            "source::kube::state::lock",
            "source::kube::discovery",
            "source::kube::watcher",
        ]
    );
}
