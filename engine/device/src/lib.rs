//! Devices: parsing the names users type, opening them, and saying what this build can use on
//! this machine (and why not where it cannot). One code path serves all devices: burn 0.22
//! routes every tensor operation by its [`Device`], so the rest of the engine never names a
//! backend (DESIGN.md §4).
//!
//! | name        | backend                         | available when                                  |
//! |-------------|---------------------------------|-------------------------------------------------|
//! | `cpu`       | burn-flex (pure Rust, SIMD)     | always (the default)                            |
//! | `wgpu[:N]`  | wgpu (Vulkan/Metal/DX12)        | the default build, and wgpu finds an adapter     |
//! | `wgpu:integrated:N`, `wgpu:virtual:N`, `wgpu:cpu` | the same, by adapter kind | such an adapter is there |
//! | `cuda:N`    | CubeCL CUDA                     | built with `--features cuda` and a driver found |
//! | `rocm:N`    | CubeCL HIP                      | built with `--features rocm` and `/dev/kfd`     |

pub mod adapters;
pub mod cache_store;
pub mod compiling;
pub mod graph;
pub mod kernel_timing;
pub mod kernels;
pub mod memory;
pub mod precision;
pub mod readback;

use std::fmt;
use std::str::FromStr;

use burn::tensor::Device;
use serde::{Deserialize, Serialize};

use crate::precision::Precision;

/// Errors of device choice.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    /// The name is not one this program knows.
    #[error(
        "unknown device '{0}': expected cpu, wgpu, wgpu:N, wgpu:integrated:N, wgpu:virtual:N, \
         wgpu:cpu, cuda:N or rocm:N (`tradetune devices` lists those here)"
    )]
    Unknown(String),
    /// The device exists in general but not in this build or on this machine.
    #[error("device '{name}' is not available: {reason}")]
    Unavailable { name: String, reason: String },
    /// The device does not compute in the precision asked for.
    #[error(
        "device '{device}' ({what}) does not compute in {precision}; it supports {}",
        supported.iter().map(|p| p.name()).collect::<Vec<_>>().join(", ")
    )]
    Precision {
        device: String,
        what: String,
        precision: Precision,
        supported: Vec<Precision>,
    },
}

/// A device as the user names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum DeviceSpec {
    /// The CPU through burn-flex.
    #[default]
    Cpu,
    /// A wgpu adapter: None = wgpu's default choice (which is Mesa's software Vulkan on a
    /// machine without a GPU), Some(N) = the N-th discrete GPU.
    Wgpu(Option<usize>),
    /// A wgpu adapter that is not a discrete GPU, by its kind and its index among the adapters
    /// of that kind (`wgpu:integrated:0`, `wgpu:virtual:0`, `wgpu:cpu`); see
    /// [`adapters`] for how they are numbered.
    WgpuOf(WgpuKind, usize),
    /// CUDA device N.
    Cuda(usize),
    /// ROCm (HIP) device N.
    Rocm(usize),
}

/// The kinds of wgpu adapter named by kind (discrete GPUs are `wgpu:N`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WgpuKind {
    Integrated,
    Virtual,
    /// A software renderer (Mesa's lavapipe).
    Cpu,
    /// An adapter of no known type (listed; burn 0.22 cannot select one).
    Other,
}

impl WgpuKind {
    /// The word in the device name.
    pub fn word(self) -> &'static str {
        match self {
            WgpuKind::Integrated => "integrated",
            WgpuKind::Virtual => "virtual",
            WgpuKind::Cpu => "cpu",
            WgpuKind::Other => "other",
        }
    }

    pub fn adapter_kind(self) -> adapters::AdapterKind {
        match self {
            WgpuKind::Integrated => adapters::AdapterKind::IntegratedGpu,
            WgpuKind::Virtual => adapters::AdapterKind::VirtualGpu,
            WgpuKind::Cpu => adapters::AdapterKind::Cpu,
            WgpuKind::Other => adapters::AdapterKind::Other,
        }
    }
}

impl DeviceSpec {
    /// The device name of a wgpu adapter: `wgpu:0` for a discrete GPU, `wgpu:cpu` for the
    /// first software renderer, `wgpu:integrated:0`, ….
    pub fn of_adapter(a: &adapters::Adapter) -> DeviceSpec {
        use adapters::AdapterKind as K;
        match a.kind {
            K::DiscreteGpu => DeviceSpec::Wgpu(Some(a.index)),
            K::IntegratedGpu => DeviceSpec::WgpuOf(WgpuKind::Integrated, a.index),
            K::VirtualGpu => DeviceSpec::WgpuOf(WgpuKind::Virtual, a.index),
            K::Cpu => DeviceSpec::WgpuOf(WgpuKind::Cpu, a.index),
            K::Other => DeviceSpec::WgpuOf(WgpuKind::Other, a.index),
        }
    }

    /// Whether this names a wgpu adapter.
    pub fn is_wgpu(self) -> bool {
        matches!(self, DeviceSpec::Wgpu(_) | DeviceSpec::WgpuOf(..))
    }
}

impl fmt::Display for DeviceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceSpec::Cpu => write!(f, "cpu"),
            DeviceSpec::Wgpu(None) => write!(f, "wgpu"),
            DeviceSpec::Wgpu(Some(n)) => write!(f, "wgpu:{n}"),
            DeviceSpec::WgpuOf(WgpuKind::Cpu, 0) => write!(f, "wgpu:cpu"),
            DeviceSpec::WgpuOf(kind, n) => write!(f, "wgpu:{}:{n}", kind.word()),
            DeviceSpec::Cuda(n) => write!(f, "cuda:{n}"),
            DeviceSpec::Rocm(n) => write!(f, "rocm:{n}"),
        }
    }
}

impl FromStr for DeviceSpec {
    type Err = DeviceError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let unknown = || DeviceError::Unknown(s.to_owned());
        let lower = s.trim().to_ascii_lowercase();
        let parts: Vec<&str> = lower.split(':').collect();
        let index = |i: &str| i.parse::<usize>().map_err(|_| unknown());
        match parts.as_slice() {
            ["cpu" | "flex"] => Ok(DeviceSpec::Cpu),
            ["wgpu"] => Ok(DeviceSpec::Wgpu(None)),
            ["wgpu", i] if i.starts_with(|c: char| c.is_ascii_digit()) => {
                Ok(DeviceSpec::Wgpu(Some(index(i)?)))
            }
            ["wgpu", kind, rest @ ..] if rest.len() <= 1 => {
                let n = rest.first().map_or(Ok(0), |i| index(i))?;
                let kind = match *kind {
                    "discrete" => return Ok(DeviceSpec::Wgpu(Some(n))),
                    "integrated" => WgpuKind::Integrated,
                    "virtual" => WgpuKind::Virtual,
                    "cpu" => WgpuKind::Cpu,
                    "other" => WgpuKind::Other,
                    _ => return Err(unknown()),
                };
                Ok(DeviceSpec::WgpuOf(kind, n))
            }
            ["cuda"] => Ok(DeviceSpec::Cuda(0)),
            ["cuda", i] => Ok(DeviceSpec::Cuda(index(i)?)),
            ["rocm" | "hip"] => Ok(DeviceSpec::Rocm(0)),
            ["rocm" | "hip", i] => Ok(DeviceSpec::Rocm(index(i)?)),
            _ => Err(unknown()),
        }
    }
}

/// Held by this crate's tests that launch kernels on wgpu, one at a time: the kernel timer's
/// test times every launch of the process, and a graph's capture records launches that do not
/// run then (the timer would count them unmeasured).
#[cfg(test)]
pub(crate) fn gpu_test_alone() -> std::sync::MutexGuard<'static, ()> {
    static ALONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ALONE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The wgpu device for a test that needs one, or `None` (with a loud SKIP naming `test`) on a
/// machine where wgpu finds no adapter. CI installs Mesa's software Vulkan and sets
/// `TRADETUNE_REQUIRE_GPU=1`, which turns the skip into a failure.
pub fn wgpu_for_test(test: &str) -> Option<Device> {
    match open(DeviceSpec::Wgpu(None)) {
        Ok(device) => Some(device),
        Err(e) => {
            let required = std::env::var("TRADETUNE_REQUIRE_GPU").is_ok_and(|v| v == "1");
            assert!(!required, "{test}: TRADETUNE_REQUIRE_GPU=1 but {e}");
            eprintln!("SKIP {test}: {e}");
            None
        }
    }
}

/// Opens `spec`, or says why this build or machine cannot.
pub fn open(spec: DeviceSpec) -> Result<Device, DeviceError> {
    let unavailable = |reason: String| DeviceError::Unavailable {
        name: spec.to_string(),
        reason,
    };
    match spec {
        DeviceSpec::Cpu => Ok(Device::flex()),
        DeviceSpec::Wgpu(_) | DeviceSpec::WgpuOf(..) => open_wgpu(spec).map_err(unavailable),
        DeviceSpec::Cuda(index) => open_cuda(index).map_err(unavailable),
        DeviceSpec::Rocm(index) => open_rocm(index).map_err(unavailable),
    }
}

/// The adapter a wgpu device name runs on, or why there is none (named with the adapters
/// that are there).
pub fn wgpu_adapter(spec: DeviceSpec) -> Result<adapters::Adapter, String> {
    if !cfg!(feature = "wgpu") {
        return Err("this build has no wgpu backend; rebuild with `--features wgpu`".into());
    }
    let (kind, n) = match spec {
        DeviceSpec::Wgpu(None) => {
            return adapters::default_adapter_or_why();
        }
        DeviceSpec::Wgpu(Some(n)) => (adapters::AdapterKind::DiscreteGpu, n),
        DeviceSpec::WgpuOf(kind, n) => (kind.adapter_kind(), n),
        other => return Err(format!("{other} is not a wgpu device")),
    };
    let all = adapters::adapters();
    if all.is_empty() {
        return Err(adapters::NO_ADAPTER.into());
    }
    adapters::nth(kind, n).ok_or_else(|| {
        let of_kind = all.iter().filter(|a| a.kind == kind).count();
        let here: Vec<String> = all
            .iter()
            .map(|a| format!("{} ({})", DeviceSpec::of_adapter(a), a.name))
            .collect();
        format!(
            "{spec} is {} number {n}, and wgpu finds {of_kind} {}(s); the adapters here are {} \
             (`tradetune devices` lists them)",
            kind.label(),
            kind.label(),
            here.join(", ")
        )
    })
}

/// Why burn cannot open `a` by its name, if it cannot: burn 0.22's `DeviceKind` has no
/// "other" adapter type, and its `Cpu` kind opens the first software renderer only; and why
/// this build cannot run on it (a software renderer in a `vulkan` build:
/// [`adapters::spirv_refusal`]).
fn unopenable(a: &adapters::Adapter) -> Option<String> {
    match a.kind {
        adapters::AdapterKind::Other => Some(format!(
            "{} is an adapter of no known type, which burn 0.22 cannot select (only `wgpu` \
             reaches it, when it is wgpu's default)",
            a.name
        )),
        adapters::AdapterKind::Cpu if a.index > 0 => Some(format!(
            "{} is software renderer number {}; burn 0.22 opens only the first (`wgpu:cpu`)",
            a.name, a.index
        )),
        _ => adapters::spirv_refusal_here(a),
    }
}

#[cfg(feature = "wgpu")]
fn open_wgpu(spec: DeviceSpec) -> Result<Device, String> {
    use burn::tensor::{DeviceKind, Tensor};
    let adapter = wgpu_adapter(spec)?;
    if let Some(why) = unopenable(&adapter) {
        return Err(why);
    }
    // Before cubecl reads its settings: the autotune cache of this adapter and driver, and
    // the kernel counters.
    kernels::configure(&adapter);
    let kind = match spec {
        DeviceSpec::Wgpu(None) => DeviceKind::DefaultDevice,
        _ => match adapter.kind {
            adapters::AdapterKind::DiscreteGpu => DeviceKind::DiscreteGpu(adapter.index),
            adapters::AdapterKind::IntegratedGpu => DeviceKind::IntegratedGpu(adapter.index),
            adapters::AdapterKind::VirtualGpu => DeviceKind::VirtualGpu(adapter.index),
            adapters::AdapterKind::Cpu | adapters::AdapterKind::Other => DeviceKind::Cpu,
        },
    };
    let device = Device::wgpu(kind);
    // burn starts the runtime on first use and panics when it cannot: start it here, where a
    // failure is a reason shown to the user rather than a crash in the middle of a trial. The
    // runtime creates its Vulkan instance now, so no probe may create one at the same time.
    let first = {
        let _instances = adapters::instance_lock();
        std::panic::catch_unwind(|| {
            Tensor::<1>::zeros([1], &device)
                .try_into_vec_as::<f32>()
                .is_ok()
        })
    };
    match first {
        Ok(true) => {
            opened(&device, &adapter);
            Ok(device)
        }
        Ok(false) => Err("the wgpu runtime started but could not read a tensor back".into()),
        Err(_) => Err(format!(
            "the wgpu runtime failed to start on {} ({})",
            adapter.name,
            adapter.kind.label()
        )),
    }
}

/// The wgpu devices [`open`] opened in this process, with the adapter each runs on.
static OPENED: std::sync::Mutex<Vec<(Device, adapters::Adapter)>> =
    std::sync::Mutex::new(Vec::new());

/// Notes that `device` runs on `adapter` (the latest open of a device wins).
#[cfg_attr(not(feature = "wgpu"), allow(dead_code))]
fn opened(device: &Device, adapter: &adapters::Adapter) {
    let mut all = OPENED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    all.retain(|(d, _)| d != device);
    all.push((device.clone(), adapter.clone()));
}

/// The adapter a wgpu device [`open`] opened runs on: where a trial's per-card state goes (its
/// GPU cache environment, [`kernels::environment_of`]) when trials of one process run on
/// different cards. `None` for a device not opened through [`open`] or not on wgpu.
pub fn wgpu_adapter_of(device: &Device) -> Option<adapters::Adapter> {
    let all = OPENED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    all.iter()
        .find(|(d, _)| d == device)
        .map(|(_, adapter)| adapter.clone())
}

/// Waits for every task queued to the runner threads of the wgpu devices [`open`] opened in
/// this process (a sync flushes their buffers, whichever thread queued them) and for every
/// command submitted to those devices: for a process about to exit, so that no GPU work is
/// still going on in the runners and the driver while the process's libraries run their exit
/// handlers. The lazy operations of burn's fusion still held by other threads' streams are
/// not run (only the calling thread's are). CUDA and ROCm devices are not recorded (neither
/// builds here). A device that cannot sync (lost) is passed over; returns how many synced.
pub fn finish_gpu_work() -> usize {
    let devices: Vec<Device> = OPENED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .iter()
        .map(|(d, _)| d.clone())
        .collect();
    devices
        .iter()
        .filter(|d| std::panic::catch_unwind(|| d.sync().is_ok()).unwrap_or(false))
        .count()
}

#[cfg(not(feature = "wgpu"))]
fn open_wgpu(_spec: DeviceSpec) -> Result<Device, String> {
    Err("this build has no wgpu backend; rebuild with `--features wgpu`".into())
}

/// The NVIDIA kernel driver publishes one directory per GPU here. CUDA's runtime panics on a
/// worker thread when the driver library is missing, so its presence is checked first.
const NVIDIA_GPUS: &str = "/proc/driver/nvidia/gpus";

fn nvidia_gpus() -> usize {
    std::fs::read_dir(NVIDIA_GPUS)
        .map(|d| d.count())
        .unwrap_or(0)
}

#[cfg(feature = "cuda")]
fn open_cuda(index: usize) -> Result<Device, String> {
    let n = nvidia_gpus();
    if index >= n {
        return Err(format!(
            "the NVIDIA driver lists {n} GPU(s) in {NVIDIA_GPUS}; cuda:{index} does not exist"
        ));
    }
    Ok(Device::cuda(index))
}

#[cfg(not(feature = "cuda"))]
fn open_cuda(_index: usize) -> Result<Device, String> {
    Err("this build has no CUDA backend (burn 0.22.1 builds it by downloading LLVM); rebuild with `--features cuda`, or use wgpu".into())
}

/// The amdgpu kernel driver's compute interface; HIP needs it.
const KFD: &str = "/dev/kfd";

#[cfg(feature = "rocm")]
fn open_rocm(index: usize) -> Result<Device, String> {
    if !std::path::Path::new(KFD).exists() {
        return Err(format!("{KFD} is missing: no amdgpu compute driver"));
    }
    Ok(Device::rocm(index))
}

#[cfg(not(feature = "rocm"))]
fn open_rocm(_index: usize) -> Result<Device, String> {
    Err("this build has no ROCm backend; rebuild with `--features rocm`, or use wgpu".into())
}

/// What `tradetune devices` prints for one device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceInfo {
    /// The name to pass to `--device`.
    pub name: String,
    /// The backend behind it.
    pub backend: String,
    /// Whether this build can use it on this machine.
    pub available: bool,
    /// Why not, or what it is.
    pub detail: String,
    /// Memory the budget is taken from, bytes (host RAM for the CPU), when known.
    pub memory_bytes: Option<u64>,
    /// Precisions the device computes in.
    pub precisions: Vec<Precision>,
    /// Whether the device reports allocator pool usage (`Device::memory_pool_usage`), which
    /// the run-time memory check needs.
    pub reports_pool_usage: bool,
    /// The wgpu adapter behind a wgpu device: its kind, driver, PCI bus and memory.
    #[serde(default)]
    pub adapter: Option<adapters::Adapter>,
}

fn precisions_of(device: &Device) -> Vec<Precision> {
    [Precision::F32, Precision::Bf16, Precision::F16]
        .into_iter()
        .filter(|p| device.supports_dtype(p.compute_dtype()))
        .collect()
}

/// The precisions `spec` computes in, without opening it: flex has f32, bf16 and f16; wgpu
/// has f32, and f16 where the adapter has `shader-f16` (WGSL has no bf16); CUDA and ROCm all
/// three. Unavailable devices say why.
pub fn supported_precisions(spec: DeviceSpec) -> Result<Vec<Precision>, DeviceError> {
    let all = vec![Precision::F32, Precision::Bf16, Precision::F16];
    match spec {
        DeviceSpec::Cpu => Ok(all),
        DeviceSpec::Wgpu(_) | DeviceSpec::WgpuOf(..) => {
            let adapter = wgpu_adapter(spec).map_err(|reason| DeviceError::Unavailable {
                name: spec.to_string(),
                reason,
            })?;
            Ok(if adapter.shader_f16 {
                vec![Precision::F32, Precision::F16]
            } else {
                vec![Precision::F32]
            })
        }
        DeviceSpec::Cuda(_) | DeviceSpec::Rocm(_) => Ok(all),
    }
}

/// Whether `device`, with or without autodiff, is the CPU (burn's flex backend): where the env
/// stays on the host by default, the host engines run in f32 and nothing compiles kernels.
pub fn is_cpu(device: &Device) -> bool {
    device.clone().without_autodiff() == Device::flex()
}

/// Whether `t` lives on a cubecl device (a GPU, or lavapipe) without autodiff: where
/// TradeTune's own CubeCL kernels run (the env step, the PPO loss and tally), which burn reaches
/// through its backend extension API on the cubecl backends only.
#[cfg(feature = "wgpu")]
pub fn runs_cubecl_kernels<const D: usize>(t: &burn::tensor::Tensor<D>) -> bool {
    use burn::backend::{BackendTensor, DispatchAutodiffContext, DispatchTensorKind};
    let d = t.clone().into_dispatch();
    matches!(d.autodiff, DispatchAutodiffContext::Disabled)
        && matches!(d.kind, DispatchTensorKind::Cube(BackendTensor::Float(_)))
}

/// Whether `t` lives where TradeTune's own CubeCL kernels run: nowhere without `wgpu`.
#[cfg(not(feature = "wgpu"))]
pub fn runs_cubecl_kernels<const D: usize>(_t: &burn::tensor::Tensor<D>) -> bool {
    false
}

/// Whether a read from `device` is a transfer the host waits for (a cubecl device: a GPU, or
/// lavapipe standing in for one), as opposed to the flex CPU backend, whose tensors are host
/// memory. Told by the memory pool: cubecl devices report one, flex does not.
pub fn reads_are_transfers(device: &Device) -> bool {
    device.memory_pool_usage().is_some()
}

/// A key naming the physical device behind `spec`: `wgpu` is the name of the adapter it
/// resolves to (`wgpu:0` where wgpu's default is the first discrete GPU, `wgpu:cpu` on
/// lavapipe).
pub fn physical_device(spec: DeviceSpec) -> String {
    if let DeviceSpec::Wgpu(None) = spec
        && let Some(default) = adapters::default_adapter()
    {
        return DeviceSpec::of_adapter(&default).to_string();
    }
    spec.to_string()
}

/// What a device is, for messages: `flex on the CPU`, `wgpu on NVIDIA GeForce RTX 4080,
/// discrete GPU` (`…, SPIR-V kernels` in a `vulkan` build).
pub fn describe_spec(spec: DeviceSpec) -> String {
    match spec {
        DeviceSpec::Cpu => "flex on the CPU".into(),
        DeviceSpec::Wgpu(_) | DeviceSpec::WgpuOf(..) => match wgpu_adapter(spec) {
            Ok(a) => format!(
                "wgpu on {}, {}{}",
                a.name,
                a.kind.label(),
                match adapters::Compiler::of(&a) {
                    adapters::Compiler::Spirv => ", SPIR-V kernels",
                    adapters::Compiler::Wgsl => "",
                }
            ),
            Err(_) => "wgpu".into(),
        },
        DeviceSpec::Cuda(n) => format!("CUDA device {n}"),
        DeviceSpec::Rocm(n) => format!("ROCm device {n}"),
    }
}

/// Refuses `precision` on `spec` when the device does not compute in it (or is not there),
/// naming the device and what it supports.
pub fn check_precision(spec: DeviceSpec, precision: Precision) -> Result<(), DeviceError> {
    let supported = supported_precisions(spec)?;
    if supported.contains(&precision) {
        return Ok(());
    }
    Err(DeviceError::Precision {
        device: spec.to_string(),
        what: describe_spec(spec),
        precision,
        supported,
    })
}

/// Every device this program knows, with whether this build can use it here and why not:
/// the CPU, `wgpu` and every wgpu adapter by its own name (see [`adapters`]), CUDA and ROCm.
/// The wgpu adapters are those last probed; [`refresh_devices`] probes again.
pub fn describe_devices() -> Vec<DeviceInfo> {
    let mut out = Vec::new();
    let cpu = Device::flex();
    out.push(DeviceInfo {
        name: "cpu".into(),
        backend: "flex".into(),
        available: true,
        detail: format!(
            "burn-flex on {} threads (SIMD, rayon)",
            std::thread::available_parallelism().map_or(1, |n| n.get())
        ),
        memory_bytes: memory::host_memory_bytes(),
        precisions: precisions_of(&cpu),
        // burn-flex 0.22.1 does not implement `Backend::memory_pool_usage` (it allocates from
        // the global allocator), so the run-time check does nothing on the CPU and the
        // estimate before the run is the only guard there.
        reports_pool_usage: cpu.memory_pool_usage().is_some(),
        adapter: None,
    });
    out.extend(describe_wgpu());
    let nv = nvidia_gpus();
    let cuda_reason = if cfg!(feature = "cuda") {
        if nv == 0 {
            format!("no NVIDIA GPU: {NVIDIA_GPUS} is missing or empty")
        } else {
            String::new()
        }
    } else {
        open_cuda(0).err().unwrap_or_default()
    };
    if cuda_reason.is_empty() {
        for i in 0..nv {
            out.push(DeviceInfo {
                name: format!("cuda:{i}"),
                backend: "cuda".into(),
                available: true,
                detail: "NVIDIA GPU (driver present)".into(),
                memory_bytes: None,
                precisions: vec![Precision::F32, Precision::Bf16, Precision::F16],
                reports_pool_usage: true,
                adapter: None,
            });
        }
    } else {
        out.push(unavailable_info("cuda:0", "cuda", cuda_reason));
    }
    let rocm_reason = if cfg!(feature = "rocm") {
        if std::path::Path::new(KFD).exists() {
            String::new()
        } else {
            format!("{KFD} is missing: no amdgpu compute driver")
        }
    } else {
        open_rocm(0).err().unwrap_or_default()
    };
    if rocm_reason.is_empty() {
        out.push(DeviceInfo {
            name: "rocm:0".into(),
            backend: "rocm".into(),
            available: true,
            detail: "AMD GPU (amdgpu compute driver present)".into(),
            memory_bytes: None,
            precisions: vec![Precision::F32, Precision::Bf16, Precision::F16],
            reports_pool_usage: true,
            adapter: None,
        });
    } else {
        out.push(unavailable_info("rocm:0", "rocm", rocm_reason));
    }
    out
}

/// [`describe_devices`] after asking wgpu for its adapters again (a card plugged in, a driver
/// installed since the last probe).
pub fn refresh_devices() -> Vec<DeviceInfo> {
    adapters::refresh();
    describe_devices()
}

/// `wgpu` (wgpu's default adapter) and then every adapter by its own name, or why there is
/// none.
fn describe_wgpu() -> Vec<DeviceInfo> {
    let default = match wgpu_adapter(DeviceSpec::Wgpu(None)) {
        Ok(a) => a,
        Err(reason) => return vec![unavailable_info("wgpu", "wgpu", reason)],
    };
    let info = |name: String, a: &adapters::Adapter, what: &str| {
        let why_not = unopenable(a);
        DeviceInfo {
            name,
            backend: "wgpu".into(),
            available: why_not.is_none(),
            detail: match why_not {
                Some(why) => why,
                None => format!(
                    "{what}{} ({}, {}{}{})",
                    a.name,
                    a.kind.label(),
                    a.api,
                    match adapters::Compiler::of(a) {
                        adapters::Compiler::Spirv => " with SPIR-V kernels",
                        adapters::Compiler::Wgsl => "",
                    },
                    if a.kind == adapters::AdapterKind::Cpu {
                        "; slow, for checks only"
                    } else {
                        ""
                    }
                ),
            },
            memory_bytes: a.memory_bytes,
            precisions: if a.shader_f16 {
                vec![Precision::F32, Precision::F16]
            } else {
                vec![Precision::F32]
            },
            // cubecl's allocator reports its pools on every wgpu device.
            reports_pool_usage: true,
            adapter: Some(a.clone()),
        }
    };
    let mut out = vec![info(
        "wgpu".into(),
        &default,
        &format!("default adapter, {}: ", DeviceSpec::of_adapter(&default)),
    )];
    for a in adapters::adapters().iter() {
        out.push(info(DeviceSpec::of_adapter(a).to_string(), a, ""));
    }
    out
}

fn unavailable_info(name: &str, backend: &str, reason: String) -> DeviceInfo {
    DeviceInfo {
        name: name.into(),
        backend: backend.into(),
        available: false,
        detail: reason,
        memory_bytes: None,
        precisions: Vec::new(),
        reports_pool_usage: false,
        adapter: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A process about to exit waits for the queue of each device it opened.
    #[test]
    fn finishing_gpu_work_syncs_each_opened_device() {
        let Some(device) = wgpu_for_test("finishing_gpu_work_syncs_each_opened_device") else {
            return;
        };
        let before = kernels::counts().dispatches;
        // Lazy (burn's fusion): launched when something flushes this thread's stream.
        let queued = burn::tensor::Tensor::<1>::ones([1 << 16], &device) * 2.0;
        assert!(finish_gpu_work() >= 1);
        assert!(kernels::counts().dispatches > before, "the queued work ran");
        drop(queued);
    }

    #[test]
    fn parses_device_names() {
        assert_eq!("cpu".parse::<DeviceSpec>().unwrap(), DeviceSpec::Cpu);
        assert_eq!(
            "wgpu".parse::<DeviceSpec>().unwrap(),
            DeviceSpec::Wgpu(None)
        );
        assert_eq!(
            "WGPU:1".parse::<DeviceSpec>().unwrap(),
            DeviceSpec::Wgpu(Some(1))
        );
        assert_eq!("cuda:2".parse::<DeviceSpec>().unwrap(), DeviceSpec::Cuda(2));
        assert!("tpu".parse::<DeviceSpec>().is_err());
        assert!("cuda:x".parse::<DeviceSpec>().is_err());
        assert_eq!(DeviceSpec::Wgpu(Some(3)).to_string(), "wgpu:3");
    }

    /// Every adapter kind has a name that reads back to itself; `wgpu:discrete:N` is `wgpu:N`.
    #[test]
    fn adapter_names_round_trip() {
        for (name, spec) in [
            (
                "wgpu:integrated:0",
                DeviceSpec::WgpuOf(WgpuKind::Integrated, 0),
            ),
            ("wgpu:virtual:2", DeviceSpec::WgpuOf(WgpuKind::Virtual, 2)),
            ("wgpu:cpu", DeviceSpec::WgpuOf(WgpuKind::Cpu, 0)),
            ("wgpu:cpu:1", DeviceSpec::WgpuOf(WgpuKind::Cpu, 1)),
            ("wgpu:other:0", DeviceSpec::WgpuOf(WgpuKind::Other, 0)),
        ] {
            assert_eq!(name.parse::<DeviceSpec>().unwrap(), spec, "{name}");
            assert_eq!(spec.to_string(), name);
        }
        assert_eq!(
            "wgpu:discrete:1".parse::<DeviceSpec>().unwrap(),
            DeviceSpec::Wgpu(Some(1))
        );
        assert_eq!(
            "wgpu:Integrated".parse::<DeviceSpec>().unwrap(),
            DeviceSpec::WgpuOf(WgpuKind::Integrated, 0)
        );
        for bad in [
            "wgpu:",
            "wgpu:gpu:0",
            "wgpu:cpu:x",
            "wgpu:integrated:0:1",
            "cpu:0",
        ] {
            let e = bad.parse::<DeviceSpec>().unwrap_err().to_string();
            assert!(e.contains("wgpu:integrated:N"), "{bad}: {e}");
        }
    }

    /// An index wgpu does not have is refused by name, never a panic inside cubecl, whether
    /// this machine has adapters or not.
    #[test]
    fn a_missing_adapter_is_an_error_naming_what_is_there() {
        for spec in [
            DeviceSpec::Wgpu(Some(9)),
            DeviceSpec::WgpuOf(WgpuKind::Integrated, 9),
            DeviceSpec::WgpuOf(WgpuKind::Virtual, 9),
        ] {
            let e = open(spec).unwrap_err().to_string();
            assert!(
                e.starts_with(&format!("device '{spec}' is not available: ")),
                "{e}"
            );
            if cfg!(feature = "wgpu") && !adapters::adapters().is_empty() {
                assert!(
                    e.contains("number 9") && e.contains("tradetune devices"),
                    "{e}"
                );
            }
            assert!(check_precision(spec, Precision::F32).is_err());
        }
    }

    /// Each adapter wgpu finds is listed under its own name, which opens (or says why not).
    #[test]
    fn every_adapter_is_listed_by_its_name() {
        let all = describe_devices();
        for a in adapters::adapters().iter() {
            let name = DeviceSpec::of_adapter(a).to_string();
            let listed = all.iter().find(|d| d.name == name).expect("listed");
            assert_eq!(listed.adapter.as_ref(), Some(a));
            assert_eq!(wgpu_adapter(name.parse().unwrap()).as_ref(), Ok(a));
            if listed.available {
                open(name.parse().unwrap()).expect("a listed adapter opens");
            }
        }
    }

    #[test]
    fn cpu_is_always_described_and_available() {
        let all = describe_devices();
        let cpu = all.iter().find(|d| d.name == "cpu").unwrap();
        assert!(cpu.available && cpu.precisions.contains(&Precision::F32));
        assert!(open(DeviceSpec::Cpu).is_ok());
        #[cfg(not(feature = "cuda"))]
        assert!(
            open(DeviceSpec::Cuda(0))
                .unwrap_err()
                .to_string()
                .contains("--features cuda")
        );
    }
}
