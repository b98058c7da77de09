//! Criterion benchmark of one PPO update cycle (rollout + update) on the CPU trading env,
//! small SB3-sized nets. Prints samples/s with the configuration; the large-net figure comes
//! from `cargo run --release --example ppo_throughput -- large` (one update takes seconds).

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use tradetune_engine::ppo::bench::{TrainBenchConfig, run};

fn bench(c: &mut Criterion) {
    let device = burn::tensor::Device::flex();
    let cfg = TrainBenchConfig {
        updates: 1,
        ..TrainBenchConfig::small()
    };
    let samples = (cfg.n_steps * cfg.n_envs) as u64;
    let mut group = c.benchmark_group("ppo");
    group.sample_size(10);
    group.throughput(Throughput::Elements(samples));
    group.bench_function(
        format!(
            "train envs={} n_steps={} batch={} epochs={} net={:?}",
            cfg.n_envs, cfg.n_steps, cfg.batch_size, cfg.n_epochs, cfg.net
        ),
        |b| {
            b.iter(|| {
                let r = run(&cfg, &device).expect("benchmark run");
                std::hint::black_box(r.samples_per_second)
            })
        },
    );
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
