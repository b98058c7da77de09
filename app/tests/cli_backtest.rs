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

    // Curves named over a file of the checkpoint, over market data or at a folder are refused
    // before anything is written, and the file is left as it was (the weights used to be
    // replaced by the CSV, and the checkpoint no longer loaded).
    let market = dir.join("Daily.csv");
    write_daily(&market, 0..40);
    for (target, said) in [
        (run.join("model.bpk"), "inside the checkpoint"),
        (market.clone(), "holds market data"),
        (dir.clone(), "is a folder"),
    ] {
        let before = std::fs::read(&target).ok();
        let o = tradetune(&[
            "backtest",
            "--checkpoint",
            run.to_str().unwrap(),
            "--equity-csv",
            target.to_str().unwrap(),
        ]);
        let err = text(&o.stderr);
        assert!(!o.status.success(), "{}", target.display());
        assert!(err.contains(said), "{err}");
        assert_eq!(std::fs::read(&target).ok(), before, "{}", target.display());
    }
    let o = tradetune(&["backtest", "--checkpoint", run.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
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
    // The weights of a run of another network: said as files of different runs, in words
    // (it was burn's error value, `Validation("Apply errors: [\"pi.0.weight: …`).
    let other = scratch("cli_backtest", "bad_other_net");
    let ppo = other.join("ppo.json");
    std::fs::write(
        &ppo,
        r#"{"n_steps": 32, "batch_size": 128, "n_epochs": 1,
            "policy": {"net_arch": {"pi": [8], "vf": [8]}}}"#,
    )
    .unwrap();
    let out = other.join("run");
    let (p, o) = (ppo.to_str().unwrap(), out.to_str().unwrap());
    let t = tradetune(&["train", "--out", o, "--ppo", p, "--total-timesteps", "128"]);
    assert!(t.status.success(), "{}", text(&t.stderr));
    std::fs::copy(out.join("model.bpk"), run.join("model.bpk")).unwrap();
    let o = tradetune(&["backtest", "--checkpoint", run.to_str().unwrap()]);
    assert!(!o.status.success());
    let stderr = text(&o.stderr);
    assert!(stderr.contains("model.bpk"), "{stderr}");
    assert!(stderr.contains("from different runs"), "{stderr}");
    assert!(!stderr.contains("Validation(\""), "{stderr}");

    std::fs::write(run.join("model.bpk"), b"not a burn record").unwrap();
    let o = tradetune(&["backtest", "--checkpoint", run.to_str().unwrap()]);
    assert!(!o.status.success());
    let stderr = text(&o.stderr);
    assert!(stderr.contains("model.bpk"), "{stderr}");
    assert!(stderr.contains("damaged, cut short"), "{stderr}");
    assert!(!stderr.contains("Io(\""), "{stderr}");

    std::fs::remove_file(run.join("state.json")).unwrap();
    let o = tradetune(&["backtest", "--checkpoint", run.to_str().unwrap()]);
    assert!(!o.status.success());
    let stderr = text(&o.stderr);
    assert!(
        stderr.contains("state.json") && stderr.contains("missing"),
        "{stderr}"
    );
}

/// Daily rows `Date,Open,High,Low,Close,Volume` of one asset for the days `days` (day 0 is
/// 2000-01-01), a seeded walk whose every row depends on its day only: rows for older days
/// prepended to a file leave its other rows as they were.
fn daily_rows(days: std::ops::Range<i64>) -> String {
    let mut s = String::new();
    for d in days {
        // A price from the day alone: a slow wave and a hash-like wiggle.
        let h = (d.wrapping_mul(2_654_435_761).rem_euclid(1_000)) as f64 / 1_000.0;
        let close = 100.0 + 20.0 * (d as f64 / 37.0).sin() + 3.0 * h;
        let (open, high, low) = (close - 0.5, close + 1.0, close - 1.5);
        let t = 946_684_800 + d * 86_400;
        s += &format!(
            "{t},{open:.4},{high:.4},{low:.4},{close:.4},{}\n",
            1_000 + d.rem_euclid(97)
        );
    }
    s
}

/// Writes the rows of `days` to `path` with a header.
fn write_daily(path: &Path, days: std::ops::Range<i64>) {
    std::fs::write(
        path,
        format!("Date,Open,High,Low,Close,Volume\n{}", daily_rows(days)),
    )
    .unwrap();
}

/// `backtest --json` of `run`: the report and stderr; fails the test if it fails.
fn backtest_json(run: &Path) -> (serde_json::Value, String) {
    let o = tradetune(&["backtest", "--checkpoint", run.to_str().unwrap(), "--json"]);
    let stderr = text(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    (serde_json::from_str(&text(&o.stdout)).unwrap(), stderr)
}

/// The bars a backtest ran on: count, first and last.
fn bars_of(report: &serde_json::Value) -> (u64, String, String) {
    (
        report["bars"].as_u64().unwrap(),
        report["start"].as_str().unwrap().to_owned(),
        report["end"].as_str().unwrap().to_owned(),
    )
}

/// A checkpoint records what it was trained on (the data's fingerprint, the split by time, the
/// scaler). Older bars prepended to its file since would move a 70 / 15 / 15 split into the
/// training bars; the backtest instead runs on the test bars it was trained with, and says
/// why. A run resumed on that file trains on the recorded bars too, and its checkpoint then
/// backtests on them without a word.
#[test]
fn a_backtest_after_older_bars_were_prepended_runs_on_the_recorded_test_bars_and_says_so() {
    let dir = scratch("cli_backtest", "prepended");
    let csv = dir.join("acme.csv");
    write_daily(&csv, 0..600);
    let run = train_tiny_with(&dir, &["--data", csv.to_str().unwrap()]);
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.join("data.json")).unwrap()).unwrap();
    for field in ["fingerprint", "split_dates", "scaler"] {
        assert!(!record[field].is_null(), "{field} missing from {record}");
    }
    let (before, stderr) = backtest_json(&run);
    assert!(!stderr.contains("note"), "unchanged data, yet: {stderr}");

    // 400 older days in front of the same rows.
    write_daily(&csv, -400..600);
    let (after, stderr) = backtest_json(&run);
    assert_eq!(bars_of(&after), bars_of(&before), "{stderr}");
    assert!(
        stderr.contains("the data changed since training")
            && stderr.contains("splits cut at the recorded dates")
            && stderr.contains("features scaled as in training")
            && stderr.contains("acme.csv"),
        "{stderr}"
    );
    let notes = after["notes"].as_array().unwrap();
    assert_eq!(notes.len(), 1, "{after}");

    // Resumed on the longer file: the recorded bars again, recorded in the new checkpoint.
    let resumed = dir.join("resumed");
    let o = tradetune(&[
        "train",
        "--resume",
        run.to_str().unwrap(),
        "--out",
        resumed.to_str().unwrap(),
        "--total-timesteps",
        "128",
    ]);
    let stdout = text(&o.stdout);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        stdout.contains("splits cut at the recorded dates"),
        "{stdout}"
    );
    let dates = |dir: &Path| {
        let r: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("data.json")).unwrap()).unwrap();
        r["split_dates"].clone()
    };
    assert_eq!(dates(&resumed), dates(&run));
    let (again, stderr) = backtest_json(&resumed);
    assert_eq!(bars_of(&again), bars_of(&before));
    assert!(!stderr.contains("note"), "{stderr}");
}

/// A checkpoint whose file no longer holds the bars of the split it is backtested on is
/// refused, naming the checkpoint's record, the file and the bars that are missing; the
/// splits still there backtest as recorded.
#[test]
fn a_checkpoint_whose_data_lost_its_test_bars_is_refused_naming_the_record_and_the_file() {
    let dir = scratch("cli_backtest", "lost_test");
    let csv = dir.join("acme.csv");
    write_daily(&csv, 0..600);
    let run = train_tiny_with(&dir, &["--data", csv.to_str().unwrap()]);
    let (before, _) = backtest_json(&run);
    // The last 60 days are gone: the test split loses its last bars.
    write_daily(&csv, 0..540);
    let o = tradetune(&["backtest", "--checkpoint", run.to_str().unwrap()]);
    assert!(!o.status.success());
    let stderr = text(&o.stderr);
    for word in [
        "data.json",
        "acme.csv",
        "test split",
        before["start"].as_str().unwrap(),
        "no longer holds all of those bars",
    ] {
        assert!(stderr.contains(word), "{word} missing: {stderr}");
    }
    // Its validation bars are all there.
    let o = tradetune(&[
        "backtest",
        "--checkpoint",
        run.to_str().unwrap(),
        "--split",
        "validation",
    ]);
    let stderr = text(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    let test = format!("test {}", before["start"].as_str().unwrap());
    assert!(stderr.contains(&test), "{test} missing: {stderr}");
    assert!(stderr.contains("no longer all there"), "{stderr}");
}

/// A checkpoint written before checkpoints recorded their data (no fingerprint, split dates
/// or scaler in `data.json`) still backtests, with one note that its data cannot be checked.
#[test]
fn an_older_checkpoint_without_a_data_record_still_backtests_with_a_note() {
    let dir = scratch("cli_backtest", "old_format");
    let run = train_tiny(&dir);
    let path = run.join("data.json");
    let mut record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let fields = record.as_object_mut().unwrap();
    for field in ["fingerprint", "split_dates", "scaler"] {
        assert!(fields.remove(field).is_some(), "{field}");
    }
    std::fs::write(&path, serde_json::to_vec_pretty(&record).unwrap()).unwrap();
    let (report, stderr) = backtest_json(&run);
    assert_eq!(report["split"], "test");
    let notes: Vec<&str> = stderr.lines().filter(|l| l.starts_with("note:")).collect();
    assert_eq!(notes.len(), 1, "{stderr}");
    assert!(notes[0].contains("cannot be checked"), "{stderr}");
}
