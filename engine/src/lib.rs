//! TradeTune's engine: everything that is not UI, behind one crate the front ends import.
//!
//! The engine is a stack of crates, one per layer, so that an import cycle between layers is a
//! compile error; this crate re-exports each under the module name the front ends use:
//!
//! - [`market`] (`tradetune-market`): market data — CSV readers, alignment of assets, features,
//!   splits, synthetic data. Imports no other layer.
//! - [`device`] (`tradetune-device`): training devices, precision and loss scaling, the memory
//!   budget, read counting. Imports no other layer.
//! - [`env`] (`tradetune-env`): the vectorized multi-asset trading environment (CPU and
//!   on-device tensor versions); on market and device.
//! - [`eval`] and [`ppo`] (`tradetune-rl`): deterministic evaluation of a policy on a held-out
//!   split, and the PPO learner on burn; on env, market and device. Evaluation sits below the
//!   learner inside that crate.
//! - [`storage`] (`tradetune-storage`): studies and trials in SQLite, in Optuna's own schema
//!   (Optuna reads our files). Imports no other layer.
//! - [`telemetry`] (`tradetune-telemetry`): GPU, CPU and process probes, the sampler, phase
//!   timers and bottleneck verdicts; on storage.
//! - [`study`] (`tradetune-study`): search spaces, samplers and pruners (Optuna semantics),
//!   presets, study files and the runner; on every layer above.
//!
//! - [`front`] (this crate): the front door both front ends use — start a study and receive
//!   its events and a stop handle, backtest a checkpoint, compare two runs, export telemetry,
//!   resolve a data source and read the checkpoint's data files; on every layer.
//!
//! The engine never imports a UI crate; long-running work reports through engine-defined events.

pub mod front;

pub use tradetune_device as device;
pub use tradetune_env as env;
pub use tradetune_market as market;
pub use tradetune_rl::{eval, ppo};
pub use tradetune_storage as storage;
pub use tradetune_study as study;
pub use tradetune_telemetry as telemetry;
