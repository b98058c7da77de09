//! Optuna's distributions as stored in `trial_params.distribution_json`: the codec between the
//! model ([`super::model`]) and Optuna's bytes.
//!
//! Optuna (`optuna/distributions.py`, 5.0) stores each parameter as an internal f64 plus
//! `json.dumps({"name": <class name>, "attributes": obj.__dict__})`. The attribute order is the
//! order in which each class's `__init__` assigns its fields: `FloatDistribution` writes
//! `step, low, high, log`; `IntDistribution` writes `log, step, low, high`.
//! [`OptunaDistribution::to_optuna_json`] writes those bytes exactly;
//! [`OptunaDistribution::from_optuna_json`] reads what Optuna's `json_to_distribution` reads:
//! also the pre-3.0 classes (`UniformDistribution`, `IntLogUniformDistribution`, …) and the
//! short `{"type": …}` form, converted to the current three as Optuna's samplers do, and with
//! Optuna's adjustment of a `high` that is off the step grid (which TradeTune's own
//! constructors refuse).

use super::json_value::JsonValue;
use super::model::{CategoricalChoice, DistributionError, OptunaDistribution, ParamValue, decimal};

impl CategoricalChoice {
    /// The choice as the JSON Optuna writes for it.
    pub fn to_json(&self) -> JsonValue {
        match self {
            CategoricalChoice::None => JsonValue::Null,
            CategoricalChoice::Bool(b) => JsonValue::Bool(*b),
            CategoricalChoice::Int(i) => JsonValue::Int(*i),
            CategoricalChoice::Float(f) => JsonValue::Float(*f),
            CategoricalChoice::Str(s) => JsonValue::Str(s.clone()),
        }
    }

    fn from_json(v: &JsonValue) -> Result<Self, DistributionError> {
        Ok(match v {
            JsonValue::Null => CategoricalChoice::None,
            JsonValue::Bool(b) => CategoricalChoice::Bool(*b),
            JsonValue::Int(i) => CategoricalChoice::Int(*i),
            JsonValue::Float(f) => CategoricalChoice::Float(*f),
            JsonValue::Str(s) => CategoricalChoice::Str(s.clone()),
            other => {
                return Err(DistributionError::Format(format!(
                    "categorical choice {} is not None, bool, int, float or str",
                    other.dumps()
                )));
            }
        })
    }
}

impl ParamValue {
    /// A parameter value as Python holds it in JSON (Optuna's `fixed_params`): an int or a
    /// float a number, None, a bool or a string a choice; a list or a mapping is refused.
    pub fn from_json(v: &JsonValue) -> Result<Self, DistributionError> {
        Ok(match v {
            JsonValue::Int(i) => ParamValue::Int(*i),
            JsonValue::Float(f) => ParamValue::Float(*f),
            other => ParamValue::Choice(CategoricalChoice::from_json(other)?),
        })
    }
}

impl OptunaDistribution {
    /// The JSON as Optuna's `distribution_to_json` writes it (same bytes).
    pub fn to_optuna_json(&self) -> String {
        let attributes = match self {
            OptunaDistribution::Float(d) => vec![
                (
                    "step".to_owned(),
                    d.step.map_or(JsonValue::Null, JsonValue::Float),
                ),
                ("low".to_owned(), JsonValue::Float(d.low)),
                ("high".to_owned(), JsonValue::Float(d.high)),
                ("log".to_owned(), JsonValue::Bool(d.log)),
            ],
            OptunaDistribution::Int(d) => vec![
                ("log".to_owned(), JsonValue::Bool(d.log)),
                ("step".to_owned(), JsonValue::Int(d.step)),
                ("low".to_owned(), JsonValue::Int(d.low)),
                ("high".to_owned(), JsonValue::Int(d.high)),
            ],
            OptunaDistribution::Categorical(d) => vec![(
                "choices".to_owned(),
                JsonValue::Array(d.choices.iter().map(CategoricalChoice::to_json).collect()),
            )],
        };
        JsonValue::Object(vec![
            (
                "name".to_owned(),
                JsonValue::Str(self.class_name().to_owned()),
            ),
            ("attributes".to_owned(), JsonValue::Object(attributes)),
        ])
        .dumps()
    }

    /// Reads what Optuna's `json_to_distribution` reads, including the pre-3.0 class names.
    pub fn from_optuna_json(text: &str) -> Result<Self, DistributionError> {
        let v = JsonValue::parse(text)?;
        let fmt = |m: String| DistributionError::Format(m);
        let JsonValue::Object(_) = &v else {
            return Err(fmt(format!("expected an object, got {text}")));
        };
        if let Some(name) = v.get("name") {
            let JsonValue::Str(name) = name else {
                return Err(fmt("`name` must be a string".into()));
            };
            let attrs = v
                .get("attributes")
                .ok_or_else(|| fmt("missing `attributes`".into()))?;
            let JsonValue::Object(fields) = attrs else {
                return Err(fmt("`attributes` must be an object".into()));
            };
            let allowed: &[&str] = match name.as_str() {
                "FloatDistribution" => &["low", "high", "log", "step"],
                "IntDistribution" => &["low", "high", "log", "step"],
                "CategoricalDistribution" => &["choices"],
                "UniformDistribution" | "LogUniformDistribution" => &["low", "high"],
                "DiscreteUniformDistribution" => &["low", "high", "q"],
                "IntUniformDistribution" | "IntLogUniformDistribution" => &["low", "high", "step"],
                other => return Err(fmt(format!("unknown distribution class `{other}`"))),
            };
            if let Some((k, _)) = fields.iter().find(|(k, _)| !allowed.contains(&k.as_str())) {
                return Err(fmt(format!("{name} has no attribute `{k}`")));
            }
            let a = |k: &str| attrs.get(k);
            match name.as_str() {
                "FloatDistribution" => read_float(
                    req_f64(a("low"), "low")?,
                    req_f64(a("high"), "high")?,
                    opt_bool(a("log"), "log")?.unwrap_or(false),
                    opt_f64(a("step"), "step")?,
                ),
                "UniformDistribution" => read_float(
                    req_f64(a("low"), "low")?,
                    req_f64(a("high"), "high")?,
                    false,
                    None,
                ),
                "LogUniformDistribution" => read_float(
                    req_f64(a("low"), "low")?,
                    req_f64(a("high"), "high")?,
                    true,
                    None,
                ),
                "DiscreteUniformDistribution" => read_float(
                    req_f64(a("low"), "low")?,
                    req_f64(a("high"), "high")?,
                    false,
                    Some(req_f64(a("q"), "q")?),
                ),
                "IntDistribution" => read_int(
                    req_i64(a("low"), "low")?,
                    req_i64(a("high"), "high")?,
                    opt_bool(a("log"), "log")?.unwrap_or(false),
                    opt_i64(a("step"), "step")?.unwrap_or(1),
                ),
                "IntUniformDistribution" | "IntLogUniformDistribution" => read_int(
                    req_i64(a("low"), "low")?,
                    req_i64(a("high"), "high")?,
                    name == "IntLogUniformDistribution",
                    opt_i64(a("step"), "step")?.unwrap_or(1),
                ),
                _ => OptunaDistribution::categorical(choices(a("choices"))?),
            }
        } else {
            // The short form: {"type": "float"|"int"|"categorical", ...}.
            match v.get("type") {
                Some(JsonValue::Str(t)) if t == "categorical" => {
                    OptunaDistribution::categorical(choices(v.get("choices"))?)
                }
                Some(JsonValue::Str(t)) if t == "float" => read_float(
                    req_f64(v.get("low"), "low")?,
                    req_f64(v.get("high"), "high")?,
                    opt_bool(v.get("log"), "log")?.unwrap_or(false),
                    opt_f64(v.get("step"), "step")?,
                ),
                Some(JsonValue::Str(t)) if t == "int" => read_int(
                    req_i64(v.get("low"), "low")?,
                    req_i64(v.get("high"), "high")?,
                    opt_bool(v.get("log"), "log")?.unwrap_or(false),
                    opt_i64(v.get("step"), "step")?.unwrap_or(1),
                ),
                _ => Err(fmt(format!("neither `name` nor a known `type` in {text}"))),
            }
        }
    }
}

/// Where `text` names one of Optuna's float distributions (`FloatDistribution`, the pre-3.0
/// `UniformDistribution`, `LogUniformDistribution`, `DiscreteUniformDistribution`, or the short
/// `{"type": "float"}`), whatever its range: whether it is log-scaled. Optuna shows such a
/// parameter's value as the stored f64 (`FloatDistribution.to_external_repr`) and lets another
/// float range of the same scale follow it under the same name, so both can be told even where
/// the model refuses the range (`FloatDistribution(0.0, float('inf'))`). None otherwise.
pub(crate) fn float_distribution_log(text: &str) -> Option<bool> {
    let v = JsonValue::parse(text).ok()?;
    let log = |fields: &JsonValue| matches!(fields.get("log"), Some(JsonValue::Bool(true)));
    match (v.get("name"), v.get("type")) {
        (Some(JsonValue::Str(name)), _) => match name.as_str() {
            "FloatDistribution" => Some(v.get("attributes").is_some_and(log)),
            "UniformDistribution" | "DiscreteUniformDistribution" => Some(false),
            "LogUniformDistribution" => Some(true),
            _ => None,
        },
        (None, Some(JsonValue::Str(t))) if t == "float" => Some(log(&v)),
        _ => None,
    }
}

/// Optuna's rule for a distribution `new` following a stored float range of scale `log`
/// (`check_distribution_compatibility`): another float range of the same scale may; another
/// scale or kind may not (the reason, in Optuna's words).
pub(crate) fn follows_float(new: &OptunaDistribution, log: bool) -> Result<(), &'static str> {
    match new {
        OptunaDistribution::Float(d) if d.log == log => Ok(()),
        OptunaDistribution::Float(_) => {
            Err("cannot set a different log configuration for the same parameter name")
        }
        _ => Err("cannot set a different distribution kind for the same parameter name"),
    }
}

fn choices(v: Option<&JsonValue>) -> Result<Vec<CategoricalChoice>, DistributionError> {
    match v {
        Some(JsonValue::Array(items)) => items.iter().map(CategoricalChoice::from_json).collect(),
        _ => Err(DistributionError::Format("`choices` must be a list".into())),
    }
}

fn req_f64(v: Option<&JsonValue>, key: &str) -> Result<f64, DistributionError> {
    opt_f64(v, key)?.ok_or_else(|| DistributionError::Format(format!("missing `{key}`")))
}

fn opt_f64(v: Option<&JsonValue>, key: &str) -> Result<Option<f64>, DistributionError> {
    match v {
        None | Some(JsonValue::Null) => Ok(None),
        Some(x) => x
            .as_f64()
            .map(Some)
            .ok_or_else(|| DistributionError::Format(format!("`{key}` must be a number"))),
    }
}

fn req_i64(v: Option<&JsonValue>, key: &str) -> Result<i64, DistributionError> {
    opt_i64(v, key)?.ok_or_else(|| DistributionError::Format(format!("missing `{key}`")))
}

/// Python's `int(x)` of a JSON number (floats truncate, as `IntDistribution.__init__` does).
fn opt_i64(v: Option<&JsonValue>, key: &str) -> Result<Option<i64>, DistributionError> {
    match v {
        None | Some(JsonValue::Null) => Ok(None),
        Some(JsonValue::Int(i)) => Ok(Some(*i)),
        Some(JsonValue::Float(f)) if f.is_finite() && f.abs() < 9.2e18 => {
            Ok(Some(f.trunc() as i64))
        }
        Some(_) => Err(DistributionError::Format(format!(
            "`{key}` must be an integer"
        ))),
    }
}

fn opt_bool(v: Option<&JsonValue>, key: &str) -> Result<Option<bool>, DistributionError> {
    match v {
        None => Ok(None),
        Some(JsonValue::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(DistributionError::Format(format!(
            "`{key}` must be true or false"
        ))),
    }
}

/// `FloatDistribution(low, high, log, step)` as Optuna's constructor builds it when reading:
/// a `high` off the step grid is lowered to the last grid point (`_adjust_discrete_uniform_high`,
/// decimal arithmetic), then the model's checks apply.
fn read_float(
    low: f64,
    high: f64,
    log: bool,
    step: Option<f64>,
) -> Result<OptunaDistribution, DistributionError> {
    let high = match step {
        Some(step) if !log && step > 0.0 && low <= high => {
            decimal::grid_around(low, high, step).map_or(high, |(below, _)| below)
        }
        _ => high,
    };
    OptunaDistribution::float(low, high, log, step)
}

/// `IntDistribution(low, high, log, step)` as Optuna's constructor builds it when reading:
/// `high` becomes `(high - low) // step * step + low`.
fn read_int(
    low: i64,
    high: i64,
    log: bool,
    step: i64,
) -> Result<OptunaDistribution, DistributionError> {
    let high = if step > 0 && low <= high {
        let range = i128::from(high) - i128::from(low);
        let adjusted = i128::from(low) + range / i128::from(step) * i128::from(step);
        i64::try_from(adjusted).unwrap_or(high)
    } else {
        high
    };
    OptunaDistribution::int(low, high, log, step)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{FloatDistribution, IntDistribution};

    /// Strings copied from `../shared/optuna/optuna-reference.db` (written by Optuna 5.0).
    const OPTUNA_JSON: &[&str] = &[
        r#"{"name": "FloatDistribution", "attributes": {"step": null, "low": 1e-05, "high": 0.1, "log": true}}"#,
        r#"{"name": "FloatDistribution", "attributes": {"step": null, "low": 0.9, "high": 0.9999, "log": false}}"#,
        r#"{"name": "FloatDistribution", "attributes": {"step": 0.05, "low": 0.1, "high": 0.3, "log": false}}"#,
        r#"{"name": "IntDistribution", "attributes": {"log": false, "step": 32, "low": 32, "high": 256}}"#,
        r#"{"name": "IntDistribution", "attributes": {"log": true, "step": 1, "low": 16, "high": 512}}"#,
        r#"{"name": "CategoricalDistribution", "attributes": {"choices": [128, 256, 512, 1024]}}"#,
        r#"{"name": "CategoricalDistribution", "attributes": {"choices": ["tanh", "relu", "elu"]}}"#,
        r#"{"name": "CategoricalDistribution", "attributes": {"choices": [null, true, 0.5, "auto"]}}"#,
    ];

    #[test]
    fn optuna_json_round_trips_byte_for_byte() {
        for text in OPTUNA_JSON {
            let d = OptunaDistribution::from_optuna_json(text).unwrap();
            assert_eq!(d.to_optuna_json(), *text);
            // The serde form reads back to the same distribution.
            let via_serde: OptunaDistribution =
                serde_json::from_str(&serde_json::to_string(&d).unwrap()).unwrap();
            assert_eq!(via_serde, d);
        }
    }

    #[test]
    fn constructors_write_what_optuna_writes() {
        // Python: FloatDistribution(1e-5, 0.1, log=True) etc. (strings above).
        assert_eq!(
            OptunaDistribution::float(1e-5, 0.1, true, None)
                .unwrap()
                .to_optuna_json(),
            OPTUNA_JSON[0]
        );
        assert_eq!(
            OptunaDistribution::int(32, 256, false, 32)
                .unwrap()
                .to_optuna_json(),
            OPTUNA_JSON[3]
        );
    }

    #[test]
    fn reading_adjusts_high_to_the_step_grid_like_optuna() {
        let read = |low: &str, high: &str, step: &str| {
            OptunaDistribution::from_optuna_json(&format!(
                r#"{{"name": "FloatDistribution", "attributes": {{"step": {step}, "low": {low}, "high": {high}, "log": false}}}}"#
            ))
            .unwrap()
        };
        // Python: FloatDistribution(0.1, 0.32, step=0.05).high == 0.3;
        //         FloatDistribution(0.0, 1.0, step=0.3).high == 0.9 (decimal, not 3 * 0.3)
        assert!(matches!(
            read("0.1", "0.32", "0.05"),
            OptunaDistribution::Float(FloatDistribution { high, .. }) if high == 0.3
        ));
        assert!(matches!(
            read("0.0", "1.0", "0.3"),
            OptunaDistribution::Float(FloatDistribution { high, .. }) if high == 0.9
        ));
        // Python: IntDistribution(0, 10, step=3).high == 9
        let d = OptunaDistribution::from_optuna_json(
            r#"{"type": "int", "low": 0, "high": 10, "step": 3}"#,
        )
        .unwrap();
        assert!(matches!(
            d,
            OptunaDistribution::Int(IntDistribution { high: 9, .. })
        ));
        // TradeTune's own constructors refuse such a range instead (see the model).
        assert!(OptunaDistribution::float(0.1, 0.32, false, Some(0.05)).is_err());
        assert!(OptunaDistribution::int(0, 10, false, 3).is_err());
    }

    #[test]
    fn invalid_distributions_are_refused() {
        for bad in [
            r#"{"name": "BetaDistribution", "attributes": {}}"#,
            r#"{"name": "FloatDistribution", "attributes": {"low": 0.0}}"#,
            r#"{"name": "FloatDistribution", "attributes": {"low": 0.0, "high": 1.0, "q": 1}}"#,
            r#"{"name": "FloatDistribution", "attributes": {"low": 1.0, "high": 0.0}}"#,
            r#"{"name": "FloatDistribution", "attributes": {"low": 0.0, "high": 1.0, "step": 0.0}}"#,
            r#"{"name": "IntDistribution", "attributes": {"low": 0, "high": 10, "log": true}}"#,
            r#"{"name": "CategoricalDistribution", "attributes": {"choices": []}}"#,
            r#"{"name": "CategoricalDistribution", "attributes": {"choices": [[1]]}}"#,
            "not json",
        ] {
            assert!(OptunaDistribution::from_optuna_json(bad).is_err(), "{bad}");
        }
    }

    /// Ranges Optuna stores and the model refuses (`FloatDistribution(0.0, float('inf'))`,
    /// NaN bounds) are still told apart as float ones, with their scale.
    #[test]
    fn float_ranges_the_model_refuses_are_told_as_float() {
        let inf = r#"{"name": "FloatDistribution", "attributes": {"step": null, "low": 0.0, "high": Infinity, "log": false}}"#;
        assert!(OptunaDistribution::from_optuna_json(inf).is_err());
        assert_eq!(float_distribution_log(inf), Some(false));
        let nan_log = r#"{"name": "FloatDistribution", "attributes": {"step": null, "low": NaN, "high": NaN, "log": true}}"#;
        assert_eq!(float_distribution_log(nan_log), Some(true));
        assert_eq!(
            float_distribution_log(
                r#"{"name": "LogUniformDistribution", "attributes": {"low": 1.0, "high": Infinity}}"#
            ),
            Some(true)
        );
        assert_eq!(
            float_distribution_log(r#"{"type": "float", "low": -Infinity, "high": 0.0}"#),
            Some(false)
        );
        for other in [OPTUNA_JSON[3], OPTUNA_JSON[5], "not json", r#"{"name": 1}"#] {
            assert_eq!(float_distribution_log(other), None, "{other}");
        }
    }

    #[test]
    fn legacy_and_short_forms_are_read() {
        let d = OptunaDistribution::from_optuna_json(
            r#"{"name": "DiscreteUniformDistribution", "attributes": {"low": 0.0, "high": 1.0, "q": 0.25}}"#,
        )
        .unwrap();
        assert_eq!(
            d,
            OptunaDistribution::float(0.0, 1.0, false, Some(0.25)).unwrap()
        );
        let d = OptunaDistribution::from_optuna_json(
            r#"{"name": "IntLogUniformDistribution", "attributes": {"low": 1, "high": 64, "step": 1}}"#,
        )
        .unwrap();
        assert_eq!(d, OptunaDistribution::int(1, 64, true, 1).unwrap());
        let d = OptunaDistribution::from_optuna_json(r#"{"type": "int", "low": 0, "high": 4}"#)
            .unwrap();
        assert_eq!(d, OptunaDistribution::int(0, 4, false, 1).unwrap());
    }

    #[test]
    fn stored_values_convert_like_optuna() {
        let c = OptunaDistribution::from_optuna_json(OPTUNA_JSON[7]).unwrap();
        assert!(c.contains(3.0) && !c.contains(4.0) && !c.contains(-1.0));
        assert_eq!(
            c.to_external(1.0).unwrap(),
            crate::ParamValue::Choice(CategoricalChoice::Bool(true))
        );
        assert_eq!(
            CategoricalChoice::Str("a'b".into()).to_json().dumps(),
            r#""a'b""#
        );
    }
}
