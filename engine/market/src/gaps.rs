//! An asset's gaps much longer than its bars: what loading data for `train`, `study` or a
//! backtest notes (one line an asset), and `data inspect` beside each asset's gaps. Apart from
//! [`crate::inspect`], which reads files through [`crate::load`], so that the loader can use
//! it.

use crate::dataset::median_spacing;
use crate::time::{format_duration, format_timestamp};

/// The day of the week of Unix time `t` in UTC, 0 = Sunday (Unix day 0, 1970-01-01, was a
/// Thursday).
pub(crate) fn weekday(t: i64) -> i64 {
    (t.div_euclid(86_400) + 4).rem_euclid(7)
}

/// The gaps [`long_gaps`] counts are longer than this many of the asset's bars (its median
/// spacing)...
pub const LONG_GAP_BARS: i64 = 10;

/// ...and, where the asset trades in sessions (no weekend bars), longer than this as well:
/// a night, a weekend, or holidays beside one (Easter's Good Friday and Monday: Thursday's
/// close to Tuesday's open, 4 days and more; Christmas and Boxing Day around a weekend), is
/// up to 6 days.
pub const LONG_GAP_SESSIONS_SECONDS: i64 = 6 * 86_400;

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

#[cfg(test)]
mod tests {
    use super::*;

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

    /// Hourly bars of a session market (6 a day, Monday to Friday): nights, weekends and
    /// Easter (Good Friday and Easter Monday off) are no gaps. Minute bars traded around the
    /// clock: a 2-hour and a 15-minute hole are.
    #[test]
    fn long_gaps_of_intraday_bars_with_and_without_sessions() {
        let mon = 1_362_355_200 + 14 * 3_600;
        let sessions: Vec<i64> = (0..4 * 7)
            .filter(|d| d % 7 < 5)
            .flat_map(|d| (0..6).map(move |h| mon + d * 86_400 + h * 3_600))
            .collect();
        assert_eq!(long_gaps(&sessions), None);
        let easter: Vec<i64> = (sessions.iter().copied())
            .filter(|&t| !(mon + 11 * 86_400..mon + 15 * 86_400).contains(&t))
            .collect();
        assert_eq!(easter.len(), sessions.len() - 12);
        assert_eq!(long_gaps(&easter), None);
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
}
