//! One training run of a trial configuration, built one way for everything that trains
//! (`tradetune train`, `study speed`'s measurements, `study reseed`, a hold-out trial and each
//! fold of a cross-validated one): the environment placed where the configuration says, on
//! the host or on the device; the memory estimate ([`PpoTrialConfig::memory_estimate`]) checked
//! against the run's budget, when it has one; and the trainer on that environment, with the
//! budget to watch as it runs.

use std::ops::Range;
use std::sync::Arc;

use burn::tensor::{Device, Tensor};
use tradetune_device::is_cpu;
use tradetune_device::memory::{MemoryBudget, MemoryError, MemoryEstimate};
use tradetune_env::{CpuVecEnv, EnvError, EnvPlacement, ResolvedPlacement, TensorVecEnv};
use tradetune_market::Dataset;
use tradetune_rl::ppo::rollout_env::StepTensors;
use tradetune_rl::ppo::{EpisodeLog, HostEnv, PpoError, RolloutEnv, Trainer};

use super::placement::{self, AutoPlacement};
use super::{DataShape, PpoTrialConfig};

/// Why a training run could not be built: the environment refused its configuration or its
/// bars, the estimate does not fit the budget, or the trainer refused its configuration.
#[derive(Debug, thiserror::Error)]
pub enum TrainingRunError {
    #[error(transparent)]
    Env(#[from] EnvError),
    #[error(transparent)]
    Memory(#[from] MemoryError),
    #[error(transparent)]
    Ppo(#[from] PpoError),
}

/// A run's environment, on the host (stepped in Rust over host arrays, its tensors made on the
/// device) or on the device (the market data uploaded once; every step stays there).
pub enum PlacedEnv {
    Host(Box<HostEnv<CpuVecEnv>>),
    Device(Box<TensorVecEnv>),
}

impl PlacedEnv {
    fn env(&self) -> &dyn RolloutEnv {
        match self {
            PlacedEnv::Host(e) => e.as_ref(),
            PlacedEnv::Device(e) => e.as_ref(),
        }
    }
    fn env_mut(&mut self) -> &mut dyn RolloutEnv {
        match self {
            PlacedEnv::Host(e) => e.as_mut(),
            PlacedEnv::Device(e) => e.as_mut(),
        }
    }
}

/// Every call goes to the placed environment.
impl RolloutEnv for PlacedEnv {
    fn n_envs(&self) -> usize {
        self.env().n_envs()
    }
    fn obs_dim(&self) -> usize {
        self.env().obs_dim()
    }
    fn action_dim(&self) -> usize {
        self.env().action_dim()
    }
    fn reset(&mut self) -> Result<Tensor<2>, PpoError> {
        self.env_mut().reset()
    }
    fn begin_rollout(&mut self, steps: usize) {
        self.env_mut().begin_rollout(steps)
    }
    fn step(&mut self, actions: Tensor<2>) -> Result<StepTensors, PpoError> {
        self.env_mut().step(actions)
    }
    fn take_episodes(&mut self) -> EpisodeLog {
        self.env_mut().take_episodes()
    }
}

/// A trainer on its placed environment, ready to learn.
pub struct TrainingRun {
    /// The trainer, with the run's budget (if any) to check as it runs.
    pub trainer: Trainer<PlacedEnv>,
    /// Where the environment was placed.
    pub placement: ResolvedPlacement,
    /// `auto`'s measured decision, on a GPU.
    pub auto: Option<AutoPlacement>,
    /// What the run was estimated to need, checked against the budget before the trainer
    /// was built.
    pub estimate: MemoryEstimate,
}

impl TrainingRun {
    /// The placement as a trial records it (user attributes): `env_placement` (`device` or
    /// `host`) and, where `auto` measured, `env_placement_auto` (its decision in words).
    pub fn placement_attrs(&self) -> Vec<(&'static str, String)> {
        let mut out = vec![("env_placement", self.placement.name().to_owned())];
        if let Some(auto) = &self.auto {
            out.push(("env_placement_auto", auto.describe()));
        }
        out
    }

    /// Builds `cfg`'s environment over `bars` of `data` where its `env.placement` puts it
    /// (`auto`: the host on the CPU; on a GPU where a rollout step measured cheaper, see
    /// [`super::placement`]; the environment checks its configuration and bars first), refuses
    /// the run when its estimate does not fit `budget`, then builds the trainer on `device`,
    /// which watches `budget` as it runs. The schedule (`cfg.train`) is the caller's to follow.
    pub fn build(
        cfg: &PpoTrialConfig,
        data: &Arc<Dataset>,
        bars: Range<usize>,
        device: &Device,
        budget: Option<&MemoryBudget>,
    ) -> Result<TrainingRun, TrainingRunError> {
        let on_cpu = is_cpu(device);
        // A configuration the environment, the budget or the trainer would refuse is refused
        // before `auto` spends seconds measuring (and compiling) both placements for it.
        cfg.env.validate(DataShape::of(data).n_assets)?;
        cfg.ppo.validate(cfg.env.n_envs)?;
        // Refused before the measuring, and before the trainer allocates its networks and
        // buffers (the estimate is the configuration's, wherever `auto` then puts the env).
        let estimate = cfg.memory_estimate(DataShape::of(data), on_cpu);
        if let Some(budget) = budget {
            budget.check(&estimate)?;
        }
        let auto = match cfg.env.placement.unwrap_or_default() {
            EnvPlacement::Auto if !on_cpu => {
                Some(placement::auto(cfg, data, bars.clone(), device)?)
            }
            _ => None,
        };
        let placement = auto
            .as_ref()
            .map_or_else(|| cfg.env.placement_on(on_cpu), |a| a.placement);
        let env = match placement {
            ResolvedPlacement::Host => {
                let env = CpuVecEnv::new(cfg.env.clone(), data.clone(), bars)?;
                PlacedEnv::Host(Box::new(HostEnv::new(env, device)))
            }
            // The market data goes to the device once; every step stays there.
            ResolvedPlacement::Device => PlacedEnv::Device(Box::new(TensorVecEnv::new(
                cfg.env.clone(),
                data,
                bars,
                device,
            )?)),
        };
        let mut trainer = Trainer::new(cfg.ppo.clone(), env, device)?;
        if let Some(budget) = budget {
            trainer = trainer.with_memory_budget(budget.clone());
        }
        Ok(TrainingRun {
            trainer,
            placement,
            auto,
            estimate,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tradetune_env::bench::bench_dataset;
    use tradetune_rl::eval::{EvalSplit, Objective};
    use tradetune_rl::ppo::{ActorCriticConfig, NetArch, evaluate_trainer};

    const TRAIN: Range<usize> = 0..400;

    fn small() -> PpoTrialConfig {
        let mut c = PpoTrialConfig::default();
        c.env.n_envs = 2;
        c.env.episode_bars = 100;
        c.ppo.n_steps = 16;
        c.ppo.batch_size = 16;
        c.ppo.n_epochs = 1;
        c.ppo.policy = ActorCriticConfig::new()
            .with_net_arch(NetArch::new().with_pi(vec![8]).with_vf(vec![8]));
        c
    }

    /// The placed environment changes nothing of what the trainer learns: a built run and a
    /// trainer built by hand on the same host env, with the same seeds, end on the same policy.
    #[test]
    fn a_built_run_learns_what_a_trainer_on_its_env_learns() {
        let device = Device::flex();
        let data = bench_dataset(600, 3, 4, 1);
        let cfg = small();
        let mut built = TrainingRun::build(&cfg, &data, TRAIN, &device, None).unwrap();
        assert_eq!(built.placement, ResolvedPlacement::Host);
        let env = CpuVecEnv::new(cfg.env.clone(), data.clone(), TRAIN).unwrap();
        let mut by_hand =
            Trainer::new(cfg.ppo.clone(), HostEnv::new(env, &device), &device).unwrap();
        let samples = 2 * cfg.ppo.n_steps * cfg.env.n_envs;
        built.trainer.learn(samples, &mut |_| {}).unwrap();
        by_hand.learn(samples, &mut |_| {}).unwrap();
        let split = EvalSplit::new("validation", data.clone(), 400..600, &cfg.env);
        let a = evaluate_trainer(&built.trainer, &split, Objective::default()).unwrap();
        let b = evaluate_trainer(&by_hand, &split, Objective::default()).unwrap();
        assert!(a.agent_equity.len() > 1);
        assert_eq!(a.agent_equity, b.agent_equity);
    }

    /// The estimate is the configuration's on this data and placement; a budget it exceeds
    /// refuses the run, after the environment's own checks.
    #[test]
    fn a_run_is_placed_estimated_and_checked_against_its_budget() {
        let device = Device::flex();
        let data = bench_dataset(600, 3, 4, 1);
        let mut cfg = small();
        let host = TrainingRun::build(&cfg, &data, TRAIN, &device, None).unwrap();
        assert_eq!(
            host.estimate,
            cfg.memory_estimate(DataShape::of(&data), true)
        );
        assert!(matches!(host.trainer.env(), PlacedEnv::Host(_)));

        cfg.env.placement = Some(EnvPlacement::Device);
        let placed = TrainingRun::build(&cfg, &data, TRAIN, &device, None).unwrap();
        assert_eq!(placed.placement, ResolvedPlacement::Device);
        assert!(matches!(placed.trainer.env(), PlacedEnv::Device(_)));
        let data_bytes = DataShape::of(&data).device_bytes();
        assert_eq!(placed.estimate.total(), host.estimate.total() + data_bytes);

        let need = placed.estimate.total();
        let fits = MemoryBudget::new(need, 1.0, 1).unwrap();
        assert!(TrainingRun::build(&cfg, &data, TRAIN, &device, Some(&fits)).is_ok());
        let short = MemoryBudget::new(need - 1, 1.0, 1).unwrap();
        let refused = TrainingRun::build(&cfg, &data, TRAIN, &device, Some(&short)).err();
        assert!(
            matches!(refused, Some(TrainingRunError::Memory(_))),
            "{refused:?}"
        );
        cfg.env.n_envs = 0;
        let refused = TrainingRun::build(&cfg, &data, TRAIN, &device, Some(&short)).err();
        assert!(
            matches!(refused, Some(TrainingRunError::Env(_))),
            "{refused:?}"
        );
    }
}
