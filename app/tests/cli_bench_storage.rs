//! `tradetune bench storage`: claims and load figures on SQLite and PostgreSQL, with Optuna's
//! own client measured in the same run (`--peer python3`), every bench study deleted after,
//! and the user's own studies untouched. Small sizes: this checks the bench, it does not time
//! anything.
//!
//! PostgreSQL needs `TRADETUNE_TEST_POSTGRES` (see `engine/storage/tests/support/pg.rs`) and
//! the peer python3 with optuna and psycopg; skipped loudly without them unless required
//! (`TRADETUNE_REQUIRE_POSTGRES=1`, `TRADETUNE_REQUIRE_OPTUNA=1`, as `.ci/run` sets).

use crate::common;
use crate::pg;

use common::{scratch, text, tradetune};
use pg::python_has;
use tradetune_engine::storage::{Storage, StudyDirection};

/// A database holding one study of the user's, which the bench must leave as it was.
fn with_user_study(url: &str) {
    let mut s = Storage::open(url).unwrap();
    let study = s.create_study("mine", &[StudyDirection::Maximize]).unwrap();
    let t = s.create_trial(study).unwrap();
    s.complete_trial(t.trial_id, &[1.5]).unwrap();
}

fn only_the_user_study_is_left(url: &str) {
    let s = Storage::open_read_only(url).unwrap();
    let names: Vec<String> = s.studies().unwrap().into_iter().map(|x| x.name).collect();
    assert_eq!(
        names,
        vec!["mine".to_string()],
        "the bench left studies behind"
    );
    let id = s.study_id("mine").unwrap();
    let trials = s.trials(id).unwrap();
    assert_eq!(trials.len(), 1);
    assert_eq!(trials[0].value(), Some(1.5));
}

#[test]
fn ours_and_optunas_figures_side_by_side_on_sqlite_and_postgres() {
    let test = "ours_and_optunas_figures_side_by_side_on_sqlite_and_postgres";
    let dir = scratch("cli_bench_storage", "both");
    let sqlite = dir.join("studies.db");
    let sqlite = sqlite.to_string_lossy().into_owned();
    with_user_study(&sqlite);
    let mut urls = vec![sqlite.clone()];
    let postgres = pg::fresh_database("bench_storage");
    if let Some(url) = &postgres {
        with_user_study(url);
        urls.push(url.clone());
    }
    let peer = python_has(test, "optuna, psycopg");

    let mut args = vec![
        "bench",
        "storage",
        "--workers",
        "2",
        "--trials-per-worker",
        "3",
        "--load-trials",
        "30",
        "--repeat",
        "2",
        "--json",
    ];
    for u in &urls {
        args.extend(["--storage", u]);
    }
    if peer {
        args.extend(["--peer", "python3"]);
    }
    let o = tradetune(&args);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_str(&text(&o.stdout)).unwrap();
    let dbs = v["databases"].as_array().unwrap();
    assert_eq!(dbs.len(), urls.len(), "{v}");
    assert_eq!(dbs[0]["backend"], "sqlite");
    if postgres.is_some() {
        assert_eq!(dbs[1]["backend"], "postgresql");
    }
    for db in dbs {
        let ours = db["claims_ours"].as_array().unwrap();
        assert_eq!(ours.len(), 2, "{db}");
        for run in ours {
            // Every claim of every worker finished: 2 × 3, within the budget, none failed.
            assert_eq!(run["trials"], 6, "{db}");
            assert_eq!(run["failed"], 0, "{db}");
            assert!(run["trials_per_second"].as_f64().unwrap() > 0.0);
        }
        for run in db["load_ours"].as_array().unwrap() {
            assert_eq!(run["trials"], 30);
            assert_eq!(run["params"], 120);
            assert_eq!(run["intermediate_values"], 300);
            assert!(run["seconds"].as_f64().unwrap() > 0.0);
        }
        let median = db["claims_per_second_ours"]["median"].as_f64().unwrap();
        assert!(median > 0.0, "{db}");
        if peer {
            let optuna = db["claims_optuna"].as_array().unwrap();
            assert_eq!(optuna.len(), 2, "{db}");
            let done: u64 = optuna.iter().map(|r| r["trials"].as_u64().unwrap()).sum();
            let failed: u64 = optuna.iter().map(|r| r["failed"].as_u64().unwrap()).sum();
            assert_eq!(done + failed, 12, "{db}");
            // Optuna read the very study we wrote, all of it.
            for run in db["load_optuna"].as_array().unwrap() {
                assert_eq!(run["trials"], 30, "{db}");
                assert_eq!(run["intermediate_values"], 300, "{db}");
            }
            assert!(db["load_seconds_optuna"]["median"].as_f64().unwrap() > 0.0);
        } else {
            assert!(db["claims_per_second_optuna"].is_null(), "{db}");
        }
    }
    only_the_user_study_is_left(&sqlite);
    if let Some(url) = &postgres {
        only_the_user_study_is_left(url);
        // The password-free URL is printed as given.
        assert!(
            dbs[1]["storage"]
                .as_str()
                .unwrap()
                .starts_with("postgresql://")
        );
    }

    // The table, ours only: our figures, a dash where Optuna's would be, no ratio.
    let o = tradetune(&[
        "bench",
        "storage",
        "--storage",
        &sqlite,
        "--workers",
        "2",
        "--trials-per-worker",
        "2",
        "--load-trials",
        "5",
        "--repeat",
        "1",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    let row = out
        .lines()
        .find(|l| l.starts_with("sqlite") && l.contains("claimed+finished"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(row.trim_end().ends_with('-'), "{out}");
    assert!(out.contains("open + read 5 trials"), "{out}");
    assert!(out.contains("no --peer"), "{out}");
    only_the_user_study_is_left(&sqlite);
}

#[test]
fn bad_input_is_an_error_naming_it() {
    let o = tradetune(&["bench", "storage", "--workers", "0"]);
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("--workers must be at least 1"));

    // An unreachable server: the error names the host, and the password never shows.
    let o = tradetune(&[
        "bench",
        "storage",
        "--storage",
        "postgresql://bench:s3cret@127.0.0.1:9/nowhere",
        "--repeat",
        "1",
    ]);
    assert!(!o.status.success());
    let err = text(&o.stderr);
    assert!(err.contains("127.0.0.1"), "{err}");
    assert!(!err.contains("s3cret"), "{err}");

    // A peer that cannot run Optuna: an error naming it; the bench's studies are gone.
    let dir = scratch("cli_bench_storage", "bad_peer");
    let db = dir.join("studies.db");
    let db = db.to_string_lossy().into_owned();
    let o = tradetune(&[
        "bench",
        "storage",
        "--storage",
        &db,
        "--workers",
        "1",
        "--trials-per-worker",
        "1",
        "--load-trials",
        "2",
        "--repeat",
        "1",
        "--peer",
        "/bin/false",
    ]);
    assert!(!o.status.success());
    let err = text(&o.stderr);
    assert!(err.contains("--peer: /bin/false"), "{err}");
    let s = Storage::open_read_only(&db).unwrap();
    assert!(
        s.studies().unwrap().is_empty(),
        "the bench left studies behind"
    );
}
