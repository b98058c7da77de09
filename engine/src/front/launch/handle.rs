//! A launched study's controls, there from the moment it is launched: what is asked before
//! its runner exists (while its data loads) is kept and handed to the runner once it does.

use std::sync::{Arc, Mutex};

use crate::study::runner::StopHandle;

/// Stops a launched study, or one of its trials, from any thread (a button, Ctrl-C, closing
/// the window) — also before its data has loaded and its runner is built.
#[derive(Debug, Clone, Default)]
pub struct StudyHandle(Arc<Mutex<Slot>>);

#[derive(Debug, Default)]
struct Slot {
    /// The runner's own handle, once it is built.
    runner: Option<StopHandle>,
    stop: bool,
    interrupt: bool,
    finish: bool,
}

impl StudyHandle {
    fn slot(&self) -> std::sync::MutexGuard<'_, Slot> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Stops the study: running trials end as PRUNED (if they reported values) or FAIL with
    /// "stopped by user"; no new ones start.
    pub fn stop_study(&self) {
        let mut slot = self.slot();
        slot.stop = true;
        if let Some(r) = &slot.runner {
            r.stop_study();
        }
    }

    /// Ctrl-C, SIGTERM or closing the window: no new trial starts and the running ones end
    /// as FAIL "interrupted".
    pub fn interrupt(&self) {
        let mut slot = self.slot();
        slot.interrupt = true;
        if let Some(r) = &slot.runner {
            r.interrupt();
        }
    }

    /// No new trial starts; the running ones go on to their own end.
    pub fn finish_running(&self) {
        let mut slot = self.slot();
        slot.finish = true;
        if let Some(r) = &slot.runner {
            r.finish_running();
        }
    }

    /// Stops trial `number` if it is running; returns whether it was (none runs before the
    /// runner is built).
    pub fn stop_trial(&self, number: u64) -> bool {
        self.slot()
            .runner
            .as_ref()
            .is_some_and(|r| r.stop_trial(number))
    }

    /// Whether the study was stopped or interrupted (before or after its runner was built).
    pub fn stopped(&self) -> bool {
        let slot = self.slot();
        slot.stop || slot.interrupt
    }

    /// The runner is built: hands it what was asked so far, and everything asked from now on.
    pub(super) fn attach(&self, runner: StopHandle) {
        let mut slot = self.slot();
        if slot.interrupt {
            runner.interrupt();
        } else if slot.stop {
            runner.stop_study();
        }
        if slot.finish {
            runner.finish_running();
        }
        slot.runner = Some(runner);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_asked_before_the_runner_exists_reaches_it() {
        let h = StudyHandle::default();
        h.finish_running();
        assert!(!h.stopped());
        assert!(!h.stop_trial(3), "no trial runs before the runner");
        let runner = StopHandle::default();
        h.attach(runner.clone());
        assert!(runner.finishing());
        assert!(!runner.study_stopped());
        // And after: straight through.
        h.interrupt();
        assert!(runner.interrupted() && runner.study_stopped());
        assert!(h.stopped());

        let h = StudyHandle::default();
        h.clone().stop_study();
        let runner = StopHandle::default();
        h.attach(runner.clone());
        assert!(runner.study_stopped() && !runner.interrupted());
    }
}
