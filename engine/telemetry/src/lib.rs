//! Telemetry: see where the GPU and the time go, per device and per trial.
//!
//! - Probes: [`GpuProbe`] for NVIDIA ([`nvml`], through NVML) and AMD ([`amdgpu`], the amdgpu
//!   sysfs files read directly); [`host`] for the CPUs and the training process. Every metric is
//!   optional and a missing library, driver or file is a [`ProbeStatus`] to show, never a crash.
//! - [`pci_names`]: a card's marketing name from its PCI ids (`AMD Radeon RX 7900 GRE`).
//! - [`identity`]: which card a burn device runs on.
//! - [`sampler`]: one thread sampling every probe per interval into ring buffers ([`ring`]) and
//!   batched rows for a [`TelemetrySink`] ([`sink`]); [`wide`] lays ticks out as CSV columns.
//! - [`phase`]: wall time per training phase; [`summary`]: a trial condensed; [`verdict`]: what
//!   limits it, in plain words.

pub mod amdgpu;
pub mod amdgpu_fdinfo;
pub mod amdgpu_files;
pub mod discovery;
mod error;
pub mod gpu;
pub mod host;
pub mod identity;
pub mod metric;
pub mod nvml;
pub mod nvml_fake;
pub mod pci;
pub mod pci_names;
pub mod phase;
pub mod ring;
pub mod sampler;
pub mod sink;
pub mod source;
pub mod summary;
pub mod tick_cost;
pub mod verdict;
pub mod wide;
mod worker;

pub use discovery::GpuDiscovery;
pub use error::TelemetryError;
pub use gpu::{
    GpuInfo, GpuProbe, GpuProcess, GpuProcessKind, GpuSample, GpuVendor, ProbeStatus,
    ThrottleReasons,
};
pub use host::{HostProbe, HostSample, SysinfoHostProbe};
pub use identity::{BurnDeviceDescription, DeviceMatch, PciBusId, match_device};
pub use metric::{DeviceTag, Metric};
pub use phase::{Phase, PhaseSplit, PhaseTimer};
pub use ring::{PlotPoint, Ring};
pub use sampler::{
    DeviceProcesses, RunningTrial, Sampler, SamplerConfig, SamplerCore, SamplerHandle,
    SamplerStats, Tick, TrialTotals,
};
pub use sink::{MemorySink, StorageSink, TelemetryRow, TelemetrySink};
pub use source::{DeviceReading, GpuSource, HostSource, Source, SourceReading};
pub use summary::{DeviceSummary, SeriesSet, SeriesTotals, TrialFacts, TrialSummary};
pub use verdict::{CpuSharing, DeviceFacts, GpuWork, Verdict, VerdictInput, VerdictKind, verdicts};
pub use wide::{CsvLog, WideLayout};

/// Where the amdgpu probe looks by default.
pub const DRM_ROOT: &str = "/sys/class/drm";
