//! How the process ends, from a headless command or from the desktop program.
//!
//! A command's values are dropped by the time it returns, but the GPU stack's threads go on:
//! cubecl keeps two runner threads per device (their clients in statics, never dropped), tasks
//! queued to them wait in their buffer until something flushes it, a poll thread waits on the
//! driver, and Mesa's lavapipe has threads of its own. A normal exit runs every library's exit
//! handlers and static destructors — Mesa's, which stop its queue threads, and LLVM's, which
//! lavapipe compiles shaders with — beside those threads: CI saw one `study run` on lavapipe
//! abort after its last line with glibc's "corrupted size vs. prev_size in fastbins". So the
//! process first waits, for a bounded time, until every opened device has run what was queued
//! ([`finish_gpu_work`]), then flushes its output and leaves without exit handlers
//! ([`leave`]), as the interrupt handler already does. Nothing is lost: every file was written
//! and closed by then (cubecl's autotune store and TradeTune's GPU cache store write through
//! on each insert), and the system frees the rest.

use std::time::Duration;

/// The longest the process waits for a device's queued work before it leaves without it.
pub const GPU_WAIT: Duration = Duration::from_secs(60);

/// Waits until every wgpu device this process opened has run what was queued to it (flushing
/// the runners' buffers: a dropped tensor's free, a fused operation, a compile), at most
/// [`GPU_WAIT`]; a device that does not finish by then (hung, or lost) is said on stderr and
/// left behind. Returns whether everything finished.
pub fn finish_gpu_work() -> bool {
    let (done, finished) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("finish-gpu-work".into())
        .spawn(move || {
            tradetune_engine::device::finish_gpu_work();
            let _ = done.send(());
        });
    if spawned.is_err() {
        // No thread to bound the wait with: wait here.
        tradetune_engine::device::finish_gpu_work();
        return true;
    }
    let ok = finished.recv_timeout(GPU_WAIT).is_ok();
    if !ok {
        errln!(
            "warning: the GPU did not finish its queued work within {} s; leaving without it",
            GPU_WAIT.as_secs()
        );
    }
    ok
}

/// Temporary folders a command made, removed by [`leave`] (whose `_exit` runs no destructor)
/// where the command did not get to drop them: one a closed output ended (`bench storage |
/// head`).
static TEMPORARY: std::sync::Mutex<Vec<std::path::PathBuf>> = std::sync::Mutex::new(Vec::new());

/// Has [`leave`] remove `dir` (a temporary folder) if it is still there.
pub fn remove_on_leave(dir: &std::path::Path) {
    TEMPORARY
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(dir.to_owned());
}

/// Ends the process with `code` once its output is written, without running exit handlers
/// (see the module's text); call [`finish_gpu_work`] first. Removes the temporary folders
/// registered with [`remove_on_leave`].
pub fn leave(code: u8) -> ! {
    use std::io::Write;
    for dir in TEMPORARY.lock().unwrap_or_else(|p| p.into_inner()).iter() {
        let _ = std::fs::remove_dir_all(dir);
    }
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    #[cfg(unix)]
    // SAFETY: fflush(NULL) flushes every C stdio stream (a library's buffered output); `_exit`
    // then ends the process at once, and nothing of it runs after.
    unsafe {
        libc::fflush(std::ptr::null_mut());
        libc::_exit(i32::from(code))
    }
    #[cfg(not(unix))]
    std::process::exit(i32::from(code))
}

/// An ending that is no success though nothing broke (a run stopped by a signal): said as an
/// error, with its own exit status.
#[derive(Debug)]
pub struct Ending {
    pub code: u8,
    pub message: String,
}

impl std::fmt::Display for Ending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Ending {}

/// The exit status of a command that ended with `error`: an [`Ending`]'s own, else 1.
pub fn exit_code(error: &anyhow::Error) -> u8 {
    error.downcast_ref::<Ending>().map_or(1, |e| e.code)
}
