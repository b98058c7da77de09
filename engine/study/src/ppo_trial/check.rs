//! A trial configuration's problems and memory estimate, as engine calls a form shows before
//! anything runs: the same checks and the same estimate a trial makes.

use tradetune_device::memory::MemoryEstimate;
use tradetune_env::{EnvError, ResolvedPlacement};
use tradetune_market::Dataset;
use tradetune_rl::ppo::PpoError;

use super::PpoTrialConfig;
use crate::catalogue::{self, SettingError};

/// The sizes of the data a trial trains on, which some checks and the estimate need.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DataShape {
    /// Bars (timestamps) of the whole dataset.
    pub n_bars: usize,
    /// Assets (the action size).
    pub n_assets: usize,
    /// Features per asset per bar.
    pub n_features: usize,
}

impl DataShape {
    pub fn of(d: &Dataset) -> DataShape {
        DataShape {
            n_bars: d.n_bars(),
            n_assets: d.n_assets(),
            n_features: d.n_features(),
        }
    }

    /// Bytes of the market data an env placed on the device uploads: prices `[T, M]` and
    /// features `[T, M·F]` in f32.
    pub fn device_bytes(&self) -> u64 {
        let (t, m, f) = (
            self.n_bars as u64,
            self.n_assets as u64,
            self.n_features as u64,
        );
        4 * t * m * (1 + f)
    }
}

/// One thing wrong with a setting.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    /// The setting's dotted name (`ppo.batch_size`), or its section's (`ppo`) when the problem
    /// is not one setting's.
    pub field: String,
    /// What is wrong, for people.
    pub message: String,
}

impl PpoTrialConfig {
    /// Every problem of the configuration, setting by setting: values outside the catalogue's
    /// ranges, and the environment's and PPO's own checks (a batch larger than a rollout);
    /// `n_assets` is the data's, when it is loaded (the environment's checks need it). Empty
    /// when a trial would accept it.
    pub fn problems(&self, n_assets: Option<usize>) -> Vec<Problem> {
        let mut out = Vec::new();
        let mut bad = |field: String, message: String| {
            if !out.iter().any(|p: &Problem| p.field == field) {
                out.push(Problem { field, message });
            }
        };
        if let Ok(json) = serde_json::to_value(self) {
            for s in catalogue::trial() {
                let value = s.name.split('.').try_fold(&json, |v, part| v.get(part));
                if let Some(Err(e)) = value.map(|v| s.check(v)) {
                    let name = match &e {
                        SettingError::OutOfRange { name, .. }
                        | SettingError::WrongType { name, .. }
                        | SettingError::NotAChoice { name, .. } => name.clone(),
                    };
                    bad(name, e.to_string());
                }
            }
        }
        let n_envs = self.env.n_envs.max(1);
        match self.ppo.validate(n_envs) {
            Err(e @ PpoError::Config { field, .. }) => bad(format!("ppo.{field}"), e.to_string()),
            Err(e) => bad("ppo".into(), e.to_string()),
            Ok(()) => {}
        }
        if let Some(n_assets) = n_assets {
            match self.env.validate(n_assets) {
                Err(e @ EnvError::Config { field, .. }) => {
                    bad(format!("env.{field}"), e.to_string())
                }
                Err(e) => bad("env".into(), e.to_string()),
                Ok(()) => {}
            }
        }
        let rollout = self.ppo.n_steps * n_envs;
        if self.train.total_timesteps < rollout {
            bad(
                "train.total_timesteps".into(),
                format!(
                    "{} is less than one rollout (n_steps × n_envs = {rollout})",
                    self.train.total_timesteps
                ),
            );
        }
        out
    }

    /// What one trial of this configuration needs on a device that is (`on_cpu`) or is not
    /// the CPU, training on data of `shape`: an env placed on the device holds the market data
    /// there.
    pub fn memory_estimate(&self, shape: DataShape, on_cpu: bool) -> MemoryEstimate {
        let obs_dim = self.env.obs_dim(shape.n_assets, shape.n_features);
        let dataset = match self.env.placement_on(on_cpu) {
            ResolvedPlacement::Host => 0,
            ResolvedPlacement::Device => shape.device_bytes(),
        };
        self.ppo
            .memory_estimate(self.env.n_envs, obs_dim, shape.n_assets, dataset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tradetune_env::EnvPlacement;

    fn shape() -> DataShape {
        DataShape {
            n_bars: 2000,
            n_assets: 4,
            n_features: 8,
        }
    }

    #[test]
    fn each_problem_is_named_by_its_setting() {
        let mut c = PpoTrialConfig::default();
        assert_eq!(c.problems(Some(4)), vec![]);
        c.ppo.gamma = 1.5;
        c.ppo.batch_size = c.ppo.n_steps * c.env.n_envs + 1;
        c.env.buy_fee = 0.9;
        c.train.total_timesteps = 1;
        let fields: Vec<String> = c.problems(Some(4)).into_iter().map(|p| p.field).collect();
        assert_eq!(
            fields,
            [
                "env.buy_fee",
                "ppo.gamma",
                "ppo.batch_size",
                "train.total_timesteps"
            ]
        );
        let p = c.problems(Some(4));
        assert!(p[1].message.contains("[0, 1]"), "{p:?}");
        // Without the data, the environment's own checks wait; the ranges do not.
        c.env.min_order_values = vec![1.0];
        assert!(
            c.problems(Some(4))
                .iter()
                .any(|p| p.field == "env.min_order_values")
        );
        assert!(
            !c.problems(None)
                .iter()
                .any(|p| p.field == "env.min_order_values")
        );
    }

    #[test]
    fn the_estimate_counts_the_data_only_on_the_device() {
        let mut c = PpoTrialConfig::default();
        let host = c.memory_estimate(shape(), true);
        let device = c.memory_estimate(shape(), false);
        assert_eq!(device.total(), host.total() + shape().device_bytes());
        c.env.placement = Some(EnvPlacement::Host);
        assert_eq!(c.memory_estimate(shape(), false).total(), host.total());
    }
}
