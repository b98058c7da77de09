//! The trading environment as burn tensor operations on a [`Device`]: the same rules as
//! [`crate::cpu`], applied to all N envs × M assets at once with masks instead of branches.
//!
//! Market data and the start table are uploaded once; a step reads and writes only tensors on
//! the device, so on a GPU a rollout moves nothing between host and device (the user's seeds
//! lost 40 % of their GPU time to exactly that round trip). The [`VecEnv`] implementation copies
//! to and from host buffers and exists for tests and benchmarks.

use std::ops::Range;

use burn::tensor::{Bool, Device, Int, Tensor, TensorData};

use crate::config::{EnvConfig, RewardKind};
use crate::starts::StartTable;
use crate::{EnvError, EpisodeStats, VecEnv};
use tradetune_market::Dataset;

/// γ of FinRL_Crypto's discounted terminal reward (compat mode), as in the CPU env.
const COMPAT_GAMMA: f32 = 0.99;

/// The result of one step, on the device.
#[derive(Debug, Clone)]
pub struct TensorStep {
    /// `[N, obs_dim]` observations (of the new episode where one ended).
    pub obs: Tensor<2>,
    /// `[N]` rewards.
    pub reward: Tensor<1>,
    /// `[N]` 1.0 where an episode ended this step.
    pub done: Tensor<1>,
}

/// Per-env state, all on the device.
#[derive(Debug, Clone)]
struct State {
    bar: Tensor<1, Int>,
    end: Tensor<1, Int>,
    episode: Tensor<1, Int>,
    cash: Tensor<1>,
    hold: Tensor<2>,
    trail: Tensor<2>,
    held: Tensor<2>,
    eqw: Tensor<2>,
    prev_value: Tensor<1>,
    prev_eqw: Tensor<1>,
    eqw_start: Tensor<1>,
    gamma_return: Tensor<1>,
    ep_reward: Tensor<1>,
    ep_fees: Tensor<1>,
    step_fees: Tensor<1>,
    /// Statistics of the last finished episode of each env.
    last_reward_sum: Tensor<1>,
    last_return: Tensor<1>,
    last_eqw_return: Tensor<1>,
    last_fees: Tensor<1>,
    last_done: Tensor<1>,
}

/// N trading environments as tensors on one device.
pub struct TensorVecEnv {
    cfg: EnvConfig,
    device: Device,
    n: usize,
    m: usize,
    obs_dim: usize,
    episode_len: usize,
    episodes_per_env: usize,
    /// `[T, M]` prices and `[T, M·F]` features.
    prices: Tensor<2>,
    features: Tensor<2>,
    /// `[N·K]` start bars and `[N]` row offsets `env·K` into it.
    starts: Tensor<1, Int>,
    env_offsets: Tensor<1, Int>,
    /// `[1, M]` per-asset minimum orders and FinRL_Crypto units per action.
    min_order: Tensor<2>,
    compat_units: Tensor<2>,
    state: State,
    /// Finished-episode statistics of the steps since the last [`TensorVecEnv::take_episode_log`].
    log: EpisodeLog,
}

/// Rows of `[done, reward_sum, total_return, equal_weight_return, fees]` per env, one per step,
/// kept on the device and read back together.
struct EpisodeLog {
    /// `[capacity, LOG_FIELDS, N]`, written in place.
    rows: Tensor<3>,
    len: usize,
}

/// Fields of one [`EpisodeLog`] row.
const LOG_FIELDS: usize = 5;

/// The finished-episode statistics of several steps, still on the device: read
/// [`DeviceEpisodes::values`] back (alone or concatenated with other values, to pay one read)
/// and [`DeviceEpisodes::decode`] the host copy.
#[derive(Debug, Clone)]
pub struct DeviceEpisodes {
    /// `[steps · 5 · N]`: per step, the done flags then the four statistics of each env.
    pub values: Tensor<1>,
    steps: usize,
    n: usize,
    episode_len: usize,
}

impl DeviceEpisodes {
    /// Number of values in [`DeviceEpisodes::values`].
    pub fn len(&self) -> usize {
        self.steps * LOG_FIELDS * self.n
    }

    /// Whether no step was logged.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The episodes that ended, in step order and env order within a step, from the host copy
    /// of [`DeviceEpisodes::values`].
    pub fn decode(&self, host: &[f32]) -> Result<Vec<EpisodeStats>, EnvError> {
        if host.len() != self.len() {
            return Err(EnvError::Tensor(format!(
                "episode log: {} values read back, expected {}",
                host.len(),
                self.len()
            )));
        }
        let n = self.n;
        let mut out = Vec::new();
        for row in host.chunks_exact(LOG_FIELDS * n) {
            for i in 0..n {
                if row[i] > 0.5 {
                    out.push(EpisodeStats {
                        reward_sum: row[n + i],
                        length: self.episode_len as u32,
                        total_return: row[2 * n + i],
                        equal_weight_return: row[3 * n + i],
                        fees: row[4 * n + i],
                    });
                }
            }
        }
        Ok(out)
    }
}

fn f1(v: f32, n: usize, device: &Device) -> Tensor<1> {
    Tensor::full([n], v, device)
}

impl TensorVecEnv {
    /// N = `cfg.n_envs` environments trading `data` over `range`, on `device`.
    pub fn new(
        cfg: EnvConfig,
        data: &Dataset,
        range: Range<usize>,
        device: &Device,
    ) -> Result<Self, EnvError> {
        let m = data.n_assets();
        cfg.validate(m)?;
        if range.end > data.n_bars() || range.start >= range.end {
            return Err(EnvError::Config {
                field: "range",
                value: format!("{}..{}", range.start, range.end),
                reason: format!(
                    "must be a non-empty range within the dataset's {} bars",
                    data.n_bars()
                ),
            });
        }
        let table = StartTable::new(&cfg, range.clone())?;
        let n = cfg.n_envs;
        let (t, f) = (data.n_bars(), data.n_features());
        let prices = Tensor::<2>::from_data(
            TensorData::new(data.prices.iter().copied().collect::<Vec<f32>>(), [t, m]),
            device,
        );
        let features = Tensor::<2>::from_data(
            TensorData::new(
                data.features.iter().copied().collect::<Vec<f32>>(),
                [t, m * f],
            ),
            device,
        );
        let starts = Tensor::<1, Int>::from_data(
            TensorData::new(
                table.starts.iter().map(|s| *s as i64).collect::<Vec<i64>>(),
                [table.starts.len()],
            ),
            device,
        );
        let k = table.episodes_per_env as i64;
        let env_offsets = Tensor::<1, Int>::arange(0..n as i64, device).mul_scalar(k);
        let row = |v: Vec<f32>| Tensor::<2>::from_data(TensorData::new(v, [1, m]), device);
        let first: Vec<f32> = data.prices.row(range.start).to_vec();
        let min_order = row(cfg.min_orders(m));
        let compat_units = row(cfg.compat_units(&first));
        let zeros1 = Tensor::<1>::zeros([n], device);
        let zeros2 = Tensor::<2>::zeros([n, m], device);
        let izeros = Tensor::<1, Int>::zeros([n], device);
        let state = State {
            bar: izeros.clone(),
            end: izeros.clone(),
            episode: izeros,
            cash: zeros1.clone(),
            hold: zeros2.clone(),
            trail: zeros2.clone(),
            held: zeros2.clone(),
            eqw: zeros2,
            prev_value: zeros1.clone(),
            prev_eqw: zeros1.clone(),
            eqw_start: zeros1.clone(),
            gamma_return: zeros1.clone(),
            ep_reward: zeros1.clone(),
            ep_fees: zeros1.clone(),
            step_fees: zeros1.clone(),
            last_reward_sum: zeros1.clone(),
            last_return: zeros1.clone(),
            last_eqw_return: zeros1.clone(),
            last_fees: zeros1.clone(),
            last_done: zeros1,
        };
        let mut env = Self {
            obs_dim: cfg.obs_dim(m, f),
            episode_len: table.episode_len,
            episodes_per_env: table.episodes_per_env,
            cfg,
            device: device.clone(),
            n,
            m,
            prices,
            features,
            starts,
            env_offsets,
            min_order,
            compat_units,
            state,
            log: EpisodeLog {
                rows: Tensor::empty([0, LOG_FIELDS, n], device),
                len: 0,
            },
        };
        env.reset_tensors();
        Ok(env)
    }

    /// The device the env lives on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Resets every env to episode 0 and returns the first observations `[N, obs_dim]`.
    pub fn reset_tensors(&mut self) -> Tensor<2> {
        let all = Tensor::<1, Bool>::full([self.n], true, &self.device);
        self.state.episode = Tensor::<1, Int>::zeros([self.n], &self.device);
        self.restart(all, true);
        self.state.last_done = Tensor::zeros([self.n], &self.device);
        self.observe()
    }

    /// Starts a new episode (number `episode`) in the envs where `mask` is true.
    fn restart(&mut self, mask: Tensor<1, Bool>, first_episode: bool) {
        let (n, m, d) = (self.n, self.m, &self.device);
        let s = &mut self.state;
        let slot = s
            .episode
            .clone()
            .remainder_scalar(self.episodes_per_env as i64);
        let start = self
            .starts
            .clone()
            .select(0, self.env_offsets.clone().add(slot));
        let mask2 = mask.clone().unsqueeze_dim::<2>(1).expand([n, m]);
        s.bar = s.bar.clone().mask_where(mask.clone(), start.clone());
        s.end = s
            .end
            .clone()
            .mask_where(mask.clone(), start.add_scalar(self.episode_len as i64));
        let init = self.cfg.initial_cash;
        s.cash = s.cash.clone().mask_fill(mask.clone(), init);
        s.hold = s.hold.clone().mask_fill(mask2.clone(), 0.0);
        s.trail = s.trail.clone().mask_fill(mask2.clone(), 0.0);
        s.held = s.held.clone().mask_fill(mask2.clone(), 0.0);
        let p0 = self.prices.clone().select(0, s.bar.clone());
        if first_episode || !self.cfg.compat_finrl_crypto {
            let units = p0.clone().recip().mul_scalar(init / m as f32);
            s.eqw = s.eqw.clone().mask_where(mask2, units);
        }
        let eqw_value = s.eqw.clone().mul(p0).sum_dim(1).squeeze_dim::<1>(1);
        s.prev_value = s.prev_value.clone().mask_fill(mask.clone(), init);
        s.prev_eqw = s
            .prev_eqw
            .clone()
            .mask_where(mask.clone(), eqw_value.clone());
        s.eqw_start = s.eqw_start.clone().mask_where(mask.clone(), eqw_value);
        let zero = f1(0.0, n, d);
        s.gamma_return = s
            .gamma_return
            .clone()
            .mask_where(mask.clone(), zero.clone());
        s.ep_reward = s.ep_reward.clone().mask_where(mask.clone(), zero.clone());
        s.ep_fees = s.ep_fees.clone().mask_where(mask, zero);
    }

    /// Observations `[N, obs_dim]` at each env's current bar.
    fn observe(&self) -> Tensor<2> {
        let s = &self.state;
        let p = self.prices.clone().select(0, s.bar.clone());
        let holding_values = s.hold.clone().mul(p);
        let value = holding_values
            .clone()
            .sum_dim(1)
            .add(s.cash.clone().unsqueeze_dim::<2>(1))
            .clamp_min(f32::MIN_POSITIVE);
        let mut parts = vec![
            s.cash.clone().unsqueeze_dim::<2>(1).div(value.clone()),
            holding_values.div(value),
        ];
        for lag in 0..self.cfg.lookback {
            let bars = s.bar.clone().sub_scalar(lag as i64);
            parts.push(self.features.clone().select(0, bars));
        }
        Tensor::cat(parts, 1)
    }

    /// Applies `actions` `[N, M]` (clipped to [-1, 1]; NaN = no order) and advances one bar.
    pub fn step_tensors(&mut self, actions: Tensor<2>) -> TensorStep {
        let cfg = &self.cfg;
        let (n, m) = (self.n, self.m);
        let s = &mut self.state;
        let a = actions
            .clone()
            .mask_fill(actions.is_nan(), 0.0)
            .clamp(-1.0, 1.0);

        s.bar = s.bar.clone().add_scalar(1);
        let p = self.prices.clone().select(0, s.bar.clone());
        let mut cash = s.cash.clone();
        let mut fees = Tensor::<1>::zeros([n], &self.device);
        let (sf, bf) = (cfg.sell_fee, cfg.buy_fee);
        let rowsum = |t: Tensor<2>| t.sum_dim(1).squeeze_dim::<1>(1);

        // 1. Time passes for open positions; trailing stops.
        let open = s.hold.clone().greater_elem(0.0);
        s.held = s.held.clone().add(open.clone().float());
        s.trail = s
            .trail
            .clone()
            .mask_where(open.clone(), s.trail.clone().max_pair(p.clone()));
        if cfg.trailing_stop_pct > 0.0 {
            let stop = open.bool_and(
                p.clone()
                    .lower_equal(s.trail.clone().mul_scalar(1.0 - cfg.trailing_stop_pct)),
            );
            let gross = s
                .hold
                .clone()
                .mul(p.clone())
                .mask_fill(stop.clone().bool_not(), 0.0);
            cash = cash.add(rowsum(gross.clone().mul_scalar(1.0 - sf)));
            fees = fees.add(rowsum(gross.mul_scalar(sf)));
            s.hold = s.hold.clone().mask_fill(stop.clone(), 0.0);
            s.trail = s.trail.clone().mask_fill(stop.clone(), 0.0);
            s.held = s.held.clone().mask_fill(stop, 0.0);
        }

        // Cash value of an order of |a|: value-based, or units·price in compat mode.
        let order_value = |abs_a: Tensor<2>| -> Tensor<2> {
            if cfg.compat_finrl_crypto {
                abs_a.mul(self.compat_units.clone()).mul(p.clone())
            } else {
                abs_a.mul_scalar(cfg.action_scale)
            }
        };
        let reaches_min = |v: Tensor<2>| v.greater_equal(self.min_order.clone().expand([n, m]));

        // 2. The agent's sells.
        let sell_value = order_value(a.clone().neg());
        let sell = a
            .clone()
            .lower_elem(0.0)
            .bool_and(s.hold.clone().greater_elem(0.0))
            .bool_and(reaches_min(sell_value.clone()));
        let q = s
            .hold
            .clone()
            .min_pair(sell_value.div(p.clone()))
            .mask_fill(sell.clone().bool_not(), 0.0);
        let gross = q.clone().mul(p.clone());
        cash = cash.add(rowsum(gross.clone().mul_scalar(1.0 - sf)));
        fees = fees.add(rowsum(gross.mul_scalar(sf)));
        s.hold = s.hold.clone().sub(q);
        s.held = s.held.clone().mask_fill(sell, 0.0);

        // 3. Cooldown: forced partial sell of positions held `cooldown_bars` without a trade.
        if cfg.cooldown_bars > 0 {
            let due = s
                .hold
                .clone()
                .greater_elem(0.0)
                .bool_and(s.held.clone().greater_equal_elem(cfg.cooldown_bars as f32));
            let q = s
                .hold
                .clone()
                .mul_scalar(cfg.cooldown_sell_fraction)
                .mask_fill(due.clone().bool_not(), 0.0);
            let gross = q.clone().mul(p.clone());
            cash = cash.add(rowsum(gross.clone().mul_scalar(1.0 - sf)));
            fees = fees.add(rowsum(gross.mul_scalar(sf)));
            s.hold = s.hold.clone().sub(q);
            s.held = s.held.clone().mask_fill(due, 0.0);
        }
        let empty = s.hold.clone().lower_equal_elem(0.0);
        s.hold = s.hold.clone().mask_fill(empty.clone(), 0.0);
        s.trail = s.trail.clone().mask_fill(empty, 0.0);

        // 4. Buys from one shared budget, scaled pro rata.
        let buy_value = order_value(a.clone());
        let wants = a.greater_elem(0.0).bool_and(reaches_min(buy_value.clone()));
        let wanted = rowsum(
            buy_value
                .clone()
                .mul_scalar(1.0 + bf)
                .mask_fill(wants.clone().bool_not(), 0.0),
        );
        let budget = cash.clone().mul_scalar(cfg.max_buy_fraction);
        let over = wanted.clone().greater(budget.clone());
        let scale = f1(1.0, n, &self.device).mask_where(over, budget.div(wanted));
        let v = buy_value.mul(scale.unsqueeze_dim::<2>(1));
        let buy = wants
            .bool_and(reaches_min(v.clone()))
            .bool_and(v.clone().greater_elem(0.0));
        let v = v.mask_fill(buy.clone().bool_not(), 0.0);
        cash = cash.sub(rowsum(v.clone().mul_scalar(1.0 + bf)));
        fees = fees.add(rowsum(v.clone().mul_scalar(bf)));
        let opening = buy.clone().bool_and(s.hold.clone().lower_equal_elem(0.0));
        s.trail = s.trail.clone().mask_where(opening, p.clone());
        s.hold = s.hold.clone().add(v.div(p.clone()));
        s.trail = s
            .trail
            .clone()
            .mask_where(buy.clone(), s.trail.clone().max_pair(p.clone()));
        s.held = s.held.clone().mask_fill(buy, 0.0);
        cash = cash.clamp_min(0.0);

        // 5. Valuation and reward.
        let value = cash.clone().add(rowsum(s.hold.clone().mul(p.clone())));
        let eqw_value = rowsum(s.eqw.clone().mul(p));
        let init = cfg.initial_cash;
        let mut reward = match cfg.reward {
            RewardKind::ExcessVsEqualWeight => value
                .clone()
                .sub(s.prev_value.clone())
                .sub(eqw_value.clone().sub(s.prev_eqw.clone()))
                .div_scalar(init),
            RewardKind::PortfolioChange => value.clone().sub(s.prev_value.clone()).div_scalar(init),
            RewardKind::LogReturn => value
                .clone()
                .clamp_min(f32::MIN_POSITIVE)
                .div(s.prev_value.clone())
                .log(),
        }
        .mul_scalar(cfg.reward_scale);
        s.cash = cash;
        s.prev_value = value.clone();
        s.prev_eqw = eqw_value.clone();
        s.step_fees = fees.clone();
        s.ep_fees = s.ep_fees.clone().add(fees);
        let done = s.bar.clone().greater_equal(s.end.clone());
        if cfg.compat_finrl_crypto {
            s.gamma_return = s
                .gamma_return
                .clone()
                .mul_scalar(COMPAT_GAMMA)
                .add(reward.clone());
            reward = reward.mask_where(done.clone(), s.gamma_return.clone());
        }
        s.ep_reward = s.ep_reward.clone().add(reward.clone());

        // 6. Episode statistics and auto-reset of the envs whose episode ended.
        s.last_reward_sum = s
            .last_reward_sum
            .clone()
            .mask_where(done.clone(), s.ep_reward.clone());
        s.last_return = s
            .last_return
            .clone()
            .mask_where(done.clone(), value.div_scalar(init).sub_scalar(1.0));
        s.last_eqw_return = s.last_eqw_return.clone().mask_where(
            done.clone(),
            eqw_value.div(s.eqw_start.clone()).sub_scalar(1.0),
        );
        s.last_fees = s
            .last_fees
            .clone()
            .mask_where(done.clone(), s.ep_fees.clone());
        let done_f = done.clone().float();
        s.last_done = done_f.clone();
        s.episode = s.episode.clone().add(done.clone().int());
        self.restart(done, false);
        TensorStep {
            obs: self.observe(),
            reward,
            done: done_f,
        }
    }

    /// `[N]` cash of every env.
    pub fn cash(&self) -> Tensor<1> {
        self.state.cash.clone()
    }

    /// `[N, M]` units held.
    pub fn holdings(&self) -> Tensor<2> {
        self.state.hold.clone()
    }

    /// `[N]` portfolio values and equal-weight buy-and-hold values at each env's current bar
    /// (the initial cash and its equal-weight split at the start of an episode).
    pub fn values(&self) -> (Tensor<1>, Tensor<1>) {
        (self.state.prev_value.clone(), self.state.prev_eqw.clone())
    }

    /// `[N, M]` prices at each env's current bar.
    pub fn current_prices(&self) -> Tensor<2> {
        self.prices.clone().select(0, self.state.bar.clone())
    }

    /// `[N]` fees paid in the last step.
    pub fn last_step_fees(&self) -> Tensor<1> {
        self.state.step_fees.clone()
    }

    /// Makes room on the device for `steps` logged steps (a rollout's length), so that
    /// [`TensorVecEnv::log_episodes`] writes in place.
    pub fn reserve_episode_log(&mut self, steps: usize) {
        let cap = self.log.rows.dims()[0];
        if cap == 0 && steps > 0 {
            self.log.rows = Tensor::zeros([steps, LOG_FIELDS, self.n], &self.device);
        } else if steps > cap {
            let extra = Tensor::zeros([steps - cap, LOG_FIELDS, self.n], &self.device);
            let rows = std::mem::replace(
                &mut self.log.rows,
                Tensor::empty([0, LOG_FIELDS, self.n], &self.device),
            );
            self.log.rows = Tensor::cat(vec![rows, extra], 0);
        }
    }

    /// Appends the last step's finished-episode statistics to the log on the device: no read.
    pub fn log_episodes(&mut self) {
        let (n, t) = (self.n, self.log.len);
        if t == self.log.rows.dims()[0] {
            self.reserve_episode_log((2 * t).max(64));
        }
        let s = &self.state;
        let row = Tensor::stack::<2>(
            vec![
                s.last_done.clone(),
                s.last_reward_sum.clone(),
                s.last_return.clone(),
                s.last_eqw_return.clone(),
                s.last_fees.clone(),
            ],
            0,
        )
        .unsqueeze_dim::<3>(0);
        let rows = std::mem::replace(
            &mut self.log.rows,
            Tensor::empty([0, LOG_FIELDS, n], &self.device),
        );
        self.log.rows = rows.slice_assign([t..t + 1, 0..LOG_FIELDS, 0..n], row);
        self.log.len += 1;
    }

    /// The statistics logged since the last call, still on the device; the log starts again.
    pub fn take_episode_log(&mut self) -> DeviceEpisodes {
        let (steps, n) = (self.log.len, self.n);
        self.log.len = 0;
        let values = if steps == 0 {
            Tensor::empty([0], &self.device)
        } else {
            self.log
                .rows
                .clone()
                .slice([0..steps, 0..LOG_FIELDS, 0..n])
                .reshape([steps * LOG_FIELDS * n])
        };
        DeviceEpisodes {
            values,
            steps,
            n,
            episode_len: self.episode_len,
        }
    }

    /// Statistics of the episodes that ended in the last step, read back to the host.
    pub fn finished_episodes(&self) -> Result<Vec<Option<EpisodeStats>>, EnvError> {
        let s = &self.state;
        let read = |t: Tensor<1>| -> Result<Vec<f32>, EnvError> {
            tradetune_device::readback::read_f32(t, "device env: episode statistics")
                .map_err(EnvError::Tensor)
        };
        // One `[N]` read per step; the statistics only when an episode ended.
        let done =
            tradetune_device::readback::read_f32(s.last_done.clone(), "device env: done flags")
                .map_err(EnvError::Tensor)?;
        if done.iter().all(|d| *d <= 0.5) {
            return Ok(vec![None; self.n]);
        }
        let rs = read(s.last_reward_sum.clone())?;
        let tr = read(s.last_return.clone())?;
        let er = read(s.last_eqw_return.clone())?;
        let fe = read(s.last_fees.clone())?;
        Ok((0..self.n)
            .map(|i| {
                (done[i] > 0.5).then_some(EpisodeStats {
                    reward_sum: rs[i],
                    length: self.episode_len as u32,
                    total_return: tr[i],
                    equal_weight_return: er[i],
                    fees: fe[i],
                })
            })
            .collect())
    }

    fn upload(&self, v: &[f32], shape: [usize; 2]) -> Tensor<2> {
        Tensor::from_data(TensorData::new(v.to_vec(), shape), &self.device)
    }
}

/// Copies a device tensor into a host buffer.
fn download<const D: usize>(t: Tensor<D>, out: &mut [f32]) {
    let data = t.into_data();
    match data.as_slice::<f32>() {
        Ok(s) => out.copy_from_slice(s),
        Err(_) => {
            // Another float dtype on this device: convert element by element.
            let v: Vec<f32> = data.iter::<f32>().collect();
            out.copy_from_slice(&v);
        }
    }
}

impl VecEnv for TensorVecEnv {
    fn n_envs(&self) -> usize {
        self.n
    }

    fn obs_dim(&self) -> usize {
        self.obs_dim
    }

    fn action_dim(&self) -> usize {
        self.m
    }

    fn reset(&mut self, obs: &mut [f32]) {
        let o = self.reset_tensors();
        download(o, obs);
    }

    fn step(&mut self, actions: &[f32], obs: &mut [f32], rewards: &mut [f32], dones: &mut [f32]) {
        let a = self.upload(actions, [self.n, self.m]);
        let out = self.step_tensors(a);
        download(out.obs, obs);
        download(out.reward, rewards);
        download(out.done, dones);
    }

    fn episode_stats(&self, env: usize) -> Option<EpisodeStats> {
        self.finished_episodes().ok()?.get(env).copied().flatten()
    }
}
