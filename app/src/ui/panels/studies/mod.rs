//! Studies: open any study database (TradeTune's or one Optuna wrote), the study list with
//! parallel studies (`x_1`, `x_2`, `x_3`) aggregated, and the trial table — a column per
//! parameter and chosen user attribute, sortable by any column, filtered by state or by a
//! parallel-coordinates brush, laid out only for the visible rows so 10,000 trials scroll
//! smoothly — with a trial's details, export and "copy as CSV". The open study is read again
//! every [`POLL_EVERY`] while live, only what changed (see [`live`]). Its Report tab answers
//! "did this study find anything?" (PBO, deflated Sharpe, test split, seed spread; see
//! [`report`]).

mod detail;
mod draw;
pub mod importance;
pub mod list;
pub mod live;
pub mod notes;
pub mod plots;
pub mod report;
pub mod table;

use std::path::PathBuf;
use std::time::Instant;

use tradetune_engine::storage::TrialState;

pub use self::importance::{Importance, ImportanceView};
pub use self::list::{StudyGroup, aggregate};
pub use self::live::{Live, POLL_EVERY};
pub use self::notes::{NoteEdit, Notes};
pub use self::plots::{PcAxes, PlotTab, Plots, TrialMarkers, pc_axes_id, plot_points_id};
pub use self::report::ReportState;
pub use self::table::{TrialTable, visible_csv};
use super::widgets;
use crate::ui::context::{Command, Context};
use crate::ui::dialog::{ExportOf, Pick};
use crate::ui::settings::Settings;
use crate::ui::tasks::{Curves, DbContents, Polled, ReadRows, ReseedMsg, TrialColumn, TrialRow};

/// What the Studies panel does (a button, a shortcut, or a test).
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Open this study database (and remember it for the next launch once it has opened).
    OpenDatabase(PathBuf),
    /// Open the database named in the field beside "Open database…", as the CLI's `--db`
    /// takes it from a shell, `~/` expanded (see [`crate::launch::field_location`]); why not
    /// shows beside the field.
    Connect(String),
    /// Show the trials of this study (or aggregated group).
    SelectStudy(String),
    /// Sort the trial table by this column (again: reverse).
    SortTrials(TrialColumn),
    /// Show or hide a column of the trial table.
    ToggleColumn(TrialColumn),
    /// Read what changed in the open study now (the table and plots also refresh on a timer
    /// while live).
    RefreshTrials,
    /// Read the open study again on a timer (or stop).
    SetLive(bool),
    /// Keep only trials whose parameter lies in this range on its parallel-coordinates axis
    /// (plotted units; None: clear the axis's brush).
    BrushAxis(String, Option<(f64, f64)>),
    /// Show this plot of the selected study.
    ShowPlot(PlotTab),
    /// Draw the contour plot over these two parameters (x, y).
    ContourParams(String, String),
    /// Show the details of this row of the trial table (an index into its rows).
    ShowTrial(usize),
    /// Show only trials in this state (None: all).
    FilterTrials(Option<TrialState>),
    /// Show the selected study's Report view (true) or its trials and plots (false).
    ShowReport(bool),
    /// Report this member of the selected group.
    ReportStudy(String),
    /// Compute the report again if the study changed since (the view asks when it is stale).
    RefreshReport,
    /// Train the reported study's best trial again with this many seeds (in the background).
    Reseed(usize),
    /// The K of "Re-run best trial with K seeds".
    SetReseedSeeds(usize),
    /// Stop the re-run with other seeds.
    CancelReseed,
    /// Save the shown study's trials as CSV (dialog first).
    ExportTrials,
    /// Save the shown study's telemetry as CSV (dialog first).
    ExportTelemetry,
    /// Copy the visible trial table as CSV to the clipboard.
    CopyTrials,
    /// Save the note being edited (on a background job; see [`notes::save`]).
    SaveNote,
    /// An effect beyond the panel (a dialog, a backtest).
    App(Command),
}

impl From<Command> for Action {
    fn from(c: Command) -> Self {
        Action::App(c)
    }
}

/// The Studies panel: the open database and its study list, and one state per feature — the
/// trial table, the plots and their brush, the importances, the live reading, the notes and
/// the report.
#[derive(Debug, Clone, Default)]
pub struct StudiesView {
    /// The open database.
    pub db: Option<DbContents>,
    /// The PostgreSQL URL typed beside "Open database…".
    pub url_input: String,
    /// Why the text in that field names no database TradeTune opens.
    pub url_error: Option<String>,
    /// Whether the database being opened is remembered for the next launch once it opens.
    pub remember: bool,
    /// Its studies, parallel ones aggregated.
    pub groups: Vec<StudyGroup>,
    /// Whether a database is being opened.
    pub opening: bool,
    /// Why the last open or read failed.
    pub error: Option<String>,
    /// The group shown in the trial table.
    pub selected: Option<String>,
    /// A study to select once the database it is in has opened (the run's, after it ends).
    pub pending_select: Option<String>,
    /// Where the open database is read from (polls read it again).
    pub source: Option<PathBuf>,
    /// Counts opens and selections: a read answers for the generation it was asked in, and is
    /// dropped after another open or selection.
    pub generation: u64,
    /// The selected group's trials.
    pub table: TrialTable,
    /// The plots and the brush.
    pub plots: Plots,
    /// The parameter importances.
    pub importance: Importance,
    /// Reading the open study again while it runs.
    pub live: Live,
    /// Notes of studies and trials.
    pub notes: Notes,
    /// The Report view: PBO, deflated Sharpe, seed spread (see [`report`]).
    pub report: ReportState,
}

impl StudiesView {
    /// The panel of a first launch: sorted by trial number, live.
    pub fn new() -> Self {
        StudiesView {
            table: TrialTable {
                sort: (TrialColumn::Number, true),
                ..TrialTable::default()
            },
            ..StudiesView::default()
        }
    }

    /// Draws the panel and carries out what was clicked.
    pub fn ui(&mut self, ui: &mut egui::Ui, cx: &Context, out: &mut Vec<Command>) {
        let mut actions = Vec::new();
        let runs_go_to = runs_database(&cx.settings);
        draw::show(ui, self, runs_go_to.as_deref(), &mut actions);
        for a in actions {
            self.handle(a, cx, out);
        }
    }

    /// Carries out one of the panel's actions.
    pub fn handle(&mut self, action: Action, cx: &Context, out: &mut Vec<Command>) {
        match action {
            Action::OpenDatabase(path) => self.open_database(cx, path),
            Action::Connect(text) => match crate::launch::field_location(text.trim()) {
                Ok(path) => {
                    self.url_error = None;
                    self.open_database(cx, path);
                }
                Err(e) => self.url_error = Some(e),
            },
            Action::SelectStudy(name) => self.select(cx, &name, out),
            Action::SortTrials(column) => self.table.sort_by(column, &self.plots.brush),
            Action::ToggleColumn(column) => self.table.toggle_column(column),
            Action::RefreshTrials => live::poll(self, cx),
            Action::SetLive(on) => self.live.on = on,
            Action::BrushAxis(name, range) => self.set_brush(&name, range),
            Action::ShowPlot(tab) => self.plots.tab = tab,
            Action::ContourParams(x, y) => self.plots.contour = Some((x, y)),
            Action::ShowTrial(i) => self.show_trial(cx, i),
            Action::FilterTrials(filter) => self.table.filter(filter, &self.plots.brush),
            Action::ShowReport(open) => report::show_report(self, cx, open),
            Action::ReportStudy(name) => report::report_study(self, cx, name),
            Action::RefreshReport => report::refresh(self, cx),
            Action::Reseed(seeds) => report::start_reseed(self, cx, seeds),
            Action::SetReseedSeeds(seeds) => self.report.seeds = seeds,
            Action::CancelReseed => report::cancel_reseed(self),
            Action::ExportTrials => self.ask_export(Export::Trials, out),
            Action::ExportTelemetry => self.ask_export(Export::Telemetry, out),
            Action::CopyTrials => {
                out.push(Command::Copy(visible_csv(&self.table)));
                let n = self.table.visible.len();
                out.push(Command::Notice(format!("copied {n} rows as CSV")));
            }
            Action::SaveNote => notes::save(self, cx),
            Action::App(c) => out.push(c),
        }
    }

    /// A note's save answered (see [`notes::saved`]).
    pub fn note_saved(&mut self, saved: crate::ui::tasks::NoteSaved, out: &mut Vec<Command>) {
        notes::saved(self, saved, out);
    }

    /// The selected group.
    pub fn selected_group(&self) -> Option<&StudyGroup> {
        self.groups
            .iter()
            .find(|g| Some(&g.name) == self.selected.as_ref())
    }

    /// The members of the selected group.
    pub fn selected_members(&self) -> Option<&[String]> {
        self.groups
            .iter()
            .find(|g| Some(&g.name) == self.selected.as_ref())
            .map(|g| g.members.as_slice())
    }

    /// Keeps only trials whose parameter `name` lies in `range` (plotted units; None: the
    /// axis is no longer brushed).
    pub fn set_brush(&mut self, name: &str, range: Option<(f64, f64)>) {
        self.plots.set_brush(name, range);
        self.table.refresh(&self.plots.brush);
    }

    /// The trials of `studies` were read, for the view's `generation` then (dropped when
    /// another study was selected or another database opened meanwhile: a study of the same
    /// name in another database is another study).
    pub fn trials_read(
        &mut self,
        generation: u64,
        studies: Vec<String>,
        result: Result<ReadRows, String>,
    ) {
        if generation != self.generation || self.selected_members() != Some(studies.as_slice()) {
            return;
        }
        self.table.loading = false;
        match result {
            Ok(read) => {
                let table = &mut self.table;
                table::discard_rows(std::mem::replace(&mut table.rows, read.rows));
                table.param_axes = read.columns.param_axes;
                table.attr_keys = read.columns.attr_keys;
                table.refresh(&self.plots.brush);
                self.update_importance();
                self.live.last_read = Some(Instant::now());
            }
            Err(e) => self.error = Some(e),
        }
    }

    /// Merges the rows an incremental read found (see [`TrialTable::merge`]); the importances
    /// follow when anything changed.
    pub fn merge(&mut self, rows: Vec<TrialRow>) {
        if self.table.merge(rows, &self.plots.brush) {
            self.update_importance();
        }
    }

    /// A trial's curves were read (kept only while that trial's details are shown).
    pub fn curve_read(&mut self, trial_id: i64, result: Result<Curves, String>) {
        self.table.curve_read(trial_id, result);
    }

    /// Computes the selected group's importances unless they are current (see
    /// [`Importance::update`]).
    pub fn update_importance(&mut self) {
        let group = self.selected_group().cloned();
        self.importance.update(&self.table, group.as_ref());
    }

    /// Takes the background computation's importances once they are ready (called every
    /// frame); returns whether one is still running.
    pub fn poll_importance(&mut self) -> bool {
        let group = self.selected_group().cloned();
        self.importance.poll(&self.table, group.as_ref())
    }

    /// An incremental read finished (see [`live::polled`]).
    pub fn polled(&mut self, cx: &Context, polled: Polled, out: &mut Vec<Command>) {
        live::polled(self, cx, polled, out);
    }

    /// A report was computed (see [`report::computed`]).
    pub fn report_computed(
        &mut self,
        key: crate::ui::tasks::ReportKey,
        result: Result<Box<tradetune_engine::front::report::StudyReport>, String>,
    ) {
        report::computed(self, key, result);
    }

    /// A re-run's message arrived (see [`report::on_reseed`]).
    pub fn on_reseed(&mut self, msg: ReseedMsg, out: &mut Vec<Command>) {
        report::on_reseed(self, msg, out);
    }

    /// Opens `path` without remembering it for the next launch (the default database on
    /// launch).
    pub fn open_unremembered(&mut self, cx: &Context, path: PathBuf) {
        self.open(cx, path);
    }

    /// [`Action::OpenDatabase`]: opens `path`, to be remembered for the next launch once it
    /// has opened (see [`Self::database_opened`]): one that fails is not tried on every launch.
    /// A file given relative (`runs/a.db`, `sqlite:///runs/a.db` in the field) is made absolute
    /// first: it is opened in this process's directory, and remembered as that file, not as a
    /// path the next launch (from the desktop's launcher, in the home directory) would read
    /// elsewhere.
    fn open_database(&mut self, cx: &Context, path: PathBuf) {
        let url = tradetune_engine::storage::is_postgres_url(&path.to_string_lossy());
        let path = if url {
            path
        } else {
            // Fails only for an empty path or an unreadable current directory: the open then
            // says why.
            std::path::absolute(&path).unwrap_or(path)
        };
        self.open(cx, path);
        self.remember = true;
    }

    /// Opens `path` (the view starts over, keeping its sort order, columns, plot, live
    /// setting, report, the study to select and the field's text; an error beside the field
    /// was about an earlier text, and goes).
    fn open(&mut self, cx: &Context, path: PathBuf) {
        let view = self;
        *view = StudiesView {
            opening: true,
            pending_select: view.pending_select.take(),
            url_input: std::mem::take(&mut view.url_input),
            table: view.table.keeping(),
            live: view.live.keeping(),
            plots: Plots {
                tab: view.plots.tab,
                ..Plots::default()
            },
            report: view.report.carried(),
            generation: view.generation + 1,
            source: Some(path.clone()),
            ..StudiesView::default()
        };
        cx.jobs.open_database(path, view.generation);
    }

    /// Opens the database `db` and selects `study` in it once it is open (the run's study,
    /// after it ends or on "Show in Studies"); the database is not remembered for the next
    /// launch.
    pub fn reveal(&mut self, cx: &Context, db: PathBuf, study: String) {
        self.selected = None;
        self.pending_select = Some(study);
        self.open(cx, db);
    }

    /// The run's `study` in `db` has ended. Where the panel shows that database, it reads what
    /// changed (the rows, brush, notes and details stay), selecting the study if nothing is
    /// selected; where it shows nothing, the study is opened there; where it shows another
    /// database, it stays (the Run panel's "Show in Studies" opens the run's): the user's
    /// selection, brush and a note being typed are not thrown away by a run ending.
    pub fn study_ended(&mut self, cx: &Context, db: PathBuf, study: String) {
        let shows_db = self.db.is_some()
            && (self.source.as_ref()).is_some_and(|s| crate::launch::same_db(s, &db));
        if shows_db {
            if self.selected.is_none() {
                self.pending_select = Some(study);
                // Selected now if the list has it; else found by the read below.
                self.select_pending(cx, &mut Vec::new());
            }
            live::poll(self, cx);
        } else if self.db.is_none() && !self.opening {
            self.reveal(cx, db, study);
        }
    }

    /// The database asked for in `generation` has opened (or failed to); the answer to an
    /// open another one has replaced since is dropped (its list, or its failure, is not the
    /// open database's).
    pub fn database_opened(
        &mut self,
        cx: &Context,
        generation: u64,
        result: Result<DbContents, String>,
        out: &mut Vec<Command>,
    ) {
        if generation != self.generation {
            return;
        }
        self.opening = false;
        self.live.last_read = Some(Instant::now());
        match result {
            Ok(db) => {
                if std::mem::take(&mut self.remember) {
                    // A PostgreSQL URL is remembered without its password.
                    let source = self.source.as_ref().unwrap_or(&db.path);
                    out.push(Command::RememberDatabase(PathBuf::from(
                        crate::launch::db_label(source),
                    )));
                }
                self.groups = aggregate(&db.studies);
                out.push(Command::Notice(format!(
                    "{}: {} studies",
                    crate::launch::db_label(&db.path),
                    db.studies.len()
                )));
                self.db = Some(db);
                self.error = None;
                self.select_pending(cx, out);
            }
            Err(e) => self.error = Some(e),
        }
    }

    /// Selects the study asked for before its database opened once the study list has it (a
    /// run that has only just started is found by a later live read).
    pub fn select_pending(&mut self, cx: &Context, out: &mut Vec<Command>) {
        if let Some(name) = self.pending_select.clone()
            && self
                .groups
                .iter()
                .any(|g| g.name == name || g.members.contains(&name))
        {
            self.pending_select = None;
            self.select(cx, &name, out);
        }
    }

    /// [`Action::SelectStudy`]: shows the trials of a study, or of the group it was aggregated
    /// into.
    pub fn select(&mut self, cx: &Context, name: &str, out: &mut Vec<Command>) {
        let Some(db) = &self.db else { return };
        let Some(group) = self
            .groups
            .iter()
            .find(|g| g.name == name || g.members.iter().any(|m| m == name))
        else {
            out.push(Command::Notice(format!("no study {name} in this database")));
            return;
        };
        let path = self.source.clone().unwrap_or_else(|| db.path.clone());
        let (group, members) = (group.name.clone(), group.members.clone());
        self.selected = Some(group);
        self.table.clear();
        self.plots.brush.clear();
        self.table.loading = true;
        self.generation += 1;
        self.live.polling = false;
        let sort = self.table.sort.clone();
        cx.jobs.load_trials(path, members, sort, self.generation);
    }

    /// [`Action::ShowTrial`]: opens the details of row `i` and reads its training curves.
    fn show_trial(&mut self, cx: &Context, i: usize) {
        let table = &mut self.table;
        table.detail = Some(i);
        table.curve = None;
        if let (Some(row), Some(db)) = (table.rows.get(i), &self.db) {
            cx.jobs.load_curve(db.path.clone(), row.trial_id);
        }
    }
}

/// Where Run → Start writes its studies: the settings' database, else `studies.db` in the user
/// data directory (None where there is no user data directory).
pub fn runs_database(settings: &Settings) -> Option<PathBuf> {
    match &settings.study_db {
        Some(p) => Some(p.clone()),
        // Where `launch::default_db` puts it, without making its folder (asked every frame).
        None => Some(dirs::data_dir()?.join("tradetune").join("studies.db")),
    }
}

/// The database to open on launch when none was opened before: the one the Run panel writes
/// to (the settings' or `studies.db` in the user data directory), if it exists.
pub fn launch_database(settings: &Settings) -> Option<PathBuf> {
    let db = runs_database(settings)?;
    let url = tradetune_engine::storage::is_postgres_url(&db.to_string_lossy());
    (url || db.is_file()).then_some(db)
}

/// What an export writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Export {
    /// The trials, as Optuna's `trials_dataframe().to_csv()`.
    Trials,
    /// The telemetry samples.
    Telemetry,
}

impl StudiesView {
    /// [`Action::ExportTrials`], [`Action::ExportTelemetry`]: asks where to save the selected
    /// study's CSV. The database and studies go with the dialog: what is selected when it
    /// answers may be another study.
    fn ask_export(&self, what: Export, out: &mut Vec<Command>) {
        let (Some(name), Some(db), Some(members)) =
            (&self.selected, &self.db, self.selected_members())
        else {
            return;
        };
        let of = |suffix: &str| ExportOf {
            file_name: format!("{name}_{suffix}.csv"),
            db: self.source.clone().unwrap_or_else(|| db.path.clone()),
            studies: members.to_vec(),
        };
        out.push(Command::Pick(match what {
            Export::Trials => Pick::TrialsCsv(of("trials")),
            Export::Telemetry => Pick::TelemetryCsv(of("telemetry")),
        }));
    }

    /// The save dialog of an export was answered: writes the CSV of the studies the dialog was
    /// asked for (`of`, whatever is selected now) to `out` (nothing when cancelled).
    pub fn export_to(cx: &Context, what: Export, of: ExportOf, out: Option<PathBuf>) {
        let Some(out) = out else { return };
        match what {
            Export::Trials => cx.jobs.export_trials(of.db, of.studies, out),
            Export::Telemetry => cx.jobs.export_telemetry(of.db, of.studies, out),
        }
    }
}
