//! The bottleneck verdict: from the phase split and the telemetry of a trial, say in plain
//! words what limits it and what to change.
//!
//! The rules are the reasoning of the user's own write-ups made explicit: a GPU at 55 % while a
//! Python environment stepped for 70 % of the time; "update-bound at 97 %: more GPU is the only
//! help"; out-of-memory from too many processes; an idle second GPU. Thresholds are constants
//! below so a test can state them.

use super::phase::{Phase, PhaseSplit};
use super::summary::TrialSummary;

/// A phase is "the bottleneck" when it takes at least half the timed phases' time.
///
/// Every share the verdict names is of the timed phases (environment, inference, update,
/// evaluation on the validation split, compiling), not of the trial's wall time: building the
/// trainer, evaluating on the test split and checkpointing are not timed, so the messages say
/// "of the timed phases" rather than claim a share of a whole they did not measure.
pub const PHASE_BOUND: f64 = 0.5;
/// Inference and evaluation are worth a word from these shares on.
pub const INFERENCE_HEAVY: f64 = 0.35;
pub const EVAL_HEAVY: f64 = 0.25;
/// Mean GPU utilisation at or above which an update-bound trial has saturated the device.
pub const GPU_SATURATED_PCT: f64 = 90.0;
/// Below this an update-bound trial leaves the GPU half idle: kernels are too small.
pub const GPU_UNDERFED_PCT: f64 = 50.0;
/// Memory use at or above this share of the budget counts as "budget reached".
pub const MEMORY_FULL: f64 = 0.95;
/// Throttled in at least this share of samples.
pub const THERMAL_THROTTLED: f64 = 0.10;
pub const POWER_THROTTLED: f64 = 0.25;
/// Minibatches smaller than this, in an update-bound trial, are named as the cause: on the CPU
/// always, on a GPU only where its card is underfed and nothing else on the list explains it.
pub const SMALL_BATCH: usize = 128;
/// A device below this mean utilisation while another is above [`IDLE_PEER_PCT`] sits idle.
pub const IDLE_PCT: f64 = 5.0;
pub const IDLE_PEER_PCT: f64 = 30.0;
/// Compiling kernels is worth a word from this share of the timed phases on.
pub const COMPILE_HEAVY: f64 = 0.25;
/// The process's mean CPU use (percent of one core) from which the thread submitting a GPU's
/// work counts as busy: a dispatch-bound trial keeps it busy while the card waits.
pub const SUBMITTER_BUSY_PCT: f64 = 80.0;
/// From this minibatch size on, an underfed GPU is not for want of a larger batch: "raise
/// batch_size" is said only below it.
pub const GPU_LARGE_BATCH: usize = 1024;

/// What limits a trial.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum VerdictKind {
    MemoryBudget,
    EnvBound,
    UpdateBoundDeviceLimit,
    UpdateBoundUnderfed,
    UpdateBoundCpu,
    /// Update-bound on a GPU whose load nobody sampled (no telemetry for the card, or
    /// telemetry off): the figures cannot tell the card's arithmetic from its launches.
    UpdateBoundGpuUnmeasured,
    InferenceHeavy,
    EvalHeavy,
    ThermalThrottling,
    PowerThrottling,
    IdleDevice,
    TinyMinibatches,
    SharedCores,
    CompileBound,
    DispatchBound,
    SharedDevice,
    HostEnvRoundTrips,
    Balanced,
}

/// One finding with its plain-language suggestion.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Verdict {
    pub kind: VerdictKind,
    pub message: String,
}

/// What the rules look at for one device.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DeviceFacts {
    /// `gpu0`, …
    pub device: String,
    pub mean_util_pct: Option<f64>,
    /// Peak memory this trial used on the device (its own process where known).
    pub peak_mem_mib: Option<f64>,
    /// The trial's memory budget on the device.
    pub mem_budget_mib: Option<f64>,
    /// `peak_mem_mib` is the whole card's use (every process's): the trial's own use was not
    /// known. It is then held against the card's size where that is known (`card_sized`),
    /// else against the trial's budget.
    pub whole_card_mem: bool,
    pub card_sized: bool,
    pub thermal_throttle_fraction: Option<f64>,
    pub power_throttle_fraction: Option<f64>,
}

/// Everything the verdict rules read.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct VerdictInput {
    pub phases: Option<PhaseSplit>,
    pub devices: Vec<DeviceFacts>,
    /// The environment already runs on the device (the tensor environment).
    pub on_device_env: bool,
    /// The trial's minibatch size, where the trial function has one.
    pub batch_size: Option<usize>,
    /// A trial on the CPU device: how many workers of the study train on the machine's cores
    /// (its own included) and how many cores there are.
    pub cpu_sharing: Option<CpuSharing>,
    /// What the trial's GPU runtime compiled and launched, where it trained on a GPU.
    pub gpu_work: Option<GpuWork>,
    /// Trials that trained on the trial's GPU at the same time, its own included (0 or 1:
    /// alone).
    pub trials_on_device: usize,
    /// The process's mean CPU use while the trial ran, percent of one core (all its threads).
    /// Give it only where the trial was the only one running in the process: other trials'
    /// threads count in it too, and it then says nothing of the thread feeding this trial's GPU.
    pub process_cpu_pct: Option<f64>,
}

/// What a GPU trial compiled and launched (`tradetune_device::kernels`).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct GpuWork {
    /// Kernels compiled and operations autotuned by the updates that compiled.
    pub kernels_compiled: u64,
    pub autotune_runs: u64,
    /// Kernel launches per minibatch of the update, and per environment step.
    pub dispatches_per_minibatch: Option<f64>,
    pub dispatches_per_env_step: Option<f64>,
    /// Host reads and synchronisations per update, and the rollout's steps per update.
    pub syncs_per_update: Option<u64>,
    pub n_steps: Option<usize>,
    /// The variable that turned the GPU driver's own shader cache off, if one did
    /// (`tradetune_device::kernels::driver_shader_cache_off`).
    pub driver_shader_cache_off: Option<&'static str>,
    /// Whether the rollouts replayed their policy step from a captured graph
    /// (`TRADETUNE_REPLAY_POLICY`).
    pub policy_steps_replayed: bool,
    /// Whether a replay of the policy step failed on this card (the driver refused it), so the
    /// rest of the run launched it directly.
    pub policy_replay_failed: bool,
    /// Whether the updates replayed their minibatches from a captured graph
    /// (`TRADETUNE_REPLAY_UPDATE`), and whether a replay of them failed on this card.
    pub minibatches_replayed: bool,
    pub minibatch_replay_failed: bool,
    /// Seconds `env.placement = "auto"` spent measuring both placements before the trial
    /// trained (counted in its compile phase), where it measured.
    pub placement_measure_s: Option<f64>,
    /// Whether `auto`'s decision is kept for later trials of the shape (TradeTune's GPU cache
    /// on and written).
    pub placement_kept: bool,
    /// Whether a later process autotunes this trial's shapes again: TradeTune's GPU cache is
    /// off, its store cannot be used, or reads and writes of it failed in this process
    /// (`tradetune_device::kernels::CacheSetting::keeps_answers`, `cache_store::failures`).
    pub autotune_not_kept: bool,
    /// Where `env.placement = "auto"` placed the trial's environment: its measured rollout
    /// step, milliseconds with the environment on the host and on the device.
    pub auto_step_ms: Option<(f64, f64)>,
    /// Whether every update of a run compiled kernels (a one-update trial, say), so that no
    /// update gave a steady time to measure compiling against: its time is then inside the
    /// other phases, not in the compile phase.
    pub compile_not_apart: bool,
}

/// Workers sharing the host's cores (CPU workers of one process share one thread pool).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuSharing {
    pub workers: usize,
    pub cores: usize,
}

impl VerdictInput {
    /// The facts of a trial summary; `budgets_mib` gives each device's memory budget
    /// (`("gpu0", 12288.0)`); without one, the card's total memory is the budget.
    pub fn from_summary(
        summary: &TrialSummary,
        budgets_mib: &[(String, f64)],
        on_device_env: bool,
    ) -> VerdictInput {
        VerdictInput {
            phases: summary.phases,
            on_device_env,
            batch_size: None,
            cpu_sharing: None,
            gpu_work: None,
            trials_on_device: 0,
            process_cpu_pct: summary.host.mean_process_cpu_pct,
            devices: summary
                .devices
                .iter()
                .map(|d| {
                    let budget = (budgets_mib.iter())
                        .find(|(n, _)| *n == d.device)
                        .map(|(_, b)| *b);
                    // The trial's own memory against its budget; where only the whole card's
                    // use is known (NVML in a container, an amdgpu without per-process
                    // figures), that against the whole card: the desktop's and other
                    // processes' memory is not the trial's to count against its budget.
                    let own = d.peak_process_mem_used_mib;
                    DeviceFacts {
                        device: d.device.clone(),
                        mean_util_pct: d.mean_util_pct,
                        peak_mem_mib: own.or(d.peak_mem_used_mib),
                        mem_budget_mib: match own {
                            Some(_) => budget.or(d.mem_total_mib),
                            None => d.mem_total_mib.or(budget),
                        },
                        whole_card_mem: own.is_none(),
                        card_sized: own.is_none() && d.mem_total_mib.is_some(),
                        thermal_throttle_fraction: d.thermal_throttle_fraction,
                        power_throttle_fraction: d.power_throttle_fraction,
                    }
                })
                .collect(),
        }
    }
}

fn pct(fraction: f64) -> String {
    format!("{:.0} %", fraction * 100.0)
}

/// The findings, most pressing first; exactly one `Balanced` when nothing stands out.
pub fn verdicts(input: &VerdictInput) -> Vec<Verdict> {
    let mut out = Vec::new();
    let mut say = |kind, message: String| out.push(Verdict { kind, message });

    for d in &input.devices {
        if let (Some(used), Some(budget)) = (d.peak_mem_mib, d.mem_budget_mib)
            && budget > 0.0
            && used >= MEMORY_FULL * budget
        {
            let what = if d.card_sized {
                format!(
                    "{} nearly full ({used:.0} of {budget:.0} MiB, every process's; this \
                     trial's own use was not measured)",
                    d.device
                )
            } else if d.whole_card_mem {
                format!(
                    "memory budget reached on {} ({used:.0} of {budget:.0} MiB; the card's use \
                     by every process, this trial's own was not measured)",
                    d.device
                )
            } else {
                format!(
                    "memory budget reached on {} ({used:.0} of {budget:.0} MiB)",
                    d.device
                )
            };
            say(
                VerdictKind::MemoryBudget,
                format!(
                    "{what}: lower batch_size or the network's size, or train in half precision \
                     where the device has it (f16 on wgpu with the card's shader-f16; wgpu has \
                     no bf16, CUDA and ROCm have both)"
                ),
            );
        }
    }

    // The busiest device stands for "the GPU" of a phase-bound trial.
    let busiest = input
        .devices
        .iter()
        .filter_map(|d| d.mean_util_pct.map(|u| (d, u)))
        .max_by(|a, b| a.1.total_cmp(&b.1));

    // The mean utilisation covers the whole trial, the seconds the card sat idle while kernels
    // compiled included, and so does the process's CPU, busy compiling them: where compiling is
    // heavy, or hidden inside every update, a card under half busy beside a busy process may
    // only have been waiting for its kernels.
    let compiling = input
        .phases
        .filter(|p| p.total_s() > 0.0)
        .is_some_and(|p| p.fraction(Phase::Compile) >= COMPILE_HEAVY)
        || input.gpu_work.is_some_and(|w| w.compile_not_apart);
    // The environment stepping on the host for most of the timed phases: the process's CPU is
    // busy with it, not with feeding the card (that is the env-bound verdict).
    let host_env_bound = !input.on_device_env
        && input
            .phases
            .filter(|p| p.total_s() > 0.0)
            .is_some_and(|p| p.fraction(Phase::Env) >= PHASE_BOUND);
    // A GPU under half busy while the process feeding it is busy, and not compiling: the time
    // goes to launching kernels and waiting on round-trips, not to arithmetic. The process's
    // CPU is the feeding thread's only where nothing else in it is busy: `process_cpu_pct` is
    // given only for a trial alone in its process, and host env stepping rules it out.
    let dispatch_bound = input.gpu_work.is_some()
        && busiest.is_some_and(|(_, u)| u < GPU_UNDERFED_PCT)
        && input
            .process_cpu_pct
            .is_some_and(|c| c >= SUBMITTER_BUSY_PCT)
        && !compiling
        && !host_env_bound;
    let shared = input.trials_on_device > 1 && busiest.is_none_or(|(_, u)| u < GPU_SATURATED_PCT);

    if let Some(p) = input.phases.filter(|p| p.total_s() > 0.0) {
        let compile = p.fraction(Phase::Compile);
        if compile >= COMPILE_HEAVY {
            let counted = match input.gpu_work {
                Some(w) if w.kernels_compiled > 0 => format!(
                    " ({} kernels compiled, {} operations autotuned)",
                    w.kernels_compiled, w.autotune_runs
                ),
                _ => String::new(),
            };
            // `auto`'s measuring compiles both placements' kernels before the first update.
            let measured = input
                .gpu_work
                .and_then(|w| Some((w.placement_measure_s?, w.placement_kept)));
            let measuring = match measured {
                Some((m, kept)) if m > 0.0 => format!(
                    ", {m:.1} s of it measuring where the environment steps faster (env.placement = \"auto\": {})",
                    if kept {
                        "the decision is kept for later trials of these shapes"
                    } else {
                        "measured again by every trial, since TradeTune's GPU cache is off or could not keep the decision"
                    }
                ),
                _ => String::new(),
            };
            say(
                VerdictKind::CompileBound,
                format!(
                    "compiling kernels for these shapes took {:.1} s, {} of the timed phases{counted}{measuring}: a new configuration pays it once — a later trial of the same shapes in this process compiles nothing, {}, and a longer trial spreads the rest{}",
                    p.compile_s,
                    pct(compile),
                    if input.gpu_work.is_some_and(|w| w.autotune_not_kept) {
                        "but a later process autotunes them again: TradeTune's GPU cache is off or could not keep the answers (see its warning)"
                    } else {
                        "a later process autotunes nothing where TradeTune's GPU cache is on"
                    },
                    match input.gpu_work.and_then(|w| w.driver_shader_cache_off) {
                        Some(var) => format!(
                            "; the GPU driver's shader cache is off ({var}), so every process compiles every pipeline again: unset it"
                        ),
                        None => String::new(),
                    }
                ),
            );
        }
        // Where no update ran without compiling, the other phases hold the compiling.
        if input.gpu_work.is_some_and(|w| w.compile_not_apart) {
            say(
                VerdictKind::CompileBound,
                "every update compiled kernels, so no update gave a steady time to measure compiling against: it is inside the other phases' times, whose shares are not the steady state's — a trial with more updates tells them apart".to_owned(),
            );
        }
        // A card under half busy that nothing else on the list explains (its launches, other
        // trials' kernels, compiling): only there can a larger minibatch be what it lacks.
        let underfed = busiest.is_some_and(|(_, u)| u < GPU_UNDERFED_PCT)
            && !dispatch_bound
            && !shared
            && !compiling;
        let env = p.fraction(Phase::Env);
        let update = p.fraction(Phase::Update);
        let rollout = env + p.fraction(Phase::Inference);
        if let Some(w) = input.gpu_work
            && !input.on_device_env
            && rollout >= PHASE_BOUND
            && let (Some(syncs), Some(steps)) = (w.syncs_per_update, w.n_steps)
            && syncs as usize >= steps
        {
            // Where `auto` measured the device's environment slower on this card, moving it
            // there is no fix: fewer, fuller round-trips are.
            let fix = match w.auto_step_ms {
                Some((host, device)) if host < device => format!(
                    "env.placement = \"auto\" measured the environment on the device slower here ({device:.2} ms a step against {host:.2} on the host), so raise n_envs: each round-trip then serves more environments"
                ),
                _ => "put the environment on the device (env.placement = \"device\")".to_owned(),
            };
            say(
                VerdictKind::HostEnvRoundTrips,
                format!(
                    "the rollout is {} of the timed phases with the environment on the host: each of its {steps} steps reads the actions back from the GPU ({syncs} round-trips per update), and each waits for the card — {fix}",
                    pct(rollout)
                ),
            );
        }
        if shared {
            let busy = busiest.map_or(String::new(), |(d, u)| {
                format!(" ({} {u:.0} % busy)", d.device)
            });
            say(
                VerdictKind::SharedDevice,
                format!(
                    "{} trials shared one GPU{busy}: each synchronisation waits for the other trials' kernels as well as its own — run one trial per card (the runner's default, gpu_sharing = \"serial\")",
                    input.trials_on_device
                ),
            );
        }
        if dispatch_bound && let Some((d, u)) = busiest {
            let per = input
                .gpu_work
                .and_then(|w| w.dispatches_per_minibatch)
                .map_or(String::new(), |n| {
                    format!(", {n:.0} launches per minibatch")
                });
            // Where the update is a large part, replaying its minibatches saves most of their
            // launches' host cost (measured on a software adapter, not yet on a card).
            let replay = match input.gpu_work {
                Some(w) if update >= PHASE_BOUND && w.minibatch_replay_failed => {
                    " (the replayed minibatches failed on this card, so the rest of the run launched them directly: the trial's user attribute update_replay_fallback says why)"
                }
                Some(w) if update >= PHASE_BOUND && !w.minibatches_replayed => {
                    "; the update's minibatches can be replayed from a graph captured once (TRADETUNE_REPLAY_UPDATE=1; `tradetune bench gpu --minibatches direct,replay` measures what it saves on this card)"
                }
                _ => "",
            };
            say(
                VerdictKind::DispatchBound,
                format!(
                    "dispatch-bound: {} only {u:.0} % busy while the process feeding it, the only trial running in it, used {:.0} % of a core (all its threads, measured for the process{per}): the cost is per kernel launch and per round-trip, not per FLOP — fewer, larger launches help (more envs per step, the environment on the device); a larger batch_size does not by itself{replay}",
                    d.device,
                    input.process_cpu_pct.unwrap_or(0.0)
                ),
            );
        }
        if env >= PHASE_BOUND {
            let fix = if input.on_device_env {
                "raise n_envs so each step does more work at once"
            } else {
                "raise n_envs or use the on-device environment"
            };
            say(
                VerdictKind::EnvBound,
                format!(
                    "environment stepping is {} of the timed phases: {fix}",
                    pct(env)
                ),
            );
        }
        if update >= PHASE_BOUND {
            match busiest {
                Some((d, u)) if u >= GPU_SATURATED_PCT => say(
                    VerdictKind::UpdateBoundDeviceLimit,
                    format!(
                        "update-bound and {} busy {u:.0} %: this device is the limit",
                        d.device
                    ),
                ),
                // "Raise batch_size" only where the figures say it would help: a small
                // minibatch, and not a card held back by launches, by other trials or by
                // compiling.
                Some((d, u))
                    if underfed && input.batch_size.is_none_or(|b| b < GPU_LARGE_BATCH) =>
                {
                    say(
                        VerdictKind::UpdateBoundUnderfed,
                        format!(
                            "update-bound but {} only {u:.0} % busy: its kernels are too small to fill it — raise batch_size (or net size)",
                            d.device
                        ),
                    )
                }
                Some(_) => {}
                None if input.gpu_work.is_some() => {
                    let per = input
                        .gpu_work
                        .and_then(|w| w.dispatches_per_minibatch)
                        .map_or(String::new(), |n| {
                            format!(" ({n:.0} launches per minibatch)")
                        });
                    say(
                        VerdictKind::UpdateBoundGpuUnmeasured,
                        format!(
                            "the update is {} of the timed phases{per} on a GPU whose load was not sampled (no telemetry for this card, telemetry off, or a trial shorter than a sample): `tradetune bench gpu` on this card tells its arithmetic from its launches (the update's GFLOP/s against the matmul probe, the launches per minibatch)",
                            pct(update)
                        ),
                    )
                }
                None => say(
                    VerdictKind::UpdateBoundCpu,
                    format!(
                        "the update is {} of the timed phases and no GPU was measured: training on a GPU would help most",
                        pct(update)
                    ),
                ),
            }
        }
        // On the CPU a small minibatch pays the per-operation cost alone; on a GPU it is named
        // only where the card is underfed for want of work, as for the update-bound rule above:
        // beside a dispatch-bound card, a shared one, a saturated one or one the compiling or a
        // missing sample leaves unexplained, "raise batch_size" would contradict the list.
        let on_gpu = input.gpu_work.is_some() || busiest.is_some();
        if let Some(b) = input.batch_size.filter(|b| *b < SMALL_BATCH)
            && update >= PHASE_BOUND
            && (!on_gpu || underfed)
        {
            say(
                VerdictKind::TinyMinibatches,
                format!(
                    "the update is {} of the timed phases in minibatches of {b}: each pays a fixed per-operation cost — raise batch_size to 256 or more",
                    pct(update)
                ),
            );
        }
        let inference = p.fraction(Phase::Inference);
        if inference >= INFERENCE_HEAVY {
            // On a GPU a small forward pass is its launches' host cost: a replayed step saves
            // most of it (measured on a software adapter, not yet on a card: the bench says).
            let replay = match input.gpu_work {
                Some(w) if w.policy_replay_failed => {
                    " (the replayed policy step failed on this card, so the rest of the run launched it directly: the trial's user attribute policy_replay_fallback says why)"
                }
                Some(w) if !w.policy_steps_replayed => {
                    ", or replay the policy step from a graph captured once a run (TRADETUNE_REPLAY_POLICY=1; `tradetune bench gpu --policy-steps direct,replay` measures what it saves on this card)"
                }
                _ => "",
            };
            say(
                VerdictKind::InferenceHeavy,
                format!(
                    "policy inference is {} of the timed phases: raise n_envs so each forward pass serves more environments{replay}",
                    pct(inference)
                ),
            );
        }
        let eval = p.fraction(Phase::Eval);
        if eval >= EVAL_HEAVY {
            say(
                VerdictKind::EvalHeavy,
                format!(
                    "evaluation is {} of the timed phases: evaluate less often or on a shorter validation split",
                    pct(eval)
                ),
            );
        }
    }

    for d in &input.devices {
        if let Some(f) = d
            .thermal_throttle_fraction
            .filter(|f| *f >= THERMAL_THROTTLED)
        {
            say(
                VerdictKind::ThermalThrottling,
                format!(
                    "thermal throttling {} of the time on {}: improve cooling or lower the power limit",
                    pct(f),
                    d.device
                ),
            );
        }
        if let Some(f) = d.power_throttle_fraction.filter(|f| *f >= POWER_THROTTLED) {
            say(
                VerdictKind::PowerThrottling,
                format!(
                    "power-limited {} of the time on {}: the board's power limit holds the clocks down",
                    pct(f),
                    d.device
                ),
            );
        }
    }

    if let Some((peer, peer_util)) = busiest.filter(|(_, u)| *u >= IDLE_PEER_PCT) {
        for d in &input.devices {
            if let Some(u) = d.mean_util_pct.filter(|u| *u < IDLE_PCT) {
                say(
                    VerdictKind::IdleDevice,
                    format!(
                        "{} averaged {u:.0} % busy while {} was {peer_util:.0} %: no work reached it — check which device each worker uses",
                        d.device, peer.device
                    ),
                );
            }
        }
    }

    if let Some(c) = input.cpu_sharing.filter(|c| c.workers > 1) {
        say(
            VerdictKind::SharedCores,
            format!(
                "{} CPU workers share this machine's {} cores: each trial runs at roughly 1/{} of its speed alone — fewer CPU workers make each trial faster (`tradetune study speed` measures the gap)",
                c.workers, c.cores, c.workers
            ),
        );
    }

    if out.is_empty() {
        let message = match input.phases.filter(|p| p.total_s() > 0.0) {
            Some(p) => format!(
                "no single bottleneck: env {}, inference {}, update {}, eval {}",
                pct(p.fraction(Phase::Env)),
                pct(p.fraction(Phase::Inference)),
                pct(p.fraction(Phase::Update)),
                pct(p.fraction(Phase::Eval))
            ),
            None => "no single bottleneck in the telemetry (no phase timings recorded)".into(),
        };
        out.push(Verdict {
            kind: VerdictKind::Balanced,
            message,
        });
    }
    out
}
