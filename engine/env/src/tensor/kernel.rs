//! The device step as one CubeCL kernel (issue 33): one thread per env applies
//! [`crate::cpu`]'s rules to its M assets in the same order as the host env (trailing stop,
//! sell, cooldown, shared-budget buys, valuation, reward, episode end and auto-reset) and writes
//! the next observation and the episode log's row, so a step is one launch where the tensor
//! program of [`super::rules`] costs about 70 (on lavapipe, the bench's tiny configuration: 74
//! launches per env step before, 2 with the kernel and the log row's copy into the log, 1 now).
//!
//! The kernel reads the packed state of [`super::state`] and writes a new one (the state is not
//! written in place, so a tensor read from the old state stays valid). The step's log row goes
//! straight into the log's next row, as `slice_assign` would write it (into the log's storage
//! where only the env holds it, else into a copy): the episode log's `LAST_*` fields of every
//! env in a rollout, or env 0's whole new state in an evaluation's state log
//! ([`super::StateLog`]), whose bars then cost one launch each for the env where the log's
//! write was a second. It computes in f32
//! whatever the state's float dtype. burn reaches it through its backend extension API: the
//! [`EnvStepOps`] trait is implemented for the unfused cubecl backend, and the
//! `#[backend_extension]` macro derives the fused backend (a deferred custom operation in
//! burn-fusion's stream) and the dispatch layer's routing.
#![allow(clippy::too_many_arguments)]

use burn::backend::TensorMetadata;
use burn::backend::cubecl::dtype_to_storage_type;
use burn::backend::fusion::custom::TensorSpec;
use burn::backend::tensor::{FloatTensor, IntTensor};
use burn::backend::{Backend, Dispatch, ExtensionType, backend_extension};
use burn::tensor::{DType, FloatDType, Int, Tensor};
use burn_cubecl::CubeBackend;
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::ops::numeric::empty_device_dtype;
use burn_cubecl::tensor::CubeTensor;
use cubecl::{CubeDim, calculate_cube_count_elemwise};

/// What one step writes: the new packed state and the step's results.
#[derive(ExtensionType)]
#[extension_type(fusion)]
pub struct StepOutput<B: Backend> {
    /// `[N, SCALARS + 4M]` float state.
    pub fstate: FloatTensor<B>,
    /// `[N, I_FIELDS]` bar, end and episode of each env.
    pub istate: IntTensor<B>,
    /// `[N, obs_dim]` next observations, in the dtype asked for.
    pub obs: FloatTensor<B>,
    /// `[N]` rewards.
    pub reward: FloatTensor<B>,
    /// `[N]` 1.0 where an episode ended.
    pub done: FloatTensor<B>,
    /// The log, this step's row written at `log_row` (in place where the log was held only by
    /// the caller): the episode log `[C, LOG_FIELDS, N]` (each env's `LAST_*` fields), or a
    /// state log `[C, SCALARS + 4M, 1]` (env 0's new state).
    pub log: FloatTensor<B>,
}

fn step_meta(
    _actions: &TensorSpec,
    _prices: &TensorSpec,
    _features: &TensorSpec,
    _starts: &TensorSpec,
    _params: &TensorSpec,
    fstate: &TensorSpec,
    istate: &TensorSpec,
    log: &TensorSpec,
    _log_row: &usize,
    _log_state: &bool,
    obs_dim: &usize,
    obs_dtype: &DType,
) -> StepOutputMetadata {
    let n = fstate.shape[0];
    let row = |shape: Vec<usize>| TensorSpec::new(shape.into(), fstate.dtype);
    StepOutputMetadata {
        fstate: fstate.clone(),
        istate: istate.clone(),
        obs: TensorSpec::new(vec![n, *obs_dim].into(), *obs_dtype),
        reward: row(vec![n]),
        done: row(vec![n]),
        log: log.clone(),
    }
}

/// The env step as a backend operation.
#[backend_extension(Cube, Fusion)]
pub trait EnvStepOps: Backend {
    /// One step of every env: `actions` `[N, M]`, `prices` `[T, M]`, `features` `[T, M·F]`,
    /// `starts` `[N·K]`, `params` (see [`super::state::params`]), the packed state, and the
    /// log whose row `log_row` (< C) the step's row goes to: the episode log
    /// `[C, LOG_FIELDS, N]`, or where `log_state` a state log `[C, SCALARS + 4M, 1]` (env 0's
    /// new state). The next observations are written in `obs_dtype` (a float dtype).
    #[fusion(meta = step_meta)]
    fn env_step(
        actions: FloatTensor<Self>,
        prices: &FloatTensor<Self>,
        features: &FloatTensor<Self>,
        starts: IntTensor<Self>,
        params: &FloatTensor<Self>,
        fstate: FloatTensor<Self>,
        istate: IntTensor<Self>,
        log: FloatTensor<Self>,
        log_row: usize,
        log_state: bool,
        obs_dim: usize,
        obs_dtype: DType,
    ) -> StepOutput<Self>;
}

impl EnvStepOps for CubeBackend {
    fn env_step(
        actions: FloatTensor<Self>,
        prices: &FloatTensor<Self>,
        features: &FloatTensor<Self>,
        starts: IntTensor<Self>,
        params: &FloatTensor<Self>,
        fstate: FloatTensor<Self>,
        istate: IntTensor<Self>,
        log: FloatTensor<Self>,
        log_row: usize,
        log_state: bool,
        obs_dim: usize,
        obs_dtype: DType,
    ) -> StepOutput<Self> {
        let (fdt, idt) = (fstate.dtype, istate.dtype);
        let n = fstate.meta.shape()[0];
        let (client, device) = (fstate.client.clone(), fstate.device.clone());
        let empty = |shape: Vec<usize>, dtype: DType| {
            empty_device_dtype(client.clone(), device.clone(), shape.into(), dtype)
        };
        let out: StepOutput<Self> = StepOutput {
            fstate: empty(fstate.shape().to_vec(), fdt),
            istate: empty(istate.shape().to_vec(), idt),
            obs: empty(vec![n, obs_dim], obs_dtype),
            reward: empty(vec![n], fdt),
            done: empty(vec![n], fdt),
            log: writable_in_place(log),
        };
        let cube_dim = CubeDim::new(&client, n);
        let cube_count = calculate_cube_count_elemwise(&client, n, cube_dim);
        code::env_step_kernel::launch(
            &client,
            cube_count,
            cube_dim,
            into_contiguous(actions).into_tensor_arg(),
            into_contiguous(prices.clone()).into_tensor_arg(),
            into_contiguous(features.clone()).into_tensor_arg(),
            into_contiguous(starts).into_tensor_arg(),
            into_contiguous(params.clone()).into_tensor_arg(),
            into_contiguous(fstate).into_tensor_arg(),
            into_contiguous(istate).into_tensor_arg(),
            out.fstate.clone().into_tensor_arg(),
            out.istate.clone().into_tensor_arg(),
            out.obs.clone().into_tensor_arg(),
            out.reward.clone().into_tensor_arg(),
            out.done.clone().into_tensor_arg(),
            out.log.clone().into_tensor_arg(),
            log_row as u32,
            u32::from(log_state),
            [
                dtype_to_storage_type(fdt),
                dtype_to_storage_type(idt),
                dtype_to_storage_type(obs_dtype),
            ],
        );
        out
    }
}

/// The tensors of one kernel step, as [`super::TensorVecEnv`] holds them.
/// `t` itself where only the caller holds it and it is contiguous (then a kernel may write
/// into its storage, as `slice_assign` does), else a contiguous copy that nobody else holds.
pub fn writable_in_place(t: CubeTensor) -> CubeTensor {
    if t.is_contiguous() && t.can_mut() {
        t
    } else if t.is_contiguous() {
        t.copy()
    } else {
        into_contiguous(t)
    }
}

pub(crate) struct StepTensors<'a> {
    pub actions: Tensor<2>,
    pub prices: &'a Tensor<2>,
    pub features: &'a Tensor<2>,
    pub starts: &'a Tensor<1, Int>,
    pub params: &'a Tensor<1>,
    pub fstate: Tensor<2>,
    pub istate: Tensor<2, Int>,
    /// `[C, LOG_FIELDS, N]`, or `[C, SCALARS + 4M, 1]` where `log_state`, written at row
    /// `log_row`.
    pub log: Tensor<3>,
    pub log_row: usize,
    pub log_state: bool,
    pub obs_dim: usize,
    pub obs_dtype: FloatDType,
}

/// The kernel's outputs as tensors.
pub(crate) struct StepTensorsOut {
    pub fstate: Tensor<2>,
    pub istate: Tensor<2, Int>,
    pub obs: Tensor<2>,
    pub reward: Tensor<1>,
    pub done: Tensor<1>,
    /// The log, its row `log_row` written.
    pub log: Tensor<3>,
}

/// One step through the kernel (call only where `tradetune_device::runs_cubecl_kernels` holds
/// for the state).
pub(crate) fn step(t: StepTensors<'_>) -> StepTensorsOut {
    let dtype = t.fstate.dtype();
    let mut actions = t.actions.without_autodiff();
    if actions.dtype() != dtype {
        actions = actions.cast(dtype);
    }
    let out = <Dispatch as EnvStepOps>::env_step(
        actions.into_dispatch(),
        &t.prices.clone().into_dispatch(),
        &t.features.clone().into_dispatch(),
        t.starts.clone().into_dispatch(),
        &t.params.clone().into_dispatch(),
        t.fstate.into_dispatch(),
        t.istate.into_dispatch(),
        t.log.into_dispatch(),
        t.log_row,
        t.log_state,
        t.obs_dim,
        t.obs_dtype.into(),
    );
    StepTensorsOut {
        fstate: Tensor::from_dispatch(out.fstate),
        istate: Tensor::from_dispatch(out.istate),
        obs: Tensor::from_dispatch(out.obs),
        reward: Tensor::from_dispatch(out.reward),
        done: Tensor::from_dispatch(out.done),
        log: Tensor::from_dispatch(out.log),
    }
}

/// The kernel and its helpers, in CubeCL's language (its `Tensor` is not burn's).
mod code {
    use cubecl::prelude::*;

    use crate::cpu::SELL_ALL_WITHIN;
    use crate::tensor::cube_io::{cur, get, put};

    use super::super::state::{
        BAR, END, EP_FEES, EP_REWARD, EPISODE, EQW_START, GAMMA_RETURN, I_FIELDS, LAST_DONE,
        LAST_EQW_RETURN, LAST_FEES, LAST_RETURN, LAST_REWARD_SUM, LOG_FIELDS, PREV_EQW, PREV_VALUE,
        SCALARS, STEP_FEES,
    };
    use super::super::state::{
        CASH, P_ACTION_SCALE, P_BUY_FEE, P_COMPAT, P_COOLDOWN, P_COOLDOWN_FRACTION, P_EPISODE_LEN,
        P_EPISODES_PER_ENV, P_INITIAL_CASH, P_LOOKBACK, P_MAX_BUY, P_REWARD_KIND, P_REWARD_SCALE,
        P_SELL_FEE, P_TRAILING_STOP, SCALAR_PARAMS,
    };

    /// A clean action: NaN is no order, anything else is clipped to [-1, 1].
    #[cube]
    fn clean_action(a: f32) -> f32 {
        if a.is_nan() {
            0.0f32
        } else {
            a.clamp(-1.0f32, 1.0f32)
        }
    }

    /// Cash value of an order of |action| `a` ≥ 0 at `price`: value-based, or units·price in
    /// FinRL_Crypto compatibility mode.
    #[cube]
    fn order_value(compat: bool, a: f32, units: f32, action_scale: f32, price: f32) -> f32 {
        if compat {
            a * units * price
        } else {
            a * action_scale
        }
    }

    #[cube]
    fn param<F: Float>(params: &Tensor<F>, k: usize) -> f32 {
        f32::cast_from(params[k])
    }

    /// One env per thread; `fout` starts as a copy of the env's `fstate` row and is updated in
    /// place, as [`crate::cpu`] updates its state arrays.
    #[cube(launch)]
    pub(super) fn env_step_kernel<F: Float, I: Numeric, O: Float>(
        actions: &Tensor<F>,
        prices: &Tensor<F>,
        features: &Tensor<F>,
        starts: &Tensor<I>,
        params: &Tensor<F>,
        fstate: &Tensor<F>,
        istate: &Tensor<I>,
        fout: &mut Tensor<F>,
        iout: &mut Tensor<I>,
        obs: &mut Tensor<O>,
        reward: &mut Tensor<F>,
        done: &mut Tensor<F>,
        log: &mut Tensor<F>,
        log_row: u32,
        log_state: u32,
        #[define(F, I, O)] _dtypes: [ElemType; 3],
    ) {
        let env = ABSOLUTE_POS;
        if env >= reward.len() {
            terminate!();
        }
        let m = prices.shape(1);
        let sf = fstate.shape(1);
        let base = env * sf;
        for c in 0..sf {
            fout[base + c] = fstate[base + c];
        }
        let sell_fee = param(params, P_SELL_FEE);
        let buy_fee = param(params, P_BUY_FEE);
        let trailing_stop = param(params, P_TRAILING_STOP);
        let cooldown = param(params, P_COOLDOWN);
        let cooldown_fraction = param(params, P_COOLDOWN_FRACTION);
        let action_scale = param(params, P_ACTION_SCALE);
        let max_buy = param(params, P_MAX_BUY);
        let init = param(params, P_INITIAL_CASH);
        let reward_scale = param(params, P_REWARD_SCALE);
        let reward_kind = param(params, P_REWARD_KIND);
        let compat = param(params, P_COMPAT) > 0.5f32;
        let episode_len = param(params, P_EPISODE_LEN) as usize;
        let episodes_per_env = param(params, P_EPISODES_PER_ENV) as usize;
        let lookback = param(params, P_LOOKBACK) as usize;
        let min0 = SCALAR_PARAMS;
        let units0 = SCALAR_PARAMS + m;
        let hold0 = base + SCALARS;
        let trail0 = hold0 + m;
        let held0 = trail0 + m;
        let eqw0 = held0 + m;
        let ib = env * I_FIELDS;

        let bar = usize::cast_from(istate[ib + BAR]) + 1;
        let end = usize::cast_from(istate[ib + END]);
        let episode = usize::cast_from(istate[ib + EPISODE]);
        let prow = bar * m;
        let arow = env * m;
        let mut cash = cur(fout, base + CASH);
        let mut fees = 0.0f32;

        // Rules 1–3 per asset (time passes and trailing stop, the agent's sell, cooldown), adding
        // up what the buys ask for.
        let mut wanted = 0.0f32;
        for k in 0..m {
            let price = get(prices, prow + k);
            let a = clean_action(get(actions, arow + k));
            let min_order = param(params, min0 + k);
            let units = param(params, units0 + k);
            let mut h = cur(fout, hold0 + k);
            if h > 0.0f32 {
                let mut held = cur(fout, held0 + k) + 1.0f32;
                let mut trail = cur(fout, trail0 + k).max(price);
                if trailing_stop > 0.0f32 && price <= trail * (1.0f32 - trailing_stop) {
                    let gross = h * price;
                    let f = gross * sell_fee;
                    cash += gross - f;
                    fees += f;
                    h = 0.0f32;
                    trail = 0.0f32;
                    held = 0.0f32;
                }
                if a < 0.0f32 && h > 0.0f32 {
                    let value = order_value(compat, -a, units, action_scale, price);
                    if value >= min_order {
                        // Within a rounding of the position: all of it (`cpu::sold_units`).
                        let mut q = value / price;
                        if q >= h * (1.0f32 - SELL_ALL_WITHIN) {
                            q = h;
                        }
                        let gross = q * price;
                        let f = gross * sell_fee;
                        cash += gross - f;
                        fees += f;
                        h -= q;
                        held = 0.0f32;
                    }
                }
                if cooldown > 0.0f32 && h > 0.0f32 && held >= cooldown {
                    let q = h * cooldown_fraction;
                    let gross = q * price;
                    let f = gross * sell_fee;
                    cash += gross - f;
                    fees += f;
                    h -= q;
                    held = 0.0f32;
                }
                if h <= 0.0f32 {
                    h = 0.0f32;
                    trail = 0.0f32;
                }
                put(fout, hold0 + k, h);
                put(fout, trail0 + k, trail);
                put(fout, held0 + k, held);
            }
            if a > 0.0f32 {
                let value = order_value(compat, a, units, action_scale, price);
                if value >= min_order {
                    wanted += value * (1.0f32 + buy_fee);
                }
            }
        }

        // 4. Buys from one shared budget, scaled pro rata.
        if wanted > 0.0f32 {
            let budget = cash * max_buy;
            let mut scale = 1.0f32;
            if wanted > budget {
                scale = budget / wanted;
            }
            for k in 0..m {
                let a = clean_action(get(actions, arow + k));
                if a > 0.0f32 {
                    let price = get(prices, prow + k);
                    let min_order = param(params, min0 + k);
                    let value =
                        order_value(compat, a, param(params, units0 + k), action_scale, price);
                    let v = value * scale;
                    if value >= min_order && v >= min_order && v > 0.0f32 {
                        let f = v * buy_fee;
                        cash -= v + f;
                        fees += f;
                        let h = cur(fout, hold0 + k);
                        let mut trail = cur(fout, trail0 + k);
                        if h <= 0.0f32 {
                            trail = price;
                        }
                        put(fout, hold0 + k, h + v / price);
                        put(fout, trail0 + k, trail.max(price));
                        put(fout, held0 + k, 0.0f32);
                    }
                }
            }
        }
        cash = cash.max(0.0f32);

        // 5. Valuation and reward.
        let mut holdings_value = 0.0f32;
        let mut eqw_value = 0.0f32;
        for k in 0..m {
            let price = get(prices, prow + k);
            holdings_value += cur(fout, hold0 + k) * price;
            eqw_value += cur(fout, eqw0 + k) * price;
        }
        let value = cash + holdings_value;
        let prev_value = cur(fout, base + PREV_VALUE);
        let prev_eqw = cur(fout, base + PREV_EQW);
        let mut r = ((value - prev_value) - (eqw_value - prev_eqw)) / init;
        if reward_kind > 0.5f32 && reward_kind < 1.5f32 {
            r = (value - prev_value) / init;
        } else if reward_kind > 1.5f32 {
            r = (value.max(f32::MIN_POSITIVE) / prev_value).ln();
        }
        r *= reward_scale;
        let is_done = bar >= end;
        if compat {
            let g = cur(fout, base + GAMMA_RETURN) * 0.99f32 + r;
            put(fout, base + GAMMA_RETURN, g);
            if is_done {
                r = g;
            }
        }
        let ep_reward = cur(fout, base + EP_REWARD) + r;
        let ep_fees = cur(fout, base + EP_FEES) + fees;
        put(fout, base + CASH, cash);
        put(fout, base + PREV_VALUE, value);
        put(fout, base + PREV_EQW, eqw_value);
        put(fout, base + STEP_FEES, fees);
        put(fout, base + EP_FEES, ep_fees);
        put(fout, base + EP_REWARD, ep_reward);
        reward[env] = F::cast_from(r);

        // 6. Episode statistics and auto-reset.
        let mut new_bar = bar;
        let mut new_end = end;
        let mut new_episode = episode;
        if is_done {
            put(fout, base + LAST_DONE, 1.0f32);
            put(fout, base + LAST_REWARD_SUM, ep_reward);
            put(fout, base + LAST_RETURN, value / init - 1.0f32);
            let eqw_start = cur(fout, base + EQW_START);
            put(fout, base + LAST_EQW_RETURN, eqw_value / eqw_start - 1.0f32);
            put(fout, base + LAST_FEES, ep_fees);
            done[env] = F::new(1.0);
            new_episode = episode + 1;
            let start =
                usize::cast_from(starts[env * episodes_per_env + new_episode % episodes_per_env]);
            new_bar = start;
            new_end = start + episode_len;
            let p0 = start * m;
            let per_asset = init / f32::cast_from(m as u32);
            let mut start_value = 0.0f32;
            for k in 0..m {
                let price = get(prices, p0 + k);
                put(fout, hold0 + k, 0.0f32);
                put(fout, trail0 + k, 0.0f32);
                put(fout, held0 + k, 0.0f32);
                if !compat {
                    put(fout, eqw0 + k, per_asset / price);
                }
                start_value += cur(fout, eqw0 + k) * price;
            }
            put(fout, base + CASH, init);
            put(fout, base + PREV_VALUE, init);
            put(fout, base + PREV_EQW, start_value);
            put(fout, base + EQW_START, start_value);
            put(fout, base + GAMMA_RETURN, 0.0f32);
            put(fout, base + EP_REWARD, 0.0f32);
            put(fout, base + EP_FEES, 0.0f32);
        } else {
            put(fout, base + LAST_DONE, 0.0f32);
            done[env] = F::new(0.0);
        }
        iout[ib + BAR] = I::cast_from(new_bar);
        iout[ib + END] = I::cast_from(new_end);
        iout[ib + EPISODE] = I::cast_from(new_episode);
        if log_state == 0 {
            let n = reward.len();
            let row = log_row as usize * LOG_FIELDS;
            for c in 0..LOG_FIELDS {
                log[(row + c) * n + env] = fout[base + LAST_DONE + c];
            }
        } else if env == 0 {
            let row = log_row as usize * sf;
            for c in 0..sf {
                log[row + c] = fout[c];
            }
        }

        // The observation at the (new) current bar.
        let od = obs.shape(1);
        let ob = env * od;
        let prow = new_bar * m;
        let cash = cur(fout, base + CASH);
        let mut held_value = 0.0f32;
        for k in 0..m {
            held_value += cur(fout, hold0 + k) * get(prices, prow + k);
        }
        let inv = 1.0f32 / (cash + held_value).max(f32::MIN_POSITIVE);
        put(obs, ob, cash * inv);
        for k in 0..m {
            put(
                obs,
                ob + 1 + k,
                cur(fout, hold0 + k) * get(prices, prow + k) * inv,
            );
        }
        let mf = features.shape(1);
        for lag in 0..lookback {
            let src = (new_bar - lag) * mf;
            let dst = ob + 1 + m + lag * mf;
            for c in 0..mf {
                obs[dst + c] = O::cast_from(features[src + c]);
            }
        }
    }
}
