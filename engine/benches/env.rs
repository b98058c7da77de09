//! Criterion benchmark of the CPU trading environment: one `step` of N envs × 7 assets,
//! lookback 1, 16 features. Throughput is reported in env-steps (elements = N).

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use tradetune_engine::env::bench::{bench_dataset, random_actions};
use tradetune_engine::env::{CpuVecEnv, EnvConfig, VecEnv};

fn env_step(c: &mut Criterion) {
    let data = bench_dataset(20_000, 7, 16, 7);
    let mut group = c.benchmark_group("env_step_7_assets");
    for n in [1usize, 8, 32, 256, 1024, 4096] {
        for (name, threshold) in [("1thread", usize::MAX), ("rayon", 256)] {
            let cfg = EnvConfig::new()
                .with_n_envs(n)
                .with_episode_bars(1_000)
                .with_trailing_stop_pct(0.05)
                .with_min_order_value(1_000.0);
            let mut env = CpuVecEnv::new(cfg, data.clone(), 0..data.n_bars()).expect("bench env");
            env.set_parallel_min_envs(threshold);
            let actions = random_actions(64, n, 7, 1);
            let mut obs = vec![0.0; n * env.obs_dim()];
            let mut rew = vec![0.0; n];
            let mut done = vec![0.0; n];
            let mut k = 0;
            group.throughput(Throughput::Elements(n as u64));
            group.bench_function(format!("{name}/n_envs={n}"), |b| {
                b.iter(|| {
                    k = (k + 1) % actions.len();
                    env.step(black_box(&actions[k]), &mut obs, &mut rew, &mut done);
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, env_step);
criterion_main!(benches);
