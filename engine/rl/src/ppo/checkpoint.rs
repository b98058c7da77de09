//! Checkpoints: a directory holding the policy weights (burn's burnpack record), Adam's state,
//! the PPO configuration, and the normalisation statistics with the run's counters — everything
//! needed to evaluate the policy or to resume training.
//!
//! ```text
//! DIR/model.bpk        ActorCritic parameters (f32)
//! DIR/optimizer.bpk    Adam moments
//! DIR/ppo.json         PpoConfig (every field)
//! DIR/state.json       CheckpointState: sizes, counters, normalisation statistics (renamed in last)
//! ```

use std::path::{Path, PathBuf};

use burn::config::Config;
use burn::module::Module;
use burn::tensor::Device;
use serde::{Deserialize, Serialize};

use crate::ppo::config::PpoConfig;
use crate::ppo::error::PpoError;
use crate::ppo::model::ActorCritic;
use crate::ppo::rollout_env::RolloutEnv;
use crate::ppo::trainer::{NormalizationStats, Trainer};

/// Version of the checkpoint layout.
pub const CHECKPOINT_VERSION: u32 = 1;

/// The run's state besides weights and config.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckpointState {
    /// Layout version ([`CHECKPOINT_VERSION`]).
    pub version: u32,
    /// Observation length the network takes.
    pub obs_dim: usize,
    /// Action length it produces.
    pub action_dim: usize,
    /// Samples trained on.
    pub timesteps: usize,
    /// Normalisation statistics.
    pub normalization: NormalizationStats,
    /// The f16 loss scale reached (1 for other precisions); absent in older checkpoints,
    /// which resume at the configured initial scale.
    #[serde(default)]
    pub loss_scale: Option<f32>,
}

/// A loaded checkpoint.
#[derive(Debug)]
pub struct Checkpoint {
    /// The configuration it was trained with.
    pub config: PpoConfig,
    /// The policy (on the device it was loaded to).
    pub model: ActorCritic,
    /// Sizes, counters, normalisation.
    pub state: CheckpointState,
}

fn err(path: &Path, reason: impl ToString) -> PpoError {
    PpoError::Checkpoint {
        path: path.display().to_string(),
        reason: reason.to_string(),
    }
}

fn file(dir: &Path, name: &str) -> PathBuf {
    dir.join(name)
}

/// Makes sure a checkpoint can be saved to `dir` before a run spends its time training:
/// creates the directory if needed and writes (then removes) a probe file in it, so a path that
/// is a file, a folder the user may not write to or a mistyped parent is refused at once, not
/// after the run. Returns whether it created the directory (a caller whose run then fails
/// before saving removes it again, if still empty).
pub fn prepare_dir(dir: &Path) -> Result<bool, PpoError> {
    if dir.exists() && !dir.is_dir() {
        return Err(err(
            dir,
            "it is a file, not a directory: a checkpoint is a directory of files",
        ));
    }
    let created = !dir.exists();
    std::fs::create_dir_all(dir).map_err(|e| err(dir, format!("cannot create it: {e}")))?;
    let probe = saving_name(dir, "probe");
    let written = std::fs::write(&probe, b"")
        .map_err(|e| err(dir, format!("cannot write in it: {e}")))
        .and_then(|()| {
            std::fs::remove_file(&probe).map_err(|e| err(&probe, format!("cannot remove it: {e}")))
        });
    if written.is_err() && created {
        let _ = std::fs::remove_dir(dir);
    }
    written.map(|()| created)
}

/// The samples the checkpoint in `dir` was trained on, where `dir` holds one that reads
/// (None: no checkpoint there, or not one this build reads).
pub fn trained_samples(dir: &Path) -> Option<usize> {
    let text = std::fs::read_to_string(file(dir, "state.json")).ok()?;
    let state: CheckpointState = serde_json::from_str(&text).ok()?;
    (state.version == CHECKPOINT_VERSION).then_some(state.timesteps)
}

/// Writes `trainer`'s model, optimiser, config and statistics to `dir` (created if needed);
/// see [`save_with`].
pub fn save<E: RolloutEnv>(dir: &Path, trainer: &Trainer<E>) -> Result<(), PpoError> {
    save_with(dir, trainer, &[])
}

/// The temporary name a checkpoint file is written under before it is renamed into place: in
/// the same directory (so the rename stays on one file system), hidden, ending with its name.
fn saving_name(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!(".{}.saving.{name}", std::process::id()))
}

/// Writes `trainer`'s model, optimiser, config and statistics to `dir` (created if needed),
/// with `extra` files (name, contents) beside them, replacing a checkpoint already there
/// without ever leaving it half-written: every file is first written and synced under a
/// temporary name in `dir`, and only when all of them are whole are they renamed over the
/// old ones, `state.json` (sizes, counters, normalisation) last. A save that fails (a full
/// disk, a file that cannot be written) removes its temporary files and leaves the previous
/// checkpoint as it was.
pub fn save_with<E: RolloutEnv>(
    dir: &Path,
    trainer: &Trainer<E>,
    extra: &[(&str, Vec<u8>)],
) -> Result<(), PpoError> {
    std::fs::create_dir_all(dir).map_err(|e| err(dir, e))?;
    let mut written: Vec<(PathBuf, PathBuf)> = Vec::new();
    let result = write_all_temporary(dir, trainer, extra, &mut written).and_then(|()| {
        for (tmp, path) in &written {
            std::fs::rename(tmp, path).map_err(|e| err(path, format!("cannot replace it: {e}")))?;
        }
        Ok(())
    });
    if result.is_err() {
        for (tmp, _) in &written {
            let _ = std::fs::remove_file(tmp);
        }
    }
    result
}

/// Writes every file of the checkpoint under its temporary name, recording (temporary, final)
/// in `written` in the order they are to be renamed (`state.json` last).
fn write_all_temporary<E: RolloutEnv>(
    dir: &Path,
    trainer: &Trainer<E>,
    extra: &[(&str, Vec<u8>)],
    written: &mut Vec<(PathBuf, PathBuf)>,
) -> Result<(), PpoError> {
    let model_path = file(dir, "model.bpk");
    let tmp = saving_name(dir, "model.bpk");
    written.push((tmp.clone(), model_path.clone()));
    trainer
        .model()
        .valid()
        .save_file(&tmp)
        .map_err(|e| err(&model_path, format!("cannot write it: {e}")))?;
    sync(&tmp, &model_path)?;
    let opt_path = file(dir, "optimizer.bpk");
    let tmp = saving_name(dir, "optimizer.bpk");
    written.push((tmp.clone(), opt_path.clone()));
    trainer
        .learner()
        .save_optimizer(&tmp)
        .map_err(|e| match e {
            PpoError::Checkpoint { reason, .. } => err(&opt_path, reason),
            other => other,
        })?;
    sync(&tmp, &opt_path)?;
    let cfg_path = file(dir, "ppo.json");
    let tmp = saving_name(dir, "ppo.json");
    written.push((tmp.clone(), cfg_path.clone()));
    trainer.config().save(&tmp).map_err(|e| err(&cfg_path, e))?;
    sync(&tmp, &cfg_path)?;
    for (name, bytes) in extra {
        let path = file(dir, name);
        let tmp = saving_name(dir, name);
        written.push((tmp.clone(), path.clone()));
        write_synced(&tmp, &path, bytes)?;
    }
    let state = CheckpointState {
        version: CHECKPOINT_VERSION,
        obs_dim: trainer.env().obs_dim(),
        action_dim: trainer.env().action_dim(),
        timesteps: trainer.timesteps(),
        normalization: trainer.normalization()?,
        loss_scale: Some(trainer.learner().scaler().scale()),
    };
    let state_path = file(dir, "state.json");
    let json = serde_json::to_string_pretty(&state).map_err(|e| err(&state_path, e))?;
    let tmp = saving_name(dir, "state.json");
    written.push((tmp.clone(), state_path.clone()));
    write_synced(&tmp, &state_path, json.as_bytes())
}

/// Writes `bytes` to `tmp` and syncs it; errors name `path`, the file it will become.
fn write_synced(tmp: &Path, path: &Path, bytes: &[u8]) -> Result<(), PpoError> {
    std::fs::write(tmp, bytes).map_err(|e| err(path, format!("cannot write it: {e}")))?;
    sync(tmp, path)
}

/// Flushes the file at `tmp` to disk; errors name `path`, the file it will become.
fn sync(tmp: &Path, path: &Path) -> Result<(), PpoError> {
    std::fs::File::open(tmp)
        .and_then(|f| f.sync_all())
        .map_err(|e| err(path, format!("cannot write it: {e}")))
}

/// Reads the checkpoint in `dir`, building the model on `device`.
pub fn load(dir: &Path, device: &Device) -> Result<Checkpoint, PpoError> {
    let cfg_path = file(dir, "ppo.json");
    let config = PpoConfig::load(&cfg_path).map_err(|e| err(&cfg_path, e))?;
    let state_path = file(dir, "state.json");
    let text = std::fs::read_to_string(&state_path).map_err(|e| err(&state_path, e))?;
    let state: CheckpointState = serde_json::from_str(&text).map_err(|e| err(&state_path, e))?;
    if state.version != CHECKPOINT_VERSION {
        return Err(err(
            &state_path,
            format!(
                "layout version {} but this build reads {CHECKPOINT_VERSION}",
                state.version
            ),
        ));
    }
    let model_path = file(dir, "model.bpk");
    if !model_path.is_file() {
        return Err(err(&model_path, "missing: the checkpoint has no weights"));
    }
    let model = config
        .policy
        .init(state.obs_dim, state.action_dim, config.seed, device)
        .try_load_file(&model_path)
        .map_err(|e| err(&model_path, unreadable_model(e, &state)))?;
    Ok(Checkpoint {
        config,
        model,
        state,
    })
}

/// What went wrong reading a checkpoint's weights, said for its user rather than as burn's
/// error value (`Io("Invalid magic number")`, with Rust's escaped quotes).
fn unreadable_model(e: burn::store::RecordError, state: &CheckpointState) -> String {
    use burn::store::RecordError;
    match e {
        RecordError::Io(why) => format!(
            "cannot read it as a model file TradeTune wrote (damaged, cut short, or another \
             file put in its place): {why}"
        ),
        RecordError::Validation(why) => format!(
            "its weights do not fit the network its ppo.json (policy.net_arch) and state.json \
             (observation {}, action {}) describe: the files come from different runs; {why}",
            state.obs_dim, state.action_dim
        ),
    }
}

/// Restores a checkpoint into `trainer` (same config and sizes) to resume training: weights,
/// Adam's moments, normalisation statistics, the loss scale and the sample and update
/// counters (the learning-rate schedule and the per-update random streams continue from them;
/// the environments start new episodes).
pub fn resume<E: RolloutEnv>(dir: &Path, trainer: &mut Trainer<E>) -> Result<(), PpoError> {
    let device = trainer.train_device().clone();
    let ckpt = load(dir, &device)?;
    if ckpt.state.obs_dim != trainer.env().obs_dim()
        || ckpt.state.action_dim != trainer.env().action_dim()
    {
        return Err(err(
            dir,
            format!(
                "checkpoint is for obs {} / actions {}, the env has {} / {}",
                ckpt.state.obs_dim,
                ckpt.state.action_dim,
                trainer.env().obs_dim(),
                trainer.env().action_dim()
            ),
        ));
    }
    trainer.learner_mut().set_model(ckpt.model);
    trainer
        .learner_mut()
        .load_optimizer(&file(dir, "optimizer.bpk"))?;
    trainer.set_normalization(&ckpt.state.normalization);
    if let Some(scale) = ckpt.state.loss_scale {
        trainer.learner_mut().scaler_mut().restore_scale(scale);
    }
    trainer.set_timesteps(ckpt.state.timesteps);
    Ok(())
}
