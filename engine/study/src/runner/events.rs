//! What a running study reports: engine-defined, serialisable events that the CLI prints (or
//! writes as JSON lines) and the desktop app shows live. They arrive over a
//! `std::sync::mpsc::Sender<StudyEvent>` from the worker threads, in the order things happen.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A worker and the device it is bound to for its lifetime.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerInfo {
    /// 0-based.
    pub worker: usize,
    /// Device label (`cpu`, `cpu#1`, `wgpu:0`).
    pub device: String,
    pub backend: String,
}

/// One event of a study run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum StudyEvent {
    /// The study is open: its id, the trials it already had, those recovered from dead workers
    /// (RUNNING with a stale heartbeat, now FAIL) and the worker → device binding.
    StudyStarted {
        study: String,
        study_id: i64,
        existing_trials: usize,
        /// Of those, trials another program enqueued (WAITING, Optuna's `enqueue_trial`):
        /// the workers take them before making new ones.
        #[serde(default)]
        waiting: usize,
        recovered: Vec<u64>,
        workers: Vec<WorkerInfo>,
        n_trials: usize,
        /// Trials the study's budget (shared by every worker: `study create`'s) still allows;
        /// None without one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        budget_left: Option<usize>,
    },
    /// A trial got its parameters and device and is about to run.
    TrialStarted {
        number: u64,
        worker: usize,
        device: String,
        backend: String,
        precision: String,
        params: BTreeMap<String, serde_json::Value>,
    },
    /// The trial reported an intermediate value (for the pruner).
    Intermediate {
        number: u64,
        worker: usize,
        step: u64,
        value: f64,
    },
    /// Training metrics of one update of the trial (CleanRL's names: `losses/policy_loss`,
    /// `rollout/ep_return_mean`, `charts/SPS`, `time/update_s`, …), also kept as its learning
    /// curve in `tradetune_learning_curves`.
    Metrics {
        number: u64,
        worker: usize,
        /// Update number (1-based).
        update: u64,
        /// Environment samples trained on so far.
        env_steps: u64,
        values: BTreeMap<String, f64>,
    },
    /// Trials of this study left RUNNING by a worker that died (another process, maybe on
    /// another machine), found by `worker` as it starts a trial: their heartbeat went stale,
    /// and they are now FAIL "worker lost", their budget free. (Those found as the study opens
    /// are in [`StudyEvent::StudyStarted`]'s `recovered`.)
    TrialsRecovered { worker: usize, numbers: Vec<u64> },
    /// A worker waits for its GPU's turn (`gpu_sharing = "serial"`), and why.
    WorkerWaiting {
        worker: usize,
        device: String,
        reason: String,
    },
    /// How far a worker's current trial has got (0 to 1), with a short note.
    WorkerProgress {
        worker: usize,
        number: u64,
        fraction: f64,
        message: String,
    },
    /// COMPLETE with its objective value.
    TrialCompleted {
        number: u64,
        worker: usize,
        device: String,
        value: f64,
        duration_s: f64,
        /// Of `duration_s`, the seconds spent compiling kernels (a GPU trial's compile phase),
        /// where it recorded one.
        compile_s: Option<f64>,
    },
    /// PRUNED (by the pruner, or stopped by the user after it had reported values); `value` is
    /// the last intermediate value Optuna keeps as the trial's value.
    TrialPruned {
        number: u64,
        worker: usize,
        device: String,
        step: Option<u64>,
        value: Option<f64>,
        reason: String,
        duration_s: f64,
        /// As for [`StudyEvent::TrialCompleted`].
        compile_s: Option<f64>,
    },
    /// FAIL with the reason (also stored as the `fail_reason` system attribute).
    TrialFailed {
        number: u64,
        worker: usize,
        device: String,
        reason: String,
        duration_s: f64,
    },
    /// A worker has no more trials to run.
    WorkerFinished { worker: usize, trials: usize },
    /// Every worker is done.
    StudyFinished {
        study: String,
        completed: usize,
        pruned: usize,
        failed: usize,
        stopped: bool,
        /// The sampler had nothing left to try (the grid, every point tried by a finished
        /// trial): the study ended there, short of its budget.
        ran_out: bool,
        /// Best COMPLETE trial of the whole study: (number, value).
        best: Option<(u64, f64)>,
    },
}
