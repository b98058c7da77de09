//! Study report benchmark: `tradetune study report` (and the app's Report tab, which computes
//! it again whenever a live read brings trials) over a cross-validated study in a fresh SQLite
//! file: reading every trial's fold returns, laying them out as CPCV's backtest paths, PBO by
//! CSCV on each path (pooled) and the deflated Sharpe on each.
//!
//! Config: CPCV with N = 6 groups, k = 2 (15 folds, 5 backtest paths), 2,400 bars (each fold
//! tests 800, each trial stores 12,000 returns), S = 16 partitions (12,870 combinations a
//! path); 100 COMPLETE trials (TRADETUNE_BENCH_TRIALS to change). Each fold leaves the first
//! 10 bars of each test block unscored, as a lookback does. The returns are noise about one
//! small drift, the same for every trial: nothing to find, so PBO is near 0.5.
//!
//! Run: `cargo bench -p tradetune-engine --bench report`.

use std::hint::black_box;
use std::time::Instant;

use tradetune_engine::front::report::study_report;
use tradetune_engine::market::split::{Cpcv, cpcv};
use tradetune_engine::storage::{FoldReturn, Storage, StudyDirection};

fn main() {
    let n: usize = std::env::var("TRADETUNE_BENCH_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let (bars, skip, partitions) = (2_400usize, 10usize, 16usize);
    let spec = Cpcv {
        n_groups: 6,
        k_test: 2,
        purge_bars: 0,
        embargo_bars: 0,
    };
    let folds = cpcv(bars, &spec).expect("CPCV folds");
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("report.db");
    let mut s = Storage::open(&path).expect("open");
    let study = s
        .create_study("cv", &[StudyDirection::Maximize])
        .expect("study");
    let t0 = Instant::now();
    let mut rows_stored = 0;
    for i in 0..n {
        let t = s.create_trial(study).expect("trial").trial_id;
        let mut rows = Vec::new();
        for (f, fold) in folds.iter().enumerate() {
            let scored = fold.test.iter().flat_map(|r| r.start + skip..r.end);
            for (k, bar) in scored.enumerate() {
                let u = ((i as f64 + 1.0) * 0.618_034 + (bar + 7 * f) as f64 * 0.754_878).fract();
                rows.push(FoldReturn {
                    fold: f as i64,
                    bar_index: k as i64,
                    bar_time: 1_700_000_000 + 3600 * bar as i64,
                    value: 0.01 * (u - 0.5) + 2e-4,
                    benchmark: Some(0.002 * ((bar % 7) as f64 - 3.0)),
                });
            }
            s.report(t, f as i64, 1e-3 * i as f64).expect("report");
        }
        rows_stored += rows.len();
        s.put_fold_returns(t, &rows).expect("fold returns");
        s.complete_trial(t, &[1e-3 * i as f64]).expect("complete");
    }
    println!(
        "report bench: {n} trials, CPCV N = {} k = {} ({} folds), {bars} bars ({skip} unscored at \
         each test block's start), {rows_stored} fold returns stored in {:.2} s; S = {partitions}",
        spec.n_groups,
        spec.k_test,
        folds.len(),
        t0.elapsed().as_secs_f64()
    );

    // Best of 3, on a read-only connection as the CLI and the app open it.
    let reader = Storage::open_read_only(&path).expect("open read-only");
    let mut best = f64::INFINITY;
    let mut last = None;
    for _ in 0..3 {
        let t0 = Instant::now();
        let r = study_report(&reader, "cv", partitions).expect("report");
        best = best.min(t0.elapsed().as_secs_f64());
        last = Some(black_box(r));
    }
    let Some(r) = last else { return };
    // What of it is reading the returns.
    let t0 = Instant::now();
    let trials = reader.trials(study).expect("trials");
    let mut read = 0;
    for t in &trials {
        read += reader.fold_returns(t.trial_id).expect("fold returns").len();
    }
    let reading = t0.elapsed().as_secs_f64();
    let combinations = r.pbo.result.as_ref().map_or(0, |p| p.combinations);
    println!(
        "study report: {:.1} ms = {:.0} trials/s, of which reading the {read} fold returns {:.1} \
         ms ({} backtest paths of {} bars, {combinations} CSCV combinations, PBO {}, deflated \
         Sharpe {})",
        best * 1e3,
        n as f64 / best,
        reading * 1e3,
        r.paths,
        r.bars,
        r.pbo
            .result
            .as_ref()
            .map_or_else(|| "none".into(), |p| format!("{:.3}", p.pbo)),
        r.dsr
            .result
            .as_ref()
            .map_or_else(|| "none".into(), |d| format!("{:.3}", d.dsr))
    );
}
