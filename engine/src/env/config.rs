//! [`EnvConfig`]: every rule of the trading environment, with Stable-Baselines3/FinRL names.

use burn::config::Config;
use serde::{Deserialize, Serialize};

/// What the reward measures each step. All are multiplied by `reward_scale`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum RewardKind {
    /// (Δ portfolio value − Δ value of an equal-weight buy-and-hold of the same assets started
    /// with the same cash at the episode's first bar) / initial cash. Rewards beating the market,
    /// not riding it.
    #[default]
    ExcessVsEqualWeight,
    /// Δ portfolio value / initial cash.
    PortfolioChange,
    /// ln(value_t / value_{t-1}).
    LogReturn,
}

/// Where a new episode starts within the split.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum StartMode {
    /// Uniformly random first bar (seeded), so the N envs do not move in lock-step.
    #[default]
    Random,
    /// Env i's k-th episode starts at offset `(i + k·N) · stride` (wrapping), spreading the
    /// envs evenly over the data.
    Strided,
    /// Every episode starts at the first usable bar (evaluation).
    Fixed,
}

/// Configuration of the vectorized trading environment.
#[derive(Config, Debug, PartialEq)]
pub struct EnvConfig {
    /// Number of environments stepped together (N).
    #[config(default = 8)]
    pub n_envs: usize,
    /// Cash each episode starts with.
    #[config(default = 1_000_000.0)]
    pub initial_cash: f32,
    /// Fee on the value bought, as a fraction (0.0025 = 0.25 %).
    #[config(default = 0.0025)]
    pub buy_fee: f32,
    /// Fee on the value sold, as a fraction.
    #[config(default = 0.0025)]
    pub sell_fee: f32,
    /// Smallest order, in cash, that is executed (smaller ones are ignored); applies to every
    /// asset unless `min_order_values` gives a per-asset value.
    #[config(default = 10.0)]
    pub min_order_value: f32,
    /// Per-asset minimum order values (empty = use `min_order_value` for all).
    #[config(default = "Vec::new()")]
    pub min_order_values: Vec<f32>,
    /// Largest fraction of the cash that the buys of one step may spend, fees included.
    #[config(default = 1.0)]
    pub max_buy_fraction: f32,
    /// Cash value of an action of 1.0, the same for every asset (value-based scaling).
    #[config(default = 100_000.0)]
    pub action_scale: f32,
    /// Trailing stop: sell a whole position when its price falls this fraction below the
    /// highest price since the position was opened. 0 = off.
    #[config(default = 0.0)]
    pub trailing_stop_pct: f32,
    /// A position held this many bars without a trade in that asset is partly sold. 0 = off.
    #[config(default = 48)]
    pub cooldown_bars: usize,
    /// Fraction of the position sold when the cooldown fires.
    #[config(default = 0.05)]
    pub cooldown_sell_fraction: f32,
    /// Number of bars of features in an observation.
    #[config(default = 1)]
    pub lookback: usize,
    /// What the reward measures.
    #[config(default = "RewardKind::ExcessVsEqualWeight")]
    pub reward: RewardKind,
    /// Multiplier of the reward (100 makes a 1 % excess return a reward of 1).
    #[config(default = 100.0)]
    pub reward_scale: f32,
    /// Steps per episode; 0 = the whole split from the first usable bar.
    #[config(default = 0)]
    pub episode_bars: usize,
    /// Where episodes start.
    #[config(default = "StartMode::Random")]
    pub start: StartMode,
    /// Seed of the start offsets.
    #[config(default = 0)]
    pub seed: u64,
    /// Reproduce FinRL_Crypto's `CryptoEnvAlpaca` quirks: the terminal reward replaced by the
    /// discounted sum of the episode's rewards (γ = 0.99), an equal-weight baseline that is not
    /// reset between episodes, and coin-magnitude action scaling (action 1.0 buys
    /// 10^-⌊log10 price⌋·`action_scale`/1e5 units... see `cpu.rs`).
    #[config(default = false)]
    pub compat_finrl_crypto: bool,
}
