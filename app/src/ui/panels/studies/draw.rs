//! The Studies panel's layout: the database bar, the study list, the selected study's notes,
//! then its Report view or its filters, trial details, plots and importances, and the trial
//! table.

use tradetune_engine::storage::TrialState;

use super::{Action, StudiesView, widgets};
use crate::ui::context::Command;
use crate::ui::dialog::Pick;
use crate::ui::tasks::{TrialColumn, sig4};

/// Draws the panel.
pub(super) fn show(
    ui: &mut egui::Ui,
    panel: &mut StudiesView,
    runs_go_to: Option<&std::path::Path>,
    commands: &mut Vec<Action>,
) {
    let view = &mut *panel;
    if view.poll_importance() {
        // A large study's importances are computed on a background thread: look again soon.
        ui.ctx()
            .request_repaint_after(std::time::Duration::from_millis(100));
    }
    ui.horizontal(|ui| {
        if ui.button("Open database…").clicked() {
            commands.push(Command::Pick(Pick::Database).into());
        }
        // A PostgreSQL study (workers on several machines): its URL; the password comes from
        // ~/.pgpass (or PGPASSWORD) and is never shown or saved. Read as the CLI's --db reads
        // it: a path, sqlite:///path, postgresql[+driver]://…
        let field = ui.add(
            egui::TextEdit::singleline(&mut view.url_input)
                .hint_text("postgresql://user@host/dbname")
                .desired_width(260.0),
        );
        let entered = field.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter));
        let url = view.url_input.trim().to_owned();
        if (ui.button("Connect").clicked() || entered) && !url.is_empty() {
            commands.push(Action::Connect(url));
        }
        if let Some(e) = &view.url_error {
            ui.colored_label(widgets::WARN, e.as_str());
        }
        match &view.db {
            Some(db) => ui.label(crate::launch::db_label(&db.path)),
            None => ui.label("no database open"),
        };
        // Run → Start writes to one database (the default one until told): this one, on a
        // click, where it is another.
        if let Some(db) = &view.db {
            let here = crate::launch::db_label(&db.path);
            let there = runs_go_to.map(crate::launch::db_label);
            if there.as_deref() != Some(here.as_str())
                && ui
                    .button("Write new runs here")
                    .on_hover_text(format!(
                        "Run → Start writes its studies to {}; write them to this database \
                         from now on",
                        there.as_deref().unwrap_or("no database")
                    ))
                    .clicked()
            {
                commands.push(Command::WriteRunsTo(db.path.clone()).into());
            }
        }
        if view.opening {
            ui.spinner();
        }
        if view.db.is_some() {
            let mut live = view.live.on;
            if ui
                .checkbox(&mut live, "live")
                .on_hover_text(format!(
                    "read the open study again every {} s: trials that started or finished",
                    view.live.poll_every.as_secs_f32()
                ))
                .changed()
            {
                commands.push(Action::SetLive(live));
            }
            if ui.button("Refresh").clicked() {
                commands.push(Action::RefreshTrials);
            }
        }
    });
    if super::live::due(view) {
        commands.push(Action::RefreshTrials);
    }
    if view.live.on && view.db.is_some() {
        ui.ctx().request_repaint_after(view.live.poll_every);
    }
    if let Some(e) = &view.error {
        ui.colored_label(widgets::WARN, e.as_str());
    }
    if view.db.is_none() {
        return;
    }

    ui.heading("Studies");
    egui::Grid::new("study_list").striped(true).show(ui, |ui| {
        for h in [
            "study",
            "trials",
            "complete",
            "pruned",
            "failed",
            "running",
            "best",
            "parallel studies",
        ] {
            ui.strong(h);
        }
        ui.end_row();
        for g in &view.groups {
            let selected = view.selected.as_deref() == Some(g.name.as_str());
            if ui.selectable_label(selected, &g.name).clicked() {
                commands.push(Action::SelectStudy(g.name.clone()));
            }
            ui.label(g.n_trials().to_string());
            ui.label(g.n(TrialState::Complete).to_string());
            ui.label(g.n(TrialState::Pruned).to_string());
            ui.label(g.n(TrialState::Fail).to_string());
            ui.label(g.n(TrialState::Running).to_string());
            ui.label(g.best.map_or(String::new(), sig4));
            ui.label(if g.members.len() > 1 {
                g.members.join(", ")
            } else {
                String::new()
            });
            ui.end_row();
        }
    });

    let Some(selected) = view.selected.clone() else {
        return;
    };
    ui.separator();
    ui.horizontal(|ui| {
        ui.heading(format!("Trials of {selected}"));
        ui.separator();
        let open = view.report.open;
        if ui.selectable_label(!open, "Trials").clicked() && open {
            commands.push(Action::ShowReport(false));
        }
        if ui
            .selectable_label(open, "Report")
            .on_hover_text(
                "did this study find anything? PBO, deflated Sharpe, the test split, seed spread",
            )
            .clicked()
            && !open
        {
            commands.push(Action::ShowReport(true));
        }
    });
    super::notes::study_notes(ui, panel, commands);
    let view = &*panel;
    if view.table.loading {
        ui.horizontal(|ui| {
            ui.spinner();
            ui.label("reading trials…");
        });
    }
    if view.report.open {
        super::report::report_view(ui, view, commands);
        return;
    }
    ui.horizontal_wrapped(|ui| {
        let l = ui.label("state");
        let filter = view.table.state_filter;
        egui::ComboBox::from_id_salt("state_filter")
            .selected_text(filter.map_or("all".to_owned(), |s| s.to_string()))
            .show_ui(ui, |ui| {
                if ui.selectable_label(filter.is_none(), "all").clicked() {
                    commands.push(Action::FilterTrials(None));
                }
                for s in TrialState::ALL {
                    if ui
                        .selectable_label(filter == Some(s), s.to_string())
                        .clicked()
                    {
                        commands.push(Action::FilterTrials(Some(s)));
                    }
                }
            })
            .response
            .labelled_by(l.id);
        if ui.button("Export trials CSV…").clicked() {
            commands.push(Action::ExportTrials);
        }
        if ui.button("Copy table as CSV").clicked() {
            commands.push(Action::CopyTrials);
        }
        if ui.button("Export telemetry CSV…").clicked() {
            commands.push(Action::ExportTelemetry);
        }
        ui.label(format!(
            "{} of {} trials",
            view.table.visible.len(),
            view.table.rows.len()
        ));
        ui.menu_button("Columns", |ui| {
            for c in TrialColumn::ALL.into_iter().chain(
                view.table
                    .param_axes
                    .iter()
                    .map(|a| TrialColumn::Param(a.name.clone())),
            ) {
                let mut shown = view.table.is_shown(&c);
                if ui.checkbox(&mut shown, c.label()).changed() {
                    commands.push(Action::ToggleColumn(c));
                }
            }
            if !view.table.attr_keys.is_empty() {
                ui.separator();
                ui.label("user attributes");
                for k in &view.table.attr_keys {
                    let c = TrialColumn::Attr(k.clone());
                    let mut shown = view.table.is_shown(&c);
                    if ui.checkbox(&mut shown, k).changed() {
                        commands.push(Action::ToggleColumn(c));
                    }
                }
            }
        });
        if !view.plots.brush.is_empty() && ui.button("Clear brushes").clicked() {
            for (name, _, _) in &view.plots.brush {
                commands.push(Action::BrushAxis(name.clone(), None));
            }
        }
    });
    if let Some(i) = view.table.detail
        && let Some(row) = view.table.rows.get(i)
    {
        let curve = view
            .table
            .curve
            .as_ref()
            .filter(|(id, _)| *id == row.trial_id)
            .map(|(_, c)| c);
        super::detail::detail(ui, row, curve, commands);
        super::notes::trial_note(ui, panel, i, commands);
    }
    let view = &*panel;
    let mut plot_param = view.plots.param.clone();
    egui::CollapsingHeader::new("Plots")
        .default_open(true)
        .show(ui, |ui| {
            // The plots scroll in half the height left; the trial table keeps the rest.
            egui::ScrollArea::vertical()
                .id_salt("study_plots")
                .max_height((ui.available_height() * 0.55).max(200.0))
                .show(ui, |ui| {
                    super::plots::plots(ui, view, &mut plot_param, commands);
                    let importance = view
                        .importance
                        .shown
                        .as_ref()
                        .filter(|i| view.selected.as_ref() == Some(&i.group));
                    super::importance::importance_plot(ui, importance);
                });
        });
    let best = view.selected_group().and_then(|g| g.best);
    let clicked = super::table::trial_table(ui, &view.table, best, commands);
    panel.plots.param = plot_param;
    if let Some(i) = clicked {
        commands.push(Action::ShowTrial(i));
    }
}
