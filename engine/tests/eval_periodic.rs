//! Periodic evaluation during training: events at the right updates, timed as their own phase,
//! and the same numbers as evaluating the policy directly.

use burn::tensor::Device;
use tradetune_engine::env::bench::bench_dataset;
use tradetune_engine::env::{CpuVecEnv, EnvConfig};
use tradetune_engine::eval::{EvalSplit, Objective};
use tradetune_engine::ppo::evaluate_trainer;
use tradetune_engine::ppo::{HostEnv, PeriodicEval, PpoConfig, TrainEvent, Trainer};

fn trainer(every: usize) -> Trainer<HostEnv<CpuVecEnv>> {
    let data = bench_dataset(600, 3, 4, 11);
    let env_cfg = EnvConfig::new().with_n_envs(4).with_episode_bars(50);
    let env = CpuVecEnv::new(env_cfg.clone(), data.clone(), 0..400).unwrap();
    let cfg = PpoConfig::new()
        .with_n_steps(16)
        .with_batch_size(32)
        .with_n_epochs(1)
        .with_seed(5);
    let device = Device::flex();
    Trainer::new(cfg, HostEnv::new(env, &device), &device)
        .unwrap()
        .with_evaluation(PeriodicEval {
            every,
            split: EvalSplit::new("validation", data, 400..600, &env_cfg),
            objective: Objective::ExcessReturn,
        })
        .unwrap()
}

#[test]
fn evaluates_every_n_updates_as_its_own_phase() {
    let mut t = trainer(2);
    let mut evaluated = Vec::new();
    let mut eval_phase = Vec::new();
    let report = t
        .learn(5 * 16 * 4, &mut |e| match e {
            TrainEvent::Evaluation {
                update,
                timesteps,
                summary,
            } => {
                assert_eq!(timesteps, update * 64);
                assert_eq!(summary.split, "validation");
                assert_eq!(summary.bars, 200);
                assert_eq!(summary.objective_name, Objective::ExcessReturn);
                assert!(summary.objective.is_finite());
                evaluated.push(update);
            }
            TrainEvent::Progress { update, phases, .. } => {
                eval_phase.push((update, phases.evaluation > 0.0));
                // The CPU compiles nothing: no evaluation's time is taken for compilation.
                assert_eq!(phases.compile, 0.0, "update {update}: {phases:?}");
            }
            _ => {}
        })
        .unwrap();
    assert_eq!(evaluated, vec![2, 4]);
    assert_eq!(
        eval_phase,
        vec![(1, false), (2, true), (3, false), (4, true), (5, false)]
    );
    assert!(report.phases.evaluation > 0.0);
    assert!(report.phases.total() >= report.phases.evaluation);
    assert!(report.last_evaluation.is_some());
}

#[test]
fn the_last_evaluation_is_the_policy_s_evaluation() {
    let mut t = trainer(1);
    let report = t.learn(2 * 64, &mut |_| {}).unwrap();
    let last = report.last_evaluation.unwrap();
    let split = EvalSplit::new(
        "validation",
        bench_dataset(600, 3, 4, 11),
        400..600,
        &EnvConfig::new().with_n_envs(4).with_episode_bars(50),
    );
    let direct = evaluate_trainer(&t, &split, Objective::ExcessReturn).unwrap();
    assert_eq!(last, direct.summary());
}

#[test]
fn eval_every_zero_is_refused() {
    let data = bench_dataset(300, 2, 2, 1);
    let env_cfg = EnvConfig::new().with_n_envs(2);
    let env = CpuVecEnv::new(env_cfg.clone(), data.clone(), 0..200).unwrap();
    let device = Device::flex();
    let cfg = PpoConfig::new().with_n_steps(8).with_batch_size(16);
    let err = Trainer::new(cfg, HostEnv::new(env, &device), &device)
        .unwrap()
        .with_evaluation(PeriodicEval {
            every: 0,
            split: EvalSplit::new("validation", data, 200..300, &env_cfg),
            objective: Objective::default(),
        })
        .err()
        .unwrap();
    assert!(err.to_string().contains("eval_every"), "{err}");
}
