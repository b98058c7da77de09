//! The catalogue of settings: each setting a study, `--set`, `tradetune train --config` or the
//! app's Configure panel can give, with its dotted name, its type, its default, its range and a
//! line of doc, as burn's `Config` keeps them for a struct.
//!
//! - The trial settings are every leaf of the trial configuration ([`PpoTrialConfig`]): the
//!   names a study fixes or searches (`env.n_envs`, `ppo.policy.net_arch.pi`, …).
//! - The study settings are the fields of a study file's `[study]`, `[sampler]` and `[pruner]`
//!   tables that a form edits (`study.workers`, `sampler.kind`, …).
//!
//! Defaults are the configurations' own `Default`s, written once there and read by
//! `ppo_trial::setting_default` (this module sits below the configurations, which check their
//! values through it). The range of a setting is what may be given at all; a configuration's
//! `validate` still checks what depends on other settings (a batch no larger than a rollout).

mod table;

use std::fmt;

use serde_json::Value;

/// What kind of value a setting holds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Type {
    /// A whole number (`env.n_envs`).
    Int,
    /// A number (`ppo.learning_rate`).
    Float,
    /// `true` or `false`.
    Bool,
    /// A line of text (`study.name`).
    Text,
    /// One of these names (`ppo.precision`: `f32`, `bf16`, `f16`).
    Choice(&'static [&'static str]),
    /// Layer widths, a list of whole numbers each in the range (`ppo.policy.net_arch.pi`).
    Widths,
    /// A list of numbers each in the range (`env.min_order_values`).
    FloatList,
    /// A list of device names (`study.devices`: `cpu`, `wgpu:0`).
    Devices,
}

impl Type {
    /// What a value of this type is, for messages.
    pub fn expected(self) -> &'static str {
        match self {
            Type::Int => "a whole number",
            Type::Float => "a finite number",
            Type::Bool => "true or false",
            Type::Text => "a string",
            Type::Choice(_) => "a name in quotes",
            Type::Widths => "a list of whole numbers",
            Type::FloatList => "a list of numbers",
            Type::Devices => "a list of device names",
        }
    }
}

/// The values a numeric setting (or each item of a list setting) may take, both ends included.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Range {
    pub low: f64,
    pub high: f64,
}

impl Range {
    pub fn contains(&self, v: f64) -> bool {
        self.low <= v && v <= self.high
    }
}

impl fmt::Display for Range {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}, {}]", self.low, self.high)
    }
}

/// One setting.
#[derive(Debug, Clone, PartialEq)]
pub struct Setting {
    /// Its dotted name: `ppo.batch_size`.
    pub name: &'static str,
    /// Its short name in forms (unique: `env seed` and `ppo seed`).
    pub label: &'static str,
    pub ty: Type,
    /// Whether it may be absent (`none`: `ppo.target_kl`, no early stop).
    pub optional: bool,
    /// The values it may take (None: any value of its type).
    pub range: Option<Range>,
    /// What it means, in a line.
    pub doc: &'static str,
}

/// Why a value cannot be given to a setting.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SettingError {
    #[error("'{name}' = {value} is out of its range {range}")]
    OutOfRange {
        name: String,
        value: String,
        range: Range,
    },
    #[error("'{name}' expects {expected}, not {value}")]
    WrongType {
        name: String,
        expected: &'static str,
        value: String,
    },
    #[error("'{name}' = {value} is not one of {}", .choices.join(", "))]
    NotAChoice {
        name: String,
        value: String,
        choices: &'static [&'static str],
    },
}

impl Setting {
    /// Whether a search can set it: a setting of the trial's configuration (`env`, `ppo`,
    /// `train`), not of the study.
    pub fn searchable(&self) -> bool {
        ["env.", "ppo.", "train."]
            .iter()
            .any(|p| self.name.starts_with(p))
    }

    /// The choices of a [`Type::Choice`] setting (empty for the others).
    pub fn choices(&self) -> &'static [&'static str] {
        match self.ty {
            Type::Choice(c) => c,
            _ => &[],
        }
    }

    /// Checks `value` (as the configuration's JSON holds it) against the type and range.
    pub fn check(&self, value: &Value) -> Result<(), SettingError> {
        let wrong = || SettingError::WrongType {
            name: self.name.to_owned(),
            expected: self.ty.expected(),
            value: value.to_string(),
        };
        let in_range = |v: f64| match self.range {
            Some(range) if !range.contains(v) => Err(SettingError::OutOfRange {
                name: self.name.to_owned(),
                value: value.to_string(),
                range,
            }),
            _ => Ok(()),
        };
        let whole = |v: &Value| v.is_u64() || v.is_i64();
        match (self.ty, value) {
            (_, Value::Null) if self.optional => Ok(()),
            (Type::Int, v) if whole(v) => in_range(v.as_f64().unwrap_or(f64::NAN)),
            (Type::Float, Value::Number(n)) => match n.as_f64() {
                Some(v) if v.is_finite() => in_range(v),
                _ => Err(wrong()),
            },
            (Type::Bool, Value::Bool(_)) | (Type::Text, Value::String(_)) => Ok(()),
            (Type::Choice(choices), Value::String(s)) => {
                if choices.contains(&s.as_str()) {
                    Ok(())
                } else {
                    Err(SettingError::NotAChoice {
                        name: self.name.to_owned(),
                        value: value.to_string(),
                        choices,
                    })
                }
            }
            (Type::Widths, Value::Array(items)) if items.iter().all(whole) => items
                .iter()
                .try_for_each(|v| in_range(v.as_f64().unwrap_or(f64::NAN))),
            (Type::FloatList, Value::Array(items)) => {
                items.iter().try_for_each(|v| match v.as_f64() {
                    Some(x) if x.is_finite() => in_range(x),
                    _ => Err(wrong()),
                })
            }
            (Type::Devices, Value::Array(items)) if items.iter().all(Value::is_string) => Ok(()),
            _ => Err(wrong()),
        }
    }
}

/// Every setting: the trial's (in the order the Configure panel lists them), then the study's.
pub fn all() -> &'static [Setting] {
    table::SETTINGS
}

/// The setting named `name`.
pub fn get(name: &str) -> Option<&'static Setting> {
    all().iter().find(|s| s.name == name)
}

/// The trial's settings: every name a study may fix or search.
pub fn trial() -> impl Iterator<Item = &'static Setting> {
    all().iter().filter(|s| s.searchable())
}

/// Checks a value given to `name`; a name the catalogue does not list is left to the
/// configuration it is applied to (whose reading names the valid ones).
pub fn check(name: &str, value: &Value) -> Result<(), SettingError> {
    get(name).map_or(Ok(()), |s| s.check(value))
}

/// Checks every catalogued setting that `config` (a trial configuration's JSON, or any part
/// of one rooted at the same place) holds.
pub fn check_config(config: &Value) -> Result<(), SettingError> {
    all()
        .iter()
        .filter_map(|s| at(config, s.name).map(|v| s.check(v)))
        .collect()
}

/// The value at a dotted name.
pub fn at<'a>(root: &'a Value, name: &str) -> Option<&'a Value> {
    name.split('.').try_fold(root, |v, part| v.get(part))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_and_labels_are_unique_and_documented() {
        let mut names: Vec<&str> = all().iter().map(|s| s.name).collect();
        let mut labels: Vec<&str> = all().iter().map(|s| s.label).collect();
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        labels.sort_unstable();
        labels.dedup();
        assert_eq!((names.len(), labels.len()), (n, n));
        for s in all() {
            assert!(!s.doc.is_empty(), "{}", s.name);
            if let Some(r) = s.range {
                assert!(r.low < r.high, "{}", s.name);
            }
        }
    }

    #[test]
    fn values_out_of_range_or_of_another_type_are_refused_with_the_range() {
        let e = check("ppo.gamma", &json!(1.5)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "'ppo.gamma' = 1.5 is out of its range [0, 1]"
        );
        assert!(check("ppo.gamma", &json!(0.99)).is_ok());
        let e = check("ppo.policy.net_arch.pi", &json!([64, 0])).unwrap_err();
        assert!(e.to_string().contains("[1, 65536]"), "{e}");
        assert!(check("env.n_envs", &json!(2.5)).is_err());
        assert!(check("ppo.target_kl", &json!(null)).is_ok());
        assert!(check("ppo.gamma", &json!(null)).is_err());
        let e = check("ppo.precision", &json!("f64")).unwrap_err();
        assert!(e.to_string().contains("f32, bf16, f16"), "{e}");
        assert!(check("not.catalogued", &json!(1)).is_ok());
        let mut config = json!({"env": {"lookback": 4}, "ppo": {"gamma": 0.9}});
        assert_eq!(check_config(&config), Ok(()));
        config["env"]["lookback"] = json!(0);
        assert!(matches!(
            check_config(&config),
            Err(SettingError::OutOfRange { name, .. }) if name == "env.lookback"
        ));
    }
}
