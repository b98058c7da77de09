//! What is in a set of market files: per asset its bars, dates, bar length and gaps; then the
//! dataset they make (alignment, warm-up, split, feature ranges). Behind `tradetune data
//! inspect`.

use std::path::PathBuf;

use serde::Serialize;

use crate::align::AlignReport;
use crate::dataset::median_spacing;
use crate::gaps::weekday;
use crate::load::{BUNDLED_ASSETS, DatasetConfig, FeatureStats, bundled_path, read_bundled};
use crate::read::{self, FileFormat, SourcedBars};
use crate::time::{format_duration, format_timestamp};
use crate::{AssetBars, DataError};

/// Everything `data inspect` reports.
#[derive(Debug, Clone, Serialize)]
pub struct InspectReport {
    /// The files read (the bundled sample's path when none were given).
    pub files: Vec<FileSummary>,
    /// Every asset found, in file order.
    pub assets: Vec<AssetSummary>,
    /// The dataset the preparation makes of them, when it can be made...
    pub dataset: Option<DatasetSummary>,
    /// ...and otherwise why not.
    pub dataset_error: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct FileSummary {
    pub path: PathBuf,
    pub format: FileFormat,
    pub assets: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct AssetSummary {
    pub name: String,
    pub files: Vec<PathBuf>,
    pub bars: usize,
    pub first: String,
    pub last: String,
    /// Median spacing between bars, seconds.
    pub bar_seconds: i64,
    pub gaps: GapSummary,
    pub min_close: f64,
    pub max_close: f64,
}

/// Spacings longer than 1.5 bar lengths.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GapSummary {
    pub count: usize,
    /// Of those, gaps from a Friday to the following Monday (markets closed for the weekend),
    /// counted only for daily or longer bars.
    pub weekends: usize,
    /// Longest spacing, seconds, and the timestamp of the bar before it.
    pub largest_seconds: i64,
    pub largest_after: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct DatasetSummary {
    pub source: String,
    pub assets: Vec<String>,
    pub bars: usize,
    pub first: String,
    pub last: String,
    pub bar_seconds: i64,
    pub warmup_bars: usize,
    pub alignment: AlignReport,
    /// `[start, end)` bar indices and their first and last dates.
    pub split: Vec<SplitSummary>,
    pub features: Vec<FeatureStats>,
}

#[derive(Debug, Clone, Serialize)]
pub struct SplitSummary {
    pub name: String,
    pub start: usize,
    pub end: usize,
    pub first: String,
    pub last: String,
}

/// Inspects `paths` (the bundled sample when empty). Read errors are errors; a dataset that
/// cannot be made of readable files is reported in [`InspectReport::dataset`].
pub fn inspect(paths: &[PathBuf], config: &DatasetConfig) -> Result<InspectReport, DataError> {
    let (files, sourced, default_assets): (Vec<FileSummary>, Vec<SourcedBars>, &[&str]) =
        if paths.is_empty() {
            let sourced = read_bundled()?;
            let files = vec![FileSummary {
                path: bundled_path(),
                format: FileFormat::Long,
                assets: sourced.iter().map(|s| s.bars.name.clone()).collect(),
            }];
            (files, sourced, &BUNDLED_ASSETS)
        } else {
            let read: Vec<read::FileBars> = paths
                .iter()
                .map(|p| read::read_file(p))
                .collect::<Result<_, _>>()?;
            let files = read
                .iter()
                .map(|f| FileSummary {
                    path: f.path.clone(),
                    format: f.format,
                    assets: f.assets.iter().map(|a| a.name.clone()).collect(),
                })
                .collect();
            (files, read::merge_files(read)?, &[])
        };
    let assets = sourced
        .iter()
        .map(|s| AssetSummary {
            name: s.bars.name.clone(),
            files: s.paths.clone(),
            bars: s.bars.len(),
            first: s
                .bars
                .timestamps
                .first()
                .map(|t| format_timestamp(*t))
                .unwrap_or_default(),
            last: s
                .bars
                .timestamps
                .last()
                .map(|t| format_timestamp(*t))
                .unwrap_or_default(),
            bar_seconds: median_spacing(&s.bars.timestamps),
            gaps: gaps(&s.bars),
            min_close: s.bars.close.iter().copied().fold(f64::INFINITY, f64::min),
            max_close: s
                .bars
                .close
                .iter()
                .copied()
                .fold(f64::NEG_INFINITY, f64::max),
        })
        .collect();
    let source = if paths.is_empty() {
        format!("bundled sample {}", bundled_path().display())
    } else {
        paths
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let dataset = config
        .build(sourced, source, default_assets)
        .map(|l| {
            let d = &l.dataset;
            let date = |i: usize| {
                d.timestamps
                    .get(i)
                    .map(|t| format_timestamp(*t))
                    .unwrap_or_default()
            };
            let split = [
                ("train", &l.split.train),
                ("validation", &l.split.validation),
                ("test", &l.split.test),
            ]
            .into_iter()
            .map(|(name, r)| SplitSummary {
                name: name.into(),
                start: r.start,
                end: r.end,
                first: date(r.start),
                last: date(r.end.saturating_sub(1)),
            })
            .collect();
            DatasetSummary {
                source: l.source_name.clone(),
                assets: d.names.clone(),
                bars: d.n_bars(),
                first: date(0),
                last: date(d.n_bars().saturating_sub(1)),
                bar_seconds: d.bar_seconds(),
                warmup_bars: l.warmup_bars,
                alignment: l.alignment.clone(),
                split,
                features: l.feature_stats.clone(),
            }
        })
        .map_err(|e| e.to_string());
    let (dataset, dataset_error) = match dataset {
        Ok(d) => (Some(d), None),
        Err(e) => (None, Some(e)),
    };
    Ok(InspectReport {
        files,
        assets,
        dataset,
        dataset_error,
    })
}

/// Gaps of one asset's series: spacings over 1.5 × its median spacing.
pub fn gaps(bars: &AssetBars) -> GapSummary {
    let bar = median_spacing(&bars.timestamps);
    let mut out = GapSummary {
        count: 0,
        weekends: 0,
        largest_seconds: 0,
        largest_after: None,
    };
    if bar <= 0 {
        return out;
    }
    for w in bars.timestamps.windows(2) {
        let d = w[1] - w[0];
        if 2 * d <= 3 * bar {
            continue;
        }
        out.count += 1;
        if bar >= 86_400 && weekday(w[0]) == 5 && weekday(w[1]) == 1 && d <= 3 * 86_400 {
            out.weekends += 1;
        }
        if d > out.largest_seconds {
            out.largest_seconds = d;
            out.largest_after = Some(format_timestamp(w[0]));
        }
    }
    out
}

impl std::fmt::Display for InspectReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for file in &self.files {
            writeln!(
                f,
                "{} ({:?}): {}",
                file.path.display(),
                file.format,
                file.assets.join(", ")
            )?;
        }
        writeln!(f)?;
        writeln!(
            f,
            "{:<12} {:>8}  {:<22} {:<22} {:>6} {:>6} {:>9}  {:>12} {:>12}",
            "asset", "bars", "first", "last", "bar", "gaps", "weekends", "min close", "max close"
        )?;
        for a in &self.assets {
            writeln!(
                f,
                "{:<12} {:>8}  {:<22} {:<22} {:>6} {:>6} {:>9}  {:>12.4} {:>12.4}",
                a.name,
                a.bars,
                a.first,
                a.last,
                format_duration(a.bar_seconds),
                a.gaps.count,
                a.gaps.weekends,
                a.min_close,
                a.max_close
            )?;
            if let Some(after) = &a.gaps.largest_after {
                writeln!(
                    f,
                    "{:<12} largest gap {} after {after}",
                    "",
                    format_duration(a.gaps.largest_seconds)
                )?;
            }
        }
        writeln!(f)?;
        if let Some(e) = &self.dataset_error {
            writeln!(f, "dataset: cannot be made: {e}")?;
        }
        match &self.dataset {
            None => Ok(()),
            Some(d) => {
                writeln!(
                    f,
                    "dataset: {} assets ({}) × {} bars of {}, {} to {}; {} warm-up bars dropped",
                    d.assets.len(),
                    d.assets.join(", "),
                    d.bars,
                    format_duration(d.bar_seconds),
                    d.first,
                    d.last,
                    d.warmup_bars
                )?;
                write!(f, "{}", d.alignment)?;
                for s in &d.split {
                    writeln!(
                        f,
                        "  {:<10} bars {:>7}..{:<7} {} to {}",
                        s.name, s.start, s.end, s.first, s.last
                    )?;
                }
                writeln!(f, "features (before scaling, over all assets and bars):")?;
                writeln!(
                    f,
                    "  {:<20} {:>12} {:>12} {:>12}",
                    "name", "min", "max", "mean"
                )?;
                for s in &d.features {
                    writeln!(
                        f,
                        "  {:<20} {:>12.5} {:>12.5} {:>12.5}",
                        s.name, s.min, s.max, s.mean
                    )?;
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weekend_gaps_on_daily_bars() {
        let mut a = AssetBars::new("A");
        // Mon 2013-03-04 .. Fri 03-08, then Mon 03-11, then a holiday gap Wed 03-13 → Mon 03-18.
        let day = 86_400;
        let mon = 1_362_355_200;
        for d in [0, 1, 2, 3, 4, 7, 8, 9, 14] {
            a.timestamps.push(mon + d * day);
        }
        let g = gaps(&a);
        assert_eq!((g.count, g.weekends), (2, 1));
        assert_eq!(g.largest_seconds, 5 * day);
        assert_eq!(g.largest_after.as_deref(), Some("2013-03-13"));
    }

    #[test]
    fn bundled_sample_report() {
        let r = inspect(&[], &DatasetConfig::default()).unwrap();
        assert_eq!(r.assets.len(), 5);
        let d = r.dataset.as_ref().unwrap();
        assert_eq!(d.assets, BUNDLED_ASSETS);
        assert_eq!(d.bar_seconds, 86_400);
        let text = r.to_string();
        assert!(text.contains("rsi_14") && text.contains("GOOG"), "{text}");
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["dataset"]["bars"], d.bars);
    }
}
