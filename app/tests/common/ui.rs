//! The egui_kittest harness the `ui*` test modules share: the real app on the test's settings,
//! dialogs and devices, in a window of the test's size, and frames stepped until what the test
//! waits for (work on background threads) has happened.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use egui_kittest::Harness;
use tradetune_app::ui::TradeTuneApp;
use tradetune_app::ui::dialog::{FileDialogs, Pick};
use tradetune_app::ui::settings::{Settings, Tab};

/// Answers the database dialog with the test's file (none: every dialog is cancelled).
pub struct OpenThis(pub Option<PathBuf>);

impl FileDialogs for OpenThis {
    fn pick(&self, pick: &Pick) -> Vec<PathBuf> {
        match pick {
            Pick::Database => self.0.clone().into_iter().collect(),
            _ => Vec::new(),
        }
    }
}

/// Dialogs that are all cancelled.
pub fn no_dialogs() -> Arc<dyn FileDialogs> {
    Arc::new(OpenThis(None))
}

/// The app on `settings` with `dialogs`, over the devices of this machine.
pub fn app(settings: Settings, dialogs: Arc<dyn FileDialogs>) -> TradeTuneApp {
    TradeTuneApp::new(
        settings,
        dialogs,
        tradetune_engine::device::describe_devices(),
    )
}

/// `app` in a window of `size` logical pixels, drawn as the desktop program draws it.
pub fn harness(app: TradeTuneApp, size: [f32; 2]) -> Harness<'static, TradeTuneApp> {
    Harness::builder()
        .with_size(size)
        .build_ui_state(|ui, app: &mut TradeTuneApp| app.frame(ui), app)
}

/// The Studies tab in a window of `size`, the database dialog answered with `db`.
pub fn studies(db: &Path, size: [f32; 2]) -> Harness<'static, TradeTuneApp> {
    let settings = Settings {
        tab: Tab::Studies,
        ..Settings::default()
    };
    harness(
        app(settings, Arc::new(OpenThis(Some(db.to_path_buf())))),
        size,
    )
}

/// Frames drawn after `done` holds, so its effects are on screen.
pub const SETTLE_FRAMES: usize = 3;

/// Steps frames until `done` holds (reads and jobs run on background threads), then draws
/// [`SETTLE_FRAMES`] more. The limit only turns a hang into a failure with a message.
pub fn step_until(
    h: &mut Harness<'_, TradeTuneApp>,
    what: &str,
    done: impl Fn(&TradeTuneApp) -> bool,
) {
    let limit = Instant::now() + Duration::from_secs(600);
    while !done(h.state()) {
        assert!(Instant::now() < limit, "gave up waiting for {what}");
        h.step();
        std::thread::sleep(Duration::from_millis(20));
    }
    h.run_steps(SETTLE_FRAMES);
}
