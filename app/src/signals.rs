//! Ctrl-C and SIGTERM. During a headless study (`tradetune study run`, `tradetune worker`) the
//! first one interrupts the study — no new trial starts and the running ones end as FAIL
//! "interrupted", telemetry is flushed and the database closed; in the desktop app it closes
//! the window, which does the same to a running study. A second one exits at once (status 130),
//! leaving the heartbeat to expire for the other workers to notice.

use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};
use std::time::Duration;

use tradetune_engine::front::launch::StudyHandle;

static SIGNALS: AtomicUsize = AtomicUsize::new(0);
/// The first signal received (0 before any).
static FIRST: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(signal: libc::c_int) {
    // Only async-signal-safe work here: atomics and `_exit`.
    let _ = FIRST.compare_exchange(0, signal, Ordering::SeqCst, Ordering::SeqCst);
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

/// The first SIGINT or SIGTERM received since the handlers were installed, if any.
pub fn received() -> Option<i32> {
    Some(FIRST.load(Ordering::SeqCst)).filter(|&s| s != 0)
}

/// The ending of a command a first SIGINT or SIGTERM stopped cleanly: an error whose exit
/// status is the shell's convention (128 + the signal: 130 for Ctrl-C, 143 for SIGTERM), so a
/// script's `&&` does not go on after an interrupted run. `None` when no signal came.
pub fn interrupted_ending(what: &str) -> Option<crate::leave::Ending> {
    received().map(|signal| {
        let name = match signal {
            libc::SIGINT => "SIGINT (Ctrl-C)",
            libc::SIGTERM => "SIGTERM",
            _ => "a signal",
        };
        crate::leave::Ending {
            code: u8::try_from(128 + signal).unwrap_or(1),
            message: format!("{what} was interrupted by {name}"),
        }
    })
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
