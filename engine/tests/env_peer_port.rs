//! The Python port of the trading env (`benches/peers/tradetune_env.py`, which the peer benchmark
//! trains with Stable-Baselines3) agrees with the Rust env step for step: this test steps the
//! Rust `CpuVecEnv` on fixed datasets and actions, writes the trace to JSON and has
//! `benches/peers/check_port.py` replay it through the port and compare every observation,
//! reward and done flag (float32 rounding).
//!
//! Needs `python3` with numpy and gymnasium; skips loudly without them unless
//! `TRADETUNE_REQUIRE_PEER_ENV=1` (`.ci/run` installs them and sets it).

use crate::common;

use std::path::Path;
use std::process::Command;

use tradetune_engine::env::bench::random_actions;
use tradetune_engine::env::{CpuVecEnv, EnvConfig, RewardKind, StartMode, VecEnv};

/// Whether `python3` imports numpy and gymnasium; a loud skip, or a failure under
/// `TRADETUNE_REQUIRE_PEER_ENV=1`, when it does not.
fn python_has_peer_env(test: &str) -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import numpy, gymnasium"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        let required = std::env::var("TRADETUNE_REQUIRE_PEER_ENV").is_ok_and(|v| v == "1");
        assert!(
            !required,
            "{test}: python3 with numpy and gymnasium is required (TRADETUNE_REQUIRE_PEER_ENV=1) \
             but not available; run `python3 -m pip install numpy gymnasium`"
        );
        eprintln!(
            "\n######## SKIPPED {test}: python3 cannot import numpy, gymnasium. ########\n\
             ######## `python3 -m pip install numpy gymnasium` ########\n"
        );
    }
    ok
}

/// Steps `cfg` over `range` of a random-walk dataset for `steps` steps of seeded actions in
/// [-scale, scale] (beyond ±1 they test the clipping), each kept with probability `keep` (else 0,
/// no order: positions are held long enough for the cooldown) and returns the case as JSON.
fn case(
    name: &str,
    cfg: EnvConfig,
    bars: usize,
    range: std::ops::Range<usize>,
    steps: usize,
    scale: f32,
    keep: f32,
) -> serde_json::Value {
    let data = common::random_walk_dataset(bars, 3, 2, 11);
    let mut env = CpuVecEnv::new(cfg.clone(), data.clone(), range.clone()).expect("valid env");
    let (n, m, od) = (env.n_envs(), env.action_dim(), env.obs_dim());
    let mask = random_actions(steps, n, m, 6);
    let actions: Vec<Vec<f32>> = random_actions(steps, n, m, 5)
        .into_iter()
        .zip(mask)
        .map(|(a, k)| {
            a.into_iter()
                .zip(k)
                .map(|(x, k)| {
                    if (k + 1.0) / 2.0 < keep {
                        x * scale
                    } else {
                        0.0
                    }
                })
                .collect()
        })
        .collect();
    let mut obs0 = vec![0.0; n * od];
    env.reset(&mut obs0);
    let (mut obs, mut rew, mut done) = (vec![0.0; n * od], vec![0.0; n], vec![0.0; n]);
    let (mut all_obs, mut all_rew, mut all_done) = (Vec::new(), Vec::new(), Vec::new());
    for a in &actions {
        env.step(a, &mut obs, &mut rew, &mut done);
        all_obs.push(obs.clone());
        all_rew.push(rew.clone());
        all_done.push(done.clone());
    }
    let ends = all_done.iter().flatten().filter(|d| **d > 0.0).count();
    assert!(
        ends >= n,
        "{name}: the trace must cross episode ends (auto-reset), saw {ends}"
    );
    let prices: Vec<Vec<f32>> = data.prices.outer_iter().map(|r| r.to_vec()).collect();
    let features: Vec<Vec<Vec<f32>>> = data
        .features
        .outer_iter()
        .map(|bar| bar.outer_iter().map(|a| a.to_vec()).collect())
        .collect();
    serde_json::json!({
        "name": name,
        "config": cfg,
        "range": [range.start, range.end],
        "prices": prices,
        "features": features,
        "actions": actions,
        "obs0": obs0,
        "obs": all_obs,
        "rewards": all_rew,
        "dones": all_done,
    })
}

#[test]
fn the_python_port_steps_like_the_rust_env() {
    let test = "the_python_port_steps_like_the_rust_env";
    if !python_has_peer_env(test) {
        return;
    }
    let cases = vec![
        // Random starts, lookback 2, every risk rule on, large orders against the cash.
        case(
            "excess_random_stops",
            EnvConfig::new()
                .with_n_envs(4)
                .with_lookback(2)
                .with_episode_bars(40)
                .with_trailing_stop_pct(0.03)
                .with_cooldown_bars(5)
                .with_min_order_value(1_000.0)
                .with_action_scale(400_000.0)
                .with_seed(3),
            300,
            10..290,
            150,
            1.5,
            0.3,
        ),
        // FinRL_Crypto compatibility (coin-magnitude orders, γ-discounted terminal reward),
        // log-return reward, strided starts, per-asset minimum orders, a buy budget.
        case(
            "compat_log_strided",
            EnvConfig::new()
                .with_n_envs(3)
                .with_episode_bars(30)
                .with_start(StartMode::Strided)
                .with_reward(RewardKind::LogReturn)
                .with_compat_finrl_crypto(true)
                .with_min_order_values(vec![50.0, 500.0, 5_000.0])
                .with_action_scale(2_000_000.0)
                .with_max_buy_fraction(0.5),
            200,
            0..200,
            100,
            1.0,
            1.0,
        ),
        // Fixed starts over the whole split, portfolio-change reward, no fees.
        case(
            "portfolio_fixed",
            EnvConfig::new()
                .with_n_envs(2)
                .with_start(StartMode::Fixed)
                .with_reward(RewardKind::PortfolioChange)
                .with_buy_fee(0.0)
                .with_sell_fee(0.001)
                .with_cooldown_bars(0),
            80,
            20..80,
            130,
            1.2,
            1.0,
        ),
    ];
    let dir = tempfile::tempdir().expect("temp dir");
    let trace = dir.path().join("trace.json");
    std::fs::write(
        &trace,
        serde_json::to_vec(&serde_json::json!({ "cases": cases })).expect("trace JSON"),
    )
    .expect("write the trace");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../benches/peers/check_port.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg(&trace)
        .output()
        .expect("run python3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "{} disagrees with the Rust env:\n{stdout}\n{stderr}",
        script.display()
    );
    assert_eq!(
        stdout.lines().filter(|l| l.starts_with("ok ")).count(),
        3,
        "every case is checked:\n{stdout}"
    );
}
