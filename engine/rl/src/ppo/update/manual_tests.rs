//! The device engine's hand-written backward pass ([`super::manual`]) against burn's autodiff
//! (`device::minibatch`): one minibatch's gradient and diagnostics, and whole updates, on the
//! CPU's flex device and, where wgpu finds an adapter, on wgpu in f32 and f16.
//!
//! The autodiff reference always runs on flex, in the precision under test: the weights (a host
//! RNG) and the rollout are the same on every device, and GPUs train through the hand-written
//! pass only. On wgpu, burn's autodiff would compile its own fused kernels for every activation
//! and precision, most of these tests' time with a fresh autotune and shader cache (CI): 199 and
//! 234 s on lavapipe, 2026-11-27, with the reference on wgpu.

use burn::tensor::Int;
use tradetune_device::DeviceSpec;
use tradetune_device::precision::Precision;

use super::tests::close;
use super::*;
use crate::ppo::model::ActivationKind;

/// [`super::tests::batch`]'s rollout of `s` samples, on `device`.
fn batch(s: usize, d: usize, a: usize, device: &Device) -> UpdateBatch {
    super::tests::batch(s, d, a, device).0
}

/// [`super::tests::config`] in `precision`.
fn config(
    activation: ActivationKind,
    clip_vf: Option<f32>,
    normalize: bool,
    precision: Precision,
) -> PpoConfig {
    super::tests::config(activation, clip_vf, normalize).with_precision(precision)
}

/// The (autodiff) training devices to compare on, with their precisions and tolerances:
/// flex in f32 and f16; wgpu in f32 and, where the adapter has it, f16 (skipped without an
/// adapter unless `TRADETUNE_REQUIRE_GPU=1`).
fn devices(test: &str) -> Vec<(Device, Precision, f32)> {
    let mut out = vec![
        (Device::flex().autodiff(), Precision::F32, 2e-5),
        (Device::flex().autodiff(), Precision::F16, 2e-2),
    ];
    if let Some(device) = tradetune_device::wgpu_for_test(test) {
        let device = device.autodiff();
        out.push((device.clone(), Precision::F32, 2e-5));
        if tradetune_device::supported_precisions(DeviceSpec::Wgpu(None))
            .is_ok_and(|p| p.contains(&Precision::F16))
        {
            out.push((device, Precision::F16, 2e-2));
        }
    }
    out
}

/// Where the autodiff reference runs: flex, with autodiff.
fn reference_device() -> Device {
    Device::flex().autodiff()
}

fn read(t: Tensor<1>) -> Vec<f32> {
    t.try_into_vec_as().expect("a read")
}

/// One minibatch's gradient (of the loss times a scale) and diagnostics: the hand-written
/// pass against burn's autodiff, for every activation, with and without the value clipping
/// and advantage normalisation.
#[test]
fn the_hand_written_gradients_are_autodiffs() {
    let (d, a, s, b) = (9, 2, 48, 24);
    let cpu = reference_device();
    for (device, precision, tol) in devices("the_hand_written_gradients_are_autodiffs") {
        let inner = device.clone().inner();
        let reference = batch(s, d, a, &cpu);
        let on_inner = batch(s, d, a, &inner);
        let idx: Vec<i64> = (0..b).map(|i| ((i * 5 + 3) % s) as i64).collect();
        let idx_on =
            |dev: &Device| Tensor::<1, Int>::from_data(TensorData::new(idx.clone(), [b]), dev);
        let scale = |dev: &Device| Tensor::<1>::from_data(TensorData::new(vec![8.0f32], [1]), dev);
        for (activation, clip_vf, normalize) in [
            (ActivationKind::Tanh, None, true),
            (ActivationKind::Tanh, Some(0.1), false),
            (ActivationKind::Relu, Some(0.2), true),
            (ActivationKind::Elu, None, true),
            (ActivationKind::Silu, Some(0.05), true),
        ] {
            let cfg = config(activation, clip_vf, normalize, precision);
            let model = cfg.policy.init(d, a, 3, &device);
            let adam = flat_adam::FlatAdam::new(&cfg, &model, flat_adam::GPU_ALIGN);
            let cpu_model = cfg.policy.init(d, a, 3, &cpu);
            let cpu_adam = flat_adam::FlatAdam::new(&cfg, &cpu_model, flat_adam::GPU_ALIGN);
            let (want_losses, want_sq, want_grad) = device::minibatch(
                &cpu_model,
                &cpu_adam,
                &cfg,
                &reference,
                idx_on(&cpu),
                scale(&cpu),
                &cpu,
            );
            let want_diag = read(Tensor::cat(vec![want_losses, want_sq], 0));
            let want_grad = read(want_grad);
            // The loss as one kernel where it runs (a cubecl device), and its tensor program
            // everywhere.
            let kernel = kernels_run(&on_inner.log_probs);
            assert_eq!(kernel, !tradetune_device::is_cpu(&inner), "{device:?}");
            for kernels in [false, true].into_iter().filter(|&k| !k || kernel) {
                let (losses, grad_sq, grad) = manual::minibatch(
                    &model,
                    &adam,
                    &cfg,
                    &on_inner,
                    idx_on(&inner),
                    scale(&inner),
                    &mut manual::Picks::new(&inner, kernels),
                );
                let what = format!(
                    "{device:?} {precision:?} {activation:?} clip_vf {clip_vf:?} normalise \
                     {normalize} kernel {kernels}"
                );
                let diag = read(Tensor::cat(vec![losses, grad_sq], 0));
                close(&read(grad), &want_grad, tol, &format!("{what}: gradient"));
                close(&diag, &want_diag, tol, &format!("{what}: diagnostics"));
                // The case exercises both branches of each clip.
                assert!(
                    diag[5] > 0.0 && diag[5] < 1.0,
                    "{what}: clipfrac {}",
                    diag[5]
                );
            }
        }
    }
}

/// Whole updates (epochs of minibatches, a short last one, Adam from zero moments, then from
/// the first update's; the loss scale in f16), with and without `target_kl`: the hand-written
/// engine follows the autodiff engine.
#[test]
fn a_hand_written_update_follows_autodiff() {
    let (d, a, s) = (9, 2, 56);
    let cpu = reference_device();
    for (device, precision, tol) in devices("a_hand_written_update_follows_autodiff") {
        for target_kl in [None, Some(1e-4)] {
            let cfg =
                config(ActivationKind::Tanh, Some(0.2), true, precision).with_target_kl(target_kl);
            let mut runs = Vec::new();
            // The hand-written engine on the device under test, autodiff on flex.
            for (autodiff, on) in [(false, &device), (true, &cpu)] {
                let rollout = batch(s, d, a, on);
                let model = cfg.policy.init(d, a, 5, on);
                let mut learner = Learner::new(model, &cfg, on);
                learner.set_host_update(false);
                learner.autodiff_reference = autodiff;
                let mut stats = Vec::new();
                for update in 0..2 {
                    let ride = Tensor::<1>::from_data(TensorData::new(vec![4.0f32], [1]), on);
                    let (st, extra) = learner
                        .update(&rollout, 1e-3, update, ride, &mut |_| Ok(()))
                        .expect("an update");
                    assert_eq!(extra, vec![4.0]);
                    stats.push(st);
                }
                runs.push((
                    learner.model().flat_params().expect("parameters"),
                    stats,
                    learner.adam.time,
                ));
            }
            let (manual, reference) = (&runs[0], &runs[1]);
            let what = format!("{device:?} {precision:?} target_kl {target_kl:?}");
            assert_eq!(manual.2, reference.2, "{what}: Adam steps");
            for (m, r) in manual.1.iter().zip(&reference.1) {
                assert_eq!((m.steps, m.epochs), (r.steps, r.epochs), "{what}");
                close(
                    &[
                        m.policy_loss,
                        m.value_loss,
                        m.entropy,
                        m.approx_kl,
                        m.clipfrac,
                    ],
                    &[
                        r.policy_loss,
                        r.value_loss,
                        r.entropy,
                        r.approx_kl,
                        r.clipfrac,
                    ],
                    tol.max(1e-4),
                    &format!("{what}: diagnostics"),
                );
                close(&[m.grad_norm], &[r.grad_norm], tol.max(1e-4), &what);
            }
            // Adam normalises each step to about lr per parameter, so compare the moves.
            let start = cfg
                .policy
                .init(d, a, 5, &device)
                .flat_params()
                .expect("parameters");
            let moved = |p: &[f32]| p.iter().zip(&start).map(|(p, s)| p - s).collect::<Vec<_>>();
            close(
                &moved(&manual.0),
                &moved(&reference.0),
                tol.max(1e-3),
                &format!("{what}: parameters"),
            );
        }
    }
}

/// Adam's flat buffer with its slots aligned (a GPU's layout) steps every parameter as the
/// packed one does, and its saved state, per parameter, loads into a packed one and back.
#[test]
fn an_aligned_flat_adam_steps_saves_and_loads_as_a_packed_one() {
    use flat_adam::{FlatAdam, GPU_ALIGN};
    let device = Device::flex().autodiff();
    let inner = device.clone().inner();
    let cfg = config(ActivationKind::Tanh, None, true, Precision::F32);
    let start = cfg.policy.init(9, 2, 3, &device);
    let mut runs = Vec::new();
    for align in [1, GPU_ALIGN] {
        let mut model = start.clone();
        let mut adam = FlatAdam::new(&cfg, &model, align);
        for step in 0..2 {
            // The same gradient in each layout: a pattern by parameter and index.
            let grads = adam
                .slots()
                .iter()
                .enumerate()
                .map(|(k, slot)| {
                    let g: Vec<f32> = (0..slot.len)
                        .map(|i| ((i * 7 + k * 3 + step) % 11) as f32 / 5.0 - 1.0)
                        .collect();
                    (
                        slot.id,
                        Tensor::from_data(TensorData::new(g, [slot.len]), &inner),
                    )
                })
                .collect();
            let grad = adam.flat(grads, &mut |n| Tensor::zeros([n], &inner));
            adam.step_model(&mut model, 1e-2, grad, None);
        }
        runs.push((model, adam));
    }
    let params = |m: &ActorCritic| m.flat_params().expect("parameters");
    assert_eq!(
        params(&runs[0].0),
        params(&runs[1].0),
        "parameters after two steps"
    );
    assert_ne!(
        params(&runs[0].0),
        params(&start),
        "the steps moved the parameters"
    );
    let dir = tempfile::tempdir().expect("a scratch directory");
    for (from, to) in [(1, 0), (0, 1)] {
        let path = dir.path().join(format!("adam{from}.bpk"));
        let (model, adam) = &runs[from];
        adam.save(model, adam.moments.clone(), &path)
            .expect("saved");
        let mut loaded = FlatAdam::new(&cfg, model, if to == 0 { 1 } else { GPU_ALIGN });
        loaded.load(model, &path, &device).expect("loaded");
        assert_eq!(loaded.time, 2);
        let (m1, m2) = loaded.moments.expect("moments");
        let (w1, w2) = runs[to].1.moments.clone().expect("moments");
        assert_eq!(read(m1), read(w1), "first moments, {from} → {to}");
        assert_eq!(read(m2), read(w2), "second moments, {from} → {to}");
    }
}

/// The device tally as one kernel against its tensor program, on wgpu: each minibatch's factor
/// (loss scale undone, clip) and gate, the loss scale's growth and back-off, the skips and the
/// update's statistics (or its divergence), over minibatches that clip and that do not, that
/// overflow (a NaN loss, an infinite gradient) and that grow the scale, with and without f16's
/// loss scaling and the clip.
#[test]
fn the_tally_kernel_decides_as_its_tensor_program() {
    let gpu: Vec<Device> = devices("the_tally_kernel_decides_as_its_tensor_program")
        .into_iter()
        .map(|(device, _, _)| device)
        .filter(|device| !tradetune_device::is_cpu(device))
        .take(1)
        .collect();
    let nan = f32::NAN;
    let inf = f32::INFINITY;
    // [loss, policy, value, entropy, approx_kl, clipfrac, Σ‖g‖² of the scaled loss].
    let minibatches: [[f32; 7]; 7] = [
        [0.5, 0.1, 0.8, 1.4, 0.01, 0.2, 4.0e6],
        [0.4, 0.2, 0.6, 1.3, 0.02, 0.1, 1.0e-3],
        [nan, 0.2, 0.6, 1.3, 0.02, 0.1, 1.0],
        [0.3, 0.2, 0.5, 1.2, 0.03, 0.3, inf],
        [0.3, 0.1, 0.5, 1.2, 0.01, 0.0, 2.5e5],
        [0.2, 0.1, 0.4, 1.1, 0.01, 0.1, 9.0],
        [0.1, 0.0, 0.3, 1.0, 0.04, 0.2, 0.04],
    ];
    for device in gpu {
        for (precision, max_grad_norm, overflow) in [
            (Precision::F16, 0.5, true),
            (Precision::F16, 0.0, true),
            (Precision::F32, 0.5, false),
            (Precision::F32, 0.5, true),
            (Precision::F32, 0.0, false),
        ] {
            let mut cfg = config(ActivationKind::Tanh, None, true, precision);
            cfg.max_grad_norm = max_grad_norm;
            cfg.initial_loss_scale = 1024.0;
            cfg.loss_scale_growth_interval = 2;
            let runs: Vec<_> = [true, false]
                .into_iter()
                .map(|kernel| {
                    let mut scaler = LossScaler::new(precision, 1024.0, 2);
                    let ride = Tensor::<1>::zeros([0], &device);
                    let mut tally = DeviceTally::new(&cfg, &mut scaler, &device, 3, 1e-3, ride);
                    assert!(tally.runs_kernel(), "{device:?}: the kernel runs on wgpu");
                    if !kernel {
                        tally = tally.without_kernel();
                    }
                    let mut decided = Vec::new();
                    for d in minibatches
                        .iter()
                        .filter(|d| overflow || d.iter().all(|v| v.is_finite()))
                    {
                        let on = |v: &[f32]| {
                            Tensor::<1>::from_data(TensorData::new(v.to_vec(), [v.len()]), &device)
                        };
                        let diagnostics = Diagnostics::Device {
                            losses: on(&d[..6]),
                            grad_sq: on(&d[6..]),
                        };
                        let Ok(Verdict::Step(Factor::Device { factor, gate })) =
                            tally.judge(diagnostics)
                        else {
                            panic!("the device tally steps every minibatch");
                        };
                        decided.push((factor.map(read), gate.map(read)));
                        tally = tally.record();
                    }
                    let outcome = tally.finish(2, &mut |_| Ok(()));
                    (
                        decided,
                        outcome.map(|(stats, _)| stats).map_err(|e| e.to_string()),
                        scaler.scale(),
                        scaler.clean_steps(),
                    )
                })
                .collect();
            let what = format!("{precision:?} max_grad_norm {max_grad_norm} overflow {overflow}");
            let (kernel, program) = (&runs[0], &runs[1]);
            assert_eq!(kernel.0.len(), program.0.len());
            for (i, (k, p)) in kernel.0.iter().zip(&program.0).enumerate() {
                let what = format!("{what}, minibatch {i}");
                assert_eq!(k.0.is_some(), p.0.is_some(), "{what}: factor");
                if let (Some(k), Some(p)) = (&k.0, &p.0) {
                    close(k, p, 1e-6, &format!("{what}: factor"));
                }
                assert_eq!(k.1, p.1, "{what}: gate");
            }
            assert_eq!(
                (kernel.2, kernel.3),
                (program.2, program.3),
                "{what}: loss scale"
            );
            match (&kernel.1, &program.1) {
                (Ok(k), Ok(p)) => {
                    assert_eq!(
                        (k.steps, k.skipped_steps),
                        (p.steps, p.skipped_steps),
                        "{what}"
                    );
                    close(
                        &[
                            k.policy_loss,
                            k.value_loss,
                            k.entropy,
                            k.approx_kl,
                            k.clipfrac,
                            k.grad_norm,
                        ],
                        &[
                            p.policy_loss,
                            p.value_loss,
                            p.entropy,
                            p.approx_kl,
                            p.clipfrac,
                            p.grad_norm,
                        ],
                        1e-6,
                        &format!("{what}: statistics"),
                    );
                }
                (Err(k), Err(p)) => assert_eq!(k, p, "{what}"),
                (k, p) => panic!("{what}: kernel {k:?}, tensor program {p:?}"),
            }
            if precision == Precision::F16 {
                // The case exercises skips, back-off and growth.
                let skipped = kernel.1.as_ref().map(|s| s.skipped_steps);
                assert_eq!(skipped, Ok(2), "{what}");
            }
        }
    }
}
