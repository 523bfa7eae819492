//! Resolves a download request against the catalog: the element (404 unless it is the key's
//! team's), the snapshot of its source table, the output columns and the row limit.

use crate::catalog::{Catalog, DataFile, TeamId};
use crate::error::ApiError;
use crate::warehouse::naming::STANDARD_COLUMNS;
use crate::warehouse::schema::{Column, ColumnType, TableSchema};

use super::request::DownloadRequest;

/// What to read and how to shape it.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Output columns, in order, with their current types.
    pub columns: TableSchema,
    /// Snapshot of the table's files, in commit order.
    pub files: Vec<DataFile>,
    /// Most rows to return.
    pub limit: Option<usize>,
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

/// Builds the plan, or the client error that explains why not.
pub fn plan(catalog: &Catalog, team: &TeamId, req: &DownloadRequest) -> Result<Plan, ApiError> {
    let internal = |e: crate::catalog::CatalogError| {
        tracing::error!(error = %e, "catalog read failed during download");
        ApiError::internal()
    };
    let element = catalog
        .element_for_team(team, &req.canvas_id, &req.element_id)
        .map_err(internal)?
        .ok_or_else(ApiError::not_found)?;
    let snapshot = catalog.snapshot(team, &element.source).map_err(internal)?;
    let (schema, files) = match snapshot {
        Some(s) => (s.schema, s.files),
        None if element.source == "tracks" => {
            let columns = ["id", "event", "event_text", "timestamp", "received_at"]
                .iter()
                .map(|n| Column {
                    name: n.to_string(),
                    ty: standard_type(n).expect("standard"),
                })
                .collect();
            (TableSchema { columns }, Vec::new())
        }
        None => (TableSchema::default(), Vec::new()),
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
    let columns = match &req.columns {
        None => element_columns,
        Some(wanted) => {
            let mut out = Vec::with_capacity(wanted.len());
            for name in wanted {
                let Some(col) = element_columns.iter().find(|c| &c.name == name) else {
                    return Err(ApiError::bad_request(
                        "unknown_column",
                        format!("column {name:?} is not a column of this element"),
                    )
                    .field("columns"));
                };
                if out.iter().any(|c: &Column| &c.name == name) {
                    return Err(ApiError::bad_request(
                        "duplicate_column",
                        format!("column {name:?} is listed twice"),
                    )
                    .field("columns"));
                }
                out.push(col.clone());
            }
            out
        }
    };
    let limit = match (element.limit, req.limit) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    Ok(Plan {
        columns: TableSchema { columns },
        files,
        limit: limit.map(|l| l.min(usize::MAX as u64) as usize),
    })
}
