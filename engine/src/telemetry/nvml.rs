//! NVIDIA cards through NVML (`nvml-wrapper`, which loads `libnvidia-ml.so.1` at run time).
//!
//! On a machine without the NVIDIA driver `Nvml::init` fails to load the library; that is the
//! normal case in CI and is reported as "NVIDIA: library not found", never a crash. Each metric
//! is asked for separately: consumer cards answer `NotSupported` for some (PCIe throughput on
//! vGPUs, fan on laptops), which leaves just that metric empty.

use nvml_wrapper::Nvml;
use nvml_wrapper::bitmasks::device::ThrottleReasons as NvmlThrottle;
use nvml_wrapper::enum_wrappers::device::{Clock, PcieUtilCounter, TemperatureSensor};
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;

use super::gpu::{GpuInfo, GpuProbe, GpuSample, GpuVendor, ProbeStatus, ThrottleReasons};
use super::identity::PciBusId;
use super::pci_names::{NameDatabases, PciIds, gpu_name};

/// Reads every NVIDIA card NVML lists.
pub struct NvmlProbe {
    nvml: Nvml,
    devices: Vec<GpuInfo>,
    /// Which process's device memory to report (NVML lists per-process usage).
    pid: u32,
}

impl NvmlProbe {
    /// Loads NVML and lists the cards; the error is the state to show the user.
    pub fn init() -> Result<NvmlProbe, ProbeStatus> {
        let unavailable = |reason: String| ProbeStatus::Unavailable {
            vendor: GpuVendor::Nvidia,
            reason,
        };
        let nvml = Nvml::init().map_err(|e| unavailable(init_error_reason(&e)))?;
        let count = nvml
            .device_count()
            .map_err(|e| unavailable(format!("NVML could not count devices: {e}")))?;
        if count == 0 {
            return Err(unavailable("NVML loaded but lists no devices".into()));
        }
        let driver = nvml
            .sys_driver_version()
            .ok()
            .map(|v| format!("NVIDIA {v}"));
        let mut devices = Vec::new();
        for index in 0..count {
            let device = nvml
                .device_by_index(index)
                .map_err(|e| unavailable(format!("NVML device {index}: {e}")))?;
            let pci = device.pci_info().ok();
            // NVML's own name; where it cannot give one, the name the PCI ids give.
            let name = device.name().ok().or_else(|| {
                let p = pci.as_ref()?;
                let ids = PciIds::from_nvml(p.pci_device_id, p.pci_sub_system_id);
                gpu_name(&ids, &NameDatabases::system()).map(|n| n.name)
            });
            devices.push(GpuInfo {
                vendor: GpuVendor::Nvidia,
                name: name.unwrap_or_else(|| format!("NVIDIA GPU {index}")),
                pci_bus_id: pci.as_ref().and_then(|p| p.bus_id.parse::<PciBusId>().ok()),
                uuid: device.uuid().ok(),
                mem_total_bytes: device.memory_info().ok().map(|m| m.total),
                driver: driver.clone(),
            });
        }
        Ok(NvmlProbe {
            nvml,
            devices,
            pid: std::process::id(),
        })
    }

    /// Reports device memory of `pid` instead of this process (for `monitor --pid`).
    pub fn watch_pid(&mut self, pid: u32) {
        self.pid = pid;
    }

    fn sample_one(&self, index: u32) -> GpuSample {
        let mut s = GpuSample::default();
        let device = match self.nvml.device_by_index(index) {
            Ok(d) => d,
            Err(e) => {
                s.problems.push(format!("NVML device {index}: {e}"));
                return s;
            }
        };
        let mut problems = Vec::new();
        // NotSupported is the card's answer "I don't have this", not a problem worth a line.
        let mut ok = |r: Result<u32, NvmlError>, what: &str| -> Option<u32> {
            match r {
                Ok(v) => Some(v),
                Err(NvmlError::NotSupported) => None,
                Err(e) => {
                    problems.push(format!("NVML {what}: {e}"));
                    None
                }
            }
        };
        if let Ok(u) = device.utilization_rates() {
            s.util_pct = Some(f64::from(u.gpu));
            s.mem_util_pct = Some(f64::from(u.memory));
        }
        if let Ok(m) = device.memory_info() {
            s.mem_used_bytes = Some(m.used);
            s.mem_total_bytes = Some(m.total);
        }
        if let Ok(procs) = device.running_compute_processes() {
            s.process_mem_used_bytes =
                procs
                    .iter()
                    .filter(|p| p.pid == self.pid)
                    .find_map(|p| match p.used_gpu_memory {
                        UsedGpuMemory::Used(b) => Some(b),
                        UsedGpuMemory::Unavailable => None,
                    });
        }
        s.temp_c = ok(device.temperature(TemperatureSensor::Gpu), "temperature").map(f64::from);
        // NVML reports power in milliwatts.
        s.power_w = ok(device.power_usage(), "power").map(|mw| f64::from(mw) / 1000.0);
        s.power_limit_w =
            ok(device.enforced_power_limit(), "power limit").map(|mw| f64::from(mw) / 1000.0);
        s.sm_clock_mhz = ok(device.clock_info(Clock::SM), "SM clock").map(f64::from);
        s.sm_clock_max_mhz = ok(device.max_clock_info(Clock::SM), "SM max clock").map(f64::from);
        s.mem_clock_mhz = ok(device.clock_info(Clock::Memory), "memory clock").map(f64::from);
        s.mem_clock_max_mhz =
            ok(device.max_clock_info(Clock::Memory), "memory max clock").map(f64::from);
        // PCIe counters are KB/s over a 20 ms window (NVML docs, nvmlDeviceGetPcieThroughput).
        s.pcie_rx_kib_s =
            ok(device.pcie_throughput(PcieUtilCounter::Receive), "PCIe rx").map(f64::from);
        s.pcie_tx_kib_s =
            ok(device.pcie_throughput(PcieUtilCounter::Send), "PCIe tx").map(f64::from);
        s.fan_pct = ok(device.fan_speed(0), "fan").map(f64::from);
        match device.current_throttle_reasons() {
            Ok(t) => s.throttle = Some(convert_throttle(t)),
            Err(NvmlError::NotSupported) => {}
            Err(e) => problems.push(format!("NVML throttle reasons: {e}")),
        }
        s.problems = problems;
        s
    }
}

fn convert_throttle(t: NvmlThrottle) -> ThrottleReasons {
    let pairs = [
        (NvmlThrottle::GPU_IDLE, ThrottleReasons::GPU_IDLE),
        (
            NvmlThrottle::APPLICATIONS_CLOCKS_SETTING,
            ThrottleReasons::APPLICATIONS_CLOCKS,
        ),
        (NvmlThrottle::SW_POWER_CAP, ThrottleReasons::SW_POWER_CAP),
        (NvmlThrottle::HW_SLOWDOWN, ThrottleReasons::HW_SLOWDOWN),
        (NvmlThrottle::SYNC_BOOST, ThrottleReasons::SYNC_BOOST),
        (
            NvmlThrottle::SW_THERMAL_SLOWDOWN,
            ThrottleReasons::SW_THERMAL,
        ),
        (
            NvmlThrottle::HW_THERMAL_SLOWDOWN,
            ThrottleReasons::HW_THERMAL,
        ),
        (
            NvmlThrottle::HW_POWER_BRAKE_SLOWDOWN,
            ThrottleReasons::HW_POWER_BRAKE,
        ),
        (
            NvmlThrottle::DISPLAY_CLOCK_SETTING,
            ThrottleReasons::DISPLAY_CLOCKS,
        ),
    ];
    ThrottleReasons(
        pairs
            .iter()
            .filter(|(n, _)| t.contains(*n))
            .fold(0, |acc, (_, ours)| acc | ours),
    )
}

/// The user-facing reason NVML could not start.
fn init_error_reason(e: &NvmlError) -> String {
    match e {
        NvmlError::LibloadingError(inner) => {
            format!("library not found (libnvidia-ml.so.1 could not be loaded: {inner})")
        }
        NvmlError::LibraryNotFound => "library not found (libnvidia-ml.so.1)".into(),
        NvmlError::DriverNotLoaded => "NVML found but the NVIDIA driver is not loaded".into(),
        NvmlError::NoPermission => "no permission to use NVML".into(),
        other => format!("NVML failed to start: {other}"),
    }
}

impl GpuProbe for NvmlProbe {
    fn devices(&self) -> &[GpuInfo] {
        &self.devices
    }
    fn sample(&mut self) -> Vec<GpuSample> {
        (0..self.devices.len() as u32)
            .map(|i| self.sample_one(i))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_library_is_a_state_not_a_crash() {
        // On machines with the NVIDIA driver this finds cards instead; both are fine, but the
        // failure must be a readable state.
        match NvmlProbe::init() {
            Ok(p) => assert!(!p.devices().is_empty()),
            Err(status) => {
                let text = status.to_string();
                assert!(text.starts_with("NVIDIA: "), "{text}");
            }
        }
    }

    #[test]
    fn throttle_bits_map_one_to_one() {
        let t = convert_throttle(NvmlThrottle::SW_POWER_CAP | NvmlThrottle::HW_THERMAL_SLOWDOWN);
        assert_eq!(
            t,
            ThrottleReasons(ThrottleReasons::SW_POWER_CAP | ThrottleReasons::HW_THERMAL)
        );
    }
}
