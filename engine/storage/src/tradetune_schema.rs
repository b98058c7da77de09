//! The `tradetune_*` tables' schema and its version: created or checked when a database is
//! opened (`sqlite.rs`), read and written by `tradetune_tables.rs`. A leaf: it knows the
//! connection's transaction, not the `Storage` built on it.

use super::db::{Dialect, Txn, args};
use super::error::{StorageError, sql_err};

/// Version of the `tradetune_*` tables below. A table added later (`tradetune_fold_returns`) is
/// created on the next writable open and read as empty where it is missing, and a column added
/// later (`tradetune_fold_returns.benchmark`) is added on the next writable open and read as
/// NULL where it is missing, so neither needs a new version.
pub const TRADETUNE_SCHEMA_VERSION: i64 = 1;

/// The tables on SQLite. A trigger deletes a trial's rows of them with the trial: Optuna's
/// `delete_study` (and optuna-dashboard's) deletes trials knowing only its own tables, on a
/// connection that does not enforce foreign keys, and SQLite gives a deleted trial's id to the
/// next trial created, which would inherit the deleted one's curves and fold returns.
const DDL: &str = "
CREATE TABLE IF NOT EXISTS tradetune_version (
    version_id INTEGER NOT NULL PRIMARY KEY CHECK (version_id = 1),
    schema_version INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS tradetune_runs (
    trial_id INTEGER NOT NULL PRIMARY KEY REFERENCES trials (trial_id),
    worker TEXT,
    device TEXT NOT NULL,
    backend TEXT NOT NULL,
    precision TEXT NOT NULL,
    config_json TEXT NOT NULL,
    recorded_at DATETIME NOT NULL
);
CREATE TABLE IF NOT EXISTS tradetune_learning_curves (
    trial_id INTEGER NOT NULL REFERENCES trials (trial_id),
    metric TEXT NOT NULL,
    update_index INTEGER NOT NULL,
    env_steps INTEGER NOT NULL,
    value FLOAT,
    PRIMARY KEY (trial_id, metric, update_index)
);
CREATE TABLE IF NOT EXISTS tradetune_telemetry (
    sample_id INTEGER NOT NULL PRIMARY KEY,
    trial_id INTEGER REFERENCES trials (trial_id),
    recorded_at DATETIME NOT NULL,
    source TEXT NOT NULL,
    metric TEXT NOT NULL,
    value FLOAT
);
CREATE INDEX IF NOT EXISTS ix_tradetune_telemetry_trial_id ON tradetune_telemetry (trial_id);
CREATE TABLE IF NOT EXISTS tradetune_fold_returns (
    trial_id INTEGER NOT NULL REFERENCES trials (trial_id),
    fold INTEGER NOT NULL,
    bar_index INTEGER NOT NULL,
    bar_time INTEGER NOT NULL,
    value FLOAT,
    benchmark FLOAT,
    PRIMARY KEY (trial_id, fold, bar_index)
);
CREATE TRIGGER IF NOT EXISTS tradetune_trial_deleted AFTER DELETE ON trials
BEGIN
    DELETE FROM tradetune_runs WHERE trial_id = OLD.trial_id;
    DELETE FROM tradetune_learning_curves WHERE trial_id = OLD.trial_id;
    DELETE FROM tradetune_telemetry WHERE trial_id = OLD.trial_id;
    DELETE FROM tradetune_fold_returns WHERE trial_id = OLD.trial_id;
END;
";

/// Rows of trials that are gone, which a study deleted before the trigger existed left
/// (deleted once, when the trigger is made).
const ORPHANS: &str = "
DELETE FROM tradetune_runs WHERE trial_id NOT IN (SELECT trial_id FROM trials);
DELETE FROM tradetune_learning_curves WHERE trial_id NOT IN (SELECT trial_id FROM trials);
DELETE FROM tradetune_telemetry WHERE trial_id IS NOT NULL AND trial_id NOT IN (SELECT trial_id FROM trials);
DELETE FROM tradetune_fold_returns WHERE trial_id NOT IN (SELECT trial_id FROM trials);
";

/// The same tables on PostgreSQL: `TIMESTAMP` for datetimes, `DOUBLE PRECISION` for values,
/// `BIGINT` counters, a `BIGSERIAL` sample id; `"precision"` quoted (a type keyword). Their
/// rows go with their trial (`ON DELETE CASCADE`): Optuna's `delete_study` (and
/// optuna-dashboard's) deletes trials knowing only its own tables, which PostgreSQL would refuse
/// over these references.
const PG_DDL: &str = "
CREATE TABLE IF NOT EXISTS tradetune_version (
    version_id INTEGER NOT NULL PRIMARY KEY CHECK (version_id = 1),
    schema_version INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS tradetune_runs (
    trial_id INTEGER NOT NULL PRIMARY KEY REFERENCES trials (trial_id) ON DELETE CASCADE,
    worker TEXT,
    device TEXT NOT NULL,
    backend TEXT NOT NULL,
    \"precision\" TEXT NOT NULL,
    config_json TEXT NOT NULL,
    recorded_at TIMESTAMP NOT NULL
);
CREATE TABLE IF NOT EXISTS tradetune_learning_curves (
    trial_id INTEGER NOT NULL REFERENCES trials (trial_id) ON DELETE CASCADE,
    metric TEXT NOT NULL,
    update_index BIGINT NOT NULL,
    env_steps BIGINT NOT NULL,
    value DOUBLE PRECISION,
    PRIMARY KEY (trial_id, metric, update_index)
);
CREATE TABLE IF NOT EXISTS tradetune_telemetry (
    sample_id BIGSERIAL PRIMARY KEY,
    trial_id INTEGER REFERENCES trials (trial_id) ON DELETE CASCADE,
    recorded_at TIMESTAMP NOT NULL,
    source TEXT NOT NULL,
    metric TEXT NOT NULL,
    value DOUBLE PRECISION
);
CREATE INDEX IF NOT EXISTS ix_tradetune_telemetry_trial_id ON tradetune_telemetry (trial_id);
CREATE TABLE IF NOT EXISTS tradetune_fold_returns (
    trial_id INTEGER NOT NULL REFERENCES trials (trial_id) ON DELETE CASCADE,
    fold INTEGER NOT NULL,
    bar_index INTEGER NOT NULL,
    bar_time BIGINT NOT NULL,
    value DOUBLE PRECISION,
    benchmark DOUBLE PRECISION,
    PRIMARY KEY (trial_id, fold, bar_index)
);
";

/// User attribute keys that mirror the run metadata, so Optuna's tools show where a trial ran.
pub const RUN_ATTR_KEYS: [&str; 4] = ["worker", "device", "backend", "precision"];

/// System attribute holding the applied configuration (JSON) of a trial.
pub const APPLIED_CONFIG_KEY: &str = "applied_config";

/// Creates the tables if missing and checks their version, inside the caller's transaction.
pub(super) fn create_or_check(tx: &mut Txn<'_>, path: &str) -> Result<(), StorageError> {
    let err = sql_err(path, "create tradetune tables");
    let ddl = match tx.dialect() {
        Dialect::Sqlite => DDL,
        Dialect::Postgres => PG_DDL,
    };
    // Before the trigger exists: whether this open creates it, and so must first clear the
    // rows deletions before it left (an id SQLite gives again would inherit them).
    let new_trigger = tx.dialect() == Dialect::Sqlite
        && tx
            .query_opt(
                "SELECT 1 FROM sqlite_master WHERE type = 'trigger' AND name = 'tradetune_trial_deleted'",
                &[],
            )
            .map_err(&err)?
            .is_none();
    tx.batch(ddl).map_err(&err)?;
    // Fold returns stored before their benchmark was: the column is added (once; asked
    // first, since PostgreSQL locks the whole table for an ALTER even where it has nothing
    // to do).
    let has_benchmark = tx
        .query_opt(
            has_column_sql(tx.dialect()),
            args!["tradetune_fold_returns", "benchmark"],
        )
        .and_then(|r| r.map(|r| r.bool(0)).transpose())
        .map_err(&err)?
        .unwrap_or(false);
    if !has_benchmark {
        tx.batch(match tx.dialect() {
            Dialect::Sqlite => "ALTER TABLE tradetune_fold_returns ADD COLUMN benchmark FLOAT",
            Dialect::Postgres => {
                "ALTER TABLE tradetune_fold_returns ADD COLUMN benchmark DOUBLE PRECISION"
            }
        })
        .map_err(&err)?;
    }
    if new_trigger {
        tx.batch(ORPHANS).map_err(&err)?;
    }
    if tx.dialect() == Dialect::Postgres {
        cascade_trial_references(tx).map_err(&err)?;
    }
    let row = tx
        .query_opt(
            "SELECT schema_version FROM tradetune_version WHERE version_id = 1",
            &[],
        )
        .map_err(&err)?;
    // A version that is not a whole number (text, a float), or one below 1 (every
    // TradeTune wrote 1 or more), is damage, not a newer TradeTune's file.
    let corrupt = |message: String| StorageError::Corrupt {
        path: path.to_owned(),
        table: "tradetune_version",
        row_id: 1,
        column: "schema_version",
        message,
    };
    let found = row
        .map(|r| {
            r.i64(0).map_err(|e| {
                corrupt(format!(
                    "not a whole-number version ({e}); TradeTune writes {TRADETUNE_SCHEMA_VERSION}"
                ))
            })
        })
        .transpose()?;
    match found {
        None => {
            tx.execute(
                "INSERT INTO tradetune_version (version_id, schema_version) VALUES (1, ?1)",
                args![TRADETUNE_SCHEMA_VERSION],
            )
            .map_err(&err)?;
            Ok(())
        }
        Some(v) if v == TRADETUNE_SCHEMA_VERSION => Ok(()),
        Some(v) if v < 1 => Err(corrupt(format!(
            "version {v} is not one TradeTune writes (they count from 1; this one writes \
             {TRADETUNE_SCHEMA_VERSION})"
        ))),
        Some(v) => Err(StorageError::NewerSchema {
            path: path.to_owned(),
            found: format!("tradetune_version {v}"),
            expected: "tradetune_version 1",
            made_by: "TradeTune",
        }),
    }
}

/// SQL answering (one row, one bool) whether table `?1` has column `?2`.
pub(super) fn has_column_sql(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::Sqlite => "SELECT EXISTS (SELECT 1 FROM pragma_table_info(?1) WHERE name = ?2)",
        Dialect::Postgres => {
            "SELECT EXISTS (SELECT 1 FROM information_schema.columns \
             WHERE table_schema = current_schema() AND table_name = ?1 AND column_name = ?2)"
        }
    }
}

/// The `FROM … WHERE` of the references to `trials` that do not cascade yet.
const STALE_REFERENCES: &str = "FROM pg_constraint c \
     WHERE c.contype = 'f' AND c.confrelid = 'trials'::regclass \
     AND c.conrelid::regclass::text LIKE 'tradetune%' AND c.confdeltype <> 'c'";

/// Whether a PostgreSQL database already holds Optuna's schema at `alembic` (`?1`) and every
/// `tradetune_*` table, index, column and cascading reference this TradeTune makes, at its
/// version: one query (one snapshot) of the catalogue and the two version rows, answering one
/// bool. An open that finds them so takes no lock and runs no DDL: `CREATE INDEX IF NOT EXISTS`
/// takes a SHARE lock on `tradetune_telemetry` even where the index exists, which waits for
/// every worker's telemetry write in flight (and holds up the next), and the schema's advisory
/// lock makes every other worker's open wait behind it. A database missing any of them (or
/// where the query fails: no such table) is created or checked under the lock, as before.
pub(super) fn pg_current_sql() -> String {
    format!(
        "SELECT (SELECT version_num FROM alembic_version) = ?1 \
         AND (SELECT schema_version FROM tradetune_version WHERE version_id = 1) = {TRADETUNE_SCHEMA_VERSION} \
         AND (SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
              WHERE n.nspname = current_schema() AND c.relname IN ('tradetune_version', \
              'tradetune_runs', 'tradetune_learning_curves', 'tradetune_telemetry', \
              'tradetune_fold_returns', 'ix_tradetune_telemetry_trial_id')) = 6 \
         AND EXISTS (SELECT 1 FROM information_schema.columns \
              WHERE table_schema = current_schema() AND table_name = 'tradetune_fold_returns' \
              AND column_name = 'benchmark') \
         AND NOT EXISTS (SELECT 1 {STALE_REFERENCES})"
    )
}

/// Databases whose `tradetune_*` tables were made before their references to `trials` cascaded:
/// each such reference is made again with `ON DELETE CASCADE` (once; a database made since has
/// them already and this only reads the catalogue).
fn cascade_trial_references(tx: &mut Txn<'_>) -> Result<(), super::db::DbError> {
    let stale = tx.query(
        &format!("SELECT c.conname::text, c.conrelid::regclass::text {STALE_REFERENCES}"),
        &[],
    )?;
    let stale: Vec<(String, String)> = stale
        .iter()
        .map(|r| Ok((r.string(0)?, r.string(1)?)))
        .collect::<Result<_, super::db::DbError>>()?;
    for (name, table) in stale {
        tx.batch(&format!(
            "ALTER TABLE {table} DROP CONSTRAINT \"{name}\", ADD CONSTRAINT \"{name}\" \
             FOREIGN KEY (trial_id) REFERENCES trials (trial_id) ON DELETE CASCADE"
        ))?;
    }
    Ok(())
}
