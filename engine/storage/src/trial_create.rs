//! Creating trials: a RUNNING trial numbered inside its transaction (within the study's
//! budget, when it has one), an enqueued WAITING trial and taking it, and a whole trial added
//! at once (Optuna's `add_trial`). The rules are Optuna's, as for the writes of
//! `trial_write`, whose checks these share.

use chrono::NaiveDateTime;

use super::datetime::now_utc;
use super::db::args;
use super::error::StorageError;
use super::json_value::JsonValue;
use super::model::TrialState;
use super::open::{Storage, Tx};
use super::records::{NewTrial, TrialHandle};
use super::study_write::require_study;
use super::trial_write::{
    TrialRow, check_values, fail_in, insert_param, trial_row, upsert_heartbeat,
    upsert_intermediate, upsert_trial_attr, upsert_value,
};

/// System attribute of an enqueued trial with its fixed parameters (Optuna's `enqueue_trial`).
pub const FIXED_PARAMS_KEY: &str = "fixed_params";

fn insert_trial(
    tx: &mut Tx<'_>,
    study_id: i64,
    state: TrialState,
    start: Option<NaiveDateTime>,
    complete: Option<NaiveDateTime>,
) -> Result<TrialHandle, StorageError> {
    // Inside the write transaction, with the study locked (SQLite: `BEGIN IMMEDIATE`;
    // PostgreSQL: its row `FOR UPDATE`), so two writers can never get the same number; equals
    // Optuna's `count_past_trials` because new trial ids are always the largest.
    tx.lock_study(study_id)?;
    let row = tx
        .tx
        .query_opt(
            "INSERT INTO trials (number, study_id, state, datetime_start, datetime_complete) \
             VALUES ((SELECT COUNT(*) FROM trials WHERE study_id = ?1), ?1, ?2, ?3, ?4) \
             RETURNING trial_id, number",
            args![study_id, state.as_str(), start, complete],
        )
        .map_err(tx.err())?;
    let (trial_id, number) = row
        .map(|r| Ok((r.i64(0)?, r.i64(1)?)))
        .transpose()
        .map_err(tx.err())?
        .ok_or(StorageError::UnknownStudy(study_id))?;
    Ok(TrialHandle {
        trial_id,
        study_id,
        number,
    })
}

/// Whether the study already holds `budget` RUNNING, COMPLETE or PRUNED trials (never, without
/// a budget). Counted with the study locked, so the trial the caller then starts is counted by
/// every other writer's next look.
fn budget_spent(
    tx: &mut Tx<'_>,
    study_id: i64,
    budget: Option<usize>,
) -> Result<bool, StorageError> {
    let Some(budget) = budget else {
        return Ok(false);
    };
    tx.lock_study(study_id)?;
    let used = tx
        .tx
        .query_opt(
            "SELECT COUNT(*) FROM trials WHERE study_id = ?1 \
             AND state IN ('RUNNING', 'COMPLETE', 'PRUNED')",
            args![study_id],
        )
        .and_then(|r| r.map(|r| r.i64(0)).transpose())
        .map_err(tx.err())?
        .unwrap_or(0);
    Ok(used >= budget as i64)
}

impl Storage {
    /// Starts a new RUNNING trial (with a first heartbeat) and returns its number.
    pub fn create_trial(&mut self, study_id: i64) -> Result<TrialHandle, StorageError> {
        // Without a budget a trial is always created.
        self.create_trial_within(study_id, None)?
            .ok_or(StorageError::UnknownStudy(study_id))
    }

    /// Starts a new RUNNING trial unless the study already holds `budget` RUNNING, COMPLETE or
    /// PRUNED trials (None: no limit); counted inside the transaction that numbers the trial,
    /// with the study locked, so workers in several processes never overshoot a shared budget.
    /// FAIL trials do not count: a crashed or interrupted trial is run again.
    pub fn create_trial_within(
        &mut self,
        study_id: i64,
        budget: Option<usize>,
    ) -> Result<Option<TrialHandle>, StorageError> {
        self.write("create trial", |tx| {
            require_study(tx, study_id)?;
            if budget_spent(tx, study_id, budget)? {
                return Ok(None);
            }
            let handle = insert_trial(tx, study_id, TrialState::Running, Some(now_utc()), None)?;
            upsert_heartbeat(tx, handle.trial_id)?;
            Ok(Some(handle))
        })
    }

    /// Enqueues a WAITING trial with fixed parameters (external values by name), as Optuna's
    /// `study.enqueue_trial` does: they go to the system attribute `fixed_params`.
    pub fn enqueue_trial(
        &mut self,
        study_id: i64,
        fixed_params: &[(String, JsonValue)],
        user_attrs: &[(String, JsonValue)],
    ) -> Result<TrialHandle, StorageError> {
        self.write("enqueue trial", |tx| {
            require_study(tx, study_id)?;
            let handle = insert_trial(tx, study_id, TrialState::Waiting, None, None)?;
            let fixed = JsonValue::Object(fixed_params.to_vec());
            upsert_trial_attr(
                tx,
                "trial_system_attributes",
                handle.trial_id,
                FIXED_PARAMS_KEY,
                &fixed,
            )?;
            for (k, v) in user_attrs {
                upsert_trial_attr(tx, "trial_user_attributes", handle.trial_id, k, v)?;
            }
            Ok(handle)
        })
    }

    /// Takes the oldest WAITING trial of the study and makes it RUNNING, or returns None.
    /// Atomic: two workers never take the same trial, nor revive one a cancel finished, even
    /// where the other writer is not TradeTune (Optuna takes a waiting trial and cancels one
    /// locking only its row, not the study's): a trial found WAITING is taken only if it is
    /// still WAITING once its row is locked, as Optuna's own rule is.
    pub fn pop_waiting_trial(
        &mut self,
        study_id: i64,
    ) -> Result<Option<TrialHandle>, StorageError> {
        self.pop_waiting_trial_within(study_id, None)
    }

    /// As [`Storage::pop_waiting_trial`], unless the study already holds `budget` RUNNING,
    /// COMPLETE or PRUNED trials (as [`Storage::create_trial_within`] counts them): the trial
    /// taken counts as one that starts.
    pub fn pop_waiting_trial_within(
        &mut self,
        study_id: i64,
        budget: Option<usize>,
    ) -> Result<Option<TrialHandle>, StorageError> {
        self.write("start enqueued trial", |tx| {
            require_study(tx, study_id)?;
            tx.lock_study(study_id)?;
            if budget_spent(tx, study_id, budget)? {
                return Ok(None);
            }
            // Trial ids start at 1.
            let mut after = 0i64;
            loop {
                let id = tx
                    .tx
                    .query_opt(
                        "SELECT MIN(trial_id) FROM trials WHERE study_id = ?1 \
                         AND state = 'WAITING' AND trial_id > ?2",
                        args![study_id, after],
                    )
                    .and_then(|r| r.map(|r| r.opt_i64(0)).transpose())
                    .map_err(tx.err())?
                    .flatten();
                let Some(trial_id) = id else { return Ok(None) };
                after = trial_id;
                let row = trial_row(tx, trial_id)?;
                if row.state != TrialState::Waiting {
                    continue;
                }
                let taken = tx
                    .tx
                    .execute(
                        "UPDATE trials SET state = 'RUNNING', datetime_start = ?2 \
                         WHERE trial_id = ?1 AND state = 'WAITING'",
                        args![trial_id, now_utc()],
                    )
                    .map_err(tx.err())?;
                if taken != 1 {
                    continue;
                }
                upsert_heartbeat(tx, trial_id)?;
                return Ok(Some(row.handle()));
            }
        })
    }

    /// Stores a whole trial in one transaction (Optuna's `study.add_trial`): parameters,
    /// values, intermediate values, attributes and the final state.
    pub fn add_trial(
        &mut self,
        study_id: i64,
        trial: &NewTrial,
    ) -> Result<TrialHandle, StorageError> {
        self.write("add trial", |tx| add_trial_in(tx, study_id, trial))
    }

    /// RUNNING → FAIL with `reason`, as [`Storage::fail_trial`], and `again` enqueued in the
    /// same transaction (as Optuna's `RetryFailedTrialCallback` adds a WAITING copy of a
    /// failed trial): the trial runs again later, or neither is stored.
    pub fn fail_trial_and_enqueue(
        &mut self,
        trial_id: i64,
        reason: &str,
        again: &NewTrial,
    ) -> Result<TrialHandle, StorageError> {
        self.write("fail trial and enqueue it again", |tx| {
            let row = fail_in(tx, trial_id, reason)?;
            add_trial_in(tx, row.study_id, again)
        })
    }
}

/// [`Storage::add_trial`] inside a transaction.
fn add_trial_in(
    tx: &mut Tx<'_>,
    study_id: i64,
    trial: &NewTrial,
) -> Result<TrialHandle, StorageError> {
    let n_objectives = require_study(tx, study_id)?;
    let waiting = trial.state == TrialState::Waiting;
    let start = if waiting {
        trial.datetime_start
    } else {
        trial.datetime_start.or(Some(now_utc()))
    };
    let complete = if trial.state.is_finished() {
        trial.datetime_complete.or(Some(now_utc()))
    } else {
        trial.datetime_complete
    };
    // Written RUNNING first, then switched, as Optuna does, so every check applies.
    let handle = insert_trial(tx, study_id, TrialState::Running, start, complete)?;
    check_values(
        handle.number,
        trial.state,
        trial.values.as_deref(),
        n_objectives,
    )?;
    let row = TrialRow {
        trial_id: handle.trial_id,
        study_id,
        number: handle.number,
        state: TrialState::Running,
    };
    for (name, internal, distribution) in &trial.params {
        insert_param(tx, &row, name, *internal, distribution)?;
    }
    for (objective, v) in trial.values.iter().flatten().enumerate() {
        upsert_value(tx, handle.trial_id, objective, *v)?;
    }
    for (step, v) in &trial.intermediate_values {
        upsert_intermediate(tx, handle.trial_id, *step, *v)?;
    }
    for (k, v) in &trial.user_attrs {
        upsert_trial_attr(tx, "trial_user_attributes", handle.trial_id, k, v)?;
    }
    for (k, v) in &trial.system_attrs {
        upsert_trial_attr(tx, "trial_system_attributes", handle.trial_id, k, v)?;
    }
    tx.tx
        .execute(
            "UPDATE trials SET state = ?2 WHERE trial_id = ?1",
            args![handle.trial_id, trial.state.as_str()],
        )
        .map_err(tx.err())?;
    if trial.state == TrialState::Running {
        upsert_heartbeat(tx, handle.trial_id)?;
    }
    Ok(handle)
}
