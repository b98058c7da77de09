//! The vectorized multi-asset trading environment.
//!
//! N environments × M assets advance one bar per [`VecEnv::step`]. Semantics (the same in every
//! implementation, see [`config::EnvConfig`] for each rule and its default):
//!
//! 1. advance time one bar; trades execute at the new bar's price (the agent decided on
//!    information up to the previous bar: no look-ahead);
//! 2. trailing stops: a position whose price fell `trailing_stop_pct` below its highest price
//!    since it was opened is sold whole;
//! 3. sells (action < 0 whose cash value reaches the minimum order);
//! 4. forced partial sell of positions held `cooldown_bars` without a trade;
//! 5. buys (action > 0) from ONE shared cash budget, scaled pro rata when the orders ask for
//!    more than the budget, so cash never goes negative;
//! 6. fees both ways; reward; auto-reset with a new start offset when the episode ends.
//!
//! Observation layout per env (`obs_dim = 1 + M + lookback·M·F`):
//! `[cash / value, holding_value_0 / value, …, holding_value_{M-1} / value,
//!   features[t][0][0..F], …, features[t][M-1][0..F], features[t-1][…], …]` — the most recent
//! bar first.

pub mod bench;
pub mod config;
pub mod cpu;
pub mod reference;
pub mod starts;
pub mod tensor;

pub use config::{
    EnvConfig, EnvPlacement, MAX_BARS, MAX_INITIAL_CASH, ResolvedPlacement, RewardKind, StartMode,
};
pub use cpu::CpuVecEnv;
pub use tensor::{DeviceEpisodes, LoggedState, StateLog, TensorVecEnv};

/// A batch of environments stepped together, writing into caller-provided buffers.
///
/// All buffers are row-major with the env index outermost: `obs` is `n_envs × obs_dim`,
/// `actions` is `n_envs × action_dim`, `rewards` and `dones` are `n_envs`.
pub trait VecEnv: Send {
    /// Number of environments N.
    fn n_envs(&self) -> usize;
    /// Length of one env's observation.
    fn obs_dim(&self) -> usize;
    /// Length of one env's action (one per asset for the trading env).
    fn action_dim(&self) -> usize;
    /// Resets every env to a fresh episode and writes the first observations.
    fn reset(&mut self, obs: &mut [f32]);
    /// Applies `actions` (each in [-1, 1]; values outside are clipped), advances every env one
    /// step and writes the next observations, rewards and done flags (1.0 where an episode
    /// ended; that env has already been reset and `obs` holds its new episode's first
    /// observation).
    fn step(&mut self, actions: &[f32], obs: &mut [f32], rewards: &mut [f32], dones: &mut [f32]);

    /// Statistics of the episode `env` finished in the last step, if it finished one.
    fn episode_stats(&self, _env: usize) -> Option<EpisodeStats> {
        None
    }
}

/// Summary of one finished episode.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct EpisodeStats {
    /// Sum of the episode's rewards.
    pub reward_sum: f32,
    /// Steps in the episode.
    pub length: u32,
    /// Final portfolio value / initial cash − 1.
    pub total_return: f32,
    /// The same for the equal-weight buy-and-hold of the episode's assets.
    pub equal_weight_return: f32,
    /// Fees paid during the episode, in cash.
    pub fees: f32,
}

/// Errors of environment construction and stepping.
#[derive(Debug, thiserror::Error)]
pub enum EnvError {
    /// The data is too short for the lookback and episode length.
    #[error(
        "too few bars: {bars} in the split, need {needed} ({detail}); lower lookback or episode_bars, or use more data"
    )]
    TooFewBars {
        bars: usize,
        needed: usize,
        detail: String,
    },
    /// A configuration field has a value the environment cannot use.
    #[error("env.{field} = {value}: {reason}")]
    Config {
        field: &'static str,
        value: String,
        reason: String,
    },
    /// A caller's buffer has the wrong length.
    #[error("{what}: expected {expected} values, got {got}")]
    Buffer {
        what: &'static str,
        expected: usize,
        got: usize,
    },
    /// A tensor operation failed (tensor implementation only).
    #[error("tensor environment: {0}")]
    Tensor(String),
}
