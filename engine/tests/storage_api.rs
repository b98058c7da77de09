//! The storage API end to end on real files: what is written reads back, the schema is
//! Optuna's byte for byte, and bad input is refused without changing what is stored.

use std::time::Duration;

use tradetune_engine::storage::{
    CategoricalChoice, CurvePoint, DEFAULT_STALE_AFTER, FAIL_REASON_KEY, JsonValue, NewTrial,
    OptunaDistribution, ParamValue, RunMetadata, Storage, StorageError, StorageOptions,
    StudyDirection, TelemetrySample, TrialState, now_utc,
};

const REFERENCE_DB: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/testdata/optuna-reference.db"
);

fn lr() -> OptunaDistribution {
    OptunaDistribution::float(1e-5, 1e-1, true, None).unwrap()
}

fn batch() -> OptunaDistribution {
    OptunaDistribution::int(32, 256, false, 32).unwrap()
}

fn act() -> OptunaDistribution {
    OptunaDistribution::categorical(vec![
        CategoricalChoice::Str("tanh".into()),
        CategoricalChoice::Str("relu".into()),
    ])
    .unwrap()
}

fn schema(conn: &rusqlite::Connection) -> Vec<(String, String, String, Option<String>)> {
    let mut stmt = conn
        // Ours: the tradetune_* tables and the trigger on `trials` that deletes their rows.
        .prepare("SELECT type, name, tbl_name, sql FROM sqlite_master WHERE name NOT LIKE 'tradetune%' AND tbl_name NOT LIKE 'tradetune%' ORDER BY rowid")
        .unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

#[test]
fn new_file_has_optunas_exact_schema_and_versions() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    drop(Storage::open(&path).unwrap());
    let ours = rusqlite::Connection::open(&path).unwrap();
    let reference = rusqlite::Connection::open_with_flags(
        REFERENCE_DB,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    assert_eq!(schema(&ours), schema(&reference));
    let alembic: String = ours
        .query_row("SELECT version_num FROM alembic_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(alembic, "v3.2.0.a");
    let (v, lib): (i64, String) = ours
        .query_row(
            "SELECT schema_version, library_version FROM version_info",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(v, 12);
    assert!(lib.starts_with("5.0.0+tradetune."), "{lib}");
    let mode: String = ours
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
}

#[test]
fn trials_round_trip_with_params_values_attrs_and_states() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Storage::open(dir.path().join("s.db")).unwrap();
    let study = s.create_study("ppo", &[StudyDirection::Maximize]).unwrap();
    s.set_study_user_attr(study, "algo", &JsonValue::from("PPO"))
        .unwrap();

    let t0 = s.create_trial(study).unwrap();
    assert_eq!(t0.number, 0);
    s.set_param(t0.trial_id, "lr", 3e-4, &lr()).unwrap();
    s.set_params(
        t0.trial_id,
        &[("batch".into(), 64.0, batch()), ("act".into(), 1.0, act())],
    )
    .unwrap();
    s.report(t0.trial_id, 0, 0.5).unwrap();
    s.report(t0.trial_id, 1, f64::NAN).unwrap();
    s.report(t0.trial_id, 2, f64::INFINITY).unwrap();
    let attr = JsonValue::parse(r#"{"loss": NaN, "hist": [1, 2.5, -Infinity]}"#).unwrap();
    s.set_trial_user_attr(t0.trial_id, "stats", &attr).unwrap();
    s.complete_trial(t0.trial_id, &[f64::INFINITY]).unwrap();

    let t1 = s.create_trial(study).unwrap();
    assert_eq!(t1.number, 1);
    s.set_param(t1.trial_id, "lr", 1e-3, &lr()).unwrap();
    s.report(t1.trial_id, 5, 0.25).unwrap();
    s.report(t1.trial_id, 9, -0.75).unwrap();
    s.prune_trial(t1.trial_id).unwrap();

    let t2 = s.create_trial(study).unwrap();
    s.fail_trial(t2.trial_id, "RuntimeError: out of memory")
        .unwrap();
    let t3 = s.create_trial(study).unwrap();
    s.complete_trial(t3.trial_id, &[0.5]).unwrap();

    let trials = s.trials(study).unwrap();
    assert_eq!(trials.len(), 4);
    let a = &trials[0];
    assert_eq!(a.state, TrialState::Complete);
    assert_eq!(a.values, Some(vec![f64::INFINITY]));
    assert_eq!(
        a.params.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
        ["lr", "batch", "act"]
    );
    assert_eq!(
        a.param("batch").unwrap().external().unwrap(),
        ParamValue::Int(64)
    );
    assert_eq!(
        a.param("act").unwrap().external().unwrap(),
        ParamValue::Choice(CategoricalChoice::Str("relu".into()))
    );
    assert_eq!(a.intermediate_values[0], (0, 0.5));
    assert!(a.intermediate_values[1].1.is_nan());
    assert_eq!(a.intermediate_values[2], (2, f64::INFINITY));
    assert_eq!(
        a.user_attr("stats").unwrap().dumps(),
        r#"{"loss": NaN, "hist": [1, 2.5, -Infinity]}"#
    );
    assert!(a.datetime_start.unwrap() <= a.datetime_complete.unwrap());
    // Optuna: a pruned trial keeps its last intermediate value (largest step).
    assert_eq!(trials[1].state, TrialState::Pruned);
    assert_eq!(trials[1].values, Some(vec![-0.75]));
    assert_eq!(trials[2].state, TrialState::Fail);
    assert_eq!(trials[2].values, None);
    assert_eq!(
        trials[2].system_attr(FAIL_REASON_KEY),
        Some(&JsonValue::from("RuntimeError: out of memory"))
    );

    // Best of a maximised study: +inf beats 0.5.
    let summaries = s.study_summaries().unwrap();
    assert_eq!(summaries[0].n_trials(), 4);
    assert_eq!(summaries[0].n(TrialState::Complete), 2);
    assert_eq!(summaries[0].best, Some((0, f64::INFINITY)));
    assert_eq!(s.best_trial(study).unwrap().unwrap().number, 0);
    assert_eq!(
        s.study("ppo").unwrap().user_attrs,
        vec![("algo".to_owned(), JsonValue::from("PPO"))]
    );
}

#[test]
fn enqueued_trials_start_in_order_and_add_trial_stores_everything() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Storage::open(dir.path().join("s.db")).unwrap();
    let study = s
        .create_study("q", &[StudyDirection::Minimize, StudyDirection::Maximize])
        .unwrap();
    let fixed = vec![("lr".to_owned(), JsonValue::Float(3e-4))];
    let w0 = s
        .enqueue_trial(
            study,
            &fixed,
            &[("src".into(), JsonValue::from("baseline"))],
        )
        .unwrap();
    let w1 = s.enqueue_trial(study, &[], &[]).unwrap();
    let popped = s.pop_waiting_trial(study).unwrap().unwrap();
    assert_eq!(popped.trial_id, w0.trial_id);
    let t = s.trial(w0.trial_id).unwrap();
    assert_eq!(t.state, TrialState::Running);
    assert!(t.datetime_start.is_some());
    assert_eq!(
        t.system_attr("fixed_params").unwrap().dumps(),
        r#"{"lr": 0.0003}"#
    );
    assert_eq!(
        s.pop_waiting_trial(study).unwrap().unwrap().trial_id,
        w1.trial_id
    );
    assert!(s.pop_waiting_trial(study).unwrap().is_none());

    let mut nt = NewTrial::new(TrialState::Complete);
    nt.values = Some(vec![1.0, f64::NEG_INFINITY]);
    nt.params = vec![("lr".into(), 1e-3, lr())];
    nt.intermediate_values = vec![(0, 0.1), (5, 0.12)];
    nt.user_attrs = vec![("src".into(), JsonValue::from("add_trial"))];
    let h = s.add_trial(study, &nt).unwrap();
    assert_eq!(h.number, 2);
    let t = s.trial(h.trial_id).unwrap();
    assert_eq!(t.values, Some(vec![1.0, f64::NEG_INFINITY]));
    assert_eq!(t.intermediate_values, vec![(0, 0.1), (5, 0.12)]);
    assert!(t.datetime_complete.is_some());
}

/// Every refused write leaves the stored trials exactly as they were.
#[test]
fn bad_input_gets_clear_errors_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Storage::open(dir.path().join("s.db")).unwrap();
    let study = s.create_study("x", &[StudyDirection::Minimize]).unwrap();
    let t = s.create_trial(study).unwrap();
    s.set_param(t.trial_id, "lr", 1e-3, &lr()).unwrap();
    s.set_param(t.trial_id, "act", 0.0, &act()).unwrap();
    let before = s.trials(study).unwrap();

    let e = s
        .create_study("x", &[StudyDirection::Minimize])
        .unwrap_err();
    assert!(
        matches!(e, StorageError::DuplicateStudy(ref n) if n == "x"),
        "{e}"
    );
    assert!(matches!(
        s.create_study("y", &[]),
        Err(StorageError::NoDirections)
    ));
    assert!(matches!(
        s.create_trial(999),
        Err(StorageError::UnknownStudy(999))
    ));
    let e = s.study("nope").unwrap_err();
    assert!(
        e.to_string().contains("no study named `nope` (studies: x)"),
        "{e}"
    );
    assert!(matches!(
        s.report(12345, 0, 1.0),
        Err(StorageError::UnknownTrial(12345))
    ));

    // Outside the distribution, incompatible with the study's earlier use, already set.
    let e = s
        .set_param(t.trial_id, "batch", 65.0, &batch())
        .unwrap_err();
    assert!(matches!(e, StorageError::ParamOutOfRange { .. }), "{e}");
    assert!(e.to_string().contains("`batch`"), "{e}");
    let e = s.set_param(t.trial_id, "lr2", 0.0, &lr()).unwrap_err();
    assert!(matches!(e, StorageError::ParamOutOfRange { .. }), "{e}");
    let t2 = s.create_trial(study).unwrap();
    let linear = OptunaDistribution::float(0.0, 1.0, false, None).unwrap();
    let e = s.set_param(t2.trial_id, "lr", 0.5, &linear).unwrap_err();
    assert!(
        matches!(e, StorageError::IncompatibleDistribution { .. }),
        "{e}"
    );
    let other_choices =
        OptunaDistribution::categorical(vec![CategoricalChoice::Str("elu".into())]).unwrap();
    let e = s
        .set_param(t2.trial_id, "act", 0.0, &other_choices)
        .unwrap_err();
    assert!(e.to_string().contains("dynamic value space"), "{e}");
    let e = s.set_param(t.trial_id, "lr", 2e-3, &lr()).unwrap_err();
    assert!(matches!(e, StorageError::ParamAlreadySet { .. }), "{e}");
    // A batch with one bad entry stores none of it.
    let e = s.set_params(
        t2.trial_id,
        &[
            ("ok".into(), 0.5, linear.clone()),
            ("bad".into(), 7.0, linear.clone()),
        ],
    );
    assert!(e.is_err());
    assert!(s.trial(t2.trial_id).unwrap().params.is_empty());
    // Nor does it leave `ok`'s distribution behind: no `ok` is stored, so an integer one is as
    // welcome as a float one was.
    let int = OptunaDistribution::int(0, 10, false, 1).unwrap();
    let t3 = s.create_trial(study).unwrap();
    s.set_param(t3.trial_id, "ok", 3.0, &int).unwrap();
    assert_eq!(s.trial(t3.trial_id).unwrap().params.len(), 1);
    // An invalid distribution built by hand.
    let mut broken = linear.clone();
    if let OptunaDistribution::Float(f) = &mut broken {
        f.low = 2.0;
    }
    assert!(matches!(
        s.set_param(t2.trial_id, "z", 1.0, &broken),
        Err(StorageError::Distribution { .. })
    ));

    // Values: count, NaN, FAIL with values.
    let e = s.complete_trial(t2.trial_id, &[1.0, 2.0]).unwrap_err();
    assert!(
        matches!(
            e,
            StorageError::WrongValueCount {
                given: 2,
                expected: 1,
                ..
            }
        ),
        "{e}"
    );
    assert!(matches!(
        s.complete_trial(t2.trial_id, &[f64::NAN]),
        Err(StorageError::NanObjective { .. })
    ));
    assert!(
        s.finish_trial(t2.trial_id, TrialState::Fail, Some(&[1.0]))
            .is_err()
    );
    assert!(matches!(
        s.finish_trial(t2.trial_id, TrialState::Running, None),
        Err(StorageError::InvalidTransition { .. })
    ));
    // Finished trials are never modified.
    s.complete_trial(t2.trial_id, &[1.0]).unwrap();
    for e in [
        s.complete_trial(t2.trial_id, &[2.0]).unwrap_err(),
        s.fail_trial(t2.trial_id, "late").unwrap_err(),
        s.report(t2.trial_id, 0, 1.0).unwrap_err(),
        s.set_param(t2.trial_id, "lr", 1e-3, &lr()).unwrap_err(),
        s.set_trial_user_attr(t2.trial_id, "k", &JsonValue::Null)
            .unwrap_err(),
        s.record_heartbeat(t2.trial_id).unwrap_err(),
    ] {
        assert!(matches!(e, StorageError::TrialFinished { .. }), "{e}");
        assert!(
            e.to_string().contains("COMPLETE and cannot be updated"),
            "{e}"
        );
    }
    let after = s.trials(study).unwrap();
    assert_eq!(after[0], before[0]);
    assert_eq!(after[1].values, Some(vec![1.0]));
    assert!(after[1].params.is_empty() && after[1].user_attrs.is_empty());
}

/// An empty database opened to read (a file `touch` made, a `createdb`'s database) is said to
/// be empty, not "an Optuna storage without a `studies` table"; opened to write, it gets the
/// schema as before.
#[test]
fn an_empty_database_read_is_said_to_be_empty() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.db");
    std::fs::write(&empty, b"").unwrap();
    let e = Storage::open_read_only(&empty).unwrap_err();
    assert!(matches!(e, StorageError::EmptyDatabase { .. }), "{e}");
    assert!(e.to_string().contains("no studies yet"), "{e}");
    let mut s = Storage::open(&empty).unwrap();
    s.create_study("x", &[StudyDirection::Maximize]).unwrap();
    drop(s);
    Storage::open_read_only(&empty).unwrap();
}

#[test]
fn refuses_foreign_and_other_version_files() {
    let dir = tempfile::tempdir().unwrap();
    let foreign = dir.path().join("foreign.db");
    let c = rusqlite::Connection::open(&foreign).unwrap();
    c.execute_batch("CREATE TABLE prices (t INTEGER, p REAL); INSERT INTO prices VALUES (1, 2.0);")
        .unwrap();
    drop(c);
    let e = Storage::open(&foreign).unwrap_err();
    assert!(matches!(e, StorageError::NotOptunaSchema { .. }), "{e}");
    let n: i64 = rusqlite::Connection::open(&foreign)
        .unwrap()
        .query_row("SELECT COUNT(*) FROM sqlite_master", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 1, "the foreign file must be left alone");
    assert_eq!(
        journal_mode(&foreign),
        "delete",
        "not switched to WAL either"
    );

    let old = dir.path().join("old.db");
    std::fs::copy(REFERENCE_DB, &old).unwrap();
    rusqlite::Connection::open(&old)
        .unwrap()
        .execute("UPDATE alembic_version SET version_num = 'v3.0.0.d'", [])
        .unwrap();
    let e = Storage::open(&old).unwrap_err();
    assert!(matches!(e, StorageError::SchemaVersion { .. }), "{e}");
    assert!(e.to_string().contains("v3.0.0.d"), "{e}");
    assert!(e.to_string().contains("optuna storage upgrade"), "{e}");
    assert_eq!(
        journal_mode(&old),
        "delete",
        "a refused file is left as it was"
    );
    // Reading is still possible.
    let r = Storage::open_read_only(&old).unwrap();
    assert_eq!(r.studies().unwrap().len(), 4);
    let mut r = r;
    assert!(matches!(
        r.create_study("z", &[StudyDirection::Minimize]),
        Err(StorageError::ReadOnly { .. })
    ));
    drop(r);

    let set = |version: &str| {
        rusqlite::Connection::open(&old)
            .unwrap()
            .execute("UPDATE alembic_version SET version_num = ?1", [version])
            .unwrap();
    };
    // Older than the columns TradeTune reads: refused to read as well, with the upgrade that
    // makes it readable, not a missing column's SQL error.
    set("v3.0.0.c");
    let e = Storage::open_read_only(&old).err().unwrap();
    assert!(matches!(e, StorageError::SchemaVersion { .. }), "{e}");
    assert!(
        e.to_string().contains("v3.0.0.c") && e.to_string().contains("optuna storage upgrade"),
        "{e}"
    );
    // Newer (a later Optuna): upgrading cannot help, and it is said so; it is still read.
    set("v5.1.0.a");
    let e = Storage::open(&old).unwrap_err();
    assert!(matches!(e, StorageError::NewerSchema { .. }), "{e}");
    let said = e.to_string();
    assert!(
        said.contains("v5.1.0.a") && said.contains("newer Optuna") && !said.contains("upgrade"),
        "{said}"
    );
    assert_eq!(
        Storage::open_read_only(&old)
            .unwrap()
            .studies()
            .unwrap()
            .len(),
        4
    );
    // A newer TradeTune's tables.
    let ours = dir.path().join("ours.db");
    drop(Storage::open(&ours).unwrap());
    rusqlite::Connection::open(&ours)
        .unwrap()
        .execute("UPDATE tradetune_version SET schema_version = 2", [])
        .unwrap();
    let e = Storage::open(&ours).unwrap_err();
    assert!(matches!(e, StorageError::NewerSchema { .. }), "{e}");
    assert!(
        e.to_string().contains("newer TradeTune") && !e.to_string().contains("optuna storage"),
        "{e}"
    );
    // A damaged version (below 1, or not a whole number) is said to be one, naming the row,
    // not taken for a newer TradeTune's.
    for (bad, says) in [
        ("0", "version 0 is not one TradeTune writes"),
        ("-3", "version -3 is not one TradeTune writes"),
        ("'two'", "not a whole-number version"),
        ("1.5", "not a whole-number version"),
    ] {
        rusqlite::Connection::open(&ours)
            .unwrap()
            .execute(
                &format!("UPDATE tradetune_version SET schema_version = {bad}"),
                [],
            )
            .unwrap();
        let e = Storage::open(&ours).unwrap_err();
        let said = e.to_string();
        assert!(matches!(e, StorageError::Corrupt { .. }), "{bad}: {said}");
        assert!(
            said.contains("table tradetune_version, row 1, column schema_version")
                && said.contains(says)
                && !said.contains("newer"),
            "{bad}: {said}"
        );
    }
}

fn journal_mode(path: &std::path::Path) -> String {
    rusqlite::Connection::open(path)
        .unwrap()
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap()
}

/// A damaged `trial_values` row (an objective far past the study's, or one after a gap) is
/// refused naming its row, rather than allocated for or read as a made-up value.
#[test]
fn a_trial_value_with_an_impossible_objective_is_refused_by_row() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("values.db");
    std::fs::copy(REFERENCE_DB, &path).unwrap();
    let row: i64 = rusqlite::Connection::open(&path)
        .unwrap()
        .query_row("SELECT MIN(trial_value_id) FROM trial_values", [], |r| {
            r.get(0)
        })
        .unwrap();
    let studies = Storage::open_read_only(&path).unwrap().studies().unwrap();
    let trials_of_all = |s: &Storage| -> Result<usize, StorageError> {
        let mut n = 0;
        for st in &studies {
            n += s.trials(st.study_id)?.len();
        }
        Ok(n)
    };
    assert!(trials_of_all(&Storage::open_read_only(&path).unwrap()).unwrap() > 0);
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute(
            "UPDATE trial_values SET objective = 2000000000 WHERE trial_value_id = ?1",
            [row],
        )
        .unwrap();
    let e = trials_of_all(&Storage::open_read_only(&path).unwrap()).unwrap_err();
    assert!(matches!(e, StorageError::Corrupt { .. }), "{e}");
    let said = e.to_string();
    assert!(
        said.contains("trial_values")
            && said.contains(&format!("row {row}"))
            && said.contains("2000000000"),
        "{said}"
    );
}

#[test]
fn stale_running_trials_fail_on_open_only_when_the_opener_asks() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let (stale, fresh, no_beat) = {
        let mut s = Storage::open(&path).unwrap();
        let study = s.create_study("st", &[StudyDirection::Minimize]).unwrap();
        let stale = s.create_trial(study).unwrap();
        let fresh = s.create_trial(study).unwrap();
        let mut nt = NewTrial::new(TrialState::Running);
        nt.params = vec![("lr".into(), 1e-3, lr())];
        let no_beat = s.add_trial(study, &nt).unwrap();
        (stale, fresh, no_beat)
    };
    let c = rusqlite::Connection::open(&path).unwrap();
    // The killed worker's last beat, 10 minutes ago; an Optuna ask/tell trial has no beat.
    c.execute("UPDATE trial_heartbeats SET heartbeat = datetime('now', '-600 seconds') WHERE trial_id = ?1", [stale.trial_id])
        .unwrap();
    c.execute(
        "DELETE FROM trial_heartbeats WHERE trial_id = ?1",
        [no_beat.trial_id],
    )
    .unwrap();
    drop(c);

    // A plain open (a note, a reseed, an export) does not know how long the study's workers
    // may go between beats, so it fails no one.
    let s = Storage::open(&path).unwrap();
    assert!(s.recovered_on_open().is_empty());
    assert_eq!(
        s.trials(stale.study_id).unwrap()[0].state,
        TrialState::Running
    );
    drop(s);

    // A runner opens with its own `stale_after`, and that recovers the dead worker's trial.
    let runner = StorageOptions {
        stale_after: Some(DEFAULT_STALE_AFTER),
        ..Default::default()
    };
    let s = Storage::open_with(&path, &runner).unwrap();
    assert_eq!(
        s.recovered_on_open()
            .iter()
            .map(|h| h.number)
            .collect::<Vec<_>>(),
        [0]
    );
    let trials = s.trials(stale.study_id).unwrap();
    assert_eq!(trials[0].state, TrialState::Fail);
    assert!(trials[0].datetime_complete.is_some());
    let reason = trials[0].system_attr(FAIL_REASON_KEY).unwrap().python_str();
    assert!(reason.contains("worker lost"), "{reason}");
    assert_eq!(
        trials[1].state,
        TrialState::Running,
        "trial {} has a fresh heartbeat",
        fresh.number
    );
    assert_eq!(trials[2].state, TrialState::Running);
    // The next trial continues the numbering.
    let mut s = s;
    assert_eq!(s.create_trial(stale.study_id).unwrap().number, 3);
}

#[test]
fn tradetune_tables_hold_run_metadata_curves_and_telemetry() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Storage::open(dir.path().join("s.db")).unwrap();
    let study = s.create_study("tt", &[StudyDirection::Maximize]).unwrap();
    let t = s.create_trial(study).unwrap();
    let meta = RunMetadata {
        worker: Some("worker-1".into()),
        device: "wgpu:0".into(),
        backend: "wgpu".into(),
        precision: "bf16".into(),
        config: JsonValue::parse(r#"{"ppo": {"learning_rate": 0.0003, "n_steps": 4096}}"#).unwrap(),
    };
    s.set_run_metadata(t.trial_id, &meta).unwrap();
    assert_eq!(s.run_metadata(t.trial_id).unwrap(), Some(meta.clone()));
    let curve = vec![
        CurvePoint {
            metric: "charts/SPS".into(),
            update_index: 0,
            env_steps: 4096,
            value: 1234.5,
        },
        CurvePoint {
            metric: "losses/approx_kl".into(),
            update_index: 0,
            env_steps: 4096,
            value: f64::NAN,
        },
    ];
    s.append_learning_curve(t.trial_id, &curve).unwrap();
    let back = s.learning_curve(t.trial_id).unwrap();
    assert_eq!(back[0], curve[0]);
    assert!(back[1].value.is_nan());
    let at = now_utc();
    let sample = TelemetrySample {
        trial_id: Some(t.trial_id),
        recorded_at: at,
        source: "wgpu:0".into(),
        metric: "mem_mb".into(),
        value: 812.0,
    };
    s.append_telemetry(std::slice::from_ref(&sample)).unwrap();
    assert_eq!(s.telemetry(Some(t.trial_id)).unwrap(), vec![sample]);
    let bad = TelemetrySample {
        trial_id: Some(999),
        recorded_at: at,
        source: "x".into(),
        metric: "m".into(),
        value: 1.0,
    };
    assert!(matches!(
        s.append_telemetry(&[bad]),
        Err(StorageError::UnknownTrial(999))
    ));
    // Mirrored into Optuna's attributes.
    let tr = s.trial(t.trial_id).unwrap();
    assert_eq!(tr.user_attr("device"), Some(&JsonValue::from("wgpu:0")));
    assert_eq!(tr.user_attr("precision"), Some(&JsonValue::from("bf16")));
    assert!(tr.system_attr("applied_config").is_some());
    s.complete_trial(t.trial_id, &[1.0]).unwrap();
    assert!(matches!(
        s.append_learning_curve(t.trial_id, &curve),
        Err(StorageError::TrialFinished { .. })
    ));
}

/// Four worker threads, one connection each, create trials in one study at the same time:
/// every trial is stored, numbers are 0..N without gaps or duplicates, nobody sees "locked".
#[test]
fn parallel_writers_get_unique_numbers_and_no_lock_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let study = Storage::open(&path)
        .unwrap()
        .create_study("par", &[StudyDirection::Minimize])
        .unwrap();
    let per_worker = 40;
    std::thread::scope(|scope| {
        for w in 0..4 {
            let path = path.clone();
            scope.spawn(move || {
                let opts = StorageOptions {
                    busy_timeout: Duration::from_secs(60),
                    ..Default::default()
                };
                let mut s = Storage::open_with(&path, &opts).unwrap();
                for i in 0..per_worker {
                    let t = s.create_trial(study).unwrap();
                    let x = (w * per_worker + i) as f64 / 100.0;
                    s.set_param(t.trial_id, "lr", 1e-3 + x * 1e-4, &lr())
                        .unwrap();
                    s.report(t.trial_id, 0, x).unwrap();
                    s.complete_trial(t.trial_id, &[x]).unwrap();
                }
            });
        }
    });
    let s = Storage::open_read_only(&path).unwrap();
    let trials = s.trials(study).unwrap();
    assert_eq!(trials.len(), 4 * per_worker);
    let mut numbers: Vec<i64> = trials.iter().map(|t| t.number).collect();
    numbers.sort();
    assert_eq!(numbers, (0..(4 * per_worker) as i64).collect::<Vec<_>>());
    assert!(
        trials
            .iter()
            .all(|t| t.state == TrialState::Complete && t.params.len() == 1)
    );
}

/// A trigger on the file at `path` that refuses inserting the key `last` into `table`.
fn refuse_key_last(path: &std::path::Path, table: &str) {
    rusqlite::Connection::open(path)
        .unwrap()
        .execute_batch(&format!(
            "CREATE TRIGGER refuse_last_{table} BEFORE INSERT ON {table} \
             WHEN NEW.key = 'last' BEGIN SELECT RAISE(ABORT, 'refused'); END;"
        ))
        .unwrap();
}

/// A study and its system attributes are one transaction: when the last attribute cannot be
/// written (here a trigger refuses it, as a kill or a full disk would stop it), neither the
/// study nor its first attributes are left behind, and a study that exists keeps its old ones.
#[test]
fn a_study_and_its_attributes_are_stored_all_or_none() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    drop(Storage::open(&path).unwrap());
    refuse_key_last(&path, "study_system_attributes");
    let mut s = Storage::open(&path).unwrap();
    let attrs = [
        ("first", JsonValue::from("a")),
        ("last", JsonValue::from("b")),
    ];
    s.create_study_with("s", &[StudyDirection::Maximize], &attrs)
        .unwrap_err();
    assert!(matches!(
        s.study("s"),
        Err(StorageError::UnknownStudyName { .. })
    ));
    assert!(s.studies().unwrap().is_empty());

    let id = s
        .create_study_with("s", &[StudyDirection::Maximize], &attrs[..1])
        .unwrap();
    let kept = s.study("s").unwrap().system_attrs;
    assert_eq!(kept, vec![("first".to_owned(), JsonValue::from("a"))]);
    let replaced = [
        ("first", JsonValue::from("c")),
        ("last", JsonValue::from("d")),
    ];
    s.set_study_system_attrs(id, &replaced).unwrap_err();
    assert_eq!(s.study("s").unwrap().system_attrs, kept);

    // A trial's summary is one commit too.
    refuse_key_last(&path, "trial_user_attributes");
    let mut s = Storage::open(&path).unwrap();
    let t = s.create_trial(id).unwrap().trial_id;
    let summary = [
        ("first".to_owned(), JsonValue::from(1.5)),
        ("last".to_owned(), JsonValue::from(2.5)),
    ];
    s.set_trial_user_attrs(t, &summary).unwrap_err();
    assert!(s.trial(t).unwrap().user_attrs.is_empty());
    s.set_trial_user_attrs(t, &summary[..1]).unwrap();
    assert_eq!(s.trial(t).unwrap().user_attrs, summary[..1].to_vec());
}

/// A row of one study that does not parse (an attribute another program wrote) keeps only that
/// study from being read: another is read by name, an unknown name lists them all, and reading
/// every study names the bad row.
#[test]
fn a_bad_row_of_one_study_does_not_keep_another_from_being_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    {
        let mut s = Storage::open(&path).unwrap();
        let bad = s.create_study("bad", &[StudyDirection::Maximize]).unwrap();
        s.create_study("good", &[StudyDirection::Minimize]).unwrap();
        s.set_study_user_attr(bad, "x", &JsonValue::from(1.0))
            .unwrap();
    }
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute(
            "UPDATE study_user_attributes SET value_json = '{oops' WHERE key = 'x'",
            [],
        )
        .unwrap();
    let s = Storage::open_read_only(&path).unwrap();
    let good = s.study("good").unwrap();
    assert_eq!(good.directions, [StudyDirection::Minimize]);
    match s.study("nope") {
        Err(StorageError::UnknownStudyName { known, .. }) => assert_eq!(known, "bad, good"),
        other => panic!("{other:?}"),
    }
    let e = s.studies().unwrap_err().to_string();
    assert!(e.contains("study_user_attributes"), "{e}");
}

/// A study whose direction Optuna 2.x left `NOT_SET` (created through its storage API, or cut
/// off before the direction was set) is read as a minimized one, as Optuna orders it, and the
/// database stays readable; a direction that is no Optuna name is still a corrupt row.
#[test]
fn a_not_set_direction_reads_as_minimize() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    {
        let mut s = Storage::open(&path).unwrap();
        s.create_study("old", &[StudyDirection::Maximize]).unwrap();
        s.create_study("new", &[StudyDirection::Maximize]).unwrap();
    }
    let set = |direction: &str| {
        rusqlite::Connection::open(&path)
            .unwrap()
            .execute(
                "UPDATE study_directions SET direction = ?1 WHERE study_id = \
                 (SELECT study_id FROM studies WHERE study_name = 'old')",
                [direction],
            )
            .unwrap();
    };
    set("NOT_SET");
    let s = Storage::open_read_only(&path).unwrap();
    let summaries = s.study_summaries().unwrap();
    let directions: Vec<_> = (summaries.iter())
        .map(|x| (x.study.name.as_str(), x.study.directions.clone()))
        .collect();
    assert_eq!(
        directions,
        [
            ("old", vec![StudyDirection::Minimize]),
            ("new", vec![StudyDirection::Maximize])
        ]
    );
    set("SIDEWAYS");
    let e = Storage::open_read_only(&path)
        .unwrap()
        .studies()
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("study_directions") && e.contains("SIDEWAYS"),
        "{e}"
    );
}

/// A database whose tradetune tables predate the trigger that deletes a trial's rows with it:
/// the rows a study deleted by another program left are cleared when the trigger is made, so
/// the next trial SQLite gives the freed id starts without them.
#[test]
fn rows_of_trials_deleted_before_the_trigger_are_cleared_when_it_is_made() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    {
        let mut s = Storage::open(&path).unwrap();
        let study = s.create_study("old", &[StudyDirection::Maximize]).unwrap();
        let t = s.create_trial(study).unwrap();
        s.append_learning_curve(
            t.trial_id,
            &[CurvePoint {
                metric: "loss".into(),
                update_index: 0,
                env_steps: 64,
                value: 0.5,
            }],
        )
        .unwrap();
        s.complete_trial(t.trial_id, &[1.0]).unwrap();
    }
    let conn = rusqlite::Connection::open(&path).unwrap();
    // As before the trigger, then a deletion that knows only Optuna's tables, on a connection
    // that does not enforce foreign keys (as Optuna's does not).
    conn.execute_batch(
        "PRAGMA foreign_keys = OFF; DROP TRIGGER tradetune_trial_deleted; DELETE FROM trials;",
    )
    .unwrap();
    let curves = |conn: &rusqlite::Connection| -> i64 {
        conn.query_row("SELECT COUNT(*) FROM tradetune_learning_curves", [], |r| {
            r.get(0)
        })
        .unwrap()
    };
    assert_eq!(curves(&conn), 1, "the deleted trial's row is left");
    drop(Storage::open(&path).unwrap());
    assert_eq!(curves(&conn), 0);
    // Made once: a later open finds it.
    let triggers: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM sqlite_master WHERE type = 'trigger'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(triggers, 1);
}

/// A trial's parameters and its sampler's system attributes are one write: stored together,
/// or (a parameter refused) neither.
#[test]
fn parameters_and_their_sampler_attributes_are_stored_together_or_not_at_all() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Storage::open(dir.path().join("s.db")).unwrap();
    let study = s.create_study("g", &[StudyDirection::Minimize]).unwrap();
    let grid_id = [("grid_id".to_owned(), JsonValue::Int(3))];
    let t = s.create_trial(study).unwrap();
    // 65 is no multiple of the step 32 from 32: refused, and the grid id with it.
    let e = s
        .set_params_with_attrs(
            t.trial_id,
            &[("lr".into(), 1e-3, lr()), ("batch".into(), 65.0, batch())],
            &grid_id,
        )
        .unwrap_err();
    assert!(matches!(e, StorageError::ParamOutOfRange { .. }), "{e}");
    let stored = s.trial(t.trial_id).unwrap();
    assert!(stored.params.is_empty(), "{:?}", stored.params);
    assert!(stored.system_attr("grid_id").is_none());
    s.set_params_with_attrs(
        t.trial_id,
        &[("lr".into(), 1e-3, lr()), ("batch".into(), 64.0, batch())],
        &grid_id,
    )
    .unwrap();
    let stored = s.trial(t.trial_id).unwrap();
    assert_eq!(stored.params.len(), 2);
    assert_eq!(stored.system_attr("grid_id"), Some(&JsonValue::Int(3)));
}
