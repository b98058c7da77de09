//! Trials' stored telemetry as one wide CSV (`tradetune study export --telemetry`, the app's
//! Studies tab).

use std::collections::BTreeMap;
use std::path::Path;

use super::FrontError;
use crate::storage::{Storage, TrialRecord};
use crate::telemetry::{DeviceReading, DeviceTag, Metric, Tick, WideLayout};

/// What an export wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exported {
    /// Rows written (sample times × trials).
    pub rows: usize,
    /// Stored samples of sources or metrics this build does not know, left out.
    pub skipped: usize,
}

/// One stored telemetry value: device, metric, value.
type Sample = (DeviceTag, Metric, f64);

/// One row per sample time and trial, a column per device and metric (units in the names:
/// `gpu0_util_pct`, `gpu0_mem_used_mib`, `cpu_pct`, `rss_mib`), and the trial's number. At
/// least `gpu0` columns are written, empty on a machine without a GPU, so every export of a
/// study has the same leading columns.
pub fn export_telemetry(
    storage: &Storage,
    trials: &[TrialRecord],
    path: &Path,
) -> Result<Exported, FrontError> {
    let mut ticks: BTreeMap<(chrono::NaiveDateTime, i64), Vec<Sample>> = BTreeMap::new();
    let mut gpus = 1u32;
    let mut cores = 0usize;
    let mut skipped = 0usize;
    for t in trials {
        for s in storage.telemetry(Some(t.trial_id))? {
            let (Ok(device), Some(metric)) =
                (s.source.parse::<DeviceTag>(), Metric::from_name(&s.metric))
            else {
                skipped += 1;
                continue;
            };
            if let DeviceTag::Gpu(i) = device {
                gpus = gpus.max(i + 1);
            }
            if let Metric::CoreCpuPct(c) = metric {
                cores = cores.max(c as usize + 1);
            }
            ticks
                .entry((s.recorded_at, t.number))
                .or_default()
                .push((device, metric, s.value));
        }
    }
    let layout = WideLayout::new(gpus, cores);
    let fail = |e: csv::Error| FrontError::file(path, format!("cannot write it: {e}"));
    let mut w = csv::Writer::from_path(path).map_err(fail)?;
    w.write_record(layout.header()).map_err(fail)?;
    for (seq, ((at, number), values)) in ticks.iter().enumerate() {
        let mut readings: Vec<DeviceReading> = Vec::new();
        for (device, metric, value) in values {
            match readings.iter_mut().find(|r| r.device == *device) {
                Some(r) => r.values.push((*metric, *value)),
                None => readings.push(DeviceReading {
                    device: *device,
                    values: vec![(*metric, *value)],
                }),
            }
        }
        let tick = Tick {
            seq: seq as u64 + 1,
            timestamp: at.and_utc(),
            trial: Some(*number as u64),
            running: Vec::new(),
            readings,
            skipped: Vec::new(),
            problems: Vec::new(),
        };
        w.write_record(layout.record(&tick)).map_err(fail)?;
    }
    w.flush()
        .map_err(|e| FrontError::file(path, format!("cannot write it: {e}")))?;
    Ok(Exported {
        rows: ticks.len(),
        skipped,
    })
}
