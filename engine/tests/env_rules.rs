//! Each trading rule fires exactly when it should, on hand-made prices.

use crate::common;

use ndarray::Array2;
use tradetune_engine::env::{CpuVecEnv, EnvConfig, RewardKind, StartMode, VecEnv};

/// One env, fixed start at bar 0, whole-data episode, no cooldown, no fees unless set.
fn base() -> EnvConfig {
    EnvConfig::new()
        .with_n_envs(1)
        .with_start(StartMode::Fixed)
        .with_episode_bars(0)
        .with_cooldown_bars(0)
        .with_buy_fee(0.0)
        .with_sell_fee(0.0)
        .with_initial_cash(1000.0)
        .with_action_scale(100.0)
        .with_min_order_value(10.0)
}

struct Run {
    env: CpuVecEnv,
    obs: Vec<f32>,
    rew: Vec<f32>,
    done: Vec<f32>,
}

impl Run {
    /// `prices` followed by 20 copies of its last row, so that an episode spanning the whole
    /// data does not end during the test unless the test sets `episode_bars`.
    fn new(cfg: EnvConfig, mut prices: Vec<Vec<f32>>) -> Self {
        let last = prices[prices.len() - 1].clone();
        prices.extend(std::iter::repeat_n(last, 20));
        let t = prices.len();
        let m = prices[0].len();
        let flat: Vec<f32> = prices.into_iter().flatten().collect();
        let data = common::dataset_from_prices(Array2::from_shape_vec((t, m), flat).unwrap(), 1, 1);
        let env = CpuVecEnv::new(cfg, data.clone(), 0..t).unwrap();
        let n = env.n_envs();
        let od = env.obs_dim();
        let mut run = Self {
            env,
            obs: vec![0.0; n * od],
            rew: vec![0.0; n],
            done: vec![0.0; n],
        };
        run.env.reset(&mut run.obs);
        run
    }
    fn step(&mut self, actions: &[f32]) -> f32 {
        self.env
            .step(actions, &mut self.obs, &mut self.rew, &mut self.done);
        self.rew[0]
    }
}

#[test]
fn buy_pays_the_fee_and_buys_value_over_price() {
    let mut r = Run::new(
        base().with_buy_fee(0.01),
        vec![vec![10.0], vec![20.0], vec![20.0]],
    );
    r.step(&[0.5]); // 50 of cash at price 20
    assert!((r.env.holdings(0)[0] - 2.5).abs() < 1e-6);
    assert!((r.env.cash(0) - (1000.0 - 50.0 * 1.01)).abs() < 1e-4);
    assert!((r.env.last_step_fees(0) - 0.5).abs() < 1e-6);
}

#[test]
fn minimum_order_value_is_the_exact_threshold() {
    // action 0.0999 → 9.99 < 10: ignored; 0.1 → 10: executed.
    let mut r = Run::new(base(), vec![vec![10.0]; 4]);
    r.step(&[0.0999]);
    assert_eq!(r.env.holdings(0)[0], 0.0);
    r.step(&[0.1]);
    assert!((r.env.holdings(0)[0] - 1.0).abs() < 1e-6);
    // Sells obey it too.
    r.step(&[-0.09]);
    assert!((r.env.holdings(0)[0] - 1.0).abs() < 1e-6);
}

#[test]
fn per_asset_minimums_override_the_global_one() {
    let cfg = base().with_min_order_values(vec![5.0, 50.0]);
    let mut r = Run::new(cfg, vec![vec![10.0, 10.0]; 3]);
    r.step(&[0.06, 0.4]); // 6 ≥ 5 buys; 40 < 50 does not
    let h = r.env.holdings(0);
    assert!(h[0] > 0.0 && h[1] == 0.0, "{h:?}");
}

#[test]
fn sells_never_exceed_holdings() {
    let mut r = Run::new(base(), vec![vec![10.0]; 4]);
    r.step(&[0.2]); // 20 → 2 units
    r.step(&[-1.0]); // wants 100 of value, has 20
    assert_eq!(r.env.holdings(0)[0], 0.0);
    assert!((r.env.cash(0) - 1000.0).abs() < 1e-4);
}

#[test]
fn shared_budget_scales_buys_pro_rata_and_cash_stays_non_negative() {
    let cfg = base().with_initial_cash(150.0).with_buy_fee(0.01);
    let mut r = Run::new(cfg, vec![vec![10.0, 20.0, 40.0]; 3]);
    r.step(&[1.0, 1.0, 0.5]); // wants 100 + 100 + 50 = 250 (+fees) > 150
    let cash = r.env.cash(0);
    assert!((0.0..1e-3).contains(&cash), "cash {cash}");
    let h = r.env.holdings(0);
    let spent: Vec<f32> = h
        .iter()
        .zip([10.0, 20.0, 40.0])
        .map(|(u, p)| u * p)
        .collect();
    // Pro rata: 2 : 2 : 1.
    assert!((spent[0] / spent[2] - 2.0).abs() < 1e-4, "{spent:?}");
    assert!((spent[1] / spent[2] - 2.0).abs() < 1e-4, "{spent:?}");
    assert!((spent.iter().sum::<f32>() * 1.01 - 150.0).abs() < 1e-3);
}

#[test]
fn max_buy_fraction_caps_one_step_of_buys() {
    let cfg = base().with_max_buy_fraction(0.1);
    let mut r = Run::new(cfg, vec![vec![10.0]; 3]);
    r.step(&[1.0]); // wants 100, may spend 100 (10 % of 1000): exactly the cap
    r.step(&[1.0]); // cash 900 → may spend 90
    assert!((r.env.cash(0) - 810.0).abs() < 1e-3, "{}", r.env.cash(0));
}

#[test]
fn trailing_stop_fires_at_exactly_its_percentage_below_the_high() {
    let cfg = base().with_trailing_stop_pct(0.1);
    // Buy at 100 (bar 1), high 120 (bar 2), 108.5 is 9.6 % below: hold; 108 is 10 %: stop.
    let prices = vec![
        vec![100.0],
        vec![100.0],
        vec![120.0],
        vec![108.5],
        vec![108.0],
        vec![108.0],
    ];
    let mut r = Run::new(cfg, prices);
    r.step(&[0.5]);
    let units = r.env.holdings(0)[0];
    assert!(units > 0.0);
    r.step(&[0.0]);
    r.step(&[0.0]);
    assert_eq!(r.env.holdings(0)[0], units, "stopped too early");
    r.step(&[0.0]);
    assert_eq!(r.env.holdings(0)[0], 0.0, "stop did not fire at 10 %");
}

#[test]
fn cooldown_sells_its_fraction_after_exactly_cooldown_bars_without_a_trade() {
    let cfg = base()
        .with_cooldown_bars(3)
        .with_cooldown_sell_fraction(0.25);
    let mut r = Run::new(cfg, vec![vec![10.0]; 10]);
    r.step(&[0.4]); // buy 4 units at bar 1
    for _ in 0..2 {
        r.step(&[0.0]); // bars 2, 3: held 1, 2
        assert!((r.env.holdings(0)[0] - 4.0).abs() < 1e-6);
    }
    r.step(&[0.0]); // bar 4: held 3 → sell 25 %
    assert!(
        (r.env.holdings(0)[0] - 3.0).abs() < 1e-6,
        "{:?}",
        r.env.holdings(0)
    );
    // The counter restarts: next forced sell 3 bars later.
    r.step(&[0.0]);
    r.step(&[0.0]);
    assert!((r.env.holdings(0)[0] - 3.0).abs() < 1e-6);
    r.step(&[0.0]);
    assert!((r.env.holdings(0)[0] - 2.25).abs() < 1e-6);
}

#[test]
fn a_trade_restarts_the_cooldown() {
    let cfg = base()
        .with_cooldown_bars(2)
        .with_cooldown_sell_fraction(0.5);
    let mut r = Run::new(cfg, vec![vec![10.0]; 6]);
    r.step(&[0.4]); // bar 1: buy
    r.step(&[0.2]); // bar 2: buy more → counter 0
    r.step(&[0.0]); // bar 3: held 1
    assert!((r.env.holdings(0)[0] - 6.0).abs() < 1e-6);
    r.step(&[0.0]); // bar 4: held 2 → fires
    assert!((r.env.holdings(0)[0] - 3.0).abs() < 1e-6);
}

#[test]
fn episode_end_resets_to_the_initial_state() {
    let cfg = base().with_episode_bars(3).with_buy_fee(0.01);
    let mut r = Run::new(
        cfg,
        vec![vec![10.0], vec![11.0], vec![12.0], vec![13.0], vec![14.0]],
    );
    let first_obs = r.obs.clone();
    for i in 0..3 {
        r.step(&[0.3]);
        assert_eq!(r.done[0], if i == 2 { 1.0 } else { 0.0 });
    }
    assert_eq!(r.env.cash(0), 1000.0);
    assert_eq!(r.env.holdings(0), vec![0.0]);
    assert_eq!(r.env.bar(0), 0);
    let stats = r
        .env
        .episode_stats(0)
        .expect("stats of the finished episode");
    assert_eq!(stats.length, 3);
    assert!(stats.fees > 0.0);
    // Fixed start: the new episode's first observation equals the first one ever.
    r.env.reset(&mut r.obs);
    assert_eq!(r.obs, first_obs);
}

#[test]
fn excess_reward_sums_to_the_final_excess_over_equal_weight() {
    let cfg = base()
        .with_episode_bars(4)
        .with_reward(RewardKind::ExcessVsEqualWeight)
        .with_reward_scale(1.0)
        .with_buy_fee(0.002);
    let prices = vec![
        vec![10.0, 50.0],
        vec![11.0, 49.0],
        vec![12.0, 47.0],
        vec![10.5, 52.0],
        vec![13.0, 51.0],
    ];
    let mut r = Run::new(cfg, prices);
    let mut sum = 0.0;
    for a in [[0.9, -0.2], [0.1, 0.5], [-0.5, 0.3], [0.0, 0.0]] {
        sum += r.step(&a);
    }
    let s = r.env.episode_stats(0).unwrap();
    let expected = s.total_return - s.equal_weight_return;
    assert!((sum - expected).abs() < 1e-5, "sum {sum} vs {expected}");
    assert!((s.reward_sum - sum).abs() < 1e-6);
}

#[test]
fn log_and_portfolio_rewards() {
    let prices = vec![vec![10.0], vec![10.0], vec![20.0]];
    let mut r = Run::new(
        base()
            .with_reward(RewardKind::PortfolioChange)
            .with_reward_scale(1.0),
        prices.clone(),
    );
    r.step(&[1.0]); // 100 → 10 units
    let rw = r.step(&[0.0]); // value 900 + 200 = 1100
    assert!((rw - 0.1).abs() < 1e-6);
    let mut r = Run::new(
        base()
            .with_reward(RewardKind::LogReturn)
            .with_reward_scale(1.0),
        prices,
    );
    r.step(&[1.0]);
    let rw = r.step(&[0.0]);
    assert!((rw - (1.1f32).ln()).abs() < 1e-6);
}

#[test]
fn nan_and_out_of_range_actions_are_safe() {
    let mut r = Run::new(base(), vec![vec![10.0]; 4]);
    r.step(&[f32::NAN]);
    assert_eq!(r.env.holdings(0)[0], 0.0);
    r.step(&[7.0]); // clipped to 1.0 → 100 of value
    assert!((r.env.holdings(0)[0] - 10.0).abs() < 1e-5);
}

#[test]
fn observation_layout_is_cash_holdings_then_lagged_features() {
    let cfg = base().with_lookback(2);
    let mut r = Run::new(cfg, vec![vec![10.0, 20.0]; 5]);
    assert_eq!(r.env.obs_dim(), 1 + 2 + 2 * 2); // 1 feature per asset
    r.step(&[0.5, 0.0]); // 50 in asset 0
    assert!((r.obs[0] - 0.95).abs() < 1e-6);
    assert!((r.obs[1] - 0.05).abs() < 1e-6);
    assert_eq!(r.obs[2], 0.0);
}

#[test]
fn compat_mode_replaces_the_terminal_reward_by_the_discounted_sum() {
    let cfg = base()
        .with_compat_finrl_crypto(true)
        .with_episode_bars(3)
        .with_reward(RewardKind::PortfolioChange)
        .with_reward_scale(1.0)
        .with_action_scale(1000.0); // 100 units per action at a 2-digit price
    let prices = vec![vec![10.0], vec![10.0], vec![12.0], vec![15.0], vec![15.0]];
    let mut r = Run::new(cfg, prices);
    let r1 = r.step(&[0.5]); // 1000/10/10¹ = 10 units per action: 5 units, 50 of value
    let r2 = r.step(&[0.0]);
    let r3 = r.step(&[0.0]);
    assert!((r.env.episode_stats(0).unwrap().length) == 3);
    let g = (r1 * 0.99 + r2) * 0.99 + (15.0 - 12.0) * 5.0 / 1000.0;
    assert!((r3 - g).abs() < 1e-6, "terminal {r3} vs discounted sum {g}");
}
