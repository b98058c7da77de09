//! The probability of backtest overfitting (PBO) by combinatorially symmetric cross-validation
//! (CSCV).
//!
//! Source: D. H. Bailey, J. M. Borwein, M. López de Prado and Q. J. Zhu, "The Probability of
//! Backtest Overfitting", *Journal of Computational Finance* 20(4), 2017 (SSRN 2326253, 2015):
//! the CSCV procedure and the statistics the paper derives from it (PBO, performance
//! degradation, probability of loss).
//!
//! Given a T×N matrix M of per-period returns, one column per strategy (trial) the search
//! tried, step by step:
//!
//! 1. M's rows are cut, in time order, into S disjoint blocks M_s of equal length T/S (S even).
//!    When S does not divide T the *first* (oldest) T mod S rows are left out, so the blocks
//!    stay equal as the paper requires (`pypbo` does the same).
//! 2. Each of the C(S, S/2) combinations c of S/2 blocks is a training (in-sample) set J, its
//!    complement the testing (out-of-sample) set J̄.
//! 3. The performance of every strategy on J is R_n and on J̄ R̄_n. **Performance here is the
//!    per-period Sharpe ratio**: mean / sample standard deviation (n − 1) of the returns in the
//!    set, risk-free rate 0, not annualised (annualising scales every strategy alike and changes
//!    no rank; the degradation pairs are per period). A strategy whose returns in a set are all
//!    exactly 0 (it did not trade) has Sharpe ratio 0; one whose returns in a set are otherwise
//!    constant has none, and is a [`PboError::NoVariance`].
//! 4. n* is the strategy with the highest R_n (the in-sample selection; on equal R_n the first
//!    column).
//! 5. r̄ is n*'s rank among the R̄ (1 = worst, N = best; strategies with R̄ equal to n*'s share
//!    the average of their ranks, as `scipy.stats.rankdata`), ω̄_c = r̄ / (N + 1) its relative
//!    rank, and λ_c = ln(ω̄_c / (1 − ω̄_c)) the logit. λ_c = 0 exactly when n* is at the
//!    out-of-sample median (r̄ = (N + 1)/2), λ_c > 0 above it.
//! 6. PBO φ = #{c : λ_c ≤ 0} / C(S, S/2): the share of combinations where the in-sample best
//!    does no better than the out-of-sample median. At the median counts as overfit (λ ≤ 0, the
//!    paper's ∫_{−∞}^0 f(λ) dλ).
//!
//! Also, as in the paper: the performance degradation — the pairs (R_{n*},
//! R̄_{n*}) and the least-squares line R̄_{n*} = α + β·R_{n*} through them — and the probability
//! of loss, the share of combinations where R̄_{n*} < 0 (the selected strategy's out-of-sample
//! Sharpe ratio, so its mean return, is negative).
//!
//! Cost: each block's per-strategy sum and sum of squares is computed once (O(T·N)); a
//! combination adds S blocks' sums per strategy, O(S·N), so C(16, 8) = 12,870 combinations of
//! 50 strategies take about 10 million additions, whatever T.

use serde::{Deserialize, Serialize};
use tradetune_market::split::{binomial, binomial_text};

/// The partitions the paper suggests (S = 16: C(16, 8) = 12,870 combinations).
pub const DEFAULT_PARTITIONS: usize = 16;

/// The largest S accepted: C(24, 12) = 2,704,156 combinations (C(26, 13) would be 10 million).
pub const MAX_PARTITIONS: usize = 24;

/// Why PBO cannot be computed. Strategies are columns and periods rows, both numbered from 0.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PboError {
    /// Fewer than two strategies: there is no selection to overfit.
    #[error(
        "{strategies} strategy column(s): PBO ranks strategies against each other and needs at least 2"
    )]
    TooFewStrategies { strategies: usize },
    /// The strategies' return series differ in length.
    #[error(
        "strategy {strategy} has {periods} returns but strategy 0 has {expected}: every strategy needs one return per period"
    )]
    Ragged {
        strategy: usize,
        periods: usize,
        expected: usize,
    },
    /// S is odd or below 2.
    #[error(
        "{partitions} partitions: CSCV splits the periods into an even number S ≥ 2 of blocks, half in sample and half out (the paper suggests 16)"
    )]
    OddPartitions { partitions: usize },
    /// S is above [`MAX_PARTITIONS`].
    #[error(
        "{partitions} partitions give {} combinations; at most {max} partitions are accepted",
        binomial_text(*partitions, partitions / 2)
    )]
    TooManyCombinations { partitions: usize, max: usize },
    /// More partitions than periods.
    #[error(
        "{partitions} partitions of {periods} periods: each partition needs at least one period (S ≤ T)"
    )]
    MorePartitionsThanPeriods { partitions: usize, periods: usize },
    /// Each half would hold fewer than 2 periods: no standard deviation.
    #[error(
        "{periods} periods in {partitions} partitions leave {half} period(s) in each half; a Sharpe ratio needs at least 2 (use more periods or fewer partitions)"
    )]
    TooFewPeriods {
        periods: usize,
        partitions: usize,
        half: usize,
    },
    /// A return is NaN or infinite.
    #[error(
        "the return at period {period} of strategy {strategy} is {value}: every return must be a finite number"
    )]
    NonFinite {
        period: usize,
        strategy: usize,
        value: f64,
    },
    /// A strategy's returns over a combination's half are constant but not 0: its Sharpe ratio
    /// is infinite.
    #[error(
        "strategy {strategy} returns the same {value} in every period of the {half} half of combination {combination}: its Sharpe ratio is undefined (no variance); remove the column"
    )]
    NoVariance {
        strategy: usize,
        combination: usize,
        /// "in-sample" or "out-of-sample".
        half: &'static str,
        value: f64,
    },
}

/// The least-squares line through the (in-sample, out-of-sample) Sharpe ratio pairs of the
/// selected strategies: `oos = intercept + slope · is` (the paper's performance degradation).
/// None where the in-sample values do not vary (no line).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Degradation {
    /// β: how out-of-sample Sharpe moves with in-sample Sharpe (≤ 0: selection did not help).
    pub slope: Option<f64>,
    /// α.
    pub intercept: Option<f64>,
    /// R² of the line (None also when the out-of-sample values do not vary).
    pub r_squared: Option<f64>,
    /// Mean in-sample per-period Sharpe ratio of the selected strategies.
    pub mean_in_sample: f64,
    /// Mean out-of-sample per-period Sharpe ratio of the selected strategies.
    pub mean_out_of_sample: f64,
}

/// One bin of a histogram of logits: `lower < λ ≤ upper`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct HistogramBin {
    pub lower: f64,
    pub upper: f64,
    pub count: usize,
}

/// The result of CSCV on a returns matrix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pbo {
    /// φ: the share of combinations whose in-sample best has logit λ ≤ 0.
    pub pbo: f64,
    /// S.
    pub partitions: usize,
    /// Periods in each partition (T / S, rounded down).
    pub partition_len: usize,
    /// N.
    pub strategies: usize,
    /// Periods used: S · `partition_len`.
    pub periods_used: usize,
    /// The oldest periods left out so that S divides the rest (T mod S).
    pub periods_dropped: usize,
    /// C(S, S/2).
    pub combinations: usize,
    /// λ_c of every combination, in the lexicographic order of the in-sample blocks chosen
    /// ({0, 1, …, S/2 − 1} first).
    pub logits: Vec<f64>,
    /// n*, the in-sample best strategy of every combination.
    pub selected: Vec<usize>,
    /// R_{n*}: the selected strategy's in-sample per-period Sharpe ratio, per combination.
    pub in_sample_sharpe: Vec<f64>,
    /// R̄_{n*}: the selected strategy's out-of-sample per-period Sharpe ratio, per combination.
    pub out_of_sample_sharpe: Vec<f64>,
    /// The least-squares line through the pairs above.
    pub degradation: Degradation,
    /// The share of combinations where R̄_{n*} < 0.
    pub probability_of_loss: f64,
}

/// Sums of one set of periods for one strategy: their sum and sum of squares.
#[derive(Clone, Copy)]
struct Sums {
    sum: f64,
    squares: f64,
}

/// The per-period Sharpe ratio from `len` returns' sum and sum of squares: mean / sample
/// standard deviation. None for a constant nonzero series (no Sharpe ratio).
fn sharpe(s: Sums, len: usize) -> Option<f64> {
    if s.squares == 0.0 {
        // Every return is exactly 0: no return, no risk.
        return Some(0.0);
    }
    let n = len as f64;
    let mean = s.sum / n;
    let var = (s.squares - s.sum * mean) / (n - 1.0);
    // Below this the variance is the rounding of the two sums: the returns are constant.
    if var <= 1e-12 * s.squares / n {
        return None;
    }
    Some(mean / var.sqrt())
}

/// Whether CSCV accepts `partitions` (S): even, at least 2 and at most [`MAX_PARTITIONS`]; a
/// front end checks an S the user gave before it reads anything.
pub fn check_partitions(partitions: usize) -> Result<(), PboError> {
    if partitions < 2 || !partitions.is_multiple_of(2) {
        return Err(PboError::OddPartitions { partitions });
    }
    if partitions > MAX_PARTITIONS {
        return Err(PboError::TooManyCombinations {
            partitions,
            max: MAX_PARTITIONS,
        });
    }
    Ok(())
}

/// PBO by CSCV of `returns`, one per-period return series per strategy (all of one length T),
/// with `partitions` (S) blocks. See the module documentation for the definitions.
pub fn cscv<S: AsRef<[f64]>>(returns: &[S], partitions: usize) -> Result<Pbo, PboError> {
    let n = returns.len();
    if n < 2 {
        return Err(PboError::TooFewStrategies { strategies: n });
    }
    let t = returns[0].as_ref().len();
    for (strategy, r) in returns.iter().enumerate() {
        let periods = r.as_ref().len();
        if periods != t {
            return Err(PboError::Ragged {
                strategy,
                periods,
                expected: t,
            });
        }
    }
    check_partitions(partitions)?;
    let s_count = partitions;
    if s_count > t {
        return Err(PboError::MorePartitionsThanPeriods {
            partitions,
            periods: t,
        });
    }
    let len = t / s_count;
    let half = len * s_count / 2;
    if half < 2 {
        return Err(PboError::TooFewPeriods {
            periods: t,
            partitions,
            half,
        });
    }
    for (strategy, r) in returns.iter().enumerate() {
        if let Some((period, &value)) = r.as_ref().iter().enumerate().find(|(_, v)| !v.is_finite())
        {
            return Err(PboError::NonFinite {
                period,
                strategy,
                value,
            });
        }
    }
    let dropped = t - len * s_count;

    // Block sums: blocks[s * n + j] for block s, strategy j.
    let mut blocks = vec![
        Sums {
            sum: 0.0,
            squares: 0.0
        };
        s_count * n
    ];
    for (j, r) in returns.iter().enumerate() {
        let r = &r.as_ref()[dropped..];
        for (s, chunk) in r.chunks_exact(len).enumerate() {
            let b = &mut blocks[s * n + j];
            for &v in chunk {
                b.sum += v;
                b.squares += v * v;
            }
        }
    }

    // At most C(24, 12) (checked above).
    let combinations = binomial(s_count, s_count / 2).map_or(0, |c| c as usize);
    let mut logits = Vec::with_capacity(combinations);
    let mut selected = Vec::with_capacity(combinations);
    let mut in_sample_sharpe = Vec::with_capacity(combinations);
    let mut out_of_sample_sharpe = Vec::with_capacity(combinations);
    let mut is_sr = vec![0.0; n];
    let mut oos_sr = vec![0.0; n];
    let mut in_sample = vec![false; s_count];
    // The current combination: indices of the in-sample blocks, increasing.
    let k = s_count / 2;
    let mut chosen: Vec<usize> = (0..k).collect();
    for c in 0..combinations {
        in_sample.iter_mut().for_each(|b| *b = false);
        for &s in &chosen {
            in_sample[s] = true;
        }
        for j in 0..n {
            let zero = Sums {
                sum: 0.0,
                squares: 0.0,
            };
            let (mut is, mut oos) = (zero, zero);
            for (s, &inside) in in_sample.iter().enumerate() {
                let b = blocks[s * n + j];
                let acc = if inside { &mut is } else { &mut oos };
                acc.sum += b.sum;
                acc.squares += b.squares;
            }
            let no_variance = |which: &'static str, sums: Sums| PboError::NoVariance {
                strategy: j,
                combination: c,
                half: which,
                value: sums.sum / half as f64,
            };
            is_sr[j] = sharpe(is, half).ok_or_else(|| no_variance("in-sample", is))?;
            oos_sr[j] = sharpe(oos, half).ok_or_else(|| no_variance("out-of-sample", oos))?;
        }
        // n*: the first strategy with the highest in-sample Sharpe ratio.
        let mut best = 0;
        for j in 1..n {
            if is_sr[j] > is_sr[best] {
                best = j;
            }
        }
        // Its out-of-sample rank, 1 = worst, ties sharing their average rank.
        let target = oos_sr[best];
        let below = oos_sr.iter().filter(|&&v| v < target).count();
        let equal = oos_sr.iter().filter(|&&v| v == target).count();
        // The tied strategies (n* among them) hold ranks below+1 … below+equal.
        let rank = below as f64 + (equal as f64 + 1.0) / 2.0;
        let omega = rank / (n as f64 + 1.0);
        logits.push((omega / (1.0 - omega)).ln());
        selected.push(best);
        in_sample_sharpe.push(is_sr[best]);
        out_of_sample_sharpe.push(target);
        next_combination(&mut chosen, s_count);
    }

    let overfit = logits.iter().filter(|&&l| l <= 0.0).count();
    let losses = out_of_sample_sharpe.iter().filter(|&&v| v < 0.0).count();
    let degradation = least_squares(&in_sample_sharpe, &out_of_sample_sharpe);
    Ok(Pbo {
        pbo: overfit as f64 / combinations as f64,
        partitions,
        partition_len: len,
        strategies: n,
        periods_used: len * s_count,
        periods_dropped: dropped,
        combinations,
        logits,
        selected,
        in_sample_sharpe,
        out_of_sample_sharpe,
        degradation,
        probability_of_loss: losses as f64 / combinations as f64,
    })
}

/// Advances `chosen` (k increasing indices below `n`) to the next combination in lexicographic
/// order; after the last it is left as is.
fn next_combination(chosen: &mut [usize], n: usize) {
    let k = chosen.len();
    let mut i = k;
    while i > 0 {
        i -= 1;
        if chosen[i] < n - k + i {
            chosen[i] += 1;
            for j in i + 1..k {
                chosen[j] = chosen[j - 1] + 1;
            }
            return;
        }
    }
}

/// Ordinary least squares of `y` on `x`.
fn least_squares(x: &[f64], y: &[f64]) -> Degradation {
    let n = x.len() as f64;
    let mx = x.iter().sum::<f64>() / n;
    let my = y.iter().sum::<f64>() / n;
    let (mut sxx, mut sxy, mut syy) = (0.0, 0.0, 0.0);
    for (a, b) in x.iter().zip(y) {
        let (dx, dy) = (a - mx, b - my);
        sxx += dx * dx;
        sxy += dx * dy;
        syy += dy * dy;
    }
    let slope = (sxx > 0.0).then(|| sxy / sxx);
    Degradation {
        slope,
        intercept: slope.map(|b| my - b * mx),
        r_squared: (sxx > 0.0 && syy > 0.0).then(|| sxy * sxy / (sxx * syy)),
        mean_in_sample: mx,
        mean_out_of_sample: my,
    }
}

impl Pbo {
    /// A histogram of the logits in bins of equal width whose edges are multiples of the width,
    /// so that 0 is an edge: bins are `lower < λ ≤ upper`, and the bins with `upper ≤ 0` hold
    /// exactly the combinations PBO counts. About `bins` bins span the logits (one more at most,
    /// from the alignment); empty bins between are kept.
    pub fn histogram(&self, bins: usize) -> Vec<HistogramBin> {
        logit_histogram(&self.logits, bins)
    }

    /// How often each strategy was the in-sample best, per strategy.
    pub fn selection_counts(&self) -> Vec<usize> {
        let mut counts = vec![0; self.strategies];
        for &s in &self.selected {
            counts[s] += 1;
        }
        counts
    }
}

impl Pbo {
    /// CSCV run on several matrices of the same strategies (CPCV's backtest paths: each a
    /// complete out-of-sample record of every trial, bar for bar) as one result: every part's
    /// combinations in part order, PBO and the probability of loss their share of all of them
    /// (the mean of the parts' when each has as many), the degradation line through every pair.
    /// The period figures are the shortest part's (the paths can differ by the few bars a
    /// fold skipped); `partitions` and `strategies` are the first part's, which CSCV on the
    /// same trials shares. None for no parts, or parts of other strategies or partitions.
    pub fn pooled(parts: Vec<Pbo>) -> Option<Pbo> {
        let mut parts = parts.into_iter();
        let mut out = parts.next()?;
        for p in parts {
            if (p.strategies, p.partitions) != (out.strategies, out.partitions) {
                return None;
            }
            out.partition_len = out.partition_len.min(p.partition_len);
            out.periods_used = out.periods_used.min(p.periods_used);
            out.periods_dropped = out.periods_dropped.max(p.periods_dropped);
            out.combinations += p.combinations;
            out.logits.extend(p.logits);
            out.selected.extend(p.selected);
            out.in_sample_sharpe.extend(p.in_sample_sharpe);
            out.out_of_sample_sharpe.extend(p.out_of_sample_sharpe);
        }
        let all = out.logits.len().max(1) as f64;
        out.pbo = out.logits.iter().filter(|&&l| l <= 0.0).count() as f64 / all;
        let losses = out.out_of_sample_sharpe.iter().filter(|&&v| v < 0.0);
        out.probability_of_loss = losses.count() as f64 / all;
        out.degradation = least_squares(&out.in_sample_sharpe, &out.out_of_sample_sharpe);
        Some(out)
    }
}

/// See [`Pbo::histogram`].
pub fn logit_histogram(logits: &[f64], bins: usize) -> Vec<HistogramBin> {
    let finite: Vec<f64> = logits.iter().copied().filter(|l| l.is_finite()).collect();
    let Some(min) = finite.iter().copied().reduce(f64::min) else {
        return Vec::new();
    };
    let max = finite.iter().copied().fold(min, f64::max);
    let bins = bins.max(1);
    let width = if max > min {
        (max - min) / bins as f64
    } else {
        1.0
    };
    // Bin i is (i·w, (i+1)·w]: λ falls in bin ⌈λ/w⌉ − 1.
    let index = |l: f64| (l / width).ceil() as i64 - 1;
    let (first, last) = (index(min), index(max));
    let mut out: Vec<HistogramBin> = (first..=last)
        .map(|i| HistogramBin {
            lower: i as f64 * width,
            upper: (i + 1) as f64 * width,
            count: 0,
        })
        .collect();
    for l in finite {
        let i = (index(l) - first) as usize;
        out[i].count += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combinations_are_enumerated_in_order_and_completely() {
        let mut c = vec![0, 1];
        let mut seen = vec![c.clone()];
        for _ in 1..binomial(4, 2).unwrap_or(0) {
            next_combination(&mut c, 4);
            seen.push(c.clone());
        }
        assert_eq!(
            seen,
            vec![
                vec![0, 1],
                vec![0, 2],
                vec![0, 3],
                vec![1, 2],
                vec![1, 3],
                vec![2, 3]
            ]
        );
        assert_eq!(binomial(16, 8), Some(12_870));
        assert_eq!(binomial(24, 12), Some(2_704_156));
    }

    /// Two matrices of the same strategies pooled: every combination of both, PBO the share
    /// of all of them overfit, the line through every pair; one part alone is itself.
    #[test]
    fn paths_pool_into_one_result() {
        let wave = |j: usize, t: usize, k: f64| {
            ((j as f64 + 1.0) * 0.618_034 + t as f64 * k).fract() - 0.5
        };
        let matrix = |k: f64| -> Vec<Vec<f64>> {
            (0..5)
                .map(|j| {
                    (0..64)
                        .map(|t| 0.01 * wave(j, t, k) + 0.0005 * j as f64)
                        .collect()
                })
                .collect()
        };
        let a = cscv(&matrix(0.754_878), 4).unwrap();
        let b = cscv(&matrix(0.414_214)[..], 4).unwrap();
        assert_eq!(Pbo::pooled(vec![a.clone()]), Some(a.clone()));
        assert_eq!(Pbo::pooled(Vec::new()), None);
        let both = Pbo::pooled(vec![a.clone(), b.clone()]).unwrap();
        assert_eq!(both.combinations, 12);
        assert_eq!(both.logits.len(), 12);
        assert!((both.pbo - (a.pbo + b.pbo) / 2.0).abs() < 1e-12);
        let loss = (a.probability_of_loss + b.probability_of_loss) / 2.0;
        assert!((both.probability_of_loss - loss).abs() < 1e-12);
        let mean_is = (a.degradation.mean_in_sample + b.degradation.mean_in_sample) / 2.0;
        assert!((both.degradation.mean_in_sample - mean_is).abs() < 1e-12);
        assert_eq!(both.selected[6..], b.selected[..]);
        assert_eq!((both.strategies, both.partitions), (5, 4));
        let fewer = cscv(&matrix(0.414_214)[..4], 4).unwrap();
        assert_eq!(Pbo::pooled(vec![a, fewer]), None, "other strategies");
    }

    #[test]
    fn histogram_has_zero_as_an_edge_and_counts_everything() {
        let logits = [-1.5, -0.2, 0.0, 0.0, 0.3, 2.0];
        let h = logit_histogram(&logits, 4);
        assert_eq!(h.iter().map(|b| b.count).sum::<usize>(), logits.len());
        let at_or_below: usize = h.iter().filter(|b| b.upper <= 0.0).map(|b| b.count).sum();
        assert_eq!(at_or_below, 4);
        assert!(h.iter().any(|b| b.upper == 0.0));
    }
}
