//! [`PpoConfig`]: the PPO hyperparameters, with Stable-Baselines3's names and defaults
//! (SB3 2.x `PPO.__init__`, `stable_baselines3/ppo/ppo.py`), so a user's Optuna search space and
//! SB3 habits carry over unchanged.

use burn::config::Config;
use serde::{Deserialize, Serialize};

use crate::ppo::error::PpoError;
use crate::ppo::model::ActorCriticConfig;
use tradetune_device::precision::Precision;

/// How the learning rate changes over the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum LrSchedule {
    /// `learning_rate` throughout.
    #[default]
    Constant,
    /// From `learning_rate` at the start down to 0 at `total_timesteps`, as SB3's
    /// `get_linear_fn(lr, 0, 1)` on `progress_remaining`.
    Linear,
}

/// PPO hyperparameters. Defaults are SB3's (`PPO` with `MlpPolicy`), except where noted.
#[derive(Config, Debug, PartialEq)]
pub struct PpoConfig {
    /// Adam learning rate (at the start of the run for a linear schedule).
    #[config(default = 3e-4)]
    pub learning_rate: f64,
    /// How the learning rate changes with progress.
    #[config(default = "LrSchedule::Constant")]
    pub lr_schedule: LrSchedule,
    /// Steps per environment per rollout; one rollout is `n_steps × n_envs` samples.
    #[config(default = 2048)]
    pub n_steps: usize,
    /// Minibatch size of the update.
    #[config(default = 64)]
    pub batch_size: usize,
    /// Passes over the rollout per update.
    #[config(default = 10)]
    pub n_epochs: usize,
    /// Discount factor γ.
    #[config(default = 0.99)]
    pub gamma: f32,
    /// GAE λ (Schulman et al. 2016, arXiv:1506.02438).
    #[config(default = 0.95)]
    pub gae_lambda: f32,
    /// Clipping ε of the surrogate objective (Schulman et al. 2017, arXiv:1707.06347, eq. 7).
    #[config(default = 0.2)]
    pub clip_range: f32,
    /// Clipping of the value prediction around the rollout's value (None = no clipping, SB3's
    /// default).
    pub clip_range_vf: Option<f32>,
    /// Normalise advantages per minibatch (zero mean, unit std).
    #[config(default = true)]
    pub normalize_advantage: bool,
    /// Entropy bonus coefficient.
    #[config(default = 0.0)]
    pub ent_coef: f32,
    /// Value loss coefficient.
    #[config(default = 0.5)]
    pub vf_coef: f32,
    /// Global L2 norm the gradient is clipped to (SB3 `max_grad_norm`; ≤ 0 = no clipping).
    #[config(default = 0.5)]
    pub max_grad_norm: f32,
    /// Stop an update's epochs early when the approximate KL exceeds `1.5 × target_kl`
    /// (SB3's rule). None = never.
    pub target_kl: Option<f32>,
    /// Adam ε. SB3 sets 1e-5 for PPO's Adam ("small values to avoid NaN", `policies.py`).
    #[config(default = 1e-5)]
    pub adam_eps: f32,
    /// Seed of parameter initialisation, action sampling and minibatch shuffling.
    #[config(default = 0)]
    pub seed: u64,
    /// Running normalisation of observations (SB3 `VecNormalize(norm_obs=True)`).
    #[config(default = false)]
    pub normalize_obs: bool,
    /// Running normalisation of rewards by the std of the discounted return
    /// (SB3 `VecNormalize(norm_reward=True)`).
    #[config(default = false)]
    pub normalize_reward: bool,
    /// Normalised observations are clipped to ±`clip_obs` (SB3 default 10).
    #[config(default = 10.0)]
    pub clip_obs: f32,
    /// Normalised rewards are clipped to ±`clip_reward` (SB3 default 10).
    #[config(default = 10.0)]
    pub clip_reward: f32,
    /// Compute precision of the forward and backward passes (parameters stay f32).
    #[config(default = "Precision::F32")]
    pub precision: Precision,
    /// Initial loss scale for f16 (PyTorch `GradScaler` default 2^16).
    #[config(default = 65536.0)]
    pub initial_loss_scale: f32,
    /// Clean f16 steps after which the loss scale doubles (PyTorch `GradScaler` default 2000).
    #[config(default = 2000)]
    pub loss_scale_growth_interval: usize,
    /// The actor-critic network.
    #[config(default = "ActorCriticConfig::new()")]
    pub policy: ActorCriticConfig,
}

impl PpoConfig {
    /// Checks every field; `n_envs` is the number of environments the rollout will use.
    pub fn validate(&self, n_envs: usize) -> Result<(), PpoError> {
        let pos = |v: f64| v.is_finite() && v > 0.0;
        let unit = |v: f32| v.is_finite() && (0.0..=1.0).contains(&v);
        if !pos(self.learning_rate) {
            return Err(PpoError::config(
                "learning_rate",
                self.learning_rate,
                "must be a positive number",
            ));
        }
        if self.n_steps == 0 {
            return Err(PpoError::config("n_steps", 0, "need at least one step"));
        }
        let Some(rollout) = self.n_steps.checked_mul(n_envs) else {
            return Err(PpoError::config(
                "n_steps",
                self.n_steps,
                format!("n_steps × n_envs ({n_envs}) overflows: the rollout cannot be held"),
            ));
        };
        if self.batch_size == 0 || self.batch_size > rollout {
            return Err(PpoError::config(
                "batch_size",
                self.batch_size,
                format!("must be in 1..=n_steps × n_envs = {rollout}"),
            ));
        }
        if self.n_epochs == 0 {
            return Err(PpoError::config("n_epochs", 0, "need at least one epoch"));
        }
        if !unit(self.gamma) {
            return Err(PpoError::config("gamma", self.gamma, "must be in [0, 1]"));
        }
        if !unit(self.gae_lambda) {
            return Err(PpoError::config(
                "gae_lambda",
                self.gae_lambda,
                "must be in [0, 1]",
            ));
        }
        if !(self.clip_range.is_finite() && self.clip_range > 0.0) {
            return Err(PpoError::config(
                "clip_range",
                self.clip_range,
                "must be positive",
            ));
        }
        if let Some(c) = self.clip_range_vf
            && !(c.is_finite() && c > 0.0)
        {
            return Err(PpoError::config(
                "clip_range_vf",
                c,
                "must be positive (or absent for no clipping)",
            ));
        }
        for (field, v) in [
            ("ent_coef", self.ent_coef),
            ("vf_coef", self.vf_coef),
            ("max_grad_norm", self.max_grad_norm),
        ] {
            if !v.is_finite() {
                return Err(PpoError::config(field, v, "must be finite"));
            }
        }
        if let Some(k) = self.target_kl
            && !(k.is_finite() && k > 0.0)
        {
            return Err(PpoError::config(
                "target_kl",
                k,
                "must be positive (or absent for no early stop)",
            ));
        }
        if !(self.adam_eps.is_finite() && self.adam_eps > 0.0) {
            return Err(PpoError::config(
                "adam_eps",
                self.adam_eps,
                "must be positive",
            ));
        }
        for (field, v) in [
            ("clip_obs", self.clip_obs),
            ("clip_reward", self.clip_reward),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return Err(PpoError::config(field, v, "must be positive"));
            }
        }
        if !(self.initial_loss_scale.is_finite() && self.initial_loss_scale >= 1.0) {
            return Err(PpoError::config(
                "initial_loss_scale",
                self.initial_loss_scale,
                "must be ≥ 1",
            ));
        }
        if self.loss_scale_growth_interval == 0 {
            return Err(PpoError::config(
                "loss_scale_growth_interval",
                0,
                "must be ≥ 1",
            ));
        }
        self.policy.validate()
    }

    /// The learning rate when `progress` ∈ [0, 1] of the timestep budget is done.
    pub fn learning_rate_at(&self, progress: f64) -> f64 {
        match self.lr_schedule {
            LrSchedule::Constant => self.learning_rate,
            LrSchedule::Linear => self.learning_rate * (1.0 - progress.clamp(0.0, 1.0)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_sb3s() {
        let c = PpoConfig::new();
        assert_eq!(c.learning_rate, 3e-4);
        assert_eq!((c.n_steps, c.batch_size, c.n_epochs), (2048, 64, 10));
        assert_eq!((c.gamma, c.gae_lambda, c.clip_range), (0.99, 0.95, 0.2));
        assert_eq!((c.ent_coef, c.vf_coef, c.max_grad_norm), (0.0, 0.5, 0.5));
        assert!(c.normalize_advantage && c.clip_range_vf.is_none() && c.target_kl.is_none());
        assert_eq!(c.policy.net_arch.pi, vec![64, 64]);
        c.validate(1).unwrap();
    }

    #[test]
    fn bad_fields_are_named() {
        let err = PpoConfig::new()
            .with_n_steps(10)
            .with_batch_size(100)
            .validate(1)
            .unwrap_err();
        assert!(err.to_string().contains("batch_size"), "{err}");
        let err = PpoConfig::new().with_gamma(1.5).validate(4).unwrap_err();
        assert!(err.to_string().contains("gamma"), "{err}");
    }

    /// A rollout of `n_steps × n_envs` samples past `usize` is refused naming n_steps (the
    /// product overflowed: a debug panic, in release a wrapped size).
    #[test]
    fn an_overflowing_rollout_is_refused_naming_n_steps() {
        let err = PpoConfig::new()
            .with_n_steps(usize::MAX / 2)
            .validate(4)
            .unwrap_err();
        assert!(err.to_string().starts_with("ppo.n_steps = "), "{err}");
        assert!(err.to_string().contains("overflows"), "{err}");
        // 2⁶² steps: a rollout of 4 envs overflows, one of 3 does not.
        let cfg = PpoConfig::new()
            .with_n_steps(usize::MAX / 4 + 1)
            .with_batch_size(64);
        assert!(cfg.validate(4).is_err() && cfg.validate(3).is_ok());
    }

    #[test]
    fn linear_schedule_decays_to_zero() {
        let c = PpoConfig::new().with_lr_schedule(LrSchedule::Linear);
        assert_eq!(c.learning_rate_at(0.0), 3e-4);
        assert!((c.learning_rate_at(0.5) - 1.5e-4).abs() < 1e-12);
        assert_eq!(c.learning_rate_at(1.0), 0.0);
    }
}
