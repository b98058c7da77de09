//! Studies: open any study database (TradeTune's or one Optuna wrote), the study list with
//! parallel studies (`x_1`, `x_2`, `x_3`) aggregated, and the trial table — a column per
//! parameter and chosen user attribute, sortable by any column, filtered by state or by a
//! parallel-coordinates brush, laid out only for the visible rows so 10,000 trials scroll
//! smoothly — with a trial's details, export and "copy as CSV". The open study is read again
//! every [`POLL_EVERY`] while live, only what changed (see [`live`]). Its Report tab answers
//! "did this study find anything?" (PBO, deflated Sharpe, test split, seed spread; see
//! [`report`]).

mod contour;
mod detail;
mod importance;
pub mod live;
mod notes;
mod parallel;
pub mod plots;
pub mod report;
mod row;
mod table;
pub mod timeline;
mod view;

use std::path::PathBuf;
use std::time::Duration;

use tradetune_engine::storage::TrialState;

pub use self::importance::ImportanceView;
pub use self::live::{LiveRequest, Polled};
pub use self::plots::{PcAxes, TrialMarkers, pc_axes_id, plot_points_id};
pub use self::table::visible_csv;
pub use self::view::{
    Columns, Curves, NoteEdit, ParamAxis, ParamCell, PlotTab, ReadRows, Scale, StudiesView,
    StudyGroup, TrialColumn, TrialRow, aggregate, sig4,
};
use super::widgets;
use crate::ui::command::{Command, Cx};
use crate::ui::dialog::Pick;
use crate::ui::settings::Settings;
use crate::ui::state::AppState;
use crate::ui::tasks::DbContents;
use detail::detail;
use table::trial_table;

/// How often the open study is read again while live.
pub const POLL_EVERY: Duration = Duration::from_secs(2);

/// Draws the panel.
pub fn show(ui: &mut egui::Ui, state: &mut AppState, commands: &mut Vec<Command>) {
    let view = &mut state.studies;
    if view.poll_importance() {
        // A large study's importances are computed on a background thread: look again soon.
        ui.ctx()
            .request_repaint_after(std::time::Duration::from_millis(100));
    }
    ui.horizontal(|ui| {
        if ui.button("Open database…").clicked() {
            commands.push(Command::PickDatabase);
        }
        // A PostgreSQL study (workers on several machines): its URL; the password comes from
        // ~/.pgpass (or PGPASSWORD) and is never shown or saved.
        let field = ui.add(
            egui::TextEdit::singleline(&mut view.url_input)
                .hint_text("postgresql://user@host/dbname")
                .desired_width(260.0),
        );
        let entered = field.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter));
        let url = view.url_input.trim().to_owned();
        if (ui.button("Connect").clicked() || entered) && !url.is_empty() {
            commands.push(Command::OpenDatabase(PathBuf::from(url)));
        }
        match &view.db {
            Some(db) => ui.label(crate::launch::db_label(&db.path)),
            None => ui.label("no database open"),
        };
        if view.opening {
            ui.spinner();
        }
        if view.db.is_some() {
            let mut live = view.live;
            if ui
                .checkbox(&mut live, "live")
                .on_hover_text(format!(
                    "read the open study again every {} s: trials that started or finished",
                    view.poll_every.as_secs_f32()
                ))
                .changed()
            {
                commands.push(Command::SetLive(live));
            }
            if ui.button("Refresh").clicked() {
                commands.push(Command::RefreshTrials);
            }
        }
    });
    if live::due(view) {
        commands.push(Command::RefreshTrials);
    }
    if view.live && view.db.is_some() {
        ui.ctx().request_repaint_after(view.poll_every);
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
                commands.push(Command::SelectStudy(g.name.clone()));
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
        let open = state.studies.report.open;
        if ui.selectable_label(!open, "Trials").clicked() && open {
            commands.push(Command::ShowReport(false));
        }
        if ui
            .selectable_label(open, "Report")
            .on_hover_text(
                "did this study find anything? PBO, deflated Sharpe, the test split, seed spread",
            )
            .clicked()
            && !open
        {
            commands.push(Command::ShowReport(true));
        }
    });
    notes::study_notes(ui, &mut state.studies);
    let view = &state.studies;
    if view.loading_trials {
        ui.horizontal(|ui| {
            ui.spinner();
            ui.label("reading trials…");
        });
    }
    if view.report.open {
        report::report_view(ui, view, commands);
        return;
    }
    ui.horizontal_wrapped(|ui| {
        let l = ui.label("state");
        let filter = view.state_filter;
        egui::ComboBox::from_id_salt("state_filter")
            .selected_text(filter.map_or("all".to_owned(), |s| s.to_string()))
            .show_ui(ui, |ui| {
                if ui.selectable_label(filter.is_none(), "all").clicked() {
                    commands.push(Command::FilterTrials(None));
                }
                for s in TrialState::ALL {
                    if ui
                        .selectable_label(filter == Some(s), s.to_string())
                        .clicked()
                    {
                        commands.push(Command::FilterTrials(Some(s)));
                    }
                }
            })
            .response
            .labelled_by(l.id);
        if ui.button("Export trials CSV…").clicked() {
            commands.push(Command::ExportTrials);
        }
        if ui.button("Copy table as CSV").clicked() {
            commands.push(Command::CopyTrials);
        }
        if ui.button("Export telemetry CSV…").clicked() {
            commands.push(Command::ExportTelemetry);
        }
        ui.label(format!(
            "{} of {} trials",
            view.visible.len(),
            view.rows.len()
        ));
        ui.menu_button("Columns", |ui| {
            for c in TrialColumn::ALL.into_iter().chain(
                view.param_axes
                    .iter()
                    .map(|a| TrialColumn::Param(a.name.clone())),
            ) {
                let mut shown = view.is_shown(&c);
                if ui.checkbox(&mut shown, c.label()).changed() {
                    commands.push(Command::ToggleColumn(c));
                }
            }
            if !view.attr_keys.is_empty() {
                ui.separator();
                ui.label("user attributes");
                for k in &view.attr_keys {
                    let c = TrialColumn::Attr(k.clone());
                    let mut shown = view.is_shown(&c);
                    if ui.checkbox(&mut shown, k).changed() {
                        commands.push(Command::ToggleColumn(c));
                    }
                }
            }
        });
        if !view.brush.is_empty() && ui.button("Clear brushes").clicked() {
            for (name, _, _) in &view.brush {
                commands.push(Command::BrushAxis(name.clone(), None));
            }
        }
    });
    if let Some(i) = view.detail
        && let Some(row) = view.rows.get(i)
    {
        let curve = view
            .curve
            .as_ref()
            .filter(|(id, _)| *id == row.trial_id)
            .map(|(_, c)| c);
        detail(ui, row, curve, commands);
        notes::trial_note(ui, &mut state.studies, i);
    }
    let view = &state.studies;
    let mut plot_param = view.plot_param.clone();
    egui::CollapsingHeader::new("Plots")
        .default_open(true)
        .show(ui, |ui| {
            // The plots scroll in half the height left; the trial table keeps the rest.
            egui::ScrollArea::vertical()
                .id_salt("study_plots")
                .max_height((ui.available_height() * 0.55).max(200.0))
                .show(ui, |ui| {
                    plots::plots(ui, view, &mut plot_param, commands);
                    let importance = view
                        .importance
                        .as_ref()
                        .filter(|i| view.selected.as_ref() == Some(&i.group));
                    importance::importance_plot(ui, importance);
                });
        });
    let clicked = trial_table(ui, view, commands);
    let view = &mut state.studies;
    view.plot_param = plot_param;
    if let Some(i) = clicked {
        commands.push(Command::ShowTrial(i));
    }
}

/// The database to open on launch when none was opened before: the one the Run panel writes
/// to (the settings' or `studies.db` in the user data directory), if it exists.
pub fn launch_database(settings: &Settings) -> Option<PathBuf> {
    let db = match &settings.study_db {
        Some(p) => p.clone(),
        None => dirs::data_dir()?.join("tradetune").join("studies.db"),
    };
    let url = tradetune_engine::storage::is_postgres_url(&db.to_string_lossy());
    (url || db.is_file()).then_some(db)
}

/// Opens `path` without remembering it for the next launch (the default database on launch).
pub fn open_unremembered(cx: &mut Cx, path: PathBuf) {
    open(cx, path);
}

/// [`Command::OpenDatabase`]: opens `path` and remembers it for the next launch.
/// A PostgreSQL URL is remembered without its password.
pub fn open_database(cx: &mut Cx, path: PathBuf) {
    cx.state.settings.database = Some(PathBuf::from(crate::launch::db_label(&path)));
    open(cx, path);
}

/// Opens `path` (the view starts over, keeping its sort order and the study to select).
fn open(cx: &mut Cx, path: PathBuf) {
    let view = &mut cx.state.studies;
    *view = StudiesView {
        opening: true,
        sort: view.sort.clone(),
        pending_select: view.pending_select.take(),
        url_input: std::mem::take(&mut view.url_input),
        live: view.live,
        poll_every: view.poll_every,
        hidden: std::mem::take(&mut view.hidden),
        shown_attrs: std::mem::take(&mut view.shown_attrs),
        plot_tab: view.plot_tab,
        report: view.report.carried(),
        generation: view.generation + 1,
        source: Some(path.clone()),
        ..StudiesView::default()
    };
    cx.tasks.open_database(path);
}

/// Opens the database `db` and selects `study` in it once it is open (the run's study, after
/// it ends or on "Show in Studies"); the database is not remembered for the next launch.
pub fn reveal(cx: &mut Cx, db: PathBuf, study: String) {
    cx.state.studies.selected = None;
    cx.state.studies.pending_select = Some(study);
    open(cx, db);
}

/// The database asked for has opened (or failed to).
pub fn database_opened(cx: &mut Cx, result: Result<DbContents, String>) {
    let state = &mut *cx.state;
    state.studies.opening = false;
    state.studies.last_read = Some(std::time::Instant::now());
    match result {
        Ok(db) => {
            state.studies.groups = aggregate(&db.studies);
            state.notice(format!(
                "{}: {} studies",
                db.path.display(),
                db.studies.len()
            ));
            state.studies.db = Some(db);
            state.studies.error = None;
            // A study not there yet (a run that has only just started) is selected once a
            // live read finds it.
            if let Some(name) = state.studies.pending_select.clone()
                && state
                    .studies
                    .groups
                    .iter()
                    .any(|g| g.name == name || g.members.contains(&name))
            {
                state.studies.pending_select = None;
                select(cx, &name);
            }
        }
        Err(e) => state.studies.error = Some(e),
    }
}

/// [`Command::SelectStudy`]: shows the trials of a study, or of the group it was aggregated
/// into.
pub fn select(cx: &mut Cx, name: &str) {
    let state = &mut *cx.state;
    let Some(db) = &state.studies.db else { return };
    let Some(group) = state
        .studies
        .groups
        .iter()
        .find(|g| g.name == name || g.members.iter().any(|m| m == name))
    else {
        state.notice(format!("no study {name} in this database"));
        return;
    };
    let path = state
        .studies
        .source
        .clone()
        .unwrap_or_else(|| db.path.clone());
    let (group, members) = (group.name.clone(), group.members.clone());
    let view = &mut state.studies;
    view.selected = Some(group);
    view::discard_rows(std::mem::take(&mut view.rows));
    view.visible.clear();
    view.param_axes.clear();
    view.attr_keys.clear();
    view.brush.clear();
    view.detail = None;
    view.loading_trials = true;
    view.generation += 1;
    view.polling = false;
    let sort = view.sort.clone();
    cx.tasks.load_trials(path, members, sort);
}

/// [`Command::ShowTrial`]: opens the details of row `i` and reads its training curves.
pub fn show_trial(cx: &mut Cx, i: usize) {
    let view = &mut cx.state.studies;
    view.detail = Some(i);
    view.curve = None;
    if let (Some(row), Some(db)) = (view.rows.get(i), &view.db) {
        cx.tasks.load_curve(db.path.clone(), row.trial_id);
    }
}

/// What an export writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Export {
    /// The trials, as Optuna's `trials_dataframe().to_csv()`.
    Trials,
    /// The telemetry samples.
    Telemetry,
}

/// [`Command::ExportTrials`], [`Command::ExportTelemetry`]: asks where to save the selected
/// study's CSV.
pub fn ask_export(cx: &mut Cx, what: Export) {
    if let Some(name) = &cx.state.studies.selected {
        cx.tasks.pick(match what {
            Export::Trials => Pick::TrialsCsv(format!("{name}_trials.csv")),
            Export::Telemetry => Pick::TelemetryCsv(format!("{name}_telemetry.csv")),
        });
    }
}

/// The save dialog of an export was answered: writes the selected group's CSV to `out`
/// (nothing when cancelled).
pub fn export_to(cx: &mut Cx, what: Export, out: Option<PathBuf>) {
    let view = &cx.state.studies;
    let (Some(out), Some(db), Some(members)) = (out, &view.db, view.selected_members()) else {
        return;
    };
    let (db, members) = (db.path.clone(), members.to_vec());
    match what {
        Export::Trials => cx.tasks.export_trials(db, members, out),
        Export::Telemetry => cx.tasks.export_telemetry(db, members, out),
    }
}

/// [`Command::CopyTrials`]: the visible rows as CSV, onto the clipboard.
pub fn copy_visible(cx: &mut Cx) {
    let view = &cx.state.studies;
    *cx.clipboard = Some(visible_csv(view));
    let n = view.visible.len();
    cx.state.notice(format!("copied {n} rows as CSV"));
}
