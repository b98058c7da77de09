//! Rows another client stores that TradeTune's model refuses do not make the study unreadable:
//! a parameter with an infinite or NaN range (Optuna's `add_trial` stores
//! `FloatDistribution(0.0, float('inf'))`) and an attribute nested deeper than the reader goes
//! are set aside on their trial, with a note naming the trial, table, row and column; an
//! attribute nested as deep as Python writes (300 levels) reads. The rows are written as
//! Optuna's client writes them (`json.dumps` text with `Infinity` and `NaN`), on SQLite and
//! (when a server is configured, see `support/pg.rs`) on PostgreSQL.

use crate::pg;

use tradetune_storage::{
    JsonValue, OptunaDistribution, Storage, StorageError, StudyDirection, set_aside_notes,
    study_view_json, trials_csv,
};

/// `json.dumps(FloatDistribution(0.0, float('inf')))` as `distribution_to_json` writes it.
const INF_RANGE: &str = r#"{"name": "FloatDistribution", "attributes": {"step": null, "low": 0.0, "high": Infinity, "log": false}}"#;
/// `FloatDistribution(float('nan'), float('nan'))`, which Optuna's constructor accepts.
const NAN_RANGE: &str = r#"{"name": "FloatDistribution", "attributes": {"step": null, "low": NaN, "high": NaN, "log": false}}"#;

fn nested(depth: usize) -> String {
    format!("{}{}", "[".repeat(depth), "]".repeat(depth))
}

/// The rows Optuna's client writes for trial `trial_id` (the study's second trial): parameters
/// `y` (5.0 in `[0, inf)`) and `w` (1.0 in a NaN range), a user attribute nested 300 deep and
/// one nested 1100 deep (more than Python writes; a hand-made row).
fn optuna_rows(trial_id: i64) -> String {
    format!(
        "INSERT INTO trial_params (trial_id, param_name, param_value, distribution_json) \
         VALUES ({trial_id}, 'y', 5.0, '{INF_RANGE}'); \
         INSERT INTO trial_params (trial_id, param_name, param_value, distribution_json) \
         VALUES ({trial_id}, 'w', 1.0, '{NAN_RANGE}'); \
         INSERT INTO trial_user_attributes (trial_id, key, value_json) \
         VALUES ({trial_id}, 'deep', '{}'); \
         INSERT INTO trial_user_attributes (trial_id, key, value_json) \
         VALUES ({trial_id}, 'deeper', '{}');",
        nested(300),
        nested(1100)
    )
}

/// A study whose first trial TradeTune wrote and whose second, while it runs, gets
/// [`optuna_rows`] (written by `raw`, outside TradeTune): it reads, the odd rows set aside with
/// a note each; the write paths go on without touching them.
fn a_study_with_rows_the_model_refuses_reads(url: &str, raw: impl FnOnce(&str)) {
    let mut s = Storage::open(url).unwrap();
    let study = s.create_study("edge", &[StudyDirection::Maximize]).unwrap();
    let x = OptunaDistribution::float(0.0, 1.0, false, None).unwrap();
    let first = s.create_trial(study).unwrap();
    s.set_param(first.trial_id, "x", 0.25, &x).unwrap();
    s.complete_trial(first.trial_id, &[0.125]).unwrap();
    let odd = s.create_trial(study).unwrap();
    raw(&optuna_rows(odd.trial_id));
    // TradeTune's writes to the running trial (a report, a heartbeat, an attribute, the
    // result) go on beside the rows it cannot model, and leave them as they were.
    let running = s.trial(odd.trial_id).unwrap();
    assert_eq!(running.set_aside.len(), 3);
    s.report(odd.trial_id, 0, 0.25).unwrap();
    s.record_heartbeat(odd.trial_id).unwrap();
    s.set_trial_user_attr(odd.trial_id, "note", &JsonValue::from("seen"))
        .unwrap();
    s.complete_trial(odd.trial_id, &[0.5]).unwrap();
    drop(s);

    let s = Storage::open_read_only(url).unwrap();
    let trials = s.trials(study).unwrap();
    assert_eq!(trials.len(), 2);
    assert_eq!(trials[0].params.len(), 1, "the first trial is untouched");
    assert!(trials[0].set_aside.is_empty());
    let t = &trials[1];
    assert_eq!(t.value(), Some(0.5));
    assert!(t.params.is_empty(), "neither range is in the model");
    // The 300-deep attribute reads (Python writes up to about 990 levels).
    let mut deep = t.user_attr("deep").expect("the 300-deep attribute");
    let mut depth = 0;
    while let JsonValue::Array(items) = deep {
        depth += 1;
        match items.first() {
            Some(inner) => deep = inner,
            None => break,
        }
    }
    assert_eq!(depth, 300);
    assert!(t.user_attr("deeper").is_none());
    let aside: Vec<_> = (t.set_aside.iter())
        .map(|a| {
            let (table, row, column) = (a.table, a.row_id, a.column);
            (
                table,
                row,
                column,
                a.name.as_str(),
                a.internal,
                a.float_value,
            )
        })
        .collect();
    assert_eq!(
        aside,
        [
            (
                "trial_params",
                2,
                "distribution_json",
                "y",
                Some(5.0),
                Some(5.0)
            ),
            (
                "trial_params",
                3,
                "distribution_json",
                "w",
                Some(1.0),
                Some(1.0)
            ),
            (
                "trial_user_attributes",
                2,
                "value_json",
                "deeper",
                None,
                None
            ),
        ]
    );
    assert_eq!(t.set_aside[0].text, INF_RANGE, "kept as stored");
    assert_eq!(t.set_aside, running.set_aside);
    assert_eq!(t.user_attr("note"), Some(&JsonValue::from("seen")));
    assert_eq!(t.intermediate_values, [(0, 0.25)]);
    let notes = set_aside_notes(&trials);
    assert_eq!(notes.len(), 3, "{notes:?}");
    assert_eq!(
        notes[0],
        "trial 1: parameter 'y' set aside (table trial_params, row 2, column distribution_json: \
         low and high must be finite numbers (got low = 0, high = inf)); its value 5.0 is shown \
         and exported, but it is not used to fit the sampler or for importance"
    );
    assert!(
        notes[2].starts_with(
            "trial 1: user attribute 'deeper' set aside (table trial_user_attributes, row 2, \
             column value_json: invalid JSON at byte 1001: nesting too deep)"
        ),
        "{}",
        notes[2]
    );
    // The same rows on many trials (a study `add_trial` filled) are one line a name; on up to
    // three, a line a row.
    let many: Vec<_> = (0..20)
        .map(|n| {
            let mut c = t.clone();
            c.number = n;
            c
        })
        .collect();
    let grouped = set_aside_notes(&many);
    assert_eq!(grouped.len(), 3, "{grouped:?}");
    assert_eq!(
        grouped[0],
        "parameter 'y' set aside on 20 trials (0, 1, 2, 3, 4, 5, … 19; table trial_params, \
         column distribution_json; trial 0's, row 2: low and high must be finite numbers (got \
         low = 0, high = inf)); their values are shown and exported, but not used to fit the \
         sampler or for importance"
    );
    assert_eq!(set_aside_notes(&many[..3]).len(), 9);

    // What `study show --json` and the export write: the values as Optuna shows them.
    let record = s.study("edge").unwrap();
    let view = study_view_json(&record, &trials, None).unwrap();
    let odd_view = &view["trials"][1];
    assert_eq!(
        odd_view["params"]["y"],
        serde_json::json!({"type": "float", "value": 5.0})
    );
    assert_eq!(odd_view["distributions"]["y"], INF_RANGE);
    assert_eq!(odd_view["user_attrs"]["deeper"], nested(1100));
    assert_eq!(odd_view["set_aside"].as_array().map(Vec::len), Some(3));
    assert!(view["trials"][0].get("set_aside").is_none());
    let csv = String::from_utf8(trials_csv(&record, &trials).unwrap()).unwrap();
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let y = header.iter().position(|h| *h == "params_y").expect("{csv}");
    let row: Vec<&str> = csv.lines().nth(2).unwrap().split(',').collect();
    assert_eq!(row[y], "5.0", "{csv}");
    // Reading one trial, the best one, and a summary go through as well.
    assert_eq!(s.best_trial(study).unwrap().map(|t| t.number), Some(1));
    assert_eq!(s.trial(odd.trial_id).unwrap(), *t);
    assert_eq!(s.study_summaries().unwrap()[0].best, Some((1, 0.5)));
    drop(s);

    // Writes go on and leave the rows as they were: a later trial may search `y` over a float
    // range of the same scale (Optuna's rule), not as another kind.
    let mut s = Storage::open(url).unwrap();
    let other = s.create_trial(study).unwrap();
    let as_int = OptunaDistribution::int(0, 10, false, 1).unwrap();
    match s.set_param(other.trial_id, "y", 3.0, &as_int) {
        Err(StorageError::IncompatibleDistribution {
            existing, reason, ..
        }) => {
            assert_eq!(existing, INF_RANGE);
            assert!(reason.contains("different distribution kind"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    let log = OptunaDistribution::float(1.0, 10.0, true, None).unwrap();
    match s.set_param(other.trial_id, "y", 3.0, &log) {
        Err(StorageError::IncompatibleDistribution { reason, .. }) => {
            assert!(reason.contains("different log configuration"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    let next = s.create_trial(study).unwrap();
    let y = OptunaDistribution::float(0.0, 10.0, false, None).unwrap();
    s.set_param(next.trial_id, "y", 2.5, &y).unwrap();
    let again = s.trial(odd.trial_id).unwrap();
    assert_eq!(again.set_aside, t.set_aside, "the odd rows as they were");
    assert_eq!(s.trial(next.trial_id).unwrap().params.len(), 1);
}

#[test]
fn rows_the_model_refuses_are_set_aside_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("edge.db");
    a_study_with_rows_the_model_refuses_reads(&path.to_string_lossy(), |sql| {
        rusqlite::Connection::open(&path)
            .unwrap()
            .execute_batch(sql)
            .unwrap();
    });
}

#[test]
fn rows_the_model_refuses_are_set_aside_on_postgres() {
    if let Some(url) = pg::fresh_database("set_aside") {
        a_study_with_rows_the_model_refuses_reads(&url.clone(), |sql| {
            postgres::Client::connect(&url, postgres::NoTls)
                .unwrap()
                .batch_execute(sql)
                .unwrap();
        });
    }
}
