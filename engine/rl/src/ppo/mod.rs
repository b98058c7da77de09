//! PPO on burn: actor-critic model, rollout buffer, GAE, the update, the training loop,
//! checkpoints and the training benchmark.
//!
//! A run: [`trainer::Trainer::learn`] alternates a rollout of `n_steps × n_envs` samples
//! (policy inference without an autodiff graph, env steps, buffer writes) with an update
//! ([`update::Learner::update`]: `n_epochs` passes of shuffled minibatches, clipped surrogate +
//! value loss − entropy bonus, global-norm clipping, Adam), in the precision of
//! [`tradetune_device::precision`], reporting [`events::TrainEvent`]s.

pub mod accounting;
pub mod activation;
pub mod bench;
pub mod buffer;
pub mod checkpoint;
pub mod config;
pub mod error;
pub mod events;
pub mod gae;
#[cfg(feature = "wgpu")]
pub(crate) mod gae_kernel;
pub mod host_policy;
pub(crate) mod host_update;
pub mod memory_estimate;
pub mod model;
pub mod normalize;
pub mod policy;
pub mod rollout_env;
pub mod sanity_env;
pub mod trainer;
pub mod update;

pub use accounting::{DispatchProfile, KernelTimeProfile};
pub use config::{LrSchedule, PpoConfig};
pub use error::PpoError;
pub use events::{EpisodeSummary, PhaseTimes, TrainEvent};
pub use model::{ActivationKind, ActorCritic, ActorCriticConfig, NetArch};
pub use policy::{DeterministicPolicy, evaluate_policy, evaluate_policy_timed};
pub use rollout_env::{EpisodeLog, HostEnv, RolloutEnv};
pub use trainer::{PeriodicEval, TrainReport, Trainer, evaluate_trainer, replay_policy_from_env};
pub use update::UpdateStats;

use rand::SeedableRng;
use rand::rngs::StdRng;

/// The random stream `stream` of a run seeded `seed`, for its `index`-th rollout or update.
///
/// Each rollout's action noise and each update's minibatch order come from a generator keyed
/// by the run's seed and the number of that rollout, instead of one generator running through
/// the whole run: a run resumed from a checkpoint after `k` updates then draws what the
/// uninterrupted run would have drawn at update `k + 1`, rather than replaying update 1's
/// noise and minibatches. The key is mixed with SplitMix64's finaliser (Steele, Lea & Flood,
/// "Fast splittable pseudorandom number generators", OOPSLA 2014) so neighbouring indices give
/// unrelated seeds.
pub(crate) fn stream_rng(seed: u64, stream: u64, index: u64) -> StdRng {
    fn mix(mut z: u64) -> u64 {
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    let key = mix(mix(seed ^ stream.rotate_left(32)).wrapping_add(index));
    StdRng::seed_from_u64(key)
}

/// Stream numbers of [`stream_rng`].
pub(crate) const NOISE_STREAM: u64 = 0x0004_015E;
pub(crate) const SHUFFLE_STREAM: u64 = 0x0005_4FF1;

#[cfg(test)]
mod tests {
    use rand::Rng;

    use super::*;

    #[test]
    fn streams_are_keyed_by_seed_stream_and_index() {
        let first = |seed, stream, index| stream_rng(seed, stream, index).next_u64();
        assert_eq!(first(1, NOISE_STREAM, 5), first(1, NOISE_STREAM, 5));
        let mut seen = std::collections::HashSet::new();
        for seed in 0..4 {
            for stream in [NOISE_STREAM, SHUFFLE_STREAM] {
                for index in 0..64 {
                    assert!(
                        seen.insert(first(seed, stream, index)),
                        "{seed} {stream} {index}"
                    );
                }
            }
        }
    }
}
