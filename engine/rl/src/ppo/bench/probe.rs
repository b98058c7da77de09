//! The matmul probe: the device's measured f32 matmul rate, the peak an update's achieved
//! GFLOP/s is held against ([`matmul_probe`]), and the rate of a configuration's own update
//! products in their layouts ([`matmul_probe_products`]).

use burn::tensor::Device;
use serde::Serialize;

use super::matmul;
use crate::ppo::error::PpoError;
use tradetune_device::precision::Precision;

/// What the matmul probe measured: GFLOP/s of square f32 matmuls on the device.
#[derive(Debug, Clone, Serialize)]
pub struct MatmulProbe {
    /// `(n, GFLOP/s)` of an `n × n` by `n × n` product, best of its repetitions.
    pub sizes: Vec<(usize, f64)>,
    /// On the CPU device, `(n, GFLOP/s)` of the host update's matmul kernels
    /// ([`crate::ppo::host_update`]): one `n × n` product on each thread of the pool at once,
    /// as its two networks run. Empty on other devices.
    pub host_sizes: Vec<(usize, f64)>,
    /// The best of `sizes` and `host_sizes`: the machine's measured matmul peak.
    pub peak_gflops: f64,
    /// Seconds the probe took.
    pub seconds: f64,
}

/// The best time of `once` after a warm-up call: at least two timed calls, and more until about
/// 0.1 s has passed.
fn best_seconds(mut once: impl FnMut() -> Result<f64, PpoError>) -> Result<f64, PpoError> {
    use std::time::{Duration, Instant};
    once()?;
    let mut best = f64::MAX;
    let until = Instant::now() + Duration::from_millis(100);
    let mut reps = 0;
    while reps < 2 || Instant::now() < until {
        best = best.min(once()?);
        reps += 1;
    }
    Ok(best.max(1e-12))
}

/// GFLOP/s of f32 matmuls of `cases` on `device`, each in its layout: on a cubecl device, burn's
/// autotuned matmul queued back to back ([`matmul::autotuned_rates`]: no host round-trip per
/// product, which held an H100's 256² to 90 GFLOP/s); on the CPU, each product read back before
/// the next starts (best of about 0.1 s each), where a read costs nothing.
pub fn matmul_probe_products(
    device: &Device,
    cases: &[matmul::MatmulCase],
) -> Result<Vec<f64>, PpoError> {
    use burn::tensor::{Tensor, TensorData};
    use std::time::Instant;
    if cfg!(feature = "wgpu") && tradetune_device::reads_are_transfers(device) {
        let rates = matmul::autotuned_rates(device, cases, Precision::F32)?;
        return Ok(rates.into_iter().map(|(_, gflops)| gflops).collect());
    }
    let mut out = Vec::new();
    for c in cases {
        // A `[rows, cols]` side, or the transpose of a row-major `[cols, rows]` one.
        let side = |rows: usize, cols: usize, transposed: bool| {
            let fill = (0..rows * cols)
                .map(|i| ((i % 97) as f32 - 48.0) / 97.0)
                .collect();
            match transposed {
                true => {
                    Tensor::<2>::from_data(TensorData::new(fill, [cols, rows]), device).transpose()
                }
                false => Tensor::<2>::from_data(TensorData::new(fill, [rows, cols]), device),
            }
        };
        let a = side(c.m, c.k, c.lhs_transposed);
        let b = side(c.k, c.n, c.rhs_transposed);
        let once = || -> Result<f64, PpoError> {
            let t = Instant::now();
            let product = a.clone().matmul(b.clone());
            // Reading one element back waits for the product.
            let _: Vec<f32> = product
                .slice([0..1, 0..1])
                .try_into_vec_as()
                .map_err(|e| PpoError::read("matmul probe", e))?;
            Ok(t.elapsed().as_secs_f64())
        };
        out.push(c.flops() / best_seconds(once)? / 1e9);
    }
    Ok(out)
}

/// The probe's square sizes unless told otherwise (the default of `bench gpu`'s and `bench
/// train`'s `--probe-sizes`).
pub const PROBE_SIZES: [usize; 3] = [256, 512, 1024];

/// Times f32 matmuls of the square sizes `square` ([`PROBE_SIZES`] by default) on `device`
/// ([`matmul_probe_products`]) and reports the best rate: the peak the update's achieved
/// GFLOP/s is held against.
pub fn matmul_probe(device: &Device, square: &[usize]) -> Result<MatmulProbe, PpoError> {
    use std::time::Instant;
    let start = Instant::now();
    let cases: Vec<_> = square
        .iter()
        .map(|&n| matmul::MatmulCase::plain(n, n, n))
        .collect();
    let sizes: Vec<(usize, f64)> = square
        .iter()
        .copied()
        .zip(matmul_probe_products(device, &cases)?)
        .collect();
    let mut host_sizes = Vec::new();
    if tradetune_device::is_cpu(device) {
        for &n in square {
            let a: Vec<f32> = (0..n * n)
                .map(|i| ((i % 97) as f32 - 48.0) / 97.0)
                .collect();
            let threads = rayon::current_num_threads().min(2);
            let mut outs = vec![vec![0.0f32; n * n]; 2];
            let once = || {
                let t = Instant::now();
                let [c1, c2] = &mut outs[..] else {
                    unreachable!("two outputs")
                };
                let product = |c: &mut Vec<f32>| {
                    crate::ppo::host_update::affine(&a, &a[..n], (n, n), &a, n, c)
                };
                if threads > 1 {
                    rayon::join(|| product(c1), || product(c2));
                } else {
                    product(c1);
                }
                Ok(t.elapsed().as_secs_f64())
            };
            let flops = threads as f64 * 2.0 * (n * n * n) as f64;
            host_sizes.push((n, flops / best_seconds(once)? / 1e9));
        }
    }
    let peak_gflops = sizes
        .iter()
        .chain(&host_sizes)
        .map(|s| s.1)
        .fold(0.0, f64::max);
    Ok(MatmulProbe {
        sizes,
        host_sizes,
        peak_gflops,
        seconds: start.elapsed().as_secs_f64(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_matmul_probe_measures_a_positive_rate() {
        let p = matmul_probe(&Device::flex(), &PROBE_SIZES).unwrap();
        assert_eq!(p.sizes.len(), 3);
        // The CPU device also times the host update's kernels; the peak is the best of all.
        assert_eq!(p.host_sizes.len(), 3);
        let all = || p.sizes.iter().chain(&p.host_sizes);
        assert!(all().all(|s| s.1.is_finite() && s.1 > 0.0));
        assert_eq!(p.peak_gflops, all().map(|s| s.1).fold(0.0, f64::max));
    }
}
