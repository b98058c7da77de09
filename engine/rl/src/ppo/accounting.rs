//! Where a GPU's time goes that a phase split by wall clock does not show (issues 32 and 33):
//! the compile phase (an update that compiled new kernels, against the next one that compiled
//! none) and the dispatches and host round-trips of each part of an update.
//!
//! **Compile.** Whether an update compiled is read from the process's kernel counters
//! ([`tradetune_device::kernels`]). Its overhead is only known once an update of the same
//! shapes has run without compiling, so the events of an update that compiled are held until
//! then and delivered with their phases corrected: the steady update's split, scaled to the
//! compiling update's wall time less the overhead, plus the overhead as `compile`. Events are
//! delivered in their order, one update late while the first update's overhead is unresolved;
//! a run that ends before any steady update delivers them as measured (no compile figure).
//!
//! **Dispatches.** On an update whose phases are timed, the kernel launches of each phase are
//! counted between its synchronisations ([`DispatchProfile`]); the host reads and device
//! synchronisations of an untimed update are its round-trips.

use serde::{Deserialize, Serialize};

use crate::ppo::events::{PhaseTimes, TrainEvent};
use tradetune_device::kernel_timing::{KernelTime, KernelTimer};
use tradetune_device::kernels::{self, KernelCounts};

/// Kernel launches and host round-trips of one update, by part.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct DispatchProfile {
    /// Launches per environment step (the env's own work, and a host env's transfers).
    pub per_env_step: f64,
    /// Launches per policy step of a rollout: forward, sampling, log-prob, value.
    pub per_policy_step: f64,
    /// Launches per step of writing the rollout buffer and normalising the next observation.
    pub per_buffer_step: f64,
    /// Launches of GAE and of preparing the update batch, once per update.
    pub advantages: u64,
    /// Launches of the update (all its minibatches and its diagnostics).
    pub update: u64,
    /// Minibatches the update ran.
    pub minibatches: usize,
    /// `update / minibatches`: one minibatch's forward, loss, backward, clip and optimiser
    /// step, with the update's once-per-update work spread over them.
    pub per_minibatch: f64,
    /// Of `per_policy_step`, the layout copies ([`kernels::is_layout_copy`]): launched by the
    /// matmul routines the autotune cache picked, not asked for by the policy step.
    #[serde(default)]
    pub copies_per_policy_step: f64,
    /// Of `per_minibatch`, the layout copies.
    #[serde(default)]
    pub copies_per_minibatch: f64,
    /// Of `per_policy_step`, the launches replayed from the run's captured policy step
    /// (`TRADETUNE_REPLAY_POLICY`): run by the device, only encoded again by the host. The rest
    /// are launches the host prepares one by one.
    #[serde(default)]
    pub replayed_per_policy_step: f64,
    /// Of `per_minibatch`, the launches replayed from the update's captured minibatch
    /// (`TRADETUNE_REPLAY_UPDATE`); the rest the host prepares one by one.
    #[serde(default)]
    pub replayed_per_minibatch: f64,
    /// Host reads and explicit synchronisations of an untimed update (the timed one adds a
    /// synchronisation per phase of each step to time it, left out here): the last untimed
    /// update's, or a timed one's where no untimed update has run (a run of two updates on a
    /// GPU, both timed).
    pub syncs_per_update: Option<u64>,
    /// The device's own time for the kernels of each part, where the update was timed kernel
    /// by kernel ([`crate::ppo::Trainer::set_kernel_timing`]).
    #[serde(default)]
    pub kernel_time: Option<KernelTimeProfile>,
}

/// How long the device ran the kernels of one update, by part (see
/// [`tradetune_device::kernel_timing`]).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct KernelTimeProfile {
    pub env_step: KernelTime,
    pub inference: KernelTime,
    pub buffer: KernelTime,
    pub advantages: KernelTime,
    pub update: KernelTime,
    /// Seconds the device was busy with the update's kernels (the union of their intervals).
    pub busy_s: f64,
}

impl KernelTimeProfile {
    /// All the update's kernels.
    pub fn total(&self) -> KernelTime {
        let mut t = KernelTime::default();
        for part in [
            &self.env_step,
            &self.inference,
            &self.buffer,
            &self.advantages,
            &self.update,
        ] {
            t.add(part);
        }
        t
    }
}

/// The parts a timed update's launches are charged to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Part {
    Inference,
    EnvStep,
    Buffer,
    Advantages,
    Update,
}

/// Launch counts of the timed update in progress, and of them the layout copies; with
/// `time_kernels`, the device's time for them.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    last: KernelCounts,
    counts: [u64; 5],
    copies: [u64; 5],
    replayed: [u64; 5],
    /// Whether the next timed updates time each kernel on the device (a benchmark's choice:
    /// it costs a round trip to the device's server per launch).
    pub(crate) time_kernels: bool,
    timer: Option<KernelTimer>,
    kernel: [KernelTime; 5],
}

impl Tally {
    /// Starts counting from now (after the synchronisation that ends what came before).
    pub(crate) fn begin(&mut self) {
        self.last = kernels::counts();
        self.counts = [0; 5];
        self.copies = [0; 5];
        self.replayed = [0; 5];
        self.kernel = [KernelTime::default(); 5];
        // A timer left by an update that stopped half way stops first.
        self.timer = None;
        if self.time_kernels {
            self.timer = KernelTimer::start();
        }
    }

    /// Charges the launches since the last mark to `part` (call after its synchronisation).
    pub(crate) fn charge(&mut self, part: Part) {
        let now = kernels::counts();
        let delta = now.since(&self.last);
        self.counts[part as usize] += delta.dispatches;
        self.copies[part as usize] += delta.layout_copies;
        self.replayed[part as usize] += delta.replayed;
        self.last = now;
        if let Some(timer) = &mut self.timer {
            self.kernel[part as usize].add(&timer.take());
        }
    }

    /// The profile of a timed update of `steps` steps that ran `minibatches` minibatches (the
    /// kernel timer, if one ran, stops).
    pub(crate) fn profile(&mut self, steps: usize, minibatches: usize) -> DispatchProfile {
        let kernel_time = self.timer.take().map(|timer| {
            let k = |p: Part| self.kernel[p as usize];
            KernelTimeProfile {
                env_step: k(Part::EnvStep),
                inference: k(Part::Inference),
                buffer: k(Part::Buffer),
                advantages: k(Part::Advantages),
                update: k(Part::Update),
                busy_s: timer.busy_s(),
            }
        });
        let per_step = |p: Part| self.counts[p as usize] as f64 / steps.max(1) as f64;
        let update = self.counts[Part::Update as usize];
        let minibatches_f = minibatches.max(1) as f64;
        DispatchProfile {
            per_env_step: per_step(Part::EnvStep),
            per_policy_step: per_step(Part::Inference),
            per_buffer_step: per_step(Part::Buffer),
            advantages: self.counts[Part::Advantages as usize],
            update,
            minibatches,
            per_minibatch: update as f64 / minibatches_f,
            copies_per_policy_step: self.copies[Part::Inference as usize] as f64
                / steps.max(1) as f64,
            copies_per_minibatch: self.copies[Part::Update as usize] as f64 / minibatches_f,
            replayed_per_policy_step: self.replayed[Part::Inference as usize] as f64
                / steps.max(1) as f64,
            replayed_per_minibatch: self.replayed[Part::Update as usize] as f64 / minibatches_f,
            syncs_per_update: None,
            kernel_time,
        }
    }
}

/// The sums of the counters that [`CompileWatch`] keeps (`layout_copies` and `replayed`
/// are the launches', not a compilation's, and stay 0).
fn add(a: KernelCounts, b: KernelCounts) -> KernelCounts {
    KernelCounts {
        dispatches: a.dispatches + b.dispatches,
        compiled: a.compiled + b.compiled,
        autotune_runs: a.autotune_runs + b.autotune_runs,
        ..KernelCounts::default()
    }
}

/// The synchronisations a timed update adds after each phase to time it
/// (`Trainer::with_phase_sampling`): not the update's own round-trips.
const PHASE_TIMING_SYNCS: [&str; 5] = [
    "sync: inference",
    "sync: env step",
    "sync: buffer",
    "sync: advantages",
    "sync: update",
];

/// Host reads and synchronisations counted so far in this process, but for those that time
/// the phases of a timed update: an update's round-trips, whether it was timed or not.
pub(crate) fn round_trips() -> u64 {
    tradetune_device::readback::counts()
        .iter()
        .filter(|(what, _)| !PHASE_TIMING_SYNCS.contains(what))
        .map(|(_, n)| n)
        .sum()
}

/// An update whose events wait for its compile overhead to be known.
#[derive(Debug)]
struct Held {
    events: Vec<TrainEvent>,
    /// Wall time of its rollout and update (evaluation excluded).
    wall: f64,
    /// Time the next update's start waited for this one's late compilation lines
    /// ([`CompileWatch::begin`]): part of its compile time.
    waited: f64,
}

/// The compile accounting of one trainer.
#[derive(Debug, Default)]
pub(crate) struct CompileWatch {
    held: Vec<Held>,
    /// Wall time and split of the last update that compiled nothing.
    steady: Option<(f64, PhaseTimes)>,
    /// Counters when the update in progress started.
    start: KernelCounts,
    /// Updates finished by this trainer.
    cycles: usize,
    /// Periodic evaluations run by this trainer.
    evaluations: usize,
    /// What the update in progress's evaluation launched and compiled: not the update's.
    evaluated: KernelCounts,
    /// What the updates and evaluations that compiled compiled.
    pub(crate) compiled: KernelCounts,
    /// Whether updates that compiled were delivered as measured, no update having compiled
    /// nothing to measure their overhead against (every update of the run compiled).
    pub(crate) not_apart: bool,
}

impl CompileWatch {
    /// Marks the start of an update. While an update that compiled is held, the compilation
    /// log's late lines (delivered by cubecl's logging task) are let in first, so they are not
    /// taken for this update's: 20 ms or more where compilations are counted (a GPU), only in
    /// the updates after one that compiled.
    /// The wait is the held update's compile time, not this update's: the trainer starts this
    /// update's clock after it, so a steady update an overhead is measured against does not
    /// count it, and the phases still sum to the run.
    pub(crate) fn begin(&mut self) {
        self.begin_after(|| {
            let t = std::time::Instant::now();
            kernels::settle();
            t.elapsed().as_secs_f64()
        });
    }

    /// [`CompileWatch::begin`], `settle` letting the late lines in and returning the seconds it
    /// waited.
    fn begin_after(&mut self, settle: impl FnOnce() -> f64) {
        if let Some(last) = self.held.last_mut() {
            last.waited += settle();
        }
        self.start = kernels::counts();
        self.evaluated = KernelCounts::default();
    }

    /// Takes a periodic evaluation's counters (`delta`, from its start to its end) out of the
    /// update in progress, and says whether it compiled: by the counters, or, where they are
    /// not counting, when it is the run's first evaluation on a device that compiles. An
    /// evaluation's compilations are timed by the evaluation itself (its first bars against
    /// its pace), since the next evaluation, which would give its steady time, may be many
    /// updates away.
    pub(crate) fn evaluated(&mut self, delta: KernelCounts, compiles: bool) -> bool {
        self.evaluated_counting(delta, compiles, kernels::counting_compiles())
    }

    /// [`CompileWatch::evaluated`], `counting` saying whether the counters count compilations.
    fn evaluated_counting(&mut self, delta: KernelCounts, compiles: bool, counting: bool) -> bool {
        let first = self.evaluations == 0;
        self.evaluations += 1;
        self.evaluated = add(self.evaluated, delta);
        let compiled = compiles
            && if counting {
                delta.compiled_anything()
            } else {
                first
            };
        if compiled {
            self.compiled = add(self.compiled, delta);
        }
        compiled
    }

    /// What the update that just ended compiled, if it compiled: by the counters, or, where
    /// they are not counting (another `log` logger came first), the first update on a device
    /// that compiles. `compiles`: whether the device compiles kernels at all (not the CPU).
    pub(crate) fn compiled_now(&mut self, compiles: bool) -> Option<KernelCounts> {
        let delta = kernels::counts().since(&self.start).since(&self.evaluated);
        let first = self.cycles == 0;
        self.cycles += 1;
        if !compiles {
            return None;
        }
        if kernels::counting_compiles() {
            delta.compiled_anything().then_some(delta)
        } else {
            first.then_some(delta)
        }
    }

    /// Ends an update: its `events` (its `Progress` among them) are delivered to `deliver`
    /// now, or, when it `compiled`, once an update that compiled nothing gives the overhead.
    /// `wall` is its rollout and update's wall time; its `phases` hold its evaluation's
    /// compile time, if any ([`CompileWatch::evaluated`]), which is kept.
    pub(crate) fn end(
        &mut self,
        events: Vec<TrainEvent>,
        wall: f64,
        phases: &PhaseTimes,
        compiled: Option<KernelCounts>,
        deliver: &mut dyn FnMut(TrainEvent),
    ) {
        if let Some(delta) = compiled {
            self.compiled = add(self.compiled, delta);
            self.held.push(Held {
                events,
                wall,
                waited: 0.0,
            });
            if self.steady.is_some() {
                self.release(deliver);
            }
            return;
        }
        let mut split = *phases;
        split.evaluation = 0.0;
        split.compile = 0.0;
        self.steady = Some((wall, split));
        self.release(deliver);
        events.into_iter().for_each(deliver);
    }

    /// Delivers what is held, as measured where no update has given the overhead yet (the
    /// run ended first).
    pub(crate) fn flush(&mut self, deliver: &mut dyn FnMut(TrainEvent)) {
        if self.steady.is_none() && !self.held.is_empty() {
            self.not_apart = true;
        }
        self.release(deliver);
    }

    fn release(&mut self, deliver: &mut dyn FnMut(TrainEvent)) {
        for held in std::mem::take(&mut self.held) {
            let fix = self.steady.map(|(steady_wall, split)| {
                let compile = (held.wall - steady_wall).max(0.0);
                (compile, split.scaled_to(held.wall - compile))
            });
            for mut event in held.events {
                if let TrainEvent::Progress { phases, .. } = &mut event {
                    if let Some((compile, steady_split)) = fix {
                        let (evaluation, evaluation_compile) = (phases.evaluation, phases.compile);
                        *phases = steady_split;
                        phases.evaluation = evaluation;
                        phases.compile = compile + evaluation_compile;
                    }
                    phases.compile += held.waited;
                }
                deliver(event);
            }
        }
    }
}

#[cfg(test)]
mod tests;
