//! The host engine: on the CPU device in f32, a minibatch on host buffers with a hand-written
//! backward pass and Adam on the host ([`crate::ppo::host_update`], the math), about twice as
//! fast there as the device engine and held to it by the tests.
//!
//! The rollout is read once per update. The parameters are read from the model at the start
//! of each update and moved back into it (each parameter a slice of one flat tensor) at its
//! end, after its last step or an error; Adam's moments stay on the host between updates, so a
//! large network's state is never held twice. They move back to [`FlatAdam`] when the device
//! engine runs, a new model comes or a saved state is loaded.

use std::ops::Range;

use burn::tensor::{Device, FloatDType, Tensor, TensorData};

use super::flat_adam::{FlatAdam, Slot};
use super::{Diagnostics, Factor, MinibatchEngine, Scale, UpdateBatch};
use crate::ppo::config::PpoConfig;
use crate::ppo::error::PpoError;
use crate::ppo::host_policy::host as read;
use crate::ppo::host_update::{DenseSlot, HostAdamState, HostBatch, HostNet, HostWork};
use crate::ppo::model::{ActorCritic, Dense};

/// What the host engine keeps between updates.
#[derive(Debug, Default)]
pub(super) struct HostSide {
    /// The networks' layout for the host step, on the CPU device in f32; `None` elsewhere.
    pub net: Option<HostNet>,
    /// Whether the host engine runs where it can (see [`super::Learner::set_host_update`]).
    pub allowed: bool,
    /// The minibatch step's buffers, reused from minibatch to minibatch.
    work: HostWork,
    /// While updates run on the host: Adam's moments `(m1, m2)`, on the host only
    /// ([`FlatAdam::moments`] and [`FlatAdam::flat_params`] are then `None`).
    moments: Option<(Vec<f32>, Vec<f32>)>,
}

impl HostSide {
    /// The host side of a learner of `model`, whose parameters lie at `slots`.
    pub fn new(model: &ActorCritic, slots: &[Slot], cfg: &PpoConfig, device: &Device) -> Self {
        Self {
            net: host_net(model, slots, cfg, device),
            allowed: true,
            ..Self::default()
        }
    }

    /// Takes the layout of a new model (after [`Self::release`]).
    pub fn relayout(
        &mut self,
        model: &ActorCritic,
        slots: &[Slot],
        cfg: &PpoConfig,
        device: &Device,
    ) {
        self.net = host_net(model, slots, cfg, device);
    }

    /// Whether updates run the host engine.
    pub fn runs(&self) -> bool {
        self.allowed && self.net.is_some()
    }

    /// Adam's moments held on the host, as flat tensors on `device`'s inner device.
    pub fn moment_tensors(&self, device: &Device) -> Option<(Tensor<1>, Tensor<1>)> {
        let (m1, m2) = self.moments.as_ref()?;
        let inner = device.clone().inner();
        let flat =
            |v: &Vec<f32>| Tensor::<1>::from_data(TensorData::new(v.clone(), [v.len()]), &inner);
        Some((flat(m1), flat(m2)))
    }

    /// Hands Adam's moments held on the host back to `adam` (for the device engine, a new
    /// model or a loaded state); the parameters are the model's already.
    pub fn release(&mut self, adam: &mut FlatAdam, device: &Device) {
        if self.moments.is_some() {
            adam.moments = self.moment_tensors(device);
            self.moments = None;
            adam.flat_params = None;
        }
    }

    /// The host engine for one update of `model` over `batch`: the rollout read, the
    /// parameters read from the model, Adam's moments those held on the host or read from
    /// `adam` (zero before the first step), whose tensors are then let go.
    pub fn engine<'a>(
        &'a mut self,
        model: &'a mut ActorCritic,
        adam: &'a mut FlatAdam,
        cfg: &'a PpoConfig,
        batch: &UpdateBatch,
        device: &'a Device,
    ) -> Result<HostEngine<'a>, PpoError> {
        let Self {
            net, work, moments, ..
        } = self;
        let net = net
            .as_ref()
            .ok_or_else(|| PpoError::read("parameters", "no host layout"))?;
        let batch = HostBatch {
            obs: read(batch.obs.clone(), "rollout observations")?,
            actions: read(batch.actions.clone(), "rollout actions")?,
            log_probs: read(batch.log_probs.clone(), "rollout log-probabilities")?,
            values: read(batch.values.clone(), "rollout values")?,
            advantages: read(batch.advantages.clone(), "advantages")?,
            returns: read(batch.returns.clone(), "returns")?,
        };
        let params = adam.read_params(model)?;
        let (m1, m2) = match (moments.take(), &adam.moments) {
            (Some(m), _) => m,
            (None, Some((m1, m2))) => (
                read(m1.clone(), "Adam's first moments")?,
                read(m2.clone(), "Adam's second moments")?,
            ),
            (None, None) => (vec![0.0; params.len()], vec![0.0; params.len()]),
        };
        if m1.len() != params.len() || m2.len() != params.len() {
            return Err(PpoError::read(
                "Adam's moments",
                "not the parameters' length",
            ));
        }
        adam.moments = None;
        adam.flat_params = None;
        let engine = HostEngine {
            net,
            work,
            moments,
            model,
            adam,
            cfg,
            device,
            batch,
            state: HostAdamState { params, m1, m2 },
            order: Vec::new(),
            steps: 0,
        };
        if engine.state.params.len() != net.n_params {
            engine.finish();
            return Err(PpoError::read("parameters", "not the layout's length"));
        }
        Ok(engine)
    }
}

/// The host engine over one update's rollout.
pub(super) struct HostEngine<'a> {
    net: &'a HostNet,
    work: &'a mut HostWork,
    /// Where Adam's moments go back at the end.
    moments: &'a mut Option<(Vec<f32>, Vec<f32>)>,
    model: &'a mut ActorCritic,
    adam: &'a mut FlatAdam,
    cfg: &'a PpoConfig,
    device: &'a Device,
    batch: HostBatch,
    state: HostAdamState,
    /// The epoch's shuffle.
    order: Vec<usize>,
    /// Steps taken in this update.
    steps: usize,
}

impl MinibatchEngine for HostEngine<'_> {
    fn shuffle(&mut self, order: &[usize]) {
        self.order.clear();
        self.order.extend_from_slice(order);
    }

    fn minibatch(&mut self, rows: Range<usize>, scale: Scale<'_>) -> Diagnostics {
        // f32 only: the loss is never scaled.
        debug_assert!(matches!(scale, Scale::Host(s) if s == 1.0));
        Diagnostics::Host(self.work.minibatch(
            self.net,
            self.cfg,
            &self.state.params,
            &self.batch,
            &self.order[rows],
        ))
    }

    fn step(&mut self, lr: f64, factor: Factor) {
        let Factor::Host(factor) = factor else {
            unreachable!("the host engine's minibatches are judged on the host")
        };
        self.adam.time += 1;
        self.state.step(
            &self.work.gradient(self.net),
            (factor != 1.0).then_some(factor),
            self.adam.betas(),
            self.adam.time,
            lr as f32,
        );
        self.steps += 1;
    }

    fn skip(&mut self) {
        // f32 only: a non-finite step is an error, not a skip; counted as the others would.
        self.adam.time += 1;
    }

    /// The parameters back to the model when a step was taken; Adam's moments stay on the
    /// host.
    fn finish(self) {
        let HostAdamState { params, m1, m2 } = self.state;
        if self.steps > 0 {
            let inner = self.device.clone().inner();
            let n = params.len();
            let flat = Tensor::<1>::from_data(TensorData::new(params, [n]), &inner);
            self.adam.place(self.model, &flat);
        }
        *self.moments = Some((m1, m2));
    }
}

/// The layout of `model` for the host minibatch step, when `device` is the CPU device and the
/// compute dtype f32 (and every parameter has its slot).
fn host_net(
    model: &ActorCritic,
    slots: &[Slot],
    cfg: &PpoConfig,
    device: &Device,
) -> Option<HostNet> {
    if !tradetune_device::is_cpu(device) || cfg.precision.compute_dtype() != FloatDType::F32 {
        return None;
    }
    let slot = |id| slots.iter().find(|s| s.id == id);
    let dense = |layer: &Dense| -> Option<DenseSlot> {
        let w = slot(layer.weight.id)?;
        let b = slot(layer.bias.id)?;
        let [fan_in, fan_out] = w.shape.as_slice()[..] else {
            return None;
        };
        Some(DenseSlot {
            fan_in,
            fan_out,
            weight: w.offset,
            bias: b.offset,
        })
    };
    let mlp = |hidden: &[Dense], head: &Dense| -> Option<Vec<DenseSlot>> {
        hidden
            .iter()
            .chain(std::iter::once(head))
            .map(dense)
            .collect()
    };
    let pi = mlp(&model.pi, &model.mean)?;
    let vf = mlp(&model.vf, &model.value)?;
    let log_std = slot(model.log_std.id)?;
    let action_dim = pi.last()?.fan_out;
    let obs_dim = pi.first()?.fan_in;
    if log_std.len != action_dim || vf.first()?.fan_in != obs_dim || vf.last()?.fan_out != 1 {
        return None;
    }
    Some(HostNet {
        pi,
        vf,
        log_std: log_std.offset,
        action_dim,
        obs_dim,
        activation: model.activation(),
        n_params: slots.last().map_or(0, |s| s.offset + s.len),
    })
}
