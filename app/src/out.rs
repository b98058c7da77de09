//! Standard output that a reader going away does not break. `println!` panics when its write
//! fails: `tradetune train … | head -2` then lost the run it was about to save, and `study run
//! … | head` left its trial RUNNING. Every command writes its stdout through `outln!` and
//! `out!` instead (and its stderr through `errln!`, which a closed stderr does not break):
//! the first failed write (a closed pipe, a full disk) stops the output, and counts as a first
//! Ctrl-C would ([`crate::signals::output_closed`]): a run saves what it trained, a study ends
//! its running trials as FAIL "interrupted", and the exit status is
//! [`crate::signals::CLOSED_STATUS`], as a shell gives a command a closed pipe ended. A
//! command with nothing to save (a report, `monitor`) leaves at once with that status, as a
//! Unix tool that SIGPIPE ends does.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

static CLOSED: AtomicBool = AtomicBool::new(false);

/// Writes `args` to stdout unless a write has failed before; a failure closes the output for
/// the rest of the process.
pub fn write(args: std::fmt::Arguments<'_>) {
    if CLOSED.load(Ordering::SeqCst) {
        return;
    }
    let written = {
        let mut out = std::io::stdout().lock();
        out.write_fmt(args).and_then(|()| out.flush())
    };
    if let Err(e) = written {
        CLOSED.store(true, Ordering::SeqCst);
        crate::signals::output_closed(&e);
    }
}

/// Whether a write to stdout has failed: nothing more is written there.
pub fn closed() -> bool {
    CLOSED.load(Ordering::SeqCst)
}

/// `println!` through [`write`]: a closed stdout does not panic.
macro_rules! outln {
    () => {
        $crate::out::write(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::out::write(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` through [`write`].
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::out::write(format_args!($($arg)*))
    };
}

/// `eprintln!` that does not panic where stderr is closed too (`2>&1 | head`): what it says is
/// lost, and the line that says it (a signal's handler, a run saving itself) goes on.
macro_rules! errln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// `eprint!` as [`errln!`].
macro_rules! err {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stderr(), $($arg)*);
    }};
}

/// An error and its causes on one line, each cause after a colon as anyhow's `{:#}` writes
/// them, less a cause whose text the line already holds: an engine error that quotes its
/// source in its own message (`update 50: evaluation on the validation split: …`) was said
/// twice by `{:#}`.
pub fn error_text(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        let said = cause.to_string();
        if text.contains(&said) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&said);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cause_the_message_already_quotes_is_said_once() {
        let inner = anyhow::anyhow!("314 bars leave 0 steps");
        let quoted = inner.context("update 50: 314 bars leave 0 steps");
        assert_eq!(error_text(&quoted), "update 50: 314 bars leave 0 steps");
        let added = anyhow::anyhow!("3 partitions: odd").context("--partitions");
        assert_eq!(error_text(&added), "--partitions: 3 partitions: odd");
    }
}
