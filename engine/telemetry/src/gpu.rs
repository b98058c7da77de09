//! The GPU probe interface: what a GPU reports, and the state of each way of asking.
//!
//! Every metric is optional: consumer cards, drivers and permissions differ, and a missing
//! library or file is something to *show* the user, never a reason to stop a study.

use std::fmt;

use super::metric::{MIB, Metric};
use super::pci::PciBusId;

/// Who made the card, i.e. which probe reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum GpuVendor {
    Nvidia,
    Amd,
}

impl fmt::Display for GpuVendor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            GpuVendor::Nvidia => "NVIDIA",
            GpuVendor::Amd => "AMD",
        })
    }
}

/// What is known about one card when its probe starts.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct GpuInfo {
    pub vendor: GpuVendor,
    /// The marketing name: NVML's (`NVIDIA GeForce RTX 4080`), or for AMD the one its PCI ids
    /// give (`AMD Radeon RX 7900 GRE`, see [`super::pci_names`]); otherwise a description built
    /// from what is known (`AMD Navi 31 (1002:744c rev c9)`, `AMD GPU 1002:744c (card1)`).
    pub name: String,
    pub pci_bus_id: Option<PciBusId>,
    /// NVML's `GPU-…` UUID.
    pub uuid: Option<String>,
    pub mem_total_bytes: Option<u64>,
    /// The kernel driver and its version where it says (`NVIDIA 560.35.03`, `amdgpu 6.8.5`, or
    /// `amdgpu (in-kernel, Linux 6.8.0)` when the module carries no version of its own).
    pub driver: Option<String>,
}

/// Why clocks are held down, as NVML reports it ("clocks event reasons"). amdgpu exposes no
/// equivalent in text sysfs (it lives in the binary `gpu_metrics` table), so AMD samples have
/// none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash, serde::Serialize)]
pub struct ThrottleReasons(pub u32);

impl ThrottleReasons {
    pub const GPU_IDLE: u32 = 1 << 0;
    pub const APPLICATIONS_CLOCKS: u32 = 1 << 1;
    pub const SW_POWER_CAP: u32 = 1 << 2;
    pub const HW_SLOWDOWN: u32 = 1 << 3;
    pub const SYNC_BOOST: u32 = 1 << 4;
    pub const SW_THERMAL: u32 = 1 << 5;
    pub const HW_THERMAL: u32 = 1 << 6;
    pub const HW_POWER_BRAKE: u32 = 1 << 7;
    pub const DISPLAY_CLOCKS: u32 = 1 << 8;

    const NAMES: [(u32, &'static str); 9] = [
        (Self::GPU_IDLE, "idle"),
        (Self::APPLICATIONS_CLOCKS, "application clocks setting"),
        (Self::SW_POWER_CAP, "power cap"),
        (Self::HW_SLOWDOWN, "hardware slowdown"),
        (Self::SYNC_BOOST, "sync boost"),
        (Self::SW_THERMAL, "thermal (software)"),
        (Self::HW_THERMAL, "thermal (hardware)"),
        (Self::HW_POWER_BRAKE, "power brake"),
        (Self::DISPLAY_CLOCKS, "display clocks setting"),
    ];

    /// Whether any bit of `mask` is set.
    pub fn has(&self, mask: u32) -> bool {
        self.0 & mask != 0
    }
    /// Temperature is holding the clocks down.
    pub fn is_thermal(&self) -> bool {
        self.has(Self::SW_THERMAL | Self::HW_THERMAL)
    }
    /// Power (the board limit or an external brake) is holding the clocks down.
    pub fn is_power(&self) -> bool {
        self.has(Self::SW_POWER_CAP | Self::HW_POWER_BRAKE | Self::HW_SLOWDOWN)
    }
    /// Human names of the set reasons.
    pub fn names(&self) -> Vec<&'static str> {
        Self::NAMES
            .iter()
            .filter(|(bit, _)| self.has(*bit))
            .map(|(_, n)| *n)
            .collect()
    }
}

/// How a process uses a card, as its probe tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum GpuProcessKind {
    /// NVML's compute list (CUDA).
    Compute,
    /// NVML's graphics list (Vulkan, OpenGL: a wgpu trainer is here).
    Graphics,
    /// In both of NVML's lists.
    ComputeAndGraphics,
    /// An amdgpu DRM client (fdinfo does not tell compute from graphics).
    Drm,
}

impl fmt::Display for GpuProcessKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            GpuProcessKind::Compute => "compute",
            GpuProcessKind::Graphics => "graphics",
            GpuProcessKind::ComputeAndGraphics => "compute+graphics",
            GpuProcessKind::Drm => "DRM client",
        })
    }
}

/// A process using a card (nvitop's process table).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct GpuProcess {
    pub pid: u32,
    /// The command name (`/proc/<pid>/comm`); `None` when it ended or may not be read.
    pub name: Option<String>,
    /// Device memory it holds; `None` when the driver does not say (NVML without permission).
    pub used_bytes: Option<u64>,
    pub kind: GpuProcessKind,
}

/// The command name of `pid` from `<proc_root>/<pid>/comm` (`/proc` on a live system).
pub fn process_name(proc_root: &std::path::Path, pid: u32) -> Option<String> {
    let text = std::fs::read_to_string(proc_root.join(pid.to_string()).join("comm")).ok()?;
    let name = text.trim_end_matches('\n');
    (!name.is_empty()).then(|| name.to_owned())
}

/// Orders a card's processes as a table shows them: most memory first, then by pid.
pub fn sort_processes(list: &mut [GpuProcess]) {
    list.sort_by(|a, b| b.used_bytes.cmp(&a.used_bytes).then(a.pid.cmp(&b.pid)));
}

/// One reading of one card. `None` = this card, driver or permission does not tell.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct GpuSample {
    pub util_pct: Option<f64>,
    pub mem_util_pct: Option<f64>,
    pub mem_used_bytes: Option<u64>,
    pub mem_total_bytes: Option<u64>,
    pub process_mem_used_bytes: Option<u64>,
    pub temp_c: Option<f64>,
    pub temp_junction_c: Option<f64>,
    pub temp_mem_c: Option<f64>,
    pub power_w: Option<f64>,
    pub power_limit_w: Option<f64>,
    pub sm_clock_mhz: Option<f64>,
    pub sm_clock_max_mhz: Option<f64>,
    pub mem_clock_mhz: Option<f64>,
    pub mem_clock_max_mhz: Option<f64>,
    pub throttle: Option<ThrottleReasons>,
    pub pcie_rx_kib_s: Option<f64>,
    pub pcie_tx_kib_s: Option<f64>,
    pub fan_pct: Option<f64>,
    /// amdgpu `power_dpm_force_performance_level` (`auto`, `high`, `manual`, …).
    pub perf_level: Option<String>,
    /// amdgpu `pp_power_profile_mode`, the active profile (`COMPUTE`, `3D_FULL_SCREEN`, …).
    pub power_profile: Option<String>,
    /// The processes using the card; `None` when not read this time (amdgpu scans `/proc`
    /// every few ticks only) or the probe cannot tell.
    pub processes: Option<Vec<GpuProcess>>,
    /// Files or calls that answered something unreadable (missing ones are silent).
    pub problems: Vec<String>,
}

impl GpuSample {
    /// The numeric metrics present in this sample, in [`Metric::GPU`] order.
    pub fn metrics(&self) -> Vec<(Metric, f64)> {
        let mib = |b: Option<u64>| b.map(|b| b as f64 / MIB);
        let values = [
            self.util_pct,
            self.mem_util_pct,
            mib(self.mem_used_bytes),
            mib(self.mem_total_bytes),
            mib(self.process_mem_used_bytes),
            self.temp_c,
            self.temp_junction_c,
            self.temp_mem_c,
            self.power_w,
            self.power_limit_w,
            self.sm_clock_mhz,
            self.sm_clock_max_mhz,
            self.mem_clock_mhz,
            self.mem_clock_max_mhz,
            self.throttle.map(|t| f64::from(t.0)),
            self.pcie_rx_kib_s,
            self.pcie_tx_kib_s,
            self.fan_pct,
        ];
        Metric::GPU
            .iter()
            .zip(values)
            .filter_map(|(m, v)| v.map(|v| (*m, v)))
            .collect()
    }
}

/// The state of one way of reaching GPUs, shown to the user as it is.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub enum ProbeStatus {
    /// Working, with this many cards.
    Ready { vendor: GpuVendor, devices: usize },
    /// Nothing to probe here (no library, no driver, no cards); the text says which and why.
    Unavailable { vendor: GpuVendor, reason: String },
}

impl fmt::Display for ProbeStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProbeStatus::Ready { vendor, devices } => {
                write!(
                    f,
                    "{vendor}: {devices} GPU{}",
                    if *devices == 1 { "" } else { "s" }
                )
            }
            ProbeStatus::Unavailable { vendor, reason } => write!(f, "{vendor}: {reason}"),
        }
    }
}

/// A way of reading a set of GPUs.
pub trait GpuProbe: Send {
    /// The cards this probe reads, in sampling order.
    fn devices(&self) -> &[GpuInfo];
    /// One sample per card, in [`GpuProbe::devices`] order. Never fails: what cannot be read is
    /// `None` (and, if it answered garbage, a line in `problems`).
    fn sample(&mut self) -> Vec<GpuSample>;
    /// This probe as one probe per card, in [`GpuProbe::devices`] order. The sampler runs each
    /// on its own thread with its own deadline, so a card whose driver calls stall loses its
    /// own reading for the tick and not the other cards'. A probe that cannot be split answers
    /// itself (its cards then share one deadline).
    fn split(self: Box<Self>) -> Vec<Box<dyn GpuProbe>>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_metrics_convert_bytes_to_mib_and_skip_missing() {
        let s = GpuSample {
            util_pct: Some(97.0),
            mem_used_bytes: Some(512 * 1024 * 1024),
            throttle: Some(ThrottleReasons(ThrottleReasons::SW_THERMAL)),
            ..Default::default()
        };
        assert_eq!(
            s.metrics(),
            vec![
                (Metric::UtilPct, 97.0),
                (Metric::MemUsedMib, 512.0),
                (Metric::ThrottleMask, 32.0)
            ]
        );
    }

    #[test]
    fn process_names_come_from_comm() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("42")).unwrap();
        std::fs::write(dir.path().join("42/comm"), "python3\n").unwrap();
        std::fs::create_dir_all(dir.path().join("43")).unwrap();
        std::fs::write(dir.path().join("43/comm"), "\n").unwrap();
        assert_eq!(process_name(dir.path(), 42).as_deref(), Some("python3"));
        assert_eq!(process_name(dir.path(), 43), None);
        assert_eq!(process_name(dir.path(), 44), None);
    }

    #[test]
    fn processes_sort_by_memory_then_pid() {
        let p = |pid, used_bytes| GpuProcess {
            pid,
            name: None,
            used_bytes,
            kind: GpuProcessKind::Drm,
        };
        let mut list = vec![p(9, None), p(3, Some(10)), p(2, Some(10)), p(7, Some(99))];
        sort_processes(&mut list);
        let pids: Vec<u32> = list.iter().map(|p| p.pid).collect();
        assert_eq!(pids, [7, 2, 3, 9]);
    }

    #[test]
    fn throttle_reasons_classify() {
        let t = ThrottleReasons(ThrottleReasons::HW_THERMAL | ThrottleReasons::GPU_IDLE);
        assert!(t.is_thermal());
        assert!(!t.is_power());
        assert_eq!(t.names(), vec!["idle", "thermal (hardware)"]);
    }
}
