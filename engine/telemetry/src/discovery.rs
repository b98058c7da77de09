//! Finding the GPUs: NVML's NVIDIA cards and amdgpu's cards under sysfs, as probes for the
//! sampler. The probe trait (`gpu.rs`) knows no vendor; this is where the vendors meet.

use std::path::Path;

use super::gpu::{GpuInfo, GpuProbe, GpuVendor, ProbeStatus};

/// Every GPU probe that found cards, and the state of every vendor (found or not).
pub struct GpuDiscovery {
    pub probes: Vec<Box<dyn GpuProbe>>,
    pub statuses: Vec<ProbeStatus>,
}

impl GpuDiscovery {
    /// Looks for NVIDIA cards through NVML and AMD cards under `drm_root` (normally
    /// `/sys/class/drm`). `watch_pid` is the process whose device memory is reported (NVML's
    /// process lists, amdgpu's DRM fdinfo).
    pub fn discover(drm_root: &Path, watch_pid: u32) -> GpuDiscovery {
        let mut probes: Vec<Box<dyn GpuProbe>> = Vec::new();
        let mut statuses = Vec::new();
        match super::nvml::NvmlProbe::init() {
            Ok(mut p) => {
                p.watch_pid(watch_pid);
                statuses.push(ProbeStatus::Ready {
                    vendor: GpuVendor::Nvidia,
                    devices: p.devices().len(),
                });
                probes.push(Box::new(p));
            }
            Err(status) => statuses.push(status),
        }
        match super::amdgpu::AmdGpuProbe::open(drm_root) {
            Ok(mut p) => {
                p.watch_pid(watch_pid);
                statuses.push(ProbeStatus::Ready {
                    vendor: GpuVendor::Amd,
                    devices: p.devices().len(),
                });
                probes.push(Box::new(p));
            }
            Err(status) => statuses.push(status),
        }
        GpuDiscovery { probes, statuses }
    }

    /// All cards, numbered as the sampler numbers them (`gpu0`, `gpu1`, …).
    pub fn devices(&self) -> Vec<GpuInfo> {
        self.probes
            .iter()
            .flat_map(|p| p.devices().iter().cloned())
            .collect()
    }

    /// `None` when at least one GPU was found; otherwise the plain sentence to show the user.
    pub fn no_gpu_reason(&self) -> Option<String> {
        if self.probes.iter().any(|p| !p.devices().is_empty()) {
            return None;
        }
        let why: Vec<String> = self.statuses.iter().map(|s| s.to_string()).collect();
        Some(format!("no GPU present ({})", why.join("; ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_gpu_reason_names_every_vendor() {
        let d = GpuDiscovery {
            probes: Vec::new(),
            statuses: vec![
                ProbeStatus::Unavailable {
                    vendor: GpuVendor::Nvidia,
                    reason: "library not found".into(),
                },
                ProbeStatus::Unavailable {
                    vendor: GpuVendor::Amd,
                    reason: "no amdgpu cards under /sys/class/drm".into(),
                },
            ],
        };
        assert_eq!(
            d.no_gpu_reason().as_deref(),
            Some(
                "no GPU present (NVIDIA: library not found; AMD: no amdgpu cards under /sys/class/drm)"
            )
        );
    }
}
