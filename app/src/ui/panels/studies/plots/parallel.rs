//! The parallel-coordinates plot of the Studies panel: an axis per parameter and the
//! objective, lines coloured by objective, brushing an axis filters the trial table.

use std::ops::RangeInclusive;
use std::sync::Arc;

use egui::epaint::{Mesh, Vertex};
use egui::{Color32, Pos2, Shape, Ui, Vec2};
use egui_plot::{
    GridMark, Line, Plot, PlotBounds, PlotGeometry, PlotItem, PlotItemBase, PlotPoint, PlotPoints,
    PlotTransform, Polygon, Text,
};

use super::*;
use crate::ui::panels::studies::Action;
use crate::ui::panels::studies::StudiesView;
use crate::ui::panels::studies::table::brushes_keep;
use crate::ui::tasks::{ParamAxis, Scale, TrialRow, sig4};

/// A colour from dark blue (t = 0) to yellow (t = 1), as optuna-dashboard's scale.
pub(super) fn colour(t: f64) -> Color32 {
    let t = t.clamp(0.0, 1.0) as f32;
    let lerp = |a: u8, b: u8| (a as f32 + (b as f32 - a as f32) * t).round() as u8;
    Color32::from_rgb(lerp(40, 250), lerp(50, 220), lerp(160, 40))
}

/// The plotted range of `axis` over the positions `xs` (min, max of the finite ones; every
/// choice of a categorical axis; a width of 1 when all are equal).
fn range_of(axis: &ParamAxis, xs: impl Iterator<Item = f64>) -> (f64, f64) {
    let (mut lo, mut hi) = match &axis.scale {
        Scale::Choices(c) => (0.0, c.len().saturating_sub(1) as f64),
        _ => (f64::INFINITY, f64::NEG_INFINITY),
    };
    for x in xs.filter(|x| x.is_finite()) {
        lo = lo.min(x);
        hi = hi.max(x);
    }
    if !lo.is_finite() {
        (0.0, 1.0)
    } else if hi - lo < 1e-12 {
        (lo - 0.5, hi + 0.5)
    } else {
        (lo, hi)
    }
}

/// The plotted range of each axis (with its position among the view's axes) over `rows` (see
/// [`range_of`]).
pub(super) fn ranges(axes: &[(usize, &ParamAxis)], rows: &[&TrialRow]) -> Vec<(f64, f64)> {
    axes.iter()
        .map(|&(i, a)| range_of(a, rows.iter().filter_map(|r| r.axis_x(i, a))))
        .collect()
}

/// The trial lines of the plot in plot coordinates (x: the axis's index, y: 0–1 along it; the
/// objective's axis last), coloured by objective, grey when a brush leaves them out (those
/// first, so the kept ones are drawn over them). Built when the view's rows change.
pub(super) struct PcGeometry {
    /// What it was built for: the view's generation, group and rows.
    key: GeometryKey,
    /// Tells this geometry from every other one built (its mesh is cached under it).
    serial: u64,
    /// Each axis's plotted range (see [`ranges`]).
    ranges: Vec<(f64, f64)>,
    /// The objective's extremes.
    vlo: f64,
    vhi: f64,
    /// How many trials every brush keeps.
    kept: usize,
    /// The points of every line, one line after another.
    points: Vec<[f32; 2]>,
    /// Where each line starts in `points`, and its colour.
    lines: Vec<(u32, Color32)>,
}

impl PcGeometry {
    fn new(view: &StudiesView, axes: &[(usize, &ParamAxis)], done: &[&TrialRow]) -> Self {
        let n = axes.len();
        let brushes = view.table.resolved_brushes(&view.plots.brush);
        // One pass over the rows (10,000 scattered structs): each one's positions (NaN where it
        // lacks the parameter), value and whether the brushes keep it, into flat arrays.
        let mut xs: Vec<f64> = Vec::with_capacity(done.len() * n);
        let mut trials: Vec<(f64, bool)> = Vec::with_capacity(done.len());
        for r in done {
            let Some(v) = r.value else { continue };
            trials.push((v, brushes_keep(&brushes, r)));
            xs.extend(
                axes.iter()
                    .map(|&(i, a)| r.axis_x(i, a).unwrap_or(f64::NAN)),
            );
        }
        let ranges: Vec<(f64, f64)> = axes
            .iter()
            .enumerate()
            .map(|(j, (_, a))| range_of(a, xs.iter().skip(j).step_by(n.max(1)).copied()))
            .collect();
        let (vlo, vhi) = trials
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &(v, _)| {
                (a.min(v), b.max(v))
            });
        let vspan = if vhi > vlo { vhi - vlo } else { 1.0 };
        let unit = |v: f64, (lo, hi): (f64, f64)| ((v - lo) / (hi - lo)) as f32;
        static BUILT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let mut g = Self {
            key: GeometryKey::of(view, done),
            serial: BUILT.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            ranges: Vec::new(),
            vlo,
            vhi,
            kept: trials.iter().filter(|t| t.1).count(),
            points: Vec::with_capacity(trials.len() * (n + 1)),
            lines: Vec::with_capacity(trials.len()),
        };
        let grey = Color32::from_gray(200).gamma_multiply(0.25);
        // The lines the brushes leave out first, so the kept ones are drawn over them.
        for kept in [false, true] {
            for (k, &(v, keep)) in trials.iter().enumerate() {
                if keep != kept {
                    continue;
                }
                let t = (v - vlo) / vspan;
                g.lines
                    .push((g.points.len() as u32, if kept { colour(t) } else { grey }));
                for (i, &x) in xs[k * n..(k + 1) * n].iter().enumerate() {
                    if !x.is_nan() {
                        g.points.push([i as f32, unit(x, ranges[i])]);
                    }
                }
                g.points.push([n as f32, t as f32]);
            }
        }
        g.ranges = ranges;
        g
    }

    /// The lines as one mesh in screen coordinates: per line a strip of three vertices across
    /// each point (transparent, colour, transparent: a thin anti-aliased line, as egui draws
    /// lines no wider than a pixel), joined with mitred normals.
    ///
    /// The mesh samples `texture`, a white texture of its own: a mesh with a texture unlike its
    /// neighbours' is a draw of its own, so the shapes painted after it (axes, labels) do not
    /// grow the ~9 MB buffer it is copied into for the frame (a reallocation and a copy of it
    /// per frame).
    fn mesh(
        &self,
        transform: &PlotTransform,
        pixels_per_point: f32,
        texture: egui::TextureId,
    ) -> Mesh {
        let segments = self.points.len().saturating_sub(self.lines.len());
        let mut mesh = Mesh::with_texture(texture);
        mesh.reserve_vertices(self.points.len() * 3);
        mesh.reserve_triangles(segments * 4);
        // As bright as egui_plot's 1.5-point lines: the profile's integral is `half`.
        let half = 1.5 / pixels_per_point.max(0.1);
        // The transform is affine and keeps the axes: the screen position of (0, 0) and the
        // steps of one unit along x and y, instead of a general mapping per point.
        let at = |x: f64, y: f64| transform.position_from_point(&PlotPoint::new(x, y));
        let origin = at(0.0, 0.0);
        let step = Vec2::new(at(1.0, 0.0).x - origin.x, at(0.0, 1.0).y - origin.y);
        let mut screen: Vec<Pos2> = Vec::new();
        let mut normals: Vec<Vec2> = Vec::new();
        for (k, &(start, c)) in self.lines.iter().enumerate() {
            let end = self
                .lines
                .get(k + 1)
                .map_or(self.points.len(), |l| l.0 as usize);
            screen.clear();
            screen.extend(
                self.points[start as usize..end]
                    .iter()
                    .map(|p| Pos2::new(origin.x + p[0] * step.x, origin.y + p[1] * step.y)),
            );
            strip(&mut mesh, &screen, &mut normals, c, half);
        }
        mesh
    }
}

/// One line through `points` as a strip of three vertices per point: `c` on the line, fading to
/// transparent `half` away on either side. `normals` is scratch space.
fn strip(mesh: &mut Mesh, points: &[Pos2], normals: &mut Vec<Vec2>, c: Color32, half: f32) {
    if points.len() < 2 {
        return;
    }
    // Each segment's unit normal, once (a square root, not `hypot`: this runs 80,000 times).
    normals.clear();
    normals.extend(points.windows(2).map(|w| {
        let d = w[1] - w[0];
        let len2 = d.x * d.x + d.y * d.y;
        if len2 < 1e-12 {
            Vec2::ZERO
        } else {
            Vec2::new(-d.y, d.x) / len2.sqrt()
        }
    }));
    let base = mesh.vertices.len() as u32;
    let t = Color32::TRANSPARENT;
    let last = points.len() - 1;
    for (i, &p) in points.iter().enumerate() {
        let n = if i == 0 {
            normals[0]
        } else if i == last {
            normals[last - 1]
        } else {
            // The mitre: the mean of both normals, lengthened to keep the width (bounded at
            // sharp turns).
            let (n1, n2) = (normals[i - 1], normals[i]);
            let m = n1 + n2;
            let len = (m.x * m.x + m.y * m.y).sqrt();
            let cos = len / 2.0;
            if cos < 1e-3 {
                n1
            } else {
                m / (len * cos.max(0.25))
            }
        };
        // Untextured vertices sample the texture at (0, 0): white in the mesh's texture too.
        mesh.vertices.extend([
            Vertex::untextured(p - n * half, t),
            Vertex::untextured(p, c),
            Vertex::untextured(p + n * half, t),
        ]);
    }
    for i in 0..last as u32 {
        let (a, b) = (base + 3 * i, base + 3 * (i + 1));
        for k in 0..2 {
            mesh.add_triangle(a + k, a + k + 1, b + k);
            mesh.add_triangle(a + k + 1, b + k + 1, b + k);
        }
    }
}

/// The trial lines as one plot item: their mesh is built once per change of the lines or of
/// the plot's frame and bounds, and reused (an `Arc`) on every other frame.
struct TrialLines {
    base: PlotItemBase,
    geometry: Arc<PcGeometry>,
}

/// A 1×1 white texture, loaded once per context, for [`PcGeometry::mesh`] (the handle is
/// kept in egui's temporary data; the texture lives as long as it).
fn white_texture(ui: &Ui) -> egui::TextureHandle {
    let id = egui::Id::unique("studies_pc_white");
    if let Some(t) = ui.data(|d| d.get_temp::<egui::TextureHandle>(id)) {
        return t;
    }
    let t = ui.ctx().load_texture(
        "studies_pc_white",
        egui::ColorImage::filled([1, 1], Color32::WHITE),
        egui::TextureOptions::NEAREST,
    );
    ui.data_mut(|d| d.insert_temp(id, t.clone()));
    t
}

/// What a [`PcGeometry`] was built from: the rows of one view of one group (a study in another
/// database, or another group of the same size, has rows of its own even at the same revision,
/// which every open starts over).
#[derive(Debug, Clone, PartialEq)]
struct GeometryKey {
    /// The view's [`generation`](crate::ui::panels::studies::StudiesView::generation).
    generation: u64,
    /// The selected group.
    group: Option<String>,
    /// The [`TrialTable::revision`](crate::ui::panels::studies::TrialTable::revision).
    revision: u64,
    /// The complete trials.
    trials: usize,
}

impl GeometryKey {
    fn of(view: &StudiesView, done: &[&TrialRow]) -> Self {
        GeometryKey {
            generation: view.generation,
            group: view.selected.clone(),
            revision: view.table.revision,
            trials: done.len(),
        }
    }
}

/// What a cached mesh of [`TrialLines`] was built for.
#[derive(Clone, Copy, PartialEq)]
struct MeshKey {
    /// The geometry's [`PcGeometry::serial`].
    geometry: u64,
    frame: egui::Rect,
    bounds: PlotBounds,
    pixels_per_point: f32,
}

impl PlotItem for TrialLines {
    fn shapes(&self, ui: &Ui, transform: &PlotTransform, shapes: &mut Vec<Shape>) {
        let key = MeshKey {
            geometry: self.geometry.serial,
            frame: *transform.frame(),
            bounds: *transform.bounds(),
            pixels_per_point: ui.pixels_per_point(),
        };
        let id = egui::Id::unique("studies_pc_mesh");
        let cached: Option<(MeshKey, Arc<Mesh>)> = ui.data(|d| d.get_temp(id));
        let mesh = match cached {
            Some((k, mesh)) if k == key => mesh,
            _ => {
                let texture = white_texture(ui);
                let mesh = Arc::new(self.geometry.mesh(
                    transform,
                    key.pixels_per_point,
                    texture.id(),
                ));
                ui.data_mut(|d| d.insert_temp(id, (key, mesh.clone())));
                mesh
            }
        };
        shapes.push(Shape::Mesh(mesh));
    }

    fn initialize(&mut self, _x_range: RangeInclusive<f64>) {}

    fn color(&self) -> Color32 {
        Color32::TRANSPARENT
    }

    fn allow_hover(&self) -> bool {
        false
    }

    fn geometry(&self) -> PlotGeometry<'_> {
        PlotGeometry::None
    }

    fn bounds(&self) -> PlotBounds {
        PlotBounds::NOTHING
    }

    fn base(&self) -> &PlotItemBase {
        &self.base
    }

    fn base_mut(&mut self) -> &mut PlotItemBase {
        &mut self.base
    }
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
    commands: &mut Vec<Action>,
) {
    let axes: Vec<(usize, &ParamAxis)> = view.table.param_axes.iter().enumerate().collect();
    if axes.is_empty() {
        ui.label("the study has no parameters");
        return;
    }
    // The lines are derived from the rows once per change of them (the view's revision), not
    // per frame: 10,000 trials × 8 parameters are 90,000 points.
    let geometry_id = egui::Id::unique("studies_pc_geometry");
    let cached: Option<Arc<PcGeometry>> = ui.data(|d| d.get_temp(geometry_id));
    let geometry = match cached {
        Some(g) if g.key == GeometryKey::of(view, done) => g,
        _ => {
            let g = Arc::new(PcGeometry::new(view, &axes, done));
            ui.data_mut(|d| d.insert_temp(geometry_id, g.clone()));
            g
        }
    };
    let ranges = geometry.ranges.clone();
    let (vlo, vhi) = (geometry.vlo, geometry.vhi);
    let n = axes.len();
    ui.label(format!(
        "parallel coordinates: {} of {} complete trials; colour: objective (blue {} to yellow {}); \
         drag along an axis to keep a range, click it to clear",
        geometry.kept,
        done.len(),
        sig4(vlo.min(vhi)),
        sig4(vhi.max(vlo)),
    ));
    let unit = |v: f64, (lo, hi): (f64, f64)| (v - lo) / (hi - lo);
    let names: Vec<String> = axes
        .iter()
        .map(|a| a.1.name.clone())
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
            plot.add(TrialLines {
                base: PlotItemBase::new("trials".to_owned()),
                geometry: geometry.clone(),
            });
            // The axes, their extremes (and every choice), and the brushed ranges.
            for (i, &(_, a)) in axes.iter().enumerate() {
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
                if let Some((_, blo, bhi)) = view.plots.brush.iter().find(|(b, _, _)| b == &a.name)
                {
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
                a.1.name.clone(),
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
            commands.push(Action::BrushAxis(
                axes[d.axis].1.name.clone(),
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
            commands.push(Action::BrushAxis(axes[i as usize].1.name.clone(), None));
        }
    }
}

/// Tick text colour inside a plot (it does not follow the theme by itself).
pub(super) fn ui_text_colour() -> Color32 {
    Color32::from_gray(140)
}
