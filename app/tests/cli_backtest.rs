//! `tradetune backtest` on checkpoints written by `tradetune train`, as the real binary.

use crate::common;

use common::{scratch, text, tradetune};

use std::path::{Path, PathBuf};

/// Trains a few updates on the bundled sample into `dir/run`.
fn train_tiny(dir: &Path) -> PathBuf {
    train_tiny_with(dir, &[])
}

/// [`train_tiny`] with more `train` arguments.
fn train_tiny_with(dir: &Path, more: &[&str]) -> PathBuf {
    let ppo = dir.join("ppo.json");
    std::fs::write(
        &ppo,
        r#"{"n_steps": 32, "batch_size": 128, "n_epochs": 1, "seed": 7}"#,
    )
    .unwrap();
    let out = dir.join("run");
    let mut args = vec![
        "train",
        "--out",
        out.to_str().unwrap(),
        "--ppo",
        ppo.to_str().unwrap(),
        "--total-timesteps",
        "256",
    ];
    args.extend_from_slice(more);
    let o = tradetune(&args);
    assert!(o.status.success(), "{}", text(&o.stderr));
    out
}

/// Without `--objective`, a checkpoint is scored by the objective it was trained for (as the
/// app's Backtest panel scores it); `--objective` still chooses another.
#[test]
fn a_backtest_scores_by_the_checkpoints_own_objective_unless_told() {
    let dir = scratch("cli_backtest", "objective");
    let run = train_tiny_with(&dir, &["--objective", "total_return"]);
    let objective_of = |more: &[&str]| {
        let mut args = vec!["backtest", "--checkpoint", run.to_str().unwrap(), "--json"];
        args.extend_from_slice(more);
        let o = tradetune(&args);
        assert!(o.status.success(), "{}", text(&o.stderr));
        let report: serde_json::Value = serde_json::from_str(&text(&o.stdout)).unwrap();
        report["objective_name"].as_str().unwrap().to_owned()
    };
    assert_eq!(objective_of(&[]), "total_return");
    assert_eq!(objective_of(&["--objective", "sortino"]), "sortino");
}

#[test]
fn backtests_a_trained_checkpoint_and_writes_one_csv_row_per_split_bar() {
    let dir = scratch("cli_backtest", "bundled");
    let run = train_tiny(&dir);
    assert!(run.join("data.json").is_file());
    let csv_path = dir.join("equity.csv");
    let o = tradetune(&[
        "backtest",
        "--checkpoint",
        run.to_str().unwrap(),
        "--split",
        "test",
        "--equity-csv",
        csv_path.to_str().unwrap(),
        "--json",
    ]);
    let (stdout, stderr) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let bars = report["bars"].as_u64().unwrap() as usize;
    assert_eq!(report["split"], "test");
    assert_eq!(report["timesteps"], 256);
    assert_eq!(report["objective_name"], "sharpe_excess");
    let objective = report["objective"].as_f64().unwrap();
    let want = report["agent"]["sharpe"].as_f64().unwrap()
        - report["equal_weight"]["sharpe"].as_f64().unwrap();
    assert!((objective - want).abs() < 1e-12);

    // The bundled sample's test split: the last 15 % of its bars (lookback 1 → every bar).
    let data = tradetune(&["data", "inspect", "--json"]);
    assert!(data.status.success(), "{}", text(&data.stderr));
    let mut reader = csv::Reader::from_path(&csv_path).unwrap();
    assert_eq!(
        reader.headers().unwrap(),
        vec!["timestamp", "agent_equity", "equal_weight_equity"]
    );
    let rows: Vec<csv::StringRecord> = reader.records().map(|r| r.unwrap()).collect();
    assert_eq!(rows.len(), bars);
    let inspect: serde_json::Value = serde_json::from_str(&text(&data.stdout)).unwrap();
    let (test_bars, first) = split_bars(&inspect, "test");
    assert_eq!(rows.len(), test_bars, "one row per bar of the test split");
    assert_eq!(rows[0][0], first);
    assert_eq!(&rows[0][0], report["start"].as_str().unwrap());
    for r in &rows {
        let a: f64 = r[1].parse().unwrap();
        let e: f64 = r[2].parse().unwrap();
        assert!(a > 0.0 && e > 0.0, "{r:?}");
    }
    // Both curves start from the initial cash.
    assert_eq!(&rows[0][1], "1000000");

    // The table for people.
    let o = tradetune(&["backtest", "--checkpoint", run.to_str().unwrap()]);
    let stdout = text(&o.stdout);
    assert!(o.status.success(), "{}", text(&o.stderr));
    for word in [
        "sharpe",
        "sortino",
        "max drawdown",
        "turnover",
        "fees paid",
        "equal weight",
    ] {
        assert!(stdout.contains(word), "{word} missing:\n{stdout}");
    }
    assert!(stdout.contains("objective sharpe_excess"), "{stdout}");
}

/// Bars and first date of a split in `tradetune data inspect --json`'s output.
fn split_bars(inspect: &serde_json::Value, name: &str) -> (usize, String) {
    let split = inspect["dataset"]["split"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no {name} split in {inspect}"));
    let (a, b) = (
        split["start"].as_u64().unwrap(),
        split["end"].as_u64().unwrap(),
    );
    (
        (b - a) as usize,
        split["first"].as_str().unwrap().to_owned(),
    )
}

#[test]
fn a_missing_or_corrupt_checkpoint_is_named() {
    let dir = scratch("cli_backtest", "bad");
    let missing = dir.join("nope");
    let o = tradetune(&["backtest", "--checkpoint", missing.to_str().unwrap()]);
    assert!(!o.status.success());
    let stderr = text(&o.stderr);
    assert!(
        stderr.contains("nope") && stderr.contains("does not exist"),
        "{stderr}"
    );

    let run = train_tiny(&dir);
    std::fs::write(run.join("model.bpk"), b"not a burn record").unwrap();
    let o = tradetune(&["backtest", "--checkpoint", run.to_str().unwrap()]);
    assert!(!o.status.success());
    let stderr = text(&o.stderr);
    assert!(stderr.contains("model.bpk"), "{stderr}");

    std::fs::remove_file(run.join("state.json")).unwrap();
    let o = tradetune(&["backtest", "--checkpoint", run.to_str().unwrap()]);
    assert!(!o.status.success());
    let stderr = text(&o.stderr);
    assert!(
        stderr.contains("state.json") && stderr.contains("missing"),
        "{stderr}"
    );
}
