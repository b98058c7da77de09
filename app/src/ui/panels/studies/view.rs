//! What the Studies panel shows, apart from how it draws it: the open database's studies
//! (parallel ones aggregated), the selected group's trials as formatted rows, their order,
//! filter and the trial whose details are open.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use tradetune_engine::storage::{
    OptunaDistribution, ParamValue, StudyDirection, StudySummary, TrialParam, TrialState,
};
use tradetune_engine::study::importance::{ImportanceTrial, Importances, PedAnova};

use super::importance::ImportanceView;
use super::report::ReportState;
use crate::ui::tasks::DbContents;

/// A study, or several parallel studies (`x_1`, `x_2`, `x_3`) shown as one.
#[derive(Debug, Clone, PartialEq)]
pub struct StudyGroup {
    /// The shared name (`x`), or the study's own name.
    pub name: String,
    /// The studies in it.
    pub members: Vec<String>,
    /// Trials in each state, summed.
    pub n_by_state: [usize; 5],
    /// Best value over the members (by each study's direction).
    pub best: Option<f64>,
    /// Whether smaller values are better (the first member's direction).
    pub minimize: bool,
}

impl StudyGroup {
    /// Trials in all states.
    pub fn n_trials(&self) -> usize {
        self.n_by_state.iter().sum()
    }

    /// Trials in `state`.
    pub fn n(&self, state: TrialState) -> usize {
        self.n_by_state[state.index()]
    }
}

/// Groups studies named `base_N` (two or more sharing `base`) into one entry; the others stay
/// alone. The user runs three parallel copies of one study this way.
pub fn aggregate(studies: &[StudySummary]) -> Vec<StudyGroup> {
    fn base(name: &str) -> Option<&str> {
        let (base, n) = name.rsplit_once('_')?;
        (!base.is_empty() && !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())).then_some(base)
    }
    let mut groups: Vec<StudyGroup> = Vec::new();
    for s in studies {
        let name = &s.study.name;
        let shared = base(name).filter(|b| {
            studies
                .iter()
                .filter(|o| base(&o.study.name) == Some(*b))
                .count()
                >= 2
        });
        let key = shared.unwrap_or(name);
        let minimize = s
            .study
            .directions
            .first()
            .is_none_or(|d| *d == StudyDirection::Minimize);
        let best = s.best.map(|(_, v)| v);
        match groups.iter_mut().find(|g| g.name == key) {
            Some(g) => {
                g.members.push(name.clone());
                for (acc, n) in g.n_by_state.iter_mut().zip(s.n_trials_by_state) {
                    *acc += n;
                }
                g.best = match (g.best, best) {
                    (Some(a), Some(b)) => Some(if minimize { a.min(b) } else { a.max(b) }),
                    (a, b) => a.or(b),
                };
            }
            None => groups.push(StudyGroup {
                name: key.to_owned(),
                members: vec![name.clone()],
                n_by_state: s.n_trials_by_state,
                best,
                minimize,
            }),
        }
    }
    groups
}

use super::row::param_text;
pub use super::row::{AxisPositions, ParamCell, TrialColumn, TrialRow, sig4};

/// The Studies panel's view of the open database.
#[derive(Debug, Clone, Default)]
pub struct StudiesView {
    /// The open database.
    pub db: Option<DbContents>,
    /// The PostgreSQL URL typed beside "Open database…".
    pub url_input: String,
    /// Its studies, parallel ones aggregated.
    pub groups: Vec<StudyGroup>,
    /// Whether a database is being opened.
    pub opening: bool,
    /// Whether the selected study's trials are being read.
    pub loading_trials: bool,
    /// Why the last open failed.
    pub error: Option<String>,
    /// The group shown in the trial table.
    pub selected: Option<String>,
    /// Its trials, sorted and filtered by the fields below.
    pub rows: Vec<TrialRow>,
    /// The rows shown (indices into `rows`) after the state filter.
    pub visible: Vec<usize>,
    /// Sort column and direction.
    pub sort: (TrialColumn, bool),
    /// Show only this state.
    pub state_filter: Option<TrialState>,
    /// The row whose details are shown.
    pub detail: Option<usize>,
    /// The learning curve of the trial shown (its trial id, then the points by metric as
    /// (env steps, value), or why they could not be read); None while it loads.
    pub curve: Option<(i64, Result<Curves, String>)>,
    /// The parameter on the x axis of the parameter-vs-objective plot.
    pub plot_param: Option<String>,
    /// Columns hidden from the trial table.
    pub hidden: Vec<TrialColumn>,
    /// A study to select once the database it is in has opened (the run's, after it ends).
    pub pending_select: Option<String>,
    /// The selected group's parameter importances (PED-ANOVA).
    pub importance: Option<ImportanceView>,
    /// Importances being computed on a background thread (large studies, see
    /// [`IMPORTANCE_IN_BACKGROUND`]).
    pub importance_job: Option<ImportanceJob>,
    /// Whether the trial counts changed while [`Self::importance_job`] ran.
    pub importance_stale: bool,
    /// The note being edited, if any.
    pub note_edit: Option<NoteEdit>,
    /// Why the last note could not be saved.
    pub note_error: Option<String>,
    /// The selected group's parameters (one table column and plot axis each) and how their
    /// axes are scaled.
    pub param_axes: Vec<ParamAxis>,
    /// The user attributes its trials carry (a column each, when chosen).
    pub attr_keys: Vec<String>,
    /// The user attributes chosen as columns.
    pub shown_attrs: Vec<String>,
    /// Where the open database is read from (polls read it again).
    pub source: Option<PathBuf>,
    /// Whether the open study is read again every [`Self::poll_every`] (trials that finished
    /// or started since).
    pub live: bool,
    /// How often a live study is read again.
    pub poll_every: Duration,
    /// When the last read (full or incremental) ended.
    pub last_read: Option<Instant>,
    /// Whether an incremental read is in flight.
    pub polling: bool,
    /// Counts opens and selections: an incremental read answers for the generation it was
    /// asked in, and is dropped after another open or selection.
    pub generation: u64,
    /// Incremental reads merged so far (each one reads only what changed).
    pub polls: u64,
    /// Bumped by every [`Self::refresh`] (after any change of the rows, their order or
    /// filters): what a plot derives from the rows is kept across frames until it changes.
    pub revision: u64,
    /// The rows of the plots (indices into `rows`): complete trials with a finite value, by
    /// number (then study). Recomputed by [`Self::refresh`], not per frame.
    pub complete: Vec<usize>,
    /// Parallel coordinates: the range kept on each brushed axis (in the axis's plotted units:
    /// log10 for a log axis, the choice's index for a categorical one).
    pub brush: Vec<(String, f64, f64)>,
    /// Which plot the plot area shows.
    pub plot_tab: PlotTab,
    /// The parameters of the contour plot (x, y); None: the first two.
    pub contour: Option<(String, String)>,
    /// The Report view: PBO, deflated Sharpe, seed spread (see [`super::report`]).
    pub report: ReportState,
}

/// The plots the Studies panel draws, one at a time (the importances show below each).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PlotTab {
    /// Each complete trial's value by number, and the best so far.
    #[default]
    History,
    /// Objective against each parameter.
    Slice,
    /// One axis per parameter, a line per trial coloured by objective.
    ParallelCoordinates,
    /// The intermediate values of every trial.
    Intermediate,
    /// The empirical distribution function of the values.
    Edf,
    /// The objective over two chosen parameters.
    Contour,
    /// The hosts and workers, and the trials per worker over time.
    Workers,
}

impl PlotTab {
    /// Every plot, in the order of the tabs.
    pub const ALL: [PlotTab; 7] = [
        PlotTab::History,
        PlotTab::Slice,
        PlotTab::ParallelCoordinates,
        PlotTab::Contour,
        PlotTab::Intermediate,
        PlotTab::Edf,
        PlotTab::Workers,
    ];

    /// Tab text.
    pub fn label(self) -> &'static str {
        match self {
            PlotTab::History => "history",
            PlotTab::Slice => "slice",
            PlotTab::ParallelCoordinates => "parallel coordinates",
            PlotTab::Intermediate => "intermediate values",
            PlotTab::Edf => "EDF",
            PlotTab::Contour => "contour",
            PlotTab::Workers => "workers",
        }
    }
}

/// How a parameter's axis is scaled: as its distribution says.
#[derive(Debug, Clone, PartialEq)]
pub enum Scale {
    /// Evenly.
    Linear,
    /// log10 plotted, ticks labelled with the values.
    Log,
    /// The choice's index plotted, ticks labelled with the choices.
    Choices(Vec<String>),
}

/// A parameter as a column and a plot axis.
#[derive(Debug, Clone, PartialEq)]
pub struct ParamAxis {
    /// Its name.
    pub name: String,
    /// How it is scaled.
    pub scale: Scale,
}

impl ParamAxis {
    /// The axis of a parameter with `distribution`.
    pub fn of(name: &str, distribution: &OptunaDistribution) -> ParamAxis {
        let scale = match distribution {
            OptunaDistribution::Float(f) if f.log => Scale::Log,
            OptunaDistribution::Int(i) if i.log => Scale::Log,
            OptunaDistribution::Categorical(c) => Scale::Choices(
                c.choices
                    .iter()
                    .map(|c| param_text(&ParamValue::Choice(c.clone())))
                    .collect(),
            ),
            _ => Scale::Linear,
        };
        ParamAxis {
            name: name.to_owned(),
            scale,
        }
    }

    /// Where a value (a row's [`ParamCell::key`]) goes on the axis.
    pub fn to_plot(&self, key: f64) -> f64 {
        match self.scale {
            Scale::Log => key.log10(),
            _ => key,
        }
    }

    /// The text of a tick at `x` (plotted units): the value behind it.
    pub fn tick(&self, x: f64) -> String {
        match &self.scale {
            Scale::Linear => sig4(x),
            Scale::Log => sig4(10f64.powf(x)),
            Scale::Choices(c) => {
                let i = x.round();
                if (x - i).abs() < 1e-6 && i >= 0.0 {
                    c.get(i as usize).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            }
        }
    }
}

/// A note being edited: whose, the text so far and the version it started from.
#[derive(Debug, Clone, PartialEq)]
pub struct NoteEdit {
    /// The study (a member of the selected group).
    pub study: String,
    /// The trial (storage id, number), or None for the study's note.
    pub trial: Option<(i64, i64)>,
    pub text: String,
    pub version: i64,
}

/// A brush with its axis and the axis's position ([`StudiesView::resolved_brushes`]), then
/// the kept range in plotted units.
pub type ResolvedBrush<'a> = (Option<(usize, &'a ParamAxis)>, f64, f64);

/// Whether every brush keeps row `r` (a brush on no axis keeps nothing): what the table shows
/// and what the parallel coordinates colour.
pub fn brushes_keep(brushes: &[ResolvedBrush<'_>], r: &TrialRow) -> bool {
    brushes.iter().all(|(axis, lo, hi)| {
        let Some((i, a)) = axis else { return false };
        r.axis_x(*i, a).is_some_and(|x| x >= *lo && x <= *hi)
    })
}

/// From this many COMPLETE trials on, importances are computed on a background thread
/// (PED-ANOVA over 10,000 trials takes about 28 ms on a 2-CPU VM in release: more than a frame).
pub const IMPORTANCE_IN_BACKGROUND: usize = 2_000;

/// The trial counts importances are computed at (see [`ImportanceView`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ImportanceKey {
    pub group: String,
    pub n_rows: usize,
    pub n_complete: usize,
}

/// Importances computed on a background thread: what for, and where the result lands.
#[derive(Debug, Clone)]
pub struct ImportanceJob {
    pub key: ImportanceKey,
    pub slot: Arc<OnceLock<Result<Importances, String>>>,
}

/// The columns of a set of rows: their parameters' axes (by name) and their user attributes'
/// keys (sorted).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Columns {
    pub param_axes: Vec<ParamAxis>,
    pub attr_keys: Vec<String>,
}

impl Columns {
    /// The columns of `rows`, and each row's axis positions filled for them. A parameter's axis
    /// follows the first distribution seen for it. Rows of a study list the same parameters
    /// and attributes in the same order as the row before them, so a row is compared with its
    /// predecessor before its names are searched (10,000 rows: a few milliseconds less).
    pub fn of(rows: &mut [TrialRow]) -> Columns {
        let mut found: Vec<(&str, &OptunaDistribution)> = Vec::new();
        let mut keys: Vec<&str> = Vec::new();
        let mut params_before: &[TrialParam] = &[];
        let mut attrs_before: &[(String, String, Option<f64>)] = &[];
        for r in rows.iter() {
            let params = &r.stored_params[..];
            let same = params.len() == params_before.len()
                && params
                    .iter()
                    .zip(params_before)
                    .all(|(a, b)| a.name == b.name);
            if !same {
                for p in params {
                    if !found.iter().any(|(n, _)| *n == p.name) {
                        found.push((&p.name, &p.distribution));
                    }
                }
                params_before = params;
            }
            let attrs = &r.attrs[..];
            let same = attrs.len() == attrs_before.len()
                && attrs.iter().zip(attrs_before).all(|(a, b)| a.0 == b.0);
            if !same {
                for (k, _, _) in attrs {
                    if !keys.contains(&k.as_str()) {
                        keys.push(k);
                    }
                }
                attrs_before = attrs;
            }
        }
        found.sort_unstable_by(|a, b| a.0.cmp(b.0));
        keys.sort_unstable();
        let columns = Columns {
            param_axes: found.iter().map(|(n, d)| ParamAxis::of(n, d)).collect(),
            attr_keys: keys.into_iter().map(str::to_owned).collect(),
        };
        let mut guess = vec![0; columns.param_axes.len()];
        for r in rows.iter_mut() {
            r.axis_positions = axis_positions(r, &columns.param_axes, &mut guess);
        }
        columns
    }
}

/// Row `r`'s [`TrialRow::axis_positions`] on `axes`. `guess` holds, per axis, where the row before
/// had that parameter among its cells: looked at first.
fn axis_positions(r: &TrialRow, axes: &[ParamAxis], guess: &mut [usize]) -> AxisPositions {
    let cells = &r.param_cells;
    AxisPositions(
        axes.iter()
            .zip(guess.iter_mut())
            .map(|(a, g)| {
                let at = if cells.get(*g).is_some_and(|c| c.name == a.name) {
                    Some(*g)
                } else {
                    cells.iter().position(|c| c.name == a.name)
                };
                let j = at?;
                *g = j;
                Some(a.to_plot(cells[j].key))
            })
            .collect(),
    )
}

/// Sorts `rows` by a column, ascending or not (stable: equal rows keep their order).
pub fn sort_rows(rows: &mut [TrialRow], (column, ascending): &(TrialColumn, bool)) {
    rows.sort_by(|a, b| {
        let o = a.cmp_by(b, column);
        if *ascending { o } else { o.reverse() }
    });
}

/// Rows read for the table, made ready where they were read (off the UI thread): their
/// columns derived, each row's axis positions filled, sorted as the table was when the read was
/// asked for. Over 10,000 trials that work is longer than a frame.
#[derive(Debug)]
pub struct ReadRows {
    pub rows: Vec<TrialRow>,
    pub columns: Columns,
}

impl ReadRows {
    /// Makes `rows` ready for a table sorted by `sort`.
    pub fn new(mut rows: Vec<TrialRow>, sort: &(TrialColumn, bool)) -> ReadRows {
        let columns = Columns::of(&mut rows);
        sort_rows(&mut rows, sort);
        ReadRows { rows, columns }
    }
}

/// From this many rows on, rows the view lets go of are freed on a thread of their own
/// (freeing 10,000 rows' strings takes about 15 ms: a frame).
pub const DISCARD_IN_BACKGROUND: usize = 1_000;

/// Lets go of `rows`: freed here when few, else on a thread of their own.
pub fn discard_rows(rows: Vec<TrialRow>) {
    if rows.len() < DISCARD_IN_BACKGROUND {
        return;
    }
    // Should the thread not start, the rows are freed here as the closure is dropped.
    let _ = std::thread::Builder::new()
        .name("discard rows".into())
        .spawn(move || {
            crate::ui::background::give_way();
            drop(rows)
        });
}

impl StudiesView {
    /// Sorts `rows` and recomputes `visible` (after loading, sorting, filtering or merging);
    /// the trial whose details are open stays open.
    pub fn refresh(&mut self) {
        self.revision += 1;
        let detail = self
            .detail
            .and_then(|i| self.rows.get(i))
            .map(|r| r.trial_id);
        sort_rows(&mut self.rows, &self.sort);
        let brushes = self.resolved_brushes();
        let kept = |r: &TrialRow| {
            self.state_filter.is_none_or(|s| r.state == s) && brushes_keep(&brushes, r)
        };
        self.visible = self
            .rows
            .iter()
            .enumerate()
            .filter(|(_, r)| kept(r))
            .map(|(i, _)| i)
            .collect();
        self.detail = detail.and_then(|id| self.rows.iter().position(|r| r.trial_id == id));
        let rows = &self.rows;
        // Sorted by number as a compact key beside the index (not by reaching into the large
        // rows at every comparison); the study's name only breaks ties.
        let mut complete: Vec<(i64, usize)> = rows
            .iter()
            .enumerate()
            .filter(|(_, r)| r.state == TrialState::Complete && r.value.is_some_and(f64::is_finite))
            .map(|(i, r)| (r.number, i))
            .collect();
        complete.sort_unstable_by(|&(na, a), &(nb, b)| {
            na.cmp(&nb)
                .then_with(|| rows[a].study.cmp(&rows[b].study))
                .then(a.cmp(&b))
        });
        self.complete = complete.into_iter().map(|(_, i)| i).collect();
    }

    /// The parameter axes and attribute keys of the rows (after they change).
    pub fn update_columns(&mut self) {
        let Columns {
            param_axes,
            attr_keys,
        } = Columns::of(&mut self.rows);
        self.param_axes = param_axes;
        self.attr_keys = attr_keys;
    }

    /// Fills [`TrialRow::axis_positions`] of the rows at `indices` for the current axes.
    fn fill_axis_positions(&mut self, indices: impl IntoIterator<Item = usize>) {
        let mut guess = vec![0; self.param_axes.len()];
        for i in indices {
            if let Some(r) = self.rows.get_mut(i) {
                r.axis_positions = axis_positions(r, &self.param_axes, &mut guess);
            }
        }
    }

    /// Whether rows bring a parameter or user attribute the columns do not have yet.
    fn brings_new_columns(&self, rows: &[usize]) -> bool {
        rows.iter().filter_map(|&i| self.rows.get(i)).any(|r| {
            r.stored_params.iter().any(|p| self.axis(&p.name).is_none())
                || r.attrs.iter().any(|(k, _, _)| !self.attr_keys.contains(k))
        })
    }

    /// The parameter axis of `name`.
    pub fn axis(&self, name: &str) -> Option<&ParamAxis> {
        self.axis_at(name).map(|(_, a)| a)
    }

    /// Each brush with its axis and the axis's position, looked up once for a pass over the
    /// rows (see [`brushes_keep`]).
    pub fn resolved_brushes(&self) -> Vec<ResolvedBrush<'_>> {
        self.brush
            .iter()
            .map(|(name, lo, hi)| (self.axis_at(name), *lo, *hi))
            .collect()
    }

    /// The axis of parameter `name` with its position (see [`TrialRow::axis_x`]).
    pub fn axis_at(&self, name: &str) -> Option<(usize, &ParamAxis)> {
        self.param_axes
            .iter()
            .enumerate()
            .find(|(_, a)| a.name == name)
    }

    /// The columns of the trial table as shown, in order: the fixed ones not hidden, the
    /// parameters not hidden, the chosen attributes.
    pub fn shown_columns(&self) -> Vec<TrialColumn> {
        TrialColumn::ALL
            .into_iter()
            .chain(
                self.param_axes
                    .iter()
                    .map(|a| TrialColumn::Param(a.name.clone())),
            )
            .filter(|c| !self.hidden.contains(c))
            .chain(
                self.shown_attrs
                    .iter()
                    .filter(|k| self.attr_keys.contains(k))
                    .map(|k| TrialColumn::Attr(k.clone())),
            )
            .collect()
    }

    /// Whether `column` is shown.
    pub fn is_shown(&self, column: &TrialColumn) -> bool {
        match column {
            TrialColumn::Attr(k) => self.shown_attrs.contains(k),
            c => !self.hidden.contains(c),
        }
    }

    /// The row (an index into `rows`) of the best complete trial, which the table highlights:
    /// the one whose value is the selected group's best (by each study's direction, as the
    /// study list shows it).
    pub fn best_row(&self) -> Option<usize> {
        let group = self
            .groups
            .iter()
            .find(|g| Some(&g.name) == self.selected.as_ref())?;
        let best = group.best?;
        self.rows
            .iter()
            .position(|r| r.state == TrialState::Complete && r.value == Some(best))
    }
}

/// A trial's stored training curves: (env steps, value) points by metric name.
pub type Curves = BTreeMap<String, Vec<[f64; 2]>>;

impl StudiesView {
    /// Sorts by `column` (again: reverses the order).
    pub fn sort_by(&mut self, column: TrialColumn) {
        let ascending = if self.sort.0 == column {
            !self.sort.1
        } else {
            true
        };
        self.sort = (column, ascending);
        self.refresh();
    }

    /// Shows or hides `column` (a user attribute's column is hidden until chosen).
    pub fn toggle_column(&mut self, column: TrialColumn) {
        if let TrialColumn::Attr(k) = column {
            if let Some(i) = self.shown_attrs.iter().position(|h| *h == k) {
                self.shown_attrs.remove(i);
            } else {
                self.shown_attrs.push(k);
            }
        } else if let Some(i) = self.hidden.iter().position(|h| *h == column) {
            self.hidden.remove(i);
        } else {
            self.hidden.push(column);
        }
    }

    /// Keeps only trials whose parameter `name` lies in `range` (plotted units; None: the
    /// axis is no longer brushed).
    pub fn set_brush(&mut self, name: &str, range: Option<(f64, f64)>) {
        self.brush.retain(|(n, _, _)| n != name);
        if let Some((a, b)) = range {
            self.brush.push((name.to_owned(), a.min(b), a.max(b)));
        }
        self.refresh();
    }

    /// Shows only trials in `state` (None: all).
    pub fn filter(&mut self, state: Option<TrialState>) {
        self.state_filter = state;
        self.refresh();
    }

    /// The members of the selected group.
    pub fn selected_members(&self) -> Option<&[String]> {
        self.groups
            .iter()
            .find(|g| Some(&g.name) == self.selected.as_ref())
            .map(|g| g.members.as_slice())
    }

    /// The trials of `studies` were read (dropped when another study was selected meanwhile).
    pub fn trials_read(&mut self, studies: Vec<String>, result: Result<ReadRows, String>) {
        if self.selected_members() != Some(studies.as_slice()) {
            return;
        }
        self.loading_trials = false;
        match result {
            Ok(read) => {
                discard_rows(std::mem::replace(&mut self.rows, read.rows));
                self.param_axes = read.columns.param_axes;
                self.attr_keys = read.columns.attr_keys;
                self.refresh();
                self.update_importance();
                self.last_read = Some(Instant::now());
            }
            Err(e) => self.error = Some(e),
        }
    }

    /// Computes the selected group's parameter importances (PED-ANOVA over the COMPLETE
    /// trials of all its studies, in the group's direction), unless they were computed for the
    /// same group at the same trial counts.
    pub fn update_importance(&mut self) {
        let Some(group) = self
            .groups
            .iter()
            .find(|g| Some(&g.name) == self.selected.as_ref())
        else {
            self.importance = None;
            self.importance_job = None;
            return;
        };
        let n_complete = self
            .rows
            .iter()
            .filter(|r| r.state == TrialState::Complete)
            .count();
        let key = ImportanceKey {
            group: group.name.clone(),
            n_rows: self.rows.len(),
            n_complete,
        };
        if self.importance.as_ref().is_some_and(|p| p.key() == key) {
            return;
        }
        match &self.importance_job {
            // Another group's: its result would be dropped anyway.
            Some(job) if job.key.group != key.group => self.importance_job = None,
            // One computation at a time: a newer count is computed when this one ends.
            Some(job) => {
                if job.key != key {
                    self.importance_stale = true;
                }
                return;
            }
            None => {}
        }
        let direction = if group.minimize {
            StudyDirection::Minimize
        } else {
            StudyDirection::Maximize
        };
        if n_complete < IMPORTANCE_IN_BACKGROUND {
            let trials: Vec<ImportanceTrial<'_>> = self
                .rows
                .iter()
                .map(|r| ImportanceTrial {
                    number: r.number,
                    state: r.state,
                    value: r.value,
                    params: &r.stored_params,
                })
                .collect();
            let result = PedAnova::default()
                .evaluate(&key.group, direction, &trials)
                .map_err(|e| e.to_string());
            self.set_importance(key, result);
            return;
        }
        // Thousands of trials: tens of milliseconds, too long for a frame. The thread gets its
        // own handle on what PED-ANOVA reads (the parameters are shared, not copied); the chart
        // keeps the last importances meanwhile.
        type Input = (i64, TrialState, Option<f64>, Arc<[TrialParam]>);
        let rows: Vec<Input> = self
            .rows
            .iter()
            .map(|r| (r.number, r.state, r.value, r.stored_params.clone()))
            .collect();
        let slot = Arc::new(OnceLock::new());
        let done = slot.clone();
        let name = key.group.clone();
        let spawned = std::thread::Builder::new()
            .name("importance".into())
            .spawn(move || {
                crate::ui::background::give_way();
                let trials: Vec<ImportanceTrial<'_>> = rows
                    .iter()
                    .map(|(number, state, value, params)| ImportanceTrial {
                        number: *number,
                        state: *state,
                        value: *value,
                        params,
                    })
                    .collect();
                let result = PedAnova::default()
                    .evaluate(&name, direction, &trials)
                    .map_err(|e| e.to_string());
                let _ = done.set(result);
            });
        match spawned {
            Ok(_) => self.importance_job = Some(ImportanceJob { key, slot }),
            Err(e) => self.set_importance(key, Err(format!("could not start a thread: {e}"))),
        }
    }

    /// Takes the background computation's importances once they are ready (called every
    /// frame); returns whether one is still running.
    pub fn poll_importance(&mut self) -> bool {
        let Some(job) = &self.importance_job else {
            return false;
        };
        let Some(result) = job.slot.get().cloned() else {
            return true;
        };
        let key = job.key.clone();
        self.importance_job = None;
        // Kept only if the same group is still selected.
        if self.selected.as_ref() == Some(&key.group) {
            self.set_importance(key, result);
        }
        if std::mem::take(&mut self.importance_stale) {
            self.update_importance();
        }
        self.importance_job.is_some()
    }

    /// Shows importances computed for `key`.
    fn set_importance(&mut self, key: ImportanceKey, result: Result<Importances, String>) {
        let computations = self.importance.as_ref().map_or(0, |p| p.computations) + 1;
        self.importance = Some(ImportanceView {
            group: key.group,
            n_rows: key.n_rows,
            n_complete: key.n_complete,
            result,
            computations,
        });
    }

    /// Merges the rows an incremental read found: a trial already held is replaced, a new one
    /// added; the columns, order, filter and importances follow when anything changed.
    pub fn merge(&mut self, rows: Vec<TrialRow>) {
        // The rows that changed or arrived: only they are looked at again, unless they bring a
        // new column (then every row's axis positions are filled again).
        let mut changed: Vec<usize> = Vec::new();
        for row in rows {
            match self.rows.iter().position(|r| r.trial_id == row.trial_id) {
                Some(i) if self.rows[i] == row => {}
                Some(i) => {
                    self.rows[i] = row;
                    changed.push(i);
                }
                None => {
                    self.rows.push(row);
                    changed.push(self.rows.len() - 1);
                }
            }
        }
        if changed.is_empty() {
            return;
        }
        if self.brings_new_columns(&changed) {
            self.update_columns();
        } else {
            self.fill_axis_positions(changed);
        }
        self.refresh();
        self.update_importance();
    }

    /// A trial's curves were read (kept only while that trial's details are shown).
    pub fn curve_read(&mut self, trial_id: i64, result: Result<Curves, String>) {
        let shown = self
            .detail
            .and_then(|i| self.rows.get(i))
            .map(|r| r.trial_id);
        if shown == Some(trial_id) {
            self.curve = Some((trial_id, result));
        }
    }
}

#[cfg(test)]
mod tests {
    use tradetune_engine::storage::{CategoricalChoice, OptunaDistribution};

    use super::{ParamAxis, Scale};

    #[test]
    fn log_and_categorical_axes_label_their_ticks_with_values() {
        let lr = ParamAxis::of(
            "lr",
            &OptunaDistribution::float(1e-5, 1e-2, true, None).unwrap(),
        );
        assert_eq!(lr.scale, Scale::Log);
        assert!((lr.to_plot(1e-3) + 3.0).abs() < 1e-12);
        assert_eq!(lr.tick(-4.0), "1e-4");
        assert_eq!(lr.tick(-2.5), "0.003162");
        let batch = ParamAxis::of(
            "batch",
            &OptunaDistribution::categorical(vec![
                CategoricalChoice::Int(64),
                CategoricalChoice::Str("auto".into()),
            ])
            .unwrap(),
        );
        assert_eq!(
            batch.scale,
            Scale::Choices(vec!["64".into(), "auto".into()])
        );
        assert_eq!(
            (batch.tick(0.0), batch.tick(1.0)),
            ("64".into(), "auto".into())
        );
        assert_eq!(batch.tick(0.5), "", "no label between choices");
        let gamma = ParamAxis::of(
            "gamma",
            &OptunaDistribution::float(0.9, 0.999, false, None).unwrap(),
        );
        assert_eq!(
            (gamma.scale.clone(), gamma.tick(0.95)),
            (Scale::Linear, "0.95".into())
        );
    }
}
