//! The per-trial summary: what a trial did to each device, from the rows the sampler recorded.
//!
//! Stored with the trial (as Optuna user attributes, so Optuna's own tools show it, and in our
//! tables): mean and peak utilisation and memory per device, peak temperature, energy, samples
//! per second, the phase split and the throttle reasons seen.

use std::collections::BTreeMap;
use std::time::Duration;

use super::gpu::ThrottleReasons;
use super::metric::{DeviceTag, Metric};
use super::phase::PhaseSplit;
use super::sink::TelemetryRow;

/// One GPU over one trial. `None` = the probe never reported that metric.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize)]
pub struct DeviceSummary {
    pub device: String,
    pub samples: usize,
    pub mean_util_pct: Option<f64>,
    pub peak_util_pct: Option<f64>,
    pub mean_mem_used_mib: Option<f64>,
    pub peak_mem_used_mib: Option<f64>,
    pub mem_total_mib: Option<f64>,
    /// Peak device memory of the training process (NVML only).
    pub peak_process_mem_used_mib: Option<f64>,
    /// The hottest of the card's sensors (edge, junction, memory).
    pub peak_temp_c: Option<f64>,
    /// Power integrated over time by the trapezoid rule, joules.
    pub energy_j: Option<f64>,
    /// Every reason seen at least once (idle included).
    pub throttle_reasons_seen: Vec<String>,
    /// Share of throttle samples in which temperature held the clocks down.
    pub thermal_throttle_fraction: Option<f64>,
    /// Share of throttle samples in which power held the clocks down.
    pub power_throttle_fraction: Option<f64>,
}

/// The host over one trial.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize)]
pub struct HostSummary {
    pub mean_cpu_pct: Option<f64>,
    pub mean_process_cpu_pct: Option<f64>,
    pub peak_rss_mib: Option<f64>,
}

/// One trial's telemetry, condensed.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize)]
pub struct TrialSummary {
    pub trial: Option<u64>,
    pub wall_s: f64,
    /// Environment samples (env steps × envs) per second of wall time.
    pub samples_per_s: Option<f64>,
    pub phases: Option<PhaseSplit>,
    pub devices: Vec<DeviceSummary>,
    pub host: HostSummary,
}

/// What the trainer knows about a trial besides the telemetry rows.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct TrialFacts {
    pub trial: Option<u64>,
    pub wall: Duration,
    /// Environment samples collected (steps × envs).
    pub env_samples: u64,
    pub phases: Option<PhaseSplit>,
}

/// One metric of one device over a trial, condensed as its points arrive: what the summary
/// needs of a series (count, sum, peak, trapezoid energy, throttle counts) without keeping the
/// points, so a trial of any length is summarised whole.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SeriesTotals {
    pub count: usize,
    pub sum: f64,
    pub peak: Option<f64>,
    /// The trapezoid rule over (seconds, value) so far; `None` below two points.
    pub integral: Option<f64>,
    /// The newest point (seconds, value), the next trapezoid's left side.
    pub last: Option<(f64, f64)>,
    /// For the throttle mask: every reason seen, and the points that held a thermal or a
    /// power reason.
    pub mask_seen: u32,
    pub thermal: usize,
    pub power: usize,
}

impl SeriesTotals {
    /// Adds the point `(t, v)`; points come in time order.
    pub fn push(&mut self, t: f64, v: f64) {
        self.count += 1;
        self.sum += v;
        self.peak = Some(self.peak.map_or(v, |p| p.max(v)));
        if let Some((t0, v0)) = self.last {
            *self.integral.get_or_insert(0.0) += 0.5 * (v0 + v) * (t - t0);
        }
        self.last = Some((t, v));
        let mask = ThrottleReasons(v as u32);
        self.mask_seen |= mask.0;
        self.thermal += usize::from(mask.is_thermal());
        self.power += usize::from(mask.is_power());
    }

    pub fn mean(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum / self.count as f64)
    }
}

/// Every series of a trial, condensed: per (device, metric), in time order of arrival.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SeriesSet {
    pub series: BTreeMap<(DeviceTag, Metric), SeriesTotals>,
}

impl SeriesSet {
    pub fn push(&mut self, device: DeviceTag, metric: Metric, t: f64, v: f64) {
        self.series.entry((device, metric)).or_default().push(t, v);
    }

    fn get(&self, d: DeviceTag, m: Metric) -> Option<&SeriesTotals> {
        self.series.get(&(d, m))
    }

    fn mean(&self, d: DeviceTag, m: Metric) -> Option<f64> {
        self.get(d, m).and_then(SeriesTotals::mean)
    }

    fn peak(&self, d: DeviceTag, m: Metric) -> Option<f64> {
        self.get(d, m).and_then(|s| s.peak)
    }
}

impl TrialSummary {
    /// Condenses `rows` (those of `facts.trial` when it is set, else all of them).
    pub fn from_rows(rows: &[TelemetryRow], facts: TrialFacts) -> TrialSummary {
        // (device, metric) → (seconds, value) in time order.
        let mut series: BTreeMap<(DeviceTag, Metric), Vec<(f64, f64)>> = BTreeMap::new();
        for r in rows {
            if facts.trial.is_some() && r.trial != facts.trial {
                continue;
            }
            let t = r.timestamp.timestamp_micros() as f64 / 1e6;
            series
                .entry((r.device, r.metric))
                .or_default()
                .push((t, r.value));
        }
        let mut set = SeriesSet::default();
        for ((d, m), mut points) in series {
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            for (t, v) in points {
                set.push(d, m, t, v);
            }
        }
        TrialSummary::from_series(&set, facts)
    }

    /// Condenses series already condensed as their points arrived (the sampler's per-trial
    /// totals).
    pub fn from_series(set: &SeriesSet, facts: TrialFacts) -> TrialSummary {
        let mut gpus: Vec<u32> = set
            .series
            .keys()
            .filter_map(|(d, _)| match d {
                DeviceTag::Gpu(i) => Some(*i),
                DeviceTag::Host => None,
            })
            .collect();
        gpus.dedup();
        let devices = gpus
            .into_iter()
            .map(|i| {
                let d = DeviceTag::Gpu(i);
                let peak_temp_c = [Metric::TempC, Metric::TempJunctionC, Metric::TempMemC]
                    .into_iter()
                    .filter_map(|m| set.peak(d, m))
                    .reduce(f64::max);
                let throttle = set.get(d, Metric::ThrottleMask).filter(|t| t.count > 0);
                let seen = ThrottleReasons(throttle.map_or(0, |t| t.mask_seen));
                let share =
                    |n: fn(&SeriesTotals) -> usize| throttle.map(|t| n(t) as f64 / t.count as f64);
                let samples = set
                    .series
                    .iter()
                    .filter(|((dev, _), _)| *dev == d)
                    .map(|(_, s)| s.count)
                    .max()
                    .unwrap_or(0);
                DeviceSummary {
                    device: d.to_string(),
                    samples,
                    mean_util_pct: set.mean(d, Metric::UtilPct),
                    peak_util_pct: set.peak(d, Metric::UtilPct),
                    mean_mem_used_mib: set.mean(d, Metric::MemUsedMib),
                    peak_mem_used_mib: set.peak(d, Metric::MemUsedMib),
                    mem_total_mib: set.peak(d, Metric::MemTotalMib),
                    peak_process_mem_used_mib: set.peak(d, Metric::ProcessMemUsedMib),
                    peak_temp_c,
                    energy_j: set.get(d, Metric::PowerW).and_then(|s| s.integral),
                    throttle_reasons_seen: seen.names().into_iter().map(String::from).collect(),
                    thermal_throttle_fraction: share(|t| t.thermal),
                    power_throttle_fraction: share(|t| t.power),
                }
            })
            .collect();
        let wall_s = facts.wall.as_secs_f64();
        TrialSummary {
            trial: facts.trial,
            wall_s,
            samples_per_s: (wall_s > 0.0).then(|| facts.env_samples as f64 / wall_s),
            phases: facts.phases,
            devices,
            host: HostSummary {
                mean_cpu_pct: set.mean(DeviceTag::Host, Metric::CpuPct),
                mean_process_cpu_pct: set.mean(DeviceTag::Host, Metric::ProcessCpuPct),
                peak_rss_mib: set.peak(DeviceTag::Host, Metric::RssMib),
            },
        }
    }

    /// Flat key → value pairs for Optuna trial user attributes (`gpu0_mean_util_pct`,
    /// `phase_env_s`, …); metrics that were never measured are left out.
    pub fn user_attrs(&self) -> Vec<(String, serde_json::Value)> {
        use serde_json::Value;
        let mut out: Vec<(String, Value)> = vec![("wall_s".into(), self.wall_s.into())];
        let mut num = |k: String, v: Option<f64>| {
            if let Some(v) = v.filter(|v| v.is_finite()) {
                out.push((k, v.into()));
            }
        };
        num("samples_per_s".into(), self.samples_per_s);
        // End to end above; here without the compile phase, where there was one: the samples
        // over the timed phases less compiling. Not the wall time less compiling: the wall
        // holds the trial's build, final evaluation and checkpoint, which the trainer's own
        // rate (`train_samples_per_s`) does not, so that "steady" could come out below it.
        if let (Some(sps), Some(p)) = (self.samples_per_s, &self.phases)
            && p.compile_s > 0.0
            && p.steady_s() > 0.0
        {
            let env_samples = sps * self.wall_s;
            num(
                "steady_samples_per_s".into(),
                Some(env_samples / p.steady_s()),
            );
        }
        if let Some(p) = &self.phases {
            for phase in super::phase::Phase::ALL {
                num(format!("phase_{}_s", phase.name()), Some(p.get(phase)));
            }
        }
        for d in &self.devices {
            let k = |name: &str| format!("{}_{name}", d.device);
            num(k("mean_util_pct"), d.mean_util_pct);
            num(k("peak_util_pct"), d.peak_util_pct);
            num(k("mean_mem_used_mib"), d.mean_mem_used_mib);
            num(k("peak_mem_used_mib"), d.peak_mem_used_mib);
            num(k("peak_process_mem_used_mib"), d.peak_process_mem_used_mib);
            num(k("peak_temp_c"), d.peak_temp_c);
            num(k("energy_j"), d.energy_j);
            num(k("thermal_throttle_fraction"), d.thermal_throttle_fraction);
            num(k("power_throttle_fraction"), d.power_throttle_fraction);
        }
        num("host_mean_cpu_pct".into(), self.host.mean_cpu_pct);
        num("host_peak_rss_mib".into(), self.host.peak_rss_mib);
        for d in &self.devices {
            if !d.throttle_reasons_seen.is_empty() {
                out.push((
                    format!("{}_throttle_reasons", d.device),
                    d.throttle_reasons_seen.clone().into(),
                ));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use chrono::{TimeZone, Utc};

    use super::*;

    fn row(
        sec: i64,
        device: DeviceTag,
        trial: Option<u64>,
        metric: Metric,
        value: f64,
    ) -> TelemetryRow {
        TelemetryRow {
            timestamp: Utc.timestamp_opt(1_700_000_000 + sec, 0).unwrap(),
            device,
            trial,
            metric,
            value,
        }
    }

    #[test]
    fn means_peaks_energy_and_throttle_shares() {
        let g = DeviceTag::Gpu(0);
        let mut rows = Vec::new();
        // 200 W for 10 s then 300 W: trapezoid over 0..=20 s.
        for s in 0..=20 {
            let w = if s <= 10 { 200.0 } else { 300.0 };
            rows.push(row(s, g, Some(3), Metric::PowerW, w));
            rows.push(row(
                s,
                g,
                Some(3),
                Metric::UtilPct,
                if s % 2 == 0 { 90.0 } else { 70.0 },
            ));
            let mask = if s < 5 {
                ThrottleReasons::SW_THERMAL
            } else {
                0
            };
            rows.push(row(s, g, Some(3), Metric::ThrottleMask, f64::from(mask)));
        }
        rows.push(row(3, g, Some(3), Metric::TempJunctionC, 88.0));
        rows.push(row(3, g, Some(3), Metric::TempC, 70.0));
        // Another trial's rows are ignored.
        rows.push(row(4, g, Some(4), Metric::UtilPct, 0.0));
        rows.push(row(4, DeviceTag::Host, Some(3), Metric::RssMib, 1234.0));
        let s = TrialSummary::from_rows(
            &rows,
            TrialFacts {
                trial: Some(3),
                wall: Duration::from_secs(20),
                env_samples: 40_000,
                phases: None,
            },
        );
        let d = &s.devices[0];
        assert_eq!(d.samples, 21);
        assert!((d.mean_util_pct.unwrap() - (11.0 * 90.0 + 10.0 * 70.0) / 21.0).abs() < 1e-9);
        assert_eq!(d.peak_util_pct, Some(90.0));
        // 10 s at 200 W + 1 s ramp at 250 W + 9 s at 300 W.
        assert!((d.energy_j.unwrap() - (2000.0 + 250.0 + 2700.0)).abs() < 1e-9);
        assert_eq!(d.peak_temp_c, Some(88.0));
        assert_eq!(d.throttle_reasons_seen, vec!["thermal (software)"]);
        assert!((d.thermal_throttle_fraction.unwrap() - 5.0 / 21.0).abs() < 1e-12);
        assert_eq!(d.power_throttle_fraction, Some(0.0));
        assert_eq!(d.mean_mem_used_mib, None);
        assert_eq!(s.samples_per_s, Some(2000.0));
        assert_eq!(s.host.peak_rss_mib, Some(1234.0));
        let attrs = s.user_attrs();
        let get = |k: &str| attrs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        assert_eq!(get("gpu0_peak_temp_c"), Some(88.0.into()));
        assert_eq!(get("gpu0_mean_mem_used_mib"), None);
        assert!(get("gpu0_throttle_reasons").is_some());
    }

    #[test]
    fn the_steady_rate_is_the_samples_over_the_timed_phases_without_compiling() {
        // 20 s of trial wall, 10 s of it timed phases (the trainer's), 2 s of them compiling:
        // the rest was the build, the final evaluation and the checkpoint.
        let phases = PhaseSplit {
            env_s: 3.0,
            inference_s: 1.0,
            update_s: 3.0,
            eval_s: 1.0,
            compile_s: 2.0,
        };
        let s = TrialSummary::from_rows(
            &[],
            TrialFacts {
                trial: None,
                wall: Duration::from_secs(20),
                env_samples: 40_000,
                phases: Some(phases),
            },
        );
        let attrs = s.user_attrs();
        let get = |k: &str| {
            attrs
                .iter()
                .find(|(n, _)| n == k)
                .and_then(|(_, v)| v.as_f64())
        };
        assert_eq!(get("samples_per_s"), Some(2000.0));
        // 40 000 samples over the 8 s of phases that were not compiling; never below the
        // trainer's 4 000 samples/s over its 10 s.
        assert_eq!(get("steady_samples_per_s"), Some(5000.0));
        // Nothing compiled: no steady rate beside the end-to-end one.
        let s = TrialSummary::from_rows(
            &[],
            TrialFacts {
                trial: None,
                wall: Duration::from_secs(20),
                env_samples: 40_000,
                phases: Some(PhaseSplit {
                    compile_s: 0.0,
                    ..phases
                }),
            },
        );
        assert!(
            !s.user_attrs()
                .iter()
                .any(|(k, _)| k == "steady_samples_per_s")
        );
    }

    #[test]
    fn no_rows_gives_an_empty_summary() {
        let s = TrialSummary::from_rows(&[], TrialFacts::default());
        assert!(s.devices.is_empty());
        assert_eq!(s.samples_per_s, None);
        assert_eq!(s.host, HostSummary::default());
    }
}
