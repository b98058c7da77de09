//! Which physical card a burn device runs on, so per-trial GPU figures come from the right card
//! (the user's second GPU sat idle for days because nobody could see which worker used which).
//!
//! A burn device describes itself by name and, for cubecl runtimes, a PCI address
//! (`Device::identity()` in burn 0.22 with a GPU backend); the probes know each card's PCI bus
//! id and name. Matching is a pure function over those two descriptions: by PCI bus id when
//! both sides have one (the only key that tells two identical cards apart), otherwise by name
//! when exactly one card has that name, otherwise unknown — and it says why.

use std::fmt;

use super::gpu::GpuInfo;
pub use super::pci::PciBusId;

/// How a burn device describes itself.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BurnDeviceDescription {
    /// What the program calls the device (`Device<Flex>`, `wgpu DiscreteGpu(0)`).
    pub label: String,
    /// The adapter's name, when the backend reports one.
    pub name: Option<String>,
    pub pci_bus_id: Option<PciBusId>,
    /// A CPU backend (flex): runs on no card at all.
    pub is_cpu: bool,
}

/// Which card a burn device is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceMatch {
    /// The device runs on the CPU, so no GPU figures belong to it.
    Cpu,
    /// The index into the probed cards (`gpu{index}`), and how that was decided.
    Gpu { index: u32, by: MatchKey },
    /// None of the probed cards: its PCI bus id is known and no probed card, each with its
    /// own known bus id, is there (an Intel iGPU beside a probed NVIDIA card). No card's
    /// figures belong to it; the text says where it is.
    NotProbed(String),
    /// Cannot be known; the text says why.
    Unknown(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatchKey {
    PciBusId,
    Name,
}

impl fmt::Display for DeviceMatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceMatch::Cpu => f.write_str("CPU"),
            DeviceMatch::Gpu { index, by } => write!(
                f,
                "gpu{index} (matched by {})",
                match by {
                    MatchKey::PciBusId => "PCI bus id",
                    MatchKey::Name => "name",
                }
            ),
            DeviceMatch::NotProbed(why) => write!(f, "not probed ({why})"),
            DeviceMatch::Unknown(why) => write!(f, "unknown ({why})"),
        }
    }
}

/// Finds the card among `gpus` (numbered as the sampler numbers them) that `device` runs on.
pub fn match_device(device: &BurnDeviceDescription, gpus: &[GpuInfo]) -> DeviceMatch {
    if device.is_cpu {
        return DeviceMatch::Cpu;
    }
    if gpus.is_empty() {
        return DeviceMatch::Unknown("no GPU is being probed".into());
    }
    if let Some(id) = device.pci_bus_id {
        if let Some(i) = gpus.iter().position(|g| g.pci_bus_id == Some(id)) {
            return DeviceMatch::Gpu {
                index: i as u32,
                by: MatchKey::PciBusId,
            };
        }
        // A bus id that no probed card has: a card the probes cannot read (e.g. an Intel iGPU).
        if gpus.iter().all(|g| g.pci_bus_id.is_some()) {
            return DeviceMatch::NotProbed(format!("no probed GPU is at PCI {id}"));
        }
    }
    let Some(name) = device.name.as_deref() else {
        return DeviceMatch::Unknown(format!(
            "{} reports neither a PCI bus id nor a name",
            device.label
        ));
    };
    let norm = |s: &str| s.trim().to_ascii_lowercase();
    // A device at a bus id no probed card has is none of the cards whose bus id is known: only
    // those without one can be it.
    let same: Vec<usize> = gpus
        .iter()
        .enumerate()
        .filter(|(_, g)| device.pci_bus_id.is_none() || g.pci_bus_id.is_none())
        .filter(|(_, g)| norm(&g.name) == norm(name))
        .map(|(i, _)| i)
        .collect();
    match same.as_slice() {
        [i] => DeviceMatch::Gpu {
            index: *i as u32,
            by: MatchKey::Name,
        },
        [] => DeviceMatch::Unknown(match device.pci_bus_id {
            Some(id) => {
                format!("no probed GPU is at PCI {id} or, without a bus id, named {name:?}")
            }
            None => format!("no probed GPU is named {name:?}"),
        }),
        many => DeviceMatch::Unknown(match device.pci_bus_id {
            Some(id) => format!(
                "no probed GPU is at PCI {id} and {} without a bus id are named {name:?}",
                many.len()
            ),
            None => format!(
                "{} probed GPUs are named {name:?} and {} gives no PCI bus id",
                many.len(),
                device.label
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::super::gpu::GpuVendor;
    use super::*;

    fn gpu(name: &str, bus: Option<&str>) -> GpuInfo {
        GpuInfo {
            vendor: GpuVendor::Nvidia,
            name: name.into(),
            pci_bus_id: bus.map(|b| b.parse().unwrap()),
            uuid: None,
            mem_total_bytes: None,
            driver: None,
        }
    }

    fn wgpu(name: Option<&str>, bus: Option<&str>) -> BurnDeviceDescription {
        BurnDeviceDescription {
            label: "wgpu DiscreteGpu(0)".into(),
            name: name.map(String::from),
            pci_bus_id: bus.map(|b| b.parse().unwrap()),
            is_cpu: false,
        }
    }

    /// A device whose bus id no probed card has is matched by name only among the cards
    /// without a bus id: a card of the same name at another bus id is another card.
    #[test]
    fn a_name_never_binds_a_device_to_a_card_at_another_bus_id() {
        let device = wgpu(Some("NVIDIA GeForce RTX 4080"), Some("0000:03:00.0"));
        let known = gpu("NVIDIA GeForce RTX 4080", Some("0000:01:00.0"));
        let unread = gpu("NVIDIA GeForce RTX 4080", None);
        assert_eq!(
            match_device(&device, &[known.clone(), unread]),
            DeviceMatch::Gpu {
                index: 1,
                by: MatchKey::Name
            }
        );
        let other = gpu("AMD Radeon RX 7900 GRE", None);
        assert!(matches!(
            match_device(&device, &[known, other]),
            DeviceMatch::Unknown(_)
        ));
    }

    #[test]
    fn bus_ids_in_every_spelling_are_equal() {
        let nvml: PciBusId = "00000000:01:00.0".parse().unwrap();
        let sysfs: PciBusId = "0000:01:00.0".parse().unwrap();
        let cuda: PciBusId = "01:00.0".parse().unwrap();
        assert_eq!(nvml, sysfs);
        assert_eq!(sysfs, cuda);
        assert_eq!(nvml.to_string(), "0000:01:00.0");
        assert!("01:00".parse::<PciBusId>().is_err());
        assert!("zz:00.0".parse::<PciBusId>().is_err());
    }

    #[test]
    fn two_identical_cards_are_told_apart_by_bus_id() {
        let gpus = [
            gpu("NVIDIA GeForce RTX 4080", Some("0000:01:00.0")),
            gpu("NVIDIA GeForce RTX 4080", Some("0000:02:00.0")),
        ];
        let m = match_device(
            &wgpu(Some("NVIDIA GeForce RTX 4080"), Some("0000:02:00.0")),
            &gpus,
        );
        assert_eq!(
            m,
            DeviceMatch::Gpu {
                index: 1,
                by: MatchKey::PciBusId
            }
        );
        // Without a bus id the name is ambiguous: say so rather than guess.
        let m = match_device(&wgpu(Some("NVIDIA GeForce RTX 4080"), None), &gpus);
        assert!(
            matches!(m, DeviceMatch::Unknown(ref w) if w.contains("2 probed GPUs")),
            "{m}"
        );
    }

    #[test]
    fn unique_name_matches_case_insensitively() {
        let gpus = [
            gpu("AMD Radeon RX 7900 GRE", None),
            gpu("NVIDIA GeForce RTX 4080", None),
        ];
        let m = match_device(&wgpu(Some("nvidia geforce rtx 4080"), None), &gpus);
        assert_eq!(
            m,
            DeviceMatch::Gpu {
                index: 1,
                by: MatchKey::Name
            }
        );
    }

    #[test]
    fn cpu_and_unknown_cases() {
        let cpu = BurnDeviceDescription {
            label: "Device<Flex>".into(),
            is_cpu: true,
            ..Default::default()
        };
        assert_eq!(match_device(&cpu, &[]), DeviceMatch::Cpu);
        assert!(matches!(
            match_device(&wgpu(Some("x"), None), &[]),
            DeviceMatch::Unknown(_)
        ));
        let gpus = [gpu("NVIDIA GeForce RTX 4080", Some("0000:01:00.0"))];
        let m = match_device(&wgpu(Some("Intel UHD 770"), Some("0000:00:02.0")), &gpus);
        assert_eq!(
            m,
            DeviceMatch::NotProbed("no probed GPU is at PCI 0000:00:02.0".into())
        );
        let m = match_device(&wgpu(None, None), &gpus);
        assert!(
            m.to_string().contains("neither a PCI bus id nor a name"),
            "{m}"
        );
    }
}
