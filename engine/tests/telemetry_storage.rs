//! Telemetry rows land in the study database's `tradetune_telemetry` table: from the real
//! sampler thread with the real host probe, and batch by batch (a failed batch stores nothing).

use std::time::Duration;

use chrono::{TimeZone, Utc};
use tradetune_engine::storage::{Storage, StudyDirection};
use tradetune_engine::telemetry::{
    DeviceTag, HostSource, Metric, Sampler, SamplerConfig, SamplerCore, Source, StorageSink,
    SysinfoHostProbe, TelemetryRow, TelemetrySink,
};

fn row(trial: Option<u64>, metric: Metric, value: f64) -> TelemetryRow {
    TelemetryRow {
        timestamp: Utc.with_ymd_and_hms(2026, 11, 23, 12, 0, 0).unwrap(),
        device: DeviceTag::Gpu(1),
        trial,
        metric,
        value,
    }
}

#[test]
fn batches_are_stored_per_trial_and_a_bad_batch_stores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Storage::open(dir.path().join("study.db")).unwrap();
    let study = s.create_study("gpu", &[StudyDirection::Maximize]).unwrap();
    let trial = s.create_trial(study).unwrap().trial_id;
    let mut sink = StorageSink::new(s);
    let t = Some(trial as u64);
    sink.write_batch(&[
        row(t, Metric::UtilPct, 97.0),
        row(t, Metric::TempC, 71.5),
        row(None, Metric::UtilPct, 3.0),
    ])
    .unwrap();
    // Trial 999 does not exist: the whole batch is refused, the good row in it too.
    let err = sink
        .write_batch(&[
            row(t, Metric::UtilPct, 50.0),
            row(Some(999), Metric::UtilPct, 1.0),
        ])
        .unwrap_err();
    assert!(err.to_string().contains("999"), "{err}");

    let of_trial = sink.storage().telemetry(Some(trial)).unwrap();
    let got: Vec<(&str, &str, f64)> = of_trial
        .iter()
        .map(|r| (r.source.as_str(), r.metric.as_str(), r.value))
        .collect();
    assert_eq!(got, [("gpu1", "util_pct", 97.0), ("gpu1", "temp_c", 71.5)]);
    assert_eq!(
        of_trial[0].recorded_at,
        Utc.with_ymd_and_hms(2026, 11, 23, 12, 0, 0)
            .unwrap()
            .naive_utc()
    );
    let unassigned = sink.storage().telemetry(None).unwrap();
    assert_eq!(unassigned.len(), 1);
    assert_eq!(unassigned[0].value, 3.0);
}

#[test]
fn the_sampler_thread_writes_host_rows_into_the_study_database() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("study.db");
    let mut s = Storage::open(&path).unwrap();
    let study = s.create_study("host", &[StudyDirection::Maximize]).unwrap();
    let trial = s.create_trial(study).unwrap().trial_id;
    let sources: Vec<Box<dyn Source>> = vec![Box::new(HostSource::new(Box::new(
        SysinfoHostProbe::new(None).unwrap(),
    )))];
    let cfg = SamplerConfig::with_interval(Duration::from_millis(100)).unwrap();
    let mut core = SamplerCore::new(cfg, sources, Some(Box::new(StorageSink::new(s)))).unwrap();
    let rx = core.subscribe();
    let sampler = Sampler::start(core).unwrap();
    sampler.handle().set_trial(Some(trial as u64));
    // Wait for ticks rather than for a time (a sampler thread that ended closes the channel
    // and fails this at once); stopping flushes the partial batch.
    for _ in 0..2 {
        rx.recv().unwrap();
    }
    let stats = sampler.stop();
    assert!(stats.rows_written > 0, "{stats:?}");

    // A second connection sees what the sampler thread committed.
    let reader = Storage::open_read_only(&path).unwrap();
    let all: usize =
        reader.telemetry(Some(trial)).unwrap().len() + reader.telemetry(None).unwrap().len();
    assert_eq!(all as u64, stats.rows_written);
    assert!(
        reader
            .telemetry(None)
            .unwrap()
            .iter()
            .chain(&reader.telemetry(Some(trial)).unwrap())
            .all(|r| r.source == "host" && r.value.is_finite())
    );
}

#[test]
fn a_database_optuna_wrote_has_no_telemetry_or_curves_rather_than_an_error() {
    let src =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/testdata/optuna-reference.db");
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("optuna.db");
    std::fs::copy(&src, &db).unwrap();
    let storage = tradetune_engine::storage::Storage::open_read_only(&db).unwrap();
    assert_eq!(storage.telemetry(None).unwrap(), vec![]);
    assert_eq!(storage.telemetry(Some(1)).unwrap(), vec![]);
    assert_eq!(storage.learning_curve(1).unwrap(), vec![]);
}
