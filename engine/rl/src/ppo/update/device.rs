//! The device engine: a minibatch's forward pass, losses and hand-written backward pass in
//! burn tensor operations on the training device's inner (non-autodiff) device, in the run's
//! compute precision ([`super::manual`]; on a GPU the loss and its gradient at the heads are one
//! CubeCL kernel), and [`FlatAdam`]'s step. During an update the parameters live in Adam's flat
//! buffer: the minibatches read them there, and the model takes them once the update ends
//! (the slices that are views, free, after every step). Every device and precision runs it;
//! the CPU device in f32 runs the host engine instead unless told otherwise
//! ([`super::Learner::set_host_update`]). [`minibatch`], the same minibatch through burn's
//! autodiff, is the tests' reference.

use std::ops::Range;

use burn::tensor::{Device, Int, Tensor, TensorData};

use super::flat_adam::FlatAdam;
#[cfg(feature = "wgpu")]
use super::stats::Carried;
use super::{Diagnostics, Factor, MinibatchEngine, Scale, UpdateBatch, kernels_run, manual};
use crate::ppo::config::PpoConfig;
#[cfg(feature = "wgpu")]
use crate::ppo::error::PpoError;
use crate::ppo::model::ActorCritic;

/// The device engine over one update's rollout.
pub(super) struct DeviceEngine<'a> {
    model: &'a mut ActorCritic,
    adam: &'a mut FlatAdam,
    cfg: &'a PpoConfig,
    /// The training device's inner (non-autodiff) device.
    device: Device,
    /// The rollout, on `device`.
    batch: UpdateBatch,
    /// The epoch's shuffle, on the device.
    order: Option<Tensor<1, Int>>,
    /// The last minibatch's gradient (of the scaled loss), flat in [`FlatAdam`]'s layout.
    grad: Option<Tensor<1>>,
    /// The hand-written pass's index tensors.
    picks: manual::Picks,
    /// Where the minibatches are replayed from a graph ([`super::replay`]): what that needs.
    #[cfg(feature = "wgpu")]
    replay: Option<Replaying<'a>>,
    /// Epochs started (shuffles seen).
    epochs: usize,
    /// Tests: the minibatch through burn's autodiff ([`minibatch`]) on the training device
    /// and the rollout as given, the reference the hand-written pass is held to.
    #[cfg(test)]
    pub autodiff: Option<(Device, &'a UpdateBatch)>,
}

impl<'a> DeviceEngine<'a> {
    pub fn new(
        model: &'a mut ActorCritic,
        adam: &'a mut FlatAdam,
        cfg: &'a PpoConfig,
        device: &'a Device,
        batch: &'a UpdateBatch,
    ) -> Self {
        let inner = |t: &Tensor<1>| t.clone().inner();
        let batch = UpdateBatch {
            obs: batch.obs.clone().inner(),
            actions: batch.actions.clone().inner(),
            log_probs: inner(&batch.log_probs),
            values: inner(&batch.values),
            advantages: inner(&batch.advantages),
            returns: inner(&batch.returns),
        };
        Self {
            model,
            adam,
            cfg,
            picks: manual::Picks::new(&device.clone().inner(), kernels_run(&batch.log_probs)),
            device: device.clone().inner(),
            batch,
            order: None,
            grad: None,
            #[cfg(feature = "wgpu")]
            replay: None,
            epochs: 0,
            #[cfg(test)]
            autodiff: None,
        }
    }
}

/// A device engine's replayed minibatches (see [`DeviceEngine::replay_minibatches`]).
#[cfg(feature = "wgpu")]
struct Replaying<'a> {
    /// The learner's captured minibatch, `None` until the first full minibatch captures it.
    graph: &'a mut Option<super::replay::MinibatchGraph>,
    /// The update's replayed minibatches, made before it starts.
    plan: super::replay::Plan,
    /// Whether the graph holds the update's state (from a replayed minibatch until
    /// [`MinibatchEngine::settle`] or a minibatch that runs directly), and its rollout and plan
    /// (from the first replayed minibatch on).
    holding: bool,
    begun: bool,
    /// Replays before one fails (tests).
    fail_after: Option<usize>,
    /// Where to say why the minibatches stopped being replayed (a capture or replay failed).
    fallback: &'a mut Option<String>,
}

#[cfg(feature = "wgpu")]
impl<'a> DeviceEngine<'a> {
    /// Replays the minibatches of the epochs shuffled as `orders` (learning rate `lr`) from
    /// `graph`, captured at the first full one where there is none yet, where the loss and tally
    /// run as kernels (a cubecl device); the replay after `fail_after` more fails (tests).
    pub fn replay_minibatches(
        &mut self,
        graph: &'a mut Option<super::replay::MinibatchGraph>,
        orders: &[Vec<usize>],
        lr: f64,
        fail_after: Option<usize>,
        fallback: &'a mut Option<String>,
    ) {
        if !self.picks.kernels {
            return;
        }
        let plan = super::replay::Plan::new(orders, self.cfg.batch_size, self.adam, lr);
        self.replay = Some(Replaying {
            graph,
            plan,
            holding: false,
            begun: false,
            fail_after,
            fallback,
        });
    }
}

impl MinibatchEngine for DeviceEngine<'_> {
    #[cfg(feature = "wgpu")]
    fn replayed(&mut self, rows: Range<usize>, tally: Option<Carried<'_>>) -> bool {
        use super::replay::MinibatchGraph;
        let Some(mut tally) = tally else {
            return false;
        };
        if self.replay.is_none() || rows.len() != self.cfg.batch_size {
            self.settle(Some(tally));
            return false;
        }
        let Some(r) = &mut self.replay else {
            return false;
        };
        let epoch = self.epochs.saturating_sub(1);
        let outcome = if !r.plan.expects(epoch, rows.start) {
            Err(PpoError::read(
                "update minibatch",
                format!(
                    "minibatch {} of epoch {epoch} is not the next one planned",
                    rows.start
                ),
            ))
        } else {
            match r.graph {
                Some(graph) if r.holding => graph.replay(),
                // After a minibatch that ran directly (the epoch's short last one).
                Some(graph) if r.begun => graph
                    .resume(self.model, self.adam, &tally, &r.plan)
                    .map(|()| r.holding = true)
                    .and_then(|()| graph.replay()),
                Some(graph) if graph.fits(&self.batch, &r.plan, self.adam) => graph
                    .begin(self.model, self.adam, &tally, &self.batch, &r.plan)
                    .map(|()| (r.holding, r.begun) = (true, true))
                    .and_then(|()| graph.replay()),
                _ => MinibatchGraph::capture(
                    self.model,
                    self.adam,
                    self.cfg,
                    &self.batch,
                    &tally,
                    &r.plan,
                    &self.device,
                )
                .map(|graph| {
                    *r.graph = Some(graph.fail_after(r.fail_after.take()));
                    (r.holding, r.begun) = (true, true);
                }),
            }
        };
        match outcome {
            Ok(()) => {
                r.plan.done += 1;
                self.adam.time += 1;
                *tally.minibatches += 1;
                true
            }
            // This minibatch and the rest run directly, on the state before it.
            Err(e) => {
                if let Some(graph) = r.graph.take()
                    && r.holding
                {
                    graph.release(self.adam, &mut tally);
                }
                *r.fallback = Some(format!(
                    "replaying the update's minibatches failed ({e}); they run directly from \
                     there on"
                ));
                self.replay = None;
                false
            }
        }
    }

    #[cfg(feature = "wgpu")]
    fn settle(&mut self, tally: Option<Carried<'_>>) {
        let (Some(mut tally), Some(r)) = (tally, &mut self.replay) else {
            return;
        };
        if let (true, Some(graph)) = (r.holding, r.graph.as_ref()) {
            graph.release(self.adam, &mut tally);
            r.holding = false;
            // As after a direct step: the model holds no older buffer alive.
            self.adam.place_views_into(self.model);
        }
    }

    fn shuffle(&mut self, order: &[usize]) {
        self.epochs += 1;
        let order: Vec<i64> = order.iter().map(|&i| i as i64).collect();
        let n = order.len();
        self.order = Some(Tensor::from_data(TensorData::new(order, [n]), &self.device));
    }

    fn minibatch(&mut self, rows: Range<usize>, scale: Scale<'_>) -> Diagnostics {
        self.picks.cut();
        let order = self
            .order
            .clone()
            .expect("an epoch's shuffle before its minibatches");
        let idx = order.narrow(0, rows.start, rows.len());
        let scale = match scale {
            Scale::Host(s) => Tensor::from_data(TensorData::new(vec![s], [1]), &self.device),
            Scale::Device(s) => s.clone().inner(),
        };
        #[cfg(test)]
        if let Some((device, batch)) = &self.autodiff {
            let idx = Tensor::from_inner(idx);
            let scale = Tensor::from_inner(scale);
            let (losses, grad_sq, grad) =
                minibatch(self.model, self.adam, self.cfg, batch, idx, scale, device);
            self.grad = Some(grad);
            return Diagnostics::Device { losses, grad_sq };
        }
        let (losses, grad_sq, grad) = manual::minibatch(
            self.model,
            self.adam,
            self.cfg,
            &self.batch,
            idx,
            scale,
            &mut self.picks,
        );
        self.grad = Some(grad);
        self.picks.cut();
        Diagnostics::Device { losses, grad_sq }
    }

    fn step(&mut self, lr: f64, factor: Factor) {
        self.picks.cut();
        let mut grad = self.grad.take().expect("a minibatch before its step");
        match factor {
            Factor::Host(factor) => {
                if factor != 1.0 {
                    grad = grad.mul_scalar(factor);
                }
                self.adam.step_flat(self.model, lr, grad, None);
            }
            Factor::Device { factor, gate } => {
                if let Some(factor) = factor {
                    grad = grad.mul(factor);
                }
                self.adam.step_flat(self.model, lr, grad, gate);
            }
        }
        // The minibatches read the parameters from Adam's flat buffer; the model takes the
        // slices that are views (free), so that it holds no older buffer alive; the reference
        // reads the model's.
        self.adam.place_views_into(self.model);
        #[cfg(test)]
        if self.autodiff.is_some() {
            self.adam.place_into(self.model);
        }
        self.picks.cut();
    }

    fn skip(&mut self) {
        self.grad = None;
        self.adam.time += 1;
    }

    fn finish(self) {
        // The parameters become the model's once an update (after its last step, or an error).
        self.adam.place_into(self.model);
    }
}

/// The losses and gradient of one minibatch (`idx` into `batch`) through burn's autodiff, the
/// reference [`manual::minibatch`] is held to: the loss scaled by `scale` before the backward
/// pass: `[6]` losses (loss, policy loss, value loss, entropy, approx_kl, clipfrac), `[1]`
/// Σ‖g‖² of the scaled loss's gradient, and that gradient, flat in `adam`'s layout (its square
/// sum is one reduction over that buffer, not one per parameter). Everything is on the
/// training device `device`.
#[cfg(test)]
pub(super) fn minibatch(
    model: &ActorCritic,
    adam: &FlatAdam,
    cfg: &PpoConfig,
    batch: &UpdateBatch,
    idx: Tensor<1, Int>,
    scale: Tensor<1>,
    device: &Device,
) -> (Tensor<1>, Tensor<1>, Tensor<1>) {
    use crate::ppo::model::{gaussian_entropy, gaussian_log_prob};
    use burn::optim::GradientsParams;

    let dtype = cfg.precision.compute_dtype();
    let b = idx.dims()[0];
    let UpdateBatch {
        obs,
        actions,
        log_probs: old_logp,
        values: old_values,
        advantages: mut adv,
        returns,
    } = batch.rows(idx);

    let (mean, value) = model.forward(obs, dtype);
    let log_std = model.log_std();
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
    let mut grads = GradientsParams::from_grads(grads, model);
    let grad = adam.flat_grads(&mut grads, device);
    let grad_sq = grad.clone().square().sum();
    let losses = Tensor::cat(
        vec![
            loss.detach(),
            policy_loss.detach(),
            value_loss.detach(),
            entropy.detach(),
            approx_kl,
            clipfrac,
        ],
        0,
    );
    (losses, grad_sq, grad)
}
