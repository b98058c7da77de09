//! Issues 13 and 20, on-device rollouts: with the environment on the trainer's device a rollout
//! and its update cost one read (the update's diagnostics, with the rollout's GAE diagnostics
//! and finished-episode statistics) and no synchronisation, whatever `n_steps`, except on the
//! updates whose phases are timed; the host environment reads every step's actions back. And
//! either placement learns the same from the same seeds.
//!
//! One test function, in the `process_wide` binary and holding its lock (`crate::alone`): the
//! counter is process-wide, and no other test may run beside it.

use crate::common;

use std::collections::BTreeMap;

use burn::tensor::{Device, FloatDType};
use tradetune_engine::device::precision::Precision;
use tradetune_engine::device::readback;
use tradetune_engine::env::bench::bench_dataset;
use tradetune_engine::env::{CpuVecEnv, EnvConfig, TensorVecEnv};
use tradetune_engine::ppo::{
    ActorCriticConfig, HostEnv, NetArch, PpoConfig, RolloutEnv, TrainEvent, Trainer, UpdateStats,
};

const N_ENVS: usize = 4;
const N_STEPS: usize = 32;
/// Episodes of 10 bars: in 32 steps each env ends 3 episodes.
const EPISODE_BARS: usize = 10;

fn env_cfg() -> EnvConfig {
    EnvConfig::new()
        .with_n_envs(N_ENVS)
        .with_episode_bars(EPISODE_BARS)
        .with_seed(5)
}

fn ppo_cfg() -> PpoConfig {
    PpoConfig::new()
        .with_n_steps(N_STEPS)
        .with_batch_size(64)
        .with_n_epochs(2)
        .with_seed(9)
        .with_policy(
            ActorCriticConfig::new()
                .with_net_arch(NetArch::new().with_pi(vec![16]).with_vf(vec![16])),
        )
}

fn ppo_cfg_steps(n_steps: usize) -> PpoConfig {
    ppo_cfg().with_n_steps(n_steps)
}

/// Trains `updates` updates and returns each update's statistics and the final parameters,
/// with the reads counted during training.
fn train<E: RolloutEnv>(
    env: E,
    device: &Device,
    updates: usize,
) -> (Vec<UpdateStats>, Vec<f32>, BTreeMap<&'static str, u64>) {
    let mut trainer = Trainer::new(ppo_cfg(), env, device).unwrap();
    let mut stats = Vec::new();
    readback::reset();
    trainer
        .learn(updates * N_ENVS * N_STEPS, &mut |e| {
            if let TrainEvent::Update { stats: s, .. } = e {
                stats.push(s);
            }
        })
        .unwrap();
    let reads = readback::counts();
    (stats, trainer.model().flat_params().unwrap(), reads)
}

/// Reads and synchronisations of `updates` updates with `n_steps`, counted from the end of the
/// timed ones (the first, and the next where it compiled) to the end; `every` is the phase sampling. Also the episodes
/// the trainer reported over those updates.
fn count<E: RolloutEnv>(
    env: E,
    device: &Device,
    n_steps: usize,
    updates: usize,
    every: usize,
) -> (BTreeMap<&'static str, u64>, usize) {
    count_in(env, device, ppo_cfg_steps(n_steps), updates, every)
}

fn count_in<E: RolloutEnv>(
    env: E,
    device: &Device,
    cfg: PpoConfig,
    updates: usize,
    every: usize,
) -> (BTreeMap<&'static str, u64>, usize) {
    let n_steps = cfg.n_steps;
    let mut trainer = Trainer::new(cfg, env, device)
        .unwrap()
        .with_phase_sampling(every);
    // The reads of burn's update, the path a GPU takes: on the CPU device in f32 the update
    // otherwise runs the host step, which reads the rollout from host memory.
    trainer.learner_mut().set_host_update(false);
    let mut episodes = 0;
    let mut on_event = |e: TrainEvent| {
        if let TrainEvent::Episodes(s) = e {
            episodes += s.count;
        }
    };
    // The first (timed) update, and any the trainer times again because the timed one
    // compiled (a GPU's first), then the reads of the others. (Not on the first update's
    // event: on a GPU the events of an update that compiled arrive an update late, with its
    // compile phase.)
    trainer.learn(N_ENVS * n_steps, &mut on_event).unwrap();
    for _ in 0..4 {
        if !trainer.retiming() {
            break;
        }
        trainer.learn(N_ENVS * n_steps, &mut on_event).unwrap();
    }
    assert!(!trainer.retiming(), "a timed update compiled nothing");
    readback::reset();
    trainer
        .learn((updates - 1) * N_ENVS * n_steps, &mut on_event)
        .unwrap();
    (readback::counts(), episodes)
}

/// The round-trips an update reports of itself (`DispatchProfile::syncs_per_update`) after three
/// updates, all timed.
fn own_round_trips<E: RolloutEnv>(env: E, device: &Device) -> Option<u64> {
    let mut trainer = Trainer::new(ppo_cfg(), env, device)
        .unwrap()
        .with_phase_sampling(1);
    trainer.learner_mut().set_host_update(false);
    // Directly launched, whatever TRADETUNE_REPLAY_* say (a capture synchronises too).
    trainer.set_replay_policy(false);
    trainer.learner_mut().set_replay_update(false);
    trainer.learn(3 * N_ENVS * N_STEPS, &mut |_| {}).unwrap();
    trainer.dispatch_profile().and_then(|p| p.syncs_per_update)
}

fn check_reads_of_one_rollout(device: &Device, name: &str) {
    let data = bench_dataset(400, 3, 4, 1);
    let tensor = |d: &Device| TensorVecEnv::new(env_cfg(), &data, 0..400, d).unwrap();
    // Untimed updates 2..=4: one read each, no synchronisation, for 32 and for 64 steps.
    for n_steps in [N_STEPS, 2 * N_STEPS] {
        let (reads, episodes) = count(tensor(device), device, n_steps, 4, 100);
        eprintln!("{name}, env on the device, n_steps {n_steps}: {reads:?}");
        let want: BTreeMap<&'static str, u64> = [("update: diagnostics", 3)].into();
        assert_eq!(reads, want, "{name}, n_steps {n_steps}");
        // Every env ends an episode every 10 steps: the episodes still reach the trainer.
        assert!(
            episodes >= N_ENVS * (n_steps / EPISODE_BARS),
            "{episodes} episodes"
        );
    }
    // f16 with dynamic loss scaling, where the device computes it: the scale, its skips and
    // its growth stay on the device too (a huge initial scale makes it skip and back off).
    if device.supports_dtype(FloatDType::F16) {
        let cfg = ppo_cfg_steps(N_STEPS)
            .with_precision(Precision::F16)
            .with_initial_loss_scale(1e20);
        let mut skipped = 0;
        let mut scales = Vec::new();
        let mut trainer = Trainer::new(cfg, tensor(device), device)
            .unwrap()
            .with_phase_sampling(100);
        let mut on_event = |e: TrainEvent| {
            if let TrainEvent::Update { stats, .. } = e {
                skipped += stats.skipped_steps;
                scales.push(stats.loss_scale);
            }
        };
        // The first update is timed (and the next where it compiled); count the three after.
        trainer.learn(N_ENVS * N_STEPS, &mut on_event).unwrap();
        for _ in 0..4 {
            if !trainer.retiming() {
                break;
            }
            trainer.learn(N_ENVS * N_STEPS, &mut on_event).unwrap();
        }
        assert!(!trainer.retiming(), "a timed update compiled nothing");
        readback::reset();
        trainer.learn(3 * N_ENVS * N_STEPS, &mut on_event).unwrap();
        let reads = readback::counts();
        eprintln!("{name}, f16: {reads:?}, loss scales {scales:?}, {skipped} skipped");
        let want: BTreeMap<&'static str, u64> = [("update: diagnostics", 3)].into();
        assert_eq!(reads, want, "{name}, f16");
        assert!(skipped > 0, "a scale of 1e20 overflows f16");
        assert!(scales[3] < 1e19, "the scale backed off: {scales:?}");
        assert_eq!(trainer.learner().scaler().skipped(), skipped);
        let params = trainer.model().flat_params().unwrap();
        assert!(
            params.iter().all(|p| p.is_finite()),
            "a skipped step keeps the weights finite"
        );
    }

    // Every update timed: a synchronisation after each phase of each step, and the rest.
    let (reads, _) = count(tensor(device), device, N_STEPS, 2, 1);
    for what in ["sync: inference", "sync: env step", "sync: buffer"] {
        assert_eq!(
            reads.get(what),
            Some(&(N_STEPS as u64)),
            "{what}: {reads:?}"
        );
    }
    assert_eq!(reads.get("sync: advantages"), Some(&1), "{reads:?}");
    assert_eq!(reads.get("sync: update"), Some(&1), "{reads:?}");
    assert_eq!(reads.get("update: diagnostics"), Some(&1), "{reads:?}");
    // Such a run (a GPU trial of two updates, both timed because the first compiled) still
    // says what an update's own round-trips are, the timing's synchronisations left out: one
    // read with the env on the device, and a read of the actions a step more on the host.
    let host = || {
        HostEnv::new(
            CpuVecEnv::new(env_cfg(), data.clone(), 0..400).unwrap(),
            device,
        )
    };
    for (what, syncs) in [
        ("env on the device", own_round_trips(tensor(device), device)),
        ("env on the host", own_round_trips(host(), device)),
    ] {
        let want = if what == "env on the device" {
            1
        } else {
            N_STEPS as u64 + 1
        };
        assert_eq!(syncs, Some(want), "{name}, {what}, every update timed");
    }

    // The host env, for contrast: the actions come back every step.
    let host = CpuVecEnv::new(env_cfg(), data.clone(), 0..400).unwrap();
    let (reads, _) = count(HostEnv::new(host, device), device, N_STEPS, 2, 100);
    eprintln!("{name}, env on the host: reads {reads:?}");
    assert_eq!(reads.get("host env: actions"), Some(&(N_STEPS as u64)));
    assert_eq!(reads.get("update: diagnostics"), Some(&1), "{reads:?}");
}

#[test]
fn a_device_rollout_and_update_read_once_and_learn_as_the_host_one() {
    // First, before anything allocates or reads: the read counter is process-wide.
    let _alone = crate::alone();
    check_reads_of_one_rollout(&Device::flex(), "flex");
    if let Some(wgpu) = common::wgpu_device("a_device_rollout_and_update_read_once") {
        check_reads_of_one_rollout(&wgpu, "wgpu");
    }

    // Same seeds, either placement, on the CPU device: the same learning, update by update.
    // Both envs compute in f32 by the same formulas, in another order of operations, so the
    // results agree to rounding: 1e-3 relative on the losses, 1e-3 absolute on the weights.
    let device = Device::flex();
    let data = bench_dataset(400, 3, 4, 1);
    let host = CpuVecEnv::new(env_cfg(), data.clone(), 0..400).unwrap();
    let tensor = TensorVecEnv::new(env_cfg(), &data, 0..400, &device).unwrap();
    let (a, pa, _) = train(HostEnv::new(host, &device), &device, 3);
    let (b, pb, _) = train(tensor, &device, 3);
    assert_eq!(a.len(), 3);
    let host = common::Learnt {
        name: "host",
        stats: &a,
        weights: &pa,
    };
    let device = common::Learnt {
        name: "device",
        stats: &b,
        weights: &pb,
    };
    common::assert_same_learning("either placement", &host, &device, 1e-3, 1e-3);
}
