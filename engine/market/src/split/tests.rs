use proptest::prelude::*;

use super::*;

/// True when `ranges` are non-empty, disjoint and increasing, all within `0..n`.
fn well_formed(ranges: &[Range<usize>], n: usize) -> bool {
    ranges.iter().all(|r| r.start < r.end && r.end <= n)
        && ranges.windows(2).all(|w| w[0].end <= w[1].start)
}

#[test]
fn fractions_cover_everything_in_order() {
    let h = hold_out_fractions(100, 0.7, 0.15).unwrap();
    assert_eq!((h.train, h.validation, h.test), (0..70, 70..85, 85..100));
    for (t, v) in [
        (0.0, 0.1),
        (0.9, 0.1),
        (0.5, -0.1),
        (f64::NAN, 0.1),
        (1.2, 0.1),
    ] {
        assert!(hold_out_fractions(100, t, v).is_err(), "{t} {v}");
    }
    let e = hold_out_fractions(3, 0.5, 0.2).unwrap_err();
    assert!(e.0.contains("validation split of 3 bars is empty"), "{e}");
}

#[test]
fn dates_pick_the_first_bar_at_or_after() {
    let ts: Vec<i64> = (0..10).map(|i| i * 100).collect();
    let h = hold_out_dates(&ts, 450, 700).unwrap();
    assert_eq!((h.train, h.validation, h.test), (0..5, 5..7, 7..10));
    assert!(hold_out_dates(&ts, 700, 450).is_err());
    let e = hold_out_dates(&ts, 2_000, 3_000).unwrap_err();
    assert!(e.0.contains("data runs from"), "{e}");
    let spec = SplitSpec::Dates {
        validation_start: "1970-01-01T00:07:30Z".into(),
        test_start: "1970-01-01T00:11:40".into(),
    };
    let h = spec.resolve(&ts).unwrap();
    assert_eq!((h.validation, h.test), (5..7, 7..10));
    let bad = SplitSpec::Dates {
        validation_start: "soon".into(),
        test_start: "later".into(),
    };
    assert!(
        bad.resolve(&ts)
            .unwrap_err()
            .0
            .starts_with("validation_start")
    );
}

#[test]
fn split_spec_reads_from_toml_like_json() {
    let s: SplitSpec =
        serde_json::from_str(r#"{"by":"fractions","train":0.6,"validation":0.2}"#).unwrap();
    assert_eq!(
        s,
        SplitSpec::Fractions {
            train: 0.6,
            validation: 0.2
        }
    );
}

#[test]
fn walk_forward_expanding_and_rolling() {
    let spec = WalkForward {
        n_folds: 3,
        test_bars: 0,
        train_bars: 0,
        purge_bars: 2,
    };
    let f = walk_forward(100, &spec).unwrap();
    assert_eq!(f.len(), 3);
    assert_eq!(f[0].test, vec![25..50]);
    assert_eq!(f[0].train, vec![0..23]);
    assert_eq!(f[2].test, vec![75..100]);
    assert_eq!(f[2].train, vec![0..73]);
    let rolling = WalkForward {
        train_bars: 10,
        ..spec.clone()
    };
    assert_eq!(walk_forward(100, &rolling).unwrap()[1].train, vec![38..48]);
    let too_many = WalkForward {
        test_bars: 40,
        ..spec
    };
    assert!(walk_forward(100, &too_many).is_err());
}

#[test]
fn cpcv_counts_match_the_book() {
    // AFML fig. 12.1: N = 6, k = 2 gives 15 splits and 5 paths.
    let spec = Cpcv {
        n_groups: 6,
        k_test: 2,
        purge_bars: 0,
        embargo_bars: 0,
    };
    let folds = cpcv(600, &spec).unwrap();
    assert_eq!(
        (folds.len() as u128, spec.n_splits(), spec.n_paths()),
        (15, 15, 5)
    );
    let paths = cpcv_paths(&folds, 6);
    assert_eq!(paths.len(), 5);
    // Every path tests every group exactly once, and the split it uses does test that group.
    for p in &paths {
        for (g, s) in p.iter().enumerate() {
            assert!(folds[*s].groups.contains(&g));
        }
    }
    // Adjacent test groups merge into one block.
    assert_eq!(folds[0].groups, vec![0, 1]);
    assert_eq!(folds[0].test, vec![0..200]);
    assert_eq!(folds[0].train, vec![200..600]);
}

#[test]
fn cpcv_rejects_impossible_settings() {
    let s = |n_groups, k_test| Cpcv {
        n_groups,
        k_test,
        purge_bars: 0,
        embargo_bars: 0,
    };
    assert!(cpcv(100, &s(1, 1)).is_err());
    assert!(cpcv(100, &s(5, 0)).is_err());
    assert!(cpcv(100, &s(5, 5)).is_err());
    assert!(cpcv(3, &s(5, 2)).is_err());
    assert!(cpcv(10_000, &s(40, 20)).is_err());
    // Purge and embargo that leave a fold nothing to train on are refused up front, naming
    // the settings, not left to fail trial by trial.
    let wide = Cpcv {
        n_groups: 2,
        k_test: 1,
        purge_bars: 60,
        embargo_bars: 60,
    };
    let e = cpcv(100, &wide).unwrap_err().to_string();
    for name in [
        "n_groups = 2",
        "k_test = 1",
        "purge_bars = 60",
        "embargo_bars = 60",
    ] {
        assert!(e.contains(name), "{e}");
    }
    assert!(e.contains("no training bars"), "{e}");
    // One training bar left is enough for the split (the env's own checks come later).
    let narrow = Cpcv {
        purge_bars: 49,
        embargo_bars: 0,
        ..wide
    };
    assert!(cpcv(100, &narrow).is_ok());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// No training index falls inside a test group, the purge before it or the embargo after
    /// it; every other index is trained on; test groups are exactly the chosen groups.
    #[test]
    fn cpcv_train_avoids_test_purge_and_embargo(
        n in 10usize..400,
        n_groups in 2usize..9,
        k_seed in 0usize..100,
        purge in 0usize..30,
        embargo in 0usize..30,
    ) {
        prop_assume!(n >= n_groups);
        let k = 1 + k_seed % (n_groups - 1);
        let spec = Cpcv { n_groups, k_test: k, purge_bars: purge, embargo_bars: embargo };
        let forbidden_all = |f: &Fold| (0..n).all(|i| f.test.iter().any(|r| {
            i + purge >= r.start && i < r.end + embargo
        }));
        let folds = match cpcv(n, &spec) {
            Ok(folds) => folds,
            Err(_) => {
                // Refused only when some fold would have no training bar at all.
                let bare = Cpcv { purge_bars: 0, embargo_bars: 0, ..spec.clone() };
                let bare = cpcv(n, &bare).unwrap();
                prop_assert!(bare.iter().any(forbidden_all));
                return Ok(());
            }
        };
        prop_assert!(folds.iter().all(|f| !f.train.is_empty()));
        prop_assert_eq!(folds.len() as u128, spec.n_splits());
        let bounds = groups(n, n_groups);
        prop_assert_eq!(bounds.iter().map(|r| r.len()).sum::<usize>(), n);
        for f in &folds {
            prop_assert!(well_formed(&f.train, n) && well_formed(&f.test, n));
            let mut is_test = vec![false; n];
            for g in &f.groups {
                for i in bounds[*g].clone() { is_test[i] = true; }
            }
            let tested: Vec<bool> = (0..n).map(|i| f.test.iter().any(|r| r.contains(&i))).collect();
            prop_assert_eq!(&tested, &is_test);
            let forbidden = |i: usize| f.test.iter().any(|r| {
                i + purge >= r.start && i < r.end + embargo
            });
            for i in 0..n {
                let trained = f.train.iter().any(|r| r.contains(&i));
                prop_assert_eq!(trained, !forbidden(i), "index {} in fold {:?}", i, f.groups);
            }
        }
        // Each group is tested in C(N−1, k−1) splits, so the paths are complete.
        let paths = cpcv_paths(&folds, n_groups);
        prop_assert_eq!(paths.len() as u128, spec.n_paths());
    }

    /// Walk-forward: tests are consecutive and end at the last bar; training ends `purge` bars
    /// before its test window and never overlaps any later bar.
    #[test]
    fn walk_forward_trains_only_before_its_test(
        n in 20usize..2_000,
        n_folds in 1usize..8,
        test_bars in 0usize..200,
        train_bars in 0usize..500,
        purge in 0usize..20,
    ) {
        let spec = WalkForward { n_folds, test_bars, train_bars, purge_bars: purge };
        let Ok(folds) = walk_forward(n, &spec) else { return Ok(()); };
        prop_assert_eq!(folds.len(), n_folds);
        prop_assert_eq!(folds.last().unwrap().test[0].end, n);
        for w in folds.windows(2) {
            prop_assert_eq!(w[0].test[0].end, w[1].test[0].start);
        }
        for f in &folds {
            prop_assert!(well_formed(&f.train, n) || f.train[0].is_empty());
            let t = &f.test[0];
            for r in &f.train {
                prop_assert!(r.end + purge <= t.start);
                if train_bars > 0 { prop_assert!(r.len() <= train_bars); }
            }
        }
    }

    /// Hold-out by fractions: three non-empty consecutive ranges covering all bars.
    #[test]
    fn hold_out_partitions(n in 3usize..10_000, t in 0.05f64..0.9, v in 0.01f64..0.5) {
        prop_assume!(t + v < 0.99);
        if let Ok(h) = hold_out_fractions(n, t, v) {
            prop_assert_eq!(h.train.start, 0);
            prop_assert_eq!(h.train.end, h.validation.start);
            prop_assert_eq!(h.validation.end, h.test.start);
            prop_assert_eq!(h.test.end, n);
            prop_assert!(h.train.end <= (n as f64 * t) as usize);
        }
    }
}

/// A split recorded by time is found again in data with older bars in front and newer ones
/// behind: the same bars, at other indices; a part whose bars are gone is said to be.
#[test]
fn split_dates_cut_the_same_bars_out_of_longer_data() {
    let ts: Vec<i64> = (0..100).map(|i| 1_000 + i * 10).collect();
    let h = hold_out_fractions(ts.len(), 0.7, 0.15).unwrap();
    let dates = h.dates(&ts).unwrap();
    assert_eq!(dates.cut(&ts), h);
    assert_eq!(dates.test.bars, 15);
    // 50 older bars in front, 20 newer behind.
    let longer: Vec<i64> = (-50..120).map(|i| 1_000 + i * 10).collect();
    let cut = dates.cut(&longer);
    assert_eq!(
        (cut.train, cut.validation, cut.test),
        (50..120, 120..135, 135..150)
    );
    for (_, span) in dates.parts() {
        assert!(span.same_bars_in(&longer));
    }
    // The test bars lost: the part is empty, and said to be gone.
    let shorter = &ts[..80];
    assert!(dates.cut(shorter).test.is_empty());
    assert!(!dates.test.same_bars_in(shorter));
    assert!(dates.train.same_bars_in(shorter));
    // One bar inside the validation part missing: not the same bars.
    let gap: Vec<i64> = ts.iter().copied().filter(|t| *t != ts[75]).collect();
    assert!(!dates.validation.same_bars_in(&gap));
    assert!(dates.test.same_bars_in(&gap));
}
