//! What both front ends do, behind one small API: the CLI's subcommands and the desktop app's
//! background tasks call these, and neither re-implements them.
//!
//! - [`launch`]: a study from a study file, a preset, the study recorded in a database or the
//!   app's Configure panel, launched: its handle stops it from the start, its events arrive on
//!   a channel; its study file is recorded with it, with its overrides (and read back for
//!   workers and re-runs), beside its checkpoints, heartbeat and telemetry.
//! - [`backtest`]: a checkpoint's deterministic policy over a held-out split.
//! - [`compare`]: two studies or trials side by side, with their telemetry.
//! - [`export`]: a study's telemetry as one wide CSV.
//! - [`report`]: a study's best trial, PBO and deflated Sharpe ratio; [`reseed`]: the best
//!   trial's spread over seeds on the test split.
//! - [`speed`]: each trial's achieved samples/s against its configuration's alone on this
//!   machine, with the cause of a gap.
//! - [`format`]: numbers to 4 significant digits, as tables and text reports show them.
//! - [`data_source`]: where a run's market data comes from, and the files a checkpoint
//!   directory holds besides the model.
//!
//! Errors describe the problem in the engine's words ([`FrontError`]); each front end adds
//! its own hint (a flag, a field).

pub mod backtest;
pub mod compare;
pub mod data_source;
pub mod export;
pub mod format;
pub mod launch;
pub mod report;
pub mod reseed;
pub mod speed;

use std::path::{Path, PathBuf};

/// Why a front-door operation failed.
#[derive(Debug, thiserror::Error)]
pub enum FrontError {
    /// A file that cannot be read, parsed or written, and why.
    #[error("{}: {message}", path.display())]
    File { path: PathBuf, message: String },
    /// A request that cannot be served as asked (a study or trial that is not there, a
    /// setting out of range).
    #[error("{0}")]
    Invalid(String),
    /// A study that has no study file recorded with it, or (joining it) no budget and data
    /// fingerprint: it was not created for workers.
    #[error("study '{study}' has no study file, budget and data fingerprint recorded with it")]
    NotRecorded { study: String },
    /// The market data loaded here is not the data the study was created on.
    #[error(
        "this machine's market data differs from study '{study}''s: fingerprint {here} here, \
         {recorded} recorded ({data})"
    )]
    DataMismatch {
        study: String,
        here: String,
        recorded: String,
        data: String,
    },
    /// A study run again from a study file whose settings change what its trials' values
    /// mean (the objective, the split, the evaluation, a fixed trial setting): the new trials
    /// would be ranked with the old ones while measuring something else.
    #[error(
        "{path}: study '{study}' was run with other settings, which change what its trials' \
         values mean: {}. Its trials and this run's would be ranked together as one: undo the \
         change to add trials to the study, or give this run another study name to start a new \
         one",
        changes.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
    )]
    StudyChanged {
        path: String,
        study: String,
        changes: Vec<launch::ChangedSetting>,
    },
    #[error(transparent)]
    Storage(#[from] crate::storage::StorageError),
    #[error(transparent)]
    Device(#[from] crate::device::DeviceError),
    #[error(transparent)]
    Ppo(#[from] crate::ppo::PpoError),
    #[error(transparent)]
    Eval(#[from] crate::eval::EvalError),
    #[error(transparent)]
    Data(#[from] crate::market::DataError),
    #[error(transparent)]
    Split(#[from] crate::market::split::SplitError),
    #[error(transparent)]
    StudyFile(#[from] crate::study::file::StudyFileError),
    #[error(transparent)]
    Runner(#[from] crate::study::runner::RunnerError),
    #[error(transparent)]
    Telemetry(#[from] crate::telemetry::TelemetryError),
}

/// A run that could not be built: the environment's refusal is a request that cannot be served
/// as asked, the trainer's is its own.
impl From<crate::study::ppo_trial::TrainingRunError> for FrontError {
    fn from(e: crate::study::ppo_trial::TrainingRunError) -> Self {
        use crate::study::ppo_trial::TrainingRunError;
        match e {
            TrainingRunError::Ppo(e) => FrontError::Ppo(e),
            TrainingRunError::Env(e) => FrontError::Invalid(e.to_string()),
            TrainingRunError::Memory(e) => FrontError::Invalid(e.to_string()),
        }
    }
}

impl FrontError {
    /// An error about the file `path`.
    pub fn file(path: &Path, message: impl std::fmt::Display) -> FrontError {
        FrontError::File {
            path: path.to_owned(),
            message: message.to_string(),
        }
    }
}

/// Min, median and max of `v`, NaNs left out (None when nothing is left): how repeated runs
/// (benchmarks, seeds) are summarised.
pub fn min_median_max(v: &[f64]) -> Option<(f64, f64, f64)> {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| !x.is_nan()).collect();
    if s.is_empty() {
        return None;
    }
    s.sort_by(f64::total_cmp);
    let n = s.len();
    let median = if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    };
    Some((s[0], median, s[n - 1]))
}

/// Reads a JSON file as `T`; errors name the file.
pub(crate) fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, FrontError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| FrontError::file(path, format!("cannot read it: {e}")))?;
    serde_json::from_str(&text).map_err(|e| FrontError::file(path, format!("not valid: {e}")))
}
