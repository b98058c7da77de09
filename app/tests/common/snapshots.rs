//! What the snapshot tests (`ui_snapshots`, `ui_snapshots_studies`) share: the app over a fixed
//! device list (the same pictures on every machine of this class), its harness, and the
//! snapshot that skips without a renderer unless one is required.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::ui;
use egui_kittest::{Harness, SnapshotError};
use tradetune_app::ui::TradeTuneApp;
use tradetune_app::ui::context::DataState;
use tradetune_app::ui::panels::studies::Action as StudyAction;
use tradetune_app::ui::settings::{Settings, Tab};
use tradetune_engine::device::DeviceInfo;
use tradetune_engine::device::precision::Precision;

/// The Vulkan adapter of an RTX 4080, as wgpu describes it.
pub fn rtx4080() -> tradetune_engine::device::adapters::Adapter {
    tradetune_engine::device::adapters::Adapter {
        name: "NVIDIA GeForce RTX 4080".into(),
        kind: tradetune_engine::device::adapters::AdapterKind::DiscreteGpu,
        index: 0,
        api: "Vulkan".into(),
        driver: "NVIDIA 560.35.03".into(),
        vendor: 0x10de,
        device: 0x2704,
        pci_bus_id: "0000:01:00.0".into(),
        shader_f16: true,
        memory_bytes: Some(16 << 30),
    }
}

pub fn devices() -> Vec<DeviceInfo> {
    vec![
        DeviceInfo {
            name: "cpu".into(),
            backend: "flex".into(),
            available: true,
            detail: "burn-flex on 16 threads (SIMD, rayon)".into(),
            memory_bytes: Some(32 << 30),
            precisions: vec![Precision::F32, Precision::Bf16, Precision::F16],
            reports_pool_usage: false,
            adapter: None,
        },
        DeviceInfo {
            name: "wgpu".into(),
            backend: "wgpu".into(),
            available: true,
            detail: "default adapter, wgpu:0: NVIDIA GeForce RTX 4080 (discrete GPU, Vulkan)"
                .into(),
            memory_bytes: Some(16 << 30),
            precisions: vec![Precision::F32, Precision::F16],
            reports_pool_usage: true,
            adapter: Some(rtx4080()),
        },
        DeviceInfo {
            name: "wgpu:0".into(),
            backend: "wgpu".into(),
            available: true,
            detail: "NVIDIA GeForce RTX 4080 (discrete GPU, Vulkan)".into(),
            memory_bytes: Some(16 << 30),
            precisions: vec![Precision::F32, Precision::F16],
            reports_pool_usage: true,
            adapter: Some(rtx4080()),
        },
    ]
}

/// The app over [`devices`], the database dialog answered with `db`.
pub fn app(settings: Settings, db: Option<PathBuf>) -> TradeTuneApp {
    TradeTuneApp::new(settings, Arc::new(ui::OpenThis(db)), devices())
}

pub fn harness(settings: Settings, db: Option<PathBuf>) -> Harness<'static, TradeTuneApp> {
    ui::harness(app(settings, db), [1280.0, 900.0])
}

/// [`ui::step_until`] and one frame more: the pictures are taken after four settling frames.
pub fn step_until(
    h: &mut Harness<'_, TradeTuneApp>,
    what: &str,
    done: impl Fn(&TradeTuneApp) -> bool,
) {
    ui::step_until(h, what, done);
    h.run_steps(1);
}

pub fn data_loaded(app: &TradeTuneApp) -> bool {
    matches!(app.cx.data, DataState::Ready(_) | DataState::Failed(_))
}

/// Takes the snapshot; where no wgpu adapter exists (no GPU and no Mesa lavapipe) says so and
/// skips, unless `TRADETUNE_REQUIRE_GUI=1` (CI installs mesa-vulkan-drivers and sets it).
pub fn snapshot(h: &mut Harness<'_, TradeTuneApp>, name: &str) {
    match h.try_snapshot(name) {
        Ok(()) => {}
        Err(SnapshotError::RenderError { err }) => {
            let required = std::env::var("TRADETUNE_REQUIRE_GUI").is_ok_and(|v| v == "1");
            assert!(!required, "no renderer for the {name} snapshot: {err}");
            eprintln!(
                "skipped the {name} snapshot: no wgpu adapter ({err}); apt install mesa-vulkan-drivers"
            );
        }
        Err(e) => panic!("{e}"),
    }
}

/// A harness on `tab` with a copy (in `dir`) of the Optuna reference database open.
pub fn opened_reference_db(dir: &Path, tab: Tab) -> Harness<'static, TradeTuneApp> {
    let src =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../engine/tests/testdata/optuna-reference.db");
    let db = dir.join("optuna-reference.db");
    std::fs::copy(&src, &db).unwrap();
    let settings = Settings {
        tab,
        ..Settings::default()
    };
    let mut h = harness(settings, Some(db.clone()));
    h.state_mut().handle(StudyAction::OpenDatabase(db));
    step_until(&mut h, "the database", |a| a.panels.studies.db.is_some());
    h
}
