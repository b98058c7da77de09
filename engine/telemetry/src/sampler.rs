//! The sampler: one thread that asks every probe for a reading each interval, stamps it in UTC,
//! keeps per-metric ring buffers for live views and hands rows in batches to a sink.
//!
//! It never blocks a trainer during its work: the probes run on their own threads with a
//! per-tick deadline (see [`super::worker`]) and the sink is called on the sampler's thread.
//! [`SamplerCore::tick`] is the whole of one tick and is public so tests drive ticks by hand
//! instead of sleeping.
//!
//! Every trial gets telemetry whatever its length: [`SamplerHandle::begin_trial`] and
//! [`SamplerHandle::end_trial`] each take one extra sample, tagged with the trial and written
//! to the sink at once, besides the periodic ones. A trial shorter than the interval still has
//! a first and a last reading, and its rows are stored before the trial's state is.
//!
//! Rows are tagged with the trials running on the sampled device: a trial is bound to one
//! device ([`RunningTrial::device`]), or to every device when its card is not known. Host rows
//! (CPU, the process) belong to the trials on the CPU; with none there, to every running
//! trial (the host feeds them all). A device shared by two trials gives each of them a row.

use std::collections::{BTreeMap, HashMap};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use super::TelemetryError;
use super::gpu::GpuProcess;
use super::metric::{DeviceTag, Metric};
use super::ring::{PlotPoint, Ring};
use super::sink::{TelemetryRow, TelemetrySink};
use super::source::{DeviceReading, Source};
use super::summary::SeriesSet;
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
    /// The trial started last among those running (a one-column view for the live CSV log).
    pub trial: Option<u64>,
    /// Every trial running when the tick was taken, oldest first.
    pub running: Vec<RunningTrial>,
    pub readings: Vec<DeviceReading>,
    /// Sources that did not answer in time this tick.
    pub skipped: Vec<String>,
    pub problems: Vec<String>,
}

impl Tick {
    /// The trials a reading of `device` belongs to (see the module's documentation); an empty
    /// list when none does.
    pub fn trials_on(&self, device: DeviceTag) -> Vec<u64> {
        trials_on(&self.running, device)
    }

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

/// A trial the sampler tags rows with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct RunningTrial {
    /// The storage's `trial_id`.
    pub trial: u64,
    /// The device it runs on; `None` when that is not known (its rows are tagged on every device).
    pub device: Option<DeviceTag>,
}

fn trials_on(running: &[RunningTrial], device: DeviceTag) -> Vec<u64> {
    let on: Vec<u64> = running
        .iter()
        .filter(|r| r.device.is_none_or(|d| d == device))
        .map(|r| r.trial)
        .collect();
    if on.is_empty() && device == DeviceTag::Host {
        return running.iter().map(|r| r.trial).collect();
    }
    on
}

/// The processes using one card, as last listed.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct DeviceProcesses {
    /// When the list was read.
    #[serde(serialize_with = "super::sink::serialize_utc")]
    pub at: DateTime<Utc>,
    /// Most memory first.
    pub list: Vec<GpuProcess>,
}

/// One trial's readings from [`SamplerHandle::begin_trial`] to [`SamplerHandle::end_trial`],
/// condensed as they arrive: the whole trial whatever its length, where the live-view rings
/// keep only their last `ring_capacity` points.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TrialTotals {
    pub trial: u64,
    /// The device the trial ran on (`None`: not known, every device's readings are kept).
    pub device: Option<DeviceTag>,
    /// The trial's device and the host, per metric.
    pub series: SeriesSet,
    /// The first and the last tick taken while the trial ran.
    pub first: Option<DateTime<Utc>>,
    pub last: Option<DateTime<Utc>>,
    /// Other trials of this process seen running at its ticks, with their devices: the
    /// process's CPU use is then not this trial's alone.
    pub others: BTreeMap<u64, Option<DeviceTag>>,
}

impl TrialTotals {
    fn add(&mut self, tick: &Tick) {
        let t = tick.timestamp.timestamp_micros() as f64 / 1e6;
        for r in &tick.readings {
            let keep = match self.device {
                None => true,
                Some(mine) => r.device == mine || r.device == DeviceTag::Host,
            };
            if keep {
                for (m, v) in &r.values {
                    self.series.push(r.device, *m, t, *v);
                }
            }
        }
        self.first.get_or_insert(tick.timestamp);
        self.last = Some(tick.timestamp);
        for other in tick.running.iter().filter(|o| o.trial != self.trial) {
            self.others.insert(other.trial, other.device);
        }
    }
}

/// Finished trials' totals kept for their summary; beyond this many, the oldest are dropped
/// (a caller that never asks for them does not grow the sampler without end).
const FINISHED_KEPT: usize = 256;

/// What a handle asks of the sampler thread.
enum Command {
    /// Take a tick now, hand its rows to the sink, then answer.
    SampleNow(SyncSender<()>),
    Stop,
}

/// State shared between the sampler thread and its handles.
#[derive(Debug)]
struct Shared {
    running: Mutex<Vec<RunningTrial>>,
    rings: Mutex<HashMap<(DeviceTag, Metric), Ring>>,
    /// Running trials' totals (those begun with [`SamplerHandle::begin_trial`]), and the
    /// finished ones not yet taken, oldest first.
    open: Mutex<HashMap<u64, TrialTotals>>,
    finished: Mutex<std::collections::VecDeque<TrialTotals>>,
    /// The latest process list of each card whose probe lists them.
    processes: Mutex<HashMap<DeviceTag, DeviceProcesses>>,
    stats: Mutex<SamplerStats>,
    /// The running sampler thread's command queue; `None` while ticks are driven by hand.
    commands: Mutex<Option<Sender<Command>>>,
}

impl std::fmt::Debug for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Command::SampleNow(_) => "SampleNow",
            Command::Stop => "Stop",
        })
    }
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
    /// Tags the following rows of every device with `trial` alone (`None`: no trial). Never
    /// blocks. For a study's trials use [`Self::begin_trial`] and [`Self::end_trial`].
    pub fn set_trial(&self, trial: Option<u64>) {
        let mut running = lock(&self.shared.running);
        running.clear();
        running.extend(trial.map(|trial| RunningTrial {
            trial,
            device: None,
        }));
    }

    /// The trial started last among those running.
    pub fn trial(&self) -> Option<u64> {
        lock(&self.shared.running).last().map(|r| r.trial)
    }

    /// Every running trial, oldest first.
    pub fn running(&self) -> Vec<RunningTrial> {
        lock(&self.shared.running).clone()
    }

    /// `trial` starts on `device` (`None`: its card is not known): its rows are tagged from now
    /// on, and one sample is taken and stored at once (returns when it is, see
    /// [`Self::sample_now`]).
    pub fn begin_trial(&self, trial: u64, device: Option<DeviceTag>) {
        {
            let mut running = lock(&self.shared.running);
            running.retain(|r| r.trial != trial);
            lock(&self.shared.open).insert(
                trial,
                TrialTotals {
                    trial,
                    device,
                    ..TrialTotals::default()
                },
            );
            running.push(RunningTrial { trial, device });
        }
        self.sample_now();
    }

    /// `trial` ends: one last sample tagged with it is taken and stored, then its tag is removed.
    pub fn end_trial(&self, trial: u64) {
        self.sample_now();
        let mut running = lock(&self.shared.running);
        running.retain(|r| r.trial != trial);
        if let Some(totals) = lock(&self.shared.open).remove(&trial) {
            let mut finished = lock(&self.shared.finished);
            if finished.len() >= FINISHED_KEPT {
                finished.pop_front();
            }
            finished.push_back(totals);
        }
    }

    /// Takes the totals of the finished trial `trial` (as given to [`Self::begin_trial`] and
    /// [`Self::end_trial`]); `None` when it was not begun here or its totals were taken.
    pub fn take_trial_totals(&self, trial: u64) -> Option<TrialTotals> {
        let mut finished = lock(&self.shared.finished);
        let at = finished.iter().position(|t| t.trial == trial)?;
        finished.remove(at)
    }

    /// Asks the sampler thread for a tick now, its rows handed to the sink at once, and waits
    /// until that is done. Returns false when no sampler thread runs (ticks are driven by hand)
    /// or it has stopped.
    pub fn sample_now(&self) -> bool {
        let Some(commands) = lock(&self.shared.commands).clone() else {
            return false;
        };
        let (tx, rx) = mpsc::sync_channel(1);
        if commands.send(Command::SampleNow(tx)).is_err() {
            return false;
        }
        // The thread answers after one tick (its probes wait at most half an interval); if it
        // ends first, the reply's sender is dropped and this returns at once.
        rx.recv().is_ok()
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

    /// The processes last listed on `device` (`None`: its probe has not listed any).
    pub fn processes(&self, device: DeviceTag) -> Option<DeviceProcesses> {
        lock(&self.shared.processes).get(&device).cloned()
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
                running: Mutex::new(Vec::new()),
                rings: Mutex::new(HashMap::new()),
                open: Mutex::new(HashMap::new()),
                finished: Mutex::new(std::collections::VecDeque::new()),
                processes: Mutex::new(HashMap::new()),
                stats: Mutex::new(SamplerStats::default()),
                commands: Mutex::new(None),
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
        // The trials running when the probes are asked: a trial that begins while they
        // answer gets none of these readings, taken (and stamped `now`) before it began.
        let running = lock(&self.shared.running).clone();
        let asked: Vec<bool> = self
            .workers
            .iter_mut()
            .map(|w| matches!(w.ask(seq), Asked::Yes))
            .collect();
        let mut readings = Vec::new();
        let mut problems = Vec::new();
        let mut processes = Vec::new();
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
                    processes.extend(r.processes);
                }
                None if w.is_dead() => skipped.push(format!("{} (stopped)", w.name)),
                None => skipped.push(w.name.clone()),
            }
        }
        if !processes.is_empty() {
            let mut shared = lock(&self.shared.processes);
            for (device, list) in processes {
                shared.insert(device, DeviceProcesses { at: now, list });
            }
        }
        let tick = Tick {
            seq,
            timestamp: now,
            trial: running.last().map(|r| r.trial),
            running,
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
        {
            let mut open = lock(&self.shared.open);
            for r in &tick.running {
                if let Some(totals) = open.get_mut(&r.trial) {
                    totals.add(tick);
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
                let trials = tick.trials_on(r.device);
                let tags: Vec<Option<u64>> = if trials.is_empty() {
                    vec![None]
                } else {
                    trials.into_iter().map(Some).collect()
                };
                for trial in tags {
                    self.batch
                        .extend(r.values.iter().map(|(metric, value)| TelemetryRow {
                            timestamp: tick.timestamp,
                            device: r.device,
                            trial,
                            metric: *metric,
                            value: *value,
                        }));
                }
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
    stop: Option<Sender<Command>>,
    thread: Option<JoinHandle<SamplerCore>>,
}

impl Sampler {
    /// Runs `core` on its own thread, one tick per interval (the first at once).
    pub fn start(core: SamplerCore) -> Result<Sampler, TelemetryError> {
        let handle = core.handle();
        let (stop_tx, stop_rx) = mpsc::channel::<Command>();
        *lock(&handle.shared.commands) = Some(stop_tx.clone());
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
        lock(&self.handle.shared.commands).take();
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(Command::Stop);
        }
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

fn run(mut core: SamplerCore, commands: Receiver<Command>) -> SamplerCore {
    let interval = core.config().interval;
    let budget = core.config().probe_deadline();
    let mut next = Instant::now();
    loop {
        let start = Instant::now();
        if start >= next {
            core.tick(Utc::now(), start + budget);
            next += interval;
            // Fell behind (a stalled sink): start again from now instead of bursting ticks.
            let now = Instant::now();
            if next < now {
                next = now;
            }
        }
        match commands.recv_timeout(next.saturating_duration_since(Instant::now())) {
            Err(RecvTimeoutError::Timeout) => {}
            Ok(Command::SampleNow(reply)) => {
                let start = Instant::now();
                core.tick(Utc::now(), start + budget);
                core.flush();
                let _ = reply.send(());
            }
            Ok(Command::Stop) | Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    core.flush();
    core
}
