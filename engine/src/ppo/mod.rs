//! PPO on burn: actor-critic model, rollout buffer, GAE, the update, the training loop,
//! checkpoints and the training benchmark.
//!
//! A run: [`trainer::Trainer::learn`] alternates a rollout of `n_steps × n_envs` samples
//! (policy inference without an autodiff graph, env steps, buffer writes) with an update
//! ([`update::Learner::update`]: `n_epochs` passes of shuffled minibatches, clipped surrogate +
//! value loss − entropy bonus, global-norm clipping, Adam), in the precision of
//! [`crate::device::precision`], reporting [`events::TrainEvent`]s.

pub mod bench;
pub mod buffer;
pub mod checkpoint;
pub mod config;
pub mod error;
pub mod events;
pub mod gae;
pub mod model;
pub mod normalize;
pub mod rollout_env;
pub mod sanity_env;
pub mod trainer;
pub mod update;

pub use config::{LrSchedule, PpoConfig};
pub use error::PpoError;
pub use events::{EpisodeSummary, PhaseTimes, TrainEvent};
pub use model::{ActivationKind, ActorCritic, ActorCriticConfig, NetArch};
pub use rollout_env::{HostEnv, RolloutEnv};
pub use trainer::{PeriodicEval, TrainReport, Trainer};
pub use update::UpdateStats;
