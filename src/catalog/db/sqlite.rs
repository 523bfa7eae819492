//! The SQLite side of the database layer: binding [`Value`]s, running cached statements, and
//! turning `rusqlite` errors into [`DbError`]s.

use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{Connection, ErrorCode, ToSql};

use super::{DbError, DbResult, Kind, Row, Value};

impl ToSql for Value {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match self {
            Value::Null => ValueRef::Null,
            Value::I64(v) => ValueRef::Integer(*v),
            Value::F64(v) => ValueRef::Real(*v),
            Value::Text(s) => ValueRef::Text(s.as_bytes()),
            Value::Blob(b) => ValueRef::Blob(b),
        }))
    }
}

impl From<rusqlite::Error> for DbError {
    fn from(e: rusqlite::Error) -> DbError {
        let kind = match &e {
            rusqlite::Error::QueryReturnedNoRows => Kind::NoRows,
            rusqlite::Error::SqliteFailure(f, Some(m))
                if f.code == ErrorCode::ConstraintViolation
                    && m.starts_with("UNIQUE constraint failed") =>
            {
                Kind::Unique(m.clone())
            }
            _ => Kind::Other,
        };
        DbError {
            kind,
            message: e.to_string(),
        }
    }
}

pub(super) fn execute(c: &Connection, sql: &str, values: &[Value]) -> DbResult<usize> {
    Ok(c.prepare_cached(sql)?
        .execute(rusqlite::params_from_iter(values))?)
}

pub(super) fn query_row<T>(
    c: &Connection,
    sql: &str,
    values: &[Value],
    f: impl FnOnce(&Row<'_>) -> DbResult<T>,
) -> DbResult<T> {
    let mut st = c.prepare_cached(sql)?;
    let mut rows = st.query(rusqlite::params_from_iter(values))?;
    match rows.next()? {
        Some(r) => f(&Row::Sqlite(r)),
        None => Err(DbError::no_rows()),
    }
}

pub(super) fn query_all<T>(
    c: &Connection,
    sql: &str,
    values: &[Value],
    mut f: impl FnMut(&Row<'_>) -> DbResult<T>,
) -> DbResult<Vec<T>> {
    let mut st = c.prepare_cached(sql)?;
    let mut rows = st.query(rusqlite::params_from_iter(values))?;
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        out.push(f(&Row::Sqlite(r))?);
    }
    Ok(out)
}
