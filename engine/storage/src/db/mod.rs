//! One connection to the database that holds the studies: a SQLite file or a PostgreSQL server.
//!
//! The storage's SQL is written once, in the dialect both engines share (`INSERT … ON CONFLICT
//! … DO UPDATE`, `RETURNING`, `?N` placeholders, which PostgreSQL receives as `$N`); the few
//! statements that differ ask [`Conn::dialect`]. Values cross this boundary as [`Value`]:
//! integers, floats, text, naive UTC datetimes (SQLAlchemy's text form on SQLite, `TIMESTAMP` on
//! PostgreSQL), booleans and NULL, converted to whatever column type the server reports — Optuna's
//! PostgreSQL schema has `INTEGER` ids and enum types (`trialstate`, …) that a typed client would
//! refuse a plain `i64` or `&str` for.
//!
//! - [`sqlite`]: rusqlite, WAL, `BEGIN IMMEDIATE` transactions.
//! - [`postgres`]: the synchronous `postgres` client, a statement cache, READ COMMITTED
//!   transactions whose writers lock the rows they decide on (`FOR UPDATE`).
//! - [`pg_url`]: `postgresql://user[:password]@host[:port]/dbname`, `~/.pgpass`, the redacted form
//!   that is printed.

pub mod pg_url;
pub mod postgres;
pub mod sqlite;
mod value;

use std::cell::RefCell;

pub use value::{Row, Value};

/// Which SQL engine is behind a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

/// An error of the database engine or of a value read from it.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    #[error("{}", postgres::describe(.0))]
    Postgres(#[from] ::postgres::Error),
    #[error("column {column}: expected {expected}, found {found}")]
    Type {
        column: usize,
        expected: &'static str,
        found: String,
    },
    #[error("{0}")]
    Connect(String),
}

impl DbError {
    /// A UNIQUE or FOREIGN KEY constraint refused the write.
    pub fn is_constraint(&self) -> bool {
        match self {
            DbError::Sqlite(e) => {
                e.sqlite_error_code() == Some(rusqlite::ErrorCode::ConstraintViolation)
            }
            DbError::Postgres(e) => postgres::is_constraint(e),
            _ => false,
        }
    }
}

/// Builds a `&[Value]` from expressions of any type with a `From` conversion.
macro_rules! args {
    ($($e:expr),* $(,)?) => {
        &[$($crate::db::Value::from($e)),*][..]
    };
}
pub(crate) use args;

/// One open connection.
pub enum Conn {
    Sqlite(rusqlite::Connection),
    /// In a `RefCell`: the client needs `&mut` to run a query, and reads take `&Storage`
    /// (a `Storage` is `Send`, not `Sync`, as a rusqlite connection is).
    Postgres(Box<RefCell<postgres::PgConn>>),
}

impl Conn {
    pub fn dialect(&self) -> Dialect {
        match self {
            Conn::Sqlite(_) => Dialect::Sqlite,
            Conn::Postgres(_) => Dialect::Postgres,
        }
    }

    /// Whether a write that failed with `e` (`at_commit`: at its COMMIT) may run again on a
    /// new connection ([`postgres::PgConn::lost_by`]; never, for a SQLite file).
    pub fn lost_by(&self, e: &DbError, at_commit: bool) -> bool {
        match self {
            Conn::Sqlite(_) => false,
            Conn::Postgres(c) => c.borrow_mut().lost_by(e, at_commit),
        }
    }

    /// Times a PostgreSQL connection was opened again after the server closed it.
    pub fn reconnects(&self) -> usize {
        match self {
            Conn::Sqlite(_) => 0,
            Conn::Postgres(c) => c.borrow().reconnects,
        }
    }

    /// Every row of a query outside a transaction (each statement sees committed data).
    pub fn query(&self, sql: &str, params: &[Value]) -> Result<Vec<Row>, DbError> {
        match self {
            Conn::Sqlite(c) => sqlite::query(c, sql, params),
            Conn::Postgres(c) => c.borrow_mut().query(sql, params),
        }
    }

    /// The first row of a query, if any.
    pub fn query_opt(&self, sql: &str, params: &[Value]) -> Result<Option<Row>, DbError> {
        Ok(self.query(sql, params)?.into_iter().next())
    }

    /// Starts a write transaction: `BEGIN IMMEDIATE` on SQLite (the write lock taken up front),
    /// `BEGIN` (READ COMMITTED) on PostgreSQL.
    pub fn transaction(&mut self) -> Result<Txn<'_>, DbError> {
        match self {
            Conn::Sqlite(c) => Ok(Txn::Sqlite(
                c.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?,
            )),
            Conn::Postgres(c) => {
                let pg = c.get_mut();
                pg.reopen_if_closed()?;
                let tx = pg.client.transaction()?;
                Ok(Txn::Postgres(postgres::PgTxn {
                    tx,
                    statements: &mut pg.statements,
                }))
            }
        }
    }
}

/// An open transaction; dropped without [`Txn::commit`], it rolls back.
pub enum Txn<'a> {
    Sqlite(rusqlite::Transaction<'a>),
    Postgres(postgres::PgTxn<'a>),
}

impl Txn<'_> {
    pub fn dialect(&self) -> Dialect {
        match self {
            Txn::Sqlite(_) => Dialect::Sqlite,
            Txn::Postgres(_) => Dialect::Postgres,
        }
    }

    /// Runs one statement; returns the number of rows it changed.
    pub fn execute(&mut self, sql: &str, params: &[Value]) -> Result<u64, DbError> {
        match self {
            Txn::Sqlite(tx) => sqlite::execute(tx, sql, params),
            Txn::Postgres(tx) => tx.execute(sql, params),
        }
    }

    /// Every row of a query.
    pub fn query(&mut self, sql: &str, params: &[Value]) -> Result<Vec<Row>, DbError> {
        match self {
            Txn::Sqlite(tx) => sqlite::query(tx, sql, params),
            Txn::Postgres(tx) => tx.query(sql, params),
        }
    }

    /// The first row of a query, if any.
    pub fn query_opt(&mut self, sql: &str, params: &[Value]) -> Result<Option<Row>, DbError> {
        Ok(self.query(sql, params)?.into_iter().next())
    }

    /// Several statements without parameters, separated by `;`.
    pub fn batch(&mut self, sql: &str) -> Result<(), DbError> {
        match self {
            Txn::Sqlite(tx) => Ok(tx.execute_batch(sql)?),
            Txn::Postgres(tx) => Ok(tx.tx.batch_execute(sql)?),
        }
    }

    pub fn commit(self) -> Result<(), DbError> {
        match self {
            Txn::Sqlite(tx) => Ok(tx.commit()?),
            Txn::Postgres(tx) => Ok(tx.tx.commit()?),
        }
    }
}
