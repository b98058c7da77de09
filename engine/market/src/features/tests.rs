use super::indicators::reference_tests::{assert_agrees_within, load_fixture};
use super::*;

/// A seeded random walk with plausible OHLCV bars (split-mix 64, so the test owns its stream).
fn synthetic_bars(n: usize, seed: u64) -> AssetBars {
    let mut state = seed;
    let mut uniform = move || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut bars = AssetBars::new("SYN");
    let mut close = 100.0;
    for i in 0..n {
        let open = close;
        close = open * (1.0 + 0.02 * (uniform() - 0.5));
        let high = open.max(close) * (1.0 + 0.01 * uniform());
        let low = open.min(close) * (1.0 - 0.01 * uniform());
        bars.timestamps.push(i as i64 * 300);
        bars.open.push(open);
        bars.high.push(high);
        bars.low.push(low);
        bars.close.push(close);
        bars.volume.push(1000.0 + 5000.0 * uniform());
    }
    bars
}

fn same(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

#[test]
fn changing_future_bars_does_not_change_past_values() {
    let bars = synthetic_bars(400, 7);
    let specs = default_features();
    let full = compute(&bars, &specs);
    for cut in [0, 10, 33, 49, 50, 120, 398] {
        let mut changed = bars.clone();
        let other = synthetic_bars(400, 1000 + cut as u64);
        for i in cut + 1..400 {
            changed.open[i] = other.open[i] * 3.0;
            changed.high[i] = other.high[i] * 3.0;
            changed.low[i] = other.low[i] * 3.0;
            changed.close[i] = other.close[i] * 3.0;
            changed.volume[i] = other.volume[i] * 7.0;
        }
        let after = compute(&changed, &specs);
        for t in 0..=cut {
            for f in 0..full.names.len() {
                let (a, b) = (full.values[[t, f]], after.values[[t, f]]);
                assert!(
                    same(a, b),
                    "{} at bar {t} moved from {a} to {b} when bars after {cut} changed",
                    full.names[f]
                );
            }
        }
        // And the change is visible after the cut, so the test can fail.
        if cut < 398 {
            let t = cut.max(full.warmup) + 1;
            assert!(
                (0..full.names.len()).any(|f| !same(full.values[[t, f]], after.values[[t, f]]))
            );
        }
    }
}

#[test]
fn truncated_series_gives_the_same_prefix() {
    let bars = synthetic_bars(300, 11);
    let full = compute(&bars, &default_features());
    let mut short = bars.clone();
    for v in [
        &mut short.open,
        &mut short.high,
        &mut short.low,
        &mut short.close,
        &mut short.volume,
    ] {
        v.truncate(120);
    }
    short.timestamps.truncate(120);
    let part = compute(&short, &default_features());
    for t in 0..120 {
        for f in 0..full.names.len() {
            assert!(
                same(full.values[[t, f]], part.values[[t, f]]),
                "{} at {t}",
                full.names[f]
            );
        }
    }
}

#[test]
fn warmup_is_the_first_fully_defined_row_and_everything_after_is_finite() {
    let bars = synthetic_bars(500, 3);
    let m = compute(&bars, &default_features());
    assert_eq!(m.warmup, 49);
    assert!(m.values.row(m.warmup - 1).iter().any(|v| v.is_nan()));
    for t in m.warmup..500 {
        assert!(m.values.row(t).iter().all(|v| v.is_finite()), "row {t}");
    }
    // Each spec's own warm-up is tight too.
    let mut col = 0;
    for spec in default_features() {
        for _ in spec.column_names() {
            let first = m
                .values
                .column(col)
                .iter()
                .position(|v| !v.is_nan())
                .unwrap();
            assert_eq!(first, spec.warmup(), "{spec:?}");
            col += 1;
        }
    }
}

#[test]
fn default_features_have_unique_names_and_validate() {
    let specs = default_features();
    validate(&specs).unwrap();
    let m = compute(&synthetic_bars(60, 1), &specs);
    assert_eq!(m.names.len(), 18);
    assert_eq!(m.values.ncols(), 18);
    assert_eq!(&m.names[..3], &["ret_1", "ret_5", "log_volume"]);
    assert!(m.names.contains(&"macd_hist_12_26_9".to_string()));
}

#[test]
fn validate_names_the_bad_spec_and_the_fix() {
    let mut specs = default_features();
    specs.push(FeatureSpec::Rsi { period: 0 });
    let e = validate(&specs).unwrap_err();
    assert_eq!(e.index, 15);
    assert!(
        e.to_string().contains("period is 0; it must be at least 1"),
        "{e}"
    );

    let e = validate(&[FeatureSpec::Macd {
        fast: 26,
        slow: 12,
        signal: 9,
    }])
    .unwrap_err();
    assert!(e.problem.contains("shorter than slow"), "{e}");
    let e = validate(&[FeatureSpec::Bollinger {
        period: 20,
        k: f64::NAN,
    }])
    .unwrap_err();
    assert!(e.problem.contains("positive"), "{e}");
    let e = validate(&[FeatureSpec::Adx { period: 1 }]).unwrap_err();
    assert!(e.problem.contains("at least 2"), "{e}");
    let e = validate(&[
        FeatureSpec::Return { period: 10 },
        FeatureSpec::Return { period: 10 },
    ])
    .unwrap_err();
    assert_eq!(e.index, 1);
    assert!(e.problem.contains("ret_10"), "{e}");
}

#[test]
fn bad_periods_are_raised_to_their_minimum_instead_of_panicking() {
    let bars = synthetic_bars(40, 5);
    let specs = [
        FeatureSpec::Return { period: 0 },
        FeatureSpec::Cci { period: 0 },
        FeatureSpec::Macd {
            fast: 0,
            slow: 0,
            signal: 0,
        },
        FeatureSpec::UltOsc {
            short: 0,
            medium: 0,
            long: 0,
        },
    ];
    let m = compute(&bars, &specs);
    assert_eq!(m.names[..2], ["ret_1", "cci_2"]);
    assert!(m.values.row(m.warmup).iter().all(|v| v.is_finite()));
    // Fewer bars than the warm-up: all NaN, warmup clamped to T, no panic.
    let m = compute(&synthetic_bars(10, 5), &default_features());
    assert_eq!(m.warmup, 10);
    let m = compute(&AssetBars::new("EMPTY"), &default_features());
    assert_eq!((m.values.nrows(), m.warmup), (0, 0));
}

#[test]
fn specs_round_trip_through_toml_and_json() {
    let specs = default_features();
    let json = serde_json::to_string(&specs).unwrap();
    assert!(json.contains(r#"{"kind":"rsi","period":14}"#), "{json}");
    assert!(json.contains(r#""kind":"williams_r""#), "{json}");
    assert_eq!(
        serde_json::from_str::<Vec<FeatureSpec>>(&json).unwrap(),
        specs
    );

    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct Wrapper {
        features: Vec<FeatureSpec>,
    }
    let toml_text = toml::to_string(&Wrapper {
        features: specs.clone(),
    })
    .unwrap();
    let back: Wrapper = toml::from_str(&toml_text).unwrap();
    assert_eq!(back.features, specs);
    let parsed: Wrapper = toml::from_str(
        "[[features]]\nkind = \"bollinger\"\nperiod = 20\nk = 2.0\n[[features]]\nkind = \"log_volume\"\n",
    )
    .unwrap();
    assert_eq!(
        parsed.features,
        [
            FeatureSpec::Bollinger { period: 20, k: 2.0 },
            FeatureSpec::LogVolume
        ]
    );
}

#[test]
fn price_level_does_not_change_features() {
    // Scale-free: the same bars at 1000× the price give the same features (all but log volume,
    // which depends on volume only and is unchanged too).
    let bars = synthetic_bars(300, 9);
    let mut scaled = bars.clone();
    for v in [
        &mut scaled.open,
        &mut scaled.high,
        &mut scaled.low,
        &mut scaled.close,
    ] {
        v.iter_mut().for_each(|x| *x *= 1000.0);
    }
    let (a, b) = (
        compute(&bars, &default_features()),
        compute(&scaled, &default_features()),
    );
    for t in a.warmup..300 {
        for f in 0..a.names.len() {
            let (x, y) = (a.values[[t, f]], b.values[[t, f]]);
            assert!(
                (x - y).abs() <= 1e-9 * (1.0 + x.abs()),
                "{} at {t}: {x} vs {y}",
                a.names[f]
            );
        }
    }
}

#[test]
fn features_are_the_documented_transforms_of_the_ta_lib_values() {
    for s in load_fixture() {
        let n = s.close.len();
        let mut bars = AssetBars::new(s.ticker.clone());
        bars.timestamps = (0..n as i64).map(|i| i * 86_400).collect();
        bars.open = s.open.clone();
        bars.high = s.high.clone();
        bars.low = s.low.clone();
        bars.close = s.close.clone();
        bars.volume = s.volume.clone();
        let specs = vec![
            FeatureSpec::Rsi { period: 14 },
            FeatureSpec::Macd {
                fast: 12,
                slow: 26,
                signal: 9,
            },
            FeatureSpec::Cci { period: 20 },
            FeatureSpec::Dx { period: 14 },
            FeatureSpec::Adx { period: 14 },
            FeatureSpec::Roc { period: 10 },
            FeatureSpec::UltOsc {
                short: 7,
                medium: 14,
                long: 28,
            },
            FeatureSpec::WilliamsR { period: 14 },
            FeatureSpec::Obv { period: 20 },
            FeatureSpec::Bollinger { period: 20, k: 2.0 },
            FeatureSpec::SmaRatio { period: 30 },
        ];
        let m = compute(&bars, &specs);
        let ours = |name: &str| -> Vec<f64> {
            let j = m.names.iter().position(|n| n == name).unwrap();
            m.values.column(j).to_vec()
        };
        let map = |col: &str, f: &dyn Fn(usize, f64) -> f64| -> Vec<f64> {
            s.column(col)
                .iter()
                .enumerate()
                .map(|(i, v)| f(i, *v))
                .collect()
        };
        let c = &s.close;
        let obv = s.column("obv");
        let expected: Vec<(&str, Vec<f64>)> = vec![
            ("rsi_14", map("rsi_14", &|_, v| (v - 50.0) / 50.0)),
            ("macd_12_26_9", map("macd", &|i, v| v / c[i])),
            ("macd_signal_12_26_9", map("macd_signal", &|i, v| v / c[i])),
            ("macd_hist_12_26_9", map("macd_hist", &|i, v| v / c[i])),
            ("cci_20", map("cci_20", &|_, v| v / 100.0)),
            ("dx_14", map("dx_14", &|_, v| v / 100.0)),
            ("adx_14", map("adx_14", &|_, v| v / 100.0)),
            ("roc_10", map("roc_10", &|_, v| v / 100.0)),
            ("ultosc_7_14_28", map("ultosc", &|_, v| (v - 50.0) / 50.0)),
            ("willr_14", map("willr_14", &|_, v| (v + 50.0) / 50.0)),
            (
                "obv_20",
                (0..n)
                    .map(|i| {
                        if i < 20 {
                            f64::NAN
                        } else {
                            (obv[i] - obv[i - 20]) / s.volume[i - 19..=i].iter().sum::<f64>()
                        }
                    })
                    .collect(),
            ),
            (
                "bb_pos_20",
                (0..n)
                    .map(|i| {
                        let (u, l) = (s.column("bb_upper")[i], s.column("bb_lower")[i]);
                        (c[i] - l) / (u - l) - 0.5
                    })
                    .collect(),
            ),
            (
                "bb_width_20",
                map("bb_middle", &|i, mid| {
                    (s.column("bb_upper")[i] - s.column("bb_lower")[i]) / mid
                }),
            ),
            ("sma_ratio_30", map("sma_30", &|i, v| c[i] / v - 1.0)),
        ];
        // The expected values are transforms of TA-Lib's 8-digit printed values; ratios such as
        // close/SMA − 1 near 0 magnify that rounding (5e-9 of the price becomes 5e-9 absolute),
        // hence the absolute floor of 1e-6 of the column's largest value next to 1e-4 relative.
        for (name, want) in expected {
            assert_agrees_within(&format!("{} {name}", s.ticker), &ours(name), &want, 1e-6);
        }
    }
}

#[test]
fn default_features_on_200k_bars_are_finite_after_warm_up() {
    // The scale of a 5-minute dataset (≈ 2 years). Prints the time taken for the record; no
    // assertion on it (timings depend on the machine and build profile).
    let bars = synthetic_bars(200_000, 21);
    let start = std::time::Instant::now();
    let m = compute(&bars, &default_features());
    eprintln!(
        "default features, 200000 bars x 1 asset: {:.1} ms",
        start.elapsed().as_secs_f64() * 1e3
    );
    assert_eq!(m.values.dim(), (200_000, 18));
    assert!(
        m.values
            .slice(ndarray::s![m.warmup.., ..])
            .iter()
            .all(|v| v.is_finite())
    );
}
