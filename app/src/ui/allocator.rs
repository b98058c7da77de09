//! The allocator settings of the desktop program.
//!
//! A frame's tessellated triangles live in a few large buffers that are allocated and freed
//! every frame (the parallel coordinates of 10,000 trials × 8 parameters: about 9 MB). glibc
//! serves a block above its mmap threshold from fresh pages and gives freed heap above its trim
//! threshold back to the system, so each frame paid for thousands of page faults on zeroed
//! pages: the frame benchmark's parallel coordinates took 25 ms a frame; with the mmap
//! threshold fixed at 32 MiB and the trim threshold at 128 MiB, 7.4 ms (release build, the
//! 2-core EPYC VM, 2026-11-26; `cargo bench -p tradetune --bench frame`). The cost is up to
//! 128 MiB of freed memory kept for reuse. Only the desktop program sets them: the CLI and
//! the workers keep glibc's defaults.

/// Blocks at least this large are mapped on their own (glibc's dynamic threshold stops
/// growing at the same 32 MiB on 64-bit systems).
pub const MMAP_THRESHOLD: i32 = 32 << 20;
/// Freed memory at the top of the heap beyond this is returned to the system.
pub const TRIM_THRESHOLD: i32 = 128 << 20;

/// Sets the thresholds above (glibc only; elsewhere the system allocator is left as it is).
/// Returns whether they were set.
pub fn tune() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallopt only changes the allocator's parameters; it is called before the
        // window's threads start and takes effect for later allocations.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
                && libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}
