//! Where sampled rows go: a narrow row per value (timestamp, device, trial, metric, value),
//! handed over in batches. The study database's `tradetune_telemetry` table is one sink; the
//! in-memory sink feeds per-trial summaries and tests.

use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};

use super::TelemetryError;
use super::metric::{DeviceTag, Metric};

/// One measured value.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TelemetryRow {
    #[serde(serialize_with = "serialize_utc")]
    pub timestamp: DateTime<Utc>,
    pub device: DeviceTag,
    /// The trial running when the value was taken, if any.
    pub trial: Option<u64>,
    pub metric: Metric,
    pub value: f64,
}

/// Serializes a timestamp as RFC 3339 in UTC with milliseconds (`2026-11-23T12:00:00.250Z`),
/// the form of the CSV logs; written here because the workspace builds chrono without its
/// `serde` feature.
pub(crate) fn serialize_utc<S: serde::Serializer>(
    t: &DateTime<Utc>,
    s: S,
) -> Result<S::Ok, S::Error> {
    s.serialize_str(&t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
}

/// Receives batches of rows on the sampler thread (never on a trainer's thread).
pub trait TelemetrySink: Send {
    /// Stores `rows`; on error the sampler counts the rows as dropped and goes on.
    fn write_batch(&mut self, rows: &[TelemetryRow]) -> Result<(), TelemetryError>;
}

/// Keeps every row in memory, shared with whoever holds a clone.
#[derive(Debug, Clone, Default)]
pub struct MemorySink {
    rows: Arc<Mutex<Vec<TelemetryRow>>>,
}

impl MemorySink {
    pub fn new() -> MemorySink {
        MemorySink::default()
    }
    /// A copy of every row received so far.
    pub fn rows(&self) -> Vec<TelemetryRow> {
        self.rows.lock().map(|r| r.clone()).unwrap_or_default()
    }
}

impl TelemetrySink for MemorySink {
    fn write_batch(&mut self, rows: &[TelemetryRow]) -> Result<(), TelemetryError> {
        let mut all = self
            .rows
            .lock()
            .map_err(|_| TelemetryError::Sink("memory sink lock poisoned".into()))?;
        all.extend_from_slice(rows);
        Ok(())
    }
}
