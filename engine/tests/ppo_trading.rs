//! PPO learns on the real trading environment (`CpuVecEnv`) over a synthetic market with a
//! planted signal: each asset's feature at bar t is the sign of its return two bars later —
//! the return the agent earns by trading on it, since an order placed on the observation of
//! bar t executes at bar t+1's price.

use std::sync::Arc;

use burn::tensor::{Device, Tensor, TensorData};
use ndarray::{Array2, Array3};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use tradetune_engine::env::{CpuVecEnv, EnvConfig, StartMode, VecEnv};
use tradetune_engine::market::Dataset;
use tradetune_engine::ppo::{ActorCriticConfig, HostEnv, NetArch, PpoConfig, Trainer};

const ASSETS: usize = 2;

/// Prices move ±1.5 % a bar (random sign); feature[t][m] = sign of the move from t+1 to t+2
/// with probability 0.9 (10 % of the signs are flipped), zero at the end.
fn signal_dataset(bars: usize, seed: u64) -> Arc<Dataset> {
    let mut rng = StdRng::seed_from_u64(seed);
    let moves: Vec<[f32; ASSETS]> = (0..bars)
        .map(|_| std::array::from_fn(|_| if rng.random_bool(0.5) { 1.0 } else { -1.0 }))
        .collect();
    let mut prices = Array2::<f32>::zeros((bars, ASSETS));
    let mut features = Array3::<f32>::zeros((bars, ASSETS, 1));
    for m in 0..ASSETS {
        let mut p = 100.0f32;
        for t in 0..bars {
            if t > 0 {
                p *= 1.0 + 0.015 * moves[t][m];
            }
            prices[[t, m]] = p;
            if t + 2 < bars {
                let flip = if rng.random_bool(0.1) { -1.0 } else { 1.0 };
                features[[t, m, 0]] = moves[t + 2][m] * flip;
            }
        }
    }
    Arc::new(
        Dataset::from_arrays(
            (0..ASSETS).map(|i| format!("A{i}")).collect(),
            (0..bars as i64).map(|i| i * 300).collect(),
            prices,
            features,
            vec!["next_move".into()],
        )
        .unwrap(),
    )
}

fn env_config(n_envs: usize) -> EnvConfig {
    EnvConfig::new()
        .with_n_envs(n_envs)
        .with_initial_cash(100_000.0)
        .with_action_scale(50_000.0)
        .with_buy_fee(0.0005)
        .with_sell_fee(0.0005)
        .with_cooldown_bars(0)
        .with_episode_bars(64)
}

/// Mean episode reward of the deterministic policy over 16 strided validation episodes.
fn evaluate(trainer: &Trainer<HostEnv<CpuVecEnv>>, data: &Arc<Dataset>) -> f32 {
    let n = 16;
    let cfg = env_config(n).with_start(StartMode::Strided).with_seed(1);
    let mut env = CpuVecEnv::new(cfg, data.clone(), 1_500..data.n_bars()).unwrap();
    let d = env.obs_dim();
    let mut obs = vec![0.0; n * d];
    env.reset(&mut obs);
    let (mut rewards, mut dones) = (vec![0.0; n], vec![0.0; n]);
    let mut total = 0.0;
    for _ in 0..64 {
        let t = Tensor::<2>::from_data(TensorData::new(obs.clone(), [n, d]), &Device::flex());
        let actions: Vec<f32> = trainer.act(t).try_into_vec_as().unwrap();
        env.step(&actions, &mut obs, &mut rewards, &mut dones);
        total += rewards.iter().sum::<f32>();
    }
    total / n as f32
}

#[test]
fn ppo_learns_the_planted_signal() {
    let data = signal_dataset(2_000, 21);
    let device = Device::flex();
    // Train on the first 1,500 bars, evaluate on the rest.
    let env = CpuVecEnv::new(env_config(8), data.clone(), 0..1_500).unwrap();
    let cfg = PpoConfig::new()
        .with_learning_rate(1e-3)
        .with_n_steps(64)
        .with_batch_size(128)
        .with_n_epochs(4)
        .with_gamma(0.9)
        .with_seed(2)
        .with_policy(
            ActorCriticConfig::new()
                .with_net_arch(NetArch::new().with_pi(vec![32, 32]).with_vf(vec![32, 32]))
                .with_log_std_init(-0.5),
        );
    let mut trainer = Trainer::new(cfg, HostEnv::new(env, &device), &device).unwrap();
    let before = evaluate(&trainer, &data);
    let report = trainer.learn(40 * 64 * 8, &mut |_| {}).unwrap();
    let after = evaluate(&trainer, &data);
    eprintln!(
        "validation episode reward {before:.2} -> {after:.2} ({} updates, {:.0} samples/s)",
        report.updates, report.samples_per_second
    );
    assert!(
        after > before + 5.0,
        "trained reward {after} not clearly above untrained {before}"
    );
}
