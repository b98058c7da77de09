//! A stand-in NVML for tests and the sampler benchmark: cards with fixed, plausible readings
//! (an RTX 4080's), answered from memory through the same [`NvmlLib`] calls the real library
//! answers, so [`NvmlProbe`](super::nvml::NvmlProbe) runs unchanged on a machine without an
//! NVIDIA GPU. A card can be stalled ([`FakeNvml::stall`]) to play one whose driver calls hang.

use std::sync::{Arc, Mutex};

use nvml_wrapper::bitmasks::device::ThrottleReasons as NvmlThrottle;
use nvml_wrapper::enum_wrappers::device::{Clock, PcieUtilCounter, TemperatureSensor};
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::struct_wrappers::device::{MemoryInfo, PciInfo, ProcessInfo, Utilization};

use super::nvml::{NvmlCard, NvmlLib};

/// A fake NVML with `n` cards.
pub struct FakeNvml {
    cards: Vec<FakeCard>,
    /// The process listed among each card's graphics processes (a wgpu trainer).
    pid: u32,
}

struct FakeCard {
    index: u32,
    /// Held by a test to make every call on this card wait (see [`FakeNvml::stall`]).
    gate: Arc<Mutex<()>>,
    pid: u32,
}

impl FakeNvml {
    /// `n` RTX 4080s on PCI buses 1, 2, …, with process `pid` holding 3 GiB on each (listed
    /// among the graphics processes, as a wgpu trainer is) and process `pid + 1` holding 1 GiB
    /// (a CUDA program, among the compute processes).
    pub fn new(n: u32, pid: u32) -> FakeNvml {
        FakeNvml {
            cards: (0..n)
                .map(|index| FakeCard {
                    index,
                    gate: Arc::new(Mutex::new(())),
                    pid,
                })
                .collect(),
            pid,
        }
    }

    /// The process listed on every card.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// A lock that, while held, makes every call on card `index` wait: lock it to stall the
    /// card, drop the guard to let it answer. None for a card there is not.
    pub fn stall(&self, index: u32) -> Option<Arc<Mutex<()>>> {
        self.cards.get(index as usize).map(|c| Arc::clone(&c.gate))
    }
}

impl NvmlLib for FakeNvml {
    fn device_count(&self) -> Result<u32, NvmlError> {
        Ok(self.cards.len() as u32)
    }
    fn sys_driver_version(&self) -> Result<String, NvmlError> {
        Ok("560.35.03".into())
    }
    fn card(&self, index: u32) -> Result<Box<dyn NvmlCard + '_>, NvmlError> {
        self.cards
            .get(index as usize)
            .map(|c| Box::new(CardCall(c)) as Box<dyn NvmlCard + '_>)
            .ok_or(NvmlError::InvalidArg)
    }
}

/// One card's calls; each waits while the card is stalled.
struct CardCall<'a>(&'a FakeCard);

impl CardCall<'_> {
    fn answer<T>(&self, value: T) -> Result<T, NvmlError> {
        // A poisoned gate (a test panicked holding it) still lets the card answer.
        drop(self.0.gate.lock().unwrap_or_else(|e| e.into_inner()));
        Ok(value)
    }
}

impl NvmlCard for CardCall<'_> {
    fn name(&self) -> Result<String, NvmlError> {
        self.answer("NVIDIA GeForce RTX 4080".into())
    }
    fn pci_info(&self) -> Result<PciInfo, NvmlError> {
        let bus = self.0.index + 1;
        self.answer(PciInfo {
            bus,
            bus_id: format!("00000000:{bus:02x}:00.0"),
            device: 0,
            domain: 0,
            pci_device_id: 0x2704_10de,
            pci_sub_system_id: Some(0x1670_10de),
        })
    }
    fn uuid(&self) -> Result<String, NvmlError> {
        self.answer(format!("GPU-00000000-0000-0000-0000-{:012}", self.0.index))
    }
    fn memory_info(&self) -> Result<MemoryInfo, NvmlError> {
        let total = 16_376 << 20;
        let used = 5 << 30;
        self.answer(MemoryInfo {
            free: total - used,
            reserved: 0,
            total,
            used,
            version: 2,
        })
    }
    fn enforced_power_limit(&self) -> Result<u32, NvmlError> {
        self.answer(320_000)
    }
    fn max_clock_info(&self, clock: Clock) -> Result<u32, NvmlError> {
        self.answer(match clock {
            Clock::Memory => 11_201,
            _ => 3_105,
        })
    }
    fn utilization_rates(&self) -> Result<Utilization, NvmlError> {
        self.answer(Utilization {
            gpu: 87,
            memory: 41,
        })
    }
    fn running_compute_processes(&self) -> Result<Vec<ProcessInfo>, NvmlError> {
        self.answer(vec![ProcessInfo {
            pid: self.0.pid.wrapping_add(1),
            used_gpu_memory: UsedGpuMemory::Used(1 << 30),
            gpu_instance_id: None,
            compute_instance_id: None,
        }])
    }
    fn running_graphics_processes(&self) -> Result<Vec<ProcessInfo>, NvmlError> {
        self.answer(vec![ProcessInfo {
            pid: self.0.pid,
            used_gpu_memory: UsedGpuMemory::Used(3 << 30),
            gpu_instance_id: None,
            compute_instance_id: None,
        }])
    }
    fn temperature(&self, _sensor: TemperatureSensor) -> Result<u32, NvmlError> {
        self.answer(64)
    }
    fn power_usage(&self) -> Result<u32, NvmlError> {
        self.answer(245_000)
    }
    fn clock_info(&self, clock: Clock) -> Result<u32, NvmlError> {
        self.answer(match clock {
            Clock::Memory => 11_201,
            _ => 2_745,
        })
    }
    fn pcie_throughput(&self, counter: PcieUtilCounter) -> Result<u32, NvmlError> {
        self.answer(match counter {
            PcieUtilCounter::Receive => 1_200,
            _ => 300,
        })
    }
    fn fan_speed(&self, _fan: u32) -> Result<u32, NvmlError> {
        self.answer(45)
    }
    fn current_throttle_reasons(&self) -> Result<NvmlThrottle, NvmlError> {
        self.answer(NvmlThrottle::empty())
    }
}
