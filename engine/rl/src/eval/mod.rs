//! Evaluation of a trained policy on a held-out split: one environment, one episode over the
//! whole split from its first usable bar, deterministic actions (the Gaussian's mean), against
//! the equal-weight buy-and-hold of the same assets.
//!
//! - [`metrics`]: total return, annualised Sharpe and Sortino, max drawdown, turnover, fees.
//! - [`objective`]: the number a study maximises (default Sharpe(agent) − Sharpe(equal weight)).
//! - [`evaluate()`]: run a [`Policy`] and build an [`EvalReport`]. The PPO side adapts its
//!   model (`crate::ppo::DeterministicPolicy`, `crate::ppo::evaluate_trainer`): evaluation sits
//!   below the learner and imports nothing of it.
//! - [`pbo`](mod@pbo): how much to trust the best of N trials — the probability of backtest
//!   overfitting by combinatorially symmetric cross-validation (Bailey, Borwein, López de Prado
//!   and Zhu), on any matrix of per-period returns.
//! - [`dsr`]: the probabilistic and the deflated Sharpe ratio (Bailey and López de Prado) of the
//!   best of N trials, and the normal distribution they need.
//!
//! Non-finite results are an [`EvalError`], never a silently dropped sample.

pub mod dsr;
pub mod evaluate;
pub mod metrics;
pub mod objective;
pub mod pbo;

pub use evaluate::{
    EvalReport, EvalSplit, EvalSummary, Policy, TimedEval, evaluate, evaluate_timed,
};
pub use metrics::{Metrics, periods_per_year};
pub use objective::Objective;

use crate::eval::metrics::MetricError;
use tradetune_env::EnvError;

/// Why an evaluation produced no report. Each message names the split and what to change.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    /// A metric is not a finite number.
    #[error("evaluation on the {split} split: {who}: {source}")]
    Metric {
        split: String,
        /// "agent" or "equal weight".
        who: &'static str,
        #[source]
        source: MetricError,
    },
    /// The split cannot be evaluated as given.
    #[error("evaluation on the {split} split: {reason}")]
    Split { split: String, reason: String },
    /// The policy does not fit the split's environment.
    #[error(
        "evaluation on the {split} split: the policy takes observations of {policy} values but the environment gives {env}; evaluate with the env config and data the policy was trained on"
    )]
    Shape {
        split: String,
        policy: usize,
        env: usize,
    },
    /// The environment refused the configuration or the data.
    #[error(transparent)]
    Env(#[from] EnvError),
    /// The policy could not be prepared for evaluation (its normalisation statistics do not fit
    /// it, or reading them failed).
    #[error("evaluation on the {split} split: the policy: {reason}")]
    Policy { split: String, reason: String },
}
