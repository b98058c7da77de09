//! Devices: parsing the names users type, opening them, and saying what this build can use on
//! this machine (and why not where it cannot). One code path serves all devices: burn 0.22
//! routes every tensor operation by its [`Device`], so the rest of the engine never names a
//! backend (DESIGN.md §4).
//!
//! | name        | backend                         | available when                                  |
//! |-------------|---------------------------------|-------------------------------------------------|
//! | `cpu`       | burn-flex (pure Rust, SIMD)     | always (the default)                            |
//! | `wgpu[:N]`  | wgpu (Vulkan/Metal/DX12)        | the default build, and wgpu finds an adapter     |
//! | `cuda:N`    | CubeCL CUDA                     | built with `--features cuda` and a driver found |
//! | `rocm:N`    | CubeCL HIP                      | built with `--features rocm` and `/dev/kfd`     |

pub mod adapters;
pub mod memory;
pub mod precision;
pub mod readback;

use std::fmt;
use std::str::FromStr;

use burn::tensor::Device;
use serde::{Deserialize, Serialize};

use crate::device::precision::Precision;

/// Errors of device choice.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    /// The name is not one this program knows.
    #[error("unknown device '{0}': expected cpu, wgpu, wgpu:N, cuda:N or rocm:N")]
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
    /// CUDA device N.
    Cuda(usize),
    /// ROCm (HIP) device N.
    Rocm(usize),
}

impl fmt::Display for DeviceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceSpec::Cpu => write!(f, "cpu"),
            DeviceSpec::Wgpu(None) => write!(f, "wgpu"),
            DeviceSpec::Wgpu(Some(n)) => write!(f, "wgpu:{n}"),
            DeviceSpec::Cuda(n) => write!(f, "cuda:{n}"),
            DeviceSpec::Rocm(n) => write!(f, "rocm:{n}"),
        }
    }
}

impl FromStr for DeviceSpec {
    type Err = DeviceError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let lower = s.trim().to_ascii_lowercase();
        let (kind, index) = match lower.split_once(':') {
            Some((k, i)) => (
                k,
                Some(
                    i.parse::<usize>()
                        .map_err(|_| DeviceError::Unknown(s.to_owned()))?,
                ),
            ),
            None => (lower.as_str(), None),
        };
        match (kind, index) {
            ("cpu" | "flex", None) => Ok(DeviceSpec::Cpu),
            ("wgpu", i) => Ok(DeviceSpec::Wgpu(i)),
            ("cuda", i) => Ok(DeviceSpec::Cuda(i.unwrap_or(0))),
            ("rocm" | "hip", i) => Ok(DeviceSpec::Rocm(i.unwrap_or(0))),
            _ => Err(DeviceError::Unknown(s.to_owned())),
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
        DeviceSpec::Wgpu(index) => open_wgpu(index).map_err(unavailable),
        DeviceSpec::Cuda(index) => open_cuda(index).map_err(unavailable),
        DeviceSpec::Rocm(index) => open_rocm(index).map_err(unavailable),
    }
}

/// The adapter `wgpu` / `wgpu:N` runs on, or why there is none.
pub fn wgpu_adapter(index: Option<usize>) -> Result<&'static adapters::Adapter, String> {
    if !cfg!(feature = "wgpu") {
        return Err("this build has no wgpu backend; rebuild with `--features wgpu`".into());
    }
    let all = adapters::adapters();
    if all.is_empty() {
        return Err(adapters::NO_ADAPTER.into());
    }
    match index {
        None => adapters::default_adapter().ok_or_else(|| adapters::NO_ADAPTER.into()),
        Some(n) => adapters::discrete(n).ok_or_else(|| {
            let discrete: Vec<&str> = all
                .iter()
                .filter(|a| a.kind == adapters::AdapterKind::DiscreteGpu)
                .map(|a| a.name.as_str())
                .collect();
            let others: Vec<String> = all
                .iter()
                .filter(|a| a.kind != adapters::AdapterKind::DiscreteGpu)
                .map(|a| format!("{} ({})", a.name, a.kind.label()))
                .collect();
            format!(
                "wgpu:{n} is discrete GPU number {n}, and wgpu finds {} discrete GPU(s){}{}",
                discrete.len(),
                if discrete.is_empty() {
                    String::new()
                } else {
                    format!(": {}", discrete.join(", "))
                },
                if others.is_empty() {
                    String::new()
                } else {
                    format!("; use `wgpu` for {}", others.join(", "))
                }
            )
        }),
    }
}

#[cfg(feature = "wgpu")]
fn open_wgpu(index: Option<usize>) -> Result<Device, String> {
    use burn::tensor::{DeviceKind, Tensor};
    wgpu_adapter(index)?;
    let device = Device::wgpu(match index {
        None => DeviceKind::DefaultDevice,
        Some(n) => DeviceKind::DiscreteGpu(n),
    });
    // burn starts the runtime on first use and panics when it cannot: start it here, where a
    // failure is a reason shown to the user rather than a crash in the middle of a trial.
    let first = std::panic::catch_unwind(|| {
        Tensor::<1>::zeros([1], &device)
            .try_into_vec_as::<f32>()
            .is_ok()
    });
    match first {
        Ok(true) => Ok(device),
        Ok(false) => Err("the wgpu runtime started but could not read a tensor back".into()),
        Err(_) => Err("the wgpu runtime failed to start on this adapter".into()),
    }
}

#[cfg(not(feature = "wgpu"))]
fn open_wgpu(_index: Option<usize>) -> Result<Device, String> {
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
        DeviceSpec::Wgpu(index) => {
            let adapter = wgpu_adapter(index).map_err(|reason| DeviceError::Unavailable {
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

/// Whether a read from `device` is a transfer the host waits for (a cubecl device: a GPU, or
/// lavapipe standing in for one), as opposed to the flex CPU backend, whose tensors are host
/// memory. Told by the memory pool: cubecl devices report one, flex does not.
pub fn reads_are_transfers(device: &Device) -> bool {
    device.memory_pool_usage().is_some()
}

/// A key naming the physical device behind `spec`: `wgpu` is the `wgpu:N` it resolves to when
/// wgpu's default adapter is a discrete GPU.
pub fn physical_device(spec: DeviceSpec) -> String {
    if let DeviceSpec::Wgpu(None) = spec
        && let Some(default) = adapters::default_adapter()
        && let Some(n) = (0..)
            .map_while(adapters::discrete)
            .position(|a| std::ptr::eq(a, default))
    {
        return DeviceSpec::Wgpu(Some(n)).to_string();
    }
    spec.to_string()
}

/// What a device is, for messages: `flex on the CPU`, `wgpu on NVIDIA GeForce RTX 4080`.
pub fn describe_spec(spec: DeviceSpec) -> String {
    match spec {
        DeviceSpec::Cpu => "flex on the CPU".into(),
        DeviceSpec::Wgpu(index) => match wgpu_adapter(index) {
            Ok(a) => format!("wgpu on {}, {}", a.name, a.kind.label()),
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

/// Every device kind this program knows, with whether this build can use it here and why
/// not. Opening a wgpu adapter starts its runtime, so this is for a `devices` command, not a
/// hot path.
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
    });
    match wgpu_adapter(None) {
        Ok(adapter) => {
            let wgpu_info = |name: String, a: &adapters::Adapter, what: &str| DeviceInfo {
                name: name.clone(),
                backend: "wgpu".into(),
                available: true,
                detail: format!(
                    "{}: {} ({}, {}{})",
                    what,
                    a.name,
                    a.kind.label(),
                    a.api,
                    if a.kind == adapters::AdapterKind::Cpu {
                        "; slow, for checks only"
                    } else {
                        ""
                    }
                ),
                memory_bytes: None,
                precisions: name
                    .parse()
                    .ok()
                    .and_then(|spec| supported_precisions(spec).ok())
                    .unwrap_or_default(),
                // cubecl's allocator reports its pools on every wgpu device.
                reports_pool_usage: true,
            };
            out.push(wgpu_info("wgpu".into(), adapter, "default adapter"));
            let mut n = 0;
            while let Some(a) = adapters::discrete(n) {
                out.push(wgpu_info(format!("wgpu:{n}"), a, "discrete GPU"));
                n += 1;
            }
        }
        Err(reason) => out.push(unavailable_info("wgpu", "wgpu", reason)),
    }
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
        });
    } else {
        out.push(unavailable_info("rocm:0", "rocm", rocm_reason));
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
