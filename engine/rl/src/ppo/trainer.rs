//! The training loop: rollout (no autodiff graph) → GAE → update, until a timestep budget is
//! spent or the stop flag is raised, reporting [`TrainEvent`]s through a callback.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use burn::module::Module;
use burn::tensor::{Device, FloatDType, Tensor};
use rand::rngs::StdRng;
use serde::{Deserialize, Serialize};

use crate::eval::{EvalError, EvalReport};
use crate::eval::{EvalSplit, EvalSummary, Objective};
use crate::ppo::accounting::{CompileWatch, DispatchProfile, Tally, round_trips};
use crate::ppo::buffer::RolloutBuffer;
use crate::ppo::config::PpoConfig;
use crate::ppo::error::PpoError;
use crate::ppo::events::{EpisodeSummary, PhaseTimes, TrainEvent};
use crate::ppo::host_policy::{HostPolicy, HostStep};
use crate::ppo::model::ActorCritic;
use crate::ppo::normalize::{RewardNormalizer, RunningMeanStd};
use crate::ppo::rollout_env::RolloutEnv;
use crate::ppo::update::{Learner, UpdateStats};
use tradetune_device::kernels::KernelCounts;
use tradetune_device::memory::MemoryBudget;

mod evaluation;
#[cfg(feature = "wgpu")]
mod noise_rows;
mod policy_graph;
mod sampling;
mod step;

use policy_graph::PolicyGraph;
use sampling::PhaseSampling;

/// What a finished (or stopped) run returns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainReport {
    /// The configuration the learner used, every field after defaults.
    pub applied: PpoConfig,
    /// Device the run trained on.
    pub device: String,
    /// Samples collected.
    pub timesteps: usize,
    /// Updates done.
    pub updates: usize,
    /// Wall time, seconds.
    pub elapsed_s: f64,
    /// Samples per second end to end.
    pub samples_per_second: f64,
    /// Samples per second without the compile phase: what the run trains at once its kernels
    /// are compiled.
    #[serde(default)]
    pub steady_samples_per_second: f64,
    /// Wall time per phase over the run (`compile` included).
    pub phases: PhaseTimes,
    /// What the updates that compiled compiled and autotuned (zero on the CPU).
    #[serde(default)]
    pub kernels: KernelCounts,
    /// Whether every update of this call compiled, so that none gave a steady time to measure
    /// their compiling against: it is then in their other phases, not in `phases.compile`
    /// (which may still hold an evaluation's and the wait for late compilation lines).
    #[serde(default)]
    pub compile_not_apart: bool,
    /// Launches and round-trips of the last timed update, by part (see [`DispatchProfile`]).
    #[serde(default)]
    pub dispatches: Option<DispatchProfile>,
    /// The last update's diagnostics.
    pub last_update: Option<UpdateStats>,
    /// Episodes finished in the last rollout that finished any.
    pub last_episodes: Option<EpisodeSummary>,
    /// Whether the stop flag ended the run.
    pub stopped: bool,
    /// The last periodic evaluation, when the run had one ([`Trainer::with_evaluation`]).
    #[serde(default)]
    pub last_evaluation: Option<EvalSummary>,
}

/// Evaluation of the deterministic policy on a held-out split every `every` updates, during
/// training: what a study's pruner reads as intermediate values.
#[derive(Debug, Clone)]
pub struct PeriodicEval {
    /// Updates between evaluations (≥ 1); the first is after update `every`.
    pub every: usize,
    /// The split to evaluate on (usually validation).
    pub split: EvalSplit,
    /// The objective reported.
    pub objective: Objective,
}

/// By default the phases of one rollout and update in this many are timed with a device
/// synchronisation after each phase (the first one included, and the one after a timed update
/// that compiled); see [`Trainer::with_phase_sampling`].
pub const PHASE_SAMPLE_EVERY: usize = 8;

pub use crate::ppo::normalize::NormalizationStats;

/// How a rollout's steps evaluate the policy: on the host from a copy of the weights, with the
/// rollout's noise (`[steps, n, a]`, row-major), or through burn on the device, with the noise
/// uploaded there and scaled by σ (its samples' log-probabilities go to the rollout buffer at
/// once, before the first step).
enum Inference {
    Host(HostPolicy, HostStep, Vec<f32>),
    Device { scaled_noise: Tensor<3> },
}

/// Whether `TRADETUNE_REPLAY_POLICY` (`1`, `on` or `true`) asks every trainer of the process to
/// replay its rollouts' policy step ([`Trainer::set_replay_policy`]).
pub fn replay_policy_from_env() -> bool {
    std::env::var("TRADETUNE_REPLAY_POLICY")
        .map(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "1" | "on" | "true"))
        .unwrap_or(false)
}

/// PPO on one environment batch and one device.
pub struct Trainer<E: RolloutEnv> {
    cfg: PpoConfig,
    env: E,
    learner: Learner,
    /// Plain (no autodiff) device: env tensors, rollouts, buffer.
    device: Device,
    /// The same device with autodiff: the model and the update.
    train_device: Device,
    buffer: RolloutBuffer,
    obs_norm: Option<RunningMeanStd>,
    reward_norm: Option<RewardNormalizer>,
    noise_rng: StdRng,
    /// Current (normalised) observations, the policy's next input.
    obs: Option<Tensor<2>>,
    timesteps: usize,
    updates: usize,
    stop: Arc<AtomicBool>,
    budget: Option<MemoryBudget>,
    evaluation: Option<PeriodicEval>,
    /// Which updates time their phases (synchronised), and the split of the others.
    sampling: PhaseSampling,
    /// Round-trips of the last untimed update.
    untimed_syncs: Option<u64>,
    /// Whether a rollout step's forward pass runs on the host (the CPU device in f32; see
    /// [`crate::ppo::host_policy`]).
    host_inference: bool,
    /// Whether a rollout replays its policy step from a graph captured once a run
    /// ([`Trainer::set_replay_policy`]).
    replay_policy: bool,
    /// Why the run's captured policy step was not replayed from recorded launches,
    /// where it was not ([`Trainer::replay_fallback`]).
    replay_fallback: Option<String>,
    /// The policy step captured by the first replayed rollout, rewritten in place by each
    /// later one ([`policy_graph`]).
    policy_graph: Option<PolicyGraph>,
    /// The last rollout's weights in the compute dtype (where it launched its steps directly
    /// in f16) and its last observations cast to it: the values that bootstrap its advantages
    /// are computed from them, with no weight cast again. Cleared by every rollout and by
    /// [`Self::learner_mut`].
    bootstrap: Option<(ActorCritic, Option<Tensor<2>>)>,
    /// Replays before one fails, where a test asks for it ([`Self::fail_replay_after`]).
    fail_replay_after: Option<usize>,
    /// Whether a replay failed, which turned the replay off for the rest of the run.
    replay_failed: bool,
    /// Whether the device compiles kernels (every device but the CPU's).
    compiles: bool,
    /// The compile phase's accounting.
    compile_watch: CompileWatch,
    /// Launches of the timed update in progress, by part.
    tally: Tally,
    /// Launches and round-trips of the last timed (and untimed) update.
    dispatches: Option<DispatchProfile>,
}

impl<E: RolloutEnv> Trainer<E> {
    /// A trainer for `env` on `device` (plain or autodiff; both are derived from it). The
    /// network's sizes come from the env.
    pub fn new(cfg: PpoConfig, env: E, device: &Device) -> Result<Self, PpoError> {
        cfg.validate(env.n_envs())?;
        let device = device.clone().without_autodiff();
        if !device.supports_dtype(cfg.precision.compute_dtype()) {
            return Err(PpoError::config(
                "precision",
                cfg.precision,
                format!("the device {device:?} cannot compute in this dtype; use f32"),
            ));
        }
        let train_device = device.clone().autodiff();
        let host_inference =
            tradetune_device::is_cpu(&device) && cfg.precision.compute_dtype() == FloatDType::F32;
        let (n, d, a) = (env.n_envs(), env.obs_dim(), env.action_dim());
        let model = cfg.policy.init(d, a, cfg.seed, &train_device);
        let learner = Learner::new(model, &cfg, &train_device);
        Ok(Self {
            buffer: RolloutBuffer::new(cfg.n_steps, n, d, a, &device),
            obs_norm: cfg.normalize_obs.then(|| RunningMeanStd::new(d, &device)),
            reward_norm: cfg
                .normalize_reward
                .then(|| RewardNormalizer::new(n, cfg.gamma, cfg.clip_reward, &device)),
            noise_rng: crate::ppo::stream_rng(cfg.seed, crate::ppo::NOISE_STREAM, 0),
            obs: None,
            timesteps: 0,
            updates: 0,
            stop: Arc::new(AtomicBool::new(false)),
            budget: None,
            evaluation: None,
            sampling: PhaseSampling::new(PHASE_SAMPLE_EVERY),
            untimed_syncs: None,
            host_inference,
            replay_policy: replay_policy_from_env(),
            replay_fallback: None,
            policy_graph: None,
            bootstrap: None,
            fail_replay_after: None,
            replay_failed: false,
            compiles: !tradetune_device::is_cpu(&device),
            compile_watch: CompileWatch::default(),
            tally: Tally::default(),
            dispatches: None,
            cfg,
            env,
            learner,
            device,
            train_device,
        })
    }

    /// Checks the device's pool usage against `budget` after every update (where the device
    /// reports pool usage; see [`tradetune_device::memory`]).
    pub fn with_memory_budget(mut self, budget: MemoryBudget) -> Self {
        self.budget = Some(budget);
        self
    }

    /// Evaluates the policy on `eval.split` every `eval.every` updates, reporting
    /// [`TrainEvent::Evaluation`] and timing it as the `evaluation` phase. `every = 0` is refused,
    /// as is a split too short for the lookback ([`EvalSplit::steps`]), before anything trains.
    pub fn with_evaluation(mut self, eval: PeriodicEval) -> Result<Self, PpoError> {
        if eval.every == 0 {
            return Err(PpoError::config(
                "eval_every",
                0,
                "must be at least 1 (updates between evaluations)",
            ));
        }
        // Before training, not at the first evaluation: a split the lookback leaves too few
        // bars would otherwise throw away every update until then.
        eval.split
            .steps()
            .map_err(|e| PpoError::EvalSplit(Box::new(e)))?;
        self.evaluation = Some(eval);
        Ok(self)
    }

    /// Times the phases of one update in `every` (≥ 1; 1 = all), the run's first included (a
    /// resumed run's first too), and the update after a timed one that compiled ([`Trainer::retiming`]).
    ///
    /// Timing a phase needs the device to finish it: a synchronisation after each phase of
    /// each step, `3·n_steps + 2` per update, the latency the GPU would idle on. The other
    /// updates run without any synchronisation (one read per update, of its diagnostics with
    /// the rollout's episode statistics), and their wall time is split between the phases in
    /// the proportions last timed. On the CPU the split is as measured either way.
    pub fn with_phase_sampling(mut self, every: usize) -> Self {
        self.sampling.set_every(every);
        self
    }

    /// [`Trainer::with_phase_sampling`] on a trainer already built (a benchmark times its
    /// warm-up and one steady update, then none).
    pub fn set_phase_sampling(&mut self, every: usize) {
        self.sampling.set_every(every);
    }

    /// Whether the next update is timed because the last timed one compiled kernels (a GPU's
    /// first update): its split, taken while it compiled, would misstate the steady updates'
    /// (the phases that compiled most, the update's, swollen; the env's and the buffer's
    /// shrunk), so the first timed update that compiles nothing gives the split.
    pub fn retiming(&self) -> bool {
        self.sampling.retiming()
    }

    /// Whether the timed updates also time each kernel on the device (its timestamps), so the
    /// [`DispatchProfile`] says how long the device itself ran each part
    /// ([`tradetune_device::kernel_timing`]). For a benchmark: it costs a round trip to the
    /// device's server per launch, and it times every launch of the process.
    pub fn set_kernel_timing(&mut self, on: bool) {
        self.tally.time_kernels = on;
    }

    /// Whether the rollouts replay their policy step from a graph the first one captures (issue
    /// 33; `trainer/policy_graph.rs`): a replay a step instead of the forward passes' launches,
    /// each prepared by the host; the buffer's kernel writes the next observations into the
    /// captured input, and each rollout writes its weights and noise into the graph's buffers
    /// in place. The results are the direct step's up to rounding. Off by default until a card's figures say it pays;
    /// `TRADETUNE_REPLAY_POLICY=1` turns it on for every trainer of the process. Only on a GPU
    /// (the CPU's backend has no graphs).
    pub fn set_replay_policy(&mut self, on: bool) {
        self.replay_policy = on;
    }

    /// Whether the rollouts replay their policy step ([`Self::set_replay_policy`]; on a GPU).
    pub fn replays_policy(&self) -> bool {
        self.replay_policy && self.compiles && !self.host_inference
    }

    /// For tests of the fallback below: the replay after `replays` more fails, as a driver's
    /// would (counted from the graph's capture, across the run's rollouts).
    #[doc(hidden)]
    pub fn fail_replay_after(&mut self, replays: usize) {
        self.fail_replay_after = Some(replays);
    }

    /// Where the rollouts replay their policy step ([`Self::set_replay_policy`]) but the last
    /// one could not record its launches, why (the backend has no graphs, or burn's capture
    /// failed): its steps ran the forward passes again instead, correct and as slow as without.
    /// A replay that fails (the driver refuses it) turns the replay off for the rest of the
    /// run: that step and every later one launch the forward passes directly, and this says
    /// at which step and why.
    pub fn replay_fallback(&self) -> Option<&str> {
        self.replay_fallback.as_deref()
    }

    /// Whether a replay of the policy step failed during the run (the driver refused it), which
    /// turned the replay off for the rest of it ([`Self::replay_fallback`] says where and why).
    pub fn replay_failed(&self) -> bool {
        self.replay_failed
    }

    /// Launches and round-trips of the last timed update, by part, once one has run.
    pub fn dispatch_profile(&self) -> Option<DispatchProfile> {
        self.dispatches
    }

    /// A flag that, once set, ends [`Trainer::learn`] at the next step boundary.
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    /// The model being trained (on the autodiff device).
    pub fn model(&self) -> &ActorCritic {
        self.learner.model()
    }

    /// The learner (model, optimiser, loss scaler).
    pub fn learner(&self) -> &Learner {
        &self.learner
    }

    /// Mutable learner, for restoring a checkpoint.
    pub fn learner_mut(&mut self) -> &mut Learner {
        self.bootstrap = None;
        &mut self.learner
    }

    /// The autodiff device the model trains on.
    pub fn train_device(&self) -> &Device {
        &self.train_device
    }

    /// The environment.
    pub fn env(&self) -> &E {
        &self.env
    }

    /// The configuration in use.
    pub fn config(&self) -> &PpoConfig {
        &self.cfg
    }

    /// Samples collected so far.
    pub fn timesteps(&self) -> usize {
        self.timesteps
    }

    /// Updates done so far (a resumed run's counted on from its checkpoint's).
    pub fn updates(&self) -> usize {
        self.updates
    }

    /// Sets the sample counter (checkpoint resume), and the update counter with it (one
    /// update per rollout of `n_steps × n_envs` samples): update numbers, the evaluation
    /// cadence and the per-update random streams continue where the checkpoint left off.
    pub fn set_timesteps(&mut self, timesteps: usize) {
        self.timesteps = timesteps;
        self.updates = timesteps / (self.cfg.n_steps * self.env.n_envs()).max(1);
    }

    /// Normalisation statistics (host copies).
    pub fn normalization(&self) -> Result<NormalizationStats, PpoError> {
        Ok(NormalizationStats {
            obs: self.obs_norm.as_ref().map(|n| n.to_stats()).transpose()?,
            reward: self
                .reward_norm
                .as_ref()
                .map(|n| n.to_stats())
                .transpose()?,
        })
    }

    /// Restores normalisation statistics.
    pub fn set_normalization(&mut self, stats: &NormalizationStats) {
        if let (Some(n), Some(s)) = (&mut self.obs_norm, &stats.obs) {
            *n = RunningMeanStd::from_stats(s, &self.device);
        }
        if let (Some(n), Some(s)) = (&mut self.reward_norm, &stats.reward) {
            n.set_stats(s, &self.device);
        }
    }

    /// Actions `[B, A]` of the current policy for raw observations `obs` (normalised with the
    /// run's statistics, without updating them): the mean when `deterministic`, clipped to
    /// [-1, 1].
    pub fn act(&self, obs: Tensor<2>) -> Tensor<2> {
        let model = self.learner.model().valid();
        let obs = match &self.obs_norm {
            Some(n) => n.normalize(obs, self.cfg.clip_obs),
            None => obs,
        };
        let (mean, _) = model.forward(obs, self.cfg.precision.compute_dtype());
        mean.clamp(-1.0, 1.0)
    }

    fn observe(&mut self, raw: Tensor<2>) -> Tensor<2> {
        match &mut self.obs_norm {
            Some(n) => {
                n.update(raw.clone());
                n.normalize(raw, self.cfg.clip_obs)
            }
            None => raw,
        }
    }

    fn sync(&self, what: &'static str) -> Result<(), PpoError> {
        tradetune_device::readback::sync(&self.device, what)
            .map_err(|e| PpoError::read("device sync", e))
    }

    /// Trains until `total_timesteps` samples have been collected (rounded up to whole
    /// rollouts) or the stop flag is set.
    pub fn learn(
        &mut self,
        total_timesteps: usize,
        on_event: &mut dyn FnMut(TrainEvent),
    ) -> Result<TrainReport, PpoError> {
        let start = Instant::now();
        let start_steps = self.timesteps;
        let mut phases_total = PhaseTimes::default();
        let mut last_update = None;
        let mut last_episodes = None;
        let mut last_evaluation = None;
        let per_rollout = self.cfg.n_steps * self.env.n_envs();
        // Said of this call's updates (a trainer may learn again, after a warm-up say).
        self.compile_watch.not_apart = false;
        // The events' budget counts what their `timesteps` count: the samples trained on in
        // all, a resumed checkpoint's included.
        let budget = start_steps + total_timesteps;
        on_event(TrainEvent::Started {
            device: format!("{:?}", self.device),
            n_params: self.learner.model().num_params(),
            total_timesteps: budget,
        });
        if self.obs.is_none() {
            let raw = self.env.reset()?;
            self.obs = Some(self.observe(raw));
        }
        let mut stopped = false;
        while self.timesteps - start_steps < total_timesteps {
            if self.stop.load(Ordering::Relaxed) {
                stopped = true;
                break;
            }
            let timed = self.sampling.timed(self.updates);
            // Before the update's clock starts: after an update that compiled, `begin` waits
            // for the compilation log's late lines (20 ms or more), the compiling update's
            // time, which this update's wall (the steady one its overhead is measured against)
            // must not hold.
            self.compile_watch.begin();
            let cycle = Instant::now();
            let trips = round_trips();
            let mut phases = PhaseTimes::default();
            // This update's events, delivered by the compile accounting (late when it
            // compiled: see `accounting`).
            let mut events = Vec::new();
            let Some(log) = self.rollout(timed, &mut phases)? else {
                stopped = true;
                break;
            };
            self.timesteps += per_rollout;
            self.updates += 1;
            // As SB3 with `reset_num_timesteps=False`: the schedule runs over the samples
            // of the whole run, those before a resume included, so a run interrupted and
            // resumed with the rest of its budget follows the uninterrupted run's schedule.
            let progress = self.timesteps as f64 / (start_steps + total_timesteps) as f64;
            let lr = self.cfg.learning_rate_at(progress);
            let (stats, episodes) = self.train_on_buffer(lr, timed, &mut phases, log)?;
            let wall = cycle.elapsed().as_secs_f64();
            // An update whose kernels are timed one by one (a round trip each) does not give
            // the split: its launch-heavy phases are swollen by the timing.
            let measured = timed && !self.tally.time_kernels;
            phases = self.sampling.split(measured, phases, wall);
            let own = round_trips().saturating_sub(trips);
            if timed {
                let minibatches = stats.steps + stats.skipped_steps;
                // The last untimed update's round-trips where one has run, else this one's
                // (the latest timed one: not the first, which may have captured graphs).
                let mut profile = self.tally.profile(self.cfg.n_steps, minibatches);
                profile.syncs_per_update = Some(self.untimed_syncs.unwrap_or(own));
                self.dispatches = Some(profile);
            } else {
                self.untimed_syncs = Some(own);
                if let Some(d) = &mut self.dispatches {
                    d.syncs_per_update = Some(own);
                }
            }
            self.check_memory()?;
            if let Some(summary) = EpisodeSummary::of(&episodes) {
                last_episodes = Some(summary);
                events.push(TrainEvent::Episodes(summary));
            }
            events.push(TrainEvent::Update {
                update: self.updates,
                stats,
            });
            if let Some(summary) = self.periodic_evaluation(&mut phases)? {
                events.push(TrainEvent::Evaluation {
                    update: self.updates,
                    timesteps: self.timesteps,
                    summary: summary.clone(),
                });
                last_evaluation = Some(summary);
            }
            events.push(TrainEvent::Progress {
                update: self.updates,
                timesteps: self.timesteps,
                total_timesteps: budget,
                samples_per_second: (self.timesteps - start_steps) as f64
                    / start.elapsed().as_secs_f64().max(1e-9),
                phases,
            });
            let compiled = self.compile_watch.compiled_now(self.compiles);
            self.sampling.compiled(timed, compiled.is_some());
            self.compile_watch
                .end(events, wall, &phases, compiled, &mut |e| {
                    if let TrainEvent::Progress { phases, .. } = &e {
                        phases_total.add(phases);
                    }
                    on_event(e)
                });
            last_update = Some(stats);
        }
        self.compile_watch.flush(&mut |e| {
            if let TrainEvent::Progress { phases, .. } = &e {
                phases_total.add(phases);
            }
            on_event(e)
        });
        on_event(TrainEvent::Finished { stopped });
        let elapsed = start.elapsed().as_secs_f64();
        let samples = (self.timesteps - start_steps) as f64;
        Ok(TrainReport {
            applied: self.cfg.clone(),
            device: format!("{:?}", self.device),
            timesteps: self.timesteps,
            updates: self.updates,
            elapsed_s: elapsed,
            samples_per_second: samples / elapsed.max(1e-9),
            steady_samples_per_second: samples / (elapsed - phases_total.compile).max(1e-9),
            kernels: self.compile_watch.compiled,
            compile_not_apart: self.compile_watch.not_apart,
            dispatches: self.dispatches,
            phases: phases_total,
            last_update,
            last_episodes,
            stopped,
            last_evaluation,
        })
    }

    fn check_memory(&self) -> Result<(), PpoError> {
        let Some(budget) = &self.budget else {
            return Ok(());
        };
        // The pool is the device's, shared by every run on it in this process.
        if let Some(usage) = self.device.memory_pool_usage() {
            budget
                .check_in_use(usage.bytes_reserved, self.updates, "device memory pool")
                .map_err(PpoError::Memory)?;
        }
        Ok(())
    }
}

/// [`Trainer::evaluate`], as a function.
pub fn evaluate_trainer<E: RolloutEnv>(
    trainer: &Trainer<E>,
    split: &EvalSplit,
    objective: Objective,
) -> Result<EvalReport, EvalError> {
    trainer.evaluate(split, objective)
}
