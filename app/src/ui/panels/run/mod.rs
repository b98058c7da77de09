//! Run: start and stop, the progress, the bottleneck verdict, and live charts with linked time
//! axes — telemetry per device (utilisation, memory, temperature, power, clocks; CPU and the
//! process) — and the run's samples/s, phase split, episode returns and losses.

mod charts;
mod view;

use egui_plot::{Line, Plot, PlotPoints};
use tradetune_engine::storage::TrialState;

pub use self::charts::{chart, clock_time};
pub use self::view::{LiveTrial, RunView, StudyEnd, WorkerView};
use super::widgets;
use crate::ui::context::{Command, Context, RunStatus};
use crate::ui::settings::Tab;
use crate::ui::tasks::{StudyMsg, Tasks, TrialRow};
use charts::{telemetry_charts, trial_metrics};

/// What the Run panel does (a button, or a test).
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Show this trial's curve.
    SelectTrial(u64),
    /// Open the running (or last) study in the Studies panel.
    ShowInStudies,
    /// An effect beyond the panel (Start, Stop, Stop one trial).
    App(Command),
}

impl From<Command> for Action {
    fn from(c: Command) -> Self {
        Action::App(c)
    }
}

impl RunView {
    /// Whether `rows_db` (the Studies panel's database) is this run's, however either is
    /// written ([`crate::launch::same_db`], once for each pair).
    fn rows_db_is(&mut self, rows_db: Option<&std::path::Path>) -> bool {
        let (Some(theirs), Some(ours)) = (rows_db, self.db.as_deref()) else {
            return false;
        };
        match &self.rows_db_is_ours {
            Some((t, o, same)) if t == theirs && o == ours => *same,
            _ => {
                let same = crate::launch::same_db(theirs, ours);
                self.rows_db_is_ours = Some((theirs.to_owned(), ours.to_owned(), same));
                same
            }
        }
    }

    /// Draws the panel; `rows` are the Studies panel's, of the database `rows_db` (None: none
    /// open), where the verdict of the study's latest finished trial is.
    pub fn ui(
        &mut self,
        ui: &mut egui::Ui,
        cx: &Context,
        rows_db: Option<&std::path::Path>,
        rows: &[TrialRow],
        out: &mut Vec<Command>,
    ) {
        let mut actions = Vec::new();
        // Rows of another database, where a study of the same name may be, tell nothing of
        // this run.
        let rows = if self.rows_db_is(rows_db) { rows } else { &[] };
        show(ui, self, cx, rows, &mut actions);
        for a in actions {
            self.handle(a, out);
        }
    }

    /// Carries out one of the panel's actions.
    pub fn handle(&mut self, action: Action, out: &mut Vec<Command>) {
        match action {
            Action::SelectTrial(number) => self.selected = Some(number),
            Action::ShowInStudies => self.show_in_studies(out),
            Action::App(c) => out.push(c),
        }
    }

    /// What every panel may know of the run.
    pub fn status(&self) -> RunStatus {
        RunStatus {
            running: self.running,
            line: if self.running {
                format!(
                    "study {} running: {} of {} trials finished",
                    self.study,
                    self.finished(),
                    self.n_trials
                )
            } else {
                "idle".to_owned()
            },
            samples_per_s: self.samples_per_second.last().map(|p| p.v),
        }
    }

    /// Opens the run's study in the Studies panel (also when it ends).
    fn show_in_studies(&self, out: &mut Vec<Command>) {
        if let Some(db) = self.db.clone() {
            out.push(Command::ShowInStudies {
                db,
                study: self.study.clone(),
            });
        }
    }
}
/// Start (disabled, with the reason, while the draft has a problem) and Stop.
pub fn start_stop<A: From<Command>>(ui: &mut egui::Ui, state: &Context, commands: &mut Vec<A>) {
    let data = state.data.ready();
    let problems = state.problems();
    let over = data.is_some_and(|d| {
        state
            .settings
            .draft
            .memory(d.shape, state.device_bytes())
            .over_budget()
    });
    let blocked = if state.run.running {
        Some("a study is running".to_owned())
    } else if data.is_none() {
        Some("the data is not loaded".to_owned())
    } else if let Some(p) = problems.first() {
        // Engine messages start with the field (`ppo.batch_size = …`); the app's own do not.
        Some(if p.message.starts_with(&p.field) {
            p.message.clone()
        } else {
            format!("{}: {}", p.field, p.message)
        })
    } else if over {
        Some("the estimate is over the memory budget".to_owned())
    } else {
        None
    };
    ui.horizontal(|ui| {
        let start = ui.add_enabled(blocked.is_none(), egui::Button::new("Start"));
        if start.clicked() {
            commands.push(Command::Start.into());
        }
        if ui
            .add_enabled(state.run.running, egui::Button::new("Stop"))
            .clicked()
        {
            commands.push(Command::Stop.into());
        }
        if let Some(why) = &blocked
            && !state.run.running
        {
            ui.colored_label(widgets::WARN, format!("cannot start: {why}"));
        }
    });
}

/// Draws the panel.
fn show(
    ui: &mut egui::Ui,
    run: &RunView,
    state: &Context,
    rows: &[TrialRow],
    commands: &mut Vec<Action>,
) {
    start_stop(ui, state, commands);
    if run.started.is_some() {
        ui.horizontal(|ui| {
            ui.strong(format!("study {}", run.study));
            if let Some(db) = &run.db {
                ui.label(format!("in {}", crate::launch::db_label(db)));
            }
            if ui.button("Show in Studies").clicked() {
                commands.push(Action::ShowInStudies);
            }
        });
        let done = run.finished();
        let total = run.n_trials.max(1);
        ui.add(
            egui::ProgressBar::new(done as f32 / total as f32).text(format!(
                "{done} of {} trials finished{}",
                run.n_trials,
                if run.existing_trials > 0 {
                    format!(" ({} were already in the study)", run.existing_trials)
                } else {
                    String::new()
                }
            )),
        );
    }
    if !run.recovered.is_empty() {
        ui.label(format!(
            "recovered trials {:?}: left RUNNING by a process that died, now FAIL",
            run.recovered
        ));
    }
    if let Some(e) = &run.error {
        ui.colored_label(widgets::WARN, format!("the study failed: {e}"));
    }
    if let Some(end) = &run.end {
        ui.label(end.summary());
    }
    // The verdict of the study's latest finished trial of this run (stored with its telemetry
    // summary): a trial of an earlier run is not this run's bottleneck.
    if let Some(r) = rows
        .iter()
        .filter(|r| {
            r.study == run.study
                && r.verdict.is_some()
                && run.trials.iter().any(|t| t.number as i64 == r.number)
        })
        .max_by_key(|r| r.number)
    {
        egui::Frame::group(ui.style()).show(ui, |ui| {
            ui.strong(format!("Bottleneck of trial {}", r.number));
            ui.label(r.verdict.as_deref().unwrap_or_default());
        });
    }
    workers(ui, run, commands);
    // The GPU's compiling while it goes on (a new configuration's first update), then its
    // totals: what the phase bar's compile segment is made of.
    match (&run.compiling, &run.compiled) {
        (Some(c), _) if run.running => {
            ui.horizontal(|ui| {
                ui.spinner();
                ui.label(c.to_string());
            });
        }
        (_, Some(c)) => {
            ui.weak(c.to_string());
        }
        _ => {}
    }
    if !run.trials.is_empty() {
        ui.separator();
        ui.heading("Trials");
        timeline(ui, run);
        trial_grid(ui, run, commands);
        if let Some(t) = run
            .selected
            .and_then(|n| run.trials.iter().find(|t| t.number == n))
        {
            trial_metrics(ui, t);
            chart(
                ui,
                &format!(
                    "trial {}: objective on the validation split by update",
                    t.number
                ),
                "run_curve",
                &[("objective", &t.curve)],
            );
        }
    }

    ui.separator();
    ui.heading("Telemetry");
    if !run.samples_per_second.is_empty() {
        chart(
            ui,
            "samples/s, all workers",
            "telemetry",
            &[("samples/s", &run.samples_per_second)],
        );
    }
    telemetry_charts(ui, state);
}
/// A progress bar per worker with its trial, device and ETA, and a button to stop that trial.
fn workers(ui: &mut egui::Ui, run: &RunView, commands: &mut Vec<Action>) {
    for w in &run.workers {
        ui.horizontal(|ui| {
            let what = match w.trial {
                Some(n) => {
                    let eta = w.trial_started.and_then(|s| {
                        let t = s.elapsed().as_secs_f64();
                        (w.fraction > 0.02 && w.fraction < 1.0)
                            .then(|| t * (1.0 - w.fraction) / w.fraction)
                    });
                    format!(
                        "worker {} on {} ({}): trial {n} {:.0} %{} {}",
                        w.worker,
                        w.device,
                        w.backend,
                        100.0 * w.fraction,
                        eta.map_or(String::new(), |s| format!(" · ETA {s:.0} s")),
                        w.message
                    )
                }
                None if w.done => format!(
                    "worker {} on {}: done ({} trials)",
                    w.worker, w.device, w.finished
                ),
                None => format!("worker {} on {}: waiting", w.worker, w.device),
            };
            ui.add(
                egui::ProgressBar::new(if w.trial.is_some() {
                    w.fraction as f32
                } else {
                    0.0
                })
                .desired_width(ui.available_width() - 140.0)
                .text(what),
            );
            if let Some(n) = w.trial
                && run.running
                && ui
                    .button(format!("Stop trial {n}"))
                    .on_hover_text(
                        "Ends this trial now: PRUNED at its last reported value (the sampler does \
                         not learn from it, since no pruner judged it), or FAIL if it has \
                         reported nothing yet",
                    )
                    .clicked()
            {
                commands.push(Command::StopTrial(n).into());
            }
        });
    }
}

fn state_color(state: TrialState) -> egui::Color32 {
    match state {
        TrialState::Complete => egui::Color32::from_rgb(0x40, 0xa0, 0x60),
        TrialState::Pruned => egui::Color32::from_rgb(0xc0, 0x90, 0x30),
        TrialState::Fail => widgets::WARN,
        TrialState::Running | TrialState::Waiting => egui::Color32::from_rgb(0x50, 0x80, 0xd0),
    }
}

/// One lane per worker, one bar per trial from its start to its end (or now): an idle device
/// or a "parallel" study that runs one trial at a time shows at a glance.
fn timeline(ui: &mut egui::Ui, run: &RunView) {
    let now = run.now_s();
    ui.label("timeline: trials per worker (seconds since the study started)");
    let lanes = run.workers.len().max(1) as f64;
    Plot::new("timeline")
        .height(40.0 + 24.0 * lanes as f32)
        .show_y(false)
        .y_axis_formatter(|mark, _| format!("worker {}", mark.value))
        .include_y(-0.5)
        .include_y(lanes - 0.5)
        .show(ui, |plot| {
            for t in &run.trials {
                let end = t.span.1.unwrap_or(if run.running { now } else { t.span.0 });
                let y = t.worker as f64;
                plot.line(
                    Line::new(
                        format!("trial {}", t.number),
                        PlotPoints::new(vec![[t.span.0, y], [end.max(t.span.0 + 0.05), y]]),
                    )
                    .width(10.0)
                    .color(state_color(t.state)),
                );
            }
        });
}

fn trial_grid(ui: &mut egui::Ui, run: &RunView, commands: &mut Vec<Action>) {
    egui::Grid::new("live_trials").striped(true).show(ui, |ui| {
        for h in [
            "trial",
            "worker",
            "device",
            "state",
            "value",
            "seconds",
            "parameters / reason",
        ] {
            ui.strong(h);
        }
        ui.end_row();
        let now = run.now_s();
        for t in run.trials.iter().rev() {
            if ui
                .selectable_label(run.selected == Some(t.number), format!("#{}", t.number))
                .clicked()
            {
                commands.push(Action::SelectTrial(t.number));
            }
            ui.label(t.worker.to_string());
            ui.label(&t.device);
            ui.colored_label(state_color(t.state), t.state.to_string());
            ui.label(t.value.map_or(String::new(), |v| format!("{v:.6}")));
            ui.label(format!("{:.1}", t.span.1.unwrap_or(now) - t.span.0));
            match &t.reason {
                Some(r) => ui.colored_label(widgets::WARN, r.as_str()),
                None => ui.label(&t.params),
            };
            ui.end_row();
        }
    });
}

impl RunView {
    /// [`Command::Start`]: starts the study the draft describes through `tasks`, unless
    /// something is wrong with it (the notice says what), and shows this panel.
    pub fn start(&mut self, cx: &mut Context, tasks: &mut Tasks) {
        let state = cx;
        if tasks.running() {
            state.notice("a study is already running");
            return;
        }
        let Some(data) = state.data.ready().cloned() else {
            state.notice("the data is not loaded yet");
            return;
        };
        let draft = state.settings.draft.clone();
        let files = state.settings.data_files.clone();
        if let Some(p) = state.problems().first() {
            state.notice(format!("cannot start: {}", p.message));
            return;
        }
        let memory = draft.memory(data.shape, state.device_bytes());
        if memory.over_budget() {
            state.notice(format!("cannot start: needs {}", memory.label()));
            return;
        }
        let file = match draft.study_file(&files) {
            Ok(f) => f,
            Err(e) => {
                state.notice(format!("cannot start: {e}"));
                return;
            }
        };
        let db = match &state.settings.study_db {
            Some(p) => p.clone(),
            None => match crate::launch::default_db() {
                Ok(p) => p,
                Err(e) => {
                    state.notice(format!("cannot start: {}", crate::out::error_text(&e)));
                    return;
                }
            },
        };
        *self = RunView {
            running: true,
            study: draft.study.name.clone(),
            db: Some(db.clone()),
            n_trials: draft.study.n_trials,
            started: Some(std::time::Instant::now()),
            ..RunView::default()
        };
        state.run = self.status();
        state.settings.tab = Tab::Run;
        state.notice(format!(
            "study {} starting in {}",
            draft.study.name,
            crate::launch::db_label(&db)
        ));
        tasks.start_study(file, db);
    }

    /// What the running study reported; `studies_idle`: the Studies panel has no database
    /// open and none opening (then the study shows there once it is in its database).
    pub fn on_study(&mut self, msg: StudyMsg, studies_idle: bool, out: &mut Vec<Command>) {
        let run = self;
        match msg {
            StudyMsg::Ready => {
                if studies_idle {
                    run.show_in_studies(out);
                }
            }
            StudyMsg::Event(e) => run.apply(e),
            StudyMsg::Notice(n) => out.push(Command::Notice(n)),
            StudyMsg::Compiling(c) => run.on_compiling(c),
            StudyMsg::Done(result) => {
                run.running = false;
                for w in &mut run.workers {
                    w.trial = None;
                }
                match result {
                    Ok(()) => {
                        let notice = match &run.end {
                            Some(e) => format!("study {} {}", run.study, e.summary()),
                            None => format!("study {} ended", run.study),
                        };
                        out.push(Command::Notice(notice));
                    }
                    Err(e) => {
                        out.push(Command::Notice(format!("study failed: {e}")));
                        run.error = Some(e);
                    }
                }
                if let Some(db) = run.db.clone() {
                    out.push(Command::StudyEnded {
                        db,
                        study: run.study.clone(),
                    });
                }
            }
        }
    }
}
