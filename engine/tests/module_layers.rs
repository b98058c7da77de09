//! Issue 14: the engine's layers. Each layer is a crate (`engine/<layer>`), so a cycle between
//! layers is a compile error; this test keeps the stack the architecture relies on — which
//! layer may depend on which (read from the crates' manifests) — and checks what the compiler
//! does not: that the files of each module (every source directory, `study/runner` and
//! `study/file` included) import each other without cycles, and that evaluation imports
//! nothing of PPO inside `tradetune-rl`. Read from the sources (`crate::x` and `super::x`
//! paths outside `#[cfg(test)]` code), so a new import that closes a loop fails here, naming it.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::imports::{after, code, cycle, module_dirs, rs_files, sibling_modules};

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
