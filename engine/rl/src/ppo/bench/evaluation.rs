//! The trained policy's evaluation, timed on the benchmark's device: a trial evaluates its
//! policy on the validation split every `eval_every` updates, one env stepped bar by bar, so on
//! a GPU each bar costs a few small launches ([`crate::eval`]'s device run: the policy's and the
//! env's kernel, which writes the state log's row) and a long split costs as much as a rollout.

use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;

use crate::eval::{EvalSplit, Objective};
use crate::ppo::config::PpoConfig;
use crate::ppo::model::ActorCritic;
use crate::ppo::normalize::NormalizationStats;
use crate::ppo::policy::evaluate_policy_timed;
use tradetune_device::kernels;
use tradetune_env::EnvConfig;
use tradetune_market::Dataset;

/// Bars the probe evaluates: a short validation split's.
pub const EVAL_PROBE_BARS: usize = 256;

/// What one evaluation of the trained policy took (the second of two: the first compiled).
#[derive(Debug, Clone, Serialize)]
pub struct EvalProbe {
    /// Bars of the split evaluated.
    pub bars: usize,
    /// Wall time of the evaluation, its one read included.
    pub seconds: f64,
    pub bars_per_second: f64,
    /// Kernel launches per bar, where the device counts them.
    pub launches_per_bar: Option<f64>,
    /// The first run: its wall time, what it compiled and autotuned (where the device counts
    /// them), and the time its first half of bars took beyond its pace, which a training run
    /// counts as compile time where the evaluation compiled ([`crate::eval::TimedEval`]).
    pub first_seconds: f64,
    pub first_compiled: Option<u64>,
    pub first_slow_start_s: f64,
}

/// Evaluates `model` (with `norm` and `ppo`'s precision) on the last [`EVAL_PROBE_BARS`] bars
/// of `data` with `env`'s rules, twice, and times the second: an error's text where an
/// evaluation fails (the run's own figures stand).
pub fn eval_probe(
    model: &ActorCritic,
    norm: &NormalizationStats,
    ppo: &PpoConfig,
    data: &Arc<Dataset>,
    env: &EnvConfig,
) -> Result<EvalProbe, String> {
    let n = data.n_bars();
    let range = n.saturating_sub(EVAL_PROBE_BARS)..n;
    let split = EvalSplit::new("benchmark", data.clone(), range, env);
    let evaluate = || {
        evaluate_policy_timed(model, norm, ppo, &split, Objective::SharpeExcess)
            .map_err(|e| e.to_string())
    };
    let cold = kernels::counts();
    let start = Instant::now();
    let first = evaluate()?;
    let first_seconds = start.elapsed().as_secs_f64();
    kernels::settle();
    let before = kernels::counts();
    let compiled = before.since(&cold);
    let start = Instant::now();
    let report = evaluate()?.report;
    let seconds = start.elapsed().as_secs_f64();
    let launches = kernels::counts().since(&before).dispatches as f64;
    let bars = report.bars;
    Ok(EvalProbe {
        bars,
        seconds,
        bars_per_second: bars as f64 / seconds.max(1e-9),
        launches_per_bar: kernels::counting_dispatches().then(|| launches / bars.max(1) as f64),
        first_seconds,
        first_compiled: kernels::counting_compiles()
            .then_some(compiled.compiled + compiled.autotune_runs),
        first_slow_start_s: first.slow_start_s,
    })
}
