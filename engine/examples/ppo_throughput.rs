//! Training throughput of PPO on the CPU trading env (for a live comparison with
//! Stable-Baselines3 use `tradetune bench train --peer PYTHON`). Run in release:
//!
//! ```text
//! cargo run --release -p tradetune-engine --example ppo_throughput -- [small|large|tiny_rollout|all] [f32|bf16|f16]
//! ```

use tradetune_engine::device::precision::Precision;
use tradetune_engine::device::{DeviceSpec, open};
use tradetune_engine::ppo::bench::{TrainBenchConfig, run};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let which = args.first().map(String::as_str).unwrap_or("all");
    let precision: Precision = args
        .get(1)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or_default();
    let device_spec: DeviceSpec = args
        .get(2)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or_default();
    let device = open(device_spec)?;
    let configs = match which {
        "small" => vec![TrainBenchConfig::small()],
        "large" => vec![TrainBenchConfig::large()],
        "tiny_rollout" => vec![TrainBenchConfig::tiny_rollout()],
        _ => vec![TrainBenchConfig::small(), TrainBenchConfig::large()],
    };
    println!(
        "{:<6} {:>5} {:>6} {:>6} {:>6} {:<16} {:>5} {:>10} {:>8} | {:>6} {:>6} {:>6} {:>6} {:>6}",
        "config",
        "envs",
        "steps",
        "batch",
        "epochs",
        "net",
        "prec",
        "samples/s",
        "upd GF/s",
        "env%",
        "inf%",
        "buf%",
        "gae%",
        "upd%"
    );
    for mut cfg in configs {
        cfg.precision = precision;
        let r = run(&cfg, &device)?;
        let total = r.phases.total().max(1e-9);
        let pct = |x: f64| 100.0 * x / total;
        println!(
            "{:<6} {:>5} {:>6} {:>6} {:>6} {:<16} {:>5} {:>10.0} {:>8.1} | {:>6.1} {:>6.1} {:>6.1} {:>6.1} {:>6.1}",
            cfg.name,
            cfg.n_envs,
            cfg.n_steps,
            cfg.batch_size,
            cfg.n_epochs,
            format!("{:?}", cfg.net),
            cfg.precision.name(),
            r.samples_per_second,
            r.update_gflops_per_second,
            pct(r.phases.env_step),
            pct(r.phases.inference),
            pct(r.phases.buffer),
            pct(r.phases.advantages),
            pct(r.phases.update),
        );
    }
    Ok(())
}
