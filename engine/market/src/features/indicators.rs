//! Raw technical indicators, in their textbook units (RSI in 0..100, MACD in price units, ...).
//!
//! Every function returns one value per input bar, `NaN` in the warm-up bars where the indicator
//! is not yet defined, and is causal: the value at bar `t` uses bars `..=t` only. The warm-up
//! lengths and the seeding of the recursive smoothers are those of TA-Lib (the reference the
//! tests compare against, `engine/tests/fixtures/talib_reference.csv`), so that the values agree
//! from the first defined bar on, not only after the smoothers have forgotten their seeds:
//!
//! | indicator | first defined bar | seeding |
//! |---|---|---|
//! | [`sma`]`(p)` | `p−1` | — |
//! | [`ema`]`(p)` | `p−1` | SMA of the first `p` values |
//! | [`rsi`]`(p)` | `p` | Wilder: plain average of the first `p` gains/losses |
//! | [`macd`]`(f,s,g)` | `s+g−2` | both EMAs seeded at bar `s−1` with the SMA of their own period ending there; signal seeded with the SMA of the first `g` MACD values |
//! | [`cci`]`(p)` | `p−1` | — |
//! | [`dx`]`(p)` | `p` | Wilder sums: first sum of `p−1` one-bar DM/TR values |
//! | [`adx`]`(p)` | `2p−1` | plain average of the first `p` DX values |
//! | [`roc`]`(p)` | `p` | — |
//! | [`ultosc`]`(a,b,c)` | `max(a,b,c)` | — |
//! | [`willr`]`(p)` | `p−1` | — |
//! | [`obv`] | `0` | OBV₀ = volume₀ |
//! | [`bbands`]`(p)` | `p−1` | — |
//!
//! Degenerate windows (no price movement at all) are where this module departs from TA-Lib on
//! purpose: TA-Lib writes 0 there (RSI 0 = "maximally oversold" for a flat price), we write the
//! indicator's neutral value (RSI 50, %R −50, Ultimate Oscillator term ½), because a flat stretch
//! (a halted stock, a quiet crypto pair at night) carries no signal. TA-Lib also treats any
//! |x| < 1e-8 as zero, which would break scale-freeness for assets priced below ~1e-6; we test
//! for exact zero. Neither case occurs in the fixture's data.
//!
//! Inputs must be finite; slices passed together must have the same length (extra trailing
//! values of the longer ones are ignored). A period below the indicator's minimum yields all
//! `NaN` rather than a panic; [`crate::features::validate`] reports such specs.

/// Simple moving average of the last `period` values. Needs `period ≥ 1`.
///
/// Each window is summed afresh rather than by a running sum, so that no rounding error drifts
/// along a 200,000-bar series.
pub fn sma(x: &[f64], period: usize) -> Vec<f64> {
    let mut out = vec![f64::NAN; x.len()];
    if period == 0 {
        return out;
    }
    for i in period.saturating_sub(1)..x.len() {
        out[i] = x[i + 1 - period..=i].iter().sum::<f64>() / period as f64;
    }
    out
}

/// Exponential moving average with α = 2/(period+1), seeded with the SMA of the first `period`
/// values (TA-Lib's default seeding). Needs `period ≥ 1`.
pub fn ema(x: &[f64], period: usize) -> Vec<f64> {
    match period {
        0 => vec![f64::NAN; x.len()],
        p => ema_seeded_at(x, p, p - 1),
    }
}

/// EMA whose first value, at bar `seed_end`, is the SMA of the `period` values ending there.
fn ema_seeded_at(x: &[f64], period: usize, seed_end: usize) -> Vec<f64> {
    let mut out = vec![f64::NAN; x.len()];
    if period == 0 || seed_end + 1 < period || seed_end >= x.len() {
        return out;
    }
    let alpha = 2.0 / (period as f64 + 1.0);
    let mut prev = x[seed_end + 1 - period..=seed_end].iter().sum::<f64>() / period as f64;
    out[seed_end] = prev;
    for i in seed_end + 1..x.len() {
        prev += alpha * (x[i] - prev);
        out[i] = prev;
    }
    out
}

/// Relative Strength Index, 0..100 (Wilder 1978, *New Concepts in Technical Trading Systems*,
/// ch. 6): RS = average gain / average loss over `period` one-bar changes, RSI = 100·RS/(1+RS)
/// = 100·gain/(gain+loss). The averages start as plain means of the first `period` changes and
/// then follow Wilder's smoothing avgₜ = (avgₜ₋₁·(p−1) + xₜ)/p. No movement at all gives 50.
/// Needs `period ≥ 1`.
pub fn rsi(close: &[f64], period: usize) -> Vec<f64> {
    let n = close.len();
    let mut out = vec![f64::NAN; n];
    if period == 0 || n <= period {
        return out;
    }
    let p = period as f64;
    let split = |i: usize| {
        let d = close[i] - close[i - 1];
        (d.max(0.0), (-d).max(0.0))
    };
    let (mut gain, mut loss) = (0.0, 0.0);
    for i in 1..=period {
        let (g, l) = split(i);
        gain += g;
        loss += l;
    }
    gain /= p;
    loss /= p;
    let value = |gain: f64, loss: f64| {
        let total = gain + loss;
        if total == 0.0 {
            50.0
        } else {
            100.0 * gain / total
        }
    };
    out[period] = value(gain, loss);
    for (i, o) in out.iter_mut().enumerate().skip(period + 1) {
        let (g, l) = split(i);
        gain = (gain * (p - 1.0) + g) / p;
        loss = (loss * (p - 1.0) + l) / p;
        *o = value(gain, loss);
    }
    out
}

/// MACD line, signal line and histogram (Appel): line = EMA_fast(close) − EMA_slow(close),
/// signal = EMA_signal(line), hist = line − signal.
#[derive(Debug, Clone, PartialEq)]
pub struct Macd {
    pub line: Vec<f64>,
    pub signal: Vec<f64>,
    pub hist: Vec<f64>,
}

/// [`Macd`] with TA-Lib's alignment: both EMAs start at bar `slow−1` (each seeded with the SMA
/// of its own period ending there), the signal EMA is seeded with the mean of the first `signal`
/// MACD values, and all three outputs start at bar `slow+signal−2` (33 for 12/26/9). A `fast`
/// longer than `slow` is swapped, as TA-Lib does. Needs periods ≥ 1.
pub fn macd(close: &[f64], fast: usize, slow: usize, signal: usize) -> Macd {
    let n = close.len();
    let nan = || vec![f64::NAN; n];
    let (fast, slow) = (fast.min(slow), fast.max(slow));
    if fast == 0 || signal == 0 || n < slow + signal - 1 {
        return Macd {
            line: nan(),
            signal: nan(),
            hist: nan(),
        };
    }
    let start = slow - 1;
    let ema_fast = ema_seeded_at(close, fast, start);
    let ema_slow = ema_seeded_at(close, slow, start);
    let mut line: Vec<f64> = ema_fast.iter().zip(&ema_slow).map(|(f, s)| f - s).collect();
    let sig = ema_seeded_at(&line, signal, start + signal - 1);
    let first = start + signal - 1;
    line[..first].fill(f64::NAN);
    let hist = line.iter().zip(&sig).map(|(l, s)| l - s).collect();
    Macd {
        line,
        signal: sig,
        hist,
    }
}

/// Commodity Channel Index (Lambert 1980, "Commodity Channel Index: Tools for Trading Cyclic
/// Trends", *Commodities*): typical price TP = (H+L+C)/3, CCI = (TP − SMA_p(TP)) /
/// (0.015 · mean |TP − SMA_p(TP)|), the mean deviation taken over the same `p` bars around the
/// current SMA. Lambert's 0.015 puts about 70–80 % of values within ±100. Zero mean deviation
/// gives 0. Needs `period ≥ 1`.
pub fn cci(high: &[f64], low: &[f64], close: &[f64], period: usize) -> Vec<f64> {
    let n = close.len().min(high.len()).min(low.len());
    let tp: Vec<f64> = (0..n)
        .map(|i| (high[i] + low[i] + close[i]) / 3.0)
        .collect();
    let mean = sma(&tp, period);
    let mut out = vec![f64::NAN; n];
    for i in period.saturating_sub(1)..n {
        if period == 0 {
            break;
        }
        let window = &tp[i + 1 - period..=i];
        let dev = window.iter().map(|v| (v - mean[i]).abs()).sum::<f64>() / period as f64;
        let diff = tp[i] - mean[i];
        out[i] = if dev == 0.0 || diff == 0.0 {
            0.0
        } else {
            diff / (0.015 * dev)
        };
    }
    out
}

/// Wilder's Directional Movement Index DX, 0..100 (Wilder 1978, ch. 4). One-bar moves:
/// up = Hₜ − Hₜ₋₁, down = Lₜ₋₁ − Lₜ; +DM = up if up > down and up > 0 else 0, −DM likewise;
/// TR = max(Hₜ − Lₜ, |Hₜ − Cₜ₋₁|, |Lₜ − Cₜ₋₁|). Each is accumulated with Wilder's running sum
/// Sₜ = Sₜ₋₁ − Sₜ₋₁/p + xₜ, started (as TA-Lib does) from the plain sum of the first `p−1` bars'
/// values; ±DI = 100·S(±DM)/S(TR) and DX = 100·|+DI − −DI| / (+DI + −DI). No directional movement
/// gives 0. Needs `period ≥ 2`.
pub fn dx(high: &[f64], low: &[f64], close: &[f64], period: usize) -> Vec<f64> {
    let n = close.len().min(high.len()).min(low.len());
    let mut out = vec![f64::NAN; n];
    if period < 2 || n <= period {
        return out;
    }
    let p = period as f64;
    let one_bar = |i: usize| {
        let up = high[i] - high[i - 1];
        let down = low[i - 1] - low[i];
        let plus = if up > 0.0 && up > down { up } else { 0.0 };
        let minus = if down > 0.0 && down > up { down } else { 0.0 };
        let tr = (high[i] - low[i])
            .max((high[i] - close[i - 1]).abs())
            .max((low[i] - close[i - 1]).abs());
        (plus, minus, tr)
    };
    let (mut s_plus, mut s_minus, mut s_tr) = (0.0, 0.0, 0.0);
    for i in 1..period {
        let (plus, minus, tr) = one_bar(i);
        s_plus += plus;
        s_minus += minus;
        s_tr += tr;
    }
    for (i, o) in out.iter_mut().enumerate().skip(period) {
        let (plus, minus, tr) = one_bar(i);
        s_plus += plus - s_plus / p;
        s_minus += minus - s_minus / p;
        s_tr += tr - s_tr / p;
        // The 100·S/S(TR) scalings of ±DI cancel in the ratio; only S(TR) = 0 needs guarding.
        let sum = s_plus + s_minus;
        *o = if s_tr == 0.0 || sum == 0.0 {
            0.0
        } else {
            100.0 * (s_plus - s_minus).abs() / sum
        };
    }
    out
}

/// Wilder's Average Directional Index, 0..100 (Wilder 1978, ch. 4): the first value is the mean
/// of the first `p` [`dx`] values, then ADXₜ = (ADXₜ₋₁·(p−1) + DXₜ)/p. Needs `period ≥ 2`.
pub fn adx(high: &[f64], low: &[f64], close: &[f64], period: usize) -> Vec<f64> {
    let d = dx(high, low, close, period);
    let mut out = vec![f64::NAN; d.len()];
    if period < 2 || d.len() < 2 * period {
        return out;
    }
    let p = period as f64;
    let first = 2 * period - 1;
    let mut prev = d[period..=first].iter().sum::<f64>() / p;
    out[first] = prev;
    for i in first + 1..d.len() {
        prev = (prev * (p - 1.0) + d[i]) / p;
        out[i] = prev;
    }
    out
}

/// Rate of change in percent: 100·(Cₜ/Cₜ₋ₚ − 1). Needs `period ≥ 1` and positive prices.
pub fn roc(close: &[f64], period: usize) -> Vec<f64> {
    let mut out = vec![f64::NAN; close.len()];
    if period == 0 {
        return out;
    }
    for i in period..close.len() {
        out[i] = 100.0 * (close[i] / close[i - period] - 1.0);
    }
    out
}

/// Ultimate Oscillator, 0..100 (Williams 1985, "The Ultimate Oscillator", *Technical Analysis of
/// Stocks & Commodities* 3:4). Buying pressure BP = Cₜ − min(Lₜ, Cₜ₋₁), true range
/// TR = max(Hₜ, Cₜ₋₁) − min(Lₜ, Cₜ₋₁); Aₖ = ΣBP/ΣTR over the last k bars for the three periods
/// sorted short→long; UO = 100·(4A₁ + 2A₂ + A₃)/7. A window with no range counts as ½. Needs
/// periods ≥ 1.
pub fn ultosc(high: &[f64], low: &[f64], close: &[f64], periods: [usize; 3]) -> Vec<f64> {
    let n = close.len().min(high.len()).min(low.len());
    let mut out = vec![f64::NAN; n];
    let mut sorted = periods;
    sorted.sort_unstable();
    if sorted[0] == 0 {
        return out;
    }
    let longest = sorted[2];
    let mut bp = vec![0.0; n];
    let mut tr = vec![0.0; n];
    for i in 1..n {
        let true_low = low[i].min(close[i - 1]);
        bp[i] = close[i] - true_low;
        tr[i] = high[i].max(close[i - 1]) - true_low;
    }
    let average = |i: usize, k: usize| {
        let b: f64 = bp[i + 1 - k..=i].iter().sum();
        let t: f64 = tr[i + 1 - k..=i].iter().sum();
        if t == 0.0 { 0.5 } else { b / t }
    };
    for (i, o) in out.iter_mut().enumerate().skip(longest) {
        let weighted =
            4.0 * average(i, sorted[0]) + 2.0 * average(i, sorted[1]) + average(i, sorted[2]);
        *o = 100.0 * weighted / 7.0;
    }
    out
}

/// Williams %R, −100..0 (Williams 1973, *How I Made One Million Dollars Last Year Trading
/// Commodities*): −100·(HH − C)/(HH − LL) with HH, LL the highest high and lowest low of the last
/// `period` bars including the current one. A window with no range gives −50. Needs
/// `period ≥ 1`.
pub fn willr(high: &[f64], low: &[f64], close: &[f64], period: usize) -> Vec<f64> {
    let n = close.len().min(high.len()).min(low.len());
    let mut out = vec![f64::NAN; n];
    if period == 0 {
        return out;
    }
    for i in period - 1..n {
        let window = i + 1 - period..=i;
        let hh = high[window.clone()]
            .iter()
            .copied()
            .fold(f64::MIN, f64::max);
        let ll = low[window].iter().copied().fold(f64::MAX, f64::min);
        let range = hh - ll;
        out[i] = if range == 0.0 {
            -50.0
        } else {
            -100.0 * (hh - close[i]) / range
        };
    }
    out
}

/// On-Balance Volume (Granville 1963, *Granville's New Key to Stock Market Profits*): OBV₀ =
/// V₀, then OBVₜ = OBVₜ₋₁ ± Vₜ as the close rises or falls (unchanged on an equal close). Its
/// level depends on where the series starts; features use its change (see
/// [`crate::features::FeatureSpec::Obv`]).
pub fn obv(close: &[f64], volume: &[f64]) -> Vec<f64> {
    let n = close.len().min(volume.len());
    let mut out = Vec::with_capacity(n);
    let mut level = 0.0;
    for i in 0..n {
        level = if i == 0 {
            volume[0]
        } else if close[i] > close[i - 1] {
            level + volume[i]
        } else if close[i] < close[i - 1] {
            level - volume[i]
        } else {
            level
        };
        out.push(level);
    }
    out
}

/// Bollinger Bands (Bollinger 2001, *Bollinger on Bollinger Bands*): middle = SMA_p(close),
/// upper/lower = middle ± k·σ with σ the population standard deviation of the same `p` closes
/// (Bollinger divides by p, not p−1, and so does TA-Lib).
#[derive(Debug, Clone, PartialEq)]
pub struct Bollinger {
    pub upper: Vec<f64>,
    pub middle: Vec<f64>,
    pub lower: Vec<f64>,
}

/// [`Bollinger`] bands with `k_up`/`k_down` standard deviations. Needs `period ≥ 1`.
pub fn bbands(close: &[f64], period: usize, k_up: f64, k_down: f64) -> Bollinger {
    let middle = sma(close, period);
    let sd = stddev(close, &middle, period);
    Bollinger {
        upper: middle.iter().zip(&sd).map(|(m, s)| m + k_up * s).collect(),
        lower: middle
            .iter()
            .zip(&sd)
            .map(|(m, s)| m - k_down * s)
            .collect(),
        middle,
    }
}

/// Population standard deviation of the last `period` values around their precomputed mean
/// (two passes per window: exact even when σ is tiny relative to the price level).
fn stddev(x: &[f64], mean: &[f64], period: usize) -> Vec<f64> {
    let mut out = vec![f64::NAN; x.len()];
    if period == 0 {
        return out;
    }
    for i in period - 1..x.len() {
        let var = x[i + 1 - period..=i]
            .iter()
            .map(|v| (v - mean[i]).powi(2))
            .sum::<f64>()
            / period as f64;
        out[i] = var.sqrt();
    }
    out
}

#[cfg(test)]
#[path = "reference_tests.rs"]
pub(crate) mod reference_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flat_prices_give_neutral_values() {
        let c = vec![10.0; 60];
        assert_eq!(rsi(&c, 14)[20], 50.0);
        assert_eq!(willr(&c, &c, &c, 14)[20], -50.0);
        assert_eq!(cci(&c, &c, &c, 20)[30], 0.0);
        assert_eq!(dx(&c, &c, &c, 14)[30], 0.0);
        assert_eq!(adx(&c, &c, &c, 14)[40], 0.0);
        assert_eq!(ultosc(&c, &c, &c, [7, 14, 28])[40], 50.0);
        let bb = bbands(&c, 20, 2.0, 2.0);
        assert_eq!((bb.upper[30], bb.lower[30]), (10.0, 10.0));
    }

    #[test]
    fn warm_up_lengths_follow_the_table() {
        let n = 80;
        let c: Vec<f64> = (0..n).map(|i| 100.0 + (i as f64 * 0.7).sin()).collect();
        let h: Vec<f64> = c.iter().map(|v| v + 0.5).collect();
        let l: Vec<f64> = c.iter().map(|v| v - 0.5).collect();
        let first = |v: &[f64]| v.iter().position(|x| !x.is_nan()).unwrap();
        assert_eq!(first(&sma(&c, 30)), 29);
        assert_eq!(first(&ema(&c, 20)), 19);
        assert_eq!(first(&rsi(&c, 14)), 14);
        assert_eq!(first(&macd(&c, 12, 26, 9).hist), 33);
        assert_eq!(first(&cci(&h, &l, &c, 20)), 19);
        assert_eq!(first(&dx(&h, &l, &c, 14)), 14);
        assert_eq!(first(&adx(&h, &l, &c, 14)), 27);
        assert_eq!(first(&roc(&c, 10)), 10);
        assert_eq!(first(&ultosc(&h, &l, &c, [7, 14, 28])), 28);
        assert_eq!(first(&willr(&h, &l, &c, 14)), 13);
        assert_eq!(first(&bbands(&c, 20, 2.0, 2.0).lower), 19);
    }

    #[test]
    fn invalid_periods_and_short_inputs_give_nan_not_panics() {
        let c = vec![1.0, 2.0, 3.0];
        assert!(sma(&c, 0).iter().all(|v| v.is_nan()));
        assert!(ema(&c, 0).iter().all(|v| v.is_nan()));
        assert!(rsi(&c, 0).iter().all(|v| v.is_nan()));
        assert!(rsi(&c, 5).iter().all(|v| v.is_nan()));
        assert!(macd(&c, 12, 26, 9).line.iter().all(|v| v.is_nan()));
        assert!(macd(&c, 0, 2, 1).line.iter().all(|v| v.is_nan()));
        assert!(cci(&c, &c, &c, 0).iter().all(|v| v.is_nan()));
        assert!(dx(&c, &c, &c, 1).iter().all(|v| v.is_nan()));
        assert!(adx(&c, &c, &c, 14).iter().all(|v| v.is_nan()));
        assert!(roc(&c, 0).iter().all(|v| v.is_nan()));
        assert!(ultosc(&c, &c, &c, [0, 1, 2]).iter().all(|v| v.is_nan()));
        assert!(willr(&c, &c, &c, 0).iter().all(|v| v.is_nan()));
        assert!(bbands(&c, 0, 2.0, 2.0).middle.iter().all(|v| v.is_nan()));
        assert!(sma(&[], 3).is_empty() && obv(&[], &[]).is_empty());
    }

    #[test]
    fn macd_swaps_fast_and_slow_like_ta_lib() {
        // NaN-aware exact equality of two series.
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        let c: Vec<f64> = (0..60)
            .map(|i| 50.0 + (i as f64 * 0.3).cos() * 3.0)
            .collect();
        let (a, b) = (macd(&c, 26, 12, 9), macd(&c, 12, 26, 9));
        assert_eq!(bits(&a.line), bits(&b.line));
        assert_eq!(bits(&a.signal), bits(&b.signal));
        assert_eq!(bits(&a.hist), bits(&b.hist));
        let (h, l): (Vec<f64>, Vec<f64>) = c.iter().map(|v| (v + 1.0, v - 1.0)).unzip();
        assert_eq!(
            bits(&ultosc(&h, &l, &c, [28, 7, 14])),
            bits(&ultosc(&h, &l, &c, [7, 14, 28]))
        );
    }

    #[test]
    fn hand_computed_values() {
        // RSI(2) on 1,2,1,3: first averages gain (1+0)/2, loss (0+1)/2 → 50; next change +2:
        // gain (0.5+2)/2 = 1.25, loss 0.5/2 = 0.25 → 100·1.25/1.5.
        let r = rsi(&[1.0, 2.0, 1.0, 3.0], 2);
        assert_eq!(r[2], 50.0);
        assert!((r[3] - 100.0 * 1.25 / 1.5).abs() < 1e-12);
        // OBV: up, down, flat.
        assert_eq!(
            obv(&[1.0, 2.0, 1.5, 1.5], &[10.0, 3.0, 4.0, 5.0]),
            vec![10.0, 13.0, 9.0, 9.0]
        );
        // %R at the low of the window is −100, at the high 0.
        let w = willr(&[2.0, 3.0, 4.0], &[1.0, 1.0, 1.0], &[1.5, 2.0, 1.0], 3);
        assert_eq!(w[2], -100.0);
        // EMA(3): seed mean(1,2,3)=2, then 2 + 0.5·(6−2) = 4.
        let e = ema(&[1.0, 2.0, 3.0, 6.0], 3);
        assert!(e[0].is_nan() && e[1].is_nan());
        assert_eq!((e[2], e[3]), (2.0, 4.0));
    }
}
