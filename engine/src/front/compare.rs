//! Two runs side by side from the study database (see `tradetune compare` and the app's
//! Compare tab): whole studies or single trials, with their telemetry.

use std::collections::BTreeSet;

use chrono::NaiveDateTime;
use serde::Serialize;

use super::FrontError;
use crate::storage::{Storage, StudyDirection, TrialRecord, TrialState};
use crate::telemetry::{DeviceSummary, DeviceTag, Metric, TelemetryRow, TrialFacts, TrialSummary};

/// One side of the comparison.
#[derive(Debug, Clone, Serialize)]
pub struct Side {
    /// As given on the command line.
    pub name: String,
    pub study: String,
    /// Trial number when the side is one trial.
    pub trial: Option<i64>,
    pub trials: usize,
    pub complete: usize,
    pub failed: usize,
    pub pruned: usize,
    pub running: usize,
    /// First start to last completion, seconds.
    pub duration_s: Option<f64>,
    /// Mean of the trials' samples/s.
    pub samples_per_s: Option<f64>,
    /// The trial's value, or the study's best complete value.
    pub objective: Option<f64>,
    /// Per GPU, over the side's telemetry.
    pub devices: Vec<DeviceSummary>,
    /// Hottest sensor of any device.
    pub peak_temp_c: Option<f64>,
    /// (trial number, value) of each COMPLETE trial with a finite value, for plots.
    pub values: Vec<(i64, f64)>,
}

/// `NAME#N` → (NAME, Some(N)); anything else is a study name.
fn parse_target(s: &str) -> (&str, Option<i64>) {
    match s.rsplit_once('#') {
        Some((study, n)) if !study.is_empty() => match n.parse() {
            Ok(n) => (study, Some(n)),
            Err(_) => (s, None),
        },
        _ => (s, None),
    }
}

fn seconds(a: NaiveDateTime, b: NaiveDateTime) -> f64 {
    (b - a).num_milliseconds() as f64 / 1e3
}

/// The stored telemetry of `trial_id` as sampler rows (rows of sources or metrics this build
/// does not know are skipped).
fn telemetry_rows(storage: &Storage, trial_id: i64) -> Result<Vec<TelemetryRow>, FrontError> {
    Ok(storage
        .telemetry(Some(trial_id))?
        .into_iter()
        .filter_map(|s| {
            Some(TelemetryRow {
                timestamp: s.recorded_at.and_utc(),
                device: s.source.parse::<DeviceTag>().ok()?,
                trial: u64::try_from(trial_id).ok(),
                metric: Metric::from_name(&s.metric)?,
                value: s.value,
            })
        })
        .collect())
}

/// Reads one side from `storage`.
pub fn load_side(storage: &Storage, target: &str) -> Result<Side, FrontError> {
    let (study_name, number) = parse_target(target);
    let study = storage
        .study(study_name)
        .map_err(|e| FrontError::Invalid(format!("{target}: {e}")))?;
    let all = storage.trials(study.study_id)?;
    let trials: Vec<&TrialRecord> = match number {
        Some(n) => {
            let t = all.iter().find(|t| t.number == n).ok_or_else(|| {
                FrontError::Invalid(format!(
                    "{target}: study '{study_name}' has no trial #{n} (it has {} trials, numbered from 0)",
                    all.len()
                ))
            })?;
            vec![t]
        }
        None => all.iter().collect(),
    };
    let count = |s: TrialState| trials.iter().filter(|t| t.state == s).count();
    let start = trials.iter().filter_map(|t| t.datetime_start).min();
    let end = trials.iter().filter_map(|t| t.datetime_complete).max();
    let rates: Vec<f64> = trials
        .iter()
        .filter_map(|t| t.user_attr("samples_per_s").and_then(|v| v.as_f64()))
        .filter(|v| v.is_finite())
        .collect();
    let maximize = study.directions.first() != Some(&StudyDirection::Minimize);
    let objective = match number {
        Some(_) => trials.first().and_then(|t| t.value()),
        None => trials
            .iter()
            .filter(|t| t.state == TrialState::Complete)
            .filter_map(|t| t.value())
            .filter(|v| !v.is_nan())
            .reduce(|a, b| if (b > a) == maximize { b } else { a }),
    };
    let mut rows = Vec::new();
    for t in &trials {
        rows.extend(telemetry_rows(storage, t.trial_id)?);
    }
    // A reading taken while trials shared its device (a card, the host) is stored once for each
    // of them: over a whole study it is one reading, not one a trial (the shared stretches
    // would outweigh the rest in the means and the sample counts).
    rows.sort_by(|a, b| {
        (a.timestamp, a.device, a.metric)
            .cmp(&(b.timestamp, b.device, b.metric))
            .then(a.value.total_cmp(&b.value))
    });
    rows.dedup_by(|a, b| {
        (a.timestamp, a.device, a.metric, a.value.to_bits())
            == (b.timestamp, b.device, b.metric, b.value.to_bits())
    });
    let summary = TrialSummary::from_rows(&rows, TrialFacts::default());
    let peak_temp_c = summary
        .devices
        .iter()
        .filter_map(|d| d.peak_temp_c)
        .reduce(f64::max);
    let values = trials
        .iter()
        .filter(|t| t.state == TrialState::Complete)
        .filter_map(|t| t.value().filter(|v| v.is_finite()).map(|v| (t.number, v)))
        .collect();
    Ok(Side {
        name: target.to_owned(),
        study: study.name.clone(),
        trial: number,
        trials: trials.len(),
        complete: count(TrialState::Complete),
        failed: count(TrialState::Fail),
        pruned: count(TrialState::Pruned),
        running: count(TrialState::Running),
        duration_s: start.zip(end).map(|(a, b)| seconds(a, b)),
        samples_per_s: (!rates.is_empty()).then(|| rates.iter().sum::<f64>() / rates.len() as f64),
        objective,
        devices: summary.devices,
        peak_temp_c,
        values,
    })
}

/// How B's change against A is shown.
#[derive(Clone, Copy)]
enum Change {
    /// B / A − 1, in percent (quantities: rates, durations, utilisation).
    Relative,
    /// B − A (scores that may be negative, like Sharpe(agent) − Sharpe(equal weight), where a
    /// ratio means nothing).
    Difference,
}

/// One row: label, the two values, and B's change against A where both are numbers.
fn row(label: &str, a: Option<f64>, b: Option<f64>, digits: usize, how: Change) -> String {
    let cell = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.digits$}"));
    let change = match (a, b, how) {
        (Some(a), Some(b), Change::Relative) if a != 0.0 && a.is_finite() && b.is_finite() => {
            format!("{:+.1} %", 100.0 * (b / a - 1.0))
        }
        (Some(a), Some(b), Change::Difference) if a.is_finite() && b.is_finite() => {
            format!("{:+.digits$}", b - a)
        }
        _ => String::new(),
    };
    format!("{label:<24} {:>14} {:>14} {change:>10}\n", cell(a), cell(b))
}

/// A device figure's row: label, how to read it from a summary, decimals.
type Figure = (&'static str, fn(&DeviceSummary) -> Option<f64>, usize);

/// The side-by-side table.
pub fn table(a: &Side, b: &Side) -> String {
    let n = |v: usize| Some(v as f64);
    let mut s = format!(
        "{:<24} {:>14} {:>14} {:>10}\n",
        "", a.name, b.name, "B vs A"
    );
    let (rel, diff) = (Change::Relative, Change::Difference);
    s += &row("trials", n(a.trials), n(b.trials), 0, diff);
    s += &row("complete", n(a.complete), n(b.complete), 0, diff);
    s += &row("failed", n(a.failed), n(b.failed), 0, diff);
    s += &row("pruned", n(a.pruned), n(b.pruned), 0, diff);
    s += &row("duration (s)", a.duration_s, b.duration_s, 1, rel);
    s += &row("samples/s", a.samples_per_s, b.samples_per_s, 0, rel);
    s += &row("objective", a.objective, b.objective, 4, diff);
    let names: BTreeSet<&str> = a
        .devices
        .iter()
        .chain(&b.devices)
        .map(|d| d.device.as_str())
        .collect();
    for name in names {
        let get = |side: &Side, f: fn(&DeviceSummary) -> Option<f64>| {
            side.devices.iter().find(|d| d.device == name).and_then(f)
        };
        let figures: [Figure; 5] = [
            ("mean util %", |d| d.mean_util_pct, 1),
            ("peak util %", |d| d.peak_util_pct, 1),
            ("mean mem MiB", |d| d.mean_mem_used_mib, 0),
            ("peak mem MiB", |d| d.peak_mem_used_mib, 0),
            ("peak temp °C", |d| d.peak_temp_c, 1),
        ];
        for (label, f, digits) in figures {
            s += &row(
                &format!("{name} {label}"),
                get(a, f),
                get(b, f),
                digits,
                rel,
            );
        }
    }
    if a.devices.is_empty() && b.devices.is_empty() {
        s += "no GPU telemetry recorded for either side\n";
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_studies_or_study_hash_trial() {
        assert_eq!(parse_target("ppo_btc"), ("ppo_btc", None));
        assert_eq!(parse_target("ppo_btc#12"), ("ppo_btc", Some(12)));
        assert_eq!(parse_target("run#a"), ("run#a", None));
        assert_eq!(parse_target("#3"), ("#3", None));
    }
}
