//! The data source in Configure: the bundled sample or files picked with a native dialog, with
//! the inspect summary or the input error inline, and the split.

use std::path::PathBuf;

use super::split;
use crate::ui::command::{Command, Cx};
use crate::ui::draft::Problem;
use crate::ui::panels::widgets;
use crate::ui::state::{AppState, DataState};

pub(super) fn section(
    ui: &mut egui::Ui,
    state: &mut AppState,
    problems: &[Problem],
    commands: &mut Vec<Command>,
) {
    ui.heading("Data");
    ui.horizontal(|ui| {
        if ui
            .selectable_label(state.settings.data_files.is_empty(), "Bundled sample")
            .clicked()
        {
            commands.push(Command::UseBundledData);
        }
        if ui.button("Choose files…").clicked() {
            commands.push(Command::PickDataFiles);
        }
    });
    match &state.data {
        DataState::None => {}
        DataState::Loading(_) => {
            ui.horizontal(|ui| {
                ui.spinner();
                ui.label("loading market data…");
            });
        }
        DataState::Failed(e) => {
            ui.colored_label(widgets::WARN, e.as_str());
        }
        DataState::Ready(d) => {
            let day = |t: i64| {
                chrono::DateTime::from_timestamp(t, 0)
                    .map_or_else(|| t.to_string(), |d| d.format("%Y-%m-%d").to_string())
            };
            ui.label(format!("source: {}", d.source));
            ui.label(format!(
                "{} assets ({}), {} features each, {} … {}",
                d.assets.len(),
                d.assets.join(", "),
                d.shape.n_features,
                day(d.range.0),
                day(d.range.1)
            ));
        }
    }
    let timestamps = state
        .data
        .ready()
        .map_or(&[][..], |d| &d.dataset.timestamps[..]);
    split::editor(ui, &mut state.settings.draft, timestamps, problems);
    super::evaluation::editor(ui, &mut state.settings.draft, timestamps, problems);
}

/// [`Command::UseBundledData`] (no `paths`), [`Command::UseDataFiles`]: trains on `paths`
/// from now on and loads them.
pub fn use_files(cx: &mut Cx, paths: Vec<PathBuf>) {
    cx.state.settings.data_files = paths.clone();
    cx.load_data(paths);
}
