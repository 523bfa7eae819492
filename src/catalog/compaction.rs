//! Catalog side of compaction: finding tables with runs of small files, swapping a run for its
//! merged file in one transaction, and tracking retired objects until they are deleted.

use super::db::{DbResult, OptionalExtension, params};

use super::tables::merge_schema_tx;
use super::{Catalog, NewDataFile, Result, now_ms};
use crate::model::TeamId;

/// A live file as compaction sees it.
#[derive(Debug, Clone)]
pub struct LiveFile {
    /// Catalog id.
    pub id: i64,
    /// Object path.
    pub path: String,
    /// `date=…`.
    pub partition: String,
    /// Rows.
    pub rows: u64,
    /// Object size.
    pub bytes: u64,
    /// Row-order key.
    pub sort_key: i64,
    /// WAL watermark it was committed with.
    pub watermark: u64,
}

impl Catalog {
    /// Tables with at least `min_files` live files smaller than `small_bytes`.
    pub fn tables_with_small_files(
        &self,
        min_files: usize,
        small_bytes: u64,
    ) -> Result<Vec<(TeamId, String)>> {
        self.with(|c| {
            let mut st = c.prepare(
                "SELECT team_id, table_name FROM data_files WHERE retired_at IS NULL AND bytes < ?1
                 GROUP BY team_id, table_name HAVING COUNT(*) >= ?2",
            )?;
            let rows = st.query_map(params![small_bytes as i64, min_files as i64], |r| {
                Ok((TeamId(r.get::<String>(0)?.into()), r.get::<String>(1)?))
            })?;
            Ok(rows.collect::<DbResult<_>>()?)
        })
    }

    /// A table's live files in row order.
    pub fn live_files(&self, team: &TeamId, table: &str) -> Result<Vec<LiveFile>> {
        self.with(|c| {
            let mut st = c.prepare(
                "SELECT id, path, partition, rows, bytes, sort_key, COALESCE(wal_watermark, 0) FROM data_files
                 WHERE team_id = ?1 AND table_name = ?2 AND retired_at IS NULL ORDER BY sort_key, id",
            )?;
            let rows = st.query_map([team.as_str(), table], |r| {
                Ok(LiveFile {
                    id: r.get(0)?,
                    path: r.get(1)?,
                    partition: r.get(2)?,
                    rows: r.get::<i64>(3)? as u64,
                    bytes: r.get::<i64>(4)? as u64,
                    sort_key: r.get(5)?,
                    watermark: r.get::<i64>(6)?.max(0) as u64,
                })
            })?;
            Ok(rows.collect::<DbResult<_>>()?)
        })
    }

    /// Whether every file of `files` is still live (not replaced by another compaction).
    pub fn all_live(&self, files: &[LiveFile]) -> Result<bool> {
        self.with(|c| {
            let tx = c.read_transaction()?;
            for f in files {
                let live: Option<i64> = tx
                    .query_row(
                        "SELECT 1 FROM data_files WHERE id = ?1 AND retired_at IS NULL",
                        [f.id],
                        |r| r.get(0),
                    )
                    .optional()?;
                if live.is_none() {
                    return Ok(false);
                }
            }
            Ok(true)
        })
    }

    /// Replaces the files `old` (all still live) by `new`, placed where the first of them was.
    /// Returns `false` (and changes nothing) if any of them is no longer live; fails with
    /// [`super::CatalogError::Reclaimed`] if `new` is not reserved by this writer.
    pub fn replace_files(
        &self,
        team: &TeamId,
        old: &[LiveFile],
        new: &NewDataFile,
    ) -> Result<bool> {
        self.with(|c| {
            let tx = c.team_write_transaction(team.as_str())?;
            let now = now_ms();
            for f in old {
                let live: Option<i64> = tx
                    .query_row("SELECT id FROM data_files WHERE id = ?1 AND retired_at IS NULL", [f.id], |r| r.get(0))
                    .optional()?;
                if live.is_none() {
                    return Ok(false);
                }
            }
            super::pending::consume(&tx, &self.owner, &new.path)?;
            let version = merge_schema_tx(&tx, team, &new.table, &new.schema, now)?;
            let sort_key = old.first().map_or(0, |f| f.sort_key);
            let watermark = old.iter().map(|f| f.watermark).max().unwrap_or(0);
            tx.execute(
                "INSERT INTO data_files (team_id, table_name, path, partition, rows, bytes, min_ts, max_ts,
                                         schema_version, wal_watermark, created_at, sort_key)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
                params![
                    team.as_str(),
                    new.table,
                    new.path,
                    new.partition,
                    new.rows as i64,
                    new.bytes as i64,
                    new.min_ts,
                    new.max_ts,
                    version,
                    watermark as i64,
                    now,
                    sort_key
                ],
            )?;
            for f in old {
                tx.execute("UPDATE data_files SET retired_at = ?1 WHERE id = ?2", params![now, f.id])?;
            }
            tx.commit()?;
            Ok(true)
        })
    }

    /// Retired files whose objects are not deleted yet and were retired before `cutoff_ms`.
    pub fn retired_before(&self, cutoff_ms: i64) -> Result<Vec<(i64, String)>> {
        self.with(|c| {
            let mut st = c.prepare(
                "SELECT id, path FROM data_files WHERE retired_at IS NOT NULL AND retired_at < ?1 AND deleted_at IS NULL",
            )?;
            let rows = st.query_map([cutoff_ms], |r| Ok((r.get(0)?, r.get(1)?)))?;
            Ok(rows.collect::<DbResult<_>>()?)
        })
    }

    /// Records that a retired file's object is gone.
    pub fn mark_deleted(&self, id: i64) -> Result<()> {
        self.with(|c| {
            c.execute(
                "UPDATE data_files SET deleted_at = ?1 WHERE id = ?2",
                params![now_ms(), id],
            )?;
            Ok(())
        })
    }
}
