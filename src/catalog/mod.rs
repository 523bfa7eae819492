//! The catalog: teams, users, secrets, canvases, elements, warehouse tables and committed data
//! files — in SQLite (embedded, under the data dir; the default) or in PostgreSQL
//! (`catalog.url = "postgres://…"`, shared by several nodes), through one interface
//! ([`db`]). Every process (server or CLI) opens the same catalog, so an admin change takes
//! effect on a running server at its next request.

mod admin;
mod audit;
mod auth;
mod compaction;
pub mod db;
mod flash;
mod leases;
mod links;
mod migrations;
mod migrations_pg;
mod nodes;
mod pending;
mod quotas;
pub mod secrets;
mod sessions;
mod settings;
mod settled;
mod signin_attempts;
mod tables;
mod users;
mod watermarks;
mod workspace;

#[cfg(test)]
mod backend_tests;
#[cfg(test)]
pub(crate) mod testdb;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::config::Config;
use crate::config::catalog::redact;
use db::{Conn, DbError};

pub use admin::{
    Element, NewElement, NewSqlElementRow, Role, SecretInfo, SecretKind, Team, TokenAuth,
};
pub use audit::{AuditEntry, AuditEvent, EventsRequest};
pub use compaction::LiveFile;
pub use links::{InviteInfo, LINK_PREFIX, Link, LinkKind};
pub use nodes::NodeRow;
pub use quotas::Quotas;
pub use sessions::{PAT_PREFIX, PatAuth, PatInfo, SESSION_PREFIX, Session, SessionLimits};
pub use settings::{Change, SettingsChange, TeamSettings};
pub use settled::{REVOCATION_LEASE, Settled};
pub use signin_attempts::AttemptKey;
pub use tables::{DataFile, NewDataFile, SnapshotId, TableSnapshot};
pub use users::{User, normalize_email};
pub use workspace::{CanvasRow, ElementRow, TableStats};

/// What went wrong in the catalog.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// The database (SQLite or PostgreSQL) failed.
    #[error("catalog database: {0}")]
    Db(#[from] DbError),
    /// Opening the file or its directory failed.
    #[error("catalog file: {0}")]
    Io(#[from] std::io::Error),
    /// A named thing does not exist.
    #[error("{0}")]
    NotFound(String),
    /// The action is not allowed (not an owner, events disabled, name taken, …).
    #[error("{0}")]
    Refused(String),
    /// A value given is not acceptable (`field` names it).
    #[error("{message}")]
    Invalid {
        /// The offending field.
        field: &'static str,
        /// Why.
        message: String,
    },
    /// The email already belongs to a user.
    #[error("{0}")]
    Taken(String),
    /// A one-time link was used or has expired.
    #[error("{0}")]
    Gone(String),
    /// The change would leave a team without an owner.
    #[error("a team must keep at least one owner")]
    LastOwner,
    /// A per-team or per-user count is at its ceiling ([`Quotas`]).
    #[error("{0}")]
    LimitReached(String),
    /// A commit named an object whose reservation is gone: the orphan collector judged its
    /// writer dead and may have deleted the object. Write the data again under new paths.
    #[error("object {0} is no longer reserved for this writer; it must be written again")]
    Reclaimed(String),
}

/// Result alias for catalog calls.
pub type Result<T> = std::result::Result<T, CatalogError>;

/// Where the catalog lives.
#[derive(Clone, PartialEq, Eq)]
pub enum Location {
    /// A SQLite file.
    Sqlite(PathBuf),
    /// A PostgreSQL database (`postgres://…` URL).
    Postgres(String),
}

impl Location {
    /// `catalog.url`: empty for the SQLite file `default_path`, else a `postgres://` or
    /// `postgresql://` URL.
    pub fn from_url(url: &str, default_path: PathBuf) -> Result<Location> {
        if url.is_empty() {
            Ok(Location::Sqlite(default_path))
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Ok(Location::Postgres(url.to_string()))
        } else {
            Err(CatalogError::Invalid {
                field: "catalog.url",
                message: format!(
                    "catalog.url must be empty (SQLite under the data dir) or postgres://…, not {}",
                    redact(url)
                ),
            })
        }
    }
}

impl Location {
    /// Where `config` puts the catalog: `catalog.url`, or the SQLite file under the data dir.
    pub fn of(config: &Config) -> Result<Location> {
        Location::from_url(&config.catalog.url, config.catalog_path())
    }
}

impl fmt::Debug for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Sqlite(p) => write!(f, "sqlite:{}", p.display()),
            Location::Postgres(url) => f.write_str(&redact(url)),
        }
    }
}

/// A small pool of connections to one catalog. Calls are short and synchronous; long ones
/// (commits) should run on a blocking thread.
pub struct Catalog {
    conns: Vec<Mutex<Conn>>,
    next: AtomicUsize,
    /// This process as a writer of objects (random per open): owns its reservations.
    owner: String,
    /// Live secrets, checked without a query per request.
    auth: auth::AuthCache,
    /// The WAL whose watermarks this handle reads and raises (`watermarks`).
    wal: std::sync::OnceLock<String>,
    /// Ceilings on what owners and members create ([`Catalog::set_quotas`]).
    quotas: std::sync::RwLock<Quotas>,
    /// How to reach PostgreSQL (`None`: SQLite), for the fresh-read channel.
    pg: Option<tokio_postgres::Config>,
    /// When this node registered ([`Catalog::register_node`]), so its stop marks only itself.
    node_started: std::sync::OnceLock<i64>,
}

impl fmt::Debug for Catalog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Catalog").finish_non_exhaustive()
    }
}

const POOL_SIZE: usize = 4;

impl Catalog {
    /// Opens (creating and migrating if needed) the catalog at `location`.
    pub fn open_location(location: &Location) -> Result<Catalog> {
        match location {
            Location::Sqlite(path) => Catalog::open(path),
            Location::Postgres(url) => Catalog::open_postgres(url),
        }
    }

    /// Opens (creating and migrating if needed) the SQLite catalog at `path`.
    pub fn open(path: &Path) -> Result<Catalog> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let sqlite = |e: rusqlite::Error| CatalogError::Db(e.into());
        let mut conns = Vec::with_capacity(POOL_SIZE);
        for i in 0..POOL_SIZE {
            let mut conn = rusqlite::Connection::open(path).map_err(sqlite)?;
            conn.busy_timeout(Duration::from_secs(10)).map_err(sqlite)?;
            conn.pragma_update(None, "journal_mode", "WAL")
                .map_err(sqlite)?;
            conn.pragma_update(None, "synchronous", "FULL")
                .map_err(sqlite)?;
            if i == 0 {
                migrations::migrate(&mut conn).map_err(sqlite)?;
            }
            conn.pragma_update(None, "foreign_keys", true)
                .map_err(sqlite)?;
            conns.push(Mutex::new(Conn::Sqlite(conn)));
        }
        let auth = rusqlite::Connection::open(path).map_err(sqlite)?;
        auth.busy_timeout(Duration::from_secs(10)).map_err(sqlite)?;
        // It holds password and secret hashes: the owner's alone, even if an older version made
        // it readable to others.
        for suffix in ["", "-wal", "-shm"] {
            let mut p = path.as_os_str().to_owned();
            p.push(suffix);
            crate::files::make_private(Path::new(&p))?;
        }
        Ok(Catalog {
            auth: auth::AuthCache::new(Conn::Sqlite(auth), None),
            conns,
            next: AtomicUsize::new(0),
            owner: new_owner(),
            wal: std::sync::OnceLock::new(),
            quotas: std::sync::RwLock::new(Quotas::NONE),
            pg: None,
            node_started: std::sync::OnceLock::new(),
        })
    }

    /// Opens (migrating if needed) the PostgreSQL catalog at `url`. The database must exist.
    pub fn open_postgres(url: &str) -> Result<Catalog> {
        let config = db::postgres::config(url)?;
        let first = Conn::Pg(Box::new(db::PgConn::open(config.clone())?));
        migrations_pg::migrate(&first)?;
        let mut conns = vec![Mutex::new(first)];
        for _ in 1..POOL_SIZE {
            conns.push(Mutex::new(Conn::Pg(Box::new(db::PgConn::open(
                config.clone(),
            )?))));
        }
        let listener = db::listen::Listener::start(
            config.clone(),
            db::listen::Lease::new(settled::REVOCATION_LEASE),
        );
        if !listener.wait_up(Duration::from_secs(5)) {
            tracing::warn!(
                "catalog notifications are not up yet; secret checks query the catalog each time until they are"
            );
        }
        Ok(Catalog {
            auth: auth::AuthCache::new(
                Conn::Pg(Box::new(db::PgConn::open(config.clone())?)),
                Some(listener),
            ),
            conns,
            next: AtomicUsize::new(0),
            owner: new_owner(),
            wal: std::sync::OnceLock::new(),
            quotas: std::sync::RwLock::new(Quotas::NONE),
            pg: Some(config),
            node_started: std::sync::OnceLock::new(),
        })
    }

    /// Runs `f` on one of the pooled connections: the first free one from a rotating start, so a
    /// call waiting in the database (one team's commit behind another of the same team) holds
    /// up only callers that find every connection busy.
    fn with<T>(&self, f: impl FnOnce(&mut Conn) -> Result<T>) -> Result<T> {
        let n = self.conns.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed) % n;
        let free = (0..n).find_map(|k| match self.conns[(start + k) % n].try_lock() {
            Ok(conn) => Some(conn),
            Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        });
        let mut conn =
            free.unwrap_or_else(|| self.conns[start].lock().unwrap_or_else(|p| p.into_inner()));
        f(&mut conn)
    }

    /// The fresh-read channel between nodes and the requests other nodes send on it
    /// (PostgreSQL; `None` with SQLite, which serves one node).
    pub fn fresh_bus(
        &self,
    ) -> Option<(
        db::bus::Bus,
        tokio::sync::mpsc::UnboundedReceiver<db::bus::CommitAsk>,
    )> {
        self.pg.clone().map(db::bus::Bus::start)
    }

    /// Whether the catalog answers a trivial query.
    pub fn ping(&self) -> bool {
        self.with(|c| Ok(c.query_row("SELECT 1", db::params![], |r| r.get::<i64>(0))?))
            .is_ok()
    }
}

fn new_owner() -> String {
    format!("w_{}", uuid::Uuid::now_v7().simple())
}

/// Milliseconds since the epoch, the catalog's time unit.
pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Overrides;
    use crate::config::tests::env;

    #[test]
    fn the_catalog_url_comes_from_the_environment_and_its_password_stays_out_of_logs() {
        let c = Config::load(
            None,
            env(&[(
                "STOWAGE_CATALOG__URL",
                "postgres://u:hunter2@db:5432/stowage",
            )]),
            &Overrides::default(),
        )
        .unwrap();
        assert!(matches!(
            Location::of(&c).unwrap(),
            Location::Postgres(url) if url.ends_with("@db:5432/stowage")
        ));
        let shown = format!("{:?} {:?}", c, Location::of(&c).unwrap());
        assert!(!shown.contains("hunter2"), "{shown}");
        let d = Config::default();
        assert_eq!(
            Location::of(&d).unwrap(),
            Location::Sqlite(d.catalog_path())
        );
        let mut bad = Config::default();
        bad.catalog.url = "mysql://u:hunter2@db/x".into();
        let err = Location::of(&bad).unwrap_err().to_string();
        assert!(
            err.contains("catalog.url") && !err.contains("hunter2"),
            "{err}"
        );
    }
}
