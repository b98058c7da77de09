//! What is in a set of market files: per asset its bars, dates, bar length and gaps; then the
//! dataset they make (alignment, warm-up, split, feature ranges). Behind `tradetune data
//! inspect`.

use std::path::PathBuf;

use serde::Serialize;

use crate::align::AlignReport;
use crate::dataset::median_spacing;
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

/// The day of the week of Unix time `t` in UTC, 0 = Sunday (Unix day 0, 1970-01-01, was a
/// Thursday).
fn weekday(t: i64) -> i64 {
    (t.div_euclid(86_400) + 4).rem_euclid(7)
}

/// The gaps [`long_gaps`] counts are longer than this many of the asset's bars (its median
/// spacing)...
pub const LONG_GAP_BARS: i64 = 10;

/// ...and, where the asset trades in sessions (no weekend bars), longer than this as well:
/// a night, a weekend, or a holiday beside one, is up to 4 days.
pub const LONG_GAP_SESSIONS_SECONDS: i64 = 4 * 86_400;

/// One asset's gaps much longer than its bars ([`long_gaps`]): what loading the data for
/// `train` or `study` notes, one line an asset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LongGaps {
    /// How many there are.
    pub count: usize,
    /// A spacing longer than this, seconds, is one.
    pub threshold: i64,
    /// The asset's median spacing, seconds.
    pub bar_seconds: i64,
    /// The longest, seconds, and the times of the bars before and after it.
    pub longest: i64,
    pub from: i64,
    pub to: i64,
}

/// The gaps of one asset's `timestamps` (strictly increasing) much longer than its bars:
/// spacings over [`LONG_GAP_BARS`] median spacings, and, where under a tenth of the bars fall
/// on a Saturday or Sunday (UTC; a market with sessions, whose nights, weekends and holidays
/// are no gaps in its data), over [`LONG_GAP_SESSIONS_SECONDS`] too. None without one. Returns
/// and indicators span such a gap as if it were one bar.
pub fn long_gaps(timestamps: &[i64]) -> Option<LongGaps> {
    let bar = median_spacing(timestamps);
    if bar <= 0 {
        return None;
    }
    let weekend = (timestamps.iter())
        .filter(|&&t| matches!(weekday(t), 0 | 6))
        .count();
    let sessions = weekend.saturating_mul(10) < timestamps.len();
    let mut threshold = bar.saturating_mul(LONG_GAP_BARS);
    if sessions {
        threshold = threshold.max(LONG_GAP_SESSIONS_SECONDS);
    }
    let mut out: Option<LongGaps> = None;
    for w in timestamps.windows(2) {
        let d = w[1] - w[0];
        if d <= threshold {
            continue;
        }
        let g = out.get_or_insert(LongGaps {
            count: 0,
            threshold,
            bar_seconds: bar,
            longest: 0,
            from: w[0],
            to: w[1],
        });
        g.count += 1;
        if d > g.longest {
            (g.longest, g.from, g.to) = (d, w[0], w[1]);
        }
    }
    out
}

impl LongGaps {
    /// One line for people about `asset`'s gaps.
    pub fn note(&self, asset: &str) -> String {
        let gaps = if self.count == 1 {
            "a gap".to_owned()
        } else {
            format!("{} gaps", self.count)
        };
        format!(
            "{asset} has {gaps} longer than {} in its bars of {}, the longest {} from {} to {}: \
             returns and indicators span a gap as if it were one bar (`tradetune data inspect` \
             shows each asset's gaps)",
            format_duration(self.threshold),
            format_duration(self.bar_seconds),
            format_duration(self.longest),
            format_timestamp(self.from),
            format_timestamp(self.to)
        )
    }
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

    /// Daily bars of a market with sessions: weekends and a 6-day holiday break are no long
    /// gaps; a missing fortnight is one, and a missing five weeks the longest.
    #[test]
    fn long_gaps_of_daily_bars_skip_weekends_and_holidays() {
        let day = 86_400;
        let mon = 1_362_355_200; // Monday 2013-03-04
        let weekdays = |weeks: std::ops::Range<i64>| {
            weeks.flat_map(move |w| (0..5).map(move |d| mon + (7 * w + d) * day))
        };
        // Weeks 0-9 (Wednesday to Friday of week 2 off), weeks 10-11 missing, 12-19, weeks
        // 20-24 missing, 25-29.
        let ts: Vec<i64> = weekdays(0..10)
            .filter(|&t| !(t >= mon + 16 * day && t <= mon + 18 * day))
            .chain(weekdays(12..20))
            .chain(weekdays(25..30))
            .collect();
        let g = long_gaps(&ts).unwrap();
        assert_eq!((g.count, g.bar_seconds, g.threshold), (2, day, 10 * day));
        assert_eq!(g.longest, 38 * day);
        assert_eq!(
            (format_timestamp(g.from), format_timestamp(g.to)),
            ("2013-07-19".to_owned(), "2013-08-26".to_owned())
        );
        let note = g.note("AAPL");
        for part in [
            "AAPL has 2 gaps longer than 10d in its bars of 1d",
            "the longest 38d from 2013-07-19 to 2013-08-26",
            "as if it were one bar",
        ] {
            assert!(note.contains(part), "{part:?} missing from: {note}");
        }
        // Without the missing weeks nothing is noted.
        let whole: Vec<i64> = weekdays(0..30).collect();
        assert_eq!(long_gaps(&whole), None);
    }

    /// Hourly bars of a session market (6 a day, Monday to Friday): nights and weekends are
    /// no gaps. Minute bars traded around the clock: a 2-hour and a 15-minute hole are.
    #[test]
    fn long_gaps_of_intraday_bars_with_and_without_sessions() {
        let mon = 1_362_355_200 + 14 * 3_600;
        let sessions: Vec<i64> = (0..4 * 7)
            .filter(|d| d % 7 < 5)
            .flat_map(|d| (0..6).map(move |h| mon + d * 86_400 + h * 3_600))
            .collect();
        assert_eq!(long_gaps(&sessions), None);
        let minutes: Vec<i64> = (0..20_000)
            .filter(|m| !(1_000..1_120).contains(m) && !(5_000..5_015).contains(m))
            .map(|m| mon + m * 60)
            .collect();
        let g = long_gaps(&minutes).unwrap();
        assert_eq!((g.count, g.threshold, g.longest), (2, 600, 121 * 60));
        assert_eq!(g.from, mon + 999 * 60);
        assert!(
            g.note("BTCUSDT")
                .contains("2 gaps longer than 10m in its bars of 1m")
        );
        assert_eq!(long_gaps(&minutes[..900]), None);
        assert_eq!(long_gaps(&[mon]), None);
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
