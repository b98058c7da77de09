//! The trial table — a column per parameter (and chosen user attribute) — of which only the
//! visible rows are laid out (10,000 trials scroll smoothly), and the same rows as CSV for the
//! clipboard; with its state ([`TrialTable`]): the rows, their order, filters and columns.

use egui_extras::{Column, TableBuilder};
use tradetune_engine::storage::TrialState;

use super::Action;
use crate::ui::tasks::columns::{Columns, Curves, axis_positions, sort_rows};
use crate::ui::tasks::{ParamAxis, TrialColumn, TrialRow, sig4};

/// The trial table's state: the selected group's trials as read, the rows shown after the
/// filters, their order, the columns, and the trial whose details are open.
#[derive(Debug, Clone, Default)]
pub struct TrialTable {
    /// Whether the selected study's trials are being read.
    pub loading: bool,
    /// Its trials, sorted and filtered by the fields below.
    pub rows: Vec<TrialRow>,
    /// The rows shown (indices into `rows`) after the state filter and the brushes.
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
    /// Columns hidden from the trial table.
    pub hidden: Vec<TrialColumn>,
    /// The selected group's parameters (one table column and plot axis each) and how their
    /// axes are scaled.
    pub param_axes: Vec<ParamAxis>,
    /// The user attributes its trials carry (a column each, when chosen).
    pub attr_keys: Vec<String>,
    /// The user attributes chosen as columns.
    pub shown_attrs: Vec<String>,
    /// Bumped by every [`Self::refresh`] (after any change of the rows, their order or
    /// filters): what a plot derives from the rows is kept across frames until it changes.
    pub revision: u64,
    /// The rows of the plots (indices into `rows`): complete trials with a finite value, by
    /// number (then study). Recomputed by [`Self::refresh`], not per frame.
    pub complete: Vec<usize>,
}

impl TrialTable {
    /// An empty table sorted by `sort`, with these columns hidden and attributes shown (what
    /// another database or study keeps).
    pub fn keeping(&mut self) -> TrialTable {
        TrialTable {
            sort: self.sort.clone(),
            hidden: std::mem::take(&mut self.hidden),
            shown_attrs: std::mem::take(&mut self.shown_attrs),
            ..TrialTable::default()
        }
    }

    /// Lets go of the rows and what was derived from them (another study is selected).
    pub fn clear(&mut self) {
        discard_rows(std::mem::take(&mut self.rows));
        self.visible.clear();
        self.param_axes.clear();
        self.attr_keys.clear();
        self.detail = None;
    }

    /// Sorts by `column` (again: reverses the order).
    pub fn sort_by(&mut self, column: TrialColumn, brush: &[(String, f64, f64)]) {
        let ascending = if self.sort.0 == column {
            !self.sort.1
        } else {
            true
        };
        self.sort = (column, ascending);
        self.refresh(brush);
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

    /// Shows only trials in `state` (None: all).
    pub fn filter(&mut self, state: Option<TrialState>, brush: &[(String, f64, f64)]) {
        self.state_filter = state;
        self.refresh(brush);
    }

    /// Merges the rows an incremental read found: a trial already held is replaced, a new one
    /// added; the columns, order and filter follow when anything changed. Returns whether any
    /// did.
    pub fn merge(&mut self, rows: Vec<TrialRow>, brush: &[(String, f64, f64)]) -> bool {
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
            return false;
        }
        if self.brings_new_columns(&changed) {
            self.update_columns();
        } else {
            self.fill_axis_positions(changed);
        }
        self.refresh(brush);
        true
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

impl TrialTable {
    /// Sorts `rows` and recomputes `visible` (after loading, sorting, filtering or merging);
    /// the trial whose details are open stays open.
    pub fn refresh(&mut self, brush: &[(String, f64, f64)]) {
        self.revision += 1;
        let detail = self
            .detail
            .and_then(|i| self.rows.get(i))
            .map(|r| r.trial_id);
        sort_rows(&mut self.rows, &self.sort);
        let brushes = self.resolved_brushes(brush);
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
    pub fn resolved_brushes<'a>(&'a self, brush: &[(String, f64, f64)]) -> Vec<ResolvedBrush<'a>> {
        brush
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
    /// the one whose value is `best`, the selected group's (by each study's direction, as the
    /// study list shows it).
    pub fn best_row(&self, best: Option<f64>) -> Option<usize> {
        let best = best?;
        self.rows
            .iter()
            .position(|r| r.state == TrialState::Complete && r.value == Some(best))
    }
}

/// A brush with its axis and the axis's position ([`TrialTable::resolved_brushes`]), then
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
const ROW_HEIGHT: f32 = 18.0;

/// The table; returns the index (into `rows`) of a clicked row.
pub fn trial_table(
    ui: &mut egui::Ui,
    view: &TrialTable,
    best: Option<f64>,
    commands: &mut Vec<Action>,
) -> Option<usize> {
    let best = view.best_row(best);
    let mut clicked = None;
    // Rows have a fixed height (that is what lets only the visible ones be laid out): cells
    // truncate instead of wrapping; columns are resizable.
    ui.style_mut().wrap_mode = Some(egui::TextWrapMode::Truncate);
    let mut table = TableBuilder::new(ui)
        .id_salt("trials")
        .striped(true)
        .resizable(true);
    let shown = view.shown_columns();
    for c in &shown {
        let width = match c {
            TrialColumn::Study => 150.0,
            TrialColumn::Number => 80.0,
            TrialColumn::State => 90.0,
            TrialColumn::Value => 100.0,
            TrialColumn::Duration => 95.0,
            TrialColumn::Device => 80.0,
            TrialColumn::Param(name) | TrialColumn::Attr(name) => {
                (name.len() as f32 * 7.0 + 50.0).clamp(90.0, 180.0)
            }
        };
        table = table.column(Column::initial(width).at_least(40.0).clip(true));
    }
    table
        .column(Column::remainder())
        .header(ROW_HEIGHT + 4.0, |mut header| {
            for c in &shown {
                header.col(|ui| {
                    let arrow = match &view.sort {
                        (s, true) if s == c => " (asc)",
                        (s, false) if s == c => " (desc)",
                        _ => "",
                    };
                    if ui.button(format!("{}{arrow}", c.label())).clicked() {
                        commands.push(Action::SortTrials(c.clone()));
                    }
                });
            }
            header.col(|_| {});
        })
        .body(|body| {
            body.rows(ROW_HEIGHT, view.visible.len(), |mut row| {
                let i = view.visible[row.index()];
                let r = &view.rows[i];
                row.set_selected(Some(i) == best || view.detail == Some(i));
                for c in &shown {
                    row.col(|ui| {
                        if *c == TrialColumn::Number {
                            if ui.link(r.number.to_string()).clicked() {
                                clicked = Some(i);
                            }
                        } else {
                            ui.label(cell(r, c));
                        }
                    });
                }
                row.col(|_| {});
            });
        });
    clicked
}

/// The text of one cell (numbers to 4 significant digits, choices by their label).
fn cell(r: &TrialRow, c: &TrialColumn) -> String {
    match c {
        TrialColumn::Study => r.study.clone(),
        TrialColumn::Number => r.number.to_string(),
        TrialColumn::State => r.state.to_string(),
        TrialColumn::Value => r.value.map_or(String::new(), sig4),
        TrialColumn::Duration => r.duration_s.map_or(String::new(), |v| format!("{v:.1}")),
        TrialColumn::Device => r.device.clone(),
        TrialColumn::Param(name) => r.param_cell(name).map_or(String::new(), |p| p.text.clone()),
        TrialColumn::Attr(key) => r.attr(key).map_or(String::new(), |(t, _)| t.to_owned()),
    }
}

/// The visible rows as CSV (what "Copy table as CSV" puts on the clipboard): the fixed
/// columns, then one per parameter, every digit.
pub fn visible_csv(view: &TrialTable) -> String {
    let quote = |s: &str| {
        if s.contains([',', '"', '\n']) {
            format!("\"{}\"", s.replace('"', "\"\""))
        } else {
            s.to_owned()
        }
    };
    let mut out = String::from("study,number,state,value,duration_s,device");
    for a in &view.param_axes {
        out.push(',');
        out.push_str(&quote(&a.name));
    }
    out.push('\n');
    for &i in &view.visible {
        let r = &view.rows[i];
        out.push_str(&format!(
            "{},{},{},{},{},{}",
            quote(&r.study),
            r.number,
            r.state,
            r.value.map_or(String::new(), |v| v.to_string()),
            r.duration_s.map_or(String::new(), |v| v.to_string()),
            quote(&r.device),
        ));
        for a in &view.param_axes {
            out.push(',');
            if let Some(p) = r.param_cell(&a.name) {
                out.push_str(&quote(&p.full));
            }
        }
        out.push('\n');
    }
    out
}
