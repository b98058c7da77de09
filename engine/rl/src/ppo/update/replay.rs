//! The update's minibatches replayed from a graph captured once a learner (issue 33), where the
//! learner is asked to ([`super::Learner::set_replay_update`], `TRADETUNE_REPLAY_UPDATE=1`).
//!
//! A minibatch on a GPU is, like the rollout's policy step, a few dozen small launches (20 with
//! one hidden layer, 38 with three, on lavapipe) whose cost is what each costs the host: burn's
//! fusion, cubecl's launch preparation, wgpu's bind groups. The update's loop makes four calls
//! a minibatch (the device engine's forward and backward pass, the device tally's judgement,
//! Adam's step, the tally's count), and with the tally's kernel they depend on the minibatch
//! only through its sample indices, Adam's bias corrections (its step's number) and the
//! learning rate, and change only the parameters, Adam's moments and the tally's loss scale,
//! clean steps and sums. Every minibatch steps once (a non-finite one is gated on the device,
//! its step still counted), so each one's indices and step inputs are known before the update
//! starts: its [`Plan`], uploaded once an update as two tables. The first full minibatch
//! captures the four calls ([`tradetune_device::graph`]) as a pure function of device buffers:
//! the state `[parameters | m | v | loss scale, clean steps, sums | k]` (f32, one buffer), the
//! rollout and the plan's tables, whose row `k` (the minibatches replayed so far) the
//! minibatch reads; its output is the next state, `k + 1` with it. Each later minibatch replays
//! the recorded launches and copies the output into the captured state. Each update writes its
//! rollout, its plan and the state it starts from into the captured buffers, and hands the
//! state's parts back at its end, copied out. The host then prepares one launch a minibatch (the
//! state's copy) and one replay, where a direct minibatch prepares every launch; the device runs
//! the same kernels, two more (the state taken apart with the row's indices and step inputs, and
//! the next state put together: [`super::packing`]) and that copy. Held to the direct update by
//! `engine/tests/ppo_replay.rs`.
//!
//! The capture runs the minibatch four times (three warm-ups, each synchronised, and the
//! recorded run, whose output is the first minibatch's next state): pure runs, which write
//! only buffers of their own, once a learner. A minibatch of another length (the last, where
//! the batch size does not divide the rollout) runs directly on the state handed back
//! ([`MinibatchGraph::release`]) and is not in the plan. Only where the tally runs as its kernel
//! on the device (a cubecl device, no `target_kl`, whose early stop reads each minibatch on the
//! host).

use std::cell::RefCell;
use std::ops::Range;
use std::rc::Rc;

use burn::tensor::{Device, Int, Tensor, TensorData};

use super::flat_adam::{Corrections, FlatAdam};
use super::packing::{self, TAIL};
use super::stats::{Carried, kernel_factor, tally_coefs};
use super::{UpdateBatch, kernels, manual};
use crate::ppo::config::PpoConfig;
use crate::ppo::error::PpoError;
use crate::ppo::model::ActorCritic;
use tradetune_device::graph::{self, Graph};

type Step = Box<dyn FnMut() -> Tensor<1>>;

/// An update's replayed minibatches in the loop's order, made before it starts (see the module
/// docs): each one's place, sample indices and `[bias factor, ε term, learning rate]`.
pub(super) struct Plan {
    /// `(epoch, first row)` of each.
    at: Vec<(usize, usize)>,
    /// `[K · B]` the indices; the step inputs, each `[K]`.
    idx: Vec<i64>,
    inputs: [Vec<f32>; 3],
    batch: usize,
    /// Minibatches replayed so far this update.
    pub done: usize,
}

impl Plan {
    /// The full minibatches of `orders` (one shuffle an epoch) in `batch`-sample minibatches,
    /// Adam's step count at `adam.time` before the first, learning rate `lr`.
    pub fn new(orders: &[Vec<usize>], batch: usize, adam: &FlatAdam, lr: f64) -> Self {
        let mut plan = Self {
            at: Vec::new(),
            idx: Vec::new(),
            inputs: Default::default(),
            batch,
            done: 0,
        };
        let mut time = adam.time;
        for (epoch, order) in orders.iter().enumerate() {
            for start in (0..order.len()).step_by(batch.max(1)) {
                time += 1;
                let Some(rows) = order.get(start..start + batch) else {
                    continue;
                };
                plan.at.push((epoch, start));
                plan.idx.extend(rows.iter().map(|&i| i as i64));
                let [factor, epsilon] = adam.corrections(time);
                for (column, v) in plan.inputs.iter_mut().zip([factor, epsilon, lr as f32]) {
                    column.push(v);
                }
            }
        }
        plan
    }

    /// Whether the minibatch starting at row `start` of epoch `epoch` is the next one planned.
    pub fn expects(&self, epoch: usize, start: usize) -> bool {
        self.at.get(self.done) == Some(&(epoch, start))
    }

    /// `[K, B]` the indices and the step inputs, each `[K]`, on `device`.
    fn tables(&self, device: &Device) -> (Tensor<2, Int>, [Tensor<1>; 3]) {
        let k = self.at.len();
        (
            Tensor::from_data(TensorData::new(self.idx.clone(), [k, self.batch]), device),
            self.inputs
                .clone()
                .map(|column| Tensor::from_data(TensorData::new(column, [k]), device)),
        )
    }
}

/// A learner's captured minibatch (see the module docs).
pub(super) struct MinibatchGraph {
    /// `[3P + TAIL]` the state the graph reads: the parameters, Adam's two moments, the loss
    /// scale, the clean steps, the tally's sums and the plan's row. Each captured input is held
    /// here and by the graph's closure, between replays by nothing else, so that burn writes it
    /// in place.
    state: Rc<RefCell<Tensor<1>>>,
    /// `[K, B]` the plan's indices and its step inputs, each `[K]` (apart, so that their
    /// gathers fuse into Adam's step).
    idx: Rc<RefCell<Tensor<2, Int>>>,
    inputs: Rc<RefCell<[Tensor<1>; 3]>>,
    /// The update's rollout.
    batch: Rc<RefCell<UpdateBatch>>,
    graph: Graph<Tensor<1>, Step>,
    /// P, the flat buffers' length.
    params: usize,
    /// Replays left before one fails as a driver's would, where a test asks for it.
    fail_after: Option<usize>,
}

impl MinibatchGraph {
    /// Captures the plan's next minibatch of `batch` (inner tensors), from `adam`'s parameters
    /// and moments and `tally`'s state, and takes the capture's output as the state (the
    /// minibatch stepped): the graph holds the state until [`Self::release`]. `model` gives the
    /// networks' shapes.
    #[allow(clippy::too_many_arguments)]
    pub fn capture(
        model: &ActorCritic,
        adam: &FlatAdam,
        cfg: &PpoConfig,
        batch: &UpdateBatch,
        tally: &Carried<'_>,
        plan: &Plan,
        device: &Device,
    ) -> Result<Self, PpoError> {
        let state = pack(model, adam, tally, plan);
        let p = adam.flat_len();
        let (idx, inputs) = plan.tables(device);
        let state = Rc::new(RefCell::new(own(state)?));
        let idx = Rc::new(RefCell::new(own(idx)?));
        let [factor, epsilon, lr] = inputs.map(own);
        let inputs = Rc::new(RefCell::new([factor?, epsilon?, lr?]));
        let batch = Rc::new(RefCell::new(UpdateBatch {
            obs: own(batch.obs.clone())?,
            actions: own(batch.actions.clone())?,
            log_probs: own(batch.log_probs.clone())?,
            values: own(batch.values.clone())?,
            advantages: own(batch.advantages.clone())?,
            returns: own(batch.returns.clone())?,
        }));
        let step: Step = {
            let (state, idx, inputs, batch) =
                (state.clone(), idx.clone(), inputs.clone(), batch.clone());
            let model = model.clone();
            let cfg = cfg.clone();
            let weights = adam.layout_only();
            let coefs = tally_coefs(&cfg, tally.interval);
            let mut picks = manual::Picks::new(device, true);
            Box::new(move || {
                let s = state.borrow().clone();
                let parts = packing::unpack(&s, &idx.borrow(), &inputs.borrow(), p, true);
                let mut weights = weights.clone();
                weights.set_params(parts.params.clone());
                // The direct minibatch's segments (see `manual::Picks::cut`).
                picks.cut();
                let (losses, grad_sq, grad) = manual::minibatch(
                    &model,
                    &weights,
                    &cfg,
                    &batch.borrow(),
                    parts.idx,
                    parts.scale.clone(),
                    &mut picks,
                );
                picks.cut();
                let out = kernels::tally(
                    losses,
                    grad_sq,
                    &parts.scale,
                    &parts.clean,
                    &parts.sums,
                    &coefs,
                );
                picks.cut();
                let (clip, gate) = kernel_factor(&cfg, out.factor, out.gate);
                let grad = match clip {
                    Some(clip) => grad.mul(clip),
                    None => grad,
                };
                let [factor, epsilon, lr] = parts.inputs;
                let corrections = Corrections::Device {
                    factor,
                    epsilon,
                    lr,
                };
                let (params, m1, m2) =
                    weights.stepped(parts.params, parts.m1, parts.m2, grad, gate, corrections);
                picks.cut();
                // The next state, `k + 1` with it.
                packing::pack(
                    params,
                    m1,
                    m2,
                    out.scale,
                    out.clean,
                    out.sums,
                    &s,
                    3 * p + TAIL - 1,
                    1.0,
                )
            })
        };
        let mut this = Self {
            state,
            idx,
            inputs,
            batch,
            graph: graph::capture(device, step),
            params: p,
            fail_after: None,
        };
        // Where the capture failed, the minibatch is not taken: the caller runs it directly.
        if let Some(why) = this.graph.fallback() {
            return Err(PpoError::read(
                "update minibatch",
                format!("the capture failed ({why})"),
            ));
        }
        this.adopt()?;
        Ok(this)
    }

    /// Makes the replay after `replays` more fail (a test of the update's fallback).
    pub fn fail_after(mut self, replays: Option<usize>) -> Self {
        self.fail_after = replays;
        self
    }

    /// Whether the graph was captured for a rollout shaped as `batch`, a plan shaped as `plan`
    /// and flat buffers as `adam`'s.
    pub fn fits(&self, batch: &UpdateBatch, plan: &Plan, adam: &FlatAdam) -> bool {
        let mine = self.batch.borrow();
        mine.obs.dims() == batch.obs.dims()
            && mine.actions.dims() == batch.actions.dims()
            && self.idx.borrow().dims() == [plan.at.len(), plan.batch]
            && self.params == adam.flat_len()
    }

    /// Starts an update: its rollout `batch`, its `plan` and the state (`adam`'s parameters and
    /// moments, `tally`'s state, the plan's next row) written into the captured buffers. On an
    /// error nothing was taken from `adam` or `tally`.
    pub fn begin(
        &mut self,
        model: &ActorCritic,
        adam: &FlatAdam,
        tally: &Carried<'_>,
        batch: &UpdateBatch,
        plan: &Plan,
    ) -> Result<(), PpoError> {
        {
            let mut mine = self.batch.borrow_mut();
            write(&mut mine.obs, batch.obs.clone())?;
            write(&mut mine.actions, batch.actions.clone())?;
            write(&mut mine.log_probs, batch.log_probs.clone())?;
            write(&mut mine.values, batch.values.clone())?;
            write(&mut mine.advantages, batch.advantages.clone())?;
            write(&mut mine.returns, batch.returns.clone())?;
        }
        let device = self.state.borrow().device();
        let (idx, inputs) = plan.tables(&device);
        write(&mut self.idx.borrow_mut(), idx)?;
        for (cell, column) in self.inputs.borrow_mut().iter_mut().zip(inputs) {
            write(cell, column)?;
        }
        self.resume(model, adam, tally, plan)
    }

    /// Carries on with this update after a minibatch that ran directly: the state written into
    /// the captured buffer (the rollout and plan are the update's already).
    pub fn resume(
        &mut self,
        model: &ActorCritic,
        adam: &FlatAdam,
        tally: &Carried<'_>,
        plan: &Plan,
    ) -> Result<(), PpoError> {
        write(&mut self.state.borrow_mut(), pack(model, adam, tally, plan))
    }

    /// The plan's next minibatch: the recorded launches replayed, the next state taken. On an
    /// error the state is the one before this minibatch (the graph writes only its own output).
    pub fn replay(&mut self) -> Result<(), PpoError> {
        if let Some(left) = &mut self.fail_after {
            if *left == 0 {
                return Err(PpoError::read(
                    "update minibatch",
                    "replay refused (a failure the test asked for)",
                ));
            }
            *left -= 1;
        }
        // SAFETY: everything the captured minibatch reads or writes is held for the graph's
        // life: the model's shapes, Adam's layout and the index tensors by its closure, the
        // captured inputs by its closure and `self`, the output by the graph. Nothing else
        // writes them: the inputs are written in place by `begin` and `adopt`, on this thread's
        // stream, ordered after the previous replay's reads; the output is read only by
        // `adopt`'s copy, queued after the replay and before the next one. The update's loop
        // issues all of it from one thread.
        unsafe { self.graph.replay() }.map_err(|e| PpoError::read("update minibatch", e))?;
        self.adopt()
    }

    /// The graph's output, the next state, copied into the captured state (one launch).
    fn adopt(&mut self) -> Result<(), PpoError> {
        let out = self.graph.output().clone();
        write(&mut self.state.borrow_mut(), out)
    }

    /// Hands the state back, its parts copied out (one launch; the captured buffer stays the
    /// graph's): the parameters and moments to `adam`, the loss scale, clean steps and sums to
    /// `tally`.
    pub fn release(&self, adam: &mut FlatAdam, tally: &mut Carried<'_>) {
        let parts = packing::unpack(
            &self.state.borrow(),
            &self.idx.borrow(),
            &self.inputs.borrow(),
            self.params,
            false,
        );
        adam.set_params(parts.params);
        adam.moments = Some((parts.m1, parts.m2));
        *tally.scale = parts.scale;
        *tally.clean = parts.clean;
        *tally.sums = parts.sums;
    }
}

/// `[parameters | m | v | loss scale, clean steps, sums | k]`: `adam`'s (the model's parameters
/// and zero moments before Adam's first step), `tally`'s and the plan's next row.
fn pack(model: &ActorCritic, adam: &FlatAdam, tally: &Carried<'_>, plan: &Plan) -> Tensor<1> {
    let (params, m1, m2) = adam.state(model);
    let device = params.device();
    let k = Tensor::<1>::from_data(TensorData::new(vec![plan.done as f32], [1]), &device);
    packing::pack(
        params,
        m1,
        m2,
        tally.scale.clone(),
        tally.clean.clone(),
        tally.sums.clone(),
        &k,
        0,
        0.0,
    )
}

/// A buffer of its own holding `value` (the value may share its buffer with other tensors).
fn own<const D: usize, K>(value: Tensor<D, K>) -> Result<Tensor<D, K>, PpoError>
where
    K: burn::tensor::kind::Basic,
{
    let mut cell = value.empty_like();
    write(&mut cell, value)?;
    Ok(cell)
}

/// Writes `value` into `cell` in place (one launch), or an error where burn would copy it
/// instead (another holder): the replay would read the captured buffer, not the new values.
fn write<const D: usize, K>(cell: &mut Tensor<D, K>, value: Tensor<D, K>) -> Result<(), PpoError>
where
    K: burn::tensor::kind::Basic,
{
    if !cell.can_mut() {
        return Err(PpoError::read(
            "update minibatch",
            "the captured graph's input is held elsewhere, so it cannot be written in place \
             (set TRADETUNE_REPLAY_UPDATE=0)",
        ));
    }
    let dims = value.dims();
    let ranges: [Range<usize>; D] = std::array::from_fn(|i| 0..dims[i]);
    cell.inplace(|t| t.slice_assign(ranges, value));
    Ok(())
}
