//! The engine's integration tests that measure the whole process, as a test binary of their own
//! (`process_wide`): a counting global allocator (`memory_measured`), the process-wide read
//! counter (`rollout_readbacks`, `eval_device`), the wgpu device's memory pool
//! (`memory_measured_wgpu`) and the process-wide launch counts (`ppo_replay`'s replayed shares). Each test takes [`alone`] first, so no other test of this binary
//! runs beside it, and the others are in the `engine` binary (`main.rs`).

mod common;
mod eval_device;
mod memory_measured;
mod memory_measured_wgpu;
mod ppo_replay;
mod rollout_readbacks;

use std::sync::{Mutex, MutexGuard};

/// Held for the whole of each test of this binary: they run one after another.
fn alone() -> MutexGuard<'static, ()> {
    static ALONE: Mutex<()> = Mutex::new(());
    // A test that failed while holding the lock leaves nothing to protect.
    ALONE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
