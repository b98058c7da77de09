//! A plain, single-env, double-precision reference of the trading rules: the readable
//! specification the fast implementations are tested against. Slow on purpose; never used for
//! training.

use crate::config::{EnvConfig, RewardKind};
use crate::starts::StartTable;
use tradetune_market::Dataset;

/// What one reference step did, for the tests' invariants.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StepRecord {
    pub reward: f64,
    pub done: bool,
    /// Fees paid this step.
    pub fees: f64,
    /// Units held before the step's trades (after the previous step).
    pub holdings_before: Vec<f64>,
    /// Prices of the previous and of the new bar.
    pub price_before: Vec<f64>,
    pub price_after: Vec<f64>,
    /// Portfolio value before and after (at the new bar's prices), before any reset.
    pub value_before: f64,
    pub value_after: f64,
    /// Which rule fired per asset: trailing stop, agent sell, cooldown sell, buy.
    pub stopped: Vec<bool>,
    pub sold: Vec<bool>,
    pub cooled: Vec<bool>,
    pub bought: Vec<bool>,
}

/// One trading environment, stepped one bar at a time.
#[derive(Debug, Clone)]
pub struct ReferenceEnv<'a> {
    cfg: EnvConfig,
    data: &'a Dataset,
    starts: StartTable,
    env_index: usize,
    range_start: usize,
    pub episode: u32,
    pub bar: usize,
    pub end: usize,
    pub cash: f64,
    pub holdings: Vec<f64>,
    pub trail_high: Vec<f64>,
    pub bars_held: Vec<u32>,
    pub eqw_units: Vec<f64>,
    pub prev_value: f64,
    pub prev_eqw: f64,
    gamma_return: f64,
}

impl<'a> ReferenceEnv<'a> {
    /// Env number `env_index` of a batch configured by `cfg` (it uses that env's start offsets).
    pub fn new(
        cfg: &EnvConfig,
        data: &'a Dataset,
        range: std::ops::Range<usize>,
        env_index: usize,
    ) -> Self {
        let range_start = range.start;
        let starts = StartTable::new(cfg, range).expect("reference env: valid range");
        let m = data.n_assets();
        let mut env = Self {
            cfg: cfg.clone(),
            data,
            starts,
            env_index,
            range_start,
            episode: 0,
            bar: 0,
            end: 0,
            cash: 0.0,
            holdings: vec![0.0; m],
            trail_high: vec![0.0; m],
            bars_held: vec![0; m],
            eqw_units: vec![0.0; m],
            prev_value: 0.0,
            prev_eqw: 0.0,
            gamma_return: 0.0,
        };
        env.start_episode(true);
        env
    }

    fn price(&self, bar: usize, asset: usize) -> f64 {
        self.data.prices[[bar, asset]] as f64
    }

    fn start_episode(&mut self, first: bool) {
        let m = self.data.n_assets();
        self.bar = self.starts.start(self.env_index, self.episode) as usize;
        self.end = self.bar + self.starts.episode_len;
        self.cash = self.cfg.initial_cash as f64;
        self.holdings = vec![0.0; m];
        self.trail_high = vec![0.0; m];
        self.bars_held = vec![0; m];
        if first || !self.cfg.compat_finrl_crypto {
            for a in 0..m {
                self.eqw_units[a] =
                    self.cfg.initial_cash as f64 / m as f64 / self.price(self.bar, a);
            }
        }
        self.prev_value = self.cfg.initial_cash as f64;
        self.prev_eqw = (0..m)
            .map(|a| self.eqw_units[a] * self.price(self.bar, a))
            .sum();
        self.gamma_return = 0.0;
    }

    /// Portfolio value at the current bar.
    pub fn value(&self) -> f64 {
        self.cash
            + (0..self.holdings.len())
                .map(|a| self.holdings[a] * self.price(self.bar, a))
                .sum::<f64>()
    }

    /// The observation at the current bar (same layout as the fast implementations).
    pub fn observation(&self) -> Vec<f64> {
        let m = self.data.n_assets();
        let value = self.value();
        let mut obs = vec![self.cash / value];
        for a in 0..m {
            obs.push(self.holdings[a] * self.price(self.bar, a) / value);
        }
        for lag in 0..self.cfg.lookback {
            for a in 0..m {
                for f in 0..self.data.n_features() {
                    obs.push(self.data.features[[self.bar - lag, a, f]] as f64);
                }
            }
        }
        obs
    }

    fn min_order(&self, asset: usize) -> f64 {
        self.cfg.min_orders(self.data.n_assets())[asset] as f64
    }

    fn order_value(&self, asset: usize, a: f64, price: f64) -> f64 {
        if self.cfg.compat_finrl_crypto {
            // The compat scale uses the first price of the split, as the CPU env does.
            let first: Vec<f32> = self.data.prices.row(self.range_start).to_vec();
            a * self.cfg.compat_units(&first)[asset] as f64 * price
        } else {
            a * self.cfg.action_scale as f64
        }
    }

    /// Applies `actions` and advances one bar.
    // The reference walks parallel per-asset arrays by index on purpose: it reads like the rules.
    #[allow(clippy::needless_range_loop)]
    pub fn step(&mut self, actions: &[f32]) -> StepRecord {
        let m = self.data.n_assets();
        let mut rec = StepRecord {
            holdings_before: self.holdings.clone(),
            price_before: (0..m).map(|a| self.price(self.bar, a)).collect(),
            value_before: self.value(),
            stopped: vec![false; m],
            sold: vec![false; m],
            cooled: vec![false; m],
            bought: vec![false; m],
            ..Default::default()
        };
        self.bar += 1;
        let price: Vec<f64> = (0..m).map(|a| self.price(self.bar, a)).collect();
        let act: Vec<f64> = actions
            .iter()
            .map(|a| {
                if a.is_nan() {
                    0.0
                } else {
                    a.clamp(-1.0, 1.0) as f64
                }
            })
            .collect();
        let sell_fee = self.cfg.sell_fee as f64;
        let buy_fee = self.cfg.buy_fee as f64;
        let mut fees = 0.0;

        // Time passes for open positions; trailing stops.
        for a in 0..m {
            if self.holdings[a] > 0.0 {
                self.bars_held[a] += 1;
                self.trail_high[a] = self.trail_high[a].max(price[a]);
                let stop = self.cfg.trailing_stop_pct as f64;
                if stop > 0.0 && price[a] <= self.trail_high[a] * (1.0 - stop) {
                    let gross = self.holdings[a] * price[a];
                    self.cash += gross * (1.0 - sell_fee);
                    fees += gross * sell_fee;
                    self.holdings[a] = 0.0;
                    self.trail_high[a] = 0.0;
                    self.bars_held[a] = 0;
                    rec.stopped[a] = true;
                }
            }
        }
        // The agent's sells.
        for a in 0..m {
            if act[a] < 0.0 && self.holdings[a] > 0.0 {
                let value = self.order_value(a, -act[a], price[a]);
                if value >= self.min_order(a) {
                    // An order covering the position to within a rounding sells all of it.
                    let wanted = value / price[a];
                    let within = 1.0 - crate::cpu::SELL_ALL_WITHIN as f64;
                    let q = if wanted >= self.holdings[a] * within {
                        self.holdings[a]
                    } else {
                        wanted
                    };
                    let gross = q * price[a];
                    self.cash += gross * (1.0 - sell_fee);
                    fees += gross * sell_fee;
                    self.holdings[a] -= q;
                    self.bars_held[a] = 0;
                    if self.holdings[a] <= 0.0 {
                        self.holdings[a] = 0.0;
                        self.trail_high[a] = 0.0;
                    }
                    rec.sold[a] = true;
                }
            }
        }
        // Cooldown: a position held `cooldown_bars` without a trade is partly sold.
        if self.cfg.cooldown_bars > 0 {
            for a in 0..m {
                if self.holdings[a] > 0.0 && self.bars_held[a] as usize >= self.cfg.cooldown_bars {
                    let q = self.holdings[a] * self.cfg.cooldown_sell_fraction as f64;
                    let gross = q * price[a];
                    self.cash += gross * (1.0 - sell_fee);
                    fees += gross * sell_fee;
                    self.holdings[a] -= q;
                    self.bars_held[a] = 0;
                    if self.holdings[a] <= 0.0 {
                        self.holdings[a] = 0.0;
                        self.trail_high[a] = 0.0;
                    }
                    rec.cooled[a] = true;
                }
            }
        }
        // Buys from one budget, scaled pro rata.
        let budget = self.cash * self.cfg.max_buy_fraction as f64;
        let orders: Vec<f64> = (0..m)
            .map(|a| {
                if act[a] > 0.0 {
                    let v = self.order_value(a, act[a], price[a]);
                    if v >= self.min_order(a) { v } else { 0.0 }
                } else {
                    0.0
                }
            })
            .collect();
        let wanted: f64 = orders.iter().map(|v| v * (1.0 + buy_fee)).sum();
        let scale = if wanted > budget {
            budget / wanted
        } else {
            1.0
        };
        for a in 0..m {
            let v = orders[a] * scale;
            if orders[a] > 0.0 && v > 0.0 && v >= self.min_order(a) {
                self.cash -= v * (1.0 + buy_fee);
                fees += v * buy_fee;
                if self.holdings[a] <= 0.0 {
                    self.trail_high[a] = price[a];
                }
                self.holdings[a] += v / price[a];
                self.trail_high[a] = self.trail_high[a].max(price[a]);
                self.bars_held[a] = 0;
                rec.bought[a] = true;
            }
        }
        self.cash = self.cash.max(0.0);

        let value = self.value();
        let eqw: f64 = (0..m).map(|a| self.eqw_units[a] * price[a]).sum();
        let init = self.cfg.initial_cash as f64;
        let mut reward = match self.cfg.reward {
            RewardKind::ExcessVsEqualWeight => {
                ((value - self.prev_value) - (eqw - self.prev_eqw)) / init
            }
            RewardKind::PortfolioChange => (value - self.prev_value) / init,
            RewardKind::LogReturn => (value / self.prev_value).ln(),
        } * self.cfg.reward_scale as f64;
        self.prev_value = value;
        self.prev_eqw = eqw;
        let done = self.bar >= self.end;
        if self.cfg.compat_finrl_crypto {
            self.gamma_return = self.gamma_return * 0.99 + reward;
            if done {
                reward = self.gamma_return;
            }
        }
        rec.reward = reward;
        rec.done = done;
        rec.fees = fees;
        rec.price_after = price;
        rec.value_after = value;
        if done {
            self.episode += 1;
            self.start_episode(false);
        }
        rec
    }
}
