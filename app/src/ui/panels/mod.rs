//! One module per panel. Each is a struct with its own state (`StudiesView`, `RunView`, …) and
//! its own actions (`studies::Action`, …, values a test can send too), drawn with
//! `ui(&mut self, ui, &Context, &mut Vec<Command>)`: it reads the [`Context`] below it and
//! pushes app-level [`Command`]s for effects beyond itself. [`Panels`] is the set the app
//! composes; the app routes the jobs' answers to the panel that asked.

pub mod backtest;
pub mod compare;
pub mod configure;
pub mod devices_view;
pub mod hardware;
pub mod run;
pub mod studies;
pub mod widgets;

use super::context::{Command, Context};
use super::settings::Tab;

/// Every panel, each with its own state.
#[derive(Debug, Clone)]
pub struct Panels {
    pub hardware: hardware::HardwareView,
    pub configure: configure::ConfigureView,
    pub run: run::RunView,
    pub studies: studies::StudiesView,
    pub compare: compare::CompareView,
    pub backtest: backtest::BacktestView,
}

impl Default for Panels {
    fn default() -> Self {
        Panels {
            hardware: Default::default(),
            configure: Default::default(),
            run: Default::default(),
            studies: studies::StudiesView::new(),
            compare: Default::default(),
            backtest: Default::default(),
        }
    }
}

/// The whole window: tab bar, status bar, the current panel.
pub fn draw(
    ui: &mut egui::Ui,
    panels: &mut Panels,
    state: &mut Context,
    commands: &mut Vec<Command>,
) {
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
            ui.label(&state.run.line);
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
            panels.studies.ui(ui, state, commands);
            return;
        }
        egui::ScrollArea::vertical()
            .id_salt("panel")
            .auto_shrink(false)
            .show(ui, |ui| match state.settings.tab {
                Tab::Hardware => panels.hardware.ui(ui, state, commands),
                Tab::Configure => panels.configure.ui(ui, state, commands),
                Tab::Compare => panels.compare.ui(ui, state, panels.studies.db.as_ref()),
                Tab::Backtest => panels.backtest.ui(ui, state, commands),
                Tab::Run | Tab::Studies => {
                    panels
                        .run
                        .ui(ui, state, &panels.studies.table.rows, commands)
                }
            });
    });
}
