//! The SQLite side of [`super::Conn`]: [`Value`]s as rusqlite parameters and results.

use rusqlite::types::{ToSqlOutput, ValueRef};

use super::{DbError, Row, Value};
use crate::datetime::format_naive;

impl rusqlite::ToSql for Value {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        use rusqlite::types::Value as V;
        Ok(match self {
            Value::Null => ToSqlOutput::Owned(V::Null),
            Value::Int(i) => ToSqlOutput::Owned(V::Integer(*i)),
            Value::Float(f) => ToSqlOutput::Owned(V::Real(*f)),
            Value::Text(t) => ToSqlOutput::Borrowed(ValueRef::Text(t.as_bytes())),
            // SQLAlchemy's SQLite DATETIME text, which Optuna reads back.
            Value::Time(t) => ToSqlOutput::Owned(V::Text(format_naive(*t))),
            Value::Bool(b) => ToSqlOutput::Owned(V::Integer(i64::from(*b))),
        })
    }
}

fn value(v: ValueRef<'_>, column: usize) -> Result<Value, DbError> {
    Ok(match v {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => Value::Int(i),
        ValueRef::Real(f) => Value::Float(f),
        ValueRef::Text(t) => {
            Value::Text(String::from_utf8(t.to_vec()).map_err(|e| DbError::Type {
                column,
                expected: "UTF-8 text",
                found: e.to_string(),
            })?)
        }
        ValueRef::Blob(b) => {
            return Err(DbError::Type {
                column,
                expected: "a number or text",
                found: format!("a blob of {} bytes", b.len()),
            });
        }
    })
}

/// Every row of a query (prepared statements are cached per connection).
pub fn query(
    conn: &rusqlite::Connection,
    sql: &str,
    params: &[Value],
) -> Result<Vec<Row>, DbError> {
    let mut stmt = conn.prepare_cached(sql)?;
    let n = stmt.column_count();
    let mut rows = stmt.query(rusqlite::params_from_iter(params.iter()))?;
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        let mut values = Vec::with_capacity(n);
        for i in 0..n {
            values.push(value(r.get_ref(i)?, i)?);
        }
        out.push(Row(values));
    }
    Ok(out)
}

pub fn execute(conn: &rusqlite::Connection, sql: &str, params: &[Value]) -> Result<u64, DbError> {
    let mut stmt = conn.prepare_cached(sql)?;
    Ok(stmt.execute(rusqlite::params_from_iter(params.iter()))? as u64)
}
