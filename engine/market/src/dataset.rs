//! The [`Dataset`] the environments trade on: aligned prices and scaled features as contiguous
//! `f32` arrays.

use ndarray::{Array2, Array3};

use crate::scaling::FeatureScaler;

/// Aligned market data for M assets over T bars.
///
/// - `prices[[t, m]]` is the (split-adjusted) close of asset `m` at bar `t`: the price trades
///   execute at.
/// - `features[[t, m, f]]` is feature `f` of asset `m` computed from bars `..=t` only (no
///   look-ahead), already scaled by [`crate::scaling::FeatureScaler`] fitted on the
///   training split. Warm-up bars, where an indicator is not yet defined, are dropped before the
///   dataset is built, so every value is finite.
///
/// Both arrays are in standard (row-major, contiguous) layout.
#[derive(Debug, Clone)]
pub struct Dataset {
    /// Asset names, in column order.
    pub names: Vec<String>,
    /// Unix seconds (UTC) of each bar, strictly increasing.
    pub timestamps: Vec<i64>,
    /// T×M trade prices.
    pub prices: Array2<f32>,
    /// T×M×F scaled features.
    pub features: Array3<f32>,
    /// Names of the F features, in order.
    pub feature_names: Vec<String>,
    /// The scaling applied to `features`, fitted on the training split (None when the features
    /// were given already scaled).
    pub scaler: Option<FeatureScaler>,
}

impl Dataset {
    /// A fingerprint of the market data: 64-bit FNV-1a over the asset names, the bar times and
    /// every price and scaled feature's bits, with the shape in front (`8x2048x4x7:9f3a…`).
    /// Two machines working on one study compare it, so a worker with other data (another
    /// file, another date range, another scaling) refuses to join instead of mixing results.
    pub fn fingerprint(&self) -> String {
        const PRIME: u64 = 0x0100_0000_01b3;
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let mut eat = |bytes: &[u8]| {
            for b in bytes {
                h ^= u64::from(*b);
                h = h.wrapping_mul(PRIME);
            }
        };
        for n in self.names.iter().chain(&self.feature_names) {
            eat(n.as_bytes());
            eat(&[0]);
        }
        for t in &self.timestamps {
            eat(&t.to_le_bytes());
        }
        for p in self.prices.iter().chain(self.features.iter()) {
            eat(&p.to_bits().to_le_bytes());
        }
        let (t, m, f) = self.features.dim();
        format!("{t}x{m}x{f}:{h:016x}")
    }

    /// Builds a dataset from arrays that are already aligned and scaled, checking shapes and
    /// values. Used by the readers' pipeline, the synthetic generator and tests.
    pub fn from_arrays(
        names: Vec<String>,
        timestamps: Vec<i64>,
        prices: Array2<f32>,
        features: Array3<f32>,
        feature_names: Vec<String>,
    ) -> Result<Self, crate::DataError> {
        use crate::DataError;
        let (t, m) = prices.dim();
        let (ft, fm, ff) = features.dim();
        let shape_err = |what: String| DataError::Shape { what };
        if names.len() != m {
            return Err(shape_err(format!(
                "{} names for {} price columns",
                names.len(),
                m
            )));
        }
        if timestamps.len() != t || ft != t || fm != m {
            return Err(shape_err(format!(
                "timestamps {}, prices {t}x{m}, features {ft}x{fm}x{ff} do not agree",
                timestamps.len()
            )));
        }
        if feature_names.len() != ff {
            return Err(shape_err(format!(
                "{} feature names for {ff} features",
                feature_names.len()
            )));
        }
        if let Some(i) = timestamps.windows(2).position(|w| w[1] <= w[0]) {
            return Err(shape_err(format!(
                "timestamps not strictly increasing at bar {}",
                i + 1
            )));
        }
        if let Some(((ti, mi), p)) = prices
            .indexed_iter()
            .find(|(_, p)| !p.is_finite() || **p <= 0.0)
        {
            return Err(shape_err(format!(
                "price of {} at bar {ti} is {p}: prices must be finite and positive",
                names[mi]
            )));
        }
        if let Some(((ti, mi, fi), v)) = features.indexed_iter().find(|(_, v)| !v.is_finite()) {
            return Err(shape_err(format!(
                "feature {} of {} at bar {ti} is {v}",
                feature_names[fi], names[mi]
            )));
        }
        Ok(Self {
            names,
            timestamps,
            prices: prices.as_standard_layout().into_owned(),
            features: features.as_standard_layout().into_owned(),
            feature_names,
            scaler: None,
        })
    }

    /// The bars of `ranges` (increasing and disjoint), joined in order, with the same assets,
    /// features and scaler: a cross-validation fold's training bars. Ranges past the end are
    /// cut at the last bar.
    pub fn select(&self, ranges: &[std::ops::Range<usize>]) -> Dataset {
        let n = self.n_bars();
        let rows: Vec<usize> = ranges
            .iter()
            .flat_map(|r| r.start.min(n)..r.end.min(n))
            .collect();
        Dataset {
            names: self.names.clone(),
            timestamps: rows.iter().map(|&i| self.timestamps[i]).collect(),
            prices: self
                .prices
                .select(ndarray::Axis(0), &rows)
                .as_standard_layout()
                .into_owned(),
            features: self
                .features
                .select(ndarray::Axis(0), &rows)
                .as_standard_layout()
                .into_owned(),
            feature_names: self.feature_names.clone(),
            scaler: self.scaler.clone(),
        }
    }

    /// Number of bars T.
    pub fn n_bars(&self) -> usize {
        self.prices.nrows()
    }

    /// Number of assets M.
    pub fn n_assets(&self) -> usize {
        self.prices.ncols()
    }

    /// Number of features per asset F.
    pub fn n_features(&self) -> usize {
        self.features.dim().2
    }

    /// The median spacing between bars in seconds (86,400 for daily bars, 300 for 5-minute bars).
    pub fn bar_seconds(&self) -> i64 {
        median_spacing(&self.timestamps)
    }
}

/// Median difference between consecutive timestamps; 0 for fewer than two.
pub fn median_spacing(timestamps: &[i64]) -> i64 {
    if timestamps.len() < 2 {
        return 0;
    }
    let mut d: Vec<i64> = timestamps.windows(2).map(|w| w[1] - w[0]).collect();
    let mid = d.len() / 2;
    *d.select_nth_unstable(mid).1
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{Array2, Array3};

    #[test]
    fn from_arrays_checks_shapes_and_values() {
        let ok = Dataset::from_arrays(
            vec!["A".into(), "B".into()],
            vec![0, 60, 120],
            Array2::from_elem((3, 2), 10.0),
            Array3::zeros((3, 2, 1)),
            vec!["ret".into()],
        )
        .unwrap();
        assert_eq!(ok.bar_seconds(), 60);
        let bad = Dataset::from_arrays(
            vec!["A".into()],
            vec![0, 60, 120],
            Array2::from_elem((3, 2), 10.0),
            Array3::zeros((3, 2, 1)),
            vec!["ret".into()],
        );
        assert!(bad.is_err());
        let mut p = Array2::from_elem((3, 1), 10.0);
        p[[1, 0]] = 0.0;
        let err = Dataset::from_arrays(
            vec!["A".into()],
            vec![0, 60, 120],
            p,
            Array3::zeros((3, 1, 1)),
            vec!["ret".into()],
        )
        .unwrap_err();
        assert!(err.to_string().contains("bar 1"), "{err}");
    }

    #[test]
    fn select_joins_the_bars_of_its_ranges_in_order() {
        let prices = Array2::from_shape_fn((6, 2), |(t, m)| (10 * t + m + 1) as f32);
        let features = Array3::from_shape_fn((6, 2, 1), |(t, m, _)| (t * 2 + m) as f32);
        let d = Dataset::from_arrays(
            vec!["A".into(), "B".into()],
            (0..6).map(|t| t * 60).collect(),
            prices,
            features,
            vec!["f".into()],
        )
        .unwrap();
        let s = d.select(&[0..2, 4..9]);
        assert_eq!(s.timestamps, [0, 60, 240, 300]);
        assert_eq!(s.prices[[2, 1]], 42.0);
        assert_eq!(s.features[[3, 0, 0]], 10.0);
        assert_eq!((s.n_bars(), s.n_assets(), s.n_features()), (4, 2, 1));
    }
}
