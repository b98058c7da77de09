//! `Storage::trials_since`, the incremental read a live trial table polls: the trials above a
//! cursor and those read RUNNING before, in their current state, on SQLite and (when a server
//! is configured, see `support/pg.rs`) on PostgreSQL.

use crate::pg;

use tradetune_storage::{OptunaDistribution, Storage, StudyDirection, TrialRecord, TrialState};

fn summary(trials: &[TrialRecord]) -> Vec<(i64, TrialState, Option<f64>, usize)> {
    trials
        .iter()
        .map(|t| (t.number, t.state, t.value(), t.intermediate_values.len()))
        .collect()
}

/// A read, then trials finishing and starting, then an incremental read: it holds exactly the
/// new trials and those that were running, as they are now; merged with the first read it is
/// what a full read gives.
fn incremental_read_sees_new_and_finished_trials(url: &str) {
    let mut s = Storage::open(url).unwrap();
    let study = s.create_study("live", &[StudyDirection::Minimize]).unwrap();
    let other = s
        .create_study("other", &[StudyDirection::Minimize])
        .unwrap();
    let x = OptunaDistribution::float(0.0, 1.0, false, None).unwrap();
    let done = s.create_trial(study).unwrap();
    s.set_param(done.trial_id, "x", 0.5, &x).unwrap();
    s.complete_trial(done.trial_id, &[0.25]).unwrap();
    let running = s.create_trial(study).unwrap();
    s.report(running.trial_id, 0, 1.0).unwrap();
    let stays = s.create_trial(study).unwrap();
    s.create_trial(other).unwrap();

    let first = s.trials(study).unwrap();
    let after = first.iter().map(|t| t.trial_id).max().unwrap();
    let again: Vec<i64> = first
        .iter()
        .filter(|t| t.state == TrialState::Running)
        .map(|t| t.trial_id)
        .collect();
    assert_eq!(again, vec![running.trial_id, stays.trial_id]);
    // Nothing changed: the running trials only.
    assert_eq!(
        summary(&s.trials_since(study, after, &again).unwrap()),
        vec![
            (1, TrialState::Running, None, 1),
            (2, TrialState::Running, None, 0)
        ]
    );

    s.report(running.trial_id, 1, 0.5).unwrap();
    s.complete_trial(running.trial_id, &[0.125]).unwrap();
    let new = s.create_trial(study).unwrap();
    s.set_param(new.trial_id, "x", 0.75, &x).unwrap();
    s.create_trial(other).unwrap();

    let since = s.trials_since(study, after, &again).unwrap();
    assert_eq!(
        summary(&since),
        vec![
            (1, TrialState::Complete, Some(0.125), 2),
            (2, TrialState::Running, None, 0),
            (3, TrialState::Running, None, 0),
        ]
    );
    assert_eq!(since[2].params.len(), 1, "the new trial's parameter");

    // The first read with the changed trials replaced and the new ones added is a full read.
    let mut merged = first.clone();
    for t in since {
        match merged.iter_mut().find(|m| m.trial_id == t.trial_id) {
            Some(m) => *m = t,
            None => merged.push(t),
        }
    }
    assert_eq!(summary(&merged), summary(&s.trials(study).unwrap()));

    // A cursor past the end with nothing to read again: nothing.
    assert!(s.trials_since(study, new.trial_id, &[]).unwrap().is_empty());
    // Many trials to read again: read from the first of them on, still only this study's.
    let many: Vec<i64> = (done.trial_id..done.trial_id + 300).collect();
    let all = s.trials_since(study, new.trial_id, &many).unwrap();
    assert_eq!(summary(&all), summary(&s.trials(study).unwrap()));
    assert!(s.trials_since(9999, 0, &[]).is_err(), "an unknown study");
}

#[test]
fn incremental_read_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("live.db");
    incremental_read_sees_new_and_finished_trials(&path.to_string_lossy());
}

#[test]
fn incremental_read_on_postgres() {
    if let Some(url) = pg::fresh_database("incremental") {
        incremental_read_sees_new_and_finished_trials(&url);
    }
}
