//! The trained policy as evaluation sees it: the actor's mean action, clipped to [-1, 1], on
//! observations normalised with the run's frozen statistics, in the run's compute precision.
//! [`crate::eval`] scores any [`Policy`]; this is where PPO meets it (the learner imports
//! evaluation for its periodic evaluations, never the other way round).

use burn::module::Module;
use burn::tensor::{Device, FloatDType, Tensor};

use crate::eval::{EvalError, EvalReport, EvalSplit, Objective, Policy, TimedEval, evaluate_timed};
use crate::ppo::config::PpoConfig;
use crate::ppo::error::PpoError;
use crate::ppo::model::ActorCritic;
use crate::ppo::normalize::{NormalizationStats, RunningMeanStd};

/// A snapshot of a PPO policy for evaluation (no autodiff graph).
pub struct DeterministicPolicy {
    model: ActorCritic,
    norm: Option<RunningMeanStd>,
    clip_obs: f32,
    dtype: FloatDType,
    obs_dim: usize,
}

impl DeterministicPolicy {
    /// `model` with `normalization`'s observation statistics and `cfg`'s `clip_obs` and
    /// precision. Statistics of another length than the model's input are refused.
    pub fn new(
        model: &ActorCritic,
        normalization: &NormalizationStats,
        cfg: &PpoConfig,
    ) -> Result<Self, PpoError> {
        let model = model.valid();
        let obs_dim = model.pi.first().unwrap_or(&model.mean).weight.val().dims()[0];
        let device = model.log_std().device();
        let norm = match &normalization.obs {
            Some(s) if s.mean.len() != obs_dim || s.var.len() != obs_dim => {
                return Err(PpoError::config(
                    "normalization",
                    s.mean.len(),
                    format!(
                        "the observation statistics have this many values but the policy takes {obs_dim}; use the statistics saved with this policy"
                    ),
                ));
            }
            Some(s) => Some(RunningMeanStd::from_stats(s, &device)),
            None => None,
        };
        let dtype = cfg.precision.compute_dtype();
        Ok(Self {
            // The weights in the compute dtype once, not at every step.
            model: model.in_dtype(dtype),
            norm,
            clip_obs: cfg.clip_obs,
            dtype,
            obs_dim,
        })
    }
}

impl Policy for DeterministicPolicy {
    fn obs_dim(&self) -> usize {
        self.obs_dim
    }

    fn device(&self) -> Device {
        self.model.log_std().device()
    }

    fn act(&self, obs: Tensor<2>) -> Tensor<2> {
        let x = match &self.norm {
            Some(n) => n.normalize(obs, self.clip_obs),
            None => obs,
        };
        // The actor only: evaluation needs no value.
        self.model.action_mean(x, self.dtype).clamp(-1.0, 1.0)
    }

    /// The compute dtype where nothing normalises the observations (the actor's first cast
    /// is then theirs); f32 where the normalisation takes them (its kernel casts them, and
    /// normalises at f32's precision, as the rollouts did).
    fn obs_dtype(&self) -> FloatDType {
        match self.norm {
            Some(_) => FloatDType::F32,
            None => self.dtype,
        }
    }
}

/// [`crate::eval::evaluate`] of `model` with `normalization` and `cfg` (see
/// [`DeterministicPolicy`]).
pub fn evaluate_policy(
    model: &ActorCritic,
    normalization: &NormalizationStats,
    cfg: &PpoConfig,
    split: &EvalSplit,
    objective: Objective,
) -> Result<EvalReport, EvalError> {
    evaluate_policy_timed(model, normalization, cfg, split, objective).map(|t| t.report)
}

/// [`evaluate_policy`], with how much longer its start took than its pace ([`TimedEval`]).
pub fn evaluate_policy_timed(
    model: &ActorCritic,
    normalization: &NormalizationStats,
    cfg: &PpoConfig,
    split: &EvalSplit,
    objective: Objective,
) -> Result<TimedEval, EvalError> {
    let policy =
        DeterministicPolicy::new(model, normalization, cfg).map_err(|e| EvalError::Policy {
            split: split.name.clone(),
            reason: e.to_string(),
        })?;
    evaluate_timed(&policy, split, objective)
}
