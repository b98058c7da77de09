//! Raw OHLCV series of one asset, as read from a file, before alignment.

/// One asset's bars in time order. Timestamps are Unix seconds (UTC).
///
/// Prices are already adjusted for splits where the source gave an adjusted close
/// (OHLC scaled by `adj_close / close`), so the series is continuous.
#[derive(Debug, Clone, PartialEq)]
pub struct AssetBars {
    /// Asset name (ticker, symbol or file stem).
    pub name: String,
    /// Unix seconds, strictly increasing.
    pub timestamps: Vec<i64>,
    pub open: Vec<f64>,
    pub high: Vec<f64>,
    pub low: Vec<f64>,
    pub close: Vec<f64>,
    pub volume: Vec<f64>,
}

impl AssetBars {
    /// An empty series for `name`.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            timestamps: Vec::new(),
            open: Vec::new(),
            high: Vec::new(),
            low: Vec::new(),
            close: Vec::new(),
            volume: Vec::new(),
        }
    }

    /// Number of bars.
    pub fn len(&self) -> usize {
        self.timestamps.len()
    }

    /// True when the series has no bars.
    pub fn is_empty(&self) -> bool {
        self.timestamps.is_empty()
    }

    /// Removes the bars at `range` (a gap in the series, for tests and synthetic data).
    pub fn remove_bars(&mut self, range: std::ops::Range<usize>) {
        for v in [
            &mut self.open,
            &mut self.high,
            &mut self.low,
            &mut self.close,
            &mut self.volume,
        ] {
            v.drain(range.clone());
        }
        self.timestamps.drain(range);
    }
}
