//! One trial as the trials jobs read it for the Studies panel: its row (formatted cells, attributes, times, the
//! worker that ran it), the table's columns, and numbers to 4 significant digits.

use std::path::PathBuf;
use std::sync::Arc;

use tradetune_engine::storage::{
    CategoricalChoice, OptunaDistribution, ParamValue, TrialParam, TrialRecord, TrialState,
};

/// Columns of the trial table: the fixed ones, one per parameter and one per user attribute
/// (shown when chosen).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum TrialColumn {
    /// Study the trial belongs to.
    Study,
    /// Trial number.
    #[default]
    Number,
    /// State.
    State,
    /// Objective value.
    Value,
    /// Wall time.
    Duration,
    /// Device it ran on.
    Device,
    /// A parameter, by name.
    Param(String),
    /// A user attribute, by key.
    Attr(String),
}

impl TrialColumn {
    /// Every fixed column, in order.
    pub const ALL: [TrialColumn; 6] = [
        TrialColumn::Study,
        TrialColumn::Number,
        TrialColumn::State,
        TrialColumn::Value,
        TrialColumn::Duration,
        TrialColumn::Device,
    ];

    /// Header text.
    pub fn label(&self) -> &str {
        match self {
            TrialColumn::Study => "study",
            TrialColumn::Number => "number",
            TrialColumn::State => "state",
            TrialColumn::Value => "value",
            TrialColumn::Duration => "duration s",
            TrialColumn::Device => "device",
            TrialColumn::Param(name) | TrialColumn::Attr(name) => name,
        }
    }
}

/// One parameter of a row: its text in the table (4 significant digits, or the choice's
/// label), its full-precision text (trial detail, exports) and the number it sorts and plots by
/// (the value; a categorical choice's index).
#[derive(Debug, Clone, PartialEq)]
pub struct ParamCell {
    /// Parameter name.
    pub name: String,
    /// As the table shows it.
    pub text: String,
    /// Every digit.
    pub full: String,
    /// The value (a choice's index for a categorical parameter).
    pub key: f64,
}

pub use tradetune_engine::front::format::sig4;

/// One row of the trial table, with its cells already formatted (10,000 rows must draw
/// within a frame).
#[derive(Debug, Clone, PartialEq)]
pub struct TrialRow {
    /// Study name.
    pub study: String,
    /// Trial number.
    pub number: i64,
    /// State.
    pub state: TrialState,
    /// Objective.
    pub value: Option<f64>,
    /// Seconds from start to end.
    pub duration_s: Option<f64>,
    /// Unix seconds of its start and its end (None while running or waiting).
    pub started_s: Option<f64>,
    pub ended_s: Option<f64>,
    /// The worker that ran it (`host#pid/worker-N`), empty when not recorded.
    pub worker: String,
    /// Where it ran (the `device` attribute TradeTune stores).
    pub device: String,
    /// `name=value` of each parameter, every digit (the trial detail).
    pub params: String,
    /// Each parameter as the table shows, sorts and plots it.
    pub param_cells: Vec<ParamCell>,
    /// User attributes other than the applied configuration: (key, text, number if it is one).
    pub attrs: Vec<(String, String, Option<f64>)>,
    /// Why it failed, when it did.
    pub fail_reason: Option<String>,
    /// Numeric parameters (categorical ones by their choice's index), for the
    /// parameter-vs-objective plot.
    pub numeric_params: Vec<(String, f64)>,
    /// Intermediate values (step, value): the trial's learning curve.
    pub intermediate: Vec<(i64, f64)>,
    /// What limited the trial, with a suggestion (the `verdict` attribute).
    pub verdict: Option<String>,
    /// Samples per second end to end (the `samples_per_s` attribute).
    pub samples_per_s: Option<f64>,
    /// Samples per second without the compile phase (`steady_samples_per_s`; none where every
    /// update compiled).
    pub steady_samples_per_s: Option<f64>,
    /// Where its policy was saved (the `checkpoint` attribute), for a backtest.
    pub checkpoint: Option<PathBuf>,
    /// Backend, precision and worker, as stored with the trial.
    pub placement: String,
    /// The configuration the trial ran with, every field, as pretty JSON.
    pub applied_config: Option<String>,
    /// The storage's trial id (its learning curve and telemetry are keyed by it).
    pub trial_id: i64,
    /// The trial's telemetry summary as stored in its user attributes (`wall_s`, `phase_*_s`,
    /// `gpu0_mean_util_pct`, `host_peak_rss_mib`, …): (name, value as text).
    pub telemetry: Vec<(String, String)>,
    /// The parameters as stored (internal value and distribution), for the importances.
    pub stored_params: Arc<[TrialParam]>,
    /// Where it lies on each of the view's parameter axes, in their order, in plotted units
    /// ([`ParamAxis::to_plot`] of its [`ParamCell::key`]; filled by the view when the row
    /// arrives or the axes change), so plots over 10,000 trials read a number by position
    /// instead of searching names and taking logarithms.
    pub axis_positions: AxisPositions,
}

/// A row's positions on the view's parameter axes (see [`TrialRow::axis_positions`]). Derived from the
/// row's own parameters, so it takes no part in comparing rows: a re-read trial equals the row
/// held before its positions were filled.
#[derive(Debug, Clone, Default)]
pub struct AxisPositions(pub Vec<Option<f64>>);

impl PartialEq for AxisPositions {
    fn eq(&self, _other: &Self) -> bool {
        true
    }
}

/// A stored (naive UTC) time as Unix seconds.
fn unix_s(t: chrono::NaiveDateTime) -> f64 {
    t.and_utc().timestamp_millis() as f64 / 1e3
}

/// Whether a user attribute belongs to the per-trial telemetry summary the runner stores.
fn is_telemetry_attr(key: &str) -> bool {
    key == "wall_s"
        || key.starts_with("phase_")
        || key.starts_with("host_")
        || key.starts_with("gpu")
}

impl TrialRow {
    /// The row of one stored trial.
    pub fn of(study: &str, t: &TrialRecord) -> TrialRow {
        let attr = |k: &str| {
            t.user_attr(k)
                .or_else(|| t.system_attr(k))
                .map(|v| v.python_str())
        };
        let duration_s = match (t.datetime_start, t.datetime_complete) {
            (Some(a), Some(b)) => Some((b - a).as_seconds_f64()),
            _ => None,
        };
        let param_cells: Vec<ParamCell> = t
            .params
            .iter()
            .map(|p| match p.external() {
                Ok(v) => {
                    let key = match &v {
                        ParamValue::Float(x) => *x,
                        ParamValue::Int(i) => *i as f64,
                        ParamValue::Choice(_) => p.internal,
                    };
                    let text = match &v {
                        ParamValue::Float(x) => sig4(*x),
                        _ => param_text(&v),
                    };
                    ParamCell {
                        name: p.name.clone(),
                        text,
                        full: param_text(&v),
                        key,
                    }
                }
                Err(_) => ParamCell {
                    name: p.name.clone(),
                    text: "?".into(),
                    full: "?".into(),
                    key: p.internal,
                },
            })
            // A parameter set aside on reading (an infinite range another client stored) shows
            // its value where it can be told, marked `*`; the note among the attributes says
            // why. It is not among the numeric parameters plotted against the objective.
            .chain(t.set_aside.iter().filter_map(|s| {
                let internal = s.internal?;
                let (text, full) = s.float_value.map_or_else(
                    || ("?".to_owned(), "?".to_owned()),
                    |v| (format!("{}*", sig4(v)), format!("{v}*")),
                );
                Some(ParamCell {
                    name: s.name.clone(),
                    text,
                    full,
                    key: s.float_value.unwrap_or(internal),
                })
            }))
            .collect();
        let params = param_cells
            .iter()
            .map(|c| format!("{}={}", c.name, c.full))
            .collect::<Vec<_>>()
            .join(", ");
        let attrs = t
            .user_attrs
            .iter()
            .filter(|(k, _)| k != tradetune_engine::storage::APPLIED_CONFIG_KEY)
            .map(|(k, v)| {
                let x = v.as_f64();
                let text = match x {
                    Some(x) if x.fract() != 0.0 => sig4(x),
                    _ => v.python_str(),
                };
                (k.clone(), text, x)
            })
            .chain((t.set_aside.iter()).map(|s| ("set aside".to_owned(), s.note(t.number), None)))
            .collect();
        TrialRow {
            trial_id: t.trial_id,
            telemetry: t
                .user_attrs
                .iter()
                .filter(|(k, _)| is_telemetry_attr(k))
                .map(|(k, v)| {
                    let text = match v.as_f64() {
                        Some(x) if x.fract() != 0.0 => format!("{x:.2}"),
                        _ => v.python_str(),
                    };
                    (k.clone(), text)
                })
                .collect(),
            study: study.to_owned(),
            number: t.number,
            state: t.state,
            value: t.value(),
            duration_s,
            started_s: t.datetime_start.map(unix_s),
            ended_s: t.datetime_complete.map(unix_s),
            worker: attr("worker").unwrap_or_default(),
            device: attr("device").unwrap_or_default(),
            params,
            param_cells,
            attrs,
            fail_reason: attr(tradetune_engine::storage::FAIL_REASON_KEY),
            numeric_params: t
                .params
                .iter()
                .map(|p| {
                    let v = match p.external() {
                        Ok(ParamValue::Float(x)) => x,
                        Ok(ParamValue::Int(i)) => i as f64,
                        _ => p.internal,
                    };
                    (p.name.clone(), v)
                })
                .collect(),
            intermediate: t.intermediate_values.clone(),
            stored_params: t.params.as_slice().into(),
            verdict: attr("verdict"),
            samples_per_s: t.user_attr("samples_per_s").and_then(|v| v.as_f64()),
            steady_samples_per_s: t.user_attr("steady_samples_per_s").and_then(|v| v.as_f64()),
            checkpoint: attr("checkpoint").map(PathBuf::from),
            placement: ["backend", "precision", "worker"]
                .iter()
                .filter_map(|k| attr(k).map(|v| format!("{k} {v}")))
                .collect::<Vec<_>>()
                .join(", "),
            applied_config: t
                .user_attr(tradetune_engine::storage::APPLIED_CONFIG_KEY)
                .or_else(|| t.system_attr(tradetune_engine::storage::APPLIED_CONFIG_KEY))
                .map(|v| {
                    serde_json::from_str::<serde_json::Value>(&v.dumps())
                        .and_then(|j| serde_json::to_string_pretty(&j))
                        .unwrap_or_else(|_| v.dumps())
                }),
            axis_positions: AxisPositions::default(),
        }
    }

    /// Orders two rows by `column` (missing values last).
    pub fn cmp_by(&self, other: &TrialRow, column: &TrialColumn) -> std::cmp::Ordering {
        use std::cmp::Ordering;
        let opt = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) => a.total_cmp(&b),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => Ordering::Equal,
        };
        match column {
            TrialColumn::Study => self
                .study
                .cmp(&other.study)
                .then(self.number.cmp(&other.number)),
            TrialColumn::Number => self
                .number
                .cmp(&other.number)
                .then(self.study.cmp(&other.study)),
            TrialColumn::State => self.state.index().cmp(&other.state.index()),
            TrialColumn::Value => opt(self.value, other.value),
            TrialColumn::Duration => opt(self.duration_s, other.duration_s),
            TrialColumn::Device => self.device.cmp(&other.device),
            TrialColumn::Param(name) => opt(self.param_key(name), other.param_key(name)),
            TrialColumn::Attr(key) => {
                let (a, b) = (self.attr(key), other.attr(key));
                match (a, b) {
                    (Some((_, Some(x))), Some((_, Some(y)))) => x.total_cmp(&y),
                    (Some((x, _)), Some((y, _))) => x.cmp(y),
                    (Some(_), None) => Ordering::Less,
                    (None, Some(_)) => Ordering::Greater,
                    (None, None) => Ordering::Equal,
                }
            }
        }
    }

    /// The sort/plot number of parameter `name`, if the trial has it.
    pub fn param_key(&self, name: &str) -> Option<f64> {
        self.param_cells
            .iter()
            .find(|c| c.name == name)
            .map(|c| c.key)
    }

    /// Where it lies on the view's parameter axis number `i`, in plotted units: from
    /// [`Self::axis_positions`] once filled, else by the axis's name.
    pub fn axis_x(&self, i: usize, axis: &ParamAxis) -> Option<f64> {
        match self.axis_positions.0.get(i) {
            Some(k) => *k,
            None => self.param_key(&axis.name).map(|k| axis.to_plot(k)),
        }
    }

    /// The table text of parameter `name`, if the trial has it.
    pub fn param_cell(&self, name: &str) -> Option<&ParamCell> {
        self.param_cells.iter().find(|c| c.name == name)
    }

    /// User attribute `key`: its text and its number, if it is one.
    pub fn attr(&self, key: &str) -> Option<(&str, Option<f64>)> {
        self.attrs
            .iter()
            .find(|(k, _, _)| k == key)
            .map(|(_, t, x)| (t.as_str(), *x))
    }
}

/// A parameter value as a person reads it.
pub(super) fn param_text(v: &ParamValue) -> String {
    match v {
        ParamValue::Float(x) => x.to_string(),
        ParamValue::Int(i) => i.to_string(),
        ParamValue::Choice(c) => match c {
            CategoricalChoice::None => "None".into(),
            CategoricalChoice::Bool(b) => b.to_string(),
            CategoricalChoice::Int(i) => i.to_string(),
            CategoricalChoice::Float(x) => x.to_string(),
            CategoricalChoice::Str(s) => s.clone(),
        },
    }
}

/// How a parameter's axis is scaled: as its distribution says.
#[derive(Debug, Clone, PartialEq)]
pub enum Scale {
    /// Evenly.
    Linear,
    /// log10 plotted, ticks labelled with the values.
    Log,
    /// The choice's index plotted, ticks labelled with the choices.
    Choices(Vec<String>),
}

/// A parameter as a column and a plot axis.
#[derive(Debug, Clone, PartialEq)]
pub struct ParamAxis {
    /// Its name.
    pub name: String,
    /// How it is scaled.
    pub scale: Scale,
}

impl ParamAxis {
    /// The axis of a parameter with `distribution`.
    pub fn of(name: &str, distribution: &OptunaDistribution) -> ParamAxis {
        let scale = match distribution {
            OptunaDistribution::Float(f) if f.log => Scale::Log,
            OptunaDistribution::Int(i) if i.log => Scale::Log,
            OptunaDistribution::Categorical(c) => Scale::Choices(
                c.choices
                    .iter()
                    .map(|c| param_text(&ParamValue::Choice(c.clone())))
                    .collect(),
            ),
            _ => Scale::Linear,
        };
        ParamAxis {
            name: name.to_owned(),
            scale,
        }
    }

    /// Where a value (a row's [`ParamCell::key`]) goes on the axis.
    pub fn to_plot(&self, key: f64) -> f64 {
        match self.scale {
            Scale::Log => key.log10(),
            _ => key,
        }
    }

    /// The text of a tick at `x` (plotted units): the value behind it.
    pub fn tick(&self, x: f64) -> String {
        match &self.scale {
            Scale::Linear => sig4(x),
            Scale::Log => sig4(10f64.powf(x)),
            Scale::Choices(c) => {
                let i = x.round();
                if (x - i).abs() < 1e-6 && i >= 0.0 {
                    c.get(i as usize).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use tradetune_engine::storage::{CategoricalChoice, OptunaDistribution};

    use super::{ParamAxis, Scale};

    #[test]
    fn log_and_categorical_axes_label_their_ticks_with_values() {
        let lr = ParamAxis::of(
            "lr",
            &OptunaDistribution::float(1e-5, 1e-2, true, None).unwrap(),
        );
        assert_eq!(lr.scale, Scale::Log);
        assert!((lr.to_plot(1e-3) + 3.0).abs() < 1e-12);
        assert_eq!(lr.tick(-4.0), "1e-4");
        assert_eq!(lr.tick(-2.5), "0.003162");
        let batch = ParamAxis::of(
            "batch",
            &OptunaDistribution::categorical(vec![
                CategoricalChoice::Int(64),
                CategoricalChoice::Str("auto".into()),
            ])
            .unwrap(),
        );
        assert_eq!(
            batch.scale,
            Scale::Choices(vec!["64".into(), "auto".into()])
        );
        assert_eq!(
            (batch.tick(0.0), batch.tick(1.0)),
            ("64".into(), "auto".into())
        );
        assert_eq!(batch.tick(0.5), "", "no label between choices");
        let gamma = ParamAxis::of(
            "gamma",
            &OptunaDistribution::float(0.9, 0.999, false, None).unwrap(),
        );
        assert_eq!(
            (gamma.scale.clone(), gamma.tick(0.95)),
            (Scale::Linear, "0.95".into())
        );
    }
}
