//! Closing the window while a study runs: the user chooses between stopping now (the running
//! trials end as FAIL "interrupted", see [`super::TradeTuneApp`]'s `on_exit`) and letting the
//! running trials finish (no new one starts; the window closes when the study has ended), or
//! cancels. SIGINT and SIGTERM do not ask: they stop now.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// The choice "Stop now" offers.
pub const STOP_NOW: &str = "Stop now (running trials end FAIL \"interrupted\")";
/// The choice that lets the running trials finish.
pub const FINISH: &str = "Finish running trials";
/// Keeps the window open.
pub const CANCEL: &str = "Cancel";

/// Where closing the window stands.
#[derive(Debug, Default)]
pub struct Closing {
    /// The dialog is open.
    pub asking: bool,
    /// "Finish running trials" was chosen: the window closes when the study ends.
    pub finishing: bool,
    /// The close goes through (chosen, nothing running, or a signal).
    pub confirmed: bool,
    /// Set by the SIGINT/SIGTERM handler: close without asking.
    pub signalled: Arc<AtomicBool>,
}

/// What the user chose in the dialog this frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    StopNow,
    Finish,
    Cancel,
}

impl Closing {
    /// Handles a close request of this frame, given whether a study is `running`: cancels it
    /// and opens the dialog unless the close is confirmed or signalled. Returns whether the
    /// request was held back.
    pub fn on_request(&mut self, ctx: &egui::Context, running: bool) -> bool {
        if !ctx.input(|i| i.viewport().close_requested()) {
            return false;
        }
        if !running || self.confirmed || self.signalled.load(Ordering::Relaxed) {
            self.confirmed = true;
            return false;
        }
        ctx.send_viewport_cmd(egui::ViewportCommand::CancelClose);
        self.asking = true;
        true
    }

    /// Closes the window once the study asked to finish has ended.
    pub fn when_finished(&mut self, ctx: &egui::Context, running: bool) {
        if self.finishing && !running && !self.confirmed {
            self.confirmed = true;
            ctx.send_viewport_cmd(egui::ViewportCommand::Close);
        }
    }

    /// Carries out `choice`: "Stop now" closes at once; "Finish" waits for the study's end.
    /// `finish` asks the runner to start no more trials.
    pub fn choose(&mut self, ctx: &egui::Context, choice: Choice, finish: impl FnOnce()) {
        self.asking = false;
        match choice {
            Choice::StopNow => {
                self.confirmed = true;
                ctx.send_viewport_cmd(egui::ViewportCommand::Close);
            }
            Choice::Finish => {
                self.finishing = true;
                finish();
            }
            Choice::Cancel => {}
        }
    }
}

/// The dialog, while it is open; returns what was clicked.
pub fn dialog(ctx: &egui::Context, closing: &Closing, running_trials: usize) -> Option<Choice> {
    if !closing.asking {
        return None;
    }
    let mut choice = None;
    egui::Modal::new(egui::Id::unique("close while a study runs")).show(ctx, |ui| {
        ui.heading("A study is running");
        ui.label(format!(
            "{running_trials} trial{} running. Close the window how?",
            if running_trials == 1 { " is" } else { "s are" }
        ));
        ui.add_space(6.0);
        if ui.button(STOP_NOW).clicked() {
            choice = Some(Choice::StopNow);
        }
        if ui
            .button(FINISH)
            .on_hover_text("no new trial starts; the window closes when the running ones end")
            .clicked()
        {
            choice = Some(Choice::Finish);
        }
        if ui.button(CANCEL).clicked() {
            choice = Some(Choice::Cancel);
        }
    });
    choice
}
