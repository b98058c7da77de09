//! One module per panel. Each holds its own view state (`StudiesView`, `RunView`, …, kept in
//! [`AppState`]), draws it, edits the draft in place, pushes [`Command`]s for actions and
//! carries out the commands and job answers that concern it (the app routes them there).

pub mod backtest;
pub mod compare;
pub mod configure;
pub mod devices_view;
pub mod hardware;
pub mod run;
pub mod studies;
pub mod widgets;

use super::command::Command;
use super::state::{AppState, Tab};

/// The whole window: tab bar, status bar, the current panel.
pub fn draw(ui: &mut egui::Ui, state: &mut AppState, commands: &mut Vec<Command>) {
    egui::Panel::top("tabs").show(ui, |ui| {
        ui.horizontal(|ui| {
            ui.heading("TradeTune");
            ui.separator();
            for tab in Tab::ALL {
                if ui
                    .selectable_label(state.settings.tab == tab, tab.label())
                    .clicked()
                {
                    commands.push(Command::SetTab(tab));
                }
            }
        });
    });
    egui::Panel::bottom("status").show(ui, |ui| {
        ui.horizontal(|ui| {
            let running = if state.run.running {
                format!(
                    "study {} running: {} of {} trials finished",
                    state.run.study,
                    state.run.finished(),
                    state.run.n_trials
                )
            } else {
                "idle".to_owned()
            };
            ui.label(running);
            ui.separator();
            if let Some(last) = state.notices.last() {
                ui.label(last);
            }
        });
    });
    egui::CentralPanel::default().show(ui, |ui| {
        // The trial table scrolls itself (only visible rows are laid out); the other panels
        // scroll as a whole.
        if state.settings.tab == Tab::Studies {
            studies::show(ui, state, commands);
            return;
        }
        egui::ScrollArea::vertical()
            .id_salt("panel")
            .auto_shrink(false)
            .show(ui, |ui| match state.settings.tab {
                Tab::Hardware => hardware::show(ui, state, commands),
                Tab::Configure => configure::show(ui, state, commands),
                Tab::Compare => compare::show(ui, state, commands),
                Tab::Backtest => backtest::show(ui, state, commands),
                Tab::Run | Tab::Studies => run::show(ui, state, commands),
            });
    });
}
