//! Which updates time their phases, and the split the others are given (issue 32: "the phase
//! split of identical configurations agrees").
//!
//! Timing a phase needs a device synchronisation after it, so one update in `every` is timed
//! and the others' wall time is split in the proportions it measured. The first update of a
//! run is timed (a resumed run's too, whose update numbers go on from its checkpoint's), and on
//! a GPU the first update compiles: its phases hold the compilation of their own
//! kernels, the update's most of all, so its proportions are not the steady ones. Spread over
//! the updates after it, they made a trial's first run in a process report an update phase
//! 3.5× and an env phase 15× off the same configuration's next trial (lavapipe, 2026-11-29,
//! host env, 8 envs × 256 steps: env 0.009 s against 0.14 s an update). So a timed update that
//! compiled has the next one timed too, until one compiles nothing, [`MAX_RETIMES`] in a row at
//! most: the compile counters are the process's, and another trial compiling on another card
//! must not have this one synchronise every step of every update.

use crate::ppo::events::PhaseTimes;

/// Updates timed again in a row, at most, because the timed one before compiled.
pub(super) const MAX_RETIMES: usize = 3;

/// The phase sampling of one trainer.
#[derive(Debug, Clone)]
pub(super) struct PhaseSampling {
    every: usize,
    /// Updates timed again in a row so far, because the timed one before compiled: above 0,
    /// the next update is timed too.
    retimes: usize,
    /// Whether an update of this run was timed: until one is, the next is, whatever its
    /// number (a resumed run's first update is numbered from its checkpoint's, and its
    /// compiling was otherwise spread, untimed, over the phases of the updates up to the next
    /// multiple of `every`).
    timed_yet: bool,
    /// The split of the last timed update.
    last: Option<PhaseTimes>,
}

impl PhaseSampling {
    pub(super) fn new(every: usize) -> Self {
        PhaseSampling {
            every: every.max(1),
            retimes: 0,
            timed_yet: false,
            last: None,
        }
    }

    /// One update in `every` from now on (a benchmark sets it around the updates it measures,
    /// and nothing is timed again behind its back).
    pub(super) fn set_every(&mut self, every: usize) {
        self.every = every.max(1);
        self.retimes = 0;
    }

    /// Whether the update numbered `update` (from 0, over the whole run, those before a resume
    /// included) is timed: the first of this run's, one in `every` and those retimed.
    pub(super) fn timed(&self, update: usize) -> bool {
        !self.timed_yet || self.retiming() || update.is_multiple_of(self.every)
    }

    /// Whether the next update is timed because the last timed one compiled.
    pub(super) fn retiming(&self) -> bool {
        self.retimes > 0
    }

    /// An update's rollout and update ran in `wall` seconds: a timed one's measured `phases`
    /// become the split; an untimed one's are the split scaled to its `wall` (as measured,
    /// none, before any timed update).
    pub(super) fn split(&mut self, timed: bool, phases: PhaseTimes, wall: f64) -> PhaseTimes {
        if timed {
            self.last = Some(phases);
            phases
        } else {
            self.last.map_or(phases, |split| split.scaled_to(wall))
        }
    }

    /// Whether the update that just ended `compiled` (its rollout and update, not its
    /// evaluation): a timed one that did has the next update timed too, [`MAX_RETIMES`] in a
    /// row at most.
    pub(super) fn compiled(&mut self, timed: bool, compiled: bool) {
        if !timed {
            return;
        }
        self.timed_yet = true;
        self.retimes = if compiled && self.retimes < MAX_RETIMES {
            self.retimes + 1
        } else {
            0
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(env_step: f64, update: f64) -> PhaseTimes {
        PhaseTimes {
            env_step,
            update,
            ..PhaseTimes::default()
        }
    }

    #[test]
    fn a_timed_update_that_compiled_has_the_next_one_timed_and_does_not_give_the_split() {
        let mut s = PhaseSampling::new(8);
        assert!(s.timed(0) && s.timed(8));
        // The first update compiled: its update phase swollen by the compilation.
        s.split(true, split(0.1, 9.9), 10.0);
        s.compiled(true, true);
        assert!(s.retiming() && s.timed(1) && s.timed(2));
        // The next, timed, compiled nothing: its split is the steady one, and spreads.
        s.split(true, split(0.5, 0.5), 1.0);
        s.compiled(true, false);
        assert!(!s.retiming() && !s.timed(2) && s.timed(8));
        let spread = s.split(false, PhaseTimes::default(), 2.0);
        assert_eq!((spread.env_step, spread.update), (1.0, 1.0));
        // An untimed update that compiles (a late fusion) does not change which update is
        // timed.
        s.compiled(false, true);
        assert!(!s.retiming());
        // Updates that keep compiling (another trial's kernels counted, on another card) are
        // timed again a few times in a row, not for ever.
        let mut s = PhaseSampling::new(8);
        let mut timed = 0;
        for update in 0..8 {
            let t = s.timed(update);
            timed += usize::from(t);
            s.compiled(t, true);
        }
        assert_eq!(timed, 1 + MAX_RETIMES);
    }

    /// A run resumed at update 5 of a sampling of one in 8: its first update (the one that
    /// compiles, on a GPU) is timed, not left to update 8.
    #[test]
    fn a_resumed_run_times_its_first_update() {
        let mut s = PhaseSampling::new(8);
        assert!(s.timed(5));
        s.split(true, split(0.5, 0.5), 1.0);
        s.compiled(true, false);
        assert!(!s.timed(6) && !s.timed(7) && s.timed(8));
    }

    #[test]
    fn a_benchmark_setting_the_sampling_is_not_timed_again_behind_its_back() {
        let mut s = PhaseSampling::new(1);
        s.split(true, split(1.0, 1.0), 2.0);
        s.compiled(true, true);
        s.set_every(usize::MAX);
        assert!(!s.retiming() && !s.timed(1) && s.timed(0));
        // Before any timed update, an untimed one keeps what it measured.
        let mut fresh = PhaseSampling::new(usize::MAX);
        let kept = fresh.split(false, split(0.0, 3.0), 3.0);
        assert_eq!(kept.update, 3.0);
    }
}
