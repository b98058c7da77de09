//! Marketing names of GPUs from their PCI ids: `AMD Radeon RX 7900 GRE`, not `1002:744c`.
//!
//! One PCI device id often covers several cards: Navi 31 (`1002:744c`) is the RX 7900 XTX,
//! 7900 XT, 7900 GRE and 7900M. AMD tells them apart by the PCI revision (what Mesa and libdrm
//! name the card by), board makers by their subsystem id. Names are looked up most specific
//! first, and a run-time database before the built-in [`TABLE`] at each step:
//!
//! 1. by revision: libdrm's `amdgpu.ids` (`744C,\tCE,\tAMD Radeon RX 7900 GRE`) where it is
//!    installed, then the table;
//! 2. by subsystem: a `pci.ids` subsystem line (`1da2 475e  PULSE RX 7900 GRE`) that names
//!    exactly one of the cards its device line lists, then the table;
//! 3. by device: a `pci.ids` device line whose bracket names one card
//!    (`73ff  Navi 23 [Radeon RX 6600]`), then the table;
//! 4. the chip's code name (`AMD Navi 31`), which names no card.
//!
//! A database that is absent or unreadable is skipped: names are best effort, and the caller
//! keeps its own fallback (`AMD GPU 1002:744c (card1)`).

use std::fmt;
use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

/// PCI vendor id of AMD/ATI.
pub const VENDOR_AMD: u16 = 0x1002;
/// PCI vendor id of NVIDIA.
pub const VENDOR_NVIDIA: u16 = 0x10de;

/// Where distributions install `pci.ids` (Debian's `pci.ids` package: the first; Fedora's and
/// Arch's `hwdata`: the second).
pub const PCI_IDS_PATHS: &[&str] = &[
    "/usr/share/misc/pci.ids",
    "/usr/share/hwdata/pci.ids",
    "/usr/share/pci.ids",
];
/// Where libdrm installs `amdgpu.ids` (Debian's `libdrm-common`).
pub const AMDGPU_IDS_PATHS: &[&str] = &[
    "/usr/share/libdrm/amdgpu.ids",
    "/opt/amdgpu/share/libdrm/amdgpu.ids",
];

/// A PCI id file of the device that could not be read or parsed.
#[derive(Debug, thiserror::Error)]
pub enum PciIdError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not a PCI id: {text:?}")]
    Parse { path: PathBuf, text: String },
}

/// The ids a PCI device reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PciIds {
    pub vendor: u16,
    pub device: u16,
    /// `device/revision`: what tells AMD's cards on one chip apart.
    pub revision: Option<u8>,
    /// `(subsystem_vendor, subsystem_device)`: the board maker and its board.
    pub subsystem: Option<(u16, u16)>,
}

impl fmt::Display for PciIds {
    /// `1002:744c rev ce` (the spelling of `lspci -nn`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04x}:{:04x}", self.vendor, self.device)?;
        if let Some(r) = self.revision {
            write!(f, " rev {r:02x}")?;
        }
        Ok(())
    }
}

impl PciIds {
    /// Reads a PCI device directory (`/sys/class/drm/card1/device`): `vendor` and `device` must
    /// be there; `revision`, `subsystem_vendor` and `subsystem_device` may be missing (then
    /// `None`), but not malformed.
    pub fn from_sysfs(device_dir: &Path) -> Result<PciIds, PciIdError> {
        let read = |file: &str| -> Result<Option<u32>, PciIdError> {
            let path = device_dir.join(file);
            match fs::read_to_string(&path) {
                Ok(text) => parse_hex(&text)
                    .map(Some)
                    .ok_or(PciIdError::Parse { path, text }),
                Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
                Err(source) => Err(PciIdError::Read { path, source }),
            }
        };
        let required = |file: &str| -> Result<u32, PciIdError> {
            read(file)?.ok_or_else(|| PciIdError::Read {
                path: device_dir.join(file),
                source: ErrorKind::NotFound.into(),
            })
        };
        let narrow16 = |file: &str, v: u32| -> Result<u16, PciIdError> {
            u16::try_from(v).map_err(|_| PciIdError::Parse {
                path: device_dir.join(file),
                text: format!("{v:#x}"),
            })
        };
        let vendor = narrow16("vendor", required("vendor")?)?;
        let device = narrow16("device", required("device")?)?;
        let revision = match read("revision")? {
            Some(v) => Some(u8::try_from(v).map_err(|_| PciIdError::Parse {
                path: device_dir.join("revision"),
                text: format!("{v:#x}"),
            })?),
            None => None,
        };
        let subsystem = match (read("subsystem_vendor")?, read("subsystem_device")?) {
            (Some(v), Some(d)) => Some((
                narrow16("subsystem_vendor", v)?,
                narrow16("subsystem_device", d)?,
            )),
            _ => None,
        };
        Ok(PciIds {
            vendor,
            device,
            revision,
            subsystem,
        })
    }

    /// The ids a `uevent` file gives (`PCI_ID=1002:744C`, `PCI_SUBSYS_ID=1DA2:475E`): no
    /// revision. `None` without a well-formed `PCI_ID`.
    pub fn from_uevent(uevent: &str) -> Option<PciIds> {
        let field = |key: &str| {
            uevent.lines().find_map(|l| {
                l.trim()
                    .strip_prefix(key)
                    .and_then(|r| r.strip_prefix('='))
                    .map(str::trim)
            })
        };
        let pair = |s: &str| {
            let (a, b) = s.split_once(':')?;
            Some((
                u16::from_str_radix(a, 16).ok()?,
                u16::from_str_radix(b, 16).ok()?,
            ))
        };
        let (vendor, device) = pair(field("PCI_ID")?)?;
        Some(PciIds {
            vendor,
            device,
            revision: None,
            subsystem: field("PCI_SUBSYS_ID").and_then(pair),
        })
    }

    /// NVML's packed ids: `pci_device_id` is `device << 16 | vendor`, the subsystem id
    /// `subsystem_device << 16 | subsystem_vendor`.
    pub fn from_nvml(pci_device_id: u32, pci_sub_system_id: Option<u32>) -> PciIds {
        let split = |v: u32| ((v & 0xffff) as u16, (v >> 16) as u16);
        let (vendor, device) = split(pci_device_id);
        PciIds {
            vendor,
            device,
            revision: None,
            subsystem: pci_sub_system_id.map(split),
        }
    }
}

/// `0x744c`, `744C`, `0xce\n` → the number.
fn parse_hex(text: &str) -> Option<u32> {
    let t = text.trim();
    let digits = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .unwrap_or(t);
    if digits.is_empty() || digits.len() > 8 {
        return None;
    }
    u32::from_str_radix(digits, 16).ok()
}

/// How exactly a name identifies the card, most specific first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum NameLevel {
    /// Device id and revision: the card itself.
    Revision,
    /// Device id and board: the card itself.
    Subsystem,
    /// Device id alone, where it names one card.
    Device,
    /// Only the chip's code name: the card is one of several.
    Chip,
}

/// Where a name came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NameSource {
    /// libdrm's `amdgpu.ids` at this path.
    AmdgpuIds(PathBuf),
    /// The `pci.ids` database at this path.
    PciIds(PathBuf),
    /// The built-in [`TABLE`].
    Table,
}

/// A card's name and how it was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuName {
    /// `AMD Radeon RX 7900 GRE`; for [`NameLevel::Chip`] the code name, `AMD Navi 31`.
    pub name: String,
    pub level: NameLevel,
    pub source: NameSource,
}

impl GpuName {
    /// Whether the name is the card's (not just its chip's).
    pub fn names_the_card(&self) -> bool {
        self.level < NameLevel::Chip
    }
}

/// The name databases to consult besides the built-in table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NameDatabases {
    pub pci_ids: Option<PathBuf>,
    pub amdgpu_ids: Option<PathBuf>,
}

impl NameDatabases {
    /// The system's: the first of [`PCI_IDS_PATHS`] and of [`AMDGPU_IDS_PATHS`] that exists.
    pub fn system() -> NameDatabases {
        let first = |paths: &[&str]| paths.iter().map(PathBuf::from).find(|p| p.is_file());
        NameDatabases {
            pci_ids: first(PCI_IDS_PATHS),
            amdgpu_ids: first(AMDGPU_IDS_PATHS),
        }
    }

    /// None: the built-in table alone (tests, and machines without the databases).
    pub fn table_only() -> NameDatabases {
        NameDatabases::default()
    }
}

/// What a table row is keyed on besides vendor and device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    Revision(u8),
    Subsystem(u16, u16),
    Device,
    /// The row names the chip (`Navi 31`), not a card.
    Chip,
}

/// One row of the built-in table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub vendor: u16,
    pub device: u16,
    pub key: Key,
    pub name: &'static str,
}

const fn rev(device: u16, revision: u8, name: &'static str) -> Entry {
    Entry {
        vendor: VENDOR_AMD,
        device,
        key: Key::Revision(revision),
        name,
    }
}

const fn board(vendor: u16, device: u16, sv: u16, sd: u16, name: &'static str) -> Entry {
    Entry {
        vendor,
        device,
        key: Key::Subsystem(sv, sd),
        name,
    }
}

const fn chip(vendor: u16, device: u16, name: &'static str) -> Entry {
    Entry {
        vendor,
        device,
        key: Key::Chip,
        name,
    }
}

const fn nv(device: u16, name: &'static str) -> Entry {
    Entry {
        vendor: VENDOR_NVIDIA,
        device,
        key: Key::Device,
        name,
    }
}

const XTX: &str = "AMD Radeon RX 7900 XTX";
const GRE: &str = "AMD Radeon RX 7900 GRE";

/// The cards the bundled presets target (RX 7900 GRE, RTX 4080 and 4080 Laptop) and their
/// neighbours (the other RDNA2/RDNA3/RDNA4 and Ada/Blackwell cards an owner is likely to have).
///
/// Sources, copied as they stood:
/// - AMD rows by revision: libdrm's `data/amdgpu.ids` (mesa/drm, the file Mesa's RADV names
///   cards by; commit 82f74e7a of 2026-07-28): `744C, C8 XTX / CC XT / CE GRE / CF 7900M`, …;
/// - AMD rows by subsystem and every code name: `pci.ids` version 2026.08.22
///   (pciutils/pciids): `744c  Navi 31 [Radeon RX 7900 XT/7900 XTX/7900 GRE/7900M]` and its
///   board lines (`1da2 475e  PULSE RX 7900 GRE`, …; `1002 0e3b` is left out: that XFX board id
///   is shared by an XTX and a GRE);
/// - NVIDIA rows: the same `pci.ids`, in NVML's spelling (`NVIDIA GeForce RTX 4080 Laptop GPU`
///   for `AD104M [GeForce RTX 4080 Max-Q / Mobile]`). NVML names NVIDIA cards itself; these
///   rows serve only when it cannot.
pub const TABLE: &[Entry] = &[
    // RDNA3, Navi 31.
    chip(VENDOR_AMD, 0x744c, "Navi 31"),
    rev(0x744c, 0xc8, XTX),
    rev(0x744c, 0xcc, "AMD Radeon RX 7900 XT"),
    rev(0x744c, 0xce, GRE),
    rev(0x744c, 0xcf, "AMD Radeon RX 7900M"),
    board(VENDOR_AMD, 0x744c, 0x1043, 0x0506, XTX),
    board(VENDOR_AMD, 0x744c, 0x148c, 0x2425, GRE),
    board(VENDOR_AMD, 0x744c, 0x1849, 0x5304, XTX),
    board(VENDOR_AMD, 0x744c, 0x1da2, 0x471e, XTX),
    board(VENDOR_AMD, 0x744c, 0x1da2, 0x475e, GRE),
    board(VENDOR_AMD, 0x744c, 0x1da2, 0xe471, XTX),
    board(VENDOR_AMD, 0x744c, 0x1eae, 0x7901, XTX),
    board(VENDOR_AMD, 0x744c, 0x1eae, 0x790a, GRE),
    chip(VENDOR_AMD, 0x7448, "Navi 31"),
    rev(0x7448, 0x00, "AMD Radeon Pro W7900"),
    chip(VENDOR_AMD, 0x745e, "Navi 31"),
    rev(0x745e, 0xcc, "AMD Radeon Pro W7800"),
    // RDNA3, Navi 32 and 33.
    chip(VENDOR_AMD, 0x747e, "Navi 32"),
    rev(0x747e, 0xc8, "AMD Radeon RX 7800 XT"),
    rev(0x747e, 0xd8, "AMD Radeon RX 7800M"),
    rev(0x747e, 0xdb, "AMD Radeon RX 7700"),
    rev(0x747e, 0xff, "AMD Radeon RX 7700 XT"),
    chip(VENDOR_AMD, 0x7480, "Navi 33"),
    rev(0x7480, 0xc0, "AMD Radeon RX 7600 XT"),
    rev(0x7480, 0xc2, "AMD Radeon RX 7650 GRE"),
    rev(0x7480, 0xcf, "AMD Radeon RX 7600"),
    // RDNA2.
    chip(VENDOR_AMD, 0x73bf, "Navi 21"),
    rev(0x73bf, 0xc0, "AMD Radeon RX 6900 XT"),
    rev(0x73bf, 0xc1, "AMD Radeon RX 6800 XT"),
    rev(0x73bf, 0xc3, "AMD Radeon RX 6800"),
    chip(VENDOR_AMD, 0x73af, "Navi 21"),
    rev(0x73af, 0xc0, "AMD Radeon RX 6900 XT"),
    chip(VENDOR_AMD, 0x73a5, "Navi 21"),
    rev(0x73a5, 0xc0, "AMD Radeon RX 6950 XT"),
    chip(VENDOR_AMD, 0x73df, "Navi 22"),
    rev(0x73df, 0xc0, "AMD Radeon RX 6750 XT"),
    rev(0x73df, 0xc1, "AMD Radeon RX 6700 XT"),
    rev(0x73df, 0xc5, "AMD Radeon RX 6700 XT"),
    rev(0x73df, 0xdf, "AMD Radeon RX 6700"),
    rev(0x73df, 0xff, "AMD Radeon RX 6700"),
    chip(VENDOR_AMD, 0x73ff, "Navi 23"),
    rev(0x73ff, 0xc1, "AMD Radeon RX 6600 XT"),
    rev(0x73ff, 0xc7, "AMD Radeon RX 6600"),
    // RDNA4.
    chip(VENDOR_AMD, 0x7550, "Navi 48"),
    rev(0x7550, 0xc0, "AMD Radeon RX 9070 XT"),
    rev(0x7550, 0xc2, "AMD Radeon RX 9070 GRE"),
    rev(0x7550, 0xc3, "AMD Radeon RX 9070"),
    chip(VENDOR_AMD, 0x7590, "Navi 44"),
    rev(0x7590, 0xc0, "AMD Radeon RX 9060 XT"),
    rev(0x7590, 0xc7, "AMD Radeon RX 9060"),
    // NVIDIA Ada and Blackwell.
    nv(0x2704, "NVIDIA GeForce RTX 4080"),
    nv(0x2702, "NVIDIA GeForce RTX 4080 SUPER"),
    nv(0x2703, "NVIDIA GeForce RTX 4080 SUPER"),
    nv(0x27a0, "NVIDIA GeForce RTX 4080 Laptop GPU"),
    nv(0x27e0, "NVIDIA GeForce RTX 4080 Laptop GPU"),
    nv(0x2684, "NVIDIA GeForce RTX 4090"),
    nv(0x2717, "NVIDIA GeForce RTX 4090 Laptop GPU"),
    nv(0x2757, "NVIDIA GeForce RTX 4090 Laptop GPU"),
    nv(0x2705, "NVIDIA GeForce RTX 4070 Ti SUPER"),
    nv(0x2782, "NVIDIA GeForce RTX 4070 Ti"),
    nv(0x2786, "NVIDIA GeForce RTX 4070"),
    nv(0x2c02, "NVIDIA GeForce RTX 5080"),
    nv(0x2b85, "NVIDIA GeForce RTX 5090"),
];

/// The card's name from its PCI ids, or `None` when neither the databases nor the table know
/// the device at all.
pub fn gpu_name(ids: &PciIds, databases: &NameDatabases) -> Option<GpuName> {
    let table = |key: Key| {
        TABLE
            .iter()
            .find(|e| e.vendor == ids.vendor && e.device == ids.device && e.key == key)
            .map(|e| GpuName {
                name: e.name.to_owned(),
                level: match key {
                    Key::Revision(_) => NameLevel::Revision,
                    Key::Subsystem(..) => NameLevel::Subsystem,
                    Key::Device => NameLevel::Device,
                    Key::Chip => NameLevel::Chip,
                },
                source: NameSource::Table,
            })
    };
    // 1. By revision.
    if let Some(revision) = ids.revision {
        if ids.vendor == VENDOR_AMD
            && let Some(path) = &databases.amdgpu_ids
            && let Some(text) = read_database(path)
            && let Some(name) = amdgpu_ids_lookup(&text, ids.device, revision)
        {
            return Some(GpuName {
                name,
                level: NameLevel::Revision,
                source: NameSource::AmdgpuIds(path.clone()),
            });
        }
        if let Some(n) = table(Key::Revision(revision)) {
            return Some(n);
        }
    }
    let pci = databases.pci_ids.as_ref().and_then(|path| {
        let text = read_database(path)?;
        Some((path.clone(), pci_ids_lookup(&text, ids)?))
    });
    let from_pci = |name: String, level: NameLevel| {
        pci.as_ref().map(|(path, _)| GpuName {
            name,
            level,
            source: NameSource::PciIds(path.clone()),
        })
    };
    let vendor = vendor_word(ids.vendor);
    // 2. By board.
    if let Some((_, found)) = &pci
        && let Some(board) = &found.subsystem
        && let Some(card) = card_of_board(&found.device, board)
    {
        return from_pci(prefixed(vendor, &card), NameLevel::Subsystem);
    }
    if let Some((sv, sd)) = ids.subsystem
        && let Some(n) = table(Key::Subsystem(sv, sd))
    {
        return Some(n);
    }
    // 3. By device.
    if let Some((_, found)) = &pci
        && let [card] = cards_of_device(&found.device).as_slice()
    {
        return from_pci(prefixed(vendor, card), NameLevel::Device);
    }
    if let Some(n) = table(Key::Device) {
        return Some(n);
    }
    // 4. The chip.
    if let Some((_, found)) = &pci {
        let code = chip_of_device(&found.device);
        if !code.is_empty() {
            return from_pci(prefixed(vendor, code), NameLevel::Chip);
        }
    }
    table(Key::Chip).map(|mut n| {
        n.name = prefixed(vendor, &n.name);
        n
    })
}

fn vendor_word(vendor: u16) -> Option<&'static str> {
    match vendor {
        VENDOR_AMD => Some("AMD"),
        VENDOR_NVIDIA => Some("NVIDIA"),
        _ => None,
    }
}

/// `AMD` + `Radeon RX 6600`; a name that already starts with the vendor stays as it is.
fn prefixed(vendor: Option<&str>, name: &str) -> String {
    match vendor {
        Some(v)
            if !name
                .to_ascii_lowercase()
                .starts_with(&v.to_ascii_lowercase()) =>
        {
            format!("{v} {name}")
        }
        _ => name.to_owned(),
    }
}

/// A database file's text; absent, unreadable or not text → `None` (names are best effort).
fn read_database(path: &Path) -> Option<String> {
    fs::read(path)
        .ok()
        .map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// Looks `device, revision` up in libdrm's `amdgpu.ids`: lines `744C,\tCE,\tAMD Radeon RX 7900
/// GRE` after a version line (`1.0.0`) and `#` comments.
pub fn amdgpu_ids_lookup(text: &str, device: u16, revision: u8) -> Option<String> {
    text.lines().find_map(|line| {
        let line = line.trim();
        if line.starts_with('#') {
            return None;
        }
        let mut parts = line.splitn(3, ',');
        let d = u16::from_str_radix(parts.next()?.trim(), 16).ok()?;
        let r = u8::from_str_radix(parts.next()?.trim(), 16).ok()?;
        let name = parts.next()?.trim();
        (d == device && r == revision && !name.is_empty()).then(|| name.to_owned())
    })
}

/// What `pci.ids` says about one device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PciIdsEntry {
    /// The device line's name: `Navi 31 [Radeon RX 7900 XT/7900 XTX/7900 GRE/7900M]`.
    pub device: String,
    /// The board's subsystem line, where listed: `PULSE RX 7900 GRE`.
    pub subsystem: Option<String>,
}

/// Looks a device and its board up in `pci.ids` text. Its layout: a vendor line at column 0
/// (`1002  Advanced Micro Devices, Inc. [AMD/ATI]`), its devices after one tab
/// (`\t744c  Navi 31 […]`), each device's boards after two (`\t\t1da2 475e  PULSE RX 7900 GRE`),
/// ids in lower-case hex and two spaces before the name; `#` comments; the class lists (`C 03
/// …`) at the end.
pub fn pci_ids_lookup(text: &str, ids: &PciIds) -> Option<PciIdsEntry> {
    let vendor = format!("{:04x}", ids.vendor);
    let device = format!("{:04x}", ids.device);
    let board = ids.subsystem.map(|(v, d)| format!("{v:04x} {d:04x}"));
    let mut in_vendor = false;
    let mut found: Option<PciIdsEntry> = None;
    for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix("\t\t") {
            if let (Some(entry), Some(board)) = (found.as_mut(), board.as_deref())
                && let Some(name) = id_line(rest, board)
            {
                entry.subsystem = Some(name.to_owned());
                break;
            }
        } else if let Some(rest) = line.strip_prefix('\t') {
            if found.is_some() {
                break;
            }
            if in_vendor && let Some(name) = id_line(rest, &device) {
                found = Some(PciIdsEntry {
                    device: name.to_owned(),
                    subsystem: None,
                });
            }
        } else {
            if found.is_some() || in_vendor {
                break;
            }
            in_vendor = id_line(line, &vendor).is_some();
        }
    }
    found
}

/// `744c  Navi 31` with `id` = `744c` → `Navi 31`.
fn id_line<'a>(line: &'a str, id: &str) -> Option<&'a str> {
    let rest = line
        .get(..id.len())?
        .eq_ignore_ascii_case(id)
        .then(|| &line[id.len()..])?;
    if !rest.starts_with(char::is_whitespace) {
        return None;
    }
    Some(rest.trim())
}

/// The part of a device line before its bracket: `Navi 31`.
fn chip_of_device(device_line: &str) -> &str {
    device_line.split('[').next().unwrap_or("").trim()
}

/// The cards a device line's bracket lists: `Navi 21 [Radeon RX 6800/6800 XT / 6900 XT]` →
/// `Radeon RX 6800`, `Radeon RX 6800 XT`, `Radeon RX 6900 XT`. A line without a bracket lists
/// none; a bracket whose pieces are not all models (`GeForce RTX 4080 Max-Q / Mobile`) is one
/// card.
pub fn cards_of_device(device_line: &str) -> Vec<String> {
    let Some(start) = device_line.find('[') else {
        return Vec::new();
    };
    let Some(len) = device_line[start + 1..].rfind(']') else {
        return Vec::new();
    };
    let bracket = device_line[start + 1..start + 1 + len].trim();
    if bracket.is_empty() {
        return Vec::new();
    }
    let has_digit = |s: &str| s.chars().any(|c| c.is_ascii_digit());
    let pieces: Vec<&str> = bracket.split('/').map(str::trim).collect();
    if pieces.len() == 1 || pieces.iter().any(|p| !p.split_whitespace().any(has_digit)) {
        return vec![bracket.to_owned()];
    }
    // `Radeon RX` from `Radeon RX 7900 XT`: the words before the first with a digit.
    let words: Vec<&str> = pieces[0].split_whitespace().collect();
    let model_at = words.iter().position(|w| has_digit(w)).unwrap_or(0);
    let prefix = words[..model_at].join(" ");
    let brand = words.first().copied().unwrap_or("");
    pieces
        .iter()
        .enumerate()
        .map(|(i, piece)| {
            let first = piece.split_whitespace().next().unwrap_or("");
            if i == 0 || prefix.is_empty() {
                piece.to_string()
            } else if has_digit(first) {
                format!("{prefix} {piece}")
            } else if first.eq_ignore_ascii_case(brand) {
                piece.to_string()
            } else {
                format!("{brand} {piece}")
            }
        })
        .collect()
}

/// Lower-case words of letters and digits: `RX-79GMERCBR [XFX RX 7900 GRE]` → `rx`,
/// `79gmercbr`, `xfx`, `rx`, `7900`, `gre`.
pub fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_lowercase)
        .collect()
}

/// Whether `needle` occurs in `hay` as consecutive words.
pub fn has_words(hay: &[String], needle: &[&str]) -> bool {
    !needle.is_empty()
        && hay
            .windows(needle.len())
            .any(|w| w.iter().zip(needle).all(|(a, b)| a == b))
}

/// The one card of a device line that a board's name mentions (`PULSE RX 7900 GRE` among the
/// Navi 31 cards → `Radeon RX 7900 GRE`), by the card's model words (`7900 gre`); `None` when
/// it mentions none or several (`RX 7900 XTX / RX 7900 GRE [XFX]`).
fn card_of_board(device_line: &str, board: &str) -> Option<String> {
    let cards = cards_of_device(device_line);
    if cards.len() < 2 {
        return None;
    }
    let board_words = words(board);
    let mut named = cards.iter().filter(|card| {
        let w = words(card);
        let model_at = w
            .iter()
            .position(|x| x.chars().any(|c| c.is_ascii_digit()))
            .unwrap_or(0);
        let model: Vec<&str> = w[model_at..].iter().map(String::as_str).collect();
        has_words(&board_words, &model)
    });
    let one = named.next()?;
    named.next().is_none().then(|| one.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    const NAVI31: &str = "Navi 31 [Radeon RX 7900 XT/7900 XTX/7900 GRE/7900M]";

    fn ids(device: u16, revision: Option<u8>, subsystem: Option<(u16, u16)>) -> PciIds {
        PciIds {
            vendor: VENDOR_AMD,
            device,
            revision,
            subsystem,
        }
    }

    #[test]
    fn navi31_cards_by_revision_from_the_table() {
        let t = NameDatabases::table_only();
        for (r, want) in [
            (0xc8, "AMD Radeon RX 7900 XTX"),
            (0xcc, "AMD Radeon RX 7900 XT"),
            (0xce, "AMD Radeon RX 7900 GRE"),
        ] {
            let n = gpu_name(&ids(0x744c, Some(r), None), &t).unwrap();
            assert_eq!(n.name, want);
            assert_eq!(n.level, NameLevel::Revision);
            assert_eq!(n.source, NameSource::Table);
        }
        // An unknown revision with no board: the chip only, never a guess at the card.
        let n = gpu_name(&ids(0x744c, Some(0xc9), None), &t).unwrap();
        assert_eq!(n.name, "AMD Navi 31");
        assert!(!n.names_the_card());
        // The board tells when the revision does not.
        let n = gpu_name(&ids(0x744c, None, Some((0x1da2, 0x475e))), &t).unwrap();
        assert_eq!(n.name, "AMD Radeon RX 7900 GRE");
        assert_eq!(n.level, NameLevel::Subsystem);
        assert_eq!(gpu_name(&ids(0x1234, Some(0), None), &t), None);
    }

    #[test]
    fn nvidia_by_device() {
        let n = gpu_name(
            &PciIds::from_nvml(0x27e0_10de, Some(0x1234_1043)),
            &NameDatabases::table_only(),
        )
        .unwrap();
        assert_eq!(n.name, "NVIDIA GeForce RTX 4080 Laptop GPU");
        assert_eq!(n.level, NameLevel::Device);
    }

    #[test]
    fn amdgpu_ids_lines() {
        let text = "# List of AMDGPU IDs\n#\n\n1.0.0\n744C,\tC8,\tAMD Radeon RX 7900 XTX\n\
                    744C,\tCE,\tAMD Radeon RX 7900 GRE\n7481,   C7,     AMD Steam Machine\n";
        assert_eq!(
            amdgpu_ids_lookup(text, 0x744c, 0xce).as_deref(),
            Some("AMD Radeon RX 7900 GRE")
        );
        assert_eq!(
            amdgpu_ids_lookup(text, 0x7481, 0xc7).as_deref(),
            Some("AMD Steam Machine")
        );
        assert_eq!(amdgpu_ids_lookup(text, 0x744c, 0xcc), None);
        assert_eq!(amdgpu_ids_lookup("garbage,,\n,\n", 0x744c, 0xcc), None);
    }

    const PCI_IDS: &str = "# pci.ids\n\
        0ffe  Some vendor\n\
        \t744c  Not AMD's\n\
        1002  Advanced Micro Devices, Inc. [AMD/ATI]\n\
        \t73ff  Navi 23 [Radeon RX 6600/6600 XT/6600M]\n\
        \t744c  Navi 31 [Radeon RX 7900 XT/7900 XTX/7900 GRE/7900M]\n\
        \t\t1002 0e3b  RX 7900 XTX / RX 7900 GRE [XFX]\n\
        \t\t1eae 790a  RX-79GMERCBR [XFX RX 7900 GRE]\n\
        \t\t1043 0506  TUF Gaming Radeon RX 7900 XTX OC\n\
        \t7470  Navi 32 [Radeon PRO W7700]\n\
        \t15bf  Phoenix1\n\
        1003  ULSI Systems\n\
        10de  NVIDIA Corporation\n\
        \t27e0  AD104M [GeForce RTX 4080 Max-Q / Mobile]\n\
        C 03  Display controller\n";

    #[test]
    fn pci_ids_device_and_board_lines() {
        let e = pci_ids_lookup(PCI_IDS, &ids(0x744c, None, Some((0x1eae, 0x790a)))).unwrap();
        assert_eq!(e.device, NAVI31);
        assert_eq!(
            e.subsystem.as_deref(),
            Some("RX-79GMERCBR [XFX RX 7900 GRE]")
        );
        let e = pci_ids_lookup(PCI_IDS, &ids(0x744c, None, Some((0x1234, 0x5678)))).unwrap();
        assert_eq!(e.subsystem, None);
        // A device id under another vendor is not this one.
        assert_eq!(pci_ids_lookup(PCI_IDS, &ids(0x1111, None, None)), None);
        let other = PciIds {
            vendor: 0x0ffe,
            ..ids(0x744c, None, None)
        };
        assert_eq!(pci_ids_lookup(PCI_IDS, &other).unwrap().device, "Not AMD's");
    }

    #[test]
    fn a_board_names_one_card_or_none() {
        assert_eq!(
            card_of_board(NAVI31, "RX-79GMERCBR [XFX RX 7900 GRE]").as_deref(),
            Some("Radeon RX 7900 GRE")
        );
        assert_eq!(
            card_of_board(NAVI31, "TUF Gaming Radeon RX 7900 XTX OC").as_deref(),
            Some("Radeon RX 7900 XTX")
        );
        assert_eq!(
            card_of_board(NAVI31, "RX 7900 XTX / RX 7900 GRE [XFX]"),
            None
        );
        assert_eq!(card_of_board(NAVI31, "Radeon Graphics"), None);
    }

    #[test]
    fn device_lines_list_their_cards() {
        assert_eq!(
            cards_of_device(NAVI31),
            [
                "Radeon RX 7900 XT",
                "Radeon RX 7900 XTX",
                "Radeon RX 7900 GRE",
                "Radeon RX 7900M"
            ]
        );
        assert_eq!(
            cards_of_device("Navi 33 [Radeon RX 7600/7600 XT/7600M XT/7600S/7700S / PRO W7600]"),
            [
                "Radeon RX 7600",
                "Radeon RX 7600 XT",
                "Radeon RX 7600M XT",
                "Radeon RX 7600S",
                "Radeon RX 7700S",
                "Radeon PRO W7600"
            ]
        );
        assert_eq!(
            cards_of_device("AD104M [GeForce RTX 4080 Max-Q / Mobile]"),
            ["GeForce RTX 4080 Max-Q / Mobile"]
        );
        assert_eq!(
            cards_of_device("Navi 23 [Radeon RX 6600]"),
            ["Radeon RX 6600"]
        );
        assert!(cards_of_device("Phoenix1").is_empty());
    }

    #[test]
    fn pci_ids_file_then_table() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pci.ids");
        fs::write(&path, PCI_IDS).unwrap();
        let db = NameDatabases {
            pci_ids: Some(path.clone()),
            amdgpu_ids: None,
        };
        // The revision the table knows wins over everything in pci.ids.
        let n = gpu_name(&ids(0x744c, Some(0xc8), Some((0x1eae, 0x790a))), &db).unwrap();
        assert_eq!(n.name, "AMD Radeon RX 7900 XTX");
        // A board line that names one card.
        let n = gpu_name(&ids(0x744c, Some(0xc9), Some((0x1eae, 0x790a))), &db).unwrap();
        assert_eq!(n.name, "AMD Radeon RX 7900 GRE");
        assert_eq!(n.source, NameSource::PciIds(path.clone()));
        // A board line shared by two cards: the table's boards, then the chip.
        let n = gpu_name(&ids(0x744c, None, Some((0x1002, 0x0e3b))), &db).unwrap();
        assert_eq!(n.name, "AMD Navi 31");
        assert_eq!(n.level, NameLevel::Chip);
        // A device line naming one card.
        let n = gpu_name(&ids(0x7470, None, None), &db).unwrap();
        assert_eq!(n.name, "AMD Radeon PRO W7700");
        assert_eq!(n.level, NameLevel::Device);
        let n = gpu_name(&ids(0x15bf, None, None), &db).unwrap();
        assert_eq!(n.name, "AMD Phoenix1");
        assert_eq!(n.level, NameLevel::Chip);
    }

    #[test]
    fn amdgpu_ids_file_before_the_table() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("amdgpu.ids");
        fs::write(
            &path,
            "1.0.0\n744C,\tCE,\tAMD Radeon RX 7900 GRE (from file)\n",
        )
        .unwrap();
        let db = NameDatabases {
            pci_ids: Some(dir.path().join("absent")),
            amdgpu_ids: Some(path.clone()),
        };
        let n = gpu_name(&ids(0x744c, Some(0xce), None), &db).unwrap();
        assert_eq!(n.name, "AMD Radeon RX 7900 GRE (from file)");
        assert_eq!(n.source, NameSource::AmdgpuIds(path));
        // Not in the file: the table.
        let n = gpu_name(&ids(0x744c, Some(0xc8), None), &db).unwrap();
        assert_eq!(n.name, "AMD Radeon RX 7900 XTX");
    }

    #[test]
    fn sysfs_and_uevent_ids() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        fs::write(d.join("vendor"), "0x1002\n").unwrap();
        fs::write(d.join("device"), "0x744c\n").unwrap();
        assert_eq!(
            PciIds::from_sysfs(d).unwrap(),
            ids(0x744c, None, None),
            "revision and subsystem are optional"
        );
        fs::write(d.join("revision"), "0xce\n").unwrap();
        fs::write(d.join("subsystem_vendor"), "0x1da2\n").unwrap();
        fs::write(d.join("subsystem_device"), "0x475e\n").unwrap();
        let got = PciIds::from_sysfs(d).unwrap();
        assert_eq!(got, ids(0x744c, Some(0xce), Some((0x1da2, 0x475e))));
        assert_eq!(got.to_string(), "1002:744c rev ce");
        fs::write(d.join("revision"), "0x1ce\n").unwrap();
        let e = PciIds::from_sysfs(d).unwrap_err();
        assert!(e.to_string().contains("revision"), "{e}");
        fs::write(d.join("device"), "navi\n").unwrap();
        assert!(matches!(
            PciIds::from_sysfs(d),
            Err(PciIdError::Parse { .. })
        ));
        fs::remove_file(d.join("vendor")).unwrap();
        assert!(matches!(
            PciIds::from_sysfs(d),
            Err(PciIdError::Read { .. })
        ));

        let u = "DRIVER=amdgpu\nPCI_ID=1002:744C\nPCI_SUBSYS_ID=1DA2:E471\n";
        assert_eq!(
            PciIds::from_uevent(u),
            Some(ids(0x744c, None, Some((0x1da2, 0xe471))))
        );
        assert_eq!(PciIds::from_uevent("DRIVER=amdgpu\n"), None);
        assert_eq!(PciIds::from_uevent("PCI_ID=zz:1\n"), None);
    }

    #[test]
    fn the_table_is_consistent() {
        for (i, a) in TABLE.iter().enumerate() {
            assert!(!a.name.trim().is_empty());
            for b in &TABLE[i + 1..] {
                assert!(
                    !(a.vendor == b.vendor && a.device == b.device && a.key == b.key),
                    "duplicate row {a:?}"
                );
            }
            if a.key != Key::Chip {
                let v = vendor_word(a.vendor).unwrap();
                assert!(a.name.starts_with(v), "{a:?}");
            }
        }
    }
}
