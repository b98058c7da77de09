//! `tradetune bench env|sampler|train|gpu|matmul|storage`: throughput of the hot paths and the sampler's quality,
//! printed with their configuration.

use std::time::Duration;

use clap::{Args, Subcommand};
use tradetune_engine::env::bench::EnvBenchResult;
mod gpu;
mod matmul;
mod storage;
mod train;

use tradetune_engine::study::bench::{
    BenchFunction, SamplerBenchConfig, SamplerBenchReport, SamplerKind, run_sampler_bench,
};

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Environment steps per second (one env advancing one bar, all assets).
    Env(EnvArgs),
    /// Sampler quality (median best value over seeds vs Optuna 5.0's TPE) and overhead.
    Sampler(SamplerArgs),
    /// PPO training samples per second after a warm-up update (min/median/max of --repeat runs), with the
    /// phase split and the update's GFLOP/s against a matmul probe; with --peer, a peer
    /// (Stable-Baselines3 on the Python port of the env) measured in the same run, interleaved.
    Train(TrainArgs),
    /// Study storage under load: trials per second claimed and finished by concurrent workers
    /// with an instant objective, and the time to open a study and read all its trials, on
    /// each --storage (SQLite and PostgreSQL side by side); with --peer, Optuna's own client
    /// on the same database in the same run, interleaved.
    Storage(storage::StorageArgs),
    /// For a GPU owner: the bundled GPU presets' configurations shrunk to about a minute, with
    /// the environment on the host and on the device, in f32 and f16, side by side: the cold
    /// first update and the steady samples/s, what was compiled and autotuned, kernel launches
    /// per env step, policy step and minibatch, syncs per update, the phase split, the matmul
    /// probe, the device's memory pool and the GPU utilisation and memory sampled meanwhile
    /// (NVML or amdgpu); with --peer, a PyTorch peer on the same shapes in the same run.
    Gpu(GpuArgs),
    /// Every matmul routine burn's autotune chooses among (cubek's naive, unit, gemm, vector
    /// and cooperative-matrix routines), and the autotuned choice, on each product an update
    /// of the configurations runs (forward, weight and input gradients, in their layouts):
    /// GFLOP/s with products queued back to back, the first call's compile time, each answer
    /// checked against autotune's; then what one minibatch's products take at autotune's rates
    /// against the best routines', and what the device offers them (planes, cooperative
    /// matrices).
    Matmul(MatmulArgs),
}

#[derive(Debug, Args)]
pub struct MatmulArgs {
    /// Device: wgpu (wgpu's default adapter) or wgpu:N (the N-th discrete GPU).
    #[arg(long, default_value = "wgpu")]
    pub device: String,
    /// Configurations whose update products are measured (as `bench gpu`'s).
    #[arg(long, value_delimiter = ',', default_value = "rtx4080,rx7900gre")]
    pub configs: Vec<String>,
    /// Precisions (those the device lacks are skipped with a note).
    #[arg(long, value_delimiter = ',', default_value = "f32,f16")]
    pub precisions: Vec<String>,
    /// Only these routines (names as `--list` prints them); all by default.
    #[arg(long, value_delimiter = ',')]
    pub routines: Vec<String>,
    /// Print the routines' names and exit.
    #[arg(long)]
    pub list: bool,
    /// Print JSON (the device's features, every product's sweep, the minibatch summaries).
    #[arg(long)]
    pub json: bool,
}

/// A number of seconds, from zero to a year.
fn seconds(text: &str) -> Result<f64, String> {
    const YEAR: f64 = 365.0 * 86_400.0;
    match text.parse::<f64>() {
        Ok(s) if (0.0..=YEAR).contains(&s) => Ok(s),
        _ => Err(format!(
            "'{text}' is not a number of seconds from 0 to {YEAR} (a year)"
        )),
    }
}

#[derive(Debug, Args)]
pub struct GpuArgs {
    /// Device: wgpu (wgpu's default adapter), wgpu:N (the N-th discrete GPU), or cpu.
    #[arg(long, default_value = "wgpu")]
    pub device: String,
    /// Configurations: rtx4080 (32 envs, [2048, 1024, 512], batch 1024), rx7900gre (16 envs,
    /// [768, 768, 768], batch 4096), both with 256-step rollouts; small, large, tiny, tiny_deep
    /// (tiny with the presets' three hidden layers).
    #[arg(long, value_delimiter = ',', default_value = "rtx4080,rx7900gre")]
    pub configs: Vec<String>,
    /// Environment placements to compare: host, device.
    #[arg(long, value_delimiter = ',', default_value = "host,device")]
    pub placements: Vec<String>,
    /// Precisions to compare (those the device lacks are skipped with a note).
    #[arg(long, value_delimiter = ',', default_value = "f32,f16")]
    pub precisions: Vec<String>,
    /// How a rollout runs its policy steps, to compare: direct (each step's launches prepared
    /// one by one), replay (captured once a run and replayed, as
    /// `TRADETUNE_REPLAY_POLICY=1` makes trials do).
    #[arg(long, value_delimiter = ',', default_value = "direct")]
    pub policy_steps: Vec<String>,
    /// How an update runs its minibatches, to compare: direct (each minibatch's launches
    /// prepared one by one), replay (captured once a run and replayed, as
    /// `TRADETUNE_REPLAY_UPDATE=1` makes trials do).
    #[arg(long, value_delimiter = ',', default_value = "direct")]
    pub minibatches: Vec<String>,
    /// Updates measured per run, after one warm-up update (default 1).
    #[arg(long)]
    pub updates: Option<usize>,
    /// A PyTorch peer measured in the same run: the Python interpreter of a venv with torch
    /// (benches/peers/README.md). It runs the built-in CleanRL-style script
    /// (benches/peers/cleanrl_ppo.py) on each configuration, the model on torch's CUDA or ROCm
    /// device and the numpy env on the CPU, in f32 with TF32 and in bf16 autocast.
    #[arg(long, value_name = "PYTHON")]
    pub peer: Option<std::path::PathBuf>,
    /// The peer's torch device (default cuda; `cpu` where torch has no GPU); only with --peer.
    #[arg(long, default_value = "cuda", requires = "peer")]
    pub peer_device: String,
    /// The matmul probe's square sizes: n×n by n×n products in f32, whose best rate is the
    /// peak the update's GFLOP/s is held against (smaller sizes probe faster on a slow device).
    #[arg(long, value_delimiter = ',', default_value = "256,512,1024")]
    pub probe_sizes: Vec<usize>,
    /// Seconds for the runs (a borrowed card's minutes): a run, ours or the peer's, that would
    /// start later is skipped and named, a peer's run still going then is stopped, and the
    /// matmul probe and the lines under the table are printed all the same. No limit by
    /// default.
    #[arg(long, value_name = "SECONDS", value_parser = seconds)]
    pub deadline: Option<f64>,
    /// Print JSON (an object: the device, the matmul probe, the runs and the peer's runs)
    /// instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct TrainArgs {
    /// Device: cpu, wgpu, wgpu:N, cuda:N, rocm:N (see `tradetune devices`).
    #[arg(long, default_value = "cpu")]
    pub device: String,
    /// Compute precision: f32, bf16 or f16.
    #[arg(long, default_value = "f32")]
    pub precision: String,
    /// Configurations: small (nets 64-64, 8 envs, n_steps 256, batch 256, 4 epochs), large
    /// (pi = vf = [2048, 1024, 512], batch 1024), tiny_rollout (nets 64-64, 8 envs, n_steps 32,
    /// batch 256, 20 epochs), tiny (a smoke test), tiny_deep (tiny with three hidden layers),
    /// comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "small,large")]
    pub configs: Vec<String>,
    /// Updates measured per run, after one warm-up update (default: 3 small, 1 large, 12
    /// tiny_rollout).
    #[arg(long)]
    pub updates: Option<usize>,
    /// The matmul probe's square sizes: n×n by n×n products in f32, whose best rate is the
    /// peak the update's GFLOP/s is held against (smaller sizes probe faster on a slow device).
    #[arg(long, value_delimiter = ',', default_value = "256,512,1024")]
    pub probe_sizes: Vec<usize>,
    /// Runs of each configuration (each side), reported as min/median/max.
    #[arg(long, default_value_t = 3)]
    pub repeat: usize,
    /// A peer to measure in the same run: the Python interpreter of a venv with
    /// Stable-Baselines3 and torch (benches/peers/README.md). It runs the built-in
    /// benches/peers/sb3_ppo.py (or --peer-script) on the same configurations, interleaved
    /// with ours; the ratio is printed only then.
    #[arg(long, value_name = "PYTHON")]
    pub peer: Option<std::path::PathBuf>,
    /// The peer's script instead of the built-in sb3_ppo.py; it gets the configuration as
    /// `--n-envs --n-steps --batch-size --n-epochs --net --assets --features --updates
    /// --threads` and prints one JSON line (peer, versions, threads, samples, seconds,
    /// samples_per_second).
    #[arg(long, value_name = "SCRIPT")]
    pub peer_script: Option<std::path::PathBuf>,
    /// Threads of the peer (torch.set_num_threads; default: as many as ours).
    #[arg(long)]
    pub peer_threads: Option<usize>,
    /// Also run ours with every update through burn's autodiff (the path GPUs take) instead
    /// of the CPU's host minibatch step, interleaved with the other runs, and print how many
    /// times faster the host step's runs are.
    #[arg(long)]
    pub compare_burn_update: bool,
    /// Print JSON (one array of results) instead of a table.
    #[arg(long)]
    pub json: bool,
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
    /// Seconds to measure each configuration, 0.05 to 600.
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
        BenchCommand::Train(args) => train::bench_train(args),
        BenchCommand::Storage(args) => storage::bench_storage(args),
        BenchCommand::Gpu(args) => gpu::bench_gpu(args),
        BenchCommand::Matmul(args) => matmul::bench_matmul(args),
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
        errln!(
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
        outln!(
            "{}",
            serde_json::to_string_pretty(&json_report(&report, comparable))?
        );
    } else {
        out!("{}", report.to_table());
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
    outln!();
    if !comparable {
        outln!(
            "Optuna's figures are medians over 10 seeds × 100 trials; run with --trials 100 --seeds 10 to compare"
        );
    }
    for r in report
        .quality
        .iter()
        .filter(|r| comparable && r.sampler != SamplerKind::Random)
    {
        outln!(
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
        outln!(
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
    // Bounded as a study's env.n_envs is, and the market the bench makes (bars × assets ×
    // features numbers) to what a machine holds: larger asked for terabytes and aborted.
    anyhow::ensure!(
        args.envs.iter().all(|n| *n <= 65_536),
        "--envs: at most 65536 environments (env.n_envs's range)"
    );
    anyhow::ensure!(
        args.assets.saturating_mul(args.features) <= 1 << 20,
        "--assets × --features: at most 1048576 together (asked {} × {})",
        args.assets,
        args.features
    );
    // Refused rather than clamped: NaN would panic, and a value outside the range would be
    // measured as another without a word.
    anyhow::ensure!(
        args.seconds.is_finite() && (0.05..=600.0).contains(&args.seconds),
        "--seconds: must be 0.05 to 600 seconds, got {}",
        args.seconds
    );
    let min_time = Duration::from_secs_f64(args.seconds);
    if cfg!(debug_assertions) && !args.json {
        errln!("note: this is a debug build; measure with `cargo run --release -- bench env`");
    }
    let results = tradetune_engine::env::bench::run_cpu(
        &args.envs,
        args.assets,
        args.features,
        args.lookback,
        min_time,
    )?;
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&results)?);
    } else {
        print_table(&results);
    }
    Ok(())
}

fn print_table(results: &[EnvBenchResult]) {
    outln!(
        "{:<14} {:>7} {:>7} {:>9} {:>9} {:>16}",
        "impl",
        "n_envs",
        "assets",
        "features",
        "lookback",
        "env-steps/s"
    );
    for r in results {
        outln!(
            "{:<14} {:>7} {:>7} {:>9} {:>9} {:>16.0}",
            r.implementation,
            r.n_envs,
            r.n_assets,
            r.n_features,
            r.lookback,
            r.env_steps_per_sec
        );
    }
}

/// The machine's load averages (1, 5, 15 min) from /proc/loadavg, where there is one.
fn load_average() -> Option<String> {
    let s = std::fs::read_to_string("/proc/loadavg").ok()?;
    Some(s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
}

/// The CPU's model name from /proc/cpuinfo, where there is one.
fn cpu_model() -> Option<String> {
    let s = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    s.lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_owned())
}

/// The last `n` lines a peer process wrote to stderr, for its error message.
fn stderr_tail(out: &std::process::Output, n: usize) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr);
    let tail: Vec<&str> = stderr.lines().rev().take(n).collect();
    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
}

/// The last non-empty line of a peer's output: its JSON result.
fn last_line(stdout: &str) -> Option<&str> {
    stdout.lines().rev().find(|l| !l.trim().is_empty())
}

/// `--probe-sizes` checked: at least one size, each from 16 to 8192 (an 8192² product is 1.1
/// TFLOP: milliseconds on a card, minutes of autotune on a software adapter).
fn probe_sizes(sizes: &[usize]) -> anyhow::Result<&[usize]> {
    anyhow::ensure!(!sizes.is_empty(), "--probe-sizes: give at least one size");
    if let Some(n) = sizes.iter().find(|n| !(16..=8192).contains(*n)) {
        anyhow::bail!("--probe-sizes: {n} is outside 16..=8192");
    }
    Ok(sizes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--seconds nan` panicked in `Duration::from_secs_f64`, and 0 or -3 were measured as
    /// 0.05 s without a word: each is refused, naming the flag, before anything runs.
    #[test]
    fn bench_env_refuses_seconds_it_would_not_measure() {
        for bad in [f64::NAN, 0.0, -3.0, f64::INFINITY, 0.01, 601.0] {
            let e = bench_env(EnvArgs {
                envs: vec![1],
                assets: 1,
                features: 1,
                lookback: 1,
                seconds: bad,
                json: true,
            })
            .expect_err("refused")
            .to_string();
            assert!(e.contains("--seconds") && e.contains("got"), "{e}");
        }
    }
}
