//! A searched parameter's range as a study file's `[search]` writes it and the app edits it:
//! `{ low = 1e-5, high = 1e-3, log = true }`, `{ low = 4, high = 16, step = 4 }`,
//! `{ choices = [512, 1024] }`.
//!
//! A [`SearchSpec`] is typed (a float range, an int range or choices) but not yet judged:
//! `low > high`, a log range reaching 0 or a `high` off the step grid are still representable,
//! so a front end can hold what a person typed and show the engine's verdict on it.
//! [`SearchSpec::distribution`] is that verdict: Optuna's own rules, through the distribution
//! constructors. Its text form ([`fmt::Display`], [`SearchSpec::parse`]) is the study file's
//! inline table, which is also how the app's settings store it.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::space::{
    CategoricalChoice, CategoricalDistribution, FloatDistribution, IntDistribution,
    OptunaDistribution, ParamValue,
};

/// A searched range or list of choices, typed but unchecked (see the module docs).
#[derive(Debug, Clone, PartialEq)]
pub enum SearchSpec {
    /// Optuna's `FloatDistribution`: `step` None is continuous.
    Float {
        low: f64,
        high: f64,
        log: bool,
        step: Option<f64>,
    },
    /// Optuna's `IntDistribution` (`step` 1 unless written).
    Int {
        low: i64,
        high: i64,
        log: bool,
        step: i64,
    },
    /// Optuna's `CategoricalDistribution`. A list value (`[512, 256]` for a layer list) is the
    /// string of its numbers, as parameter values carry it.
    Choices(Vec<CategoricalChoice>),
}

/// The keys a search spec may have.
pub const SPEC_KEYS: [&str; 6] = ["type", "low", "high", "log", "step", "choices"];

impl SearchSpec {
    /// The spec written as a TOML inline table (`{ low = 1e-5, high = 1e-3, log = true }`).
    /// Integers make an int range unless `type = "float"` says otherwise.
    pub fn parse(text: &str) -> Result<SearchSpec, String> {
        let doc: toml::Table = toml::from_str(&format!("v = {}", text.trim()))
            .map_err(|e| format!("'{text}': {}", e.message().trim()))?;
        match doc.get("v") {
            Some(toml::Value::Table(t)) => SearchSpec::from_table(t),
            _ => Err(format!(
                "'{text}': expected a range {{ low = …, high = … }} or {{ choices = [...] }}"
            )),
        }
    }

    /// The spec of a `[search]` entry's table.
    pub fn from_table(spec: &toml::Table) -> Result<SearchSpec, String> {
        if spec.is_empty() {
            return Err("expected a range `{ low = …, high = … }` or `{ choices = [...] }`".into());
        }
        for k in spec.keys() {
            if !SPEC_KEYS.contains(&k.as_str()) {
                return Err(format!("unknown key '{k}'; keys: {}", SPEC_KEYS.join(", ")));
            }
        }
        let kind = match spec.get("type") {
            None => None,
            Some(toml::Value::String(s)) => Some(s.as_str()),
            Some(_) => return Err("type must be \"int\", \"float\" or \"categorical\"".into()),
        };
        if let Some(choices) = spec.get("choices") {
            let toml::Value::Array(items) = choices else {
                return Err("choices must be a list".into());
            };
            let values = items
                .iter()
                .map(|v| param_value(v).map(ParamValue::into_choice))
                .collect::<Result<Vec<_>, _>>()?;
            return Ok(SearchSpec::Choices(values));
        }
        if kind == Some("categorical") {
            return Err("a categorical spec needs `choices = [...]`".into());
        }
        let (Some(low), Some(high)) = (spec.get("low"), spec.get("high")) else {
            return Err("a range needs both low and high".into());
        };
        let log = match spec.get("log") {
            None => false,
            Some(toml::Value::Boolean(b)) => *b,
            Some(_) => return Err("log must be true or false".into()),
        };
        let all_ints = matches!(low, toml::Value::Integer(_))
            && matches!(high, toml::Value::Integer(_))
            && spec
                .get("step")
                .is_none_or(|s| matches!(s, toml::Value::Integer(_)));
        let is_int = match kind {
            Some("int") => true,
            Some("float") => false,
            None => all_ints,
            Some(other) => {
                return Err(format!(
                    "type '{other}': expected int, float or categorical"
                ));
            }
        };
        if is_int {
            let int = |v: &toml::Value, what: &str| -> Result<i64, String> {
                match v {
                    toml::Value::Integer(i) => Ok(*i),
                    _ => Err(format!("{what} must be an integer for an int range")),
                }
            };
            let step = spec
                .get("step")
                .map(|s| int(s, "step"))
                .transpose()?
                .unwrap_or(1);
            Ok(SearchSpec::Int {
                low: int(low, "low")?,
                high: int(high, "high")?,
                log,
                step,
            })
        } else {
            let num = |v: &toml::Value, what: &str| -> Result<f64, String> {
                match v {
                    toml::Value::Integer(i) => Ok(*i as f64),
                    toml::Value::Float(f) => Ok(*f),
                    _ => Err(format!("{what} must be a number")),
                }
            };
            Ok(SearchSpec::Float {
                low: num(low, "low")?,
                high: num(high, "high")?,
                log,
                step: spec.get("step").map(|s| num(s, "step")).transpose()?,
            })
        }
    }

    /// The distribution this spec amounts to, by Optuna's rules; the error says what is wrong
    /// (`low > high`, a log range from 0, a `high` off the step grid). Repeated choices are
    /// accepted, as Optuna accepts them, so that a study stored with them reads back.
    pub fn distribution(&self) -> Result<OptunaDistribution, String> {
        match self {
            SearchSpec::Float {
                low,
                high,
                log,
                step,
            } => FloatDistribution::new(*low, *high, *log, *step)
                .map(OptunaDistribution::Float)
                .map_err(|e| e.to_string()),
            SearchSpec::Int {
                low,
                high,
                log,
                step,
            } => IntDistribution::new(*low, *high, *log, *step)
                .map(OptunaDistribution::Int)
                .map_err(|e| e.to_string()),
            SearchSpec::Choices(choices) => CategoricalDistribution::new(choices.clone())
                .map(OptunaDistribution::Categorical)
                .map_err(|e| e.to_string()),
        }
    }

    /// The spec of a (checked) distribution, as a study file would write it.
    pub fn of(d: &OptunaDistribution) -> SearchSpec {
        match d {
            OptunaDistribution::Float(f) => SearchSpec::Float {
                low: f.low,
                high: f.high,
                log: f.log,
                step: f.step,
            },
            OptunaDistribution::Int(i) => SearchSpec::Int {
                low: i.low,
                high: i.high,
                log: i.log,
                step: i.step,
            },
            OptunaDistribution::Categorical(c) => SearchSpec::Choices(c.choices.clone()),
        }
    }
}

/// A TOML value as a parameter value; a list becomes its text (`"[512, 256]"`), which list
/// fields such as `ppo.policy.net_arch.pi` accept (see [`crate::config_path`]).
pub(super) fn param_value(v: &toml::Value) -> Result<ParamValue, String> {
    match v {
        toml::Value::Integer(i) => Ok(ParamValue::Int(*i)),
        toml::Value::Float(f) => Ok(ParamValue::Float(*f)),
        toml::Value::Boolean(b) => Ok(ParamValue::bool(*b)),
        toml::Value::String(s) => Ok(ParamValue::str(s.clone())),
        toml::Value::Array(items) => {
            let nums: Option<Vec<String>> = items
                .iter()
                .map(|x| match x {
                    toml::Value::Integer(i) => Some(i.to_string()),
                    toml::Value::Float(f) => Some(f.to_string()),
                    _ => None,
                })
                .collect();
            nums.map(|n| ParamValue::str(format!("[{}]", n.join(", "))))
                .ok_or_else(|| "a list value must hold numbers only".into())
        }
        other => Err(format!("unsupported value {other}")),
    }
}

/// A float as a TOML literal (always with a point or an exponent, so it reads back a float).
fn float_literal(v: f64) -> String {
    toml::Value::Float(v).to_string()
}

/// A choice as a TOML literal: a list's text (`[512, 256]`) back as the list.
fn choice_literal(c: &CategoricalChoice) -> String {
    match c {
        CategoricalChoice::Str(s) if is_number_list(s) => s.clone(),
        CategoricalChoice::Str(s) => toml::Value::String(s.clone()).to_string(),
        CategoricalChoice::Int(i) => i.to_string(),
        CategoricalChoice::Float(f) => float_literal(*f),
        CategoricalChoice::Bool(b) => b.to_string(),
        // TOML has no null; Optuna's `None` choice cannot come from a study file.
        CategoricalChoice::None => "\"None\"".into(),
    }
}

/// `[512, 256]`: what [`param_value`] makes of a list of numbers.
fn is_number_list(s: &str) -> bool {
    let Some(inner) = s.strip_prefix('[').and_then(|r| r.strip_suffix(']')) else {
        return false;
    };
    inner.trim().is_empty()
        || inner
            .split(',')
            .all(|x| x.trim().parse::<f64>().is_ok() && !x.trim().is_empty())
}

impl fmt::Display for SearchSpec {
    /// The study file's inline table: it [`SearchSpec::parse`]s back to the same spec.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SearchSpec::Float {
                low,
                high,
                log,
                step,
            } => {
                // Float literals keep their point, so no `type` is needed to read them back.
                write!(
                    f,
                    "{{ low = {}, high = {}",
                    float_literal(*low),
                    float_literal(*high)
                )?;
                if *log {
                    write!(f, ", log = true")?;
                }
                if let Some(s) = step {
                    write!(f, ", step = {}", float_literal(*s))?;
                }
                write!(f, " }}")
            }
            SearchSpec::Int {
                low,
                high,
                log,
                step,
            } => {
                write!(f, "{{ low = {low}, high = {high}")?;
                if *log {
                    write!(f, ", log = true")?;
                }
                if *step != 1 {
                    write!(f, ", step = {step}")?;
                }
                write!(f, " }}")
            }
            SearchSpec::Choices(choices) => {
                let items: Vec<String> = choices.iter().map(choice_literal).collect();
                write!(f, "{{ choices = [{}] }}", items.join(", "))
            }
        }
    }
}

/// Stored as its study-file text (the app's settings keep it so).
impl Serialize for SearchSpec {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for SearchSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<SearchSpec, D::Error> {
        let text = String::deserialize(d)?;
        SearchSpec::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_read_as_their_kind_and_print_back_to_the_same_spec() {
        for (text, want) in [
            (
                "{ low = 1e-5, high = 1e-3, log = true }",
                SearchSpec::Float {
                    low: 1e-5,
                    high: 1e-3,
                    log: true,
                    step: None,
                },
            ),
            (
                "{ low = 4, high = 16, step = 4 }",
                SearchSpec::Int {
                    low: 4,
                    high: 16,
                    log: false,
                    step: 4,
                },
            ),
            (
                "{ type = \"float\", low = 1, high = 2 }",
                SearchSpec::Float {
                    low: 1.0,
                    high: 2.0,
                    log: false,
                    step: None,
                },
            ),
            (
                "{ choices = [[512, 256], [64]] }",
                SearchSpec::Choices(vec![
                    CategoricalChoice::Str("[512, 256]".into()),
                    CategoricalChoice::Str("[64]".into()),
                ]),
            ),
            (
                "{ choices = [\"bf16\", \"f16\", 3, 0.5, true] }",
                SearchSpec::Choices(vec![
                    CategoricalChoice::Str("bf16".into()),
                    CategoricalChoice::Str("f16".into()),
                    CategoricalChoice::Int(3),
                    CategoricalChoice::Float(0.5),
                    CategoricalChoice::Bool(true),
                ]),
            ),
        ] {
            let spec = SearchSpec::parse(text).unwrap();
            assert_eq!(spec, want, "{text}");
            assert_eq!(
                SearchSpec::parse(&spec.to_string()).unwrap(),
                spec,
                "{spec}"
            );
            let json = serde_json::to_string(&spec).unwrap();
            assert_eq!(serde_json::from_str::<SearchSpec>(&json).unwrap(), spec);
            assert!(spec.distribution().is_ok(), "{text}");
            assert_eq!(SearchSpec::of(&spec.distribution().unwrap()), spec);
        }
    }

    #[test]
    fn a_spec_is_typed_before_it_is_judged() {
        // Typed, then refused by Optuna's rules with the reason.
        let spec = SearchSpec::parse("{ low = 0.99, high = 0.9 }").unwrap();
        assert!(spec.distribution().unwrap_err().contains("low"), "{spec}");
        let spec = SearchSpec::parse("{ low = 0.0, high = 1.0, log = true }").unwrap();
        assert!(spec.distribution().is_err());
        // Not even typed: each error says what is wrong.
        for (text, why) in [
            ("{ low = 1 }", "both low and high"),
            (
                "{ low = 1, high = 2.5, type = \"int\" }",
                "high must be an integer",
            ),
            (
                "{ type = \"float\", low = 1, high = \"x\" }",
                "high must be a number",
            ),
            ("{ low = 1, high = 2, lo = 3 }", "unknown key 'lo'"),
            ("{ choices = 3 }", "choices must be a list"),
            ("{ low = ", "'{ low = '"),
            ("3", "expected a range"),
        ] {
            let e = SearchSpec::parse(text).unwrap_err();
            assert!(e.contains(why), "{text}: {e}");
        }
    }
}
