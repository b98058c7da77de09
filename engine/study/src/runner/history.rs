//! Between the storage's records and what samplers and pruners read: trials as
//! [`crate::Trial`], distributions as Optuna's stored form, attribute JSON both ways.

use std::collections::BTreeMap;

use crate::space::{Distribution, ParamValue};
use crate::trial::{Direction, Trial, TrialState};
use tradetune_storage::{
    CategoricalChoice, JsonValue, OptunaDistribution, StudyDirection, TrialRecord,
    TrialState as StoredState,
};

pub(super) fn state(s: StoredState) -> TrialState {
    match s {
        StoredState::Running => TrialState::Running,
        StoredState::Complete => TrialState::Complete,
        StoredState::Pruned => TrialState::Pruned,
        StoredState::Fail => TrialState::Fail,
        StoredState::Waiting => TrialState::Waiting,
    }
}

pub(super) fn direction(d: Direction) -> StudyDirection {
    match d {
        Direction::Minimize => StudyDirection::Minimize,
        Direction::Maximize => StudyDirection::Maximize,
    }
}

/// Attribute JSON as serde_json (NaN and ±inf, which serde_json cannot hold, become null).
pub(super) fn to_serde(v: &JsonValue) -> serde_json::Value {
    use serde_json::Value;
    match v {
        JsonValue::Null => Value::Null,
        JsonValue::Bool(b) => Value::Bool(*b),
        JsonValue::Int(i) => Value::from(*i),
        JsonValue::BigInt(s) => s.parse::<f64>().map_or(Value::Null, Value::from),
        JsonValue::Float(f) => serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number),
        JsonValue::Str(s) => Value::String(s.clone()),
        JsonValue::Array(a) => Value::Array(a.iter().map(to_serde).collect()),
        JsonValue::Object(o) => {
            Value::Object(o.iter().map(|(k, v)| (k.clone(), to_serde(v))).collect())
        }
    }
}

/// The study's trials as samplers and pruners see them.
pub(super) fn history(records: &[TrialRecord]) -> Vec<Trial> {
    records
        .iter()
        .map(|r| Trial {
            number: r.number.max(0) as u64,
            state: state(r.state),
            value: r.value(),
            params: r
                .params
                .iter()
                .map(|p| (p.name.clone(), p.internal))
                .collect(),
            intermediate_values: r
                .intermediate_values
                .iter()
                .filter(|(step, _)| *step >= 0)
                .map(|(step, v)| (*step as u64, *v))
                .collect(),
            system_attrs: r
                .system_attrs
                .iter()
                .map(|(k, v)| (k.clone(), to_serde(v)))
                .collect::<BTreeMap<_, _>>(),
        })
        .collect()
}

fn choice(v: &ParamValue) -> CategoricalChoice {
    match v {
        ParamValue::Null => CategoricalChoice::None,
        ParamValue::Bool(b) => CategoricalChoice::Bool(*b),
        ParamValue::Int(i) => CategoricalChoice::Int(*i),
        ParamValue::Float(f) => CategoricalChoice::Float(*f),
        ParamValue::Str(s) => CategoricalChoice::Str(s.clone()),
    }
}

/// A search-space distribution in Optuna's stored form.
pub(super) fn stored_distribution(
    d: &Distribution,
) -> Result<OptunaDistribution, tradetune_storage::DistributionError> {
    match d {
        Distribution::Float(f) => OptunaDistribution::float(f.low(), f.high(), f.log(), f.step()),
        Distribution::Int(i) => OptunaDistribution::int(i.low(), i.high(), i.log(), i.step()),
        Distribution::Categorical(c) => {
            OptunaDistribution::categorical(c.choices().iter().map(choice).collect())
        }
    }
}

/// A parameter value as JSON, for events.
pub(super) fn param_json(v: &ParamValue) -> serde_json::Value {
    v.to_json()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::space::SearchSpace;

    #[test]
    fn every_kind_of_distribution_converts() {
        let mut space = SearchSpace::new();
        space.add_float("a", 1e-5, 1e-2, true, None).unwrap();
        space.add_int("b", 8, 64, false, 8).unwrap();
        space
            .add_categorical(
                "c",
                vec![ParamValue::Str("f32".into()), ParamValue::Bool(true)],
            )
            .unwrap();
        let json: Vec<String> = space
            .iter()
            .map(|(_, d)| stored_distribution(d).unwrap().to_optuna_json())
            .collect();
        assert!(json[0].contains("\"log\": true"), "{}", json[0]);
        assert!(json[1].contains("\"step\": 8"), "{}", json[1]);
        assert!(json[2].contains("[\"f32\", true]"), "{}", json[2]);
        assert_eq!(
            to_serde(&JsonValue::Float(f64::NAN)),
            serde_json::Value::Null
        );
    }
}
