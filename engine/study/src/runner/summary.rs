//! A trial's telemetry summary, from the sampler's ring buffers over the trial's time window.
//!
//! Its wall time, samples/s and phase split are the trainer's own accounting, not sampled: a
//! study run without telemetry (`--telemetry-interval 0`) stores them too, with the verdicts the
//! phases alone can give (a compile phase, an env-bound split), and no device figures.
//!
//! The ring buffers are read rather than the database rows because the sampler hands rows to
//! the database in batches (every 10 ticks by default): at the moment a trial ends its last
//! rows may not be stored yet, while the rings hold every tick up to now. With several workers
//! on one machine the window of a trial overlaps others', so device figures describe the device
//! while the trial ran, not the trial alone.

use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};

use tradetune_storage::JsonValue;
use tradetune_telemetry::verdict::{CpuSharing, VerdictInput, verdicts};
use tradetune_telemetry::{
    DeviceTag, PhaseSplit, SamplerHandle, TelemetryRow, TrialFacts, TrialSummary,
};

/// Every point of a ring (a ring never holds more than its capacity).
const ALL_POINTS: usize = usize::MAX;

/// What the verdicts need to know of a trial besides its telemetry.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct TrialShape {
    /// The environment stepped on the device (the verdicts then do not blame host env
    /// stepping).
    pub on_device_env: bool,
    /// The trial's minibatch size, where its configuration has one (`ppo.batch_size`).
    pub batch_size: Option<usize>,
    /// On the CPU device: the workers sharing the machine's cores.
    pub cpu_sharing: Option<CpuSharing>,
    /// On a GPU: what the trial compiled and launched.
    pub gpu_work: Option<tradetune_telemetry::GpuWork>,
    /// On a GPU: the trials that trained on it at once, this one included.
    pub trials_on_device: usize,
    /// The memory this trial's process may use on its device, MiB (its budget's per-process
    /// ceiling), where it has a budget: what "memory budget reached" is measured against,
    /// rather than the whole card.
    pub mem_budget_mib: Option<f64>,
}

/// The summary's user attributes for a trial that ran from `start` to `end` (`wall` of work).
/// The window includes the samples taken as the trial began and ended.
///
/// `device` is the card the trial ran on (the host for the CPU): only its series and the
/// host's are summarised, so a CPU trial on a machine with an idle GPU is not told the GPU was
/// idle. `None` (a card the probes cannot tell) keeps every device. `on_device_env` says the
/// environment stepped on the device (the verdicts then do not blame host env stepping).
/// Without a sampler (telemetry off) the summary has the trial's own facts only.
pub(super) fn summarise(
    sampler: Option<&SamplerHandle>,
    window: (DateTime<Utc>, DateTime<Utc>),
    device: Option<DeviceTag>,
    wall: Duration,
    env_samples: u64,
    phases: Option<PhaseSplit>,
    shape: TrialShape,
) -> Vec<(String, JsonValue)> {
    let (start, end) = window;
    let from = start.timestamp_millis() as f64 / 1000.0;
    let to = end.timestamp_millis() as f64 / 1000.0;
    let mut rows = Vec::new();
    let keep = |d: DeviceTag| match device {
        None => true,
        Some(mine) => d == mine || d == DeviceTag::Host,
    };
    // Without a sampler there is nothing sampled: the summary has the trial's own facts.
    for (device, metric) in sampler.iter().flat_map(|s| s.series_keys()) {
        if !keep(device) {
            continue;
        }
        for p in sampler
            .iter()
            .flat_map(|s| s.series(device, metric, ALL_POINTS))
        {
            if p.t < from || p.t > to {
                continue;
            }
            let Some(timestamp) = Utc
                .timestamp_millis_opt((p.t * 1000.0).round() as i64)
                .single()
            else {
                continue;
            };
            rows.push(TelemetryRow {
                timestamp,
                device,
                trial: None,
                metric,
                value: p.v,
            });
        }
    }
    let summary = TrialSummary::from_rows(
        &rows,
        TrialFacts {
            trial: None,
            wall,
            env_samples,
            phases,
        },
    );
    let mut attrs: Vec<(String, JsonValue)> = summary
        .user_attrs()
        .into_iter()
        .map(|(k, v)| (k, JsonValue::from(v)))
        .collect();
    // Every update compiled: the compile phase holds none of their compiling, so the rate
    // without it is no steady rate.
    if shape.gpu_work.is_some_and(|w| w.compile_not_apart) {
        attrs.retain(|(k, _)| k != "steady_samples_per_s");
    }
    // The bottleneck verdict with its suggestion, most pressing first, so Optuna's tools and
    // the desktop app show what limited this trial.
    // The trial's budget is its device's: where the probes cannot tell which card that is,
    // the only GPU summarised, if there is one.
    let budgets: Vec<(String, f64)> = match (device, shape.mem_budget_mib) {
        (_, None) => Vec::new(),
        (Some(d), Some(mib)) => vec![(d.to_string(), mib)],
        (None, Some(mib)) => {
            let mut gpus = summary
                .devices
                .iter()
                .filter(|d| d.device.starts_with("gpu"));
            match (gpus.next(), gpus.next()) {
                (Some(d), None) => vec![(d.device.clone(), mib)],
                _ => Vec::new(),
            }
        }
    };
    let input = VerdictInput {
        batch_size: shape.batch_size,
        cpu_sharing: shape.cpu_sharing,
        gpu_work: shape.gpu_work,
        trials_on_device: shape.trials_on_device,
        ..VerdictInput::from_summary(&summary, &budgets, shape.on_device_env)
    };
    let found = verdicts(&input);
    if let Some(first) = found.first() {
        attrs.push(("verdict".into(), JsonValue::from(first.message.as_str())));
    }
    if found.len() > 1 {
        let all: Vec<serde_json::Value> = found
            .iter()
            .map(|v| serde_json::Value::from(v.message.as_str()))
            .collect();
        attrs.push((
            "verdicts".into(),
            JsonValue::from(serde_json::Value::Array(all)),
        ));
    }
    attrs
}
