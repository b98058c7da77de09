//! `tradetune train`: one PPO run on a dataset, with a progress bar (or `--json` events), a
//! memory check before it starts, optional periodic evaluation on the validation split, and a
//! checkpoint at the end (resumable with `--resume`).
//!
//! Where the configuration comes from: [`crate::cli::run_config`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use tradetune_engine::device::compiling::{CompileStatus, CompileTicker};
use tradetune_engine::device::kernels::{self, Kept, KernelCounts};
use tradetune_engine::device::memory::{MemoryBudget, host_memory_bytes};
use tradetune_engine::device::{DeviceSpec, check_precision, describe_spec, open};
use tradetune_engine::eval::EvalSplit;
use tradetune_engine::ppo::checkpoint;
use tradetune_engine::ppo::{PeriodicEval, PhaseTimes, TrainEvent, Trainer};
use tradetune_engine::study::ppo_trial::{PlacedEnv, TrainingRun};

pub use crate::cli::run_config::TrainArgs;
use crate::cli::run_config::{DATA_FILE, DataSource, ENV_FILE, LoadedData, Run};
use crate::cli::seconds;

pub fn run(args: TrainArgs) -> anyhow::Result<()> {
    let run = Run::from_args(&args)?;
    // From here a first Ctrl-C stops the run cleanly, whatever it is doing (see `Interrupt`).
    let interrupt = Interrupt::install(&run.out);
    for note in &run.notes {
        // Beside the JSON events, not among them.
        if args.json {
            errln!("note: {note}");
        } else {
            outln!("note: {note}");
        }
    }
    // A checkpoint already in --out is replaced at the end of the run: said now, with how
    // to keep it (a run resumed from that folder continues it, and says so itself).
    let resumed_here = (args.resume.as_deref()).is_some_and(|r| same_folder(r, &run.out));
    if !resumed_here && let Some(samples) = checkpoint::trained_samples(&run.out) {
        let note = format!(
            "{} holds a checkpoint of {samples} trained samples; this run replaces it when it \
             ends (--resume {0} continues it instead; another --out keeps both)",
            run.out.display()
        );
        if args.json {
            errln!("note: {note}");
        } else {
            outln!("note: {note}");
        }
    }
    // A folder holding a checkpoint's file names but no checkpoint this build reads (the
    // user's own env.json and ppo.json, the run's --env and --ppo among them): the run would
    // replace them with its own, without a word.
    if !resumed_here && checkpoint::trained_samples(&run.out).is_none() {
        let found: Vec<&str> = [
            "env.json",
            "ppo.json",
            "data.json",
            "state.json",
            "model.bpk",
        ]
        .into_iter()
        .filter(|name| run.out.join(name).exists())
        .collect();
        anyhow::ensure!(
            found.is_empty(),
            "--out {}: holds {} but no checkpoint this build reads: the run would write its own \
             files over them; give a new or empty folder (or move them)",
            run.out.display(),
            found.join(", ")
        );
    }
    let spec = run.device;
    let config = &run.config;
    // Refused before anything loads: a precision the device does not compute in.
    check_precision(spec, config.ppo.precision)?;
    let data = match &args.resume {
        // The data the checkpoint trained on, cut at its recorded dates where it changed.
        Some(dir) => {
            run.data
                .load_recorded(&config.env, &dir.join(DATA_FILE), &["train", "validation"])?
        }
        None => run.data.load(&config.env)?,
    };
    for note in &data.notes {
        if args.json {
            errln!("note: {note}");
        } else {
            outln!("note: {note}");
        }
    }
    // Before the run spends its time: a checkpoint directory it could not save to is refused
    // now, not after training (an existing file, a folder it may not write in, a typo).
    let created = checkpoint::prepare_dir(&run.out)
        .context("the checkpoint directory (--out, or `out` in --config)")?;
    let result = train_on(&args, &run, &data, &interrupt);
    if result.is_err() && created {
        // Nothing saved: the directory it made goes again (only if still empty).
        let _ = std::fs::remove_dir(&run.out);
    }
    result
}

/// Whether `a` and `b` name one folder (as the file system resolves them, where both exist).
fn same_folder(a: &std::path::Path, b: &std::path::Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// The run once its data is loaded and its checkpoint directory is known to take files.
fn train_on(
    args: &TrainArgs,
    run: &Run,
    data: &LoadedData,
    interrupt: &Interrupt,
) -> anyhow::Result<()> {
    let spec = run.device;
    let config = &run.config;
    let device = open(spec)?;
    // A GPU cache whose store was broken (moved aside) or cannot be used: said before the run
    // (and before `auto` measures), since it decides what a next run of these shapes pays.
    if let Some(line) = tradetune_engine::device::kernels::store_warning_once() {
        errln!("{line}");
    }
    if !args.json {
        outln!("data: {}", data.about);
        outln!(
            "device: {spec} ({}), precision {}",
            describe_spec(spec),
            config.ppo.precision,
        );
    }
    // On the CPU the run's share of the host's memory; the run is refused before the trainer
    // allocates anything large when its estimate does not fit.
    let budget = match host_memory_bytes() {
        Some(bytes) if spec == DeviceSpec::Cpu => {
            Some(MemoryBudget::new(bytes, run.memory_fraction, 1)?)
        }
        _ => None,
    };
    let train_bars = data.split.train.clone();
    // The bar and the live compile line from here: `auto`'s placement measures both
    // placements before the trainer exists, and on a GPU's first run of a shape that is
    // mostly compiling (24 s on lavapipe for a [48]-net run).
    let bar = (!args.json).then(|| {
        let bar = ProgressBar::new(config.train.total_timesteps as u64);
        // `prefix` holds the live compile line, after the samples/s message.
        bar.set_style(
            ProgressStyle::with_template("{bar:40} {pos}/{len} samples {msg}{prefix}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar
    });
    let ticker = compile_ticker(args.json, bar.clone());
    let built = TrainingRun::build(config, &data.dataset, train_bars, &device, budget.as_ref());
    let built = match built {
        Ok(b) => b,
        Err(e) => {
            ticker.stop();
            if let Some(bar) = &bar {
                bar.finish_and_clear();
            }
            return Err(e.into());
        }
    };
    if let Some(bar) = &bar {
        let line = match &built.auto {
            Some(auto) => format!(
                "environment on the {} ({})",
                built.placement.name(),
                auto.describe()
            ),
            None => format!("environment on the {}", built.placement.name()),
        };
        say(bar, line);
    }
    let result = train(
        args,
        run,
        data,
        built.trainer,
        bar.as_ref(),
        ticker,
        interrupt,
    );
    // A run that failed before its summary leaves no bar behind (`train` clears it before).
    if let (Err(_), Some(bar)) = (&result, &bar) {
        bar.finish_and_clear();
    }
    result
}

/// A line on stdout, above the bar where it is drawn (stdout redirected to a log keeps it).
fn say(bar: &ProgressBar, line: String) {
    bar.suspend(|| outln!("{line}"));
}

/// The run itself, on `bar` (none with `--json`) with the live compile line `ticker`, which
/// it stops before its summary.
fn train(
    args: &TrainArgs,
    run: &Run,
    data: &LoadedData,
    mut trainer: Trainer<PlacedEnv>,
    bar: Option<&ProgressBar>,
    ticker: CompileTicker,
    interrupt: &Interrupt,
) -> anyhow::Result<()> {
    let config = &run.config;
    if config.train.eval_every > 0 {
        trainer = trainer.with_evaluation(PeriodicEval {
            every: config.train.eval_every,
            split: EvalSplit::new(
                "validation",
                data.dataset.clone(),
                data.split.validation.clone(),
                &config.env,
            ),
            objective: run.objective,
        })?;
    }
    if let Some(dir) = &args.resume {
        checkpoint::resume(dir, &mut trainer)?;
        if let Some(bar) = bar {
            say(
                bar,
                format!(
                    "resuming {} at {} samples",
                    dir.display(),
                    trainer.timesteps()
                ),
            );
        }
    }
    let start_steps = trainer.timesteps();
    // This run's updates are said beside its samples, not those before the resume.
    let start_updates = trainer.updates();
    if let Some(bar) = bar {
        bar.set_length((start_steps + config.train.total_timesteps) as u64);
        bar.set_position(start_steps as u64);
    }
    // A Ctrl-C from now on ends the run at the next step; one that came before ends it before
    // its first.
    interrupt.attach(trainer.stop_flag());
    let report = trainer.learn(config.train.total_timesteps, &mut |event| {
        if args.json {
            if let Ok(line) = serde_json::to_string(&event) {
                outln!("{line}");
            }
            return;
        }
        if let Some(bar) = bar {
            show(bar, event);
        }
    });
    // What a compiling still going on compiled is said before the summary.
    ticker.stop();
    let report = report?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    if report.stopped && report.updates == start_updates {
        // Stopped before its first update: nothing trained, nothing to save.
        return Err(interrupted("training", |m| {
            format!("{m} before its first update; nothing was saved")
        }));
    }
    // The environment and the data source are saved with the model, all or none.
    checkpoint::save_with(
        &run.out,
        &trainer,
        &[
            (ENV_FILE, serde_json::to_vec_pretty(&config.env)?),
            (
                DATA_FILE,
                serde_json::to_vec_pretty(&DataSource {
                    objective: Some(run.objective),
                    ..run.data.recorded(data)
                })?,
            ),
        ],
    )?;
    if args.json {
        let mut report_json = serde_json::to_value(&report)?;
        // Where every update compiled, none ran steady: no steady rate is claimed, as a study's
        // trial claims none (its compiling is inside the other phases).
        if let Some(fields) = report_json.as_object_mut() {
            if report.compile_not_apart {
                fields.remove("steady_samples_per_second");
            }
            // Named as every other line is.
            fields.insert("event".into(), "summary".into());
        }
        outln!("{}", serde_json::to_string(&report_json)?);
    } else {
        outln!(
            "trained {} samples ({} in total) in {} update{}, {} ({:.0} samples/s); checkpoint in {}",
            report.timesteps - start_steps,
            report.timesteps,
            report.updates - start_updates,
            if report.updates - start_updates == 1 {
                ""
            } else {
                "s"
            },
            seconds(report.elapsed_s),
            report.samples_per_second,
            run.out.display()
        );
        for line in time_lines(
            &report.phases,
            &report.kernels,
            report.steady_samples_per_second,
            kernels::counting_compiles(),
            kernels::driver_shader_cache_off(),
            report.compile_not_apart,
            kernels::kept_now(),
        ) {
            outln!("{line}");
        }
    }
    // An interrupted run saved what it trained; its exit status still says it was stopped
    // (a signal after its last update is no interruption: the run was whole).
    if report.stopped {
        return Err(interrupted("training", |m| {
            format!(
                "{m} at {} samples; its checkpoint is saved: go on with `tradetune train \
                 --resume {}`",
                report.timesteps,
                run.out.display()
            )
        }));
    }
    Ok(())
}

/// The error of a run stopped by a signal, its message made by `say` from the signal's: exit
/// status 130 (SIGINT) or 143 (SIGTERM).
fn interrupted(what: &str, say: impl FnOnce(&str) -> String) -> anyhow::Error {
    match crate::signals::interrupted_ending(what) {
        Some(mut ending) => {
            ending.message = say(&ending.message);
            ending.into()
        }
        None => anyhow::anyhow!(say(&format!("{what} was stopped"))),
    }
}

/// Ctrl-C (or SIGTERM) during `tradetune train`, from the moment its arguments are read: one
/// that comes before the trainer exists (loading data, measuring `auto`'s placement, the first
/// compile) is kept and stops the run before its first update; once it trains, it ends the run
/// at the next step, which saves what it trained. A second one exits at once, saving nothing.
#[derive(Clone, Default)]
struct Interrupt {
    /// A signal came.
    asked: Arc<AtomicBool>,
    /// The trainer's stop flag, once there is a trainer.
    trainer: Arc<Mutex<Option<Arc<AtomicBool>>>>,
}

impl Interrupt {
    fn install(out: &std::path::Path) -> Self {
        let this = Self::default();
        let handle = this.clone();
        let out = out.display().to_string();
        crate::signals::on_first_signal(move || {
            handle.asked.store(true, Ordering::SeqCst);
            let slot = handle.trainer.lock().unwrap_or_else(|p| p.into_inner());
            match slot.as_ref() {
                Some(flag) => {
                    errln!(
                        "{}: ending at the next step and saving what it trained in {out}; \
                         press Ctrl-C again to exit at once without saving",
                        crate::signals::cause()
                    );
                    flag.store(true, Ordering::SeqCst);
                }
                None => errln!(
                    "{}: the run stops once it is set up, before it trains (nothing to save); \
                     press Ctrl-C again to exit at once",
                    crate::signals::cause()
                ),
            }
        });
        this
    }

    /// Ties the trainer's stop flag to the signal (set at once if one came already).
    fn attach(&self, flag: Arc<AtomicBool>) {
        let mut slot = self.trainer.lock().unwrap_or_else(|p| p.into_inner());
        if self.asked.load(Ordering::SeqCst) {
            flag.store(true, Ordering::SeqCst);
        }
        *slot = Some(flag);
    }
}

/// The live compile line (issue 32: compile once, and say so) while the GPU compiles, from a
/// thread of its own (the trainer's waits on the device): on the bar after the samples/s, and
/// its totals above the bar once it stops (where it took a second or more); with `--json`, a
/// `compiling` event a second and one with the totals; where the output is not a terminal, a
/// line every 10 s of a long compiling and its totals ([`crate::cli::CompileLines`]).
fn compile_ticker(json: bool, bar: Option<ProgressBar>) -> CompileTicker {
    let mut lines = crate::cli::CompileLines::default();
    CompileTicker::start(move |status: CompileStatus| match &bar {
        Some(bar) if !bar.is_hidden() => {
            if status.active {
                bar.set_prefix(format!("  {}", status.short()));
            } else {
                bar.set_prefix("");
                if status.worth_a_line() {
                    bar.println(status.to_string());
                }
            }
        }
        _ => {
            if let Some(line) = lines.plain(&status, json) {
                outln!("{line}");
            }
        }
    })
}

/// Where a run's time went, as lines under its summary: each phase's seconds and share of the
/// run and, where kernels were compiled (a GPU), what compiling them cost and the rate without
/// it (`steady`, samples/s), and what a next run pays: `counting` says whether cubecl's
/// compilations were counted (`kernels`), `driver_cache_off` names the variable that turns the
/// driver's shader cache off, if one does, `not_apart` says that every update compiled (no
/// steady update to measure compiling against), and `kept` is what a next run finds of this
/// one's autotune answers.
fn time_lines(
    phases: &PhaseTimes,
    kernels: &KernelCounts,
    steady: f64,
    counting: bool,
    driver_cache_off: Option<&str>,
    not_apart: bool,
    kept: Kept,
) -> Vec<String> {
    let total = phases.total();
    let mut lines = Vec::new();
    if total <= 0.0 {
        return lines;
    }
    let parts: Vec<String> = phases
        .metrics()
        .iter()
        .filter(|(_, secs)| *secs > 0.0)
        .map(|(name, secs)| {
            let name = name.trim_start_matches("time/").trim_end_matches("_s");
            format!("{name} {} ({:.0} %)", seconds(*secs), 100.0 * secs / total)
        })
        .collect();
    lines.push(format!("time by phase: {}", parts.join(", ")));
    if phases.compile > 0.0 || kernels.compiled_anything() {
        let counted = if counting {
            format!(
                "{} kernels compiled, {} operations autotuned",
                kernels.compiled, kernels.autotune_runs
            )
        } else {
            "kernels not counted: another logger came first".into()
        };
        // Every update compiled: a compile phase holds only an evaluation's compiling and the
        // wait for late compilation lines, if anything.
        let cost = if not_apart {
            format!(
                "not measured apart, since every update compiled and none gave a steady time to \
                 compare with ({counted})"
            )
        } else if phases.compile > 0.0 {
            format!(
                "{} ({counted}); {steady:.0} samples/s without it",
                seconds(phases.compile)
            )
        } else {
            format!("too short to measure apart from the steady updates ({counted})")
        };
        let mut next = Vec::new();
        if counting && kernels.autotune_runs > 0 {
            next.push(match kept {
                Kept::Off => "a next run of the same shapes autotunes them again (the GPU cache \
                     is off: TRADETUNE_GPU_CACHE, or cubecl's own autotune cache setting)"
                    .to_string(),
                Kept::Unusable => "a next run of the same shapes autotunes them again \
                     (TradeTune's GPU cache cannot be used: see the warning)"
                    .to_string(),
                Kept::WritesFailed(n) => format!(
                    "a next run of the same shapes may autotune some of them again ({n} reads \
                     and writes of TradeTune's GPU cache failed: see the warning)"
                ),
                Kept::All => "a next run of the same shapes autotunes nothing (TradeTune's GPU \
                     cache keeps the answers)"
                    .to_string(),
            });
        } else if counting {
            next.push("nothing was autotuned (TradeTune's GPU cache had the answers)".into());
        }
        next.push(match driver_cache_off {
            Some(var) => {
                format!("{var} turns the driver's shader cache off, so every run compiles again")
            }
            None => "a next run compiles from the driver's shader cache where it keeps one".into(),
        });
        lines.push(format!("compiling: {cost}; {}", next.join("; ")));
    }
    lines
}

/// One event on the progress bar.
fn show(bar: &ProgressBar, event: TrainEvent) {
    // indicatif drops `println` on a hidden bar (output not a terminal): print directly.
    let say = |line: String| {
        if bar.is_hidden() {
            outln!("{line}");
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

#[cfg(test)]
mod tests {
    use super::*;
    use tradetune_engine::device::cache_store::StoreTrouble;
    use tradetune_engine::device::kernels::{CacheSetting, kept};

    #[test]
    fn the_time_lines_give_each_phase_and_what_compiling_cost() {
        let phases = PhaseTimes {
            env_step: 1.0,
            inference: 2.0,
            update: 4.0,
            evaluation: 1.0,
            compile: 12.0,
            ..PhaseTimes::default()
        };
        let kernels = KernelCounts {
            compiled: 181,
            autotune_runs: 51,
            ..KernelCounts::default()
        };
        let lines = time_lines(&phases, &kernels, 950.0, true, None, false, Kept::All);
        assert_eq!(
            lines[0],
            "time by phase: env_step 1.0 s (5 %), inference 2.0 s (10 %), update 4.0 s (20 %), \
             evaluation 1.0 s (5 %), compile 12 s (60 %)"
        );
        assert!(
            lines[1].starts_with(
                "compiling: 12 s (181 kernels compiled, 51 operations autotuned); 950 samples/s \
                 without it; a next run of the same shapes autotunes nothing"
            ),
            "{lines:?}"
        );
        // Where the cache keeps no answers (off, or a store that cannot be used), a next run
        // autotunes again, and the words say so.
        let next_run = |kept: Kept| time_lines(&phases, &kernels, 950.0, true, None, false, kept);
        let off = CacheSetting {
            root: None,
            environment: "lavapipe".into(),
            store: None,
            cubecl_cache_off: false,
        };
        let lines = next_run(kept(Some(&off), 0));
        assert!(
            lines[1].contains(
                "a next run of the same shapes autotunes them again (the GPU cache is off"
            ),
            "{lines:?}"
        );
        let unusable = CacheSetting {
            root: Some("/ro/gpu-cache".into()),
            store: Some(StoreTrouble::Unusable {
                file: "/ro/gpu-cache/lavapipe.db".into(),
                error: "read-only file system".into(),
            }),
            ..off.clone()
        };
        let lines = next_run(kept(Some(&unusable), 0));
        assert!(
            lines[1].contains("autotunes them again (TradeTune's GPU cache cannot be used"),
            "{lines:?}"
        );
        let replaced = CacheSetting {
            store: Some(StoreTrouble::Replaced {
                file: "/ro/gpu-cache/lavapipe.db".into(),
                moved_to: "/ro/gpu-cache/lavapipe.db.unreadable-1".into(),
                error: "file is not a database".into(),
            }),
            ..unusable.clone()
        };
        let lines = next_run(kept(Some(&replaced), 0));
        assert!(lines[1].contains("autotunes nothing"), "{lines:?}");
        // Writes to a usable store that failed during the run (a full disk): maybe not all kept.
        let lines = next_run(kept(Some(&replaced), 11));
        assert!(
            lines[1].contains("may autotune some of them again (11 reads and writes of"),
            "{lines:?}"
        );
        assert_eq!(kept(None, 3), Kept::All);
        // A run that found its autotune answers kept, where the driver keeps no shader cache.
        let kept = KernelCounts {
            autotune_runs: 0,
            ..kernels
        };
        let lines = time_lines(
            &phases,
            &kept,
            950.0,
            true,
            Some("MESA_SHADER_CACHE_DISABLE"),
            false,
            Kept::All,
        );
        assert!(lines[1].contains("nothing was autotuned"), "{lines:?}");
        assert!(
            lines[1].ends_with(
                "MESA_SHADER_CACHE_DISABLE turns the driver's shader cache off, so every run \
                 compiles again"
            ),
            "{lines:?}"
        );
        // The CPU compiles nothing: the phases only.
        let cpu = PhaseTimes {
            compile: 0.0,
            ..phases
        };
        let lines = time_lines(
            &cpu,
            &KernelCounts::default(),
            400.0,
            false,
            None,
            false,
            Kept::All,
        );
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(!lines[0].contains("compile"), "{lines:?}");
        assert!(
            time_lines(
                &PhaseTimes::default(),
                &kernels,
                1.0,
                true,
                None,
                false,
                Kept::All
            )
            .is_empty()
        );
        // Every update compiled (a one-update run): no steady time, so no compile time apart.
        // An evaluation's compile time in the phase does not make the updates' measured.
        for compile in [0.0, 0.16] {
            let held = PhaseTimes { compile, ..phases };
            let lines = time_lines(&held, &kernels, 40.0, true, None, true, Kept::All);
            assert!(
                lines[1].starts_with("compiling: not measured apart, since every update compiled"),
                "{lines:?}"
            );
            assert!(!lines[1].contains("samples/s without it"), "{lines:?}");
        }
        // Updates that compiled no slower than a steady one: nothing to take apart.
        let none = PhaseTimes {
            compile: 0.0,
            ..phases
        };
        let lines = time_lines(&none, &kernels, 40.0, true, None, false, Kept::All);
        assert!(
            lines[1].starts_with("compiling: too short to measure apart from the steady updates"),
            "{lines:?}"
        );
        // The counters off (another logger first): the compile time, not the counts.
        let lines = time_lines(
            &phases,
            &KernelCounts::default(),
            950.0,
            false,
            None,
            false,
            Kept::All,
        );
        assert!(
            lines[1].starts_with(
                "compiling: 12 s (kernels not counted: another logger came first); 950"
            ),
            "{lines:?}"
        );
        assert!(!lines[1].contains("autotuned"), "{lines:?}");
        let shown: Vec<String> = [42.4, 3.46, 0.354, 0.00421].map(seconds).into();
        assert_eq!(shown, ["42 s", "3.5 s", "0.35 s", "4.2 ms"]);
    }
}
