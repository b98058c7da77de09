//! The Studies panel's analytics plots, one at a time, each meaning what its optuna-dashboard
//! counterpart means: the optimisation history, slice plots (objective against each
//! parameter), parallel coordinates (an axis per parameter, lines coloured by objective,
//! brushing an axis filters the trial table), the intermediate values of every trial (pruned
//! ones marked) and the empirical distribution function of the values.
//!
//! egui_plot has no log or categorical axis: a log-scaled parameter is plotted as log10 of its
//! value and its ticks labelled with the values; a categorical one by its choice's index, ticks
//! labelled with the choices.

use std::ops::RangeInclusive;

use egui::Color32;
use egui_plot::{
    GridInput, GridMark, Legend, Line, MarkerShape, Plot, PlotPoint, PlotPoints, Points,
};
use tradetune_engine::storage::TrialState;

mod contour;
mod parallel;
mod thresholds;
pub mod timeline;

pub use self::contour::{ContourCache, ContourKey, contour_id};
pub use self::parallel::{PcAxes, pc_axes_id};
use super::{Action, StudiesView};
use crate::ui::tasks::{ParamAxis, Scale, TrialRow, sig4};

/// The plots' state: which plot, the slice plot's parameter, the contour's, and the ranges
/// brushed on the parallel coordinates (which filter the trial table too).
#[derive(Debug, Clone, Default)]
pub struct Plots {
    /// Which plot the plot area shows.
    pub tab: PlotTab,
    /// The parameter on the x axis of the parameter-vs-objective plot.
    pub param: Option<String>,
    /// The parameters of the contour plot (x, y); None: the first two.
    pub contour: Option<(String, String)>,
    /// Parallel coordinates: the range kept on each brushed axis (in the axis's plotted units:
    /// log10 for a log axis, the choice's index for a categorical one).
    pub brush: Vec<(String, f64, f64)>,
}

impl Plots {
    /// Keeps only trials whose parameter `name` lies in `range` (plotted units; None: the
    /// axis is no longer brushed).
    pub fn set_brush(&mut self, name: &str, range: Option<(f64, f64)>) {
        self.brush.retain(|(n, _, _)| n != name);
        if let Some((a, b)) = range {
            self.brush.push((name.to_owned(), a.min(b), a.max(b)));
        }
    }
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

pub(super) const PLOT_HEIGHT: f32 = 170.0;
pub(super) const SLICE_HEIGHT: f32 = 150.0;
/// Slice plots per row.
pub(super) const SLICES_PER_ROW: usize = 3;

/// The complete trials with a finite value, by number.
pub(super) fn complete(view: &StudiesView) -> Vec<&TrialRow> {
    view.table
        .complete
        .iter()
        .filter_map(|&i| view.table.rows.get(i))
        .collect()
}

/// Whether smaller values are better in the selected group.
pub(super) fn minimize(view: &StudiesView) -> bool {
    view.groups
        .iter()
        .find(|g| Some(&g.name) == view.selected.as_ref())
        .is_none_or(|g| g.minimize)
}

/// The plot tabs and the chosen plot.
pub(super) fn plots(
    ui: &mut egui::Ui,
    view: &StudiesView,
    plot_param: &mut Option<String>,
    commands: &mut Vec<Action>,
) {
    let done = complete(view);
    ui.horizontal(|ui| {
        for tab in PlotTab::ALL {
            if ui
                .selectable_label(view.plots.tab == tab, tab.label())
                .clicked()
            {
                commands.push(Action::ShowPlot(tab));
            }
        }
    });
    match view.plots.tab {
        PlotTab::History => history(ui, view, &done, commands),
        PlotTab::Slice => slices(ui, view, &done, plot_param, commands),
        PlotTab::ParallelCoordinates => parallel::parallel_coordinates(ui, view, &done, commands),
        PlotTab::Intermediate => intermediate(ui, view),
        PlotTab::Edf => edf(ui, &done),
        PlotTab::Contour => contour::contour(ui, view, &done, commands),
        PlotTab::Workers => timeline::timeline(ui, view),
    }
}

/// Each complete trial's value by trial number, and the best so far.
pub(super) fn history(
    ui: &mut egui::Ui,
    view: &StudiesView,
    done: &[&TrialRow],
    commands: &mut Vec<Action>,
) {
    let minimize = minimize(view);
    let picked: Vec<(i64, [f64; 2])> = done
        .iter()
        .filter_map(|r| r.value.map(|v| (r.trial_id, [r.number as f64, v])))
        .collect();
    let values: Vec<[f64; 2]> = picked.iter().map(|p| p.1).collect();
    let mut best_so_far = Vec::with_capacity(values.len());
    let mut best: Option<f64> = None;
    for &[x, v] in &values {
        let b = match best {
            Some(b) if (minimize && b <= v) || (!minimize && b >= v) => b,
            _ => v,
        };
        best = Some(b);
        best_so_far.push([x, b]);
    }
    ui.label("optimisation history (complete trials; best so far; click a point to open it)");
    let response = Plot::new("history")
        .height(PLOT_HEIGHT)
        .legend(Legend::default())
        .x_axis_label("trial number")
        .y_axis_label("objective")
        .y_axis_formatter(|m, _| sig4(m.value))
        .show(ui, |plot| {
            plot.points(Points::new("objective", PlotPoints::new(values)).radius(2.5));
            plot.line(Line::new("best so far", PlotPoints::new(best_so_far)));
        });
    open_clicked(ui, view, &response, "history", &picked, commands);
}

/// Where a clickable plot drew its trials last frame: (trial id, screen position), by plot
/// name. Kept in egui's temporary data under [`plot_points_id`] (a test clicks one).
#[derive(Debug, Clone, Default)]
pub struct TrialMarkers(pub Vec<(i64, egui::Pos2)>);

/// The id [`TrialMarkers`] of the plot `name` is stored under.
pub fn plot_points_id(name: &str) -> egui::Id {
    egui::Id::unique(("studies_plot_points", name))
}

/// A click within 8 points of a trial's marker opens that trial's details.
pub(super) fn open_clicked(
    ui: &egui::Ui,
    view: &StudiesView,
    response: &egui_plot::PlotResponse<()>,
    name: &str,
    points: &[(i64, [f64; 2])],
    commands: &mut Vec<Action>,
) {
    let t = &response.transform;
    let screen: Vec<(i64, egui::Pos2)> = points
        .iter()
        .map(|(id, p)| (*id, t.position_from_point(&PlotPoint::new(p[0], p[1]))))
        .collect();
    if response.response.clicked()
        && let Some(at) = response.response.interact_pointer_pos()
        && let Some((id, _)) = screen
            .iter()
            .filter(|(_, p)| p.distance(at) <= 8.0)
            .min_by(|a, b| a.1.distance(at).total_cmp(&b.1.distance(at)))
        && let Some(i) = view.table.rows.iter().position(|r| r.trial_id == *id)
    {
        commands.push(Action::ShowTrial(i));
    }
    ui.data_mut(|d| d.insert_temp(plot_points_id(name), TrialMarkers(screen)));
}

/// The empirical distribution function of the complete trials' values: the fraction of trials
/// whose value is at most x.
pub(super) fn edf(ui: &mut egui::Ui, done: &[&TrialRow]) {
    let mut values: Vec<f64> = done.iter().filter_map(|r| r.value).collect();
    values.sort_by(f64::total_cmp);
    let n = values.len() as f64;
    let steps: Vec<[f64; 2]> = values
        .iter()
        .enumerate()
        .map(|(i, v)| [*v, (i + 1) as f64 / n])
        .collect();
    ui.label(format!(
        "empirical distribution of the values ({} complete trials)",
        values.len()
    ));
    Plot::new("edf")
        .height(PLOT_HEIGHT)
        .x_axis_label("objective")
        .y_axis_label("fraction of trials <= x")
        .x_axis_formatter(|m, _| sig4(m.value))
        .include_y(0.0)
        .include_y(1.0)
        .show(ui, |plot| {
            plot.line(Line::new("EDF", PlotPoints::new(steps.clone())).width(1.0));
            plot.points(Points::new("EDF", PlotPoints::new(steps)).radius(2.0));
        });
}

/// Ticks of `axis` (log: the values behind the log10; categorical: a tick per choice).
pub(super) fn spacer(axis: &ParamAxis) -> Option<impl Fn(GridInput) -> Vec<GridMark> + use<>> {
    let Scale::Choices(c) = &axis.scale else {
        return None;
    };
    let n = c.len();
    Some(move |_input: GridInput| {
        (0..n)
            .map(|i| GridMark {
                value: i as f64,
                step_size: 1.0,
            })
            .collect()
    })
}

/// Tick text at `m` on `axis`.
pub(super) fn tick(axis: &ParamAxis) -> impl Fn(GridMark, &RangeInclusive<f64>) -> String + use<> {
    let axis = axis.clone();
    move |m, _| axis.tick(m.value)
}

/// The objective against each parameter, a small plot each (log axes for log distributions,
/// choices for categorical ones). A parameter picked in the list is drawn large.
pub(super) fn slices(
    ui: &mut egui::Ui,
    view: &StudiesView,
    done: &[&TrialRow],
    plot_param: &mut Option<String>,
    commands: &mut Vec<Action>,
) {
    if view.table.param_axes.is_empty() {
        ui.label("the study has no parameters");
        return;
    }
    if plot_param
        .as_ref()
        .is_some_and(|p| view.table.axis(p).is_none())
    {
        *plot_param = None;
    }
    ui.horizontal(|ui| {
        let l = ui.label("slice: objective against");
        egui::ComboBox::from_id_salt("plot_param")
            .selected_text(plot_param.clone().unwrap_or("every parameter".into()))
            .show_ui(ui, |ui| {
                ui.selectable_value(plot_param, None, "every parameter");
                for a in &view.table.param_axes {
                    ui.selectable_value(plot_param, Some(a.name.clone()), &a.name);
                }
            })
            .response
            .labelled_by(l.id);
    });
    let axes: Vec<(usize, &ParamAxis)> = match plot_param {
        Some(p) => view.table.axis_at(p).into_iter().collect(),
        None => view.table.param_axes.iter().enumerate().collect(),
    };
    let per_row = if axes.len() == 1 { 1 } else { SLICES_PER_ROW };
    for chunk in axes.chunks(per_row) {
        ui.columns(per_row, |cols| {
            for (ui, &(at, axis)) in cols.iter_mut().zip(chunk) {
                slice(ui, view, at, axis, done, commands);
            }
        });
    }
}

pub(super) fn slice(
    ui: &mut egui::Ui,
    view: &StudiesView,
    at: usize,
    axis: &ParamAxis,
    done: &[&TrialRow],
    commands: &mut Vec<Action>,
) {
    // Each row's position on the axis, by the axis's place (`at`) among the view's: no
    // search by name per row and frame.
    let picked: Vec<(i64, [f64; 2])> = done
        .iter()
        .filter_map(|r| Some((r.trial_id, [r.axis_x(at, axis)?, r.value?])))
        .collect();
    let points: Vec<[f64; 2]> = picked.iter().map(|p| p.1).collect();
    let unit = match axis.scale {
        Scale::Log => " (log)",
        _ => "",
    };
    let mut plot = Plot::new(("slice", &axis.name))
        .height(SLICE_HEIGHT)
        .x_axis_label(format!("{}{unit}", axis.name))
        .y_axis_label("objective")
        .x_axis_formatter(tick(axis))
        .y_axis_formatter(|m, _| sig4(m.value));
    if let Some(s) = spacer(axis) {
        plot = plot.x_grid_spacer(s);
    }
    let response = plot.show(ui, |plot| {
        plot.points(Points::new("trials", PlotPoints::new(points)).radius(2.5));
    });
    open_clicked(ui, view, &response, &axis.name, &picked, commands);
}

/// The intermediate values every trial reported (its learning curve as the pruner saw it):
/// complete trials in blue, pruned in red with a cross where they stopped, running in green,
/// and the pruner's thresholds (see [`thresholds`]).
pub(super) fn intermediate(ui: &mut egui::Ui, view: &StudiesView) {
    let with: Vec<&TrialRow> = view
        .table
        .rows
        .iter()
        .filter(|r| !r.intermediate.is_empty())
        .collect();
    let pruned = with
        .iter()
        .filter(|r| r.state == TrialState::Pruned)
        .count();
    ui.label(format!(
        "intermediate values of {} trials ({pruned} pruned, marked ×)",
        with.len()
    ));
    // The pruner as the (first) study shown stored it.
    let study = view.db.as_ref().and_then(|db| {
        db.studies
            .iter()
            .find(|s| with.iter().any(|r| r.study == s.study.name))
    });
    let pruner = study.and_then(|s| {
        tradetune_engine::study::file::PrunerSection::from_attrs(&s.study.system_attrs)
    });
    let maximize = study.is_none_or(|s| {
        s.study.directions.first() == Some(&tradetune_engine::storage::StudyDirection::Maximize)
    });
    let complete: Vec<&[(i64, f64)]> = with
        .iter()
        .filter(|r| r.state == TrialState::Complete)
        .map(|r| r.intermediate.as_slice())
        .collect();
    let limits = thresholds::thresholds(pruner.as_ref(), maximize, &complete);
    ui.small(&limits.caption);
    let colour_of = |s: TrialState| match s {
        TrialState::Pruned => Color32::from_rgb(220, 80, 60),
        TrialState::Running => Color32::from_rgb(70, 170, 90),
        TrialState::Fail => Color32::GRAY,
        _ => Color32::from_rgb(70, 120, 210),
    };
    Plot::new("intermediate_values")
        .height(PLOT_HEIGHT + 40.0)
        .legend(Legend::default())
        .x_axis_label("step")
        .y_axis_label("intermediate value")
        .y_axis_formatter(|m, _| sig4(m.value))
        .show(ui, |plot| {
            let mut ends = Vec::new();
            for r in &with {
                // An infinite or NaN value (Optuna stores them) would stretch the axis away.
                let points: Vec<[f64; 2]> = r
                    .intermediate
                    .iter()
                    .filter(|(_, v)| v.is_finite())
                    .map(|&(s, v)| [s as f64, v])
                    .collect();
                if r.state == TrialState::Pruned
                    && let Some(&last) = points.last()
                {
                    ends.push(last);
                }
                plot.line(
                    Line::new(r.state.to_string(), PlotPoints::new(points))
                        .color(colour_of(r.state))
                        .allow_hover(false),
                );
            }
            for (name, points) in &limits.lines {
                if !points.is_empty() {
                    plot.line(
                        Line::new(name.as_str(), PlotPoints::new(points.clone()))
                            .color(Color32::from_rgb(240, 200, 60))
                            .style(egui_plot::LineStyle::dashed_loose())
                            .width(2.0),
                    );
                }
            }
            for &step in &limits.rungs {
                plot.vline(
                    egui_plot::VLine::new("pruner rung", step)
                        .color(Color32::from_rgb(240, 200, 60))
                        .style(egui_plot::LineStyle::dashed_loose()),
                );
            }
            if !ends.is_empty() {
                plot.points(
                    Points::new("pruned here", PlotPoints::new(ends))
                        .shape(MarkerShape::Cross)
                        .radius(5.0)
                        .color(colour_of(TrialState::Pruned)),
                );
            }
        });
}

/// The label of an axis whose positions 0, 1, 2, … are `names` (choices, axes, workers):
/// the name at a whole position, nothing between.
pub(super) fn index_label(names: &[String], value: f64) -> String {
    let i = value.round();
    if (value - i).abs() < 1e-6 && i >= 0.0 {
        names.get(i as usize).cloned().unwrap_or_default()
    } else {
        String::new()
    }
}

#[cfg(test)]
mod tests {
    use super::contour::interpolate;

    #[test]
    fn the_contour_grid_follows_the_nearest_trials() {
        // Low values on the left, high on the right.
        let trials = [([0.0, 0.0], 0.0), ([0.0, 1.0], 0.0), ([1.0, 0.5], 1.0)];
        let g = interpolate(&trials, (0.0, 1.0), (0.0, 1.0), 4);
        assert_eq!(g.len(), 16);
        for row in g.chunks(4) {
            assert!(row[0] < 0.2 && row[3] > 0.6, "{row:?}");
            assert!(row.windows(2).all(|w| w[0] <= w[1]), "{row:?}");
        }
        // One trial: its value everywhere.
        assert_eq!(
            interpolate(&[([0.3, 0.3], 2.5)], (0.0, 1.0), (0.0, 1.0), 3),
            vec![2.5; 9]
        );
    }
}
