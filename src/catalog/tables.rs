//! Warehouse tables in the catalog: column schemas (widening only, with type history) and the
//! committed data files, whose id order is the table's row order.

use std::collections::HashMap;

use super::db::{Conn, OptionalExtension, params};

use super::{Catalog, Result, now_ms};
use crate::model::TeamId;
use crate::model::schema::{Column, ColumnType, TableSchema};

/// A data file about to be committed.
#[derive(Debug, Clone)]
pub struct NewDataFile {
    /// Warehouse table.
    pub table: String,
    /// Object path.
    pub path: String,
    /// `date=YYYY-MM-DD`.
    pub partition: String,
    /// Rows in the file.
    pub rows: u64,
    /// Size of the object.
    pub bytes: u64,
    /// Smallest `timestamp` (µs).
    pub min_ts: Option<i64>,
    /// Largest `timestamp` (µs).
    pub max_ts: Option<i64>,
    /// The file's own columns and types.
    pub schema: TableSchema,
}

/// A committed data file as readers need it.
#[derive(Debug, Clone)]
pub struct DataFile {
    /// Catalog id (commit order).
    pub id: i64,
    /// Object path.
    pub path: String,
    /// Rows.
    pub rows: u64,
    /// Object size (saves a HEAD request on open).
    pub bytes: u64,
}

/// One consistent view of a table: its schema and files at one moment.
#[derive(Debug, Clone)]
pub struct TableSnapshot {
    /// Current (widest) schema.
    pub schema: TableSchema,
    /// Live files in row order.
    pub files: Vec<DataFile>,
    /// Identifies this snapshot: the highest file id then, and when (ms).
    pub as_of: SnapshotId,
    /// The team's watermark in this node's WAL, read in the same transaction as the files:
    /// every record of this WAL up to it is in them (fresh reads, SPEC §3.5).
    pub wal_watermark: u64,
}

/// Which files of one table a snapshot saw: those with id ≤ `max_file_id` not yet retired at
/// `at_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SnapshotId {
    /// Highest id of the table's files committed at the time.
    pub max_file_id: i64,
    /// Time of the snapshot, ms since the epoch.
    pub at_ms: i64,
}

impl Catalog {
    /// Every table of a team with its current schema.
    pub fn team_schemas(&self, team: &TeamId) -> Result<HashMap<String, TableSchema>> {
        self.with(|c| {
            let mut st = c.prepare(
                "SELECT table_name, name, type FROM wh_columns WHERE team_id = ?1 ORDER BY table_name, position",
            )?;
            let mut out: HashMap<String, TableSchema> = HashMap::new();
            let rows = st.query_map([team.as_str()], |r| {
                Ok((r.get::<String>(0)?, r.get::<String>(1)?, r.get::<String>(2)?))
            })?;
            for row in rows {
                let (table, name, ty) = row?;
                let ty = ColumnType::parse(&ty).unwrap_or(ColumnType::String);
                out.entry(table).or_default().columns.push(Column { name, ty });
            }
            Ok(out)
        })
    }

    /// Commits data files of one team and its new WAL watermark in one transaction: tables
    /// are created, schemas widened, files recorded, watermark raised (never lowered). Either all
    /// of it becomes visible or none. Every file must be reserved by this writer
    /// ([`Catalog::reserve_objects`]); if one is not, nothing is committed and the error is
    /// [`super::CatalogError::Reclaimed`]. Commits of other teams run beside it (PostgreSQL);
    /// the team's own commits take turns, so its file ids grow in commit order.
    pub fn commit_files(&self, team: &TeamId, files: &[NewDataFile], watermark: u64) -> Result<()> {
        self.with(|c| {
            let tx = c.team_write_transaction(team.as_str())?;
            let now = now_ms();
            super::watermarks::raise_tx(&tx, self.wal_key(), team, watermark)?;
            for f in files {
                super::pending::consume(&tx, &self.owner, &f.path)?;
                let version = merge_schema_tx(&tx, team, &f.table, &f.schema, now)?;
                let id: i64 = tx.query_row(
                    "INSERT INTO data_files (team_id, table_name, path, partition, rows, bytes, min_ts, max_ts,
                                             schema_version, wal_watermark, created_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) RETURNING id",
                    params![
                        team.as_str(),
                        f.table,
                        f.path,
                        f.partition,
                        f.rows as i64,
                        f.bytes as i64,
                        f.min_ts,
                        f.max_ts,
                        version,
                        watermark as i64,
                        now
                    ],
                    |r| r.get(0),
                )?;
                tx.execute("UPDATE data_files SET sort_key = id WHERE id = ?1", [id])?;
            }
            tx.commit()?;
            Ok(())
        })
    }

    /// The table's schema and live files, read in one transaction; `None` if it has never
    /// received data. With `as_of`, the files that snapshot saw — or [`super::CatalogError::Refused`]
    /// if one of them has been deleted since (the snapshot is gone).
    pub fn snapshot(&self, team: &TeamId, table: &str) -> Result<Option<TableSnapshot>> {
        self.snapshot_as_of(team, table, None)
    }

    /// See [`Catalog::snapshot`].
    pub fn snapshot_as_of(
        &self,
        team: &TeamId,
        table: &str,
        as_of: Option<SnapshotId>,
    ) -> Result<Option<TableSnapshot>> {
        self.with(|c| {
            let tx = c.read_transaction()?;
            let exists: Option<i64> = tx
                .query_row(
                    "SELECT schema_version FROM wh_tables WHERE team_id = ?1 AND name = ?2",
                    [team.as_str(), table],
                    |r| r.get(0),
                )
                .optional()?;
            if exists.is_none() {
                return Ok(None);
            }
            let schema = read_schema(&tx, team, table)?;
            let wal_watermark = super::watermarks::read(&tx, self.wal_key(), team)?;
            let as_of = match as_of {
                Some(a) => a,
                // The table's own highest id, not the catalog's: another team's commit may hold
                // a lower id still in flight (ids are drawn before commit), while this table's
                // next commit waits for the team's lock and so draws a higher one.
                None => SnapshotId {
                    max_file_id: tx.query_row(
                        "SELECT COALESCE(MAX(id), 0) FROM data_files WHERE team_id = ?1 AND table_name = ?2",
                        [team.as_str(), table],
                        |r| r.get(0),
                    )?,
                    at_ms: now_ms(),
                },
            };
            let mut gone = false;
            let files = {
                let mut st = tx.prepare_cached(
                    "SELECT id, path, rows, bytes, deleted_at FROM data_files
                     WHERE team_id = ?1 AND table_name = ?2 AND id <= ?3 AND (retired_at IS NULL OR retired_at > ?4)
                     ORDER BY sort_key, id",
                )?;
                let rows = st.query_map(params![team.as_str(), table, as_of.max_file_id, as_of.at_ms], |r| {
                    Ok((
                        DataFile {
                            id: r.get(0)?,
                            path: r.get(1)?,
                            rows: r.get::<i64>(2)? as u64,
                            bytes: r.get::<i64>(3)? as u64,
                        },
                        r.get::<Option<i64>>(4)?.is_some(),
                    ))
                })?;
                let mut files = Vec::new();
                for row in rows {
                    let (f, deleted) = row?;
                    gone |= deleted;
                    files.push(f);
                }
                files
            };
            tx.commit()?;
            if gone {
                return Err(super::CatalogError::Refused(
                    "the snapshot this cursor belongs to is gone (its files were compacted and deleted); start again without a cursor".into(),
                ));
            }
            Ok(Some(TableSnapshot {
                schema,
                files,
                as_of,
                wal_watermark,
            }))
        })
    }
}

fn read_schema(tx: &Conn, team: &TeamId, table: &str) -> Result<TableSchema> {
    let mut st = tx.prepare_cached(
        "SELECT name, type FROM wh_columns WHERE team_id = ?1 AND table_name = ?2 ORDER BY position",
    )?;
    let rows = st.query_map([team.as_str(), table], |r| {
        Ok((r.get::<String>(0)?, r.get::<String>(1)?))
    })?;
    let mut schema = TableSchema::default();
    for row in rows {
        let (name, ty) = row?;
        let ty = ColumnType::parse(&ty).unwrap_or(ColumnType::String);
        schema.columns.push(Column { name, ty });
    }
    Ok(schema)
}

/// Widens the stored schema with `file`'s columns; returns the table's schema version.
pub(super) fn merge_schema_tx(
    tx: &Conn,
    team: &TeamId,
    table: &str,
    file: &TableSchema,
    now: i64,
) -> Result<i64> {
    tx.execute(
        "INSERT INTO wh_tables (team_id, name, created_at) VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING",
        params![team.as_str(), table, now],
    )?;
    let version: i64 = tx.query_row(
        "SELECT schema_version FROM wh_tables WHERE team_id = ?1 AND name = ?2",
        [team.as_str(), table],
        |r| r.get(0),
    )?;
    let current = read_schema(tx, team, table)?;
    let mut merged = current.clone();
    if !merged.merge(file) {
        return Ok(version);
    }
    let version = if current.columns.is_empty() {
        version
    } else {
        version + 1
    };
    for (pos, col) in merged.columns.iter().enumerate() {
        let before = current.get(&col.name).map(|c| c.ty);
        if before == Some(col.ty) {
            continue;
        }
        tx.execute(
            "INSERT INTO wh_columns (team_id, table_name, position, name, type) VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT(team_id, table_name, name) DO UPDATE SET type = excluded.type",
            params![team.as_str(), table, pos as i64, col.name, col.ty.as_str()],
        )?;
        tx.execute(
            "INSERT INTO wh_column_history (team_id, table_name, name, type, schema_version, changed_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![team.as_str(), table, col.name, col.ty.as_str(), version, now],
        )?;
    }
    tx.execute(
        "UPDATE wh_tables SET schema_version = ?1 WHERE team_id = ?2 AND name = ?3",
        params![version, team.as_str(), table],
    )?;
    Ok(version)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ColumnType::*;

    fn file(table: &str, path: &str, cols: &[(&str, ColumnType)]) -> NewDataFile {
        NewDataFile {
            table: table.into(),
            path: path.into(),
            partition: "date=2024-01-01".into(),
            rows: 1,
            bytes: 10,
            min_ts: None,
            max_ts: None,
            schema: TableSchema {
                columns: cols
                    .iter()
                    .map(|(n, t)| Column {
                        name: n.to_string(),
                        ty: *t,
                    })
                    .collect(),
            },
        }
    }

    #[test]
    fn commits_widen_the_schema_and_keep_file_order() {
        for db in crate::catalog::testdb::each() {
            commits_widen_the_schema_and_keep_file_order_on(&db);
        }
    }

    fn commits_widen_the_schema_and_keep_file_order_on(db: &crate::catalog::testdb::TestDb) {
        let cat = db.open();
        let team_id = cat.create_team("t").unwrap();
        let team = TeamId::from(team_id.as_str());
        assert!(cat.snapshot(&team, "x").unwrap().is_none());
        cat.reserve_objects(&["p1".into(), "p2".into(), "p3".into()])
            .unwrap();
        cat.commit_files(&team, &[file("x", "p1", &[("a", Int64)])], 5)
            .unwrap();
        cat.commit_files(
            &team,
            &[file("x", "p2", &[("b", Boolean), ("a", Float64)])],
            9,
        )
        .unwrap();
        cat.commit_files(&team, &[file("x", "p3", &[("a", String)])], 7)
            .unwrap();
        assert_eq!(
            cat.watermark(&team).unwrap(),
            9,
            "the watermark never goes down"
        );
        let snap = cat.snapshot(&team, "x").unwrap().unwrap();
        let cols: Vec<_> = snap
            .schema
            .columns
            .iter()
            .map(|c| (c.name.as_str(), c.ty))
            .collect();
        assert_eq!(cols, vec![("a", String), ("b", Boolean)]);
        let paths: Vec<_> = snap.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, vec!["p1", "p2", "p3"]);
        let schemas = cat.team_schemas(&team).unwrap();
        assert_eq!(schemas["x"].columns.len(), 2);
    }
}
