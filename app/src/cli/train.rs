//! `tradetune train`: one PPO run on a dataset, with a progress bar (or `--json` events), a
//! memory check before it starts, optional periodic evaluation on the validation split, and a
//! checkpoint at the end (resumable with `--resume`).
//!
//! Where the configuration comes from: [`crate::cli::run_config`].

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use tradetune_engine::device::memory::{MemoryBudget, host_memory_bytes};
use tradetune_engine::device::{DeviceSpec, check_precision, describe_spec, open};
use tradetune_engine::eval::EvalSplit;
use tradetune_engine::ppo::checkpoint;
use tradetune_engine::ppo::{PeriodicEval, TrainEvent, Trainer};
use tradetune_engine::study::ppo_trial::{PlacedEnv, TrainingRun};

pub use crate::cli::run_config::TrainArgs;
use crate::cli::run_config::{DATA_FILE, ENV_FILE, LoadedData, Run};

pub fn run(args: TrainArgs) -> anyhow::Result<()> {
    let run = Run::from_args(&args)?;
    let spec = run.device;
    let config = &run.config;
    // Refused before anything loads: a precision the device does not compute in.
    check_precision(spec, config.ppo.precision)?;
    let device = open(spec)?;
    let data = run.data.load(&config.env)?;
    if !args.json {
        println!("data: {}", data.about);
        println!(
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
    let built = TrainingRun::build(config, &data.dataset, train_bars, &device, budget.as_ref())?;
    if !args.json {
        match &built.auto {
            Some(auto) => println!(
                "environment on the {} ({})",
                built.placement.name(),
                auto.describe()
            ),
            None => println!("environment on the {}", built.placement.name()),
        }
    }
    train(&args, &run, &data, built.trainer)
}

/// The run itself.
fn train(
    args: &TrainArgs,
    run: &Run,
    data: &LoadedData,
    mut trainer: Trainer<PlacedEnv>,
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
        let bar = ProgressBar::new((start_steps + config.train.total_timesteps) as u64);
        bar.set_style(
            ProgressStyle::with_template("{bar:40} {pos}/{len} samples {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar.set_position(start_steps as u64);
        bar
    });
    let report = trainer.learn(config.train.total_timesteps, &mut |event| {
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
    write(ENV_FILE, serde_json::to_string_pretty(&config.env)?)?;
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
