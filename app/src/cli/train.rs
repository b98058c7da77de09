//! `tradetune train`: one PPO run on a dataset, with a progress bar (or `--json` events), a
//! memory check before it starts, and a checkpoint at the end.

use std::ops::Range;
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
use tradetune_engine::market::load::DatasetConfig;
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
    /// Market files to train on (per-asset CSV, long CSV with a ticker column, Binance klines;
    /// gzip read transparently). Default: the bundled sample (AAPL, GOOG, IBM, MSFT daily).
    /// Training uses the train split only; the scaler is fitted on it.
    #[arg(long = "data", value_name = "FILE")]
    pub data: Vec<PathBuf>,
    /// Train on a seeded synthetic market of this many bars (7 assets) instead of market files.
    #[arg(long, conflicts_with = "data", value_name = "BARS")]
    pub synthetic_bars: Option<usize>,
    /// Print one JSON event per line instead of a progress bar.
    #[arg(long)]
    pub json: bool,
}

/// The dataset a run trains on and the bars it may use. The one place the data source is
/// chosen: market files (the bundled sample by default) restricted to their train split, or a
/// seeded synthetic market used whole.
fn load_dataset(
    args: &TrainArgs,
    env: &EnvConfig,
) -> anyhow::Result<(Arc<Dataset>, Range<usize>, String)> {
    if let Some(bars) = args.synthetic_bars {
        anyhow::ensure!(bars >= 100, "--synthetic-bars must be at least 100");
        let data = tradetune_engine::env::bench::bench_dataset(bars, 7, 16, 7);
        let range = 0..data.n_bars();
        return Ok((
            data,
            range,
            format!("synthetic market, 7 assets x {bars} bars"),
        ));
    }
    let config = DatasetConfig {
        paths: args.data.clone(),
        lookback: env.lookback,
        episode_bars: env.episode_bars,
        ..DatasetConfig::default()
    };
    let loaded = config.load()?;
    let train = loaded.split.train.clone();
    let about = format!(
        "{}: {} (train bars {}..{} of {})",
        loaded.source_name,
        loaded.dataset.names.join(", "),
        train.start,
        train.end,
        loaded.dataset.n_bars()
    );
    Ok((Arc::new(loaded.dataset), train, about))
}

/// Reads a JSON config in which every field is optional: the file's fields are laid over
/// `defaults`. An unknown field is an error naming the file and listing the valid fields.
fn read_config<T: serde::Serialize + serde::de::DeserializeOwned>(
    path: &PathBuf,
    defaults: T,
) -> anyhow::Result<T> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let given: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    let mut merged = serde_json::to_value(defaults)?;
    overlay(&mut merged, given, "").with_context(|| format!("in {}", path.display()))?;
    serde_json::from_value(merged).with_context(|| format!("reading {}", path.display()))
}

/// Lays `given` over `base` field by field (nested objects too); rejects unknown fields.
fn overlay(base: &mut serde_json::Value, given: serde_json::Value, at: &str) -> anyhow::Result<()> {
    match (base, given) {
        (serde_json::Value::Object(b), serde_json::Value::Object(g)) => {
            for (key, value) in g {
                let name = if at.is_empty() {
                    key.clone()
                } else {
                    format!("{at}.{key}")
                };
                match b.get_mut(&key) {
                    Some(slot) => overlay(slot, value, &name)?,
                    None => {
                        let valid: Vec<&str> = b.keys().map(String::as_str).collect();
                        anyhow::bail!("unknown field '{name}'; valid fields: {}", valid.join(", "));
                    }
                }
            }
            Ok(())
        }
        (slot, value) => {
            *slot = value;
            Ok(())
        }
    }
}

pub fn run(args: TrainArgs) -> anyhow::Result<()> {
    let spec: DeviceSpec = args.device.parse()?;
    let precision: Precision = args
        .precision
        .parse()
        .map_err(|e: String| anyhow::anyhow!("--precision: {e}"))?;
    let device = open(spec)?;
    let mut ppo: PpoConfig = match &args.ppo {
        Some(p) => read_config(p, PpoConfig::new())?,
        None => PpoConfig::new(),
    };
    ppo.precision = precision;
    let env_cfg: EnvConfig = match &args.env {
        Some(p) => read_config(p, EnvConfig::new())?,
        None => EnvConfig::new(),
    };
    let (data, range, about) = load_dataset(&args, &env_cfg)?;
    if !args.json {
        println!("data: {about}");
    }
    let env = CpuVecEnv::new(env_cfg.clone(), data.clone(), range)?;

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
