//! Timestamps as market files write them, to Unix seconds (UTC).
//!
//! Accepted: ISO 8601 dates (`2013-03-01`), date-times with `T` or a space (`2013-03-01T15:30`,
//! `2013-03-01 15:30:00.250`), optionally with `Z` or a `±hh:mm` offset (converted to UTC; no
//! offset means UTC), and Unix epoch numbers in seconds, milliseconds, microseconds or
//! nanoseconds. The unit of an epoch number is told by its magnitude, as pandas and Binance's
//! own tools do: Binance klines use milliseconds, and since 2025 its spot archives use
//! microseconds (data.binance.vision changelog, 2025-01-01). An integer of exactly eight digits
//! that is a calendar date in the years 1900-2100 is a compact date `YYYYMMDD` (`20200102`, as
//! Stooq, CRSP and many vendors write dates) at midnight UTC, not Unix seconds in 1970; one that
//! starts like such a date but is not one (`20201332`) is refused.
//!
//! Times before 1900-01-01 or from 2200-01-01 on are refused: such a number is a garbled cell
//! or another unit, not a bar time, and later arithmetic on it would overflow.

use chrono::{NaiveDate, NaiveDateTime, NaiveTime};

/// Below this, an epoch number is seconds (1e11 s is the year 5138).
const MAX_SECONDS: f64 = 1e11;
/// Below this, milliseconds (1e14 ms is the year 5138 again).
const MAX_MILLIS: f64 = 1e14;
/// Below this, microseconds; above, nanoseconds.
const MAX_MICROS: f64 = 1e17;
/// 1900-01-01T00:00:00Z: the first time accepted.
const FIRST_SECS: i64 = -2_208_988_800;
/// 2200-01-01T00:00:00Z: the first time refused.
const END_SECS: i64 = 7_258_118_400;

/// Parses one timestamp cell into Unix seconds, or says what was expected.
///
/// Sub-second parts are truncated: bars are at least one second long.
pub fn parse_timestamp(cell: &str) -> Result<i64, String> {
    let s = cell.trim();
    if s.is_empty() {
        return Err("the timestamp is empty".into());
    }
    let first = s.as_bytes()[0];
    let looks_like_date = looks_like_date(s);
    let secs = if s.len() == 8 && s.bytes().all(|b| b.is_ascii_digit()) {
        parse_compact_date(s)?
    } else if !looks_like_date && (first.is_ascii_digit() || first == b'-' || first == b'+') {
        parse_epoch(s)?
    } else {
        parse_iso(s)?
    };
    if !(FIRST_SECS..END_SECS).contains(&secs) {
        return Err(format!(
            "'{s}' is not a plausible bar time ({}): times must lie between 1900-01-01 and \
             2200-01-01; epoch numbers are read as seconds, milliseconds, microseconds or \
             nanoseconds by their size",
            if (-62_135_596_800..253_402_300_800).contains(&secs) {
                format!("it reads as {}", format_timestamp(secs))
            } else {
                "far outside any calendar".to_string()
            }
        ));
    }
    Ok(secs)
}

/// Eight digits: `YYYYMMDD` when the first four are a year 1900-2100 (then it must be a
/// calendar date), else Unix seconds.
fn parse_compact_date(s: &str) -> Result<i64, String> {
    let year: i32 = s[..4]
        .parse()
        .map_err(|_| format!("'{s}' is not a timestamp"))?;
    if !(1900..=2100).contains(&year) {
        return parse_epoch(s);
    }
    let date = NaiveDate::parse_from_str(s, "%Y%m%d").map_err(|_| {
        format!(
            "'{s}' looks like a compact date YYYYMMDD, but year {}, month {}, day {} is no \
             calendar date; an epoch number needs another number of digits",
            &s[..4],
            &s[4..6],
            &s[6..]
        )
    })?;
    Ok(date.and_time(NaiveTime::MIN).and_utc().timestamp())
}

/// An epoch number; the unit from its magnitude.
fn parse_epoch(s: &str) -> Result<i64, String> {
    let expected = || {
        format!(
            "'{s}' is not a timestamp: expected an ISO date (2013-03-01), an ISO date-time \
             (2013-03-01T15:30:00Z) or Unix seconds/milliseconds"
        )
    };
    // Integers are parsed as integers so that 19-digit nanosecond stamps stay exact.
    if let Ok(v) = s.parse::<i64>() {
        let a = v.unsigned_abs() as f64;
        let secs = if a < MAX_SECONDS {
            v
        } else if a < MAX_MILLIS {
            v.div_euclid(1_000)
        } else if a < MAX_MICROS {
            v.div_euclid(1_000_000)
        } else {
            v.div_euclid(1_000_000_000)
        };
        return Ok(secs);
    }
    let v: f64 = s.parse().map_err(|_| expected())?;
    if !v.is_finite() {
        return Err(expected());
    }
    let a = v.abs();
    let secs = if a < MAX_SECONDS {
        v
    } else if a < MAX_MILLIS {
        v / 1e3
    } else if a < MAX_MICROS {
        v / 1e6
    } else {
        v / 1e9
    };
    Ok(secs.floor() as i64)
}

/// Whether the trimmed cell starts as an ISO date (`2013-03-01…`).
fn looks_like_date(s: &str) -> bool {
    s.len() >= 10 && s.as_bytes().get(4) == Some(&b'-')
}

/// Whether the timestamp cell holds a part of a second that [`parse_timestamp`] drops: an ISO
/// time with a fraction (`…15:30:00.250`), or an epoch number in milliseconds or finer (or a
/// fractional one) that is not a whole second.
pub fn has_sub_second(cell: &str) -> bool {
    let s = cell.trim();
    if looks_like_date(s) {
        // The fraction follows the seconds, before any offset.
        let time = s.get(10..).unwrap_or("");
        return time
            .split_once('.')
            .is_some_and(|(_, f)| f.bytes().take_while(u8::is_ascii_digit).any(|d| d != b'0'));
    }
    if let Ok(v) = s.parse::<i64>() {
        let a = v.unsigned_abs() as f64;
        let per_second: i64 = if a < MAX_SECONDS {
            1
        } else if a < MAX_MILLIS {
            1_000
        } else if a < MAX_MICROS {
            1_000_000
        } else {
            1_000_000_000
        };
        return v.rem_euclid(per_second) != 0;
    }
    s.parse::<f64>()
        .is_ok_and(|v| v.is_finite() && v.abs() < MAX_SECONDS && v.fract() != 0.0)
}

/// Whether the timestamp cell is an ISO date-time without `Z` or a `±hh:mm` offset: read as
/// UTC, where it may be local time (a date alone is a day, not a time of day).
pub fn without_offset(cell: &str) -> bool {
    let s = cell.trim();
    let Some(time) = s.get(10..).filter(|t| looks_like_date(s) && !t.is_empty()) else {
        return false;
    };
    // After the date's 'T' or space: a 'Z', or a sign after the hours, is an offset.
    let time = &time[1..];
    !(time.ends_with('Z') || time.ends_with('z') || time.contains('+') || time.contains('-'))
}

/// Excel's serial date of 1970-01-01 (days since 1899-12-30).
const EXCEL_1970: f64 = 25_569.0;
/// Excel's serial date of 2100-01-01.
const EXCEL_2100: f64 = 73_051.0;

/// What a number cell would be as an Excel serial date (days since 1899-12-30, the fraction
/// the time of day), where it is one of 1970-2099: such a cell read as Unix seconds falls on
/// 1970-01-01 between 07:06 and 20:17, a time no market file holds. A spreadsheet writes its
/// dates so to a CSV when the column is not formatted as dates. `None` for any other cell.
pub fn excel_serial_date(cell: &str) -> Option<String> {
    let s = cell.trim();
    if !s.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return None;
    }
    let days: f64 = s.parse().ok()?;
    if !(EXCEL_1970..EXCEL_2100).contains(&days) {
        return None;
    }
    let secs = ((days - EXCEL_1970) * 86_400.0).round() as i64;
    Some(format_timestamp(secs))
}

/// `YYYY-MM-DD[(T| )HH:MM[:SS[.fff]]][Z|±HH:MM|±HHMM]`.
fn parse_iso(s: &str) -> Result<i64, String> {
    let expected = || {
        format!(
            "'{s}' is not a timestamp: expected an ISO date (2013-03-01), an ISO date-time \
             (2013-03-01T15:30:00Z) or Unix seconds/milliseconds"
        )
    };
    if s.len() < 10 || !s.is_char_boundary(10) {
        return Err(expected());
    }
    let (date_part, rest) = s.split_at(10);
    let date = NaiveDate::parse_from_str(date_part, "%Y-%m-%d").map_err(|_| expected())?;
    if rest.is_empty() {
        return Ok(date.and_time(NaiveTime::MIN).and_utc().timestamp());
    }
    let rest = rest
        .strip_prefix('T')
        .or_else(|| rest.strip_prefix(' '))
        .ok_or_else(expected)?;
    // Split the time of day from a trailing zone designator.
    let (time_part, offset_secs) = split_offset(rest).ok_or_else(expected)?;
    // Drop a fractional part: bars are whole seconds.
    let time_part = time_part.split('.').next().unwrap_or(time_part);
    let time = NaiveTime::parse_from_str(time_part, "%H:%M:%S")
        .or_else(|_| NaiveTime::parse_from_str(time_part, "%H:%M"))
        .map_err(|_| expected())?;
    let local = NaiveDateTime::new(date, time).and_utc().timestamp();
    Ok(local - offset_secs)
}

/// Splits `HH:MM:SS.fff+02:00` into the time and the offset in seconds east of UTC.
fn split_offset(rest: &str) -> Option<(&str, i64)> {
    if let Some(t) = rest.strip_suffix('Z').or_else(|| rest.strip_suffix('z')) {
        return Some((t, 0));
    }
    // A sign after the first character starts an offset (the time itself has no sign).
    let Some(pos) = rest.rfind(['+', '-']).filter(|p| *p > 0) else {
        return Some((rest, 0));
    };
    let (time, zone) = rest.split_at(pos);
    let sign = if zone.starts_with('-') { -1 } else { 1 };
    let digits: String = zone[1..].chars().filter(|c| *c != ':').collect();
    if digits.len() != 4 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let h: i64 = digits[..2].parse().ok()?;
    let m: i64 = digits[2..].parse().ok()?;
    if h > 23 || m > 59 {
        return None;
    }
    Some((time, sign * (h * 3600 + m * 60)))
}

/// `2013-03-01` for a whole day at midnight UTC, else `2013-03-01T15:30:00Z`.
pub fn format_timestamp(secs: i64) -> String {
    match chrono::DateTime::from_timestamp(secs, 0) {
        Some(t) if secs.rem_euclid(86_400) == 0 => t.format("%Y-%m-%d").to_string(),
        Some(t) => t.format("%Y-%m-%dT%H:%M:%SZ").to_string(),
        None => secs.to_string(),
    }
}

/// A duration in seconds for people: `1d`, `5m`, `4h`, `2d 3h`, `45s`.
pub fn format_duration(secs: i64) -> String {
    if secs <= 0 {
        return format!("{secs}s");
    }
    let units = [(86_400, "d"), (3_600, "h"), (60, "m"), (1, "s")];
    let mut left = secs;
    let mut parts = Vec::new();
    for (size, name) in units {
        if left >= size {
            parts.push(format!("{}{name}", left / size));
            left %= size;
        }
        if parts.len() == 2 {
            break;
        }
    }
    parts.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_dates_and_datetimes() {
        assert_eq!(parse_timestamp("1970-01-01"), Ok(0));
        assert_eq!(parse_timestamp("2013-03-01"), Ok(1_362_096_000));
        assert_eq!(parse_timestamp("2013-03-01T00:00:00"), Ok(1_362_096_000));
        assert_eq!(parse_timestamp("2013-03-01 00:05"), Ok(1_362_096_300));
        assert_eq!(
            parse_timestamp("2013-03-01T00:05:07.999Z"),
            Ok(1_362_096_307)
        );
        assert_eq!(
            parse_timestamp("2013-03-01T02:00:00+02:00"),
            Ok(1_362_096_000)
        );
        assert_eq!(
            parse_timestamp("2013-02-28T19:00:00-0500"),
            Ok(1_362_096_000)
        );
        assert_eq!(parse_timestamp(" 2013-03-01 "), Ok(1_362_096_000));
    }

    #[test]
    fn epoch_units_by_magnitude() {
        assert_eq!(parse_timestamp("1362096000"), Ok(1_362_096_000));
        assert_eq!(parse_timestamp("1362096000000"), Ok(1_362_096_000));
        assert_eq!(parse_timestamp("1362096000000000"), Ok(1_362_096_000));
        assert_eq!(parse_timestamp("1362096000000000000"), Ok(1_362_096_000));
        assert_eq!(parse_timestamp("1362096000.75"), Ok(1_362_096_000));
        assert_eq!(parse_timestamp("0"), Ok(0));
        // Eight digits that are not a date of 1900-2100: seconds, as before.
        assert_eq!(parse_timestamp("12345678"), Ok(12_345_678));
    }

    /// `YYYYMMDD` is a date at midnight UTC, not Unix seconds in August 1970.
    #[test]
    fn compact_dates_are_dates() {
        assert_eq!(parse_timestamp("20200102"), Ok(1_577_923_200));
        assert_eq!(parse_timestamp("20200102"), parse_timestamp("2020-01-02"));
        assert_eq!(parse_timestamp("19000101"), Ok(-2_208_988_800));
        assert_eq!(parse_timestamp(" 21001231 "), parse_timestamp("2100-12-31"));
        for bad in ["20201332", "20200230", "19991300"] {
            let e = parse_timestamp(bad).unwrap_err();
            assert!(e.contains("YYYYMMDD") && e.contains(bad), "{bad}: {e}");
        }
    }

    /// Epoch numbers (and ISO dates) far outside 1900-2200 are refused, not read as seconds
    /// whose differences overflow later.
    #[test]
    fn implausible_times_are_refused() {
        for bad in [
            "9e27",
            "1e300",
            "-1e300",
            "9223372036854775807",
            "-9223372036854775808",
            "-3000000000",
            "7258118400",
            "1899-12-31",
            "2200-01-01",
        ] {
            let e = parse_timestamp(bad);
            assert!(
                e.as_ref()
                    .is_err_and(|m| m.contains("1900-01-01") && m.contains(bad)),
                "{bad:?} gave {e:?}"
            );
        }
        assert_eq!(parse_timestamp("1900-01-01"), Ok(-2_208_988_800));
        assert_eq!(parse_timestamp("2199-12-31"), Ok(7_258_032_000));
        assert_eq!(parse_timestamp("-86400"), Ok(-86_400));
    }

    #[test]
    fn rejects_what_is_not_a_time() {
        for bad in [
            "",
            "abc",
            "2013-02-30",
            "2013-13-01",
            "2013-03-01T25:00",
            "2013-03-01X00:00",
            "2013-03-01T00:00+2",
            "NaN",
            "inf",
            "01/03/2013",
        ] {
            let e = parse_timestamp(bad);
            assert!(e.is_err(), "{bad:?} gave {e:?}");
        }
    }

    /// Excel's serial dates of 1970-2099 are told; other numbers are not.
    #[test]
    fn excel_serial_dates_are_told() {
        assert_eq!(excel_serial_date("45000"), Some("2023-03-15".into()));
        assert_eq!(
            excel_serial_date(" 45000.5 "),
            Some("2023-03-15T12:00:00Z".into())
        );
        assert_eq!(excel_serial_date("25569"), Some("1970-01-01".into()));
        for other in [
            "25568",
            "73051",
            "1362096000",
            "20200102",
            "-45000",
            "4.5e4",
            "x",
            "",
        ] {
            assert_eq!(excel_serial_date(other), None, "{other:?}");
        }
    }

    #[test]
    fn formats_round_trip() {
        assert_eq!(format_timestamp(1_362_096_000), "2013-03-01");
        assert_eq!(format_timestamp(1_362_096_300), "2013-03-01T00:05:00Z");
        for s in [0, 1_362_096_000, 1_362_096_307, 1_700_000_000] {
            assert_eq!(parse_timestamp(&format_timestamp(s)), Ok(s));
        }
        assert_eq!(format_duration(86_400), "1d");
        assert_eq!(format_duration(300), "5m");
        assert_eq!(format_duration(3 * 86_400 + 7_200 + 5), "3d 2h");
    }
}
