//! Test fixture: each catalog test runs once per backend — a fresh SQLite file in a temp dir
//! and a fresh database on the process's throwaway PostgreSQL cluster (`tests/common/pg.rs`).

use std::path::PathBuf;

use super::{Catalog, Location};

#[path = "../../tests/common/pg.rs"]
pub mod pg;

/// One empty catalog to open (possibly several times: "another process").
pub struct TestDb {
    location: Location,
    _dir: Option<tempfile::TempDir>,
}

impl TestDb {
    /// A fresh SQLite catalog.
    pub fn sqlite() -> TestDb {
        let dir = tempfile::tempdir().unwrap();
        let path: PathBuf = dir.path().join("catalog.sqlite");
        TestDb {
            location: Location::Sqlite(path),
            _dir: Some(dir),
        }
    }

    /// A fresh PostgreSQL catalog (a new database).
    pub fn postgres() -> TestDb {
        TestDb {
            location: Location::Postgres(pg::database_url()),
            _dir: None,
        }
    }

    /// Opens it, as a process would.
    pub fn open(&self) -> Catalog {
        Catalog::open_location(&self.location)
            .unwrap_or_else(|e| panic!("opening {:?}: {e}", self.location))
    }

    /// A fresh catalog with one team `t`; its id.
    pub fn open_with_team(&self) -> (Catalog, String) {
        let c = self.open();
        let team = c.create_team("t").unwrap();
        (c, team)
    }

    /// Whether this is the PostgreSQL one.
    pub fn is_postgres(&self) -> bool {
        matches!(self.location, Location::Postgres(_))
    }

    /// Where it is.
    pub fn location(&self) -> &Location {
        &self.location
    }
}

/// A fresh catalog on each backend; the test body runs for each (`for db in each() { … }`).
pub fn each() -> impl Iterator<Item = TestDb> {
    [false, true].into_iter().map(|pg| {
        let db = if pg {
            TestDb::postgres()
        } else {
            TestDb::sqlite()
        };
        eprintln!("--- backend: {:?}", db.location);
        db
    })
}
