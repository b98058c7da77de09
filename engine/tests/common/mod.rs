//! Helpers shared by the engine's integration tests.
#![allow(dead_code)]

use std::sync::Arc;

use ndarray::{Array2, Array3};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use tradetune_engine::market::Dataset;

/// A dataset with the given T×M prices and F random features per asset.
pub fn dataset_from_prices(prices: Array2<f32>, n_features: usize, seed: u64) -> Arc<Dataset> {
    let (t, m) = prices.dim();
    let mut rng = StdRng::seed_from_u64(seed);
    let features = Array3::from_shape_fn((t, m, n_features), |_| rng.random_range(-2.0f32..2.0));
    Arc::new(
        Dataset::from_arrays(
            (0..m).map(|i| format!("A{i}")).collect(),
            (0..t as i64).map(|i| i * 300).collect(),
            prices,
            features,
            (0..n_features).map(|i| format!("f{i}")).collect(),
        )
        .expect("valid test dataset"),
    )
}

/// Geometric random-walk prices (daily vol ~2 %) starting between 1 and 1,000.
pub fn random_walk_dataset(t: usize, m: usize, n_features: usize, seed: u64) -> Arc<Dataset> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0xD1CE);
    let mut prices = Array2::<f32>::zeros((t, m));
    for a in 0..m {
        let mut p: f32 = 10f32.powf(rng.random_range(0.0f32..3.0));
        for i in 0..t {
            prices[[i, a]] = p;
            p *= (rng.random_range(-0.04f32..0.04)).exp();
        }
    }
    dataset_from_prices(prices, n_features, seed)
}

/// The wgpu device for a test that needs one, or `None` (with a loud SKIP) on a machine where
/// wgpu finds no adapter. CI installs Mesa's software Vulkan and sets
/// `TRADETUNE_REQUIRE_GPU=1`, which turns the skip into a failure.
pub fn wgpu_device(test: &str) -> Option<burn::tensor::Device> {
    tradetune_engine::device::wgpu_for_test(test)
}

/// One run's learning, for [`assert_same_learning`]: each update's statistics and the final
/// weights, and the run's name in a failure's message.
pub struct Learnt<'a> {
    pub name: &'a str,
    pub stats: &'a [tradetune_engine::ppo::UpdateStats],
    pub weights: &'a [f32],
}

/// Asserts that two runs of the same seeds learnt the same to rounding: as many updates, each
/// update's policy loss, value loss and entropy within `tol` of each other relative to the larger
/// (at least `floor`), and the final weights within `tol`.
pub fn assert_same_learning(what: &str, a: &Learnt, b: &Learnt, tol: f32, floor: f32) {
    assert_eq!(a.stats.len(), b.stats.len(), "{what}: updates");
    assert!(!a.stats.is_empty(), "{what}: no update");
    let close = |x: f32, y: f32| (x - y).abs() <= tol * x.abs().max(y.abs()).max(floor);
    for (i, (x, y)) in a.stats.iter().zip(b.stats).enumerate() {
        for (stat, u, v) in [
            ("policy_loss", x.policy_loss, y.policy_loss),
            ("value_loss", x.value_loss, y.value_loss),
            ("entropy", x.entropy, y.entropy),
        ] {
            assert!(
                close(u, v),
                "{what}, update {}: {stat} {u} ({}) vs {v} ({})",
                i + 1,
                a.name,
                b.name
            );
        }
    }
    let worst = a
        .weights
        .iter()
        .zip(b.weights)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0f32, f32::max);
    assert!(worst <= tol, "{what}: weights differ by up to {worst}");
}
