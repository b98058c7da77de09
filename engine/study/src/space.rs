//! Search spaces with Optuna's distributions (`optuna/distributions.py`, Optuna 5.0).
//!
//! Every parameter value has two forms, exactly as in Optuna:
//! - the *external* value a user sees ([`ParamValue`]): a float, an integer, or one of the
//!   choices of a categorical;
//! - the *internal* representation, an `f64`, which samplers work on and which Optuna's storage
//!   keeps in `trial_params.param_value`: the value itself for floats, the integer as a float
//!   for ints, and the **index into `choices`** for categoricals.
//!
//! Validation follows Optuna's constructors (low ≤ high, log needs low > 0 for floats and
//! low ≥ 1 for ints, no step with log, step > 0) with one deliberate difference: Optuna
//! silently lowers `high` when `high − low` is not a multiple of `step` (with a warning);
//! TradeTune refuses such a range and names the two valid ends, because a range the user did
//! not write is a hyperparameter they cannot see.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// A parameter value in its external form; also the type of categorical choices.
///
/// Optuna accepts `None`, `bool`, `int`, `float` and `str` as choices; so do we.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ParamValue {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
}

impl ParamValue {
    /// Equality as Optuna's `CategoricalDistribution.to_internal_repr` sees it: NaN equals NaN,
    /// and an integer equals a float of the same value (`1 == 1.0` in Python). Unlike Python,
    /// `true` is not equal to `1` (Optuna documents that coincidence as a known bug).
    pub fn same_as(&self, other: &ParamValue) -> bool {
        match (self, other) {
            (ParamValue::Null, ParamValue::Null) => true,
            (ParamValue::Bool(a), ParamValue::Bool(b)) => a == b,
            (ParamValue::Int(a), ParamValue::Int(b)) => a == b,
            (ParamValue::Float(a), ParamValue::Float(b)) => a == b || (a.is_nan() && b.is_nan()),
            (ParamValue::Int(i), ParamValue::Float(f))
            | (ParamValue::Float(f), ParamValue::Int(i)) => *i as f64 == *f,
            (ParamValue::Str(a), ParamValue::Str(b)) => a == b,
            _ => false,
        }
    }

    /// The value as JSON (non-finite floats become `null`, JSON has no NaN).
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            ParamValue::Null => serde_json::Value::Null,
            ParamValue::Bool(b) => serde_json::Value::Bool(*b),
            ParamValue::Int(i) => serde_json::Value::from(*i),
            ParamValue::Float(f) => serde_json::Value::from(*f),
            ParamValue::Str(s) => serde_json::Value::String(s.clone()),
        }
    }

    /// A short name of the value's type, for error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            ParamValue::Null => "null",
            ParamValue::Bool(_) => "boolean",
            ParamValue::Int(_) => "integer",
            ParamValue::Float(_) => "float",
            ParamValue::Str(_) => "string",
        }
    }
}

impl fmt::Display for ParamValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamValue::Null => write!(f, "null"),
            ParamValue::Bool(b) => write!(f, "{b}"),
            ParamValue::Int(i) => write!(f, "{i}"),
            ParamValue::Float(x) => write!(f, "{x}"),
            ParamValue::Str(s) => write!(f, "\"{s}\""),
        }
    }
}

/// Why a distribution or a value for it is invalid.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DistributionError {
    #[error("low ({low}) must not exceed high ({high})")]
    LowAboveHigh { low: f64, high: f64 },
    #[error("bounds must be finite numbers (got low = {low}, high = {high})")]
    NonFinite { low: f64, high: f64 },
    #[error("a log-scale float range needs low > 0 (got low = {low})")]
    FloatLogLow { low: f64 },
    #[error("a log-scale integer range needs low >= 1 (got low = {low})")]
    IntLogLow { low: i64 },
    #[error("step cannot be combined with log = true (Optuna does not support it)")]
    StepWithLog,
    #[error("step must be > 0 (got {step})")]
    NonPositiveStep { step: f64 },
    #[error(
        "high − low = {range} is not a multiple of step {step}; use high = {lower} or high = {upper}"
    )]
    StepDoesNotDivide {
        range: f64,
        step: f64,
        lower: f64,
        upper: f64,
    },
    #[error("a categorical needs at least one choice")]
    NoChoices,
    #[error("{value} is not a valid {expected}")]
    WrongValue { value: String, expected: String },
}

/// Floats on `[low, high]`, optionally log-scaled or on the grid `low + k·step`.
#[derive(Debug, Clone, PartialEq)]
pub struct FloatDistribution {
    low: f64,
    high: f64,
    log: bool,
    step: Option<f64>,
}

/// Integers on `[low, high]`, on the grid `low + k·step`, optionally log-scaled (step 1 only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntDistribution {
    low: i64,
    high: i64,
    log: bool,
    step: i64,
}

/// One of a list of choices; the internal representation is the index of the choice.
#[derive(Debug, Clone)]
pub struct CategoricalDistribution {
    choices: Vec<ParamValue>,
}

/// Relative tolerance of "step divides the range" for floats: `(high − low) / step` computed
/// in binary floating point is off by a few ulps for decimal steps such as 0.1.
const STEP_DIVIDES_RTOL: f64 = 1e-9;

impl FloatDistribution {
    pub fn new(
        low: f64,
        high: f64,
        log: bool,
        step: Option<f64>,
    ) -> Result<Self, DistributionError> {
        if !low.is_finite() || !high.is_finite() {
            return Err(DistributionError::NonFinite { low, high });
        }
        if log && step.is_some() {
            return Err(DistributionError::StepWithLog);
        }
        if low > high {
            return Err(DistributionError::LowAboveHigh { low, high });
        }
        if log && low <= 0.0 {
            return Err(DistributionError::FloatLogLow { low });
        }
        if let Some(step) = step {
            if !(step > 0.0 && step.is_finite()) {
                return Err(DistributionError::NonPositiveStep { step });
            }
            let k = (high - low) / step;
            if (k - k.round()).abs() > STEP_DIVIDES_RTOL * k.max(1.0) {
                return Err(DistributionError::StepDoesNotDivide {
                    range: high - low,
                    step,
                    lower: low + k.floor() * step,
                    upper: low + k.ceil() * step,
                });
            }
        }
        Ok(Self {
            low,
            high,
            log,
            step,
        })
    }

    pub fn low(&self) -> f64 {
        self.low
    }
    pub fn high(&self) -> f64 {
        self.high
    }
    pub fn log(&self) -> bool {
        self.log
    }
    pub fn step(&self) -> Option<f64> {
        self.step
    }

    /// Whether the range holds a single value (Optuna's `single()`).
    pub fn single(&self) -> bool {
        match self.step {
            None => self.low == self.high,
            Some(step) => (self.high - self.low) < step * (1.0 - STEP_DIVIDES_RTOL),
        }
    }

    /// Whether `v` lies in the range (and on the step grid, to Optuna's 1e-8 tolerance).
    pub fn contains(&self, v: f64) -> bool {
        if !(self.low <= v && v <= self.high) {
            return false;
        }
        match self.step {
            None => true,
            Some(step) => {
                let k = (v - self.low) / step;
                (k - k.round()).abs() < 1e-8
            }
        }
    }
}

impl IntDistribution {
    pub fn new(low: i64, high: i64, log: bool, step: i64) -> Result<Self, DistributionError> {
        if log && step != 1 {
            return Err(DistributionError::StepWithLog);
        }
        if low > high {
            return Err(DistributionError::LowAboveHigh {
                low: low as f64,
                high: high as f64,
            });
        }
        if log && low < 1 {
            return Err(DistributionError::IntLogLow { low });
        }
        if step <= 0 {
            return Err(DistributionError::NonPositiveStep { step: step as f64 });
        }
        let range = high.abs_diff(low);
        if !range.is_multiple_of(step.unsigned_abs()) {
            let k = (range / step.unsigned_abs()) as f64;
            return Err(DistributionError::StepDoesNotDivide {
                range: range as f64,
                step: step as f64,
                lower: low as f64 + k * step as f64,
                upper: low as f64 + (k + 1.0) * step as f64,
            });
        }
        Ok(Self {
            low,
            high,
            log,
            step,
        })
    }

    pub fn low(&self) -> i64 {
        self.low
    }
    pub fn high(&self) -> i64 {
        self.high
    }
    pub fn log(&self) -> bool {
        self.log
    }
    pub fn step(&self) -> i64 {
        self.step
    }

    pub fn single(&self) -> bool {
        self.low == self.high
    }

    pub fn contains(&self, v: f64) -> bool {
        v.fract() == 0.0
            && self.low as f64 <= v
            && v <= self.high as f64
            && (v as i128 - self.low as i128) % self.step as i128 == 0
    }

    /// Number of values on the grid.
    pub fn len(&self) -> u64 {
        self.high.abs_diff(self.low) / self.step.unsigned_abs() + 1
    }

    /// Never true: a valid integer range has at least one value (here for clippy's sake).
    pub fn is_empty(&self) -> bool {
        false
    }
}

impl CategoricalDistribution {
    /// Duplicated choices are accepted as Optuna does; the first one wins in [`Self::index_of`].
    pub fn new(choices: Vec<ParamValue>) -> Result<Self, DistributionError> {
        if choices.is_empty() {
            return Err(DistributionError::NoChoices);
        }
        Ok(Self { choices })
    }

    pub fn choices(&self) -> &[ParamValue] {
        &self.choices
    }

    pub fn single(&self) -> bool {
        self.choices.len() == 1
    }

    pub fn index_of(&self, value: &ParamValue) -> Option<usize> {
        self.choices.iter().position(|c| c.same_as(value))
    }

    pub fn contains(&self, v: f64) -> bool {
        v.fract() == 0.0 && v >= 0.0 && (v as usize) < self.choices.len()
    }
}

/// One searched parameter's distribution.
#[derive(Debug, Clone)]
pub enum Distribution {
    Float(FloatDistribution),
    Int(IntDistribution),
    Categorical(CategoricalDistribution),
}

impl Distribution {
    /// Optuna's `single()`: a range with one value, which samplers do not search.
    pub fn single(&self) -> bool {
        match self {
            Distribution::Float(d) => d.single(),
            Distribution::Int(d) => d.single(),
            Distribution::Categorical(d) => d.single(),
        }
    }

    /// Whether an internal representation is a valid value of this distribution.
    pub fn contains(&self, internal: f64) -> bool {
        match self {
            Distribution::Float(d) => d.contains(internal),
            Distribution::Int(d) => d.contains(internal),
            Distribution::Categorical(d) => d.contains(internal),
        }
    }

    /// External value → internal representation. Checks the type (and, for categoricals,
    /// membership) but not the range, like Optuna's `to_internal_repr`; see [`Self::contains`].
    pub fn to_internal(&self, value: &ParamValue) -> Result<f64, DistributionError> {
        let wrong = |expected: &str| DistributionError::WrongValue {
            value: value.to_string(),
            expected: expected.to_owned(),
        };
        match self {
            Distribution::Float(d) => {
                let v = match value {
                    ParamValue::Float(f) => *f,
                    ParamValue::Int(i) => *i as f64,
                    _ => return Err(wrong("float")),
                };
                if v.is_nan() || (d.log && v <= 0.0) {
                    return Err(wrong("value of a log-scale float"));
                }
                Ok(v)
            }
            Distribution::Int(_) => match value {
                ParamValue::Int(i) => Ok(*i as f64),
                ParamValue::Float(f) if f.fract() == 0.0 => Ok(*f),
                _ => Err(wrong("integer")),
            },
            Distribution::Categorical(d) => d
                .index_of(value)
                .map(|i| i as f64)
                .ok_or_else(|| wrong(&format!("choice (choices: {})", list(d.choices())))),
        }
    }

    /// Internal representation → external value (Optuna's `to_external_repr`).
    ///
    /// For categoricals an index outside the choices is clamped to the last choice; samplers
    /// never produce one, and storage validates indices with [`Self::contains`] when reading.
    pub fn to_external(&self, internal: f64) -> ParamValue {
        match self {
            Distribution::Float(_) => ParamValue::Float(internal),
            Distribution::Int(_) => ParamValue::Int(internal.round() as i64),
            Distribution::Categorical(d) => {
                let i = (internal.max(0.0) as usize).min(d.choices.len() - 1);
                d.choices[i].clone()
            }
        }
    }
}

impl fmt::Display for Distribution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Distribution::Float(d) => {
                write!(f, "float [{}, {}]", d.low, d.high)?;
                if d.log {
                    write!(f, " log")?;
                }
                if let Some(s) = d.step {
                    write!(f, " step {s}")?;
                }
                Ok(())
            }
            Distribution::Int(d) => {
                write!(f, "int [{}, {}]", d.low, d.high)?;
                if d.log {
                    write!(f, " log")?;
                }
                if d.step != 1 {
                    write!(f, " step {}", d.step)?;
                }
                Ok(())
            }
            Distribution::Categorical(d) => write!(f, "categorical {{{}}}", list(&d.choices)),
        }
    }
}

fn list(choices: &[ParamValue]) -> String {
    choices
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A problem with a named parameter of a search space.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SpaceError {
    #[error("search parameter '{name}': {source}")]
    Invalid {
        name: String,
        #[source]
        source: DistributionError,
    },
    #[error("search parameter '{name}' is defined twice")]
    Duplicate { name: String },
    #[error("parameter '{name}' is not in the search space (its parameters: {known})")]
    Unknown { name: String, known: String },
    #[error("parameter '{name}' has no value")]
    Missing { name: String },
}

/// Parameter values of one trial in internal representation, by name (what Optuna stores).
pub type InternalParams = BTreeMap<String, f64>;

/// Named parameters and their distributions, ordered by name (as Optuna's intersection search
/// space is, which fixes the order in which samplers draw them).
#[derive(Debug, Clone, Default)]
pub struct SearchSpace {
    params: BTreeMap<String, Distribution>,
}

impl SearchSpace {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a parameter; a name may be defined once.
    pub fn insert(&mut self, name: &str, dist: Distribution) -> Result<(), SpaceError> {
        if self.params.contains_key(name) {
            return Err(SpaceError::Duplicate {
                name: name.to_owned(),
            });
        }
        self.params.insert(name.to_owned(), dist);
        Ok(())
    }

    /// Adds a float parameter (see [`FloatDistribution::new`]).
    pub fn add_float(
        &mut self,
        name: &str,
        low: f64,
        high: f64,
        log: bool,
        step: Option<f64>,
    ) -> Result<(), SpaceError> {
        let d = FloatDistribution::new(low, high, log, step).map_err(|e| invalid(name, e))?;
        self.insert(name, Distribution::Float(d))
    }

    /// Adds an integer parameter (see [`IntDistribution::new`]).
    pub fn add_int(
        &mut self,
        name: &str,
        low: i64,
        high: i64,
        log: bool,
        step: i64,
    ) -> Result<(), SpaceError> {
        let d = IntDistribution::new(low, high, log, step).map_err(|e| invalid(name, e))?;
        self.insert(name, Distribution::Int(d))
    }

    /// Adds a categorical parameter.
    pub fn add_categorical(
        &mut self,
        name: &str,
        choices: Vec<ParamValue>,
    ) -> Result<(), SpaceError> {
        let d = CategoricalDistribution::new(choices).map_err(|e| invalid(name, e))?;
        self.insert(name, Distribution::Categorical(d))
    }

    pub fn get(&self, name: &str) -> Option<&Distribution> {
        self.params.get(name)
    }

    /// Parameters in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Distribution)> {
        self.params.iter().map(|(k, v)| (k.as_str(), v))
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.params.keys().map(String::as_str)
    }

    pub fn len(&self) -> usize {
        self.params.len()
    }

    pub fn is_empty(&self) -> bool {
        self.params.is_empty()
    }

    fn lookup(&self, name: &str) -> Result<&Distribution, SpaceError> {
        self.params.get(name).ok_or_else(|| SpaceError::Unknown {
            name: name.to_owned(),
            known: self.names().collect::<Vec<_>>().join(", "),
        })
    }

    /// External values → internal representation; every name must be in the space and every
    /// value in its distribution's range.
    pub fn to_internal(
        &self,
        values: &BTreeMap<String, ParamValue>,
    ) -> Result<InternalParams, SpaceError> {
        let mut out = InternalParams::new();
        for (name, value) in values {
            let dist = self.lookup(name)?;
            let v = dist.to_internal(value).map_err(|e| invalid(name, e))?;
            if !dist.contains(v) {
                return Err(invalid(
                    name,
                    DistributionError::WrongValue {
                        value: value.to_string(),
                        expected: format!("value of {dist}"),
                    },
                ));
            }
            out.insert(name.clone(), v);
        }
        Ok(out)
    }

    /// Internal representation → external values, for every parameter of the space.
    pub fn to_external(
        &self,
        params: &InternalParams,
    ) -> Result<BTreeMap<String, ParamValue>, SpaceError> {
        self.iter()
            .map(|(name, dist)| {
                let v = params.get(name).ok_or_else(|| SpaceError::Missing {
                    name: name.to_owned(),
                })?;
                Ok((name.to_owned(), dist.to_external(*v)))
            })
            .collect()
    }
}

fn invalid(name: &str, source: DistributionError) -> SpaceError {
    SpaceError::Invalid {
        name: name.to_owned(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_validation_matches_optuna() {
        assert!(FloatDistribution::new(0.0, 1.0, false, None).is_ok());
        assert!(
            FloatDistribution::new(1.0, 1.0, false, None)
                .unwrap()
                .single()
        );
        assert_eq!(
            FloatDistribution::new(2.0, 1.0, false, None),
            Err(DistributionError::LowAboveHigh {
                low: 2.0,
                high: 1.0
            })
        );
        assert_eq!(
            FloatDistribution::new(0.0, 1.0, true, None),
            Err(DistributionError::FloatLogLow { low: 0.0 })
        );
        assert_eq!(
            FloatDistribution::new(1e-5, 1.0, true, Some(0.1)),
            Err(DistributionError::StepWithLog)
        );
        assert_eq!(
            FloatDistribution::new(0.0, 1.0, false, Some(0.0)),
            Err(DistributionError::NonPositiveStep { step: 0.0 })
        );
        assert!(matches!(
            FloatDistribution::new(f64::NEG_INFINITY, 1.0, false, None),
            Err(DistributionError::NonFinite { .. })
        ));
        // Decimal steps that divide the range exactly in decimal are accepted despite binary
        // rounding; 0.25 does not divide 1.1.
        assert!(FloatDistribution::new(0.0, 1.0, false, Some(0.1)).is_ok());
        assert!(FloatDistribution::new(0.1, 0.7, false, Some(0.2)).is_ok());
        match FloatDistribution::new(0.0, 1.1, false, Some(0.25)) {
            Err(DistributionError::StepDoesNotDivide { lower, upper, .. }) => {
                assert_eq!((lower, upper), (1.0, 1.25));
            }
            other => panic!("{other:?}"),
        }
        // single() with a step: the range is shorter than one step.
        assert!(
            FloatDistribution::new(0.5, 0.5, false, Some(0.1))
                .unwrap()
                .single()
        );
        assert!(
            !FloatDistribution::new(0.5, 0.6, false, Some(0.1))
                .unwrap()
                .single()
        );
    }

    #[test]
    fn int_validation_matches_optuna() {
        assert!(IntDistribution::new(1, 10, false, 1).is_ok());
        assert_eq!(
            IntDistribution::new(0, 10, true, 1),
            Err(DistributionError::IntLogLow { low: 0 })
        );
        assert_eq!(
            IntDistribution::new(1, 10, true, 2),
            Err(DistributionError::StepWithLog)
        );
        assert_eq!(
            IntDistribution::new(0, 10, false, 0),
            Err(DistributionError::NonPositiveStep { step: 0.0 })
        );
        assert_eq!(
            IntDistribution::new(5, 4, false, 1),
            Err(DistributionError::LowAboveHigh {
                low: 5.0,
                high: 4.0
            })
        );
        match IntDistribution::new(0, 10, false, 3) {
            Err(DistributionError::StepDoesNotDivide { lower, upper, .. }) => {
                assert_eq!((lower, upper), (9.0, 12.0))
            }
            other => panic!("{other:?}"),
        }
        let d = IntDistribution::new(-4, 8, false, 4).unwrap();
        assert_eq!(d.len(), 4);
        assert!(d.contains(0.0) && d.contains(8.0) && !d.contains(2.0) && !d.contains(12.0));
        assert!(IntDistribution::new(i64::MIN, i64::MAX, false, 1).is_ok());
    }

    #[test]
    fn internal_representation_is_optunas() {
        let cat = Distribution::Categorical(
            CategoricalDistribution::new(vec![
                ParamValue::Str("f32".into()),
                ParamValue::Bool(true),
                ParamValue::Int(3),
                ParamValue::Float(f64::NAN),
                ParamValue::Null,
            ])
            .unwrap(),
        );
        assert_eq!(cat.to_internal(&ParamValue::Str("f32".into())), Ok(0.0));
        assert_eq!(cat.to_internal(&ParamValue::Bool(true)), Ok(1.0));
        assert_eq!(cat.to_internal(&ParamValue::Float(3.0)), Ok(2.0));
        assert_eq!(cat.to_internal(&ParamValue::Float(f64::NAN)), Ok(3.0));
        assert_eq!(cat.to_internal(&ParamValue::Null), Ok(4.0));
        assert!(
            cat.to_internal(&ParamValue::Int(1)).is_err(),
            "true is not 1"
        );
        assert!(matches!(cat.to_external(2.0), ParamValue::Int(3)));

        let int = Distribution::Int(IntDistribution::new(1, 64, true, 1).unwrap());
        assert_eq!(int.to_internal(&ParamValue::Int(32)), Ok(32.0));
        assert!(matches!(int.to_external(32.0), ParamValue::Int(32)));
        assert!(int.to_internal(&ParamValue::Float(1.5)).is_err());
        assert!(int.to_internal(&ParamValue::Str("2".into())).is_err());

        let float = Distribution::Float(FloatDistribution::new(1e-5, 1e-2, true, None).unwrap());
        assert_eq!(float.to_internal(&ParamValue::Float(3e-4)), Ok(3e-4));
        assert!(float.to_internal(&ParamValue::Float(-1.0)).is_err());
        assert!(!float.contains(0.5));
    }

    #[test]
    fn search_space_names_errors() {
        let mut s = SearchSpace::new();
        s.add_float("ppo.learning_rate", 1e-5, 1e-2, true, None)
            .unwrap();
        s.add_int("env.n_envs", 8, 64, false, 8).unwrap();
        assert_eq!(
            s.add_int("env.n_envs", 1, 2, false, 1),
            Err(SpaceError::Duplicate {
                name: "env.n_envs".into()
            })
        );
        let e = s.add_float("ppo.gamma", 1.0, 0.9, false, None).unwrap_err();
        assert_eq!(
            e.to_string(),
            "search parameter 'ppo.gamma': low (1) must not exceed high (0.9)"
        );
        let mut ext = BTreeMap::new();
        ext.insert("ppo.lr".to_owned(), ParamValue::Float(0.1));
        let e = s.to_internal(&ext).unwrap_err();
        assert!(
            e.to_string().contains("env.n_envs, ppo.learning_rate"),
            "{e}"
        );
        ext.clear();
        ext.insert("env.n_envs".to_owned(), ParamValue::Int(12));
        assert!(s.to_internal(&ext).is_err(), "12 is off the step grid");
        ext.insert("env.n_envs".to_owned(), ParamValue::Int(16));
        assert_eq!(s.to_internal(&ext).unwrap()["env.n_envs"], 16.0);
    }
}
