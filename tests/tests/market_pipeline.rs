//! Market data end to end: synthetic files in the three supported shapes → readers → dataset →
//! splits, and the bundled default as the environments will receive it.

use std::io::Write;
use std::path::Path;

use tradetune_engine::market::features::FeatureSpec;
use tradetune_engine::market::read::{FileFormat, read_file};
use tradetune_engine::market::split::{Cpcv, WalkForward, cpcv, walk_forward};
use tradetune_engine::market::synth::{self, SynthConfig};
use tradetune_engine::market::{AssetBars, DatasetConfig};

fn small_synth() -> Vec<AssetBars> {
    synth::generate(&SynthConfig {
        assets: 3,
        bars: 3_000,
        bar_seconds: 300,
        seed: 11,
        ..SynthConfig::default()
    })
    .unwrap()
}

/// Writes one asset as a per-asset CSV with Unix-second timestamps.
fn write_per_asset(path: &Path, a: &AssetBars) {
    let mut f = std::fs::File::create(path).unwrap();
    writeln!(f, "Timestamp,Open,High,Low,Close,Volume").unwrap();
    for i in 0..a.len() {
        writeln!(
            f,
            "{},{},{},{},{},{}",
            a.timestamps[i], a.open[i], a.high[i], a.low[i], a.close[i], a.volume[i]
        )
        .unwrap();
    }
}

/// Writes one asset as a Binance kline export (no header, ms times).
fn write_binance(path: &Path, a: &AssetBars) {
    let mut w = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    for i in 0..a.len() {
        let ms = a.timestamps[i] * 1000;
        writeln!(
            w,
            "{ms},{},{},{},{},{},{},0,0,0,0,0",
            a.open[i],
            a.high[i],
            a.low[i],
            a.close[i],
            a.volume[i],
            ms + 299_999
        )
        .unwrap();
    }
    w.flush().unwrap();
}

#[test]
fn three_file_shapes_load_to_the_same_dataset() {
    let bars = small_synth();
    let dir = tempfile::tempdir().unwrap();
    let long = dir.path().join("market.csv.gz");
    synth::write_long_csv(&long, &bars).unwrap();
    let per_asset: Vec<_> = bars
        .iter()
        .map(|a| {
            let p = dir.path().join(format!("{}.csv", a.name));
            write_per_asset(&p, a);
            p
        })
        .collect();
    let binance: Vec<_> = bars
        .iter()
        .map(|a| {
            let p = dir.path().join(format!("{}-5m-2020-01.csv", a.name));
            write_binance(&p, a);
            p
        })
        .collect();
    assert_eq!(read_file(&long).unwrap().format, FileFormat::Long);
    assert_eq!(
        read_file(&per_asset[0]).unwrap().format,
        FileFormat::PerAsset
    );
    assert_eq!(
        read_file(&binance[0]).unwrap().format,
        FileFormat::BinanceKlines
    );
    // What the generator made is exactly what every reader gives back.
    let back = read_file(&long).unwrap().assets;
    assert_eq!(back, bars);

    let load = |paths: Vec<std::path::PathBuf>| {
        DatasetConfig {
            paths,
            lookback: 16,
            episode_bars: 500,
            ..DatasetConfig::default()
        }
        .load()
        .unwrap()
    };
    let a = load(vec![long]);
    let b = load(per_asset);
    let c = load(binance);
    for other in [&b, &c] {
        assert_eq!(other.dataset.names, a.dataset.names);
        assert_eq!(other.dataset.timestamps, a.dataset.timestamps);
        assert_eq!(other.dataset.prices, a.dataset.prices);
        assert_eq!(other.dataset.features, a.dataset.features);
    }
    let d = &a.dataset;
    assert_eq!(d.bar_seconds(), 300);
    assert_eq!(d.n_bars(), 3_000 - a.warmup_bars);
    assert!(d.features.iter().all(|v| v.is_finite() && v.abs() <= 5.0));
}

#[test]
fn bundled_default_feeds_the_environment_and_the_splits() {
    let l = DatasetConfig::default().load().unwrap();
    let d = &l.dataset;
    assert_eq!(d.names, ["AAPL", "GOOG", "IBM", "MSFT"]);
    assert!(d.n_bars() >= 2_000);
    assert!(d.prices.is_standard_layout() && d.features.is_standard_layout());
    assert_eq!(d.features.dim(), (d.n_bars(), 4, d.feature_names.len()));
    // Consecutive, covering hold-out.
    assert_eq!(l.split.train.start, 0);
    assert_eq!(l.split.train.end, l.split.validation.start);
    assert_eq!(l.split.validation.end, l.split.test.start);
    assert_eq!(l.split.test.end, d.n_bars());

    // Walk-forward and CPCV over the training bars.
    let n = l.split.train.len();
    let wf = walk_forward(
        n,
        &WalkForward {
            n_folds: 4,
            test_bars: 0,
            train_bars: 0,
            purge_bars: 10,
        },
    )
    .unwrap();
    assert_eq!(wf.len(), 4);
    let folds = cpcv(
        n,
        &Cpcv {
            n_groups: 6,
            k_test: 2,
            purge_bars: 10,
            embargo_bars: 5,
        },
    )
    .unwrap();
    assert_eq!(folds.len(), 15);
    for f in &folds {
        for t in &f.test {
            for r in &f.train {
                assert!(
                    r.end + 10 <= t.start || r.start >= t.end + 5,
                    "{r:?} vs {t:?}"
                );
            }
        }
    }
}

#[test]
fn a_custom_feature_list_reaches_the_dataset() {
    let l = DatasetConfig {
        assets: vec!["IBM".into()],
        features: vec![
            FeatureSpec::LogVolume,
            FeatureSpec::Bollinger { period: 20, k: 2.0 },
        ],
        ..DatasetConfig::default()
    }
    .load()
    .unwrap();
    assert_eq!(
        l.dataset.feature_names,
        ["log_volume", "bb_pos_20", "bb_width_20"]
    );
    assert_eq!(l.warmup_bars, 19);
    assert_eq!(l.alignment.assets[0].lost(), 0);
}
