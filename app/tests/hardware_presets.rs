//! A first launch names the machine's GPUs and applies their bundled preset, through the same
//! call the window makes at start (`detect_hardware`): NVIDIA cards by an injected probe that
//! reports NVML's device names, AMD cards by the amdgpu probe on fixture sysfs trees.

use std::path::Path;

use crate::common::ui;
use tradetune_app::ui::TradeTuneApp;
use tradetune_app::ui::settings::Settings;
use tradetune_engine::telemetry::amdgpu::AmdGpuProbe;
use tradetune_engine::telemetry::pci_names::NameDatabases;
use tradetune_engine::telemetry::{
    GpuDiscovery, GpuInfo, GpuProbe, GpuSample, GpuVendor, ProbeStatus,
};

/// Stands for NVML: one card with the name NVML gives it.
struct InjectedNvml {
    devices: Vec<GpuInfo>,
}

impl GpuProbe for InjectedNvml {
    fn devices(&self) -> &[GpuInfo] {
        &self.devices
    }
    fn split(self: Box<Self>) -> Vec<Box<dyn GpuProbe>> {
        vec![self]
    }
    fn sample(&mut self) -> Vec<GpuSample> {
        vec![GpuSample::default(); self.devices.len()]
    }
}

fn nvml_reports(name: &str) -> GpuDiscovery {
    let probe = InjectedNvml {
        devices: vec![GpuInfo {
            vendor: GpuVendor::Nvidia,
            name: name.into(),
            pci_bus_id: "00000000:01:00.0".parse().ok(),
            uuid: Some("GPU-00000000-0000-0000-0000-000000000000".into()),
            mem_total_bytes: Some(16 << 30),
            driver: Some("NVIDIA 560.35.03".into()),
        }],
    };
    GpuDiscovery {
        statuses: vec![ProbeStatus::Ready {
            vendor: GpuVendor::Nvidia,
            devices: 1,
        }],
        probes: vec![Box::new(probe)],
    }
}

/// The amdgpu probe on `engine/tests/fixtures/amdgpu/CASE`, named by the built-in table (so
/// the system's pci.ids, present or not, changes nothing).
fn amdgpu_fixture(case: &str) -> GpuDiscovery {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../engine/tests/fixtures/amdgpu")
        .join(case);
    let probe = AmdGpuProbe::open_with(&root, &NameDatabases::table_only())
        .unwrap_or_else(|status| panic!("{case}: {status}"));
    GpuDiscovery {
        statuses: vec![ProbeStatus::Ready {
            vendor: GpuVendor::Amd,
            devices: probe.devices().len(),
        }],
        probes: vec![Box::new(probe)],
    }
}

fn launch(settings: Settings, discovery: GpuDiscovery) -> TradeTuneApp {
    let mut app = TradeTuneApp::new(
        settings,
        ui::no_dialogs(),
        tradetune_engine::device::describe_devices(),
    );
    app.detect_hardware(discovery);
    app
}

fn first_launch(discovery: GpuDiscovery) -> TradeTuneApp {
    launch(Settings::default(), discovery)
}

fn preset(app: &TradeTuneApp) -> Option<&str> {
    app.cx.settings.preset.as_deref()
}

fn gpu_names(app: &TradeTuneApp) -> Vec<&str> {
    app.cx.gpus.iter().map(|g| g.name.as_str()).collect()
}

fn closest_notice(app: &TradeTuneApp) -> Option<&String> {
    app.cx.notices.iter().find(|n| n.contains("closest"))
}

#[test]
fn nvml_rtx_4080_picks_rtx4080() {
    let app = first_launch(nvml_reports("NVIDIA GeForce RTX 4080"));
    assert_eq!(gpu_names(&app), ["NVIDIA GeForce RTX 4080"]);
    assert_eq!(preset(&app), Some("rtx4080"), "{:?}", app.cx.notices);
    assert_eq!(closest_notice(&app), None);
}

#[test]
fn nvml_rtx_4080_laptop_picks_rtx4080_laptop() {
    let app = first_launch(nvml_reports("NVIDIA GeForce RTX 4080 Laptop GPU"));
    assert_eq!(preset(&app), Some("rtx4080_laptop"), "{:?}", app.cx.notices);
    assert_eq!(closest_notice(&app), None);
}

#[test]
fn amdgpu_rx_7900_gre_is_named_and_picks_rx7900gre() {
    let app = first_launch(amdgpu_fixture("rx7900gre"));
    assert_eq!(gpu_names(&app), ["AMD Radeon RX 7900 GRE"]);
    assert_eq!(preset(&app), Some("rx7900gre"), "{:?}", app.cx.notices);
    assert_eq!(closest_notice(&app), None);
}

#[test]
fn amdgpu_rx_7900_xtx_is_named_as_itself_and_told_its_preset_is_the_closest() {
    let app = first_launch(amdgpu_fixture("rx7900xtx"));
    assert_eq!(gpu_names(&app), ["AMD Radeon RX 7900 XTX"]);
    // No preset was written for the XTX: the GRE's, on the same chip with less memory, fits it.
    assert_eq!(preset(&app), Some("rx7900gre"));
    let notice = closest_notice(&app).expect("a notice that the preset is only the closest");
    assert!(
        notice.contains("AMD Radeon RX 7900 XTX") && notice.contains("rx7900gre"),
        "{notice}"
    );
}

#[test]
fn a_preset_chosen_before_is_kept() {
    let settings = Settings {
        preset: Some("cpu".into()),
        ..Settings::default()
    };
    let app = launch(settings, nvml_reports("NVIDIA GeForce RTX 4080"));
    assert_eq!(gpu_names(&app), ["NVIDIA GeForce RTX 4080"]);
    assert_eq!(preset(&app), Some("cpu"));
}
