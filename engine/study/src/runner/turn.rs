//! A GPU's turn (`gpu_sharing = "serial"`): the workers bound to one card run one trial on it
//! at a time, in the order they asked for it.
//!
//! A plain mutex was not enough: std's is not fair, so the worker that held the card dropped
//! its guard and took it straight back before a sleeping worker woke, ran every trial of the
//! study, and the others said "waiting" throughout. A ticket queue hands the card to the
//! worker that has waited longest. Its own lock is held only to count tickets, never while a
//! trial runs, so a worker that panics with the card still hands it on (its guard's drop runs
//! while it unwinds) and poisoning tells nothing about who holds the card: it is ignored.

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

/// One card's queue of workers.
#[derive(Debug, Default)]
pub(super) struct Turn {
    queue: Mutex<Queue>,
    served: Condvar,
}

#[derive(Debug, Default)]
struct Queue {
    /// The ticket the next worker to ask gets.
    next_ticket: u64,
    /// The ticket whose worker has the card (`next_ticket` when nobody has it).
    now_serving: u64,
}

/// The card, held until dropped; dropping it hands the card to the next ticket.
#[derive(Debug)]
pub(super) struct TurnGuard<'a> {
    turn: &'a Turn,
}

impl Turn {
    /// Waits for the card. `waiting` runs once, before the wait, when another worker has the
    /// card or asked for it first (so a worker alone on its card never says it waits).
    pub(super) fn take(&self, waiting: impl FnOnce()) -> TurnGuard<'_> {
        let ticket = {
            let mut q = self.lock();
            let ticket = q.next_ticket;
            q.next_ticket += 1;
            if q.now_serving == ticket {
                return TurnGuard { turn: self };
            }
            ticket
        };
        // Outside the queue's lock: nothing the caller does can poison it.
        waiting();
        let q = self.lock();
        drop(
            self.served
                .wait_while(q, |q| q.now_serving != ticket)
                .unwrap_or_else(PoisonError::into_inner),
        );
        TurnGuard { turn: self }
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for TurnGuard<'_> {
    fn drop(&mut self) {
        self.turn.lock().now_serving += 1;
        self.turn.served.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    /// Workers queued behind the holder get the card in the order they asked, and the holder
    /// asking again goes to the back of the queue.
    #[test]
    fn the_card_goes_to_the_worker_that_asked_first() {
        let turn = Turn::default();
        let (order, ran) = mpsc::channel();
        std::thread::scope(|s| {
            let held = turn.take(|| panic!("the first to ask has the card at once"));
            let (queued, asked) = mpsc::channel();
            for worker in 1..=2 {
                let (turn, order, queued) = (&turn, order.clone(), queued.clone());
                s.spawn(move || {
                    let _card = turn.take(|| queued.send(()).unwrap_or_default());
                    order.send(worker).unwrap_or_default();
                });
                // One at a time, so the second worker's ticket is behind the first's.
                asked.recv().unwrap();
            }
            let order = order.clone();
            drop(held);
            let _again = turn.take(|| {});
            order.send(0).unwrap_or_default();
        });
        assert_eq!(ran.try_iter().collect::<Vec<_>>(), [1, 2, 0]);
    }

    /// A worker that panics with the card hands it on, and a worker alone after it is served
    /// at once: poisoning makes no wait and no deadlock.
    #[test]
    fn a_panic_with_the_card_hands_it_on() {
        let turn = Turn::default();
        let panicked = std::thread::scope(|s| {
            s.spawn(|| {
                let _card = turn.take(|| {});
                // Poisons the queue's lock too, as a panic inside it would.
                let _queue = turn.lock();
                panic!("a worker panics with the card");
            })
            .join()
        });
        assert!(panicked.is_err());
        assert!(turn.queue.is_poisoned());
        for _ in 0..3 {
            let _card = turn.take(|| panic!("nobody else has the card"));
        }
    }
}
