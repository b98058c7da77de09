//! The CubeCL code of [`super`]'s two kernels: the minibatch's loss and its gradient (one cube)
//! and the update's tally (one thread).

use cubecl::prelude::*;
use tradetune_env::tensor::cube_io::{cur, get, put};

/// `ln √(2π)`, as in [`crate::ppo::model::gaussian_log_prob`].
const LN_SQRT_2PI: f32 = 0.918_938_5;

/// The sum of `acc[0..units]` (a power of two), in every unit; `acc` is garbage after.
#[cube]
fn cube_sum(acc: &mut Shared<[f32]>, unit: usize, #[comptime] units: usize) -> f32 {
    sync_cube();
    let mut active = units.runtime();
    while active > 1 {
        active /= 2;
        if unit < active {
            let other = acc[unit + active];
            acc[unit] += other;
        }
        sync_cube();
    }
    let total = acc[0];
    sync_cube();
    total
}

/// `(a − μ)/σ` of sample `i`'s action `j`, μ the head's output `r` plus its bias (at `mb`
/// in `params`, log σ at `ls`), added in the compute dtype as the tensor program does.
#[cube]
fn z_of<F: Float, R: Float>(
    actions: &Tensor<R>,
    mean: &Tensor<F>,
    params: &Tensor<R>,
    mb: usize,
    ls: usize,
    i: usize,
    r: usize,
    j: usize,
) -> f32 {
    let a = actions.shape(1);
    let mu = f32::cast_from(mean[r * a + j] + F::cast_from(params[mb + j]));
    (get(actions, i * a + j) - mu) / get(params, ls + j).exp()
}

#[cube(launch)]
pub(super) fn ppo_loss_kernel<F: Float, R: Float, I: Numeric>(
    idx: &Tensor<I>,
    actions: &Tensor<R>,
    old_log_probs: &Tensor<R>,
    old_values: &Tensor<R>,
    advantages: &Tensor<R>,
    returns: &Tensor<R>,
    mean: &Tensor<F>,
    value: &Tensor<F>,
    params: &Tensor<R>,
    scale: &Tensor<R>,
    d_mean: &mut Tensor<F>,
    d_value: &mut Tensor<F>,
    g_log_std: &mut Tensor<R>,
    g_mean_bias: &mut Tensor<R>,
    g_value_bias: &mut Tensor<R>,
    losses: &mut Tensor<R>,
    columns: &mut Tensor<R>,
    clip: f32,
    clip_vf: f32,
    vf_coef: f32,
    ent_coef: f32,
    normalize: u32,
    mean_bias_at: u32,
    value_bias_at: u32,
    log_std_at: u32,
    #[comptime] units: usize,
    #[define(F, R, I)] _dtypes: [ElemType; 3],
) {
    let unit = UNIT_POS_X as usize;
    let b = idx.len();
    let a = actions.shape(1);
    let mb = mean_bias_at as usize;
    let ls = log_std_at as usize;
    let nc = 2 * a + 5;
    let bf = f32::cast_from(b);
    let mut acc = Shared::<[f32]>::new_slice(units);

    // The advantages' mean and unbiased std over the minibatch (SB3's `adv.std()`).
    let mut s = 0.0f32;
    let mut r = unit;
    while r < b {
        s += get(advantages, usize::cast_from(idx[r]));
        r += units;
    }
    acc[unit] = s;
    let adv_mean = cube_sum(&mut acc, unit, units) / bf;
    let mut s2 = 0.0f32;
    r = unit;
    while r < b {
        let c = get(advantages, usize::cast_from(idx[r])) - adv_mean;
        s2 += c * c;
        r += units;
    }
    acc[unit] = s2;
    let dof = f32::cast_from(b.max(2) - 1);
    let adv_std = (cube_sum(&mut acc, unit, units) / dof).sqrt();

    let s_loss = get(scale, 0);
    let per_sample = s_loss / bf;
    let a_ln = f32::cast_from(a) * LN_SQRT_2PI;
    let value_bias_f = F::cast_from(params[value_bias_at as usize]);
    r = unit;
    while r < b {
        let i = usize::cast_from(idx[r]);
        // logp = Σ_j −½z² − log σ_j − A·ln√(2π).
        let mut logp = 0.0f32;
        for j in 0..a {
            let z = z_of(actions, mean, params, mb, ls, i, r, j);
            logp += z * z * -0.5f32 - get(params, ls + j);
        }
        let log_ratio = (logp - a_ln) - get(old_log_probs, i);
        let ratio = log_ratio.exp();
        let mut adv = get(advantages, i);
        if normalize == 1u32 {
            adv = (adv - adv_mean) / (adv_std + 1e-8f32);
        }
        let surrogate = -adv * ratio;
        let clipped = -adv * ratio.clamp(1.0f32 - clip, 1.0f32 + clip);
        // The max's gradient reaches the ratio through the unclipped term only.
        let mut policy = surrogate;
        let mut d_logp = -adv * ratio * per_sample;
        if clipped > surrogate {
            policy = clipped;
            d_logp = 0.0f32;
        }
        let kl = (ratio - 1.0f32) - log_ratio;
        let mut clipped_out = 0.0f32;
        if (ratio - 1.0f32).abs() > clip {
            clipped_out = 1.0f32;
        }
        // Column c of row r at c·B + r: a column's rows are contiguous for its sum.
        for j in 0..a {
            let z = z_of(actions, mean, params, mb, ls, i, r, j);
            let dm = d_logp * z / get(params, ls + j).exp();
            put(d_mean, r * a + j, dm);
            put(columns, (4 + j) * b + r, d_logp * (z * z - 1.0f32));
            put(columns, (4 + a + j) * b + r, dm);
        }
        let v = f32::cast_from(value[r] + value_bias_f);
        let old_v = get(old_values, i);
        let mut v_pred = v;
        let mut inside = true;
        if clip_vf >= 0.0f32 {
            // clamp passes the gradient within [−ε, ε], bounds included.
            let delta = v - old_v;
            inside = delta.abs() <= clip_vf;
            v_pred = old_v + delta.clamp(-clip_vf, clip_vf);
        }
        let diff = get(returns, i) - v_pred;
        let mut dv = diff * per_sample * (-2.0f32 * vf_coef);
        if !inside {
            dv = 0.0f32;
        }
        put(d_value, r, dv);
        put(columns, r, policy);
        put(columns, b + r, diff * diff);
        put(columns, 2 * b + r, kl);
        put(columns, 3 * b + r, clipped_out);
        put(columns, (4 + 2 * a) * b + r, dv);
        r += units;
    }
    sync_storage();

    // Each column summed by the whole cube: every unit its share of the rows (reads
    // side by side), then the cube's tree (one column a unit would read serially).
    let mut policy_sum = 0.0f32;
    let mut value_sum = 0.0f32;
    let mut kl_sum = 0.0f32;
    let mut clip_sum = 0.0f32;
    for c in 0..nc {
        let mut s = 0.0f32;
        let mut q = unit;
        while q < b {
            s += cur(columns, c * b + q);
            q += units;
        }
        acc[unit] = s;
        let sum = cube_sum(&mut acc, unit, units);
        if c == 0 {
            policy_sum = sum;
        } else if c == 1 {
            value_sum = sum;
        } else if c == 2 {
            kl_sum = sum;
        } else if c == 3 {
            clip_sum = sum;
        } else if unit == 0 {
            if c < 4 + a {
                put(g_log_std, c - 4, sum - s_loss * ent_coef);
            } else if c < 4 + 2 * a {
                put(g_mean_bias, c - 4 - a, sum);
            } else {
                put(g_value_bias, 0, sum);
            }
        }
    }
    if unit == 0 {
        let mut entropy = 0.0f32;
        for j in 0..a {
            entropy += get(params, ls + j);
        }
        entropy += f32::cast_from(a) * (0.5f32 + LN_SQRT_2PI);
        let policy = policy_sum / bf;
        let value_loss = value_sum / bf;
        put(
            losses,
            0,
            policy + value_loss * vf_coef - entropy * ent_coef,
        );
        put(losses, 1, policy);
        put(losses, 2, value_loss);
        put(losses, 3, entropy);
        put(losses, 4, kl_sum / bf);
        put(losses, 5, clip_sum / bf);
    }
}

#[cube(launch)]
pub(super) fn ppo_tally_kernel<R: Float>(
    losses: &Tensor<R>,
    grad_sq: &Tensor<R>,
    scale: &Tensor<R>,
    clean: &Tensor<R>,
    sums: &Tensor<R>,
    factor: &mut Tensor<R>,
    gate: &mut Tensor<R>,
    scale_out: &mut Tensor<R>,
    clean_out: &mut Tensor<R>,
    sums_out: &mut Tensor<R>,
    max_norm: f32,
    scaling: u32,
    interval: f32,
    min_scale: f32,
    max_scale: f32,
    #[define(R)] _dtype: ElemType,
) {
    if ABSOLUTE_POS > 0 {
        terminate!();
    }
    let s = get(scale, 0);
    // The norm of the unscaled gradients; its finiteness and the loss's (bit tests: a
    // shader compiler that assumes finite numbers folds x − x == 0 to true).
    let norm = get(grad_sq, 0).sqrt() / s;
    let probe = get(losses, 0) + norm;
    let finite = !(probe.is_nan() || probe.is_inf());
    let mut f = 1.0f32 / s;
    if max_norm > 0.0f32 {
        // min(1, max / (‖g‖ + 1e-6)), as torch's `clip_grad_norm_`.
        f *= ((1.0f32 / (norm + 1e-6f32)) * max_norm).min(1.0f32);
    }
    put(factor, 0, f);
    let mut counts = true;
    if scaling == 1u32 {
        // Clean steps in a row; the scale halves on an overflow and doubles after
        // `interval` clean steps, within its bounds.
        let mut counted = 0.0f32;
        if finite {
            counted = get(clean, 0) + 1.0f32;
        }
        let grow = counted >= interval;
        let mut next = (s * 0.5f32).max(min_scale);
        if finite {
            next = s;
            if grow {
                next = (s * 2.0f32).min(max_scale);
            }
        }
        put(scale_out, 0, next);
        if grow {
            counted = 0.0f32;
        }
        put(clean_out, 0, counted);
        let mut g = 0.0f32;
        if finite {
            g = 1.0f32;
        }
        put(gate, 0, g);
        counts = finite;
    } else {
        put(scale_out, 0, s);
        put(clean_out, 0, get(clean, 0));
        put(gate, 0, 1.0f32);
    }
    // [loss, policy, value, entropy, approx_kl, clipfrac, norm] of the steps taken, and
    // the non-finite minibatches.
    for k in 0..6 {
        let mut v = get(sums, k);
        if counts {
            v += get(losses, k);
        }
        put(sums_out, k, v);
    }
    let mut n = get(sums, 6);
    if counts {
        n += norm;
    }
    put(sums_out, 6, n);
    let mut bad = get(sums, 7);
    if !finite {
        bad += 1.0f32;
    }
    put(sums_out, 7, bad);
}
