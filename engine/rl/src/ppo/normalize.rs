//! Running observation and reward normalisation, as SB3's `VecNormalize`
//! (`stable_baselines3/common/vec_env/vec_normalize.py`) with its `RunningMeanStd`
//! (parallel-variance update of Chan et al. 1979). The statistics are tensors on the rollout
//! device, so a GPU rollout stays on the GPU.

use burn::tensor::{Device, Tensor, TensorData};
use serde::{Deserialize, Serialize};

use crate::ppo::error::PpoError;

/// SB3's ε of `VecNormalize` (added to the variance before the square root).
const EPS: f32 = 1e-8;
/// SB3's initial count of `RunningMeanStd` (`epsilon=1e-4`), which makes the first update
/// almost replace the prior (mean 0, var 1).
const PRIOR_COUNT: f64 = 1e-4;

/// Running mean and variance of a vector quantity.
#[derive(Debug, Clone)]
pub struct RunningMeanStd {
    mean: Tensor<1>,
    var: Tensor<1>,
    count: f64,
}

/// Host copy of normalisation statistics, for checkpoints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunningStats {
    /// Means.
    pub mean: Vec<f32>,
    /// Variances.
    pub var: Vec<f32>,
    /// Samples seen.
    pub count: f64,
}

impl RunningMeanStd {
    /// Mean 0, variance 1, for `dim` values, on `device`.
    pub fn new(dim: usize, device: &Device) -> Self {
        Self {
            mean: Tensor::zeros([dim], device),
            var: Tensor::ones([dim], device),
            count: PRIOR_COUNT,
        }
    }

    /// Folds in a batch `[B, dim]`.
    pub fn update(&mut self, batch: Tensor<2>) {
        let b = batch.dims()[0] as f64;
        let batch_mean = batch.clone().mean_dim(0).squeeze_dim::<1>(0);
        let batch_var = batch
            .sub(batch_mean.clone().unsqueeze_dim::<2>(0))
            .square()
            .mean_dim(0)
            .squeeze_dim::<1>(0);
        let total = self.count + b;
        let delta = batch_mean.sub(self.mean.clone());
        let w_batch = (b / total) as f32;
        self.mean = self.mean.clone().add(delta.clone().mul_scalar(w_batch));
        let m2 = self
            .var
            .clone()
            .mul_scalar(self.count as f32)
            .add(batch_var.mul_scalar(b as f32))
            .add(delta.square().mul_scalar((self.count * b / total) as f32));
        self.var = m2.div_scalar(total as f32);
        self.count = total;
    }

    /// `clip((x − mean)/√(var + ε), ±clip)` for `x` `[B, dim]`.
    pub fn normalize(&self, x: Tensor<2>, clip: f32) -> Tensor<2> {
        let std = self
            .var
            .clone()
            .add_scalar(EPS)
            .sqrt()
            .unsqueeze_dim::<2>(0);
        x.sub(self.mean.clone().unsqueeze_dim::<2>(0))
            .div(std)
            .clamp(-clip, clip)
    }

    /// Host copy.
    pub fn to_stats(&self) -> Result<RunningStats, PpoError> {
        Ok(RunningStats {
            mean: self
                .mean
                .clone()
                .try_into_vec_as()
                .map_err(|e| PpoError::read("normalisation mean", e))?,
            var: self
                .var
                .clone()
                .try_into_vec_as()
                .map_err(|e| PpoError::read("normalisation variance", e))?,
            count: self.count,
        })
    }

    /// From a host copy.
    pub fn from_stats(stats: &RunningStats, device: &Device) -> Self {
        let n = stats.mean.len();
        Self {
            mean: Tensor::from_data(TensorData::new(stats.mean.clone(), [n]), device),
            var: Tensor::from_data(TensorData::new(stats.var.clone(), [n]), device),
            count: stats.count,
        }
    }
}

/// Reward normalisation: rewards are divided by the running std of the discounted return
/// `R ← γ·R + r` (reset at episode ends), then clipped. Scaling by the return's std, not the
/// reward's, keeps value targets near unit scale (Engstrom et al. 2020, arXiv:2005.12729 §3).
#[derive(Debug, Clone)]
pub struct RewardNormalizer {
    returns: Tensor<1>,
    rms: RunningMeanStd,
    gamma: f32,
    clip: f32,
}

impl RewardNormalizer {
    /// For `n_envs` envs.
    pub fn new(n_envs: usize, gamma: f32, clip: f32, device: &Device) -> Self {
        Self {
            returns: Tensor::zeros([n_envs], device),
            rms: RunningMeanStd::new(1, device),
            gamma,
            clip,
        }
    }

    /// Updates the statistics with this step's rewards and returns the normalised rewards.
    pub fn normalize(&mut self, reward: Tensor<1>, done: Tensor<1>) -> Tensor<1> {
        self.returns = self
            .returns
            .clone()
            .mul_scalar(self.gamma)
            .add(reward.clone());
        self.rms.update(self.returns.clone().unsqueeze_dim::<2>(1));
        let std = self.rms.var.clone().add_scalar(EPS).sqrt();
        let out = reward.div(std).clamp(-self.clip, self.clip);
        self.returns = self.returns.clone().mul(done.neg().add_scalar(1.0));
        out
    }

    /// Host copy of the return statistics.
    pub fn to_stats(&self) -> Result<RunningStats, PpoError> {
        self.rms.to_stats()
    }

    /// Restores the return statistics.
    pub fn set_stats(&mut self, stats: &RunningStats, device: &Device) {
        self.rms = RunningMeanStd::from_stats(stats, device);
    }
}

/// Normalisation statistics, for checkpoints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct NormalizationStats {
    /// Observation statistics (when `normalize_obs`).
    pub obs: Option<RunningStats>,
    /// Discounted-return statistics (when `normalize_reward`).
    pub reward: Option<RunningStats>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn running_stats_match_the_batch_stats() {
        let d = Device::flex();
        let mut rms = RunningMeanStd::new(2, &d);
        let a = Tensor::<2>::from_data(TensorData::new(vec![1.0f32, 10.0, 3.0, 20.0], [2, 2]), &d);
        let b = Tensor::<2>::from_data(TensorData::new(vec![5.0f32, 30.0], [1, 2]), &d);
        rms.update(a);
        rms.update(b);
        let s = rms.to_stats().unwrap();
        // Column 0: {1, 3, 5} mean 3, var 8/3; column 1: {10, 20, 30} mean 20, var 200/3.
        assert!((s.mean[0] - 3.0).abs() < 1e-3 && (s.mean[1] - 20.0).abs() < 1e-2);
        assert!((s.var[0] - 8.0 / 3.0).abs() < 1e-2, "{:?}", s.var);
        assert!((s.var[1] - 200.0 / 3.0).abs() < 0.1, "{:?}", s.var);
        let x = Tensor::<2>::from_data(TensorData::new(vec![3.0f32, 1000.0], [1, 2]), &d);
        let n: Vec<f32> = rms.normalize(x, 5.0).try_into_vec_as().unwrap();
        assert!(n[0].abs() < 1e-3 && n[1] == 5.0, "{n:?}");
    }
}
