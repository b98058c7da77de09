//! Starting a study, shared by `tradetune study run`, `tradetune worker` and the desktop app's
//! Start button: the study file becomes a runner over its data, and a telemetry sampler writes
//! into the study's database and summarises each trial.

use std::path::Path;
use std::sync::{Arc, mpsc};
use std::time::Duration;

use super::FrontError;
use crate::storage::{Storage, StorageOptions};
use crate::study::file::StudyFile;
use crate::study::ppo_trial::{PpoTrial, PpoTrialConfig, check_devices};
use crate::study::runner::{Runner, RunnerConfig, StopHandle, StudyEvent, StudyReport};
use crate::telemetry::{
    DRM_ROOT, GpuDiscovery, GpuInfo, Sampler, SamplerConfig, SamplerCore, StorageSink,
    SysinfoHostProbe, source,
};

/// A runner and what its data is.
pub struct Prepared {
    pub runner: Runner,
    /// Where the data came from, for people.
    pub source: String,
    /// The loaded market data's fingerprint (which `tradetune worker` compares with the
    /// study's).
    pub fingerprint: String,
}

/// A runner for `file` with the settings `rc`, its data loaded, writing each COMPLETE trial's
/// policy under `checkpoints` (for backtests).
pub fn prepare(
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
        .with_checkpoints(checkpoints.join(&file.study.name))
        .with_evaluation(&file.evaluation)?;
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

/// A study's runner with its telemetry sampler attached (when there is one): what
/// `tradetune study run`, `tradetune worker` and the app's Start button all run.
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
    ) -> (Result<StudyReport, FrontError>, Option<String>) {
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
                Ok(r) => r.map_err(FrontError::from),
                Err(_) => Err(FrontError::Invalid("the study runner panicked".into())),
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
