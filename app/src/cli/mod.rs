//! Headless subcommands. Each prints for people by default and JSON with `--json`.

pub mod backtest;
pub mod bench;
pub mod compare;
pub mod data;
pub mod devices;
pub mod eval;
pub mod install_desktop;
pub mod monitor;
pub mod run_config;
pub mod study;
pub mod train;
pub mod worker;

use clap::{Parser, Subcommand};

/// The version, and the GPU kernels' language this build compiles (`benches/gpu/run.sh` reads
/// it to tell a `vulkan` build from a default one).
pub const VERSION: &str = if cfg!(feature = "vulkan") {
    concat!(
        env!("CARGO_PKG_VERSION"),
        " (GPU: wgpu, SPIR-V kernels on Vulkan adapters, feature `vulkan`)"
    )
} else if cfg!(feature = "wgpu") {
    concat!(env!("CARGO_PKG_VERSION"), " (GPU: wgpu, WGSL kernels)")
} else {
    concat!(env!("CARGO_PKG_VERSION"), " (no GPU backend)")
};

/// TradeTune: train and tune reinforcement-learning trading agents on one machine.
#[derive(Debug, Parser)]
#[command(name = "tradetune", version = VERSION, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Close the window after drawing this many frames (smoke tests of the desktop program).
    #[arg(long, hide = true, value_name = "N")]
    pub exit_after_frames: Option<u64>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Market data: inspect files, generate synthetic data.
    #[command(subcommand)]
    Data(data::DataCommand),
    /// Benchmarks of the hot paths, printing throughput with their configuration.
    #[command(subcommand)]
    Bench(bench::BenchCommand),
    /// Live GPU, CPU and process telemetry, one line per device per sample, and/or a CSV log.
    Monitor(monitor::MonitorArgs),
    /// Train one PPO agent and write a checkpoint.
    Train(train::TrainArgs),
    /// Evaluate a checkpoint's policy on a held-out split against equal weight.
    Backtest(backtest::BacktestArgs),
    /// Two studies or trials side by side: duration, samples/s, outcomes, GPU use, objective.
    Compare(compare::CompareArgs),
    /// The devices this build can train on here, and why not where it cannot.
    Devices(devices::DevicesArgs),
    /// Install the desktop launcher and icon for the current user (double-click to start).
    InstallDesktop(install_desktop::InstallDesktopArgs),
    /// Hyperparameter studies: run (file or preset), create for workers, list, export; presets.
    #[command(subcommand)]
    Study(study::StudyCommand),
    /// Join a study recorded with `study create` in a shared database and run its trials
    /// until its budget is spent (one per machine; Ctrl-C fails the running trial and stops).
    Worker(worker::WorkerArgs),
    /// How much to trust the best of N trials: PBO (CSCV) and the deflated Sharpe ratio of a
    /// returns matrix.
    #[command(subcommand)]
    Eval(eval::EvalCommand),
}

/// A [`CompileStatus`](tradetune_engine::device::compiling::CompileStatus) as a JSON line of
/// `train --json` and `study run --json`: `{"event":"compiling","active":true,
/// "kernels_compiled":45,"autotune_runs":12,"seconds":18.0}`.
pub(crate) fn compiling_json(
    status: &tradetune_engine::device::compiling::CompileStatus,
) -> String {
    #[derive(serde::Serialize)]
    #[serde(tag = "event", rename_all = "snake_case")]
    enum Live<'a> {
        Compiling(&'a tradetune_engine::device::compiling::CompileStatus),
    }
    serde_json::to_string(&Live::Compiling(status)).unwrap_or_default()
}

/// Which compile statuses become lines where the output is not a terminal (no live line to
/// update): one every 10 s of a compiling that goes on that long, and the totals of one that
/// took a second or more, or was said while it went on.
#[derive(Debug, Default)]
pub(crate) struct CompileLines {
    /// When this compiling was last said, if it was.
    said: Option<std::time::Instant>,
}

impl CompileLines {
    /// What to print of `status` where there is no live line to update: every status as a JSON
    /// event with `json`, else the text of those [`Self::due`].
    pub(crate) fn plain(
        &mut self,
        status: &tradetune_engine::device::compiling::CompileStatus,
        json: bool,
    ) -> Option<String> {
        if json {
            Some(compiling_json(status))
        } else {
            self.due(status).then(|| status.to_string())
        }
    }

    /// Whether `status` is to be printed.
    pub(crate) fn due(
        &mut self,
        status: &tradetune_engine::device::compiling::CompileStatus,
    ) -> bool {
        if !status.active {
            return self.said.take().is_some() || status.worth_a_line();
        }
        let due = status.seconds >= 10.0
            && self
                .said
                .is_none_or(|t| t.elapsed() >= std::time::Duration::from_secs(10));
        if due {
            self.said = Some(std::time::Instant::now());
        }
        due
    }
}

/// Seconds with the digits that matter: `42 s`, `3.5 s`, `0.35 s`, `4.2 ms` (a compile time
/// of a few milliseconds is not "0.0 s").
pub(crate) fn seconds(s: f64) -> String {
    if s >= 10.0 {
        format!("{s:.0} s")
    } else if s >= 1.0 {
        format!("{s:.1} s")
    } else if s >= 0.01 {
        format!("{s:.2} s")
    } else {
        format!("{:.1} ms", s * 1e3)
    }
}

/// Runs `run` with a line on stderr while it goes (a terminal only; nothing elsewhere), saying
/// what runs and when the GPU compiles for it: `⠋ tiny f32 host: compiling 18 s: 45 kernels,
/// 12 autotuned`. For the benchmarks, whose stdout is a table printed as each run ends: the
/// line is gone before the run's row.
pub(crate) fn while_running<T>(what: String, run: impl FnOnce() -> T) -> T {
    use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
    use tradetune_engine::device::compiling::CompileTicker;
    const RUNNING: &str = "running";
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    if bar.is_hidden() {
        return run();
    }
    bar.set_style(
        ProgressStyle::with_template("{spinner} {prefix}: {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    bar.set_prefix(what);
    bar.set_message(RUNNING);
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    let shown = bar.clone();
    let ticker = CompileTicker::start(move |status| {
        shown.set_message(if status.active {
            status.short()
        } else {
            RUNNING.to_owned()
        });
    });
    let out = run();
    ticker.stop();
    bar.finish_and_clear();
    out
}

/// Runs one subcommand; the GPU cache's trouble, if a GPU found any and the command did not
/// say it itself, is said on stderr after it, and so are its reads and writes that failed and
/// were not said yet.
pub fn run(command: Command) -> anyhow::Result<()> {
    let result = run_command(command);
    // Before the caches' warnings: the queued work this runs may compile, autotune and store.
    crate::leave::finish_gpu_work();
    if let Some(line) = tradetune_engine::device::kernels::store_warning_once() {
        errln!("{line}");
    }
    if let Some(line) = tradetune_engine::device::cache_store::failures_warning_unsaid() {
        errln!("{line}");
    }
    result
}

fn run_command(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Data(c) => data::run(c),
        Command::Bench(c) => bench::run(c),
        Command::Monitor(a) => monitor::run(a),
        Command::Train(a) => train::run(a),
        Command::Backtest(a) => backtest::run(a),
        Command::Compare(a) => compare::run(a),
        Command::Devices(a) => devices::run(a),
        Command::InstallDesktop(a) => install_desktop::run(a),
        Command::Study(c) => study::run(c),
        Command::Worker(a) => worker::run(a),
        Command::Eval(c) => eval::run(c),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tradetune_engine::device::compiling::CompileStatus;

    fn status(active: bool, seconds: f64) -> CompileStatus {
        CompileStatus {
            active,
            kernels_compiled: 40,
            autotune_runs: 3,
            seconds,
            idle_s: 0.0,
        }
    }

    /// Where the output is no terminal: a long compiling said every 10 s and its totals; a
    /// short one only by its totals where it took a second or more; an evaluation's kernel
    /// not at all.
    #[test]
    fn compile_lines_say_long_compiling_and_totals_worth_a_line() {
        let mut lines = CompileLines::default();
        assert!(!lines.due(&status(true, 0.0)), "a compiling just begun");
        assert!(!lines.due(&status(true, 9.0)));
        assert!(lines.due(&status(true, 10.0)), "ten seconds in");
        assert!(!lines.due(&status(true, 11.0)), "not again within 10 s");
        // Totals of a compiling that was said, even a short one split off a long one.
        assert!(lines.due(&status(false, 0.5)));
        // A new short compiling: said by its totals only, and those only from a second on.
        assert!(!lines.due(&status(true, 0.0)));
        assert!(!lines.due(&status(false, 0.2)));
        assert!(lines.due(&status(false, 2.5)));
        let json: serde_json::Value =
            serde_json::from_str(&compiling_json(&status(false, 2.5))).unwrap();
        assert_eq!(json["event"], "compiling");
        assert_eq!(json["active"], false);
        assert_eq!(json["kernels_compiled"], 40);
        // With --json every status is an event; without, the text of those due.
        assert!(lines.plain(&status(true, 0.0), true).is_some());
        assert_eq!(lines.plain(&status(true, 0.0), false), None);
        assert_eq!(
            lines.plain(&status(false, 2.5), false).as_deref(),
            Some("compiled 40 GPU kernels and autotuned 3 operations in 2.5 s")
        );
    }
}
