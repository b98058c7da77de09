//! The update's matrix products on a cubecl device, one matmul routine at a time (issue 33,
//! "matmuls near the card's rate": which of cubecl's candidates autotune picks on Vulkan, and
//! what each reaches at the update's own shapes).
//!
//! burn's autotune chooses among cubek's matmul routines per shape: the naive kernel, the
//! "unit" routines (one unit computes a tile of the output, no plane operations), the `gemm`
//! and vector-matrix routines, and the "accelerated" ones built on cooperative matrices
//! (`cmma`, `mma`: tensor cores), which WGSL cannot express, so a WGSL device demotes them to
//! a last resort. [`sweep`] launches each routine (the list burn 0.22.1's autotune tries on a
//! GPU) directly on every product an update of a configuration runs, in the layouts it runs
//! them (the weight gradient xᵀ·∂y reads a transposed view, the input gradient ∂y·Wᵀ
//! another), and measures each one's *rate*: products queued back to back and one device
//! synchronisation after them, so the host round-trip is not in the figure. Beside them
//! stands burn's autotuned matmul, which is what training runs. Each routine's output is
//! checked against the autotuned one's, so a fast wrong answer is not a candidate.
//!
//! [`matmul_features`] says what the device offers the routines: plane (subgroup) sizes and
//! operations, cooperative-matrix configurations, units per cube and shared memory.

use serde::Serialize;

pub use super::products::{MatmulCase, MatmulFeatures};
#[cfg(feature = "wgpu")]
use super::routines;
use crate::ppo::error::PpoError;
use burn::tensor::Device;
use tradetune_device::precision::Precision;

/// What one routine did on one product.
#[derive(Debug, Clone, Serialize)]
pub struct RoutineRate {
    /// cubek's name of the routine (`autotune` for burn's autotuned choice).
    pub name: String,
    /// GFLOP/s with products queued back to back; `None` where the routine did not run.
    pub gflops: Option<f64>,
    /// Milliseconds per product at that rate.
    pub ms: Option<f64>,
    /// Seconds of the first call (compilation, and for `autotune` its benchmarks, included).
    pub first_s: Option<f64>,
    /// The largest difference from the autotuned product, relative to its largest magnitude.
    pub rel_err: Option<f64>,
    /// Why the routine did not run, or why its answer is not one (wrong result).
    pub error: Option<String>,
}

/// Every routine on one product, in one precision.
#[derive(Debug, Clone, Serialize)]
pub struct CaseSweep {
    pub case: MatmulCase,
    pub precision: &'static str,
    /// burn's autotuned matmul: what training runs.
    pub autotune: RoutineRate,
    pub routines: Vec<RoutineRate>,
}

impl RoutineRate {
    /// A routine that ran `case` at `gflops`, its first call taking `first_s`.
    #[cfg_attr(not(feature = "wgpu"), allow(dead_code))]
    fn ran(name: String, case: &MatmulCase, (gflops, first_s): (f64, f64), rel_err: f64) -> Self {
        RoutineRate {
            name,
            gflops: Some(gflops),
            ms: Some(case.flops() / gflops / 1e6),
            first_s: Some(first_s),
            rel_err: Some(rel_err),
            error: None,
        }
    }
}

impl CaseSweep {
    /// The fastest routine that ran and gave the right answer.
    pub fn best(&self) -> Option<&RoutineRate> {
        self.routines
            .iter()
            .filter(|r| r.error.is_none())
            .filter_map(|r| r.gflops.map(|g| (g, r)))
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(_, r)| r)
    }
}

/// The tolerance of a routine's answer against the autotuned one's, relative to the product's
/// largest magnitude: f16 rounds every partial sum.
#[cfg_attr(not(feature = "wgpu"), allow(dead_code))]
fn tolerance(precision: Precision) -> f64 {
    match precision {
        Precision::F32 => 1e-3,
        _ => 2e-2,
    }
}

/// Products queued in a timed batch are doubled until the batch takes this long.
#[cfg_attr(not(feature = "wgpu"), allow(dead_code))]
const BATCH_SECONDS: f64 = 0.02;

/// The rate of `launch` (products queued back to back, one synchronisation after them): the
/// best of three batches of a size that takes about [`BATCH_SECONDS`], after a first call
/// that compiles.
#[cfg_attr(not(feature = "wgpu"), allow(dead_code))]
fn rate(
    case: &MatmulCase,
    mut launch: impl FnMut() -> Result<(), String>,
    sync: &dyn Fn() -> Result<(), String>,
) -> Result<(f64, f64), String> {
    use std::time::Instant;
    let t = Instant::now();
    launch()?;
    sync()?;
    let first_s = t.elapsed().as_secs_f64();
    let mut batch = 1usize;
    let mut best = f64::MAX;
    let mut timed = 0;
    while timed < 3 {
        let t = Instant::now();
        for _ in 0..batch {
            launch()?;
        }
        sync()?;
        let seconds = t.elapsed().as_secs_f64();
        if seconds < BATCH_SECONDS && batch < 1 << 14 {
            batch *= 2;
            continue;
        }
        best = best.min(seconds / batch as f64);
        timed += 1;
    }
    Ok((case.flops() / best.max(1e-12) / 1e9, first_s))
}

/// The names of the routines [`sweep`] measures, in its order.
pub fn routine_names() -> Vec<String> {
    #[cfg(feature = "wgpu")]
    {
        routines::routines().iter().map(|s| s.to_string()).collect()
    }
    #[cfg(not(feature = "wgpu"))]
    {
        Vec::new()
    }
}

#[cfg(not(feature = "wgpu"))]
fn no_wgpu() -> PpoError {
    PpoError::Device(tradetune_device::DeviceError::Unavailable {
        name: "wgpu".into(),
        reason: "this build has no wgpu backend; rebuild with `--features wgpu`".into(),
    })
}

/// What `device` offers the matmul routines.
pub fn matmul_features(device: &Device) -> Result<MatmulFeatures, PpoError> {
    #[cfg(feature = "wgpu")]
    {
        Ok(routines::features(&routines::cube_device(device)?))
    }
    #[cfg(not(feature = "wgpu"))]
    {
        let _ = device;
        Err(no_wgpu())
    }
}

/// The rate of burn's autotuned matmul at each of `cases` on `device` in `precision`
/// (products queued back to back, one synchronisation after them): the probe of what
/// training's products reach, without the host round-trip a single product pays.
pub fn autotuned_rates(
    device: &Device,
    cases: &[MatmulCase],
    precision: Precision,
) -> Result<Vec<(MatmulCase, f64)>, PpoError> {
    #[cfg(feature = "wgpu")]
    {
        let d = routines::cube_device(device)?;
        let dtype = precision.compute_dtype().into();
        let mut out = Vec::new();
        for case in cases {
            let (lhs, rhs) = routines::operands(case, dtype, &d);
            let product = routines::output(&lhs, &rhs, dtype);
            let (gflops, _) = rate(case, || routines::autotuned(&lhs, &rhs, &product), &|| {
                routines::sync(&d)
            })
            .map_err(|e| PpoError::read("the autotuned matmul", e))?;
            out.push((*case, gflops));
        }
        Ok(out)
    }
    #[cfg(not(feature = "wgpu"))]
    {
        let _ = (device, cases, precision);
        Err(no_wgpu())
    }
}

/// Every routine (or those named in `only`; all when it is empty) and burn's autotuned
/// matmul on each of `cases`, on `device` in `precision`. `progress` hears each product as it
/// starts (the sweep compiles every routine for every shape: minutes on a software adapter).
pub fn sweep(
    device: &Device,
    cases: &[MatmulCase],
    precision: Precision,
    only: &[String],
    progress: &mut dyn FnMut(&MatmulCase),
) -> Result<Vec<CaseSweep>, PpoError> {
    #[cfg(feature = "wgpu")]
    {
        let known = routine_names();
        if let Some(unknown) = only.iter().find(|n| !known.contains(n)) {
            return Err(PpoError::UnknownRoutine {
                name: unknown.clone(),
                known: known.join(", "),
            });
        }
        let d = routines::cube_device(device)?;
        let dtype: burn::tensor::DType = precision.compute_dtype().into();
        let sync = || routines::sync(&d);
        let mut sweeps = Vec::new();
        for case in cases {
            progress(case);
            let (lhs, rhs) = routines::operands(case, dtype, &d);
            let reference = routines::output(&lhs, &rhs, dtype);
            let measured = rate(case, || routines::autotuned(&lhs, &rhs, &reference), &sync)
                .map_err(|e| PpoError::read("the autotuned matmul", e))?;
            let autotune = RoutineRate::ran("autotune".into(), case, measured, 0.0);
            let expected = routines::read(reference).map_err(|e| PpoError::read("a matmul", e))?;
            let scale = expected.iter().fold(0f64, |m, v| m.max(v.abs() as f64));
            let mut routines = Vec::new();
            for strategy in routines::routines() {
                let name = strategy.to_string();
                if !only.is_empty() && !only.contains(&name) {
                    continue;
                }
                let out = routines::output(&lhs, &rhs, dtype);
                let measured = rate(
                    case,
                    || routines::routine(&strategy, &lhs, &rhs, &out),
                    &sync,
                );
                let r = match measured {
                    Ok(measured) => {
                        let got = routines::read(out).map_err(|e| PpoError::read("a matmul", e))?;
                        let err = got
                            .iter()
                            .zip(&expected)
                            .fold(0f64, |m, (a, b)| m.max((a - b).abs() as f64))
                            / scale.max(1e-30);
                        let mut r = RoutineRate::ran(name, case, measured, err);
                        if err.is_nan() || err > tolerance(precision) {
                            r.error = Some(format!(
                                "wrong result: off by {err:.2e} of the product's largest value"
                            ));
                        }
                        r
                    }
                    Err(e) => RoutineRate {
                        name,
                        gflops: None,
                        ms: None,
                        first_s: None,
                        rel_err: None,
                        error: Some(e),
                    },
                };
                routines.push(r);
            }
            sweeps.push(CaseSweep {
                case: *case,
                precision: precision.name(),
                autotune,
                routines,
            });
        }
        Ok(sweeps)
    }
    #[cfg(not(feature = "wgpu"))]
    {
        let _ = (device, cases, precision, only, progress);
        Err(no_wgpu())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_routine_runs_or_says_why_and_the_ones_that_run_agree_with_autotune() {
        let Some(device) = tradetune_device::wgpu_for_test("matmul sweep") else {
            return;
        };
        let case = |m, k, n, lhs_transposed, rhs_transposed| MatmulCase {
            m,
            k,
            n,
            lhs_transposed,
            rhs_transposed,
            role: "test",
            per_minibatch: 1,
        };
        let cases = [
            case(32, 24, 16, false, false),
            case(24, 32, 16, true, false),
        ];
        let only: Vec<String> = routine_names()
            .into_iter()
            .filter(|n| n == "matmul_naive" || n.contains("simple_unit") || n.contains("cmma"))
            .take(3)
            .collect();
        assert_eq!(only.len(), 3, "{:?}", routine_names());
        let mut heard = 0;
        let sweeps = sweep(&device, &cases, Precision::F32, &only, &mut |_| heard += 1).unwrap();
        assert_eq!(heard, 2);
        assert_eq!(sweeps.len(), 2);
        for s in &sweeps {
            assert!(s.autotune.gflops.is_some_and(|g| g > 0.0));
            assert_eq!(s.routines.len(), 3);
            let naive = s
                .routines
                .iter()
                .find(|r| r.name == "matmul_naive")
                .unwrap();
            assert!(naive.error.is_none(), "{naive:?}");
            assert!(naive.rel_err.is_some_and(|e| e < 1e-4), "{naive:?}");
            for r in &s.routines {
                // A routine either ran, with a rate and an error within tolerance, or says why not.
                assert_eq!(r.gflops.is_some(), r.first_s.is_some(), "{r:?}");
                assert!(r.gflops.is_some() || r.error.as_ref().is_some_and(|e| !e.is_empty()));
            }
            assert!(s.best().is_some());
        }
        // The naive routine reads its operands contiguous: a transposed one is copied first,
        // and the launch counters tell that copy from the product (issue 33's launch caps).
        if tradetune_device::kernels::counting_dispatches() {
            let before = tradetune_device::kernels::counts();
            let naive = ["matmul_naive".to_owned()];
            sweep(&device, &cases[1..], Precision::F32, &naive, &mut |_| ()).unwrap();
            let d = tradetune_device::kernels::counts().since(&before);
            assert!(d.layout_copies >= 1, "{d:?}");
            assert!(d.layout_copies < d.dispatches, "{d:?}");
        }
        let f = matmul_features(&device).unwrap();
        assert!(f.runtime.starts_with("wgpu"), "{f:?}");
        assert!(f.max_units_per_cube >= 64);
        let unknown = sweep(
            &device,
            &cases,
            Precision::F32,
            &["nope".into()],
            &mut |_| (),
        );
        assert!(unknown.unwrap_err().to_string().contains("nope"));
        assert!(matmul_features(&Device::flex()).is_err());
    }
}
