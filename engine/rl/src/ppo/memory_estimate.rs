//! [`PpoConfig::memory_estimate`]: what a PPO run needs on its device, from its configuration. It lives
//! beside the learner whose buffers it counts; [`tradetune_device::memory`] holds the estimate's
//! type and the budget that checks it, and imports nothing of PPO.

use crate::ppo::buffer::RolloutBuffer;
use crate::ppo::config::PpoConfig;
use tradetune_device::memory::MemoryEstimate;
use tradetune_device::precision::Precision;

impl PpoConfig {
    /// Estimates a run of this configuration on `n_envs` envs with the given observation and
    /// action sizes; `dataset_bytes` is the market data held on the device (0 when it stays on
    /// the host).
    pub fn memory_estimate(
        &self,
        n_envs: usize,
        obs_dim: usize,
        action_dim: usize,
        dataset_bytes: u64,
    ) -> MemoryEstimate {
        let cfg = self;
        let p = cfg.policy.n_params(obs_dim, action_dim) as u64;
        let half = cfg.precision != Precision::F32;
        let cb = cfg.precision.bytes() as u64;
        let b = cfg.batch_size as u64;
        // Per layer the graph keeps the layer's input (for ∂W) and the activation's derivative
        // (`fast_tanh` keeps 1 − y² as a constant), and the backward pass holds about one
        // gradient of that size at a time: ≈ 3 tensors of B × width per layer. Measured on the
        // CPU device (engine/tests/memory_measured.rs, a counting allocator): 2.4–2.5, so the
        // estimate stays on the safe side by 10–20 %. Half precision adds the f32 copies of the
        // network's outputs (cast back for the loss).
        let widths = |hidden: &[usize], out: usize| -> u64 {
            hidden.iter().map(|&h| h as u64).sum::<u64>() + out as u64
        };
        let arch = &cfg.policy.net_arch;
        let width_sum = widths(&arch.pi, action_dim) + widths(&arch.vf, 1);
        let mut activations = 3 * b * width_sum * cb + 2 * b * obs_dim as u64 * cb;
        if half {
            activations += 2 * b * (action_dim as u64 + 1) * 4;
        }
        // Saturating: a configuration too large to hold (which its validation refuses) is
        // estimated as too large, not wrapped to a small size.
        let samples = (cfg.n_steps as u64).saturating_mul(n_envs as u64);
        let rollout = RolloutBuffer::bytes(cfg.n_steps, n_envs, obs_dim, action_dim) as u64;
        let rollout = rollout
            .saturating_add(samples.saturating_mul(2 * 4))
            .saturating_add(b.saturating_mul((obs_dim + action_dim + 4) as u64 * 4));
        MemoryEstimate {
            params: 4 * p,
            optimizer_state: 8 * p,
            gradients: 4 * p + if half { cb * p } else { 0 },
            activations,
            rollout_buffer: rollout,
            dataset: dataset_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ppo::model::{ActorCriticConfig, NetArch};
    use tradetune_device::memory::MemoryBudget;

    #[test]
    fn estimate_counts_parameters_and_optimizer_state() {
        let cfg = PpoConfig::new().with_policy(
            ActorCriticConfig::new()
                .with_net_arch(NetArch::new().with_pi(vec![8]).with_vf(vec![8])),
        );
        let e = cfg.memory_estimate(1, 3, 2, 0);
        // pi: 3·8+8 + 8·2+2 = 50; vf: 3·8+8 + 8+1 = 41; log_std 2.
        assert_eq!(e.params, 4 * 93);
        assert_eq!(e.optimizer_state, 8 * 93);
        let bf = (cfg.clone().with_precision(Precision::Bf16)).memory_estimate(1, 3, 2, 0);
        assert!(bf.activations < e.activations && bf.gradients > e.gradients);
    }

    /// A rollout whose size overflows is estimated as huge (saturated), not wrapped to a small
    /// size that a budget would let through.
    #[test]
    fn an_overflowing_rollout_saturates_the_estimate() {
        let cfg = PpoConfig::new().with_n_steps(usize::MAX / 2);
        let e = cfg.memory_estimate(4, 10, 3, 0);
        assert_eq!(e.rollout_buffer, u64::MAX);
        assert_eq!(e.total(), u64::MAX);
        let budget = MemoryBudget::new(1 << 40, 0.8, 1).unwrap();
        assert!(budget.check(&e).is_err());
    }

    #[test]
    fn budget_refuses_with_breakdown() {
        let cfg = PpoConfig::new().with_policy(
            ActorCriticConfig::new().with_net_arch(
                NetArch::new()
                    .with_pi(vec![2048, 1024, 512])
                    .with_vf(vec![2048, 1024, 512]),
            ),
        );
        let e = cfg.memory_estimate(8, 100, 7, 1 << 20);
        let budget = MemoryBudget::new(64 << 20, 0.8, 2).unwrap();
        let err = budget.check(&e).unwrap_err().to_string();
        assert!(
            err.contains("optimizer state") && err.contains("shared by 2"),
            "{err}"
        );
        assert!(
            MemoryBudget::new(1 << 40, 0.8, 1)
                .unwrap()
                .check(&e)
                .is_ok()
        );
        assert!(MemoryBudget::new(1, 1.5, 1).is_err());
    }
}
