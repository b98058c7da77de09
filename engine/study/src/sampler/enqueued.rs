//! Fixed trials tried first (Optuna's `study.enqueue_trial`): e.g. the user's current
//! "baseline" hyperparameters, so the study starts from a known point. An entry may fix only
//! some parameters; the wrapped sampler proposes the rest.
//!
//! As in Optuna, a trial built from an entry carries the entry as its `fixed_params` system
//! attribute. An entry is used once some trial of the history (any state, so a failing
//! baseline is not retried forever) has the same parameters as Optuna's
//! `enqueue_trial(skip_if_exists=True)` compares them: the trial's `fixed_params` when it has
//! them, else its parameters, with the same names and the same values. So a partial entry
//! (`{act = "tanh"}`) counts as used only by a trial that was built from that entry, never by
//! one that happened to draw tanh; a complete entry also by a trial that drew all its values.
//!
//! In front of the grid sampler every entry must fix every parameter: Optuna's `GridSampler`
//! refuses a partial `enqueue_trial` ("All parameters must be specified when using
//! GridSampler with enqueue_trial"), and a grid point completed by an entry's values would be
//! counted as visited without having run.

use std::collections::BTreeMap;

use super::{Proposal, SampleContext, Sampler, SamplerError};
use crate::space::{InternalParams, ParamValue, SearchSpace};
use crate::trial::Trial;
use tradetune_storage::FIXED_PARAMS_KEY;

pub struct EnqueuedSampler {
    /// Each entry in external form (for `fixed_params`) and internal form.
    entries: Vec<(serde_json::Value, InternalParams)>,
    inner: Box<dyn Sampler>,
}

impl EnqueuedSampler {
    /// Checks every entry against `space` now, so a typo fails before the study starts.
    pub fn new(
        entries: Vec<BTreeMap<String, ParamValue>>,
        space: &SearchSpace,
        inner: Box<dyn Sampler>,
    ) -> Result<Self, SamplerError> {
        let entries = entries
            .into_iter()
            .enumerate()
            .map(|(index, e)| {
                let internal = space
                    .to_internal(&e)
                    .map_err(|err| SamplerError::Enqueued {
                        index,
                        message: err.to_string(),
                    })?;
                if inner.needs_complete_entries() && internal.len() < space.len() {
                    let missing: Vec<&str> = space
                        .names()
                        .filter(|n| !internal.contains_key(*n))
                        .collect();
                    return Err(SamplerError::Enqueued {
                        index,
                        message: format!(
                            "the {} sampler needs every parameter fixed (as Optuna's \
                             GridSampler with enqueue_trial); this entry does not fix {}",
                            inner.name(),
                            missing.join(", ")
                        ),
                    });
                }
                let json = serde_json::Value::Object(
                    e.iter().map(|(k, v)| (k.clone(), v.to_json())).collect(),
                );
                Ok((json, internal))
            })
            .collect::<Result<_, SamplerError>>()?;
        Ok(Self { entries, inner })
    }

    /// Index of the first entry no trial of the history has used (trials cut short by a stop
    /// or a crash did not use their entry: [`crate::trial::free_again`]).
    fn next_entry(&self, ctx: &SampleContext<'_>) -> Option<usize> {
        self.entries.iter().position(|(json, internal)| {
            let tried: Vec<&Trial> = (ctx.history.iter())
                .filter(|t| t.number != ctx.trial_number && repeats(t, json, internal))
                .collect();
            // Unused: no trial of it runs, and those that ended were cut short.
            tried.iter().all(|t| t.state.is_finished())
                && crate::trial::free_again(tried.iter().copied())
        })
    }
}

/// Whether trial `t` repeats the entry (`json` external, `internal`), as Optuna's
/// `Study._should_skip_enqueue` decides: the trial's `fixed_params` when it has them, else its
/// parameters, must have exactly the entry's names and values.
fn repeats(t: &Trial, json: &serde_json::Value, internal: &InternalParams) -> bool {
    match t.system_attrs.get(FIXED_PARAMS_KEY) {
        Some(fixed) => serde_json::Value::from(fixed) == *json,
        None => {
            t.params.len() == internal.len()
                && internal.iter().all(|(k, v)| t.params.get(k) == Some(v))
        }
    }
}

impl Sampler for EnqueuedSampler {
    fn name(&self) -> String {
        format!("enqueued+{}", self.inner.name())
    }

    fn needs_complete_entries(&self) -> bool {
        self.inner.needs_complete_entries()
    }

    fn sample_beside_entries(&self, ctx: &SampleContext<'_>) -> Result<Proposal, SamplerError> {
        self.inner.sample_beside_entries(ctx)
    }

    fn can_run_out(&self) -> bool {
        self.inner.can_run_out()
    }

    /// Once every entry is used, as the sampler behind them: an entry not yet tried runs
    /// whatever that sampler has left.
    fn ran_out(&self, ctx: &SampleContext<'_>) -> bool {
        self.next_entry(ctx).is_none() && self.inner.ran_out(ctx)
    }

    fn sample(&self, ctx: &SampleContext<'_>) -> Result<Proposal, SamplerError> {
        let Some(i) = self.next_entry(ctx) else {
            return self.inner.sample(ctx);
        };
        let (json, fixed) = &self.entries[i];
        let mut proposal = if fixed.len() < ctx.space.len() {
            self.inner.sample(ctx)?
        } else {
            Proposal::default()
        };
        proposal
            .params
            .extend(fixed.iter().map(|(k, v)| (k.clone(), *v)));
        proposal
            .system_attrs
            .insert(FIXED_PARAMS_KEY.into(), json.clone());
        Ok(proposal)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sampler::RandomSampler;
    use crate::trial::{Direction, TrialState};
    use std::collections::BTreeSet;

    #[test]
    fn entries_first_then_the_inner_sampler() {
        let mut space = SearchSpace::new();
        space.add_float("lr", 1e-5, 1e-2, true, None).unwrap();
        space.add_int("n", 1, 10, false, 1).unwrap();
        let entries = vec![
            BTreeMap::from([
                ("lr".to_owned(), ParamValue::Float(3e-4)),
                ("n".to_owned(), ParamValue::Int(4)),
            ]),
            BTreeMap::from([("n".to_owned(), ParamValue::Int(9))]),
        ];
        let s = EnqueuedSampler::new(entries, &space, Box::new(RandomSampler::new(1))).unwrap();
        let mut history = Vec::new();
        let mut got = Vec::new();
        for number in 0..3 {
            let ctx = SampleContext::new(&space, &history, Direction::Minimize, number);
            let p = s.sample(&ctx).unwrap();
            got.push(p.clone());
            let mut t = Trial::new(
                number,
                if number == 0 {
                    TrialState::Fail
                } else {
                    TrialState::Complete
                },
                p.params.clone(),
            );
            t.system_attrs = p.stored_system_attrs();
            history.push(t);
        }
        assert_eq!(
            got[0].params,
            InternalParams::from([("lr".to_owned(), 3e-4), ("n".to_owned(), 4.0)])
        );
        assert_eq!(
            got[0].system_attrs["fixed_params"],
            serde_json::json!({"lr": 3e-4, "n": 4})
        );
        assert_eq!(got[1].params["n"], 9.0);
        assert!(
            space.get("lr").unwrap().contains(got[1].params["lr"]),
            "the rest comes from the inner sampler"
        );
        assert!(
            !got[2].system_attrs.contains_key("fixed_params"),
            "queue used up (the failed baseline is not retried)"
        );
        // A baseline whose trial a stop (Ctrl-C) cut short did not run: it is run again.
        history[0].system_attrs.insert(
            tradetune_storage::FAIL_REASON_KEY.into(),
            tradetune_storage::JsonValue::from("interrupted"),
        );
        let ctx = SampleContext::new(&space, &history, Direction::Minimize, 3);
        let again = s.sample(&ctx).unwrap();
        assert_eq!(again.params, got[0].params);
        assert_eq!(
            again.system_attrs["fixed_params"],
            serde_json::json!({"lr": 3e-4, "n": 4})
        );
    }

    #[test]
    fn entries_are_checked_against_the_space() {
        let mut space = SearchSpace::new();
        space.add_int("n", 1, 10, false, 1).unwrap();
        let bad = vec![BTreeMap::from([("n".to_owned(), ParamValue::Int(11))])];
        let e = EnqueuedSampler::new(bad, &space, Box::new(RandomSampler::new(1)))
            .err()
            .unwrap();
        assert!(
            e.to_string()
                .starts_with("enqueued trial 0: search parameter 'n'"),
            "{e}"
        );
        let unknown = vec![BTreeMap::from([("m".to_owned(), ParamValue::Int(1))])];
        assert!(EnqueuedSampler::new(unknown, &space, Box::new(RandomSampler::new(1))).is_err());
    }

    fn ctx<'a>(space: &'a SearchSpace, history: &'a [Trial], number: u64) -> SampleContext<'a> {
        SampleContext::new(space, history, Direction::Minimize, number)
    }

    fn two_by_two() -> SearchSpace {
        let mut space = SearchSpace::new();
        space.add_int("a", 1, 2, false, 1).unwrap();
        space.add_int("b", 1, 2, false, 1).unwrap();
        space
    }

    fn grid_of(space: &SearchSpace) -> crate::sampler::GridSampler {
        let values = vec![ParamValue::Int(1), ParamValue::Int(2)];
        let grid = BTreeMap::from([("a".to_owned(), values.clone()), ("b".to_owned(), values)]);
        crate::sampler::GridSampler::new(grid, space, 0).unwrap()
    }

    #[test]
    fn a_partial_entry_in_front_of_the_grid_is_refused_naming_it() {
        let space = two_by_two();
        let entries = vec![
            BTreeMap::from([
                ("a".to_owned(), ParamValue::Int(2)),
                ("b".to_owned(), ParamValue::Int(2)),
            ]),
            BTreeMap::from([("a".to_owned(), ParamValue::Int(1))]),
        ];
        let e = EnqueuedSampler::new(entries, &space, Box::new(grid_of(&space)))
            .err()
            .unwrap();
        let msg = e.to_string();
        assert!(msg.starts_with("enqueued trial 1: "), "{msg}");
        assert!(msg.contains("does not fix b"), "{msg}");
        // The same partial entry is fine in front of a sampler that fills in the rest.
        let partial = vec![BTreeMap::from([("a".to_owned(), ParamValue::Int(1))])];
        assert!(EnqueuedSampler::new(partial, &space, Box::new(RandomSampler::new(1))).is_ok());
    }

    #[test]
    fn a_complete_entry_in_front_of_the_grid_leaves_every_grid_point_to_run() {
        let space = two_by_two();
        let entries = vec![BTreeMap::from([
            ("a".to_owned(), ParamValue::Int(1)),
            ("b".to_owned(), ParamValue::Int(1)),
        ])];
        let s = EnqueuedSampler::new(entries, &space, Box::new(grid_of(&space))).unwrap();
        let mut history: Vec<Trial> = Vec::new();
        let mut from_grid = BTreeSet::new();
        for number in 0..5 {
            let p = s.sample(&ctx(&space, &history, number)).unwrap();
            // As in Optuna, the entry's trial holds no grid point.
            assert_eq!(
                p.system_attrs.contains_key("fixed_params"),
                !p.system_attrs.contains_key("grid_id"),
                "trial {number}: {:?}",
                p.system_attrs
            );
            if p.system_attrs.contains_key("grid_id") {
                from_grid.insert((p.params["a"] as i64, p.params["b"] as i64));
            }
            let mut t = Trial::complete(number, p.params.clone(), 0.0);
            t.system_attrs = p.stored_system_attrs();
            history.push(t);
        }
        assert_eq!(from_grid.len(), 4, "every grid point ran: {from_grid:?}");
    }

    #[test]
    fn a_partial_entry_is_not_used_up_by_a_trial_that_drew_its_values() {
        use crate::space::CategoricalChoice;
        let mut space = SearchSpace::new();
        space
            .add_categorical(
                "act",
                vec![
                    CategoricalChoice::Str("relu".into()),
                    CategoricalChoice::Str("tanh".into()),
                ],
            )
            .unwrap();
        space.add_float("lr", 1e-5, 1e-2, true, None).unwrap();
        // A resumed study: trial 0 drew tanh (no system attributes, as a random or TPE trial
        // has none), trial 1 ran the entry {act = relu, lr = 1e-3}.
        let mut t1 = Trial::complete(
            1,
            InternalParams::from([("act".to_owned(), 0.0), ("lr".to_owned(), 1e-3)]),
            2.0,
        );
        t1.system_attrs.insert(
            "fixed_params".into(),
            tradetune_storage::JsonValue::from(serde_json::json!({"act": "relu", "lr": 1e-3})),
        );
        let history = vec![
            Trial::complete(
                0,
                InternalParams::from([("act".to_owned(), 1.0), ("lr".to_owned(), 1e-4)]),
                1.0,
            ),
            t1,
        ];
        let entries = vec![
            BTreeMap::from([
                ("act".to_owned(), ParamValue::str("relu")),
                ("lr".to_owned(), ParamValue::Float(1e-3)),
            ]),
            BTreeMap::from([("act".to_owned(), ParamValue::str("tanh"))]),
            BTreeMap::from([("act".to_owned(), ParamValue::str("relu"))]),
        ];
        let s = EnqueuedSampler::new(entries, &space, Box::new(RandomSampler::new(1))).unwrap();
        let p = s.sample(&ctx(&space, &history, 2)).unwrap();
        assert_eq!(
            p.system_attrs.get("fixed_params"),
            Some(&serde_json::json!({"act": "tanh"})),
            "the partial entry runs although trial 0 drew tanh"
        );
        assert_eq!(p.params["act"], 1.0);
        let mut t2 = Trial::complete(2, p.params.clone(), 3.0);
        t2.system_attrs = p.stored_system_attrs();
        let mut history = history;
        history.push(t2);
        let p = s.sample(&ctx(&space, &history, 3)).unwrap();
        assert_eq!(
            p.system_attrs.get("fixed_params"),
            Some(&serde_json::json!({"act": "relu"})),
            "nor is {{act = relu}} used up by the complete entry that also fixed relu"
        );
        // A complete entry does count as used by a trial that drew all its values.
        let complete = vec![BTreeMap::from([
            ("act".to_owned(), ParamValue::str("tanh")),
            ("lr".to_owned(), ParamValue::Float(1e-4)),
        ])];
        let s = EnqueuedSampler::new(complete, &space, Box::new(RandomSampler::new(1))).unwrap();
        let p = s.sample(&ctx(&space, &history, 4)).unwrap();
        assert!(!p.system_attrs.contains_key("fixed_params"), "{p:?}");
    }
}
