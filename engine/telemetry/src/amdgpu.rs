//! AMD cards through the amdgpu driver's sysfs files, read directly (no LGPL library).
//!
//! The root is a parameter (normally `/sys/class/drm`) so tests run on fixture trees shaped like
//! real ones. For each `cardN` whose driver is amdgpu this reads `cardN/device/` — the PCI
//! device — and its `hwmon/hwmonM/` directory. Units as the kernel documents them: bytes,
//! millidegrees Celsius, microwatts, Hz (see [`super::amdgpu_files`]). Cards are named by their
//! PCI ids (`vendor`, `device`, `revision`, `subsystem_*`; see [`super::pci_names`]):
//! `AMD Radeon RX 7900 GRE`. The watched process's VRAM on each card comes from its DRM
//! fdinfo ([`super::amdgpu_fdinfo`]), matched to the card by PCI address.

use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use super::amdgpu_files::{parse_dpm_table, parse_int, parse_power_profile};
use super::gpu::{
    GpuInfo, GpuProbe, GpuProcess, GpuProcessKind, GpuSample, GpuVendor, ProbeStatus, process_name,
    sort_processes,
};
use super::identity::PciBusId;
use super::pci_names::{GpuName, NameDatabases, NameLevel, PciIds, gpu_name};

/// PCI vendor id of AMD/ATI.
const AMD_VENDOR: &str = "0x1002";

/// Reads every amdgpu card under a DRM class directory.
pub struct AmdGpuProbe {
    cards: Vec<AmdCard>,
    devices: Vec<GpuInfo>,
    /// Whose VRAM to report, and where its fdinfo is (`/proc`; tests give a fixture tree).
    watched: Watched,
    /// Samples taken: the processes on each card every [`PROCESSES_EVERY`]th.
    ticks: u64,
}

/// The processes using a card are listed every this many samples: it reads every process's
/// fdinfo under `/proc`, much more than the card's own files.
pub const PROCESSES_EVERY: u64 = 5;

/// The process whose per-card VRAM the probe reports.
#[derive(Debug, Clone)]
struct Watched {
    proc_root: PathBuf,
    pid: u32,
}

#[derive(Debug, Clone)]
struct AmdCard {
    /// `card1`, for messages.
    name: String,
    /// `…/card1/device`.
    device: PathBuf,
    /// `…/card1/device/hwmon/hwmonN`, if the driver registered one.
    hwmon: Option<PathBuf>,
    /// `0000:03:00.0`: what the DRM fdinfo of a process using this card names it by.
    pci_bus_id: Option<String>,
}

/// What reading one sysfs file gave.
enum FileRead {
    Missing,
    Text(String),
    Problem(String),
}

impl AmdCard {
    fn read(&self, dir: &Path, file: &str) -> FileRead {
        match fs::read_to_string(dir.join(file)) {
            Ok(t) => FileRead::Text(t),
            Err(e) if e.kind() == ErrorKind::NotFound => FileRead::Missing,
            Err(e) => FileRead::Problem(format!("{}: {e}", self.describe(dir, file))),
        }
    }

    fn describe(&self, dir: &Path, file: &str) -> String {
        let rel = dir
            .strip_prefix(self.device.parent().unwrap_or(self.device.as_path()))
            .unwrap_or(dir);
        format!("{}/{}/{file}", self.name, rel.display())
    }

    /// Reads a whole-number file; missing → `None` silently, garbage → `None` and a problem line.
    fn int(&self, dir: &Path, file: &str, problems: &mut Vec<String>) -> Option<u64> {
        match self.read(dir, file) {
            FileRead::Missing => None,
            FileRead::Problem(p) => {
                problems.push(p);
                None
            }
            FileRead::Text(t) => match parse_int(&t) {
                Ok(v) => Some(v),
                Err(e) => {
                    problems.push(format!("{}: {e}", self.describe(dir, file)));
                    None
                }
            },
        }
    }

    fn text(&self, dir: &Path, file: &str, problems: &mut Vec<String>) -> Option<String> {
        match self.read(dir, file) {
            FileRead::Missing => None,
            FileRead::Problem(p) => {
                problems.push(p);
                None
            }
            FileRead::Text(t) => Some(t),
        }
    }

    /// The processes with a DRM client on this card, with their VRAM and names.
    fn processes(&self, watched: &Watched) -> Option<Vec<GpuProcess>> {
        let pdev = self.pci_bus_id.as_deref()?;
        let mut list: Vec<GpuProcess> =
            super::amdgpu_fdinfo::card_clients(&watched.proc_root, pdev)
                .into_iter()
                .map(|(pid, bytes)| GpuProcess {
                    pid,
                    name: process_name(&watched.proc_root, pid),
                    used_bytes: Some(bytes),
                    kind: GpuProcessKind::Drm,
                })
                .collect();
        sort_processes(&mut list);
        Some(list)
    }

    fn sample(&self, watched: &Watched) -> GpuSample {
        let mut p = Vec::new();
        let dev = self.device.as_path();
        // A runtime-suspended card (a laptop's idle dGPU, a second card) is not read: reading
        // its sensors would wake it, and newer kernels answer EPERM every tick.
        if fs::read_to_string(dev.join("power/runtime_status"))
            .is_ok_and(|s| s.trim() == "suspended")
        {
            return GpuSample::default();
        }
        let pct = |v: u64| v as f64;
        let mut s = GpuSample {
            util_pct: self.int(dev, "gpu_busy_percent", &mut p).map(pct),
            mem_util_pct: self.int(dev, "mem_busy_percent", &mut p).map(pct),
            mem_used_bytes: self.int(dev, "mem_info_vram_used", &mut p),
            mem_total_bytes: self.int(dev, "mem_info_vram_total", &mut p),
            process_mem_used_bytes: self.pci_bus_id.as_deref().and_then(|pdev| {
                super::amdgpu_fdinfo::process_vram(&watched.proc_root, watched.pid, pdev)
            }),
            ..Default::default()
        };
        s.perf_level = self
            .text(dev, "power_dpm_force_performance_level", &mut p)
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty());
        if let Some(t) = self.text(dev, "pp_power_profile_mode", &mut p) {
            s.power_profile = parse_power_profile(&t);
        }
        let dpm = |file: &str, p: &mut Vec<String>| {
            let text = self.text(dev, file, p)?;
            match parse_dpm_table(&text) {
                Ok(t) => Some(t),
                Err(e) => {
                    p.push(format!("{}: {e}", self.describe(dev, file)));
                    None
                }
            }
        };
        let sclk = dpm("pp_dpm_sclk", &mut p);
        let mclk = dpm("pp_dpm_mclk", &mut p);
        if let Some(hw) = self.hwmon.as_deref() {
            self.read_hwmon(hw, &mut s, &mut p);
        }
        // hwmon's freqN_input is the measured clock; the DPM table's starred level is the
        // fallback on kernels without it.
        if let Some(t) = &sclk {
            s.sm_clock_max_mhz = Some(t.max_mhz());
            s.sm_clock_mhz = s.sm_clock_mhz.or(t.current_mhz());
        }
        if let Some(t) = &mclk {
            s.mem_clock_max_mhz = Some(t.max_mhz());
            s.mem_clock_mhz = s.mem_clock_mhz.or(t.current_mhz());
        }
        s.problems = p;
        s
    }

    fn read_hwmon(&self, hw: &Path, s: &mut GpuSample, p: &mut Vec<String>) {
        // Temperatures: every tempN_input, named by tempN_label (amdgpu: edge, junction, mem).
        let mut temps: Vec<u32> = fs::read_dir(hw)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                name.strip_prefix("temp")?
                    .strip_suffix("_input")?
                    .parse()
                    .ok()
            })
            .collect();
        temps.sort_unstable();
        for n in temps {
            let Some(milli) = self.int(hw, &format!("temp{n}_input"), p) else {
                continue;
            };
            let c = milli as f64 / 1000.0;
            let label = self
                .text(hw, &format!("temp{n}_label"), p)
                .map(|l| l.trim().to_ascii_lowercase());
            match (label.as_deref(), n) {
                (Some("edge"), _) | (None, 1) => s.temp_c = Some(c),
                (Some("junction"), _) => s.temp_junction_c = Some(c),
                (Some("mem"), _) => s.temp_mem_c = Some(c),
                _ => {}
            }
        }
        // Power: RDNA3 on recent kernels has only power1_input (instantaneous); older ones
        // power1_average. Both are microwatts.
        let uw = |v: u64| v as f64 / 1e6;
        s.power_w = self
            .int(hw, "power1_average", p)
            .or_else(|| self.int(hw, "power1_input", p))
            .map(uw);
        s.power_limit_w = self.int(hw, "power1_cap", p).map(uw);
        // Clocks in Hz; freq1 is sclk and freq2 mclk unless the labels say otherwise.
        for n in [1, 2] {
            let Some(hz) = self.int(hw, &format!("freq{n}_input"), p) else {
                continue;
            };
            let mhz = hz as f64 / 1e6;
            let label = self
                .text(hw, &format!("freq{n}_label"), p)
                .map(|l| l.trim().to_ascii_lowercase());
            match (label.as_deref(), n) {
                (Some("sclk"), _) | (None, 1) => s.sm_clock_mhz = Some(mhz),
                (Some("mclk"), _) | (None, 2) => s.mem_clock_mhz = Some(mhz),
                _ => {}
            }
        }
        // pwm1 is the fan duty cycle, 0–255 (hwmon sysfs interface).
        s.fan_pct = self
            .int(hw, "pwm1", p)
            .map(|v| (v.min(255) as f64) * 100.0 / 255.0);
    }
}

impl AmdGpuProbe {
    /// Finds the amdgpu cards under `drm_root`, named through the system's name databases
    /// (`pci.ids`, libdrm's `amdgpu.ids`) and the built-in table; the error is the state to
    /// show the user.
    pub fn open(drm_root: &Path) -> Result<AmdGpuProbe, ProbeStatus> {
        AmdGpuProbe::open_with(drm_root, &NameDatabases::system())
    }

    /// [`AmdGpuProbe::open`] with the name databases given (tests: the table alone, or fixture
    /// files).
    pub fn open_with(drm_root: &Path, names: &NameDatabases) -> Result<AmdGpuProbe, ProbeStatus> {
        let unavailable = |reason: String| ProbeStatus::Unavailable {
            vendor: GpuVendor::Amd,
            reason,
        };
        let entries = fs::read_dir(drm_root).map_err(|e| {
            unavailable(if e.kind() == ErrorKind::NotFound {
                format!("no amdgpu cards ({} does not exist)", drm_root.display())
            } else {
                format!("cannot list {}: {e}", drm_root.display())
            })
        })?;
        let mut numbered: Vec<(u32, String)> = entries
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                // `card1` but not the connectors `card1-DP-1` or render nodes `renderD128`.
                let n: u32 = name.strip_prefix("card")?.parse().ok()?;
                Some((n, name))
            })
            .collect();
        numbered.sort_unstable();
        let mut cards = Vec::new();
        let mut devices = Vec::new();
        for (_, name) in numbered {
            let device = drm_root.join(&name).join("device");
            let uevent = fs::read_to_string(device.join("uevent")).unwrap_or_default();
            let field = |key: &str| {
                uevent.lines().find_map(|l| {
                    l.strip_prefix(key)
                        .and_then(|r| r.strip_prefix('='))
                        .map(str::trim)
                })
            };
            let vendor = fs::read_to_string(device.join("vendor")).unwrap_or_default();
            let is_amdgpu = match field("DRIVER") {
                Some(driver) => driver == "amdgpu",
                None => vendor.trim() == AMD_VENDOR,
            };
            if !is_amdgpu {
                continue;
            }
            let pci_bus_id = field("PCI_SLOT_NAME")
                .and_then(|s| s.parse::<PciBusId>().ok())
                .or_else(|| {
                    // Real sysfs: `device` is a symlink to the PCI device directory.
                    fs::canonicalize(&device)
                        .ok()?
                        .file_name()?
                        .to_str()?
                        .parse()
                        .ok()
                });
            let product = fs::read_to_string(device.join("product_name"))
                .map(|s| s.trim().to_string())
                .unwrap_or_default();
            // sysfs's id files, else (and for a board the files lack) the uevent's ids.
            let from_uevent = PciIds::from_uevent(&uevent);
            let ids = match PciIds::from_sysfs(&device) {
                Ok(mut ids) => {
                    if ids.subsystem.is_none() {
                        ids.subsystem = from_uevent.and_then(|u| u.subsystem);
                    }
                    Some(ids)
                }
                Err(_) => from_uevent,
            };
            let named = ids.as_ref().and_then(|ids| gpu_name(ids, names));
            let gpu_name = card_name(named, &product, ids.as_ref(), &name);
            let hwmon = first_hwmon(&device.join("hwmon"));
            let card = AmdCard {
                name: name.clone(),
                device,
                hwmon,
                pci_bus_id: pci_bus_id.map(|b| b.to_string()),
            };
            let mut ignored = Vec::new();
            devices.push(GpuInfo {
                vendor: GpuVendor::Amd,
                name: gpu_name,
                pci_bus_id,
                uuid: None,
                mem_total_bytes: card.int(&card.device, "mem_info_vram_total", &mut ignored),
                driver: Some(amdgpu_driver(&card.device)),
            });
            cards.push(card);
        }
        if cards.is_empty() {
            return Err(unavailable(format!(
                "no amdgpu cards under {}",
                drm_root.display()
            )));
        }
        Ok(AmdGpuProbe {
            cards,
            devices,
            watched: Watched {
                proc_root: PathBuf::from("/proc"),
                pid: std::process::id(),
            },
            ticks: 0,
        })
    }

    /// Reports the VRAM of `pid` instead of this process (for `monitor --pid`).
    pub fn watch_pid(&mut self, pid: u32) {
        self.watched.pid = pid;
    }

    /// Reads processes' fdinfo under `proc_root` instead of `/proc` (tests: a fixture tree).
    pub fn with_proc_root(mut self, proc_root: impl Into<PathBuf>) -> Self {
        self.watched.proc_root = proc_root.into();
        self
    }
}

/// What to call a card: its marketing name where its PCI ids tell it exactly (revision or
/// board), else the board's `product_name` where the driver has one, else the name its device
/// id alone gives, else its chip with its ids (`AMD Navi 31 (1002:744c rev c9)`), else its ids
/// (`AMD GPU 1002:744c (card1)`).
fn card_name(named: Option<GpuName>, product: &str, ids: Option<&PciIds>, card: &str) -> String {
    match (named, ids) {
        (Some(n), _) if n.level <= NameLevel::Subsystem => n.name,
        _ if !product.is_empty() => product.to_owned(),
        (Some(n), _) if n.names_the_card() => n.name,
        (Some(n), Some(ids)) => format!("{} ({ids})", n.name),
        (_, Some(ids)) => format!("AMD GPU {:04x}:{:04x} ({card})", ids.vendor, ids.device),
        (_, None) => format!("AMD GPU ({card})"),
    }
}

/// The driver's name and version: `cardN/device/driver/module/version` (real sysfs: the
/// device's `driver` links to the PCI driver, whose `module` links to `/sys/module/amdgpu`)
/// exists for a DKMS-built driver; the in-kernel driver has none, so the kernel release names
/// it instead.
fn amdgpu_driver(device: &Path) -> String {
    let read = |p: &Path| {
        fs::read_to_string(p)
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
    };
    if let Some(v) = read(&device.join("driver/module/version")) {
        return format!("amdgpu {v}");
    }
    match read(Path::new("/proc/sys/kernel/osrelease")) {
        Some(kernel) => format!("amdgpu (in-kernel, Linux {kernel})"),
        None => "amdgpu (in-kernel)".into(),
    }
}

/// The card's hwmon directory: the one named `amdgpu`, else the first.
fn first_hwmon(dir: &Path) -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("hwmon"))
        })
        .collect();
    dirs.sort();
    let named_amdgpu = dirs
        .iter()
        .find(|d| fs::read_to_string(d.join("name")).is_ok_and(|n| n.trim() == "amdgpu"));
    named_amdgpu.cloned().or_else(|| dirs.into_iter().next())
}

impl GpuProbe for AmdGpuProbe {
    fn devices(&self) -> &[GpuInfo] {
        &self.devices
    }
    fn split(self: Box<Self>) -> Vec<Box<dyn GpuProbe>> {
        let watched = self.watched;
        self.cards
            .into_iter()
            .zip(self.devices)
            .map(|(card, info)| {
                Box::new(AmdGpuProbe {
                    cards: vec![card],
                    devices: vec![info],
                    watched: watched.clone(),
                    ticks: 0,
                }) as Box<dyn GpuProbe>
            })
            .collect()
    }

    fn sample(&mut self) -> Vec<GpuSample> {
        let list = self.ticks.is_multiple_of(PROCESSES_EVERY);
        self.ticks += 1;
        self.cards
            .iter()
            .map(|c| {
                let mut s = c.sample(&self.watched);
                if list {
                    s.processes = c.processes(&self.watched);
                }
                s
            })
            .collect()
    }
}
