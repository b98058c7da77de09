//! The desktop program: `tradetune` with no arguments.
//!
//! Shape (after rerun's viewer and egui's demo app): a read-mostly [`Context`](context::Context)
//! at the bottom (settings, devices, data, telemetry, the jobs' handle) with app-level
//! [`Command`](context::Command)s for effects only; one struct per panel ([`panels`]) that owns
//! its state and its actions and draws with `ui(&mut self, ui, &Context, &mut Vec<Command>)`;
//! the app ([`app`]) composes them and never reaches into one for another; engine work on
//! background threads ([`tasks`]) that define what they answer, report over a channel and wake
//! the UI. Settings persist through eframe ([`settings`]). Layers, bottom-up: draft, settings,
//! presets, dialog → tasks → context → panels → app.

pub mod allocator;
pub mod app;
pub mod background;
pub mod close;
pub mod context;
pub mod dialog;
pub mod draft;
pub mod panels;
pub mod presets;
pub mod settings;
pub mod tasks;

use std::sync::Arc;

use anyhow::Context;

pub use app::TradeTuneApp;

/// The application id and the window icon, which the desktop entry installs too.
pub use crate::install::{APP_ID, ICON_PNG};

/// How the window is started.
#[derive(Debug, Clone, Default)]
pub struct LaunchOptions {
    /// Close after this many frames (smoke tests).
    pub exit_after_frames: Option<u64>,
}

/// Opens the window and runs until it closes.
pub fn run_native(launch: LaunchOptions) -> anyhow::Result<()> {
    allocator::tune();
    let icon = eframe::icon_data::from_png_bytes(ICON_PNG).context("decoding the bundled icon")?;
    let options = eframe::NativeOptions {
        viewport: egui::ViewportBuilder::default()
            .with_title("TradeTune")
            .with_app_id(APP_ID)
            .with_icon(Arc::new(icon))
            .with_inner_size([1280.0, 820.0])
            .with_min_inner_size([640.0, 400.0]),
        persist_window: true,
        ..Default::default()
    };
    eframe::run_native(
        "TradeTune",
        options,
        Box::new(move |cc| {
            // Read leniently: settings that no longer read as a whole keep what does, and the
            // file is kept aside with a warning rather than overwritten by the next save.
            let saved = cc.storage.and_then(|s| s.get_string(app::SETTINGS_KEY));
            let file = eframe::storage_dir(APP_ID).map(|d| d.join("app.ron"));
            let loaded = settings::load(saved.as_deref(), file.as_deref());
            let devices = tradetune_engine::device::describe_devices();
            let mut app =
                TradeTuneApp::from_loaded(loaded, Arc::new(dialog::NativeDialogs), devices)
                    .exit_after_frames(launch.exit_after_frames);
            // The GPUs the probes find start the telemetry and, on a first launch, choose
            // the preset.
            app.detect_hardware(tradetune_engine::telemetry::GpuDiscovery::discover(
                std::path::Path::new(tradetune_engine::telemetry::DRM_ROOT),
                std::process::id(),
            ));
            // SIGINT/SIGTERM close the window without the close dialog's question (the running
            // study is interrupted in `on_exit`, so no trial is left RUNNING).
            let ctx = cc.egui_ctx.clone();
            let signalled = app.closing.signalled.clone();
            crate::signals::on_first_signal(move || {
                signalled.store(true, std::sync::atomic::Ordering::Relaxed);
                ctx.send_viewport_cmd(egui::ViewportCommand::Close);
                ctx.request_repaint();
            });
            Ok(Box::new(app))
        }),
    )
    .map_err(|e| anyhow::anyhow!("the window could not open: {e}"))
}
