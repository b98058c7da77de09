//! CSV readers for the shapes market data comes in:
//!
//! - **one asset per file** with a header: a time column (`timestamp`, `open_time`, `datetime`,
//!   `date` or `time`), `open`, `high`, `low`, `close`, `volume`, optionally `adj_close`;
//! - **long**: the same plus a `ticker` or `symbol` column, many assets in one file (the bundled
//!   Quandl sample);
//! - **Binance kline exports** (data.binance.vision): no header, 12 columns, the open time in
//!   milliseconds (microseconds since 2025) first. Futures klines have had a header
//!   (`open_time,…,close_time,…`) since 2022-05; such a file is read by its header and its
//!   asset named as a header-less one's (`BTCUSDT-1m-2023-01.csv` holds `BTCUSDT`).
//!
//! Separate `date` and `time` columns (and no `timestamp`, `open_time` or `datetime` column)
//! are read together as one time, `{date}T{time}`.
//!
//! Column names are matched case-insensitively, with spaces, dashes and dots read as `_`
//! (`Adj Close` is `adj_close`). Fields are separated by commas, or by tabs or semicolons when
//! the first line has no comma. Files may be gzip-compressed whatever their name. Every row is
//! checked (numbers finite, prices positive and from 1e-12 to about 3.4e38, high ≥ low, open
//! and close from low to high, volume ≥ 0, time strictly increasing per asset); the first
//! problem aborts the read with an error naming the file, the line and the field, so a file is
//! either loaded whole or not at all.
//!
//! With an `adj_close` column, OHLC are multiplied by `adj_close / close` (the split and dividend
//! adjustment the source computed) and volume divided by it, so that prices are continuous
//! across splits and the traded value `close × volume` of each bar is unchanged.

use std::collections::HashMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};

use crate::source::{BINANCE_COLUMNS, Source, asset_name_from_path};
use crate::time::{
    excel_serial_date, format_timestamp, has_sub_second, parse_timestamp, without_offset,
};
use crate::{AssetBars, DataError};

/// How a file was laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FileFormat {
    /// One asset, with a header.
    PerAsset,
    /// Many assets, with a `ticker`/`symbol` column.
    Long,
    /// Binance kline export without header.
    BinanceKlines,
}

/// The assets read from one file.
#[derive(Debug, Clone)]
pub struct FileBars {
    pub path: PathBuf,
    pub format: FileFormat,
    /// In order of first appearance in the file.
    pub assets: Vec<AssetBars>,
}

/// One asset gathered from one or more files.
#[derive(Debug, Clone)]
pub struct SourcedBars {
    pub bars: AssetBars,
    /// The files its bars came from, in time order.
    pub paths: Vec<PathBuf>,
}

/// Accepted names of each column, after normalisation, in order of preference.
const TIME_NAMES: [&str; 6] = [
    "timestamp",
    "open_time",
    "datetime",
    "date_time",
    "date",
    "time",
];
const TICKER_NAMES: [&str; 2] = ["ticker", "symbol"];
const ADJ_NAMES: [&str; 3] = ["adj_close", "adjclose", "adjusted_close"];
const BINANCE_NAMES: [&str; 6] = ["open_time", "open", "high", "low", "close", "volume"];

/// Reads one market file (any of the three shapes, plain or gzip).
pub fn read_file(path: &Path) -> Result<FileBars, DataError> {
    read_source(Source::open(path)?)
}

/// Reads market data held in memory, reporting errors under `path`.
pub fn read_bytes(path: &Path, bytes: &'static [u8]) -> Result<FileBars, DataError> {
    read_source(Source::from_bytes(path, bytes)?)
}

/// Reads several files and gathers each asset's bars: the same asset in several files (monthly
/// Binance exports, say) is joined in time order, and its files must not overlap in time.
pub fn read_files(paths: &[PathBuf]) -> Result<Vec<SourcedBars>, DataError> {
    let files = paths
        .iter()
        .map(|p| read_file(p))
        .collect::<Result<Vec<_>, _>>()?;
    merge_files(files)
}

/// Joins the assets of several files by name (see [`read_files`]).
pub fn merge_files(files: Vec<FileBars>) -> Result<Vec<SourcedBars>, DataError> {
    let mut order: Vec<String> = Vec::new();
    let mut parts: HashMap<String, Vec<(PathBuf, AssetBars)>> = HashMap::new();
    for file in files {
        for bars in file.assets {
            let entry = parts.entry(bars.name.clone()).or_default();
            if entry.is_empty() {
                order.push(bars.name.clone());
            }
            entry.push((file.path.clone(), bars));
        }
    }
    let mut out = Vec::with_capacity(order.len());
    for name in order {
        let mut pieces = parts.remove(&name).unwrap_or_default();
        // Readers never return an empty asset, so `timestamps[0]` exists.
        pieces.sort_by_key(|(_, b)| b.timestamps.first().copied().unwrap_or(i64::MIN));
        let mut iter = pieces.into_iter();
        let Some((first_path, mut bars)) = iter.next() else {
            continue;
        };
        let mut paths = vec![first_path];
        for (path, next) in iter {
            let (prev_last, next_first) = (
                bars.timestamps.last().copied().unwrap_or(i64::MIN),
                next.timestamps.first().copied().unwrap_or(i64::MAX),
            );
            if next_first <= prev_last {
                let earlier = paths.last().cloned().unwrap_or_default();
                // Two files named alike in two folders (`AAPL/daily.csv`, `MSFT/daily.csv`) are
                // one asset by their name, which may not be what they hold.
                let named_after_files = [&earlier, &path]
                    .iter()
                    .all(|p| crate::source::asset_name_from_path(p, false) == name);
                let hint = if named_after_files {
                    format!(
                        "; if they hold different assets: a file without a ticker column is \
                         named after its file (both are '{name}'), so rename one of them or \
                         add a ticker column"
                    )
                } else {
                    String::new()
                };
                return Err(DataError::input(
                    &path,
                    None,
                    None,
                    format!(
                        "asset {name} is also in {} and the two overlap in time ({} ≤ {}): \
                         give each period once{hint}",
                        earlier.display(),
                        format_timestamp(next_first),
                        format_timestamp(prev_last)
                    ),
                ));
            }
            bars.timestamps.extend(&next.timestamps);
            bars.open.extend(&next.open);
            bars.high.extend(&next.high);
            bars.low.extend(&next.low);
            bars.close.extend(&next.close);
            bars.volume.extend(&next.volume);
            paths.push(path);
        }
        out.push(SourcedBars { bars, paths });
    }
    Ok(out)
}

/// Column positions of one file and the names to use in error messages.
struct Layout {
    format: FileFormat,
    time: usize,
    ohlcv: [usize; 5],
    adj_close: Option<usize>,
    ticker: Option<usize>,
    /// The `time` column of a file whose `date` column is `time` above: the time of day.
    time_of_day: Option<usize>,
    /// The asset is named as in a Binance export (the file name up to its first `-`).
    binance_name: bool,
    /// Header name of every column (Binance: the documented names).
    names: Vec<String>,
    /// Fields a row must have: one past the largest index used.
    min_fields: usize,
}

/// `Adj Close` → `adj_close`; strips a UTF-8 byte-order mark and quotes.
fn normalise(name: &str) -> String {
    name.trim_start_matches('\u{feff}')
        .trim()
        .trim_matches('"')
        .to_ascii_lowercase()
        .chars()
        .map(|c| if matches!(c, ' ' | '-' | '.') { '_' } else { c })
        .collect()
}

type CsvReader = csv::Reader<Box<dyn std::io::Read>>;

fn read_source(mut source: Source) -> Result<FileBars, DataError> {
    // The csv reader owns the byte stream; `source` keeps what error messages need.
    let reader = std::mem::replace(&mut source.reader, Box::new(std::io::empty()));
    // The separator is told by the first line: tabs (`.tsv`) or semicolons (European exports)
    // when it has no comma.
    let mut reader = std::io::BufReader::with_capacity(64 * 1024, reader);
    let delimiter = match reader.fill_buf() {
        Ok(buf) => delimiter_of(buf),
        Err(e) => return Err(source.read_error(Some(1), &e)),
    };
    let reader: Box<dyn std::io::Read> = Box::new(reader);
    let mut csv = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .trim(csv::Trim::All)
        .delimiter(delimiter)
        .from_reader(reader);
    match parse(&mut csv, &source) {
        Ok(bars) => Ok(bars),
        Err(e) if source.gzip && !source.read_failed.get() => {
            // Deflate has no per-block checksum: a corrupt member decompresses to garbage that
            // only the CRC-32 at its end exposes (RFC 1952 §2.3.1). So a content error in gzip
            // input may be that garbage; read on to the CRC before blaming the content.
            let line = csv.position().line();
            match std::io::copy(csv.get_mut(), &mut std::io::sink()) {
                Err(io) => {
                    let mut err = source.read_error(Some(line), &io);
                    if let DataError::Input { message, .. } = &mut err {
                        message.push_str(&format!("; it first showed as: {e}"));
                    }
                    Err(err)
                }
                Ok(_) => Err(e),
            }
        }
        Err(e) => Err(e),
    }
}

/// The field separator of a file whose first bytes are `head`: `,` unless its first line has no
/// comma and has tabs (then tab) or semicolons (then `;`).
fn delimiter_of(head: &[u8]) -> u8 {
    let line = head.split(|b| *b == b'\n').next().unwrap_or(head);
    let count = |c: u8| line.iter().filter(|b| **b == c).count();
    if count(b',') > 0 {
        b','
    } else if count(b'\t') > 0 {
        b'\t'
    } else if count(b';') > 0 {
        b';'
    } else {
        b','
    }
}

/// Reads every record of `csv`; see the module doc for the checks.
fn parse(csv: &mut CsvReader, source: &Source) -> Result<FileBars, DataError> {
    let path = source.path.clone();
    let mut record = csv::StringRecord::new();
    let read_next = |csv: &mut CsvReader, record: &mut csv::StringRecord, src: &Source| {
        // Skip blank lines (csv yields them as one empty field).
        loop {
            match csv.read_record(record) {
                Ok(false) => return Ok(false),
                Ok(true) if record.len() == 1 && record[0].is_empty() => continue,
                Ok(true) => return Ok(true),
                // An I/O error carries no position: the reader's is that of the last record.
                Err(e) => return Err(csv_error(src, e, csv.position().line())),
            }
        }
    };
    if !read_next(csv, &mut record, source)? {
        return Err(DataError::input(
            &path,
            None,
            None,
            "the file is empty: expected a header line (timestamp, open, high, low, close, \
             volume) and one row per bar",
        ));
    }
    let header_line = record.position().map(|p| p.line()).unwrap_or(1);
    let layout = layout_of(&path, &record, header_line)?;
    let name = asset_name_from_path(&path, layout.binance_name);

    let mut builders: Vec<Builder> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut last_asset = usize::MAX;
    let mut rows = 0u64;
    // A Binance file has no header: its first record is already a bar.
    let mut pending = layout.format == FileFormat::BinanceKlines;
    // The first row's time cell while every row's is an Excel serial date (line, cell, date),
    // and the smallest step between an asset's times (in the cells' units).
    let mut excel: Option<(u64, String, String)> = None;
    let mut all_excel = layout.time_of_day.is_none();
    let mut min_step: Option<i64> = None;
    loop {
        if !pending && !read_next(csv, &mut record, source)? {
            break;
        }
        pending = false;
        rows += 1;
        let line = record.position().map(|p| p.line()).unwrap_or(0);
        let at = |field: Option<usize>, message: String| {
            DataError::input(
                &path,
                Some(line),
                field.map(|f| layout.names[f].as_str()),
                message,
            )
        };
        if record.len() < layout.min_fields {
            return Err(at(
                None,
                format!(
                    "the row has {} fields, {} expected{}",
                    record.len(),
                    layout.min_fields,
                    if layout.format == FileFormat::BinanceKlines {
                        String::new()
                    } else {
                        format!(" (the header has {})", layout.names.len())
                    }
                ),
            ));
        }
        let asset = match layout.ticker {
            None => {
                if builders.is_empty() {
                    builders.push(Builder::new(name.clone()));
                }
                0
            }
            Some(col) => {
                let ticker = &record[col];
                if ticker.is_empty() {
                    return Err(at(Some(col), "the ticker is empty".into()));
                }
                if last_asset < builders.len() && builders[last_asset].bars.name == ticker {
                    last_asset
                } else {
                    let i = *index.entry(ticker.to_owned()).or_insert_with(|| {
                        builders.push(Builder::new(ticker.to_owned()));
                        builders.len() - 1
                    });
                    last_asset = i;
                    i
                }
            }
        };
        let ts = match layout.time_of_day {
            None => parse_timestamp(&record[layout.time]).map_err(|m| at(Some(layout.time), m))?,
            Some(col) => {
                let (date, time) = (&record[layout.time], &record[col]);
                parse_timestamp(&format!("{date}T{time}")).map_err(|m| {
                    at(
                        Some(col),
                        format!(
                            "date '{date}' and time '{time}' (read together as one time) do not \
                             make a time: {m}"
                        ),
                    )
                })?
            }
        };
        // Asked only while every row so far was one (the first row of most files ends it).
        let excel_date = if all_excel {
            excel_serial_date(&record[layout.time])
        } else {
            None
        };
        match &excel_date {
            Some(date) if all_excel && excel.is_none() => {
                excel = Some((line, record[layout.time].trim().to_owned(), date.clone()));
            }
            Some(_) => {}
            None => all_excel = false,
        }
        let mut v = [0.0f64; 5];
        for (k, col) in layout.ohlcv.iter().enumerate() {
            v[k] = number(&record[*col]).map_err(|m| at(Some(*col), m))?;
        }
        let [mut open, mut high, mut low, mut close, mut volume] = v;
        for (k, price) in [open, high, low, close].iter().enumerate() {
            if *price <= 0.0 {
                return Err(at(
                    Some(layout.ohlcv[k]),
                    format!("price {price} is not positive: every price must be > 0"),
                ));
            }
            if let Some(m) = out_of_f32(*price) {
                return Err(at(Some(layout.ohlcv[k]), m));
            }
        }
        if high < low {
            return Err(at(
                Some(layout.ohlcv[1]),
                format!("high {high} is below low {low}"),
            ));
        }
        for (k, what, price) in [(0, "open", open), (3, "close", close)] {
            let side = if price > high {
                Some(format!("above high {high}"))
            } else if price < low {
                Some(format!("below low {low}"))
            } else {
                None
            };
            if let Some(side) = side {
                return Err(at(
                    Some(layout.ohlcv[k]),
                    format!(
                        "{what} {price} is {side}: a bar's open and close must lie from its \
                         low to its high, so this usually means columns in the wrong order \
                         (check that the header names each column by what it holds) or a bad \
                         print in the source"
                    ),
                ));
            }
        }
        if volume < 0.0 {
            return Err(at(
                Some(layout.ohlcv[4]),
                format!("volume {volume} is negative"),
            ));
        }
        if let Some(col) = layout.adj_close {
            let adj = number(&record[col]).map_err(|m| at(Some(col), m))?;
            if adj <= 0.0 {
                return Err(at(
                    Some(col),
                    format!("adjusted close {adj} is not positive: every price must be > 0"),
                ));
            }
            if let Some(m) = out_of_f32(adj) {
                return Err(at(Some(col), m));
            }
            let factor = adj / close;
            open *= factor;
            high *= factor;
            low *= factor;
            close = adj;
            volume /= factor;
        }
        let b = &mut builders[asset];
        if let Some(&prev) = b.bars.timestamps.last()
            && ts <= prev
        {
            let what = if ts == prev {
                "duplicates"
            } else {
                "is before"
            };
            let of = if layout.ticker.is_some() {
                format!(" of {}", b.bars.name)
            } else {
                String::new()
            };
            return Err(at(
                Some(layout.time),
                format!(
                    "time {} {what} the previous bar{of} on line {} ({}): rows must be in \
                     strictly increasing time order per asset{}{}",
                    format_timestamp(ts),
                    b.last_line,
                    format_timestamp(prev),
                    excel_date.map_or(String::new(), |date| format!(
                        " ('{}' looks like an Excel serial date, {date} as one: {EXCEL_FIX})",
                        record[layout.time].trim()
                    )),
                    order_hint(&record[layout.time], ts, prev)
                ),
            ));
        }
        if let Some(&prev) = b.bars.timestamps.last() {
            min_step = Some(min_step.map_or(ts - prev, |m| m.min(ts - prev)));
        }
        b.last_line = line;
        b.bars.timestamps.push(ts);
        b.bars.open.push(open);
        b.bars.high.push(high);
        b.bars.low.push(low);
        b.bars.close.push(close);
        b.bars.volume.push(volume);
    }
    if rows == 0 {
        return Err(DataError::input(
            &path,
            Some(header_line),
            None,
            "the file has a header but no rows of data",
        ));
    }
    // Read as days, the times must be bars of a month or shorter (as seconds they would be
    // a second to half a minute apart): a file of seconds in that range with minute or
    // longer steps (a session's seconds of the day) is read as it was written.
    let excel = excel.filter(|_| all_excel && min_step.is_some_and(|s| s <= MAX_EXCEL_STEP));
    if let Some((line, cell, date)) = excel {
        return Err(DataError::input(
            &path,
            Some(line),
            Some(layout.names[layout.time].as_str()),
            format!(
                "'{cell}' reads as Unix seconds, {}, and every time of the file falls on \
                 1970-01-01 so: these look like Excel serial dates (days since 1899-12-30; \
                 '{cell}' is {date} as one), which are not read as such: {EXCEL_FIX}",
                parse_timestamp(&cell).map_or(cell.clone(), format_timestamp)
            ),
        ));
    }
    Ok(FileBars {
        path,
        format: layout.format,
        assets: builders.into_iter().map(|b| b.bars).collect(),
    })
}

/// The longest step between bars, in days, of a file refused as Excel serial dates.
const MAX_EXCEL_STEP: i64 = 31;

/// How a file of Excel serial dates is mended.
/// What a time out of order may be, where the cell says so: bars under a second apart (times
/// are read in whole seconds), or local times read across a daylight-saving change (a time
/// without an offset is read as UTC; at the autumn change the clock repeats an hour).
fn order_hint(cell: &str, ts: i64, prev: i64) -> String {
    if ts == prev && has_sub_second(cell) {
        return format!(
            "; times are read in whole seconds ('{}' has a fraction of one), so bars under a \
             second apart fall on one time: resample them to bars of a second or longer",
            cell.trim()
        );
    }
    if ts < prev && prev - ts <= 3_600 && without_offset(cell) {
        return format!(
            "; '{}' has no UTC offset and is read as UTC: if the file holds local times, a \
             daylight-saving change repeats an hour there; write the times in UTC or with their \
             offset (2020-10-25T02:30:00+01:00)",
            cell.trim()
        );
    }
    String::new()
}

const EXCEL_FIX: &str = "format the column as dates (yyyy-mm-dd hh:mm) in the spreadsheet \
     before saving it as CSV, or write ISO dates or Unix seconds";

struct Builder {
    bars: AssetBars,
    last_line: u64,
}

impl Builder {
    fn new(name: String) -> Self {
        Self {
            bars: AssetBars::new(name),
            last_line: 0,
        }
    }
}

/// A finite number, or why the cell is not one.
fn number(cell: &str) -> Result<f64, String> {
    if cell.is_empty() {
        return Err("the value is empty".into());
    }
    match cell.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        Ok(v) => Err(format!("the value is {v}: NaN and infinity are not prices")),
        Err(_) => Err(format!("'{cell}' is not a number")),
    }
}

/// Finds the columns from the header, or recognises a header-less Binance export.
fn layout_of(path: &Path, first: &csv::StringRecord, line: u64) -> Result<Layout, DataError> {
    let binance = first.len() == BINANCE_COLUMNS
        && first
            .iter()
            .all(|c| !c.is_empty() && c.parse::<f64>().is_ok())
        && first[0].parse::<i64>().is_ok();
    if binance {
        let mut names: Vec<String> = BINANCE_NAMES.iter().map(|s| s.to_string()).collect();
        names.extend((names.len()..BINANCE_COLUMNS).map(|i| format!("column {}", i + 1)));
        return Ok(Layout {
            format: FileFormat::BinanceKlines,
            time: 0,
            time_of_day: None,
            binance_name: true,
            ohlcv: [1, 2, 3, 4, 5],
            adj_close: None,
            ticker: None,
            names,
            min_fields: 6,
        });
    }
    let norm: Vec<String> = first.iter().map(normalise).collect();
    let find = |aliases: &[&str]| {
        aliases
            .iter()
            .find_map(|a| norm.iter().position(|n| n == a))
    };
    let expected = "expected columns timestamp|date|time|open_time, open, high, low, close, \
                    volume (optional adj_close, ticker|symbol), or a 12-column Binance kline \
                    export without header";
    let Some(time) = find(&TIME_NAMES) else {
        let looks_like_data = first
            .iter()
            .next()
            .is_some_and(|c| parse_timestamp(c).is_ok());
        let message = if looks_like_data {
            format!(
                "the first line is data, not a header, and not a Binance kline row ({} fields, \
                 {BINANCE_COLUMNS} expected): add a header line; {expected}",
                first.len()
            )
        } else {
            format!(
                "no time column; the header has: {}; {expected}",
                first.iter().collect::<Vec<_>>().join(", ")
            )
        };
        return Err(DataError::input(
            path,
            Some(line),
            Some("timestamp"),
            message,
        ));
    };
    let mut ohlcv = [0usize; 5];
    for (k, col) in ["open", "high", "low", "close", "volume"]
        .iter()
        .enumerate()
    {
        ohlcv[k] = find(&[col]).ok_or_else(|| {
            DataError::input(
                path,
                Some(line),
                Some(col),
                format!(
                    "missing column '{col}'; the header has: {}; {expected}",
                    first.iter().collect::<Vec<_>>().join(", ")
                ),
            )
        })?;
    }
    let adj_close = find(&ADJ_NAMES);
    let ticker = find(&TICKER_NAMES);
    // `Date,Time,…`: the date column is found first; the time of day is the other one.
    let time_of_day = if norm[time] == "date" {
        find(&["time"])
    } else {
        None
    };
    // A Binance kline file with its header (futures since 2022-05).
    let binance_name =
        ticker.is_none() && norm[time] == "open_time" && norm.iter().any(|n| n == "close_time");
    let used = [Some(time), time_of_day, adj_close, ticker]
        .into_iter()
        .flatten()
        .chain(ohlcv);
    let min_fields = used.max().unwrap_or(0) + 1;
    Ok(Layout {
        format: if ticker.is_some() {
            FileFormat::Long
        } else {
            FileFormat::PerAsset
        },
        time,
        time_of_day,
        binance_name,
        ohlcv,
        adj_close,
        ticker,
        names: first
            .iter()
            .map(|s| s.trim_start_matches('\u{feff}').to_owned())
            .collect(),
        min_fields,
    })
}

/// A csv-level failure: unreadable bytes (corrupt gzip), invalid UTF-8.
fn csv_error(source: &Source, e: csv::Error, last_line: u64) -> DataError {
    let line = e.position().map(|p| p.line()).or(Some(last_line));
    match e.into_kind() {
        csv::ErrorKind::Io(io) => source.read_error(line, &io),
        csv::ErrorKind::Utf8 { pos, err } => DataError::input(
            &source.path,
            pos.map(|p| p.line()).or(line),
            None,
            format!("the text is not UTF-8 ({err}): save the file as UTF-8 or plain ASCII"),
        ),
        other => DataError::input(&source.path, line, None, format!("{other:?}")),
    }
}

/// The smallest price accepted: an order's units (value / price) in the environments' `f32`
/// stay far from overflow (1e12 of cash buys 1e24 units), where a price whose `f32` is
/// subnormal, or a little above, makes holdings and rewards infinite.
pub const MIN_PRICE: f64 = 1e-12;

/// Why a positive `price` cannot be traded in the environments' `f32` arithmetic, if it
/// cannot: below [`MIN_PRICE`], or infinite as an `f32` (above about 3.4e38).
fn out_of_f32(price: f64) -> Option<String> {
    if price >= MIN_PRICE && (price as f32).is_finite() {
        return None;
    }
    Some(format!(
        "price {price:e} is outside the range the environment computes in ({MIN_PRICE:e} to \
         {:e}): is the column garbled, or the price in a unit far too small or large?",
        f32::MAX
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &'static str, name: &str) -> Result<FileBars, DataError> {
        read_bytes(Path::new(name), text.as_bytes())
    }

    #[test]
    fn per_asset_file_with_any_header_case() {
        let f = read(
            "Date,Open,High,Low,Close,Volume\n2020-01-02,10,11,9,10.5,100\n\n2020-01-03,10.5,12,10,11,200\n",
            "data/XYZ.csv",
        )
        .unwrap();
        assert_eq!(f.format, FileFormat::PerAsset);
        assert_eq!(f.assets.len(), 1);
        let a = &f.assets[0];
        assert_eq!(a.name, "XYZ");
        assert_eq!(a.timestamps, vec![1_577_923_200, 1_578_009_600]);
        assert_eq!(a.close, vec![10.5, 11.0]);
        assert_eq!(a.volume, vec![100.0, 200.0]);
    }

    #[test]
    fn long_file_with_adjusted_close() {
        let f = read(
            "Ticker,Date,Open,High,Low,Close,Volume,Adj Close\n\
             A,2020-01-02,100,110,90,100,10,50\n\
             B,2020-01-02,1,1,1,1,5,1\n\
             A,2020-01-03,100,100,100,100,10,50\n",
            "long.csv",
        )
        .unwrap();
        assert_eq!(f.format, FileFormat::Long);
        let names: Vec<_> = f.assets.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["A", "B"]);
        let a = &f.assets[0];
        // Halved prices, doubled volume: the traded value is unchanged.
        assert_eq!(
            (a.open[0], a.high[0], a.low[0], a.close[0]),
            (50.0, 55.0, 45.0, 50.0)
        );
        assert_eq!(a.volume[0], 20.0);
        assert_eq!(a.len(), 2);
    }

    #[test]
    fn binance_klines_without_header() {
        let f = read(
            "1704067200000,42283.58,42554.57,42261.02,42475.23,1271.68108,1704067499999,53957248.97,47134,682.57581,28957416.82,0\n\
             1704067500000,42475.23,42475.23,42431.19,42451.55,275.51,1704067799999,1,1,1,1,0\n",
            "BTCUSDT-5m-2024-01.csv",
        )
        .unwrap();
        assert_eq!(f.format, FileFormat::BinanceKlines);
        let a = &f.assets[0];
        assert_eq!(a.name, "BTCUSDT");
        assert_eq!(a.timestamps, vec![1_704_067_200, 1_704_067_500]);
        assert_eq!(a.close[1], 42451.55);
    }

    /// Compact `YYYYMMDD` dates (Stooq, CRSP) are days, not seconds in 1970; a time far
    /// outside 1900-2200 is refused naming the file, the line and the column.
    #[test]
    fn compact_dates_and_implausible_times() {
        let f = read(
            "Date,Open,High,Low,Close,Volume\n20200102,1,1,1,1,1\n20200103,1,1,1,1,1\n",
            "d.csv",
        )
        .unwrap();
        assert_eq!(f.assets[0].timestamps, vec![1_577_923_200, 1_578_009_600]);
        let e = read(
            "Date,Open,High,Low,Close,Volume\n20200102,1,1,1,1,1\n20201332,1,1,1,1,1\n",
            "d.csv",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("d.csv, line 3, field 'Date'") && e.contains("YYYYMMDD"),
            "{e}"
        );
        let e = read(
            "timestamp,open,high,low,close,volume\n0,1,1,1,1,1\n9e27,1,1,1,1,1\n",
            "x.csv",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("x.csv, line 3, field 'timestamp'") && e.contains("not a plausible"),
            "{e}"
        );
    }

    /// Tab- and semicolon-separated files are read like comma-separated ones.
    #[test]
    fn tab_and_semicolon_separators() {
        for (text, name) in [
            (
                "Date\tOpen\tHigh\tLow\tClose\tVolume\n2020-01-02\t1\t2\t1\t1.5\t1\n",
                "x.tsv",
            ),
            (
                "Date;Open;High;Low;Close;Volume\n2020-01-02;1;2;1;1.5;1\n",
                "y.csv",
            ),
        ] {
            let f = read(text, name).unwrap();
            let a = &f.assets[0];
            assert_eq!(
                (a.timestamps[0], a.close[0]),
                (1_577_923_200, 1.5),
                "{name}"
            );
        }
        assert_eq!(delimiter_of(b"a,b;c\td"), b',');
        assert_eq!(delimiter_of(b"a"), b',');
    }

    /// Futures klines from data.binance.vision carry a header since 2022-05: the asset is
    /// still named up to the first `-`, so monthly files join into one asset.
    #[test]
    fn binance_klines_with_header_are_named_as_binance() {
        let f = read(
            "open_time,open,high,low,close,volume,close_time,quote_volume,count,\
             taker_buy_volume,taker_buy_quote_volume,ignore\n\
             1704067200000,1,2,1,2,3,1704067259999,0,0,0,0,0\n",
            "BTCUSDT-1m-2024-01.csv",
        )
        .unwrap();
        assert_eq!(f.assets[0].name, "BTCUSDT");
        assert_eq!(f.assets[0].timestamps, vec![1_704_067_200]);
        // A per-asset file with a dash keeps its whole name.
        let f = read(
            "Date,Open,High,Low,Close,Volume\n2020-01-02,1,1,1,1,1\n",
            "BTC-USD.csv",
        )
        .unwrap();
        assert_eq!(f.assets[0].name, "BTC-USD");
    }

    /// `Date,Time,…`: both columns make the bar's time, so intraday bars of one day are
    /// distinct; a time that does not fit names the time column.
    #[test]
    fn separate_date_and_time_columns() {
        let f = read(
            "Date,Time,Open,High,Low,Close,Volume\n\
             2020-01-02,09:30,1,1,1,1,1\n2020-01-02,09:31,1,1,1,1,1\n",
            "i.csv",
        )
        .unwrap();
        assert_eq!(f.assets[0].timestamps, vec![1_577_957_400, 1_577_957_460]);
        let e = read(
            "Date,Time,Open,High,Low,Close,Volume\n2020-01-02,9h30,1,1,1,1,1\n",
            "i.csv",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("i.csv, line 2, field 'Time'") && e.contains("9h30"),
            "{e}"
        );
    }

    #[test]
    fn binance_with_header_and_unix_seconds() {
        let f = read(
            "open_time,open,high,low,close,volume,close_time\n1704067200000,1,2,1,2,3,0\n",
            "ETHUSDT-1h.csv",
        )
        .unwrap();
        assert_eq!(f.assets[0].timestamps, vec![1_704_067_200]);
        let f = read(
            "TIME,OPEN,HIGH,LOW,CLOSE,VOLUME\n1704067200,1,2,1,2,3\n",
            "x.csv",
        )
        .unwrap();
        assert_eq!(f.assets[0].timestamps, vec![1_704_067_200]);
    }

    #[test]
    fn files_of_one_asset_are_joined_in_time_order() {
        let jan = read(
            "timestamp,open,high,low,close,volume\n100,1,1,1,1,1\n200,1,1,1,1,1\n",
            "S-jan.csv",
        );
        let feb = read(
            "timestamp,open,high,low,close,volume\n300,1,1,1,1,1\n",
            "S-feb.csv",
        );
        let mut a = jan.unwrap();
        let mut b = feb.unwrap();
        a.assets[0].name = "S".into();
        b.assets[0].name = "S".into();
        let merged = merge_files(vec![b.clone(), a.clone()]).unwrap();
        assert_eq!(merged.len(), 1);
        assert_eq!(merged[0].bars.timestamps, vec![100, 200, 300]);
        assert_eq!(merged[0].paths.len(), 2);
        let e = merge_files(vec![a.clone(), a]).unwrap_err().to_string();
        assert!(e.contains("overlap in time"), "{e}");
        assert!(!e.contains("named after its file"), "{e}");
        // Two assets' files of one name in two folders: one asset by name, said so.
        let text = "timestamp,open,high,low,close,volume\n100,1,1,1,1,1\n200,1,1,1,1,1\n";
        let aapl = read(text, "AAPL/daily.csv").unwrap();
        let msft = read(text, "MSFT/daily.csv").unwrap();
        let e = merge_files(vec![aapl, msft]).unwrap_err().to_string();
        assert!(
            e.contains("both are 'daily'), so rename one of them or add a ticker column"),
            "{e}"
        );
    }
}
