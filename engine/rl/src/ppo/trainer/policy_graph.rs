//! The rollouts' policy step replayed from a graph captured once a run (issue 33), where the
//! trainer is asked to ([`super::Trainer::set_replay_policy`], `TRADETUNE_REPLAY_POLICY=1`).
//!
//! A policy step is both networks' forward passes on `n_envs` observations: a few small kernels,
//! whose cost on a GPU is what each launch costs the host (burn's fusion, cubecl's launch
//! preparation, wgpu's bind groups), not arithmetic. `bench gpu`'s replay probe measured a
//! replayed step at a third of a direct one's host time on lavapipe. Here the rollout's own step
//! runs that way: the first rollout's first step captures the forward passes
//! ([`tradetune_device::graph`]) and each later step writes its observations in place into the
//! captured input and replays the recorded launches. The step's noise is added and the action
//! clipped inside the graph too: it reads its row of the rollout's noise table by a step
//! counter on the device, and its last launch advances the counter in place
//! ([`super::noise_rows`]). The graph's outputs (the actions, the clipped actions, the values)
//! are read by the env's and the buffer's kernels before the next replay overwrites them.
//!
//! The graph reads buffers of its own, never the learner's: its copy of the weights in the
//! compute dtype, its noise table, its input and its counter. The weights change only between
//! rollouts, so each later rollout writes the learner's new weights (cast) and its noise into
//! those buffers in place, sets the counter back to the first row, and replays the same
//! recording ([`PolicyGraph::begin`]): the capture's four runs of the step and its three host
//! round-trips are paid once a run, not once a rollout.
//!
//! Per step the host then prepares no launch of the policy step (the buffer's kernel writes the
//! next observations into the captured input in its own launch, [`PolicyGraph::lend_input`]),
//! one replay, against the direct step's forward-pass launches (9 for nets [16] on lavapipe, 13
//! for [16, 16, 16]); once a rollout a launch a weight (its cast and write), the noise's write,
//! the counter's reset and the first step's input. The device runs the same kernels either way,
//! and two or three more a step (the noise row's read, the counter's advance, and the sampling,
//! which the direct step fuses into the mean head's kernel).

use std::cell::RefCell;
use std::rc::Rc;

use burn::module::{Module, ModuleMapper, ModuleVisitor, Param, ParamId};
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

/// A learner's captured policy step, rewritten in place for each rollout ([`Self::begin`]).
pub(super) struct PolicyGraph {
    /// The captured input `[N, D]` in the compute dtype, written in place each step. Held here
    /// and, while it runs, by the graph's closure: between replays by nothing else, so that
    /// burn writes its buffer in place instead of copying it.
    x: Rc<RefCell<Tensor<2>>>,
    /// The weights the graph reads, in the compute dtype: buffers of the graph's own, written
    /// in place with each rollout's snapshot. Held as the input is (`None` only while
    /// rewritten).
    model: Rc<RefCell<Option<ActorCritic>>>,
    /// `[T, N, A]` the rollout's noise, scaled by σ, written in place each rollout.
    noise: Rc<RefCell<Tensor<3>>>,
    /// `[1]` the step counter: the noise table's row the next replay reads. Held here between
    /// the graph's runs, taken by each run and given back advanced (in place).
    counter: Rc<RefCell<Option<Tensor<1>>>>,
    graph: Graph<Out, Box<dyn FnMut() -> Out>>,
    dtype: FloatDType,
    /// Whether the input is lent out ([`Self::lend_input`]) to be written and given back.
    lent: bool,
    /// Replays left before one fails as a driver's would, where a test asks for it
    /// ([`super::Trainer::fail_replay_after`]).
    fail_after: Option<usize>,
}

impl PolicyGraph {
    /// Captures `model`'s policy step (a rollout's snapshot, in f32; the graph reads copies of
    /// its weights in `dtype`) on the first step's observations `x0` `[N, D]` in `dtype`, its
    /// noise read from `noise` `[T, N, A]` (the rollout's, scaled by σ), row by row from the
    /// first. The first step replays too.
    pub(super) fn capture(
        model: &ActorCritic,
        x0: Tensor<2>,
        noise: Tensor<3>,
        dtype: FloatDType,
        device: &Device,
    ) -> Result<Self, PpoError> {
        let [n, d] = x0.dims();
        let rows = noise.dims()[0];
        let counter = Rc::new(RefCell::new(Some(Tensor::<1>::zeros([1], device))));
        // Buffers of the graph's own: `x0` may share its buffer with the rollout's observations
        // (a cast to the dtype they already have is no copy), the weights theirs with the
        // learner's parameters, and the graph reads these buffers in every later rollout.
        let cell = Tensor::<2>::empty([n, d], (device, dtype.into()));
        let x = Rc::new(RefCell::new(cell));
        overwrite(&mut x.borrow_mut(), x0);
        let weights = Rc::new(RefCell::new(Some(
            model.clone().map(&mut OwnCopy { dtype, device }),
        )));
        let noise = Rc::new(RefCell::new(own_copy(noise, FloatDType::F32, device)));
        let step: Box<dyn FnMut() -> Out> = {
            let (x, weights, noise, counter) =
                (x.clone(), weights.clone(), noise.clone(), counter.clone());
            Box::new(move || {
                let x = x.borrow().clone();
                let (Some(model), Some(at)) = (&*weights.borrow(), counter.borrow_mut().take())
                else {
                    unreachable!("the weights and the counter are given back before every run")
                };
                let actions = model
                    .action_mean(x.clone(), dtype)
                    .add(row(&noise.borrow(), &at));
                let clipped = actions.clone().clamp(-1.0, 1.0);
                let value = model.value(x, dtype);
                *counter.borrow_mut() = Some(advance(at, rows));
                (actions, clipped, value)
            })
        };
        let this = Self {
            graph: graph::capture(device, step),
            x,
            model: weights,
            noise,
            counter,
            dtype,
            lent: false,
            fail_after: None,
        };
        // The capture's runs advanced the counter: the first step reads the first row.
        this.rewind()?;
        Ok(this)
    }

    /// Makes the graph a new rollout's: its weights `model`'s (a snapshot, in f32) and its
    /// noise `noise` `[T, N, A]`, both written in place (a launch a parameter and one for the
    /// noise), and the counter set back to the first row. Nothing is captured again: the
    /// weights do not change during a rollout, only between rollouts, and the graph reads them
    /// from its own buffers. An error where a buffer could not be written in place (another
    /// holder) or the shapes differ from the captured ones.
    pub(super) fn begin(&mut self, model: &ActorCritic, noise: Tensor<3>) -> Result<(), PpoError> {
        if self.lent {
            return Err(PpoError::read(
                "rollout policy step",
                "the captured graph's input was lent out and not given back",
            ));
        }
        let mut values = Snapshot(Vec::new());
        model.visit(&mut values);
        let captured = self.model.borrow_mut().take();
        let Some(captured) = captured else {
            unreachable!("the weights are given back after every rewrite")
        };
        let skip = captured.log_std.id;
        let mut write = WriteInPlace {
            values: values.0.into_iter(),
            skip,
            dtype: self.dtype,
            refused: None,
            strict: self.graph.is_hardware(),
        };
        let captured = captured.map(&mut write);
        *self.model.borrow_mut() = Some(captured);
        if let Some(why) = write.refused.or_else(|| {
            write
                .values
                .next()
                .map(|_| "the model has more parameters than the captured one".to_owned())
        }) {
            return Err(PpoError::read("rollout policy step", why));
        }
        {
            let mut table = self.noise.borrow_mut();
            if table.dims() != noise.dims() {
                return Err(PpoError::read(
                    "rollout policy step",
                    format!(
                        "the rollout's noise is {:?}, the captured graph's {:?}",
                        noise.dims(),
                        table.dims()
                    ),
                ));
            }
            self.writable(&table)?;
            overwrite(&mut table, noise);
        }
        self.rewind()
    }

    /// Sets the step counter back to the first row (after the capture's runs, or a rollout's).
    fn rewind(&self) -> Result<(), PpoError> {
        let mut counter = self.counter.borrow_mut();
        let Some(at) = counter.as_mut() else {
            unreachable!("the counter is given back by every run")
        };
        self.writable(at)?;
        let zero = Tensor::<1>::zeros([1], &at.device());
        overwrite(at, zero);
        Ok(())
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
            overwrite(&mut input, x);
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

/// Writes `value` (of `dst`'s shape) into `dst`'s buffer: in place where nothing else holds
/// `dst` (burn copies it first otherwise; the callers refuse that case where it matters). A
/// launch.
fn overwrite<const D: usize>(dst: &mut Tensor<D>, value: Tensor<D>) {
    let dims = dst.dims();
    dst.inplace(|t| t.slice_assign(dims.map(|n| 0..n), value));
}

/// A buffer of the graph's own holding `t` in `dtype` (a launch).
fn own_copy<const D: usize>(t: Tensor<D>, dtype: FloatDType, device: &Device) -> Tensor<D> {
    let mut copy = Tensor::<D>::empty(t.dims(), (device, dtype.into()));
    overwrite(&mut copy, t.cast(dtype));
    copy
}

/// Maps a model to copies of its parameters in buffers of their own, in `dtype`.
struct OwnCopy<'a> {
    dtype: FloatDType,
    device: &'a Device,
}

impl ModuleMapper for OwnCopy<'_> {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        param.map(|t| own_copy(t, self.dtype, self.device))
    }
}

/// A snapshot's parameters, flattened, in the order a module visits them.
struct Snapshot(Vec<Tensor<1>>);

impl ModuleVisitor for Snapshot {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let t = param.val();
        let len = t.shape().num_elements();
        self.0.push(t.reshape([len]));
    }
}

/// Writes a snapshot's parameters, in visiting order, into the captured model's buffers in
/// place (cast to `dtype`), all but `skip` (the log standard deviations, which the graph does
/// not read: the noise is scaled outside it). The first refusal is kept in `refused` and the
/// parameters after it left as they are.
struct WriteInPlace {
    values: std::vec::IntoIter<Tensor<1>>,
    skip: ParamId,
    dtype: FloatDType,
    refused: Option<String>,
    /// Whether a write that would copy is refused (where the graph replays recorded launches;
    /// a graph that runs its closure again reads whatever the model holds).
    strict: bool,
}

impl ModuleMapper for WriteInPlace {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        let Some(value) = self.values.next() else {
            self.refused.get_or_insert_with(|| {
                "the model has fewer parameters than the captured one".into()
            });
            return param;
        };
        if param.id == self.skip || self.refused.is_some() {
            return param;
        }
        let dtype = self.dtype;
        let mut refused = None;
        let param = param.map(|mut t| {
            let dims = t.dims();
            if value.dims()[0] != dims.iter().product::<usize>() {
                refused = Some(format!(
                    "a parameter of {} values where the captured one is {dims:?}",
                    value.dims()[0]
                ));
            } else if self.strict && !t.can_mut() {
                refused = Some(
                    "the captured graph's weights are held elsewhere, so they cannot be \
                     written in place (set TRADETUNE_REPLAY_POLICY=0)"
                        .to_owned(),
                );
            } else {
                overwrite(&mut t, value.reshape(dims).cast(dtype));
            }
            t
        });
        self.refused = self.refused.take().or(refused);
        param
    }
}
