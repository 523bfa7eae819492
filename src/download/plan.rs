//! Resolves a download request against the catalog: the element (404 unless it is the key's
//! team's) and, for a table element, the snapshot of its source table (a fresh one, or the cursor's), the output columns,
//! the filters (the element's, then the request's), the row limit and the start position.

use arrow::record_batch::RecordBatch;

use crate::catalog::{Catalog, CatalogError, DataFile, Element, SnapshotId};
use crate::model::Invalid;
use crate::model::TeamId;
use crate::model::fresh::LentRows;
use crate::model::naming::STANDARD_COLUMNS;
use crate::model::schema::{Column, ColumnType, TableSchema};
use crate::warehouse::reader::Position;

use super::cursor;
use super::error::DownloadError;
use super::filter;
use super::request::DownloadRequest;
use crate::model::filter::Filter;

/// What to read and how to shape it.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Output columns, in order, with their current types.
    pub columns: TableSchema,
    /// Every column of the source table, in table order, with its current type.
    pub table: TableSchema,
    /// Output columns plus filter-only columns.
    pub read: TableSchema,
    /// Element filters then request filters, ANDed.
    pub filters: Vec<Filter>,
    /// Snapshot of the table's files, in row order.
    pub files: Vec<DataFile>,
    /// A fresh read's rows not yet in those files, read after them (SPEC §3.5).
    pub buffered: Vec<RecordBatch>,
    /// Which snapshot that is (for cursors; `None` for a fresh read, which hands out none).
    pub snapshot: Option<SnapshotId>,
    /// Most rows to return.
    pub limit: Option<usize>,
    /// Where to start (from a cursor).
    pub start: Option<Position>,
    /// The query's fingerprint (for cursors).
    pub fingerprint: String,
}

/// The requested subset of `available` in the requested order (all of them when none is
/// requested): 400 for an unknown or repeated column.
pub fn select(available: &[Column], wanted: Option<&[String]>) -> Result<Vec<Column>, Invalid> {
    let Some(wanted) = wanted else {
        return Ok(available.to_vec());
    };
    let mut out = Vec::with_capacity(wanted.len());
    for name in wanted {
        let Some(col) = available.iter().find(|c| &c.name == name) else {
            return Err(Invalid::new(
                "unknown_column",
                format!("column {name:?} is not a column of this element"),
            )
            .field("columns"));
        };
        if out.iter().any(|c: &Column| &c.name == name) {
            return Err(Invalid::new(
                "duplicate_column",
                format!("column {name:?} is listed twice"),
            )
            .field("columns"));
        }
        out.push(col.clone());
    }
    Ok(out)
}

/// Most rows a download sends: the element's limit and the request's, the smaller of the two.
pub fn row_limit(element: &Element, req: &DownloadRequest) -> Option<usize> {
    let limit = match (element.limit, req.limit) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    limit.map(|l| l.min(usize::MAX as u64) as usize)
}

/// The type of a standard column, which is known before any data arrives.
fn standard_type(name: &str) -> Option<ColumnType> {
    match name {
        "timestamp" | "received_at" | "original_timestamp" | "sent_at" => {
            Some(ColumnType::Timestamp)
        }
        n if STANDARD_COLUMNS.contains(&n) => Some(ColumnType::String),
        _ => None,
    }
}

/// The requested element, or 404 unless it is the team's.
pub fn element(
    catalog: &Catalog,
    team: &TeamId,
    req: &DownloadRequest,
) -> Result<Element, DownloadError> {
    catalog
        .element_for_team(team, &req.canvas_id, &req.element_id)
        .map_err(DownloadError::Catalog)?
        .ok_or(DownloadError::NotFound)
}

/// Builds the plan of a table element, or the client error that explains why not. `lent`:
/// a fresh read's rows of the element's table, lent before this snapshot is taken; those
/// the snapshot's files already hold are dropped, and their columns widen the table's.
pub fn plan(
    catalog: &Catalog,
    team: &TeamId,
    element: Element,
    req: &DownloadRequest,
    lent: Option<&LentRows>,
) -> Result<Plan, DownloadError> {
    let fingerprint = cursor::fingerprint(&element.id, &req.columns, &req.filters);
    let resume = req
        .cursor
        .as_deref()
        .map(|c| cursor::decode(c, &fingerprint))
        .transpose()?;
    let snapshot =
        match catalog.snapshot_as_of(team, &element.source, resume.as_ref().map(|c| c.snap)) {
            Ok(s) => s,
            Err(CatalogError::Refused(msg)) => return Err(DownloadError::CursorExpired(msg)),
            Err(e) => return Err(DownloadError::Catalog(e)),
        };
    let (mut schema, files, snapshot, watermark) = match snapshot {
        Some(s) => (s.schema, s.files, Some(s.as_of), s.wal_watermark),
        None if element.source == "tracks" => {
            let columns = ["id", "event", "event_text", "timestamp", "received_at"]
                .iter()
                .map(|n| Column {
                    name: n.to_string(),
                    ty: standard_type(n).expect("standard"),
                })
                .collect();
            (TableSchema { columns }, Vec::new(), None, 0)
        }
        None => (TableSchema::default(), Vec::new(), None, 0),
    };
    let (buffered, snapshot) = match lent {
        Some(rows) => {
            schema.merge(&rows.schema());
            (rows.uncommitted(watermark), None)
        }
        None => (Vec::new(), snapshot),
    };
    let typed = |name: &str| Column {
        name: name.to_string(),
        ty: schema
            .get(name)
            .map(|c| c.ty)
            .or_else(|| standard_type(name))
            .unwrap_or(ColumnType::String),
    };
    let element_columns: Vec<Column> = match &element.columns {
        Some(cols) => cols.iter().map(|c| typed(c)).collect(),
        None => schema.columns.clone(),
    };
    let columns = select(&element_columns, req.columns.as_deref())?;
    let mut filters = match &element.filters {
        // The element's own filters may name any column of its source table.
        Some(f) => filter::parse(f, &schema.columns, "element.filters")?,
        None => Vec::new(),
    };
    if let Some(f) = &req.filters {
        filters.extend(filter::parse(f, &element_columns, "filters")?);
    }
    let mut read = columns.clone();
    for f in &filters {
        if !read.iter().any(|c| c.name == f.column) {
            read.push(Column {
                name: f.column.clone(),
                ty: f.ty,
            });
        }
    }
    let limit = row_limit(&element, req);
    Ok(Plan {
        columns: TableSchema { columns },
        table: schema,
        read: TableSchema { columns: read },
        filters,
        files,
        buffered,
        snapshot,
        limit,
        start: resume.map(|c| c.pos),
        fingerprint,
    })
}
