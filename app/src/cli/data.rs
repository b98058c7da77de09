//! `tradetune data inspect|synth`: look at market files, make synthetic ones.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};
use tradetune_engine::market::DatasetConfig;
use tradetune_engine::market::inspect::inspect;
use tradetune_engine::market::synth::{self, SynthConfig};
use tradetune_engine::market::time::{format_duration, format_timestamp, parse_timestamp};

#[derive(Debug, Subcommand)]
pub enum DataCommand {
    /// Assets, bars, date range, bar length, gaps, and the dataset the files make (alignment,
    /// split, feature ranges). With no file: the bundled sample.
    Inspect(InspectArgs),
    /// Writes a seeded synthetic market (correlated returns, volatility regimes, jumps, volume)
    /// as one long CSV that `data inspect` and training read back.
    Synth(SynthArgs),
}

#[derive(Debug, Args)]
pub struct InspectArgs {
    /// Market files: one CSV per asset, a long CSV with a ticker column, or Binance kline
    /// exports; gzip or plain.
    pub files: Vec<PathBuf>,
    /// Assets to build the dataset from, comma-separated (default: all; for the bundled sample
    /// AAPL, GOOG, IBM, MSFT).
    #[arg(long, value_delimiter = ',')]
    pub assets: Vec<String>,
    /// Print JSON instead of tables.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct SynthArgs {
    /// Number of assets.
    #[arg(long, default_value_t = 10)]
    pub assets: usize,
    /// Number of bars per asset.
    #[arg(long, default_value_t = 10_000)]
    pub bars: usize,
    /// Bar length in seconds (300 = 5 minutes, 86400 = daily).
    #[arg(long, default_value_t = 300)]
    pub bar_seconds: i64,
    /// Time of the first bar (ISO date or date-time, or Unix seconds).
    #[arg(long, default_value = "2020-01-01")]
    pub start: String,
    /// Random seed: the same seed gives the same file.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Pairwise correlation of the assets' returns, in [0, 1).
    #[arg(long, default_value_t = 0.5)]
    pub correlation: f64,
    /// Mean annualised volatility.
    #[arg(long, default_value_t = 0.6)]
    pub annual_vol: f64,
    /// Output file; gzip-compressed when it ends in .gz.
    #[arg(long, default_value = "synthetic.csv.gz")]
    pub out: PathBuf,
    /// Print a JSON summary instead of text.
    #[arg(long)]
    pub json: bool,
}

pub fn run(command: DataCommand) -> anyhow::Result<()> {
    match command {
        DataCommand::Inspect(args) => run_inspect(args),
        DataCommand::Synth(args) => run_synth(args),
    }
}

fn run_inspect(args: InspectArgs) -> anyhow::Result<()> {
    let config = DatasetConfig {
        paths: args.files.clone(),
        assets: args.assets,
        ..DatasetConfig::default()
    };
    let report = inspect(&args.files, &config)?;
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        out!("{report}");
    }
    // Readable files that make no dataset are still a failure for scripts.
    if let Some(e) = report.dataset_error {
        anyhow::bail!("the files cannot make a dataset: {e}");
    }
    Ok(())
}

fn run_synth(args: SynthArgs) -> anyhow::Result<()> {
    let start = parse_timestamp(&args.start).map_err(|e| anyhow::anyhow!("--start: {e}"))?;
    let cfg = SynthConfig {
        assets: args.assets,
        bars: args.bars,
        bar_seconds: args.bar_seconds,
        start,
        seed: args.seed,
        correlation: args.correlation,
        annual_vol: args.annual_vol,
        ..SynthConfig::default()
    };
    // Refused before the bars are made (minutes, for a long market), not when written.
    if args.out.is_dir() {
        anyhow::bail!(
            "--out {}: is a folder: give a file name (market.csv, or market.csv.gz to compress)",
            args.out.display()
        );
    }
    if let Some(why) = tradetune_engine::market::source::database_in_the_way(&args.out) {
        anyhow::bail!("--out {}: {why}", args.out.display());
    }
    let t0 = std::time::Instant::now();
    let bars = synth::generate(&cfg)?;
    let generated = t0.elapsed();
    synth::write_long_csv(&args.out, &bars).context("writing the bars")?;
    let written = t0.elapsed() - generated;
    let bytes = std::fs::metadata(&args.out).map(|m| m.len()).unwrap_or(0);
    let last = start + (cfg.bars as i64 - 1) * cfg.bar_seconds;
    if args.json {
        let v = serde_json::json!({
            "out": args.out,
            "bytes": bytes,
            "config": cfg,
            "first": format_timestamp(start),
            "last": format_timestamp(last),
            "generate_seconds": generated.as_secs_f64(),
            "write_seconds": written.as_secs_f64(),
        });
        outln!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        outln!(
            "wrote {} ({:.1} MB): {} assets × {} bars of {}, {} to {}, seed {}",
            args.out.display(),
            bytes as f64 / 1e6,
            cfg.assets,
            cfg.bars,
            format_duration(cfg.bar_seconds),
            format_timestamp(start),
            format_timestamp(last),
            cfg.seed
        );
        outln!(
            "generated in {:.2} s ({:.1} M bars/s), written in {:.2} s",
            generated.as_secs_f64(),
            (cfg.assets * cfg.bars) as f64 / generated.as_secs_f64().max(1e-9) / 1e6,
            written.as_secs_f64()
        );
    }
    Ok(())
}
