//! PCI addresses, the one key every driver gives a card by: a leaf that the GPU probes and
//! the device matching (`identity.rs`) both use.

use std::fmt;
use std::str::FromStr;

/// A PCI address `domain:bus:device.function`, written `0000:03:00.0`.
///
/// NVML writes the domain with 8 digits (`00000000:01:00.0`), sysfs and wgpu with 4, CUDA
/// sometimes not at all (`01:00.0`); all parse to the same value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct PciBusId {
    pub domain: u32,
    pub bus: u8,
    pub device: u8,
    pub function: u8,
}

impl fmt::Display for PciBusId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:04x}:{:02x}:{:02x}.{:x}",
            self.domain, self.bus, self.device, self.function
        )
    }
}

impl FromStr for PciBusId {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let err = || format!("not a PCI bus id: {text:?} (expected e.g. 0000:03:00.0)");
        let t = text.trim();
        let (rest, function) = t.rsplit_once('.').ok_or_else(err)?;
        let mut parts = rest.rsplitn(3, ':');
        let device = parts.next().ok_or_else(err)?;
        let bus = parts.next().ok_or_else(err)?;
        let domain = parts.next().unwrap_or("0");
        let hex32 = |s: &str| u32::from_str_radix(s, 16).map_err(|_| err());
        let hex8 = |s: &str| u8::from_str_radix(s, 16).map_err(|_| err());
        Ok(PciBusId {
            domain: hex32(domain)?,
            bus: hex8(bus)?,
            device: hex8(device)?,
            function: hex8(function)?,
        })
    }
}
