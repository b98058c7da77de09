//! One rollout and the update on its buffer: the two halves of [`Trainer::learn`]'s loop, with
//! their phase timing and launch counting.

use std::cell::OnceCell;
use std::sync::atomic::Ordering;
use std::time::Instant;

use burn::module::Module;
use burn::tensor::{Tensor, TensorData};
use rand_distr::{Distribution, StandardNormal};

use super::PolicyGraph;
use super::{Inference, Trainer};
use crate::ppo::accounting::Part;
use crate::ppo::buffer::StepRows;
use crate::ppo::error::PpoError;
use crate::ppo::events::PhaseTimes;
use crate::ppo::gae::{Spread, compute_gae_device};
use crate::ppo::host_policy::{HostPolicy, HostStep};
use crate::ppo::model::gaussian_log_prob_of_noise;
use crate::ppo::rollout_env::{EpisodeLog, RolloutEnv};
use crate::ppo::update::{UpdateBatch, UpdateStats};
use tradetune_env::EpisodeStats;

impl<E: RolloutEnv> Trainer<E> {
    /// Milliseconds per step of this trainer's rollouts, nothing trained: `warm` rollouts
    /// (compilation, autotune, the first uploads), then `timed` ones with one synchronisation
    /// after them. What `env.placement = "auto"` compares: the trainer's own rollout, its policy
    /// step replayed where it replays it, the buffer's rows written, the env stepped. Each
    /// rollout is `n_steps` long (a replayed one captures its step once a run, in the first).
    pub fn time_rollout_steps(&mut self, warm: usize, timed: usize) -> Result<f64, PpoError> {
        if self.obs.is_none() {
            let raw = self.env.reset()?;
            self.obs = Some(self.observe(raw));
        }
        let mut start = Instant::now();
        for i in 0..warm + timed.max(1) {
            if i == warm {
                self.sync("sync: rollout timing")?;
                start = Instant::now();
            }
            if self.rollout(false, &mut PhaseTimes::default())?.is_none() {
                return Err(PpoError::Stopped {
                    what: "its rollouts were timed",
                });
            }
        }
        self.sync("sync: rollout timing")?;
        // Nothing is trained on these rollouts: their snapshot is not kept.
        self.bootstrap = None;
        let steps = timed.max(1) * self.cfg.n_steps;
        Ok(start.elapsed().as_secs_f64() * 1e3 / steps as f64)
    }

    /// Collects `n_steps` steps of every env into the buffer: the episodes that ended during
    /// it, or `None` when stopped mid-way. Nothing is read back here (a host env reads its
    /// actions, necessarily); `timed` synchronises after each phase of each step to time it.
    pub(super) fn rollout(
        &mut self,
        timed: bool,
        phases: &mut PhaseTimes,
    ) -> Result<Option<EpisodeLog>, PpoError> {
        // A snapshot without autodiff: inference records no graph.
        let model = self.learner.model().valid();
        let dtype = self.cfg.precision.compute_dtype();
        let (n, a) = (self.env.n_envs(), self.env.action_dim());
        let log_std = model.log_std();
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
        // On the device, the whole rollout's sampling work that does not depend on the
        // observations runs here, once: the noise scaled by σ, and the log-probabilities of the
        // samples, which are those of their noise (z = (x − μ)/σ = ε). A step then adds its
        // scaled noise to the mean and clips: one elementwise kernel after the forward pass.
        self.buffer.clear();
        self.bootstrap = None;
        let mut inference = if self.host_inference {
            Inference::Host(HostPolicy::of(&model)?, HostStep::default(), noise)
        } else {
            let noise = Tensor::<3>::from_data(TensorData::new(noise, [steps, n, a]), &self.device);
            // All of the rollout's log-probabilities into the buffer at once, not a row a step.
            self.buffer
                .set_log_probs(gaussian_log_prob_of_noise(noise.clone(), log_std.clone()));
            let std = log_std.exp().reshape([1, 1, a]);
            Inference::Device {
                scaled_noise: noise.mul(std),
            }
        };
        self.env.begin_rollout(steps);
        // The next step's observations in the compute dtype, where the buffer's kernel wrote
        // them in its launch (a cubecl device); else a step casts them itself.
        let mut next_x: Option<Tensor<2>> = None;
        // Only on a GPU: the CPU's backend has no graphs (a replay would run the step again).
        let mut replay = self.replays_policy();
        // The learner's captured policy step, made this rollout's (its weights and noise
        // written in place); captured at the first step where there is none yet. A rollout
        // that does not replay (a benchmark's kernel-timed one) leaves it for the next.
        let mut graph = if replay {
            self.policy_graph.take()
        } else {
            None
        };
        if let (Some(g), Inference::Device { scaled_noise }) = (&mut graph, &inference)
            && let Err(e) = g.begin(&model, scaled_noise.clone())
        {
            graph = None;
            self.replay_refused(0, &e);
            replay = false;
        }
        // The weights in the compute dtype and K-major once per rollout, not once per step,
        // where a step is launched directly (a replayed step's graph keeps the learner's
        // layout: the two may run different matmul routines, equal to rounding).
        let direct_model = OnceCell::new();
        // The direct step: both networks' forward passes launched, the noise added, clipped.
        let direct = |x: Tensor<2>, noise: Tensor<2>| {
            let model = direct_model.get_or_init(|| model.clone().in_dtype(dtype).k_major());
            let mean = model.action_mean(x.clone(), dtype);
            let actions = mean.add(noise);
            let clipped = actions.clone().clamp(-1.0, 1.0);
            let value = model.value(x, dtype);
            (actions, None, value, clipped)
        };
        if timed {
            self.tally.begin();
        }
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
                        Some(Tensor::<1>::from_data(
                            TensorData::new(out.log_probs.clone(), [n]),
                            dev,
                        )),
                        Tensor::<1>::from_data(TensorData::new(out.values.clone(), [n]), dev),
                        Tensor::<2>::from_data(TensorData::new(clipped, [n, a]), dev),
                    )
                }
                Inference::Device { scaled_noise } => {
                    // The observations in the compute dtype once for both networks (the
                    // networks' own casts are then no-ops).
                    let x = next_x.take().unwrap_or_else(|| obs.clone().cast(dtype));
                    // This step's row of the noise, for a step launched directly (a replayed
                    // step reads it inside its graph).
                    let noise = || -> Tensor<2> {
                        scaled_noise
                            .clone()
                            .slice([step_index..step_index + 1, 0..n, 0..a])
                            .reshape([n, a])
                    };
                    if replay {
                        let stepped = match &mut graph {
                            Some(g) => g.step(x).map_err(|e| (e, g.input())),
                            None => match PolicyGraph::capture(
                                &model,
                                x.clone(),
                                scaled_noise.clone(),
                                dtype,
                                &self.device,
                            ) {
                                Ok(g) => {
                                    let g = graph.insert(g.fail_after(self.fail_replay_after));
                                    g.step(x).map_err(|e| (e, g.input()))
                                }
                                Err(e) => Err((e, x)),
                            },
                        };
                        match stepped {
                            Ok((actions, clipped, value)) => (actions, None, value, clipped),
                            // A capture or replay the driver refused: this step and the rest of
                            // the run launch the forward passes directly, and say why.
                            Err((e, x)) => {
                                graph = None;
                                replay = false;
                                self.replay_refused(step_index, &e);
                                direct(x, noise())
                            }
                        }
                    } else {
                        direct(x, noise())
                    }
                }
            };
            if timed {
                self.sync("sync: inference")?;
                phases.inference += t.elapsed().as_secs_f64();
                self.tally.charge(Part::Inference);
            }

            let t = Instant::now();
            let step = self.env.step(clipped)?;
            if timed {
                self.sync("sync: env step")?;
                phases.env_step += t.elapsed().as_secs_f64();
                self.tally.charge(Part::EnvStep);
            }

            let t = Instant::now();
            let reward = match &mut self.reward_norm {
                Some(rn) => rn.normalize(step.reward, step.done.clone()),
                None => step.reward,
            };
            let next = self.observe(step.obs);
            let rows = StepRows {
                obs,
                actions,
                log_probs: log_prob,
                values: value,
                rewards: reward,
                dones: step.done,
            };
            let device_inference = matches!(inference, Inference::Device { .. });
            // Where the rollout replays its policy step, the buffer's kernel writes the next
            // observations straight into the captured graph's input (but for the last step's:
            // the graph keeps its input between rollouts, and the next one writes its first).
            let into = match &mut graph {
                Some(g) if self.buffer.writes_next() && step_index + 1 < steps => {
                    Some(g.lend_input()?)
                }
                _ => None,
            };
            next_x = self
                .buffer
                .push(rows, device_inference.then_some((&next, dtype)), into);
            self.obs = Some(next);
            if timed {
                self.sync("sync: buffer")?;
                phases.buffer += t.elapsed().as_secs_f64();
                self.tally.charge(Part::Buffer);
            }
        }
        if let Some(g) = graph {
            self.replay_fallback = g.fallback().map(str::to_owned);
            self.policy_graph = Some(g);
        }
        // In f16, the advantage stage's values of the last observations from the rollout's
        // own cast weights (the learner's model would cast each again, a kernel each).
        if dtype != burn::tensor::FloatDType::F32 {
            self.bootstrap = direct_model.into_inner().map(|m| (m, next_x.take()));
        }
        Ok(Some(self.env.take_episodes()))
    }

    /// Turns the policy step's replay off for the rest of the run after a capture, a replay or
    /// a rollout's rewrite of the graph failed at step `step_index`, saying why.
    fn replay_refused(&mut self, step_index: usize, e: &PpoError) {
        self.policy_graph = None;
        self.replay_policy = false;
        self.replay_failed = true;
        self.replay_fallback = Some(format!(
            "the replay of the captured policy step failed at step {step_index} of a rollout \
             ({e}); the rollouts launch it directly from there on"
        ));
    }

    /// GAE on the device, then the update on the autodiff device; the rollout's diagnostics
    /// and episode statistics are read back with the update's, in one read where the update
    /// makes no host decision. Returns the update's statistics and the rollout's episodes.
    pub(super) fn train_on_buffer(
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
        let last_values = match self.bootstrap.take() {
            Some((model, x)) => model.value(x.unwrap_or(last_obs), dtype),
            None => self.learner.model().valid().value(last_obs, dtype),
        };
        let (r, v, d) = self.buffer.rewards_values_dones();
        let (adv, returns, spread) =
            advantages(r, v, d, last_values, self.cfg.gamma, self.cfg.gae_lambda);
        let flat = self.buffer.flat();
        let len = flat.values.dims()[0];
        let adv = adv.reshape([len]);
        let returns = returns.reshape([len]);
        // The advantages' spread (non-finite ones, and the variances of SB3's
        // `explained_variance`), then the episode log when it is on the device.
        let spread_len = spread.dims()[0];
        let mut ride = vec![spread];
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
            self.tally.charge(Part::Advantages);
        }
        let t = Instant::now();
        let update = self.updates;
        let mut explained_variance = f32::NAN;
        let mut check = |extra: &[f32]| -> Result<(), PpoError> {
            let spread = extra
                .get(..spread_len)
                .and_then(Spread::of)
                .ok_or_else(|| PpoError::read("rollout values", "wrong length"))?;
            let log = &extra[spread_len..];
            if spread.non_finite > 0.0 {
                return Err(PpoError::Diverged {
                    update,
                    what: format!("{} of {len} advantages are not finite", spread.non_finite),
                });
            }
            explained_variance = spread.explained_variance();
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
            self.tally.charge(Part::Update);
        }
        Ok((stats, episodes))
    }
}

/// The rollout's advantages and returns (`[T, N]`, on its device, nothing read back), and their
/// [`Spread`]'s groups (`[SPREAD × groups]`): one kernel where TradeTune's kernels run
/// (`gae_kernel`, a group per env), else the blocked tensor program and burn's `is_finite`
/// and means (one group).
fn advantages(
    rewards: Tensor<2>,
    values: Tensor<2>,
    dones: Tensor<2>,
    last_values: Tensor<1>,
    gamma: f32,
    gae_lambda: f32,
) -> (Tensor<2>, Tensor<2>, Tensor<1>) {
    #[cfg(feature = "wgpu")]
    if tradetune_device::runs_cubecl_kernels(&rewards) {
        let (adv, returns, spread) =
            crate::ppo::gae_kernel::gae(rewards, values, dones, last_values, gamma, gae_lambda);
        let len: usize = spread.dims().iter().product();
        return (adv, returns, spread.reshape([len]));
    }
    let (adv, returns) = compute_gae_device(rewards, values, dones, last_values, gamma, gae_lambda);
    let len: usize = adv.dims().iter().product();
    let bad = adv.clone().is_finite().bool_not().float().sum();
    let mean_var = |x: Tensor<2>| {
        let x = x.reshape([len]);
        let m = x.clone().mean();
        let var = x.sub(m.clone().expand([len])).square().mean();
        [m, var]
    };
    let [mean_r, var_r] = mean_var(returns.clone());
    let [mean_a, var_a] = mean_var(adv.clone());
    let spread = Tensor::cat(vec![bad, mean_r, var_r, mean_a, var_a], 0);
    (adv, returns, spread)
}

#[cfg(test)]
mod tests {
    use burn::tensor::Device;

    use super::*;
    use crate::ppo::gae::{compute_gae, explained_variance};
    use crate::ppo::sanity_env::TargetEnv;
    use crate::ppo::{ActorCriticConfig, HostEnv, NetArch, PpoConfig};

    /// A stop raised before the rollouts are timed says the trainer was stopped, and blames
    /// no field (it read `ppo.n_steps = 8: …`, a valid value).
    #[test]
    fn a_stopped_timing_says_it_was_stopped_without_naming_a_field() {
        let device = Device::flex();
        let cfg = PpoConfig::new()
            .with_n_steps(8)
            .with_batch_size(8)
            .with_policy(
                ActorCriticConfig::new()
                    .with_net_arch(NetArch::new().with_pi(vec![4]).with_vf(vec![4])),
            );
        let env = HostEnv::new(TargetEnv::new(2, 3, 1), &device);
        let mut trainer = Trainer::new(cfg, env, &device).unwrap();
        trainer.stop_flag().store(true, Ordering::Relaxed);
        let err = trainer.time_rollout_steps(0, 1).unwrap_err();
        assert!(matches!(err, PpoError::Stopped { .. }), "{err:?}");
        let text = err.to_string();
        assert!(text.contains("stopped"), "{text}");
        assert!(
            !text.contains("n_steps") && !text.contains("ppo."),
            "{text}"
        );
    }

    /// What the update reads back of the advantage stage pools to the explained variance of
    /// the rollout's values for its returns and counts the advantages that are not finite: on
    /// the CPU (the tensor program, one group) and where TradeTune's kernels run (lavapipe in
    /// CI: the GAE kernel, a group per env).
    #[test]
    fn the_advantage_stage_gives_the_explained_variance_on_either_path() {
        let test = "the_advantage_stage_gives_the_explained_variance_on_either_path";
        let (t, n) = (37, 3);
        let r: Vec<f32> = (0..t * n)
            .map(|i| ((i * 37) % 11) as f32 * 0.1 - 0.5)
            .collect();
        let v: Vec<f32> = (0..t * n)
            .map(|i| ((i * 13) % 7) as f32 * 0.3 - 1.0)
            .collect();
        let d: Vec<f32> = (0..t * n)
            .map(|i| if i % 17 == 5 { 1.0 } else { 0.0 })
            .collect();
        let last = [0.2f32, -0.4, 1.0];
        let (_, ret) = compute_gae(&r, &v, &d, &last, 0.99, 0.95);
        let want = explained_variance(&v, &ret);
        assert!(want.is_finite() && want != 0.0);
        #[allow(unused_mut)]
        let mut devices = vec![Device::flex()];
        #[cfg(feature = "wgpu")]
        devices.extend(tradetune_device::wgpu_for_test(test));
        let _ = test;
        for device in devices {
            let t2 =
                |x: &[f32]| Tensor::<2>::from_data(TensorData::new(x.to_vec(), [t, n]), &device);
            let stage = |r: &[f32]| {
                let last = Tensor::<1>::from_data(TensorData::new(last.to_vec(), [n]), &device);
                let (_, _, spread) = advantages(t2(r), t2(&v), t2(&d), last, 0.99, 0.95);
                let host: Vec<f32> = spread.try_into_vec_as().unwrap();
                Spread::of(&host).unwrap_or_else(|| panic!("{device:?}: {host:?}"))
            };
            let spread = stage(&r);
            assert_eq!(spread.non_finite, 0.0, "{device:?}");
            let got = spread.explained_variance();
            assert!((got - want).abs() < 1e-4, "{device:?}: {got} vs {want}");
            // A reward that is not a number spoils its env's advantages from its step back.
            let mut bad = r.clone();
            bad[10 * n + 1] = f32::NAN;
            let spread = stage(&bad);
            assert!(spread.non_finite > 0.0, "{device:?}: {spread:?}");
            assert!(
                spread.explained_variance().is_nan(),
                "{device:?}: {spread:?}"
            );
        }
    }
}
