//! Optuna's parameter distributions as stored in `trial_params.distribution_json`.
//!
//! Optuna (`optuna/distributions.py`, 5.0) stores each parameter as an internal f64 plus
//! `json.dumps({"name": <class name>, "attributes": obj.__dict__})`. The attribute order is the
//! order in which each class's `__init__` assigns its fields: `FloatDistribution` writes
//! `step, low, high, log`; `IntDistribution` writes `log, step, low, high`. The internal value of
//! a float or int parameter is the number itself; of a categorical one, the index into
//! `choices`. [`OptunaDistribution::to_optuna_json`] writes those bytes exactly;
//! [`OptunaDistribution::from_optuna_json`] also reads the pre-3.0 classes
//! (`UniformDistribution`, `IntLogUniformDistribution`, …) and the short `{"type": …}` form that
//! `json_to_distribution` accepts, converting them to the current three as Optuna's samplers do.

use serde::{Deserialize, Serialize};

use super::json_value::{JsonError, JsonValue};

/// One of Optuna's three distributions. The serde form is Optuna's
/// (`{"name": "FloatDistribution", "attributes": {...}}`), for configs and APIs; the bytes stored
/// in the database come from [`OptunaDistribution::to_optuna_json`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "name", content = "attributes")]
pub enum OptunaDistribution {
    #[serde(rename = "FloatDistribution")]
    Float(FloatDistribution),
    #[serde(rename = "IntDistribution")]
    Int(IntDistribution),
    #[serde(rename = "CategoricalDistribution")]
    Categorical(CategoricalDistribution),
}

/// `optuna.distributions.FloatDistribution`; fields in Optuna's attribute order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FloatDistribution {
    pub step: Option<f64>,
    pub low: f64,
    pub high: f64,
    pub log: bool,
}

/// `optuna.distributions.IntDistribution`; fields in Optuna's attribute order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntDistribution {
    pub log: bool,
    pub step: i64,
    pub low: i64,
    pub high: i64,
}

/// `optuna.distributions.CategoricalDistribution`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CategoricalDistribution {
    pub choices: Vec<CategoricalChoice>,
}

/// A categorical choice: Optuna allows `None`, `bool`, `int`, `float` and `str`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub enum CategoricalChoice {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
}

/// A parameter value in Optuna's external representation (what `trial.params` holds).
#[derive(Debug, Clone, PartialEq)]
pub enum ParamValue {
    Float(f64),
    Int(i64),
    Choice(CategoricalChoice),
}

/// A distribution that Optuna would refuse to build, or a value it would refuse to store.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DistributionError {
    #[error("`low <= high` must hold, but got low={low}, high={high}")]
    LowAboveHigh { low: f64, high: f64 },
    #[error("`low > 0` must hold for log=true (low >= 1 for ints), but got low={low}")]
    LogNeedsPositiveLow { low: f64 },
    #[error("`step > 0` must hold, but got step={step}")]
    StepNotPositive { step: f64 },
    #[error("`step` is not supported when `log` is true (Optuna allows only step=1 for log ints)")]
    LogWithStep,
    #[error("a categorical distribution needs at least one choice")]
    NoChoices,
    #[error("float bounds must be finite, but got low={low}, high={high}")]
    NonFiniteBounds { low: f64, high: f64 },
    #[error("cannot align low={low}, high={high} and step={step} on one decimal grid")]
    UnalignableStep { low: f64, high: f64, step: f64 },
    #[error("value {value} is not valid for {distribution}: {reason}")]
    BadValue {
        value: String,
        distribution: String,
        reason: String,
    },
    #[error("distribution_json: {0}")]
    Json(#[from] JsonError),
    #[error("distribution_json: {0}")]
    Format(String),
}

impl PartialEq for CategoricalChoice {
    /// Python's `==` between choices, which is what `choices.index(x)` uses: `1 == 1.0 == True`,
    /// and (Optuna's `_categorical_choice_equal`) NaN equals NaN.
    fn eq(&self, other: &Self) -> bool {
        use CategoricalChoice as C;
        match (self, other) {
            (C::None, C::None) => true,
            (C::Str(a), C::Str(b)) => a == b,
            (C::None | C::Str(_), _) | (_, C::None | C::Str(_)) => false,
            (a, b) => match (a.as_number(), b.as_number()) {
                (Some(x), Some(y)) => x == y || (x.is_nan() && y.is_nan()),
                _ => false,
            },
        }
    }
}

impl PartialEq for CategoricalDistribution {
    /// Optuna's `CategoricalDistribution.__eq__`: same length, pairwise equal choices.
    fn eq(&self, other: &Self) -> bool {
        self.choices.len() == other.choices.len()
            && self.choices.iter().zip(&other.choices).all(|(a, b)| a == b)
    }
}

impl CategoricalChoice {
    fn as_number(&self) -> Option<f64> {
        match self {
            CategoricalChoice::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
            CategoricalChoice::Int(i) => Some(*i as f64),
            CategoricalChoice::Float(f) => Some(*f),
            _ => None,
        }
    }

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

impl std::fmt::Display for CategoricalChoice {
    /// Python's `repr` of the choice, as Optuna prints it in messages.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_json().python_repr())
    }
}

impl std::fmt::Display for OptunaDistribution {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_optuna_json())
    }
}

impl OptunaDistribution {
    /// `FloatDistribution(low, high, log, step)` with Optuna's checks; like Optuna, a `high`
    /// that is not on the step grid is lowered to the last grid point.
    pub fn float(
        low: f64,
        high: f64,
        log: bool,
        step: Option<f64>,
    ) -> Result<Self, DistributionError> {
        if !low.is_finite() || !high.is_finite() {
            return Err(DistributionError::NonFiniteBounds { low, high });
        }
        if log && step.is_some() {
            return Err(DistributionError::LogWithStep);
        }
        if low > high {
            return Err(DistributionError::LowAboveHigh { low, high });
        }
        if log && low <= 0.0 {
            return Err(DistributionError::LogNeedsPositiveLow { low });
        }
        let mut high = high;
        if let Some(step) = step {
            if step.is_nan() || step <= 0.0 {
                return Err(DistributionError::StepNotPositive { step });
            }
            high = adjust_discrete_high(low, high, step)?;
        }
        Ok(OptunaDistribution::Float(FloatDistribution {
            step,
            low,
            high,
            log,
        }))
    }

    /// `IntDistribution(low, high, log, step)` with Optuna's checks and `high` adjustment.
    pub fn int(low: i64, high: i64, log: bool, step: i64) -> Result<Self, DistributionError> {
        if log && step != 1 {
            return Err(DistributionError::LogWithStep);
        }
        if low > high {
            return Err(DistributionError::LowAboveHigh {
                low: low as f64,
                high: high as f64,
            });
        }
        if log && low < 1 {
            return Err(DistributionError::LogNeedsPositiveLow { low: low as f64 });
        }
        if step <= 0 {
            return Err(DistributionError::StepNotPositive { step: step as f64 });
        }
        let r = high - low;
        let high = if r % step != 0 {
            r / step * step + low
        } else {
            high
        };
        Ok(OptunaDistribution::Int(IntDistribution {
            log,
            step,
            low,
            high,
        }))
    }

    /// `CategoricalDistribution(choices)`; at least one choice.
    pub fn categorical(choices: Vec<CategoricalChoice>) -> Result<Self, DistributionError> {
        if choices.is_empty() {
            return Err(DistributionError::NoChoices);
        }
        Ok(OptunaDistribution::Categorical(CategoricalDistribution {
            choices,
        }))
    }

    /// Re-checks a distribution whose fields were set directly (they are public); returns the
    /// normalised form Optuna would hold (the constructor's `high` adjustment applied).
    pub fn validated(&self) -> Result<Self, DistributionError> {
        match self {
            OptunaDistribution::Float(d) => Self::float(d.low, d.high, d.log, d.step),
            OptunaDistribution::Int(d) => Self::int(d.low, d.high, d.log, d.step),
            OptunaDistribution::Categorical(d) => Self::categorical(d.choices.clone()),
        }
    }

    /// Optuna's class name, e.g. `FloatDistribution`.
    pub fn class_name(&self) -> &'static str {
        match self {
            OptunaDistribution::Float(_) => "FloatDistribution",
            OptunaDistribution::Int(_) => "IntDistribution",
            OptunaDistribution::Categorical(_) => "CategoricalDistribution",
        }
    }

    /// Optuna's `_contains(internal)`: whether a stored internal value belongs to the range.
    pub fn contains(&self, internal: f64) -> bool {
        match self {
            OptunaDistribution::Float(d) => match d.step {
                None => d.low <= internal && internal <= d.high,
                Some(step) => {
                    let k = (internal - d.low) / step;
                    d.low <= internal && internal <= d.high && (k - k.round()).abs() < 1.0e-8
                }
            },
            OptunaDistribution::Int(d) => {
                // Python's `%` with a positive divisor is non-negative: `rem_euclid`.
                (d.low as f64) <= internal
                    && internal <= d.high as f64
                    && (internal - d.low as f64).rem_euclid(d.step as f64) == 0.0
            }
            OptunaDistribution::Categorical(d) => {
                // `int(x)` truncates toward zero.
                internal.is_finite() && {
                    let index = internal.trunc();
                    0.0 <= index && index < d.choices.len() as f64
                }
            }
        }
    }

    /// Optuna's `single()`: the range holds exactly one value.
    pub fn single(&self) -> bool {
        match self {
            OptunaDistribution::Float(d) => match d.step {
                None => d.low == d.high,
                Some(step) => {
                    d.low == d.high
                        || match (Decimal::of(d.high), Decimal::of(d.low), Decimal::of(step)) {
                            (Some(h), Some(l), Some(s)) => match Decimal::align(&[h, l, s]) {
                                Some((v, _)) => v[0] - v[1] < v[2],
                                None => d.high - d.low < step,
                            },
                            _ => d.high - d.low < step,
                        }
                }
            },
            OptunaDistribution::Int(d) => d.low == d.high || (!d.log && (d.high - d.low) < d.step),
            OptunaDistribution::Categorical(d) => d.choices.len() == 1,
        }
    }

    /// External → internal representation (Optuna's `to_internal_repr`).
    pub fn to_internal(&self, value: &ParamValue) -> Result<f64, DistributionError> {
        let bad = |reason: &str| DistributionError::BadValue {
            value: format!("{value:?}"),
            distribution: self.to_optuna_json(),
            reason: reason.to_owned(),
        };
        match self {
            OptunaDistribution::Float(FloatDistribution { log, .. })
            | OptunaDistribution::Int(IntDistribution { log, .. }) => {
                let x = match value {
                    ParamValue::Float(f) => *f,
                    ParamValue::Int(i) => *i as f64,
                    ParamValue::Choice(c) => {
                        c.as_number().ok_or_else(|| bad("a number is expected"))?
                    }
                };
                if x.is_nan() {
                    return Err(bad("NaN is not a valid parameter value"));
                }
                if *log && x <= 0.0 {
                    return Err(bad("log distributions need a positive value"));
                }
                Ok(x)
            }
            OptunaDistribution::Categorical(d) => {
                let choice = match value {
                    ParamValue::Choice(c) => c.clone(),
                    ParamValue::Float(f) => CategoricalChoice::Float(*f),
                    ParamValue::Int(i) => CategoricalChoice::Int(*i),
                };
                d.choices
                    .iter()
                    .position(|c| *c == choice)
                    .map(|i| i as f64)
                    .ok_or_else(|| bad("not one of the choices"))
            }
        }
    }

    /// Internal → external representation (Optuna's `to_external_repr`).
    pub fn to_external(&self, internal: f64) -> Result<ParamValue, DistributionError> {
        match self {
            OptunaDistribution::Float(_) => Ok(ParamValue::Float(internal)),
            OptunaDistribution::Int(_) | OptunaDistribution::Categorical(_)
                if !internal.is_finite() =>
            {
                Err(DistributionError::BadValue {
                    value: internal.to_string(),
                    distribution: self.to_optuna_json(),
                    reason: "an int or a choice index must be finite".to_owned(),
                })
            }
            // Python's `int(x)` truncates toward zero.
            OptunaDistribution::Int(_) => Ok(ParamValue::Int(internal.trunc() as i64)),
            OptunaDistribution::Categorical(d) => {
                let index = internal.trunc();
                if index < 0.0 || index >= d.choices.len() as f64 {
                    return Err(DistributionError::BadValue {
                        value: internal.to_string(),
                        distribution: self.to_optuna_json(),
                        reason: format!("choice index out of 0..{}", d.choices.len()),
                    });
                }
                Ok(ParamValue::Choice(d.choices[index as usize].clone()))
            }
        }
    }

    /// Optuna's `check_distribution_compatibility(old, new)`: the same class, the same `log`,
    /// and for categoricals the same choices. Returns the reason when they are not compatible.
    pub fn compatibility_with(&self, new: &OptunaDistribution) -> Result<(), String> {
        use OptunaDistribution as D;
        match (self, new) {
            (D::Float(a), D::Float(b)) if a.log != b.log => {
                Err("cannot set a different log configuration for the same parameter name".into())
            }
            (D::Int(a), D::Int(b)) if a.log != b.log => {
                Err("cannot set a different log configuration for the same parameter name".into())
            }
            (D::Float(_), D::Float(_)) | (D::Int(_), D::Int(_)) => Ok(()),
            (D::Categorical(a), D::Categorical(b)) => {
                if a == b {
                    Ok(())
                } else {
                    Err("CategoricalDistribution does not support dynamic value space".into())
                }
            }
            _ => Err("cannot set a different distribution kind for the same parameter name".into()),
        }
    }

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
                "FloatDistribution" => Self::float(
                    req_f64(a("low"), "low")?,
                    req_f64(a("high"), "high")?,
                    opt_bool(a("log"), "log")?.unwrap_or(false),
                    opt_f64(a("step"), "step")?,
                ),
                "UniformDistribution" => Self::float(
                    req_f64(a("low"), "low")?,
                    req_f64(a("high"), "high")?,
                    false,
                    None,
                ),
                "LogUniformDistribution" => Self::float(
                    req_f64(a("low"), "low")?,
                    req_f64(a("high"), "high")?,
                    true,
                    None,
                ),
                "DiscreteUniformDistribution" => Self::float(
                    req_f64(a("low"), "low")?,
                    req_f64(a("high"), "high")?,
                    false,
                    Some(req_f64(a("q"), "q")?),
                ),
                "IntDistribution" => Self::int(
                    req_i64(a("low"), "low")?,
                    req_i64(a("high"), "high")?,
                    opt_bool(a("log"), "log")?.unwrap_or(false),
                    opt_i64(a("step"), "step")?.unwrap_or(1),
                ),
                "IntUniformDistribution" | "IntLogUniformDistribution" => Self::int(
                    req_i64(a("low"), "low")?,
                    req_i64(a("high"), "high")?,
                    name == "IntLogUniformDistribution",
                    opt_i64(a("step"), "step")?.unwrap_or(1),
                ),
                _ => Self::categorical(choices(a("choices"))?),
            }
        } else {
            // The short form: {"type": "float"|"int"|"categorical", ...}.
            match v.get("type") {
                Some(JsonValue::Str(t)) if t == "categorical" => {
                    Self::categorical(choices(v.get("choices"))?)
                }
                Some(JsonValue::Str(t)) if t == "float" => Self::float(
                    req_f64(v.get("low"), "low")?,
                    req_f64(v.get("high"), "high")?,
                    opt_bool(v.get("log"), "log")?.unwrap_or(false),
                    opt_f64(v.get("step"), "step")?,
                ),
                Some(JsonValue::Str(t)) if t == "int" => Self::int(
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

/// A decimal number `mantissa × 10^exponent` built from a float's shortest repr, which is what
/// Python's `decimal.Decimal(str(x))` holds.
#[derive(Clone, Copy)]
struct Decimal {
    mantissa: i128,
    exponent: i32,
}

impl Decimal {
    fn of(x: f64) -> Option<Decimal> {
        if !x.is_finite() {
            return None;
        }
        let sci = format!("{x:e}");
        let (m, e) = sci.split_once('e')?;
        let e: i32 = e.parse().ok()?;
        let (int, frac) = m.split_once('.').unwrap_or((m, ""));
        let mantissa: i128 = format!("{int}{frac}").parse().ok()?;
        Some(Decimal {
            mantissa,
            exponent: e - frac.len() as i32,
        })
    }

    /// The mantissas scaled to the smallest common exponent, or None on i128 overflow.
    fn align(values: &[Decimal]) -> Option<(Vec<i128>, i32)> {
        let e = values.iter().map(|d| d.exponent).min()?;
        let scaled = values
            .iter()
            .map(|d| {
                let shift = u32::try_from(d.exponent - e).ok()?;
                10i128.checked_pow(shift)?.checked_mul(d.mantissa)
            })
            .collect::<Option<Vec<_>>>()?;
        Some((scaled, e))
    }
}

/// Optuna's `_adjust_discrete_uniform_high`: in decimal arithmetic on the values' `str()`, if
/// `high - low` is not a multiple of `step`, `high` becomes `(r // step) * step + low`.
fn adjust_discrete_high(low: f64, high: f64, step: f64) -> Result<f64, DistributionError> {
    let unalignable = DistributionError::UnalignableStep { low, high, step };
    let parts = [Decimal::of(low), Decimal::of(high), Decimal::of(step)];
    let [Some(l), Some(h), Some(s)] = parts else {
        return Err(unalignable);
    };
    let (v, e) = Decimal::align(&[l, h, s]).ok_or(unalignable.clone())?;
    let (l, h, s) = (v[0], v[1], v[2]);
    let r = h - l;
    if r % s == 0 {
        return Ok(high);
    }
    // r >= 0 here, so Decimal's truncating `//` is the floor.
    let adjusted = (r / s)
        .checked_mul(s)
        .and_then(|x| x.checked_add(l))
        .ok_or(unalignable)?;
    format!("{adjusted}e{e}")
        .parse::<f64>()
        .map_err(|_| DistributionError::UnalignableStep { low, high, step })
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn high_is_adjusted_to_the_step_grid_like_optuna() {
        // Python: FloatDistribution(0.1, 0.32, step=0.05).high == 0.3;
        //         FloatDistribution(0.0, 1.0, step=0.3).high == 0.9 (decimal, not 3 * 0.3)
        let d = OptunaDistribution::float(0.1, 0.32, false, Some(0.05)).unwrap();
        assert!(
            matches!(d, OptunaDistribution::Float(FloatDistribution { high, .. }) if high == 0.3)
        );
        let d = OptunaDistribution::float(0.0, 1.0, false, Some(0.3)).unwrap();
        assert!(
            matches!(d, OptunaDistribution::Float(FloatDistribution { high, .. }) if high == 0.9)
        );
        // Python: IntDistribution(0, 10, step=3).high == 9
        let d = OptunaDistribution::int(0, 10, false, 3).unwrap();
        assert!(matches!(
            d,
            OptunaDistribution::Int(IntDistribution { high: 9, .. })
        ));
    }

    #[test]
    fn invalid_distributions_are_refused() {
        assert!(OptunaDistribution::float(1.0, 0.0, false, None).is_err());
        assert!(OptunaDistribution::float(0.0, 1.0, true, None).is_err());
        assert!(OptunaDistribution::float(0.1, 1.0, true, Some(0.1)).is_err());
        assert!(OptunaDistribution::float(0.0, 1.0, false, Some(0.0)).is_err());
        assert!(OptunaDistribution::int(0, 10, true, 1).is_err());
        assert!(OptunaDistribution::int(1, 10, true, 2).is_err());
        assert!(OptunaDistribution::int(0, 10, false, 0).is_err());
        assert!(OptunaDistribution::categorical(vec![]).is_err());
        for bad in [
            r#"{"name": "BetaDistribution", "attributes": {}}"#,
            r#"{"name": "FloatDistribution", "attributes": {"low": 0.0}}"#,
            r#"{"name": "FloatDistribution", "attributes": {"low": 0.0, "high": 1.0, "q": 1}}"#,
            r#"{"name": "CategoricalDistribution", "attributes": {"choices": [[1]]}}"#,
            "not json",
        ] {
            assert!(OptunaDistribution::from_optuna_json(bad).is_err(), "{bad}");
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
    fn contains_and_conversions_follow_optuna() {
        let f = OptunaDistribution::float(0.1, 0.3, false, Some(0.05)).unwrap();
        assert!(f.contains(0.25) && f.contains(0.1) && !f.contains(0.26) && !f.contains(0.35));
        let i = OptunaDistribution::int(32, 256, false, 32).unwrap();
        assert!(i.contains(64.0) && !i.contains(65.0) && !i.contains(288.0));
        assert_eq!(i.to_external(160.0).unwrap(), ParamValue::Int(160));
        let c = OptunaDistribution::from_optuna_json(OPTUNA_JSON[7]).unwrap();
        assert!(c.contains(3.0) && !c.contains(4.0) && !c.contains(-1.0));
        assert_eq!(
            c.to_external(1.0).unwrap(),
            ParamValue::Choice(CategoricalChoice::Bool(true))
        );
        assert_eq!(
            c.to_internal(&ParamValue::Choice(CategoricalChoice::Str("auto".into())))
                .unwrap(),
            3.0
        );
        // Python: [None, True, 0.5, "auto"].index(1) == 1 because 1 == True.
        assert_eq!(c.to_internal(&ParamValue::Int(1)).unwrap(), 1.0);
        assert!(c.to_internal(&ParamValue::Int(7)).is_err());
        assert!(c.to_external(4.0).is_err());
        let lg = OptunaDistribution::float(1e-5, 0.1, true, None).unwrap();
        assert!(lg.to_internal(&ParamValue::Float(0.0)).is_err());
        assert!(
            !f.single()
                && OptunaDistribution::float(0.1, 0.12, false, Some(0.05))
                    .unwrap()
                    .single()
        );
    }

    #[test]
    fn compatibility_follows_optuna() {
        let a = OptunaDistribution::float(0.0, 1.0, false, None).unwrap();
        let b = OptunaDistribution::float(-5.0, 5.0, false, Some(0.5)).unwrap();
        let lg = OptunaDistribution::float(0.1, 1.0, true, None).unwrap();
        let i = OptunaDistribution::int(0, 3, false, 1).unwrap();
        let c1 = OptunaDistribution::from_optuna_json(OPTUNA_JSON[6]).unwrap();
        let c2 =
            OptunaDistribution::categorical(vec![CategoricalChoice::Str("tanh".into())]).unwrap();
        assert!(a.compatibility_with(&b).is_ok());
        assert!(a.compatibility_with(&lg).is_err());
        assert!(a.compatibility_with(&i).is_err());
        assert!(c1.compatibility_with(&c1.clone()).is_ok());
        assert!(c1.compatibility_with(&c2).is_err());
    }
}
