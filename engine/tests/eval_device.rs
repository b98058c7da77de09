//! Issue 20: evaluation on a GPU device trades the split with the on-device env and reads its
//! curves back once, not the action of every bar, and scores what the host evaluation scores.
//!
//! In the `process_wide` binary, each test holding its lock (`crate::alone`): the read and
//! launch counters are process-wide.

use crate::common;

use std::sync::Arc;

use burn::module::Module;
use burn::tensor::{Device, FloatDType, Tensor, TensorData};
use tradetune_engine::device::{kernels, readback};
use tradetune_engine::env::{CpuVecEnv, EnvConfig, TensorVecEnv};
use tradetune_engine::eval::{EvalSplit, Objective};
use tradetune_engine::market::DatasetConfig;
use tradetune_engine::ppo::{HostEnv, PpoConfig, Trainer};
use tradetune_engine::ppo::{evaluate_policy as evaluate, evaluate_policy_timed};

/// Bars of the validation split evaluated on either device.
const EVAL_BARS: usize = 80;

#[test]
fn a_device_evaluation_reads_once_and_scores_as_the_host_one() {
    // First, before anything allocates or reads: the read counter is process-wide.
    let _alone = crate::alone();
    let Some(wgpu) = common::wgpu_device("a_device_evaluation_reads_once") else {
        return;
    };
    let loaded = DatasetConfig::bundled().load().unwrap();
    let data = Arc::new(loaded.dataset);
    let env_cfg = EnvConfig::new().with_n_envs(4).with_seed(2);
    let flex = Device::flex();
    let env = CpuVecEnv::new(env_cfg.clone(), data.clone(), loaded.split.train.clone()).unwrap();
    // A few updates, so the policy trades and its normalisation statistics are not the identity.
    let ppo = PpoConfig::new()
        .with_n_steps(64)
        .with_batch_size(64)
        .with_n_epochs(2)
        .with_seed(4)
        .with_normalize_obs(true);
    let mut trainer = Trainer::new(ppo.clone(), HostEnv::new(env, &flex), &flex).unwrap();
    trainer.learn(3 * 4 * 64, &mut |_| {}).unwrap();
    let norm = trainer.normalization().unwrap();
    // The first 80 bars of the validation split: on Mesa's software Vulkan each bar costs
    // ~90 ms on the device, and the read count and the bar-by-bar comparison say the same of 80
    // bars as of the split's 314 (measured 2026-11-27, 2-core VM under load, caches empty: the
    // test in 21 s instead of 44).
    let validation = loaded.split.validation.start
        ..(loaded.split.validation.start + EVAL_BARS).min(loaded.split.validation.end);
    let split = EvalSplit::new("validation", data.clone(), validation, &env_cfg);

    readback::reset();
    let host = evaluate(
        trainer.model(),
        &norm,
        &ppo,
        &split,
        Objective::SharpeExcess,
    )
    .unwrap();
    let host_reads = readback::counts();
    let on_gpu = trainer.model().clone().to_device(&wgpu);
    readback::reset();
    let first = kernels::counts();
    let timed =
        evaluate_policy_timed(&on_gpu, &norm, &ppo, &split, Objective::SharpeExcess).unwrap();
    let device_reads = readback::counts();
    // What the first evaluation on the device compiled, and the time its first bars took
    // beyond its pace: a training run's compile phase takes it from the evaluation phase.
    eprintln!(
        "first device evaluation: {:?}, slow start {:.3} s",
        kernels::counts().since(&first),
        timed.slow_start_s
    );
    let device = timed.report;
    eprintln!("host: {host_reads:?}\ndevice: {device_reads:?}");
    // The host evaluation reads every bar's action (flex: host memory, a copy); the device one
    // reads its curves once.
    assert_eq!(
        host_reads.get("evaluation: actions").copied(),
        Some(host.bars as u64 - 1)
    );
    assert_eq!(
        device_reads,
        [("evaluation: curves", 1)].into_iter().collect()
    );

    assert_eq!(device.bars, host.bars);
    assert_eq!(device.timestamps, host.timestamps);
    assert!(
        host.agent.turnover > 0.0,
        "the policy trades: {:?}",
        host.agent
    );
    // Both trade by the same rules in f32; the curves agree to rounding.
    let close = |a: f64, b: f64, tol: f64| (a - b).abs() <= tol * a.abs().max(b.abs()).max(1.0);
    for (i, (a, b)) in host
        .agent_equity
        .iter()
        .zip(&device.agent_equity)
        .enumerate()
    {
        assert!(
            close(*a, *b, 1e-4),
            "agent equity at bar {i}: {a} (host) vs {b} (device)"
        );
    }
    for (a, b) in host
        .equal_weight_equity
        .iter()
        .zip(&device.equal_weight_equity)
    {
        assert!(close(*a, *b, 1e-5), "equal weight {a} vs {b}");
    }
    for (what, a, b) in [
        (
            "total_return",
            host.agent.total_return,
            device.agent.total_return,
        ),
        ("sharpe", host.agent.sharpe, device.agent.sharpe),
        ("turnover", host.agent.turnover, device.agent.turnover),
        ("fees_paid", host.agent.fees_paid, device.agent.fees_paid),
        ("objective", host.objective, device.objective),
    ] {
        assert!(close(a, b, 1e-3), "{what}: {a} (host) vs {b} (device)");
    }

    // What a bar costs the device evaluation in launches, counted on a second run (the first
    // compiled and autotuned its kernels, whose benchmark launches count too): the policy's
    // step and one, the env's kernel, which writes the state log's row itself; the host prices
    // the trades from the logged holdings. Computing each bar's row on the device took 16
    // launches a bar (nets [64, 64]; 11 more than with a launch for the log's write, measured
    // with `TRADETUNE_TRACE_LAUNCHES=1`), the log's write a launch of its own one more.
    assert!(kernels::counting_dispatches());
    let before = kernels::counts();
    let again =
        evaluate_policy_timed(&on_gpu, &norm, &ppo, &split, Objective::SharpeExcess).unwrap();
    let launches = kernels::counts().since(&before).dispatches as f64;
    eprintln!(
        "second device evaluation: {:?}, slow start {:.3} s",
        kernels::counts().since(&before),
        again.slow_start_s
    );
    let again = again.report;
    assert_eq!(again.agent_equity, device.agent_equity);
    let per_bar = launches / (device.bars - 1) as f64;
    // Layers: the policy's two hidden ones and its mean head; a policy step's target is
    // 2 · layers + 4 (issue 33).
    let layers = 3.0;
    eprintln!("device evaluation: {launches} launches, {per_bar:.2} a bar");
    assert!(
        per_bar <= 2.0 * layers + 4.0 + 1.0,
        "{per_bar:.2} launches a bar ({launches} in all)"
    );
}

/// The env's kernel writes an evaluation's state log itself: stepping with
/// `step_logging_state` logs what a step and `log_state` (the log's write, a launch of its own,
/// two with env 0's row sliced out of several) log, to the bit, episode ends and auto-resets
/// included, and launches one a step: the kernel. Its observations in f16 (an f16 policy's
/// input, `set_obs_dtype`) are the f32 ones rounded, in the same one launch: the policy casts
/// nothing. Three envs, so the log is env 0's row and not another's.
#[test]
fn the_env_kernel_writes_the_state_log_in_its_own_launch() {
    let _alone = crate::alone();
    let Some(device) = common::wgpu_device("the_env_kernel_writes_the_state_log") else {
        return;
    };
    let cfg = EnvConfig::new()
        .with_n_envs(3)
        .with_episode_bars(9)
        .with_trailing_stop_pct(0.05)
        .with_seed(3);
    let (m, n, steps) = (2, cfg.n_envs, 24);
    let data = common::random_walk_dataset(90, m, 1, 5);
    // The logged states, the launches of the steps and each step's observations (as f32),
    // logged by the kernel or by a launch of its own, the observations in `obs_dtype`.
    let run = |by_kernel: bool, obs_dtype: FloatDType| {
        let mut env = TensorVecEnv::new(cfg.clone(), &data, 4..90, &device).unwrap();
        assert!(env.steps_as_kernel());
        env.set_obs_dtype(obs_dtype);
        env.reset_tensors();
        let mut log = env.state_log(steps + 1);
        // The episode log's room (the steps without the state log write their rows there), the
        // log's first row and everything before them run before the count starts.
        env.reserve_episode_log(steps);
        readback::read_f32(log.values(), "test").unwrap();
        kernels::settle();
        let before = kernels::counts();
        let mut obs = Vec::new();
        for s in 0..steps {
            let a: Vec<f32> = (0..n * m)
                .map(|k| (((s * 5 + k * 3) % 11) as f32 / 5.0) - 1.0)
                .collect();
            let actions = Tensor::<2>::from_data(TensorData::new(a, [n, m]), &device);
            let step = if by_kernel {
                env.step_logging_state(actions, &mut log, s + 1)
            } else {
                let step = env.step_tensors(actions);
                env.log_state(&mut log, s + 1);
                step
            };
            assert_eq!(step.obs.dtype(), obs_dtype.into());
            obs.push(step.obs);
        }
        let host = readback::read_f32(log.values(), "test").unwrap();
        let launches = kernels::counts().since(&before).dispatches;
        // What the read launches of itself (the log's values concatenated), again.
        let before = kernels::counts();
        readback::read_f32(log.values(), "test").unwrap();
        let read = kernels::counts().since(&before).dispatches;
        (log.decode(&host).unwrap(), launches - read, obs)
    };
    let f32_obs = |obs: Vec<Tensor<2>>| -> Vec<f32> {
        let all = Tensor::cat(obs, 0).cast(FloatDType::F32);
        readback::read_f32(all, "test").unwrap()
    };
    run(false, FloatDType::F32);
    let (apart, apart_launches, _) = run(false, FloatDType::F32);
    let (by_kernel, kernel_launches, obs) = run(true, FloatDType::F32);
    assert_eq!(by_kernel, apart);
    assert!(
        by_kernel.iter().any(|s| s.done) && by_kernel.iter().any(|s| !s.done),
        "the steps end an episode and go on: {by_kernel:?}"
    );
    assert!(
        by_kernel
            .iter()
            .any(|s| s.holdings.iter().any(|&h| h > 0.0))
    );
    assert_eq!(kernel_launches, steps as u64, "launches of the steps");
    assert!(
        apart_launches >= kernel_launches + steps as u64,
        "{apart_launches} launches with the log's write apart, {kernel_launches} without"
    );
    // The observations in f16: the f32 ones rounded, the states the same, a launch a step.
    let rounded: Vec<Tensor<2>> = obs
        .iter()
        .map(|o| o.clone().cast(FloatDType::F16))
        .collect();
    let rounded = f32_obs(rounded);
    run(true, FloatDType::F16);
    let (in_f16, f16_launches, obs16) = run(true, FloatDType::F16);
    assert_eq!(in_f16, by_kernel);
    assert_eq!(
        f16_launches, steps as u64,
        "launches of the steps with f16 observations"
    );
    let obs16 = f32_obs(obs16);
    assert_eq!(obs16, rounded);
    assert!(
        obs16.iter().any(|&x| x != 0.0 && x.fract() != 0.0),
        "{obs16:?}"
    );
}
