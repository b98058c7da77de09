//! Backtest: a checkpoint's deterministic policy on a held-out split against the equal-weight
//! buy-and-hold of the same assets — the equity curves and the metrics table of
//! `tradetune backtest`.

use egui_plot::{Legend, Line, Plot, PlotPoints};

use super::widgets;
use crate::ui::command::Command;
use crate::ui::state::AppState;

/// Draws the panel.
pub fn show(ui: &mut egui::Ui, state: &mut AppState, commands: &mut Vec<Command>) {
    let view = &mut state.backtest;
    ui.horizontal(|ui| {
        if ui.button("Choose checkpoint…").clicked() {
            commands.push(Command::PickCheckpoint);
        }
        match &view.checkpoint {
            Some(p) => ui.label(p.display().to_string()),
            None => ui.label("a directory written by `tradetune train --out DIR`"),
        };
    });
    ui.horizontal(|ui| {
        let l = ui.label("split");
        egui::ComboBox::from_id_salt("backtest_split")
            .selected_text(view.split.clone())
            .show_ui(ui, |ui| {
                for s in ["test", "validation", "train"] {
                    ui.selectable_value(&mut view.split, s.to_owned(), s);
                }
            })
            .response
            .labelled_by(l.id);
        if ui
            .add_enabled(
                view.checkpoint.is_some() && !view.running,
                egui::Button::new("Run backtest"),
            )
            .clicked()
        {
            commands.push(Command::Backtest);
        }
        if view.running {
            ui.spinner();
        }
    });
    if let Some(e) = &view.error {
        ui.colored_label(widgets::WARN, e.as_str());
    }
    let Some(r) = &view.result else {
        return;
    };
    ui.separator();
    ui.label(&r.about);
    ui.monospace(&r.table);
    ui.label("equity: agent against equal weight (days since the split's first bar)");
    Plot::new("backtest_equity")
        .height(260.0)
        .legend(Legend::default())
        .show(ui, |plot| {
            plot.line(Line::new("agent", PlotPoints::new(r.agent.clone())));
            plot.line(Line::new(
                "equal weight",
                PlotPoints::new(r.equal_weight.clone()),
            ));
        });
}
