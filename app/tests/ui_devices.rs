//! The device view of the Hardware panel (nvitop's cards, process table and linked history),
//! driven with fake samples: the NVML probe over the stand-in NVML (`FakeNvml`, an RTX 4080's
//! readings) feeding the same sampler the app starts, its ticks taken by hand.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::ui;
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use tradetune_app::ui::TradeTuneApp;
use tradetune_app::ui::settings::Settings;
use tradetune_engine::telemetry::nvml::NvmlProbe;
use tradetune_engine::telemetry::nvml_fake::FakeNvml;
use tradetune_engine::telemetry::{
    DeviceReading, DeviceTag, GpuInfo, GpuProbe, GpuSource, GpuVendor, Metric, SamplerConfig,
    SamplerCore, Source, SourceReading, ThrottleReasons,
};

fn harness(app: TradeTuneApp) -> Harness<'static, TradeTuneApp> {
    ui::harness(app, [1280.0, 2400.0])
}

fn app() -> TradeTuneApp {
    // No devices listed: the device table shows nothing that could match the card's labels.
    TradeTuneApp::new(Settings::default(), ui::no_dialogs(), Vec::new())
}

/// Takes `n` ticks a second apart from a fixed time, as the sampler thread would.
fn ticks(core: &mut SamplerCore, n: i64) {
    for i in 0..n {
        let at = chrono::DateTime::from_timestamp(1_795_591_870 + i, 0).unwrap();
        core.tick(at, Instant::now() + Duration::from_secs(5));
    }
}

/// The fake RTX 4080 as the app's sampler would read it, its processes named from `proc_root`:
/// this process holds 3 GiB (a wgpu trainer) and the next pid 1 GiB (a CUDA program).
fn fake_card(proc_root: &Path) -> (Vec<GpuInfo>, SamplerCore) {
    let pid = std::process::id();
    for (p, name) in [(pid, "tradetune"), (pid + 1, "python3")] {
        let dir = proc_root.join(p.to_string());
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("comm"), format!("{name}\n")).unwrap();
    }
    let probe = NvmlProbe::with_lib(Arc::new(FakeNvml::new(1, pid)))
        .unwrap()
        .with_proc_root(proc_root);
    let gpus = probe.devices().to_vec();
    let source: Box<dyn Source> = Box::new(GpuSource::new("nvidia gpu0", Box::new(probe), 0));
    let core = SamplerCore::new(SamplerConfig::default(), vec![source], None).unwrap();
    (gpus, core)
}

#[test]
fn each_gpu_has_a_card_with_its_figures_processes_and_history() {
    let dir = tempfile::tempdir().unwrap();
    let (gpus, mut core) = fake_card(dir.path());
    let mut app = app();
    app.cx.gpus = gpus;
    app.cx.telemetry = Some(core.handle());
    let mut h = harness(app);
    h.run_steps(2);
    // Before the first tick: the card, with no figures yet.
    h.get_by_label("NVIDIA GeForce RTX 4080");
    h.get_by_label("no reading yet");
    ticks(&mut core, 3);
    h.run_steps(3);
    h.get_by_label("NVIDIA 560.35.03");
    h.get_by_label("0000:01:00.0");
    h.get_by_label("87 %");
    // Memory against the total with the study's budget (memory_fraction 0.8).
    h.get_by_label("5.0 GiB of 16.0 GiB (budget 12.8 GiB, 80 %)");
    h.get_by_label("64 °C");
    h.get_by_label("245 W of 320 W limit");
    h.get_by_label("2745 MHz of 3105 MHz max");
    h.get_by_label("11201 MHz of 11201 MHz max");
    h.get_by_label("none: clocks are not held down");
    // The processes on the card, most memory first, this app's own marked.
    h.get_by_label_contains("2 processes using this card");
    h.get_by_label("tradetune (this app)");
    h.get_by_label("1 other process holds 1.0 GiB of this card's memory");
    h.get_by_label("python3");
    h.get_by_label("3.0 GiB");
    h.get_by_label("1.0 GiB");
    h.get_by_label("compute");
    h.get_by_label("graphics");
    // The history charts, one per figure.
    for title in [
        "gpu0 utilisation %",
        "gpu0 memory MiB",
        "gpu0 power W",
        "gpu0 temperature °C",
        "gpu0 clocks MHz",
    ] {
        h.get_by_label(title);
    }
}

/// A card whose clocks are held down by heat, whose driver lists no processes, and which
/// reports no power limit.
struct HotCard;

impl Source for HotCard {
    fn name(&self) -> String {
        "hot gpu0".into()
    }
    fn read(&mut self) -> SourceReading {
        SourceReading {
            readings: vec![DeviceReading {
                device: DeviceTag::Gpu(0),
                values: vec![
                    (Metric::UtilPct, 99.0),
                    (Metric::PowerW, 180.0),
                    (Metric::TempC, 91.0),
                    (
                        Metric::ThrottleMask,
                        f64::from(ThrottleReasons::HW_THERMAL | ThrottleReasons::SW_POWER_CAP),
                    ),
                ],
            }],
            ..SourceReading::default()
        }
    }
}

#[test]
fn throttling_missing_figures_and_no_process_list_are_said_plainly() {
    let mut core =
        SamplerCore::new(SamplerConfig::default(), vec![Box::new(HotCard)], None).unwrap();
    ticks(&mut core, 1);
    let mut app = app();
    app.cx.gpus = vec![GpuInfo {
        vendor: GpuVendor::Amd,
        name: "AMD Radeon RX 7900 GRE".into(),
        pci_bus_id: None,
        uuid: None,
        mem_total_bytes: None,
        driver: None,
    }];
    app.cx.telemetry = Some(core.handle());
    let mut h = harness(app);
    h.run_steps(3);
    h.get_by_label("held down by power cap, thermal (hardware)");
    h.get_by_label("180 W, limit not reported");
    h.get_by_label("91 °C");
    h.get_by_label("processes: not reported by this card's driver");
}

#[test]
fn without_a_gpu_the_view_says_so() {
    let mut app = app();
    app.cx.no_gpu_reason = Some(
        "no GPU present (NVIDIA: library not found; AMD: no amdgpu cards under /sys/class/drm)"
            .into(),
    );
    let mut h = harness(app);
    h.run_steps(2);
    h.get_by_label(
        "No GPU to show: no GPU present (NVIDIA: library not found; AMD: no amdgpu cards under \
         /sys/class/drm). Training runs on the CPU; the CPU and process figures are in the Run \
         panel.",
    );
}
