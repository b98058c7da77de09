//! Applying sampled values to a configuration by dotted name (`ppo.learning_rate`,
//! `ppo.net_arch.pi`, `env.n_envs`, `ppo.precision`, …).
//!
//! The configuration is handled as the `serde_json::Value` its structs serialize to, so any
//! field of the env or PPO config can be searched without a hand-kept list of names: the valid
//! names are the leaves of that JSON tree (arrays count as leaves). After applying, the caller
//! deserializes the value back into its structs, which checks enum names such as `"bf16"`.
//!
//! A value must fit the field it replaces:
//! - integer field ← integer; float field ← float or integer; boolean ← boolean;
//!   string ← string (enum variants such as `precision = "bf16"`); a `null` (unset optional)
//!   field takes any value;
//! - list field (e.g. `net_arch.pi = [2048, 1024, 512]`) ← a string holding a list
//!   (`"[512, 256]"` or `"512,256"`), which replaces it, or a number, which becomes the width of
//!   every layer while the depth stays (the user's "net width 768").

use serde_json::{Map, Value};

use super::space::{CategoricalChoice, InternalParams, ParamValue, SearchSpace, SpaceError};

/// Why a value could not be applied to a configuration.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigPathError {
    #[error("unknown parameter '{name}'{}; valid names: {}", did_you_mean(.suggestion), .valid.join(", "))]
    UnknownName {
        name: String,
        suggestion: Option<String>,
        valid: Vec<String>,
    },
    #[error("'{name}' is a group of settings, not one setting; name one of: {}", .fields.join(", "))]
    NotALeaf { name: String, fields: Vec<String> },
    #[error("'{name}' expects {expected}, but the value given is {value} ({got})")]
    TypeMismatch {
        name: String,
        expected: &'static str,
        value: String,
        got: &'static str,
    },
    #[error(
        "'{name}': {value} is not a list of numbers (write it as \"[512, 256]\" or \"512,256\")"
    )]
    BadList { name: String, value: String },
    #[error(transparent)]
    Space(#[from] SpaceError),
}

fn did_you_mean(s: &Option<String>) -> String {
    s.as_ref()
        .map(|s| format!(" (did you mean '{s}'?)"))
        .unwrap_or_default()
}

/// Every settable name of `root`: the dotted paths of its non-object values, sorted.
pub fn leaf_paths(root: &Value) -> Vec<String> {
    fn walk(v: &Value, prefix: &str, out: &mut Vec<String>) {
        match v {
            Value::Object(map) if !map.is_empty() => {
                for (k, child) in map {
                    let p = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    walk(child, &p, out);
                }
            }
            _ if !prefix.is_empty() => out.push(prefix.to_owned()),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(root, "", &mut out);
    out.sort();
    out
}

/// Checks that every parameter of `space` names a setting of `root`, before any trial runs.
pub fn check_names(root: &Value, space: &SearchSpace) -> Result<(), ConfigPathError> {
    for name in space.names() {
        locate(root, name)?;
    }
    Ok(())
}

/// Sets the field `name` of `root` to `value`, converting it to the field's type.
pub fn apply_value(
    root: &mut Value,
    name: &str,
    value: &ParamValue,
) -> Result<(), ConfigPathError> {
    locate(root, name)?;
    let mut cur = root;
    for seg in name.split('.') {
        // `locate` proved that every segment exists and leads through objects.
        cur = match cur {
            Value::Object(map) => map
                .get_mut(seg)
                .ok_or_else(|| unknown(&Value::Null, name))?,
            _ => return Err(unknown(&Value::Null, name)),
        };
    }
    *cur = convert(name, cur, value)?;
    Ok(())
}

/// Applies every parameter of a trial (internal representation) to `root`.
pub fn apply_params(
    root: &mut Value,
    space: &SearchSpace,
    params: &InternalParams,
) -> Result<(), ConfigPathError> {
    for (name, value) in space.to_external(params)? {
        apply_value(root, &name, &value)?;
    }
    Ok(())
}

/// Finds the leaf `name` in `root`, or explains why it is not one.
fn locate<'a>(root: &'a Value, name: &str) -> Result<&'a Value, ConfigPathError> {
    let mut cur = root;
    for seg in name.split('.') {
        cur = match cur {
            Value::Object(map) => map.get(seg).ok_or_else(|| unknown(root, name))?,
            _ => return Err(unknown(root, name)),
        };
    }
    match cur {
        Value::Object(map) if !map.is_empty() => Err(ConfigPathError::NotALeaf {
            name: name.to_owned(),
            fields: leaf_paths(cur)
                .into_iter()
                .map(|p| format!("{name}.{p}"))
                .collect(),
        }),
        _ => Ok(cur),
    }
}

fn unknown(root: &Value, name: &str) -> ConfigPathError {
    let valid = leaf_paths(root);
    let suggestion = closest(name, valid.iter().map(String::as_str)).map(str::to_owned);
    ConfigPathError::UnknownName {
        name: name.to_owned(),
        suggestion,
        valid,
    }
}

/// The name of `valid` closest to `name`, if one is close enough to be a typing slip, for
/// "did you mean".
pub fn closest<'a>(name: &str, valid: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    valid
        .into_iter()
        .map(|v| (edit_distance(v, name), v))
        .filter(|(d, v)| *d <= 3usize.max(v.len() / 4))
        .min()
        .map(|(_, v)| v)
}

/// Levenshtein distance, for "did you mean".
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != *cb))
                .min(prev[j + 1] + 1)
                .min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

fn convert(name: &str, current: &Value, value: &ParamValue) -> Result<Value, ConfigPathError> {
    let mismatch = |expected: &'static str| ConfigPathError::TypeMismatch {
        name: name.to_owned(),
        expected,
        value: value.to_string(),
        got: value.type_name(),
    };
    // A categorical's choice of 3 is the integer 3: match on the plain value.
    let plain = value.as_choice();
    match current {
        Value::Null => Ok(value.to_json()),
        Value::Bool(_) => match plain.as_ref() {
            CategoricalChoice::Bool(b) => Ok(Value::Bool(*b)),
            _ => Err(mismatch("a boolean")),
        },
        Value::String(_) => match plain.as_ref() {
            CategoricalChoice::Str(s) => Ok(Value::String(s.clone())),
            _ => Err(mismatch("a string")),
        },
        Value::Number(n) if n.is_f64() => match plain.as_ref() {
            CategoricalChoice::Float(f) if f.is_finite() => Ok(Value::from(*f)),
            CategoricalChoice::Int(i) => Ok(Value::from(*i as f64)),
            _ => Err(mismatch("a finite float")),
        },
        Value::Number(n) => match plain.as_ref() {
            CategoricalChoice::Int(i) if n.is_u64() && *i < 0 => {
                Err(mismatch("a non-negative integer"))
            }
            CategoricalChoice::Int(i) => Ok(Value::from(*i)),
            _ => Err(mismatch("an integer")),
        },
        Value::Array(items) => list_value(items, value).ok_or_else(|| ConfigPathError::BadList {
            name: name.to_owned(),
            value: value.to_string(),
        }),
        // `locate` only hands over leaves; an empty object is one (a struct with no fields).
        Value::Object(_) => match plain.as_ref() {
            CategoricalChoice::None => Ok(Value::Object(Map::new())),
            _ => Err(mismatch("an empty group")),
        },
    }
}

fn list_value(items: &[Value], value: &ParamValue) -> Option<Value> {
    match value.as_choice().as_ref() {
        // A width for every layer; the depth stays.
        CategoricalChoice::Int(w) => Some(Value::Array(vec![Value::from(*w); items.len()])),
        CategoricalChoice::Float(w) if w.is_finite() => {
            Some(Value::Array(vec![Value::from(*w); items.len()]))
        }
        CategoricalChoice::Str(s) => {
            let t = s.trim();
            if t.starts_with('[') {
                match serde_json::from_str::<Value>(t) {
                    Ok(Value::Array(a)) if a.iter().all(Value::is_number) => Some(Value::Array(a)),
                    _ => None,
                }
            } else {
                let nums: Option<Vec<Value>> = t
                    .split(',')
                    .map(|p| {
                        let p = p.trim();
                        p.parse::<i64>().map(Value::from).ok().or_else(|| {
                            p.parse::<f64>()
                                .ok()
                                .filter(|f| f.is_finite())
                                .map(Value::from)
                        })
                    })
                    .collect();
                nums.filter(|n| !n.is_empty()).map(Value::Array)
            }
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn config() -> Value {
        json!({
            "ppo": {
                "learning_rate": 3e-4,
                "n_steps": 4096,
                "net_arch": {"pi": [2048, 1024, 512], "vf": [2048, 1024, 512]},
                "precision": "f32",
                "target_kl": null,
                "normalize_advantage": true
            },
            "env": {"n_envs": 32, "fee": 0.001}
        })
    }

    #[test]
    fn applies_each_kind_of_field() {
        let mut c = config();
        apply_value(&mut c, "ppo.learning_rate", &ParamValue::Float(1e-3)).unwrap();
        apply_value(&mut c, "env.n_envs", &ParamValue::Int(64)).unwrap();
        apply_value(&mut c, "env.fee", &ParamValue::Int(0)).unwrap();
        apply_value(&mut c, "ppo.precision", &ParamValue::str("bf16")).unwrap();
        apply_value(&mut c, "ppo.target_kl", &ParamValue::Float(0.02)).unwrap();
        apply_value(&mut c, "ppo.normalize_advantage", &ParamValue::bool(false)).unwrap();
        apply_value(&mut c, "ppo.net_arch.pi", &ParamValue::Int(768)).unwrap();
        apply_value(&mut c, "ppo.net_arch.vf", &ParamValue::str("[256, 128]")).unwrap();
        assert_eq!(c["ppo"]["learning_rate"], json!(1e-3));
        assert_eq!(c["env"]["n_envs"], json!(64));
        assert_eq!(c["env"]["fee"], json!(0.0));
        assert_eq!(c["ppo"]["precision"], json!("bf16"));
        assert_eq!(c["ppo"]["target_kl"], json!(0.02));
        assert_eq!(c["ppo"]["normalize_advantage"], json!(false));
        assert_eq!(c["ppo"]["net_arch"]["pi"], json!([768, 768, 768]));
        assert_eq!(c["ppo"]["net_arch"]["vf"], json!([256, 128]));
        apply_value(&mut c, "ppo.net_arch.vf", &ParamValue::str("64, 32,16")).unwrap();
        assert_eq!(c["ppo"]["net_arch"]["vf"], json!([64, 32, 16]));
    }

    #[test]
    fn unknown_names_list_the_valid_ones() {
        let mut c = config();
        let e = apply_value(&mut c, "ppo.learning_rat", &ParamValue::Float(1e-3)).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("did you mean 'ppo.learning_rate'"), "{msg}");
        assert!(
            msg.contains("env.fee, env.n_envs, ppo.learning_rate, ppo.n_steps, ppo.net_arch.pi"),
            "{msg}"
        );
        let e = apply_value(&mut c, "ppo.net_arch", &ParamValue::Int(3)).unwrap_err();
        assert!(
            e.to_string().contains("ppo.net_arch.pi, ppo.net_arch.vf"),
            "{e}"
        );
        let e = apply_value(&mut c, "ppo.n_steps.x", &ParamValue::Int(3)).unwrap_err();
        assert!(matches!(e, ConfigPathError::UnknownName { .. }));
        assert_eq!(c, config(), "failed applications change nothing");
    }

    #[test]
    fn type_mismatches_are_errors() {
        let mut c = config();
        let e = apply_value(&mut c, "env.n_envs", &ParamValue::Float(32.5)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "'env.n_envs' expects an integer, but the value given is 32.5 (float)"
        );
        assert!(apply_value(&mut c, "env.n_envs", &ParamValue::Int(-1)).is_err());
        assert!(apply_value(&mut c, "ppo.precision", &ParamValue::Int(16)).is_err());
        assert!(apply_value(&mut c, "ppo.normalize_advantage", &ParamValue::Int(1)).is_err());
        assert!(apply_value(&mut c, "ppo.net_arch.pi", &ParamValue::str("wide")).is_err());
        assert!(apply_value(&mut c, "ppo.learning_rate", &ParamValue::Float(f64::NAN)).is_err());
    }

    #[test]
    fn applies_a_whole_trial() {
        let mut space = SearchSpace::new();
        space
            .add_float("ppo.learning_rate", 1e-5, 1e-2, true, None)
            .unwrap();
        space
            .add_categorical(
                "ppo.precision",
                vec![
                    CategoricalChoice::Str("f32".into()),
                    CategoricalChoice::Str("bf16".into()),
                ],
            )
            .unwrap();
        let mut c = config();
        check_names(&c, &space).unwrap();
        let params = InternalParams::from([
            ("ppo.learning_rate".to_owned(), 2e-4),
            ("ppo.precision".to_owned(), 1.0),
        ]);
        apply_params(&mut c, &space, &params).unwrap();
        assert_eq!(c["ppo"]["precision"], json!("bf16"));
        assert_eq!(c["ppo"]["learning_rate"], json!(2e-4));
        space.add_int("ppo.batch", 1, 2, false, 1).unwrap();
        assert!(check_names(&c, &space).is_err());
    }
}
