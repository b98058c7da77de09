//! Parameter values in Optuna's *external* form, the one a user sees (`trial.params`).
//!
//! A float distribution yields a float, an int distribution an int, a categorical one of its
//! choices; Optuna allows `None`, `bool`, `int`, `float` and `str` as choices. Values compare
//! as Python compares them (`1 == 1.0`; NaN equals NaN, as Optuna's `_categorical_choice_equal`
//! has it) with one deliberate difference: a bool is not a number, so `true` is not `1`
//! (Python's `True == 1` makes `[True, 1].index(1)` pick the wrong choice; Optuna documents
//! that as a known bug and TradeTune does not reproduce it).

use std::borrow::Cow;
use std::fmt;

use serde::{Deserialize, Serialize};

/// A categorical choice.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub enum CategoricalChoice {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
}

/// A parameter value in Optuna's external representation.
#[derive(Debug, Clone)]
pub enum ParamValue {
    /// A value of a float distribution.
    Float(f64),
    /// A value of an int distribution.
    Int(i64),
    /// One of a categorical distribution's choices.
    Choice(CategoricalChoice),
}

impl CategoricalChoice {
    /// The choice as a number: ints and floats, not bools.
    pub fn as_number(&self) -> Option<f64> {
        match self {
            CategoricalChoice::Int(i) => Some(*i as f64),
            CategoricalChoice::Float(f) => Some(*f),
            _ => None,
        }
    }

    /// A short name of the value's type, for messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            CategoricalChoice::None => "null",
            CategoricalChoice::Bool(_) => "boolean",
            CategoricalChoice::Int(_) => "integer",
            CategoricalChoice::Float(_) => "float",
            CategoricalChoice::Str(_) => "string",
        }
    }
}

impl PartialEq for CategoricalChoice {
    /// Python's `==` between choices, except that a bool is not a number (module docs).
    fn eq(&self, other: &Self) -> bool {
        use CategoricalChoice as C;
        match (self, other) {
            (C::None, C::None) => true,
            (C::Bool(a), C::Bool(b)) => a == b,
            (C::Str(a), C::Str(b)) => a == b,
            (C::Int(a), C::Int(b)) => a == b,
            (a, b) => match (a.as_number(), b.as_number()) {
                (Some(x), Some(y)) => x == y || (x.is_nan() && y.is_nan()),
                _ => false,
            },
        }
    }
}

impl fmt::Display for CategoricalChoice {
    /// As a study file (TOML) writes the value: `null`, `true`, `3`, `0.5`, `"relu"`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CategoricalChoice::None => write!(f, "null"),
            CategoricalChoice::Bool(b) => write!(f, "{b}"),
            CategoricalChoice::Int(i) => write!(f, "{i}"),
            CategoricalChoice::Float(x) => write!(f, "{x}"),
            CategoricalChoice::Str(s) => write!(f, "\"{s}\""),
        }
    }
}

impl ParamValue {
    /// A string choice (study files and tests write many).
    pub fn str(s: impl Into<String>) -> Self {
        ParamValue::Choice(CategoricalChoice::Str(s.into()))
    }

    /// A bool choice.
    pub fn bool(b: bool) -> Self {
        ParamValue::Choice(CategoricalChoice::Bool(b))
    }

    /// The plain value, as Python holds it: a float or an int become the choice of that
    /// number, a choice stays itself.
    pub fn as_choice(&self) -> Cow<'_, CategoricalChoice> {
        match self {
            ParamValue::Float(f) => Cow::Owned(CategoricalChoice::Float(*f)),
            ParamValue::Int(i) => Cow::Owned(CategoricalChoice::Int(*i)),
            ParamValue::Choice(c) => Cow::Borrowed(c),
        }
    }

    /// The plain value, owned (see [`Self::as_choice`]).
    pub fn into_choice(self) -> CategoricalChoice {
        match self {
            ParamValue::Float(f) => CategoricalChoice::Float(f),
            ParamValue::Int(i) => CategoricalChoice::Int(i),
            ParamValue::Choice(c) => c,
        }
    }

    /// The value as a number (ints and floats, chosen or not; not bools).
    pub fn as_number(&self) -> Option<f64> {
        self.as_choice().as_number()
    }

    /// The value as JSON (non-finite floats become `null`, JSON has no NaN).
    pub fn to_json(&self) -> serde_json::Value {
        match self.as_choice().as_ref() {
            CategoricalChoice::None => serde_json::Value::Null,
            CategoricalChoice::Bool(b) => serde_json::Value::Bool(*b),
            CategoricalChoice::Int(i) => serde_json::Value::from(*i),
            CategoricalChoice::Float(f) => serde_json::Value::from(*f),
            CategoricalChoice::Str(s) => serde_json::Value::String(s.clone()),
        }
    }

    /// A short name of the value's type, for messages.
    pub fn type_name(&self) -> &'static str {
        self.as_choice().type_name()
    }
}

impl PartialEq for ParamValue {
    /// The same plain value (see [`CategoricalChoice`]'s equality): `Int(1) == Float(1.0)`.
    fn eq(&self, other: &Self) -> bool {
        self.as_choice() == other.as_choice()
    }
}

impl From<CategoricalChoice> for ParamValue {
    fn from(c: CategoricalChoice) -> Self {
        ParamValue::Choice(c)
    }
}

impl fmt::Display for ParamValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.as_choice().fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use CategoricalChoice as C;

    #[test]
    fn values_compare_as_python_values_but_bools_are_not_numbers() {
        assert_eq!(ParamValue::Int(1), ParamValue::Float(1.0));
        assert_eq!(ParamValue::Int(3), ParamValue::Choice(C::Int(3)));
        assert_eq!(
            ParamValue::Float(f64::NAN),
            ParamValue::Choice(C::Float(f64::NAN))
        );
        assert_ne!(ParamValue::Int(1), ParamValue::bool(true));
        assert_ne!(C::Bool(false), C::Int(0));
        assert_ne!(C::None, C::Str("None".into()));
        assert_eq!(ParamValue::str("relu").to_string(), "\"relu\"");
        assert_eq!(
            ParamValue::Float(f64::NAN).to_json(),
            serde_json::Value::Null
        );
        assert_eq!(ParamValue::bool(true).type_name(), "boolean");
    }
}
