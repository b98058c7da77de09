//! The configuration being edited: environment, PPO, the run's budget and where it runs. It is
//! what a preset fills in, what the Configure panel edits, what Start hands to the engine and
//! what the app remembers between launches.

use serde::{Deserialize, Serialize};
use tradetune_engine::device::memory::{
    DEFAULT_MEMORY_FRACTION, MemoryBudget, MemoryEstimate, fmt_bytes,
};
use tradetune_engine::env::{EnvConfig, EnvError};
use tradetune_engine::ppo::{PpoConfig, PpoError};

/// Everything Start needs besides the data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Draft {
    /// The trading environment.
    pub env: EnvConfig,
    /// The learner.
    pub ppo: PpoConfig,
    /// Samples to train each trial on.
    pub total_timesteps: usize,
    /// Fraction of the device's memory the run may use.
    pub memory_fraction: f64,
    /// Device to train on (`cpu`, `wgpu:0`, …).
    pub device: String,
    /// Name of the study the runs are stored under.
    pub study_name: String,
    /// Trials to run.
    pub n_trials: usize,
    /// Trials at once.
    pub workers: usize,
}

impl Default for Draft {
    fn default() -> Self {
        // Small enough that a first run on a laptop CPU finishes in about a minute.
        let mut ppo = PpoConfig::new();
        ppo.n_steps = 256;
        ppo.batch_size = 256;
        ppo.n_epochs = 4;
        let mut env = EnvConfig::new();
        env.n_envs = 8;
        Draft {
            env,
            ppo,
            total_timesteps: 50_000,
            memory_fraction: DEFAULT_MEMORY_FRACTION,
            device: "cpu".into(),
            study_name: "tradetune".into(),
            n_trials: 1,
            workers: 1,
        }
    }
}

/// One thing wrong with a field, shown where the field is typed.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    /// The field's dotted name (`ppo.batch_size`).
    pub field: String,
    /// What is wrong, for people.
    pub message: String,
}

/// The shape of the data a run would see, which the estimate and some checks need.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DataShape {
    /// Assets (the action size).
    pub n_assets: usize,
    /// Features per asset per bar.
    pub n_features: usize,
    /// Bars of the train split.
    pub train_bars: usize,
}

/// The estimated need of a draft against its device's budget.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MemoryCheck {
    /// What the run needs, by part.
    pub estimate: MemoryEstimate,
    /// What it may use (None when the device's memory is unknown).
    pub budget: Option<MemoryBudget>,
}

impl MemoryCheck {
    /// Need as a fraction of the budget (None when there is no budget).
    pub fn fraction(&self) -> Option<f64> {
        self.budget
            .map(|b| self.estimate.total() as f64 / b.bytes.max(1) as f64)
    }

    /// Whether the run would be refused before it starts.
    pub fn over_budget(&self) -> bool {
        self.budget
            .is_some_and(|b| b.check(&self.estimate).is_err())
    }

    /// "1.2 GiB of 12.8 GiB".
    pub fn label(&self) -> String {
        match self.budget {
            Some(b) => format!(
                "{} of {} budget",
                fmt_bytes(self.estimate.total()),
                fmt_bytes(b.bytes)
            ),
            None => format!(
                "{} (device memory unknown)",
                fmt_bytes(self.estimate.total())
            ),
        }
    }
}

impl Draft {
    /// Every problem of the draft, field by field; empty when Start may run it.
    pub fn problems(&self, shape: Option<DataShape>) -> Vec<Problem> {
        let mut out = Vec::new();
        let mut bad = |field: &str, message: String| {
            out.push(Problem {
                field: field.to_owned(),
                message,
            })
        };
        let n_envs = self.env.n_envs;
        if n_envs == 0 {
            bad("env.n_envs", "at least 1 environment".into());
        }
        // The engine's own checks, so the app flags exactly what a run would refuse; their
        // errors name the field.
        match self.ppo.validate(n_envs.max(1)) {
            Err(e @ PpoError::Config { field, .. }) => bad(&format!("ppo.{field}"), e.to_string()),
            Err(e) => bad("ppo", e.to_string()),
            Ok(()) => {}
        }
        if let Some(shape) = shape {
            match self.env.validate(shape.n_assets) {
                Err(e @ EnvError::Config { field, .. }) => {
                    bad(&format!("env.{field}"), e.to_string())
                }
                Err(e) => bad("env", e.to_string()),
                Ok(()) => {}
            }
        }
        if !(self.memory_fraction > 0.0 && self.memory_fraction <= 1.0) {
            bad(
                "memory_fraction",
                format!("{} is not in (0, 1]", self.memory_fraction),
            );
        }
        if self.total_timesteps < self.ppo.n_steps * n_envs.max(1) {
            bad(
                "total_timesteps",
                format!(
                    "{} is less than one rollout (n_steps × n_envs = {})",
                    self.total_timesteps,
                    self.ppo.n_steps * n_envs.max(1)
                ),
            );
        }
        if self.n_trials == 0 {
            bad("n_trials", "at least 1 trial".into());
        }
        if self.workers == 0 {
            bad("workers", "at least 1 worker".into());
        }
        out
    }

    /// The estimate of what one run needs on its device and that device's share for it.
    /// `device_bytes` is the device's memory (host RAM for the CPU) when known.
    pub fn memory(&self, shape: DataShape, device_bytes: Option<u64>) -> MemoryCheck {
        let obs_dim = self.env.obs_dim(shape.n_assets, shape.n_features);
        let estimate = MemoryEstimate::of(&self.ppo, self.env.n_envs, obs_dim, shape.n_assets, 0);
        let budget = device_bytes.and_then(|bytes| {
            MemoryBudget::new(bytes, self.memory_fraction, self.workers.max(1)).ok()
        });
        MemoryCheck { estimate, budget }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape() -> DataShape {
        DataShape {
            n_assets: 4,
            n_features: 8,
            train_bars: 1469,
        }
    }

    #[test]
    fn the_default_draft_is_runnable() {
        assert_eq!(Draft::default().problems(Some(shape())), vec![]);
    }

    #[test]
    fn a_batch_larger_than_a_rollout_is_flagged_on_batch_size() {
        let mut d = Draft::default();
        d.ppo.batch_size = d.ppo.n_steps * d.env.n_envs + 1;
        let problems = d.problems(Some(shape()));
        assert!(
            problems.iter().any(|p| p.field == "ppo.batch_size"),
            "{problems:?}"
        );
    }

    #[test]
    fn the_estimate_grows_with_the_network_and_is_refused_over_budget() {
        let d = Draft::default();
        let small = d.memory(shape(), Some(1 << 34));
        let mut big = d.clone();
        big.ppo.policy.net_arch.pi = vec![4096, 4096, 4096];
        big.ppo.policy.net_arch.vf = vec![4096, 4096, 4096];
        let large = big.memory(shape(), Some(1 << 34));
        assert!(large.estimate.total() > 10 * small.estimate.total());
        assert!(!small.over_budget());
        let tiny_device = big.memory(shape(), Some(64 << 20));
        assert!(tiny_device.over_budget());
        assert!(tiny_device.fraction().is_some_and(|f| f > 1.0));
    }
}
