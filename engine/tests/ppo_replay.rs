//! Issue 33, a rollout's policy step replayed from a graph captured once a run and rewritten in
//! place each rollout (`Trainer::set_replay_policy`, `TRADETUNE_REPLAY_POLICY=1`): on wgpu
//! (lavapipe in CI) a run with it learns what the same run without it learns, update by update
//! (the second rollout on the first's graph, its weights written in place), and its timed update
//! says the policy step's launches were replayed; so do two such runs at once on two threads,
//! as a study's workers share a card.
//!
//! The two runs differ only in how burn cuts the step into kernels (the direct step slices its
//! noise row; the replayed one reads it in a kernel of its own, by a step counter on the
//! device), so they agree to rounding. A replay that read stale observations (the captured
//! ones, not each step's) would sample every step's actions from the first step's state, and one
//! that read the wrong noise row (a counter not advanced, or not set back to the first row
//! after the capture's runs) would sample other actions than the direct run's: either way the
//! losses would part.
//!
//! In the `process_wide` binary, each test holding its lock: the replayed shares it asserts are
//! read from the process's launch counts, which another test's launches beside it would swell.

use crate::common;

use burn::tensor::{Device, FloatDType};
use tradetune_engine::device::precision::Precision;
use tradetune_engine::device::readback;
use tradetune_engine::env::bench::bench_dataset;
use tradetune_engine::env::{CpuVecEnv, EnvConfig, TensorVecEnv};
use tradetune_engine::ppo::{
    ActorCriticConfig, DispatchProfile, HostEnv, NetArch, PpoConfig, RolloutEnv, TrainEvent,
    Trainer, UpdateStats,
};

const N_ENVS: usize = 4;
const N_STEPS: usize = 24;
const UPDATES: usize = 2;
/// The host round-trips of a graph's capture (`tradetune_device::graph`'s three warm-up runs).
const CAPTURE_SYNCS: u64 = 3;

fn env_cfg() -> EnvConfig {
    EnvConfig::new()
        .with_n_envs(N_ENVS)
        .with_episode_bars(10)
        .with_seed(3)
}

fn ppo_cfg(precision: Precision) -> PpoConfig {
    PpoConfig::new()
        .with_n_steps(N_STEPS)
        .with_batch_size(48)
        .with_n_epochs(2)
        .with_seed(17)
        .with_precision(precision)
        .with_policy(
            ActorCriticConfig::new()
                .with_net_arch(NetArch::new().with_pi(vec![16]).with_vf(vec![16])),
        )
}

/// A run's updates' statistics, final weights and first (timed) update's launch profile.
type Run = (Vec<UpdateStats>, Vec<f32>, Option<DispatchProfile>);

/// Trains [`UPDATES`] updates, the policy step replayed or not.
fn train<E: RolloutEnv>(env: E, device: &Device, precision: Precision, replay: bool) -> Run {
    train_failing(env, device, precision, replay, None).0
}

/// [`train`], the replay after `fail_after` replays of a rollout failing as a driver's would;
/// with the trainer's reason for not replaying, if it has one.
fn train_failing<E: RolloutEnv>(
    env: E,
    device: &Device,
    precision: Precision,
    replay: bool,
    fail_after: Option<usize>,
) -> (Run, Option<String>) {
    let mut trainer = Trainer::new(ppo_cfg(precision), env, device)
        .unwrap()
        .with_phase_sampling(100);
    trainer.set_replay_policy(replay);
    if let Some(n) = fail_after {
        trainer.fail_replay_after(n);
    }
    let (run, trainer) = learn(trainer);
    let why = trainer.replay_fallback().map(str::to_owned);
    (run, why)
}

/// Trains [`UPDATES`] updates with `trainer`: the run (with its first update's launch
/// profile: the one timed; the trainer times none after it, even where it compiled), and the
/// trainer after it.
fn learn<E: RolloutEnv>(mut trainer: Trainer<E>) -> (Run, Trainer<E>) {
    let mut stats = Vec::new();
    let mut on_event = |e| {
        if let TrainEvent::Update { stats: s, .. } = e {
            stats.push(s);
        }
    };
    trainer.learn(N_ENVS * N_STEPS, &mut on_event).unwrap();
    let profile = trainer.dispatch_profile();
    trainer.set_phase_sampling(usize::MAX);
    trainer
        .learn((UPDATES - 1) * N_ENVS * N_STEPS, &mut on_event)
        .unwrap();
    let weights = trainer.model().flat_params().unwrap();
    ((stats, weights, profile), trainer)
}

/// Asserts that runs `a` (direct) and `b` (replayed) learnt the same to `tol`.
fn assert_same_learning(what: &str, a: &Run, b: &Run, tol: f32) {
    assert_eq!(a.0.len(), UPDATES, "{what}");
    let direct = common::Learnt {
        name: "direct",
        stats: &a.0,
        weights: &a.1,
    };
    let replayed = common::Learnt {
        name: "replayed",
        stats: &b.0,
        weights: &b.1,
    };
    common::assert_same_learning(what, &direct, &replayed, tol, 1e-2);
}

#[test]
fn a_rollout_on_a_replayed_policy_step_learns_as_the_direct_one() {
    let _alone = crate::alone();
    let Some(device) = common::wgpu_device("a rollout on a replayed policy step") else {
        return;
    };
    let data = bench_dataset(300, 3, 4, 1);
    let tensor = || TensorVecEnv::new(env_cfg(), &data, 0..300, &device).unwrap();
    let mut precisions = vec![(Precision::F32, 1e-3)];
    if device.supports_dtype(FloatDType::F16) {
        precisions.push((Precision::F16, 2e-2));
    }
    let mut reference = None;
    for (precision, tol) in precisions {
        let what = format!("env on the device, {precision:?}");
        let direct = train(tensor(), &device, precision, false);
        let captures = || readback::counts().get("sync: graph capture").copied();
        let before = captures().unwrap_or(0);
        let replayed = train(tensor(), &device, precision, true);
        assert_same_learning(&what, &direct, &replayed, tol);
        // One capture a run, not one a rollout: its three synchronised warm-ups, once. The
        // second rollout replays the same graph, its weights and noise written in place (stale
        // weights would part the second update's losses from the direct run's).
        assert_eq!(
            captures().unwrap_or(0) - before,
            CAPTURE_SYNCS,
            "{what}: {UPDATES} rollouts"
        );
        // The first update's phases are timed, its launches counted by part: without the graph
        // nothing is replayed; with it most of a policy step's launches are (the replays of
        // steps 1.. against the capture's three warm-ups and recorded run at step 0).
        let d = direct.2.expect("a timed update");
        let r = replayed.2.expect("a timed update");
        eprintln!(
            "{what}: policy step {:.2} launches (direct), {:.2} of which {:.2} replayed",
            d.per_policy_step, r.per_policy_step, r.replayed_per_policy_step
        );
        assert_eq!(d.replayed_per_policy_step, 0.0, "{what}");
        assert!(
            r.replayed_per_policy_step >= 0.5 * d.per_policy_step,
            "{what}: {:.2} of {:.2} replayed",
            r.replayed_per_policy_step,
            r.per_policy_step
        );
        reference.get_or_insert(direct);
    }
    // Two trials on one card, as a study's workers run them: threads of one process, each
    // capturing and replaying its own graph on its own stream while the other does. Each learns
    // what the direct run learnt alone.
    let reference = reference.expect("f32 ran");
    let together: Vec<_> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..2)
            .map(|_| scope.spawn(|| train(tensor(), &device, Precision::F32, true)))
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("a worker"))
            .collect()
    });
    for (i, run) in together.iter().enumerate() {
        assert_same_learning(&format!("worker {i} of 2"), &reference, run, 1e-3);
    }
    // A replay the driver refuses (the fifth of the first rollout, at its step 4: the first
    // step replays too): that step and the rest of the run launch the policy step directly, the
    // run learns what the direct one learnt, and the trainer says where and why.
    let (failing, why) = train_failing(tensor(), &device, Precision::F32, true, Some(4));
    assert_same_learning("a replay refused mid-rollout", &reference, &failing, 1e-3);
    let why = why.expect("the trainer says why it stopped replaying");
    assert!(
        why.contains("failed at step 4 of a rollout") && why.contains("directly from there on"),
        "{why}"
    );
    let profile = failing.2.expect("a timed update");
    assert!(
        profile.replayed_per_policy_step > 0.0
            && profile.replayed_per_policy_step < 0.5 * profile.per_policy_step,
        "{profile:?}"
    );
    // The host env on the same device: its steps read the actions back, and the policy step
    // still runs on the device, replayed.
    let host = || {
        HostEnv::new(
            CpuVecEnv::new(env_cfg(), data.clone(), 0..300).unwrap(),
            &device,
        )
    };
    let direct = train(host(), &device, Precision::F32, false);
    let replayed = train(host(), &device, Precision::F32, true);
    assert_same_learning("env on the host, F32", &direct, &replayed, 1e-3);
    assert!(replayed.2.expect("a timed update").replayed_per_policy_step > 0.0);
}

/// Trains [`UPDATES`] updates on the device env, the update's minibatches replayed from a graph
/// captured once or not (`Learner::set_replay_update`), the replay after
/// `fail_after` failing; with the learner's reason for not replaying, if it has one.
fn train_update(
    device: &Device,
    precision: Precision,
    replay: bool,
    fail_after: Option<usize>,
) -> (Run, f64, Option<String>) {
    train_update_in(device, ppo_cfg(precision), replay, fail_after)
}

/// [`train_update`] with the configuration `cfg`.
fn train_update_in(
    device: &Device,
    cfg: PpoConfig,
    replay: bool,
    fail_after: Option<usize>,
) -> (Run, f64, Option<String>) {
    let data = bench_dataset(300, 3, 4, 1);
    let env = TensorVecEnv::new(env_cfg(), &data, 0..300, device).unwrap();
    let mut trainer = Trainer::new(cfg, env, device)
        .unwrap()
        .with_phase_sampling(100);
    trainer.learner_mut().set_replay_update(replay);
    trainer.learner_mut().fail_replay_after(fail_after);
    let (run, trainer) = learn(trainer);
    let replayed = run.2.map_or(0.0, |p| p.replayed_per_minibatch);
    let why = trainer.learner().replay_fallback().map(str::to_owned);
    (run, replayed, why)
}

/// The update's minibatches replayed (`TRADETUNE_REPLAY_UPDATE`): each update captures its first
/// minibatch (the forward and backward pass, the tally's judgement, Adam's step, the count) and
/// replays the recorded launches for the others, its indices and Adam's bias corrections
/// written in place. A replay that read stale indices would train on the first minibatch's
/// samples again, one with stale corrections would step as Adam's first step, one whose state
/// was not carried would lose the steps before it: each parts the losses or the weights from
/// the direct run's.
#[test]
fn an_update_on_replayed_minibatches_learns_as_the_direct_one() {
    let _alone = crate::alone();
    let Some(device) = common::wgpu_device("an update on replayed minibatches") else {
        return;
    };
    let mut precisions = vec![(Precision::F32, 1e-3)];
    if device.supports_dtype(FloatDType::F16) {
        precisions.push((Precision::F16, 2e-2));
    }
    for (precision, tol) in precisions {
        let what = format!("{precision:?}");
        let (direct, none, _) = train_update(&device, precision, false, None);
        let (replayed, share, why) = train_update(&device, precision, true, None);
        assert_same_learning(&what, &direct, &replayed, tol);
        assert_eq!(why, None, "{what}");
        assert_eq!(none, 0.0, "{what}");
        let d = direct.2.expect("a timed update");
        eprintln!(
            "{what}: a minibatch {:.2} launches (direct), {:.2} of which {share:.2} replayed",
            d.per_minibatch,
            replayed.2.expect("a timed update").per_minibatch
        );
        // Four minibatches an update: the first captured, three replayed.
        assert!(
            share >= 0.5 * d.per_minibatch,
            "{what}: {share:.2} replayed"
        );
    }
    // Minibatches of 40 of the rollout's 96 samples: the epoch's short last one (16) runs
    // directly on the state handed back, and the next epoch's carry on replayed from there.
    let short = ppo_cfg(Precision::F32).with_batch_size(40);
    let (direct, _, _) = train_update_in(&device, short.clone(), false, None);
    let (replayed, share, why) = train_update_in(&device, short, true, None);
    assert_same_learning("batch 40 of 96", &direct, &replayed, 1e-3);
    assert_eq!(why, None);
    assert!(share > 0.0, "{share}");
    // A replay the driver refuses (the second of the first update): that minibatch and the rest
    // of the run's run directly, from the state the replays left, and the learner says why.
    let (direct, _, _) = train_update(&device, Precision::F32, false, None);
    let (failing, share, why) = train_update(&device, Precision::F32, true, Some(1));
    assert_same_learning("a replay refused mid-update", &direct, &failing, 1e-3);
    let why = why.expect("the learner says why it stopped replaying");
    assert!(why.contains("directly from there on"), "{why}");
    assert!(share > 0.0, "the first update replayed before the refusal");
}
