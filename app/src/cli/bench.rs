//! `tradetune bench env|sampler`: throughput of the hot paths and the sampler's quality, printed
//! with their configuration.

use std::time::Duration;

use clap::{Args, Subcommand};
use tradetune_engine::env::bench::EnvBenchResult;
use tradetune_engine::study::bench::{
    BenchFunction, SamplerBenchConfig, SamplerBenchReport, SamplerKind, run_sampler_bench,
};

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Environment steps per second (one env advancing one bar, all assets).
    Env(EnvArgs),
    /// Sampler quality (median best value over seeds vs Optuna 5.0's TPE) and overhead.
    Sampler(SamplerArgs),
}

#[derive(Debug, Args)]
pub struct SamplerArgs {
    /// Trials per study for the quality figures (Optuna's reference figures: 100).
    #[arg(long, default_value_t = 100)]
    pub trials: usize,
    /// Studies (seeds 0, 1, …) per function and sampler (Optuna's reference figures: 10).
    #[arg(long, default_value_t = 10)]
    pub seeds: u64,
    /// Samplers to compare: tpe, tpe-univariate, tpe-optuna-clip, random.
    #[arg(long, value_delimiter = ',', default_value = "tpe,random")]
    pub samplers: Vec<String>,
    /// Length of the study whose last 100 suggestions give the per-trial overhead (0: skip).
    #[arg(long, default_value_t = 1000)]
    pub overhead_trials: usize,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
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
        BenchCommand::Sampler(args) => bench_sampler(args),
    }
}

/// Per-suggestion overhead target at ~1,000 trials (issue 4: Optuna spends 11–20 ms).
const OVERHEAD_TARGET_MS: f64 = 1.0;

fn bench_sampler(args: SamplerArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.trials > 0, "--trials must be at least 1");
    anyhow::ensure!(args.seeds > 0, "--seeds must be at least 1");
    let samplers = args
        .samplers
        .iter()
        .map(|name| {
            SamplerKind::ALL
                .into_iter()
                .find(|k| k.name() == name.trim())
                .ok_or_else(|| {
                    let valid: Vec<_> = SamplerKind::ALL.iter().map(|k| k.name()).collect();
                    anyhow::anyhow!(
                        "--samplers: unknown sampler '{name}' (valid: {})",
                        valid.join(", ")
                    )
                })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    if cfg!(debug_assertions) && !args.json {
        eprintln!(
            "note: this is a debug build; measure overhead with `cargo run --release -- bench sampler`"
        );
    }
    let cfg = SamplerBenchConfig {
        trials: args.trials,
        seeds: (0..args.seeds).collect(),
        functions: BenchFunction::ALL.to_vec(),
        samplers,
        overhead_trials: args.overhead_trials,
    };
    let report = run_sampler_bench(&cfg)?;
    // Optuna's figures are for 10 seeds × 100 trials; a verdict only means something then.
    let comparable = args.trials == 100 && args.seeds == 10;
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json_report(&report, comparable))?
        );
    } else {
        print!("{}", report.to_table());
        print_verdicts(&report, comparable);
    }
    Ok(())
}

/// The engine's report plus the verdicts against Optuna's figures and the overhead target.
fn json_report(report: &SamplerBenchReport, comparable: bool) -> serde_json::Value {
    let verdicts: Vec<_> = report
        .quality
        .iter()
        .map(|r| {
            serde_json::json!({
                "function": r.function.name(),
                "sampler": r.sampler.name(),
                "median_best": r.median_best,
                "optuna_reference": r.optuna_reference,
                "no_worse_than_optuna": comparable.then_some(r.median_best <= r.optuna_reference),
            })
        })
        .collect();
    serde_json::json!({
        "config": report.config,
        "quality": report.quality,
        "overhead": report.overhead,
        "optuna_reference_config": { "trials": 100, "seeds": 10 },
        "comparable_to_optuna": comparable,
        "verdicts": verdicts,
        "overhead_target_ms": OVERHEAD_TARGET_MS,
        "overhead_within_target": report
            .overhead
            .iter()
            .filter(|r| r.sampler == SamplerKind::Tpe)
            .all(|r| r.last_100_mean_ms <= OVERHEAD_TARGET_MS),
    })
}

fn print_verdicts(report: &SamplerBenchReport, comparable: bool) {
    println!();
    if !comparable {
        println!(
            "Optuna's figures are medians over 10 seeds × 100 trials; run with --trials 100 --seeds 10 to compare"
        );
    }
    for r in report
        .quality
        .iter()
        .filter(|r| comparable && r.sampler != SamplerKind::Random)
    {
        println!(
            "{:<12} {:<15} {:>10.4} vs Optuna {:>10.4}: {}",
            r.function.name(),
            r.sampler.name(),
            r.median_best,
            r.optuna_reference,
            if r.median_best <= r.optuna_reference {
                "no worse"
            } else {
                "WORSE"
            }
        );
    }
    for r in report
        .overhead
        .iter()
        .filter(|r| r.sampler == SamplerKind::Tpe)
    {
        println!(
            "{:<12} tpe overhead {:.3} ms/trial at {} trials (target ≤ {OVERHEAD_TARGET_MS} ms): {}",
            r.function.name(),
            r.last_100_mean_ms,
            r.trials,
            if r.last_100_mean_ms <= OVERHEAD_TARGET_MS {
                "ok"
            } else {
                "OVER"
            }
        );
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
