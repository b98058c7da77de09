//! Compare: two studies or trials of the open database side by side — the table of
//! `tradetune compare` (duration, samples/s, outcomes, GPU use per device, objective, B vs A)
//! and their optimisation histories overlaid.

use egui_plot::{Legend, Plot, PlotPoints, Points};

use super::widgets;
use crate::ui::context::Context;
use crate::ui::tasks::{Comparison, DbContents};

/// What the Compare panel does (a button, or a test).
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Compare two studies or trials (`study`, `study#N`) of the open database.
    Compare(String, String),
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
    /// The database the result and the error are of (and the comparison under way asked):
    /// once the Studies panel opens another, they are dropped rather than shown under its name.
    pub of: Option<std::path::PathBuf>,
}

impl CompareView {
    /// A comparison finished (or failed): a failure replaces the result it would otherwise be
    /// shown above.
    pub fn finished(&mut self, result: Result<Box<Comparison>, String>) {
        self.loading = false;
        match result {
            Ok(c) => self.result = Some(*c),
            Err(e) => {
                self.result = None;
                self.error = Some(e);
            }
        }
    }

    /// Drops the result and the error of a database other than `db`, the one open now (none
    /// while a comparison of `db` is under way).
    fn keep_only(&mut self, db: Option<&std::path::Path>) {
        if !self.loading && self.of.as_deref() != db {
            self.result = None;
            self.error = None;
            self.of = db.map(std::path::Path::to_path_buf);
        }
    }
}

impl CompareView {
    /// Carries out one of the panel's actions in the database `db` the Studies panel has open
    /// (nothing without one).
    pub fn handle(&mut self, action: Action, cx: &Context, db: Option<&DbContents>) {
        match action {
            Action::Compare(a, b) => {
                if let Some(db) = db {
                    self.loading = true;
                    self.error = None;
                    self.of = Some(db.path.clone());
                    cx.jobs.compare(db.path.clone(), a, b);
                }
            }
        }
    }

    /// Draws the panel over the database `db` the Studies panel has open.
    pub fn ui(&mut self, ui: &mut egui::Ui, cx: &Context, db: Option<&DbContents>) {
        self.keep_only(db.map(|d| d.path.as_path()));
        let mut actions = Vec::new();
        self.draw(ui, db, &mut actions);
        for a in actions {
            self.handle(a, cx, db);
        }
    }
}

impl CompareView {
    fn draw(&mut self, ui: &mut egui::Ui, db: Option<&DbContents>, commands: &mut Vec<Action>) {
        let Some(db) = db else {
            ui.label("Open a study database in Studies first.");
            return;
        };
        ui.label(format!("database: {}", crate::launch::db_label(&db.path)));
        let names: Vec<String> = db.studies.iter().map(|s| s.study.name.clone()).collect();
        let view = self;
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
            commands.push(Action::Compare(view.a.trim().into(), view.b.trim().into()));
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
                    for (name, points) in
                        [(&result.a, &result.a_values), (&result.b, &result.b_values)]
                    {
                        plot.points(
                            Points::new(name.as_str(), PlotPoints::new(points.clone())).radius(3.0),
                        );
                    }
                });
        }
    }
}
