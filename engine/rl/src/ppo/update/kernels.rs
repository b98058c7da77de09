//! The device engine's loss and its gradient, and the update's tally, as CubeCL kernels on
//! cubecl devices (a GPU, or lavapipe): issue 33's "the loss and its gradient are fused".
//!
//! - [`loss`]: one launch per minibatch, one cube, where burn's tensor operations took about
//!   twenty (the five gathers of the minibatch's rollout rows, the head's bias, the advantages'
//!   mean and std, the Gaussian log-probability, the clipped surrogate and value losses, their
//!   closed-form gradients and one reduction of their per-sample columns, each a reduction or a
//!   fused element-wise kernel of its own: burn fuses nothing across a reduction). It reads the
//!   rollout by the minibatch's indices and the heads' raw outputs, and writes the gradients at
//!   the heads' outputs (for the backward pass's matrix products), the gradients of log σ and
//!   of the heads' biases, and the losses. The arithmetic is [`super::manual`]'s tensor program,
//!   term for term (that program still runs where no kernel does: flex, and builds without
//!   `wgpu`); sums run in another order, so results agree to rounding, and the tests hold the
//!   kernel to burn's autodiff as they hold the tensor program.
//! - [`tally`]: one single-thread launch per minibatch, where the device tally's decisions took
//!   about seven (burn's `is_finite` alone is four kernels it does not fuse): the gradient norm,
//!   its finiteness, the clip and loss-scale factor, the gate of f16's skipped steps, the loss
//!   scale's growth and back-off, and the update's running sums, as [`super::stats`]'s
//!   `DeviceTally` computes them in tensor operations.
//! - [`column_sums_f32`]: a hidden layer's bias gradient in f16, summed straight into f32 by
//!   burn's own reduction (one launch where `sum_dim` and its cast were two).
//! - [`matmul_f32`]: a weight's gradient xᵀ·∂y in f16, written straight in f32 by burn's own
//!   (autotuned) matmul (one launch where `matmul` and its cast were two, wherever burn did not
//!   fuse the cast into something else).
//!
//! No buffer is written in place: each launch writes new tensors, so a tensor read from the old
//! state stays valid. burn reaches the kernels through its backend extension API (the unfused
//! cubecl backend implements each trait; `#[backend_extension]` derives the fused backend, a
//! deferred custom operation in burn-fusion's stream, and the dispatch layer's routing), as the
//! env step's kernel does (`tradetune_env`'s `tensor/kernel.rs`).
#![allow(clippy::too_many_arguments)]

use burn::backend::cubecl::{dtype_to_elem_type, dtype_to_storage_type};
use burn::backend::fusion::custom::TensorSpec;
use burn::backend::tensor::{FloatTensor, IntTensor};
use burn::backend::{Backend, Dispatch, ExtensionType, backend_extension};
use burn::tensor::{DType, Int, Tensor};
use burn_cubecl::CubeBackend;
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::kernel::matmul::{MatmulStrategy, matmul};
use burn_cubecl::kernel::reduce::{autotune_reduce, init_reduce_output_dtype};
use burn_cubecl::ops::numeric::empty_device_dtype;
use cubecl::prelude::{CubeCount, CubeDim};
use cubek::reduce::ReduceDtypes;
use cubek::reduce::components::instructions::ReduceOperationConfig;

use super::HeadGrads;

/// What [`loss`] writes.
#[derive(ExtensionType)]
#[extension_type(fusion)]
pub struct LossOutput<B: Backend> {
    /// `[B, A]` ∂(s·L)/∂μ, the gradient at the policy head's output (compute dtype).
    pub d_mean: FloatTensor<B>,
    /// `[B, 1]` ∂(s·L)/∂V, at the value head's output (compute dtype).
    pub d_value: FloatTensor<B>,
    /// `[A]` ∂(s·L)/∂log σ.
    pub log_std: FloatTensor<B>,
    /// `[A]` the policy head's bias gradient.
    pub mean_bias: FloatTensor<B>,
    /// `[1]` the value head's bias gradient.
    pub value_bias: FloatTensor<B>,
    /// `[6]` loss, policy loss, value loss, entropy, approx_kl, clipfrac.
    pub losses: FloatTensor<B>,
    /// `[2A + 5, B]` the per-sample columns the sums are taken over (the kernel's scratch).
    pub columns: FloatTensor<B>,
}

fn loss_meta(
    idx: &TensorSpec,
    actions: &TensorSpec,
    _old_log_probs: &TensorSpec,
    _old_values: &TensorSpec,
    _advantages: &TensorSpec,
    _returns: &TensorSpec,
    mean: &TensorSpec,
    _value: &TensorSpec,
    _params: &TensorSpec,
    _at: &[usize; 3],
    _scale: &TensorSpec,
    _clip: &f32,
    _clip_vf: &f32,
    _vf_coef: &f32,
    _ent_coef: &f32,
    _normalize: &bool,
) -> LossOutputMetadata {
    let b = idx.shape[0];
    let a = actions.shape[1];
    let f32s = |shape: Vec<usize>| TensorSpec::new(shape.into(), actions.dtype);
    let compute = |shape: Vec<usize>| TensorSpec::new(shape.into(), mean.dtype);
    LossOutputMetadata {
        d_mean: compute(vec![b, a]),
        d_value: compute(vec![b, 1]),
        log_std: f32s(vec![a]),
        mean_bias: f32s(vec![a]),
        value_bias: f32s(vec![1]),
        losses: f32s(vec![6]),
        columns: f32s(vec![columns(a), b]),
    }
}

/// The per-sample columns: policy, value, approx_kl and clip terms, ∂log σ (A), ∂μ (A), ∂V.
fn columns(a: usize) -> usize {
    2 * a + 5
}

/// What [`tally`] writes.
#[derive(ExtensionType)]
#[extension_type(fusion)]
pub struct TallyOutput<B: Backend> {
    /// `[1]` what multiplies the gradient before Adam: the loss scale undone and the clip.
    pub factor: FloatTensor<B>,
    /// `[1]` 1 where the step is taken, 0 where it is skipped (a non-finite gradient).
    pub gate: FloatTensor<B>,
    /// `[1]` the next minibatch's loss scale.
    pub scale: FloatTensor<B>,
    /// `[1]` clean steps in a row.
    pub clean: FloatTensor<B>,
    /// `[8]` the update's sums (see `DeviceTally`).
    pub sums: FloatTensor<B>,
}

fn tally_meta(
    losses: &TensorSpec,
    _grad_sq: &TensorSpec,
    scale: &TensorSpec,
    clean: &TensorSpec,
    sums: &TensorSpec,
    _max_norm: &f32,
    _scaling: &bool,
    _interval: &f32,
    _min_scale: &f32,
    _max_scale: &f32,
) -> TallyOutputMetadata {
    let one = TensorSpec::new(vec![1].into(), losses.dtype);
    TallyOutputMetadata {
        factor: one.clone(),
        gate: one,
        scale: scale.clone(),
        clean: clean.clone(),
        sums: sums.clone(),
    }
}

/// What [`column_sums_f32`] writes.
#[derive(ExtensionType)]
#[extension_type(fusion)]
pub struct ColumnSums<B: Backend> {
    /// `[1, C]` f32.
    pub sums: FloatTensor<B>,
}

fn column_sums_meta(t: &TensorSpec) -> ColumnSumsMetadata {
    ColumnSumsMetadata {
        sums: TensorSpec::new(vec![1, t.shape[1]].into(), DType::F32),
    }
}

/// What [`matmul_f32`] writes.
#[derive(ExtensionType)]
#[extension_type(fusion)]
pub struct MatmulF32<B: Backend> {
    /// `[M, N]` f32.
    pub out: FloatTensor<B>,
}

fn matmul_f32_meta(lhs: &TensorSpec, rhs: &TensorSpec) -> MatmulF32Metadata {
    MatmulF32Metadata {
        out: TensorSpec::new(vec![lhs.shape[0], rhs.shape[1]].into(), DType::F32),
    }
}

/// The minibatch's loss and its gradient, and the update's tally, as backend operations.
#[backend_extension(Cube, Fusion)]
pub trait PpoKernelOps: Backend {
    /// The loss of the minibatch `idx` `[B]` of the rollout (`actions` `[S, A]`, the rest
    /// `[S]`) given the heads' outputs before their biases (`mean` `[B, A]`, `value` `[B, 1]`,
    /// compute dtype), and its gradient times `scale` `[1]`. The policy head's bias, the value
    /// head's bias and log σ lie in `params` at `at`. `clip_vf < 0`: no value clipping.
    #[fusion(meta = loss_meta)]
    fn ppo_loss(
        idx: IntTensor<Self>,
        actions: &FloatTensor<Self>,
        old_log_probs: &FloatTensor<Self>,
        old_values: &FloatTensor<Self>,
        advantages: &FloatTensor<Self>,
        returns: &FloatTensor<Self>,
        mean: FloatTensor<Self>,
        value: FloatTensor<Self>,
        params: &FloatTensor<Self>,
        at: [usize; 3],
        scale: FloatTensor<Self>,
        clip: f32,
        clip_vf: f32,
        vf_coef: f32,
        ent_coef: f32,
        normalize: bool,
    ) -> LossOutput<Self>;

    /// One minibatch's judgement and count: `losses` `[6]` and `grad_sq` `[1]` (Σ‖g‖² of the
    /// scaled loss's gradient) against the loss `scale` `[1]`, the `clean` steps `[1]` and the
    /// update's `sums` `[8]`.
    #[fusion(meta = tally_meta)]
    fn ppo_tally(
        losses: FloatTensor<Self>,
        grad_sq: FloatTensor<Self>,
        scale: &FloatTensor<Self>,
        clean: &FloatTensor<Self>,
        sums: &FloatTensor<Self>,
        max_norm: f32,
        scaling: bool,
        interval: f32,
        min_scale: f32,
        max_scale: f32,
    ) -> TallyOutput<Self>;

    /// The column sums of `t` `[R, C]` in f32 whatever `t`'s dtype: burn's reduction with an
    /// f32 output, where `sum_dim` then `cast` launched a cast of its own after it.
    #[fusion(meta = column_sums_meta)]
    fn column_sums_f32(t: FloatTensor<Self>) -> ColumnSums<Self>;

    /// `lhs` `[M, K]` · `rhs` `[K, N]` written in f32 whatever their dtype: burn's (autotuned)
    /// matmul with an f32 output, where `matmul` then `cast` launched a cast after it.
    #[fusion(meta = matmul_f32_meta)]
    fn matmul_f32(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> MatmulF32<Self>;
}

/// The largest power of two of units at most 256 (WebGPU's guaranteed minimum) within a
/// device's `max` units per cube.
fn units(max: u32) -> usize {
    let max = max.clamp(1, 256) as usize;
    1 << max.ilog2()
}

impl PpoKernelOps for CubeBackend {
    fn ppo_loss(
        idx: IntTensor<Self>,
        actions: &FloatTensor<Self>,
        old_log_probs: &FloatTensor<Self>,
        old_values: &FloatTensor<Self>,
        advantages: &FloatTensor<Self>,
        returns: &FloatTensor<Self>,
        mean: FloatTensor<Self>,
        value: FloatTensor<Self>,
        params: &FloatTensor<Self>,
        at: [usize; 3],
        scale: FloatTensor<Self>,
        clip: f32,
        clip_vf: f32,
        vf_coef: f32,
        ent_coef: f32,
        normalize: bool,
    ) -> LossOutput<Self> {
        let (fdt, rdt, idt) = (mean.dtype, actions.dtype, idx.dtype);
        let b = idx.meta.shape()[0];
        let a = actions.meta.shape()[1];
        let (client, device) = (actions.client.clone(), actions.device.clone());
        let empty = |shape: Vec<usize>, dtype: DType| {
            empty_device_dtype(client.clone(), device.clone(), shape.into(), dtype)
        };
        let out: LossOutput<Self> = LossOutput {
            d_mean: empty(vec![b, a], fdt),
            d_value: empty(vec![b, 1], fdt),
            log_std: empty(vec![a], rdt),
            mean_bias: empty(vec![a], rdt),
            value_bias: empty(vec![1], rdt),
            losses: empty(vec![6], rdt),
            columns: empty(vec![columns(a), b], rdt),
        };
        let units = units(client.properties().hardware.max_units_per_cube);
        code::ppo_loss_kernel::launch(
            &client,
            CubeCount::Static(1, 1, 1),
            CubeDim::new_1d(units as u32),
            into_contiguous(idx).into_tensor_arg(),
            into_contiguous(actions.clone()).into_tensor_arg(),
            into_contiguous(old_log_probs.clone()).into_tensor_arg(),
            into_contiguous(old_values.clone()).into_tensor_arg(),
            into_contiguous(advantages.clone()).into_tensor_arg(),
            into_contiguous(returns.clone()).into_tensor_arg(),
            into_contiguous(mean).into_tensor_arg(),
            into_contiguous(value).into_tensor_arg(),
            into_contiguous(params.clone()).into_tensor_arg(),
            into_contiguous(scale).into_tensor_arg(),
            out.d_mean.clone().into_tensor_arg(),
            out.d_value.clone().into_tensor_arg(),
            out.log_std.clone().into_tensor_arg(),
            out.mean_bias.clone().into_tensor_arg(),
            out.value_bias.clone().into_tensor_arg(),
            out.losses.clone().into_tensor_arg(),
            out.columns.clone().into_tensor_arg(),
            clip,
            clip_vf,
            vf_coef,
            ent_coef,
            u32::from(normalize && b > 1),
            at[0] as u32,
            at[1] as u32,
            at[2] as u32,
            units,
            [
                dtype_to_storage_type(fdt),
                dtype_to_storage_type(rdt),
                dtype_to_storage_type(idt),
            ],
        );
        out
    }

    fn ppo_tally(
        losses: FloatTensor<Self>,
        grad_sq: FloatTensor<Self>,
        scale: &FloatTensor<Self>,
        clean: &FloatTensor<Self>,
        sums: &FloatTensor<Self>,
        max_norm: f32,
        scaling: bool,
        interval: f32,
        min_scale: f32,
        max_scale: f32,
    ) -> TallyOutput<Self> {
        let rdt = losses.dtype;
        let (client, device) = (losses.client.clone(), losses.device.clone());
        let empty = |shape: Vec<usize>| {
            empty_device_dtype(client.clone(), device.clone(), shape.into(), rdt)
        };
        let out: TallyOutput<Self> = TallyOutput {
            factor: empty(vec![1]),
            gate: empty(vec![1]),
            scale: empty(vec![1]),
            clean: empty(vec![1]),
            sums: empty(sums.meta.shape().to_vec()),
        };
        code::ppo_tally_kernel::launch(
            &client,
            CubeCount::Static(1, 1, 1),
            CubeDim::new_1d(1),
            into_contiguous(losses).into_tensor_arg(),
            into_contiguous(grad_sq).into_tensor_arg(),
            into_contiguous(scale.clone()).into_tensor_arg(),
            into_contiguous(clean.clone()).into_tensor_arg(),
            into_contiguous(sums.clone()).into_tensor_arg(),
            out.factor.clone().into_tensor_arg(),
            out.gate.clone().into_tensor_arg(),
            out.scale.clone().into_tensor_arg(),
            out.clean.clone().into_tensor_arg(),
            out.sums.clone().into_tensor_arg(),
            max_norm,
            u32::from(scaling),
            interval,
            min_scale,
            max_scale,
            dtype_to_storage_type(rdt),
        );
        out
    }

    fn column_sums_f32(t: FloatTensor<Self>) -> ColumnSums<Self> {
        // burn's `sum_dim` keeps the input's dtype (cubek's `precision` ties a sum's output to
        // its input); the reduction itself casts on its final write, as its Arg* outputs do.
        let client = t.client.clone();
        let sums =
            init_reduce_output_dtype(&t, 0, DType::F32, 1).expect("a matrix has a dimension 0");
        let f32s = dtype_to_elem_type(DType::F32);
        let dtypes = ReduceDtypes {
            input: dtype_to_elem_type(t.dtype),
            output: f32s,
            accumulation: f32s,
        };
        autotune_reduce(
            &client,
            t,
            sums.clone(),
            0,
            ReduceOperationConfig::Sum,
            dtypes,
        );
        ColumnSums { sums }
    }

    fn matmul_f32(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> MatmulF32<Self> {
        let out = matmul(lhs, rhs, None, MatmulStrategy::default(), DType::F32)
            .expect("a matrix product of compatible shapes");
        MatmulF32 { out }
    }
}

/// The minibatch's rollout rows and heads' raw outputs for [`loss`] (inner device).
pub(super) struct LossInputs<'a> {
    pub idx: Tensor<1, Int>,
    pub actions: &'a Tensor<2>,
    pub old_log_probs: &'a Tensor<1>,
    pub old_values: &'a Tensor<1>,
    pub advantages: &'a Tensor<1>,
    pub returns: &'a Tensor<1>,
    /// `[B, A]` and `[B, 1]`, the heads' matrix products before their biases (compute dtype).
    pub mean: Tensor<2>,
    pub value: Tensor<2>,
    pub small: SmallParams,
    pub scale: Tensor<1>,
}

/// The policy head's bias, the value head's bias and log σ: where they lie in `buffer`.
pub(super) struct SmallParams {
    pub buffer: Tensor<1>,
    pub at: [usize; 3],
}

/// The loss coefficients [`loss`] takes from the config.
pub(super) struct LossCoefs {
    pub clip: f32,
    /// Negative: no value clipping.
    pub clip_vf: f32,
    pub vf_coef: f32,
    pub ent_coef: f32,
    pub normalize: bool,
}

/// The minibatch's loss and its gradient in one launch (see the module docs).
pub(super) fn loss(t: LossInputs<'_>, c: &LossCoefs) -> HeadGrads {
    let out = <Dispatch as PpoKernelOps>::ppo_loss(
        t.idx.into_dispatch(),
        &t.actions.clone().into_dispatch(),
        &t.old_log_probs.clone().into_dispatch(),
        &t.old_values.clone().into_dispatch(),
        &t.advantages.clone().into_dispatch(),
        &t.returns.clone().into_dispatch(),
        t.mean.into_dispatch(),
        t.value.into_dispatch(),
        &t.small.buffer.into_dispatch(),
        t.small.at,
        t.scale.into_dispatch(),
        c.clip,
        c.clip_vf,
        c.vf_coef,
        c.ent_coef,
        c.normalize,
    );
    HeadGrads {
        d_mean: Tensor::from_dispatch(out.d_mean),
        d_value: Tensor::from_dispatch(out.d_value),
        log_std: Tensor::from_dispatch(out.log_std),
        mean_bias: Tensor::from_dispatch(out.mean_bias),
        value_bias: Tensor::from_dispatch(out.value_bias),
        losses: Tensor::from_dispatch(out.losses),
    }
}

/// The tally's state in and out (see [`TallyOutput`]).
pub(super) struct TallyState {
    pub factor: Tensor<1>,
    pub gate: Tensor<1>,
    pub scale: Tensor<1>,
    pub clean: Tensor<1>,
    pub sums: Tensor<1>,
}

/// The tally's settings.
pub(super) struct TallyCoefs {
    pub max_norm: f32,
    pub scaling: bool,
    pub interval: f32,
    pub min_scale: f32,
    pub max_scale: f32,
}

/// One minibatch's judgement and count in one launch (see the module docs).
pub(super) fn tally(
    losses: Tensor<1>,
    grad_sq: Tensor<1>,
    scale: &Tensor<1>,
    clean: &Tensor<1>,
    sums: &Tensor<1>,
    c: &TallyCoefs,
) -> TallyState {
    let out = <Dispatch as PpoKernelOps>::ppo_tally(
        losses.into_dispatch(),
        grad_sq.into_dispatch(),
        &scale.clone().into_dispatch(),
        &clean.clone().into_dispatch(),
        &sums.clone().into_dispatch(),
        c.max_norm,
        c.scaling,
        c.interval,
        c.min_scale,
        c.max_scale,
    );
    TallyState {
        factor: Tensor::from_dispatch(out.factor),
        gate: Tensor::from_dispatch(out.gate),
        scale: Tensor::from_dispatch(out.scale),
        clean: Tensor::from_dispatch(out.clean),
        sums: Tensor::from_dispatch(out.sums),
    }
}

/// `[C]` the column sums of `t` `[R, C]` in f32, in one launch (see
/// [`PpoKernelOps::column_sums_f32`]).
pub(super) fn column_sums_f32(t: Tensor<2>) -> Tensor<1> {
    let c = t.dims()[1];
    let out = <Dispatch as PpoKernelOps>::column_sums_f32(t.into_dispatch());
    Tensor::<2>::from_dispatch(out.sums).reshape([c])
}

/// `[M, N]` `lhs` · `rhs` in f32, in one launch (see [`PpoKernelOps::matmul_f32`]).
pub(super) fn matmul_f32(lhs: Tensor<2>, rhs: Tensor<2>) -> Tensor<2> {
    let out = <Dispatch as PpoKernelOps>::matmul_f32(lhs.into_dispatch(), rhs.into_dispatch());
    Tensor::from_dispatch(out.out)
}

mod code;
