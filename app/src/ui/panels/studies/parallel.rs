//! The parallel-coordinates plot of the Studies panel: an axis per parameter and the
//! objective, lines coloured by objective, brushing an axis filters the trial table.

use egui::Color32;
use egui_plot::{GridMark, Line, Plot, PlotPoint, PlotPoints, Polygon, Text};

use super::plots::*;
use super::view::{ParamAxis, Scale, StudiesView, TrialRow, sig4};
use crate::ui::command::Command;

/// A colour from dark blue (t = 0) to yellow (t = 1), as optuna-dashboard's scale.
pub(super) fn colour(t: f64) -> Color32 {
    let t = t.clamp(0.0, 1.0) as f32;
    let lerp = |a: u8, b: u8| (a as f32 + (b as f32 - a as f32) * t).round() as u8;
    Color32::from_rgb(lerp(40, 250), lerp(50, 220), lerp(160, 40))
}

/// The plotted range of each axis over `rows` (min, max; a width of 1 when all are equal).
pub(super) fn ranges(axes: &[&ParamAxis], rows: &[&TrialRow]) -> Vec<(f64, f64)> {
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
pub(super) struct Drag {
    axis: usize,
    from: f64,
}

/// One vertical axis per parameter (scaled 0–1 between its extremes) and the objective last; a
/// line per complete trial coloured by its value. Dragging along an axis keeps only the trials
/// whose parameter lies in the dragged range (in the plot and the table); a click on an axis
/// clears it.
pub(super) fn parallel_coordinates(
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
        .x_axis_formatter(move |m, _| index_label(&names, m.value))
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
pub(super) fn ui_text_colour() -> Color32 {
    Color32::from_gray(140)
}
