//! Studies: open any study database (TradeTune's or one Optuna wrote), the study list with
//! parallel studies (`x_1`, `x_2`, `x_3`) aggregated, and the trial table — sortable by any
//! column, filtered by state, laid out only for the visible rows so 10,000 trials scroll
//! smoothly — with a trial's details, export and "copy as CSV".

use egui_extras::{Column, TableBuilder};
use egui_plot::{Legend, Line, Plot, PlotPoints, Points};
use tradetune_engine::storage::TrialState;

use super::widgets;
use crate::ui::command::Command;
use crate::ui::state::{AppState, Curves, StudiesView, TrialColumn, TrialRow};

const ROW_HEIGHT: f32 = 18.0;

/// Draws the panel.
pub fn show(ui: &mut egui::Ui, state: &mut AppState, commands: &mut Vec<Command>) {
    let view = &state.studies;
    ui.horizontal(|ui| {
        if ui.button("Open database…").clicked() {
            commands.push(Command::PickDatabase);
        }
        match &view.db {
            Some(db) => ui.label(db.path.display().to_string()),
            None => ui.label("no database open"),
        };
        if view.opening {
            ui.spinner();
        }
    });
    if let Some(e) = &view.error {
        ui.colored_label(widgets::WARN, e.as_str());
    }
    if view.db.is_none() {
        return;
    }

    ui.heading("Studies");
    egui::Grid::new("study_list").striped(true).show(ui, |ui| {
        for h in [
            "study",
            "trials",
            "complete",
            "pruned",
            "failed",
            "running",
            "best",
            "parallel studies",
        ] {
            ui.strong(h);
        }
        ui.end_row();
        for g in &view.groups {
            let selected = view.selected.as_deref() == Some(g.name.as_str());
            if ui.selectable_label(selected, &g.name).clicked() {
                commands.push(Command::SelectStudy(g.name.clone()));
            }
            ui.label(g.n_trials().to_string());
            ui.label(g.n(TrialState::Complete).to_string());
            ui.label(g.n(TrialState::Pruned).to_string());
            ui.label(g.n(TrialState::Fail).to_string());
            ui.label(g.n(TrialState::Running).to_string());
            ui.label(g.best.map_or(String::new(), |v| format!("{v:.6}")));
            ui.label(if g.members.len() > 1 {
                g.members.join(", ")
            } else {
                String::new()
            });
            ui.end_row();
        }
    });

    let Some(selected) = view.selected.clone() else {
        return;
    };
    ui.separator();
    ui.heading(format!("Trials of {selected}"));
    if view.loading_trials {
        ui.horizontal(|ui| {
            ui.spinner();
            ui.label("reading trials…");
        });
    }
    ui.horizontal_wrapped(|ui| {
        let l = ui.label("state");
        let filter = view.state_filter;
        egui::ComboBox::from_id_salt("state_filter")
            .selected_text(filter.map_or("all".to_owned(), |s| s.to_string()))
            .show_ui(ui, |ui| {
                if ui.selectable_label(filter.is_none(), "all").clicked() {
                    commands.push(Command::FilterTrials(None));
                }
                for s in TrialState::ALL {
                    if ui
                        .selectable_label(filter == Some(s), s.to_string())
                        .clicked()
                    {
                        commands.push(Command::FilterTrials(Some(s)));
                    }
                }
            })
            .response
            .labelled_by(l.id);
        if ui.button("Export trials CSV…").clicked() {
            commands.push(Command::ExportTrials);
        }
        if ui.button("Copy table as CSV").clicked() {
            commands.push(Command::CopyTrials);
        }
        if ui.button("Export telemetry CSV…").clicked() {
            commands.push(Command::ExportTelemetry);
        }
        ui.label(format!(
            "{} of {} trials",
            view.visible.len(),
            view.rows.len()
        ));
        ui.menu_button("Columns", |ui| {
            for c in TrialColumn::ALL {
                let mut shown = !view.hidden.contains(&c);
                if ui.checkbox(&mut shown, c.label()).changed() {
                    commands.push(Command::ToggleColumn(c));
                }
            }
        });
    });
    if let Some(i) = view.detail
        && let Some(row) = view.rows.get(i)
    {
        let curve = view
            .curve
            .as_ref()
            .filter(|(id, _)| *id == row.trial_id)
            .map(|(_, c)| c);
        detail(ui, row, curve, commands);
    }
    let mut plot_param = view.plot_param.clone();
    egui::CollapsingHeader::new("Plots")
        .default_open(true)
        .show(ui, |ui| plots(ui, view, &mut plot_param));
    let clicked = trial_table(ui, view, commands);
    let view = &mut state.studies;
    view.plot_param = plot_param;
    if let Some(i) = clicked {
        commands.push(Command::ShowTrial(i));
    }
}

const PLOT_HEIGHT: f32 = 150.0;

/// Optimisation history (each complete trial's value in the order trials were numbered, and
/// the best so far) and one parameter against the objective.
fn plots(ui: &mut egui::Ui, view: &StudiesView, plot_param: &mut Option<String>) {
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

fn detail(
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

/// The table; returns the index (into `rows`) of a clicked row.
fn trial_table(
    ui: &mut egui::Ui,
    view: &StudiesView,
    commands: &mut Vec<Command>,
) -> Option<usize> {
    let best = view.best_row();
    let mut clicked = None;
    // Rows have a fixed height (that is what lets only the visible ones be laid out): cells
    // truncate instead of wrapping; columns are resizable.
    ui.style_mut().wrap_mode = Some(egui::TextWrapMode::Truncate);
    let mut table = TableBuilder::new(ui)
        .id_salt("trials")
        .striped(true)
        .resizable(true);
    let shown: Vec<TrialColumn> = TrialColumn::ALL
        .into_iter()
        .filter(|c| !view.hidden.contains(c))
        .collect();
    for &c in &shown {
        let width = match c {
            TrialColumn::Study => 150.0,
            TrialColumn::Number => 80.0,
            TrialColumn::State => 90.0,
            TrialColumn::Value => 100.0,
            TrialColumn::Duration => 95.0,
            TrialColumn::Device => 80.0,
        };
        table = table.column(Column::initial(width).at_least(40.0).clip(true));
    }
    table
        .column(Column::remainder())
        .header(ROW_HEIGHT + 4.0, |mut header| {
            for &c in &shown {
                header.col(|ui| {
                    let arrow = match view.sort {
                        (s, true) if s == c => " (asc)",
                        (s, false) if s == c => " (desc)",
                        _ => "",
                    };
                    if ui.button(format!("{}{arrow}", c.label())).clicked() {
                        commands.push(Command::SortTrials(c));
                    }
                });
            }
            header.col(|ui| {
                ui.strong("parameters");
            });
        })
        .body(|body| {
            body.rows(ROW_HEIGHT, view.visible.len(), |mut row| {
                let i = view.visible[row.index()];
                let r = &view.rows[i];
                row.set_selected(Some(i) == best || view.detail == Some(i));
                for &c in &shown {
                    row.col(|ui| {
                        if c == TrialColumn::Number {
                            if ui.link(r.number.to_string()).clicked() {
                                clicked = Some(i);
                            }
                        } else {
                            ui.label(cell(r, c));
                        }
                    });
                }
                row.col(|ui| {
                    ui.label(&r.params);
                });
            });
        });
    clicked
}

/// The text of one cell.
fn cell(r: &TrialRow, c: TrialColumn) -> String {
    match c {
        TrialColumn::Study => r.study.clone(),
        TrialColumn::Number => r.number.to_string(),
        TrialColumn::State => r.state.to_string(),
        TrialColumn::Value => r.value.map_or(String::new(), |v| format!("{v:.6}")),
        TrialColumn::Duration => r.duration_s.map_or(String::new(), |v| format!("{v:.1}")),
        TrialColumn::Device => r.device.clone(),
    }
}

/// The visible rows as CSV (what "Copy table as CSV" puts on the clipboard).
pub fn visible_csv(view: &StudiesView) -> String {
    let quote = |s: &str| {
        if s.contains([',', '"', '\n']) {
            format!("\"{}\"", s.replace('"', "\"\""))
        } else {
            s.to_owned()
        }
    };
    let mut out = String::from("study,number,state,value,duration_s,device,params\n");
    for &i in &view.visible {
        let r = &view.rows[i];
        out.push_str(&format!(
            "{},{},{},{},{},{},{}\n",
            quote(&r.study),
            r.number,
            r.state,
            r.value.map_or(String::new(), |v| v.to_string()),
            r.duration_s.map_or(String::new(), |v| v.to_string()),
            quote(&r.device),
            quote(&r.params)
        ));
    }
    out
}
