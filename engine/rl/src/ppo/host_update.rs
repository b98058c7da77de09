//! The PPO minibatch step on the host, for the CPU device in f32: forward pass, loss, a
//! hand-written backward pass and Adam, over the parameters as one flat host buffer.
//!
//! **Why.** At small networks the update is framework overhead, not arithmetic. Through burn a
//! minibatch of the 64-64 configuration is about 150 tensor operations (forward, the loss, the
//! autodiff graph's backward nodes, the flat Adam), each with its dispatch, allocation and
//! thread hand-off for a few thousand numbers: `tradetune bench train --configs small` ran its
//! matmuls at 15–20 % of the machine's measured peak. Here a minibatch is the six matrix
//! products per network that the arithmetic needs (ndarray's `matrixmultiply` kernels, with
//! the transposes as strides) and a few element-wise loops, in buffers reused from minibatch
//! to minibatch. The policy network and the value network have no parameter in common and the
//! loss couples them only through scalars, so each is evaluated and differentiated on its own
//! thread of the run's rayon pool.
//!
//! **Same update.** The arithmetic is that of [`crate::ppo::update`]'s device engine, term for
//! term: the Gaussian log-probability from the actions as stored, SB3's clipped surrogate and
//! (optionally clipped) value loss, the entropy bonus, the per-minibatch advantage
//! normalisation with the unbiased std, the global-norm clipping and burn's Adam, element for
//! element in the same order. Only the order of the additions inside the matrix products and
//! the sums differs, a few ulp per operation; the tests hold the gradients to burn's autodiff
//! and whole updates to the burn path's.
//!
//! The backward pass of each piece (B rows, loss averaged over them):
//! ```text
//! ratio r = exp(logp − logp_old)      ∂L_pi/∂r = −Â/B where the unclipped term is the max, else 0
//! logp  = Σ_j −½ z_j² − log σ_j − …   z = (a − μ)/σ:  ∂logp/∂μ_j = z_j/σ_j,  ∂logp/∂log σ_j = z_j² − 1
//! L_v   = mean((R − V')²)             ∂L_v/∂V = −2(R − V')/B where V − V_old is inside ±ε_vf
//! H     = Σ_j log σ_j + const         ∂H/∂log σ_j = 1
//! y = x·W + b                          ∂W = xᵀ·∂y,  ∂b = Σ_rows ∂y,  ∂x = ∂y·Wᵀ
//! h = act(y)                           ∂y = ∂h ⊙ act'(y)   (tanh: 1 − h², from h)
//! ```

use ndarray::linalg::general_mat_mul;
use ndarray::{ArrayView2, ArrayViewMut2};

use crate::ppo::activation::ActivationKind;
use crate::ppo::config::PpoConfig;

/// `ln √(2π)`, as in [`crate::ppo::model::gaussian_log_prob`].
const LN_SQRT_2PI: f32 = 0.918_938_5;

/// Where one dense layer's parameters lie in the flat buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DenseSlot {
    pub fan_in: usize,
    pub fan_out: usize,
    /// Offset of the `[fan_in, fan_out]` row-major weight.
    pub weight: usize,
    /// Offset of the `[fan_out]` bias.
    pub bias: usize,
}

impl DenseSlot {
    fn weights(self) -> usize {
        self.fan_in * self.fan_out
    }
}

/// The networks' places in the flat parameter buffer of the learner's Adam.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HostNet {
    /// The policy's hidden layers, then the action-mean head.
    pub pi: Vec<DenseSlot>,
    /// The value network's hidden layers, then the value head.
    pub vf: Vec<DenseSlot>,
    /// Offset of the `[action_dim]` log standard deviations.
    pub log_std: usize,
    pub action_dim: usize,
    pub obs_dim: usize,
    pub activation: ActivationKind,
    /// Length of the flat buffer.
    pub n_params: usize,
}

/// The rollout, read to host memory once per update.
#[derive(Debug, Clone, Default)]
pub(crate) struct HostBatch {
    /// `[S, obs_dim]`.
    pub obs: Vec<f32>,
    /// `[S, action_dim]`.
    pub actions: Vec<f32>,
    pub log_probs: Vec<f32>,
    pub values: Vec<f32>,
    pub advantages: Vec<f32>,
    pub returns: Vec<f32>,
}

/// One network's buffers, reused from minibatch to minibatch.
#[derive(Debug, Default)]
struct MlpWork {
    /// Pre-activations of each hidden layer, `[B, fan_out]`, kept only for an activation
    /// whose derivative needs them (SiLU); the others' derivatives come from the outputs.
    pre: Vec<Vec<f32>>,
    /// A layer's pre-activations where they are not kept.
    scratch: Vec<f32>,
    /// Outputs (after the activation) of each hidden layer.
    hidden: Vec<Vec<f32>>,
    /// The head's output, `[B, out]`.
    out: Vec<f32>,
    /// Gradient of the loss at the current layer's output (before its activation).
    dz: Vec<f32>,
    /// Gradient at the current layer's input.
    dh: Vec<f32>,
    /// The network's gradients, layer by layer: weight, then bias.
    grads: Vec<f32>,
}

/// `out = x·W + b` for `rows` rows, the layer's parameters in the flat buffer `params`.
fn dense(layer: DenseSlot, params: &[f32], x: &[f32], rows: usize, out: &mut Vec<f32>) {
    affine(
        &params[layer.weight..layer.weight + layer.weights()],
        &params[layer.bias..layer.bias + layer.fan_out],
        (layer.fan_in, layer.fan_out),
        x,
        rows,
        out,
    );
}

/// `out = x·W + b` for `rows` rows of `x`, with `W` as `[fan_in, fan_out]` row-major.
pub(crate) fn affine(
    weight: &[f32],
    bias: &[f32],
    (fan_in, fan_out): (usize, usize),
    x: &[f32],
    rows: usize,
    out: &mut Vec<f32>,
) {
    out.clear();
    for _ in 0..rows {
        out.extend_from_slice(bias);
    }
    let x = view(x, rows, fan_in);
    let w = view(weight, fan_in, fan_out);
    let mut y = view_mut(out, rows, fan_out);
    general_mat_mul(1.0, &x, &w, 1.0, &mut y);
}

fn view(data: &[f32], rows: usize, cols: usize) -> ArrayView2<'_, f32> {
    ArrayView2::from_shape((rows, cols), &data[..rows * cols])
        .unwrap_or_else(|_| unreachable!("{rows}×{cols} fits the slice taken for it"))
}

fn view_mut(data: &mut [f32], rows: usize, cols: usize) -> ArrayViewMut2<'_, f32> {
    ArrayViewMut2::from_shape((rows, cols), &mut data[..rows * cols])
        .unwrap_or_else(|_| unreachable!("{rows}×{cols} fits the slice taken for it"))
}

impl MlpWork {
    /// The network `net` on `rows` rows of `x`: hidden layers kept for the backward pass,
    /// the head's output in `self.out`.
    fn forward(
        &mut self,
        net: &[DenseSlot],
        act: ActivationKind,
        params: &[f32],
        x: &[f32],
        rows: usize,
    ) {
        let hidden_layers = net.len() - 1;
        self.pre.resize_with(hidden_layers, Vec::new);
        self.hidden.resize_with(hidden_layers, Vec::new);
        for (l, &layer) in net.iter().enumerate() {
            let input: &[f32] = if l == 0 { x } else { &self.hidden[l - 1] };
            if l == hidden_layers {
                dense(layer, params, input, rows, &mut self.out);
                break;
            }
            let keep = act.derivative_needs_input();
            let mut pre = std::mem::take(if keep {
                &mut self.pre[l]
            } else {
                &mut self.scratch
            });
            dense(layer, params, input, rows, &mut pre);
            act.apply_slice(&pre, &mut self.hidden[l]);
            *(if keep {
                &mut self.pre[l]
            } else {
                &mut self.scratch
            }) = pre;
        }
    }

    /// Back-propagates `self.dz` (the gradient at the head's output) through `net`, whose
    /// forward pass on `x` is in `self`, into `self.grads`.
    fn backward(
        &mut self,
        net: &[DenseSlot],
        act: ActivationKind,
        params: &[f32],
        x: &[f32],
        rows: usize,
    ) {
        let total: usize = net.iter().map(|l| l.weights() + l.fan_out).sum();
        self.grads.resize(total, 0.0);
        let mut end = total;
        for (l, &layer) in net.iter().enumerate().rev() {
            let start = end - layer.weights() - layer.fan_out;
            let (gw, gb) = self.grads[start..end].split_at_mut(layer.weights());
            end = start;
            let input: &[f32] = if l == 0 { x } else { &self.hidden[l - 1] };
            let dz = view(&self.dz, rows, layer.fan_out);
            let mut gw = view_mut(gw, layer.fan_in, layer.fan_out);
            general_mat_mul(1.0, &view(input, rows, layer.fan_in).t(), &dz, 0.0, &mut gw);
            gb.fill(0.0);
            for row in self.dz.chunks_exact(layer.fan_out).take(rows) {
                for (g, &d) in gb.iter_mut().zip(row) {
                    *g += d;
                }
            }
            if l == 0 {
                break;
            }
            // ∂h = ∂z·Wᵀ, then through the activation of the layer below.
            self.dh.clear();
            self.dh.resize(rows * layer.fan_in, 0.0);
            let w = view(&params[layer.weight..], layer.fan_in, layer.fan_out);
            let mut dh = view_mut(&mut self.dh, rows, layer.fan_in);
            general_mat_mul(1.0, &dz, &w.t(), 0.0, &mut dh);
            let pre = if act.derivative_needs_input() {
                &self.pre[l - 1]
            } else {
                &self.hidden[l - 1]
            };
            act.scale_by_derivative(pre, &self.hidden[l - 1], &mut self.dh);
            std::mem::swap(&mut self.dz, &mut self.dh);
        }
    }

    /// The gradients with their offsets in the flat buffer: each layer's weight, then bias.
    fn segments<'a>(&'a self, net: &[DenseSlot], out: &mut Vec<(usize, &'a [f32])>) {
        let mut at = 0;
        for layer in net {
            let (w, b) = (layer.weights(), layer.fan_out);
            out.push((layer.weight, &self.grads[at..at + w]));
            out.push((layer.bias, &self.grads[at + w..at + w + b]));
            at += w + b;
        }
    }
}

/// The policy side's share of a minibatch's diagnostics.
#[derive(Debug, Default, Clone, Copy)]
struct PolicySide {
    loss: f32,
    approx_kl: f32,
    clipfrac: f32,
}

/// What a minibatch step computes: `[loss, policy loss, value loss, entropy, approx_kl,
/// clipfrac, Σ‖g‖²]` (the layout of the burn path's diagnostics) and the flat gradient.
#[derive(Debug, Default)]
pub(crate) struct HostWork {
    pi: MlpWork,
    vf: MlpWork,
    /// The minibatch's rows, gathered.
    obs: Vec<f32>,
    actions: Vec<f32>,
    old_log_probs: Vec<f32>,
    old_values: Vec<f32>,
    advantages: Vec<f32>,
    returns: Vec<f32>,
    /// `∂L/∂log σ`.
    d_log_std: Vec<f32>,
}

impl HostWork {
    /// Forward and backward pass of the minibatch `idx` (rows of `batch`): the diagnostics,
    /// and the gradient of the loss kept in `self` (see [`Self::gradient`]).
    pub fn minibatch(
        &mut self,
        net: &HostNet,
        cfg: &PpoConfig,
        params: &[f32],
        batch: &HostBatch,
        idx: &[usize],
    ) -> [f32; 7] {
        let (d, a, b) = (net.obs_dim, net.action_dim, idx.len());
        gather(&mut self.obs, &batch.obs, idx, d);
        gather(&mut self.actions, &batch.actions, idx, a);
        gather(&mut self.old_log_probs, &batch.log_probs, idx, 1);
        gather(&mut self.old_values, &batch.values, idx, 1);
        gather(&mut self.advantages, &batch.advantages, idx, 1);
        gather(&mut self.returns, &batch.returns, idx, 1);
        if cfg.normalize_advantage && b > 1 {
            normalise(&mut self.advantages);
        }
        let log_std = &params[net.log_std..net.log_std + a];
        let Self {
            pi,
            vf,
            obs,
            actions,
            old_log_probs,
            old_values,
            advantages,
            returns,
            d_log_std,
        } = self;
        let (policy, value_loss) = rayon::join(
            || {
                pi.forward(&net.pi, net.activation, params, obs, b);
                let side = policy_loss(
                    cfg,
                    log_std,
                    actions,
                    old_log_probs,
                    advantages,
                    &mut pi.out,
                    d_log_std,
                );
                std::mem::swap(&mut pi.dz, &mut pi.out);
                pi.backward(&net.pi, net.activation, params, obs, b);
                side
            },
            || {
                vf.forward(&net.vf, net.activation, params, obs, b);
                let loss = value_loss(cfg, old_values, returns, &mut vf.out);
                std::mem::swap(&mut vf.dz, &mut vf.out);
                vf.backward(&net.vf, net.activation, params, obs, b);
                loss
            },
        );
        // The entropy does not depend on the state: ∂H/∂log σ = 1.
        let entropy = log_std.iter().sum::<f32>() + a as f32 * (0.5 + LN_SQRT_2PI);
        for g in d_log_std.iter_mut() {
            *g -= cfg.ent_coef;
        }
        let grad_sq = self
            .gradient(net)
            .iter()
            .map(|(_, g)| g.iter().map(|g| g * g).sum::<f32>())
            .sum::<f32>();
        let loss = policy.loss + value_loss * cfg.vf_coef - entropy * cfg.ent_coef;
        [
            loss,
            policy.loss,
            value_loss,
            entropy,
            policy.approx_kl,
            policy.clipfrac,
            grad_sq,
        ]
    }
}

impl HostWork {
    /// The last minibatch's gradient as `(offset in the flat buffer, values)` pieces that
    /// cover every parameter once (no flat copy: for large networks it would be one more
    /// gradient's worth of memory).
    pub fn gradient(&self, net: &HostNet) -> Vec<(usize, &[f32])> {
        let mut out = Vec::with_capacity(2 * (net.pi.len() + net.vf.len()) + 1);
        self.pi.segments(&net.pi, &mut out);
        self.vf.segments(&net.vf, &mut out);
        out.push((net.log_std, &self.d_log_std[..]));
        out
    }
}

/// `out` = the rows `idx` of `src` (rows of `width`).
fn gather(out: &mut Vec<f32>, src: &[f32], idx: &[usize], width: usize) {
    out.clear();
    for &i in idx {
        out.extend_from_slice(&src[i * width..(i + 1) * width]);
    }
}

/// `(x − mean) / (std + 1e-8)` with the unbiased std, as torch's `adv.std()` in SB3.
fn normalise(x: &mut [f32]) {
    let n = x.len() as f32;
    let mean = x.iter().sum::<f32>() / n;
    for v in x.iter_mut() {
        *v -= mean;
    }
    let std = (x.iter().map(|v| v * v).sum::<f32>() / (n - 1.0)).sqrt();
    let denom = std + 1e-8;
    for v in x.iter_mut() {
        *v /= denom;
    }
}

/// SB3's clipped surrogate of the minibatch whose action means are `mean` (`[B, A]`): the
/// diagnostics, `mean` replaced by `∂L/∂mean` and `d_log_std` set to the surrogate's `∂/∂log σ`.
fn policy_loss(
    cfg: &PpoConfig,
    log_std: &[f32],
    actions: &[f32],
    old_log_probs: &[f32],
    advantages: &[f32],
    mean: &mut [f32],
    d_log_std: &mut Vec<f32>,
) -> PolicySide {
    let a = log_std.len();
    let b = old_log_probs.len();
    let inv_b = 1.0 / b as f32;
    let c = cfg.clip_range;
    d_log_std.clear();
    d_log_std.resize(a, 0.0);
    let std: Vec<f32> = log_std.iter().map(|l| l.exp()).collect();
    let mut side = PolicySide::default();
    let mut z = vec![0.0f32; a];
    for (((mu, act), &old), &adv) in mean
        .chunks_exact_mut(a)
        .zip(actions.chunks_exact(a))
        .zip(old_log_probs)
        .zip(advantages)
    {
        let mut logp = 0.0f32;
        for j in 0..a {
            z[j] = (act[j] - mu[j]) / std[j];
            logp += z[j] * z[j] * -0.5 - log_std[j];
        }
        let logp = logp - a as f32 * LN_SQRT_2PI;
        let log_ratio = logp - old;
        let ratio = log_ratio.exp();
        let surrogate = -adv * ratio;
        let clipped = -adv * ratio.clamp(1.0 - c, 1.0 + c);
        side.loss += surrogate.max(clipped);
        side.approx_kl += (ratio - 1.0) - log_ratio;
        if (ratio - 1.0).abs() > c {
            side.clipfrac += 1.0;
        }
        // The max's gradient reaches the ratio through the unclipped term; where the clipped
        // one is larger the ratio is outside the range and clip's gradient is 0.
        let d_ratio = if surrogate >= clipped {
            -adv * inv_b
        } else {
            0.0
        };
        let d_logp = d_ratio * ratio;
        for j in 0..a {
            mu[j] = d_logp * z[j] / std[j];
            d_log_std[j] += d_logp * (z[j] * z[j] - 1.0);
        }
    }
    side.loss *= inv_b;
    side.approx_kl *= inv_b;
    side.clipfrac *= inv_b;
    side
}

/// The value loss of the minibatch whose values are `value` (`[B, 1]`), `value` replaced by
/// `vf_coef · ∂L_v/∂V`.
fn value_loss(cfg: &PpoConfig, old_values: &[f32], returns: &[f32], value: &mut [f32]) -> f32 {
    let inv_b = 1.0 / value.len() as f32;
    let mut loss = 0.0f32;
    for ((v, &old), &ret) in value.iter_mut().zip(old_values).zip(returns) {
        let (predicted, inside) = match cfg.clip_range_vf {
            Some(cv) => {
                let delta = *v - old;
                (old + delta.clamp(-cv, cv), (-cv..=cv).contains(&delta))
            }
            None => (*v, true),
        };
        let diff = ret - predicted;
        loss += diff * diff;
        *v = if inside {
            cfg.vf_coef * -2.0 * diff * inv_b
        } else {
            0.0
        };
    }
    loss * inv_b
}

/// Adam's state on the host: the parameters and both moments, flat, in the layout of
/// [`crate::ppo::update`]'s flat Adam.
#[derive(Debug, Clone, Default)]
pub(crate) struct HostAdamState {
    pub params: Vec<f32>,
    pub m1: Vec<f32>,
    pub m2: Vec<f32>,
}

impl HostAdamState {
    /// burn's Adam (as [`crate::ppo::update`]'s flat Adam) on the pieces of `grad` (see
    /// [`HostWork::gradient`]): each gradient times `factor`, then the moments and the
    /// parameters, element by element in the same order of operations.
    pub fn step(
        &mut self,
        grad: &[(usize, &[f32])],
        factor: Option<f32>,
        (beta_1, beta_2, epsilon): (f32, f32, f32),
        time: usize,
        lr: f32,
    ) {
        let t = time as i32;
        let bias_correction2_sqrt = (1.0 - beta_2.powi(t)).sqrt();
        let combined_factor = bias_correction2_sqrt / (1.0 - beta_1.powi(t));
        let eps = epsilon * bias_correction2_sqrt;
        let (c1, c2) = (1.0 - beta_1, 1.0 - beta_2);
        for &(offset, g) in grad {
            let range = offset..offset + g.len();
            let params = &mut self.params[range.clone()];
            let m1 = &mut self.m1[range.clone()];
            let m2 = &mut self.m2[range];
            for (((p, m1), m2), &g) in params.iter_mut().zip(m1).zip(m2).zip(g) {
                let g = match factor {
                    Some(f) => g * f,
                    None => g,
                };
                *m1 = *m1 * beta_1 + g * c1;
                *m2 = *m2 * beta_2 + g * g * c2;
                let delta = *m1 * combined_factor / (m2.sqrt() + eps);
                *p -= delta * lr;
            }
        }
    }
}
