//! The device env's state packed in two tensors, one row per env, so that a step reads and
//! writes two buffers (the kernel of [`super::kernel`]) instead of twenty; and its unpacked
//! form, one tensor per field, for the tensor program of [`super::rules`].
//!
//! Float row: the [`SCALARS`] per-env scalars (their indices below; the five `LAST_*` fields,
//! in the episode log's row order), then `hold`, `trail`, `held` and `eqw`, M each. Int row:
//! [`BAR`], [`END`], [`EPISODE`].

#[cfg(test)]
use burn::tensor::TensorData;
use burn::tensor::{Int, Tensor};

use crate::config::{EnvConfig, RewardKind};

pub(crate) const CASH: usize = 0;
pub(crate) const PREV_VALUE: usize = 1;
pub(crate) const PREV_EQW: usize = 2;
pub(crate) const EQW_START: usize = 3;
pub(crate) const GAMMA_RETURN: usize = 4;
pub(crate) const EP_REWARD: usize = 5;
pub(crate) const EP_FEES: usize = 6;
pub(crate) const STEP_FEES: usize = 7;
/// The episode log's fields start here, in its row order.
pub(crate) const LAST_DONE: usize = 8;
pub(crate) const LAST_REWARD_SUM: usize = 9;
pub(crate) const LAST_RETURN: usize = 10;
pub(crate) const LAST_EQW_RETURN: usize = 11;
pub(crate) const LAST_FEES: usize = 12;
/// Fields of one episode log row (`LAST_DONE..LAST_FEES`).
pub(crate) const LOG_FIELDS: usize = 5;
/// Per-env scalars before the per-asset blocks.
pub(crate) const SCALARS: usize = 13;
/// The float row's length with `m` assets: the scalars, then the four per-asset blocks.
pub(crate) fn state_width(m: usize) -> usize {
    SCALARS + 4 * m
}
/// Per-asset blocks, in order, after the scalars.
const HOLD: usize = 0;
const TRAIL: usize = 1;
const HELD: usize = 2;
const EQW: usize = 3;

pub(crate) const BAR: usize = 0;
pub(crate) const END: usize = 1;
pub(crate) const EPISODE: usize = 2;
pub(crate) const I_FIELDS: usize = 3;

/// Indices of the kernel's parameters; the per-asset minimum orders and compat units follow.
pub(crate) const P_SELL_FEE: usize = 0;
pub(crate) const P_BUY_FEE: usize = 1;
pub(crate) const P_TRAILING_STOP: usize = 2;
pub(crate) const P_COOLDOWN: usize = 3;
pub(crate) const P_COOLDOWN_FRACTION: usize = 4;
pub(crate) const P_ACTION_SCALE: usize = 5;
pub(crate) const P_MAX_BUY: usize = 6;
pub(crate) const P_INITIAL_CASH: usize = 7;
pub(crate) const P_REWARD_SCALE: usize = 8;
pub(crate) const P_REWARD_KIND: usize = 9;
pub(crate) const P_COMPAT: usize = 10;
pub(crate) const P_EPISODE_LEN: usize = 11;
pub(crate) const P_EPISODES_PER_ENV: usize = 12;
pub(crate) const P_LOOKBACK: usize = 13;
pub(crate) const SCALAR_PARAMS: usize = 14;

/// The kernel's parameters: the config's scalars (counts as exact f32 integers), then the
/// per-asset minimum orders and compat units.
pub(crate) fn params(
    cfg: &EnvConfig,
    episode_len: usize,
    episodes_per_env: usize,
    min_order: &[f32],
    compat_units: &[f32],
) -> Vec<f32> {
    let reward_kind = match cfg.reward {
        RewardKind::ExcessVsEqualWeight => 0.0,
        RewardKind::PortfolioChange => 1.0,
        RewardKind::LogReturn => 2.0,
    };
    let mut p = vec![0.0; SCALAR_PARAMS];
    p[P_SELL_FEE] = cfg.sell_fee;
    p[P_BUY_FEE] = cfg.buy_fee;
    p[P_TRAILING_STOP] = cfg.trailing_stop_pct;
    p[P_COOLDOWN] = cfg.cooldown_bars as f32;
    p[P_COOLDOWN_FRACTION] = cfg.cooldown_sell_fraction;
    p[P_ACTION_SCALE] = cfg.action_scale;
    p[P_MAX_BUY] = cfg.max_buy_fraction;
    p[P_INITIAL_CASH] = cfg.initial_cash;
    p[P_REWARD_SCALE] = cfg.reward_scale;
    p[P_REWARD_KIND] = reward_kind;
    p[P_COMPAT] = if cfg.compat_finrl_crypto { 1.0 } else { 0.0 };
    p[P_EPISODE_LEN] = episode_len as f32;
    p[P_EPISODES_PER_ENV] = episodes_per_env as f32;
    p[P_LOOKBACK] = cfg.lookback as f32;
    p.extend_from_slice(min_order);
    p.extend_from_slice(compat_units);
    p
}

/// The packed state: `f` `[N, SCALARS + 4M]`, `i` `[N, I_FIELDS]`.
#[derive(Debug, Clone)]
pub(crate) struct Packed {
    pub f: Tensor<2>,
    pub i: Tensor<2, Int>,
    pub m: usize,
}

impl Packed {
    pub fn n(&self) -> usize {
        self.f.dims()[0]
    }

    /// `[N]` float field `c`.
    pub fn col(&self, c: usize) -> Tensor<1> {
        let n = self.n();
        self.f.clone().slice([0..n, c..c + 1]).reshape([n])
    }

    /// `[N, k]` float fields `c..c + k`.
    pub fn cols(&self, c: usize, k: usize) -> Tensor<2> {
        let n = self.n();
        self.f.clone().slice([0..n, c..c + k])
    }

    /// `[N, M]` per-asset block `b`.
    fn block(&self, b: usize) -> Tensor<2> {
        self.cols(SCALARS + b * self.m, self.m)
    }

    /// `[N]` units held.
    pub fn hold(&self) -> Tensor<2> {
        self.block(HOLD)
    }

    /// `[N, M]` equal-weight units.
    pub fn eqw(&self) -> Tensor<2> {
        self.block(EQW)
    }

    /// `[N]` int field `c`.
    pub fn icol(&self, c: usize) -> Tensor<1, Int> {
        let n = self.n();
        self.i.clone().slice([0..n, c..c + 1]).reshape([n])
    }
}

/// The state unpacked, one tensor per field.
#[derive(Debug, Clone)]
pub(crate) struct State {
    pub bar: Tensor<1, Int>,
    pub end: Tensor<1, Int>,
    pub episode: Tensor<1, Int>,
    pub cash: Tensor<1>,
    pub hold: Tensor<2>,
    pub trail: Tensor<2>,
    pub held: Tensor<2>,
    pub eqw: Tensor<2>,
    pub prev_value: Tensor<1>,
    pub prev_eqw: Tensor<1>,
    pub eqw_start: Tensor<1>,
    pub gamma_return: Tensor<1>,
    pub ep_reward: Tensor<1>,
    pub ep_fees: Tensor<1>,
    pub step_fees: Tensor<1>,
    /// Statistics of the last finished episode of each env.
    pub last_reward_sum: Tensor<1>,
    pub last_return: Tensor<1>,
    pub last_eqw_return: Tensor<1>,
    pub last_fees: Tensor<1>,
    pub last_done: Tensor<1>,
}

impl State {
    /// All zeros, for `n` envs and `m` assets.
    pub fn zeros(n: usize, m: usize, device: &burn::tensor::Device) -> Packed {
        let f = Tensor::zeros([n, state_width(m)], device);
        let i = Tensor::<2, Int>::zeros([n, I_FIELDS], device);
        Packed { f, i, m }
    }

    pub fn unpack(p: &Packed) -> State {
        State {
            bar: p.icol(BAR),
            end: p.icol(END),
            episode: p.icol(EPISODE),
            cash: p.col(CASH),
            hold: p.block(HOLD),
            trail: p.block(TRAIL),
            held: p.block(HELD),
            eqw: p.block(EQW),
            prev_value: p.col(PREV_VALUE),
            prev_eqw: p.col(PREV_EQW),
            eqw_start: p.col(EQW_START),
            gamma_return: p.col(GAMMA_RETURN),
            ep_reward: p.col(EP_REWARD),
            ep_fees: p.col(EP_FEES),
            step_fees: p.col(STEP_FEES),
            last_reward_sum: p.col(LAST_REWARD_SUM),
            last_return: p.col(LAST_RETURN),
            last_eqw_return: p.col(LAST_EQW_RETURN),
            last_fees: p.col(LAST_FEES),
            last_done: p.col(LAST_DONE),
        }
    }

    pub fn pack(self, m: usize) -> Packed {
        let c = |t: Tensor<1>| t.unsqueeze_dim::<2>(1);
        let s = self;
        // In the order of the indices above.
        let f = Tensor::cat(
            vec![
                c(s.cash),
                c(s.prev_value),
                c(s.prev_eqw),
                c(s.eqw_start),
                c(s.gamma_return),
                c(s.ep_reward),
                c(s.ep_fees),
                c(s.step_fees),
                c(s.last_done),
                c(s.last_reward_sum),
                c(s.last_return),
                c(s.last_eqw_return),
                c(s.last_fees),
                s.hold,
                s.trail,
                s.held,
                s.eqw,
            ],
            1,
        );
        let i = Tensor::stack::<2>(vec![s.bar, s.end, s.episode], 1);
        Packed { f, i, m }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::Device;

    #[test]
    fn pack_and_unpack_keep_every_field_in_its_place() {
        let d = Device::flex();
        let (n, m) = (3, 2);
        let width = state_width(m);
        let values: Vec<f32> = (0..n * width).map(|v| v as f32).collect();
        let f = Tensor::<2>::from_data(TensorData::new(values.clone(), [n, width]), &d);
        let ints: Vec<i64> = (0..(n * I_FIELDS) as i64).collect();
        let i = Tensor::<2, Int>::from_data(TensorData::new(ints.clone(), [n, I_FIELDS]), &d);
        let packed = Packed { f, i, m };
        let s = State::unpack(&packed);
        let at = |env: usize, c: usize| values[env * width + c];
        let cash: Vec<f32> = s.cash.clone().into_data().iter::<f32>().collect();
        assert_eq!(cash, vec![at(0, CASH), at(1, CASH), at(2, CASH)]);
        let held: Vec<f32> = s.held.clone().into_data().iter::<f32>().collect();
        assert_eq!(held[m + 1], at(1, SCALARS + 2 * m + 1));
        let episode: Vec<i64> = s.episode.clone().into_data().iter::<i64>().collect();
        assert_eq!(episode, vec![2, 5, 8]);
        let again = s.pack(m);
        let back: Vec<f32> = again.f.into_data().iter::<f32>().collect();
        assert_eq!(back, values);
        let iback: Vec<i64> = again.i.into_data().iter::<i64>().collect();
        assert_eq!(iback, ints);
    }

    #[test]
    fn params_put_the_per_asset_values_after_the_scalars() {
        let cfg = EnvConfig::new().with_reward(RewardKind::LogReturn);
        let p = params(&cfg, 30, 4, &[1.0, 2.0], &[3.0, 4.0]);
        assert_eq!(p.len(), SCALAR_PARAMS + 4);
        assert_eq!(p[P_REWARD_KIND], 2.0);
        assert_eq!((p[P_EPISODE_LEN], p[P_EPISODES_PER_ENV]), (30.0, 4.0));
        assert_eq!(&p[SCALAR_PARAMS..], &[1.0, 2.0, 3.0, 4.0]);
    }
}
