//! Optuna's `HyperbandPruner` (`optuna/pruners/_hyperband.py`; Li et al. 2018, "Hyperband",
//! arXiv:1603.06560).
//!
//! `n = ⌊log_η(max_resource / min_resource)⌋ + 1` successive-halving brackets; bracket b stops
//! early at rate b (its first rung at `min_resource · η^b`). A trial's bracket is
//! `crc32("{study_name}_{number}") mod B`, walked through the brackets' budgets
//! `⌈n · η^s / (s + 1)⌉` (s = n − 1 − b), exactly as Optuna, so TradeTune and Optuna put the
//! same trial in the same bracket. Each bracket's pruner sees only the trials of its bracket;
//! the sampler learns from every trial of the study (Optuna 5.0's `_BracketStudy` filters
//! `get_trials` only, and its TPE reads `_get_trials`: start-up counts the whole study's
//! trials, not each bracket's).
//! With `max_resource = "auto"` (the longest COMPLETE trial's last step + 1) below
//! `min_resource` there is no bracket and, as in Optuna, nothing is pruned.

use std::sync::OnceLock;

use super::successive_halving::SuccessiveHalvingPruner;
use super::{PruneContext, PruneDecision, Pruner, PrunerError, setting_error};
use crate::trial::{Trial, TrialState};

#[derive(Debug)]
struct Brackets {
    budgets: Vec<u64>,
    total: u64,
    pruners: Vec<SuccessiveHalvingPruner>,
}

#[derive(Debug)]
pub struct HyperbandPruner {
    min_resource: u64,
    /// `None`: one more than the longest COMPLETE trial's last step, once one exists ("auto").
    max_resource: Option<u64>,
    reduction_factor: u64,
    bootstrap_count: usize,
    brackets: OnceLock<Brackets>,
}

impl HyperbandPruner {
    /// Optuna's defaults: `min_resource = 1`, `max_resource = None` ("auto"),
    /// `reduction_factor = 3`, `bootstrap_count = 0`.
    pub fn new(
        min_resource: u64,
        max_resource: Option<u64>,
        reduction_factor: u64,
        bootstrap_count: usize,
    ) -> Result<Self, PrunerError> {
        if min_resource < 1 {
            return Err(setting_error("min_resource", "must be at least 1"));
        }
        if reduction_factor < 2 {
            return Err(setting_error(
                "reduction_factor",
                format!("must be at least 2, got {reduction_factor}"),
            ));
        }
        if max_resource.is_some_and(|m| m < min_resource) {
            return Err(setting_error(
                "max_resource",
                "must be at least min_resource",
            ));
        }
        if bootstrap_count > 0 && max_resource.is_none() {
            return Err(setting_error(
                "bootstrap_count",
                "needs an explicit max_resource (not \"auto\")",
            ));
        }
        Ok(Self {
            min_resource,
            max_resource,
            reduction_factor,
            bootstrap_count,
            brackets: OnceLock::new(),
        })
    }

    fn brackets(&self, trials: &[Trial]) -> Result<Option<&Brackets>, PrunerError> {
        if let Some(b) = self.brackets.get() {
            return Ok(Some(b));
        }
        let max_resource = match self.max_resource {
            Some(m) => m,
            None => {
                let longest = trials
                    .iter()
                    .filter(|t| t.state == TrialState::Complete)
                    .filter_map(Trial::last_step)
                    .max();
                // Optuna: max(last step) + 1, not raised to min_resource; below it there are
                // no brackets and nothing is pruned.
                match longest {
                    Some(s) => s.saturating_add(1),
                    None => return Ok(None),
                }
            }
        };
        // Python's math.log(x, base) = ln x / ln base, floored: the same float arithmetic.
        let ratio = max_resource as f64 / self.min_resource as f64;
        let n = ((ratio.ln() / (self.reduction_factor as f64).ln()).floor() as i64)
            .saturating_add(1)
            .clamp(0, i64::from(u32::MAX)) as u32;
        let mut budgets = Vec::with_capacity(n as usize);
        let mut pruners = Vec::with_capacity(n as usize);
        for b in 0..n {
            let s = n - 1 - b;
            let budget = (n as f64 * (self.reduction_factor as f64).powi(s as i32) / (s + 1) as f64)
                .ceil() as u64;
            budgets.push(budget);
            pruners.push(SuccessiveHalvingPruner::new(
                Some(self.min_resource),
                self.reduction_factor,
                b,
                self.bootstrap_count,
            )?);
        }
        let total = budgets.iter().sum();
        Ok(Some(self.brackets.get_or_init(|| Brackets {
            budgets,
            total,
            pruners,
        })))
    }

    /// Number of brackets, once known.
    pub fn n_brackets(&self) -> Option<usize> {
        self.brackets.get().map(|b| b.pruners.len())
    }

    /// The bracket of trial `number` of `study_name`, once the brackets are known (and there
    /// are some).
    pub fn bracket_of(&self, study_name: &str, number: u64) -> Option<usize> {
        self.brackets
            .get()
            .filter(|b| !b.pruners.is_empty())
            .map(|b| bracket_id(b, study_name, number))
    }
}

fn bracket_id(b: &Brackets, study_name: &str, number: u64) -> usize {
    let mut n =
        crc32fast::hash(format!("{study_name}_{number}").as_bytes()) as u64 % b.total.max(1);
    for (id, budget) in b.budgets.iter().enumerate() {
        if n < *budget {
            return id;
        }
        n -= budget;
    }
    b.budgets.len().saturating_sub(1)
}

impl Pruner for HyperbandPruner {
    fn name(&self) -> String {
        "hyperband".into()
    }

    fn prune(&self, ctx: &PruneContext<'_>) -> PruneDecision {
        // Settings were validated in `new`, so building the brackets cannot fail; should it,
        // not pruning is the safe answer.
        let Ok(Some(b)) = self.brackets(ctx.trials) else {
            return PruneDecision::keep();
        };
        if b.pruners.is_empty() {
            return PruneDecision::keep();
        }
        let id = bracket_id(b, ctx.study_name, ctx.trial.number);
        let same_bracket: Vec<Trial> = ctx
            .trials
            .iter()
            .filter(|t| bracket_id(b, ctx.study_name, t.number) == id)
            .cloned()
            .collect();
        b.pruners[id].prune(&PruneContext {
            trials: &same_bracket,
            ..*ctx
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::space::InternalParams;
    use crate::trial::Direction;

    #[test]
    fn brackets_and_budgets_follow_optuna() {
        // max 81, min 1, η 3: 5 brackets with budgets ⌈5·3^s/(s+1)⌉ = 81, 34, 15, 8, 5
        // (checked against Optuna 5.0's `_trial_allocation_budgets`).
        let p = HyperbandPruner::new(1, Some(81), 3, 0).unwrap();
        let b = p.brackets(&[]).unwrap().unwrap();
        assert_eq!(b.budgets, vec![81, 34, 15, 8, 5]);
        assert_eq!(b.total, 143);
        // crc32("study_7") = 0x8b97e2bf = 2342003391 ≡ 13 (mod 143) < 81: bracket 0, as
        // Optuna's `_get_bracket_id` says.
        assert_eq!(crc32fast::hash(b"study_7"), 0x8b97_e2bf);
        assert_eq!(p.bracket_of("study", 7), Some(0));
        // Trials 0..19 of study "s", from Optuna 5.0.
        let optuna = [0, 0, 0, 1, 0, 1, 0, 0, 0, 2, 0, 0, 1, 2, 0, 1, 1, 1, 2, 0];
        let ours: Vec<usize> = (0..20).map(|n| p.bracket_of("s", n).unwrap()).collect();
        assert_eq!(ours, optuna);
    }

    #[test]
    fn auto_max_resource_waits_for_a_complete_trial() {
        let p = HyperbandPruner::new(1, None, 3, 0).unwrap();
        let t =
            Trial::new(0, TrialState::Running, InternalParams::new()).with_intermediate([(1, 9.0)]);
        let ctx = |trials| PruneContext {
            study_name: "s",
            direction: Direction::Minimize,
            trials,
            trial: &t,
        };
        assert!(!p.prune(&ctx(&[])).prune);
        assert_eq!(p.n_brackets(), None);
        let done = Trial::complete(1, InternalParams::new(), 1.0).with_intermediate([(26, 1.0)]);
        let _ = p.prune(&ctx(std::slice::from_ref(&done)));
        // max_resource = 27 ⇒ ⌊log_3 27⌋ + 1 = 4 brackets (ln 27 / ln 3 = 3.0000000000000004).
        assert_eq!(p.n_brackets(), Some(4));
    }

    #[test]
    fn auto_max_resource_below_min_resource_means_no_brackets_as_in_optuna() {
        let p = HyperbandPruner::new(10, None, 3, 0).unwrap();
        let done = Trial::complete(0, InternalParams::new(), 1.0).with_intermediate([(3, 1.0)]);
        let mut history = vec![done];
        // Pruned trials that passed rung 0 (step 10) with 0.0; then a bad one at step 12.
        for number in 1..4u64 {
            let mut t = Trial::new(number, TrialState::Pruned, InternalParams::new())
                .with_intermediate([(12, 0.0)]);
            t.system_attrs.insert(
                "completed_rung_0".into(),
                tradetune_storage::JsonValue::Float(0.0),
            );
            history.push(t);
        }
        let t = Trial::new(9, TrialState::Running, InternalParams::new())
            .with_intermediate([(12, 99.0)]);
        let d = p.prune(&PruneContext {
            study_name: "s",
            direction: Direction::Minimize,
            trials: &history,
            trial: &t,
        });
        // max_resource = 3 + 1 = 4 < 10: ⌊log_3 0.4⌋ + 1 = 0 brackets; Optuna never prunes.
        assert_eq!(p.n_brackets(), Some(0));
        assert_eq!(d, PruneDecision::keep());
        assert_eq!(p.bracket_of("s", 9), None);
    }

    #[test]
    fn prunes_within_a_bracket() {
        // One bracket (max = min): plain successive halving at steps 1, 3, 9, …
        let p = HyperbandPruner::new(1, Some(2), 3, 0).unwrap();
        let mut history: Vec<Trial> = Vec::new();
        let mut pruned = 0;
        for number in 0..12u64 {
            let mut t = Trial::new(number, TrialState::Running, InternalParams::new());
            t.intermediate_values.insert(1, ((7 * number) % 12) as f64);
            let d = p.prune(&PruneContext {
                study_name: "s",
                direction: Direction::Minimize,
                trials: &history,
                trial: &t,
            });
            t.system_attrs.extend(d.system_attrs);
            t.state = if d.prune {
                TrialState::Pruned
            } else {
                TrialState::Complete
            };
            pruned += usize::from(d.prune);
            history.push(t);
        }
        assert_eq!(p.n_brackets(), Some(1));
        // Optuna 5.0 prunes 10 of these 12 trials (only the values 0 and 1 are promoted).
        assert_eq!(pruned, 10, "{history:#?}");
    }
}
