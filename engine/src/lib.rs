//! TradeTune's engine: everything that is not UI.
//!
//! - [`market`]: market data — CSV readers, alignment of assets, features, splits, synthetic data.
//! - [`env`]: the vectorized multi-asset trading environment (CPU and on-device tensor versions).
//! - [`storage`]: studies and trials in SQLite, in Optuna's own schema (Optuna reads our files).
//! - [`study`]: hyperparameter search spaces, samplers and pruners (Optuna semantics).
//! - [`ppo`]: the PPO trainer on burn (actor-critic, GAE, clipped updates, mixed precision, checkpoints).
//! - [`eval`]: deterministic evaluation of a policy on a held-out split: metrics, equal-weight
//!   baseline, objectives.
//! - [`device`]: training devices, precision and loss scaling, the memory estimator and budget.
//! - [`telemetry`]: GPU, CPU and process probes, the sampler, phase timers and bottleneck verdicts.
//!
//! The engine never imports a UI crate; long-running work reports through engine-defined events.

pub mod device;
pub mod env;
pub mod eval;
pub mod market;
pub mod ppo;
pub mod storage;
pub mod study;
pub mod telemetry;
