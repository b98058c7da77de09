//! `tradetune worker`: join a study recorded with `tradetune study create` in a shared database
//! (PostgreSQL, usually) and draw its trials until the study's budget is spent.
//!
//! The worker reads the study file, overrides and budget from the study's system attributes,
//! loads the market data here and refuses to start when its fingerprint differs from the one
//! recorded (other files, dates or scaling would mix incomparable results). Trial numbers come
//! from the database transaction that creates each trial (the study row locked, as Optuna's
//! RDB storage does); the budget is counted in that same transaction, so several workers on
//! several machines never overshoot it. Each trial's worker label is `HOST/worker-N`.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use tradetune_engine::front::study_run::StudyRun;
use tradetune_engine::storage::{JsonValue, Storage};
use tradetune_engine::study::ppo_trial::parse_study_file;

use super::study::{LivenessArgs, apply_overrides, drive, record};
use crate::launch;

#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// The shared database: postgresql://user@host[:port]/dbname (password from ~/.pgpass or
    /// PGPASSWORD), or a SQLite file.
    #[arg(long, alias = "db")]
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
    let study = storage.study(&args.study)?;
    drop(storage);
    let attr = |key: &str| {
        study
            .system_attrs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    };
    let not_recorded = || {
        anyhow::anyhow!(
            "study '{}' in {label} was not recorded with `tradetune study create` (it has no \
             `{}` attribute); create it with `tradetune study create FILE --storage {label}`",
            args.study,
            record::TOML
        )
    };
    let text = match attr(record::TOML) {
        Some(JsonValue::Str(t)) => t,
        _ => return Err(not_recorded()),
    };
    let source = match attr(record::SOURCE) {
        Some(JsonValue::Str(s)) => s,
        _ => format!("study {}", args.study),
    };
    let budget = match attr(record::BUDGET) {
        Some(JsonValue::Int(n)) if n > 0 => n as usize,
        _ => return Err(not_recorded()),
    };
    let expected = match attr(record::FINGERPRINT) {
        Some(JsonValue::Str(f)) => f,
        _ => return Err(not_recorded()),
    };
    let overrides: Vec<String> = match attr(record::OVERRIDES) {
        Some(JsonValue::Array(items)) => items
            .into_iter()
            .filter_map(|v| match v {
                JsonValue::Str(s) => Some(s),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };

    let mut file = parse_study_file(&text, &source)?;
    let base = match &args.data_dir {
        Some(d) => d.clone(),
        None => std::env::current_dir().context("the current directory")?,
    };
    for p in &mut file.data.paths {
        if p.is_relative() {
            *p = Path::new(&base).join(&*p);
        }
    }
    apply_overrides(&mut file, &overrides)?;
    file.study.name = args.study.clone();
    if let Some(w) = args.workers {
        anyhow::ensure!(w > 0, "--workers: need at least one worker");
        file.study.workers = w;
    }
    let mut rc = file.runner_config(&args.storage)?;
    if let Some(devices) = &args.devices {
        rc.devices = file.device_slots(devices)?;
        anyhow::ensure!(
            !rc.devices.is_empty(),
            "--devices: list at least one device"
        );
    }
    rc.study_budget = Some(budget);
    rc.n_trials = args.trials.unwrap_or(budget);
    // `host#pid`: the machine, and which of its worker processes.
    rc.host = Some(format!(
        "{}#{}",
        crate::signals::host_name(),
        std::process::id()
    ));
    args.liveness.apply(&mut rc)?;

    let prepared = launch::prepare(&file, rc)?;
    let (runner, data, fingerprint) = (prepared.runner, prepared.source, prepared.fingerprint);
    anyhow::ensure!(
        fingerprint == expected,
        "this machine's market data differs from study '{}''s: fingerprint {fingerprint} here, \
         {expected} recorded ({data}); give the worker the same files (--data-dir DIR for the \
         study file's relative paths)",
        args.study
    );
    if !args.json {
        println!(
            "worker on {} joins study '{}' in {label} (budget {budget} trials)",
            crate::signals::host_name(),
            args.study
        );
        println!("data: {data}");
    }
    let sampler = args.liveness.sampler(&args.storage)?;
    crate::signals::interrupt_on_signal(runner.stop_handle());
    let report = drive(StudyRun::new(runner, sampler), args.json)?;
    if !args.json {
        match report.best {
            Some((n, v)) => println!("best trial of '{}' so far: #{n} value {v:.6}", report.study),
            None => println!("'{}' has no COMPLETE trial yet", report.study),
        }
    }
    Ok(())
}
