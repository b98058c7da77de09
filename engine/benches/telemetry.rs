//! Criterion benchmark of one sampler tick: every probe asked on its thread, answers collected,
//! ring buffers and the row batch updated. Probes: the amdgpu reader on the RX 7900 GRE fixture
//! tree (real file reads, as on an AMD machine) and the sysinfo host probe. Throughput is
//! reported in ticks. A second benchmark times a tick over a fake NVML of two cards
//! ([`tick_cost`]).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use chrono::Utc;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use tradetune_engine::telemetry::amdgpu::AmdGpuProbe;
use tradetune_engine::telemetry::tick_cost;
use tradetune_engine::telemetry::{
    GpuSource, HostSource, SamplerConfig, SamplerCore, Source, SysinfoHostProbe, TelemetryError,
    TelemetryRow, TelemetrySink,
};

/// Counts rows instead of keeping them, so memory stays flat however long criterion runs.
struct CountingSink(u64);

impl TelemetrySink for CountingSink {
    fn write_batch(&mut self, rows: &[TelemetryRow]) -> Result<(), TelemetryError> {
        self.0 += rows.len() as u64;
        Ok(())
    }
}

fn sampler_tick(c: &mut Criterion) {
    let fixture = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/amdgpu/rx7900gre");
    let amd = AmdGpuProbe::open(&fixture).expect("fixture tree");
    let host = SysinfoHostProbe::new(None).expect("sysinfo");
    let sources: Vec<Box<dyn Source>> = vec![
        Box::new(GpuSource::new("amdgpu", Box::new(amd), 0)),
        Box::new(HostSource::new(Box::new(host))),
    ];
    let mut core = SamplerCore::new(
        SamplerConfig::default(),
        sources,
        Some(Box::new(CountingSink(0))),
    )
    .expect("sampler");
    let mut group = c.benchmark_group("telemetry");
    group.throughput(Throughput::Elements(1));
    group.bench_function("sampler_tick/amdgpu_fixture+host", |b| {
        b.iter(|| core.tick(Utc::now(), Instant::now() + Duration::from_millis(500)))
    });
    group.finish();
    println!(
        "config: 1 amdgpu card (fixture tree), sysinfo host probe, ring capacity {}, batch {} ticks",
        core.config().ring_capacity,
        core.config().batch_ticks
    );
}

/// One tick over a fake NVML of two cards (one probe thread per card, answered from memory):
/// the sampler's own cost per tick with two NVIDIA GPUs. First a plain run of 2,000 ticks with
/// its ticks/s and µs/tick, then criterion's timing.
fn fake_nvml_tick(c: &mut Criterion) {
    match tick_cost::measure_tick_cost(2, 2000) {
        Ok(cost) => println!("{cost}"),
        Err(e) => eprintln!("fake NVML sampler failed: {e}"),
    }
    let mut core = tick_cost::fake_nvml_sampler(2, Box::new(tick_cost::CountingSink::default()))
        .expect("fake NVML sampler");
    let mut group = c.benchmark_group("telemetry");
    group.throughput(Throughput::Elements(1));
    group.bench_function("sampler_tick/fake_nvml_2_cards", |b| {
        b.iter(|| core.tick(Utc::now(), Instant::now() + Duration::from_millis(500)))
    });
    group.finish();
}

criterion_group!(benches, sampler_tick, fake_nvml_tick);
criterion_main!(benches);
