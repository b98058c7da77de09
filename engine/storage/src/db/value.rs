//! Values and rows as they cross the connection, whichever engine is behind it.

use chrono::NaiveDateTime;

use super::DbError;
use crate::datetime::parse_naive;

/// A parameter or a column value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Int(i64),
    Float(f64),
    Text(String),
    /// Naive UTC (Optuna's datetimes), or the database clock's local time for heartbeats.
    Time(NaiveDateTime),
    Bool(bool),
}

impl Value {
    fn kind(&self) -> String {
        match self {
            Value::Null => "NULL".into(),
            Value::Int(i) => format!("integer {i}"),
            Value::Float(f) => format!("float {f}"),
            Value::Text(t) => format!("text `{t}`"),
            Value::Time(t) => format!("datetime {t}"),
            Value::Bool(b) => format!("boolean {b}"),
        }
    }
}

impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::Int(v)
    }
}

impl From<i32> for Value {
    fn from(v: i32) -> Self {
        Value::Int(v.into())
    }
}

impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Value::Float(v)
    }
}

impl From<bool> for Value {
    fn from(v: bool) -> Self {
        Value::Bool(v)
    }
}

impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Value::Text(v.to_owned())
    }
}

impl From<&String> for Value {
    fn from(v: &String) -> Self {
        Value::Text(v.clone())
    }
}

impl From<String> for Value {
    fn from(v: String) -> Self {
        Value::Text(v)
    }
}

impl From<NaiveDateTime> for Value {
    fn from(v: NaiveDateTime) -> Self {
        Value::Time(v)
    }
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Self {
        v.map_or(Value::Null, Into::into)
    }
}

impl<T: Clone + Into<Value>> From<&Option<T>> for Value {
    fn from(v: &Option<T>) -> Self {
        v.clone().map_or(Value::Null, Into::into)
    }
}

/// One result row.
#[derive(Debug, Clone, PartialEq)]
pub struct Row(pub Vec<Value>);

impl Row {
    fn at(&self, i: usize) -> Result<&Value, DbError> {
        self.0.get(i).ok_or(DbError::Type {
            column: i,
            expected: "a column",
            found: format!("a row of {} columns", self.0.len()),
        })
    }

    fn wrong(&self, i: usize, expected: &'static str) -> DbError {
        DbError::Type {
            column: i,
            expected,
            found: self.0.get(i).map_or_else(|| "nothing".into(), Value::kind),
        }
    }

    pub fn opt_i64(&self, i: usize) -> Result<Option<i64>, DbError> {
        match self.at(i)? {
            Value::Null => Ok(None),
            Value::Int(v) => Ok(Some(*v)),
            _ => Err(self.wrong(i, "an integer")),
        }
    }

    pub fn i64(&self, i: usize) -> Result<i64, DbError> {
        self.opt_i64(i)?.ok_or_else(|| self.wrong(i, "an integer"))
    }

    /// A float column (an integer is widened: SQLite stores `1.0` in a FLOAT column as `1`).
    pub fn opt_f64(&self, i: usize) -> Result<Option<f64>, DbError> {
        match self.at(i)? {
            Value::Null => Ok(None),
            Value::Float(v) => Ok(Some(*v)),
            Value::Int(v) => Ok(Some(*v as f64)),
            _ => Err(self.wrong(i, "a number")),
        }
    }

    pub fn opt_string(&self, i: usize) -> Result<Option<String>, DbError> {
        match self.at(i)? {
            Value::Null => Ok(None),
            Value::Text(v) => Ok(Some(v.clone())),
            _ => Err(self.wrong(i, "text")),
        }
    }

    pub fn string(&self, i: usize) -> Result<String, DbError> {
        self.opt_string(i)?.ok_or_else(|| self.wrong(i, "text"))
    }

    /// A datetime: SQLite's text form (with or without a fraction) or a `TIMESTAMP`.
    pub fn opt_time(&self, i: usize) -> Result<Option<NaiveDateTime>, DbError> {
        match self.at(i)? {
            Value::Null => Ok(None),
            Value::Time(t) => Ok(Some(*t)),
            Value::Text(t) => parse_naive(t)
                .map(Some)
                .ok_or_else(|| self.wrong(i, "a datetime")),
            _ => Err(self.wrong(i, "a datetime")),
        }
    }

    pub fn bool(&self, i: usize) -> Result<bool, DbError> {
        match self.at(i)? {
            Value::Bool(b) => Ok(*b),
            Value::Int(v) => Ok(*v != 0),
            _ => Err(self.wrong(i, "a boolean")),
        }
    }
}
