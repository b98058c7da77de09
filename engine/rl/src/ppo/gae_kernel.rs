//! Generalised advantage estimation in one CubeCL launch on cubecl devices (a GPU, or
//! lavapipe), with the count of non-finite advantages the trainer checks and the spread its
//! explained variance needs (issue 33: fewer kernels per update, and fewer kinds of kernel to
//! compile before the first one).
//!
//! [`super::gae::compute_gae_device`]'s blocked tensor program (a cumulative sum, the blocks'
//! weightings, a carry loop over blocks of 32 steps) and the trainer's `is_finite` check of its
//! result (eight launches: burn fuses none of its predicates) made the advantage stage 44
//! launches an update for a 128-step rollout and 117 for 2,048 steps (19 with this kernel,
//! traced on lavapipe), with about ten kinds of kernel that nothing else in a run uses, each
//! compiled by every process on a GPU. Here one unit per env walks its rollout backwards, as [`super::gae::compute_gae`]
//! does on the host, term for term: the recurrence is serial in time and the envs are the
//! parallelism (consecutive units read consecutive addresses of the `[T, N]` tensors). The
//! tensor program still runs where no kernel does: flex, and builds without `wgpu`.
//!
//! Each unit also keeps its env's running mean and squared deviations of the returns and the
//! advantages (Welford, in f32, written in f32), so the trainer pools the rollout's two
//! variances on the host from `5 × N` values read with the update's statistics: on the device
//! they were a count, and two means and a centred square a variance, 8 of the 12 launches of the
//! tiny configuration's advantage stage (its bootstrap value's forward pass and this kernel the
//! other 4; lavapipe, 2026-11-30).
//!
//! No buffer is written in place: the launch writes new tensors. burn reaches the kernel
//! through its backend extension API, as the update's kernels do (`update/kernels.rs`).
#![allow(clippy::too_many_arguments)]

use burn::backend::cubecl::dtype_to_storage_type;
use burn::backend::fusion::custom::TensorSpec;
use burn::backend::tensor::FloatTensor;
use burn::backend::{Backend, Dispatch, ExtensionType, backend_extension};
use burn::tensor::{DType, Tensor};
use burn_cubecl::CubeBackend;
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::ops::numeric::empty_device_dtype;
use cubecl::{CubeDim, calculate_cube_count_elemwise};

use super::gae::SPREAD;

/// What [`gae`] writes.
#[derive(ExtensionType)]
#[extension_type(fusion)]
pub struct GaeOutput<B: Backend> {
    /// `[T, N]` the advantages.
    pub advantages: FloatTensor<B>,
    /// `[T, N]` the returns (advantage + value).
    pub returns: FloatTensor<B>,
    /// `[N, SPREAD]` f32, each env's group of a [`super::gae::Spread`]: how many of its
    /// advantages are not finite, and the mean and population variance of its returns and of
    /// its advantages.
    pub spread: FloatTensor<B>,
}

// The kernel writes the five values of a spread's group.
const _: () = assert!(SPREAD == 5);

fn gae_meta(
    rewards: &TensorSpec,
    _values: &TensorSpec,
    _dones: &TensorSpec,
    last_values: &TensorSpec,
    _gamma: &f32,
    _gae_lambda: &f32,
) -> GaeOutputMetadata {
    GaeOutputMetadata {
        advantages: rewards.clone(),
        returns: rewards.clone(),
        spread: TensorSpec::new(vec![last_values.shape[0], SPREAD].into(), DType::F32),
    }
}

/// GAE as a backend operation.
#[backend_extension(Cube, Fusion)]
pub trait GaeOps: Backend {
    /// The advantages and returns of the rollout `rewards`, `values` and `dones` (`[T, N]`,
    /// time outermost, one dtype) bootstrapped from `last_values` `[N]` (any float dtype),
    /// and each env's count of non-finite advantages and its returns' and advantages' spread.
    #[fusion(meta = gae_meta)]
    fn gae(
        rewards: &FloatTensor<Self>,
        values: &FloatTensor<Self>,
        dones: &FloatTensor<Self>,
        last_values: &FloatTensor<Self>,
        gamma: f32,
        gae_lambda: f32,
    ) -> GaeOutput<Self>;
}

impl GaeOps for CubeBackend {
    fn gae(
        rewards: &FloatTensor<Self>,
        values: &FloatTensor<Self>,
        dones: &FloatTensor<Self>,
        last_values: &FloatTensor<Self>,
        gamma: f32,
        gae_lambda: f32,
    ) -> GaeOutput<Self> {
        let (fdt, ldt) = (rewards.dtype, last_values.dtype);
        let (client, device) = (rewards.client.clone(), rewards.device.clone());
        let shape = rewards.meta.shape().to_vec();
        let n = last_values.meta.shape().num_elements();
        let empty = |shape: Vec<usize>, dtype| {
            empty_device_dtype(client.clone(), device.clone(), shape.into(), dtype)
        };
        let out: GaeOutput<Self> = GaeOutput {
            advantages: empty(shape.clone(), fdt),
            returns: empty(shape, fdt),
            spread: empty(vec![n, SPREAD], DType::F32),
        };
        let cube_dim = CubeDim::new(&client, n);
        let cube_count = calculate_cube_count_elemwise(&client, n, cube_dim);
        code::gae_kernel::launch(
            &client,
            cube_count,
            cube_dim,
            into_contiguous(rewards.clone()).into_tensor_arg(),
            into_contiguous(values.clone()).into_tensor_arg(),
            into_contiguous(dones.clone()).into_tensor_arg(),
            into_contiguous(last_values.clone()).into_tensor_arg(),
            out.advantages.clone().into_tensor_arg(),
            out.returns.clone().into_tensor_arg(),
            out.spread.clone().into_tensor_arg(),
            gamma,
            gae_lambda,
            [dtype_to_storage_type(fdt), dtype_to_storage_type(ldt)],
        );
        out
    }
}

/// Advantages and returns `[T, N]` of `rewards`, `values` and `dones` (`[T, N]`) bootstrapped
/// from `last_values` `[N]`, and `[N, SPREAD]` each env's count of non-finite advantages and
/// its returns' and advantages' mean and population variance (`Spread::of` pools them), in
/// one launch (see the module docs). Only where [`tradetune_device::runs_cubecl_kernels`].
pub fn gae(
    rewards: Tensor<2>,
    values: Tensor<2>,
    dones: Tensor<2>,
    last_values: Tensor<1>,
    gamma: f32,
    gae_lambda: f32,
) -> (Tensor<2>, Tensor<2>, Tensor<2>) {
    // The kernel takes N from the bootstrap values and T from the rollout's length.
    let [_, n] = rewards.dims();
    assert_eq!(last_values.dims(), [n], "one bootstrap value per env");
    assert!(values.dims() == rewards.dims() && dones.dims() == rewards.dims());
    let out = <Dispatch as GaeOps>::gae(
        &rewards.into_dispatch(),
        &values.into_dispatch(),
        &dones.into_dispatch(),
        &last_values.into_dispatch(),
        gamma,
        gae_lambda,
    );
    (
        Tensor::from_dispatch(out.advantages),
        Tensor::from_dispatch(out.returns),
        Tensor::from_dispatch(out.spread),
    )
}

mod code {
    use cubecl::prelude::*;

    /// One unit per env: `δ_t = r_t + γ·V_{t+1}·(1 − done_t) − V_t`,
    /// `A_t = δ_t + γλ·(1 − done_t)·A_{t+1}`, from the last step backwards (`V_T` the
    /// bootstrap value, `A_T = 0`), as `compute_gae` on the host; and the env's spread
    /// (Welford's running mean and squared deviations, in f32 whatever `F` is).
    #[cube(launch)]
    pub(super) fn gae_kernel<F: Float, L: Float>(
        rewards: &Tensor<F>,
        values: &Tensor<F>,
        dones: &Tensor<F>,
        last_values: &Tensor<L>,
        advantages: &mut Tensor<F>,
        returns: &mut Tensor<F>,
        spread: &mut Tensor<f32>,
        gamma: f32,
        gae_lambda: f32,
        #[define(F, L)] _dtypes: [ElemType; 2],
    ) {
        let n = last_values.len();
        let i = ABSOLUTE_POS;
        if i >= n {
            terminate!();
        }
        let steps = rewards.len() / n;
        let g = F::cast_from(gamma);
        let gl = F::cast_from(gamma * gae_lambda);
        let one = F::cast_from(1.0f32);
        let mut next_value = F::cast_from(last_values[i]);
        let mut next_adv = F::cast_from(0.0f32);
        let mut count = 0.0f32;
        // Welford: returns, then advantages.
        let mut seen = 0.0f32;
        let mut mean_r = 0.0f32;
        let mut dev_r = 0.0f32;
        let mut mean_a = 0.0f32;
        let mut dev_a = 0.0f32;
        for s in 0..steps {
            let k = (steps - 1 - s) * n + i;
            let not_done = one - dones[k];
            let value = values[k];
            let delta = rewards[k] + g * next_value * not_done - value;
            let a = delta + gl * not_done * next_adv;
            advantages[k] = a;
            let ret = a + value;
            returns[k] = ret;
            seen += 1.0;
            let x = f32::cast_from(ret);
            let d = x - mean_r;
            mean_r += d / seen;
            dev_r += d * (x - mean_r);
            let x = f32::cast_from(a);
            let d = x - mean_a;
            mean_a += d / seen;
            dev_a += d * (x - mean_a);
            // As the tally kernel tests finiteness (not x − x == 0, which a shader compiler
            // that assumes finite numbers folds to true).
            if x.is_nan() || x.is_inf() {
                count += 1.0;
            }
            next_adv = a;
            next_value = value;
        }
        let at = i * 5;
        spread[at] = count;
        spread[at + 1] = mean_r;
        spread[at + 2] = dev_r / seen;
        spread[at + 3] = mean_a;
        spread[at + 4] = dev_a / seen;
    }
}

#[cfg(test)]
mod tests {
    use burn::tensor::TensorData;
    use rand::{RngExt, SeedableRng};

    use super::*;
    use crate::ppo::gae::compute_gae;

    /// On wgpu (lavapipe in CI): the kernel agrees with the host reference on random rollouts
    /// with episode ends anywhere (one step, a few, more than a block of the tensor program,
    /// one env and several), with an f32 or f16 bootstrap value, counts each env's non-finite
    /// advantages, and gives each env's returns' and advantages' mean and variance.
    #[test]
    fn the_kernel_matches_the_host_reference_and_counts_what_is_not_finite() {
        let test = "the_kernel_matches_the_host_reference_and_counts_what_is_not_finite";
        let Some(device) = tradetune_device::wgpu_for_test(test) else {
            return;
        };
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        for (steps, n_envs, f16) in [(1, 3, false), (5, 2, true), (77, 3, false), (300, 1, true)] {
            let len = steps * n_envs;
            let mut draw = |lo: f32, hi: f32, n: usize| -> Vec<f32> {
                (0..n).map(|_| rng.random_range(lo..hi)).collect()
            };
            let r = draw(-1.0, 1.0, len);
            let v = draw(-2.0, 2.0, len);
            let d: Vec<f32> = draw(0.0, 1.0, len)
                .into_iter()
                .map(|u| if u < 0.1 { 1.0 } else { 0.0 })
                .collect();
            let mut last = draw(-2.0, 2.0, n_envs);
            let t2 = |x: &[f32]| {
                Tensor::<2>::from_data(TensorData::new(x.to_vec(), [steps, n_envs]), &device)
            };
            let mut last_t =
                Tensor::<1>::from_data(TensorData::new(last.clone(), [n_envs]), &device);
            if f16 {
                last_t = last_t.cast(DType::F16);
                last = last_t.clone().cast(DType::F32).try_into_vec_as().unwrap();
            }
            let (adv, ret) = compute_gae(&r, &v, &d, &last, 0.99, 0.95);
            let (da, dr, spread) = gae(t2(&r), t2(&v), t2(&d), last_t, 0.99, 0.95);
            let da: Vec<f32> = da.try_into_vec_as().unwrap();
            let dr: Vec<f32> = dr.try_into_vec_as().unwrap();
            let spread: Vec<f32> = spread.try_into_vec_as().unwrap();
            assert_eq!(spread.len(), n_envs * SPREAD);
            // Each env's returns' and advantages' mean and population variance.
            for (i, group) in spread.chunks_exact(SPREAD).enumerate() {
                let mean_var = |x: &[f32]| {
                    let col: Vec<f64> = (0..steps).map(|s| x[s * n_envs + i] as f64).collect();
                    let m = col.iter().sum::<f64>() / steps as f64;
                    let v = col.iter().map(|a| (a - m).powi(2)).sum::<f64>() / steps as f64;
                    [m, v]
                };
                let [mr, vr] = mean_var(&ret);
                let [ma, va] = mean_var(&adv);
                for (got, want) in group[1..].iter().zip([mr, vr, ma, va]) {
                    assert!(
                        (*got as f64 - want).abs() <= 1e-4 * want.abs().max(1.0),
                        "T={steps} N={n_envs} env {i}: {group:?} vs {:?}",
                        [mr, vr, ma, va]
                    );
                }
            }
            let bad: Vec<f32> = spread.chunks_exact(SPREAD).map(|g| g[0]).collect();
            for i in 0..len {
                let close = |a: f32, b: f32| (a - b).abs() <= 1e-5 * b.abs().max(1.0);
                assert!(
                    close(da[i], adv[i]) && close(dr[i], ret[i]),
                    "T={steps} N={n_envs} sample {i}: {} {} vs {} {}",
                    da[i],
                    dr[i],
                    adv[i],
                    ret[i]
                );
            }
            assert_eq!(bad, vec![0.0; n_envs]);
        }

        // A non-finite reward spoils its env's advantages from its step back to the start
        // (and no other env's); an infinite value too.
        let (steps, n_envs) = (6, 3);
        let mut r = vec![0.5f32; steps * n_envs];
        let mut v = vec![0.1f32; steps * n_envs];
        r[3 * n_envs + 1] = f32::NAN;
        v[4 * n_envs + 2] = f32::INFINITY;
        let t2 = |x: &[f32]| {
            Tensor::<2>::from_data(TensorData::new(x.to_vec(), [steps, n_envs]), &device)
        };
        let (adv, _) = compute_gae(&r, &v, &vec![0.0; steps * n_envs], &[0.0; 3], 0.99, 0.95);
        let (_, _, spread) = gae(
            t2(&r),
            t2(&v),
            t2(&vec![0.0; steps * n_envs]),
            Tensor::zeros([n_envs], &device),
            0.99,
            0.95,
        );
        let spread: Vec<f32> = spread.try_into_vec_as().unwrap();
        let bad: Vec<f32> = spread.chunks_exact(SPREAD).map(|g| g[0]).collect();
        let want: Vec<f32> = (0..n_envs)
            .map(|i| {
                (0..steps)
                    .filter(|t| !adv[t * n_envs + i].is_finite())
                    .count() as f32
            })
            .collect();
        assert_eq!(want, vec![0.0, 4.0, 5.0]);
        assert_eq!(bad, want);
    }
}
