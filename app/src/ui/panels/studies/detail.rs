//! One trial's details: its parameters (every digit), telemetry, applied configuration and
//! training curves.

use egui_plot::{Legend, Line, Plot, PlotPoints};

use super::Action;
use crate::ui::context::Command;
use crate::ui::panels::widgets;
use crate::ui::tasks::{Curves, TrialRow};

const PLOT_HEIGHT: f32 = 150.0;

pub(super) fn detail(
    ui: &mut egui::Ui,
    row: &TrialRow,
    curve: Option<&Result<Curves, String>>,
    commands: &mut Vec<Action>,
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
            // End to end (the compiling in it), and without the compile phase where the trial
            // had updates that compiled nothing to measure it against.
            let steady = row
                .steady_samples_per_s
                .map_or(String::new(), |s| format!(", {s:.0} without compiling"));
            ui.label(format!("{sps:.0} samples/s end to end{steady}"));
        }
        if let Some(v) = &row.verdict {
            ui.label(format!("bottleneck: {v}"));
        }
        if let Some(dir) = &row.checkpoint
            && ui
                .button(format!("Backtest trial {}", row.number))
                .clicked()
        {
            commands.push(Command::BacktestTrial(dir.clone()).into());
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
