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
    GridInput, GridMark, Legend, Line, MarkerShape, Plot, PlotPoint, PlotPoints, Points, Polygon,
    Text,
};
use tradetune_engine::storage::TrialState;

use super::view::{ParamAxis, PlotTab, Scale, StudiesView, TrialRow, sig4};
use crate::ui::command::Command;

const PLOT_HEIGHT: f32 = 170.0;
const SLICE_HEIGHT: f32 = 150.0;
/// Slice plots per row.
const SLICES_PER_ROW: usize = 3;

/// The complete trials with a finite value, by number.
fn complete(view: &StudiesView) -> Vec<&TrialRow> {
    let mut done: Vec<&TrialRow> = view
        .rows
        .iter()
        .filter(|r| r.state == TrialState::Complete && r.value.is_some_and(f64::is_finite))
        .collect();
    done.sort_by(|a, b| a.number.cmp(&b.number).then_with(|| a.study.cmp(&b.study)));
    done
}

/// Whether smaller values are better in the selected group.
fn minimize(view: &StudiesView) -> bool {
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
    commands: &mut Vec<Command>,
) {
    let done = complete(view);
    ui.horizontal(|ui| {
        for tab in PlotTab::ALL {
            if ui
                .selectable_label(view.plot_tab == tab, tab.label())
                .clicked()
            {
                commands.push(Command::ShowPlot(tab));
            }
        }
    });
    match view.plot_tab {
        PlotTab::History => history(ui, view, &done, commands),
        PlotTab::Slice => slices(ui, view, &done, plot_param, commands),
        PlotTab::ParallelCoordinates => parallel_coordinates(ui, view, &done, commands),
        PlotTab::Intermediate => intermediate(ui, view),
        PlotTab::Edf => edf(ui, &done),
        PlotTab::Contour => contour(ui, view, &done, commands),
        PlotTab::Workers => super::timeline::timeline(ui, view),
    }
}

/// Each complete trial's value by trial number, and the best so far.
fn history(ui: &mut egui::Ui, view: &StudiesView, done: &[&TrialRow], commands: &mut Vec<Command>) {
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
fn open_clicked(
    ui: &egui::Ui,
    view: &StudiesView,
    response: &egui_plot::PlotResponse<()>,
    name: &str,
    points: &[(i64, [f64; 2])],
    commands: &mut Vec<Command>,
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
        && let Some(i) = view.rows.iter().position(|r| r.trial_id == *id)
    {
        commands.push(Command::ShowTrial(i));
    }
    ui.data_mut(|d| d.insert_temp(plot_points_id(name), TrialMarkers(screen)));
}

/// The empirical distribution function of the complete trials' values: the fraction of trials
/// whose value is at most x.
fn edf(ui: &mut egui::Ui, done: &[&TrialRow]) {
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
fn spacer(axis: &ParamAxis) -> Option<impl Fn(GridInput) -> Vec<GridMark> + use<>> {
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
fn tick(axis: &ParamAxis) -> impl Fn(GridMark, &RangeInclusive<f64>) -> String + use<> {
    let axis = axis.clone();
    move |m, _| axis.tick(m.value)
}

/// The objective against each parameter, a small plot each (log axes for log distributions,
/// choices for categorical ones). A parameter picked in the list is drawn large.
fn slices(
    ui: &mut egui::Ui,
    view: &StudiesView,
    done: &[&TrialRow],
    plot_param: &mut Option<String>,
    commands: &mut Vec<Command>,
) {
    if view.param_axes.is_empty() {
        ui.label("the study has no parameters");
        return;
    }
    if plot_param.as_ref().is_some_and(|p| view.axis(p).is_none()) {
        *plot_param = None;
    }
    ui.horizontal(|ui| {
        let l = ui.label("slice: objective against");
        egui::ComboBox::from_id_salt("plot_param")
            .selected_text(plot_param.clone().unwrap_or("every parameter".into()))
            .show_ui(ui, |ui| {
                ui.selectable_value(plot_param, None, "every parameter");
                for a in &view.param_axes {
                    ui.selectable_value(plot_param, Some(a.name.clone()), &a.name);
                }
            })
            .response
            .labelled_by(l.id);
    });
    let axes: Vec<&ParamAxis> = match plot_param {
        Some(p) => view.axis(p).into_iter().collect(),
        None => view.param_axes.iter().collect(),
    };
    let per_row = if axes.len() == 1 { 1 } else { SLICES_PER_ROW };
    for chunk in axes.chunks(per_row) {
        ui.columns(per_row, |cols| {
            for (ui, axis) in cols.iter_mut().zip(chunk) {
                slice(ui, view, axis, done, commands);
            }
        });
    }
}

fn slice(
    ui: &mut egui::Ui,
    view: &StudiesView,
    axis: &ParamAxis,
    done: &[&TrialRow],
    commands: &mut Vec<Command>,
) {
    let picked: Vec<(i64, [f64; 2])> = done
        .iter()
        .filter_map(|r| {
            Some((
                r.trial_id,
                [axis.to_plot(r.param_key(&axis.name)?), r.value?],
            ))
        })
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

/// A colour from dark blue (t = 0) to yellow (t = 1), as optuna-dashboard's scale.
fn colour(t: f64) -> Color32 {
    let t = t.clamp(0.0, 1.0) as f32;
    let lerp = |a: u8, b: u8| (a as f32 + (b as f32 - a as f32) * t).round() as u8;
    Color32::from_rgb(lerp(40, 250), lerp(50, 220), lerp(160, 40))
}

/// The plotted range of each axis over `rows` (min, max; a width of 1 when all are equal).
fn ranges(axes: &[&ParamAxis], rows: &[&TrialRow]) -> Vec<(f64, f64)> {
    axes.iter()
        .map(|a| {
            let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
            if let Scale::Choices(c) = &a.scale {
                (lo, hi) = (0.0, c.len().saturating_sub(1) as f64);
            }
            for r in rows {
                if let Some(k) = r.param_key(&a.name) {
                    let x = a.to_plot(k);
                    if x.is_finite() {
                        lo = lo.min(x);
                        hi = hi.max(x);
                    }
                }
            }
            if !lo.is_finite() {
                (0.0, 1.0)
            } else if hi - lo < 1e-12 {
                (lo - 0.5, hi + 0.5)
            } else {
                (lo, hi)
            }
        })
        .collect()
}

/// Where the parallel-coordinates plot drew each parameter's axis last frame: (name, screen
/// position of its low end, of its high end). Kept in egui's temporary data under
/// [`pc_axes_id`].
#[derive(Debug, Clone, Default)]
pub struct PcAxes(pub Vec<(String, egui::Pos2, egui::Pos2)>);

/// The id [`PcAxes`] is stored under.
pub fn pc_axes_id() -> egui::Id {
    egui::Id::unique("studies_pc_axes")
}

/// A drag on the parallel-coordinates plot: the axis it started on and where (0..1).
#[derive(Clone, Copy)]
struct Drag {
    axis: usize,
    from: f64,
}

/// One vertical axis per parameter (scaled 0–1 between its extremes) and the objective last; a
/// line per complete trial coloured by its value. Dragging along an axis keeps only the trials
/// whose parameter lies in the dragged range (in the plot and the table); a click on an axis
/// clears it.
fn parallel_coordinates(
    ui: &mut egui::Ui,
    view: &StudiesView,
    done: &[&TrialRow],
    commands: &mut Vec<Command>,
) {
    let axes: Vec<&ParamAxis> = view.param_axes.iter().collect();
    if axes.is_empty() {
        ui.label("the study has no parameters");
        return;
    }
    let ranges = ranges(&axes, done);
    let (vlo, vhi) = done
        .iter()
        .filter_map(|r| r.value)
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
            (a.min(v), b.max(v))
        });
    let vspan = if vhi > vlo { vhi - vlo } else { 1.0 };
    let n = axes.len();
    let kept = |r: &TrialRow| {
        view.brush.iter().all(|(name, lo, hi)| {
            let Some(a) = view.axis(name) else {
                return true;
            };
            r.param_key(name)
                .map(|k| a.to_plot(k))
                .is_some_and(|x| x >= *lo && x <= *hi)
        })
    };
    ui.label(format!(
        "parallel coordinates: {} of {} complete trials; colour: objective (blue {} to yellow {}); \
         drag along an axis to keep a range, click it to clear",
        done.iter().filter(|r| kept(r)).count(),
        done.len(),
        sig4(vlo.min(vhi)),
        sig4(vhi.max(vlo)),
    ));
    let unit = |v: f64, (lo, hi): (f64, f64)| (v - lo) / (hi - lo);
    let names: Vec<String> = axes
        .iter()
        .map(|a| a.name.clone())
        .chain(["objective".to_owned()])
        .collect();
    let drag_id = egui::Id::unique("studies_pc_drag");
    let response = Plot::new("parallel_coordinates")
        .height(PLOT_HEIGHT + 80.0)
        .allow_drag(false)
        .allow_zoom(false)
        .allow_scroll(false)
        .allow_boxed_zoom(false)
        .allow_double_click_reset(false)
        .show_grid([false, false])
        .show_axes([true, false])
        .include_x(-0.3)
        .include_x(n as f64 + 0.3)
        .include_y(-0.08)
        .include_y(1.08)
        .x_grid_spacer(move |_| {
            (0..=n)
                .map(|i| GridMark {
                    value: i as f64,
                    step_size: 1.0,
                })
                .collect()
        })
        .x_axis_formatter(move |m, _| {
            let i = m.value.round();
            if (m.value - i).abs() < 1e-6 && i >= 0.0 {
                names.get(i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .show(ui, |plot| {
            for r in done {
                let Some(v) = r.value else { continue };
                let mut line: Vec<[f64; 2]> = Vec::with_capacity(n + 1);
                for (i, a) in axes.iter().enumerate() {
                    if let Some(k) = r.param_key(&a.name) {
                        line.push([i as f64, unit(a.to_plot(k), ranges[i])]);
                    }
                }
                line.push([n as f64, (v - vlo) / vspan]);
                let c = if kept(r) {
                    colour((v - vlo) / vspan)
                } else {
                    Color32::from_gray(200).gamma_multiply(0.25)
                };
                plot.line(
                    Line::new("", PlotPoints::new(line))
                        .color(c)
                        .allow_hover(false),
                );
            }
            // The axes, their extremes (and every choice), and the brushed ranges.
            for (i, a) in axes.iter().enumerate() {
                let x = i as f64;
                plot.line(
                    Line::new("axis", PlotPoints::new(vec![[x, 0.0], [x, 1.0]]))
                        .color(Color32::GRAY)
                        .width(2.0)
                        .allow_hover(false),
                );
                let (lo, hi) = ranges[i];
                let labels: Vec<(f64, String)> = match &a.scale {
                    Scale::Choices(c) => c
                        .iter()
                        .enumerate()
                        .map(|(j, c)| (j as f64, c.clone()))
                        .collect(),
                    _ => vec![(lo, a.tick(lo)), (hi, a.tick(hi))],
                };
                for (at, text) in labels {
                    plot.text(
                        Text::new("tick", PlotPoint::new(x + 0.04, unit(at, ranges[i])), text)
                            .anchor(egui::Align2::LEFT_CENTER)
                            .color(ui_text_colour()),
                    );
                }
                if let Some((_, blo, bhi)) = view.brush.iter().find(|(b, _, _)| b == &a.name) {
                    let (y0, y1) = (unit(*blo, (lo, hi)), unit(*bhi, (lo, hi)));
                    plot.polygon(
                        Polygon::new(
                            "brush",
                            PlotPoints::new(vec![
                                [x - 0.06, y0],
                                [x + 0.06, y0],
                                [x + 0.06, y1],
                                [x - 0.06, y1],
                            ]),
                        )
                        .fill_color(Color32::from_rgba_unmultiplied(80, 160, 255, 90))
                        .allow_hover(false),
                    );
                }
            }
            let x = n as f64;
            plot.line(
                Line::new("axis", PlotPoints::new(vec![[x, 0.0], [x, 1.0]]))
                    .color(Color32::GRAY)
                    .width(2.0)
                    .allow_hover(false),
            );
            for (at, v) in [(0.0, vlo), (1.0, vhi)] {
                if v.is_finite() {
                    plot.text(
                        Text::new("tick", PlotPoint::new(x + 0.04, at), sig4(v))
                            .anchor(egui::Align2::LEFT_CENTER)
                            .color(ui_text_colour()),
                    );
                }
            }
            plot.pointer_coordinate()
        });
    // Where each parameter's axis is on screen (its 0 and 1 ends), for a test to drag along.
    let ends: Vec<(String, egui::Pos2, egui::Pos2)> = axes
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let t = &response.transform;
            (
                a.name.clone(),
                t.position_from_point(&PlotPoint::new(i as f64, 0.0)),
                t.position_from_point(&PlotPoint::new(i as f64, 1.0)),
            )
        })
        .collect();
    ui.data_mut(|d| d.insert_temp(pc_axes_id(), PcAxes(ends)));
    // Brushing: a drag that starts near an axis selects a range on it.
    let pointer = response.inner;
    let r = &response.response;
    if r.drag_started()
        && let Some(p) = pointer
    {
        let i = p.x.round();
        if (p.x - i).abs() < 0.25 && i >= 0.0 && (i as usize) < n {
            ui.data_mut(|d| {
                d.insert_temp(
                    drag_id,
                    Drag {
                        axis: i as usize,
                        from: p.y.clamp(0.0, 1.0),
                    },
                )
            });
        }
    }
    let drag: Option<Drag> = ui.data(|d| d.get_temp(drag_id));
    if let (Some(d), Some(p)) = (drag, pointer) {
        let (lo, hi) = ranges[d.axis];
        let to = p.y.clamp(0.0, 1.0);
        if r.drag_stopped() {
            ui.data_mut(|m| m.remove::<Drag>(drag_id));
            let back = |u: f64| lo + u * (hi - lo);
            commands.push(Command::BrushAxis(
                axes[d.axis].name.clone(),
                Some((back(d.from.min(to)), back(d.from.max(to)))),
            ));
        }
    } else if r.drag_stopped() {
        ui.data_mut(|m| m.remove::<Drag>(drag_id));
    }
    if r.clicked()
        && let Some(p) = pointer
    {
        let i = p.x.round();
        if (p.x - i).abs() < 0.25 && i >= 0.0 && (i as usize) < n {
            commands.push(Command::BrushAxis(axes[i as usize].name.clone(), None));
        }
    }
}

/// Tick text colour inside a plot (it does not follow the theme by itself).
fn ui_text_colour() -> Color32 {
    Color32::from_gray(140)
}

/// The intermediate values every trial reported (its learning curve as the pruner saw it):
/// complete trials in blue, pruned in red with a cross where they stopped, running in green,
/// and the median of the complete ones at each step (the median pruner's threshold).
fn intermediate(ui: &mut egui::Ui, view: &StudiesView) {
    let with: Vec<&TrialRow> = view
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
            let median = median_by_step(
                with.iter()
                    .filter(|r| r.state == TrialState::Complete)
                    .map(|r| r.intermediate.as_slice()),
            );
            if !median.is_empty() {
                plot.line(
                    Line::new("median pruner threshold", PlotPoints::new(median))
                        .color(Color32::from_rgb(240, 200, 60))
                        .style(egui_plot::LineStyle::dashed_loose())
                        .width(2.0),
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

/// Cells per side of the contour's grid.
const CONTOUR_CELLS: usize = 24;

/// The objective over two parameters: each cell of a grid coloured by the objective
/// interpolated from the complete trials (inverse-distance weighting over the axes scaled to
/// 0–1, log axes in log10, categorical ones by choice), and the trials themselves on top.
/// Optuna's contour interpolates likewise between the trials; the grid is computed once per
/// trial count and pair, not per frame.
fn contour(ui: &mut egui::Ui, view: &StudiesView, done: &[&TrialRow], commands: &mut Vec<Command>) {
    if view.param_axes.len() < 2 {
        ui.label("a contour needs two parameters");
        return;
    }
    let (x, y) = match &view.contour {
        Some((x, y)) if view.axis(x).is_some() && view.axis(y).is_some() => (x.clone(), y.clone()),
        _ => (
            view.param_axes[0].name.clone(),
            view.param_axes[1].name.clone(),
        ),
    };
    ui.horizontal(|ui| {
        for (label, current, other, is_x) in [("x", &x, &y, true), ("y", &y, &x, false)] {
            let l = ui.label(label);
            egui::ComboBox::from_id_salt(("contour", label))
                .selected_text(current.as_str())
                .show_ui(ui, |ui| {
                    for a in &view.param_axes {
                        if ui.selectable_label(&a.name == current, &a.name).clicked() {
                            let (nx, ny) = if is_x {
                                (a.name.clone(), other.clone())
                            } else {
                                (other.clone(), a.name.clone())
                            };
                            commands.push(Command::ContourParams(nx, ny));
                        }
                    }
                })
                .response
                .labelled_by(l.id);
        }
    });
    let (Some(ax), Some(ay)) = (view.axis(&x), view.axis(&y)) else {
        return;
    };
    let trials: Vec<([f64; 2], f64)> = done
        .iter()
        .filter_map(|r| {
            let px = ax.to_plot(r.param_key(&x)?);
            let py = ay.to_plot(r.param_key(&y)?);
            (px.is_finite() && py.is_finite()).then_some(([px, py], r.value?))
        })
        .collect();
    ui.label(format!(
        "contour of the objective over {x} and {y} ({} complete trials)",
        trials.len()
    ));
    if trials.is_empty() {
        return;
    }
    let r = ranges(&[ax, ay], done);
    let key = egui::Id::unique(("studies_contour", &x, &y, trials.len(), view.rows.len()));
    let grid: std::sync::Arc<Vec<f64>> = match ui.data(|d| d.get_temp(key)) {
        Some(g) => g,
        None => {
            let g = std::sync::Arc::new(interpolate(&trials, r[0], r[1], CONTOUR_CELLS));
            ui.data_mut(|d| d.insert_temp(key, g.clone()));
            g
        }
    };
    let (lo, hi) = grid
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
            (a.min(*v), b.max(*v))
        });
    let span = if hi > lo { hi - lo } else { 1.0 };
    let (cx, cy) = (
        (r[0].1 - r[0].0) / CONTOUR_CELLS as f64,
        (r[1].1 - r[1].0) / CONTOUR_CELLS as f64,
    );
    let mut plot = Plot::new("contour")
        .height(PLOT_HEIGHT + 80.0)
        .x_axis_label(x.clone())
        .y_axis_label(y.clone())
        .x_axis_formatter(tick(ax))
        .y_axis_formatter(tick(ay));
    if let Some(s) = spacer(ax) {
        plot = plot.x_grid_spacer(s);
    }
    if let Some(s) = spacer(ay) {
        plot = plot.y_grid_spacer(s);
    }
    plot.show(ui, |plot| {
        for j in 0..CONTOUR_CELLS {
            for i in 0..CONTOUR_CELLS {
                let v = grid[j * CONTOUR_CELLS + i];
                let (x0, y0) = (r[0].0 + i as f64 * cx, r[1].0 + j as f64 * cy);
                plot.polygon(
                    Polygon::new(
                        "",
                        PlotPoints::new(vec![
                            [x0, y0],
                            [x0 + cx, y0],
                            [x0 + cx, y0 + cy],
                            [x0, y0 + cy],
                        ]),
                    )
                    .fill_color(colour((v - lo) / span).gamma_multiply(0.8))
                    .stroke(egui::Stroke::NONE)
                    .allow_hover(false),
                );
            }
        }
        let points: Vec<[f64; 2]> = trials.iter().map(|t| t.0).collect();
        plot.points(
            Points::new("trials", PlotPoints::new(points))
                .radius(3.0)
                .color(Color32::WHITE),
        );
    });
    ui.label(format!(
        "colour: interpolated objective (blue {} to yellow {})",
        sig4(lo),
        sig4(hi)
    ));
}

/// The objective at the centre of each cell of an `n`×`n` grid over the ranges (row by row,
/// from the low y), by inverse-distance weighting (power 2) of `trials` ((x, y), value) with
/// each axis scaled to 0–1; a cell on a trial takes its value.
fn interpolate(
    trials: &[([f64; 2], f64)],
    (x0, x1): (f64, f64),
    (y0, y1): (f64, f64),
    n: usize,
) -> Vec<f64> {
    let (sx, sy) = (x1 - x0, y1 - y0);
    let unit: Vec<([f64; 2], f64)> = trials
        .iter()
        .map(|([x, y], v)| ([(x - x0) / sx, (y - y0) / sy], *v))
        .collect();
    let mut out = Vec::with_capacity(n * n);
    for j in 0..n {
        for i in 0..n {
            let (u, w) = ((i as f64 + 0.5) / n as f64, (j as f64 + 0.5) / n as f64);
            let (mut num, mut den) = (0.0, 0.0);
            let mut exact = None;
            for ([a, b], v) in &unit {
                let d2 = (a - u).powi(2) + (b - w).powi(2);
                if d2 < 1e-12 {
                    exact = Some(*v);
                    break;
                }
                num += v / d2;
                den += 1.0 / d2;
            }
            out.push(exact.unwrap_or(num / den));
        }
    }
    out
}

/// At each step, the median of the intermediate values `curves` (the COMPLETE trials')
/// reported there: what Optuna's `MedianPruner` compares a running trial with (it prunes one
/// whose value is worse than this line at the same step). Infinite and NaN values are left out.
fn median_by_step<'a>(curves: impl Iterator<Item = &'a [(i64, f64)]>) -> Vec<[f64; 2]> {
    let mut by_step: std::collections::BTreeMap<i64, Vec<f64>> = Default::default();
    for curve in curves {
        for &(step, v) in curve {
            if v.is_finite() {
                by_step.entry(step).or_default().push(v);
            }
        }
    }
    by_step
        .into_iter()
        .map(|(step, mut v)| {
            v.sort_by(f64::total_cmp);
            let n = v.len();
            let m = if n % 2 == 1 {
                v[n / 2]
            } else {
                (v[n / 2 - 1] + v[n / 2]) / 2.0
            };
            [step as f64, m]
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{interpolate, median_by_step};

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

    #[test]
    fn the_median_of_each_step_over_the_curves_that_reached_it() {
        let a = [(0, 1.0), (1, 0.5), (2, 0.1)];
        let b = [(0, 3.0), (1, f64::NAN)];
        let c = [(0, 2.0), (1, 0.7)];
        let curves = [&a[..], &b[..], &c[..]];
        assert_eq!(
            median_by_step(curves.into_iter()),
            vec![[0.0, 2.0], [1.0, 0.6], [2.0, 0.1]]
        );
    }
}
