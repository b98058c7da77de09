//! What samplers and pruners see of a study's trials: Optuna's `FrozenTrial`, reduced to the
//! fields they read.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::space::InternalParams;

/// A trial's state, with Optuna's names (stored upper case: `RUNNING`, `COMPLETE`, …).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum TrialState {
    Running,
    Complete,
    Pruned,
    Fail,
    Waiting,
}

impl TrialState {
    /// Optuna's `is_finished()`: COMPLETE, PRUNED or FAIL.
    pub fn is_finished(self) -> bool {
        matches!(
            self,
            TrialState::Complete | TrialState::Pruned | TrialState::Fail
        )
    }
}

/// Whether the objective is minimized or maximized (`MINIMIZE` / `MAXIMIZE` in Optuna).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Direction {
    #[default]
    Minimize,
    Maximize,
}

impl Direction {
    /// `value` as a loss: smaller is better.
    pub fn loss(self, value: f64) -> f64 {
        match self {
            Direction::Minimize => value,
            Direction::Maximize => -value,
        }
    }
}

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
    /// `grid_id`, `search_space`, `completed_rung_<k>`.
    pub system_attrs: BTreeMap<String, serde_json::Value>,
}

impl Trial {
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
