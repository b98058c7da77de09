//! The rollout's policy step replayed from a graph captured once per rollout (issue 33), where
//! the trainer is asked to ([`super::Trainer::set_replay_policy`], `TRADETUNE_REPLAY_POLICY=1`).
//!
//! A policy step is both networks' forward passes on `n_envs` observations: a few small kernels,
//! whose cost on a GPU is what each launch costs the host (burn's fusion, cubecl's launch
//! preparation, wgpu's bind groups), not arithmetic. `bench gpu`'s replay probe measured a
//! replayed step at a third of a direct one's host time on lavapipe. Here the rollout's own step
//! runs that way: the weights do not change during a rollout, so its first step captures the
//! forward passes ([`tradetune_device::graph`]) and each later step writes its observations in
//! place into the captured input and replays the recorded launches. The step's noise is added
//! and the action clipped inside the graph too: it reads its row of the rollout's noise table
//! by a step counter on the device, and its last launch advances the counter in place
//! ([`super::noise_rows`]). The graph's outputs (the actions, the clipped actions, the values)
//! are read by the env's and the buffer's kernels before the next replay overwrites them.
//!
//! Per step the host then prepares no launch of the policy step (the buffer's kernel writes the
//! next observations into the captured input in its own launch, [`PolicyGraph::lend_input`]),
//! one replay, against the direct step's forward-pass launches (9 for nets [16] on lavapipe, 13
//! for [16, 16, 16]). Once a rollout the capture runs the step four times (three warm-ups and
//! the recorded run) and the counter is set back to the first row (a launch). The device runs
//! the same kernels either way, and two or three more a step (the noise row's read, the
//! counter's advance, and the sampling, which the direct step fuses into the mean head's
//! kernel).

use std::cell::RefCell;
use std::rc::Rc;

use burn::tensor::{Device, FloatDType, Tensor};

use crate::ppo::error::PpoError;
use crate::ppo::model::ActorCritic;
use tradetune_device::graph::{self, Graph};

#[cfg(feature = "wgpu")]
use super::noise_rows::{advance, row};

/// Row `at[0]` of `table` `[T, N, A]` (see [`super::noise_rows::row`]; a build without cubecl
/// devices never replays, so this runs nowhere).
#[cfg(not(feature = "wgpu"))]
fn row(table: &Tensor<3>, at: &Tensor<1>) -> Tensor<2> {
    let [_, n, a] = table.dims();
    table.clone().select(0, at.clone().int()).reshape([n, a])
}

/// `at + 1` modulo `rows` (see [`super::noise_rows::advance`]).
#[cfg(not(feature = "wgpu"))]
fn advance(at: Tensor<1>, rows: usize) -> Tensor<1> {
    at.add_scalar(1.0).remainder_scalar(rows as f32)
}

/// The actions `[N, A]`, the actions clipped to [−1, 1] and the values `[N]` (f32).
type Out = (Tensor<2>, Tensor<2>, Tensor<1>);

/// A rollout's captured policy step.
pub(super) struct PolicyGraph {
    /// The captured input `[N, D]` in the compute dtype, written in place each step. Held here
    /// and, while it runs, by the graph's closure: between replays by nothing else, so that
    /// burn writes its buffer in place instead of copying it.
    x: Rc<RefCell<Tensor<2>>>,
    /// `[1]` the step counter: the noise table's row the next replay reads. Held here between
    /// the graph's runs, taken by each run and given back advanced (in place).
    counter: Rc<RefCell<Option<Tensor<1>>>>,
    graph: Graph<Out, Box<dyn FnMut() -> Out>>,
    /// Whether the input is lent out ([`Self::lend_input`]) to be written and given back.
    lent: bool,
    /// Replays left before one fails as a driver's would, where a test asks for it
    /// ([`super::Trainer::fail_replay_after`]).
    fail_after: Option<usize>,
}

impl PolicyGraph {
    /// Captures `model`'s policy step (a rollout's snapshot, in `dtype`) on the first step's
    /// observations `x0` `[N, D]` in `dtype`, its noise read from `noise` `[T, N, A]` (the
    /// rollout's, scaled by σ), row by row from the first. The first step replays too.
    pub(super) fn capture(
        model: ActorCritic,
        x0: Tensor<2>,
        noise: Tensor<3>,
        dtype: FloatDType,
        device: &Device,
    ) -> Result<Self, PpoError> {
        let [n, d] = x0.dims();
        let rows = noise.dims()[0];
        let zero = || Tensor::<1>::zeros([1], device);
        let counter = Rc::new(RefCell::new(Some(zero())));
        // A buffer of its own: `x0` may share its buffer with the rollout's observations (a cast
        // to the dtype they already have is no copy), and the graph reads the cell's buffer.
        let cell = Tensor::<2>::empty([n, d], (device, dtype.into()));
        let x = Rc::new(RefCell::new(cell));
        x.borrow_mut().inplace(|t| t.slice_assign([0..n, 0..d], x0));
        let step: Box<dyn FnMut() -> Out> = {
            let (x, counter) = (x.clone(), counter.clone());
            Box::new(move || {
                let x = x.borrow().clone();
                let Some(at) = counter.borrow_mut().take() else {
                    unreachable!("the counter is given back by every run")
                };
                let actions = model.action_mean(x.clone(), dtype).add(row(&noise, &at));
                let clipped = actions.clone().clamp(-1.0, 1.0);
                let value = model.value(x, dtype);
                *counter.borrow_mut() = Some(advance(at, rows));
                (actions, clipped, value)
            })
        };
        let this = Self {
            graph: graph::capture(device, step),
            x,
            counter,
            lent: false,
            fail_after: None,
        };
        // The capture's runs advanced the counter: the first step reads the first row.
        {
            let mut counter = this.counter.borrow_mut();
            let Some(at) = counter.as_mut() else {
                unreachable!("the counter is given back by every run")
            };
            this.writable(at)?;
            at.inplace(|t| t.slice_assign(0..1, zero()));
        }
        Ok(this)
    }

    /// Makes the replay after `replays` more fail (a test of the rollout's fallback).
    pub(super) fn fail_after(mut self, replays: Option<usize>) -> Self {
        self.fail_after = replays;
        self
    }

    /// The captured input as last written: the step's observations, for a direct step where
    /// its replay failed.
    pub(super) fn input(&self) -> Tensor<2> {
        self.x.borrow().clone()
    }

    /// Why the step is not replayed from recorded launches, where it is not (the backend has no
    /// graphs, or the capture failed): each step then runs the forward passes again.
    pub(super) fn fallback(&self) -> Option<&str> {
        self.graph.fallback()
    }

    /// The captured input, lent out to be written in place with the next step's observations
    /// (the rollout buffer's kernel writes them in its launch: no launch of its own) and given
    /// back to [`Self::step`]. An error where burn would copy it instead of writing it (another
    /// holder): the replay would read the captured buffer, not the new observations.
    pub(super) fn lend_input(&mut self) -> Result<Tensor<2>, PpoError> {
        let mut x = self.x.borrow_mut();
        self.writable(&x)?;
        let placeholder = Tensor::empty([0, 0], &x.device());
        self.lent = true;
        Ok(std::mem::replace(&mut *x, placeholder))
    }

    /// The step on observations `x` `[N, D]` in the compute dtype: the actions with this step's
    /// noise, clipped, and the values. `x` is the lent input, written, or else it is written
    /// into the input in place (one launch). Then the recorded launches are replayed.
    pub(super) fn step(&mut self, x: Tensor<2>) -> Result<Out, PpoError> {
        if self.lent {
            *self.x.borrow_mut() = x;
            self.lent = false;
        } else {
            let mut input = self.x.borrow_mut();
            self.writable(&input)?;
            let [n, d] = x.dims();
            input.inplace(|t| t.slice_assign([0..n, 0..d], x));
        }
        if let Some(left) = &mut self.fail_after {
            if *left == 0 {
                return Err(PpoError::read(
                    "rollout policy step",
                    "replay refused (a failure the test asked for)",
                ));
            }
            *left -= 1;
        }
        // SAFETY: everything the captured step reads or writes is held for the graph's life: the
        // weights and the noise table by its closure, the input and the counter by its closure
        // and `self`, the outputs by the graph. Nothing else writes them: the input is written
        // in place (above, or by the buffer's kernel) on this thread's stream, ordered after the
        // previous replay's reads; the counter only by the replays themselves (and once after
        // the capture); the outputs are only read, by kernels this thread queues after the
        // replay (burn's fusion drains its queue before a replay, so they run before the next
        // one overwrites them). The trainer's rollout issues all of it from one thread.
        let out =
            unsafe { self.graph.replay() }.map_err(|e| PpoError::read("rollout policy step", e))?;
        Ok(out.clone())
    }

    /// An error where the captured input could not be written in place (see
    /// [`Self::lend_input`]); without a recording any input will do.
    fn writable<const D: usize>(&self, x: &Tensor<D>) -> Result<(), PpoError> {
        if self.graph.is_hardware() && !x.can_mut() {
            return Err(PpoError::read(
                "rollout policy step",
                "the captured graph's input is held elsewhere, so it cannot be written in \
                 place (set TRADETUNE_REPLAY_POLICY=0)",
            ));
        }
        Ok(())
    }
}
