//! Technical features computed once per asset from its own bars (no look-ahead: the value at
//! bar t uses bars `..=t` only).

use ndarray::Array2;
use serde::{Deserialize, Serialize};

use crate::market::AssetBars;

/// One feature (or a small family of columns) to compute for every asset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FeatureSpec {
    /// close_t / close_{t-period} − 1.
    Return { period: usize },
    /// ln(1 + volume).
    LogVolume,
}

/// The default feature list.
pub fn default_features() -> Vec<FeatureSpec> {
    vec![FeatureSpec::Return { period: 1 }, FeatureSpec::LogVolume]
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

/// Computes `specs` for one asset.
pub fn compute(bars: &AssetBars, specs: &[FeatureSpec]) -> FeatureMatrix {
    let t = bars.len();
    let mut names = Vec::new();
    let mut cols: Vec<Vec<f64>> = Vec::new();
    let mut warmup = 0;
    for spec in specs {
        match spec {
            FeatureSpec::Return { period } => {
                let p = (*period).max(1);
                names.push(format!("ret_{p}"));
                cols.push(
                    (0..t)
                        .map(|i| {
                            if i >= p {
                                bars.close[i] / bars.close[i - p] - 1.0
                            } else {
                                f64::NAN
                            }
                        })
                        .collect(),
                );
                warmup = warmup.max(p);
            }
            FeatureSpec::LogVolume => {
                names.push("log_volume".into());
                cols.push(bars.volume.iter().map(|v| v.max(0.0).ln_1p()).collect());
            }
        }
    }
    let mut values = Array2::from_elem((t, cols.len()), f64::NAN);
    for (j, c) in cols.iter().enumerate() {
        for (i, v) in c.iter().enumerate() {
            values[[i, j]] = *v;
        }
    }
    FeatureMatrix {
        names,
        values,
        warmup: warmup.min(t),
    }
}
