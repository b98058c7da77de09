//! `Storage::delete_study`: the study, its trials and every row that refers to them go, in one
//! transaction; other studies keep theirs. On SQLite and (when a server is configured, see
//! `support/pg.rs`) on PostgreSQL.

use crate::pg;

use tradetune_storage::{
    CurvePoint, FoldReturn, JsonValue, OptunaDistribution, Storage, StorageError, StudyDirection,
};

/// Writes a trial with a row in every table a trial has.
fn full_trial(s: &mut Storage, study: i64) -> i64 {
    let x = OptunaDistribution::float(0.0, 1.0, false, None).unwrap();
    let t = s.create_trial(study).unwrap();
    s.set_param(t.trial_id, "x", 0.5, &x).unwrap();
    s.report(t.trial_id, 0, 1.0).unwrap();
    s.set_trial_user_attr(t.trial_id, "u", &JsonValue::from(1.0))
        .unwrap();
    s.set_trial_system_attr(t.trial_id, "s", &JsonValue::from(2.0))
        .unwrap();
    s.append_learning_curve(
        t.trial_id,
        &[CurvePoint {
            metric: "loss".into(),
            update_index: 0,
            env_steps: 8,
            value: 0.5,
        }],
    )
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
    s.complete_trial(t.trial_id, &[0.25]).unwrap();
    t.trial_id
}

fn deleting_a_study_leaves_the_others(url: &str) {
    let mut s = Storage::open(url).unwrap();
    let gone = s.create_study("gone", &[StudyDirection::Minimize]).unwrap();
    let kept = s.create_study("kept", &[StudyDirection::Maximize]).unwrap();
    s.set_study_user_attr(gone, "a", &JsonValue::from(1.0))
        .unwrap();
    s.set_study_system_attr(gone, "b", &JsonValue::from(1.0))
        .unwrap();
    let gone_trials = [
        full_trial(&mut s, gone),
        full_trial(&mut s, gone),
        s.create_trial(gone).unwrap().trial_id, // still RUNNING, with a heartbeat
    ];
    let kept_trial = full_trial(&mut s, kept);

    s.delete_study(gone).unwrap();
    let names: Vec<String> = s.studies().unwrap().into_iter().map(|x| x.name).collect();
    assert_eq!(names, vec!["kept".to_string()]);
    assert!(s.trials(gone).is_err(), "the study is gone");
    for t in gone_trials {
        assert!(s.trial(t).is_err(), "trial {t} is gone");
        assert!(s.fold_returns(t).unwrap().is_empty());
        assert!(s.learning_curve(t).unwrap().is_empty());
    }
    let left = s.trials(kept).unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].params.len(), 1);
    assert_eq!(left[0].intermediate_values.len(), 1);
    assert_eq!(s.fold_returns(kept_trial).unwrap().len(), 1);
    assert_eq!(s.learning_curve(kept_trial).unwrap().len(), 1);
    // The name is free again, and an unknown study is an error that changes nothing.
    let again = s.create_study("gone", &[StudyDirection::Minimize]).unwrap();
    assert!(s.trials(again).unwrap().is_empty());
    assert!(matches!(
        s.delete_study(9999),
        Err(StorageError::UnknownStudy(9999))
    ));
    assert_eq!(s.trials(kept).unwrap().len(), 1);
}

#[test]
fn delete_study_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("delete.db");
    deleting_a_study_leaves_the_others(&path.to_string_lossy());
}

#[test]
fn delete_study_on_postgres() {
    if let Some(url) = pg::fresh_database("delete_study") {
        deleting_a_study_leaves_the_others(&url);
    }
}
