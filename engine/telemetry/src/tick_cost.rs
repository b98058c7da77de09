//! What one sampler tick costs: the sampler over a fake NVML of N cards (each card on its own
//! probe thread, as [`super::source::sources`] sets them up), every tick asking each card's
//! ~16 calls, collecting the answers, updating the rings and batching rows for a sink that
//! counts them. The fake answers from memory, so this is TradeTune's own cost per tick (threads,
//! channels, rings, rows), not the driver's. `engine/benches/telemetry.rs` prints it and times
//! one tick with criterion.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;

use super::discovery::GpuDiscovery;
use super::gpu::GpuProbe;
use super::nvml::NvmlProbe;
use super::nvml_fake::FakeNvml;
use super::sampler::{SamplerConfig, SamplerCore};
use super::sink::{TelemetryRow, TelemetrySink};
use super::{TelemetryError, source};

/// Counts rows instead of keeping them, so memory stays flat however many ticks run.
#[derive(Debug, Default)]
pub struct CountingSink {
    rows: Arc<std::sync::atomic::AtomicU64>,
}

impl CountingSink {
    /// The rows written so far, readable after the sink moved into a sampler.
    pub fn counter(&self) -> Arc<std::sync::atomic::AtomicU64> {
        Arc::clone(&self.rows)
    }
}

impl TelemetrySink for CountingSink {
    fn write_batch(&mut self, rows: &[TelemetryRow]) -> Result<(), TelemetryError> {
        self.rows
            .fetch_add(rows.len() as u64, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }
}

/// A sampler with the default configuration over a fake NVML of `cards` cards, one source per
/// card, writing to `sink`.
pub fn fake_nvml_sampler(
    cards: u32,
    sink: Box<dyn TelemetrySink>,
) -> Result<SamplerCore, TelemetryError> {
    let fake = FakeNvml::new(cards, std::process::id());
    let probe = NvmlProbe::with_lib(Arc::new(fake)).map_err(|status| {
        TelemetryError::GpuProbe(format!("the fake NVML did not open: {status}"))
    })?;
    let probes: Vec<Box<dyn GpuProbe>> = vec![Box::new(probe)];
    let discovery = GpuDiscovery {
        probes,
        statuses: Vec::new(),
    };
    SamplerCore::new(
        SamplerConfig::default(),
        source::sources(discovery, None),
        Some(sink),
    )
}

/// The measured cost of a run of ticks.
#[derive(Debug, Clone, PartialEq)]
pub struct TickCost {
    pub cards: u32,
    pub ticks: u64,
    pub elapsed: Duration,
    /// Ticks in which some card answered too late (none expected: the fake answers at once).
    pub late_ticks: u64,
    /// Rows handed to the sink.
    pub rows: u64,
    /// The sampler's configuration.
    pub config: SamplerConfig,
}

impl TickCost {
    pub fn us_per_tick(&self) -> f64 {
        self.elapsed.as_secs_f64() * 1e6 / self.ticks.max(1) as f64
    }
    pub fn ticks_per_s(&self) -> f64 {
        self.ticks as f64 / self.elapsed.as_secs_f64().max(f64::MIN_POSITIVE)
    }
}

impl fmt::Display for TickCost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "sampler tick, fake NVML with {} cards (one probe thread per card), ring {} points, \
             batch {} ticks: {} ticks in {:.3} s = {:.1} µs/tick, {:.0} ticks/s; {} rows, {} late ticks",
            self.cards,
            self.config.ring_capacity,
            self.config.batch_ticks,
            self.ticks,
            self.elapsed.as_secs_f64(),
            self.us_per_tick(),
            self.ticks_per_s(),
            self.rows,
            self.late_ticks
        )
    }
}

/// Runs `ticks` ticks back to back of [`fake_nvml_sampler`] with `cards` cards and measures them
/// (each tick may wait up to the sampler's probe deadline for a card; the fake answers at once).
pub fn measure_tick_cost(cards: u32, ticks: u64) -> Result<TickCost, TelemetryError> {
    let sink = CountingSink::default();
    let rows = sink.counter();
    let mut core = fake_nvml_sampler(cards, Box::new(sink))?;
    let deadline = core.config().probe_deadline();
    let config = core.config().clone();
    let mut late_ticks = 0;
    let start = Instant::now();
    for _ in 0..ticks {
        let tick = core.tick(Utc::now(), Instant::now() + deadline);
        late_ticks += u64::from(!tick.skipped.is_empty());
    }
    core.flush();
    let elapsed = start.elapsed();
    Ok(TickCost {
        cards,
        ticks,
        elapsed,
        late_ticks,
        rows: rows.load(std::sync::atomic::Ordering::Relaxed),
        config,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The measurement runs and every tick reads both cards (no timing is asserted).
    #[test]
    fn measuring_two_cards_reads_both_every_tick() {
        let cost = measure_tick_cost(2, 12).unwrap();
        assert_eq!(cost.ticks, 12);
        assert_eq!(cost.cards, 2);
        // Each card gives the same metrics every tick; PCIe every 5th tick (ticks 1, 6, 11).
        let per_card_plain = 14;
        let per_card_pcie = 16;
        assert_eq!(cost.rows, 2 * (9 * per_card_plain + 3 * per_card_pcie));
        let text = cost.to_string();
        assert!(
            text.contains("2 cards") && text.contains("µs/tick"),
            "{text}"
        );
    }
}
