//! A probe on its own thread, asked for one reading per tick with a deadline.
//!
//! A GPU driver call can stall (NVML on a GPU that fell off the bus, a sysfs read while the
//! card resets). Each probe therefore runs on its own thread; the sampler asks it for tick `n`
//! and waits only until the tick's deadline. A probe still busy is skipped for that tick and
//! counted, and its late answer is thrown away, so one stuck probe never stalls the others
//! or the trainer.

use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::thread;
use std::time::Instant;

use super::TelemetryError;
use super::source::{Source, SourceReading};

pub(crate) struct ProbeWorker {
    pub(crate) name: String,
    requests: Option<Sender<u64>>,
    answers: Receiver<(u64, SourceReading)>,
    /// The tick this probe is still working on.
    outstanding: Option<u64>,
    /// The probe's thread ended (it panicked); it is skipped from now on.
    dead: bool,
}

pub(crate) enum Asked {
    Yes,
    /// Still busy with an earlier tick, or dead.
    No,
}

impl ProbeWorker {
    pub(crate) fn spawn(mut source: Box<dyn Source>) -> Result<ProbeWorker, TelemetryError> {
        let name = source.name();
        let (req_tx, req_rx) = mpsc::channel::<u64>();
        let (ans_tx, ans_rx) = mpsc::channel();
        thread::Builder::new()
            .name(format!("telemetry-{name}"))
            .spawn(move || {
                for tick in req_rx {
                    if ans_tx.send((tick, source.read())).is_err() {
                        break;
                    }
                }
            })
            .map_err(|source| TelemetryError::Thread {
                name: name.clone(),
                source,
            })?;
        Ok(ProbeWorker {
            name,
            requests: Some(req_tx),
            answers: ans_rx,
            outstanding: None,
            dead: false,
        })
    }

    pub(crate) fn is_dead(&self) -> bool {
        self.dead
    }

    /// Sends the request for `tick` unless the probe is still busy.
    pub(crate) fn ask(&mut self, tick: u64) -> Asked {
        self.drain_stale();
        if self.dead || self.outstanding.is_some() {
            return Asked::No;
        }
        match self.requests.as_ref().map(|r| r.send(tick)) {
            Some(Ok(())) => {
                self.outstanding = Some(tick);
                Asked::Yes
            }
            _ => {
                self.dead = true;
                Asked::No
            }
        }
    }

    /// Waits until `deadline` for the answer to `tick`.
    pub(crate) fn collect(&mut self, tick: u64, deadline: Instant) -> Option<SourceReading> {
        loop {
            let wait = deadline.saturating_duration_since(Instant::now());
            match self.answers.recv_timeout(wait) {
                Ok((t, reading)) => {
                    self.outstanding = None;
                    if t == tick {
                        return Some(reading);
                    }
                }
                Err(RecvTimeoutError::Timeout) => return None,
                Err(RecvTimeoutError::Disconnected) => {
                    self.dead = true;
                    return None;
                }
            }
        }
    }

    /// For a probe skipped this tick: waits until `deadline` for its late answer so it can be
    /// asked again next tick, and discards that answer (its timestamp is an old tick's).
    pub(crate) fn wait_stale(&mut self, deadline: Instant) {
        if self.outstanding.is_none() || self.dead {
            return;
        }
        let wait = deadline.saturating_duration_since(Instant::now());
        match self.answers.recv_timeout(wait) {
            Ok(_) => self.outstanding = None,
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => self.dead = true,
        }
    }

    fn drain_stale(&mut self) {
        loop {
            match self.answers.try_recv() {
                Ok(_) => self.outstanding = None,
                Err(TryRecvError::Empty) => return,
                Err(TryRecvError::Disconnected) => {
                    self.dead = true;
                    return;
                }
            }
        }
    }
}

impl Drop for ProbeWorker {
    fn drop(&mut self) {
        // Closing the request channel ends the probe's loop. The thread is not joined: a probe
        // stuck in a driver call must not hang shutdown; it ends with the process.
        self.requests.take();
    }
}
