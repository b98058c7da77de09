//! What a training run reports while it runs: engine-defined event values that the CLI prints
//! (or serialises with `--json`) and the GUI plots, consumed through a callback.

use serde::{Deserialize, Serialize};

use crate::eval::EvalSummary;
use crate::ppo::update::UpdateStats;
use tradetune_env::EpisodeStats;

/// Wall time per phase of a training run, in seconds. On GPU devices the trainer syncs the
/// device at each phase boundary so the split is true rather than where queued work happened
/// to be waited for.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct PhaseTimes {
    /// Stepping the environments (including host↔device copies of a host env).
    pub env_step: f64,
    /// Policy forward passes and action sampling during rollouts.
    pub inference: f64,
    /// Writing the rollout buffer and normalisation statistics.
    pub buffer: f64,
    /// GAE and preparing the update batch.
    pub advantages: f64,
    /// The gradient updates.
    pub update: f64,
    /// Periodic evaluations on a held-out split ([`crate::ppo::trainer::PeriodicEval`]).
    #[serde(default)]
    pub evaluation: f64,
    /// Compiling and autotuning kernels: the excess of an update that compiled new kernels over
    /// the next update that compiled none (the first update's overhead on a GPU, and any later
    /// one's), and, where a periodic evaluation compiled (a GPU run's first), the time its
    /// first half of bars took beyond its pace. Zero on the CPU, which compiles nothing.
    #[serde(default)]
    pub compile: f64,
}

impl PhaseTimes {
    /// Sum of all phases.
    pub fn total(&self) -> f64 {
        self.env_step
            + self.inference
            + self.buffer
            + self.advantages
            + self.update
            + self.evaluation
            + self.compile
    }

    /// The rollout and update phases of `self` (evaluation left out) scaled so that they sum
    /// to `total` seconds: an untimed update's wall time split as the last timed one's was.
    pub fn scaled_to(&self, total: f64) -> PhaseTimes {
        let sum = self.env_step + self.inference + self.buffer + self.advantages + self.update;
        let k = if sum > 0.0 { total / sum } else { 0.0 };
        PhaseTimes {
            env_step: self.env_step * k,
            inference: self.inference * k,
            buffer: self.buffer * k,
            advantages: self.advantages * k,
            update: self.update * k,
            evaluation: 0.0,
            compile: 0.0,
        }
    }

    /// Seconds per phase by name (`time/env_step_s`, …), for learning curves.
    pub fn metrics(&self) -> [(&'static str, f64); 7] {
        [
            ("time/env_step_s", self.env_step),
            ("time/inference_s", self.inference),
            ("time/buffer_s", self.buffer),
            ("time/advantages_s", self.advantages),
            ("time/update_s", self.update),
            ("time/evaluation_s", self.evaluation),
            ("time/compile_s", self.compile),
        ]
    }

    /// Adds `other` phase by phase.
    pub fn add(&mut self, other: &PhaseTimes) {
        self.env_step += other.env_step;
        self.inference += other.inference;
        self.buffer += other.buffer;
        self.advantages += other.advantages;
        self.update += other.update;
        self.evaluation += other.evaluation;
        self.compile += other.compile;
    }
}

/// Means over the episodes that finished during one rollout.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct EpisodeSummary {
    /// Episodes finished.
    pub count: usize,
    /// Mean sum of rewards (`rollout/ep_rew_mean`).
    pub mean_reward: f32,
    /// Mean length (`rollout/ep_len_mean`).
    pub mean_length: f32,
    /// Mean total return of the portfolio (trading env).
    pub mean_return: f32,
    /// Mean return of the equal-weight buy-and-hold (trading env).
    pub mean_equal_weight_return: f32,
}

impl EpisodeSummary {
    /// The means by SB3's names (plus the trading env's returns), for learning curves.
    pub fn metrics(&self) -> [(&'static str, f64); 4] {
        [
            ("rollout/ep_rew_mean", self.mean_reward.into()),
            ("rollout/ep_len_mean", self.mean_length.into()),
            ("rollout/ep_return_mean", self.mean_return.into()),
            (
                "rollout/ep_equal_weight_return_mean",
                self.mean_equal_weight_return.into(),
            ),
        ]
    }

    /// Summarises `episodes` (None when empty).
    pub fn of(episodes: &[EpisodeStats]) -> Option<Self> {
        if episodes.is_empty() {
            return None;
        }
        let n = episodes.len() as f32;
        let mean = |f: fn(&EpisodeStats) -> f32| episodes.iter().map(f).sum::<f32>() / n;
        Some(Self {
            count: episodes.len(),
            mean_reward: mean(|e| e.reward_sum),
            mean_length: mean(|e| e.length as f32),
            mean_return: mean(|e| e.total_return),
            mean_equal_weight_return: mean(|e| e.equal_weight_return),
        })
    }
}

/// One event of a training run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum TrainEvent {
    /// The run started.
    Started {
        /// Device the run trains on.
        device: String,
        /// Parameters of the network.
        n_params: usize,
        /// Timestep budget: the samples the run ends at, counted as `Progress::timesteps`
        /// counts them (those of a resumed checkpoint included).
        total_timesteps: usize,
    },
    /// After each update.
    Progress {
        /// Update number (1-based).
        update: usize,
        /// Environment steps × envs so far.
        timesteps: usize,
        /// Timestep budget, counted as `timesteps` is (a resumed checkpoint's samples
        /// included), so `timesteps / total_timesteps` is the run's progress.
        total_timesteps: usize,
        /// Samples per second since the start (`charts/SPS`).
        samples_per_second: f64,
        /// Wall time of this update's phases.
        phases: PhaseTimes,
    },
    /// Episodes that finished during the last rollout.
    Episodes(EpisodeSummary),
    /// The update's diagnostics.
    Update {
        /// Update number (1-based).
        update: usize,
        /// CleanRL's `losses/*` numbers.
        stats: UpdateStats,
    },
    /// A periodic evaluation of the deterministic policy on a held-out split (every
    /// `PeriodicEval::every` updates), before that update's `Progress`.
    Evaluation {
        /// Update number (1-based) after which the policy was evaluated.
        update: usize,
        /// Samples trained on so far.
        timesteps: usize,
        /// Metrics of the agent and of equal weight, and the objective's value.
        summary: EvalSummary,
    },
    /// The run ended (budget reached or stopped).
    Finished {
        /// Whether the stop flag ended it early.
        stopped: bool,
    },
}
