//! Writing a trial's parameters, values, attributes and state (creating one is
//! `trial_create`).
//!
//! Each call is one short transaction. The rules are Optuna's (`storages/_rdb/storage.py`):
//! a trial's `number` is the count of earlier trials of its study, assigned inside the insert
//! transaction; finished trials (COMPLETE, PRUNED, FAIL) are never modified; a parameter name
//! keeps one kind of distribution across a study; ±inf values are stored as NULL plus a type.

use super::datetime::now_utc;
use super::db::{Dialect, args};
use super::distribution_json::{float_distribution_log, follows_float};
use super::error::StorageError;
use super::json_value::JsonValue;
use super::model::OptunaDistribution;
use super::model::TrialState;
use super::open::{Storage, Tx};
use super::records::TrialHandle;
use super::study_write::require_study;

/// System attribute holding why a trial failed (the key Optuna 2.x used for the same purpose).
pub const FAIL_REASON_KEY: &str = "fail_reason";

/// The `fail_reason` of a trial stopped by a stop of its whole study (Ctrl-C, the app's Stop):
/// its own configuration did not fail it.
pub const INTERRUPTED_REASON: &str = "interrupted";

/// How the `fail_reason` of a trial whose worker died starts (its heartbeat went stale).
pub const WORKER_LOST_REASON: &str = "worker lost";

/// System attribute holding why TradeTune pruned a trial: its pruner, or the user.
pub const PRUNE_REASON_KEY: &str = "prune_reason";

/// How the `prune_reason` (or `fail_reason`) of a trial the user stopped on its own (the app's
/// Stop on one trial, not a stop of the whole study) starts.
pub const STOPPED_REASON: &str = "stopped by user";

/// The columns of `trials` a write needs.
#[derive(Debug, Clone, Copy)]
pub(super) struct TrialRow {
    pub trial_id: i64,
    pub study_id: i64,
    pub number: i64,
    pub state: TrialState,
}

impl TrialRow {
    pub(super) fn handle(&self) -> TrialHandle {
        TrialHandle {
            trial_id: self.trial_id,
            study_id: self.study_id,
            number: self.number,
        }
    }
}

/// The trial's row, locked until commit on PostgreSQL (a write decides on its state).
pub(super) fn trial_row(tx: &mut Tx<'_>, trial_id: i64) -> Result<TrialRow, StorageError> {
    let sql = match tx.dialect() {
        Dialect::Sqlite => "SELECT study_id, number, state FROM trials WHERE trial_id = ?1",
        Dialect::Postgres => {
            "SELECT study_id, number, state FROM trials WHERE trial_id = ?1 FOR UPDATE"
        }
    };
    let row = tx
        .tx
        .query_opt(sql, args![trial_id])
        .and_then(|r| {
            r.map(|r| Ok((r.i64(0)?, r.opt_i64(1)?, r.string(2)?)))
                .transpose()
        })
        .map_err(tx.err())?;
    let (study_id, number, state) = row.ok_or(StorageError::UnknownTrial(trial_id))?;
    let corrupt = |column, message: String| StorageError::Corrupt {
        path: tx.path.to_owned(),
        table: "trials",
        row_id: trial_id,
        column,
        message,
    };
    let state = state
        .parse::<TrialState>()
        .map_err(|m| corrupt("state", m))?;
    let number = number.ok_or_else(|| corrupt("number", "NULL trial number".into()))?;
    Ok(TrialRow {
        trial_id,
        study_id,
        number,
        state,
    })
}

/// The trial, if it may still be changed (Optuna's `check_trial_is_updatable`).
fn updatable(tx: &mut Tx<'_>, trial_id: i64) -> Result<TrialRow, StorageError> {
    let row = trial_row(tx, trial_id)?;
    if row.state.is_finished() {
        return Err(StorageError::TrialFinished {
            trial_id,
            number: row.number,
            state: row.state,
        });
    }
    Ok(row)
}

/// Heartbeats use the database's clock (SQLite's `CURRENT_TIMESTAMP`, UTC; PostgreSQL's
/// `LOCALTIMESTAMP`), exactly as Optuna's `record_heartbeat` does, so staleness is judged on
/// one clock whoever wrote the beat, from whichever machine.
pub(super) fn upsert_heartbeat(tx: &mut Tx<'_>, trial_id: i64) -> Result<(), StorageError> {
    let sql = format!(
        "INSERT INTO trial_heartbeats (trial_id, heartbeat) VALUES (?1, {}) \
         ON CONFLICT (trial_id) DO UPDATE SET heartbeat = excluded.heartbeat",
        tx.now_sql()
    );
    tx.tx.execute(&sql, args![trial_id]).map_err(tx.err())?;
    Ok(())
}

pub(super) fn insert_param(
    tx: &mut Tx<'_>,
    row: &TrialRow,
    name: &str,
    internal: f64,
    distribution: &OptunaDistribution,
) -> Result<(), StorageError> {
    let distribution = distribution
        .validated()
        .map_err(|source| StorageError::Distribution {
            name: name.to_owned(),
            source,
        })?;
    if !distribution.contains(internal) {
        return Err(StorageError::ParamOutOfRange {
            number: row.number,
            name: name.to_owned(),
            value: internal,
            distribution: distribution.to_optuna_json(),
        });
    }
    let key = (row.study_id, name.to_owned());
    let existing = match tx.staged.get(&key).or_else(|| tx.known.get(&key)) {
        Some(d) => Some(d.clone()),
        None => {
            let json = tx
                .tx
                .query_opt(
                    "SELECT p.distribution_json FROM trials t \
                     JOIN trial_params p ON p.trial_id = t.trial_id AND p.param_name = ?2 \
                     WHERE t.study_id = ?1 ORDER BY t.trial_id LIMIT 1",
                    args![row.study_id, name],
                )
                .and_then(|r| r.map(|r| r.string(0)).transpose())
                .map_err(tx.err())?;
            match json {
                Some(json) => match OptunaDistribution::from_optuna_json(&json) {
                    Ok(d) => Some(d),
                    // A float range another client stored that the model refuses (Optuna's
                    // `FloatDistribution(0.0, float('inf'))`, set aside on reading): Optuna's
                    // rule still holds, a float range of the same scale may follow it.
                    Err(source) => match float_distribution_log(&json) {
                        Some(log) => {
                            check_follows_float(row, name, &distribution, &json, log)?;
                            None
                        }
                        None => {
                            return Err(StorageError::Distribution {
                                name: name.to_owned(),
                                source,
                            });
                        }
                    },
                },
                None => None,
            }
        }
    };
    if let Some(existing) = &existing
        && let Err(reason) = existing.compatibility_with(&distribution)
    {
        return Err(StorageError::IncompatibleDistribution {
            number: row.number,
            name: name.to_owned(),
            distribution: distribution.to_optuna_json(),
            existing: existing.to_optuna_json(),
            reason,
        });
    }
    let result = tx.tx.execute(
        "INSERT INTO trial_params (trial_id, param_name, param_value, distribution_json) \
         VALUES (?1, ?2, ?3, ?4)",
        args![row.trial_id, name, internal, distribution.to_optuna_json()],
    );
    match result {
        Ok(_) => {}
        Err(e) if e.is_constraint() => {
            return Err(StorageError::ParamAlreadySet {
                number: row.number,
                name: name.to_owned(),
            });
        }
        Err(e) => return Err(tx.err()(e)),
    }
    // Staged, not cached: the transaction may still roll back (a later parameter of the same
    // call refused), and a cached distribution that was never stored would refuse a value of
    // another type for a name that has none. `Storage::write` caches it after the commit.
    if !tx.known.contains_key(&key) {
        tx.staged
            .entry(key)
            .or_insert(existing.unwrap_or(distribution));
    }
    Ok(())
}

/// Optuna's `check_distribution_compatibility` against a stored float range the model refuses
/// (its scale `log` told from the text `existing`): `new` must be a float range of that scale.
fn check_follows_float(
    row: &TrialRow,
    name: &str,
    new: &OptunaDistribution,
    existing: &str,
    log: bool,
) -> Result<(), StorageError> {
    let Err(reason) = follows_float(new, log) else {
        return Ok(());
    };
    Err(StorageError::IncompatibleDistribution {
        number: row.number,
        name: name.to_owned(),
        distribution: new.to_optuna_json(),
        existing: existing.to_owned(),
        reason: reason.to_owned(),
    })
}

/// Optuna's `value_to_stored_repr`: ±inf become NULL plus `INF_POS`/`INF_NEG`.
pub(super) fn upsert_value(
    tx: &mut Tx<'_>,
    trial_id: i64,
    objective: usize,
    v: f64,
) -> Result<(), StorageError> {
    let (stored, kind) = if v == f64::INFINITY {
        (None, "INF_POS")
    } else if v == f64::NEG_INFINITY {
        (None, "INF_NEG")
    } else {
        (Some(v), "FINITE")
    };
    tx.tx
        .execute(
            "INSERT INTO trial_values (trial_id, objective, value, value_type) VALUES (?1, ?2, ?3, ?4) \
             ON CONFLICT (trial_id, objective) DO UPDATE SET value = excluded.value, value_type = excluded.value_type",
            args![trial_id, objective as i64, stored, kind],
        )
        .map_err(tx.err())?;
    Ok(())
}

/// Optuna's `intermediate_value_to_stored_repr`: NaN and ±inf become NULL plus a type.
pub(super) fn upsert_intermediate(
    tx: &mut Tx<'_>,
    trial_id: i64,
    step: i64,
    v: f64,
) -> Result<(), StorageError> {
    let (stored, kind) = if v.is_nan() {
        (None, "NAN")
    } else if v == f64::INFINITY {
        (None, "INF_POS")
    } else if v == f64::NEG_INFINITY {
        (None, "INF_NEG")
    } else {
        (Some(v), "FINITE")
    };
    tx.tx
        .execute(
            "INSERT INTO trial_intermediate_values (trial_id, step, intermediate_value, intermediate_value_type) \
             VALUES (?1, ?2, ?3, ?4) ON CONFLICT (trial_id, step) DO UPDATE SET \
             intermediate_value = excluded.intermediate_value, intermediate_value_type = excluded.intermediate_value_type",
            args![trial_id, step, stored, kind],
        )
        .map_err(tx.err())?;
    Ok(())
}

pub(super) fn upsert_trial_attr(
    tx: &mut Tx<'_>,
    table: &'static str,
    trial_id: i64,
    key: &str,
    value: &JsonValue,
) -> Result<(), StorageError> {
    let sql = format!(
        "INSERT INTO {table} (trial_id, key, value_json) VALUES (?1, ?2, ?3) \
         ON CONFLICT (trial_id, key) DO UPDATE SET value_json = excluded.value_json"
    );
    tx.tx
        .execute(&sql, args![trial_id, key, value.dumps()])
        .map_err(tx.err())?;
    Ok(())
}

/// The values a trial may end with: one per objective and no NaN (Optuna fails NaN
/// objectives); COMPLETE needs them, PRUNED may have them, the others have none.
pub(super) fn check_values(
    number: i64,
    state: TrialState,
    values: Option<&[f64]>,
    n_objectives: usize,
) -> Result<(), StorageError> {
    match (state, values) {
        (TrialState::Complete, None) => Err(StorageError::WrongValueCount {
            number,
            given: 0,
            expected: n_objectives,
        }),
        (TrialState::Complete | TrialState::Pruned, Some(v)) => {
            if v.len() != n_objectives {
                return Err(StorageError::WrongValueCount {
                    number,
                    given: v.len(),
                    expected: n_objectives,
                });
            }
            match v.iter().position(|x| x.is_nan()) {
                Some(objective) => Err(StorageError::NanObjective { number, objective }),
                None => Ok(()),
            }
        }
        (TrialState::Fail | TrialState::Running | TrialState::Waiting, Some(v))
            if !v.is_empty() =>
        {
            Err(StorageError::WrongValueCount {
                number,
                given: v.len(),
                expected: 0,
            })
        }
        _ => Ok(()),
    }
}

fn finish(
    tx: &mut Tx<'_>,
    trial_id: i64,
    to: TrialState,
    values: Option<&[f64]>,
) -> Result<TrialRow, StorageError> {
    let row = updatable(tx, trial_id)?;
    if !row.state.can_become(to) || !to.is_finished() {
        return Err(StorageError::InvalidTransition {
            trial_id,
            number: row.number,
            from: row.state,
            to,
        });
    }
    let n_objectives = require_study(tx, row.study_id)?;
    check_values(row.number, to, values, n_objectives)?;
    for (objective, v) in values.unwrap_or(&[]).iter().enumerate() {
        upsert_value(tx, trial_id, objective, *v)?;
    }
    tx.tx
        .execute(
            "UPDATE trials SET state = ?2, datetime_complete = ?3 WHERE trial_id = ?1",
            args![trial_id, to.as_str(), now_utc()],
        )
        .map_err(tx.err())?;
    Ok(row)
}

/// RUNNING → FAIL with its reason (`fail_reason`, as Optuna's `_fail_stale_trials` and
/// TradeTune's runner store it), inside a transaction.
pub(super) fn fail_in(
    tx: &mut Tx<'_>,
    trial_id: i64,
    reason: &str,
) -> Result<TrialRow, StorageError> {
    let row = finish(tx, trial_id, TrialState::Fail, None)?;
    upsert_trial_attr(
        tx,
        "trial_system_attributes",
        trial_id,
        FAIL_REASON_KEY,
        &JsonValue::from(reason),
    )?;
    Ok(row)
}

impl Storage {
    /// Stores one parameter: its internal value and distribution (see
    /// [`OptunaDistribution::to_internal`]). Fails if the value is outside the distribution,
    /// the name already has an incompatible distribution in this study, or it is already set.
    pub fn set_param(
        &mut self,
        trial_id: i64,
        name: &str,
        internal: f64,
        distribution: &OptunaDistribution,
    ) -> Result<(), StorageError> {
        self.write("set parameter", |tx| {
            let row = updatable(tx, trial_id)?;
            insert_param(tx, &row, name, internal, distribution)
        })
    }

    /// Stores several parameters in one transaction: all or none.
    pub fn set_params(
        &mut self,
        trial_id: i64,
        params: &[(String, f64, OptunaDistribution)],
    ) -> Result<(), StorageError> {
        self.write("set parameters", |tx| {
            let row = updatable(tx, trial_id)?;
            for (name, internal, distribution) in params {
                insert_param(tx, &row, name, *internal, distribution)?;
            }
            Ok(())
        })
    }

    /// Sets a new trial's parameters and the system attributes its sampler gave with them
    /// (`grid_id`, `search_space`, `fixed_params`) in one transaction: a crash between the two
    /// cannot leave a grid point's values without the `grid_id` that marks the point taken.
    pub fn set_params_with_attrs(
        &mut self,
        trial_id: i64,
        params: &[(String, f64, OptunaDistribution)],
        system_attrs: &[(String, JsonValue)],
    ) -> Result<(), StorageError> {
        self.write("set parameters", |tx| {
            let row = updatable(tx, trial_id)?;
            for (key, value) in system_attrs {
                upsert_trial_attr(tx, "trial_system_attributes", trial_id, key, value)?;
            }
            for (name, internal, distribution) in params {
                insert_param(tx, &row, name, *internal, distribution)?;
            }
            Ok(())
        })
    }

    /// Reports an intermediate value at `step` (a later report of the same step replaces it);
    /// NaN and ±inf are kept.
    pub fn report(&mut self, trial_id: i64, step: i64, value: f64) -> Result<(), StorageError> {
        self.write("report intermediate value", |tx| {
            updatable(tx, trial_id)?;
            upsert_intermediate(tx, trial_id, step, value)
        })
    }

    /// Sets (or replaces) a trial user attribute.
    pub fn set_trial_user_attr(
        &mut self,
        trial_id: i64,
        key: &str,
        value: &JsonValue,
    ) -> Result<(), StorageError> {
        self.write("set trial user attribute", |tx| {
            updatable(tx, trial_id)?;
            upsert_trial_attr(tx, "trial_user_attributes", trial_id, key, value)
        })
    }

    /// Sets (or replaces) trial user attributes, all or none: one transaction (a trial's
    /// summary of some thirty figures is one commit, not thirty).
    pub fn set_trial_user_attrs(
        &mut self,
        trial_id: i64,
        attrs: &[(String, JsonValue)],
    ) -> Result<(), StorageError> {
        self.write("set trial user attributes", |tx| {
            updatable(tx, trial_id)?;
            for (key, value) in attrs {
                upsert_trial_attr(tx, "trial_user_attributes", trial_id, key, value)?;
            }
            Ok(())
        })
    }

    /// Sets (or replaces) a trial system attribute.
    pub fn set_trial_system_attr(
        &mut self,
        trial_id: i64,
        key: &str,
        value: &JsonValue,
    ) -> Result<(), StorageError> {
        self.write("set trial system attribute", |tx| {
            updatable(tx, trial_id)?;
            upsert_trial_attr(tx, "trial_system_attributes", trial_id, key, value)
        })
    }

    /// Ends a trial: RUNNING → COMPLETE (one value per objective), PRUNED (values optional)
    /// or FAIL (no values); a WAITING trial may only be cancelled as FAIL.
    pub fn finish_trial(
        &mut self,
        trial_id: i64,
        state: TrialState,
        values: Option<&[f64]>,
    ) -> Result<(), StorageError> {
        self.write("finish trial", |tx| {
            finish(tx, trial_id, state, values).map(|_| ())
        })
    }

    /// RUNNING → COMPLETE with one value per objective.
    pub fn complete_trial(&mut self, trial_id: i64, values: &[f64]) -> Result<(), StorageError> {
        self.finish_trial(trial_id, TrialState::Complete, Some(values))
    }

    /// → FAIL, with the reason in the system attribute `fail_reason`, in one transaction.
    pub fn fail_trial(&mut self, trial_id: i64, reason: &str) -> Result<(), StorageError> {
        self.write("fail trial", |tx| fail_in(tx, trial_id, reason).map(|_| ()))
    }

    /// RUNNING → PRUNED. Like Optuna's `study.tell(trial, state=PRUNED)`, a single-objective
    /// trial keeps its last reported intermediate value (largest step) as its value unless it
    /// is NaN.
    pub fn prune_trial(&mut self, trial_id: i64) -> Result<(), StorageError> {
        self.write("prune trial", |tx| {
            let row = updatable(tx, trial_id)?;
            let n_objectives = require_study(tx, row.study_id)?;
            let last = tx
                .tx
                .query_opt(
                    "SELECT intermediate_value, intermediate_value_type FROM trial_intermediate_values \
                     WHERE trial_id = ?1 ORDER BY step DESC LIMIT 1",
                    args![trial_id],
                )
                .and_then(|r| r.map(|r| Ok((r.opt_f64(0)?, r.string(1)?))).transpose())
                .map_err(tx.err())?;
            let last = last.and_then(|(v, kind)| match kind.as_str() {
                "FINITE" => v,
                "INF_POS" => Some(f64::INFINITY),
                "INF_NEG" => Some(f64::NEG_INFINITY),
                _ => None,
            });
            let values = match last {
                Some(v) if n_objectives == 1 => Some(vec![v]),
                _ => None,
            };
            finish(tx, trial_id, TrialState::Pruned, values.as_deref()).map(|_| ())
        })
    }

    /// Records that the trial's worker is alive (the trial must be RUNNING).
    pub fn record_heartbeat(&mut self, trial_id: i64) -> Result<(), StorageError> {
        self.write("record heartbeat", |tx| {
            let row = updatable(tx, trial_id)?;
            if row.state != TrialState::Running {
                return Err(StorageError::InvalidTransition {
                    trial_id,
                    number: row.number,
                    from: row.state,
                    to: TrialState::Running,
                });
            }
            upsert_heartbeat(tx, trial_id)
        })
    }
}
