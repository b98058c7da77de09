//! The probabilistic and the deflated Sharpe ratio: how much to trust the best Sharpe ratio of
//! N trials.
//!
//! Source: D. H. Bailey and M. López de Prado, "The Deflated Sharpe Ratio: Correcting for
//! Selection Bias, Backtest Overfitting and Non-Normality", *Journal of Portfolio Management*
//! 40(5), 2014, pp. 94–107 (SSRN 2460551); the probabilistic Sharpe ratio is from Bailey and
//! López de Prado, "The Sharpe Ratio Efficient Frontier", *Journal of Risk* 15(2), 2012.
//!
//! - [`probabilistic_sharpe_ratio`] (PSR): the probability that the
//!   true Sharpe ratio exceeds a benchmark SR*, given the estimate's length T and the skewness
//!   γ₃ and kurtosis γ₄ of the returns:
//!   `PSR(SR*) = Φ((SR − SR*)·√(T − 1) / √(1 − γ₃·SR + (γ₄ − 1)/4·SR²))`.
//! - [`expected_max_sharpe`] (the DSR paper's benchmark SR₀, an approximation from extreme
//!   value theory): the expected maximum of N Sharpe ratio estimates of strategies whose true Sharpe
//!   ratio is 0, given the variance V of the estimates across trials:
//!   `E[max SR] = √V·((1 − γ)·Φ⁻¹(1 − 1/N) + γ·Φ⁻¹(1 − 1/(N·e)))`, γ the Euler–Mascheroni
//!   constant.
//! - [`deflated_sharpe_ratio`]: `DSR = PSR(SR₀)`, the
//!   probability that the selected strategy's true Sharpe ratio beats what the best of N
//!   worthless trials would show.
//!
//! Units: every Sharpe ratio here is **per period** (not annualised) — the mean over the sample
//! standard deviation (n − 1) of the per-period returns, risk-free rate 0 — and V is the variance
//! of such per-period Sharpe ratios; T counts periods. An annualised SR converts as
//! SR/√P and an annualised V as V/P for P periods per year (the paper's example does exactly this
//! with P = 250). Skewness and kurtosis are the moment estimators m₃/m₂^{3/2} and m₄/m₂² (with
//! the 1/n moments, as `scipy.stats.skew`/`kurtosis(fisher=False)`); kurtosis is *not* excess:
//! a normal distribution has γ₃ = 0, γ₄ = 3.
//!
//! The normal distribution: [`normal_cdf`] through `erfc` (libm, a port of musl's), and
//! [`normal_inv_cdf`] by P. J. Acklam's rational approximation refined by one Halley step on
//! [`normal_cdf`], accurate to about 1e-15 relative.

use serde::{Deserialize, Serialize};

/// The Euler–Mascheroni constant γ.
pub const EULER_MASCHERONI: f64 = 0.577_215_664_901_532_9;

/// Why a probabilistic or deflated Sharpe ratio cannot be computed. Each message names the
/// input at fault.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DsrError {
    /// Too few returns for a standard deviation (and a PSR's √(T − 1)).
    #[error("{periods} returns: a Sharpe ratio's standard error needs at least 2")]
    TooFewPeriods { periods: usize },
    /// A return is NaN or infinite.
    #[error("return {index} is {value}: every return must be a finite number")]
    NonFinite { index: usize, value: f64 },
    /// The returns do not vary, so their Sharpe ratio, skewness and kurtosis are undefined.
    #[error("the returns are all equal ({value}): a Sharpe ratio needs returns that vary")]
    NoVariance { value: f64 },
    /// Deflation needs at least two trials (the best of one is not a selection).
    #[error(
        "{trials} trial(s): the expected maximum Sharpe ratio needs at least 2 (Φ⁻¹(1 − 1/N) is −∞ for N = 1)"
    )]
    TooFewTrials { trials: usize },
    /// An input is not a finite number or out of its range.
    #[error("{name} is {value}: {reason}")]
    Input {
        name: &'static str,
        value: f64,
        reason: &'static str,
    },
    /// `1 − γ₃·SR + (γ₄ − 1)/4·SR²` is not positive: the skewness and kurtosis given cannot
    /// belong to returns with this Sharpe ratio.
    #[error(
        "1 − skewness·SR + (kurtosis − 1)/4·SR² = {value} is not positive (SR {sharpe}, skewness {skewness}, kurtosis {kurtosis}); kurtosis is the raw fourth moment ratio (3 for a normal distribution), not the excess"
    )]
    Moments {
        value: f64,
        sharpe: f64,
        skewness: f64,
        kurtosis: f64,
    },
}

/// The standard normal cumulative distribution function Φ(x) = erfc(−x/√2)/2.
pub fn normal_cdf(x: f64) -> f64 {
    0.5 * libm::erfc(-x / std::f64::consts::SQRT_2)
}

/// The standard normal quantile Φ⁻¹(p) for p in (0, 1); −∞ at 0, +∞ at 1, NaN outside [0, 1].
///
/// P. J. Acklam's rational approximation (relative error below 1.15e-9), then one step of
/// Halley's method on `Φ(x) − p` with [`normal_cdf`], which brings it to about machine precision.
pub fn normal_inv_cdf(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    const P_LOW: f64 = 0.02425;

    if p.is_nan() || !(0.0..=1.0).contains(&p) {
        return f64::NAN;
    }
    if p == 0.0 {
        return f64::NEG_INFINITY;
    }
    if p == 1.0 {
        return f64::INFINITY;
    }
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    let x = if p < P_LOW {
        tail((-2.0 * p.ln()).sqrt())
    } else if p <= 1.0 - P_LOW {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    } else {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    };
    // Halley's step on f(x) = Φ(x) − p (f' = φ, f'' = −x·φ). Above the median f is taken as
    // (1 − p) − Φ(−x), equal but without the cancellation of Φ(x) − p near 1 (1 − p is exact
    // for p ≥ 1/2).
    let e = if p > 0.5 {
        (1.0 - p) - normal_cdf(-x)
    } else {
        normal_cdf(x) - p
    };
    let u = e * (2.0 * std::f64::consts::PI).sqrt() * (x * x / 2.0).exp();
    let refined = x - u / (1.0 + x * u / 2.0);
    if refined.is_finite() { refined } else { x }
}

/// A Sharpe ratio estimate with what its standard error depends on: per-period SR, the number
/// of returns T, and their skewness γ₃ and (raw, non-excess) kurtosis γ₄.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SharpeEstimate {
    /// Per-period Sharpe ratio: mean / sample standard deviation (n − 1), risk-free rate 0.
    pub sharpe: f64,
    /// Number of returns T.
    pub periods: usize,
    /// Skewness γ₃ = m₃ / m₂^{3/2} of the returns (0 for a normal distribution).
    pub skewness: f64,
    /// Kurtosis γ₄ = m₄ / m₂² of the returns, not the excess (3 for a normal distribution).
    pub kurtosis: f64,
}

impl SharpeEstimate {
    /// The estimate from per-period returns (see the module's units).
    pub fn from_returns(returns: &[f64]) -> Result<Self, DsrError> {
        let t = returns.len();
        if t < 2 {
            return Err(DsrError::TooFewPeriods { periods: t });
        }
        if let Some((index, &value)) = returns.iter().enumerate().find(|(_, v)| !v.is_finite()) {
            return Err(DsrError::NonFinite { index, value });
        }
        let n = t as f64;
        let mean = returns.iter().sum::<f64>() / n;
        let (mut m2, mut m3, mut m4) = (0.0, 0.0, 0.0);
        for r in returns {
            let d = r - mean;
            let d2 = d * d;
            m2 += d2;
            m3 += d2 * d;
            m4 += d2 * d2;
        }
        // All equal (to rounding): the deviations are noise of the mean's last bits.
        if m2 <= (1e-14 * mean).powi(2) * n {
            return Err(DsrError::NoVariance { value: returns[0] });
        }
        let std = (m2 / (n - 1.0)).sqrt();
        let (m2, m3, m4) = (m2 / n, m3 / n, m4 / n);
        Ok(Self {
            sharpe: mean / std,
            periods: t,
            skewness: m3 / m2.powf(1.5),
            kurtosis: m4 / (m2 * m2),
        })
    }

    /// PSR(SR*) of this estimate: [`probabilistic_sharpe_ratio`].
    pub fn psr(&self, benchmark: f64) -> Result<f64, DsrError> {
        probabilistic_sharpe_ratio(self, benchmark)
    }

    /// The deflated Sharpe ratio of this estimate as the best of `trials` whose per-period
    /// Sharpe ratios have variance `sharpe_variance`: [`deflated_sharpe_ratio`].
    pub fn deflate(&self, trials: usize, sharpe_variance: f64) -> Result<Deflated, DsrError> {
        deflated_sharpe_ratio(self, trials, sharpe_variance)
    }
}

fn finite(name: &'static str, value: f64) -> Result<f64, DsrError> {
    if value.is_finite() {
        Ok(value)
    } else {
        Err(DsrError::Input {
            name,
            value,
            reason: "must be a finite number",
        })
    }
}

/// The probabilistic Sharpe ratio PSR(SR*) (as defined in the DSR paper):
/// `Φ((SR − SR*)·√(T − 1) / √(1 − γ₃·SR + (γ₄ − 1)/4·SR²))`, the probability that the true
/// Sharpe ratio exceeds `benchmark` SR* (per period, like `estimate.sharpe`).
pub fn probabilistic_sharpe_ratio(
    estimate: &SharpeEstimate,
    benchmark: f64,
) -> Result<f64, DsrError> {
    let sr = finite("the Sharpe ratio", estimate.sharpe)?;
    let benchmark = finite("the benchmark Sharpe ratio", benchmark)?;
    let skewness = finite("the skewness", estimate.skewness)?;
    let kurtosis = finite("the kurtosis", estimate.kurtosis)?;
    if estimate.periods < 2 {
        return Err(DsrError::TooFewPeriods {
            periods: estimate.periods,
        });
    }
    let var = 1.0 - skewness * sr + (kurtosis - 1.0) / 4.0 * sr * sr;
    if var.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
        return Err(DsrError::Moments {
            value: var,
            sharpe: sr,
            skewness,
            kurtosis,
        });
    }
    let z = (sr - benchmark) * ((estimate.periods - 1) as f64).sqrt() / var.sqrt();
    Ok(normal_cdf(z))
}

/// The expected maximum of `trials` per-period Sharpe ratio estimates whose true Sharpe ratio is
/// 0 and whose variance across trials is `sharpe_variance` (the DSR paper's SR₀):
/// `√V·((1 − γ)·Φ⁻¹(1 − 1/N) + γ·Φ⁻¹(1 − 1/(N·e)))`.
pub fn expected_max_sharpe(trials: usize, sharpe_variance: f64) -> Result<f64, DsrError> {
    if trials < 2 {
        return Err(DsrError::TooFewTrials { trials });
    }
    let v = finite("the variance of the trials' Sharpe ratios", sharpe_variance)?;
    if v < 0.0 {
        return Err(DsrError::Input {
            name: "the variance of the trials' Sharpe ratios",
            value: v,
            reason: "a variance cannot be negative",
        });
    }
    let n = trials as f64;
    let g = EULER_MASCHERONI;
    let z = (1.0 - g) * normal_inv_cdf(1.0 - 1.0 / n)
        + g * normal_inv_cdf(1.0 - 1.0 / (n * std::f64::consts::E));
    Ok(v.sqrt() * z)
}

/// A deflated Sharpe ratio with the figures it is made of.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Deflated {
    /// The estimate deflated (per-period SR, T, skewness, kurtosis).
    pub estimate: SharpeEstimate,
    /// N, the number of trials the estimate is the best of.
    pub trials: usize,
    /// V, the variance of the trials' per-period Sharpe ratios.
    pub sharpe_variance: f64,
    /// SR₀ = E[max SR] of `trials` worthless strategies ([`expected_max_sharpe`]).
    pub expected_max_sharpe: f64,
    /// PSR(0): the probability that the true Sharpe ratio is positive, ignoring selection.
    pub psr: f64,
    /// DSR = PSR(SR₀): the probability that the true Sharpe ratio is positive after the
    /// selection of the best of `trials`.
    pub dsr: f64,
}

/// The deflated Sharpe ratio DSR = PSR(SR₀) of the DSR paper: PSR of `estimate` against the expected
/// maximum Sharpe ratio of `trials` worthless strategies whose per-period Sharpe ratios have
/// variance `sharpe_variance`.
pub fn deflated_sharpe_ratio(
    estimate: &SharpeEstimate,
    trials: usize,
    sharpe_variance: f64,
) -> Result<Deflated, DsrError> {
    let sr0 = expected_max_sharpe(trials, sharpe_variance)?;
    Ok(Deflated {
        estimate: *estimate,
        trials,
        sharpe_variance,
        expected_max_sharpe: sr0,
        psr: probabilistic_sharpe_ratio(estimate, 0.0)?,
        dsr: probabilistic_sharpe_ratio(estimate, sr0)?,
    })
}

/// The best of several trials' return series, deflated by all of them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BestOfTrials {
    /// Index of the trial deflated (the one with the highest Sharpe ratio unless chosen).
    pub selected: usize,
    /// Every trial's per-period Sharpe ratio (a trial whose returns are all 0 has 0).
    pub sharpes: Vec<f64>,
    /// The selected trial's DSR, with N = the number of series and V = the sample variance
    /// (n − 1) of their Sharpe ratios.
    pub deflated: Deflated,
}

/// Deflates one of `trials`' per-period return series (one series per trial, equal lengths
/// not required) by all of them: N is the number of series, V the sample variance (n − 1) of
/// their per-period Sharpe ratios. `selected` picks the series (default: the highest Sharpe
/// ratio, the first of equals). A series of all-zero returns (a trial that never traded) has
/// Sharpe ratio 0; selected, it is refused ([`DsrTrialError::NeverTraded`]).
pub fn deflate_best<S: AsRef<[f64]>>(
    trials: &[S],
    selected: Option<usize>,
) -> Result<BestOfTrials, DsrTrialError> {
    if trials.len() < 2 {
        return Err(DsrTrialError::Deflate(DsrError::TooFewTrials {
            trials: trials.len(),
        }));
    }
    let mut sharpes = Vec::with_capacity(trials.len());
    for (i, t) in trials.iter().enumerate() {
        let sr =
            trial_sharpe(t.as_ref()).map_err(|source| DsrTrialError::Trial { trial: i, source })?;
        sharpes.push(sr);
    }
    let n = sharpes.len() as f64;
    let mean = sharpes.iter().sum::<f64>() / n;
    let variance = sharpes.iter().map(|s| (s - mean).powi(2)).sum::<f64>() / (n - 1.0);
    let best = match selected {
        Some(i) if i < trials.len() => i,
        Some(i) => {
            return Err(DsrTrialError::Selected {
                selected: i,
                trials: trials.len(),
            });
        }
        None => {
            let mut best = 0;
            for (i, s) in sharpes.iter().enumerate() {
                if *s > sharpes[best] {
                    best = i;
                }
            }
            best
        }
    };
    let chosen = trials[best].as_ref();
    if chosen.len() >= 2 && chosen.iter().all(|v| *v == 0.0) {
        return Err(DsrTrialError::NeverTraded { trial: best });
    }
    let estimate = SharpeEstimate::from_returns(chosen).map_err(|source| DsrTrialError::Trial {
        trial: best,
        source,
    })?;
    Ok(BestOfTrials {
        selected: best,
        deflated: deflated_sharpe_ratio(&estimate, trials.len(), variance)?,
        sharpes,
    })
}

/// One trial's per-period Sharpe ratio as [`deflate_best`] takes it: 0 for returns that are all
/// 0 (a trial that never traded), else [`SharpeEstimate::from_returns`]'s.
pub fn trial_sharpe(returns: &[f64]) -> Result<f64, DsrError> {
    if returns.len() >= 2 && returns.iter().all(|v| *v == 0.0) {
        return Ok(0.0);
    }
    SharpeEstimate::from_returns(returns).map(|e| e.sharpe)
}

/// Why [`deflate_best`] failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DsrTrialError {
    /// One trial's returns give no Sharpe ratio.
    #[error("trial {trial}: {source}")]
    Trial {
        trial: usize,
        #[source]
        source: DsrError,
    },
    /// The selected trial's returns are all 0: it never traded, so its Sharpe ratio is 0 and
    /// there is no track record to deflate.
    #[error(
        "trial {trial} never traded (its returns are all 0): its Sharpe ratio is 0, with no track record to deflate"
    )]
    NeverTraded { trial: usize },
    /// The trial asked for does not exist.
    #[error("trial {selected} was selected but there are {trials} (numbered from 0)")]
    Selected { selected: usize, trials: usize },
    /// The deflation itself failed.
    #[error(transparent)]
    Deflate(#[from] DsrError),
}
