//! `tradetune train` run as the real binary on the bundled market data.

mod common;

use common::{scratch, text, tradetune};

use std::path::PathBuf;

/// A small PPO config so the test trains a few updates in seconds.
fn small_ppo(dir: &std::path::Path) -> PathBuf {
    let p = dir.join("ppo.json");
    std::fs::write(
        &p,
        r#"{"n_steps": 64, "batch_size": 128, "n_epochs": 2, "seed": 7}"#,
    )
    .unwrap();
    p
}

#[test]
fn trains_on_the_bundled_sample_and_writes_a_checkpoint() {
    let dir = scratch("cli_train", "bundled");
    let ppo = small_ppo(&dir);
    let out = dir.join("run");
    let o = tradetune(&[
        "train",
        "--out",
        out.to_str().unwrap(),
        "--ppo",
        ppo.to_str().unwrap(),
        "--total-timesteps",
        "1024",
    ]);
    let (stdout, stderr) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    // The bundled sample's four stocks, trained on their train split only.
    assert!(stdout.contains("AAPL, GOOG, IBM, MSFT"), "{stdout}");
    assert!(stdout.contains("train bars"), "{stdout}");
    // 1024 samples = 2 updates of 64 steps x 8 envs, each with its diagnostics line.
    assert_eq!(stdout.matches("approx_kl").count(), 2, "{stdout}");
    for f in ["model.bpk", "ppo.json", "state.json", "env.json"] {
        assert!(out.join(f).is_file(), "{f} missing in {}", out.display());
    }
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("ppo.json")).unwrap()).unwrap();
    assert_eq!(saved["n_steps"], 64);
}

#[test]
fn a_missing_data_file_is_named_in_the_error() {
    let dir = scratch("cli_train", "missing");
    let out = dir.join("run");
    let o = tradetune(&[
        "train",
        "--out",
        out.to_str().unwrap(),
        "--data",
        "/nonexistent/prices.csv",
    ]);
    assert!(!o.status.success());
    let stderr = text(&o.stderr);
    assert!(stderr.contains("/nonexistent/prices.csv"), "{stderr}");
    assert!(
        !out.exists(),
        "nothing is written when the data cannot be read"
    );
}

#[test]
fn a_bad_ppo_field_is_refused_before_training() {
    let dir = scratch("cli_train", "bad_ppo");
    let ppo = dir.join("ppo.json");
    std::fs::write(&ppo, r#"{"n_steps": 0}"#).unwrap();
    let out = dir.join("run");
    let o = tradetune(&[
        "train",
        "--out",
        out.to_str().unwrap(),
        "--ppo",
        ppo.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    let stderr = text(&o.stderr);
    assert!(stderr.contains("n_steps"), "{stderr}");
    assert!(!out.exists());
}

#[test]
fn an_unknown_ppo_field_is_named_with_the_valid_ones() {
    let dir = scratch("cli_train", "unknown_field");
    let ppo = dir.join("ppo.json");
    std::fs::write(&ppo, r#"{"n_stepz": 64}"#).unwrap();
    let o = tradetune(&[
        "train",
        "--out",
        dir.join("run").to_str().unwrap(),
        "--ppo",
        ppo.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    let stderr = text(&o.stderr);
    assert!(stderr.contains("n_stepz"), "{stderr}");
    assert!(stderr.contains("n_steps"), "valid fields listed: {stderr}");
}
