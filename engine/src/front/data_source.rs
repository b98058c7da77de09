//! A run's data source and the files a checkpoint directory holds besides the model: what
//! `train` writes and a backtest (CLI or app) reads back.

use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::FrontError;
use crate::env::EnvConfig;
use crate::eval::Objective;
use crate::market::Dataset;
use crate::market::load::DatasetConfig;
use crate::market::split::{HoldOut, SplitSpec};

/// File in a checkpoint directory recording the data a run trained on (for backtests).
pub const DATA_FILE: &str = "data.json";
/// File in a checkpoint directory holding the environment configuration.
pub const ENV_FILE: &str = "env.json";
/// The smallest synthetic market (bars).
pub const MIN_SYNTHETIC_BARS: usize = 100;

/// The longest synthetic market: 10 million bars of 7 assets hold about 4.5 GB of features.
pub const MAX_SYNTHETIC_BARS: usize = 10_000_000;

/// Where a run's market data comes from; saved in the checkpoint so a backtest can rebuild the
/// same dataset (same files, same scaler fitted on the same train split).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DataSource {
    /// Market files, absolute; empty = the bundled sample.
    pub paths: Vec<PathBuf>,
    /// A seeded synthetic market of this many bars instead.
    pub synthetic_bars: Option<usize>,
    /// The assets kept, by name, in this column order (a study's `[data] assets`); empty =
    /// every asset in the files (absent from older checkpoints: every asset).
    pub assets: Vec<String>,
    /// The train / validation / test split the scaler was fitted on and the run trained on (a
    /// study's `[split]`); absent from older checkpoints: the default 70 / 15 / 15.
    pub split: SplitSpec,
    /// The assets the run trained on, in column order (the policy's per-asset weights follow
    /// it); absent from older checkpoints, where nothing is checked against it.
    pub names: Vec<String>,
    /// The objective the run was scored by (a study's `[study] objective`, `train
    /// --objective`), what a backtest of it scores by unless told otherwise; absent from older
    /// checkpoints.
    pub objective: Option<Objective>,
}

/// A dataset and its train / validation / test split.
pub struct LoadedData {
    pub dataset: Arc<Dataset>,
    pub split: HoldOut,
    /// For people: source, assets, bars.
    pub about: String,
}

impl DataSource {
    /// This source as a checkpoint records it: with the names of the assets `loaded` holds.
    pub fn recorded(&self, loaded: &LoadedData) -> DataSource {
        DataSource {
            names: loaded.dataset.names.clone(),
            ..self.clone()
        }
    }

    /// Refuses `loaded` when this record names assets and `loaded`'s differ (other tickers, or
    /// the same in another order: the policy would weight the wrong assets); `what` names the
    /// data in the error.
    pub fn check_names(&self, loaded: &LoadedData, what: &str) -> Result<(), FrontError> {
        if self.names.is_empty() || self.names == loaded.dataset.names {
            return Ok(());
        }
        Err(FrontError::Invalid(format!(
            "{what} holds the assets {} but the checkpoint was trained on {}, in this order",
            loaded.dataset.names.join(", "),
            self.names.join(", ")
        )))
    }

    /// Market files (made absolute, so the record works from any directory) or synthetic bars.
    pub fn new(paths: &[PathBuf], synthetic_bars: Option<usize>) -> Result<Self, FrontError> {
        let paths = paths
            .iter()
            .map(|p| {
                std::path::absolute(p)
                    .map_err(|e| FrontError::file(p, format!("cannot resolve the path: {e}")))
            })
            .collect::<Result<_, _>>()?;
        Ok(Self {
            paths,
            synthetic_bars,
            ..Self::default()
        })
    }

    /// Loads the dataset for the env's lookback and episode length. The one place the data
    /// source is chosen: market files (the bundled sample by default), or a seeded synthetic
    /// market of 7 assets; split as recorded (70 / 15 / 15 by default).
    pub fn load(&self, env: &EnvConfig) -> Result<LoadedData, FrontError> {
        if let Some(bars) = self.synthetic_bars {
            if bars < MIN_SYNTHETIC_BARS {
                return Err(FrontError::Invalid(format!(
                    "a synthetic market of {bars} bars is too short: at least \
                     {MIN_SYNTHETIC_BARS} bars"
                )));
            }
            if bars > MAX_SYNTHETIC_BARS {
                return Err(FrontError::Invalid(format!(
                    "a synthetic market of {bars} bars is too long: at most {MAX_SYNTHETIC_BARS} \
                     bars (a million bars of 7 assets × 16 features hold 0.45 GB)"
                )));
            }
            let dataset = crate::env::bench::bench_dataset(bars, 7, 16, 7);
            let split = self.split.resolve(&dataset.timestamps)?;
            return Ok(LoadedData {
                about: format!(
                    "synthetic market, 7 assets x {bars} bars (train bars {}..{})",
                    split.train.start, split.train.end
                ),
                dataset,
                split,
            });
        }
        let config = DatasetConfig {
            paths: self.paths.clone(),
            assets: self.assets.clone(),
            lookback: env.lookback,
            episode_bars: env.episode_bars,
            split: self.split.clone(),
            ..DatasetConfig::default()
        };
        let loaded = config.load()?;
        let train = loaded.split.train.clone();
        let about = format!(
            "{}: {} (train bars {}..{} of {})",
            loaded.source_name,
            loaded.dataset.names.join(", "),
            train.start,
            train.end,
            loaded.dataset.n_bars()
        );
        Ok(LoadedData {
            dataset: Arc::new(loaded.dataset),
            split: loaded.split,
            about,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A synthetic market too long to hold is refused, naming the limit, before anything is
    /// allocated (a huge `--synthetic-bars` panicked in ndarray or aborted on allocation).
    #[test]
    fn a_synthetic_market_out_of_bounds_is_refused() {
        let env = EnvConfig::new();
        for (bars, says) in [
            (99, "too short: at least 100 bars"),
            (usize::MAX, "too long: at most 10000000 bars"),
            (MAX_SYNTHETIC_BARS + 1, "too long"),
        ] {
            let source = DataSource::new(&[], Some(bars)).unwrap();
            match source.load(&env) {
                Err(e) => assert!(e.to_string().contains(says), "{bars}: {e}"),
                Ok(_) => panic!("{bars} bars loaded"),
            }
        }
    }
}
