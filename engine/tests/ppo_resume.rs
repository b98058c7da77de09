//! Resuming from a checkpoint continues the run: update numbers, the linear learning-rate
//! schedule (over the whole run, as SB3's `reset_num_timesteps=False`), the per-update random
//! streams and the f16 loss scale — rather than starting them over.

use burn::tensor::Device;
use tradetune_engine::device::precision::Precision;
use tradetune_engine::ppo::sanity_env::TargetEnv;
use tradetune_engine::ppo::{
    ActorCriticConfig, HostEnv, LrSchedule, NetArch, PpoConfig, TrainEvent, Trainer, checkpoint,
};

const N_ENVS: usize = 4;

fn config() -> PpoConfig {
    PpoConfig::new()
        .with_learning_rate(1e-2)
        .with_lr_schedule(LrSchedule::Linear)
        .with_n_steps(16)
        .with_batch_size(32)
        .with_n_epochs(2)
        .with_seed(11)
        .with_policy(
            ActorCriticConfig::new()
                .with_net_arch(NetArch::new().with_pi(vec![8]).with_vf(vec![8])),
        )
}

/// Samples of one rollout.
fn rollout(cfg: &PpoConfig) -> usize {
    cfg.n_steps * N_ENVS
}

fn trainer(cfg: &PpoConfig) -> Trainer<HostEnv<TargetEnv>> {
    let device = Device::flex();
    let env = HostEnv::new(TargetEnv::new(N_ENVS, 4, 1), &device);
    Trainer::new(cfg.clone(), env, &device).unwrap()
}

/// (update number, learning rate) of each update of `learn(budget)`.
fn learn(t: &mut Trainer<HostEnv<TargetEnv>>, budget: usize) -> Vec<(usize, f64)> {
    let mut updates = Vec::new();
    t.learn(budget, &mut |e| {
        if let TrainEvent::Update { update, stats } = e {
            updates.push((update, stats.learning_rate));
        }
    })
    .unwrap();
    updates
}

#[test]
fn a_resumed_run_continues_the_update_count_and_the_schedule() {
    let cfg = config();
    let r = rollout(&cfg);
    let whole = learn(&mut trainer(&cfg), 4 * r);
    assert_eq!(whole.iter().map(|u| u.0).collect::<Vec<_>>(), [1, 2, 3, 4]);

    // Interrupted after 2 of 4 rollouts (a run planned for 2), then resumed for 2 more.
    let dir = tempfile::tempdir().unwrap();
    let mut first = trainer(&cfg);
    learn(&mut first, 2 * r);
    checkpoint::save(dir.path(), &first).unwrap();
    let mut resumed = trainer(&cfg);
    checkpoint::resume(dir.path(), &mut resumed).unwrap();
    assert_eq!(resumed.timesteps(), 2 * r);
    let after = learn(&mut resumed, 2 * r);
    assert_eq!(after.iter().map(|u| u.0).collect::<Vec<_>>(), [3, 4]);
    // The schedule over the 4 rollouts of the whole run: 1 − 3/4, then 1 − 4/4.
    for ((n, lr), (m, expected)) in after.iter().zip(&whole[2..]) {
        assert_eq!(n, m);
        assert!(
            (lr - expected).abs() < 1e-12,
            "update {n}: {lr} vs {expected}"
        );
    }
    assert!((after[0].1 - 0.25e-2).abs() < 1e-12, "{after:?}");
}

/// A resumed run times its first update's phases (the one that compiles, on a GPU), although
/// its number, counted on from the checkpoint's, is not one the sampling times: else the
/// compiling hid, untimed, in the split of the updates up to the next timed one.
#[test]
fn a_resumed_run_times_its_first_update() {
    let cfg = config();
    let r = rollout(&cfg);
    let dir = tempfile::tempdir().unwrap();
    let mut first = trainer(&cfg);
    learn(&mut first, 2 * r);
    checkpoint::save(dir.path(), &first).unwrap();
    // One update in 8 timed: update 2 (from 0) is not one of them.
    let mut resumed = trainer(&cfg).with_phase_sampling(8);
    checkpoint::resume(dir.path(), &mut resumed).unwrap();
    assert_eq!(resumed.updates(), 2);
    learn(&mut resumed, r);
    // A timed update leaves its launches and round-trips; an untimed one, none.
    assert!(resumed.dispatch_profile().is_some());
}

#[test]
fn resuming_twice_from_one_checkpoint_gives_the_same_run() {
    let cfg = config().with_lr_schedule(LrSchedule::Constant);
    let r = rollout(&cfg);
    let dir = tempfile::tempdir().unwrap();
    let mut first = trainer(&cfg);
    learn(&mut first, 2 * r);
    checkpoint::save(dir.path(), &first).unwrap();
    let run = || {
        let mut t = trainer(&cfg);
        checkpoint::resume(dir.path(), &mut t).unwrap();
        learn(&mut t, r);
        t.model().flat_params().unwrap()
    };
    let (a, b) = (run(), run());
    assert_eq!(a, b, "a resumed run is reproducible");
    // And it trained: the weights moved from the checkpoint's.
    let saved = first.model().flat_params().unwrap();
    assert_ne!(a, saved);
}

#[test]
fn the_f16_loss_scale_survives_a_resume() {
    // An absurd initial scale backs off during the first run; the resumed run starts from
    // where it got to, not from the absurd value again.
    let cfg = config()
        .with_precision(Precision::F16)
        .with_initial_loss_scale(1e30);
    let r = rollout(&cfg);
    let dir = tempfile::tempdir().unwrap();
    let mut first = trainer(&cfg);
    learn(&mut first, r);
    let reached = first.learner().scaler().scale();
    assert!(reached < 1e30, "the scale backed off: {reached}");
    checkpoint::save(dir.path(), &first).unwrap();
    let mut resumed = trainer(&cfg);
    assert_eq!(resumed.learner().scaler().scale(), 1e30);
    checkpoint::resume(dir.path(), &mut resumed).unwrap();
    assert_eq!(resumed.learner().scaler().scale(), reached);
}

/// After a resume, the progress events count their budget as they count their samples (the
/// checkpoint's included), so the fraction never passes 100 %.
#[test]
fn a_resumed_runs_progress_counts_its_budget_with_the_checkpoints_samples() {
    let cfg = config();
    let r = rollout(&cfg);
    let dir = tempfile::tempdir().unwrap();
    let mut first = trainer(&cfg);
    learn(&mut first, 2 * r);
    checkpoint::save(dir.path(), &first).unwrap();
    let mut resumed = trainer(&cfg);
    checkpoint::resume(dir.path(), &mut resumed).unwrap();
    let mut started = None;
    let mut progress = Vec::new();
    resumed
        .learn(2 * r, &mut |e| match e {
            TrainEvent::Started {
                total_timesteps, ..
            } => started = Some(total_timesteps),
            TrainEvent::Progress {
                timesteps,
                total_timesteps,
                ..
            } => progress.push((timesteps, total_timesteps)),
            _ => {}
        })
        .unwrap();
    assert_eq!(started, Some(4 * r));
    assert_eq!(progress, [(3 * r, 4 * r), (4 * r, 4 * r)]);
}

/// A save that fails part-way (here the last file, `state.json`, cannot be written) leaves the
/// checkpoint that was there whole and loadable, and no temporary files.
#[test]
fn a_failed_save_leaves_the_previous_checkpoint_loadable() {
    let cfg = config();
    let r = rollout(&cfg);
    let dir = tempfile::tempdir().unwrap();
    let mut t = trainer(&cfg);
    learn(&mut t, r);
    checkpoint::save_with(dir.path(), &t, &[("env.json", b"{\"old\": 1}".to_vec())]).unwrap();
    let read = |name: &str| std::fs::read(dir.path().join(name)).unwrap();
    let before: Vec<_> = [
        "model.bpk",
        "optimizer.bpk",
        "ppo.json",
        "state.json",
        "env.json",
    ]
    .iter()
    .map(|n| read(n))
    .collect();
    learn(&mut t, r);
    // A directory where the new state.json's temporary file goes.
    let blocker = dir
        .path()
        .join(format!(".{}.saving.state.json", std::process::id()));
    std::fs::create_dir(&blocker).unwrap();
    let e = checkpoint::save_with(dir.path(), &t, &[("env.json", b"{\"new\": 2}".to_vec())])
        .unwrap_err();
    assert!(e.to_string().contains("state.json"), "{e}");
    std::fs::remove_dir(&blocker).unwrap();
    let after: Vec<_> = [
        "model.bpk",
        "optimizer.bpk",
        "ppo.json",
        "state.json",
        "env.json",
    ]
    .iter()
    .map(|n| read(n))
    .collect();
    assert!(before == after, "a file of the previous checkpoint changed");
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(left.is_empty(), "temporary files left: {left:?}");
    let loaded = checkpoint::load(dir.path(), &Device::flex()).unwrap();
    assert_eq!(loaded.state.timesteps, r);
    // A save that succeeds replaces every file.
    checkpoint::save_with(dir.path(), &t, &[("env.json", b"{\"new\": 2}".to_vec())]).unwrap();
    let loaded = checkpoint::load(dir.path(), &Device::flex()).unwrap();
    assert_eq!(loaded.state.timesteps, 2 * r);
    assert_eq!(read("env.json"), b"{\"new\": 2}");
}
