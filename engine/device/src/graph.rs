//! A closure's kernel launches captured once and replayed (issue 33): burn 0.22's graph capture,
//! with its launches counted and its failures returned.
//!
//! On a GPU a small step's time is what each launch costs the host (burn's fusion, cubecl's launch
//! preparation, wgpu's bind groups and encoding), not arithmetic. burn can record the launches of
//! a closure once and replay them (cubecl 0.11's wgpu server keeps each recorded launch's pipeline,
//! bind group and workgroup count, and a replay only encodes them again). This is burn's
//! `burn::tensor::capture` sequence (prepare the allocator, three warm-up runs, the recorded run)
//! driven through the backend trait directly, for two things burn's helper lacks:
//!
//! - **counting**: the launches of the recorded run are counted once ([`Graph::launches`]), and
//!   each replay adds them to the process's kernel counters as replayed launches
//!   ([`crate::kernels::KernelCounts::replayed`]), so per-step launch counts stay true (the launch
//!   observer does not see a replay's launches);
//! - **errors**: a failed replay is an error to report ([`GraphError`]), not a panic.
//!
//! A replay reads and writes the buffers of its capture: the closure's inputs are refreshed *in
//! place* between replays (`Tensor::inplace` on a tensor nothing else holds), and its outputs are
//! overwritten by the next replay (see [`Graph::replay`]'s safety contract). Where the backend has
//! no graphs (the CPU's), a replay runs the closure again: slower, never wrong.

use burn::backend::{Backend, BackendGraph, Dispatch};
use burn::tensor::Device;

use crate::kernels::{self, KernelCounts};

/// Warm-up runs before the recorded one: with fusion the first run builds and autotunes the fused
/// kernels (other buffers than the steady state's); later runs fill the pool the capture reuses.
const WARMUP_RUNS: usize = 3;

/// A failed replay.
#[derive(Debug, thiserror::Error)]
#[error("replaying a captured graph failed: {0}")]
pub struct GraphError(pub String);

/// A captured closure (see the module docs).
pub struct Graph<T, F> {
    device: Device,
    closure: F,
    output: T,
    /// The recording, or `None`: a replay runs the closure again.
    hardware: Option<BackendGraph<Dispatch>>,
    /// Why there is no recording, when there is none.
    fallback: Option<String>,
    /// What the recorded run launched (dispatches and layout copies).
    recorded: KernelCounts,
}

/// Captures `closure` on `device`: three warm-up runs (each synchronised, its output held until
/// then, so a lazy backend runs it), then the recorded run, whose output is [`Graph::output`]
/// until the first replay overwrites it. Where the device has no graphs, or the capture fails,
/// the graph runs the closure on each replay ([`Graph::fallback`] says why).
pub fn capture<T, F>(device: &Device, mut closure: F) -> Graph<T, F>
where
    F: FnMut() -> T,
{
    let dispatch = device.as_dispatch();
    let unrecorded = |closure: F, output: T, why: String| Graph {
        device: device.clone(),
        closure,
        output,
        hardware: None,
        fallback: Some(why),
        recorded: KernelCounts::default(),
    };
    if let Err(e) = Dispatch::graph_prepare(dispatch) {
        let output = closure();
        return unrecorded(closure, output, format!("prepare: {e}"));
    }
    for _ in 0..WARMUP_RUNS {
        let out = closure();
        // A host round-trip like any other: counted with the trainer's (`sync: graph capture`).
        let _ = crate::readback::sync(device, "sync: graph capture");
        drop(out);
    }
    if let Err(e) = Dispatch::graph_start_capture(dispatch) {
        let output = closure();
        return unrecorded(closure, output, format!("start: {e}"));
    }
    kernels::trace_mark(format_args!("capture: the recorded run starts"));
    let before = kernels::counts();
    let output = closure();
    // A lazy backend launches the recorded run here (burn's fusion drains its queue onto the
    // capturing stream before closing it), so the launches are counted after the stop.
    let stopped = Dispatch::graph_stop_capture(dispatch);
    let recorded = kernels::counts().since(&before);
    kernels::trace_mark(format_args!(
        "capture: the recorded run ends ({} launches)",
        recorded.dispatches
    ));
    match stopped {
        Ok(graph) => Graph {
            device: device.clone(),
            closure,
            output,
            hardware: Some(graph),
            fallback: None,
            recorded,
        },
        // The stream is out of capture mode either way; the recorded run's output is valid.
        Err(e) => unrecorded(closure, output, format!("stop: {e}")),
    }
}

impl<T, F> Graph<T, F>
where
    F: FnMut() -> T,
{
    /// Runs the captured computation again: the recorded launches on the buffers of the capture
    /// (refresh the inputs in place first), or the closure where there is no recording. Returns
    /// the output, which on a recording is the capture's, overwritten.
    ///
    /// # Safety
    ///
    /// On a recording the launches run on the raw buffers the closure touched during the capture,
    /// with nothing checking them. Until the replay's work is done (a read of its output, or a
    /// device synchronisation): every tensor the closure read or wrote is alive (held by the
    /// closure or by the graph's output, or outliving the graph); nothing on another thread uses
    /// those tensors; refreshes and reads are issued from the capture's thread, so they are
    /// ordered with the replay on its stream.
    pub unsafe fn replay(&mut self) -> Result<&T, GraphError> {
        match &self.hardware {
            Some(graph) => {
                // SAFETY: this method's own contract, forwarded.
                unsafe { Dispatch::graph_replay(self.device.as_dispatch(), graph) }
                    .map_err(|e| GraphError(e.to_string()))?;
                kernels::count_replayed(&self.recorded);
                kernels::trace_mark(format_args!(
                    "replay ({} launches)",
                    self.recorded.dispatches
                ));
            }
            None => self.output = (self.closure)(),
        }
        Ok(&self.output)
    }

    /// The output: the recorded run's, overwritten by each replay.
    pub fn output(&self) -> &T {
        &self.output
    }

    /// Whether a replay replays recorded launches (false: it runs the closure again).
    pub fn is_hardware(&self) -> bool {
        self.hardware.is_some()
    }

    /// Why there is no recording, when there is none (the backend has no graphs, or the capture
    /// failed).
    pub fn fallback(&self) -> Option<&str> {
        self.fallback.as_deref()
    }

    /// Kernel launches of one replay (those of the recorded run; 0 without a recording). In a
    /// process where other threads launch kernels during the capture, theirs are counted too.
    pub fn launches(&self) -> u64 {
        self.recorded.dispatches
    }
}

#[cfg(test)]
mod tests {
    use burn::tensor::{Device, Tensor, TensorData};

    use super::capture;
    use crate::kernels;

    /// The closure's result on `x`: a product and a tanh, a few launches.
    fn step(x: &Tensor<2>, w: &Tensor<2>) -> Tensor<2> {
        x.clone().matmul(w.clone()).tanh()
    }

    fn inputs(device: &Device) -> (Tensor<2>, Tensor<2>) {
        let v = |len: usize, k: usize| -> Vec<f32> {
            (0..len).map(|i| ((i * k) % 7) as f32 / 7.0 - 0.5).collect()
        };
        (
            Tensor::from_data(TensorData::new(v(12, 3), [3, 4]), device),
            Tensor::from_data(TensorData::new(v(20, 5), [4, 5]), device),
        )
    }

    /// Where the backend has no graphs (the CPU's), the graph says why and each replay runs the
    /// closure again: the right result, no launches counted as replayed.
    #[test]
    fn without_graphs_a_replay_runs_the_closure_again() {
        let device = Device::flex();
        let (x, w) = inputs(&device);
        let mut runs = 0;
        let mut graph = capture(&device, || {
            runs += 1;
            step(&x, &w)
        });
        assert!(!graph.is_hardware());
        assert!(
            graph
                .fallback()
                .is_some_and(|why| why.starts_with("start:"))
        );
        assert_eq!(graph.launches(), 0);
        // SAFETY: no recording: the closure runs again.
        let out = unsafe { graph.replay() }.expect("a replay").clone();
        let want: Vec<f32> = step(&x, &w).try_into_vec_as().unwrap();
        assert_eq!(out.try_into_vec_as::<f32>().unwrap(), want);
        drop(graph);
        // The capture's three warm-ups, its run once the recording was refused, the replay.
        assert_eq!(runs, 5);
    }

    /// On wgpu the recorded run's launches are counted once, and each replay adds them to the
    /// process's launches as replayed ones (the launch observer does not see a replay).
    #[test]
    fn a_replay_counts_its_recorded_launches() {
        let _alone = crate::gpu_test_alone();
        let Some(device) = crate::wgpu_for_test("a replay counts its recorded launches") else {
            return;
        };
        let (x, w) = inputs(&device);
        let mut graph = capture(&device, || step(&x, &w));
        assert!(graph.is_hardware(), "{:?}", graph.fallback());
        let launches = graph.launches();
        assert!(launches >= 1, "the product at least");
        if !kernels::counting_dispatches() {
            return;
        }
        let before = kernels::counts();
        for _ in 0..3 {
            // SAFETY: the inputs are held by the closure's borrows, which outlive the graph; the
            // output by the graph; this thread alone uses them.
            unsafe { graph.replay() }.expect("a replay");
        }
        let out: Vec<f32> = graph.output().clone().try_into_vec_as().unwrap();
        let counted = kernels::counts().since(&before);
        assert_eq!(counted.replayed, 3 * launches);
        assert!(counted.dispatches >= 3 * launches);
        let want: Vec<f32> = step(&x, &w).try_into_vec_as().unwrap();
        let worst = out
            .iter()
            .zip(&want)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(worst <= 1e-6, "replayed output off by {worst}");
    }
}
