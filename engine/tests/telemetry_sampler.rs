//! The sampler driven tick by tick with fake probes: no sleeping, no timing assertions. A slow
//! probe is a fake that blocks until the test opens its gate.

use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use chrono::{TimeZone, Utc};
use tradetune_engine::telemetry::{
    DeviceReading, DeviceTag, GpuInfo, GpuProbe, GpuSample, GpuSource, GpuVendor, MemorySink,
    Metric, SamplerConfig, SamplerCore, Source, SourceReading, TelemetryError, TelemetryRow,
    TelemetrySink, TrialFacts, TrialSummary,
};

/// A GPU probe whose utilisation counts 10, 20, 30, … and whose power is fixed.
struct CountingGpu {
    info: Vec<GpuInfo>,
    n: u32,
}

impl CountingGpu {
    fn new(cards: usize) -> CountingGpu {
        let info = (0..cards)
            .map(|i| GpuInfo {
                vendor: GpuVendor::Nvidia,
                name: format!("fake {i}"),
                pci_bus_id: None,
                uuid: None,
                mem_total_bytes: None,
                driver: None,
            })
            .collect();
        CountingGpu { info, n: 0 }
    }
}

impl GpuProbe for CountingGpu {
    fn devices(&self) -> &[GpuInfo] {
        &self.info
    }
    fn split(self: Box<Self>) -> Vec<Box<dyn GpuProbe>> {
        vec![self]
    }
    fn sample(&mut self) -> Vec<GpuSample> {
        self.n += 1;
        (0..self.info.len())
            .map(|i| GpuSample {
                util_pct: Some(f64::from(self.n * 10) + i as f64),
                power_w: Some(100.0),
                ..Default::default()
            })
            .collect()
    }
}

/// Blocks in `read` until the test sends on the gate.
struct GatedSource {
    gate: Receiver<()>,
}

impl Source for GatedSource {
    fn name(&self) -> String {
        "slow".into()
    }
    fn read(&mut self) -> SourceReading {
        // Blocks until a token arrives or the test drops the sender (the gate opens for good).
        let _ = self.gate.recv();
        SourceReading {
            readings: vec![DeviceReading {
                device: DeviceTag::Host,
                values: vec![(Metric::CpuPct, 50.0)],
            }],
            problems: vec![],
            processes: vec![],
        }
    }
}

/// Panics on its first read, like a probe hitting a driver bug.
struct PanickingSource;

impl Source for PanickingSource {
    fn name(&self) -> String {
        "broken".into()
    }
    fn read(&mut self) -> SourceReading {
        panic!("simulated probe failure");
    }
}

/// Refuses every batch.
struct FailingSink;

impl TelemetrySink for FailingSink {
    fn write_batch(&mut self, _rows: &[TelemetryRow]) -> Result<(), TelemetryError> {
        Err(TelemetryError::Sink("database is locked".into()))
    }
}

fn at(sec: i64) -> chrono::DateTime<Utc> {
    Utc.timestamp_opt(1_700_000_000 + sec, 0).unwrap()
}

/// No deadline in effect: a tick returns as soon as every probe it asked has answered, so a
/// test that expects every answer never waits for this; it only turns a hang into a failure.
fn generous() -> Instant {
    Instant::now() + Duration::from_secs(3600)
}

fn config(batch_ticks: usize) -> SamplerConfig {
    SamplerConfig {
        batch_ticks,
        ..SamplerConfig::default()
    }
}

#[test]
fn interval_is_validated() {
    for ms in [99, 60_001, 0] {
        let e = SamplerConfig::with_interval(Duration::from_millis(ms)).unwrap_err();
        assert!(e.to_string().contains("out of range"), "{e}");
    }
    for ms in [100, 1000, 60_000] {
        assert!(SamplerConfig::with_interval(Duration::from_millis(ms)).is_ok());
    }
    let bad = SamplerConfig {
        ring_capacity: 0,
        ..SamplerConfig::default()
    };
    assert!(
        bad.validate()
            .unwrap_err()
            .to_string()
            .contains("ring_capacity")
    );
}

#[test]
fn ticks_number_gpus_tag_trials_and_batch_rows() {
    let sink = MemorySink::new();
    let sources: Vec<Box<dyn Source>> = vec![
        Box::new(GpuSource::new("nvidia", Box::new(CountingGpu::new(1)), 0)),
        Box::new(GpuSource::new("amdgpu", Box::new(CountingGpu::new(2)), 1)),
    ];
    let mut core = SamplerCore::new(config(3), sources, Some(Box::new(sink.clone()))).unwrap();
    let handle = core.handle();

    let t1 = core.tick(at(0), generous());
    assert_eq!(t1.seq, 1);
    assert_eq!(t1.trial, None);
    assert_eq!(t1.get(DeviceTag::Gpu(0), Metric::UtilPct), Some(10.0));
    assert_eq!(t1.get(DeviceTag::Gpu(1), Metric::UtilPct), Some(10.0));
    assert_eq!(t1.get(DeviceTag::Gpu(2), Metric::UtilPct), Some(11.0));
    assert!(t1.skipped.is_empty());
    // Batches of 3 ticks: nothing written yet.
    assert!(sink.rows().is_empty());

    handle.set_trial(Some(5));
    let t2 = core.tick(at(1), generous());
    assert_eq!(t2.trial, Some(5));
    core.tick(at(2), generous());
    let rows = sink.rows();
    // 3 ticks × 3 cards × 2 metrics.
    assert_eq!(rows.len(), 18);
    assert_eq!(rows.iter().filter(|r| r.trial == Some(5)).count(), 12);
    assert!(
        rows.iter()
            .all(|r| r.timestamp >= at(0) && r.timestamp <= at(2))
    );

    handle.set_trial(None);
    core.tick(at(3), generous());
    core.flush();
    assert_eq!(sink.rows().len(), 24);
    let stats = handle.stats();
    assert_eq!(stats.ticks, 4);
    assert_eq!(stats.rows_written, 24);

    // The live series, oldest first, timestamps in UTC seconds.
    let series = handle.series(DeviceTag::Gpu(0), Metric::UtilPct, 100);
    let values: Vec<f64> = series.iter().map(|p| p.v).collect();
    assert_eq!(values, [10.0, 20.0, 30.0, 40.0]);
    assert_eq!(series[0].t, 1_700_000_000.0);
    assert_eq!(
        handle.latest(DeviceTag::Gpu(2), Metric::UtilPct).unwrap().v,
        41.0
    );
    assert!(
        handle
            .series_keys()
            .contains(&(DeviceTag::Gpu(1), Metric::PowerW))
    );

    // The rows summarise into a trial: trial 5 saw ticks 2 and 3.
    let summary = TrialSummary::from_rows(
        &sink.rows(),
        TrialFacts {
            trial: Some(5),
            wall: Duration::from_secs(2),
            env_samples: 1000,
            phases: None,
        },
    );
    assert_eq!(summary.devices.len(), 3);
    assert_eq!(summary.devices[0].mean_util_pct, Some(25.0));
    // 100 W for the 1 s between the trial's two samples.
    assert_eq!(summary.devices[0].energy_j, Some(100.0));
}

#[test]
fn a_slow_probe_is_skipped_and_counted_without_holding_the_others() {
    let (gate_tx, gate_rx) = mpsc::channel();
    let sources: Vec<Box<dyn Source>> = vec![
        Box::new(GatedSource { gate: gate_rx }),
        Box::new(GpuSource::new("nvidia", Box::new(CountingGpu::new(1)), 0)),
    ];
    let mut core = SamplerCore::new(config(1), sources, None).unwrap();
    // A wall-clock deadline is what this test is about, so the ticks with the shut gate wait
    // it out: the sampler's own probe budget (half its default 1 s interval). The fast fake
    // answers in microseconds; it only has to be scheduled once within that budget.
    let budget = SamplerConfig::default().probe_deadline();
    let short = || Instant::now() + budget;

    // The gate is shut: the slow probe cannot answer, whatever the deadline.
    let t1 = core.tick(at(0), short());
    assert_eq!(t1.skipped, ["slow"]);
    assert_eq!(t1.get(DeviceTag::Gpu(0), Metric::UtilPct), Some(10.0));
    // Still busy with tick 1: not asked again, skipped again.
    let t2 = core.tick(at(1), short());
    assert_eq!(t2.skipped, ["slow"]);
    assert_eq!(t2.get(DeviceTag::Gpu(0), Metric::UtilPct), Some(20.0));

    // Open the gate for good. Whether tick 3 finds the late answer of tick 1 already in (and
    // asks again) or waits for it (and skips) is up to the scheduler; either way the late
    // answer is discarded, and by tick 4 the probe answers on time.
    drop(gate_tx);
    let t3 = core.tick(at(2), generous());
    let t3_skipped = !t3.skipped.is_empty();
    assert_eq!(
        t3.get(DeviceTag::Host, Metric::CpuPct),
        (!t3_skipped).then_some(50.0)
    );
    let t4 = core.tick(at(3), generous());
    assert!(t4.skipped.is_empty());
    assert_eq!(t4.get(DeviceTag::Host, Metric::CpuPct), Some(50.0));
    assert_eq!(
        core.handle().stats().skipped.get("slow"),
        Some(&(2 + u64::from(t3_skipped)))
    );
}

#[test]
fn a_panicking_probe_is_reported_stopped_and_the_rest_go_on() {
    let sources: Vec<Box<dyn Source>> = vec![
        Box::new(PanickingSource),
        Box::new(GpuSource::new("nvidia", Box::new(CountingGpu::new(1)), 0)),
    ];
    let mut core = SamplerCore::new(config(1), sources, None).unwrap();
    let t1 = core.tick(at(0), generous());
    assert_eq!(t1.skipped, ["broken (stopped)"]);
    let t2 = core.tick(at(1), generous());
    assert_eq!(t2.skipped, ["broken (stopped)"]);
    assert_eq!(t2.get(DeviceTag::Gpu(0), Metric::UtilPct), Some(20.0));
}

#[test]
fn a_failing_sink_drops_rows_counts_them_and_keeps_sampling() {
    let sources: Vec<Box<dyn Source>> = vec![Box::new(GpuSource::new(
        "nvidia",
        Box::new(CountingGpu::new(1)),
        0,
    ))];
    let mut core = SamplerCore::new(config(2), sources, Some(Box::new(FailingSink))).unwrap();
    for s in 0..4 {
        core.tick(at(s), generous());
    }
    let stats = core.handle().stats();
    assert_eq!(stats.ticks, 4);
    assert_eq!(stats.sink_errors, 2);
    assert_eq!(stats.rows_dropped, 8);
    assert_eq!(stats.rows_written, 0);
    assert_eq!(
        stats.last_sink_error.as_deref(),
        Some("telemetry sink failed: database is locked")
    );
}

#[test]
fn live_view_channel_drops_ticks_instead_of_waiting() {
    let sources: Vec<Box<dyn Source>> = vec![Box::new(GpuSource::new(
        "nvidia",
        Box::new(CountingGpu::new(1)),
        0,
    ))];
    let cfg = SamplerConfig {
        tick_channel_capacity: 2,
        ..SamplerConfig::default()
    };
    let mut core = SamplerCore::new(cfg, sources, None).unwrap();
    let rx = core.subscribe();
    for s in 0..5 {
        core.tick(at(s), generous());
    }
    let got: Vec<u64> = rx.try_iter().map(|t| t.seq).collect();
    assert_eq!(got, [1, 2]);
    assert_eq!(core.handle().stats().ticks_not_delivered, 3);
}

#[test]
fn the_sampler_thread_ticks_and_flushes_on_stop() {
    // Runs the real thread; asserts only on what must hold however the OS schedules it.
    let sink = MemorySink::new();
    let sources: Vec<Box<dyn Source>> = vec![Box::new(GpuSource::new(
        "nvidia",
        Box::new(CountingGpu::new(1)),
        0,
    ))];
    let cfg = SamplerConfig::with_interval(Duration::from_millis(100)).unwrap();
    let mut core = SamplerCore::new(cfg, sources, Some(Box::new(sink.clone()))).unwrap();
    let rx = core.subscribe();
    let sampler = tradetune_engine::telemetry::Sampler::start(core).unwrap();
    sampler.handle().set_trial(Some(9));
    // The first tick happens at once; wait for it rather than for a time (if the thread ended
    // instead, the channel closes and this fails at once).
    let first = rx.recv().unwrap();
    assert_eq!(first.seq, 1);
    let stats = sampler.stop();
    assert!(stats.ticks >= 1);
    // Everything sampled reached the sink, stopping flushed the partial batch.
    assert_eq!(stats.rows_written as usize, sink.rows().len());
    assert_eq!(sink.rows().len() as u64, stats.ticks * 2);
}

/// One NVIDIA card whose driver calls hang loses only its own reading: each card is sampled
/// on its own thread with its own deadline (`source::sources` splits the NVML probe per card),
/// so the other card is read in the same tick. The stall is a fake NVML card whose every call
/// waits on a lock the test holds.
#[test]
fn a_stalled_card_leaves_the_other_cards_reading() {
    use std::sync::Arc;
    use tradetune_engine::telemetry::nvml::NvmlProbe;
    use tradetune_engine::telemetry::nvml_fake::FakeNvml;
    use tradetune_engine::telemetry::{GpuDiscovery, source};

    let fake = FakeNvml::new(2, 4242);
    let gate = fake.stall(0).unwrap();
    let mut probe = NvmlProbe::with_lib(Arc::new(fake)).unwrap();
    probe.watch_pid(4242);
    let discovery = GpuDiscovery {
        probes: vec![Box::new(probe)],
        statuses: Vec::new(),
    };
    let sources = source::sources(discovery, None);
    let names: Vec<String> = sources.iter().map(|s| s.name()).collect();
    assert_eq!(names, ["nvidia gpu0", "nvidia gpu1"]);
    let mut core = SamplerCore::new(config(1), sources, None).unwrap();
    // The stalled card is waited for until the sampler's own probe budget (half its default
    // interval); the other answers in microseconds and only has to be scheduled within it.
    let budget = SamplerConfig::default().probe_deadline();
    let short = || Instant::now() + budget;

    let held = gate.lock().unwrap();
    for (n, sec) in [(1, 0), (2, 1)] {
        let t = core.tick(at(sec), short());
        assert_eq!(t.skipped, ["nvidia gpu0"], "tick {n}");
        assert_eq!(t.get(DeviceTag::Gpu(0), Metric::UtilPct), None, "tick {n}");
        assert_eq!(
            t.get(DeviceTag::Gpu(1), Metric::UtilPct),
            Some(87.0),
            "tick {n}"
        );
        // The watched process's memory on the card, from NVML's graphics process list.
        assert_eq!(
            t.get(DeviceTag::Gpu(1), Metric::ProcessMemUsedMib),
            Some(3072.0)
        );
    }

    // The card answers again: its late answer is discarded, and from the next tick on both
    // cards are read.
    drop(held);
    let t3 = core.tick(at(2), generous());
    assert_eq!(t3.get(DeviceTag::Gpu(1), Metric::UtilPct), Some(87.0));
    let t4 = core.tick(at(3), generous());
    assert!(t4.skipped.is_empty(), "{:?}", t4.skipped);
    assert_eq!(t4.get(DeviceTag::Gpu(0), Metric::UtilPct), Some(87.0));
    assert_eq!(t4.get(DeviceTag::Gpu(1), Metric::UtilPct), Some(87.0));
}
