//! Criterion benchmark of one sampler tick: every probe asked on its thread, answers collected,
//! ring buffers and the row batch updated. Probes: the amdgpu reader on the RX 7900 GRE fixture
//! tree (real file reads, as on an AMD machine) and the sysinfo host probe. Throughput is
//! reported in ticks.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use chrono::Utc;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use tradetune_engine::telemetry::amdgpu::AmdGpuProbe;
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

criterion_group!(benches, sampler_tick);
criterion_main!(benches);
