//! Samplers: given the search space and the study's history, propose the next trial's
//! parameters.
//!
//! - [`RandomSampler`]: independent uniform draws (in log space for log ranges).
//! - [`TpeSampler`]: Optuna 5.0's default `TPESampler` — multivariate, constant liar,
//!   10 random start-up trials, 24 expected-improvement candidates.
//! - [`GridSampler`]: every combination of listed values, once.
//! - [`EnqueuedSampler`]: fixed (possibly partial) parameter sets tried first, e.g. a
//!   "baseline", then another sampler.
//!
//! Reproducibility: a sampler draws from a random stream derived from its seed and the trial
//! number alone, so the same history and trial number give the same proposal, whichever worker
//! asks and in whatever order. The caller must hand over every trial of the study, RUNNING ones
//! included (TPE's constant liar and the grid's bookkeeping read them), and must create the new
//! trial before the next sampling call: sample-and-insert is one critical section.

pub mod enqueued;
pub mod grid;
mod numpy_shuffle;
mod parzen;
pub mod random;
pub mod tpe;
pub(crate) mod truncnorm;

use std::collections::BTreeMap;

use rand::SeedableRng;
use rand::rngs::StdRng;

pub use enqueued::EnqueuedSampler;
pub use grid::GridSampler;
pub use random::RandomSampler;
pub use tpe::{TpeConfig, TpeSampler};

use super::space::{InternalParams, SearchSpace, SpaceError};
use super::trial::{Direction, Trial};

/// Everything a sampler may look at.
#[derive(Debug, Clone, Copy)]
pub struct SampleContext<'a> {
    pub space: &'a SearchSpace,
    /// Every trial of the study so far, in any state, whatever the pruner (Hyperband's
    /// brackets split only what its pruner compares, as in Optuna 5.0): what the sampler
    /// learns from, and what enqueued entries and grid points are taken by.
    pub history: &'a [Trial],
    pub direction: Direction,
    /// Number of the trial being sampled.
    pub trial_number: u64,
}

impl<'a> SampleContext<'a> {
    /// Trial `trial_number`'s context, the study's trials being `history`.
    pub fn new(
        space: &'a SearchSpace,
        history: &'a [Trial],
        direction: Direction,
        trial_number: u64,
    ) -> SampleContext<'a> {
        SampleContext {
            space,
            history,
            direction,
            trial_number,
        }
    }
}

/// A sampler's answer: the parameters (internal representation) and the system attributes to
/// store with the trial (Optuna's `fixed_params`, `grid_id`, `search_space`), which later
/// sampling calls read back from the history.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Proposal {
    pub params: InternalParams,
    pub system_attrs: BTreeMap<String, serde_json::Value>,
}

impl Proposal {
    /// The system attributes as the storage keeps them (and as [`Trial::system_attrs`] holds
    /// them once read back).
    pub fn stored_system_attrs(&self) -> BTreeMap<String, tradetune_storage::JsonValue> {
        self.system_attrs
            .iter()
            .map(|(k, v)| (k.clone(), tradetune_storage::JsonValue::from(v)))
            .collect()
    }
}

/// Why a sampler could not propose a trial.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SamplerError {
    #[error(transparent)]
    Space(#[from] SpaceError),
    #[error("grid sampler: {0}")]
    Grid(String),
    #[error("every point of the grid has been tried ({0} points)")]
    GridExhausted(usize),
    #[error("enqueued trial {index}: {message}")]
    Enqueued { index: usize, message: String },
    #[error("sampler setting '{field}': {message}")]
    Config {
        field: &'static str,
        message: String,
    },
}

/// Proposes the parameters of the next trial.
pub trait Sampler: Send + Sync {
    /// A short name for logs and benchmark tables (`random`, `tpe`, `grid`, …).
    fn name(&self) -> String;
    fn sample(&self, ctx: &SampleContext<'_>) -> Result<Proposal, SamplerError>;
    /// Whether an enqueued entry must fix every parameter in front of this sampler (the grid:
    /// Optuna's `GridSampler` refuses a partial `enqueue_trial`).
    fn needs_complete_entries(&self) -> bool {
        false
    }
    /// A proposal that uses no enqueued entry of the sampler's own, for a trial whose values
    /// come from elsewhere (one another program enqueued): the sampler behind the entries.
    fn sample_beside_entries(&self, ctx: &SampleContext<'_>) -> Result<Proposal, SamplerError> {
        self.sample(ctx)
    }
    /// Whether the sampler can run out of points (the grid can), so that a runner reads the
    /// study's trials before making one to ask [`Sampler::ran_out`].
    fn can_run_out(&self) -> bool {
        false
    }
    /// Whether a new trial would get nothing to try, given the study's trials
    /// (`ctx.history`; its `trial_number` is the one the next trial would get): the grid,
    /// every point tried by a finished trial. The runner then makes no trial, as Optuna's
    /// `GridSampler` stops the study after the trial that took the last point.
    fn ran_out(&self, _ctx: &SampleContext<'_>) -> bool {
        false
    }
}

impl<S: Sampler + ?Sized> Sampler for Box<S> {
    fn name(&self) -> String {
        (**self).name()
    }
    fn sample(&self, ctx: &SampleContext<'_>) -> Result<Proposal, SamplerError> {
        (**self).sample(ctx)
    }
    fn needs_complete_entries(&self) -> bool {
        (**self).needs_complete_entries()
    }
    fn sample_beside_entries(&self, ctx: &SampleContext<'_>) -> Result<Proposal, SamplerError> {
        (**self).sample_beside_entries(ctx)
    }
    fn can_run_out(&self) -> bool {
        (**self).can_run_out()
    }
    fn ran_out(&self, ctx: &SampleContext<'_>) -> bool {
        (**self).ran_out(ctx)
    }
}

/// SplitMix64's finaliser (Steele, Lea & Flood 2014): spreads seeds that differ in a few bits.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The random stream of trial `number` for a sampler seeded with `seed`; `salt` separates the
/// streams of samplers that share a seed (TPE's start-up random draws and its own).
pub(crate) fn trial_rng(seed: u64, number: u64, salt: u64) -> StdRng {
    StdRng::seed_from_u64(mix(mix(seed ^ salt) ^ number))
}

/// Fills in the value of every single-valued parameter (a range of one value), which samplers
/// do not search, and reports the others in name order.
pub(crate) fn split_single<'a>(
    space: &'a SearchSpace,
    params: &mut InternalParams,
) -> Vec<(&'a str, &'a super::space::OptunaDistribution)> {
    let mut searched = Vec::new();
    for (name, dist) in space.iter() {
        if dist.single() {
            let v = match dist {
                super::space::OptunaDistribution::Float(d) => d.low,
                super::space::OptunaDistribution::Int(d) => d.low as f64,
                super::space::OptunaDistribution::Categorical(_) => 0.0,
            };
            params.insert(name.to_owned(), v);
        } else {
            searched.push((name, dist));
        }
    }
    searched
}
