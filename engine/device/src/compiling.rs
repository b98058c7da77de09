//! A GPU's compilation while it happens, for a live line while a run waits on it (issue 32:
//! "compile once, and say so").
//!
//! A new configuration's first update on a GPU compiles its kernels and autotunes its matmuls
//! before it trains: tens of seconds on a card's driver (the H100 of 2026-11-27), about a
//! minute on lavapipe, while a progress bar would sit at zero samples. [`CompileActivity`]
//! reads the process's counters ([`crate::kernels::counts`]) each time it is polled and says,
//! about once a second while kernels are being compiled, how many since the compiling began,
//! for how long and, where nothing new has been counted for a second or more, since when; and
//! once more when it has stopped ([`CompileStatus::active`] false, with the totals): what
//! `tradetune train`'s bar, `tradetune study run`'s lines and the desktop app's Run panel show.
//! [`CompileTicker`] polls it on a thread of its own, for a caller whose thread is the one
//! waiting on the device.
//!
//! The counters are the process's: with trials running at once it is their compiling
//! together. A kernel is counted when cubecl logs it, before the driver compiles it, and an
//! autotuned operation when its benchmarks are done: a long driver compilation or benchmark
//! adds nothing to either for a while (on lavapipe, 7 s for one matmul candidate of the tiny
//! bench configuration), so the compiling is over only after [`CompileActivity::QUIET`] without
//! a new count, and the live line says how long nothing new has come. On a device that
//! compiles nothing (the CPU) nothing is ever said.

use std::fmt;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::kernels::{self, KernelCounts};

/// What the process has compiled since its compiling began.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CompileStatus {
    /// Whether it is still compiling; `false` once it has stopped, with its totals.
    pub active: bool,
    /// Kernels compiled since it began.
    pub kernels_compiled: u64,
    /// Operations autotuned (benchmarked to choose a kernel) since it began.
    pub autotune_runs: u64,
    /// Seconds since it began; once stopped, from its first new count to its last.
    pub seconds: f64,
    /// Seconds since its last new count (a driver compiling one large kernel, or a benchmark,
    /// counts nothing new for a while); 0 once stopped.
    #[serde(default)]
    pub idle_s: f64,
}

impl CompileStatus {
    /// Whether stopped totals are worth a line of their own among a run's lines: compiling
    /// that took a second or more (a new configuration's first update; not an evaluation's
    /// one or two kernels). The `--json` events give every one.
    pub fn worth_a_line(&self) -> bool {
        !self.active && self.seconds >= 1.0
    }

    /// The live line in few words, for a progress bar's end: `compiling 18 s: 45 kernels, 12
    /// autotuned` (with `, none new for 3 s` while nothing new is counted).
    pub fn short(&self) -> String {
        format!(
            "compiling {}: {} kernels, {} autotuned{}",
            whole_seconds(self.seconds),
            self.kernels_compiled,
            self.autotune_runs,
            self.idle()
        )
    }

    /// `, none new for 3 s` where the last new count is a second old or more.
    fn idle(&self) -> String {
        if self.active && self.idle_s >= 1.0 {
            format!(", none new for {}", whole_seconds(self.idle_s))
        } else {
            String::new()
        }
    }
}

impl fmt::Display for CompileStatus {
    /// `compiling GPU kernels for 18 s: 45 compiled, 12 operations autotuned` while active (with
    /// `, none new for 3 s` while nothing new is counted), `compiled 94 GPU kernels and
    /// autotuned 22 operations in 43.5 s` once stopped.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kernels = plural(self.kernels_compiled, "GPU kernel");
        let operations = plural(self.autotune_runs, "operation");
        if self.active {
            return write!(
                f,
                "compiling GPU kernels for {}: {} compiled, {operations} autotuned{}",
                whole_seconds(self.seconds),
                self.kernels_compiled,
                self.idle()
            );
        }
        match (self.kernels_compiled, self.autotune_runs) {
            (_, 0) => write!(f, "compiled {kernels}")?,
            (0, _) => write!(f, "autotuned {operations}")?,
            _ => write!(f, "compiled {kernels} and autotuned {operations}")?,
        }
        if self.seconds >= 0.1 {
            write!(f, " in {:.1} s", self.seconds)?;
        }
        Ok(())
    }
}

/// `1 operation`, `12 operations`.
fn plural(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("{n} {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// `18 s`, `0 s`: a live line's seconds, which change every second.
fn whole_seconds(s: f64) -> String {
    format!("{:.0} s", s.max(0.0).floor())
}

/// Whether the process is compiling, from its kernel counters polled over time.
#[derive(Debug, Clone)]
pub struct CompileActivity {
    /// The counts at the last poll.
    last: KernelCounts,
    /// The compiling going on, if any.
    burst: Option<Burst>,
}

#[derive(Debug, Clone, Copy)]
struct Burst {
    /// When its first new count was seen.
    start: Instant,
    /// The counts before it.
    base: KernelCounts,
    /// When its last new count was seen.
    last_change: Instant,
    /// When it was last reported.
    reported: Instant,
}

impl CompileActivity {
    /// Without a new count for this long, the compiling is over.
    pub const QUIET: Duration = Duration::from_secs(10);
    /// How often an ongoing compiling is reported.
    pub const EVERY: Duration = Duration::from_secs(1);

    /// Watching from the process's counts now: what was compiled before is not this one's.
    pub fn new() -> CompileActivity {
        CompileActivity::from_counts(kernels::counts())
    }

    /// Watching from `counts` (a test's own numbers).
    pub fn from_counts(counts: KernelCounts) -> CompileActivity {
        CompileActivity {
            last: counts,
            burst: None,
        }
    }

    /// Reads the process's counters now: see [`Self::observe`].
    pub fn poll(&mut self) -> Option<CompileStatus> {
        self.observe(kernels::counts(), Instant::now())
    }

    /// Takes the counters `counts` read at `now`; returns what to say, if anything: the
    /// compiling's first new count, then at most every [`Self::EVERY`] while it goes on, and
    /// its totals ([`CompileStatus::active`] false) once [`Self::QUIET`] has passed without a
    /// new count.
    pub fn observe(&mut self, counts: KernelCounts, now: Instant) -> Option<CompileStatus> {
        let moved = counts.compiled != self.last.compiled
            || counts.autotune_runs != self.last.autotune_runs;
        let before = std::mem::replace(&mut self.last, counts);
        if moved {
            match &mut self.burst {
                Some(b) => b.last_change = now,
                None => {
                    let b = Burst {
                        start: now,
                        base: before,
                        last_change: now,
                        reported: now,
                    };
                    self.burst = Some(b);
                    return Some(self.status(&b, true, now));
                }
            }
        }
        let b = self.burst?;
        if now.saturating_duration_since(b.last_change) >= Self::QUIET {
            return self.finish();
        }
        if now.saturating_duration_since(b.reported) >= Self::EVERY {
            if let Some(burst) = &mut self.burst {
                burst.reported = now;
            }
            return Some(self.status(&b, true, now));
        }
        None
    }

    /// Ends the compiling going on, if any, and returns its totals (a run that ends while it
    /// compiles still says what it compiled).
    pub fn finish(&mut self) -> Option<CompileStatus> {
        let b = self.burst.take()?;
        Some(self.status(&b, false, b.last_change))
    }

    /// Whether it is compiling (as of the last poll).
    pub fn active(&self) -> bool {
        self.burst.is_some()
    }

    fn status(&self, b: &Burst, active: bool, until: Instant) -> CompileStatus {
        let since = self.last.since(&b.base);
        CompileStatus {
            active,
            kernels_compiled: since.compiled,
            autotune_runs: since.autotune_runs,
            seconds: until.saturating_duration_since(b.start).as_secs_f64(),
            idle_s: until.saturating_duration_since(b.last_change).as_secs_f64(),
        }
    }
}

impl Default for CompileActivity {
    fn default() -> Self {
        CompileActivity::new()
    }
}

/// A thread polling a [`CompileActivity`] four times a second and handing what it says to a
/// callback, for a caller whose own thread waits on the device (a trainer inside its first
/// update). Dropping it (or [`CompileTicker::stop`]) wakes and stops the thread, which first
/// hands over the totals of a compiling still going on, counted up to that moment.
pub struct CompileTicker {
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl CompileTicker {
    /// How often the counters are read.
    pub const POLL: Duration = Duration::from_millis(250);

    /// Starts watching from the process's counts now; `on_status` runs on the ticker's thread.
    /// Where nothing is compiled (no GPU opened in this process, so no compilation counted)
    /// or the system refuses a thread, there is no thread and nothing is said.
    pub fn start(mut on_status: impl FnMut(CompileStatus) + Send + 'static) -> CompileTicker {
        if !kernels::counting_compiles() {
            return CompileTicker {
                stop: None,
                thread: None,
            };
        }
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let mut activity = CompileActivity::new();
        let thread = std::thread::Builder::new()
            .name("compile-ticker".into())
            .spawn(move || {
                loop {
                    // Stopping wakes it at once (the sender dropped); the counts are read
                    // after that, so what was compiled up to the stop is in the totals.
                    let stopping = !matches!(
                        stopped.recv_timeout(Self::POLL),
                        Err(std::sync::mpsc::RecvTimeoutError::Timeout)
                    );
                    if let Some(status) = activity.poll() {
                        on_status(status);
                    }
                    if stopping {
                        if let Some(status) = activity.finish() {
                            on_status(status);
                        }
                        return;
                    }
                }
            })
            .ok();
        CompileTicker {
            stop: Some(stop),
            thread,
        }
    }

    /// Stops the thread, after it has handed over what is left to say.
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for CompileTicker {
    fn drop(&mut self) {
        self.halt();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(compiled: u64, autotune_runs: u64) -> KernelCounts {
        KernelCounts {
            compiled,
            autotune_runs,
            dispatches: 1000 * compiled,
            ..KernelCounts::default()
        }
    }

    #[test]
    fn compiling_is_said_when_it_begins_every_second_while_it_goes_on_and_when_it_stops() {
        let t0 = Instant::now();
        let at = |s: f64| t0 + Duration::from_secs_f64(s);
        // 5 kernels were compiled before: not this compiling's.
        let mut a = CompileActivity::from_counts(counts(5, 1));
        // Launches alone are not compiling.
        let quiet = KernelCounts {
            dispatches: 99_999,
            ..counts(5, 1)
        };
        assert_eq!(a.observe(quiet, at(0.25)), None);
        assert!(!a.active());
        let first = a.observe(counts(8, 1), at(0.5)).expect("it begins");
        assert_eq!(
            first,
            CompileStatus {
                active: true,
                kernels_compiled: 3,
                autotune_runs: 0,
                seconds: 0.0,
                idle_s: 0.0,
            }
        );
        // Within a second of the last report: nothing new to say.
        assert_eq!(a.observe(counts(9, 1), at(1.0)), None);
        let going = a.observe(counts(12, 3), at(1.5)).expect("a second later");
        assert!(going.active);
        assert_eq!((going.kernels_compiled, going.autotune_runs), (7, 2));
        assert!((going.seconds - 1.0).abs() < 1e-9, "{going:?}");
        assert_eq!(
            going.to_string(),
            "compiling GPU kernels for 1 s: 7 compiled, 2 operations autotuned"
        );
        // A long driver compilation counts nothing for a while: still compiling, the line
        // still said every second.
        let waiting = a.observe(counts(12, 3), at(4.5)).expect("still compiling");
        assert!(waiting.active && a.active());
        assert_eq!((waiting.seconds, waiting.idle_s), (4.0, 3.0));
        assert_eq!(
            waiting.to_string(),
            "compiling GPU kernels for 4 s: 7 compiled, 2 operations autotuned, none new for 3 s"
        );
        assert_eq!(
            waiting.short(),
            "compiling 4 s: 7 kernels, 2 autotuned, none new for 3 s"
        );
        assert_eq!(a.observe(counts(12, 3), at(5.0)), None);
        // QUIET (10 s) after its last new count (1.5 s), it is over: its totals, timed from
        // its first new count to its last.
        assert!(a.observe(counts(12, 3), at(11.0)).is_some_and(|s| s.active));
        let done = a.observe(counts(12, 3), at(11.5)).expect("it stopped");
        assert_eq!(
            done,
            CompileStatus {
                active: false,
                kernels_compiled: 7,
                autotune_runs: 2,
                seconds: 1.0,
                idle_s: 0.0,
            }
        );
        assert!(done.worth_a_line());
        assert_eq!(
            done.to_string(),
            "compiled 7 GPU kernels and autotuned 2 operations in 1.0 s"
        );
        assert!(!a.active());
        assert_eq!(a.observe(counts(12, 3), at(20.0)), None);
        // The next compiling (an evaluation's first) counts from where the last one ended.
        let next = a.observe(counts(13, 3), at(30.0)).expect("a new compiling");
        assert_eq!((next.kernels_compiled, next.autotune_runs), (1, 0));
        let ended = a.finish().expect("a run that ends says what it compiled");
        assert!(!ended.active);
        assert_eq!(ended.to_string(), "compiled 1 GPU kernel");
        assert!(
            !ended.worth_a_line(),
            "an evaluation's one kernel is no line of its own"
        );
        assert_eq!(a.finish(), None);
    }

    #[test]
    fn a_device_that_compiles_nothing_says_nothing() {
        let mut a = CompileActivity::from_counts(KernelCounts::default());
        let t0 = Instant::now();
        for i in 0..40 {
            let launched = KernelCounts {
                dispatches: 50 * i,
                ..KernelCounts::default()
            };
            assert_eq!(
                a.observe(launched, t0 + Duration::from_millis(250 * i)),
                None
            );
        }
        assert_eq!(a.finish(), None);
    }

    #[test]
    fn the_status_reads_as_one_line_in_either_state() {
        let s = CompileStatus {
            active: true,
            kernels_compiled: 1,
            autotune_runs: 1,
            seconds: 18.9,
            idle_s: 0.4,
        };
        assert_eq!(
            s.to_string(),
            "compiling GPU kernels for 18 s: 1 compiled, 1 operation autotuned"
        );
        assert_eq!(s.short(), "compiling 18 s: 1 kernels, 1 autotuned");
        assert!(!s.worth_a_line(), "a live status is the live line's");
        let s = CompileStatus {
            active: false,
            kernels_compiled: 94,
            autotune_runs: 0,
            seconds: 43.46,
            idle_s: 0.0,
        };
        assert_eq!(s.to_string(), "compiled 94 GPU kernels in 43.5 s");
        // A compiling split by a long benchmark can be autotuning alone.
        let tuned = CompileStatus {
            kernels_compiled: 0,
            autotune_runs: 1,
            seconds: 6.21,
            ..s
        };
        assert_eq!(tuned.to_string(), "autotuned 1 operation in 6.2 s");
        let json = serde_json::to_value(s).unwrap();
        assert_eq!(json["kernels_compiled"], 94);
        assert_eq!(json["active"], false);
    }
}
