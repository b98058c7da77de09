//! Reading a crate's imports from its sources, for the tests that keep module graphs free of
//! cycles (the engine's `module_layers`, the app's `app_modules`): `crate::x` and `super::x`
//! paths outside `#[cfg(test)]` code. Included with `#[path]` by those test roots.

#![allow(dead_code)] // each test root uses its own subset

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The file's code before its test module, without line comments.
pub fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let text = text.split("#[cfg(test)]").next().unwrap_or_default();
    text.lines()
        .map(|l| l.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Identifiers following `prefix` in `text` (`crate::ppo::x` with prefix `crate::` gives `ppo`).
pub fn after(text: &str, prefix: &str) -> BTreeSet<String> {
    text.match_indices(prefix)
        .map(|(i, _)| {
            text[i + prefix.len()..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect::<String>()
        })
        .filter(|s| !s.is_empty())
        .collect()
}

pub fn rs_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let p = entry.expect("dir entry").path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|e| e == "rs") {
                out.push(p);
            }
        }
    }
    out
}

/// The first cycle found in `edges`, as the path that closes it.
pub fn cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == n) {
            let mut c = path[i..].to_vec();
            c.push(n.to_string());
            return Some(c);
        }
        if done.contains(n) {
            return None;
        }
        path.push(n.to_string());
        for m in edges.get(n).into_iter().flatten() {
            if let Some(c) = visit(m, edges, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(n.to_string());
        None
    }
    let mut done = BTreeSet::new();
    edges
        .keys()
        .find_map(|n| visit(n, edges, &mut Vec::new(), &mut done))
}

/// Every directory of `.rs` files under `src`, with its module path (`""` for the crate root,
/// `"runner"`, `"ppo"`, `"features"`…).
pub fn module_dirs(src: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let mut stack = vec![(src.to_path_buf(), String::new())];
    while let Some((dir, path)) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let p = entry.expect("dir entry").path();
            if p.is_dir() {
                let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
                let name = name.unwrap_or_default();
                let sub = if path.is_empty() {
                    name
                } else {
                    format!("{path}::{name}")
                };
                stack.push((p, sub));
            }
        }
        out.push((dir, path));
    }
    out
}

/// The modules directly inside `dir`, each with the code that can name its siblings: a file
/// `x.rs` or a directory `x/` (its `mod.rs`, and `x.rs` beside it) reach them by `super::y`
/// and `crate::PATH::y`; the files deeper inside `x/` by `crate::PATH::y` (their `super::`
/// is `x` itself).
pub fn sibling_modules(dir: &Path, prefix: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut names = BTreeSet::new();
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let p = entry.expect("dir entry").path();
        let Some(stem) = p.file_stem().map(|s| s.to_string_lossy().into_owned()) else {
            continue;
        };
        if p.is_dir()
            || (p.extension().is_some_and(|e| e == "rs") && stem != "mod" && stem != "lib")
        {
            names.insert(stem);
        }
    }
    let mut out = BTreeMap::new();
    for name in &names {
        let mut refs = BTreeSet::new();
        let direct = [
            dir.join(format!("{name}.rs")),
            dir.join(name).join("mod.rs"),
        ];
        for p in direct.iter().filter(|p| p.is_file()) {
            let text = code(p);
            refs.extend(after(&text, "super::"));
            refs.extend(after(&text, prefix));
        }
        if dir.join(name).is_dir() {
            for p in rs_files(&dir.join(name)) {
                refs.extend(after(&code(&p), prefix));
            }
        }
        refs.retain(|t| t != name && names.contains(t));
        out.insert(name.clone(), refs);
    }
    out
}
