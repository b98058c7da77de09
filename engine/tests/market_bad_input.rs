//! Bad market data: one test per case. Each must give an error (never a panic, never a partial
//! dataset) that names the file and, where the problem sits on one line or in one field, the
//! line and the field.

use std::io::Write;
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use tradetune_engine::market::features::FeatureSpec;
use tradetune_engine::market::read::read_file;
use tradetune_engine::market::{DataError, DatasetConfig};

const HEADER: &str = "date,open,high,low,close,volume\n";

/// `n` valid daily bars from `start_day` (Unix days), one per line.
fn rows(n: usize, start_day: i64) -> String {
    (0..n)
        .map(|i| {
            let p = 100.0 + (i as f64 * 0.7).sin() * 5.0;
            let date = chrono::DateTime::from_timestamp((start_day + i as i64) * 86_400, 0)
                .unwrap()
                .format("%Y-%m-%d");
            format!(
                "{date},{p},{},{},{},{}\n",
                p + 1.0,
                p - 1.0,
                p + 0.5,
                1000 + i
            )
        })
        .collect()
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::File::create(&p).unwrap().write_all(bytes).unwrap();
    p
}

/// A config that needs few bars, so small files make a dataset.
fn config(paths: Vec<PathBuf>) -> DatasetConfig {
    DatasetConfig {
        paths,
        features: vec![FeatureSpec::Return { period: 1 }],
        ..DatasetConfig::default()
    }
}

/// Loads `text` as one file and returns the error text, checking it names the file.
fn load_err(name: &str, text: &[u8]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), name, text);
    let e = config(vec![path]).load().unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains(name),
        "the error does not name the file: {msg}"
    );
    msg
}

fn assert_has(msg: &str, parts: &[&str]) {
    for p in parts {
        assert!(msg.contains(p), "{p:?} missing from: {msg}");
    }
}

#[test]
fn missing_file() {
    let e = config(vec!["no/such/dir/prices.csv".into()])
        .load()
        .unwrap_err();
    assert!(matches!(e, DataError::Input { line: None, .. }));
    assert_has(&e.to_string(), &["no/such/dir/prices.csv", "no such file"]);
}

#[test]
fn empty_file() {
    let msg = load_err("empty.csv", b"");
    assert_has(&msg, &["the file is empty"]);
}

#[test]
fn header_without_rows() {
    let msg = load_err("header.csv", HEADER.as_bytes());
    assert_has(&msg, &["line 1", "header but no rows"]);
}

#[test]
fn missing_column() {
    let text = "date,open,high,low,volume\n2020-01-01,1,1,1,1\n";
    let msg = load_err("noclose.csv", text.as_bytes());
    assert_has(
        &msg,
        &[
            "line 1",
            "field 'close'",
            "missing column 'close'",
            "date, open, high",
        ],
    );
}

#[test]
fn unparsable_number() {
    let text = format!("{HEADER}{}2020-02-01,1,2,x1,1,5\n", rows(3, 18_000));
    let msg = load_err("letters.csv", text.as_bytes());
    assert_has(&msg, &["line 5", "field 'low'", "'x1' is not a number"]);
}

#[test]
fn unparsable_timestamp() {
    let text = format!("{HEADER}{}03/02/2020,1,2,1,1,5\n", rows(2, 18_000));
    let msg = load_err("dates.csv", text.as_bytes());
    assert_has(&msg, &["line 4", "field 'date'", "not a timestamp"]);
}

#[test]
fn nan_value() {
    let text = format!("{HEADER}{}2020-02-01,1,2,1,NaN,5\n", rows(3, 18_000));
    let msg = load_err("nan.csv", text.as_bytes());
    assert_has(&msg, &["line 5", "field 'close'", "NaN"]);
}

#[test]
fn infinite_value() {
    let text = format!("{HEADER}2020-02-01,1,inf,1,1,5\n");
    let msg = load_err("inf.csv", text.as_bytes());
    assert_has(&msg, &["line 2", "field 'high'", "infinity"]);
}

#[test]
fn zero_price() {
    let text = format!("{HEADER}{}2020-02-01,0,2,1,1,5\n", rows(1, 18_000));
    let msg = load_err("zero.csv", text.as_bytes());
    assert_has(&msg, &["line 3", "field 'open'", "not positive"]);
}

/// A positive price so small that the environment's holdings (value / price, in f32)
/// would overflow to infinity, or too large for an f32, is refused at import, naming the
/// file, the line and the field.
#[test]
fn price_too_small_or_large_for_f32() {
    let text = format!("{HEADER}{}2020-02-01,1,2,1,1e-40,5\n", rows(1, 18_000));
    let msg = load_err("tiny.csv", text.as_bytes());
    assert_has(
        &msg,
        &[
            "tiny.csv",
            "line 3",
            "field 'close'",
            "1e-40",
            "outside the range",
        ],
    );
    let text = format!("{HEADER}2020-02-01,1,1e39,1,1,5\n");
    let msg = load_err("huge.csv", text.as_bytes());
    assert_has(
        &msg,
        &["huge.csv", "line 2", "field 'high'", "outside the range"],
    );
}

#[test]
fn negative_price() {
    let text = format!("{HEADER}2020-02-01,1,2,1,-3.5,5\n");
    let msg = load_err("negative.csv", text.as_bytes());
    assert_has(&msg, &["line 2", "field 'close'", "-3.5 is not positive"]);
}

#[test]
fn negative_adjusted_close() {
    let text = "date,open,high,low,close,volume,adj_close\n2020-02-01,1,2,1,1,5,-1\n";
    let msg = load_err("adj.csv", text.as_bytes());
    assert_has(&msg, &["line 2", "field 'adj_close'", "not positive"]);
}

#[test]
fn negative_volume() {
    let text = format!("{HEADER}2020-02-01,1,2,1,1,-5\n");
    let msg = load_err("volume.csv", text.as_bytes());
    assert_has(&msg, &["line 2", "field 'volume'", "negative"]);
}

#[test]
fn high_below_low() {
    let text = format!("{HEADER}{}2020-02-01,1,1,2,1.5,5\n", rows(2, 18_000));
    let msg = load_err("inverted.csv", text.as_bytes());
    assert_has(&msg, &["line 4", "field 'high'", "high 1 is below low 2"]);
}

/// An open or close outside its bar's low–high range (columns in the wrong order, a bad print)
/// is refused on its line, naming the field and both values.
#[test]
fn open_outside_low_to_high() {
    let text = format!("{HEADER}{}2020-02-01,8.5,11,9,10,100\n", rows(2, 18_000));
    let msg = load_err("open.csv", text.as_bytes());
    assert_has(
        &msg,
        &[
            "line 4",
            "field 'open'",
            "open 8.5 is below low 9",
            "wrong order",
        ],
    );
}

#[test]
fn close_outside_low_to_high() {
    let text = format!(
        "Date,Open,High,Low,Close,Volume\n{}2020-01-02,10,11,9,12,100\n",
        rows(1, 18_000)
    );
    let msg = load_err("close.csv", text.as_bytes());
    assert_has(
        &msg,
        &[
            "line 3",
            "field 'Close'",
            "close 12 is above high 11",
            "wrong order",
        ],
    );
}

#[test]
fn duplicate_timestamp() {
    let mut text = format!("{HEADER}{}", rows(4, 18_000));
    let last = text.lines().last().unwrap().to_owned();
    text.push_str(&last);
    text.push('\n');
    let msg = load_err("dup.csv", text.as_bytes());
    assert_has(
        &msg,
        &[
            "line 6",
            "field 'date'",
            "duplicates the previous bar",
            "line 5",
        ],
    );
}

/// A spreadsheet's dates saved as numbers (Excel serial days) are refused with the dates they
/// are, not read as seconds on 1970-01-01; intraday ones (a fraction of a day apart) that
/// fall on one second say so in the ordering error.
#[test]
fn excel_serial_dates() {
    let text = format!("{HEADER}45000,10,11,9,10,5\n45001,10,11,9,10,5\n45002,10,11,9,10,5\n");
    let msg = load_err("excel.csv", text.as_bytes());
    assert_has(
        &msg,
        &[
            "line 2",
            "field 'date'",
            "1970-01-01T12:30:00Z",
            "Excel serial dates",
            "'45000' is 2023-03-15",
            "yyyy-mm-dd",
        ],
    );
    let text = format!("{HEADER}45000.25,10,11,9,10,5\n45000.2507,10,11,9,10,5\n");
    let msg = load_err("intraday.csv", text.as_bytes());
    assert_has(
        &msg,
        &[
            "line 3",
            "duplicates the previous bar",
            "'45000.2507' looks like an Excel serial date, 2023-03-15T06:01:00Z as one",
        ],
    );
    // A file whose times only pass through those numbers, or lie among them a minute or more
    // apart (a session's seconds of the day), or are one bar, is seconds, as before.
    let dir = tempfile::tempdir().unwrap();
    for (name, times) in [
        ("passing.csv", vec![20_000, 30_000]),
        ("session.csv", vec![34_200, 34_260, 34_320]),
        ("one.csv", vec![45_000]),
    ] {
        let rows: String = times
            .iter()
            .map(|t| format!("{t},10,11,9,10,5\n"))
            .collect();
        let bars = read_file(&write(
            dir.path(),
            name,
            format!("{HEADER}{rows}").as_bytes(),
        ));
        assert_eq!(bars.unwrap().assets[0].timestamps, times, "{name}");
    }
}

/// Bars under a second apart, and local times read across a daylight-saving change, are
/// refused with what they may be; a file in UTC or with offsets, or of daily bars, gets no hint.
#[test]
fn times_out_of_order_say_what_they_may_be() {
    let rows = |times: &[&str]| -> String {
        let rows: String = times
            .iter()
            .map(|t| format!("{t},10,11,9,10,5\n"))
            .collect();
        format!("{HEADER}{rows}")
    };
    let msg = load_err(
        "ticks.csv",
        rows(&["2020-01-02 09:30:00.100", "2020-01-02 09:30:00.600"]).as_bytes(),
    );
    assert_has(
        &msg,
        &[
            "line 3",
            "duplicates the previous bar",
            "read in whole seconds",
        ],
    );
    let msg = load_err(
        "millis.csv",
        rows(&["1577957400100", "1577957400600"]).as_bytes(),
    );
    assert_has(
        &msg,
        &["duplicates the previous bar", "read in whole seconds"],
    );
    // Local times at the autumn change: 02:59, then 02:00 again.
    let msg = load_err(
        "local.csv",
        rows(&["2020-10-25 02:30", "2020-10-25 02:59", "2020-10-25 02:00"]).as_bytes(),
    );
    assert_has(
        &msg,
        &[
            "line 4",
            "is before the previous bar",
            "no UTC offset",
            "daylight-saving",
        ],
    );
    for (name, times) in [
        (
            "offset.csv",
            ["2020-10-25T02:59:00+02:00", "2020-10-25T02:00:00+02:00"],
        ),
        ("days.csv", ["2020-10-26", "2020-10-25"]),
        ("whole.csv", ["2020-01-02 09:30:00", "2020-01-02 09:30:00"]),
    ] {
        let msg = load_err(name, rows(&times).as_bytes());
        assert!(
            !msg.contains("whole seconds") && !msg.contains("daylight-saving"),
            "{name}: {msg}"
        );
    }
}

#[test]
fn decreasing_timestamp() {
    let text = format!("{HEADER}{}{}", rows(3, 18_010), rows(1, 18_000));
    let msg = load_err("backwards.csv", text.as_bytes());
    assert_has(
        &msg,
        &[
            "line 5",
            "field 'date'",
            "is before the previous bar",
            "line 4",
        ],
    );
}

#[test]
fn decreasing_timestamp_of_one_ticker_in_a_long_file() {
    let text = "symbol,timestamp,open,high,low,close,volume\n\
                A,2020-01-02,1,1,1,1,1\nB,2020-01-01,1,1,1,1,1\nA,2020-01-01,1,1,1,1,1\n";
    let msg = load_err("long.csv", text.as_bytes());
    assert_has(
        &msg,
        &["line 4", "field 'timestamp'", "previous bar of A on line 2"],
    );
}

#[test]
fn short_row() {
    let text = format!("{HEADER}{}2020-02-01,1,2\n", rows(2, 18_000));
    let msg = load_err("short.csv", text.as_bytes());
    assert_has(&msg, &["line 4", "3 fields, 6 expected"]);
}

#[test]
fn empty_ticker() {
    let text = "ticker,date,open,high,low,close,volume\n,2020-01-02,1,1,1,1,1\n";
    let msg = load_err("noticker.csv", text.as_bytes());
    assert_has(&msg, &["line 2", "field 'ticker'", "empty"]);
}

#[test]
fn no_header() {
    let msg = load_err("headless.csv", rows(3, 18_000).as_bytes());
    assert_has(&msg, &["line 1", "not a header", "add a header line"]);
}

#[test]
fn not_utf8() {
    let mut text = format!("{HEADER}{}", rows(2, 18_000)).into_bytes();
    text.extend_from_slice(b"2020-02-01,1,2,1,1,\xff\xfe\n");
    let msg = load_err("latin1.csv", &text);
    assert_has(&msg, &["line 4", "not UTF-8"]);
}

#[test]
fn asset_with_no_overlap() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(
        dir.path(),
        "A.csv",
        format!("{HEADER}{}", rows(100, 18_000)).as_bytes(),
    );
    let b = write(
        dir.path(),
        "B.csv",
        format!("{HEADER}{}", rows(100, 18_050)).as_bytes(),
    );
    let late = write(
        dir.path(),
        "LATE.csv",
        format!("{HEADER}{}", rows(100, 19_000)).as_bytes(),
    );
    // A and B overlap on 50 days; LATE starts long after both end.
    let e = config(vec![a.clone(), late, b.clone()])
        .load()
        .unwrap_err()
        .to_string();
    assert_has(
        &e,
        &[
            "asset LATE (",
            "LATE.csv",
            "2022-01-08 to",
            "no timestamp in common",
            "share 50 bars",
        ],
    );
    // Without it they load.
    assert_eq!(config(vec![a, b]).load().unwrap().alignment.common_bars, 50);
}

#[test]
fn fewer_bars_than_lookback_and_one_episode() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        dir.path(),
        "small.csv",
        format!("{HEADER}{}", rows(120, 18_000)).as_bytes(),
    );
    let cfg = DatasetConfig {
        lookback: 10,
        episode_bars: 100,
        ..config(vec![p.clone()])
    };
    // 120 bars − 1 warm-up = 119, of which 70 % = 83 train bars < 10 + 100.
    let e = cfg.load().unwrap_err().to_string();
    assert_has(
        &e,
        &[
            "small.csv",
            "the training split has 83 bars",
            "need 110",
            "1 of them are indicator warm-up",
        ],
    );
    let whole = DatasetConfig {
        lookback: 200,
        ..config(vec![p])
    };
    let e = whole.load().unwrap_err().to_string();
    assert_has(&e, &["after warm-up has 119 bars", "need 201"]);
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

#[test]
fn gzip_reads_transparently() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!("{HEADER}{}", rows(50, 18_000));
    // The name does not say gzip: the magic bytes do.
    let p = write(dir.path(), "ZIPPED.csv", &gzip(text.as_bytes()));
    let plain = write(dir.path(), "PLAIN.csv", text.as_bytes());
    assert_eq!(
        read_file(&p).unwrap().assets[0].close,
        read_file(&plain).unwrap().assets[0].close
    );
}

#[test]
fn corrupt_gzip() {
    let text = format!("{HEADER}{}", rows(2_000, 18_000));
    let mut gz = gzip(text.as_bytes());
    let mid = gz.len() / 2;
    for b in &mut gz[mid..mid + 64] {
        *b ^= 0x5a;
    }
    let msg = load_err("corrupt.csv.gz", &gz);
    assert_has(&msg, &["gzip data is corrupt", "nothing was loaded"]);
}

#[test]
fn truncated_gzip() {
    let text = format!("{HEADER}{}", rows(2_000, 18_000));
    let gz = gzip(text.as_bytes());
    let msg = load_err("cut.csv.gz", &gz[..gz.len() * 2 / 3]);
    assert_has(&msg, &["gzip data is corrupt or truncated", "after line"]);
}

#[test]
fn gzip_magic_with_garbage() {
    let msg = load_err("fake.gz", b"\x1f\x8bthis is not deflate data at all");
    assert_has(&msg, &["gzip data is corrupt"]);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Any corruption of a valid file gives a dataset or an error naming the file: never a
    /// panic.
    #[test]
    fn mutated_files_never_panic(
        edits in proptest::collection::vec((0usize..4_000, any::<u8>()), 1..8),
        cut in 0usize..4_000,
        zip in any::<bool>(),
    ) {
        let mut bytes = format!("{HEADER}{}", rows(60, 18_000)).into_bytes();
        for (at, b) in edits {
            let i = at % bytes.len();
            bytes[i] = b;
        }
        bytes.truncate(cut.max(1));
        if zip {
            let mut gz = gzip(&bytes);
            let n = gz.len();
            gz[n / 2] ^= 0x10;
            bytes = gz;
        }
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "fuzz.csv", &bytes);
        if let Err(e) = config(vec![p]).load() {
            let msg = e.to_string();
            prop_assert!(msg.contains("fuzz.csv"), "{}", msg);
        }
    }
}
