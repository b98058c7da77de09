//! Optuna's three distributions (`optuna/distributions.py`, Optuna 5.0) and their checks; a
//! value's two forms under them, and their compatibility, are `model::repr`.
//!
//! A value's *external* form is the [`ParamValue`] a user sees; its *internal* form is the f64
//! that samplers work on and that Optuna's storage keeps in `trial_params.param_value`: the
//! value itself for floats, the integer as a float for ints, and the **index into `choices`**
//! for categoricals.
//!
//! The constructors check what Optuna's constructors check (low ≤ high, log needs low > 0 for
//! floats and low ≥ 1 for ints, no step with log, step > 0) with one deliberate difference:
//! Optuna silently lowers `high` when `high − low` is not a multiple of `step` (with a warning);
//! TradeTune refuses such a range and names the two valid ends, because a range the user did
//! not write is a hyperparameter they cannot see. Only the reader of Optuna's JSON
//! (`storage::distribution_json`) applies Optuna's adjustment, to read what Optuna accepts.
//! Fields are public (Optuna's attributes, in Optuna's order); [`OptunaDistribution::validated`]
//! re-checks a distribution whose fields were set by hand.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::decimal;
use super::value::{CategoricalChoice, ParamValue};
use crate::json_value::JsonError;

/// One of Optuna's three distributions. The serde form is Optuna's
/// (`{"name": "FloatDistribution", "attributes": {...}}`); the bytes stored in the database
/// come from [`OptunaDistribution::to_optuna_json`].
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

/// `optuna.distributions.FloatDistribution`: floats on `[low, high]`, optionally log-scaled or
/// on the grid `low + k·step`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FloatDistribution {
    pub step: Option<f64>,
    pub low: f64,
    pub high: f64,
    pub log: bool,
}

/// `optuna.distributions.IntDistribution`: integers on `[low, high]` on the grid
/// `low + k·step`, optionally log-scaled (step 1 only).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IntDistribution {
    pub log: bool,
    pub step: i64,
    pub low: i64,
    pub high: i64,
}

/// `optuna.distributions.CategoricalDistribution`: one of a list of choices.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CategoricalDistribution {
    pub choices: Vec<CategoricalChoice>,
}

/// Why a distribution, or a value for one, is invalid. The caller names the parameter (see
/// `StorageError::Distribution` and the study's `SpaceError::Invalid`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DistributionError {
    #[error("low ({low}) must not exceed high ({high})")]
    LowAboveHigh { low: f64, high: f64 },
    #[error("low and high must be finite numbers (got low = {low}, high = {high})")]
    NonFinite { low: f64, high: f64 },
    #[error("a log-scale float range needs low > 0 (got low = {low})")]
    FloatLogLow { low: f64 },
    #[error("a log-scale integer range needs low >= 1 (got low = {low})")]
    IntLogLow { low: i64 },
    #[error("step cannot be combined with log = true (Optuna allows only step = 1 for log ints)")]
    StepWithLog,
    #[error("step must be > 0 (got step = {step})")]
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
    #[error("distribution_json: {0}")]
    Json(#[from] JsonError),
    #[error("distribution_json: {0}")]
    Format(String),
}

/// Relative tolerance of "step divides the range" for floats whose decimal forms cannot share
/// one grid (exponents too far apart for exact arithmetic): `(high − low) / step` in binary
/// floating point is off by a few ulps for decimal steps such as 0.1.
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
            let not_dividing = |lower, upper| DistributionError::StepDoesNotDivide {
                range: high - low,
                step,
                lower,
                upper,
            };
            match decimal::grid_around(low, high, step) {
                Some((lower, upper)) if lower != high => return Err(not_dividing(lower, upper)),
                Some(_) => {}
                None => {
                    let k = (high - low) / step;
                    if (k - k.round()).abs() > STEP_DIVIDES_RTOL * k.max(1.0) {
                        return Err(not_dividing(low + k.floor() * step, low + k.ceil() * step));
                    }
                }
            }
        }
        Ok(Self {
            step,
            low,
            high,
            log,
        })
    }

    /// Optuna's `single()`: the range holds one value.
    pub fn single(&self) -> bool {
        match self.step {
            None => self.low == self.high,
            Some(step) => {
                self.low == self.high
                    || decimal::range_below_step(self.low, self.high, step)
                        .unwrap_or(self.high - self.low < step * (1.0 - STEP_DIVIDES_RTOL))
            }
        }
    }

    /// Optuna's `_contains`: `v` lies in the range (and on the step grid, to 1e-8).
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
        let step_u = step.unsigned_abs();
        if !range.is_multiple_of(step_u) {
            let k = (range / step_u) as f64;
            return Err(DistributionError::StepDoesNotDivide {
                range: range as f64,
                step: step as f64,
                lower: low as f64 + k * step as f64,
                upper: low as f64 + (k + 1.0) * step as f64,
            });
        }
        Ok(Self {
            log,
            step,
            low,
            high,
        })
    }

    /// Optuna's `single()`.
    pub fn single(&self) -> bool {
        self.low == self.high || (!self.log && self.high.abs_diff(self.low) < self.step_u64())
    }

    /// Optuna's `_contains`: an integer in the range, on the step grid.
    pub fn contains(&self, v: f64) -> bool {
        self.step > 0
            && v.fract() == 0.0
            && self.low as f64 <= v
            && v <= self.high as f64
            && (v as i128 - self.low as i128) % self.step as i128 == 0
    }

    /// Number of values on the grid.
    pub fn len(&self) -> u64 {
        self.high.abs_diff(self.low) / self.step_u64().max(1) + 1
    }

    /// Never true: a valid integer range has at least one value (here for clippy's sake).
    pub fn is_empty(&self) -> bool {
        false
    }

    fn step_u64(&self) -> u64 {
        self.step.max(0).unsigned_abs()
    }
}

impl CategoricalDistribution {
    /// Duplicated choices are accepted as Optuna does; the first one wins in [`Self::index_of`].
    pub fn new(choices: Vec<CategoricalChoice>) -> Result<Self, DistributionError> {
        if choices.is_empty() {
            return Err(DistributionError::NoChoices);
        }
        Ok(Self { choices })
    }

    /// Optuna's `single()`.
    pub fn single(&self) -> bool {
        self.choices.len() == 1
    }

    /// The index of a value among the choices (the internal representation).
    pub fn index_of(&self, value: &ParamValue) -> Option<usize> {
        let value = value.as_choice();
        self.choices.iter().position(|c| *c == *value)
    }

    /// A valid index: an integer in `0..len`.
    pub fn contains(&self, v: f64) -> bool {
        v.fract() == 0.0 && v >= 0.0 && (v as usize) < self.choices.len()
    }
}

impl PartialEq for CategoricalDistribution {
    /// Optuna's `CategoricalDistribution.__eq__`: same length, pairwise equal choices.
    fn eq(&self, other: &Self) -> bool {
        self.choices.len() == other.choices.len()
            && self.choices.iter().zip(&other.choices).all(|(a, b)| a == b)
    }
}

impl OptunaDistribution {
    /// `FloatDistribution(low, high, log, step)`, checked (see the module docs).
    pub fn float(
        low: f64,
        high: f64,
        log: bool,
        step: Option<f64>,
    ) -> Result<Self, DistributionError> {
        FloatDistribution::new(low, high, log, step).map(OptunaDistribution::Float)
    }

    /// `IntDistribution(low, high, log, step)`, checked.
    pub fn int(low: i64, high: i64, log: bool, step: i64) -> Result<Self, DistributionError> {
        IntDistribution::new(low, high, log, step).map(OptunaDistribution::Int)
    }

    /// `CategoricalDistribution(choices)`; at least one choice.
    pub fn categorical(choices: Vec<CategoricalChoice>) -> Result<Self, DistributionError> {
        CategoricalDistribution::new(choices).map(OptunaDistribution::Categorical)
    }

    /// Re-checks a distribution whose fields were set directly (they are public).
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

    /// Optuna's `single()`: a range with one value, which samplers do not search.
    pub fn single(&self) -> bool {
        match self {
            OptunaDistribution::Float(d) => d.single(),
            OptunaDistribution::Int(d) => d.single(),
            OptunaDistribution::Categorical(d) => d.single(),
        }
    }

    /// Optuna's `_contains(internal)`: whether an internal value belongs to the range.
    pub fn contains(&self, internal: f64) -> bool {
        match self {
            OptunaDistribution::Float(d) => d.contains(internal),
            OptunaDistribution::Int(d) => d.contains(internal),
            OptunaDistribution::Categorical(d) => d.contains(internal),
        }
    }
}

impl fmt::Display for OptunaDistribution {
    /// A short human form (`float [1e-05, 0.01] log`); Optuna's JSON is
    /// [`OptunaDistribution::to_optuna_json`].
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OptunaDistribution::Float(d) => {
                write!(f, "float [{}, {}]", d.low, d.high)?;
                if d.log {
                    write!(f, " log")?;
                }
                if let Some(s) = d.step {
                    write!(f, " step {s}")?;
                }
                Ok(())
            }
            OptunaDistribution::Int(d) => {
                write!(f, "int [{}, {}]", d.low, d.high)?;
                if d.log {
                    write!(f, " log")?;
                }
                if d.step != 1 {
                    write!(f, " step {}", d.step)?;
                }
                Ok(())
            }
            OptunaDistribution::Categorical(d) => write!(f, "categorical {{{}}}", list(&d.choices)),
        }
    }
}

/// The choices, comma-separated, for messages.
pub(super) fn list(choices: &[CategoricalChoice]) -> String {
    choices
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
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
        assert!(FloatDistribution::new(0.0, 1.0, false, Some(f64::INFINITY)).is_err());
        // Decimal steps that divide the range exactly in decimal are accepted despite binary
        // rounding; 0.25 does not divide 1.1, and the error names the grid points around 1.1.
        assert!(FloatDistribution::new(0.0, 1.0, false, Some(0.1)).is_ok());
        assert!(FloatDistribution::new(0.1, 0.7, false, Some(0.2)).is_ok());
        match FloatDistribution::new(0.0, 1.1, false, Some(0.25)) {
            Err(DistributionError::StepDoesNotDivide { lower, upper, .. }) => {
                assert_eq!((lower, upper), (1.0, 1.25));
            }
            other => panic!("{other:?}"),
        }
        // Python: FloatDistribution(0.0, 1.0, step=0.3).high == 0.9 — refused here, naming 0.9.
        match FloatDistribution::new(0.0, 1.0, false, Some(0.3)) {
            Err(DistributionError::StepDoesNotDivide { lower, upper, .. }) => {
                assert_eq!((lower, upper), (0.9, 1.2));
            }
            other => panic!("{other:?}"),
        }
        // Exponents too far apart for exact decimals: the binary check decides.
        assert!(FloatDistribution::new(1e-300, 1e-300 + 1.0, false, Some(0.5)).is_ok());
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
        // A hand-built invalid distribution does not panic.
        let broken = IntDistribution {
            log: false,
            step: 0,
            low: 0,
            high: 4,
        };
        assert!(!broken.contains(2.0));
        assert!(OptunaDistribution::Int(broken).validated().is_err());
        assert!(OptunaDistribution::categorical(vec![]).is_err());
    }
}
