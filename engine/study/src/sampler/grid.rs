//! Grid search with the bookkeeping of Optuna's `GridSampler`: the grid is the Cartesian
//! product of the listed values in parameter-name order, shuffled once by the seed; each trial
//! stores its `grid_id` and the grid (`search_space`) as system attributes, and a point counts
//! as taken when a finished trial holds it (or a RUNNING one, while untaken points remain).
//!
//! Which point a trial of the grid holds is read from its parameter values; its `grid_id` is
//! only the fallback for a trial without them. The shuffle is numpy's `RandomState(seed)`
//! shuffle, Optuna's own ([`super::numpy_shuffle`]): an Optuna `GridSampler` given the same grid
//! and seed reads a TradeTune trial's `grid_id` as the point it ran, so Optuna and TradeTune
//! processes can work one grid study together (Optuna takes trial n's id as its point without
//! looking at the values). After a change of seed (a resume or a `tradetune worker` with
//! another `sampler.seed`) stored ids name other points; the values still tell TradeTune which
//! points ran, so none is skipped or repeated.
//!
//! Trial n takes the n-th point when it is free; otherwise, as in Optuna, a point drawn at
//! random among the free ones (the trial's own random stream), so processes sampling at the
//! same time rarely collide.
//!
//! Unlike Optuna, which re-runs a random point (with a warning) once the grid is used up, the
//! sampler then answers [`SamplerError::GridExhausted`], so the study stops there.

use std::collections::{BTreeMap, BTreeSet};

use rand::RngExt;

use super::{Proposal, SampleContext, Sampler, SamplerError, trial_rng};
use crate::space::{ParamValue, SearchSpace};
use crate::trial::TrialState;
use tradetune_storage::JsonValue;

/// Largest grid accepted: a bigger one is almost certainly a mistake in the study file.
const MAX_GRID_POINTS: usize = 10_000_000;

/// Stream salt of the grid's draw among free points (see [`trial_rng`]).
const GRID_SALT: u64 = 0x47524944; // "GRID"

#[derive(Debug, Clone)]
pub struct GridSampler {
    names: Vec<String>,
    values: Vec<Vec<ParamValue>>,
    /// Each parameter's values in internal representation, to tell a trial's point.
    internal: Vec<Vec<f64>>,
    /// `order[id]` = the point's index in the unshuffled product (first name most
    /// significant); `id_of` is its inverse.
    order: Vec<usize>,
    id_of: Vec<usize>,
    /// The `search_space` system attribute: `{name: [values…]}`.
    grid_json: serde_json::Value,
    seed: u64,
}

impl GridSampler {
    /// `grid` lists the values of every parameter of `space` (all of them, and only them).
    pub fn new(
        grid: BTreeMap<String, Vec<ParamValue>>,
        space: &SearchSpace,
        seed: u64,
    ) -> Result<Self, SamplerError> {
        for name in space.names() {
            if !grid.contains_key(name) {
                return Err(SamplerError::Grid(format!(
                    "parameter '{name}' has no grid values: list the values to try under \
                     [sampler.grid], as \"{name}\" = [a, b, c] (every searched parameter needs \
                     its list)"
                )));
            }
        }
        let mut total: usize = 1;
        let mut internal = Vec::with_capacity(grid.len());
        for (name, values) in &grid {
            let dist = space.get(name).ok_or_else(|| {
                SamplerError::Grid(format!(
                    "'{name}' is not in the search space (its parameters: {})",
                    space.names().collect::<Vec<_>>().join(", ")
                ))
            })?;
            if values.is_empty() {
                return Err(SamplerError::Grid(format!(
                    "parameter '{name}' has an empty list of values"
                )));
            }
            let mut column = Vec::with_capacity(values.len());
            for v in values {
                match dist.to_internal(v) {
                    Ok(i) if dist.contains(i) => column.push(i),
                    _ => {
                        return Err(SamplerError::Grid(format!(
                            "value {v} of '{name}' is not in its range {dist}"
                        )));
                    }
                }
            }
            internal.push(column);
            total = total.saturating_mul(values.len());
        }
        if total > MAX_GRID_POINTS {
            return Err(SamplerError::Grid(format!(
                "the grid has {total} points, more than {MAX_GRID_POINTS}"
            )));
        }
        let names: Vec<String> = grid.keys().cloned().collect();
        let values: Vec<Vec<ParamValue>> = grid.values().cloned().collect();
        // Shuffling the product indices permutes exactly as Optuna's shuffle of the points
        // themselves (the swaps depend on the length and the seed only).
        let mut order: Vec<usize> = (0..total).collect();
        super::numpy_shuffle::shuffle(&mut order, seed);
        let mut id_of = vec![0; total];
        for (id, &p) in order.iter().enumerate() {
            id_of[p] = id;
        }
        let grid_json = serde_json::Value::Object(
            grid.iter()
                .map(|(k, vs)| {
                    (
                        k.clone(),
                        serde_json::Value::Array(vs.iter().map(ParamValue::to_json).collect()),
                    )
                })
                .collect(),
        );
        Ok(Self {
            names,
            values,
            internal,
            order,
            id_of,
            grid_json,
            seed,
        })
    }

    /// Number of points of the grid.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// Index of each parameter's value at point `id`, in `names` order.
    fn digits(&self, id: usize) -> Vec<usize> {
        let mut p = self.order[id];
        let mut out = vec![0; self.values.len()];
        for (slot, vs) in out.iter_mut().zip(&self.values).rev() {
            *slot = p % vs.len();
            p /= vs.len();
        }
        out
    }

    /// The point whose values `params` holds, if one does.
    fn point_of(&self, params: &crate::space::InternalParams) -> Option<usize> {
        let mut product = 0;
        for (name, column) in self.names.iter().zip(&self.internal) {
            let v = params.get(name)?;
            let i = column.iter().position(|c| c == v)?;
            product = product * column.len() + i;
        }
        self.id_of.get(product).copied()
    }

    /// (finished, running) grid ids of the history that belong to this grid.
    fn taken(&self, ctx: &SampleContext<'_>) -> (BTreeSet<usize>, BTreeSet<usize>) {
        let mut ended: BTreeMap<usize, Vec<&crate::trial::Trial>> = BTreeMap::new();
        let mut running = BTreeSet::new();
        for t in ctx.history.iter().filter(|t| t.number != ctx.trial_number) {
            let same_grid = t
                .system_attrs
                .get("search_space")
                .is_some_and(|g| serde_json::Value::from(g) == self.grid_json);
            let hint = match t.system_attrs.get("grid_id") {
                Some(JsonValue::Int(id)) => usize::try_from(*id).ok(),
                _ => None,
            };
            // The point its values say (ids may come from another permutation), else its id.
            let id = hint.and_then(|h| self.point_of(&t.params).or(Some(h)));
            if let (true, Some(id)) = (same_grid, id) {
                if t.state.is_finished() {
                    ended.entry(id).or_default().push(t);
                } else if t.state == TrialState::Running {
                    running.insert(id);
                }
            }
        }
        // A point whose trials a stop or a dead worker cut short is free again.
        let finished = (ended.into_iter())
            .filter(|(_, trials)| !crate::trial::free_again(trials.iter().copied()))
            .map(|(id, _)| id)
            .collect();
        (finished, running)
    }

    /// Whether every point has been tried by a finished trial.
    pub fn is_exhausted(&self, ctx: &SampleContext<'_>) -> bool {
        self.taken(ctx).0.len() >= self.len()
    }
}

impl Sampler for GridSampler {
    fn name(&self) -> String {
        "grid".into()
    }

    fn needs_complete_entries(&self) -> bool {
        true
    }

    fn can_run_out(&self) -> bool {
        true
    }

    fn ran_out(&self, ctx: &SampleContext<'_>) -> bool {
        self.is_exhausted(ctx)
    }

    fn sample(&self, ctx: &SampleContext<'_>) -> Result<Proposal, SamplerError> {
        let (finished, running) = self.taken(ctx);
        let free = |id: &usize| !finished.contains(id) && !running.contains(id);
        let n = ctx.trial_number as usize;
        // Optuna gives trial n the n-th point of the shuffled grid; otherwise a free point
        // drawn at random (Optuna's `rng.choice(target_grids)`, "to make the sampled grids
        // diversified"), else one only RUNNING trials hold.
        let id = if n < self.len() && free(&n) {
            n
        } else {
            let mut targets: Vec<usize> = (0..self.len()).filter(free).collect();
            if targets.is_empty() {
                targets = (0..self.len())
                    .filter(|id| !finished.contains(id))
                    .collect();
            }
            if targets.is_empty() {
                return Err(SamplerError::GridExhausted(self.len()));
            }
            let mut rng = trial_rng(self.seed, ctx.trial_number, GRID_SALT);
            targets[rng.random_range(0..targets.len())]
        };
        let mut proposal = Proposal::default();
        for ((name, values), i) in self.names.iter().zip(&self.values).zip(self.digits(id)) {
            let dist = ctx.space.get(name).ok_or_else(|| {
                SamplerError::Grid(format!("'{name}' is not in the search space"))
            })?;
            let v = dist
                .to_internal(&values[i])
                .map_err(|e| SamplerError::Grid(format!("'{name}': {e}")))?;
            proposal.params.insert(name.clone(), v);
        }
        proposal
            .system_attrs
            .insert("search_space".into(), self.grid_json.clone());
        proposal
            .system_attrs
            .insert("grid_id".into(), serde_json::Value::from(id));
        Ok(proposal)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::space::CategoricalChoice;
    use crate::trial::{Direction, Trial};

    /// Trial `number`'s context over `history`, minimising.
    fn context<'a>(space: &'a SearchSpace, history: &'a [Trial], number: u64) -> SampleContext<'a> {
        SampleContext::new(space, history, Direction::Minimize, number)
    }

    /// An int `n` in 1..=`high` gridded at `ns`, and a categorical `c` of "a" and "b".
    fn n_and_c(high: i64, ns: &[i64]) -> (SearchSpace, BTreeMap<String, Vec<ParamValue>>) {
        let mut space = SearchSpace::new();
        space.add_int("n", 1, high, false, 1).unwrap();
        let choices = vec![
            CategoricalChoice::Str("a".into()),
            CategoricalChoice::Str("b".into()),
        ];
        space.add_categorical("c", choices).unwrap();
        let grid = BTreeMap::from([
            (
                "n".to_owned(),
                ns.iter().map(|&n| ParamValue::Int(n)).collect(),
            ),
            (
                "c".to_owned(),
                vec![ParamValue::str("a"), ParamValue::str("b")],
            ),
        ]);
        (space, grid)
    }

    #[test]
    fn visits_every_point_once_then_stops() {
        let (space, grid) = n_and_c(8, &[1, 4, 8]);
        let g = GridSampler::new(grid, &space, 5).unwrap();
        assert_eq!(g.len(), 6);
        let mut history: Vec<Trial> = Vec::new();
        let mut seen = BTreeSet::new();
        for number in 0..6u64 {
            let ctx = context(&space, &history, number);
            let p = g.sample(&ctx).unwrap();
            assert!(
                seen.insert((p.params["n"] as i64, p.params["c"] as i64)),
                "point repeated"
            );
            // Leave trial 2 RUNNING: the others must still avoid its point.
            let mut t = if number == 2 {
                Trial::new(number, TrialState::Running, p.params.clone())
            } else {
                Trial::complete(number, p.params.clone(), 0.0)
            };
            t.system_attrs = p.stored_system_attrs();
            history.push(t);
        }
        let ctx = context(&space, &history, 6);
        // Only the RUNNING trial's point is left unfinished: it is proposed again.
        let again = g.sample(&ctx).unwrap();
        assert_eq!(again.params, history[2].params);
        history[2].state = TrialState::Complete;
        let ctx = context(&space, &history, 6);
        assert!(g.is_exhausted(&ctx));
        assert_eq!(g.sample(&ctx), Err(SamplerError::GridExhausted(6)));
    }

    /// A point whose trial a stop or a dead worker cut short is free again (its trial failed
    /// for no fault of its point); one whose trial failed on its own stays taken.
    #[test]
    fn a_point_cut_short_is_run_again_and_a_failed_one_is_not() {
        let (space, grid) = n_and_c(8, &[1, 4]);
        let g = GridSampler::new(grid, &space, 5).unwrap();
        let mut history: Vec<Trial> = Vec::new();
        let reasons = [
            None,
            Some("interrupted"),
            Some(
                "worker lost: last heartbeat 2026-12-01 00:00:00 (database clock) is older than 60 s",
            ),
            Some("the objective is NaN"),
        ];
        for (number, reason) in reasons.iter().enumerate() {
            let ctx = context(&space, &history, number as u64);
            let p = g.sample(&ctx).unwrap();
            let mut t = match reason {
                None => Trial::complete(number as u64, p.params.clone(), 0.0),
                Some(_) => Trial::new(number as u64, TrialState::Fail, p.params.clone()),
            };
            t.system_attrs = p.stored_system_attrs();
            if let Some(r) = reason {
                t.system_attrs.insert(
                    tradetune_storage::FAIL_REASON_KEY.into(),
                    JsonValue::from(*r),
                );
            }
            history.push(t);
        }
        assert!(history[1].cut_short().is_some() && history[2].cut_short().is_some());
        assert!(history[3].cut_short().is_none() && history[0].cut_short().is_none());
        // The grid's 4 points: two taken (COMPLETE, and FAIL on its own), two free again.
        let ctx = context(&space, &history, 4);
        assert!(!g.is_exhausted(&ctx));
        let mut rerun = Vec::new();
        for number in 4..6u64 {
            let ctx = context(&space, &history, number);
            let p = g.sample(&ctx).unwrap();
            rerun.push(p.params.clone());
            let mut t = Trial::complete(number, p.params.clone(), 0.0);
            t.system_attrs = p.stored_system_attrs();
            history.push(t);
        }
        rerun.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let mut cut: Vec<_> = vec![history[1].params.clone(), history[2].params.clone()];
        cut.sort_by(|a, b| a.partial_cmp(b).unwrap());
        assert_eq!(rerun, cut);
        let ctx = context(&space, &history, 6);
        assert_eq!(g.sample(&ctx), Err(SamplerError::GridExhausted(4)));
    }

    #[test]
    fn bad_grids_are_refused() {
        let mut space = SearchSpace::new();
        space.add_float("x", 0.0, 1.0, false, None).unwrap();
        let g =
            |v: Vec<ParamValue>| GridSampler::new(BTreeMap::from([("x".to_owned(), v)]), &space, 0);
        assert!(
            g(vec![ParamValue::Float(2.0)])
                .unwrap_err()
                .to_string()
                .contains("not in its range")
        );
        assert!(g(vec![]).is_err());
        assert!(g(vec![ParamValue::str("a")]).is_err());
        assert!(
            GridSampler::new(BTreeMap::new(), &space, 0)
                .unwrap_err()
                .to_string()
                .contains("'x' has no grid values")
        );
        assert_eq!(
            g(vec![ParamValue::Float(0.0), ParamValue::Int(1)])
                .unwrap()
                .len(),
            2
        );
    }

    #[test]
    fn past_the_shortcut_a_free_point_is_drawn_at_random() {
        let mut space = SearchSpace::new();
        space.add_int("n", 1, 6, false, 1).unwrap();
        let grid = BTreeMap::from([("n".to_owned(), (1..=6).map(ParamValue::Int).collect())]);
        let g = GridSampler::new(grid, &space, 5).unwrap();
        // Points 0..3 done; trials numbered past the grid (as after an enqueued baseline or in
        // a long-lived study) cannot take "their" point.
        let mut history: Vec<Trial> = Vec::new();
        for number in 0..3u64 {
            let ctx = context(&space, &history, number);
            let p = g.sample(&ctx).unwrap();
            let mut t = Trial::complete(number, p.params.clone(), 0.0);
            t.system_attrs = p.stored_system_attrs();
            history.push(t);
        }
        let mut counts = BTreeMap::new();
        for number in 100..400u64 {
            let ctx = context(&space, &history, number);
            let p = g.sample(&ctx).unwrap();
            let id = p.system_attrs["grid_id"].as_u64().unwrap();
            assert!(id >= 3, "a done point proposed again: {id}");
            assert_eq!(p, g.sample(&ctx).unwrap(), "reproducible per trial number");
            *counts.entry(id).or_insert(0) += 1;
        }
        assert_eq!(counts.len(), 3, "every free point drawn: {counts:?}");
        assert!(
            counts.values().all(|&c| c > 60),
            "about a third each: {counts:?}"
        );
    }

    #[test]
    fn ids_are_the_shuffled_points_and_taken_points_are_read_from_values() {
        let (space, grid) = n_and_c(3, &[1, 2, 3]);
        // Ids are the points of the product (c before n, by name) as Optuna 5.0's
        // `GridSampler({"n": [1, 2, 3], "c": ["a", "b"]}, seed=5)._all_grids` orders them:
        // [("b", 3), ("a", 3), ("b", 2), ("a", 2), ("a", 1), ("b", 1)].
        let g = GridSampler::new(grid.clone(), &space, 5).unwrap();
        let ids: Vec<Vec<usize>> = (0..6).map(|id| g.digits(id)).collect();
        let optunas = [[1, 2], [0, 2], [1, 1], [0, 1], [0, 0], [1, 0]];
        assert_eq!(ids, optunas.map(Vec::from));

        // Half the grid run with seed 1, then the study resumed with seed 2: the ids of the
        // first half name other points under seed 2, but every point still runs once.
        let first = GridSampler::new(grid.clone(), &space, 1).unwrap();
        let second = GridSampler::new(grid, &space, 2).unwrap();
        let mut history: Vec<Trial> = Vec::new();
        let mut seen = BTreeSet::new();
        for number in 0..6u64 {
            let ctx = context(&space, &history, number);
            let g = if number < 3 { &first } else { &second };
            let p = g.sample(&ctx).unwrap();
            assert!(
                seen.insert((p.params["n"] as i64, p.params["c"] as i64)),
                "trial {number} repeats a point: {:?}",
                p.params
            );
            let mut t = Trial::complete(number, p.params.clone(), 0.0);
            t.system_attrs = p.stored_system_attrs();
            history.push(t);
        }
        let ctx = context(&space, &history, 6);
        assert!(second.is_exhausted(&ctx));
    }
}
