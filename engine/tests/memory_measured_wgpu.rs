//! The memory estimator against a wgpu device's memory pool (Mesa's software Vulkan in CI, any
//! GPU elsewhere): the peak of the pool's bytes in use while the trainer runs, polled from
//! another thread, minus what was in use before the trainer was built, for three
//! configurations — small nets, the RTX 4080 presets' nets, and a large minibatch.
//!
//! One test function: the device's pool is shared by everything on it in this process.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use burn::tensor::Device;
use tradetune_engine::device::memory::MemoryEstimate;
use tradetune_engine::device::precision::Precision;
use tradetune_engine::env::bench::bench_dataset;
use tradetune_engine::env::{CpuVecEnv, EnvConfig, VecEnv};
use tradetune_engine::ppo::config::PpoConfig;
use tradetune_engine::ppo::model::{ActorCriticConfig, NetArch};
use tradetune_engine::ppo::rollout_env::HostEnv;
use tradetune_engine::ppo::trainer::Trainer;

fn in_use(device: &Device) -> u64 {
    device.memory_pool_usage().map_or(0, |u| u.bytes_in_use)
}

/// Peak pool bytes in use added by one update of `ppo` on `n_envs` host envs, and the
/// estimate for the same run.
fn measure(device: &Device, ppo: PpoConfig, n_envs: usize) -> (u64, MemoryEstimate) {
    let data = bench_dataset(2_000, 7, 16, 3);
    let env = CpuVecEnv::new(
        EnvConfig::new().with_n_envs(n_envs).with_episode_bars(500),
        data.clone(),
        0..data.n_bars(),
    )
    .expect("env");
    let (obs_dim, action_dim) = (env.obs_dim(), env.action_dim());
    let estimate = MemoryEstimate::of(&ppo, n_envs, obs_dim, action_dim, 0);
    let per_update = ppo.n_steps * n_envs;
    let _ = device.sync();
    let before = in_use(device);
    let peak = Arc::new(AtomicU64::new(before));
    let done = Arc::new(AtomicBool::new(false));
    let poll = {
        let (device, peak, done) = (device.clone(), peak.clone(), done.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                peak.fetch_max(in_use(&device), Ordering::Relaxed);
                std::thread::yield_now();
            }
        })
    };
    let mut trainer = Trainer::new(ppo, HostEnv::new(env, device), device).expect("trainer");
    trainer.learn(per_update, &mut |_| {}).expect("one update");
    let _ = device.sync();
    peak.fetch_max(in_use(device), Ordering::Relaxed);
    done.store(true, Ordering::Relaxed);
    poll.join().expect("poller");
    drop(trainer);
    (
        peak.load(Ordering::Relaxed).saturating_sub(before),
        estimate,
    )
}

fn ppo(net: Vec<usize>, n_steps: usize, batch: usize, precision: Precision) -> PpoConfig {
    PpoConfig::new()
        .with_n_steps(n_steps)
        .with_batch_size(batch)
        .with_n_epochs(1)
        .with_precision(precision)
        .with_policy(
            ActorCriticConfig::new()
                .with_net_arch(NetArch::new().with_pi(net.clone()).with_vf(net)),
        )
}

/// What the test shows, and what it does not: the estimate is never below the pool's measured
/// peak (a run the estimate admits is not refused later for a reason the estimate missed)
/// and at most 2.5× above it. It is not within 25 %: burn's fusion on wgpu keeps fewer
/// intermediates than the CPU backend the estimator was fitted on, and a poll from another
/// thread sees the pool between kernels, not the transient peak of a backward pass (measured
/// on lavapipe, 2026-11-25: small 2.0 MiB vs 2.5 estimated, [256, 256] batch 8192 73 MiB vs
/// 115, the RTX 4080 presets' nets in f16 66 MiB vs 142). The 4080 nets take minutes on a
/// software adapter: `TRADETUNE_MEASURE_4080=1` adds them.
#[test]
fn estimate_bounds_the_wgpu_pool_peak() {
    let Some(device) = common::wgpu_device("estimate_bounds_the_wgpu_pool_peak") else {
        return;
    };
    let mut cases = vec![
        (
            "small [64, 64] batch 256",
            ppo(vec![64, 64], 256, 256, Precision::F32),
            8,
        ),
        (
            "medium [512, 256] batch 1024 f16",
            ppo(vec![512, 256], 64, 1024, Precision::F16),
            16,
        ),
        (
            "large batch [256, 256] batch 8192",
            ppo(vec![256, 256], 512, 8192, Precision::F32),
            16,
        ),
    ];
    if std::env::var("TRADETUNE_MEASURE_4080").is_ok_and(|v| v == "1") {
        cases.push((
            "rtx4080 nets [2048, 1024, 512] batch 1024 f16",
            ppo(vec![2048, 1024, 512], 32, 1024, Precision::F16),
            32,
        ));
    }
    let mut report = String::new();
    let mut ratios = Vec::new();
    for (name, cfg, n_envs) in cases {
        let (measured, estimate) = measure(&device, cfg, n_envs);
        let ratio = estimate.total() as f64 / measured.max(1) as f64;
        ratios.push(ratio);
        report.push_str(&format!(
            "{name}: pool peak in use {:.2} MiB, estimate {:.2} MiB (×{ratio:.2})\n{estimate}\n",
            measured as f64 / 1048576.0,
            estimate.total() as f64 / 1048576.0,
        ));
    }
    println!("{report}");
    for r in ratios {
        assert!(
            (1.0..=2.5).contains(&r),
            "estimate/measured outside [1, 2.5]:\n{report}"
        );
    }
}
