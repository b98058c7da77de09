//! The PPO update (Schulman et al. 2017, arXiv:1707.06347), laid out like CleanRL's
//! `ppo_continuous_action.py` with SB3's loss conventions (`stable_baselines3/ppo/ppo.py`):
//!
//! ```text
//! for epoch in 0..n_epochs:
//!     for mb in shuffled minibatches of the rollout (without replacement, last one may be short):
//!         mean, V      = model(obs[mb])                     # [B, A], [B]  (compute dtype)
//!         logp         = log N(actions[mb]; mean, σ)        # [B]
//!         ratio        = exp(logp − logp_old[mb])           # [B]
//!         Â            = normalise(adv[mb])                 # per minibatch, if enabled
//!         L_pi         = mean(max(−Â·ratio, −Â·clip(ratio, 1 ± ε)))
//!         V'           = V_old + clip(V − V_old, ±ε_vf)     # if clip_range_vf
//!         L_v          = mean((R − V')²)
//!         L            = L_pi + vf_coef·L_v − ent_coef·H
//!         approx_kl    = mean((ratio − 1) − log ratio)      # Schulman's k3 estimator
//!         stop the update if approx_kl > 1.5·target_kl (before stepping, as SB3)
//!         g            = ∇(L · loss_scale) / loss_scale      # f32 grads of the f32 params
//!         skip the step if g is not finite (f16: lower the scale)
//!         g           *= min(1, max_grad_norm / ‖g‖₂)       # one global norm over all params
//!         Adam(g, lr)
//! ```
//!
//! Two implementations run it. Through burn's autodiff on every device and precision; and on
//! the CPU device in f32, on host buffers with a hand-written backward pass
//! ([`crate::ppo::host_update`]), about twice as fast there and held to the burn path by the
//! tests below (gradients, whole updates, Adam's saved state).

use burn::module::{Module, ModuleMapper, ModuleVisitor, Param, ParamId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use burn::optim::{Adam, AdamState, AdaptiveMomentumState};
use burn::optim::{GradientsParams, LearningRate, ModuleOptimizer, Optimizer};
use burn::tensor::{Bool, Device, FloatDType, Int, Shape, Tensor, TensorData};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use serde::{Deserialize, Serialize};

use crate::ppo::config::PpoConfig;
use crate::ppo::error::PpoError;
use crate::ppo::host_policy::host as read;
use crate::ppo::host_update::{DenseSlot, HostAdamState, HostBatch, HostNet, HostWork};
use crate::ppo::model::{ActorCritic, Dense, gaussian_entropy, gaussian_log_prob};
use tradetune_device::precision::{LossScaler, MAX_LOSS_SCALE, MIN_LOSS_SCALE, ScaleStep};

/// A rollout prepared for the update: everything on the training (autodiff) device.
#[derive(Debug, Clone)]
pub struct UpdateBatch {
    /// `[S, obs_dim]`.
    pub obs: Tensor<2>,
    /// `[S, action_dim]` unclipped actions.
    pub actions: Tensor<2>,
    /// `[S]` log-probabilities under the rollout policy.
    pub log_probs: Tensor<1>,
    /// `[S]` values of the rollout policy.
    pub values: Tensor<1>,
    /// `[S]` GAE advantages.
    pub advantages: Tensor<1>,
    /// `[S]` value targets (advantage + value).
    pub returns: Tensor<1>,
}

/// Adam (Kingma & Ba 2015, burn's `Adam` arithmetic op for op) over all parameters at once:
/// the gradients are concatenated into one flat buffer, so a step is a dozen tensor operations
/// instead of a dozen per parameter tensor (small networks are dominated by per-op overhead).
/// Each element sees exactly the operations of burn's per-tensor Adam, in the same order.
///
/// A step can be gated by a flag on the device: f16's dynamic loss scaling skips an overflowing
/// step without reading the gradients' finiteness back. A discarded step leaves the parameters
/// and both moments as they were (selected, not recomputed, so a non-finite gradient never
/// reaches them); the step counter, a host integer, counts it anyway, so the bias correction
/// after a skip is that of one step later (as burn's Adam behind a gate).
struct FlatAdam {
    beta_1: f32,
    beta_2: f32,
    epsilon: f32,
    /// `[n_params]` first and second moments (on the inner, non-autodiff device); `None`
    /// before the first step.
    moments: Option<(Tensor<1>, Tensor<1>)>,
    /// Steps taken (Adam's `t`).
    time: usize,
}

impl FlatAdam {
    /// β₁ = 0.9, β₂ = 0.999 (burn's and torch's defaults) and the config's ε.
    fn new(cfg: &PpoConfig) -> Self {
        Self {
            beta_1: 0.9,
            beta_2: 0.999,
            epsilon: cfg.adam_eps,
            moments: None,
            time: 0,
        }
    }

    /// One step of `params` (flat) with `grad` (flat), kept only where `gate` is true.
    fn step(
        &mut self,
        lr: LearningRate,
        params: Tensor<1>,
        grad: Tensor<1>,
        gate: Option<Tensor<1, Bool>>,
    ) -> Tensor<1> {
        let (m1_old, m2_old) = match self.moments.take() {
            Some(m) => m,
            // Zero moments give burn's first step exactly (0·β + x = x).
            None => (params.zeros_like(), params.zeros_like()),
        };
        let m1 = m1_old
            .clone()
            .mul_scalar(self.beta_1)
            .add(grad.clone().mul_scalar(1.0 - self.beta_1));
        let m2 = m2_old
            .clone()
            .mul_scalar(self.beta_2)
            .add(grad.square().mul_scalar(1.0 - self.beta_2));
        self.time += 1;
        let time = self.time as i32;
        let bias_correction2_sqrt = (1.0 - self.beta_2.powi(time)).sqrt();
        let combined_factor = bias_correction2_sqrt / (1.0 - self.beta_1.powi(time));
        let delta = m1.clone().mul_scalar(combined_factor).div(
            m2.clone()
                .sqrt()
                .add_scalar(self.epsilon * bias_correction2_sqrt),
        );
        let stepped = params.clone().sub(delta.mul_scalar(lr));
        match gate {
            None => {
                self.moments = Some((m1, m2));
                stepped
            }
            Some(gate) => {
                let apply = gate.expand([params.dims()[0]]);
                self.moments = Some((
                    m1_old.mask_where(apply.clone(), m1),
                    m2_old.mask_where(apply.clone(), m2),
                ));
                params.mask_where(apply, stepped)
            }
        }
    }
}

/// Where each parameter lies in the flat buffers of [`FlatAdam`].
#[derive(Debug, Clone)]
struct Slot {
    id: ParamId,
    shape: Shape,
    offset: usize,
    len: usize,
}

/// Collects every float parameter's slot in the flat layout.
struct Layout(Vec<Slot>);

impl ModuleVisitor for Layout {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let shape = param.shape();
        let len = shape.num_elements();
        let offset = self.0.last().map_or(0, |s| s.offset + s.len);
        self.0.push(Slot {
            id: param.id,
            shape,
            offset,
            len,
        });
    }
}

/// Collects every float parameter's (inner) value, flattened, by id.
struct FlatValues(HashMap<ParamId, Tensor<1>>);

impl ModuleVisitor for FlatValues {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let t = param.val().inner();
        let n = t.shape().num_elements();
        self.0.insert(param.id, t.reshape([n]));
    }
}

/// Replaces every float parameter by its slice of a flat buffer (keeping its autodiff state).
struct FromFlat<'a> {
    flat: &'a Tensor<1>,
    slots: &'a HashMap<ParamId, (usize, usize)>,
}

impl ModuleMapper for FromFlat<'_> {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        let (id, tensor, mapper) = param.consume();
        let Some(&(offset, len)) = self.slots.get(&id) else {
            return Param::from_mapped_value(id, tensor, mapper);
        };
        let require_grad = tensor.is_require_grad();
        let checkpointing = tensor.gradient_checkpointing_strategy();
        let shape = tensor.shape();
        let mut value =
            Tensor::<D>::from_inner(self.flat.clone().narrow(0, offset, len).reshape(shape));
        if let Some(strategy) = checkpointing {
            value = value.with_gradient_checkpointing_strategy(strategy);
        }
        if require_grad {
            value = value.require_grad();
        }
        Param::from_mapped_value(id, value, mapper)
    }
}

/// Adam's state record (burn's `ModuleOptimizer` format, one `AdamState` per parameter) to and
/// from [`FlatAdam`]: an optimiser whose "step" writes the moments passed in as the gradient
/// (`[m1; m2]` stacked along the first axis) into its state, or reads its state out as the new
/// value (same stacking), so checkpoints stay those of burn's Adam.
#[derive(Clone)]
struct StateBridge {
    /// Saving: the step counter to record.
    time: usize,
    /// Loading: the step counters read, one per parameter with a state.
    read_times: Arc<Mutex<Vec<usize>>>,
    /// Whether this writes states (saving) or reads them (loading).
    saving: bool,
}

impl Optimizer for StateBridge {
    type State<const D: usize> = AdamState<D>;

    fn step<const D: usize>(
        &self,
        _lr: LearningRate,
        tensor: Tensor<D>,
        grad: Tensor<D>,
        state: Option<Self::State<D>>,
    ) -> (Tensor<D>, Option<Self::State<D>>) {
        if self.saving {
            let n = tensor.dims()[0];
            let m1 = grad.clone().narrow(0, 0, n);
            let m2 = grad.narrow(0, n, n);
            let state = AdamState::new(AdaptiveMomentumState::new(self.time, m1, m2));
            return (tensor, Some(state));
        }
        match state {
            Some(s) => {
                if let Ok(mut times) = self.read_times.lock() {
                    times.push(s.momentum.time);
                }
                let stacked = Tensor::cat(
                    vec![s.momentum.moment_1.clone(), s.momentum.moment_2.clone()],
                    0,
                );
                (stacked, Some(s))
            }
            None => (tensor, None),
        }
    }

    fn to_device<const D: usize>(state: Self::State<D>, device: &Device) -> Self::State<D> {
        <Adam as Optimizer>::to_device(state, device)
    }
}

/// One minibatch's forward and backward pass.
struct Minibatch {
    /// `[7]`: loss, policy loss, value loss, entropy, approx_kl, clipfrac, Σ‖g‖² (of the
    /// scaled loss).
    diagnostics: Tensor<1>,
    grads: GradientsParams,
}

/// CleanRL's per-update diagnostics (means over the minibatches that were run).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct UpdateStats {
    /// `losses/approx_kl`.
    pub approx_kl: f32,
    /// `losses/clipfrac`: fraction of samples whose ratio was clipped.
    pub clipfrac: f32,
    /// `losses/entropy` of the policy.
    pub entropy: f32,
    /// `losses/policy_loss`.
    pub policy_loss: f32,
    /// `losses/value_loss`.
    pub value_loss: f32,
    /// `losses/explained_variance` of the rollout's values for its returns.
    pub explained_variance: f32,
    /// `charts/learning_rate`.
    pub learning_rate: f64,
    /// Loss scale after the update (1 unless f16).
    pub loss_scale: f32,
    /// Global gradient norm before clipping (mean over applied steps).
    pub grad_norm: f32,
    /// Optimiser steps applied.
    pub steps: usize,
    /// Steps skipped for non-finite f16 gradients.
    pub skipped_steps: usize,
    /// Epochs completed (fewer than `n_epochs` when `target_kl` stopped the update).
    pub epochs: usize,
}

impl UpdateStats {
    /// The means of `sums` (policy loss, value loss, entropy, approx_kl, clipfrac, gradient
    /// norm) over the `steps` minibatches applied, with the step count and the loss scale.
    fn set_means(&mut self, sums: &[f64; 6], steps: usize, loss_scale: f32) {
        let n = steps.max(1) as f64;
        let [pl, vl, ent, kl, cf, gn] = sums.map(|s| (s / n) as f32);
        self.policy_loss = pl;
        self.value_loss = vl;
        self.entropy = ent;
        self.approx_kl = kl;
        self.clipfrac = cf;
        self.grad_norm = gn;
        self.steps = steps;
        self.loss_scale = loss_scale;
    }

    /// The diagnostics by their CleanRL names, for learning curves.
    pub fn metrics(&self) -> [(&'static str, f64); 9] {
        [
            ("losses/approx_kl", self.approx_kl.into()),
            ("losses/clipfrac", self.clipfrac.into()),
            ("losses/entropy", self.entropy.into()),
            ("losses/policy_loss", self.policy_loss.into()),
            ("losses/value_loss", self.value_loss.into()),
            ("losses/explained_variance", self.explained_variance.into()),
            ("losses/grad_norm", self.grad_norm.into()),
            ("losses/loss_scale", self.loss_scale.into()),
            ("charts/learning_rate", self.learning_rate),
        ]
    }
}

/// The learner: model, optimiser, loss scaler and the minibatch shuffler.
pub struct Learner {
    model: ActorCritic,
    adam: FlatAdam,
    scaler: LossScaler,
    rng: StdRng,
    params: Vec<(ParamId, usize)>,
    /// Each parameter's place in [`FlatAdam`]'s buffers, in the model's order.
    slots: Vec<Slot>,
    /// `slots` by id: (offset, length).
    slot_of: HashMap<ParamId, (usize, usize)>,
    /// The model's parameters as one flat buffer (inner device), whose slices they are since
    /// the last step; `None` until a step (or after the model was replaced).
    flat_params: Option<Tensor<1>>,
    /// The networks' layout for the host minibatch step ([`crate::ppo::host_update`]), on the
    /// CPU device in f32; `None` elsewhere.
    host: Option<HostNet>,
    /// Whether the host step is used where it can be (see [`Learner::set_host_update`]).
    host_allowed: bool,
    host_work: HostWork,
    /// While updates run the host step: Adam's moments `(m1, m2)`, on the host only
    /// (`FlatAdam::moments` and `flat_params` are then `None`). The parameters are read from
    /// the model at the start of each update and moved back into it at the end, so a large
    /// network's state is never held twice between updates.
    host_moments: Option<(Vec<f32>, Vec<f32>)>,
    cfg: PpoConfig,
    device: Device,
}

/// The slots of `model`'s parameters, by position and by id.
fn layout(model: &ActorCritic) -> (Vec<Slot>, HashMap<ParamId, (usize, usize)>) {
    let mut slots = Layout(Vec::new());
    model.visit(&mut slots);
    let by_id = slots.0.iter().map(|s| (s.id, (s.offset, s.len))).collect();
    (slots.0, by_id)
}

/// The layout of `model` for the host minibatch step, when `device` is the CPU device and the
/// compute dtype f32 (and every parameter has its slot).
fn host_net(
    model: &ActorCritic,
    slots: &[Slot],
    cfg: &PpoConfig,
    device: &Device,
) -> Option<HostNet> {
    if device.clone().without_autodiff() != Device::flex()
        || cfg.precision.compute_dtype() != FloatDType::F32
    {
        return None;
    }
    let slot = |id: ParamId| slots.iter().find(|s| s.id == id);
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

impl Learner {
    /// A learner for `model` (on the autodiff training device `device`).
    pub fn new(model: ActorCritic, cfg: &PpoConfig, device: &Device) -> Self {
        let (slots, slot_of) = layout(&model);
        Self {
            host: host_net(&model, &slots, cfg, device),
            host_allowed: true,
            host_work: HostWork::default(),
            host_moments: None,
            model,
            adam: FlatAdam::new(cfg),
            params: slots.iter().map(|s| (s.id, s.shape.num_dims())).collect(),
            slots,
            slot_of,
            flat_params: None,
            scaler: LossScaler::new(
                cfg.precision,
                cfg.initial_loss_scale,
                cfg.loss_scale_growth_interval,
            ),
            rng: crate::ppo::stream_rng(cfg.seed, crate::ppo::SHUFFLE_STREAM, 0),
            cfg: cfg.clone(),
            device: device.clone(),
        }
    }

    /// The model being trained.
    pub fn model(&self) -> &ActorCritic {
        &self.model
    }

    /// Replaces the model (checkpoint resume).
    pub fn set_model(&mut self, model: ActorCritic) {
        // Adam's moments stay (as burn's Adam's would); the parameters are the new model's.
        self.release_host_state();
        let (slots, slot_of) = layout(&model);
        self.host = host_net(&model, &slots, &self.cfg, &self.device);
        self.params = slots.iter().map(|s| (s.id, s.shape.num_dims())).collect();
        self.slots = slots;
        self.slot_of = slot_of;
        self.flat_params = None;
        self.model = model;
    }

    /// Saves Adam's state to a burnpack file, in the format of burn's `ModuleOptimizer` with
    /// `Adam` (one state per parameter).
    pub fn save_optimizer(&self, path: &std::path::Path) -> Result<(), PpoError> {
        let mut optim = ModuleOptimizer::from(StateBridge {
            time: self.adam.time,
            read_times: Arc::new(Mutex::new(Vec::new())),
            saving: true,
        });
        if let Some((m1, m2)) = &self.moment_tensors() {
            let mut stacked = GradientsParams::new();
            for slot in &self.slots {
                let part = |m: &Tensor<1>| m.clone().narrow(0, slot.offset, slot.len);
                match slot.shape.num_dims() {
                    1 => stacked.register::<1>(slot.id, Tensor::cat(vec![part(m1), part(m2)], 0)),
                    2 => stacked.register::<2>(
                        slot.id,
                        Tensor::cat(
                            vec![
                                part(m1).reshape(slot.shape.clone()),
                                part(m2).reshape(slot.shape.clone()),
                            ],
                            0,
                        ),
                    ),
                    _ => {}
                }
            }
            let _ = optim.step(0.0, self.model.clone(), stacked);
        }
        optim.save(path).map_err(|e| PpoError::Checkpoint {
            path: path.display().to_string(),
            reason: format!("{e:?}"),
        })
    }

    /// Restores Adam's state from a burnpack file (see [`Learner::save_optimizer`]).
    pub fn load_optimizer(&mut self, path: &std::path::Path) -> Result<(), PpoError> {
        // The moments read replace those held on the host (the next host update reads them).
        self.release_host_state();
        let times = Arc::new(Mutex::new(Vec::new()));
        let mut optim = ModuleOptimizer::from(StateBridge {
            time: 0,
            read_times: times.clone(),
            saving: false,
        })
        .load(path)
        .map_err(|e| PpoError::Checkpoint {
            path: path.display().to_string(),
            reason: format!("{e:?}"),
        })?;
        let inner = self.device.clone().inner();
        let mut zeros = GradientsParams::new();
        for slot in &self.slots {
            match slot.shape.num_dims() {
                1 => zeros.register::<1>(slot.id, Tensor::zeros(slot.shape.clone(), &inner)),
                2 => zeros.register::<2>(slot.id, Tensor::zeros(slot.shape.clone(), &inner)),
                _ => {}
            }
        }
        let read = optim.step(0.0, self.model.clone(), zeros);
        let time = times.lock().ok().and_then(|t| t.iter().copied().max());
        let Some(time) = time else {
            self.adam.moments = None;
            self.adam.time = 0;
            return Ok(());
        };
        let mut values = FlatValues(HashMap::new());
        read.visit(&mut values);
        let (mut m1, mut m2) = (Vec::new(), Vec::new());
        for slot in &self.slots {
            match values.0.remove(&slot.id) {
                Some(v) if v.dims()[0] == 2 * slot.len => {
                    m1.push(v.clone().narrow(0, 0, slot.len));
                    m2.push(v.narrow(0, slot.len, slot.len));
                }
                // A parameter without a recorded state starts from zero moments.
                _ => {
                    m1.push(Tensor::zeros([slot.len], &inner));
                    m2.push(Tensor::zeros([slot.len], &inner));
                }
            }
        }
        self.adam.moments = Some((Tensor::cat(m1, 0), Tensor::cat(m2, 0)));
        self.adam.time = time;
        Ok(())
    }

    /// The gradients of all parameters as one flat buffer in the layout of [`FlatAdam`].
    fn flat_grads(&self, grads: &mut GradientsParams) -> Tensor<1> {
        let parts: Vec<Tensor<1>> = self
            .slots
            .iter()
            .map(|slot| {
                let g = match slot.shape.num_dims() {
                    1 => grads.remove::<1>(slot.id),
                    2 => grads.remove::<2>(slot.id).map(|g| g.reshape([slot.len])),
                    _ => None,
                };
                // A parameter outside the loss's graph has a zero gradient.
                g.unwrap_or_else(|| Tensor::zeros([slot.len], &self.device.clone().inner()))
            })
            .collect();
        Tensor::cat(parts, 0)
    }

    /// One Adam step of all parameters with the flat gradient `grad` (see [`FlatAdam`]).
    fn adam_step(&mut self, lr: f64, grad: Tensor<1>, gate: Option<Tensor<1, Bool>>) {
        let params = match self.flat_params.take() {
            Some(params) => params,
            None => {
                let mut values = FlatValues(HashMap::new());
                self.model.visit(&mut values);
                let parts: Vec<Tensor<1>> = self
                    .slots
                    .iter()
                    .filter_map(|slot| values.0.remove(&slot.id))
                    .collect();
                Tensor::cat(parts, 0)
            }
        };
        let stepped = self.adam.step(lr, params, grad, gate);
        self.model = self.model.clone().map(&mut FromFlat {
            flat: &stepped,
            slots: &self.slot_of,
        });
        self.flat_params = Some(stepped);
    }

    /// The loss scaler.
    pub fn scaler(&self) -> &LossScaler {
        &self.scaler
    }

    /// The loss scaler, to restore its scale on resume.
    pub fn scaler_mut(&mut self) -> &mut LossScaler {
        &mut self.scaler
    }

    /// Runs `n_epochs` over `batch` with learning rate `lr`. `update` numbers the update in
    /// errors.
    ///
    /// `ride_along` are values the caller wants back from the device (the rollout's GAE
    /// diagnostics, its episode log): they are read together with the update's diagnostics, so
    /// an update without host decisions reads the device once, and `check` sees them before
    /// the update's own diagnostics are judged. An update that decides something on the host
    /// per minibatch (`target_kl`'s early stop, the only one) reads `ride_along` first and one
    /// diagnostics vector per minibatch, and then scales an f16 loss on the host. Otherwise f16's
    /// loss scaling runs on the device (scale, skips and growth as [`LossScaler`]; see
    /// [`GatedAdam`] for the skip).
    pub fn update(
        &mut self,
        batch: &UpdateBatch,
        lr: f64,
        update: usize,
        ride_along: Tensor<1>,
        check: &mut dyn FnMut(&[f32]) -> Result<(), PpoError>,
    ) -> Result<(UpdateStats, Vec<f32>), PpoError> {
        if self.host_allowed
            && let Some(net) = self.host.clone()
        {
            return self.update_on_host(&net, batch, lr, update, ride_along, check);
        }
        self.release_host_state();
        let per_minibatch = self.cfg.target_kl.is_some();
        if per_minibatch {
            let extra = if ride_along.dims()[0] == 0 {
                Vec::new()
            } else {
                tradetune_device::readback::read_f32(ride_along, "update: rollout values")
                    .map_err(|e| PpoError::read("rollout values", e))?
            };
            check(&extra)?;
            let stats = self.update_reading_each_minibatch(batch, lr, update)?;
            Ok((stats, extra))
        } else {
            self.update_reading_once(batch, lr, update, ride_along, check)
        }
    }

    /// A fresh shuffle of `0..samples` for each epoch of this update, keyed by its number.
    fn epoch_orders(&mut self, samples: usize, update: usize) -> Vec<Tensor<1, Int>> {
        self.shuffled_orders(samples, update)
            .into_iter()
            .map(|order| {
                let order: Vec<i64> = order.into_iter().map(|i| i as i64).collect();
                Tensor::<1, Int>::from_data(TensorData::new(order, [samples]), &self.device)
            })
            .collect()
    }

    /// [`Self::epoch_orders`] on the host: the same shuffles.
    fn shuffled_orders(&mut self, samples: usize, update: usize) -> Vec<Vec<usize>> {
        let mut order: Vec<usize> = (0..samples).collect();
        // This update's minibatch orders: keyed by its number (see `stream_rng`).
        self.rng = crate::ppo::stream_rng(self.cfg.seed, crate::ppo::SHUFFLE_STREAM, update as u64);
        (0..self.cfg.n_epochs)
            .map(|_| {
                order.shuffle(&mut self.rng);
                order.clone()
            })
            .collect()
    }

    /// Whether updates run the host minibatch step ([`crate::ppo::host_update`]): on the CPU
    /// device in f32, unless turned off with [`Self::set_host_update`].
    pub fn uses_host_update(&self) -> bool {
        self.host_allowed && self.host.is_some()
    }

    /// Turns the host minibatch step off (every update then runs through burn's autodiff, as
    /// on other devices) or back on where it applies: for comparing the two paths.
    pub fn set_host_update(&mut self, on: bool) {
        self.host_allowed = on;
    }

    /// Adam's moments as flat tensors (from the host while the host step runs).
    fn moment_tensors(&self) -> Option<(Tensor<1>, Tensor<1>)> {
        match &self.host_moments {
            Some((m1, m2)) => {
                let inner = self.device.clone().inner();
                let flat = |v: &Vec<f32>| {
                    Tensor::<1>::from_data(TensorData::new(v.clone(), [v.len()]), &inner)
                };
                Some((flat(m1), flat(m2)))
            }
            None => self.adam.moments.clone(),
        }
    }

    /// Hands Adam's moments held on the host back to [`FlatAdam`] (for the burn path, a new
    /// model or a loaded state); the parameters are the model's already.
    fn release_host_state(&mut self) {
        if self.host_moments.is_some() {
            self.adam.moments = self.moment_tensors();
            self.host_moments = None;
            self.flat_params = None;
        }
    }

    /// The host state for an update: the parameters read from the model, Adam's moments those
    /// held on the host or read from [`FlatAdam`] (zero before the first step), whose tensors
    /// are then let go.
    fn take_host_state(&mut self) -> Result<HostAdamState, PpoError> {
        let params = match &self.flat_params {
            Some(flat) => read(flat.clone(), "parameters")?,
            None => {
                let mut values = FlatValues(HashMap::new());
                self.model.visit(&mut values);
                let mut out = Vec::with_capacity(self.slots.last().map_or(0, |s| s.offset + s.len));
                for slot in &self.slots {
                    match values.0.remove(&slot.id) {
                        Some(v) => out.extend(read(v, "parameters")?),
                        None => out.extend(std::iter::repeat_n(0.0, slot.len)),
                    }
                }
                out
            }
        };
        let (m1, m2) = match (self.host_moments.take(), &self.adam.moments) {
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
        self.adam.moments = None;
        self.flat_params = None;
        Ok(HostAdamState { params, m1, m2 })
    }

    /// Moves the host state back: the parameters into the model (each parameter a slice of
    /// one flat tensor) when `stepped`, the moments to [`Self::host_moments`].
    fn put_host_state(&mut self, state: HostAdamState, stepped: bool) {
        let HostAdamState { params, m1, m2 } = state;
        if stepped {
            let inner = self.device.clone().inner();
            let n = params.len();
            let flat = Tensor::<1>::from_data(TensorData::new(params, [n]), &inner);
            self.model = self.model.clone().map(&mut FromFlat {
                flat: &flat,
                slots: &self.slot_of,
            });
        }
        self.host_moments = Some((m1, m2));
    }

    /// The update with the host minibatch step ([`crate::ppo::host_update`]): the rollout is
    /// read once, every minibatch runs on host buffers (`target_kl`'s early stop and the
    /// gradient clipping decided there, as in [`Self::update_reading_each_minibatch`] and
    /// [`Self::update_reading_once`]), and the parameters are moved back into the model once
    /// at the end (Adam's moments stay on the host, see `host_moments`). A non-finite loss or
    /// gradient stops the update before that minibatch's step, the steps before it applied, as
    /// the burn path that reads each minibatch does.
    fn update_on_host(
        &mut self,
        net: &HostNet,
        batch: &UpdateBatch,
        lr: f64,
        update: usize,
        ride_along: Tensor<1>,
        check: &mut dyn FnMut(&[f32]) -> Result<(), PpoError>,
    ) -> Result<(UpdateStats, Vec<f32>), PpoError> {
        let extra = if ride_along.dims()[0] == 0 {
            Vec::new()
        } else {
            read(ride_along, "rollout values")?
        };
        check(&extra)?;
        let samples = batch.obs.dims()[0];
        let host = HostBatch {
            obs: read(batch.obs.clone(), "rollout observations")?,
            actions: read(batch.actions.clone(), "rollout actions")?,
            log_probs: read(batch.log_probs.clone(), "rollout log-probabilities")?,
            values: read(batch.values.clone(), "rollout values")?,
            advantages: read(batch.advantages.clone(), "advantages")?,
            returns: read(batch.returns.clone(), "returns")?,
        };
        let mut state = self.take_host_state()?;
        if state.params.len() != net.n_params {
            self.put_host_state(state, false);
            return Err(PpoError::read("parameters", "not the layout's length"));
        }
        let cfg = self.cfg.clone();
        let per_minibatch = cfg.target_kl.is_some();
        let betas = (self.adam.beta_1, self.adam.beta_2, self.adam.epsilon);
        let mut time = self.adam.time;
        let mut sums = [0f64; 6]; // policy, value, entropy, kl, clipfrac, grad norm
        let mut stats = UpdateStats {
            learning_rate: lr,
            ..UpdateStats::default()
        };
        let mut minibatches = 0usize;
        let orders = self.shuffled_orders(samples, update);
        'epochs: for order in &orders {
            for idx in order.chunks(cfg.batch_size) {
                let [loss, pl, vl, ent, kl, cf, grad_sq] =
                    self.host_work
                        .minibatch(net, &cfg, &state.params, &host, idx);
                if let Some(target) = cfg.target_kl
                    && kl > 1.5 * target
                {
                    break 'epochs;
                }
                let norm = grad_sq.sqrt();
                if !(loss.is_finite() && norm.is_finite()) {
                    // As the burn path that reads each minibatch: the steps before this one
                    // stay applied, this one is not taken.
                    self.put_host_state(state, minibatches > 0);
                    self.adam.time = time;
                    return Err(PpoError::Diverged {
                        update,
                        what: format!(
                            "loss {loss} / gradient norm {norm} in minibatch {} of the update, \
                             which was not applied",
                            minibatches + 1
                        ),
                    });
                }
                let max = cfg.max_grad_norm;
                // As the burn paths: torch's `clip_grad_norm_` where no host decision is made,
                // clipping only above the norm where one is.
                let factor = if max <= 0.0 {
                    None
                } else if per_minibatch {
                    (norm > max).then(|| max / (norm + 1e-6))
                } else {
                    Some((max / (norm + 1e-6)).min(1.0))
                };
                time += 1;
                state.step(
                    &self.host_work.gradient(net),
                    factor,
                    betas,
                    time,
                    lr as f32,
                );
                for (s, v) in sums.iter_mut().zip([pl, vl, ent, kl, cf, norm]) {
                    *s += v as f64;
                }
                minibatches += 1;
            }
            stats.epochs += 1;
        }
        // The parameters back to the model; Adam's moments stay on the host.
        self.put_host_state(state, minibatches > 0);
        self.adam.time = time;
        stats.set_means(&sums, minibatches, self.scaler.scale());
        Ok((stats, extra))
    }

    /// The losses and gradients of one minibatch (`idx` into `batch`), the loss scaled by
    /// `scale` before the backward pass.
    fn minibatch(&self, batch: &UpdateBatch, idx: Tensor<1, Int>, scale: Tensor<1>) -> Minibatch {
        let cfg = &self.cfg;
        let dtype = cfg.precision.compute_dtype();
        let b = idx.dims()[0];
        let obs = batch.obs.clone().select(0, idx.clone());
        let actions = batch.actions.clone().select(0, idx.clone());
        let old_logp = batch.log_probs.clone().select(0, idx.clone());
        let old_values = batch.values.clone().select(0, idx.clone());
        let mut adv = batch.advantages.clone().select(0, idx.clone());
        let returns = batch.returns.clone().select(0, idx);

        let (mean, value) = self.model.forward(obs, dtype);
        let log_std = self.model.log_std();
        let logp = gaussian_log_prob(mean, log_std.clone(), actions);
        let log_ratio = logp.sub(old_logp);
        let ratio = log_ratio.clone().exp();
        if cfg.normalize_advantage && b > 1 {
            // Unbiased std, as torch's `adv.std()` in SB3.
            let m = adv.clone().mean();
            let centred = adv.sub(m.expand([b]));
            let std = centred
                .clone()
                .square()
                .sum()
                .div_scalar((b - 1) as f32)
                .sqrt();
            adv = centred.div(std.add_scalar(1e-8).expand([b]));
        }
        let c = cfg.clip_range;
        let surrogate = adv.clone().neg().mul(ratio.clone());
        let clipped = adv.neg().mul(ratio.clone().clamp(1.0 - c, 1.0 + c));
        let policy_loss = surrogate.max_pair(clipped).mean();
        let v_pred = match cfg.clip_range_vf {
            Some(cv) => old_values.clone().add(value.sub(old_values).clamp(-cv, cv)),
            None => value,
        };
        let value_loss = returns.sub(v_pred).square().mean();
        let entropy = gaussian_entropy(log_std);
        let loss = policy_loss
            .clone()
            .add(value_loss.clone().mul_scalar(cfg.vf_coef))
            .sub(entropy.clone().mul_scalar(cfg.ent_coef));

        let ratio_d = ratio.detach();
        let approx_kl = ratio_d
            .clone()
            .sub_scalar(1.0)
            .sub(log_ratio.detach())
            .mean();
        let clipfrac = ratio_d.sub_scalar(1.0).abs().greater_elem(c).float().mean();

        let grads = loss.clone().mul(scale).backward();
        let grads = GradientsParams::from_grads(grads, &self.model);
        let grad_sq = self.grad_sq_sum(&grads);
        Minibatch {
            diagnostics: Tensor::cat(
                vec![
                    loss.detach(),
                    policy_loss.detach(),
                    value_loss.detach(),
                    entropy.detach(),
                    approx_kl,
                    clipfrac,
                    grad_sq,
                ],
                0,
            ),
            grads,
        }
    }

    /// The update without host decisions: gradient clipping and f16's loss scaling are
    /// computed on the device and the diagnostics are summed there; one read at the end, with
    /// `ride_along`.
    fn update_reading_once(
        &mut self,
        batch: &UpdateBatch,
        lr: f64,
        update: usize,
        ride_along: Tensor<1>,
        check: &mut dyn FnMut(&[f32]) -> Result<(), PpoError>,
    ) -> Result<(UpdateStats, Vec<f32>), PpoError> {
        let samples = batch.obs.dims()[0];
        let batch_size = self.cfg.batch_size;
        let max_norm = self.cfg.max_grad_norm;
        let scaling = self.cfg.precision.scales_loss();
        let dev = self.device.clone();
        let one = |v: f32| Tensor::<1>::from_data(TensorData::new(vec![v], [1]), &dev);
        // The loss scaler's state on the device (see `LossScaler::update`).
        let mut scale = one(self.scaler.scale());
        let mut clean = one(self.scaler.clean_steps() as f32);
        let interval = self.scaler.growth_interval() as f32;
        // Σ over minibatches of [loss, policy, value, entropy, kl, clipfrac, ‖g‖] of the
        // applied steps, then the count of non-finite ones.
        let mut sums = Tensor::<1>::zeros([8], &self.device);
        let mut minibatches = 0usize;
        for perm in self.epoch_orders(samples, update) {
            for start in (0..samples).step_by(batch_size) {
                let b = (start + batch_size).min(samples) - start;
                let Minibatch {
                    diagnostics,
                    mut grads,
                } = self.minibatch(batch, perm.clone().narrow(0, start, b), scale.clone());
                let mut grad = self.flat_grads(&mut grads);
                // The norm of the unscaled gradients.
                let norm = diagnostics
                    .clone()
                    .narrow(0, 6, 1)
                    .sqrt()
                    .div(scale.clone());
                let finite = diagnostics
                    .clone()
                    .narrow(0, 0, 1)
                    .add(norm.clone())
                    .is_finite();
                let mut factor = scale.clone().recip();
                if max_norm > 0.0 {
                    // min(1, max / (‖g‖ + 1e-6)), as torch's `clip_grad_norm_`.
                    let clip = norm
                        .clone()
                        .add_scalar(1e-6)
                        .recip()
                        .mul_scalar(max_norm)
                        .clamp_max(1.0);
                    factor = factor.mul(clip);
                }
                if scaling || max_norm > 0.0 {
                    grad = grad.mul(factor);
                }
                self.adam_step(lr, grad, scaling.then(|| finite.clone()));
                let applied = Tensor::cat(vec![diagnostics.narrow(0, 0, 6), norm], 0);
                let row = if scaling {
                    // Clean steps in a row; the scale halves on an overflow and doubles after
                    // `interval` clean steps, within its bounds.
                    let counted = clean
                        .clone()
                        .add_scalar(1.0)
                        .mask_fill(finite.clone().bool_not(), 0.0);
                    let grow = counted.clone().greater_equal_elem(interval);
                    let grown = scale.clone().mul_scalar(2.0).clamp_max(MAX_LOSS_SCALE);
                    let backed = scale.clone().mul_scalar(0.5).clamp_min(MIN_LOSS_SCALE);
                    scale =
                        backed.mask_where(finite.clone(), scale.mask_where(grow.clone(), grown));
                    clean = counted.mask_fill(grow, 0.0);
                    Tensor::zeros([7], &self.device).mask_where(finite.clone().expand([7]), applied)
                } else {
                    applied
                };
                sums = sums.add(Tensor::cat(vec![row, finite.bool_not().float()], 0));
                minibatches += 1;
            }
        }
        let n_sums = 10;
        let read = tradetune_device::readback::read_f32(
            Tensor::cat(vec![sums, scale, clean, ride_along], 0),
            "update: diagnostics",
        )
        .map_err(|e| PpoError::read("update diagnostics", e))?;
        if read.len() < n_sums {
            return Err(PpoError::read("update diagnostics", "wrong length"));
        }
        let (sums, extra) = read.split_at(n_sums);
        check(extra)?;
        let bad = sums[7].round() as usize;
        if scaling {
            self.scaler
                .set_from_device(sums[8], sums[9].round() as usize, bad);
            if self.scaler.underflowed() {
                return Err(PpoError::LossScaleUnderflow {
                    update,
                    floor: MIN_LOSS_SCALE,
                });
            }
        } else if bad > 0 || !sums[0].is_finite() {
            return Err(PpoError::Diverged {
                update,
                what: format!(
                    "loss or gradient norm not finite in {bad} of {minibatches} minibatches (mean loss {})",
                    sums[0] / minibatches.max(1) as f32
                ),
            });
        }
        let steps = minibatches - bad.min(minibatches);
        let n = steps.max(1) as f32;
        let stats = UpdateStats {
            learning_rate: lr,
            policy_loss: sums[1] / n,
            value_loss: sums[2] / n,
            entropy: sums[3] / n,
            approx_kl: sums[4] / n,
            clipfrac: sums[5] / n,
            grad_norm: sums[6] / n,
            steps,
            skipped_steps: minibatches - steps,
            epochs: self.cfg.n_epochs,
            loss_scale: self.scaler.scale(),
            ..UpdateStats::default()
        };
        Ok((stats, extra.to_vec()))
    }

    /// The update with a host decision per minibatch (`target_kl`'s early stop; an f16 loss is
    /// then scaled on the host too): one read of the minibatch's diagnostics before its
    /// optimiser step.
    fn update_reading_each_minibatch(
        &mut self,
        batch: &UpdateBatch,
        lr: f64,
        update: usize,
    ) -> Result<UpdateStats, PpoError> {
        let samples = batch.obs.dims()[0];
        let batch_size = self.cfg.batch_size;
        let mut sums = [0f64; 6]; // policy, value, entropy, kl, clipfrac, grad norm
        let mut minibatches = 0usize;
        let mut stats = UpdateStats {
            learning_rate: lr,
            ..UpdateStats::default()
        };
        'epochs: for perm in self.epoch_orders(samples, update) {
            for start in (0..samples).step_by(batch_size) {
                let b = (start + batch_size).min(samples) - start;
                let scale = self.scaler.scale();
                let Minibatch {
                    diagnostics,
                    mut grads,
                } = self.minibatch(
                    batch,
                    perm.clone().narrow(0, start, b),
                    Tensor::from_data(TensorData::new(vec![scale], [1]), &self.device),
                );
                let read: Vec<f32> =
                    tradetune_device::readback::read_f32(diagnostics, "update: diagnostics")
                        .map_err(|e| PpoError::read("update diagnostics", e))?;
                let [loss_v, pl, vl, ent, kl, cf, gsq] = read[..] else {
                    return Err(PpoError::read("update diagnostics", "wrong length"));
                };
                if let Some(target) = self.cfg.target_kl
                    && kl > 1.5 * target
                {
                    break 'epochs;
                }
                let grad_norm = gsq.sqrt() / scale;
                let finite = loss_v.is_finite() && grad_norm.is_finite();
                match self.scaler.update(finite) {
                    ScaleStep::Skip if !self.cfg.precision.scales_loss() => {
                        return Err(PpoError::Diverged {
                            update,
                            what: format!("loss {loss_v} / gradient norm {grad_norm}"),
                        });
                    }
                    ScaleStep::Skip => {
                        stats.skipped_steps += 1;
                        if self.scaler.underflowed() {
                            return Err(PpoError::LossScaleUnderflow {
                                update,
                                floor: tradetune_device::precision::MIN_LOSS_SCALE,
                            });
                        }
                        continue;
                    }
                    ScaleStep::Apply => {}
                }
                let max = self.cfg.max_grad_norm;
                let clip = if max > 0.0 && grad_norm > max {
                    max / (grad_norm + 1e-6)
                } else {
                    1.0
                };
                let factor = clip / scale;
                let mut grad = self.flat_grads(&mut grads);
                if factor != 1.0 {
                    grad = grad.mul_scalar(factor);
                }
                self.adam_step(lr, grad, None);
                for (s, v) in sums.iter_mut().zip([pl, vl, ent, kl, cf, grad_norm]) {
                    *s += v as f64;
                }
                minibatches += 1;
            }
            stats.epochs += 1;
        }
        stats.set_means(&sums, minibatches, self.scaler.scale());
        Ok(stats)
    }

    /// Σ‖g‖² over all parameters, `[1]`.
    fn grad_sq_sum(&self, grads: &GradientsParams) -> Tensor<1> {
        let parts: Vec<Tensor<1>> = self
            .params
            .iter()
            .filter_map(|&(id, rank)| match rank {
                1 => grads.get::<1>(id).map(|g| g.square().sum()),
                2 => grads.get::<2>(id).map(|g| g.square().sum()),
                _ => None,
            })
            .collect();
        if parts.is_empty() {
            return Tensor::zeros([1], &self.device);
        }
        Tensor::cat(parts, 0).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ppo::model::{ActivationKind, ActorCriticConfig, NetArch};

    /// A made-up rollout of `s` samples: values in ranges that clip some ratios and values.
    fn batch(s: usize, d: usize, a: usize, device: &Device) -> (UpdateBatch, HostBatch) {
        let wave = |n: usize, k: usize, scale: f32| -> Vec<f32> {
            (0..n)
                .map(|i| (((i * k + 7) % 97) as f32 / 48.5 - 1.0) * scale)
                .collect()
        };
        let host = HostBatch {
            obs: wave(s * d, 31, 2.0),
            actions: wave(s * a, 17, 1.5),
            log_probs: wave(s, 13, 0.3).iter().map(|v| v - 1.8).collect(),
            values: wave(s, 11, 0.5),
            advantages: wave(s, 29, 1.0).iter().map(|v| v + 0.2).collect(),
            returns: wave(s, 7, 0.8),
        };
        let t1 = |v: &Vec<f32>| Tensor::<1>::from_data(TensorData::new(v.clone(), [s]), device);
        let t2 = |v: &Vec<f32>, w: usize| {
            Tensor::<2>::from_data(TensorData::new(v.clone(), [s, w]), device)
        };
        let burn = UpdateBatch {
            obs: t2(&host.obs, d),
            actions: t2(&host.actions, a),
            log_probs: t1(&host.log_probs),
            values: t1(&host.values),
            advantages: t1(&host.advantages),
            returns: t1(&host.returns),
        };
        (burn, host)
    }

    fn config(activation: ActivationKind, clip_vf: Option<f32>, normalize: bool) -> PpoConfig {
        PpoConfig::new()
            .with_n_steps(16)
            .with_batch_size(24)
            .with_n_epochs(3)
            .with_clip_range_vf(clip_vf)
            .with_normalize_advantage(normalize)
            .with_ent_coef(0.01)
            .with_learning_rate(1e-3)
            .with_policy(
                ActorCriticConfig::new()
                    .with_net_arch(NetArch::new().with_pi(vec![32, 16]).with_vf(vec![24]))
                    .with_activation(activation)
                    .with_log_std_init(-0.4),
            )
    }

    fn close(got: &[f32], want: &[f32], tol: f32, what: &str) {
        assert_eq!(got.len(), want.len(), "{what}");
        let scale = want.iter().fold(0f32, |m, w| m.max(w.abs()));
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            assert!(
                (g - w).abs() <= tol * (scale + w.abs()).max(1e-6),
                "{what}[{i}]: host {g}, burn {w} (largest {scale})"
            );
        }
    }

    /// The host step's gradient and diagnostics against burn's autodiff on the same minibatch,
    /// for every activation, with and without the value clipping and advantage normalisation.
    #[test]
    fn the_host_gradients_are_burns() {
        let device = Device::flex().autodiff();
        let (d, a, s) = (9, 2, 48);
        for (activation, clip_vf, normalize) in [
            (ActivationKind::Tanh, None, true),
            (ActivationKind::Tanh, Some(0.1), false),
            (ActivationKind::Relu, Some(0.2), true),
            (ActivationKind::Elu, None, true),
            (ActivationKind::Silu, Some(0.05), true),
        ] {
            let cfg = config(activation, clip_vf, normalize);
            let model = cfg.policy.init(d, a, 3, &device);
            let learner = Learner::new(model, &cfg, &device);
            let net = learner
                .host
                .clone()
                .expect("the CPU device in f32 has a host layout");
            let (burn_batch, host_batch) = batch(s, d, a, &device);
            let idx: Vec<usize> = (0..24).map(|i| (i * 5 + 3) % s).collect();
            let idx_t = Tensor::<1, Int>::from_data(
                TensorData::new(idx.iter().map(|&i| i as i64).collect::<Vec<_>>(), [24]),
                &device,
            );
            let one = Tensor::<1>::from_data(TensorData::new(vec![1.0f32], [1]), &device);
            let Minibatch {
                diagnostics,
                mut grads,
            } = learner.minibatch(&burn_batch, idx_t, one);
            let want_grad: Vec<f32> = learner.flat_grads(&mut grads).try_into_vec_as().unwrap();
            let want_diag: Vec<f32> = diagnostics.try_into_vec_as().unwrap();
            let params = learner.model().flat_params().unwrap();
            let mut work = HostWork::default();
            let diag = work.minibatch(&net, &cfg, &params, &host_batch, &idx);
            // The gradient's pieces cover every parameter once.
            let mut grad = vec![f32::NAN; params.len()];
            for (offset, g) in work.gradient(&net) {
                for (i, &v) in g.iter().enumerate() {
                    assert!(grad[offset + i].is_nan(), "parameter {} twice", offset + i);
                    grad[offset + i] = v;
                }
            }
            let what = format!("{activation:?} clip_vf {clip_vf:?} normalise {normalize}");
            close(&grad, &want_grad, 2e-5, &format!("{what}: gradient"));
            close(&diag, &want_diag, 2e-5, &format!("{what}: diagnostics"));
            // The case exercises both branches of each clip.
            assert!(
                diag[5] > 0.0 && diag[5] < 1.0,
                "{what}: clipfrac {}",
                diag[5]
            );
        }
    }

    /// Whole updates (several epochs of minibatches, a short last one, Adam from zero
    /// moments, then from the first update's), with and without `target_kl`: the host path
    /// follows the burn path.
    #[test]
    fn a_host_update_follows_the_burn_path() {
        let device = Device::flex().autodiff();
        let (d, a, s) = (9, 2, 56);
        for target_kl in [None, Some(0.5), Some(1e-4)] {
            let cfg = config(ActivationKind::Tanh, Some(0.2), true).with_target_kl(target_kl);
            let (burn_batch, _) = batch(s, d, a, &device);
            let mut runs = Vec::new();
            for host in [true, false] {
                let model = cfg.policy.init(d, a, 5, &device);
                let mut learner = Learner::new(model, &cfg, &device);
                learner.set_host_update(host);
                assert_eq!(learner.uses_host_update(), host);
                let mut stats = Vec::new();
                for update in 0..2 {
                    let ride = Tensor::<1>::from_data(TensorData::new(vec![4.0f32], [1]), &device);
                    let mut seen = Vec::new();
                    let (st, extra) = learner
                        .update(&burn_batch, 1e-3, update, ride, &mut |x| {
                            seen.extend_from_slice(x);
                            Ok(())
                        })
                        .unwrap();
                    assert_eq!((extra, seen), (vec![4.0], vec![4.0]));
                    stats.push(st);
                }
                runs.push((
                    learner.model().flat_params().unwrap(),
                    stats,
                    learner.adam.time,
                ));
            }
            let (host, burn) = (&runs[0], &runs[1]);
            let what = format!("target_kl {target_kl:?}");
            assert_eq!(host.2, burn.2, "{what}: Adam steps");
            for (h, b) in host.1.iter().zip(&burn.1) {
                assert_eq!((h.steps, h.epochs), (b.steps, b.epochs), "{what}");
                close(
                    &[
                        h.policy_loss,
                        h.value_loss,
                        h.entropy,
                        h.approx_kl,
                        h.clipfrac,
                        h.grad_norm,
                    ],
                    &[
                        b.policy_loss,
                        b.value_loss,
                        b.entropy,
                        b.approx_kl,
                        b.clipfrac,
                        b.grad_norm,
                    ],
                    1e-4,
                    &format!("{what}: diagnostics"),
                );
            }
            // Adam normalises each step to about lr per parameter, so compare the moves.
            let start = cfg.policy.init(d, a, 5, &device).flat_params().unwrap();
            let moved = |p: &[f32]| p.iter().zip(&start).map(|(p, s)| p - s).collect::<Vec<_>>();
            close(
                &moved(&host.0),
                &moved(&burn.0),
                1e-3,
                &format!("{what}: parameters"),
            );
        }
    }

    /// Adam's state the host path leaves is burn's format: saved, loaded into a burn-path
    /// learner, the next update matches the host learner's.
    #[test]
    fn the_host_path_saves_and_resumes_adam() {
        let device = Device::flex().autodiff();
        let (d, a, s) = (9, 2, 48);
        let cfg = config(ActivationKind::Tanh, None, true);
        let (burn_batch, _) = batch(s, d, a, &device);
        let empty = || Tensor::<1>::zeros([0], &device);
        let mut host = Learner::new(cfg.policy.init(d, a, 8, &device), &cfg, &device);
        host.update(&burn_batch, 1e-3, 0, empty(), &mut |_| Ok(()))
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("adam.bpk");
        host.save_optimizer(&path).unwrap();
        let mut resumed = Learner::new(cfg.policy.init(d, a, 8, &device), &cfg, &device);
        resumed.set_model(host.model().clone());
        resumed.load_optimizer(&path).unwrap();
        resumed.set_host_update(false);
        assert_eq!(resumed.adam.time, host.adam.time);
        host.update(&burn_batch, 1e-3, 1, empty(), &mut |_| Ok(()))
            .unwrap();
        resumed
            .update(&burn_batch, 1e-3, 1, empty(), &mut |_| Ok(()))
            .unwrap();
        let (h, r) = (
            host.model().flat_params().unwrap(),
            resumed.model().flat_params().unwrap(),
        );
        close(&h, &r, 1e-4, "parameters after a resumed update");
    }

    /// A non-finite loss stops the host update with an error, before any step reaches the
    /// model.
    #[test]
    fn a_diverging_host_update_leaves_the_model_as_it_was() {
        let device = Device::flex().autodiff();
        let (d, a, s) = (9, 2, 48);
        let cfg = config(ActivationKind::Tanh, None, true);
        let (mut burn_batch, _) = batch(s, d, a, &device);
        // Every minibatch, the first included, has a non-finite value target.
        let returns = vec![f32::NAN; s];
        burn_batch.returns = Tensor::from_data(TensorData::new(returns, [s]), &device);
        let mut learner = Learner::new(cfg.policy.init(d, a, 8, &device), &cfg, &device);
        let before = learner.model().flat_params().unwrap();
        let err = learner
            .update(
                &burn_batch,
                1e-3,
                3,
                Tensor::zeros([0], &device),
                &mut |_| Ok(()),
            )
            .unwrap_err();
        assert!(
            matches!(&err, PpoError::Diverged { update: 3, what } if what.contains("not finite") || what.contains("NaN")),
            "{err}"
        );
        assert_eq!(learner.model().flat_params().unwrap(), before);
        assert_eq!(learner.adam.time, 0);
    }
}
