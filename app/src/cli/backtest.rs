//! `tradetune backtest --checkpoint DIR [--split test|validation] [--data FILE…]
//! [--equity-csv FILE] [--json]`: the checkpoint's deterministic policy over a held-out split,
//! against the equal-weight buy-and-hold, with its metrics, the objective, and the two equity
//! curves as CSV.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use serde::Serialize;
use tradetune_engine::eval::{EvalReport, Metrics, Objective};
use tradetune_engine::market::time::format_timestamp;

use tradetune_engine::device::DeviceSpec;
use tradetune_engine::front::backtest::{Backtest, SplitPart, backtest, recorded_objective, table};

#[derive(Debug, Args)]
pub struct BacktestArgs {
    /// Checkpoint directory written by `tradetune train --out DIR`.
    #[arg(long, value_name = "DIR")]
    pub checkpoint: PathBuf,
    /// Split to evaluate on: test (default), validation (or val), train.
    #[arg(long, default_value = "test")]
    pub split: SplitPart,
    /// Market files to evaluate on instead of the ones the checkpoint was trained on (same
    /// assets, in the same order; cut by the checkpoint's split, keeping the assets it kept;
    /// the scaler is refitted on their train split).
    #[arg(long = "data", value_name = "FILE")]
    pub data: Vec<PathBuf>,
    /// Write the equity curves (timestamp, agent_equity, equal_weight_equity) to this CSV.
    #[arg(long, value_name = "FILE")]
    pub equity_csv: Option<PathBuf>,
    /// Objective: sharpe_excess, sharpe, sortino_excess, sortino, excess_return, total_return.
    /// Default: the one the checkpoint was trained for (recorded with it, as the app's Backtest
    /// panel uses), else sharpe_excess.
    #[arg(long)]
    pub objective: Option<Objective>,
    /// Device to run the policy on (see `tradetune devices`).
    #[arg(long, default_value = "cpu")]
    pub device: DeviceSpec,
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
    /// What to know about the data: changed since training and cut at the recorded dates,
    /// or an older checkpoint's that cannot be checked.
    notes: &'a [String],
}

pub fn run(args: BacktestArgs) -> anyhow::Result<()> {
    let dir = &args.checkpoint;
    let objective = args
        .objective
        .or_else(|| recorded_objective(dir))
        .unwrap_or_default();
    let Backtest {
        report,
        timesteps,
        about,
        notes,
    } = backtest(dir, args.split, &args.data, objective, args.device)
        .with_context(|| format!("backtest of --checkpoint {}", dir.display()))?;
    for note in &notes {
        errln!("note: {note}");
    }
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
            notes: &notes,
        };
        outln!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    outln!(
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
    out!("{}", table(&report));
    if let Some(path) = &args.equity_csv {
        outln!("equity curves: {}", path.display());
    }
    Ok(())
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
    // Written whole under a temporary name, then renamed over the file: a failed or
    // interrupted write leaves the previous curves.
    tradetune_engine::front::export::write_whole(path, s.as_bytes())
        .with_context(|| format!("--equity-csv {}", path.display()))
}
