//! Feature scaling, fitted on the training split only so that no statistic of validation or
//! test bars leaks into training.

use std::ops::Range;

use ndarray::{Array2, Array3, Axis};
use serde::{Deserialize, Serialize};

/// Per (asset, feature) standardisation: (x − mean) / std, clipped to ±`clip`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FeatureScaler {
    /// M×F means.
    pub mean: Array2<f32>,
    /// M×F standard deviations (≥ a small floor, so constant features map to 0).
    pub std: Array2<f32>,
    /// Values are clipped to ±clip after scaling.
    pub clip: f32,
}

impl FeatureScaler {
    /// Fits on the bars `train` of `features` (T×M×F).
    pub fn fit(features: &Array3<f32>, train: Range<usize>) -> Self {
        let (t, m, f) = features.dim();
        let train = train.start.min(t)..train.end.min(t);
        let slice = features.slice(ndarray::s![train.clone(), .., ..]);
        let n = train.len().max(1) as f64;
        let mut mean = Array2::<f32>::zeros((m, f));
        let mut std = Array2::<f32>::ones((m, f));
        for a in 0..m {
            for k in 0..f {
                let col = slice.index_axis(Axis(1), a);
                let col = col.index_axis(Axis(1), k);
                let mu = col.iter().map(|v| *v as f64).sum::<f64>() / n;
                let var = col.iter().map(|v| (*v as f64 - mu).powi(2)).sum::<f64>() / n;
                mean[[a, k]] = mu as f32;
                std[[a, k]] = var.sqrt().max(1e-8) as f32;
            }
        }
        Self {
            mean,
            std,
            clip: 5.0,
        }
    }

    /// Scales `features` (T×M×F) in place.
    pub fn apply(&self, features: &mut Array3<f32>) {
        for mut row in features.outer_iter_mut() {
            for ((a, k), v) in row.indexed_iter_mut() {
                *v = ((*v - self.mean[[a, k]]) / self.std[[a, k]]).clamp(-self.clip, self.clip);
            }
        }
    }
}
