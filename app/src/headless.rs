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
