//! What can go wrong in the storage, worded so the user knows which study, trial or field.

use super::db::DbError;
use super::json_value::JsonError;
use super::model::DistributionError;
use super::model::TrialState;

/// Errors of the Optuna-schema storage (a SQLite file or a PostgreSQL database). Every variant
/// leaves the database unchanged: a write either commits whole or rolls back.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// The engine's reason is in the message (not a `source()`), so a report of the error chain
    /// (`{:#}`) does not say it twice.
    #[error("storage {path}: {action}: {cause}")]
    Database {
        path: String,
        action: &'static str,
        cause: DbError,
    },
    #[error(
        "storage {path}: not an Optuna storage (it has tables but no `{missing}` table); \
         TradeTune writes only into empty databases or Optuna RDB storages"
    )]
    NotOptunaSchema { path: String, missing: String },
    /// A database without any table, opened to read: it holds no study yet.
    #[error(
        "storage {path}: an empty database, with no studies yet (`tradetune study run` or \
         `tradetune study create` makes one in it)"
    )]
    EmptyDatabase { path: String },
    #[error(
        "storage {path}: Optuna schema version `{found}`, but TradeTune writes only `{expected}`; \
         TradeTune never migrates — upgrade it with `optuna storage upgrade --storage {url}` \
         (or use a copy) and retry"
    )]
    SchemaVersion {
        path: String,
        /// The storage as Optuna's command line names it.
        url: String,
        found: String,
        expected: &'static str,
    },
    /// A storage made by a newer Optuna (an alembic revision after the one TradeTune writes,
    /// or one it does not know) or a newer TradeTune (`tradetune_version` above its own):
    /// upgrading cannot help.
    #[error(
        "storage {path}: schema version `{found}` is newer than this TradeTune's (`{expected}`): \
         it was made by a newer {made_by}; use a TradeTune made for it, or read it here \
         (`tradetune study list`/`show` open it read-only)"
    )]
    NewerSchema {
        path: String,
        found: String,
        expected: &'static str,
        /// "Optuna" or "TradeTune".
        made_by: &'static str,
    },
    #[error("storage {location}: {message}")]
    BadLocation { location: String, message: String },
    #[error("storage {path}: opened read-only; {action} needs a writable storage")]
    ReadOnly { path: String, action: &'static str },
    #[error("a study needs at least one direction")]
    NoDirections,
    #[error("a study named `{0}` already exists; pick another name or load it")]
    DuplicateStudy(String),
    #[error("no study named `{name}` (studies: {known})")]
    UnknownStudyName { name: String, known: String },
    #[error("no study with id {0}")]
    UnknownStudy(i64),
    #[error("no trial with id {0}")]
    UnknownTrial(i64),
    #[error(
        "trial #{number} (id {trial_id}) is {state} and cannot be updated: finished trials are \
         never modified"
    )]
    TrialFinished {
        trial_id: i64,
        number: i64,
        state: TrialState,
    },
    #[error("trial #{number} (id {trial_id}): cannot go from {from} to {to}")]
    InvalidTransition {
        trial_id: i64,
        number: i64,
        from: TrialState,
        to: TrialState,
    },
    #[error("trial #{number}: {given} objective value(s) given, but the study has {expected}")]
    WrongValueCount {
        number: i64,
        given: usize,
        expected: usize,
    },
    #[error(
        "trial #{number}: objective value {objective} is NaN; a NaN objective is a failed trial \
         (Optuna marks it FAIL), finish it with state FAIL instead"
    )]
    NanObjective { number: i64, objective: usize },
    #[error(
        "trial #{number}: parameter `{name}` is already set; a trial's parameters are fixed once set"
    )]
    ParamAlreadySet { number: i64, name: String },
    #[error(
        "trial #{number}: parameter `{name}`: internal value {value} is outside {distribution}"
    )]
    ParamOutOfRange {
        number: i64,
        name: String,
        value: f64,
        distribution: String,
    },
    #[error(
        "trial #{number}: parameter `{name}`: {distribution} is incompatible with {existing} \
         stored for the same name earlier in this study: {reason}"
    )]
    IncompatibleDistribution {
        number: i64,
        name: String,
        distribution: String,
        existing: String,
        reason: String,
    },
    #[error("parameter `{name}`: {source}")]
    Distribution {
        name: String,
        #[source]
        source: DistributionError,
    },
    #[error("storage {path}: table {table}, row {row_id}, column {column}: {message}")]
    Corrupt {
        path: String,
        table: &'static str,
        row_id: i64,
        column: &'static str,
        message: String,
    },
    #[error("{what}: {source}")]
    Json {
        what: String,
        #[source]
        source: JsonError,
    },
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

impl StorageError {
    /// Whether the database server could not be reached or closed the connection (a
    /// restart, a network cut, an administrator ending the session): no fault of the
    /// statement or of the data, and worth trying again.
    pub fn is_connection(&self) -> bool {
        match self {
            StorageError::Database {
                cause: DbError::Connect(_),
                ..
            } => true,
            StorageError::Database {
                cause: DbError::Postgres(e),
                ..
            } => super::db::postgres::connection_lost(e),
            _ => false,
        }
    }
}

/// Maps a database error to [`StorageError::Database`] naming the storage and the action.
pub(super) fn sql_err<E: Into<DbError>>(
    path: &str,
    action: &'static str,
) -> impl Fn(E) -> StorageError + use<E> {
    let path = path.to_owned();
    move |source| StorageError::Database {
        path: path.clone(),
        action,
        cause: source.into(),
    }
}

/// The storage as Optuna's `--storage` option takes it.
pub(super) fn optuna_url(path: &str) -> String {
    if super::db::pg_url::is_postgres_url(path) {
        path.to_owned()
    } else {
        format!("sqlite:///{path}")
    }
}
