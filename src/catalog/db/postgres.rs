//! The PostgreSQL side of the database layer, kept synchronous like the rest of the catalog:
//! `tokio-postgres` connections run as tasks on one small runtime of their own (a dedicated
//! thread), and catalog calls wait for their results with `futures::executor::block_on`, which
//! works from the server's async workers and from plain threads alike (no nested runtime).
//!
//! A broken connection (PostgreSQL restarting) fails the call in flight; the next call on that
//! pool slot connects again.
//!
//! Write transactions come in three kinds, all through transaction-scoped advisory locks:
//! - a *catalog-wide* write (accounts, sessions, secrets, settings, sign-in attempts) takes
//!   [`WRITE_LOCK`] exclusively, so it runs alone, exactly as under SQLite's `BEGIN IMMEDIATE`;
//! - a *team* write (a flush's commit, a compaction's swap) takes [`WRITE_LOCK`] shared and its
//!   team's lock ([`TEAM_LOCK_CLASS`], [`team_lock_key`]) exclusively: one team's writes stay
//!   serial (its file ids, schemas and watermarks are read and written as before), while writes of
//!   different teams run side by side and meet only on rows (PostgreSQL's row locks);
//! - a *shared* write (reserving or releasing objects, the orphan collector's sweep of stale
//!   reservations, secrets' `last_used_at`: single-row changes that meet other writes only on
//!   the row both change) takes
//!   [`WRITE_LOCK`] shared only.
//!
//! Every guarantee that rested on writers taking turns still does where it is needed: a
//! catalog-wide write waits for every team write in flight and holds new ones back, so it sees
//! and changes the catalog as if it were alone.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::OnceLock;
use std::time::Duration;

use bytes::BytesMut;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{IsNull, ToSql, Type, to_sql_checked};
use tokio_postgres::{Client, NoTls, Statement};

use super::{DbError, DbResult, Kind, Row, Value};

/// Advisory lock every write transaction holds until it ends: exclusively for catalog-wide
/// writes, shared for team and shared writes.
pub const WRITE_LOCK: i64 = 0x7374_6f77_0001;
/// Class (first key, in PostgreSQL's two-`int4` key space, apart from the `bigint` keys above)
/// of the per-team write locks; the second key is [`team_lock_key`].
pub const TEAM_LOCK_CLASS: i32 = 0x7374_6f77;
/// How long a write transaction waits for its locks (SQLite's busy timeout is 10 s too).
pub const WRITE_LOCK_WAIT: &str = "10s";
/// A write transaction idle this long (between statements) is ended by the server.
pub const WRITE_IDLE_LIMIT: &str = "60s";
/// Advisory lock held while migrating.
pub const MIGRATE_LOCK: i64 = 0x7374_6f77_0002;
/// `LISTEN`/`NOTIFY` channel of changes that affect cached secret checks.
pub const CHANNEL: &str = "stowage_catalog";

/// The runtime the connection tasks run on.
pub fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("catalog-pg")
            .enable_all()
            .build()
            .expect("the catalog's PostgreSQL runtime starts")
    })
}

/// Runs `fut` on the catalog runtime and waits for it from any thread.
pub fn run<T: Send + 'static>(fut: impl Future<Output = T> + Send + 'static) -> T {
    futures::executor::block_on(runtime().spawn(fut)).expect("catalog PostgreSQL task panicked")
}

/// Parses a `postgres://` URL, with a connect timeout and TCP keepalives unless it names its own
/// (`?connect_timeout=…&keepalives_idle=…`, as libpq). Keepalives (10 s idle, then 3 probes
/// 5 s apart) and a 30 s TCP user timeout make a connection whose server vanished without a word
/// (host down, network cut) fail within about half a minute instead of hanging for hours — for
/// the listening connection that is what stops the secret cache being trusted.
pub fn config(url: &str) -> DbResult<tokio_postgres::Config> {
    let mut config: tokio_postgres::Config = url
        .parse()
        .map_err(|e| DbError::other(format!("catalog.url is not a PostgreSQL URL: {e}")))?;
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(Duration::from_secs(10));
    }
    if config.get_keepalives_idle() == tokio_postgres::Config::new().get_keepalives_idle() {
        config.keepalives_idle(Duration::from_secs(10));
    }
    if config.get_keepalives_interval().is_none() {
        config.keepalives_interval(Duration::from_secs(5));
    }
    if config.get_keepalives_retries().is_none() {
        config.keepalives_retries(3);
    }
    if config.get_tcp_user_timeout().is_none() {
        config.tcp_user_timeout(Duration::from_secs(30));
    }
    Ok(config)
}

/// Opens a client whose connection task runs on the catalog runtime.
pub fn connect(config: &tokio_postgres::Config) -> DbResult<Client> {
    let config = config.clone();
    run(async move {
        let (client, conn) = config.connect(NoTls).await?;
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::warn!(error = %e, "catalog PostgreSQL connection ended");
            }
        });
        Ok(client)
    })
}

/// One pooled connection: (re)connected on demand, with its prepared statements.
pub struct PgConn {
    config: tokio_postgres::Config,
    client: RefCell<Option<Client>>,
    statements: RefCell<HashMap<String, Statement>>,
}

impl PgConn {
    /// Connects now (so a wrong URL fails at open).
    pub fn open(config: tokio_postgres::Config) -> DbResult<PgConn> {
        let client = connect(&config)?;
        Ok(PgConn {
            config,
            client: RefCell::new(Some(client)),
            statements: RefCell::new(HashMap::new()),
        })
    }

    /// Runs `f` with a live client, reconnecting first if the last one broke; forgets the
    /// client if the call fails because its connection closed.
    fn with_client<T>(&self, f: impl FnOnce(&Client) -> DbResult<T>) -> DbResult<T> {
        let mut slot = self.client.borrow_mut();
        if slot.as_ref().is_none_or(Client::is_closed) {
            *slot = None;
            self.statements.borrow_mut().clear();
            *slot = Some(connect(&self.config)?);
        }
        let client = slot.as_ref().expect("connected above");
        let out = f(client);
        if out.is_err() && client.is_closed() {
            *slot = None;
        }
        out
    }

    fn statement(&self, client: &Client, sql: &str) -> DbResult<Statement> {
        if let Some(st) = self.statements.borrow().get(sql) {
            return Ok(st.clone());
        }
        let st = futures::executor::block_on(client.prepare(&translate(sql)))?;
        let mut cache = self.statements.borrow_mut();
        if cache.len() >= 512 {
            cache.clear();
        }
        cache.insert(sql.to_string(), st.clone());
        Ok(st)
    }

    fn rows(&self, sql: &str, values: &[Value]) -> DbResult<Vec<tokio_postgres::Row>> {
        self.with_client(|client| {
            let st = self.statement(client, sql)?;
            let params: Vec<&(dyn ToSql + Sync)> =
                values.iter().map(|v| v as &(dyn ToSql + Sync)).collect();
            Ok(futures::executor::block_on(client.query(&st, &params))?)
        })
    }

    pub(super) fn execute(&self, sql: &str, values: &[Value]) -> DbResult<u64> {
        self.with_client(|client| {
            let st = self.statement(client, sql)?;
            let params: Vec<&(dyn ToSql + Sync)> =
                values.iter().map(|v| v as &(dyn ToSql + Sync)).collect();
            Ok(futures::executor::block_on(client.execute(&st, &params))?)
        })
    }

    pub(super) fn batch(&self, sql: &str) -> DbResult<()> {
        self.with_client(|client| Ok(futures::executor::block_on(client.batch_execute(sql))?))
    }

    pub(super) fn query_row<T>(
        &self,
        sql: &str,
        values: &[Value],
        f: impl FnOnce(&Row<'_>) -> DbResult<T>,
    ) -> DbResult<T> {
        match self.rows(sql, values)?.first() {
            Some(r) => f(&Row::Pg(r)),
            None => Err(DbError::no_rows()),
        }
    }

    pub(super) fn query_all<T>(
        &self,
        sql: &str,
        values: &[Value],
        mut f: impl FnMut(&Row<'_>) -> DbResult<T>,
    ) -> DbResult<Vec<T>> {
        self.rows(sql, values)?
            .iter()
            .map(|r| f(&Row::Pg(r)))
            .collect()
    }

    /// Ends the open transaction, if the connection is still up (a broken connection's
    /// transaction is gone with it; never reconnects just to roll back).
    pub(super) fn rollback(&self) {
        let slot = self.client.borrow();
        if let Some(client) = slot.as_ref().filter(|c| !c.is_closed()) {
            let _ = futures::executor::block_on(client.batch_execute("ROLLBACK"));
        }
    }

    /// Begins a write transaction holding `locks` (see the module doc): waits at most
    /// [`WRITE_LOCK_WAIT`] for them (then fails, as SQLite's busy timeout does), and has the
    /// server end the session if the transaction then sits idle for [`WRITE_IDLE_LIMIT`] — a
    /// node that hung or vanished with a lock must not stop other nodes' writes for longer than
    /// that. One round trip.
    pub(super) fn begin_write(&self, locks: WriteLocks<'_>) -> DbResult<()> {
        let locks = match locks {
            WriteLocks::CatalogWide => format!("SELECT pg_advisory_xact_lock({WRITE_LOCK})"),
            WriteLocks::Shared => format!("SELECT pg_advisory_xact_lock_shared({WRITE_LOCK})"),
            WriteLocks::Team(team) => format!(
                "SELECT pg_advisory_xact_lock_shared({WRITE_LOCK}); \
                 SELECT pg_advisory_xact_lock({TEAM_LOCK_CLASS}, {})",
                team_lock_key(team)
            ),
        };
        self.begin(&format!(
            "BEGIN; SET LOCAL lock_timeout = '{WRITE_LOCK_WAIT}'; \
             SET LOCAL idle_in_transaction_session_timeout = '{WRITE_IDLE_LIMIT}'; {locks}"
        ))
    }

    /// Starts a transaction with `sql`; if that fails half way, nothing stays open.
    pub(super) fn begin(&self, sql: &str) -> DbResult<()> {
        let out = self.batch(sql);
        if out.is_err() {
            self.rollback();
        }
        out
    }
}

/// Which advisory locks a write transaction takes (see the module doc).
#[derive(Debug, Clone, Copy)]
pub enum WriteLocks<'a> {
    /// [`WRITE_LOCK`] exclusively: the transaction runs alone.
    CatalogWide,
    /// [`WRITE_LOCK`] shared, and the lock of this team exclusively.
    Team(&'a str),
    /// [`WRITE_LOCK`] shared only.
    Shared,
}

/// The second key of `team`'s write lock: FNV-1a of its id, folded to 32 bits. Two teams that
/// share a key only take turns, as every writer did before per-team locks.
pub fn team_lock_key(team: &str) -> i32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in team.bytes() {
        h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
    }
    h as i32
}

/// `?1` → `$1`, outside string literals and quoted identifiers.
pub fn translate(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut quote: Option<char> = None;
    for ch in sql.chars() {
        match quote {
            Some(q) if ch == q => quote = None,
            Some(_) => {}
            None if ch == '\'' || ch == '"' => quote = Some(ch),
            None if ch == '?' => {
                out.push('$');
                continue;
            }
            None => {}
        }
        out.push(ch);
    }
    out
}

impl From<tokio_postgres::Error> for DbError {
    fn from(e: tokio_postgres::Error) -> DbError {
        let kind = if e.is_closed() {
            Kind::Closed
        } else if e.code() == Some(&SqlState::UNIQUE_VIOLATION) {
            Kind::Unique(
                e.as_db_error()
                    .and_then(|d| d.constraint())
                    .unwrap_or_default()
                    .to_string(),
            )
        } else {
            Kind::Other
        };
        let message = match e.as_db_error() {
            Some(d) => format!("{}: {}", d.severity(), d.message()),
            None => e.to_string(),
        };
        DbError { kind, message }
    }
}

impl ToSql for Value {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match (self, ty) {
            (Value::Null, _) => Ok(IsNull::Yes),
            (Value::I64(v), &Type::INT8) => v.to_sql(ty, out),
            (Value::I64(v), &Type::INT4) => i32::try_from(*v)?.to_sql(ty, out),
            (Value::I64(v), &Type::INT2) => i16::try_from(*v)?.to_sql(ty, out),
            (Value::I64(v), &Type::BOOL) => (*v != 0).to_sql(ty, out),
            (Value::I64(v), &Type::FLOAT8) => (*v as f64).to_sql(ty, out),
            (Value::I64(v), _) => v.to_string().to_sql(&Type::TEXT, out),
            (Value::F64(v), &Type::FLOAT4) => (*v as f32).to_sql(ty, out),
            (Value::F64(v), &Type::FLOAT8) => v.to_sql(ty, out),
            (Value::F64(v), _) => v.to_string().to_sql(&Type::TEXT, out),
            (Value::Text(s), _) => s.as_str().to_sql(&Type::TEXT, out),
            (Value::Blob(b), &Type::BYTEA) => b.as_slice().to_sql(ty, out),
            (Value::Blob(_), _) => Err(format!("cannot bind bytes to a {ty} parameter").into()),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

/// The type of column `i`.
fn column_type(row: &tokio_postgres::Row, i: usize) -> DbResult<Type> {
    Ok(row
        .columns()
        .get(i)
        .ok_or_else(|| DbError::other(format!("no column {i}")))?
        .type_()
        .clone())
}

/// An integer-like column (`BIGINT`, `INTEGER`, `SMALLINT`, `BOOLEAN`).
pub(super) fn get_i64(row: &tokio_postgres::Row, i: usize) -> DbResult<Option<i64>> {
    let ty = column_type(row, i)?;
    Ok(match ty {
        Type::INT8 => row.try_get::<_, Option<i64>>(i)?,
        Type::INT4 => row.try_get::<_, Option<i32>>(i)?.map(i64::from),
        Type::INT2 => row.try_get::<_, Option<i16>>(i)?.map(i64::from),
        Type::BOOL => row.try_get::<_, Option<bool>>(i)?.map(i64::from),
        other => {
            return Err(DbError::other(format!(
                "column {i} is {other}, not an integer"
            )));
        }
    })
}

/// A floating-point column (or an integer one).
pub(super) fn get_f64(row: &tokio_postgres::Row, i: usize) -> DbResult<Option<f64>> {
    let ty = column_type(row, i)?;
    Ok(match ty {
        Type::FLOAT8 => row.try_get::<_, Option<f64>>(i)?,
        Type::FLOAT4 => row.try_get::<_, Option<f32>>(i)?.map(f64::from),
        _ => get_i64(row, i)?.map(|v| v as f64),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::catalog::redact;

    #[test]
    fn placeholders_are_rewritten_outside_literals() {
        assert_eq!(
            translate("SELECT '?1', \"a?\" FROM t WHERE a = ?1 AND b = ?12"),
            "SELECT '?1', \"a?\" FROM t WHERE a = $1 AND b = $12"
        );
    }

    #[test]
    fn dead_peers_are_noticed_unless_the_url_says_otherwise() {
        let c = config("postgres://u@db/x").unwrap();
        assert_eq!(c.get_keepalives_idle(), Duration::from_secs(10));
        assert_eq!(c.get_tcp_user_timeout(), Some(&Duration::from_secs(30)));
        let c = config("postgres://u@db/x?keepalives_idle=60&connect_timeout=3").unwrap();
        assert_eq!(c.get_keepalives_idle(), Duration::from_secs(60));
        assert_eq!(c.get_connect_timeout(), Some(&Duration::from_secs(3)));
    }

    #[test]
    fn passwords_stay_out_of_logs() {
        assert_eq!(
            redact("postgres://u:secret@db:5432/x"),
            "postgres://u:***@db:5432/x"
        );
        assert_eq!(redact("postgres://db/x"), "postgres://db/x");
        assert_eq!(
            redact("postgres://u:p@ss@db/x?sslmode=disable&password=s3cret"),
            "postgres://u:***@db/x?sslmode=disable&password=***"
        );
        assert_eq!(redact("postgres://db/x?a=1"), "postgres://db/x?a=1");
        assert_eq!(redact("postgres://u@db/x"), "postgres://u@db/x");
    }
}
