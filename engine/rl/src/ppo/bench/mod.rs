//! Training throughput end to end (rollout + update), for `tradetune bench train`, the
//! `ppo_throughput` example and the criterion benchmark; the update's arithmetic rate against a
//! matmul probe of the same device ([`matmul_probe`]). A peer (Stable-Baselines3 on the Python
//! port of the env, `benches/peers/`) is measured by `tradetune bench train --peer`, in the same
//! run: there are no stored baselines.

use std::sync::Arc;

use burn::tensor::Device;
use serde::Serialize;

mod evaluation;
pub mod matmul;
mod probe;
mod products;
mod replay;
#[cfg(feature = "wgpu")]
mod routines;

pub use evaluation::{EVAL_PROBE_BARS, EvalProbe, eval_probe};
pub use probe::{MatmulProbe, PROBE_SIZES, matmul_probe, matmul_probe_products};
pub use replay::{ReplayProbe, try_replay_probe};

use crate::ppo::config::PpoConfig;
use crate::ppo::error::PpoError;
use crate::ppo::events::{PhaseTimes, TrainEvent};
use crate::ppo::model::{ActorCriticConfig, NetArch};
use crate::ppo::rollout_env::{HostEnv, RolloutEnv};
use crate::ppo::trainer::Trainer;
use tradetune_device::precision::Precision;
use tradetune_env::bench::bench_dataset;
use tradetune_env::{CpuVecEnv, EnvConfig, ResolvedPlacement, TensorVecEnv};
use tradetune_market::Dataset;

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
    /// Where the environment steps: on the host (`CpuVecEnv`) or on the device
    /// (`TensorVecEnv`).
    pub placement: ResolvedPlacement,
    /// Every update through burn's autodiff even where the host minibatch step applies (the
    /// CPU device in f32; see [`crate::ppo::host_update`]): the path other devices take, for
    /// comparing the two.
    pub burn_update: bool,
    /// Whether each rollout replays its policy step from a graph captured once a run
    /// ([`Trainer::set_replay_policy`]).
    pub replay_policy: bool,
    /// Whether the updates replay their minibatches from a graph captured once
    /// (`Learner::set_replay_update`).
    pub replay_update: bool,
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
            placement: ResolvedPlacement::Host,
            burn_update: false,
            replay_policy: false,
            replay_update: false,
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
            ..Self::small()
        }
    }

    /// The tiny configuration at the GPU presets' depth: nets [16, 16, 16], three hidden layers
    /// as both presets have, for what each layer adds to a step's launches on a software
    /// adapter.
    pub fn tiny_deep() -> Self {
        Self {
            name: "tiny_deep",
            net: vec![16, 16, 16],
            ..Self::tiny()
        }
    }

    /// SB3 zoo's regime for small control tasks: tiny rollouts (n_steps 32, 8 envs), batch
    /// 256, 20 epochs, nets 64-64.
    pub fn tiny_rollout() -> Self {
        Self {
            name: "tiny_rollout",
            n_steps: 32,
            n_epochs: 20,
            updates: 12,
            ..Self::small()
        }
    }

    /// Every named configuration, in the order help texts list them.
    pub fn all() -> [Self; 7] {
        [
            Self::small(),
            Self::large(),
            Self::tiny_rollout(),
            Self::rtx4080(),
            Self::rx7900gre(),
            Self::tiny(),
            Self::tiny_deep(),
        ]
    }

    /// The configuration named `name` (one of [`TrainBenchConfig::all`]'s names).
    pub fn named(name: &str) -> Option<Self> {
        Self::all().into_iter().find(|c| c.name == name)
    }

    /// The configurations named in `names` (surrounding spaces ignored), or the first unknown
    /// name with the valid ones.
    pub fn all_named<S: AsRef<str>>(names: &[S]) -> Result<Vec<Self>, String> {
        names
            .iter()
            .map(|name| {
                let name = name.as_ref().trim();
                Self::named(name).ok_or_else(|| {
                    let valid: Vec<&str> = Self::all().iter().map(|c| c.name).collect();
                    format!(
                        "unknown configuration '{name}' (valid: {})",
                        valid.join(", ")
                    )
                })
            })
            .collect()
    }

    /// The user's large nets: pi = vf = [2048, 1024, 512], batch 1024.
    pub fn large() -> Self {
        Self {
            name: "large",
            batch_size: 1024,
            net: vec![2048, 1024, 512],
            updates: 1,
            ..Self::small()
        }
    }

    /// Observation length of the benchmark's env (lookback 1).
    pub fn obs_dim(&self) -> usize {
        1 + self.n_assets + self.n_assets * self.n_features
    }

    /// Multiply-adds ×2 of one forward pass of both networks for one sample: every hidden layer
    /// of pi and vf, the action-mean head and the value head.
    pub fn forward_flops_per_sample(&self) -> f64 {
        let mlp = |head: usize| {
            let mut fan_in = self.obs_dim();
            let mut macs = 0usize;
            for &w in &self.net {
                macs += fan_in * w;
                fan_in = w;
            }
            macs + fan_in * head
        };
        2.0 * (mlp(self.n_assets) + mlp(1)) as f64
    }

    /// Multiply-adds ×2 of the backward pass for one sample: every layer's weight gradient
    /// (as many as its forward), and its input gradient except for the first layer of each
    /// network (the observations need none, and autodiff computes none for them).
    pub fn backward_flops_per_sample(&self) -> f64 {
        let first = self.obs_dim() * self.net.first().copied().unwrap_or(self.n_assets)
            + self.obs_dim() * self.net.first().copied().unwrap_or(1);
        2.0 * self.forward_flops_per_sample() - 2.0 * first as f64
    }

    /// The matmuls of one minibatch step, `[m, k, n]` (an `m × k` by `k × n` product), without
    /// repeats: each layer's forward (`batch × fan_in` by `fan_in × width`) and its weight
    /// gradient (`fan_in × batch` by `batch × width`). The probe times them at these shapes.
    pub fn update_shapes(&self) -> Vec<[usize; 3]> {
        let mut shapes = Vec::new();
        let mut fan_in = self.obs_dim();
        for &w in self.net.iter().chain(std::iter::once(&self.n_assets)) {
            for s in [[self.batch_size, fan_in, w], [fan_in, self.batch_size, w]] {
                if !shapes.contains(&s) {
                    shapes.push(s);
                }
            }
            fan_in = w;
        }
        shapes
    }

    /// FLOPs of one update's matmuls: forward and backward over every sample of the rollout,
    /// `n_epochs` times. Element-wise work (activations, the loss, Adam) is not counted: the
    /// matmuls dominate from mid-sized nets.
    pub fn update_flops(&self) -> f64 {
        (self.forward_flops_per_sample() + self.backward_flops_per_sample())
            * (self.n_steps * self.n_envs * self.n_epochs) as f64
    }

    /// The arguments that have a peer script (`benches/peers/sb3_ppo.py`) train this
    /// configuration, `updates` updates after its warm-up.
    pub fn peer_args(&self, updates: usize) -> Vec<String> {
        let net: Vec<String> = self.net.iter().map(|w| w.to_string()).collect();
        [
            ("--n-envs", self.n_envs.to_string()),
            ("--n-steps", self.n_steps.to_string()),
            ("--batch-size", self.batch_size.to_string()),
            ("--n-epochs", self.n_epochs.to_string()),
            ("--net", net.join(",")),
            ("--assets", self.n_assets.to_string()),
            ("--features", self.n_features.to_string()),
            ("--updates", updates.to_string()),
        ]
        .into_iter()
        .flat_map(|(k, v)| [k.to_owned(), v])
        .collect()
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
    /// Samples per second of the measured updates: steady state, after the warm-up update
    /// compiled what it needed.
    pub samples_per_second: f64,
    /// Samples per second from a new trainer's start: the warm-up (cold) update and the
    /// measured ones, as a trial of this length would see it.
    pub end_to_end_samples_per_second: f64,
    /// Wall time of the first (cold) update: compilation, autotuning, uploads and the update.
    pub cold_update_s: f64,
    /// Seconds per measured (steady) update.
    pub steady_update_s: f64,
    /// When the measured (steady) updates began and ended, seconds since the Unix epoch: the
    /// window a device's utilisation is read over for them (not the cold update's compiling,
    /// nor the probes after them).
    pub steady_window_s: (f64, f64),
    /// The cold update's wall time less the steady update timed as it was (phase by phase, a
    /// synchronisation after each: timing's cost is not compiling): what a new configuration
    /// costs before it trains. None on the CPU, which compiles nothing.
    pub compile_s: Option<f64>,
    /// Kernels compiled during the cold update (None where the device compiles nothing or
    /// the counters are off).
    pub kernels_compiled: Option<u64>,
    /// Operations autotuned during the cold update.
    pub autotune_runs: Option<u64>,
    /// Kernel launches per environment step (a steady, timed update's).
    pub dispatches_per_env_step: Option<f64>,
    /// Kernel launches per policy step of a rollout.
    pub dispatches_per_policy_step: Option<f64>,
    /// Kernel launches per step of writing the rollout buffer (and normalising the next
    /// observation).
    pub dispatches_per_buffer_step: Option<f64>,
    /// Kernel launches per minibatch of the update.
    pub dispatches_per_minibatch: Option<f64>,
    /// Of `dispatches_per_policy_step`, the layout copies: contiguous copies of an operand that
    /// the matmul routine the autotune cache picked wants in another layout, launched first
    /// ([`tradetune_device::kernels::is_layout_copy`]).
    pub layout_copies_per_policy_step: Option<f64>,
    /// Of `dispatches_per_minibatch`, the layout copies.
    pub layout_copies_per_minibatch: Option<f64>,
    /// Host reads and synchronisations per (untimed) update.
    pub syncs_per_update: Option<u64>,
    /// The device's busy time with an update's kernels (timed kernel by kernel in an update
    /// of its own) against a steady update's wall time, in percent: what a GPU's utilisation
    /// gauge would show for this run alone, from the device's own clock where it has one.
    pub kernel_busy_pct: Option<f64>,
    /// The device's idle time in a steady update (its wall time less the kernels' busy time)
    /// per kernel launched, in microseconds: the host's cost per launch (building, submitting,
    /// synchronising, and a host env's own work) where the device waits for it.
    pub device_idle_us_per_launch: Option<f64>,
    /// The launches of a steady, timed update by part.
    pub dispatch_profile: Option<crate::ppo::DispatchProfile>,
    /// FLOPs of the measured updates' matmuls ([`TrainBenchConfig::update_flops`] × updates).
    pub update_flops: f64,
    /// `update_flops` / the update phase's seconds.
    pub update_gflops_per_second: f64,
    /// Where the time went.
    pub phases: PhaseTimes,
    /// The device's memory pool after the run (bytes reserved), where the device reports one.
    pub pool_reserved_bytes: Option<u64>,
    /// On a GPU, the trained model's policy step run directly and replayed from a captured
    /// graph ([`try_replay_probe`]): what a rollout built on replays would save per step.
    pub policy_replay: Option<ReplayProbe>,
    /// Why the replay probe has no figures, where it failed (the run's own figures stand).
    pub policy_replay_error: Option<String>,
    /// Where the rollouts replay their policy step (`replay_policy`) but could not record its
    /// launches, why ([`Trainer::replay_fallback`]): the run's figures are then direct steps'.
    pub replay_fallback: Option<String>,
    /// Where the updates replay their minibatches (`replay_update`) but a capture or replay
    /// failed, why (`Learner::replay_fallback`): the minibatches from there on ran directly.
    pub update_replay_fallback: Option<String>,
    /// On a GPU, the trained policy's evaluation on [`EVAL_PROBE_BARS`] bars ([`eval_probe`]).
    pub evaluation: Option<EvalProbe>,
    /// Why the evaluation probe has no figures, where it failed.
    pub evaluation_error: Option<String>,
}

/// `cfg`'s update on `device` held against the CPU's ([`crate::ppo::update::agreement`]): its
/// network, precision, observation width and minibatch, on a made-up rollout.
pub fn agreement(
    cfg: &TrainBenchConfig,
    device: &Device,
) -> Result<crate::ppo::update::agreement::Agreement, PpoError> {
    crate::ppo::update::agreement::agreement(&cfg.ppo(), cfg.obs_dim(), device)
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
            let env = CpuVecEnv::new(env_cfg.clone(), data.clone(), 0..data.n_bars())?;
            let trainer = Trainer::new(cfg.ppo(), HostEnv::new(env, device), device)?;
            measure(cfg, trainer, device, (&data, &env_cfg))
        }
        ResolvedPlacement::Device => {
            let env = TensorVecEnv::new(env_cfg.clone(), &data, 0..data.n_bars(), device)?;
            measure(
                cfg,
                Trainer::new(cfg.ppo(), env, device)?,
                device,
                (&data, &env_cfg),
            )
        }
    }
}

/// Measures `trainer` as `cfg` says; the evaluation probe trades `market`'s last bars.
fn measure<E: RolloutEnv>(
    cfg: &TrainBenchConfig,
    mut trainer: Trainer<E>,
    device: &Device,
    market: (&Arc<Dataset>, &EnvConfig),
) -> Result<TrainBenchResult, PpoError> {
    use tradetune_device::kernels;
    if cfg.burn_update {
        trainer.learner_mut().set_host_update(false);
    }
    trainer.set_replay_policy(cfg.replay_policy);
    trainer.learner_mut().set_replay_update(cfg.replay_update);
    let per_update = cfg.n_steps * cfg.n_envs;
    // The cold update: what a new configuration compiles and autotunes before it trains.
    trainer.set_phase_sampling(1);
    kernels::settle();
    let before = kernels::counts();
    let cold = trainer.learn(per_update, &mut |_| {})?;
    kernels::settle();
    let cold_kernels = kernels::counts().since(&before);
    // One steady update timed phase by phase (a synchronisation after each): the split, and
    // the launches of each part; and what the cold update, timed so too, took beyond it.
    let timed_steady = trainer.learn(per_update, &mut |_| {})?;
    let profile = trainer.dispatch_profile();
    // One more timed update with every kernel timed on the device: how long the device itself
    // ran each part (on its own: the timing costs the host a round trip per launch). The timer
    // sees launches, not replays, so this update runs its policy steps and minibatches
    // directly: the same kernels.
    let kernel_time = if tradetune_device::is_cpu(device) {
        None
    } else {
        trainer.set_kernel_timing(true);
        trainer.set_replay_policy(false);
        trainer.learner_mut().set_replay_update(false);
        trainer.learn(per_update, &mut |_| {})?;
        trainer.set_replay_policy(cfg.replay_policy);
        trainer.learner_mut().set_replay_update(cfg.replay_update);
        trainer.set_kernel_timing(false);
        trainer.dispatch_profile().and_then(|p| p.kernel_time)
    };
    // The measured updates, untimed: the steady rate, split as the timed one was.
    trainer.set_phase_sampling(usize::MAX);
    let mut phases = PhaseTimes::default();
    let steady_from = unix_s();
    let report = trainer.learn(per_update * cfg.updates, &mut |e| {
        if let TrainEvent::Progress { phases: p, .. } = e {
            phases.add(&p);
        }
    })?;
    let steady_window_s = (steady_from, unix_s());
    let profile = profile.map(|mut p| {
        p.syncs_per_update = report.dispatches.and_then(|d| d.syncs_per_update);
        p.kernel_time = kernel_time;
        p
    });
    let replay_fallback = trainer.replay_fallback().map(str::to_owned);
    let update_replay_fallback = trainer.learner().replay_fallback().map(str::to_owned);
    // The pool as the training left it, before the probe below allocates its own.
    let pool_reserved_bytes = device.memory_pool_usage().map(|u| u.bytes_reserved);
    // (Not in a run whose rollouts replay their policy step: it measured that itself.)
    let (policy_replay, policy_replay_error) =
        if tradetune_device::is_cpu(device) || cfg.replay_policy {
            (None, None)
        } else {
            let dtype = cfg.precision.compute_dtype();
            match try_replay_probe(trainer.model(), cfg.n_envs, cfg.obs_dim(), dtype, device) {
                Ok(probe) => (Some(probe), None),
                Err(e) => (None, Some(e)),
            }
        };
    let (evaluation, evaluation_error) = if tradetune_device::is_cpu(device) {
        (None, None)
    } else {
        let probe = trainer
            .normalization()
            .map_err(|e| e.to_string())
            .and_then(|norm| eval_probe(trainer.model(), &norm, &cfg.ppo(), market.0, market.1));
        match probe {
            Ok(probe) => (Some(probe), None),
            Err(e) => (None, Some(e)),
        }
    };
    let seconds = report.elapsed_s;
    let samples = per_update * cfg.updates;
    let sps = samples as f64 / seconds.max(1e-9);
    let steady_update_s = seconds / cfg.updates.max(1) as f64;
    let counted = !tradetune_device::is_cpu(device);
    let counting = counted && kernels::counting_compiles();
    let dispatching = counted && kernels::counting_dispatches();
    let update_flops = cfg.update_flops() * cfg.updates as f64;
    Ok(TrainBenchResult {
        config: cfg.clone(),
        device: format!("{device:?}"),
        samples,
        seconds,
        samples_per_second: sps,
        end_to_end_samples_per_second: (samples + per_update) as f64
            / (seconds + cold.elapsed_s).max(1e-9),
        cold_update_s: cold.elapsed_s,
        steady_update_s,
        steady_window_s,
        compile_s: cold_compile_s(device, cold.elapsed_s, timed_steady.elapsed_s),
        kernels_compiled: counting.then_some(cold_kernels.compiled),
        autotune_runs: counting.then_some(cold_kernels.autotune_runs),
        dispatches_per_env_step: profile.filter(|_| dispatching).map(|p| p.per_env_step),
        dispatches_per_policy_step: profile.filter(|_| dispatching).map(|p| p.per_policy_step),
        dispatches_per_buffer_step: profile.filter(|_| dispatching).map(|p| p.per_buffer_step),
        dispatches_per_minibatch: profile.filter(|_| dispatching).map(|p| p.per_minibatch),
        layout_copies_per_policy_step: profile
            .filter(|_| dispatching)
            .map(|p| p.copies_per_policy_step),
        layout_copies_per_minibatch: profile
            .filter(|_| dispatching)
            .map(|p| p.copies_per_minibatch),
        syncs_per_update: profile.and_then(|p| p.syncs_per_update),
        kernel_busy_pct: kernel_time.map(|k| 100.0 * k.busy_s / steady_update_s.max(1e-9)),
        device_idle_us_per_launch: kernel_time
            .map(|k| 1e6 * (steady_update_s - k.busy_s).max(0.0) / k.total().kernels.max(1) as f64),
        dispatch_profile: profile.filter(|_| dispatching),
        update_flops,
        update_gflops_per_second: update_flops / phases.update.max(1e-9) / 1e9,
        phases,
        pool_reserved_bytes,
        policy_replay,
        policy_replay_error,
        replay_fallback,
        update_replay_fallback,
        evaluation,
        evaluation_error,
    })
}

/// What the cold update (`cold_s`) took beyond a steady update timed as it was (`timed_s`):
/// its compiling and autotuning; None on the CPU, which compiles nothing.
fn cold_compile_s(device: &Device, cold_s: f64, timed_s: f64) -> Option<f64> {
    (!tradetune_device::is_cpu(device)).then(|| (cold_s - timed_s).max(0.0))
}

/// Now, in seconds since the Unix epoch (the telemetry sampler's clock).
fn unix_s() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// A caught panic's message (a `String` or `&str` payload), for a probe that reports a panic in
/// burn or cubecl instead of ending the benchmark.
fn panic_text(payload: &(dyn std::any::Any + Send)) -> Option<String> {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
}

/// Threads of the rayon pool the CPU device and the env compute with.
pub fn rayon_threads() -> usize {
    rayon::current_num_threads()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn update_flops_count_both_networks_forward_and_backward() {
        let c = TrainBenchConfig::small();
        // obs 1 + 7 + 7·16 = 120; pi 120·64 + 64·64 + 64·7, vf 120·64 + 64·64 + 64·1.
        assert_eq!(c.obs_dim(), 120);
        let macs = (120 * 64 + 64 * 64 + 64 * 7) + (120 * 64 + 64 * 64 + 64);
        assert_eq!(c.forward_flops_per_sample(), 2.0 * macs as f64);
        // Backward: the weight gradients (as the forward) and the input gradients of every
        // layer but the two first ones.
        let input_grads = (64 * 64 + 64 * 7) + (64 * 64 + 64);
        assert_eq!(
            c.update_flops(),
            2.0 * (2 * macs + input_grads) as f64 * (256 * 8 * 4) as f64
        );
    }

    #[test]
    fn update_shapes_are_each_layers_forward_and_weight_gradient() {
        let c = TrainBenchConfig::rtx4080();
        let s = c.update_shapes();
        assert_eq!(s[0], [1024, 120, 2048]);
        assert_eq!(s[1], [120, 1024, 2048]);
        assert!(s.contains(&[1024, 2048, 1024]));
        assert!(s.contains(&[1024, 512, 7]), "the action head: {s:?}");
        // Four layers, forward and weight gradient each, but the third layer's two are one
        // shape (batch 1024 = its fan-in 1024).
        assert_eq!(s.len(), 7);
    }

    #[test]
    fn peer_args_carry_the_configuration() {
        let a = TrainBenchConfig::tiny_rollout().peer_args(5);
        let joined = a.join(" ");
        assert_eq!(
            joined,
            "--n-envs 8 --n-steps 32 --batch-size 256 --n-epochs 20 --net 64,64 --assets 7 \
             --features 16 --updates 5"
        );
    }
}
