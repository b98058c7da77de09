//! One trial from its parameters to its stored outcome: plan, run metadata, memory check,
//! heartbeat, the trial function under `catch_unwind`, telemetry summary, final state.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc::Sender;
use std::time::Instant;

use crate::trial::TrialState;
use tradetune_device::DeviceSpec;
use tradetune_device::memory::MemoryBudget;
use tradetune_storage::{
    HeartbeatThread, JsonValue, RunMetadata, Storage, StorageError, TrialHandle,
};
use tradetune_telemetry::{CpuSharing, Phase};

use super::devices::DeviceSlot;
use super::events::StudyEvent;
use super::trial_fn::{Reporter, TrialError, TrialInput};
use super::{Runner, RunnerError, Shared, Started, TrialOutcome, summary};

impl Runner {
    /// Runs `s` to its stored outcome. A storage error that stops the worker fails the trial
    /// first where the storage still takes it, rather than leaving it RUNNING.
    pub(super) fn run_trial(
        &self,
        storage: &mut Storage,
        worker: usize,
        slot: &DeviceSlot,
        shared: &Shared,
        s: Started,
        events: &Sender<StudyEvent>,
    ) -> Result<TrialOutcome, RunnerError> {
        let handle = s.handle;
        match self.run_started(storage, worker, slot, shared, s, events) {
            // Finished by another process while it ran (its heartbeat judged stale by a worker
            // with a shorter `--stale-after`, say): the stored state stands, and this worker
            // goes on with the next trial instead of stopping over one it no longer owns.
            Err(RunnerError::Storage(StorageError::TrialFinished { state, .. })) => {
                let reason = format!(
                    "taken from this worker: another process stored it as {state} while it ran \
                     (its heartbeat judged stale?); its result here is not stored"
                );
                // This run's outcome of it: its result here was lost (nothing more is stored).
                Ok(failed(handle, worker, slot, reason, 0.0, events))
            }
            result => {
                result.inspect_err(|e| self.abandon(storage, handle, worker, slot, e, events))
            }
        }
    }

    /// Fails the trial of a worker stopped by `error`, best effort: the error the worker
    /// returns is `error`, whatever this meets (a trial already finished refuses it; the
    /// storage may still refuse writes). Left RUNNING, the trial would show as running and
    /// hold a place in the study's budget until a later run found its heartbeat stale.
    pub(super) fn abandon(
        &self,
        storage: &mut Storage,
        handle: TrialHandle,
        worker: usize,
        slot: &DeviceSlot,
        error: &RunnerError,
        events: &Sender<StudyEvent>,
    ) {
        let reason = format!("the worker stopped: {error}");
        let _ = self.fail(storage, handle, worker, slot, reason, 0.0, events);
    }

    fn run_started(
        &self,
        storage: &mut Storage,
        worker: usize,
        slot: &DeviceSlot,
        shared: &Shared,
        s: Started,
        events: &Sender<StudyEvent>,
    ) -> Result<TrialOutcome, RunnerError> {
        let number = s.handle.number.max(0) as u64;
        let trial_id = s.handle.trial_id;
        // The trial's share of its physical device's budget, shared by the trials running on
        // that device at once whatever slot name they use (`cpu`, `cpu#1`): one where its
        // workers take turns.
        let budget = match slot.memory_bytes {
            Some(bytes) => {
                let device_index = self
                    .cfg
                    .devices
                    .iter()
                    .position(|d| d.label == slot.label)
                    .unwrap_or(0);
                Some(
                    MemoryBudget::new(
                        bytes,
                        self.cfg.memory_fraction,
                        shared.budget_shared_by[device_index],
                    )?
                    .on(&slot.label),
                )
            }
            None => None,
        };
        let on_card = self.telemetry_device(slot);
        // Rows tagged and summed on the trial's card and the host (on the host alone for a
        // card no probe reads; on every device where the card is not known).
        let telemetry_device = on_card.sampler_tag();
        let process_memory = match (&self.telemetry, on_card.probed()) {
            (Some(sampler), Some(card @ tradetune_telemetry::DeviceTag::Gpu(_))) => {
                Some(super::trial_fn::ProcessMemory {
                    sampler: sampler.clone(),
                    card,
                })
            }
            _ => None,
        };
        let input = TrialInput {
            number,
            trial_id,
            worker,
            device: slot,
            params: &s.params,
            budget: budget.clone(),
            process_memory,
        };
        // The trial's configuration is decoded once, here; planning and running use it.
        let trial = match catch_unwind(AssertUnwindSafe(|| self.trial_fn.decode(&s.config))) {
            Ok(Ok(trial)) => trial,
            Ok(Err(e)) => {
                return self.fail(storage, s.handle, worker, slot, e.to_string(), 0.0, events);
            }
            Err(panic) => {
                let reason = format!("panicked while decoding: {}", panic_message(&panic));
                return self.fail(storage, s.handle, worker, slot, reason, 0.0, events);
            }
        };
        let plan = match catch_unwind(AssertUnwindSafe(|| trial.plan(&input))) {
            Ok(Ok(plan)) => plan,
            Ok(Err(e)) => {
                return self.fail(storage, s.handle, worker, slot, e.to_string(), 0.0, events);
            }
            Err(panic) => {
                let reason = format!("panicked while planning: {}", panic_message(&panic));
                return self.fail(storage, s.handle, worker, slot, reason, 0.0, events);
            }
        };
        storage.set_run_metadata(
            trial_id,
            &RunMetadata {
                worker: Some(match &self.cfg.host {
                    Some(host) => format!("{host}/worker-{worker}"),
                    None => format!("worker-{worker}"),
                }),
                device: slot.label.clone(),
                backend: slot.backend().to_owned(),
                precision: plan.precision.clone(),
                config: JsonValue::from(&s.config),
            },
        )?;
        // Registered before the event goes out, so a UI reacting to it can stop the trial.
        let stop = self.stop.register(number);
        let _ = events.send(StudyEvent::TrialStarted {
            number,
            worker,
            device: slot.label.clone(),
            backend: slot.backend().to_owned(),
            precision: plan.precision.clone(),
            params: s
                .params
                .iter()
                .map(|(k, v)| (k.clone(), v.to_json()))
                .collect(),
        });
        if let (Some(estimate), Some(budget)) = (&plan.memory, &budget)
            && let Err(e) = budget.check(estimate)
        {
            self.stop.unregister(number);
            let reason = format!("not started, over the memory budget: {e}");
            return self.fail(storage, s.handle, worker, slot, reason, 0.0, events);
        }

        // Beats until this function returns, after the trial's state is stored: the writes of
        // a finished trial's figures may wait on the database's lock, and a trial that went
        // without a beat meanwhile could be failed as "worker lost" by another worker, its
        // result lost. A beat that comes after the state ends the thread quietly.
        let _heartbeat = match HeartbeatThread::start(
            &self.cfg.storage,
            trial_id,
            self.cfg.heartbeat_interval,
        ) {
            Ok(h) => h,
            Err(e) => {
                self.stop.unregister(number);
                return Err(e.into());
            }
        };
        let started_at = chrono::Utc::now();
        let clock = Instant::now();
        // Trials on this trial's physical device now, its own included (more than one only
        // with gpu_sharing = "shared", or on the CPU).
        let running = &shared.running[self
            .cfg
            .devices
            .iter()
            .position(|d| d.label == slot.label)
            .unwrap_or(0)];
        let mut sharing = running.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        // A first sample tagged with this trial, stored before it runs: a trial shorter than
        // the sampling interval still has telemetry (issue 19).
        if let Some(t) = &self.telemetry {
            t.begin_trial(trial_id as u64, telemetry_device);
        }
        let mut reporter = Reporter {
            storage,
            study_id: shared.study_id,
            study_name: &self.cfg.study_name,
            direction: self.cfg.direction,
            pruner: self.pruner.as_ref(),
            trial_id,
            number,
            worker,
            events,
            stop: stop.clone(),
            last_step: None,
            pruned_at: None,
            user_attrs: Vec::new(),
            env_samples: 0,
            phases: None,
            gpu_work: None,
            curve: Vec::new(),
            curve_written: Instant::now(),
        };
        let mut result = catch_unwind(AssertUnwindSafe(|| trial.run(&input, &mut reporter)));
        // Whether the trial was stopped (or the study interrupted) while it ran: a Ctrl-C
        // that comes while a finished trial's figures are being stored does not undo it.
        let stopped = stop.is_set();
        let interrupted = self.stop.interrupted();
        // The rest of the learning curve, while the trial is still RUNNING (a finished trial
        // refuses writes). A value without its curve is still a value, but the user asked for
        // the curve: a failure to store it fails a trial that would otherwise complete.
        if let Err(e) = reporter.write_curve()
            && matches!(result, Ok(Ok(_)))
        {
            result = Ok(Err(e));
        }
        // And a last one, before the trial's state is stored.
        if let Some(t) = &self.telemetry {
            t.end_trial(trial_id as u64);
        }
        let wall = clock.elapsed();
        let ended_at = chrono::Utc::now();
        let duration_s = wall.as_secs_f64();
        let last_step = reporter.last_step;
        let pruned_at = reporter.pruned_at;
        let mut attrs = std::mem::take(&mut reporter.user_attrs);
        let (env_samples, phases) = (reporter.env_samples, reporter.phases);
        let gpu_work = reporter.gpu_work;
        drop(reporter);
        sharing = sharing.max(running.fetch_sub(1, std::sync::atomic::Ordering::SeqCst));
        self.stop.unregister(number);
        // The summary: the trial's own wall time, samples/s and phases always (telemetry off
        // included), the sampled device figures where telemetry is on.
        {
            let on_device_env = attrs
                .iter()
                .any(|(k, v)| k == "env_placement" && *v == JsonValue::from("device"));
            // CPU workers of one process share the machine's cores (one thread pool).
            let cpu_sharing = (slot.spec == DeviceSpec::Cpu).then(|| CpuSharing {
                workers: self
                    .cfg
                    .devices
                    .iter()
                    .position(|d| d.label == slot.label)
                    .map_or(1, |i| shared.per_device[i]),
                cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            });
            let shape = summary::TrialShape {
                on_device_env,
                // The PPO trial's minibatch, where the configuration has one.
                batch_size: s
                    .config
                    .pointer("/ppo/batch_size")
                    .and_then(|b| b.as_u64())
                    .map(|b| b as usize),
                cpu_sharing,
                gpu_work,
                trials_on_device: if slot.spec == DeviceSpec::Cpu {
                    0
                } else {
                    sharing
                },
                mem_budget_mib: budget
                    .as_ref()
                    .map(|b| b.process_limit() as f64 / 1_048_576.0),
            };
            let s = summary::summarise(
                self.telemetry.as_ref(),
                trial_id as u64,
                (started_at, ended_at),
                telemetry_device,
                wall,
                env_samples,
                phases,
                shape,
            );
            attrs.extend(s);
            // Which telemetry device (`gpu0`, `host`) this trial's slot (`wgpu:0`) is.
            if let Some(d) = on_card.probed().filter(|_| self.telemetry.is_some()) {
                attrs.push(("telemetry_device".into(), JsonValue::from(d.to_string())));
            }
        }
        // The phases are timed by the wall clock around device synchronisations: with other
        // trials' kernels in the same queue, each phase also holds waits for theirs.
        if sharing > 1 && slot.spec != DeviceSpec::Cpu {
            attrs.push((
                "phase_split".into(),
                JsonValue::from(format!(
                    "approximate: {sharing} trials shared {} (gpu_sharing = \"shared\"), so each phase's time includes waits for the others' kernels",
                    slot.label
                )),
            ));
        }
        if let Some(w) = gpu_work {
            attrs.push((
                "kernels_compiled".into(),
                JsonValue::from(w.kernels_compiled as i64),
            ));
            attrs.push((
                "autotune_runs".into(),
                JsonValue::from(w.autotune_runs as i64),
            ));
            // Every update compiled: `phase_compile_s` holds none of their compiling.
            if w.compile_not_apart {
                attrs.push(("compile_not_apart".into(), JsonValue::from(true)));
            }
            // Which steps ran replayed from a captured graph (TRADETUNE_REPLAY_POLICY,
            // TRADETUNE_REPLAY_UPDATE), so that trials' samples/s compare like with like.
            for (key, replayed) in [
                ("policy_steps_replayed", w.policy_steps_replayed),
                ("minibatches_replayed", w.minibatches_replayed),
            ] {
                if replayed {
                    attrs.push((key.into(), JsonValue::from(true)));
                }
            }
        }
        storage.set_trial_user_attrs(trial_id, &attrs)?;
        let compile_s = compile_of(&attrs);

        let outcome = match result {
            _ if interrupted && stopped => Err(tradetune_storage::INTERRUPTED_REASON.to_owned()),
            Ok(Ok(v)) if v.is_nan() => Err("the objective is NaN".to_owned()),
            Ok(Ok(v)) => Ok(v),
            Ok(Err(TrialError::Pruned { step })) => {
                return self.prune(
                    storage,
                    s.handle,
                    worker,
                    slot,
                    step.or(pruned_at).or(last_step),
                    "pruned by the pruner".into(),
                    duration_s,
                    compile_s,
                    events,
                );
            }
            Ok(Err(TrialError::Stopped)) => Err(tradetune_storage::STOPPED_REASON.to_owned()),
            Ok(Err(TrialError::Failed(m))) if stopped => {
                Err(format!("{} ({m})", tradetune_storage::STOPPED_REASON))
            }
            Ok(Err(TrialError::Failed(m))) => Err(m),
            Err(panic) => Err(format!("panicked: {}", panic_message(&panic))),
        };
        // An enqueued trial the interrupt cut short waits again (its copy, in the same
        // transaction), for the study's next run or another process's workers, unless its
        // line was cut short RUNS_CUT_SHORT times.
        if let (Err(reason), true, true) = (&outcome, interrupted && stopped, s.waited) {
            let reason = match &s.again {
                Some(again) => {
                    let copy = storage.fail_trial_and_enqueue(trial_id, reason, again)?;
                    format!(
                        "{reason}; its enqueued parameters wait again as trial {}",
                        copy.number
                    )
                }
                None => {
                    storage.fail_trial(trial_id, reason)?;
                    format!(
                        "{reason}; cut short {} times, its enqueued parameters are not \
                         enqueued again",
                        super::RUNS_CUT_SHORT
                    )
                }
            };
            return Ok(failed(s.handle, worker, slot, reason, duration_s, events));
        }
        match outcome {
            Ok(value) => {
                storage.complete_trial(trial_id, &[value])?;
                let _ = events.send(StudyEvent::TrialCompleted {
                    number,
                    worker,
                    device: slot.label.clone(),
                    value,
                    duration_s,
                    compile_s,
                });
                Ok(TrialOutcome {
                    number,
                    state: TrialState::Complete,
                    value: Some(value),
                    worker,
                    device: slot.label.clone(),
                    reason: None,
                })
            }
            Err(reason) if stopped && !interrupted && last_step.is_some() => self.prune(
                storage, s.handle, worker, slot, last_step, reason, duration_s, compile_s, events,
            ),
            Err(reason) => self.fail(storage, s.handle, worker, slot, reason, duration_s, events),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn prune(
        &self,
        storage: &mut Storage,
        handle: TrialHandle,
        worker: usize,
        slot: &DeviceSlot,
        step: Option<u64>,
        reason: String,
        duration_s: f64,
        compile_s: Option<f64>,
        events: &Sender<StudyEvent>,
    ) -> Result<TrialOutcome, RunnerError> {
        storage.set_trial_system_attr(
            handle.trial_id,
            tradetune_storage::PRUNE_REASON_KEY,
            &JsonValue::from(reason.as_str()),
        )?;
        storage.prune_trial(handle.trial_id)?;
        let value = storage.trial(handle.trial_id)?.value();
        let number = handle.number.max(0) as u64;
        let _ = events.send(StudyEvent::TrialPruned {
            number,
            worker,
            device: slot.label.clone(),
            step,
            value,
            reason: reason.clone(),
            duration_s,
            compile_s,
        });
        Ok(TrialOutcome {
            number,
            state: TrialState::Pruned,
            value,
            worker,
            device: slot.label.clone(),
            reason: Some(reason),
        })
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn fail(
        &self,
        storage: &mut Storage,
        handle: TrialHandle,
        worker: usize,
        slot: &DeviceSlot,
        reason: String,
        duration_s: f64,
        events: &Sender<StudyEvent>,
    ) -> Result<TrialOutcome, RunnerError> {
        storage.fail_trial(handle.trial_id, &reason)?;
        Ok(failed(handle, worker, slot, reason, duration_s, events))
    }
}

/// A FAILED trial's event and outcome (its state stored, or not this worker's to store).
fn failed(
    handle: TrialHandle,
    worker: usize,
    slot: &DeviceSlot,
    reason: String,
    duration_s: f64,
    events: &Sender<StudyEvent>,
) -> TrialOutcome {
    let number = handle.number.max(0) as u64;
    let _ = events.send(StudyEvent::TrialFailed {
        number,
        worker,
        device: slot.label.clone(),
        reason: reason.clone(),
        duration_s,
    });
    TrialOutcome {
        number,
        state: TrialState::Fail,
        value: None,
        worker,
        device: slot.label.clone(),
        reason: Some(reason),
    }
}

/// The text of a panic payload (`panic!("…")` gives a `&str` or a `String`).
pub fn panic_message(payload: &Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned())
}

/// The seconds a trial spent compiling kernels, from the user attributes it stores, where
/// they hold a compile phase (a GPU trial's telemetry summary, `phase_compile_s`) above zero;
/// none where every update compiled (`compile_not_apart`), whose compiling the phase does not
/// hold.
fn compile_of(attrs: &[(String, JsonValue)]) -> Option<f64> {
    if attrs.iter().any(|(k, _)| k == "compile_not_apart") {
        return None;
    }
    let key = format!("phase_{}_s", Phase::Compile.name());
    attrs.iter().find_map(|(k, v)| match v {
        JsonValue::Float(s) if *k == key && *s > 0.0 => Some(*s),
        _ => None,
    })
}
