//! The check that keeps a crate's integration tests in its test binaries. Each crate builds its
//! `tests/*.rs` files as modules of one or two crate roots (`autotests = false` and `[[test]]`
//! entries in its `Cargo.toml`), so a new file that no root declares would never compile nor
//! run; this makes that a failure. Included with `#[path]` by every crate's test root.

use std::path::Path;

/// Fails unless every `.rs` file directly in `dir` is one of `roots` or is declared (`mod x;`)
/// by one of them.
pub fn assert_every_file_is_a_module(dir: &Path, roots: &[&str]) {
    let mut declared = Vec::new();
    for root in roots {
        let path = dir.join(root);
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        for line in text.lines() {
            let line = line.trim();
            let line = line.strip_prefix("pub ").unwrap_or(line);
            if let Some(name) = line.strip_prefix("mod ").and_then(|l| l.strip_suffix(';')) {
                declared.push(format!("{}.rs", name.trim()));
            }
        }
    }
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let mut missing = Vec::new();
    for entry in entries {
        let name = entry.expect("a directory entry").file_name();
        let name = name.to_string_lossy().into_owned();
        if name.ends_with(".rs") && !roots.contains(&name.as_str()) && !declared.contains(&name) {
            missing.push(name);
        }
    }
    missing.sort();
    assert!(
        missing.is_empty(),
        "{}: {missing:?} no test binary declares: add `mod <name>;` to one of {roots:?}",
        dir.display()
    );
}
