//! The study runner: K workers, each bound to one device for its lifetime, run trials of one
//! study in an Optuna storage until the trial budget is spent or the study is stopped.
//!
//! Per trial, a worker:
//! 1. takes the oldest trial another program enqueued (WAITING, Optuna's `enqueue_trial`) or
//!    creates the trial (its number is assigned in the insert transaction, so numbering goes on
//!    from whatever the study already holds, also after a crash) and samples its parameters
//!    (those an enqueued trial does not fix) from the whole history — one critical section per
//!    process, as the samplers require;
//! 2. applies them to the base configuration by dotted name and records worker, device,
//!    backend, precision and the applied configuration (user/system attributes and
//!    `tradetune_runs`);
//! 3. refuses the trial (FAIL, with the estimate's breakdown) when its memory estimate exceeds
//!    `memory_fraction × device memory / trials on that device at once` (one where its workers
//!    take turns, see [`GpuSharing::runs_sharing_budget`]);
//! 4. runs the [`TrialFunction`] under `catch_unwind` with a heartbeat thread beating for it: an
//!    error or a panic becomes FAIL with the reason, and the study goes on;
//! 5. stores the outcome: COMPLETE with the value, PRUNED (the pruner, or a user stop after
//!    values were reported — see [`StopHandle`]), FAIL with `fail_reason`; with a telemetry
//!    sampler, the trial's telemetry summary as user attributes first.
//!
//! On start, trials left RUNNING by a dead process (stale heartbeat) become FAIL, so a study
//! survives `kill -9` and resumes. A worker stopped by an error once its trial exists fails
//! that trial first where the storage still takes it, rather than leaving it RUNNING until a
//! later run finds it stale. Everything that happens is sent as a [`StudyEvent`].

mod devices;
mod events;
mod execute;
mod summary;
mod trial_fn;
mod turn;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use devices::{Assignment, DeviceSlot, GpuSharing, assign, label_slots};
pub use events::{StudyEvent, WorkerInfo};
pub use execute::panic_message;
pub use trial_fn::{
    ProcessMemory, Reporter, StopFlag, StopHandle, TrialError, TrialFunction, TrialInput, TrialPlan,
};

use crate::config_path::{self, ConfigPathError};
use crate::pruner::Pruner;
use crate::sampler::{SampleContext, Sampler, SamplerError};
use crate::space::SearchSpace;
use crate::trial::{Direction, Trial, TrialState};
use tradetune_device::memory::MemoryError;
use tradetune_storage::{
    DEFAULT_HEARTBEAT_INTERVAL, DEFAULT_STALE_AFTER, FIXED_PARAMS_KEY, JsonValue, Storage,
    StorageError, StorageOptions, StudyRecord, TrialHandle,
};
use tradetune_telemetry::SamplerHandle;
use turn::Turn;

/// How a study runs.
#[derive(Debug, Clone, PartialEq)]
pub struct RunnerConfig {
    pub study_name: String,
    /// The SQLite file (an Optuna storage).
    pub storage: PathBuf,
    pub direction: Direction,
    /// Trials to run in this call (Optuna's `n_trials` of `optimize`); trials already in the
    /// study do not count.
    pub n_trials: usize,
    /// The study's whole budget, shared by every process working on it (`tradetune worker`):
    /// no trial starts once the study holds this many RUNNING, COMPLETE or PRUNED trials,
    /// counted in the transaction that creates the trial. None: only `n_trials` limits.
    pub study_budget: Option<usize>,
    /// This machine's name, prefixed to the worker label stored with each trial
    /// (`host/worker-0`), so trials from several machines can be told apart.
    pub host: Option<String>,
    pub workers: usize,
    pub devices: Vec<DeviceSlot>,
    pub assignment: Assignment,
    /// Whether the workers bound to one GPU take turns on it (the default) or share it.
    pub gpu_sharing: GpuSharing,
    /// Fraction of each device's memory shared by the trials running on it.
    pub memory_fraction: f64,
    pub heartbeat_interval: Duration,
    /// RUNNING trials whose heartbeat is older than this are failed on start.
    pub stale_after: Duration,
}

impl RunnerConfig {
    /// One worker on the CPU, Optuna's heartbeat settings scaled as in [`tradetune_storage`].
    pub fn new(study_name: impl Into<String>, storage: impl Into<PathBuf>) -> Self {
        RunnerConfig {
            study_name: study_name.into(),
            storage: storage.into(),
            direction: Direction::Maximize,
            n_trials: 1,
            study_budget: None,
            host: None,
            workers: 1,
            devices: vec![DeviceSlot::new(
                tradetune_device::DeviceSpec::Cpu,
                tradetune_device::memory::host_memory_bytes(),
            )],
            assignment: Assignment::RoundRobin,
            gpu_sharing: GpuSharing::Serial,
            memory_fraction: tradetune_device::memory::DEFAULT_MEMORY_FRACTION,
            heartbeat_interval: DEFAULT_HEARTBEAT_INTERVAL,
            stale_after: DEFAULT_STALE_AFTER,
        }
    }

    /// Per device slot, the workers bound to its physical device: slots naming one device
    /// (`cpu`, `cpu#1`; `wgpu` and the `wgpu:N` it is) share it.
    pub fn workers_per_device(&self) -> Vec<usize> {
        let binding = assign(self.workers, &self.devices, self.assignment);
        let physical: Vec<String> = self
            .devices
            .iter()
            .map(|d| tradetune_device::physical_device(d.spec))
            .collect();
        physical
            .iter()
            .map(|p| binding.iter().filter(|&&d| physical[d] == *p).count())
            .collect()
    }

    /// Per device slot, the trials that share its physical device's memory budget
    /// ([`GpuSharing::runs_sharing_budget`]): one trial's budget is its device's
    /// `memory_fraction` divided by this.
    pub fn budget_shared_by(&self) -> Vec<usize> {
        self.workers_per_device()
            .into_iter()
            .zip(&self.devices)
            .map(|(workers, d)| self.gpu_sharing.runs_sharing_budget(d.spec, workers))
            .collect()
    }
}

/// Why a study could not run (a single trial's failure is not one: it is stored as FAIL).
#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error("study setting '{field}': {message}")]
    Config {
        field: &'static str,
        message: String,
    },
    #[error(transparent)]
    ConfigPath(#[from] ConfigPathError),
    #[error(transparent)]
    Memory(#[from] MemoryError),
    #[error("worker {worker} stopped: {message}")]
    Worker { worker: usize, message: String },
}

/// Refuses to run `study` (already stored) in `want`'s direction where it was stored with
/// another, or with several objectives: the sampler and the pruner would chase one direction
/// while its best trial is judged in the other, and a multi-objective study (made by Optuna)
/// refuses the single value each trial reports, stopping its worker mid-study.
pub fn check_direction(study: &StudyRecord, want: Direction) -> Result<(), RunnerError> {
    let stored = || {
        study
            .directions
            .iter()
            .map(|d| d.as_str().to_ascii_lowercase())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match study.directions[..] {
        [d] if d == want => Ok(()),
        [_] => Err(RunnerError::Config {
            field: "study.direction",
            message: format!(
                "the stored study '{}' was made to {} its objective and this run says {}: a \
                 study keeps its direction (name the study otherwise, or delete it first)",
                study.name,
                stored(),
                want.as_str().to_ascii_lowercase()
            ),
        }),
        _ => Err(RunnerError::Config {
            field: "study.direction",
            message: format!(
                "the stored study '{}' has {} objectives ({}), and TradeTune's trials report \
                 one (name the study otherwise)",
                study.name,
                study.directions.len(),
                stored()
            ),
        }),
    }
}

/// One trial as this run ended it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TrialOutcome {
    pub number: u64,
    pub state: TrialState,
    pub value: Option<f64>,
    pub worker: usize,
    pub device: String,
    pub reason: Option<String>,
}

/// What a run did.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct StudyReport {
    pub study_id: i64,
    pub study: String,
    /// Trials run in this call, in the order they ended.
    pub trials: Vec<TrialOutcome>,
    /// Trials of earlier runs recovered as FAIL on start.
    pub recovered: Vec<u64>,
    pub stopped: bool,
    /// Best COMPLETE trial of the whole study.
    pub best: Option<(u64, f64)>,
}

/// A study ready to run.
pub struct Runner {
    cfg: RunnerConfig,
    space: SearchSpace,
    base_config: serde_json::Value,
    sampler: Box<dyn Sampler>,
    pruner: Box<dyn Pruner>,
    trial_fn: Arc<dyn trial_fn::AnyTrialFunction>,
    stop: StopHandle,
    telemetry: Option<SamplerHandle>,
    /// The cards the telemetry probes see, numbered as the sampler numbers them (`gpuN`).
    telemetry_gpus: Vec<tradetune_telemetry::GpuInfo>,
    /// System attributes stored on the study when it runs (its pruner's settings).
    study_attrs: Vec<(String, JsonValue)>,
}

/// What the worker threads share.
struct Shared {
    study_id: i64,
    claimed: AtomicUsize,
    sample_lock: Mutex<()>,
    /// The sampler cannot propose more trials (a used-up grid): start no more.
    exhausted: AtomicBool,
    /// The sampler had nothing left to try when a worker looked for its next trial.
    ran_out: AtomicBool,
    outcomes: Mutex<Vec<TrialOutcome>>,
    /// Per device slot, the workers bound to its physical device.
    per_device: Vec<usize>,
    /// Per device slot, the trials sharing its physical device's memory budget.
    budget_shared_by: Vec<usize>,
    /// Per device slot, the turn its physical GPU's workers take (None: no turns).
    turns: Vec<Option<Arc<Turn>>>,
    /// Per device slot, the trials training on its physical device now.
    running: Vec<Arc<AtomicUsize>>,
    /// This process's trials that were started and have no final state yet: the study's
    /// RUNNING trials beyond them are other processes' (or this process's being created).
    live: AtomicUsize,
}

/// One of this process's trials counted in [`Shared::live`] while it lives, on every path out
/// of the worker's iteration (an error included).
struct Live<'a>(&'a AtomicUsize);

impl<'a> Live<'a> {
    fn count(live: &'a AtomicUsize) -> Live<'a> {
        live.fetch_add(1, Ordering::SeqCst);
        Live(live)
    }
}

impl Drop for Live<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// What a worker's look for its next trial found.
enum Start {
    /// The study's budget is spent (other processes may hold part of it).
    Spent,
    /// The sampler has nothing left to try (the grid, every point tried): no trial was made.
    RanOut,
    /// A trial, ready to run or failed before it ran: (trial, reason, whether the sampler is
    /// used up).
    Trial(Result<Started, (TrialHandle, String, bool)>),
}

/// A trial with its parameters, ready to run.
struct Started {
    handle: TrialHandle,
    params: BTreeMap<String, crate::space::ParamValue>,
    config: serde_json::Value,
    /// Where the trial was taken WAITING (enqueued by another program): the copy to enqueue
    /// again should the study be interrupted while it runs (see [`enqueued_again`]).
    again: Option<Box<tradetune_storage::NewTrial>>,
    /// Whether the trial was taken WAITING: one that has no copy to enqueue was cut short
    /// [`RUNS_CUT_SHORT`] times already.
    waited: bool,
}

/// How many runs of one enqueued trial an interrupt may cut short before it is not enqueued
/// again (a trial longer than every window a worker is given would otherwise take each one).
pub const RUNS_CUT_SHORT: usize = 3;

/// A WAITING copy of the enqueued trial `record` as it was taken (its parameters and
/// attributes from whoever enqueued it), to run again after an interrupt cut it short, as a
/// grid point or an entry of the study file's `sampler.enqueue` is run again: an interrupt is
/// not the configuration's fault. Marked as Optuna's `RetryFailedTrialCallback` marks its
/// copies (`failed_trial`: the first trial of the line; `retry_history`: every one), so
/// `RetryFailedTrialCallback.retried_trial_number` and the dashboard read it.
/// The runs of the enqueued trial `record`'s line an interrupt cut short before it (its
/// `retry_history`).
fn runs_cut_short(record: &tradetune_storage::TrialRecord) -> usize {
    match record.system_attr("retry_history") {
        Some(JsonValue::Array(earlier)) => earlier.len(),
        _ => 0,
    }
}

fn enqueued_again(record: &tradetune_storage::TrialRecord) -> tradetune_storage::NewTrial {
    let number = JsonValue::from(record.number);
    let mut system_attrs = record.system_attrs.clone();
    let mut history = match record.system_attr("retry_history") {
        Some(JsonValue::Array(earlier)) => earlier.clone(),
        _ => Vec::new(),
    };
    history.push(number.clone());
    system_attrs.retain(|(k, _)| k != "retry_history");
    if !system_attrs.iter().any(|(k, _)| k == "failed_trial") {
        system_attrs.push(("failed_trial".into(), number));
    }
    system_attrs.push(("retry_history".into(), JsonValue::Array(history)));
    tradetune_storage::NewTrial {
        params: (record.params.iter())
            .map(|p| (p.name.clone(), p.internal, (*p.distribution).clone()))
            .collect(),
        user_attrs: record.user_attrs.clone(),
        system_attrs,
        ..tradetune_storage::NewTrial::new(TrialState::Waiting)
    }
}

impl Runner {
    /// Checks the settings and that every searched name is a field of `base_config`.
    pub fn new<F: TrialFunction + 'static>(
        mut cfg: RunnerConfig,
        space: SearchSpace,
        base_config: serde_json::Value,
        sampler: Box<dyn Sampler>,
        pruner: Box<dyn Pruner>,
        trial_fn: Arc<F>,
    ) -> Result<Self, RunnerError> {
        if cfg.workers == 0 {
            return Err(RunnerError::Config {
                field: "workers",
                message: "need at least one worker".into(),
            });
        }
        if cfg.devices.is_empty() {
            return Err(RunnerError::Config {
                field: "devices",
                message: "need at least one device".into(),
            });
        }
        if !(cfg.memory_fraction.is_finite()
            && cfg.memory_fraction > 0.0
            && cfg.memory_fraction <= 1.0)
        {
            return Err(MemoryError::Fraction(cfg.memory_fraction).into());
        }
        if cfg.heartbeat_interval.is_zero() || cfg.stale_after <= cfg.heartbeat_interval {
            return Err(RunnerError::Config {
                field: "stale_after",
                message: format!(
                    "must be longer than the heartbeat interval ({:?}), got {:?}",
                    cfg.heartbeat_interval, cfg.stale_after
                ),
            });
        }
        label_slots(&mut cfg.devices);
        config_path::check_names(&base_config, &space)?;
        Ok(Runner {
            cfg,
            space,
            base_config,
            sampler,
            pruner,
            trial_fn,
            stop: StopHandle::default(),
            telemetry: None,
            telemetry_gpus: Vec::new(),
            study_attrs: Vec::new(),
        })
    }

    /// Summarise each trial's telemetry from this sampler's ring buffers when it ends, and tag
    /// the sampler's rows with the running trial's id (with several workers, the trial started
    /// last: one sampler sees the whole machine).
    pub fn with_telemetry(mut self, handle: SamplerHandle) -> Self {
        self.telemetry = Some(handle);
        self
    }

    /// Stores `key = value` among the study's system attributes when it runs (the settings
    /// its plots need, such as the pruner's, [`crate::file::PRUNER_ATTR`]).
    pub fn with_study_attr(mut self, key: impl Into<String>, value: JsonValue) -> Self {
        self.study_attrs.push((key.into(), value));
        self
    }

    /// The cards the sampler's probes see (in its `gpuN` order), so each trial's telemetry is
    /// tied to the card its device runs on.
    pub fn with_telemetry_gpus(mut self, gpus: Vec<tradetune_telemetry::GpuInfo>) -> Self {
        self.telemetry_gpus = gpus;
        self
    }

    /// The telemetry device of `slot`: the host for the CPU and for a software adapter, the
    /// probed card a wgpu adapter runs on (by PCI bus id, else by a name only one card has),
    /// [`OnCard::NotProbed`] for a card at a bus id no probed card has, `Unknown` when that
    /// cannot be told.
    fn telemetry_device(&self, slot: &DeviceSlot) -> OnCard {
        use tradetune_device::adapters::AdapterKind;
        use tradetune_telemetry::{BurnDeviceDescription, DeviceMatch, DeviceTag, match_device};
        let adapter = match slot.spec {
            tradetune_device::DeviceSpec::Cpu => return OnCard::Probed(DeviceTag::Host),
            spec if spec.is_wgpu() => match tradetune_device::wgpu_adapter(spec) {
                Ok(adapter) => adapter,
                Err(_) => return OnCard::Unknown,
            },
            _ => return OnCard::Unknown,
        };
        let description = BurnDeviceDescription {
            label: slot.label.clone(),
            name: Some(adapter.name.clone()),
            pci_bus_id: adapter.pci_bus_id.parse().ok(),
            is_cpu: adapter.kind == AdapterKind::Cpu,
        };
        match match_device(&description, &self.telemetry_gpus) {
            DeviceMatch::Cpu => OnCard::Probed(DeviceTag::Host),
            DeviceMatch::Gpu { index, .. } => OnCard::Probed(DeviceTag::Gpu(index)),
            DeviceMatch::NotProbed(_) => OnCard::NotProbed,
            DeviceMatch::Unknown(_) => OnCard::Unknown,
        }
    }

    /// Stops trials or the whole study from another thread.
    pub fn stop_handle(&self) -> StopHandle {
        self.stop.clone()
    }

    pub fn config(&self) -> &RunnerConfig {
        &self.cfg
    }

    /// The worker → device binding this run will use.
    pub fn workers(&self) -> Vec<WorkerInfo> {
        assign(self.cfg.workers, &self.cfg.devices, self.cfg.assignment)
            .into_iter()
            .enumerate()
            .map(|(worker, d)| WorkerInfo {
                worker,
                device: self.cfg.devices[d].label.clone(),
                backend: self.cfg.devices[d].backend().to_owned(),
            })
            .collect()
    }

    /// Runs the study to the end of its trial budget (or until stopped), sending events.
    pub fn run(&self, events: &Sender<StudyEvent>) -> Result<StudyReport, RunnerError> {
        // No sweep on open: it would judge every study's trials by this runner's
        // `stale_after`; this study's own are swept once it is known, below.
        let mut storage = Storage::open_with(&self.cfg.storage, &StorageOptions::default())?;
        let attrs: Vec<(&str, JsonValue)> = self
            .study_attrs
            .iter()
            .map(|(k, v)| (k.as_str(), v.clone()))
            .collect();
        let existing_study = |storage: &mut Storage, study: StudyRecord| {
            check_direction(&study, self.cfg.direction)?;
            storage.set_study_system_attrs(study.study_id, &attrs)?;
            Ok::<_, RunnerError>(study.study_id)
        };
        let study_id = match storage.study(&self.cfg.study_name) {
            Ok(study) => existing_study(&mut storage, study)?,
            // Created with its attributes in one transaction; where another process created it
            // since the lookup (two runs of one new study started at once), it is loaded.
            Err(StorageError::UnknownStudyName { .. }) => {
                match storage.create_study_with(&self.cfg.study_name, &[self.cfg.direction], &attrs)
                {
                    Err(StorageError::DuplicateStudy(_)) => {
                        let study = storage.study(&self.cfg.study_name)?;
                        existing_study(&mut storage, study)?
                    }
                    created => created?,
                }
            }
            Err(e) => return Err(e.into()),
        };
        let recovered_here: Vec<u64> = storage
            .fail_stale_trials_of(study_id, self.cfg.stale_after)?
            .iter()
            .map(|h| h.number.max(0) as u64)
            .collect();
        let stored = storage.trials(study_id)?;
        let existing = stored.len();
        let waiting = (stored.iter())
            .filter(|t| t.state == TrialState::Waiting)
            .count();
        // What a study budget (shared by every worker) leaves, counted as creating a trial
        // counts it.
        let budget_left = self.cfg.study_budget.map(|budget| {
            let used = stored
                .iter()
                .filter(|t| {
                    matches!(
                        t.state,
                        TrialState::Running | TrialState::Complete | TrialState::Pruned
                    )
                })
                .count();
            budget.saturating_sub(used)
        });
        drop(stored);
        let binding = assign(self.cfg.workers, &self.cfg.devices, self.cfg.assignment);
        let physical: Vec<String> = self
            .cfg
            .devices
            .iter()
            .map(|d| tradetune_device::physical_device(d.spec))
            .collect();
        let per_device = self.cfg.workers_per_device();
        // One turn and one running count per physical device, shared by its slots.
        let mut turns: Vec<Option<Arc<Turn>>> = Vec::new();
        let mut running: Vec<Arc<AtomicUsize>> = Vec::new();
        for (i, p) in physical.iter().enumerate() {
            let first = physical.iter().position(|q| q == p).unwrap_or(i);
            if first < i {
                turns.push(turns[first].clone());
                running.push(running[first].clone());
            } else {
                let serial =
                    self.cfg.gpu_sharing.serialises(self.cfg.devices[i].spec) && per_device[i] > 1;
                turns.push(serial.then(|| Arc::new(Turn::default())));
                running.push(Arc::new(AtomicUsize::new(0)));
            }
        }
        let _ = events.send(StudyEvent::StudyStarted {
            study: self.cfg.study_name.clone(),
            study_id,
            existing_trials: existing,
            waiting,
            recovered: recovered_here.clone(),
            workers: self.workers(),
            n_trials: self.cfg.n_trials,
            budget_left,
        });
        let shared = Shared {
            study_id,
            claimed: AtomicUsize::new(0),
            sample_lock: Mutex::new(()),
            exhausted: AtomicBool::new(false),
            ran_out: AtomicBool::new(false),
            outcomes: Mutex::new(Vec::new()),
            budget_shared_by: self.cfg.budget_shared_by(),
            per_device,
            turns,
            running,
            live: AtomicUsize::new(0),
        };
        let results: Vec<Result<(), RunnerError>> = std::thread::scope(|scope| {
            let handles: Vec<_> = binding
                .iter()
                .enumerate()
                .map(|(w, d)| {
                    let shared = &shared;
                    let events = events.clone();
                    std::thread::Builder::new()
                        .name(format!("study-worker-{w}"))
                        .spawn_scoped(scope, move || self.worker(w, *d, shared, &events))
                })
                .collect();
            handles
                .into_iter()
                .enumerate()
                .map(|(w, h)| match h {
                    Ok(h) => h.join().unwrap_or_else(|_| {
                        Err(RunnerError::Worker {
                            worker: w,
                            message: "the worker thread panicked outside a trial".into(),
                        })
                    }),
                    Err(e) => Err(RunnerError::Worker {
                        worker: w,
                        message: format!("could not start its thread: {e}"),
                    }),
                })
                .collect()
        });
        let outcomes = shared
            .outcomes
            .into_inner()
            .unwrap_or_else(|p| p.into_inner());
        let best = storage
            .best_trial(study_id)?
            .and_then(|t| t.value().map(|v| (t.number.max(0) as u64, v)));
        let count = |s: TrialState| outcomes.iter().filter(|o| o.state == s).count();
        let _ = events.send(StudyEvent::StudyFinished {
            study: self.cfg.study_name.clone(),
            completed: count(TrialState::Complete),
            pruned: count(TrialState::Pruned),
            failed: count(TrialState::Fail),
            stopped: self.stop.study_stopped() || self.stop.finishing(),
            ran_out: shared.ran_out.load(Ordering::SeqCst),
            best,
        });
        if let Some(e) = results.into_iter().find_map(Result::err) {
            return Err(e);
        }
        Ok(StudyReport {
            study_id,
            study: self.cfg.study_name.clone(),
            trials: outcomes,
            recovered: recovered_here,
            stopped: self.stop.study_stopped() || self.stop.finishing(),
            best,
        })
    }

    fn worker(
        &self,
        worker: usize,
        device: usize,
        shared: &Shared,
        events: &Sender<StudyEvent>,
    ) -> Result<(), RunnerError> {
        let options = StorageOptions {
            stale_after: None,
            ..StorageOptions::default()
        };
        let mut storage = Storage::open_with(&self.cfg.storage, &options)?;
        let slot = &self.cfg.devices[device];
        let mut done = 0;
        // Since when the budget was found held by other processes' trials (None: not waiting).
        let mut waiting_since: Option<std::time::Instant> = None;
        loop {
            if !self.stop.starts_trials() || shared.exhausted.load(Ordering::SeqCst) {
                break;
            }
            // This card's turn first (before the trial exists: a waiting worker holds no
            // RUNNING trial and no budget), after the workers that asked before this one.
            let _turn = shared.turns[device].as_ref().map(|turn| {
                turn.take(|| {
                    let _ = events.send(StudyEvent::WorkerWaiting {
                        worker,
                        device: slot.label.clone(),
                        reason: GpuSharing::WHY.to_owned(),
                    });
                })
            });
            if !self.stop.starts_trials() || shared.exhausted.load(Ordering::SeqCst) {
                break;
            }
            if shared.claimed.fetch_add(1, Ordering::SeqCst) >= self.cfg.n_trials {
                break;
            }
            let started = {
                let _guard = shared.sample_lock.lock().unwrap_or_else(|p| p.into_inner());
                self.start_trial(&mut storage, shared.study_id, worker, slot, events)?
            };
            // The study's budget is spent (other processes took the last trials). Where trials
            // of other processes hold some of it, one may yet end FAIL (its worker died, or it
            // failed) and free its place: the worker waits for them rather than leave the study
            // short of its budget with no worker left to run the rest.
            // A trial whose worker was already dead then goes stale within the stale limit
            // (and a heartbeat's lateness, and the database clock's whole seconds), and is
            // failed by the next look: the wait ends there,
            // since a trial whose worker lives is that worker's to finish (and one that never
            // had a heartbeat, which Optuna without heartbeats leaves, never goes stale).
            let started = match started {
                Start::Trial(started) => Some(started),
                Start::RanOut => {
                    shared.claimed.fetch_sub(1, Ordering::SeqCst);
                    shared.exhausted.store(true, Ordering::SeqCst);
                    shared.ran_out.store(true, Ordering::SeqCst);
                    break;
                }
                Start::Spent => None,
            };
            let Some(started) = started else {
                shared.claimed.fetch_sub(1, Ordering::SeqCst);
                let waited_enough = waiting_since.is_some_and(|since| {
                    since.elapsed()
                        > self.cfg.stale_after
                            + 2 * self.cfg.heartbeat_interval
                            + Duration::from_secs(2)
                });
                match self.others_running(&storage, shared)? {
                    others if others == 0 || waited_enough => {
                        shared.exhausted.store(true, Ordering::SeqCst);
                        break;
                    }
                    others => {
                        if waiting_since.is_none() {
                            waiting_since = Some(std::time::Instant::now());
                            let _ = events.send(StudyEvent::WorkerWaiting {
                                worker,
                                device: slot.label.clone(),
                                reason: format!(
                                    "the study's budget is spent but {others} trials of other \
                                     workers still hold part of it: waiting for them to end (a \
                                     worker that died frees its trial once its heartbeat is \
                                     older than the stale limit, {} s)",
                                    self.cfg.stale_after.as_secs_f64()
                                ),
                            });
                        }
                        self.pause(self.cfg.heartbeat_interval);
                        continue;
                    }
                }
            };
            waiting_since = None;
            let _live = Live::count(&shared.live);
            done += 1;
            let outcome = match started {
                Ok(s) => self.run_trial(&mut storage, worker, slot, shared, s, events)?,
                Err((handle, reason, exhausted)) => {
                    if exhausted {
                        shared.exhausted.store(true, Ordering::SeqCst);
                    }
                    self.fail(&mut storage, handle, worker, slot, reason, 0.0, events)?
                }
            };
            shared
                .outcomes
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(outcome);
        }
        let _ = events.send(StudyEvent::WorkerFinished {
            worker,
            trials: done,
        });
        Ok(())
    }

    /// The study's RUNNING trials that are not this process's.
    fn others_running(&self, storage: &Storage, shared: &Shared) -> Result<usize, RunnerError> {
        let running = (storage.trials(shared.study_id)?.iter())
            .filter(|t| t.state == TrialState::Running)
            .count();
        Ok(running.saturating_sub(shared.live.load(Ordering::SeqCst)))
    }

    /// Sleeps `total` in steps short enough that a stop is not kept waiting.
    fn pause(&self, total: Duration) {
        let until = std::time::Instant::now() + total;
        while self.stop.starts_trials() {
            let left = until.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                break;
            }
            std::thread::sleep(left.min(Duration::from_millis(100)));
        }
    }

    /// Creates a trial and samples its parameters. The inner error is a trial that could not
    /// be prepared: (trial, reason, whether the sampler is used up). A storage error once the
    /// trial exists fails it (best effort) before it stops the worker.
    fn start_trial(
        &self,
        storage: &mut Storage,
        study_id: i64,
        worker: usize,
        slot: &DeviceSlot,
        events: &Sender<StudyEvent>,
    ) -> Result<Start, RunnerError> {
        // As Optuna does before each trial: a trial of this study whose worker died (another
        // process, maybe another machine) becomes FAIL once its heartbeat is stale, so its
        // budget is free.
        let lost = storage.fail_stale_trials_of(study_id, self.cfg.stale_after)?;
        if !lost.is_empty() {
            let _ = events.send(StudyEvent::TrialsRecovered {
                worker,
                numbers: lost.iter().map(|h| h.number as u64).collect(),
            });
        }
        // A trial another program enqueued (Optuna's `study.enqueue_trial`, WAITING) is taken
        // before a new one is made, as Optuna's own `ask` does.
        let waiting = storage.pop_waiting_trial_within(study_id, self.cfg.study_budget)?;
        // A grid whose every point is tried makes no trial to fail "not run". The look and the
        // new trial's sampling see the same trials: a point another worker finishes between
        // them (this process's too: only sampling holds the sample lock, not a trial's end)
        // then leaves the sampler a RUNNING point to run again, as Optuna's `GridSampler`
        // does, rather than nothing.
        let mut seen = None;
        if waiting.is_none() && self.sampler.can_run_out() {
            let records = storage.trials(study_id)?;
            if self.ran_out(&records) {
                return Ok(Start::RanOut);
            }
            seen = Some(records);
        }
        let handle = match waiting {
            Some(handle) => handle,
            None => match storage.create_trial_within(study_id, self.cfg.study_budget)? {
                Some(handle) => handle,
                None => return Ok(Start::Spent),
            },
        };
        let from_waiting = waiting.is_some();
        match self.propose(storage, study_id, handle, seen, from_waiting) {
            Ok(Ok((params, config, again))) => Ok(Start::Trial(Ok(Started {
                handle,
                params,
                config,
                again,
                waited: from_waiting,
            }))),
            Ok(Err((reason, exhausted))) => Ok(Start::Trial(Err((handle, reason, exhausted)))),
            Err(e) => {
                self.abandon(storage, handle, worker, slot, &e, events);
                Err(e)
            }
        }
    }

    /// Whether the sampler has nothing left for a new trial of the study whose trials are
    /// `records`.
    fn ran_out(&self, records: &[tradetune_storage::TrialRecord]) -> bool {
        let all: Vec<Trial> = records.iter().map(Trial::from).collect();
        let next = all.iter().map(|t| t.number + 1).max().unwrap_or(0);
        let ctx = SampleContext {
            space: &self.space,
            history: &all,
            direction: self.cfg.direction,
            trial_number: next,
        };
        // A sampler that panics here is asked again by the trial, which fails with the panic.
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.sampler.ran_out(&ctx)))
            .unwrap_or(false)
    }

    /// Samples the parameters of the new trial `handle` (from the study's trials `seen`, where
    /// the caller read them) and applies them to the base configuration. The inner error is a trial that could not be prepared: (reason, whether
    /// the sampler is used up).
    #[allow(clippy::type_complexity)]
    fn propose(
        &self,
        storage: &mut Storage,
        study_id: i64,
        handle: TrialHandle,
        seen: Option<Vec<tradetune_storage::TrialRecord>>,
        from_waiting: bool,
    ) -> Result<
        Result<
            (
                BTreeMap<String, crate::space::ParamValue>,
                serde_json::Value,
                Option<Box<tradetune_storage::NewTrial>>,
            ),
            (String, bool),
        >,
        RunnerError,
    > {
        let number = handle.number.max(0) as u64;
        // The study's trials as the caller saw them before it made this one, or as stored now.
        let records = match seen {
            Some(records) => records,
            None => storage.trials(study_id)?,
        };
        let all: Vec<Trial> = records.iter().map(Trial::from).collect();
        // The parameters an enqueued trial was given: a trial this runner makes has none
        // yet; one taken WAITING has them from whoever enqueued it (Optuna's `fixed_params`,
        // or parameters already stored, as `RetryFailedTrialCallback` re-enqueues a trial).
        let record = records.iter().find(|r| r.number == handle.number);
        let again = (record.filter(|_| from_waiting))
            .filter(|r| runs_cut_short(r) + 1 < RUNS_CUT_SHORT)
            .map(|r| Box::new(enqueued_again(r)));
        let (fixed, already_stored) = match record {
            Some(record) => match self.given_params(record) {
                Ok(given) => given,
                Err(reason) => return Ok(Err((reason, false))),
            },
            None => (None, Vec::new()),
        };
        let others: Vec<_> = all.into_iter().filter(|t| t.number != number).collect();
        // The sampler learns from every trial of the study, under Hyperband too: Optuna 5.0's
        // `_BracketStudy` filters `get_trials` (its pruner's view), while its TPE reads
        // `_get_trials`, which it leaves whole.
        let sampled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            // Every parameter fixed: nothing to ask (the grid is not asked for a point).
            if fixed.as_ref().is_some_and(|f| f.len() == self.space.len()) {
                return Ok(crate::sampler::Proposal::default());
            }
            let ctx = SampleContext {
                space: &self.space,
                history: &others,
                direction: self.cfg.direction,
                trial_number: number,
            };
            // The rest of an enqueued trial's values come from the sampler, not from an entry
            // of the study file's `sampler.enqueue` (which would count as used, not having run).
            match fixed {
                Some(_) => self.sampler.sample_beside_entries(&ctx),
                None => self.sampler.sample(&ctx),
            }
        }));
        let proposal = match sampled {
            Ok(Ok(p)) => p,
            // A sampler that panics fails the trial it was asked for, not the worker with the
            // trial left RUNNING; it proposes nothing more (its state may be broken).
            Err(panic) => {
                let reason = format!(
                    "sampler {} panicked: {}",
                    self.sampler.name(),
                    execute::panic_message(&panic)
                );
                return Ok(Err((reason, true)));
            }
            Ok(Err(e)) => {
                let exhausted = true;
                let reason = match &e {
                    SamplerError::GridExhausted(_) => format!("not run: {e}"),
                    _ => format!("sampler {}: {e}", self.sampler.name()),
                };
                return Ok(Err((reason, exhausted)));
            }
        };
        let mut proposal = proposal;
        if let Some(fixed) = fixed {
            // The enqueued values win over the sampler's, and the trial keeps its own
            // `fixed_params` (a sampler's enqueued entry does not replace them).
            proposal.params.extend(fixed);
            proposal.system_attrs.remove(FIXED_PARAMS_KEY);
        }
        let mut stored = Vec::with_capacity(proposal.params.len());
        for (name, internal) in &proposal.params {
            if already_stored.contains(name) {
                continue;
            }
            let Some(dist) = self.space.get(name) else {
                return Ok(Err((
                    format!("sampler proposed '{name}', which is not in the search space"),
                    true,
                )));
            };
            stored.push((name.clone(), *internal, dist.clone()));
        }
        let attrs: Vec<(String, JsonValue)> = (proposal.system_attrs.iter())
            .map(|(k, v)| (k.clone(), JsonValue::from(v)))
            .collect();
        storage.set_params_with_attrs(handle.trial_id, &stored, &attrs)?;
        let params = match self.space.to_external(&proposal.params) {
            Ok(p) => p,
            Err(e) => return Ok(Err((e.to_string(), false))),
        };
        let mut config = self.base_config.clone();
        for (name, value) in &params {
            if let Err(e) = config_path::apply_value(&mut config, name, value) {
                return Ok(Err((format!("applying parameters: {e}"), false)));
            }
        }
        Ok(Ok((params, config, again)))
    }

    /// The values the trial `record` was given before it ran, in internal representation
    /// (None: it was given none, as a trial this runner makes), and the names among them
    /// already stored; or why the trial cannot run them: a name outside the search space, a
    /// value outside its distribution (Optuna warns and runs it; a trial's stored parameter
    /// must lie in its distribution here), or, in front of the grid, a parameter left unfixed
    /// (Optuna's `GridSampler` refuses that).
    #[allow(clippy::type_complexity)]
    fn given_params(
        &self,
        record: &tradetune_storage::TrialRecord,
    ) -> Result<(Option<crate::space::InternalParams>, Vec<String>), String> {
        // A parameter set aside on reading (an infinite range another client stored with the
        // trial) can neither be run with nor sampled again in its place: the trial is not run.
        if let Some(s) = record.set_aside.iter().find(|s| s.internal.is_some()) {
            return Err(format!(
                "enqueued trial's stored parameter '{}' cannot be run: {}",
                s.name, s.reason
            ));
        }
        let fixed = record.system_attr(FIXED_PARAMS_KEY);
        if fixed.is_none() && record.params.is_empty() {
            return Ok((None, Vec::new()));
        }
        let mut values = match fixed {
            Some(fixed) => Self::fixed_values(fixed)?,
            None => BTreeMap::new(),
        };
        let mut already = Vec::new();
        for p in &record.params {
            let value = p
                .external()
                .map_err(|e| format!("enqueued parameter '{}': {e}", p.name))?;
            values.insert(p.name.clone(), value);
            already.push(p.name.clone());
        }
        let why = |message: String| match fixed {
            Some(fixed) => format!("enqueued parameters {}: {message}", fixed.dumps()),
            None => format!("enqueued trial's stored parameters: {message}"),
        };
        let internal = (self.space.to_internal(&values)).map_err(|e| why(e.to_string()))?;
        if self.sampler.needs_complete_entries() && internal.len() < self.space.len() {
            let missing: Vec<&str> = (self.space.names())
                .filter(|n| !internal.contains_key(*n))
                .collect();
            return Err(why(format!(
                "the {} sampler needs every parameter fixed (as Optuna's GridSampler with \
                 enqueue_trial); these do not fix {}",
                self.sampler.name(),
                missing.join(", ")
            )));
        }
        Ok((Some(internal), already))
    }

    /// Optuna's `fixed_params` (a JSON mapping of names to Python values) as parameter values.
    fn fixed_values(
        fixed: &JsonValue,
    ) -> Result<BTreeMap<String, crate::space::ParamValue>, String> {
        let why = |message: String| format!("enqueued parameters {}: {message}", fixed.dumps());
        let JsonValue::Object(entries) = fixed else {
            return Err(why("not a mapping of parameter names to values".into()));
        };
        let mut values = BTreeMap::new();
        for (name, value) in entries {
            let value = crate::space::ParamValue::from_json(value)
                .map_err(|e| why(format!("parameter '{name}': {e}")))?;
            values.insert(name.clone(), value);
        }
        Ok(values)
    }
}

/// Which telemetry device a trial's slot is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnCard {
    /// The host (the CPU, a software adapter) or a probed card.
    Probed(tradetune_telemetry::DeviceTag),
    /// A card no probe reads (its bus id is none of theirs): only the host's rows are the
    /// trial's, where every card's were, and a trial on an iGPU was judged by an idle card's
    /// figures ("gpu0 only 0 % busy … raise batch_size").
    NotProbed,
    /// Not known (a backend without an adapter to ask, a card told by neither bus id nor a
    /// name only one probed card has): every device's rows are tagged with the trial.
    Unknown,
}

impl OnCard {
    /// The device the sampler tags the trial's rows on and sums them over (`None`: every one).
    pub(crate) fn sampler_tag(self) -> Option<tradetune_telemetry::DeviceTag> {
        match self {
            OnCard::Probed(tag) => Some(tag),
            OnCard::NotProbed => Some(tradetune_telemetry::DeviceTag::Host),
            OnCard::Unknown => None,
        }
    }

    /// The probed device itself, where there is one.
    pub(crate) fn probed(self) -> Option<tradetune_telemetry::DeviceTag> {
        match self {
            OnCard::Probed(tag) => Some(tag),
            OnCard::NotProbed | OnCard::Unknown => None,
        }
    }
}
