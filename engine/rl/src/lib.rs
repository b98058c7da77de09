//! Reinforcement learning: the PPO learner on burn ([`ppo`]) and deterministic evaluation of
//! a policy on a held-out split ([`eval`]).
//!
//! One crate for both: evaluation sits below the learner inside it (`eval` imports nothing of
//! `ppo`; `ppo` adapts its model to [`eval::Policy`]), and the trainer evaluates as it learns.

pub mod eval;
pub mod ppo;
