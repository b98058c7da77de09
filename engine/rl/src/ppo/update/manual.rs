//! The device engine's minibatch: forward pass, losses and a hand-written backward pass in
//! burn tensor operations on the inner (non-autodiff) device, so that burn's fusion sees plain
//! element-wise chains between the matrix products and fuses them, where burn's autodiff
//! graph ran its backward pass as one or more kernels per operation.
//!
//! The arithmetic is that of burn's autodiff on [`crate::ppo::model::ActorCritic`] and the
//! update's loss (`tests.rs` keeps that path, `reference`, and holds this one to it), term for
//! term as [`crate::ppo::host_update`] documents each piece's derivative:
//! - the matrix products, bias additions and activations in the run's compute dtype (a
//!   parameter cast to it, its gradient cast back to f32), as `ActorCritic::forward`;
//! - the loss in f32: the Gaussian log-probability, SB3's clipped surrogate, the (optionally
//!   clipped) value loss, the entropy bonus and the per-minibatch advantage normalisation with
//!   the unbiased std; its gradient in closed form, times the loss scale;
//! - per layer, from the head down: `∂W = xᵀ·∂y`, `∂b = Σ_rows ∂y`, `∂x = ∂y·Wᵀ` (not for the
//!   first layer), then the activation's derivative.
//!
//! Every per-sample quantity that is summed over the minibatch (the losses, approx_kl,
//! clipfrac, `∂L/∂log σ`, the heads' bias gradients) is one column of one matrix, summed by
//! one reduction.

use std::collections::HashMap;

use burn::module::{Param, ParamId};
use burn::tensor::{Device, FloatDType, Int, Tensor, TensorData, activation};

use super::flat_adam::FlatAdam;
#[cfg(feature = "wgpu")]
use super::kernels;
use super::{HeadGrads, UpdateBatch};
use crate::ppo::config::PpoConfig;
use crate::ppo::model::{ActivationKind, ActorCritic, Dense};

/// `ln √(2π)`, as in [`crate::ppo::model::gaussian_log_prob`].
const LN_SQRT_2PI: f32 = 0.918_938_5;

/// One network's forward pass, kept for its backward pass (compute dtype).
struct Trace {
    /// The input of each layer (the observations for the first).
    inputs: Vec<Tensor<2>>,
    /// The pre-activations of each hidden layer, where the derivative needs them (SiLU).
    pre: Vec<Option<Tensor<2>>>,
    /// Each layer's weight in the compute dtype, for `∂x = ∂y·Wᵀ` (one cast per step).
    weights: Vec<Tensor<2>>,
}

/// Where a minibatch reads the parameters (inner device, f32): Adam's flat buffer once it has
/// stepped (the device engine places them into the model once an update, see
/// [`FlatAdam::step_flat`]), or the model's own tensors before the first step.
struct Source<'a> {
    model: &'a ActorCritic,
    adam: &'a FlatAdam,
}

impl Source<'_> {
    /// `param` in f32.
    fn get<const D: usize>(&self, param: &Param<Tensor<D>>) -> Tensor<D> {
        match self.adam.current(param.id) {
            Some(flat) => flat.reshape(param.shape()),
            None => param.val().inner(),
        }
    }

    /// `param` in `dtype`, the run's compute dtype: from Adam's cast of the flat buffer where
    /// there is one (f16), else cast here.
    fn get_in<const D: usize>(&self, param: &Param<Tensor<D>>, dtype: FloatDType) -> Tensor<D> {
        match self.adam.current_in_compute(param.id) {
            Some(flat) => flat.reshape(param.shape()),
            None => self.get(param).cast(dtype),
        }
    }
}

/// The network `hidden` + `head` on `x` (compute dtype `dtype`): the head's matrix product
/// `h·W` before its bias (compute dtype) and the trace for [`backward`].
fn forward(
    src: &Source<'_>,
    hidden: &[Dense],
    head: &Dense,
    act: ActivationKind,
    x: Tensor<2>,
    dtype: FloatDType,
) -> (Tensor<2>, Trace) {
    let mut trace = Trace {
        inputs: Vec::with_capacity(hidden.len() + 1),
        pre: Vec::with_capacity(hidden.len()),
        weights: Vec::with_capacity(hidden.len() + 1),
    };
    let mut h = x;
    for layer in hidden {
        let y = affine(src, layer, h.clone(), dtype, &mut trace.weights);
        trace.inputs.push(h);
        trace
            .pre
            .push(act.derivative_needs_input().then(|| y.clone()));
        h = act.apply(y);
    }
    let w = src.get_in(&head.weight, dtype);
    trace.weights.push(w.clone());
    let out = h.clone().matmul(w);
    trace.inputs.push(h);
    (out, trace)
}

/// The head's output `raw + b` in f32 (the bias added in the compute dtype, as `Dense`).
fn biased(src: &Source<'_>, raw: Tensor<2>, head: &Dense) -> Tensor<2> {
    let dtype: FloatDType = raw.dtype().into();
    raw.add(src.get_in(&head.bias, dtype).unsqueeze_dim::<2>(0))
        .cast(FloatDType::F32)
}

/// `x·W + b` in `dtype`, as `Dense::forward`; `W` in `dtype` pushed onto `weights`.
fn affine(
    src: &Source<'_>,
    layer: &Dense,
    x: Tensor<2>,
    dtype: FloatDType,
    weights: &mut Vec<Tensor<2>>,
) -> Tensor<2> {
    let (w, b) = (
        src.get_in(&layer.weight, dtype),
        src.get_in(&layer.bias, dtype),
    );
    weights.push(w.clone());
    x.matmul(w).add(b.unsqueeze_dim::<2>(0))
}

/// Back-propagates `d_out` (the gradient at the head's output, compute dtype) through the network
/// whose forward pass is `trace`: each layer's `(∂W, ∂b)` (f32, flat) by parameter id into
/// `grads`. `head_bias`, where given, is the head's bias gradient already summed. `f32_out`:
/// the gradients come out of the matmul and the sum in f32 (our kernels run, in f16).
#[allow(clippy::too_many_arguments)]
fn backward(
    hidden: &[Dense],
    head: &Dense,
    act: ActivationKind,
    trace: Trace,
    d_out: Tensor<2>,
    head_bias: Tensor<1>,
    f32_out: bool,
    grads: &mut HashMap<ParamId, Tensor<1>>,
) {
    let layers: Vec<&Dense> = hidden.iter().chain(std::iter::once(head)).collect();
    let mut dz = d_out;
    let mut bias = Some(head_bias);
    for (l, layer) in layers.iter().enumerate().rev() {
        let input = trace.inputs[l].clone();
        let [fan_in, fan_out] = layer.weight.shape().dims::<2>();
        let gw = matmul_f32(input.transpose(), dz.clone(), f32_out).reshape([fan_in * fan_out]);
        let gb = match bias.take() {
            Some(b) => b,
            None => column_sums_f32(dz.clone(), f32_out),
        };
        grads.insert(layer.weight.id, gw);
        grads.insert(layer.bias.id, gb);
        if l == 0 {
            break;
        }
        let dh = dz.matmul(trace.weights[l].clone().transpose());
        let h = trace.inputs[l].clone();
        dz = derivative(act, dh, trace.pre[l - 1].clone(), h);
    }
}

/// `x` · `y` in f32 (a weight's gradient). With `f32_out` (f16 on a cubecl device) one matmul
/// with an f32 output ([`kernels::matmul_f32`]); else the product in the inputs' dtype, cast.
fn matmul_f32(x: Tensor<2>, y: Tensor<2>, f32_out: bool) -> Tensor<2> {
    #[cfg(feature = "wgpu")]
    if f32_out {
        return kernels::matmul_f32(x, y);
    }
    let _ = f32_out;
    x.matmul(y).cast(FloatDType::F32)
}

/// `[C]` the column sums of `dz` `[B, C]` in f32 (a bias's gradient). With `f32_out` (f16 on a
/// cubecl device) one reduction with an f32 output ([`kernels::column_sums_f32`]), where
/// `sum_dim` and its cast back to f32 were two launches; the sum is taken in f32 either way.
fn column_sums_f32(dz: Tensor<2>, f32_out: bool) -> Tensor<1> {
    let c = dz.dims()[1];
    #[cfg(feature = "wgpu")]
    if f32_out {
        return kernels::column_sums_f32(dz);
    }
    let _ = f32_out;
    dz.sum_dim(0).cast(FloatDType::F32).reshape([c])
}

/// `dh ⊙ act'`, the activation's derivative at the pre-activation `pre` (kept for SiLU only)
/// whose value is `h`, as burn's autodiff computes it through [`ActivationKind::apply`].
fn derivative(
    act: ActivationKind,
    dh: Tensor<2>,
    pre: Option<Tensor<2>>,
    h: Tensor<2>,
) -> Tensor<2> {
    match (act, pre) {
        // fast_tanh's `1 − y²`, from its f32 value.
        (ActivationKind::Tanh, _) => {
            let dtype: FloatDType = h.dtype().into();
            let y = h.cast(FloatDType::F32);
            let g = y.clone().mul(y).neg().add_scalar(1.0).cast(dtype);
            dh.mul(g)
        }
        (ActivationKind::Relu, _) => dh.mask_fill(h.lower_equal_elem(0.0), 0.0),
        // eˣ = y + 1 below 0.
        (ActivationKind::Elu, _) => {
            let positive = h.clone().greater_elem(0.0);
            let g = h.add_scalar(1.0).mask_fill(positive, 1.0);
            dh.mul(g)
        }
        (ActivationKind::Silu, Some(x)) => {
            let s = activation::sigmoid(x.clone());
            let g = s
                .clone()
                .mul(s.neg().add_scalar(1.0).mul(x).add_scalar(1.0));
            dh.mul(g)
        }
        (ActivationKind::Silu, None) => unreachable!("SiLU's pre-activations are kept"),
    }
}

/// The losses and gradient of one minibatch (`idx` into `batch`, on the inner device), the
/// loss scaled by `scale` (`[1]`, inner device): `[6]` losses (loss, policy loss, value loss,
/// entropy, approx_kl, clipfrac), `[1]` Σ‖g‖² of the scaled loss's gradient, and that gradient,
/// flat in `adam`'s layout. `batch` holds inner tensors; `picks` the index tensors of its
/// gathers. On a cubecl device the loss and its gradient at the heads are one kernel
/// ([`kernels::loss`]); elsewhere they are [`loss`]'s tensor program.
pub(super) fn minibatch(
    model: &ActorCritic,
    adam: &FlatAdam,
    cfg: &PpoConfig,
    batch: &UpdateBatch,
    idx: Tensor<1, Int>,
    scale: Tensor<1>,
    picks: &mut Picks,
) -> (Tensor<1>, Tensor<1>, Tensor<1>) {
    let dtype = cfg.precision.compute_dtype();
    let act = model.activation();
    let src = Source { model, adam };
    // The loss kernel gathers the rollout rows it reads; the tensor program takes them all here.
    let rows = (!picks.kernels).then(|| batch.rows(idx.clone()));
    let x = match &rows {
        Some(rows) => rows.obs.clone(),
        None => batch.obs.clone().select(0, idx.clone()),
    }
    .cast(dtype);
    let (mean, pi_trace) = forward(&src, &model.pi, &model.mean, act, x.clone(), dtype);
    // Each network's forward pass a segment of its own: burn's fusion search explores at most 5
    // independent blocks of a segment (a matmul and what follows it is one) and runs what it
    // left as one kernel per operation at the segment's end, so with both networks in one
    // segment a deeper layer's bias and activation were launches of their own. With three
    // hidden layers (the GPU presets' depth) a minibatch launched 46.5 kernels in f32 and 52.5
    // in f16 with one cut after both, 38.5 in both with this one (and 20.5, from 21.5, with
    // one hidden layer; `bench gpu --configs tiny_deep,tiny`, lavapipe, 2026-11-28).
    picks.cut();
    let (value, vf_trace) = forward(&src, &model.vf, &model.value, act, x, dtype);
    picks.cut();
    let heads = match rows {
        Some(rows) => loss(&src, cfg, rows, mean, value, scale, picks),
        #[cfg(feature = "wgpu")]
        None => kernel_loss(&src, cfg, batch, idx, mean, value, scale),
        #[cfg(not(feature = "wgpu"))]
        None => unreachable!("the loss kernel runs only in builds with wgpu"),
    };

    picks.cut();
    // Our kernels write f16's gradients in f32 (no cast launches); in f32 nothing is cast.
    let f32_out = picks.kernels && dtype != FloatDType::F32;
    let mut grads = HashMap::new();
    backward(
        &model.pi,
        &model.mean,
        act,
        pi_trace,
        heads.d_mean,
        heads.mean_bias,
        f32_out,
        &mut grads,
    );
    backward(
        &model.vf,
        &model.value,
        act,
        vf_trace,
        heads.d_value,
        heads.value_bias,
        f32_out,
        &mut grads,
    );
    grads.insert(model.log_std.id, heads.log_std);
    let grad = adam.flat(grads, &mut |n| picks.zeros(n));
    let grad_sq = grad.clone().square().sum();
    (heads.losses, grad_sq, grad)
}

/// The loss and its gradient at the heads through [`kernels::loss`]: one launch.
#[cfg(feature = "wgpu")]
fn kernel_loss(
    src: &Source<'_>,
    cfg: &PpoConfig,
    batch: &UpdateBatch,
    idx: Tensor<1, Int>,
    mean: Tensor<2>,
    value: Tensor<2>,
    scale: Tensor<1>,
) -> HeadGrads {
    kernels::loss(
        kernels::LossInputs {
            idx,
            actions: &batch.actions,
            old_log_probs: &batch.log_probs,
            old_values: &batch.values,
            advantages: &batch.advantages,
            returns: &batch.returns,
            mean,
            value,
            small: small_params(src),
            scale,
        },
        &kernels::LossCoefs {
            clip: cfg.clip_range,
            clip_vf: cfg.clip_range_vf.unwrap_or(-1.0),
            vf_coef: cfg.vf_coef,
            ent_coef: cfg.ent_coef,
            normalize: cfg.normalize_advantage,
        },
    )
}

/// The policy head's bias, the value head's bias and log σ for [`kernels::loss`]: Adam's flat
/// buffer and where they lie in it, or before Adam's first step, the three joined (a copy).
#[cfg(feature = "wgpu")]
fn small_params(src: &Source<'_>) -> kernels::SmallParams {
    let model = src.model;
    let ids = [model.mean.bias.id, model.value.bias.id, model.log_std.id];
    if let Some(flat) = &src.adam.flat_params
        && let [Some(m), Some(v), Some(l)] = ids.map(|id| src.adam.slot_of(id))
    {
        return kernels::SmallParams {
            buffer: flat.clone(),
            at: [m.0, v.0, l.0],
        };
    }
    let a = model.log_std.shape().dims::<1>()[0];
    kernels::SmallParams {
        buffer: Tensor::cat(
            vec![
                src.get(&model.mean.bias),
                src.get(&model.value.bias),
                src.get(&model.log_std),
            ],
            0,
        ),
        at: [0, a, a + 1],
    }
}

/// The loss, its per-minibatch sums and its gradient at the heads in burn tensor operations
/// over the minibatch's `rows`, where no kernel runs (see the module docs for the arithmetic).
fn loss(
    src: &Source<'_>,
    cfg: &PpoConfig,
    rows: UpdateBatch,
    mean: Tensor<2>,
    value: Tensor<2>,
    scale: Tensor<1>,
    picks: &mut Picks,
) -> HeadGrads {
    let dtype = cfg.precision.compute_dtype();
    let [b, a] = rows.actions.dims();
    let UpdateBatch {
        actions,
        log_probs: old_logp,
        values: old_values,
        advantages: mut adv,
        returns,
        ..
    } = rows;
    let model = src.model;
    let mean = biased(src, mean, &model.mean);
    let value = biased(src, value, &model.value).squeeze_dim::<1>(1);

    // The Gaussian log-probability: z = (a − μ)/σ, logp = Σ_j −½z² − log σ_j − A·ln√(2π).
    let log_std_flat = src.get(&model.log_std);
    let log_std = log_std_flat.clone().unsqueeze_dim::<2>(0);
    let std = log_std.clone().exp();
    let z = actions.sub(mean).div(std.clone());
    let logp = z
        .clone()
        .square()
        .mul_scalar(-0.5)
        .sub(log_std.clone())
        .sum_dim(1)
        .reshape([b])
        .sub_scalar(a as f32 * LN_SQRT_2PI);
    let entropy = log_std_flat
        .sum()
        .add_scalar(a as f32 * (0.5 + LN_SQRT_2PI));
    let log_ratio = logp.sub(old_logp);
    let ratio = log_ratio.clone().exp();
    if cfg.normalize_advantage && b > 1 {
        // Unbiased std, as torch's `adv.std()` in SB3.
        let m = adv.clone().mean();
        let centred = adv.sub(m);
        let std = centred
            .clone()
            .square()
            .sum()
            .div_scalar((b - 1) as f32)
            .sqrt();
        adv = centred.div(std.add_scalar(1e-8));
    }
    let c = cfg.clip_range;
    let surrogate = adv.clone().neg().mul(ratio.clone());
    let clipped = adv.clone().neg().mul(ratio.clone().clamp(1.0 - c, 1.0 + c));
    // The max's gradient reaches the ratio through the unclipped term. (Comparisons and
    // masks rather than `max_pair`, `bool_not` and bool-to-float casts: burn's fusion fuses
    // the former, not the latter.)
    let clipped_larger = clipped.clone().greater(surrogate.clone());
    let policy_i = surrogate.mask_where(clipped_larger.clone(), clipped);
    let kl_i = ratio.clone().sub_scalar(1.0).sub(log_ratio);
    let clip_i = ratio
        .clone()
        .zeros_like()
        .mask_fill(ratio.clone().sub_scalar(1.0).abs().greater_elem(c), 1.0);
    // ∂(scale·L)/∂logp: scale·(−Â/B)·ratio where the unclipped term is the max.
    let per_sample = scale.clone().div_scalar(b as f32);
    let d_logp = adv
        .neg()
        .mul(ratio)
        .mul(per_sample.clone())
        .mask_fill(clipped_larger, 0.0)
        .unsqueeze_dim::<2>(1);
    let d_mean = d_logp.clone().mul(z.clone()).div(std);
    let d_log_std_i = d_logp.mul(z.square().sub_scalar(1.0));

    let (v_pred, outside) = match cfg.clip_range_vf {
        Some(cv) => {
            let delta = value.sub(old_values.clone());
            // clamp passes the gradient within [−ε, ε], bounds included.
            let outside = delta.clone().abs().greater_elem(cv);
            (old_values.add(delta.clamp(-cv, cv)), Some(outside))
        }
        None => (value, None),
    };
    let diff = returns.sub(v_pred);
    let value_i = diff.clone().square();
    let mut d_value = diff.mul(per_sample).mul_scalar(-2.0 * cfg.vf_coef);
    if let Some(outside) = outside {
        d_value = d_value.mask_fill(outside, 0.0);
    }
    let d_value = d_value.unsqueeze_dim::<2>(1);

    // One reduction over the rows: [policy, value, approx_kl, clipfrac | ∂log σ (A) |
    // the policy head's bias (A) | the value head's bias (1)].
    let columns = Tensor::cat(
        vec![
            Tensor::stack::<2>(vec![policy_i, value_i, kl_i, clip_i], 1),
            d_log_std_i,
            d_mean.clone(),
            d_value.clone(),
        ],
        1,
    );
    let sums = columns.sum_dim(0).reshape([4 + 2 * a + 1]);
    // Its pieces by gathers (fused; a slice is a kernel of its own where its offset is not
    // aligned).
    let mut pick = |range: std::ops::Range<usize>| sums.clone().select(0, picks.range(range));
    let means = pick(0..4).div_scalar(b as f32);
    let log_std = pick(4..4 + a).sub(scale.mul_scalar(cfg.ent_coef));
    let mean_bias = pick(4 + a..4 + 2 * a);
    let value_bias = pick(4 + 2 * a..4 + 2 * a + 1);

    // [policy, value, approx_kl, clipfrac] → [loss, policy, value, entropy, approx_kl,
    // clipfrac].
    let loss = means
        .clone()
        .select(0, picks.range(0..1))
        .add(
            means
                .clone()
                .select(0, picks.range(1..2))
                .mul_scalar(cfg.vf_coef),
        )
        .sub(entropy.clone().mul_scalar(cfg.ent_coef));
    let losses = Tensor::cat(
        vec![
            loss,
            means.clone().select(0, picks.range(0..2)),
            entropy,
            means.select(0, picks.range(2..4)),
        ],
        0,
    );
    HeadGrads {
        d_mean: d_mean.cast(dtype),
        d_value: d_value.cast(dtype),
        log_std,
        mean_bias,
        value_bias,
        losses,
    }
}

/// Index tensors `start..end` and zero vectors on the engine's device, made once and reused from
/// minibatch to minibatch (gathers with them fuse; narrowing an unaligned range launches a
/// copy kernel, and so does each zero vector made).
pub(super) struct Picks {
    device: Device,
    /// Whether the loss runs as [`kernels::loss`] (a cubecl device).
    pub kernels: bool,
    made: HashMap<(usize, usize), Tensor<1, Int>>,
    zeros: HashMap<usize, Tensor<1>>,
}

impl Picks {
    /// On `device`; `kernels`: whether [`kernels::loss`] runs there.
    pub fn new(device: &Device, kernels: bool) -> Self {
        Self {
            device: device.clone(),
            kernels,
            made: HashMap::new(),
            zeros: HashMap::new(),
        }
    }

    /// Hands the operations queued so far to burn's fusion as one segment, without waiting
    /// for the device: burn 0.22's fusion falls back to one kernel per operation for some
    /// segments that mix a minibatch's phases (its "repair" of an unorderable plan: the
    /// tally's decisions, Adam's step and the parameters' slices ran as 71 single kernels),
    /// while the forward pass, the loss, the backward pass and the step each fuse on their
    /// own. The device engine cuts before and after each minibatch and step.
    pub fn cut(&self) {
        // A device that cannot take more work fails at the update's read, with its reason.
        let _ = self.device.flush();
    }

    /// Zeros `[n]`.
    fn zeros(&mut self, n: usize) -> Tensor<1> {
        let device = &self.device;
        self.zeros
            .entry(n)
            .or_insert_with(|| Tensor::zeros([n], device))
            .clone()
    }

    fn range(&mut self, range: std::ops::Range<usize>) -> Tensor<1, Int> {
        let device = &self.device;
        self.made
            .entry((range.start, range.end))
            .or_insert_with(|| {
                let idx: Vec<i64> = range.clone().map(|i| i as i64).collect();
                Tensor::from_data(TensorData::new(idx, [range.len()]), device)
            })
            .clone()
    }
}
