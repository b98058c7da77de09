//! Throughput of the environments: env-steps per second (one env advancing one bar, all
//! assets), for `tradetune bench env` and the criterion benchmark.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ndarray::{Array2, Array3};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde::Serialize;

use crate::{CpuVecEnv, EnvConfig, EnvError, VecEnv};
use tradetune_market::Dataset;

/// A random-walk dataset of `t` bars × `m` assets × `f` features, for benchmarks.
pub fn bench_dataset(t: usize, m: usize, f: usize, seed: u64) -> Arc<Dataset> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut prices = Array2::<f32>::zeros((t, m));
    for a in 0..m {
        let mut p = 10f32.powf(rng.random_range(0.0f32..3.0));
        for i in 0..t {
            prices[[i, a]] = p;
            p = walk_step(p, rng.random_range(-0.02f32..0.02).exp());
        }
    }
    let features = Array3::from_shape_fn((t, m, f), |_| rng.random_range(-3.0f32..3.0));
    let ds = Dataset::from_arrays(
        (0..m).map(|i| format!("asset{i}")).collect(),
        (0..t as i64).map(|i| i * 300).collect(),
        prices,
        features,
        (0..f).map(|i| format!("f{i}")).collect(),
    );
    // The arrays above satisfy every check of from_arrays by construction.
    Arc::new(ds.unwrap_or_else(|e| unreachable!("bench dataset: {e}")))
}

/// The next price of a walk at `p` moved by the factor `step`: reflected at 1e-6 and 1e12, so
/// that a walk of millions of bars never leaves f32's range (a price that is not finite, or 0,
/// is no price).
fn walk_step(p: f32, step: f32) -> f32 {
    match p * step {
        q if (1e-6..=1e12).contains(&q) => q,
        _ => p / step,
    }
}

/// One measured configuration.
#[derive(Debug, Clone, Serialize)]
pub struct EnvBenchResult {
    /// `cpu-1thread`, `cpu-rayon`, or `tensor:<device>`.
    pub implementation: String,
    pub n_envs: usize,
    pub n_assets: usize,
    pub n_features: usize,
    pub lookback: usize,
    pub steps: u64,
    pub seconds: f64,
    /// n_envs × steps / seconds.
    pub env_steps_per_sec: f64,
}

/// Random actions in [-1, 1], `batches` different batches of `n × m`, cycled through.
pub fn random_actions(batches: usize, n: usize, m: usize, seed: u64) -> Vec<Vec<f32>> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..batches)
        .map(|_| (0..n * m).map(|_| rng.random_range(-1.0f32..1.0)).collect())
        .collect()
}

/// Steps `env` for at least `min_time` (and at least 10 steps) and reports the throughput.
pub fn measure<E: VecEnv>(env: &mut E, implementation: &str, min_time: Duration) -> EnvBenchResult {
    let n = env.n_envs();
    let m = env.action_dim();
    // A policy writes the actions right before the step, so they are in cache: keep the cycled
    // batches within ~256 KiB instead of streaming megabytes of actions from memory.
    let batches = (65_536 / (n * m).max(1)).clamp(2, 64);
    let actions = random_actions(batches, n, m, 1);
    let mut obs = vec![0.0; n * env.obs_dim()];
    let mut rew = vec![0.0; n];
    let mut done = vec![0.0; n];
    env.reset(&mut obs);
    // Warm-up: page in the data and the buffers.
    for a in actions.iter().take(8) {
        env.step(a, &mut obs, &mut rew, &mut done);
    }
    let start = Instant::now();
    let mut steps = 0u64;
    while steps < 10 || start.elapsed() < min_time {
        for a in &actions {
            env.step(a, &mut obs, &mut rew, &mut done);
        }
        steps += actions.len() as u64;
    }
    let seconds = start.elapsed().as_secs_f64();
    EnvBenchResult {
        implementation: implementation.to_owned(),
        n_envs: n,
        n_assets: m,
        n_features: (env.obs_dim() - 1 - m) / m.max(1),
        lookback: 1,
        steps,
        seconds,
        env_steps_per_sec: n as f64 * steps as f64 / seconds,
    }
}

/// Measures the CPU environment, single-threaded and with rayon, for each of `envs`.
pub fn run_cpu(
    envs: &[usize],
    assets: usize,
    features: usize,
    lookback: usize,
    min_time: Duration,
) -> Result<Vec<EnvBenchResult>, EnvError> {
    let data = bench_dataset(20_000, assets, features, 7);
    let mut out = Vec::new();
    for &n in envs {
        let cfg = EnvConfig::new()
            .with_n_envs(n)
            .with_lookback(lookback)
            .with_episode_bars(1_000)
            .with_trailing_stop_pct(0.05)
            .with_min_order_value(1_000.0);
        for (name, threshold) in [("cpu-1thread", usize::MAX), ("cpu-rayon", 256)] {
            if name == "cpu-rayon" && (n < 256 || rayon::current_num_threads() < 2) {
                continue;
            }
            let mut env = CpuVecEnv::new(cfg.clone(), data.clone(), 0..data.n_bars())?;
            env.set_parallel_min_envs(threshold);
            let mut r = measure(&mut env, name, min_time);
            r.lookback = lookback;
            r.n_features = features;
            out.push(r);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// At its bounds the walk turns back; a walk of millions of bars stays finite.
    #[test]
    fn a_walk_is_reflected_at_its_bounds() {
        let up = 0.02f32.exp();
        assert_eq!(walk_step(1e12, up), 1e12 / up);
        assert_eq!(walk_step(1e-6, 1.0 / up), 1e-6 * up);
        assert_eq!(walk_step(10.0, up), 10.0 * up);
        // Always up: without the bounds, f32's range ends after about 4,400 steps.
        let mut p = 1.0f32;
        for _ in 0..100_000 {
            p = walk_step(p, up);
            assert!(p.is_finite() && (1e-6..=1e12).contains(&p), "{p}");
        }
    }
}
