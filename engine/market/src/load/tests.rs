use super::*;
use crate::synth::{self, SynthConfig};

fn loaded() -> LoadedDataset {
    DatasetConfig::default().load().unwrap()
}

#[test]
fn bundled_default_is_four_aligned_stocks() {
    let l = loaded();
    let d = &l.dataset;
    assert_eq!(d.names, BUNDLED_ASSETS);
    assert!(d.n_bars() >= 2_000, "{} bars", d.n_bars());
    assert_eq!(d.n_features(), 18);
    assert_eq!(d.bar_seconds(), 86_400);
    // GOOG listed on 2004-08-19 sets the common start; the 50-bar SMA's 49 warm-up bars follow.
    assert_eq!(
        l.alignment.first,
        crate::time::parse_timestamp("2004-08-19").unwrap()
    );
    assert_eq!(l.warmup_bars, 49);
    assert_eq!(d.n_bars(), l.alignment.common_bars - 49);
    let goog = &l.alignment.assets[1];
    assert_eq!((goog.name.as_str(), goog.lost()), ("GOOG", 0));
    assert!(l.alignment.assets[0].lost_before > 1_000);
    assert_eq!(l.split.test.end, d.n_bars());
    // Its longest breaks (a week after 2001-09-11) are no gaps worth a note.
    assert!(l.notes.is_empty(), "{:?}", l.notes);
}

/// Review env44 finding 8: an asset's gap much longer than its bars, inside the bars the
/// dataset keeps, gets one note naming the asset, the gap's dates and its length, with how
/// many there are; one before the common start (bars the join drops) does not.
#[test]
fn an_assets_long_gaps_are_noted_once() {
    let mut bars = synth::generate(&SynthConfig {
        assets: 3,
        bars: 2_000,
        bar_seconds: 3_600,
        ..SynthConfig::default()
    })
    .unwrap();
    // Asset 0: two holes of 48 and 20 hourly bars. Asset 1: a hole in its first bars, before
    // asset 2 starts.
    bars[0].remove_bars(1_500..1_520);
    bars[0].remove_bars(700..748);
    bars[1].remove_bars(10..60);
    bars[2].remove_bars(0..100);
    let (name, from, to) = (
        bars[0].name.clone(),
        bars[0].timestamps[699],
        bars[0].timestamps[700],
    );
    let sourced = bars
        .into_iter()
        .map(|b| SourcedBars {
            bars: b,
            paths: vec![],
        })
        .collect();
    let l = DatasetConfig {
        features: vec![FeatureSpec::Return { period: 1 }],
        lookback: 8,
        episode_bars: 100,
        ..DatasetConfig::default()
    }
    .build(sourced, "synthetic".into(), &[])
    .unwrap();
    assert_eq!(l.notes.len(), 1, "{:?}", l.notes);
    let expected = format!(
        "{name} has 2 gaps longer than 10h in its bars of 1h, the longest 2d 1h from {} to {}",
        crate::time::format_timestamp(from),
        crate::time::format_timestamp(to)
    );
    assert!(
        l.notes[0].contains(&expected),
        "{expected:?} not in {:?}",
        l.notes
    );
}

#[test]
fn bundled_prices_are_split_adjusted() {
    let l = loaded();
    let d = &l.dataset;
    // AAPL split 2:1 on 2005-02-28: raw closes halve overnight, adjusted ones must not.
    for m in 0..d.n_assets() {
        for t in 1..d.n_bars() {
            let r = d.prices[[t, m]] / d.prices[[t - 1, m]];
            assert!((0.6..1.5).contains(&r), "{} bar {t}: ratio {r}", d.names[m]);
        }
    }
}

#[test]
fn scaler_is_fitted_on_train_only() {
    let l = loaded();
    let d = &l.dataset;
    let scaler = d.scaler.as_ref().unwrap();
    assert_eq!(scaler.fitted_on, l.split.train);
    // Scaled training features have mean ~0 per (asset, feature), up to clipping.
    let train = d.features.slice(ndarray::s![l.split.train.clone(), .., ..]);
    let n = l.split.train.len() as f32;
    for m in 0..d.n_assets() {
        for f in 0..d.n_features() {
            let mean = train.slice(ndarray::s![.., m, f]).sum() / n;
            assert!(
                mean.abs() < 0.1,
                "{} {}: {mean}",
                d.names[m],
                d.feature_names[f]
            );
        }
    }
    // Changing the split changes the statistics: the test bars were not used.
    let other = DatasetConfig {
        split: SplitSpec::Fractions {
            train: 0.5,
            validation: 0.25,
        },
        ..DatasetConfig::default()
    }
    .load()
    .unwrap();
    assert_ne!(other.dataset.scaler.unwrap().mean, scaler.mean);
}

#[test]
fn asset_filter_order_and_case() {
    let cfg = DatasetConfig {
        assets: vec!["msft".into(), "IBM".into()],
        ..DatasetConfig::default()
    };
    let l = cfg.load().unwrap();
    assert_eq!(l.dataset.names, ["MSFT", "IBM"]);
    assert!(l.dataset.n_bars() > 3_000);
    let e = DatasetConfig {
        assets: vec!["TSLA".into()],
        ..DatasetConfig::default()
    }
    .load()
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("asset TSLA is not in") && e.contains("AAPL, FB, GOOG"),
        "{e}"
    );
    let twice = DatasetConfig {
        assets: vec!["IBM".into(), "ibm".into()],
        ..DatasetConfig::default()
    };
    assert!(
        twice
            .load()
            .unwrap_err()
            .to_string()
            .contains("listed twice")
    );
}

#[test]
fn synthetic_bars_build_a_dataset() {
    let bars = synth::generate(&SynthConfig {
        assets: 3,
        bars: 1_000,
        ..SynthConfig::default()
    })
    .unwrap();
    let sourced = bars
        .into_iter()
        .map(|b| SourcedBars {
            bars: b,
            paths: vec![],
        })
        .collect();
    let cfg = DatasetConfig {
        features: vec![
            FeatureSpec::Return { period: 1 },
            FeatureSpec::Rsi { period: 14 },
        ],
        lookback: 8,
        episode_bars: 100,
        ..DatasetConfig::default()
    };
    let l = cfg.build(sourced, "synthetic".into(), &[]).unwrap();
    assert_eq!(l.warmup_bars, 14);
    assert_eq!(l.dataset.n_bars(), 986);
    assert_eq!(l.dataset.feature_names, ["ret_1", "rsi_14"]);
    assert!(l.summary().contains("3 assets"));
}

#[test]
fn bad_settings_are_reported() {
    for (cfg, needle) in [
        (
            DatasetConfig {
                features: vec![],
                ..DatasetConfig::default()
            },
            "features",
        ),
        (
            DatasetConfig {
                lookback: 0,
                ..DatasetConfig::default()
            },
            "lookback",
        ),
        (
            DatasetConfig {
                clip: 0.0,
                ..DatasetConfig::default()
            },
            "clip",
        ),
        (
            DatasetConfig {
                features: vec![FeatureSpec::Rsi { period: 0 }],
                ..DatasetConfig::default()
            },
            "period is 0",
        ),
        // A lookback and episode that overflow together: too few bars, not an overflow.
        (
            DatasetConfig {
                lookback: usize::MAX,
                episode_bars: 10,
                ..DatasetConfig::default()
            },
            "but lookback",
        ),
    ] {
        let e = cfg.load().unwrap_err().to_string();
        assert!(e.contains(needle), "{e}");
    }
}

#[test]
fn config_reads_from_json_with_defaults() {
    let cfg: DatasetConfig =
        serde_json::from_str(r#"{"assets":["IBM"],"features":[{"kind":"rsi","period":14}]}"#)
            .unwrap();
    assert_eq!(cfg.lookback, 1);
    assert!(cfg.paths.is_empty());
    assert_eq!(cfg.features, vec![FeatureSpec::Rsi { period: 14 }]);
}
