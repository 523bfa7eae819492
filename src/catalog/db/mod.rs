//! The catalog's database layer: one small, synchronous interface over its two backends, SQLite
//! (embedded, the default) and PostgreSQL (several nodes sharing one catalog).
//!
//! SQL is written once, with `?1`, `?2` placeholders, in the subset both dialects accept
//! (`ON CONFLICT … DO …`, `RETURNING`, `CASE` instead of two-argument `MAX`, `CAST(SUM(…) AS
//! BIGINT)`); the PostgreSQL side rewrites the placeholders to `$1`, `$2` and caches the prepared
//! statement. Values cross the boundary as [`Value`]s ([`ToParam`]) and come back through
//! [`FromCol`], which reads SQLite's dynamic types and PostgreSQL's `BIGINT`/`BOOLEAN`/`BYTEA`/…
//! into the same Rust types.
//!
//! Transactions: SQLite has one writer at a time (`BEGIN IMMEDIATE`) whatever the kind. On
//! PostgreSQL, [`Conn::write_transaction`] runs alone (catalog-wide writes), while
//! [`Conn::team_write_transaction`] runs beside the writes of other teams and
//! [`Conn::shared_write_transaction`] beside every write but a catalog-wide one (advisory locks,
//! see [`postgres`]). One team's writes stay serial on both backends, so within a team commit
//! order is what data-file ids encode. [`Conn::read_transaction`] reads one consistent snapshot.

pub mod bus;
pub mod listen;
pub mod postgres;
mod sqlite;

use std::fmt;

pub use postgres::PgConn;

/// A database error, backend-neutral.
#[derive(Debug)]
pub struct DbError {
    kind: Kind,
    message: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    /// `query_row` found nothing (see [`OptionalExtension`]).
    NoRows,
    /// A unique constraint failed; SQLite names `table.column`, PostgreSQL the constraint.
    Unique(String),
    /// The connection is gone (PostgreSQL); the next call reconnects.
    Closed,
    Other,
}

impl DbError {
    pub(crate) fn other(message: impl Into<String>) -> DbError {
        DbError {
            kind: Kind::Other,
            message: message.into(),
        }
    }

    fn no_rows() -> DbError {
        DbError {
            kind: Kind::NoRows,
            message: "query returned no rows".into(),
        }
    }

    /// Whether this is a unique-constraint failure on `table.column` (SQLite names the columns;
    /// PostgreSQL the index or constraint, `table_column` or `table_column_key`).
    pub fn is_unique_violation(&self, table: &str, column: &str) -> bool {
        match &self.kind {
            Kind::Unique(what) => {
                let pg = format!("{table}_{column}");
                what.contains(&format!("{table}.{column}"))
                    || *what == pg
                    || *what == format!("{pg}_key")
            }
            _ => false,
        }
    }

    /// Whether the connection broke (the call may not have happened).
    pub fn is_closed(&self) -> bool {
        self.kind == Kind::Closed
    }
}

impl fmt::Display for DbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for DbError {}

/// Result of a database call.
pub type DbResult<T> = std::result::Result<T, DbError>;

/// `.optional()` on a single-row result: no row is `None`, not an error.
pub trait OptionalExtension<T> {
    /// `Ok(None)` when the query found no row.
    fn optional(self) -> DbResult<Option<T>>;
}

impl<T> OptionalExtension<T> for DbResult<T> {
    fn optional(self) -> DbResult<Option<T>> {
        match self {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.kind == Kind::NoRows => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// A parameter value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// SQL NULL.
    Null,
    /// Integers (and booleans, stored as 0/1).
    I64(i64),
    /// Floating point.
    F64(f64),
    /// Text.
    Text(String),
    /// Bytes.
    Blob(Vec<u8>),
}

/// A Rust value usable as a statement parameter.
pub trait ToParam {
    /// The value to bind.
    fn to_value(&self) -> Value;
}

macro_rules! int_param {
    ($($t:ty),*) => {$(
        impl ToParam for $t {
            fn to_value(&self) -> Value {
                Value::I64(*self as i64)
            }
        }
    )*};
}
int_param!(i64, i32, u32, u16, u8);

impl ToParam for bool {
    fn to_value(&self) -> Value {
        Value::I64(*self as i64)
    }
}
impl ToParam for f64 {
    fn to_value(&self) -> Value {
        Value::F64(*self)
    }
}
impl ToParam for str {
    fn to_value(&self) -> Value {
        Value::Text(self.to_string())
    }
}
impl ToParam for String {
    fn to_value(&self) -> Value {
        Value::Text(self.clone())
    }
}
impl ToParam for [u8] {
    fn to_value(&self) -> Value {
        Value::Blob(self.to_vec())
    }
}
impl ToParam for Vec<u8> {
    fn to_value(&self) -> Value {
        Value::Blob(self.clone())
    }
}
impl<T: ToParam + ?Sized> ToParam for &T {
    fn to_value(&self) -> Value {
        (**self).to_value()
    }
}
impl<T: ToParam> ToParam for Option<T> {
    fn to_value(&self) -> Value {
        self.as_ref().map_or(Value::Null, ToParam::to_value)
    }
}

/// Statement parameters: `params![a, b]` or an array of one type (`[id, team]`).
pub trait Params {
    /// The values, in placeholder order.
    fn values(&self) -> Vec<Value>;
}

impl Params for &[&dyn ToParam] {
    fn values(&self) -> Vec<Value> {
        self.iter().map(|p| p.to_value()).collect()
    }
}

impl<T: ToParam, const N: usize> Params for [T; N] {
    fn values(&self) -> Vec<Value> {
        self.iter().map(ToParam::to_value).collect()
    }
}

/// Parameters of mixed types: `params![id, 3_i64, None::<String>]`.
#[macro_export]
macro_rules! db_params {
    ($($p:expr),* $(,)?) => {
        &[$(&$p as &dyn $crate::catalog::db::ToParam),*] as &[&dyn $crate::catalog::db::ToParam]
    };
}
pub use crate::db_params as params;

/// One result row.
pub enum Row<'a> {
    /// A SQLite row.
    Sqlite(&'a rusqlite::Row<'a>),
    /// A PostgreSQL row.
    Pg(&'a tokio_postgres::Row),
}

impl Row<'_> {
    /// Column `i` (0-based) as `T`.
    pub fn get<T: FromCol>(&self, i: usize) -> DbResult<T> {
        match self {
            Row::Sqlite(r) => Ok(r.get::<_, T>(i)?),
            Row::Pg(r) => T::from_pg(r, i),
        }
    }
}

/// A Rust type a column can be read as, on either backend.
pub trait FromCol: rusqlite::types::FromSql + Sized {
    /// Reads a possibly-NULL PostgreSQL column.
    fn from_pg_opt(row: &tokio_postgres::Row, i: usize) -> DbResult<Option<Self>>;
    /// Reads a PostgreSQL column that must not be NULL.
    fn from_pg(row: &tokio_postgres::Row, i: usize) -> DbResult<Self> {
        Self::from_pg_opt(row, i)?
            .ok_or_else(|| DbError::other(format!("column {i} is NULL where a value was expected")))
    }
}

impl<T: FromCol> FromCol for Option<T> {
    fn from_pg_opt(row: &tokio_postgres::Row, i: usize) -> DbResult<Option<Self>> {
        Ok(Some(T::from_pg_opt(row, i)?))
    }
}

impl FromCol for i64 {
    fn from_pg_opt(row: &tokio_postgres::Row, i: usize) -> DbResult<Option<Self>> {
        postgres::get_i64(row, i)
    }
}
impl FromCol for bool {
    fn from_pg_opt(row: &tokio_postgres::Row, i: usize) -> DbResult<Option<Self>> {
        Ok(postgres::get_i64(row, i)?.map(|v| v != 0))
    }
}
impl FromCol for f64 {
    fn from_pg_opt(row: &tokio_postgres::Row, i: usize) -> DbResult<Option<Self>> {
        postgres::get_f64(row, i)
    }
}
impl FromCol for String {
    fn from_pg_opt(row: &tokio_postgres::Row, i: usize) -> DbResult<Option<Self>> {
        Ok(row.try_get::<_, Option<String>>(i)?)
    }
}
impl FromCol for Vec<u8> {
    fn from_pg_opt(row: &tokio_postgres::Row, i: usize) -> DbResult<Option<Self>> {
        Ok(row.try_get::<_, Option<Vec<u8>>>(i)?)
    }
}

/// Which database a connection talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// Embedded SQLite.
    Sqlite,
    /// PostgreSQL.
    Postgres,
}

/// One connection of the catalog's pool.
pub enum Conn {
    /// SQLite.
    Sqlite(rusqlite::Connection),
    /// PostgreSQL.
    Pg(Box<PgConn>),
}

impl Conn {
    /// The backend.
    pub fn dialect(&self) -> Dialect {
        match self {
            Conn::Sqlite(_) => Dialect::Sqlite,
            Conn::Pg(_) => Dialect::Postgres,
        }
    }

    /// Runs one statement; returns the number of rows changed.
    pub fn execute(&self, sql: &str, params: impl Params) -> DbResult<usize> {
        let values = params.values();
        match self {
            Conn::Sqlite(c) => sqlite::execute(c, sql, &values),
            Conn::Pg(c) => c.execute(sql, &values).map(|n| n as usize),
        }
    }

    /// Runs several statements without parameters.
    pub fn execute_batch(&self, sql: &str) -> DbResult<()> {
        match self {
            Conn::Sqlite(c) => Ok(c.execute_batch(sql)?),
            Conn::Pg(c) => c.batch(sql),
        }
    }

    /// The first row mapped by `f`; [`OptionalExtension::optional`] turns "no row" into `None`.
    pub fn query_row<T>(
        &self,
        sql: &str,
        params: impl Params,
        f: impl FnOnce(&Row<'_>) -> DbResult<T>,
    ) -> DbResult<T> {
        let values = params.values();
        match self {
            Conn::Sqlite(c) => sqlite::query_row(c, sql, &values, f),
            Conn::Pg(c) => c.query_row(sql, &values, f),
        }
    }

    /// Every row, mapped by `f`.
    pub fn query_all<T>(
        &self,
        sql: &str,
        params: impl Params,
        f: impl FnMut(&Row<'_>) -> DbResult<T>,
    ) -> DbResult<Vec<T>> {
        let values = params.values();
        match self {
            Conn::Sqlite(c) => sqlite::query_all(c, sql, &values, f),
            Conn::Pg(c) => c.query_all(sql, &values, f),
        }
    }

    /// A statement to run (statements are cached per connection on both backends).
    pub fn prepare<'c>(&'c self, sql: &str) -> DbResult<Stmt<'c>> {
        Ok(Stmt {
            conn: self,
            sql: sql.to_string(),
        })
    }

    /// Same as [`Conn::prepare`].
    pub fn prepare_cached<'c>(&'c self, sql: &str) -> DbResult<Stmt<'c>> {
        self.prepare(sql)
    }

    /// A transaction that may write anything: it runs alone (see the module doc).
    pub fn write_transaction(&self) -> DbResult<Tx<'_>> {
        self.begin_write(postgres::WriteLocks::CatalogWide)
    }

    /// A transaction that writes only `team`'s rows (and rows no other writer names): it waits
    /// for the team's other writes and for catalog-wide ones, not for other teams'.
    pub fn team_write_transaction(&self, team: &str) -> DbResult<Tx<'_>> {
        self.begin_write(postgres::WriteLocks::Team(team))
    }

    /// A transaction whose writes are single-row changes of rows no other writer names (object
    /// reservations): it waits only for catalog-wide writes.
    pub fn shared_write_transaction(&self) -> DbResult<Tx<'_>> {
        self.begin_write(postgres::WriteLocks::Shared)
    }

    fn begin_write(&self, locks: postgres::WriteLocks<'_>) -> DbResult<Tx<'_>> {
        match self {
            Conn::Sqlite(c) => c.execute_batch("BEGIN IMMEDIATE")?,
            Conn::Pg(c) => c.begin_write(locks)?,
        }
        Ok(Tx {
            conn: self,
            done: false,
        })
    }

    /// Same as [`Conn::write_transaction`] (SQLite's deferred transactions also take the write
    /// lock at their first write; one lock up front is simpler and as serial).
    pub fn transaction(&self) -> DbResult<Tx<'_>> {
        self.write_transaction()
    }

    /// A read-only transaction: every query sees the same snapshot.
    pub fn read_transaction(&self) -> DbResult<Tx<'_>> {
        match self {
            Conn::Sqlite(c) => c.execute_batch("BEGIN DEFERRED")?,
            Conn::Pg(c) => c.begin("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")?,
        }
        Ok(Tx {
            conn: self,
            done: false,
        })
    }

    /// Inside a transaction that changes what a secret check may have cached: tells every
    /// process sharing the catalog (PostgreSQL `NOTIFY`, delivered at commit). SQLite needs
    /// nothing: readers see `PRAGMA data_version` change.
    pub fn notify_auth_changed(&self) -> DbResult<()> {
        match self {
            Conn::Sqlite(_) => Ok(()),
            Conn::Pg(c) => c.batch(&format!("NOTIFY {}", postgres::CHANNEL)),
        }
    }
}

/// A transaction; rolled back when dropped without [`Tx::commit`].
pub struct Tx<'c> {
    conn: &'c Conn,
    done: bool,
}

impl Tx<'_> {
    /// Commits.
    pub fn commit(mut self) -> DbResult<()> {
        self.done = true;
        self.conn.execute_batch("COMMIT")
    }
}

impl std::ops::Deref for Tx<'_> {
    type Target = Conn;
    fn deref(&self) -> &Conn {
        self.conn
    }
}

impl Drop for Tx<'_> {
    fn drop(&mut self) {
        if !self.done {
            match self.conn {
                Conn::Sqlite(c) => {
                    let _ = c.execute_batch("ROLLBACK");
                }
                Conn::Pg(c) => c.rollback(),
            }
        }
    }
}

/// A statement bound to a connection (the shape of `rusqlite`'s, so calls read the same).
pub struct Stmt<'c> {
    conn: &'c Conn,
    sql: String,
}

impl Stmt<'_> {
    /// Every row, mapped by `f`, as an iterator of results.
    pub fn query_map<T>(
        &mut self,
        params: impl Params,
        mut f: impl FnMut(&Row<'_>) -> DbResult<T>,
    ) -> DbResult<std::vec::IntoIter<DbResult<T>>> {
        let rows = self.conn.query_all(&self.sql, params, |r| Ok(f(r)))?;
        Ok(rows.into_iter())
    }

    /// The first row mapped by `f`.
    pub fn query_row<T>(
        &mut self,
        params: impl Params,
        f: impl FnOnce(&Row<'_>) -> DbResult<T>,
    ) -> DbResult<T> {
        self.conn.query_row(&self.sql, params, f)
    }

    /// Runs the statement; returns the number of rows changed.
    pub fn execute(&mut self, params: impl Params) -> DbResult<usize> {
        self.conn.execute(&self.sql, params)
    }
}
