//! The app's module graph, as `engine/tests/module_layers.rs` keeps the engine's: the two front
//! ends do not import each other (what both need is the engine's front door, or `launch`), and
//! the files of each module directory import each other without cycles, the desktop app's
//! `ui` tree included; and in `ui` the jobs and the context sit below the panels, which sit
//! below the app that composes them.

use std::path::PathBuf;

use crate::imports::{after, code, cycle, module_dirs, rs_files, sibling_modules};

fn src() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn the_front_ends_do_not_import_each_other() {
    for (front, other) in [("ui", "cli"), ("cli", "ui")] {
        let files = rs_files(&src().join(front));
        assert!(
            files.len() > 5,
            "only {} files under src/{front}",
            files.len()
        );
        for p in files {
            assert!(
                !after(&code(&p), "crate::").contains(other),
                "{} imports crate::{other}: what both front ends need belongs in the engine's \
                 front door (or src/launch.rs)",
                p.display()
            );
        }
    }
}

#[test]
fn the_files_of_each_module_import_each_other_without_cycles() {
    let mut checked = Vec::new();
    for (dir, module) in module_dirs(&src()) {
        let prefix = if module.is_empty() {
            "crate::".to_string()
        } else {
            format!("crate::{module}::")
        };
        if let Some(c) = cycle(&sibling_modules(&dir, &prefix)) {
            panic!(
                "modules of app/src/{} import each other in a cycle: {}",
                module.replace("::", "/"),
                c.join(" -> ")
            );
        }
        checked.push(module);
    }
    for m in [
        "",
        "cli",
        "ui",
        "ui::panels",
        "ui::panels::studies",
        "ui::tasks",
    ] {
        assert!(
            checked.iter().any(|c| c == m),
            "app/src/{m} was not checked: {checked:?}"
        );
    }
}

#[test]
fn the_desktop_apps_jobs_and_context_sit_below_its_panels_and_the_app() {
    let edges = sibling_modules(&src().join("ui"), "crate::ui::");
    // What each layer may not import: the jobs define their own payloads, the context knows
    // no panel, and a panel never reaches into the app that composes it.
    for (module, above) in [
        ("tasks", &["context", "panels", "app"][..]),
        ("context", &["panels", "app"][..]),
        ("panels", &["app"][..]),
    ] {
        let imports = edges
            .get(module)
            .unwrap_or_else(|| panic!("no module ui::{module}: {edges:?}"));
        for a in above {
            assert!(
                !imports.contains(*a),
                "ui::{module} imports ui::{a}, which sits above it ({imports:?})"
            );
        }
    }
}
