//! The bottleneck verdict rules on constructed summaries: each rule fires on the situation it
//! describes (the user's own cases) and stays quiet just below its threshold.

use tradetune_engine::telemetry::verdict::{
    COMPILE_HEAVY, CpuSharing, DeviceFacts, GPU_LARGE_BATCH, GPU_SATURATED_PCT, GPU_UNDERFED_PCT,
    GpuWork, MEMORY_FULL, PHASE_BOUND, SMALL_BATCH, SUBMITTER_BUSY_PCT, THERMAL_THROTTLED,
    VerdictInput,
};
use tradetune_engine::telemetry::{
    DeviceSummary, Phase, PhaseSplit, TrialSummary, VerdictKind, verdicts,
};

fn split(env: f64, inference: f64, update: f64, eval: f64) -> Option<PhaseSplit> {
    Some(PhaseSplit {
        env_s: env,
        inference_s: inference,
        update_s: update,
        eval_s: eval,
        compile_s: 0.0,
    })
}

fn gpu(name: &str, util: f64) -> DeviceFacts {
    DeviceFacts {
        device: name.into(),
        mean_util_pct: Some(util),
        ..Default::default()
    }
}

fn kinds(input: &VerdictInput) -> Vec<VerdictKind> {
    verdicts(input).into_iter().map(|v| v.kind).collect()
}

#[test]
fn env_bound_python_loop_case() {
    // The seeds: rollout 70 % of the time, GPU at 55 %.
    let input = VerdictInput {
        phases: split(70.0, 5.0, 25.0, 0.0),
        devices: vec![gpu("gpu0", 55.0)],
        on_device_env: false,
        ..Default::default()
    };
    let v = verdicts(&input);
    assert_eq!(v.len(), 1);
    assert_eq!(v[0].kind, VerdictKind::EnvBound);
    assert_eq!(
        v[0].message,
        "environment stepping is 70 % of the timed phases: raise n_envs or use the on-device environment"
    );
    let on_device = VerdictInput {
        on_device_env: true,
        ..input
    };
    assert!(
        verdicts(&on_device)[0]
            .message
            .contains("raise n_envs so each step")
    );
}

#[test]
fn update_bound_on_a_saturated_device() {
    let input = VerdictInput {
        phases: split(10.0, 5.0, 80.0, 5.0),
        devices: vec![gpu("gpu0", 97.0)],
        on_device_env: true,
        ..Default::default()
    };
    let v = verdicts(&input);
    assert_eq!(v[0].kind, VerdictKind::UpdateBoundDeviceLimit);
    assert_eq!(
        v[0].message,
        "update-bound and gpu0 busy 97 %: this device is the limit"
    );
}

#[test]
fn update_bound_but_underfed_and_update_bound_on_cpu() {
    let underfed = VerdictInput {
        phases: split(10.0, 5.0, 80.0, 5.0),
        devices: vec![gpu("gpu0", 35.0)],
        on_device_env: true,
        ..Default::default()
    };
    assert_eq!(kinds(&underfed), [VerdictKind::UpdateBoundUnderfed]);
    assert!(verdicts(&underfed)[0].message.contains("raise batch_size"));
    let cpu = VerdictInput {
        phases: split(10.0, 5.0, 80.0, 5.0),
        devices: vec![],
        on_device_env: false,
        ..Default::default()
    };
    assert_eq!(kinds(&cpu), [VerdictKind::UpdateBoundCpu]);
    // A GPU trial whose card nobody sampled (telemetry off, or none for this card) is not
    // told to train on a GPU: it is told how to find out what limits it there.
    let unsampled = VerdictInput {
        gpu_work: Some(GpuWork {
            dispatches_per_minibatch: Some(20.4),
            ..GpuWork::default()
        }),
        ..cpu.clone()
    };
    assert_eq!(kinds(&unsampled), [VerdictKind::UpdateBoundGpuUnmeasured]);
    let m = &verdicts(&unsampled)[0].message;
    assert!(!m.contains("training on a GPU would help"), "{m}");
    assert!(
        m.contains("not sampled") && m.contains("20 launches per minibatch"),
        "{m}"
    );
    assert!(m.contains("tradetune bench gpu"), "{m}");
    // Between the two thresholds: update-bound, GPU fairly busy — nothing to say about it.
    let middle = VerdictInput {
        phases: split(10.0, 5.0, 80.0, 5.0),
        devices: vec![gpu("gpu0", GPU_SATURATED_PCT - 1.0)],
        on_device_env: true,
        ..Default::default()
    };
    assert_eq!(kinds(&middle), [VerdictKind::Balanced]);
}

#[test]
fn memory_budget_reached() {
    let mut d = gpu("gpu0", 70.0);
    d.peak_mem_mib = Some(15_200.0);
    d.mem_budget_mib = Some(15_360.0);
    let input = VerdictInput {
        phases: split(30.0, 20.0, 40.0, 10.0),
        devices: vec![d.clone()],
        on_device_env: true,
        ..Default::default()
    };
    let v = verdicts(&input);
    assert_eq!(v[0].kind, VerdictKind::MemoryBudget);
    assert_eq!(
        v[0].message,
        "memory budget reached on gpu0 (15200 of 15360 MiB): lower batch_size or the network's size, \
         or train in half precision where the device has it (f16 on wgpu with the card's \
         shader-f16; wgpu has no bf16, CUDA and ROCm have both)"
    );
    d.peak_mem_mib = Some(MEMORY_FULL * 15_360.0 - 1.0);
    let below = VerdictInput {
        devices: vec![d],
        ..input
    };
    assert_eq!(kinds(&below), [VerdictKind::Balanced]);
}

#[test]
fn thermal_and_power_throttling() {
    let mut d = gpu("gpu0", 80.0);
    d.thermal_throttle_fraction = Some(0.3);
    d.power_throttle_fraction = Some(0.4);
    let input = VerdictInput {
        phases: split(30.0, 20.0, 40.0, 10.0),
        devices: vec![d.clone()],
        on_device_env: true,
        ..Default::default()
    };
    let v = verdicts(&input);
    assert_eq!(
        v.iter().map(|v| v.kind).collect::<Vec<_>>(),
        [VerdictKind::ThermalThrottling, VerdictKind::PowerThrottling]
    );
    assert!(
        v[0].message
            .starts_with("thermal throttling 30 % of the time on gpu0")
    );
    d.thermal_throttle_fraction = Some(THERMAL_THROTTLED - 0.01);
    d.power_throttle_fraction = None;
    let quiet = VerdictInput {
        devices: vec![d],
        ..input
    };
    assert_eq!(kinds(&quiet), [VerdictKind::Balanced]);
}

#[test]
fn the_idle_second_gpu() {
    // The seeds: "GPU0 0 %, GPU1 28 % average, 78 % peak" — here gpu1 works, gpu0 idles.
    let input = VerdictInput {
        phases: split(30.0, 20.0, 40.0, 10.0),
        devices: vec![gpu("gpu0", 0.0), gpu("gpu1", 82.0)],
        on_device_env: true,
        ..Default::default()
    };
    let v = verdicts(&input);
    assert_eq!(v.len(), 1);
    assert_eq!(v[0].kind, VerdictKind::IdleDevice);
    assert!(
        v[0].message
            .starts_with("gpu0 averaged 0 % busy while gpu1 was 82 %")
    );
}

#[test]
fn inference_and_eval_heavy() {
    let input = VerdictInput {
        phases: split(10.0, 40.0, 20.0, 30.0),
        devices: vec![gpu("gpu0", 70.0)],
        on_device_env: true,
        ..Default::default()
    };
    assert_eq!(
        kinds(&input),
        [VerdictKind::InferenceHeavy, VerdictKind::EvalHeavy]
    );
    // Without what a GPU launched (a CPU trial here), the fix is the envs alone.
    let inference = |input: &VerdictInput| {
        verdicts(input)
            .into_iter()
            .find(|v| v.kind == VerdictKind::InferenceHeavy)
            .expect("inference-heavy")
            .message
    };
    assert_eq!(
        inference(&input),
        "policy inference is 40 % of the timed phases: raise n_envs so each forward pass serves more environments"
    );
    // On a GPU whose rollouts launched each policy step directly, replaying it is named too,
    // with the command that measures it on the card; where they replayed it, it is not.
    let mut on_gpu = VerdictInput {
        gpu_work: Some(GpuWork::default()),
        ..input
    };
    assert!(
        inference(&on_gpu).ends_with(
            "environments, or replay the policy step from a graph captured once a run (TRADETUNE_REPLAY_POLICY=1; `tradetune bench gpu --policy-steps direct,replay` measures what it saves on this card)"
        ),
        "{}",
        inference(&on_gpu)
    );
    if let Some(w) = &mut on_gpu.gpu_work {
        w.policy_steps_replayed = true;
    }
    assert!(
        inference(&on_gpu).ends_with("serves more environments"),
        "{}",
        inference(&on_gpu)
    );
    // Where a replay failed on the card, replaying is not offered again: the verdict says it
    // failed and where the reason is.
    if let Some(w) = &mut on_gpu.gpu_work {
        w.policy_replay_failed = true;
    }
    assert!(
        inference(&on_gpu).ends_with(
            "environments (the replayed policy step failed on this card, so the rest of the run launched it directly: the trial's user attribute policy_replay_fallback says why)"
        ),
        "{}",
        inference(&on_gpu)
    );
}

#[test]
fn balanced_run_names_the_split() {
    let input = VerdictInput {
        phases: split(30.0, 20.0, 40.0, 10.0),
        devices: vec![gpu("gpu0", 75.0)],
        on_device_env: true,
        ..Default::default()
    };
    let v = verdicts(&input);
    assert_eq!(v.len(), 1);
    assert_eq!(
        v[0].message,
        "no single bottleneck: env 30 %, inference 20 %, update 40 %, eval 10 %"
    );
    let nothing = VerdictInput::default();
    assert_eq!(kinds(&nothing), [VerdictKind::Balanced]);
}

#[test]
fn exactly_at_the_phase_threshold_fires() {
    let input = VerdictInput {
        phases: split(PHASE_BOUND * 100.0, 0.0, (1.0 - PHASE_BOUND) * 100.0, 0.0),
        devices: vec![gpu("gpu0", 70.0)],
        on_device_env: false,
        ..Default::default()
    };
    assert!(kinds(&input).contains(&VerdictKind::EnvBound));
}

#[test]
fn from_summary_uses_budget_then_card_size_and_process_memory_first() {
    let summary = TrialSummary {
        phases: split(20.0, 10.0, 60.0, 10.0),
        devices: vec![
            DeviceSummary {
                device: "gpu0".into(),
                mean_util_pct: Some(98.0),
                peak_mem_used_mib: Some(15_000.0),
                peak_process_mem_used_mib: Some(6_000.0),
                mem_total_mib: Some(16_376.0),
                ..Default::default()
            },
            DeviceSummary {
                device: "gpu1".into(),
                mean_util_pct: Some(60.0),
                peak_mem_used_mib: Some(16_000.0),
                mem_total_mib: Some(16_376.0),
                ..Default::default()
            },
        ],
        ..Default::default()
    };
    // gpu0: the process used 6000 of a 6144 MiB budget → full. gpu1: no budget given, card
    // total 16376, 16000 used → below 95 %? 16000/16376 = 97.7 % → full too.
    let input = VerdictInput::from_summary(&summary, &[("gpu0".into(), 6144.0)], true);
    assert_eq!(input.devices[0].peak_mem_mib, Some(6000.0));
    assert_eq!(input.devices[0].mem_budget_mib, Some(6144.0));
    assert_eq!(input.devices[1].mem_budget_mib, Some(16_376.0));
    assert_eq!(
        kinds(&input),
        [
            VerdictKind::MemoryBudget,
            VerdictKind::MemoryBudget,
            VerdictKind::UpdateBoundDeviceLimit
        ]
    );
    // Without the process's own figure, the whole card's use is held against the whole card,
    // not against the trial's budget: 12800 MiB used of a 16376 MiB card (the desktop's and
    // other processes' memory in it) is not a trial at its 13107 MiB budget.
    let mut summary = summary;
    summary.devices.truncate(1);
    summary.devices[0].peak_process_mem_used_mib = None;
    summary.devices[0].peak_mem_used_mib = Some(12_800.0);
    let input = VerdictInput::from_summary(&summary, &[("gpu0".into(), 13_107.0)], true);
    assert_eq!(input.devices[0].peak_mem_mib, Some(12_800.0));
    assert_eq!(input.devices[0].mem_budget_mib, Some(16_376.0));
    assert!(!kinds(&input).contains(&VerdictKind::MemoryBudget));
    // A card nearly full is said as the card's, not as the trial's budget.
    summary.devices[0].peak_mem_used_mib = Some(16_000.0);
    let input = VerdictInput::from_summary(&summary, &[("gpu0".into(), 13_107.0)], true);
    let v = verdicts(&input);
    assert_eq!(v[0].kind, VerdictKind::MemoryBudget);
    assert!(
        v[0].message.starts_with(
            "gpu0 nearly full (16000 of 16376 MiB, every process's; this trial's own use was \
             not measured)"
        ),
        "{}",
        v[0].message
    );
}

#[test]
fn tiny_minibatches_in_an_update_bound_trial() {
    let input = VerdictInput {
        phases: split(10.0, 5.0, 80.0, 5.0),
        batch_size: Some(64),
        ..Default::default()
    };
    let v = verdicts(&input);
    assert_eq!(
        v.iter().map(|v| v.kind).collect::<Vec<_>>(),
        [VerdictKind::UpdateBoundCpu, VerdictKind::TinyMinibatches]
    );
    assert_eq!(
        v[1].message,
        "the update is 80 % of the timed phases in minibatches of 64: each pays a fixed per-operation cost — raise batch_size to 256 or more"
    );
    // A batch of SMALL_BATCH, or small batches in a trial the update does not bind: nothing.
    let big = VerdictInput {
        batch_size: Some(SMALL_BATCH),
        ..input.clone()
    };
    assert_eq!(kinds(&big), [VerdictKind::UpdateBoundCpu]);
    let env_bound = VerdictInput {
        phases: split(80.0, 5.0, 10.0, 5.0),
        batch_size: Some(32),
        ..Default::default()
    };
    assert_eq!(kinds(&env_bound), [VerdictKind::EnvBound]);
}

#[test]
fn cpu_workers_sharing_the_cores() {
    let shared = VerdictInput {
        phases: split(40.0, 20.0, 30.0, 10.0),
        cpu_sharing: Some(CpuSharing {
            workers: 2,
            cores: 2,
        }),
        ..Default::default()
    };
    let v = verdicts(&shared);
    assert_eq!(v.len(), 1);
    assert_eq!(v[0].kind, VerdictKind::SharedCores);
    assert!(
        v[0].message
            .starts_with("2 CPU workers share this machine's 2 cores")
    );
    assert!(v[0].message.contains("fewer CPU workers"));
    let alone = VerdictInput {
        cpu_sharing: Some(CpuSharing {
            workers: 1,
            cores: 2,
        }),
        ..shared
    };
    assert_eq!(kinds(&alone), [VerdictKind::Balanced]);
}

/// Issue 32: the H100's first trial of the RTX 4080 preset, as measured on 2026-11-27 —
/// 69 s, most of it compiling, the card 18 % busy, minibatches of 1024.
fn gpu_trial(compile_s: f64, util: f64) -> VerdictInput {
    let mut phases = split(4.0, 6.0, 10.0, 0.0);
    if let Some(p) = &mut phases {
        p.compile_s = compile_s;
    }
    VerdictInput {
        phases,
        devices: vec![gpu("gpu0", util)],
        on_device_env: true,
        batch_size: Some(1024),
        gpu_work: Some(GpuWork {
            kernels_compiled: 181,
            autotune_runs: 51,
            dispatches_per_minibatch: Some(95.0),
            dispatches_per_env_step: Some(60.0),
            syncs_per_update: Some(1),
            n_steps: Some(256),
            driver_shader_cache_off: None,
            policy_steps_replayed: false,
            policy_replay_failed: false,
            minibatches_replayed: false,
            minibatch_replay_failed: false,
            placement_measure_s: None,
            placement_kept: false,
            autotune_not_kept: false,
            auto_step_ms: None,
            compile_not_apart: false,
        }),
        ..Default::default()
    }
}

#[test]
fn compile_time_names_a_driver_shader_cache_that_is_off() {
    let mut input = gpu_trial(49.0, 18.0);
    let v = verdicts(&input);
    assert!(!v[0].message.contains("shader cache"), "{}", v[0].message);
    if let Some(w) = &mut input.gpu_work {
        w.driver_shader_cache_off = Some("MESA_SHADER_CACHE_DISABLE");
    }
    let v = verdicts(&input);
    assert_eq!(v[0].kind, VerdictKind::CompileBound);
    assert!(
        v[0].message.ends_with(
            "; the GPU driver's shader cache is off (MESA_SHADER_CACHE_DISABLE), so every process compiles every pipeline again: unset it"
        ),
        "{}",
        v[0].message
    );
}

/// Where TradeTune's GPU cache could not keep the trial's autotune answers (off, a store that
/// cannot be used, reads and writes that failed), the verdict does not promise a later process
/// autotunes nothing.
#[test]
fn compile_time_says_when_the_gpu_cache_could_not_keep_the_answers() {
    let mut input = gpu_trial(49.0, 18.0);
    let kept = verdicts(&input)[0].message.clone();
    assert!(
        kept.contains("a later process autotunes nothing where TradeTune's GPU cache is on"),
        "{kept}"
    );
    if let Some(w) = &mut input.gpu_work {
        w.autotune_not_kept = true;
    }
    let v = verdicts(&input);
    assert_eq!(v[0].kind, VerdictKind::CompileBound);
    assert!(
        v[0].message.contains(
            "but a later process autotunes them again: TradeTune's GPU cache is off or could not keep the answers (see its warning)"
        ),
        "{}",
        v[0].message
    );
    assert!(
        !v[0].message.contains("autotunes nothing"),
        "{}",
        v[0].message
    );
}

#[test]
fn compile_time_is_named_with_what_was_compiled() {
    let v = verdicts(&gpu_trial(49.0, 18.0));
    assert_eq!(v[0].kind, VerdictKind::CompileBound);
    assert!(
        v[0].message.starts_with(
            "compiling kernels for these shapes took 49.0 s, 71 % of the timed phases (181 kernels compiled, 51 operations autotuned)"
        ),
        "{}",
        v[0].message
    );
    // Under the threshold it is not worth a word.
    let short = gpu_trial(COMPILE_HEAVY * 20.0 / (1.0 - COMPILE_HEAVY) * 0.9, 95.0);
    assert!(!kinds(&short).contains(&VerdictKind::CompileBound));
}

/// A trial whose every update compiled has no compile phase to show: the verdict says the
/// other phases hold it, before what those would otherwise suggest.
#[test]
fn compiling_inside_every_update_is_said_before_the_phases() {
    let mut input = gpu_trial(0.0, 18.0);
    input.phases = split(2.0, 3.0, 15.0, 0.0);
    assert!(
        !verdicts(&input)
            .iter()
            .any(|v| v.message.starts_with("every update compiled"))
    );
    if let Some(w) = &mut input.gpu_work {
        w.compile_not_apart = true;
    }
    let v = verdicts(&input);
    assert_eq!(v[0].kind, VerdictKind::CompileBound);
    assert_eq!(
        v[0].message,
        "every update compiled kernels, so no update gave a steady time to measure compiling against: it is inside the other phases' times, whose shares are not the steady state's — a trial with more updates tells them apart"
    );
    // What the phases suggest still follows it, but not "raise batch_size": the card's mean
    // utilisation covers the seconds it sat idle while every update compiled, so an 18 % busy
    // card does not show that it lacks work (the README says it only where the figures do).
    input.batch_size = Some(256);
    input.phases = split(15.0, 3.0, 2.0, 0.0);
    let v = verdicts(&input);
    assert_eq!(v[0].kind, VerdictKind::CompileBound);
    assert_eq!(v[1].kind, VerdictKind::EnvBound, "{v:?}");
    input.phases = split(2.0, 3.0, 15.0, 0.0);
    let v = verdicts(&input);
    assert_eq!(v[0].kind, VerdictKind::CompileBound);
    assert!(
        !v.iter().any(|v| v.kind == VerdictKind::UpdateBoundUnderfed
            || v.message.contains("raise batch_size")),
        "{v:?}"
    );
}

/// `env.placement = "auto"`'s measuring before the first update is part of the compile phase
/// it names, and said as such.
#[test]
fn compile_time_says_what_autos_placement_measuring_took_of_it() {
    let mut input = gpu_trial(49.0, 18.0);
    if let Some(w) = &mut input.gpu_work {
        w.placement_measure_s = Some(24.04);
        w.placement_kept = true;
    }
    let v = verdicts(&input);
    assert_eq!(v[0].kind, VerdictKind::CompileBound);
    assert!(
        v[0].message.starts_with(
            "compiling kernels for these shapes took 49.0 s, 71 % of the timed phases (181 kernels compiled, 51 operations autotuned), 24.0 s of it measuring where the environment steps faster (env.placement = \"auto\": the decision is kept for later trials of these shapes): a new configuration pays it once"
        ),
        "{}",
        v[0].message
    );
    // Where the decision is not kept (the GPU cache off), every trial measures again.
    if let Some(w) = &mut input.gpu_work {
        w.placement_kept = false;
    }
    assert!(
        verdicts(&input)[0].message.contains(
            ", 24.0 s of it measuring where the environment steps faster (env.placement = \"auto\": measured again by every trial, since TradeTune's GPU cache is off or could not keep the decision): "
        ),
        "{}",
        verdicts(&input)[0].message
    );
    // A kept decision measured nothing.
    if let Some(w) = &mut input.gpu_work {
        w.placement_measure_s = None;
    }
    assert!(!verdicts(&input)[0].message.contains("measuring"));
}

#[test]
fn a_gpu_under_half_busy_with_a_busy_submitter_is_dispatch_bound_not_short_of_batch() {
    let mut input = gpu_trial(0.0, 18.0);
    input.phases = split(2.0, 3.0, 15.0, 0.0);
    input.process_cpu_pct = Some(SUBMITTER_BUSY_PCT + 10.0);
    let v = verdicts(&input);
    let k: Vec<_> = v.iter().map(|v| v.kind).collect();
    assert!(k.contains(&VerdictKind::DispatchBound), "{v:?}");
    assert!(!k.contains(&VerdictKind::UpdateBoundUnderfed), "{v:?}");
    let d = v
        .iter()
        .find(|v| v.kind == VerdictKind::DispatchBound)
        .unwrap();
    assert!(
        d.message.contains("95 launches per minibatch"),
        "{}",
        d.message
    );
    // The update is most of this trial: replaying its minibatches is named, with the command
    // that measures it on the card; where they were replayed it is not; where a replay failed
    // the verdict says so and where the reason is.
    let dispatch = |input: &VerdictInput| {
        verdicts(input)
            .into_iter()
            .find(|v| v.kind == VerdictKind::DispatchBound)
            .expect("dispatch-bound")
            .message
    };
    assert!(
        d.message.ends_with(
            "does not by itself; the update's minibatches can be replayed from a graph captured once (TRADETUNE_REPLAY_UPDATE=1; `tradetune bench gpu --minibatches direct,replay` measures what it saves on this card)"
        ),
        "{}",
        d.message
    );
    let mut replayed = input.clone();
    if let Some(w) = &mut replayed.gpu_work {
        w.minibatches_replayed = true;
    }
    assert!(
        dispatch(&replayed).ends_with("does not by itself"),
        "{}",
        dispatch(&replayed)
    );
    if let Some(w) = &mut replayed.gpu_work {
        w.minibatch_replay_failed = true;
    }
    assert!(
        dispatch(&replayed).ends_with(
            "does not by itself (the replayed minibatches failed on this card, so the rest of the run launched them directly: the trial's user attribute update_replay_fallback says why)"
        ),
        "{}",
        dispatch(&replayed)
    );
    assert!(
        !v.iter().any(|v| v.message.contains("raise batch_size")),
        "{v:?}"
    );
    // The verdict said "raise batch_size" for a batch of 4096: with a large batch and no
    // sign of launches, it is not said either.
    input.process_cpu_pct = Some(10.0);
    input.batch_size = Some(4096);
    assert!(
        !verdicts(&input)
            .iter()
            .any(|v| v.message.contains("raise batch_size")),
        "{:?}",
        verdicts(&input)
    );
    // A small batch on an underfed card, with an idle submitter, still is.
    input.batch_size = Some(GPU_LARGE_BATCH / 2);
    assert!(kinds(&input).contains(&VerdictKind::UpdateBoundUnderfed));
}

#[test]
fn trials_sharing_a_card_are_told_to_take_turns() {
    let mut input = gpu_trial(0.0, 23.0);
    input.trials_on_device = 3;
    let v = verdicts(&input);
    let shared = v
        .iter()
        .find(|v| v.kind == VerdictKind::SharedDevice)
        .unwrap();
    assert!(
        shared.message.starts_with(
            "3 trials shared one GPU (gpu0 23 % busy): each synchronisation waits for the other trials' kernels"
        ),
        "{}",
        shared.message
    );
    assert!(!kinds(&input).contains(&VerdictKind::UpdateBoundUnderfed));
    input.trials_on_device = 1;
    assert!(!kinds(&input).contains(&VerdictKind::SharedDevice));
}

/// The message of `input`'s verdict of `kind` (there must be one).
fn said(input: &VerdictInput, kind: VerdictKind) -> String {
    verdicts(input)
        .into_iter()
        .find(|v| v.kind == kind)
        .unwrap_or_else(|| panic!("no {kind:?} verdict in {:?}", verdicts(input)))
        .message
}

#[test]
fn a_host_env_on_a_gpu_is_told_its_round_trips() {
    let mut input = gpu_trial(0.0, 30.0);
    input.on_device_env = false;
    input.phases = split(12.0, 6.0, 4.0, 0.0);
    if let Some(w) = &mut input.gpu_work {
        w.syncs_per_update = Some(257);
    }
    let trips = said(&input, VerdictKind::HostEnvRoundTrips);
    assert!(
        trips.contains(
            "each of its 256 steps reads the actions back from the GPU (257 round-trips per update)"
        ),
        "{}",
        trips
    );
    assert!(trips.contains("env.placement = \"device\""));
    // Where `auto` measured the device's environment slower, moving it is no fix.
    if let Some(w) = &mut input.gpu_work {
        w.auto_step_ms = Some((1.97, 3.28));
    }
    let trips = said(&input, VerdictKind::HostEnvRoundTrips);
    assert!(
        trips.ends_with(
            "and each waits for the card — env.placement = \"auto\" measured the environment on the device slower here (3.28 ms a step against 1.97 on the host), so raise n_envs: each round-trip then serves more environments"
        ),
        "{}",
        trips
    );
    // On the device, or on the CPU, it is not said.
    input.on_device_env = true;
    assert!(!kinds(&input).contains(&VerdictKind::HostEnvRoundTrips));
    input.on_device_env = false;
    input.gpu_work = None;
    assert!(!kinds(&input).contains(&VerdictKind::HostEnvRoundTrips));
}

/// The phases of a GPU trial whose card was `util` % busy, with minibatches of `batch`.
fn gpu_update_bound(util: f64, batch: usize) -> VerdictInput {
    let mut input = gpu_trial(0.0, util);
    input.phases = split(2.0, 3.0, 15.0, 0.0);
    input.batch_size = Some(batch);
    input
}

fn says_raise_batch_size(input: &VerdictInput) -> bool {
    verdicts(input)
        .iter()
        .any(|v| v.message.contains("raise batch_size"))
}

/// Tiny minibatches on a GPU are named only where the card is underfed for want of work: beside
/// a dispatch-bound card ("a larger batch_size does not by itself"), "this device is the
/// limit", trials sharing the card or a card nobody sampled, "raise batch_size" would
/// contradict the rest of the list.
#[test]
fn tiny_minibatches_on_a_gpu_only_where_the_card_lacks_work() {
    // Underfed, with an idle submitter and the card to itself: said, beside the update rule.
    let underfed = gpu_update_bound(18.0, 64);
    assert_eq!(
        kinds(&underfed),
        [
            VerdictKind::UpdateBoundUnderfed,
            VerdictKind::TinyMinibatches
        ]
    );
    // Dispatch-bound: the launches, not the batch.
    let mut dispatch = underfed.clone();
    dispatch.process_cpu_pct = Some(SUBMITTER_BUSY_PCT + 10.0);
    assert!(kinds(&dispatch).contains(&VerdictKind::DispatchBound));
    assert!(
        !says_raise_batch_size(&dispatch),
        "{:?}",
        verdicts(&dispatch)
    );
    // Saturated: the device is the limit.
    let saturated = gpu_update_bound(GPU_SATURATED_PCT + 5.0, 64);
    assert_eq!(kinds(&saturated), [VerdictKind::UpdateBoundDeviceLimit]);
    // Fairly busy, between the thresholds: nothing shows a larger batch would help.
    let busy = gpu_update_bound(GPU_UNDERFED_PCT + 10.0, 64);
    assert!(!says_raise_batch_size(&busy), "{:?}", verdicts(&busy));
    // Sharing the card with other trials: taking turns comes first.
    let mut shared = underfed.clone();
    shared.trials_on_device = 3;
    assert!(kinds(&shared).contains(&VerdictKind::SharedDevice));
    assert!(!says_raise_batch_size(&shared), "{:?}", verdicts(&shared));
    // A card nobody sampled: the bench tells, not a guess.
    let mut unsampled = underfed.clone();
    unsampled.devices.clear();
    assert_eq!(kinds(&unsampled), [VerdictKind::UpdateBoundGpuUnmeasured]);
}

/// Env 1 s, update 10 s and 6 s compiling: compile-heavy, and otherwise update-bound.
fn compiling_heavily() -> PhaseSplit {
    PhaseSplit {
        env_s: 1.0,
        inference_s: 0.0,
        update_s: 10.0,
        eval_s: 0.0,
        compile_s: 6.0,
    }
}

/// Issue: env 1 s, update 10 s, compiling 6 s, the card 40 % busy, minibatches of 512. The
/// card's mean utilisation covers the seconds it sat idle compiling, so it does not show that
/// the card lacks work: the verdict names the compiling and does not say "raise batch_size".
#[test]
fn a_card_idle_while_compiling_is_not_told_to_raise_batch_size() {
    let mut input = gpu_update_bound(40.0, 512);
    input.phases = Some(compiling_heavily());
    let v = verdicts(&input);
    assert_eq!(v[0].kind, VerdictKind::CompileBound, "{v:?}");
    assert!(
        !v.iter().any(|v| v.kind == VerdictKind::UpdateBoundUnderfed),
        "{v:?}"
    );
    assert!(!says_raise_batch_size(&input), "{v:?}");
    // Nor for tiny minibatches.
    input.batch_size = Some(64);
    assert!(!says_raise_batch_size(&input), "{:?}", verdicts(&input));
    // With compiling under COMPILE_HEAVY the utilisation is the steady card's, and it is said.
    input.batch_size = Some(512);
    if let Some(p) = &mut input.phases {
        p.compile_s = 1.0;
        assert!(p.fraction(Phase::Compile) < COMPILE_HEAVY);
    }
    assert_eq!(kinds(&input), [VerdictKind::UpdateBoundUnderfed]);
}

/// A trial mostly compiling keeps its process busy (compiling the kernels) while its card
/// waits for them: that is the compile time the list names first, not a dispatch-bound card,
/// whose fix (fewer launches) would not help. Once compiling is under its threshold and apart
/// from the updates, the same busy process beside an idle card is dispatch-bound again.
#[test]
fn a_process_busy_compiling_is_not_called_dispatch_bound() {
    let mut input = gpu_update_bound(18.0, 1024);
    input.process_cpu_pct = Some(SUBMITTER_BUSY_PCT + 10.0);
    assert!(kinds(&input).contains(&VerdictKind::DispatchBound));
    input.phases = Some(compiling_heavily());
    let k = kinds(&input);
    assert_eq!(k[0], VerdictKind::CompileBound, "{k:?}");
    assert!(!k.contains(&VerdictKind::DispatchBound), "{k:?}");
    // Compiling inside every update: the same.
    if let Some(p) = &mut input.phases {
        p.compile_s = 0.0;
    }
    assert!(kinds(&input).contains(&VerdictKind::DispatchBound));
    if let Some(w) = &mut input.gpu_work {
        w.compile_not_apart = true;
    }
    let k = kinds(&input);
    assert!(!k.contains(&VerdictKind::DispatchBound), "{k:?}");
}

/// Every share the verdict names is of the timed phases, not of the trial's wall time (which
/// also holds building the trainer, the test split's evaluation and checkpointing): the words
/// say so.
#[test]
fn shares_are_said_of_the_timed_phases() {
    let v = verdicts(&gpu_trial(49.0, 18.0));
    assert!(
        v[0].message.contains("49.0 s, 71 % of the timed phases"),
        "{}",
        v[0].message
    );
    let inputs = [
        gpu_trial(49.0, 18.0),
        gpu_update_bound(18.0, 64),
        VerdictInput {
            phases: split(10.0, 40.0, 20.0, 30.0),
            ..Default::default()
        },
        VerdictInput {
            phases: split(70.0, 5.0, 25.0, 0.0),
            ..Default::default()
        },
    ];
    for input in &inputs {
        for v in verdicts(input) {
            assert!(!v.message.contains("wall time"), "{}", v.message);
        }
    }
}

/// With the environment stepping on the host for most of the timed phases, a busy process is
/// busy stepping it, not feeding the card: env-bound, not dispatch-bound. The dispatch-bound
/// text says what was measured (the whole process, alone in it).
#[test]
fn a_busy_process_stepping_a_host_env_is_not_called_dispatch_bound() {
    let mut input = gpu_trial(0.0, 30.0);
    input.on_device_env = false;
    input.phases = split(15.0, 2.0, 3.0, 0.0);
    input.process_cpu_pct = Some(300.0);
    let k = kinds(&input);
    assert!(k.contains(&VerdictKind::EnvBound), "{k:?}");
    assert!(!k.contains(&VerdictKind::DispatchBound), "{k:?}");
    // The environment on the device: the same busy process beside the card is dispatch-bound,
    // and the text names what was measured.
    input.on_device_env = true;
    let d = verdicts(&input)
        .into_iter()
        .find(|v| v.kind == VerdictKind::DispatchBound)
        .expect("dispatch-bound");
    assert!(
        d.message
            .contains("the process feeding it, the only trial running in it, used 300 % of a core (all its threads, measured for the process"),
        "{}",
        d.message
    );
}
