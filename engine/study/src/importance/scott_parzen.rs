//! PED-ANOVA's one-dimensional Parzen estimators on a grid, after Optuna 5.0's
//! `optuna/importance/_ped_anova/scott_parzen_estimator.py`.
//!
//! A parameter's values are first counted on a grid: the choices of a categorical, or at most
//! [`super::N_STEPS`] evenly spaced points over `[low, high]` of a number (in log space for log
//! ranges; fewer for a stepped or log-int range with fewer values). The estimator is then a
//! mixture over the occupied grid points, each weighted by its count, plus one prior kernel of
//! weight `prior_weight`:
//!
//! - numbers: discrete truncated normals on the grid indices `0..n`, every kernel with the
//!   bandwidth of Scott's rule (Scott 1992, *Multivariate Density Estimation*),
//!   `1.059 · min(IQR / 1.34, σ̂) · N^(−1/5)` but at least `0.5 / 1.64` cells, and a prior
//!   kernel centred on the grid as wide as the grid plus one cell;
//! - categoricals: per observed choice, a kernel that puts `1 + w/K` on it and `w/K` on every
//!   choice (then normalised), `K` the number of kernels, and a uniform prior kernel.
//!
//! The densities are evaluated on the grid points in log space, as Optuna does, so the
//! results agree with Optuna's to rounding.

use tradetune_storage::model::OptunaDistribution;

use crate::sampler::truncnorm::log_gauss_mass;

/// Scott's-rule bandwidths never go below this many grid cells (1.64σ ≈ 90 % of a kernel's
/// mass stays within half a cell of its centre).
const SIGMA_MIN: f64 = 0.5 / 1.64;

/// How many trials fall on each grid point of `dist`, for trials whose parameter has the
/// internal values `internal` (Optuna's `_count_numerical_param_in_grid` and
/// `_count_categorical_param_in_grid`). `n_steps` bounds the grid of a number. The error is a
/// sentence about the offending value.
pub(super) fn count_on_grid(
    dist: &OptunaDistribution,
    internal: &[f64],
    n_steps: usize,
) -> Result<Vec<u64>, String> {
    match dist {
        OptunaDistribution::Categorical(d) => {
            let mut counts = vec![0u64; d.choices.len()];
            for &v in internal {
                let choice = d
                    .choices
                    .get(v as usize)
                    .filter(|_| d.contains(v))
                    .ok_or_else(|| format!("{v} is not a choice index of {dist}"))?;
                // Optuna maps the external value back to the first equal choice.
                let i = d
                    .choices
                    .iter()
                    .position(|c| c == choice)
                    .unwrap_or(v as usize);
                counts[i] += 1;
            }
            Ok(counts)
        }
        OptunaDistribution::Float(d) => {
            let n = match d.step {
                Some(step) if !d.log => stepped_cells(d.high - d.low, step, n_steps),
                _ => n_steps,
            };
            count_numbers(internal, d.low, d.high, d.log, n, dist)
        }
        OptunaDistribution::Int(d) => {
            let n = if d.log {
                // ⌈log₂(high − low + 1)⌉ + 1 cells at most.
                // In floating point: a range near the ends of i64 must not overflow.
                let size = d.high as f64 - d.low as f64 + 1.0;
                let cells = (size.ln() / 2f64.ln()).ceil() as usize + 1;
                cells.min(n_steps)
            } else {
                stepped_cells(d.high as f64 - d.low as f64, d.step as f64, n_steps)
            };
            count_numbers(internal, d.low as f64, d.high as f64, d.log, n, dist)
        }
    }
}

/// `min(round(range / step) + 1, n_steps)`, with Python's `round` (half to even).
fn stepped_cells(range: f64, step: f64, n_steps: usize) -> usize {
    let values = (range / step).round_ties_even();
    if values.is_finite() && values >= 0.0 {
        (values as usize).saturating_add(1).min(n_steps)
    } else {
        n_steps
    }
}

/// Counts numbers on `n` evenly spaced points over `[low, high]` (log space when `log`):
/// each value goes to the nearest point, a value midway to the lower one, and values outside
/// the range to the end points.
fn count_numbers(
    values: &[f64],
    low: f64,
    high: f64,
    log: bool,
    n: usize,
    dist: &OptunaDistribution,
) -> Result<Vec<u64>, String> {
    let n = n.max(1);
    let mut counts = vec![0u64; n];
    let (low, high) = if log {
        (low.ln(), high.ln())
    } else {
        (low, high)
    };
    let step_size = (high - low) / (n - 1) as f64;
    for &v in values {
        if v.is_nan() || (log && v <= 0.0) {
            return Err(format!("{v} is not a value of {dist}"));
        }
        let x = if log { v.ln() } else { v };
        let cell = if n == 1 {
            0
        } else {
            let i = ((x - low) / step_size - 0.5).ceil();
            if i <= 0.0 {
                0
            } else if i >= (n - 1) as f64 {
                n - 1
            } else {
                i as usize
            }
        };
        counts[cell] += 1;
    }
    Ok(counts)
}

/// The estimator's probability of each grid point, built from the counts of `count_on_grid`
/// (Optuna's `build_parzen_estimator_on_grid` followed by `pdf(np.arange(n))`).
pub(super) fn grid_pdf(counts: &[u64], categorical: bool, prior_weight: f64) -> Vec<f64> {
    let observed: Vec<(usize, u64)> = counts
        .iter()
        .enumerate()
        .filter(|(_, c)| **c > 0)
        .map(|(i, c)| (i, *c))
        .collect();
    // Mixture weights: each occupied point by its count, then the prior; normalised.
    let mut weights: Vec<f64> = observed.iter().map(|(_, c)| *c as f64).collect();
    if observed.is_empty() {
        weights = vec![1.0];
    } else {
        weights.push(prior_weight);
    }
    let total: f64 = weights.iter().sum();
    let log_weights: Vec<f64> = weights.iter().map(|w| (w / total).ln()).collect();
    let n = counts.len();
    // log_pdf[x][k]: kernel k's log probability of grid point x, plus its log weight.
    let kernel_logs: Vec<Vec<f64>> = if categorical {
        categorical_kernels(&observed, n, prior_weight)
    } else {
        numerical_kernels(&observed, n)
    };
    (0..n)
        .map(|x| {
            let terms: Vec<f64> = kernel_logs
                .iter()
                .zip(&log_weights)
                .map(|(kernel, lw)| kernel[x] + lw)
                .collect();
            log_sum_exp(&terms).exp()
        })
        .collect()
}

/// `ln Σ e^t`, shifted by the largest term (a sum of zeros stays −∞).
fn log_sum_exp(terms: &[f64]) -> f64 {
    let max = terms.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let shift = if max == f64::NEG_INFINITY { 0.0 } else { max };
    terms.iter().map(|t| (t - shift).exp()).sum::<f64>().ln() + shift
}

/// Per kernel, the log probability of each of the `n` choices: one kernel per observed choice
/// and the uniform prior last.
fn categorical_kernels(observed: &[(usize, u64)], n: usize, prior_weight: f64) -> Vec<Vec<f64>> {
    if observed.is_empty() {
        return vec![vec![(1.0 / n as f64).ln(); n]];
    }
    let n_kernels = observed.len() + 1;
    let base = prior_weight / n_kernels as f64;
    let mut rows = vec![vec![base; n]; n_kernels];
    for (row, (choice, _)) in rows.iter_mut().zip(observed) {
        row[*choice] += 1.0;
    }
    rows.into_iter()
        .map(|row| {
            let sum: f64 = row.iter().sum();
            let sum = if sum == 0.0 { 1.0 } else { sum };
            row.into_iter().map(|p| (p / sum).ln()).collect()
        })
        .collect()
}

/// Per kernel, the log probability of each grid index `0..n` under a normal truncated to
/// `[−½, n − ½]` and discretised to unit cells: the occupied indices with Scott's bandwidth,
/// then the wide prior.
fn numerical_kernels(observed: &[(usize, u64)], n: usize) -> Vec<Vec<f64>> {
    let (low, high) = (0.0, (n - 1) as f64);
    let mut kernels: Vec<(f64, f64)> = Vec::with_capacity(observed.len() + 1);
    if !observed.is_empty() {
        let sigma = scott_bandwidth(observed).max(SIGMA_MIN);
        kernels.extend(observed.iter().map(|(i, _)| (*i as f64, sigma)));
    }
    kernels.push(((low + high) / 2.0, high - low + 1.0));
    kernels
        .iter()
        .map(|&(mu, sigma)| {
            let log_norm = log_gauss_mass((low - 0.5 - mu) / sigma, (high + 0.5 - mu) / sigma);
            (0..n)
                .map(|x| {
                    let x = x as f64;
                    log_gauss_mass((x - 0.5 - mu) / sigma, (x + 0.5 - mu) / sigma) - log_norm
                })
                .collect()
        })
        .collect()
}

/// Scott's rule over the occupied grid indices weighted by their counts:
/// `1.059 · min(IQR / 1.34, σ̂) · N^(−1/5)`, with the weighted standard deviation σ̂ (divided
/// by `N − 1`) and the quartiles read off the cumulative counts as Optuna does.
fn scott_bandwidth(observed: &[(usize, u64)]) -> f64 {
    let total: u64 = observed.iter().map(|(_, c)| c).sum();
    let n = total as f64;
    let mean = observed
        .iter()
        .map(|(i, c)| (i * *c as usize) as f64)
        .sum::<f64>()
        / n;
    let spread: f64 = observed
        .iter()
        .map(|(i, c)| {
            let d = *i as f64 - mean;
            d * d * *c as f64
        })
        .sum();
    let sigma = (spread / total.saturating_sub(1).max(1) as f64).sqrt();
    let cumulative: Vec<u64> = observed
        .iter()
        .scan(0u64, |acc, (_, c)| {
            *acc += c;
            Some(*acc)
        })
        .collect();
    // numpy's searchsorted: side="left" for the first quartile, side="right" for the third.
    let q1 = cumulative.partition_point(|&c| c < total / 4);
    let q3 = cumulative.partition_point(|&c| c <= total * 3 / 4);
    let last = observed.len() - 1;
    let iqr = (observed[q3.min(last)].0 as f64) - (observed[q1.min(last)].0 as f64);
    1.059 * (iqr / 1.34).min(sigma) * n.powf(-0.2)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tradetune_storage::model::CategoricalChoice;

    fn float(low: f64, high: f64, log: bool, step: Option<f64>) -> OptunaDistribution {
        OptunaDistribution::float(low, high, log, step).unwrap()
    }

    #[test]
    fn numbers_go_to_the_nearest_grid_point_midpoints_down() {
        // [0, 98] on 50 points: a cell is 2 wide; 1 is midway between 0 and 2.
        let d = OptunaDistribution::int(0, 98, false, 1).unwrap();
        let c = count_on_grid(&d, &[0.0, 1.0, 2.0, 3.0, 98.0, 150.0], 50).unwrap();
        assert_eq!(c.len(), 50);
        assert_eq!((c[0], c[1], c[2], c[49]), (2, 2, 0, 2));
        // A stepped range has as many points as values, when fewer than 50.
        let d = OptunaDistribution::int(0, 20, false, 5).unwrap();
        assert_eq!(
            count_on_grid(&d, &[0.0, 5.0, 20.0], 50).unwrap(),
            [1, 1, 0, 0, 1]
        );
        let d = float(0.0, 1.0, false, Some(0.25));
        assert_eq!(count_on_grid(&d, &[0.5], 50).unwrap().len(), 5);
        // A log int range of 1..=1000: ⌈log₂ 1000⌉ + 1 = 11 points, in log space.
        let d = OptunaDistribution::int(1, 1000, true, 1).unwrap();
        let c = count_on_grid(&d, &[1.0, 1000.0, 31.0], 50).unwrap();
        assert_eq!(c.len(), 11);
        assert_eq!((c[0], c[5], c[10]), (1, 1, 1));
        // The widest integer ranges neither overflow nor panic.
        let d = OptunaDistribution::int(i64::MIN + 1, i64::MAX - 1, false, 1).unwrap();
        assert_eq!(count_on_grid(&d, &[0.0], 50).unwrap().len(), 50);
        let d = OptunaDistribution::int(1, i64::MAX, true, 1).unwrap();
        assert_eq!(count_on_grid(&d, &[1.0], 50).unwrap().len(), 50);
        let d = float(1e-5, 1e-1, true, None);
        assert!(count_on_grid(&d, &[0.0], 50).is_err());
        assert!(count_on_grid(&d, &[f64::NAN], 50).is_err());
    }

    #[test]
    fn categorical_counts_follow_python_equality() {
        let d = OptunaDistribution::categorical(vec![
            CategoricalChoice::Int(1),
            CategoricalChoice::Str("a".into()),
            CategoricalChoice::Float(1.0),
        ])
        .unwrap();
        // Index 2 holds 1.0, which equals 1: Optuna counts it on choice 0.
        assert_eq!(count_on_grid(&d, &[2.0, 1.0, 1.0], 50).unwrap(), [1, 2, 0]);
        assert!(count_on_grid(&d, &[3.0], 50).is_err());
        assert!(count_on_grid(&d, &[0.5], 50).is_err());
    }

    #[test]
    fn grid_pdfs_are_distributions() {
        for (counts, categorical) in [
            (vec![0, 3, 0, 0, 1, 0, 0, 0, 7, 0], false),
            (vec![5, 0], false),
            (vec![0; 50], false),
            (vec![2, 0, 1, 0], true),
            (vec![0, 0, 0], true),
        ] {
            let pdf = grid_pdf(&counts, categorical, 1.0);
            let sum: f64 = pdf.iter().sum();
            assert!((sum - 1.0).abs() < 1e-12, "{counts:?}: {sum}");
            assert!(pdf.iter().all(|p| *p > 0.0));
        }
        // Mass follows the counts.
        let pdf = grid_pdf(&[0, 0, 9, 0, 0, 0, 0, 0, 0, 1], false, 1.0);
        assert!(pdf[2] > pdf[9] && pdf[9] > pdf[6]);
    }

    #[test]
    fn categorical_pdf_by_hand() {
        // Counts [2, 0, 1]: kernels on choices 0 and 2 plus the prior, weights 2:1:1.
        // Kernel rows before normalising: [1 + 1/3, 1/3, 1/3] → /2, and the uniform prior.
        let pdf = grid_pdf(&[2, 0, 1], true, 1.0);
        let (hi, lo) = ((4.0 / 3.0) / 2.0, (1.0 / 3.0) / 2.0);
        let want = [
            0.5 * hi + 0.25 * lo + 0.25 / 3.0,
            0.5 * lo + 0.25 * lo + 0.25 / 3.0,
            0.5 * lo + 0.25 * hi + 0.25 / 3.0,
        ];
        for (g, w) in pdf.iter().zip(want) {
            assert!((g - w).abs() < 1e-15, "{pdf:?} vs {want:?}");
        }
    }

    #[test]
    fn scott_bandwidth_by_hand() {
        // Indices 0, 1, 2, 3 once each: mean 1.5, σ̂ = √(5/3), quartiles at 0 and 3 → IQR 3.
        let obs = [(0, 1), (1, 1), (2, 1), (3, 1)];
        let want = 1.059 * (3.0f64 / 1.34).min((5.0f64 / 3.0).sqrt()) * 4f64.powf(-0.2);
        assert!((scott_bandwidth(&obs) - want).abs() < 1e-15);
        // One trial: no spread, the floor applies in the kernels.
        assert_eq!(scott_bandwidth(&[(4, 1)]), 0.0);
    }
}
