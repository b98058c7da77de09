//! `tradetune study importance NAME` run as the real binary (issue 17): the people's table
//! (most important first, 4 significant digits), `--json` at full precision equal to the
//! engine's numbers, and clear errors for an unknown study, a study with too few COMPLETE
//! trials and a missing database. (Agreement with Optuna itself: tests/tests/importance_optuna.rs.)

use crate::common;

use std::path::Path;

use common::{scratch, text, tradetune};
use tradetune_engine::storage::{
    CategoricalChoice, NewTrial, OptunaDistribution, Storage, StudyDirection, TrialState,
};
use tradetune_engine::study::importance::{PedAnova, study_importances};

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Study `decided_by_x` (40 trials, the value is mostly `x`), `one_trial` (one COMPLETE trial,
/// one PRUNED) and `no_params`.
fn write_db(db: &Path) {
    let mut storage = Storage::open(db).unwrap();
    let x = OptunaDistribution::float(-1.0, 1.0, false, None).unwrap();
    let lr = OptunaDistribution::float(1e-5, 1e-1, true, None).unwrap();
    let act = OptunaDistribution::categorical(vec![
        CategoricalChoice::Str("relu".into()),
        CategoricalChoice::Str("tanh".into()),
    ])
    .unwrap();
    let study = storage
        .create_study("decided_by_x", &[StudyDirection::Minimize])
        .unwrap();
    for i in 0..40 {
        let u = |k: f64| ((i + 1) as f64 * k).fract();
        let (xv, lrv, actv) = (
            -1.0 + 2.0 * u(0.618_033_988_75),
            (1e-5f64.ln() + u(0.754_877_666) * 1e4f64.ln()).exp(),
            (i % 2) as f64,
        );
        let mut t = NewTrial::new(TrialState::Complete);
        t.values = Some(vec![xv * xv + 0.01 * lrv.log10() + 0.001 * actv]);
        t.params = vec![
            ("x".into(), xv, x.clone()),
            ("lr".into(), lrv, lr.clone()),
            ("act".into(), actv, act.clone()),
        ];
        storage.add_trial(study, &t).unwrap();
    }
    let few = storage
        .create_study("one_trial", &[StudyDirection::Maximize])
        .unwrap();
    for state in [TrialState::Complete, TrialState::Pruned] {
        let mut t = NewTrial::new(state);
        t.values = (state == TrialState::Complete).then(|| vec![1.0]);
        t.params = vec![("x".into(), 0.5, x.clone())];
        storage.add_trial(few, &t).unwrap();
    }
    let none = storage
        .create_study("no_params", &[StudyDirection::Minimize])
        .unwrap();
    for v in [1.0, 2.0, 3.0] {
        let mut t = NewTrial::new(TrialState::Complete);
        t.values = Some(vec![v]);
        storage.add_trial(none, &t).unwrap();
    }
}

#[test]
fn importance_prints_a_sorted_table_and_full_precision_json() {
    let dir = scratch("cli_study_importance", "table");
    let db = dir.join("studies.db");
    write_db(&db);
    let want = study_importances(
        &Storage::open_read_only(&db).unwrap(),
        "decided_by_x",
        &PedAnova::default(),
    )
    .unwrap();
    assert_eq!(want.params[0].name, "x", "{want:?}");

    let o = tradetune(&["study", "importance", "decided_by_x", "--db", s(&db)]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].contains("'decided_by_x'") && lines[0].contains("top 4 of 40 COMPLETE trials"),
        "{out}"
    );
    assert!(
        lines[1].starts_with("parameter") && lines[1].ends_with("importance"),
        "{out}"
    );
    let rows: Vec<(&str, &str)> = lines[2..]
        .iter()
        .map(|l| {
            let mut f = l.split_whitespace();
            (f.next().unwrap(), f.next().unwrap())
        })
        .collect();
    let names: Vec<&str> = rows.iter().map(|r| r.0).collect();
    let expected: Vec<&str> = want.params.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, expected, "most important first:\n{out}");
    for ((_, shown), p) in rows.iter().zip(&want.params) {
        // The mantissa's digits (`0.2500`, `1.235e-4`).
        let mantissa = shown.split('e').next().unwrap_or(shown);
        let digits = mantissa
            .trim_start_matches(['0', '.'])
            .chars()
            .filter(char::is_ascii_digit)
            .count();
        assert_eq!(digits, 4, "4 significant digits: {shown}\n{out}");
        let v: f64 = shown.parse().unwrap();
        assert!(
            (v - p.importance).abs() <= 5e-4 * p.importance,
            "{shown} vs {}",
            p.importance
        );
    }

    let o = tradetune(&[
        "study",
        "importance",
        "decided_by_x",
        "--db",
        s(&db),
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["study"], "decided_by_x");
    assert_eq!(v["evaluator"]["name"], "PedAnovaImportanceEvaluator");
    assert_eq!(v["evaluator"]["target_quantile"], 0.1);
    assert_eq!(
        (v["n_trials"].as_u64(), v["n_top_trials"].as_u64()),
        (Some(40), Some(4))
    );
    assert_eq!(v["all_equal"], false);
    let got: Vec<(String, f64, f64)> = v["importances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["param"].as_str().unwrap().to_owned(),
                p["importance"].as_f64().unwrap(),
                p["raw"].as_f64().unwrap(),
            )
        })
        .collect();
    let exact: Vec<(String, f64, f64)> = want
        .params
        .iter()
        .map(|p| (p.name.clone(), p.importance, p.raw))
        .collect();
    assert_eq!(got, exact, "every digit");

    // Optuna's other settings of the evaluator.
    let custom = PedAnova {
        target_quantile: 0.2,
        region_quantile: 0.6,
        evaluate_on_local: false,
    };
    let want = study_importances(
        &Storage::open_read_only(&db).unwrap(),
        "decided_by_x",
        &custom,
    )
    .unwrap();
    let o = tradetune(&[
        "study",
        "importance",
        "decided_by_x",
        "--db",
        s(&db),
        "--json",
        "--target-quantile",
        "0.2",
        "--region-quantile",
        "0.6",
        "--global",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["evaluator"]["region_quantile"], 0.6);
    assert_eq!(v["evaluator"]["evaluate_on_local"], false);
    assert_eq!(v["importances"][0]["param"], want.params[0].name.as_str());
    assert_eq!(
        v["importances"][0]["raw"].as_f64(),
        Some(want.params[0].raw)
    );

    // A study without parameters says so.
    let o = tradetune(&["study", "importance", "no_params", "--db", s(&db)]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("the study has no parameters"));
}

#[test]
fn importance_errors_are_clear() {
    let dir = scratch("cli_study_importance", "errors");
    let db = dir.join("studies.db");
    write_db(&db);
    let fails = |args: &[&str]| {
        let o = tradetune(args);
        assert!(!o.status.success(), "{args:?} should fail");
        assert!(o.stdout.is_empty(), "{}", text(&o.stdout));
        text(&o.stderr)
    };
    let e = fails(&["study", "importance", "nope", "--db", s(&db)]);
    assert!(
        e.contains("no study named `nope`") && e.contains("decided_by_x, one_trial, no_params"),
        "{e}"
    );
    let e = fails(&["study", "importance", "one_trial", "--db", s(&db)]);
    assert!(
        e.contains(
            "parameter importance needs at least 2 COMPLETE trials with a finite value; study \
             `one_trial` has 1"
        ),
        "{e}"
    );
    let e = fails(&[
        "study",
        "importance",
        "decided_by_x",
        "--db",
        s(&db),
        "--target-quantile",
        "0.5",
        "--region-quantile",
        "0.4",
    ]);
    assert!(
        e.contains("0 < target_quantile < region_quantile <= 1"),
        "{e}"
    );
    let missing = dir.join("missing.db");
    let e = fails(&["study", "importance", "x", "--db", s(&missing)]);
    assert!(e.contains("no such study database"), "{e}");
    assert!(!missing.exists(), "a missing database is not created");
    let e = fails(&["study", "importance", "x", "--db", s(&dir)]);
    assert!(e.contains("is a folder, not a study database"), "{e}");
}
