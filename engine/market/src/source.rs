//! Opening market files: plain or gzip-compressed (told by the magic bytes, not the name), and
//! the asset name a file stands for.

use std::cell::Cell;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use flate2::read::MultiGzDecoder;

use crate::DataError;

/// The two bytes every gzip member starts with (RFC 1952 §2.3.1: ID1 = 31, ID2 = 139).
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// The 16 bytes a SQLite database file starts with (its file format, §1.3.1).
const SQLITE_MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// Binary files a market file is sometimes mistaken for, by their first bytes, and what to do
/// instead: read as text they would fail as "not UTF-8" or as a header without a time column.
const NOT_CSV: [(&[u8], &str); 4] = [
    (
        b"PK\x03\x04",
        "a zip archive (data.binance.vision's downloads are; so is an Excel workbook): unzip it \
         and give the CSV inside, or save the sheet as CSV",
    ),
    (
        b"PAR1",
        "a Parquet file: TradeTune reads CSV; export the table as CSV",
    ),
    (
        b"\xd0\xcf\x11\xe0",
        "an old Excel workbook (.xls): save the sheet as CSV",
    ),
    (
        SQLITE_MAGIC,
        "a SQLite database (TradeTune keeps studies in such files), not market data",
    ),
];

/// Why a file about to be written at `path` must not be: it is a SQLite database (where
/// studies are kept), which a CSV named there by a slip would replace whole. `None` for
/// anything else, a missing file included.
pub fn database_in_the_way(path: &Path) -> Option<&'static str> {
    is_sqlite_file(path).then_some(
        "is a SQLite database (studies are kept in such files): writing here would replace it; \
         choose another file name",
    )
}

/// Why a file about to be written at `path` must not be: it holds market data (a gzip file, as
/// market files are kept; a CSV whose header names open, high, low and close; a headerless
/// Binance kline export), which an export or a backtest's curves named there by a slip (`study
/// export --trials data/btc.csv`) would replace with something else. `None` for anything
/// else, a missing file, a folder and an earlier export (whose columns are never all four)
/// included.
pub fn market_data_in_the_way(path: &Path) -> Option<&'static str> {
    let mut head = Vec::with_capacity(4096);
    File::open(path)
        .and_then(|f| f.take(4096).read_to_end(&mut head))
        .ok()?;
    if head.starts_with(&GZIP_MAGIC) {
        return Some(
            "is a gzip file (market data is kept so): writing here would replace it; choose \
             another file name",
        );
    }
    let first = String::from_utf8_lossy(&head);
    let first = first
        .trim_start_matches('\u{feff}')
        .lines()
        .next()
        .unwrap_or_default();
    let fields: Vec<String> = first
        .split([',', ';', '\t'])
        .map(|f| f.trim().trim_matches('"').to_ascii_lowercase())
        .collect();
    let named = ["open", "high", "low", "close"]
        .iter()
        .all(|c| fields.iter().any(|f| f == c));
    let kline = fields.len() == BINANCE_COLUMNS && fields.iter().all(|f| f.parse::<f64>().is_ok());
    (named || kline).then_some(
        "holds market data (open, high, low and close): writing here would replace it; choose \
         another file name",
    )
}

/// Binance kline columns (binance-public-data README, "KLINES"): open time, OHLC, volume, then
/// close time, quote volume, trade count, taker buy base, taker buy quote, ignore.
pub(crate) const BINANCE_COLUMNS: usize = 12;

/// Whether `path` is a SQLite database: its first bytes are SQLite's header. False for a file
/// that cannot be read (or is not there).
pub fn is_sqlite_file(path: &Path) -> bool {
    let mut head = [0u8; 16];
    File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok_and(|()| &head == SQLITE_MAGIC)
}

/// A byte stream of a market file, decompressed when it was gzip.
pub struct Source {
    /// The file name used in every error message.
    pub path: PathBuf,
    /// True when the bytes on disk are gzip.
    pub gzip: bool,
    pub reader: Box<dyn Read>,
    /// Set once [`Source::read_error`] has reported a failure of the byte stream.
    pub read_failed: Cell<bool>,
}

impl Source {
    /// Opens `path`; a missing or unreadable file is an error naming it.
    pub fn open(path: &Path) -> Result<Self, DataError> {
        let file = File::open(path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                let cwd = std::env::current_dir()
                    .map(|d| format!(" (relative paths start at {})", d.display()))
                    .unwrap_or_default();
                DataError::input(
                    path,
                    None,
                    None,
                    format!("no such file: check the path{cwd}"),
                )
            }
            std::io::ErrorKind::IsADirectory => DataError::input(
                path,
                None,
                None,
                "this is a directory: give the CSV files inside it",
            ),
            _ => DataError::Io {
                path: path.to_owned(),
                source: e,
            },
        })?;
        if file.metadata().is_ok_and(|m| m.is_dir()) {
            return Err(DataError::input(
                path,
                None,
                None,
                "this is a directory: give the CSV files inside it",
            ));
        }
        Self::from_reader(path, BufReader::with_capacity(1 << 16, file))
    }

    /// Wraps bytes already in memory (the bundled dataset, tests).
    pub fn from_bytes(path: &Path, bytes: &'static [u8]) -> Result<Self, DataError> {
        Self::from_reader(path, BufReader::new(bytes))
    }

    /// Peeks at the first bytes to choose plain or gzip reading.
    fn from_reader<R: BufRead + 'static>(path: &Path, mut r: R) -> Result<Self, DataError> {
        let head = r.fill_buf().map_err(|e| DataError::Io {
            path: path.to_owned(),
            source: e,
        })?;
        if let Some((_, what)) = NOT_CSV.iter().find(|(magic, _)| head.starts_with(magic)) {
            return Err(DataError::input(
                path,
                None,
                None,
                format!("this is {what}"),
            ));
        }
        // `fill_buf` may return a single byte at a buffer boundary; a file that starts with
        // 0x1f and nothing else is not gzip either way.
        let gzip = head.starts_with(&GZIP_MAGIC);
        let reader: Box<dyn Read> = if gzip {
            // Multi-member: `cat a.gz b.gz` and bgzip output are valid gzip (RFC 1952 §2.2).
            Box::new(BufReader::with_capacity(1 << 16, MultiGzDecoder::new(r)))
        } else {
            Box::new(r)
        };
        Ok(Self {
            path: path.to_owned(),
            gzip,
            reader,
            read_failed: Cell::new(false),
        })
    }

    /// The error for a read failure after `line` lines: for gzip input, a corrupt stream.
    pub fn read_error(&self, line: Option<u64>, e: &std::io::Error) -> DataError {
        self.read_failed.set(true);
        if self.gzip {
            let after = line.map(|l| format!(" after line {l}")).unwrap_or_default();
            DataError::input(
                &self.path,
                line,
                None,
                format!(
                    "the gzip data is corrupt or truncated{after} ({e}); nothing was loaded: \
                     download or compress the file again (`gzip -t FILE` checks it)"
                ),
            )
        } else {
            DataError::input(&self.path, line, None, format!("cannot read the file: {e}"))
        }
    }
}

/// The asset a one-asset file holds, from its name: the stem without `.gz`/`.csv`/`.txt`, and for
/// Binance exports (`BTCUSDT-5m-2024-01.csv`) the part before the first `-`.
pub fn asset_name_from_path(path: &Path, binance: bool) -> String {
    let mut name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "asset".into());
    loop {
        let lower = name.to_ascii_lowercase();
        let Some(stripped) = [".gz", ".csv", ".txt", ".tsv"]
            .iter()
            .find(|ext| lower.ends_with(*ext))
            .map(|ext| name[..name.len() - ext.len()].to_owned())
        else {
            break;
        };
        name = stripped;
    }
    if binance && let Some((symbol, _)) = name.split_once('-') {
        name = symbol.to_owned();
    }
    if name.is_empty() {
        "asset".into()
    } else {
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_from_paths() {
        let n = |p: &str, b| asset_name_from_path(Path::new(p), b);
        assert_eq!(n("data/AAPL.csv", false), "AAPL");
        assert_eq!(n("data/AAPL.CSV.GZ", false), "AAPL");
        assert_eq!(n("BTCUSDT-5m-2024-01.csv", true), "BTCUSDT");
        assert_eq!(n("BTC-USD.csv", false), "BTC-USD");
        assert_eq!(n(".csv", false), "asset");
    }

    #[test]
    fn gzip_is_told_by_magic_bytes() {
        use flate2::{Compression, write::GzEncoder};
        use std::io::Write;
        let mut enc = GzEncoder::new(Vec::new(), Compression::fast());
        enc.write_all(b"hello").unwrap();
        let gz: &'static [u8] = Box::leak(enc.finish().unwrap().into_boxed_slice());
        let mut s = Source::from_bytes(Path::new("x.csv"), gz).unwrap();
        assert!(s.gzip);
        let mut out = String::new();
        s.reader.read_to_string(&mut out).unwrap();
        assert_eq!(out, "hello");
        let mut s = Source::from_bytes(Path::new("x.gz"), b"plain").unwrap();
        assert!(!s.gzip);
        out.clear();
        s.reader.read_to_string(&mut out).unwrap();
        assert_eq!(out, "plain");
    }

    /// A zip archive, a Parquet file, an old workbook or a study database given as market
    /// data is named for what it is, not read as text that is not UTF-8.
    #[test]
    fn binary_files_are_told_by_their_first_bytes() {
        let told = |bytes: &'static [u8]| match Source::from_bytes(Path::new("x.csv"), bytes) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("read as a market file"),
        };
        let zip = told(b"PK\x03\x04\x14\x00\x08\x00BTCUSDT-1m-2023-01.csv");
        assert!(zip.contains("x.csv: this is a zip archive"), "{zip}");
        assert!(zip.contains("unzip it"), "{zip}");
        assert!(told(b"PAR1\x15\x04").contains("a Parquet file"));
        assert!(told(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1").contains("(.xls)"));
        assert!(told(b"SQLite format 3\0\x10\x00").contains("a SQLite database"));
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("a.db");
        std::fs::write(&db, b"SQLite format 3\0\x10\x00\x02\x02").unwrap();
        assert!(is_sqlite_file(&db));
        std::fs::write(&db, b"timestamp,close\n").unwrap();
        assert!(!is_sqlite_file(&db));
        assert!(!is_sqlite_file(&dir.path().join("missing.db")));
    }
}
