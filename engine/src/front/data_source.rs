//! A run's data source and the files a checkpoint directory holds besides the model: what
//! `train` writes and a backtest (CLI or app) reads back.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ndarray::Array3;

use serde::{Deserialize, Serialize};

use super::FrontError;
use crate::env::EnvConfig;
use crate::eval::Objective;
use crate::market::Dataset;
use crate::market::load::DatasetConfig;
use crate::market::scaling::FeatureScaler;
use crate::market::split::{HoldOut, SplitDates, SplitSpec};

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
    /// The fingerprint ([`Dataset::fingerprint`]) of the data the run trained on, scaled as it
    /// was; absent from older checkpoints, whose data cannot be checked.
    pub fingerprint: Option<String>,
    /// The bars of each part of the split the run trained on, by time: where a backtest, a
    /// resumed run or a reseed cuts data that changed since (older bars prepended, newer ones
    /// appended). Absent from older checkpoints.
    pub split_dates: Option<SplitDates>,
    /// The feature scaler fitted on the training bars, which scales data that changed since
    /// training as the run's data was scaled. Absent from older checkpoints.
    pub scaler: Option<FeatureScaler>,
}

/// A dataset and its train / validation / test split.
pub struct LoadedData {
    pub dataset: Arc<Dataset>,
    pub split: HoldOut,
    /// For people: source, assets, bars.
    pub about: String,
    /// What people should know about the data, one line each: an asset's gaps much longer
    /// than its bars, that it changed since the checkpoint was trained and how it was cut, or
    /// that an older checkpoint cannot be checked.
    pub notes: Vec<String>,
}

/// `source: assets (train bars a..b of n)`.
fn about(source: &str, dataset: &Dataset, split: &HoldOut) -> String {
    format!(
        "{source}: {} (train bars {}..{} of {})",
        dataset.names.join(", "),
        split.train.start,
        split.train.end,
        dataset.n_bars()
    )
}

impl DataSource {
    /// This source as a checkpoint records it: with the names of the assets `loaded` holds.
    /// With the data's fingerprint, the split by time and the fitted scaler, so that a later
    /// backtest, resume or reseed can tell whether the files still hold that data and cut them
    /// as the run's were cut.
    pub fn recorded(&self, loaded: &LoadedData) -> DataSource {
        DataSource {
            names: loaded.dataset.names.clone(),
            fingerprint: Some(loaded.dataset.fingerprint()),
            split_dates: loaded.split.dates(&loaded.dataset.timestamps),
            scaler: loaded.dataset.scaler.clone(),
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
    /// market of 7 assets; split as recorded (70 / 15 / 15 by default), the scaler fitted on
    /// its train split.
    pub fn load(&self, env: &EnvConfig) -> Result<LoadedData, FrontError> {
        Ok(self.load_with_unscaled(env)?.0)
    }

    /// Loads the data a checkpoint trained on, as this record (its `data.json`, at `record`)
    /// says, for a backtest or a resumed run that needs the bars of the split parts `need`
    /// (`"train"`, `"validation"`, `"test"`).
    ///
    /// - The same data as at training (the fingerprint matches): loaded as [`Self::load`] does.
    /// - Other data (the files changed since): the split is cut at the recorded dates and the
    ///   features scaled by the recorded scaler, with a note saying so; refused, naming the
    ///   record and the files, where a part in `need` no longer has all its recorded bars.
    /// - A record without a fingerprint (an older checkpoint): loaded as [`Self::load`] does,
    ///   with a note that it cannot be checked.
    ///
    /// Refuses data whose assets are not those the record names (see [`Self::check_names`]).
    pub fn load_recorded(
        &self,
        env: &EnvConfig,
        record: &Path,
        need: &[&str],
    ) -> Result<LoadedData, FrontError> {
        let (mut loaded, unscaled) = self.load_with_unscaled(env)?;
        self.check_names(
            &loaded,
            &format!("the data recorded in {}", record.display()),
        )?;
        let checkpoint = record.parent().unwrap_or(record).display().to_string();
        let Some(recorded) = &self.fingerprint else {
            loaded.notes.push(format!(
                "checkpoint {checkpoint} records no fingerprint of its data (written by an older \
                 TradeTune): whether its data changed since training cannot be checked"
            ));
            return Ok(loaded);
        };
        let now = loaded.dataset.fingerprint();
        if now == *recorded {
            return Ok(loaded);
        }
        let source = self.source_name();
        let changed = format!(
            "the data changed since training ({} records fingerprint {recorded}, {source} has \
             {now} now)",
            record.display()
        );
        let Some(dates) = &self.split_dates else {
            return Err(FrontError::file(
                record,
                format!("{changed}, and the record has no split dates to cut it at"),
            ));
        };
        let timestamps = &loaded.dataset.timestamps;
        for (part, span) in dates.parts() {
            if need.contains(&part) && !span.same_bars_in(timestamps) {
                let have = match (timestamps.first(), timestamps.last()) {
                    (Some(a), Some(b)) => format!(
                        "it runs from {} to {}",
                        crate::market::time::format_timestamp(*a),
                        crate::market::time::format_timestamp(*b)
                    ),
                    _ => "it has no bars".into(),
                };
                return Err(FrontError::file(
                    record,
                    format!(
                        "checkpoint {checkpoint} was trained with the {part} split {} but \
                         {source} no longer holds all of those bars ({have}): {changed}. \
                         Restore the data it was trained on, or give other files with --data \
                         (their scaler is refitted)",
                        span.describe()
                    ),
                ));
            }
        }
        let split = dates.cut(timestamps);
        let mut dataset = (*loaded.dataset).clone();
        let mut scaled = "";
        if let (Some(scaler), Some(mut features)) = (&self.scaler, unscaled) {
            scaler
                .try_apply(&mut features)
                .map_err(|e| FrontError::file(record, e))?;
            dataset.features = features;
            dataset.scaler = Some(scaler.clone());
            scaled = " and features scaled as in training";
        }
        let same = dataset.fingerprint() == *recorded;
        let dataset = Arc::new(dataset);
        loaded.about = about(&source, &dataset, &split);
        loaded.dataset = dataset;
        loaded.split = split;
        // The very data the run trained on, cut and scaled as it was (a run resumed on data
        // that had changed before records that data): nothing to say.
        if !same {
            let parts: Vec<String> = dates
                .parts()
                .iter()
                .map(|(part, span)| {
                    let gone = if span.same_bars_in(&loaded.dataset.timestamps) {
                        ""
                    } else {
                        ", no longer all there"
                    };
                    format!("{part} {}{gone}", span.describe())
                })
                .collect();
            loaded.notes.push(format!(
                "{changed}: splits cut at the recorded dates ({}){scaled}",
                parts.join("; ")
            ));
        }
        Ok(loaded)
    }

    /// The market files, or the bundled sample or synthetic market, for people.
    fn source_name(&self) -> String {
        if let Some(bars) = self.synthetic_bars {
            return format!("the synthetic market of {bars} bars");
        }
        if self.paths.is_empty() {
            return format!(
                "the bundled sample {}",
                crate::market::load::bundled_path().display()
            );
        }
        self.paths
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// [`Self::load`], with the features before scaling (none for a synthetic market).
    fn load_with_unscaled(
        &self,
        env: &EnvConfig,
    ) -> Result<(LoadedData, Option<Array3<f32>>), FrontError> {
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
            return Ok((
                LoadedData {
                    about: format!(
                        "synthetic market, 7 assets x {bars} bars (train bars {}..{})",
                        split.train.start, split.train.end
                    ),
                    dataset,
                    split,
                    notes: Vec::new(),
                },
                None,
            ));
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
        let about = about(&loaded.source_name, &loaded.dataset, &loaded.split);
        Ok((
            LoadedData {
                dataset: Arc::new(loaded.dataset),
                split: loaded.split,
                about,
                // An asset's long gaps.
                notes: loaded.notes,
            },
            Some(loaded.unscaled_features),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Review env44 finding 8: `train` prints the loaded data's notes; an asset that misses
    /// a week of its hourly bars is one of them, naming the asset, the gap and its length.
    #[test]
    fn an_assets_long_gap_is_a_note_of_the_loaded_data() {
        use crate::market::synth::{self, SynthConfig};
        let mut bars = synth::generate(&SynthConfig {
            assets: 2,
            bars: 3_000,
            bar_seconds: 3_600,
            ..SynthConfig::default()
        })
        .unwrap();
        let a = &mut bars[1];
        let (name, from) = (a.name.clone(), a.timestamps[1_999]);
        a.remove_bars(2_000..2_168);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gappy.csv");
        synth::write_long_csv(&path, &bars).unwrap();
        let loaded = DataSource::new(&[path], None)
            .unwrap()
            .load(&EnvConfig::new())
            .unwrap();
        assert_eq!(loaded.notes.len(), 1, "{:?}", loaded.notes);
        let expected = format!(
            "{name} has a gap longer than 10h in its bars of 1h, the longest 7d 1h from {}",
            crate::market::time::format_timestamp(from)
        );
        assert!(loaded.notes[0].contains(&expected), "{:?}", loaded.notes);
        // The bundled sample has none.
        let bundled = DataSource::default().load(&EnvConfig::new()).unwrap();
        assert!(bundled.notes.is_empty(), "{:?}", bundled.notes);
    }

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
