//! `tradetune worker`: join a study recorded with `tradetune study create` in a shared database
//! (PostgreSQL, usually) and draw its trials until the study's budget is spent.
//!
//! The worker reads the study file, overrides and budget from the study's system attributes,
//! loads the market data here and refuses to start when its fingerprint differs from the one
//! recorded (other files, dates or scaling would mix incomparable results). Trial numbers come
//! from the database transaction that creates each trial (the study row locked, as Optuna's
//! RDB storage does); the budget is counted in that same transaction, so several workers on
//! several machines never overshoot it. Each trial's worker label is `HOST/worker-N`.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use tradetune_engine::front::FrontError;
use tradetune_engine::front::launch::{StudyLaunch, keys};
use tradetune_engine::storage::Storage;

use super::study::{LivenessArgs, drive, outcome};
use crate::launch;

#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// The shared database: postgresql://user@host[:port]/dbname (password from ~/.pgpass or
    /// PGPASSWORD), or a SQLite file.
    #[arg(long, alias = "db", value_parser = crate::launch::study_location)]
    pub storage: PathBuf,
    /// The study to join (recorded with `tradetune study create`).
    #[arg(long)]
    pub study: String,
    /// Devices of this machine, comma-separated (overrides the study file's), e.g. `wgpu:0`.
    #[arg(long, value_delimiter = ',')]
    pub devices: Option<Vec<String>>,
    /// Parallel workers in this process (overrides the study file's).
    #[arg(long)]
    pub workers: Option<usize>,
    /// Stop after this many trials here, even if the study's budget is not spent.
    #[arg(long)]
    pub trials: Option<usize>,
    /// Relative market-data paths of the study file are resolved against this directory
    /// (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    #[command(flatten)]
    pub liveness: LivenessArgs,
    /// One JSON event per line instead of text.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: WorkerArgs) -> anyhow::Result<()> {
    let label = launch::db_label(&args.storage);
    launch::require_db(&args.storage)?;
    let storage =
        Storage::open_read_only(&args.storage).with_context(|| format!("opening {label}"))?;
    let data_dir = match &args.data_dir {
        Some(d) => d.clone(),
        None => std::env::current_dir().context("the current directory")?,
    };
    let place = launch::place(args.storage.clone())?;
    let mut study = match StudyLaunch::join(&storage, &args.study, &data_dir, place) {
        Err(FrontError::NotRecorded { .. }) => anyhow::bail!(
            "study '{}' in {label} was not created for workers (it has no recorded budget and \
             data fingerprint, `{}`, as `tradetune study run` makes none); create a study for \
             workers with `tradetune study create FILE --storage {label} --name NEW_NAME` (the \
             name '{}' is taken) and start the workers with `--study NEW_NAME`",
            args.study,
            keys::FINGERPRINT,
            args.study
        ),
        other => other?,
    };
    drop(storage);
    let budget = study.budget().unwrap_or_default();
    if let Some(w) = args.workers {
        study.workers(w).context("--workers")?;
    }
    if let Some(devices) = &args.devices {
        study.devices(devices.clone()).context("--devices")?;
    }
    if let Some(n) = args.trials {
        study.trials(n).context("--trials")?;
    }
    study.host(crate::signals::process_label());
    study.liveness(args.liveness.liveness()?);
    let (handle, events, thread) = study.launch();
    crate::signals::interrupt_on_signal(handle);
    let report = drive(events, args.json, |data| {
        outln!(
            "worker on {} joins study '{}' in {label} (budget {budget} trials)",
            crate::signals::host_name(),
            args.study
        );
        outln!("data: {data}");
    });
    // The study's events have ended (whatever its result): its thread ends before the process.
    thread.wait();
    let report = report.map_err(|e| match e.downcast_ref::<FrontError>() {
        Some(FrontError::DataMismatch { .. }) => anyhow::anyhow!(
            "{}; give the worker the same files (--data-dir DIR for the study file's relative \
             paths)",
            crate::out::error_text(&e)
        ),
        _ => e,
    })?;
    if !args.json {
        match report.best {
            Some((n, v)) => outln!("best trial of '{}' so far: #{n} value {v:.6}", report.study),
            None => outln!("'{}' has no COMPLETE trial yet", report.study),
        }
    }
    outcome(&report, &format!("the worker of study '{}'", args.study))
}
