//! Issue 13, on-device rollouts: with the environment on the trainer's device a rollout reads
//! nothing back per step beyond the finished-episode statistics (the `[N]` done flags, and the
//! four statistics tensors on a step where an episode ended), while the host environment reads
//! every step's actions back. And either placement learns the same from the same seeds.
//!
//! One test function: the read counter is process-wide, and the harness would run other tests
//! of this binary on other threads at the same time.

mod common;

use std::collections::BTreeMap;

use burn::tensor::Device;
use tradetune_engine::device::readback;
use tradetune_engine::env::bench::bench_dataset;
use tradetune_engine::env::{CpuVecEnv, EnvConfig, TensorVecEnv};
use tradetune_engine::ppo::{
    ActorCriticConfig, HostEnv, NetArch, PpoConfig, RolloutEnv, TrainEvent, Trainer, UpdateStats,
};

const N_ENVS: usize = 4;
const N_STEPS: usize = 32;
/// Episodes of 10 bars: in 32 steps each env ends 3 episodes.
const EPISODE_BARS: usize = 10;

fn env_cfg() -> EnvConfig {
    EnvConfig::new()
        .with_n_envs(N_ENVS)
        .with_episode_bars(EPISODE_BARS)
        .with_seed(5)
}

fn ppo_cfg() -> PpoConfig {
    PpoConfig::new()
        .with_n_steps(N_STEPS)
        .with_batch_size(64)
        .with_n_epochs(2)
        .with_seed(9)
        .with_policy(
            ActorCriticConfig::new()
                .with_net_arch(NetArch::new().with_pi(vec![16]).with_vf(vec![16])),
        )
}

/// Trains `updates` updates and returns each update's statistics and the final parameters,
/// with the reads counted during training.
fn train<E: RolloutEnv>(
    env: E,
    device: &Device,
    updates: usize,
) -> (Vec<UpdateStats>, Vec<f32>, BTreeMap<&'static str, u64>) {
    let mut trainer = Trainer::new(ppo_cfg(), env, device).unwrap();
    let mut stats = Vec::new();
    readback::reset();
    trainer
        .learn(updates * N_ENVS * N_STEPS, &mut |e| {
            if let TrainEvent::Update { stats: s, .. } = e {
                stats.push(s);
            }
        })
        .unwrap();
    let reads = readback::counts();
    (stats, trainer.model().flat_params().unwrap(), reads)
}

fn check_reads_of_one_rollout(device: &Device, name: &str) {
    let data = bench_dataset(400, 3, 4, 1);
    let tensor = TensorVecEnv::new(env_cfg(), &data, 0..400, device).unwrap();
    let (_, _, reads) = train(tensor, device, 1);
    eprintln!("{name}, env on the device: reads {reads:?}");
    // Per step: the done flags, nothing else.
    assert_eq!(reads.get("device env: done flags"), Some(&(N_STEPS as u64)));
    // The statistics: 4 reads on each step where an episode ended. Every env ends one every
    // 10 steps (all at once: same episode length), so on 3 of the 32 steps.
    let stats = reads.get("device env: episode statistics").copied();
    assert_eq!(
        stats,
        Some(4 * (N_STEPS / EPISODE_BARS) as u64),
        "{reads:?}"
    );
    // Nothing else per step: the rest are once per rollout (GAE) or per minibatch (update).
    for (what, n) in &reads {
        let per_rollout = what.starts_with("gae:") && *n <= 4;
        let per_minibatch = what.starts_with("update:") && *n <= 2 * (N_ENVS * N_STEPS / 64) as u64;
        assert!(
            what.starts_with("device env:") || per_rollout || per_minibatch,
            "{name}: unexpected read of {what} ({n} times): {reads:?}"
        );
    }

    // The host env, for contrast: the actions come back every step.
    let host = CpuVecEnv::new(env_cfg(), data.clone(), 0..400).unwrap();
    let (_, _, reads) = train(HostEnv::new(host, device), device, 1);
    eprintln!("{name}, env on the host: reads {reads:?}");
    assert_eq!(reads.get("host env: actions"), Some(&(N_STEPS as u64)));
}

#[test]
fn a_device_rollout_reads_back_only_episode_statistics_and_learns_as_the_host_one() {
    check_reads_of_one_rollout(&Device::flex(), "flex");
    if let Some(wgpu) = common::wgpu_device("a_device_rollout_reads_back_only_episode_statistics") {
        check_reads_of_one_rollout(&wgpu, "wgpu");
    }

    // Same seeds, either placement, on the CPU device: the same learning, update by update.
    // Both envs compute in f32 by the same formulas, in another order of operations, so the
    // results agree to rounding: 1e-3 relative on the losses, 1e-3 absolute on the weights.
    let device = Device::flex();
    let data = bench_dataset(400, 3, 4, 1);
    let host = CpuVecEnv::new(env_cfg(), data.clone(), 0..400).unwrap();
    let tensor = TensorVecEnv::new(env_cfg(), &data, 0..400, &device).unwrap();
    let (a, pa, _) = train(HostEnv::new(host, &device), &device, 3);
    let (b, pb, _) = train(tensor, &device, 3);
    assert_eq!(a.len(), 3);
    assert_eq!(b.len(), 3);
    let close = |x: f32, y: f32| (x - y).abs() <= 1e-3 * x.abs().max(y.abs()).max(1e-3);
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        for (what, u, v) in [
            ("policy_loss", x.policy_loss, y.policy_loss),
            ("value_loss", x.value_loss, y.value_loss),
            ("entropy", x.entropy, y.entropy),
        ] {
            assert!(
                close(u, v),
                "update {}: {what} {u} (host) vs {v} (device)",
                i + 1
            );
        }
    }
    let worst = pa
        .iter()
        .zip(&pb)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0f32, f32::max);
    assert!(worst <= 1e-3, "weights differ by up to {worst}");
}
