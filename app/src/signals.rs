//! Ctrl-C and SIGTERM. During a headless study (`tradetune study run`, `tradetune worker`) the
//! first one interrupts the study — no new trial starts and the running ones end as FAIL
//! "interrupted", telemetry is flushed and the database closed; in the desktop app it closes
//! the window, which does the same to a running study. A second one exits at once (status 130),
//! leaving the heartbeat to expire for the other workers to notice.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tradetune_engine::front::launch::StudyHandle;

static SIGNALS: AtomicUsize = AtomicUsize::new(0);

extern "C" fn on_signal(_: libc::c_int) {
    // Only async-signal-safe work here: an atomic and `_exit`.
    if SIGNALS.fetch_add(1, Ordering::SeqCst) >= 1 {
        // SAFETY: `_exit` is async-signal-safe and takes no pointers.
        unsafe { libc::_exit(130) };
    }
}

/// Installs the handlers and a thread that interrupts `stop` at the first signal, saying so on
/// stderr. The thread ends with the process.
pub fn interrupt_on_signal(stop: StudyHandle) {
    on_first_signal(move || {
        eprintln!(
            "interrupted: stopping; running trials end as FAIL (interrupted). \
             Press Ctrl-C again to exit at once."
        );
        stop.interrupt();
    });
}

/// Installs the handlers and a thread that runs `then` at the first SIGINT or SIGTERM.
pub fn on_first_signal(then: impl FnOnce() + Send + 'static) {
    let handler = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: the handler only touches an atomic and calls `_exit`; `signal` is given a valid
    // function pointer for two standard signals.
    unsafe {
        libc::signal(libc::SIGINT, handler);
        libc::signal(libc::SIGTERM, handler);
    }
    let spawned = std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            while SIGNALS.load(Ordering::SeqCst) == 0 {
                std::thread::sleep(Duration::from_millis(50));
            }
            then();
        });
    if let Err(e) = spawned {
        eprintln!(
            "warning: no Ctrl-C handling ({e}); a killed run leaves its trials to the heartbeat"
        );
    }
}

/// This machine's name, for the worker labels stored with each trial.
pub fn host_name() -> String {
    ["/proc/sys/kernel/hostname", "/etc/hostname"]
        .iter()
        .find_map(|p| std::fs::read_to_string(p).ok())
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".to_owned())
}
