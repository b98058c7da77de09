//! `tradetune backtest --checkpoint DIR [--split test|validation] [--data FILE…]
//! [--equity-csv FILE] [--json]`: the checkpoint's deterministic policy over a held-out split,
//! against the equal-weight buy-and-hold, with its metrics, the objective, and the two equity
//! curves as CSV.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use serde::Serialize;
use tradetune_engine::device::{DeviceSpec, open};
use tradetune_engine::env::EnvConfig;
use tradetune_engine::eval::{EvalReport, EvalSplit, Metrics, Objective};
use tradetune_engine::market::time::format_timestamp;
use tradetune_engine::ppo::checkpoint;
use tradetune_engine::ppo::evaluate_policy;

use crate::cli::run_config::{DATA_FILE, DataSource, ENV_FILE};

#[derive(Debug, Args)]
pub struct BacktestArgs {
    /// Checkpoint directory written by `tradetune train --out DIR`.
    #[arg(long, value_name = "DIR")]
    pub checkpoint: PathBuf,
    /// Split to evaluate on: test (default), validation (or val), train.
    #[arg(long, default_value = "test")]
    pub split: String,
    /// Market files to evaluate on instead of the ones the checkpoint was trained on (same
    /// assets, in the same order; the scaler is refitted on their train split).
    #[arg(long = "data", value_name = "FILE")]
    pub data: Vec<PathBuf>,
    /// Write the equity curves (timestamp, agent_equity, equal_weight_equity) to this CSV.
    #[arg(long, value_name = "FILE")]
    pub equity_csv: Option<PathBuf>,
    /// Objective: sharpe_excess (default), sharpe, sortino_excess, sortino, excess_return,
    /// total_return.
    #[arg(long, default_value = "sharpe_excess")]
    pub objective: String,
    /// Device to run the policy on (see `tradetune devices`).
    #[arg(long, default_value = "cpu")]
    pub device: String,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// `--json` output: the report without its curves, plus where it came from.
#[derive(Debug, Serialize)]
struct BacktestJson<'a> {
    checkpoint: &'a Path,
    timesteps: usize,
    split: &'a str,
    bars: usize,
    start: String,
    end: String,
    periods_per_year: f64,
    agent: Metrics,
    equal_weight: Metrics,
    objective_name: Objective,
    objective: f64,
    equity_csv: Option<&'a Path>,
}

/// A checkpoint file that must exist, or an error naming it.
fn required(dir: &Path, name: &str) -> anyhow::Result<PathBuf> {
    let path = dir.join(name);
    anyhow::ensure!(
        path.is_file(),
        "checkpoint {}: {} is missing (is this a directory written by `tradetune train --out`?)",
        dir.display(),
        path.display()
    );
    Ok(path)
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> anyhow::Result<T> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// A backtest's result: the report, the checkpoint's sample count, and the data it ran on.
pub struct Backtest {
    /// Metrics, objective and equity curves.
    pub report: EvalReport,
    /// Samples the checkpoint was trained on.
    pub timesteps: usize,
    /// The data, for people.
    pub about: String,
}

/// Evaluates the checkpoint in `dir` on `split` (test, validation/val, train), on the data it
/// was trained on or on `data`; errors name the missing or corrupt file.
pub fn backtest(
    dir: &Path,
    split: &str,
    data: &[PathBuf],
    objective: Objective,
    device: &str,
) -> anyhow::Result<Backtest> {
    anyhow::ensure!(
        dir.is_dir(),
        "checkpoint directory {} does not exist",
        dir.display()
    );
    for name in ["model.bpk", "ppo.json", "state.json"] {
        required(dir, name)?;
    }
    let env: EnvConfig = read_json(&required(dir, ENV_FILE)?)?;
    let source = if data.is_empty() {
        read_json(&required(dir, DATA_FILE)?)?
    } else {
        DataSource::new(data, None)?
    };
    let spec: DeviceSpec = device.parse()?;
    let device = open(spec)?;
    let ckpt = checkpoint::load(dir, &device)?;
    let loaded = source.load(&env)?;
    let (name, range) = match split {
        "test" => ("test", loaded.split.test.clone()),
        "validation" | "val" => ("validation", loaded.split.validation.clone()),
        "train" => ("train", loaded.split.train.clone()),
        other => anyhow::bail!("--split {other}: use test, validation (val) or train"),
    };
    let eval_split = EvalSplit::new(name, loaded.dataset.clone(), range, &env);
    let report = evaluate_policy(
        &ckpt.model,
        &ckpt.state.normalization,
        &ckpt.config,
        &eval_split,
        objective,
    )
    .with_context(|| format!("backtesting {}", dir.display()))?;
    Ok(Backtest {
        report,
        timesteps: ckpt.state.timesteps,
        about: loaded.about,
    })
}

pub fn run(args: BacktestArgs) -> anyhow::Result<()> {
    let dir = &args.checkpoint;
    let objective: Objective = args
        .objective
        .parse()
        .map_err(|e: String| anyhow::anyhow!("--objective: {e}"))?;
    let Backtest {
        report,
        timesteps,
        about,
    } = backtest(dir, &args.split, &args.data, objective, &args.device)?;
    if let Some(path) = &args.equity_csv {
        write_equity_csv(path, &report)?;
    }
    let first = report.timestamps.first().copied().unwrap_or_default();
    let last = report.timestamps.last().copied().unwrap_or_default();
    if args.json {
        let out = BacktestJson {
            checkpoint: dir,
            timesteps,
            split: &report.split,
            bars: report.bars,
            start: format_timestamp(first),
            end: format_timestamp(last),
            periods_per_year: report.periods_per_year,
            agent: report.agent,
            equal_weight: report.equal_weight,
            objective_name: report.objective_name,
            objective: report.objective,
            equity_csv: args.equity_csv.as_deref(),
        };
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    println!(
        "checkpoint {} ({} samples) on {}: {} split, {} .. {}, {} bars ({} bars a year)",
        dir.display(),
        timesteps,
        about,
        report.split,
        format_timestamp(first),
        format_timestamp(last),
        report.bars,
        report.periods_per_year
    );
    print!("{}", table(&report));
    if let Some(path) = &args.equity_csv {
        println!("equity curves: {}", path.display());
    }
    Ok(())
}

/// The metrics of agent and equal weight side by side, and the objective.
pub fn table(r: &EvalReport) -> String {
    let (a, e) = (&r.agent, &r.equal_weight);
    let pct = |v: f64| format!("{:.2} %", 100.0 * v);
    let num = |v: f64| format!("{v:.3}");
    let rows = [
        ("total return", pct(a.total_return), pct(e.total_return)),
        ("sharpe", num(a.sharpe), num(e.sharpe)),
        ("sortino", num(a.sortino), num(e.sortino)),
        ("max drawdown", pct(a.max_drawdown), pct(e.max_drawdown)),
        ("volatility", pct(a.volatility), pct(e.volatility)),
        ("turnover", num(a.turnover), num(e.turnover)),
        (
            "fees paid",
            format!("{:.2}", a.fees_paid),
            format!("{:.2}", e.fees_paid),
        ),
    ];
    let mut s = format!("{:<14} {:>14} {:>14}\n", "", "agent", "equal weight");
    for (name, x, y) in rows {
        s += &format!("{name:<14} {x:>14} {y:>14}\n");
    }
    s += &format!("objective {} = {:.4}\n", r.objective_name, r.objective);
    s
}

/// `timestamp,agent_equity,equal_weight_equity`, one row per bar.
fn write_equity_csv(path: &Path, r: &EvalReport) -> anyhow::Result<()> {
    let mut s = String::from("timestamp,agent_equity,equal_weight_equity\n");
    for ((t, a), e) in r
        .timestamps
        .iter()
        .zip(&r.agent_equity)
        .zip(&r.equal_weight_equity)
    {
        s += &format!("{},{a},{e}\n", format_timestamp(*t));
    }
    std::fs::write(path, s).with_context(|| format!("writing {}", path.display()))
}
