//! The small environment interface the trainer steps: tensors in, tensors out, on one device.
//!
//! [`TensorVecEnv`] implements it directly, so on a GPU a rollout never leaves the device.
//! [`HostEnv`] adapts any host [`VecEnv`] (the CPU trading env, test envs): it reads the
//! actions back, steps the env in host buffers and uploads the results — on the CPU device
//! both sides are host memory, so this is a copy, not a transfer.

use burn::tensor::{Device, Tensor, TensorData};

use crate::ppo::error::PpoError;
use tradetune_env::{DeviceEpisodes, EpisodeStats, TensorVecEnv, VecEnv};

/// One step of every env, on the trainer's device.
#[derive(Debug, Clone)]
pub struct StepTensors {
    /// `[N, obs_dim]` next observations (of the new episode where one ended).
    pub obs: Tensor<2>,
    /// `[N]` rewards.
    pub reward: Tensor<1>,
    /// `[N]` 1.0 where an episode ended with this step.
    pub done: Tensor<1>,
}

/// The episodes that ended since the last [`RolloutEnv::take_episodes`].
#[derive(Debug, Clone)]
pub enum EpisodeLog {
    /// Already on the host (a host env saw them as it stepped).
    Host(Vec<EpisodeStats>),
    /// Still on the device: read [`DeviceEpisodes::values`] back with the other values of the
    /// update, then decode them. No read per step.
    Device(Box<DeviceEpisodes>),
}

impl EpisodeLog {
    /// The episodes, reading the device log back on its own if it is one.
    pub fn into_host(self) -> Result<Vec<EpisodeStats>, PpoError> {
        match self {
            EpisodeLog::Host(v) => Ok(v),
            EpisodeLog::Device(d) if d.is_empty() => Ok(Vec::new()),
            EpisodeLog::Device(d) => {
                let host = tradetune_device::readback::read_f32(
                    d.values.clone(),
                    "device env: episode log",
                )
                .map_err(|e| PpoError::read("episode log", e))?;
                d.decode(&host)
                    .map_err(|e| PpoError::read("episode log", e.to_string()))
            }
        }
    }
}

/// N environments stepped together, exchanging tensors on one device.
pub trait RolloutEnv: Send {
    /// Number of environments N.
    fn n_envs(&self) -> usize;
    /// Length of one observation.
    fn obs_dim(&self) -> usize;
    /// Length of one action; actions are in [-1, 1].
    fn action_dim(&self) -> usize;
    /// Resets every env; the first observations `[N, obs_dim]`.
    fn reset(&mut self) -> Result<Tensor<2>, PpoError>;
    /// Prepares for a rollout of `steps` steps (a device env reserves its episode log).
    fn begin_rollout(&mut self, _steps: usize) {}
    /// Applies `actions` `[N, action_dim]` (already within [-1, 1]) and advances one step.
    fn step(&mut self, actions: Tensor<2>) -> Result<StepTensors, PpoError>;
    /// The episodes that ended since the last call, in step order.
    fn take_episodes(&mut self) -> EpisodeLog;
}

/// A host [`VecEnv`] seen as a [`RolloutEnv`] on `device`.
pub struct HostEnv<E: VecEnv> {
    env: E,
    device: Device,
    obs: Vec<f32>,
    actions: Vec<f32>,
    rewards: Vec<f32>,
    dones: Vec<f32>,
    /// Running reward sums and lengths, for envs that report no [`EpisodeStats`] themselves.
    reward_sums: Vec<f32>,
    lengths: Vec<u32>,
    /// Episodes ended since the last [`RolloutEnv::take_episodes`].
    finished: Vec<EpisodeStats>,
}

impl<E: VecEnv> HostEnv<E> {
    /// Wraps `env`; tensors are created on `device`.
    pub fn new(env: E, device: &Device) -> Self {
        let (n, d, a) = (env.n_envs(), env.obs_dim(), env.action_dim());
        Self {
            env,
            device: device.clone(),
            obs: vec![0.0; n * d],
            actions: vec![0.0; n * a],
            rewards: vec![0.0; n],
            dones: vec![0.0; n],
            reward_sums: vec![0.0; n],
            lengths: vec![0; n],
            finished: Vec::new(),
        }
    }

    /// The wrapped env.
    pub fn inner(&self) -> &E {
        &self.env
    }

    /// The wrapped env, mutably.
    pub fn inner_mut(&mut self) -> &mut E {
        &mut self.env
    }
}

impl<E: VecEnv> RolloutEnv for HostEnv<E> {
    fn n_envs(&self) -> usize {
        self.env.n_envs()
    }
    fn obs_dim(&self) -> usize {
        self.env.obs_dim()
    }
    fn action_dim(&self) -> usize {
        self.env.action_dim()
    }

    fn reset(&mut self) -> Result<Tensor<2>, PpoError> {
        self.env.reset(&mut self.obs);
        self.reward_sums.iter_mut().for_each(|r| *r = 0.0);
        self.lengths.iter_mut().for_each(|l| *l = 0);
        let (n, d) = (self.env.n_envs(), self.env.obs_dim());
        Ok(Tensor::from_data(
            TensorData::new(self.obs.clone(), [n, d]),
            &self.device,
        ))
    }

    fn step(&mut self, actions: Tensor<2>) -> Result<StepTensors, PpoError> {
        let host: Vec<f32> = tradetune_device::readback::read_f32(actions, "host env: actions")
            .map_err(|e| PpoError::read("actions", e))?;
        if host.len() != self.actions.len() {
            return Err(PpoError::config(
                "actions",
                host.len(),
                format!("expected {} values", self.actions.len()),
            ));
        }
        self.actions.copy_from_slice(&host);
        self.env.step(
            &self.actions,
            &mut self.obs,
            &mut self.rewards,
            &mut self.dones,
        );
        for i in 0..self.env.n_envs() {
            self.reward_sums[i] += self.rewards[i];
            self.lengths[i] += 1;
            if self.dones[i] > 0.5 {
                self.finished
                    .push(self.env.episode_stats(i).unwrap_or(EpisodeStats {
                        reward_sum: self.reward_sums[i],
                        length: self.lengths[i],
                        ..EpisodeStats::default()
                    }));
                self.reward_sums[i] = 0.0;
                self.lengths[i] = 0;
            }
        }
        let (n, d) = (self.env.n_envs(), self.env.obs_dim());
        Ok(StepTensors {
            obs: Tensor::from_data(TensorData::new(self.obs.clone(), [n, d]), &self.device),
            reward: Tensor::from_data(TensorData::new(self.rewards.clone(), [n]), &self.device),
            done: Tensor::from_data(TensorData::new(self.dones.clone(), [n]), &self.device),
        })
    }

    fn take_episodes(&mut self) -> EpisodeLog {
        EpisodeLog::Host(std::mem::take(&mut self.finished))
    }
}

impl RolloutEnv for TensorVecEnv {
    fn n_envs(&self) -> usize {
        VecEnv::n_envs(self)
    }
    fn obs_dim(&self) -> usize {
        VecEnv::obs_dim(self)
    }
    fn action_dim(&self) -> usize {
        VecEnv::action_dim(self)
    }
    fn reset(&mut self) -> Result<Tensor<2>, PpoError> {
        Ok(self.reset_tensors())
    }
    fn begin_rollout(&mut self, steps: usize) {
        self.reserve_episode_log(steps);
    }
    fn step(&mut self, actions: Tensor<2>) -> Result<StepTensors, PpoError> {
        let s = self.step_tensors(actions);
        self.log_episodes();
        Ok(StepTensors {
            obs: s.obs,
            reward: s.reward,
            done: s.done,
        })
    }
    fn take_episodes(&mut self) -> EpisodeLog {
        EpisodeLog::Device(Box::new(self.take_episode_log()))
    }
}
