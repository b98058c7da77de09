//! Quiet window-system probing in headless commands.
//!
//! Every wgpu instance enables Vulkan's Wayland surface extension where the driver has it. With
//! that extension on, Mesa's implicit device-selection layer (`VK_LAYER_MESA_device_select`)
//! asks the Wayland compositor which GPU it prefers: it connects to the display through
//! libwayland-client. In a shell without a desktop session there is no compositor, and
//! libwayland says so on stderr — "error: XDG_RUNTIME_DIR is invalid or not set in the
//! environment." — once per instance, before the command prints anything of its own. Nothing
//! is wrong: the layer falls back to its default order of the devices, which is the order
//! without a compositor anyway.
//!
//! A CLI command talks to no window system, so its process routes libwayland's own log lines
//! (only those: the library's log handler) to nowhere. The desktop app keeps them.

/// Drops libwayland-client's log lines for the rest of this process, when the library is
/// installed (it is not loaded otherwise; where it is absent, no layer can use it either).
#[cfg(target_os = "linux")]
pub fn quiet_wayland_log() {
    use std::ffi::{CStr, c_char, c_void};

    /// libwayland's `wl_log_func_t`: a format and a `va_list`, which is passed as a pointer on
    /// the platforms Mesa's layer runs on; neither is read.
    extern "C" fn drop_line(_fmt: *const c_char, _args: *mut c_void) {}
    type SetHandler = unsafe extern "C" fn(extern "C" fn(*const c_char, *mut c_void));

    const LIBRARY: &CStr = c"libwayland-client.so.0";
    const SYMBOL: &CStr = c"wl_log_set_handler_client";
    // SAFETY: dlopen and dlsym get NUL-terminated names. The library stays loaded for the
    // process's life (never dlclose'd), so the layer loaded later binds to this same copy (by
    // its soname) and the handler, a function of this binary, outlives every call.
    // `wl_log_set_handler_client` has the signature of `SetHandler` (wayland-client-core.h).
    unsafe {
        let lib = libc::dlopen(LIBRARY.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL);
        if lib.is_null() {
            return;
        }
        let sym = libc::dlsym(lib, SYMBOL.as_ptr());
        if sym.is_null() {
            return;
        }
        let set: SetHandler = std::mem::transmute::<*mut c_void, SetHandler>(sym);
        set(drop_line);
    }
}

/// Nothing to quiet where there is no libwayland.
#[cfg(not(target_os = "linux"))]
pub fn quiet_wayland_log() {}

/// Ends a headless command's process with `code`, once the GPU has finished what it was given.
///
/// A command's values are dropped by the time it returns, but not its GPU work: the device's
/// runner thread (cubecl keeps one per device, and its clients in statics, never dropped) may
/// still be freeing the command's buffers, and the driver still running what was queued. A
/// normal exit runs every library's exit handlers and static destructors — Mesa's, which stop
/// its queue threads, and LLVM's, which lavapipe's shaders were compiled with — beside those
/// threads: CI saw one `study run` on lavapipe abort after its last line with glibc's
/// "corrupted size vs. prev_size in fastbins". So this waits for every opened device's queue
/// ([`finish_gpu_work`](tradetune_engine::device::finish_gpu_work)), flushes standard output
/// and error, and leaves without running exit handlers (`_exit`), as the interrupt handler
/// already does: every file the command wrote was written and closed by then, and the system
/// frees the rest.
pub fn exit(code: u8) -> ! {
    use std::io::Write;
    tradetune_engine::device::finish_gpu_work();
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    #[cfg(unix)]
    // SAFETY: `_exit` ends the process at once; nothing of this process runs after it.
    unsafe {
        libc::_exit(i32::from(code))
    }
    #[cfg(not(unix))]
    std::process::exit(i32::from(code))
}
