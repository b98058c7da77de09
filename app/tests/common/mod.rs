//! What every test of the real `tradetune` binary needs.

#![allow(dead_code)] // each test file uses its own subset

use std::path::PathBuf;
use std::process::{Command, Output};

/// Runs the real binary from a directory outside the checkout, so nothing it reads by default
/// (the bundled sample, presets) may depend on the working directory.
pub fn tradetune(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tradetune"))
        .args(args)
        .current_dir(std::env::temp_dir())
        .output()
        .expect("the tradetune binary runs")
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A fresh directory `suite/name` under cargo's per-target temp dir for a test's files.
pub fn scratch(suite: &str, name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(suite)
        .join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}
