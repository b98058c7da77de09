//! The data source in Configure: the bundled sample or files picked with a native dialog, with
//! the inspect summary or the input error inline, and the split.

use super::{Action, split};
use crate::ui::context::{Command, Context, DataState};
use crate::ui::dialog::Pick;
use crate::ui::draft::Problem;
use crate::ui::panels::widgets;

pub(super) fn section(
    ui: &mut egui::Ui,
    state: &mut Context,
    problems: &[Problem],
    commands: &mut Vec<Action>,
) {
    ui.heading("Data");
    ui.horizontal(|ui| {
        if ui
            .selectable_label(state.settings.data_files.is_empty(), "Bundled sample")
            .clicked()
        {
            commands.push(Command::UseData(Vec::new()).into());
        }
        if ui.button("Choose files…").clicked() {
            commands.push(Command::Pick(Pick::DataFiles).into());
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
