//! `tradetune compare` on a study database built in the test with the engine's storage API.

use crate::common;

use chrono::{NaiveDate, NaiveDateTime};
use common::{scratch, text, tradetune};
use tradetune_engine::storage::{
    JsonValue, NewTrial, Storage, StudyDirection, TelemetrySample, TrialState,
};

fn at(minute: u32, second: u32) -> NaiveDateTime {
    NaiveDate::from_ymd_opt(2026, 11, 23)
        .unwrap()
        .and_hms_opt(12, minute, second)
        .unwrap()
}

/// A trial from `start` to `end` minutes past noon, with a value and a samples/s attribute.
fn trial(state: TrialState, start: u32, end: u32, value: Option<f64>, sps: f64) -> NewTrial {
    let mut t = NewTrial::new(state);
    t.datetime_start = Some(at(start, 0));
    t.datetime_complete = Some(at(end, 0));
    t.values = value.map(|v| vec![v]);
    t.user_attrs = vec![("samples_per_s".into(), JsonValue::Float(sps))];
    t
}

/// GPU 0 samples of one trial: utilisation, memory and temperature, one per second.
fn gpu_rows(trial_id: i64, util: &[f64], mem: &[f64], temp: f64) -> Vec<TelemetrySample> {
    let mut rows = Vec::new();
    for (i, (u, m)) in util.iter().zip(mem).enumerate() {
        for (metric, value) in [("util_pct", *u), ("mem_used_mib", *m), ("temp_c", temp)] {
            rows.push(TelemetrySample {
                trial_id: Some(trial_id),
                recorded_at: at(1, i as u32),
                source: "gpu0".into(),
                metric: metric.into(),
                value,
            });
        }
    }
    rows
}

fn build_db(path: &std::path::Path) {
    let mut s = Storage::open(path).unwrap();
    let base = s
        .create_study("baseline", &[StudyDirection::Maximize])
        .unwrap();
    let t0 = s
        .add_trial(
            base,
            &trial(TrialState::Complete, 0, 10, Some(0.5), 1_000.0),
        )
        .unwrap();
    let t1 = s
        .add_trial(
            base,
            &trial(TrialState::Complete, 10, 20, Some(0.8), 1_200.0),
        )
        .unwrap();
    s.add_trial(base, &trial(TrialState::Fail, 20, 21, None, 900.0))
        .unwrap();
    s.append_telemetry(&gpu_rows(
        t0.trial_id,
        &[50.0, 60.0],
        &[1_000.0, 2_000.0],
        70.0,
    ))
    .unwrap();
    s.append_telemetry(&gpu_rows(
        t1.trial_id,
        &[40.0, 50.0],
        &[1_000.0, 2_000.0],
        72.0,
    ))
    .unwrap();

    let exp = s
        .create_study("experiment", &[StudyDirection::Maximize])
        .unwrap();
    let e0 = s
        .add_trial(exp, &trial(TrialState::Complete, 0, 5, Some(1.0), 2_000.0))
        .unwrap();
    s.add_trial(exp, &trial(TrialState::Complete, 5, 10, Some(0.9), 2_400.0))
        .unwrap();
    s.append_telemetry(&gpu_rows(
        e0.trial_id,
        &[90.0, 100.0],
        &[3_000.0, 3_000.0],
        80.0,
    ))
    .unwrap();
}

#[test]
fn compares_two_studies_and_a_trial_side_by_side() {
    let dir = scratch("cli_compare", "studies");
    let db = dir.join("studies.db");
    build_db(&db);
    let o = tradetune(&[
        "compare",
        "baseline",
        "experiment",
        "--db",
        db.to_str().unwrap(),
        "--json",
    ]);
    let (stdout, stderr) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let (a, b) = (&v["a"], &v["b"]);
    assert_eq!(a["trials"], 3);
    assert_eq!(a["complete"], 2);
    assert_eq!(a["failed"], 1);
    // Noon to 12:21, the failed trial's end.
    assert_eq!(a["duration_s"], 21.0 * 60.0);
    assert_eq!(a["samples_per_s"], (1_000.0 + 1_200.0 + 900.0) / 3.0);
    assert_eq!(a["objective"], 0.8);
    let gpu = &a["devices"][0];
    assert_eq!(gpu["device"], "gpu0");
    assert_eq!(gpu["mean_util_pct"], 50.0);
    assert_eq!(gpu["peak_util_pct"], 60.0);
    assert_eq!(gpu["mean_mem_used_mib"], 1_500.0);
    assert_eq!(gpu["peak_mem_used_mib"], 2_000.0);
    assert_eq!(a["peak_temp_c"], 72.0);
    assert_eq!(b["complete"], 2);
    assert_eq!(b["failed"], 0);
    assert_eq!(b["duration_s"], 600.0);
    assert_eq!(b["samples_per_s"], 2_200.0);
    assert_eq!(b["objective"], 1.0);
    assert_eq!(b["devices"][0]["mean_util_pct"], 95.0);
    assert_eq!(b["peak_temp_c"], 80.0);

    // One trial against a study, as a table for people.
    let o = tradetune(&[
        "compare",
        "baseline#1",
        "experiment",
        "--db",
        db.to_str().unwrap(),
    ]);
    let stdout = text(&o.stdout);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        stdout.contains("baseline#1") && stdout.contains("B vs A"),
        "{stdout}"
    );
    let line = |label: &str| {
        stdout
            .lines()
            .find(|l| l.starts_with(label))
            .unwrap_or_else(|| panic!("no {label} row:\n{stdout}"))
            .to_owned()
    };
    // Trial 1: 1,200 samples/s, 600 s, value 0.8, GPU 40–50 %.
    assert!(line("samples/s").contains("+83.3 %"), "{stdout}");
    assert!(line("duration (s)").contains("600.0"), "{stdout}");
    assert!(line("objective").contains("+0.2000"), "{stdout}");
    assert!(line("failed").contains("+0"), "{stdout}");
    assert!(line("gpu0 mean util %").contains("45.0"), "{stdout}");
    assert!(line("gpu0 peak temp").contains("72.0"), "{stdout}");
}

/// A card two trials shared for a while has one reading a tick, stored for each of them: over
/// the whole study it counts once. Trial A alone at 10 % for two seconds, then A and B at 90 %
/// for two: a mean of 50 % over 4 samples (63.3 % over 6 when each trial's copy counted).
#[test]
fn a_reading_shared_by_two_trials_counts_once_over_the_study() {
    let dir = scratch("cli_compare", "shared");
    let db = dir.join("studies.db");
    build_db(&db);
    let mut s = Storage::open(&db).unwrap();
    let shared = s
        .create_study("shared", &[StudyDirection::Maximize])
        .unwrap();
    let a = s
        .add_trial(
            shared,
            &trial(TrialState::Complete, 0, 4, Some(1.0), 1_000.0),
        )
        .unwrap();
    let b = s
        .add_trial(
            shared,
            &trial(TrialState::Complete, 2, 4, Some(1.0), 1_000.0),
        )
        .unwrap();
    let util = [10.0, 10.0, 90.0, 90.0];
    let mem = [1_000.0; 4];
    s.append_telemetry(&gpu_rows(a.trial_id, &util, &mem, 70.0))
        .unwrap();
    let mut later = gpu_rows(b.trial_id, &util, &mem, 70.0);
    later.retain(|r| r.recorded_at >= at(1, 2));
    s.append_telemetry(&later).unwrap();
    drop(s);
    let o = tradetune(&[
        "compare",
        "shared",
        "baseline",
        "--db",
        db.to_str().unwrap(),
        "--json",
    ]);
    let (stdout, stderr) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let gpu = &v["a"]["devices"][0];
    assert_eq!(gpu["mean_util_pct"], 50.0, "{gpu}");
    assert_eq!(gpu["samples"], 4, "{gpu}");
}

#[test]
fn unknown_studies_trials_and_databases_are_named() {
    let dir = scratch("cli_compare", "errors");
    let db = dir.join("studies.db");
    build_db(&db);
    let run = |a: &str, b: &str, db: &str| {
        let o = tradetune(&["compare", a, b, "--db", db]);
        assert!(!o.status.success());
        text(&o.stderr)
    };
    let d = db.to_str().unwrap();
    let e = run("baseline", "nosuch", d);
    assert!(e.contains("nosuch"), "{e}");
    let e = run("baseline#7", "experiment", d);
    assert!(e.contains("no trial #7") && e.contains("3 trials"), "{e}");
    let missing = dir.join("missing.db");
    let e = run("baseline", "experiment", missing.to_str().unwrap());
    assert!(
        e.contains("missing.db") && e.contains("does not exist"),
        "{e}"
    );
}

/// Without `--db`, `compare` reads the database every `tradetune study` command uses (the
/// user data directory's `studies.db`), not a `studies.db` in the current directory.
#[test]
fn without_db_compare_reads_the_default_study_database() {
    let dir = scratch("cli_compare", "default_db");
    let data = dir.join("data");
    let db = data.join("tradetune").join("studies.db");
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();
    build_db(&db);
    let o = common::tradetune_with(
        &["compare", "baseline", "experiment", "--json"],
        &[("XDG_DATA_HOME", data.to_str().unwrap())],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["a"]["trials"], 3, "{v}");
}
