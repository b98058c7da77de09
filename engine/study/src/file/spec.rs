//! The values of a study file: `[fixed]` leaves, `[search]` specs → Optuna distributions,
//! TOML values → parameter values.

use crate::config_path;
use crate::space::{OptunaDistribution, ParamValue};

/// The leaves of a TOML table as (dotted name, value); arrays are leaves.
pub(super) fn flatten(t: &toml::Table, prefix: &str, out: &mut Vec<(String, toml::Value)>) {
    for (k, v) in t {
        let name = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match v {
            toml::Value::Table(inner) => flatten(inner, &name, out),
            _ => out.push((name, v.clone())),
        }
    }
}

const SPEC_KEYS: [&str; 6] = ["type", "low", "high", "log", "step", "choices"];

/// The search specs of `[search]`, whether written `"a.b" = {…}` or as nested tables.
pub(super) fn search_specs(t: &toml::Table, prefix: &str, out: &mut Vec<(String, toml::Table)>) {
    for (k, v) in t {
        let name = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match v {
            toml::Value::Table(inner) if inner.keys().any(|k| SPEC_KEYS.contains(&k.as_str())) => {
                out.push((name, inner.clone()))
            }
            toml::Value::Table(inner) => search_specs(inner, &name, out),
            _ => out.push((name, toml::Table::new())),
        }
    }
}

/// One search spec → a distribution.
pub(super) fn distribution(spec: &toml::Table) -> Result<OptunaDistribution, String> {
    if spec.is_empty() {
        return Err("expected a range `{ low = …, high = … }` or `{ choices = [...] }`".into());
    }
    for k in spec.keys() {
        if !SPEC_KEYS.contains(&k.as_str()) {
            return Err(format!("unknown key '{k}'; keys: {}", SPEC_KEYS.join(", ")));
        }
    }
    let kind = spec.get("type").and_then(toml::Value::as_str);
    if let Some(choices) = spec.get("choices") {
        let toml::Value::Array(items) = choices else {
            return Err("choices must be a list".into());
        };
        let values = items
            .iter()
            .map(|v| param_value(v).map(ParamValue::into_choice))
            .collect::<Result<Vec<_>, _>>()?;
        return crate::space::CategoricalDistribution::new(values)
            .map(OptunaDistribution::Categorical)
            .map_err(|e| e.to_string());
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
    let num = |v: &toml::Value, what: &str| -> Result<f64, String> {
        match v {
            toml::Value::Integer(i) => Ok(*i as f64),
            toml::Value::Float(f) => Ok(*f),
            _ => Err(format!("{what} must be a number")),
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
        crate::space::IntDistribution::new(int(low, "low")?, int(high, "high")?, log, step)
            .map(OptunaDistribution::Int)
            .map_err(|e| e.to_string())
    } else {
        let step = spec.get("step").map(|s| num(s, "step")).transpose()?;
        crate::space::FloatDistribution::new(num(low, "low")?, num(high, "high")?, log, step)
            .map(OptunaDistribution::Float)
            .map_err(|e| e.to_string())
    }
}

/// A TOML value as a parameter value; a list becomes its text (`"[512, 256]"`), which list
/// fields such as `ppo.policy.net_arch.pi` accept (see [`config_path`]).
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

/// Sets the leaf `name` of `root` to a fixed TOML value; the leaf must exist and the value must
/// have its type (a number for a number, a list for a list, …).
pub(super) fn set_fixed(
    root: &mut serde_json::Value,
    name: &str,
    value: toml::Value,
) -> Result<(), String> {
    let json = serde_json::to_value(&value).map_err(|e| e.to_string())?;
    // Reuse the dotted-name check (unknown names list the valid ones, "did you mean").
    let probe = match &json {
        serde_json::Value::Array(_) => ParamValue::str(json.to_string()),
        _ => param_value(&value)?,
    };
    let mut scratch = root.clone();
    config_path::apply_value(&mut scratch, name, &probe).map_err(|e| e.to_string())?;
    *root = scratch;
    Ok(())
}
