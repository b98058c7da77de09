//! NVIDIA cards through NVML (`nvml-wrapper`, which loads `libnvidia-ml.so.1` at run time).
//!
//! On a machine without the NVIDIA driver `Nvml::init` fails to load the library; that is the
//! normal case in CI and is reported as "NVIDIA: library not found", never a crash. Each metric
//! is asked for separately: consumer cards answer `NotSupported` for some (PCIe throughput on
//! vGPUs, fan on laptops), which leaves just that metric empty.
//!
//! The calls go through [`NvmlLib`] and [`NvmlCard`], implemented by the real library and by
//! [`super::nvml_fake::FakeNvml`] (tests and the sampler benchmark). Each card is sampled by its
//! own probe ([`GpuProbe::split`]) on its own thread, so a card whose calls stall (fallen off
//! the bus, resetting) loses its own reading for the tick and not the others'.

use std::sync::Arc;

use nvml_wrapper::Nvml;
use nvml_wrapper::bitmasks::device::ThrottleReasons as NvmlThrottle;
use nvml_wrapper::enum_wrappers::device::{Clock, PcieUtilCounter, TemperatureSensor};
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::struct_wrappers::device::{MemoryInfo, PciInfo, ProcessInfo, Utilization};

use super::gpu::{
    GpuInfo, GpuProbe, GpuProcess, GpuProcessKind, GpuSample, GpuVendor, ProbeStatus,
    ThrottleReasons, process_name, sort_processes,
};
use super::identity::PciBusId;
use super::pci_names::{NameDatabases, PciIds, gpu_name};

/// The library calls the probe makes (nvml-wrapper's names and types).
pub trait NvmlLib: Send + Sync + 'static {
    fn device_count(&self) -> Result<u32, NvmlError>;
    fn sys_driver_version(&self) -> Result<String, NvmlError>;
    /// The handle of card `index` for the calls of [`NvmlCard`].
    fn card(&self, index: u32) -> Result<Box<dyn NvmlCard + '_>, NvmlError>;
}

/// The per-card calls the probe makes (nvml-wrapper's `Device` methods).
#[allow(missing_docs)]
pub trait NvmlCard {
    fn name(&self) -> Result<String, NvmlError>;
    fn pci_info(&self) -> Result<PciInfo, NvmlError>;
    fn uuid(&self) -> Result<String, NvmlError>;
    fn memory_info(&self) -> Result<MemoryInfo, NvmlError>;
    fn enforced_power_limit(&self) -> Result<u32, NvmlError>;
    fn max_clock_info(&self, clock: Clock) -> Result<u32, NvmlError>;
    fn utilization_rates(&self) -> Result<Utilization, NvmlError>;
    fn running_compute_processes(&self) -> Result<Vec<ProcessInfo>, NvmlError>;
    fn running_graphics_processes(&self) -> Result<Vec<ProcessInfo>, NvmlError>;
    fn temperature(&self, sensor: TemperatureSensor) -> Result<u32, NvmlError>;
    fn power_usage(&self) -> Result<u32, NvmlError>;
    fn clock_info(&self, clock: Clock) -> Result<u32, NvmlError>;
    fn pcie_throughput(&self, counter: PcieUtilCounter) -> Result<u32, NvmlError>;
    fn fan_speed(&self, fan: u32) -> Result<u32, NvmlError>;
    fn current_throttle_reasons(&self) -> Result<NvmlThrottle, NvmlError>;
}

impl NvmlLib for Nvml {
    fn device_count(&self) -> Result<u32, NvmlError> {
        Nvml::device_count(self)
    }
    fn sys_driver_version(&self) -> Result<String, NvmlError> {
        Nvml::sys_driver_version(self)
    }
    fn card(&self, index: u32) -> Result<Box<dyn NvmlCard + '_>, NvmlError> {
        Ok(Box::new(self.device_by_index(index)?))
    }
}

impl NvmlCard for nvml_wrapper::Device<'_> {
    fn name(&self) -> Result<String, NvmlError> {
        nvml_wrapper::Device::name(self)
    }
    fn pci_info(&self) -> Result<PciInfo, NvmlError> {
        nvml_wrapper::Device::pci_info(self)
    }
    fn uuid(&self) -> Result<String, NvmlError> {
        nvml_wrapper::Device::uuid(self)
    }
    fn memory_info(&self) -> Result<MemoryInfo, NvmlError> {
        nvml_wrapper::Device::memory_info(self)
    }
    fn enforced_power_limit(&self) -> Result<u32, NvmlError> {
        nvml_wrapper::Device::enforced_power_limit(self)
    }
    fn max_clock_info(&self, clock: Clock) -> Result<u32, NvmlError> {
        nvml_wrapper::Device::max_clock_info(self, clock)
    }
    fn utilization_rates(&self) -> Result<Utilization, NvmlError> {
        nvml_wrapper::Device::utilization_rates(self)
    }
    fn running_compute_processes(&self) -> Result<Vec<ProcessInfo>, NvmlError> {
        nvml_wrapper::Device::running_compute_processes(self)
    }
    fn running_graphics_processes(&self) -> Result<Vec<ProcessInfo>, NvmlError> {
        nvml_wrapper::Device::running_graphics_processes(self)
    }
    fn temperature(&self, sensor: TemperatureSensor) -> Result<u32, NvmlError> {
        nvml_wrapper::Device::temperature(self, sensor)
    }
    fn power_usage(&self) -> Result<u32, NvmlError> {
        nvml_wrapper::Device::power_usage(self)
    }
    fn clock_info(&self, clock: Clock) -> Result<u32, NvmlError> {
        nvml_wrapper::Device::clock_info(self, clock)
    }
    fn pcie_throughput(&self, counter: PcieUtilCounter) -> Result<u32, NvmlError> {
        nvml_wrapper::Device::pcie_throughput(self, counter)
    }
    fn fan_speed(&self, fan: u32) -> Result<u32, NvmlError> {
        nvml_wrapper::Device::fan_speed(self, fan)
    }
    fn current_throttle_reasons(&self) -> Result<NvmlThrottle, NvmlError> {
        nvml_wrapper::Device::current_throttle_reasons(self)
    }
}

/// Reads NVIDIA cards through NVML: every card the library lists, or (after
/// [`GpuProbe::split`]) one of them.
pub struct NvmlProbe {
    nvml: Arc<dyn NvmlLib>,
    devices: Vec<GpuInfo>,
    /// NVML's index of each card in `devices` (a card NVML cannot open is left out, not the
    /// whole probe).
    nvml_index: Vec<u32>,
    /// Per card, what does not change while it runs: read once.
    constants: Vec<Constants>,
    /// Which process's device memory to report (NVML lists per-process usage).
    pid: u32,
    /// Where the listed processes' names are read (`/proc`).
    proc_root: std::path::PathBuf,
    /// Ticks sampled so far: PCIe throughput (a 20 ms window per read) every [`PCIE_EVERY`].
    ticks: u64,
    /// Problems seen so far and how often: each is reported once, then every 100th time with
    /// its count, instead of a line every tick.
    seen: std::collections::HashMap<String, u64>,
    /// Problems of `init` (a card left out) for the first sample.
    pending: Vec<String>,
}

/// Constant values of one card.
#[derive(Debug, Clone, Copy, Default)]
struct Constants {
    power_limit_w: Option<f64>,
    sm_clock_max_mhz: Option<f64>,
    mem_clock_max_mhz: Option<f64>,
}

/// PCIe throughput is read every this many ticks: each read samples a 20 ms window, two per
/// card per tick would eat the tick's deadline at short intervals.
const PCIE_EVERY: u64 = 5;

/// The device memory `pid` holds on a card, from NVML's compute and graphics process lists: a
/// Vulkan compute program (wgpu) is listed among the graphics processes, a CUDA one among the
/// compute processes. The largest figure where it appears in both.
pub fn own_memory(pid: u32, lists: &[&[ProcessInfo]]) -> Option<u64> {
    lists
        .iter()
        .flat_map(|l| l.iter())
        .filter(|p| p.pid == pid)
        .filter_map(|p| match p.used_gpu_memory {
            UsedGpuMemory::Used(b) => Some(b),
            UsedGpuMemory::Unavailable => None,
        })
        .max()
}

/// Every process of NVML's compute and graphics lists once, with its name (`name_of`) and the
/// largest memory figure it is listed with, most memory first.
pub fn card_processes(
    compute: &[ProcessInfo],
    graphics: &[ProcessInfo],
    name_of: impl Fn(u32) -> Option<String>,
) -> Vec<GpuProcess> {
    let mut out: Vec<GpuProcess> = Vec::new();
    let bytes = |p: &ProcessInfo| match p.used_gpu_memory {
        UsedGpuMemory::Used(b) => Some(b),
        UsedGpuMemory::Unavailable => None,
    };
    for (list, kind) in [
        (compute, GpuProcessKind::Compute),
        (graphics, GpuProcessKind::Graphics),
    ] {
        for p in list {
            match out.iter_mut().find(|o| o.pid == p.pid) {
                Some(o) => {
                    o.used_bytes = o.used_bytes.max(bytes(p));
                    if o.kind != kind {
                        o.kind = GpuProcessKind::ComputeAndGraphics;
                    }
                }
                None => out.push(GpuProcess {
                    pid: p.pid,
                    name: name_of(p.pid),
                    used_bytes: bytes(p),
                    kind,
                }),
            }
        }
    }
    sort_processes(&mut out);
    out
}

/// Counts `problem` and says whether to report it now: the first time, then every 100th time
/// with its count.
fn report_once(
    seen: &mut std::collections::HashMap<String, u64>,
    problem: String,
) -> Option<String> {
    let n = seen.entry(problem.clone()).or_default();
    *n += 1;
    match *n {
        1 => Some(problem),
        n if n.is_multiple_of(100) => Some(format!("{problem} (seen {n} times)")),
        _ => None,
    }
}

impl NvmlProbe {
    /// Loads NVML and lists the cards; the error is the state to show the user.
    pub fn init() -> Result<NvmlProbe, ProbeStatus> {
        let nvml = Nvml::init().map_err(|e| ProbeStatus::Unavailable {
            vendor: GpuVendor::Nvidia,
            reason: init_error_reason(&e),
        })?;
        NvmlProbe::with_lib(Arc::new(nvml))
    }

    /// Lists the cards of `nvml` (the real library, or a fake in tests and benchmarks).
    pub fn with_lib(nvml: Arc<dyn NvmlLib>) -> Result<NvmlProbe, ProbeStatus> {
        let unavailable = |reason: String| ProbeStatus::Unavailable {
            vendor: GpuVendor::Nvidia,
            reason,
        };
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
        let mut nvml_index = Vec::new();
        let mut constants = Vec::new();
        let mut pending = Vec::new();
        for index in 0..count {
            // One card that answers NoPermission or GpuLost leaves the others readable.
            let device = match nvml.card(index) {
                Ok(d) => d,
                Err(e) => {
                    pending.push(format!("NVML device {index} left out: {e}"));
                    continue;
                }
            };
            let mw = |r: Result<u32, NvmlError>| r.ok().map(|v| f64::from(v) / 1000.0);
            let mhz = |r: Result<u32, NvmlError>| r.ok().map(f64::from);
            constants.push(Constants {
                power_limit_w: mw(device.enforced_power_limit()),
                sm_clock_max_mhz: mhz(device.max_clock_info(Clock::SM)),
                mem_clock_max_mhz: mhz(device.max_clock_info(Clock::Memory)),
            });
            nvml_index.push(index);
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
        if devices.is_empty() {
            return Err(unavailable(format!(
                "NVML lists {count} device(s) but opens none: {}",
                pending.join("; ")
            )));
        }
        Ok(NvmlProbe {
            nvml,
            devices,
            nvml_index,
            constants,
            pid: std::process::id(),
            proc_root: std::path::PathBuf::from("/proc"),
            ticks: 0,
            seen: std::collections::HashMap::new(),
            pending,
        })
    }

    /// Reports device memory of `pid` instead of this process (for `monitor --pid`).
    pub fn watch_pid(&mut self, pid: u32) {
        self.pid = pid;
    }

    /// Reads the listed processes' names under `proc_root` instead of `/proc` (tests).
    pub fn with_proc_root(mut self, proc_root: impl Into<std::path::PathBuf>) -> Self {
        self.proc_root = proc_root.into();
        self
    }

    fn sample_one(&self, slot: usize, pcie: bool) -> GpuSample {
        let mut s = GpuSample::default();
        let index = self.nvml_index[slot];
        let c = self.constants[slot];
        let device = match self.nvml.card(index) {
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
        let compute = device.running_compute_processes();
        let graphics = device.running_graphics_processes();
        // Neither list answered (no permission, an old driver): the card's processes are not
        // known, which is not the same as none.
        if compute.is_ok() || graphics.is_ok() {
            let compute = compute.unwrap_or_default();
            let graphics = graphics.unwrap_or_default();
            s.process_mem_used_bytes = own_memory(self.pid, &[&compute, &graphics]);
            s.processes = Some(card_processes(&compute, &graphics, |pid| {
                process_name(&self.proc_root, pid)
            }));
        }
        s.temp_c = ok(device.temperature(TemperatureSensor::Gpu), "temperature").map(f64::from);
        // NVML reports power in milliwatts.
        s.power_w = ok(device.power_usage(), "power").map(|mw| f64::from(mw) / 1000.0);
        s.power_limit_w = c.power_limit_w;
        s.sm_clock_mhz = ok(device.clock_info(Clock::SM), "SM clock").map(f64::from);
        s.sm_clock_max_mhz = c.sm_clock_max_mhz;
        s.mem_clock_mhz = ok(device.clock_info(Clock::Memory), "memory clock").map(f64::from);
        s.mem_clock_max_mhz = c.mem_clock_max_mhz;
        // PCIe counters are KB/s over a 20 ms window (NVML docs, nvmlDeviceGetPcieThroughput).
        if pcie {
            s.pcie_rx_kib_s =
                ok(device.pcie_throughput(PcieUtilCounter::Receive), "PCIe rx").map(f64::from);
            s.pcie_tx_kib_s =
                ok(device.pcie_throughput(PcieUtilCounter::Send), "PCIe tx").map(f64::from);
        }
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
    fn split(self: Box<Self>) -> Vec<Box<dyn GpuProbe>> {
        let this = *self;
        let mut pending = Some(this.pending);
        (0..this.devices.len())
            .map(|slot| {
                Box::new(NvmlProbe {
                    nvml: Arc::clone(&this.nvml),
                    devices: vec![this.devices[slot].clone()],
                    nvml_index: vec![this.nvml_index[slot]],
                    constants: vec![this.constants[slot]],
                    pid: this.pid,
                    proc_root: this.proc_root.clone(),
                    ticks: this.ticks,
                    seen: std::collections::HashMap::new(),
                    // The cards left out at start are told once, with the first card's sample.
                    pending: pending.take().unwrap_or_default(),
                }) as Box<dyn GpuProbe>
            })
            .collect()
    }

    fn sample(&mut self) -> Vec<GpuSample> {
        let pcie = self.ticks.is_multiple_of(PCIE_EVERY);
        self.ticks += 1;
        let mut out: Vec<GpuSample> = (0..self.devices.len())
            .map(|i| self.sample_one(i, pcie))
            .collect();
        // Each problem once (then every 100th time, counted), not a line every tick.
        let pending = std::mem::take(&mut self.pending);
        for (i, s) in out.iter_mut().enumerate() {
            let mut problems = if i == 0 { pending.clone() } else { Vec::new() };
            for p in std::mem::take(&mut s.problems) {
                problems.extend(report_once(&mut self.seen, p));
            }
            s.problems = problems;
        }
        out
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

    fn process(pid: u32, bytes: Option<u64>) -> ProcessInfo {
        ProcessInfo {
            pid,
            used_gpu_memory: bytes.map_or(UsedGpuMemory::Unavailable, UsedGpuMemory::Used),
            gpu_instance_id: None,
            compute_instance_id: None,
        }
    }

    /// A wgpu (Vulkan) trainer is listed among NVML's graphics processes, not the compute ones.
    #[test]
    fn own_memory_is_found_in_the_graphics_list_too() {
        let compute = [process(7, Some(100))];
        let graphics = [process(42, Some(3 << 30)), process(7, None)];
        assert_eq!(own_memory(42, &[&compute, &graphics]), Some(3 << 30));
        assert_eq!(own_memory(7, &[&compute, &graphics]), Some(100));
        assert_eq!(own_memory(9, &[&compute, &graphics]), None);
    }

    #[test]
    fn card_processes_merge_both_lists() {
        let compute = [process(7, Some(100)), process(8, None)];
        let graphics = [process(42, Some(3 << 30)), process(7, Some(200))];
        let list = card_processes(&compute, &graphics, |pid| {
            (pid == 42).then(|| "tradetune".to_owned())
        });
        let got: Vec<(u32, Option<&str>, Option<u64>, GpuProcessKind)> = list
            .iter()
            .map(|p| (p.pid, p.name.as_deref(), p.used_bytes, p.kind))
            .collect();
        assert_eq!(
            got,
            [
                (
                    42,
                    Some("tradetune"),
                    Some(3 << 30),
                    GpuProcessKind::Graphics
                ),
                (7, None, Some(200), GpuProcessKind::ComputeAndGraphics),
                (8, None, None, GpuProcessKind::Compute),
            ]
        );
    }

    #[test]
    fn a_problem_is_reported_once_then_counted() {
        let mut seen = std::collections::HashMap::new();
        let said: Vec<String> = (0..250)
            .filter_map(|_| report_once(&mut seen, "NVML fan: Unknown".into()))
            .collect();
        assert_eq!(
            said,
            [
                "NVML fan: Unknown",
                "NVML fan: Unknown (seen 100 times)",
                "NVML fan: Unknown (seen 200 times)"
            ]
        );
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
