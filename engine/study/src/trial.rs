//! What samplers and pruners see of a study's trials: Optuna's `FrozenTrial`, reduced to the
//! fields they read.

use std::collections::BTreeMap;

use super::space::InternalParams;
use tradetune_storage::{JsonValue, TrialRecord};

/// `Direction` is Optuna's `StudyDirection`, the study layer's short name for it; both are the
/// one type of [`tradetune_storage::model`], as is [`TrialState`].
pub use tradetune_storage::model::{StudyDirection as Direction, TrialState};

/// Why a trial ended FAIL for no fault of its configuration, maybe ([`Trial::cut_short`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CutShort {
    /// Its study was stopped while it ran.
    Interrupted,
    /// Its worker died (its heartbeat went stale).
    WorkerLost,
}

/// Whether the finished trials `of` one grid point or enqueued entry leave it to be run
/// (again): none ended without being cut short, and fewer than two lost their worker (a point
/// whose trials kill their worker would otherwise be run again forever).
pub fn free_again<'a>(of: impl IntoIterator<Item = &'a Trial>) -> bool {
    let mut lost = 0;
    for t in of {
        match t.cut_short() {
            None => return false,
            Some(CutShort::WorkerLost) => lost += 1,
            Some(CutShort::Interrupted) => {}
        }
    }
    lost < 2
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
    /// `grid_id`, `search_space`, `completed_rung_<k>`; as stored, with Python's number model
    /// (a rung value may be ±Infinity, which `serde_json` cannot hold).
    pub system_attrs: BTreeMap<String, JsonValue>,
}

impl Trial {
    /// How the trial failed where it may be for no fault of its configuration: its study was
    /// stopped while it ran (`interrupted`), or its worker died (`worker lost`). Its grid point
    /// or enqueued entry is free again, as the budget already counts it free: a study resumed
    /// after a Ctrl-C or a crash runs it again rather than leaving it without a result (a
    /// point whose trials lost their worker twice is taken: it may be what kills the worker;
    /// see [`free_again`]).
    pub fn cut_short(&self) -> Option<CutShort> {
        if self.state != TrialState::Fail {
            return None;
        }
        match self.system_attrs.get(tradetune_storage::FAIL_REASON_KEY) {
            Some(JsonValue::Str(r)) if r == tradetune_storage::INTERRUPTED_REASON => {
                Some(CutShort::Interrupted)
            }
            Some(JsonValue::Str(r)) if r.starts_with(tradetune_storage::WORKER_LOST_REASON) => {
                Some(CutShort::WorkerLost)
            }
            _ => None,
        }
    }

    /// Whether this PRUNED trial was the user's to stop (the app's Stop on it, once it had
    /// reported values), not its pruner's: no rule judged its values, so TPE does not learn
    /// from it as from a pruned trial (Optuna's counterpart, an interrupted objective, ends
    /// FAIL, which its samplers skip).
    pub fn stopped_by_user(&self) -> bool {
        self.state == TrialState::Pruned
            && matches!(
                self.system_attrs.get(tradetune_storage::PRUNE_REASON_KEY),
                Some(JsonValue::Str(r)) if r.starts_with(tradetune_storage::STOPPED_REASON)
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
    /// Optuna never writes, are dropped or clamped; a parameter set aside on reading, an
    /// infinite range another client stored, is not among its parameters).
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

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(number: u64, reason: &str) -> Trial {
        let mut t = Trial::new(number, TrialState::Fail, InternalParams::new());
        t.system_attrs.insert(
            tradetune_storage::FAIL_REASON_KEY.into(),
            JsonValue::from(reason),
        );
        t
    }

    /// A point is free again where its trials were stopped or lost their worker once; not
    /// where one ended on its own, nor where two lost their worker (the point may be what
    /// kills it: run again on every resume, it would never end).
    #[test]
    fn a_point_is_free_again_after_a_stop_or_one_lost_worker() {
        let stopped = failed(0, "interrupted");
        let lost = failed(
            1,
            "worker lost: last heartbeat 2026-12-01 00:00:00 (database clock)",
        );
        let lost_again = failed(2, "worker lost: last heartbeat 2026-12-01 00:10:00");
        let nan = failed(3, "the objective is NaN");
        let done = Trial::complete(4, InternalParams::new(), 1.0);
        assert_eq!(stopped.cut_short(), Some(CutShort::Interrupted));
        assert_eq!(lost.cut_short(), Some(CutShort::WorkerLost));
        assert_eq!((nan.cut_short(), done.cut_short()), (None, None));
        assert!(free_again([]));
        assert!(free_again([&stopped, &stopped, &lost]));
        assert!(!free_again([&lost, &lost_again]));
        assert!(!free_again([&stopped, &nan]));
        assert!(!free_again([&done]));
    }
}
