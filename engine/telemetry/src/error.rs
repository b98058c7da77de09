//! Errors of the telemetry module.

use std::time::Duration;

/// What can go wrong in telemetry. Missing GPUs, drivers and files are *states* (see
/// [`super::ProbeStatus`]), not errors; these are the things a caller must fix.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// The sampling interval is outside what the sampler supports.
    #[error("telemetry interval {got:?} is out of range: sample every {min:?} to {max:?}")]
    IntervalOutOfRange {
        got: Duration,
        min: Duration,
        max: Duration,
    },
    /// A configuration value that must be positive is not.
    #[error("telemetry setting `{field}` must be at least 1, got {got}")]
    NotPositive { field: &'static str, got: usize },
    /// The operating system refused to start a thread.
    #[error("could not start the telemetry thread `{name}`: {source}")]
    Thread {
        name: String,
        #[source]
        source: std::io::Error,
    },
    /// The CPU/process probe could not start (sysinfo does not support this platform).
    #[error("CPU/process probe unavailable: {0}")]
    HostProbe(String),
    /// A GPU probe could not start.
    #[error("GPU probe unavailable: {0}")]
    GpuProbe(String),
    /// A sink (e.g. the study database) refused a batch of rows.
    #[error("telemetry sink failed: {0}")]
    Sink(String),
    /// Writing a CSV log failed.
    #[error("telemetry CSV {path}: {source}")]
    Csv {
        path: String,
        #[source]
        source: csv::Error,
    },
}
