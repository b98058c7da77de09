//! A cross-validated study end to end: `[evaluation] cpcv` on the bundled data, each trial
//! trained and scored on every fold, then `tradetune study report` with PBO and the deflated
//! Sharpe ratio over the stored fold returns; a hold-out study's report backtests the best
//! trial's checkpoint on the test split against equal weight.

use crate::common;

use common::{scratch, text, tradetune};
use tradetune_engine::storage::{Storage, TrialState};

const STUDY: &str = r#"[study]
name = "cv"
n_trials = 4
objective = "total_return"

[evaluation]
scheme = "cpcv"
n_groups = 3
k_test = 1
purge_bars = 5
embargo_bars = 5

[fixed]
env.n_envs = 4
ppo.n_steps = 32
ppo.batch_size = 64
ppo.n_epochs = 1
ppo.policy.net_arch.pi = [8]
ppo.policy.net_arch.vf = [8]
train.total_timesteps = 128
train.eval_every = 0

[search]
"ppo.learning_rate" = { low = 1e-4, high = 1e-2, log = true }

[sampler]
kind = "random"
seed = 3

[pruner]
kind = "none"
"#;

/// `tradetune study run FILE --db DB` without telemetry sampling.
fn run_study(file: &std::path::Path, db: &std::path::Path) -> std::process::Output {
    tradetune(&[
        "study",
        "run",
        file.to_str().unwrap(),
        "--db",
        db.to_str().unwrap(),
        "--telemetry-interval",
        "0",
    ])
}

#[test]
fn a_cpcv_study_stores_its_folds_and_reports_pbo_and_the_deflated_sharpe() {
    let dir = scratch("cli_study_report", "cpcv");
    let file = dir.join("cv.toml");
    let db = dir.join("cv.db");
    std::fs::write(&file, STUDY).unwrap();
    let o = run_study(&file, &db);
    assert!(o.status.success(), "{}", text(&o.stderr));

    // Every trial trained and scored on the 3 folds in order: its value is their mean, and
    // each fold's intermediate value is the total return of the returns stored for it.
    let storage = Storage::open_read_only(&db).unwrap();
    let study = storage.study("cv").unwrap();
    let trials = storage.trials(study.study_id).unwrap();
    assert_eq!(trials.len(), 4);
    let mut lengths = Vec::new();
    for t in &trials {
        assert_eq!(t.state, TrialState::Complete, "trial {}", t.number);
        let folds: Vec<i64> = t.intermediate_values.iter().map(|(s, _)| *s).collect();
        assert_eq!(folds, [0, 1, 2], "trial {}", t.number);
        let mean = t.intermediate_values.iter().map(|(_, v)| v).sum::<f64>() / 3.0;
        assert!(
            (t.value().unwrap() - mean).abs() < 1e-12,
            "trial {}",
            t.number
        );
        let returns = storage.fold_returns(t.trial_id).unwrap();
        for (fold, reported) in &t.intermediate_values {
            let compounded = returns
                .iter()
                .filter(|r| r.fold == *fold)
                .fold(1.0, |acc, r| acc * (1.0 + r.value))
                - 1.0;
            assert!(
                (compounded - reported).abs() < 1e-9 * (1.0 + reported.abs()),
                "trial {} fold {fold}: stored returns compound to {compounded}, reported {reported}",
                t.number
            );
        }
        lengths.push(returns.len());
    }
    assert!(
        lengths.iter().all(|&n| n == lengths[0] && n > 100),
        "{lengths:?}"
    );

    let o = tradetune(&[
        "study",
        "report",
        "cv",
        "--db",
        db.to_str().unwrap(),
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let r: serde_json::Value = serde_json::from_str(&text(&o.stdout)).unwrap();
    assert_eq!(r["with_returns"], 4);
    assert_eq!(r["bars"], lengths[0]);
    let pbo = r["pbo"]["result"]["pbo"].as_f64().expect("a PBO");
    assert!((0.0..=1.0).contains(&pbo), "{pbo}");
    assert_eq!(r["pbo"]["result"]["strategies"], 4);
    assert_eq!(r["best"]["folds"].as_array().unwrap().len(), 3);
    let dsr = r["dsr"]["result"]["dsr"]
        .as_f64()
        .expect("a deflated Sharpe ratio");
    assert!((0.0..=1.0).contains(&dsr), "{dsr}");
    assert_eq!(r["dsr"]["result"]["trials"], 4);
    // A cross-validated trial keeps no single policy: no test-split backtest, and why.
    assert!(r["test"]["result"].is_null(), "{}", r["test"]);
    let why = r["test"]["unavailable"].as_str().unwrap();
    assert!(
        why.contains("was cross-validated") && why.contains("study reseed"),
        "{why}"
    );

    // Seed spread: the best trial again with 2 other seeds, on the test split, stored.
    let o = tradetune(&[
        "study",
        "reseed",
        file.to_str().unwrap(),
        "--db",
        db.to_str().unwrap(),
        "--seeds",
        "2",
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let spread: serde_json::Value = serde_json::from_str(&text(&o.stdout)).unwrap();
    assert_eq!(spread["trial"], r["best"]["number"]);
    let seeds = spread["seeds"].as_array().unwrap();
    assert_eq!(seeds.len(), 2);
    assert_ne!(seeds[0]["seed"], seeds[1]["seed"]);
    for s in seeds {
        assert!(s["sharpe"].as_f64().unwrap().is_finite(), "{s}");
        assert!(s["total_return"].as_f64().unwrap() > -1.0, "{s}");
    }
    assert!(
        spread["equal_weight_total_return"]
            .as_f64()
            .unwrap()
            .is_finite()
    );

    let o = tradetune(&["study", "report", "cv", "--db", db.to_str().unwrap()]);
    let out = text(&o.stdout);
    assert!(out.contains("PBO") && out.contains("folds:"), "{out}");
    assert!(out.contains("seed spread of trial #"), "{out}");
}

/// A lookback that leaves a fold's test block too few bars to score refuses the study before
/// its first trial (which failed before any fold trained, and before that after training
/// the first fold), saying which split and why, and stores nothing.
#[test]
fn a_lookback_longer_than_a_test_block_refuses_the_study_before_it_trains() {
    let dir = scratch("cli_study_report", "lookback");
    let file = dir.join("long.toml");
    let db = dir.join("long.db");
    let long = STUDY
        .replace("name = \"cv\"", "name = \"long\"")
        .replace("n_trials = 4", "n_trials = 1")
        .replace("n_groups = 3", "n_groups = 8")
        .replace("env.n_envs = 4", "env.n_envs = 4\nenv.lookback = 300");
    std::fs::write(&file, long).unwrap();
    let o = run_study(&file, &db);
    let (stdout, stderr) = (text(&o.stdout), text(&o.stderr));
    assert!(!o.status.success(), "{stdout}");
    assert!(
        stderr.contains("fixed.env.lookback")
            && stderr.contains("no trial of this study can run")
            && stderr.contains("fold test")
            && stderr.contains("lookback 300"),
        "{stderr}"
    );
    assert!(!stdout.contains("trial 0"), "{stdout}");
    assert!(!db.exists(), "nothing is stored");
}

#[test]
fn a_holdout_study_reports_why_it_has_no_pbo_and_backtests_its_checkpoint() {
    let dir = scratch("cli_study_report", "holdout");
    let file = dir.join("h.toml");
    let db = dir.join("h.db");
    let holdout = STUDY
        .replace("name = \"cv\"", "name = \"h\"")
        .replace("n_trials = 4", "n_trials = 1")
        .replace("scheme = \"cpcv\"", "scheme = \"holdout\"")
        .replace(
            "n_groups = 3\nk_test = 1\npurge_bars = 5\nembargo_bars = 5\n",
            "",
        );
    std::fs::write(&file, holdout).unwrap();
    let o = run_study(&file, &db);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = tradetune(&["study", "report", "h", "--db", db.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(
        out.contains("PBO: not available") && out.contains("walk_forward or cpcv"),
        "{out}"
    );
    // The hold-out trial saved its policy: backtested on the test split beside equal weight,
    // the numbers of `tradetune backtest` on the same checkpoint.
    assert!(
        out.contains("best trial #0's policy on the test split"),
        "{out}"
    );
    let o = tradetune(&[
        "study",
        "report",
        "h",
        "--db",
        db.to_str().unwrap(),
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let r: serde_json::Value = serde_json::from_str(&text(&o.stdout)).unwrap();
    let t = &r["test"]["result"];
    assert_eq!(t["trial"], 0, "{}", r["test"]);
    assert_eq!(t["summary"]["split"], "test");
    let checkpoint = t["checkpoint"].as_str().unwrap();
    let o = tradetune(&["backtest", "--checkpoint", checkpoint, "--json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let b: serde_json::Value = serde_json::from_str(&text(&o.stdout)).unwrap();
    for side in ["agent", "equal_weight"] {
        for m in ["total_return", "sharpe"] {
            let (x, y) = (
                t["summary"][side][m].as_f64().unwrap(),
                b[side][m].as_f64().unwrap(),
            );
            assert!((x - y).abs() < 1e-9, "{side}.{m}: report {x}, backtest {y}");
        }
    }

    // `study reseed --name` reaches the study by its name in the database and reseeds it from
    // the study file recorded with it.
    let reseed = |extra: &[&str]| {
        let mut a = vec!["study", "reseed"];
        a.extend_from_slice(extra);
        a.extend_from_slice(&["--db", db.to_str().unwrap(), "--seeds", "1", "--json"]);
        tradetune(&a)
    };
    let o = reseed(&["--name", "h"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let spread: serde_json::Value = serde_json::from_str(&text(&o.stdout)).unwrap();
    assert_eq!(spread["trial"], 0, "{spread}");
    // A study file whose split differs from the recorded one is refused, naming it and the
    // split, rather than reseeding on other bars.
    let other = dir.join("other_split.toml");
    std::fs::write(
        &other,
        format!(
            "{}\n[split]\nby = \"fractions\"\ntrain = 0.5\nvalidation = 0.25\n",
            std::fs::read_to_string(&file).unwrap()
        ),
    )
    .unwrap();
    let o = reseed(&[other.to_str().unwrap()]);
    assert!(!o.status.success());
    let err = text(&o.stderr);
    assert!(
        err.contains("other_split.toml") && err.contains("[split]"),
        "{err}"
    );

    // A bad [evaluation] names the file, line and key before anything runs.
    std::fs::write(&file, STUDY.replace("n_groups = 3", "n_group = 3")).unwrap();
    let o = tradetune(&[
        "study",
        "run",
        file.to_str().unwrap(),
        "--db",
        db.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    let err = text(&o.stderr);
    assert!(err.contains("h.toml") && err.contains("n_group"), "{err}");
}

/// A hold-out study on a file that has changed since it ran: the best trial's checkpoint
/// backtests on the test bars it was trained with (its `data.json` records them), and `study
/// reseed` refuses the changed data, naming the study and the file, rather than training and
/// testing its seeds on other bars.
#[test]
fn a_study_on_changed_data_backtests_its_recorded_bars_and_refuses_to_reseed() {
    let dir = scratch("cli_study_report", "changed_data");
    let csv = dir.join("acme.csv");
    let rows = |days: std::ops::Range<i64>| {
        let mut s = String::from("Date,Open,High,Low,Close,Volume\n");
        for d in days {
            let close = 100.0 + 20.0 * (d as f64 / 37.0).sin() + (d.rem_euclid(7)) as f64 * 0.3;
            s += &format!(
                "{},{:.4},{:.4},{:.4},{close:.4},1000\n",
                946_684_800 + d * 86_400,
                close - 0.5,
                close + 1.0,
                close - 1.5
            );
        }
        s
    };
    std::fs::write(&csv, rows(0..600)).unwrap();
    let file = dir.join("changed.toml");
    let db = dir.join("studies.db");
    let study = STUDY
        .replace("name = \"cv\"", "name = \"changed\"")
        .replace("n_trials = 4", "n_trials = 1")
        .replace("scheme = \"cpcv\"", "scheme = \"holdout\"")
        .replace(
            "n_groups = 3\nk_test = 1\npurge_bars = 5\nembargo_bars = 5\n",
            "",
        );
    std::fs::write(&file, format!("{study}\n[data]\npaths = [\"acme.csv\"]\n")).unwrap();
    let o = run_study(&file, &db);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = tradetune(&[
        "study",
        "report",
        "changed",
        "--db",
        db.to_str().unwrap(),
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let r: serde_json::Value = serde_json::from_str(&text(&o.stdout)).unwrap();
    let checkpoint = r["test"]["result"]["checkpoint"]
        .as_str()
        .unwrap_or_else(|| panic!("no checkpoint: {}", r["test"]))
        .to_owned();
    let backtest = || {
        let o = tradetune(&["backtest", "--checkpoint", &checkpoint, "--json"]);
        let stderr = text(&o.stderr);
        assert!(o.status.success(), "{stderr}");
        let b: serde_json::Value = serde_json::from_str(&text(&o.stdout)).unwrap();
        (
            (b["bars"].clone(), b["start"].clone(), b["end"].clone()),
            stderr,
        )
    };
    let (before, stderr) = backtest();
    assert!(!stderr.contains("note"), "{stderr}");

    // 300 older days in front of the same rows.
    std::fs::write(&csv, rows(-300..600)).unwrap();
    let (after, stderr) = backtest();
    assert_eq!(after, before, "{stderr}");
    assert!(
        stderr.contains("splits cut at the recorded dates"),
        "{stderr}"
    );

    let o = tradetune(&[
        "study",
        "reseed",
        "--name",
        "changed",
        "--db",
        db.to_str().unwrap(),
        "--seeds",
        "1",
    ]);
    assert!(!o.status.success());
    let err = text(&o.stderr);
    assert!(
        err.contains("differs from study 'changed'") && err.contains("acme.csv"),
        "{err}"
    );
}

/// A partition count CSCV cannot use is refused as the argument it is (exit 1, naming
/// `--partitions`), before the database is read, not reported as "PBO: not available"; one
/// whose combinations pass a u128 is counted roughly, not overflowed.
#[test]
fn a_partition_count_cscv_cannot_use_is_refused_by_name() {
    let dir = scratch("cli_study_report", "partitions");
    let db = dir.join("none.db");
    for (s, said) in [
        ("3", "even number"),
        ("0", "even number"),
        ("200", "about 9.1e58 combinations"),
    ] {
        let o = tradetune(&[
            "study",
            "report",
            "x",
            "--db",
            db.to_str().unwrap(),
            "--partitions",
            s,
        ]);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(err.contains("--partitions") && err.contains(said), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}
