//! The amdgpu sysfs reader on fixture trees shaped like real `/sys/class/drm` directories
//! (units as the kernel writes them: bytes, millidegrees, microwatts, Hz), and the cards' names
//! from their PCI ids. One test per case.

use std::path::{Path, PathBuf};

use tradetune_engine::telemetry::amdgpu::AmdGpuProbe;
use tradetune_engine::telemetry::pci_names::NameDatabases;
use tradetune_engine::telemetry::{GpuProbe, GpuSample, GpuVendor, ProbeStatus};

fn root(case: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/amdgpu")
        .join(case)
}

fn only_sample(case: &str) -> GpuSample {
    let mut probe = AmdGpuProbe::open(&root(case)).unwrap();
    let mut samples = probe.sample();
    assert_eq!(samples.len(), 1, "{case}: one card expected");
    samples.remove(0)
}

fn close(a: Option<f64>, b: f64) -> bool {
    a.is_some_and(|a| (a - b).abs() < 1e-9)
}

#[test]
fn rdna3_card_every_metric_in_its_unit() {
    let probe = AmdGpuProbe::open(&root("rx7900gre")).unwrap();
    // card0 is an Intel iGPU (i915) and card1-DP-1 a connector: only card1 is read.
    assert_eq!(probe.devices().len(), 1);
    let info = &probe.devices()[0];
    assert_eq!(info.vendor, GpuVendor::Amd);
    // Revision 0xce of Navi 31, by whichever of the system's amdgpu.ids or the table knows it.
    assert_eq!(info.name, "AMD Radeon RX 7900 GRE");
    assert_eq!(info.pci_bus_id.unwrap().to_string(), "0000:03:00.0");
    assert_eq!(info.mem_total_bytes, Some(17_163_091_968));
    // A DKMS-built driver's module version, through `device/driver/module/version`.
    assert_eq!(info.driver.as_deref(), Some("amdgpu 6.8.5"));

    let s = only_sample("rx7900gre");
    assert!(s.problems.is_empty(), "{:?}", s.problems);
    assert_eq!(s.util_pct, Some(83.0));
    assert_eq!(s.mem_util_pct, Some(41.0));
    assert_eq!(s.mem_used_bytes, Some(9_663_676_416));
    assert_eq!(s.mem_total_bytes, Some(17_163_091_968));
    assert_eq!(s.temp_c, Some(66.0));
    assert_eq!(s.temp_junction_c, Some(81.0));
    assert_eq!(s.temp_mem_c, Some(74.0));
    assert_eq!(s.power_w, Some(212.0));
    assert_eq!(s.power_limit_w, Some(230.0));
    assert_eq!(s.sm_clock_mhz, Some(2124.0));
    assert_eq!(s.sm_clock_max_mhz, Some(2803.0));
    assert_eq!(s.mem_clock_mhz, Some(1124.0));
    assert_eq!(s.mem_clock_max_mhz, Some(1124.0));
    assert!(close(s.fan_pct, 40.0));
    assert_eq!(s.perf_level.as_deref(), Some("auto"));
    assert_eq!(s.power_profile.as_deref(), Some("COMPUTE"));
    // Not in amdgpu's text files.
    assert_eq!(s.throttle, None);
    assert_eq!(s.process_mem_used_bytes, None);
    // MiB in the metrics, as the CSV columns say.
    let used = s
        .metrics()
        .into_iter()
        .find(|(m, _)| m.name() == "mem_used_mib")
        .unwrap();
    assert_eq!(used.1, 9216.0);
}

#[test]
fn power1_input_when_power1_average_is_absent() {
    let s = only_sample("power1_input_only");
    assert_eq!(s.power_w, Some(212.0));
    assert!(s.problems.is_empty(), "{:?}", s.problems);
}

#[test]
fn missing_files_are_empty_metrics_without_complaint() {
    // No module version: the in-kernel driver, named by the kernel release.
    let probe = AmdGpuProbe::open(&root("missing_files")).unwrap();
    let driver = probe.devices()[0].driver.clone().unwrap();
    assert!(driver.starts_with("amdgpu (in-kernel"), "{driver}");
    let s = only_sample("missing_files");
    assert_eq!(s.util_pct, Some(12.0));
    assert_eq!(s.mem_total_bytes, Some(17_163_091_968));
    assert_eq!(s.mem_used_bytes, None);
    assert_eq!(s.mem_util_pct, None);
    assert_eq!(s.temp_c, None);
    assert_eq!(s.power_w, None);
    assert_eq!(s.sm_clock_mhz, None);
    assert_eq!(s.sm_clock_max_mhz, None);
    assert_eq!(s.perf_level, None);
    assert!(s.problems.is_empty(), "{:?}", s.problems);
}

#[test]
fn malformed_files_are_named_and_the_rest_still_read() {
    let s = only_sample("malformed");
    assert_eq!(s.util_pct, None);
    assert_eq!(s.mem_util_pct, None);
    assert_eq!(s.mem_used_bytes, None);
    assert_eq!(s.temp_c, None);
    assert_eq!(s.power_w, None);
    assert_eq!(s.sm_clock_max_mhz, None);
    // The good files beside them.
    assert_eq!(s.mem_total_bytes, Some(17_163_091_968));
    assert_eq!(s.temp_junction_c, Some(81.0));
    assert_eq!(s.mem_clock_mhz, Some(1124.0));
    let text = s.problems.join("\n");
    for file in [
        "card0/device/gpu_busy_percent",
        "card0/device/mem_busy_percent",
        "card0/device/mem_info_vram_used",
        "card0/device/pp_dpm_sclk",
        "card0/device/hwmon/hwmon0/temp1_input",
        "card0/device/hwmon/hwmon0/power1_average",
    ] {
        assert!(
            text.contains(file),
            "no problem line for {file} in:\n{text}"
        );
    }
    assert_eq!(s.problems.len(), 6, "{text}");
}

#[test]
fn no_amdgpu_card_is_a_state() {
    let err = AmdGpuProbe::open(&root("no_amd_cards")).err().unwrap();
    assert!(matches!(
        err,
        ProbeStatus::Unavailable {
            vendor: GpuVendor::Amd,
            ..
        }
    ));
    assert!(
        err.to_string().starts_with("AMD: no amdgpu cards under "),
        "{err}"
    );
}

#[test]
fn missing_drm_directory_is_a_state() {
    let err = AmdGpuProbe::open(&root("does_not_exist")).err().unwrap();
    assert!(err.to_string().contains("does not exist"), "{err}");
}

#[test]
fn older_card_by_vendor_id_with_classic_table_and_unlabelled_sensor() {
    let probe = AmdGpuProbe::open(&root("vega_classic")).unwrap();
    // No uevent: recognised by its vendor file, and no PCI address is known.
    assert_eq!(probe.devices()[0].pci_bus_id, None);
    let s = only_sample("vega_classic");
    assert_eq!(s.util_pct, Some(100.0));
    assert_eq!(s.sm_clock_mhz, Some(1401.0));
    assert_eq!(s.sm_clock_max_mhz, Some(1630.0));
    assert_eq!(s.temp_c, Some(71.0));
    assert_eq!(s.power_w, Some(180.5));
    assert_eq!(s.fan_pct, Some(100.0));
    assert_eq!(s.perf_level.as_deref(), Some("manual"));
    assert_eq!(s.power_profile.as_deref(), Some("3D_FULL_SCREEN"));
}

#[test]
fn rdna3_idle_two_line_table_gives_current_and_max() {
    let s = only_sample("rdna3_idle");
    assert_eq!(s.util_pct, Some(0.0));
    assert_eq!(s.sm_clock_mhz, Some(500.0));
    assert_eq!(s.sm_clock_max_mhz, Some(2803.0));
}

#[test]
fn cards_in_numeric_order() {
    let mut probe = AmdGpuProbe::open(&root("two_cards")).unwrap();
    let ids: Vec<String> = probe
        .devices()
        .iter()
        .map(|d| d.pci_bus_id.unwrap().to_string())
        .collect();
    assert_eq!(ids, ["0000:03:00.0", "0000:0b:00.0"]);
    assert_eq!(probe.sample().len(), 2);
}

/// The fixture's card with the name databases left out: the built-in table decides.
fn named_by_table(case: &str) -> tradetune_engine::telemetry::GpuInfo {
    let probe = AmdGpuProbe::open_with(&root(case), &NameDatabases::table_only()).unwrap();
    assert_eq!(probe.devices().len(), 1, "{case}");
    probe.devices()[0].clone()
}

#[test]
fn rx7900gre_is_named_by_its_revision() {
    // 1002:744c rev ce, a Sapphire PULSE board (1da2:475e).
    let info = named_by_table("rx7900gre");
    assert_eq!(info.name, "AMD Radeon RX 7900 GRE");
    assert_eq!(info.mem_total_bytes, Some(17_163_091_968));
}

#[test]
fn rx7900xtx_is_named_by_its_revision_not_as_a_gre() {
    // The same device id, 1002:744c, rev c8, a Sapphire NITRO+ board (1da2:e471).
    let info = named_by_table("rx7900xtx");
    assert_eq!(info.name, "AMD Radeon RX 7900 XTX");
    assert_eq!(info.mem_total_bytes, Some(25_753_026_560));
}

/// A one-card DRM tree in `dir` whose `card0/device` holds `files`.
fn card_tree(dir: &Path, files: &[(&str, &str)]) -> PathBuf {
    let device = dir.join("card0/device");
    std::fs::create_dir_all(&device).unwrap();
    for (name, text) in files {
        std::fs::write(device.join(name), text).unwrap();
    }
    dir.to_path_buf()
}

const NAVI31: [(&str, &str); 3] = [
    (
        "uevent",
        "DRIVER=amdgpu\nPCI_ID=1002:744C\nPCI_SLOT_NAME=0000:03:00.0\n",
    ),
    ("vendor", "0x1002\n"),
    ("device", "0x744c\n"),
];

fn name_of(root: &Path, names: &NameDatabases) -> String {
    let probe = AmdGpuProbe::open_with(root, names).unwrap();
    probe.devices()[0].name.clone()
}

#[test]
fn the_board_names_the_card_when_the_revision_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let mut files = NAVI31.to_vec();
    files.extend([
        ("revision", "0xc9\n"),
        ("subsystem_vendor", "0x1eae\n"),
        ("subsystem_device", "0x790a\n"),
    ]);
    let root = card_tree(dir.path(), &files);
    assert_eq!(
        name_of(&root, &NameDatabases::table_only()),
        "AMD Radeon RX 7900 GRE"
    );
    // A board id that XFX used for an XTX and a GRE alike: only the chip is known.
    std::fs::write(root.join("card0/device/subsystem_vendor"), "0x1002\n").unwrap();
    std::fs::write(root.join("card0/device/subsystem_device"), "0x0e3b\n").unwrap();
    assert_eq!(
        name_of(&root, &NameDatabases::table_only()),
        "AMD Navi 31 (1002:744c rev c9)"
    );
}

#[test]
fn the_systems_name_databases_name_cards_the_table_lacks() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    std::fs::create_dir_all(&db).unwrap();
    let pci_ids = db.join("pci.ids");
    std::fs::write(
        &pci_ids,
        "# pci.ids subset\n1002  Advanced Micro Devices, Inc. [AMD/ATI]\n\
         \t7470  Navi 32 [Radeon PRO W7700]\n\
         \t7499  Navi 33 [Radeon RX 7400/7300/Pro W7400]\n\
         \t\t1458 2424  Radeon RX 7400 WINDFORCE\n",
    )
    .unwrap();
    let amdgpu_ids = db.join("amdgpu.ids");
    std::fs::write(&amdgpu_ids, "1.0.0\n7499,\tC1,\tAMD Radeon RX 7300\n").unwrap();
    let names = NameDatabases {
        pci_ids: Some(pci_ids),
        amdgpu_ids: Some(amdgpu_ids),
    };
    let card = |tag: &str, device: &str, extra: &[(&str, &str)]| {
        let mut files = vec![
            ("uevent", "DRIVER=amdgpu\n"),
            ("vendor", "0x1002\n"),
            ("device", device),
        ];
        files.extend_from_slice(extra);
        card_tree(&dir.path().join(tag), &files)
    };
    // A device line that names one card.
    let w7700 = card("w7700", "0x7470\n", &[("revision", "0x00\n")]);
    assert_eq!(name_of(&w7700, &names), "AMD Radeon PRO W7700");
    // amdgpu.ids by revision.
    let rx7300 = card("rx7300", "0x7499\n", &[("revision", "0xc1\n")]);
    assert_eq!(name_of(&rx7300, &names), "AMD Radeon RX 7300");
    // A board line that names one of the device line's cards.
    let rx7400 = card(
        "rx7400",
        "0x7499\n",
        &[
            ("revision", "0xc5\n"),
            ("subsystem_vendor", "0x1458\n"),
            ("subsystem_device", "0x2424\n"),
        ],
    );
    assert_eq!(name_of(&rx7400, &names), "AMD Radeon RX 7400");
    // Known nowhere: the ids, as before.
    let unknown = card("unknown", "0x1234\n", &[]);
    assert_eq!(name_of(&unknown, &names), "AMD GPU 1002:1234 (card0)");
}

/// A runtime-suspended card (a laptop's idle dGPU) is not read, so sampling does not wake it:
/// its sample is empty and without complaint; once it is active again it is read.
#[test]
fn a_suspended_card_is_not_read() {
    use tradetune_engine::telemetry::GpuProbe;
    let dir = tempfile::tempdir().unwrap();
    let mut files = NAVI31.to_vec();
    files.push(("gpu_busy_percent", "37\n"));
    let root = card_tree(dir.path(), &files);
    let power = root.join("card0/device/power");
    std::fs::create_dir_all(&power).unwrap();
    std::fs::write(power.join("runtime_status"), "suspended\n").unwrap();
    let mut probe = AmdGpuProbe::open(&root).unwrap();
    let s = probe.sample().remove(0);
    assert_eq!(s.util_pct, None);
    assert!(s.problems.is_empty(), "{:?}", s.problems);
    std::fs::write(power.join("runtime_status"), "active\n").unwrap();
    assert_eq!(probe.sample().remove(0).util_pct, Some(37.0));
}

/// Writes `<proc>/<pid>/fdinfo/<fd>` files.
fn fdinfo_tree(proc_root: &Path, pid: u32, fds: &[(u32, String)]) {
    let dir = proc_root.join(pid.to_string()).join("fdinfo");
    std::fs::create_dir_all(&dir).unwrap();
    for (fd, text) in fds {
        std::fs::write(dir.join(fd.to_string()), text).unwrap();
    }
}

fn drm_client(pdev: &str, client: u64, vram_kib: u64) -> String {
    format!(
        "pos:\t0\nflags:\t02100002\nmnt_id:\t26\ndrm-driver:\tamdgpu\ndrm-client-id:\t{client}\n\
         drm-pdev:\t{pdev}\ndrm-memory-vram:\t{vram_kib} KiB\ndrm-memory-gtt: \t4096 KiB\n"
    )
}

/// The watched process's VRAM on the card comes from its DRM fdinfo: the clients on this
/// card's PCI address, each once however many descriptors reach it, summed; another card's
/// client and other descriptors do not count.
#[test]
fn the_processs_vram_comes_from_its_fdinfo_on_this_card() {
    let proc_root = tempfile::tempdir().unwrap();
    let pid = 4242;
    fdinfo_tree(
        proc_root.path(),
        pid,
        &[
            (0, "pos:\t0\nflags:\t0100002\nmnt_id:\t26\n".into()),
            (5, drm_client("0000:03:00.0", 7, 1_048_576)),
            // A dup of client 7: the same client, not twice its memory.
            (6, drm_client("0000:03:00.0", 7, 1_048_576)),
            // A second device opened on the same card.
            (7, drm_client("0000:03:00.0", 9, 2048)),
            // A client on another card (the iGPU).
            (8, drm_client("0000:0c:00.0", 11, 512)),
        ],
    );
    let mut probe = AmdGpuProbe::open(&root("rx7900gre"))
        .unwrap()
        .with_proc_root(proc_root.path());
    probe.watch_pid(pid);
    std::fs::write(proc_root.path().join("4242/comm"), "python3\n").unwrap();
    let s = probe.sample().remove(0);
    assert!(s.problems.is_empty(), "{:?}", s.problems);
    assert_eq!(s.process_mem_used_bytes, Some((1_048_576 + 2048) * 1024));
    // The first sample lists every process on the card (nvitop's table), named by its comm;
    // the next few do not read all of /proc again.
    let listed: Vec<(u32, Option<String>, Option<u64>)> = s
        .processes
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|p| (p.pid, p.name, p.used_bytes))
        .collect();
    assert_eq!(
        listed,
        [(pid, Some("python3".into()), Some((1_048_576 + 2048) * 1024))]
    );
    assert_eq!(probe.sample().remove(0).processes, None);
    // Its metric is what the memory guard reads (`process_mem_used_mib`).
    assert!(s.metrics().contains(&(
        tradetune_engine::telemetry::Metric::ProcessMemUsedMib,
        1026.0
    )));

    // A process with no client on this card (or none at all): not known, not zero.
    probe.watch_pid(1);
    assert_eq!(probe.sample().remove(0).process_mem_used_bytes, None);
    fdinfo_tree(
        proc_root.path(),
        77,
        &[(3, drm_client("0000:0c:00.0", 1, 100))],
    );
    probe.watch_pid(77);
    assert_eq!(probe.sample().remove(0).process_mem_used_bytes, None);
}
