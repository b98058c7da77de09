//! A trial's telemetry summary, from the sampler's totals of the trial (its readings from its
//! first sample to its last, condensed as they arrived).
//!
//! Its wall time, samples/s and phase split are the trainer's own accounting, not sampled: a
//! study run without telemetry (`--telemetry-interval 0`) stores them too, with the verdicts the
//! phases alone can give (a compile phase, an env-bound split), and no device figures.
//!
//! The totals are read rather than the live-view ring buffers, which keep only their last 3600
//! points (an hour at 1 s): a longer trial's energy, means and peaks then covered its end
//! alone. With several workers on one machine the window of a trial overlaps others', so
//! device figures describe the device while the trial ran, not the trial alone; and the
//! process's CPU use is its own only where no other trial ran in the process meanwhile.

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
/// Without a sampler (telemetry off) the summary has the trial's own facts only. `trial` is
/// the id the trial was begun with in the sampler: its totals there cover the whole trial.
#[allow(clippy::too_many_arguments)]
pub(super) fn summarise(
    sampler: Option<&SamplerHandle>,
    trial: u64,
    window: (DateTime<Utc>, DateTime<Utc>),
    device: Option<DeviceTag>,
    wall: Duration,
    env_samples: u64,
    phases: Option<PhaseSplit>,
    shape: TrialShape,
) -> Vec<(String, JsonValue)> {
    let facts = TrialFacts {
        trial: None,
        wall,
        env_samples,
        phases,
    };
    // The trial's totals, kept by the sampler from its first sample to its last.
    let totals = sampler.and_then(|s| s.take_trial_totals(trial));
    let summary = match &totals {
        Some(t) => TrialSummary::from_series(&t.series, facts),
        None => TrialSummary::from_rows(&ring_rows(sampler, window, device), facts),
    };
    // The process's CPU use stands for the thread feeding the trial's GPU only where no other
    // trial ran in the process meanwhile (CPU workers, other cards' trials): their threads
    // count in it too. Unknown without the trial's totals.
    let alone = totals.as_ref().is_some_and(|t| t.others.is_empty());
    finish(summary, device, shape, alone)
}

/// The trial's rows from the live-view rings over `window`, for a trial the sampler kept no
/// totals of (one not begun with `begin_trial`): the rings hold only their last points.
fn ring_rows(
    sampler: Option<&SamplerHandle>,
    window: (DateTime<Utc>, DateTime<Utc>),
    device: Option<DeviceTag>,
) -> Vec<TelemetryRow> {
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
    rows
}

/// The user attributes and verdicts of `summary`; `alone`: no other trial ran in the process
/// while this one did.
fn finish(
    summary: TrialSummary,
    device: Option<DeviceTag>,
    shape: TrialShape,
    alone: bool,
) -> Vec<(String, JsonValue)> {
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
        process_cpu_pct: summary.host.mean_process_cpu_pct.filter(|_| alone),
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

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use tradetune_telemetry::{
        DeviceReading, GpuWork, Metric, SamplerConfig, SamplerCore, Source, SourceReading,
    };

    use super::*;

    /// gpu0 at 100 W and 30 % busy, the process at 300 % of a core.
    struct Steady;

    impl Source for Steady {
        fn name(&self) -> String {
            "steady".into()
        }
        fn read(&mut self) -> SourceReading {
            SourceReading {
                readings: vec![
                    DeviceReading {
                        device: DeviceTag::Gpu(0),
                        values: vec![(Metric::PowerW, 100.0), (Metric::UtilPct, 30.0)],
                    },
                    DeviceReading {
                        device: DeviceTag::Host,
                        values: vec![(Metric::ProcessCpuPct, 300.0)],
                    },
                ],
                problems: vec![],
                processes: vec![],
            }
        }
    }

    fn core(ring_capacity: usize) -> SamplerCore {
        SamplerCore::new(
            SamplerConfig {
                ring_capacity,
                ..SamplerConfig::default()
            },
            vec![Box::new(Steady)],
            None,
        )
        .expect("sampler")
    }

    fn at(s: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_700_000_000 + s, 0)
            .single()
            .expect("a valid time")
    }

    /// `ticks` ticks one second apart from `at(0)`.
    fn drive(core: &mut SamplerCore, ticks: i64) {
        for s in 0..ticks {
            core.tick(at(s), Instant::now() + Duration::from_secs(10));
        }
    }

    fn get(attrs: &[(String, JsonValue)], key: &str) -> Option<JsonValue> {
        attrs.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone())
    }

    fn gpu_shape() -> TrialShape {
        TrialShape {
            gpu_work: Some(GpuWork::default()),
            trials_on_device: 1,
            ..TrialShape::default()
        }
    }

    /// A trial longer than the live-view ring (30 ticks, a ring of 10) is summarised whole:
    /// 29 s at 100 W is 2900 J, where the ring's last 10 points give 900.
    #[test]
    fn a_trial_longer_than_the_ring_is_summarised_whole() {
        let mut core = core(10);
        let handle = core.handle();
        handle.begin_trial(7, Some(DeviceTag::Gpu(0)));
        drive(&mut core, 30);
        handle.end_trial(7);
        assert_eq!(
            handle.series(DeviceTag::Gpu(0), Metric::PowerW, 100).len(),
            10
        );
        let attrs = summarise(
            Some(&handle),
            7,
            (at(-1), at(31)),
            Some(DeviceTag::Gpu(0)),
            Duration::from_secs(30),
            0,
            None,
            TrialShape::default(),
        );
        assert_eq!(get(&attrs, "gpu0_energy_j"), Some(JsonValue::from(2900.0)));
        assert_eq!(
            get(&attrs, "gpu0_mean_util_pct"),
            Some(JsonValue::from(30.0))
        );
        // Taken once: the totals are the trial's, not kept for another.
        assert!(handle.take_trial_totals(7).is_none());
    }

    /// Most of the timed phases in the update, the environment a tenth.
    fn update_bound() -> Option<PhaseSplit> {
        Some(PhaseSplit {
            env_s: 1.0,
            inference_s: 1.0,
            update_s: 8.0,
            eval_s: 0.0,
            compile_s: 0.0,
        })
    }

    fn has_dispatch_bound(attrs: &[(String, JsonValue)]) -> bool {
        attrs
            .iter()
            .filter(|(k, _)| k == "verdict" || k == "verdicts")
            .any(|(_, v)| {
                serde_json::Value::from(v)
                    .to_string()
                    .contains("dispatch-bound")
            })
    }

    /// The summary of trial 7, 5 s on gpu0 within the first 6 s, update-bound.
    fn gpu_trial_7(handle: &SamplerHandle) -> Vec<(String, JsonValue)> {
        summarise(
            Some(handle),
            7,
            (at(-1), at(6)),
            Some(DeviceTag::Gpu(0)),
            Duration::from_secs(5),
            0,
            update_bound(),
            gpu_shape(),
        )
    }

    /// The process at 300 % of a core beside a GPU 30 % busy is dispatch-bound only where the
    /// trial ran alone in the process: with a CPU trial in it meanwhile, the CPU was (also)
    /// that trial's.
    #[test]
    fn a_busy_process_is_not_the_feeding_thread_when_another_trial_ran_in_it() {
        let mut core = core(3600);
        let handle = core.handle();
        handle.begin_trial(7, Some(DeviceTag::Gpu(0)));
        drive(&mut core, 5);
        handle.end_trial(7);
        let alone = gpu_trial_7(&handle);
        assert!(has_dispatch_bound(&alone), "{alone:?}");

        let mut core = self::core(3600);
        let handle = core.handle();
        handle.begin_trial(7, Some(DeviceTag::Gpu(0)));
        handle.begin_trial(8, Some(DeviceTag::Host));
        drive(&mut core, 5);
        handle.end_trial(8);
        handle.end_trial(7);
        let shared = gpu_trial_7(&handle);
        assert!(!has_dispatch_bound(&shared), "{shared:?}");
        // Its figures are still its own trial's.
        assert_eq!(get(&shared, "gpu0_energy_j"), Some(JsonValue::from(400.0)));
    }
}
