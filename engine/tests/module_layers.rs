//! Issue 14: the engine's layers. Each layer is a crate (`engine/<layer>`), so a cycle between
//! layers is a compile error; this test keeps the stack the architecture relies on — which
//! layer may depend on which (read from the crates' manifests) — and checks what the compiler
//! does not: that the files of each module (every source directory, `study/runner` and
//! `study/file` included) import each other without cycles, and that evaluation imports
//! nothing of PPO inside `tradetune-rl`. Read from the sources (`crate::x` and `super::x`
//! paths outside `#[cfg(test)]` code), so a new import that closes a loop fails here, naming it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// `engine/`, where the layer crates live.
fn engine() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The layer crates, bottom-up, with the engine crates each may depend on.
const LAYERS: &[(&str, &[&str])] = &[
    ("market", &[]),
    ("device", &[]),
    ("storage", &[]),
    ("env", &["market", "device"]),
    ("rl", &["market", "device", "env"]),
    ("telemetry", &["storage"]),
    (
        "study",
        &["market", "device", "env", "rl", "storage", "telemetry"],
    ),
];

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

/// The `tradetune-*` crates named in a manifest's `[dependencies]` (not dev-dependencies).
fn engine_deps(manifest: &Path) -> BTreeSet<String> {
    let text =
        std::fs::read_to_string(manifest).unwrap_or_else(|e| panic!("{}: {e}", manifest.display()));
    let mut section = String::new();
    let mut out = BTreeSet::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line.to_string();
        } else if section == "[dependencies]"
            && let Some(rest) = line.strip_prefix("tradetune-")
        {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            out.insert(name);
        }
    }
    out
}

#[test]
fn each_layer_depends_only_on_the_layers_below_it() {
    for (layer, allowed) in LAYERS {
        let manifest = engine().join(layer).join("Cargo.toml");
        let deps = engine_deps(&manifest);
        let allowed: BTreeSet<String> = allowed.iter().map(|s| s.to_string()).collect();
        let extra: Vec<&String> = deps.difference(&allowed).collect();
        assert!(
            extra.is_empty(),
            "tradetune-{layer} depends on {extra:?}, above or beside it; it may use {allowed:?}"
        );
        eprintln!("tradetune-{layer} -> {deps:?}");
    }
    // Every layer crate is in the table (a new one must say where it sits).
    let on_disk: BTreeSet<String> = std::fs::read_dir(engine())
        .expect("engine/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("Cargo.toml").is_file())
        .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    let listed: BTreeSet<String> = LAYERS.iter().map(|(l, _)| l.to_string()).collect();
    assert_eq!(on_disk, listed, "layer crates on disk vs. the table above");
}

/// Every directory of `.rs` files under `src`, with its module path (`""` for the crate root,
/// `"runner"`, `"ppo"`, `"features"`…).
fn module_dirs(src: &Path) -> Vec<(PathBuf, String)> {
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
fn sibling_modules(dir: &Path, prefix: &str) -> BTreeMap<String, BTreeSet<String>> {
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

#[test]
fn the_files_of_each_module_import_each_other_without_cycles() {
    let mut checked = 0;
    for (layer, _) in LAYERS {
        let src = engine().join(layer).join("src");
        for (dir, module) in module_dirs(&src) {
            let prefix = if module.is_empty() {
                "crate::".to_string()
            } else {
                format!("crate::{module}::")
            };
            let inner = sibling_modules(&dir, &prefix);
            if let Some(c) = cycle(&inner) {
                panic!(
                    "modules of engine/{layer}/src/{} import each other in a cycle: {}",
                    module.replace("::", "/"),
                    c.join(" -> ")
                );
            }
            checked += 1;
        }
    }
    assert!(checked > 10, "only {checked} module directories found");
}

#[test]
fn evaluation_imports_nothing_of_the_learner() {
    let eval = engine().join("rl/src/eval");
    let files = rs_files(&eval);
    assert!(!files.is_empty(), "no sources under {}", eval.display());
    for p in files {
        let used = after(&code(&p), "crate::");
        assert!(
            !used.contains("ppo"),
            "{} imports crate::ppo: evaluation sits below the learner",
            p.display()
        );
    }
}
