//! Alignment of several assets onto common timestamps.
//!
//! Rule: **inner join**. A bar is kept only at timestamps every asset has; nothing is filled
//! forward or interpolated, so every price in the dataset is one that traded. Whatever an asset
//! loses is reported ([`AlignReport`]): bars before the common start (an asset listed later, like
//! GOOG in 2004), after the common end, and inside the common range (a holiday or a halt on one
//! exchange, a missing candle).

use serde::Serialize;

use crate::time::format_timestamp;
use crate::{AssetBars, DataError};

/// What alignment kept and dropped.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AlignReport {
    /// Bars in the aligned series.
    pub common_bars: usize,
    /// First and last common timestamps (Unix seconds).
    pub first: i64,
    pub last: i64,
    /// One entry per asset, in input order.
    pub assets: Vec<AssetAlignment>,
}

/// How many bars one asset lost, and where.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AssetAlignment {
    pub name: String,
    /// Bars before alignment.
    pub bars: usize,
    /// Bars dropped before the common start.
    pub lost_before: usize,
    /// Bars dropped after the common end.
    pub lost_after: usize,
    /// Bars dropped inside the common range (timestamps another asset lacks).
    pub lost_inside: usize,
}

impl AssetAlignment {
    /// All bars this asset lost.
    pub fn lost(&self) -> usize {
        self.lost_before + self.lost_after + self.lost_inside
    }
}

impl std::fmt::Display for AlignReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "inner join: {} common bars, {} to {}",
            self.common_bars,
            format_timestamp(self.first),
            format_timestamp(self.last)
        )?;
        for a in &self.assets {
            writeln!(
                f,
                "  {:<12} {:>8} bars, lost {:>6} ({} before the common start, {} after its end, \
                 {} inside)",
                a.name,
                a.bars,
                a.lost(),
                a.lost_before,
                a.lost_after,
                a.lost_inside
            )?;
        }
        Ok(())
    }
}

/// Intersection of two strictly increasing lists.
fn intersect(a: &[i64], b: &[i64]) -> Vec<i64> {
    let mut out = Vec::with_capacity(a.len().min(b.len()));
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                out.push(a[i]);
                i += 1;
                j += 1;
            }
        }
    }
    out
}

/// Timestamps common to every series (each strictly increasing).
fn common_timestamps<'a>(series: impl Iterator<Item = &'a [i64]>) -> Vec<i64> {
    let mut common: Option<Vec<i64>> = None;
    for ts in series {
        common = Some(match common {
            None => ts.to_vec(),
            Some(c) => intersect(&c, ts),
        });
    }
    common.unwrap_or_default()
}

/// Aligns `assets` (each with strictly increasing timestamps, as the readers guarantee) onto the
/// timestamps they all share.
///
/// Errors when no timestamp is shared: the message names the asset whose removal leaves the
/// others the most common bars (`describe(i)` says where asset `i` came from, e.g. its file).
pub fn align(
    assets: &[AssetBars],
    describe: impl Fn(usize) -> String,
) -> Result<(Vec<AssetBars>, AlignReport), DataError> {
    if assets.is_empty() {
        return Err(DataError::Data("no assets to align".into()));
    }
    let common = common_timestamps(assets.iter().map(|a| a.timestamps.as_slice()));
    if common.is_empty() {
        return Err(no_overlap(assets, describe));
    }
    let (first, last) = (common[0], common[common.len() - 1]);
    let mut aligned = Vec::with_capacity(assets.len());
    let mut report = Vec::with_capacity(assets.len());
    for a in assets {
        let mut out = AssetBars::new(a.name.clone());
        let n = common.len();
        for v in [
            &mut out.open,
            &mut out.high,
            &mut out.low,
            &mut out.close,
            &mut out.volume,
        ] {
            v.reserve_exact(n);
        }
        // Walk the asset's bars once; `common` is a subsequence of its timestamps.
        let mut j = 0;
        for (i, ts) in a.timestamps.iter().enumerate() {
            if j < n && *ts == common[j] {
                out.open.push(a.open[i]);
                out.high.push(a.high[i]);
                out.low.push(a.low[i]);
                out.close.push(a.close[i]);
                out.volume.push(a.volume[i]);
                j += 1;
            }
        }
        out.timestamps = common.clone();
        let lost_before = a.timestamps.partition_point(|t| *t < first);
        let lost_after = a.len() - a.timestamps.partition_point(|t| *t <= last);
        report.push(AssetAlignment {
            name: a.name.clone(),
            bars: a.len(),
            lost_before,
            lost_after,
            lost_inside: a.len() - n - lost_before - lost_after,
        });
        aligned.push(out);
    }
    Ok((
        aligned,
        AlignReport {
            common_bars: common.len(),
            first,
            last,
            assets: report,
        },
    ))
}

/// The error for assets with no common timestamp, naming the one to drop.
fn no_overlap(assets: &[AssetBars], describe: impl Fn(usize) -> String) -> DataError {
    let range = |a: &AssetBars| match (a.timestamps.first(), a.timestamps.last()) {
        (Some(f), Some(l)) => format!("{} to {}", format_timestamp(*f), format_timestamp(*l)),
        _ => "no bars".into(),
    };
    // Which asset, left out, lets the others share the most bars? O(M²·T), M is small.
    let best = (0..assets.len())
        .map(|skip| {
            let rest = common_timestamps(
                assets
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| *i != skip)
                    .map(|(_, a)| a.timestamps.as_slice()),
            );
            (skip, rest.len())
        })
        .max_by_key(|(skip, n)| (*n, std::cmp::Reverse(*skip)));
    let listing = assets
        .iter()
        .enumerate()
        .map(|(i, a)| format!("{} ({}, {})", a.name, describe(i), range(a)))
        .collect::<Vec<_>>()
        .join("; ");
    match best {
        Some((skip, n)) if n > 0 => DataError::Data(format!(
            "asset {} ({}, {}) has no timestamp in common with the other assets, which share {n} \
             bars: leave it out or give data that overlaps. Assets: {listing}",
            assets[skip].name,
            describe(skip),
            range(&assets[skip])
        )),
        _ => DataError::Data(format!(
            "the assets have no timestamp in common, even leaving any one out: give data \
             covering the same period. Assets: {listing}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bars(name: &str, ts: &[i64]) -> AssetBars {
        let mut a = AssetBars::new(name);
        for t in ts {
            a.timestamps.push(*t);
            let p = *t as f64;
            a.open.push(p);
            a.high.push(p + 1.0);
            a.low.push(p - 0.5);
            a.close.push(p + 0.5);
            a.volume.push(2.0 * p);
        }
        a
    }

    #[test]
    fn inner_join_keeps_shared_bars_and_reports_losses() {
        let a = bars("A", &[1, 2, 3, 4, 5, 6, 7]);
        let b = bars("B", &[3, 4, 6, 7, 8, 9]);
        let c = bars("C", &[2, 3, 4, 5, 6, 7]);
        let (out, report) = align(&[a, b, c], |_| "test".into()).unwrap();
        assert_eq!(report.common_bars, 4);
        assert_eq!((report.first, report.last), (3, 7));
        for o in &out {
            assert_eq!(o.timestamps, vec![3, 4, 6, 7]);
            // Each bar kept is the asset's own bar at that time.
            assert_eq!(o.open, vec![3.0, 4.0, 6.0, 7.0]);
            assert_eq!(o.volume, vec![6.0, 8.0, 12.0, 14.0]);
        }
        let lost: Vec<(usize, usize, usize)> = report
            .assets
            .iter()
            .map(|a| (a.lost_before, a.lost_after, a.lost_inside))
            .collect();
        assert_eq!(lost, vec![(2, 0, 1), (0, 2, 0), (1, 0, 1)]);
        assert_eq!(report.assets[0].lost(), 3);
        assert!(report.to_string().contains("4 common bars"));
    }

    #[test]
    fn one_asset_aligns_to_itself() {
        let a = bars("A", &[1, 2, 3]);
        let (out, report) = align(std::slice::from_ref(&a), |_| String::new()).unwrap();
        assert_eq!(out, vec![a]);
        assert_eq!(report.assets[0].lost(), 0);
    }

    #[test]
    fn disjoint_asset_is_named() {
        let a = bars("A", &[1, 2, 3, 4]);
        let b = bars("B", &[2, 3, 4, 5]);
        let late = bars("LATE", &[100, 101]);
        let e = align(&[a, late, b], |i| format!("file{i}.csv"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("asset LATE (file1.csv"), "{e}");
        assert!(e.contains("share 3 bars"), "{e}");
        assert!(align(&[], |_| String::new()).is_err());
    }
}
