//! Datetimes as Optuna's RDB storage keeps them: naive UTC text.
//!
//! Optuna 5.0 (`storages/_rdb/models.py`, `TrialModel`) stores `datetime_start` and
//! `datetime_complete` as naive UTC, and SQLAlchemy's SQLite `DATETIME` type writes them as
//! `YYYY-MM-DD HH:MM:SS.ffffff` (always six fraction digits). Heartbeats are written by
//! SQLite's `CURRENT_TIMESTAMP`, which has no fraction. Both forms are read.

use chrono::{DateTime, Local, NaiveDateTime, Timelike, Utc};

/// SQLAlchemy's SQLite DATETIME storage format.
const FORMAT: &str = "%Y-%m-%d %H:%M:%S%.6f";

/// The current time as naive UTC, truncated to microseconds (what the column can hold).
pub fn now_utc() -> NaiveDateTime {
    let now = Utc::now().naive_utc();
    let micros = now.nanosecond() / 1_000 * 1_000;
    now.with_nanosecond(micros).unwrap_or(now)
}

/// `2026-11-22 03:54:35.570797`.
pub fn format_naive(t: NaiveDateTime) -> String {
    t.format(FORMAT).to_string()
}

/// Parses the stored text (with or without a fraction, `T` or space separated).
pub fn parse_naive(text: &str) -> Option<NaiveDateTime> {
    let text = text.trim();
    ["%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d"]
        .iter()
        .find_map(|f| {
            NaiveDateTime::parse_from_str(text, f).ok().or_else(|| {
                chrono::NaiveDate::parse_from_str(text, f)
                    .ok()
                    .and_then(|d| d.and_hms_opt(0, 0, 0))
            })
        })
}

/// Naive UTC → naive local time, which is what Optuna's `FrozenTrial` (and so its
/// `trials_dataframe()`) shows.
pub fn utc_to_local(t: NaiveDateTime) -> NaiveDateTime {
    DateTime::<Utc>::from_naive_utc_and_offset(t, Utc)
        .with_timezone(&Local)
        .naive_local()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_optuna_and_sqlite_forms() {
        let t = parse_naive("2026-11-22 03:54:35.570797").unwrap();
        assert_eq!(format_naive(t), "2026-11-22 03:54:35.570797");
        let h = parse_naive("2026-11-22 03:54:37").unwrap();
        assert_eq!(format_naive(h), "2026-11-22 03:54:37.000000");
        assert!(parse_naive("22/11/2026").is_none());
        assert_eq!(format_naive(now_utc()).len(), 26);
    }
}
