//! A continuous-control sanity environment with a known optimum, for learning tests and for
//! checking a build end to end without market data.
//!
//! Observations are `obs_dim` values drawn uniformly from [-1, 1]; the best action is the fixed
//! linear map `a* = clip(W·obs, ±1)`; the reward is `1 − mean_j (clip(a_j, ±1) − a*_j)²`, so
//! the optimum is exactly 1 per step and a policy that always outputs 0 earns `1 − E‖a*‖²/A`.
//! Episodes last `episode_len` steps (rewards do not depend on the future, but γ and λ still
//! shape the advantages, which the hyperparameter tests need).

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use tradetune_env::VecEnv;

/// N independent copies of the sanity task.
#[derive(Debug)]
pub struct TargetEnv {
    n_envs: usize,
    obs_dim: usize,
    action_dim: usize,
    episode_len: u32,
    /// `[action_dim × obs_dim]` row-major.
    weights: Vec<f32>,
    obs: Vec<f32>,
    steps: Vec<u32>,
    rng: StdRng,
}

impl TargetEnv {
    /// `n_envs` envs with 2 observations, 1 action and the map `a* = 0.9·x0 − 0.6·x1`.
    pub fn new(n_envs: usize, episode_len: u32, seed: u64) -> Self {
        Self::with_weights(n_envs, 2, vec![0.9, -0.6], episode_len, seed)
    }

    /// With an arbitrary `[action_dim × obs_dim]` map.
    pub fn with_weights(
        n_envs: usize,
        obs_dim: usize,
        weights: Vec<f32>,
        episode_len: u32,
        seed: u64,
    ) -> Self {
        let action_dim = weights.len() / obs_dim.max(1);
        Self {
            n_envs,
            obs_dim,
            action_dim,
            episode_len: episode_len.max(1),
            weights,
            obs: vec![0.0; n_envs * obs_dim],
            steps: vec![0; n_envs],
            rng: StdRng::seed_from_u64(seed),
        }
    }

    /// The optimal action for one observation.
    pub fn optimal_action(&self, obs: &[f32]) -> Vec<f32> {
        (0..self.action_dim)
            .map(|j| {
                let row = &self.weights[j * self.obs_dim..(j + 1) * self.obs_dim];
                row.iter()
                    .zip(obs)
                    .map(|(w, x)| w * x)
                    .sum::<f32>()
                    .clamp(-1.0, 1.0)
            })
            .collect()
    }

    /// The reward of `action` for `obs`.
    pub fn reward(&self, obs: &[f32], action: &[f32]) -> f32 {
        let best = self.optimal_action(obs);
        let err: f32 = action
            .iter()
            .zip(&best)
            .map(|(a, b)| (a.clamp(-1.0, 1.0) - b).powi(2))
            .sum();
        1.0 - err / self.action_dim as f32
    }

    fn draw(&mut self, env: usize) {
        let d = self.obs_dim;
        for x in &mut self.obs[env * d..(env + 1) * d] {
            *x = self.rng.random_range(-1.0f32..1.0);
        }
    }
}

impl VecEnv for TargetEnv {
    fn n_envs(&self) -> usize {
        self.n_envs
    }
    fn obs_dim(&self) -> usize {
        self.obs_dim
    }
    fn action_dim(&self) -> usize {
        self.action_dim
    }
    fn reset(&mut self, obs: &mut [f32]) {
        for i in 0..self.n_envs {
            self.draw(i);
            self.steps[i] = 0;
        }
        obs.copy_from_slice(&self.obs);
    }
    fn step(&mut self, actions: &[f32], obs: &mut [f32], rewards: &mut [f32], dones: &mut [f32]) {
        let (d, a) = (self.obs_dim, self.action_dim);
        for i in 0..self.n_envs {
            rewards[i] = self.reward(&self.obs[i * d..(i + 1) * d], &actions[i * a..(i + 1) * a]);
            self.steps[i] += 1;
            dones[i] = if self.steps[i] >= self.episode_len {
                self.steps[i] = 0;
                1.0
            } else {
                0.0
            };
            self.draw(i);
        }
        obs.copy_from_slice(&self.obs);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn optimum_earns_one() {
        let mut env = TargetEnv::new(3, 2, 0);
        let mut obs = vec![0.0; 6];
        env.reset(&mut obs);
        let actions: Vec<f32> = (0..3)
            .flat_map(|i| env.optimal_action(&obs[i * 2..i * 2 + 2]))
            .collect();
        let (mut r, mut d) = (vec![0.0; 3], vec![0.0; 3]);
        let mut next = vec![0.0; 6];
        env.step(&actions, &mut next, &mut r, &mut d);
        assert!(r.iter().all(|x| (x - 1.0).abs() < 1e-6), "{r:?}");
        assert_eq!(d, vec![0.0; 3]);
        env.step(&actions, &mut next, &mut r, &mut d);
        assert_eq!(d, vec![1.0; 3], "episode of 2 steps ends");
    }
}
