//! The sampler: one thread that asks every probe for a reading each interval, stamps it in UTC,
//! keeps per-metric ring buffers for live views and hands rows in batches to a sink.
//!
//! It never blocks a trainer: the trainer only sets the current trial (an atomic store), the
//! probes run on their own threads with a per-tick deadline (see [`super::worker`]), and the
//! sink is called on the sampler's thread. [`SamplerCore::tick`] is the whole of one tick and
//! is public so tests drive ticks by hand instead of sleeping.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use super::TelemetryError;
use super::metric::{DeviceTag, Metric};
use super::ring::{PlotPoint, Ring};
use super::sink::{TelemetryRow, TelemetrySink};
use super::source::{DeviceReading, Source};
use super::worker::{Asked, ProbeWorker};

/// The shortest interval: NVML's utilisation counters are themselves averaged over 1/6 s to
/// 1 s (NVML docs, nvmlDeviceGetUtilizationRates), so faster sampling only repeats values.
pub const MIN_INTERVAL: Duration = Duration::from_millis(100);
pub const MAX_INTERVAL: Duration = Duration::from_secs(60);
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(1);

/// How the sampler runs.
#[derive(Debug, Clone, PartialEq)]
pub struct SamplerConfig {
    /// Time between ticks, [`MIN_INTERVAL`] to [`MAX_INTERVAL`].
    pub interval: Duration,
    /// Points kept per metric for live views (3600 = one hour at 1 s).
    pub ring_capacity: usize,
    /// Ticks per batch handed to the sink (a database write per tick would be wasteful).
    pub batch_ticks: usize,
    /// Ticks the live-view channel buffers before it drops (the reader is too slow).
    pub tick_channel_capacity: usize,
}

impl Default for SamplerConfig {
    fn default() -> Self {
        SamplerConfig {
            interval: DEFAULT_INTERVAL,
            ring_capacity: 3600,
            batch_ticks: 10,
            tick_channel_capacity: 64,
        }
    }
}

impl SamplerConfig {
    /// The default configuration with `interval`, validated.
    pub fn with_interval(interval: Duration) -> Result<SamplerConfig, TelemetryError> {
        let c = SamplerConfig {
            interval,
            ..SamplerConfig::default()
        };
        c.validate()?;
        Ok(c)
    }

    pub fn validate(&self) -> Result<(), TelemetryError> {
        if self.interval < MIN_INTERVAL || self.interval > MAX_INTERVAL {
            return Err(TelemetryError::IntervalOutOfRange {
                got: self.interval,
                min: MIN_INTERVAL,
                max: MAX_INTERVAL,
            });
        }
        for (field, got) in [
            ("ring_capacity", self.ring_capacity),
            ("batch_ticks", self.batch_ticks),
            ("tick_channel_capacity", self.tick_channel_capacity),
        ] {
            if got == 0 {
                return Err(TelemetryError::NotPositive { field, got });
            }
        }
        Ok(())
    }

    /// How long a tick waits for its probes: half the interval, leaving the other half for
    /// the rings and the sink.
    pub fn probe_deadline(&self) -> Duration {
        self.interval / 2
    }
}

/// Everything sampled at one tick.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Tick {
    /// 1, 2, … since the sampler started.
    pub seq: u64,
    #[serde(serialize_with = "super::sink::serialize_utc")]
    pub timestamp: DateTime<Utc>,
    pub trial: Option<u64>,
    pub readings: Vec<DeviceReading>,
    /// Sources that did not answer in time this tick.
    pub skipped: Vec<String>,
    pub problems: Vec<String>,
}

impl Tick {
    pub fn get(&self, device: DeviceTag, metric: Metric) -> Option<f64> {
        self.readings
            .iter()
            .find(|r| r.device == device)
            .and_then(|r| r.get(metric))
    }
}

/// Counters of the sampler's own health.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct SamplerStats {
    pub ticks: u64,
    /// Ticks each source was skipped (too slow, or its thread ended).
    pub skipped: BTreeMap<String, u64>,
    pub rows_written: u64,
    /// Rows a failing sink refused.
    pub rows_dropped: u64,
    pub sink_errors: u64,
    pub last_sink_error: Option<String>,
    /// Ticks the live-view channel dropped because its reader lagged.
    pub ticks_not_delivered: u64,
}

const NO_TRIAL: u64 = u64::MAX;

/// State shared between the sampler thread and its handles.
#[derive(Debug)]
struct Shared {
    trial: AtomicU64,
    rings: Mutex<HashMap<(DeviceTag, Metric), Ring>>,
    stats: Mutex<SamplerStats>,
}

/// Locks even after a panic elsewhere: telemetry is diagnostic, stale data beats a crash.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A cheap, cloneable view of a running sampler for trainers and UIs.
#[derive(Debug, Clone)]
pub struct SamplerHandle {
    shared: Arc<Shared>,
}

impl SamplerHandle {
    /// Tags the following rows with `trial` (`None` between trials). Never blocks.
    pub fn set_trial(&self, trial: Option<u64>) {
        let v = match trial {
            Some(t) if t != NO_TRIAL => t,
            Some(_) => NO_TRIAL - 1,
            None => NO_TRIAL,
        };
        self.shared.trial.store(v, Ordering::Relaxed);
    }

    pub fn trial(&self) -> Option<u64> {
        match self.shared.trial.load(Ordering::Relaxed) {
            NO_TRIAL => None,
            t => Some(t),
        }
    }

    /// The series of `metric` on `device`, min/max-decimated to at most `width` points.
    pub fn series(&self, device: DeviceTag, metric: Metric, width: usize) -> Vec<PlotPoint> {
        lock(&self.shared.rings)
            .get(&(device, metric))
            .map(|r| r.decimate(width))
            .unwrap_or_default()
    }

    /// The newest value of `metric` on `device`.
    pub fn latest(&self, device: DeviceTag, metric: Metric) -> Option<PlotPoint> {
        lock(&self.shared.rings)
            .get(&(device, metric))
            .and_then(Ring::last)
    }

    /// Every (device, metric) with at least one point, sorted.
    pub fn series_keys(&self) -> Vec<(DeviceTag, Metric)> {
        let mut keys: Vec<_> = lock(&self.shared.rings).keys().copied().collect();
        keys.sort();
        keys
    }

    pub fn stats(&self) -> SamplerStats {
        lock(&self.shared.stats).clone()
    }
}

/// The sampler's state and one tick of work, without the thread.
pub struct SamplerCore {
    workers: Vec<ProbeWorker>,
    shared: Arc<Shared>,
    sink: Option<Box<dyn TelemetrySink>>,
    batch: Vec<TelemetryRow>,
    ticks_in_batch: usize,
    config: SamplerConfig,
    listener: Option<SyncSender<Tick>>,
    seq: u64,
}

impl SamplerCore {
    /// Starts one thread per source. `sink` receives rows in batches.
    pub fn new(
        config: SamplerConfig,
        sources: Vec<Box<dyn Source>>,
        sink: Option<Box<dyn TelemetrySink>>,
    ) -> Result<SamplerCore, TelemetryError> {
        config.validate()?;
        let workers = sources
            .into_iter()
            .map(ProbeWorker::spawn)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(SamplerCore {
            workers,
            shared: Arc::new(Shared {
                trial: AtomicU64::new(NO_TRIAL),
                rings: Mutex::new(HashMap::new()),
                stats: Mutex::new(SamplerStats::default()),
            }),
            sink,
            batch: Vec::new(),
            ticks_in_batch: 0,
            config,
            listener: None,
            seq: 0,
        })
    }

    pub fn handle(&self) -> SamplerHandle {
        SamplerHandle {
            shared: Arc::clone(&self.shared),
        }
    }

    /// Every tick from now on, through a bounded channel that drops ticks rather than wait
    /// for a slow reader.
    pub fn subscribe(&mut self) -> Receiver<Tick> {
        let (tx, rx) = mpsc::sync_channel(self.config.tick_channel_capacity);
        self.listener = Some(tx);
        rx
    }

    pub fn config(&self) -> &SamplerConfig {
        &self.config
    }

    /// One tick stamped `now`: asks every free probe, waits for answers until `deadline`,
    /// records what arrived and skips (and counts) the rest.
    pub fn tick(&mut self, now: DateTime<Utc>, deadline: Instant) -> Tick {
        self.seq += 1;
        let seq = self.seq;
        let asked: Vec<bool> = self
            .workers
            .iter_mut()
            .map(|w| matches!(w.ask(seq), Asked::Yes))
            .collect();
        let mut readings = Vec::new();
        let mut problems = Vec::new();
        let mut skipped = Vec::new();
        for (w, asked) in self.workers.iter_mut().zip(asked) {
            let answer = if asked {
                w.collect(seq, deadline)
            } else {
                w.wait_stale(deadline);
                None
            };
            match answer {
                Some(r) => {
                    readings.extend(r.readings);
                    problems.extend(r.problems);
                }
                None if w.is_dead() => skipped.push(format!("{} (stopped)", w.name)),
                None => skipped.push(w.name.clone()),
            }
        }
        let tick = Tick {
            seq,
            timestamp: now,
            trial: self.handle().trial(),
            readings,
            skipped,
            problems,
        };
        self.record(&tick);
        tick
    }

    fn record(&mut self, tick: &Tick) {
        let t = tick.timestamp.timestamp_millis() as f64 / 1000.0;
        {
            let mut rings = lock(&self.shared.rings);
            for r in &tick.readings {
                for (m, v) in &r.values {
                    rings
                        .entry((r.device, *m))
                        .or_insert_with(|| Ring::new(self.config.ring_capacity))
                        .push(t, *v);
                }
            }
        }
        let mut not_delivered = 0;
        if let Some(tx) = &self.listener {
            match tx.try_send(tick.clone()) {
                Ok(()) => {}
                Err(TrySendError::Full(_)) => not_delivered = 1,
                Err(TrySendError::Disconnected(_)) => self.listener = None,
            }
        }
        {
            let mut stats = lock(&self.shared.stats);
            stats.ticks += 1;
            stats.ticks_not_delivered += not_delivered;
            for name in &tick.skipped {
                *stats.skipped.entry(name.clone()).or_default() += 1;
            }
        }
        if self.sink.is_some() {
            for r in &tick.readings {
                self.batch
                    .extend(r.values.iter().map(|(metric, value)| TelemetryRow {
                        timestamp: tick.timestamp,
                        device: r.device,
                        trial: tick.trial,
                        metric: *metric,
                        value: *value,
                    }));
            }
            self.ticks_in_batch += 1;
            if self.ticks_in_batch >= self.config.batch_ticks {
                self.flush();
            }
        }
    }

    /// Hands the pending rows to the sink now.
    pub fn flush(&mut self) {
        self.ticks_in_batch = 0;
        let Some(sink) = self.sink.as_mut() else {
            return;
        };
        if self.batch.is_empty() {
            return;
        }
        let n = self.batch.len() as u64;
        let result = sink.write_batch(&self.batch);
        self.batch.clear();
        let mut stats = lock(&self.shared.stats);
        match result {
            Ok(()) => stats.rows_written += n,
            Err(e) => {
                stats.rows_dropped += n;
                stats.sink_errors += 1;
                stats.last_sink_error = Some(e.to_string());
            }
        }
    }
}

/// A running sampler thread.
pub struct Sampler {
    handle: SamplerHandle,
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<SamplerCore>>,
}

impl Sampler {
    /// Runs `core` on its own thread, one tick per interval (the first at once).
    pub fn start(core: SamplerCore) -> Result<Sampler, TelemetryError> {
        let handle = core.handle();
        let (stop_tx, stop_rx) = mpsc::channel::<()>();
        let thread = thread::Builder::new()
            .name("telemetry-sampler".into())
            .spawn(move || run(core, stop_rx))
            .map_err(|source| TelemetryError::Thread {
                name: "telemetry-sampler".into(),
                source,
            })?;
        Ok(Sampler {
            handle,
            stop: Some(stop_tx),
            thread: Some(thread),
        })
    }

    pub fn handle(&self) -> SamplerHandle {
        self.handle.clone()
    }

    /// Stops after the current tick, flushes the sink and returns the final counters.
    pub fn stop(mut self) -> SamplerStats {
        self.shutdown();
        self.handle.stats()
    }

    fn shutdown(&mut self) {
        self.stop.take();
        if let Some(t) = self.thread.take() {
            // A panicked sampler thread has nothing left to flush; its counters stay readable.
            let _ = t.join();
        }
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn run(mut core: SamplerCore, stop: Receiver<()>) -> SamplerCore {
    let interval = core.config().interval;
    let budget = core.config().probe_deadline();
    let mut next = Instant::now();
    loop {
        let start = Instant::now();
        core.tick(Utc::now(), start + budget);
        next += interval;
        let now = Instant::now();
        // Fell behind (a stalled sink): start again from now instead of bursting ticks.
        if next < now {
            next = now;
        }
        match stop.recv_timeout(next - now) {
            Err(RecvTimeoutError::Timeout) => continue,
            Ok(()) | Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    core.flush();
    core
}
