//! Study storage: SQLite or PostgreSQL in Optuna's own RDB schema.
//!
//! Every function that takes a storage location takes a SQLite file path or a
//! `postgresql://user[:password]@host[:port]/dbname` URL (see [`db::pg_url`]; passwords come
//! from the URL, `PGPASSWORD` or `~/.pgpass`, and are never printed: [`redact`]). On PostgreSQL
//! the schema is the one `optuna.storages.RDBStorage("postgresql://…")` creates.
//!
//! A TradeTune study file is an Optuna storage: `optuna.load_study(storage="sqlite:///FILE")`,
//! `study.trials_dataframe()` and optuna-dashboard read it, and TradeTune reads and writes files
//! that Optuna created (schema at alembic revision `v3.2.0.a`, Optuna 3.2–5.0). TradeTune's own
//! data lives in `tradetune_*` tables, which Optuna ignores.
//!
//! - [`Storage`]: one connection to a file; open one per worker thread or process.
//! - [`model`]: Optuna's model, defined once for the engine: [`OptunaDistribution`] (with the
//!   internal f64 ↔ external value conversions), [`ParamValue`], [`TrialState`],
//!   [`StudyDirection`]. Storage holds the codec to Optuna's forms (`distribution_json`, the
//!   state names); studies build search spaces from the same types.
//! - [`JsonValue`]: attribute values as Python's `json` writes them (NaN allowed).
//! - [`HeartbeatThread`]: keeps a running trial's heartbeat fresh; stale trials become FAIL.
//! - [`trials_csv`]: the same bytes as Optuna's `trials_dataframe().to_csv()`.
//!
//! ```no_run
//! use tradetune_storage::{OptunaDistribution, Storage, StudyDirection};
//! # fn main() -> Result<(), tradetune_storage::StorageError> {
//! let mut storage = Storage::open("studies.db")?;
//! let study = storage.create_study("ppo_btc", &[StudyDirection::Maximize])?;
//! let trial = storage.create_trial(study)?;
//! let lr = OptunaDistribution::float(1e-5, 1e-2, true, None).expect("valid range");
//! storage.set_param(trial.trial_id, "ppo.learning_rate", 3e-4, &lr)?;
//! storage.report(trial.trial_id, 0, 0.12)?;
//! storage.complete_trial(trial.trial_id, &[0.31])?;
//! # Ok(()) }
//! ```

mod csv_export;
mod datetime;
pub mod db;
mod distribution_json;
mod error;
mod heartbeat;
mod json_value;
pub mod model;
mod open;
mod optuna_schema;
mod python_repr;
mod read;
mod records;
mod study_write;
mod tradetune_schema;
mod tradetune_tables;
mod trial_create;
mod trial_write;
mod view_json;

pub use csv_export::trials_csv;
pub use datetime::{format_naive, now_utc, parse_naive, utc_to_local};
pub use db::pg_url::{is_postgres_url, redact, same_database};
pub use error::StorageError;
pub use heartbeat::HeartbeatThread;
pub use json_value::{JsonError, JsonValue};
pub use model::{
    CategoricalChoice, CategoricalDistribution, DistributionError, FloatDistribution,
    IntDistribution, OptunaDistribution, ParamValue, StudyDirection, TrialState,
};
pub use open::{DEFAULT_HEARTBEAT_INTERVAL, DEFAULT_STALE_AFTER, Storage, StorageOptions};
pub use optuna_schema::{
    ALEMBIC_VERSION, LIBRARY_VERSION, OPTUNA_DDL, OPTUNA_PG_DDL, OPTUNA_TABLES, SCHEMA_VERSION,
};
pub use python_repr::{float_repr, str_repr};
pub use records::{
    NewTrial, SetAside, StudyRecord, StudySummary, TrialHandle, TrialParam, TrialRecord,
    set_aside_notes,
};
pub use tradetune_tables::{
    APPLIED_CONFIG_KEY, CurvePoint, FoldReturn, RUN_ATTR_KEYS, RunMetadata,
    TRADETUNE_SCHEMA_VERSION, TelemetrySample,
};
pub use trial_create::FIXED_PARAMS_KEY;
pub use trial_write::{
    FAIL_REASON_KEY, INTERRUPTED_REASON, PRUNE_REASON_KEY, STOPPED_REASON, WORKER_LOST_REASON,
};
pub use view_json::{json_number, study_view_json, trial_view_json};
