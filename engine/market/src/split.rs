//! Splits of a dataset's bars into training and evaluation index ranges.
//!
//! - [`HoldOut`]: train / validation / test, consecutive, by fractions or by dates
//!   ([`SplitSpec`]). The feature scaler is fitted on `train` only.
//! - [`walk_forward`]: successive test windows, each trained on the bars before it.
//! - [`cpcv`]: combinatorial purged cross-validation (López de Prado, *Advances in Financial
//!   Machine Learning*, 2018, ch. 7.4 and 12.4): N contiguous groups, every choice of k of them as
//!   the test set, training on the rest minus a *purge* before each test block (training samples
//!   whose look-ahead, e.g. an episode, would reach into the test block) and an *embargo* after it
//!   (training samples that start right after the test block are serially correlated with it).
//!
//! All ranges are half-open bar indices into the dataset.

// A fold's train and test sets are lists of ranges by design (CPCV makes several); a
// walk-forward fold's single range is such a list, not a mistaken `(a..b).collect()`.
#![allow(
    clippy::single_range_in_vec_init,
    reason = "folds hold lists of index ranges"
)]

use std::ops::Range;

use serde::{Deserialize, Serialize};

use crate::time::{format_timestamp, parse_timestamp};

/// A split that cannot be made as asked; the message says which parameter to change.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("split: {0}")]
pub struct SplitError(pub String);

/// Consecutive train, validation and test ranges covering the dataset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HoldOut {
    pub train: Range<usize>,
    pub validation: Range<usize>,
    pub test: Range<usize>,
}

/// How to cut a [`HoldOut`], as written in a config. A key it does not know is refused (a
/// `test = 0.1` beside the fractions would otherwise be dropped, the test split silently the
/// rest).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "by", rename_all = "snake_case", deny_unknown_fields)]
pub enum SplitSpec {
    /// The first `train` fraction of bars, then `validation`; the test split is the rest.
    Fractions { train: f64, validation: f64 },
    /// Validation from the first bar at or after `validation_start`, test from the first bar at
    /// or after `test_start` (ISO dates or date-times, or Unix seconds).
    Dates {
        validation_start: String,
        test_start: String,
    },
}

impl Default for SplitSpec {
    /// 70 / 15 / 15, the customary proportions (FinRL's tutorials use about the same).
    fn default() -> Self {
        Self::Fractions {
            train: 0.7,
            validation: 0.15,
        }
    }
}

impl SplitSpec {
    /// What can be checked without the data: fractions in (0, 1) with a sum below 1, dates
    /// that read as times with the test split's after the validation split's. The field at
    /// fault (`train`, `test_start`, …) with the error.
    pub fn check(&self) -> Result<(), (&'static str, SplitError)> {
        match self {
            Self::Fractions { train, validation } => {
                let ok = |f: f64| f.is_finite() && f > 0.0 && f < 1.0;
                let field = if ok(*train) { "validation" } else { "train" };
                hold_out_fractions(1_000_000, *train, *validation)
                    .map(|_| ())
                    .map_err(|e| (field, e))
            }
            Self::Dates {
                validation_start,
                test_start,
            } => {
                let parse = |field: &'static str, s: &str| {
                    parse_timestamp(s).map_err(|e| (field, SplitError(e)))
                };
                let v = parse("validation_start", validation_start)?;
                let t = parse("test_start", test_start)?;
                if t <= v {
                    // The same words as the split of the data says them.
                    let e = hold_out_dates(&[], v, t).err().unwrap_or_else(|| {
                        SplitError("test_start must be after validation_start".into())
                    });
                    return Err(("test_start", e));
                }
                Ok(())
            }
        }
    }

    /// The ranges for bars at `timestamps`.
    pub fn resolve(&self, timestamps: &[i64]) -> Result<HoldOut, SplitError> {
        match self {
            Self::Fractions { train, validation } => {
                hold_out_fractions(timestamps.len(), *train, *validation)
            }
            Self::Dates {
                validation_start,
                test_start,
            } => {
                let parse = |field: &str, s: &str| {
                    parse_timestamp(s).map_err(|e| SplitError(format!("{field}: {e}")))
                };
                let v = parse("validation_start", validation_start)?;
                let t = parse("test_start", test_start)?;
                hold_out_dates(timestamps, v, t)
            }
        }
    }
}

impl HoldOut {
    /// The first and last bar times and the bar count of each part, for `timestamps` (the
    /// dataset's bar times): what a checkpoint records of the bars it was trained on. None
    /// where a range lies outside `timestamps` or is empty.
    pub fn dates(&self, timestamps: &[i64]) -> Option<SplitDates> {
        let span = |r: &Range<usize>| -> Option<BarSpan> {
            Some(BarSpan {
                first: *timestamps.get(r.start)?,
                last: *timestamps.get(r.end.checked_sub(1)?)?,
                bars: r.len(),
            })
        };
        Some(SplitDates {
            train: span(&self.train)?,
            validation: span(&self.validation)?,
            test: span(&self.test)?,
        })
    }
}

/// The bars of one part of a split, by time: its first and last bar (Unix seconds, UTC) and
/// how many bars it held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BarSpan {
    pub first: i64,
    pub last: i64,
    pub bars: usize,
}

impl BarSpan {
    /// The bars of `timestamps` (increasing) from `first` to `last`, both included.
    pub fn range(&self, timestamps: &[i64]) -> Range<usize> {
        let a = timestamps.partition_point(|t| *t < self.first);
        let b = timestamps.partition_point(|t| *t <= self.last);
        a..b.max(a)
    }

    /// Whether `timestamps` still hold this part's first and last bar and as many bars
    /// between them: the same bars by time (their values may have changed).
    pub fn same_bars_in(&self, timestamps: &[i64]) -> bool {
        let r = self.range(timestamps);
        r.len() == self.bars
            && timestamps.get(r.start) == Some(&self.first)
            && r.end.checked_sub(1).and_then(|i| timestamps.get(i)) == Some(&self.last)
    }

    /// `2020-01-02 .. 2020-06-30 (125 bars)`.
    pub fn describe(&self) -> String {
        format!(
            "{} .. {} ({} bars)",
            format_timestamp(self.first),
            format_timestamp(self.last),
            self.bars
        )
    }
}

/// A [`HoldOut`] by time: the bars each part held when it was cut, so that the same bars can
/// be found again in data that has changed since (older bars prepended, newer ones appended).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SplitDates {
    pub train: BarSpan,
    pub validation: BarSpan,
    pub test: BarSpan,
}

impl SplitDates {
    /// The parts by name: train, validation, test.
    pub fn parts(&self) -> [(&'static str, &BarSpan); 3] {
        [
            ("train", &self.train),
            ("validation", &self.validation),
            ("test", &self.test),
        ]
    }

    /// The split of `timestamps` (increasing) at these dates: each part the bars from its
    /// first to its last recorded bar. A part whose bars are gone is empty or shorter (see
    /// [`BarSpan::same_bars_in`]); bars outside every part are in none.
    pub fn cut(&self, timestamps: &[i64]) -> HoldOut {
        HoldOut {
            train: self.train.range(timestamps),
            validation: self.validation.range(timestamps),
            test: self.test.range(timestamps),
        }
    }
}

/// Train = the first ⌊n·train⌋ bars, validation the next ⌊n·validation⌋, test the rest. Each
/// must be non-empty, so `train`, `validation` > 0 and `train + validation` < 1.
pub fn hold_out_fractions(n: usize, train: f64, validation: f64) -> Result<HoldOut, SplitError> {
    let ok = |f: f64| f.is_finite() && f > 0.0 && f < 1.0;
    if !ok(train) || !ok(validation) || train + validation >= 1.0 {
        return Err(SplitError(format!(
            "fractions train = {train}, validation = {validation} must be in (0, 1) with a sum \
             below 1 (the test split is the rest), e.g. 0.7 and 0.15"
        )));
    }
    let a = (n as f64 * train).floor() as usize;
    let b = a + (n as f64 * validation).floor() as usize;
    let h = HoldOut {
        train: 0..a,
        validation: a..b.min(n),
        test: b.min(n)..n,
    };
    non_empty(h, n)
}

/// Validation starts at the first bar at or after `validation_start`, test at the first bar at
/// or after `test_start`.
pub fn hold_out_dates(
    timestamps: &[i64],
    validation_start: i64,
    test_start: i64,
) -> Result<HoldOut, SplitError> {
    if test_start <= validation_start {
        return Err(SplitError(format!(
            "test_start {} must be after validation_start {}",
            format_timestamp(test_start),
            format_timestamp(validation_start)
        )));
    }
    let n = timestamps.len();
    let a = timestamps.partition_point(|t| *t < validation_start);
    let b = timestamps.partition_point(|t| *t < test_start);
    let h = HoldOut {
        train: 0..a,
        validation: a..b,
        test: b..n,
    };
    non_empty(h, n).map_err(|e| match (timestamps.first(), timestamps.last()) {
        (Some(f), Some(l)) => SplitError(format!(
            "{} (the data runs from {} to {})",
            e.0,
            format_timestamp(*f),
            format_timestamp(*l)
        )),
        _ => e,
    })
}

fn non_empty(h: HoldOut, n: usize) -> Result<HoldOut, SplitError> {
    for (name, r) in [
        ("train", &h.train),
        ("validation", &h.validation),
        ("test", &h.test),
    ] {
        if r.is_empty() {
            return Err(SplitError(format!(
                "the {name} split of {n} bars is empty: move the split points"
            )));
        }
    }
    Ok(h)
}

/// One fold of a cross-validation: where to train and where to test.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Fold {
    /// Disjoint, increasing ranges.
    pub train: Vec<Range<usize>>,
    /// Disjoint, increasing ranges.
    pub test: Vec<Range<usize>>,
    /// Indices of the test groups (CPCV) or the fold number (walk-forward).
    pub groups: Vec<usize>,
}

/// Walk-forward validation: `n_folds` consecutive test windows at the end of the data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WalkForward {
    pub n_folds: usize,
    /// Bars per test window; 0 = n / (n_folds + 1), so the first training set is as long as
    /// one window.
    pub test_bars: usize,
    /// Bars per training window; 0 = expanding (everything before the test window).
    pub train_bars: usize,
    /// Bars left out between training and test (see the module doc).
    pub purge_bars: usize,
}

/// The folds of `spec` over `n` bars; fold i tests on window i and trains before it.
pub fn walk_forward(n: usize, spec: &WalkForward) -> Result<Vec<Fold>, SplitError> {
    if spec.n_folds == 0 {
        return Err(SplitError("walk-forward n_folds must be at least 1".into()));
    }
    let test_len = if spec.test_bars == 0 {
        n / (spec.n_folds + 1)
    } else {
        spec.test_bars
    };
    let tests_total = test_len.saturating_mul(spec.n_folds);
    if test_len == 0 || tests_total.saturating_add(spec.purge_bars) >= n {
        return Err(SplitError(format!(
            "walk-forward: {} folds of {test_len} test bars and a purge of {} leave no training \
             bars out of {n}: use fewer or shorter folds",
            spec.n_folds, spec.purge_bars
        )));
    }
    let first_test = n - tests_total;
    let folds = (0..spec.n_folds)
        .map(|i| {
            let start = first_test + i * test_len;
            let train_end = start - spec.purge_bars;
            let train_start = if spec.train_bars == 0 {
                0
            } else {
                train_end.saturating_sub(spec.train_bars)
            };
            Fold {
                train: vec![train_start..train_end],
                test: vec![start..start + test_len],
                groups: vec![i],
            }
        })
        .collect();
    Ok(folds)
}

/// Combinatorial purged cross-validation (see the module doc).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cpcv {
    /// N: contiguous groups of (nearly) equal size.
    pub n_groups: usize,
    /// k: groups tested in each split, 1 ≤ k < N.
    pub k_test: usize,
    /// Training bars removed before each test block.
    pub purge_bars: usize,
    /// Training bars removed after each test block.
    pub embargo_bars: usize,
}

/// More splits than this is a mistake in N or k, not a study anyone can run.
const MAX_CPCV_SPLITS: u128 = 100_000;

impl Cpcv {
    /// What can be checked without the data: at least 2 groups, 1 ≤ k < N, and not more
    /// splits than anyone can run. The field at fault (`n_groups` or `k_test`) with the error.
    pub fn check(&self) -> Result<(), (&'static str, SplitError)> {
        let (big_n, k) = (self.n_groups, self.k_test);
        if big_n < 2 || k == 0 || k >= big_n {
            let field = if big_n < 2 { "n_groups" } else { "k_test" };
            return Err((
                field,
                SplitError(format!(
                    "CPCV needs at least 2 groups and 1 ≤ k < N test groups; got N = {big_n}, \
                     k = {k}"
                )),
            ));
        }
        if self.n_splits() > MAX_CPCV_SPLITS {
            return Err((
                "n_groups",
                SplitError(format!(
                    "CPCV with N = {big_n}, k = {k} makes {} splits (more than \
                     {MAX_CPCV_SPLITS}): use fewer groups",
                    binomial_text(big_n, k)
                )),
            ));
        }
        Ok(())
    }

    /// C(N, k): the number of splits (`u128::MAX` where that does not fit).
    pub fn n_splits(&self) -> u128 {
        binomial(self.n_groups, self.k_test).unwrap_or(u128::MAX)
    }

    /// φ = k/N · C(N, k) = C(N−1, k−1): the number of complete backtest paths (AFML eq. 12.3).
    pub fn n_paths(&self) -> u128 {
        if self.k_test == 0 || self.n_groups == 0 {
            0
        } else {
            binomial(self.n_groups - 1, self.k_test - 1).unwrap_or(u128::MAX)
        }
    }
}

/// C(n, k) exactly, or None where it (or a step of computing it) does not fit in a u128.
pub fn binomial(n: usize, k: usize) -> Option<u128> {
    if k > n {
        return Some(0);
    }
    let k = k.min(n - k);
    let mut r: u128 = 1;
    for i in 0..k {
        // Exact at every step: r·(n−i) is divisible by (i+1) after multiplying.
        r = r.checked_mul((n - i) as u128)? / (i as u128 + 1);
    }
    Some(r)
}

/// C(n, k) as a message states it: exactly where it fits in a u128, else "about 1.2e45".
pub fn binomial_text(n: usize, k: usize) -> String {
    match binomial(n, k) {
        Some(c) => c.to_string(),
        None => {
            let k = k.min(n - k);
            let c = (0..k).fold(1.0_f64, |c, i| c * (n - i) as f64 / (i + 1) as f64);
            format!("about {c:.1e}")
        }
    }
}

/// The group boundaries: N contiguous ranges over `n` bars, the first `n % N` one bar longer.
pub fn groups(n: usize, n_groups: usize) -> Vec<Range<usize>> {
    let (base, extra) = (n / n_groups.max(1), n % n_groups.max(1));
    let mut start = 0;
    (0..n_groups)
        .map(|g| {
            let len = base + usize::from(g < extra);
            let r = start..start + len;
            start += len;
            r
        })
        .collect()
}

/// Every split of `spec` over `n` bars, test groups in lexicographic order.
pub fn cpcv(n: usize, spec: &Cpcv) -> Result<Vec<Fold>, SplitError> {
    let (big_n, k) = (spec.n_groups, spec.k_test);
    spec.check().map_err(|(_, e)| e)?;
    if n < big_n {
        return Err(SplitError(format!(
            "CPCV: {n} bars cannot make {big_n} groups"
        )));
    }
    let bounds = groups(n, big_n);
    let mut out = Vec::new();
    let mut chosen: Vec<usize> = (0..k).collect();
    loop {
        // Test ranges: the chosen groups, adjacent ones merged.
        let mut test: Vec<Range<usize>> = Vec::new();
        for g in &chosen {
            let r = bounds[*g].clone();
            match test.last_mut() {
                Some(last) if last.end == r.start => last.end = r.end,
                _ => test.push(r),
            }
        }
        // Forbidden: each test block widened by the purge before and the embargo after.
        let mut train = Vec::new();
        let mut cursor = 0;
        for r in &test {
            let lo = r.start.saturating_sub(spec.purge_bars);
            if lo > cursor {
                train.push(cursor..lo);
            }
            cursor = cursor.max(r.end.saturating_add(spec.embargo_bars).min(n));
        }
        if cursor < n {
            train.push(cursor..n);
        }
        if train.is_empty() {
            let groups: Vec<String> = chosen.iter().map(usize::to_string).collect();
            return Err(SplitError(format!(
                "CPCV (n_groups = {big_n}, k_test = {k}, purge_bars = {}, embargo_bars = {}): \
                 the fold testing groups {} of {n} bars has no training bars left: lower \
                 purge_bars or embargo_bars, use more n_groups or a smaller k_test",
                spec.purge_bars,
                spec.embargo_bars,
                groups.join(", ")
            )));
        }
        out.push(Fold {
            train,
            test,
            groups: chosen.clone(),
        });
        // Next combination in lexicographic order.
        let Some(i) = (0..k).rev().find(|&i| chosen[i] < big_n - k + i) else {
            break;
        };
        chosen[i] += 1;
        for j in i + 1..k {
            chosen[j] = chosen[j - 1] + 1;
        }
    }
    Ok(out)
}

/// The backtest paths of a CPCV run: path p takes, for each group g, the p-th split (in `folds`
/// order) that tests g. Returns φ paths, each N split indices (AFML §12.4, fig. 12.1).
pub fn cpcv_paths(folds: &[Fold], n_groups: usize) -> Vec<Vec<usize>> {
    let mut per_group: Vec<Vec<usize>> = vec![Vec::new(); n_groups];
    for (s, f) in folds.iter().enumerate() {
        for g in &f.groups {
            if let Some(v) = per_group.get_mut(*g) {
                v.push(s);
            }
        }
    }
    let n_paths = per_group.iter().map(Vec::len).min().unwrap_or(0);
    (0..n_paths)
        .map(|p| per_group.iter().map(|v| v[p]).collect())
        .collect()
}

#[cfg(test)]
mod tests;
