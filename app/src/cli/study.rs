//! `tradetune study`: run hyperparameter studies (from a study file or a preset), record one in
//! a shared database for `tradetune worker`s, list the studies of a database, export a study's
//! trials and telemetry as CSV.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;

use crate::launch;
use clap::{Args, Subcommand};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use tradetune_engine::front::export::export_telemetry;
use tradetune_engine::front::study_run::{StudyRun, telemetry_sampler};
use tradetune_engine::storage::{JsonValue, Storage, StudyDirection, TrialRecord, TrialState};
use tradetune_engine::study::file::StudyFile;
use tradetune_engine::study::ppo_trial::read_study_file;
use tradetune_engine::study::preset;
use tradetune_engine::study::runner::{RunnerConfig, StudyEvent, StudyReport};

pub mod importance;
pub mod note;
pub mod report;
pub mod reseed;
pub mod speed;

#[derive(Debug, Subcommand)]
pub enum StudyCommand {
    /// Run a study from a TOML study file or a bundled preset; one line per finished trial.
    Run(RunArgs),
    /// Record a study (file or preset, its overrides, its trial budget and its market data's
    /// fingerprint) in a database without running it, for `tradetune worker`s to join.
    Create(CreateArgs),
    /// The studies of a database with their trial counts and best values.
    List(ListArgs),
    /// One study's trials: state, value, device, worker, duration, parameters.
    Show(ShowArgs),
    /// Write a study's trials (Optuna's trials_dataframe columns) and/or telemetry as CSV.
    Export(ExportArgs),
    /// The bundled presets and the device class each is for.
    Presets(PresetsArgs),
    /// Each parameter's importance by PED-ANOVA (the numbers of Optuna's
    /// `get_param_importances`), most important first.
    Importance(importance::ImportanceArgs),
    /// Read or write the note of a study or trial (shared with optuna-dashboard).
    Note(note::NoteArgs),
    /// Did the study find anything? Its best trial with its folds, the probability of
    /// backtest overfitting (PBO) over the trials' out-of-sample returns, and the best trial's
    /// deflated Sharpe ratio. Needs a cross-validated study ([evaluation] cpcv or walk_forward).
    Report(report::ReportArgs),
    /// Train the study's best trial again with K other seeds and backtest each on the test
    /// split beside equal weight: is the winner robust or one lucky seed? Stored with the study.
    Reseed(reseed::ReseedArgs),
    /// Each trial's training samples/s in the study against its configuration's alone on this
    /// machine (measured now), and why a trial was slower: cores shared with other trials,
    /// evaluation cost, tiny minibatches — each with its fix.
    Speed(speed::SpeedArgs),
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The study file (TOML); see `tradetune study presets` for examples.
    #[arg(conflicts_with = "preset", required_unless_present = "preset")]
    pub file: Option<PathBuf>,
    /// A bundled preset instead of a file: rtx4080, rtx4080_laptop, rx7900gre, cpu.
    #[arg(long)]
    pub preset: Option<String>,
    /// The study database: a SQLite file (Optuna's schema) or postgresql://user@host[:port]/dbname
    /// (password from ~/.pgpass or PGPASSWORD). Default: studies.db in the user data dir.
    #[arg(long, alias = "storage")]
    pub db: Option<PathBuf>,
    /// Trials to run now (overrides the file's n_trials).
    #[arg(long)]
    pub trials: Option<usize>,
    /// Parallel workers (overrides the file's workers).
    #[arg(long)]
    pub workers: Option<usize>,
    /// Devices, comma-separated, e.g. `cpu,cpu` or `wgpu:0,wgpu:1` (overrides the file's).
    #[arg(long, value_delimiter = ',')]
    pub devices: Option<Vec<String>>,
    /// The study's name in the database (overrides the file's).
    #[arg(long)]
    pub name: Option<String>,
    /// Fix a value for every trial on top of the file's or preset's `[fixed]`, e.g.
    /// `--set train.total_timesteps=20000` or `--set ppo.policy.net_arch.pi=[256,256]`
    /// (repeatable; values in TOML syntax).
    #[arg(long = "set", value_name = "NAME=VALUE")]
    pub set: Vec<String>,
    #[command(flatten)]
    pub liveness: LivenessArgs,
    /// One JSON event per line instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Heartbeats and telemetry of a running study (`study run` and `worker`).
#[derive(Debug, Args)]
pub struct LivenessArgs {
    /// Seconds between heartbeats of a running trial.
    #[arg(long, default_value_t = 10.0)]
    pub heartbeat: f64,
    /// A RUNNING trial whose heartbeat is older than this many seconds was left by a dead
    /// process (or worker) and is marked FAIL before the next trial starts.
    #[arg(long, default_value_t = 60.0)]
    pub stale_after: f64,
    /// Seconds between telemetry samples stored with the study (0 = no telemetry).
    #[arg(long, default_value_t = 1.0)]
    pub telemetry_interval: f64,
}

impl LivenessArgs {
    /// Sets the runner's heartbeat period and grace period.
    pub fn apply(&self, rc: &mut RunnerConfig) -> anyhow::Result<()> {
        rc.heartbeat_interval = seconds(self.heartbeat, "--heartbeat")?;
        rc.stale_after = seconds(self.stale_after, "--stale-after")?;
        Ok(())
    }

    /// The telemetry sampler writing into `db`, unless `--telemetry-interval 0`.
    pub fn sampler(
        &self,
        db: &std::path::Path,
    ) -> anyhow::Result<
        Option<(
            tradetune_engine::telemetry::Sampler,
            Vec<tradetune_engine::telemetry::GpuInfo>,
        )>,
    > {
        if self.telemetry_interval <= 0.0 {
            return Ok(None);
        }
        let interval = seconds(self.telemetry_interval, "--telemetry-interval")?;
        Ok(telemetry_sampler(db, interval).map(Some)?)
    }
}

#[derive(Debug, Args)]
pub struct CreateArgs {
    /// The study file (TOML).
    #[arg(conflicts_with = "preset", required_unless_present = "preset")]
    pub file: Option<PathBuf>,
    /// A bundled preset instead of a file: rtx4080, rtx4080_laptop, rx7900gre, cpu.
    #[arg(long)]
    pub preset: Option<String>,
    /// The shared database: postgresql://user@host[:port]/dbname (created if missing), or a
    /// SQLite file for workers on this machine.
    #[arg(long, alias = "db")]
    pub storage: PathBuf,
    /// The study's whole trial budget, shared by every worker (overrides the file's n_trials).
    #[arg(long)]
    pub trials: Option<usize>,
    /// The study's name in the database (overrides the file's).
    #[arg(long)]
    pub name: Option<String>,
    /// Fix a value for every trial, as `study run --set` (repeatable).
    #[arg(long = "set", value_name = "NAME=VALUE")]
    pub set: Vec<String>,
}

/// Study system attributes that record a study for `tradetune worker`.
pub mod record {
    /// The study file's TOML text (a preset's text for a preset).
    pub const TOML: &str = "tradetune:study_toml";
    /// Where the text came from (`preset:NAME` or the file's path), for error messages.
    pub const SOURCE: &str = "tradetune:study_source";
    /// The `--set NAME=VALUE` overrides, in order.
    pub const OVERRIDES: &str = "tradetune:overrides";
    /// The whole study's trial budget.
    pub const BUDGET: &str = "tradetune:n_trials";
    /// The market data's fingerprint (`Dataset::fingerprint`).
    pub const FINGERPRINT: &str = "tradetune:data_fingerprint";
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// The study database: a SQLite file or postgresql://user@host[:port]/dbname.
    #[arg(long, alias = "storage")]
    pub db: Option<PathBuf>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The study's name.
    pub name: String,
    /// The study database: a SQLite file or postgresql://user@host[:port]/dbname.
    #[arg(long, alias = "storage")]
    pub db: Option<PathBuf>,
    /// The study and every trial as JSON (Optuna's FrozenTrial fields).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The study's name.
    pub name: String,
    /// The study database: a SQLite file or postgresql://user@host[:port]/dbname.
    #[arg(long, alias = "storage")]
    pub db: Option<PathBuf>,
    /// Write the trials here (the columns of Optuna's `trials_dataframe()`).
    #[arg(long, alias = "csv", value_name = "FILE.csv")]
    pub trials: Option<PathBuf>,
    /// Write the study's telemetry here: one row per sample, columns with units.
    #[arg(long, value_name = "FILE.csv")]
    pub telemetry: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct PresetsArgs {
    #[arg(long)]
    pub json: bool,
}

pub fn run(command: StudyCommand) -> anyhow::Result<()> {
    match command {
        StudyCommand::Run(a) => run_study(a),
        StudyCommand::List(a) => list(a),
        StudyCommand::Show(a) => show(a),
        StudyCommand::Create(a) => create(a),
        StudyCommand::Export(a) => export(a),
        StudyCommand::Presets(a) => presets(a),
        StudyCommand::Importance(a) => importance::run(a),
        StudyCommand::Note(a) => note::run(a),
        StudyCommand::Report(a) => report::run(a),
        StudyCommand::Reseed(a) => reseed::run(a),
        StudyCommand::Speed(a) => speed::run(a),
    }
}

pub use crate::launch::default_db;

fn db_path(db: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    match db {
        Some(p) => Ok(p),
        None => default_db(),
    }
}

fn seconds(v: f64, flag: &str) -> anyhow::Result<Duration> {
    anyhow::ensure!(
        v.is_finite() && v > 0.0,
        "{flag}: must be a positive number of seconds, got {v}"
    );
    Ok(Duration::from_secs_f64(v))
}

fn load_file(args: &RunArgs) -> anyhow::Result<StudyFile> {
    file_or_preset(args.file.as_deref(), args.preset.as_deref())
}

/// The study of a study file, or of a bundled preset.
pub(crate) fn file_or_preset(
    file: Option<&std::path::Path>,
    preset: Option<&str>,
) -> anyhow::Result<StudyFile> {
    match (file, preset) {
        (Some(path), _) => Ok(read_study_file(path)?),
        (None, Some(name)) => Ok(preset::find(name)?.study),
        (None, None) => anyhow::bail!("give a study file or --preset NAME"),
    }
}

/// Applies `--set NAME=VALUE` overrides to the file's `[fixed]` values.
pub fn apply_overrides(file: &mut StudyFile, set: &[String]) -> anyhow::Result<()> {
    for assignment in set {
        let (name, value) = assignment.split_once('=').with_context(|| {
            format!("--set {assignment}: write NAME=VALUE, e.g. --set train.total_timesteps=20000")
        })?;
        file.override_fixed(name.trim(), value)
            .with_context(|| format!("--set {assignment}"))?;
    }
    Ok(())
}

/// A study file's text and where it came from (`preset:NAME`, or the file's full path), as
/// they are recorded with a study.
fn study_text(
    file: Option<&std::path::Path>,
    preset: Option<&str>,
) -> anyhow::Result<(String, String)> {
    Ok(match (file, preset) {
        (Some(path), _) => (
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?,
            std::fs::canonicalize(path)
                .unwrap_or_else(|_| path.to_owned())
                .display()
                .to_string(),
        ),
        (None, Some(name)) => (
            preset::find(name)?.text.to_owned(),
            format!("preset:{name}"),
        ),
        (None, None) => anyhow::bail!("give a study file or --preset NAME"),
    })
}

/// Records the study file's text, its source and the `--set` overrides with the study (created
/// here if new, as the runner would), so `study reseed` and the app's Re-run find the study
/// file later. A study that already holds a text (`study create`) keeps it.
fn record_text(
    db: &std::path::Path,
    file: &StudyFile,
    (text, source): (String, String),
    set: &[String],
) -> anyhow::Result<()> {
    let label = launch::db_label(db);
    let mut storage = Storage::open(db).with_context(|| format!("opening {label}"))?;
    let name = &file.study.name;
    let id = match storage.study(name) {
        Ok(study) if study.system_attrs.iter().any(|(k, _)| k == record::TOML) => return Ok(()),
        Ok(study) => study.study_id,
        Err(tradetune_engine::storage::StorageError::UnknownStudyName { .. }) => storage
            .create_study(name, &[file.direction()])
            .with_context(|| format!("creating study {name} in {label}"))?,
        Err(e) => return Err(e).with_context(|| format!("reading study {name} in {label}")),
    };
    write_text(&mut storage, id, &text, &source, set)
}

/// Writes the study file's text, its source and the `--set` overrides as the study's
/// [`record`] attributes.
fn write_text(
    storage: &mut Storage,
    id: i64,
    text: &str,
    source: &str,
    set: &[String],
) -> anyhow::Result<()> {
    let overrides = JsonValue::Array(set.iter().map(|s| JsonValue::from(s.as_str())).collect());
    for (key, value) in [
        (record::TOML, JsonValue::from(text)),
        (record::SOURCE, JsonValue::from(source)),
        (record::OVERRIDES, overrides),
    ] {
        storage.set_study_system_attr(id, key, &value)?;
    }
    Ok(())
}

fn create(args: CreateArgs) -> anyhow::Result<()> {
    let (text, source) = study_text(args.file.as_deref(), args.preset.as_deref())?;
    let mut file = match &args.file {
        Some(path) => read_study_file(path)?,
        None => tradetune_engine::study::ppo_trial::parse_study_file(&text, &source)?,
    };
    apply_overrides(&mut file, &args.set)?;
    if let Some(name) = &args.name {
        file.study.name = name.clone();
    }
    let budget = args.trials.unwrap_or(file.study.n_trials);
    anyhow::ensure!(budget > 0, "--trials: the study needs at least one trial");
    let rc = file.runner_config(&args.storage)?;
    // Loads the data (and checks the devices) exactly as a worker will, for the fingerprint.
    let prepared = launch::prepare(&file, rc)?;
    let (data, fingerprint) = (prepared.source, prepared.fingerprint);
    let label = launch::db_label(&args.storage);
    let mut storage = Storage::open(&args.storage).with_context(|| format!("opening {label}"))?;
    let direction: StudyDirection = file.direction();
    let id = storage
        .create_study(&file.study.name, &[direction])
        .with_context(|| format!("creating study {} in {label}", file.study.name))?;
    write_text(&mut storage, id, &text, &source, &args.set)?;
    for (key, value) in [
        (record::BUDGET, JsonValue::from(budget as i64)),
        (record::FINGERPRINT, JsonValue::from(fingerprint.as_str())),
    ] {
        storage.set_study_system_attr(id, key, &value)?;
    }
    println!(
        "study '{}' recorded in {label}: {budget} trials, data {data} (fingerprint {fingerprint})",
        file.study.name
    );
    println!(
        "start workers with: tradetune worker --storage {label} --study {}",
        file.study.name
    );
    Ok(())
}

fn run_study(args: RunArgs) -> anyhow::Result<()> {
    let mut file = load_file(&args)?;
    if let Some(n) = args.trials {
        file.study.n_trials = n;
    }
    if let Some(w) = args.workers {
        anyhow::ensure!(w > 0, "--workers: need at least one worker");
        file.study.workers = w;
    }
    if let Some(name) = &args.name {
        file.study.name = name.clone();
    }
    apply_overrides(&mut file, &args.set)?;
    let db = db_path(args.db.clone())?;
    let mut rc = file.runner_config(&db)?;
    if let Some(devices) = &args.devices {
        rc.devices = file.device_slots(devices)?;
        anyhow::ensure!(
            !rc.devices.is_empty(),
            "--devices: list at least one device"
        );
    }
    args.liveness.apply(&mut rc)?;

    let prepared = launch::prepare(&file, rc)?;
    let (runner, source) = (prepared.runner, prepared.source);
    record_text(
        &db,
        &file,
        study_text(args.file.as_deref(), args.preset.as_deref())?,
        &args.set,
    )?;
    if !args.json {
        println!("study '{}' in {}", file.study.name, launch::db_label(&db));
        println!("data: {source}");
    }
    // Telemetry into the study database, tagged by trial, and summarised per trial.
    let sampler = args.liveness.sampler(&db)?;
    crate::signals::interrupt_on_signal(runner.stop_handle());
    let report = drive(StudyRun::new(runner, sampler), args.json)?;
    if !args.json {
        match report.best {
            Some((n, v)) => println!("best trial of '{}': #{n} value {v:.6}", report.study),
            None => println!("'{}' has no COMPLETE trial yet", report.study),
        }
    }
    Ok(())
}

/// Runs a study, printing its events (text lines with live bars per worker, or JSON).
pub fn drive(run: StudyRun, json: bool) -> anyhow::Result<StudyReport> {
    // Live bars per worker on a terminal; plain lines otherwise.
    let multi = MultiProgress::new();
    let mut bars: BTreeMap<usize, ProgressBar> = BTreeMap::new();
    let say = |line: String| {
        if multi.is_hidden() {
            println!("{line}");
        } else {
            let _ = multi.println(line);
        }
    };
    let (result, lost) = run.run(|event| {
        if json {
            println!("{}", serde_json::to_string(&event).unwrap_or_default());
            return;
        }
        match &event {
            StudyEvent::StudyStarted { workers, .. } if !multi.is_hidden() => {
                let style = ProgressStyle::with_template("{prefix:<18} {bar:30} {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar());
                for w in workers {
                    let bar = multi.add(ProgressBar::new(1000));
                    bar.set_style(style.clone());
                    bar.set_prefix(format!("worker {} {}", w.worker, w.device));
                    bars.insert(w.worker, bar);
                }
            }
            StudyEvent::WorkerProgress {
                worker,
                number,
                fraction,
                message,
            } => {
                if let Some(bar) = bars.get(worker) {
                    bar.set_position((fraction * 1000.0) as u64);
                    bar.set_message(format!("trial {number}: {message}"));
                }
            }
            _ => {}
        }
        for line in event_lines(&event) {
            say(line);
        }
    });
    for bar in bars.values() {
        bar.finish_and_clear();
    }
    if let Some(line) = lost
        && !json
    {
        eprintln!("{line}");
    }
    Ok(result?)
}

/// The text lines of an event (none for the live-only ones).
fn event_lines(e: &StudyEvent) -> Vec<String> {
    let mut out = Vec::new();
    match e {
        StudyEvent::StudyStarted {
            existing_trials,
            recovered,
            workers,
            n_trials,
            ..
        } => {
            if !recovered.is_empty() {
                out.push(format!(
                    "recovered {} trial(s) left RUNNING by a dead process, now FAIL: {:?}",
                    recovered.len(),
                    recovered
                ));
            }
            out.push(format!(
                "{existing_trials} trial(s) already in the study; running {n_trials} more"
            ));
            for w in workers {
                out.push(format!("worker {} on {} ({})", w.worker, w.device, w.backend));
            }
        }
        StudyEvent::WorkerWaiting {
            worker,
            device,
            reason,
        } => out.push(format!("worker {worker} waits for {device}: {reason}")),
        StudyEvent::TrialCompleted {
            number,
            worker,
            device,
            value,
            duration_s,
        } => out.push(format!(
            "trial {number:>4} COMPLETE  value {value:>10.5}  worker {worker} on {device}  {duration_s:.1} s"
        )),
        StudyEvent::TrialPruned {
            number,
            worker,
            device,
            step,
            value,
            reason,
            duration_s,
        } => out.push(format!(
            "trial {number:>4} PRUNED    value {:>10}  worker {worker} on {device}  {duration_s:.1} s  ({reason}{})",
            value.map_or("-".into(), |v| format!("{v:.5}")),
            step.map_or(String::new(), |s| format!(" at step {s}"))
        )),
        StudyEvent::TrialFailed {
            number,
            worker,
            device,
            reason,
            duration_s,
        } => out.push(format!(
            "trial {number:>4} FAIL      worker {worker} on {device}  {duration_s:.1} s: {reason}"
        )),
        StudyEvent::StudyFinished {
            completed,
            pruned,
            failed,
            stopped,
            ..
        } => out.push(format!(
            "done: {completed} complete, {pruned} pruned, {failed} failed{}",
            if *stopped { " (stopped)" } else { "" }
        )),
        _ => {}
    }
    out
}

fn list(args: ListArgs) -> anyhow::Result<()> {
    let db = db_path(args.db)?;
    launch::require_db(&db)?;
    let storage = Storage::open_read_only(&db)?;
    let summaries = storage.study_summaries()?;
    if args.json {
        let v: Vec<serde_json::Value> = summaries
            .iter()
            .map(|s| {
                serde_json::json!({
                    "name": s.study.name,
                    "directions": s.study.directions.iter().map(|d| d.as_str()).collect::<Vec<_>>(),
                    "n_trials": s.n_trials(),
                    "complete": s.n(TrialState::Complete),
                    "pruned": s.n(TrialState::Pruned),
                    "fail": s.n(TrialState::Fail),
                    "running": s.n(TrialState::Running),
                    "waiting": s.n(TrialState::Waiting),
                    "best": s.best.map(|(n, v)| serde_json::json!({"number": n, "value": tradetune_engine::storage::json_number(v)})),
                    "datetime_start": s.datetime_start.map(tradetune_engine::storage::format_naive),
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    if summaries.is_empty() {
        println!("{}: no studies", launch::db_label(&db));
        return Ok(());
    }
    println!(
        "{:<32} {:>6} {:>8} {:>6} {:>6} {:>7}  best",
        "study", "trials", "complete", "pruned", "fail", "running"
    );
    for s in &summaries {
        println!(
            "{:<32} {:>6} {:>8} {:>6} {:>6} {:>7}  {}",
            s.study.name,
            s.n_trials(),
            s.n(TrialState::Complete),
            s.n(TrialState::Pruned),
            s.n(TrialState::Fail),
            s.n(TrialState::Running),
            s.best.map_or("-".into(), |(n, v)| format!("#{n} {v:.6}"))
        );
    }
    Ok(())
}

fn attr_text(t: &TrialRecord, key: &str) -> String {
    match t.user_attr(key).or_else(|| t.system_attr(key)) {
        Some(tradetune_engine::storage::JsonValue::Str(s)) => s.clone(),
        Some(v) => v.dumps(),
        None => "-".into(),
    }
}

fn show(args: ShowArgs) -> anyhow::Result<()> {
    let db = db_path(args.db)?;
    launch::require_db(&db)?;
    let storage = Storage::open_read_only(&db)?;
    let study = storage.study(&args.name)?;
    let trials = storage.trials(study.study_id)?;
    let best = storage
        .best_trial(study.study_id)?
        .and_then(|t| t.value().map(|v| (t.number, v)));
    if args.json {
        let v = tradetune_engine::storage::study_view_json(&study, &trials, best)?;
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    println!(
        "{:>6} {:<9} {:>11} {:<8} {:<9} {:<5} {:>9}  params / reason",
        "number", "state", "value", "device", "worker", "prec", "duration"
    );
    for t in &trials {
        let duration = match (t.datetime_start, t.datetime_complete) {
            (Some(a), Some(b)) => format!("{:.1} s", (b - a).num_milliseconds() as f64 / 1000.0),
            _ => "-".into(),
        };
        let detail = if t.state == TrialState::Fail {
            attr_text(t, "fail_reason")
        } else {
            t.params
                .iter()
                .map(|p| {
                    use tradetune_engine::storage::ParamValue;
                    let v = match p.external() {
                        Ok(ParamValue::Float(f)) => format!("{f:.6}"),
                        Ok(ParamValue::Int(i)) => i.to_string(),
                        Ok(ParamValue::Choice(c)) => c.to_json().dumps(),
                        Err(_) => "?".into(),
                    };
                    format!("{}={v}", p.name)
                })
                .collect::<Vec<_>>()
                .join(" ")
        };
        println!(
            "{:>6} {:<9} {:>11} {:<8} {:<9} {:<5} {:>9}  {detail}",
            t.number,
            t.state.as_str(),
            t.value().map_or("-".into(), |v| format!("{v:.5}")),
            attr_text(t, "device"),
            attr_text(t, "worker"),
            attr_text(t, "precision"),
            duration
        );
    }
    if let Some((n, v)) = best {
        println!("best: #{n} value {v:.6}");
    }
    Ok(())
}

fn export(args: ExportArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.trials.is_some() || args.telemetry.is_some(),
        "say what to export: --trials FILE.csv and/or --telemetry FILE.csv"
    );
    let db = db_path(args.db)?;
    launch::require_db(&db)?;
    let storage = Storage::open_read_only(&db)?;
    let study = storage.study(&args.name)?;
    let trials = storage.trials(study.study_id)?;
    if let Some(path) = &args.trials {
        let mut out = Vec::new();
        storage.export_csv(&args.name, &mut out)?;
        std::fs::write(path, out).with_context(|| format!("writing {}", path.display()))?;
        println!(
            "{} trials of '{}' -> {}",
            trials.len(),
            args.name,
            path.display()
        );
    }
    if let Some(path) = &args.telemetry {
        let out = export_telemetry(&storage, &trials, path)?;
        if out.skipped > 0 {
            eprintln!(
                "telemetry of '{}': {} samples of unknown sources or metrics left out",
                study.name, out.skipped
            );
        }
        println!(
            "{} telemetry samples of '{}' -> {}",
            out.rows,
            args.name,
            path.display()
        );
    }
    Ok(())
}

fn presets(args: PresetsArgs) -> anyhow::Result<()> {
    let presets = preset::bundled()?;
    if args.json {
        let v: Vec<serde_json::Value> = presets
            .iter()
            .map(|p| {
                serde_json::json!({
                    "name": p.name,
                    "device_class": p.device_class,
                    "memory_bytes": p.memory_bytes,
                    "description": p.study.study.description,
                    "workers": p.study.study.workers,
                    "devices": p.study.study.devices,
                    "n_trials": p.study.study.n_trials,
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    for p in &presets {
        println!(
            "{:<15} {:<42} {}",
            p.name,
            p.device_class,
            p.study.study.description.as_deref().unwrap_or("")
        );
    }
    Ok(())
}
