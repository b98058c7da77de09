//! The Parzen estimator of TPE: a weighted mixture of product kernels, one kernel per observed
//! trial plus a prior kernel, as in Optuna 5.0 (`optuna/samplers/_tpe/parzen_estimator.py` and
//! `probability_distributions.py`).
//!
//! Per numerical parameter (log-scaled ones in log space; stepped ones widened by half a step
//! on each side so every grid value owns an interval of equal width):
//! - kernel k is a normal N(μ_k, σ_k) truncated to the range, μ_k the observed value;
//! - σ_k is the larger distance from μ_k to its sorted neighbours (the range's ends count as
//!   neighbours, except that the outermost kernels look only inward when there are at least
//!   two observations: Optuna's `consider_endpoints = False`), clipped to
//!   `[min σ, range]`. Optuna's "magic clip" sets min σ = `range / min(100, n + 2)`; TradeTune's
//!   default is a fixed `0.03 · range` instead (see [`super::tpe::TpeConfig::min_bandwidth_factor`]);
//! - the prior kernel sits mid-range with σ = range.
//!
//! Categorical kernels put mass 1 on the observed choice plus `prior_weight / (n + 1)` on every
//! choice, normalised; the prior kernel is uniform. Component weights are Optuna's
//! `default_weights` (older trials ramp down once there are more than 25) plus 1 for the prior.
//! A stepped parameter's density is the kernel's mass on the value's interval.

use rand::RngExt;
use rand::rngs::StdRng;

use super::truncnorm::{LN_SQRT_2PI, log_gauss_mass, ppf};
use crate::space::OptunaDistribution;

/// Weight of the prior kernel (Optuna's `prior_weight`, 1.0 by default).
const PRIOR_WEIGHT: f64 = 1.0;

/// Optuna's `default_weights(n)`: 1 for each of the newest 25 trials; the older ones ramp
/// linearly from 1/n up to 1 (Bergstra et al. 2013, "Making a Science of Model Search").
pub(crate) fn default_weights(n: usize) -> Vec<f64> {
    if n < 25 {
        return vec![1.0; n];
    }
    let m = n - 25;
    let start = 1.0 / n as f64;
    let mut w: Vec<f64> = (0..m)
        .map(|i| {
            if m == 1 {
                start
            } else {
                start + (1.0 - start) * i as f64 / (m - 1) as f64
            }
        })
        .collect();
    w.extend(std::iter::repeat_n(1.0, 25));
    w
}

struct NumericalKernels {
    mus: Vec<f64>,
    sigmas: Vec<f64>,
    /// ln of each kernel's mass on `[lo, hi]`, the truncation's normaliser.
    log_norm: Vec<f64>,
    /// Truncation bounds in the transformed space (log, widened by half a step).
    lo: f64,
    hi: f64,
    log: bool,
    /// Grid step in the original space, with the original bounds for rounding onto the grid.
    step: Option<f64>,
    low: f64,
    high: f64,
    /// Stepped parameters only (empty otherwise): kernels on a grid repeat — 1,000 trials of a
    /// 32-value parameter give a few dozen distinct (μ, σ) — so the masses are computed once
    /// per distinct kernel. `kernel_class[k]` indexes `class_rep`, which holds one kernel of
    /// each class.
    kernel_class: Vec<usize>,
    class_rep: Vec<usize>,
}

enum Kernels {
    Numerical(NumericalKernels),
    Categorical {
        n_choices: usize,
        probs: Vec<f64>,
        log_probs: Vec<f64>,
    },
}

/// A mixture of `n_obs + 1` product kernels over the parameters of `dists`.
pub(crate) struct ParzenEstimator {
    weights: Vec<f64>,
    log_weights: Vec<f64>,
    dims: Vec<Kernels>,
}

impl ParzenEstimator {
    /// `observations[d]` holds the internal values of parameter `d` of the observed trials,
    /// ordered by trial number (which the weights depend on).
    /// `min_bandwidth_factor`: the smallest σ as a fraction of the range; `None` is Optuna's
    /// magic clip.
    pub(crate) fn new(
        dists: &[&OptunaDistribution],
        observations: &[Vec<f64>],
        min_bandwidth_factor: Option<f64>,
    ) -> Self {
        let n = observations.first().map_or(0, Vec::len);
        let mut weights = if n == 0 { vec![] } else { default_weights(n) };
        weights.push(PRIOR_WEIGHT);
        let sum: f64 = weights.iter().sum();
        weights.iter_mut().for_each(|w| *w /= sum);
        let log_weights = weights.iter().map(|w| w.ln()).collect();
        let dims = dists
            .iter()
            .zip(observations)
            .map(|(d, obs)| match d {
                OptunaDistribution::Categorical(c) => categorical(c.choices.len(), obs),
                OptunaDistribution::Float(f) => Kernels::Numerical(numerical(
                    obs,
                    (f.low, f.high),
                    f.step,
                    f.log,
                    min_bandwidth_factor,
                )),
                OptunaDistribution::Int(i) => Kernels::Numerical(numerical(
                    obs,
                    (i.low as f64, i.high as f64),
                    Some(i.step as f64),
                    i.log,
                    min_bandwidth_factor,
                )),
            })
            .collect();
        Self {
            weights,
            log_weights,
            dims,
        }
    }

    /// Draws `size` points; returns them per dimension, in internal representation.
    pub(crate) fn sample(&self, rng: &mut StdRng, size: usize) -> Vec<Vec<f64>> {
        let mut out = vec![Vec::with_capacity(size); self.dims.len()];
        for _ in 0..size {
            let k = pick(&self.weights, rng.random::<f64>());
            for (dim, col) in self.dims.iter().zip(out.iter_mut()) {
                let u = rng.random::<f64>();
                col.push(match dim {
                    Kernels::Categorical {
                        n_choices, probs, ..
                    } => pick(&probs[k * n_choices..(k + 1) * n_choices], u) as f64,
                    Kernels::Numerical(nk) => nk.sample(k, u),
                });
            }
        }
        out
    }

    /// ln of the mixture density at each point (`points[d][i]` is dimension d of point i).
    pub(crate) fn log_pdf(&self, points: &[Vec<f64>]) -> Vec<f64> {
        let m = points.first().map_or(0, Vec::len);
        let nk = self.weights.len();
        let mut acc: Vec<f64> = (0..m)
            .flat_map(|_| self.log_weights.iter().copied())
            .collect();
        for (dim, xs) in self.dims.iter().zip(points) {
            match dim {
                Kernels::Categorical {
                    n_choices,
                    log_probs,
                    ..
                } => {
                    for (i, &x) in xs.iter().enumerate() {
                        let c = x as usize;
                        for (k, a) in acc[i * nk..(i + 1) * nk].iter_mut().enumerate() {
                            *a += log_probs[k * n_choices + c];
                        }
                    }
                }
                Kernels::Numerical(nk_) if nk_.step.is_none() => nk_.add_continuous(xs, &mut acc),
                Kernels::Numerical(nk_) => nk_.add_discrete(xs, &mut acc),
            }
        }
        acc.chunks(nk.max(1))
            .map(|row| {
                let max = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                if max == f64::NEG_INFINITY {
                    return max;
                }
                max + row.iter().map(|a| (a - max).exp()).sum::<f64>().ln()
            })
            .collect()
    }
}

/// Index i with `cum[i-1] ≤ u·total < cum[i]` over the cumulative sums of `probs`.
fn pick(probs: &[f64], u: f64) -> usize {
    let mut acc = 0.0;
    for (i, p) in probs.iter().enumerate() {
        acc += p;
        if u < acc {
            return i;
        }
    }
    // u ≈ 1 against a sum that rounded below 1: the last category (Optuna sets cum[-1] = 1).
    probs.len() - 1
}

fn categorical(n_choices: usize, obs: &[f64]) -> Kernels {
    let n = obs.len();
    let mut probs = Vec::with_capacity((n + 1) * n_choices);
    if n == 0 {
        probs.extend(std::iter::repeat_n(1.0 / n_choices as f64, n_choices));
    } else {
        let base = PRIOR_WEIGHT / (n + 1) as f64;
        for row in 0..=n {
            let start = probs.len();
            probs.extend(std::iter::repeat_n(base, n_choices));
            if row < n {
                probs[start + obs[row] as usize] += 1.0;
            }
            let s: f64 = probs[start..].iter().sum();
            probs[start..].iter_mut().for_each(|p| *p /= s);
        }
    }
    let log_probs = probs.iter().map(|p| p.ln()).collect();
    Kernels::Categorical {
        n_choices,
        probs,
        log_probs,
    }
}

fn numerical(
    obs: &[f64],
    (low, high): (f64, f64),
    step: Option<f64>,
    log: bool,
    min_bandwidth_factor: Option<f64>,
) -> NumericalKernels {
    let (mut lo, mut hi) = (low, high);
    if let Some(s) = step {
        lo -= s / 2.0;
        hi += s / 2.0;
    }
    if log {
        lo = lo.ln();
        hi = hi.ln();
    }
    let mut mus: Vec<f64> = obs.iter().map(|&x| if log { x.ln() } else { x }).collect();
    let mut sigmas = bandwidths(&mus, lo, hi, min_bandwidth_factor);
    mus.push(0.5 * (lo + hi));
    sigmas.push(hi - lo);
    let (kernel_class, class_rep) = if step.is_some() {
        distinct_kernels(&mus, &sigmas)
    } else {
        (Vec::new(), Vec::new())
    };
    let log_norm_of = |k: usize| {
        let (mu, s) = (mus[k], sigmas[k]);
        trunc_log_mass((lo - mu) / s, (hi - mu) / s)
    };
    let log_norm = if class_rep.is_empty() {
        (0..mus.len()).map(log_norm_of).collect()
    } else {
        let per_class: Vec<f64> = class_rep.iter().map(|&k| log_norm_of(k)).collect();
        kernel_class.iter().map(|&c| per_class[c]).collect()
    };
    NumericalKernels {
        mus,
        sigmas,
        log_norm,
        lo,
        hi,
        log,
        step,
        low,
        high,
        kernel_class,
        class_rep,
    }
}

/// Groups the kernels with bit-identical (μ, σ): returns each kernel's class and one kernel
/// per class. Every quantity computed from a kernel depends on (μ, σ) alone, so computing it
/// once per class gives bit-identical results.
fn distinct_kernels(mus: &[f64], sigmas: &[f64]) -> (Vec<usize>, Vec<usize>) {
    let key = |k: usize| (mus[k].to_bits(), sigmas[k].to_bits());
    let mut order: Vec<usize> = (0..mus.len()).collect();
    order.sort_unstable_by_key(|&k| key(k));
    let mut class = vec![0; mus.len()];
    let mut reps: Vec<usize> = Vec::new();
    for &k in &order {
        if reps.last().is_none_or(|&r| key(r) != key(k)) {
            reps.push(k);
        }
        class[k] = reps.len() - 1;
    }
    (class, reps)
}

/// σ of each observation's kernel (see the module documentation).
fn bandwidths(mus: &[f64], lo: f64, hi: f64, min_bandwidth_factor: Option<f64>) -> Vec<f64> {
    let n = mus.len();
    if n == 0 {
        return vec![];
    }
    // Sorted by value, ties by index: the order a stable sort gives, which the σ of repeated
    // values depends on; sorting (value, index) pairs unstably is the same order, faster.
    let mut pairs: Vec<(f64, usize)> = mus.iter().copied().zip(0..n).collect();
    pairs.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let order: Vec<usize> = pairs.iter().map(|&(_, i)| i).collect();
    let mut ext = Vec::with_capacity(n + 2);
    ext.push(lo);
    ext.extend(pairs.iter().map(|&(mu, _)| mu));
    ext.push(hi);
    let mut sorted_sigmas: Vec<f64> = (0..n)
        .map(|i| (ext[i + 1] - ext[i]).max(ext[i + 2] - ext[i + 1]))
        .collect();
    if n >= 2 {
        sorted_sigmas[0] = ext[2] - ext[1];
        sorted_sigmas[n - 1] = ext[n] - ext[n - 1];
    }
    let max_sigma = hi - lo;
    let min_sigma = match min_bandwidth_factor {
        Some(f) => f * (hi - lo),
        // Optuna's magic clip: n kernels plus the prior, plus one.
        None => (hi - lo) / (100f64).min(n as f64 + 2.0),
    };
    let mut sigmas = vec![0.0; n];
    for (rank, &i) in order.iter().enumerate() {
        sigmas[i] = sorted_sigmas[rank].clamp(min_sigma, max_sigma);
    }
    sigmas
}

/// `log_gauss_mass(a, b)`, short-cut to 0 when both ends are beyond 8.5 σ: the mass then
/// differs from 1 by less than 2e-17, below the resolution of the log densities it is added to.
fn trunc_log_mass(a: f64, b: f64) -> f64 {
    if a < -8.5 && b > 8.5 {
        0.0
    } else {
        log_gauss_mass(a, b)
    }
}

impl NumericalKernels {
    fn sample(&self, k: usize, u: f64) -> f64 {
        let (mu, s) = (self.mus[k], self.sigmas[k]);
        let mut x = ppf(u, (self.lo - mu) / s, (self.hi - mu) / s) * s + mu;
        if self.log {
            x = x.exp();
        }
        match self.step {
            Some(step) => (self.low + ((x - self.low) / step).round_ties_even() * step)
                .clamp(self.low, self.high),
            None => x.clamp(self.low, self.high),
        }
    }

    fn add_continuous(&self, xs: &[f64], acc: &mut [f64]) {
        let nk = self.mus.len();
        let consts: Vec<f64> = self
            .sigmas
            .iter()
            .zip(&self.log_norm)
            .map(|(s, ln)| -ln - s.ln() - LN_SQRT_2PI)
            .collect();
        for (i, &x) in xs.iter().enumerate() {
            let xt = if self.log { x.ln() } else { x };
            let row = &mut acc[i * nk..(i + 1) * nk];
            if !(self.lo <= xt && xt <= self.hi) {
                row.iter_mut().for_each(|a| *a = f64::NEG_INFINITY);
                continue;
            }
            for (k, a) in row.iter_mut().enumerate() {
                let z = (xt - self.mus[k]) / self.sigmas[k];
                *a += consts[k] - 0.5 * z * z;
            }
        }
    }

    /// Stepped parameters: the kernel's mass on `[x − step/2, x + step/2]` over its mass on the
    /// range. Candidates and kernels repeat often on a grid, so each distinct (value, kernel)
    /// pair is computed once.
    fn add_discrete(&self, xs: &[f64], acc: &mut [f64]) {
        let nk = self.mus.len();
        let half = self.step.unwrap_or(0.0) / 2.0;
        let mut uniq: Vec<f64> = xs.to_vec();
        uniq.sort_by(f64::total_cmp);
        uniq.dedup();
        // One row per distinct candidate value, one column per class of identical kernels.
        let nc = self.class_rep.len();
        let mut table = Vec::with_capacity(uniq.len() * nc);
        for &u in &uniq {
            let (l, r) = if self.log {
                ((u - half).ln(), (u + half).ln())
            } else {
                (u - half, u + half)
            };
            table.extend(self.class_rep.iter().map(|&k| {
                let (mu, s) = (self.mus[k], self.sigmas[k]);
                log_gauss_mass((l - mu) / s, (r - mu) / s) - self.log_norm[k]
            }));
        }
        for (i, x) in xs.iter().enumerate() {
            let j = uniq.partition_point(|u| u.total_cmp(x).is_lt());
            let masses = &table[j * nc..(j + 1) * nc];
            for (a, &c) in acc[i * nk..(i + 1) * nk].iter_mut().zip(&self.kernel_class) {
                *a += masses[c];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::space::{
        CategoricalChoice, CategoricalDistribution, FloatDistribution, IntDistribution,
    };
    use rand::SeedableRng;

    #[test]
    fn weights_follow_optuna() {
        assert_eq!(default_weights(0), Vec::<f64>::new());
        assert_eq!(default_weights(3), vec![1.0; 3]);
        let w = default_weights(27);
        assert_eq!(w.len(), 27);
        assert!((w[0] - 1.0 / 27.0).abs() < 1e-15 && w[1] == 1.0 && w[26] == 1.0);
        let w = default_weights(35);
        assert!((w[0] - 1.0 / 35.0).abs() < 1e-15 && (w[9] - 1.0).abs() < 1e-15);
        assert!(w.windows(2).all(|p| p[0] <= p[1]));
    }

    #[test]
    fn bandwidths_follow_optuna() {
        // Range [0, 10], observations 2, 3, 7: gaps 2|1|4|3.
        // Inner kernel (3): max(1, 4) = 4; ends look inward only: 2 → 1, 7 → 4.
        // Clip: min σ = 10 / min(100, 5) = 2, max σ = 10.
        assert_eq!(
            bandwidths(&[7.0, 2.0, 3.0], 0.0, 10.0, None),
            vec![4.0, 2.0, 4.0]
        );
        // One observation looks at both ends.
        assert_eq!(bandwidths(&[2.0], 0.0, 10.0, None), vec![8.0]);
        // A fixed floor of 3 % of the range (0.3) instead of the magic clip (2): kernel 2 keeps
        // its inward gap of 1; a floor of 30 % lifts three close kernels to 3.
        assert_eq!(
            bandwidths(&[7.0, 2.0, 3.0], 0.0, 10.0, Some(0.03)),
            vec![4.0, 1.0, 4.0]
        );
        assert_eq!(
            bandwidths(&[5.0, 5.1, 5.2], 0.0, 10.0, Some(0.3)),
            vec![3.0, 3.0, 3.0]
        );
    }

    #[test]
    fn densities_are_normalised() {
        let f = OptunaDistribution::Float(FloatDistribution::new(-1.0, 3.0, false, None).unwrap());
        let pe = ParzenEstimator::new(&[&f], &[vec![0.1, 0.5, 2.9]], Some(0.03));
        let m = 40_000;
        let xs: Vec<f64> = (0..m)
            .map(|i| -1.0 + 4.0 * (i as f64 + 0.5) / m as f64)
            .collect();
        let integral: f64 = pe
            .log_pdf(&[xs])
            .iter()
            .map(|l| l.exp() * 4.0 / m as f64)
            .sum();
        assert!((integral - 1.0).abs() < 1e-6, "{integral}");

        let i = OptunaDistribution::Int(IntDistribution::new(1, 64, true, 1).unwrap());
        let c = OptunaDistribution::Categorical(
            CategoricalDistribution::new(vec![
                CategoricalChoice::Int(0),
                CategoricalChoice::Int(1),
                CategoricalChoice::Int(2),
            ])
            .unwrap(),
        );
        let pe = ParzenEstimator::new(&[&i, &c], &[vec![4.0, 32.0], vec![2.0, 0.0]], None);
        let mut total = 0.0;
        for v in 1..=64 {
            for k in 0..3 {
                total += pe.log_pdf(&[vec![v as f64], vec![k as f64]])[0].exp();
            }
        }
        assert!((total - 1.0).abs() < 1e-9, "{total}");
    }

    #[test]
    fn samples_stay_in_range_and_on_grid() {
        let f =
            OptunaDistribution::Float(FloatDistribution::new(0.0, 1.0, false, Some(0.25)).unwrap());
        let i = OptunaDistribution::Int(IntDistribution::new(2, 1000, true, 1).unwrap());
        let pe = ParzenEstimator::new(&[&f, &i], &[vec![1.0, 0.0], vec![1000.0, 2.0]], Some(0.03));
        let mut rng = StdRng::seed_from_u64(3);
        let s = pe.sample(&mut rng, 500);
        assert!(s[0].iter().all(|&x| f.contains(x)), "{:?}", s[0]);
        assert!(s[1].iter().all(|&x| i.contains(x)));
        assert!(
            s[0].contains(&0.0) && s[0].contains(&1.0),
            "the end points are reachable"
        );
    }
}
