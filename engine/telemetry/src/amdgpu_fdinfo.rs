//! A process's VRAM on one AMD card, from the DRM fdinfo of its open GPU files.
//!
//! amdgpu has no per-process query in sysfs; the kernel publishes each DRM client's memory in
//! `/proc/<pid>/fdinfo/<fd>` instead (Documentation/gpu/drm-usage-stats.rst):
//!
//! ```text
//! drm-driver:     amdgpu
//! drm-pdev:       0000:03:00.0
//! drm-client-id:  42
//! drm-memory-vram:        1048576 KiB
//! ```
//!
//! One client may be reachable through several descriptors (a `dup`, a fork that kept it), so
//! clients are counted once by `drm-client-id`; a process with two clients on one card (two
//! opened devices) holds the sum. `drm-memory-<region>` is the older key amdgpu still prints;
//! `drm-total-<region>` is the generic one newer kernels add, used where the older is absent.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

/// What one fdinfo file says of a DRM client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrmClient {
    /// The card's PCI address (`drm-pdev`), lower case.
    pub pdev: String,
    pub client_id: u64,
    /// VRAM the client holds, bytes.
    pub vram_bytes: u64,
}

/// Parses one fdinfo file: `None` for a descriptor that is not an amdgpu DRM client, or one
/// that does not say its card, client id or VRAM.
pub fn parse_fdinfo(text: &str) -> Option<DrmClient> {
    let mut driver = None;
    let mut pdev = None;
    let mut client_id = None;
    let mut memory_vram = None;
    let mut total_vram = None;
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match key.trim() {
            "drm-driver" => driver = Some(value),
            "drm-pdev" => pdev = Some(value.to_ascii_lowercase()),
            "drm-client-id" => client_id = value.parse::<u64>().ok(),
            "drm-memory-vram" => memory_vram = parse_size(value),
            "drm-total-vram" => total_vram = parse_size(value),
            _ => {}
        }
    }
    if driver != Some("amdgpu") {
        return None;
    }
    Some(DrmClient {
        pdev: pdev?,
        client_id: client_id?,
        vram_bytes: memory_vram.or(total_vram)?,
    })
}

/// `<uint> [KiB|MiB|GiB]` (drm-usage-stats: no unit means bytes).
fn parse_size(value: &str) -> Option<u64> {
    let mut parts = value.split_whitespace();
    let n: u64 = parts.next()?.parse().ok()?;
    let scale: u64 = match parts.next() {
        None => 1,
        Some("KiB") => 1 << 10,
        Some("MiB") => 1 << 20,
        Some("GiB") => 1 << 30,
        Some(_) => return None,
    };
    n.checked_mul(scale)
}

/// The VRAM `pid` holds on the card at PCI address `pdev` (`0000:03:00.0`), from
/// `<proc_root>/<pid>/fdinfo/*`; `None` when the process has no client on that card or its
/// fdinfo cannot be read.
pub fn process_vram(proc_root: &Path, pid: u32, pdev: &str) -> Option<u64> {
    vram_on(proc_root, pid, &pdev.to_ascii_lowercase())
}

/// Every process with a DRM client on the card at `pdev`, with the VRAM it holds, by pid:
/// `<proc_root>/*/fdinfo/*` read through (processes whose fdinfo may not be read, another
/// user's without privileges, are not seen).
pub fn card_clients(proc_root: &Path, pdev: &str) -> Vec<(u32, u64)> {
    let pdev = pdev.to_ascii_lowercase();
    let Ok(entries) = fs::read_dir(proc_root) else {
        return Vec::new();
    };
    let mut out: Vec<(u32, u64)> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| Some((pid, vram_on(proc_root, pid, &pdev)?)))
        .collect();
    out.sort_unstable();
    out
}

/// [`process_vram`] with `pdev` already in lower case.
fn vram_on(proc_root: &Path, pid: u32, pdev: &str) -> Option<u64> {
    let dir = proc_root.join(pid.to_string()).join("fdinfo");
    let mut clients: BTreeMap<u64, u64> = BTreeMap::new();
    for entry in fs::read_dir(dir).ok()?.flatten() {
        // A descriptor closed since the listing, or one we may not read: not a client of ours.
        let Ok(text) = fs::read_to_string(entry.path()) else {
            continue;
        };
        if let Some(c) = parse_fdinfo(&text).filter(|c| c.pdev == pdev) {
            clients.insert(c.client_id, c.vram_bytes);
        }
    }
    (!clients.is_empty()).then(|| clients.values().sum())
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLIENT: &str = "pos:\t0\nflags:\t02100002\nmnt_id:\t26\nino:\t1055\n\
        drm-driver:\tamdgpu\ndrm-client-id:\t42\ndrm-pdev:\t0000:03:00.0\n\
        drm-memory-vram:\t1048576 KiB\ndrm-memory-gtt: \t2048 KiB\ndrm-memory-cpu: \t0 KiB\n\
        amd-memory-visible-vram:\t0 KiB\ndrm-engine-gfx:\t1234 ns\n";

    #[test]
    fn an_amdgpu_client_is_read_in_its_unit() {
        assert_eq!(
            parse_fdinfo(CLIENT),
            Some(DrmClient {
                pdev: "0000:03:00.0".into(),
                client_id: 42,
                vram_bytes: 1 << 30,
            })
        );
    }

    #[test]
    fn sizes_in_every_unit_and_the_newer_key() {
        assert_eq!(parse_size("17"), Some(17));
        assert_eq!(parse_size("3 MiB"), Some(3 << 20));
        assert_eq!(parse_size("1 GiB"), Some(1 << 30));
        assert_eq!(parse_size("3 TiB"), None);
        assert_eq!(parse_size("x KiB"), None);
        let newer = "drm-driver: amdgpu\ndrm-pdev: 0000:03:00.0\ndrm-client-id: 7\n\
            drm-total-vram: 512 MiB\ndrm-resident-vram: 500 MiB\n";
        assert_eq!(parse_fdinfo(newer).map(|c| c.vram_bytes), Some(512 << 20));
    }

    #[test]
    fn every_process_on_a_card_is_found_once_per_client() {
        let dir = tempfile::tempdir().unwrap();
        let put = |pid: &str, fd: &str, text: &str| {
            let d = dir.path().join(pid).join("fdinfo");
            fs::create_dir_all(&d).unwrap();
            fs::write(d.join(fd), text).unwrap();
        };
        put("100", "5", CLIENT);
        // The same client through a dup'ed descriptor counts once.
        put("100", "6", CLIENT);
        let other_card = CLIENT.replace("0000:03:00.0", "0000:04:00.0");
        put("200", "3", &other_card);
        let second = CLIENT
            .replace("drm-client-id:\t42", "drm-client-id:\t43")
            .replace("1048576 KiB", "2048 KiB");
        put("300", "3", &second);
        put("self", "3", CLIENT);
        put("400", "1", "pos:\t0\n");
        assert_eq!(
            card_clients(dir.path(), "0000:03:00.0"),
            [(100, 1 << 30), (300, 2 << 20)]
        );
        assert_eq!(card_clients(dir.path(), "0000:04:00.0"), [(200, 1 << 30)]);
        assert_eq!(card_clients(&dir.path().join("none"), "0000:03:00.0"), []);
    }

    #[test]
    fn other_descriptors_are_not_clients() {
        assert_eq!(
            parse_fdinfo("pos:\t0\nflags:\t0100002\nmnt_id:\t26\n"),
            None
        );
        // Another driver's client (i915) is not an AMD card's.
        let i915 = CLIENT.replace("drm-driver:\tamdgpu", "drm-driver:\ti915");
        assert_eq!(parse_fdinfo(&i915), None);
        // An amdgpu client that does not say its VRAM tells nothing.
        let no_vram = CLIENT.replace("drm-memory-vram:\t1048576 KiB\n", "");
        assert_eq!(parse_fdinfo(&no_vram), None);
    }
}
