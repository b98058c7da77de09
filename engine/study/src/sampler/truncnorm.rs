//! The standard normal in log space and the truncated normal's quantile function, as TPE needs
//! them. The formulas follow SciPy's `truncnorm` as Optuna 5.0 vendors it
//! (`optuna/samplers/_tpe/_truncnorm.py`): work in the left tail where `Φ` is accurate, flip
//! the sign for the right tail, and invert `log Φ` by Newton's method.

use std::f64::consts::{FRAC_1_SQRT_2, PI};

/// `ln √(2π)`.
pub(crate) const LN_SQRT_2PI: f64 = 0.918_938_533_204_672_8;

/// `Φ(x)`, the standard normal CDF, accurate in both tails through `erfc`.
pub(crate) fn ndtr(x: f64) -> f64 {
    0.5 * libm::erfc(-x * FRAC_1_SQRT_2)
}

/// `ln Φ(x)`. For x < −20, `Φ` underflows soon after, so the asymptotic series
/// `ln Φ(x) = −x²/2 − ln(−x) − ln√(2π) + ln(1 − 1/x² + 3/x⁴ − …)` is summed instead
/// (Abramowitz & Stegun 26.2.12), as SciPy does.
pub(crate) fn log_ndtr(x: f64) -> f64 {
    if x > 6.0 {
        // ln(1 − q) ≈ −q for q = Φ(−x) < 1e-9.
        return -ndtr(-x);
    }
    if x > -20.0 {
        return ndtr(x).ln();
    }
    let lhs = -0.5 * x * x - (-x).ln() - LN_SQRT_2PI;
    let denom_cons = 1.0 / (x * x);
    let (mut last, mut rhs, mut numerator, mut denom, mut sign) =
        (0.0f64, 1.0f64, 1.0f64, 1.0f64, 1.0f64);
    let mut i = 0.0;
    while (last - rhs).abs() > f64::EPSILON {
        i += 1.0;
        last = rhs;
        sign = -sign;
        denom *= denom_cons;
        numerator *= 2.0 * i - 1.0;
        rhs += sign * numerator * denom;
    }
    lhs + rhs.ln()
}

/// `ln(e^p − e^q)` for p ≥ q.
fn log_diff(p: f64, q: f64) -> f64 {
    p + (-(q - p).exp()).ln_1p()
}

/// `ln(e^p + e^q)`.
fn log_sum(p: f64, q: f64) -> f64 {
    let m = p.max(q);
    if m == f64::NEG_INFINITY {
        return m;
    }
    m + ((p - m).exp() + (q - m).exp()).ln()
}

/// `ln(Φ(b) − Φ(a))`, the log probability mass of the standard normal on `[a, b]`.
pub(crate) fn log_gauss_mass(a: f64, b: f64) -> f64 {
    if b <= 0.0 {
        log_diff(log_ndtr(b), log_ndtr(a))
    } else if a > 0.0 {
        log_diff(log_ndtr(-a), log_ndtr(-b))
    } else {
        // Central case: 1 − Φ(a) − Φ(−b) avoids the cancellation of two masses near ½.
        (-ndtr(a) - ndtr(-b)).ln_1p()
    }
}

/// Solves `ln Φ(x) = y` for x (y ≤ 0), by Newton's method from a tail or logistic guess.
fn ndtri_exp(y: f64) -> f64 {
    // Near y = 0, solve for −x in the other tail: ln Φ(−x) = ln(1 − e^y).
    let flipped = y > -1e-2;
    let z = if flipped { (-y.exp_m1()).ln() } else { y };
    let mut x = if z < -5.0 {
        -(-2.0 * (z + LN_SQRT_2PI)).sqrt()
    } else {
        // The logistic approximation Φ(x) ≈ 1 / (1 + e^{−πx/√3}).
        -(3f64.sqrt() / PI) * (-z).exp_m1().ln()
    };
    for _ in 0..100 {
        let log_ndtr_x = log_ndtr(x);
        let log_pdf_x = -0.5 * x * x - LN_SQRT_2PI;
        let dx = (log_ndtr_x - z) * (log_ndtr_x - log_pdf_x).exp();
        x -= dx;
        if dx.abs() < 1e-8 * x.abs() {
            break;
        }
    }
    if flipped { -x } else { x }
}

/// The quantile `q ∈ [0, 1]` of the standard normal truncated to `[a, b]`.
pub(crate) fn ppf(q: f64, a: f64, b: f64) -> f64 {
    if a == b {
        return a;
    }
    if q <= 0.0 {
        return a;
    }
    if q >= 1.0 {
        return b;
    }
    let log_mass = log_gauss_mass(a, b);
    let x = if a < 0.0 {
        ndtri_exp(log_sum(log_ndtr(a), q.ln() + log_mass))
    } else {
        -ndtri_exp(log_sum(log_ndtr(-b), (-q).ln_1p() + log_mass))
    };
    // Newton's last step can leave x an ulp outside; a NaN (mass underflowed to zero for a
    // kernel far outside the range) falls back to the nearer bound.
    if x.is_nan() {
        if a.abs() < b.abs() { a } else { b }
    } else {
        x.clamp(a, b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_ndtr_matches_known_values() {
        // Reference values computed with mpmath at 40 digits.
        for (x, want) in [
            (0.0, -std::f64::consts::LN_2),
            (1.0, -0.172_753_779_023_449_9),
            (-5.0, -15.064_998_393_988_725),
            (-30.0, -454.321_243_956_343_2),
            (8.0, -6.220_960_574_271_785e-16),
        ] {
            let got = log_ndtr(x);
            assert!(
                (got - want).abs() <= 1e-12 * want.abs().max(1e-3),
                "x={x}: {got} vs {want}"
            );
        }
        // The two formulas meet at −20.
        let (l, r) = (log_ndtr(-20.0 - 1e-9), log_ndtr(-20.0 + 1e-9));
        assert!((l - r).abs() < 1e-6);
    }

    #[test]
    fn gauss_mass_in_every_case() {
        assert!((log_gauss_mass(-1.0, 1.0).exp() - 0.682_689_492_137_085_9).abs() < 1e-14);
        assert!((log_gauss_mass(1.0, 2.0).exp() - 0.135_905_121_983_278_2).abs() < 1e-14);
        assert!((log_gauss_mass(-2.0, -1.0).exp() - 0.135_905_121_983_278_2).abs() < 1e-14);
        // Far tail: mass of [10, 11] ≈ 7.62e-24, still finite in log space.
        let m = log_gauss_mass(10.0, 11.0);
        assert!((m - (-53.231_310_225_583_12)).abs() < 1e-9, "{m}");
        assert_eq!(log_gauss_mass(1.0, 1.0), f64::NEG_INFINITY);
    }

    #[test]
    fn ppf_inverts_the_truncated_cdf() {
        for (a, b) in [
            (-1.0, 1.0),
            (-30.0, 0.5),
            (2.0, 9.0),
            (-9.0, -2.0),
            (0.0, 100.0),
            (12.0, 15.0),
        ] {
            let mass = log_gauss_mass(a, b);
            for q in [1e-9, 0.01, 0.3, 0.5, 0.9, 0.999_999] {
                let x = ppf(q, a, b);
                assert!(a <= x && x <= b, "{a} {b} {q} -> {x}");
                // q = (Φ(x) − Φ(a)) / (Φ(b) − Φ(a)), checked in log space.
                let got = if x <= a {
                    f64::NEG_INFINITY
                } else {
                    log_gauss_mass(a, x) - mass
                };
                assert!(
                    (got.exp() - q).abs() < 1e-7 * q.max(1e-3),
                    "{a} {b} {q}: {}",
                    got.exp()
                );
            }
        }
        assert_eq!(ppf(0.0, -1.0, 1.0), -1.0);
        assert_eq!(ppf(1.0, -1.0, 1.0), 1.0);
    }
}
