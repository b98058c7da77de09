//! Optuna's RDB schema, created byte for byte as Optuna 5.0 creates it, and the checks that a
//! file is in that schema before TradeTune writes into it.
//!
//! The statements are the `sqlite_master.sql` texts of a storage created by Optuna 5.0.0 with
//! SQLAlchemy 2.1 (`../shared/optuna/optuna-reference.db`), in creation order, so a file
//! created by TradeTune has the same schema text as one created by Optuna (a test compares
//! them). Optuna then stamps `version_info` (schema 12) and alembic revision `v3.2.0.a`
//! (`storages/_rdb/storage.py`, `_VersionManager`); Optuna refuses to open a file whose alembic
//! revision is not its head, and TradeTune refuses to write into one that is not `v3.2.0.a`.

use super::db::{DbError, Dialect, Txn, args};

/// The alembic revision of Optuna 5.0's RDB schema (the head since Optuna 3.2).
pub const ALEMBIC_VERSION: &str = "v3.2.0.a";

/// `optuna.storages._rdb.models.SCHEMA_VERSION` ("don't modify this version number anymore").
pub const SCHEMA_VERSION: i64 = 12;

/// `version_info.library_version`: the Optuna release whose schema is written, with a PEP 440
/// local label saying TradeTune wrote it (Optuna only prints this field in error messages).
pub const LIBRARY_VERSION: &str = concat!("5.0.0+tradetune.", env!("CARGO_PKG_VERSION"));

/// Tables an Optuna RDB storage must have.
pub const OPTUNA_TABLES: [&str; 12] = [
    "studies",
    "version_info",
    "study_directions",
    "study_user_attributes",
    "study_system_attributes",
    "trials",
    "trial_user_attributes",
    "trial_system_attributes",
    "trial_params",
    "trial_values",
    "trial_intermediate_values",
    "trial_heartbeats",
];

/// The DDL, in Optuna's creation order (tables, then their explicit indices; the UNIQUE
/// constraints make SQLite's own `sqlite_autoindex_*` indices).
pub const OPTUNA_DDL: [&str; 15] = [
    // table studies
    r#"CREATE TABLE studies (
	study_id INTEGER NOT NULL, 
	study_name VARCHAR(512) NOT NULL, 
	PRIMARY KEY (study_id)
)"#,
    // index ix_studies_study_name
    r#"CREATE UNIQUE INDEX ix_studies_study_name ON studies (study_name)"#,
    // table version_info
    r#"CREATE TABLE version_info (
	version_info_id INTEGER NOT NULL, 
	schema_version INTEGER, 
	library_version VARCHAR(256), 
	PRIMARY KEY (version_info_id), 
	CHECK (version_info_id=1)
)"#,
    // table study_directions
    r#"CREATE TABLE study_directions (
	study_direction_id INTEGER NOT NULL, 
	direction VARCHAR(8) NOT NULL, 
	study_id INTEGER NOT NULL, 
	objective INTEGER NOT NULL, 
	PRIMARY KEY (study_direction_id), 
	UNIQUE (study_id, objective), 
	FOREIGN KEY(study_id) REFERENCES studies (study_id)
)"#,
    // table study_user_attributes
    r#"CREATE TABLE study_user_attributes (
	study_user_attribute_id INTEGER NOT NULL, 
	study_id INTEGER, 
	"key" VARCHAR(512), 
	value_json TEXT, 
	PRIMARY KEY (study_user_attribute_id), 
	UNIQUE (study_id, "key"), 
	FOREIGN KEY(study_id) REFERENCES studies (study_id)
)"#,
    // table study_system_attributes
    r#"CREATE TABLE study_system_attributes (
	study_system_attribute_id INTEGER NOT NULL, 
	study_id INTEGER, 
	"key" VARCHAR(512), 
	value_json TEXT, 
	PRIMARY KEY (study_system_attribute_id), 
	UNIQUE (study_id, "key"), 
	FOREIGN KEY(study_id) REFERENCES studies (study_id)
)"#,
    // table trials
    r#"CREATE TABLE trials (
	trial_id INTEGER NOT NULL, 
	number INTEGER, 
	study_id INTEGER, 
	state VARCHAR(8) NOT NULL, 
	datetime_start DATETIME, 
	datetime_complete DATETIME, 
	PRIMARY KEY (trial_id), 
	FOREIGN KEY(study_id) REFERENCES studies (study_id)
)"#,
    // index ix_trials_study_id
    r#"CREATE INDEX ix_trials_study_id ON trials (study_id)"#,
    // table trial_user_attributes
    r#"CREATE TABLE trial_user_attributes (
	trial_user_attribute_id INTEGER NOT NULL, 
	trial_id INTEGER, 
	"key" VARCHAR(512), 
	value_json TEXT, 
	PRIMARY KEY (trial_user_attribute_id), 
	UNIQUE (trial_id, "key"), 
	FOREIGN KEY(trial_id) REFERENCES trials (trial_id)
)"#,
    // table trial_system_attributes
    r#"CREATE TABLE trial_system_attributes (
	trial_system_attribute_id INTEGER NOT NULL, 
	trial_id INTEGER, 
	"key" VARCHAR(512), 
	value_json TEXT, 
	PRIMARY KEY (trial_system_attribute_id), 
	UNIQUE (trial_id, "key"), 
	FOREIGN KEY(trial_id) REFERENCES trials (trial_id)
)"#,
    // table trial_params
    r#"CREATE TABLE trial_params (
	param_id INTEGER NOT NULL, 
	trial_id INTEGER, 
	param_name VARCHAR(512), 
	param_value FLOAT, 
	distribution_json TEXT, 
	PRIMARY KEY (param_id), 
	UNIQUE (trial_id, param_name), 
	FOREIGN KEY(trial_id) REFERENCES trials (trial_id)
)"#,
    // table trial_values
    r#"CREATE TABLE trial_values (
	trial_value_id INTEGER NOT NULL, 
	trial_id INTEGER NOT NULL, 
	objective INTEGER NOT NULL, 
	value FLOAT, 
	value_type VARCHAR(7) NOT NULL, 
	PRIMARY KEY (trial_value_id), 
	UNIQUE (trial_id, objective), 
	FOREIGN KEY(trial_id) REFERENCES trials (trial_id)
)"#,
    // table trial_intermediate_values
    r#"CREATE TABLE trial_intermediate_values (
	trial_intermediate_value_id INTEGER NOT NULL, 
	trial_id INTEGER NOT NULL, 
	step INTEGER NOT NULL, 
	intermediate_value FLOAT, 
	intermediate_value_type VARCHAR(7) NOT NULL, 
	PRIMARY KEY (trial_intermediate_value_id), 
	UNIQUE (trial_id, step), 
	FOREIGN KEY(trial_id) REFERENCES trials (trial_id)
)"#,
    // table trial_heartbeats
    r#"CREATE TABLE trial_heartbeats (
	trial_heartbeat_id INTEGER NOT NULL, 
	trial_id INTEGER NOT NULL, 
	heartbeat DATETIME NOT NULL, 
	PRIMARY KEY (trial_heartbeat_id), 
	UNIQUE (trial_id), 
	FOREIGN KEY(trial_id) REFERENCES trials (trial_id)
)"#,
    // table alembic_version
    r#"CREATE TABLE alembic_version (
	version_num VARCHAR(32) NOT NULL, 
	CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num)
)"#,
];

/// The same schema on PostgreSQL, as SQLAlchemy 2.1 emits it for Optuna 5.0's models (enum types
/// first, `SERIAL` ids, `FLOAT(53)` = `DOUBLE PRECISION`, `TIMESTAMP WITHOUT TIME ZONE`), then
/// alembic's version table. `engine/tests/storage_postgres.rs` compares `pg_dump --schema-only`
/// of a database created this way with one created by `optuna.storages.RDBStorage`.
pub const OPTUNA_PG_DDL: [&str; 19] = [
    "CREATE TYPE studydirection AS ENUM ('NOT_SET', 'MINIMIZE', 'MAXIMIZE')",
    "CREATE TYPE trialstate AS ENUM ('RUNNING', 'COMPLETE', 'PRUNED', 'FAIL', 'WAITING')",
    "CREATE TYPE trialvaluetype AS ENUM ('FINITE', 'INF_POS', 'INF_NEG')",
    "CREATE TYPE trialintermediatevaluetype AS ENUM ('FINITE', 'INF_POS', 'INF_NEG', 'NAN')",
    "CREATE TABLE studies (study_id SERIAL NOT NULL, study_name VARCHAR(512) NOT NULL, \
     PRIMARY KEY (study_id))",
    "CREATE UNIQUE INDEX ix_studies_study_name ON studies (study_name)",
    "CREATE TABLE version_info (version_info_id INTEGER NOT NULL, schema_version INTEGER, \
     library_version VARCHAR(256), PRIMARY KEY (version_info_id), CHECK (version_info_id=1))",
    "CREATE TABLE study_directions (study_direction_id SERIAL NOT NULL, direction studydirection \
     NOT NULL, study_id INTEGER NOT NULL, objective INTEGER NOT NULL, PRIMARY KEY \
     (study_direction_id), UNIQUE (study_id, objective), FOREIGN KEY(study_id) REFERENCES studies \
     (study_id))",
    "CREATE TABLE study_system_attributes (study_system_attribute_id SERIAL NOT NULL, study_id \
     INTEGER, key VARCHAR(512), value_json TEXT, PRIMARY KEY (study_system_attribute_id), UNIQUE \
     (study_id, key), FOREIGN KEY(study_id) REFERENCES studies (study_id))",
    "CREATE TABLE study_user_attributes (study_user_attribute_id SERIAL NOT NULL, study_id \
     INTEGER, key VARCHAR(512), value_json TEXT, PRIMARY KEY (study_user_attribute_id), UNIQUE \
     (study_id, key), FOREIGN KEY(study_id) REFERENCES studies (study_id))",
    "CREATE TABLE trials (trial_id SERIAL NOT NULL, number INTEGER, study_id INTEGER, state \
     trialstate NOT NULL, datetime_start TIMESTAMP WITHOUT TIME ZONE, datetime_complete TIMESTAMP \
     WITHOUT TIME ZONE, PRIMARY KEY (trial_id), FOREIGN KEY(study_id) REFERENCES studies \
     (study_id))",
    "CREATE INDEX ix_trials_study_id ON trials (study_id)",
    "CREATE TABLE trial_heartbeats (trial_heartbeat_id SERIAL NOT NULL, trial_id INTEGER NOT \
     NULL, heartbeat TIMESTAMP WITHOUT TIME ZONE NOT NULL, PRIMARY KEY (trial_heartbeat_id), \
     UNIQUE (trial_id), FOREIGN KEY(trial_id) REFERENCES trials (trial_id))",
    "CREATE TABLE trial_intermediate_values (trial_intermediate_value_id SERIAL NOT NULL, \
     trial_id INTEGER NOT NULL, step INTEGER NOT NULL, intermediate_value FLOAT(53), \
     intermediate_value_type trialintermediatevaluetype NOT NULL, PRIMARY KEY \
     (trial_intermediate_value_id), UNIQUE (trial_id, step), FOREIGN KEY(trial_id) REFERENCES \
     trials (trial_id))",
    "CREATE TABLE trial_params (param_id SERIAL NOT NULL, trial_id INTEGER, param_name \
     VARCHAR(512), param_value FLOAT(53), distribution_json TEXT, PRIMARY KEY (param_id), UNIQUE \
     (trial_id, param_name), FOREIGN KEY(trial_id) REFERENCES trials (trial_id))",
    "CREATE TABLE trial_system_attributes (trial_system_attribute_id SERIAL NOT NULL, trial_id \
     INTEGER, key VARCHAR(512), value_json TEXT, PRIMARY KEY (trial_system_attribute_id), UNIQUE \
     (trial_id, key), FOREIGN KEY(trial_id) REFERENCES trials (trial_id))",
    "CREATE TABLE trial_user_attributes (trial_user_attribute_id SERIAL NOT NULL, trial_id \
     INTEGER, key VARCHAR(512), value_json TEXT, PRIMARY KEY (trial_user_attribute_id), UNIQUE \
     (trial_id, key), FOREIGN KEY(trial_id) REFERENCES trials (trial_id))",
    "CREATE TABLE trial_values (trial_value_id SERIAL NOT NULL, trial_id INTEGER NOT NULL, \
     objective INTEGER NOT NULL, value FLOAT(53), value_type trialvaluetype NOT NULL, PRIMARY KEY \
     (trial_value_id), UNIQUE (trial_id, objective), FOREIGN KEY(trial_id) REFERENCES trials \
     (trial_id))",
    "CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL, CONSTRAINT \
     alembic_version_pkc PRIMARY KEY (version_num))",
];

/// Creates Optuna's tables and stamps the versions, inside the caller's transaction.
pub(crate) fn create_optuna_schema(tx: &mut Txn<'_>) -> Result<(), DbError> {
    let ddl: &[&str] = match tx.dialect() {
        Dialect::Sqlite => &OPTUNA_DDL,
        Dialect::Postgres => &OPTUNA_PG_DDL,
    };
    for statement in ddl {
        tx.execute(statement, &[])?;
    }
    tx.execute(
        "INSERT INTO version_info (version_info_id, schema_version, library_version) VALUES (1, ?1, ?2)",
        args![SCHEMA_VERSION, LIBRARY_VERSION],
    )?;
    tx.execute(
        "INSERT INTO alembic_version (version_num) VALUES (?1)",
        args![ALEMBIC_VERSION],
    )?;
    Ok(())
}
