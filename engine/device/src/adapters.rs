//! The GPU adapters wgpu finds on this machine, asked without opening a device.
//!
//! burn's wgpu runtime panics ("Unable to acquire wgpu device") when a device is used on a
//! machine that has no adapter for it; TradeTune asks wgpu first, so a build with the GPU
//! backend falls back to the CPU with the reason shown instead of crashing. The answer is
//! asked once and kept until [`refresh`] asks again (the app's "Refresh devices").
//!
//! Names follow burn's device kinds, each kind counted from zero in wgpu's enumeration order
//! as cubecl counts them when it opens a device (`cubecl-wgpu` `select_from_adapter_list`):
//!
//! | name                 | adapter                                                        |
//! |----------------------|----------------------------------------------------------------|
//! | `wgpu`               | cubecl's default: a discrete GPU first, else an integrated, … (see [`default_of`]) |
//! | `wgpu:N`             | the N-th discrete GPU (also `wgpu:discrete:N`)                 |
//! | `wgpu:integrated:N`  | the N-th integrated GPU (a Ryzen or Intel iGPU)                |
//! | `wgpu:virtual:N`     | the N-th virtual GPU (a VM's virtio-gpu, …)                     |
//! | `wgpu:cpu`           | the software renderer (Mesa's lavapipe); burn opens only the first |
//! | `wgpu:other:N`       | an adapter of no known type: listed, not openable through burn |
//!
//! A name stays the same while the set of adapters does; plugging in a second card of the
//! same kind may renumber that kind (wgpu's order is the Vulkan loader's).
//!
//! The Vulkan loader crashes when instances are created and dropped on several threads at
//! once, so every probe here and every first use of a wgpu device through
//! [`super::open`] holds [`instance_lock`]: a refresh while a trial opens its device waits
//! for it instead of racing it.

use std::sync::{Arc, Mutex, MutexGuard};

use serde::{Deserialize, Serialize};

/// What kind of adapter wgpu reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
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
    /// Its rank in wgpu's high-performance choice, lowest first: wgpu-core 30's
    /// `Instance::request_adapter` (`get_order` with `PowerPreference::HighPerformance`) sorts
    /// discrete, integrated, other ("might really be unknown", below the GPUs that say what they
    /// are), virtual, software renderer, keeping wgpu's order among equals.
    fn preference(self) -> u8 {
        match self {
            AdapterKind::DiscreteGpu => 1,
            AdapterKind::IntegratedGpu => 2,
            AdapterKind::Other => 3,
            AdapterKind::VirtualGpu => 4,
            AdapterKind::Cpu => 5,
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
    /// Its place among the adapters of its kind, in wgpu's order: the `N` of its device name.
    pub index: usize,
    /// The graphics API (`Vulkan`, `Metal`, `Dx12`).
    pub api: String,
    /// The driver and its version (wgpu's `driver` and `driver_info`), when reported.
    pub driver: String,
    /// PCI vendor and device ids (0 when not reported).
    pub vendor: u32,
    pub device: u32,
    /// `0000:01:00.0`, when reported.
    pub pci_bus_id: String,
    /// Whether WGSL's `f16` is available (the `shader-f16` feature): f16 compute on wgpu.
    pub shader_f16: bool,
    /// The largest device-local memory heap Vulkan reports, bytes: the card's VRAM on a
    /// discrete GPU, the share of system memory an integrated GPU or lavapipe may use. None
    /// on other APIs.
    pub memory_bytes: Option<u64>,
}

/// Whether this build compiles the kernels of a Vulkan adapter to SPIR-V: the `vulkan` feature,
/// cubecl's SPIR-V compiler, the only path to cooperative matrices (tensor cores) on wgpu.
/// Without it every adapter's kernels are WGSL, which naga translates for the driver.
pub const SPIRV_BUILD: bool = cfg!(feature = "vulkan");

/// The variable that lets a `vulkan` build try a software renderer anyway (see [`Compiler`]).
pub const SPIRV_SOFTWARE_VAR: &str = "TRADETUNE_SPIRV_SOFTWARE";

/// The shader language this build gives an adapter's kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Compiler {
    /// WGSL, translated by wgpu's naga for the driver: every adapter of a default build.
    Wgsl,
    /// SPIR-V handed to the Vulkan driver as is: a Vulkan adapter in a `vulkan` build, unless
    /// cubecl finds the adapter lacks what its SPIR-V needs (then it falls back to WGSL, and
    /// `bench matmul`'s first line says `wgpu<wgsl>`).
    Spirv,
}

impl Compiler {
    /// What this build compiles `adapter`'s kernels to.
    pub fn of(adapter: &Adapter) -> Compiler {
        Compiler::in_build(adapter, SPIRV_BUILD)
    }

    /// What a build with or without the `vulkan` feature compiles `adapter`'s kernels to.
    pub fn in_build(adapter: &Adapter, spirv_build: bool) -> Compiler {
        if spirv_build && adapter.api == "Vulkan" {
            Compiler::Spirv
        } else {
            Compiler::Wgsl
        }
    }
}

/// Why this build cannot run kernels on `adapter` although burn could open it: a software
/// renderer given SPIR-V. cubecl's SPIR-V path takes every Vulkan adapter that has the
/// extensions it asks for, lavapipe included, and lavapipe then crashes the process (Mesa
/// 22.3.6). `allow_software` ([`SPIRV_SOFTWARE_VAR`]`=1`) tries anyway, for a newer Mesa.
pub fn spirv_refusal(adapter: &Adapter, spirv_build: bool, allow_software: bool) -> Option<String> {
    let spirv = Compiler::in_build(adapter, spirv_build) == Compiler::Spirv;
    (spirv && adapter.kind == AdapterKind::Cpu && !allow_software).then(|| {
        format!(
            "{} is a software renderer, and this build (feature `vulkan`) compiles kernels to \
             SPIR-V, which a software renderer cannot run (Mesa 22.3.6's lavapipe crashes); use \
             a build without `--features vulkan` on it, or set {SPIRV_SOFTWARE_VAR}=1 to try \
             anyway",
            adapter.name
        )
    })
}

/// [`spirv_refusal`] for this build and environment.
pub fn spirv_refusal_here(adapter: &Adapter) -> Option<String> {
    let allow = std::env::var(SPIRV_SOFTWARE_VAR).is_ok_and(|v| v == "1");
    spirv_refusal(adapter, SPIRV_BUILD, allow)
}

/// The adapters as last probed; `None` until the first probe.
static ADAPTERS: Mutex<Option<Arc<[Adapter]>>> = Mutex::new(None);

/// Held while a Vulkan instance is created or dropped by TradeTune (see the module's notes).
#[cfg_attr(not(feature = "wgpu"), allow(dead_code))]
static INSTANCES: Mutex<()> = Mutex::new(());

/// Serialises Vulkan instance creation: held by every probe and by [`super::open`] while
/// burn's runtime starts on a wgpu device.
#[cfg_attr(not(feature = "wgpu"), allow(dead_code))]
pub(crate) fn instance_lock() -> MutexGuard<'static, ()> {
    // A panic while holding it (a broken driver inside the loader) leaves nothing to repair.
    INSTANCES.lock().unwrap_or_else(|e| e.into_inner())
}

fn cache() -> MutexGuard<'static, Option<Arc<[Adapter]>>> {
    ADAPTERS.lock().unwrap_or_else(|e| e.into_inner())
}

/// The adapters of the graphics API cubecl opens devices on ([`settle`]), probed on first use
/// and kept until [`refresh`].
pub fn adapters() -> Arc<[Adapter]> {
    let mut cached = cache();
    match &*cached {
        Some(list) => Arc::clone(list),
        None => {
            let list: Arc<[Adapter]> = probe().into();
            *cached = Some(Arc::clone(&list));
            list
        }
    }
}

/// Asks wgpu again (a card plugged in, a driver installed) and keeps the new answer. Devices
/// already opened keep running on the adapter they were opened on.
pub fn refresh() -> Arc<[Adapter]> {
    let list: Arc<[Adapter]> = probe().into();
    *cache() = Some(Arc::clone(&list));
    list
}

/// The adapter cubecl opens for the default device (`wgpu`): [`default_of`] the adapters here,
/// under this process's `CUBECL_WGPU_DEFAULT_DEVICE`. `None` where there is none (or the
/// variable names none: [`default_adapter_or_why`] says why).
pub fn default_adapter() -> Option<Adapter> {
    default_adapter_or_why().ok()
}

/// [`default_adapter`], or why there is none.
pub fn default_adapter_or_why() -> Result<Adapter, String> {
    let chosen = match std::env::var(DEFAULT_DEVICE_VAR) {
        Ok(v) => default_of(&adapters(), Some(&v))?,
        Err(std::env::VarError::NotPresent) => default_of(&adapters(), None)?,
        Err(e) => return Err(format!("{DEFAULT_DEVICE_VAR}: {e}")),
    };
    chosen.ok_or_else(|| match std::env::var(DEFAULT_DEVICE_VAR) {
        Ok(v) if !adapters().is_empty() => format!(
            "{DEFAULT_DEVICE_VAR}={v} names no adapter here (`tradetune devices` lists them)"
        ),
        _ => NO_ADAPTER.into(),
    })
}

/// The variable by which cubecl's default device is another adapter than wgpu's choice
/// (`DiscreteGpu(1)`, `IntegratedGpu(0)`, `VirtualGpu(0)`, `Other(0)`, `Cpu`).
pub const DEFAULT_DEVICE_VAR: &str = "CUBECL_WGPU_DEFAULT_DEVICE";

/// The adapter of `list` (one graphics API's, in wgpu's order, numbered by [`number`]) that
/// cubecl 0.11 opens for its default device: where `device_var` (the value of
/// [`DEFAULT_DEVICE_VAR`]) is set, the adapter it names, parsed as cubecl-wgpu's
/// `try_device_override` does (`Cpu` is the first software renderer; an unparsable value is an
/// error, as cubecl refuses to open the device); otherwise what wgpu-core's `request_adapter`
/// returns for `PowerPreference::HighPerformance`: the first adapter of the best-ranked kind
/// ([`AdapterKind::preference`]).
pub fn default_of(list: &[Adapter], device_var: Option<&str>) -> Result<Option<Adapter>, String> {
    let Some(value) = device_var else {
        return Ok(list.iter().min_by_key(|a| a.kind.preference()).cloned());
    };
    let named = if value == "Cpu" {
        Some((AdapterKind::Cpu, 0))
    } else {
        [
            ("DiscreteGpu(", AdapterKind::DiscreteGpu),
            ("IntegratedGpu(", AdapterKind::IntegratedGpu),
            ("VirtualGpu(", AdapterKind::VirtualGpu),
            ("Other(", AdapterKind::Other),
        ]
        .into_iter()
        .find_map(|(prefix, kind)| {
            let n = value
                .strip_prefix(prefix)?
                .strip_suffix(')')?
                .parse()
                .ok()?;
            Some((kind, n))
        })
    };
    let (kind, n) = named.ok_or_else(|| {
        format!(
            "{DEFAULT_DEVICE_VAR}={value} is not an adapter cubecl knows (DiscreteGpu(N), \
             IntegratedGpu(N), VirtualGpu(N), Other(N) or Cpu)"
        )
    })?;
    Ok(list
        .iter()
        .find(|a| a.kind == kind && a.index == n)
        .cloned())
}

/// The adapters of the graphics API cubecl 0.11's `WgpuBackend::Auto` opens devices on, given
/// each API's adapters in the order it tries them ([`API_CHAIN`]): the first API with an
/// adapter that is not a software renderer, else the first with any (cubecl-wgpu's `settle`
/// and `try_create_setup`: Vulkan offering only lavapipe while OpenGL reaches the real GPU, a
/// VM passing it through, is GL). `per_api` is asked lazily, as far as the choice needs.
fn settle(per_api: impl IntoIterator<Item = Vec<Adapter>>) -> Vec<Adapter> {
    let mut software_only = None;
    for list in per_api {
        if list.iter().any(|a| a.kind != AdapterKind::Cpu) {
            return list;
        }
        if software_only.is_none() && !list.is_empty() {
            software_only = Some(list);
        }
    }
    software_only.unwrap_or_default()
}

/// The `n`-th adapter of `kind` (`wgpu:N` is the N-th discrete GPU).
pub fn nth(kind: AdapterKind, n: usize) -> Option<Adapter> {
    adapters()
        .iter()
        .find(|a| a.kind == kind && a.index == n)
        .cloned()
}

/// The N-th discrete GPU (`wgpu:N`).
pub fn discrete(n: usize) -> Option<Adapter> {
    nth(AdapterKind::DiscreteGpu, n)
}

/// Numbers each adapter within its kind, in wgpu's order (as cubecl counts them).
#[cfg_attr(not(feature = "wgpu"), allow(dead_code))]
fn number(mut list: Vec<Adapter>) -> Vec<Adapter> {
    let mut seen: Vec<AdapterKind> = Vec::new();
    for a in &mut list {
        a.index = seen.iter().filter(|k| **k == a.kind).count();
        seen.push(a.kind);
    }
    list
}

/// Why no adapter answered, for messages.
pub const NO_ADAPTER: &str = "wgpu finds no Vulkan, Metal, DX12 or OpenGL adapter on this machine \
    (install the GPU's Vulkan driver: NVIDIA's driver, or Mesa's RADV for AMD; Mesa's \
    mesa-vulkan-drivers also gives a slow software one)";

#[cfg(feature = "wgpu")]
fn probe() -> Vec<Adapter> {
    use wgpu::{DeviceType, Features, Instance, InstanceDescriptor};
    let _instances = instance_lock();
    // A broken driver may panic inside the loader: that is "no adapter", not a crash.
    let found = std::panic::catch_unwind(|| {
        settle(API_CHAIN.iter().map(|&backends| {
            let instance = Instance::new(InstanceDescriptor {
                backends,
                ..InstanceDescriptor::new_without_display_handle()
            });
            let list = block_on(instance.enumerate_adapters(backends));
            let list: Vec<Adapter> = list
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
                        index: 0,
                        api: format!("{:?}", info.backend),
                        driver: format!("{} {}", info.driver, info.driver_info)
                            .trim()
                            .to_owned(),
                        vendor: info.vendor,
                        device: info.device,
                        pci_bus_id: info.device_pci_bus_id.clone(),
                        shader_f16: a.features().contains(Features::SHADER_F16),
                        memory_bytes: vulkan_memory(a),
                    }
                })
                .collect();
            list
        }))
    });
    number(found.unwrap_or_default())
}

/// The graphics APIs cubecl 0.11's `WgpuBackend::Auto` (burn's `Device::wgpu`) tries, best
/// first: cubecl-wgpu's `AutoGraphicsApi::chain` (Metal alone on macOS; Vulkan, DX12, then
/// OpenGL elsewhere). An API this build of wgpu lacks answers no adapters.
#[cfg(feature = "wgpu")]
const API_CHAIN: &[wgpu::Backends] = if cfg!(target_os = "macos") {
    &[wgpu::Backends::METAL]
} else {
    &[
        wgpu::Backends::VULKAN,
        wgpu::Backends::DX12,
        wgpu::Backends::GL,
    ]
};

#[cfg(not(feature = "wgpu"))]
fn probe() -> Vec<Adapter> {
    Vec::new()
}

/// The largest heap Vulkan flags `VK_MEMORY_HEAP_DEVICE_LOCAL_BIT` (0x1, Vulkan spec
/// `VkMemoryHeapFlagBits`): what `vulkaninfo` lists as the device's memory. wgpu has no
/// portable query for it, so this asks Vulkan through wgpu-hal. None on other APIs.
#[cfg(all(feature = "wgpu", any(target_os = "linux", target_os = "windows")))]
fn vulkan_memory(adapter: &wgpu::Adapter) -> Option<u64> {
    const DEVICE_LOCAL: u32 = 0x1;
    // SAFETY: the hal adapter is only borrowed while `adapter` (which owns it) is alive, and
    // nothing is created or destroyed through it; vkGetPhysicalDeviceMemoryProperties is a
    // read-only query on a physical device of the live instance that enumerated it, with no
    // external synchronisation required (Vulkan spec).
    unsafe {
        let hal = adapter.as_hal::<wgpu::hal::api::Vulkan>()?;
        let props = hal
            .shared_instance()
            .raw_instance()
            .get_physical_device_memory_properties(hal.raw_physical_device());
        props
            .memory_heaps
            .iter()
            .take(props.memory_heap_count as usize)
            .filter(|h| h.flags.as_raw() & DEVICE_LOCAL != 0)
            .map(|h| h.size)
            .max()
    }
}

#[cfg(all(feature = "wgpu", not(any(target_os = "linux", target_os = "windows"))))]
fn vulkan_memory(_adapter: &wgpu::Adapter) -> Option<u64> {
    None
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

#[cfg(test)]
mod tests {
    use super::*;

    fn adapter(name: &str, kind: AdapterKind) -> Adapter {
        Adapter {
            name: name.into(),
            kind,
            index: 99,
            api: "Vulkan".into(),
            driver: String::new(),
            vendor: 0,
            device: 0,
            pci_bus_id: String::new(),
            shader_f16: false,
            memory_bytes: None,
        }
    }

    /// Each kind counts from zero on its own, as cubecl's `DiscreteGpu(n)`,
    /// `IntegratedGpu(n)` do.
    #[test]
    fn adapters_are_numbered_within_their_kind() {
        let list = number(vec![
            adapter("iGPU", AdapterKind::IntegratedGpu),
            adapter("4080", AdapterKind::DiscreteGpu),
            adapter("lavapipe", AdapterKind::Cpu),
            adapter("7900", AdapterKind::DiscreteGpu),
        ]);
        let got: Vec<(&str, usize)> = list.iter().map(|a| (a.name.as_str(), a.index)).collect();
        assert_eq!(
            got,
            [("iGPU", 0), ("4080", 0), ("lavapipe", 0), ("7900", 1)]
        );
    }

    /// `wgpu` is the adapter cubecl opens for its default device: wgpu-core's high-performance
    /// rank (discrete, integrated, other, virtual, software; wgpu's order among equals), or
    /// the one `CUBECL_WGPU_DEFAULT_DEVICE` names.
    #[test]
    fn the_default_adapter_is_the_one_cubecl_opens() {
        let pick = |kinds: &[(&str, AdapterKind)], var: Option<&str>| {
            let list = number(kinds.iter().map(|(n, k)| adapter(n, *k)).collect());
            default_of(&list, var).map(|a| a.map(|a| a.name))
        };
        use AdapterKind::*;
        let name = |s: &str| Ok(Some(s.to_owned()));
        assert_eq!(
            pick(
                &[
                    ("lavapipe", Cpu),
                    ("iGPU", IntegratedGpu),
                    ("4080", DiscreteGpu)
                ],
                None
            ),
            name("4080")
        );
        assert_eq!(
            pick(&[("lavapipe", Cpu), ("iGPU", IntegratedGpu)], None),
            name("iGPU")
        );
        // An adapter of no known type ranks above a virtual GPU (wgpu-core's get_order).
        assert_eq!(
            pick(
                &[
                    ("virtio", VirtualGpu),
                    ("unknown", Other),
                    ("lavapipe", Cpu)
                ],
                None
            ),
            name("unknown")
        );
        assert_eq!(
            pick(&[("lavapipe", Cpu), ("virtio", VirtualGpu)], None),
            name("virtio")
        );
        // Among equals, the first in wgpu's order.
        assert_eq!(
            pick(&[("A", DiscreteGpu), ("B", DiscreteGpu)], None),
            name("A")
        );
        assert_eq!(pick(&[], None), Ok(None));
        // CUBECL_WGPU_DEFAULT_DEVICE, as cubecl parses it.
        let two = [("A", DiscreteGpu), ("lavapipe", Cpu), ("B", DiscreteGpu)];
        assert_eq!(pick(&two, Some("DiscreteGpu(1)")), name("B"));
        assert_eq!(pick(&two, Some("Cpu")), name("lavapipe"));
        assert_eq!(pick(&two, Some("IntegratedGpu(0)")), Ok(None));
        let bad = pick(&two, Some("discrete")).unwrap_err();
        assert!(bad.contains("CUBECL_WGPU_DEFAULT_DEVICE=discrete"), "{bad}");
        assert!(pick(&two, Some("Cpu(0)")).is_err());
    }

    /// The graphics API is cubecl's: the first with an adapter that is not a software
    /// renderer, else the first with any; the later ones are not asked once one has a GPU.
    #[test]
    fn the_graphics_api_is_the_first_with_a_gpu() {
        use AdapterKind::*;
        let api = |name: &str, kinds: &[AdapterKind]| -> Vec<Adapter> {
            kinds
                .iter()
                .map(|k| {
                    let mut a = adapter(&format!("{name} {k:?}"), *k);
                    a.api = name.into();
                    a
                })
                .collect()
        };
        let apis = |lists: Vec<Vec<Adapter>>| -> Vec<String> {
            settle(lists).iter().map(|a| a.api.clone()).collect()
        };
        // Vulkan with lavapipe alone, GL with the real GPU: GL.
        assert_eq!(
            apis(vec![api("Vulkan", &[Cpu]), vec![], api("Gl", &[Other])]),
            ["Gl"]
        );
        assert_eq!(
            apis(vec![
                api("Vulkan", &[Cpu, DiscreteGpu]),
                api("Gl", &[Other])
            ]),
            ["Vulkan", "Vulkan"]
        );
        // Software renderers only: the first API that has one.
        assert_eq!(
            apis(vec![vec![], api("Vulkan", &[Cpu]), api("Gl", &[Cpu])]),
            ["Vulkan"]
        );
        assert!(apis(vec![vec![], vec![]]).is_empty());
        // Lazily: an API after the one with a GPU is not probed.
        let asked = std::cell::Cell::new(0);
        let lists = [api("Vulkan", &[IntegratedGpu]), api("Gl", &[Other])];
        let got = settle(lists.into_iter().inspect(|_| asked.set(asked.get() + 1)));
        assert_eq!((got.len(), asked.get()), (1, 1));
    }

    /// A `vulkan` build gives a Vulkan adapter SPIR-V and refuses it on a software renderer,
    /// unless told to try; a default build gives every adapter WGSL and refuses none.
    #[test]
    fn a_spirv_build_refuses_software_renderers() {
        let mut lavapipe = adapter("llvmpipe (LLVM 15.0.6, 256 bits)", AdapterKind::Cpu);
        let card = adapter("NVIDIA GeForce RTX 4080", AdapterKind::DiscreteGpu);
        assert_eq!(Compiler::in_build(&card, true), Compiler::Spirv);
        assert_eq!(Compiler::in_build(&card, false), Compiler::Wgsl);
        assert_eq!(spirv_refusal(&card, true, false), None);
        assert_eq!(spirv_refusal(&lavapipe, false, false), None);
        let why = spirv_refusal(&lavapipe, true, false).expect("refused");
        assert!(why.starts_with("llvmpipe (LLVM 15.0.6, 256 bits) is a software renderer"));
        assert!(why.contains("--features vulkan") && why.contains(SPIRV_SOFTWARE_VAR));
        assert_eq!(spirv_refusal(&lavapipe, true, true), None);
        // Metal and DX12 adapters keep WGSL in a `vulkan` build.
        lavapipe.api = "Metal".into();
        assert_eq!(Compiler::in_build(&lavapipe, true), Compiler::Wgsl);
        assert_eq!(spirv_refusal(&lavapipe, true, false), None);
        assert_eq!(Compiler::of(&card), Compiler::in_build(&card, SPIRV_BUILD));
    }

    /// A refresh replaces what `adapters()` answers (the same machine gives the same list).
    #[test]
    fn refresh_probes_again_and_is_kept() {
        let first = adapters();
        let again = refresh();
        assert_eq!(&*first, &*again);
        assert!(Arc::ptr_eq(&again, &adapters()));
    }
}
