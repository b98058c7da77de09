//! Activations of the hidden layers, and a fast tanh for the CPU device.
//!
//! **Why tanh is computed here and not by `Tensor::tanh`.** burn-flex 0.22.1 evaluates `tanh`
//! element by element through libm's `tanhf` (≈ 11 ns an element here, against ≈ 0.1 ns for a
//! vectorised multiply), and burn-autodiff's backward pass computes `tanh` of the input a
//! second time to get `1 − tanh²`. Profiling `tradetune bench train` (perf, release deps) put
//! 55 % of the small configuration's time and 17 % of the large one's in `tanhf`/`expm1f`.
//!
//! [`fast_tanh`] evaluates the [13/6] rational minimax approximation of tanh on [−c, c] that
//! Eigen uses for `float` (coefficients from Eigen's `generic_fast_tanh_float`; max error
//! ≈ 1.2e-7 against libm, one ulp), with only multiplies, adds, one divide and a clamp — all
//! vectorised by burn-flex — and attaches the exact derivative `1 − y²` from the value it
//! computed, so the backward pass does no transcendental work either (see [`fast_tanh`]). On a
//! GPU the value is the device's own tanh instead, which is one operation where the
//! approximation is two dozen (`tanh_f32`).

use burn::tensor::{FloatDType, Tensor, activation};
use serde::{Deserialize, Serialize};

/// Activation between hidden layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum ActivationKind {
    /// tanh (SB3's default for PPO).
    #[default]
    Tanh,
    /// max(0, x).
    Relu,
    /// Exponential linear unit, α = 1.
    Elu,
    /// x·σ(x).
    Silu,
}

impl ActivationKind {
    /// Applies the activation element-wise.
    pub fn apply(self, x: Tensor<2>) -> Tensor<2> {
        match self {
            ActivationKind::Tanh => fast_tanh(x),
            ActivationKind::Relu => activation::relu(x),
            ActivationKind::Elu => activation::elu(x, 1.0),
            ActivationKind::Silu => activation::silu(x),
        }
    }
}

impl ActivationKind {
    /// The activation of one number, as [`Self::apply`] computes it in f32 on the CPU device
    /// (tanh through the same rational approximation, [`fast_tanh`]; a GPU's own tanh may differ
    /// from it in the last bits); for the host-side forward pass of [`crate::ppo::host_policy`].
    pub fn apply_scalar(self, x: f32) -> f32 {
        match self {
            ActivationKind::Tanh => rational_tanh_scalar(x),
            ActivationKind::Relu => x.max(0.0),
            ActivationKind::Elu => {
                if x > 0.0 {
                    x
                } else {
                    x.exp() - 1.0
                }
            }
            ActivationKind::Silu => x / (1.0 + (-x).exp()),
        }
    }

    /// Whether [`Self::derivative_scalar`] reads its input `x` (SiLU); the others' derivatives
    /// come from the output `y` alone, so the host backward pass keeps no pre-activations for
    /// them.
    pub fn derivative_needs_input(self) -> bool {
        self == ActivationKind::Silu
    }

    /// The derivative at `x`, whose activation is `y` (the gradient burn's autodiff computes
    /// through [`Self::apply`]: tanh's `1 − y²` from the value, as [`fast_tanh`]; relu's and
    /// elu's from the value too: `y > 0` exactly where `x > 0`, and elu's `eˣ` is `y + 1`); for
    /// the host-side backward pass of [`crate::ppo::host_update`].
    pub fn derivative_scalar(self, x: f32, y: f32) -> f32 {
        match self {
            ActivationKind::Tanh => 1.0 - y * y,
            ActivationKind::Relu => {
                if y > 0.0 {
                    1.0
                } else {
                    0.0
                }
            }
            ActivationKind::Elu => {
                if y > 0.0 {
                    1.0
                } else {
                    y + 1.0
                }
            }
            ActivationKind::Silu => {
                let s = 1.0 / (1.0 + (-x).exp());
                s * (1.0 + x * (1.0 - s))
            }
        }
    }
}

impl ActivationKind {
    /// `out = apply_scalar(x)` element-wise, compiled for AVX2 where the CPU has it (the same
    /// operations, eight numbers at a time: the results are identical).
    pub fn apply_slice(self, x: &[f32], out: &mut Vec<f32>) {
        out.clear();
        out.resize(x.len(), 0.0);
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked just above).
            unsafe { apply_avx2(self, x, out) };
            return;
        }
        apply_each(self, x, out);
    }

    /// `d *= derivative_scalar(x, y)` element-wise, compiled for AVX2 where the CPU has it.
    pub fn scale_by_derivative(self, x: &[f32], y: &[f32], d: &mut [f32]) {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked just above).
            unsafe { derivative_avx2(self, x, y, d) };
            return;
        }
        derivative_each(self, x, y, d);
    }
}

#[inline(always)]
fn apply_each(kind: ActivationKind, x: &[f32], out: &mut [f32]) {
    // One loop per kind, so each vectorises on its own.
    match kind {
        ActivationKind::Tanh => {
            for (o, &v) in out.iter_mut().zip(x) {
                *o = rational_tanh_scalar(v);
            }
        }
        _ => {
            for (o, &v) in out.iter_mut().zip(x) {
                *o = kind.apply_scalar(v);
            }
        }
    }
}

#[inline(always)]
fn derivative_each(kind: ActivationKind, x: &[f32], y: &[f32], d: &mut [f32]) {
    match kind {
        ActivationKind::Tanh => {
            for (d, &y) in d.iter_mut().zip(y) {
                *d *= 1.0 - y * y;
            }
        }
        _ => {
            for ((d, &x), &y) in d.iter_mut().zip(x).zip(y) {
                *d *= kind.derivative_scalar(x, y);
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn apply_avx2(kind: ActivationKind, x: &[f32], out: &mut [f32]) {
    apply_each(kind, x, out);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn derivative_avx2(kind: ActivationKind, x: &[f32], y: &[f32], d: &mut [f32]) {
    derivative_each(kind, x, y, d);
}

/// [`rational_tanh`] of one number, operation for operation.
fn rational_tanh_scalar(x: f32) -> f32 {
    let x = x.clamp(-CLAMP, CLAMP);
    let x2 = x * x;
    let mut p = x2 * ALPHA[6] + ALPHA[5];
    for &a in ALPHA[..5].iter().rev() {
        p = p * x2 + a;
    }
    let mut q = x2 * BETA[3] + BETA[2];
    for &b in BETA[..2].iter().rev() {
        q = q * x2 + b;
    }
    p * x / q
}

/// Beyond ±C the approximation is clamped; tanh(C) rounds to 1 − 6e-8 in f32 (Eigen's bound).
const CLAMP: f32 = 7.905_311;
/// Odd numerator coefficients α₁ … α₁₃ (Eigen, `generic_fast_tanh_float`).
const ALPHA: [f32; 7] = [
    4.893_524_6e-3,
    6.372_619_3e-4,
    1.485_722_4e-5,
    5.122_297e-8,
    -8.604_672e-11,
    2.000_188e-13,
    -2.760_768_5e-16,
];
/// Even denominator coefficients β₀ … β₆.
const BETA: [f32; 4] = [4.893_525e-3, 2.268_434_6e-3, 1.185_347_1e-4, 1.198_258_4e-6];

/// tanh of a tensor without autodiff, in f32: `x·P(x²) / Q(x²)` on the clamped input.
fn rational_tanh(x: Tensor<2>) -> Tensor<2> {
    // clamp_min/clamp_max are vectorised in burn-flex; `clamp` is not (≈ 8× slower).
    let x = x.clamp_min(-CLAMP).clamp_max(CLAMP);
    let x2 = x.clone().mul(x.clone());
    // Horner in x², highest coefficient first.
    let mut p = x2.clone().mul_scalar(ALPHA[6]).add_scalar(ALPHA[5]);
    for &a in ALPHA[..5].iter().rev() {
        p = p.mul(x2.clone()).add_scalar(a);
    }
    let mut q = x2.clone().mul_scalar(BETA[3]).add_scalar(BETA[2]);
    for &b in BETA[..2].iter().rev() {
        q = q.mul(x2.clone()).add_scalar(b);
    }
    p.mul(x).div(q)
}

/// tanh of a tensor without autodiff, in f32: the rational approximation on the CPU device, the
/// device's own `tanh` of the same clamped input on a GPU.
///
/// On a GPU the rational approximation is about 24 element-wise operations, which burn's
/// fusion joins into one kernel in the rollout's forward pass but not always in the update's:
/// with three hidden layers (the GPU presets' depth) the device engine's minibatch launched
/// 117.5 kernels in f32 and 123.5 in f16, most of them one multiply or add each, against 48.5
/// and 54.5 with the device's tanh (`bench gpu --configs tiny` with nets [16, 16, 16],
/// lavapipe, 2026-11-28; the rollout's policy step is 11.2 either way). A GPU's tanh is one
/// instruction or a few; the clamp (one operation: `clamp_min` and `clamp_max` are two each)
/// keeps it off the large inputs where a driver computing it from exponentials would overflow,
/// and saturates as the CPU's approximation does.
fn tanh_f32(x: Tensor<2>) -> Tensor<2> {
    if tradetune_device::is_cpu(&x.device()) {
        rational_tanh(x)
    } else {
        activation::tanh(x.clamp(-CLAMP, CLAMP))
    }
}

/// tanh, fast on the CPU device, with the exact gradient `1 − tanh²`.
///
/// The value `y` is computed off the autodiff graph (in f32 whatever the compute dtype, so the
/// polynomial neither overflows f16 nor loses bf16's few mantissa bits). On an autodiff tensor
/// the result is `(x − x̄)·g + y` with `x̄ = x` and `g = 1 − y²` held as constants: its value is
/// exactly `y` (`x − x̄` is exactly 0 for finite x) and its derivative with respect to `x` is
/// `g`, the derivative of tanh at `x`. Three tracked element-wise ops replace burn's tanh node,
/// whose backward pass would evaluate libm's tanh once more.
pub fn fast_tanh(x: Tensor<2>) -> Tensor<2> {
    let dtype: FloatDType = x.dtype().into();
    let constant = x.clone().without_autodiff();
    let y = tanh_f32(constant.clone().cast(FloatDType::F32));
    if !x.is_autodiff() {
        return y.cast(dtype);
    }
    let g = y.clone().mul(y.clone()).neg().add_scalar(1.0).cast(dtype);
    x.sub(constant).mul(g).add(y.cast(dtype))
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::{Device, TensorData};

    fn grid(device: &Device) -> (Vec<f32>, Tensor<2>) {
        // −12 … 12, dense near 0 where relative error matters, plus exact 0 and the clamp.
        let mut xs: Vec<f32> = (-1200..=1200).map(|i| i as f32 / 100.0).collect();
        xs.extend([1e-6, -1e-6, 3e-4, CLAMP, -CLAMP, 20.0, -40.0]);
        let n = xs.len();
        let t = Tensor::from_data(TensorData::new(xs.clone(), [1, n]), device);
        (xs, t)
    }

    #[test]
    fn matches_libm_tanh_to_a_few_ulp() {
        let d = Device::flex();
        let (xs, t) = grid(&d);
        let ys: Vec<f32> = fast_tanh(t).try_into_vec_as().unwrap();
        for (x, y) in xs.iter().zip(&ys) {
            let want = x.tanh();
            let tol = 2.5e-7f32.max(4e-7 * want.abs());
            assert!((y - want).abs() <= tol, "tanh({x}) = {y}, libm {want}");
            assert!(y.abs() <= 1.0, "tanh({x}) = {y} outside [-1, 1]");
        }
    }

    #[test]
    fn the_scalar_activations_are_the_tensor_ones() {
        let d = Device::flex();
        let (xs, t) = grid(&d);
        for kind in [
            ActivationKind::Tanh,
            ActivationKind::Relu,
            ActivationKind::Elu,
            ActivationKind::Silu,
        ] {
            let ys: Vec<f32> = kind.apply(t.clone()).try_into_vec_as().unwrap();
            for (x, y) in xs.iter().zip(&ys) {
                let s = kind.apply_scalar(*x);
                assert!(
                    (s - y).abs() <= 2e-7 * (1.0 + y.abs()),
                    "{kind:?}({x}): scalar {s}, tensor {y}"
                );
            }
        }
    }

    /// The vectorised slices give the scalar functions' results, bit for bit.
    #[test]
    fn the_slice_activations_are_the_scalar_ones() {
        let (xs, _) = grid(&Device::flex());
        let ys: Vec<f32> = xs.iter().map(|x| x * 0.37 - 0.1).collect();
        for kind in [
            ActivationKind::Tanh,
            ActivationKind::Relu,
            ActivationKind::Elu,
            ActivationKind::Silu,
        ] {
            let mut out = Vec::new();
            kind.apply_slice(&xs, &mut out);
            let mut d = vec![1.5f32; xs.len()];
            kind.scale_by_derivative(&xs, &ys, &mut d);
            for (i, x) in xs.iter().enumerate() {
                assert_eq!(
                    out[i].to_bits(),
                    kind.apply_scalar(*x).to_bits(),
                    "{kind:?}({x})"
                );
                let want = 1.5 * kind.derivative_scalar(*x, ys[i]);
                assert_eq!(d[i].to_bits(), want.to_bits(), "{kind:?}'({x})");
            }
        }
    }

    #[test]
    fn gradient_is_one_minus_tanh_squared() {
        let d = Device::flex().autodiff();
        let (xs, t) = grid(&d);
        let x = t.require_grad();
        // Weight each output differently so a wrong element shows.
        let n = xs.len();
        let w: Vec<f32> = (0..n).map(|i| 1.0 + (i % 5) as f32).collect();
        let w = Tensor::<2>::from_data(TensorData::new(w.clone(), [1, n]), &d);
        let y = fast_tanh(x.clone());
        let grads = y.mul(w.clone()).sum().backward();
        let g: Vec<f32> = x.grad(&grads).unwrap().try_into_vec_as().unwrap();
        let w: Vec<f32> = w.try_into_vec_as().unwrap();
        for ((x, g), w) in xs.iter().zip(&g).zip(&w) {
            let t = x.tanh();
            let want = w * (1.0 - t * t);
            assert!(
                (g - want).abs() <= 1e-6 * w,
                "d tanh({x}) = {g}, want {want}"
            );
        }
    }

    #[test]
    fn half_precision_is_tanh_rounded() {
        let d = Device::flex();
        let (xs, t) = grid(&d);
        for dtype in [FloatDType::BF16, FloatDType::F16] {
            let y: Vec<f32> = fast_tanh(t.clone().cast(dtype))
                .cast(FloatDType::F32)
                .try_into_vec_as()
                .unwrap();
            // The input is rounded to the half type first; compare with tanh of that.
            let xr: Vec<f32> = t
                .clone()
                .cast(dtype)
                .cast(FloatDType::F32)
                .try_into_vec_as()
                .unwrap();
            let eps = if dtype == FloatDType::BF16 {
                8e-3
            } else {
                1e-3
            };
            for ((x, xr), y) in xs.iter().zip(&xr).zip(&y) {
                assert!(y.is_finite(), "{dtype:?} tanh({x}) = {y}");
                assert!((y - xr.tanh()).abs() <= eps, "{dtype:?} tanh({x}) = {y}");
            }
        }
    }
}
