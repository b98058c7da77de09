//! A trial's training loop: the trainer's events turned into the trial's progress, learning
//! curve, intermediate values (hold-out) and memory checks, and the work done over its runs
//! (one, or one per fold) recorded with the trial.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use super::PpoTrialConfig;
use super::placement::AutoPlacement;
use crate::runner::{Reporter, TrialError, TrialInput};
use tradetune_rl::ppo::{PhaseTimes, RolloutEnv, TrainEvent, TrainReport, Trainer};
use tradetune_telemetry::{GpuWork, PhaseSplit};

/// What a trial has trained so far, over its folds.
#[derive(Default)]
pub(super) struct Work {
    pub(super) samples: u64,
    pub(super) updates: u64,
    pub(super) phases: PhaseSplit,
    /// Of the compile phase, the seconds `auto` spent measuring before the runs trained.
    pub(super) placement_s: f64,
    /// What the GPU runtime compiled and launched, on a GPU.
    gpu: Option<GpuWork>,
    /// The GPU cache's failed reads and writes in this process before the trial began: those
    /// after are the ones that may lose what it autotunes.
    cache_failures_before: u64,
}

impl Work {
    /// A trial's work, begun before its first run is built (`auto`'s measuring autotunes).
    pub(super) fn begin() -> Self {
        Work {
            cache_failures_before: tradetune_device::cache_store::failures().0,
            ..Work::default()
        }
    }

    /// `auto`'s placement of the run's environment, on a GPU: its measured step costs (for
    /// the verdict), and, where the run measured before it trained (a shape's first run: both
    /// placements' kernels compiled, rollouts timed on each), that overhead, paid before its
    /// first update, in the compile phase and what it compiled in the trial's kernels.
    pub(super) fn add_placement(&mut self, auto: Option<&AutoPlacement>) {
        let Some(auto) = auto else {
            return;
        };
        let mut gpu = self.gpu.unwrap_or_default();
        gpu.auto_step_ms = Some((auto.host_ms, auto.device_ms));
        gpu.placement_kept = auto.kept;
        if let Some((seconds, counted)) = auto.overhead() {
            self.phases.compile_s += seconds;
            self.placement_s += seconds;
            gpu.kernels_compiled += counted.compiled;
            gpu.autotune_runs += counted.autotune_runs;
            *gpu.placement_measure_s.get_or_insert(0.0) += seconds;
        }
        self.gpu = Some(gpu);
    }
}

/// Trains `trainer` for the trial's budget, turning its events into the trial's progress,
/// learning curve and (for a hold-out) intermediate values; adds the run to `done` and
/// records the total as the trial's work. `fold` is (index, count) when cross-validating: the
/// progress spans all folds and the curve's updates continue from the previous fold's.
pub(super) fn learn<E: RolloutEnv>(
    trainer: &mut Trainer<E>,
    cfg: &PpoTrialConfig,
    input: &TrialInput<'_>,
    reporter: &mut Reporter<'_>,
    fold: Option<(usize, usize)>,
    done: &mut Work,
) -> Result<TrainReport, TrialError> {
    let total = cfg.train.total_timesteps.max(1);
    let trainer_stop = trainer.stop_flag();
    let user_stop = reporter.stop_flag();
    let (update_offset, step_offset) = (done.updates, done.samples);
    // Why the callback asked the trainer to stop: pruned at a step, or a storage error.
    let mut ended: Option<TrialError> = None;
    // One update's metrics, gathered from its events and sent with its `Progress`.
    let mut metrics: BTreeMap<String, f64> = BTreeMap::new();
    // The samples the run ends at (a resumed checkpoint's included), from its start.
    let mut budget = usize::MAX;
    let report = trainer
        .learn(total, &mut |event| {
            if user_stop.is_set() {
                trainer_stop.store(true, Ordering::Relaxed);
            }
            match event {
                TrainEvent::Started {
                    total_timesteps, ..
                } => budget = total_timesteps,
                TrainEvent::Evaluation {
                    update,
                    timesteps,
                    summary,
                } if ended.is_none() && fold.is_none() => {
                    // The last update's value is the trial's: reported, not judged (a prune
                    // there would save nothing and call a trial that trained in full pruned).
                    let step = update as u64;
                    let sent = if timesteps >= budget {
                        reporter.report_last(step, summary.objective)
                    } else {
                        reporter.report_and_check(step, summary.objective)
                    };
                    if let Err(e) = sent {
                        ended = Some(e);
                        trainer_stop.store(true, Ordering::Relaxed);
                    }
                }
                TrainEvent::Episodes(summary) => {
                    metrics.extend(summary.metrics().map(|(k, v)| (k.to_owned(), v)));
                }
                TrainEvent::Update { update, stats } => {
                    // NVML's figure for this process on the trial's card, against the
                    // budget (the pool check runs in the trainer).
                    if let (Some(budget), Some(bytes)) = (
                        &input.budget,
                        input.process_memory.as_ref().and_then(|m| m.bytes()),
                    ) && let Err(e) =
                        budget.check_in_use(bytes, update, "NVML per-process memory")
                        && ended.is_none()
                    {
                        ended = Some(TrialError::Failed(e.to_string()));
                        trainer_stop.store(true, Ordering::Relaxed);
                    }
                    metrics.extend(stats.metrics().map(|(k, v)| (k.to_owned(), v)));
                }
                TrainEvent::Progress {
                    update,
                    timesteps,
                    samples_per_second,
                    phases,
                    ..
                } => {
                    let here = timesteps as f64 / total as f64;
                    let (fraction, message) = match fold {
                        None => (
                            here,
                            format!(
                                "{timesteps}/{total} samples, {samples_per_second:.0} samples/s"
                            ),
                        ),
                        Some((i, n)) => (
                            (i as f64 + here) / n as f64,
                            format!(
                                "fold {}/{n}: {timesteps}/{total} samples, \
                                 {samples_per_second:.0} samples/s",
                                i + 1
                            ),
                        ),
                    };
                    reporter.progress(fraction, message);
                    metrics.insert("charts/SPS".to_owned(), samples_per_second);
                    metrics.extend(phases.metrics().map(|(k, v)| (k.to_owned(), v)));
                    let values = std::mem::take(&mut metrics);
                    if let Err(e) = reporter.metrics(
                        update_offset + update as u64,
                        step_offset + timesteps as u64,
                        values,
                    ) && ended.is_none()
                    {
                        ended = Some(e);
                        trainer_stop.store(true, Ordering::Relaxed);
                    }
                }
                _ => {}
            }
        })
        .map_err(TrialError::failed)?;
    let phases = phase_split(&report.phases);
    done.samples += report.timesteps as u64;
    done.updates += report.updates as u64;
    done.phases.add(&phases);
    reporter.set_work(done.samples, Some(done.phases));
    if !tradetune_device::is_cpu(trainer.train_device()) {
        let mut gpu = done.gpu.unwrap_or_default();
        gpu.kernels_compiled += report.kernels.compiled;
        gpu.autotune_runs += report.kernels.autotune_runs;
        // Every update of every run so far compiled: their compiling is in their other phases.
        gpu.compile_not_apart =
            report.compile_not_apart && (update_offset == 0 || gpu.compile_not_apart);
        if let Some(d) = report.dispatches {
            gpu.dispatches_per_minibatch = Some(d.per_minibatch);
            gpu.dispatches_per_env_step = Some(d.per_env_step);
            gpu.syncs_per_update = d.syncs_per_update.or(gpu.syncs_per_update);
            gpu.policy_steps_replayed = d.replayed_per_policy_step > 0.0;
            gpu.minibatches_replayed = d.replayed_per_minibatch > 0.0;
        }
        if trainer.replay_failed() {
            gpu.policy_replay_failed = true;
            if let Some(why) = trainer.replay_fallback() {
                reporter.set_user_attr("policy_replay_fallback", why.to_owned());
            }
        }
        if let Some(why) = trainer.learner().replay_fallback() {
            gpu.minibatch_replay_failed = true;
            reporter.set_user_attr("update_replay_fallback", why.to_owned());
        }
        gpu.n_steps = Some(cfg.ppo.n_steps);
        gpu.driver_shader_cache_off = tradetune_device::kernels::driver_shader_cache_off();
        // What the trial autotuned a later process finds only where the cache kept it: a
        // cache that is on and usable, and no read or write of it failed since the trial
        // began (its own, or a trial's beside it in the process: they share the store).
        gpu.autotune_not_kept |= gpu.autotune_runs > 0
            && tradetune_device::kernels::kept_since(done.cache_failures_before)
                != tradetune_device::kernels::Kept::All;
        done.gpu = Some(gpu);
        reporter.set_gpu_work(gpu);
    }
    if let Some(e) = ended {
        return Err(e);
    }
    if report.stopped || user_stop.is_set() {
        return Err(TrialError::Stopped);
    }
    Ok(report)
}

/// The trainer's phases in the telemetry's four: buffer writes count as inference (both are
/// the rollout's non-env work), GAE as update.
fn phase_split(p: &PhaseTimes) -> PhaseSplit {
    PhaseSplit {
        env_s: p.env_step,
        inference_s: p.inference + p.buffer,
        update_s: p.advantages + p.update,
        eval_s: p.evaluation,
        compile_s: p.compile,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tradetune_device::kernels::KernelCounts;
    use tradetune_env::ResolvedPlacement;

    /// `auto`'s measuring is the trial's compile phase and kernels where it measured (each
    /// fold's, where the decision was not kept), and nothing where it took a kept decision.
    #[test]
    fn autos_measuring_counts_in_the_compile_phase_where_it_measured() {
        let mut auto = AutoPlacement {
            placement: ResolvedPlacement::Device,
            device_ms: 1.0,
            host_ms: 2.0,
            replayed: false,
            measured_at: "2026-11-29T10:00:00Z".into(),
            measure_s: 24.0,
            kept: true,
            measure_kernels: KernelCounts {
                compiled: 51,
                autotune_runs: 4,
                ..KernelCounts::default()
            },
            cached: false,
        };
        let mut done = Work::default();
        done.add_placement(None);
        assert_eq!(done.phases, PhaseSplit::default());
        assert!(done.gpu.is_none());
        done.add_placement(Some(&auto));
        done.add_placement(Some(&auto));
        assert_eq!(done.phases.compile_s, 48.0);
        assert_eq!(done.phases.total_s(), 48.0);
        assert_eq!(done.placement_s, 48.0);
        let gpu = done.gpu.expect("measuring ran on a GPU");
        assert_eq!((gpu.kernels_compiled, gpu.autotune_runs), (102, 8));
        assert_eq!(gpu.placement_measure_s, Some(48.0));
        assert_eq!(gpu.auto_step_ms, Some((2.0, 1.0)));
        assert!(gpu.placement_kept);

        auto.cached = true;
        let mut kept = Work::default();
        kept.add_placement(Some(&auto));
        assert_eq!(kept.phases.compile_s, 0.0);
        let gpu = kept.gpu.expect("the decision's costs, for the verdict");
        assert_eq!((gpu.kernels_compiled, gpu.placement_measure_s), (0, None));
        assert_eq!(gpu.auto_step_ms, Some((2.0, 1.0)));
    }
}
