//! Device→host reads of the training path, counted by what they read.
//!
//! A read back from a GPU waits for every queued kernel and crosses the bus; in a rollout it is
//! the latency the users' GPUs idled on. The trainer, the environments and the evaluation read
//! through [`read_f32`], so a test can say what a rollout reads back (issue 13: nothing per
//! step beyond finished-episode statistics when the environment is on the device). The count
//! is process-wide; a lock per read costs nothing next to the read itself. Explicit device
//! synchronisations (the trainer's phase timing) are counted the same way, through [`sync`].

use std::collections::BTreeMap;
use std::sync::Mutex;

use burn::tensor::Tensor;

static COUNTS: Mutex<BTreeMap<&'static str, u64>> = Mutex::new(BTreeMap::new());

/// Reads `t` back as f32 values (whatever its float dtype), counting one read of `what`.
pub fn read_f32<const D: usize>(t: Tensor<D>, what: &'static str) -> Result<Vec<f32>, String> {
    if let Ok(mut c) = COUNTS.lock() {
        *c.entry(what).or_default() += 1;
    }
    t.try_into_vec_as::<f32>().map_err(|e| format!("{e:?}"))
}

/// Waits for every kernel queued on `device`, counting one synchronisation of `what` (kept
/// apart from the reads: a key starting with `sync:`).
pub fn sync(device: &burn::tensor::Device, what: &'static str) -> Result<(), String> {
    if let Ok(mut c) = COUNTS.lock() {
        *c.entry(what).or_default() += 1;
    }
    device.sync().map_err(|e| format!("{e:?}"))
}

/// Reads (and synchronisations) counted so far, by what they read.
pub fn counts() -> BTreeMap<&'static str, u64> {
    COUNTS.lock().map(|c| c.clone()).unwrap_or_default()
}

/// Starts the counts again from zero.
pub fn reset() {
    if let Ok(mut c) = COUNTS.lock() {
        c.clear();
    }
}
