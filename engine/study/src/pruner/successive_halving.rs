//! Optuna's `SuccessiveHalvingPruner` (`optuna/pruners/_successive_halving.py`): asynchronous
//! successive halving (ASHA, Li et al. 2020, arXiv:1810.05934).
//!
//! Rung k is reached at step `min_resource · η^(s + k)` (η = reduction factor, s = minimum
//! early-stopping rate). A trial arriving at a rung records its value there
//! (`completed_rung_<k>`) and goes on only if that value is within the best 1/η of the values
//! every trial recorded at the same rung so far; otherwise it is pruned.

use std::sync::OnceLock;

use super::{PruneContext, PruneDecision, Pruner, PrunerError, setting_error};
use crate::trial::{Direction, Trial, TrialState};
use tradetune_storage::JsonValue;

#[derive(Debug)]
pub struct SuccessiveHalvingPruner {
    /// `None`: estimated once from the first COMPLETE trials (Optuna's `"auto"`).
    min_resource: Option<u64>,
    auto_min_resource: OnceLock<u64>,
    reduction_factor: u64,
    min_early_stopping_rate: u32,
    bootstrap_count: usize,
}

impl SuccessiveHalvingPruner {
    /// Optuna's defaults: `min_resource = None` ("auto"), `reduction_factor = 4`,
    /// `min_early_stopping_rate = 0`, `bootstrap_count = 0`.
    pub fn new(
        min_resource: Option<u64>,
        reduction_factor: u64,
        min_early_stopping_rate: u32,
        bootstrap_count: usize,
    ) -> Result<Self, PrunerError> {
        if min_resource == Some(0) {
            return Err(setting_error(
                "min_resource",
                "must be at least 1 (or \"auto\")",
            ));
        }
        if reduction_factor < 2 {
            return Err(setting_error(
                "reduction_factor",
                format!("must be at least 2, got {reduction_factor}"),
            ));
        }
        if bootstrap_count > 0 && min_resource.is_none() {
            return Err(setting_error(
                "bootstrap_count",
                "needs an explicit min_resource (not \"auto\")",
            ));
        }
        Ok(Self {
            min_resource,
            auto_min_resource: OnceLock::new(),
            reduction_factor,
            min_early_stopping_rate,
            bootstrap_count,
        })
    }

    fn min_resource(&self, trials: &[Trial]) -> Option<u64> {
        if let Some(r) = self
            .min_resource
            .or_else(|| self.auto_min_resource.get().copied())
        {
            return Some(r);
        }
        // Optuna: 1/100 of the longest COMPLETE trial's last step (at least 1), fixed once known.
        let longest = trials
            .iter()
            .filter(|t| t.state == TrialState::Complete)
            .filter_map(Trial::last_step)
            .max()?;
        Some(
            *self
                .auto_min_resource
                .get_or_init(|| (longest / 100).max(1)),
        )
    }

    fn promotion_step(&self, min_resource: u64, rung: u32) -> u64 {
        let exp = self.min_early_stopping_rate.saturating_add(rung);
        min_resource.saturating_mul(self.reduction_factor.saturating_pow(exp))
    }
}

pub(crate) fn rung_key(rung: u32) -> String {
    format!("completed_rung_{rung}")
}

impl Pruner for SuccessiveHalvingPruner {
    fn name(&self) -> String {
        "successive_halving".into()
    }

    fn prune(&self, ctx: &PruneContext<'_>) -> PruneDecision {
        let trial = ctx.trial;
        let Some(step) = trial.last_step() else {
            return PruneDecision::keep();
        };
        let Some(value) = trial.intermediate_values.get(&step).copied() else {
            return PruneDecision::keep();
        };
        let mut rung = 0;
        while trial.system_attrs.contains_key(&rung_key(rung)) {
            rung += 1;
        }
        let Some(min_resource) = self.min_resource(ctx.trials) else {
            return PruneDecision::keep();
        };
        let mut decision = PruneDecision::keep();
        loop {
            if step < self.promotion_step(min_resource, rung) {
                return decision;
            }
            if value.is_nan() {
                decision.prune = true;
                return decision;
            }
            let key = rung_key(rung);
            decision
                .system_attrs
                .push((key.clone(), JsonValue::Float(value)));
            let mut competing: Vec<f64> = ctx
                .trials
                .iter()
                .filter(|t| t.number != trial.number)
                .filter_map(|t| t.system_attrs.get(&key).and_then(JsonValue::as_f64))
                .collect();
            competing.push(value);
            if competing.len() <= self.bootstrap_count
                || !promotable(value, competing, self.reduction_factor, ctx.direction)
            {
                decision.prune = true;
                return decision;
            }
            rung += 1;
        }
    }
}

/// Whether `value` is among the best `len / η` (at least the best one) of `competing`.
fn promotable(
    value: f64,
    mut competing: Vec<f64>,
    reduction_factor: u64,
    direction: Direction,
) -> bool {
    let idx = (competing.len() / reduction_factor as usize).saturating_sub(1);
    competing.sort_by(f64::total_cmp);
    match direction {
        Direction::Maximize => value >= competing[competing.len() - 1 - idx],
        Direction::Minimize => value <= competing[idx],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::space::InternalParams;

    /// Reports `values` at steps 1, 2, … of trial `number`, storing the pruner's attributes as
    /// the runner would; returns the trial and the step at which it was pruned.
    fn run(p: &dyn Pruner, history: &[Trial], number: u64, values: &[f64]) -> (Trial, Option<u64>) {
        let mut t = Trial::new(number, TrialState::Running, InternalParams::new());
        for (i, &v) in values.iter().enumerate() {
            let step = i as u64 + 1;
            t.intermediate_values.insert(step, v);
            let d = p.prune(&PruneContext {
                study_name: "s",
                direction: Direction::Minimize,
                trials: history,
                trial: &t,
            });
            t.system_attrs.extend(d.system_attrs);
            if d.prune {
                t.state = TrialState::Pruned;
                return (t, Some(step));
            }
        }
        t.state = TrialState::Complete;
        t.value = values.last().copied();
        (t, None)
    }

    #[test]
    fn halves_at_each_rung() {
        // Rungs at steps 1, 2, 4, 8 (η = 2).
        let p = SuccessiveHalvingPruner::new(Some(1), 2, 0, 0).unwrap();
        let mut history = Vec::new();
        // The first trial is alone at every rung: always promoted.
        let (t0, pruned) = run(&p, &history, 0, &[5.0; 8]);
        assert_eq!(pruned, None);
        assert_eq!(
            t0.system_attrs.len(),
            4,
            "rungs 0..3 recorded: {:?}",
            t0.system_attrs
        );
        history.push(t0);
        // Better at every rung: goes on.
        let (t1, pruned) = run(&p, &history, 1, &[4.0; 8]);
        assert_eq!(pruned, None);
        history.push(t1);
        // Worse than the best half at rung 0 (competing 5, 4, 6 → idx 0 → needs ≤ 4): pruned at step 1.
        let (t2, pruned) = run(&p, &history, 2, &[6.0; 8]);
        assert_eq!(pruned, Some(1));
        assert_eq!(
            t2.system_attrs.get("completed_rung_0"),
            Some(&JsonValue::Float(6.0))
        );
        history.push(t2);
        // Good at rung 0 (competing 5, 4, 6, 3 → best 2 are 3 and 4) but bad at rung 1 (step 2).
        let (_, pruned) = run(&p, &history, 3, &[3.0, 9.0, 9.0]);
        assert_eq!(pruned, Some(2));
    }

    #[test]
    fn an_infinite_rung_value_is_stored_as_optuna_stores_it_and_competes() {
        let p = SuccessiveHalvingPruner::new(Some(1), 2, 0, 0).unwrap();
        // Minimize: -inf at rung 0 is the best value there.
        let (mut t0, pruned) = run(&p, &[], 0, &[f64::NEG_INFINITY]);
        assert_eq!(pruned, None);
        // Through the storage's text and back, as the runner writes it and the next trial
        // reads it.
        let stored = &t0.system_attrs["completed_rung_0"];
        assert_eq!(stored.dumps(), "-Infinity", "Optuna's json.dumps(-inf)");
        let back = JsonValue::parse(&stored.dumps()).unwrap();
        t0.system_attrs.insert("completed_rung_0".into(), back);
        // Competing -inf and 5.0: idx 2/2 - 1 = 0, so only -inf goes on.
        let (_, pruned) = run(&p, &[t0], 1, &[5.0]);
        assert_eq!(pruned, Some(1), "the -inf trial competes at rung 0");
    }

    #[test]
    fn auto_min_resource_and_early_stopping_rate() {
        let p = SuccessiveHalvingPruner::new(None, 3, 0, 0).unwrap();
        let t =
            Trial::new(0, TrialState::Running, InternalParams::new()).with_intermediate([(5, 1.0)]);
        let ctx = |trials| PruneContext {
            study_name: "s",
            direction: Direction::Minimize,
            trials,
            trial: &t,
        };
        assert_eq!(
            p.prune(&ctx(&[])),
            PruneDecision::keep(),
            "no COMPLETE trial yet: no estimate"
        );
        let done = Trial::complete(1, InternalParams::new(), 1.0).with_intermediate([(350, 1.0)]);
        let _ = p.prune(&ctx(std::slice::from_ref(&done)));
        assert_eq!(p.min_resource(&[]), Some(3), "350 / 100, kept once known");
        // s = 1: the first rung is at min_resource · η = 6; step 5 is before it.
        let p = SuccessiveHalvingPruner::new(Some(2), 3, 1, 0).unwrap();
        assert_eq!(p.prune(&ctx(&[])), PruneDecision::keep());
        assert_eq!(p.promotion_step(2, 0), 6);
        assert!(SuccessiveHalvingPruner::new(None, 3, 0, 2).is_err());
        assert!(SuccessiveHalvingPruner::new(Some(1), 1, 0, 0).is_err());
    }

    #[test]
    fn bootstrap_count_prunes_the_first_arrivals() {
        let p = SuccessiveHalvingPruner::new(Some(1), 2, 0, 2).unwrap();
        let (t0, pruned) = run(&p, &[], 0, &[1.0]);
        assert_eq!(pruned, Some(1), "1 value ≤ bootstrap 2");
        let (_, pruned) = run(&p, std::slice::from_ref(&t0), 1, &[1.0]);
        assert_eq!(pruned, Some(1));
        let history = vec![t0, run(&p, &[], 1, &[2.0]).0];
        let (_, pruned) = run(&p, &history, 2, &[0.5]);
        assert_eq!(
            pruned, None,
            "third arrival with the best value is promoted"
        );
    }

    #[test]
    fn promotion_rule() {
        assert!(promotable(
            1.0,
            vec![1.0, 2.0, 3.0, 4.0],
            2,
            Direction::Minimize
        ));
        assert!(promotable(
            2.0,
            vec![1.0, 2.0, 3.0, 4.0],
            2,
            Direction::Minimize
        ));
        assert!(!promotable(
            3.0,
            vec![1.0, 2.0, 3.0, 4.0],
            2,
            Direction::Minimize
        ));
        assert!(promotable(
            3.0,
            vec![1.0, 2.0, 3.0, 4.0],
            2,
            Direction::Maximize
        ));
        assert!(!promotable(
            2.0,
            vec![1.0, 2.0, 3.0, 4.0],
            2,
            Direction::Maximize
        ));
        assert!(promotable(7.0, vec![7.0], 4, Direction::Minimize));
    }
}
