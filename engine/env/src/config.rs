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
    /// Random first bars (seeded), stratified: the N envs start on N distinct bars spread
    /// over the usable range, shifted by a random offset every episode, so they never move in
    /// lock-step.
    #[default]
    Random,
    /// Env i's k-th episode starts at offset `(i + k·N) · stride` (wrapping), spreading the
    /// envs evenly over the data.
    Strided,
    /// Every episode starts at the first usable bar (evaluation).
    Fixed,
}

/// Where the environment steps: on the trainer's device as tensors ([`crate::TensorVecEnv`],
/// the market data uploaded once, no host round trip per step) or on the host
/// ([`crate::CpuVecEnv`], actions read back and observations uploaded every step).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum EnvPlacement {
    /// On the host for the CPU; on a GPU where a rollout step measures cheaper (the trial
    /// runner measures and keeps the decision: `tradetune_study`'s `ppo_trial::placement`).
    #[default]
    Auto,
    Device,
    Host,
}

/// Where an environment ended up: [`EnvPlacement`] resolved for one device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResolvedPlacement {
    Device,
    Host,
}

impl ResolvedPlacement {
    /// `device` or `host`, as trials record it (user attribute `env_placement`).
    pub fn name(self) -> &'static str {
        match self {
            ResolvedPlacement::Device => "device",
            ResolvedPlacement::Host => "host",
        }
    }
}

impl EnvPlacement {
    /// The placement on a device that is (`on_cpu`) or is not the CPU.
    pub fn resolve(self, on_cpu: bool) -> ResolvedPlacement {
        match self {
            EnvPlacement::Auto if on_cpu => ResolvedPlacement::Host,
            EnvPlacement::Auto | EnvPlacement::Device => ResolvedPlacement::Device,
            EnvPlacement::Host => ResolvedPlacement::Host,
        }
    }
}

/// The largest `lookback` and `episode_bars`: 2²⁴ bars, the counts f32 holds exactly (the step
/// kernel's parameters and the state log's bar are f32).
pub const MAX_BARS: usize = 1 << 24;

/// The largest `initial_cash`. Cash is kept in f32: at 1e9 its spacing is 64, so an order is
/// charged within ±32 of its value, well under a fee; at 1e12 the spacing is 65,536 and a
/// 100,000 buy is charged about 35 % too much.
pub const MAX_INITIAL_CASH: f32 = 1e9;

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
    /// Steps per episode. 0 = auto: with a fixed start (evaluation) the whole split from the
    /// first usable bar; otherwise half the split, so the N envs start on N distinct bars spread
    /// over the other half instead of moving in lock-step over the same data.
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
    /// reset between episodes, and coin-magnitude action scaling (see
    /// [`EnvConfig::compat_units`]).
    #[config(default = false)]
    pub compat_finrl_crypto: bool,
    /// Where the environment steps: `auto` (also when absent, as in older checkpoints) on the
    /// host for the CPU and, on a GPU, where a rollout step measures cheaper; `device` or `host`.
    pub placement: Option<EnvPlacement>,
}

impl EnvConfig {
    /// Where this environment steps on a device that is (`on_cpu`) or is not the CPU, by its
    /// configuration alone: `auto` on a GPU is the device here (what a memory estimate assumes;
    /// the trial runner measures the run's actual placement).
    pub fn placement_on(&self, on_cpu: bool) -> ResolvedPlacement {
        self.placement.unwrap_or_default().resolve(on_cpu)
    }

    /// Length of one env's observation on `n_assets` assets with `n_features` features each:
    /// cash, the holdings, and `lookback` bars of every feature of every asset.
    pub fn obs_dim(&self, n_assets: usize, n_features: usize) -> usize {
        1 + n_assets + self.lookback * n_assets * n_features
    }

    /// Checks every field against what the environment can use, for `n_assets` assets.
    pub fn validate(&self, n_assets: usize) -> Result<(), crate::EnvError> {
        use crate::EnvError;
        let bad = |field: &'static str, value: String, reason: &str| {
            Err(EnvError::Config {
                field,
                value,
                reason: reason.to_owned(),
            })
        };
        let frac = |v: f32| v.is_finite() && (0.0..1.0).contains(&v);
        if self.n_envs == 0 {
            return bad("n_envs", "0".into(), "need at least one environment");
        }
        if !(self.initial_cash.is_finite() && self.initial_cash > 0.0) {
            return bad(
                "initial_cash",
                self.initial_cash.to_string(),
                "must be a positive amount",
            );
        }
        if self.initial_cash > MAX_INITIAL_CASH {
            return bad(
                "initial_cash",
                self.initial_cash.to_string(),
                "must be at most 1e9: cash is accounted in f32, which above that rounds every \
                 order's cost by more than its fee (give prices and cash in a larger unit)",
            );
        }
        if !frac(self.buy_fee) {
            return bad("buy_fee", self.buy_fee.to_string(), "must be in [0, 1)");
        }
        if !frac(self.sell_fee) {
            return bad("sell_fee", self.sell_fee.to_string(), "must be in [0, 1)");
        }
        if !(self.min_order_value.is_finite() && self.min_order_value >= 0.0) {
            return bad(
                "min_order_value",
                self.min_order_value.to_string(),
                "must be ≥ 0",
            );
        }
        if !self.min_order_values.is_empty() {
            if self.min_order_values.len() != n_assets {
                return bad(
                    "min_order_values",
                    format!("{} values", self.min_order_values.len()),
                    &format!("need one per asset ({n_assets}) or none"),
                );
            }
            if let Some(v) = self
                .min_order_values
                .iter()
                .find(|v| !(v.is_finite() && **v >= 0.0))
            {
                return bad("min_order_values", v.to_string(), "must all be ≥ 0");
            }
        }
        if !(self.max_buy_fraction.is_finite()
            && self.max_buy_fraction > 0.0
            && self.max_buy_fraction <= 1.0)
        {
            return bad(
                "max_buy_fraction",
                self.max_buy_fraction.to_string(),
                "must be in (0, 1]",
            );
        }
        if !(self.action_scale.is_finite() && self.action_scale > 0.0) {
            return bad(
                "action_scale",
                self.action_scale.to_string(),
                "must be a positive cash amount",
            );
        }
        if !frac(self.trailing_stop_pct) {
            return bad(
                "trailing_stop_pct",
                self.trailing_stop_pct.to_string(),
                "must be in [0, 1) (0 = off)",
            );
        }
        if !(self.cooldown_sell_fraction.is_finite()
            && (0.0..=1.0).contains(&self.cooldown_sell_fraction))
        {
            return bad(
                "cooldown_sell_fraction",
                self.cooldown_sell_fraction.to_string(),
                "must be in [0, 1]",
            );
        }
        if self.lookback == 0 {
            return bad("lookback", "0".into(), "need at least one bar of features");
        }
        // Bar counts reach the step kernel as exact f32 integers and bars are u32: past 2²⁴
        // neither holds (and sums of such counts overflowed).
        if self.lookback > MAX_BARS {
            return bad(
                "lookback",
                self.lookback.to_string(),
                &format!("must be at most {MAX_BARS} bars"),
            );
        }
        if self.episode_bars > MAX_BARS {
            return bad(
                "episode_bars",
                self.episode_bars.to_string(),
                &format!("must be at most {MAX_BARS} bars (0 = auto)"),
            );
        }
        if !self.reward_scale.is_finite() {
            return bad(
                "reward_scale",
                self.reward_scale.to_string(),
                "must be finite",
            );
        }
        if n_assets == 0 {
            return bad("assets", "0".into(), "the dataset has no assets");
        }
        Ok(())
    }

    /// Minimum order value of each of `n_assets` assets.
    pub fn min_orders(&self, n_assets: usize) -> Vec<f32> {
        if self.min_order_values.len() == n_assets {
            self.min_order_values.clone()
        } else {
            vec![self.min_order_value; n_assets]
        }
    }

    /// Units bought or sold per unit of action for each asset in FinRL_Crypto compatibility mode:
    /// `action_scale / 10 / 10^⌊log10 p0⌋` (FinRL_Crypto's `_generate_action_normalizer` uses
    /// 10,000 / 10^⌊log10 p0⌋ with p0 the first price; our default `action_scale` of 100,000
    /// reproduces its 10,000).
    pub fn compat_units(&self, first_prices: &[f32]) -> Vec<f32> {
        first_prices
            .iter()
            .map(|p| {
                let mag = (*p as f64).log10().floor();
                (self.action_scale as f64 / 10.0 / 10f64.powf(mag)) as f32
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Cash up to 1e9 is accepted; above, where f32 cash misprices orders by more than their
    /// fee, it is refused, naming the field and the limit.
    #[test]
    fn initial_cash_above_what_f32_accounts_for_is_refused() {
        let ok = EnvConfig::new().with_initial_cash(MAX_INITIAL_CASH);
        assert!(ok.validate(2).is_ok());
        for cash in [2e9, 1e12] {
            let err = EnvConfig::new()
                .with_initial_cash(cash)
                .validate(2)
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("env.initial_cash = ") && err.contains("at most 1e9"),
                "{err}"
            );
        }
    }
}
