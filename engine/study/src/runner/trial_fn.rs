//! The contract between the runner and what a trial does: a [`TrialFunction`] decodes the
//! trial's configuration once (the base configuration with the sampled values applied) into its
//! own typed [`TrialFunction::Config`], then plans and runs it with the trial's device and a
//! [`Reporter`] (intermediate values for the pruner, progress, the stop flag), returning the
//! objective value or a [`TrialError`].

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::pruner::{PruneContext, Pruner};
use crate::space::ParamValue;
use crate::trial::{Direction, Trial};
use tradetune_device::memory::MemoryEstimate;
use tradetune_storage::{CurvePoint, FoldReturn, JsonValue, Storage};
use tradetune_telemetry::PhaseSplit;

use super::devices::DeviceSlot;
use super::events::StudyEvent;

/// What a trial function is given.
#[derive(Debug)]
pub struct TrialInput<'a> {
    /// Per-study trial number.
    pub number: u64,
    /// The storage's trial id (telemetry rows are tagged with it).
    pub trial_id: i64,
    pub worker: usize,
    pub device: &'a DeviceSlot,
    /// The sampled parameters, external values by name.
    pub params: &'a BTreeMap<String, ParamValue>,
    /// The trial's share of its device's memory, checked before it starts and, by trial
    /// functions that can (the PPO trainer on a device with a memory pool), after every update.
    pub budget: Option<tradetune_device::memory::MemoryBudget>,
    /// This process's memory on the trial's card as the telemetry probes last sampled it
    /// (NVML's process lists, amdgpu's DRM fdinfo), when the card is known and probed.
    pub process_memory: Option<ProcessMemory>,
}

/// Reads the device memory this process holds on one card from the telemetry sampler's newest
/// per-process figure (NVML on NVIDIA, DRM fdinfo on AMD).
#[derive(Debug, Clone)]
pub struct ProcessMemory {
    pub sampler: tradetune_telemetry::SamplerHandle,
    pub card: tradetune_telemetry::DeviceTag,
}

impl ProcessMemory {
    /// Bytes, when the probe reports the process on the card.
    pub fn bytes(&self) -> Option<u64> {
        self.sampler
            .latest(self.card, tradetune_telemetry::Metric::ProcessMemUsedMib)
            .map(|p| (p.v * 1048576.0) as u64)
    }
}

/// What a trial will run with, known before it starts.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TrialPlan {
    /// `f32`, `bf16` or `f16`.
    pub precision: String,
    /// Estimated memory need, checked against the device's budget before the trial starts;
    /// None = no estimate (no check).
    pub memory: Option<MemoryEstimate>,
}

/// How a trial ended other than with a value.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TrialError {
    /// The pruner said stop ([`Reporter::should_prune`]); Optuna's `TrialPruned`.
    #[error("pruned at step {step:?}")]
    Pruned { step: Option<u64> },
    /// The stop flag was raised and the trial function gave up.
    #[error("stopped by user")]
    Stopped,
    /// Anything else: the message becomes the trial's `fail_reason`.
    #[error("{0}")]
    Failed(String),
}

impl TrialError {
    pub fn failed(e: impl std::fmt::Display) -> Self {
        TrialError::Failed(e.to_string())
    }
}

/// Runs one trial. Implementations must be shareable between worker threads.
pub trait TrialFunction: Send + Sync {
    /// The trial's configuration, typed.
    type Config;
    /// Decodes the trial's configuration — the base configuration with the sampled values
    /// applied, as JSON — checking enum names and types. The runner calls it once per trial,
    /// before [`plan`](Self::plan) and [`run`](Self::run), which get the decoded value.
    fn config(&self, applied: &serde_json::Value) -> Result<Self::Config, TrialError>;
    /// Precision and memory estimate of the trial, from its configuration.
    fn plan(&self, config: &Self::Config, input: &TrialInput<'_>) -> Result<TrialPlan, TrialError>;
    /// Runs the trial and returns its objective value. Report intermediate values with
    /// [`Reporter::report`], ask [`Reporter::should_prune`] after each, and return
    /// [`TrialError::Stopped`] soon after [`Reporter::stop_requested`] turns true.
    fn run(
        &self,
        config: &Self::Config,
        input: &TrialInput<'_>,
        reporter: &mut Reporter<'_>,
    ) -> Result<f64, TrialError>;
}

/// A trial function as the runner holds it, its configuration type hidden: decoding gives a
/// [`DecodedTrial`] that plans and runs that one configuration.
pub(super) trait AnyTrialFunction: Send + Sync {
    fn decode<'f>(
        &'f self,
        applied: &serde_json::Value,
    ) -> Result<Box<dyn DecodedTrial + 'f>, TrialError>;
}

/// One trial's decoded configuration with the function that plans and runs it.
pub(super) trait DecodedTrial {
    fn plan(&self, input: &TrialInput<'_>) -> Result<TrialPlan, TrialError>;
    fn run(&self, input: &TrialInput<'_>, reporter: &mut Reporter<'_>) -> Result<f64, TrialError>;
}

struct Decoded<'f, F: TrialFunction> {
    function: &'f F,
    config: F::Config,
}

impl<F: TrialFunction> DecodedTrial for Decoded<'_, F> {
    fn plan(&self, input: &TrialInput<'_>) -> Result<TrialPlan, TrialError> {
        self.function.plan(&self.config, input)
    }
    fn run(&self, input: &TrialInput<'_>, reporter: &mut Reporter<'_>) -> Result<f64, TrialError> {
        self.function.run(&self.config, input, reporter)
    }
}

impl<F: TrialFunction> AnyTrialFunction for F {
    fn decode<'f>(
        &'f self,
        applied: &serde_json::Value,
    ) -> Result<Box<dyn DecodedTrial + 'f>, TrialError> {
        Ok(Box::new(Decoded {
            function: self,
            config: self.config(applied)?,
        }))
    }
}

/// A trial's stop flag: raised for the one trial, or for the whole study.
#[derive(Debug, Clone, Default)]
pub struct StopFlag {
    study: Arc<AtomicBool>,
    trial: Arc<AtomicBool>,
}

impl StopFlag {
    pub fn is_set(&self) -> bool {
        self.study.load(Ordering::Relaxed) || self.trial.load(Ordering::Relaxed)
    }
}

/// Stops trials or the whole study from any thread (a UI button, Ctrl-C).
///
/// A stopped trial is stored as PRUNED when it had reported at least one intermediate value
/// (its last value is kept, as Optuna's `tell(state=PRUNED)` does), otherwise as FAIL with
/// `fail_reason = "stopped by user"`; a PRUNED one holds that as its `prune_reason`, and TPE
/// does not learn from it (no pruner judged it). Stopping the study stops every running trial
/// that way and starts no new ones.
#[derive(Debug, Clone, Default)]
pub struct StopHandle {
    study: Arc<AtomicBool>,
    /// Set with `study` by [`StopHandle::interrupt`]: running trials end as FAIL "interrupted".
    interrupted: Arc<AtomicBool>,
    /// Set by [`StopHandle::finish_running`]: no new trial starts, running ones go on.
    finishing: Arc<AtomicBool>,
    running: Arc<Mutex<HashMap<u64, Arc<AtomicBool>>>>,
}

impl StopHandle {
    pub fn stop_study(&self) {
        self.study.store(true, Ordering::Relaxed);
    }

    pub fn study_stopped(&self) -> bool {
        self.study.load(Ordering::Relaxed)
    }

    /// Ctrl-C, SIGTERM or closing the window: no new trial starts, and every running trial
    /// stops and is stored as FAIL with `fail_reason = "interrupted"` (not PRUNED, whatever it
    /// reported), so no trial is left RUNNING and none is mistaken for a pruned result.
    pub fn interrupt(&self) {
        self.interrupted.store(true, Ordering::Relaxed);
        self.study.store(true, Ordering::Relaxed);
    }

    /// No new trial starts; the running ones go on to their own end (closing the window with
    /// "finish running trials"). [`StopHandle::stop_study`] or [`StopHandle::interrupt`] later
    /// still stop them.
    pub fn finish_running(&self) {
        self.finishing.store(true, Ordering::Relaxed);
    }

    /// Whether new trials may still start: neither stopped nor finishing.
    pub fn starts_trials(&self) -> bool {
        !self.study_stopped() && !self.finishing.load(Ordering::Relaxed)
    }

    /// Whether [`StopHandle::finish_running`] was called.
    pub fn finishing(&self) -> bool {
        self.finishing.load(Ordering::Relaxed)
    }

    /// Whether [`StopHandle::interrupt`] was called.
    pub fn interrupted(&self) -> bool {
        self.interrupted.load(Ordering::Relaxed)
    }

    /// Stops trial `number` if it is running here; returns whether it was.
    pub fn stop_trial(&self, number: u64) -> bool {
        let running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        match running.get(&number) {
            Some(flag) => {
                flag.store(true, Ordering::Relaxed);
                true
            }
            None => false,
        }
    }

    /// Numbers of the trials running now.
    pub fn running(&self) -> Vec<u64> {
        let running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        let mut v: Vec<u64> = running.keys().copied().collect();
        v.sort_unstable();
        v
    }

    pub(super) fn register(&self, number: u64) -> StopFlag {
        let trial = Arc::new(AtomicBool::new(false));
        self.running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(number, trial.clone());
        StopFlag {
            study: self.study.clone(),
            trial,
        }
    }

    pub(super) fn unregister(&self, number: u64) {
        self.running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&number);
    }
}

/// A trial's line to the study: intermediate values, pruning, progress, extra attributes.
pub struct Reporter<'a> {
    pub(super) storage: &'a mut Storage,
    pub(super) study_id: i64,
    pub(super) study_name: &'a str,
    pub(super) direction: Direction,
    pub(super) pruner: &'a dyn Pruner,
    pub(super) trial_id: i64,
    pub(super) number: u64,
    pub(super) worker: usize,
    pub(super) events: &'a Sender<StudyEvent>,
    pub(super) stop: StopFlag,
    pub(super) last_step: Option<u64>,
    pub(super) pruned_at: Option<u64>,
    pub(super) user_attrs: Vec<(String, JsonValue)>,
    pub(super) env_samples: u64,
    pub(super) phases: Option<PhaseSplit>,
    pub(super) gpu_work: Option<tradetune_telemetry::GpuWork>,
    /// Learning-curve points not yet written, and when the last batch was.
    pub(super) curve: Vec<CurvePoint>,
    pub(super) curve_written: Instant,
}

/// Learning-curve points are written at most this often (plus once at the end of the trial):
/// one short write transaction per interval instead of one per update, so that several workers
/// and an Optuna client sharing the file do not queue behind each other.
const CURVE_WRITE_INTERVAL: Duration = Duration::from_secs(2);

impl Reporter<'_> {
    /// Stores an intermediate value at `step` (Optuna's `trial.report`).
    pub fn report(&mut self, step: u64, value: f64) -> Result<(), TrialError> {
        let s = i64::try_from(step).map_err(TrialError::failed)?;
        self.storage
            .report(self.trial_id, s, value)
            .map_err(TrialError::failed)?;
        self.last_step = Some(self.last_step.map_or(step, |l| l.max(step)));
        let _ = self.events.send(StudyEvent::Intermediate {
            number: self.number,
            worker: self.worker,
            step,
            value,
        });
        Ok(())
    }

    /// Asks the study's pruner about the values reported so far (Optuna's
    /// `trial.should_prune`); stores what the pruner wants kept (rung values).
    pub fn should_prune(&mut self) -> Result<bool, TrialError> {
        let trials = self
            .storage
            .trials(self.study_id)
            .map_err(TrialError::failed)?;
        let history: Vec<Trial> = trials.iter().map(Trial::from).collect();
        let Some(me) = history.iter().find(|t| t.number == self.number) else {
            return Err(TrialError::Failed(format!(
                "trial #{} is missing from its study",
                self.number
            )));
        };
        let decision = self.pruner.prune(&PruneContext {
            study_name: self.study_name,
            direction: self.direction,
            trials: &history,
            trial: me,
        });
        for (k, v) in &decision.system_attrs {
            self.storage
                .set_trial_system_attr(self.trial_id, k, v)
                .map_err(TrialError::failed)?;
        }
        if decision.prune {
            self.pruned_at = self.last_step;
        }
        Ok(decision.prune)
    }

    /// Reports `value` at `step`, then returns `Err(Pruned)` when the pruner says stop: the
    /// usual pair in one call.
    pub fn report_and_check(&mut self, step: u64, value: f64) -> Result<(), TrialError> {
        self.report(step, value)?;
        if self.should_prune()? {
            return Err(TrialError::Pruned { step: Some(step) });
        }
        Ok(())
    }

    /// Reports a trial's last value (it trained in full): the pruner is asked, so that what it
    /// keeps is stored (successive halving's and Hyperband's rung values, which later trials
    /// and Optuna's workers compete against), but its verdict is not followed — a prune there
    /// would save nothing and call a finished trial pruned.
    pub fn report_last(&mut self, step: u64, value: f64) -> Result<(), TrialError> {
        self.report(step, value)?;
        self.should_prune()?;
        Ok(())
    }

    /// Whether the user stopped this trial or the study.
    pub fn stop_requested(&self) -> bool {
        self.stop.is_set()
    }

    /// The stop flag, to hand to a long-running loop.
    pub fn stop_flag(&self) -> StopFlag {
        self.stop.clone()
    }

    /// How far the trial has got, for live views.
    pub fn progress(&self, fraction: f64, message: impl Into<String>) {
        let _ = self.events.send(StudyEvent::WorkerProgress {
            worker: self.worker,
            number: self.number,
            fraction: fraction.clamp(0.0, 1.0),
            message: message.into(),
        });
    }

    /// A user attribute stored with the trial when it ends.
    pub fn set_user_attr(&mut self, key: impl Into<String>, value: impl Into<JsonValue>) {
        self.user_attrs.push((key.into(), value.into()));
    }

    /// The work done, for the per-trial telemetry summary (samples/s, phase split).
    pub fn set_work(&mut self, env_samples: u64, phases: Option<PhaseSplit>) {
        self.env_samples = env_samples;
        self.phases = phases;
    }

    /// What the trial's GPU runtime compiled and launched, for the verdict (and
    /// `kernels_compiled`, `autotune_runs` among the trial's attributes).
    pub fn set_gpu_work(&mut self, work: tradetune_telemetry::GpuWork) {
        self.gpu_work = Some(work);
    }

    /// Training metrics of one update: sent to live views at once, and kept as the trial's
    /// learning curve (written in batches; see [`CURVE_WRITE_INTERVAL`]). Non-finite values are
    /// sent as they are and stored as NULL.
    pub fn metrics(
        &mut self,
        update: u64,
        env_steps: u64,
        values: BTreeMap<String, f64>,
    ) -> Result<(), TrialError> {
        let index = |v: u64| i64::try_from(v).map_err(TrialError::failed);
        let (update_index, steps) = (index(update)?, index(env_steps)?);
        self.curve
            .extend(values.iter().map(|(metric, &value)| CurvePoint {
                metric: metric.clone(),
                update_index,
                env_steps: steps,
                value,
            }));
        let _ = self.events.send(StudyEvent::Metrics {
            number: self.number,
            worker: self.worker,
            update,
            env_steps,
            values,
        });
        if self.curve_written.elapsed() >= CURVE_WRITE_INTERVAL {
            self.write_curve()?;
        }
        Ok(())
    }

    /// Writes the learning-curve points still pending.
    pub(super) fn write_curve(&mut self) -> Result<(), TrialError> {
        self.curve_written = Instant::now();
        if self.curve.is_empty() {
            return Ok(());
        }
        let points = std::mem::take(&mut self.curve);
        self.storage
            .append_learning_curve(self.trial_id, &points)
            .map_err(|e| TrialError::Failed(format!("could not store the learning curve: {e}")))
    }

    /// Stores fold `fold`'s out-of-sample returns, `(bar time, the agent's return, equal
    /// weight's return)` per test bar, for the study's overfitting statistics (PBO, the
    /// deflated Sharpe ratio, which for an objective against equal weight deflates the
    /// returns over it).
    pub fn fold_returns(
        &mut self,
        fold: u64,
        returns: &[(i64, f64, f64)],
    ) -> Result<(), TrialError> {
        let fold = i64::try_from(fold).map_err(TrialError::failed)?;
        let rows: Vec<FoldReturn> = returns
            .iter()
            .enumerate()
            .map(|(i, &(bar_time, value, benchmark))| FoldReturn {
                fold,
                bar_index: i as i64,
                bar_time,
                value,
                benchmark: Some(benchmark),
            })
            .collect();
        self.storage
            .put_fold_returns(self.trial_id, &rows)
            .map_err(|e| TrialError::Failed(format!("could not store the fold's returns: {e}")))
    }

    /// The last step reported so far.
    pub fn last_step(&self) -> Option<u64> {
        self.last_step
    }
}
