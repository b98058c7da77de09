//! The values of a study file: `[fixed]` leaves and where `[search]` specs are.

use super::search_spec::{SPEC_KEYS, param_value};
use crate::config_path;
use crate::space::ParamValue;

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

/// Sets the leaf `name` of `root` to a fixed TOML value; the leaf must exist and the value must
/// have its type (a number for a number, a list for a list, …) and lie in the range the
/// [`catalogue`](crate::catalogue) gives it.
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
    let applied = name.split('.').try_fold(&scratch, |v, part| v.get(part));
    if let Some(v) = applied {
        crate::catalogue::check(name, v).map_err(|e| e.to_string())?;
    }
    *root = scratch;
    Ok(())
}
