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

/// How far a device's update is from the CPU's, each as the largest difference relative to
/// the CPU's largest value (as the tests' `close` measures it).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Agreement {
    /// The device's precision (the CPU's is f32).
    pub precision: String,
    /// Of the two updates' diagnostics: policy and value loss, entropy, approx KL, clip
    /// fraction, gradient norm.
    pub diagnostics: f32,
    /// Of the parameters' moves over the two updates, as the norm of their difference over
    /// the norm of the CPU's moves (Adam moves each parameter by about the learning rate, so
    /// the moves are compared, not the parameters, and a parameter whose gradient is about
    /// zero, which f16's rounding may move the other way, weighs as one among all).
    pub moves: f32,
    /// What each may reach: f32 as the tests hold a GPU to the CPU, f16 its rounding.
    pub tolerance: f32,
}

impl Agreement {
    pub fn agrees(&self) -> bool {
        self.diagnostics <= self.tolerance && self.moves <= self.tolerance
    }
}

/// The tolerance of a device in `precision` against the CPU in f32.
pub fn tolerance(precision: Precision) -> f32 {
    match precision {
        Precision::F32 => 1e-3,
        _ => 5e-2,
    }
}

/// The largest difference of `got` from `want`, relative to the largest of `want` (and to
/// each value's own size).
fn difference(got: &[f32], want: &[f32]) -> f32 {
    let scale = want.iter().fold(0f32, |m, w| m.max(w.abs()));
    got.iter()
        .zip(want)
        .map(|(g, w)| {
            let d = (g - w).abs() / (scale + w.abs()).max(1e-6);
            if d.is_nan() { f32::INFINITY } else { d }
        })
        .fold(0f32, f32::max)
}

/// ‖got − want‖ / ‖want‖ (infinite where it is not a number).
fn norm_difference(got: &[f32], want: &[f32]) -> f32 {
    let (mut diff, mut norm) = (0f64, 0f64);
    for (g, w) in got.iter().zip(want) {
        diff += f64::from(g - w).powi(2);
        norm += f64::from(*w).powi(2);
    }
    let d = (diff.sqrt() / norm.sqrt().max(1e-12)) as f32;
    if d.is_nan() { f32::INFINITY } else { d }
}

/// Two updates of `cfg`'s network (its precision, minibatch and epochs; 4 minibatches a
/// rollout) over a made-up rollout of 16 observations and 4 actions, on `device` by its
/// device engine and on the CPU by the host engine in f32.
pub fn agreement(cfg: &PpoConfig, device: &Device) -> Result<Agreement, PpoError> {
    let cpu = cfg.clone().with_precision(Precision::F32);
    agreement_of(cfg, device, &cpu)
}

/// [`agreement`] with the CPU's run given its own configuration (the tests: a different one
/// must disagree).
pub(crate) fn agreement_of(
    cfg: &PpoConfig,
    device: &Device,
    cpu_cfg: &PpoConfig,
) -> Result<Agreement, PpoError> {
    let (d, a) = (16, 4);
    let batch_size = cfg.batch_size.clamp(8, 256);
    let s = 4 * batch_size;
    let shaped = |c: &PpoConfig| {
        c.clone()
            .with_n_steps(s)
            .with_batch_size(batch_size)
            .with_n_epochs(cfg.n_epochs.clamp(1, 2))
            .with_target_kl(None)
    };
    let mut runs = Vec::new();
    let mut start = Vec::new();
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
            start = model.flat_params()?;
        }
        let mut learner = Learner::new(model, &cfg, &on);
        learner.set_host_update(host);
        let mut diagnostics = Vec::new();
        for update in 0..2 {
            let ride = Tensor::<1>::from_data(TensorData::new(vec![0.0f32], [1]), &on);
            let (st, _) =
                learner.update(&rollout, cfg.learning_rate, update, ride, &mut |_| Ok(()))?;
            diagnostics.extend([
                st.policy_loss,
                st.value_loss,
                st.entropy,
                st.approx_kl,
                st.clipfrac,
                st.grad_norm,
            ]);
        }
        runs.push((learner.model().flat_params()?, diagnostics));
    }
    let moved = |p: &[f32]| p.iter().zip(&start).map(|(p, s)| p - s).collect::<Vec<_>>();
    let (gpu, cpu) = (&runs[0], &runs[1]);
    Ok(Agreement {
        precision: cfg.precision.to_string(),
        diagnostics: difference(&gpu.1, &cpu.1),
        moves: norm_difference(&moved(&gpu.0), &moved(&cpu.0)),
        tolerance: tolerance(cfg.precision),
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
        let flex = agreement(&cfg, &Device::flex()).expect("an agreement");
        assert!(flex.agrees(), "{flex:?}");
        assert_eq!(flex.precision, "f32");
        let other = agreement_of(&cfg, &Device::flex(), &cfg.clone().with_learning_rate(3e-3))
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
                let a = agreement(&cfg.clone().with_precision(p), &wgpu).expect("an agreement");
                assert!(a.agrees(), "{a:?}");
            }
        }
    }

    #[test]
    fn a_nan_is_the_largest_difference() {
        assert_eq!(difference(&[1.0, 2.0], &[1.0, 2.0]), 0.0);
        assert_eq!(difference(&[f32::NAN], &[1.0]), f32::INFINITY);
        assert!((difference(&[1.1], &[1.0]) - 0.05).abs() < 1e-6);
        assert_eq!(norm_difference(&[3.0, 4.0], &[3.0, 4.0]), 0.0);
        assert!((norm_difference(&[3.0, 4.0], &[0.0, 4.0]) - 0.75).abs() < 1e-6);
        assert_eq!(norm_difference(&[f32::NAN], &[1.0]), f32::INFINITY);
    }
}
