//! Property tests: the fast CPU environment matches the f64 reference on random configurations
//! and action sequences, and the accounting invariants hold.

use crate::common;

use proptest::prelude::*;
use tradetune_engine::env::reference::ReferenceEnv;
use tradetune_engine::env::{CpuVecEnv, EnvConfig, RewardKind, StartMode, VecEnv};

fn close(a: f64, b: f64, rel: f64, abs: f64) -> bool {
    (a - b).abs() <= abs + rel * a.abs().max(b.abs())
}

prop_compose! {
    fn arb_config()(
        n_envs in 1usize..5,
        buy_fee in 0.0f32..0.01,
        sell_fee in 0.0f32..0.01,
        min_order in 0.0f32..20_000.0,
        max_buy_fraction in 0.05f32..1.0,
        action_scale in 1_000.0f32..400_000.0,
        trailing in prop_oneof![Just(0.0f32), 0.01f32..0.2],
        cooldown in 0usize..6,
        cooldown_frac in 0.0f32..1.0,
        lookback in 1usize..4,
        reward in prop_oneof![Just(RewardKind::ExcessVsEqualWeight), Just(RewardKind::PortfolioChange), Just(RewardKind::LogReturn)],
        episode_bars in prop_oneof![Just(0usize), 3usize..25],
        start in prop_oneof![Just(StartMode::Random), Just(StartMode::Strided), Just(StartMode::Fixed)],
        seed in 0u64..1000,
        compat in proptest::bool::weighted(0.2),
    ) -> EnvConfig {
        EnvConfig::new()
            .with_n_envs(n_envs)
            .with_buy_fee(buy_fee)
            .with_sell_fee(sell_fee)
            .with_min_order_value(min_order)
            .with_max_buy_fraction(max_buy_fraction)
            .with_action_scale(action_scale)
            .with_trailing_stop_pct(trailing)
            .with_cooldown_bars(cooldown)
            .with_cooldown_sell_fraction(cooldown_frac)
            .with_lookback(lookback)
            .with_reward(reward)
            .with_episode_bars(episode_bars)
            .with_start(start)
            .with_seed(seed)
            .with_compat_finrl_crypto(compat)
    }
}

fn arb_actions(len: usize) -> impl Strategy<Value = Vec<f32>> {
    prop::collection::vec(
        prop_oneof![
            8 => -1.2f32..1.2,
            1 => Just(0.0f32),
            1 => Just(f32::NAN),
        ],
        len,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    #[test]
    fn cpu_env_matches_the_reference(
        cfg in arb_config(),
        m in 1usize..5,
        f in 1usize..3,
        data_seed in 0u64..100,
        steps in 5usize..60,
        act_seed in prop::collection::vec(arb_actions(4 * 4), 60),
    ) {
        let t = 80;
        let data = common::random_walk_dataset(t, m, f, data_seed);
        let range = 5..t;
        let n = cfg.n_envs;
        let mut env = CpuVecEnv::new(cfg.clone(), data.clone(), range.clone()).unwrap();
        let mut refs: Vec<ReferenceEnv> = (0..n).map(|i| ReferenceEnv::new(&cfg, &data, range.clone(), i)).collect();
        let od = env.obs_dim();
        let mut obs = vec![0.0; n * od];
        let mut rew = vec![0.0; n];
        let mut done = vec![0.0; n];
        env.reset(&mut obs);
        for s in 0..steps {
            let actions: Vec<f32> = (0..n * m).map(|k| act_seed[s][k % act_seed[s].len()]).collect();
            env.step(&actions, &mut obs, &mut rew, &mut done);
            for (i, r) in refs.iter_mut().enumerate() {
                let rec = r.step(&actions[i * m..(i + 1) * m]);
                let scale = cfg.initial_cash as f64;
                // Invariants of the reference itself.
                prop_assert!(r.cash >= 0.0);
                prop_assert!(r.holdings.iter().all(|h| *h >= 0.0));
                let pnl: f64 = (0..m).map(|a| rec.holdings_before[a] * (rec.price_after[a] - rec.price_before[a])).sum();
                prop_assert!(close(rec.value_after - rec.value_before, pnl - rec.fees, 0.0, 1e-6 * scale),
                    "value change {} != holdings·Δprice {} − fees {}", rec.value_after - rec.value_before, pnl, rec.fees);
                // The CPU env agrees with it.
                prop_assert_eq!(done[i] == 1.0, rec.done, "env {} step {}", i, s);
                prop_assert!(close(rew[i] as f64, rec.reward, 1e-3, 1e-4 * cfg.reward_scale as f64),
                    "env {i} step {s}: reward {} vs reference {}", rew[i], rec.reward);
                prop_assert!(close(env.cash(i) as f64, r.cash, 1e-4, 1e-4 * scale), "cash {} vs {}", env.cash(i), r.cash);
                prop_assert!(env.cash(i) >= 0.0);
                for (a, h) in env.holdings(i).iter().enumerate() {
                    prop_assert!(*h >= 0.0);
                    prop_assert!(close(*h as f64, r.holdings[a], 1e-4, 1e-6 * scale / rec.price_after[a]));
                }
                prop_assert!(close(env.last_step_fees(i) as f64, rec.fees, 1e-3, 1e-6 * scale));
                prop_assert_eq!(env.bar(i), r.bar);
                let ro = r.observation();
                for (k, o) in obs[i * od..(i + 1) * od].iter().enumerate() {
                    prop_assert!(close(*o as f64, ro[k], 1e-3, 1e-4), "obs[{k}] {} vs {}", o, ro[k]);
                }
            }
        }
    }

    #[test]
    fn runs_are_deterministic_and_independent_of_parallel_chunking(
        cfg in arb_config(),
        actions in arb_actions(4 * 64),
    ) {
        let cfg = cfg.with_n_envs(64);
        let data = common::random_walk_dataset(60, 4, 2, 3);
        let mut serial = CpuVecEnv::new(cfg.clone(), data.clone(), 0..60).unwrap();
        let mut parallel = CpuVecEnv::new(cfg.clone(), data.clone(), 0..60).unwrap();
        serial.set_parallel_min_envs(usize::MAX);
        parallel.set_parallel_min_envs(1);
        let od = serial.obs_dim();
        let (mut o1, mut o2) = (vec![0.0; 64 * od], vec![0.0; 64 * od]);
        let (mut r1, mut r2, mut d1, mut d2) = (vec![0.0; 64], vec![0.0; 64], vec![0.0; 64], vec![0.0; 64]);
        for _ in 0..30 {
            serial.step(&actions, &mut o1, &mut r1, &mut d1);
            parallel.step(&actions, &mut o2, &mut r2, &mut d2);
            prop_assert_eq!(&o1, &o2);
            prop_assert_eq!(&r1, &r2);
            prop_assert_eq!(&d1, &d2);
        }
    }
}

/// The case proptest found (`proptest-regressions/env_properties.txt`): in FinRL_Crypto's
/// compatibility mode a buy of `units` and a sell of `units` left 0.0005 units in f32 (the
/// position is `value / price`), and that dust kept the position open with its trailing-stop
/// high, so the next buy of the asset was stopped out on the old high while the f64 reference
/// held it. A sell order within a rounding of the position now sells all of it, everywhere.
#[test]
fn a_full_sell_leaves_no_dust_to_carry_an_old_trailing_high() {
    let cfg = EnvConfig::new()
        .with_n_envs(2)
        .with_buy_fee(0.0)
        .with_sell_fee(0.0)
        .with_min_order_value(17076.098)
        .with_max_buy_fraction(0.05)
        .with_action_scale(79843.66)
        .with_trailing_stop_pct(0.049607456)
        .with_cooldown_bars(0)
        .with_lookback(1)
        .with_episode_bars(16)
        .with_start(StartMode::Random)
        .with_seed(407)
        .with_compat_finrl_crypto(true);
    let data = common::random_walk_dataset(80, 2, 1, 16);
    let mut env = CpuVecEnv::new(cfg.clone(), data.clone(), 5..80).unwrap();
    let mut reference = ReferenceEnv::new(&cfg, &data, 5..80, 0);
    let od = env.obs_dim();
    let (mut obs, mut rew, mut done) = (vec![0.0; 2 * od], vec![0.0; 2], vec![0.0; 2]);
    env.reset(&mut obs);
    for step in 0..15 {
        let a = match step {
            7 => 1.1155403,
            8 => -1.1052,
            12 => 1.0130228,
            _ => 0.0,
        };
        let actions = [0.0, a, 0.0, a];
        env.step(&actions, &mut obs, &mut rew, &mut done);
        reference.step(&actions[..2]);
        if step == 8 {
            assert_eq!(env.holdings(0)[1], 0.0, "the sell left dust");
        }
        let (cash, ref_cash) = (env.cash(0) as f64, reference.cash);
        assert!(
            close(cash, ref_cash, 1e-4, 100.0),
            "step {step}: cash {cash} vs {ref_cash}"
        );
        let (h, ref_h) = (env.holdings(0)[1] as f64, reference.holdings[1]);
        assert!(
            close(h, ref_h, 1e-4, 1e-3),
            "step {step}: holding {h} vs {ref_h}"
        );
    }
}
