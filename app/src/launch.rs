//! Starting a study, shared by `tradetune study run` and the desktop app's Start button: the
//! study file becomes a runner over its data, and a telemetry sampler writes into the study's
//! database and summarises each trial.

use std::path::{Path, PathBuf};
use std::sync::{Arc, mpsc};
use std::time::Duration;

use anyhow::Context;
use tradetune_engine::storage::{Storage, StorageOptions, is_postgres_url, redact};
use tradetune_engine::study::file::StudyFile;
use tradetune_engine::study::ppo_trial::{PpoTrial, PpoTrialConfig, check_devices};
use tradetune_engine::study::runner::{Runner, RunnerConfig, StopHandle, StudyEvent, StudyReport};
use tradetune_engine::telemetry::{
    DRM_ROOT, GpuDiscovery, GpuInfo, Sampler, SamplerConfig, SamplerCore, StorageSink,
    SysinfoHostProbe, source,
};

/// How a study database is named in messages: the path, or the PostgreSQL URL without its
/// password.
pub fn db_label(db: &Path) -> String {
    redact(&db.to_string_lossy())
}

/// A database to read must exist: a SQLite file is checked here (so a typo does not create an
/// empty file); a PostgreSQL database is checked by connecting.
pub fn require_db(db: &Path) -> anyhow::Result<()> {
    if is_postgres_url(&db.to_string_lossy()) {
        return Ok(());
    }
    anyhow::ensure!(
        db.is_file(),
        "{}: no such study database: the file does not exist (give a SQLite file, or \
         postgresql://user@host[:port]/dbname)",
        db.display()
    );
    Ok(())
}

/// `studies.db` in the user's data directory (`~/.local/share/tradetune` on Linux).
pub fn default_db() -> anyhow::Result<PathBuf> {
    let dir = dirs::data_dir()
        .context("no user data directory (HOME unset?); pass --db FILE")?
        .join("tradetune");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir.join("studies.db"))
}

/// Where a study's trial checkpoints go: beside a SQLite database, or under the user data
/// directory for a PostgreSQL one (each machine keeps the checkpoints of the trials it ran).
pub fn checkpoint_root(db: &Path) -> anyhow::Result<PathBuf> {
    if is_postgres_url(&db.to_string_lossy()) {
        let dir = default_db()?;
        return Ok(dir.parent().unwrap_or(Path::new(".")).join("checkpoints"));
    }
    Ok(db.parent().unwrap_or(Path::new(".")).join("checkpoints"))
}

/// A runner for `file` with the settings `rc`, its data loaded; also says where the data came
/// from.
pub fn runner(file: &StudyFile, rc: RunnerConfig) -> anyhow::Result<(Runner, String)> {
    let (runner, source, _) = runner_with_fingerprint(file, rc)?;
    Ok((runner, source))
}

/// [`runner`], with the loaded market data's fingerprint (which `tradetune worker` compares
/// with the study's).
pub fn runner_with_fingerprint(
    file: &StudyFile,
    rc: RunnerConfig,
) -> anyhow::Result<(Runner, String, String)> {
    let base = PpoTrialConfig::from_json(&file.base_config)
        .map_err(|e| anyhow::anyhow!("{}: {e}", file.path))?;
    // A device that is not here, or lacks a precision the trials can ask for, refuses the
    // study before any data is loaded or any trial created.
    check_devices(file, &rc.devices)?;
    // Each COMPLETE trial's policy is kept beside the database, for backtests.
    let checkpoints = checkpoint_root(&rc.storage)?.join(&file.study.name);
    let trial = PpoTrial::load(&file.data, &file.split, &base, file.study.objective)?
        .with_checkpoints(checkpoints);
    let source = trial.source.clone();
    let fingerprint = trial.data_fingerprint();
    let runner = Runner::new(
        rc,
        file.space.clone(),
        file.base_config.clone(),
        file.build_sampler()?,
        file.build_pruner()?,
        Arc::new(trial),
    )?;
    Ok((runner, source, fingerprint))
}

/// A telemetry sampler (CPU, process and whatever GPUs answer) every `interval`, writing its
/// rows into the study database `db`, tagged by trial; with the cards its probes see (in its
/// `gpuN` order) for [`Runner::with_telemetry_gpus`].
pub fn telemetry_sampler(db: &Path, interval: Duration) -> anyhow::Result<(Sampler, Vec<GpuInfo>)> {
    let config = SamplerConfig::with_interval(interval).context("telemetry interval")?;
    let pid = std::process::id();
    let host = SysinfoHostProbe::new(Some(pid)).context("CPU/process probe")?;
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

/// A study's runner with its telemetry sampler attached (when there is one): what
/// `tradetune study run` and the app's Start button both run.
pub struct StudyRun {
    runner: Runner,
    sampler: Option<Sampler>,
}

impl StudyRun {
    /// `runner`, with `sampler`'s telemetry tagged by trial and matched to its cards.
    pub fn new(runner: Runner, sampler: Option<(Sampler, Vec<GpuInfo>)>) -> Self {
        match sampler {
            Some((s, gpus)) => StudyRun {
                runner: runner.with_telemetry(s.handle()).with_telemetry_gpus(gpus),
                sampler: Some(s),
            },
            None => StudyRun {
                runner,
                sampler: None,
            },
        }
    }

    /// Stops the study (or one trial) from another thread.
    pub fn stop_handle(&self) -> StopHandle {
        self.runner.stop_handle()
    }

    /// Runs the study on its own thread and hands each of its events to `on_event` on this
    /// one, then stops the sampler. Returns the report, and a line to show when the sampler
    /// could not store some of its rows.
    pub fn run(
        self,
        mut on_event: impl FnMut(StudyEvent),
    ) -> (anyhow::Result<StudyReport>, Option<String>) {
        let StudyRun { runner, sampler } = self;
        let (tx, rx) = mpsc::channel();
        let result = std::thread::scope(|scope| {
            let handle = scope.spawn(|| {
                let r = runner.run(&tx);
                drop(tx);
                r
            });
            for event in rx.iter() {
                on_event(event);
            }
            match handle.join() {
                Ok(r) => r.map_err(anyhow::Error::from),
                Err(_) => Err(anyhow::anyhow!("the study runner panicked")),
            }
        });
        let lost = sampler.and_then(|s| {
            let stats = s.stop();
            stats
                .last_sink_error
                .map(|e| format!("telemetry: {} rows not stored: {e}", stats.rows_dropped))
        });
        (result, lost)
    }
}
