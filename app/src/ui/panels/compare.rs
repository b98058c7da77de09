//! Compare: two studies or trials of the open database side by side — the table of
//! `tradetune compare` (duration, samples/s, outcomes, GPU use per device, objective, B vs A)
//! and their optimisation histories overlaid.

use egui_plot::{Legend, Plot, PlotPoints, Points};

use super::widgets;
use crate::ui::command::{Command, Cx};
use crate::ui::state::AppState;

/// A comparison as computed: the table and each side's values by trial number.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    /// Side A as typed.
    pub a: String,
    /// Side B as typed.
    pub b: String,
    /// The side-by-side table (as `tradetune compare` prints it).
    pub table: String,
    /// (trial number, value) of A's complete trials.
    pub a_values: Vec<[f64; 2]>,
    /// Same for B.
    pub b_values: Vec<[f64; 2]>,
}

/// The Compare panel.
#[derive(Debug, Clone, Default)]
pub struct CompareView {
    /// Side A (`study` or `study#N`).
    pub a: String,
    /// Side B.
    pub b: String,
    /// Being computed.
    pub loading: bool,
    /// The last result.
    pub result: Option<Comparison>,
    /// Why the last comparison failed.
    pub error: Option<String>,
}

impl CompareView {
    /// A comparison finished (or failed).
    pub fn finished(&mut self, result: Result<Box<Comparison>, String>) {
        self.loading = false;
        match result {
            Ok(c) => self.result = Some(*c),
            Err(e) => self.error = Some(e),
        }
    }
}

/// [`Command::Compare`]: compares `a` with `b` in the open database (nothing without one).
pub fn compare(cx: &mut Cx, a: String, b: String) {
    let state = &mut *cx.state;
    if let Some(db) = &state.studies.db {
        state.compare.loading = true;
        state.compare.error = None;
        cx.tasks.compare(db.path.clone(), a, b);
    }
}

/// Draws the panel.
pub fn show(ui: &mut egui::Ui, state: &mut AppState, commands: &mut Vec<Command>) {
    let Some(db) = &state.studies.db else {
        ui.label("Open a study database in Studies first.");
        return;
    };
    ui.label(format!("database: {}", db.path.display()));
    let names: Vec<String> = db.studies.iter().map(|s| s.study.name.clone()).collect();
    let view = &mut state.compare;
    for (label, value) in [("A", &mut view.a), ("B", &mut view.b)] {
        ui.horizontal(|ui| {
            let l = ui.label(label);
            ui.add(
                egui::TextEdit::singleline(value)
                    .hint_text("study or study#N")
                    .desired_width(260.0),
            )
            .labelled_by(l.id);
            egui::ComboBox::from_id_salt(format!("compare_{label}"))
                .selected_text("pick a study")
                .show_ui(ui, |ui| {
                    for n in &names {
                        if ui.selectable_label(value == n, n).clicked() {
                            *value = n.clone();
                        }
                    }
                })
                .response
                .on_hover_text(format!("pick a study for {label}"));
        });
    }
    let ready = !view.a.trim().is_empty() && !view.b.trim().is_empty();
    if ui
        .add_enabled(
            ready && !view.loading,
            egui::Button::new("Compare A with B"),
        )
        .clicked()
    {
        commands.push(Command::Compare(view.a.trim().into(), view.b.trim().into()));
    }
    if view.loading {
        ui.spinner();
    }
    if let Some(e) = &view.error {
        ui.colored_label(widgets::WARN, e.as_str());
    }
    if let Some(result) = &view.result {
        ui.separator();
        ui.monospace(&result.table);
        ui.label("optimisation histories: each complete trial's value by trial number");
        Plot::new("compare_history")
            .height(220.0)
            .legend(Legend::default())
            .x_axis_label("trial number")
            .y_axis_label("objective")
            .show(ui, |plot| {
                for (name, points) in [(&result.a, &result.a_values), (&result.b, &result.b_values)]
                {
                    plot.points(
                        Points::new(name.as_str(), PlotPoints::new(points.clone())).radius(3.0),
                    );
                }
            });
    }
}
