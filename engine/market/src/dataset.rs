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
    ///
    /// Where two ranges do not touch (a CPCV fold's training blocks on either side of its test
    /// groups), the env would step from the last bar of one block straight to the first bar of
    /// the next, and that one step's reward would be the price move over the whole gap: the
    /// test period's return, leaked into training. So each later block's prices are rescaled,
    /// per asset, by the ratio at the joint: the first bar of the block gets the last price of
    /// the block before it, and the step across the joint has a zero return. Returns within each
    /// block are unchanged (up to `f32` rounding), and the features are kept as computed on the
    /// whole series (they are scale-free and causal), not recomputed on the rescaled prices.
    pub fn select(&self, ranges: &[std::ops::Range<usize>]) -> Dataset {
        let n = self.n_bars();
        let blocks: Vec<std::ops::Range<usize>> = ranges
            .iter()
            .map(|r| r.start.min(n)..r.end.min(n))
            .filter(|r| !r.is_empty())
            .collect();
        let rows: Vec<usize> = blocks.iter().flat_map(|r| r.clone()).collect();
        let mut prices = self
            .prices
            .select(ndarray::Axis(0), &rows)
            .as_standard_layout()
            .into_owned();
        // Row in `prices` where the current block starts, and the original row before it.
        let mut at = 0usize;
        let mut prev_end: Option<usize> = None;
        for block in &blocks {
            if prev_end.is_some_and(|e| e != block.start) {
                for m in 0..self.n_assets() {
                    let last = f64::from(prices[[at - 1, m]]);
                    let factor = last / f64::from(self.prices[[block.start, m]]);
                    for t in at..at + block.len() {
                        prices[[t, m]] = (f64::from(prices[[t, m]]) * factor) as f32;
                    }
                    // Exactly the joint's price, whatever the rounding of the product.
                    prices[[at, m]] = prices[[at - 1, m]];
                }
            }
            at += block.len();
            prev_end = Some(block.end);
        }
        Dataset {
            names: self.names.clone(),
            timestamps: rows.iter().map(|&i| self.timestamps[i]).collect(),
            prices,
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
        // The second block is rescaled so that its first price is the first block's last.
        assert_eq!(s.prices[[2, 1]], 12.0);
        assert!((s.prices[[3, 1]] / s.prices[[2, 1]] - 52.0 / 42.0).abs() < 1e-6);
        assert_eq!(s.features[[3, 0, 0]], 10.0);
        assert_eq!((s.n_bars(), s.n_assets(), s.n_features()), (4, 2, 1));
        // Touching ranges are one block: nothing is rescaled.
        let whole = d.select(&[0..3, 3..6]);
        assert_eq!(whole.prices, d.prices);
    }

    /// A CPCV fold's training blocks around its test group: the step across the joint has a
    /// zero return for every asset (it would otherwise be the test period's return), the
    /// returns within each block are the original ones, and the features are the original
    /// rows.
    #[test]
    fn select_gives_the_joint_between_training_blocks_a_zero_return() {
        use crate::split::{Cpcv, cpcv};
        let n = 600;
        let prices = Array2::from_shape_fn((n, 2), |(t, m)| {
            (1.0 + 0.01 * (m + 1) as f64).powi(t as i32) as f32
        });
        let features = Array3::from_shape_fn((n, 2, 1), |(t, m, _)| (t * 2 + m) as f32);
        let d = Dataset::from_arrays(
            vec!["A".into(), "B".into()],
            (0..n as i64).map(|t| t * 60).collect(),
            prices,
            features.clone(),
            vec!["f".into()],
        )
        .unwrap();
        let cv = Cpcv {
            n_groups: 6,
            k_test: 1,
            purge_bars: 5,
            embargo_bars: 5,
        };
        let folds = cpcv(n, &cv).unwrap();
        let f = &folds[2];
        assert_eq!(f.train, [0..195, 305..600]);
        let s = d.select(&f.train);
        let j = 195; // first row of the second block
        for m in 0..2 {
            assert_eq!(s.prices[[j, m]] / s.prices[[j - 1, m]], 1.0, "asset {m}");
            // Within each block every one-bar return is the original one.
            for (row, orig) in (1..j)
                .map(|r| (r, r))
                .chain((j + 1..s.n_bars()).map(|r| (r, r + 110)))
            {
                let got = s.prices[[row, m]] as f64 / s.prices[[row - 1, m]] as f64;
                let want = d.prices[[orig, m]] as f64 / d.prices[[orig - 1, m]] as f64;
                assert!(
                    (got - want).abs() < 1e-5,
                    "asset {m} row {row}: {got} vs {want}"
                );
            }
        }
        assert_eq!(s.features[[j, 1, 0]], features[[305, 1, 0]]);
        assert_eq!(s.timestamps[j], 305 * 60);
    }
}
