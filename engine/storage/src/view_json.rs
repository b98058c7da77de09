//! A study as plain JSON, in the shape `tests/python/optuna_dump.py` prints what the Optuna
//! client sees: trials with number, state, values, naive-UTC datetimes, params with their Python
//! type, Optuna's distribution JSON, intermediate values and attributes (as `json.dumps` text).
//! Non-finite floats are the strings `"nan"`, `"inf"`, `"-inf"`, so the output is strict JSON.
//! It serves `study show --json` and the tests that compare TradeTune's reading of a file with
//! Optuna's. A trial with rows set aside ([`crate::SetAside`]) shows them as Optuna would where
//! their value can be told, and one note each under `set_aside` (absent where there is none).

use serde_json::{Map, Value, json};

use super::datetime::format_naive;
use super::error::StorageError;
use super::json_value::JsonValue;
use super::model::{CategoricalChoice, ParamValue};
use super::records::{StudyRecord, TrialRecord};

/// A float as strict JSON: finite numbers as numbers, the rest as `"nan"`, `"inf"`, `"-inf"`.
pub fn json_number(x: f64) -> Value {
    if x.is_nan() {
        json!("nan")
    } else if x.is_infinite() {
        json!(if x > 0.0 { "inf" } else { "-inf" })
    } else {
        json!(x)
    }
}

fn typed(v: &ParamValue) -> Value {
    let (t, value) = match v {
        ParamValue::Float(f) => ("float", json_number(*f)),
        ParamValue::Int(i) => ("int", json!(i)),
        ParamValue::Choice(CategoricalChoice::None) => ("None", Value::Null),
        ParamValue::Choice(CategoricalChoice::Bool(b)) => ("bool", json!(b)),
        ParamValue::Choice(CategoricalChoice::Int(i)) => ("int", json!(i)),
        ParamValue::Choice(CategoricalChoice::Float(f)) => ("float", json_number(*f)),
        ParamValue::Choice(CategoricalChoice::Str(s)) => ("str", json!(s)),
    };
    json!({"type": t, "value": value})
}

fn attrs(a: &[(String, JsonValue)]) -> Value {
    Value::Object(
        a.iter()
            .map(|(k, v)| (k.clone(), json!(v.dumps())))
            .collect::<Map<_, _>>(),
    )
}

/// One trial as Optuna's `FrozenTrial` shows it.
pub fn trial_view_json(t: &TrialRecord) -> Result<Value, StorageError> {
    let mut params = Map::new();
    let mut distributions = Map::new();
    for p in &t.params {
        let v = p.external().map_err(|source| StorageError::Distribution {
            name: p.name.clone(),
            source,
        })?;
        params.insert(p.name.clone(), typed(&v));
        distributions.insert(p.name.clone(), json!(p.distribution.to_optuna_json()));
    }
    // Rows set aside (a distribution or an attribute the model refuses) as Optuna shows them:
    // a float parameter's value is the stored f64, its distribution and an attribute the text
    // as stored (which is what `json.dumps` wrote); each is named under `set_aside`.
    let mut param_order: Vec<String> = t.params.iter().map(|p| p.name.clone()).collect();
    let mut user_attrs = attrs(&t.user_attrs);
    let mut system_attrs = attrs(&t.system_attrs);
    for s in &t.set_aside {
        match (s.table, s.float_value) {
            ("trial_params", Some(v)) => {
                params.insert(s.name.clone(), typed(&ParamValue::Float(v)));
                distributions.insert(s.name.clone(), json!(s.text));
                param_order.push(s.name.clone());
            }
            ("trial_params", None) => {}
            (table, _) => {
                let into = if table == "trial_user_attributes" {
                    &mut user_attrs
                } else {
                    &mut system_attrs
                };
                if let Value::Object(map) = into {
                    map.insert(s.name.clone(), json!(s.text));
                }
            }
        }
    }
    let mut view = json!({
        "number": t.number,
        "state": t.state.as_str(),
        "values": t.values.as_ref().map(|v| v.iter().map(|x| json_number(*x)).collect::<Vec<_>>()),
        "datetime_start": t.datetime_start.map(format_naive),
        "datetime_complete": t.datetime_complete.map(format_naive),
        "params": params,
        "param_order": param_order,
        "distributions": distributions,
        "intermediate_values": t.intermediate_values.iter().map(|(s, v)| json!([s, json_number(*v)])).collect::<Vec<_>>(),
        "user_attrs": user_attrs,
        "system_attrs": system_attrs,
    });
    if !t.set_aside.is_empty()
        && let Value::Object(map) = &mut view
    {
        let notes: Vec<String> = t.set_aside.iter().map(|s| s.note(t.number)).collect();
        map.insert("set_aside".into(), json!(notes));
    }
    Ok(view)
}

/// A study with its trials; `best` is (number, value) of the best trial if single-objective.
pub fn study_view_json(
    study: &StudyRecord,
    trials: &[TrialRecord],
    best: Option<(i64, f64)>,
) -> Result<Value, StorageError> {
    Ok(json!({
        "name": study.name,
        "directions": study.directions.iter().map(|d| d.as_str()).collect::<Vec<_>>(),
        "user_attrs": attrs(&study.user_attrs),
        "system_attrs": attrs(&study.system_attrs),
        "best": best.map(|(n, v)| json!([n, json_number(v)])),
        "trials": trials.iter().map(trial_view_json).collect::<Result<Vec<_>, _>>()?,
    }))
}
