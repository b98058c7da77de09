//! Technical features computed once per asset from its own bars.
//!
//! Causal: the value at bar t uses bars `..=t` only (a test changes future bars and checks that
//! no earlier value moves). Each feature is a scale-free transform of a raw indicator from
//! [`indicators`] (which are checked against TA-Lib), so that assets priced at $4 and at $400,
//! or the same asset before and after a split, give comparable inputs to the policy. The
//! per-asset standardisation that follows is [`crate::scaling::FeatureScaler`]'s job.

pub mod indicators;

use ndarray::Array2;
use serde::{Deserialize, Serialize};

use crate::AssetBars;

/// One feature (or a small family of columns) to compute for every asset.
///
/// Serialised as a tagged table, e.g. `{ kind = "rsi", period = 14 }` in TOML. Column names are
/// given with each variant. Periods below a variant's minimum are reported by [`validate`];
/// [`compute`] raises them to the minimum rather than failing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FeatureSpec {
    /// `ret_{period}` = Cₜ/Cₜ₋ₚ − 1 (a fraction, not percent). Minimum period 1.
    Return { period: usize },
    /// `log_volume` = ln(1 + Vₜ). Not scale-free across assets, but the per-asset scaler
    /// standardises it; defined from bar 0.
    LogVolume,
    /// `rsi_{period}` = (RSI − 50)/50 ∈ [−1, 1], RSI from [`indicators::rsi`] (Wilder 1978).
    /// Minimum period 1.
    Rsi { period: usize },
    /// `macd_{f}_{s}_{g}`, `macd_signal_{f}_{s}_{g}`, `macd_hist_{f}_{s}_{g}` = MACD line,
    /// signal and histogram from [`indicators::macd`] divided by Cₜ (the raw values are in price
    /// units). Requires fast < slow; minimum periods 1.
    Macd {
        fast: usize,
        slow: usize,
        signal: usize,
    },
    /// `cci_{period}` = CCI/100, CCI from [`indicators::cci`] (Lambert 1980); already scale-free,
    /// the division brings Lambert's ±100 bands to ±1. Minimum period 2.
    Cci { period: usize },
    /// `dx_{period}` = DX/100 ∈ [0, 1], from [`indicators::dx`] (Wilder 1978). Minimum period 2.
    Dx { period: usize },
    /// `adx_{period}` = ADX/100 ∈ [0, 1], from [`indicators::adx`] (Wilder 1978). Minimum period 2.
    Adx { period: usize },
    /// `roc_{period}` = ROC/100 = Cₜ/Cₜ₋ₚ − 1, from [`indicators::roc`]. Minimum period 1.
    Roc { period: usize },
    /// `ultosc_{short}_{medium}_{long}` = (UO − 50)/50 ∈ [−1, 1], UO from [`indicators::ultosc`]
    /// (Williams 1985). Minimum periods 1.
    UltOsc {
        short: usize,
        medium: usize,
        long: usize,
    },
    /// `willr_{period}` = (%R + 50)/50 ∈ [−1, 1] (−1 at the window's low, +1 at its high), %R from
    /// [`indicators::willr`] (Williams 1973). Minimum period 1.
    WilliamsR { period: usize },
    /// `obv_{period}` = (OBVₜ − OBVₜ₋ₚ) / Σ_{j=t−p+1..t} Vⱼ ∈ [−1, 1]: the net signed volume of
    /// the last `period` bars as a fraction of all volume traded in them (0 when none traded),
    /// from [`indicators::obv`] (Granville 1963). Unlike the OBV level, it does not depend on
    /// where the series starts nor on the asset's typical volume. Minimum period 1.
    Obv { period: usize },
    /// `bb_pos_{period}` = %b − ½ with Bollinger's %b = (Cₜ − lower)/(upper − lower) (0 when the
    /// bands have no width), and `bb_width_{period}` = (upper − lower)/middle, Bollinger's
    /// BandWidth; bands from [`indicators::bbands`] with `k` standard deviations (Bollinger 2001).
    /// Minimum period 2, `k` > 0.
    Bollinger { period: usize, k: f64 },
    /// `sma_ratio_{period}` = Cₜ / SMA_p(C)ₜ − 1, from [`indicators::sma`]. Minimum period 1.
    SmaRatio { period: usize },
}

/// The default feature list (18 columns; the longest warm-up is the 50-bar SMA ratio, 49 bars).
/// Periods are the indicators' customary ones: Wilder's 14 for RSI/DX/ADX, Appel's 12/26/9 for
/// MACD, Lambert's 20 for CCI, Williams' 7/14/28 for the Ultimate Oscillator, Bollinger's 20/2.
pub fn default_features() -> Vec<FeatureSpec> {
    use FeatureSpec::*;
    vec![
        Return { period: 1 },
        Return { period: 5 },
        LogVolume,
        Rsi { period: 14 },
        Macd {
            fast: 12,
            slow: 26,
            signal: 9,
        },
        Cci { period: 20 },
        Dx { period: 14 },
        Adx { period: 14 },
        Roc { period: 10 },
        UltOsc {
            short: 7,
            medium: 14,
            long: 28,
        },
        WilliamsR { period: 14 },
        Obv { period: 20 },
        Bollinger { period: 20, k: 2.0 },
        SmaRatio { period: 20 },
        SmaRatio { period: 50 },
    ]
}

/// A feature spec that cannot be computed as written.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("feature {index} ({spec:?}): {problem}")]
pub struct FeatureError {
    /// Position of the spec in the list (0-based).
    pub index: usize,
    pub spec: FeatureSpec,
    /// What is wrong and how to fix it.
    pub problem: String,
}

/// Checks every spec's parameters and that no two specs produce the same column name.
pub fn validate(specs: &[FeatureSpec]) -> Result<(), FeatureError> {
    let mut seen = std::collections::HashSet::new();
    for (index, spec) in specs.iter().enumerate() {
        let err = |problem: String| FeatureError {
            index,
            spec: spec.clone(),
            problem,
        };
        for (field, value, min) in spec.periods() {
            if value < min {
                return Err(err(format!(
                    "{field} is {value}; it must be at least {min}"
                )));
            }
        }
        match spec {
            FeatureSpec::Macd { fast, slow, .. } if fast >= slow => {
                return Err(err(format!(
                    "fast ({fast}) must be shorter than slow ({slow}), e.g. 12 and 26"
                )));
            }
            FeatureSpec::Bollinger { k, .. } if !(k.is_finite() && *k > 0.0) => {
                return Err(err(format!(
                    "k is {k}; it must be a positive number, e.g. 2"
                )));
            }
            _ => {}
        }
        for name in spec.column_names() {
            if !seen.insert(name.clone()) {
                return Err(err(format!(
                    "column {name} is already produced by an earlier feature"
                )));
            }
        }
    }
    Ok(())
}

impl FeatureSpec {
    /// (field name, value, minimum) of each period parameter.
    fn periods(&self) -> Vec<(&'static str, usize, usize)> {
        use FeatureSpec::*;
        match *self {
            LogVolume => vec![],
            Return { period } | Rsi { period } | Roc { period } | WilliamsR { period } => {
                vec![("period", period, 1)]
            }
            Obv { period } | SmaRatio { period } => vec![("period", period, 1)],
            Cci { period } | Dx { period } | Adx { period } | Bollinger { period, .. } => {
                vec![("period", period, 2)]
            }
            Macd { fast, slow, signal } => {
                vec![("fast", fast, 1), ("slow", slow, 1), ("signal", signal, 1)]
            }
            UltOsc {
                short,
                medium,
                long,
            } => vec![
                ("short", short, 1),
                ("medium", medium, 1),
                ("long", long, 1),
            ],
        }
    }

    /// The spec with every period raised to its minimum, as [`compute`] uses it.
    fn clamped(&self) -> FeatureSpec {
        use FeatureSpec::*;
        let at_least = |v: usize, m: usize| v.max(m);
        match self.clone() {
            LogVolume => LogVolume,
            Return { period } => Return {
                period: at_least(period, 1),
            },
            Rsi { period } => Rsi {
                period: at_least(period, 1),
            },
            Roc { period } => Roc {
                period: at_least(period, 1),
            },
            WilliamsR { period } => WilliamsR {
                period: at_least(period, 1),
            },
            Obv { period } => Obv {
                period: at_least(period, 1),
            },
            SmaRatio { period } => SmaRatio {
                period: at_least(period, 1),
            },
            Cci { period } => Cci {
                period: at_least(period, 2),
            },
            Dx { period } => Dx {
                period: at_least(period, 2),
            },
            Adx { period } => Adx {
                period: at_least(period, 2),
            },
            Bollinger { period, k } => Bollinger {
                period: at_least(period, 2),
                k,
            },
            Macd { fast, slow, signal } => Macd {
                fast: at_least(fast, 1),
                slow: at_least(slow, 1),
                signal: at_least(signal, 1),
            },
            UltOsc {
                short,
                medium,
                long,
            } => UltOsc {
                short: at_least(short, 1),
                medium: at_least(medium, 1),
                long: at_least(long, 1),
            },
        }
    }

    /// The names of the columns this spec produces (after raising periods to their minimum).
    pub fn column_names(&self) -> Vec<String> {
        use FeatureSpec::*;
        match self.clamped() {
            Return { period } => vec![format!("ret_{period}")],
            LogVolume => vec!["log_volume".into()],
            Rsi { period } => vec![format!("rsi_{period}")],
            Macd { fast, slow, signal } => {
                let p = format!("{fast}_{slow}_{signal}");
                vec![
                    format!("macd_{p}"),
                    format!("macd_signal_{p}"),
                    format!("macd_hist_{p}"),
                ]
            }
            Cci { period } => vec![format!("cci_{period}")],
            Dx { period } => vec![format!("dx_{period}")],
            Adx { period } => vec![format!("adx_{period}")],
            Roc { period } => vec![format!("roc_{period}")],
            UltOsc {
                short,
                medium,
                long,
            } => vec![format!("ultosc_{short}_{medium}_{long}")],
            WilliamsR { period } => vec![format!("willr_{period}")],
            Obv { period } => vec![format!("obv_{period}")],
            Bollinger { period, .. } => {
                vec![format!("bb_pos_{period}"), format!("bb_width_{period}")]
            }
            SmaRatio { period } => vec![format!("sma_ratio_{period}")],
        }
    }

    /// The first bar at which every column of this spec is defined (the raw indicators' warm-up
    /// table in [`indicators`]).
    pub fn warmup(&self) -> usize {
        use FeatureSpec::*;
        match self.clamped() {
            LogVolume => 0,
            Return { period }
            | Rsi { period }
            | Roc { period }
            | Obv { period }
            | Dx { period } => period,
            Cci { period }
            | WilliamsR { period }
            | SmaRatio { period }
            | Bollinger { period, .. } => period - 1,
            Adx { period } => 2 * period - 1,
            Macd { fast, slow, signal } => fast.max(slow) + signal - 2,
            UltOsc {
                short,
                medium,
                long,
            } => short.max(medium).max(long),
        }
    }

    /// The columns of this spec for one asset's bars, in [`Self::column_names`] order.
    fn columns(&self, bars: &AssetBars) -> Vec<Vec<f64>> {
        use FeatureSpec::*;
        let (h, l, c, v) = (&bars.high, &bars.low, &bars.close, &bars.volume);
        // `x / close` per bar, for indicators in price units.
        let per_close = |x: &[f64]| x.iter().zip(c).map(|(x, c)| x / c).collect::<Vec<f64>>();
        let affine = |x: Vec<f64>, shift: f64, div: f64| -> Vec<f64> {
            x.into_iter().map(|x| (x + shift) / div).collect()
        };
        match self.clamped() {
            Return { period } => vec![affine(indicators::roc(c, period), 0.0, 100.0)],
            LogVolume => vec![v.iter().map(|v| v.max(0.0).ln_1p()).collect()],
            Rsi { period } => vec![affine(indicators::rsi(c, period), -50.0, 50.0)],
            Macd { fast, slow, signal } => {
                let m = indicators::macd(c, fast, slow, signal);
                vec![per_close(&m.line), per_close(&m.signal), per_close(&m.hist)]
            }
            Cci { period } => vec![affine(indicators::cci(h, l, c, period), 0.0, 100.0)],
            Dx { period } => vec![affine(indicators::dx(h, l, c, period), 0.0, 100.0)],
            Adx { period } => vec![affine(indicators::adx(h, l, c, period), 0.0, 100.0)],
            Roc { period } => vec![affine(indicators::roc(c, period), 0.0, 100.0)],
            UltOsc {
                short,
                medium,
                long,
            } => vec![affine(
                indicators::ultosc(h, l, c, [short, medium, long]),
                -50.0,
                50.0,
            )],
            WilliamsR { period } => vec![affine(indicators::willr(h, l, c, period), 50.0, 50.0)],
            Obv { period } => vec![obv_flow(c, v, period)],
            Bollinger { period, k } => {
                let b = indicators::bbands(c, period, k, k);
                let pos = (0..c.len())
                    .map(|i| {
                        let width = b.upper[i] - b.lower[i];
                        if width == 0.0 {
                            0.0
                        } else {
                            (c[i] - b.lower[i]) / width - 0.5
                        }
                    })
                    .collect();
                let bandwidth = (0..c.len())
                    .map(|i| (b.upper[i] - b.lower[i]) / b.middle[i])
                    .collect();
                vec![pos, bandwidth]
            }
            SmaRatio { period } => {
                let s = indicators::sma(c, period);
                vec![c.iter().zip(&s).map(|(c, s)| c / s - 1.0).collect()]
            }
        }
    }
}

/// (OBVₜ − OBVₜ₋ₚ) / Σ_{j=t−p+1..t} Vⱼ; 0 when no volume traded in the window.
fn obv_flow(close: &[f64], volume: &[f64], period: usize) -> Vec<f64> {
    let level = indicators::obv(close, volume);
    let mut out = vec![f64::NAN; level.len()];
    for i in period..level.len() {
        let traded: f64 = volume[i + 1 - period..=i].iter().sum();
        out[i] = if traded == 0.0 {
            0.0
        } else {
            (level[i] - level[i - period]) / traded
        };
    }
    out
}

/// Features of one asset: `values` is T×F with NaN in the warm-up rows.
#[derive(Debug, Clone)]
pub struct FeatureMatrix {
    /// Column names (e.g. `ret_1`, `log_volume`).
    pub names: Vec<String>,
    /// T×F values; rows before `warmup` may be NaN.
    pub values: Array2<f64>,
    /// First row at which every column is defined.
    pub warmup: usize,
}

/// Computes `specs` for one asset. Bars must be finite with positive prices (the readers
/// guarantee it); then every value from row `warmup` on is finite. Call [`validate`] first to
/// report bad specs to the user; here, periods below their minimum are raised to it and MACD's
/// and the Ultimate Oscillator's periods are put in order, as TA-Lib does.
pub fn compute(bars: &AssetBars, specs: &[FeatureSpec]) -> FeatureMatrix {
    let t = bars.len();
    let mut names = Vec::new();
    let mut cols: Vec<Vec<f64>> = Vec::new();
    let mut warmup = 0;
    for spec in specs {
        names.extend(spec.column_names());
        cols.extend(spec.columns(bars));
        warmup = warmup.max(spec.warmup());
    }
    let mut values = Array2::from_elem((t, cols.len()), f64::NAN);
    for (j, c) in cols.iter().enumerate() {
        for (i, v) in c.iter().take(t).enumerate() {
            values[[i, j]] = *v;
        }
    }
    FeatureMatrix {
        names,
        values,
        warmup: warmup.min(t),
    }
}

#[cfg(test)]
mod tests;
