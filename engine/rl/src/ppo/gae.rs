//! Generalised advantage estimation (Schulman et al. 2016, arXiv:1506.02438, eq. 16).
//!
//! [`compute_gae`] is the reference, on the host. The trainer computes GAE on the rollout's
//! device, so the rollout is never read back for it: in one kernel where TradeTune's kernels
//! run (`gae_kernel`: one unit per env walks its rollout backwards), else with
//! [`compute_gae_device`], which solves the backwards recurrence in blocks of [`GAE_BLOCK`]
//! steps (inside a block, a triangular weighting of the TD errors; across blocks, one carry
//! per block), a few dozen kernels instead of a loop of `n_steps` tiny ones.

use burn::tensor::{Tensor, TensorData};

/// Steps per block of [`compute_gae_device`]: its scratch is `n_steps × n_envs × GAE_BLOCK`
/// floats, and the carry loop runs `n_steps / GAE_BLOCK` times.
pub const GAE_BLOCK: usize = 32;

/// [`compute_gae`] on the device: `rewards`, `values` and `dones` are `[T, N]` (time
/// outermost), `last_values` `[N]`. Returns advantages and returns, `[T, N]`; nothing is read
/// back.
///
/// With `c_t = γλ(1 − done_t)` the recurrence `A_t = δ_t + c_t·A_{t+1}` (`A_T = 0`) has the
/// solution `A_t = Σ_{s≥t} (Π_{t≤j<s} c_j)·δ_s`. Inside a block the product is `(γλ)^{s−t}`
/// when no episode ends in `t..s` (equal exclusive done-counts at `t` and `s`) and 0 otherwise;
/// the block's first advantage carries into the block before it. `T` is padded to whole blocks
/// with zero TD errors, which leaves `A_T = 0`.
pub fn compute_gae_device(
    rewards: Tensor<2>,
    values: Tensor<2>,
    dones: Tensor<2>,
    last_values: Tensor<1>,
    gamma: f32,
    gae_lambda: f32,
) -> (Tensor<2>, Tensor<2>) {
    let [t, n] = rewards.dims();
    let device = rewards.device();
    let not_done = dones.clone().neg().add_scalar(1.0);
    let last = last_values.unsqueeze_dim::<2>(0);
    let next_values = if t > 1 {
        Tensor::cat(vec![values.clone().slice([1..t, 0..n]), last], 0)
    } else {
        last
    };
    let delta = rewards
        .add(next_values.mul(not_done).mul_scalar(gamma))
        .sub(values.clone());

    let b = GAE_BLOCK.min(t.max(1));
    let k = t.div_ceil(b);
    let pad = k * b - t;
    let (delta, dones) = if pad > 0 {
        (
            Tensor::cat(vec![delta, Tensor::zeros([pad, n], &device)], 0),
            Tensor::cat(vec![dones, Tensor::ones([pad, n], &device)], 0),
        )
    } else {
        (delta, dones)
    };
    let delta = delta.reshape([k, b, n]);
    let dones = dones.reshape([k, b, n]);
    // Exclusive count of episode ends before each step of its block, and the block's total.
    let before = dones.clone().cumsum(1).sub(dones.clone());
    let total = dones.sum_dim(1); // [k, 1, n]
    let gl = gamma * gae_lambda;
    // (γλ)^{s−t} for s ≥ t, else 0: `[1, b(t), b(s), 1]`.
    let mut w = vec![0f32; b * b];
    for i in 0..b {
        for j in i..b {
            w[i * b + j] = gl.powi((j - i) as i32);
        }
    }
    let w = Tensor::<4>::from_data(TensorData::new(w, [1, b, b, 1]), &device);
    let same = before
        .clone()
        .unsqueeze_dim::<4>(1) // [k, 1, b(s), n]
        .sub(before.clone().unsqueeze_dim::<4>(2)) // [k, b(t), 1, n]
        .abs()
        .lower_elem(0.5)
        .float();
    let local = same
        .mul(w)
        .mul(delta.unsqueeze_dim::<4>(1))
        .sum_dim(2)
        .reshape([k, b, n]);
    // Π_{t≤j<b} c_j: (γλ)^{b−t} when no episode ends from t to the block's end.
    let powers: Vec<f32> = (0..b).map(|i| gl.powi((b - i) as i32)).collect();
    let powers = Tensor::<3>::from_data(TensorData::new(powers, [1, b, 1]), &device);
    let to_end = total.sub(before).abs().lower_elem(0.5).float().mul(powers); // [k, b, n]
    // The first advantage of each block, from the last block backwards.
    let first_local = local.clone().slice([0..k, 0..1, 0..n]).reshape([k, n]);
    let first_to_end = to_end.clone().slice([0..k, 0..1, 0..n]).reshape([k, n]);
    let mut next = Tensor::<1>::zeros([n], &device);
    let mut carries = vec![next.clone(); k];
    for j in (0..k).rev() {
        carries[j] = next.clone();
        let row = |x: &Tensor<2>| x.clone().slice([j..j + 1, 0..n]).reshape([n]);
        next = row(&first_local).add(row(&first_to_end).mul(next));
    }
    let carry = Tensor::stack::<2>(carries, 0).unsqueeze_dim::<3>(1); // [k, 1, n]
    let adv = local
        .add(to_end.mul(carry))
        .reshape([k * b, n])
        .slice([0..t, 0..n]);
    let returns = adv.clone().add(values);
    (adv, returns)
}

/// Advantages and returns (`advantage + value`, the value target) for a rollout.
///
/// All slices are `n_steps × n_envs`, time outermost. `dones[t·N + i]` is 1 when env `i`'s
/// episode ended with the step at time `t` (the env auto-reset, so `values[(t+1)·N + i]`
/// belongs to a new episode and is not bootstrapped from). `last_values` are the values of the
/// observations after the last step.
///
/// δ_t = r_t + γ·V(s_{t+1})·(1 − done_t) − V(s_t);  A_t = δ_t + γλ·(1 − done_t)·A_{t+1}.
///
/// An episode cut by the env's time limit is treated as terminal: the trading env does not
/// return the observation before its auto-reset, so there is nothing to bootstrap from (SB3
/// bootstraps only when the env reports `TimeLimit.truncated` with a terminal observation).
pub fn compute_gae(
    rewards: &[f32],
    values: &[f32],
    dones: &[f32],
    last_values: &[f32],
    gamma: f32,
    gae_lambda: f32,
) -> (Vec<f32>, Vec<f32>) {
    let n_envs = last_values.len();
    let n = rewards.len();
    debug_assert!(n_envs > 0 && n.is_multiple_of(n_envs));
    debug_assert_eq!(values.len(), n);
    debug_assert_eq!(dones.len(), n);
    let n_steps = n / n_envs;
    let mut adv = vec![0f32; n];
    let mut next_adv = vec![0f32; n_envs];
    for t in (0..n_steps).rev() {
        for i in 0..n_envs {
            let k = t * n_envs + i;
            let next_value = if t + 1 == n_steps {
                last_values[i]
            } else {
                values[k + n_envs]
            };
            let not_done = 1.0 - dones[k];
            let delta = rewards[k] + gamma * next_value * not_done - values[k];
            let a = delta + gamma * gae_lambda * not_done * next_adv[i];
            adv[k] = a;
            next_adv[i] = a;
        }
    }
    let returns = adv.iter().zip(values).map(|(a, v)| a + v).collect();
    (adv, returns)
}

/// 1 − Var(y − ŷ)/Var(y): how much of the returns' variance the value function explains
/// (1 = perfect, 0 = no better than a constant; NaN when the returns are constant, as SB3's
/// `explained_variance`).
pub fn explained_variance(predicted: &[f32], target: &[f32]) -> f32 {
    let var = |x: &mut dyn Iterator<Item = f64>, n: usize| {
        let v: Vec<f64> = x.collect();
        let mean = v.iter().sum::<f64>() / n as f64;
        v.iter().map(|a| (a - mean).powi(2)).sum::<f64>() / n as f64
    };
    let n = target.len();
    if n == 0 {
        return f32::NAN;
    }
    let var_y = var(&mut target.iter().map(|&y| y as f64), n);
    if var_y == 0.0 {
        return f32::NAN;
    }
    let var_res = var(
        &mut target.iter().zip(predicted).map(|(&y, &p)| (y - p) as f64),
        n,
    );
    (1.0 - var_res / var_y) as f32
}

/// Values per group of a rollout's [`Spread`].
pub const SPREAD: usize = 5;

/// What the trainer reads back of a rollout's advantages, with its update's statistics and in
/// the same read: groups of [`SPREAD`] values, each over as many samples as the others (an
/// env's steps from the GAE kernel; the whole rollout, one group, from the tensor program):
/// how many advantages are not finite, then the mean and population variance of the returns,
/// then of the advantages. Pooled here, on the host, from a few values per env: on the device
/// the count and the two variances were eight launches an update.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    /// How many advantages are not finite.
    pub non_finite: f32,
    /// The returns' population variance.
    pub var_returns: f64,
    /// The advantages' population variance (the returns less the values).
    pub var_advantages: f64,
}

impl Spread {
    /// Pools `groups` (see [`Spread`]); `None` where it is not whole groups.
    pub fn of(groups: &[f32]) -> Option<Spread> {
        if groups.is_empty() || !groups.len().is_multiple_of(SPREAD) {
            return None;
        }
        let each = || groups.chunks_exact(SPREAD);
        let n = (groups.len() / SPREAD) as f64;
        // Equal groups: the pooled variance is the groups' mean variance plus the variance of
        // their means.
        let pooled = |mean_at: usize| {
            let mean = each().map(|g| g[mean_at] as f64).sum::<f64>() / n;
            each()
                .map(|g| g[mean_at + 1] as f64 + (g[mean_at] as f64 - mean).powi(2))
                .sum::<f64>()
                / n
        };
        Some(Spread {
            non_finite: each().map(|g| g[0]).sum(),
            var_returns: pooled(1),
            var_advantages: pooled(3),
        })
    }

    /// 1 − Var(advantages)/Var(returns), as [`explained_variance`] of the values and returns
    /// (NaN where the returns do not vary, or a variance is not finite).
    pub fn explained_variance(&self) -> f32 {
        if self.var_returns > 0.0 && self.var_returns.is_finite() && self.var_advantages.is_finite()
        {
            (1.0 - self.var_advantages / self.var_returns) as f32
        } else {
            f32::NAN
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Per-group means and variances pool to the whole rollout's, and the explained variance
    /// they give is [`explained_variance`]'s of the values and returns.
    #[test]
    fn a_spread_pools_its_groups() {
        let (t, n) = (7, 3);
        let returns: Vec<f32> = (0..t * n)
            .map(|i| ((i * 37) % 11) as f32 * 0.3 - 1.0)
            .collect();
        let values: Vec<f32> = (0..t * n).map(|i| ((i * 13) % 5) as f32 * 0.2).collect();
        let adv: Vec<f32> = returns.iter().zip(&values).map(|(r, v)| r - v).collect();
        let mean_var = |x: &[f64]| {
            let m = x.iter().sum::<f64>() / x.len() as f64;
            (
                m,
                x.iter().map(|a| (a - m).powi(2)).sum::<f64>() / x.len() as f64,
            )
        };
        // [T, N], time outermost: env i's steps are i, i + N, …
        let mut groups = Vec::new();
        for i in 0..n {
            let col = |x: &[f32]| (0..t).map(|s| x[s * n + i] as f64).collect::<Vec<_>>();
            let (mr, vr) = mean_var(&col(&returns));
            let (ma, va) = mean_var(&col(&adv));
            let bad = if i == 1 { 2.0 } else { 0.0 };
            groups.extend([bad, mr as f32, vr as f32, ma as f32, va as f32]);
        }
        let spread = Spread::of(&groups).unwrap();
        let all = |x: &[f32]| x.iter().map(|&a| a as f64).collect::<Vec<_>>();
        assert!((spread.var_returns - mean_var(&all(&returns)).1).abs() < 1e-5);
        assert!((spread.var_advantages - mean_var(&all(&adv)).1).abs() < 1e-5);
        assert_eq!(spread.non_finite, 2.0);
        let want = explained_variance(&values, &returns);
        assert!((spread.explained_variance() - want).abs() < 1e-5, "{want}");
        // Constant returns explain nothing; a short read is no spread.
        assert!(
            Spread::of(&[0.0, 1.0, 0.0, 1.0, 0.0])
                .unwrap()
                .explained_variance()
                .is_nan()
        );
        assert_eq!(Spread::of(&groups[..7]), None);
        assert_eq!(Spread::of(&[]), None);
    }

    /// One env, three steps, worked by hand with γ = 0.9, λ = 0.5:
    /// r = [1, 0, 2], V = [0.5, 1, 1.5], done = [0, 1, 0], V(s_3) = 2.
    /// δ_2 = 2 + 0.9·2 − 1.5 = 2.3;                    A_2 = 2.3
    /// δ_1 = 0 + 0 − 1 = −1 (episode ended);           A_1 = −1
    /// δ_0 = 1 + 0.9·1 − 0.5 = 1.4;                    A_0 = 1.4 + 0.45·(−1) = 0.95
    #[test]
    fn matches_hand_computed_example() {
        let (adv, ret) = compute_gae(
            &[1.0, 0.0, 2.0],
            &[0.5, 1.0, 1.5],
            &[0.0, 1.0, 0.0],
            &[2.0],
            0.9,
            0.5,
        );
        let want = [0.95, -1.0, 2.3];
        for (a, w) in adv.iter().zip(want) {
            assert!((a - w).abs() < 1e-6, "{adv:?}");
        }
        assert!((ret[0] - 1.45).abs() < 1e-6 && (ret[1] - 0.0).abs() < 1e-6);
    }

    #[test]
    fn envs_are_independent_and_interleaved() {
        // Two envs, time outermost: env 0 gets rewards [1, 1], env 1 gets [0, 0].
        let (adv, _) = compute_gae(
            &[1.0, 0.0, 1.0, 0.0],
            &[0.0; 4],
            &[0.0; 4],
            &[0.0, 0.0],
            1.0,
            1.0,
        );
        assert_eq!(adv, vec![2.0, 0.0, 1.0, 0.0]);
    }

    #[test]
    fn lambda_one_gives_discounted_returns_minus_values() {
        let (adv, ret) = compute_gae(&[1.0, 1.0], &[0.3, 0.2], &[0.0, 0.0], &[0.0], 0.5, 1.0);
        assert!((ret[0] - 1.5).abs() < 1e-6 && (ret[1] - 1.0).abs() < 1e-6);
        assert!((adv[0] - 1.2).abs() < 1e-6);
    }

    /// The device version agrees with the host reference on random rollouts with episode
    /// ends anywhere, for lengths that are and are not whole blocks.
    #[test]
    fn device_gae_matches_the_host_reference() {
        use burn::tensor::Device;
        use rand::{RngExt, SeedableRng};
        let device = Device::flex();
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        for (steps, n_envs) in [(1, 3), (5, 2), (32, 4), (77, 3), (128, 1)] {
            let len = steps * n_envs;
            let r: Vec<f32> = (0..len).map(|_| rng.random_range(-1.0f32..1.0)).collect();
            let v: Vec<f32> = (0..len).map(|_| rng.random_range(-2.0f32..2.0)).collect();
            let d: Vec<f32> = (0..len)
                .map(|_| {
                    if rng.random_range(0.0f32..1.0) < 0.1 {
                        1.0
                    } else {
                        0.0
                    }
                })
                .collect();
            let last: Vec<f32> = (0..n_envs)
                .map(|_| rng.random_range(-2.0f32..2.0))
                .collect();
            let (adv, ret) = compute_gae(&r, &v, &d, &last, 0.99, 0.95);
            let t2 = |x: &[f32]| {
                Tensor::<2>::from_data(TensorData::new(x.to_vec(), [steps, n_envs]), &device)
            };
            let (da, dr) = compute_gae_device(
                t2(&r),
                t2(&v),
                t2(&d),
                Tensor::from_data(TensorData::new(last.clone(), [n_envs]), &device),
                0.99,
                0.95,
            );
            let da: Vec<f32> = da.try_into_vec_as().unwrap();
            let dr: Vec<f32> = dr.try_into_vec_as().unwrap();
            for i in 0..len {
                assert!(
                    (da[i] - adv[i]).abs() < 1e-4 * adv[i].abs().max(1.0),
                    "T={steps} N={n_envs} sample {i}: {} vs {}",
                    da[i],
                    adv[i]
                );
                assert!((dr[i] - ret[i]).abs() < 1e-4 * ret[i].abs().max(1.0));
            }
        }
    }

    #[test]
    fn explained_variance_limits() {
        assert!((explained_variance(&[1.0, 2.0, 3.0], &[1.0, 2.0, 3.0]) - 1.0).abs() < 1e-6);
        assert!(explained_variance(&[2.0, 2.0, 2.0], &[1.0, 2.0, 3.0]).abs() < 1e-6);
        assert!(explained_variance(&[0.0, 0.0], &[1.0, 1.0]).is_nan());
    }
}
