//! Training throughput end to end (rollout + update), for `tradetune bench train`, the
//! `ppo_throughput` example and the criterion benchmark. Configurations mirror the issue's
//! Stable-Baselines3 baselines so results read as ratios.

use burn::tensor::Device;
use serde::Serialize;

use crate::device::precision::Precision;
use crate::env::bench::bench_dataset;
use crate::env::{CpuVecEnv, EnvConfig};
use crate::ppo::config::PpoConfig;
use crate::ppo::error::PpoError;
use crate::ppo::events::{PhaseTimes, TrainEvent};
use crate::ppo::model::{ActorCriticConfig, NetArch};
use crate::ppo::rollout_env::HostEnv;
use crate::ppo::trainer::Trainer;

/// One benchmark configuration.
#[derive(Debug, Clone, Serialize)]
pub struct TrainBenchConfig {
    /// Short name.
    pub name: &'static str,
    /// Environments.
    pub n_envs: usize,
    /// Steps per env per rollout.
    pub n_steps: usize,
    /// Minibatch size.
    pub batch_size: usize,
    /// Epochs per update.
    pub n_epochs: usize,
    /// Hidden layers of both networks.
    pub net: Vec<usize>,
    /// Assets (action dimension).
    pub n_assets: usize,
    /// Features per asset.
    pub n_features: usize,
    /// Updates measured (after one warm-up update).
    pub updates: usize,
    /// Compute precision.
    pub precision: Precision,
    /// Stable-Baselines3 2.9 (PyTorch, 1 thread) samples/s on this machine class, from the
    /// issue text; None when there is no baseline.
    pub sb3_samples_per_second: Option<f64>,
}

impl TrainBenchConfig {
    /// SB3's default-sized run: nets 64-64, 8 envs, n_steps 256, batch 256, 4 epochs.
    pub fn small() -> Self {
        Self {
            name: "small",
            n_envs: 8,
            n_steps: 256,
            batch_size: 256,
            n_epochs: 4,
            net: vec![64, 64],
            n_assets: 7,
            n_features: 16,
            updates: 3,
            precision: Precision::F32,
            sb3_samples_per_second: Some(2_260.0),
        }
    }

    /// The user's large nets: pi = vf = [2048, 1024, 512], batch 1024.
    pub fn large() -> Self {
        Self {
            name: "large",
            batch_size: 1024,
            net: vec![2048, 1024, 512],
            updates: 1,
            sb3_samples_per_second: Some(220.0),
            ..Self::small()
        }
    }

    fn ppo(&self) -> PpoConfig {
        PpoConfig::new()
            .with_n_steps(self.n_steps)
            .with_batch_size(self.batch_size)
            .with_n_epochs(self.n_epochs)
            .with_precision(self.precision)
            .with_policy(
                ActorCriticConfig::new().with_net_arch(
                    NetArch::new()
                        .with_pi(self.net.clone())
                        .with_vf(self.net.clone()),
                ),
            )
    }
}

/// What one configuration measured.
#[derive(Debug, Clone, Serialize)]
pub struct TrainBenchResult {
    /// The configuration.
    pub config: TrainBenchConfig,
    /// Device measured.
    pub device: String,
    /// Samples measured.
    pub samples: usize,
    /// Seconds, phases summed.
    pub seconds: f64,
    /// Samples per second end to end.
    pub samples_per_second: f64,
    /// `samples_per_second / sb3_samples_per_second`.
    pub ratio_to_sb3: Option<f64>,
    /// Where the time went.
    pub phases: PhaseTimes,
}

/// Trains `cfg.updates` updates (after a warm-up update that is not counted) on a random-walk
/// trading env of `cfg.n_assets` assets, on `device`.
pub fn run(cfg: &TrainBenchConfig, device: &Device) -> Result<TrainBenchResult, PpoError> {
    let data = bench_dataset(20_000, cfg.n_assets, cfg.n_features, 7);
    let env_cfg = EnvConfig::new()
        .with_n_envs(cfg.n_envs)
        .with_episode_bars(1_000);
    let env = CpuVecEnv::new(env_cfg, data.clone(), 0..data.n_bars())?;
    let mut trainer = Trainer::new(cfg.ppo(), HostEnv::new(env, device), device)?;
    let per_update = cfg.n_steps * cfg.n_envs;
    trainer.learn(per_update, &mut |_| {})?;
    let mut phases = PhaseTimes::default();
    let report = trainer.learn(per_update * cfg.updates, &mut |e| {
        if let TrainEvent::Progress { phases: p, .. } = e {
            phases.add(&p);
        }
    })?;
    let seconds = report.elapsed_s;
    let samples = per_update * cfg.updates;
    let sps = samples as f64 / seconds.max(1e-9);
    Ok(TrainBenchResult {
        config: cfg.clone(),
        device: format!("{device:?}"),
        samples,
        seconds,
        samples_per_second: sps,
        ratio_to_sb3: cfg.sb3_samples_per_second.map(|b| sps / b),
        phases,
    })
}
