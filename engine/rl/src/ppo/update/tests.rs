//! The host engine against the device engine: gradients, whole updates, Adam's saved state,
//! and a diverging update.

use burn::tensor::Int;

use super::*;
use crate::ppo::host_update::{HostBatch, HostWork};
use crate::ppo::model::{ActivationKind, ActorCriticConfig, NetArch};

/// A made-up rollout of `s` samples: values in ranges that clip some ratios and values.
pub(super) fn batch(s: usize, d: usize, a: usize, device: &Device) -> (UpdateBatch, HostBatch) {
    super::agreement::made_up_batch(s, d, a, device)
}

/// A small update over [`batch`]'s rollout (f32).
pub(super) fn config(
    activation: ActivationKind,
    clip_vf: Option<f32>,
    normalize: bool,
) -> PpoConfig {
    PpoConfig::new()
        .with_n_steps(16)
        .with_batch_size(24)
        .with_n_epochs(3)
        .with_clip_range_vf(clip_vf)
        .with_normalize_advantage(normalize)
        .with_ent_coef(0.01)
        .with_learning_rate(1e-3)
        .with_policy(
            ActorCriticConfig::new()
                .with_net_arch(NetArch::new().with_pi(vec![32, 16]).with_vf(vec![24]))
                .with_activation(activation)
                .with_log_std_init(-0.4),
        )
}

/// `got` within `tol` of `want`, relative to the largest of `want`.
pub(super) fn close(got: &[f32], want: &[f32], tol: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    let scale = want.iter().fold(0f32, |m, w| m.max(w.abs()));
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * (scale + w.abs()).max(1e-6),
            "{what}[{i}]: got {g}, reference {w} (largest {scale})"
        );
    }
}

/// The host step's gradient and diagnostics against burn's autodiff on the same minibatch,
/// for every activation, with and without the value clipping and advantage normalisation.
#[test]
fn the_host_gradients_are_burns() {
    let device = Device::flex().autodiff();
    let (d, a, s) = (9, 2, 48);
    for (activation, clip_vf, normalize) in [
        (ActivationKind::Tanh, None, true),
        (ActivationKind::Tanh, Some(0.1), false),
        (ActivationKind::Relu, Some(0.2), true),
        (ActivationKind::Elu, None, true),
        (ActivationKind::Silu, Some(0.05), true),
    ] {
        let cfg = config(activation, clip_vf, normalize);
        let model = cfg.policy.init(d, a, 3, &device);
        let learner = Learner::new(model, &cfg, &device);
        let net = learner
            .host
            .net
            .clone()
            .expect("the CPU device in f32 has a host layout");
        let (burn_batch, host_batch) = batch(s, d, a, &device);
        let idx: Vec<usize> = (0..24).map(|i| (i * 5 + 3) % s).collect();
        let idx_t = Tensor::<1, Int>::from_data(
            TensorData::new(idx.iter().map(|&i| i as i64).collect::<Vec<_>>(), [24]),
            &device,
        );
        let one = Tensor::<1>::from_data(TensorData::new(vec![1.0f32], [1]), &device);
        let (losses, grad_sq, grad) = device::minibatch(
            learner.model(),
            &learner.adam,
            &cfg,
            &burn_batch,
            idx_t,
            one,
            &device,
        );
        let want_grad: Vec<f32> = grad.try_into_vec_as().unwrap();
        let want_diag: Vec<f32> = Tensor::cat(vec![losses, grad_sq], 0)
            .try_into_vec_as()
            .unwrap();
        let params = learner.model().flat_params().unwrap();
        let mut work = HostWork::default();
        let diag = work.minibatch(&net, &cfg, &params, &host_batch, &idx);
        // The gradient's pieces cover every parameter once.
        let mut grad = vec![f32::NAN; params.len()];
        for (offset, g) in work.gradient(&net) {
            for (i, &v) in g.iter().enumerate() {
                assert!(grad[offset + i].is_nan(), "parameter {} twice", offset + i);
                grad[offset + i] = v;
            }
        }
        let what = format!("{activation:?} clip_vf {clip_vf:?} normalise {normalize}");
        close(&grad, &want_grad, 2e-5, &format!("{what}: gradient"));
        close(&diag, &want_diag, 2e-5, &format!("{what}: diagnostics"));
        // The case exercises both branches of each clip.
        assert!(
            diag[5] > 0.0 && diag[5] < 1.0,
            "{what}: clipfrac {}",
            diag[5]
        );
    }
}

/// Whole updates (several epochs of minibatches, a short last one, Adam from zero
/// moments, then from the first update's), with and without `target_kl`: the host path
/// follows the burn path.
#[test]
fn a_host_update_follows_the_burn_path() {
    let device = Device::flex().autodiff();
    let (d, a, s) = (9, 2, 56);
    for target_kl in [None, Some(0.5), Some(1e-4)] {
        let cfg = config(ActivationKind::Tanh, Some(0.2), true).with_target_kl(target_kl);
        let (burn_batch, _) = batch(s, d, a, &device);
        let mut runs = Vec::new();
        for host in [true, false] {
            let model = cfg.policy.init(d, a, 5, &device);
            let mut learner = Learner::new(model, &cfg, &device);
            learner.set_host_update(host);
            assert_eq!(learner.uses_host_update(), host);
            let mut stats = Vec::new();
            for update in 0..2 {
                let ride = Tensor::<1>::from_data(TensorData::new(vec![4.0f32], [1]), &device);
                let mut seen = Vec::new();
                let (st, extra) = learner
                    .update(&burn_batch, 1e-3, update, ride, &mut |x| {
                        seen.extend_from_slice(x);
                        Ok(())
                    })
                    .unwrap();
                assert_eq!((extra, seen), (vec![4.0], vec![4.0]));
                stats.push(st);
            }
            runs.push((
                learner.model().flat_params().unwrap(),
                stats,
                learner.adam.time,
            ));
        }
        let (host, burn) = (&runs[0], &runs[1]);
        let what = format!("target_kl {target_kl:?}");
        assert_eq!(host.2, burn.2, "{what}: Adam steps");
        for (h, b) in host.1.iter().zip(&burn.1) {
            assert_eq!((h.steps, h.epochs), (b.steps, b.epochs), "{what}");
            close(
                &[
                    h.policy_loss,
                    h.value_loss,
                    h.entropy,
                    h.approx_kl,
                    h.clipfrac,
                    h.grad_norm,
                ],
                &[
                    b.policy_loss,
                    b.value_loss,
                    b.entropy,
                    b.approx_kl,
                    b.clipfrac,
                    b.grad_norm,
                ],
                1e-4,
                &format!("{what}: diagnostics"),
            );
        }
        // Adam normalises each step to about lr per parameter, so compare the moves.
        let start = cfg.policy.init(d, a, 5, &device).flat_params().unwrap();
        let moved = |p: &[f32]| p.iter().zip(&start).map(|(p, s)| p - s).collect::<Vec<_>>();
        close(
            &moved(&host.0),
            &moved(&burn.0),
            1e-3,
            &format!("{what}: parameters"),
        );
    }
}

/// Adam's state the host path leaves is burn's format: saved, loaded into a burn-path
/// learner, the next update matches the host learner's.
#[test]
fn the_host_path_saves_and_resumes_adam() {
    let device = Device::flex().autodiff();
    let (d, a, s) = (9, 2, 48);
    let cfg = config(ActivationKind::Tanh, None, true);
    let (burn_batch, _) = batch(s, d, a, &device);
    let empty = || Tensor::<1>::zeros([0], &device);
    let mut host = Learner::new(cfg.policy.init(d, a, 8, &device), &cfg, &device);
    host.update(&burn_batch, 1e-3, 0, empty(), &mut |_| Ok(()))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("adam.bpk");
    host.save_optimizer(&path).unwrap();
    let mut resumed = Learner::new(cfg.policy.init(d, a, 8, &device), &cfg, &device);
    resumed.set_model(host.model().clone());
    resumed.load_optimizer(&path).unwrap();
    resumed.set_host_update(false);
    assert_eq!(resumed.adam.time, host.adam.time);
    host.update(&burn_batch, 1e-3, 1, empty(), &mut |_| Ok(()))
        .unwrap();
    resumed
        .update(&burn_batch, 1e-3, 1, empty(), &mut |_| Ok(()))
        .unwrap();
    let (h, r) = (
        host.model().flat_params().unwrap(),
        resumed.model().flat_params().unwrap(),
    );
    close(&h, &r, 1e-4, "parameters after a resumed update");
}

/// A non-finite loss stops the host update with an error, before any step reaches the
/// model.
#[test]
fn a_diverging_host_update_leaves_the_model_as_it_was() {
    let device = Device::flex().autodiff();
    let (d, a, s) = (9, 2, 48);
    let cfg = config(ActivationKind::Tanh, None, true);
    let (mut burn_batch, _) = batch(s, d, a, &device);
    // Every minibatch, the first included, has a non-finite value target.
    let returns = vec![f32::NAN; s];
    burn_batch.returns = Tensor::from_data(TensorData::new(returns, [s]), &device);
    let mut learner = Learner::new(cfg.policy.init(d, a, 8, &device), &cfg, &device);
    let before = learner.model().flat_params().unwrap();
    let err = learner
        .update(
            &burn_batch,
            1e-3,
            3,
            Tensor::zeros([0], &device),
            &mut |_| Ok(()),
        )
        .unwrap_err();
    assert!(
        matches!(&err, PpoError::Diverged { update: 3, what } if what.contains("not finite") || what.contains("NaN")),
        "{err}"
    );
    assert_eq!(learner.model().flat_params().unwrap(), before);
    assert_eq!(learner.adam.time, 0);
}

/// Adam's step with its bias corrections and learning rate read from the device (a replayed
/// minibatch's, `replay`) is the host-argument step's arithmetic exactly: the same parameters
/// and moments, bit for bit, at the first step and at a later one, gated or not.
#[test]
fn adams_step_with_device_corrections_is_the_host_steps() {
    use super::flat_adam::Corrections;
    let device = Device::flex();
    let cfg = config(ActivationKind::Tanh, None, true);
    let model = cfg.policy.init(5, 2, 3, &device);
    let adam = FlatAdam::new(&cfg, &model, 1);
    let (params, _, _) = adam.state(&model);
    let n = params.dims()[0];
    let wave = |k: usize, scale: f32| -> Tensor<1> {
        let v: Vec<f32> = (0..n)
            .map(|i| (((i * k + 3) % 89) as f32 / 44.5 - 1.0) * scale)
            .collect();
        Tensor::from_data(TensorData::new(v, [n]), &device)
    };
    let (m1, m2, grad) = (wave(7, 0.01), wave(11, 1e-4).abs(), wave(13, 0.5));
    let one = |v: f32| Tensor::<1>::from_data(TensorData::new(vec![v], [1]), &device);
    let lr = 3e-4;
    for (time, gate) in [(1, None), (37, None), (37, Some(0.0)), (37, Some(1.0))] {
        let [factor, epsilon] = adam.corrections(time);
        let run = |corrections| {
            let (p, a, b) = adam.stepped(
                params.clone(),
                m1.clone(),
                m2.clone(),
                grad.clone(),
                gate.map(one),
                corrections,
            );
            [p, a, b].map(|t| t.try_into_vec_as::<f32>().unwrap())
        };
        let host = run(Corrections::Host([factor, epsilon], lr));
        let on_device = run(Corrections::Device {
            factor: one(factor),
            epsilon: one(epsilon),
            lr: one(lr as f32),
        });
        assert_eq!(host, on_device, "step {time}, gate {gate:?}");
        // The step moved the parameters (ungated or gated open) or left them (gated shut).
        let before: Vec<f32> = params.clone().try_into_vec_as().unwrap();
        assert_eq!(
            host[0] == before,
            gate == Some(0.0),
            "step {time}, gate {gate:?}"
        );
    }
}

/// f16 with a loss scale so large that the first minibatches overflow (skipped, the scale
/// backing off): the update deciding on the device (no `target_kl`: the flat Adam's gate) and
/// the one deciding on the host (a `target_kl` that never stops it) count the skipped steps in
/// Adam's step counter alike, so the steps after them take the same bias corrections and the
/// parameters end the same (the host path did not count them: a different trajectory).
#[test]
fn a_skipped_f16_step_counts_alike_whichever_side_decides() {
    use tradetune_device::precision::Precision;
    let device = Device::flex().autodiff();
    let (d, a, s) = (9, 2, 56);
    let (burn_batch, _) = batch(s, d, a, &device);
    let mut runs = Vec::new();
    for target_kl in [None, Some(1e9)] {
        let mut cfg = config(ActivationKind::Tanh, None, true).with_target_kl(target_kl);
        cfg.precision = Precision::F16;
        cfg.initial_loss_scale = (1u32 << 24) as f32;
        let model = cfg.policy.init(d, a, 5, &device);
        let mut learner = Learner::new(model, &cfg, &device);
        assert!(!learner.uses_host_update());
        let ride = Tensor::<1>::zeros([0], &device);
        let (stats, _) = learner
            .update(&burn_batch, 1e-3, 0, ride, &mut |_| Ok(()))
            .unwrap();
        let params = learner.model().flat_params().unwrap();
        runs.push((stats, learner.adam.time, params));
    }
    let (device_side, host_side) = (&runs[0], &runs[1]);
    let (ds, hs) = (&device_side.0, &host_side.0);
    assert!(ds.skipped_steps > 0 && ds.steps > 0, "{ds:?}");
    assert_eq!((ds.steps, ds.skipped_steps), (hs.steps, hs.skipped_steps));
    assert_eq!(ds.loss_scale, hs.loss_scale);
    assert_eq!(
        device_side.1,
        ds.steps + ds.skipped_steps,
        "device: Adam's time"
    );
    assert_eq!(host_side.1, device_side.1, "host: Adam's time");
    let start = config(ActivationKind::Tanh, None, true)
        .policy
        .init(d, a, 5, &device)
        .flat_params()
        .unwrap();
    let moved = |p: &[f32]| p.iter().zip(&start).map(|(p, s)| p - s).collect::<Vec<_>>();
    close(
        &moved(&host_side.2),
        &moved(&device_side.2),
        1e-4,
        "parameters moved",
    );
}
