//! Creating studies and setting study attributes.

use super::db::{DbError, args};
use super::error::StorageError;
use super::json_value::JsonValue;
use super::model::StudyDirection;
use super::open::{Storage, Tx};

impl Storage {
    /// Creates a study with one direction per objective; the name must be new in this file.
    pub fn create_study(
        &mut self,
        name: &str,
        directions: &[StudyDirection],
    ) -> Result<i64, StorageError> {
        self.create_study_with(name, directions, &[])
    }

    /// Creates a study with one direction per objective and its system attributes in one
    /// transaction: a process killed meanwhile leaves no study rather than one without them.
    /// The name must be new in this file.
    pub fn create_study_with(
        &mut self,
        name: &str,
        directions: &[StudyDirection],
        system_attrs: &[(&str, JsonValue)],
    ) -> Result<i64, StorageError> {
        if directions.is_empty() {
            return Err(StorageError::NoDirections);
        }
        self.write("create study", |tx| {
            let err = tx.err();
            let inserted = tx.tx.query_opt(
                "INSERT INTO studies (study_name) VALUES (?1) RETURNING study_id",
                args![name],
            );
            let study_id = match inserted {
                Ok(Some(row)) => row.i64(0).map_err(&err)?,
                Ok(None) => return Err(err(DbError::Type { column: 0, expected: "the new study's id", found: "no row".into() })),
                Err(e) if e.is_constraint() => return Err(StorageError::DuplicateStudy(name.to_owned())),
                Err(e) => return Err(err(e)),
            };
            for (objective, d) in directions.iter().enumerate() {
                tx.tx
                    .execute(
                        "INSERT INTO study_directions (direction, study_id, objective) VALUES (?1, ?2, ?3)",
                        args![d.as_str(), study_id, objective as i64],
                    )
                    .map_err(&err)?;
            }
            for (key, value) in system_attrs {
                upsert_study_attr(tx, "study_system_attributes", study_id, key, value)?;
            }
            Ok(study_id)
        })
    }

    /// Deletes a study with its trials and everything that refers to them (Optuna's
    /// `delete_study`, and TradeTune's own rows of those trials), in one transaction.
    pub fn delete_study(&mut self, study_id: i64) -> Result<(), StorageError> {
        self.write("delete study", |tx| {
            require_study(tx, study_id)?;
            let err = tx.err();
            for table in TRIAL_CHILDREN {
                tx.tx
                    .execute(
                        &format!(
                            "DELETE FROM {table} WHERE trial_id IN \
                             (SELECT trial_id FROM trials WHERE study_id = ?1)"
                        ),
                        args![study_id],
                    )
                    .map_err(&err)?;
            }
            for table in STUDY_CHILDREN {
                tx.tx
                    .execute(
                        &format!("DELETE FROM {table} WHERE study_id = ?1"),
                        args![study_id],
                    )
                    .map_err(&err)?;
            }
            Ok(())
        })
    }

    /// Sets (or replaces) a study user attribute.
    pub fn set_study_user_attr(
        &mut self,
        study_id: i64,
        key: &str,
        value: &JsonValue,
    ) -> Result<(), StorageError> {
        self.write("set study user attribute", |tx| {
            upsert_study_attr(tx, "study_user_attributes", study_id, key, value)
        })
    }

    /// Sets (or replaces) a study system attribute.
    pub fn set_study_system_attr(
        &mut self,
        study_id: i64,
        key: &str,
        value: &JsonValue,
    ) -> Result<(), StorageError> {
        self.set_study_system_attrs(study_id, &[(key, value.clone())])
    }

    /// Sets (or replaces) study system attributes, all or none: one transaction.
    pub fn set_study_system_attrs(
        &mut self,
        study_id: i64,
        attrs: &[(&str, JsonValue)],
    ) -> Result<(), StorageError> {
        self.write("set study system attributes", |tx| {
            for (key, value) in attrs {
                upsert_study_attr(tx, "study_system_attributes", study_id, key, value)?;
            }
            Ok(())
        })
    }
}

/// Tables whose rows belong to a trial, deleted before the trials themselves.
const TRIAL_CHILDREN: [&str; 10] = [
    "trial_user_attributes",
    "trial_system_attributes",
    "trial_params",
    "trial_values",
    "trial_intermediate_values",
    "trial_heartbeats",
    "tradetune_runs",
    "tradetune_learning_curves",
    "tradetune_telemetry",
    "tradetune_fold_returns",
];

/// Tables whose rows belong to a study, in the order they are deleted (the study last).
const STUDY_CHILDREN: [&str; 5] = [
    "trials",
    "study_directions",
    "study_user_attributes",
    "study_system_attributes",
    "studies",
];

/// Fails with [`StorageError::UnknownStudy`] unless the study exists.
pub(super) fn require_study(tx: &mut Tx<'_>, study_id: i64) -> Result<usize, StorageError> {
    let n = tx
        .tx
        .query_opt(
            "SELECT (SELECT COUNT(*) FROM study_directions WHERE study_id = ?1) FROM studies WHERE study_id = ?1",
            args![study_id],
        )
        .and_then(|r| r.map(|r| r.i64(0)).transpose())
        .map_err(tx.err())?;
    n.map(|n| n as usize)
        .ok_or(StorageError::UnknownStudy(study_id))
}

fn upsert_study_attr(
    tx: &mut Tx<'_>,
    table: &'static str,
    study_id: i64,
    key: &str,
    value: &JsonValue,
) -> Result<(), StorageError> {
    require_study(tx, study_id)?;
    let sql = format!(
        "INSERT INTO {table} (study_id, key, value_json) VALUES (?1, ?2, ?3) \
         ON CONFLICT (study_id, key) DO UPDATE SET value_json = excluded.value_json"
    );
    tx.tx
        .execute(&sql, args![study_id, key, value.dumps()])
        .map_err(tx.err())?;
    Ok(())
}
