//! Names of what is measured and on which device: the vocabulary shared by the sampler, the
//! ring buffers, the storage rows and the CSV columns.
//!
//! Column names carry their unit (`gpu0_util_pct`, `gpu0_mem_used_mib`, `cpu_pct`, `rss_mib`)
//! as the issue asks, so a CSV opened in a spreadsheet explains itself.

use std::fmt;

/// Which device a value belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub enum DeviceTag {
    /// The n-th GPU TradeTune sees (NVIDIA cards first, then AMD cards, each in driver order).
    Gpu(u32),
    /// The machine's CPUs and the watched process.
    Host,
}

impl fmt::Display for DeviceTag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceTag::Gpu(i) => write!(f, "gpu{i}"),
            DeviceTag::Host => f.write_str("host"),
        }
    }
}

impl std::str::FromStr for DeviceTag {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "host" {
            return Ok(DeviceTag::Host);
        }
        s.strip_prefix("gpu")
            .and_then(|n| n.parse().ok())
            .map(DeviceTag::Gpu)
            .ok_or_else(|| format!("not a telemetry device: {s:?} (expected `host` or `gpuN`)"))
    }
}

/// One measured quantity. The unit is part of the name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub enum Metric {
    /// Percent of the last sample period in which a kernel ran (NVML) / the GPU was busy (amdgpu).
    UtilPct,
    /// Percent of time device memory was read or written.
    MemUtilPct,
    MemUsedMib,
    MemTotalMib,
    /// Device memory held by the watched process (NVML only).
    ProcessMemUsedMib,
    /// The main die temperature (NVML "GPU", amdgpu "edge").
    TempC,
    /// amdgpu "junction" (hotspot).
    TempJunctionC,
    /// amdgpu "mem" (memory temperature).
    TempMemC,
    PowerW,
    PowerLimitW,
    /// Shader clock: NVML SM clock, amdgpu `sclk`.
    SmClockMhz,
    SmClockMaxMhz,
    MemClockMhz,
    MemClockMaxMhz,
    /// Bit set of [`super::ThrottleReasons`], stored as a number.
    ThrottleMask,
    PcieRxKibS,
    PcieTxKibS,
    FanPct,
    /// All CPUs, 0–100.
    CpuPct,
    /// One CPU core, 0–100.
    CoreCpuPct(u16),
    /// The watched process; 100 = one full core (as `top` shows it).
    ProcessCpuPct,
    /// Resident memory of the watched process.
    RssMib,
}

impl Metric {
    /// Every per-GPU metric, in the order CSV columns and the monitor use.
    pub const GPU: [Metric; 18] = [
        Metric::UtilPct,
        Metric::MemUtilPct,
        Metric::MemUsedMib,
        Metric::MemTotalMib,
        Metric::ProcessMemUsedMib,
        Metric::TempC,
        Metric::TempJunctionC,
        Metric::TempMemC,
        Metric::PowerW,
        Metric::PowerLimitW,
        Metric::SmClockMhz,
        Metric::SmClockMaxMhz,
        Metric::MemClockMhz,
        Metric::MemClockMaxMhz,
        Metric::ThrottleMask,
        Metric::PcieRxKibS,
        Metric::PcieTxKibS,
        Metric::FanPct,
    ];

    /// The metric's name with its unit, without a device prefix.
    pub fn name(&self) -> String {
        let s = match self {
            Metric::UtilPct => "util_pct",
            Metric::MemUtilPct => "mem_util_pct",
            Metric::MemUsedMib => "mem_used_mib",
            Metric::MemTotalMib => "mem_total_mib",
            Metric::ProcessMemUsedMib => "proc_mem_used_mib",
            Metric::TempC => "temp_c",
            Metric::TempJunctionC => "temp_junction_c",
            Metric::TempMemC => "temp_mem_c",
            Metric::PowerW => "power_w",
            Metric::PowerLimitW => "power_limit_w",
            Metric::SmClockMhz => "sm_clock_mhz",
            Metric::SmClockMaxMhz => "sm_clock_max_mhz",
            Metric::MemClockMhz => "mem_clock_mhz",
            Metric::MemClockMaxMhz => "mem_clock_max_mhz",
            Metric::ThrottleMask => "throttle_mask",
            Metric::PcieRxKibS => "pcie_rx_kib_s",
            Metric::PcieTxKibS => "pcie_tx_kib_s",
            Metric::FanPct => "fan_pct",
            Metric::CpuPct => "cpu_pct",
            Metric::CoreCpuPct(n) => return format!("cpu{n}_pct"),
            Metric::ProcessCpuPct => "process_cpu_pct",
            Metric::RssMib => "rss_mib",
        };
        s.to_string()
    }

    /// The CSV column for this metric on `device`: `gpu0_util_pct`; host metrics have no prefix
    /// (`cpu_pct`, `rss_mib`).
    pub fn column(&self, device: DeviceTag) -> String {
        match device {
            DeviceTag::Gpu(i) => format!("gpu{i}_{}", self.name()),
            DeviceTag::Host => self.name(),
        }
    }

    /// The inverse of [`Metric::name`], for reading stored rows back.
    pub fn from_name(name: &str) -> Option<Metric> {
        // Every metric with a fixed name: the GPU list and the host ones (per-core CPU is parsed).
        let host = [Metric::CpuPct, Metric::ProcessCpuPct, Metric::RssMib];
        if let Some(m) = Metric::GPU.iter().chain(&host).find(|m| m.name() == name) {
            return Some(*m);
        }
        name.strip_prefix("cpu")
            .and_then(|rest| rest.strip_suffix("_pct"))
            .and_then(|n| n.parse().ok())
            .map(Metric::CoreCpuPct)
    }

    /// Whether this is a temperature (for "peak temperature" summaries).
    pub fn is_temperature(&self) -> bool {
        matches!(
            self,
            Metric::TempC | Metric::TempJunctionC | Metric::TempMemC
        )
    }
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// Bytes in a mebibyte: memory columns are in MiB like `nvidia-smi`'s.
pub const MIB: f64 = 1024.0 * 1024.0;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_columns_carry_units() {
        for m in Metric::GPU.iter().copied().chain([
            Metric::CpuPct,
            Metric::CoreCpuPct(7),
            Metric::ProcessCpuPct,
            Metric::RssMib,
        ]) {
            assert_eq!(Metric::from_name(&m.name()), Some(m), "{m}");
        }
        assert_eq!(Metric::UtilPct.column(DeviceTag::Gpu(0)), "gpu0_util_pct");
        assert_eq!(
            Metric::MemUsedMib.column(DeviceTag::Gpu(1)),
            "gpu1_mem_used_mib"
        );
        assert_eq!(Metric::RssMib.column(DeviceTag::Host), "rss_mib");
        assert_eq!(Metric::from_name("cpux_pct"), None);
        assert_eq!("gpu3".parse::<DeviceTag>(), Ok(DeviceTag::Gpu(3)));
        assert!("gpu".parse::<DeviceTag>().is_err());
    }
}
