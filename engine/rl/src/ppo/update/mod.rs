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
//! [`Learner::update`] runs that loop, once, in `run`. Below it sit two **minibatch
//! engines** (`MinibatchEngine`), which compute a minibatch's forward pass, losses and
//! gradient and take Adam's step:
//! - the device engine (`device`): on every device and precision, the forward pass, loss and a
//!   hand-written backward pass in burn tensor operations on the inner device (`manual`, held to
//!   burn's autodiff by the tests), the loss and its gradient at the heads as one CubeCL kernel
//!   on a GPU (`kernels`; the same arithmetic in tensor operations elsewhere), Adam over one
//!   flat parameter buffer that is the parameters' home during an update (`flat_adam`);
//! - the host engine (`host`; its math is [`crate::ppo::host_update`]): on the CPU device in
//!   f32, host buffers with a hand-written backward pass, about twice as fast there and held
//!   to the device engine by the tests (gradients, whole updates, Adam's saved state).
//!
//! Where the learner is asked to (`TRADETUNE_REPLAY_UPDATE=1`, [`Learner::set_replay_update`]),
//! the device engine replays each full minibatch's four calls (forward and backward pass,
//! judgement, step, count) from a graph captured once (`replay`): the loop offers it each
//! minibatch first, and makes the calls itself where the engine declines.
//!
//! Between a minibatch's backward pass and its step the loop decides: stop early
//! (`target_kl`), skip or give up on a non-finite loss or gradient (f16's loss scale), and by
//! how much to clip; and it sums the diagnostics. A `Tally` makes those decisions where the
//! numbers are (`stats`):
//! - `HostTally`, on host numbers: the host engine's, and the device engine's when
//!   `target_kl` needs each minibatch's approx_kl on the host before its step (one read per
//!   minibatch, the rollout values read first);
//! - `DeviceTally`, on device tensors: the device engine's otherwise, so that an
//!   update reads the device once, at its end, with the rollout values riding along (on a GPU
//!   its judgement and count are one single-thread kernel, `kernels::tally`).
//!
//! The two tallies mean the same decisions but are not one code: turning one into the other
//! would change reads (a host decision needs a read per minibatch) or numbers (the device
//! clips as torch's `clip_grad_norm_` without a branch, the host clips only above the limit
//! when it decides per minibatch; the device undoes the loss scale as `(1/s)·clip`, the host as
//! `clip/s`; the device sums the diagnostics in f32, the host in f64; the device reports a
//! divergence after the update, the host at once). Each keeps the arithmetic it had, so every
//! update is bit for bit what it was before the loop was one.

pub mod agreement;
mod device;
mod flat_adam;
mod host;
#[cfg(feature = "wgpu")]
mod kernels;
mod manual;
#[cfg(test)]
mod manual_tests;
#[cfg(feature = "wgpu")]
mod packing;
#[cfg(feature = "wgpu")]
mod replay;
mod stats;
#[cfg(test)]
mod tests;

use std::ops::Range;

use burn::tensor::{Device, Int, Tensor, TensorData};
use rand::seq::SliceRandom;

use crate::ppo::config::PpoConfig;
use crate::ppo::error::PpoError;
use crate::ppo::host_policy::host as read;
use crate::ppo::model::ActorCritic;
use device::DeviceEngine;
use flat_adam::FlatAdam;
use host::HostSide;
use stats::{Carried, DeviceTally, HostTally};
use tradetune_device::precision::LossScaler;

pub use stats::UpdateStats;

/// A minibatch's losses and its loss's gradient at the heads (inner device).
pub(super) struct HeadGrads {
    /// `[B, A]` ∂(s·L)/∂μ, the gradient at the policy head's output (compute dtype).
    pub d_mean: Tensor<2>,
    /// `[B, 1]` ∂(s·L)/∂V, at the value head's output (compute dtype).
    pub d_value: Tensor<2>,
    /// `[A]` ∂(s·L)/∂log σ (f32).
    pub log_std: Tensor<1>,
    /// `[A]` and `[1]` the heads' bias gradients (f32).
    pub mean_bias: Tensor<1>,
    pub value_bias: Tensor<1>,
    /// `[6]` loss, policy loss, value loss, entropy, approx_kl, clipfrac.
    pub losses: Tensor<1>,
}

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

impl UpdateBatch {
    /// The samples `idx` of every tensor (one gather each): a minibatch.
    fn rows(&self, idx: Tensor<1, Int>) -> UpdateBatch {
        UpdateBatch {
            obs: self.obs.clone().select(0, idx.clone()),
            actions: self.actions.clone().select(0, idx.clone()),
            log_probs: self.log_probs.clone().select(0, idx.clone()),
            values: self.values.clone().select(0, idx.clone()),
            advantages: self.advantages.clone().select(0, idx.clone()),
            returns: self.returns.clone().select(0, idx),
        }
    }
}

/// The learner: model, optimiser, loss scaler and the two minibatch engines' state.
pub struct Learner {
    model: ActorCritic,
    /// Adam over the flat parameter buffer (the device engine's; the host engine takes its
    /// step counter and hands its moments back when the device engine runs or a checkpoint
    /// is saved).
    adam: FlatAdam,
    /// The host engine's layout, buffers and Adam's moments between its updates.
    host: HostSide,
    scaler: LossScaler,
    cfg: PpoConfig,
    /// The training (autodiff) device.
    device: Device,
    /// Whether the device engine replays its minibatches from a graph captured once
    /// (`replay`; [`Self::set_replay_update`]), and why it stopped, where a replay failed.
    replay_update: bool,
    replay_fallback: Option<String>,
    /// The captured minibatch, once the first replayed update captured it.
    #[cfg(feature = "wgpu")]
    minibatch_graph: Option<replay::MinibatchGraph>,
    /// Replays before one fails, for tests of the fallback.
    fail_replay_after: Option<usize>,
    /// Tests: the device engine runs its minibatches through burn's autodiff (the reference).
    #[cfg(test)]
    autodiff_reference: bool,
}

/// Whether `TRADETUNE_REPLAY_UPDATE` (`1`, `on` or `true`) asks every learner of the process to
/// replay its updates' minibatches from a graph captured once (issue 33).
pub fn replay_update_from_env() -> bool {
    std::env::var("TRADETUNE_REPLAY_UPDATE")
        .is_ok_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "1" | "on" | "true"))
}

impl Learner {
    /// A learner for `model` (on the autodiff training device `device`).
    pub fn new(model: ActorCritic, cfg: &PpoConfig, device: &Device) -> Self {
        // Aligned slots where the parameters' slices would otherwise be copies (a GPU).
        let align = if tradetune_device::reads_are_transfers(device) {
            flat_adam::GPU_ALIGN
        } else {
            1
        };
        let adam = FlatAdam::new(cfg, &model, align);
        Self {
            host: HostSide::new(&model, adam.slots(), cfg, device),
            adam,
            model,
            scaler: LossScaler::new(
                cfg.precision,
                cfg.initial_loss_scale,
                cfg.loss_scale_growth_interval,
            ),
            cfg: cfg.clone(),
            device: device.clone(),
            replay_update: replay_update_from_env(),
            replay_fallback: None,
            #[cfg(feature = "wgpu")]
            minibatch_graph: None,
            fail_replay_after: None,
            #[cfg(test)]
            autodiff_reference: false,
        }
    }

    /// Replays the device engine's minibatches from a graph captured once (where the loss and
    /// tally are kernels: a GPU, lavapipe included; and without `target_kl`), or stops.
    /// `TRADETUNE_REPLAY_UPDATE=1` turns it on for every learner of the process.
    pub fn set_replay_update(&mut self, on: bool) {
        self.replay_update = on;
    }

    /// Why the minibatches stopped being replayed, where a capture or replay failed (the rest
    /// of the run then runs them directly).
    pub fn replay_fallback(&self) -> Option<&str> {
        self.replay_fallback.as_deref()
    }

    /// Drops the captured minibatch (a new model or optimiser state: the next update captures
    /// its own).
    fn forget_minibatch_graph(&mut self) {
        #[cfg(feature = "wgpu")]
        {
            self.minibatch_graph = None;
        }
    }

    /// Makes the replay after `replays` more fail, as a driver's would (tests of the fallback).
    #[doc(hidden)]
    pub fn fail_replay_after(&mut self, replays: Option<usize>) {
        self.fail_replay_after = replays;
    }

    /// The model being trained.
    pub fn model(&self) -> &ActorCritic {
        &self.model
    }

    /// Replaces the model (checkpoint resume).
    pub fn set_model(&mut self, model: ActorCritic) {
        // Adam's moments stay (as burn's Adam's would); the parameters are the new model's.
        self.host.release(&mut self.adam, &self.device);
        self.forget_minibatch_graph();
        self.adam.relayout(&model);
        self.host
            .relayout(&model, self.adam.slots(), &self.cfg, &self.device);
        self.model = model;
    }

    /// Saves Adam's state to a burnpack file, in the format of burn's `ModuleOptimizer` with
    /// `Adam` (one state per parameter).
    pub fn save_optimizer(&self, path: &std::path::Path) -> Result<(), PpoError> {
        let moments = self
            .host
            .moment_tensors(&self.device)
            .or_else(|| self.adam.moments.clone());
        self.adam.save(&self.model, moments, path)
    }

    /// Restores Adam's state from a burnpack file (see [`Learner::save_optimizer`]).
    pub fn load_optimizer(&mut self, path: &std::path::Path) -> Result<(), PpoError> {
        // The moments read replace those held on the host (the next host update reads them).
        self.host.release(&mut self.adam, &self.device);
        self.forget_minibatch_graph();
        self.adam.load(&self.model, path, &self.device)
    }

    /// The loss scaler.
    pub fn scaler(&self) -> &LossScaler {
        &self.scaler
    }

    /// The loss scaler, to restore its scale on resume.
    pub fn scaler_mut(&mut self) -> &mut LossScaler {
        &mut self.scaler
    }

    /// Whether updates run the host minibatch engine ([`crate::ppo::host_update`]): on the
    /// CPU device in f32, unless turned off with [`Self::set_host_update`].
    pub fn uses_host_update(&self) -> bool {
        self.host.runs()
    }

    /// Turns the host minibatch engine off (every update then runs the device engine, as on
    /// other devices) or back on where it applies: for comparing the two engines.
    pub fn set_host_update(&mut self, on: bool) {
        self.host.allowed = on;
    }

    /// Runs `n_epochs` over `batch` with learning rate `lr`. `update` numbers the update in
    /// errors and keys its minibatch shuffles.
    ///
    /// `ride_along` are values the caller wants back from the device (the rollout's GAE
    /// diagnostics, its episode log): they are read together with the update's diagnostics, so
    /// an update without host decisions reads the device once, and `check` sees them before
    /// the update's own diagnostics are judged. An update that decides something on the host
    /// per minibatch (`target_kl`'s early stop, the only one) reads `ride_along` first and one
    /// diagnostics vector per minibatch, and then scales an f16 loss on the host. Otherwise
    /// f16's loss scaling runs on the device (scale, skips and growth as [`LossScaler`]; a
    /// skip through the flat Adam's gate). The host engine reads the rollout from host memory.
    pub fn update(
        &mut self,
        batch: &UpdateBatch,
        lr: f64,
        update: usize,
        ride_along: Tensor<1>,
        check: &mut dyn FnMut(&[f32]) -> Result<(), PpoError>,
    ) -> Result<(UpdateStats, Vec<f32>), PpoError> {
        let orders = shuffled_orders(&self.cfg, batch.obs.dims()[0], update);
        let Self {
            model,
            adam,
            host,
            scaler,
            cfg,
            device,
            replay_update,
            replay_fallback,
            #[cfg(feature = "wgpu")]
            minibatch_graph,
            fail_replay_after,
            #[cfg(test)]
            autodiff_reference,
        } = self;
        let batch_size = cfg.batch_size;
        if host.runs() {
            // On the CPU device: the values are in host memory, nothing is counted as a read.
            let extra = rollout_values(ride_along, false)?;
            check(&extra)?;
            let tally = HostTally::new(cfg, scaler, update, lr, extra);
            let engine = host.engine(model, adam, cfg, batch, device)?;
            return run(engine, tally, &orders, batch_size, lr, check);
        }
        host.release(adam, device);
        #[allow(unused_mut)]
        let mut engine = DeviceEngine::new(model, adam, cfg, device, batch);
        #[cfg(test)]
        if *autodiff_reference {
            engine.autodiff = Some((device.clone(), batch));
        }
        if cfg.target_kl.is_some() {
            let extra = rollout_values(ride_along, true)?;
            check(&extra)?;
            let tally = HostTally::new(cfg, scaler, update, lr, extra);
            run(engine, tally, &orders, batch_size, lr, check)
        } else {
            #[cfg(feature = "wgpu")]
            {
                #[cfg(test)]
                let reference = *autodiff_reference;
                #[cfg(not(test))]
                let reference = false;
                if *replay_update && replay_fallback.is_none() && !reference {
                    engine.replay_minibatches(
                        minibatch_graph,
                        &orders,
                        lr,
                        fail_replay_after.take(),
                        replay_fallback,
                    );
                }
            }
            // Without cubecl devices nothing is replayed.
            #[cfg(not(feature = "wgpu"))]
            let _ = (replay_update, replay_fallback, fail_replay_after);
            let tally = DeviceTally::new(cfg, scaler, device, update, lr, ride_along);
            run(engine, tally, &orders, batch_size, lr, check)
        }
    }
}

/// The update's loop (see the module docs): epochs of shuffled minibatches, each one's
/// losses and gradient from `engine`, judged by `tally`, stepped by `engine`.
fn run(
    mut engine: impl MinibatchEngine,
    mut tally: impl Tally,
    orders: &[Vec<usize>],
    batch_size: usize,
    lr: f64,
    check: &mut dyn FnMut(&[f32]) -> Result<(), PpoError>,
) -> Result<(UpdateStats, Vec<f32>), PpoError> {
    let mut epochs = 0;
    let outcome = 'update: {
        for order in orders {
            engine.shuffle(order);
            for start in (0..order.len()).step_by(batch_size) {
                let rows = start..(start + batch_size).min(order.len());
                // The four calls below at once, replayed from a graph captured once, where the
                // engine replays them (`replay`).
                if engine.replayed(rows.clone(), tally.carried()) {
                    continue;
                }
                // Ratio, clipped surrogate, (clipped) value loss, entropy bonus; the gradient
                // of the loss times the loss scale.
                let diagnostics = engine.minibatch(rows, tally.scale());
                // approx_kl against target_kl, a non-finite loss or gradient, the clip.
                match tally.judge(diagnostics) {
                    Ok(Verdict::StopEarly) => break 'update Ok(()),
                    Ok(Verdict::Skip) => {
                        engine.skip();
                        continue;
                    }
                    Ok(Verdict::Step(factor)) => engine.step(lr, factor),
                    Err(e) => break 'update Err(e),
                }
                tally = tally.record();
            }
            epochs += 1;
        }
        Ok(())
    };
    // The steps taken stay taken, also before an error.
    engine.settle(tally.carried());
    engine.finish();
    outcome?;
    tally.finish(epochs, check)
}

/// Whether the device engine's kernels (`kernels`) run where `t` lives: a cubecl device, in a
/// build with `wgpu`.
fn kernels_run(t: &Tensor<1>) -> bool {
    cfg!(feature = "wgpu") && tradetune_device::runs_cubecl_kernels(&t.clone().inner())
}

/// The update's shuffles: one of `0..samples` per epoch, from the stream keyed by the
/// update's number (see [`crate::ppo::stream_rng`]).
fn shuffled_orders(cfg: &PpoConfig, samples: usize, update: usize) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..samples).collect();
    let mut rng = crate::ppo::stream_rng(cfg.seed, crate::ppo::SHUFFLE_STREAM, update as u64);
    (0..cfg.n_epochs)
        .map(|_| {
            order.shuffle(&mut rng);
            order.clone()
        })
        .collect()
}

/// The rollout values riding along, read before an update that decides on the host;
/// `counted` as a device read ([`tradetune_device::readback`]).
fn rollout_values(ride_along: Tensor<1>, counted: bool) -> Result<Vec<f32>, PpoError> {
    if ride_along.dims()[0] == 0 {
        Ok(Vec::new())
    } else if counted {
        tradetune_device::readback::read_f32(ride_along, "update: rollout values")
            .map_err(|e| PpoError::read("rollout values", e))
    } else {
        read(ride_along, "rollout values")
    }
}

/// A minibatch engine: the forward pass, losses and gradient of one minibatch, and Adam's
/// step with that gradient.
trait MinibatchEngine {
    /// Starts an epoch over `order`, a shuffle of the rollout's samples.
    fn shuffle(&mut self, order: &[usize]);
    /// The samples `order[rows]`: the diagnostics of their losses, and the gradient of the
    /// loss times `scale`, kept for [`Self::step`].
    fn minibatch(&mut self, rows: Range<usize>, scale: Scale<'_>) -> Diagnostics;
    /// Adam's step (learning rate `lr`) with the last minibatch's gradient times `factor`.
    fn step(&mut self, lr: f64, factor: Factor);
    /// No step for the last minibatch (f16's loss scale discarded it, decided on the host):
    /// Adam's step counter counts it all the same, as the device's gated step does (see
    /// `flat_adam`'s docs), so that both decisions follow one trajectory.
    fn skip(&mut self);
    /// Ends the update, after its last step or an error: the parameters are the model's.
    fn finish(self);
    /// The minibatch `order[rows]`, its judgement, Adam's step and its count at once, replayed
    /// from a captured graph, where this engine replays minibatches and `tally` lends it its
    /// state: whether it did (if not, the loop makes the calls).
    fn replayed(&mut self, _rows: Range<usize>, _tally: Option<Carried<'_>>) -> bool {
        false
    }
    /// Hands the state a replay carries back to Adam and `tally`, once the minibatches end.
    fn settle(&mut self, _tally: Option<Carried<'_>>) {}
}

/// Where the update's decisions are made and its diagnostics summed ([`stats`]).
trait Tally {
    /// The loss scale for the next minibatch.
    fn scale(&self) -> Scale<'_>;
    /// The running state, lent to a replayed minibatch, where it is on the device and the
    /// judgement is a kernel's (`None`: the minibatches run directly).
    fn carried(&mut self) -> Option<Carried<'_>> {
        None
    }
    /// Judges a minibatch's diagnostics before its step.
    fn judge(&mut self, diagnostics: Diagnostics) -> Result<Verdict, PpoError>;
    /// Counts the minibatch judged last, after its step (by value: the device's sums and
    /// loss scale are updated in place).
    fn record(self) -> Self;
    /// The update's statistics and the rollout values riding along (`check`ed), after
    /// `epochs` complete epochs.
    fn finish(
        self,
        epochs: usize,
        check: &mut dyn FnMut(&[f32]) -> Result<(), PpoError>,
    ) -> Result<(UpdateStats, Vec<f32>), PpoError>;
}

/// The loss scale a minibatch's loss is multiplied by before its backward pass.
enum Scale<'a> {
    Host(f32),
    /// `[1]`, on the training device.
    Device(&'a Tensor<1>),
}

/// A minibatch's `[loss, policy loss, value loss, entropy, approx_kl, clipfrac, Σ‖g‖²]`, the
/// last of the scaled loss's gradient.
// One per minibatch, moved once: boxing the tensors would only add an allocation.
#[allow(clippy::large_enum_variant)]
enum Diagnostics {
    Host([f32; 7]),
    /// On the training device: `[6]` the losses and `[1]` Σ‖g‖².
    Device {
        losses: Tensor<1>,
        grad_sq: Tensor<1>,
    },
}

impl Diagnostics {
    /// On the host: a device read.
    fn read(self) -> Result<[f32; 7], PpoError> {
        match self {
            Self::Host(d) => Ok(d),
            Self::Device { losses, grad_sq } => {
                let read = tradetune_device::readback::read_f32(
                    Tensor::cat(vec![losses, grad_sq], 0),
                    "update: diagnostics",
                )
                .map_err(|e| PpoError::read("update diagnostics", e))?;
                read.try_into()
                    .map_err(|_| PpoError::read("update diagnostics", "wrong length"))
            }
        }
    }

    /// On `device`: `[6]` the losses and `[1]` Σ‖g‖².
    fn on(self, device: &Device) -> (Tensor<1>, Tensor<1>) {
        match self {
            Self::Host(d) => (
                Tensor::from_data(TensorData::new(d[..6].to_vec(), [6]), device),
                Tensor::from_data(TensorData::new(vec![d[6]], [1]), device),
            ),
            Self::Device { losses, grad_sq } => (losses, grad_sq),
        }
    }
}

/// What multiplies a minibatch's gradient before Adam: the loss scale undone and the clip.
// One per minibatch, moved once: boxing the tensors would only add an allocation.
#[allow(clippy::large_enum_variant)]
enum Factor {
    /// Decided on the host.
    Host(f32),
    /// Decided on the device: the factor (`None`: 1) and, under f16's loss scaling, the gate
    /// (`[1]`, 0 or 1) that discards a non-finite step.
    Device {
        factor: Option<Tensor<1>>,
        gate: Option<Tensor<1>>,
    },
}

/// A [`Tally`]'s judgement of a minibatch.
// One per minibatch, moved once: boxing the tensors would only add an allocation.
#[allow(clippy::large_enum_variant)]
enum Verdict {
    /// approx_kl is past `1.5 · target_kl`: the update ends before this step.
    StopEarly,
    /// A non-finite gradient under f16's loss scaling: no step.
    Skip,
    /// Adam's step with the gradient times the factor.
    Step(Factor),
}
