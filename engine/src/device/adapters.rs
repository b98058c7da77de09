//! The GPU adapters wgpu finds on this machine, asked without opening a device.
//!
//! burn's wgpu runtime panics ("Unable to acquire wgpu device") when a device is used on a
//! machine that has no adapter for it; TradeTune asks wgpu first, so a build with the GPU
//! backend falls back to the CPU with the reason shown instead of crashing. The answer is
//! asked once per process (the Vulkan loader does not like instances created on several
//! threads at once) and kept.
//!
//! Names follow burn's device kinds: `wgpu` is wgpu's default adapter (a high-performance
//! one where there is one; Mesa's software Vulkan, lavapipe, on a machine without a GPU),
//! `wgpu:N` the N-th discrete GPU.

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

/// What kind of adapter wgpu reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AdapterKind {
    DiscreteGpu,
    IntegratedGpu,
    VirtualGpu,
    /// A software renderer (Mesa's lavapipe, llvmpipe).
    Cpu,
    Other,
}

impl AdapterKind {
    /// Order of wgpu's high-performance choice: discrete first.
    fn preference(self) -> u8 {
        match self {
            AdapterKind::DiscreteGpu => 0,
            AdapterKind::IntegratedGpu => 1,
            AdapterKind::VirtualGpu => 2,
            AdapterKind::Other => 3,
            AdapterKind::Cpu => 4,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            AdapterKind::DiscreteGpu => "discrete GPU",
            AdapterKind::IntegratedGpu => "integrated GPU",
            AdapterKind::VirtualGpu => "virtual GPU",
            AdapterKind::Cpu => "software renderer",
            AdapterKind::Other => "other adapter",
        }
    }
}

/// One adapter, as wgpu describes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Adapter {
    /// `NVIDIA GeForce RTX 4080`, `llvmpipe (LLVM 15.0.6, 256 bits)`.
    pub name: String,
    pub kind: AdapterKind,
    /// The graphics API (`Vulkan`, `Metal`, `Dx12`).
    pub api: String,
    /// The driver and its version, when reported.
    pub driver: String,
    /// PCI vendor and device ids (0 when not reported).
    pub vendor: u32,
    pub device: u32,
    /// `0000:01:00.0`, when reported.
    pub pci_bus_id: String,
    /// Whether WGSL's `f16` is available (the `shader-f16` feature): f16 compute on wgpu.
    pub shader_f16: bool,
}

/// The adapters of the first graphics API (Vulkan, then Metal, then DX12) that has any, or
/// why there are none.
pub fn adapters() -> &'static [Adapter] {
    static ADAPTERS: OnceLock<Vec<Adapter>> = OnceLock::new();
    ADAPTERS.get_or_init(probe)
}

/// The adapter wgpu picks for the default device: a high-performance one first.
pub fn default_adapter() -> Option<&'static Adapter> {
    adapters().iter().min_by_key(|a| a.kind.preference())
}

/// The N-th discrete GPU (`wgpu:N`).
pub fn discrete(n: usize) -> Option<&'static Adapter> {
    adapters()
        .iter()
        .filter(|a| a.kind == AdapterKind::DiscreteGpu)
        .nth(n)
}

/// Why no adapter answered, for messages.
pub const NO_ADAPTER: &str = "wgpu finds no Vulkan, Metal or DX12 adapter on this machine \
    (install the GPU's Vulkan driver: NVIDIA's driver, or Mesa's RADV for AMD; Mesa's \
    mesa-vulkan-drivers also gives a slow software one)";

#[cfg(feature = "wgpu")]
fn probe() -> Vec<Adapter> {
    use wgpu::{Backends, DeviceType, Features, Instance, InstanceDescriptor};
    // A broken driver may panic inside the loader: that is "no adapter", not a crash.
    let found = std::panic::catch_unwind(|| {
        for backends in [Backends::VULKAN, Backends::METAL, Backends::DX12] {
            let instance = Instance::new(InstanceDescriptor {
                backends,
                ..InstanceDescriptor::new_without_display_handle()
            });
            let list = block_on(instance.enumerate_adapters(backends));
            if list.is_empty() {
                continue;
            }
            return list
                .iter()
                .map(|a| {
                    let info = a.get_info();
                    Adapter {
                        name: info.name.clone(),
                        kind: match info.device_type {
                            DeviceType::DiscreteGpu => AdapterKind::DiscreteGpu,
                            DeviceType::IntegratedGpu => AdapterKind::IntegratedGpu,
                            DeviceType::VirtualGpu => AdapterKind::VirtualGpu,
                            DeviceType::Cpu => AdapterKind::Cpu,
                            DeviceType::Other => AdapterKind::Other,
                        },
                        api: format!("{:?}", info.backend),
                        driver: format!("{} {}", info.driver, info.driver_info)
                            .trim()
                            .to_owned(),
                        vendor: info.vendor,
                        device: info.device,
                        pci_bus_id: info.device_pci_bus_id.clone(),
                        shader_f16: a.features().contains(Features::SHADER_F16),
                    }
                })
                .collect();
        }
        Vec::new()
    });
    found.unwrap_or_default()
}

#[cfg(not(feature = "wgpu"))]
fn probe() -> Vec<Adapter> {
    Vec::new()
}

/// Runs a future to completion on this thread (wgpu's native enumeration is ready at once; the
/// loop only guards against a future that is not).
#[cfg(feature = "wgpu")]
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    use std::task::{Context, Poll, Waker};
    let mut future = std::pin::pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(v) = future.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::yield_now();
    }
}
