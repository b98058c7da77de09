//! A device's update held against the CPU's: the same made-up rollout, the same initial weights
//! (a host RNG draws them), two updates by the device engine on the device and by the host
//! engine on the CPU in f32 (the CPU's training path, itself held to burn's autodiff by the
//! tests), their diagnostics and the parameters' moves compared. `bench gpu` runs it on the
//! card before its figures are read: a card can run kernels no test ran (cubecl gives plane
//! operations to GPUs only, so their reductions and matmul routines never run on lavapipe), and
//! a fast wrong run would look like a fast right one.

use burn::tensor::{Device, Tensor, TensorData};
use serde::Serialize;
use tradetune_device::precision::Precision;

use super::{Learner, UpdateBatch};
use crate::ppo::config::PpoConfig;
use crate::ppo::error::PpoError;
use crate::ppo::host_update::HostBatch;

/// A made-up rollout of `s` samples with `d` observations and `a` actions: values in ranges
/// that clip some ratios and values, on `device`, and as host buffers.
pub(crate) fn made_up_batch(
    s: usize,
    d: usize,
    a: usize,
    device: &Device,
) -> (UpdateBatch, HostBatch) {
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
    let t2 =
        |v: &Vec<f32>, w: usize| Tensor::<2>::from_data(TensorData::new(v.clone(), [s, w]), device);
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

/// How far a device's update is from the CPU's.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Agreement {
    /// The device's precision (the CPU's is f32).
    pub precision: String,
    /// The largest difference of the two updates' diagnostics (policy and value loss, entropy,
    /// approx KL, clip fraction, gradient norm), each relative to its own size on the CPU (at
    /// least [`DIAGNOSTIC_FLOOR`]).
    pub diagnostics: f32,
    /// The largest, over the parameter tensors, of the norm of the difference of their moves
    /// over the two updates over the norm of the CPU's moves (Adam moves each parameter by
    /// about the learning rate, so the moves are compared, not the parameters; tensor by
    /// tensor, so that a small one, the log σ or a head, is not lost in the others; within a
    /// tensor a parameter whose gradient is about zero, which f16's rounding may move the
    /// other way, weighs as one among all).
    pub moves: f32,
    /// What each may reach: f32 as the tests hold a GPU to the CPU, f16 its rounding.
    pub tolerance: f32,
    /// Optimiser steps the device skipped for a non-finite f16 gradient (its loss scale
    /// starts low here, so none should be; the CPU, in f32, skips none).
    pub skipped_steps: usize,
    /// The made-up rollout: samples, observations (the configuration's), minibatch.
    pub samples: usize,
    pub obs_dim: usize,
    pub batch_size: usize,
}

impl Agreement {
    pub fn agrees(&self) -> bool {
        self.diagnostics <= self.tolerance
            && self.moves <= self.tolerance
            && self.skipped_steps == 0
    }
}

/// The size below which a diagnostic's difference is measured against this instead of its own
/// (approx KL and the clip fraction may be about zero).
pub const DIAGNOSTIC_FLOOR: f32 = 1e-2;

/// The tolerance of a device in `precision` against the CPU in f32.
pub fn tolerance(precision: Precision) -> f32 {
    match precision {
        Precision::F32 => 1e-3,
        _ => 5e-2,
    }
}

/// The largest of `|got − want| / max(|want|, floor)` (infinite where one is not a number).
fn difference(got: &[f32], want: &[f32], floor: f32) -> f32 {
    got.iter()
        .zip(want)
        .map(|(g, w)| {
            let d = (g - w).abs() / w.abs().max(floor);
            if d.is_nan() { f32::INFINITY } else { d }
        })
        .fold(0f32, f32::max)
}

/// ‖got − want‖ / ‖want‖ (infinite where it is not a number; a `want` of all zeros is held
/// to `got`'s own norm).
fn norm_difference(got: &[f32], want: &[f32]) -> f32 {
    let (mut diff, mut norm) = (0f64, 0f64);
    for (g, w) in got.iter().zip(want) {
        diff += f64::from(g - w).powi(2);
        norm += f64::from(*w).powi(2);
    }
    if norm == 0.0 {
        return if diff == 0.0 { 0.0 } else { f32::INFINITY };
    }
    let d = (diff.sqrt() / norm.sqrt()) as f32;
    if d.is_nan() { f32::INFINITY } else { d }
}

/// Two updates of `cfg`'s network, precision and minibatch (two minibatches a rollout, one
/// epoch) over a made-up rollout of `obs_dim` observations and 4 actions, on `device` by its
/// device engine and on the CPU by the host engine in f32.
pub fn agreement(cfg: &PpoConfig, obs_dim: usize, device: &Device) -> Result<Agreement, PpoError> {
    let cpu = cfg.clone().with_precision(Precision::F32);
    agreement_of(cfg, obs_dim, device, &cpu)
}

/// [`agreement`] with the CPU's run given its own configuration (the tests: a different one
/// must disagree).
pub(crate) fn agreement_of(
    cfg: &PpoConfig,
    obs_dim: usize,
    device: &Device,
    cpu_cfg: &PpoConfig,
) -> Result<Agreement, PpoError> {
    let (d, a) = (obs_dim.max(1), 4);
    let batch_size = cfg.batch_size.max(2);
    let s = 2 * batch_size;
    // f16's loss scale starts low: a first step skipped for an overflow on the device, which
    // the CPU in f32 never skips, would leave the two a step apart.
    let shaped = |c: &PpoConfig| {
        c.clone()
            .with_n_steps(s)
            .with_batch_size(batch_size)
            .with_n_epochs(1)
            .with_target_kl(None)
            .with_initial_loss_scale(16.0)
    };
    let mut runs = Vec::new();
    let mut start = Vec::new();
    let mut skipped_steps = 0;
    for (cfg, on, host) in [
        (
            shaped(cfg),
            device.clone().without_autodiff().autodiff(),
            false,
        ),
        (shaped(cpu_cfg), Device::flex().autodiff(), true),
    ] {
        let (rollout, _) = made_up_batch(s, d, a, &on);
        let model = cfg.policy.init(d, a, cfg.seed, &on);
        if host {
            start = model.param_tensors()?;
        }
        let mut learner = Learner::new(model, &cfg, &on);
        learner.set_host_update(host);
        let mut diagnostics = Vec::new();
        for update in 0..2 {
            let ride = Tensor::<1>::from_data(TensorData::new(vec![0.0f32], [1]), &on);
            let (st, _) =
                learner.update(&rollout, cfg.learning_rate, update, ride, &mut |_| Ok(()))?;
            if !host {
                skipped_steps += st.skipped_steps;
            }
            diagnostics.extend([
                st.policy_loss,
                st.value_loss,
                st.entropy,
                st.approx_kl,
                st.clipfrac,
                st.grad_norm,
            ]);
        }
        runs.push((learner.model().param_tensors()?, diagnostics));
    }
    let (gpu, cpu) = (&runs[0], &runs[1]);
    let moved = |p: &[f32], s: &[f32]| p.iter().zip(s).map(|(p, s)| p - s).collect::<Vec<_>>();
    let moves = (gpu.0.iter().zip(&cpu.0).zip(&start))
        .map(|((g, c), s)| norm_difference(&moved(g, s), &moved(c, s)))
        .fold(0f32, f32::max);
    Ok(Agreement {
        precision: cfg.precision.to_string(),
        diagnostics: difference(&gpu.1, &cpu.1, DIAGNOSTIC_FLOOR),
        moves,
        tolerance: tolerance(cfg.precision),
        skipped_steps,
        samples: s,
        obs_dim: d,
        batch_size,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The device engine on the CPU agrees with the host engine; on wgpu too where an adapter
    /// is found (f32 and, where it has it, f16); a CPU run of another learning rate does not,
    /// so a disagreement is seen.
    #[test]
    fn a_device_update_agrees_with_the_cpus_and_a_different_one_does_not() {
        let cfg = super::super::tests::config(crate::ppo::ActivationKind::Tanh, Some(0.2), true);
        let flex = agreement(&cfg, 9, &Device::flex()).expect("an agreement");
        assert!(flex.agrees(), "{flex:?}");
        assert_eq!(flex.precision, "f32");
        let other = agreement_of(
            &cfg,
            9,
            &Device::flex(),
            &cfg.clone().with_learning_rate(3e-3),
        )
        .expect("an agreement");
        assert!(!other.agrees(), "{other:?}");
        assert!(other.moves > 0.1, "{other:?}");
        if let Some(wgpu) = tradetune_device::wgpu_for_test("agreement") {
            let mut precisions = vec![Precision::F32];
            if tradetune_device::supported_precisions(tradetune_device::DeviceSpec::Wgpu(None))
                .is_ok_and(|p| p.contains(&Precision::F16))
            {
                precisions.push(Precision::F16);
            }
            for p in precisions {
                let a = agreement(&cfg.clone().with_precision(p), 9, &wgpu).expect("an agreement");
                assert!(a.agrees(), "{a:?}");
            }
        }
    }

    /// Each diagnostic against its own size (a wrong approx KL is not hidden by a larger
    /// entropy), a NaN as the largest difference, a tensor's moves by their norm.
    #[test]
    fn differences_are_each_values_own() {
        assert_eq!(difference(&[1.0, 2.0], &[1.0, 2.0], 1e-2), 0.0);
        assert_eq!(difference(&[f32::NAN], &[1.0], 1e-2), f32::INFINITY);
        assert!((difference(&[1.1], &[1.0], 1e-2) - 0.1).abs() < 1e-6);
        // Entropy 5.7 right, approx KL 0.02 where it is 0.01: 100 % off, not 0.2 %.
        assert!((difference(&[5.7, 0.02], &[5.7, 0.01], 1e-2) - 1.0).abs() < 1e-5);
        // Near zero, against the floor.
        assert!((difference(&[1e-4], &[0.0], 1e-2) - 1e-2).abs() < 1e-6);
        assert_eq!(norm_difference(&[3.0, 4.0], &[3.0, 4.0]), 0.0);
        assert!((norm_difference(&[3.0, 4.0], &[0.0, 4.0]) - 0.75).abs() < 1e-6);
        assert_eq!(norm_difference(&[f32::NAN], &[1.0]), f32::INFINITY);
        assert_eq!(norm_difference(&[0.0], &[0.0]), 0.0);
        assert_eq!(norm_difference(&[1e-3], &[0.0]), f32::INFINITY);
    }
}
