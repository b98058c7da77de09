//! The Studies panel's plots (optimisation history, a parameter against the objective) and
//! one trial's details: its parameters, telemetry, applied configuration and training curves.

use egui_plot::{Legend, Line, Plot, PlotPoints, Points};
use tradetune_engine::storage::TrialState;

use super::view::{Curves, StudiesView, TrialRow};
use crate::ui::command::Command;
use crate::ui::panels::widgets;

const PLOT_HEIGHT: f32 = 150.0;

/// Optimisation history (each complete trial's value in the order trials were numbered, and
/// the best so far) and one parameter against the objective.
pub(super) fn plots(ui: &mut egui::Ui, view: &StudiesView, plot_param: &mut Option<String>) {
    let minimize = view
        .groups
        .iter()
        .find(|g| Some(&g.name) == view.selected.as_ref())
        .is_none_or(|g| g.minimize);
    let mut done: Vec<&TrialRow> = view
        .rows
        .iter()
        .filter(|r| r.state == TrialState::Complete && r.value.is_some_and(f64::is_finite))
        .collect();
    done.sort_by(|a, b| a.number.cmp(&b.number).then_with(|| a.study.cmp(&b.study)));
    let values: Vec<[f64; 2]> = done
        .iter()
        .enumerate()
        .filter_map(|(i, r)| r.value.map(|v| [i as f64, v]))
        .collect();
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
    let names: Vec<String> = {
        // Borrowed while sorting: this runs every frame over up to 10,000 trials.
        let mut n: Vec<&str> = done
            .iter()
            .flat_map(|r| r.numeric_params.iter().map(|(k, _)| k.as_str()))
            .collect();
        n.sort_unstable();
        n.dedup();
        n.into_iter().map(str::to_owned).collect()
    };
    if plot_param.as_ref().is_none_or(|p| !names.contains(p)) {
        *plot_param = names.first().cloned();
    }
    ui.columns(2, |cols| {
        cols[0].label("optimisation history (complete trials in order; best so far)");
        Plot::new("history")
            .height(PLOT_HEIGHT)
            .legend(Legend::default())
            .show(&mut cols[0], |plot| {
                plot.points(Points::new("objective", PlotPoints::new(values.clone())).radius(2.5));
                plot.line(Line::new(
                    "best so far",
                    PlotPoints::new(best_so_far.clone()),
                ));
            });
        let ui = &mut cols[1];
        ui.horizontal(|ui| {
            let l = ui.label("parameter");
            egui::ComboBox::from_id_salt("plot_param")
                .selected_text(plot_param.clone().unwrap_or_default())
                .show_ui(ui, |ui| {
                    for n in &names {
                        ui.selectable_value(plot_param, Some(n.clone()), n);
                    }
                })
                .response
                .labelled_by(l.id);
            ui.label("against the objective");
        });
        let points: Vec<[f64; 2]> = done
            .iter()
            .filter_map(|r| {
                let p = plot_param.as_ref()?;
                let x = r.numeric_params.iter().find(|(k, _)| k == p)?.1;
                Some([x, r.value?])
            })
            .collect();
        Plot::new("param_vs_objective")
            .height(PLOT_HEIGHT)
            .show(ui, |plot| {
                plot.points(Points::new("trials", PlotPoints::new(points)).radius(2.5));
            });
    });
}

pub(super) fn detail(
    ui: &mut egui::Ui,
    row: &TrialRow,
    curve: Option<&Result<Curves, String>>,
    commands: &mut Vec<Command>,
) {
    egui::Frame::group(ui.style()).show(ui, |ui| {
        ui.strong(format!(
            "trial {} of {} — {}",
            row.number, row.study, row.state
        ));
        ui.label(format!("parameters: {}", row.params));
        if !row.device.is_empty() {
            ui.label(format!("device: {} ({})", row.device, row.placement));
        }
        if let Some(sps) = row.samples_per_s {
            ui.label(format!("{sps:.0} samples/s"));
        }
        if let Some(v) = &row.verdict {
            ui.label(format!("bottleneck: {v}"));
        }
        if let Some(dir) = &row.checkpoint
            && ui
                .button(format!("Backtest trial {}", row.number))
                .clicked()
        {
            commands.push(Command::BacktestTrial(dir.clone()));
        }
        if let Some(reason) = &row.fail_reason {
            ui.colored_label(widgets::WARN, format!("failed: {reason}"));
        }
        if !row.telemetry.is_empty() {
            egui::CollapsingHeader::new("telemetry summary")
                .id_salt(("telemetry summary", row.trial_id))
                .show(ui, |ui| {
                    egui::Grid::new("telemetry_summary")
                        .striped(true)
                        .show(ui, |ui| {
                            for (k, v) in &row.telemetry {
                                ui.label(k);
                                ui.label(v);
                                ui.end_row();
                            }
                        });
                });
        }
        if let Some(config) = &row.applied_config {
            ui.collapsing("applied configuration", |ui| {
                egui::ScrollArea::vertical()
                    .id_salt("applied_config")
                    .max_height(200.0)
                    .show(ui, |ui| ui.monospace(config));
            });
        }
        if !row.intermediate.is_empty() {
            ui.label("learning curve (intermediate values reported to the pruner)");
            let curve: Vec<[f64; 2]> = row
                .intermediate
                .iter()
                .map(|&(step, v)| [step as f64, v])
                .collect();
            Plot::new("learning_curve")
                .height(PLOT_HEIGHT)
                .show(ui, |plot| {
                    plot.line(Line::new("intermediate value", PlotPoints::new(curve)));
                });
        }
        match curve {
            None => {
                ui.label("reading the training curves…");
            }
            Some(Err(e)) => {
                ui.colored_label(widgets::WARN, format!("training curves: {e}"));
            }
            Some(Ok(c)) if c.is_empty() => {
                ui.label("no training curves stored (a trial written by Optuna, or none ran)");
            }
            Some(Ok(c)) => training_curves(ui, row.number, c),
        }
    });
}

/// A trial's stored training curves by env step: episode returns and losses (x axes linked).
fn training_curves(ui: &mut egui::Ui, number: i64, curves: &Curves) {
    let group = egui::Id::unique(("trial curves", number));
    let plot = |ui: &mut egui::Ui, title: &str, lines: &[(&str, &str, f64)]| {
        ui.label(title);
        Plot::new(("stored", title))
            .height(PLOT_HEIGHT)
            .legend(Legend::default())
            .link_axis(group, [true, false])
            .show(ui, |plot| {
                for (name, metric, scale) in lines {
                    if let Some(points) = curves.get(*metric) {
                        let points: Vec<[f64; 2]> =
                            points.iter().map(|p| [p[0], p[1] * scale]).collect();
                        plot.line(Line::new(*name, PlotPoints::new(points)));
                    }
                }
            });
    };
    plot(
        ui,
        "training episode return % by env step",
        &[
            ("agent", "rollout/ep_return_mean", 100.0),
            ("equal weight", "rollout/ep_equal_weight_return_mean", 100.0),
        ],
    );
    plot(
        ui,
        "training losses by env step",
        &[
            ("policy loss", "losses/policy_loss", 1.0),
            ("value loss", "losses/value_loss", 1.0),
        ],
    );
    plot(
        ui,
        "training policy entropy by env step",
        &[("entropy", "losses/entropy", 1.0)],
    );
}
