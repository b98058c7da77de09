//! Threads the desktop program starts for work beside the frames (importances of a large
//! study, freeing rows it let go of) give way to the UI thread.
//!
//! On a 2-core machine two such threads and the UI thread share the cores: at equal priority
//! the frame after a 10,000-trial study opened got about two thirds of a core and took 15–22 ms
//! instead of 6–10 ms (`cargo bench -p tradetune --bench frame`, the frame a read lands).

/// The niceness a background thread takes (0 is the default; 19 the lowest priority).
pub const NICE: i32 = 10;

/// Lowers the calling thread's scheduling priority to [`NICE`] unless it is already that low
/// (Linux, where niceness is per thread; elsewhere nothing). Returns whether the thread now
/// runs at [`NICE`] or lower.
pub fn give_way() -> bool {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: getpriority and setpriority read and change only the scheduling priority of
        // the thread named by its id: this thread.
        unsafe {
            let me = libc::gettid() as libc::id_t;
            // Already at least as low (the program was started niced): left as it is, since
            // raising it back would need privileges.
            libc::getpriority(libc::PRIO_PROCESS, me) >= NICE
                || libc::setpriority(libc::PRIO_PROCESS, me, NICE) == 0
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    #[test]
    fn a_thread_that_gives_way_runs_at_the_background_niceness_and_others_do_not() {
        // SAFETY (both calls): getpriority only reads the niceness of the thread named by id.
        let nice =
            || unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) };
        let before = nice();
        let (inside, beside) = std::thread::spawn(move || {
            assert!(super::give_way(), "setpriority refused");
            let inside = nice();
            let beside = std::thread::spawn(nice).join().expect("the second thread");
            (inside, beside)
        })
        .join()
        .expect("the background thread");
        assert_eq!(inside, super::NICE.max(before));
        assert_eq!(nice(), before, "the calling thread keeps its priority");
        // A thread started from a background thread inherits its niceness (Linux semantics);
        // the UI thread's own threads are started from it, not from these.
        assert_eq!(beside, inside);
    }
}
