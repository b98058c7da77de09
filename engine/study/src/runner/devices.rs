//! Devices of a study and which worker runs on which.
//!
//! Each worker is bound to one device for its whole life (the user's two-GPU box left one card
//! idle because workers picked their device per task and all ended up on the same one). The
//! binding is decided once, before any trial starts, so it can be shown and tested:
//! - [`Assignment::RoundRobin`]: worker `w` → device `w mod n`;
//! - [`Assignment::LeastLoaded`]: each worker in turn goes to the device whose memory budget per
//!   worker would stay largest (`memory / (workers on it + 1)`; ties to the first listed), so a
//!   16 GiB card gets twice the workers of an 8 GiB one. Devices of unknown memory count as
//!   having the smallest known memory.

use serde::{Deserialize, Serialize};

use tradetune_device::DeviceSpec;

/// One device a study may run trials on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceSlot {
    /// How trials record it (`cpu`, `wgpu:0`; `cpu#1` when a device is listed twice).
    pub label: String,
    pub spec: DeviceSpec,
    /// The device's memory in bytes, the base of the memory budget; None = unknown (no check).
    pub memory_bytes: Option<u64>,
}

impl DeviceSlot {
    pub fn new(spec: DeviceSpec, memory_bytes: Option<u64>) -> Self {
        DeviceSlot {
            label: spec.to_string(),
            spec,
            memory_bytes,
        }
    }

    /// The burn backend that runs this device.
    pub fn backend(&self) -> &'static str {
        match self.spec {
            DeviceSpec::Cpu => "flex",
            DeviceSpec::Wgpu(_) | DeviceSpec::WgpuOf(..) => "wgpu",
            DeviceSpec::Cuda(_) => "cuda",
            DeviceSpec::Rocm(_) => "rocm",
        }
    }
}

/// How trials on one GPU share it (`[study] gpu_sharing`).
///
/// Workers of one process bound to one card share one device queue: a synchronisation (each
/// update's read, each host-env step's action read) waits for every trial's queued kernels,
/// and each new trial's compilation stalls the others. On the first real card measured (an
/// H100 through Vulkan, 2026-11-27) three trials of the RTX 4080 preset sharing it ran at
/// 350–451 samples/s each with the card 23 % busy; on lavapipe two trials sharing the
/// software adapter deliver no more in aggregate than one. So a card runs one trial at a time
/// unless the study asks otherwise; the other workers bound to it wait for it (and say so).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GpuSharing {
    /// One trial per GPU at a time (the default).
    #[default]
    Serial,
    /// Every worker bound to a GPU trains on it at once.
    Shared,
}

impl GpuSharing {
    /// The reason a worker waits, as the app and the CLI show it.
    pub const WHY: &'static str = "one trial per GPU at a time: trials sharing a card wait for \
        each other's kernels at every synchronisation (set gpu_sharing = \"shared\" to run them \
        at once)";

    /// Whether workers bound to `spec` take turns on it.
    pub fn serialises(self, spec: DeviceSpec) -> bool {
        self == GpuSharing::Serial && spec != DeviceSpec::Cpu
    }

    /// How many runs share the memory budget of a device `spec` that `workers` workers are
    /// bound to: the runs on it at once. Workers taking turns run one trial at a time, so that
    /// trial has the whole budget; the RTX 4080 preset's three workers were each given a third
    /// of the card and refused configurations it had room for. The runner, the app's draft
    /// and the preset check all divide by this.
    pub fn runs_sharing_budget(self, spec: DeviceSpec, workers: usize) -> usize {
        if self.serialises(spec) {
            1
        } else {
            workers.max(1)
        }
    }
}

/// Gives devices listed more than once distinct labels (`cpu`, `cpu#1`, `cpu#2`), so every
/// trial says which slot it ran on.
pub fn label_slots(slots: &mut [DeviceSlot]) {
    let labels: Vec<String> = slots.iter().map(|s| s.spec.to_string()).collect();
    for (i, slot) in slots.iter_mut().enumerate() {
        let earlier = labels[..i].iter().filter(|l| **l == labels[i]).count();
        slot.label = if earlier == 0 {
            labels[i].clone()
        } else {
            format!("{}#{earlier}", labels[i])
        };
    }
}

/// How workers are spread over devices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Assignment {
    #[default]
    RoundRobin,
    LeastLoaded,
}

impl std::str::FromStr for Assignment {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "round_robin" | "round-robin" => Ok(Assignment::RoundRobin),
            "least_loaded" | "least-loaded" => Ok(Assignment::LeastLoaded),
            _ => Err(format!(
                "unknown assignment '{s}': expected round_robin or least_loaded"
            )),
        }
    }
}

/// The device index of each of `workers` workers.
pub fn assign(workers: usize, devices: &[DeviceSlot], how: Assignment) -> Vec<usize> {
    if devices.is_empty() {
        return Vec::new();
    }
    match how {
        Assignment::RoundRobin => (0..workers).map(|w| w % devices.len()).collect(),
        Assignment::LeastLoaded => {
            let smallest = devices
                .iter()
                .filter_map(|d| d.memory_bytes)
                .min()
                .unwrap_or(1);
            let memory: Vec<f64> = devices
                .iter()
                .map(|d| d.memory_bytes.unwrap_or(smallest) as f64)
                .collect();
            let mut load = vec![0usize; devices.len()];
            (0..workers)
                .map(|_| {
                    let mut best = 0;
                    let mut best_share = f64::NEG_INFINITY;
                    for (i, m) in memory.iter().enumerate() {
                        let share = m / (load[i] + 1) as f64;
                        if share > best_share {
                            best = i;
                            best_share = share;
                        }
                    }
                    load[best] += 1;
                    best
                })
                .collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpu(gib: u64) -> DeviceSlot {
        DeviceSlot::new(DeviceSpec::Cpu, Some(gib << 30))
    }

    #[test]
    fn round_robin_cycles_and_least_loaded_follows_memory() {
        let devices = vec![cpu(8), cpu(16)];
        assert_eq!(
            assign(5, &devices, Assignment::RoundRobin),
            vec![0, 1, 0, 1, 0]
        );
        // 16/1 > 8/1 → 1; 8/1 = 16/2 → 0 (first); 8/2 < 16/2 → 1; 8/2 = 16/3? no: 4 < 5.33 → 1.
        assert_eq!(
            assign(4, &devices, Assignment::LeastLoaded),
            vec![1, 0, 1, 1]
        );
        assert!(assign(3, &[], Assignment::RoundRobin).is_empty());
    }

    #[test]
    fn only_runs_on_a_device_at_once_share_its_budget() {
        let gpu = DeviceSpec::Cuda(0);
        assert_eq!(GpuSharing::Serial.runs_sharing_budget(gpu, 3), 1);
        assert_eq!(GpuSharing::Shared.runs_sharing_budget(gpu, 3), 3);
        // The CPU is never taken in turns.
        assert_eq!(
            GpuSharing::Serial.runs_sharing_budget(DeviceSpec::Cpu, 3),
            3
        );
        assert_eq!(GpuSharing::Shared.runs_sharing_budget(gpu, 0), 1);
    }

    #[test]
    fn repeated_devices_get_distinct_labels() {
        let mut slots = vec![
            cpu(1),
            cpu(1),
            DeviceSlot::new(DeviceSpec::Wgpu(Some(0)), None),
        ];
        label_slots(&mut slots);
        let labels: Vec<&str> = slots.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(labels, ["cpu", "cpu#1", "wgpu:0"]);
        assert_eq!(slots[2].backend(), "wgpu");
    }
}
