//! The real Optuna client against TradeTune's storage.
//!
//! - TradeTune writes a database; `tests/python/check_optuna_reads.py` opens it with
//!   `optuna.load_study` and must see every study, trial, parameter, value, state, intermediate
//!   value, attribute and best trial as written; its `trials_dataframe().to_csv()` must equal
//!   TradeTune's CSV export byte for byte (also for Optuna's own reference file).
//! - Four TradeTune worker threads and one Optuna process write one study in one file at the
//!   same time: no "database is locked", every trial stored, numbers unique.
//!
//! - The same three checks on PostgreSQL (Optuna reads ours, we read what Optuna wrote, both
//!   write one study at once) when `TRADETUNE_TEST_POSTGRES` names a server (see
//!   `engine/storage/tests/support/pg.rs`); PostgreSQL needs `psycopg` in Python too.
//!
//! Needs `python3` with `optuna` and `pandas` (`python3 -m pip install optuna pandas`). Without
//! them the tests print a loud SKIP, unless `TRADETUNE_REQUIRE_OPTUNA=1` (set by `.ci/run`),
//! in which case they fail.

use crate::pg;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};
use tradetune_engine::storage::{
    CategoricalChoice, JsonValue, NewTrial, OptunaDistribution, RunMetadata, Storage,
    StorageOptions, StudyDirection, TrialState, study_view_json,
};

fn python_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("python")
}

fn reference_db() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../engine/tests/testdata/optuna-reference.db")
}

/// True if python3 can import optuna and pandas; otherwise skip loudly or fail when required.
fn optuna_available(test: &str) -> bool {
    pg::python_has(test, "optuna, pandas")
}

/// A new PostgreSQL database for `test` when a server and Optuna's PostgreSQL driver are there.
fn postgres_database(test: &str) -> Option<String> {
    let url = pg::fresh_database(test)?;
    pg::python_has(test, "optuna, pandas, psycopg").then_some(url)
}

fn run_python(script: &str, args: &[&Path]) -> std::process::Output {
    Command::new("python3")
        .arg(python_dir().join(script))
        .args(args)
        .output()
        .expect("run python3")
}

fn float(low: f64, high: f64, log: bool, step: Option<f64>) -> OptunaDistribution {
    OptunaDistribution::float(low, high, log, step).unwrap()
}

fn choices(c: Vec<CategoricalChoice>) -> OptunaDistribution {
    OptunaDistribution::categorical(c).unwrap()
}

/// A database with every distribution kind, state, direction and value type.
fn write_database(path: &Path) {
    use CategoricalChoice as C;
    let mut s = Storage::open(path).unwrap();
    let lr = float(1e-5, 1e-1, true, None);
    let gamma = float(0.9, 0.9999, false, None);
    let clip = float(0.1, 0.3, false, Some(0.05));
    let batch = OptunaDistribution::int(32, 256, false, 32).unwrap();
    let units = OptunaDistribution::int(16, 512, true, 1).unwrap();
    let n_steps = choices(vec![C::Int(128), C::Int(256), C::Int(512)]);
    let act = choices(vec![C::Str("tanh".into()), C::Str("relu".into())]);
    let mixed = choices(vec![
        C::None,
        C::Bool(true),
        C::Float(0.5),
        C::Str("auto".into()),
    ]);
    let all = |k: f64| {
        vec![
            ("lr".to_owned(), 1e-4 * (1.0 + k), lr.clone()),
            ("gamma".to_owned(), 0.95 + (k % 5.0) / 100.0, gamma.clone()),
            // 0.1 + 0.05 * 4 = 0.30000000000000004 lies above high = 0.3, which Optuna rejects too.
            ("clip".to_owned(), 0.1 + 0.05 * (k % 4.0), clip.clone()),
            (
                "batch_size".to_owned(),
                32.0 * (1.0 + k % 7.0),
                batch.clone(),
            ),
            ("n_units".to_owned(), 16.0 + k * 3.0, units.clone()),
            ("n_steps".to_owned(), k % 3.0, n_steps.clone()),
            ("activation".to_owned(), k % 2.0, act.clone()),
            ("mixed".to_owned(), k % 4.0, mixed.clone()),
        ]
    };

    let single = s
        .create_study("tt_single", &[StudyDirection::Maximize])
        .unwrap();
    s.set_study_user_attr(single, "algo", &JsonValue::from("PPO"))
        .unwrap();
    s.set_study_user_attr(
        single,
        "env",
        &JsonValue::parse(r#"{"assets": ["BTC", "ETH"], "fee": 0.001}"#).unwrap(),
    )
    .unwrap();
    for k in 0..3 {
        let t = s.create_trial(single).unwrap();
        s.set_params(t.trial_id, &all(k as f64)).unwrap();
        for step in 0..3 {
            s.report(t.trial_id, step * 10, 0.1 * (k * 3 + step) as f64)
                .unwrap();
        }
        s.set_trial_user_attr(t.trial_id, "seed", &JsonValue::Int(k))
            .unwrap();
        s.set_run_metadata(
            t.trial_id,
            &RunMetadata {
                worker: Some(format!("worker-{k}")),
                device: "cpu".into(),
                backend: "flex".into(),
                precision: "f32".into(),
                config: JsonValue::parse(r#"{"ppo": {"n_steps": 4096, "clip_range": 0.2}}"#)
                    .unwrap(),
            },
        )
        .unwrap();
        s.complete_trial(t.trial_id, &[0.25 * k as f64 - 0.1])
            .unwrap();
    }
    let t = s.create_trial(single).unwrap();
    s.set_params(t.trial_id, &all(3.0)).unwrap();
    s.complete_trial(t.trial_id, &[f64::INFINITY]).unwrap();
    let t = s.create_trial(single).unwrap();
    s.set_params(t.trial_id, &all(4.0)[..4]).unwrap();
    for (step, v) in [
        (0, 1.5),
        (1, f64::NAN),
        (2, f64::INFINITY),
        (3, f64::NEG_INFINITY),
    ] {
        s.report(t.trial_id, step, v).unwrap();
    }
    s.set_trial_user_attr(
        t.trial_id,
        "loss",
        &JsonValue::parse("[NaN, 1.5, Infinity]").unwrap(),
    )
    .unwrap();
    s.prune_trial(t.trial_id).unwrap();
    let t = s.create_trial(single).unwrap();
    s.set_params(t.trial_id, &all(5.0)[4..]).unwrap();
    s.fail_trial(
        t.trial_id,
        "RuntimeError: CUDA out of memory, tried to allocate \"2 GiB\"",
    )
    .unwrap();
    let t = s.create_trial(single).unwrap();
    s.set_params(t.trial_id, &all(6.0)).unwrap();
    s.report(t.trial_id, 0, 0.25).unwrap();
    s.enqueue_trial(
        single,
        &[
            ("lr".into(), JsonValue::Float(3e-4)),
            ("activation".into(), JsonValue::from("relu")),
        ],
        &[("src".into(), JsonValue::from("baseline"))],
    )
    .unwrap();

    let multi = s
        .create_study(
            "tt_multi",
            &[StudyDirection::Minimize, StudyDirection::Maximize],
        )
        .unwrap();
    for k in 0..4 {
        let t = s.create_trial(multi).unwrap();
        s.set_params(t.trial_id, &all(k as f64 + 7.0)).unwrap();
        s.complete_trial(t.trial_id, &[k as f64 * 1.5, -(k as f64) / 3.0])
            .unwrap();
    }
    let t = s.create_trial(multi).unwrap();
    s.fail_trial(t.trial_id, "diverged").unwrap();
    let mut nt = NewTrial::new(TrialState::Complete);
    nt.values = Some(vec![0.123, 4.0]);
    nt.params = all(11.0)[..2].to_vec();
    nt.intermediate_values = vec![(0, 0.1), (5, 0.12)];
    nt.user_attrs = vec![
        ("src".into(), JsonValue::from("add_trial")),
        ("ok".into(), JsonValue::Bool(true)),
    ];
    s.add_trial(multi, &nt).unwrap();

    s.create_study("tt_empty", &[StudyDirection::Minimize])
        .unwrap();
}

/// What TradeTune reads from the file, in the shape `optuna_dump.py` prints.
fn our_view(path: &Path) -> Value {
    let s = Storage::open_read_only(path).unwrap();
    let studies: Vec<Value> = s
        .study_summaries()
        .unwrap()
        .iter()
        .map(|sum| {
            study_view_json(&sum.study, &s.trials(sum.study.study_id).unwrap(), sum.best).unwrap()
        })
        .collect();
    json!({ "studies": studies })
}

fn check_with_optuna(db: &Path, expected: &Value, work: &Path) {
    let expected_path = work.join("expected.json");
    std::fs::write(&expected_path, serde_json::to_vec_pretty(expected).unwrap()).unwrap();
    let out = run_python("check_optuna_reads.py", &[db, &expected_path, work]);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{text}");
    assert!(
        out.status.success(),
        "Optuna disagrees with TradeTune about {}:\n{text}",
        db.display()
    );
    let s = Storage::open_read_only(db).unwrap();
    for study in s.studies().unwrap() {
        let theirs = std::fs::read(work.join(format!("{}.csv", study.name))).unwrap();
        let mut ours = Vec::new();
        s.export_csv(&study.name, &mut ours).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&ours),
            String::from_utf8_lossy(&theirs),
            "CSV of study {} differs from Optuna's trials_dataframe().to_csv()",
            study.name
        );
    }
}

#[test]
fn optuna_reads_a_tradetune_database_and_exports_the_same_csv() {
    if !optuna_available("optuna_reads_a_tradetune_database_and_exports_the_same_csv") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tradetune.db");
    write_database(&db);
    let expected = our_view(&db);
    // Sanity: our own reading has what was written (the roundtrip is tested in the engine).
    assert_eq!(
        expected["studies"][0]["trials"].as_array().unwrap().len(),
        8
    );
    assert_eq!(expected["studies"][0]["best"], json!([3, "inf"]));
    check_with_optuna(&db, &expected, dir.path());
}

#[test]
fn optunas_reference_file_exports_the_same_csv() {
    if !optuna_available("optunas_reference_file_exports_the_same_csv") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("reference.db");
    std::fs::copy(reference_db(), &db).unwrap();
    let expected = our_view(&db);
    check_with_optuna(&db, &expected, dir.path());
}

#[test]
fn tradetune_workers_and_an_optuna_process_share_one_file() {
    if !optuna_available("tradetune_workers_and_an_optuna_process_share_one_file") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    share_one_storage(&dir.path().join("shared.db"));
}

#[test]
fn optuna_reads_a_tradetune_postgres_database_and_exports_the_same_csv() {
    let Some(url) = postgres_database("optuna_reads_pg") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let db = Path::new(&url);
    write_database(db);
    let expected = our_view(db);
    assert_eq!(
        expected["studies"][0]["trials"].as_array().unwrap().len(),
        8
    );
    check_with_optuna(db, &expected, dir.path());
}

#[test]
fn tradetune_reads_what_optuna_writes_to_postgres() {
    let Some(url) = postgres_database("optuna_writes_pg") else {
        return;
    };
    // Optuna's reference contents (every distribution, state and value type), written by Optuna
    // into an empty PostgreSQL database; Optuna does not create databases, so make it first.
    let target = tradetune_engine::storage::db::pg_url::parse(&url).unwrap();
    tradetune_engine::storage::db::pg_url::create_database(&target).unwrap();
    let out = run_python("make_optuna_reference.py", &[Path::new(&url)]);
    assert!(
        out.status.success(),
        "make_optuna_reference.py: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let db = Path::new(&url);
    let expected = our_view(db);
    assert!(expected["studies"].as_array().unwrap().len() >= 4);
    let dir = tempfile::tempdir().unwrap();
    check_with_optuna(db, &expected, dir.path());
}

#[test]
fn tradetune_workers_and_an_optuna_process_share_one_postgres_database() {
    let Some(url) = postgres_database("shared_pg") else {
        return;
    };
    share_one_storage(Path::new(&url));
}

/// A study TradeTune ran, deleted by Optuna's own `delete_study` (as optuna-dashboard's
/// "Delete study" does): PostgreSQL lets it go (its references cascade), and on SQLite the
/// trial Optuna creates next (which takes the deleted trial's id) has none of the deleted
/// trial's run record, learning curve or fold returns.
fn optuna_deletes_a_study_tradetune_ran(db: &Path) {
    use tradetune_engine::storage::{CurvePoint, FoldReturn};
    let mut s = Storage::open(db).unwrap();
    let gone = s.create_study("gone", &[StudyDirection::Maximize]).unwrap();
    let t = s.create_trial(gone).unwrap();
    s.set_run_metadata(
        t.trial_id,
        &RunMetadata {
            worker: Some("w0".into()),
            device: "cpu".into(),
            backend: "flex".into(),
            precision: "f32".into(),
            config: JsonValue::parse(r#"{"ppo": {"n_steps": 64}}"#).unwrap(),
        },
    )
    .unwrap();
    let point = |update_index| CurvePoint {
        metric: "loss".into(),
        update_index,
        env_steps: 64 * (update_index + 1),
        value: 0.5,
    };
    s.append_learning_curve(t.trial_id, &[point(0), point(1)])
        .unwrap();
    s.put_fold_returns(
        t.trial_id,
        &[FoldReturn {
            fold: 0,
            bar_index: 0,
            bar_time: 1_700_000_000,
            value: 0.01,
            benchmark: Some(0.002),
        }],
    )
    .unwrap();
    s.complete_trial(t.trial_id, &[1.0]).unwrap();
    drop(s);
    let url = db.to_string_lossy();
    let url = if url.contains("://") {
        url.into_owned()
    } else {
        format!("sqlite:///{url}")
    };
    let script = "import sys, optuna\n\
        optuna.logging.set_verbosity(optuna.logging.WARNING)\n\
        optuna.delete_study(study_name='gone', storage=sys.argv[1])\n\
        study = optuna.create_study(study_name='new', storage=sys.argv[1])\n\
        trial = study.ask()\n\
        study.tell(trial, 2.0)\n\
        print(trial._trial_id)\n";
    let out = Command::new("python3")
        .args(["-c", script, &url])
        .output()
        .expect("run python3");
    assert!(
        out.status.success(),
        "Optuna's delete_study: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let new_id: i64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    let s = Storage::open(db).unwrap();
    assert!(s.run_metadata(new_id).unwrap().is_none());
    assert!(s.learning_curve(new_id).unwrap().is_empty());
    assert!(s.fold_returns(new_id).unwrap().is_empty());
    let names: Vec<String> = s.studies().unwrap().into_iter().map(|x| x.name).collect();
    assert_eq!(names, vec!["new".to_string()]);
}

#[test]
fn optuna_deletes_a_study_tradetune_ran_from_a_file() {
    if !optuna_available("optuna_deletes_a_study_tradetune_ran_from_a_file") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    optuna_deletes_a_study_tradetune_ran(&dir.path().join("deleted.db"));
}

#[test]
fn optuna_deletes_a_study_tradetune_ran_from_postgres() {
    let Some(url) = postgres_database("optuna_deletes_pg") else {
        return;
    };
    optuna_deletes_a_study_tradetune_ran(Path::new(&url));
}

/// Four TradeTune worker threads and one Optuna process write one study at once.
fn share_one_storage(db: &Path) {
    let db = db.to_path_buf();
    let study = Storage::open(&db)
        .unwrap()
        .create_study("shared", &[StudyDirection::Minimize])
        .unwrap();
    let (per_worker, n_optuna) = (40usize, 60usize);
    let x = float(-10.0, 10.0, false, None);
    let python = Command::new("python3")
        .arg(python_dir().join("optuna_worker.py"))
        .arg(&db)
        .arg("shared")
        .arg(n_optuna.to_string())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start the Optuna worker");
    std::thread::scope(|scope| {
        for w in 0..4 {
            let (db, x) = (db.clone(), x.clone());
            scope.spawn(move || {
                let opts = StorageOptions {
                    busy_timeout: Duration::from_secs(60),
                    ..Default::default()
                };
                let mut s = Storage::open_with(&db, &opts).unwrap();
                for i in 0..per_worker {
                    let t = s.create_trial(study).unwrap();
                    let v = ((w * per_worker + i) as f64 / 8.0) - 10.0;
                    s.set_param(t.trial_id, "x", v, &x).unwrap();
                    s.report(t.trial_id, 0, v * v).unwrap();
                    s.complete_trial(t.trial_id, &[v * v]).unwrap();
                }
            });
        }
    });
    let out = python.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "the Optuna worker failed:\n{text}");
    assert!(!text.contains("locked"), "{text}");

    let s = Storage::open_read_only(&db).unwrap();
    let trials = s.trials(study).unwrap();
    let total = 4 * per_worker + n_optuna;
    assert_eq!(trials.len(), total, "every trial is accounted for");
    let mut numbers: Vec<i64> = trials.iter().map(|t| t.number).collect();
    numbers.sort();
    assert_eq!(numbers, (0..total as i64).collect::<Vec<_>>());
    assert!(
        trials
            .iter()
            .all(|t| t.state == TrialState::Complete && t.param("x").is_some())
    );
}

/// Successive halving records a rung value of -inf (minimize) as Optuna does (`-Infinity`):
/// Optuna's own pruner, run on the same study, reads it as a float and prunes behind it (it
/// used to be stored as null, and Optuna's `competing_values.sort()` raised TypeError), and
/// TradeTune's next trial reads it back as -inf.
#[test]
fn optunas_pruner_reads_an_infinite_rung_value_tradetune_stored() {
    use tradetune_engine::study::pruner::SuccessiveHalvingPruner;
    use tradetune_engine::study::{Direction, PruneContext, Pruner, Trial};
    if !optuna_available("optunas_pruner_reads_an_infinite_rung_value_tradetune_stored") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sh.db");
    let pruner = SuccessiveHalvingPruner::new(Some(1), 2, 0, 0).unwrap();
    let mut s = Storage::open(&db).unwrap();
    let study = s.create_study("sh", &[StudyDirection::Minimize]).unwrap();
    let t = s.create_trial(study).unwrap();
    s.report(t.trial_id, 1, f64::NEG_INFINITY).unwrap();
    // What the runner does after each report (`TrialFn::should_prune`).
    let prune = |s: &mut Storage, trial_id: i64| {
        let records = s.trials(study).unwrap();
        let history: Vec<Trial> = records.iter().map(Trial::from).collect();
        let me = records.iter().position(|r| r.trial_id == trial_id).unwrap();
        let d = pruner.prune(&PruneContext {
            study_name: "sh",
            direction: Direction::Minimize,
            trials: &history,
            trial: &history[me],
        });
        for (k, v) in &d.system_attrs {
            s.set_trial_system_attr(trial_id, k, v).unwrap();
        }
        d.prune
    };
    assert!(!prune(&mut s, t.trial_id), "alone at rung 0: promoted");
    s.complete_trial(t.trial_id, &[f64::NEG_INFINITY]).unwrap();
    let t1 = s.create_trial(study).unwrap();
    s.report(t1.trial_id, 1, 5.0).unwrap();
    assert!(
        prune(&mut s, t1.trial_id),
        "TradeTune reads -inf back and prunes 5.0"
    );
    s.finish_trial(t1.trial_id, TrialState::Pruned, None)
        .unwrap();
    drop(s);
    let script = r#"
import math, sys
import optuna
optuna.logging.set_verbosity(optuna.logging.WARNING)
study = optuna.load_study(study_name="sh", storage="sqlite:///" + sys.argv[1])
assert study.trials[0].system_attrs["completed_rung_0"] == -math.inf, study.trials[0].system_attrs
pruner = optuna.pruners.SuccessiveHalvingPruner(min_resource=1, reduction_factor=2)
trial = study.ask()
trial.report(7.0, 1)
frozen = study._storage.get_trial(trial._trial_id)
print("pruned", pruner.prune(study, frozen))
"#;
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(&db)
        .output()
        .expect("run python3");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(text.contains("pruned True"), "{text}");
}

/// What Optuna's client stores and TradeTune's model refuses — `FloatDistribution(0.0,
/// float('inf'))` and `FloatDistribution(float('-inf'), float('inf'))` through `add_trial`, and
/// a user attribute nested 300 deep — leaves the study readable: the odd parameters are set
/// aside on their trials with a note each, and otherwise TradeTune's reading and CSV export are
/// Optuna's own, the parameters' values included.
#[test]
fn a_study_with_infinite_ranges_optuna_stored_reads_as_optuna_reads_it() {
    if !optuna_available("a_study_with_infinite_ranges_optuna_stored_reads_as_optuna_reads_it") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("edge.db");
    let script = r#"
import sys
import optuna
from optuna.distributions import FloatDistribution
from optuna.trial import create_trial
optuna.logging.set_verbosity(optuna.logging.WARNING)
st = optuna.create_study(study_name="edge", storage="sqlite:///" + sys.argv[1],
                         direction="maximize", sampler=optuna.samplers.RandomSampler(seed=1))
st.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=3)
st.add_trial(create_trial(params={"y": 5.0}, distributions={"y": FloatDistribution(0.0, float("inf"))},
                          value=0.5))
deep = []
for _ in range(299):
    deep = [deep]
st.add_trial(create_trial(params={"z": -2.5},
                          distributions={"z": FloatDistribution(float("-inf"), float("inf"))},
                          value=0.25, user_attrs={"deep": deep}))
"#;
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(&db)
        .output()
        .expect("run python3");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = Storage::open_read_only(&db).unwrap();
    let study = s.study("edge").unwrap();
    let trials = s.trials(study.study_id).unwrap();
    let notes = tradetune_engine::storage::set_aside_notes(&trials);
    assert_eq!(notes.len(), 2, "{notes:?}");
    assert!(
        notes[0].starts_with(
            "trial 3: parameter 'y' set aside (table trial_params, row 4, column \
             distribution_json: low and high must be finite numbers (got low = 0, high = inf))"
        ),
        "{notes:?}"
    );
    assert!(
        notes[1].starts_with("trial 4: parameter 'z' set aside"),
        "{notes:?}"
    );
    assert!(trials[4].user_attr("deep").is_some(), "300 deep reads");
    drop(s);
    // Optuna sees what TradeTune read (the notes are TradeTune's own), and exports the same CSV.
    let mut expected = our_view(&db);
    for t in expected["studies"][0]["trials"].as_array_mut().unwrap() {
        t.as_object_mut().unwrap().remove("set_aside");
    }
    assert_eq!(
        expected["studies"][0]["trials"][3]["params"]["y"],
        json!({"type": "float", "value": 5.0})
    );
    check_with_optuna(&db, &expected, dir.path());
}
