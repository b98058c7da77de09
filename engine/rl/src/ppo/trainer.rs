//! The training loop: rollout (no autodiff graph) → GAE → update, until a timestep budget is
//! spent or the stop flag is raised, reporting [`TrainEvent`]s through a callback.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use burn::module::Module;
use burn::tensor::{Device, FloatDType, Tensor, TensorData};
use rand::rngs::StdRng;
use rand_distr::{Distribution, StandardNormal};
use serde::{Deserialize, Serialize};

use crate::eval::{EvalError, EvalReport};
use crate::eval::{EvalSplit, EvalSummary, Objective};
use crate::ppo::buffer::RolloutBuffer;
use crate::ppo::config::PpoConfig;
use crate::ppo::error::PpoError;
use crate::ppo::events::{EpisodeSummary, PhaseTimes, TrainEvent};
use crate::ppo::gae::compute_gae_device;
use crate::ppo::host_policy::{HostPolicy, HostStep};
use crate::ppo::model::{ActorCritic, gaussian_log_prob};
use crate::ppo::normalize::{RewardNormalizer, RunningMeanStd};
use crate::ppo::policy::evaluate_policy;
use crate::ppo::rollout_env::{EpisodeLog, RolloutEnv};
use crate::ppo::update::{Learner, UpdateBatch, UpdateStats};
use tradetune_device::memory::MemoryBudget;
use tradetune_env::EpisodeStats;

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
    /// Wall time per phase over the run.
    pub phases: PhaseTimes,
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
/// synchronisation after each phase (the first one included); see [`Trainer::with_phase_sampling`].
pub const PHASE_SAMPLE_EVERY: usize = 8;

pub use crate::ppo::normalize::NormalizationStats;

/// How a rollout's steps evaluate the policy: on the host from a copy of the weights, with the
/// rollout's noise (`[steps, n, a]`, row-major), or through burn on the device, with the noise
/// uploaded there.
enum Inference {
    Host(HostPolicy, HostStep, Vec<f32>),
    Device(Tensor<3>),
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
    /// Updates between timed (synchronised) phase samples.
    phase_every: usize,
    /// The phase split of the last timed update, spread over the untimed ones.
    last_timed: Option<PhaseTimes>,
    /// Whether a rollout step's forward pass runs on the host (the CPU device in f32; see
    /// [`crate::ppo::host_policy`]).
    host_inference: bool,
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
            device == Device::flex() && cfg.precision.compute_dtype() == FloatDType::F32;
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
            phase_every: PHASE_SAMPLE_EVERY,
            last_timed: None,
            host_inference,
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
    /// [`TrainEvent::Evaluation`] and timing it as the `evaluation` phase. `every = 0` is refused.
    pub fn with_evaluation(mut self, eval: PeriodicEval) -> Result<Self, PpoError> {
        if eval.every == 0 {
            return Err(PpoError::config(
                "eval_every",
                0,
                "must be at least 1 (updates between evaluations)",
            ));
        }
        self.evaluation = Some(eval);
        Ok(self)
    }

    /// Times the phases of one update in `every` (≥ 1; 1 = all), the first included.
    ///
    /// Timing a phase needs the device to finish it: a synchronisation after each phase of
    /// each step, `3·n_steps + 2` per update, the latency the GPU would idle on. The other
    /// updates run without any synchronisation (one read per update, of its diagnostics with
    /// the rollout's episode statistics), and their wall time is split between the phases in
    /// the proportions last timed. On the CPU the split is as measured either way.
    pub fn with_phase_sampling(mut self, every: usize) -> Self {
        self.phase_every = every.max(1);
        self
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

    /// [`crate::eval::evaluate`] of the current policy and normalisation statistics.
    pub fn evaluate(
        &self,
        split: &EvalSplit,
        objective: Objective,
    ) -> Result<EvalReport, EvalError> {
        let norm = self.normalization().map_err(|e| EvalError::Policy {
            split: split.name.clone(),
            reason: e.to_string(),
        })?;
        evaluate_policy(self.model(), &norm, &self.cfg, split, objective)
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
        on_event(TrainEvent::Started {
            device: format!("{:?}", self.device),
            n_params: self.learner.model().num_params(),
            total_timesteps,
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
            let timed = self.updates.is_multiple_of(self.phase_every);
            let cycle = Instant::now();
            let mut phases = PhaseTimes::default();
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
            if timed {
                self.last_timed = Some(phases);
            } else if let Some(split) = &self.last_timed {
                phases = split.scaled_to(cycle.elapsed().as_secs_f64());
            }
            self.check_memory()?;
            if let Some(summary) = EpisodeSummary::of(&episodes) {
                last_episodes = Some(summary);
                on_event(TrainEvent::Episodes(summary));
            }
            on_event(TrainEvent::Update {
                update: self.updates,
                stats,
            });
            if let Some(summary) = self.periodic_evaluation(&mut phases)? {
                on_event(TrainEvent::Evaluation {
                    update: self.updates,
                    timesteps: self.timesteps,
                    summary: summary.clone(),
                });
                last_evaluation = Some(summary);
            }
            phases_total.add(&phases);
            on_event(TrainEvent::Progress {
                update: self.updates,
                timesteps: self.timesteps,
                total_timesteps,
                samples_per_second: (self.timesteps - start_steps) as f64
                    / start.elapsed().as_secs_f64().max(1e-9),
                phases,
            });
            last_update = Some(stats);
        }
        on_event(TrainEvent::Finished { stopped });
        let elapsed = start.elapsed().as_secs_f64();
        Ok(TrainReport {
            applied: self.cfg.clone(),
            device: format!("{:?}", self.device),
            timesteps: self.timesteps,
            updates: self.updates,
            elapsed_s: elapsed,
            samples_per_second: (self.timesteps - start_steps) as f64 / elapsed.max(1e-9),
            phases: phases_total,
            last_update,
            last_episodes,
            stopped,
            last_evaluation,
        })
    }

    /// The periodic evaluation due after this update, if any, timed as the evaluation phase.
    fn periodic_evaluation(
        &self,
        phases: &mut PhaseTimes,
    ) -> Result<Option<EvalSummary>, PpoError> {
        let Some(pe) = &self.evaluation else {
            return Ok(None);
        };
        if !self.updates.is_multiple_of(pe.every) {
            return Ok(None);
        }
        let t = Instant::now();
        let report = self
            .evaluate(&pe.split, pe.objective)
            .map_err(|e| PpoError::Evaluation {
                update: self.updates,
                source: Box::new(e),
            })?;
        self.sync("sync: evaluation")?;
        phases.evaluation += t.elapsed().as_secs_f64();
        Ok(Some(report.summary()))
    }

    /// Collects `n_steps` steps of every env into the buffer: the episodes that ended during
    /// it, or `None` when stopped mid-way. Nothing is read back here (a host env reads its
    /// actions, necessarily); `timed` synchronises after each phase of each step to time it.
    fn rollout(
        &mut self,
        timed: bool,
        phases: &mut PhaseTimes,
    ) -> Result<Option<EpisodeLog>, PpoError> {
        // A snapshot without autodiff: inference records no graph.
        let model = self.learner.model().valid();
        let dtype = self.cfg.precision.compute_dtype();
        let (n, a) = (self.env.n_envs(), self.env.action_dim());
        let log_std = model.log_std();
        let std = log_std.clone().exp().unsqueeze_dim::<2>(0);
        // This rollout's noise: keyed by the number of updates before it (see `stream_rng`).
        // Noise is drawn on the host from the run's seed (the device RNG is global and shared
        // with concurrent trials, so it would make runs irreproducible), all of the rollout's
        // at once, in step order, and uploaded once: no upload per step.
        self.noise_rng =
            crate::ppo::stream_rng(self.cfg.seed, crate::ppo::NOISE_STREAM, self.updates as u64);
        let steps = self.cfg.n_steps;
        let noise: Vec<f32> = (0..steps * n * a)
            .map(|_| StandardNormal.sample(&mut self.noise_rng))
            .collect();
        // On the CPU device in f32 each step's forward pass runs on the host, from a copy of
        // the weights (the model does not change during a rollout).
        let mut inference = if self.host_inference {
            Inference::Host(HostPolicy::of(&model)?, HostStep::default(), noise)
        } else {
            Inference::Device(Tensor::<3>::from_data(
                TensorData::new(noise, [steps, n, a]),
                &self.device,
            ))
        };
        self.buffer.clear();
        self.env.begin_rollout(steps);
        for step_index in 0..steps {
            if self.stop.load(Ordering::Relaxed) {
                return Ok(None);
            }
            let obs = self
                .obs
                .take()
                .ok_or_else(|| PpoError::config("trainer", "no observation", "reset first"))?;
            let t = Instant::now();
            let (actions, log_prob, value, clipped) = match &mut inference {
                Inference::Host(policy, out, noise) => {
                    let x: Vec<f32> = obs
                        .clone()
                        .try_into_vec_as()
                        .map_err(|e| PpoError::read("observations", e))?;
                    let eps = &noise[step_index * n * a..(step_index + 1) * n * a];
                    policy.step(&x, eps, n, out);
                    let clipped: Vec<f32> =
                        out.actions.iter().map(|v| v.clamp(-1.0, 1.0)).collect();
                    let dev = &self.device;
                    (
                        Tensor::<2>::from_data(TensorData::new(out.actions.clone(), [n, a]), dev),
                        Tensor::<1>::from_data(TensorData::new(out.log_probs.clone(), [n]), dev),
                        Tensor::<1>::from_data(TensorData::new(out.values.clone(), [n]), dev),
                        Tensor::<2>::from_data(TensorData::new(clipped, [n, a]), dev),
                    )
                }
                Inference::Device(noise) => {
                    let (mean, value) = model.forward(obs.clone(), dtype);
                    let eps: Tensor<2> = noise
                        .clone()
                        .slice([step_index..step_index + 1, 0..n, 0..a])
                        .reshape([n, a]);
                    let actions = mean.clone().add(eps.mul(std.clone()));
                    let log_prob = gaussian_log_prob(mean, log_std.clone(), actions.clone());
                    let clipped = actions.clone().clamp(-1.0, 1.0);
                    (actions, log_prob, value, clipped)
                }
            };
            if timed {
                self.sync("sync: inference")?;
                phases.inference += t.elapsed().as_secs_f64();
            }

            let t = Instant::now();
            let step = self.env.step(clipped)?;
            if timed {
                self.sync("sync: env step")?;
                phases.env_step += t.elapsed().as_secs_f64();
            }

            let t = Instant::now();
            let reward = match &mut self.reward_norm {
                Some(rn) => rn.normalize(step.reward, step.done.clone()),
                None => step.reward,
            };
            self.buffer
                .push(obs, actions, log_prob, value, reward, step.done);
            let next = self.observe(step.obs);
            self.obs = Some(next);
            if timed {
                self.sync("sync: buffer")?;
                phases.buffer += t.elapsed().as_secs_f64();
            }
        }
        Ok(Some(self.env.take_episodes()))
    }

    /// GAE on the device, then the update on the autodiff device; the rollout's diagnostics
    /// and episode statistics are read back with the update's, in one read where the update
    /// makes no host decision. Returns the update's statistics and the rollout's episodes.
    fn train_on_buffer(
        &mut self,
        lr: f64,
        timed: bool,
        phases: &mut PhaseTimes,
        log: EpisodeLog,
    ) -> Result<(UpdateStats, Vec<EpisodeStats>), PpoError> {
        let t = Instant::now();
        let dtype = self.cfg.precision.compute_dtype();
        let last_obs = self
            .obs
            .clone()
            .ok_or_else(|| PpoError::config("trainer", "no observation", "reset first"))?;
        let last_values = self.learner.model().valid().value(last_obs, dtype);
        let (r, v, d) = self.buffer.rewards_values_dones();
        let (adv, returns) =
            compute_gae_device(r, v, d, last_values, self.cfg.gamma, self.cfg.gae_lambda);
        let flat = self.buffer.flat();
        let len = flat.values.dims()[0];
        let adv = adv.reshape([len]);
        let returns = returns.reshape([len]);
        // [non-finite advantages, Var(returns), Var(returns − values)] (population variances,
        // as SB3's `explained_variance`), then the episode log when it is on the device.
        let var = |x: Tensor<1>| {
            let m = x.clone().mean();
            x.sub(m.expand([len])).square().mean()
        };
        let mut ride = vec![
            adv.clone().is_finite().bool_not().float().sum(),
            var(returns.clone()),
            var(returns.clone().sub(flat.values.clone())),
        ];
        let (mut episodes, device_log) = match log {
            EpisodeLog::Host(v) => (v, None),
            EpisodeLog::Device(d) => {
                if !d.is_empty() {
                    ride.push(d.values.clone());
                }
                (Vec::new(), Some(d))
            }
        };
        let td = &self.train_device;
        let batch = UpdateBatch {
            obs: flat.obs.to_device(td),
            actions: flat.actions.to_device(td),
            log_probs: flat.log_probs.to_device(td),
            values: flat.values.to_device(td),
            advantages: adv.to_device(td),
            returns: returns.to_device(td),
        };
        if timed {
            self.sync("sync: advantages")?;
            phases.advantages += t.elapsed().as_secs_f64();
        }
        let t = Instant::now();
        let update = self.updates;
        let mut explained_variance = f32::NAN;
        let mut check = |extra: &[f32]| -> Result<(), PpoError> {
            let [bad, var_y, var_res, ref log @ ..] = extra[..] else {
                return Err(PpoError::read("rollout values", "wrong length"));
            };
            if bad > 0.0 {
                return Err(PpoError::Diverged {
                    update,
                    what: format!("{bad} of {len} advantages are not finite"),
                });
            }
            if var_y > 0.0 {
                explained_variance = 1.0 - var_res / var_y;
            }
            if let Some(d) = &device_log {
                episodes = d
                    .decode(log)
                    .map_err(|e| PpoError::read("episode log", e.to_string()))?;
            }
            Ok(())
        };
        let (mut stats, _) =
            self.learner
                .update(&batch, lr, update, Tensor::cat(ride, 0), &mut check)?;
        stats.explained_variance = explained_variance;
        if timed {
            self.sync("sync: update")?;
            phases.update += t.elapsed().as_secs_f64();
        }
        Ok((stats, episodes))
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
