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

use burn::module::{Module, ModuleMapper, ModuleVisitor, Param, ParamId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use burn::optim::{Adam, AdamState, AdaptiveMomentumState};
use burn::optim::{GradientsParams, LearningRate, ModuleOptimizer, Optimizer};
use burn::tensor::{Bool, Device, Int, Shape, Tensor, TensorData};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use serde::{Deserialize, Serialize};

use crate::ppo::config::PpoConfig;
use crate::ppo::error::PpoError;
use crate::ppo::model::{ActorCritic, gaussian_entropy, gaussian_log_prob};
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

impl Learner {
    /// A learner for `model` (on the autodiff training device `device`).
    pub fn new(model: ActorCritic, cfg: &PpoConfig, device: &Device) -> Self {
        let (slots, slot_of) = layout(&model);
        Self {
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
        let (slots, slot_of) = layout(&model);
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
        if let Some((m1, m2)) = &self.adam.moments {
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
        let mut order: Vec<i64> = (0..samples as i64).collect();
        // This update's minibatch orders: keyed by its number (see `stream_rng`).
        self.rng = crate::ppo::stream_rng(self.cfg.seed, crate::ppo::SHUFFLE_STREAM, update as u64);
        (0..self.cfg.n_epochs)
            .map(|_| {
                order.shuffle(&mut self.rng);
                Tensor::<1, Int>::from_data(TensorData::new(order.clone(), [samples]), &self.device)
            })
            .collect()
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
        let n = minibatches.max(1) as f64;
        stats.policy_loss = (sums[0] / n) as f32;
        stats.value_loss = (sums[1] / n) as f32;
        stats.entropy = (sums[2] / n) as f32;
        stats.approx_kl = (sums[3] / n) as f32;
        stats.clipfrac = (sums[4] / n) as f32;
        stats.grad_norm = (sums[5] / n) as f32;
        stats.steps = minibatches;
        stats.loss_scale = self.scaler.scale();
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
