//! `tradetune train`: one PPO run on a dataset, with a progress bar (or `--json` events), a
//! memory check before it starts, optional periodic evaluation on the validation split, and a
//! checkpoint at the end (resumable with `--resume`).
//!
//! Configuration, later sources overriding earlier ones: SB3's defaults → `--config FILE.toml`
//! → `--ppo`/`--env` JSON files → command-line flags. The TOML file holds the run's options at
//! the top level and the PPO and environment fields in `[ppo]` and `[env]` tables, with the
//! same names as the JSON files. Paths in it (`out`, `data`) are relative to the file.
//!
//! ```toml
//! total_timesteps = 200000
//! out = "runs/first"
//! eval_every = 10            # updates; 0 = no periodic evaluation
//! objective = "sharpe_excess"
//! [ppo]
//! learning_rate = 3e-4
//! n_steps = 256
//! [ppo.policy.net_arch]
//! pi = [256, 256]
//! vf = [256, 256]
//! [env]
//! n_envs = 16
//! ```

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use serde::{Deserialize, Serialize};
use tradetune_engine::device::memory::{
    DEFAULT_MEMORY_FRACTION, MemoryBudget, MemoryEstimate, host_memory_bytes,
};
use tradetune_engine::device::{DeviceSpec, open};
use tradetune_engine::env::{CpuVecEnv, EnvConfig, VecEnv};
use tradetune_engine::eval::{EvalSplit, Objective};
use tradetune_engine::market::Dataset;
use tradetune_engine::market::load::DatasetConfig;
use tradetune_engine::market::split::{HoldOut, SplitSpec};
use tradetune_engine::ppo::checkpoint;
use tradetune_engine::ppo::{HostEnv, PeriodicEval, PpoConfig, TrainEvent, Trainer};

/// File in a checkpoint directory recording the data a run trained on (for `backtest`).
pub const DATA_FILE: &str = "data.json";
/// File in a checkpoint directory holding the environment configuration.
pub const ENV_FILE: &str = "env.json";

#[derive(Debug, Args)]
pub struct TrainArgs {
    /// Run configuration (TOML): run options at the top level, `[ppo]` and `[env]` tables with
    /// the fields of the JSON configs. Flags given on the command line override it.
    #[arg(long, value_name = "FILE.toml")]
    pub config: Option<PathBuf>,
    /// Device: cpu, wgpu, wgpu:N, cuda:N, rocm:N (see `tradetune devices`). Default cpu.
    #[arg(long)]
    pub device: Option<String>,
    /// Compute precision: f32, bf16 or f16. Default f32.
    #[arg(long)]
    pub precision: Option<String>,
    /// Samples to train on (n_steps × n_envs per update; rounded up to whole updates); with
    /// `--resume`, samples to add. Default 100000.
    #[arg(long)]
    pub total_timesteps: Option<usize>,
    /// Checkpoint directory written at the end (default with `--resume`: the resumed one).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// PPO configuration (JSON, every field optional; defaults are SB3's).
    #[arg(long)]
    pub ppo: Option<PathBuf>,
    /// Environment configuration (JSON, every field optional).
    #[arg(long)]
    pub env: Option<PathBuf>,
    /// Fraction of the device's memory this run may use. Default 0.8.
    #[arg(long)]
    pub memory_fraction: Option<f64>,
    /// Market files to train on (per-asset CSV, long CSV with a ticker column, Binance klines;
    /// gzip read transparently). Default: the bundled sample (AAPL, GOOG, IBM, MSFT daily).
    /// Training uses the train split only; the scaler is fitted on it.
    #[arg(long = "data", value_name = "FILE")]
    pub data: Vec<PathBuf>,
    /// Train on a seeded synthetic market of this many bars (7 assets) instead of market files
    /// (its train split; validation and test splits as for market files).
    #[arg(long, conflicts_with = "data", value_name = "BARS")]
    pub synthetic_bars: Option<usize>,
    /// Evaluate the deterministic policy on the validation split every N updates (0 = never).
    #[arg(long, value_name = "N")]
    pub eval_every: Option<usize>,
    /// Objective reported by the periodic evaluation: sharpe_excess (default), sharpe,
    /// sortino_excess, sortino, excess_return, total_return.
    #[arg(long)]
    pub objective: Option<String>,
    /// Resume from this checkpoint directory: its PPO and environment configs, data, weights,
    /// optimiser state, normalisation statistics and sample count.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["ppo", "env", "data", "synthetic_bars"])]
    pub resume: Option<PathBuf>,
    /// Print one JSON event per line instead of a progress bar.
    #[arg(long)]
    pub json: bool,
}

/// The run options a TOML config may set (top level), besides `[ppo]` and `[env]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
struct RunOptions {
    device: Option<String>,
    precision: Option<String>,
    total_timesteps: Option<usize>,
    out: Option<PathBuf>,
    memory_fraction: Option<f64>,
    data: Vec<PathBuf>,
    synthetic_bars: Option<usize>,
    eval_every: Option<usize>,
    objective: Option<String>,
}

/// Where a run's market data comes from; saved in the checkpoint so `backtest` can rebuild the
/// same dataset (same files, same scaler fitted on the same train split).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DataSource {
    /// Market files, absolute; empty = the bundled sample.
    pub paths: Vec<PathBuf>,
    /// A seeded synthetic market of this many bars instead.
    pub synthetic_bars: Option<usize>,
}

/// A dataset and its train / validation / test split.
pub struct LoadedData {
    pub dataset: Arc<Dataset>,
    pub split: HoldOut,
    /// For people: source, assets, bars.
    pub about: String,
}

impl DataSource {
    /// Market files (made absolute, so the record works from any directory) or synthetic bars.
    pub fn new(paths: &[PathBuf], synthetic_bars: Option<usize>) -> anyhow::Result<Self> {
        let paths = paths
            .iter()
            .map(|p| std::path::absolute(p).with_context(|| format!("resolving {}", p.display())))
            .collect::<anyhow::Result<_>>()?;
        Ok(Self {
            paths,
            synthetic_bars,
        })
    }

    /// Loads the dataset for the env's lookback and episode length. The one place the data
    /// source is chosen: market files (the bundled sample by default), or a seeded synthetic
    /// market of 7 assets split 70 / 15 / 15 like market files.
    pub fn load(&self, env: &EnvConfig) -> anyhow::Result<LoadedData> {
        if let Some(bars) = self.synthetic_bars {
            anyhow::ensure!(bars >= 100, "--synthetic-bars must be at least 100");
            let dataset = tradetune_engine::env::bench::bench_dataset(bars, 7, 16, 7);
            let split = SplitSpec::default().resolve(&dataset.timestamps)?;
            return Ok(LoadedData {
                about: format!(
                    "synthetic market, 7 assets x {bars} bars (train bars {}..{})",
                    split.train.start, split.train.end
                ),
                dataset,
                split,
            });
        }
        let config = DatasetConfig {
            paths: self.paths.clone(),
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
        Ok(LoadedData {
            dataset: Arc::new(loaded.dataset),
            split: loaded.split,
            about,
        })
    }
}

/// The kind of a JSON value, for type errors.
fn kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "a list",
        serde_json::Value::Object(_) => "a table",
    }
}

/// Lays `given` over `base` field by field (nested objects too); rejects unknown fields and
/// values of another type than the default's, naming the field. A `null` default (an optional
/// field) takes any value; its type is checked when the whole config is read.
fn overlay(base: &mut serde_json::Value, given: serde_json::Value, at: &str) -> anyhow::Result<()> {
    use serde_json::Value;
    match (base, given) {
        (Value::Object(b), Value::Object(g)) => {
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
            let same = std::mem::discriminant(&*slot) == std::mem::discriminant(&value);
            // Enum fields are strings or tables (tagged); both kinds may replace each other.
            let enum_like = matches!(
                (&*slot, &value),
                (Value::String(_), Value::Object(_)) | (Value::Object(_), Value::String(_))
            );
            if !(same || enum_like || slot.is_null()) {
                anyhow::bail!(
                    "field '{at}' must be {} like its default {slot}, not {} ({value})",
                    kind(slot),
                    kind(&value)
                );
            }
            *slot = value;
            Ok(())
        }
    }
}

/// `defaults` with `given` laid over them, read back as `T`; errors name `what` and the field.
fn merge<T: Serialize + serde::de::DeserializeOwned>(
    defaults: T,
    given: serde_json::Value,
    what: &str,
) -> anyhow::Result<T> {
    let mut merged = serde_json::to_value(defaults)?;
    overlay(&mut merged, given, "").with_context(|| format!("in {what}"))?;
    serde_json::from_value(merged).with_context(|| format!("reading {what}"))
}

/// Reads a JSON config in which every field is optional, laid over `defaults`.
fn read_json<T: Serialize + serde::de::DeserializeOwned>(
    path: &Path,
    defaults: T,
) -> anyhow::Result<T> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let given: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    merge(defaults, given, &path.display().to_string())
}

/// A TOML run config: the run options and the `[ppo]` and `[env]` tables (as JSON values).
struct TomlConfig {
    run: RunOptions,
    ppo: Option<serde_json::Value>,
    env: Option<serde_json::Value>,
}

fn read_toml(path: &Path) -> anyhow::Result<TomlConfig> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let table: toml::Table =
        toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    let mut json = serde_json::to_value(table)
        .with_context(|| format!("reading {} (dates are not config values)", path.display()))?;
    let map = json
        .as_object_mut()
        .ok_or_else(|| anyhow::anyhow!("{}: not a table", path.display()))?;
    let ppo = map.remove("ppo");
    let env = map.remove("env");
    for (name, section) in [("ppo", &ppo), ("env", &env)] {
        if let Some(v) = section
            && !v.is_object()
        {
            anyhow::bail!("{}: '{name}' must be a table ([{name}])", path.display());
        }
    }
    let mut run: RunOptions = merge(RunOptions::default(), json, &path.display().to_string())?;
    // Paths in the file are relative to the file, so a config works from any directory.
    let base = path.parent().unwrap_or(Path::new(""));
    let rebase = |p: &mut PathBuf| {
        if p.is_relative() {
            *p = base.join(&*p);
        }
    };
    run.data.iter_mut().for_each(rebase);
    if let Some(out) = &mut run.out {
        rebase(out);
    }
    Ok(TomlConfig { run, ppo, env })
}

/// Everything a run needs, after the config sources are combined.
struct Run {
    device: String,
    total_timesteps: usize,
    out: PathBuf,
    memory_fraction: f64,
    data: DataSource,
    eval_every: usize,
    objective: Objective,
    ppo: PpoConfig,
    env: EnvConfig,
}

impl Run {
    fn from_args(args: &TrainArgs) -> anyhow::Result<Self> {
        let toml = args.config.as_deref().map(read_toml).transpose()?;
        let file = toml.as_ref().map(|t| t.run.clone()).unwrap_or_default();
        let cfg_name = args
            .config
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default();

        let (mut ppo, env, data) = match &args.resume {
            Some(dir) => {
                if let Some(t) = &toml {
                    anyhow::ensure!(
                        t.ppo.is_none() && t.env.is_none() && t.run.data.is_empty(),
                        "{cfg_name}: --resume trains on with the checkpoint's [ppo], [env] and \
                         data; remove them from the file"
                    );
                }
                let ppo = read_json(&dir.join("ppo.json"), PpoConfig::new())?;
                let env = read_json(&dir.join(ENV_FILE), EnvConfig::new())?;
                let data = read_json(&dir.join(DATA_FILE), DataSource::default())?;
                (ppo, env, data)
            }
            None => {
                let mut ppo = PpoConfig::new();
                let mut env = EnvConfig::new();
                if let Some(t) = &toml {
                    if let Some(v) = &t.ppo {
                        ppo = merge(ppo, v.clone(), &format!("{cfg_name} [ppo]"))?;
                    }
                    if let Some(v) = &t.env {
                        env = merge(env, v.clone(), &format!("{cfg_name} [env]"))?;
                    }
                }
                if let Some(p) = &args.ppo {
                    ppo = read_json(p, ppo)?;
                }
                if let Some(p) = &args.env {
                    env = read_json(p, env)?;
                }
                let (paths, synthetic) = if !args.data.is_empty() || args.synthetic_bars.is_some() {
                    (args.data.clone(), args.synthetic_bars)
                } else {
                    (file.data.clone(), file.synthetic_bars)
                };
                anyhow::ensure!(
                    paths.is_empty() || synthetic.is_none(),
                    "{cfg_name}: give data or synthetic_bars, not both"
                );
                (ppo, env, DataSource::new(&paths, synthetic)?)
            }
        };

        // The precision flag or top-level option wins; otherwise the PPO config's (f32 unless
        // [ppo] or a resumed checkpoint says otherwise).
        if let Some(name) = args.precision.clone().or(file.precision) {
            ppo.precision = name
                .parse()
                .map_err(|e: String| anyhow::anyhow!("precision: {e}"))?;
        }
        let objective_name = args
            .objective
            .clone()
            .or(file.objective)
            .unwrap_or_else(|| Objective::default().to_string());
        let objective: Objective = objective_name
            .parse()
            .map_err(|e: String| anyhow::anyhow!("objective: {e}"))?;
        let out = args
            .out
            .clone()
            .or(file.out)
            .or_else(|| args.resume.clone())
            .ok_or_else(|| {
                anyhow::anyhow!("no checkpoint directory: give --out DIR (or `out` in --config)")
            })?;
        Ok(Self {
            device: args
                .device
                .clone()
                .or(file.device)
                .unwrap_or_else(|| "cpu".into()),
            total_timesteps: args
                .total_timesteps
                .or(file.total_timesteps)
                .unwrap_or(100_000),
            out,
            memory_fraction: args
                .memory_fraction
                .or(file.memory_fraction)
                .unwrap_or(DEFAULT_MEMORY_FRACTION),
            data,
            eval_every: args.eval_every.or(file.eval_every).unwrap_or(0),
            objective,
            ppo,
            env,
        })
    }
}

pub fn run(args: TrainArgs) -> anyhow::Result<()> {
    let run = Run::from_args(&args)?;
    let spec: DeviceSpec = run.device.parse()?;
    let device = open(spec)?;
    let data = run.data.load(&run.env)?;
    if !args.json {
        println!("data: {}", data.about);
    }
    let env = CpuVecEnv::new(
        run.env.clone(),
        data.dataset.clone(),
        data.split.train.clone(),
    )?;

    // Refuse a run that cannot fit before allocating anything large.
    let estimate = MemoryEstimate::of(
        &run.ppo,
        env.n_envs(),
        env.obs_dim(),
        env.action_dim(),
        0, // the CPU env reads the dataset in place in host memory
    );
    let budget = match host_memory_bytes() {
        Some(bytes) if spec == DeviceSpec::Cpu => {
            let budget = MemoryBudget::new(bytes, run.memory_fraction, 1)?;
            budget.check(&estimate)?;
            Some(budget)
        }
        _ => None,
    };

    let mut trainer = Trainer::new(run.ppo.clone(), HostEnv::new(env, &device), &device)?;
    if let Some(b) = budget {
        trainer = trainer.with_memory_budget(b);
    }
    if run.eval_every > 0 {
        trainer = trainer.with_evaluation(PeriodicEval {
            every: run.eval_every,
            split: EvalSplit::new(
                "validation",
                data.dataset.clone(),
                data.split.validation.clone(),
                &run.env,
            ),
            objective: run.objective,
        })?;
    }
    if let Some(dir) = &args.resume {
        checkpoint::resume(dir, &mut trainer)?;
        if !args.json {
            println!(
                "resuming {} at {} samples",
                dir.display(),
                trainer.timesteps()
            );
        }
    }
    let start_steps = trainer.timesteps();
    let bar = (!args.json).then(|| {
        let bar = ProgressBar::new((start_steps + run.total_timesteps) as u64);
        bar.set_style(
            ProgressStyle::with_template("{bar:40} {pos}/{len} samples {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar.set_position(start_steps as u64);
        bar
    });
    let report = trainer.learn(run.total_timesteps, &mut |event| {
        if args.json {
            if let Ok(line) = serde_json::to_string(&event) {
                println!("{line}");
            }
            return;
        }
        if let Some(bar) = &bar {
            show(bar, event);
        }
    })?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    checkpoint::save(&run.out, &trainer)?;
    let write = |name: &str, text: String| {
        let path = run.out.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))
    };
    write(ENV_FILE, serde_json::to_string_pretty(&run.env)?)?;
    write(DATA_FILE, serde_json::to_string_pretty(&run.data)?)?;
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        println!(
            "trained {} samples ({} in total) in {} updates, {:.1} s ({:.0} samples/s); checkpoint in {}",
            report.timesteps - start_steps,
            report.timesteps,
            report.updates,
            report.elapsed_s,
            report.samples_per_second,
            run.out.display()
        );
    }
    Ok(())
}

/// One event on the progress bar.
fn show(bar: &ProgressBar, event: TrainEvent) {
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
        TrainEvent::Evaluation {
            update, summary, ..
        } => say(format!(
            "eval   {update:>4}  {} {:>8.4}  sharpe {:>6.3} (equal weight {:>6.3})  \
             return {:>7.2} % (equal weight {:>7.2} %)  on {} bars of {}",
            summary.objective_name,
            summary.objective,
            summary.agent.sharpe,
            summary.equal_weight.sharpe,
            100.0 * summary.agent.total_return,
            100.0 * summary.equal_weight.total_return,
            summary.bars,
            summary.split
        )),
        _ => {}
    }
}
