//! The CPU implementation of the vectorized trading environment.
//!
//! State is struct-of-arrays in `ndarray` (one row per env): per-env scalars `N × S`, per-asset
//! state `N × 4 × M` (holdings, trailing high, equal-weight units, bars held) and a clock
//! `N × 3` (bar, episode end, episode count). A step reads the shared, read-only market data,
//! writes into caller-provided buffers and allocates nothing. Large batches are split into
//! chunks of envs stepped in parallel with rayon; every env is independent, so the result does
//! not depend on the chunking.

use std::ops::Range;
use std::sync::Arc;

use ndarray::{Array2, Array3};
use rayon::prelude::*;

use crate::config::{EnvConfig, RewardKind};
use crate::starts::{StartTable, check_range};
use crate::{EnvError, EpisodeStats, VecEnv};
use tradetune_market::Dataset;

/// Per-env scalar slots.
const CASH: usize = 0;
const PREV_VALUE: usize = 1;
const PREV_EQW: usize = 2;
const GAMMA_RETURN: usize = 3;
const EP_REWARD: usize = 4;
const EP_FEES: usize = 5;
const STEP_FEES: usize = 6;
const EQW_START: usize = 7;
const N_SCALARS: usize = 8;

/// Per-asset state rows, in this order: holdings (units), trailing high, equal-weight units,
/// bars held since the last trade (the step splits a row block in this order).
const HOLD: usize = 0;
const EQW: usize = 2;
const N_ASSET_ROWS: usize = 4;

/// Clock slots.
const BAR: usize = 0;
const END: usize = 1;
const EPISODE: usize = 2;
const N_CLOCK: usize = 3;

/// γ of FinRL_Crypto's discounted terminal reward (compat mode).
const COMPAT_GAMMA: f32 = 0.99;

/// Below this many envs a step runs on the calling thread: rayon's hand-off costs more than it
/// saves for small batches.
const DEFAULT_PARALLEL_MIN_ENVS: usize = 512;

/// Read-only context of a step: market data and the rules.
struct Rules<'a> {
    prices: &'a [f32],
    features: &'a [f32],
    m: usize,
    mf: usize,
    lookback: usize,
    obs_dim: usize,
    initial_cash: f32,
    buy_fee: f32,
    sell_fee: f32,
    min_order: &'a [f32],
    max_buy_fraction: f32,
    action_scale: f32,
    trailing_stop_pct: f32,
    cooldown_bars: f32,
    cooldown_sell_fraction: f32,
    reward: RewardKind,
    reward_scale: f32,
    compat: bool,
    compat_units: &'a [f32],
    starts: &'a StartTable,
}

/// Everything a step reads but does not change.
struct Fixed {
    cfg: EnvConfig,
    data: Arc<Dataset>,
    range: Range<usize>,
    starts: StartTable,
    min_order: Vec<f32>,
    compat_units: Vec<f32>,
    obs_dim: usize,
}

impl Fixed {
    fn rules(&self) -> Rules<'_> {
        let data = &*self.data;
        Rules {
            prices: data.prices.as_slice().unwrap_or(&[]),
            features: data.features.as_slice().unwrap_or(&[]),
            m: data.n_assets(),
            mf: data.n_assets() * data.n_features(),
            lookback: self.cfg.lookback,
            obs_dim: self.obs_dim,
            initial_cash: self.cfg.initial_cash,
            buy_fee: self.cfg.buy_fee,
            sell_fee: self.cfg.sell_fee,
            min_order: &self.min_order,
            max_buy_fraction: self.cfg.max_buy_fraction,
            action_scale: self.cfg.action_scale,
            trailing_stop_pct: self.cfg.trailing_stop_pct,
            cooldown_bars: self.cfg.cooldown_bars as f32,
            cooldown_sell_fraction: self.cfg.cooldown_sell_fraction,
            reward: self.cfg.reward,
            reward_scale: self.cfg.reward_scale,
            compat: self.cfg.compat_finrl_crypto,
            compat_units: &self.compat_units,
            starts: &self.starts,
        }
    }
}

/// N trading environments stepped together on the CPU.
pub struct CpuVecEnv {
    fixed: Fixed,
    scalars: Array2<f32>,
    assets: Array3<f32>,
    clock: Array2<u32>,
    episodes: Vec<Option<EpisodeStats>>,
    parallel_min_envs: usize,
    chunk_envs: usize,
}

/// One chunk of envs' mutable state and buffers.
type Chunk<'a> = (
    &'a mut [f32],
    &'a mut [f32],
    &'a mut [u32],
    &'a mut [Option<EpisodeStats>],
    &'a [f32],
    &'a mut [f32],
    &'a mut [f32],
    &'a mut [f32],
);

impl CpuVecEnv {
    /// N = `cfg.n_envs` environments trading `data` over the bars `range` (a split).
    pub fn new(cfg: EnvConfig, data: Arc<Dataset>, range: Range<usize>) -> Result<Self, EnvError> {
        let m = data.n_assets();
        cfg.validate(m)?;
        check_range(&range, data.n_bars())?;
        let starts = StartTable::new(&cfg, range.clone())?;
        let n = cfg.n_envs;
        let obs_dim = cfg.obs_dim(m, data.n_features());
        let first = data.prices.row(range.start).to_vec();
        let fixed = Fixed {
            min_order: cfg.min_orders(m),
            compat_units: cfg.compat_units(&first),
            obs_dim,
            starts,
            range,
            data,
            cfg,
        };
        let mut env = Self {
            fixed,
            scalars: Array2::zeros((n, N_SCALARS)),
            assets: Array3::zeros((n, N_ASSET_ROWS, m)),
            clock: Array2::zeros((n, N_CLOCK)),
            episodes: vec![None; n],
            parallel_min_envs: DEFAULT_PARALLEL_MIN_ENVS,
            chunk_envs: 64,
        };
        let mut obs = vec![0.0; n * obs_dim];
        env.reset(&mut obs);
        Ok(env)
    }

    /// Steps run in parallel (rayon) only from this many envs on; `usize::MAX` keeps every step on
    /// the calling thread (the single-thread benchmark).
    pub fn set_parallel_min_envs(&mut self, envs: usize) {
        self.parallel_min_envs = envs;
    }

    /// The configuration in force.
    pub fn config(&self) -> &EnvConfig {
        &self.fixed.cfg
    }

    /// The dataset bars this env trades over.
    pub fn range(&self) -> Range<usize> {
        self.fixed.range.clone()
    }

    /// The start table shared with other implementations.
    pub fn start_table(&self) -> &StartTable {
        &self.fixed.starts
    }

    /// Number of assets M.
    pub fn n_assets(&self) -> usize {
        self.fixed.data.n_assets()
    }

    /// Cash of env `i`.
    pub fn cash(&self, i: usize) -> f32 {
        self.scalars[[i, CASH]]
    }

    /// Units held of each asset by env `i`.
    pub fn holdings(&self, i: usize) -> Vec<f32> {
        self.assets.slice(ndarray::s![i, HOLD, ..]).to_vec()
    }

    /// Units of each asset env `i`'s equal-weight buy-and-hold holds (`initial_cash / M`
    /// divided by each asset's price at the episode's first bar).
    pub fn equal_weight_units(&self, i: usize) -> Vec<f32> {
        self.assets.slice(ndarray::s![i, EQW, ..]).to_vec()
    }

    /// Portfolio value of env `i` at its current bar.
    pub fn value(&self, i: usize) -> f32 {
        self.scalars[[i, PREV_VALUE]]
    }

    /// Value of env `i`'s equal-weight buy-and-hold at its current bar.
    pub fn equal_weight_value(&self, i: usize) -> f32 {
        self.scalars[[i, PREV_EQW]]
    }

    /// Fees env `i` paid in its last step.
    pub fn last_step_fees(&self, i: usize) -> f32 {
        self.scalars[[i, STEP_FEES]]
    }

    /// The bar env `i` is at.
    pub fn bar(&self, i: usize) -> usize {
        self.clock[[i, BAR]] as usize
    }

    /// How many episodes env `i` has started before the current one.
    pub fn episode(&self, i: usize) -> u32 {
        self.clock[[i, EPISODE]]
    }

    fn check_len(what: &'static str, expected: usize, got: usize) {
        // A wrong buffer length is a bug of the caller (the trainer sizes buffers from
        // obs_dim/action_dim), not bad user input.
        assert_eq!(
            expected,
            got,
            "{}",
            EnvError::Buffer {
                what,
                expected,
                got
            }
        );
    }
}

impl VecEnv for CpuVecEnv {
    fn n_envs(&self) -> usize {
        self.fixed.cfg.n_envs
    }

    fn obs_dim(&self) -> usize {
        self.fixed.obs_dim
    }

    fn action_dim(&self) -> usize {
        self.fixed.data.n_assets()
    }

    fn reset(&mut self, obs: &mut [f32]) {
        let n = self.fixed.cfg.n_envs;
        Self::check_len("obs", n * self.fixed.obs_dim, obs.len());
        let rules = self.fixed.rules();
        let (m, od) = (rules.m, rules.obs_dim);
        let scalars = self.scalars.as_slice_mut().unwrap_or(&mut []);
        let assets = self.assets.as_slice_mut().unwrap_or(&mut []);
        let clock = self.clock.as_slice_mut().unwrap_or(&mut []);
        for i in 0..n {
            let sc = &mut scalars[i * N_SCALARS..(i + 1) * N_SCALARS];
            let st = &mut assets[i * N_ASSET_ROWS * m..(i + 1) * N_ASSET_ROWS * m];
            let clk = &mut clock[i * N_CLOCK..(i + 1) * N_CLOCK];
            clk[EPISODE] = 0;
            reset_one(&rules, i, sc, st, clk, true);
            write_obs(&rules, sc, st, clk, &mut obs[i * od..(i + 1) * od]);
        }
        self.episodes.iter_mut().for_each(|e| *e = None);
    }

    fn step(&mut self, actions: &[f32], obs: &mut [f32], rewards: &mut [f32], dones: &mut [f32]) {
        let n = self.fixed.cfg.n_envs;
        let m = self.fixed.data.n_assets();
        let od = self.fixed.obs_dim;
        Self::check_len("actions", n * m, actions.len());
        Self::check_len("obs", n * od, obs.len());
        Self::check_len("rewards", n, rewards.len());
        Self::check_len("dones", n, dones.len());
        let rules = self.fixed.rules();
        let scalars = self.scalars.as_slice_mut().unwrap_or(&mut []);
        let assets = self.assets.as_slice_mut().unwrap_or(&mut []);
        let clock = self.clock.as_slice_mut().unwrap_or(&mut []);
        if n >= self.parallel_min_envs {
            let c = self.chunk_envs;
            (
                scalars.par_chunks_mut(c * N_SCALARS),
                assets.par_chunks_mut(c * N_ASSET_ROWS * m),
                clock.par_chunks_mut(c * N_CLOCK),
                self.episodes.par_chunks_mut(c),
                actions.par_chunks(c * m),
                obs.par_chunks_mut(c * od),
                rewards.par_chunks_mut(c),
                dones.par_chunks_mut(c),
            )
                .into_par_iter()
                .enumerate()
                .for_each(|(k, chunk)| step_chunk(&rules, k * c, chunk));
        } else {
            let chunk = (
                scalars,
                assets,
                clock,
                &mut self.episodes[..],
                actions,
                obs,
                rewards,
                dones,
            );
            step_chunk(&rules, 0, chunk);
        }
    }

    fn episode_stats(&self, env: usize) -> Option<EpisodeStats> {
        self.episodes.get(env).copied().flatten()
    }
}

/// Steps the envs of one chunk; `first` is the index of its first env.
fn step_chunk(rules: &Rules<'_>, first: usize, (sc, st, clk, ep, act, ob, rw, dn): Chunk<'_>) {
    let (m, od) = (rules.m, rules.obs_dim);
    for j in 0..rw.len() {
        let (r, d, stats) = step_one(
            rules,
            first + j,
            &mut sc[j * N_SCALARS..(j + 1) * N_SCALARS],
            &mut st[j * N_ASSET_ROWS * m..(j + 1) * N_ASSET_ROWS * m],
            &mut clk[j * N_CLOCK..(j + 1) * N_CLOCK],
            &act[j * m..(j + 1) * m],
            &mut ob[j * od..(j + 1) * od],
        );
        rw[j] = r;
        dn[j] = d;
        ep[j] = stats;
    }
}

/// Starts env `env`'s episode number `clk[EPISODE]`: fresh cash, no positions, a new start bar.
fn reset_one(
    rules: &Rules<'_>,
    env: usize,
    sc: &mut [f32],
    st: &mut [f32],
    clk: &mut [u32],
    first_episode: bool,
) {
    let m = rules.m;
    let start = rules.starts.start(env, clk[EPISODE]);
    clk[BAR] = start;
    clk[END] = start + rules.starts.episode_len as u32;
    let p = &rules.prices[start as usize * m..(start as usize + 1) * m];
    let (hold, rest) = st.split_at_mut(m);
    let (trail, rest) = rest.split_at_mut(m);
    let (eqw, held) = rest.split_at_mut(m);
    hold.fill(0.0);
    trail.fill(0.0);
    held.fill(0.0);
    // The equal-weight benchmark buys initial_cash / M of every asset at the first bar (no fee:
    // it is a yardstick, not a strategy). FinRL_Crypto's quirk keeps the first episode's units.
    if first_episode || !rules.compat {
        let per_asset = rules.initial_cash / m as f32;
        for (u, price) in eqw.iter_mut().zip(p) {
            *u = per_asset / price;
        }
    }
    let eqw_value: f32 = eqw.iter().zip(p).map(|(u, price)| u * price).sum();
    sc[CASH] = rules.initial_cash;
    sc[PREV_VALUE] = rules.initial_cash;
    sc[PREV_EQW] = eqw_value;
    sc[EQW_START] = eqw_value;
    sc[GAMMA_RETURN] = 0.0;
    sc[EP_REWARD] = 0.0;
    sc[EP_FEES] = 0.0;
    sc[STEP_FEES] = 0.0;
}

/// Writes env's observation at its current bar (see the layout in [`crate`]).
fn write_obs(rules: &Rules<'_>, sc: &[f32], st: &[f32], clk: &[u32], obs: &mut [f32]) {
    let m = rules.m;
    let t = clk[BAR] as usize;
    let p = &rules.prices[t * m..(t + 1) * m];
    let hold = &st[HOLD * m..(HOLD + 1) * m];
    let value = sc[CASH] + hold.iter().zip(p).map(|(h, price)| h * price).sum::<f32>();
    let inv = 1.0 / value.max(f32::MIN_POSITIVE);
    obs[0] = sc[CASH] * inv;
    for k in 0..m {
        obs[1 + k] = hold[k] * p[k] * inv;
    }
    let mf = rules.mf;
    for lag in 0..rules.lookback {
        let bar = t - lag;
        let dst = 1 + m + lag * mf;
        obs[dst..dst + mf].copy_from_slice(&rules.features[bar * mf..(bar + 1) * mf]);
    }
}

/// Sells `q` units at `price`: cash in net of the sell fee; returns the fee.
#[inline]
/// The units an agent's sell of `wanted` units takes from a position of `h`: all of it where the
/// order covers it to within [`SELL_ALL_WITHIN`] (an order sized from the position's value,
/// `value / price` in f32, misses it by a rounding; the dust it left kept the position open,
/// with its trailing-stop high and holding clock, into the next buy).
pub(crate) fn sold_units(h: f32, wanted: f32) -> f32 {
    if wanted >= h * (1.0 - SELL_ALL_WITHIN) {
        h
    } else {
        wanted
    }
}

/// A sell order within this fraction of the position sells all of it ([`sold_units`]).
pub const SELL_ALL_WITHIN: f32 = 1e-5;

fn sell(cash: &mut f32, q: f32, price: f32, fee: f32) -> f32 {
    let gross = q * price;
    let f = gross * fee;
    *cash += gross - f;
    f
}

/// Advances one env one bar. Returns (reward, done, stats of the episode it finished).
fn step_one(
    rules: &Rules<'_>,
    env: usize,
    sc: &mut [f32],
    st: &mut [f32],
    clk: &mut [u32],
    act: &[f32],
    obs: &mut [f32],
) -> (f32, f32, Option<EpisodeStats>) {
    let m = rules.m;
    clk[BAR] += 1;
    let t = clk[BAR] as usize;
    let p = &rules.prices[t * m..(t + 1) * m];
    let mut cash = sc[CASH];
    let mut fees = 0.0f32;
    {
        let (hold, rest) = st.split_at_mut(m);
        let (trail, rest) = rest.split_at_mut(m);
        let (_eqw, held) = rest.split_at_mut(m);

        // Rules 1–3 touch one asset each and only add to cash, so one pass per asset applies
        // them in order: (1) time passes, trailing stop; (2) the agent's sell; (3) cooldown.
        // The same pass adds up what the buys ask for; they are executed after it, from the
        // cash all sells produced.
        let mut wanted = 0.0f32;
        for k in 0..m {
            let price = p[k];
            let a = clean_action(act[k]);
            let mut h = hold[k];
            if h > 0.0 {
                // 1. Time passes for the open position; trailing stop.
                held[k] += 1.0;
                trail[k] = trail[k].max(price);
                if rules.trailing_stop_pct > 0.0
                    && price <= trail[k] * (1.0 - rules.trailing_stop_pct)
                {
                    fees += sell(&mut cash, h, price, rules.sell_fee);
                    h = 0.0;
                    trail[k] = 0.0;
                    held[k] = 0.0;
                }
                // 2. The agent's sell. An order's cash value is |a|·action_scale (value-based
                //    scaling), or units·price in FinRL_Crypto compatibility mode.
                if a < 0.0 && h > 0.0 {
                    let value = order_value(rules, k, -a, price);
                    if value >= rules.min_order[k] {
                        let q = sold_units(h, value / price);
                        fees += sell(&mut cash, q, price, rules.sell_fee);
                        h -= q;
                        held[k] = 0.0;
                    }
                }
                // 3. Forced partial sell of a position held `cooldown_bars` bars without a
                //    trade. Like the trailing stop it is a risk rule, not an agent order: no
                //    minimum order applies.
                if rules.cooldown_bars > 0.0 && h > 0.0 && held[k] >= rules.cooldown_bars {
                    let q = h * rules.cooldown_sell_fraction;
                    fees += sell(&mut cash, q, price, rules.sell_fee);
                    h -= q;
                    held[k] = 0.0;
                }
                if h <= 0.0 {
                    h = 0.0;
                    trail[k] = 0.0;
                }
                hold[k] = h;
            }
            if a > 0.0 {
                let value = order_value(rules, k, a, price);
                if value >= rules.min_order[k] {
                    wanted += value * (1.0 + rules.buy_fee);
                }
            }
        }

        // 4. Buys from one shared budget: the orders reaching the minimum are scaled down pro
        //    rata when their cost with fees exceeds cash·max_buy_fraction, so cash never goes
        //    negative; an order that the scaling pushes below its minimum is dropped.
        if wanted > 0.0 {
            let budget = cash * rules.max_buy_fraction;
            let scale = if wanted > budget {
                budget / wanted
            } else {
                1.0
            };
            for k in 0..m {
                let a = clean_action(act[k]);
                if a > 0.0 {
                    let price = p[k];
                    let value = order_value(rules, k, a, price);
                    let v = value * scale;
                    if value >= rules.min_order[k] && v >= rules.min_order[k] && v > 0.0 {
                        let f = v * rules.buy_fee;
                        cash -= v + f;
                        fees += f;
                        if hold[k] <= 0.0 {
                            trail[k] = price;
                        }
                        hold[k] += v / price;
                        trail[k] = trail[k].max(price);
                        held[k] = 0.0;
                    }
                }
            }
        }
    }
    // Rounding of the pro-rata scaling can leave −1e-3 of a cent.
    cash = cash.max(0.0);
    sc[CASH] = cash;

    // 5. Valuation and reward.
    let hold = &st[HOLD * m..(HOLD + 1) * m];
    let eqw = &st[EQW * m..(EQW + 1) * m];
    let mut holdings_value = 0.0f32;
    let mut eqw_value = 0.0f32;
    for k in 0..m {
        holdings_value += hold[k] * p[k];
        eqw_value += eqw[k] * p[k];
    }
    let value = cash + holdings_value;
    let mut reward = match rules.reward {
        RewardKind::ExcessVsEqualWeight => {
            ((value - sc[PREV_VALUE]) - (eqw_value - sc[PREV_EQW])) / rules.initial_cash
        }
        RewardKind::PortfolioChange => (value - sc[PREV_VALUE]) / rules.initial_cash,
        RewardKind::LogReturn => (value.max(f32::MIN_POSITIVE) / sc[PREV_VALUE]).ln(),
    } * rules.reward_scale;
    sc[PREV_VALUE] = value;
    sc[PREV_EQW] = eqw_value;
    sc[STEP_FEES] = fees;
    sc[EP_FEES] += fees;
    let done = clk[BAR] >= clk[END];
    if rules.compat {
        // FinRL_Crypto: gamma_return = gamma_return·γ + reward; the last reward is replaced by it.
        sc[GAMMA_RETURN] = sc[GAMMA_RETURN] * COMPAT_GAMMA + reward;
        if done {
            reward = sc[GAMMA_RETURN];
        }
    }
    sc[EP_REWARD] += reward;

    let stats = if done {
        let stats = EpisodeStats {
            reward_sum: sc[EP_REWARD],
            length: rules.starts.episode_len as u32,
            total_return: value / rules.initial_cash - 1.0,
            equal_weight_return: eqw_value / sc[EQW_START] - 1.0,
            fees: sc[EP_FEES],
        };
        clk[EPISODE] += 1;
        reset_one(rules, env, sc, st, clk, false);
        // The step's fees stay readable after the reset.
        sc[STEP_FEES] = fees;
        Some(stats)
    } else {
        None
    };
    write_obs(rules, sc, st, clk, obs);
    (reward, if done { 1.0 } else { 0.0 }, stats)
}

/// Actions are clipped to [-1, 1]; a NaN action is no order.
#[inline]
fn clean_action(a: f32) -> f32 {
    if a.is_nan() { 0.0 } else { a.clamp(-1.0, 1.0) }
}

/// Cash value of an order of |action| `a` ≥ 0 in asset `k` at `price`.
#[inline]
fn order_value(rules: &Rules<'_>, k: usize, a: f32, price: f32) -> f32 {
    if rules.compat {
        a * rules.compat_units[k] * price
    } else {
        a * rules.action_scale
    }
}
