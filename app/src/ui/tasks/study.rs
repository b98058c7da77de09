//! The study the app runs: started through the engine's [`StudyLaunch`] (recorded with the
//! study, the same heartbeat and telemetry as `tradetune study run`), its controls, and what it
//! reports.

use std::path::PathBuf;
use std::time::Duration;

use tradetune_engine::device::compiling::CompileStatus;
use tradetune_engine::front::launch::{LaunchEvent, StudyLaunch};
use tradetune_engine::study::file::StudyFile;
use tradetune_engine::study::runner::StudyEvent;

use super::{TaskEvent, Tasks};

/// What a running study reports.
#[derive(Debug, Clone)]
pub enum StudyMsg {
    /// The data is loaded, the runner built and the study recorded in its database.
    Ready,
    /// An event of the runner.
    Event(StudyEvent),
    /// Something to tell the user (telemetry could not start, …).
    Notice(String),
    /// The process is compiling GPU kernels (about once a second), or has stopped (its totals).
    Compiling(CompileStatus),
    /// The study ended, or why it could not run.
    Done(Result<(), String>),
}

impl Tasks {
    /// Whether a study is going.
    pub fn running(&self) -> bool {
        self.study.is_some()
    }

    /// Closing the window: interrupts the running study — no new trial, the running ones end
    /// as FAIL "interrupted", its telemetry is flushed — and waits up to `limit` for the runner
    /// to have stored them (other events are dropped: the window is gone). Returns whether the
    /// study ended in time (true when none was running).
    pub fn interrupt_study_and_wait(&mut self, limit: Duration) -> bool {
        use std::sync::mpsc::RecvTimeoutError;
        let Some(study) = &self.study else {
            return true;
        };
        study.interrupt();
        let deadline = std::time::Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return false;
            }
            match self.rx.recv_timeout(left) {
                Ok(TaskEvent::Study(StudyMsg::Done(_))) => {
                    self.study = None;
                    return true;
                }
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout) => return false,
                Err(RecvTimeoutError::Disconnected) => return true,
            }
        }
    }

    /// Closing the window with "Stop now": interrupts the running study as
    /// [`Self::interrupt_study_and_wait`] does, without waiting; its `Done` comes as an event
    /// once the runner has stored the running trials as FAIL "interrupted".
    pub fn interrupt_study(&self) {
        if let Some(study) = &self.study {
            study.interrupt();
        }
    }

    /// Stops the whole study: running trials end as PRUNED (if they reported values) or FAIL
    /// with "stopped by user"; no new ones start.
    pub fn stop_study(&mut self) {
        if let Some(study) = &self.study {
            study.stop_study();
        }
    }

    /// No new trial starts; the running ones go on to their end (closing the window with
    /// "finish running trials"). Returns whether a study is running.
    pub fn finish_running_trials(&mut self) -> bool {
        let Some(study) = &self.study else {
            return false;
        };
        study.finish_running();
        true
    }

    /// Stops one running trial; the study goes on.
    pub fn stop_trial(&self, number: u64) -> bool {
        self.study.as_ref().is_some_and(|s| s.stop_trial(number))
    }

    /// The study's `Done` arrived.
    pub fn study_finished(&mut self) {
        self.study = None;
    }

    /// Runs `file` into the database `db` as `tradetune study run` does (the engine's
    /// [`StudyLaunch`]: recorded with the study, the same heartbeat and telemetry), on a
    /// background thread; every event is forwarded. Its controls work from now on, also while
    /// its data loads.
    pub fn start_study(&mut self, file: StudyFile, db: PathBuf) {
        let launch =
            crate::launch::place(db).and_then(|place| Ok(StudyLaunch::from_study(file, place)?));
        let mut launch = match launch {
            Ok(l) => l,
            Err(e) => {
                self.jobs.reply().send(TaskEvent::Study(StudyMsg::Done(Err(
                    crate::out::error_text(&e),
                ))));
                return;
            }
        };
        // Labelled `host#pid/worker-N` as the CLI's `study run` and `worker` label theirs, so
        // that the app and a worker on the same database stay apart in `show` and `export`.
        launch.host(crate::signals::process_label());
        let reply = (self.jobs).reply_or(|why| TaskEvent::Study(StudyMsg::Done(Err(why))));
        let job_reply = reply.clone();
        let (handle, job) = launch.into_job(move |event| {
            let msg = match event {
                LaunchEvent::Ready { source, .. } => {
                    reply.send(TaskEvent::Study(StudyMsg::Notice(format!(
                        "data: {source}"
                    ))));
                    StudyMsg::Ready
                }
                LaunchEvent::Notice(n) => StudyMsg::Notice(n),
                LaunchEvent::Study(e) => StudyMsg::Event(e),
                LaunchEvent::Compiling(c) => StudyMsg::Compiling(c),
                LaunchEvent::Finished(r) => {
                    StudyMsg::Done(r.map(|_| ()).map_err(|e| e.to_string()))
                }
            };
            reply.send(TaskEvent::Study(msg));
        });
        self.study = Some(handle);
        self.jobs.start("study", job_reply, move |_| job.run());
    }
}
