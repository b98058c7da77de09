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

/// Writes rows into the study database's `tradetune_telemetry` table, one transaction per
/// batch (a batch is stored whole or not at all). `TelemetryRow::trial` is the storage's
/// `trial_id` of the trial running on that device.
pub struct StorageSink {
    storage: tradetune_storage::Storage,
}

impl StorageSink {
    /// Writes through `storage` (opened by the caller, e.g. on the study database).
    pub fn new(storage: tradetune_storage::Storage) -> StorageSink {
        StorageSink { storage }
    }

    /// The storage written to, e.g. to read the rows back.
    pub fn storage(&self) -> &tradetune_storage::Storage {
        &self.storage
    }
}

impl TelemetrySink for StorageSink {
    fn write_batch(&mut self, rows: &[TelemetryRow]) -> Result<(), TelemetryError> {
        let samples = rows
            .iter()
            .map(|r| {
                let trial_id = r.trial.map(i64::try_from).transpose().map_err(|_| {
                    TelemetryError::Sink(format!("trial id {:?} out of range", r.trial))
                })?;
                Ok(tradetune_storage::TelemetrySample {
                    trial_id,
                    recorded_at: r.timestamp.naive_utc(),
                    source: r.device.to_string(),
                    metric: r.metric.name(),
                    value: r.value,
                })
            })
            .collect::<Result<Vec<_>, TelemetryError>>()?;
        self.storage
            .append_telemetry(&samples)
            .map_err(|e| TelemetryError::Sink(e.to_string()))
    }
}
