//! Opening a storage — a SQLite file or a PostgreSQL database, by its location — checking its
//! schema, and running short write transactions.
//!
//! A location starting with `postgresql://` (or `postgres://`) is a PostgreSQL database
//! (see [`super::db::pg_url`]); anything else is a SQLite file path.
//!
//! On PostgreSQL, transactions are READ COMMITTED and a writer locks what it decides on: the
//! study row before numbering a new trial or taking a WAITING one, the trial row before changing
//! its state (`FOR UPDATE`), and an advisory lock while creating the schema, so workers on several
//! machines never share a trial number or finish one trial twice. An open that finds the whole
//! schema there (every open but a database's first, or the first after an upgrade) reads the
//! catalogue and takes no lock at all.
//!
//! On SQLite, several workers (threads or processes, TradeTune's or Optuna's) share one file, so:
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

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use super::db::{Conn, DbError, Dialect, Txn, args, pg_url};
pub(super) use super::error::sql_err;
use super::error::{StorageError, optuna_url};
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
    /// that was killed never finishes its trial). None, the default, skips the recovery: only
    /// a study's runner knows how long its workers may go between beats (`--stale-after`), so
    /// only it asks; a plain open (a note, a reseed, an export) with a guess of its own would
    /// fail live trials of workers that beat less often.
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
            stale_after: None,
            read_only: false,
        }
    }
}

/// PostgreSQL advisory lock held while creating or checking the schema ("TTUNE" in ASCII).
const SCHEMA_LOCK: i64 = 0x54_54_55_4e_45;

/// An Optuna RDB storage: a SQLite file or a PostgreSQL database.
pub struct Storage {
    pub(super) conn: Conn,
    /// The file path, or the PostgreSQL URL without its password.
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

impl Storage {
    /// Opens (creating if needed) a storage for reading and writing, with default options: no
    /// trial is failed for a stale heartbeat (see [`StorageOptions::stale_after`]).
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

    /// Opens a storage: a SQLite file, or a PostgreSQL database when `location` is a
    /// `postgresql://` URL.
    ///
    /// A new or empty database gets Optuna's schema. One that already has tables must be an
    /// Optuna storage at alembic revision `v3.2.0.a` to be opened for writing; TradeTune never
    /// migrates. TradeTune's own `tradetune_*` tables are added when missing.
    pub fn open_with(
        location: impl AsRef<Path>,
        options: &StorageOptions,
    ) -> Result<Self, StorageError> {
        let location = location.as_ref();
        match Self::open_once(location, options) {
            // The server closed the new session while its schema was checked (a restart under
            // way, an administrator ending the database's sessions): once more, as any other
            // statement on a connection the server closed is run once more.
            Err(StorageError::Database {
                cause: DbError::Postgres(e),
                ..
            }) if crate::db::postgres::connection_lost(&e) => Self::open_once(location, options),
            result => result,
        }
    }

    fn open_once(location: &Path, options: &StorageOptions) -> Result<Self, StorageError> {
        let text = location.to_string_lossy();
        let (conn, path) = if pg_url::is_postgres_url(&text) {
            Self::connect_postgres(&text, options)?
        } else {
            (
                Self::open_sqlite(location, options)?,
                location.display().to_string(),
            )
        };
        let mut storage = Storage {
            conn,
            path,
            read_only: options.read_only,
            known_distributions: HashMap::new(),
            recovered: Vec::new(),
        };
        if options.read_only {
            let names = storage.table_names()?;
            // Said as what it is (a `createdb`'s database, a file `touch` made), not as a
            // database with tables but not Optuna's.
            if names.is_empty() {
                return Err(StorageError::EmptyDatabase {
                    path: storage.path.clone(),
                });
            }
            storage.check_tables(&names)?;
            storage.check_readable_version(&names)?;
            return Ok(storage);
        }
        storage.init_schema()?;
        // Only a file known to be (now) an Optuna storage TradeTune writes is switched to WAL:
        // one refused above is left as it was.
        if let Conn::Sqlite(conn) = &storage.conn {
            switch_to_wal(conn, &storage.path, options.busy_timeout)?;
        }
        if let Some(stale_after) = options.stale_after {
            storage.recovered = storage.fail_stale_trials(stale_after)?;
        }
        Ok(storage)
    }

    fn connect_postgres(
        url: &str,
        options: &StorageOptions,
    ) -> Result<(Conn, String), StorageError> {
        let target = pg_url::parse(url).map_err(|message| StorageError::BadLocation {
            location: pg_url::redact(url),
            message,
        })?;
        let path = target.display.clone();
        let err = |action| sql_err(&path, action);
        let mut pg = pg_url::connect(&target, !options.read_only).map_err(err("connect"))?;
        // Waiting for another writer's row lock is bounded as SQLite's busy timeout is.
        let ms = options.busy_timeout.as_millis();
        let mut session = format!("SET lock_timeout = {ms}");
        if options.read_only {
            session.push_str("; SET default_transaction_read_only = on");
        }
        pg.client
            .batch_execute(&session)
            .map_err(|e| err("configure the session")(e.into()))?;
        pg.again = Some(crate::db::postgres::Reconnect {
            display: target.display.clone(),
            connect: Box::new(move || pg_url::connect_again(&target, &session)),
            wait: options.busy_timeout,
        });
        Ok((Conn::Postgres(Box::new(RefCell::new(pg))), path))
    }

    fn open_sqlite(path: &Path, options: &StorageOptions) -> Result<Conn, StorageError> {
        let path_str = path.display().to_string();
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
        let conn = Connection::open_with_flags(path, flags).map_err(err("open"))?;
        conn.busy_timeout(options.busy_timeout)
            .map_err(err("set busy_timeout"))?;
        if options.read_only {
            return Ok(Conn::Sqlite(conn));
        }
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(err("set synchronous"))?;
        conn.pragma_update(None, "foreign_keys", true)
            .map_err(err("enable foreign keys"))?;
        Ok(Conn::Sqlite(conn))
    }

    /// Which engine holds this storage.
    pub fn is_postgres(&self) -> bool {
        self.conn.dialect() == Dialect::Postgres
    }

    /// The file path as given, or the PostgreSQL URL without its password.
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
        let sql = table_names_sql(self.conn.dialect());
        self.conn
            .query(sql, &[])
            .and_then(|rows| rows.iter().map(|r| r.string(0)).collect())
            .map_err(sql_err(&self.path, "list tables"))
    }

    fn check_tables(&self, names: &[String]) -> Result<(), StorageError> {
        check_tables(&self.path, self.read_only, names)
    }

    /// Whether this TradeTune reads the storage's revision: [`READABLE_SINCE`] or later (the
    /// columns it reads are there; later revisions are read as they are, as Optuna's own
    /// additions have been columns and indexes); an older one is refused with the upgrade that
    /// makes it readable, rather than failing on a missing column.
    fn check_readable_version(&self, tables: &[String]) -> Result<(), StorageError> {
        // A file without the table (copied without it, made by a tool of its own) says no
        // revision, and is read as before.
        if !tables.iter().any(|t| t == "alembic_version") {
            return Ok(());
        }
        let found = self
            .conn
            .query_opt("SELECT version_num FROM alembic_version", &[])
            .and_then(|r| r.map(|r| r.string(0)).transpose())
            .map_err(sql_err(&self.path, "read alembic_version"))?;
        match found.as_deref().map(revision_order) {
            Some(Some(order)) if order >= revision_order(READABLE_SINCE).unwrap_or_default() => {
                Ok(())
            }
            // Not a revision of Optuna's naming: nothing to say it is older.
            Some(None) => Ok(()),
            _ => Err(schema_version_error(&self.path, found, READABLE_SINCE)),
        }
    }

    /// Whether a PostgreSQL database holds the whole schema this TradeTune writes, read without
    /// a lock (see [`tradetune_schema::pg_current_sql`]). Any doubt, a failed query included,
    /// answers no: the open then creates or checks the schema under the lock, and says what
    /// is wrong where something is.
    fn pg_schema_current(&self) -> bool {
        if self.conn.dialect() != Dialect::Postgres {
            return false;
        }
        let tables_ok = self
            .table_names()
            .is_ok_and(|names| !names.is_empty() && self.check_tables(&names).is_ok());
        tables_ok
            && self
                .conn
                .query_opt(&tradetune_schema::pg_current_sql(), args![ALEMBIC_VERSION])
                .ok()
                .flatten()
                .is_some_and(|r| r.bool(0).unwrap_or(false))
    }

    /// Creates Optuna's schema in an empty database, or checks an existing one; adds our tables.
    fn init_schema(&mut self) -> Result<(), StorageError> {
        if self.pg_schema_current() {
            return Ok(());
        }
        let path = self.path.clone();
        let err = |action| sql_err(&path, action);
        let read_only = self.read_only;
        let mut tx = self.conn.transaction().map_err(err("begin schema check"))?;
        if tx.dialect() == Dialect::Postgres {
            // Two workers starting on an empty database must not both create the tables.
            tx.execute("SELECT pg_advisory_xact_lock(?1)", args![SCHEMA_LOCK])
                .map_err(err("lock the schema"))?;
        }
        let sql = table_names_sql(tx.dialect());
        let names: Vec<String> = tx
            .query(sql, &[])
            .and_then(|rows| rows.iter().map(|r| r.string(0)).collect())
            .map_err(err("list tables"))?;
        if names.is_empty() {
            create_optuna_schema(&mut tx).map_err(err("create Optuna schema"))?;
        } else {
            check_tables(&path, read_only, &names)?;
            let found = tx
                .query_opt("SELECT version_num FROM alembic_version", &[])
                .and_then(|r| r.map(|r| r.string(0)).transpose())
                .map_err(err("read alembic_version"))?;
            if found.as_deref() != Some(ALEMBIC_VERSION) {
                return Err(schema_version_error(&path, found, ALEMBIC_VERSION));
            }
        }
        tradetune_schema::create_or_check(&mut tx, &path)?;
        tx.commit().map_err(err("commit schema"))?;
        Ok(())
    }

    /// Runs `f` in one `BEGIN IMMEDIATE` transaction; any error rolls everything back.
    pub(super) fn write<T>(
        &mut self,
        action: &'static str,
        mut f: impl FnMut(&mut Tx<'_>) -> Result<T, StorageError>,
    ) -> Result<T, StorageError> {
        if self.read_only {
            return Err(StorageError::ReadOnly {
                path: self.path.clone(),
                action,
            });
        }
        // A PostgreSQL server that closed the connection (restarted, or an administrator
        // ended the session) before the commit changed nothing: the write runs once more on
        // a new connection. So does one whose COMMIT the server answered by ending the
        // session; one whose COMMIT got no answer at all may have been stored, and is not.
        let again = match self.write_once(action, &mut f) {
            Ok(out) => return Ok(out),
            Err(Failed::Before(e)) => (e, false),
            Err(Failed::AtCommit(e)) => (e, true),
        };
        match again {
            (StorageError::Database { cause, .. }, at_commit)
                if self.conn.lost_by(&cause, at_commit) => {}
            (e, _) => return Err(e),
        }
        self.write_once(action, &mut f)
            .map_err(|(Failed::Before(e) | Failed::AtCommit(e))| e)
    }

    /// The number of times a PostgreSQL connection was opened again after the server closed
    /// it (always 0 for a SQLite file).
    pub fn reconnects(&self) -> usize {
        self.conn.reconnects()
    }

    fn write_once<T>(
        &mut self,
        action: &'static str,
        f: &mut impl FnMut(&mut Tx<'_>) -> Result<T, StorageError>,
    ) -> Result<T, Failed> {
        let tx = self.conn.transaction().map_err(|cause| {
            Failed::Before(StorageError::Database {
                path: self.path.clone(),
                action,
                cause,
            })
        })?;
        let (out, staged) = {
            let mut ctx = Tx {
                tx,
                path: &self.path,
                action,
                known: &self.known_distributions,
                staged: HashMap::new(),
            };
            let out = f(&mut ctx).map_err(Failed::Before)?;
            let staged = std::mem::take(&mut ctx.staged);
            ctx.tx.commit().map_err(|cause| {
                Failed::AtCommit(StorageError::Database {
                    path: self.path.clone(),
                    action,
                    cause,
                })
            })?;
            (out, staged)
        };
        // Only now are the staged distributions stored for good; a transaction that failed
        // (its own error or the commit's) rolled them back and they are dropped with it.
        for (key, distribution) in staged {
            self.known_distributions.entry(key).or_insert(distribution);
        }
        Ok(out)
    }
}

/// A write that failed: before its commit (nothing was stored), or at it (the outcome is
/// unknown where the connection went with the answer).
enum Failed {
    Before(StorageError),
    AtCommit(StorageError),
}

/// An open write transaction with what the write helpers need.
pub(super) struct Tx<'a> {
    pub tx: Txn<'a>,
    pub path: &'a str,
    pub action: &'static str,
    /// The distributions committed before this transaction (see `Storage::known_distributions`).
    pub known: &'a HashMap<(i64, String), OptunaDistribution>,
    /// The distributions this transaction stored first for their name: they join `known` only
    /// once it commits, so a rolled-back write cannot leave one behind to refuse a later value.
    pub staged: HashMap<(i64, String), OptunaDistribution>,
}

impl Tx<'_> {
    /// Maps a database error to one naming the storage and this transaction's action.
    pub fn err(&self) -> impl Fn(super::db::DbError) -> StorageError + use<> {
        sql_err(self.path, self.action)
    }

    pub fn dialect(&self) -> Dialect {
        self.tx.dialect()
    }

    /// On PostgreSQL, locks the study's row until commit, so writers that number trials or
    /// take WAITING ones go one at a time; SQLite's `BEGIN IMMEDIATE` already serialises them.
    pub fn lock_study(&mut self, study_id: i64) -> Result<(), StorageError> {
        if self.dialect() == Dialect::Postgres {
            self.tx
                .query(
                    "SELECT study_id FROM studies WHERE study_id = ?1 FOR UPDATE",
                    args![study_id],
                )
                .map_err(self.err())?;
        }
        Ok(())
    }

    /// SQL for "now" on the database clock, as Optuna's heartbeats use it: SQLite's
    /// `CURRENT_TIMESTAMP` (UTC text), PostgreSQL's `LOCALTIMESTAMP` (what `CURRENT_TIMESTAMP`
    /// becomes in Optuna's `TIMESTAMP WITHOUT TIME ZONE` column).
    pub fn now_sql(&self) -> &'static str {
        match self.dialect() {
            Dialect::Sqlite => "CURRENT_TIMESTAMP",
            Dialect::Postgres => "LOCALTIMESTAMP",
        }
    }
}

/// The query listing the tables of the storage (PostgreSQL: of the connection's schema).
fn table_names_sql(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::Sqlite => "SELECT name FROM sqlite_master WHERE type = 'table'",
        Dialect::Postgres => {
            "SELECT table_name::text FROM information_schema.tables \
             WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'"
        }
    }
}

/// Switches the SQLite file `conn` opened to WAL (a property of the file). Switching needs no
/// other connection in a transaction, and SQLite answers "busy" at once rather than through the
/// busy timeout: another process opening the same new file (its schema check holds the lock)
/// is waited for here, up to `wait`.
fn switch_to_wal(conn: &Connection, path: &str, wait: Duration) -> Result<(), StorageError> {
    let until = std::time::Instant::now() + wait;
    let mode: String = loop {
        match conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0)) {
            Ok(mode) => break mode,
            Err(rusqlite::Error::SqliteFailure(e, _))
                if matches!(
                    e.code,
                    rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
                ) && std::time::Instant::now() < until =>
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => return Err(sql_err(path, "switch to WAL")(DbError::from(e))),
        }
    };
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(StorageError::Database {
            path: path.to_owned(),
            action: "switch to WAL",
            cause: rusqlite::Error::InvalidQuery.into(),
        });
    }
    Ok(())
}

/// The oldest Optuna schema revision TradeTune reads: `v3.0.0.d` added `trial_values.value_type`
/// (`v3.0.0.c`, `trial_intermediate_values.intermediate_value_type`); `v3.2.0.a` only an index.
const READABLE_SINCE: &str = "v3.0.0.d";

/// An Optuna alembic revision (`v3.2.0.a`) as something to compare: its version numbers, then
/// its letter; None for a name of another form.
fn revision_order(revision: &str) -> Option<(Vec<u32>, String)> {
    let mut parts: Vec<&str> = revision.strip_prefix('v')?.split('.').collect();
    let letter = parts.pop()?;
    if parts.is_empty() || !letter.chars().all(|c| c.is_ascii_alphabetic()) {
        return None;
    }
    let numbers: Option<Vec<u32>> = parts.iter().map(|p| p.parse().ok()).collect();
    Some((numbers?, letter.to_owned()))
}

/// The storage's revision `found` is not the one wanted (`wanted`, for writing
/// [`ALEMBIC_VERSION`], for reading [`READABLE_SINCE`] or later): an older one is upgraded with
/// Optuna's command; a newer one, or one of another naming, was made by a newer Optuna.
fn schema_version_error(path: &str, found: Option<String>, wanted: &'static str) -> StorageError {
    let older = match found.as_deref() {
        None => true,
        Some(found) => revision_order(found)
            .zip(revision_order(wanted))
            .is_some_and(|(found, wanted)| found < wanted),
    };
    match found {
        Some(found) if !older => StorageError::NewerSchema {
            path: path.to_owned(),
            found,
            expected: ALEMBIC_VERSION,
            made_by: "Optuna",
        },
        found => StorageError::SchemaVersion {
            url: optuna_url(path),
            path: path.to_owned(),
            found: found.unwrap_or_else(|| "(none)".to_owned()),
            expected: ALEMBIC_VERSION,
        },
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
