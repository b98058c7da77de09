//! Adam over one flat parameter buffer, and its checkpoint in burn's format.
//!
//! Adam (Kingma & Ba 2015, burn's `Adam` arithmetic op for op) over all parameters at once:
//! the gradients are concatenated into one flat buffer, so a step is a dozen tensor operations
//! instead of a dozen per parameter tensor (small networks are dominated by per-op overhead).
//! Each element sees exactly the operations of burn's per-tensor Adam, in the same order.
//!
//! A step can be gated by a flag on the device: f16's dynamic loss scaling skips an overflowing
//! step without reading the gradients' finiteness back. A discarded step leaves the parameters
//! and both moments as they were (selected, not recomputed, so a non-finite gradient never
//! reaches them); the step counter, a host integer, counts it anyway, so the bias correction
//! after a skip is that of one step later (as burn's Adam behind a gate). Not counting it would
//! need the skip known on the host before the next step's corrections (a read per minibatch,
//! what the gate avoids) or the corrections indexed on the device. A skip decided on the host
//! (f16 with `target_kl`) counts it too, so that one configuration follows one trajectory
//! whichever side decides (PyTorch's `GradScaler` does not advance the optimiser instead).
//!
//! On a GPU each parameter's slot starts and ends at a multiple of [`GPU_ALIGN`] elements (the
//! gaps are zeros that Adam leaves at zero): burn's slice of a buffer is then a view, where an
//! unaligned one is a copy kernel per parameter per step. On the CPU the slots are packed.
//!
//! The host engine ([`super::host`]) runs the same arithmetic on host buffers
//! ([`crate::ppo::host_update::HostAdamState`]) with this layout, β and ε, and this step
//! counter; the moments move between the two as the engines change.

use std::collections::HashMap;

use burn::module::{Module, ModuleMapper, ModuleVisitor, Param, ParamId};
use burn::optim::LearningRate;
use burn::tensor::{Device, FloatDType, Shape, Tensor};

use crate::ppo::config::PpoConfig;
use crate::ppo::error::PpoError;
use crate::ppo::host_policy::host as read;
use crate::ppo::model::ActorCritic;

mod checkpoint;

/// Where each parameter lies in the flat buffers of [`FlatAdam`].
#[derive(Debug, Clone)]
pub(super) struct Slot {
    pub id: ParamId,
    pub shape: Shape,
    pub offset: usize,
    pub len: usize,
}

/// Adam's bias corrections for a step ([`FlatAdam::corrections`]), and its learning rate.
// One per step, moved once: boxing the tensors would only add an allocation.
#[allow(clippy::large_enum_variant)]
pub(super) enum Corrections {
    /// On the host, as kernel arguments, with the learning rate.
    Host([f32; 2], LearningRate),
    /// `[1]` each, on the device, the learning rate with them: a step whose number the device
    /// holds (a replayed one).
    #[cfg_attr(not(feature = "wgpu"), allow(dead_code))]
    Device {
        factor: Tensor<1>,
        epsilon: Tensor<1>,
        lr: Tensor<1>,
    },
}

/// The alignment of the slots on a GPU, in elements: 256 bytes in f16 (512 in f32), wgpu's
/// largest `min_storage_buffer_offset_alignment` and a multiple of the other backends'
/// alignment, so that slices of the f32 buffer and of its f16 copy are views alike.
pub(super) const GPU_ALIGN: usize = 128;

/// Adam's state over the model's parameters as one flat buffer (see the module docs).
#[derive(Clone)]
pub(super) struct FlatAdam {
    /// Each slot's start and length are padded to a multiple of this (1: packed).
    align: usize,
    beta_1: f32,
    beta_2: f32,
    epsilon: f32,
    /// `[n_params]` first and second moments (on the inner, non-autodiff device); `None`
    /// before the first step, and while the host engine holds them.
    pub moments: Option<(Tensor<1>, Tensor<1>)>,
    /// Steps taken (Adam's `t`), by either engine.
    pub time: usize,
    /// Each parameter's place in the flat buffers, in the model's order.
    slots: Vec<Slot>,
    /// `slots` by id: (offset, length).
    slot_of: HashMap<ParamId, (usize, usize)>,
    /// The slots whose slices are views (both ends aligned), for [`Self::place_views_into`].
    view_slots: HashMap<ParamId, (usize, usize)>,
    /// The model's parameters as one flat buffer (inner device), whose slices they are since
    /// the last step; `None` until a step (or after the model was replaced, or while the host
    /// engine holds the parameters).
    pub flat_params: Option<Tensor<1>>,
    /// The run's compute dtype, and [`Self::flat_params`] cast to it where that is not f32
    /// (made by each step, so that a minibatch's weights are its slices instead of a cast
    /// kernel per weight; valid only beside `flat_params`).
    compute: FloatDType,
    flat_compute: Option<Tensor<1>>,
}

impl FlatAdam {
    /// β₁ = 0.9, β₂ = 0.999 (burn's and torch's defaults) and the config's ε, over the
    /// parameters of `model`, each slot aligned to `align` elements (1: packed).
    pub fn new(cfg: &PpoConfig, model: &ActorCritic, align: usize) -> Self {
        let align = align.max(1);
        let (slots, slot_of) = layout(model, align);
        Self {
            align,
            beta_1: 0.9,
            beta_2: 0.999,
            epsilon: cfg.adam_eps,
            moments: None,
            time: 0,
            slots,
            view_slots: views(&slot_of, align),
            slot_of,
            flat_params: None,
            compute: cfg.precision.compute_dtype(),
            flat_compute: None,
        }
    }

    /// Takes the layout of a new model; the moments stay (as burn's Adam's would).
    pub fn relayout(&mut self, model: &ActorCritic) {
        (self.slots, self.slot_of) = layout(model, self.align);
        self.view_slots = views(&self.slot_of, self.align);
        self.flat_params = None;
    }

    /// The parameters' places, in the model's order.
    pub fn slots(&self) -> &[Slot] {
        &self.slots
    }

    /// The zeros after `slot` up to the next slot (or the end of the buffer).
    fn gap(&self, slot: &Slot) -> usize {
        slot.len.next_multiple_of(self.align) - slot.len
    }

    /// `parts` (one per slot, in order) as one flat buffer on `device`, the gaps zero.
    pub(super) fn join(&self, parts: Vec<Tensor<1>>, device: &Device) -> Tensor<1> {
        self.join_with(parts, &mut |n| Tensor::zeros([n], device))
    }

    /// `parts` (one per slot, in order) as one flat buffer, the gaps `zeros(length)`.
    fn join_with(
        &self,
        parts: Vec<Tensor<1>>,
        zeros: &mut dyn FnMut(usize) -> Tensor<1>,
    ) -> Tensor<1> {
        let mut all = Vec::with_capacity(2 * parts.len());
        for (slot, part) in self.slots.iter().zip(parts) {
            all.push(part);
            let gap = self.gap(slot);
            if gap > 0 {
                all.push(zeros(gap));
            }
        }
        Tensor::cat(all, 0)
    }

    /// `(β₁, β₂, ε)`.
    pub fn betas(&self) -> (f32, f32, f32) {
        (self.beta_1, self.beta_2, self.epsilon)
    }

    /// Adam's bias corrections for its step number `time` (1 for the first):
    /// `[√(1 − β₂ᵗ) / (1 − β₁ᵗ), ε·√(1 − β₂ᵗ)]`, what multiplies the first moment and what is
    /// added to the second's root.
    pub fn corrections(&self, time: usize) -> [f32; 2] {
        let time = time as i32;
        let bias_correction2_sqrt = (1.0 - self.beta_2.powi(time)).sqrt();
        [
            bias_correction2_sqrt / (1.0 - self.beta_1.powi(time)),
            self.epsilon * bias_correction2_sqrt,
        ]
    }

    /// One step of `params` (flat) with `grad` (flat), kept only where `gate` (`[1]`) is 1.
    fn step(
        &mut self,
        lr: LearningRate,
        params: Tensor<1>,
        grad: Tensor<1>,
        gate: Option<Tensor<1>>,
    ) -> Tensor<1> {
        let (m1_old, m2_old) = match self.moments.take() {
            Some(m) => m,
            // Zero moments give burn's first step exactly (0·β + x = x).
            None => (params.zeros_like(), params.zeros_like()),
        };
        self.time += 1;
        let corrections = Corrections::Host(self.corrections(self.time), lr);
        let (stepped, m1, m2) = self.stepped(params, m1_old, m2_old, grad, gate, corrections);
        self.moments = Some((m1, m2));
        stepped
    }

    /// Adam's step as a function: the parameters and both moments after one step of `params`
    /// with `grad` from the moments `m1_old` and `m2_old` (all flat), kept only where `gate`
    /// (`[1]`) is 1, with the bias `corrections` of the step's number and its learning rate.
    pub fn stepped(
        &self,
        params: Tensor<1>,
        m1_old: Tensor<1>,
        m2_old: Tensor<1>,
        grad: Tensor<1>,
        gate: Option<Tensor<1>>,
        corrections: Corrections,
    ) -> (Tensor<1>, Tensor<1>, Tensor<1>) {
        let m1 = m1_old
            .clone()
            .mul_scalar(self.beta_1)
            .add(grad.clone().mul_scalar(1.0 - self.beta_1));
        let m2 = m2_old
            .clone()
            .mul_scalar(self.beta_2)
            .add(grad.square().mul_scalar(1.0 - self.beta_2));
        let stepped = match corrections {
            Corrections::Host([combined_factor, epsilon], lr) => {
                let delta = m1
                    .clone()
                    .mul_scalar(combined_factor)
                    .div(m2.clone().sqrt().add_scalar(epsilon));
                params.clone().sub(delta.mul_scalar(lr))
            }
            // The same arithmetic, the factors read from the device.
            Corrections::Device {
                factor,
                epsilon,
                lr,
            } => {
                let delta = m1.clone().mul(factor).div(m2.clone().sqrt().add(epsilon));
                params.clone().sub(delta.mul(lr))
            }
        };
        match gate {
            None => (stepped, m1, m2),
            Some(gate) => {
                // The gate broadcast by an addition and compared: burn's fusion fuses that
                // mask into the step, not an expanded bool.
                let apply = params.zeros_like().add(gate).greater_elem(0.5);
                (
                    params.mask_where(apply.clone(), stepped),
                    m1_old.mask_where(apply.clone(), m1),
                    m2_old.mask_where(apply, m2),
                )
            }
        }
    }

    /// One Adam step of all of `model`'s parameters with the flat gradient `grad`, kept only
    /// where `gate` (`[1]`) is 1; the parameters become slices of the stepped flat buffer.
    #[cfg(test)]
    pub fn step_model(
        &mut self,
        model: &mut ActorCritic,
        lr: f64,
        grad: Tensor<1>,
        gate: Option<Tensor<1>>,
    ) {
        self.step_flat(model, lr, grad, gate);
        self.place_into(model);
    }

    /// [`Self::step_model`] without placing the parameters into `model`: they are
    /// [`Self::flat_params`] (read with [`Self::current`]) until [`Self::place_into`]. Placing
    /// slices every parameter, a copy kernel for each whose length is not a multiple of the
    /// alignment (the heads' biases and log σ), so the device engine places those once an
    /// update and the others, views, after every step ([`Self::place_views_into`]).
    pub fn step_flat(
        &mut self,
        model: &ActorCritic,
        lr: f64,
        grad: Tensor<1>,
        gate: Option<Tensor<1>>,
    ) {
        let params = match self.flat_params.take() {
            Some(params) => params,
            None => self.joined(model),
        };
        let stepped = self.step(lr, params, grad, gate);
        self.set_params(stepped);
    }

    /// The model's parameters as one flat buffer in this layout (their current values).
    fn joined(&self, model: &ActorCritic) -> Tensor<1> {
        let mut values = FlatValues(HashMap::new());
        model.visit(&mut values);
        let parts: Vec<Tensor<1>> = self
            .slots
            .iter()
            .filter_map(|slot| values.0.remove(&slot.id))
            .collect();
        let device = parts.first().map(|p| p.device());
        match device {
            Some(device) => self.join(parts, &device),
            None => Tensor::cat(parts, 0),
        }
    }

    /// Makes `flat` the parameters ([`Self::flat_params`], and its cast to the compute dtype).
    pub fn set_params(&mut self, flat: Tensor<1>) {
        self.flat_compute =
            (self.compute != FloatDType::F32).then(|| flat.clone().cast(self.compute));
        self.flat_params = Some(flat);
    }

    /// The parameters and both moments as Adam's step reads them (flat): the current
    /// parameters (the model's, joined, before a step), and zero moments before the first step.
    #[cfg_attr(not(feature = "wgpu"), allow(dead_code))]
    pub fn state(&self, model: &ActorCritic) -> (Tensor<1>, Tensor<1>, Tensor<1>) {
        let params = match &self.flat_params {
            Some(params) => params.clone(),
            None => self.joined(model),
        };
        let (m1, m2) = match &self.moments {
            Some(m) => m.clone(),
            None => (params.zeros_like(), params.zeros_like()),
        };
        (params, m1, m2)
    }

    /// This layout, β and ε without any tensor: what a captured minibatch keeps (it reads the
    /// parameters and moments from its own state, and holds no older buffer alive).
    #[cfg_attr(not(feature = "wgpu"), allow(dead_code))]
    pub fn layout_only(&self) -> Self {
        Self {
            moments: None,
            flat_params: None,
            flat_compute: None,
            ..self.clone()
        }
    }

    /// The length of the flat buffers.
    #[cfg_attr(not(feature = "wgpu"), allow(dead_code))]
    pub fn flat_len(&self) -> usize {
        self.slots
            .last()
            .map_or(0, |s| (s.offset + s.len).next_multiple_of(self.align))
    }

    /// Makes every parameter of `model` its slice of [`Self::flat_params`], where Adam has
    /// stepped.
    pub fn place_into(&self, model: &mut ActorCritic) {
        if let Some(flat) = &self.flat_params {
            self.place(model, flat);
        }
    }

    /// [`Self::place_into`] for the parameters whose slices are views (both ends aligned: no
    /// copy, no launch); the others keep their tensors until [`Self::place_into`]. The model
    /// then holds no earlier flat buffer alive beside the current one (its unaligned parameters
    /// are copies, not views).
    pub fn place_views_into(&self, model: &mut ActorCritic) {
        if let Some(flat) = &self.flat_params {
            *model = model.clone().map(&mut FromFlat {
                flat,
                slots: &self.view_slots,
            });
        }
    }

    /// The parameter `id` as Adam last left it: its slice of [`Self::flat_params`] (flat), or
    /// `None` before a step (the model's own tensor is then current).
    pub fn current(&self, id: ParamId) -> Option<Tensor<1>> {
        let flat = self.flat_params.as_ref()?;
        let &(offset, len) = self.slot_of.get(&id)?;
        Some(flat.clone().narrow(0, offset, len))
    }

    /// The parameter `id` as Adam last left it, in the compute dtype (flat): its slice of the
    /// buffer's cast made by the step (a view where the slot is aligned); `None` in f32 or
    /// before a step.
    pub fn current_in_compute(&self, id: ParamId) -> Option<Tensor<1>> {
        self.flat_params.as_ref()?;
        let flat = self.flat_compute.as_ref()?;
        let &(offset, len) = self.slot_of.get(&id)?;
        Some(flat.clone().narrow(0, offset, len))
    }

    /// Where parameter `id` starts in the flat buffers, and its length.
    #[cfg_attr(not(feature = "wgpu"), allow(dead_code))]
    pub fn slot_of(&self, id: ParamId) -> Option<(usize, usize)> {
        self.slot_of.get(&id).copied()
    }

    /// Replaces every parameter of `model` by its slice of `flat` (keeping its autodiff
    /// state).
    pub fn place(&self, model: &mut ActorCritic, flat: &Tensor<1>) {
        *model = model.clone().map(&mut FromFlat {
            flat,
            slots: &self.slot_of,
        });
    }

    /// The gradients of all parameters (burn's autodiff) as one flat buffer in the layout of
    /// [`FlatAdam`].
    #[cfg(test)]
    pub fn flat_grads(
        &self,
        grads: &mut burn::optim::GradientsParams,
        device: &Device,
    ) -> Tensor<1> {
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
                g.unwrap_or_else(|| Tensor::zeros([slot.len], &device.clone().inner()))
            })
            .collect();
        self.join(parts, &device.clone().inner())
    }

    /// The gradients `grads` (flat, by parameter) as one flat buffer in the layout of
    /// [`FlatAdam`], the gaps `zeros(length)`; every parameter has one.
    pub fn flat(
        &self,
        mut grads: HashMap<ParamId, Tensor<1>>,
        zeros: &mut dyn FnMut(usize) -> Tensor<1>,
    ) -> Tensor<1> {
        let parts: Vec<Tensor<1>> = self
            .slots
            .iter()
            .filter_map(|slot| grads.remove(&slot.id))
            .collect();
        debug_assert_eq!(parts.len(), self.slots.len(), "a gradient per parameter");
        self.join_with(parts, zeros)
    }

    /// The model's parameters read to the host, flat (from [`Self::flat_params`] where the
    /// model's parameters are its slices).
    pub fn read_params(&self, model: &ActorCritic) -> Result<Vec<f32>, PpoError> {
        if let Some(flat) = &self.flat_params {
            return read(flat.clone(), "parameters");
        }
        let mut values = FlatValues(HashMap::new());
        model.visit(&mut values);
        let mut out = Vec::with_capacity(self.slots.last().map_or(0, |s| s.offset + s.len));
        for slot in &self.slots {
            match values.0.remove(&slot.id) {
                Some(v) => out.extend(read(v, "parameters")?),
                None => out.extend(std::iter::repeat_n(0.0, slot.len)),
            }
            out.extend(std::iter::repeat_n(0.0, self.gap(slot)));
        }
        Ok(out)
    }
}

/// The slots of `model`'s parameters, by position and by id.
fn layout(model: &ActorCritic, align: usize) -> (Vec<Slot>, HashMap<ParamId, (usize, usize)>) {
    let mut slots = Layout(Vec::new(), align);
    model.visit(&mut slots);
    let by_id = slots.0.iter().map(|s| (s.id, (s.offset, s.len))).collect();
    (slots.0, by_id)
}

/// The slots of `slot_of` whose length is a multiple of `align` (they start at one): their
/// slices are views.
fn views(
    slot_of: &HashMap<ParamId, (usize, usize)>,
    align: usize,
) -> HashMap<ParamId, (usize, usize)> {
    slot_of
        .iter()
        .filter(|(_, (_, len))| len % align == 0)
        .map(|(&id, &slot)| (id, slot))
        .collect()
}

/// Collects every float parameter's slot in the flat layout (slots aligned to `.1`).
struct Layout(Vec<Slot>, usize);

impl ModuleVisitor for Layout {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let shape = param.shape();
        let len = shape.num_elements();
        let offset = self
            .0
            .last()
            .map_or(0, |s| s.offset + s.len.next_multiple_of(self.1));
        self.0.push(Slot {
            id: param.id,
            shape,
            offset,
            len,
        });
    }
}

/// Collects every float parameter's (inner) value, flattened, by id.
pub(super) struct FlatValues(HashMap<ParamId, Tensor<1>>);

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
