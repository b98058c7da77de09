//! The storage on a real PostgreSQL server: the schema Optuna creates (compared with
//! `pg_dump --schema-only` of a database Optuna made), every write and read giving what the same
//! calls give on SQLite, trial numbers unique across concurrent writers, stale trials failed on
//! the database's clock, and connection errors that name the host and hide the password.
//!
//! Needs a server: `TRADETUNE_TEST_POSTGRES=postgresql://USER@HOST:PORT` (a role that may create
//! databases; each test makes its own). `.ci/run` starts a throw-away cluster and sets it, with
//! `TRADETUNE_REQUIRE_POSTGRES=1` so that a missing server fails instead of skipping. The schema
//! comparison also needs python3 with `optuna` and `psycopg` (skipped, or failed under
//! `TRADETUNE_REQUIRE_OPTUNA=1`, without them).

use crate::pg;

use std::process::Command;
use std::time::Duration;

use pg::{fresh_database, python_has};

use serde_json::Value;
use tradetune_storage::{
    CategoricalChoice, JsonValue, NewTrial, OptunaDistribution, Storage, StorageError,
    StorageOptions, StudyDirection, TrialState, study_view_json,
};

/// `pg_dump --schema-only` of Optuna's tables, without the lines that differ per dump.
fn optuna_schema_dump(url: &str) -> String {
    let out = Command::new("pg_dump")
        .args([
            "--schema-only",
            "--no-owner",
            "--exclude-table=tradetune_*",
            url,
        ])
        .output()
        .expect("run pg_dump");
    assert!(
        out.status.success(),
        "pg_dump failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| {
            !l.starts_with("--") && !l.starts_with("\\restrict") && !l.starts_with("\\unrestrict")
        })
        .filter(|l| !l.trim().is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_schema_is_the_one_optuna_creates() {
    let (Some(ours), Some(theirs)) = (
        fresh_database("schema_ours"),
        fresh_database("schema_optuna"),
    ) else {
        return;
    };
    if !python_has("the_schema_is_the_one_optuna_creates", "optuna, psycopg") {
        return;
    }
    Storage::open(&ours).unwrap();
    // Optuna does not create the database itself: make it empty, then let Optuna fill it.
    let target = tradetune_storage::db::pg_url::parse(&theirs).unwrap();
    assert!(tradetune_storage::db::pg_url::create_database(&target).unwrap());
    let made = Command::new("python3")
        .args([
            "-c",
            "import sys, optuna\n\
             optuna.storages.RDBStorage(sys.argv[1])",
            &theirs,
        ])
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "Optuna could not create its schema: {}",
        String::from_utf8_lossy(&made.stderr)
    );
    let (a, b) = (optuna_schema_dump(&ours), optuna_schema_dump(&theirs));
    assert!(a.contains("CREATE TYPE public.trialstate AS ENUM"), "{a}");
    if a != b {
        let diff: Vec<String> = a
            .lines()
            .zip(b.lines())
            .filter(|(x, y)| x != y)
            .take(10)
            .map(|(x, y)| format!("ours:   {x}\noptuna: {y}"))
            .collect();
        panic!(
            "pg_dump --schema-only differs ({} vs {} lines):\n{}",
            a.lines().count(),
            b.lines().count(),
            diff.join("\n")
        );
    }
    // Optuna opens ours without asking for a migration.
    let check = Command::new("python3")
        .args([
            "-c",
            "import sys, optuna\n\
             optuna.logging.set_verbosity(optuna.logging.WARNING)\n\
             s = optuna.create_study(storage=sys.argv[1], study_name='from_optuna')\n\
             s.optimize(lambda t: t.suggest_float('x', 0, 1), n_trials=2)\n\
             print(len(optuna.get_all_study_names(sys.argv[1])))",
            &ours,
        ])
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "Optuna cannot use TradeTune's PostgreSQL schema: {}",
        String::from_utf8_lossy(&check.stderr)
    );
    let s = Storage::open_read_only(&ours).unwrap();
    let id = s.study_id("from_optuna").unwrap();
    assert_eq!(s.trials(id).unwrap().len(), 2);
}

/// One sequence of writes covering every table, every distribution kind and every state.
fn write_everything(s: &mut Storage) {
    use CategoricalChoice as C;
    let lr = OptunaDistribution::float(1e-5, 1e-1, true, None).unwrap();
    let clip = OptunaDistribution::float(0.1, 0.3, false, Some(0.05)).unwrap();
    let batch = OptunaDistribution::int(32, 256, false, 32).unwrap();
    let mixed = OptunaDistribution::categorical(vec![
        C::None,
        C::Bool(true),
        C::Float(0.5),
        C::Str("auto".into()),
    ])
    .unwrap();
    let study = s
        .create_study("everything", &[StudyDirection::Maximize])
        .unwrap();
    s.set_study_user_attr(study, "algo", &JsonValue::from("PPO"))
        .unwrap();
    s.set_study_system_attr(study, "fingerprint", &JsonValue::from("abc"))
        .unwrap();
    for k in 0..4 {
        let t = s.create_trial(study).unwrap();
        s.set_params(
            t.trial_id,
            &[
                ("lr".into(), 1e-4 * (1.0 + k as f64), lr.clone()),
                ("clip".into(), 0.1 + 0.05 * k as f64, clip.clone()),
                ("batch".into(), 32.0 * (1 + k) as f64, batch.clone()),
                ("mixed".into(), k as f64, mixed.clone()),
            ],
        )
        .unwrap();
        for step in 0..3 {
            let v = match (k, step) {
                (1, 2) => f64::NAN,
                (2, 1) => f64::INFINITY,
                _ => k as f64 + step as f64 / 10.0,
            };
            s.report(t.trial_id, step, v).unwrap();
        }
        s.set_trial_user_attr(t.trial_id, "k", &JsonValue::from(k as i64))
            .unwrap();
        match k {
            0 => s.complete_trial(t.trial_id, &[0.5]).unwrap(),
            1 => s.prune_trial(t.trial_id).unwrap(),
            2 => s.fail_trial(t.trial_id, "diverged").unwrap(),
            _ => s.complete_trial(t.trial_id, &[f64::INFINITY]).unwrap(),
        }
    }
    s.enqueue_trial(
        study,
        &[("lr".into(), JsonValue::from(0.001))],
        &[("why".into(), JsonValue::from("seed"))],
    )
    .unwrap();
    let popped = s.pop_waiting_trial(study).unwrap().unwrap();
    assert_eq!(popped.number, 4);
    let mut nt = NewTrial::new(TrialState::Complete);
    nt.values = Some(vec![f64::NEG_INFINITY]);
    nt.intermediate_values = vec![(0, 1.0)];
    s.add_trial(study, &nt).unwrap();
    let multi = s
        .create_study(
            "multi",
            &[StudyDirection::Minimize, StudyDirection::Maximize],
        )
        .unwrap();
    let t = s.create_trial(multi).unwrap();
    s.complete_trial(t.trial_id, &[1.0, -2.5]).unwrap();
}

/// What a storage holds, without the datetimes (which differ between two runs).
fn view_without_times(s: &Storage) -> Vec<Value> {
    s.study_summaries()
        .unwrap()
        .iter()
        .map(|sum| {
            let mut v =
                study_view_json(&sum.study, &s.trials(sum.study.study_id).unwrap(), sum.best)
                    .unwrap();
            for t in v["trials"].as_array_mut().unwrap() {
                let t = t.as_object_mut().unwrap();
                t.remove("datetime_start");
                t.remove("datetime_complete");
            }
            v
        })
        .collect()
}

#[test]
fn postgres_reads_back_what_sqlite_does() {
    let Some(url) = fresh_database("roundtrip") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("same.db");
    let mut pg = Storage::open(&url).unwrap();
    assert!(pg.is_postgres());
    assert!(!pg.path().contains("tt_roundtrip") || pg.path().starts_with("postgresql://"));
    let mut lite = Storage::open(&file).unwrap();
    write_everything(&mut pg);
    write_everything(&mut lite);
    let (a, b) = (view_without_times(&pg), view_without_times(&lite));
    assert_eq!(a, b);
    assert_eq!(a.len(), 2);
    // Datetimes are stored to the microsecond and read back as written.
    let id = pg.study_id("everything").unwrap();
    let t = &pg.trials(id).unwrap()[0];
    assert!(t.datetime_start.is_some() && t.datetime_complete >= t.datetime_start);
    // Finished trials stay finished; duplicate names are refused; both leave the data intact.
    assert!(matches!(
        pg.complete_trial(t.trial_id, &[1.0]),
        Err(StorageError::TrialFinished { .. })
    ));
    assert!(matches!(
        pg.create_study("everything", &[StudyDirection::Minimize]),
        Err(StorageError::DuplicateStudy(_))
    ));
    let lr = OptunaDistribution::float(1e-5, 1e-1, true, None).unwrap();
    let running = pg.create_trial(id).unwrap();
    pg.set_param(running.trial_id, "lr", 1e-3, &lr).unwrap();
    assert!(matches!(
        pg.set_param(running.trial_id, "lr", 1e-3, &lr),
        Err(StorageError::ParamAlreadySet { .. })
    ));
    let int = OptunaDistribution::int(1, 5, false, 1).unwrap();
    assert!(matches!(
        pg.set_param(running.trial_id, "clip", 2.0, &int),
        Err(StorageError::IncompatibleDistribution { .. })
    ));
    pg.complete_trial(running.trial_id, &[2.0]).unwrap();
    assert_eq!(
        view_without_times(&Storage::open_read_only(&url).unwrap()).len(),
        2
    );
    // Our own tables: run metadata, learning curves and telemetry.
    let t = pg.create_trial(id).unwrap();
    pg.set_run_metadata(
        t.trial_id,
        &tradetune_storage::RunMetadata {
            worker: Some("host-a/0".into()),
            device: "cpu".into(),
            backend: "flex".into(),
            precision: "f32".into(),
            config: JsonValue::parse(r#"{"ppo": {"lr": 0.001}}"#).unwrap(),
        },
    )
    .unwrap();
    let points = vec![tradetune_storage::CurvePoint {
        metric: "reward".into(),
        update_index: 3,
        env_steps: 3_000_000_000,
        value: f64::NAN,
    }];
    pg.append_learning_curve(t.trial_id, &points).unwrap();
    let curve = pg.learning_curve(t.trial_id).unwrap();
    assert_eq!(curve[0].env_steps, 3_000_000_000);
    assert!(curve[0].value.is_nan());
    let now = tradetune_storage::now_utc();
    let sample = |trial_id| tradetune_storage::TelemetrySample {
        trial_id,
        recorded_at: now,
        source: "gpu0".into(),
        metric: "util".into(),
        value: 55.0,
    };
    pg.append_telemetry(&[sample(Some(t.trial_id)), sample(None)])
        .unwrap();
    assert_eq!(
        pg.telemetry(Some(t.trial_id)).unwrap(),
        vec![sample(Some(t.trial_id))]
    );
    assert_eq!(pg.telemetry(None).unwrap(), vec![sample(None)]);
    assert!(matches!(
        pg.append_telemetry(&[sample(Some(999_999))]),
        Err(StorageError::UnknownTrial(999_999))
    ));
    assert_eq!(
        pg.run_metadata(t.trial_id)
            .unwrap()
            .unwrap()
            .worker
            .as_deref(),
        Some("host-a/0")
    );
}

#[test]
fn concurrent_workers_never_share_a_trial_number() {
    let Some(url) = fresh_database("numbers") else {
        return;
    };
    let study = Storage::open(&url)
        .unwrap()
        .create_study("shared", &[StudyDirection::Minimize])
        .unwrap();
    let (workers, per_worker) = (6, 25);
    let x = OptunaDistribution::float(-10.0, 10.0, false, None).unwrap();
    std::thread::scope(|scope| {
        for w in 0..workers {
            let (url, x) = (url.clone(), x.clone());
            scope.spawn(move || {
                let mut s = Storage::open(&url).unwrap();
                for i in 0..per_worker {
                    let t = s.create_trial(study).unwrap();
                    let v = (w * per_worker + i) as f64 / 20.0 - 5.0;
                    s.set_param(t.trial_id, "x", v, &x).unwrap();
                    s.complete_trial(t.trial_id, &[v * v]).unwrap();
                    if i % 5 == 0 {
                        s.enqueue_trial(study, &[("x".into(), JsonValue::from(1.0))], &[])
                            .unwrap();
                        s.pop_waiting_trial(study).unwrap();
                    }
                }
            });
        }
    });
    let s = Storage::open_read_only(&url).unwrap();
    let trials = s.trials(study).unwrap();
    let total = workers * per_worker + workers * per_worker / 5;
    let mut numbers: Vec<i64> = trials.iter().map(|t| t.number).collect();
    numbers.sort();
    assert_eq!(numbers, (0..total as i64).collect::<Vec<_>>());
    let waiting = trials
        .iter()
        .filter(|t| t.state == TrialState::Waiting)
        .count();
    assert_eq!(waiting, 0, "every enqueued trial was taken exactly once");
}

#[test]
fn a_dead_workers_trial_fails_on_the_database_clock() {
    let Some(url) = fresh_database("stale") else {
        return;
    };
    let mut s = Storage::open(&url).unwrap();
    let study = s.create_study("s", &[StudyDirection::Minimize]).unwrap();
    let dead = s.create_trial(study).unwrap();
    let alive = s.create_trial(study).unwrap();
    std::thread::sleep(Duration::from_millis(2_100));
    s.record_heartbeat(alive.trial_id).unwrap();
    let failed = s.fail_stale_trials(Duration::from_secs(2)).unwrap();
    assert_eq!(failed, vec![dead]);
    let t = s.trial(dead.trial_id).unwrap();
    assert_eq!(t.state, TrialState::Fail);
    let reason = t
        .system_attrs
        .iter()
        .find(|(k, _)| k == "fail_reason")
        .map(|(_, v)| v.dumps())
        .unwrap_or_default();
    assert!(reason.contains("worker lost"), "{reason}");
    assert_eq!(s.trial(alive.trial_id).unwrap().state, TrialState::Running);
}

/// A beat written in the last seconds before the server's clocks went forward (a time zone
/// with daylight saving, as `initdb` copies the system's) is seconds old, not an hour: the
/// live trial is not failed "worker lost"; a beat older than the limit still is. The zone here
/// is a POSIX rule whose clocks go forward 10 s before the check.
#[test]
fn a_beat_from_before_the_clocks_went_forward_is_not_an_hour_old() {
    let Some(url) = fresh_database("dst") else {
        return;
    };
    let mut s = Storage::open(&url).unwrap();
    let study = s.create_study("s", &[StudyDirection::Minimize]).unwrap();
    let live = s.create_trial(study).unwrap();
    let dead = s.create_trial(study).unwrap();
    drop(s);
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let row = admin
        .query_one(
            "SELECT to_char(t, 'HH24:MI:SS'), EXTRACT(doy FROM t)::int, \
             EXTRACT(year FROM t)::int, current_database() \
             FROM (SELECT (now() AT TIME ZONE 'UTC') - interval '10 seconds' AS t) AS x",
            &[],
        )
        .unwrap();
    let (at, doy, year, db): (String, i32, i32, String) =
        (row.get(0), row.get(1), row.get(2), row.get(3));
    // POSIX's Jn counts 1..=365 and never February 29th.
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let day = match doy {
        60 if leap => {
            eprintln!("skipped: February 29th has no POSIX Jn day");
            return;
        }
        d if leap && d > 60 => d - 1,
        d => d,
    };
    let back = (day + 30 - 1) % 365 + 1;
    let zone = format!("XST0XDT,J{day}/{at},J{back}/0");
    admin
        .batch_execute(&format!(
            "ALTER DATABASE \"{db}\" SET timezone TO '{zone}'; \
             UPDATE trial_heartbeats SET heartbeat = \
               (now() AT TIME ZONE 'UTC') - interval '15 seconds' WHERE trial_id = {}; \
             UPDATE trial_heartbeats SET heartbeat = \
               (now() AT TIME ZONE 'UTC') - interval '130 seconds' WHERE trial_id = {};",
            live.trial_id, dead.trial_id
        ))
        .unwrap();
    // A new connection takes the database's zone: its wall clock is an hour ahead now.
    let mut s = Storage::open(&url).unwrap();
    let ahead: bool = postgres::Client::connect(&url, postgres::NoTls)
        .unwrap()
        .query_one(
            "SELECT LOCALTIMESTAMP > (now() AT TIME ZONE 'UTC') + interval '59 minutes'",
            &[],
        )
        .unwrap()
        .get(0);
    assert!(ahead, "the zone {zone} has its clocks forward now");
    let failed = s.fail_stale_trials(Duration::from_secs(60)).unwrap();
    assert_eq!(failed, vec![dead], "zone {zone}");
    assert_eq!(s.trial(live.trial_id).unwrap().state, TrialState::Running);
}

/// Ends every other session of the database `url` names, as a server restart or an
/// administrator's `pg_terminate_backend` does; returns how many.
fn end_other_sessions(url: &str) -> usize {
    let mut admin = postgres::Client::connect(url, postgres::NoTls).unwrap();
    admin
        .query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE datname = current_database() AND pid <> pg_backend_pid()",
            &[],
        )
        .unwrap()
        .len()
}

/// The server closes a storage's connection mid-study: the next write (whose transaction
/// meets the closed connection) and the next read connect again and go through, once each:
/// nothing is stored twice. A read-only storage connects again too.
#[test]
fn a_connection_the_server_closed_is_opened_again() {
    let Some(url) = fresh_database("reconnect") else {
        return;
    };
    let mut s = Storage::open(&url).unwrap();
    let study = s.create_study("s", &[StudyDirection::Minimize]).unwrap();
    let t = s.create_trial(study).unwrap();
    assert_eq!(s.reconnects(), 0);
    assert!(end_other_sessions(&url) >= 1);
    s.report(t.trial_id, 0, 1.5).unwrap();
    assert_eq!(s.reconnects(), 1);
    assert!(end_other_sessions(&url) >= 1);
    assert_eq!(s.trials(study).unwrap().len(), 1);
    assert_eq!(s.reconnects(), 2);
    end_other_sessions(&url);
    let next = s.create_trial(study).unwrap();
    assert_eq!(next.number, 1);
    s.complete_trial(t.trial_id, &[1.5]).unwrap();
    let stored = s.trial(t.trial_id).unwrap();
    assert_eq!(stored.state, TrialState::Complete);
    assert_eq!(stored.intermediate_values.len(), 1);
    assert_eq!(s.trials(study).unwrap().len(), 2);

    let reader = Storage::open_read_only(&url).unwrap();
    end_other_sessions(&url);
    assert_eq!(reader.trials(study).unwrap().len(), 2);
    assert_eq!(reader.reconnects(), 1);
}

#[test]
fn connection_errors_name_the_host_and_hide_the_password() {
    // Nothing listens on port 1.
    let opts = StorageOptions {
        busy_timeout: Duration::from_secs(2),
        ..Default::default()
    };
    let e = Storage::open_with("postgresql://alice:hunter2@127.0.0.1:1/studies", &opts)
        .unwrap_err()
        .to_string();
    assert!(e.contains("127.0.0.1:1"), "{e}");
    assert!(e.contains("cannot connect"), "{e}");
    assert!(!e.contains("hunter2"), "the password leaked: {e}");
    let e = Storage::open("postgresql://alice:hunter2@host:port/x")
        .unwrap_err()
        .to_string();
    assert!(e.contains("postgresql://user"), "{e}");
    assert!(!e.contains("hunter2"), "the password leaked: {e}");
    if let Some(url) = fresh_database("missing") {
        // Read-only never creates the database.
        let e = Storage::open_read_only(&url).unwrap_err().to_string();
        assert!(e.contains("does not exist"), "{e}");
    }
}

#[test]
fn a_shared_budget_is_never_overshot() {
    let Some(url) = fresh_database("budget") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("budget.db");
    for location in [url.as_str(), file.to_str().unwrap()] {
        let study = Storage::open(location)
            .unwrap()
            .create_study("b", &[StudyDirection::Minimize])
            .unwrap();
        let budget = 20;
        let first = std::sync::atomic::AtomicBool::new(true);
        let made: usize = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..5)
                .map(|_| {
                    let first = &first;
                    scope.spawn(move || {
                        let mut s = Storage::open(location).unwrap();
                        let mut n = 0;
                        while let Some(t) = s.create_trial_within(study, Some(budget)).unwrap() {
                            n += 1;
                            // The first trial fails, which frees its place in the budget; its
                            // worker goes on, so one more trial is made in all.
                            if first.swap(false, std::sync::atomic::Ordering::SeqCst) {
                                s.fail_trial(t.trial_id, "crashed").unwrap();
                            } else {
                                s.complete_trial(t.trial_id, &[1.0]).unwrap();
                            }
                        }
                        n
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert_eq!(made, budget + 1, "{location}");
        let s = Storage::open_read_only(location).unwrap();
        let done = s
            .trials(study)
            .unwrap()
            .iter()
            .filter(|t| t.state == TrialState::Complete)
            .count();
        assert_eq!(done, budget, "{location}");
    }
}

/// Opening a database that holds the whole schema takes no lock: a worker's open does not wait
/// behind another's stuck schema check (the advisory lock) or a telemetry write in flight (the
/// SHARE lock `CREATE INDEX IF NOT EXISTS` takes), where it used to wait out its busy timeout
/// and fail with "lock the schema". One missing a piece (here the telemetry index) still
/// makes it under the lock: it waits for the lock, and says so when the wait runs out.
#[test]
fn opening_a_database_with_its_whole_schema_takes_no_lock() {
    let Some(url) = fresh_database("schema_lock") else {
        return;
    };
    Storage::open(&url).unwrap();
    let quick = StorageOptions {
        busy_timeout: Duration::from_secs(1),
        ..Default::default()
    };
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    // The schema's advisory lock (open.rs's SCHEMA_LOCK) and a telemetry row not yet committed.
    let hold = "BEGIN; SELECT pg_advisory_xact_lock(362192129605); \
                INSERT INTO tradetune_telemetry (trial_id, recorded_at, source, metric, value) \
                VALUES (NULL, now(), 'cpu', 'cpu_util', 1.0)";
    admin.batch_execute(hold).unwrap();
    let s = Storage::open_with(&url, &quick).unwrap();
    assert!(s.studies().unwrap().is_empty());
    admin.batch_execute("ROLLBACK").unwrap();

    admin
        .batch_execute("DROP INDEX ix_tradetune_telemetry_trial_id")
        .unwrap();
    admin.batch_execute(hold).unwrap();
    let e = Storage::open_with(&url, &quick).unwrap_err().to_string();
    assert!(e.contains("lock the schema"), "{e}");
    admin.batch_execute("ROLLBACK").unwrap();
    Storage::open_with(&url, &quick).unwrap();
    let index = admin
        .query(
            "SELECT 1 FROM pg_indexes WHERE indexname = 'ix_tradetune_telemetry_trial_id'",
            &[],
        )
        .unwrap();
    assert_eq!(index.len(), 1, "the open made the missing index again");
    // So is every other piece the check looks for, each missing in turn.
    for (drop, present) in [
        (
            "ALTER TABLE tradetune_fold_returns DROP COLUMN benchmark",
            "SELECT 1 FROM information_schema.columns WHERE table_name = 'tradetune_fold_returns' \
             AND column_name = 'benchmark'",
        ),
        (
            "DROP TABLE tradetune_runs",
            "SELECT 1 FROM pg_tables WHERE tablename = 'tradetune_runs'",
        ),
        (
            "DELETE FROM tradetune_version",
            "SELECT 1 FROM tradetune_version WHERE schema_version = 1",
        ),
    ] {
        admin.batch_execute(drop).unwrap();
        assert!(admin.query(present, &[]).unwrap().is_empty(), "{drop}");
        Storage::open_with(&url, &quick).unwrap();
        assert_eq!(admin.query(present, &[]).unwrap().len(), 1, "{drop}");
    }
}
