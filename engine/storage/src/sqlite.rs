//! The SQLite file: opening it, checking its schema, and running short write transactions.
//!
//! Several workers (threads or processes, TradeTune's or Optuna's) share one file, so:
//! - the journal is WAL: readers never block the writer, nor the writer the readers;
//! - every connection waits for the write lock (`busy_timeout`, 30 s by default) instead of
//!   failing with "database is locked" — Optuna's Python client waits 5 s (`sqlite3`'s default
//!   `timeout`), so TradeTune keeps each write transaction to a few statements;
//! - every write starts with `BEGIN IMMEDIATE`, taking the write lock up front: a deferred
//!   transaction that reads and then writes can fail with `SQLITE_BUSY` without waiting when
//!   another writer committed in between (https://www.sqlite.org/wal.html, "busy snapshot");
//! - `synchronous = NORMAL`: in WAL mode a commit survives the process being killed; only a
//!   power cut can lose the last commits (https://www.sqlite.org/pragma.html#pragma_synchronous).
//!
//! A `Storage` is one connection: give each worker thread its own (`Storage` is `Send`).

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, OptionalExtension, Transaction, TransactionBehavior};

use super::error::StorageError;
pub(super) use super::error::sql_err;
use super::model::OptunaDistribution;
use super::optuna_schema::{ALEMBIC_VERSION, OPTUNA_TABLES, create_optuna_schema};
use super::records::TrialHandle;
use super::tradetune_schema;

/// How to open a storage.
#[derive(Debug, Clone, PartialEq)]
pub struct StorageOptions {
    /// How long a connection waits for another writer before giving up.
    pub busy_timeout: Duration,
    /// On open, RUNNING trials whose last heartbeat is older than this become FAIL (a worker
    /// that was killed never finishes its trial). None skips the recovery.
    pub stale_after: Option<Duration>,
    /// Open without writing anything (no WAL switch, no table creation, no recovery).
    pub read_only: bool,
}

/// Default heartbeat period of a running trial (see [`super::heartbeat::HeartbeatThread`]).
pub const DEFAULT_HEARTBEAT_INTERVAL: Duration = Duration::from_secs(10);

/// A running trial whose heartbeat is older than this is considered dead: six missed beats,
/// so a machine under heavy load (a GPU driver stall, swapping) is not mistaken for a crash.
/// Optuna's default grace period is two intervals (`RDBStorage(grace_period=None)`).
pub const DEFAULT_STALE_AFTER: Duration = Duration::from_secs(60);

impl Default for StorageOptions {
    fn default() -> Self {
        StorageOptions {
            busy_timeout: Duration::from_secs(30),
            stale_after: Some(DEFAULT_STALE_AFTER),
            read_only: false,
        }
    }
}

/// An Optuna RDB storage in a SQLite file.
pub struct Storage {
    pub(super) conn: Connection,
    pub(super) path: String,
    read_only: bool,
    /// First stored distribution per (study, parameter name): stored distributions never change
    /// and all of one name are mutually compatible, so one per name is enough to check against.
    pub(super) known_distributions: HashMap<(i64, String), OptunaDistribution>,
    recovered: Vec<TrialHandle>,
}

impl std::fmt::Debug for Storage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Storage")
            .field("path", &self.path)
            .field("read_only", &self.read_only)
            .finish()
    }
}

/// Whether the error is a UNIQUE/constraint violation.
pub(super) fn is_constraint(e: &rusqlite::Error) -> bool {
    e.sqlite_error_code() == Some(rusqlite::ErrorCode::ConstraintViolation)
}

impl Storage {
    /// Opens (creating if needed) a storage for reading and writing, with default options.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StorageError> {
        Self::open_with(path, &StorageOptions::default())
    }

    /// Opens an existing storage without writing anything to it.
    pub fn open_read_only(path: impl AsRef<Path>) -> Result<Self, StorageError> {
        Self::open_with(
            path,
            &StorageOptions {
                read_only: true,
                stale_after: None,
                ..Default::default()
            },
        )
    }

    /// Opens a storage.
    ///
    /// A new or empty file gets Optuna's schema. A file that already has tables must be an
    /// Optuna storage at alembic revision `v3.2.0.a` to be opened for writing; TradeTune never
    /// migrates. TradeTune's own `tradetune_*` tables are added when missing.
    pub fn open_with(
        path: impl AsRef<Path>,
        options: &StorageOptions,
    ) -> Result<Self, StorageError> {
        let path_str = path.as_ref().display().to_string();
        let err = |action| sql_err(&path_str, action);
        let flags = if options.read_only {
            OpenFlags::SQLITE_OPEN_READ_ONLY
                | OpenFlags::SQLITE_OPEN_NO_MUTEX
                | OpenFlags::SQLITE_OPEN_URI
        } else {
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX
                | OpenFlags::SQLITE_OPEN_URI
        };
        let conn = Connection::open_with_flags(path.as_ref(), flags).map_err(err("open"))?;
        conn.busy_timeout(options.busy_timeout)
            .map_err(err("set busy_timeout"))?;
        let mut storage = Storage {
            conn,
            path: path_str.clone(),
            read_only: options.read_only,
            known_distributions: HashMap::new(),
            recovered: Vec::new(),
        };
        if options.read_only {
            storage.check_tables(&storage.table_names()?)?;
            return Ok(storage);
        }
        // WAL is a property of the file; switching needs no other connection in the middle of a
        // transaction, which the busy timeout waits for.
        let mode: String = storage
            .conn
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .map_err(err("switch to WAL"))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StorageError::Sqlite {
                path: path_str,
                action: "switch to WAL",
                source: rusqlite::Error::InvalidQuery,
            });
        }
        storage
            .conn
            .pragma_update(None, "synchronous", "NORMAL")
            .map_err(err("set synchronous"))?;
        storage
            .conn
            .pragma_update(None, "foreign_keys", true)
            .map_err(err("enable foreign keys"))?;
        storage.init_schema()?;
        if let Some(stale_after) = options.stale_after {
            storage.recovered = storage.fail_stale_trials(stale_after)?;
        }
        Ok(storage)
    }

    /// The file path as given.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Whether the storage was opened read-only.
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// Trials that opening this storage marked FAIL because their heartbeat was stale.
    pub fn recovered_on_open(&self) -> &[TrialHandle] {
        &self.recovered
    }

    fn table_names(&self) -> Result<Vec<String>, StorageError> {
        let mut stmt = self
            .conn
            .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
            .map_err(sql_err(&self.path, "list tables"))?;
        stmt.query_map([], |r| r.get::<_, String>(0))
            .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
            .map_err(sql_err(&self.path, "list tables"))
    }

    fn check_tables(&self, names: &[String]) -> Result<(), StorageError> {
        check_tables(&self.path, self.read_only, names)
    }

    /// Creates Optuna's schema in an empty file, or checks an existing one; adds our tables.
    fn init_schema(&mut self) -> Result<(), StorageError> {
        let path = self.path.clone();
        let err = |action| sql_err(&path, action);
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(err("begin schema check"))?;
        let names: Vec<String> = {
            let mut stmt = tx
                .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
                .map_err(err("list tables"))?;
            stmt.query_map([], |r| r.get::<_, String>(0))
                .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
                .map_err(err("list tables"))?
        };
        if names.is_empty() {
            create_optuna_schema(&tx).map_err(err("create Optuna schema"))?;
        } else {
            check_tables(&path, self.read_only, &names)?;
            let found: Option<String> = tx
                .query_row("SELECT version_num FROM alembic_version", [], |r| r.get(0))
                .optional()
                .map_err(err("read alembic_version"))?;
            if found.as_deref() != Some(ALEMBIC_VERSION) {
                return Err(StorageError::SchemaVersion {
                    path: path.clone(),
                    found: found.unwrap_or_else(|| "(none)".to_owned()),
                    expected: ALEMBIC_VERSION,
                });
            }
        }
        tradetune_schema::create_or_check(&tx, &path)?;
        tx.commit().map_err(err("commit schema"))?;
        Ok(())
    }

    /// Runs `f` in one `BEGIN IMMEDIATE` transaction; any error rolls everything back.
    pub(super) fn write<T>(
        &mut self,
        action: &'static str,
        f: impl FnOnce(&mut Tx<'_>) -> Result<T, StorageError>,
    ) -> Result<T, StorageError> {
        if self.read_only {
            return Err(StorageError::ReadOnly {
                path: self.path.clone(),
                action,
            });
        }
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|source| StorageError::Sqlite {
                path: self.path.clone(),
                action,
                source,
            })?;
        let mut ctx = Tx {
            tx,
            path: &self.path,
            action,
            known: &mut self.known_distributions,
        };
        let out = f(&mut ctx)?;
        ctx.tx.commit().map_err(|source| StorageError::Sqlite {
            path: self.path.clone(),
            action,
            source,
        })?;
        Ok(out)
    }
}

/// An open write transaction with what the write helpers need.
pub(super) struct Tx<'a> {
    pub tx: Transaction<'a>,
    pub path: &'a str,
    pub action: &'static str,
    pub known: &'a mut HashMap<(i64, String), OptunaDistribution>,
}

impl Tx<'_> {
    /// Maps a SQLite error to one naming the file and this transaction's action.
    pub fn err(&self) -> impl Fn(rusqlite::Error) -> StorageError + use<> {
        sql_err(self.path, self.action)
    }
}

/// Every table Optuna needs is present (a writer also needs `alembic_version`, which it checks).
fn check_tables(path: &str, read_only: bool, names: &[String]) -> Result<(), StorageError> {
    let mut required: Vec<&str> = OPTUNA_TABLES.to_vec();
    if !read_only {
        required.push("alembic_version");
    }
    match required.iter().find(|t| !names.iter().any(|n| n == *t)) {
        Some(missing) => Err(StorageError::NotOptunaSchema {
            path: path.to_owned(),
            missing: (*missing).to_owned(),
        }),
        None => Ok(()),
    }
}
