//! What every test of the real `tradetune` binary needs.

#![allow(dead_code)] // each test file uses its own subset

pub mod cv_study;
pub mod ui;

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

/// Whether wgpu has an adapter here for a test that needs one; without one the test prints a
/// loud SKIP, unless `TRADETUNE_REQUIRE_GPU=1` (CI, which installs Mesa's software Vulkan)
/// makes that a failure.
pub fn wgpu_here(test: &str) -> bool {
    use tradetune_engine::device::{DeviceSpec, open};
    match open(DeviceSpec::Wgpu(None)) {
        Ok(_) => true,
        Err(e) => {
            let required = std::env::var("TRADETUNE_REQUIRE_GPU").is_ok_and(|v| v == "1");
            assert!(!required, "{test}: TRADETUNE_REQUIRE_GPU=1 but {e}");
            eprintln!("SKIP {test}: {e}");
            false
        }
    }
}
