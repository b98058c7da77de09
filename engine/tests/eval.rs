//! Evaluation on the bundled sample's validation split and on constructed data: finite metrics
//! for an untrained policy, an equal-weight curve that matches the prices by hand, determinism,
//! and clear errors.

use std::sync::Arc;

use burn::tensor::Device;
use ndarray::{Array2, Array3};
use tradetune_engine::env::{CpuVecEnv, EnvConfig};
use tradetune_engine::eval::{EvalError, EvalSplit, Objective};
use tradetune_engine::market::{Dataset, DatasetConfig};
use tradetune_engine::ppo::trainer::NormalizationStats;
use tradetune_engine::ppo::{HostEnv, PpoConfig, Trainer};
use tradetune_engine::ppo::{evaluate_policy as evaluate, evaluate_trainer};

fn small_ppo() -> PpoConfig {
    PpoConfig::new()
        .with_n_steps(32)
        .with_batch_size(64)
        .with_n_epochs(1)
        .with_seed(3)
}

#[test]
fn an_untrained_policy_and_equal_weight_have_finite_metrics_on_the_bundled_validation_split() {
    let loaded = DatasetConfig::bundled().load().unwrap();
    let data = Arc::new(loaded.dataset);
    let env_cfg = EnvConfig::new();
    let device = Device::flex();
    let env = CpuVecEnv::new(env_cfg.clone(), data.clone(), loaded.split.train.clone()).unwrap();
    let trainer = Trainer::new(
        small_ppo().with_normalize_obs(true),
        HostEnv::new(env, &device),
        &device,
    )
    .unwrap();
    let split = EvalSplit::new(
        "validation",
        data.clone(),
        loaded.split.validation.clone(),
        &env_cfg,
    );
    let report = evaluate_trainer(&trainer, &split, Objective::SharpeExcess).unwrap();
    // Lookback 1: one equity point per bar of the split.
    assert_eq!(report.bars, loaded.split.validation.len());
    assert_eq!(report.agent_equity.len(), report.bars);
    assert_eq!(report.equal_weight_equity.len(), report.bars);
    assert_eq!(
        report.timestamps,
        data.timestamps[loaded.split.validation.clone()]
    );
    // Daily stock bars, no weekends.
    assert_eq!(report.periods_per_year, 252.0);
    for m in [report.agent, report.equal_weight] {
        for v in [
            m.total_return,
            m.sharpe,
            m.sortino,
            m.max_drawdown,
            m.turnover,
            m.fees_paid,
        ] {
            assert!(v.is_finite(), "{m:?}");
        }
        assert!((0.0..1.0).contains(&m.max_drawdown), "{m:?}");
    }
    // The untrained policy's mean action is small but nonzero: it trades, and pays for it.
    assert!(report.agent.turnover > 0.0, "{:?}", report.agent);
    assert!(report.agent.fees_paid > 0.0, "{:?}", report.agent);
    assert_eq!(report.equal_weight.fees_paid, 0.0);
    assert_eq!(
        report.objective,
        report.agent.sharpe - report.equal_weight.sharpe
    );
    // Deterministic: a second evaluation is identical.
    let again = evaluate_trainer(&trainer, &split, Objective::SharpeExcess).unwrap();
    assert_eq!(report, again);
}

/// Two assets over 40 daily bars whose prices follow known paths.
fn two_assets(bars: usize) -> Arc<Dataset> {
    let mut prices = Array2::<f32>::zeros((bars, 2));
    for t in 0..bars {
        let x = t as f32;
        prices[[t, 0]] = 100.0 + 5.0 * (x * 0.7).sin() + 0.3 * x;
        prices[[t, 1]] = 50.0 + 3.0 * (x * 1.3).cos() - 0.1 * x;
    }
    let features = Array3::<f32>::from_shape_fn((bars, 2, 1), |(t, m, _)| {
        ((t * 7 + m * 3) % 11) as f32 / 11.0 - 0.5
    });
    let monday = 1_704_067_200i64;
    // Weekdays only.
    let timestamps: Vec<i64> = (0..)
        .map(|d| monday + d * 86_400)
        .filter(|t| (t.div_euclid(86_400) + 3).rem_euclid(7) < 5)
        .take(bars)
        .collect();
    Arc::new(
        Dataset::from_arrays(
            vec!["A".into(), "B".into()],
            timestamps,
            prices,
            features,
            vec!["f".into()],
        )
        .unwrap(),
    )
}

#[test]
fn equal_weight_follows_the_prices_and_lookback_shortens_the_curve() {
    let data = two_assets(40);
    let env_cfg = EnvConfig::new()
        .with_initial_cash(10_000.0)
        .with_lookback(3);
    let device = Device::flex();
    let model = small_ppo().policy.init(1 + 2 + 3 * 2, 2, 0, &device);
    let split = EvalSplit::new("test", data.clone(), 10..40, &env_cfg);
    let report = evaluate(
        &model,
        &NormalizationStats::default(),
        &small_ppo(),
        &split,
        Objective::TotalReturn,
    )
    .unwrap();
    // The first usable bar is 10 + 3 − 1 = 12: 28 points.
    assert_eq!(report.bars, 28);
    assert_eq!(report.timestamps[0], data.timestamps[12]);
    // 5,000 in each asset at bar 12's prices, held.
    let p = &data.prices;
    for (i, v) in report.equal_weight_equity.iter().enumerate() {
        let t = 12 + i;
        let want =
            5_000.0 * (p[[t, 0]] / p[[12, 0]]) as f64 + 5_000.0 * (p[[t, 1]] / p[[12, 1]]) as f64;
        assert!((v - want).abs() < 0.05, "bar {t}: {v} vs {want}");
    }
    assert_eq!(report.agent_equity[0], 10_000.0);
    assert_eq!(report.objective, report.agent.total_return);
    let last = *report.agent_equity.last().unwrap();
    assert!((report.agent.total_return - (last / 10_000.0 - 1.0)).abs() < 1e-12);
}

#[test]
fn a_policy_for_other_data_and_a_too_short_split_are_clear_errors() {
    let data = two_assets(40);
    let env_cfg = EnvConfig::new();
    let device = Device::flex();
    // The env gives 1 + 2 + 2·1 = 5 values per observation (lookback 1); the policy takes 9.
    let model = small_ppo().policy.init(9, 2, 0, &device);
    let split = EvalSplit::new("validation", data.clone(), 0..40, &env_cfg);
    let err = evaluate(
        &model,
        &NormalizationStats::default(),
        &small_ppo(),
        &split,
        Objective::default(),
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            EvalError::Shape {
                policy: 9,
                env: 5,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("validation"), "{err}");

    let model = small_ppo().policy.init(5, 2, 0, &device);
    let short = EvalSplit::new("test", data, 38..40, &env_cfg);
    let err = evaluate(
        &model,
        &NormalizationStats::default(),
        &small_ppo(),
        &short,
        Objective::default(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("test split"), "{err}");
    assert!(err.to_string().contains("at least 2"), "{err}");
}
