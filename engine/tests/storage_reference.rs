//! TradeTune reads a storage written by Optuna 5.0 (`testdata/optuna-reference.db`, made by
//! `tests/python/make_optuna_reference.py`: every distribution type, state, direction and value
//! type) exactly as Optuna reads it. The expectation, `optuna-reference.expected.json`, was
//! printed by the real Optuna client (`tests/python/optuna_dump.py`).

use serde_json::Value;
use tradetune_engine::storage::{
    DEFAULT_STALE_AFTER, JsonValue, OptunaDistribution, Storage, StorageError, StorageOptions,
    StudyDirection, TrialState, study_view_json,
};

const DB: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/testdata/optuna-reference.db"
);
const EXPECTED: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/testdata/optuna-reference.expected.json"
);

fn expected() -> Value {
    serde_json::from_str(&std::fs::read_to_string(EXPECTED).unwrap()).unwrap()
}

#[test]
fn every_study_and_trial_reads_as_optuna_reads_it() {
    let s = Storage::open_read_only(DB).unwrap();
    let expected = expected();
    let summaries = s.study_summaries().unwrap();
    let ours: Vec<Value> = summaries
        .iter()
        .map(|sum| {
            study_view_json(&sum.study, &s.trials(sum.study.study_id).unwrap(), sum.best).unwrap()
        })
        .collect();
    let theirs = expected["studies"].as_array().unwrap();
    assert_eq!(ours.len(), theirs.len());
    for (a, b) in ours.iter().zip(theirs) {
        for (ta, tb) in a["trials"]
            .as_array()
            .unwrap()
            .iter()
            .zip(b["trials"].as_array().unwrap())
        {
            assert_eq!(ta, tb, "study {}, trial {}", b["name"], tb["number"]);
        }
        assert_eq!(a, b, "study {}", b["name"]);
    }
    // Spot checks of the traps named in the issue.
    let single = &summaries[0];
    assert_eq!(single.study.name, "ref_single_max");
    assert_eq!(single.n(TrialState::Waiting), 1);
    assert_eq!(single.n(TrialState::Running), 1);
    assert_eq!(single.best, Some((3, f64::INFINITY)));
    assert_eq!(
        summaries[1].study.directions,
        [StudyDirection::Minimize, StudyDirection::Maximize]
    );
    assert_eq!(summaries[1].best, None);
}

#[test]
fn reading_does_not_change_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("ref.db");
    std::fs::copy(DB, &copy).unwrap();
    let s = Storage::open_read_only(&copy).unwrap();
    for st in s.studies().unwrap() {
        s.trials(st.study_id).unwrap();
    }
    drop(s);
    assert_eq!(std::fs::read(&copy).unwrap(), std::fs::read(DB).unwrap());
}

#[test]
fn an_optuna_file_can_be_continued() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("ref.db");
    std::fs::copy(DB, &copy).unwrap();
    // Opened as a runner opens it: Optuna's RUNNING trial has a heartbeat from when the file
    // was made, so its worker is gone.
    let runner = StorageOptions {
        stale_after: Some(DEFAULT_STALE_AFTER),
        ..Default::default()
    };
    let mut s = Storage::open_with(&copy, &runner).unwrap();
    let recovered = s.recovered_on_open().to_vec();
    assert_eq!(recovered.len(), 1);
    assert_eq!(recovered[0].number, 6);
    let study = s.study_id("x_aggressive_1").unwrap();
    let before = s.trials(study).unwrap();
    let t = s.create_trial(study).unwrap();
    assert_eq!(t.number, 7, "numbering continues after Optuna's trials");
    let lr = OptunaDistribution::float(1e-5, 1e-1, true, None).unwrap();
    s.set_param(t.trial_id, "lr", 2e-3, &lr).unwrap();
    let linear = OptunaDistribution::float(1e-5, 1e-1, false, None).unwrap();
    let e = s
        .set_param(t.trial_id, "gamma_log", 0.05, &linear)
        .and(s.set_param(t.trial_id, "lr", 0.05, &linear));
    assert!(
        matches!(
            e,
            Err(StorageError::ParamAlreadySet { .. }
                | StorageError::IncompatibleDistribution { .. })
        ),
        "{e:?}"
    );
    let t2 = s.create_trial(study).unwrap();
    let e = s.set_param(t2.trial_id, "lr", 0.05, &linear).unwrap_err();
    assert!(
        matches!(e, StorageError::IncompatibleDistribution { .. }),
        "{e}"
    );
    s.set_trial_user_attr(t.trial_id, "note", &JsonValue::from("tradetune"))
        .unwrap();
    s.complete_trial(t.trial_id, &[0.5]).unwrap();
    let after = s.trials(study).unwrap();
    assert_eq!(
        &after[..before.len()],
        &before[..],
        "Optuna's trials are untouched"
    );
    assert_eq!(s.study_summaries().unwrap()[2].best, Some((7, 0.5)));
}
