//! Independent uniform sampling, as Optuna's `RandomSampler` (through `_SearchSpaceTransform`):
//! uniform on `[low, high)` for floats, on `[ln low, ln high)` for log ranges; stepped and
//! integer ranges are widened by half a step on each side and rounded to the grid, so every
//! grid value (the ends included) is equally likely.

use rand::RngExt;
use rand::rngs::StdRng;

use super::{Proposal, SampleContext, Sampler, SamplerError, trial_rng};
use crate::space::{InternalParams, OptunaDistribution};

/// Stream salt of the random sampler (see [`trial_rng`]).
pub(crate) const RANDOM_SALT: u64 = 0x52414E44; // "RAND"

#[derive(Debug, Clone)]
pub struct RandomSampler {
    seed: u64,
}

impl RandomSampler {
    pub fn new(seed: u64) -> Self {
        Self { seed }
    }
}

impl Sampler for RandomSampler {
    fn name(&self) -> String {
        "random".into()
    }

    fn sample(&self, ctx: &SampleContext<'_>) -> Result<Proposal, SamplerError> {
        let mut rng = trial_rng(self.seed, ctx.trial_number, RANDOM_SALT);
        let mut params = InternalParams::new();
        for (name, dist) in ctx.space.iter() {
            params.insert(name.to_owned(), sample_uniform(dist, &mut rng));
        }
        Ok(Proposal {
            params,
            ..Proposal::default()
        })
    }
}

/// One uniform draw from `dist`, in internal representation.
pub(crate) fn sample_uniform(dist: &OptunaDistribution, rng: &mut StdRng) -> f64 {
    let u: f64 = rng.random();
    match dist {
        OptunaDistribution::Float(d) if d.single() => d.low,
        OptunaDistribution::Float(d) => match (d.log, d.step) {
            (true, _) => {
                let (a, b) = (d.low.ln(), d.high.ln());
                (a + u * (b - a)).exp().clamp(d.low, d.high.next_down())
            }
            (false, Some(step)) => {
                let (a, b) = (d.low - step / 2.0, d.high + step / 2.0);
                let x = a + u * (b - a);
                (((x - d.low) / step).round_ties_even() * step + d.low).clamp(d.low, d.high)
            }
            // The high end is excluded, as numpy's uniform and Optuna's nextafter clip do.
            (false, None) => (d.low + u * (d.high - d.low)).min(d.high.next_down()),
        },
        OptunaDistribution::Int(d) => {
            let (low, high, step) = (d.low as f64, d.high as f64, d.step as f64);
            if d.log {
                let (a, b) = ((low - 0.5).ln(), (high + 0.5).ln());
                (a + u * (b - a)).exp().round_ties_even().clamp(low, high)
            } else {
                let x = (low - step / 2.0) + u * (high - low + step);
                (((x - low) / step + 0.5).floor() * step + low).clamp(low, high)
            }
        }
        OptunaDistribution::Categorical(c) => {
            ((u * c.choices.len() as f64) as usize).min(c.choices.len() - 1) as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::space::{CategoricalChoice, SearchSpace};
    use crate::trial::Direction;

    fn space() -> SearchSpace {
        let mut s = SearchSpace::new();
        s.add_float("a", -1.0, 1.0, false, None).unwrap();
        s.add_float("b", 1e-4, 1.0, true, None).unwrap();
        s.add_float("c", 0.0, 1.0, false, Some(0.5)).unwrap();
        s.add_int("d", 1, 3, false, 1).unwrap();
        s.add_int("e", 1, 1000, true, 1).unwrap();
        s.add_categorical(
            "f",
            vec![
                CategoricalChoice::Bool(false),
                CategoricalChoice::Bool(true),
            ],
        )
        .unwrap();
        s.add_int("g", 5, 5, false, 1).unwrap();
        s
    }

    #[test]
    fn uniform_over_each_grid_and_in_range() {
        let s = space();
        let sampler = RandomSampler::new(7);
        let mut counts_c = [0usize; 3];
        let mut counts_d = [0usize; 3];
        let mut small_b = 0;
        let n = 6000;
        for t in 0..n {
            let ctx = SampleContext::new(&s, &[], Direction::Minimize, t);
            let p = sampler.sample(&ctx).unwrap().params;
            for (name, dist) in s.iter() {
                assert!(dist.contains(p[name]), "{name} = {}", p[name]);
            }
            counts_c[(p["c"] * 2.0) as usize] += 1;
            counts_d[p["d"] as usize - 1] += 1;
            small_b += usize::from(p["b"] < 1e-2);
            assert_eq!(p["g"], 5.0);
        }
        // Each of 3 grid values ≈ n/3 (± 5 σ); half the log range lies below 1e-2.
        for c in counts_c.iter().chain(&counts_d) {
            assert!(
                (*c as f64 - n as f64 / 3.0).abs() < 5.0 * (n as f64 * 2.0 / 9.0).sqrt(),
                "{counts_c:?} {counts_d:?}"
            );
        }
        assert!((small_b as f64 / n as f64 - 0.5).abs() < 0.04, "{small_b}");
    }

    #[test]
    fn same_seed_and_number_same_params() {
        let s = space();
        let ctx = |t| SampleContext::new(&s, &[], Direction::Minimize, t);
        let a = RandomSampler::new(1).sample(&ctx(3)).unwrap();
        assert_eq!(a, RandomSampler::new(1).sample(&ctx(3)).unwrap());
        assert_ne!(a, RandomSampler::new(2).sample(&ctx(3)).unwrap());
        assert_ne!(a, RandomSampler::new(1).sample(&ctx(4)).unwrap());
    }
}
