//! Heartbeats of running trials, and failing the trials whose worker died.
//!
//! Optuna's scheme (`storages/_rdb/storage.py`, `record_heartbeat`, `_get_stale_trial_ids`;
//! `storages/_heartbeat.py`, `fail_stale_trials`): one `trial_heartbeats` row per trial, stamped
//! with the database clock; a RUNNING trial whose stamp is older than the grace period is set to
//! FAIL. Trials without a heartbeat row (e.g. Optuna `ask`/`tell` trials) are left alone, as
//! Optuna leaves them. TradeTune also stores the reason in the `fail_reason` system attribute.

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

use super::datetime::{format_naive, now_utc};
use super::db::{Dialect, args};
use super::error::StorageError;
use super::json_value::JsonValue;
use super::open::{Storage, StorageOptions};
use super::records::TrialHandle;
use super::trial_write::FAIL_REASON_KEY;

impl Storage {
    /// Sets every RUNNING trial (of any study) whose heartbeat is older than `stale_after` to
    /// FAIL, with reason, in one transaction; returns them. Runs on open when the opener asks
    /// (see [`StorageOptions::stale_after`]). A study's runner uses
    /// [`Self::fail_stale_trials_of`]: other studies' workers may beat less often.
    pub fn fail_stale_trials(
        &mut self,
        stale_after: Duration,
    ) -> Result<Vec<TrialHandle>, StorageError> {
        self.fail_stale(stale_after, None)
    }

    /// [`Self::fail_stale_trials`] for the trials of study `study_id` only, as Optuna's sweep
    /// is (`_get_stale_trial_ids(study_id)`): a runner judges its own study's workers by its
    /// `stale_after`, never the trials of another study (another TradeTune study's workers
    /// started with a longer `--stale-after`, an Optuna worker with its own heartbeat
    /// interval), which it would fail while they train.
    pub fn fail_stale_trials_of(
        &mut self,
        study_id: i64,
        stale_after: Duration,
    ) -> Result<Vec<TrialHandle>, StorageError> {
        self.fail_stale(stale_after, Some(study_id))
    }

    fn fail_stale(
        &mut self,
        stale_after: Duration,
        study_id: Option<i64>,
    ) -> Result<Vec<TrialHandle>, StorageError> {
        let secs = stale_after.as_secs_f64();
        // An integer of ours, not input text: written into the statement as it is.
        let of_study = study_id.map_or_else(String::new, |id| format!("AND t.study_id = {id} "));
        self.write("fail stale trials", |tx| {
            // On the database's clock, as the beats were written (see `upsert_heartbeat`).
            let sql = match tx.dialect() {
                // julianday() reads both `CURRENT_TIMESTAMP` and SQLAlchemy's fractional form.
                Dialect::Sqlite => format!(
                    "SELECT t.trial_id, t.study_id, t.number, h.heartbeat FROM trials t \
                     JOIN trial_heartbeats h ON h.trial_id = t.trial_id \
                     WHERE t.state = 'RUNNING' {of_study}\
                     AND (julianday(CURRENT_TIMESTAMP) - julianday(h.heartbeat)) * 86400.0 > ?1"
                ),
                // Locked, and skipped when another worker is failing (or finishing) them now.
                // The beats are the session zone's wall clock (`LOCALTIMESTAMP`, as Optuna
                // writes them): read in that zone, a beat from just before the clocks went
                // forward is seconds old, not an hour (which would fail a live trial).
                Dialect::Postgres => format!(
                    "SELECT t.trial_id, t.study_id, t.number, h.heartbeat FROM trials t \
                     JOIN trial_heartbeats h ON h.trial_id = t.trial_id \
                     WHERE t.state = 'RUNNING' {of_study}\
                     AND (h.heartbeat AT TIME ZONE current_setting('TimeZone')) \
                     < now() - make_interval(secs => ?1) \
                     FOR UPDATE OF t SKIP LOCKED"
                ),
            };
            let stale: Vec<(TrialHandle, String)> = tx
                .tx
                .query(&sql, args![secs])
                .and_then(|rows| {
                    rows.iter()
                        .map(|r| {
                            let beat = r.opt_time(3)?.map_or_else(|| "(none)".to_owned(), format_naive);
                            Ok((
                                TrialHandle {
                                    trial_id: r.i64(0)?,
                                    study_id: r.i64(1)?,
                                    number: r.opt_i64(2)?.unwrap_or(-1),
                                },
                                beat,
                            ))
                        })
                        .collect()
                })
                .map_err(tx.err())?;
            let now = now_utc();
            for (handle, heartbeat) in &stale {
                tx.tx
                    .execute(
                        "UPDATE trials SET state = 'FAIL', datetime_complete = ?2 WHERE trial_id = ?1 AND state = 'RUNNING'",
                        args![handle.trial_id, now],
                    )
                    .map_err(tx.err())?;
                let reason = format!(
                    "{}: last heartbeat {heartbeat} (database clock) is older than {secs:.0} s",
                    super::WORKER_LOST_REASON
                );
                tx.tx
                    .execute(
                        "INSERT INTO trial_system_attributes (trial_id, key, value_json) VALUES (?1, ?2, ?3) \
                         ON CONFLICT (trial_id, key) DO UPDATE SET value_json = excluded.value_json",
                        args![handle.trial_id, FAIL_REASON_KEY, JsonValue::from(reason).dumps()],
                    )
                    .map_err(tx.err())?;
            }
            Ok(stale.into_iter().map(|(h, _)| h).collect())
        })
    }
}

/// A thread that records a trial's heartbeat every `interval` on its own connection, until
/// dropped or stopped. A trial that was finished or removed meanwhile ends the thread quietly:
/// the beat only matters while the trial runs. Any other error (a SQLite busy timeout, a
/// dropped PostgreSQL connection) is retried at the next beat on a fresh connection: a thread
/// that gave up would let another worker's stale check fail the live trial and lose its result.
pub struct HeartbeatThread {
    stop: Option<Sender<()>>,
    handle: Option<JoinHandle<Result<(), StorageError>>>,
}

impl HeartbeatThread {
    /// Opens the storage at `path` (a file or a PostgreSQL URL) again and starts beating for
    /// `trial_id`.
    pub fn start(
        path: impl Into<PathBuf>,
        trial_id: i64,
        interval: Duration,
    ) -> Result<Self, StorageError> {
        let path = path.into();
        let options = StorageOptions {
            stale_after: None,
            ..StorageOptions::default()
        };
        let first = Storage::open_with(&path, &options)
            .and_then(|mut storage| storage.record_heartbeat(trial_id).map(|()| storage));
        let mut connection = match first {
            Ok(storage) => Some(storage),
            // The database is out of reach for now (restarting, say): the trial has the beat
            // its start stored, and the thread's beats try again.
            Err(e) if e.is_connection() => {
                // Not `eprintln!`, which panics where stderr is closed: a beat is worth more
                // than its warning.
                let _ = writeln!(
                    std::io::stderr(),
                    "warning: trial id {trial_id}: heartbeat: {e}; trying again every {interval:?}"
                );
                None
            }
            Err(e) => return Err(e),
        };
        let (stop, stopped) = mpsc::channel::<()>();
        // One beat on the thread's connection; after a failure the connection is dropped and
        // the next beat opens a new one, so a connection that went bad does not stay bad.
        let beat = move || {
            let storage = match &mut connection {
                Some(s) => s,
                None => connection.insert(Storage::open_with(&path, &options)?),
            };
            let result = storage.record_heartbeat(trial_id);
            if result.is_err() {
                connection = None;
            }
            result
        };
        let handle = std::thread::Builder::new()
            .name(format!("heartbeat-trial-{trial_id}"))
            .spawn(move || {
                keep_beating(&stopped, interval, beat, |line| {
                    let _ = writeln!(std::io::stderr(), "warning: trial id {trial_id}: {line}");
                })
            })?;
        Ok(HeartbeatThread {
            stop: Some(stop),
            handle: Some(handle),
        })
    }

    /// Stops beating; returns the error that ended the thread early, if any.
    pub fn stop(mut self) -> Result<(), StorageError> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Result<(), StorageError> {
        drop(self.stop.take());
        match self.handle.take().map(JoinHandle::join) {
            Some(Ok(result)) => result,
            Some(Err(_)) => Err(StorageError::Io(std::io::Error::other(
                "heartbeat thread panicked",
            ))),
            None => Ok(()),
        }
    }
}

/// Whether a heartbeat error means the trial no longer runs (finished, removed, or never
/// started), so beating is over; any other error may pass.
fn ends_the_beat(e: &StorageError) -> bool {
    matches!(
        e,
        StorageError::TrialFinished { .. }
            | StorageError::UnknownTrial(_)
            | StorageError::InvalidTransition { .. }
    )
}

/// The heartbeat loop: calls `beat` every `interval` until `stopped` fires (or its sender is
/// dropped), or a beat says the trial no longer runs (that error is returned). Other errors are
/// retried at the next beat; a failure that repeats is said once through `say`, and once
/// again when a beat gets through, so a long outage is one line, not one a beat.
fn keep_beating(
    stopped: &Receiver<()>,
    interval: Duration,
    mut beat: impl FnMut() -> Result<(), StorageError>,
    mut say: impl FnMut(String),
) -> Result<(), StorageError> {
    let mut failed_in_a_row = 0u32;
    loop {
        match stopped.recv_timeout(interval) {
            Err(RecvTimeoutError::Timeout) => {}
            _ => return Ok(()),
        }
        match beat() {
            Ok(()) => {
                if failed_in_a_row >= 2 {
                    say(format!(
                        "heartbeat recorded again after {failed_in_a_row} failed beats"
                    ));
                }
                failed_in_a_row = 0;
            }
            Err(e) if ends_the_beat(&e) => return Err(e),
            Err(e) => {
                failed_in_a_row += 1;
                if failed_in_a_row == 2 {
                    say(format!(
                        "heartbeat failed twice in a row, still retrying every {interval:?} \
                         (the trial is failed as \"worker lost\" if no beat gets through \
                         within the study's stale-after): {e}"
                    ));
                }
            }
        }
    }
}

impl Drop for HeartbeatThread {
    fn drop(&mut self) {
        // An error here means the trial was finished or the file went away; nothing to do.
        let _ = self.shutdown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transient() -> StorageError {
        StorageError::Io(std::io::Error::other("database is locked"))
    }

    #[test]
    fn the_beat_goes_on_past_transient_errors_and_says_so_once() {
        let (_stop, stopped) = mpsc::channel::<()>();
        // Three failed beats (a busy timeout, a dropped connection), one that gets through, two
        // more failures, then the trial is finished.
        let mut script = vec![
            Err(transient()),
            Err(transient()),
            Err(transient()),
            Ok(()),
            Err(transient()),
            Ok(()),
            Err(StorageError::UnknownTrial(7)),
        ]
        .into_iter();
        let mut beats = 0;
        let mut said = Vec::new();
        let end = keep_beating(
            &stopped,
            Duration::from_millis(1),
            || {
                beats += 1;
                script.next().unwrap_or(Ok(()))
            },
            |line| said.push(line),
        );
        assert!(matches!(end, Err(StorageError::UnknownTrial(7))), "{end:?}");
        assert_eq!(beats, 7, "every beat after a failure was tried");
        assert_eq!(said.len(), 2, "{said:?}");
        assert!(said[0].contains("failed twice in a row"), "{said:?}");
        assert!(said[0].contains("database is locked"), "{said:?}");
        assert!(
            said[1].contains("recorded again after 3 failed beats"),
            "{said:?}"
        );
    }

    #[test]
    fn stopping_ends_the_beat_without_an_error() {
        let (stop, stopped) = mpsc::channel::<()>();
        drop(stop);
        let end = keep_beating(
            &stopped,
            Duration::from_secs(60),
            || Err(transient()),
            |_| {},
        );
        assert!(end.is_ok(), "{end:?}");
    }
}
