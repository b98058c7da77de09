//! Backtest: a checkpoint's deterministic policy on a held-out split against the equal-weight
//! buy-and-hold of the same assets — the equity curves and the metrics table of
//! `tradetune backtest`.

use egui_plot::{Legend, Line, Plot, PlotPoints};

use std::path::PathBuf;

use super::widgets;
use crate::ui::context::{Command, Context};
use crate::ui::settings::Tab;
use crate::ui::tasks::BacktestResult;

/// What the Backtest panel does (a button, or a test).
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Pick a checkpoint directory with a native dialog.
    PickCheckpoint,
    /// The checkpoint dialog was answered (nothing when cancelled).
    CheckpointPicked(Option<PathBuf>),
    /// Backtest the chosen checkpoint on the chosen split.
    Backtest,
    /// Show this panel and backtest a trial's saved policy (its checkpoint directory).
    BacktestTrial(PathBuf),
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
    /// Counts backtests asked for and checkpoints chosen: an answer to an older one (another
    /// checkpoint's, another split's) is dropped, not shown under the current choice.
    pub request: u64,
}

impl Default for BacktestView {
    fn default() -> Self {
        BacktestView {
            checkpoint: None,
            split: "test".into(),
            running: false,
            result: None,
            error: None,
            request: 0,
        }
    }
}

impl BacktestView {
    /// The backtest asked for as `request` finished (or failed); an older request's answer is
    /// dropped.
    pub fn finished(&mut self, request: u64, result: Result<Box<BacktestResult>, String>) {
        if request != self.request {
            return;
        }
        self.running = false;
        match result {
            Ok(r) => self.result = Some(*r),
            Err(e) => self.error = Some(e),
        }
    }

    /// Another split was chosen: the result shown (or being computed) is the previous split's,
    /// and goes.
    pub fn split_changed(&mut self) {
        self.result = None;
        self.error = None;
        self.request += 1;
        self.running = false;
    }

    /// The checkpoint dialog was answered (nothing when cancelled).
    pub fn checkpoint_picked(&mut self, dir: Option<PathBuf>) {
        if let Some(dir) = dir {
            self.checkpoint = Some(dir);
            self.result = None;
            self.error = None;
            // A backtest of the previous checkpoint still running answers for nothing now.
            self.request += 1;
            self.running = false;
        }
    }
}

impl BacktestView {
    /// Carries out one of the panel's actions.
    pub fn handle(&mut self, action: Action, cx: &Context, out: &mut Vec<Command>) {
        match action {
            Action::PickCheckpoint => out.push(Command::Pick(crate::ui::dialog::Pick::Checkpoint)),
            Action::CheckpointPicked(dir) => self.checkpoint_picked(dir),
            Action::Backtest => self.run(cx),
            Action::BacktestTrial(dir) => {
                self.checkpoint = Some(dir);
                self.result = None;
                out.push(Command::SetTab(Tab::Backtest));
                self.run(cx);
            }
        }
    }

    /// Backtests the chosen checkpoint on the chosen split.
    fn run(&mut self, cx: &Context) {
        if let Some(dir) = self.checkpoint.clone() {
            self.request += 1;
            self.running = true;
            self.error = None;
            // What is shown is this run's, once it ends: not the last one's, of another split
            // or checkpoint, under this one's choice.
            self.result = None;
            cx.jobs.backtest(dir, self.split.clone(), self.request);
        }
    }

    /// Draws the panel.
    pub fn ui(&mut self, ui: &mut egui::Ui, cx: &Context, out: &mut Vec<Command>) {
        let mut actions = Vec::new();
        self.draw(ui, &mut actions);
        for a in actions {
            self.handle(a, cx, out);
        }
    }
}

impl BacktestView {
    fn draw(&mut self, ui: &mut egui::Ui, commands: &mut Vec<Action>) {
        let view = self;
        ui.horizontal(|ui| {
            if ui.button("Choose checkpoint…").clicked() {
                commands.push(Action::PickCheckpoint);
            }
            match &view.checkpoint {
                Some(p) => ui.label(p.display().to_string()),
                None => ui.label("a directory written by `tradetune train --out DIR`"),
            };
        });
        let split_before = view.split.clone();
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
                commands.push(Action::Backtest);
            }
            if view.running {
                ui.spinner();
            }
        });
        if view.split != split_before {
            view.split_changed();
        }
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
}
