//! A launched study's work: load the data and build the runner, record the study, start the
//! telemetry sampler, run the trials, stop the sampler; each step's news as a [`LaunchEvent`].

use std::path::Path;
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use super::{LaunchEvent, StudyHandle, StudyLaunch};
use crate::device::compiling::{CompileActivity, CompileTicker};
use crate::front::FrontError;
use crate::storage::{Storage, StorageError, StorageOptions, is_postgres_url};
use crate::study::file::StudyFile;
use crate::study::ppo_trial::{PpoTrial, PpoTrialConfig, Problem, check_devices};
use crate::study::runner::{Runner, RunnerConfig, StudyEvent, StudyReport};
use crate::telemetry::{
    DRM_ROOT, GpuDiscovery, GpuInfo, Sampler, SamplerConfig, SamplerCore, StorageSink,
    SysinfoHostProbe, source,
};

/// A launched study's work, to run on a thread (see [`StudyLaunch::into_job`]).
pub struct LaunchJob {
    launch: StudyLaunch,
    handle: StudyHandle,
    on_event: Box<dyn FnMut(LaunchEvent) + Send>,
}

impl LaunchJob {
    pub(super) fn new(
        launch: StudyLaunch,
        handle: StudyHandle,
        on_event: impl FnMut(LaunchEvent) + Send + 'static,
    ) -> LaunchJob {
        LaunchJob {
            launch,
            handle,
            on_event: Box::new(on_event),
        }
    }

    /// Runs the study to its end on this thread; its last event is [`LaunchEvent::Finished`].
    pub fn run(self) {
        let LaunchJob {
            launch,
            handle,
            mut on_event,
        } = self;
        let result = run(&launch, &handle, &mut on_event);
        on_event(LaunchEvent::Finished(result));
    }
}

/// The runner settings of the launch: the file's, with its devices, liveness, host and (for a
/// worker) the study's whole budget.
pub(super) fn runner_config(launch: &StudyLaunch) -> Result<RunnerConfig, FrontError> {
    let file = &launch.file;
    let mut rc = file.runner_config(&launch.place.db)?;
    if let Some(devices) = &launch.devices {
        rc.devices = file.device_slots(devices)?;
    }
    rc.heartbeat_interval = launch.liveness.heartbeat;
    rc.stale_after = launch.liveness.stale_after;
    rc.host = launch.host.clone();
    if let Some((budget, _)) = &launch.join {
        rc.study_budget = Some(*budget);
    }
    Ok(rc)
}

fn run(
    launch: &StudyLaunch,
    handle: &StudyHandle,
    on_event: &mut dyn FnMut(LaunchEvent),
) -> Result<StudyReport, FrontError> {
    let db = &launch.place.db;
    // (Checked here, not as the file is read: `study create FILE --trials N` gives the budget
    // of a file that says 0, and studies recorded so are joined.)
    if launch.file.study.n_trials == 0 {
        return Err(launch
            .file
            .key_error(
                "study.n_trials",
                "need at least one trial (0 would record the study and run nothing)".into(),
            )
            .into());
    }
    let mut rc = runner_config(launch)?;
    // A study created for workers keeps its whole budget when run rather than joined (`study
    // run` of its file, the app's Start): this run's trials are counted with the workers'.
    if launch.join.is_none() {
        rc.study_budget = recorded_budget(db, &launch.file.study.name);
    }
    let prepared = prepare(&launch.file, rc, &launch.place.checkpoints)?;
    if let Some((_, recorded)) = &launch.join
        && *recorded != prepared.fingerprint
    {
        return Err(FrontError::DataMismatch {
            study: launch.file.study.name.clone(),
            here: prepared.fingerprint,
            recorded: recorded.clone(),
            data: prepared.source,
        });
    }
    record(launch, &prepared)?;
    on_event(LaunchEvent::Ready {
        source: prepared.source,
        fingerprint: prepared.fingerprint,
    });
    let sampler = match launch.liveness.telemetry {
        None => None,
        Some(interval) => match telemetry_sampler(db, interval) {
            Ok(s) => Some(s),
            Err(e) => {
                on_event(LaunchEvent::Notice(format!(
                    "warning: telemetry is not recorded for this study: {e}"
                )));
                None
            }
        },
    };
    let (runner, sampler) = match sampler {
        Some((s, gpus)) => (
            prepared
                .runner
                .with_telemetry(s.handle())
                .with_telemetry_gpus(gpus),
            Some(s),
        ),
        None => (prepared.runner, None),
    };
    handle.attach(runner.stop_handle());
    let (tx, rx) = mpsc::channel();
    // The process's compiling, said while the runner's events wait (a trial's first update
    // sends nothing until it is done).
    let mut compiling = CompileActivity::new();
    const FAILURES_EVERY: Duration = Duration::from_secs(60);
    let mut failures_said: Option<Instant> = None;
    let result = std::thread::scope(|scope| {
        let running = scope.spawn(|| {
            let r = runner.run(&tx);
            drop(tx);
            r
        });
        loop {
            match rx.recv_timeout(CompileTicker::POLL) {
                Ok(event) => {
                    // Its totals before the study's last word.
                    if matches!(event, StudyEvent::StudyFinished { .. })
                        && let Some(status) = compiling.finish()
                    {
                        on_event(LaunchEvent::Compiling(status));
                    }
                    on_event(LaunchEvent::Study(event));
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
            if let Some(status) = compiling.poll() {
                on_event(LaunchEvent::Compiling(status));
            }
            // Once a trial's GPU has opened: its cache's trouble, if any, while the study runs
            // (the CLI's stderr, the app's notices).
            if let Some(line) = crate::device::kernels::store_warning_once() {
                on_event(LaunchEvent::Notice(line));
            }
            // Its reads and writes that fail later (a full disk): the first as its trials
            // meet them, then at most a line a minute.
            if failures_said.is_none_or(|t| t.elapsed() >= FAILURES_EVERY)
                && let Some(line) = crate::device::cache_store::failures_warning_unsaid()
            {
                on_event(LaunchEvent::Notice(line));
                failures_said = Some(Instant::now());
            }
        }
        if let Some(status) = compiling.finish() {
            on_event(LaunchEvent::Compiling(status));
        }
        if let Some(line) = crate::device::cache_store::failures_warning_unsaid() {
            on_event(LaunchEvent::Notice(line));
        }
        match running.join() {
            Ok(r) => r.map_err(FrontError::from),
            Err(_) => Err(FrontError::Invalid("the study runner panicked".into())),
        }
    });
    if let Some(s) = sampler {
        let stats = s.stop();
        if let Some(e) = stats.last_sink_error {
            on_event(LaunchEvent::Notice(format!(
                "warning: telemetry: {} rows not stored: {e}",
                stats.rows_dropped
            )));
        }
    }
    result
}

/// Records the study file with the study (created here if new, as the runner would, with the
/// fingerprint of the data loaded here), so that a re-run and `tradetune worker` find it
/// whichever front end started the study. A study that already holds one (created for workers,
/// or run before) keeps it, and is refused where its recorded data fingerprint is not this
/// data's: its trials would be compared on other bars.
/// The whole budget recorded with study `name` in `db` where it was created for workers
/// (`study create`); none for a study only run, or not there yet (a database that cannot be
/// read is said by the run's own opening of it).
fn recorded_budget(db: &std::path::Path, name: &str) -> Option<usize> {
    let storage = Storage::open_read_only(db).ok()?;
    super::RecordedStudy::of(&storage.study(name).ok()?)?.budget
}

/// Opens `db` for writing, making a SQLite file's folder first (`--db runs/new/studies.db`).
pub(super) fn open_for_writing(db: &std::path::Path) -> Result<Storage, FrontError> {
    if !is_postgres_url(&db.to_string_lossy())
        && let Some(dir) = db.parent().filter(|d| !d.as_os_str().is_empty())
    {
        std::fs::create_dir_all(dir).map_err(|e| FrontError::file(dir, e))?;
    }
    Ok(Storage::open(db)?)
}

fn record(launch: &StudyLaunch, prepared: &Prepared) -> Result<(), FrontError> {
    let db = &launch.place.db;
    let name = &launch.file.study.name;
    // A SQLite file not made yet holds no study of this name: a name no new study may have
    // is refused before the file is made (an empty database was left behind).
    if !is_postgres_url(&db.to_string_lossy()) && !db.exists() {
        crate::study::file::check_study_name(name)
            .map_err(|e| launch.file.key_error("study.name", e))?;
    }
    let mut storage = open_for_writing(db)?;
    // Twice at most: a study another process created between the lookup and the creation
    // here (two `study run`s of one new study started at once) is then found and checked.
    for _ in 0..2 {
        if record_once(launch, prepared, &mut storage)? {
            return Ok(());
        }
    }
    Err(StorageError::DuplicateStudy(name.clone()).into())
}

/// [`record`] once: false where the study was created by another process meanwhile (it is
/// then there to look up again).
fn record_once(
    launch: &StudyLaunch,
    prepared: &Prepared,
    storage: &mut Storage,
) -> Result<bool, FrontError> {
    let name = &launch.file.study.name;
    match storage.study(name) {
        // Checked before the record is written: a study this run refuses is left as it was.
        Ok(study) => {
            crate::study::runner::check_direction(&study, launch.file.direction())?;
            check_distributions(launch, storage, &study)?;
            match super::RecordedStudy::of(&study) {
                // A study another program made (or one run before studies were recorded):
                // this run's file is its record from now on, with this data's fingerprint,
                // so that a later run on other data is refused as for any other study.
                None => {
                    let mut record = launch.record.clone();
                    record.fingerprint = Some(prepared.fingerprint.clone());
                    record.write(storage, study.study_id)?;
                }
                Some(recorded) => {
                    if let Some(f) = &recorded.fingerprint
                        && *f != prepared.fingerprint
                    {
                        return Err(FrontError::DataMismatch {
                            study: name.clone(),
                            here: prepared.fingerprint.clone(),
                            recorded: f.clone(),
                            data: prepared.source.clone(),
                        });
                    }
                    // The recorded file as this version reads it (its data paths play no
                    // part): one it no longer reads cannot be compared, and is not.
                    let data_dir = recorded.source_dir().unwrap_or_default();
                    if let Ok(before) = recorded.study_file(name, &data_dir) {
                        let changes = super::changed_settings(&before, &launch.file);
                        if !changes.is_empty() {
                            return Err(FrontError::StudyChanged {
                                path: launch.file.path.clone(),
                                study: name.clone(),
                                changes,
                            });
                        }
                    }
                }
            }
        }
        Err(StorageError::UnknownStudyName { .. }) => {
            // A new study's name becomes its checkpoints' folder.
            crate::study::file::check_study_name(name)
                .map_err(|e| launch.file.key_error("study.name", e))?;
            let mut record = launch.record.clone();
            record.fingerprint = Some(prepared.fingerprint.clone());
            match record.create(storage, name, launch.file.direction()) {
                Err(StorageError::DuplicateStudy(_)) => return Ok(false),
                other => {
                    other?;
                }
            }
        }
        Err(e) => return Err(e.into()),
    }
    Ok(true)
}

/// Refuses a searched parameter whose distribution the study's stored trials make
/// incompatible (Optuna's rule: a parameter keeps its kind, a categorical its choices; a
/// range may move): each worker's first trial would fail on it, stored FAIL, before the
/// worker stopped.
fn check_distributions(
    launch: &StudyLaunch,
    storage: &Storage,
    study: &crate::storage::StudyRecord,
) -> Result<(), FrontError> {
    let trials = storage.trials(study.study_id)?;
    for (name, wanted) in launch.file.space.iter() {
        let stored = (trials.iter())
            .flat_map(|t| &t.params)
            .find(|p| p.name == name)
            .and_then(|p| {
                let reason = p.distribution.compatibility_with(wanted).err()?;
                Some((p.distribution.to_optuna_json(), reason))
            });
        // A float range the model refused on reading (Optuna's `FloatDistribution(0, inf)`,
        // set aside) is held to Optuna's rule as writing would hold it.
        let set_aside = || {
            (trials.iter())
                .flat_map(|t| &t.set_aside)
                .filter(|s| s.name == name)
                .find_map(|s| match s.compatibility_with(wanted) {
                    Some(Err(reason)) => Some((s.text.clone(), reason.to_owned())),
                    _ => None,
                })
        };
        if let Some((text, reason)) = stored.or_else(set_aside) {
            return Err(launch
                .file
                .key_error(
                    &format!("search.\"{name}\""),
                    format!(
                        "study '{}' holds trials that searched it as {text}: {reason} (a \
                         parameter keeps its kind and a categorical its choices within a \
                         study); give this run another study name",
                        study.name,
                    ),
                )
                .into());
        }
    }
    Ok(())
}

/// A runner and what its data is.
pub(super) struct Prepared {
    pub runner: Runner,
    /// Where the data came from, for people.
    pub source: String,
    /// The loaded market data's fingerprint.
    pub fingerprint: String,
}

/// A runner for `file` with the settings `rc`, its data loaded, writing each COMPLETE trial's
/// policy under `checkpoints` (for backtests).
pub(super) fn prepare(
    file: &StudyFile,
    rc: RunnerConfig,
    checkpoints: &Path,
) -> Result<Prepared, FrontError> {
    let base = PpoTrialConfig::from_json(&file.base_config)
        .map_err(|e| file.key_error("fixed", e.to_string()))?;
    // A device that is not here, or lacks a precision the trials can ask for, refuses the
    // study before any data is loaded or any trial created.
    check_devices(file, &rc.devices)?;
    let trial = PpoTrial::load(&file.data, &file.split, &base, file.study.objective)?
        // One folder under `checkpoints` whatever the name (a study stored by Optuna or before
        // names were checked may hold a `/` or `..`).
        .with_checkpoints(checkpoints.join(crate::front::export::file_name_part(&file.study.name)))
        .searching(&file.space)
        .with_evaluation(&file.evaluation)?;
    // Settings every trial would fail on before it trains (a fixed batch larger than any
    // rollout the search allows, a lookback longer than the data's splits leave room for)
    // refuse the study here, not trial by trial.
    if let Some(problems) =
        PpoTrialConfig::unrunnable(&file.base_config, &file.space, |c| trial.refused(c))
    {
        return Err(unrunnable_error(file, &problems));
    }
    let source = trial.source.clone();
    let fingerprint = trial.data_fingerprint();
    let runner = Runner::new(
        rc,
        file.space.clone(),
        file.base_config.clone(),
        file.build_sampler()?,
        file.build_pruner()?,
        Arc::new(trial),
    )?
    // The pruner's settings, for the Studies panel's threshold lines.
    .with_study_attr(crate::study::file::PRUNER_ATTR, file.pruner.to_attr());
    Ok(Prepared {
        runner,
        source,
        fingerprint,
    })
}

/// The study's refusal when no trial of it could run: its first problem names the key that
/// sets its setting (the `[search]` range, else the `[fixed]` line, where the file has one),
/// the other problems said after it.
fn unrunnable_error(file: &StudyFile, problems: &[Problem]) -> FrontError {
    // Too few bars for the episodes is the lookback's and the episodes' length together: where
    // the episodes' length is fixed and the lookback searched, the lookback is named (a
    // lookback too long on its own is the lookback's whatever else is searched).
    let first = problems.first().map(|p| {
        let searched = |f: &str| file.space.get(f).is_some();
        if p.field == "env.episode_bars" && !searched(&p.field) && searched("env.lookback") {
            "env.lookback".to_owned()
        } else {
            p.field.clone()
        }
    });
    let key = match first {
        Some(f) if file.space.get(&f).is_some() => format!("search.\"{f}\""),
        Some(f) if f.contains('.') => format!("fixed.{f}"),
        _ => "fixed".to_owned(),
    };
    let said: Vec<String> = problems
        .iter()
        // PPO's and the environment's messages name their setting already.
        .map(|p| {
            if p.message.contains(&p.field) {
                p.message.clone()
            } else {
                format!("{}: {}", p.field, p.message)
            }
        })
        .collect();
    let scope = if file.space.is_empty() {
        "no trial of this study can run (it searches nothing)"
    } else {
        "no trial of this study can run (at either end of every searched range)"
    };
    FrontError::from(file.key_error(&key, format!("{scope}: {}", said.join("; "))))
}

/// A telemetry sampler (CPU, process and whatever GPUs answer) every `interval`, writing its
/// rows into the study database `db`, tagged by trial; with the cards its probes see (in its
/// `gpuN` order) for [`Runner::with_telemetry_gpus`].
pub fn telemetry_sampler(
    db: &Path,
    interval: Duration,
) -> Result<(Sampler, Vec<GpuInfo>), FrontError> {
    let config = SamplerConfig::with_interval(interval)?;
    let pid = std::process::id();
    let host = SysinfoHostProbe::new(Some(pid))?;
    let discovery = GpuDiscovery::discover(Path::new(DRM_ROOT), pid);
    let gpus = discovery.devices();
    let sources = source::sources(discovery, Some(Box::new(host)));
    // Opening the database here also recovers trials of dead processes; the runner reports
    // them since it opens with the same grace period.
    let sink = StorageSink::new(Storage::open_with(
        db,
        &StorageOptions {
            stale_after: None,
            ..Default::default()
        },
    )?);
    let core = SamplerCore::new(config, sources, Some(Box::new(sink)))?;
    Ok((Sampler::start(core)?, gpus))
}
