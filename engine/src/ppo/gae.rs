//! Generalised advantage estimation (Schulman et al. 2016, arXiv:1506.02438, eq. 16), computed
//! on the host: the rollout's `n_steps × n_envs` rewards and values are a few KB, and a
//! backwards loop over time is a poor fit for tensor kernels.

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

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn explained_variance_limits() {
        assert!((explained_variance(&[1.0, 2.0, 3.0], &[1.0, 2.0, 3.0]) - 1.0).abs() < 1e-6);
        assert!(explained_variance(&[2.0, 2.0, 2.0], &[1.0, 2.0, 3.0]).abs() < 1e-6);
        assert!(explained_variance(&[0.0, 0.0], &[1.0, 1.0]).is_nan());
    }
}
