//! The open study's parameter importances by PED-ANOVA (`tradetune_study::importance`, the
//! numbers of Optuna's `get_param_importances` and of `tradetune study importance`), as
//! optuna-dashboard's importance chart draws them: one horizontal bar per parameter, most
//! important on top, with the values beside it to 4 significant digits.
//!
//! They are computed when the study's trials are read and only when their count changed
//! (see [`Importance::update`]), never while drawing a frame.

use std::sync::{Arc, OnceLock};

use egui_plot::{Bar, BarChart, Plot, PlotPoint, Text};
use tradetune_engine::storage::{StudyDirection, TrialParam, TrialState};
use tradetune_engine::study::importance::{ImportanceTrial, Importances, PedAnova};

use tradetune_engine::front::format::significant;

use super::list::StudyGroup;
use super::table::TrialTable;

/// The importances of the selected study (group) and the trial counts they were computed at.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportanceView {
    /// The group they belong to.
    pub group: String,
    /// Trials read (any state), and COMPLETE ones among them, when computed.
    pub n_rows: usize,
    pub n_complete: usize,
    /// The importances, or why there are none (e.g. too few COMPLETE trials).
    pub result: Result<Importances, String>,
    /// How many times importances were computed in this view (recomputed only when the trial
    /// counts change).
    pub computations: u64,
}

impl ImportanceView {
    /// The trial counts they were computed at.
    pub fn key(&self) -> ImportanceKey {
        ImportanceKey {
            group: self.group.clone(),
            n_rows: self.n_rows,
            n_complete: self.n_complete,
        }
    }
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
/// The selected group's parameter importances (PED-ANOVA) and their computation.
#[derive(Debug, Clone, Default)]
pub struct Importance {
    /// The importances shown.
    pub shown: Option<ImportanceView>,
    /// Importances being computed on a background thread (large studies, see
    /// [`IMPORTANCE_IN_BACKGROUND`]).
    pub job: Option<ImportanceJob>,
    /// Whether the trial counts changed while [`Self::job`] ran.
    pub stale: bool,
}

impl Importance {
    /// Computes the selected group's parameter importances (PED-ANOVA over the COMPLETE
    /// trials of all its studies, in the group's direction), unless they were computed for the
    /// same group at the same trial counts.
    pub fn update(&mut self, table: &TrialTable, group: Option<&StudyGroup>) {
        let Some(group) = group else {
            self.shown = None;
            self.job = None;
            return;
        };
        let n_complete = table
            .rows
            .iter()
            .filter(|r| r.state == TrialState::Complete)
            .count();
        let key = ImportanceKey {
            group: group.name.clone(),
            n_rows: table.rows.len(),
            n_complete,
        };
        if self.shown.as_ref().is_some_and(|p| p.key() == key) {
            return;
        }
        match &self.job {
            // Another group's: its result would be dropped anyway.
            Some(job) if job.key.group != key.group => self.job = None,
            // One computation at a time: a newer count is computed when this one ends.
            Some(job) => {
                if job.key != key {
                    self.stale = true;
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
            let trials: Vec<ImportanceTrial<'_>> = table
                .rows
                .iter()
                .map(|r| ImportanceTrial {
                    number: r.number,
                    state: r.state,
                    value: r.value,
                    params: &r.stored_params,
                })
                .collect();
            // A panic in the computation costs the panel its importances, not the window.
            let result = compute(&key.group, direction, &trials);
            self.set(key, result);
            return;
        }
        // Thousands of trials: tens of milliseconds, too long for a frame. The thread gets its
        // own handle on what PED-ANOVA reads (the parameters are shared, not copied); the chart
        // keeps the last importances meanwhile.
        type Input = (i64, TrialState, Option<f64>, Arc<[TrialParam]>);
        let rows: Vec<Input> = table
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
                let result = compute(&name, direction, &trials);
                let _ = done.set(result);
            });
        match spawned {
            Ok(_) => self.job = Some(ImportanceJob { key, slot }),
            Err(e) => self.set(key, Err(format!("could not start a thread: {e}"))),
        }
    }

    /// Takes the background computation's importances once they are ready (called every
    /// frame); returns whether one is still running.
    pub fn poll(&mut self, table: &TrialTable, group: Option<&StudyGroup>) -> bool {
        let Some(job) = &self.job else {
            return false;
        };
        let Some(result) = job.slot.get().cloned() else {
            return true;
        };
        let key = job.key.clone();
        self.job = None;
        // Kept only if the same group is still selected.
        if group.is_some_and(|g| g.name == key.group) {
            self.set(key, result);
        }
        if std::mem::take(&mut self.stale) {
            self.update(table, group);
        }
        self.job.is_some()
    }

    /// Shows importances computed for `key`.
    fn set(&mut self, key: ImportanceKey, result: Result<Importances, String>) {
        let computations = self.shown.as_ref().map_or(0, |p| p.computations) + 1;
        self.shown = Some(ImportanceView {
            group: key.group,
            n_rows: key.n_rows,
            n_complete: key.n_complete,
            result,
            computations,
        });
    }
}

/// PED-ANOVA's importances of `trials` in the study (group) `name`, or why not, a panic
/// included (see [`guarded`]): in the frame (fewer than [`IMPORTANCE_IN_BACKGROUND`] COMPLETE
/// trials) and on the background thread alike.
fn compute(
    name: &str,
    direction: StudyDirection,
    trials: &[ImportanceTrial<'_>],
) -> Result<Importances, String> {
    guarded(|| {
        #[cfg(test)]
        tests::panic_if_asked();
        PedAnova::default()
            .evaluate(name, direction, trials)
            .map_err(|e| e.to_string())
    })
}

/// `compute`'s answer, or why not where it panics: the computation's thread then answers
/// anyway, so [`Importance::poll`] does not wait for it (and the frame loop repaint for it)
/// forever, and the panel says the importances were not computed.
fn guarded(compute: impl FnOnce() -> Result<Importances, String>) -> Result<Importances, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(compute)).unwrap_or_else(|panic| {
        Err(format!(
            "the importances could not be computed (a panic: {})",
            tradetune_engine::study::runner::panic_message(&panic)
        ))
    })
}

/// The heading over the chart.
pub fn heading(imp: &Importances) -> String {
    format!(
        "parameter importance (PED-ANOVA): top {} of {} COMPLETE trials",
        imp.n_top, imp.n_trials
    )
}

/// Draws the chart (nothing before the first computation).
pub(super) fn importance_plot(ui: &mut egui::Ui, view: Option<&ImportanceView>) {
    let Some(view) = view else { return };
    let imp = match &view.result {
        Err(e) => {
            ui.label(format!("importance not computed: {e}"));
            return;
        }
        Ok(imp) if imp.params.is_empty() => {
            ui.label("parameter importance: the study has no parameters");
            return;
        }
        Ok(imp) => imp,
    };
    ui.label(heading(imp));
    if imp.all_equal() {
        ui.label("no parameter tells the top trials apart (they share their value): all equal");
    }
    let n = imp.params.len();
    // The most important parameter on top: bar i at height n − 1 − i.
    let bars: Vec<Bar> = imp
        .params
        .iter()
        .enumerate()
        .map(|(i, p)| {
            Bar::new((n - 1 - i) as f64, p.importance)
                .name(&p.name)
                .width(0.7)
        })
        .collect();
    ui.columns(2, |cols| {
        Plot::new("param_importance")
            .height((24.0 * n as f32).clamp(120.0, 400.0))
            .x_axis_label("importance (sums to 1)")
            .include_x(0.0)
            .include_x(1.0)
            .include_y(-0.6)
            .include_y(n as f64 - 0.4)
            // The parameters are named beside their bars, not on a numbered axis.
            .show_axes([true, false])
            .show_grid([true, false])
            .allow_zoom(false)
            .allow_drag(false)
            .allow_scroll(false)
            .show(&mut cols[0], |plot| {
                for (i, p) in imp.params.iter().enumerate() {
                    plot.text(
                        Text::new(
                            p.name.clone(),
                            PlotPoint::new(p.importance + 0.01, (n - 1 - i) as f64),
                            format!("{}  {}", p.name, significant(p.importance, 4)),
                        )
                        .anchor(egui::Align2::LEFT_CENTER),
                    );
                }
                plot.bar_chart(
                    BarChart::new("importance", bars)
                        .horizontal()
                        .element_formatter(Box::new(|bar, _| {
                            format!("{}: {}", bar.name, significant(bar.value, 4))
                        })),
                );
            });
        egui::Grid::new("param_importance_values")
            .striped(true)
            .show(&mut cols[1], |ui| {
                ui.strong("parameter");
                ui.strong("importance");
                ui.end_row();
                for p in &imp.params {
                    ui.label(&p.name);
                    ui.label(significant(p.importance, 4));
                    ui.end_row();
                }
            });
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    thread_local! {
        /// Whether the next importance computation on this thread panics (as a bug in
        /// PED-ANOVA on some study's trials would).
        static PANIC_NEXT: Cell<bool> = const { Cell::new(false) };
    }

    /// Panics where a test asked for it on this thread (see [`PANIC_NEXT`]).
    pub(super) fn panic_if_asked() {
        if PANIC_NEXT.with(|p| p.replace(false)) {
            panic!("{}", String::from("asked by the test"));
        }
    }

    /// A computation in the frame (a small study) that panics shows why in the panel rather
    /// than taking the window down.
    #[test]
    fn a_panic_in_the_frames_computation_is_shown_not_raised() {
        let group = StudyGroup {
            name: "small".into(),
            members: vec!["small".into()],
            n_by_state: [0; 5],
            best: None,
            minimize: true,
        };
        let mut importance = Importance::default();
        PANIC_NEXT.with(|p| p.set(true));
        importance.update(&TrialTable::default(), Some(&group));
        assert!(
            importance.job.is_none(),
            "computed in the frame, not on a thread"
        );
        let shown = importance.shown.expect("importances shown");
        assert_eq!(shown.group, "small");
        assert_eq!(
            shown.result.unwrap_err(),
            "the importances could not be computed (a panic: asked by the test)"
        );
    }

    /// A computation that panics answers with why, so the panel stops waiting for it.
    #[test]
    fn a_panicking_computation_answers_with_why() {
        let e = guarded(|| panic!("{}", String::from("out of bounds"))).unwrap_err();
        assert_eq!(
            e,
            "the importances could not be computed (a panic: out of bounds)"
        );
    }
}
