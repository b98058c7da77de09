//! Pruners: stop hopeless trials early from their intermediate values (the trainer's periodic
//! evaluations), with Optuna 5.0's semantics.
//!
//! - [`PercentilePruner`] / [`PercentilePruner::median`]: prune a trial whose best value so far
//!   is worse than the given percentile of the COMPLETE trials' values at the same step.
//! - [`SuccessiveHalvingPruner`]: asynchronous successive halving (Li et al. 2020, "A System
//!   for Massively Parallel Hyperparameter Tuning", arXiv:1810.05934).
//! - [`HyperbandPruner`]: several successive-halving brackets, trials spread over them by a
//!   hash of the study name and trial number (Li et al. 2018, arXiv:1603.06560).
//!
//! A pruner is asked after every reported value. Its answer may carry system attributes to
//! store with the trial (successive halving records the value at which a trial passed each rung
//! as `completed_rung_<k>`, as Optuna does, and reads them back from the history), so the
//! caller must persist them before the next question.

pub mod hyperband;
pub mod percentile;
pub mod successive_halving;

pub use hyperband::HyperbandPruner;
pub use percentile::PercentilePruner;
pub use successive_halving::SuccessiveHalvingPruner;

use super::trial::{Direction, Trial};
use tradetune_storage::JsonValue;

/// What a pruner may look at.
#[derive(Debug, Clone, Copy)]
pub struct PruneContext<'a> {
    /// Hyperband hashes it with the trial number to pick a trial's bracket.
    pub study_name: &'a str,
    pub direction: Direction,
    /// Every trial of the study (it may include `trial` itself; pruners skip it by number).
    pub trials: &'a [Trial],
    /// The trial asking, with its intermediate values up to the latest report.
    pub trial: &'a Trial,
}

/// A pruner's answer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PruneDecision {
    pub prune: bool,
    /// System attributes to store with the trial (a rung value may be ±inf, stored as
    /// Python's `json.dumps` writes it: `Infinity`).
    pub system_attrs: Vec<(String, JsonValue)>,
}

impl PruneDecision {
    pub fn keep() -> Self {
        Self::default()
    }
    pub fn prune() -> Self {
        Self {
            prune: true,
            system_attrs: vec![],
        }
    }
}

/// Invalid pruner settings.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("pruner setting '{field}': {message}")]
pub struct PrunerError {
    pub field: &'static str,
    pub message: String,
}

pub(crate) fn setting_error(field: &'static str, message: impl Into<String>) -> PrunerError {
    PrunerError {
        field,
        message: message.into(),
    }
}

/// Decides whether a trial stops now.
pub trait Pruner: Send + Sync {
    fn name(&self) -> String;
    fn prune(&self, ctx: &PruneContext<'_>) -> PruneDecision;
}

/// Never prunes (Optuna's `NopPruner`).
#[derive(Debug, Clone, Default)]
pub struct NopPruner;

impl Pruner for NopPruner {
    fn name(&self) -> String {
        "none".into()
    }
    fn prune(&self, _ctx: &PruneContext<'_>) -> PruneDecision {
        PruneDecision::keep()
    }
}
