//! The contour plot of the Studies panel: the objective over two chosen parameters,
//! interpolated between the trials.

use std::sync::Arc;

use egui::Color32;
use egui_plot::{Plot, PlotPoints, Points, Polygon};

use super::parallel::{colour, ranges};
use super::*;
use crate::ui::panels::studies::Action;
use crate::ui::panels::studies::StudiesView;
use crate::ui::tasks::{TrialRow, sig4};

/// Cells per side of the contour's grid.
pub(super) const CONTOUR_CELLS: usize = 24;

/// What the contour's grid was computed from (see [`contour`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContourKey {
    /// The Studies view's generation (another database or selection).
    pub generation: u64,
    /// The group shown.
    pub group: Option<String>,
    /// The parameters on the axes.
    pub x: String,
    pub y: String,
    /// Complete trials, and those among them with both parameters.
    pub done: usize,
    pub trials: usize,
}

/// The contour's grid (objective per cell, row by row) with what it was computed from, kept in
/// egui's memory under [`contour_id`].
pub type ContourCache = (ContourKey, Arc<Vec<f64>>);

/// Where the contour's grid is kept: one Id, one grid.
pub fn contour_id() -> egui::Id {
    egui::Id::unique("studies_contour")
}

/// The objective over two parameters: each cell of a grid coloured by the objective
/// interpolated from the complete trials (inverse-distance weighting over the axes scaled to
/// 0–1, log axes in log10, categorical ones by choice), and the trials themselves on top.
/// Optuna's contour interpolates likewise between the trials; the grid is computed once per
/// trial count and pair, not per frame.
pub(super) fn contour(
    ui: &mut egui::Ui,
    view: &StudiesView,
    done: &[&TrialRow],
    commands: &mut Vec<Action>,
) {
    if view.table.param_axes.len() < 2 {
        ui.label("a contour needs two parameters");
        return;
    }
    let (x, y) = match &view.plots.contour {
        Some((x, y)) if view.table.axis(x).is_some() && view.table.axis(y).is_some() => {
            (x.clone(), y.clone())
        }
        _ => (
            view.table.param_axes[0].name.clone(),
            view.table.param_axes[1].name.clone(),
        ),
    };
    ui.horizontal(|ui| {
        for (label, current, other, is_x) in [("x", &x, &y, true), ("y", &y, &x, false)] {
            let l = ui.label(label);
            egui::ComboBox::from_id_salt(("contour", label))
                .selected_text(current.as_str())
                .show_ui(ui, |ui| {
                    for a in &view.table.param_axes {
                        if ui.selectable_label(&a.name == current, &a.name).clicked() {
                            let (nx, ny) = if is_x {
                                (a.name.clone(), other.clone())
                            } else {
                                (other.clone(), a.name.clone())
                            };
                            commands.push(Action::ContourParams(nx, ny));
                        }
                    }
                })
                .response
                .labelled_by(l.id);
        }
    });
    let (Some((ix, ax)), Some((iy, ay))) = (view.table.axis_at(&x), view.table.axis_at(&y)) else {
        return;
    };
    let trials: Vec<([f64; 2], f64)> = done
        .iter()
        .filter_map(|r| {
            let px = r.axis_x(ix, ax)?;
            let py = r.axis_x(iy, ay)?;
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
    let r = ranges(&[(ix, ax), (iy, ay)], done);
    // One grid is kept, under one Id, with what it was computed from: the view's generation
    // and group (two studies of the same parameters and trial counts, from one preset or in
    // two databases, each have a grid of their own), the pair, and the complete trials. Not
    // the table's revision: sorting, filtering, brushing and a running trial's row change it,
    // not the complete trials the grid is of (a new key per revision was a new entry each,
    // never evicted, and a grid computed again in the frame).
    let key = ContourKey {
        generation: view.generation,
        group: view.selected.clone(),
        x: x.clone(),
        y: y.clone(),
        done: done.len(),
        trials: trials.len(),
    };
    let cached: Option<ContourCache> = ui.data(|d| d.get_temp(contour_id()));
    let grid = match cached {
        Some((k, g)) if k == key => g,
        _ => {
            let g = Arc::new(interpolate(&trials, r[0], r[1], CONTOUR_CELLS));
            ui.data_mut(|d| d.insert_temp(contour_id(), (key, g.clone())));
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
pub(super) fn interpolate(
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
