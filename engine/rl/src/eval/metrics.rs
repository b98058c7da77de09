//! Performance metrics of an equity curve: total return, annualised Sharpe and Sortino ratios on
//! per-bar percentage returns, maximum drawdown, turnover and fees.
//!
//! Conventions (those of `empyrical`/`quantstats`, so figures compare with what users know):
//! - per-bar simple returns `r_t = E_t / E_{t−1} − 1`, risk-free rate and target return 0;
//! - Sharpe = mean(r) / std(r) · √P with the sample standard deviation (n − 1);
//! - Sortino = mean(r) / DD · √P with the downside deviation DD = √(mean(min(r, 0)²)) taken
//!   over *all* bars (Sortino & Price 1994, "Performance measurement in a downside risk
//!   framework"; `empyrical.downside_risk`);
//! - P, the bars per year, from the bar length ([`periods_per_year`]);
//! - max drawdown = max_t (1 − E_t / max_{s≤t} E_s), a positive fraction.
//!
//! A flat curve (no return, no risk: an agent that stays in cash) has Sharpe and Sortino 0 — it
//! beat nothing. A ratio that would be ±∞ or NaN is a [`MetricError`]: a caller must not rank a
//! trial on a number that is not one. The exception is a Sortino ratio with no losing bar and a
//! positive mean: +∞, a metric rather than a broken curve (an objective of it refuses it; in
//! JSON it is `null`, read back as +∞).

use serde::{Deserialize, Serialize};

use tradetune_market::Dataset;

/// Seconds in an average Gregorian year (365.25 days), for markets that trade around the clock.
pub const SECONDS_PER_YEAR: f64 = 365.25 * 86_400.0;

/// Trading days per year of exchange-traded markets (NYSE: 252 on average; the convention of
/// `empyrical`'s `APPROX_BDAYS_PER_YEAR`).
pub const TRADING_DAYS_PER_YEAR: f64 = 252.0;

/// Above this share of bars falling on a Saturday or Sunday (UTC) the market is taken to trade
/// around the clock (crypto: 2/7 ≈ 29 %). Below it, weekend bars are sessions that start late on
/// Sunday UTC (Sydney, Tokyo) or stray rows.
const WEEKEND_SHARE_24_7: f64 = 0.10;
/// Bars this long or longer (and shorter than two days) are daily bars: one a trading day.
const DAILY_FROM: i64 = 20 * 3_600;
/// The share of gaps at least [`DAILY_FROM`] long that makes bars daily ones.
const DAILY_SHARE: f64 = 0.9;

/// How one strategy did over an evaluation.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Metrics {
    /// Final equity / initial equity − 1.
    pub total_return: f64,
    /// Annualised Sharpe ratio of per-bar returns (risk-free rate 0).
    pub sharpe: f64,
    /// Annualised Sortino ratio of per-bar returns (target 0); +∞ with no losing bar (JSON's
    /// `null`, read back as +∞).
    #[serde(deserialize_with = "null_as_infinity")]
    pub sortino: f64,
    /// Largest peak-to-trough fall of the equity, as a positive fraction (0.25 = −25 %).
    pub max_drawdown: f64,
    /// Value traded (buys plus sells) over the evaluation, each bar's as a fraction of the
    /// portfolio's value before it, summed: 1.0 = the portfolio's worth traded once.
    pub turnover: f64,
    /// Fees paid over the evaluation, in the dataset's quote currency (the env's cash units).
    pub fees_paid: f64,
    /// Annualised volatility of per-bar returns (sample std · √P).
    pub volatility: f64,
}

/// Why a metric is not a number.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MetricError {
    /// Too short a curve for a standard deviation.
    #[error("{points} equity points give {returns} returns; a standard deviation needs 2")]
    TooShort { points: usize, returns: usize },
    /// A value is NaN or infinite.
    #[error("{metric} is {value}: {reason}")]
    NonFinite {
        metric: &'static str,
        value: f64,
        reason: String,
    },
}

/// The per-bar inputs of [`Metrics::from_curve`].
#[derive(Debug, Clone, Copy)]
pub struct Curve<'a> {
    /// Portfolio value at each bar, the first being the start.
    pub equity: &'a [f64],
    /// Value traded during each step (`equity.len() − 1` values); empty = no trades.
    pub traded: &'a [f64],
    /// Fees paid during each step (`equity.len() − 1` values); empty = none.
    pub fees: &'a [f64],
    /// Bars per year ([`periods_per_year`]).
    pub periods_per_year: f64,
}

fn finite(metric: &'static str, value: f64, reason: &str) -> Result<f64, MetricError> {
    if value.is_finite() {
        Ok(value)
    } else {
        Err(MetricError::NonFinite {
            metric,
            value,
            reason: reason.to_owned(),
        })
    }
}

/// Per-bar return statistics below this are rounding noise (the env keeps values in f32, whose
/// relative precision is 6e-8; a true per-bar deviation is many orders larger).
const NOISE: f64 = 1e-12;

/// `num / den · scale`, with 0/0 = 0 (no return and no risk) and x/0 an error; magnitudes below
/// [`NOISE`] count as 0.
fn ratio(metric: &'static str, num: f64, den: f64, scale: f64) -> Result<f64, MetricError> {
    let zero_den = den.abs() <= NOISE;
    if zero_den && num.abs() <= NOISE {
        return Ok(0.0);
    }
    let reason = if zero_den {
        "the returns have a nonzero mean but no variation to divide by".to_owned()
    } else {
        "the returns are not finite".to_owned()
    };
    let value = if zero_den {
        f64::INFINITY.copysign(num)
    } else {
        num / den * scale
    };
    finite(metric, value, &reason)
}

/// A number, or `null` (how JSON writes +∞) as +∞.
fn null_as_infinity<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::INFINITY))
}

/// The Sortino ratio: as [`ratio`], except that a curve with no losing bar and a positive mean
/// has +∞ (no downside to divide by): a metric, not a broken curve, so an evaluation scored by
/// another objective goes on (one scored by Sortino refuses the infinite value itself).
fn sortino(mean: f64, downside: f64, scale: f64) -> Result<f64, MetricError> {
    if downside.abs() <= NOISE && mean > NOISE {
        return Ok(f64::INFINITY);
    }
    ratio("sortino", mean, downside, scale)
}

impl Metrics {
    /// The metrics of one equity curve.
    pub fn from_curve(c: Curve<'_>) -> Result<Self, MetricError> {
        let e = c.equity;
        if e.len() < 3 {
            return Err(MetricError::TooShort {
                points: e.len(),
                returns: e.len().saturating_sub(1),
            });
        }
        if let Some(v) = e.iter().find(|v| !(v.is_finite() && **v > 0.0)) {
            return Err(MetricError::NonFinite {
                metric: "equity",
                value: *v,
                reason: "portfolio values must be finite and positive".into(),
            });
        }
        let returns: Vec<f64> = e.windows(2).map(|w| w[1] / w[0] - 1.0).collect();
        let n = returns.len() as f64;
        let mean = returns.iter().sum::<f64>() / n;
        let var = returns.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / (n - 1.0);
        let std = var.sqrt();
        let downside = (returns.iter().map(|r| r.min(0.0).powi(2)).sum::<f64>() / n).sqrt();
        let root_p = c.periods_per_year.sqrt();

        let mut peak = e[0];
        let mut max_drawdown = 0.0f64;
        for &v in e {
            peak = peak.max(v);
            max_drawdown = max_drawdown.max(1.0 - v / peak);
        }
        // fold from +0.0: an empty f64 `sum()` is −0.0, which prints as "-0".
        let turnover = c
            .traded
            .iter()
            .zip(e)
            .fold(0.0, |acc, (traded, before)| acc + traded / before);
        let fees = c.fees.iter().fold(0.0, |acc, f| acc + f);
        Ok(Self {
            total_return: finite("total_return", e[e.len() - 1] / e[0] - 1.0, "")?,
            sharpe: ratio("sharpe", mean, std, root_p)?,
            sortino: sortino(mean, downside, root_p)?,
            max_drawdown,
            turnover: finite("turnover", turnover, "traded values are not finite")?,
            fees_paid: finite("fees_paid", fees, "fees are not finite")?,
            volatility: finite("volatility", std * root_p, "the returns are not finite")?,
        })
    }
}

/// Bars per year for `dataset`'s bar length, to annualise Sharpe and Sortino:
///
/// - bars of two days or longer (weekly, monthly): a 365.25-day year / bar length;
/// - daily bars: 252 where more than 10 % of the gaps between bars are two days or longer (a
///   market closed on weekends, in whatever time zone its bars are stamped), else 365.25;
/// - shorter bars of markets that trade on weekends (more than 10 % of bars on a Saturday or
///   Sunday, UTC: crypto spot and perpetuals): a 365.25-day year / bar length (5-minute bars:
///   105,192);
/// - markets closed on weekends (equities, futures sessions): 252 trading days × the median
///   number of bars per UTC calendar day that has any (daily bars: 252; hourly US equity bars:
///   252 × 7).
///
/// None when the dataset has fewer than two bars (no bar length).
pub fn periods_per_year(dataset: &Dataset) -> Option<f64> {
    periods_per_year_of(&dataset.timestamps)
}

/// [`periods_per_year`] of bar timestamps (Unix seconds, increasing).
pub fn periods_per_year_of(timestamps: &[i64]) -> Option<f64> {
    let bar = tradetune_market::dataset::median_spacing(timestamps);
    if bar <= 0 {
        return None;
    }
    let calendar = SECONDS_PER_YEAR / bar as f64;
    if bar >= 2 * 86_400 {
        return Some(calendar);
    }
    let gaps = timestamps.len().saturating_sub(1).max(1);
    let day_long = timestamps
        .windows(2)
        .filter(|w| w[1] - w[0] >= DAILY_FROM)
        .count();
    // Daily bars: (nearly) every gap a day or more. Two bars a session (4-hour bars: gaps of 4
    // and 20 hours) may have a median gap of 20 hours, and are not daily bars.
    if bar >= DAILY_FROM && day_long as f64 >= DAILY_SHARE * gaps as f64 {
        // A market closed on weekends shows it in its gaps (a weekend is a gap of three days
        // after one bar in five), whatever time zone its bars are stamped in. Their UTC weekday
        // would not: a Tokyo or Sydney bar stamped at local midnight falls on the previous UTC
        // day, every Monday on a Sunday, and would read as a 24/7 market.
        let closed = timestamps
            .windows(2)
            .filter(|w| w[1] - w[0] >= 2 * 86_400 - 3_600)
            .count();
        return Some(if closed as f64 > WEEKEND_SHARE_24_7 * gaps as f64 {
            TRADING_DAYS_PER_YEAR
        } else {
            calendar
        });
    }
    let day = |t: i64| t.div_euclid(86_400);
    // 1970-01-01 was a Thursday: (day + 3) mod 7 is 0 for Monday … 5, 6 for Saturday, Sunday.
    let weekend = timestamps
        .iter()
        .filter(|&&t| (day(t) + 3).rem_euclid(7) >= 5)
        .count();
    if weekend as f64 > WEEKEND_SHARE_24_7 * timestamps.len() as f64 {
        return Some(calendar);
    }
    let mut per_day: Vec<usize> = Vec::new();
    let mut current = None;
    for &t in timestamps {
        if current == Some(day(t)) {
            if let Some(last) = per_day.last_mut() {
                *last += 1;
            }
        } else {
            current = Some(day(t));
            per_day.push(1);
        }
    }
    let mid = per_day.len() / 2;
    let median = *per_day.select_nth_unstable(mid).1;
    Some(TRADING_DAYS_PER_YEAR * median as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn curve(equity: &[f64], p: f64) -> Result<Metrics, MetricError> {
        Metrics::from_curve(Curve {
            equity,
            traded: &[],
            fees: &[],
            periods_per_year: p,
        })
    }

    /// Returns +10 %, −5 %, +2 %, −1 % by hand:
    /// mean = 0.015; sample var = (0.085² + 0.065² + 0.005² + 0.025²)/3 = 0.0121/3,
    /// std = 0.0635085; Sharpe·(1/√252) = 0.2361889.
    /// Downside: √((0.05² + 0.01²)/4) = √0.00065 = 0.0254951; Sortino·(1/√252) = 0.5883484.
    /// Equity 100, 110, 104.5, 106.59, 105.5241: peak 110, trough 104.5 → drawdown 5 %.
    #[test]
    fn a_hand_computed_series() {
        let e = [100.0, 110.0, 104.5, 106.59, 105.524_1];
        let m = curve(&e, 252.0).unwrap();
        let root = 252f64.sqrt();
        assert!(
            (m.total_return - 0.055_241).abs() < 1e-9,
            "{}",
            m.total_return
        );
        assert!((m.sharpe - 0.015 / (0.0121f64 / 3.0).sqrt() * root).abs() < 1e-9);
        assert!((m.sharpe / root - 0.236_188_9).abs() < 1e-6, "{}", m.sharpe);
        assert!(
            (m.sortino / root - 0.588_348_4).abs() < 1e-6,
            "{}",
            m.sortino
        );
        assert!((m.max_drawdown - 0.05).abs() < 1e-12, "{}", m.max_drawdown);
        assert!((m.volatility - (0.0121f64 / 3.0).sqrt() * root).abs() < 1e-12);
    }

    #[test]
    fn drawdown_is_the_deepest_fall_from_a_running_peak() {
        // Peak 120 → 60 is −50 %, deeper than 100 → 90 (−10 %) and than the final 150 → 135.
        let e = [100.0, 90.0, 120.0, 60.0, 150.0, 135.0];
        let m = curve(&e, 1.0).unwrap();
        assert!((m.max_drawdown - 0.5).abs() < 1e-12);
        assert!((m.total_return - 0.35).abs() < 1e-12);
    }

    #[test]
    fn turnover_and_fees_are_per_bar_fractions_and_sums() {
        // Trades of 50 at value 100, then 0, then 110 at value 110: turnover 0.5 + 0 + 1.
        let e = [100.0, 100.0, 110.0, 99.0];
        let m = Metrics::from_curve(Curve {
            equity: &e,
            traded: &[50.0, 0.0, 110.0],
            fees: &[0.125, 0.0, 0.275],
            periods_per_year: 252.0,
        })
        .unwrap();
        assert!((m.turnover - 1.5).abs() < 1e-12);
        assert!((m.fees_paid - 0.4).abs() < 1e-12);
    }

    #[test]
    fn a_flat_curve_scores_zero_and_a_riskless_gain_is_an_error() {
        let m = curve(&[1e6; 10], 252.0).unwrap();
        assert_eq!((m.sharpe, m.sortino, m.max_drawdown), (0.0, 0.0, 0.0));
        // Rising every bar: no downside, so the Sortino ratio is infinite; the Sharpe ratio
        // and the rest are numbers (an evaluation scored by them goes on).
        let m = curve(&[100.0, 101.0, 102.5, 104.0], 252.0).unwrap();
        assert_eq!(m.sortino, f64::INFINITY);
        assert!(m.sharpe.is_finite() && m.sharpe > 0.0);
        // JSON has no +∞: written as null, read back as +∞.
        let json = serde_json::to_string(&m).unwrap();
        assert!(json.contains("\"sortino\":null"), "{json}");
        assert_eq!(serde_json::from_str::<Metrics>(&json).unwrap(), m);
        // A constant return: no variation at all.
        let err = curve(&[100.0, 110.0, 121.0], 252.0).unwrap_err();
        assert!(err.to_string().contains("sharpe"), "{err}");
    }

    #[test]
    fn bad_curves_are_errors() {
        assert!(matches!(
            curve(&[1.0, 2.0], 252.0),
            Err(MetricError::TooShort { .. })
        ));
        let err = curve(&[1.0, f64::NAN, 2.0], 252.0).unwrap_err();
        assert!(err.to_string().contains("equity"), "{err}");
        let err = curve(&[1.0, 0.0, 2.0], 252.0).unwrap_err();
        assert!(err.to_string().contains("positive"), "{err}");
    }

    #[test]
    fn annualisation_follows_the_bar_length_and_the_calendar() {
        // Weekdays only, one bar a day from Monday 2024-01-01: equities → 252.
        let monday: i64 = 1_704_067_200;
        let daily: Vec<i64> = (0..70)
            .map(|d| monday + d * 86_400)
            .filter(|t| (t.div_euclid(86_400) + 3).rem_euclid(7) < 5)
            .collect();
        assert_eq!(periods_per_year_of(&daily), Some(252.0));
        // Every day of the week: crypto daily bars → 365.25.
        let every_day: Vec<i64> = (0..70).map(|d| monday + d * 86_400).collect();
        assert_eq!(periods_per_year_of(&every_day), Some(365.25));
        // Weekdays stamped at Tokyo midnight (15:00 UTC the day before: every Monday a Sunday
        // in UTC): still a market closed on weekends → 252.
        let tokyo: Vec<i64> = daily.iter().map(|t| t - 9 * 3_600).collect();
        assert_eq!(periods_per_year_of(&tokyo), Some(252.0));
        // Two 4-hour bars a weekday (14:30 and 18:30 UTC: gaps of 4 and 20 hours, a median of
        // 20 hours however the first bar falls): 252 × 2, not daily bars.
        let two_a_day: Vec<i64> = daily
            .iter()
            .flat_map(|d| [d + 52_200, d + 66_600])
            .collect();
        assert_eq!(periods_per_year_of(&two_a_day), Some(504.0));
        assert_eq!(periods_per_year_of(&two_a_day[1..]), Some(504.0));
        // 5-minute bars around the clock: 105,192 a year.
        let five: Vec<i64> = (0..5_000).map(|i| monday + i * 300).collect();
        assert_eq!(periods_per_year_of(&five), Some(105_192.0));
        // Hourly bars 14:00–20:00 UTC on weekdays (7 a day): 252 × 7.
        let hourly: Vec<i64> = daily
            .iter()
            .flat_map(|d| (14..21).map(move |h| d + h * 3_600))
            .collect();
        assert_eq!(periods_per_year_of(&hourly), Some(252.0 * 7.0));
        // Weekly bars: 52.18 a year.
        let weekly: Vec<i64> = (0..30).map(|w| monday + w * 7 * 86_400).collect();
        let p = periods_per_year_of(&weekly).unwrap();
        assert!((p - 365.25 / 7.0).abs() < 1e-9, "{p}");
        assert_eq!(periods_per_year_of(&[monday]), None);
    }
}
