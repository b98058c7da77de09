//! The trading environment on a [`Device`]: the same rules as [`crate::cpu`], for all N envs ×
//! M assets at once.
//!
//! Market data and the start table are uploaded once; a step reads and writes only tensors on
//! the device, so on a GPU a rollout moves nothing between host and device (the user's seeds
//! lost 40 % of their GPU time to exactly that round trip). The state is packed in two tensors
//! ([`state`]). On a cubecl device (a GPU, or lavapipe) a step is one CubeCL kernel
//! ([`kernel`], issue 33: the tensor program costs about 70 launches a step); elsewhere (flex,
//! an autodiff device, a build without `wgpu`) it is the tensor program of [`rules`], with masks
//! instead of branches. The [`VecEnv`] implementation copies to and from host buffers and
//! exists for tests and benchmarks.

use std::ops::Range;

use burn::tensor::{Bool, Device, FloatDType, Int, Tensor, TensorData};

use crate::config::EnvConfig;
use crate::starts::{StartTable, check_range};
use crate::{EnvError, EpisodeStats, VecEnv};
use tradetune_market::Dataset;

#[cfg(feature = "wgpu")]
pub mod cube_io;
#[cfg(feature = "wgpu")]
mod kernel;
#[cfg(feature = "wgpu")]
pub use kernel::writable_in_place;
mod rules;
mod state;
mod state_log;

pub use state_log::{LoggedState, StateLog};

use state::{
    CASH, LAST_DONE, LAST_EQW_RETURN, LAST_FEES, LAST_RETURN, LAST_REWARD_SUM, LOG_FIELDS,
    PREV_EQW, PREV_VALUE, Packed, STEP_FEES, State,
};

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

/// What a step reads and never writes: the config, the market data and the start table.
struct Tables {
    cfg: EnvConfig,
    device: Device,
    n: usize,
    m: usize,
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
    /// The kernel's parameters ([`state::params`]).
    #[cfg_attr(not(feature = "wgpu"), allow(dead_code))]
    params: Tensor<1>,
}

/// N trading environments as tensors on one device.
pub struct TensorVecEnv {
    t: Tables,
    obs_dim: usize,
    state: Packed,
    /// Whether a step is the kernel (a cubecl device without autodiff).
    kernel: bool,
    /// The float dtype of the observations the tensor API returns ([`TensorVecEnv::set_obs_dtype`]).
    obs_dtype: FloatDType,
    /// Whether the last step's kernel wrote its episode-log row into the log's next row
    /// (row `log.len`), so that [`TensorVecEnv::log_episodes`] only has to count it.
    row_in_log: bool,
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
        check_range(&range, data.n_bars())?;
        StartTable::check_device(&cfg, range.clone())?;
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
        let (min_orders, units) = (cfg.min_orders(m), cfg.compat_units(&first));
        let (episode_len, episodes_per_env) = (table.episode_len, table.episodes_per_env);
        let params = state::params(&cfg, episode_len, episodes_per_env, &min_orders, &units);
        let params =
            Tensor::<1>::from_data(TensorData::new(params.clone(), [params.len()]), device);
        let min_order = row(min_orders);
        let compat_units = row(units);
        let state = State::zeros(n, m, device);
        #[cfg(feature = "wgpu")]
        let kernel = tradetune_device::runs_cubecl_kernels(&state.f);
        #[cfg(not(feature = "wgpu"))]
        let kernel = false;
        let mut env = Self {
            obs_dim: cfg.obs_dim(m, f),
            t: Tables {
                cfg,
                device: device.clone(),
                n,
                m,
                episode_len,
                episodes_per_env,
                prices,
                features,
                starts,
                env_offsets,
                min_order,
                compat_units,
                params,
            },
            state,
            kernel,
            obs_dtype: FloatDType::F32,
            row_in_log: false,
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
        &self.t.device
    }

    /// Has [`Self::reset_tensors`], [`Self::step_tensors`] and [`Self::step_logging_state`]
    /// return their observations in `dtype` (f32 until then): a policy's input dtype, so that a
    /// policy computing in f16 casts nothing a step (the step's kernel writes them in it, a
    /// step of tensor operations casts them; the values are the f32 ones rounded, as a cast
    /// rounds them). The host API ([`VecEnv`]) reads them back as f32 either way. For a policy's
    /// own steps (an evaluation): a training env's observations feed the normalisation
    /// statistics and the rollout buffer, which take f32.
    pub fn set_obs_dtype(&mut self, dtype: FloatDType) {
        self.obs_dtype = dtype;
    }

    /// Resets every env to episode 0 and returns the first observations `[N, obs_dim]`.
    pub fn reset_tensors(&mut self) -> Tensor<2> {
        let (n, d) = (self.t.n, &self.t.device);
        let mut s = State::unpack(&self.state);
        s.episode = Tensor::<1, Int>::zeros([n], d);
        self.t
            .restart(&mut s, Tensor::<1, Bool>::full([n], true, d), true);
        s.last_done = Tensor::zeros([n], d);
        // No step before it: no fees (a restart after an episode's end keeps its step's).
        s.step_fees = Tensor::zeros([n], d);
        let obs = self.t.observe(&s);
        self.state = s.pack(self.t.m);
        self.row_in_log = false;
        obs.cast(self.obs_dtype)
    }

    /// Applies `actions` `[N, M]` (clipped to [-1, 1]; NaN = no order) and advances one bar.
    pub fn step_tensors(&mut self, actions: Tensor<2>) -> TensorStep {
        #[cfg(feature = "wgpu")]
        if self.kernel {
            // The kernel writes the step's log row into the log's next row, in place: make
            // room first (a step that is not logged leaves it to be overwritten).
            let len = self.log.len;
            if len == self.log.rows.dims()[0] {
                self.reserve_episode_log((2 * len).max(64));
            }
            let log = std::mem::replace(
                &mut self.log.rows,
                Tensor::empty([0, LOG_FIELDS, self.t.n], &self.t.device),
            );
            let (step, log) = self.kernel_step(actions, log, len, false);
            self.log.rows = log;
            self.row_in_log = true;
            return step;
        }
        self.row_in_log = false;
        let mut s = State::unpack(&self.state);
        let mut out = self.t.step(&mut s, actions);
        self.state = s.pack(self.t.m);
        out.obs = out.obs.cast(self.obs_dtype);
        out
    }

    /// One step as the kernel, its log row written into row `log_row` of `log` (the episode
    /// log, or a state log where `log_state`): the step and the log.
    #[cfg(feature = "wgpu")]
    fn kernel_step(
        &mut self,
        actions: Tensor<2>,
        log: Tensor<3>,
        log_row: usize,
        log_state: bool,
    ) -> (TensorStep, Tensor<3>) {
        let t = &self.t;
        let out = kernel::step(kernel::StepTensors {
            actions,
            prices: &t.prices,
            features: &t.features,
            starts: &t.starts,
            params: &t.params,
            fstate: self.state.f.clone(),
            istate: self.state.i.clone(),
            log,
            log_row,
            log_state,
            obs_dim: self.obs_dim,
            obs_dtype: self.obs_dtype,
        });
        self.state = Packed {
            f: out.fstate,
            i: out.istate,
            m: t.m,
        };
        let step = TensorStep {
            obs: out.obs,
            reward: out.reward,
            done: out.done,
        };
        (step, out.log)
    }

    /// Whether a step runs as one CubeCL kernel (a cubecl device without autodiff, in a build
    /// with `wgpu`) rather than as burn tensor operations.
    pub fn steps_as_kernel(&self) -> bool {
        self.kernel
    }

    /// `[N]` cash of every env.
    pub fn cash(&self) -> Tensor<1> {
        self.state.col(CASH)
    }

    /// `[N, M]` units held.
    pub fn holdings(&self) -> Tensor<2> {
        self.state.hold()
    }

    /// `[N, M]` units of each asset the equal-weight buy-and-hold holds (`initial_cash / M`
    /// divided by each asset's price at the episode's first bar).
    pub fn equal_weight_units(&self) -> Tensor<2> {
        self.state.eqw()
    }

    /// `[N]` portfolio values and equal-weight buy-and-hold values at each env's current bar
    /// (the initial cash and its equal-weight split at the start of an episode).
    pub fn values(&self) -> (Tensor<1>, Tensor<1>) {
        (self.state.col(PREV_VALUE), self.state.col(PREV_EQW))
    }

    /// `[N, M]` prices at each env's current bar.
    pub fn current_prices(&self) -> Tensor<2> {
        let bar = self.state.icol(state::BAR);
        self.t.prices.clone().select(0, bar)
    }

    /// `[N]` fees paid in the last step.
    pub fn last_step_fees(&self) -> Tensor<1> {
        self.state.col(STEP_FEES)
    }

    /// Makes room on the device for `steps` logged steps (a rollout's length), so that
    /// [`TensorVecEnv::log_episodes`] writes in place.
    pub fn reserve_episode_log(&mut self, steps: usize) {
        let cap = self.log.rows.dims()[0];
        if cap == 0 && steps > 0 {
            self.log.rows = Tensor::zeros([steps, LOG_FIELDS, self.t.n], &self.t.device);
        } else if steps > cap {
            let extra = Tensor::zeros([steps - cap, LOG_FIELDS, self.t.n], &self.t.device);
            let rows = std::mem::replace(
                &mut self.log.rows,
                Tensor::empty([0, LOG_FIELDS, self.t.n], &self.t.device),
            );
            self.log.rows = Tensor::cat(vec![rows, extra], 0);
        }
    }

    /// Appends the last step's finished-episode statistics to the log on the device: no read.
    pub fn log_episodes(&mut self) {
        let (n, t) = (self.t.n, self.log.len);
        if self.row_in_log {
            // The kernel wrote it there (and made room before).
            self.row_in_log = false;
            self.log.len += 1;
            return;
        }
        if t == self.log.rows.dims()[0] {
            self.reserve_episode_log((2 * t).max(64));
        }
        // The `LAST_*` fields, adjacent in the row's order.
        let row = self
            .state
            .cols(LAST_DONE, LOG_FIELDS)
            .swap_dims(0, 1)
            .unsqueeze_dim::<3>(0);
        let rows = std::mem::replace(
            &mut self.log.rows,
            Tensor::empty([0, LOG_FIELDS, n], &self.t.device),
        );
        self.log.rows = rows.slice_assign([t..t + 1, 0..LOG_FIELDS, 0..n], row);
        self.log.len += 1;
    }

    /// The statistics logged since the last call, still on the device; the log starts again.
    pub fn take_episode_log(&mut self) -> DeviceEpisodes {
        let (steps, n) = (self.log.len, self.t.n);
        self.log.len = 0;
        let values = if steps == 0 {
            Tensor::empty([0], &self.t.device)
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
            episode_len: self.t.episode_len,
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
        let done = tradetune_device::readback::read_f32(s.col(LAST_DONE), "device env: done flags")
            .map_err(EnvError::Tensor)?;
        if done.iter().all(|d| *d <= 0.5) {
            return Ok(vec![None; self.t.n]);
        }
        let rs = read(s.col(LAST_REWARD_SUM))?;
        let tr = read(s.col(LAST_RETURN))?;
        let er = read(s.col(LAST_EQW_RETURN))?;
        let fe = read(s.col(LAST_FEES))?;
        Ok((0..self.t.n)
            .map(|i| {
                (done[i] > 0.5).then_some(EpisodeStats {
                    reward_sum: rs[i],
                    length: self.t.episode_len as u32,
                    total_return: tr[i],
                    equal_weight_return: er[i],
                    fees: fe[i],
                })
            })
            .collect())
    }

    fn upload(&self, v: &[f32], shape: [usize; 2]) -> Tensor<2> {
        Tensor::from_data(TensorData::new(v.to_vec(), shape), &self.t.device)
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
        self.t.n
    }

    fn obs_dim(&self) -> usize {
        self.obs_dim
    }

    fn action_dim(&self) -> usize {
        self.t.m
    }

    fn reset(&mut self, obs: &mut [f32]) {
        let o = self.reset_tensors();
        download(o, obs);
    }

    fn step(&mut self, actions: &[f32], obs: &mut [f32], rewards: &mut [f32], dones: &mut [f32]) {
        let a = self.upload(actions, [self.t.n, self.t.m]);
        let out = self.step_tensors(a);
        download(out.obs, obs);
        download(out.reward, rewards);
        download(out.done, dones);
    }

    fn episode_stats(&self, env: usize) -> Option<EpisodeStats> {
        self.finished_episodes().ok()?.get(env).copied().flatten()
    }
}
