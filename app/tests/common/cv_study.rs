//! A study database built without training: cross-validated trials with stored fold returns
//! (fixed numbers), for the Report view's tests and snapshot.

use std::path::Path;

use tradetune_engine::storage::{
    FoldReturn, JsonValue, NewTrial, OptunaDistribution, Storage, StudyDirection, TrialState,
};

/// Adds a cross-validated COMPLETE trial to `study`: 4 folds of 64 bars of fixed returns
/// (trial `i`'s drift grows with `i`, so later trials are better), each fold's objective
/// reported as its intermediate value, the value their mean.
pub fn add_cv_trial(storage: &mut Storage, study: i64, i: usize) {
    let lr = OptunaDistribution::float(1e-5, 1e-1, true, None).unwrap();
    let t = storage.create_trial(study).unwrap().trial_id;
    storage
        .set_param(t, "ppo.learning_rate", 1e-4 * (i + 1) as f64, &lr)
        .unwrap();
    let mut rows = Vec::new();
    let mut folds = Vec::new();
    for fold in 0..4i64 {
        let mut growth = 1.0;
        for bar in 0..64i64 {
            let u = ((i as f64 + 1.0) * 0.618_034 + (64 * fold + bar) as f64 * 0.754_878).fract();
            let value = 0.01 * (u - 0.5) + 0.0002 * i as f64;
            growth *= 1.0 + value;
            rows.push(FoldReturn {
                fold,
                bar_index: bar,
                bar_time: 1_700_000_000 + 3600 * (64 * fold + bar),
                value,
                benchmark: None,
            });
        }
        storage.report(t, fold, growth - 1.0).unwrap();
        folds.push(growth - 1.0);
    }
    storage.put_fold_returns(t, &rows).unwrap();
    let mean = folds.iter().sum::<f64>() / 4.0;
    let std = (folds.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / 4.0).sqrt();
    for (k, v) in [
        ("objective", JsonValue::from("total_return")),
        ("folds", JsonValue::Int(4)),
        ("fold_std", JsonValue::Float(std)),
    ] {
        storage.set_trial_user_attr(t, k, &v).unwrap();
    }
    storage.complete_trial(t, &[mean]).unwrap();
}

/// A database with study `cv` (`n` cross-validated trials) and study `holdout` (two trials
/// without fold returns).
pub fn database(db: &Path, n: usize) -> Storage {
    let mut storage = Storage::open(db).unwrap();
    let cv = storage
        .create_study("cv", &[StudyDirection::Maximize])
        .unwrap();
    for i in 0..n {
        add_cv_trial(&mut storage, cv, i);
    }
    let holdout = storage
        .create_study("holdout", &[StudyDirection::Maximize])
        .unwrap();
    for v in [0.1, 0.2] {
        let mut t = NewTrial::new(TrialState::Complete);
        t.values = Some(vec![v]);
        storage.add_trial(holdout, &t).unwrap();
    }
    storage
}

/// A database with study `cpcv`: `n` COMPLETE trials of a CPCV-like split (3 groups of 64
/// bars, each of 3 folds testing 2 of them, so every bar twice and 2 backtest paths), each
/// fold's policy with noise of its own; later trials drift higher.
pub fn cpcv_database(db: &Path, n: usize) -> Storage {
    let mut storage = Storage::open(db).unwrap();
    let study = storage
        .create_study("cpcv", &[StudyDirection::Maximize])
        .unwrap();
    for i in 0..n {
        let t = storage.create_trial(study).unwrap().trial_id;
        let mut rows = Vec::new();
        for (fold, groups) in [[0i64, 1], [0, 2], [1, 2]].iter().enumerate() {
            let fold = fold as i64;
            let bars = groups.iter().flat_map(|g| 64 * g..64 * (g + 1));
            for (k, bar) in bars.enumerate() {
                let u =
                    ((i as f64 + 1.0) * 0.618_034 + (bar + 7 * fold) as f64 * 0.754_878).fract();
                rows.push(FoldReturn {
                    fold,
                    bar_index: k as i64,
                    bar_time: 1_700_000_000 + 3600 * bar,
                    value: 0.01 * (u - 0.5) + 0.0003 * i as f64,
                    benchmark: None,
                });
            }
            storage.report(t, fold, 0.01 * i as f64).unwrap();
        }
        storage.put_fold_returns(t, &rows).unwrap();
        storage
            .set_trial_user_attr(t, "objective", &JsonValue::from("total_return"))
            .unwrap();
        storage.complete_trial(t, &[0.01 * i as f64]).unwrap();
    }
    storage
}
