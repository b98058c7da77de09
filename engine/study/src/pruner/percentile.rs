//! Optuna's `PercentilePruner` and `MedianPruner` (`optuna/pruners/_percentile.py`).

use super::{PruneContext, PruneDecision, Pruner, PrunerError, setting_error};
use crate::trial::TrialState;

/// Prunes when the trial's best intermediate value is worse than the `percentile`-th best of
/// the COMPLETE trials' values at the trial's current step.
#[derive(Debug, Clone, PartialEq)]
pub struct PercentilePruner {
    percentile: f64,
    n_startup_trials: usize,
    n_warmup_steps: u64,
    interval_steps: u64,
    n_min_trials: usize,
}

impl PercentilePruner {
    /// - `percentile` ∈ [0, 100]: 25 keeps the top quarter;
    /// - no pruning until `n_startup_trials` trials are COMPLETE (Optuna: 5);
    /// - nor before step `n_warmup_steps` of the trial (Optuna: 0);
    /// - then only at the first report in each window of `interval_steps` steps (Optuna: 1);
    /// - and only when at least `n_min_trials` COMPLETE trials reported at this step (1).
    pub fn new(
        percentile: f64,
        n_startup_trials: usize,
        n_warmup_steps: u64,
        interval_steps: u64,
        n_min_trials: usize,
    ) -> Result<Self, PrunerError> {
        if !(0.0..=100.0).contains(&percentile) {
            return Err(setting_error(
                "percentile",
                format!("must be in [0, 100], got {percentile}"),
            ));
        }
        if interval_steps < 1 {
            return Err(setting_error("interval_steps", "must be at least 1"));
        }
        if n_min_trials < 1 {
            return Err(setting_error("n_min_trials", "must be at least 1"));
        }
        Ok(Self {
            percentile,
            n_startup_trials,
            n_warmup_steps,
            interval_steps,
            n_min_trials,
        })
    }

    /// Optuna's `MedianPruner`: the 50th percentile.
    pub fn median(
        n_startup_trials: usize,
        n_warmup_steps: u64,
        interval_steps: u64,
    ) -> Result<Self, PrunerError> {
        Self::new(50.0, n_startup_trials, n_warmup_steps, interval_steps, 1)
    }
}

impl Pruner for PercentilePruner {
    fn name(&self) -> String {
        if self.percentile == 50.0 {
            "median".into()
        } else {
            format!("percentile-{}", self.percentile)
        }
    }

    fn prune(&self, ctx: &PruneContext<'_>) -> PruneDecision {
        let trial = ctx.trial;
        let completed: Vec<_> = ctx
            .trials
            .iter()
            .filter(|t| t.state == TrialState::Complete && t.number != trial.number)
            .collect();
        if completed.is_empty() || completed.len() < self.n_startup_trials {
            return PruneDecision::keep();
        }
        let Some(step) = trial.last_step() else {
            return PruneDecision::keep();
        };
        if step < self.n_warmup_steps {
            return PruneDecision::keep();
        }
        if !first_in_interval(
            step,
            trial.intermediate_values.keys().copied(),
            self.n_warmup_steps,
            self.interval_steps,
        ) {
            return PruneDecision::keep();
        }
        // Best so far, NaN ignored (numpy's nanmin/nanmax); all NaN prunes.
        let best = trial
            .intermediate_values
            .values()
            .copied()
            .filter(|v| !v.is_nan())
            .map(|v| ctx.direction.loss(v))
            .fold(f64::NAN, f64::min);
        if best.is_nan() {
            return PruneDecision::prune();
        }
        let at_step: Vec<f64> = completed
            .iter()
            .filter_map(|t| t.intermediate_values.get(&step).copied())
            .collect();
        if at_step.len() < self.n_min_trials {
            return PruneDecision::keep();
        }
        let mut losses: Vec<f64> = at_step
            .into_iter()
            .filter(|v| !v.is_nan())
            .map(|v| ctx.direction.loss(v))
            .collect();
        if losses.is_empty() {
            return PruneDecision::keep();
        }
        losses.sort_by(f64::total_cmp);
        // In losses the best are lowest for either direction: Optuna's `100 − percentile`
        // for maximization is the same rank here.
        let threshold = percentile_linear(&losses, self.percentile);
        if best > threshold {
            PruneDecision::prune()
        } else {
            PruneDecision::keep()
        }
    }
}

/// numpy's `percentile` with linear interpolation over sorted values, as numpy computes it
/// (`_lerp`): from the lower neighbour below the midpoint, from the upper one at or above it,
/// and always with the next value (clipped at the end), so infinite values give what numpy
/// gives (`[-inf, 5]` at 50: -inf, where one-sided interpolation gives NaN; `[1, 2, inf]` at
/// 50: NaN).
fn percentile_linear(sorted: &[f64], p: f64) -> f64 {
    let last = sorted.len() - 1;
    let rank = p / 100.0 * last as f64;
    let lo = (rank.floor() as usize).min(last);
    let (a, b) = (sorted[lo], sorted[(lo + 1).min(last)]);
    let t = rank - lo as f64;
    let d = b - a;
    if t >= 0.5 {
        b - d * (1.0 - t)
    } else {
        a + d * t
    }
}

/// Optuna's `_is_first_in_interval_step`: the current report is the first one at or after the
/// latest pruning step `warmup + k·interval` not above it.
pub(crate) fn first_in_interval(
    step: u64,
    steps: impl Iterator<Item = u64>,
    warmup: u64,
    interval: u64,
) -> bool {
    let nearest_lower = (step - warmup) / interval * interval + warmup;
    let second_last = steps.filter(|&s| s != step).max();
    second_last.is_none_or(|s| s < nearest_lower)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::space::InternalParams;
    use crate::trial::{Direction, Trial};

    fn curve(number: u64, state: TrialState, values: &[f64]) -> Trial {
        let mut t = Trial::new(number, state, InternalParams::new())
            .with_intermediate(values.iter().enumerate().map(|(i, &v)| (i as u64, v)));
        if state == TrialState::Complete {
            t.value = values.last().copied();
        }
        t
    }

    fn ask(p: &PercentilePruner, dir: Direction, history: &[Trial], trial: &Trial) -> bool {
        p.prune(&PruneContext {
            study_name: "s",
            direction: dir,
            trials: history,
            trial,
        })
        .prune
    }

    #[test]
    fn median_prunes_a_bad_curve_and_keeps_a_good_one() {
        let history: Vec<Trial> = (0..5)
            .map(|i| curve(i, TrialState::Complete, &[1.0 + i as f64, 0.5 + i as f64]))
            .collect();
        let p = PercentilePruner::median(5, 0, 1).unwrap();
        // Medians at step 0 and 1: 3.0 and 2.5.
        assert!(ask(
            &p,
            Direction::Minimize,
            &history,
            &curve(9, TrialState::Running, &[3.5])
        ));
        assert!(!ask(
            &p,
            Direction::Minimize,
            &history,
            &curve(9, TrialState::Running, &[3.0])
        ));
        assert!(!ask(
            &p,
            Direction::Minimize,
            &history,
            &curve(9, TrialState::Running, &[9.0, 2.4])
        ));
        assert!(ask(
            &p,
            Direction::Minimize,
            &history,
            &curve(9, TrialState::Running, &[9.0, 2.6])
        ));
        // Maximizing, the same numbers mean the opposite.
        assert!(!ask(
            &p,
            Direction::Maximize,
            &history,
            &curve(9, TrialState::Running, &[3.5])
        ));
        assert!(ask(
            &p,
            Direction::Maximize,
            &history,
            &curve(9, TrialState::Running, &[2.9])
        ));
        // All-NaN curves are pruned.
        assert!(ask(
            &p,
            Direction::Minimize,
            &history,
            &curve(9, TrialState::Running, &[f64::NAN])
        ));
        // Best value so far counts, not the last.
        assert!(!ask(
            &p,
            Direction::Minimize,
            &history,
            &curve(9, TrialState::Running, &[0.0, 100.0])
        ));
    }

    #[test]
    fn startup_warmup_interval_and_min_trials() {
        let history: Vec<Trial> = (0..4)
            .map(|i| curve(i, TrialState::Complete, &[1.0; 8]))
            .collect();
        let bad = |n: usize| curve(9, TrialState::Running, &vec![5.0; n]);
        let p = PercentilePruner::median(5, 0, 1).unwrap();
        assert!(
            !ask(&p, Direction::Minimize, &history, &bad(1)),
            "4 < 5 startup trials"
        );
        let p = PercentilePruner::median(4, 0, 1).unwrap();
        assert!(ask(&p, Direction::Minimize, &history, &bad(1)));
        let p = PercentilePruner::median(4, 3, 1).unwrap();
        assert!(
            !ask(&p, Direction::Minimize, &history, &bad(3)),
            "step 2 < 3 warm-up steps"
        );
        assert!(ask(&p, Direction::Minimize, &history, &bad(4)));
        let p = PercentilePruner::median(4, 2, 3).unwrap();
        // Pruning steps 2, 5, 8, …: step 2 is one; steps 3 and 4 follow step 2, not first in window.
        assert!(ask(&p, Direction::Minimize, &history, &bad(3)));
        assert!(!ask(&p, Direction::Minimize, &history, &bad(4)));
        assert!(!ask(&p, Direction::Minimize, &history, &bad(5)));
        assert!(ask(&p, Direction::Minimize, &history, &bad(6)));
        // A report that skips ahead past a window's start is first in its window.
        let skip = curve(9, TrialState::Running, &[5.0]).with_intermediate([(7, 5.0)]);
        assert!(ask(&p, Direction::Minimize, &history, &skip));
        // Nobody reported at step 20: keep.
        let far = curve(9, TrialState::Running, &[]).with_intermediate([(20, 5.0)]);
        assert!(!ask(
            &PercentilePruner::median(1, 0, 1).unwrap(),
            Direction::Minimize,
            &history,
            &far
        ));
        let p = PercentilePruner::new(50.0, 1, 0, 1, 5).unwrap();
        assert!(
            !ask(&p, Direction::Minimize, &history, &bad(1)),
            "4 values at the step < n_min_trials 5"
        );
    }

    #[test]
    fn percentile_interpolates_like_numpy() {
        assert_eq!(percentile_linear(&[1.0, 2.0, 3.0, 4.0], 50.0), 2.5);
        assert_eq!(percentile_linear(&[1.0, 2.0, 3.0, 4.0], 25.0), 1.75);
        assert_eq!(percentile_linear(&[7.0], 90.0), 7.0);
        let history: Vec<Trial> = (0..4)
            .map(|i| curve(i, TrialState::Complete, &[i as f64 + 1.0]))
            .collect();
        // 25th percentile keeps the top quarter: 1.75 for minimization, 3.25 for maximization.
        let p = PercentilePruner::new(25.0, 1, 0, 1, 1).unwrap();
        assert!(ask(
            &p,
            Direction::Minimize,
            &history,
            &curve(9, TrialState::Running, &[1.8])
        ));
        assert!(!ask(
            &p,
            Direction::Minimize,
            &history,
            &curve(9, TrialState::Running, &[1.7])
        ));
        assert!(ask(
            &p,
            Direction::Maximize,
            &history,
            &curve(9, TrialState::Running, &[3.2])
        ));
        assert!(!ask(
            &p,
            Direction::Maximize,
            &history,
            &curve(9, TrialState::Running, &[3.3])
        ));
        assert!(PercentilePruner::new(101.0, 1, 0, 1, 1).is_err());
        assert!(PercentilePruner::median(1, 0, 0).is_err());
    }

    /// The interpolation is numpy's, infinite values included (the values numpy 2 gives).
    #[test]
    fn percentiles_are_numpys_with_infinite_values_too() {
        let inf = f64::INFINITY;
        let same = |v: &[f64], p: f64, want: f64| {
            let got = percentile_linear(v, p);
            assert!(
                got == want || (got.is_nan() && want.is_nan()) || (got - want).abs() < 1e-12,
                "{v:?} at {p}: {got}, numpy {want}"
            );
        };
        same(&[-inf, 5.0], 50.0, -inf);
        same(&[-inf, 5.0], 40.0, f64::NAN);
        same(&[1.0, inf, inf], 50.0, f64::NAN);
        same(&[1.0, 2.0, inf], 50.0, f64::NAN);
        same(&[1.0, 2.0, inf], 75.0, f64::NAN);
        same(&[1.0, 2.0, 3.0, 4.0], 25.0, 1.75);
        same(&[1.0, 2.0, 3.0, 4.0], 70.0, 3.1);
        same(&[1.0, 2.0, 3.0, 4.0], 100.0, 4.0);
        same(&[7.0], 30.0, 7.0);
    }
}
