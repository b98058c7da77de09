//! Ctrl-C and SIGTERM. During a headless study (`tradetune study run`, `tradetune worker`) the
//! first one interrupts the study — no new trial starts and the running ones end as FAIL
//! "interrupted", telemetry is flushed and the database closed; in the desktop app it closes
//! the window, which does the same to a running study. A second one exits at once (status 130),
//! leaving the heartbeat to expire for the other workers to notice — unless it is the first
//! one delivered again: sent by the same process (`kill`) within [`REPEAT`] of it. `timeout -s
//! INT` signals the command and then its whole process group, so the command gets two from
//! one request, and exiting on the second lost the run the first was saving. A Ctrl-C typed
//! at the terminal comes from the kernel, never from a process, so a second one still exits at
//! once however soon. A closed standard output counts as a first signal too
//! ([`output_closed`], SIGPIPE).

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tradetune_engine::front::launch::StudyHandle;

static SIGNALS: AtomicUsize = AtomicUsize::new(0);
/// The first signal received (0 before any).
static FIRST: AtomicI32 = AtomicI32::new(0);
/// When the first came, in nanoseconds of `CLOCK_MONOTONIC` (0 until it is stored).
static FIRST_AT: AtomicU64 = AtomicU64::new(0);
/// The process that sent the first, where a process did (`kill`); 0 for one from the kernel
/// (a terminal's Ctrl-C) or none (a closed output).
static FIRST_FROM: AtomicI32 = AtomicI32::new(0);
/// Whether a command installed its handlers ([`on_first_signal`]): it has a run to stop.
static HANDLED: AtomicBool = AtomicBool::new(false);

/// The exit status of a command its closed output ended: 128 + SIGPIPE (13), as a shell gives
/// one the signal ended.
pub const CLOSED_STATUS: u8 = 141;

/// A signal sent again by the process that sent the first, this soon after it, is the same
/// request delivered twice, not a second one.
pub const REPEAT: Duration = Duration::from_secs(1);

/// `CLOCK_MONOTONIC` in nanoseconds (`clock_gettime` is async-signal-safe).
fn monotonic_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec for the call to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    u64::try_from(t.tv_sec).unwrap_or(0) * 1_000_000_000 + u64::try_from(t.tv_nsec).unwrap_or(0)
}

/// Takes `signal` (sent by process `from`, 0 for none) as the first one if none came before;
/// returns whether it was.
fn first(signal: i32, from: i32) -> bool {
    if FIRST
        .compare_exchange(0, signal, Ordering::SeqCst, Ordering::SeqCst)
        .is_err()
    {
        return false;
    }
    FIRST_FROM.store(from, Ordering::SeqCst);
    FIRST_AT.store(monotonic_ns(), Ordering::SeqCst);
    SIGNALS.fetch_add(1, Ordering::SeqCst);
    true
}

/// Whether a signal from process `from` (0: the kernel's, a terminal's Ctrl-C) at `now` is
/// the first one delivered again: the same sending process within [`REPEAT`] of the first
/// (`first_at`, 0 while the first is still being taken on another thread, which is "now").
fn is_repeat(first_from: i32, first_at: u64, from: i32, now: u64) -> bool {
    if first_at == 0 {
        return true;
    }
    from != 0 && from == first_from && u128::from(now.saturating_sub(first_at)) < REPEAT.as_nanos()
}

/// The process that sent a signal (`kill`, `sigqueue`), or 0 where the kernel did (a
/// terminal's Ctrl-C, a timer).
fn sender(info: *const libc::siginfo_t) -> i32 {
    if info.is_null() {
        return 0;
    }
    // SAFETY: the kernel hands the handler a valid siginfo_t; `si_pid` is meaningful for the
    // codes checked.
    unsafe {
        let code = (*info).si_code;
        if code == libc::SI_USER || code == libc::SI_QUEUE {
            (*info).si_pid()
        } else {
            0
        }
    }
}

extern "C" fn on_signal(signal: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // Only async-signal-safe work here: atomics, `clock_gettime`, `write` and `_exit`.
    let from = sender(info);
    if first(signal, from) {
        return;
    }
    let (first_from, first_at) = (
        FIRST_FROM.load(Ordering::SeqCst),
        FIRST_AT.load(Ordering::SeqCst),
    );
    if is_repeat(first_from, first_at, from, monotonic_ns()) {
        return;
    }
    const SAID: &[u8] = b"second signal: exiting at once; what was running is not saved\n";
    // SAFETY: `write` and `_exit` are async-signal-safe; `SAID` is a valid buffer of its length.
    unsafe {
        libc::write(2, SAID.as_ptr().cast(), SAID.len());
        libc::_exit(130)
    };
}

/// The standard output could not be written (`e`): the reader went away (a closed pipe) or
/// the disk is full. Counts as a first signal (SIGPIPE), so the handlers installed stop what
/// runs as a Ctrl-C would, instead of going on unheard; said on stderr unless a signal came
/// first or the pipe was simply closed by a reader that had read enough.
pub fn output_closed(e: &std::io::Error) {
    if !first(libc::SIGPIPE, 0) {
        return;
    }
    if e.kind() != std::io::ErrorKind::BrokenPipe {
        errln!("error: standard output: {e}; nothing more is written there");
    }
    if !HANDLED.load(Ordering::SeqCst) {
        // Nothing to stop cleanly: leave as SIGPIPE's default would end the process.
        crate::leave::leave(CLOSED_STATUS);
    }
}

/// What a first signal is called in the lines that say what it does.
pub fn cause() -> &'static str {
    match received() {
        Some(libc::SIGPIPE) => "standard output closed",
        _ => "interrupted",
    }
}

/// Installs the handlers and a thread that interrupts `stop` at the first signal, saying so on
/// stderr. The thread ends with the process.
pub fn interrupt_on_signal(stop: StudyHandle) {
    on_first_signal(move || {
        errln!(
            "{}: stopping; running trials end as FAIL (interrupted). \
             Press Ctrl-C again to exit at once.",
            cause()
        );
        stop.interrupt();
    });
}

/// Installs the handlers and a thread that runs `then` at the first SIGINT or SIGTERM.
pub fn on_first_signal(then: impl FnOnce() + Send + 'static) {
    // SAFETY: the handler does only async-signal-safe work (atomics, `clock_gettime`, `write`,
    // `_exit`); `sigaction` is given a zeroed action with that handler for two standard
    // signals, SA_SIGINFO for the sender, SA_RESTART as `signal` gives.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_signal
            as extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void)
            as libc::sighandler_t;
        action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGINT, &action, std::ptr::null_mut());
        libc::sigaction(libc::SIGTERM, &action, std::ptr::null_mut());
    }
    HANDLED.store(true, Ordering::SeqCst);
    let spawned = std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            while SIGNALS.load(Ordering::SeqCst) == 0 {
                std::thread::sleep(Duration::from_millis(50));
            }
            then();
        });
    if let Err(e) = spawned {
        errln!(
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
            libc::SIGPIPE => "a closed standard output (SIGPIPE)",
            _ => "a signal",
        };
        crate::leave::Ending {
            code: u8::try_from(128 + signal).unwrap_or(1),
            message: format!("{what} was interrupted by {name}"),
        }
    })
}

/// `host#pid`: this machine and this process, the prefix of the worker labels stored with
/// each trial (`box#4711/worker-0`), so that two processes on one database stay apart.
pub fn process_label() -> String {
    format!("{}#{}", host_name(), std::process::id())
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

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: u64 = 1_000_000_000;

    #[test]
    fn only_the_same_sender_within_a_second_is_the_first_signal_again() {
        // `timeout -s INT`: its process signals the command, then the command's group.
        assert!(is_repeat(4711, 10 * SECOND, 4711, 10 * SECOND + 1_000));
        // The same sender a second later: a second request.
        assert!(!is_repeat(4711, 10 * SECOND, 4711, 11 * SECOND + 1));
        // Another sender, or a terminal's Ctrl-C (from the kernel): a second request, however
        // soon after the first.
        assert!(!is_repeat(4711, 10 * SECOND, 815, 10 * SECOND + 1_000));
        assert!(!is_repeat(0, 10 * SECOND, 0, 10 * SECOND + 1_000));
        assert!(!is_repeat(4711, 10 * SECOND, 0, 10 * SECOND + 1_000));
        // The first still being taken on another thread: its time not stored yet.
        assert!(is_repeat(0, 0, 0, 10 * SECOND));
    }
}
