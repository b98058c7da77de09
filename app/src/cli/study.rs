//! `tradetune study`: run hyperparameter studies (from a study file or a preset), record one in
//! a shared database for `tradetune worker`s, list the studies of a database, export a study's
//! trials and telemetry as CSV.

use std::path::PathBuf;

use anyhow::Context;

use crate::launch;
use clap::{Args, Subcommand};
use tradetune_engine::front::export::{export_telemetry, write_whole};
use tradetune_engine::storage::{Storage, TrialRecord, TrialState};
use tradetune_engine::study::preset;

pub mod args;
pub mod drive;
pub mod importance;
pub mod note;
pub mod report;
pub mod reseed;
pub mod speed;

pub use args::{LivenessArgs, StudyFileArgs};
pub use drive::{drive, outcome};

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
    /// deflated Sharpe ratio (PBO and the deflated Sharpe need a cross-validated study:
    /// [evaluation] cpcv or walk_forward), and the best trial's policy on the test split.
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
    #[command(flatten)]
    pub study: StudyFileArgs,
    /// The study database: a SQLite file (Optuna's schema) or postgresql://user@host[:port]/dbname
    /// (password from ~/.pgpass or PGPASSWORD). Default: studies.db in the user data dir.
    #[arg(long, alias = "storage", value_parser = crate::launch::study_location)]
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

#[derive(Debug, Args)]
pub struct CreateArgs {
    #[command(flatten)]
    pub study: StudyFileArgs,
    /// The shared database: postgresql://user@host[:port]/dbname (created if missing), or a
    /// SQLite file for workers on this machine.
    #[arg(long, alias = "db", value_parser = crate::launch::study_location)]
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

#[derive(Debug, Args)]
pub struct ListArgs {
    /// The study database: a SQLite file or postgresql://user@host[:port]/dbname.
    #[arg(long, alias = "storage", value_parser = crate::launch::study_location)]
    pub db: Option<PathBuf>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The study's name.
    pub name: String,
    /// The study database: a SQLite file or postgresql://user@host[:port]/dbname.
    #[arg(long, alias = "storage", value_parser = crate::launch::study_location)]
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
    #[arg(long, alias = "storage", value_parser = crate::launch::study_location)]
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

fn create(args: CreateArgs) -> anyhow::Result<()> {
    let place = launch::place(args.storage.clone())?;
    let mut study = args.study.launch(place, &args.set)?;
    if let Some(name) = &args.name {
        study.name(name)?;
    }
    let name = study.file().study.name.clone();
    let budget = args.trials.unwrap_or(study.file().study.n_trials);
    anyhow::ensure!(budget > 0, "--trials: the study needs at least one trial");
    let label = launch::db_label(&args.storage);
    // Loads the data (and checks the devices) exactly as a worker will, for the fingerprint.
    let (data, fingerprint) = study
        .create(budget)
        .with_context(|| format!("creating study {name} in {label}"))?;
    outln!(
        "study '{name}' recorded in {label}: {budget} trials, data {data} (fingerprint {fingerprint})"
    );
    // A worker reads the study file's relative data paths from --data-dir (else from where it
    // runs): the hint gives the folder they were read from here.
    let data_dir = match (&args.study.file, &args.study.preset) {
        (Some(file), _) => std::path::absolute(file)
            .ok()
            .and_then(|f| f.parent().map(|d| format!(" --data-dir {}", shell_word(d))))
            .unwrap_or_default(),
        _ => String::new(),
    };
    outln!("start workers with: tradetune worker --storage {label} --study {name}{data_dir}");
    Ok(())
}

/// `path` as one word of a shell command to copy: as it is where it holds only characters a
/// shell leaves alone, else in single quotes.
fn shell_word(path: &std::path::Path) -> String {
    let s = path.to_string_lossy();
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:@%,=".contains(c))
    {
        s.into_owned()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

fn run_study(args: RunArgs) -> anyhow::Result<()> {
    let db = db_path(args.db.clone())?;
    let mut study = args.study.launch(launch::place(db.clone())?, &args.set)?;
    if let Some(n) = args.trials {
        study.trials(n).context("--trials")?;
    }
    if let Some(w) = args.workers {
        study.workers(w).context("--workers")?;
    }
    if let Some(name) = &args.name {
        study.name(name)?;
    }
    if let Some(devices) = &args.devices {
        study.devices(devices.clone()).context("--devices")?;
    }
    study.liveness(args.liveness.liveness()?);
    // As a worker's: two `study run`s (or one beside workers) on one database stay apart.
    study.host(crate::signals::process_label());
    let name = study.file().study.name.clone();
    let (handle, events, thread) = study.launch();
    crate::signals::interrupt_on_signal(handle);
    let report = drive(events, args.json, |source| {
        outln!("study '{name}' in {}", launch::db_label(&db));
        outln!("data: {source}");
    });
    // The study's events have ended (whatever its result): its thread ends before the process.
    thread.wait();
    let report = report?;
    if !args.json {
        match report.best {
            Some((n, v)) => outln!("best trial of '{}': #{n} value {v:.6}", report.study),
            None => outln!("'{}' has no COMPLETE trial yet", report.study),
        }
    }
    outcome(&report, &format!("study '{name}'"))
}

fn list(args: ListArgs) -> anyhow::Result<()> {
    let given = args.db.is_some();
    let db = db_path(args.db)?;
    // On a fresh machine the default database is not there yet: no studies, not an error.
    if !given && !db.is_file() {
        if args.json {
            outln!("[]");
        } else {
            outln!(
                "no studies yet: {} does not exist (`tradetune study run` makes it)",
                db.display()
            );
        }
        return Ok(());
    }
    launch::require_db(&db)?;
    let summaries = match Storage::open_read_only(&db) {
        Ok(storage) => storage.study_summaries()?,
        // An empty database (a `createdb`'s, before a study is made in it) lists none.
        Err(tradetune_engine::storage::StorageError::EmptyDatabase { .. }) => Vec::new(),
        Err(e) => return Err(e.into()),
    };
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
        outln!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    if summaries.is_empty() {
        outln!("{}: no studies", launch::db_label(&db));
        return Ok(());
    }
    outln!(
        "{:<32} {:>6} {:>8} {:>6} {:>6} {:>7} {:>7}  best",
        "study",
        "trials",
        "complete",
        "pruned",
        "fail",
        "running",
        "waiting"
    );
    for s in &summaries {
        outln!(
            "{:<32} {:>6} {:>8} {:>6} {:>6} {:>7} {:>7}  {}",
            s.study.name,
            s.n_trials(),
            s.n(TrialState::Complete),
            s.n(TrialState::Pruned),
            s.n(TrialState::Fail),
            s.n(TrialState::Running),
            s.n(TrialState::Waiting),
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
    // Rows another client stored that the model refuses (an infinite range, an attribute that
    // does not parse) are set aside on their trials: said on stderr, one line each.
    let set_aside = tradetune_engine::storage::set_aside_notes(&trials);
    for note in &set_aside {
        errln!("{note}");
    }
    if args.json {
        let v = tradetune_engine::storage::study_view_json(&study, &trials, best)?;
        outln!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    outln!(
        "{:>6} {:<9} {:>11} {:<8} {:<9} {:<5} {:>9}  params / reason",
        "number",
        "state",
        "value",
        "device",
        "worker",
        "prec",
        "duration"
    );
    for t in &trials {
        let duration = match (t.datetime_start, t.datetime_complete) {
            (Some(a), Some(b)) => format!("{:.1} s", (b - a).num_milliseconds() as f64 / 1000.0),
            _ => "-".into(),
        };
        let detail = if t.state == TrialState::Fail {
            attr_text(t, "fail_reason")
        } else if t.params.is_empty()
            && let Some(fixed) = t.system_attr("fixed_params")
        {
            // A trial enqueued (Optuna's `enqueue_trial`, a study file's `enqueue`) and not
            // yet started: the parameters it will run with.
            format!("enqueued: {}", fixed.dumps())
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
                // A parameter set aside shows its value where it can be told, marked `*`
                // (the note above says why).
                .chain(
                    t.set_aside
                        .iter()
                        .filter(|s| s.internal.is_some())
                        .map(|s| {
                            let v = s.float_value.map_or("?".into(), |f| format!("{f:.6}"));
                            format!("{}={v}*", s.name)
                        }),
                )
                .collect::<Vec<_>>()
                .join(" ")
        };
        outln!(
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
        outln!("best: #{n} value {v:.6}");
    }
    Ok(())
}

fn export(args: ExportArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.trials.is_some() || args.telemetry.is_some(),
        "say what to export: --trials FILE.csv and/or --telemetry FILE.csv"
    );
    if let (Some(trials), Some(telemetry)) = (&args.trials, &args.telemetry) {
        // `./t.csv` and `t.csv` are one file.
        let absolute = |p: &std::path::Path| std::path::absolute(p).unwrap_or_else(|_| p.into());
        anyhow::ensure!(
            absolute(trials) != absolute(telemetry),
            "--trials and --telemetry both name {}: the second would replace the first; give \
             each its own file",
            trials.display()
        );
    }
    let db = db_path(args.db)?;
    launch::require_db(&db)?;
    let storage = Storage::open_read_only(&db)?;
    let study = storage.study(&args.name)?;
    let trials = storage.trials(study.study_id)?;
    for note in tradetune_engine::storage::set_aside_notes(&trials) {
        errln!("{note}");
    }
    if let Some(path) = &args.trials {
        let mut out = Vec::new();
        storage.export_csv(&args.name, &mut out)?;
        // Whole or not at all: a failed write leaves a previous export as it was.
        write_whole(path, &out)?;
        outln!(
            "{} trials of '{}' -> {}",
            trials.len(),
            args.name,
            path.display()
        );
    }
    if let Some(path) = &args.telemetry {
        let out = export_telemetry(&storage, &trials, path)?;
        if out.skipped > 0 {
            errln!(
                "telemetry of '{}': {} samples of unknown sources or metrics left out",
                study.name,
                out.skipped
            );
        }
        outln!(
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
        outln!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    for p in &presets {
        outln!(
            "{:<15} {:<42} {}",
            p.name,
            p.device_class,
            p.study.study.description.as_deref().unwrap_or("")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::shell_word;
    use std::path::Path;

    #[test]
    fn a_path_is_one_shell_word() {
        assert_eq!(shell_word(Path::new("/data/runs")), "/data/runs");
        assert_eq!(shell_word(Path::new("/my data/x")), "'/my data/x'");
        assert_eq!(shell_word(Path::new("/it's")), "'/it'\\''s'");
    }
}
