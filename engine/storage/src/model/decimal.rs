//! Python's `decimal.Decimal(str(x))` arithmetic, as far as Optuna's step grid needs it.
//!
//! Optuna decides whether `step` divides `high − low` (`_adjust_discrete_uniform_high`) and
//! whether a stepped range holds one value (`single()`) in decimal arithmetic on the values'
//! `str()`, so that `0.1 … 0.7` by `0.2` is a grid although `(0.7 − 0.1) / 0.2` is not an
//! integer in binary floating point. A float's shortest repr (Rust's `{:e}`) is Python's `str()`.

/// `mantissa × 10^exponent`.
#[derive(Clone, Copy)]
struct Decimal {
    mantissa: i128,
    exponent: i32,
}

impl Decimal {
    fn of(x: f64) -> Option<Decimal> {
        if !x.is_finite() {
            return None;
        }
        let sci = format!("{x:e}");
        let (m, e) = sci.split_once('e')?;
        let e: i32 = e.parse().ok()?;
        let (int, frac) = m.split_once('.').unwrap_or((m, ""));
        let mantissa: i128 = format!("{int}{frac}").parse().ok()?;
        Some(Decimal {
            mantissa,
            exponent: e - frac.len() as i32,
        })
    }
}

/// `low`, `high` and `step` as integers on their smallest common decimal exponent, or None when
/// a value is not finite or the scaling overflows i128 (exponents too far apart).
fn aligned(low: f64, high: f64, step: f64) -> Option<([i128; 3], i32)> {
    let values = [Decimal::of(low)?, Decimal::of(high)?, Decimal::of(step)?];
    let e = values.iter().map(|d| d.exponent).min()?;
    let mut out = [0i128; 3];
    for (o, d) in out.iter_mut().zip(values) {
        let shift = u32::try_from(d.exponent - e).ok()?;
        *o = 10i128.checked_pow(shift)?.checked_mul(d.mantissa)?;
    }
    Some((out, e))
}

fn to_f64(mantissa: i128, exponent: i32) -> Option<f64> {
    format!("{mantissa}e{exponent}").parse().ok()
}

/// The grid points `low + k·step` next to `high` (`low ≤ high`, `step > 0`): the last one at
/// or below `high` (Optuna's adjusted `high`) and the first one at or above it; both are `high`
/// when `step` divides `high − low`. None when the values cannot share one decimal grid.
pub(crate) fn grid_around(low: f64, high: f64, step: f64) -> Option<(f64, f64)> {
    let ([l, h, s], e) = aligned(low, high, step)?;
    let r = h.checked_sub(l)?;
    if s <= 0 || r < 0 {
        return None;
    }
    if r % s == 0 {
        return Some((high, high));
    }
    // r >= 0, so Decimal's truncating `//` is the floor.
    let below = (r / s).checked_mul(s)?.checked_add(l)?;
    let above = below.checked_add(s)?;
    Some((to_f64(below, e)?, to_f64(above, e)?))
}

/// Whether `high − low < step` in decimal arithmetic (Optuna's `single()` for stepped floats).
pub(crate) fn range_below_step(low: f64, high: f64, step: f64) -> Option<bool> {
    let ([l, h, s], _) = aligned(low, high, step)?;
    Some(h.checked_sub(l)? < s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_is_decimal_like_pythons() {
        // Python: FloatDistribution(0.1, 0.32, step=0.05).high == 0.3;
        //         FloatDistribution(0.0, 1.0, step=0.3).high == 0.9 (decimal, not 3 * 0.3)
        assert_eq!(grid_around(0.1, 0.32, 0.05), Some((0.3, 0.35)));
        assert_eq!(grid_around(0.0, 1.0, 0.3), Some((0.9, 1.2)));
        assert_eq!(grid_around(0.1, 0.7, 0.2), Some((0.7, 0.7)));
        assert_eq!(grid_around(0.0, 1.0, f64::INFINITY), None);
        assert_eq!(grid_around(1e-300, 1.0, 0.1), None, "i128 overflow");
        assert_eq!(range_below_step(0.1, 0.12, 0.05), Some(true));
        assert_eq!(range_below_step(0.1, 0.15, 0.05), Some(false));
    }
}
