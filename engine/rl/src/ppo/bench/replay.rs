//! The replay probe: what a rollout's policy step costs the host launch by launch, against the
//! same kernels replayed as one captured graph.
//!
//! On a GPU a policy step is a few small kernels on `n_envs` rows, so its time is what each
//! launch costs on the host (burn's fusion, cubecl's launch preparation, wgpu's bind groups and
//! encoding), not arithmetic. burn 0.22 can record a closure's launches once and replay them
//! ([`tradetune_device::graph`], burn's capture with its launches counted; on wgpu, cubecl 0.11
//! keeps each recorded launch's pipeline, bind group and workgroup count, and a replay only
//! encodes them again). A rollout can run that way (`TRADETUNE_REPLAY_POLICY`); this probe says,
//! on the device at hand and in every `bench gpu` run, what it saves: the trained model's policy step (both
//! networks' forward passes on `n_envs` observations in the run's compute dtype, the noise
//! added and the action clipped), run both ways on the same input, the results compared.

use std::time::Instant;

use burn::module::Module;
use burn::tensor::{Device, FloatDType, Tensor, TensorData};
use serde::Serialize;

use crate::ppo::error::PpoError;
use crate::ppo::model::ActorCritic;
use tradetune_device::graph::capture;
use tradetune_device::kernels;

/// What the replay probe measured on one configuration's policy step.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct ReplayProbe {
    /// Policy steps timed each way.
    pub steps: usize,
    /// Kernel launches of one step run directly (each one a launch the host prepares).
    pub launches_per_step: f64,
    /// Host wall time of a step run directly, in µs (the steps queued back to back, one
    /// synchronisation after them).
    pub direct_us_per_step: f64,
    /// Host wall time of a step replayed from the captured graph, in µs (likewise).
    pub replay_us_per_step: f64,
    /// Milliseconds the capture took (three warm-up runs of the step and the recorded one).
    pub capture_ms: f64,
    /// Whether the device replays recorded launches (false: the backend has no graphs and a
    /// replay runs the step again, so the two figures measure the same thing).
    pub hardware: bool,
    /// The largest difference between a replay's outputs and a direct step's: rounding at most
    /// (the same operations on the same input, though burn's fusion may cut a step queued among
    /// others into other kernels than a step alone).
    pub max_abs_diff: f64,
}

impl ReplayProbe {
    /// Host µs a replay saves per launch of the step.
    pub fn saved_us_per_launch(&self) -> f64 {
        (self.direct_us_per_step - self.replay_us_per_step) / self.launches_per_step.max(1.0)
    }
}

/// One policy step's outputs: the actions, the clipped actions and the values (f32).
type StepOut = (Tensor<2>, Tensor<2>, Tensor<1>);

/// The outputs as one host vector (a synchronising read).
fn read(out: &StepOut) -> Result<Vec<f32>, PpoError> {
    let mut all: Vec<f32> = Vec::new();
    for t in [
        out.0.clone().flatten::<1>(0, 1),
        out.1.clone().flatten(0, 1),
        out.2.clone(),
    ] {
        let v: Vec<f32> = t
            .try_into_vec_as()
            .map_err(|e| PpoError::read("replay probe", e))?;
        all.extend(v);
    }
    Ok(all)
}

/// The replay probe (`replay_probe` below), its failure (an error, a failed replay among them,
/// or a panic in burn or cubecl during the capture) as a message instead: a benchmark reports it
/// beside the figures it already has instead of losing them.
pub fn try_replay_probe(
    model: &ActorCritic,
    n_envs: usize,
    obs_dim: usize,
    dtype: FloatDType,
    device: &Device,
) -> Result<ReplayProbe, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        replay_probe(model, n_envs, obs_dim, dtype, device)
    }))
    .map_err(|panic| {
        let text = super::panic_text(panic.as_ref()).unwrap_or_else(|| "no message".into());
        format!("panicked: {text}")
    })?
    .map_err(|e| e.to_string())
}

/// Runs `model`'s policy step on `n_envs` observations of `obs_dim` values in `dtype`, directly
/// and replayed from a captured graph, about a quarter of a second each way (the two reads have
/// the same shapes: the same step's outputs).
fn replay_probe(
    model: &ActorCritic,
    n_envs: usize,
    obs_dim: usize,
    dtype: FloatDType,
    device: &Device,
) -> Result<ReplayProbe, PpoError> {
    // A snapshot without autodiff in the compute dtype, as a rollout takes it.
    let model = model.valid().in_dtype(dtype);
    let action_dim = model.log_std().dims()[0];
    let fill = |len: usize, k: usize| -> Vec<f32> {
        (0..len)
            .map(|i| (((i * k) % 101) as f32 - 50.0) / 50.0)
            .collect()
    };
    let obs = Tensor::<2>::from_data(
        TensorData::new(fill(n_envs * obs_dim, 7), [n_envs, obs_dim]),
        device,
    );
    let noise = Tensor::<2>::from_data(
        TensorData::new(fill(n_envs * action_dim, 13), [n_envs, action_dim]),
        device,
    )
    .mul_scalar(0.3);
    let step = move || -> StepOut {
        let x = obs.clone().cast(dtype);
        let actions = model.action_mean(x.clone(), dtype).add(noise.clone());
        let clipped = actions.clone().clamp(-1.0, 1.0);
        let value = model.value(x, dtype);
        (actions, clipped, value)
    };
    let sync = || device.sync().map_err(|e| PpoError::read("replay probe", e));

    // Direct: warm, size the run to about a quarter of a second, then time it. Each step's
    // outputs are held until the synchronisation (a lazy backend skips work nobody holds).
    let direct = step.clone();
    let reference = read(&direct())?;
    let t = Instant::now();
    let warm: Vec<StepOut> = (0..8).map(|_| direct()).collect();
    sync()?;
    drop(warm);
    let per_step = t.elapsed().as_secs_f64() / 8.0;
    let steps = ((0.25 / per_step.max(1e-7)) as usize).clamp(16, 4_000);
    kernels::settle();
    let before = kernels::counts();
    let t = Instant::now();
    let held: Vec<StepOut> = (0..steps).map(|_| direct()).collect();
    sync()?;
    let direct_s = t.elapsed().as_secs_f64();
    let launches = kernels::counts().since(&before).dispatches;
    drop(held);

    let t = Instant::now();
    let mut graph = capture(device, step);
    sync()?;
    let capture_ms = 1e3 * t.elapsed().as_secs_f64();
    let t = Instant::now();
    for _ in 0..steps {
        // SAFETY: everything the captured step reads or writes (the model's weights, the
        // observations, the noise and the outputs) is owned by the graph's closure or by the
        // graph, so it lives as long as the graph; nothing else uses those tensors; the replays
        // and the read below are issued from this thread, on the stream of the capture.
        unsafe { graph.replay() }.map_err(|e| PpoError::read("replay probe", e))?;
    }
    sync()?;
    let replay_s = t.elapsed().as_secs_f64();
    let replayed = read(graph.output())?;
    let max_abs_diff = replayed
        .iter()
        .zip(&reference)
        .map(|(a, b)| f64::from((a - b).abs()))
        .fold(0.0, f64::max);
    Ok(ReplayProbe {
        steps,
        launches_per_step: launches as f64 / steps as f64,
        direct_us_per_step: 1e6 * direct_s / steps as f64,
        replay_us_per_step: 1e6 * replay_s / steps as f64,
        capture_ms,
        hardware: graph.is_hardware(),
        max_abs_diff,
    })
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::rc::Rc;

    use burn::tensor::{Tensor, TensorData};
    use tradetune_device::graph::capture;

    /// What a rollout built on replays would rely on (the probe's doc): a replay reads its
    /// captured input's buffer as it is now, so an input refreshed in place (`slice_assign` on
    /// a tensor nothing else holds, which burn runs in place) is what the next replay computes
    /// on. Held here so that a burn or cubecl upgrade that changes it says so.
    #[test]
    fn a_replay_reads_its_input_as_refreshed_in_place() {
        let Some(device) = tradetune_device::wgpu_for_test("replay of a refreshed input") else {
            return;
        };
        let (n, width) = (4, 8);
        let pattern = |len: usize, k: usize| -> Vec<f32> {
            (0..len)
                .map(|i| ((i + 7 * k) % 11) as f32 / 5.0 - 1.0)
                .collect()
        };
        let w = Tensor::<2>::from_data(
            TensorData::new(pattern(width * width, 9), [width, width]),
            &device,
        )
        .mul_scalar(0.3);
        // The graph's closure holds the input only while it runs: between replays the tensor
        // is held by the cell alone, so it can be written in place.
        let x = Rc::new(RefCell::new(Tensor::<2>::zeros([n, width], &device)));
        let step = {
            let (x, w) = (x.clone(), w.clone());
            move || x.borrow().clone().matmul(w.clone()).tanh()
        };
        let mut graph = capture(&device, step);
        assert!(graph.is_hardware(), "wgpu records the launches");
        for k in 0..3 {
            let fresh =
                Tensor::<2>::from_data(TensorData::new(pattern(n * width, k), [n, width]), &device);
            x.borrow_mut()
                .inplace(|t| t.slice_assign([0..n, 0..width], fresh.clone()));
            // SAFETY: the input and the weight are held by the closure's cell and clone, the
            // output by the graph; this thread alone uses them, on the capture's stream.
            unsafe { graph.replay() }.expect("a replay");
            let got: Vec<f32> = graph.output().clone().try_into_vec_as().unwrap();
            let want: Vec<f32> = fresh.matmul(w.clone()).tanh().try_into_vec_as().unwrap();
            assert_eq!(got, want, "refresh {k}");
            assert!(
                got.iter().any(|v| v.abs() > 0.1),
                "not the zeros captured: {got:?}"
            );
        }
    }
}
