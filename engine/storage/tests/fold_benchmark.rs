//! `tradetune_fold_returns.benchmark`, equal weight's return beside the agent's: stored and
//! read back; a database made before the column came reads it as NULL, read-only too, and
//! gains it on its next writable open, its old rows kept.

use tradetune_storage::{FoldReturn, Storage, StudyDirection};

fn row(bar: i64, benchmark: Option<f64>) -> FoldReturn {
    FoldReturn {
        fold: 0,
        bar_index: bar,
        bar_time: 1_700_000_000 + 3600 * bar,
        value: 0.01,
        benchmark,
    }
}

#[test]
fn a_database_without_the_benchmark_column_reads_none_and_gains_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("old.db");
    let trial = {
        let mut s = Storage::open(&db).unwrap();
        let study = s.create_study("s", &[StudyDirection::Maximize]).unwrap();
        let t = s.create_trial(study).unwrap().trial_id;
        s.put_fold_returns(t, &[row(0, Some(0.002))]).unwrap();
        assert_eq!(s.fold_returns(t).unwrap()[0].benchmark, Some(0.002));
        t
    };
    // As the table was before the column came.
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch("ALTER TABLE tradetune_fold_returns DROP COLUMN benchmark")
        .unwrap();
    let read_only = Storage::open_read_only(&db).unwrap();
    let rows = read_only.fold_returns(trial).unwrap();
    assert_eq!(
        (rows.len(), rows[0].benchmark, rows[0].value),
        (1, None, 0.01)
    );
    drop(read_only);
    // The next writable open adds the column; the old row keeps its return, without one.
    let mut s = Storage::open(&db).unwrap();
    s.put_fold_returns(trial, &[row(1, Some(-0.003)), row(2, Some(f64::NAN))])
        .unwrap();
    let rows = s.fold_returns(trial).unwrap();
    let benchmarks: Vec<Option<f64>> = rows.iter().map(|r| r.benchmark).collect();
    assert_eq!(benchmarks, [None, Some(-0.003), None]);
    // Opened again: the column is there, nothing to add.
    drop(s);
    Storage::open(&db).unwrap();
}
