//! CSV export of a study's trials, byte-identical to Optuna's
//! `study.trials_dataframe().to_csv()` (Optuna 5.0, pandas 3.0, CPython 3.11).
//!
//! Columns and their order come from Optuna's `study/_dataframe.py`: `number`, `value` (or
//! `values_0`, `values_1`, … / `values_<metric name>`), `datetime_start`, `datetime_complete`,
//! `duration`, then `params_*`, `user_attrs_*`, `system_attrs_*` each sorted by name, then
//! `state`; a first unnamed column holds the row index. A trial without a parameter or attribute
//! has NaN there. Where a device or failure reason was recorded it appears as
//! `user_attrs_device` / `system_attrs_fail_reason` like any attribute.
//!
//! Cell text follows pandas' type inference per column (`lib.maybe_convert_objects`):
//! - only ints and nothing missing → int64, written as ints;
//! - numbers (ints, floats, bools excluded) with anything missing → float64, every number written
//!   as a Python float (`160.0`), missing as empty;
//! - anything else → object (or pandas' `str` dtype, which writes the same): `str(value)` of
//!   each cell (`True`, `0.5`, `['a', 'b']`, `{'k': 1}`), missing and None as empty;
//! - datetimes (shown in local time, as Optuna's `FrozenTrial` does) with as many fraction
//!   digits as the column needs: none, 3 or 6 (a date only when every value is midnight);
//!   durations as `0 days 00:00:00.445337`, the fraction only if some value has one, `N days`
//!   when every value is whole days.
//!
//! A parameter set aside on reading ([`crate::SetAside`]) is written where its value can be
//! told (a float distribution's value is the stored f64); an attribute set aside and a parameter
//! of another kind are left out (their cells empty), which the callers say with
//! [`crate::set_aside_notes`].
//!
//! Quoting is Python's `csv.QUOTE_MINIMAL` with line terminator `\n`: a field is quoted if it
//! contains `,`, `"` or `\n`.

use std::io::Write;

use chrono::{NaiveDateTime, TimeDelta, Timelike};

use super::datetime::utc_to_local;
use super::error::StorageError;
use super::json_value::JsonValue;
use super::model::{CategoricalChoice, ParamValue};
use super::open::Storage;
use super::python_repr::float_repr;
use super::records::{StudyRecord, TrialRecord};

/// Optuna's study system attribute with objective names (`study.set_metric_names`).
const METRIC_NAMES_KEY: &str = "study:metric_names";

/// A cell before pandas decides its column's type.
#[derive(Debug, Clone)]
enum Cell {
    /// No such key in this trial's record (pandas fills NaN).
    Missing,
    /// A Python object from the trial.
    Value(JsonValue),
    Time(Option<NaiveDateTime>),
    Duration(Option<TimeDelta>),
}

struct Column {
    name: String,
    cells: Vec<Cell>,
}

fn param_json(value: ParamValue) -> JsonValue {
    match value {
        ParamValue::Float(f) => JsonValue::Float(f),
        ParamValue::Int(i) => JsonValue::Int(i),
        ParamValue::Choice(c) => match c {
            CategoricalChoice::None => JsonValue::Null,
            CategoricalChoice::Bool(b) => JsonValue::Bool(b),
            CategoricalChoice::Int(i) => JsonValue::Int(i),
            CategoricalChoice::Float(f) => JsonValue::Float(f),
            CategoricalChoice::Str(s) => JsonValue::Str(s),
        },
    }
}

/// Columns named `prefix_key` for the union of keys over trials, sorted by key.
fn keyed_columns(
    prefix: &str,
    trials: &[TrialRecord],
    entries: impl FnMut(&TrialRecord) -> Vec<(String, JsonValue)>,
) -> Vec<Column> {
    let per_trial: Vec<Vec<(String, JsonValue)>> = trials.iter().map(entries).collect();
    let mut keys: Vec<&String> = per_trial.iter().flatten().map(|(k, _)| k).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .map(|key| Column {
            name: if key.is_empty() {
                prefix.to_owned()
            } else {
                format!("{prefix}_{key}")
            },
            cells: per_trial
                .iter()
                .map(|entries| {
                    entries
                        .iter()
                        .find(|(k, _)| k == key)
                        .map_or(Cell::Missing, |(_, v)| Cell::Value(v.clone()))
                })
                .collect(),
        })
        .collect()
}

fn build_columns(study: &StudyRecord, trials: &[TrialRecord]) -> Result<Vec<Column>, StorageError> {
    let mut columns = Vec::new();
    let number = |t: &TrialRecord| Cell::Value(JsonValue::Int(t.number));
    columns.push(Column {
        name: "number".into(),
        cells: trials.iter().map(number).collect(),
    });

    let metric_names: Option<Vec<String>> = study
        .system_attrs
        .iter()
        .find(|(k, _)| k == METRIC_NAMES_KEY)
        .and_then(|(_, v)| match v {
            JsonValue::Array(items) => items
                .iter()
                .map(|i| match i {
                    JsonValue::Str(s) => Some(s.clone()),
                    _ => None,
                })
                .collect(),
            _ => None,
        });
    let n_objectives = study.directions.len();
    let value_cell = |t: &TrialRecord, k: usize| {
        Cell::Value(
            t.values
                .as_ref()
                .and_then(|v| v.get(k))
                .map_or(JsonValue::Null, |x| JsonValue::Float(*x)),
        )
    };
    if n_objectives <= 1 {
        let name = match &metric_names {
            Some(names) if !names.is_empty() => format!("value_{}", names[0]),
            _ => "value".to_owned(),
        };
        columns.push(Column {
            name,
            cells: trials.iter().map(|t| value_cell(t, 0)).collect(),
        });
    } else {
        for k in 0..n_objectives {
            let name = match &metric_names {
                Some(names) if names.len() == n_objectives => format!("values_{}", names[k]),
                _ => format!("values_{k}"),
            };
            columns.push(Column {
                name,
                cells: trials.iter().map(|t| value_cell(t, k)).collect(),
            });
        }
    }
    let start: Vec<Option<NaiveDateTime>> = trials
        .iter()
        .map(|t| t.datetime_start.map(utc_to_local))
        .collect();
    let complete: Vec<Option<NaiveDateTime>> = trials
        .iter()
        .map(|t| t.datetime_complete.map(utc_to_local))
        .collect();
    columns.push(Column {
        name: "datetime_start".into(),
        cells: start.iter().map(|t| Cell::Time(*t)).collect(),
    });
    columns.push(Column {
        name: "datetime_complete".into(),
        cells: complete.iter().map(|t| Cell::Time(*t)).collect(),
    });
    columns.push(Column {
        name: "duration".into(),
        cells: start
            .iter()
            .zip(&complete)
            .map(|(s, c)| Cell::Duration(s.zip(*c).map(|(s, c)| c - s)))
            .collect(),
    });

    let mut param_error = None;
    columns.extend(keyed_columns("params", trials, |t| {
        t.params
            .iter()
            .filter_map(|p| match p.external() {
                Ok(v) => Some((p.name.clone(), param_json(v))),
                Err(e) => {
                    param_error.get_or_insert(StorageError::Distribution {
                        name: p.name.clone(),
                        source: e,
                    });
                    None
                }
            })
            // A float parameter set aside (an infinite range Optuna stored) is written as
            // Optuna writes it: its value is the stored f64.
            .chain(
                t.set_aside
                    .iter()
                    .filter_map(|s| match (s.table, s.float_value) {
                        ("trial_params", Some(v)) => Some((s.name.clone(), JsonValue::Float(v))),
                        _ => None,
                    }),
            )
            .collect()
    }));
    if let Some(e) = param_error {
        return Err(e);
    }
    columns.extend(keyed_columns("user_attrs", trials, |t| {
        t.user_attrs.clone()
    }));
    columns.extend(keyed_columns("system_attrs", trials, |t| {
        t.system_attrs.clone()
    }));
    columns.push(Column {
        name: "state".into(),
        cells: trials
            .iter()
            .map(|t| Cell::Value(JsonValue::Str(t.state.as_str().to_owned())))
            .collect(),
    });
    Ok(columns)
}

/// Whether a value is NA for pandas (`isna`): None or a float NaN.
fn is_na(v: &JsonValue) -> bool {
    matches!(v, JsonValue::Null) || matches!(v, JsonValue::Float(f) if f.is_nan())
}

/// The text of each cell of a column of Python objects, after pandas' type inference.
fn format_values(cells: &[Cell]) -> Vec<String> {
    let values: Vec<Option<&JsonValue>> = cells
        .iter()
        .map(|c| match c {
            Cell::Value(v) => Some(v),
            _ => None,
        })
        .collect();
    let numeric_only = values.iter().all(|v| match v {
        None => true,
        Some(v) => matches!(v, JsonValue::Null | JsonValue::Int(_) | JsonValue::Float(_)),
    });
    let all_int = values.iter().all(|v| matches!(v, Some(JsonValue::Int(_))));
    let as_float = numeric_only && !all_int;
    values
        .iter()
        .map(|v| match v {
            None => String::new(),
            Some(v) if is_na(v) => String::new(),
            Some(JsonValue::Int(i)) if as_float => float_repr(*i as f64),
            Some(v) => v.python_str(),
        })
        .collect()
}

fn format_times(times: &[Option<NaiveDateTime>]) -> Vec<String> {
    let present = || times.iter().flatten();
    let micros = |t: &NaiveDateTime| t.nanosecond() / 1_000;
    let fmt = if present().any(|t| micros(t) % 1_000 != 0) {
        "%Y-%m-%d %H:%M:%S%.6f"
    } else if present().any(|t| micros(t) != 0) {
        "%Y-%m-%d %H:%M:%S%.3f"
    } else if present().all(|t| t.num_seconds_from_midnight() == 0) {
        "%Y-%m-%d"
    } else {
        "%Y-%m-%d %H:%M:%S"
    };
    times
        .iter()
        .map(|t| t.map_or(String::new(), |t| t.format(fmt).to_string()))
        .collect()
}

/// pandas' `Timedelta` text: `-1 days +23:59:59.500000` (days are floored).
fn format_durations(durations: &[Option<TimeDelta>]) -> Vec<String> {
    const DAY_US: i64 = 86_400_000_000;
    let us = |d: &TimeDelta| d.num_microseconds().unwrap_or(i64::MAX);
    let present = || durations.iter().flatten();
    let even_days = present().all(|d| us(d).rem_euclid(DAY_US) == 0);
    let fraction = present().any(|d| us(d).rem_euclid(1_000_000) != 0);
    durations
        .iter()
        .map(|d| {
            let Some(d) = d else { return String::new() };
            let total = us(d);
            let days = total.div_euclid(DAY_US);
            if even_days {
                return format!("{days} days");
            }
            let rest = total.rem_euclid(DAY_US);
            let (h, m, s, f) = (
                rest / 3_600_000_000,
                rest / 60_000_000 % 60,
                rest / 1_000_000 % 60,
                rest % 1_000_000,
            );
            let sign = if days < 0 { "+" } else { "" };
            let mut out = format!("{days} days {sign}{h:02}:{m:02}:{s:02}");
            if fraction {
                out.push_str(&format!(".{f:06}"));
            }
            out
        })
        .collect()
}

/// Python `csv` QUOTE_MINIMAL with `lineterminator="\n"`.
fn quote(field: &str, out: &mut Vec<u8>) {
    if field.contains([',', '"', '\n']) {
        out.push(b'"');
        out.extend_from_slice(field.replace('"', "\"\"").as_bytes());
        out.push(b'"');
    } else {
        out.extend_from_slice(field.as_bytes());
    }
}

/// The bytes of `study.trials_dataframe().to_csv()` for these trials.
pub fn trials_csv(study: &StudyRecord, trials: &[TrialRecord]) -> Result<Vec<u8>, StorageError> {
    let mut out = Vec::new();
    if trials.is_empty() {
        // An empty DataFrame: one empty field, which the csv module quotes.
        out.extend_from_slice(b"\"\"\n");
        return Ok(out);
    }
    let columns = build_columns(study, trials)?;
    let texts: Vec<Vec<String>> = columns
        .iter()
        .map(|c| match c.cells.first() {
            Some(Cell::Time(_)) => format_times(
                &c.cells
                    .iter()
                    .map(|x| if let Cell::Time(t) = x { *t } else { None })
                    .collect::<Vec<_>>(),
            ),
            Some(Cell::Duration(_)) => format_durations(
                &c.cells
                    .iter()
                    .map(|x| if let Cell::Duration(d) = x { *d } else { None })
                    .collect::<Vec<_>>(),
            ),
            _ => format_values(&c.cells),
        })
        .collect();
    for c in &columns {
        out.push(b',');
        quote(&c.name, &mut out);
    }
    out.push(b'\n');
    for row in 0..trials.len() {
        out.extend_from_slice(row.to_string().as_bytes());
        for col in &texts {
            out.push(b',');
            quote(&col[row], &mut out);
        }
        out.push(b'\n');
    }
    Ok(out)
}

impl Storage {
    /// Writes the study's trials as Optuna's `trials_dataframe().to_csv()` would.
    pub fn export_csv(&self, study_name: &str, out: &mut impl Write) -> Result<(), StorageError> {
        let study = self.study(study_name)?;
        let trials = self.trials(study.study_id)?;
        out.write_all(&trials_csv(&study, &trials)?)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::NaiveDate;

    fn t(h: u32, us: u32) -> Option<NaiveDateTime> {
        NaiveDate::from_ymd_opt(2026, 1, 2).and_then(|d| d.and_hms_micro_opt(h, 4, 5, us))
    }

    /// Expected texts were printed by pandas 3.0 (`pd.DataFrame([...]).to_csv()`).
    #[test]
    fn datetime_and_duration_resolution_like_pandas() {
        assert_eq!(
            format_times(&[t(3, 123_000), t(3, 0)]),
            ["2026-01-02 03:04:05.123", "2026-01-02 03:04:05.000"]
        );
        assert_eq!(
            format_times(&[t(3, 5), None]),
            ["2026-01-02 03:04:05.000005", ""]
        );
        assert_eq!(format_times(&[t(3, 0)]), ["2026-01-02 03:04:05"]);
        let midnight = NaiveDate::from_ymd_opt(2026, 1, 2).and_then(|d| d.and_hms_opt(0, 0, 0));
        assert_eq!(format_times(&[midnight, None]), ["2026-01-02", ""]);
        let d = |s: i64, us: i64| Some(TimeDelta::seconds(s) + TimeDelta::microseconds(us));
        assert_eq!(
            format_durations(&[d(1, 123_000), d(2, 0)]),
            ["0 days 00:00:01.123000", "0 days 00:00:02.000000"]
        );
        assert_eq!(
            format_durations(&[d(-1, 0), d(2, 0)]),
            ["-1 days +23:59:59", "0 days 00:00:02"]
        );
        assert_eq!(format_durations(&[d(0, 0), None]), ["0 days", ""]);
        assert_eq!(
            format_durations(&[d(86_403, 0), d(172_800, 0)]),
            ["1 days 00:00:03", "2 days 00:00:00"]
        );
    }

    #[test]
    fn value_columns_follow_pandas_inference() {
        let v = |x: JsonValue| Cell::Value(x);
        assert_eq!(
            format_values(&[v(JsonValue::Int(1)), v(JsonValue::Int(2))]),
            ["1", "2"]
        );
        assert_eq!(
            format_values(&[v(JsonValue::Int(1)), Cell::Missing]),
            ["1.0", ""]
        );
        assert_eq!(
            format_values(&[v(JsonValue::Int(1)), v(JsonValue::Bool(true))]),
            ["1", "True"]
        );
        assert_eq!(
            format_values(&[v(JsonValue::Float(f64::NAN)), v(JsonValue::Int(1))]),
            ["", "1.0"]
        );
        assert_eq!(
            format_values(&[v(JsonValue::Str("a".into())), v(JsonValue::Int(1))]),
            ["a", "1"]
        );
        assert_eq!(
            format_values(&[
                v(JsonValue::Null),
                v(JsonValue::Bool(true)),
                v(JsonValue::Float(0.5))
            ]),
            ["", "True", "0.5"]
        );
        let mut out = Vec::new();
        quote("x,y", &mut out);
        quote("q\"r", &mut out);
        quote("a\rb", &mut out);
        assert_eq!(String::from_utf8(out).unwrap(), "\"x,y\"\"q\"\"r\"a\rb");
    }
}
