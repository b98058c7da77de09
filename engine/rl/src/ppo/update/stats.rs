//! The update's diagnostics ([`UpdateStats`]) and the two places its decisions are made:
//! [`HostTally`] on host numbers, [`DeviceTally`] on device tensors (see the module docs of
//! [`super`] for which runs when, and why there are two).

use burn::tensor::{Bool, Device, Int, Tensor, TensorData};
use serde::{Deserialize, Serialize};

use super::{Diagnostics, Factor, Scale, Tally, Verdict, kernels_run};
use crate::ppo::config::PpoConfig;
use crate::ppo::error::PpoError;
use tradetune_device::precision::{LossScaler, MAX_LOSS_SCALE, MIN_LOSS_SCALE, ScaleStep};

/// CleanRL's per-update diagnostics (means over the minibatches that were run: the applied
/// steps, and, as SB3 counts it, the minibatch whose KL stopped the update early; the gradient
/// norm over the applied steps only).
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

/// The gradient-norm clip's factor for the norm `norm` and the limit `max` (0: no clipping).
///
/// Where an update decides per minibatch on the host (`target_kl`), it clips only above the
/// limit; otherwise as torch's `clip_grad_norm_`, `min(1, max / (‖g‖ + 1e-6))`, which the
/// device computes without a branch. The two differ only for a norm within 1e-6 below the
/// limit; both are kept so that every path's numbers stay what they were.
fn clip_factor(norm: f32, max: f32, only_above: bool) -> f32 {
    if max <= 0.0 {
        1.0
    } else if only_above {
        if norm > max { max / (norm + 1e-6) } else { 1.0 }
    } else {
        (max / (norm + 1e-6)).min(1.0)
    }
}

/// The decisions on host numbers: the host engine's, and the device engine's when
/// `target_kl` reads each minibatch's diagnostics (one read each, before its step). The loss
/// scaler is [`LossScaler`] itself; the means are summed in f64.
pub(super) struct HostTally<'a> {
    cfg: &'a PpoConfig,
    scaler: &'a mut LossScaler,
    update: usize,
    lr: f64,
    /// The rollout values read before the update ran.
    extra: Vec<f32>,
    /// Σ policy loss, value loss, entropy, approx_kl, clipfrac, gradient norm of the steps.
    sums: [f64; 6],
    /// The judged minibatch's row of `sums`, until it is recorded.
    pending: [f32; 6],
    /// The diagnostics (all but the gradient norm) of the minibatch whose KL stopped the
    /// update: it is not stepped, but SB3 counts it in its means, and it is the one a user
    /// tuning `target_kl` wants to see.
    stopped: Option<[f32; 5]>,
    steps: usize,
    skipped: usize,
}

impl<'a> HostTally<'a> {
    /// `extra`: the rollout values riding along, read (and checked) before the update.
    pub fn new(
        cfg: &'a PpoConfig,
        scaler: &'a mut LossScaler,
        update: usize,
        lr: f64,
        extra: Vec<f32>,
    ) -> Self {
        Self {
            cfg,
            scaler,
            update,
            lr,
            extra,
            sums: [0.0; 6],
            pending: [0.0; 6],
            stopped: None,
            steps: 0,
            skipped: 0,
        }
    }
}

impl Tally for HostTally<'_> {
    fn scale(&self) -> Scale<'_> {
        Scale::Host(self.scaler.scale())
    }

    fn judge(&mut self, diagnostics: Diagnostics) -> Result<Verdict, PpoError> {
        let scale = self.scaler.scale();
        let [loss, pl, vl, ent, kl, cf, grad_sq] = diagnostics.read()?;
        if let Some(target) = self.cfg.target_kl
            && kl > 1.5 * target
        {
            self.stopped = Some([pl, vl, ent, kl, cf]);
            return Ok(Verdict::StopEarly);
        }
        let norm = grad_sq.sqrt() / scale;
        let finite = loss.is_finite() && norm.is_finite();
        if self.scaler.update(finite) == ScaleStep::Skip {
            if !self.cfg.precision.scales_loss() {
                // The steps before this one stay applied; this one is not taken.
                return Err(PpoError::Diverged {
                    update: self.update,
                    what: format!(
                        "loss {loss} / gradient norm {norm} in minibatch {} of the update",
                        self.steps + self.skipped + 1
                    ),
                });
            }
            self.skipped += 1;
            if self.scaler.underflowed() {
                return Err(PpoError::LossScaleUnderflow {
                    update: self.update,
                    floor: MIN_LOSS_SCALE,
                });
            }
            return Ok(Verdict::Skip);
        }
        let clip = clip_factor(norm, self.cfg.max_grad_norm, self.cfg.target_kl.is_some());
        self.pending = [pl, vl, ent, kl, cf, norm];
        Ok(Verdict::Step(Factor::Host(clip / scale)))
    }

    fn record(mut self) -> Self {
        for (s, v) in self.sums.iter_mut().zip(self.pending) {
            *s += v as f64;
        }
        self.steps += 1;
        self
    }

    fn finish(
        self,
        epochs: usize,
        _check: &mut dyn FnMut(&[f32]) -> Result<(), PpoError>,
    ) -> Result<(UpdateStats, Vec<f32>), PpoError> {
        let mut sums = self.sums;
        let mut judged = self.steps;
        if let Some(stopped) = self.stopped {
            for (s, v) in sums.iter_mut().zip(stopped) {
                *s += v as f64;
            }
            judged += 1;
        }
        let [pl, vl, ent, kl, cf] =
            [0, 1, 2, 3, 4].map(|i| (sums[i] / judged.max(1) as f64) as f32);
        let gn = (sums[5] / self.steps.max(1) as f64) as f32;
        let stats = UpdateStats {
            learning_rate: self.lr,
            policy_loss: pl,
            value_loss: vl,
            entropy: ent,
            approx_kl: kl,
            clipfrac: cf,
            grad_norm: gn,
            steps: self.steps,
            skipped_steps: self.skipped,
            epochs,
            loss_scale: self.scaler.scale(),
            ..UpdateStats::default()
        };
        Ok((stats, self.extra))
    }
}

/// The decisions on device tensors, for the device engine when no decision needs the host:
/// the gradient clip and f16's loss scaling (scale, skips and growth as [`LossScaler`], a
/// skip through [`super::flat_adam::FlatAdam`]'s gate) are computed on the device and the
/// diagnostics summed there (in f32); one read at the end, with the rollout values riding
/// along, then the errors a host decision would have raised at once.
pub(super) struct DeviceTally<'a> {
    cfg: &'a PpoConfig,
    scaler: &'a mut LossScaler,
    /// The training device.
    device: Device,
    update: usize,
    lr: f64,
    scaling: bool,
    /// The loss scaler's state on the device (see [`LossScaler::update`]).
    scale: Tensor<1>,
    clean: Tensor<1>,
    interval: f32,
    /// Σ over minibatches of [loss, policy, value, entropy, kl, clipfrac, ‖g‖] of the applied
    /// steps, then the count of non-finite ones.
    sums: Tensor<1>,
    minibatches: usize,
    ride_along: Tensor<1>,
    /// The judged minibatch's diagnostics, gradient norm and finiteness, until recorded.
    pending: Option<(Tensor<1>, Tensor<1>, Tensor<1, Bool>)>,
    /// Whether the judgement and count run as one kernel ([`super::kernels::tally`]: a cubecl
    /// device; `scale`, `clean` and `sums` are then inner tensors), and the judged minibatch's
    /// next `(scale, clean, sums)` from it, until recorded.
    kernel: bool,
    pending_kernel: Option<(Tensor<1>, Tensor<1>, Tensor<1>)>,
    /// Indices of the diagnostics' loss, square norm and first six (gathers fuse with what
    /// follows them; a narrow of an unaligned range is a kernel of its own).
    picks: [Tensor<1, Int>; 3],
}

impl<'a> DeviceTally<'a> {
    /// `ride_along`: values read with the diagnostics at the end.
    pub fn new(
        cfg: &'a PpoConfig,
        scaler: &'a mut LossScaler,
        device: &Device,
        update: usize,
        lr: f64,
        ride_along: Tensor<1>,
    ) -> Self {
        let one = |v: f32| Tensor::<1>::from_data(TensorData::new(vec![v], [1]), device);
        let scale = one(scaler.scale());
        let kernel = kernels_run(&scale);
        let inner = |t: Tensor<1>| if kernel { t.inner() } else { t };
        Self {
            cfg,
            device: device.clone(),
            update,
            lr,
            scaling: cfg.precision.scales_loss(),
            scale: inner(scale),
            clean: inner(one(scaler.clean_steps() as f32)),
            interval: scaler.growth_interval() as f32,
            scaler,
            sums: inner(Tensor::<1>::zeros([8], device)),
            minibatches: 0,
            ride_along,
            pending: None,
            kernel,
            pending_kernel: None,
            picks: [0..1, 6..7, 0..6].map(|r: std::ops::Range<i64>| {
                let n = r.clone().count();
                Tensor::from_data(TensorData::new(r.collect::<Vec<_>>(), [n]), device)
            }),
        }
    }
}

impl DeviceTally<'_> {
    /// Tests: judges and counts with the tensor program even where the kernel runs.
    #[cfg(test)]
    pub fn without_kernel(mut self) -> Self {
        self.kernel = false;
        self
    }

    /// Whether the judgement and count run as [`super::kernels::tally`].
    #[cfg(test)]
    pub fn runs_kernel(&self) -> bool {
        self.kernel
    }

    /// [`Tally::judge`] as one launch of [`super::kernels::tally`], which also computes what
    /// [`Tally::record`] then takes: the same decisions and sums as the tensor program.
    #[cfg(feature = "wgpu")]
    fn judge_in_kernel(&mut self, losses: Tensor<1>, grad_sq: Tensor<1>) -> Verdict {
        let out = super::kernels::tally(
            losses.inner(),
            grad_sq.inner(),
            &self.scale,
            &self.clean,
            &self.sums,
            &tally_coefs(self.cfg, self.interval),
        );
        let (factor, gate) = kernel_factor(self.cfg, out.factor, out.gate);
        self.pending_kernel = Some((out.scale, out.clean, out.sums));
        Verdict::Step(Factor::Device { factor, gate })
    }

    #[cfg(not(feature = "wgpu"))]
    fn judge_in_kernel(&mut self, _losses: Tensor<1>, _grad_sq: Tensor<1>) -> Verdict {
        unreachable!("no tally kernel without the wgpu feature")
    }
}

/// The tally kernel's settings for `cfg`, the loss scale growing after `interval` clean steps.
#[cfg(feature = "wgpu")]
pub(super) fn tally_coefs(cfg: &PpoConfig, interval: f32) -> super::kernels::TallyCoefs {
    super::kernels::TallyCoefs {
        max_norm: cfg.max_grad_norm,
        scaling: cfg.precision.scales_loss(),
        interval,
        min_scale: MIN_LOSS_SCALE,
        max_scale: MAX_LOSS_SCALE,
    }
}

/// What of the tally kernel's factor and gate Adam's step takes under `cfg`: the factor where
/// the loss is scaled or the gradient clipped, the gate where the loss is scaled.
#[cfg(feature = "wgpu")]
pub(super) fn kernel_factor(
    cfg: &PpoConfig,
    factor: Tensor<1>,
    gate: Tensor<1>,
) -> (Option<Tensor<1>>, Option<Tensor<1>>) {
    let scaling = cfg.precision.scales_loss();
    (
        (scaling || cfg.max_grad_norm > 0.0).then_some(factor),
        scaling.then_some(gate),
    )
}

/// The device tally's running state, lent to a replayed minibatch (`super::replay`), which
/// carries it on the device through its graph and hands it back.
#[cfg_attr(not(feature = "wgpu"), allow(dead_code))]
pub(super) struct Carried<'a> {
    /// `[1]` the loss scale, `[1]` clean steps in a row, `[8]` the sums (inner tensors).
    pub scale: &'a mut Tensor<1>,
    pub clean: &'a mut Tensor<1>,
    pub sums: &'a mut Tensor<1>,
    /// Minibatches counted.
    pub minibatches: &'a mut usize,
    /// Clean steps before the loss scale grows.
    pub interval: f32,
}

impl Tally for DeviceTally<'_> {
    fn scale(&self) -> Scale<'_> {
        Scale::Device(&self.scale)
    }

    fn carried(&mut self) -> Option<Carried<'_>> {
        // Only the kernel's state (inner tensors), between minibatches.
        (self.kernel && self.pending_kernel.is_none()).then_some(Carried {
            scale: &mut self.scale,
            clean: &mut self.clean,
            sums: &mut self.sums,
            minibatches: &mut self.minibatches,
            interval: self.interval,
        })
    }

    fn judge(&mut self, diagnostics: Diagnostics) -> Result<Verdict, PpoError> {
        let (losses, grad_sq) = diagnostics.on(&self.device);
        let max_norm = self.cfg.max_grad_norm;
        if self.kernel {
            return Ok(self.judge_in_kernel(losses, grad_sq));
        }
        let diagnostics = Tensor::cat(vec![losses, grad_sq], 0);
        // The norm of the unscaled gradients.
        let [loss, square_norm, _] = self.picks.clone();
        let norm = diagnostics
            .clone()
            .select(0, square_norm)
            .sqrt()
            .div(self.scale.clone());
        // `is_finite` (NaN and infinity tests and their `and`, four kernels that burn does not
        // fuse): arithmetic tests such as x − x == 0 are folded away by shader compilers that
        // assume finite numbers (lavapipe's does), and then no overflow is ever seen.
        let finite = diagnostics
            .clone()
            .select(0, loss)
            .add(norm.clone())
            .is_finite();
        let mut factor = self.scale.clone().recip();
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
        let factor = (self.scaling || max_norm > 0.0).then_some(factor);
        let gate = self
            .scaling
            .then(|| Tensor::<1>::zeros([1], &self.device).mask_fill(finite.clone(), 1.0));
        self.pending = Some((diagnostics, norm, finite));
        Ok(Verdict::Step(Factor::Device { factor, gate }))
    }

    fn record(mut self) -> Self {
        if let Some((scale, clean, sums)) = self.pending_kernel.take() {
            (self.scale, self.clean, self.sums) = (scale, clean, sums);
            self.minibatches += 1;
            return self;
        }
        let Some((diagnostics, norm, finite)) = self.pending.take() else {
            return self;
        };
        let first_six = self.picks[2].clone();
        let applied = Tensor::cat(vec![diagnostics.select(0, first_six), norm], 0);
        let row = if self.scaling {
            // Clean steps in a row; the scale halves on an overflow and doubles after
            // `interval` clean steps, within its bounds.
            let counted = self
                .clean
                .clone()
                .zeros_like()
                .mask_where(finite.clone(), self.clean.clone().add_scalar(1.0));
            let grow = counted.clone().greater_equal_elem(self.interval);
            // (`clamp` with an infinite bound: burn's fusion fuses it, not clamp_min/max.)
            let grown = self
                .scale
                .clone()
                .mul_scalar(2.0)
                .clamp(f32::NEG_INFINITY, MAX_LOSS_SCALE);
            let backed = self
                .scale
                .clone()
                .mul_scalar(0.5)
                .clamp(MIN_LOSS_SCALE, f32::INFINITY);
            self.scale =
                backed.mask_where(finite.clone(), self.scale.mask_where(grow.clone(), grown));
            self.clean = counted.mask_fill(grow, 0.0);
            // The flag at each of the row's seven places, as a 0/1 number broadcast by an
            // addition (an expanded bool mask is not fused).
            let flag = Tensor::<1>::zeros([1], &self.device).mask_fill(finite.clone(), 1.0);
            let at_each = applied.zeros_like().add(flag).equal_elem(1.0);
            applied.zeros_like().mask_where(at_each, applied)
        } else {
            applied
        };
        self.sums = self.sums.add(Tensor::cat(
            vec![row, Tensor::ones([1], &self.device).mask_fill(finite, 0.0)],
            0,
        ));
        self.minibatches += 1;
        self
    }

    fn finish(
        self,
        epochs: usize,
        check: &mut dyn FnMut(&[f32]) -> Result<(), PpoError>,
    ) -> Result<(UpdateStats, Vec<f32>), PpoError> {
        let (update, minibatches) = (self.update, self.minibatches);
        let n_sums = 10;
        let read = tradetune_device::readback::read_f32(
            Tensor::cat(vec![self.sums, self.scale, self.clean, self.ride_along], 0),
            "update: diagnostics",
        )
        .map_err(|e| PpoError::read("update diagnostics", e))?;
        if read.len() < n_sums {
            return Err(PpoError::read("update diagnostics", "wrong length"));
        }
        let (sums, extra) = read.split_at(n_sums);
        check(extra)?;
        let bad = sums[7].round() as usize;
        if self.scaling {
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
            learning_rate: self.lr,
            policy_loss: sums[1] / n,
            value_loss: sums[2] / n,
            entropy: sums[3] / n,
            approx_kl: sums[4] / n,
            clipfrac: sums[5] / n,
            grad_norm: sums[6] / n,
            steps,
            skipped_steps: minibatches - steps,
            epochs,
            loss_scale: self.scaler.scale(),
            ..UpdateStats::default()
        };
        Ok((stats, extra.to_vec()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tradetune_device::precision::Precision;

    /// The minibatch whose KL stopped the update is not stepped, but it counts in the means
    /// as SB3 counts it (its approx_kl is the one a user tuning `target_kl` needs to see); the
    /// gradient norm is the applied steps' only.
    #[test]
    fn the_minibatch_that_stopped_the_update_counts_in_its_means_but_not_in_its_norm() {
        let cfg = PpoConfig::new().with_target_kl(Some(0.01));
        let mut scaler = LossScaler::new(Precision::F32, 1.0, 1);
        let mut tally = HostTally::new(&cfg, &mut scaler, 0, 1e-3, Vec::new());
        // [loss, policy, value, entropy, kl, clipfrac, Σ‖g‖²]
        let first = tally
            .judge(Diagnostics::Host([1.0, 0.1, 2.0, 1.5, 0.004, 0.1, 4.0]))
            .unwrap();
        assert!(matches!(first, Verdict::Step(_)));
        let mut tally = tally.record();
        let second = tally
            .judge(Diagnostics::Host([1.0, 0.3, 4.0, 1.3, 0.05, 0.3, 100.0]))
            .unwrap();
        assert!(matches!(second, Verdict::StopEarly));
        let (stats, _) = tally.finish(1, &mut |_| Ok(())).unwrap();
        assert_eq!((stats.steps, stats.epochs), (1, 1));
        let close = |got: f32, want: f32| (got - want).abs() < 1e-6;
        assert!(close(stats.approx_kl, 0.027), "{stats:?}");
        assert!(close(stats.policy_loss, 0.2), "{stats:?}");
        assert!(close(stats.value_loss, 3.0), "{stats:?}");
        assert!(close(stats.entropy, 1.4), "{stats:?}");
        assert!(close(stats.clipfrac, 0.2), "{stats:?}");
        assert!(close(stats.grad_norm, 2.0), "{stats:?}");
    }
}
