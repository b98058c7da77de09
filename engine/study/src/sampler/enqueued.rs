//! Fixed trials tried first (Optuna's `study.enqueue_trial`): e.g. the user's current
//! "baseline" hyperparameters, so the study starts from a known point. An entry may fix only
//! some parameters; the wrapped sampler proposes the rest.
//!
//! As in Optuna, a trial built from an entry carries the entry as its `fixed_params` system
//! attribute; an entry is used once some trial of the history carries it (any state, so a
//! failing baseline is not retried forever). A trial whose parameters equal the entry counts as
//! well, so histories stored without system attributes do not replay the queue.

use std::collections::BTreeMap;

use super::{Proposal, SampleContext, Sampler, SamplerError};
use crate::space::{InternalParams, ParamValue, SearchSpace};

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
                let json = serde_json::Value::Object(
                    e.iter().map(|(k, v)| (k.clone(), v.to_json())).collect(),
                );
                Ok((json, internal))
            })
            .collect::<Result<_, SamplerError>>()?;
        Ok(Self { entries, inner })
    }

    /// Index of the first entry no trial of the history has used.
    fn next_entry(&self, ctx: &SampleContext<'_>) -> Option<usize> {
        let others = || ctx.history.iter().filter(|t| t.number != ctx.trial_number);
        self.entries.iter().position(|(json, internal)| {
            !others().any(|t| {
                t.system_attrs.get("fixed_params") == Some(json)
                    || internal.iter().all(|(k, v)| t.params.get(k) == Some(v))
            })
        })
    }
}

impl Sampler for EnqueuedSampler {
    fn name(&self) -> String {
        format!("enqueued+{}", self.inner.name())
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
            .insert("fixed_params".into(), json.clone());
        Ok(proposal)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sampler::RandomSampler;
    use crate::trial::{Direction, Trial, TrialState};

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
            let ctx = SampleContext {
                space: &space,
                history: &history,
                direction: Direction::Minimize,
                trial_number: number,
            };
            let p = s.sample(&ctx).unwrap();
            got.push(p.clone());
            let mut t = Trial::new(
                number,
                if number == 0 {
                    TrialState::Fail
                } else {
                    TrialState::Complete
                },
                p.params,
            );
            t.system_attrs = p.system_attrs;
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
}
