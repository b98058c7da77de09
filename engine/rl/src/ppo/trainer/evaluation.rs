//! The trainer's evaluations: on demand ([`Trainer::evaluate`]) and the periodic one after an
//! update, timed as the evaluation phase with its compilations as the compile phase's.

use std::time::Instant;

use crate::eval::{EvalError, EvalReport, EvalSplit, EvalSummary, Objective, TimedEval};
use crate::ppo::error::PpoError;
use crate::ppo::events::PhaseTimes;
use crate::ppo::policy::evaluate_policy_timed;
use crate::ppo::rollout_env::RolloutEnv;
use tradetune_device::kernels;

use super::Trainer;

impl<E: RolloutEnv> Trainer<E> {
    /// [`crate::eval::evaluate`] of the current policy and normalisation statistics.
    pub fn evaluate(
        &self,
        split: &EvalSplit,
        objective: Objective,
    ) -> Result<EvalReport, EvalError> {
        self.evaluate_timed(split, objective).map(|t| t.report)
    }

    fn evaluate_timed(
        &self,
        split: &EvalSplit,
        objective: Objective,
    ) -> Result<TimedEval, EvalError> {
        let norm = self.normalization().map_err(|e| EvalError::Policy {
            split: split.name.clone(),
            reason: e.to_string(),
        })?;
        evaluate_policy_timed(self.model(), &norm, &self.cfg, split, objective)
    }

    /// The periodic evaluation due after this update, if any, timed as the evaluation phase;
    /// where it compiled kernels (a GPU's first evaluation: the policy at one row, the env at
    /// one env), the time its first bars took beyond its pace is the compile phase's.
    pub(super) fn periodic_evaluation(
        &mut self,
        phases: &mut PhaseTimes,
    ) -> Result<Option<EvalSummary>, PpoError> {
        let Some(pe) = &self.evaluation else {
            return Ok(None);
        };
        if !self.updates.is_multiple_of(pe.every) {
            return Ok(None);
        }
        // The compilation log's lines arrive a moment after the compilations: let the
        // update's in before the evaluation's window opens, and the evaluation's before it
        // closes (on a GPU whose compilations are counted only; 20 ms or more each).
        // The waits are timed with the evaluation, so that the phases still sum to the run.
        let settle = self.compiles && kernels::counting_compiles();
        let t = Instant::now();
        if settle {
            kernels::settle();
        }
        let before = kernels::counts();
        let timed =
            self.evaluate_timed(&pe.split, pe.objective)
                .map_err(|e| PpoError::Evaluation {
                    update: self.updates,
                    source: Box::new(e),
                })?;
        self.sync("sync: evaluation")?;
        if settle {
            kernels::settle();
        }
        let wall = t.elapsed().as_secs_f64();
        let compiled = kernels::counts().since(&before);
        let compile = if self.compile_watch.evaluated(compiled, self.compiles) {
            timed.slow_start_s.min(wall)
        } else {
            0.0
        };
        phases.evaluation += wall - compile;
        phases.compile += compile;
        Ok(Some(timed.report.summary()))
    }
}
