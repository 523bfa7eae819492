//! What a team's users see of their workspace: canvases and their table and SQL elements (listed,
//! renamed, deleted — always scoped to one team, so another team's id reads as missing) and the
//! warehouse tables with their sizes.

use super::db::{DbResult, OptionalExtension, Row, params};
use serde::Serialize;

use super::{Catalog, CatalogError, Result};
use crate::model::TeamId;

/// A canvas row.
#[derive(Debug, Clone, Serialize)]
pub struct CanvasRow {
    /// `cv_…`
    pub id: String,
    /// Display name.
    pub name: String,
    /// ms since epoch.
    pub created_at: i64,
}

/// An element row.
#[derive(Debug, Clone, Serialize)]
pub struct ElementRow {
    /// `el_…`
    pub id: String,
    /// Its canvas.
    pub canvas_id: String,
    /// Display name.
    pub name: Option<String>,
    /// `table` (one warehouse table) or `sql` (a query, SPEC §3.4).
    pub kind: String,
    /// Source warehouse table (empty for an SQL element).
    pub source: String,
    /// An SQL element's query.
    pub sql: Option<String>,
    /// An SQL element's output columns as found when it was created: `[{name, type}]`.
    pub schema: Option<serde_json::Value>,
    /// Ordered column subset.
    pub columns: Option<Vec<String>>,
    /// Filter list.
    pub filters: Option<serde_json::Value>,
    /// Row limit.
    pub limit: Option<u64>,
    /// ms since epoch.
    pub created_at: i64,
    /// Downloads include rows not yet committed unless they ask otherwise (SPEC §3.5).
    pub fresh: bool,
}

/// A warehouse table's size.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TableStats {
    /// Rows in live files.
    pub rows: u64,
    /// Live files.
    pub files: u64,
    /// Bytes of live files.
    pub bytes: u64,
    /// When the newest live file was committed (ms), i.e. when data last arrived, to within a
    /// flush interval.
    pub last_received_at: Option<i64>,
}

fn element_row(r: &Row<'_>) -> DbResult<ElementRow> {
    let json = |i: usize| -> DbResult<Option<String>> { r.get(i) };
    Ok(ElementRow {
        id: r.get(0)?,
        canvas_id: r.get(1)?,
        name: r.get(2)?,
        source: r.get(3)?,
        columns: json(4)?.and_then(|s| serde_json::from_str(&s).ok()),
        filters: json(5)?.and_then(|s| serde_json::from_str(&s).ok()),
        limit: r.get::<Option<i64>>(6)?.map(|l| l.max(0) as u64),
        created_at: r.get(7)?,
        kind: r.get(8)?,
        sql: r.get(9)?,
        schema: json(10)?.and_then(|s| serde_json::from_str(&s).ok()),
        fresh: r.get::<i64>(11)? != 0,
    })
}

const ELEMENT_COLUMNS: &str = "e.id, e.canvas_id, e.name, e.source, e.columns, e.filters, \
     e.row_limit, e.created_at, e.kind, e.query, e.query_schema, e.fresh";

impl Catalog {
    /// The team's canvases, oldest first.
    pub fn list_canvases(&self, team_id: &str) -> Result<Vec<CanvasRow>> {
        self.with(|c| {
            let mut st = c.prepare(
                "SELECT id, name, created_at FROM canvases WHERE team_id = ?1 ORDER BY created_at, id",
            )?;
            let rows = st.query_map([team_id], |r| {
                Ok(CanvasRow {
                    id: r.get(0)?,
                    name: r.get(1)?,
                    created_at: r.get(2)?,
                })
            })?;
            Ok(rows.collect::<DbResult<_>>()?)
        })
    }

    /// One canvas of the team.
    pub fn canvas(&self, team_id: &str, id: &str) -> Result<CanvasRow> {
        self.with(|c| {
            c.query_row(
                "SELECT id, name, created_at FROM canvases WHERE id = ?1 AND team_id = ?2",
                [id, team_id],
                |r| {
                    Ok(CanvasRow {
                        id: r.get(0)?,
                        name: r.get(1)?,
                        created_at: r.get(2)?,
                    })
                },
            )
            .optional()?
            .ok_or_else(|| CatalogError::NotFound(format!("no canvas {id:?}")))
        })
    }

    /// Renames a canvas of the team.
    pub fn rename_canvas(&self, team_id: &str, id: &str, name: &str) -> Result<()> {
        self.with(|c| {
            let n = c.execute(
                "UPDATE canvases SET name = ?1 WHERE id = ?2 AND team_id = ?3",
                params![name, id, team_id],
            )?;
            if n == 0 {
                return Err(CatalogError::NotFound(format!("no canvas {id:?}")));
            }
            Ok(())
        })
    }

    /// Deletes a canvas of the team with its elements (their share URLs stop working).
    pub fn delete_canvas(&self, team_id: &str, id: &str) -> Result<()> {
        self.with(|c| {
            let tx = c.transaction()?;
            let mine: bool = tx.query_row(
                "SELECT EXISTS (SELECT 1 FROM canvases WHERE id = ?1 AND team_id = ?2)",
                [id, team_id],
                |r| r.get(0),
            )?;
            if !mine {
                return Err(CatalogError::NotFound(format!("no canvas {id:?}")));
            }
            tx.execute("DELETE FROM elements WHERE canvas_id = ?1", [id])?;
            tx.execute("DELETE FROM canvases WHERE id = ?1", [id])?;
            tx.commit()?;
            Ok(())
        })
    }

    /// The elements of the team's canvases (of one canvas when given), oldest first.
    pub fn list_elements(&self, team_id: &str, canvas: Option<&str>) -> Result<Vec<ElementRow>> {
        self.with(|c| {
            let mut st = c.prepare(&format!(
                "SELECT {ELEMENT_COLUMNS} FROM elements e JOIN canvases cv ON cv.id = e.canvas_id
                 WHERE cv.team_id = ?1 AND (CAST(?2 AS TEXT) IS NULL OR cv.id = ?2) ORDER BY e.created_at, e.id"
            ))?;
            let rows = st.query_map(params![team_id, canvas], element_row)?;
            Ok(rows.collect::<DbResult<_>>()?)
        })
    }

    /// One element of the team.
    pub fn element_row(&self, team_id: &str, id: &str) -> Result<ElementRow> {
        self.with(|c| {
            c.query_row(
                &format!(
                    "SELECT {ELEMENT_COLUMNS} FROM elements e JOIN canvases cv ON cv.id = e.canvas_id
                     WHERE e.id = ?1 AND cv.team_id = ?2"
                ),
                [id, team_id],
                element_row,
            )
            .optional()?
            .ok_or_else(|| CatalogError::NotFound(format!("no element {id:?}")))
        })
    }

    /// The team a canvas belongs to, if the canvas exists (the operator's CLI names canvases
    /// without their team).
    pub fn canvas_team(&self, canvas: &str) -> Result<Option<String>> {
        self.with(|c| {
            Ok(c.query_row(
                "SELECT team_id FROM canvases WHERE id = ?1",
                [canvas],
                |r| r.get(0),
            )
            .optional()?)
        })
    }

    /// Deletes an element of the team.
    pub fn delete_element(&self, team_id: &str, id: &str) -> Result<()> {
        self.with(|c| {
            let n = c.execute(
                "DELETE FROM elements WHERE id = ?1
                 AND canvas_id IN (SELECT id FROM canvases WHERE team_id = ?2)",
                [id, team_id],
            )?;
            if n == 0 {
                return Err(CatalogError::NotFound(format!("no element {id:?}")));
            }
            Ok(())
        })
    }

    /// Sizes of the team's tables (live files only), by table name.
    pub fn table_stats(
        &self,
        team: &TeamId,
    ) -> Result<std::collections::HashMap<String, TableStats>> {
        self.with(|c| {
            let mut st = c.prepare(
                "SELECT table_name, CAST(COALESCE(SUM(rows), 0) AS BIGINT), COUNT(*),
                        CAST(COALESCE(SUM(bytes), 0) AS BIGINT), MAX(created_at)
                 FROM data_files WHERE team_id = ?1 AND retired_at IS NULL GROUP BY table_name",
            )?;
            let rows = st.query_map([team.as_str()], |r| {
                Ok((
                    r.get::<String>(0)?,
                    TableStats {
                        rows: r.get::<i64>(1)?.max(0) as u64,
                        files: r.get::<i64>(2)?.max(0) as u64,
                        bytes: r.get::<i64>(3)?.max(0) as u64,
                        last_received_at: r.get(4)?,
                    },
                ))
            })?;
            Ok(rows.collect::<DbResult<_>>()?)
        })
    }
}
