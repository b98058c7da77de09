//! Training throughput end to end (rollout + update), for `tradetune bench train`, the
//! `ppo_throughput` example and the criterion benchmark. Configurations mirror the issue's
//! Stable-Baselines3 baselines so results read as ratios.

use burn::tensor::Device;
use serde::Serialize;

use crate::ppo::config::PpoConfig;
use crate::ppo::error::PpoError;
use crate::ppo::events::{PhaseTimes, TrainEvent};
use crate::ppo::model::{ActorCriticConfig, NetArch};
use crate::ppo::rollout_env::{HostEnv, RolloutEnv};
use crate::ppo::trainer::Trainer;
use tradetune_device::precision::Precision;
use tradetune_env::bench::bench_dataset;
use tradetune_env::{CpuVecEnv, EnvConfig, ResolvedPlacement, TensorVecEnv};

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
    /// Where the environment steps: on the host (`CpuVecEnv`) or on the device
    /// (`TensorVecEnv`).
    pub placement: ResolvedPlacement,
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
            placement: ResolvedPlacement::Host,
        }
    }

    /// The RTX 4080 presets' networks and minibatch (32 envs, pi = vf = [2048, 1024, 512],
    /// batch 1024), with rollouts of 256 steps instead of 4096 so an update takes seconds.
    pub fn rtx4080() -> Self {
        Self {
            name: "rtx4080",
            n_envs: 32,
            n_steps: 256,
            batch_size: 1024,
            n_epochs: 4,
            net: vec![2048, 1024, 512],
            updates: 1,
            sb3_samples_per_second: None,
            ..Self::small()
        }
    }

    /// The RX 7900 GRE preset's networks and minibatch (16 envs, [768, 768, 768], batch 4096),
    /// with rollouts of 256 steps instead of 2048.
    pub fn rx7900gre() -> Self {
        Self {
            name: "rx7900gre",
            n_envs: 16,
            n_steps: 256,
            batch_size: 4096,
            n_epochs: 4,
            net: vec![768, 768, 768],
            updates: 1,
            sb3_samples_per_second: None,
            ..Self::small()
        }
    }

    /// A tiny configuration for smoke tests on a software adapter (8 envs, nets [16], 32 steps).
    pub fn tiny() -> Self {
        Self {
            name: "tiny",
            n_envs: 8,
            n_steps: 32,
            batch_size: 128,
            n_epochs: 2,
            net: vec![16],
            updates: 1,
            sb3_samples_per_second: None,
            ..Self::small()
        }
    }

    /// The configuration named `name` (small, large, rtx4080, rx7900gre, tiny).
    pub fn named(name: &str) -> Option<Self> {
        match name {
            "small" => Some(Self::small()),
            "large" => Some(Self::large()),
            "rtx4080" => Some(Self::rtx4080()),
            "rx7900gre" => Some(Self::rx7900gre()),
            "tiny" => Some(Self::tiny()),
            _ => None,
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
    /// The device's memory pool after the run (bytes reserved), where the device reports one.
    pub pool_reserved_bytes: Option<u64>,
}

/// Trains `cfg.updates` updates (after a warm-up update that is not counted) on a random-walk
/// trading env of `cfg.n_assets` assets, on `device`.
pub fn run(cfg: &TrainBenchConfig, device: &Device) -> Result<TrainBenchResult, PpoError> {
    let data = bench_dataset(20_000, cfg.n_assets, cfg.n_features, 7);
    let env_cfg = EnvConfig::new()
        .with_n_envs(cfg.n_envs)
        .with_episode_bars(1_000);
    match cfg.placement {
        ResolvedPlacement::Host => {
            let env = CpuVecEnv::new(env_cfg, data.clone(), 0..data.n_bars())?;
            measure(
                cfg,
                Trainer::new(cfg.ppo(), HostEnv::new(env, device), device)?,
                device,
            )
        }
        ResolvedPlacement::Device => {
            let env = TensorVecEnv::new(env_cfg, &data, 0..data.n_bars(), device)?;
            measure(cfg, Trainer::new(cfg.ppo(), env, device)?, device)
        }
    }
}

fn measure<E: RolloutEnv>(
    cfg: &TrainBenchConfig,
    mut trainer: Trainer<E>,
    device: &Device,
) -> Result<TrainBenchResult, PpoError> {
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
        pool_reserved_bytes: device.memory_pool_usage().map(|u| u.bytes_reserved),
    })
}
