//! Feature scaling, fitted on the training split only so that no statistic of validation or
//! test bars leaks into training. The fitted scaler is serde so it is stored with the dataset
//! and a checkpoint scales new data exactly as its training data was scaled.

use std::ops::Range;

use ndarray::{Array2, Array3};
use serde::{Deserialize, Serialize};

/// Standard deviations below this count as "constant on the training split" (see
/// [`FeatureScaler::fit`]). The scale-free features are O(1e-3..1), far above it.
const MIN_STD: f64 = 1e-8;

/// Per (asset, feature) standardisation: (x − mean) / std, clipped to ±`clip`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FeatureScaler {
    /// M×F means over the training bars.
    pub mean: Array2<f32>,
    /// M×F population standard deviations over the training bars (1 for a feature that is
    /// constant there, see [`FeatureScaler::fit`]).
    pub std: Array2<f32>,
    /// Values are clipped to ±clip after scaling, so one extreme bar (a crash, a bad print)
    /// cannot dominate the network's input.
    pub clip: f32,
    /// The bar range the statistics come from (after clamping to the array), for the record.
    #[serde(default)]
    pub fitted_on: Range<usize>,
    /// The blocks the statistics come from when there are several ([`Self::fit_ranges`]);
    /// empty for a scaler fitted on the one range `fitted_on`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocks: Vec<Range<usize>>,
}

/// A scaler applied to features of another shape than it was fitted on.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "the feature scaler was fitted on {fitted_assets} assets × {fitted_features} features but the \
     data has {assets} × {features}: rebuild the dataset with the same assets and feature list, \
     or refit the scaler"
)]
pub struct ScalerShapeError {
    pub fitted_assets: usize,
    pub fitted_features: usize,
    pub assets: usize,
    pub features: usize,
}

impl FeatureScaler {
    /// Default clip, in standard deviations.
    pub const DEFAULT_CLIP: f32 = 5.0;

    /// Fits on the bars `train` of `features` (T×M×F); bars outside `train` are never read.
    ///
    /// Statistics accumulate in f64 over the finite values only (so warm-up NaNs, if any are
    /// left, do not poison them). A feature with no finite training value, or one constant over
    /// the training bars (std < 1e-8), gets std 1: dividing by a tiny floor instead would blow
    /// the smallest later deviation up to ±clip. `train` is clamped to `0..T`.
    pub fn fit(features: &Array3<f32>, train: Range<usize>) -> Self {
        let t = features.dim().0;
        let end = train.end.min(t);
        let train = train.start.min(end)..end;
        let mut scaler = Self::fit_rows(features, std::slice::from_ref(&train));
        scaler.fitted_on = train;
        scaler
    }

    /// Fits on the bars of several `blocks` of `features` together (a cross-validation fold's
    /// training bars, which may lie on either side of its test bars); bars outside them are
    /// never read. Each block is clamped to `0..T` as in [`Self::fit`]; `fitted_on` is then
    /// `0..0` and [`Self::fitted_blocks`] lists the blocks.
    pub fn fit_ranges(features: &Array3<f32>, blocks: &[Range<usize>]) -> Self {
        let t = features.dim().0;
        let blocks: Vec<Range<usize>> = blocks
            .iter()
            .map(|r| {
                let end = r.end.min(t);
                r.start.min(end)..end
            })
            .filter(|r| !r.is_empty())
            .collect();
        let mut scaler = Self::fit_rows(features, &blocks);
        scaler.blocks = blocks;
        scaler
    }

    /// The bar ranges the statistics come from: the blocks of [`Self::fit_ranges`], else
    /// `fitted_on`.
    pub fn fitted_blocks(&self) -> Vec<Range<usize>> {
        if self.blocks.is_empty() {
            vec![self.fitted_on.clone()]
        } else {
            self.blocks.clone()
        }
    }

    /// Statistics over the rows of `blocks` (already clamped); `fitted_on` 0..0, no blocks.
    fn fit_rows(features: &Array3<f32>, blocks: &[Range<usize>]) -> Self {
        let (_, m, f) = features.dim();
        let mut mean = Array2::<f32>::zeros((m, f));
        let mut std = Array2::<f32>::ones((m, f));
        for a in 0..m {
            for k in 0..f {
                let finite = || {
                    blocks
                        .iter()
                        .flat_map(|r| r.clone())
                        .map(|i| features[[i, a, k]])
                        .filter(|v| v.is_finite())
                        .map(f64::from)
                };
                let n = finite().count();
                if n == 0 {
                    continue;
                }
                // Two passes: exact for features whose mean is large relative to their spread.
                let mu = finite().sum::<f64>() / n as f64;
                let var = finite().map(|v| (v - mu).powi(2)).sum::<f64>() / n as f64;
                mean[[a, k]] = mu as f32;
                let sd = var.sqrt();
                std[[a, k]] = if sd < MIN_STD { 1.0 } else { sd as f32 };
            }
        }
        Self {
            mean,
            std,
            clip: Self::DEFAULT_CLIP,
            fitted_on: 0..0,
            blocks: Vec::new(),
        }
    }

    /// The same scaler with another clip (in standard deviations).
    pub fn with_clip(mut self, clip: f32) -> Self {
        self.clip = clip;
        self
    }

    /// Number of assets and features the scaler was fitted on.
    pub fn shape(&self) -> (usize, usize) {
        self.mean.dim()
    }

    /// Scales `features` (T×M×F) in place.
    ///
    /// # Panics
    /// When M×F differs from the fitted shape. That is a programming error when the scaler is
    /// applied to the array it was fitted on; for a scaler read from a file use
    /// [`Self::try_apply`].
    pub fn apply(&self, features: &mut Array3<f32>) {
        if let Err(e) = self.try_apply(features) {
            panic!("{e}");
        }
    }

    /// Scales `features` (T×M×F) in place, or says why the shapes do not fit.
    pub fn try_apply(&self, features: &mut Array3<f32>) -> Result<(), ScalerShapeError> {
        let (_, m, f) = features.dim();
        let (fm, ff) = self.shape();
        if (m, f) != (fm, ff) || self.std.dim() != (fm, ff) {
            return Err(ScalerShapeError {
                fitted_assets: fm,
                fitted_features: ff,
                assets: m,
                features: f,
            });
        }
        // Multiply by a precomputed reciprocal: one pass over contiguous rows.
        let inv = self.std.mapv(|s| 1.0 / s);
        for mut row in features.outer_iter_mut() {
            ndarray::Zip::from(&mut row)
                .and(&self.mean)
                .and(&inv)
                .for_each(|v, mu, inv| {
                    *v = ((*v - mu) * inv).clamp(-self.clip, self.clip);
                });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{Array3, s};

    /// T×2×2 features whose values differ per bar, asset and feature.
    fn features(t: usize) -> Array3<f32> {
        Array3::from_shape_fn((t, 2, 2), |(i, a, k)| {
            ((i * 7 + a * 3 + k) % 11) as f32 * (1.0 + k as f32) + 10.0 * a as f32
        })
    }

    #[test]
    fn fit_ignores_bars_outside_the_training_range() {
        let x = features(100);
        let scaler = FeatureScaler::fit(&x, 10..60);
        let mut y = x.clone();
        y.slice_mut(s![..10, .., ..]).fill(1e6);
        y.slice_mut(s![60.., .., ..]).fill(f32::NAN);
        y[[99, 1, 1]] = -3e7;
        assert_eq!(FeatureScaler::fit(&y, 10..60), scaler);
        assert_eq!(scaler.fitted_on, 10..60);
        // And bars inside it do count, so the check above can fail.
        let mut z = x.clone();
        z[[30, 0, 0]] += 100.0;
        assert_ne!(FeatureScaler::fit(&z, 10..60).mean, scaler.mean);
    }

    #[test]
    fn statistics_are_those_of_the_training_bars() {
        let x = features(100);
        let scaler = FeatureScaler::fit(&x, 20..50);
        for a in 0..2 {
            for k in 0..2 {
                let v: Vec<f64> = (20..50).map(|i| x[[i, a, k]] as f64).collect();
                let mu = v.iter().sum::<f64>() / 30.0;
                let sd = (v.iter().map(|x| (x - mu).powi(2)).sum::<f64>() / 30.0).sqrt();
                assert!((scaler.mean[[a, k]] as f64 - mu).abs() < 1e-5);
                assert!((scaler.std[[a, k]] as f64 - sd).abs() < 1e-5);
            }
        }
        // Scaled training bars have mean 0 and std 1.
        let mut y = x.clone();
        scaler.with_clip(f32::INFINITY).apply(&mut y);
        let train = y.slice(s![20..50, 1, 0]);
        let mean = train.sum() / 30.0;
        let var = train.iter().map(|v| (v - mean).powi(2)).sum::<f32>() / 30.0;
        assert!(
            mean.abs() < 1e-5 && (var - 1.0).abs() < 1e-4,
            "{mean} {var}"
        );
    }

    /// A cross-validation fold's scaler: its statistics are those of its training blocks alone,
    /// whatever the bars between them (the fold's test bars) hold.
    #[test]
    fn fit_ranges_uses_the_blocks_only() {
        let x = features(100);
        let blocks = [5..30, 60..90];
        let scaler = FeatureScaler::fit_ranges(&x, &blocks);
        let rows: Vec<usize> = blocks.iter().flat_map(|r| r.clone()).collect();
        for a in 0..2 {
            for k in 0..2 {
                let v: Vec<f64> = rows.iter().map(|&i| x[[i, a, k]] as f64).collect();
                let n = v.len() as f64;
                let mu = v.iter().sum::<f64>() / n;
                let sd = (v.iter().map(|x| (x - mu).powi(2)).sum::<f64>() / n).sqrt();
                assert!((scaler.mean[[a, k]] as f64 - mu).abs() < 1e-5);
                assert!((scaler.std[[a, k]] as f64 - sd).abs() < 1e-5);
            }
        }
        assert_eq!(scaler.fitted_blocks(), blocks);
        let mut y = x.clone();
        y.slice_mut(s![30..60, .., ..]).fill(1e6);
        y.slice_mut(s![90.., .., ..]).fill(f32::NAN);
        assert_eq!(FeatureScaler::fit_ranges(&y, &blocks), scaler);
        // One block is `fit`'s statistics.
        let one = FeatureScaler::fit_ranges(&x, std::slice::from_ref(&(20..50)));
        let fit = FeatureScaler::fit(&x, 20..50);
        assert_eq!((one.mean, one.std), (fit.mean.clone(), fit.std.clone()));
        assert_eq!(fit.fitted_blocks(), vec![fit.fitted_on.clone()]);
        assert_eq!(fit.fitted_on, 20..50);
    }

    #[test]
    fn constant_missing_and_empty_training_data_stay_finite() {
        let mut x = features(40);
        x.slice_mut(s![.., 0, 1]).fill(3.0);
        x.slice_mut(s![..25, 1, 0]).fill(f32::NAN);
        let scaler = FeatureScaler::fit(&x, 0..20);
        assert_eq!((scaler.mean[[0, 1]], scaler.std[[0, 1]]), (3.0, 1.0));
        assert_eq!((scaler.mean[[1, 0]], scaler.std[[1, 0]]), (0.0, 1.0));
        let mut y = x.clone();
        y[[30, 0, 1]] = 3.5;
        scaler.apply(&mut y);
        assert_eq!(y[[30, 0, 1]], 0.5);

        let empty = FeatureScaler::fit(&x, 50..90);
        assert_eq!(empty.fitted_on, 40..40);
        assert!(empty.std.iter().all(|s| *s == 1.0) && empty.mean.iter().all(|m| *m == 0.0));
        // A reversed range (a caller's mistake) is empty, not a panic.
        let reversed = FeatureScaler::fit(&x, Range { start: 30, end: 10 });
        assert_eq!(reversed.fitted_on, 10..10);
    }

    #[test]
    fn apply_clips_and_checks_the_shape() {
        let x = features(50);
        let scaler = FeatureScaler::fit(&x, 0..50).with_clip(1.5);
        let mut y = x.clone();
        y[[0, 0, 0]] = 1e9;
        y[[1, 0, 0]] = -1e9;
        scaler.apply(&mut y);
        assert_eq!((y[[0, 0, 0]], y[[1, 0, 0]]), (1.5, -1.5));
        assert!(y.iter().all(|v| v.abs() <= 1.5));

        let mut wrong = Array3::<f32>::zeros((5, 3, 2));
        let e = scaler.try_apply(&mut wrong).unwrap_err();
        assert!(
            e.to_string()
                .contains("2 assets × 2 features but the data has 3 × 2"),
            "{e}"
        );
        assert!(wrong.iter().all(|v| *v == 0.0));
    }

    #[test]
    fn scaler_round_trips_through_json() {
        let scaler = FeatureScaler::fit(&features(30), 5..25);
        let json = serde_json::to_string(&scaler).unwrap();
        assert_eq!(
            serde_json::from_str::<FeatureScaler>(&json).unwrap(),
            scaler
        );
        // Files written before `fitted_on` existed still load.
        let mut v: serde_json::Value = serde_json::from_str(&json).unwrap();
        v.as_object_mut().unwrap().remove("fitted_on");
        let old: FeatureScaler = serde_json::from_value(v).unwrap();
        assert_eq!(old.fitted_on, 0..0);
    }
}
