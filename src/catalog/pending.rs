//! Reservations of objects that are written but not committed yet, so that the orphan collector
//! never deletes an object a live writer may still commit. A writer reserves a path before it
//! puts the object; the commit that names the object consumes the reservation in the same
//! transaction (and fails with [`CatalogError::Reclaimed`] if it is gone). The collector deletes
//! another writer's reservation only when that writer's heartbeat is older than the grace, and
//! only then the object — so whatever the timing, an object is deleted only if its commit can no
//! longer succeed.

use std::collections::HashSet;

use super::db::{Conn, DbResult, params};

use super::{Catalog, CatalogError, Result, now_ms};

impl Catalog {
    /// This process's writer id.
    pub fn writer_id(&self) -> &str {
        &self.owner
    }

    /// Reserves `paths` for this writer (before their objects are put). Runs beside every
    /// write but the collector's: each path is new and its own writer's.
    pub fn reserve_objects(&self, paths: &[String]) -> Result<()> {
        self.with(|c| {
            let tx = c.shared_write_transaction()?;
            let now = now_ms();
            for p in paths {
                tx.execute(
                    "INSERT INTO pending_objects (path, owner, heartbeat_at) VALUES (?1, ?2, ?3)
                     ON CONFLICT (path) DO UPDATE SET owner = excluded.owner, heartbeat_at = excluded.heartbeat_at",
                    params![p, self.owner, now],
                )?;
            }
            tx.commit()?;
            Ok(())
        })
    }

    /// Drops reservations of objects this writer abandoned (and deleted).
    pub fn release_objects(&self, paths: &[String]) -> Result<()> {
        self.with(|c| {
            let tx = c.shared_write_transaction()?;
            for p in paths {
                tx.execute(
                    "DELETE FROM pending_objects WHERE path = ?1 AND owner = ?2",
                    params![p, self.owner],
                )?;
            }
            tx.commit()?;
            Ok(())
        })
    }

    /// Tells collectors this writer is alive; returns how many reservations it holds.
    pub fn heartbeat(&self) -> Result<usize> {
        self.with(|c| {
            Ok(c.execute(
                "UPDATE pending_objects SET heartbeat_at = ?1 WHERE owner = ?2",
                params![now_ms(), self.owner],
            )?)
        })
    }

    /// For the orphan collector, in one transaction: drops the reservations of other writers
    /// silent since `stale_before_ms` (their commits will now fail), then returns every path
    /// that must be kept — committed (live or retired) or still reserved.
    ///
    /// Commits run beside it (PostgreSQL): a commit consuming a reservation and this sweep
    /// dropping it meet on that row, so exactly one of them deletes it — the sweep waits for a
    /// commit in flight and then finds the row gone, or the commit finds it gone and fails — and
    /// the paths are read in one statement, one snapshot, where a committing object is in
    /// `pending_objects` before its commit and in `data_files` after it.
    pub fn paths_to_keep(&self, stale_before_ms: i64) -> Result<HashSet<String>> {
        self.with(|c| {
            let tx = c.shared_write_transaction()?;
            let dropped = tx.execute(
                "DELETE FROM pending_objects WHERE owner != ?1 AND heartbeat_at < ?2",
                params![self.owner, stale_before_ms],
            )?;
            if dropped > 0 {
                tracing::warn!(
                    reservations = dropped,
                    "dropped reservations of a writer silent longer than the orphan grace"
                );
            }
            let keep = {
                let mut st = tx.prepare(
                    "SELECT path FROM data_files UNION ALL SELECT path FROM pending_objects",
                )?;
                let rows = st.query_map(params![], |r| r.get::<String>(0))?;
                rows.collect::<DbResult<HashSet<_>>>()?
            };
            tx.commit()?;
            Ok(keep)
        })
    }
}

/// Inside a commit: consumes this writer's reservation of `path`, or fails the commit.
pub(super) fn consume(tx: &Conn, owner: &str, path: &str) -> Result<()> {
    let n = tx.execute(
        "DELETE FROM pending_objects WHERE path = ?1 AND owner = ?2",
        params![path, owner],
    )?;
    if n == 1 {
        Ok(())
    } else {
        Err(CatalogError::Reclaimed(path.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::NewDataFile;
    use crate::model::TeamId;

    fn file(path: &str) -> NewDataFile {
        NewDataFile {
            table: "x".into(),
            path: path.into(),
            partition: "date=2024-01-01".into(),
            rows: 1,
            bytes: 1,
            min_ts: None,
            max_ts: None,
            schema: Default::default(),
        }
    }

    #[test]
    fn a_commit_needs_a_live_reservation_and_collectors_spare_live_writers() {
        for db in crate::catalog::testdb::each() {
            a_commit_needs_a_live_reservation_and_collectors_spare_live_writers_on(&db);
        }
    }

    fn a_commit_needs_a_live_reservation_and_collectors_spare_live_writers_on(
        db: &crate::catalog::testdb::TestDb,
    ) {
        let writer = db.open();
        let collector = db.open(); // another process
        let team = TeamId::from(writer.create_team("t").unwrap().as_str());

        let err = writer.commit_files(&team, &[file("unreserved")], 1);
        assert!(matches!(err, Err(CatalogError::Reclaimed(_))), "{err:?}");
        assert!(
            writer.snapshot(&team, "x").unwrap().is_none(),
            "nothing committed"
        );

        writer.reserve_objects(&["a".into(), "b".into()]).unwrap();
        let keep = collector.paths_to_keep(now_ms() - 60_000).unwrap();
        assert!(
            keep.contains("a") && keep.contains("b"),
            "fresh reservations are kept"
        );
        // The writer is silent past the grace: its reservations are dropped...
        let keep = collector.paths_to_keep(now_ms() + 1).unwrap();
        assert!(!keep.contains("a"));
        // ...and its commit then fails as a whole instead of naming a deleted object.
        let err = writer.commit_files(&team, &[file("a")], 1);
        assert!(matches!(err, Err(CatalogError::Reclaimed(_))), "{err:?}");
        assert_eq!(writer.watermark(&team).unwrap(), 0);

        // A collector never drops its own process's reservations.
        writer.reserve_objects(&["c".into()]).unwrap();
        assert!(writer.paths_to_keep(now_ms() + 1).unwrap().contains("c"));
        // A heartbeat keeps another writer's reservations alive.
        let before = now_ms() - 1;
        assert_eq!(writer.heartbeat().unwrap(), 1);
        assert!(collector.paths_to_keep(before).unwrap().contains("c"));
        writer.commit_files(&team, &[file("c")], 3).unwrap();
        let keep = collector.paths_to_keep(now_ms() + 1).unwrap();
        assert!(keep.contains("c"), "committed paths are always kept");
        assert_eq!(
            writer.heartbeat().unwrap(),
            0,
            "the reservation was consumed"
        );
    }
}
