//! Errors of PPO training.

use tradetune_env::EnvError;

/// Everything that can stop a training run. Each message names the field or the update
/// concerned and, where there is one, the fix.
#[derive(Debug, thiserror::Error)]
pub enum PpoError {
    /// A configuration field has a value the trainer cannot use.
    #[error("ppo.{field} = {value}: {reason}")]
    Config {
        field: &'static str,
        value: String,
        reason: String,
    },
    /// The trainer's stop flag was raised before `what` was done (no field is at fault).
    #[error("the trainer was stopped before {what}")]
    Stopped { what: &'static str },
    /// The environment failed.
    #[error(transparent)]
    Env(#[from] EnvError),
    /// Reading a tensor back from the device failed.
    #[error("reading {what} from the device: {reason}")]
    Read { what: &'static str, reason: String },
    /// The loss or the parameters became NaN/inf.
    #[error(
        "training diverged at update {update}: {what} is not finite; lower learning_rate, set max_grad_norm, or use f32 precision"
    )]
    Diverged { update: usize, what: String },
    /// The f16 loss scale fell to its floor: every step overflowed.
    #[error(
        "f16 loss scale fell below {floor} at update {update}: the gradients overflow half precision even unscaled; use bf16 or f32"
    )]
    LossScaleUnderflow { update: usize, floor: f32 },
    /// The run needs more memory than its budget allows (see [`tradetune_device::memory`]).
    #[error(transparent)]
    Memory(#[from] tradetune_device::memory::MemoryError),
    /// A device name or capability problem.
    #[error(transparent)]
    Device(#[from] tradetune_device::DeviceError),
    /// A periodic evaluation failed (boxed: an evaluation error may itself hold a `PpoError`).
    #[error("update {update}: {source}")]
    Evaluation {
        update: usize,
        #[source]
        source: Box<crate::eval::EvalError>,
    },
    /// The periodic evaluation's split cannot be evaluated (too few bars for the lookback):
    /// refused when the evaluation is attached, before anything trains.
    #[error(transparent)]
    EvalSplit(Box<crate::eval::EvalError>),
    /// `bench matmul` was asked for a matmul routine cubek does not have.
    #[error("unknown matmul routine '{name}': the routines are {known}")]
    UnknownRoutine { name: String, known: String },
    /// Saving or loading a checkpoint failed.
    #[error("checkpoint {path}: {reason}")]
    Checkpoint { path: String, reason: String },
}

impl PpoError {
    /// A [`PpoError::Config`] for `field`.
    pub fn config(field: &'static str, value: impl ToString, reason: impl Into<String>) -> Self {
        Self::Config {
            field,
            value: value.to_string(),
            reason: reason.into(),
        }
    }

    /// A [`PpoError::Read`] from a burn read error.
    pub fn read(what: &'static str, err: impl std::fmt::Display) -> Self {
        Self::Read {
            what,
            reason: err.to_string(),
        }
    }
}
