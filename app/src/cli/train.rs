//! `tradetune train`: one PPO run on a dataset, with a progress bar (or `--json` events), a
//! memory check before it starts, and a checkpoint at the end.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use tradetune_engine::device::memory::{
    DEFAULT_MEMORY_FRACTION, MemoryBudget, MemoryEstimate, host_memory_bytes,
};
use tradetune_engine::device::precision::Precision;
use tradetune_engine::device::{DeviceSpec, open};
use tradetune_engine::env::{CpuVecEnv, EnvConfig, VecEnv};
use tradetune_engine::market::Dataset;
use tradetune_engine::ppo::checkpoint;
use tradetune_engine::ppo::{HostEnv, PpoConfig, TrainEvent, Trainer};

#[derive(Debug, Args)]
pub struct TrainArgs {
    /// Device: cpu, wgpu, wgpu:N, cuda:N, rocm:N (see `tradetune devices`).
    #[arg(long, default_value = "cpu")]
    pub device: String,
    /// Compute precision: f32, bf16 or f16.
    #[arg(long, default_value = "f32")]
    pub precision: String,
    /// Samples to train on (n_steps × n_envs per update; rounded up to whole updates).
    #[arg(long, default_value_t = 100_000)]
    pub total_timesteps: usize,
    /// Checkpoint directory written at the end.
    #[arg(long)]
    pub out: PathBuf,
    /// PPO configuration (JSON, every field optional; defaults are SB3's).
    #[arg(long)]
    pub ppo: Option<PathBuf>,
    /// Environment configuration (JSON, every field optional).
    #[arg(long)]
    pub env: Option<PathBuf>,
    /// Fraction of the device's memory this run may use.
    #[arg(long, default_value_t = DEFAULT_MEMORY_FRACTION)]
    pub memory_fraction: f64,
    /// Bars of the synthetic dataset used until a market-data source is connected.
    #[arg(long, default_value_t = 20_000)]
    pub synthetic_bars: usize,
    /// Print one JSON event per line instead of a progress bar.
    #[arg(long)]
    pub json: bool,
}

/// The dataset a run trains on. The one place the data source is chosen: a seeded random-walk
/// market of 7 assets × 16 features until the market-data loader is connected here.
fn load_dataset(args: &TrainArgs) -> anyhow::Result<Arc<Dataset>> {
    anyhow::ensure!(
        args.synthetic_bars >= 100,
        "--synthetic-bars must be at least 100"
    );
    Ok(tradetune_engine::env::bench::bench_dataset(
        args.synthetic_bars,
        7,
        16,
        7,
    ))
}

fn read_config<T: serde::de::DeserializeOwned>(path: &PathBuf) -> anyhow::Result<T> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

pub fn run(args: TrainArgs) -> anyhow::Result<()> {
    let spec: DeviceSpec = args.device.parse()?;
    let precision: Precision = args
        .precision
        .parse()
        .map_err(|e: String| anyhow::anyhow!("--precision: {e}"))?;
    let device = open(spec)?;
    let mut ppo: PpoConfig = match &args.ppo {
        Some(p) => read_config(p)?,
        None => PpoConfig::new(),
    };
    ppo.precision = precision;
    let env_cfg: EnvConfig = match &args.env {
        Some(p) => read_config(p)?,
        None => EnvConfig::new(),
    };
    let data = load_dataset(&args)?;
    let env = CpuVecEnv::new(env_cfg.clone(), data.clone(), 0..data.n_bars())?;

    // Refuse a run that cannot fit before allocating anything large.
    let estimate = MemoryEstimate::of(
        &ppo,
        env.n_envs(),
        env.obs_dim(),
        env.action_dim(),
        0, // the CPU env reads the dataset in place in host memory
    );
    let budget = match host_memory_bytes() {
        Some(bytes) if spec == DeviceSpec::Cpu => {
            let budget = MemoryBudget::new(bytes, args.memory_fraction, 1)?;
            budget.check(&estimate)?;
            Some(budget)
        }
        _ => None,
    };

    let mut trainer = Trainer::new(ppo, HostEnv::new(env, &device), &device)?;
    if let Some(b) = budget {
        trainer = trainer.with_memory_budget(b);
    }
    let bar = (!args.json).then(|| {
        let bar = ProgressBar::new(args.total_timesteps as u64);
        bar.set_style(
            ProgressStyle::with_template("{bar:40} {pos}/{len} samples {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar
    });
    let report = trainer.learn(args.total_timesteps, &mut |event| {
        if args.json {
            if let Ok(line) = serde_json::to_string(&event) {
                println!("{line}");
            }
            return;
        }
        let Some(bar) = &bar else { return };
        // indicatif drops `println` on a hidden bar (output not a terminal): print directly.
        let say = |line: String| {
            if bar.is_hidden() {
                println!("{line}");
            } else {
                bar.println(line);
            }
        };
        match event {
            TrainEvent::Progress {
                timesteps,
                samples_per_second,
                ..
            } => {
                bar.set_position(timesteps as u64);
                bar.set_message(format!("{samples_per_second:.0} samples/s"));
            }
            TrainEvent::Episodes(e) => say(format!(
                "episodes {:>4}  reward {:>8.3}  return {:>7.2} %  equal weight {:>7.2} %",
                e.count,
                e.mean_reward,
                100.0 * e.mean_return,
                100.0 * e.mean_equal_weight_return
            )),
            // CleanRL's per-update diagnostics, one line per update.
            TrainEvent::Update { update, stats } => say(format!(
                "update {update:>4}  policy_loss {:>8.4}  value_loss {:>9.4}  entropy {:>6.3}  \
                 approx_kl {:>7.5}  clipfrac {:>5.3}  explained_var {:>6.3}  lr {:.2e}  \
                 loss_scale {}  epochs {}  skipped {}",
                stats.policy_loss,
                stats.value_loss,
                stats.entropy,
                stats.approx_kl,
                stats.clipfrac,
                stats.explained_variance,
                stats.learning_rate,
                stats.loss_scale,
                stats.epochs,
                stats.skipped_steps
            )),
            _ => {}
        }
    })?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    checkpoint::save(&args.out, &trainer)?;
    std::fs::write(
        args.out.join("env.json"),
        serde_json::to_string_pretty(&env_cfg)?,
    )
    .with_context(|| format!("writing {}", args.out.join("env.json").display()))?;
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        println!(
            "trained {} samples in {} updates, {:.1} s ({:.0} samples/s); checkpoint in {}",
            report.timesteps,
            report.updates,
            report.elapsed_s,
            report.samples_per_second,
            args.out.display()
        );
    }
    Ok(())
}
