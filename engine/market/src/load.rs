//! From files (or the bundled sample) to a [`Dataset`] ready for the environments:
//! read → choose assets → align (inner join) → features → drop warm-up bars → split → scale on
//! the training split.

use std::path::PathBuf;

use ndarray::{Array2, Array3};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::align::{AlignReport, align};
use crate::features::{self, FeatureSpec};
use crate::read::{self, SourcedBars};
use crate::scaling::FeatureScaler;
use crate::split::{HoldOut, SplitSpec};
use crate::time::format_timestamp;
use crate::{AssetBars, DataError, Dataset};

/// The bundled sample's file name, under `resources/data/`.
pub const BUNDLED_FILE: &str = "stocks_daily_quandl_wiki.csv.gz";

/// The bundled sample, compiled into the binary so that TradeTune works from any directory:
/// Quandl WIKI daily bars (public domain) of AAPL, FB, GOOG, IBM and MSFT, 2000-03 to 2013-03,
/// with an adjusted close.
pub static BUNDLED_BYTES: &[u8] =
    include_bytes!("../../../resources/data/stocks_daily_quandl_wiki.csv.gz");

/// The default assets of the bundled sample: the four listed for the whole period (FB has only
/// 196 bars, from its 2012 listing). GOOG's 2004 listing sets the common start.
pub const BUNDLED_ASSETS: [&str; 4] = ["AAPL", "GOOG", "IBM", "MSFT"];

/// How errors and reports name the bundled file.
pub fn bundled_path() -> PathBuf {
    PathBuf::from(format!("resources/data/{BUNDLED_FILE}"))
}

/// Reads the bundled sample.
pub fn read_bundled() -> Result<Vec<SourcedBars>, DataError> {
    read::merge_files(vec![read::read_bytes(&bundled_path(), BUNDLED_BYTES)?])
}

/// What data to load and how to prepare it. Every field has a default; the default config is
/// the bundled sample's four stocks with the default features.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DatasetConfig {
    /// Market files (see [`crate::read`]); empty = the bundled sample.
    pub paths: Vec<PathBuf>,
    /// Assets to keep, by name, in this column order; empty = every asset in the files (for the
    /// bundled sample: [`BUNDLED_ASSETS`]).
    pub assets: Vec<String>,
    /// Feature columns, see [`features::FeatureSpec`].
    pub features: Vec<FeatureSpec>,
    /// Bars of features in one observation (the environment's `lookback`).
    pub lookback: usize,
    /// Bars in one training episode (the environment's `episode_bars`; 0 = the whole split).
    pub episode_bars: usize,
    /// Train / validation / test split; the scaler is fitted on train.
    pub split: SplitSpec,
    /// Scaled features are clipped to ±clip standard deviations.
    pub clip: f32,
}

impl Default for DatasetConfig {
    fn default() -> Self {
        Self {
            paths: Vec::new(),
            assets: Vec::new(),
            features: features::default_features(),
            lookback: 1,
            episode_bars: 0,
            split: SplitSpec::default(),
            clip: FeatureScaler::DEFAULT_CLIP,
        }
    }
}

/// Range of one feature column before scaling, over every asset and bar.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FeatureStats {
    pub name: String,
    pub min: f64,
    pub max: f64,
    pub mean: f64,
}

/// A prepared dataset and how it was made.
#[derive(Debug, Clone)]
pub struct LoadedDataset {
    /// Aligned prices and scaled features (scaler stored inside).
    pub dataset: Dataset,
    /// Train / validation / test bar ranges into `dataset`.
    pub split: HoldOut,
    /// What the inner join kept and dropped.
    pub alignment: AlignReport,
    /// Bars dropped at the start after alignment because an indicator was not yet defined.
    pub warmup_bars: usize,
    /// Where the data came from, for people.
    pub source_name: String,
    /// Unscaled ranges of the features.
    pub feature_stats: Vec<FeatureStats>,
    /// The features before scaling (T×M×F, as `dataset.features`), so that a cross-validation
    /// fold can refit the scaler on its own training bars.
    pub unscaled_features: Array3<f32>,
    /// What people should know about the data that does not stop it, one line each: an
    /// asset's gaps much longer than its bars inside the common range
    /// ([`crate::gaps::long_gaps`]), which returns and indicators span as one bar.
    pub notes: Vec<String>,
}

impl DatasetConfig {
    /// The default dataset: the bundled sample's four stocks.
    pub fn bundled() -> Self {
        Self::default()
    }

    /// Reads the files (or the bundled sample) and prepares the dataset.
    pub fn load(&self) -> Result<LoadedDataset, DataError> {
        if self.paths.is_empty() {
            let assets = read_bundled()?;
            let source = format!("bundled sample {}", bundled_path().display());
            self.build(assets, source, &BUNDLED_ASSETS)
        } else {
            let assets = read::read_files(&self.paths)?;
            let source = self
                .paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ");
            self.build(assets, source, &[])
        }
    }

    /// Prepares the dataset from bars already read (the synthetic generator, tests).
    /// `default_assets` applies when `self.assets` is empty; empty too = every asset.
    pub fn build(
        &self,
        assets: Vec<SourcedBars>,
        source_name: String,
        default_assets: &[&str],
    ) -> Result<LoadedDataset, DataError> {
        features::validate(&self.features)
            .map_err(|e| DataError::Data(format!("features: {e}")))?;
        if self.features.is_empty() {
            return Err(DataError::Data(
                "features: the list is empty; give at least one feature".into(),
            ));
        }
        if self.lookback == 0 {
            return Err(DataError::Data(
                "lookback is 0: an observation needs at least one bar".into(),
            ));
        }
        if self.clip.is_nan() || self.clip <= 0.0 {
            return Err(DataError::Data(format!(
                "clip is {}: it must be a positive number of standard deviations",
                self.clip
            )));
        }
        let wanted: Vec<String> = if self.assets.is_empty() {
            default_assets.iter().map(|s| s.to_string()).collect()
        } else {
            self.assets.clone()
        };
        let chosen = choose_assets(assets, &wanted, &source_name)?;
        let files = |i: usize| {
            chosen[i]
                .paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let bars: Vec<AssetBars> = chosen.iter().map(|s| s.bars.clone()).collect();
        let (aligned, alignment) = align(&bars, files)?;
        drop(bars);
        // Each asset's own gaps, in the bars the dataset keeps of it (the inner join's drops
        // are in `alignment`).
        let notes = chosen
            .iter()
            .filter_map(|s| {
                let ts = &s.bars.timestamps;
                let from = ts.partition_point(|&t| t < alignment.first);
                let to = ts.partition_point(|&t| t <= alignment.last);
                crate::gaps::long_gaps(&ts[from..to]).map(|g| g.note(&s.bars.name))
            })
            .collect();

        // Features on the aligned series: the indicators see the very bar sequence the agent
        // trades, and every asset's warm-up ends on the same row.
        // One asset per task: the indicators are sequential scans along time.
        let matrices: Vec<features::FeatureMatrix> = aligned
            .par_iter()
            .map(|a| features::compute(a, &self.features))
            .collect();
        let warmup = matrices.iter().map(|f| f.warmup).max().unwrap_or(0);
        let t_all = alignment.common_bars;
        let t = t_all.saturating_sub(warmup);
        let needed = self.lookback.saturating_add(self.episode_bars.max(1));
        let too_few = |have: usize, what: &str| {
            DataError::Data(format!(
                "{source_name}: {what} has {have} bars, but lookback {} + one episode of {} \
                 need {needed} ({t_all} bars are common to the assets {}, {warmup} of them are \
                 indicator warm-up): use more data, a shorter episode_bars or lookback, or fewer \
                 long-period features",
                self.lookback,
                if self.episode_bars == 0 {
                    "1 bar (the whole split)".to_string()
                } else {
                    format!("{} bars", self.episode_bars)
                },
                alignment
                    .assets
                    .iter()
                    .map(|a| a.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        };
        if t < needed {
            return Err(too_few(t, "the aligned data after warm-up"));
        }
        let timestamps = alignment_timestamps(&aligned[0], warmup);
        let split = self
            .split
            .resolve(&timestamps)
            .map_err(|e| DataError::Data(format!("{source_name}: {e}")))?;
        if split.train.len() < needed {
            return Err(too_few(split.train.len(), "the training split"));
        }

        let (m, f) = (aligned.len(), matrices[0].names.len());
        let mut prices = Array2::<f32>::zeros((t, m));
        let mut feats = Array3::<f32>::zeros((t, m, f));
        for (a, (bars, fm)) in aligned.iter().zip(&matrices).enumerate() {
            for i in 0..t {
                prices[[i, a]] = bars.close[warmup + i] as f32;
                for k in 0..f {
                    feats[[i, a, k]] = fm.values[[warmup + i, k]] as f32;
                }
            }
        }
        let feature_names = matrices[0].names.clone();
        let feature_stats = stats(&feats, &feature_names);
        if let Some(s) = feature_stats
            .iter()
            .find(|s| !(s.min.is_finite() && s.max.is_finite()))
        {
            return Err(DataError::Data(format!(
                "{source_name}: feature {} is not finite after the warm-up (min {}, max {}): the \
                 input has bars the indicator cannot use",
                s.name, s.min, s.max
            )));
        }
        let scaler = FeatureScaler::fit(&feats, split.train.clone()).with_clip(self.clip);
        let unscaled_features = feats.clone();
        scaler.apply(&mut feats);
        let names = aligned.iter().map(|a| a.name.clone()).collect();
        let mut dataset = Dataset::from_arrays(names, timestamps, prices, feats, feature_names)
            .map_err(|e| DataError::Data(format!("{source_name}: {e}")))?;
        dataset.scaler = Some(scaler);
        Ok(LoadedDataset {
            dataset,
            split,
            alignment,
            warmup_bars: warmup,
            source_name,
            feature_stats,
            unscaled_features,
            notes,
        })
    }
}

fn alignment_timestamps(first: &AssetBars, warmup: usize) -> Vec<i64> {
    first.timestamps[warmup.min(first.len())..].to_vec()
}

/// Keeps the assets named in `wanted` (all when empty), in that order.
fn choose_assets(
    mut assets: Vec<SourcedBars>,
    wanted: &[String],
    source_name: &str,
) -> Result<Vec<SourcedBars>, DataError> {
    if assets.is_empty() {
        return Err(DataError::Data(format!("{source_name}: no assets")));
    }
    if wanted.is_empty() {
        return Ok(assets);
    }
    let mut out = Vec::with_capacity(wanted.len());
    for name in wanted {
        // Exact first, then ignoring case ("aapl" finds AAPL).
        let pos = assets
            .iter()
            .position(|a| &a.bars.name == name)
            .or_else(|| {
                assets
                    .iter()
                    .position(|a| a.bars.name.eq_ignore_ascii_case(name))
            });
        match pos {
            Some(i) => out.push(assets.swap_remove(i)),
            None if out
                .iter()
                .any(|a: &SourcedBars| a.bars.name.eq_ignore_ascii_case(name)) =>
            {
                return Err(DataError::Data(format!("asset {name} is listed twice")));
            }
            None => {
                let mut have: Vec<&str> = assets
                    .iter()
                    .chain(out.iter())
                    .map(|a| a.bars.name.as_str())
                    .collect();
                have.sort_unstable();
                return Err(DataError::Data(format!(
                    "asset {name} is not in {source_name}; it holds {}",
                    have.join(", ")
                )));
            }
        }
    }
    Ok(out)
}

/// Min, max and mean of each feature column over all bars and assets.
fn stats(feats: &Array3<f32>, names: &[String]) -> Vec<FeatureStats> {
    let f = feats.dim().2;
    let mut min = vec![f64::INFINITY; f];
    let mut max = vec![f64::NEG_INFINITY; f];
    let mut sum = vec![0.0f64; f];
    let mut nan = vec![false; f];
    let mut count = 0usize;
    for row in feats.rows() {
        count += 1;
        for (k, v) in row.iter().enumerate() {
            let v = *v as f64;
            if v.is_nan() {
                nan[k] = true;
                continue;
            }
            min[k] = min[k].min(v);
            max[k] = max[k].max(v);
            sum[k] += v;
        }
    }
    // A NaN shows as a NaN minimum, so the caller rejects the column.
    for k in 0..f {
        if nan[k] {
            min[k] = f64::NAN;
        }
    }
    names
        .iter()
        .enumerate()
        .map(|(k, n)| FeatureStats {
            name: n.clone(),
            min: min[k],
            max: max[k],
            mean: sum[k] / count.max(1) as f64,
        })
        .collect()
}

impl LoadedDataset {
    /// A few lines for people: source, assets, bars, dates, split, features.
    pub fn summary(&self) -> String {
        let d = &self.dataset;
        let date = |i: usize| {
            d.timestamps
                .get(i)
                .map(|t| format_timestamp(*t))
                .unwrap_or_default()
        };
        let range = |r: &std::ops::Range<usize>| {
            format!(
                "{} bars, {} to {}",
                r.len(),
                date(r.start),
                date(r.end.saturating_sub(1))
            )
        };
        format!(
            "{}\n{} assets ({}) × {} bars × {} features, {} warm-up bars dropped\ntrain {}\n\
             validation {}\ntest {}",
            self.source_name,
            d.n_assets(),
            d.names.join(", "),
            d.n_bars(),
            d.n_features(),
            self.warmup_bars,
            range(&self.split.train),
            range(&self.split.validation),
            range(&self.split.test)
        )
    }
}

#[cfg(test)]
mod tests;
