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
    /// The notices window is open.
    pub notices_open: bool,
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
            notices_open: false,
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
        // The buttons at the right end, laid out first: a long notice is cut short (all of it
        // on hover) and cannot push them off the window.
        ui.with_layout(egui::Layout::right_to_left(egui::Align::Center), |ui| {
            let unread = state.unread_warnings();
            if unread > 0 {
                let words = if unread == 1 {
                    "1 warning".to_string()
                } else {
                    format!("{unread} warnings")
                };
                let warn = ui.visuals().warn_fg_color;
                if ui
                    .button(egui::RichText::new(words).color(warn))
                    .on_hover_text("the notices so far, warnings first")
                    .clicked()
                {
                    panels.notices_open = true;
                }
            } else if state.notices.len() > 1
                && ui
                    .small_button("Notices…")
                    .on_hover_text("the notices so far")
                    .clicked()
            {
                panels.notices_open = true;
            }
            ui.with_layout(egui::Layout::left_to_right(egui::Align::Center), |ui| {
                ui.label(&state.run.line);
                ui.separator();
                if let Some(last) = state.notices.last() {
                    ui.add(egui::Label::new(last.as_str()).truncate())
                        .on_hover_text(last.as_str());
                }
            });
        });
    });
    notices_window(ui, &mut panels.notices_open, state, commands);
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
                    let rows_db = panels.studies.db.as_ref().map(|d| d.path.as_path());
                    panels
                        .run
                        .ui(ui, state, rows_db, &panels.studies.table.rows, commands)
                }
            });
    });
}

/// The notices so far in a window of their own (the status bar shows the last): the warnings
/// first (the last 50 of them, however many notices came after), newest first, then the other
/// notices, newest first; "Dismiss warnings" clears the status bar's button of those shown.
fn notices_window(
    ui: &mut egui::Ui,
    open: &mut bool,
    state: &Context,
    commands: &mut Vec<Command>,
) {
    if !*open {
        return;
    }
    let mut keep_open = true;
    egui::Window::new("Notices")
        .open(&mut keep_open)
        .default_width(640.0)
        .show(ui.ctx(), |ui| {
            let warn = ui.visuals().warn_fg_color;
            let others: Vec<&String> = state
                .notices
                .iter()
                .rev()
                .filter(|n| !super::context::is_warning(n))
                .collect();
            let warnings: Vec<&String> = state.warnings.iter().rev().map(|(_, w)| w).collect();
            if state.unread_warnings() > 0 && ui.button("Dismiss warnings").clicked() {
                commands.push(Command::DismissWarnings(state.warnings_total));
            }
            egui::ScrollArea::vertical()
                .max_height(360.0)
                .show(ui, |ui| {
                    for n in &warnings {
                        ui.label(egui::RichText::new(n.as_str()).color(warn));
                    }
                    if !warnings.is_empty() && !others.is_empty() {
                        ui.separator();
                    }
                    for n in &others {
                        ui.label(n.as_str());
                    }
                });
        });
    *open &= keep_open;
}
