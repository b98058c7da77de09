//! What the Run panel shows, apart from how it draws it: the study being run (or the last one),
//! its workers and its trials as the runner's events report them.

use std::collections::BTreeMap;
use std::path::PathBuf;

use tradetune_engine::device::compiling::CompileStatus;
use tradetune_engine::ppo::PhaseTimes;
use tradetune_engine::storage::TrialState;
use tradetune_engine::study::runner::StudyEvent;
use tradetune_engine::telemetry::ring::PlotPoint;

/// A worker of the running study.
#[derive(Debug, Clone, Default)]
pub struct WorkerView {
    /// 0-based.
    pub worker: usize,
    /// The device it is bound to (`cpu`, `cpu#1`, `wgpu:0`).
    pub device: String,
    /// Its backend.
    pub backend: String,
    /// The trial it runs.
    pub trial: Option<u64>,
    /// How far that trial is (0 to 1).
    pub fraction: f64,
    /// The trial's last progress note.
    pub message: String,
    /// When that trial started.
    pub trial_started: Option<std::time::Instant>,
    /// Trials it ran.
    pub finished: usize,
    /// Samples per second of its current trial (0 between trials).
    pub samples_per_second: f64,
    /// No more trials for it.
    pub done: bool,
}

/// A trial of the running study, as the live table and the timeline show it.
#[derive(Debug, Clone)]
pub struct LiveTrial {
    /// Trial number.
    pub number: u64,
    /// Worker that ran it.
    pub worker: usize,
    /// Device it ran on.
    pub device: String,
    /// Its state so far.
    pub state: TrialState,
    /// Objective (complete) or last intermediate value (pruned).
    pub value: Option<f64>,
    /// Seconds after the study started that it started / ended.
    pub span: (f64, Option<f64>),
    /// Why it failed or was pruned.
    pub reason: Option<String>,
    /// `name=value` of its parameters.
    pub params: String,
    /// Intermediate values: (update, objective on the validation split).
    pub curve: Vec<PlotPoint>,
    /// Training metrics by name (`losses/policy_loss`, `rollout/ep_return_mean`, `charts/SPS`,
    /// `time/update_s`, …): (env steps, value) per update.
    pub metrics: BTreeMap<String, Vec<PlotPoint>>,
    /// The last update reported and the env steps trained on by then.
    pub update: u64,
    pub env_steps: u64,
}

impl LiveTrial {
    /// The newest value of `metric`.
    pub fn latest(&self, metric: &str) -> Option<f64> {
        self.metrics.get(metric)?.last().map(|p| p.v)
    }

    /// Seconds spent per phase over all its updates so far, by the phase's name.
    pub fn phase_seconds(&self) -> Vec<(&'static str, f64)> {
        PhaseTimes::default()
            .metrics()
            .iter()
            .map(|(name, _)| {
                let total = self
                    .metrics
                    .get(*name)
                    .map_or(0.0, |points| points.iter().map(|p| p.v).sum());
                (*name, total)
            })
            .collect()
    }
}

/// How a finished study ended.
#[derive(Debug, Clone, PartialEq)]
pub struct StudyEnd {
    /// Trials COMPLETE, PRUNED, FAIL in this run.
    pub counts: [usize; 3],
    /// Whether the user stopped it.
    pub stopped: bool,
    /// Best trial of the whole study: (number, value).
    pub best: Option<(u64, f64)>,
}

impl StudyEnd {
    /// "finished: 2 complete, 0 pruned, 0 failed; best trial #0 = -1.062708": the Run panel's
    /// line, and the status bar's after the study's name.
    pub fn summary(&self) -> String {
        format!(
            "{}: {} complete, {} pruned, {} failed{}",
            if self.stopped { "stopped" } else { "finished" },
            self.counts[0],
            self.counts[1],
            self.counts[2],
            self.best.map_or(String::new(), |(n, v)| format!(
                "; best trial #{n} = {v:.6}"
            ))
        )
    }
}

/// The study being run (or the last one).
#[derive(Debug, Clone, Default)]
pub struct RunView {
    /// Whether it is going.
    pub running: bool,
    /// Its name.
    pub study: String,
    /// Its database.
    pub db: Option<PathBuf>,
    /// Trials asked for in this run.
    pub n_trials: usize,
    /// Trials already in the study before it.
    pub existing_trials: usize,
    /// Trials of dead processes found RUNNING and failed.
    pub recovered: Vec<u64>,
    /// Workers.
    pub workers: Vec<WorkerView>,
    /// Trials of this run, in start order.
    pub trials: Vec<LiveTrial>,
    /// The trial whose curve is shown.
    pub selected: Option<u64>,
    /// Samples per second of all workers together, at each update of any of them: (Unix
    /// seconds, as the telemetry charts, whose time axis it shares; samples/s).
    pub samples_per_second: Vec<PlotPoint>,
    /// When it started.
    pub started: Option<std::time::Instant>,
    /// How it ended.
    pub end: Option<StudyEnd>,
    /// Why it could not run.
    pub error: Option<String>,
    /// The process's GPU compiling while it goes on.
    pub compiling: Option<CompileStatus>,
    /// The totals of the last compiling that took a second or more.
    pub compiled: Option<CompileStatus>,
    /// Whether the Studies panel's database is this run's: (its path, this run's, the answer),
    /// worked out once for each pair (a file's path is resolved on disk).
    pub rows_db_is_ours: Option<(PathBuf, PathBuf, bool)>,
}

impl RunView {
    /// Takes in a compile status: the live one while it goes on; once it stops, its totals
    /// where they are worth a line (an evaluation's one kernel does not replace the first
    /// update's minute).
    pub fn on_compiling(&mut self, status: CompileStatus) {
        if status.active {
            self.compiling = Some(status);
        } else {
            self.compiling = None;
            if status.worth_a_line() {
                self.compiled = Some(status);
            }
        }
    }

    /// Seconds since the study started.
    pub fn now_s(&self) -> f64 {
        self.started.map_or(0.0, |s| s.elapsed().as_secs_f64())
    }

    /// The trial with `number`.
    pub fn trial_mut(&mut self, number: u64) -> Option<&mut LiveTrial> {
        self.trials.iter_mut().find(|t| t.number == number)
    }

    /// Trials finished in this run.
    pub fn finished(&self) -> usize {
        self.trials.iter().filter(|t| t.span.1.is_some()).count()
    }
}

impl RunView {
    /// Takes in one event of the running study.
    pub fn apply(&mut self, event: StudyEvent) {
        let run = self;
        let now = run.now_s();
        match event {
            StudyEvent::StudyStarted {
                existing_trials,
                recovered,
                workers,
                n_trials,
                ..
            } => {
                run.existing_trials = existing_trials;
                run.recovered = recovered;
                run.n_trials = n_trials;
                run.workers = workers
                    .into_iter()
                    .map(|w| WorkerView {
                        worker: w.worker,
                        device: w.device,
                        backend: w.backend,
                        ..WorkerView::default()
                    })
                    .collect();
            }
            StudyEvent::TrialStarted {
                number,
                worker,
                device,
                params,
                ..
            } => {
                if let Some(w) = run.workers.get_mut(worker) {
                    w.trial = Some(number);
                    w.fraction = 0.0;
                    w.message.clear();
                    w.trial_started = Some(std::time::Instant::now());
                }
                let params = params
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(", ");
                run.trials.push(LiveTrial {
                    number,
                    worker,
                    device,
                    state: TrialState::Running,
                    value: None,
                    span: (now, None),
                    reason: None,
                    params,
                    curve: Vec::new(),
                    metrics: Default::default(),
                    update: 0,
                    env_steps: 0,
                });
                if run.selected.is_none() {
                    run.selected = Some(number);
                }
            }
            StudyEvent::Intermediate {
                number,
                step,
                value,
                ..
            } => {
                if let Some(t) = run.trial_mut(number) {
                    t.curve.push(PlotPoint {
                        t: step as f64,
                        v: value,
                    });
                }
            }
            StudyEvent::Metrics {
                number,
                worker,
                update,
                env_steps,
                values,
            } => {
                if let Some(w) = run.workers.get_mut(worker)
                    && let Some(&sps) = values.get("charts/SPS")
                {
                    w.samples_per_second = sps;
                }
                if let Some(t) = run.trial_mut(number) {
                    t.update = update;
                    t.env_steps = env_steps;
                    for (name, v) in values {
                        t.metrics.entry(name).or_default().push(PlotPoint {
                            t: env_steps as f64,
                            v,
                        });
                    }
                }
                let total: f64 = run.workers.iter().map(|w| w.samples_per_second).sum();
                run.samples_per_second.push(PlotPoint {
                    t: unix_now(),
                    v: total,
                });
            }
            StudyEvent::WorkerProgress {
                worker,
                fraction,
                message,
                ..
            } => {
                if let Some(w) = run.workers.get_mut(worker) {
                    w.fraction = fraction;
                    w.message = message;
                }
            }
            StudyEvent::TrialsRecovered { numbers, .. } => run.recovered.extend(numbers),
            StudyEvent::WorkerWaiting {
                worker,
                device,
                reason,
            } => {
                if let Some(w) = run.workers.get_mut(worker) {
                    w.fraction = 0.0;
                    w.message = format!("waiting on {device}: {reason}");
                }
            }
            StudyEvent::TrialCompleted {
                number,
                worker,
                value,
                ..
            } => end_trial(
                run,
                number,
                worker,
                now,
                TrialState::Complete,
                Some(value),
                None,
            ),
            StudyEvent::TrialPruned {
                number,
                worker,
                value,
                reason,
                ..
            } => end_trial(
                run,
                number,
                worker,
                now,
                TrialState::Pruned,
                value,
                Some(reason),
            ),
            StudyEvent::TrialFailed {
                number,
                worker,
                reason,
                ..
            } => end_trial(
                run,
                number,
                worker,
                now,
                TrialState::Fail,
                None,
                Some(reason),
            ),
            StudyEvent::WorkerFinished { worker, .. } => {
                if let Some(w) = run.workers.get_mut(worker) {
                    w.done = true;
                    w.trial = None;
                }
            }
            StudyEvent::StudyFinished {
                completed,
                pruned,
                failed,
                stopped,
                best,
                ..
            } => {
                run.end = Some(StudyEnd {
                    counts: [completed, pruned, failed],
                    stopped,
                    best,
                });
            }
        }
    }
}

fn end_trial(
    run: &mut RunView,
    number: u64,
    worker: usize,
    now: f64,
    state: TrialState,
    value: Option<f64>,
    reason: Option<String>,
) {
    if let Some(t) = run.trial_mut(number) {
        t.state = state;
        t.value = value;
        t.span.1 = Some(now);
        t.reason = reason;
    }
    if let Some(w) = run.workers.get_mut(worker) {
        w.finished += 1;
        w.fraction = 1.0;
        w.samples_per_second = 0.0;
    }
}

/// Seconds since the Unix epoch: the telemetry charts' time axis.
fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tradetune_engine::study::runner::WorkerInfo;

    fn started() -> RunView {
        let mut run = RunView::default();
        run.apply(StudyEvent::StudyStarted {
            study: "s".into(),
            study_id: 1,
            existing_trials: 0,
            waiting: 0,
            recovered: Vec::new(),
            workers: vec![
                WorkerInfo {
                    worker: 0,
                    device: "wgpu:0".into(),
                    backend: "wgpu".into(),
                },
                WorkerInfo {
                    worker: 1,
                    device: "wgpu:0".into(),
                    backend: "wgpu".into(),
                },
            ],
            n_trials: 2,
            budget_left: None,
        });
        run.apply(StudyEvent::TrialStarted {
            number: 0,
            worker: 0,
            device: "wgpu:0".into(),
            backend: "wgpu".into(),
            precision: "f32".into(),
            params: Default::default(),
        });
        run
    }

    /// Issue 32: a GPU trial's compile phase is one of the phases the Run panel splits its
    /// time into (the phase bar draws `phase_seconds`).
    #[test]
    fn the_compile_phase_is_among_where_the_time_goes() {
        let mut run = started();
        for (update, compile) in [(1u64, 8.0), (2, 0.0)] {
            let values = [
                ("time/update_s", 1.0),
                ("time/env_step_s", 1.0),
                ("time/compile_s", compile),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
            run.apply(StudyEvent::Metrics {
                number: 0,
                worker: 0,
                update,
                env_steps: update * 64,
                values,
            });
        }
        let phases = run.trials[0].phase_seconds();
        assert!(phases.contains(&("time/compile_s", 8.0)), "{phases:?}");
        assert!(phases.contains(&("time/update_s", 2.0)), "{phases:?}");
    }

    /// A worker waiting for its GPU's turn says so, with the reason.
    #[test]
    fn a_waiting_worker_says_why() {
        let mut run = started();
        run.apply(StudyEvent::WorkerWaiting {
            worker: 1,
            device: "wgpu:0".into(),
            reason: "one trial per GPU at a time".into(),
        });
        assert_eq!(
            run.workers[1].message,
            "waiting on wgpu:0: one trial per GPU at a time"
        );
    }
}
