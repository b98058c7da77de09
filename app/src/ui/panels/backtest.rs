//! Backtest: a checkpoint's deterministic policy on a held-out split against the equal-weight
//! buy-and-hold of the same assets — the equity curves and the metrics table of
//! `tradetune backtest`.

use egui_plot::{Legend, Line, Plot, PlotPoints};

use std::path::PathBuf;

use tradetune_engine::eval::EvalReport;

use super::widgets;
use crate::ui::command::{Command, Cx};
use crate::ui::state::{AppState, Tab};

/// A backtest as shown: the text parts and the two equity curves.
#[derive(Debug, Clone, PartialEq)]
pub struct BacktestResult {
    /// Checkpoint, samples, split and data, for people.
    pub about: String,
    /// The metrics table.
    pub table: String,
    /// (days since the first bar, equity) of the agent.
    pub agent: Vec<[f64; 2]>,
    /// The same for equal weight.
    pub equal_weight: Vec<[f64; 2]>,
}

impl BacktestResult {
    /// The panel's view of `report`, introduced by `about`.
    pub fn of(about: String, report: &EvalReport) -> BacktestResult {
        let t0 = report.timestamps.first().copied().unwrap_or(0);
        let curve = |equity: &[f64]| -> Vec<[f64; 2]> {
            report
                .timestamps
                .iter()
                .zip(equity)
                .map(|(&t, &e)| [(t - t0) as f64 / 86_400.0, e])
                .collect()
        };
        BacktestResult {
            about,
            table: tradetune_engine::front::backtest::table(report),
            agent: curve(&report.agent_equity),
            equal_weight: curve(&report.equal_weight_equity),
        }
    }
}

/// The Backtest panel.
#[derive(Debug, Clone)]
pub struct BacktestView {
    /// The checkpoint directory.
    pub checkpoint: Option<PathBuf>,
    /// test, validation or train.
    pub split: String,
    /// Being computed.
    pub running: bool,
    /// The last result.
    pub result: Option<BacktestResult>,
    /// Why the last one failed.
    pub error: Option<String>,
}

impl Default for BacktestView {
    fn default() -> Self {
        BacktestView {
            checkpoint: None,
            split: "test".into(),
            running: false,
            result: None,
            error: None,
        }
    }
}

impl BacktestView {
    /// A backtest finished (or failed).
    pub fn finished(&mut self, result: Result<Box<BacktestResult>, String>) {
        self.running = false;
        match result {
            Ok(r) => self.result = Some(*r),
            Err(e) => self.error = Some(e),
        }
    }

    /// The checkpoint dialog was answered (nothing when cancelled).
    pub fn checkpoint_picked(&mut self, dir: Option<PathBuf>) {
        if let Some(dir) = dir {
            self.checkpoint = Some(dir);
            self.result = None;
            self.error = None;
        }
    }
}

/// [`Command::Backtest`]: backtests the chosen checkpoint on the chosen split.
pub fn run(cx: &mut Cx) {
    let view = &mut cx.state.backtest;
    if let Some(dir) = view.checkpoint.clone() {
        view.running = true;
        view.error = None;
        cx.tasks.backtest(dir, view.split.clone());
    }
}

/// [`Command::BacktestTrial`]: shows this panel and backtests a trial's saved policy.
pub fn run_trial(cx: &mut Cx, dir: PathBuf) {
    cx.state.backtest.checkpoint = Some(dir);
    cx.state.backtest.result = None;
    cx.state.settings.tab = Tab::Backtest;
    run(cx);
}

/// Draws the panel.
pub fn show(ui: &mut egui::Ui, state: &mut AppState, commands: &mut Vec<Command>) {
    let view = &mut state.backtest;
    ui.horizontal(|ui| {
        if ui.button("Choose checkpoint…").clicked() {
            commands.push(Command::PickCheckpoint);
        }
        match &view.checkpoint {
            Some(p) => ui.label(p.display().to_string()),
            None => ui.label("a directory written by `tradetune train --out DIR`"),
        };
    });
    ui.horizontal(|ui| {
        let l = ui.label("split");
        egui::ComboBox::from_id_salt("backtest_split")
            .selected_text(view.split.clone())
            .show_ui(ui, |ui| {
                for s in ["test", "validation", "train"] {
                    ui.selectable_value(&mut view.split, s.to_owned(), s);
                }
            })
            .response
            .labelled_by(l.id);
        if ui
            .add_enabled(
                view.checkpoint.is_some() && !view.running,
                egui::Button::new("Run backtest"),
            )
            .clicked()
        {
            commands.push(Command::Backtest);
        }
        if view.running {
            ui.spinner();
        }
    });
    if let Some(e) = &view.error {
        ui.colored_label(widgets::WARN, e.as_str());
    }
    let Some(r) = &view.result else {
        return;
    };
    ui.separator();
    ui.label(&r.about);
    ui.monospace(&r.table);
    ui.label("equity: agent against equal weight (days since the split's first bar)");
    Plot::new("backtest_equity")
        .height(260.0)
        .legend(Legend::default())
        .x_axis_label("days since the split's first bar")
        .y_axis_label("equity")
        .show(ui, |plot| {
            plot.line(Line::new("agent", PlotPoints::new(r.agent.clone())));
            plot.line(Line::new(
                "equal weight",
                PlotPoints::new(r.equal_weight.clone()),
            ));
        });
}
