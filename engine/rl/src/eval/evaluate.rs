//! Running a policy deterministically over one split and scoring it.
//!
//! The split is traded by one [`CpuVecEnv`] with the training run's rules (fees, order sizes,
//! stops, lookback) but `episode_bars = 0` and a fixed start, so the single episode covers every
//! bar from the first usable one (`start + lookback − 1`) to the last. The environment resets
//! when an episode ends, which would hide the final bar's holdings; so the env trades a copy of
//! the split with its last bar repeated once, and the evaluation stops one step before that
//! padding — every bar's holdings, value and fees stay readable.

use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

use burn::tensor::{Device, FloatDType, Tensor, TensorData};
use ndarray::{Axis, concatenate};
use serde::{Deserialize, Serialize};

use crate::eval::EvalError;
use crate::eval::metrics::{Curve, Metrics, periods_per_year};
use crate::eval::objective::Objective;
use tradetune_env::{CpuVecEnv, EnvConfig, StartMode, TensorVecEnv, VecEnv};
use tradetune_market::Dataset;

/// The bars to evaluate on and the trading rules.
#[derive(Debug, Clone)]
pub struct EvalSplit {
    /// Name for reports ("validation", "test", …).
    pub name: String,
    /// The dataset (features scaled as in training).
    pub dataset: Arc<Dataset>,
    /// The split's bars.
    pub range: Range<usize>,
    /// The training run's env rules; `n_envs`, `episode_bars`, `start` are overridden.
    pub env: EnvConfig,
}

impl EvalSplit {
    /// The split `range` of `dataset`, called `name`, traded under `env`'s rules.
    pub fn new(
        name: impl Into<String>,
        dataset: Arc<Dataset>,
        range: Range<usize>,
        env: &EnvConfig,
    ) -> Self {
        Self {
            name: name.into(),
            dataset,
            range,
            env: env.clone(),
        }
    }

    fn err(&self, reason: impl Into<String>) -> EvalError {
        EvalError::Split {
            split: self.name.clone(),
            reason: reason.into(),
        }
    }

    /// The steps an evaluation of this split takes (its bars after the first observation
    /// window), or why it cannot be evaluated: metrics need at least 2. Cheap: a trial checks
    /// its evaluation splits with it before it trains, not after.
    pub fn steps(&self) -> Result<usize, EvalError> {
        let first = self.env.lookback.max(1) - 1;
        // From the first usable bar to the split's last bar (the padding bar is never reached).
        let steps = self.range.len().saturating_sub(first + 1);
        if steps < 2 {
            return Err(self.err(format!(
                "{} bars with lookback {} leave {steps} steps; metrics need at least 2",
                self.range.len(),
                self.env.lookback
            )));
        }
        Ok(steps)
    }

    /// The env config of the evaluation: one env, one episode over the whole split.
    fn env_config(&self) -> EnvConfig {
        self.env
            .clone()
            .with_n_envs(1)
            .with_episode_bars(0)
            .with_start(StartMode::Fixed)
    }

    /// The split's bars with the last one repeated (one second later, keeping timestamps
    /// strictly increasing), so the evaluation episode ends one bar after the split.
    fn padded(&self) -> Result<Dataset, EvalError> {
        let d = &*self.dataset;
        let r = self.range.clone();
        if r.start >= r.end || r.end > d.n_bars() {
            return Err(self.err(format!(
                "bars {}..{} are not a non-empty range of the dataset's {} bars",
                r.start,
                r.end,
                d.n_bars()
            )));
        }
        let last = r.end - 1;
        let prices = concatenate(
            Axis(0),
            &[
                d.prices.slice(ndarray::s![r.clone(), ..]),
                d.prices.slice(ndarray::s![last..r.end, ..]),
            ],
        )
        .map_err(|e| self.err(format!("copying prices: {e}")))?;
        let features = concatenate(
            Axis(0),
            &[
                d.features.slice(ndarray::s![r.clone(), .., ..]),
                d.features.slice(ndarray::s![last..r.end, .., ..]),
            ],
        )
        .map_err(|e| self.err(format!("copying features: {e}")))?;
        let mut timestamps = d.timestamps[r].to_vec();
        timestamps.push(d.timestamps[last] + 1);
        Ok(Dataset {
            names: d.names.clone(),
            timestamps,
            prices: prices.as_standard_layout().into_owned(),
            features: features.as_standard_layout().into_owned(),
            feature_names: d.feature_names.clone(),
            scaler: None,
        })
    }
}

/// The outcome of one evaluation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalReport {
    /// Split name.
    pub split: String,
    /// Equity points (bars from the first usable one to the split's last).
    pub bars: usize,
    /// Bars per year used to annualise ([`periods_per_year`]).
    pub periods_per_year: f64,
    /// The policy's metrics.
    pub agent: Metrics,
    /// The equal-weight buy-and-hold's metrics (no fees: the env's yardstick).
    pub equal_weight: Metrics,
    /// Which objective [`EvalReport::objective`] is.
    pub objective_name: Objective,
    /// The objective's value.
    pub objective: f64,
    /// Portfolio value at each bar, in cash.
    pub agent_equity: Vec<f64>,
    /// Equal-weight buy-and-hold value at each bar, in cash.
    pub equal_weight_equity: Vec<f64>,
    /// Unix seconds (UTC) of each bar.
    pub timestamps: Vec<i64>,
}

/// An [`EvalReport`] without its curves, for events and storage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalSummary {
    /// Split name.
    pub split: String,
    /// Equity points.
    pub bars: usize,
    /// The policy's metrics.
    pub agent: Metrics,
    /// The equal-weight buy-and-hold's metrics.
    pub equal_weight: Metrics,
    /// Which objective `objective` is.
    pub objective_name: Objective,
    /// The objective's value.
    pub objective: f64,
}

impl EvalReport {
    /// The report without its curves.
    pub fn summary(&self) -> EvalSummary {
        EvalSummary {
            split: self.split.clone(),
            bars: self.bars,
            agent: self.agent,
            equal_weight: self.equal_weight,
            objective_name: self.objective_name,
            objective: self.objective,
        }
    }
}

/// What an evaluation needs of a policy: its input size, its device, and deterministic actions
/// in [-1, 1] for raw observations (normalised inside, as the policy was trained). The PPO
/// learner's policy is `crate::ppo::DeterministicPolicy`; evaluation knows nothing of PPO.
pub trait Policy {
    /// Length of the observations the policy takes.
    fn obs_dim(&self) -> usize;
    /// The device its tensors live on.
    fn device(&self) -> Device;
    /// Actions `[B, A]` in [-1, 1] for raw observations `[B, obs_dim]`; no autodiff graph.
    fn act(&self, obs: Tensor<2>) -> Tensor<2>;
    /// The float dtype the policy takes its observations in without casting them (an
    /// evaluation on the device has its env write them in it): f32 unless said otherwise.
    fn obs_dtype(&self) -> FloatDType {
        FloatDType::F32
    }
}

/// Runs `policy` over `split` and scores it and the equal-weight buy-and-hold with
/// `objective`.
pub fn evaluate(
    policy: &dyn Policy,
    split: &EvalSplit,
    objective: Objective,
) -> Result<EvalReport, EvalError> {
    evaluate_timed(policy, split, objective).map(|timed| timed.report)
}

/// An evaluation's report, and how much longer its start took than its pace.
#[derive(Debug, Clone)]
pub struct TimedEval {
    /// The report, as [`evaluate`] gives it.
    pub report: EvalReport,
    /// Seconds the first half of the bars (the env's reset counted with the first)
    /// took beyond the second half's pace (`BarClock::slow_start`): on a GPU's first
    /// evaluation in a run, about what compiling and autotuning its kernels cost; about 0
    /// where nothing compiled.
    pub slow_start_s: f64,
}

/// [`evaluate`], with how much longer its start took than its pace ([`TimedEval`]).
pub fn evaluate_timed(
    policy: &dyn Policy,
    split: &EvalSplit,
    objective: Objective,
) -> Result<TimedEval, EvalError> {
    let per_year = periods_per_year(&split.dataset).ok_or_else(|| {
        split.err("the dataset has fewer than two bars, so no bar length to annualise with")
    })?;
    let padded = Arc::new(split.padded()?);
    let n_bars = padded.n_bars();
    let mut env = CpuVecEnv::new(split.env_config(), padded.clone(), 0..n_bars)
        .map_err(|e| split.err(e.to_string()))?;
    let d = env.obs_dim();
    let policy_dim = policy.obs_dim();
    if policy_dim != d {
        return Err(EvalError::Shape {
            split: split.name.clone(),
            policy: policy_dim,
            env: d,
        });
    }
    let device = policy.device();

    let first = split.env.lookback.max(1) - 1;
    let steps = split.steps()?;
    let mut clock = BarClock::default();
    let curves = if tradetune_device::reads_are_transfers(&device) {
        drop(env);
        let run = DeviceRun { policy, steps };
        run.curves(split, &padded, &device, &mut clock)?
    } else {
        clock.start();
        let mut obs = vec![0f32; d];
        env.reset(&mut obs);
        let (mut reward, mut done) = ([0f32], [0f32]);
        let mut c = Curves::with_capacity(steps);
        c.agent_equity.push(env.value(0) as f64);
        c.ew_equity.push(env.equal_weight_value(0) as f64);
        for _ in 0..steps {
            let x = Tensor::<2>::from_data(TensorData::new(obs.clone(), [1, d]), &device);
            let action: Vec<f32> =
                tradetune_device::readback::read_f32(policy.act(x), "evaluation: actions")
                    .map_err(|e| split.err(format!("reading the policy's actions: {e}")))?;
            let before = env.holdings(0);
            env.step(&action, &mut obs, &mut reward, &mut done);
            if done[0] > 0.5 {
                return Err(ended_early(split, env.bar(0)));
            }
            let after = env.holdings(0);
            c.traded
                .push(traded_value(&before, &after, &padded, env.bar(0)));
            c.fees.push(env.last_step_fees(0) as f64);
            c.agent_equity.push(env.value(0) as f64);
            c.ew_equity.push(env.equal_weight_value(0) as f64);
            clock.lap();
        }
        c
    };
    let Curves {
        agent_equity,
        ew_equity,
        traded,
        fees,
    } = curves;
    let metric = |who: &'static str, curve: Curve<'_>| {
        Metrics::from_curve(curve).map_err(|source| EvalError::Metric {
            split: split.name.clone(),
            who,
            source,
        })
    };
    let agent = metric(
        "agent",
        Curve {
            equity: &agent_equity,
            traded: &traded,
            fees: &fees,
            periods_per_year: per_year,
        },
    )?;
    let equal_weight = metric(
        "equal weight",
        Curve {
            equity: &ew_equity,
            traded: &[],
            fees: &[],
            periods_per_year: per_year,
        },
    )?;
    let value = objective.value(&agent, &equal_weight);
    if !value.is_finite() {
        let why = if [agent.sortino, equal_weight.sortino].contains(&f64::INFINITY)
            && matches!(objective, Objective::Sortino | Objective::SortinoExcess)
        {
            " (a Sortino ratio is infinite: no losing bar in the split)"
        } else {
            ""
        };
        return Err(split.err(format!("objective {objective} is {value}{why}")));
    }
    let start = split.range.start + first;
    let report = EvalReport {
        split: split.name.clone(),
        bars: agent_equity.len(),
        periods_per_year: per_year,
        agent,
        equal_weight,
        objective_name: objective,
        objective: value,
        timestamps: split.dataset.timestamps[start..start + agent_equity.len()].to_vec(),
        agent_equity,
        equal_weight_equity: ew_equity,
    };
    Ok(TimedEval {
        report,
        slow_start_s: clock.slow_start(),
    })
}

/// The host's time per bar of an evaluation, the first from just before the env's reset (its
/// set-up, the split's upload, is every evaluation's and is left out).
#[derive(Debug, Default)]
struct BarClock {
    last: Option<Instant>,
    bars: Vec<f64>,
}

impl BarClock {
    /// Starts the first bar's time.
    fn start(&mut self) {
        self.last = Some(Instant::now());
    }

    /// Ends a bar (and starts the next).
    fn lap(&mut self) {
        let now = Instant::now();
        let secs = self.last.map_or(0.0, |t| (now - t).as_secs_f64());
        self.last = Some(now);
        self.bars.push(secs);
    }

    /// How much longer the first half of the bars took than the second half's pace: a GPU's
    /// evaluation compiles and autotunes its kernels in its first bars (the policy at one row,
    /// the env's kernel at one env writing the state log's row: not all at the first bar, since
    /// burn's fusion compiles a fused kernel when its stream runs it, some bars later), and
    /// runs at a steady pace after. The pace is the halves' mean, not a typical bar's: a bar's
    /// host time is its launches' unless the device's queue is full, when the host waits for
    /// the device, so a bar in two or three takes several times the median (lavapipe), as
    /// many in an evaluation that compiles as in one that does not. Never negative; about 0,
    /// give or take the host's jitter, where nothing compiled.
    fn slow_start(&self) -> f64 {
        let half = self.bars.len() / 2;
        if half == 0 {
            return 0.0;
        }
        let (early, late) = self.bars.split_at(half);
        let pace = late.iter().sum::<f64>() / late.len() as f64;
        (early.iter().sum::<f64>() - pace * half as f64).max(0.0)
    }
}

/// The series an evaluation scores.
struct Curves {
    agent_equity: Vec<f64>,
    ew_equity: Vec<f64>,
    traded: Vec<f64>,
    fees: Vec<f64>,
}

impl Curves {
    fn with_capacity(steps: usize) -> Self {
        Curves {
            agent_equity: Vec::with_capacity(steps + 1),
            ew_equity: Vec::with_capacity(steps + 1),
            traded: Vec::with_capacity(steps),
            fees: Vec::with_capacity(steps),
        }
    }
}

/// The value traded by a step that took the holdings from `before` to `after` (units per
/// asset), at the prices of `bar`: both evaluations' turnover.
fn traded_value(before: &[f32], after: &[f32], data: &Dataset, bar: usize) -> f64 {
    after
        .iter()
        .zip(before)
        .zip(data.prices.row(bar))
        .map(|((after, before), price)| ((after - before).abs() * price) as f64)
        .sum()
}

fn ended_early(split: &EvalSplit, bar: usize) -> EvalError {
    split.err(format!(
        "the episode ended at bar {bar} before the split's end; this is a bug"
    ))
}

/// The evaluation on a device whose reads are transfers (a GPU): the split is traded by a
/// [`TensorVecEnv`] of one env on the policy's device, its state after each bar is written to a
/// log on the device ([`tradetune_env::StateLog`], by the env's own kernel), and the whole log
/// is read back once at the end, instead of one read of the action per bar; the host then prices
/// each bar's trades from the logged holdings, as the host evaluation does. A bar costs the
/// policy's launches and the env's kernel (and the log's write, a launch of its own, where the
/// env's step is not the kernel). Same rules and formulas as the host env (the env tests hold
/// them equal).
struct DeviceRun<'a> {
    policy: &'a dyn Policy,
    steps: usize,
}

impl DeviceRun<'_> {
    fn curves(
        &self,
        split: &EvalSplit,
        padded: &Dataset,
        device: &burn::tensor::Device,
        clock: &mut BarClock,
    ) -> Result<Curves, EvalError> {
        let mut env = TensorVecEnv::new(split.env_config(), padded, 0..padded.n_bars(), device)
            .map_err(|e| split.err(e.to_string()))?;
        env.set_obs_dtype(self.policy.obs_dtype());
        clock.start();
        let mut obs = env.reset_tensors();
        let mut log = env.state_log(self.steps + 1);
        for t in 0..self.steps {
            obs = env
                .step_logging_state(self.policy.act(obs), &mut log, t + 1)
                .obs;
            clock.lap();
        }
        let host = tradetune_device::readback::read_f32(log.values(), "evaluation: curves")
            .map_err(|e| split.err(format!("reading the evaluation's curves: {e}")))?;
        let states = log
            .decode(&host)
            .map_err(|e| split.err(format!("reading the evaluation's curves: {e}")))?;
        let Some((start, stepped)) = states.split_first() else {
            return Err(split.err("the evaluation logged no state"));
        };
        let mut c = Curves::with_capacity(self.steps);
        c.agent_equity.push(start.value as f64);
        c.ew_equity.push(start.equal_weight_value as f64);
        let mut before = &start.holdings;
        for (t, state) in stepped.iter().enumerate() {
            if state.done {
                let first = split.env.lookback.max(1) - 1;
                return Err(ended_early(split, split.range.start + first + t + 1));
            }
            c.traded
                .push(traded_value(before, &state.holdings, padded, state.bar));
            c.fees.push(state.fees as f64);
            c.agent_equity.push(state.value as f64);
            c.ew_equity.push(state.equal_weight_value as f64);
            before = &state.holdings;
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::BarClock;

    fn slow_start(bars: &[f64]) -> f64 {
        BarClock {
            last: None,
            bars: bars.to_vec(),
        }
        .slow_start()
    }

    #[test]
    fn the_slow_start_is_the_first_halfs_time_beyond_the_second_halfs_pace() {
        // Bars of 1 ms and 3 ms in turn (every second one waits for the device's queue), two
        // of the first slowed by compilations: their time beyond the pace (2 ms a bar) counts.
        let mut bars: Vec<f64> = (0..20).map(|i| [0.001, 0.003][i % 2]).collect();
        bars[0] += 0.5;
        bars[3] += 0.25;
        assert!(
            (slow_start(&bars) - 0.75).abs() < 1e-12,
            "{}",
            slow_start(&bars)
        );
        // A steady evaluation: nothing beyond its pace.
        let steady: Vec<f64> = (0..100).map(|i| [0.001, 0.003][i % 2]).collect();
        assert!(slow_start(&steady).abs() < 1e-12);
        // Never negative (a start faster than the pace), and nothing to compare with under
        // two bars.
        assert_eq!(slow_start(&[0.001, 0.002, 0.003, 0.004]), 0.0);
        assert_eq!(slow_start(&[3.0]), 0.0);
        assert_eq!(slow_start(&[]), 0.0);
    }

    #[test]
    fn laps_time_every_bar_from_the_start() {
        let mut c = BarClock::default();
        c.start();
        for _ in 0..3 {
            c.lap();
        }
        assert_eq!(c.bars.len(), 3);
    }
}
