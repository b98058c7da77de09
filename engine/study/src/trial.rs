//! What samplers and pruners see of a study's trials: Optuna's `FrozenTrial`, reduced to the
//! fields they read.

use std::collections::BTreeMap;

use super::space::InternalParams;
use tradetune_storage::{JsonValue, TrialRecord};

/// `Direction` is Optuna's `StudyDirection`, the study layer's short name for it; both are the
/// one type of [`tradetune_storage::model`], as is [`TrialState`].
pub use tradetune_storage::model::{StudyDirection as Direction, TrialState};

/// One trial of the history handed to samplers and pruners.
#[derive(Debug, Clone, PartialEq)]
pub struct Trial {
    /// Per-study number, from 0.
    pub number: u64,
    pub state: TrialState,
    /// The objective value of a COMPLETE trial.
    pub value: Option<f64>,
    /// Parameter values in internal representation (see [`super::space`]).
    pub params: InternalParams,
    /// Values reported during the trial (the trainer's periodic evaluations), by step.
    pub intermediate_values: BTreeMap<u64, f64>,
    /// Optuna's trial system attributes that samplers and pruners use: `fixed_params`,
    /// `grid_id`, `search_space`, `completed_rung_<k>`; as stored, with Python's number model
    /// (a rung value may be ±Infinity, which `serde_json` cannot hold).
    pub system_attrs: BTreeMap<String, JsonValue>,
}

impl Trial {
    /// Whether the trial failed for no fault of its configuration: its study was stopped
    /// while it ran (`interrupted`), or its worker died (`worker lost`). Its grid point or
    /// enqueued entry is free again, as the budget already counts it free: a study resumed
    /// after a Ctrl-C or a crash runs it again rather than leaving it without a result.
    pub fn was_cut_short(&self) -> bool {
        self.state == TrialState::Fail
            && matches!(
                self.system_attrs.get(tradetune_storage::FAIL_REASON_KEY),
                Some(JsonValue::Str(reason))
                    if reason == tradetune_storage::INTERRUPTED_REASON
                        || reason.starts_with(tradetune_storage::WORKER_LOST_REASON)
            )
    }

    pub fn new(number: u64, state: TrialState, params: InternalParams) -> Self {
        Self {
            number,
            state,
            value: None,
            params,
            intermediate_values: BTreeMap::new(),
            system_attrs: BTreeMap::new(),
        }
    }

    /// A COMPLETE trial with its objective value.
    pub fn complete(number: u64, params: InternalParams, value: f64) -> Self {
        Self {
            value: Some(value),
            ..Self::new(number, TrialState::Complete, params)
        }
    }

    /// Adds intermediate values (builder style, for tests and replays).
    pub fn with_intermediate(mut self, values: impl IntoIterator<Item = (u64, f64)>) -> Self {
        self.intermediate_values.extend(values);
        self
    }

    /// The last reported step (Optuna's `last_step`).
    pub fn last_step(&self) -> Option<u64> {
        self.intermediate_values.keys().next_back().copied()
    }
}

impl From<&TrialRecord> for Trial {
    /// A stored trial as samplers and pruners see it (negative numbers and steps, which
    /// Optuna never writes, are dropped or clamped).
    fn from(r: &TrialRecord) -> Self {
        Self {
            number: r.number.max(0) as u64,
            state: r.state,
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
            system_attrs: r.system_attrs.iter().cloned().collect(),
        }
    }
}
