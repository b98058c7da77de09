//! Closing the window while a study runs, or while the best trial is re-run with other seeds:
//! the user chooses between stopping now (the running trials end as FAIL "interrupted": the
//! window stays, saying so, until the runner has stored them, then closes; a re-run's seeds so
//! far are not kept) and letting the work finish (no new trial starts; the window closes when
//! the study and the re-run have ended), or cancels. SIGINT and SIGTERM do not ask: they close
//! at once, and [`super::TradeTuneApp`]'s `on_exit` interrupts the study and waits for it (the
//! last resort, with no window to say so).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// The choice "Stop now" offers.
pub const STOP_NOW: &str = "Stop now (running trials end FAIL \"interrupted\")";
/// The choice that lets the running trials finish.
pub const FINISH: &str = "Finish running trials";
/// Keeps the window open.
pub const CANCEL: &str = "Cancel";
/// "Stop now" while only a re-run of the best trial trains.
pub const STOP_RESEED: &str = "Stop the re-run and close (its seeds so far are not kept)";
/// "Finish" while only a re-run of the best trial trains.
pub const FINISH_RESEED: &str = "Close when the re-run ends";
/// The heading shown after "Stop now" until the study has stored its running trials.
pub const STOPPING: &str = "Stopping the study";
/// What closing again while stopping does.
pub const CLOSE_AGAIN: &str =
    "Close again to close now: the study then has at most 60 s more to store its trials.";

/// What closing the window would stop.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Busy {
    /// A study runs.
    pub study: bool,
    /// Its trials running now.
    pub trials: usize,
    /// A re-run of the best trial with other seeds: the seed being trained (from 0, once the
    /// first started) and the seeds asked for.
    pub reseed: Option<(Option<usize>, usize)>,
}

impl Busy {
    /// Whether closing would stop anything.
    pub fn any(&self) -> bool {
        self.study || self.reseed.is_some()
    }
}

/// Where closing the window stands.
#[derive(Debug, Default)]
pub struct Closing {
    /// The dialog is open.
    pub asking: bool,
    /// "Finish running trials" was chosen: the window closes when the study ends.
    pub finishing: bool,
    /// "Stop now" was chosen while a study ran, with this many trials running: the study is
    /// interrupted, and the window closes once it has stored them as FAIL "interrupted" (its
    /// `Done`); meanwhile it says so.
    pub stopping: Option<usize>,
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
    /// Handles a close request of this frame, given whether a study or a re-run is `running`:
    /// cancels it and opens the dialog unless the close is confirmed or signalled. Returns whether the
    /// request was held back.
    pub fn on_request(&mut self, ctx: &egui::Context, running: bool) -> bool {
        if !ctx.input(|i| i.viewport().close_requested()) {
            return false;
        }
        if !running || self.confirmed || self.signalled.load(Ordering::Relaxed) {
            self.confirmed = true;
            return false;
        }
        // Already stopping and asked again: the window goes now, and `on_exit` gives the study
        // a bounded wait (60 s) to store its trials, as before "Stop now" kept it drawn; a
        // hung driver or a long compile never holds the window for good.
        if self.stopping.is_some() {
            self.confirmed = true;
            return false;
        }
        ctx.send_viewport_cmd(egui::ViewportCommand::CancelClose);
        self.asking = true;
        true
    }

    /// Closes the window once what was chosen has ended: the study (and the re-run) asked to
    /// finish, or the study stopped by "Stop now" (the re-run was cancelled with it).
    pub fn when_finished(&mut self, ctx: &egui::Context, busy: Busy) {
        let finished = self.finishing && !busy.any();
        let stopped = self.stopping.is_some() && !busy.study;
        if (finished || stopped) && !self.confirmed {
            self.confirmed = true;
            ctx.send_viewport_cmd(egui::ViewportCommand::Close);
        }
    }

    /// Carries out `choice` with `busy` running: "Stop now" closes at once, or where a study
    /// runs, once it has stored its running trials; "Finish" waits for the study's end.
    /// `study` tells the running study what was chosen (stop now: interrupt it; finish: start
    /// no more trials); it is called only where one runs.
    pub fn choose(
        &mut self,
        ctx: &egui::Context,
        choice: Choice,
        busy: Busy,
        study: impl FnOnce(Choice),
    ) {
        self.asking = false;
        match choice {
            Choice::StopNow if busy.study => {
                self.stopping = Some(busy.trials);
                study(choice);
            }
            Choice::StopNow => {
                self.confirmed = true;
                ctx.send_viewport_cmd(egui::ViewportCommand::Close);
            }
            Choice::Finish => {
                self.finishing = true;
                if busy.study {
                    study(choice);
                }
            }
            Choice::Cancel => {}
        }
    }
}

/// What the window shows after "Stop now" until the study has stored its running trials (a
/// trial in a long GPU update, or data still loading, can take a while): the window stays
/// drawn and says what it waits for.
pub fn stopping(ctx: &egui::Context, closing: &Closing) {
    let Some(trials) = closing.stopping else {
        return;
    };
    if closing.confirmed {
        return;
    }
    egui::Modal::new(egui::Id::unique("stopping the study to close")).show(ctx, |ui| {
        ui.heading(STOPPING);
        ui.horizontal(|ui| {
            ui.spinner();
            ui.label(stopping_text(trials));
        });
        ui.label(if trials == 0 {
            "The window closes when it has ended."
        } else {
            "The window closes when they are stored."
        });
        ui.label(CLOSE_AGAIN);
    });
}

/// "stopping: storing 2 running trials as interrupted…".
pub fn stopping_text(trials: usize) -> String {
    match trials {
        0 => "stopping: no trial was running; the study ends before it starts one…".to_owned(),
        1 => "stopping: storing 1 running trial as interrupted…".to_owned(),
        n => format!("stopping: storing {n} running trials as interrupted…"),
    }
}

/// The dialog, while it is open; returns what was clicked.
pub fn dialog(ctx: &egui::Context, closing: &Closing, busy: Busy) -> Option<Choice> {
    if !closing.asking {
        return None;
    }
    let reseed = busy.reseed.map(|(at, seeds)| match at {
        Some(k) => format!("seed {} of {seeds}", k + 1),
        None => format!("{seeds} seeds, loading the data"),
    });
    let mut choice = None;
    egui::Modal::new(egui::Id::unique("close while a study runs")).show(ctx, |ui| {
        let (stop, finish, finish_hover) = if busy.study {
            ui.heading("A study is running");
            let trials = busy.trials;
            ui.label(format!(
                "{trials} trial{} running. Close the window how?",
                if trials == 1 { " is" } else { "s are" }
            ));
            if let Some(r) = &reseed {
                ui.label(format!(
                    "The best trial's re-run with other seeds is training too ({r}): stopping \
                     now stops it, finishing waits for it."
                ));
            }
            (
                STOP_NOW,
                FINISH,
                "no new trial starts; the window closes when the running ones end",
            )
        } else {
            ui.heading("A re-run is training");
            ui.label(format!(
                "The best trial is being re-run with other seeds ({}); its spread is stored \
                 when the last seed is done. Close the window how?",
                reseed.as_deref().unwrap_or("starting")
            ));
            (
                STOP_RESEED,
                FINISH_RESEED,
                "the window closes when the last seed is done and the spread is stored",
            )
        };
        ui.add_space(6.0);
        if ui.button(stop).clicked() {
            choice = Some(Choice::StopNow);
        }
        if ui.button(finish).on_hover_text(finish_hover).clicked() {
            choice = Some(Choice::Finish);
        }
        if ui.button(CANCEL).clicked() {
            choice = Some(Choice::Cancel);
        }
    });
    choice
}
