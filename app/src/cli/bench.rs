//! `tradetune bench env|...`: throughput of the hot paths, printed with their configuration.

use std::time::Duration;

use clap::{Args, Subcommand};
use tradetune_engine::env::bench::EnvBenchResult;

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Environment steps per second (one env advancing one bar, all assets).
    Env(EnvArgs),
}

#[derive(Debug, Args)]
pub struct EnvArgs {
    /// Numbers of environments to measure, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,8,32,256,1024,4096")]
    pub envs: Vec<usize>,
    /// Number of assets.
    #[arg(long, default_value_t = 7)]
    pub assets: usize,
    /// Number of features per asset.
    #[arg(long, default_value_t = 16)]
    pub features: usize,
    /// Bars of features per observation.
    #[arg(long, default_value_t = 1)]
    pub lookback: usize,
    /// Seconds to measure each configuration.
    #[arg(long, default_value_t = 1.0)]
    pub seconds: f64,
    /// Print JSON (one array of results) instead of a table.
    #[arg(long)]
    pub json: bool,
}

pub fn run(command: BenchCommand) -> anyhow::Result<()> {
    match command {
        BenchCommand::Env(args) => bench_env(args),
    }
}

fn bench_env(args: EnvArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.envs.iter().all(|n| *n > 0),
        "--envs: every number of environments must be at least 1"
    );
    anyhow::ensure!(
        args.assets > 0 && args.features > 0 && args.lookback > 0,
        "--assets, --features and --lookback must be at least 1"
    );
    let min_time = Duration::from_secs_f64(args.seconds.clamp(0.05, 600.0));
    if cfg!(debug_assertions) && !args.json {
        eprintln!("note: this is a debug build; measure with `cargo run --release -- bench env`");
    }
    let results = tradetune_engine::env::bench::run_cpu(
        &args.envs,
        args.assets,
        args.features,
        args.lookback,
        min_time,
    )?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&results)?);
    } else {
        print_table(&results);
    }
    Ok(())
}

fn print_table(results: &[EnvBenchResult]) {
    println!(
        "{:<14} {:>7} {:>7} {:>9} {:>9} {:>16}",
        "impl", "n_envs", "assets", "features", "lookback", "env-steps/s"
    );
    for r in results {
        println!(
            "{:<14} {:>7} {:>7} {:>9} {:>9} {:>16.0}",
            r.implementation, r.n_envs, r.n_assets, r.n_features, r.lookback, r.env_steps_per_sec
        );
    }
}
