//! Starting a study, shared by `tradetune study run` and the desktop app's Start button: the
//! study file becomes a runner over its data, and a telemetry sampler writes into the study's
//! database and summarises each trial.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tradetune_engine::storage::{Storage, StorageOptions};
use tradetune_engine::study::file::StudyFile;
use tradetune_engine::study::ppo_trial::{PpoTrial, PpoTrialConfig, check_devices, objective_of};
use tradetune_engine::study::runner::{Runner, RunnerConfig};
use tradetune_engine::telemetry::{
    DRM_ROOT, GpuDiscovery, GpuInfo, Sampler, SamplerConfig, SamplerCore, StorageSink,
    SysinfoHostProbe, source,
};

/// `studies.db` in the user's data directory (`~/.local/share/tradetune` on Linux).
pub fn default_db() -> anyhow::Result<PathBuf> {
    let dir = dirs::data_dir()
        .context("no user data directory (HOME unset?); pass --db FILE")?
        .join("tradetune");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir.join("studies.db"))
}

/// A runner for `file` with the settings `rc`, its data loaded; also says where the data came
/// from.
pub fn runner(file: &StudyFile, rc: RunnerConfig) -> anyhow::Result<(Runner, String)> {
    let base = PpoTrialConfig::from_json(&file.base_config)
        .map_err(|e| anyhow::anyhow!("{}: {e}", file.path))?;
    // A device that is not here, or lacks a precision the trials can ask for, refuses the
    // study before any data is loaded or any trial created.
    check_devices(file, &rc.devices)?;
    // Each COMPLETE trial's policy is kept beside the database, for backtests.
    let checkpoints = rc
        .storage
        .parent()
        .unwrap_or(Path::new("."))
        .join("checkpoints")
        .join(&file.study.name);
    let trial = PpoTrial::load(&file.data, &file.split, &base, objective_of(file)?)?
        .with_checkpoints(checkpoints);
    let source = trial.source.clone();
    let runner = Runner::new(
        rc,
        file.space.clone(),
        file.base_config.clone(),
        file.build_sampler()?,
        file.build_pruner()?,
        Arc::new(trial),
    )?;
    Ok((runner, source))
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
