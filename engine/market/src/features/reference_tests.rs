//! Agreement with TA-Lib on real data.
//!
//! `engine/tests/fixtures/talib_reference.csv` was written by
//! `engine/tests/fixtures/make_talib_reference.py` with the PyPI `TA-Lib` 0.8.2 wheel on two
//! 150-bar slices of the bundled Quandl WIKI data (AAPL from 2000-03-01, across its 2000 split;
//! IBM from 2008-08-01, across the crash), split-adjusted OHLC rounded to 8 significant digits
//! and raw volume. It holds the input rows, so these tests need neither Python nor the reader.
//!
//! Tolerance: |ours − TA-Lib| ≤ 1e-4·|TA-Lib| + 1e-9·max|column| on every bar where TA-Lib gives
//! a value (the absolute term only matters for values that cross zero, such as the MACD
//! histogram, where the fixture's 8 printed digits are all that is known). Because our seeding
//! copies TA-Lib's, the comparison starts at the first defined bar, and the warm-up lengths must
//! match exactly (a bar is empty in the fixture if and only if ours is NaN).

use super::*;

const FIXTURE: &str = include_str!("../../../tests/fixtures/talib_reference.csv");

/// One ticker's slice of the fixture: input bars and reference columns by name.
pub(crate) struct Slice {
    pub ticker: String,
    pub open: Vec<f64>,
    pub high: Vec<f64>,
    pub low: Vec<f64>,
    pub close: Vec<f64>,
    pub volume: Vec<f64>,
    pub columns: Vec<(String, Vec<f64>)>,
}

impl Slice {
    pub fn column(&self, name: &str) -> &[f64] {
        &self
            .columns
            .iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("fixture has no column {name}"))
            .1
    }
}

/// Parses the fixture into per-ticker slices (empty cells become NaN).
pub(crate) fn load_fixture() -> Vec<Slice> {
    let mut lines = FIXTURE.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(
        &header[..7],
        &["ticker", "date", "open", "high", "low", "close", "volume"]
    );
    let mut slices: Vec<Slice> = Vec::new();
    for line in lines {
        let cells: Vec<&str> = line.split(',').collect();
        assert_eq!(cells.len(), header.len(), "{line}");
        if slices.last().is_none_or(|s| s.ticker != cells[0]) {
            slices.push(Slice {
                ticker: cells[0].to_owned(),
                open: vec![],
                high: vec![],
                low: vec![],
                close: vec![],
                volume: vec![],
                columns: header[7..]
                    .iter()
                    .map(|h| (h.to_string(), vec![]))
                    .collect(),
            });
        }
        let s = slices.last_mut().unwrap();
        let num = |c: &str| {
            if c.is_empty() {
                f64::NAN
            } else {
                c.parse::<f64>().unwrap()
            }
        };
        s.open.push(num(cells[2]));
        s.high.push(num(cells[3]));
        s.low.push(num(cells[4]));
        s.close.push(num(cells[5]));
        s.volume.push(num(cells[6]));
        for (col, cell) in s.columns.iter_mut().zip(&cells[7..]) {
            col.1.push(num(cell));
        }
    }
    slices
}

/// Asserts `ours` agrees with the reference column (see the module doc for the tolerance) and
/// returns the largest relative error seen.
pub(crate) fn assert_agrees(what: &str, ours: &[f64], reference: &[f64]) -> f64 {
    assert_agrees_within(what, ours, reference, 1e-9)
}

/// [`assert_agrees`] with the absolute floor `abs_floor × max|column|` given.
pub(crate) fn assert_agrees_within(
    what: &str,
    ours: &[f64],
    reference: &[f64],
    abs_floor: f64,
) -> f64 {
    assert_eq!(ours.len(), reference.len(), "{what}: length");
    let scale = reference
        .iter()
        .filter(|v| v.is_finite())
        .fold(0.0f64, |m, v| m.max(v.abs()));
    let mut worst = 0.0f64;
    for (i, (a, b)) in ours.iter().zip(reference).enumerate() {
        assert_eq!(
            a.is_nan(),
            b.is_nan(),
            "{what}: bar {i}: ours {a}, TA-Lib {b} (warm-up differs)"
        );
        if b.is_nan() {
            continue;
        }
        let err = (a - b).abs();
        assert!(
            err <= 1e-4 * b.abs() + abs_floor * scale,
            "{what}: bar {i}: ours {a}, TA-Lib {b}"
        );
        if b.abs() > 1e-6 * scale {
            worst = worst.max(err / b.abs());
        }
    }
    assert!(
        reference.iter().any(|v| !v.is_nan()),
        "{what}: no reference values"
    );
    worst
}

#[test]
fn fixture_has_both_slices_with_valid_bars() {
    let slices = load_fixture();
    let names: Vec<&str> = slices.iter().map(|s| s.ticker.as_str()).collect();
    assert_eq!(names, ["AAPL", "IBM"]);
    for s in &slices {
        assert_eq!(s.close.len(), 150);
        for i in 0..s.close.len() {
            assert!(
                s.low[i] <= s.open[i].min(s.close[i]) && s.high[i] >= s.open[i].max(s.close[i])
            );
        }
    }
}

#[test]
fn indicators_agree_with_ta_lib() {
    for s in load_fixture() {
        let (h, l, c, v) = (&s.high, &s.low, &s.close, &s.volume);
        let m = macd(c, 12, 26, 9);
        let bb = bbands(c, 20, 2.0, 2.0);
        let checks: Vec<(&str, Vec<f64>)> = vec![
            ("sma_30", sma(c, 30)),
            ("ema_20", ema(c, 20)),
            ("rsi_14", rsi(c, 14)),
            ("macd", m.line),
            ("macd_signal", m.signal),
            ("macd_hist", m.hist),
            ("cci_20", cci(h, l, c, 20)),
            ("dx_14", dx(h, l, c, 14)),
            ("adx_14", adx(h, l, c, 14)),
            ("roc_10", roc(c, 10)),
            ("ultosc", ultosc(h, l, c, [7, 14, 28])),
            ("willr_14", willr(h, l, c, 14)),
            ("obv", obv(c, v)),
            ("bb_upper", bb.upper),
            ("bb_middle", bb.middle),
            ("bb_lower", bb.lower),
        ];
        for (name, ours) in checks {
            let worst = assert_agrees(&format!("{} {name}", s.ticker), &ours, s.column(name));
            eprintln!("{} {name}: max relative error {worst:.2e}", s.ticker);
        }
    }
}

#[test]
fn agreement_check_can_fail() {
    // The check above must be able to fail: a 1e-3 relative perturbation is caught.
    let s = &load_fixture()[0];
    let mut r = rsi(&s.close, 14);
    r[40] *= 1.001;
    let caught = std::panic::catch_unwind(|| assert_agrees("rsi", &r, s.column("rsi_14")));
    assert!(caught.is_err());
}
