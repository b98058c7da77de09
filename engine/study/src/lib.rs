//! Hyperparameter studies: search spaces, samplers and pruners with Optuna's semantics.
//!
//! - [`space`]: Optuna's distributions (float/int with log and step, categorical; the one model
//!   of [`tradetune_storage::model`]) grouped by name in a [`SearchSpace`].
//! - [`catalogue`]: every setting of a trial and of a study's form, with its dotted name, type,
//!   default, range and doc; the study file, `--set`, `tradetune train --config` and the app's
//!   Configure panel read and check settings through it.
//! - [`config_path`]: applies a sampled value to a configuration by its dotted name
//!   (`ppo.learning_rate`), with an error listing the valid names.
//! - [`sampler`]: random, TPE (Optuna 5.0's default), grid, enqueued fixed trials.
//! - [`pruner`]: median/percentile, successive halving, Hyperband.
//! - [`file`]: the TOML study file (data, split, fixed values, searched ranges, sampler, pruner,
//!   trial budget, workers, devices); errors name the file, line and key.
//! - [`ppo_trial`]: the PPO trial function (train, evaluate on validation, report to the
//!   pruner) and its configuration; [`preset`]: bundled study files per device class.
//! - [`runner`]: K workers over a list of devices running trials into an Optuna storage.
//! - [`bench`]: sampler quality and overhead on standard test functions.
//! - [`importance`]: parameter importance by PED-ANOVA, agreeing with Optuna 5.0's default
//!   `PedAnovaImportanceEvaluator` on the same database.
//! - [`notes`]: a study's and its trials' notes, in the system attributes optuna-dashboard uses.

pub mod bench;
pub mod catalogue;
pub mod config_path;
pub mod file;
pub mod importance;
pub mod notes;
pub mod ppo_trial;
pub mod preset;
pub mod pruner;
pub mod runner;
pub mod sampler;
pub mod space;
pub mod trial;

pub use pruner::{PruneContext, PruneDecision, Pruner};
pub use sampler::{Proposal, SampleContext, Sampler, SamplerError};
pub use space::{CategoricalChoice, InternalParams, OptunaDistribution, ParamValue, SearchSpace};
pub use trial::{Direction, Trial, TrialState};
