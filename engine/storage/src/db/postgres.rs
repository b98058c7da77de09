//! The PostgreSQL side of [`super::Conn`]: the synchronous `postgres` client, [`Value`]s
//! converted to the column types the server reports, and a per-connection statement cache.
//!
//! Optuna's schema on PostgreSQL (what SQLAlchemy creates for `optuna.storages.RDBStorage`) has
//! `INTEGER` ids, `DOUBLE PRECISION` values, `TIMESTAMP WITHOUT TIME ZONE` datetimes and four
//! enum types; the client checks each parameter's Rust type against the server's, so a
//! [`Value`] accepts every type and converts (refusing, with the column type named, what does
//! not fit: an id beyond `INTEGER`, text into a number).

use std::collections::HashMap;
use std::error::Error;
use std::io::Write as _;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use chrono::{DateTime, NaiveDateTime, Utc};
use postgres::types::{FromSql, IsNull, Kind, ToSql, Type, to_sql_checked};
use postgres::{Client, Statement, Transaction};

use super::{DbError, Row, Value};
use crate::datetime::parse_naive;

type BoxError = Box<dyn Error + Sync + Send>;

/// A client and the statements it has prepared, by their SQL as written (`?N` placeholders).
pub struct PgConn {
    pub client: Client,
    pub statements: HashMap<String, Statement>,
    /// How to connect again once the server has closed the connection (None: it is not).
    pub again: Option<Reconnect>,
    /// Times it connected again.
    pub reconnects: usize,
    /// A statement met the server's closing of the connection (the client may not know yet).
    pub lost: bool,
}

/// Whether `e` is the server saying it ends the session (an administrator's
/// `pg_terminate_backend`, a fast shutdown: `57P01`). Sent instead of the answer
/// to a COMMIT, it almost always means the COMMIT was never read (a committed transaction is
/// answered first); the server's narrow window between a durable commit and its answer makes
/// a write run again there harmless rather than impossible: an upsert again, a final state
/// refused as already stored, at worst a spare RUNNING trial that its stale heartbeat fails.
pub fn ended_by_server(e: &postgres::Error) -> bool {
    use postgres::error::SqlState;
    e.code() == Some(&SqlState::ADMIN_SHUTDOWN)
}

/// Whether `e` is the server closing the connection (a restart, a crash, an administrator
/// ending the session) or the network losing it, rather than a statement's own failure.
pub fn connection_lost(e: &postgres::Error) -> bool {
    use postgres::error::SqlState;
    e.is_closed()
        || e.code().is_some_and(|c| {
            [
                SqlState::ADMIN_SHUTDOWN,
                SqlState::CRASH_SHUTDOWN,
                SqlState::CANNOT_CONNECT_NOW,
            ]
            .contains(c)
        })
        || e.source().is_some_and(|s| s.is::<std::io::Error>())
}

/// What connecting again takes: a worker's connection outlives a server restart (or a
/// session an administrator ended), as its heartbeat's does, instead of failing its trial and
/// stopping the worker over the first statement after it.
pub struct Reconnect {
    /// Opens a new client, its session set up as the first one's.
    pub connect: Box<dyn Fn() -> Result<Client, DbError> + Send>,
    /// The database as messages name it (no password).
    pub display: String,
    /// How long to keep trying while the server is down (the storage's busy timeout: as long
    /// as a write waits for a lock).
    pub wait: Duration,
}

impl PgConn {
    /// Whether `e`, met by a statement on this connection (`at_commit`: by its COMMIT), means
    /// the server closed it and it can be opened again, the statement having changed nothing;
    /// if so, the next statement connects again. A COMMIT counts only where the server
    /// answered it by ending the session ([`ended_by_server`]): one with no answer at all may
    /// have been stored.
    pub fn lost_by(&mut self, e: &DbError, at_commit: bool) -> bool {
        let DbError::Postgres(e) = e else {
            return false;
        };
        if !connection_lost(e) || self.again.is_none() {
            return false;
        }
        self.lost = true;
        !at_commit || ended_by_server(e)
    }

    /// Connects again where the server has closed the connection, trying every half second
    /// for up to the [`Reconnect::wait`]; returns whether it did. Prepared statements belong
    /// to the old session and are dropped.
    pub fn reopen_if_closed(&mut self) -> Result<bool, DbError> {
        if !(self.lost || self.client.is_closed()) {
            return Ok(false);
        }
        let Some(again) = &self.again else {
            return Err(DbError::Connect(
                "the server closed the connection to the database".into(),
            ));
        };
        let since = Instant::now();
        loop {
            match (again.connect)() {
                Ok(client) => {
                    self.client = client;
                    self.statements.clear();
                    self.reconnects += 1;
                    self.lost = false;
                    if first_of_restart(&again.display, Instant::now()) {
                        // (Not `eprintln!`, which panics where stderr is closed.)
                        let _ = writeln!(
                            std::io::stderr(),
                            "warning: storage {}: the server closed the connection; connected \
                             again after {:.1} s",
                            again.display,
                            since.elapsed().as_secs_f64()
                        );
                    }
                    return Ok(true);
                }
                Err(e) if since.elapsed() >= again.wait => {
                    return Err(DbError::Connect(format!(
                        "the server closed the connection and it could not be opened again \
                         within {:.0} s: {e}",
                        again.wait.as_secs_f64()
                    )));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(500)),
            }
        }
    }
}

/// How many times a read runs on connections the server closed under it.
const READ_TRIES: usize = 3;

/// How long after one connection's warning another connection of this process to the same
/// database connects again without one.
const RESTART_QUIET: Duration = Duration::from_secs(60);

/// Whether a reconnection to `display` at `now` is the first of its restart in this process:
/// a server restart closes every connection a process holds (a worker's storage, its trial's
/// heartbeat, its telemetry), each of which connects again at its next statement, and one
/// warning says so, not one per connection.
fn first_of_restart(display: &str, now: Instant) -> bool {
    static SAID: Mutex<Vec<(String, Instant)>> = Mutex::new(Vec::new());
    let mut said = SAID.lock().unwrap_or_else(|p| p.into_inner());
    match said.iter_mut().find(|(d, _)| d == display) {
        Some((_, at)) if now.saturating_duration_since(*at) < RESTART_QUIET => false,
        Some((_, at)) => {
            *at = now;
            true
        }
        None => {
            said.push((display.to_owned(), now));
            true
        }
    }
}

/// A transaction on a [`PgConn`], sharing its statement cache.
pub struct PgTxn<'a> {
    pub tx: Transaction<'a>,
    pub statements: &'a mut HashMap<String, Statement>,
}

/// `?1` → `$1`: the storage's SQL uses SQLite's numbered placeholders (never inside literals).
pub fn placeholders(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '?' && chars.peek().is_some_and(char::is_ascii_digit) {
            out.push('$');
        } else {
            out.push(c);
        }
    }
    out
}

fn prepared<'c>(
    statements: &'c mut HashMap<String, Statement>,
    prepare: impl FnOnce(&str) -> Result<Statement, postgres::Error>,
    sql: &str,
) -> Result<&'c Statement, DbError> {
    if !statements.contains_key(sql) {
        let stmt = prepare(&placeholders(sql))?;
        statements.insert(sql.to_owned(), stmt);
    }
    statements.get(sql).ok_or(DbError::Type {
        column: 0,
        expected: "a prepared statement",
        found: "none".into(),
    })
}

fn params(values: &[Value]) -> Vec<&(dyn ToSql + Sync)> {
    values.iter().map(|v| v as &(dyn ToSql + Sync)).collect()
}

fn rows(rows: Vec<postgres::Row>) -> Result<Vec<Row>, DbError> {
    rows.into_iter()
        .map(|r| {
            (0..r.len())
                .map(|i| r.try_get::<_, Value>(i).map_err(DbError::from))
                .collect::<Result<Vec<_>, _>>()
                .map(Row)
        })
        .collect()
}

impl PgConn {
    /// A read outside a transaction: on a connection the server has closed (before it, or
    /// while it ran), connected again and run again (a read changes nothing), up to
    /// [`READ_TRIES`] times: an administrator ending every session of the database twice in a
    /// row (as `cli_worker`'s test does) can close the new connection too, before its read.
    pub fn query(&mut self, sql: &str, values: &[Value]) -> Result<Vec<Row>, DbError> {
        let mut tries = 1;
        loop {
            self.reopen_if_closed()?;
            match self.query_once(sql, values) {
                Err(e) if tries < READ_TRIES && self.lost_by(&e, false) => tries += 1,
                result => return result,
            }
        }
    }

    fn query_once(&mut self, sql: &str, values: &[Value]) -> Result<Vec<Row>, DbError> {
        let client = &mut self.client;
        let stmt = prepared(&mut self.statements, |s| client.prepare(s), sql)?.clone();
        rows(self.client.query(&stmt, &params(values))?)
    }
}

impl PgTxn<'_> {
    pub fn query(&mut self, sql: &str, values: &[Value]) -> Result<Vec<Row>, DbError> {
        let tx = &mut self.tx;
        let stmt = prepared(self.statements, |s| tx.prepare(s), sql)?.clone();
        rows(self.tx.query(&stmt, &params(values))?)
    }

    pub fn execute(&mut self, sql: &str, values: &[Value]) -> Result<u64, DbError> {
        let tx = &mut self.tx;
        let stmt = prepared(self.statements, |s| tx.prepare(s), sql)?.clone();
        Ok(self.tx.execute(&stmt, &params(values))?)
    }
}

fn is_text(ty: &Type) -> bool {
    matches!(ty.kind(), Kind::Enum(_))
        || [
            Type::TEXT,
            Type::VARCHAR,
            Type::BPCHAR,
            Type::NAME,
            Type::UNKNOWN,
        ]
        .contains(ty)
}

impl ToSql for Value {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
        let refuse = |what: &str| -> Result<IsNull, BoxError> {
            Err(format!("cannot store {what} in a column of type {ty}").into())
        };
        match self {
            Value::Null => Ok(IsNull::Yes),
            Value::Int(i) => match *ty {
                Type::INT2 => i16::try_from(*i)?.to_sql(ty, out),
                Type::INT4 => i32::try_from(*i)?.to_sql(ty, out),
                Type::INT8 => i.to_sql(ty, out),
                Type::FLOAT8 => (*i as f64).to_sql(ty, out),
                Type::FLOAT4 => (*i as f32).to_sql(ty, out),
                Type::BOOL => (*i != 0).to_sql(ty, out),
                _ => refuse(&format!("the integer {i}")),
            },
            Value::Float(f) => match *ty {
                Type::FLOAT8 => f.to_sql(ty, out),
                Type::FLOAT4 => (*f as f32).to_sql(ty, out),
                _ => refuse(&format!("the float {f}")),
            },
            Value::Text(t) if is_text(ty) => {
                // Text and enum labels have the same binary form: the UTF-8 bytes.
                out.extend_from_slice(t.as_bytes());
                Ok(IsNull::No)
            }
            Value::Text(t) if *ty == Type::TIMESTAMP => match parse_naive(t) {
                Some(time) => time.to_sql(ty, out),
                None => refuse(&format!("the text `{t}`")),
            },
            Value::Text(t) => refuse(&format!("the text `{t}`")),
            Value::Time(t) => match *ty {
                Type::TIMESTAMP => t.to_sql(ty, out),
                Type::TIMESTAMPTZ => {
                    DateTime::<Utc>::from_naive_utc_and_offset(*t, Utc).to_sql(ty, out)
                }
                _ if is_text(ty) => {
                    out.extend_from_slice(crate::datetime::format_naive(*t).as_bytes());
                    Ok(IsNull::No)
                }
                _ => refuse(&format!("the datetime {t}")),
            },
            Value::Bool(b) => match *ty {
                Type::BOOL => b.to_sql(ty, out),
                _ => refuse(&format!("the boolean {b}")),
            },
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

impl<'a> FromSql<'a> for Value {
    fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<Self, BoxError> {
        Ok(match *ty {
            Type::INT2 => Value::Int(i16::from_sql(ty, raw)?.into()),
            Type::INT4 => Value::Int(i32::from_sql(ty, raw)?.into()),
            Type::INT8 => Value::Int(i64::from_sql(ty, raw)?),
            Type::OID => Value::Int(u32::from_sql(ty, raw)?.into()),
            Type::FLOAT4 => Value::Float(f32::from_sql(ty, raw)?.into()),
            Type::FLOAT8 => Value::Float(f64::from_sql(ty, raw)?),
            Type::BOOL => Value::Bool(bool::from_sql(ty, raw)?),
            Type::TIMESTAMP => Value::Time(NaiveDateTime::from_sql(ty, raw)?),
            Type::TIMESTAMPTZ => Value::Time(DateTime::<Utc>::from_sql(ty, raw)?.naive_utc()),
            _ if is_text(ty) => Value::Text(std::str::from_utf8(raw)?.to_owned()),
            _ => return Err(format!("unsupported column type {ty}").into()),
        })
    }

    fn from_sql_null(_: &Type) -> Result<Self, BoxError> {
        Ok(Value::Null)
    }

    fn accepts(_: &Type) -> bool {
        true
    }
}

/// The server's message (with its detail and hint) rather than the client's "db error".
pub fn describe(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => {
            let mut s = format!("{}: {}", db.severity(), db.message());
            if let Some(detail) = db.detail() {
                s.push_str(&format!(" ({detail})"));
            }
            if let Some(hint) = db.hint() {
                s.push_str(&format!("; hint: {hint}"));
            }
            s
        }
        None => match e.source() {
            Some(source) => format!("{e}: {source}"),
            None => e.to_string(),
        },
    }
}

/// A UNIQUE or FOREIGN KEY violation.
pub fn is_constraint(e: &postgres::Error) -> bool {
    use postgres::error::SqlState;
    e.code()
        .is_some_and(|c| *c == SqlState::UNIQUE_VIOLATION || *c == SqlState::FOREIGN_KEY_VIOLATION)
}

#[cfg(test)]
mod tests {
    use super::{RESTART_QUIET, first_of_restart, placeholders};
    use std::time::{Duration, Instant};

    #[test]
    fn a_restart_is_said_once_for_all_of_a_process_connections() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let db = "postgresql://u@h/restart-test-a";
        assert!(first_of_restart(db, at(0)), "the first connection says it");
        assert!(
            !first_of_restart(db, at(1)),
            "the heartbeat's, a second later"
        );
        assert!(
            !first_of_restart(db, at(30)),
            "the storage's, at its next write"
        );
        assert!(
            first_of_restart("postgresql://u@h/restart-test-b", at(30)),
            "another database's is its own"
        );
        let later = RESTART_QUIET.as_secs() + 1;
        assert!(
            first_of_restart(db, at(later)),
            "a later restart is said again"
        );
        assert!(!first_of_restart(db, at(later + 1)));
    }

    #[test]
    fn numbered_placeholders_become_dollars() {
        assert_eq!(
            placeholders("SELECT a FROM t WHERE b = ?1 AND c = ?12 AND d = '?'"),
            "SELECT a FROM t WHERE b = $1 AND c = $12 AND d = '?'"
        );
    }
}
