//! Issue 14: the engine's modules import each other without cycles — across the top-level
//! modules (`market`, `env`, `device`, `eval`, `ppo`, `storage`, `telemetry`, `study`) and
//! between the files of each. Read from the sources (`crate::x` and `super::x` paths outside
//! `#[cfg(test)]` code), so a new import that closes a loop fails here, naming it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The file's code before its test module, without line comments.
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let text = text.split("#[cfg(test)]").next().unwrap_or_default();
    text.lines()
        .map(|l| l.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Identifiers following `prefix` in `text` (`crate::ppo::x` with prefix `crate::` gives `ppo`).
fn after(text: &str, prefix: &str) -> BTreeSet<String> {
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

fn rs_files(dir: &Path) -> Vec<PathBuf> {
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
fn cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
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

#[test]
fn the_engine_modules_import_each_other_without_cycles() {
    let root = src();
    let modules: BTreeSet<String> = std::fs::read_dir(&root)
        .expect("engine/src")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    assert!(
        modules.contains("ppo") && modules.contains("eval"),
        "{modules:?}"
    );

    let mut top: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for m in &modules {
        let dir = root.join(m);
        let files: BTreeMap<String, String> = std::fs::read_dir(&dir)
            .expect("module dir")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "rs"))
            .filter_map(|p| {
                let stem = p.file_stem()?.to_string_lossy().into_owned();
                (stem != "mod").then(|| (stem, code(&p)))
            })
            .collect();
        let mut inner: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (name, text) in &files {
            let targets = after(text, "super::")
                .into_iter()
                .chain(after(text, &format!("crate::{m}::")))
                .filter(|t| t != name && files.contains_key(t))
                .collect();
            inner.insert(name.clone(), targets);
        }
        if let Some(c) = cycle(&inner) {
            panic!(
                "files of engine/src/{m} import each other in a cycle: {}",
                c.join(" -> ")
            );
        }
        let used: BTreeSet<String> = rs_files(&dir)
            .iter()
            .flat_map(|p| after(&code(p), "crate::"))
            .filter(|t| t != m && modules.contains(t))
            .collect();
        top.insert(m.clone(), used);
    }
    eprintln!("module imports: {top:?}");
    if let Some(c) = cycle(&top) {
        panic!(
            "engine modules import each other in a cycle: {}",
            c.join(" -> ")
        );
    }
    // The layering the architecture relies on, beyond the absence of cycles.
    for (lower, upper) in [("eval", "ppo"), ("device", "ppo"), ("telemetry", "study")] {
        assert!(
            !top[lower].contains(upper),
            "{lower} imports {upper}: {:?}",
            top[lower]
        );
    }
}
